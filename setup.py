"""Build of the opcore Python package.

`pip install .`, `pip wheel .`, `pip install -e .` and a build from the sdist
all run the project's own `make package` (mk/package.mk), which stages the
native parts under build/pkg/ in the package's layout, and copy them into
python/opcore/:

    lib/libopcore.so.0        libopcore, its C dependencies linked in, stripped
    lib/libopcore.so          linker script INPUT(libopcore.so.0): `-lopcore` works
    lib/pkgconfig/opcore.pc   for C hosts (or `opcore config --cflags --libs`)
    lib/opcore_jax_ffi-*.so   the JAX FFI handler, when jaxlib is importable here
    bin/opcore                the CLI; the `opcore` command and `python -m opcore` run it
    include/opcore/*.h        the C API
    _jax_ffi_handler.c        the handler's source, compiled at first use when no
                              prebuilt handler fits the installed jaxlib
    _torch_boxed_kernel.cc    the torch kernel shim's sources (opcore/_torch_native.py), for
    _torch_autograd_kernel.cc `python -m opcore build-torch-shim`
    torch_kernels/*.so        the shim, built for the torch this build sees (when torch
                              is importable here: `pip install --no-build-isolation`,
                              `make dist`); `make python` builds it for the tree

then build the C extension opcore._C from src/python/*.c against that
libopcore (rpath $ORIGIN/lib). lib/ and include/ are siblings, so the build
tool inside libopcore finds the headers at <libdir>/../include.

Needs make, a C11 compiler and the -dev packages of libffi, libxxhash and
zlib (scripts/install-deps.sh installs them on Debian).
"""
import glob
import importlib.util
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(ROOT, "python", "opcore")
BUILD = os.environ.get("OPCORE_BUILD_DIR", "build")  # make's BUILD (relative to ROOT)
STAGED = ("lib", "bin", "include")  # the folders `make package` fills, copied whole
HANDLER_SRC = os.path.join("src", "jax", "ffi_handler.c")
TORCH_SHIM_SRCS = {os.path.join("src", "torch", "boxed_kernel.cc"): "_torch_boxed_kernel.cc",
                   os.path.join("src", "torch", "autograd_kernel.cc"): "_torch_autograd_kernel.cc"}


def _copy_if_changed(src, dst):
    if os.path.exists(dst) and not os.path.islink(dst):
        with open(src, "rb") as f1, open(dst, "rb") as f2:
            if f1.read() == f2.read():
                return
    if os.path.lexists(dst):
        os.unlink(dst)
    shutil.copy2(src, dst)


def _sync_tree(src, dst):
    """Make dst hold exactly src's files (copying only what changed, so an
    editable install's running processes keep their mapped libopcore)."""
    want = set()
    for d, _, files in os.walk(src):
        for f in files:
            rel = os.path.relpath(os.path.join(d, f), src)
            want.add(rel)
            os.makedirs(os.path.join(dst, os.path.dirname(rel)), exist_ok=True)
            _copy_if_changed(os.path.join(src, rel), os.path.join(dst, rel))
    for d, _, files in os.walk(dst):
        for f in files:
            p = os.path.join(d, f)
            if os.path.relpath(p, dst) not in want:
                os.unlink(p)


def _jax_ffi_include():
    """jaxlib's include directory when jaxlib is importable in this build
    environment and ships the XLA FFI C header, else None."""
    if os.environ.get("OPCORE_NO_JAX_HANDLER", "") not in ("", "0"):
        return None
    try:
        spec = importlib.util.find_spec("jaxlib")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        inc = os.path.join(loc, "include")
        if os.path.isfile(os.path.join(inc, "xla", "ffi", "api", "c_api.h")):
            return inc
    return None


_prepared = False


def prepare_native():
    """make package; stage its output and the handler source in the package."""
    global _prepared
    if _prepared:
        return
    make = os.environ.get("MAKE", "make")
    cmd = [make, "-C", ROOT, f"-j{os.cpu_count() or 2}", f"BUILD={BUILD}", "package"]
    jax_inc = _jax_ffi_include()
    if jax_inc:
        import importlib.metadata
        cmd += [f"JAX_FFI_INCLUDE={jax_inc}", f"JAXLIB_VERSION={importlib.metadata.version('jaxlib')}"]
    print("opcore: " + " ".join(cmd), flush=True)
    try:
        subprocess.check_call(cmd)
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"opcore: `{' '.join(cmd)}` failed ({e}); building opcore needs make, a C11 "
                 "compiler and the -dev packages of libffi, libxxhash and zlib")
    staged = os.path.join(ROOT, BUILD, "pkg")
    for sub in STAGED:
        _sync_tree(os.path.join(staged, sub), os.path.join(PKG, sub))
    _copy_if_changed(os.path.join(ROOT, HANDLER_SRC), os.path.join(PKG, "_jax_ffi_handler.c"))
    for src, name in TORCH_SHIM_SRCS.items():
        _copy_if_changed(os.path.join(ROOT, src), os.path.join(PKG, name))
    _prepared = True


def build_torch_shim(pkg_dir, import_root):
    """The torch kernel shim into pkg_dir/torch_kernels/, when torch is
    importable in this build environment (else the package falls back to
    the Python route, and says how to build it). opcore is imported from
    import_root, where build_ext has just put opcore._C (a fresh sdist's
    python/ has none)."""
    if importlib.util.find_spec("torch") is None:
        print("opcore: torch is not importable here: no torch kernel shim in this build", flush=True)
        return
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from opcore import _torch_native as t; "
            "print(t.build_shim(sys.argv[2], sys.argv[3], '$ORIGIN/../lib', strip=True))")
    out = os.path.join(pkg_dir, "torch_kernels")
    subprocess.check_call([sys.executable, "-c", code, import_root, out,
                           os.path.join(PKG, "lib", "libopcore.so.0")])


class BuildPy(build_py):
    def run(self):
        prepare_native()
        super().run()


class BuildExt(build_ext):
    def run(self):
        prepare_native()
        super().run()
        if not (self.inplace or getattr(self, "editable_mode", False)):
            build_torch_shim(os.path.join(self.build_lib, "opcore"), self.build_lib)

    def build_extensions(self):
        # One C++ source (src/python/torch_native_throw.cc, see its header
        # comment) among the C ones: it gets C++ flags instead of -std=c11.
        compile_one = self.compiler._compile

        def _compile(obj, src, ext, cc_args, extra_postargs, pp_opts):
            if src.endswith(".cc"):
                extra_postargs = [a for a in extra_postargs if not a.startswith("-std=")] + [
                    "-std=c++17", "-fvisibility=hidden"]
            compile_one(obj, src, ext, cc_args, extra_postargs, pp_opts)

        self.compiler._compile = _compile
        super().build_extensions()


# _C needs libopcore and, for its one C++ file, libstdc++ and libgcc_s
# (dynamic: the C++ exception it throws must meet torch's own runtime; every
# manylinux system has both).
ext = Extension(
    "opcore._C",
    sources=sorted(glob.glob("src/python/*.c")) + sorted(glob.glob("src/python/*.cc")),
    include_dirs=["include", "src/python"],
    library_dirs=["python/opcore/lib"],
    libraries=["opcore"],
    extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type"],
    extra_link_args=["-Wl,-rpath,$ORIGIN/lib", "-s", "-Wl,--exclude-libs,ALL"],
    depends=sorted(glob.glob("src/python/*.h") + glob.glob("include/opcore/*.h")),
)

# The `opcore` command: a /bin/sh script that execs the C tool inside the
# installed package (opcore/bin/opcore), so a call costs the C program's few
# milliseconds, not a Python start-up (a console script's 25+ ms). The tool
# is found from the script's own folder by the install scheme's relative path
# from scripts to purelib, the same for a venv, --user and system installs;
# where it is not there (an editable install, --target) the script falls back
# to `python -m opcore`. (The C tool itself cannot be the script: its rpath
# would not find libopcore, and auditwheel refuses an ELF file it cannot
# resolve.)
LAUNCHER = os.path.join(BUILD, "launcher", "opcore")


def write_launcher():
    import sysconfig

    rel = os.path.relpath(sysconfig.get_path("purelib"), sysconfig.get_path("scripts"))
    text = ("#!/bin/sh\n"
            "# opcore's command: the C tool inside the installed opcore package (written by setup.py)\n"
            f'exe="${{0%/*}}/{rel}/opcore/bin/opcore"\n'
            '[ -x "$exe" ] && exec "$exe" "$@"\n'
            'py="${0%/*}/python3"; [ -x "$py" ] || py=python3\n'
            'exec "$py" -m opcore "$@"\n')
    os.makedirs(os.path.dirname(os.path.join(ROOT, LAUNCHER)), exist_ok=True)
    with open(os.path.join(ROOT, LAUNCHER), "w") as f:
        f.write(text)
    os.chmod(os.path.join(ROOT, LAUNCHER), 0o755)


write_launcher()
setup(ext_modules=[ext], scripts=[LAUNCHER], cmdclass={"build_py": BuildPy, "build_ext": BuildExt})
