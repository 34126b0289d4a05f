"""The `opcore` command line: build, info, run, version, --help, bad options.

Runs build/opcore (or $OPCORE_CLI) with subprocess on the seeds' ReLU example.
"""
import json

import pytest

from conftest import RELU as EX, needs_cli, run_cli as opcore

pytestmark = needs_cli


@pytest.fixture(scope="module")
def relu_lib(tmp_path_factory):
    out = tmp_path_factory.mktemp("relu")
    p = opcore("build", "--name", "my_ops", "--shape", EX / "shape.c",
               "--compute", EX / "elementwise" / "relu.c", "-o", out, check=0)
    path = out / "libmy_ops.so"
    assert p.stdout.startswith(str(path))
    assert "built in" in p.stdout
    return path


def test_build_then_cached(relu_lib):
    before = relu_lib.stat()
    p = opcore("build", "--name", "my_ops", "--shape", EX / "shape.c",
               "--compute", EX / "elementwise" / "relu.c", "-o", relu_lib.parent, check=0)
    assert p.stdout.strip() == f"{relu_lib} (cached)"
    # not rebuilt: the same file (its cost is the benchmarks', not a test's)
    after = relu_lib.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_build_quiet_and_verbose(tmp_path):
    p = opcore("build", "-n", "my_ops", "-s", EX / "shape.c", "-c", EX / "tcm" / "relu.c",
               "-o", tmp_path, "--verbose", "--quiet", check=0)
    assert p.stdout.strip() == str(tmp_path / "libmy_ops.so")
    assert "-march=native" in p.stderr and "-shared" in p.stderr  # each command printed


def test_build_multiple_sources_one_option(tmp_path):
    # --compute a.c b.c: several files after one option
    (tmp_path / "fwd.c").write_text(
        "#include <opcore/kernel.h>\n"
        "oc_tensor *relu_forward(const oc_tensor *x) { return oc_zeros_like(x); }\n")
    (tmp_path / "bwd.c").write_text(
        "#include <opcore/kernel.h>\n"
        "oc_tensor *relu_backward(const oc_tensor *g, const oc_tensor *x) { (void)g; return oc_zeros_like(x); }\n")
    opcore("build", "--name", "two", "--compute", tmp_path / "fwd.c", tmp_path / "bwd.c",
           "--shape", EX / "shape.c", "-o", tmp_path, check=0)


def test_build_options_embedded(tmp_path):
    opcore("build", "--name", "my_ops", "--shape", EX / "shape.c", "--compute",
           EX / "multicore" / "relu.c", "--multicore", "--cflags", "-DSTACK_SIZE=20000",
           "-o", tmp_path, check=0)
    info = json.loads(opcore("info", "--json", tmp_path / "libmy_ops.so", check=0).stdout)
    assert info["multicore"] is True
    assert info["stack_size"] == 20000
    assert "-DSTACK_SIZE=20000" in info["cflags"]
    opcore("build", "--name", "my_ops", "--shape", EX / "shape.c", "--compute",
           EX / "multicore" / "relu.c", "--stack-size", "64k", "-o", tmp_path / "b", check=0)
    info = json.loads(opcore("info", "--json", tmp_path / "b" / "libmy_ops.so", check=0).stdout)
    assert info["stack_size"] == 65536 and info["multicore"] is False


def test_build_signature_error(tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text("#include <opcore/kernel.h>\n"
                   "oc_tensor *relu_forward(oc_tensor *x) { return oc_empty_like(x); }\n"
                   "oc_tensor *relu_backward(const oc_tensor *g, const oc_tensor *x) { (void)g; return oc_empty_like(x); }\n")
    p = opcore("build", "--name", "my_ops", "--shape", EX / "shape.c", "--compute", bad,
               "-o", tmp_path, check=1)
    assert ("kernel 'relu_forward' must be declared as: "
            "oc_tensor *relu_forward(const oc_tensor *x);") in p.stderr
    assert "conflicting types" in p.stderr


def test_build_compiler_error_shown(tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text("#include <opcore/kernel.h>\nthis is not C;\n")
    p = opcore("build", "--name", "my_ops", "--shape", EX / "shape.c", "--compute", bad,
               "-o", tmp_path, check=1)
    assert f"{bad}:2" in p.stderr and "error" in p.stderr


def test_build_usage_errors(tmp_path):
    p = opcore("build", "--shape", EX / "shape.c", check=2)
    assert "--name" in p.stderr
    p = opcore("build", "--name", "x", check=2)
    assert "--shape" in p.stderr
    p = opcore("build", "--name", "x", "--shape", tmp_path / "missing.c", check=1)
    assert "missing.c" in p.stderr
    p = opcore("build", "--name", "x", "--shape", EX / "shape.c", "--stack-size", "lots", check=2)
    assert "lots" in p.stderr
    p = opcore("build", "--name", "9x", "--shape", EX / "shape.c", "-o", tmp_path, check=1)
    assert "C identifier" in p.stderr


def test_info(relu_lib):
    p = opcore("info", relu_lib, check=0)
    out = p.stdout
    assert "my_ops" in out and str(relu_lib) in out
    assert "multicore   no" in out
    assert "relu_forward(Tensor x) -> Tensor" in out
    assert "oc_tensor *relu_forward(const oc_tensor *x);" in out
    assert "oc_tensor *relu_backward(const oc_tensor *grad, const oc_tensor *x);" in out
    info = json.loads(opcore("info", "--json", relu_lib, check=0).stdout)
    assert [op["name"] for op in info["ops"]] == ["my_ops::relu_forward", "my_ops::relu_backward"]
    assert info["stack_size"] == 256 * 1024


def test_info_errors(tmp_path):
    p = opcore("info", tmp_path / "nope.so", check=1)
    assert "nope.so" in p.stderr
    opcore("info", check=2)


def test_run(relu_lib):
    p = opcore("run", relu_lib, "relu_forward", "--shape", "4,5", "--seed", "3", check=0)
    assert "float32 [4, 5]" in p.stdout
    assert "time" in p.stdout
    p2 = opcore("run", relu_lib, "my_ops::relu_forward", "--shape", "4,5", "--seed", "3", check=0)
    # same seed, same values
    assert p.stdout.splitlines()[3] == p2.stdout.splitlines()[3]


def test_run_print_and_fill(relu_lib):
    p = opcore("run", relu_lib, "relu_forward", "--shape", "2,2", "--arg", "x=-2", "--print", check=0)
    assert "[0, 0, 0, 0]" in p.stdout
    p = opcore("run", relu_lib, "relu_backward", "--shape", "2,2", "--arg", "grad=3",
               "--arg", "x=1", "--repeat", "3", "--print", check=0)
    assert "[3, 3, 3, 3]" in p.stdout and "3 calls" in p.stdout


def test_run_kernel_error_exit_1(relu_lib):
    # the example kernel checks for 2-D input: the OC_CHECK message comes back
    p = opcore("run", relu_lib, "relu_forward", "--shape", "2,3,4", check=1)
    assert "2-D" in p.stderr


def test_run_usage_errors(relu_lib):
    p = opcore("run", relu_lib, "no_such_op", check=1)
    assert "no_such_op" in p.stderr and "relu_forward" in p.stderr
    p = opcore("run", relu_lib, "relu_forward", "--arg", "y=1", check=2)
    assert "'y'" in p.stderr
    p = opcore("run", relu_lib, "relu_forward", "--dtype", "float99", check=2)
    assert "float99" in p.stderr
    p = opcore("run", relu_lib, "relu_forward", "--shape", "2,,3", check=2)
    opcore("run", relu_lib, check=2)


def test_version():
    p = opcore("version", check=0)
    assert p.stdout.startswith("opcore ") and "ABI" in p.stdout
    opcore("--version", check=0)


@pytest.mark.parametrize("cmd", [[], ["build"], ["info"], ["run"], ["version"]])
def test_help(cmd):
    p = opcore(*cmd, "--help", check=0)
    assert p.stdout.startswith("usage: opcore")
    p = opcore(*cmd, "-h", check=0)
    assert "usage" in p.stdout


def test_help_command():
    assert "--compute" in opcore("help", "build", check=0).stdout


@pytest.mark.parametrize("cmd", [[], ["build"], ["info"], ["run"], ["version"]])
def test_unknown_option_is_usage_error(cmd):
    p = opcore(*cmd, "--no-such-option", check=2)
    assert "--no-such-option" in p.stderr


def test_unknown_command():
    p = opcore("frobnicate", check=2)
    assert "frobnicate" in p.stderr
    opcore(check=2)
