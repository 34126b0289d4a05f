"""A multicore kernel returns oc_dst_tensor() or NULL (issue #24, item 8):
a tensor one share made itself holds that core's values at best, so opcore
refuses it with an error naming the op, in every way of calling the op,
instead of handing back garbage. (The C host API: tests/c/test_engine.c.)"""
import numpy as np
import pytest

import opcore
from conftest import load_texts

COMPUTE = r"""
#include <opcore/kernel.h>

/* each core fills its own tensor: the result would be garbage */
oc_tensor *own(const oc_tensor *x)
{
    oc_tensor *mine = oc_empty_like(x);
    float *o = mine->data;
    int64_t lo, hi;
    oc_core_range(oc_numel(x), 1, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) o[i] = 7.0f;
    return mine;
}

/* writes its share of oc_dst_tensor() and returns NULL: fine */
oc_tensor *null_ret(const oc_tensor *x)
{
    float *o = oc_dst_tensor()->data;
    int64_t lo, hi;
    oc_core_range(oc_numel(x), 1, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) o[i] = 7.0f;
    return NULL;
}
"""

SHAPE = r"""
#include <opcore/library.h>
static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }
OC_LIBRARY(mc_results, m)
{
    oc_def(m, "own(Tensor x) -> Tensor", same, "own");
    oc_def(m, "null_ret(Tensor x) -> Tensor", same, "null_ret");
}
"""

MESSAGE = r"op 'mc_results::own': multicore kernel 'own' on core \d+ returned a tensor other than oc_dst_tensor\(\)"


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return load_texts(tmp_path_factory.mktemp("mc_results"), "mc_results", COMPUTE, SHAPE, multicore=True)


def test_direct_call_refuses_a_multicore_kernels_own_tensor(lib):
    with pytest.raises(opcore.OpError, match=MESSAGE):
        lib.own(np.zeros(100000, np.float32))


def test_torch_ops_refuses_a_multicore_kernels_own_tensor(lib):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception, match=MESSAGE):
        torch.ops.mc_results.own(torch.zeros(100000))


def test_jax_refuses_a_multicore_kernels_own_tensor(lib):
    pytest.importorskip("jax")
    import jax
    import jax.numpy as jnp

    from opcore import jax as ocjax

    with pytest.raises(Exception, match=MESSAGE):
        jax.block_until_ready(jax.jit(ocjax.op("mc_results::own"))(jnp.zeros(100000)))


def test_multicore_kernel_returning_null_gives_what_the_cores_wrote(lib):
    torch = pytest.importorskip("torch")
    assert np.array_equal(lib.null_ret(np.zeros(100000, np.float32)), np.full(100000, 7.0, np.float32))
    assert torch.equal(torch.ops.mc_results.null_ret(torch.zeros(100000)), torch.full((100000,), 7.0))
