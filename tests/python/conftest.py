"""Shared fixtures for the Python tests.

The ReLU examples all register the library name `my_ops`, and a process can
hold one library per name. So the fixtures here build each variant under its
own name: a copy of examples/relu/shape.c with OC_LIBRARY(my_ops_<variant>)
(the kernels are the examples' own files). Tests that need the name my_ops
itself (the seeds' code verbatim) run in a subprocess.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# Tests check that multicore ops use every core: on a busy machine a worker
# the OS descheduled would make the engine run launches on their caller
# alone for a while (docs/engine.md, "Stragglers"). Read when the engine
# starts; inherited by the tests' subprocesses.
os.environ.setdefault("OC_STRAGGLER_US", "0")

REPO = Path(__file__).resolve().parents[2]
RELU = REPO / "examples" / "relu"
TORCH_KERNELS = Path(__file__).resolve().parent / "torch_kernels"
RELU_VARIANTS = ("elementwise", "stream", "tcm", "multicore")

# The `opcore` command line tool (build/opcore, or $OPCORE_CLI).
CLI = Path(os.environ.get("OPCORE_CLI", REPO / "build" / "opcore"))
needs_cli = pytest.mark.skipif(not CLI.exists(), reason=f"{CLI} not built (make cli)")


def run_cli(*args, check=None, **kw):
    """Run `opcore ARGS...`; with `check`, assert its exit status."""
    p = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=300, **kw)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def load_lib(build_dir, name, compute, shape, **kw):
    """custom_op.load of library `name` from the sources `compute` and
    `shape`, built in build_dir/name."""
    from opcore import custom_op

    out = Path(build_dir) / name
    out.mkdir(parents=True, exist_ok=True)
    return custom_op.load(name=name, compute_srcs=[str(compute)], shape_srcs=[str(shape)],
                          build_directory=str(out), **kw)


def load_texts(directory, name, compute, shape, **kw):
    """load_lib of library `name` from the C texts of its kernels and shape
    functions, written to directory/k.c and directory/s.c."""
    directory = Path(directory)
    (directory / "k.c").write_text(compute)
    (directory / "s.c").write_text(shape)
    return load_lib(directory, name, directory / "k.c", directory / "s.c", **kw)


# Parallel runs (`make test`: pytest-xdist's -n N --dist loadgroup). Each
# test file runs whole on one worker, so its module fixtures are made once;
# files that write one folder outside their tmp_path (the frameworks venv
# in build/test-package, build/pkg) share a group, so they never run at
# once. Files start longest first (the last to start then ends soonest):
# by the seconds the last run took (kept in pytest's cache), else these
# files (venvs and wheels, many subprocesses, trainings) before the rest.
SHARED_GROUPS = {"test_package.py": "packaging", "test_ship_package.py": "packaging"}
LONG_FILES = ("test_package.py", "test_ship_package.py", "test_hostile.py", "test_docs.py",
              "test_ship_aoti.py", "test_mlp.py", "test_torch.py", "test_hostile_memory.py",
              "test_ddp_example.py", "test_jax_sharding.py", "test_stress.py")
FILE_SECONDS_KEY = "opcore/file_seconds"
_file_seconds = {}


def _group(name):
    return SHARED_GROUPS.get(name, name)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    cache = getattr(config, "cache", None)
    last = cache.get(FILE_SECONDS_KEY, {}) if cache else {}

    def seconds(name):  # or, before any run, the rank of a known long file
        if last:
            return last.get(name, 0.0)
        return len(LONG_FILES) - LONG_FILES.index(name) if name in LONG_FILES else 0

    files, first = {}, {}
    for i, item in enumerate(items):
        name = item.path.name
        item.add_marker(pytest.mark.xdist_group(_group(name)))
        files.setdefault(_group(name), set()).add(name)
        first.setdefault(_group(name), i)
    weight = {g: sum(map(seconds, names)) for g, names in files.items()}
    items.sort(key=lambda it: (-weight[_group(it.path.name)], first[_group(it.path.name)]))


def pytest_runtest_logreport(report):
    name = report.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    _file_seconds[name] = _file_seconds.get(name, 0) + report.duration


def pytest_sessionfinish(session):
    cache = getattr(session.config, "cache", None)
    if os.environ.get("PYTEST_XDIST_WORKER") or not cache or not _file_seconds:
        return
    seconds = cache.get(FILE_SECONDS_KEY, {})
    seconds.update({k: round(v, 1) for k, v in _file_seconds.items()})
    cache.set(FILE_SECONDS_KEY, seconds)


@pytest.fixture(scope="session")
def opcore_build_dir(tmp_path_factory):
    """The build directory of the test libraries: one per run, shared by
    pytest-xdist's workers (each library's build is locked, and a library
    is rebuilt only when its sources or flags change: a worker finds the
    others' builds cached)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        d = tmp_path_factory.getbasetemp().parent / "opcore_build"
        d.mkdir(exist_ok=True)
        return d
    return tmp_path_factory.mktemp("opcore_build")


def renamed_shape_source(dst_dir, namespace, src=RELU / "shape.c", old="my_ops"):
    """A shape source (examples/relu/shape.c) with its library `old`
    renamed to `namespace`, written to dst_dir."""
    text, n = re.subn(rf"OC_LIBRARY\(\s*{old}\s*,", f"OC_LIBRARY({namespace},", Path(src).read_text())
    assert n == 1, f"{src} no longer declares OC_LIBRARY({old}, m)"
    Path(dst_dir).mkdir(parents=True, exist_ok=True)
    path = Path(dst_dir) / f"shape_{namespace}.c"
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def relu_libs(opcore_build_dir):
    """{variant: opcore Library} of the four ReLU examples, each loaded under
    the namespace my_ops_<variant> (torch.ops.my_ops_<variant>.relu_forward)."""
    libs = {}
    for variant in RELU_VARIANTS:
        ns = f"my_ops_{variant}"
        shape = renamed_shape_source(opcore_build_dir / ns, ns)
        libs[variant] = load_lib(opcore_build_dir, ns, RELU / variant / "relu.c", shape,
                                 multicore=(variant == "multicore"))
        assert libs[variant].name == ns
    return libs


@pytest.fixture(scope="session")
def test_ops(opcore_build_dir):
    """The library oc_torch_test of tests/python/torch_kernels (fault, hello,
    scale, add, only_1d, sum_rows)."""
    return load_lib(opcore_build_dir, "oc_torch_test", TORCH_KERNELS / "ops.c", TORCH_KERNELS / "shape.c")


@pytest.fixture(scope="session")
def load_iso(opcore_build_dir):
    """load_iso(name, **load_kwargs): tests/isolation's library (kernels.c,
    shape.c: every way a kernel can misbehave) built and loaded as `name`."""
    from opcore import custom_op

    iso = Path(__file__).resolve().parents[1] / "isolation"

    def load(name, **kw):
        return custom_op.load(name=name, compute_srcs=[str(iso / "kernels.c")], shape_srcs=[str(iso / "shape.c")],
                              build_directory=str(opcore_build_dir / name), extra_cflags=[f"-DISO_NAME={name}"],
                              **kw)

    return load


@pytest.fixture(scope="session")
def stack_ops(opcore_build_dir):
    """The library oc_torch_stack (recurse), built with a 32 KiB kernel stack."""
    return load_lib(opcore_build_dir, "oc_torch_stack", TORCH_KERNELS / "stack_ops.c",
                    TORCH_KERNELS / "stack_shape.c", extra_cflags=["-DSTACK_SIZE=32768"])


@pytest.fixture(scope="session")
def seed003(tmp_path_factory):
    """examples/seed003 built and loaded once per session (its library name
    `add_ops` can be loaded only once in a process)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("seed003", REPO / "examples" / "seed003" / "seed003.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.load(str(tmp_path_factory.mktemp("seed003")))
    return mod
