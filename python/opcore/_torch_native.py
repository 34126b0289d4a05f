"""The native CPU kernel of an opcore op in torch's dispatcher.

register(op) registers the C op itself as the op's CPU kernel through
libtorch's stable C ABI (src/python/torch_native.c): torch.ops calls then
never enter Python. It returns False, and the caller keeps the Python
kernel, when this torch has no such ABI, when an argument type has no
encoding in it (Scalar), or when OPCORE_TORCH_NATIVE=0.
"""
import os

import torch

from opcore import _C, _torch_internals

_ready = None


def available():
    """True if this torch has the stable C ABI opcore's native kernels use."""
    global _ready
    if _ready is None:
        _ready = os.environ.get("OPCORE_TORCH_NATIVE", "1") != "0" and _C._torch_native_init(torch._C.__file__)
    return _ready


def register(op, torch_name=None, fresh_only=False):
    """Register `op`'s CPU kernel natively, as torch op <library>::<torch_name>
    (default: the op's own name), returning every result of the op or, with
    fresh_only, only the fresh ones (not the Tensor(a!) arguments it returns).
    Each call bumps the version counters of the tensors it writes in place,
    as torch's own in-place ops do (through a torch internal: not under
    opcore._torch_internals.use_public_api()). False if it must stay in
    Python."""
    return available() and _C._torch_native_impl(op.qualname, torch_name, fresh_only,
                                                  not _torch_internals.use_public_api())


def unregister(library_name):
    """Take out the native kernels of a library's ops (before unloading it)."""
    if _ready:
        _C._torch_native_drop(library_name)
