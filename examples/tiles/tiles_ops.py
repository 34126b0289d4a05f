"""The `tiles` example library (examples/tiles: NKI's samples written with
opcore/tile.h) from Python: build (cached) and load it, and make layer_norm
differentiable with its backward.

    import tiles_ops
    tiles_ops.load()                       # torch.ops.tiles.* when torch is imported
    y = torch.ops.tiles.matmul(a, b)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = ["add.c", "matmul.c", "rmsnorm.c", "layer_norm.c", "softmax.c", "flash_attention.c"]
COMPUTE_SRCS = [os.path.join(HERE, k) for k in KERNELS]
SHAPE_SRCS = [os.path.join(HERE, "shape.c")]
BACKWARDS = {"tiles::layer_norm": "tiles::layer_norm_backward"}

_lib = None
_autograd = False


def load(build_directory=None, verbose=False):
    """Build (a no-op when unchanged) and load the multicore library `tiles`,
    or take the one this process already loaded; with torch imported,
    register layer_norm's backward. Returns the opcore Library."""
    global _lib, _autograd
    from opcore import custom_op

    _lib = custom_op.loaded_libraries().get("tiles") or custom_op.load(
        name="tiles", compute_srcs=COMPUTE_SRCS, shape_srcs=SHAPE_SRCS, build_directory=build_directory,
        multicore=True, verbose=verbose)
    if not _autograd and "opcore.torch" in sys.modules:
        import opcore.torch

        for fwd, bwd in BACKWARDS.items():
            opcore.torch.register_autograd(fwd, bwd)
        _autograd = True
    return _lib
