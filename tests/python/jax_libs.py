"""The op libraries the JAX tests use, built and loaded once per process
(also by the multi-device child process of test_jax_sharding.py):

  nn_ops     examples/ops: layer norm (3 results), fused SGD (Tensor(a!)[]),
             concat (Tensor[]), avg_pool2d (int[2]), linear (Tensor?),
             global_sum (cross-core reduction)
  jax_kinds  tests/python/jax_kernels: str, ScalarType, float[], bool,
             Scalar, int?, keyword-only, in-place results, size arithmetic
"""
from pathlib import Path

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
