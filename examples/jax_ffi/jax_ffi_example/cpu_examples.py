"""Attributes, state and aliasing (upstream's cpu_examples.py) on the
opcore kernels of cpu_examples/cpu_examples.c and counter/counter.c.
"""
import numpy as np

import opcore.jax

from jax_ffi_example import _build
from jax_ffi_example.counter import counter  # noqa: F401  (upstream's module has it too)

_build.load("cpu_examples", ["cpu_examples.c"])
_array_attr = opcore.jax.op("jax_ffi_cpu_examples::array_attr")
_aliasing = opcore.jax.op("jax_ffi_cpu_examples::aliasing")
_dictionary_attr = opcore.jax.op("jax_ffi_cpu_examples::dictionary_attr")


def array_attr(num: int):
    return _array_attr(array=np.arange(num, dtype=np.int32))


def dictionary_attr(**kwargs):
    # upstream passes the keywords as the call's attributes (XLA FFI's
    # .Attrs()); the opcore op takes them as one Dict argument
    return _dictionary_attr(attrs=kwargs)


def aliasing(x):
    return _aliasing(x)
