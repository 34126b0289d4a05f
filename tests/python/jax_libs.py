"""The op libraries the JAX tests use, built and loaded once per process
(also by the child processes of test_jax_export.py and
test_jax_sharding.py), and the helpers those tests share:

  nn_ops     examples/ops: layer norm (3 results), fused SGD (Tensor(a!)[]),
             concat (Tensor[]), avg_pool2d (int[2]), linear (Tensor?),
             global_sum (cross-core reduction)
  jax_kinds  tests/python/jax_kernels: str, ScalarType, float[], bool,
             Scalar, int?, keyword-only, in-place results, size arithmetic
"""
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
OPS = REPO / "examples" / "ops"
KINDS = Path(__file__).resolve().parent / "jax_kernels"


def _load(name, compute, shape):
    from opcore import custom_op

    lib = custom_op.loaded_libraries().get(name)
    if lib is not None:
        return lib
    return custom_op.load(name=name, compute_srcs=[str(p) for p in compute], shape_srcs=[str(shape)])


def nn_ops():
    """The library through examples/ops/nn_ops.py, as the other tests load it
    (one nn_ops per process, whoever loads it first)."""
    import sys

    sys.path.insert(0, str(OPS))
    import nn_ops as loader

    return loader.load()


def jax_kinds():
    return _load("jax_kinds", [KINDS / "ops.c"], KINDS / "shape.c")


def load():
    """Both libraries."""
    nn_ops()
    jax_kinds()


def rand(shape=(4, 5), seed=0, dtype=np.float32):
    """A reproducible standard-normal array."""
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def custom_calls(text):
    """The lines of HLO text that call opcore's custom call."""
    return [line for line in text.splitlines() if 'custom_call_target="opcore"' in line]


def jnp_layer_norm(x, w, b, eps=1e-5):
    """Layer norm over the last dim in jnp (the reference for gradients)."""
    import jax.numpy as jnp

    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(v + eps) * w + b
