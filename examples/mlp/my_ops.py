"""The opcore ReLU operator, built from examples/relu/ and wrapped in the
seeds' autograd.Function.

    import my_ops
    my_ops.load('tcm')          # build (cached) and load one variant
    y = my_ops.Relu.apply(x)    # torch.ops.my_ops.relu_forward / relu_backward

VARIANTS is the one place that maps a variant to its sources, build flags and
the library namespace its shape.c registers. All variants currently register
the namespace `my_ops`, so only one can be loaded per process (the scripts
run one variant per process).
"""
import os
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RELU_DIR = os.path.join(REPO, "examples", "relu")

# variant -> how to build it. 'namespace' is the library name in OC_LIBRARY().
VARIANTS = {
    "elementwise": dict(compute="elementwise/relu.c", shape="shape.c", multicore=False, namespace="my_ops"),
    "stream":      dict(compute="stream/relu.c",      shape="shape.c", multicore=False, namespace="my_ops"),
    "tcm":         dict(compute="tcm/relu.c",         shape="shape.c", multicore=False, namespace="my_ops"),
    "multicore":   dict(compute="multicore/relu.c",   shape="shape.c", multicore=True,  namespace="my_ops"),
}
DEFAULT_VARIANT = "elementwise"

_ops = None          # torch.ops.<namespace> of the loaded variant
loaded_variant = None
build_seconds = None  # build time of the last load() (or build + load)
build_cached = None   # True when load() compiled nothing (cache hit)


def build_directory(variant):
    root = os.environ.get("OPCORE_MLP_BUILD", os.path.join(REPO, "build", "mlp"))
    return os.path.join(root, variant)


def load(variant=DEFAULT_VARIANT, verbose=False):
    """Build (a no-op when the sources are unchanged) and load one variant;
    returns torch.ops.<namespace>."""
    global _ops, loaded_variant, build_seconds, build_cached
    if loaded_variant is not None:
        if variant != loaded_variant:
            raise RuntimeError(f"my_ops: variant {loaded_variant!r} is already loaded in this "
                               f"process; run {variant!r} in another process")
        return _ops
    if variant not in VARIANTS:
        raise ValueError(f"unknown ReLU variant {variant!r}; choose from {', '.join(VARIANTS)}")
    try:
        from opcore import custom_op
    except ImportError as e:
        raise SystemExit(f"error: the opcore Python package is not importable ({e}); "
                         f"install it with `pip install -e {REPO}` or `make python`") from None
    v = VARIANTS[variant]
    out = build_directory(variant)
    os.makedirs(out, exist_ok=True)
    t0 = time.perf_counter()
    lib = custom_op.load(
        name="relu",
        compute_srcs=[os.path.join(RELU_DIR, v["compute"])],
        shape_srcs=[os.path.join(RELU_DIR, v["shape"])],
        build_directory=out,
        multicore=v["multicore"],
        verbose=verbose,
    )
    build_seconds = time.perf_counter() - t0
    if getattr(lib, "build_seconds", None) is not None:
        build_seconds = lib.build_seconds  # the build alone, without loading
    build_cached = getattr(lib, "cached", None)
    _ops = getattr(torch.ops, v["namespace"])
    loaded_variant = variant
    return _ops


class Relu(torch.autograd.Function):
    """The seeds' Relu: forward and backward are opcore operators."""

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return (_ops or load()).relu_forward(input)

    @staticmethod
    def backward(ctx, grad):
        input, = ctx.saved_tensors
        return _ops.relu_backward(grad, input)
