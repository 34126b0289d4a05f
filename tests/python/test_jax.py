"""opcore.jax: opcore ops as XLA custom calls (issue 4), and seed 003."""
import os
import threading

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy
opcore = pytest.importorskip("opcore")
custom_op = pytest.importorskip("opcore.custom_op")
ojax = pytest.importorskip("opcore.jax")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A single-core test library: float/int/bool/Scalar arguments, a shape
# function that changes the shape, a failing kernel, a forward/backward pair.
JT_COMPUTE = r"""
#include <math.h>
#include <opcore/kernel.h>

oc_tensor *scale(const oc_tensor *x, double s)
{
    oc_tensor *out = oc_dst_tensor();
    for (int64_t i = 0; i < oc_numel(x); i++)
        *(float *)oc_flat_ptr(out, i) = *(const float *)oc_flat_ptr(x, i) * (float)s;
    return out;
}

oc_tensor *affine(const oc_tensor *x, oc_scalar a, int64_t b, bool negate)
{
    oc_tensor *out = oc_dst_tensor();
    double av = oc_scalar_to_double(a), sign = negate ? -1.0 : 1.0;
    for (int64_t i = 0; i < oc_numel(x); i++)
        *(float *)oc_flat_ptr(out, i) =
            (float)(sign * (*(const float *)oc_flat_ptr(x, i) * av + (double)b));
    return out;
}

oc_tensor *rowsum(const oc_tensor *x)
{
    oc_tensor *out = oc_dst_tensor();
    int64_t rows = x->sizes[0], cols = x->sizes[1];
    for (int64_t r = 0; r < rows; r++) {
        float acc = 0;
        for (int64_t c = 0; c < cols; c++) acc += *(const float *)oc_flat_ptr(x, r * cols + c);
        *(float *)oc_flat_ptr(out, r) = acc;
    }
    return out;
}

oc_tensor *checked_sqrt(const oc_tensor *x)
{
    oc_tensor *out = oc_dst_tensor();
    for (int64_t i = 0; i < oc_numel(x); i++) {
        float v = *(const float *)oc_flat_ptr(x, i);
        OC_CHECK(v >= 0, "negative input %g at index %lld", v, (long long)i);
        *(float *)oc_flat_ptr(out, i) = sqrtf(v);
    }
    return out;
}

oc_tensor *relu_forward(const oc_tensor *x)
{
    oc_tensor *out = oc_dst_tensor();
    for (int64_t i = 0; i < oc_numel(x); i++) {
        float v = *(const float *)oc_flat_ptr(x, i);
        *(float *)oc_flat_ptr(out, i) = v > 0 ? v : 0;
    }
    return out;
}

oc_tensor *relu_backward(const oc_tensor *grad, const oc_tensor *x)
{
    oc_tensor *out = oc_dst_tensor();
    for (int64_t i = 0; i < oc_numel(x); i++) {
        float v = *(const float *)oc_flat_ptr(x, i);
        *(float *)oc_flat_ptr(out, i) = v > 0 ? *(const float *)oc_flat_ptr(grad, i) : 0;
    }
    return out;
}
"""

JT_SHAPE = r"""
#include <opcore/library.h>

static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }
static oc_tensor *scale_shape(const oc_tensor *x, double s) { (void)s; return oc_empty_like(x); }
static oc_tensor *affine_shape(const oc_tensor *x, oc_scalar a, int64_t b, bool n)
{
    (void)a; (void)b; (void)n;
    return oc_empty_like(x);
}
static oc_tensor *rowsum_shape(const oc_tensor *x) { return oc_empty(x->dtype, 1, x->sizes); }
static oc_tensor *relu_bwd_shape(const oc_tensor *g, const oc_tensor *x) { (void)g; return oc_empty_like(x); }

OC_LIBRARY(jax_test_ops, m)
{
    oc_def(m, "scale(Tensor x, float s=2.0) -> Tensor", scale_shape, "scale");
    oc_def(m, "affine(Tensor x, Scalar a, int b, bool negate=False) -> Tensor", affine_shape, "affine");
    oc_def(m, "rowsum(Tensor x) -> Tensor", rowsum_shape, "rowsum");
    oc_def(m, "checked_sqrt(Tensor x) -> Tensor", same, "checked_sqrt");
    oc_def(m, "relu_forward(Tensor x) -> Tensor", same, "relu_forward");
    oc_def(m, "relu_backward(Tensor grad, Tensor x) -> Tensor", relu_bwd_shape, "relu_backward");
}
"""


@pytest.fixture(scope="session")
def jt_ops(tmp_path_factory):
    d = tmp_path_factory.mktemp("jax_test_ops")
    (d / "ops.c").write_text(JT_COMPUTE)
    (d / "shape.c").write_text(JT_SHAPE)
    custom_op.load(name="jax_test_ops", compute_srcs=[str(d / "ops.c")],
                   shape_srcs=[str(d / "shape.c")], build_directory=str(d / "build"))
    return "jax_test_ops"


def _x(shape=(3, 5), seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


# ---------------------------------------------------------------------------
# the handler

def test_handler_compiled_and_cached():
    ojax.register()
    ojax.register()  # idempotent
    so = ojax.handler_path()
    assert so.exists() and so.suffix == ".so"
    import jaxlib
    assert jaxlib.__version__ in so.name
    # a second build request finds the cached file
    assert ojax._build_handler() == so


def test_handler_is_c11_and_warning_free(tmp_path):
    import subprocess
    cmd = [os.environ.get("CC", "cc"), "-std=c11", "-O2", "-fPIC", "-Wall", "-Wextra", "-Werror", "-c",
           "-I", jax.ffi.include_dir(), "-I", opcore.include_dir(), str(ojax._handler_source()),
           "-o", str(tmp_path / "handler.o")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_unknown_op_is_a_clear_error():
    ojax.register()
    with pytest.raises(LookupError, match="no_such_lib::nope"):
        ojax.op("no_such_lib::nope")


# ---------------------------------------------------------------------------
# calls, jit, HLO

def test_eager_and_jit(jt_ops):
    scale = ojax.op("jax_test_ops::scale")
    x = _x()
    np.testing.assert_allclose(scale(x), x * 2, rtol=1e-6)  # default s=2.0
    np.testing.assert_allclose(scale(x, 3.0), x * 3, rtol=1e-6)
    f = jax.jit(lambda x: scale(x, s=0.5) + 1)
    np.testing.assert_allclose(f(x), x * 0.5 + 1, rtol=1e-6)


def test_lowered_hlo_has_custom_call(jt_ops):
    scale = ojax.op("jax_test_ops::scale")
    x = jnp.asarray(_x())
    text = ojax.hlo(lambda x: scale(x, 3.0) * x, x)
    call = [l for l in text.splitlines() if "custom-call(" in l]
    assert len(call) == 1, text
    assert 'custom_call_target="opcore"' in call[0]
    assert 'op = "jax_test_ops::scale"' in call[0]
    assert "s = 3.0" in call[0] or "s = 3.000000e+00" in call[0]
    # the documented one-liners give the same
    assert '"opcore"' in jax.jit(lambda x: scale(x)).lower(x).as_text(dialect="hlo")
    stable = jax.jit(lambda x: scale(x)).lower(x).as_text()
    assert "stablehlo.custom_call @opcore" in stable and "jax_test_ops::scale" in stable
    compiled = ojax.hlo(lambda x: scale(x) * x, x, compiled=True)
    assert 'custom_call_target="opcore"' in compiled


def test_non_tensor_arguments(jt_ops):
    affine = ojax.op("jax_test_ops::affine")
    x = _x()
    np.testing.assert_allclose(affine(x, 2.5, 3), x * 2.5 + 3, rtol=1e-6)
    np.testing.assert_allclose(affine(x, 2, -1, True), -(x * 2 - 1), rtol=1e-6)  # int Scalar
    np.testing.assert_allclose(jax.jit(lambda x: affine(x, a=0.5, b=1, negate=True))(x),
                               -(x * 0.5 + 1), rtol=1e-6)
    with pytest.raises(TypeError, match="'b'"):
        affine(x, 1.0)  # missing b
    with pytest.raises(TypeError, match="int"):
        affine(x, 1.0, 1.5)


def test_shape_function_gives_output_shape(jt_ops):
    rowsum = ojax.op("jax_test_ops::rowsum")
    x = _x((4, 7))
    out = jax.jit(rowsum)(x)
    assert out.shape == (4,) and out.dtype == jnp.float32
    np.testing.assert_allclose(out, x.sum(1), rtol=1e-5)
    assert jax.eval_shape(rowsum, jax.ShapeDtypeStruct((9, 2), jnp.float32)).shape == (9,)


# ---------------------------------------------------------------------------
# vmap, grad

def test_vmap_sequential_and_broadcast_all(jt_ops):
    x = _x((6, 4, 7))
    rowsum = ojax.op("jax_test_ops::rowsum")  # not rank-polymorphic: sequential
    np.testing.assert_allclose(jax.vmap(rowsum)(x), x.sum(2), rtol=1e-5)
    np.testing.assert_allclose(jax.jit(jax.vmap(rowsum, in_axes=1))(x), x.sum(2).T, rtol=1e-5)
    scale = ojax.op("jax_test_ops::scale", vmap_method="broadcast_all")
    np.testing.assert_allclose(jax.vmap(lambda v: scale(v, 4.0))(x), x * 4, rtol=1e-6)
    # broadcast_all is one custom call on the batched array (no loop)
    text = ojax.hlo(jax.vmap(lambda v: scale(v, 4.0)), x)
    assert "while" not in text and "f32[6,4,7]{2,1,0} custom-call" in text


def test_grad_through_with_vjp(jt_ops):
    relu = ojax.with_vjp("jax_test_ops::relu_forward", "jax_test_ops::relu_backward")
    x = _x((5, 6))
    loss = lambda x: (relu(x) * x).sum()
    g = jax.jit(jax.grad(loss))(x)
    np.testing.assert_allclose(g, np.where(x > 0, 2 * x, 0), rtol=1e-6)
    # vmap of grad works too
    gv = jax.vmap(jax.grad(lambda r: (relu(r) ** 2).sum()))(x)
    np.testing.assert_allclose(gv, np.where(x > 0, 2 * x, 0), rtol=1e-6)


def test_with_vjp_static_args_and_arity(jt_ops):
    scale = ojax.with_vjp("jax_test_ops::scale", lambda g, x: g * 3.0)
    x = _x()
    np.testing.assert_allclose(jax.grad(lambda x: scale(x, 3.0).sum())(x), np.full_like(x, 3.0))
    with pytest.raises(TypeError, match="one backward per input"):
        ojax.with_vjp("jax_test_ops::relu_backward", ojax.passthrough, None, None)


# ---------------------------------------------------------------------------
# errors, threads

def test_kernel_error_becomes_exception_naming_op(jt_ops):
    sqrt = jax.jit(ojax.op("jax_test_ops::checked_sqrt"))
    bad = np.array([[1.0, -4.0]], np.float32)
    with pytest.raises(Exception) as ei:
        np.asarray(sqrt(bad))
    msg = str(ei.value)
    assert "jax_test_ops::checked_sqrt" in msg and "negative input" in msg
    # the process and the op go on working
    np.testing.assert_allclose(sqrt(np.array([[4.0, 9.0]], np.float32)), [[2.0, 3.0]])


def test_concurrent_calls_from_threads(jt_ops, seed003):
    add = ojax.op(seed003.QUALNAME)
    scale = ojax.op("jax_test_ops::scale")
    f = jax.jit(lambda a, b: scale(add(a, b), 0.5))
    xs = [(_x((64, 128), 2 * i), _x((64, 128), 2 * i + 1)) for i in range(4)]
    want = [(a + b) * 0.5 for a, b in xs]
    errors = []

    def work(k):
        try:
            for _ in range(25):
                np.testing.assert_allclose(f(*xs[k]), want[k], rtol=1e-6)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# ---------------------------------------------------------------------------
# seed 003: the multicore SPMD tensor add in PyTorch and JAX

TOL = 1e-5  # |got - want| / (|want| + 1), float32 against float64 numpy


def test_seed003_multicore_op(seed003):
    add = ojax.op(seed003.QUALNAME)
    # built --multicore (asked of the runtime through the handler's libopcore)
    import ctypes
    h = ojax._load_handler()
    h.oc_library_find.restype = ctypes.c_void_p
    h.oc_library_find.argtypes = [ctypes.c_char_p]
    h.oc_library_multicore.restype = ctypes.c_bool
    h.oc_library_multicore.argtypes = [ctypes.c_void_p]
    lib = h.oc_library_find(b"add_ops")
    assert lib and h.oc_library_multicore(lib)
    a, b = seed003.inputs(1)
    np.testing.assert_allclose(jax.jit(add)(a, b), a + b, rtol=1e-6)
    # odd sizes: tiles that do not divide the tensor, fewer tiles than cores
    for shape in [(1,), (3, 5), (4097,), (2, 3, 1000)]:
        x, y = _x(shape, 3), _x(shape, 4)
        np.testing.assert_allclose(add(x, y), x + y, rtol=1e-6)


def test_seed003_hlo(seed003):
    add = ojax.op(seed003.QUALNAME)
    a, b = seed003.inputs()
    text = ojax.hlo(lambda a, b: a * b * add(a, b), a, b)
    line = [l for l in text.splitlines() if "custom-call(" in l]
    assert len(line) == 1
    assert "f32[256,1024]{1,0} custom-call(" in line[0]
    assert 'custom_call_target="opcore"' in line[0] and '"add_ops::tensor_add"' in line[0]


def test_seed003_jax_results(seed003):
    a, b = seed003.inputs()
    ref = seed003.reference(a, b)
    res = seed003.jax_results(a, b)
    for k, v in res.items():
        want = ref["out" if k.startswith("out") else k.replace("_with_vjp", "")]
        assert v.shape == (256, 1024) and v.dtype == np.float32, k
        assert seed003.max_rel_err(v, want) < TOL, k


def test_seed003_torch_results(seed003):
    pytest.importorskip("torch")
    a, b = seed003.inputs()
    ref = seed003.reference(a, b)
    res = seed003.torch_results(a, b)
    for k, v in res.items():
        want = ref["out" if k.startswith("out") else k]
        assert v.shape == (256, 1024), k
        assert seed003.max_rel_err(v, want) < TOL, k
