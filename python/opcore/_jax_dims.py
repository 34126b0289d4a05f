"""Symbolic sizes for opcore.jax: an op's result shapes under jax.export.

With ``jax.export.symbolic_shape("b, 4")`` an input size is a JAX dimension
expression, not a number, but opcore's shape functions are plain C on
numbers. So the shape function runs a few times on probe sizes (each symbol
takes different sizes per run, see _LARGE and _SMALL; a size like ``2*b``
is evaluated from them), and ``opcore._C.Op.trace`` explains every result size as a
constant, an input size, or ``oc_dim_*`` arithmetic on those. That
explanation is rebuilt here with JAX's own dimension arithmetic, so the
result sizes stay symbolic. A size the shape function computed with plain
C arithmetic cannot be explained: opcore's error says how to write it.
"""
from __future__ import annotations

import numpy as np
from jax._src import core  # min_dim / max_dim: JAX's symbolic min and max

from opcore import _dims, _probes

# Probe sizes (opcore/_probes.py): up to 8 symbols, 3 large runs and a small one.
_PRIMES = _probes.PRIMES[:8]
_LARGE = _probes.large_runs(3, len(_PRIMES))
_SMALL = _probes.small_run(len(_PRIMES))


class ListMeta(tuple):
    """The metadata of a Tensor[] argument: ((shape, dtype), ...), told
    apart from one tensor's (shape, dtype)."""


def items(m) -> list:
    """[(shape, dtype), ...] of one tensor argument's metadata."""
    if m is None:
        return []
    return list(m) if isinstance(m, ListMeta) else [m]


def is_static(shape) -> bool:
    return all(isinstance(d, (int, np.integer)) for d in shape)


def _symbols(tmeta) -> list[str]:
    names: set[str] = set()
    for m in tmeta:
        for shape, _ in items(m):
            for d in shape:
                if not isinstance(d, (int, np.integer)):
                    names |= set(d.get_vars() if hasattr(d, "get_vars") else d._get_vars())
    return sorted(names)


def _evaluate(d, env: dict) -> int:
    if isinstance(d, (int, np.integer)):
        return int(d)
    return int(d._evaluate(env))


def _to_jax(expr, input_dim):
    """An op.trace expression as a JAX dimension (int or symbolic)."""
    return _dims.build(expr, input_dim, core.min_dim, core.max_dim)


def trace(meta, shape_kwargs, tmeta) -> list[tuple[tuple, str]]:
    """[(shape, dtype name), ...] per result of `meta`'s op, shapes with
    JAX dimension expressions. shape_kwargs(dims) gives op.trace's keyword
    arguments with every tensor shape mapped through `dims`; tmeta holds the
    tensor metadata in schema order (None for non-tensors)."""
    names = _symbols(tmeta)
    if len(names) > len(_PRIMES):
        raise ValueError(f"opcore.jax: op '{meta.qualname}': at most {len(_PRIMES)} symbolic "
                         f"dimensions per call, got {len(names)} ({', '.join(names)})")

    def runs_for(probes):
        runs = []
        for probe in probes:
            env = dict(zip(names, probe))
            runs.append(((), shape_kwargs(lambda shape, env=env: tuple(_evaluate(d, env) for d in shape))))
        return runs

    # the small run is left out only when the shape function refuses it
    # (opcore/_probes.py): a run it accepts must agree with the trace
    small = runs_for((_SMALL,))
    probes = _LARGE + (_SMALL,) if _probes.infers(meta.op, small[0]) else _LARGE
    try:
        traced = meta.op.trace(runs_for(probes))
    except Exception as e:
        sizes = ", ".join(f"{n}={'/'.join(str(p[i]) for p in probes)}" for i, n in enumerate(names))
        e.args = (f"{e.args[0] if e.args else e} [opcore.jax: symbolic sizes: the shape function "
                  f"ran with probe sizes {sizes}]",) + e.args[1:]
        raise

    def input_dim(arg, item, dim):
        return items(tmeta[arg])[item][0][dim]

    return [(tuple(_to_jax(e, input_dim) for e in dims), dtype) for dtype, dims in traced]
