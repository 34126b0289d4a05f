"""The floor kernels the tiles bench runs beside its [32, 4096] norm rows
(bench/kernels/norm_floor.c): each against torch on a few shapes, on
every core, and bad input named before any kernel runs."""
import os

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

KERNELS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "bench", "kernels")


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    import opcore.torch  # noqa: F401
    from opcore import custom_op

    custom_op.loaded_libraries().get("norm_floor") or custom_op.load(
        name="norm_floor", compute_srcs=[os.path.join(KERNELS, "norm_floor.c")],
        shape_srcs=[os.path.join(KERNELS, "norm_floor_shape.c")], multicore=True,
        build_directory=str(tmp_path_factory.mktemp("norm_floor")))
    return torch.ops.norm_floor


@pytest.mark.parametrize("shape", [(1, 64), (3, 128), (32, 4096), (2, 5, 192)])
def test_floors_match_torch(ops, shape):
    g = torch.Generator().manual_seed(len(shape) * 7 + shape[-1])
    x, w = torch.randn(*shape, generator=g), torch.randn(shape[-1], generator=g)
    torch.testing.assert_close(ops.one_pass(x, w, 1e-6), F.rms_norm(x, [shape[-1]], w, 1e-6),
                               rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ops.scale(x, w), x * w, rtol=0, atol=0)
    torch.testing.assert_close(ops.exp_rows(x), x.exp(), rtol=1e-6, atol=0)
    assert torch.equal(ops.copy(x), x)
    xt = x.reshape(-1, shape[-1]).t().contiguous().t()  # the same values, column-major
    torch.testing.assert_close(ops.scale(xt, w[::1]), xt * w, rtol=0, atol=0)
    assert torch.equal(ops.copy(xt), xt)


def test_bad_input_then_next_call_works(ops):
    x, w = torch.randn(4, 64), torch.randn(64)
    with pytest.raises(RuntimeError, match=r"multiple of 64 floats, got 40"):
        ops.copy(torch.randn(4, 40))
    with pytest.raises(RuntimeError, match=r"x must be float32, got float64"):
        ops.exp_rows(x.double())
    with pytest.raises(RuntimeError, match=r"w must be float32 \[64\], got float32 of 2 dims"):
        ops.scale(x, w[None])
    assert torch.equal(ops.scale(x, w), x * w)
