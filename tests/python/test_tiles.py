"""The `tiles` example library (examples/tiles, written with opcore/tile.h)
from PyTorch (eager, autograd, torch.compile, opcheck) and JAX (jit, grad
through with_vjp), against torch / numpy references, on odd shapes that
leave ragged tiles."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch.library import opcheck  # noqa: E402

import opcore.torch  # noqa: E402,F401
from conftest import CLI, REPO, needs_cli  # noqa: E402

sys.path.insert(0, str(REPO / "examples" / "tiles"))
import tiles_ops  # noqa: E402
from opcore import custom_op  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def T(opcore_build_dir):
    tiles_ops.load(build_directory=str(opcore_build_dir / "tiles"))
    return torch.ops.tiles


def r(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def rms_ref(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def cases():
    x, w, b = r(3, 37, 300), r(300, seed=1), r(300, seed=2)
    q, k, v = r(1, 2, 300, 64, seed=3), r(1, 2, 300, 64, seed=4), r(1, 2, 300, 64, seed=5)
    a, bm = r(67, 91, seed=6), r(91, 45, seed=7)
    return {
        "tensor_add": ((x, r(3, 37, 300, seed=8)), lambda a, b: a + b),
        "matmul": ((a, bm), torch.matmul),
        "rmsnorm": ((x, w, 1e-6), rms_ref),
        "layer_norm": ((x, w, b, 1e-5), lambda x, w, b, eps: F.layer_norm(x, [300], w, b, eps)),
        "softmax": ((x,), lambda x: x.softmax(-1)),
        "flash_attention": ((q, k, v, False), lambda q, k, v, c: F.scaled_dot_product_attention(q, k, v, is_causal=c)),
        "flash_attention_causal": ((q, k, v, True),
                                   lambda q, k, v, c: F.scaled_dot_product_attention(q, k, v, is_causal=c)),
    }


def op_of(T, name):
    return getattr(T, name.replace("_causal", ""))


@pytest.mark.parametrize("name", list(cases()))
def test_eager_matches_torch(T, name):
    args, ref = cases()[name]
    got = op_of(T, name)(*args)
    if name == "layer_norm":
        out, mean, rstd = got
        x = args[0]
        torch.testing.assert_close(mean, x.mean(-1), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(rstd, torch.rsqrt(x.var(-1, unbiased=False) + 1e-5), rtol=1e-5, atol=1e-5)
        got = out
    torch.testing.assert_close(got, ref(*args), rtol=1e-5, atol=2e-5)


def test_row_kernels_over_many_blocks(T):
    """Rows in several blocks per core (each block's pass takes the next
    block's statistics): softmax with masked (-inf) entries and large
    values, rmsnorm with rows of very different scales; a ragged row length."""
    x = r(1500, 257, seed=11) * 30
    x[::7, :100] = float("-inf")
    torch.testing.assert_close(T.softmax(x), x.softmax(-1), rtol=1e-5, atol=2e-6)
    y, w = r(1500, 257, seed=12) * torch.logspace(-3, 3, 1500)[:, None], r(257, seed=13)
    torch.testing.assert_close(T.rmsnorm(y, w, 1e-6), rms_ref(y, w, 1e-6), rtol=1e-5, atol=1e-5)
    # non-finite rows as torch has them: an inf makes mean(x^2) inf (the row 0, inf * 0 NaN), a NaN all NaN
    y[3, 5], y[700, :] = float("inf"), float("nan")
    torch.testing.assert_close(T.rmsnorm(y, w, 1e-6), rms_ref(y, w, 1e-6), rtol=1e-5, atol=1e-5, equal_nan=True)
    torch.testing.assert_close(T.softmax(y), y.softmax(-1), rtol=1e-5, atol=2e-6, equal_nan=True)


@pytest.mark.parametrize("k, d", [(1, 1), (2, 5), (3, 7), (6, 16), (1, 17), (8, 64), (64, 64),
                                  (4, 1000)])
def test_small_softmax_gives_the_blocked_paths_bits(T, k, d):
    """A tiny input runs softmax's small path (one tile call, no TCM tile);
    each row is computed alone, so rows of a large input (the blocked path)
    must come out with the same bits: -inf, inf and NaN entries included."""
    x = r(max(300, 4096 // d + 70), d, seed=d) * 10
    x[1, 0], x[2, :], x[3, -1], x[4, 0] = float("-inf"), float("-inf"), float("nan"), float("inf")
    big = T.softmax(x)
    for s in range(6):
        small = T.softmax(x[s:s + k].clone())
        assert torch.equal(small.nan_to_num(7.0), big[s:s + k].nan_to_num(7.0)), (s, k, d)
    torch.testing.assert_close(T.softmax(x[5:5 + k]), x[5:5 + k].softmax(-1), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("m, k, n", [(2, 5, 2), (8, 64, 8), (3, 7, 5), (16, 16, 16), (5, 33, 17),
                                     (1, 256, 32), (1, 64, 40), (1, 80, 64), (2, 64, 45),
                                     (1, 7, 3)])
def test_tiny_matmul_gives_the_large_products_bits(T, m, k, n):
    """A tiny product (m n k <= 8192) runs the tile layer's own loop, not a
    libxsmm kernel; each element is the same chain of fused multiply-adds
    in order of k, so rows of a large product (a libxsmm kernel) come out
    with the same bits. With OC_TILE_XSMM=0 both run BLIS, whose order
    depends on the shape: close, not equal."""
    a, b = r(240, k, seed=k), r(k, n, seed=n)
    a[3, 0], b[0, :] = 0.0, -0.0
    big = T.matmul(a, b)
    same = torch.equal if os.environ.get("OC_TILE_XSMM") != "0" else torch.allclose
    for s in range(4):
        assert same(T.matmul(a[s * m:s * m + m].clone(), b), big[s * m:s * m + m]), (s, m, k, n)
    torch.testing.assert_close(T.matmul(a[:m], b), a[:m] @ b, rtol=1e-5, atol=1e-5)


def test_matmul_bfloat16_accumulates_in_float32(T):
    a, b = r(130, 257, seed=9, dtype=torch.bfloat16), r(257, 70, seed=10, dtype=torch.bfloat16)
    got = T.matmul(a, b)
    assert got.dtype == torch.bfloat16
    # float32 sums of the exact bfloat16 products, rounded once
    want = (a.float() @ b.float()).bfloat16()
    assert (got.float() - want.float()).abs().max() <= (want.float().abs() / 128).max()
    torch.testing.assert_close(got.float(), want.float(), rtol=1 / 128, atol=1e-2)


def test_results_are_deterministic_at_every_core_count(T, opcore_build_dir):
    """softmax, rmsnorm, flash attention and layer norm's gradients (weight
    and bias sum over rows) at OC_NUM_CORES = 1, 2, 3: the same bits."""
    script = textwrap.dedent(f"""
        import hashlib, sys, torch
        sys.path.insert(0, {str(REPO / "examples" / "tiles")!r})
        import opcore.torch, tiles_ops
        tiles_ops.load(build_directory={str(opcore_build_dir / "tiles")!r})
        T = torch.ops.tiles
        g = torch.Generator().manual_seed(0)
        x, w, b, t = torch.randn(64, 1000, generator=g), torch.randn(1000, generator=g), torch.randn(1000, generator=g), torch.randn(64, 1000, generator=g)
        q = torch.randn(1, 2, 300, 32, generator=g)
        p = [v.clone().requires_grad_() for v in (x, w, b)]
        (T.layer_norm(*p, 1e-5)[0] * t).sum().backward()
        outs = [T.softmax(x), T.rmsnorm(x, w, 1e-6), T.flash_attention(q, q, q, True)] + [v.grad for v in p]
        print(hashlib.sha256(b"".join(o.numpy().tobytes() for o in outs)).hexdigest())
    """)
    digests = set()
    for cores in (1, 2, 3):
        p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "OC_NUM_CORES": str(cores)})
        assert p.returncode == 0, p.stderr[-2000:]
        digests.add(p.stdout.strip())
    assert len(digests) == 1


def test_layer_norm_autograd_matches_torch(T):
    x, w, b = r(5, 33, 200, seed=15), r(200, seed=16), r(200, seed=17)
    t = r(5, 33, 200, seed=18)
    mine = [p.clone().requires_grad_() for p in (x, w, b)]
    ref = [p.clone().requires_grad_() for p in (x, w, b)]
    (T.layer_norm(*mine, 1e-5)[0] * t).sum().backward()
    (F.layer_norm(ref[0], [200], ref[1], ref[2], 1e-5) * t).sum().backward()
    for m, q in zip(mine, ref):
        torch.testing.assert_close(m.grad, q.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mkn", [(67, 91, 45), (2, 5, 3), (300, 17, 1), (0, 4, 3), (3, 0, 2),
                                 (4, 3, 0)])
def test_matmul_and_softmax_backwards_in_c_match_torch(T, mkn):
    """matmul's and softmax's backwards are C ops (transposes read in place;
    y * (grad - rowsum(grad * y))), through autograd and called directly,
    with empty dims (an empty sum: zeros) and torch's expanded gradients."""
    m, k, n = mkn
    a, b, g = r(m, k, seed=20), r(k, n, seed=21), r(m, n, seed=22)
    ga, gb = T.matmul_backward(g, a, b)
    torch.testing.assert_close(ga, g @ b.t(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(gb, a.t() @ g, rtol=1e-4, atol=1e-4)
    mine = [a.clone().requires_grad_(), b.clone().requires_grad_()]
    ref = [a.clone().requires_grad_(), b.clone().requires_grad_()]
    T.matmul(*mine).sum().backward()
    (ref[0] @ ref[1]).sum().backward()
    for p, q in zip(mine, ref):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)
    if m and k:
        x, t = r(m, k, seed=23) * 5, r(m, k, seed=24)
        xm, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
        (T.softmax(xm) * t).sum().backward()
        (xr.softmax(-1) * t).sum().backward()
        torch.testing.assert_close(xm.grad, xr.grad, rtol=1e-5, atol=1e-6)
        got = T.softmax_backward(t, xr.softmax(-1))
        torch.testing.assert_close(got, xr.grad, rtol=1e-5, atol=1e-6)


def test_backward_ops_name_a_bad_gradient(T):
    with pytest.raises(opcore.OpError, match=r"tiles::matmul_backward.*grad must be a float32 "
                       r"tensor of a x b's shape \[2, 3\]"):
        T.matmul_backward(r(2, 4), r(2, 5), r(5, 3))
    with pytest.raises(opcore.OpError,
                       match=r"tiles::softmax_backward.*grad must be float32 with result's shape"):
        T.softmax_backward(r(2, 4), r(2, 5))
    assert T.softmax_backward(r(2, 5), r(2, 5)).shape == (2, 5)  # and the next call works


def test_library_attribute_is_the_op_and_is_kept(T):
    """lib.op(x), the call the docs show, finds the op as an instance
    attribute set at load (no __getattr__ on the class: CPython 3.11 then
    specialises the lookup); a missing op names the library and the op."""
    lib = tiles_ops.load()
    assert lib.__dict__["softmax"] is lib.ops["softmax"]
    assert lib.softmax is lib.ops["softmax"]
    assert isinstance(lib, custom_op.Library) and "__getattr__" not in vars(type(lib))
    assert all(not hasattr(c, "__getattr__") for c in type(lib).__mro__)
    torch.testing.assert_close(lib.softmax(r(3, 7)), r(3, 7).softmax(-1), rtol=1e-5, atol=1e-6)
    with pytest.raises(AttributeError, match=r"'Library\[tiles\]' object has no attribute 'no_such_op'"):
        lib.no_such_op


def test_layer_norm_trains_a_small_model_like_torch(T):
    torch.manual_seed(0)
    data, target = r(64, 32, seed=19), r(64, 1, seed=20)

    def train(norm):
        torch.manual_seed(1)
        lin1, lin2 = torch.nn.Linear(32, 48), torch.nn.Linear(48, 1)
        w, b = torch.ones(48, requires_grad=True), torch.zeros(48, requires_grad=True)
        opt = torch.optim.SGD([*lin1.parameters(), *lin2.parameters(), w, b], lr=0.05)
        losses = []
        for _ in range(30):
            opt.zero_grad()
            loss = F.mse_loss(lin2(torch.relu(norm(lin1(data), w, b))), target)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    mine = train(lambda h, w, b: T.layer_norm(h, w, b, 1e-5)[0])
    ref = train(lambda h, w, b: F.layer_norm(h, [48], w, b, 1e-5))
    assert mine[-1] < 0.5 * mine[0]
    np.testing.assert_allclose(mine, ref, rtol=1e-3)


@pytest.mark.parametrize("name", list(cases()))
def test_opcheck(T, name):
    args, _ = cases()[name]
    opcheck(op_of(T, name), args)


def test_compile_fullgraph(T):
    x, w, b = r(37, 300), r(300, seed=1), r(300, seed=2)
    q = r(1, 2, 130, 32, seed=3)

    @torch.compile(fullgraph=True)
    def f(x, w, b, q):
        h = T.layer_norm(x, w, b, 1e-5)[0]
        h = T.rmsnorm(T.softmax(h), w, 1e-6)
        return T.matmul(h, T.tensor_add(h, h).t().contiguous()), T.flash_attention(q, q, q, True)

    got, att = f(x, w, b, q)
    h = rms_ref(F.layer_norm(x, [300], w, b, 1e-5).softmax(-1), w, 1e-6)
    torch.testing.assert_close(got, h @ (2 * h).t(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(att, F.scaled_dot_product_attention(q, q, q, is_causal=True), rtol=1e-5, atol=1e-5)
    xr = x.clone().requires_grad_()
    g = torch.compile(lambda x: T.layer_norm(x, w, b, 1e-5)[0].square().sum(), fullgraph=True)
    g(xr).backward()
    x2 = x.clone().requires_grad_()
    F.layer_norm(x2, [300], w, b, 1e-5).square().sum().backward()
    torch.testing.assert_close(xr.grad, x2.grad, rtol=1e-4, atol=1e-4)


def test_bad_inputs_are_clear_errors(T):
    with pytest.raises(Exception, match="a's columns"):
        T.matmul(r(3, 4), r(5, 6))
    with pytest.raises(Exception, match="w must be 1-D"):
        T.rmsnorm(r(3, 4), r(5), 1e-6)
    with pytest.raises(Exception, match=r"q must be \[b, h, s, d\]"):
        T.flash_attention(r(3, 4), r(3, 4), r(3, 4), False)


# ---- JAX ------------------------------------------------------------------------

def test_jax_jit_and_grad():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    ojax = pytest.importorskip("opcore.jax")
    tiles_ops.load()
    x = np.asarray(r(6, 37, 130, seed=21))
    w, b = np.asarray(r(130, seed=22)), np.asarray(r(130, seed=23))
    q = np.asarray(r(1, 2, 70, 16, seed=24))
    fa = ojax.op("tiles::flash_attention")
    sm, rms, mm = ojax.op("tiles::softmax"), ojax.op("tiles::rmsnorm"), ojax.op("tiles::matmul")
    got = jax.jit(lambda x: sm(x))(x)
    np.testing.assert_allclose(got, jax.nn.softmax(x, -1), rtol=1e-5, atol=1e-6)
    got = jax.jit(lambda x, w: rms(x, w, 1e-6))(x, w)
    np.testing.assert_allclose(got, np.asarray(rms_ref(torch.from_numpy(x), torch.from_numpy(w), 1e-6)),
                               rtol=1e-5, atol=1e-5)
    a2 = x.reshape(-1, 130)
    np.testing.assert_allclose(jax.jit(mm)(a2, a2.T.copy()), a2 @ a2.T, rtol=1e-4, atol=1e-4)
    att = jax.jit(lambda q: fa(q, q, q, True))(q)
    tq = torch.from_numpy(q)
    np.testing.assert_allclose(att, F.scaled_dot_product_attention(tq, tq, tq, is_causal=True).numpy(),
                               rtol=1e-5, atol=1e-5)

    ln = ojax.with_vjp("tiles::layer_norm", "tiles::layer_norm_backward")
    t = np.asarray(r(6, 37, 130, seed=25))

    def ref(x, w, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5) * w + b

    got = jax.jit(jax.grad(lambda x, w, b: (ln(x, w, b, 1e-5)[0] * t).sum(), argnums=(0, 1, 2)))(x, w, b)
    want = jax.grad(lambda x, w, b: (ref(x, w, b) * t).sum(), argnums=(0, 1, 2))(x, w, b)
    for g, q_ in zip(got, want):
        np.testing.assert_allclose(g, q_, rtol=1e-4, atol=1e-4)


# ---- the CLI --------------------------------------------------------------------

@needs_cli
def test_cli_builds_and_runs_every_op(tmp_path):
    """examples/tiles/run.sh: `opcore build --multicore` and `opcore run` of
    each op on constant inputs with known results."""
    p = subprocess.run([str(REPO / "examples" / "tiles" / "run.sh")], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "OUT": str(tmp_path), "OPCORE_CLI": str(CLI)})
    assert p.returncode == 0, p.stderr[-3000:]
    firsts = [line.strip() for line in p.stdout.splitlines() if line.strip().startswith("[")]
    want = ["[3, 3, 3", "[10, 10, 10", "[3, 3, 3", "[5, 5, 5", "[1, 1, 1", "[316.2", "[0.025, 0.025", "[2, 2, 2"]
    assert len(firsts) == len(want), p.stdout
    for got, w in zip(firsts, want):
        assert got.startswith(w), (got, w)


# ---- --vec-report on a reduction the compiler keeps in order ---------------------

SUMSQ_KERNEL = """#include <opcore/kernel.h>
oc_tensor *sumsq(const oc_tensor *x)
{
    const float *in = x->data;
    int64_t n = oc_numel(x);
    float s = 0;
    for (int64_t j = 0; j < n; j++) s += in[j] * in[j];
    oc_tensor *o = oc_dst_tensor();
    float *d = o->data;
    for (int64_t j = 0; j < n; j++) d[j] = in[j] * s;
    return o;
}
"""


def test_vec_report_names_an_in_order_reduction_as_not_vectorized(tmp_path):
    from opcore import custom_op

    k, shape = tmp_path / "k.c", tmp_path / "shape.c"
    k.write_text(SUMSQ_KERNEL)
    shape.write_text('#include <opcore/library.h>\nstatic oc_tensor *s(const oc_tensor *x) { return oc_empty_like(x); }\n'
                     'OC_LIBRARY(vr_ops, m) { oc_def(m, "sumsq(Tensor x) -> Tensor", s, "sumsq"); }\n')
    rep = custom_op.build("vr_ops", [str(k)], [str(shape)], build_directory=str(tmp_path / "out"),
                          vec_report=True).vec_report
    assert f"{k}:7: NOT vectorized: a float reduction kept in order" in rep, rep
    assert "oc_tile_reduce_rows" in rep
    assert f"{k}:10: vectorized (" in rep


def test_vec_report_lists_loops_in_the_authors_own_header(tmp_path):
    """A helper in `#include "my_helpers.h"` beside the source: its loops are
    compiled where they are inlined, and reported under the header's name."""
    from opcore import custom_op

    (tmp_path / "my_helpers.h").write_text(
        "static inline float sumsq(const float *x, long n)\n"
        "{\n"
        "    float ss = 0;\n"
        "    for (long j = 0; j < n; j++) ss += x[j] * x[j];\n"
        "    return ss;\n"
        "}\n")
    k, shape = tmp_path / "k.c", tmp_path / "shape.c"
    k.write_text('#include <opcore/kernel.h>\n#include "my_helpers.h"\n'
                 "oc_tensor *ss(const oc_tensor *x)\n"
                 "{\n"
                 "    oc_tensor *o = oc_dst_tensor();\n"
                 "    *(float *)o->data = sumsq(x->data, oc_numel(x));\n"
                 "    return o;\n"
                 "}\n")
    shape.write_text('#include <opcore/library.h>\nstatic oc_tensor *s(const oc_tensor *x) { (void)x; '
                     'return oc_empty(OC_FLOAT32, 0, NULL); }\n'
                     'OC_LIBRARY(vr_hdr, m) { oc_def(m, "ss(Tensor x) -> Tensor", s, "ss"); }\n')
    rep = custom_op.build("vr_hdr", [str(k)], [str(shape)], build_directory=str(tmp_path / "out"),
                          vec_report=True).vec_report
    hdr = tmp_path / "my_helpers.h"
    assert f"{hdr}: 0 loops vectorized, 1 not" in rep, rep
    assert f"{hdr}:4: NOT vectorized: a float reduction kept in order" in rep, rep
    listed = [line.split(":")[0] for line in rep.splitlines()[1:] if not line.startswith(" ")]
    assert listed == [str(k), str(hdr)], rep  # opcore's own headers are not listed
