"""Low-precision linear layers (opcore/tile.h's oc_tile_linear) called from
PyTorch through bench/kernels/lowp_linear.c: GGML's Q8_0 / Q4_0 bytes as
ggml's reference quantisers make them, each weight type against torch's
float product, the same bits on every instruction set (each in a process
of its own, OC_TILE_ISA forcing it), and bad input."""
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNELS = os.path.join(REPO, "bench", "kernels")
W = {"float32": 0, "bfloat16": 1, "float16": 2, "q8_0": 3, "q4_0": 4, "int8": 5}


def load(build_dir):
    from opcore import custom_op

    custom_op.loaded_libraries().get("lowp") or custom_op.load(
        name="lowp", compute_srcs=[os.path.join(KERNELS, "lowp_linear.c")],
        shape_srcs=[os.path.join(KERNELS, "lowp_shape.c")], build_directory=str(build_dir))
    return torch.ops.lowp


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    import opcore.torch  # noqa: F401
    return load(tmp_path_factory.mktemp("lowp"))


def ggml_q8_0(x):
    """ggml's quantize_row_q8_0 reference (rounding half to even), rows of
    blocks as bytes."""
    n, k = x.shape
    b = x.reshape(n, k // 32, 32).astype(np.float32)
    amax = np.abs(b).max(-1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.clip(np.rint(b * idv[..., None]), -127, 127).astype(np.int8)
    out = np.empty((n, k // 32, 34), np.uint8)
    out[..., :2] = d.astype(np.float16).view(np.uint8).reshape(n, k // 32, 2)
    out[..., 2:] = q.view(np.uint8)
    return out.reshape(n, -1)


def ggml_q4_0(x):
    """ggml's quantize_row_q4_0 reference."""
    n, k = x.shape
    b = x.reshape(n, k // 32, 32).astype(np.float32)
    i = np.abs(b).argmax(-1)  # the first of the largest magnitude, as ggml's loop keeps
    mx = np.take_along_axis(b, i[..., None], -1)[..., 0]
    d = (mx / np.float32(-8)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = (b * idv[..., None] + np.float32(8.5)).astype(np.float32)
    q = np.minimum(15, np.trunc(v).astype(np.int8)).astype(np.uint8)
    out = np.empty((n, k // 32, 18), np.uint8)
    out[..., :2] = d.astype(np.float16).view(np.uint8).reshape(n, k // 32, 2)
    out[..., 2:] = q[..., :16] | (q[..., 16:] << 4)
    return out.reshape(n, -1)


def dequant(wq, kind, k):
    n = wq.shape[0]
    b = wq.reshape(n, k // 32, -1)
    d = b[..., :2].copy().view(np.float16).astype(np.float32)
    if kind == "q8_0":
        q = b[..., 2:].view(np.int8).astype(np.float32)
    else:
        lo, hi = (b[..., 2:] & 15).astype(np.float32) - 8, (b[..., 2:] >> 4).astype(np.float32) - 8
        q = np.concatenate([lo, hi], -1)
    return (q * d).reshape(n, k)


@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
def test_quantise_like_ggml(ops, kind):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(7, 256, generator=g)
    x[0, :32] = 0  # an all-zero block: d = 0
    got = ops.lowp_quantize(x, W[kind]).numpy()
    want = (ggml_q8_0 if kind == "q8_0" else ggml_q4_0)(x.numpy())
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["bfloat16", "float16"])
@pytest.mark.parametrize("n,k", [(8, 16), (13, 100), (135, 1100), (72, 33)])
def test_half_gemv_row_groups(ops, kind, n, k):
    """One row of x against half weights: the kernels take w's rows 8, 4 and
    1 at a time (groups, a group's tail, each core's share), k's tail in
    masked steps."""
    g = torch.Generator().manual_seed(n * k)
    w = (torch.randn(n, k, generator=g) * 0.1).to(getattr(torch, kind))
    x = torch.randn(1, k, generator=g)
    y = ops.lowp_linear(x, w, torch.zeros(1), W[kind])
    ref = F.linear(x.double(), w.double()).float()
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("n,k", [(8, 16), (37, 1100), (135, 64)])
def test_bench_read_ceiling(ops, kind, n, k):
    """lowp_widen (the bench's read ceiling of the float GEMVs): each row of
    w widened and summed, every row once, whatever the groups."""
    g = torch.Generator().manual_seed(n + k)
    w = (torch.randn(n, k, generator=g) * 0.1).to(getattr(torch, kind))
    torch.testing.assert_close(ops.lowp_widen(w), w.double().sum(1).float(), rtol=1e-5, atol=1e-5)
    # strided rows (copied first), every other row, rows of stride 0: the same sums
    assert torch.equal(ops.lowp_widen(w.t().contiguous().t()), ops.lowp_widen(w))
    assert torch.equal(ops.lowp_widen(w[::2]), ops.lowp_widen(w)[::2])
    assert torch.equal(ops.lowp_widen(w[:1].expand(3, k)), ops.lowp_widen(w[:1]).expand(3))


def test_bench_read_ceiling_bad_input(ops):
    with pytest.raises(RuntimeError, match="w must be a 2-D float16, bfloat16 or float32 tensor"):
        ops.lowp_widen(torch.zeros(4, 4, dtype=torch.float64))
    assert ops.lowp_widen(torch.ones(2, 3)).tolist() == [3.0, 3.0]


@pytest.mark.parametrize("n,k,group", [(37, 256, 32), (64, 4096, 128), (5, 64, 64)])
def test_bench_u4_widen_ceiling(ops, n, k, group):
    """lowp_widen_u4 (the bench's ceiling of the uint4 group GEMV): each
    row's dequantised weights summed, 4 rows at a time and a last 1."""
    g = torch.Generator().manual_seed(n + k)
    wq, ws, wz = ops.lowp_quantize_u4(torch.randn(n, k, generator=g), group)
    q = torch.stack([wq & 15, wq >> 4], -1).reshape(n, k).double()
    want = ((q.reshape(n, k // group, group) - wz[..., None].double()) * ws[..., None]).sum((1, 2))
    torch.testing.assert_close(ops.lowp_widen_u4(wq, ws, wz, group), want.float(), rtol=1e-4,
                               atol=1e-4)
    with pytest.raises(RuntimeError, match="w must be 2-D uint8"):
        ops.lowp_widen_u4(wq.float(), ws, wz, group)
    with pytest.raises(RuntimeError, match="zero"):
        ops.lowp_widen_u4(wq, ws, wz[:1], group)
    torch.testing.assert_close(ops.lowp_widen_u4(wq, ws, wz, group), want.float(), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_opcheck_bench_u4_widen_ceiling(ops):
    """lowp_widen_u4 under torch.library.opcheck, scale and zero requiring
    grad, every input contiguous, strided and expanded (stride 0), with
    the backward registered here: .sum().backward() gives the gradients of
    the same sum in torch, and the strided inputs the contiguous bits."""
    import opcore.torch as ot

    n, k, group = 6, 64, 32
    ng = k // group

    def ref(wq, s, z):
        q = torch.stack([wq & 15, wq >> 4], -1).reshape(wq.shape[0], k).to(s.dtype)
        return ((q.reshape(-1, ng, group) - z[..., None]) * s[..., None]).sum((1, 2))

    def backward(g, wq, s, z, group):
        q = torch.stack([wq & 15, wq >> 4], -1).reshape(wq.shape[0], k).float()
        qsum = q.reshape(-1, ng, group).sum(-1)
        return None, g[:, None] * (qsum - group * z), -g[:, None] * group * s

    ot.register_autograd("lowp::lowp_widen_u4", backward)
    g = torch.Generator().manual_seed(5)
    wq, ws, wz = ops.lowp_quantize_u4(torch.randn(n, k, generator=g), group)
    want = ops.lowp_widen_u4(wq, ws, wz, group)

    def strided(t):
        wide = torch.zeros(t.shape[0], 2 * t.shape[1], dtype=t.dtype)
        wide[:, ::2] = t
        return wide[:, ::2]

    # each layout: (the view the op gets of a leaf, the leaf a tensor is made from)
    layouts = {"contiguous": (lambda t: t, lambda t: t.clone()),
               "strided": (strided, lambda t: t.clone()),
               "expanded": (lambda t: t.expand(n, t.shape[1]), lambda t: t[:1].clone())}
    for name, (view, leaf_of) in layouts.items():
        w_in = view(leaf_of(wq))
        s_leaf, z_leaf = (leaf_of(t).requires_grad_() for t in (ws, wz))
        s_in, z_in = view(s_leaf), view(z_leaf)
        torch.library.opcheck(ops.lowp_widen_u4.default, (w_in, s_in, z_in, group))
        y = ops.lowp_widen_u4(w_in, s_in, z_in, group)
        if name != "expanded":
            assert torch.equal(y, want), name
        y.sum().backward()
        s_ref, z_ref = (t.detach().double().requires_grad_() for t in (s_leaf, z_leaf))
        ref(w_in, view(s_ref), view(z_ref)).sum().backward()
        torch.testing.assert_close(s_leaf.grad, s_ref.grad.float(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(z_leaf.grad, z_ref.grad.float(), rtol=1e-5, atol=1e-5)


def _has_avx2():
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx2" in line for line in f)
    except OSError:
        return False


@pytest.mark.parametrize("sink_len", [2, 16384])  # one share on the caller; split across cores
def test_bench_int8_mix_ceiling(ops, sink_len):
    """lowp_i8_mix (the bench's AVX2 int8 ceiling) runs every one of the m k
    n products once, whatever the split: each step's 256 products of x in
    {1, 2} and w in {-2, -1, 0, 1} add -192 to the sums, so the cores'
    totals are -0.75 m k n."""
    sink = torch.zeros(sink_len, dtype=torch.int32)
    if not _has_avx2():
        with pytest.raises(RuntimeError, match="has no AVX2"):
            ops.lowp_i8_mix(16, 64, 128, sink)
        return
    ops.lowp_i8_mix(16, 64, 128, sink)
    assert sink.sum().item() == -98304
    # its one tensor is the int32 result it writes (no gradient); a strided one is refused below
    torch.library.opcheck(ops.lowp_i8_mix.default, (16, 64, 128, sink))
    with pytest.raises(RuntimeError, match="sink must be a contiguous int32 tensor"):
        ops.lowp_i8_mix(16, 64, 128, torch.zeros(2 * sink_len, dtype=torch.int32)[::2])
    with pytest.raises(RuntimeError, match="sink must be a contiguous int32 tensor"):
        ops.lowp_i8_mix(16, 64, 128, torch.zeros(4))
    with pytest.raises(RuntimeError, match="m, k and n must be >= 0"):
        ops.lowp_i8_mix(-1, 64, 128, sink)


@pytest.mark.parametrize("m", [1, 5, 32, 48])
@pytest.mark.parametrize("kind", list(W))
def test_linear_against_torch(ops, kind, m):
    g = torch.Generator().manual_seed(m)
    n, k = 70, 256
    w = torch.randn(n, k, generator=g) * 0.1
    x = torch.randn(m, k, generator=g)
    scale = torch.zeros(1)
    if kind in ("float32", "bfloat16", "float16"):
        wt = w.to(getattr(torch, kind))
        ref, tol = F.linear(x, wt.float()), 1e-4
        if kind == "bfloat16" and m >= 32:  # AMX / AVX512-BF16 round x to bfloat16: tile.h's
            tol = 2.0**-8 + k * 2.0**-23  # bound (a norm of errors within it per element)
    elif kind == "int8":
        scale = w.abs().amax(1) / 127
        wt = torch.round(w / scale[:, None]).to(torch.int8)
        ref, tol = F.linear(x, wt.float() * scale[:, None]), 0.02
    else:
        wt = ops.lowp_quantize(w, W[kind])
        ref, tol = F.linear(x, torch.from_numpy(dequant(wt.numpy(), kind, k))), 0.02
    y = ops.lowp_linear(x, wt, scale, W[kind])
    assert y.shape == (m, n)
    err = ((y - ref).norm() / ref.norm()).item()
    assert err < tol, (kind, m, err)


CHILD = r"""
import os, sys, torch
sys.path.insert(0, {here!r})
import opcore.torch
from test_lowp import load, W
T = load({build!r})
g = torch.Generator().manual_seed(3)
w = torch.randn(67, 512, generator=g) * 0.05
outs = {{}}
for m in (1, 9, 40):
    x = torch.randn(m, 512, generator=g)
    for kind in ("q8_0", "q4_0"):
        wq = T.lowp_quantize(w, W[kind])
        outs[f"{{kind}} {{m}}"] = T.lowp_linear(x, wq, torch.zeros(1), W[kind])
        outs[f"{{kind}} packed {{m}}"] = T.lowp_linear_packed(x, T.lowp_pack_q(wq, W[kind]), 67)
        assert torch.equal(outs[f"{{kind}} packed {{m}}"], outs[f"{{kind}} {{m}}"])
    s = w.abs().amax(1) / 127
    wi = torch.round(w / s[:, None]).to(torch.int8)
    outs[f"int8 {{m}}"] = T.lowp_linear(x, wi, s, W["int8"])
    outs[f"int8 prepacked {{m}}"] = T.lowp_linear_packed(x, T.lowp_pack_i8(wi, s), 67)
    outs[f"int8 prepacked x7 {{m}}"] = T.lowp_linear_packed_x7(x, T.lowp_pack_i8(wi, s), 67)
a8 = torch.randint(-128, 128, (9, 512), generator=g, dtype=torch.int8)
outs["int8 matmul"] = T.lowp_matmul_i8(a8, wi)
torch.save(outs, {out!r})
"""


def results_per_path(child, tmp_path, configs):
    """Runs the `child` program (a format string of here, build, out) once
    per (OC_TILE_ISA, OC_NUM_CORES) pair, each in a process of its own;
    asserts every tensor it saved has the same bits as the first pair's."""
    build = tmp_path / "lib"
    results = {}
    for isa, cores in configs:
        out = tmp_path / f"{isa or 'best'}{cores}.pt"
        env = {**os.environ, "OC_NUM_CORES": cores}
        env.pop("OC_TILE_ISA", None)
        if isa:
            env["OC_TILE_ISA"] = isa
        code = child.format(here=os.path.dirname(os.path.abspath(__file__)), build=str(build),
                            out=str(out))
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        results[(isa, cores)] = torch.load(out)
    base = results[configs[0]]
    for key, outs in results.items():
        for name, t in outs.items():
            bits = torch.int16 if t.dtype == torch.bfloat16 else torch.int32
            assert torch.equal(t.view(bits), base[name].view(bits)), (key, name)


def test_same_bits_on_every_path(ops, tmp_path):
    """The integer paths (Q8_0, Q4_0, int8, prepacked int8, the int8 matmul)
    give the same bits whatever the instruction set, and whatever the number
    of cores."""
    results_per_path(CHILD, tmp_path, [("", "2"), ("avxvnni", "2"), ("avx2", "2"),
                                       ("portable", "1"), ("portable", "2")])


@pytest.mark.parametrize("m,k", [(1, 1100), (5, 1100), (16, 1100), (33, 1100), (1, 1101),
                                 (3, 5), (2, 70)])
def test_int8_prepacked_same_bits(ops, m, k):
    """Weights packed once (lowp_pack_i8, a uint8 tensor to keep): the same
    bits as the unpacked int8 weights (k's last 1-3 bytes included)."""
    g = torch.Generator().manual_seed(m)
    n = 130
    w = torch.randn(n, k, generator=g) * 0.1
    s = w.abs().amax(1) / 127
    wi = torch.round(w / s[:, None]).to(torch.int8)
    wp = ops.lowp_pack_i8(wi, s)
    assert wp.dtype == torch.uint8 and wp.dim() == 1
    x = torch.randn(m, k, generator=g)
    assert torch.equal(ops.lowp_linear_packed(x, wp, n), ops.lowp_linear(x, wi, s, W["int8"]))


@pytest.mark.filterwarnings("ignore:.*an autograd kernel was not registered:UserWarning")
@pytest.mark.parametrize("kind", ["q8_0", "q4_0"])
def test_q_packed_same_bits(ops, kind):
    """Q8_0 / Q4_0 blocks packed once (lowp_pack_q: 8 rows a group): the
    same bits as the GGUF rows, decode and prefill shapes, n not a multiple
    of 8; under opcheck too."""
    g = torch.Generator().manual_seed(11)
    n, k = 45, 320
    wq = ops.lowp_quantize(torch.randn(n, k, generator=g), W[kind])
    wp = ops.lowp_pack_q(wq, W[kind])
    assert wp.dtype == torch.uint8 and wp.numel() == 128 + 48 * wq.shape[1]
    torch.library.opcheck(ops.lowp_pack_q.default, (wq, W[kind]))
    for m in (1, 3, 4, 19):
        x = torch.randn(m, k, generator=g)
        want = ops.lowp_linear(x, wq, torch.zeros(1), W[kind])
        assert torch.equal(ops.lowp_linear_packed(x, wp, n), want), (kind, m)
        torch.library.opcheck(ops.lowp_linear_packed.default, (x, wp, n))
    with pytest.raises(RuntimeError, match=r"wtype must be 3 \(Q8_0\) or 4 \(Q4_0\), got 5"):
        ops.lowp_pack_q(wq, W["int8"])
    with pytest.raises(RuntimeError, match=r"the packed weights hold 45 outputs, n = 44 given"):
        ops.lowp_linear_packed(torch.randn(1, k), wp, 44)


def test_int8_dynamic_quantisation_edges(ops):
    """x's rows quantised as tile.h says (the vector form where the CPU has
    one): ties to even, -0, a NaN (to 0, the absmax ignoring it)."""
    k, n = 37, 20
    g = torch.Generator().manual_seed(7)
    x = torch.randn(3, k, generator=g)
    x[0, 0] = 127.0  # scale 1: the next ones are exact ties
    x[0, 1:9] = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.0, 126.5])
    x[1, 3] = float("nan")
    x[2, :] = 0.0
    w = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
    s = torch.rand(n, generator=g) + 0.5
    y = ops.lowp_linear(x, w, s, W["int8"])
    xn = x.numpy().astype(np.float32)
    amax = np.nan_to_num(np.abs(xn), nan=0.0).max(1).astype(np.float32)
    d = (amax / np.float32(127)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = np.rint((xn * inv[:, None]).astype(np.float32))
    q = np.clip(np.nan_to_num(v, nan=0.0), -127, 127)
    isum = q.astype(np.float64) @ w.numpy().astype(np.float64).T
    want = (isum.astype(np.float32) * d[:, None]).astype(np.float32) * s.numpy()[None, :]
    np.testing.assert_array_equal(y.numpy(), want.astype(np.float32))


@pytest.mark.parametrize("m,k", [(1, 1100), (2, 70), (5, 4096), (3, 5)])
def test_int8_prepacked_x7(ops, m, k):
    """x quantised to 7 bits (as torch's dynamic quantised Linear does on
    x86) on packed weights: the exact int32 product, scaled."""
    g = torch.Generator().manual_seed(k + m)
    n = 70
    w = torch.randn(n, k, generator=g) * 0.1
    s = w.abs().amax(1) / 127
    wi = torch.round(w / s[:, None]).to(torch.int8)
    wi[0, 0] = -128  # the packed column sums and the kernels take all of int8's range
    x = torch.randn(m, k, generator=g)
    sc = x.abs().amax(1) / 63
    q = torch.round(x * (1 / sc)[:, None])
    assert q.abs().max() <= 63
    ref = (q.double() @ wi.double().T).float() * sc[:, None] * s[None, :]
    got = ops.lowp_linear_packed_x7(x, ops.lowp_pack_i8(wi, s), n)
    torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.filterwarnings("ignore:.*an autograd kernel was not registered:UserWarning")
def test_opcheck_int8_prepacked_x7(ops):
    """lowp_linear_packed_x7 under torch.library.opcheck: x contiguous,
    requiring grad, strided and expanded; the strided ones give the
    contiguous x's bits. Bad input names the problem, then a call works."""
    g = torch.Generator().manual_seed(11)
    n, k = 40, 96
    w = torch.randn(n, k, generator=g) * 0.1
    s = w.abs().amax(1) / 127
    wp = ops.lowp_pack_i8(torch.round(w / s[:, None]).to(torch.int8), s)
    for m in (1, 5):
        x = torch.randn(m, k, generator=g)
        want = ops.lowp_linear_packed_x7(x, wp, n)
        torch.library.opcheck(ops.lowp_linear_packed_x7.default, (x, wp, n))
        torch.library.opcheck(ops.lowp_linear_packed_x7.default,
                              (x.clone().requires_grad_(), wp, n))
        wide = torch.zeros(m, 2 * k)
        wide[:, ::2] = x
        views = [x.t().contiguous().t(), wide[:, ::2]] + ([x.expand(3, k)] if m == 1 else [])
        for xs in views:
            torch.library.opcheck(ops.lowp_linear_packed_x7.default, (xs, wp, n))
            got = ops.lowp_linear_packed_x7(xs, wp, n)
            assert torch.equal(got, want.expand_as(got)), xs.stride()
    with pytest.raises(RuntimeError, match=r"x must be float32 \(quantised to 7 bits here\), got float64"):
        ops.lowp_linear_packed_x7(x.double(), wp, n)
    with pytest.raises(RuntimeError, match=r"the packed weights hold 40 outputs, n = 41 given"):
        ops.lowp_linear_packed_x7(x, wp, n + 1)
    assert torch.equal(ops.lowp_linear_packed_x7(x, wp, n), want)


@pytest.mark.parametrize("m,n,k", [(1, 70, 200), (16, 130, 1102), (33, 64, 3), (9, 70, 640)])
def test_int8_matmul_exact(ops, m, n, k):
    """oc_tile_matmul with int8 a and b and an int32 c: exact, -128 included."""
    g = torch.Generator().manual_seed(k)
    a = torch.randint(-128, 128, (m, k), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (n, k), generator=g, dtype=torch.int8)
    c = ops.lowp_matmul_i8(a, b)
    assert c.dtype == torch.int32
    assert torch.equal(c.long(), a.long() @ b.long().T)


def test_prepacked_bad_input_then_next_call_works(ops):
    w = torch.randint(-127, 128, (70, 64), dtype=torch.int8)
    s = torch.rand(70) + 0.5
    wp = ops.lowp_pack_i8(w, s)
    x = torch.randn(2, 64)
    with pytest.raises(RuntimeError, match=r"the packed weights hold 70 outputs, n = 71 given"):
        ops.lowp_linear_packed(x, wp, 71)
    with pytest.raises(RuntimeError, match=rf"int8-packed weights 70 x 64 are {wp.numel()} bytes, "
                       rf"got a buffer of {wp.numel() - 1}"):
        ops.lowp_linear_packed(x, wp[:-1].clone(), 70)
    bad = wp.clone()
    bad[0] ^= 1
    with pytest.raises(RuntimeError, match=r"these bytes are not packed weights"):
        ops.lowp_linear_packed(x, bad, 70)
    with pytest.raises(RuntimeError, match=r"oc_tile_linear: y is 2 x 70, x 2 x 32, int8-packed w "
                       r"70 x 64"):
        ops.lowp_linear_packed(x[:, :32].contiguous(), wp, 70)
    with pytest.raises(RuntimeError, match=r"scale must be float32 with one value per row of w"):
        ops.lowp_pack_i8(w, s[:3].clone())
    y = ops.lowp_linear_packed(x, wp, 70)
    assert torch.equal(y, ops.lowp_linear(x, w, s, W["int8"]))


def test_bad_input_then_next_call_works(ops):
    x = torch.randn(2, 64)
    w = torch.randn(8, 64)
    q4 = ops.lowp_quantize(w, W["q4_0"])
    with pytest.raises(RuntimeError, match=r"oc_weights_of_tensor: q4_0 weights \[8, 17\]: a row of 17 "
                       r"bytes is not whole 18-byte blocks"):
        ops.lowp_linear(x, q4[:, :17].contiguous(), torch.zeros(1), W["q4_0"])
    with pytest.raises(RuntimeError, match=r"oc_tile_linear: y is 2 x 8, x 2 x 32, q4_0 w 8 x 64"):
        ops.lowp_linear(x[:, :32].contiguous(), q4, torch.zeros(1), W["q4_0"])
    with pytest.raises(RuntimeError, match=r"oc_weights_of_tensor: bfloat16 weights in a float32 tensor"):
        ops.lowp_linear(x, w, torch.zeros(1), W["bfloat16"])
    with pytest.raises(RuntimeError, match=r"int8 weights \[8, 64\] need a contiguous float32 scale of 8"):
        ops.lowp_linear(x, w.to(torch.int8), torch.ones(3), W["int8"])
    with pytest.raises(RuntimeError, match=r"weight type 99 is not an oc_wtype"):
        ops.lowp_linear(x, w, torch.zeros(1), 99)
    with pytest.raises(RuntimeError, match=r"not whole blocks of 32"):
        ops.lowp_quantize(torch.randn(2, 40), W["q8_0"])
    y = ops.lowp_linear(x, q4, torch.zeros(1), W["q4_0"])
    ref = F.linear(x, torch.from_numpy(dequant(q4.numpy(), "q4_0", 64)))
    assert ((y - ref).norm() / ref.norm()).item() < 0.02


@pytest.mark.parametrize("nbytes", [1, 4095, 64 * 1024 + 1, 1_000_003])
def test_copy_every_byte(ops, nbytes):
    """lowp_copy (the bench's memcpy floor): every byte, each core its
    share of whole cache lines, the last share the rest."""
    src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8)
    dst = torch.zeros_like(src)
    ops.lowp_copy(src, dst)
    assert torch.equal(dst, src)


def test_copy_bad_input_then_next_call_works(ops):
    src, dst = torch.randn(3), torch.empty(2)
    with pytest.raises(RuntimeError, match=r"lowp_copy.*src and dst must hold the same number of "
                       r"bytes, got 12 and 8"):
        ops.lowp_copy(src, dst)
    with pytest.raises(RuntimeError, match=r"src and dst must be contiguous, got src strided, dst "
                       r"contiguous"):
        ops.lowp_copy(torch.randn(6, 2).t(), torch.empty(12))
    dst = torch.empty(3)
    ops.lowp_copy(src, dst)
    assert torch.equal(dst, src)
