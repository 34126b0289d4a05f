"""The nn_ops example library from JAX: a small classifier built from opcore
ops, trained with opcore's fused SGD step, checked against the same model
in plain jnp.

    python3 examples/ops/jax_demo.py [--steps 30] [--export model.jax]

The model uses every kind of op of the library: avg_pool2d (int[2]
arguments), concat (a Tensor[]), linear (a Tensor? bias), layer_norm
(three results), global_sum (a cross-core reduction) for the loss, and
sgd_momentum_ (Tensor(a!)[] lists updated in place) as the optimiser.
Gradients come from the library's backward ops through
opcore.jax.with_vjp (bound by name); concat's backward is a Python
callable. It prints both runs' losses, per-example gradient norms (vmap of
grad), and exports the forward with a symbolic batch size.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def load():
    """Build (cached) and load nn_ops (examples/ops/nn_ops.py)."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import nn_ops

    return nn_ops.load()


def data(n=256, seed=0):
    """8x8 one-channel images and 4 classes from a fixed random teacher."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 1, 8, 8)).astype(np.float32)
    teacher = rng.standard_normal((64, 4)).astype(np.float32)
    y = np.argmax(x.reshape(n, 64) @ teacher, axis=1)
    return x, np.eye(4, dtype=np.float32)[y]


def init(seed=1):
    rng = np.random.default_rng(seed)
    f = lambda *s: (rng.standard_normal(s) / np.sqrt(s[-1])).astype(np.float32)  # noqa: E731
    return {"w1": f(32, 20), "b1": np.zeros(32, np.float32), "g": np.ones(32, np.float32),
            "beta": np.zeros(32, np.float32), "w2": f(4, 32), "b2": np.zeros(4, np.float32)}


def opcore_model():
    """(loss(params, x, y), update(params, bufs, grads)) built from nn_ops."""
    import jax
    import jax.numpy as jnp
    import opcore.jax as ojax

    pool = ojax.with_vjp("nn_ops::avg_pool2d", "nn_ops::avg_pool2d_backward")
    concat = ojax.with_vjp("nn_ops::concat", lambda g, xs, dim=1: [g[:, :16], g[:, 16:]])
    linear = ojax.with_vjp("nn_ops::linear", "nn_ops::linear_backward")
    layer_norm = ojax.with_vjp("nn_ops::layer_norm", "nn_ops::layer_norm_backward")
    total = ojax.with_vjp("nn_ops::global_sum", "nn_ops::global_sum_backward")
    sgd = ojax.op("nn_ops::sgd_momentum_")

    def forward(p, x):
        n = x.shape[0]
        fine = pool(x, 2, stride=2).reshape(n, 16)           # [n, 16]
        coarse = pool(x, 4, stride=4).reshape(n, 4)          # [n, 4]
        h = linear(concat([fine, coarse], dim=1), p["w1"], p["b1"])
        h, _mean, _rstd = layer_norm(h, [32], p["g"], p["beta"])
        return linear(jax.nn.relu(h), p["w2"], p["b2"])

    def loss(p, x, y):
        logp = jax.nn.log_softmax(forward(p, x))
        return -total(logp * y) / x.shape[0]

    def update(p, bufs, grads, lr=0.1, momentum=0.9):
        keys = sorted(p)
        new_p, new_b = sgd([p[k] for k in keys], [bufs[k] for k in keys], [grads[k] for k in keys],
                           lr, momentum=momentum)
        return dict(zip(keys, new_p)), dict(zip(keys, new_b))

    return forward, loss, update


def jnp_model():
    """The same model in jnp (the reference)."""
    import jax
    import jax.numpy as jnp

    def pool(x, k):
        return jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 1, k, k), (1, 1, k, k), "VALID") / (k * k)

    def forward(p, x):
        n = x.shape[0]
        h = jnp.concatenate([pool(x, 2).reshape(n, 16), pool(x, 4).reshape(n, 4)], axis=1) @ p["w1"].T + p["b1"]
        m = h.mean(-1, keepdims=True)
        v = ((h - m) ** 2).mean(-1, keepdims=True)
        h = (h - m) / jnp.sqrt(v + 1e-5) * p["g"] + p["beta"]
        return jax.nn.relu(h) @ p["w2"].T + p["b2"]

    def loss(p, x, y):
        return -(jax.nn.log_softmax(forward(p, x)) * y).sum() / x.shape[0]

    def update(p, bufs, grads, lr=0.1, momentum=0.9):
        bufs = {k: bufs[k] * momentum + grads[k] for k in p}
        return {k: p[k] - lr * bufs[k] for k in p}, bufs

    return forward, loss, update


def train(model, steps, x, y):
    import jax
    import jax.numpy as jnp

    _, loss, update = model

    @jax.jit
    def step(p, bufs):
        value, grads = jax.value_and_grad(loss)(p, x, y)
        p, bufs = update(p, bufs, grads)
        return p, bufs, value

    p = {k: jnp.asarray(v) for k, v in init().items()}
    bufs = {k: jnp.zeros_like(v) for k, v in p.items()}
    losses = []
    for _ in range(steps):
        p, bufs, value = step(p, bufs)
        losses.append(float(value))
    return p, losses


def run(steps=30, export_path=None, verbose=True):
    """Train both models; returns {"opcore": losses, "jnp": losses,
    "per_example_grad_norms": ..., "exported": outputs at two batch sizes}."""
    import jax
    import jax.numpy as jnp
    import opcore.jax as ojax

    load()
    x, y = data()
    ours, ref = opcore_model(), jnp_model()
    p, losses = train(ours, steps, x, y)
    _, ref_losses = train(ref, steps, x, y)

    # per-example gradient norms of the first layer: vmap of grad
    per_example = jax.jit(jax.vmap(lambda xi, yi: jnp.linalg.norm(
        jax.grad(ours[1])(p, xi[None], yi[None])["w1"])))(x[:8], y[:8])

    # the forward, exported with a symbolic batch size, run at two sizes
    (b,) = jax.export.symbolic_shape("b")
    exp = ojax.export(lambda x: ours[0](p, x))(jax.ShapeDtypeStruct((b, 1, 8, 8), jnp.float32))
    blob = exp.serialize()
    if export_path:
        with open(export_path, "wb") as f:
            f.write(blob)
    back = ojax.deserialize(blob)
    exported = {n: float(np.max(np.abs(np.asarray(back.call(x[:n])) - np.asarray(ours[0](p, x[:n])))))
                for n in (3, 17)}

    if verbose:
        print(f"{'step':>4} {'opcore loss':>12} {'jnp loss':>12}")
        for i in range(0, steps, max(1, steps // 10)):
            print(f"{i:4d} {losses[i]:12.6f} {ref_losses[i]:12.6f}")
        print(f"last {losses[-1]:12.6f} {ref_losses[-1]:12.6f}  (max |difference| "
              f"{max(abs(a - b) for a, b in zip(losses, ref_losses)):.2e})")
        print("per-example |grad w1| (vmap of grad):", np.array2string(np.asarray(per_example), precision=4))
        print(f"exported forward (symbolic batch, {len(blob)} bytes): max |exported - jit| at batch 3 and 17:",
              exported)
    return {"opcore": losses, "jnp": ref_losses, "per_example_grad_norms": np.asarray(per_example),
            "exported": exported}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--export", default=None, help="write the exported forward (jax.export) here")
    args = ap.parse_args(argv)
    r = run(args.steps, args.export)
    ok = r["opcore"][-1] < r["opcore"][0] and max(abs(a - b) for a, b in zip(r["opcore"], r["jnp"])) < 1e-3
    print("opcore and jnp train alike" if ok else "THE RUNS DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
