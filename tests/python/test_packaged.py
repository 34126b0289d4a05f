"""opcore.load_packaged on package folders laid out as opcore.setuptools
installs them (lib<name>.so, lib<name>.opcore.json, opcore_src/<name>/):
two packages that ship a library of one name keep their rebuilds apart and
cannot both load it (the error names both packages); a library file that
is not the package's own is refused; a malformed manifest is a BuildError;
`opcore new --package` refuses a Python keyword. Each load runs in a
process of its own (a process holds one library per name)."""
import json
import os
import platform
import subprocess
import sys
import textwrap

import pytest

from conftest import needs_cli, run_cli as opcore

SHAPE = """
#include <opcore/library.h>
static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }
OC_LIBRARY(dup, m) { oc_def(m, "which(Tensor x) -> Tensor", same, "which"); }
"""
# each package's kernel answers its own number
KERNEL = """
#include <opcore/kernel.h>
oc_tensor *which(const oc_tensor *x) { (void)x; return oc_fill_(oc_dst_tensor(), %d); }
"""


def make_package(site, package, number, fits):
    """site/package: a package shipping libdup.so (kernel answering
    `number`), its manifest and sources, as opcore.setuptools writes them;
    `fits`: whether the prebuilt library fits (else its ABI is another, and
    load_packaged rebuilds it). -> the package folder"""
    from opcore import _C, custom_op

    pkg = site / package
    src = pkg / "opcore_src" / "dup"
    src.mkdir(parents=True)
    (src / "kernel.c").write_text(KERNEL % number)
    (src / "shape.c").write_text(SHAPE)
    path, _, _ = custom_op.build("dup", [str(src / "kernel.c")], [str(src / "shape.c")],
                                 build_directory=str(site.parent / f"build-{package}"))
    (pkg / "libdup.so").write_bytes(open(path, "rb").read())
    manifest = {"name": "dup", "abi": _C.ABI_VERSION if fits else _C.ABI_VERSION + 1000, "march": "",
                "cpu_features": [], "machine": platform.machine(), "compute_srcs": ["kernel.c"],
                "shape_srcs": ["shape.c"], "include_dirs": [], "extra_cflags": None, "multicore": False,
                "stack_size": 0, "sha256": custom_op._sha256(str(pkg / "libdup.so"))}
    (pkg / "libdup.opcore.json").write_text(json.dumps(manifest))
    (pkg / "__init__.py").write_text("")
    return pkg


def child(tmp_path, code):
    """Run `code` with the packages' site on sys.path and a cache of the
    test's own; -> stdout (the process must end well)."""
    env = dict(os.environ, OPCORE_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=600, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


LOAD = """
import numpy as np, opcore
def which(package):
    try:
        lib = opcore.load_packaged(package, "dup")
    except opcore.BuildError as e:
        print(package, "REFUSED", e)
        return
    print(package, int(lib.which(np.zeros(1, np.float32))[0]), lib.path)
"""


@pytest.fixture
def site(tmp_path):
    (tmp_path / "site").mkdir()
    return tmp_path / "site"


@pytest.mark.parametrize("fits", [False, True], ids=["rebuilt", "prebuilt"])
def test_two_packages_with_one_library_name(tmp_path, site, fits):
    make_package(site, "pkga", 1, fits)
    make_package(site, "pkgb", 2, fits)
    out = child(tmp_path, LOAD + "which('pkga'); which('pkgb'); which('pkga')\n").splitlines()
    assert out[0].startswith("pkga 1 "), out
    assert out[1].startswith("pkgb REFUSED"), out
    assert "package 'pkga'" in out[1] and "op namespace 'dup'" in out[1] and "torch.ops.dup" in out[1], out
    assert out[2] == out[0], out  # pkga's ops untouched, loading it again is a no-op
    # each alone (a process each) runs its own kernels: the rebuilds are kept apart
    b = child(tmp_path, LOAD + "which('pkgb')\n")
    a = child(tmp_path, LOAD + "which('pkga')\n")
    assert b.startswith("pkgb 2 ") and a.startswith("pkga 1 "), (a, b)
    if not fits:
        assert f"{os.sep}packages{os.sep}pkga{os.sep}dup{os.sep}libdup.so" in a
        assert f"{os.sep}packages{os.sep}pkgb{os.sep}dup{os.sep}libdup.so" in b


def test_a_foreign_library_file_is_refused(tmp_path, site):
    a = make_package(site, "pkga", 1, True)
    b = make_package(site, "pkgb", 2, True)
    (a / "libdup.so").write_bytes((b / "libdup.so").read_bytes())
    out = child(tmp_path, LOAD + "which('pkga')\n")
    assert out.startswith("pkga REFUSED"), out
    assert "is not the library this package was built with" in out and "sha256" in out, out


@pytest.mark.parametrize("manifest, what", [
    ([1, 2], "a JSON list instead of an object"),
    ("text", "a JSON str instead of an object"),
    ({"compute_srcs": 5, "shape_srcs": ["shape.c"]}, "'compute_srcs' is 5; expected a list of strings"),
    ({"shape_srcs": ["shape.c"]}, "no 'compute_srcs'"),
    ({"compute_srcs": ["kernel.c"], "shape_srcs": ["shape.c"], "multicore": "yes"},
     "'multicore' is 'yes'; expected true or false"),
    ({"compute_srcs": ["kernel.c"], "shape_srcs": ["shape.c"], "name": "other"},
     "it describes library 'other', not libdup.so"),
])
def test_malformed_manifest_is_a_build_error(tmp_path, site, manifest, what):
    a = make_package(site, "pkga", 1, True)
    (a / "libdup.opcore.json").write_text(json.dumps(manifest))
    out = child(tmp_path, LOAD + "which('pkga')\n")
    assert out.startswith("pkga REFUSED"), out
    assert "manifest" in out and "is malformed" in out and what in out, out


@needs_cli
@pytest.mark.parametrize("name", ["class", "import", "None"])
def test_new_package_refuses_a_python_keyword(tmp_path, name):
    p = opcore("new", "--package", name, tmp_path / "p", check=2)
    assert f"'{name}' is a Python keyword" in p.stderr
    assert not (tmp_path / "p").exists()
    opcore("new", "--package", "klass", tmp_path / "q", check=0)  # the next one works
