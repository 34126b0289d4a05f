"""Shared fixtures for the Python tests.

The ReLU examples all register the library name `my_ops`, and a process can
hold one library per name. So the fixtures here build each variant under its
own name: a copy of examples/relu/shape.c with OC_LIBRARY(my_ops_<variant>)
(the kernels are the examples' own files). Tests that need the name my_ops
itself (the seeds' code verbatim) run in a subprocess.
"""
import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RELU = REPO / "examples" / "relu"
TORCH_KERNELS = Path(__file__).resolve().parent / "torch_kernels"
RELU_VARIANTS = ("elementwise", "stream", "tcm", "multicore")



@pytest.fixture(scope="session")
def opcore_build_dir(tmp_path_factory):
    """A per-session build directory for the test libraries."""
    return tmp_path_factory.mktemp("opcore_build")


def renamed_shape_source(dst_dir, namespace):
    """examples/relu/shape.c with its library renamed to `namespace`."""
    src = (RELU / "shape.c").read_text()
    text, n = re.subn(r"OC_LIBRARY\(\s*my_ops\s*,", f"OC_LIBRARY({namespace},", src)
    assert n == 1, "examples/relu/shape.c no longer declares OC_LIBRARY(my_ops, m)"
    path = Path(dst_dir) / f"shape_{namespace}.c"
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def relu_libs(opcore_build_dir):
    """{variant: opcore Library} of the four ReLU examples, each loaded under
    the namespace my_ops_<variant> (torch.ops.my_ops_<variant>.relu_forward)."""
    from opcore import custom_op

    libs = {}
    for variant in RELU_VARIANTS:
        ns = f"my_ops_{variant}"
        out = opcore_build_dir / ns
        out.mkdir(exist_ok=True)
        shape = renamed_shape_source(out, ns)
        libs[variant] = custom_op.load(name=ns, compute_srcs=[str(RELU / variant / "relu.c")],
                                       shape_srcs=[str(shape)], build_directory=str(out),
                                       multicore=(variant == "multicore"))
        assert libs[variant].name == ns
    return libs


@pytest.fixture(scope="session")
def test_ops(opcore_build_dir):
    """The library oc_torch_test of tests/python/torch_kernels (fault, hello,
    scale, add, only_1d, sum_rows)."""
    from opcore import custom_op

    return custom_op.load(name="oc_torch_test", compute_srcs=[str(TORCH_KERNELS / "ops.c")],
                          shape_srcs=[str(TORCH_KERNELS / "shape.c")],
                          build_directory=str(opcore_build_dir / "oc_torch_test"))


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
    from opcore import custom_op

    return custom_op.load(name="oc_torch_stack", compute_srcs=[str(TORCH_KERNELS / "stack_ops.c")],
                          shape_srcs=[str(TORCH_KERNELS / "stack_shape.c")],
                          build_directory=str(opcore_build_dir / "oc_torch_stack"),
                          extra_cflags=["-DSTACK_SIZE=32768"])
