"""Group-wise weights of opcore/tile.h's oc_tile_linear (int8 with a scale
per group, uint4 with a scale and a zero point per group, as GPTQ / AWQ /
torchao store them) called from PyTorch through bench/kernels/lowp_linear.c:
the quantiser byte for byte against a numpy port of GPTQ's, the product
against torch's on the dequantised weights, bfloat16 activations, the same
bits on every instruction set and core count, and bad input."""
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_lowp import load, results_per_path  # noqa: E402

I8G, U4G = 6, 7


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    import opcore.torch  # noqa: F401
    return load(tmp_path_factory.mktemp("lowpg"))


def gptq_u4(x, group):
    """GPTQ's asymmetric 4-bit quantiser per group (min and max widened to
    include 0; an all-zero group gets -1 and 1), float32 math, packed two a
    byte (element 2i in the low nibble): (packed, scale, zero)."""
    n, k = x.shape
    b = x.reshape(n, k // group, group).astype(np.float32)
    lo = np.minimum(b.min(-1), np.float32(0))
    hi = np.maximum(b.max(-1), np.float32(0))
    both = (lo == 0) & (hi == 0)
    lo, hi = np.where(both, np.float32(-1), lo), np.where(both, np.float32(1), hi)
    s = ((hi - lo) / np.float32(15)).astype(np.float32)
    z = np.rint(-lo / s).astype(np.float32)
    q = np.clip(np.rint(b / s[..., None]) + z[..., None], 0, 15).astype(np.uint8).reshape(n, k)
    return q[:, 0::2] | (q[:, 1::2] << 4), s, z


def int8_groups(w, group):
    n, k = w.shape
    b = w.reshape(n, k // group, group)
    s = b.abs().amax(-1) / 127
    q = torch.round(b / torch.where(s == 0, 1, s)[..., None]).to(torch.int8)
    return q.reshape(n, k), s.contiguous()


def dequant(kind, wq, s, z, group):
    if kind == I8G:
        n, k = wq.shape
        return (wq.float().reshape(n, k // group, group) * s[..., None]).reshape(n, k)
    n, half = wq.shape
    q = torch.stack([wq & 15, wq >> 4], -1).reshape(n, 2 * half).float()
    return ((q.reshape(n, -1, group) - z[..., None]) * s[..., None]).reshape(n, 2 * half)


def weights(kind, w, group, ops):
    if kind == I8G:
        q, s = int8_groups(w, group)
        return q, s, torch.zeros(1)
    return ops.lowp_quantize_u4(w, group)


@pytest.mark.parametrize("group", [32, 64, 128])
def test_quantise_like_gptq(ops, group):
    g = torch.Generator().manual_seed(group)
    x = torch.randn(6, 512, generator=g)
    x[0, :128] = 0  # an all-zero group
    x[1, :128] = x[1, :128].abs()  # all positive: lo = 0
    q, s, z = ops.lowp_quantize_u4(x, group)
    wq, ws, wz = gptq_u4(x.numpy(), group)
    np.testing.assert_array_equal(q.numpy(), wq)
    np.testing.assert_array_equal(s.numpy(), ws)
    np.testing.assert_array_equal(z.numpy(), wz)
    back = dequant(U4G, q, s, z, group)
    step = s.repeat_interleave(group, 1)
    assert bool(((back - x).abs() <= step * 1.0001).all())


@pytest.mark.parametrize("m", [1, 4, 32, 48])
@pytest.mark.parametrize("group", [32, 128])
@pytest.mark.parametrize("kind", [I8G, U4G])
def test_linear_against_torch(ops, kind, group, m):
    g = torch.Generator().manual_seed(m + group)
    n, k = 70, 256
    w = torch.randn(n, k, generator=g) * 0.1
    x = torch.randn(m, k, generator=g)
    wq, s, z = weights(kind, w, group, ops)
    ref = F.linear(x, dequant(kind, wq, s, z, group))
    y = ops.lowp_linear_g(x, wq, s, z, kind, group)
    assert y.shape == (m, n) and y.dtype == torch.float32
    assert ((y - ref).norm() / ref.norm()).item() < 1e-5
    assert ((y - F.linear(x, w)).norm() / ref.norm()).item() < (0.15 if kind == U4G else 0.01)  # 4 bits: ~10%
    # bfloat16 x: the float32 x result of the same (widened) values, then rounded
    xb = x.to(torch.bfloat16)
    yb = ops.lowp_linear_g(xb, wq, s, z, kind, group)
    assert yb.dtype == torch.bfloat16
    want = ops.lowp_linear_g(xb.float(), wq, s, z, kind, group)
    if m <= 32:
        assert torch.equal(yb, want.to(torch.bfloat16))
    else:  # the tile matmul: float32 rounding apart
        torch.testing.assert_close(yb.float(), want, rtol=1e-2, atol=1e-2)


def test_bf16_activations_other_types(ops):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 128, generator=g).to(torch.bfloat16)
    w = torch.randn(20, 128, generator=g)
    for kind, wt in ((0, w), (1, w.to(torch.bfloat16))):
        y = ops.lowp_linear(x, wt, torch.zeros(1), kind)
        assert y.dtype == torch.bfloat16
        want = ops.lowp_linear(x.float(), wt, torch.zeros(1), kind).to(torch.bfloat16)
        assert torch.equal(y, want)


CHILD = r"""
import sys, torch
sys.path.insert(0, {here!r})
import opcore.torch
from test_lowp import load
T = load({build!r})
g = torch.Generator().manual_seed(3)
w = torch.randn(67, 512, generator=g) * 0.05
outs = {{}}
for group in (32, 64, 128):
    q4 = T.lowp_quantize_u4(w, group)
    b = w.reshape(67, -1, group)
    s8 = b.abs().amax(-1) / 127
    q8 = torch.round(b / s8[..., None]).to(torch.int8).reshape(67, 512)
    for m in (1, 2, 9, 32):
        x = torch.randn(m, 512, generator=g)
        outs[f"u4 {{group}} {{m}}"] = T.lowp_linear_g(x, *q4, 7, group)
        outs[f"i8 {{group}} {{m}}"] = T.lowp_linear_g(x, q8, s8, torch.zeros(1), 6, group)
        outs[f"u4 bf16 {{group}} {{m}}"] = T.lowp_linear_g(x.bfloat16(), *q4, 7, group)
torch.save(outs, {out!r})
"""


def test_same_bits_on_every_path(ops, tmp_path):
    """Group-wise weights give the same bits whatever the instruction set,
    and whatever the number of cores."""
    results_per_path(CHILD, tmp_path, [("", "2"), ("avx512", "3"), ("avx2", "2"),
                                       ("portable", "1"), ("portable", "3")])


def test_bad_input_then_next_call_works(ops):
    g = torch.Generator().manual_seed(9)
    x = torch.randn(2, 128, generator=g)
    w = torch.randn(8, 128, generator=g)
    q, s, z = ops.lowp_quantize_u4(w, 32)
    with pytest.raises(RuntimeError, match=r"oc_weights_grouped: uint4-group weights \[8, 64\] "
                       r"with group 48 \(want 32, 64 or 128\)"):
        ops.lowp_linear_g(x, q, s, z, U4G, 48)
    with pytest.raises(RuntimeError, match=r"need a contiguous float32 scale of \[8, 4\], got "
                       r"float32 \[8, 3\]"):
        ops.lowp_linear_g(x, q, s[:, :3].contiguous(), z, U4G, 32)
    with pytest.raises(RuntimeError, match=r"need a contiguous float32 zero of \[8, 4\], got "
                       r"float64 \[8, 4\]"):
        ops.lowp_linear_g(x, q, s, z.double(), U4G, 32)
    with pytest.raises(RuntimeError, match=r"uint4-group weights \[8, 40\] hold k = 80 inputs, "
                       r"not a multiple of the group 64"):
        ops.lowp_linear_g(x[:, :80].contiguous(), q[:, :40].contiguous(), s[:, :1].contiguous(),
                          z[:, :1].contiguous(), U4G, 64)
    with pytest.raises(RuntimeError, match=r"oc_tile_linear: y is 2 x 8, x 2 x 64, uint4-group w "
                       r"8 x 128"):
        ops.lowp_linear_g(x[:, :64].contiguous(), q, s, z, U4G, 32)
    with pytest.raises(RuntimeError, match=r"int8-group weights must be a 2-D int8 tensor, got "
                       r"2-D uint8"):
        ops.lowp_linear_g(x, q, s, z, I8G, 32)
    with pytest.raises(RuntimeError, match=r"x must be a 2-D float32 or bfloat16 tensor, got 2-D "
                       r"float16"):
        ops.lowp_linear_g(x.half(), q, s, z, U4G, 32)
    with pytest.raises(RuntimeError, match=r"x's 100 columns are not whole groups of 32"):
        ops.lowp_quantize_u4(torch.randn(2, 100), 32)
    y = ops.lowp_linear_g(x, q, s, z, U4G, 32)
    ref = F.linear(x, dequant(U4G, q, s, z, 32))
    assert ((y - ref).norm() / ref.norm()).item() < 1e-5
