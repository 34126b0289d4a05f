"""The complex_ops example library from Python: JAX's FFI rms_norm
(jax-ml/jax examples/ffi) for float32, float64, complex64 and complex128.

    import complex_ops
    lib = complex_ops.load()             # NumPy arrays in, NumPy arrays out
    y = lib.rms_norm(x)                  # x: complex64 [..., n]
    rms_norm = complex_ops.jax_rms_norm() # differentiable under jax.grad

rms_norm_bwd is the vjp in JAX's convention for this holomorphic op
(ct_x = ct_y * dy/dx, no conjugate), as upstream's C++ handler.
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
    """rms_norm_fwd with rms_norm_bwd as its vjp: (y, res) = f(x, eps)."""
    import opcore.jax

    return opcore.jax.with_vjp("complex_ops::rms_norm_fwd", "complex_ops::rms_norm_bwd")
