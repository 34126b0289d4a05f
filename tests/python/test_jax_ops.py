"""opcore.jax with the op language of issue #10: every schema type, several
results, in-place ops in their functional form, the backward-binding
convention of with_vjp, vmap, and clear errors for misuse. Real JAX (jit,
grad, vmap) on the nn_ops example library and the jax_kinds test library."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy
ojax = pytest.importorskip("opcore.jax")
import opcore  # noqa: E402

import jax_libs  # noqa: E402
from jax_libs import custom_calls as _custom_calls, jnp_layer_norm, rand as _x  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def libs():
    jax_libs.load()


def _close(got, want, tol=1e-5):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)


# ---- numpy references ------------------------------------------------------------

def ref_layer_norm(x, w=None, b=None, eps=1e-5):
    x64 = np.asarray(x, np.float64)
    m = x64.mean(-1, keepdims=True)
    v = ((x64 - m) ** 2).mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(v + eps)
    y = (x64 - m) * rstd
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y, m[..., 0], rstd[..., 0]


def jnp_avg_pool(x, k, s, p):
    x = jnp.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    return jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 1, k, k), (1, 1, s, s), "VALID") / (k * k)


# ---------------------------------------------------------------------------
# every argument type

def test_str_float_list_bool_keyword_only_optional_int():
    poly = ojax.op("jax_kinds::poly")  # (x, float[] coeffs, str mode="horner", *, bool negate, int? clip)
    x = _x()
    want = 1 + 2 * x + 3 * x * x
    _close(poly(x, [1.0, 2.0, 3.0]), want)
    _close(poly(x, (1, 2, 3), "power"), want)  # ints in a float[], a tuple
    _close(jax.jit(lambda x: poly(x, [1.0, 2.0, 3.0], mode="power", negate=True))(x), -want)
    _close(poly(x, [1.0, 2.0, 3.0], negate=True, clip=1), np.clip(-want, -1, 1))
    _close(poly(x, [1.0, 2.0, 3.0], clip=None), want)
    _close(poly(x, []), np.zeros_like(x))  # an empty float[]


def test_scalar_type_and_scalar():
    cast = ojax.op("jax_kinds::cast")  # (x, ScalarType dtype, Scalar scale=1)
    x = _x() * 10
    for dtype in (jnp.int32, np.int16, "float16", np.dtype(np.float32), jnp.bfloat16, jnp.bool_):
        got = jax.jit(lambda x, d=dtype: cast(x, d))(x)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(np.asarray(got), x.astype(np.dtype(dtype)))
    _close(cast(x, jnp.float32, 2), x * 2)      # an int Scalar
    _close(cast(x, jnp.float32, 0.5), x * 0.5)  # a float Scalar
    _close(cast(x, jnp.float32, True), x)       # a bool Scalar


def test_attributes_in_the_lowered_hlo():
    poly = ojax.op("jax_kinds::poly")
    cast = ojax.op("jax_kinds::cast")
    pool = ojax.op("nn_ops::avg_pool2d")
    x = jnp.asarray(_x((1, 1, 4, 4)))
    text = ojax.hlo(lambda x: (poly(x, [0.5, 2.0], "power", negate=True, clip=None), cast(x, jnp.int8, 3),
                               pool(x, 2)), x)
    calls = _custom_calls(text)
    assert len(calls) == 3, text
    p = next(c for c in calls if "jax_kinds::poly" in c)
    assert "coeffs = dense<[5.000000e-01, 2.000000e+00]> : tensor<2xf64>" in p
    assert 'mode = "power"' in p and "negate = true" in p and "clip = {}" in p
    c = next(c for c in calls if "jax_kinds::cast" in c)
    assert 'dtype = "int8"' in c and "scale = 3 : i64" in c and "s8[1,1,4,4]" in c
    a = next(c for c in calls if "nn_ops::avg_pool2d" in c)
    assert "kernel_size = dense<2> : tensor<2xi64>" in a  # one int fills int[2]
    assert "stride" not in a  # left to the schema default


def test_int_list_single_int_fills_and_defaults():
    pool = ojax.op("nn_ops::avg_pool2d")  # (x, int[2] kernel_size, int[2] stride=1, int[2] padding=0)
    x = _x((2, 3, 9, 9))
    _close(pool(x, 2), jnp_avg_pool(x, 2, 1, 0))
    _close(jax.jit(lambda x: pool(x, [3, 3], stride=2, padding=1))(x), jnp_avg_pool(x, 3, 2, 1))
    _close(pool(x, (3, 3), (2, 2), [1, 1]), jnp_avg_pool(x, 3, 2, 1))
    assert pool(x, 3, stride=[2, 2], padding=1).shape == (2, 3, 5, 5)


def test_tensor_list():
    concat = ojax.op("nn_ops::concat")  # (Tensor[] xs, int dim=0)
    a, b, c = _x((2, 3), 1), _x((4, 3), 2), _x((1, 3), 3)
    _close(concat([a, b, c]), np.concatenate([a, b, c]))
    _close(jax.jit(lambda a, b: concat((a, b, a), dim=0))(a, b), np.concatenate([a, b, a]))
    _close(jax.jit(lambda a: concat([a.T, a.T], dim=1))(a), np.concatenate([a.T, a.T], 1))
    _close(concat([a]), a)
    text = ojax.hlo(lambda a, b: concat([a, b]), a, b)
    (call,) = _custom_calls(text)
    assert "xs = 2 : i64" in call and "f32[6,3]" in call


def test_optional_tensor():
    linear = ojax.op("nn_ops::linear")  # (x, weight, Tensor? bias=None)
    x, w, b = _x((4, 5)), _x((3, 5), 1), _x((3,), 2)
    _close(linear(x, w), x @ w.T)
    _close(linear(x, w, None), x @ w.T)
    _close(jax.jit(linear)(x, w, b), x @ w.T + b)
    _close(linear(x, w, bias=b), x @ w.T + b)
    (call,) = _custom_calls(ojax.hlo(lambda x, w: linear(x, w), x, w))
    assert "bias = {}" in call and call.count("f32[") == 3  # two operands and the result


def test_several_results():
    ln = ojax.op("nn_ops::layer_norm")  # -> (Tensor out, Tensor mean, Tensor rstd)
    x, w, b = _x((3, 4, 6)), _x((6,), 1), _x((6,), 2)
    out, mean, rstd = jax.jit(lambda x, w, b: ln(x, [6], w, b, eps=1e-3))(x, w, b)
    y, m, r = ref_layer_norm(x, w, b, eps=1e-3)
    _close(out, y)
    _close(mean, m)
    _close(rstd, r, 1e-4)
    assert mean.shape == rstd.shape == (3, 4)
    out2, _, _ = ln(x.reshape(3, 24), [24])  # weight and bias left None
    _close(out2, ref_layer_norm(x.reshape(3, 24))[0])


# ---------------------------------------------------------------------------
# in-place ops: the functional form

def test_fused_sgd_functional_form():
    sgd = ojax.op("nn_ops::sgd_momentum_")  # (Tensor(a!)[] params, Tensor(b!)[] bufs, Tensor[] grads, ...) -> ()
    params = [jnp.asarray(_x((3, 4), 1)), jnp.asarray(_x((5,), 2))]
    bufs = [jnp.asarray(_x((3, 4), 3)), jnp.asarray(_x((5,), 4))]
    grads = [jnp.asarray(_x((3, 4), 5)), jnp.asarray(_x((5,), 6))]
    keep = [np.asarray(p).copy() for p in params + bufs]
    new_p, new_b = jax.jit(lambda p, m, g: sgd(p, m, g, 0.1, momentum=0.9, weight_decay=0.01))(params, bufs, grads)
    assert isinstance(new_p, list) and len(new_p) == 2 and isinstance(new_b, list)
    for p, m, g, np_, nb in zip(params, bufs, grads, new_p, new_b):
        gg = np.asarray(g) + 0.01 * np.asarray(p)
        buf = np.asarray(m) * 0.9 + gg
        _close(nb, buf)
        _close(np_, np.asarray(p) - 0.1 * buf)
    # the caller's arrays are not changed: JAX values are immutable
    for a, k in zip(params + bufs, keep):
        np.testing.assert_array_equal(np.asarray(a), k)


def test_in_place_updates_alias_their_buffers():
    sgd = ojax.op("nn_ops::sgd_momentum_")
    add_ = ojax.op("jax_kinds::add_")
    p, m, g = jnp.ones((64,)), jnp.zeros((64,)), jnp.full((64,), 2.0)
    f = jax.jit(lambda p, m, g: sgd(p, m, g, 0.5, momentum=0.9), donate_argnums=(0, 1))
    text = f.lower([p], [m], [g]).as_text(dialect="hlo")
    assert "output_to_operand_aliasing={{0}: (0, {}), {1}: (1, {})}" in text
    before = ojax.alias_copies()
    for _ in range(3):
        (p,), (m,) = f([p], [m], [g])
    assert ojax.alias_copies() == before  # XLA aliased every buffer: updated in place, no copy
    _close(p, 1 - 0.5 * (2 + 2 * 1.9 + 2 * 2.71))
    x = jnp.arange(4.0)
    _close(jax.jit(lambda x: add_(x, x * 10, alpha=0.5))(x), x * 6)


def test_results_and_mutated_arguments_order():
    add_ = ojax.op("jax_kinds::add_")          # -> Tensor(a!): the new value alone
    swap = ojax.op("jax_kinds::swap_scale_")    # two Tensor(a!), -> (): both new values
    norm = ojax.op("jax_kinds::normalize_")     # -> (Tensor norm, Tensor(a!)): fresh first
    x, y = _x((2, 3), 1), _x((2, 3), 2)
    _close(add_(x, y), x + y)
    _close(add_(x, y, alpha=-2), x - 2 * y)
    nx, ny = jax.jit(lambda x, y: swap(x, y, 3.0))(x, y)
    _close(nx, 3 * y)
    _close(ny, 3 * x)
    n, xn = jax.jit(norm)(x)
    assert n.shape == () and xn.shape == x.shape
    _close(n, np.linalg.norm(x))
    _close(xn, x / np.linalg.norm(x))


def test_op_without_results_runs_for_its_effect():
    check = ojax.op("jax_kinds::check_finite")  # (Tensor x, str what="x") -> ()
    assert check(_x()) is None

    @jax.jit
    def f(x):
        check(x, "the input")  # no result: kept for its effect (an error on a bad input)
        return x * 2

    _close(f(_x()), 2 * _x())
    bad = _x().copy()
    bad[1, 2] = np.nan
    with pytest.raises(Exception, match="jax_kinds::check_finite.*the input: element 7 is nan"):
        np.asarray(f(bad))


# ---------------------------------------------------------------------------
# misuse: clear errors naming the op and the argument

@pytest.mark.parametrize("call, words", [
    (lambda: ojax.op("nn_ops::avg_pool2d")(_x((1, 1, 4, 4)), [2, 2, 2]),
     ["nn_ops::avg_pool2d", "'kernel_size'", "int[2]", "expected 2 ints", "list of 3"]),
    (lambda: ojax.op("nn_ops::linear")(None, _x((3, 5))),
     ["nn_ops::linear", "'x'", "got None", "Tensor?"]),
    (lambda: ojax.op("nn_ops::layer_norm")(_x(), [5], eps=None),
     ["nn_ops::layer_norm", "'eps'", "got None"]),
    (lambda: ojax.op("jax_kinds::poly")(_x(), [1.0], "power", True),
     ["jax_kinds::poly", "argument 'negate' is keyword-only: pass negate=True"]),
    (lambda: ojax.op("jax_kinds::poly")(_x(), [1.0], bogus=1), ["jax_kinds::poly", "no argument 'bogus'"]),
    (lambda: ojax.op("jax_kinds::poly")(_x()), ["jax_kinds::poly", "missing argument 'coeffs'"]),
    (lambda: ojax.op("jax_kinds::poly")(_x(), [1.0], mode=3), ["'mode'", "expected a str"]),
    (lambda: ojax.op("jax_kinds::poly")(_x(), 1.0), ["'coeffs'", "float[]", "expected a list"]),
    (lambda: ojax.op("jax_kinds::poly")(_x(), [1.0], negate=1), ["'negate'", "expected a bool"]),
    (lambda: ojax.op("jax_kinds::poly")(_x(), [1.0], clip=2.5), ["'clip'", "expected an int"]),
    (lambda: ojax.op("jax_kinds::cast")(_x(), "uint16"), ["'dtype'", "ScalarType", "expected a dtype"]),
    (lambda: ojax.op("jax_kinds::cast")(_x().astype(np.uint16), jnp.float32),
     ["'x'", "uint16", "does not support"]),
    (lambda: ojax.op("nn_ops::concat")(jnp.ones((2, 2))), ["'xs'", "Tensor[]", "expected a list of arrays"]),
    (lambda: ojax.op("nn_ops::linear")([_x()], _x((3, 5))), ["'x'", "only Tensor[] arguments take lists"]),
    (lambda: ojax.op("nn_ops::concat")([_x(), [_x()]]), ["'xs'", "item 1 expected an array, got a list"]),
    (lambda: jax.jit(lambda x, s: ojax.op("jax_kinds::scale")(x, s))(_x(), 2.0),
     ["jax_kinds::scale", "'s'", "static", "traced"]),
])
def test_misuse_is_a_clear_error(call, words):
    with pytest.raises(opcore.OpArgumentError) as ei:
        call()
    for w in words:
        assert w in str(ei.value), (w, str(ei.value))
    assert isinstance(ei.value, TypeError) and isinstance(ei.value, ValueError)


def test_differentiating_an_op_without_with_vjp_is_a_clear_error():
    with pytest.raises(ValueError, match="'jax_kinds::scale' has no gradient by itself.*with_vjp"):
        jax.grad(lambda x: ojax.op("jax_kinds::scale")(x).sum())(_x())
    with pytest.raises(ValueError, match="'jax_kinds::add_' writes its arguments in place \\(x\\)"):
        jax.grad(lambda x: ojax.op("jax_kinds::add_")(x, x).sum())(_x())


def test_batch_dims_declaration_errors():
    with pytest.raises(ValueError, match="nn_ops::linear.*no tensor argument or result 'w'.*x, weight, bias"):
        ojax.op("nn_ops::linear", batch_dims={"w": 0})
    with pytest.raises(ValueError, match="'x': expected a dimension"):
        ojax.op("nn_ops::linear", batch_dims={"x": -1})
    with pytest.raises(ValueError, match="no tensor argument is batched"):
        ojax.op("nn_ops::linear", batch_dims={"result0": 0})
    with pytest.raises(TypeError, match="expected an int, a tuple of ints, or a dict"):
        ojax.op("nn_ops::linear", batch_dims="x")
    # on one device a batch_dims op is the plain custom call
    linear = ojax.op("nn_ops::linear", batch_dims={"x": 0, "result0": 0})
    x, w = _x((4, 5)), _x((3, 5), 1)
    _close(jax.jit(linear)(x, w), x @ w.T)
    assert len(_custom_calls(ojax.hlo(linear, x, w))) == 1
    with pytest.raises(ValueError, match="disagree on the size of batch axis 0"):
        ojax.op("nn_ops::concat", batch_dims=0)([x, _x((3, 5))], dim=0)


def test_shape_function_and_kernel_errors_name_the_op():
    pool = ojax.op("nn_ops::avg_pool2d")
    with pytest.raises(opcore.OpError, match="nn_ops::avg_pool2d.*smaller than the kernel"):
        pool(_x((1, 1, 2, 2)), 3)
    poly = jax.jit(lambda x: ojax.op("jax_kinds::poly")(x, [1.0], "bogus"))
    with pytest.raises(Exception, match="jax_kinds::poly.*mode must be 'horner' or 'power', got 'bogus'"):
        np.asarray(poly(_x()))
    _close(ojax.op("jax_kinds::poly")(_x(), [1.0]), np.ones((4, 5)))  # and the process goes on


# ---------------------------------------------------------------------------
# vmap

def test_vmap_of_the_new_types():
    xs = _x((3, 4, 6))
    w, b = _x((6,), 1), _x((6,), 2)
    ln = ojax.op("nn_ops::layer_norm")
    out, mean, rstd = jax.vmap(lambda x: ln(x, [6], w, b))(xs)
    _close(out, ref_layer_norm(xs, w, b)[0])
    assert mean.shape == (3, 4)
    concat = ojax.op("nn_ops::concat")
    _close(jax.vmap(lambda a: concat([a, a[:1]], dim=0))(xs), np.concatenate([xs, xs[:, :1]], 1))
    linear = ojax.op("nn_ops::linear")
    wt = _x((2, 6), 3)
    _close(jax.jit(jax.vmap(lambda a: linear(a, wt)))(xs), xs @ wt.T)
    _close(jax.vmap(linear, in_axes=(0, None, None))(xs, wt, _x((2,), 4)), xs @ wt.T + _x((2,), 4))
    sgd = ojax.op("nn_ops::sgd_momentum_")
    new_p, new_b = jax.vmap(lambda p, m, g: sgd([p], [m], [g], 0.1, momentum=0.5))(xs, xs, xs)
    _close(new_b[0], xs * 1.5)
    _close(new_p[0], xs - 0.1 * xs * 1.5)


def test_vmap_broadcast_all_is_one_call():
    poly = ojax.op("jax_kinds::poly", vmap_method="broadcast_all")
    cast = ojax.op("jax_kinds::cast", vmap_method="broadcast_all")
    xs = _x((5, 2, 3))
    f = jax.vmap(lambda x: cast(poly(x, [0.0, 1.0], negate=True), jnp.float16, 2))
    _close(f(xs), (-2 * xs).astype(np.float16), 1e-2)
    text = ojax.hlo(f, xs)
    assert "while" not in text and len(_custom_calls(text)) == 2 and "f16[5,2,3]" in text


# ---------------------------------------------------------------------------
# with_vjp: the backward-binding convention

def test_grad_layer_norm_three_results_by_name():
    ln = ojax.with_vjp("nn_ops::layer_norm", "nn_ops::layer_norm_backward")
    x, w, b = _x((4, 6)), _x((6,), 1), _x((6,), 2)
    t = jnp.arange(6.0)
    loss = lambda x, w, b: (ln(x, [6], w, b)[0] * t).sum()  # noqa: E731
    ref = lambda x, w, b: (jnp_layer_norm(x, w, b) * t).sum()  # noqa: E731
    got = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(x, w, b)
    want = jax.grad(ref, argnums=(0, 1, 2))(x, w, b)
    for g, r in zip(got, want):
        _close(g, r, 1e-4)
    # weight and bias None: only x gets a gradient
    gx = jax.grad(lambda x: (ln(x, [6])[0] * t).sum())(x)
    _close(gx, jax.grad(lambda x: (jnp_layer_norm(x, 1.0, 0.0) * t).sum())(x), 1e-4)
    # vmap of grad
    gv = jax.vmap(jax.grad(lambda x: (ln(x, [6], w, b)[0] * t).sum()))(x[:, None, :])
    _close(gv[:, 0], want[0], 1e-4)


def test_grad_gets_the_forwards_non_tensor_arguments():
    pool = ojax.with_vjp("nn_ops::avg_pool2d", "nn_ops::avg_pool2d_backward")
    x = _x((2, 2, 7, 7))
    got = jax.grad(lambda x: (pool(x, 3, stride=2, padding=1) ** 2).sum())(x)
    want = jax.grad(lambda x: (jnp_avg_pool(x, 3, 2, 1) ** 2).sum())(x)
    _close(got, want)  # with the backward's defaults (stride 1, padding 0) this would not even run


def test_grad_optional_bias_and_cross_core_sum():
    linear = ojax.with_vjp("nn_ops::linear", "nn_ops::linear_backward")
    x, w, b = _x((4, 5)), _x((3, 5), 1), _x((3,), 2)
    got = jax.grad(lambda x, w, b: (linear(x, w, b) ** 2).sum(), argnums=(0, 1, 2))(x, w, b)
    want = jax.grad(lambda x, w, b: ((x @ w.T + b) ** 2).sum(), argnums=(0, 1, 2))(x, w, b)
    for g, r in zip(got, want):
        _close(g, r, 1e-4)
    gx, gw = jax.grad(lambda x, w: (linear(x, w) ** 2).sum(), argnums=(0, 1))(x, w)
    _close(gw, jax.grad(lambda w: ((x @ w.T) ** 2).sum())(w), 1e-4)
    gsum = ojax.with_vjp("nn_ops::global_sum", "nn_ops::global_sum_backward")
    _close(jax.jit(jax.grad(lambda x: gsum(x) * 3))(x), np.full_like(x, 3))


def test_backward_positional_fallback_and_per_input_entries():
    # mul_grad(dy, inp, factor=2.0): no argument matches by name -> mul_grad(grad, x)
    scale = ojax.with_vjp("jax_kinds::scale", "jax_kinds::mul_grad")
    x = _x()
    _close(jax.grad(lambda x: scale(x).sum())(x), np.full_like(x, 2))
    # one entry per tensor input (callables get (grad, *inputs)), None: no gradient
    linear = ojax.with_vjp("nn_ops::linear", lambda g, x, w, b: g @ w, None, lambda g, x, w, b: g.sum(0))
    x, w, b = _x((4, 5)), _x((3, 5), 1), _x((3,), 2)
    gx, gw, gb = jax.grad(lambda x, w, b: linear(x, w, b).sum(), argnums=(0, 1, 2))(x, w, b)
    _close(gx, np.ones((4, 3)) @ w)
    _close(gw, np.zeros_like(w))
    _close(gb, np.full(3, 4.0))
    # one callable for all inputs returns one gradient per tensor input
    linear2 = ojax.with_vjp("nn_ops::linear", lambda g, x, w, b: (g @ w, g.T @ x, None))
    gx2, gw2 = jax.grad(lambda x, w: linear2(x, w, b).sum(), argnums=(0, 1))(x, w)
    _close(gx2, gx)
    _close(gw2, np.ones((4, 3)).T @ x)


def test_gradient_shape_and_dtype_are_checked():
    bad = ojax.with_vjp("jax_kinds::scale", "jax_kinds::scale_backward_transposed")
    with pytest.raises(ValueError) as ei:
        jax.grad(lambda x: bad(x, 3.0).sum())(_x((4, 5)))
    msg = str(ei.value)
    for w in ("jax_kinds::scale", "jax_kinds::scale_backward_transposed", "input 'x'", "(5, 4)",
              "expected shape (4, 5)"):
        assert w in msg, (w, msg)
    half = ojax.with_vjp("jax_kinds::scale", lambda g, x: g.astype(jnp.float16))
    with pytest.raises(ValueError, match="dtype float16 for input 'x', expected shape \\(4, 5\\) and dtype float32"):
        jax.grad(lambda x: half(x).sum())(_x((4, 5)))
    with pytest.raises(TypeError, match="writes its arguments in place"):
        ojax.with_vjp("jax_kinds::add_", None)
    with pytest.raises(TypeError, match="Tensor\\[\\]"):
        ojax.with_vjp("nn_ops::concat", "nn_ops::global_sum_backward")


# ---------------------------------------------------------------------------
# the example: a model of nn_ops trained with the fused SGD step

def test_jax_demo_trains_like_jnp():
    import importlib.util
    spec = importlib.util.spec_from_file_location("jax_demo", jax_libs.OPS / "jax_demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    r = demo.run(steps=8, verbose=False)
    assert r["opcore"][-1] < r["opcore"][0] - 0.2  # it learns
    np.testing.assert_allclose(r["opcore"], r["jnp"], rtol=1e-5)  # as the jnp model does
    x, y = demo.data()
    p = {k: jnp.asarray(v) for k, v in demo.init().items()}
    _, loss, _ = demo.jnp_model()
    _, ours, _ = demo.opcore_model()
    per_example = jax.vmap(lambda xi, yi: jax.grad(ours)(p, xi[None], yi[None])["w1"])(x[:4], y[:4])
    want = jax.vmap(lambda xi, yi: jax.grad(loss)(p, xi[None], yi[None])["w1"])(x[:4], y[:4])
    _close(per_example, want, 1e-4)
    assert r["exported"] == {3: 0.0, 17: 0.0}


def test_each_call_site_is_decoded_once():
    """XLA's instantiate stage decodes a custom call's attributes once per
    call site (issue 21.4): compiling makes one site per opcore call, running
    the compiled function makes none, and every attribute kind (float[], str,
    bool, int? None, Tensor[], Tensor? None, defaults) reaches the kernel."""
    concat = ojax.op("nn_ops::concat")
    ln = ojax.op("nn_ops::layer_norm")
    poly = ojax.op("jax_kinds::poly")
    x = _x((3, 4))

    def f(x):
        y, _, _ = ln(concat([x, x * 2], 0), [4])
        return poly(y, [0.5, 2.0], "power", negate=True)

    before = ojax.call_sites()
    g = jax.jit(f).lower(x).compile()
    assert ojax.call_sites() == before + 3
    want = g(x)
    for _ in range(3):
        _close(g(x), want)
    assert ojax.call_sites() == before + 3
    y = ref_layer_norm(np.concatenate([x, x * 2], 0))[0]
    _close(want, -(0.5 + 2.0 * y), tol=1e-4)


def test_call_sites_run_prepared_calls():
    """After a site's first call, its later calls run through a prepared
    call (buffers bound once, data pointers swapped): the same results on
    new inputs, every call; an op that mutates an argument keeps binding
    per call."""
    concat = ojax.op("nn_ops::concat")
    ln = ojax.op("nn_ops::layer_norm")
    poly = ojax.op("jax_kinds::poly")

    def f(x):
        y, _, _ = ln(concat([x, x * 2], 0), [4])
        return poly(y, [0.5, 2.0], "power", negate=True)

    g = jax.jit(f).lower(_x((3, 4))).compile()
    before = ojax.prepared_sites()
    for seed in range(4):
        x = np.random.default_rng(seed).standard_normal((3, 4)).astype(np.float32)
        y = ref_layer_norm(np.concatenate([x, x * 2], 0))[0]
        _close(g(x), -(0.5 + 2.0 * y), tol=1e-4)
    assert ojax.prepared_sites() == before + 3

    add_ = ojax.op("jax_kinds::add_")
    h = jax.jit(lambda a, b: add_(a, b, alpha=2.0))
    before = ojax.prepared_sites()
    for seed in range(3):
        a, b = (np.random.default_rng(seed).standard_normal(5).astype(np.float32) for _ in range(2))
        _close(h(a, b), a + 2.0 * b)
    assert ojax.prepared_sites() == before


def test_a_callable_backward_receives_the_saved_results():
    """with_vjp's callable backward gets the forward's saved results through
    keyword-only parameters named after them, or `results` (issue 21.7)."""
    seen = {}

    def grad_x(g_out, g_mean, g_rstd, x, w, b, *, mean, rstd, results):
        seen["mean"], seen["rstd"], seen["n"] = mean, rstd, len(results)
        xhat = (x - mean[..., None]) * rstd[..., None]
        return rstd[..., None] * (g_out - g_out.mean(-1, keepdims=True)
                                  - xhat * (g_out * xhat).mean(-1, keepdims=True))

    ln = ojax.with_vjp("nn_ops::layer_norm", grad_x, None, None)
    x = _x((3, 8))
    gx = jax.grad(lambda x: (ln(x, [8])[0] ** 3).sum())(x)
    want = jax.grad(lambda x: (jnp_layer_norm(x, 1.0, 0.0) ** 3).sum())(x)
    _close(gx, want, tol=1e-4)
    _, m, r = ref_layer_norm(x)
    _close(seen["mean"], m)
    _close(seen["rstd"], r, tol=1e-4)
    assert seen["n"] == 3


def test_batch_dims_forms_and_errors():
    """batch_dims: an int, a tuple (several batch dims), a dict of those;
    clear errors naming the op for what cannot be a batch (issue 21.6)."""
    ln = "nn_ops::layer_norm"
    assert ojax.op(ln, batch_dims=(0, 1)).batch_dims.args == ((0, 1), (0, 1), (0, 1))
    assert ojax.op(ln, batch_dims={"x": (1, 0), "out": (1, 0)}).batch_dims.args == ((1, 0), (), ())
    for bad, msg in [((0, 0), "must be distinct"), ((0, True), "expected a dimension"),
                     ({"x": (0, 1), "out": 0}, "as many batch dimensions"), ((-1,), "expected a dimension")]:
        with pytest.raises(ValueError, match=msg) as e:
            ojax.op(ln, batch_dims=bad)
        assert ln in str(e.value)
