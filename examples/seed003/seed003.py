"""Seed 003: an opcore kernel as a custom operator in PyTorch and JAX graphs.

The SPMD tensor-add kernel (add.c: a [2, 2] launch grid of 128x512 tiles,
each program instance reading oc_program_id(0) and (1); the engine hands
the instances to its free cores) replaces `a + b` in `a * b * (a + b)` on
256x1024 float32 inputs:

  * PyTorch eager and torch.compile: torch.ops.add_ops.tensor_add
  * JAX under jax.jit: opcore.jax.op("add_ops::tensor_add"), an XLA custom
    call with target "opcore"
  * training: the gradients of sum(a * b * (a + b)) through a
    torch.autograd.Function and a jax.custom_vjp whose backward passes the
    gradient through to both inputs (d(a+b)/da = d(a+b)/db = 1).

Run:   python3 examples/seed003/seed003.py [--build-dir DIR] [--no-graphs] [--compiled]

It prints the results, their largest difference from numpy, the HLO with
the custom call (the counterpart of the seed's debug dump) and the graph
torch.compile captured.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SHAPE = (256, 1024)
QUALNAME = "add_ops::tensor_add"

_loaded = False


def load(build_dir: str | None = None, verbose: bool = False) -> None:
    """Build add.c + shape.c as the multicore library `add` (a no-op when
    unchanged) and load it: registers torch.ops.add_ops.tensor_add and makes
    add_ops::tensor_add visible to opcore.jax."""
    global _loaded
    if _loaded:
        return
    from opcore import custom_op

    build_dir = build_dir or os.environ.get("OPCORE_SEED003_BUILD",
                                            os.path.join(REPO, "build", "examples", "seed003"))
    os.makedirs(build_dir, exist_ok=True)
    custom_op.load(
        name="add",
        compute_srcs=[os.path.join(HERE, "add.c")],
        shape_srcs=[os.path.join(HERE, "shape.c")],
        build_directory=build_dir,
        multicore=True,
        verbose=verbose,
    )
    _loaded = True


def inputs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The seed's inputs: two 256x1024 float32 normal tensors."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(SHAPE, dtype=np.float32)
    b = rng.standard_normal(SHAPE, dtype=np.float32)
    return a, b


def reference(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """numpy: out = a*b*(a+b); d/da sum(out) = 2ab + b^2; d/db = 2ab + a^2."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return {
        "out": a64 * b64 * (a64 + b64),
        "grad_a": 2 * a64 * b64 + b64 * b64,
        "grad_b": 2 * a64 * b64 + a64 * a64,
    }


# ---------------------------------------------------------------------------
# PyTorch

def torch_results(a: np.ndarray, b: np.ndarray, show_graph: bool = False) -> dict[str, np.ndarray]:
    import torch

    load()
    tensor_add = torch.ops.add_ops.tensor_add

    ta, tb = torch.from_numpy(a), torch.from_numpy(b)

    # eager: replace `a + b` with the opcore kernel
    def f(a, b):
        c = tensor_add(a, b)  # calling the opcore kernel instead of the built-in op
        return a * b * c

    out_eager = f(ta, tb)

    # torch.compile (fullgraph): the op is one node of the captured graph
    def show(gm, example_inputs):
        if show_graph:
            print("---- torch.compile graph (FX) ----")
            print(gm.code.strip())
        from torch._inductor.compile_fx import compile_fx

        return compile_fx(gm, example_inputs)

    out_compiled = torch.compile(f, fullgraph=True, backend=show)(ta, tb)

    # training: the seed's NkiAddFunc, as an autograd.Function
    class AddFunc(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return tensor_add(a, b)

        @staticmethod
        def backward(ctx, dy):
            return dy, dy  # gradients for a and b

    ga = ta.clone().requires_grad_()
    gb = tb.clone().requires_grad_()
    out = ga * gb * AddFunc.apply(ga, gb)
    loss = out.sum()  # a (dummy) loss function
    loss.backward()

    return {
        "out": out_eager.numpy(),
        "out_compiled": out_compiled.detach().numpy(),
        "grad_a": ga.grad.numpy(),
        "grad_b": gb.grad.numpy(),
    }


# ---------------------------------------------------------------------------
# JAX

def jax_results(a: np.ndarray, b: np.ndarray, show_graph: bool = False,
                show_compiled: bool = False) -> dict[str, np.ndarray]:
    import jax
    import opcore.jax

    load()
    tensor_add = opcore.jax.op(QUALNAME)

    def jax_customop_tutorial(a, b):
        c = tensor_add(a, b)  # calling the opcore kernel instead of the built-in jax op
        return a * b * c

    ja, jb = jax.numpy.asarray(a), jax.numpy.asarray(b)
    out = jax.jit(jax_customop_tutorial)(ja, jb)

    if show_graph:
        # The seed's debug dump: the HLO with the custom call.
        print("---- JAX HLO (lowered) ----")
        print(opcore.jax.hlo(jax_customop_tutorial, ja, jb))
    if show_compiled:
        # After XLA's optimisations (the seed's runtime_executable().hlo_modules()[0]).
        print("---- JAX HLO (compiled) ----")
        print(opcore.jax.hlo(jax_customop_tutorial, ja, jb, compiled=True))

    # training: the seed's custom_vjp, spelled out ...
    @jax.custom_vjp
    def add_func(a, b):
        return tensor_add(a, b)

    def f_forward(a, b):
        return add_func(a, b), None  # no residuals needed

    def f_backward(res, grad):
        return grad, grad  # gradients for a and b

    add_func.defvjp(f_forward, f_backward)

    # ... or in one line with opcore.jax.with_vjp
    add_vjp = opcore.jax.with_vjp(QUALNAME, opcore.jax.passthrough, opcore.jax.passthrough)

    @jax.jit
    def jax_customop_tutorial_and_grad(a, b):
        out = add_func(a, b) * a * b
        # the same dummy loss function (output sum) as the PyTorch example
        grad = jax.grad(lambda x, y: (add_func(x, y) * x * y).sum(), argnums=(0, 1))(a, b)
        grad1 = jax.grad(lambda x, y: (add_vjp(x, y) * x * y).sum(), argnums=(0, 1))(a, b)
        return out, *grad, *grad1

    c, grad_a, grad_b, grad_a1, grad_b1 = jax_customop_tutorial_and_grad(ja, jb)
    return {
        "out": np.asarray(out),
        "out_train": np.asarray(c),
        "grad_a": np.asarray(grad_a),
        "grad_b": np.asarray(grad_b),
        "grad_a_with_vjp": np.asarray(grad_a1),
        "grad_b_with_vjp": np.asarray(grad_b1),
    }


# ---------------------------------------------------------------------------

def max_rel_err(got: np.ndarray, want: np.ndarray) -> float:
    got = np.asarray(got, dtype=np.float64)
    return float(np.max(np.abs(got - want) / (np.abs(want) + 1.0)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=None, help="where to build libadd.so")
    ap.add_argument("--no-graphs", action="store_true", help="do not print the HLO / FX graphs")
    ap.add_argument("--compiled", action="store_true", help="also print the HLO after XLA's passes")
    ap.add_argument("--verbose", action="store_true", help="show the build commands")
    args = ap.parse_args(argv)

    load(args.build_dir, verbose=args.verbose)
    a, b = inputs()
    ref = reference(a, b)
    show = not args.no_graphs

    results = {}
    results.update({f"torch {k}": v for k, v in torch_results(a, b, show_graph=show).items()})
    results.update({f"jax {k}": v for k, v in jax_results(a, b, show_graph=show,
                                                                   show_compiled=args.compiled).items()})

    print(f"---- results on {SHAPE[0]}x{SHAPE[1]} float32 (max |got-want|/(|want|+1) vs numpy) ----")
    ok = True
    for name, got in results.items():
        key = name.split(" ", 1)[1]
        want = ref["out" if key.startswith("out") else key.replace("_with_vjp", "")]
        err = max_rel_err(got, want)
        good = err < 1e-5
        ok &= good
        print(f"  {name:24s} shape={tuple(got.shape)} err={err:.2e} {'ok' if good else 'MISMATCH'}"
              f"   [0,:4]={np.array2string(np.asarray(got)[0, :4], precision=4)}")
    print("all results match numpy" if ok else "SOME RESULTS DIFFER FROM NUMPY")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
