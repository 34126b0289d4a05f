"""The attribute kinds XLA FFI handlers use, mapped exactly onto opcore's
(issue 21.2; docs/jax.md, "Attribute kinds"): a custom call written by hand
with jax.ffi.ffi_call, its attributes typed as a C++ handler's would be
(float32 scalars, bool scalars, int8 ... uint64 arrays, float32 arrays),
gives the kernel the very values the int64 / float64 attributes
opcore.jax.op sends give it; what would not fit is refused, not rounded."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy
ojax = pytest.importorskip("opcore.jax")

import jax_libs  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def libs():
    jax_libs.load()
    ojax.register()


def raw(op, x, **attrs):
    """The op through a hand-written custom call (result: x's shape/dtype
    unless `like` is given)."""
    like = attrs.pop("like", x)
    return jax.jit(lambda x: jax.ffi.ffi_call(ojax.TARGET, jax.ShapeDtypeStruct(like.shape, like.dtype))(
        x, op=op, **attrs))(x)


def test_float32_scalar_and_float32_array_reach_the_kernel_exactly():
    x = jax_libs.rand((3, 4))
    eps = np.float32(0.1)  # not a short binary fraction: a lossy path would show
    scale = ojax.op("jax_kinds::scale")
    np.testing.assert_array_equal(np.asarray(raw("jax_kinds::scale", x, s=eps)), np.asarray(scale(x, float(eps))))
    coeffs = np.asarray([0.1, -2.7, 3.3], np.float32)
    poly = ojax.op("jax_kinds::poly")
    want = poly(x, [float(c) for c in coeffs], "power")
    np.testing.assert_array_equal(np.asarray(raw("jax_kinds::poly", x, coeffs=coeffs, mode="power")),
                                  np.asarray(want))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.uint64])
def test_integer_arrays_are_int_lists(dtype):
    x = jax_libs.rand((1, 1, 4, 4))
    pool = ojax.op("nn_ops::avg_pool2d")
    k = [2, 2]
    want = pool(x, k, k)
    got = raw("nn_ops::avg_pool2d", x, kernel_size=np.asarray(k, dtype), stride=np.asarray(k, dtype),
              padding=np.zeros(2, dtype), like=want)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_int32_and_bool_scalars():
    x = jax_libs.rand((2, 3))
    poly = ojax.op("jax_kinds::poly")
    want = poly(x, [1.0, 2.0], negate=True, clip=1)
    got = raw("jax_kinds::poly", x, coeffs=np.asarray([1.0, 2.0]), negate=np.bool_(True), clip=np.int32(1))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_values_that_do_not_fit_are_refused():
    x = jax_libs.rand((1, 1, 4, 4))
    with pytest.raises(Exception, match="integer or bool array"):
        raw("nn_ops::avg_pool2d", x, kernel_size=np.asarray([2**63, 1], np.uint64), like=x[:, :, :4, :1])
    with pytest.raises(Exception, match="integer or bool array"):
        raw("nn_ops::avg_pool2d", x, kernel_size=np.asarray([2.0, 2.0], np.float32), like=x[:, :, :2, :2])
    with pytest.raises(Exception, match="float32 or float64 array"):
        raw("jax_kinds::poly", jax_libs.rand((2, 2)), coeffs=np.asarray([1, 2], np.int32))


def test_a_dictionary_is_refused_not_read_as_none():
    """{} stands for None; a dictionary with entries is no opcore kind and
    must not silently become None (clip is an int?)."""
    x = jax_libs.rand((2, 3))
    with pytest.raises(Exception, match="an empty dictionary"):
        raw("jax_kinds::poly", x, coeffs=np.asarray([1.0]), clip={"value": np.int64(1)})
    poly = ojax.op("jax_kinds::poly")
    np.testing.assert_array_equal(np.asarray(raw("jax_kinds::poly", x, coeffs=np.asarray([1.0, 2.0]), clip={})),
                                  np.asarray(poly(x, [1.0, 2.0])))
