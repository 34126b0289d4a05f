"""Ops inside a pip package, as its author ships it and its user installs it
(docs/packaging.md):

    opcore new --package shipdemo      a package whose setup.py uses opcore.setuptools
    pip wheel ./shipdemo               builds libshipdemo.so into the wheel
    pip install shipdemo-*.whl         into a fresh venv WITHOUT system site packages
    import shipdemo                    loads the prebuilt library: no compiler on PATH

and tests/extension_cpp (pytorch/extension-cpp's package ported to opcore
C) built and installed the same way, its test file run in that venv.

opcore itself is installed into the venv from a wheel built from this tree;
torch (the pinned 2.13.0 CPU build) and jax come from test_package's
frameworks venv through a .pth file (a 1.5 GB install per venv otherwise).
The package wheels are built with pip's build isolation, opcore's wheel
offered through --find-links, as a user without opcore's sources builds.
The time of wheel build + install + first call is printed (not asserted).
"""
import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from test_package import _clean_env, _site_packages, frameworks, run  # noqa: F401 (frameworks: a fixture)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def opcore_wheel(tmp_path_factory):
    """A wheel of this tree's opcore (what `make dist` makes, without
    auditwheel's retagging), alone in its folder: a --find-links source."""
    out = tmp_path_factory.mktemp("opcore-wheel")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", out, REPO],
        timeout=600, env=_clean_env())
    wheels = list(out.glob("opcore-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def venv(tmp_path_factory, opcore_wheel, frameworks):  # noqa: F811
    """A fresh venv (no system site packages) holding opcore from its wheel,
    pytest and expecttest (torch's test utilities need it); torch and jax
    through the frameworks .pth. -> dict(py, env, work, has_jax, timings)"""
    work = tmp_path_factory.mktemp("ship")
    fw_site, has_jax = frameworks
    v = work / "venv"
    run([sys.executable, "-m", "venv", v], timeout=120)
    (_site_packages(v) / "_opcore_test_frameworks.pth").write_text(f"{fw_site}\n")
    env = _clean_env(v, cache=work / "cache")
    env["PIP_FIND_LINKS"] = f"{opcore_wheel.parent} {env.get('PIP_FIND_LINKS', '')}".strip()
    t0 = time.perf_counter()
    run([v / "bin" / "python", "-m", "pip", "install", "-q", opcore_wheel], timeout=600, env=env)
    t_opcore = time.perf_counter() - t0
    run([v / "bin" / "python", "-m", "pip", "install", "-q", "pytest", "expecttest"], timeout=600, env=env)
    yield dict(py=v / "bin" / "python", venv=v, env=env, work=work, has_jax=has_jax,
               timings={"install opcore wheel": t_opcore})
    shutil.rmtree(v, ignore_errors=True)


def _no_compiler_env(venv):
    """The venv's environment with PATH holding only the venv's scripts and
    the folder of `env` (no cc, gcc or make): what a user without a compiler has."""
    env = dict(venv["env"])
    env["PATH"] = str(venv["venv"] / "bin")
    env.pop("CC", None)
    assert shutil.which("cc", path=env["PATH"]) is None
    return env


def _build_and_install(venv, src, name):
    """pip wheel (isolated build, opcore from --find-links), then pip install
    the wheel. -> (wheel path, build seconds, install seconds)"""
    out = venv["work"] / f"wheels-{name}"
    t0 = time.perf_counter()
    run([venv["py"], "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, src], timeout=600, env=venv["env"],
        cwd=venv["work"])
    t1 = time.perf_counter()
    wheel = next(out.glob(f"{name}-*.whl"))
    run([venv["py"], "-m", "pip", "install", "-q", wheel], timeout=600, env=venv["env"], cwd=venv["work"])
    return wheel, t1 - t0, time.perf_counter() - t1


@pytest.fixture(scope="module")
def shipdemo(venv):
    """`opcore new --package shipdemo` (the venv's opcore command), built
    into a wheel and installed."""
    proj = venv["work"] / "shipdemo"
    run([venv["venv"] / "bin" / "opcore", "new", "--package", "shipdemo", proj], env=venv["env"])
    wheel, t_build, t_install = _build_and_install(venv, proj, "shipdemo")
    venv["timings"].update({"pip wheel shipdemo": t_build, "pip install shipdemo": t_install})
    return dict(proj=proj, wheel=wheel, pkg=_site_packages(venv["venv"]) / "shipdemo")


def test_wheel_carries_library_manifest_and_sources(shipdemo):
    import zipfile

    names = set(zipfile.ZipFile(shipdemo["wheel"]).namelist())
    for need in ("shipdemo/__init__.py", "shipdemo/libshipdemo.so", "shipdemo/libshipdemo.opcore.json",
                 "shipdemo/opcore_src/shipdemo/csrc/kernel.c", "shipdemo/opcore_src/shipdemo/csrc/shape.c"):
        assert need in names, f"{shipdemo['wheel'].name} lacks {need}: {sorted(names)}"
    manifest = json.loads((shipdemo["pkg"] / "libshipdemo.opcore.json").read_text())
    assert manifest["multicore"] is True and manifest["compute_srcs"] == ["csrc/kernel.c"]


def test_first_import_without_compiler_uses_prebuilt_from_torch_and_jax(venv, shipdemo):
    code = ("import time; t = time.perf_counter()\n"
            "import torch, shipdemo\n"
            "x, y = torch.randn(64, 100), torch.randn(100)\n"
            "torch.testing.assert_close(shipdemo.scale_add(x, y, 0.5), x + 0.5 * y)\n"
            "print('first call', time.perf_counter() - t)\n"
            "print(shipdemo.library.path)\n")
    if venv["has_jax"]:
        code += ("import numpy as np, jax, opcore.jax\n"
                 "f = opcore.jax.op('shipdemo::scale_add')\n"
                 "a, b = np.ones((4, 3), np.float32), np.arange(3, dtype=np.float32)\n"
                 "np.testing.assert_allclose(np.asarray(jax.jit(lambda a, b: f(a, b, alpha=2.0))(a, b)), a + 2 * b)\n"
                 "print('jax ok', opcore.jax.handler_path())\n")
    out = run([venv["py"], "-c", code], env=_no_compiler_env(venv), cwd=venv["work"]).stdout.splitlines()
    first = float(out[0].split()[-1])
    assert out[1] == str(shipdemo["pkg"] / "libshipdemo.so"), out
    assert not (venv["work"] / "cache" / "build").exists(), "the import built something"
    if venv["has_jax"]:
        assert out[2].startswith("jax ok") and str(_site_packages(venv["venv"])) in out[2], out
    t = venv["timings"]
    t["first call (import torch + shipdemo, one op)"] = first
    total = t["install opcore wheel"] + t["pip wheel shipdemo"] + t["pip install shipdemo"] + first
    print("\n" + "\n".join(f"  {k}: {v:.1f} s" for k, v in t.items()) +
          f"\n  opcore wheel install + shipdemo wheel build + install + first call: {total:.1f} s")


def test_package_own_tests_pass(venv, shipdemo):
    """The project's tests/test_shipdemo.py against the installed package."""
    tests = venv["work"] / "shipdemo-tests"
    shutil.copytree(shipdemo["proj"] / "tests", tests, dirs_exist_ok=True)
    out = run([venv["py"], "-m", "pytest", "-q", "-p", "no:cacheprovider", tests], env=venv["env"],
              cwd=venv["work"], timeout=600).stdout
    assert " passed" in out and "skipped" not in out if venv["has_jax"] else " passed" in out, out


def _tampered(shipdemo, **changes):
    """Rewrite the installed manifest (as a wheel built by another opcore, or
    for another CPU, would have it); returns a function restoring it."""
    path = shipdemo["pkg"] / "libshipdemo.opcore.json"
    original = path.read_text()
    path.write_text(json.dumps(dict(json.loads(original), **changes)))
    return lambda: path.write_text(original)


LOAD = "import shipdemo; print(shipdemo.library.path)"


def test_misfit_abi_rebuilds_from_shipped_sources(venv, shipdemo):
    restore = _tampered(shipdemo, abi=999)
    try:
        path = run([venv["py"], "-c", LOAD], env=venv["env"], cwd=venv["work"]).stdout.strip()
        # rebuilt into a folder of the package's own (another package's
        # libshipdemo.so cannot overwrite it)
        assert path == str(venv["work"] / "cache" / "packages" / "shipdemo" / "shipdemo" / "libshipdemo.so")
    finally:
        restore()


def test_misfit_without_compiler_says_why(venv, shipdemo):
    restore = _tampered(shipdemo, cpu_features=["avx2", "opcore_test_no_such_instruction"])
    try:
        shutil.rmtree(venv["work"] / "cache", ignore_errors=True)
        p = run([venv["py"], "-c", LOAD], env=_no_compiler_env(venv), cwd=venv["work"], check=False)
    finally:
        restore()
    assert p.returncode != 0
    err = p.stderr
    assert "BuildError" in err and "libshipdemo.so does not fit" in err, err
    assert "this CPU lacks opcore_test_no_such_instruction" in err, err
    assert "rebuilding it from the sources shipped in" in err, err


def test_extension_cpp_port(venv):
    """tests/extension_cpp: pytorch/extension-cpp's package with its ops in
    opcore C, `pip install .` (a copy: the build writes build/ beside it),
    then its test/test_extension.py from outside the source folder, on both
    torch routes."""
    src = venv["work"] / "extension_cpp-src"
    shutil.copytree(REPO / "tests" / "extension_cpp", src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    run([venv["py"], "-m", "pip", "install", "-q", src], env=venv["env"], cwd=venv["work"], timeout=600)
    tests = venv["work"] / "extension_cpp-test"
    shutil.copytree(src / "test", tests)
    # on both torch routes: the native kernel shim, and OPCORE_TORCH_NATIVE=0's Python fallback
    for route in ({}, {"OPCORE_TORCH_NATIVE": "0"}):
        out = run([venv["py"], "-m", "pytest", "-q", "-p", "no:cacheprovider", tests],
                  env={**_no_compiler_env(venv), **route}, cwd=venv["work"], timeout=600).stdout
        assert " passed" in out and "failed" not in out, (route, out)


def test_opcore_command_is_the_c_tool(venv):
    """The venv's `opcore` is a /bin/sh launcher exec'ing the C tool inside
    the package (no Python start-up); `python -m opcore` runs the same tool."""
    script = venv["venv"] / "bin" / "opcore"
    text = script.read_text()
    assert text.startswith("#!/bin/sh\n") and "python" not in text.splitlines()[0], text
    tool = _site_packages(venv["venv"]) / "opcore" / "bin" / "opcore"
    assert tool.read_bytes()[:4] == b"\x7fELF"
    # the launcher's first choice is that tool (it falls back to python only without it)
    exe = next(line for line in text.splitlines() if line.startswith("exe="))
    exe = exe.split("=", 1)[1].strip('"').replace("${0%/*}", str(script.parent))
    assert Path(exe).resolve() == tool.resolve(), (exe, tool)
    for cmd in ([script], [venv["py"], "-m", "opcore"]):
        assert run([*cmd, "version"], env=_no_compiler_env(venv)).stdout.startswith("opcore 0.1.0 (op library ABI")


def test_sdist_carries_the_sources_and_builds_the_library(venv, shipdemo):
    """python -m build --sdist, then a wheel built from that sdist alone
    holds the library: the sources travel in the sdist."""
    import tarfile
    import zipfile

    run([venv["py"], "-m", "pip", "install", "-q", "build"], env=venv["env"], timeout=600)
    out = venv["work"] / "sdist"
    run([venv["py"], "-m", "build", "--sdist", "-o", out, shipdemo["proj"]], env=venv["env"], timeout=600)
    sdist = next(out.glob("shipdemo-*.tar.gz"))
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert {"csrc/kernel.c", "csrc/shape.c", "setup.py", "pyproject.toml", "shipdemo/__init__.py"} <= names, names
    run([venv["py"], "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, sdist], env=venv["env"], timeout=600)
    wheel = next(out.glob("shipdemo-*.whl"))
    assert "shipdemo/libshipdemo.so" in zipfile.ZipFile(wheel).namelist()
