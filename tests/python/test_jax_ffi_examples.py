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


# ---- rms_norm (upstream: tests/rms_norm_test.py) -------------------------------

from jax_ffi_example import rms_norm  # noqa: E402

# upstream parametrizes over jtu.dtypes.floating, which is [float32] without
# jax_enable_x64; the opcore kernels take float16 and bfloat16 too, checked
# forward (a finite-difference gradient check is meaningless in 16 bits)
FLOATS = [jnp.bfloat16, jnp.float16, jnp.float32]
TOL = {jnp.bfloat16: 1e-2, jnp.float16: 1e-3, jnp.float32: 1e-6}  # jtu's default tolerances per dtype


def rms_norm_ref(x, eps=1e-5):
    eps = jnp.float32(eps).astype(x.dtype)
    scale = jnp.sqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + eps)
    return x / scale


def _close(got, want, dtype):
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                               rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
def test_rms_norm_basic(dtype):
    x = jnp.linspace(-0.5, 0.5, 15, dtype=dtype)
    _close(rms_norm.rms_norm(x), rms_norm_ref(x), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rms_norm_batching(dtype):
    x = jnp.linspace(-0.5, 0.5, 15, dtype=dtype).reshape((3, 5))
    _close(jax.vmap(rms_norm.rms_norm)(x), jax.vmap(rms_norm_ref)(x), dtype)


def test_rms_norm_grads():
    from jax.test_util import check_grads

    x = jnp.linspace(-0.5, 0.5, 15, dtype=jnp.float32).reshape((3, 5))
    check_grads(rms_norm.rms_norm, (x,), order=1, modes=("rev",))


def test_rms_norm_float64_and_its_grads():
    """float64 too (upstream's C++ handler has float32 only). The reference
    rounds eps to float32 first; here eps is the double 1e-5."""
    from jax.test_util import check_grads

    with jax.enable_x64(True):
        x = jnp.linspace(-0.5, 0.5, 15, dtype=jnp.float64).reshape((3, 5))
        want = x / jnp.sqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + 1e-5)
        np.testing.assert_allclose(np.asarray(rms_norm.rms_norm(x)), np.asarray(want), rtol=1e-12)
        check_grads(rms_norm.rms_norm, (x,), order=1, modes=("rev",))


def test_rms_norm_refuses_integers_naming_the_op():
    with pytest.raises(Exception, match="rms_norm: takes a float dtype, got int32"):
        rms_norm.rms_norm(jnp.arange(6, dtype=jnp.int32).reshape(2, 3)).block_until_ready()


# ---- cpu_examples (upstream: tests/cpu_examples_test.py) -----------------------

# (and attrs: upstream's tests/attrs_test.py tests the same array_attr)

from jax_ffi_example import attrs, cpu_examples  # noqa: E402

ARRAY_ATTR = pytest.mark.parametrize("module", [cpu_examples, attrs], ids=["cpu_examples", "attrs"])


@ARRAY_ATTR
def test_array_attr(module):
    assert module.array_attr(5) == jnp.arange(5).sum()
    assert module.array_attr(3) == jnp.arange(3).sum()


@ARRAY_ATTR
def test_array_attr_jit_cache(module):
    jit_array_attr = jax.jit(module.array_attr, static_argnums=(0,))
    jit_array_attr(5)
    assert jit_array_attr._cache_size() == 1  # compiled once the first time
    jit_array_attr(5)
    assert jit_array_attr._cache_size() == 1  # a cache hit


@ARRAY_ATTR
def test_array_attr_no_jit(module):
    with jax.disable_jit():
        assert module.array_attr(5) == 10


@ARRAY_ATTR
def test_dictionary_attr(module):
    secret, count = module.dictionary_attr(secret=5)
    assert secret == 5
    assert count == 1

    secret, count = module.dictionary_attr(secret=3, a_string="hello")
    assert secret == 3
    assert count == 2

    # upstream's texts are XLA's ("Unexpected attribute", "Wrong attribute
    # type"); opcore's lookups name the op, argument, key and kinds
    with pytest.raises(Exception, match=r"argument 'attrs' \(Dict\): missing key 'secret'"):
        module.dictionary_attr()

    with pytest.raises(Exception, match=r"key 'secret': expected int, got str"):
        module.dictionary_attr(secret="invalid")


def test_dictionary_attr_jit():
    f = jax.jit(lambda: cpu_examples.dictionary_attr(secret=11, scale=0.5, sizes=[1, 2], name="n"))
    secret, count = f()
    assert secret == 11 and count == 4
    assert secret.dtype == jnp.int32 and count.dtype == jnp.int32


def test_cpu_examples_counter():
    assert cpu_examples.counter(10) == 0
    assert cpu_examples.counter(10) == 1
    assert cpu_examples.counter(11) == 0
    assert jax.jit(lambda: cpu_examples.counter(10))() == 2


def test_aliasing_updates_in_place():
    import opcore.jax

    x = jnp.arange(6.0)
    f = jax.jit(cpu_examples.aliasing, donate_argnums=0)
    assert "output_to_operand_aliasing={{}: (0, {})}" in f.lower(x).as_text(dialect="hlo")
    before = opcore.jax.alias_copies()
    np.testing.assert_array_equal(np.asarray(f(jnp.arange(6.0))), np.arange(6.0))
    assert opcore.jax.alias_copies() == before  # XLA passed one buffer as input and output
