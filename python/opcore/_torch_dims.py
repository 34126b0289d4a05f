"""What opcore.torch's fake kernel tells torch about the dynamic sizes a
shape function's checks need (torch.compile(dynamic=True), torch.export
with a Dim).

A shape function's checks are C on numbers: opcore cannot read the
condition, so it asks the shape function. With the real sizes (the hints)
it passes; then each dynamic size (a symbol) in turn takes a probe value:

- the check still passes: the symbol is free, nothing to record;
- it passes only when some other symbols of the same value move with it
  (``oc_same_shape(a, b)``, ``OC_CHECK(x->sizes[1] == w->sizes[1])``): the
  check is an equality between sizes, recorded as torch's own ops record
  one, ``torch._check(s0 == s1)``. torch unifies the symbols, so one Dim
  shared by both inputs exports and compiled code serves every size;
- it fails however the symbols move (``n % 4 == 0``, ``n == 4``, a relation
  other than equality): the symbol is specialized to its value with a
  guard (torch.compile recompiles for other sizes), as torch's own ops do.
  A symbol the user asked to keep dynamic (a torch.export Dim,
  ``mark_dynamic``) cannot be specialized: that is an OpError saying so and
  what to do, instead of torch's later "Constraints violated".
"""
import torch

from opcore import _C, _probes


def symints(v):
    """Every SymInt in an argument value (a SymInt, a tensor's sizes, lists)."""
    if isinstance(v, torch.SymInt):
        yield v
    elif isinstance(v, torch.Tensor):
        yield from (s for s in v.shape if isinstance(s, torch.SymInt))
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from symints(x)


def free_symbols(vals):
    """{sympy symbol: a SymInt holding it} over all argument values."""
    syms = {}
    for s in (s for v in vals for s in symints(v)):
        for f in s.node.expr.free_symbols:
            syms.setdefault(f, s)
    return syms


def backed_values(shape_env):
    """{symbol: value} of the symbols torch knows the values of."""
    known = getattr(shape_env, "backed_var_to_val", None)
    return known if known is not None else shape_env.var_to_val  # torch before 2.13


def _probe(k):
    """The probe value of the k-th symbol: large, distinct per symbol."""
    n = len(_probes.PRIMES)
    return _probes.PRIMES[k % n] + 2 * (k // n)


def _where(f, names, vals):
    """'a.size(0)' (or 'n' for a SymInt argument) for a message; every place f is."""
    places = []
    for name, v in zip(names, vals):
        items = v if isinstance(v, (list, tuple)) else [v]
        for i, x in enumerate(items):
            label = f"{name}[{i}]" if isinstance(v, (list, tuple)) else name
            if isinstance(x, torch.SymInt) and x.node.expr == f:
                places.append(label)
            elif isinstance(x, torch.Tensor):
                places += [f"{label}.size({d})" for d, s in enumerate(x.shape)
                           if isinstance(s, torch.SymInt) and s.node.expr == f]
    return " and ".join(places) or str(f)


def _kept_dynamic(shape_env, f):
    """True if the user asked torch to keep symbol f dynamic (a torch.export
    Dim, mark_dynamic): specializing it fails the export or compile."""
    def strict(c):  # torch.compile(dynamic=True)'s own constraints only warn
        return c is not None and not getattr(c, "warn_only", False)

    try:
        for tracked in shape_env.tracked_fakes or ():
            ctx = tracked.symbolic_context
            if isinstance(tracked.fake, torch.SymInt):
                if strict(getattr(ctx, "constraint", None)) and f in tracked.fake.node.expr.free_symbols:
                    return True
            elif isinstance(tracked.fake, torch.Tensor):
                for c, s in zip(getattr(ctx, "constraint_sizes", None) or (), tracked.fake.shape):
                    if strict(c) and isinstance(s, torch.SymInt) and f in s.node.expr.free_symbols:
                        return True
    except Exception:  # torch internals moved: torch's own error will tell
        return False
    return False


def settle(op, names, vals, infer_at):
    """Record the relations between dynamic sizes that `op`'s shape function
    checks need (see the module's doc). infer_at({symbol: value}) runs the
    shape function with those symbols at those values and every other at
    its hint, raising opcore.OpError where a check fails."""
    done = set()  # symbols already related or specialized: each at most once
    while True:
        syms = free_symbols(vals)
        if not syms:
            return
        shape_env = next(iter(syms.values())).node.shape_env
        known = backed_values(shape_env)
        hints = {f: int(known[f]) for f in syms if f in known}
        order = sorted(syms, key=str)
        if not _record_one(op, names, vals, infer_at, shape_env, order, hints, done):
            return


def _passes(infer_at, assign):
    try:
        infer_at(assign)
        return True
    except _C.OpError:
        return False


def _record_one(op, names, vals, infer_at, shape_env, order, hints, done):
    """Record the first relation or specialization the checks need; False
    when every symbol is free. Recording one changes the symbols (torch
    unifies or specializes them), so the caller looks again."""
    for k, f in enumerate(order):
        if f not in hints or f in done:
            continue
        v = _probe(k)
        if _passes(infer_at, {f: v}):
            continue
        # the checks need f to move with some of the symbols equal to it now
        group = [g for g in order if g != f and hints.get(g) == hints[f]]
        if group and _passes(infer_at, {g: v for g in [f, *group]}):
            for g in list(group):  # keep only the symbols the checks need
                rest = [h for h in group if h != g]
                if _passes(infer_at, {h: v for h in [f, *rest]}):
                    group = rest
            sym = shape_env.create_symintnode
            done.update([f, *group])
            for g in group:
                torch._check(sym(f, hint=hints[f]) == sym(g, hint=hints[g]),
                             lambda g=g: f"op '{op.qualname}': its shape function needs "
                                         f"{_where(f, names, vals)} == {_where(g, names, vals)}")
            return True
        try:
            infer_at({f: v})
        except _C.OpError as e:
            why = e.args[0] if e.args else str(e)
        if _kept_dynamic(shape_env, f):
            err = _C.OpError(
                f"op '{op.qualname}': the shape function's checks hold only for particular values of the "
                f"dynamic size {_where(f, names, vals)} (now {hints[f]}; at {v}: {why}). opcore records an "
                f"equality between sizes as a relation (torch._check(s0 == s1)), but this check cannot be "
                f"expressed symbolically, so the size would be specialized to {hints[f]}: keep that "
                f"dimension static (torch.export.Dim.STATIC, or leave it out of dynamic_shapes / "
                f"mark_dynamic), or write the check as an equality between sizes")
            err.op, err.status = op.qualname, "OC_ESHAPE"
            raise err
        done.add(f)
        int(shape_env.create_symintnode(f, hint=hints[f]))  # torch guards on the value: specialized
        return True
    return False
