"""The complex_ops example library from Python: JAX's FFI rms_norm
(jax-ml/jax examples/ffi) for float32, float64, complex64 and complex128.

    import complex_ops
    lib = complex_ops.load()               # NumPy arrays in, NumPy arrays out
    y = lib.rms_norm(x)                    # x: complex64 [..., n]
    rms_norm = complex_ops.jax_rms_norm()  # y = rms_norm(x): differentiable under jax.grad
    rms_norm = complex_ops.torch_rms_norm()  # the same under torch.autograd

rms_norm_bwd is the vjp in JAX's convention for this holomorphic op
(ct_x = ct_y * dy/dx, no conjugate), as upstream's C++ handler. PyTorch's
complex gradients are conjugate Wirtinger derivatives (grad_x =
conj(dy/dx) * grad_y), so its backward conjugates around the same kernel;
for float32/64 the two agree.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
COMPUTE_SRCS = [os.path.join(HERE, "rms_norm.c")]
SHAPE_SRCS = [os.path.join(HERE, "shape.c")]


def load(build_directory=None, verbose=False):
    """Build (a no-op when unchanged) and load the library, or take the one
    this process already loaded."""
    from opcore import custom_op

    return custom_op.loaded_libraries().get("complex_ops") or custom_op.load(
        name="complex_ops", compute_srcs=COMPUTE_SRCS, shape_srcs=SHAPE_SRCS, build_directory=build_directory,
        verbose=verbose)


def jax_rms_norm():
    """rms_norm(x, eps=1e-5) -> y, differentiable: rms_norm_fwd saves the
    per-row scale `res` for rms_norm_bwd, as upstream's custom_vjp."""
    import opcore.jax

    fwd = opcore.jax.with_vjp("complex_ops::rms_norm_fwd", "complex_ops::rms_norm_bwd")
    return lambda x, eps=1e-5: fwd(x, eps)[0]


def _torch_backward(grad_y, grad_res, x, *, res):
    # grad_res: res is a saved value (the scale), not an output to differentiate
    import torch

    del grad_res
    conj = torch.conj_physical
    return conj(torch.ops.complex_ops.rms_norm_bwd(conj(grad_y), res, x))


def torch_rms_norm():
    """rms_norm(x, eps=1e-5) -> y for torch tensors, differentiable."""
    import torch

    import opcore.torch

    load()
    opcore.torch.register_autograd("complex_ops::rms_norm_fwd", _torch_backward)
    return lambda x, eps=1e-5: torch.ops.complex_ops.rms_norm_fwd(x, eps)[0]
