"""The package as a user gets it: `pip install .`, the wheel and the sdist.

`make dist`'s recipe (python -m build, then auditwheel) builds the sdist and
a wheel from it. Each of three installs goes into its own fresh virtual
environment WITHOUT system site packages:

    wheel   pip install opcore-*.whl      (built with jaxlib present: it
                                           carries a prebuilt JAX handler)
    sdist   pip install opcore-*.tar.gz   (pip builds it in isolation, no
                                           jaxlib: the handler is compiled at
                                           first use from the shipped source)
    tree    pip install <a copy of the source tree>

and is used from a directory outside the source tree: the `opcore` command
and `python -m opcore`, a C host program built with `opcore config` and with
pkg-config, tutorial 1 (build the ReLU, call it from PyTorch, train the MLP
with it and with torch.relu: the same loss), and the JAX example
(examples/seed003, PyTorch and JAX).

The frameworks are pip-installed once, into one more venv, at the versions
this Python has (torch==2.13.0+cpu: the CPU build, never an unpinned torch;
jax/jaxlib where installable), kept in build/test-package/ for later runs;
each opcore venv sees them through a .pth file, which saves a ~1.5 GB
install per venv. opcore itself is installed by pip into each fresh venv. Every command has a time limit and a failure
shows the command and its output.
"""
import glob
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KINDS = ("wheel", "sdist", "tree")


def run(cmd, *, cwd=None, env=None, timeout=300, check=True):
    """Run cmd; on failure (or time-out) fail the test showing the command
    and the tail of its output."""
    cmd = [str(c) for c in cmd]
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"timed out after {timeout} s: {' '.join(cmd)}\n(cwd {cwd})\n{out[-4000:]}")
    if check and p.returncode != 0:
        pytest.fail(f"exit {p.returncode}: {' '.join(cmd)}\n(cwd {cwd})\n"
                    f"--- stdout ---\n{p.stdout[-6000:]}\n--- stderr ---\n{p.stderr[-6000:]}")
    return p


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _site_packages(venv):
    return Path(run([venv / "bin" / "python", "-c",
                     "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip())


def _clean_env(venv=None, cache=None):
    """The environment of a user of that venv: nothing pointing into the
    source tree or at another opcore."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "OPCORE_LIB_DIR", "OPCORE_INCLUDE_DIR",
                        "OPCORE_HOME", "OPCORE_CLI", "PKG_CONFIG_PATH")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if venv is not None:
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(venv)
    if cache is not None:
        env["OPCORE_CACHE_DIR"] = str(cache)
    return env


# ---- building ---------------------------------------------------------------

@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("package")
    yield d
    # the venvs are large; keep only the small things for a post-mortem
    for v in d.glob("venv-*"):
        shutil.rmtree(v, ignore_errors=True)


@pytest.fixture(scope="module")
def dist(work):
    """sdist + wheel (built from the sdist), the wheel retagged by auditwheel:
    `make dist DIST=...`."""
    out = work / "dist"
    run(["make", "-C", REPO, f"PYTHON={sys.executable}", f"DIST={out}", "dist"], timeout=600,
        env=_clean_env())
    wheels = glob.glob(str(out / "opcore-*.whl"))
    sdists = glob.glob(str(out / "opcore-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, f"make dist made {os.listdir(out)}"
    return {"wheel": Path(wheels[0]), "sdist": Path(sdists[0])}


@pytest.fixture(scope="module")
def frameworks():
    """site-packages of a venv holding torch (pinned CPU build) and, where
    installable, jax + jaxlib, at this Python's versions. -> (path, has_jax)

    Kept in build/test-package/ and reused by later runs (it is ~1.5 GB: its
    install and removal took most of this test's time); a marker written
    after a complete install tells a usable one from an interrupted one."""
    torch_v = _version("torch")
    assert torch_v, "torch is not installed here (scripts/install-deps.sh installs torch==2.13.0)"
    jax_v, jaxlib_v = _version("jax"), _version("jaxlib")
    py_v = "{}.{}".format(*sys.version_info[:2])
    venv = REPO / "build" / "test-package" / f"frameworks-py{py_v}-torch{torch_v}-jax{jax_v}-jaxlib{jaxlib_v}"
    marker = venv / "opcore-test-complete"
    if not marker.exists():
        shutil.rmtree(venv, ignore_errors=True)
        run([sys.executable, "-m", "venv", venv], timeout=120)
        py = venv / "bin" / "python"
        # torch_v is e.g. 2.13.0+cpu: pinning the local version keeps pip on the CPU build
        run([py, "-m", "pip", "install", "-q", f"torch=={torch_v}", "numpy"], timeout=600, env=_clean_env())
        has_jax = False
        if jax_v and jaxlib_v:
            p = run([py, "-m", "pip", "install", "-q", f"jax=={jax_v}", f"jaxlib=={jaxlib_v}"], timeout=600,
                    env=_clean_env(), check=False)
            has_jax = p.returncode == 0
        marker.write_text(json.dumps({"has_jax": has_jax}))
    return _site_packages(venv), json.loads(marker.read_text())["has_jax"]


def _source_copy(dst):
    """The source tree as a fresh clone has it (tracked and new files, not
    the ignored build outputs)."""
    p = subprocess.run(["git", "-C", REPO, "ls-files", "-z", "-co", "--exclude-standard"],
                       capture_output=True, timeout=60)
    if p.returncode != 0:
        pytest.fail(f"git ls-files failed: {p.stderr.decode(errors='replace')}")
    for rel in filter(None, p.stdout.decode().split("\0")):
        src = REPO / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    return dst


@pytest.fixture(scope="module", params=KINDS)
def inst(request, work, dist, frameworks):
    """A fresh venv with opcore pip-installed one way, and a clean user
    directory outside the source tree. -> dict(kind, venv, py, env, home)"""
    kind = request.param
    fw_site, has_jax = frameworks
    venv = work / f"venv-{kind}"
    run([sys.executable, "-m", "venv", venv], timeout=120)
    (_site_packages(venv) / "_opcore_test_frameworks.pth").write_text(f"{fw_site}\n")
    env = _clean_env(venv, cache=work / f"cache-{kind}")
    what = {"wheel": dist["wheel"], "sdist": dist["sdist"],
            "tree": lambda: _source_copy(work / "tree")}[kind]
    what = what() if callable(what) else what
    run([venv / "bin" / "python", "-m", "pip", "install", "-q", what], timeout=600, env=env, cwd=work)
    home = work / f"user-{kind}"
    home.mkdir()
    return dict(kind=kind, venv=venv, py=venv / "bin" / "python", env=env, home=home, has_jax=has_jax)


def py(inst, code, timeout=300, cwd=None):
    return run([inst["py"], "-c", code], cwd=cwd or inst["home"], env=inst["env"], timeout=timeout)


def copy_examples(inst, *names):
    """examples/<name> copied under the user's directory (scripts find their
    siblings through ../ as in the repository)."""
    root = inst["home"] / "project"
    for n in names:
        dst = root / "examples" / n
        if not dst.exists():
            shutil.copytree(REPO / "examples" / n, dst)
    return root


# ---- the installed package --------------------------------------------------

def test_package_imports_from_the_venv(inst):
    out = py(inst, "import opcore, sys; print(opcore.__file__); print(opcore.lib_dir()); "
                   "print(opcore.include_dir()); print(sys.flags.no_site, sys.prefix)").stdout.split("\n")
    site = str(_site_packages(inst["venv"]))
    for line in out[:3]:
        assert line.startswith(site), f"{line} is not inside the venv's {site}"
        assert str(REPO) not in line
    # a venv without the system site packages
    cfg = (inst["venv"] / "pyvenv.cfg").read_text()
    assert re.search(r"include-system-site-packages\s*=\s*false", cfg), cfg


def test_package_cli_on_path_and_python_m(inst):
    exe = shutil.which("opcore", path=inst["env"]["PATH"])
    assert exe == str(inst["venv"] / "bin" / "opcore")
    for cmd in (["opcore"], [inst["py"], "-m", "opcore"]):
        v = run(cmd + ["version"], env=inst["env"], cwd=inst["home"]).stdout
        assert v.startswith("opcore 0.1.0 (op library ABI"), v
        p = run(cmd + ["build", "--nope"], env=inst["env"], cwd=inst["home"], check=False)
        assert p.returncode == 2 and "unrecognized option '--nope'" in p.stderr
    cfg = run(["opcore", "config", "--cache-dir"], env=inst["env"], cwd=inst["home"]).stdout.strip()
    assert cfg == inst["env"]["OPCORE_CACHE_DIR"]


def test_package_c_host(inst):
    """A C host program against the installed C API: with `opcore config`
    and with pkg-config (also --static: the same shared library)."""
    proj = copy_examples(inst, "relu", "host")
    env = inst["env"]
    lib = run(["opcore", "build", "--name", "relu", "--compute", "examples/relu/tcm/relu.c",
               "--shape", "examples/relu/shape.c", "-o", "out", "--quiet"], env=env, cwd=proj).stdout.strip()
    assert lib == str(proj / "out" / "librelu.so")
    flags = run(["opcore", "config", "--cflags", "--libs"], env=env, cwd=proj).stdout.split()
    run(["cc", "examples/host/relu_host.c", *flags, "-o", "host1"], env=env, cwd=proj)
    libdir = run(["opcore", "config", "--lib-dir"], env=env, cwd=proj).stdout.strip()
    pc_env = dict(env, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
    pc = run(["pkg-config", "--static", "--cflags", "--libs", "opcore"], env=pc_env, cwd=proj).stdout.split()
    assert not any(f.endswith(".a") or f in ("-lffi", "-lxxhash") for f in pc), pc
    run(["cc", "examples/host/relu_host.c", *pc, "-o", "host2"], env=env, cwd=proj)
    for host in ("./host1", "./host2"):
        out = run([host, lib], env=env, cwd=proj).stdout
        assert "relu([-1, 2, -3, 4]) = [0, 2, 0, 4]" in out


def test_package_one_build_cache_for_cli_and_python(inst):
    """`opcore build` without -o and custom_op.load without build_directory
    share one cache: the second is a cache hit on the first's library."""
    proj = copy_examples(inst, "relu")
    env = inst["env"]
    cli = run(["opcore", "build", "--name", "relu_cached", "--compute", "examples/relu/tcm/relu.c",
               "--shape", "examples/relu/shape.c", "--quiet"], env=env, cwd=proj).stdout.strip()
    assert cli == os.path.join(env["OPCORE_CACHE_DIR"], "build", "relu_cached", "librelu_cached.so")
    out = py(inst, "from opcore import custom_op\n"
                   "p, cached, s = custom_op.build('relu_cached', ['examples/relu/tcm/relu.c'], "
                   "['examples/relu/shape.c'])\n"
                   "print(p); print(cached)", cwd=proj).stdout.split()
    assert out == [cli, "True"]


def test_package_tutorial_1(inst):
    """docs/tutorial_1_first_operator.md from step 3 on, outside the tree:
    build with the CLI, call from PyTorch, train the MLP with the opcore ReLU
    and with torch.relu (short runs): the losses are equal."""
    proj = copy_examples(inst, "relu", "mlp")
    env = inst["env"]
    run(["opcore", "build", "--name", "relu", "--compute", "examples/relu/elementwise/relu.c",
         "--shape", "examples/relu/shape.c", "-o", "build/relu"], env=env, cwd=proj)
    out = py(inst, "import torch\nfrom opcore import custom_op\n"
                   "custom_op.load_library('build/relu/librelu.so')\n"
                   "print(torch.ops.my_ops.relu_forward(torch.tensor([[-1.0, 2.0], [3.0, -4.0]])).tolist())",
             cwd=proj).stdout
    assert out.strip() == "[[0.0, 2.0], [3.0, 0.0]]"
    mlp = proj / "examples" / "mlp"
    res = {}
    for script in ("train.py", "train_cpu.py"):
        js = inst["home"] / f"{script}.json"
        out = run([inst["py"], script, "--epochs", "1", "--max-steps", "100", "--no-progress", "--json", js],
                  env=env, cwd=mlp, timeout=300).stdout
        assert "Final loss is" in out and "Test accuracy:" in out, out
        res[script] = json.loads(js.read_text())
    assert res["train.py"]["final_loss"] == res["train_cpu.py"]["final_loss"]
    assert res["train.py"]["accuracy"] == res["train_cpu.py"]["accuracy"]


def test_package_jax_example(inst):
    """examples/seed003 (the SPMD add in PyTorch and JAX), outside the tree.
    The wheel's prebuilt handler is used; the sdist and tree installs
    (built without jaxlib) compile it at first use from the shipped source."""
    if not inst["has_jax"]:
        pytest.skip("jax/jaxlib are not installable here")
    proj = copy_examples(inst, "seed003")
    out = run([inst["py"], "examples/seed003/seed003.py", "--no-graphs"], env=inst["env"], cwd=proj,
              timeout=300).stdout
    assert "all results match numpy" in out, out
    handler = Path(py(inst, "import opcore.jax; print(opcore.jax.handler_path())").stdout.strip())
    lib_dir = Path(py(inst, "import opcore; print(opcore.lib_dir())").stdout.strip())
    if inst["kind"] == "wheel":
        assert handler.parent == lib_dir, f"the wheel's prebuilt handler was not used: {handler}"
    else:
        assert handler.parent == Path(inst["env"]["OPCORE_CACHE_DIR"]) / "jax", handler


# ---- what the wheel and the sdist hold --------------------------------------

def _elf_needed(path):
    out = run(["readelf", "-d", path]).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out))


def _elf_sections(path):
    return set(re.findall(r"\]\s+(\.\S+)", run(["readelf", "-S", "-W", path]).stdout))


def test_package_wheel_is_a_proper_binary_wheel(dist, work):
    whl = dist["wheel"]
    assert re.search(r"-cp\d+-cp\d+-manylinux_\d+_\d+_x86_64\.whl$|-manylinux_\d+_\d+_aarch64\.whl$",
                     whl.name), whl.name
    size = whl.stat().st_size
    # ~4 MB: libopcore carries BLIS (the tile matmul, docs/gemm_library.md)
    # with its kernels for every x86-64 family, chosen at run time.
    assert size < 8_000_000, f"{whl.name} is {size} bytes"
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        z.extractall(work / "wheel-contents")
    root = work / "wheel-contents"
    assert "opcore/py.typed" in names
    assert "opcore/bin/opcore" in names and "opcore/_jax_ffi_handler.c" in names
    assert sum(n.startswith("opcore/include/opcore/") for n in names) >= 10
    # one libopcore binary; libopcore.so is the linker script naming it
    binaries = [n for n in names if re.search(r"libopcore[^/]*\.so", n)]
    assert sorted(binaries) == ["opcore/lib/libopcore.so", "opcore/lib/libopcore.so.0"], binaries
    assert (root / "opcore/lib/libopcore.so").read_text().strip() == "INPUT(libopcore.so.0)"
    # every ELF file: stripped, needing only glibc and libopcore (and _C the C++ runtime)
    # (libmvec: glibc's vector math, which the tile layer's exp/tanh/log use;
    # auditwheel's manylinux policies list it)
    allowed = {"libc.so.6", "libm.so.6", "libmvec.so.1", "libdl.so.2", "libpthread.so.0", "librt.so.1",
               "libopcore.so.0"}
    elves = [root / n for n in names if (root / n).is_file() and (root / n).read_bytes()[:4] == b"\x7fELF"]
    assert len(elves) >= 3  # libopcore, _C, the CLI (+ the JAX handler)
    # _C's one C++ file (torch_native_throw.cc) needs the C++ runtime, which
    # every manylinux system has (the policy lists both) and torch uses too
    cxx_runtime = {"libstdc++.so.6", "libgcc_s.so.1"}
    # the torch kernel shim, built for the torch of the build (docs/python.md):
    # torch's own libraries, loaded by `import torch` before it, and the C++ runtime
    shims = [n for n in names if n.startswith("opcore/torch_kernels/opcore_torch_shim-")]
    assert len(shims) == 1, names
    torch_libs = cxx_runtime | {"libc10.so", "libtorch_cpu.so", "libtorch.so"}
    for f in elves:
        ok = allowed | (cxx_runtime if f.name.startswith("_C.") else set())
        ok |= torch_libs if f.name.startswith("opcore_torch_shim-") else set()
        extra = {n for n in _elf_needed(f) - ok if not n.startswith("ld-linux")}
        assert not extra, f"{f.name} needs {extra}"
        assert not {".symtab", ".debug_info"} & _elf_sections(f), f"{f.name} is not stripped"
    print(f"\nwheel {whl.name}: {size} bytes, {len(names)} files")


def test_package_sdist_has_what_the_build_needs(dist):
    import tarfile
    with tarfile.open(dist["sdist"]) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for need in ("Makefile", "mk/package.mk", "opcore.pc.in", "setup.py", "pyproject.toml",
                 "src/core/tensor.c", "src/jax/ffi_handler.c", "src/python/module.c", "src/cli/main.c",
                 "include/opcore/kernel.h", "python/opcore/__init__.py", "python/opcore/py.typed",
                 "examples/relu/shape.c", "docs/python.md"):
        assert need in names, f"the sdist lacks {need}"
    assert not [n for n in names if n.endswith((".so", ".o")) or ".so." in n]
    print(f"\nsdist {dist['sdist'].name}: {dist['sdist'].stat().st_size} bytes, {len(names)} entries")
