"""Plain C loops at the default kernel flags (examples/activations): the
vector math they get (glibc's libmvec through opcore/vecmath.h, the
oc_sum_f32/oc_max_f32 reductions) keeps torch's results for NaN, Inf,
signed zeros and denormals."""
import platform
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import load_lib

ACT = Path(__file__).resolve().parents[2] / "examples" / "activations"
F32 = np.finfo(np.float32)
SPECIALS = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e-40, -1e-40, F32.tiny, F32.smallest_subnormal,
            -F32.smallest_subnormal, 88.0, 89.0, 100.0, -87.0, -88.5, -89.0, -95.0, -100.0, -104.0, -110.0, 1e30,
            -1e30, float(F32.max), -float(F32.max), 1.0, -1.0, 20.0, -20.0]


@pytest.fixture(scope="module")
def act(opcore_build_dir):
    return load_lib(opcore_build_dir, "act_ops", ACT / "activations.c", ACT / "shape.c")


def assert_same_specials(got, want):
    """NaN where torch has NaN, the same infinities and signs, finite values
    within a few ulp (denormals within a few denormal steps)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.numpy(), want.numpy()
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_array_equal(np.isposinf(g), np.isposinf(w))
    np.testing.assert_array_equal(np.isneginf(g), np.isneginf(w))
    finite = np.isfinite(w)
    np.testing.assert_array_equal(np.signbit(g[finite]), np.signbit(w[finite]))
    np.testing.assert_allclose(g[finite], w[finite], rtol=4e-6, atol=8 * F32.smallest_subnormal)


def test_silu_special_values(act):
    x = torch.tensor(SPECIALS, dtype=torch.float32)
    assert_same_specials(torch.ops.act_ops.silu(x), torch.nn.functional.silu(x))
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 1000, generator=g) * 30
    assert_same_specials(torch.ops.act_ops.silu(x), torch.nn.functional.silu(x))


@pytest.mark.parametrize("op", ["softmax", "softmax_plain"])
def test_softmax_special_rows(act, op):
    nan, inf = float("nan"), float("inf")
    rows = [
        [1.0, 2.0, 3.0, nan] + [0.0] * 60,       # NaN anywhere: the whole row NaN
        [inf, 1.0] + [0.0] * 62,                   # +inf: NaN (inf - inf)
        [-inf, 1.0] + [0.0] * 62,                  # -inf: a zero
        [-inf] * 64,                               # all -inf: NaN
        [0.0, -100.0, -103.0, -90.0] + [-200.0] * 60,  # denormal results
        [1e-40, -1e-40, 0.0, -0.0] * 16,           # denormal inputs
        [3e38, -3e38] * 32,                        # huge values
        list(np.linspace(-50, 50, 64)),
    ]
    x = torch.tensor(rows, dtype=torch.float32)
    fn = getattr(torch.ops.act_ops, op)
    assert_same_specials(fn(x), torch.softmax(x, dim=-1))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(37, 4099, generator=g) * 20  # rows not a multiple of the vector width
    assert_same_specials(fn(x), torch.softmax(x, dim=-1))


@pytest.mark.skipif(platform.machine() != "x86_64" or not shutil.which("nm"),
                    reason="libmvec declarations are made for x86-64 glibc")
def test_default_flags_vectorise_expf(act):
    """The plain expf loops call glibc's vector expf (_ZGV...expf)."""
    syms = subprocess.run(["nm", "-D", "--undefined-only", act.path], capture_output=True, text=True).stdout
    assert any(s.startswith("_ZGV") and "_expf@" in s for s in syms.split()), syms


def test_shares_run_with_the_callers_denormal_mode(act):
    """x86's flush-to-zero mode is per thread: every core's share of a
    multicore op runs with the calling thread's, so rows agree whichever core
    ran them (XLA, for one, runs its work with denormals flushed)."""
    x = torch.full((512, 4096), -200.0)
    x[:, 0], x[:, 1] = 0.0, -100.0  # softmax of column 1: exp(-100), a denormal
    torch.set_flush_denormal(True)
    try:
        flushed = torch.ops.act_ops.softmax(x)
    finally:
        torch.set_flush_denormal(False)
    kept = torch.ops.act_ops.softmax(x)
    assert torch.all(flushed[:, 1] == 0), "a share ran without the caller's flush-to-zero"
    assert torch.all(kept[:, 1] > 0), "a share ran with another thread's flush-to-zero"
