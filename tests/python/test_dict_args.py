"""Dict arguments (opcore/dict.h): a dictionary of named attributes passed
from Python (a direct call, NumPy and torch tensors) and from JAX (eager and
under jit), read in C with typed lookups; errors name the op, the argument,
the key, the kind expected and the kind given. torch.library cannot define
an op with a Dict: registering one is refused with the reason."""
import numpy as np
import pytest

from conftest import load_texts, needs_cli, run_cli

COMPUTE = r"""
#include <string.h>
#include <opcore/kernel.h>
/* [i, f, b, strlen(s), sum(ints), sum(floats), size, x[0]] as float64 */
oc_tensor *pick(const oc_tensor *x, const oc_dict *attrs)
{
    int64_t i;
    double f;
    bool b;
    const char *s;
    oc_int_list ints;
    oc_float_list floats;
    OC_CHECK_OK(oc_dict_get_int(attrs, "i", &i));
    OC_CHECK_OK(oc_dict_get_float(attrs, "f", &f));
    OC_CHECK_OK(oc_dict_get_bool(attrs, "b", &b));
    OC_CHECK_OK(oc_dict_get_str(attrs, "s", &s));
    OC_CHECK_OK(oc_dict_get_ints(attrs, "ints", &ints));
    OC_CHECK_OK(oc_dict_get_floats(attrs, "floats", &floats));
    double *out = oc_dst_tensor()->data;
    out[0] = (double)i;
    out[1] = f;
    out[2] = b;
    out[3] = (double)strlen(s);
    out[4] = out[5] = 0;
    for (int64_t k = 0; k < ints.count; k++) out[4] += (double)ints.values[k];
    for (int64_t k = 0; k < floats.count; k++) out[5] += floats.values[k];
    out[6] = (double)oc_dict_size(attrs);
    out[7] = ((const float *)x->data)[0];
    return oc_dst_tensor();
}
"""

SHAPE = r"""
#include <opcore/library.h>
static oc_tensor *pick_shape(const oc_tensor *x, const oc_dict *attrs)
{
    (void)x;
    (void)attrs;
    return oc_empty(OC_FLOAT64, 1, (int64_t[]){8});
}
OC_LIBRARY(dict_py, m) { oc_def(m, "pick(Tensor x, Dict attrs) -> Tensor", pick_shape, "pick"); }
"""

GOOD = {"i": -3, "f": 0.5, "b": True, "s": "hello", "ints": [1, 2, 3], "floats": [0.25, 0.5], "extra": 7}
WANT = [-3, 0.5, 1, 5, 6, 0.75, 7, 2.0]
LIB_PATH = []  # the built library's file, for the command line


@pytest.fixture(scope="module")
def pick(opcore_build_dir):
    d = opcore_build_dir / "dict_py"
    d.mkdir(exist_ok=True)
    lib = load_texts(d, "dict_py", COMPUTE, SHAPE)
    LIB_PATH.append(lib.path)
    return lib.ops["pick"]


def x():
    return np.array([2.0], dtype=np.float32)


def test_direct_call_reads_every_kind(pick):
    np.testing.assert_array_equal(np.asarray(pick(x(), GOOD)), WANT)
    np.testing.assert_array_equal(np.asarray(pick(x(), attrs=GOOD)), WANT)


def test_direct_call_numpy_values_and_conversions(pick):
    attrs = dict(GOOD, i=np.int32(-3), f=1, ints=np.array([1, 2, 3], dtype=np.int16),
                 floats=(np.float32(0.25), 0.5))
    got = np.asarray(pick(x(), attrs))
    assert got[1] == 1.0  # an int where a float is read: converted
    np.testing.assert_array_equal(got[[0, 4, 5]], [-3, 6, 0.75])
    got = np.asarray(pick(x(), dict(GOOD, ints=[], floats=[])))  # an empty list is either
    np.testing.assert_array_equal(got[[4, 5]], [0, 0])


@pytest.mark.parametrize("change, needle", [
    ({"i": None}, None),
    ({"i": 1.5}, "key 'i': expected int, got float"),
    ({"b": 1}, "key 'b': expected bool, got int"),
    ({"s": 3}, "key 's': expected str, got int"),
    ({"ints": [1.5]}, "key 'ints': expected int[], got float[]"),
])
def test_direct_call_wrong_kind_names_op_argument_key_kinds(pick, change, needle):
    import opcore

    attrs = dict(GOOD, **change)
    if change == {"i": None}:
        del attrs["i"]
        needle = "missing key 'i' (expected int; the dictionary has keys 'f', 'b', 's'"
    with pytest.raises(opcore.OpError) as e:
        pick(x(), attrs)
    msg = str(e.value)
    assert "op 'dict_py::pick'" in msg and "argument 'attrs' (Dict)" in msg and needle in msg, msg


@pytest.mark.parametrize("attrs, needle", [
    ({1: 2}, "keys must be str"),
    ({"a": None}, "key 'a': expected an int, float, bool, str or a list of numbers, got NoneType"),
    ({"a": {"b": 1}}, "got dict"),
    ({"a": [1, "x"]}, "a list holds ints or floats only"),
    ({"a": "x\0y"}, "NUL"),
    ({"a": 1 << 64}, "fit in 64 bits"),
    ([("a", 1)], "expected Dict, got list"),
])
def test_direct_call_refuses_values_a_dict_cannot_hold(pick, attrs, needle):
    import opcore

    with pytest.raises(opcore.OpArgumentError, match="dict_py::pick") as e:
        pick(x(), attrs)
    assert needle in str(e.value)


def test_torch_tensors_call_it_directly_and_torch_ops_refuse_it(pick):
    torch = pytest.importorskip("torch")
    import opcore.torch as ot

    got = pick(torch.tensor([2.0]), GOOD)
    np.testing.assert_array_equal(np.asarray(got), WANT)
    with pytest.raises(TypeError, match=r"dict_py::pick takes a Dict argument, which torch.library cannot define"):
        ot.register_op(pick)
    assert not hasattr(torch.ops.dict_py, "pick")


def test_jax_eager_and_jit(pick):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import opcore.jax

    op = opcore.jax.op("dict_py::pick")
    np.testing.assert_array_equal(np.asarray(op(jnp.float32([2.0]), GOOD)), WANT)
    f = jax.jit(lambda v: op(v, attrs=GOOD))
    sites = opcore.jax.call_sites()
    np.testing.assert_array_equal(np.asarray(f(jnp.float32([2.0]))), WANT)
    assert opcore.jax.call_sites() == sites + 1  # the dictionary is decoded once, for the call site
    np.testing.assert_array_equal(np.asarray(f(jnp.float32([4.0])))[7], 4.0)
    # int and float arrays, NumPy scalars; {'b': True} and {'b': 1} are different calls
    attrs = dict(GOOD, f=np.float32(0.5), ints=np.arange(4), floats=np.array([0.5, 0.25], np.float32))
    got = np.asarray(jax.jit(lambda v: op(v, attrs))(jnp.float32([2.0])))
    np.testing.assert_array_equal(got[[1, 4, 5]], [0.5, 6, 0.75])
    with pytest.raises(Exception, match=r"key 'b': expected bool, got int"):
        jax.jit(lambda v: op(v, dict(GOOD, b=1)))(jnp.float32([2.0])).block_until_ready()


def test_jax_errors(pick):
    pytest.importorskip("jax")
    import jax.numpy as jnp
    import opcore
    import opcore.jax

    op = opcore.jax.op("dict_py::pick")
    with pytest.raises(Exception, match=r"argument 'attrs' \(Dict\): missing key 'i'"):
        op(jnp.float32([2.0]), {k: v for k, v in GOOD.items() if k != "i"}).block_until_ready()
    with pytest.raises(opcore.OpArgumentError, match=r"argument 'attrs' \(Dict\): key 'a': expected an int, float"):
        op(jnp.float32([2.0]), dict(GOOD, a={"nested": 1}))
    with pytest.raises(opcore.OpArgumentError, match=r"expected a dict, got list"):
        op(jnp.float32([2.0]), [1])


@needs_cli
def test_cli_run_says_a_dict_cannot_be_given(pick):
    for given in ([], ["--arg", "attrs=1"]):
        p = run_cli("run", LIB_PATH[0], "pick", "--shape", "1", *given)
        assert p.returncode != 0
        assert "argument 'attrs' is a Dict, which the command line cannot give" in p.stderr, p.stderr


class _HashableDict(dict):
    """A dict jax.ffi_call accepts nested in an attribute (it hashes them)."""

    def __hash__(self):
        return hash(tuple(self.items()))


def test_hand_written_custom_call_dictionary_errors(pick):
    """A custom call written by hand (jax.ffi.ffi_call) reaches the handler
    with whatever attributes it has: a nested dictionary, an attribute that
    is not a dictionary, none at all."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import opcore.jax

    opcore.jax.op("dict_py::pick")  # registers the handler
    out = jax.ShapeDtypeStruct((8,), np.float64)

    def call(**attrs):
        f = jax.ffi.ffi_call(opcore.jax.TARGET, out)
        return jax.jit(lambda v: f(v, op="dict_py::pick", **attrs))(jnp.float32([2.0])).block_until_ready()

    with jax.enable_x64(True):
        with pytest.raises(Exception, match=r"argument 'attrs' \(Dict\): key 'inner': a nested dictionary"):
            call(attrs={"inner": _HashableDict(a=np.int64(1))})
        with pytest.raises(Exception, match=r"argument 'attrs' \(Dict\): expected a dictionary attribute"):
            call(attrs=np.int64(3))
        with pytest.raises(Exception, match=r"argument 'attrs' \(Dict\): expected a dictionary \(a Dict has no "
                                            r"default: pass \{\} for none\), not a missing attribute"):
            call()
