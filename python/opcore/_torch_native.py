"""The native CPU kernel of an opcore op in torch's dispatcher.

register(op) registers the C op itself as the op's CPU kernel through
libtorch's stable C ABI (src/python/torch_native.c): torch.ops calls then
never enter Python. It returns False, and the caller keeps the Python
kernel, when this torch has no such ABI, when an argument type has no
encoding in it (Scalar), or when OPCORE_TORCH_NATIVE=0.
"""
import os

import torch

from opcore import _C

_ready = None


def available():
    """True if this torch has the stable C ABI opcore's native kernels use."""
    global _ready
    if _ready is None:
        _ready = os.environ.get("OPCORE_TORCH_NATIVE", "1") != "0" and _C._torch_native_init(torch._C.__file__)
    return _ready


def register(op):
    """Register `op`'s CPU kernel natively; False if it must stay in Python."""
    return available() and _C._torch_native_impl(op.qualname)
