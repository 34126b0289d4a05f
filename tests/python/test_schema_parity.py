"""Every schema opcore accepts is one torch accepts and registers as written
(#11): opcore.check_schema against torch's own parser and torch.library,
on hand-picked cases and on schemas generated from the grammar."""
import itertools
import random

import pytest

torch = pytest.importorskip("torch")

from opcore import OpArgumentError, _C  # noqa: E402

CASES = [
    "f(Tensor x, float a=1e-5) -> Tensor", "f(Tensor x, float a=.5) -> Tensor", "f(Tensor x, float a=1.) -> Tensor",
    "f(Tensor x, float a=+5) -> Tensor", "f(Tensor x, int a=+5) -> Tensor", "f(Tensor x, float a=inf) -> Tensor",
    "f(Tensor x, float a=nan) -> Tensor", "f(Tensor x, float a=-inf) -> Tensor", "f(Tensor x, float a=1e400) -> Tensor",
    "f(Tensor x, float a=5) -> Tensor", "f(Tensor x, int a=5.0) -> Tensor", "f(Tensor x, int a=99999999999999999999) -> Tensor",
    "f(Tensor x, int a=0x10) -> Tensor", "f(Tensor x, Scalar a=1.5) -> Tensor", "f(Tensor x, Scalar a=True) -> Tensor",
    "f(Tensor x, bool a=true) -> Tensor", "f(Tensor x, str a='mean') -> Tensor", 'f(Tensor x, str a="mean") -> Tensor',
    "f(Tensor x, str? a=None) -> Tensor", "f(Tensor x, ScalarType a=float) -> Tensor", "f(Tensor x, ScalarType? a=None) -> Tensor",
    "f(Tensor x, int[2] k=1) -> Tensor", "f(Tensor x, int[2] k=[1,1]) -> Tensor", "f(Tensor x, int[2] k=[1]) -> Tensor",
    "f(Tensor x, int[] k=[]) -> Tensor", "f(Tensor x, float[] k=[1.0, 2]) -> Tensor", "f(Tensor x, int[]? k=None) -> Tensor",
    "f(Tensor(a!) x) -> Tensor(a!)", "f(Tensor(a) x) -> Tensor(a)", "f(Tensor(a!)[] x) -> ()", "f(Tensor x) -> ()",
    "f(Tensor x) -> (Tensor, Tensor)", "f(Tensor x) -> (Tensor a, Tensor b)", "f(Tensor x) -> (Tensor)",
    "f.ov(Tensor x) -> Tensor", "f(Tensor x, *, int k=1) -> Tensor", "f(Tensor x, int k=1, Tensor y) -> Tensor",
    "f(Tensor? x=None) -> Tensor", "f(Tensor x, SymInt[] s) -> Tensor", "f(Tensor x, bool[3] m) -> Tensor",
    "f(Tensor x, Tensor?[] i) -> Tensor", "f(Tensor x, int? k=None, float? e=None, bool? b=None) -> Tensor",
    "f(Tensor x, float a=-0.5e-3) -> Tensor", "f(Tensor x, float a=1E5) -> Tensor", "f(Tensor x, int a=-5) -> Tensor",
    "f(Tensor x, Scalar a=-1) -> Tensor", "f(Tensor(a!) x, Tensor(a!) y) -> ()", "f(Tensor(a!) x) -> Tensor(b!)",
    "f(Tensor x) -> Tensor[]", "f(Tensor x, int[2] k=[1,2,3]) -> Tensor", "f(Tensor x, float a=1.5e) -> Tensor",
    "f(Tensor x, int a=1_000) -> Tensor", "f(Tensor x,int a=1)->Tensor", "f (Tensor x) -> Tensor", "ns::f(Tensor x) -> Tensor",
    "f(Tensor x, float a=1e-5.5) -> Tensor", "f(Tensor x, Dimname d) -> Tensor", "f(Tensor x, Layout? l=None) -> Tensor",
    "f(Tensor x, str a='a\\'b') -> Tensor", "f(Tensor x, str a='') -> Tensor", "f(Tensor x, Tensor y=None) -> Tensor",
    "f(Tensor(a!)? x) -> ()", "f(Tensor(a!) x) -> (Tensor(a!), Tensor)", "f(Tensor x) -> Tensor(a!)",
    "f(Tensor x, int[] k=1) -> Tensor", "f(Tensor x, float[2] k=1.0) -> Tensor", "f(Tensor x, int[2]? k=None) -> Tensor",
    "relu_forward", "f(Tensor) -> Tensor", "f() -> Tensor", "f(Tensor x, *, Tensor y) -> Tensor",
]

_counter = itertools.count()


def torch_registers(schema):
    """torch parses it, and torch.library defines it with the same signature."""
    try:
        parsed = torch._C.parse_schema(schema)
    except Exception:
        return False
    name = f"oc_parity_{next(_counter)}"
    lib = torch.library.Library("oc_schema_parity", "FRAGMENT")
    lib.define(name + schema[schema.index("("):])
    registered = getattr(torch.ops.oc_schema_parity, name).default._schema
    assert [str(a.type) for a in registered.arguments] == [str(a.type) for a in parsed.arguments], schema
    assert [a.default_value for a in registered.arguments] == [a.default_value for a in parsed.arguments], schema
    assert len(registered.returns) == len(parsed.returns), schema
    return True


def opcore_accepts(schema):
    try:
        _C.check_schema(schema)
        return True
    except OpArgumentError as e:
        msg = str(e)
        assert msg.startswith(f'schema "{schema}"') and "column" in msg, msg
        return False


@pytest.mark.parametrize("schema", CASES)
def test_accepted_by_opcore_means_registered_by_torch(schema):
    if opcore_accepts(schema):
        assert torch_registers(schema), schema


def test_accepted_and_refused_as_designed():
    accepted = [s for s in CASES if opcore_accepts(s)]
    assert "f(Tensor(a!)[] x) -> ()" in accepted and "f(Tensor x) -> (Tensor a, Tensor b)" in accepted
    for refused in ("f.ov(Tensor x) -> Tensor", "f(Tensor x, float a=inf) -> Tensor", "f(Tensor x, int a=5.0) -> Tensor",
                    "f(Tensor x, int[2] k=[1,2,3]) -> Tensor", "f(Tensor x, float a=1e400) -> Tensor"):
        assert refused not in accepted


PIECES = {
    "type": ["Tensor", "Tensor?", "Tensor[]", "Tensor(a!)", "Tensor(b!)[]", "int", "SymInt", "int[]", "int[2]", "int[3]?",
             "float", "float[]", "float[2]", "bool", "Scalar", "str", "ScalarType", "int?", "float?", "bool?",
             "Scalar?", "str?", "ScalarType?", "SymInt[]", "Tensor(c)", "bool[2]", "Layout", "Tensor?[]"],
    "default": ["", "=None", "=1", "=-2", "=0.5", "=1e-05", "=True", "=False", "=[1, 2]", "=[]", "='mean'", '="x"',
                "=inf", "=+3", "=[1.0]", "=7.", "=0x3", "=[1,2,3]", "=1e400"],
    "ret": ["Tensor", "()", "(Tensor, Tensor)", "(Tensor out, Tensor idx)", "Tensor(a!)", "Tensor[]", "float",
            "(Tensor(a!), Tensor)", "Tensor(z!)"],
}


def generated(n, seed=0):
    rnd = random.Random(seed)
    for _ in range(n):
        args, kw = [], False
        for k in range(rnd.randint(0, 4)):
            if not kw and rnd.random() < 0.15:
                args.append("*")
                kw = True
            args.append(f"{rnd.choice(PIECES['type'])} a{k}{rnd.choice(PIECES['default'])}")
        yield f"op_{rnd.randint(0, 9)}({', '.join(args)}) -> {rnd.choice(PIECES['ret'])}"


def test_generated_schemas():
    accepted = 0
    for schema in generated(600):
        if opcore_accepts(schema):
            accepted += 1
            assert torch_registers(schema), schema
    assert accepted > 30  # the generator exercises both sides
