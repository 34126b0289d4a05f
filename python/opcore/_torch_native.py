"""opcore.torch's route: the torch kernel shim, or the Python fallback.

The native route is the shim (src/torch/boxed_kernel.cc and
autograd_kernel.cc, one shared object built against one torch's headers):
it registers each op's CPU kernel as a boxed C++ kernel of torch's
dispatcher, and register_autograd's pairings as C++ autograd nodes, so
torch.ops calls never enter Python. It is built by `make python`, by the
wheel build and `pip install` of the sdist (for the torch they see; the
wheel carries it), or by `python -m opcore build-torch-shim` (into opcore's
cache), and never on import. It is looked up next to this file
(torch_kernels/), then in the cache; its name holds the torch version and
a hash of the shim's sources and the torch build.

The fallback route is opcore's Python kernel (the Op object) and
torch.library.register_autograd: public torch.library APIs only. It serves
when the shim for this torch is not there (one line on stderr says how to
build it), when OPCORE_TORCH_NATIVE=0 (read at each registration), and for
what the shim does not carry (Scalar arguments, Python-callable backwards,
Tensor[] pairings). route() names the route in use, route_error() why the
shim is not.
"""
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from opcore import _C, _cache

_HERE = Path(__file__).resolve().parent
# the shim's sources: in the source tree (editable install), else an installed package's copies
_SHIM_SRC_SETS = ((_HERE.parents[1] / "src" / "torch" / "boxed_kernel.cc",
                   _HERE.parents[1] / "src" / "torch" / "autograd_kernel.cc"),
                  (_HERE / "_torch_boxed_kernel.cc", _HERE / "_torch_autograd_kernel.cc"))
PREBUILT_DIR = _HERE / "torch_kernels"
BUILD_COMMAND = "python -m opcore build-torch-shim"

_loaded = None  # True / False once looked for
_error = None   # why the shim is not in use

# torch's intra-op threads, lent to multicore launches on either route (and
# to direct calls on torch tensors): torch's stable C ABI, no shim needed
_C._torch_native_init(torch._C.__file__)


def _shim_sources():
    for srcs in _SHIM_SRC_SETS:
        if all(p.exists() for p in srcs):
            return srcs
    raise RuntimeError("the shim's sources are missing (src/torch/boxed_kernel.cc and autograd_kernel.cc, or "
                       "the package's _torch_boxed_kernel.cc and _torch_autograd_kernel.cc): reinstall opcore")


def shim_name(srcs=None):
    """The file name of the shim for this torch: its version, and a hash of
    the shim's sources and the torch build."""
    h = hashlib.sha256()
    for src in srcs or _shim_sources():
        h.update(src.read_bytes())
    h.update(f"{torch.__version__} {torch.version.git_version} {torch._C._GLIBCXX_USE_CXX11_ABI}".encode())
    return f"opcore_torch_shim-torch{torch.__version__}-{h.hexdigest()[:16]}.so"


def build_shim(out_dir, libopcore=None, rpath=None, strip=False):
    """Compile the shim into out_dir (if not there already) against the
    installed torch and libopcore (default: this package's), finding
    libopcore at run time through `rpath` (default: $ORIGIN/../lib when
    out_dir is the package's torch_kernels/, else libopcore's folder),
    stripped if `strip` (a wheel's); its path."""
    srcs = _shim_sources()
    out = Path(out_dir) / shim_name(srcs)
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tdir = Path(torch.__file__).resolve().parent
    lib = Path(libopcore or _HERE / "lib" / "libopcore.so.0").resolve()
    inc = _HERE / "include" if (_HERE / "include" / "opcore").is_dir() else _HERE.parents[1] / "include"
    if rpath is None:
        rpath = "$ORIGIN/../lib" if lib.parent == out.parent.resolve().parent / "lib" else str(lib.parent)
    fd, tmp = tempfile.mkstemp(prefix=out.stem + ".", suffix=".so.tmp", dir=out.parent)
    os.close(fd)
    cmd = [os.environ.get("CXX", "c++"), "-std=c++20", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
           f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}", "-I", str(inc),
           "-isystem", str(tdir / "include"), "-isystem", str(tdir / "include" / "torch" / "csrc" / "api" / "include"),
           *map(str, srcs), "-o", tmp, str(lib), "-L", str(tdir / "lib"), "-lc10", "-ltorch_cpu",
           "-Wl,-rpath," + rpath, "-Wl,-rpath," + str(tdir / "lib"), *(["-s"] if strip else [])]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("compiling the shim failed:\n$ " + " ".join(cmd) + "\n" + r.stdout + r.stderr)
        os.replace(tmp, out)  # atomic: concurrent builders are harmless
    except OSError as e:
        raise RuntimeError(f"compiling the shim failed: {e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def _find_shim():
    name = shim_name()
    for d in (PREBUILT_DIR, Path(_cache.cache_dir("torch"))):
        if (d / name).exists():
            return d / name
    raise RuntimeError(f"no torch kernel shim for torch {torch.__version__} ({name} is neither in {PREBUILT_DIR} "
                       "nor in opcore's cache)")


def _load():
    global _loaded, _error
    try:
        _loaded = _C._torch_native_use_shim(str(_find_shim()))
    except (RuntimeError, OSError) as e:
        _loaded, _error = False, str(e)
        print(f"opcore: {_error}; torch ops run on the Python fallback route. Build the shim with: "
              f"{BUILD_COMMAND}", file=sys.stderr)


def forced_off():
    """OPCORE_TORCH_NATIVE=0: every registration takes the fallback route."""
    return os.environ.get("OPCORE_TORCH_NATIVE", "1") == "0"


def available():
    """True if registrations now take the shim (it is loaded and not switched off)."""
    if forced_off():
        return False
    if _loaded is None:
        _load()
    return _loaded


def route():
    """"native" (the shim) or "fallback" (the Python route), for registrations made now."""
    return "native" if available() else "fallback"


def route_error():
    """Why the shim is not in use, or None."""
    available()
    return _error


def register(op, torch_name=None, fresh_only=False):
    """Register `op`'s CPU kernel through the shim, as torch op
    <library>::<torch_name> (default: the op's own name), returning every
    result of the op or, with fresh_only, only the fresh ones (not the
    Tensor(a!) arguments it returns). Each call bumps the version counters
    of the tensors it writes in place, as torch's own in-place ops do.
    False if it must stay in Python."""
    return available() and _C._torch_native_impl(op.qualname, torch_name, fresh_only)


def unregister(library_name, op_name=None):
    """Take out the native kernels of a library's ops, or of its op op_name."""
    if _loaded:
        _C._torch_native_drop(library_name, op_name)


def retire(library_name, op_name):
    """Its library was reloaded without op op_name: its native kernels raise
    OpError saying so."""
    if _loaded:
        _C._torch_native_retire(library_name, op_name)


def swap(op):
    """Make the native kernels registered for op's name call `op` (a reload
    of its library with the schema unchanged): the number swapped, -1 if
    the schema differs (nothing swapped)."""
    return _C._torch_native_swap(op.qualname) if _loaded else 0
