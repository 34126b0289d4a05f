"""An FFI call keeping "state" between calls (upstream's counter.py).

``counter(index)`` counts how many times it ran with this index. The state
is static in the kernel (counter/counter.c); the op is marked
``has_side_effect=True`` so that XLA keeps every call, even one whose
result is unused, and never merges two calls into one.
"""
import opcore.jax

from jax_ffi_example import _build

_build.load("counter", ["counter.c"])
_counter = opcore.jax.op("jax_ffi_counter::counter", has_side_effect=True)


def counter(index):
    return _counter(index=int(index))
