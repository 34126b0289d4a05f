"""Build of the opcore Python package.

`pip install .` / `pip install -e .` run the project's own `make lib`, copy
build/libopcore.so.0 (and a libopcore.so beside it) into python/opcore/lib/
and include/opcore/*.h into python/opcore/include/opcore/, then build the C
extension opcore._C from src/python/*.c against that libopcore (rpath
$ORIGIN/lib). The lib/ and include/ folders are siblings, so the build tool
inside libopcore (oc_build) finds the headers at <libdir>/../include.
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(ROOT, "python", "opcore")
PKG_LIB = os.path.join(PKG, "lib")
PKG_INC = os.path.join(PKG, "include", "opcore")
BUILD = os.environ.get("OPCORE_BUILD_DIR", "build")  # make's BUILD (relative to ROOT)


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _copy_if_changed(src, dst):
    if os.path.exists(dst) and not os.path.islink(dst):
        with open(src, "rb") as f1, open(dst, "rb") as f2:
            if f1.read() == f2.read():
                return
    if os.path.lexists(dst):
        os.unlink(dst)
    shutil.copy2(src, dst)


def prepare_native():
    """make lib; stage libopcore and the public headers inside the package."""
    make = os.environ.get("MAKE", "make")
    jobs = str(os.cpu_count() or 2)
    cmd = [make, "-C", ROOT, f"-j{jobs}", f"BUILD={BUILD}", "lib"]
    print("opcore: " + " ".join(cmd), flush=True)
    subprocess.check_call(cmd)
    built = os.path.join(ROOT, BUILD, "libopcore.so.0")
    if not os.path.exists(built):
        sys.exit(f"opcore: `make lib` did not produce {built}")
    os.makedirs(PKG_LIB, exist_ok=True)
    _copy_if_changed(built, os.path.join(PKG_LIB, "libopcore.so.0"))
    link = os.path.join(PKG_LIB, "libopcore.so")
    if not (os.path.islink(link) and os.readlink(link) == "libopcore.so.0"):
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink("libopcore.so.0", link)
    os.makedirs(PKG_INC, exist_ok=True)
    for h in glob.glob(os.path.join(ROOT, "include", "opcore", "*.h")):
        _copy_if_changed(h, os.path.join(PKG_INC, os.path.basename(h)))


class BuildPy(build_py):
    def run(self):
        prepare_native()
        super().run()


class BuildExt(build_ext):
    def run(self):
        prepare_native()
        super().run()

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


ext = Extension(
    "opcore._C",
    sources=sorted(glob.glob("src/python/*.c")) + sorted(glob.glob("src/python/*.cc")),
    include_dirs=["include", "src/python"],
    library_dirs=["python/opcore/lib"],
    libraries=["opcore", "ffi"],
    extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type"],
    extra_link_args=["-Wl,-rpath,$ORIGIN/lib"],
    depends=sorted(glob.glob("src/python/*.h") + glob.glob("include/opcore/*.h")),
)

setup(ext_modules=[ext], cmdclass={"build_py": BuildPy, "build_ext": BuildExt})
