"""The `tiles` example library (examples/tiles: NKI's samples written with
opcore/tile.h) from Python: build (cached) and load it, and make every op
differentiable: layer_norm, softmax and matmul with their C backwards (no
Python on either pass), the others with backwards written in PyTorch.

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
BACKWARDS = {"tiles::layer_norm": "tiles::layer_norm_backward",
             "tiles::softmax": "tiles::softmax_backward", "tiles::matmul": "tiles::matmul_backward"}

_lib = None
_autograd = False


# ---- backwards written in PyTorch (register_autograd binds them: gradients and
# tensor inputs by position, then non-tensor inputs and forward results by name)

def _add_backward(grad, a, b):
    return grad, grad


def _rmsnorm_backward(grad, x, w, eps):
    import torch

    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    gw = grad * w
    gx = r * gw - x * r.pow(3) * (gw * x).mean(-1, keepdim=True)
    return gx, (grad * x * r).reshape(-1, x.shape[-1]).sum(0)


def _flash_attention_backward(grad, q, k, v, causal):
    """Recomputes the attention probabilities (as flash attention's
    backward does) and applies softmax's and the matmuls' rules."""
    import math

    import torch

    scale = 1.0 / math.sqrt(q.shape[-1])
    s = q @ k.transpose(-1, -2) * scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    p = s.softmax(-1)
    gp = grad @ v.transpose(-1, -2)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True)) * scale
    return gs @ k, gs.transpose(-1, -2) @ q, p.transpose(-1, -2) @ grad


PY_BACKWARDS = {"tiles::tensor_add": _add_backward, "tiles::rmsnorm": _rmsnorm_backward,
                "tiles::flash_attention": _flash_attention_backward}


def load(build_directory=None, verbose=False):
    """Build (a no-op when unchanged) and load the multicore library `tiles`,
    or take the one this process already loaded; with torch imported,
    register every op's backward. Returns the opcore Library."""
    global _lib, _autograd
    from opcore import custom_op

    _lib = custom_op.loaded_libraries().get("tiles") or custom_op.load(
        name="tiles", compute_srcs=COMPUTE_SRCS, shape_srcs=SHAPE_SRCS, build_directory=build_directory,
        multicore=True, verbose=verbose)
    if not _autograd and "opcore.torch" in sys.modules:
        import opcore.torch

        for fwd, bwd in {**BACKWARDS, **PY_BACKWARDS}.items():
            opcore.torch.register_autograd(fwd, bwd)
        _autograd = True
    return _lib
