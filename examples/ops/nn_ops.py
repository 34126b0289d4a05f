"""The nn_ops example library from Python: build (cached) and load it, and
make its forward ops differentiable with their backward ops.

    import nn_ops
    ops = nn_ops.load()                  # torch.ops.nn_ops
    out, mean, rstd = ops.layer_norm(x, [256], weight, bias)

Each op shows one part of the schema language; see README.md.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = ["layer_norm.c", "sgd.c", "concat.c", "avg_pool.c", "linear.c", "global_sum.c"]
COMPUTE_SRCS = [os.path.join(HERE, k) for k in KERNELS]
SHAPE_SRCS = [os.path.join(HERE, "shape.c")]

# forward -> backward, bound by name (see opcore.torch.register_autograd)
BACKWARDS = {
    "nn_ops::layer_norm": "nn_ops::layer_norm_backward",
    "nn_ops::avg_pool2d": "nn_ops::avg_pool2d_backward",
    "nn_ops::linear": "nn_ops::linear_backward",
    "nn_ops::global_sum": "nn_ops::global_sum_backward",
}

_lib = None
_autograd = False


def _concat_backward(grad, xs, dim=0):
    # the gradient of each input is its slice of grad (a Tensor[] input takes
    # a list of gradients, so this backward is Python)
    return (list(grad.split([x.shape[dim] for x in xs], dim)),)


def load(build_directory=None, verbose=False):
    """Build (a no-op when unchanged) and load the library -- or take the one
    this process already loaded; with torch, register the autograd pairs and
    the concat backward. Returns the opcore Library (with torch,
    torch.ops.nn_ops serves the ops too)."""
    global _lib, _autograd
    from opcore import custom_op

    _lib = custom_op.loaded_libraries().get("nn_ops") or custom_op.load(
        name="nn_ops", compute_srcs=COMPUTE_SRCS, shape_srcs=SHAPE_SRCS, build_directory=build_directory,
        verbose=verbose)
    if not _autograd and "opcore.torch" in __import__("sys").modules:
        import opcore.torch

        for fwd, bwd in BACKWARDS.items():
            opcore.torch.register_autograd(fwd, bwd)
        opcore.torch.register_autograd("nn_ops::concat", _concat_backward)
        _autograd = True
    return _lib
