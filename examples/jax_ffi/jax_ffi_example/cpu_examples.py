"""Attributes, state and aliasing (upstream's cpu_examples.py) on the
opcore kernels of cpu_examples/cpu_examples.c and counter/counter.c.

dictionary_attr is not here: opcore has no dictionary of named attributes
(an op's arguments are its schema's); see ../README.md.
"""
import numpy as np

import opcore.jax

from jax_ffi_example import _build
from jax_ffi_example.counter import counter  # noqa: F401  (upstream's module has it too)

_build.load("cpu_examples", ["cpu_examples.c"])
_array_attr = opcore.jax.op("jax_ffi_cpu_examples::array_attr")
_aliasing = opcore.jax.op("jax_ffi_cpu_examples::aliasing")


def array_attr(num: int):
    return _array_attr(array=np.arange(num, dtype=np.int32))


def aliasing(x):
    return _aliasing(x)
