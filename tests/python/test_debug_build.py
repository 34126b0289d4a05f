"""What a --debug build catches beyond output overruns (issue 18, item 8),
through torch.ops and the direct call: a kernel writing into one of its
read-only inputs (the input checksums) and a TCM buffer overrun that stays
inside the arena (the TCM redzones), each named by op and argument or
buffer; the caller's input is left as the kernel wrote it, the call fails."""
import numpy as np
import pytest

import opcore
from opcore import custom_op

KERNELS = r"""
#include <stdbool.h>
#include <opcore/kernel.h>

oc_tensor *poke(const oc_tensor *x, int64_t at)
{
    if (at >= 0) ((float *)x->data)[at] = 99; /* const cast away */
    oc_tensor *o = oc_dst_tensor();
    for (int64_t i = 0; i < oc_numel(x); i++) ((float *)o->data)[i] = ((const float *)x->data)[i] + 1;
    return o;
}

oc_tensor *tcm_spill(const oc_tensor *x, int64_t past, bool free_it)
{
    float *a = oc_tcm_malloc(10 * sizeof(float)), *b = oc_tcm_malloc(10 * sizeof(float));
    for (int64_t i = 0; i < 10 + past; i++) a[i] = 0;
    for (int i = 0; i < 10; i++) b[i] = 2;
    if (free_it) oc_tcm_free(a);
    oc_tensor *o = oc_dst_tensor();
    for (int64_t i = 0; i < oc_numel(x); i++) ((float *)o->data)[i] = b[i % 10] * ((const float *)x->data)[i];
    return o;
}
"""

SHAPES = r"""
#include <stdbool.h>
#include <opcore/library.h>
static oc_tensor *same(const oc_tensor *x, int64_t n) { (void)n; return oc_empty_like(x); }
static oc_tensor *same_b(const oc_tensor *x, int64_t n, bool f) { (void)n; (void)f; return oc_empty_like(x); }
OC_LIBRARY(dbgpy, m)
{
    oc_def(m, "poke(Tensor x, int at) -> Tensor", same, "poke");
    oc_def(m, "tcm_spill(Tensor x, int past, bool free_it) -> Tensor", same_b, "tcm_spill");
}
"""

WROTE_INPUT = r"op 'dbgpy::poke': kernel 'poke' wrote into its input 'x' \(argument 1, float32 \[6\]\)"
TCM = (r"op 'dbgpy::tcm_spill': kernel 'tcm_spill' wrote past the end of TCM buffer 1 \(the call's "
       r"oc_tcm_malloc number 1: 40 bytes at offset 64 of core 0's TCM\)")


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("dbgpy")
    (d / "k.c").write_text(KERNELS)
    (d / "s.c").write_text(SHAPES)
    return custom_op.load(name="dbgpy", compute_srcs=[str(d / "k.c")], shape_srcs=[str(d / "s.c")],
                          build_directory=str(d / "build"), debug=True)


def test_direct_call_writing_its_input_fails_naming_op_and_argument(lib):
    x = np.zeros(6, np.float32)
    with pytest.raises(opcore.OpError, match=WROTE_INPUT):
        lib.poke(x, 2)
    assert np.array_equal(lib.poke(np.zeros(6, np.float32), -1), np.ones(6, np.float32))


def test_torch_op_writing_its_input_fails_naming_op_and_argument(lib):
    torch = pytest.importorskip("torch")
    with pytest.raises(opcore.OpError, match=WROTE_INPUT + r".*declare the argument Tensor\(a!\)"):
        torch.ops.dbgpy.poke(torch.zeros(6), 0)


@pytest.mark.parametrize("past,free_it", [(1, False), (6, True)])
def test_direct_call_tcm_overrun_fails_naming_op_and_buffer(lib, past, free_it):
    with pytest.raises(opcore.OpError, match=TCM):
        lib.tcm_spill(np.ones(4, np.float32), past, free_it)
    assert np.array_equal(lib.tcm_spill(np.ones(4, np.float32), 0, True), np.full(4, 2, np.float32))


def test_torch_op_tcm_overrun_fails_naming_op_and_buffer(lib):
    torch = pytest.importorskip("torch")
    with pytest.raises(opcore.OpError, match=TCM + r": byte 0 after its end changed"):
        torch.ops.dbgpy.tcm_spill(torch.ones(4), 1, False)
