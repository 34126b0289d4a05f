"""The package's Python API over torch.ops.extension_cpp, with the fake
(meta) kernels and the autograd formula registered the way extension-cpp's
ops.py registers them: torch.library.register_fake / register_autograd."""
import torch
from torch import Tensor

__all__ = ["mymuladd", "myadd_out"]


def mymuladd(a: Tensor, b: Tensor, c: float) -> Tensor:
    """a * b + c in one fused kernel."""
    return torch.ops.extension_cpp.mymuladd.default(a, b, c)


def myadd_out(a: Tensor, b: Tensor, out: Tensor) -> None:
    """out = a + b, written in place."""
    torch.ops.extension_cpp.myadd_out.default(a, b, out)


def _fake_like_a(a, b, *rest):
    # what torch.compile / FakeTensor need: the result's properties only
    torch._check(a.shape == b.shape)
    torch._check(a.dtype == torch.float and b.dtype == torch.float)
    torch._check(a.device == b.device)
    return torch.empty_like(a)


torch.library.register_fake("extension_cpp::mymuladd")(_fake_like_a)
torch.library.register_fake("extension_cpp::mymul")(_fake_like_a)


def _setup_context(ctx, inputs, output):
    a, b, _ = inputs
    # d(a*b+c)/da = b and /db = a: keep only what a requested gradient needs
    ctx.save_for_backward(b if ctx.needs_input_grad[0] else None, a if ctx.needs_input_grad[1] else None)


def _backward(ctx, grad):
    b, a = ctx.saved_tensors
    grad_a = torch.ops.extension_cpp.mymul.default(grad, b) if ctx.needs_input_grad[0] else None
    grad_b = torch.ops.extension_cpp.mymul.default(grad, a) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b, None


torch.library.register_autograd("extension_cpp::mymuladd", _backward, setup_context=_setup_context)
