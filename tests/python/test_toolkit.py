"""The kernel author's toolkit from Python and the shell: `opcore new` /
custom_op.new_project (the project builds and both its tests pass), the
vectorisation report, the errors that teach (C++ sources, 'librelu',
torch.ops.load_library on an opcore library), `opcore run` costing what a
framework call costs (no per-call heap churn) and `opcore bench`."""
import os
import re
import resource
import subprocess
import sys

import pytest

from conftest import CLI, REPO, RELU, needs_cli, renamed_shape_source, run_cli


def opcore(*args, check=0, **kw):
    return run_cli(*args, check=check, **kw)


def make_test(project, *make_args):
    """`make test` in a generated project, with this checkout's CLI and Python."""
    p = subprocess.run(["make", "-C", str(project), f"OPCORE={CLI}", f"PYTHON={sys.executable}", *make_args, "test"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


# ---- opcore new ---------------------------------------------------------------------

@needs_cli
def test_opcore_new_builds_and_passes(tmp_path):
    p = opcore("new", "fresh_op", tmp_path / "fresh")
    assert "next: cd" in p.stdout
    files = sorted(os.listdir(tmp_path / "fresh"))
    assert files == ["Makefile", "README.md", "kernel.c", "shape.c", "test_fresh_op.c", "test_fresh_op.py"]
    out = make_test(tmp_path / "fresh", "MULTICORE=--multicore")
    assert "test_fresh_op: all checks passed" in out  # the C test
    assert re.search(r"3 passed", out)                  # the Python test
    # the Python test used make's multicore library, it did not rebuild one
    info = opcore("info", tmp_path / "fresh" / "build" / "libfresh_op.so").stdout
    assert re.search(r"multicore\s+yes", info), info


def test_new_project_from_python_builds_and_passes(tmp_path):
    from opcore import custom_op

    path = custom_op.new_project(tmp_path / "py_op")
    assert path == str(tmp_path / "py_op")
    text = (tmp_path / "py_op" / "shape.c").read_text()
    assert "OC_LIBRARY(py_op, m)" in text
    if CLI.exists():  # the Makefile needs the CLI
        out = make_test(tmp_path / "py_op")
        assert "test_py_op: all checks passed" in out and "3 passed" in out
    else:  # the Python test alone
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", str(tmp_path / "py_op" / "test_py_op.py")],
                           capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, OPCORE=f"{sys.executable} -m opcore"))
        assert p.returncode == 0, p.stdout + p.stderr


def test_new_project_refuses_to_overwrite_and_bad_names(tmp_path):
    from opcore import custom_op

    custom_op.new_project(tmp_path / "a", name="a_op")
    with pytest.raises(FileExistsError, match="exists already; choose a new directory"):
        custom_op.new_project(tmp_path / "a", name="a_op")
    with pytest.raises(ValueError, match="is not a C identifier"):
        custom_op.new_project(tmp_path / "b", name="my-op")
    assert not (tmp_path / "b").exists()


@needs_cli
def test_opcore_new_usage(tmp_path):
    assert opcore("new", check=2).stderr.startswith("opcore new: expected the project's NAME")
    assert "is not a C identifier" in opcore("new", "9lives", tmp_path / "x", check=2).stderr
    assert "usage: opcore new [--package] NAME [DIR]" in opcore("new", "--help").stdout
    assert "is not a C identifier" in opcore("new", "--package", "9lives", tmp_path / "y", check=2).stderr


@needs_cli
def test_opcore_config():
    flags = opcore("config", "--cflags", "--libs").stdout.split()
    assert flags[0] == f"-I{REPO / 'include'}" or flags[0].startswith("-I")
    assert "-lopcore" in flags
    assert opcore("config", "--cflags").stdout.strip() == flags[0]


# ---- vectorisation report ---------------------------------------------------------------

VEC_KERNEL = """#include <opcore/kernel.h>
oc_tensor *relu_forward(const oc_tensor *x)
{
    oc_tensor *out = oc_dst_tensor();
    float *o = out->data;
    const float *in = x->data;
    int64_t n = oc_numel(x);
    for (int64_t i = 0; i < n; i++) o[i] = in[i] > 0 ? in[i] : 0;
    for (int64_t i = 0; i < n; i++) { if (in[i] > 100) break; o[i] += 0; }
    return out;
}
"""
VEC_SHAPE = """#include <opcore/library.h>
static oc_tensor *relu_fwd_shape(const oc_tensor *x) { return oc_empty_like(x); }
OC_LIBRARY(vec_ops, m) { oc_def(m, "relu_forward(Tensor x) -> Tensor", relu_fwd_shape, "relu_forward"); }
"""


def test_vec_report_from_python(tmp_path, capsys):
    from opcore import custom_op

    k = tmp_path / "vec.c"
    k.write_text(VEC_KERNEL)
    shape = tmp_path / "shape.c"
    shape.write_text(VEC_SHAPE)
    res = custom_op.build("vec_ops", [str(k)], [str(shape)], build_directory=str(tmp_path / "out"),
                          vec_report=True)
    path, cached, seconds = res
    printed = capsys.readouterr().out
    assert res.vec_report == printed
    assert f"{k}:8: vectorized (" in printed
    assert f"{k}:9: NOT vectorized: control flow in loop" in printed
    assert "kernel.h" not in printed
    assert custom_op.build("vec_ops", [str(k)], [str(shape)], build_directory=str(tmp_path / "out")).vec_report is None
    lib = custom_op.load("vec_ops", [str(k)], [str(shape)], build_directory=str(tmp_path / "out"), vec_report=True)
    assert lib.cached and lib.vec_report == printed
    assert capsys.readouterr().out == printed


@needs_cli
def test_vec_report_cli(tmp_path):
    k, shape = tmp_path / "vec.c", tmp_path / "shape.c"
    k.write_text(VEC_KERNEL)
    shape.write_text(VEC_SHAPE)
    p = opcore("build", "-n", "vec_ops", "-c", k, "-s", shape, "-o", tmp_path, "--vec-report")
    assert "vectorization report: compute sources compiled with -O3" in p.stdout
    assert f"{k}: 1 loop vectorized, 1 not" in p.stdout
    assert "compute both sides and select" in p.stdout


# ---- errors that teach ----------------------------------------------------------------------

def test_cpp_source_says_kernels_are_c(tmp_path):
    from opcore import custom_op

    cpp = tmp_path / "relu.cpp"
    cpp.write_text("#include <torch/extension.h>\ntorch::Tensor relu_forward(torch::Tensor x) { return x; }\n")
    with pytest.raises(ValueError, match=r"relu.cpp is a C\+\+ source; opcore kernels and shape functions are C"):
        custom_op.build("relu", [str(cpp)], [str(RELU / "shape.c")], build_directory=str(tmp_path))


def test_lib_prefixed_name_builds_librelu(tmp_path):
    from opcore import custom_op

    path, _, _ = custom_op.build("librelu", [str(RELU / "tcm" / "relu.c")], [str(RELU / "shape.c")],
                                 build_directory=str(tmp_path))
    assert path == str(tmp_path / "librelu.so")
    assert not (tmp_path / "liblibrelu.so").exists()


def test_torch_load_library_points_to_opcore(tmp_path):
    from opcore import custom_op

    shape = renamed_shape_source(tmp_path, "hint_ops")
    path, _, _ = custom_op.build("hint", [str(RELU / "tcm" / "relu.c")], [str(shape)], build_directory=str(tmp_path))
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    plain = subprocess.run([sys.executable, "-c", f"import torch; torch.ops.load_library({path!r})"],
                           capture_output=True, text=True, env=env, timeout=300)
    assert plain.returncode == 0, plain.stderr
    assert f"opcore: {path} is an opcore op library loaded by plain dlopen (torch.ops.load_library" in plain.stderr
    assert "torch.ops.hint_ops.<op> will not exist" in plain.stderr
    assert f"opcore.custom_op.load_library('{path}')" in plain.stderr
    ours = subprocess.run([sys.executable, "-c",
                           f"import torch; from opcore import custom_op; custom_op.load_library({path!r}); "
                           "print(torch.ops.hint_ops.relu_forward(torch.ones(2)).tolist())"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.strip() == "[1.0, 1.0]"
    assert "plain dlopen" not in ours.stderr


# ---- opcore run / bench -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def relu_elementwise(tmp_path_factory):
    """The element-wise ReLU, which creates its own result every call."""
    out = tmp_path_factory.mktemp("relu_ew")
    opcore("build", "-n", "relu", "-c", RELU / "elementwise" / "relu.c", "-s", RELU / "shape.c", "-o", out, "-q")
    return out / "librelu.so"


def child_minor_faults(*args):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    opcore(*args)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before


@needs_cli
def test_run_has_no_per_call_heap_churn(relu_elementwise):
    # Growing and trimming the heap around each call's 512 KiB of output and
    # temporaries faulted in ~220 fresh pages per call; a framework process
    # keeps its memory, and so does `opcore run` now.
    base = ["run", relu_elementwise, "relu_forward", "--shape", "32,4096", "--repeat"]
    few, many = child_minor_faults(*base, 10), child_minor_faults(*base, 510)
    assert (many - few) / 500 < 2, f"{(many - few) / 500:.1f} page faults per call"


@needs_cli
def test_bench_reports_time_bandwidth_and_memcpy(relu_elementwise):
    p = opcore("bench", relu_elementwise, "relu_forward", "--shape", "64,1024", "--rounds", "3",
               "--round-time", "0.005")
    assert re.search(r"^per call  [\d.]+ (us|ms) median, [\d.]+ (us|ms) best \(3 rounds of \d+ calls, "
                     r"single-core op\)$", p.stdout, re.M), p.stdout
    assert "bytes     524288 per call (inputs 262144 + outputs 262144)" in p.stdout
    assert re.search(r"^bandwidth [\d.]+ GB/s op, [\d.]+ GB/s memcpy of 262144 bytes on 1 thread$", p.stdout, re.M)
    assert re.search(r"^x memcpy  [\d.]+ \(median over rounds", p.stdout, re.M)


@needs_cli
def test_bench_usage_and_errors(relu_elementwise):
    assert "usage: opcore bench LIB.so OP" in opcore("bench", "--help").stdout
    assert "expected LIB.so and OP" in opcore("bench", check=2).stderr
    assert "--rounds '0' is not a positive count" in opcore("bench", relu_elementwise, "relu_forward", "-r", "0",
                                                           check=2).stderr
    assert "has no op 'nope'" in opcore("bench", relu_elementwise, "nope", check=1).stderr
