"""What the docs and tools say holds as they say it:

- `opcore new --package` prints a next step that works as printed;
- the TCM default is what docs/environment.md and docs/engine.md say;
- docs/c_api.md's in-repository build line gives a program that runs;
- `make python` builds in a venv made with --system-site-packages, whose
  own setuptools (65 on Python 3.11) cannot read pyproject.toml's license
  (scripts/ensure-setuptools.sh, which `make deps` runs, upgrades it).

(Tutorial 3's Python block that continues its `cd examples/ops` block runs
from that folder: tests/python/test_docs.py runs it so.)
"""
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import textwrap

import pytest

from conftest import CLI, REPO, needs_cli

LIB = REPO / "build" / "libopcore.so.0"
needs_lib = pytest.mark.skipif(not LIB.exists(), reason=f"{LIB} not built (make lib)")


def run(cmd, **kw):
    kw.setdefault("timeout", 600)
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert p.returncode == 0, f"exit {p.returncode}: {cmd}\n--- stdout:\n{p.stdout[-3000:]}\n" \
                              f"--- stderr:\n{p.stderr[-3000:]}"
    return p


def make_venv(path):
    """A venv with --system-site-packages (pip and the setuptools Python
    bundles inside it) that also sees the packages of the Python running
    the tests, opcore included, as a venv opcore was installed into."""
    run([sys.executable, "-m", "venv", "--system-site-packages", str(path)], timeout=300)
    py = path / "bin" / "python"
    site = run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    site = site.stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    with open(os.path.join(site, "zz_opcore_tests.pth"), "w") as f:
        f.write(f"import site; site.addsitedir({ours!r})\n")
    return py


# ---- opcore new --package: the printed next step -------------------------------------

@needs_cli
def test_new_package_next_step_works_as_printed(tmp_path):
    venv = tmp_path / "venv"
    make_venv(venv)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), str(CLI.parent), env.get("PATH", "")])
    env["OPCORE_CACHE_DIR"] = str(tmp_path / "cache")
    env.pop("PYTHONPATH", None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    out = run([str(CLI), "new", "--package", "mypkg", str(tmp_path / "mypkg")], env=env).stdout
    step = next(line[len("next: "):] for line in out.splitlines() if line.startswith("next: "))
    assert "--no-build-isolation" in step, out
    p = run(["bash", "-c", "set -eo pipefail\n" + step], env=env, cwd=tmp_path, timeout=900)
    assert re.search(r"\d+ passed", p.stdout), p.stdout
    assert "failed" not in p.stdout and "error" not in p.stdout.lower(), p.stdout
    # installed into that venv, not the one running the tests
    where = run([venv / "bin" / "python", "-P", "-c", "import mypkg; print(mypkg.__file__)"],
                env=env, cwd=tmp_path).stdout
    assert str(venv) in where


# ---- the TCM default ---------------------------------------------------------------------

TCM_PROBE = textwrap.dedent("""
    import ctypes, sys
    lib = ctypes.CDLL(sys.argv[1])
    lib.oc_engine_tcm_size.restype = ctypes.c_size_t
    print(lib.oc_engine_tcm_size())
""")


def tcm_size(env_value=None):
    env = dict(os.environ)
    env.pop("OC_TCM_SIZE", None)
    if env_value is not None:
        env["OC_TCM_SIZE"] = env_value
    return int(run([sys.executable, "-c", TCM_PROBE, str(LIB)], env=env).stdout)


@needs_lib
def test_tcm_default_is_as_documented():
    row = next(line for line in (REPO / "docs" / "environment.md").read_text().splitlines()
               if line.startswith("| `OC_TCM_SIZE` |"))
    assert "the core's L2 cache, at least 1 MiB" in row, row
    engine = " ".join((REPO / "docs" / "engine.md").read_text().split())
    assert "(`OC_TCM_SIZE`, default the core's L2 cache, at least 1 MiB" in engine
    header = " ".join((REPO / "include" / "opcore" / "engine.h").read_text().split())
    assert "the core's L2 cache, at least 1 MiB" in header
    for doc in ("environment.md", "engine.md", "troubleshooting.md"):
        text = " ".join((REPO / "docs" / doc).read_text().split())
        assert "half the L2" not in text and "half the core's L2" not in text, doc
    # the C library's sysconf(_SC_LEVEL2_CACHE_SIZE), as the engine reads it
    l2 = subprocess.run(["getconf", "LEVEL2_CACHE_SIZE"], capture_output=True, text=True)
    l2 = l2.stdout.strip()
    l2 = int(l2) if l2.isdigit() else 0
    assert tcm_size() == max(l2, 1 << 20)
    assert tcm_size("512k") == 512 << 10   # the row's own example


# ---- docs/c_api.md: the in-repository build line ----------------------------------------------

PROG = """#include <stdio.h>
#include <opcore/engine.h>
int main(void)
{
    printf("cores %u\\n", oc_engine_num_cores());
    return 0;
}
"""


@needs_lib
def test_c_api_repository_build_line_runs(tmp_path):
    text = " ".join((REPO / "docs" / "c_api.md").read_text().split())
    hit = re.search(r"in the repository \(from its top folder, after `make lib`\), "
                    r"`(cc prog\.c [^`]+)`", text)
    assert hit, "docs/c_api.md: the in-repository build line is not where this test looks"
    line = hit.group(1)
    (tmp_path / "prog.c").write_text(PROG)
    # from the repository's top folder, prog.c where the user has it
    cmd = (line.replace("prog.c", shlex.quote(str(tmp_path / "prog.c")), 1)
           + f" -o {shlex.quote(str(tmp_path / 'prog'))}")
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    run(["bash", "-c", cmd], cwd=REPO, env=env)
    out = run([str(tmp_path / "prog")], cwd=tmp_path, env=env).stdout
    assert re.match(r"cores \d+", out), out


# ---- make python in a venv made with --system-site-packages ------------------------------------

def test_make_python_setuptools_in_system_site_venv(tmp_path):
    py = make_venv(tmp_path / "venv")
    read = [py, "-c", "from setuptools.config.pyprojecttoml import read_configuration as r; "
            "print(r('pyproject.toml')['project']['license'])"]
    old = run([py, "-c", "import setuptools; print(setuptools.__version__)"]).stdout.strip()
    if int(old.split(".")[0]) < 77:  # Python 3.11's venv: pyproject.toml unreadable so far
        assert subprocess.run(read, cwd=REPO, capture_output=True, text=True).returncode != 0
    p = run(["sh", "scripts/ensure-setuptools.sh", str(py)], cwd=REPO)
    assert ("installing it" in p.stdout) == (int(old.split(".")[0]) < 77), p.stdout
    assert run(read, cwd=REPO).stdout.strip() == "Apache-2.0"
    # and the build step `make python` runs reads the metadata (no compile)
    run([py, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--dry-run", "."],
        cwd=REPO)
    # a second run: nothing to do
    assert "installing" not in run(["sh", "scripts/ensure-setuptools.sh", str(py)], cwd=REPO).stdout
