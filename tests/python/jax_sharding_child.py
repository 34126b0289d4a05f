"""Run by test_jax_sharding.py in a child process with 2 CPU devices
(XLA_FLAGS=--xla_force_host_platform_device_count=2 must be set before JAX
starts). Runs every case, prints one JSON line {case: result} where a
result is {"ok": bool, ...details}; an exception makes {"ok": false,
"error": message}."""
import json
import os
import sys
import traceback

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import numpy as np  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax_libs  # noqa: E402
import opcore.jax as ojax  # noqa: E402
from jax_libs import custom_calls as _calls, jnp_layer_norm as _ln_ref, rand as _x  # noqa: E402

CASES = {}


def case(f):
    CASES[f.__name__] = f
    return f


def _err(got, want):
    return max(float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64)), initial=0))
               for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)))


def _mesh(kind="auto"):
    t = AxisType.Auto if kind == "auto" else AxisType.Explicit
    return jax.make_mesh((2,), ("d",), axis_types=(t,))


# ---- shard_map --------------------------------------------------------------------

@case
def shard_map_per_shard():
    mesh = _mesh()
    scale, ln, concat = (ojax.op(n) for n in ("jax_kinds::scale", "nn_ops::layer_norm", "nn_ops::concat"))
    x = _x((8, 6))

    def f(x):
        out, mean, rstd = ln(x, [6])
        return scale(x, 3.0), out, mean, concat([x, x[:, :2]], dim=1)

    sf = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=P("d"), out_specs=P("d")))
    got = sf(x)
    calls = _calls(sf.lower(x).compile().as_text())
    local = all("f32[4,6]" in c.split("custom-call(")[1] for c in calls)  # operands: 4 of the 8 rows
    return {"ok": _err(got, f(x)) < 1e-5 and local and len(calls) == 3, "err": _err(got, f(x)),
            "calls": calls}


@case
def shard_map_replicated_out_spec_refused():
    mesh = _mesh()
    scale = ojax.op("jax_kinds::scale")
    try:
        jax.shard_map(lambda x: scale(x), mesh=mesh, in_specs=P("d"), out_specs=P())(_x((8, 3)))
    except ValueError as e:
        return {"ok": "out_specs" in str(e), "error": str(e)[:300]}
    return {"ok": False, "error": "out_specs=P() was accepted for a per-shard result"}


@case
def shard_map_grad():
    mesh = _mesh()
    lin = ojax.with_vjp("nn_ops::linear", "nn_ops::linear_backward")
    ln = ojax.with_vjp("nn_ops::layer_norm", "nn_ops::layer_norm_backward")
    x, w, b, g, beta = _x((8, 5)), _x((3, 5), 1), _x((3,), 2), _x((3,), 3), _x((3,), 4)

    def loss(x, w, b, g, beta):
        def local(x, w, b, g, beta):
            y = lin(x, w, b)
            return ln(y, [3], g, beta)[0]
        y = jax.shard_map(local, mesh=mesh, in_specs=(P("d"), P(), P(), P(), P()), out_specs=P("d"))(
            x, w, b, g, beta)
        return (y * jnp.arange(3.0)).sum()

    def ref(x, w, b, g, beta):
        return (_ln_ref(x @ w.T + b, g, beta) * jnp.arange(3.0)).sum()

    got = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3, 4)))(x, w, b, g, beta)
    want = jax.grad(ref, argnums=(0, 1, 2, 3, 4))(x, w, b, g, beta)
    return {"ok": _err(got, want) < 1e-4, "err": _err(got, want)}


# ---- jit with a batch-sharded NamedSharding -------------------------------------------

def _sharded_model(batch_dims):
    ln = ojax.op("nn_ops::layer_norm", batch_dims=batch_dims)
    lin = ojax.op("nn_ops::linear", batch_dims=None if batch_dims is None else {"x": 0, "result0": 0})
    pool = ojax.op("nn_ops::avg_pool2d", batch_dims=batch_dims)

    def f(x, w, img):
        out, mean, _ = ln(x, [5])
        return lin(out, w) * 2, mean, pool(img, 2)

    return f


def _jit_sharded(kind, batch_dims):
    mesh = _mesh(kind)
    x, w, img = _x((8, 5)), _x((3, 5), 1), _x((8, 2, 6, 6), 2)
    f = _sharded_model(batch_dims)
    xs = jax.device_put(x, NamedSharding(mesh, P("d")))
    ws = jax.device_put(w, NamedSharding(mesh, P()))
    imgs = jax.device_put(img, NamedSharding(mesh, P("d")))
    jf = jax.jit(f)
    text = jf.lower(xs, ws, imgs).compile().as_text()
    got = jf(xs, ws, imgs)
    want = _sharded_model(None)(x, w, img)  # unsharded, plain ops
    calls = _calls(text)
    return {"err": _err(got, want), "all_gather": "all-gather" in text, "calls": len(calls),
            "local_batch": all("f32[4," in c.split("custom-call")[0] for c in calls),
            "out_sharding": str(got[0].sharding.spec)}


@case
def jit_named_sharding_auto():
    r = _jit_sharded("auto", 0)
    r["ok"] = r["err"] < 1e-5 and not r["all_gather"] and r["calls"] == 3 and r["local_batch"]
    return r


@case
def jit_named_sharding_explicit():
    r = _jit_sharded("explicit", 0)
    r["ok"] = r["err"] < 1e-5 and not r["all_gather"] and r["calls"] == 3 and r["local_batch"]
    return r


def _rms_ops(batch_dims):
    from opcore import custom_op

    src = jax_libs.REPO / "examples" / "jax_ffi" / "rms_norm"
    if "jax_ffi_rms_norm" not in custom_op.loaded_libraries():
        custom_op.load(name="jax_ffi_rms_norm", compute_srcs=[str(src / "rms_norm.c")],
                       shape_srcs=[str(src / "shape.c")])
    return (ojax.op("jax_ffi_rms_norm::rms_norm_fwd", batch_dims=batch_dims),
            ojax.op("jax_ffi_rms_norm::rms_norm_bwd", batch_dims=batch_dims))


def _rms_ref(x):
    s = 1 / np.sqrt(np.mean(np.square(np.asarray(x, np.float64)), axis=-1) + 1e-5)
    return np.asarray(x) * s[..., None], s


def _jit_sharded_dim1(kind):
    """rms_norm over [B, T, D] with two batch dims (0, 1), sharded on T: each
    device normalises its rows, no all-gather; the backward too."""
    fwd, bwd = _rms_ops((0, 1))
    mesh = _mesh(kind)
    x = _x((3, 4, 8))
    xs = jax.device_put(x, NamedSharding(mesh, P(None, "d")))

    def f(x):
        y, res = fwd(x)
        return y, res, bwd(res, x, y)

    jf = jax.jit(f)
    text = jf.lower(xs).compile().as_text()
    y, res, g = jf(xs)
    want_y, want_s = _rms_ref(x)
    calls = _calls(text)
    return {"err": max(_err(y, want_y), _err(res, want_s)), "all_gather": "all-gather" in text,
            "calls": len(calls), "local": all("f32[3,2,8]" in c for c in calls),
            "bwd_err": _err(g, bwd(jnp.asarray(want_s, jnp.float32), x, jnp.asarray(want_y, jnp.float32))),
            "out_sharding": str(y.sharding.spec)}


@case
def jit_named_sharding_second_dim_auto():
    r = _jit_sharded_dim1("auto")
    r["ok"] = r["err"] < 1e-5 and r["bwd_err"] < 1e-5 and not r["all_gather"] and r["calls"] == 2 and r["local"]
    return r


@case
def jit_named_sharding_second_dim_explicit():
    r = _jit_sharded_dim1("explicit")
    r["ok"] = r["err"] < 1e-5 and r["bwd_err"] < 1e-5 and not r["all_gather"] and r["calls"] == 2 and r["local"]
    return r


@case
def jit_second_dim_with_one_batch_dim_gathers():
    """The issue's case: batch_dims=0 alone, sharded on dim 1: XLA gathers."""
    fwd, _ = _rms_ops(0)
    mesh = _mesh()
    x = _x((3, 4, 8))
    xs = jax.device_put(x, NamedSharding(mesh, P(None, "d")))
    text = jax.jit(fwd).lower(xs).compile().as_text()
    y, _ = jax.jit(fwd)(xs)
    return {"ok": "all-gather" in text and _err(y, _rms_ref(x)[0]) < 1e-5}


@case
def jit_without_batch_dims_gathers():
    r = _jit_sharded("auto", None)  # the plain op: XLA gathers its inputs (correct, not per shard)
    r["ok"] = r["err"] < 1e-5 and r["all_gather"] and not r["local_batch"]
    return r


@case
def jit_sharded_grad_and_vmap():
    mesh = _mesh()
    scale = ojax.op("jax_kinds::scale", batch_dims=0)
    sc = ojax.with_vjp(scale, ojax.op("jax_kinds::mul_grad", batch_dims=0))
    x = _x((8, 4))
    xs = jax.device_put(x, NamedSharding(mesh, P("d")))
    g = jax.jit(jax.grad(lambda x: (sc(x) ** 2).sum()))
    text = g.lower(xs).compile().as_text()
    gv = jax.jit(jax.vmap(lambda r: scale(r, 3.0)))(xs)
    return {"ok": _err(g(xs), 8 * x) < 1e-5 and "all-gather" not in text and _err(gv, 3 * x) < 1e-6,
            "grad_err": _err(g(xs), 8 * x), "all_gather": "all-gather" in text}


@case
def batch_dims_on_a_scalar_result_is_an_error():
    mesh = _mesh()
    gsum = ojax.op("nn_ops::global_sum", batch_dims=0)  # a 0-dim result: not batch-separable
    xs = jax.device_put(_x((8, 4)), NamedSharding(mesh, P("d")))
    try:
        jax.jit(gsum)(xs)
    except ValueError as e:
        return {"ok": "nn_ops::global_sum" in str(e) and "no batch dimension 0" in str(e), "error": str(e)}
    return {"ok": False, "error": "accepted"}


@case
def export_sharded():
    mesh = _mesh()
    scale = ojax.op("jax_kinds::scale", batch_dims=0)
    sh = NamedSharding(mesh, P("d"))
    f = jax.jit(lambda x: scale(x, 5.0), in_shardings=sh, out_shardings=sh)
    exp = ojax.export(f)(jax.ShapeDtypeStruct((8, 4), jnp.float32, sharding=sh))
    back = ojax.deserialize(exp.serialize())
    x = _x((8, 4))
    got = back.call(jax.device_put(x, sh))
    return {"ok": _err(got, 5 * x) < 1e-6 and back.nr_devices == 2, "devices": back.nr_devices}


def main():
    jax_libs.load()
    out = {"devices": jax.device_count()}
    for name, f in CASES.items():
        try:
            out[name] = f()
        except Exception as e:  # reported to the test, which fails with it
            out[name] = {"ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}
    print("RESULT " + json.dumps(out, default=str))


if __name__ == "__main__":
    main()
