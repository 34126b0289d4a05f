"""jax.export of opcore ops with symbolic sizes: serialised, deserialised
(also in a new process) and run at other sizes; size arithmetic through
oc_dim_* stays symbolic, plain C arithmetic is a clear error."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy
ojax = pytest.importorskip("opcore.jax")
pytest.importorskip("flatbuffers")  # jax.export's serialisation
import opcore  # noqa: E402

import jax_libs  # noqa: E402
from jax_libs import rand as _x  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module", autouse=True)
def libs():
    jax_libs.load()


def model(x, y):
    """Every kind of result size: shape-preserving (scale), input sizes and
    constants (layer_norm, global_sum), oc_dim_* arithmetic (avg_pool2d,
    concat, repeat_rows)."""
    scale = ojax.op("jax_kinds::scale")
    pool = ojax.op("nn_ops::avg_pool2d")
    concat = ojax.op("nn_ops::concat")
    ln = ojax.op("nn_ops::layer_norm")
    gsum = ojax.op("nn_ops::global_sum")
    rep = ojax.op("jax_kinds::repeat_rows")
    c = concat([y, scale(y[:, :2], 3.0)], dim=1)
    out, mean, _ = ln(c, [c.shape[1]])
    return pool(x, 3, stride=2, padding=1), out, mean, gsum(x), rep(y, 3)


def _specs():
    b, h = jax.export.symbolic_shape("b, h")
    return (jax.ShapeDtypeStruct((b, 3, h, h), jnp.float32), jax.ShapeDtypeStruct((b, 5), jnp.float32))


def _check_at_sizes(call):
    for n, h in [(1, 5), (4, 8), (7, 13)]:
        x, y = _x((n, 3, h, h), n), _x((n, 5), n + 1)
        got, want = call(x, y), model(x, y)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


def test_export_symbolic_sizes_round_trip():
    exp = ojax.export(model)(*_specs())
    shapes = [str(a.shape) for a in exp.out_avals]
    assert shapes[0] == "(b, 3, floordiv(h - 1, 2) + 1, floordiv(h - 1, 2) + 1)", shapes
    assert shapes[1:] == ["(b, 7)", "(b,)", "()", "(3*b, 5)"], shapes
    blob = exp.serialize()
    _check_at_sizes(ojax.deserialize(blob).call)
    _check_at_sizes(jax.jit(ojax.deserialize(blob).call))


def test_exported_function_runs_in_a_new_process(tmp_path):
    blob = tmp_path / "model.jax"
    blob.write_bytes(ojax.export(model)(*_specs()).serialize())
    ref = tmp_path / "ref.npz"
    x, y = _x((6, 3, 9, 9)), _x((6, 5), 1)
    np.savez(ref, x=x, y=y, *[np.asarray(v) for v in model(x, y)])
    child = textwrap.dedent(f"""
        import sys, numpy as np
        sys.path.insert(0, {HERE!r})
        import jax_libs, opcore.jax as ojax
        jax_libs.load()
        exp = ojax.deserialize(open({str(blob)!r}, "rb").read())
        ref = np.load({str(ref)!r})
        got = exp.call(ref["x"], ref["y"])
        for i, g in enumerate(got):
            np.testing.assert_allclose(np.asarray(g), ref[f"arr_{{i}}"], rtol=1e-5, atol=1e-5)
        print("ok", len(got))
    """)
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok 5" in r.stdout, r.stdout + r.stderr


def test_grad_exports_too():
    ln = ojax.with_vjp("nn_ops::layer_norm", "nn_ops::layer_norm_backward")
    w = _x((6,), 2)
    loss = jax.grad(lambda x: (ln(x, [6], w)[0] ** 2).sum())
    b, = jax.export.symbolic_shape("b")
    exp = ojax.deserialize(ojax.export(loss)(jax.ShapeDtypeStruct((b, 6), jnp.float32)).serialize())
    for n in (2, 9):
        x = _x((n, 6), n)
        np.testing.assert_allclose(np.asarray(exp.call(x)), np.asarray(loss(x)), rtol=1e-5, atol=1e-5)


def test_every_size_operation_stays_symbolic():
    dim_ops = ojax.op("jax_kinds::dim_ops")  # [ceil(n/k), n%k+1, min(n,k), max(n,k), 2n-1, n*k/3]
    b, = jax.export.symbolic_shape("b")
    exp = ojax.deserialize(ojax.export(lambda x: dim_ops(x, 4))(
        jax.ShapeDtypeStruct((b, 2), jnp.float32)).serialize())
    for n in (1, 3, 4, 9, 14):
        want = (-(-n // 4), n % 4 + 1, min(n, 4), max(n, 4), 2 * n - 1, n * 4 // 3)
        assert dim_ops(_x((n, 2)), 4).shape == want
        assert exp.call(_x((n, 2))).shape == want
    # a shape function that refuses small sizes is traced on large probes alone
    pool = ojax.op("nn_ops::avg_pool2d")
    h, = jax.export.symbolic_shape("h")
    exp = ojax.export(lambda x: pool(x, 9, stride=2))(jax.ShapeDtypeStruct((1, 1, h, h), jnp.float32))
    assert str(exp.out_avals[0].shape) == "(1, 1, floordiv(h - 9, 2) + 1, floordiv(h - 9, 2) + 1)"


def test_plain_c_size_arithmetic_is_a_clear_error():
    rep = ojax.op("jax_kinds::repeat_rows_plain")  # rows * times in plain C
    b, = jax.export.symbolic_shape("b")
    with pytest.raises(opcore.OpError) as ei:
        ojax.export(lambda y: rep(y, 2))(jax.ShapeDtypeStruct((b, 5), jnp.float32))
    msg = str(ei.value)
    for w in ("jax_kinds::repeat_rows_plain", "C arithmetic", "oc_dim_", "probe sizes b="):
        assert w in msg, (w, msg)
    # the same op with concrete sizes works
    np.testing.assert_array_equal(np.asarray(rep(_x((2, 5)), 2)), np.tile(_x((2, 5)), (2, 1)))


def test_the_custom_call_safety_check():
    scale = ojax.op("jax_kinds::scale")
    spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("b, 3"), jnp.float32)
    # jax.export alone refuses the custom call at serialisation ...
    with pytest.raises(ValueError, match="custom calls"):
        jax.export.export(jax.jit(lambda x: scale(x)))(spec)
    # ... opcore.jax.disabled_checks() is what to pass it (opcore.jax.export does)
    exp = jax.export.export(jax.jit(lambda x: scale(x)), disabled_checks=ojax.disabled_checks())(spec)
    x = _x((4, 3))
    np.testing.assert_allclose(np.asarray(ojax.deserialize(exp.serialize()).call(x)), 2 * x, rtol=1e-6)
