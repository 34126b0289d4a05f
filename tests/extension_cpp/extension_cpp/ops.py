"""The package's Python API over torch.ops.extension_cpp, with the fake
(meta) kernels and the autograd formulas registered the way extension-cpp's
ops.py registers them: torch.library.register_fake / register_autograd for
mymuladd, and for the LLTM of its history (commit 015c15d) an
autograd.Function over lltm_forward / lltm_backward plus a fake kernel of
lltm_forward (upstream's impl_abstract, now named register_fake)."""
from typing import Tuple

import torch
from torch import Tensor

__all__ = ["mymuladd", "myadd_out", "lltm", "reference_lltm"]


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


def lltm(input: Tensor, weights: Tensor, bias: Tensor, old_h: Tensor, old_cell: Tensor) -> Tuple[Tensor, Tensor]:
    """One LLTM step: (new_h, new_cell), differentiable in every input."""
    return LLTMFunction.apply(input, weights, bias, old_h, old_cell)


class LLTMFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weights, bias, old_h, old_cell):
        results = torch.ops.extension_cpp.lltm_forward.default(input, weights, bias, old_h, old_cell)
        # lltm_backward takes new_cell .. gate_weights (results 1-6) and the weights
        ctx.save_for_backward(*results[1:], weights)
        return results[0], results[1]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_h, grad_cell):
        d_old_h, d_input, d_weights, d_bias, d_old_cell = torch.ops.extension_cpp.lltm_backward.default(
            grad_h, grad_cell, *ctx.saved_tensors)
        # the op's results are in upstream's order; forward's inputs are (input, weights, bias, old_h, old_cell)
        return d_input, d_weights, d_bias, d_old_h, d_old_cell


@torch.library.register_fake("extension_cpp::lltm_forward")
def _lltm_forward_fake(input, weights, bias, old_h, old_cell):
    X = torch.cat([old_h, input], dim=1)
    gate_weights = torch.nn.functional.linear(X, weights, bias)
    state = old_h.new_empty(old_h.shape)
    return (torch.empty_like(state), torch.empty_like(state), torch.empty_like(state), torch.empty_like(state),
            torch.empty_like(state), X, gate_weights)


def reference_lltm(input: Tensor, weights: Tensor, bias: Tensor, old_h: Tensor,
                   old_cell: Tensor) -> Tuple[Tensor, Tensor]:
    """The LLTM step in PyTorch ops, what lltm is checked against."""
    X = torch.cat([old_h, input], dim=1)
    gates = torch.nn.functional.linear(X, weights, bias).chunk(3, dim=1)  # one matmul for all three gates
    input_gate, output_gate = torch.sigmoid(gates[0]), torch.sigmoid(gates[1])
    candidate_cell = torch.nn.functional.elu(gates[2])  # an ELU where an LSTM has tanh
    new_cell = old_cell + candidate_cell * input_gate
    return torch.tanh(new_cell) * output_gate, new_cell
