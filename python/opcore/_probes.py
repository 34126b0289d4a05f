"""Probe sizes for tracing shape functions under dynamic shapes (opcore.torch
and opcore.jax).

A C shape function only sees numbers, so it is run a few times with probe
values for the dynamic sizes, and opcore._C.Op.trace explains each result
size in terms of the input sizes. Symbol i takes PRIMES[i] * (r + 1) in
large run r: ordinary, large sizes, different per symbol, whose differences
between runs are primes, so no size mod a small number is the same in
every run (n % 4 would be a constant if every run had n = 3 mod 4). One
more run gives the symbols small sizes (2, 3, ...), so that min(n, k) and
max(n, k) with a small k differ between runs too, and so does a size
that a C branch (n > 4 ? 4 : 3) or a plain C min makes constant on the
large runs: every run the shape function accepts must agree with the
explanation, so such a size is an error, never a constant that is wrong at
other sizes. Shape functions that refuse small sizes are traced on the
large runs alone.
"""
from opcore import _C

PRIMES = (10007, 10009, 10037, 10039, 10061, 10067, 10069, 10079, 10091, 10093, 10099, 10103)


def large_runs(runs, symbols=len(PRIMES)):
    """`runs` tuples of probe sizes for the first `symbols` symbols."""
    return tuple(tuple(p * (r + 1) for p in PRIMES[:symbols]) for r in range(runs))


def small_run(symbols=len(PRIMES)):
    """The small probe sizes of the first `symbols` symbols."""
    return tuple(2 + i for i in range(symbols))


def infers(op, run):
    """True if op's shape function accepts the sizes of `run` ((args,
    kwargs), as op.trace takes): a run it refuses is left out of the trace,
    a run it accepts must agree with the trace's explanation (else an
    error, never a size that is wrong at other values)."""
    try:
        op.infer(*run[0], **run[1])
        return True
    except _C.OpError:
        return False
