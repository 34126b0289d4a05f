"""JAX's FFI examples ported to opcore (examples/jax_ffi): the behaviours
upstream's tests (jax-ml/jax, examples/ffi/tests) check, on the opcore
ports. The differences from upstream's tests are listed in
examples/jax_ffi/README.md. Each case also runs the port where upstream's
C++ handler would be: under jax.jit, with results unused, and so on."""
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "jax_ffi"))

from jax_ffi_example import counter  # noqa: E402


# ---- counter (upstream: tests/counter_test.py) --------------------------------

def test_counter_counts_per_index():
    assert counter.counter(0) == 0
    assert counter.counter(0) == 1
    assert counter.counter(0) == 2
    assert counter.counter(1) == 0
    assert counter.counter(0) == 3


def test_counter_under_jit_persists_across_cache_hits_and_clears():
    @jax.jit
    def counter_fun(x):
        return x, counter.counter(2)

    assert counter_fun(0)[1] == 0
    assert counter_fun(0)[1] == 1
    assert counter_fun(1)[1] == 2  # another cache entry, the same state
    counter_fun.clear_cache()
    assert counter_fun(0)[1] == 3


def test_counter_calls_with_unused_results_are_kept():
    """has_side_effect=True: XLA keeps a call whose result nobody reads, and
    does not merge equal calls (issue 21.3)."""
    @jax.jit
    def bump_three_times(x):
        counter.counter(3)
        counter.counter(3)
        counter.counter(3)
        return x + 1

    assert 'custom_call_target="opcore"' in jax.jit(bump_three_times).lower(0).compile().as_text()
    bump_three_times(0).block_until_ready()
    bump_three_times(0).block_until_ready()
    assert counter.counter(3) == 6


def test_without_the_marker_xla_drops_an_unused_call():
    """The reason for the marker: the same op without it is removed when its
    result is unused (and the state does not move)."""
    import opcore.jax

    plain = opcore.jax.op("jax_ffi_counter::counter")

    @jax.jit
    def f(x):
        plain(index=4)
        return x + 1

    assert 'custom_call_target="opcore"' not in f.lower(0).compile().as_text()
    f(0).block_until_ready()
    assert counter.counter(4) == 0


def test_has_side_effect_must_be_a_bool():
    import opcore.jax

    with pytest.raises(TypeError, match="has_side_effect must be True or False"):
        opcore.jax.op("jax_ffi_counter::counter", has_side_effect="yes")
