"""The native CPU kernel of an opcore op in torch's dispatcher.

register(op) registers the C op itself as the op's CPU kernel
(src/python/torch_native.c): torch.ops calls then never enter Python. It
returns False, and the caller keeps the Python kernel, when this torch has
no stable C ABI, when an argument type has no encoding in it (Scalar), or
when OPCORE_TORCH_NATIVE=0.

Two routes register it. By default a boxed C++ kernel of torch's dispatcher
(src/torch/boxed_kernel.cc, "the shim"), built once per torch version
against that torch's headers, which reads torch's argument stack in place;
else libtorch's stable C ABI (torch_library_impl), whose conversions cost
about 1.4x a C++ extension op per call. The shim is looked up next to this
file (torch_kernels/, built by `make python`), then in opcore's cache
(cache_dir("torch")), and otherwise compiled there at first use with the
system C++ compiler ($CXX, default c++; about 10 s, once per torch version).
OPCORE_TORCH_BOXED=0, or torch's public API only (OPCORE_TORCH_PUBLIC_API=1:
the shim is torch internals), keeps the stable route; so does a failure to
build the shim (route_error() says why). route() names the route in use.
The same shim carries register_autograd's C++ Autograd kernel
(src/torch/autograd_kernel.cc; opcore.torch registers it through
_C._torch_autograd_impl where route() is "boxed").
"""
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import torch

from opcore import _C, _cache, _torch_internals

_ready = None
_route = None        # "boxed" or "stable" once decided
_route_error = None  # why the shim is not in use, when it was wanted

_HERE = Path(__file__).resolve().parent
# the shim's sources: in the source tree (editable install), else an installed package's copies
_SHIM_SRC_SETS = ((_HERE.parents[1] / "src" / "torch" / "boxed_kernel.cc",
                   _HERE.parents[1] / "src" / "torch" / "autograd_kernel.cc"),
                  (_HERE / "_torch_boxed_kernel.cc", _HERE / "_torch_autograd_kernel.cc"))
PREBUILT_DIR = _HERE / "torch_kernels"


def _shim_sources():
    for srcs in _SHIM_SRC_SETS:
        if all(p.exists() for p in srcs):
            return srcs
    raise RuntimeError("the shim's sources are missing (src/torch/boxed_kernel.cc and autograd_kernel.cc, or "
                       "the package's _torch_boxed_kernel.cc and _torch_autograd_kernel.cc): reinstall opcore")


def _torch_dir():
    return Path(torch.__file__).resolve().parent


def shim_name(srcs):
    """The file name of the shim for this torch and these shim sources: the
    torch version and a hash of the sources, the torch build and the
    compiler."""
    h = hashlib.sha256()
    for src in srcs:
        h.update(src.read_bytes())
    h.update(f"{torch.__version__} {torch.version.git_version} {torch._C._GLIBCXX_USE_CXX11_ABI}".encode())
    h.update(os.environ.get("CXX", "c++").encode())
    return f"opcore_torch_boxed-torch{torch.__version__}-{h.hexdigest()[:16]}.so"


def build_shim(out_dir):
    """Compile the shim into out_dir (if not there already); its path."""
    srcs = _shim_sources()
    out = Path(out_dir) / shim_name(srcs)
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tdir = _torch_dir()
    fd, tmp = tempfile.mkstemp(prefix=out.stem + ".", suffix=".so.tmp", dir=out.parent)
    os.close(fd)
    cmd = [os.environ.get("CXX", "c++"), "-std=c++20", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
           f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
           "-isystem", str(tdir / "include"), "-isystem", str(tdir / "include" / "torch" / "csrc" / "api" / "include"),
           *map(str, srcs), "-o", tmp, "-L", str(tdir / "lib"), "-lc10", "-ltorch_cpu", "-Wl,-rpath," + str(tdir / "lib")]
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


def _find_or_build_shim():
    """The one `make python` built, else the cache's (built there if need be)."""
    prebuilt = PREBUILT_DIR / shim_name(_shim_sources())
    return prebuilt if prebuilt.exists() else build_shim(_cache.cache_dir("torch"))


def _choose_route():
    global _route, _route_error
    _route = "stable"
    if os.environ.get("OPCORE_TORCH_BOXED", "1") == "0" or _torch_internals.use_public_api():
        return
    try:
        if _C._torch_native_use_boxed(str(_find_or_build_shim())):
            _route = "boxed"
    except (RuntimeError, OSError) as e:
        _route_error = str(e)


def available():
    """True if this torch has the stable C ABI opcore's native kernels use."""
    global _ready
    if _ready is None:
        _ready = os.environ.get("OPCORE_TORCH_NATIVE", "1") != "0" and _C._torch_native_init(torch._C.__file__)
        if _ready:
            _choose_route()
    return _ready


def route():
    """How native kernels register: "boxed" (the C++ shim), "stable" (the
    stable C ABI), or None (no native kernels: the Python kernel serves)."""
    return _route if available() else None


def route_error():
    """Why the shim is not in use although it was wanted, or None."""
    available()
    return _route_error


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
