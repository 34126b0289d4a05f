"""Op libraries inside a pip package: build them when the wheel is built.

    # setup.py of a package `mypkg`
    from setuptools import setup
    from opcore.setuptools import OpLibrary, BuildOpLibraries

    setup(
        name="mypkg", packages=["mypkg"],
        ext_modules=[OpLibrary("mypkg", compute_srcs=["csrc/kernel.c"], shape_srcs=["csrc/shape.c"],
                               package="mypkg")],
        cmdclass={"build_ext": BuildOpLibraries},
    )

    # mypkg/__init__.py: one call, no compiler needed
    import opcore
    lib = opcore.load_packaged(__name__, "mypkg")

An OpLibrary is a setuptools Extension, so every way setuptools builds
(`pip install .`, `pip wheel .`, `python -m build`, an sdist's build,
`pip install -e .`) runs BuildOpLibraries, which builds lib<name>.so with
opcore's build (the content-hash cache of `opcore build`) and puts into the
package, beside the package's Python files:

    lib<name>.so              the prebuilt library
    lib<name>.opcore.json     how it was built: opcore's ABI, the -march and the
                              CPU instructions that implies, the sources, the
                              library's sha256
    opcore_src/<name>/...     the sources (and `depends`: headers), for a rebuild

At import, opcore.load_packaged() loads the prebuilt library when it fits
(same opcore ABI, and the CPU has every instruction it was built for); else
it rebuilds it from the shipped sources (which needs a C compiler there) into
opcore's cache (a folder per package), or raises BuildError saying why the prebuilt one does not
fit and why the rebuild failed.

The build machine's CPU is not the users': the library is compiled with
`march` (default x86-64-v3 on x86-64, AVX2 + FMA, which most x86 machines of
the last ten years have; none elsewhere), not opcore's usual -march=native.
"""
import json
import os
import platform
import shutil
import subprocess

from setuptools import Extension
from setuptools.command.build_ext import build_ext

__all__ = ["OpLibrary", "BuildOpLibraries", "MANIFEST_SUFFIX", "SOURCE_DIR", "cpu_features_of_march"]

MANIFEST_SUFFIX = ".opcore.json"  # lib<name>.opcore.json beside lib<name>.so
SOURCE_DIR = "opcore_src"         # <package>/opcore_src/<name>/<the sources' paths>

# The compiler's predefined macro for an instruction set -> its name in
# /proc/cpuinfo's flags: what load_packaged checks the running CPU for.
_X86_FEATURES = {
    "__SSE3__": "pni", "__SSSE3__": "ssse3", "__SSE4_1__": "sse4_1", "__SSE4_2__": "sse4_2",
    "__POPCNT__": "popcnt", "__AVX__": "avx", "__AVX2__": "avx2", "__FMA__": "fma", "__F16C__": "f16c",
    "__BMI__": "bmi1", "__BMI2__": "bmi2", "__LZCNT__": "abm", "__MOVBE__": "movbe",
    "__AVX512F__": "avx512f", "__AVX512CD__": "avx512cd", "__AVX512BW__": "avx512bw",
    "__AVX512DQ__": "avx512dq", "__AVX512VL__": "avx512vl", "__AVX512VNNI__": "avx512_vnni",
    "__AVX512BF16__": "avx512_bf16", "__AVX512FP16__": "avx512_fp16", "__AVXVNNI__": "avx_vnni",
    "__AMX_TILE__": "amx_tile",
}


def _default_march():
    return "x86-64-v3" if platform.machine() in ("x86_64", "AMD64") else ""


def cpu_features_of_march(march, cc=None):
    """The /proc/cpuinfo flags code compiled with -march=`march` may use
    (x86-64 only; [] elsewhere or for no -march)."""
    if not march or platform.machine() not in ("x86_64", "AMD64"):
        return []
    cc = cc or os.environ.get("CC", "cc")
    p = subprocess.run([cc, f"-march={march}", "-dM", "-E", "-x", "c", os.devnull],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"opcore.setuptools: `{cc} -march={march}` failed: {p.stderr.strip()}")
    macros = {line.split()[1] for line in p.stdout.splitlines() if line.startswith("#define ")}
    return sorted(flag for macro, flag in _X86_FEATURES.items() if macro in macros)


def _as_list(v):
    if v is None:
        return []
    return [os.fspath(v)] if isinstance(v, (str, os.PathLike)) else [os.fspath(x) for x in v]


class OpLibrary(Extension):
    """An opcore op library lib<name>.so in package `package` (default: name).

    compute_srcs / shape_srcs: the kernel and shape sources (as for
    custom_op.load), paths relative to setup.py; depends: headers they
    include (shipped with them); include_dirs, extra_cflags, multicore,
    stack_size: as for custom_op.load; march: the -march the wheel's library
    is built for (default x86-64-v3 on x86-64; "native" only for a wheel that
    stays on the machine that built it)."""

    def __init__(self, name, compute_srcs, shape_srcs, package=None, multicore=False, extra_cflags=None,
                 include_dirs=None, depends=None, stack_size=0, march=None):
        self.lib_name = name
        self.package = package or name
        self.compute_srcs = _as_list(compute_srcs)
        self.shape_srcs = _as_list(shape_srcs)
        self.multicore = bool(multicore)
        self.extra_cflags = _as_list(extra_cflags)
        self.stack_size = int(stack_size or 0)
        self.march = _default_march() if march is None else march
        # sources and depends go into the sdist as any Extension's do
        super().__init__(f"{self.package}.lib{name}", sources=self.compute_srcs + self.shape_srcs,
                         include_dirs=_as_list(include_dirs), depends=_as_list(depends))


class BuildOpLibraries(build_ext):
    """build_ext that builds OpLibrary extensions with opcore (and any other
    Extension as setuptools does)."""

    def get_ext_filename(self, fullname):
        # lib<name>.so, not a Python module's lib<name>.cpython-3xx-....so
        # (setuptools asks with the full dotted name and with its last part)
        for ext in self.extensions or []:
            if isinstance(ext, OpLibrary) and fullname in (ext.name, ext.name.rsplit(".", 1)[-1]):
                return fullname.replace(".", os.sep) + ".so"
        return super().get_ext_filename(fullname)

    def build_extension(self, ext):
        if not isinstance(ext, OpLibrary):
            return super().build_extension(ext)
        from opcore import _C, custom_op

        dest = self.get_ext_fullpath(ext.name)
        pkg_dir = os.path.dirname(dest)
        os.makedirs(pkg_dir, exist_ok=True)
        saved = os.environ.get("OPCORE_MARCH")
        os.environ["OPCORE_MARCH"] = ext.march  # read by opcore's build (empty: no -march)
        try:
            path, cached, seconds = custom_op.build(
                ext.lib_name, ext.compute_srcs, ext.shape_srcs,
                build_directory=os.path.join(self.build_temp, "opcore", ext.lib_name),
                multicore=ext.multicore, extra_cflags=ext.extra_cflags, include_dirs=ext.include_dirs,
                stack_size=ext.stack_size, force=self.force)
        finally:
            if saved is None:
                del os.environ["OPCORE_MARCH"]
            else:
                os.environ["OPCORE_MARCH"] = saved
        shutil.copyfile(path, dest)
        print(f"opcore: {dest} ({'cached' if cached else f'built in {seconds:.2f}s'}, -march={ext.march or '-'})")
        # the sources, where a rebuild at import finds them
        src_root = os.path.join(pkg_dir, SOURCE_DIR, ext.lib_name)
        shutil.rmtree(src_root, ignore_errors=True)
        shipped = {}
        for src in ext.compute_srcs + ext.shape_srcs + list(ext.depends):
            rel = os.path.normpath(src)
            if rel.startswith("..") or os.path.isabs(rel):
                raise ValueError(f"OpLibrary {ext.lib_name}: {src} is outside the project; the sources "
                                 "must be under setup.py's directory to be shipped")
            os.makedirs(os.path.join(src_root, os.path.dirname(rel)), exist_ok=True)
            shutil.copyfile(src, os.path.join(src_root, rel))
            shipped[src] = rel
        manifest = {
            "name": ext.lib_name,
            "opcore_version": _opcore_version(),
            "abi": _C.ABI_VERSION,
            "march": ext.march,
            "cpu_features": cpu_features_of_march(ext.march),
            "machine": platform.machine(),
            "compute_srcs": [shipped[s] for s in ext.compute_srcs],
            "shape_srcs": [shipped[s] for s in ext.shape_srcs],
            "include_dirs": [os.path.normpath(d) for d in ext.include_dirs],
            "extra_cflags": ext.extra_cflags,
            "multicore": ext.multicore,
            "stack_size": ext.stack_size,
            # load_packaged loads only the very library this build made
            "sha256": custom_op._sha256(dest),
        }
        with open(os.path.join(pkg_dir, f"lib{ext.lib_name}{MANIFEST_SUFFIX}"), "w") as f:
            json.dump(manifest, f, indent=1)

    def get_outputs(self):
        # the manifest and shipped sources are outputs too (wheel contents)
        outs = super().get_outputs()
        for ext in self.extensions:
            if isinstance(ext, OpLibrary):
                pkg_dir = os.path.dirname(self.get_ext_fullpath(ext.name))
                outs.append(os.path.join(pkg_dir, f"lib{ext.lib_name}{MANIFEST_SUFFIX}"))
                for d, _, files in os.walk(os.path.join(pkg_dir, SOURCE_DIR, ext.lib_name)):
                    outs += [os.path.join(d, f) for f in files]
        return outs


def _opcore_version():
    import opcore

    return opcore.__version__
