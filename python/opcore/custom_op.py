"""Building and loading op libraries (seed 002's ``custom_op`` API).

    from opcore import custom_op
    custom_op.load(name="relu", compute_srcs=["relu.c"], shape_srcs=["shape.c"],
                   build_directory=os.getcwd())
    custom_op.load_library("librelu.so")      # later, or in another process
    torch.ops.my_ops.relu_forward(x)

Both register every op of the library with torch (torch.ops.<lib>.<op>)
once torch is in use, and return a :class:`Library`. Loading never imports
torch: a program that has imported torch gets the ops registered at once,
one that imports it later gets them registered when it does (an import
hook), a JAX- or NumPy-only program never pays for torch (set
OPCORE_NO_TORCH=1 to never register).
"""
import importlib.abc
import importlib.util
import operator
import os
import sys
import threading
import warnings

from opcore import _C, _cache
from opcore._C import BuildError

__all__ = ["Library", "load", "load_library", "load_packaged", "unload", "build", "cache_dir",
           "default_build_directory", "loaded_libraries", "new_project"]

_lock = threading.RLock()
_libraries = {}  # name -> Library
# Unloaded libraries whose torch registrations stay (raising "was unloaded")
# until a library of that name is loaded again.
_unloaded = set()


class Library:
    """A loaded op library: .name (the namespace), .path, .multicore,
    .stack_size, .cflags, .ops ({op name: opcore._C.Op}); ops are also
    attributes (lib.relu_forward(x) calls the C op directly)."""

    def __new__(cls, info):
        # One class per library, named after it: a missing op reads
        # "'Library[tiles]' object has no attribute 'no_such_op'". No
        # __getattr__: CPython specialises attribute loads only on classes
        # without one, so `lib.op(x)` costs what a cached `f = lib.op` does.
        if cls is Library:
            cls = type(f"Library[{info['name']}]", (Library,), {"__module__": __name__})
        return super().__new__(cls)

    def __init__(self, info):
        self.handle = info["handle"]  # identifies this load: a rebuilt file loads as a new handle
        self.name = info["name"]
        self.path = info["path"]
        self.multicore = info["multicore"]
        self.stack_size = info["stack_size"]
        self.cflags = info["cflags"]
        self.ops = {op.name: op for op in info["ops"]}
        self.build_seconds = None  # set by load(): wall time of the build
        self.cached = None         # set by load(): True if nothing was compiled
        self.vec_report = None     # set by load(vec_report=True): the vectorisation report
        for name, op in self.ops.items():  # a library's ops never change (a rebuild loads anew)
            if name not in self.__dict__ and not hasattr(Library, name):  # .path etc. win: lib.ops["path"]
                setattr(self, name, op)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.ops))

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return f"<opcore library {self.name} from {self.path}: {', '.join(self.ops)}>"


def cache_dir(*parts):
    """opcore's cache root joined with `parts`: $OPCORE_CACHE_DIR, else
    $XDG_CACHE_HOME/opcore, else ~/.cache/opcore. The C side uses the same
    rule (oc_build_cache_dir(), `opcore config --cache-dir`): the CLI's
    `opcore build` without -o and load() without build_directory both build
    in cache_dir("build", name), one cache; the profiler keeps its bandwidth
    measurement there and opcore.jax its compiled handler in cache_dir("jax")."""
    return _cache.cache_dir(*parts)


def default_build_directory(name):
    """Where load() builds when no build_directory is given, and `opcore
    build` when given no -o: cache_dir("build", name)."""
    return cache_dir("build", name)


def _torch_wanted():
    return os.environ.get("OPCORE_NO_TORCH", "") in ("", "0")


def _register_with_torch(libs):
    """Register `libs` with torch (torch is imported already)."""
    from opcore import torch as _torch_glue

    for lib in libs:
        _torch_glue.register_library(lib)


class _TorchImportHook(importlib.abc.MetaPathFinder):
    """Registers the loaded libraries with torch right after torch itself is
    imported: loading a library never imports torch (it costs seconds a
    JAX-only program should not pay), yet torch.ops.<lib> works in a
    program that imports torch after loading. One shot: it leaves
    sys.meta_path at torch's import."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" or path is not None:
            return None
        _remove_torch_hook()
        spec = importlib.util.find_spec("torch")  # the other finders' answer
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            try:
                with _lock:
                    _register_with_torch(list(_libraries.values()))
            except Exception as e:  # noqa: BLE001  (never break `import torch` itself)
                warnings.warn(f"opcore: registering the loaded op libraries with torch failed: {e!r}",
                              RuntimeWarning, stacklevel=2)

        spec.loader.exec_module = exec_module
        return spec


_torch_hook = None


def _remove_torch_hook():
    global _torch_hook
    with _lock:
        if _torch_hook is not None:
            try:
                sys.meta_path.remove(_torch_hook)
            except ValueError:
                pass
            _torch_hook = None


def _torch_follow(lib):
    """Register `lib` with torch now if torch is imported, else when it is."""
    global _torch_hook
    if not _torch_wanted():
        return
    if sys.modules.get("torch") is not None:  # None: blocked (`sys.modules["torch"] = None`)
        _register_with_torch([lib])
    elif "torch" in sys.modules:
        return
    elif _torch_hook is None:
        _torch_hook = _TorchImportHook()
        sys.meta_path.insert(0, _torch_hook)


def _as_list(srcs, what):
    if srcs is None:
        return []
    if isinstance(srcs, (str, bytes, os.PathLike)):
        return [os.fspath(srcs)]
    try:
        return [os.fspath(s) for s in srcs]
    except TypeError:
        raise TypeError(f"{what} must be a list of paths") from None


class BuildResult(tuple):
    """(path, cached, seconds) from build(), with .vec_report: the
    vectorisation report when build(vec_report=True) asked for one, else None."""

    vec_report = None


def build(name, compute_srcs, shape_srcs, build_directory=None, multicore=False, extra_cflags=None,
          verbose=False, stack_size=0, include_dirs=None, debug=False, force=False, vec_report=False):
    """Build lib<name>.so (reusing the content-hash cache shared with
    `opcore build`) without loading it. Returns (path, cached, seconds).
    Raises BuildError carrying the compiler's output. vec_report=True also
    prints (and keeps in the result's .vec_report) which loops of the compute
    sources the compiler vectorised and, for the others, its reason
    (`opcore build --vec-report`)."""
    # No folder is made here: oc_build checks the name first and only then
    # creates the output directory, so a name like '../x' or 'a b' leaves
    # nothing on disk.
    out = os.fspath(build_directory) if build_directory is not None else default_build_directory(name)
    try:
        stack_size = operator.index(stack_size or 0)
    except TypeError:
        raise TypeError(f"opcore build: library '{name}': stack_size must be a number of bytes (an int), "
                        f"got {stack_size!r}") from None
    if stack_size < 0:
        raise ValueError(f"opcore build: library '{name}': stack_size={stack_size} is not a positive number of bytes")
    res = _C.build(name, _as_list(compute_srcs, "compute_srcs"), _as_list(shape_srcs, "shape_srcs"),
                   out_dir=out, multicore=bool(multicore), stack_size=min(stack_size, 2**64 - 1),
                   cflags=_as_list(extra_cflags, "extra_cflags"), include_dirs=_as_list(include_dirs, "include_dirs"),
                   debug=bool(debug), verbose=bool(verbose), force=bool(force), vec_report=bool(vec_report))
    result = BuildResult(res[:3])
    if vec_report:
        result.vec_report = res[3]
        print(res[3], end="", flush=True)
    return result


def load(name, compute_srcs, shape_srcs, build_directory=None, multicore=False, extra_cflags=None,
         verbose=False, **build_options):
    """Build lib<name>.so from C sources (cached by content) and load it.

    name: the library file's name (lib<name>.so); the ops' namespace is the
    name in the shape source's OC_LIBRARY(). compute_srcs: kernel sources;
    shape_srcs: shape functions + OC_LIBRARY. build_directory: where the
    library goes (default: the per-user cache, default_build_directory(name)).
    multicore: run kernels on every core. extra_cflags: more compiler flags
    (e.g. ['-DSTACK_SIZE=20000'] sets the kernel stack size). verbose: print
    the compiler commands. Further keywords (stack_size, include_dirs, debug,
    force, vec_report) go to build(). Returns the Library (with
    .vec_report set when vec_report=True).
    """
    res = build(name, compute_srcs, shape_srcs, build_directory=build_directory, multicore=multicore,
                extra_cflags=extra_cflags, verbose=verbose, **build_options)
    path, cached, seconds = res
    if verbose:
        print(f"opcore: {path} ({'cached' if cached else f'built in {seconds:.2f}s'})", flush=True)
    lib = load_library(path)
    lib.build_seconds = seconds
    lib.cached = cached
    lib.vec_report = res.vec_report
    return lib


def _frameworks_forget(name, torch_ops=True):
    """Drop the frameworks' registrations of library `name` (torch's only
    with `torch_ops`: a reload keeps them, its ops take them over) and
    reset torch.compile's caches, so compiled graphs re-trace (only what is
    already imported: this never imports torch or jax)."""
    import sys

    if torch_ops and "opcore.torch" in sys.modules:
        sys.modules["opcore.torch"].unregister_library(name)
    if "opcore.jax" in sys.modules:
        sys.modules["opcore.jax"].forget_ops()
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()


def load_library(path):
    """Load an op library built by opcore (load() or `opcore build`) and
    register its ops with torch once torch is imported (now, or when it is:
    loading never imports torch). Loading the same
    file again is a no-op; loading a file rebuilt since (load() after editing
    a kernel) replaces the library in place: torch.ops and opcore.jax see the
    new ops, and torch.compile's caches are reset so compiled graphs
    re-trace. Returns the Library."""
    path = os.fspath(path)
    with _lock:
        info = _C.load_library(path)
        lib = _libraries.get(info["name"])
        # A rebuilt file replaced it, or it is loaded again after an unload:
        # its torch registrations stay, and call the new ops from now on
        # (opcore.torch.register_op), so threads calling them meanwhile are
        # safe.
        replaced = (lib is not None and lib.handle != info["handle"]) or info["name"] in _unloaded
        if lib is not None and lib.handle != info["handle"]:
            lib = None
        _unloaded.discard(info["name"])
        if lib is None:
            lib = Library(info)
            _libraries[lib.name] = lib
        _torch_follow(lib)
        if replaced:
            _frameworks_forget(lib.name, torch_ops=False)
        return lib


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def _packaged_misfit(manifest, lib_path):
    """Why the prebuilt library described by `manifest` cannot run here, or None."""
    import platform

    if not os.path.isfile(lib_path):
        return f"{lib_path} is missing"
    if manifest.get("abi") != _C.ABI_VERSION:
        return f"it was built for opcore ABI {manifest.get('abi')}, this opcore is ABI {_C.ABI_VERSION}"
    if manifest.get("machine") not in (None, platform.machine()):
        return f"it was built for {manifest['machine']}, this machine is {platform.machine()}"
    need = set(manifest.get("cpu_features") or ())
    have = _cpu_flags()
    if need and have is not None and need - have:
        return (f"it was built with -march={manifest.get('march')} and this CPU lacks "
                f"{', '.join(sorted(need - have))}")
    return None


_packaged = {}  # library name -> (package, path) of what load_packaged loaded

# the manifest's fields load_packaged reads: name -> (types, what it must be)
_MANIFEST_FIELDS = {
    "name": ((str,), "a string"),
    "abi": ((int,), "an integer"),
    "machine": ((str, type(None)), "a string"),
    "march": ((str, type(None)), "a string"),
    "cpu_features": ((list, type(None)), "a list of strings"),
    "compute_srcs": ((list,), "a list of strings"),
    "shape_srcs": ((list,), "a list of strings"),
    "include_dirs": ((list,), "a list of strings"),
    "extra_cflags": ((list, type(None)), "a list of strings"),
    "multicore": ((bool,), "true or false"),
    "stack_size": ((int,), "an integer"),
    "sha256": ((str,), "a string"),
}


def _check_manifest(package, path, manifest, name):
    """BuildError naming the field if the manifest is not what
    opcore.setuptools writes (a JSON object of these fields)."""
    def bad(what):
        return BuildError(f"{package}: the manifest {path} is malformed ({what}): "
                          "reinstall the package")

    if not isinstance(manifest, dict):
        raise bad(f"a JSON {type(manifest).__name__} instead of an object")
    for key, (types, want) in _MANIFEST_FIELDS.items():
        if key not in manifest:
            if key in ("compute_srcs", "shape_srcs"):
                raise bad(f"no '{key}'")
            continue
        v = manifest[key]
        ok = isinstance(v, types) and not (isinstance(v, bool) and bool not in types)
        if ok and isinstance(v, list):
            ok = all(isinstance(x, str) for x in v)
        if not ok:
            raise bad(f"'{key}' is {v!r}; expected {want}")
    if manifest.get("name", name) != name:
        raise bad(f"it describes library '{manifest['name']}', not lib{name}.so")


def _sha256(path):
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _refuse_clash(package, name, path):
    """BuildError if library `name` (its op namespace) is loaded already
    from something other than `path`, naming both packages."""
    lib = _libraries.get(name)
    if lib is None or os.path.realpath(lib.path) == os.path.realpath(path):
        return
    owner, _ = _packaged.get(name, (None, None))
    other = f"package '{owner}' ({lib.path})" if owner else lib.path
    raise BuildError(f"{package}: its op library '{name}' ({path}) clashes with the op namespace "
                     f"'{name}' already loaded from {other}: two packages cannot both own "
                     f"torch.ops.{name} in one process (rename one library)")


def load_packaged(package, name=None):
    """Load op library lib<name>.so that opcore.setuptools built into the
    installed package `package` (a module name, e.g. __name__ in the
    package's __init__.py; name defaults to its last component).

    The prebuilt library is loaded when it fits this machine (same opcore
    ABI, the CPU has the instructions it was built for) and is the one the
    package's manifest describes (its sha256). Else it is rebuilt from the
    sources shipped in the package into opcore's cache, in a folder of the
    package's own (this needs a C compiler), and that is loaded; if that
    fails too, BuildError says why the prebuilt one does not fit and why the
    rebuild failed. A library whose name (op namespace) another package
    loaded already is refused, naming both. Returns the Library."""
    import importlib
    import json

    mod = importlib.import_module(package)
    pkg_dir = os.path.dirname(os.path.abspath(mod.__file__))
    name = name or package.rsplit(".", 1)[-1]
    lib_path = os.path.join(pkg_dir, f"lib{name}.so")
    manifest_path = os.path.join(pkg_dir, f"lib{name}.opcore.json")
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise BuildError(f"{package}: cannot read {manifest_path} ({e}): lib{name}.so was not built into this "
                         "package by opcore.setuptools.BuildOpLibraries (reinstall the package)") from None
    _check_manifest(package, manifest_path, manifest, name)
    misfit = _packaged_misfit(manifest, lib_path)
    if misfit is None and "sha256" in manifest and _sha256(lib_path) != manifest["sha256"]:
        raise BuildError(f"{package}: {lib_path} is not the library this package was built "
                         f"with (its sha256 differs from the one in {manifest_path}); reinstall "
                         "the package")
    with _lock:
        before = dict(_libraries)
        if misfit is None:
            _refuse_clash(package, name, lib_path)
            lib = load_library(lib_path)
        else:
            src_root = os.path.join(pkg_dir, "opcore_src", name)
            out = cache_dir("packages", package.split(".", 1)[0], name)
            _refuse_clash(package, name, os.path.join(out, f"lib{name}.so"))
            srcs = {k: [os.path.join(src_root, s) for s in manifest.get(k, [])]
                    for k in ("compute_srcs", "shape_srcs", "include_dirs")}
            try:
                lib = load(name, srcs["compute_srcs"], srcs["shape_srcs"], build_directory=out,
                           multicore=manifest.get("multicore", False),
                           extra_cflags=manifest.get("extra_cflags"),
                           include_dirs=srcs["include_dirs"],
                           stack_size=manifest.get("stack_size", 0))
            except BuildError as e:
                raise BuildError(f"{package}: the prebuilt {lib_path} does not fit ({misfit}), and "
                                 f"rebuilding it from the sources shipped in {src_root} failed: "
                                 f"{e}") from None
        if lib.name != name:
            if before.get(lib.name) is not lib:
                unload(lib.name)
            raise BuildError(f"{package}: {lib.path} holds library '{lib.name}', not '{name}': "
                             "it is not this package's library (reinstall the package)")
        _packaged[name] = (package, lib.path)
        return lib


def unload(name):
    """Unregister library `name` (its OC_LIBRARY name) from opcore, torch and
    JAX; load it (or a new build) again at will. Calls of its ops running on
    other threads are waited for; a call that starts later -- through
    torch.ops, an Op object, a jitted JAX function -- raises OpError naming
    the op and saying its library was unloaded. Its code stays mapped until
    the process ends. torch keeps the op names (each raising that error)
    until a library of that name is loaded again: taking an op out of
    torch's dispatcher while another thread may be dispatching it is not
    safe."""
    with _lock:
        _C.forget_library(name)  # KeyError if no such library is loaded
        _libraries.pop(name, None)
        if "opcore.torch" in sys.modules:
            _unloaded.add(name)
        _frameworks_forget(name, torch_ops=False)


def loaded_libraries():
    """{name: Library} of the libraries loaded through this module."""
    with _lock:
        return dict(_libraries)


def new_project(path, name=None):
    """Write a small op project into `path` (what `opcore new NAME DIR`
    does): kernel.c, shape.c (shape function + OC_LIBRARY), test_<name>.c,
    test_<name>.py, a Makefile whose `make test` builds the library and runs
    both tests, and a README. `name` (default: the directory's name) must be
    a C identifier: it names lib<name>.so and torch.ops.<name>. Nothing is
    overwritten (FileExistsError). Returns the path."""
    path = os.fspath(path)
    if name is None:
        name = os.path.basename(os.path.normpath(os.path.abspath(path)))
    _C.new_project(path, name)
    return path
