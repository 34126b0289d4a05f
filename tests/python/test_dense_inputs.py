"""Inputs arrive as the kernel expects (issue 20, item 1): every tensor a
kernel gets is dense and row-major (a contiguous copy only when the
caller's is not), in torch eager (native and Python kernels), torch.compile,
direct calls, NumPy and JAX; an op declared `.strided = true` gets the
caller's strides; a non-contiguous in-place argument is written back. The
example kernels that read `->data` as dense are right with the expanded
gradients torch hands a backward. The C host API: tests/c/test_layout.c."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import opcore.torch  # noqa: E402,F401
from conftest import REPO, load_lib  # noqa: E402

sys.path.insert(0, str(REPO / "examples" / "ops"))
import nn_ops  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

KERNELS = r"""
#include <opcore/kernel.h>

/* reads x->data as dense row-major: out[i] = x[i] * (i + 1) */
oc_tensor *weigh(const oc_tensor *x)
{
    const float *s = x->data;
    float *d = oc_dst_tensor()->data;
    for (int64_t i = 0; i < oc_numel(x); i++) d[i] = s[i] * (float)(i + 1);
    return oc_dst_tensor();
}

/* the same over a Tensor[] and a Tensor?, summed into one value */
oc_tensor *weigh_all(oc_tensor_list xs, const oc_tensor *extra)
{
    double acc = 0;
    for (int64_t k = 0; k < xs.count; k++)
        for (int64_t i = 0; i < oc_numel(&xs.items[k]); i++) acc += ((const float *)xs.items[k].data)[i] * (i + 1);
    if (extra)
        for (int64_t i = 0; i < oc_numel(extra); i++) acc += ((const float *)extra->data)[i] * (i + 1);
    *(float *)oc_dst_tensor()->data = (float)acc;
    return oc_dst_tensor();
}

/* x[i] += i, written as dense */
void count_(oc_tensor *x)
{
    float *d = x->data;
    for (int64_t i = 0; i < oc_numel(x); i++) d[i] += (float)i;
}

/* the strides the kernel sees, as int64 */
static oc_tensor *strides_of(const oc_tensor *x)
{
    int64_t *d = oc_dst_tensor()->data;
    for (int i = 0; i < x->ndim; i++) d[i] = x->strides[i];
    return oc_dst_tensor();
}
oc_tensor *dense_strides(const oc_tensor *x) { return strides_of(x); }
oc_tensor *raw_strides(const oc_tensor *x) { return strides_of(x); }
"""

SHAPES = r"""
#include <opcore/library.h>

static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }
static oc_tensor *scalar(oc_tensor_list xs, const oc_tensor *extra)
{
    (void)xs, (void)extra;
    return oc_empty(OC_FLOAT32, 0, NULL);
}
static oc_tensor *ndim(const oc_tensor *x)
{
    int64_t n[1] = {x->ndim};
    return oc_empty(OC_INT64, 1, n);
}

OC_LIBRARY(dense_t, m)
{
    oc_def(m, "weigh(Tensor x) -> Tensor", same, "weigh");
    oc_def(m, "weigh_all(Tensor[] xs, Tensor? extra=None) -> Tensor", scalar, "weigh_all");
    oc_def(m, "count_(Tensor(a!) x) -> ()", NULL, "count_");
    oc_def(m, "dense_strides(Tensor x) -> Tensor", ndim, "dense_strides");
    oc_def(m, "raw_strides(Tensor x) -> Tensor", ndim, "raw_strides", .strided = true);
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory, opcore_build_dir):
    d = tmp_path_factory.mktemp("dense_src")
    (d / "kernels.c").write_text(KERNELS)
    (d / "shape.c").write_text(SHAPES)
    return load_lib(opcore_build_dir, "dense_t", d / "kernels.c", d / "shape.c")


@pytest.fixture(scope="module")
def ops(opcore_build_dir):
    nn_ops.load(build_directory=str(opcore_build_dir / "nn_ops"))
    return torch.ops.nn_ops


def weigh_ref(x):
    x = torch.as_tensor(np.ascontiguousarray(x)) if not isinstance(x, torch.Tensor) else x
    return x.contiguous().reshape(-1).mul(torch.arange(1, x.numel() + 1, dtype=x.dtype)).reshape(x.shape)


def layouts():
    base = torch.arange(24.0).reshape(4, 6)
    return {
        "transposed": base.t(),
        "sliced": base[::2, 1::2],
        "expanded": torch.arange(6.0).expand(4, 6),
        "empty": torch.empty(0, 3).t(),
        "contiguous": base,
    }


@pytest.mark.parametrize("layout", list(layouts()))
def test_torch_ops_inputs_arrive_dense(lib, layout):
    x = layouts()[layout]
    assert torch.equal(torch.ops.dense_t.weigh(x), weigh_ref(x))


@pytest.mark.parametrize("layout", list(layouts()))
def test_direct_call_inputs_arrive_dense(lib, layout):
    x = layouts()[layout]
    assert torch.equal(lib.weigh(x), weigh_ref(x))


def test_numpy_negative_strides_arrive_dense(lib):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[::-1, ::2]
    assert np.array_equal(lib.weigh(x), weigh_ref(x).numpy())


def test_jax_inputs_arrive_dense(lib):
    pytest.importorskip("jax")
    import jax
    import jax.numpy as jnp

    from opcore import jax as ocjax

    x = jnp.arange(24.0, dtype=jnp.float32).reshape(4, 6)
    f = jax.jit(lambda x: ocjax.op("dense_t::weigh")(x.T))
    assert np.array_equal(np.asarray(f(x)), weigh_ref(torch.arange(24.0).reshape(4, 6).t()).numpy())


def test_torch_compile_inputs_arrive_dense(lib):
    x = torch.arange(24.0).reshape(4, 6)
    f = torch.compile(lambda x: torch.ops.dense_t.weigh(x.t()[1:]), backend="eager", fullgraph=True)
    assert torch.equal(f(x), weigh_ref(x.t()[1:]))


def test_tensor_list_items_and_optional_arrive_dense(lib):
    a, b, c = torch.arange(6.0).reshape(2, 3).t(), torch.ones(1).expand(4), torch.arange(8.0)[::2]
    want = sum(float((weigh_ref(t)).sum()) for t in (a, b, c))
    assert float(torch.ops.dense_t.weigh_all([a, b], c)) == want
    assert float(lib.weigh_all([a, b], extra=c)) == want


def test_python_kernel_inputs_arrive_dense(lib):
    """The Python CPU kernel (no native one): in a process of its own."""
    code = f"""
        import torch, opcore.torch
        from opcore import custom_op
        custom_op.load_library({str(lib.path)!r})
        x = torch.arange(24.0).reshape(4, 6).t()
        want = x.contiguous().reshape(-1) * torch.arange(1, 25)
        assert torch.equal(torch.ops.dense_t.weigh(x).reshape(-1), want)
        print("OK")
    """
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=240,
                       env={**__import__("os").environ, "OPCORE_TORCH_NATIVE": "0"})
    assert "OK" in p.stdout, p.stdout + p.stderr[-3000:]


def test_strided_op_gets_the_callers_strides(lib):
    x = torch.zeros(4, 6).t()
    assert torch.ops.dense_t.raw_strides(x).tolist() == [1, 6]
    assert torch.ops.dense_t.dense_strides(x).tolist() == [4, 1]
    assert lib.raw_strides(x).tolist() == [1, 6]


def test_contiguous_input_is_not_copied(lib):
    """A contiguous tensor reaches the kernel as itself: its in-place write
    lands in the caller's memory directly (and its view stays the same)."""
    x = torch.zeros(5)
    ptr = x.data_ptr()
    torch.ops.dense_t.count_(x)
    assert x.data_ptr() == ptr and x.tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("call", ["torch_ops", "direct", "numpy"])
def test_non_contiguous_in_place_argument_is_written_back(lib, call):
    if call == "numpy":
        base = np.zeros((3, 4), np.float32)
        lib.count_(base[:, 1::2].T)
        got = torch.from_numpy(base)
    else:
        base = torch.zeros(3, 4)
        (torch.ops.dense_t.count_ if call == "torch_ops" else lib.count_)(base[:, 1::2].t())
        got = base
    want = torch.zeros(3, 4)
    want[:, 1::2] = torch.arange(6.0).reshape(2, 3).t()
    assert torch.equal(got, want)


# ---- the examples: kernels that read ->data as dense, with expanded gradients ----------


def test_linear_sum_backward_matches_torch(ops):
    """The issue's case: linear_backward read the expanded gradient of
    .sum() as dense (grad_w [-1.13, -1.15, -0.25] for torch's [0.76, -1.91, 0.73])."""
    g = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(*s, generator=g, requires_grad=True) for s in ((4, 3), (5, 3), (5,)))
    torch.ops.nn_ops.linear(x, w, b).sum().backward()
    mine = [t.grad.clone() for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    F.linear(x, w, b).sum().backward()
    for m, t in zip(mine, (x, w, b)):
        torch.testing.assert_close(m, t.grad)


def test_layer_norm_and_avg_pool_take_expanded_gradients(ops):
    """They refused the gradient of .sum() ("grad_out must be contiguous")."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 8, generator=g, requires_grad=True)
    torch.ops.nn_ops.layer_norm(x, [8])[0].sum().backward()
    mine, x.grad = x.grad.clone(), None
    F.layer_norm(x, [8]).sum().backward()
    torch.testing.assert_close(mine, x.grad, atol=1e-5, rtol=1e-5)
    p = torch.randn(1, 2, 6, 6, generator=g, requires_grad=True)
    torch.ops.nn_ops.avg_pool2d(p, [2, 2], [2, 2]).sum().backward()
    mine, p.grad = p.grad.clone(), None
    F.avg_pool2d(p, 2, 2).sum().backward()
    torch.testing.assert_close(mine, p.grad)


def test_concat_and_global_sum_declare_strided(ops):
    """Their kernels handle any strides: they keep getting the caller's views."""
    from opcore import custom_op

    info = custom_op.loaded_libraries()["nn_ops"].ops
    a = torch.arange(6.0).reshape(2, 3).t()
    assert torch.equal(torch.ops.nn_ops.concat([a, a], 1), torch.cat([a, a], 1))
    assert float(torch.ops.nn_ops.global_sum(a)) == 15.0
    assert info["concat"].strided and info["global_sum"].strided and not info["linear"].strided
