"""opcore: custom tensor operators written in C, used from PyTorch, JAX and C.

    from opcore import custom_op
    custom_op.load(name="relu", compute_srcs=["relu.c"], shape_srcs=["shape.c"])
    y = torch.ops.my_ops.relu_forward(x)

`import opcore` needs neither torch nor jax, and never imports them:
opcore.torch is imported (and the loaded ops registered with torch) once the
program imports torch itself; opcore.jax only when used.
"""
import os as _os

__version__ = "0.1.0"
version = __version__

from opcore._C import BuildError, OpArgumentError, OpError  # noqa: E402

from opcore import custom_op, errors  # noqa: E402,F401
from opcore.custom_op import load, load_library, load_packaged  # noqa: E402,F401

_PKG = _os.path.dirname(_os.path.abspath(__file__))


def lib_dir():
    """The directory of the libopcore.so this package uses (builds link to it)."""
    from opcore import _C

    return _C.lib_dir()


def include_dir():
    """The directory holding opcore/*.h, as builds use it."""
    from opcore import _C

    return _C.include_dir()


def __getattr__(name):
    # opcore.torch / opcore.jax / opcore.profiler on first attribute access
    if name in ("torch", "jax", "profiler"):
        import importlib

        return importlib.import_module(f"opcore.{name}")
    raise AttributeError(f"module 'opcore' has no attribute {name!r}")


__all__ = ["BuildError", "OpArgumentError", "OpError", "custom_op", "errors", "include_dir", "lib_dir",
           "load", "load_library", "load_packaged", "version", "__version__"]
