"""Size expressions from opcore._C.Op.trace, rebuilt in a framework's own
symbolic arithmetic (opcore.torch: SymInts; opcore.jax: JAX dimension
expressions). One interpreter for both: the framework supplies how to read
an input size and its symbolic min and max.

An expression is an int, ``("input", arg, item, dim)`` (dim -1: the value
of an int argument) or ``(op, lhs, rhs)`` with op one of add, sub, mul,
div, ceil_div, mod, min, max (oc_dim_* in include/opcore/shape.h).
"""

_BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a // b,
    "ceil_div": lambda a, b: -((-a) // b),
    "mod": lambda a, b: a % b,
}


def build(expr, input_dim, sym_min, sym_max):
    """`expr` as a size: input_dim(arg, item, dim) reads an input size,
    sym_min / sym_max are the framework's min and max of two sizes."""
    if isinstance(expr, int):
        return expr
    if expr[0] == "input":
        _, arg, item, dim = expr
        return input_dim(arg, item, dim)
    op, lhs, rhs = expr
    a, b = build(lhs, input_dim, sym_min, sym_max), build(rhs, input_dim, sym_min, sym_max)
    if op == "min":
        return sym_min(a, b)
    if op == "max":
        return sym_max(a, b)
    fn = _BINARY.get(op)
    if fn is None:
        raise ValueError(f"opcore: unknown size operation {op!r} from op.trace")
    return fn(a, b)
