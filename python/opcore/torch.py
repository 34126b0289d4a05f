"""PyTorch integration: opcore ops as first-class torch ops.

Loading a library (opcore.custom_op.load / load_library) calls
register_library(), which for each op:

* defines it with its schema in torch.library (namespace = the library's
  name), tagged ``pt2_compliant_tag`` so torch.compile and torch.export
  treat it as a well-behaved custom op;
* registers the C op itself as the CPU kernel: inputs are viewed in place
  (any strides), fresh results are allocated by torch.empty from the shape
  function's answer, ``Tensor(a!)`` arguments are written in place, the
  kernel runs with the GIL released;
* registers a fake (meta) implementation backed by the C shape function, so
  FakeTensor tracing (torch.compile, torch.export, opcheck) works. Dynamic
  sizes (SymInts) stay symbolic: the shape function is run on probe sizes
  and each result size is explained in terms of the input sizes
  (opcore._C.Op.trace); see docs/python.md.

In-place ops (``Tensor(a!)`` arguments) take the native kernel, as functional
ops do, and run as a C++ op of the same schema does on tensors that require
grad (the call bumps the version counters of what it writes). They are
functionalized by torch under torch.compile and torch.export
(auto_functionalize). An op returning its mutated argument (``-> Tensor(a!)``) is registered as a composite wrapper
around an internal ``_oc_<name>`` op returning ``()``: torch cannot
functionalize a custom op whose results alias its inputs.

Autograd: the seeds' autograd.Function pattern works as is; or pair a
forward op with its backward op in one line:

    opcore.torch.register_autograd("my_ops::relu_forward", "my_ops::relu_backward")

after which torch.ops.my_ops.relu_forward is differentiable (see
register_autograd for how the backward's arguments are bound).
"""
import threading

import torch

from opcore import _C, _dims, _probes, _torch_dims, _torch_native
from opcore._C import OpArgumentError

__all__ = ["register_library", "unregister_library", "register_op", "register_autograd", "to_torch_dtype",
           "registered_ops"]

# torch dtypes in oc_dtype order, from opcore's one list (OC_DTYPE_MAP in
# include/opcore/dtype.h): torch spells every dtype as opcore does.
_DTYPES = tuple(getattr(torch, name) for name in _C.dtype_names())
_C._set_torch(torch.Tensor, torch.empty, _DTYPES)
_NAME_TO_DTYPE = dict(zip(_C.dtype_names(), _DTYPES))

_lock = threading.RLock()


class _Entry:
    """One op's registration in torch, kept across reloads of its library:
    the torch.library fragment defining it (and holding its Python
    kernels), whether its CPU kernel is the shim's, and the slot -- `op`,
    the opcore op its kernels call now, and `fake`, its fake kernel. A
    reload with the schema unchanged replaces the slot (_swap): torch's
    dispatcher keeps the same kernels, so threads calling the op meanwhile
    are safe."""
    __slots__ = ("op", "fake", "tlib", "native")

    def __init__(self, op):
        self.op, self.fake = op, _make_fake(op)
        self.tlib, self.native = None, False


_entries = {}  # qualname -> _Entry


def to_torch_dtype(name):
    """The torch dtype for an opcore dtype name ('float32', ...)."""
    return _NAME_TO_DTYPE[name]


def registered_ops():
    """{qualname: opcore._C.Op} of the ops registered with torch."""
    with _lock:
        return {q: e.op for q, e in _entries.items()}


# ---------------------------------------------------------------------------
# Arguments in schema order.

_MISSING = _C.MISSING  # an argument left to its schema default (opcore._C.Op.bind)


# ---------------------------------------------------------------------------
# Dynamic shapes: SymInt sizes stay symbolic.

class _Spec:
    """A tensor's shape and dtype, as the shape function sees it."""
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


_symints = _torch_dims.symints


# Probe sizes (opcore/_probes.py): every symbol, 2 large runs and a small one.
_PROBES = _probes.large_runs(2)
_SMALL = _probes.small_run()


def _concrete(v, value_of):
    """`v` with every SymInt replaced by value_of(symint); tensors as _Spec."""
    if isinstance(v, torch.SymInt):
        return value_of(v)
    if isinstance(v, torch.Tensor):
        return _Spec(tuple(value_of(s) if isinstance(s, torch.SymInt) else s for s in v.shape), v.dtype)
    if isinstance(v, (list, tuple)):
        return type(v)(_concrete(x, value_of) for x in v)
    return v


def _run(vals, names, value_of):
    """One (args, kwargs) run for op.trace / op.infer: every given value by name."""
    return (), {name: _concrete(v, value_of) for name, v in zip(names, vals) if v is not _MISSING}


def _probe_value(assign):
    def value_of(s):
        return int(s.node.expr.xreplace(assign))
    return value_of


def _hint(s):
    h = s.node.hint
    if h is None:
        raise OpArgumentError(f"opcore: a size with no known value ({s}) reached an opcore op's shape function")
    return int(h)


def _symbolic_metas(op, names, vals):
    """Result (sizes, dtype) with SymInt sizes, for FakeTensor args with
    symbolic shapes: what the shape function's checks need of the dynamic
    sizes is recorded first (an equality between sizes as torch._check(s0
    == s1), any other need as a guard on the value: opcore/_torch_dims.py);
    result sizes must then be explainable by op.trace, else the error says
    how to write the shape function."""
    hinted = all(s.node.hint is not None for v in vals for s in _symints(v))
    if hinted:
        def infer_at(assign):
            known = _torch_dims.backed_values(next(s for v in vals for s in _symints(v)).node.shape_env)
            op.infer(**_run(vals, names, _probe_value({**{f: int(x) for f, x in known.items()}, **assign}))[1])

        _torch_dims.settle(op, names, vals, infer_at)
    order = sorted(_torch_dims.free_symbols(vals), key=str)

    def assigned(probe):
        return _run(vals, names, _probe_value({f: probe[k % len(probe)] + 2 * (k // len(probe))
                                               for k, f in enumerate(order)}))

    runs = ([_run(vals, names, _hint)] if hinted else []) + [assigned(p) for p in _PROBES]
    # The small run catches a size that depends on a dynamic one through a
    # branch or a plain C min (constant on the large probes alone); it is
    # left out only when the shape function refuses small sizes.
    traced = op.trace(runs + [assigned(_SMALL)] if _probes.infers(op, assigned(_SMALL)) else runs)

    def input_dim(arg, item, dim):
        v = vals[arg]
        if isinstance(v, (list, tuple)):
            v = v[item]
        return v if dim < 0 else v.shape[dim]

    def build(e):
        return _dims.build(e, input_dim, torch.sym_min, torch.sym_max)

    return [([build(e) for e in dims], dtype) for dtype, dims in traced]


def _one_device(op, names, vals):
    """The device every tensor argument is on. torch routes a call mixing
    devices (a CPU and a meta tensor) to the fake kernel: refused here, as
    torch's own ops refuse it, instead of answering with uninitialised
    results."""
    seen = []
    for i, v in enumerate(vals):
        items = [(None, v)] if isinstance(v, torch.Tensor) else \
            list(enumerate(v)) if isinstance(v, (list, tuple)) else ()
        for k, t in items:
            if isinstance(t, torch.Tensor):
                where = f"'{names[i]}' (argument {i + 1}{'' if k is None else f', item {k}'})"
                seen.append((where, t.device))
    if not seen:
        return "cpu"
    first = seen[0]
    other = next((s for s in seen if s[1].type != first[1].type), None)
    if other is not None:
        raise OpArgumentError(
            f"op '{op.qualname}': expected all tensors to be on the same device, but found at least two devices: "
            f"{first[0]} is on {first[1]} and {other[0]} is on {other[1]}; an opcore kernel runs with every tensor "
            "on the CPU (meta tensors only all together, for shape inference): move them with .cpu()")
    return first[1]


def _make_fake(op):
    infer = op.infer
    names = [a["name"] for a in op.arg_info]
    results = op.results
    bind = op.bind

    def fake(*args, **kwargs):
        vals = bind(args, kwargs)
        device = _one_device(op, names, vals)
        if any(True for v in vals for _ in _symints(v)):
            metas = _symbolic_metas(op, names, vals)
        else:
            metas = infer(*args, **kwargs)
        outs = tuple(vals[alias] if alias is not None else
                     torch.empty(sizes, dtype=_NAME_TO_DTYPE[dtype], device=device)
                     for (_, alias), (sizes, dtype) in zip(results, metas))
        return None if not outs else outs[0] if len(outs) == 1 else outs

    fake.__name__ = f"{op.name}_fake"
    fake.__qualname__ = fake.__name__
    return fake


# ---------------------------------------------------------------------------
# Registration.

def _internal_schema(op):
    """The schema of the internal op behind a `-> Tensor(a!)` op: the same
    arguments, only the fresh results."""
    head, _ = op.schema.rsplit("->", 1)
    fresh = [f"Tensor {n}".strip() for n, alias in op.results if alias is None]
    rets = "()" if not fresh else fresh[0] if len(fresh) == 1 else "(" + ", ".join(fresh) + ")"
    return f"_oc_{head.strip()} -> {rets}"


def _swap(entry, op):
    """Point a registration at `op`, a reloaded op of the same schema."""
    if entry.native and _torch_native.swap(op) < 0:
        raise RuntimeError(f"opcore: the native kernel of {op.qualname} refused the reloaded op: "
                           "its schema differs from the registered one")
    entry.fake = _make_fake(op)
    entry.op = op


class _Gone:
    """Stands in, in a registration's slot, for an op its reloaded library
    no longer defines: calls raise OpError saying so."""

    def __init__(self, op):
        self._op = op

    def __getattr__(self, name):
        return getattr(self._op, name)

    def __call__(self, *args, **kwargs):
        op = self._op
        raise _C.OpError(f"op '{op.qualname}': its library '{op.library}' was unloaded and loaded "
                         "again without it (the build loaded now does not define it); torch keeps "
                         "the name until the process ends")


def _retire(qualname):
    entry = _entries[qualname]
    if isinstance(entry.op, _Gone):
        return
    if entry.native:
        _torch_native.retire(*qualname.split("::", 1))
    entry.op = _Gone(entry.op)


def _drop(qualname):
    """Take op `qualname` out of torch: its registration and the
    register_autograd pairings it is part of."""
    entry = _entries.pop(qualname)
    ns, name = qualname.split("::", 1)
    paired = [f for f, (_, bwd) in _autograd_libs.items()
              if qualname in (f.split(".")[0], bwd.split(".")[0])]
    for fname in paired:
        _autograd_libs.pop(fname)[0]._destroy()
    if entry.native:
        _torch_native.unregister(ns, name)
    entry.tlib._destroy()  # no public counterpart


def register_op(op):
    """Define `op` (an opcore._C.Op) in torch.library: schema, CPU kernel
    (the C op), fake implementation (the C shape function). Idempotent.

    An op of that name registered before (its library reloaded, or loaded
    again after an unload) keeps its registration when the schema is the
    same: its kernels call `op` from now on. A changed schema replaces the
    registration (and drops the op's register_autograd pairings): torch
    cannot change a definition in place, and taking one out is safe only
    while no other thread calls the op (docs/python.md)."""
    if _takes_dict(op):
        raise TypeError(
            f"opcore: op {op.qualname} takes a Dict argument, which torch.library cannot define: torch's "
            "schema language has only Dict(str, T) with one value type, not opcore's dictionary of ints, "
            "floats, bools, strs and lists. Call the op itself, which takes torch tensors "
            f"(opcore.custom_op.load(...).{op.name}(x, attrs={{...}})), or give it typed arguments "
            "(int, float[], ...) to use it through torch.ops")
    with _lock:
        ns = op.library
        entry = _entries.get(op.qualname)
        if entry is not None:
            if entry.op is op:  # (a _Gone never is)
                return getattr(getattr(torch.ops, ns), op.name)
            if entry.op.schema == op.schema:
                _swap(entry, op)
                return getattr(getattr(torch.ops, ns), op.name)
            _drop(op.qualname)
        entry = _Entry(op)
        # a fragment per op: one op can be taken out alone
        entry.tlib = tlib = torch.library.Library(ns, "FRAGMENT")
        aliased = any(alias is not None for _, alias in op.results)
        tags = (torch.Tag.pt2_compliant_tag,)
        try:
            tlib.define(op.schema, tags=tags)
            if aliased:
                tlib.define(_internal_schema(op), tags=tags)
        except RuntimeError as e:
            tlib._destroy()
            raise RuntimeError(f"opcore: cannot define {op.qualname} in torch ({e}); is an op of that name "
                               "already registered by another extension?") from e
        # In-place ops run as a C++ op of the same schema does: torch's
        # autograd fallback lets them through whether or not their tensors
        # require grad (what flows through them gets no gradient, as for a
        # C++ op), and the native kernel bumps the version counter of what
        # it writes, so a backward that saved it raises instead of using the
        # new values.
        # Every kernel reads the op from the entry (the slot) at each call.
        def kernel(*args, **kwargs):
            return entry.op(*args, **kwargs)

        def fake(*args, **kwargs):
            return entry.fake(*args, **kwargs)

        kernel.__name__, fake.__name__ = op.name, f"{op.name}_fake"
        if not aliased:
            entry.native = _torch_native.register(op)  # the C kernel without Python
            if not entry.native:
                tlib.impl(op.name, kernel, "CPU")
            torch.library.register_fake(op.qualname, fake, lib=tlib)
        else:
            # torch functionalizes the internal `-> ()` op; the public one
            # decomposes into it and returns the mutated arguments.
            internal = f"_oc_{op.name}"
            fresh = [i for i, (_, alias) in enumerate(op.results) if alias is None]

            def fresh_only(fn):
                def picked(*args, **kwargs):
                    out = fn(*args, **kwargs)
                    out = out if isinstance(out, tuple) else (out,)
                    made = tuple(out[i] for i in fresh)
                    return None if not made else made[0] if len(made) == 1 else made
                return picked

            impl_op = getattr(getattr(torch.ops, ns), internal)

            def composite(*args, **kwargs):
                made = impl_op(*args, **kwargs)
                made = iter(made if isinstance(made, tuple) else (made,) if made is not None else ())
                now = entry.op
                vals = now.bind(args, kwargs)
                outs = tuple(vals[alias] if alias is not None else next(made)
                             for _, alias in now.results)
                return outs[0] if len(outs) == 1 else outs

            entry.native = _torch_native.register(op, internal, fresh_only=True)
            if not entry.native:
                tlib.impl(internal, fresh_only(kernel), "CPU")
            torch.library.register_fake(f"{ns}::{internal}", fresh_only(fake), lib=tlib)
            tlib.impl(op.name, composite, "CompositeImplicitAutograd")
        if any(a["mutable"] for a in op.arg_info):
            target = f"_oc_{op.name}" if aliased else op.name
            bits = _resolve_bits(entry, getattr(getattr(torch.ops, ns), target).default)
            tlib.impl(target, bits, "Conjugate")
            tlib.impl(target, bits, "Negative")
        _entries[op.qualname] = entry
        return getattr(getattr(torch.ops, ns), op.name)


def _resolve_bits(entry, target):
    """The kernel of an op that writes a tensor argument at torch's
    Conjugate and Negative keys: torch's own fallback for those keys takes a
    written argument's new values from the op's first result, which an op
    returning `()` or fresh tensors does not have. Here each lazy view
    (conjugate or negative bit) is read as its values, the op writes those,
    and they are written back through the view, as a direct call does."""
    def resolved(*args, **kwargs):
        info = entry.op.arg_info
        names = {a["name"]: a["mutable"] for a in info}
        back = []

        def fix(v, mutable):
            if isinstance(v, (list, tuple)):
                return type(v)(fix(t, mutable) for t in v)
            if not isinstance(v, torch.Tensor) or not (v.is_conj() or v.is_neg()):
                return v
            r = v.resolve_conj().resolve_neg()
            if mutable:
                back.append((v, r))
            return r
        args = [fix(v, i < len(info) and info[i]["mutable"]) for i, v in enumerate(args)]
        kwargs = {k: fix(v, names.get(k, False)) for k, v in kwargs.items()}
        out = target(*args, **kwargs)
        for view, values in back:
            view.copy_(values)
        return out
    return resolved


def _takes_dict(op):
    return any(a["type"] == "Dict" for a in op.arg_info)


def register_library(lib):
    """Register every op of a loaded opcore Library with torch, but those
    taking a Dict (see register_op): they are called directly. A reloaded
    library's ops take over their registrations (register_op); an op the
    new build no longer defines keeps its registration, which raises
    OpError saying its library was unloaded."""
    for op in lib.ops.values():
        if not _takes_dict(op):
            register_op(op)
    with _lock:
        for qualname in [q for q in _entries if q.split("::", 1)[0] == lib.name and
                         q.split("::", 1)[1] not in lib.ops]:
            _retire(qualname)


def unregister_library(name):
    """Remove every op of library `name` from torch: the torch.library
    fragments that defined them are destroyed. Safe only while no thread
    calls them: a reload or an unload does not need it (register_op)."""
    with _lock:
        for qualname in [q for q in _entries if q.split("::", 1)[0] == name]:
            _drop(qualname)
        _torch_native.unregister(name)


def _resolve(op):
    """'ns::name' / OpOverloadPacket / OpOverload -> OpOverload."""
    if isinstance(op, str):
        if "::" not in op:
            raise ValueError(f"expected 'library::op', got {op!r}")
        ns, name = op.split("::", 1)
        name, _, overload = name.partition(".")
        packet = getattr(getattr(torch.ops, ns), name)
        return getattr(packet, overload or "default")
    if isinstance(op, torch._ops.OpOverloadPacket):
        return op.default
    if isinstance(op, torch._ops.OpOverload):
        return op
    raise TypeError(f"expected an op name 'library::op' or a torch op, got {type(op).__name__}")


# ---------------------------------------------------------------------------
# Autograd.

def _is_tensor_type(t):
    if isinstance(t, torch.TensorType):
        return True
    return isinstance(t, torch.OptionalType) and isinstance(t.getElementType(), torch.TensorType)


def _is_tensor_list_type(t):
    return isinstance(t, torch.ListType) and isinstance(t.getElementType(), torch.TensorType)


def _result_names(fwd_schema):
    """{name: index} of the forward's results: the schema's names, and for an
    unnamed result `result` (the only one) or `result<i>` (one of several)."""
    rets = fwd_schema.returns
    names = {}
    for i, r in enumerate(rets):
        names[r.name or ("result" if len(rets) == 1 else f"result{i}")] = i
    return names


def _bindable(fwd_schema):
    """{name: [source, ...]}: every name a backward argument is bound by, and
    what it binds to: ("input", i) | ("result", i) | ("grad", i); a name with
    two sources is ambiguous."""
    names = {}

    def add(name, source):
        if source not in names.setdefault(name, []):
            names[name].append(source)

    nrets = len(fwd_schema.returns)
    results = _result_names(fwd_schema)
    for i, a in enumerate(fwd_schema.arguments):
        add(a.name, ("input", i))
    for n, i in results.items():
        add(n, ("result", i))
    if nrets == 1:
        add("grad", ("grad", 0))
    for n, i in results.items():
        add(f"grad_{n}", ("grad", i))
    for i in range(nrets):
        add(f"grad{i}", ("grad", i))
    return names


_SOURCE_WORDS = {"input": "forward input", "result": "forward result", "grad": "the incoming gradient of result"}


def _available(fwd_schema):
    """The names a backward can take, for error messages."""
    inputs = [a.name for a in fwd_schema.arguments]
    results = list(_result_names(fwd_schema))
    grads = (["grad"] if len(results) == 1 else []) + [f"grad_{n}" for n in results] + \
        [f"grad{i}" for i in range(len(results))]
    return (f"forward inputs: {', '.join(inputs)}; forward results: {', '.join(results) or '(none)'}; "
            f"incoming gradients: {', '.join(grads) or '(none)'}")


def _unbound_error(fname, bwd_name, unbound, fwd_schema, hint):
    return ValueError(f"register_autograd({fname!r}): backward {bwd_name} has argument(s) "
                      f"{', '.join(repr(n) for n in unbound)} that name nothing of the forward; names "
                      f"available: {_available(fwd_schema)}. {hint}")


def _backward_plan(fname, fwd_schema, bwd_schema):
    """How each backward argument is fed, bound by name (OPLANG's
    convention): a list of ("input", i) | ("result", i) | ("grad", i) |
    ("default", value), and the names of the arguments that bind to
    nothing. A name that binds to two things is a ValueError."""
    names = _bindable(fwd_schema)
    plan, unbound = [], []
    for a in bwd_schema.arguments:
        sources = names.get(a.name, ())
        if len(sources) > 1:
            what = " and ".join(f"{_SOURCE_WORDS[k]} #{i + 1}" for k, i in sources)
            raise ValueError(f"register_autograd({fname!r}): backward {bwd_schema.name!r} argument {a.name!r} "
                             f"binds ambiguously, to {what}: rename the forward's argument or result so that "
                             "each name says one thing")
        if sources:
            plan.append(sources[0])
        elif a.has_default_value():
            plan.append(("default", a.default_value))
        else:
            unbound.append(a.name)
    return plan, unbound


def _grad_targets(fwd_schema, bwd_returns, tensor_idx):
    """The forward input each backward result is the gradient of."""
    inputs = {a.name: i for i, a in enumerate(fwd_schema.arguments)}
    named = [r.name[5:] if r.name and r.name.startswith("grad_") else None for r in bwd_returns]
    if bwd_returns and all(n in inputs for n in named):
        return [inputs[n] for n in named]
    return tensor_idx[:len(bwd_returns)]


def _callable_binding(fn, npos, others, results):
    """How a Python backward is called: `npos` values positionally (the
    gradients, then the tensor inputs), then by keyword the non-tensor
    inputs among `others` and the forward results among `results` ({name:
    index}) that it names as parameters (with **kwargs: every non-tensor
    input). Returns (keyword input names, {keyword result name: index},
    required parameters bound to nothing); a signature inspect cannot read
    binds nothing by keyword and is not checked."""
    import inspect

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return set(), {}, []
    P = inspect.Parameter
    if any(p.kind == P.VAR_POSITIONAL for p in params):
        npos = len(params)  # *args soaks up the positional values
    rest = [p for p in params[npos:] if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)]
    named = {p.name for p in rest}
    keywords = set(others) if any(p.kind == P.VAR_KEYWORD for p in params) else named & set(others)
    taken = {n: i for n, i in results.items() if n in named and n not in keywords}
    unbound = [p.name for p in rest if p.default is P.empty and p.name not in keywords and p.name not in taken]
    return keywords, taken, unbound


class _Pairing:
    """A forward op and its backward, with everything a call needs worked
    out once: which inputs to save, how to feed the backward (OPLANG's
    binding), where its gradients go."""

    def __init__(self, fwd, backward, positional=False):
        self.fwd = fwd
        schema = fwd._schema
        self.args = args = schema.arguments
        self.n = len(args)
        self.fname = fwd.name()
        self.tensor_idx = [i for i, a in enumerate(args) if _is_tensor_type(a.type)]
        self.list_idx = [i for i, a in enumerate(args) if _is_tensor_list_type(a.type)]
        if not self.tensor_idx and not self.list_idx:
            raise ValueError(f"{self.fname} has no Tensor input to differentiate")
        self.is_op = isinstance(backward, (str, torch._ops.OpOverload, torch._ops.OpOverloadPacket))
        self.bwd = bwd = _resolve(backward) if self.is_op else backward
        if not callable(bwd):
            raise TypeError("backward must be an op name or a callable")
        self.plan = None
        self.keywords, self.result_kw = set(), {}
        if self.is_op and not positional:
            # bound by name, or refused: never a guess by position
            self.plan, unbound = _backward_plan(self.fname, schema, bwd._schema)
            if unbound:
                raise _unbound_error(self.fname, repr(bwd._schema.name), unbound, schema,
                                     "Name them so, or pass positional=True to call it as "
                                     "backward(*grads, *tensor_inputs).")
        elif not self.is_op:
            others = [args[i].name for i in range(self.n) if i not in self.tensor_idx and i not in self.list_idx]
            npos = len(schema.returns) + len(self.tensor_idx) + len(self.list_idx)
            self.keywords, self.result_kw, unbound = _callable_binding(bwd, npos, others, _result_names(schema))
            if unbound:
                raise _unbound_error(self.fname, getattr(bwd, "__name__", "callable"), unbound, schema,
                                     f"A Python backward takes the {npos} gradients and tensor inputs by "
                                     "position, then non-tensor inputs and forward results by name.")
        self.targets = (_grad_targets(schema, bwd._schema.returns, self.tensor_idx) if self.is_op
                        else self.tensor_idx + self.list_idx)
        missing = [args[i].name for i in self.tensor_idx
                   if isinstance(args[i].type, torch.TensorType) and i not in self.targets]
        if self.is_op and missing:
            raise ValueError(f"register_autograd({self.fname!r}): backward {bwd._schema.name!r} returns "
                             f"{len(bwd._schema.returns)} gradient(s) for the forward's tensor inputs "
                             f"{', '.join(a.name for a in args if _is_tensor_type(a.type))}: no gradient for "
                             f"{', '.join(repr(n) for n in missing)}. Return one per tensor input, in order or "
                             "named grad_<input>")
        self.need_results = bool(self.result_kw) or (self.plan is not None and
                                                     any(p[0] == "result" for p in self.plan))
        self.positional = [i for i, a in enumerate(args) if not a.kwarg_only]
        self.defaults = [a.default_value if a.has_default_value() else None for a in args]
        if self.plan is not None:
            bargs = bwd._schema.arguments
            self.call_pos = [(p, a.name) for a, p in zip(bargs, self.plan) if not a.kwarg_only]
            self.call_kw = [(p, a.name) for a, p in zip(bargs, self.plan) if a.kwarg_only]

    def inputs(self, args, kwargs):
        """All forward inputs in schema order (the dispatcher passes
        keyword-only arguments as kwargs and may leave defaults out)."""
        vals = list(args)
        for i in self.positional[len(vals):]:
            vals.append(self.defaults[i])
        for i in range(len(vals), self.n):
            vals.append(kwargs.get(self.args[i].name, self.defaults[i]))
        return vals

    def save(self, ctx, vals, output):
        outs = (output if isinstance(output, tuple) else (output,)) if self.need_results else ()
        ctx.save_for_backward(*[vals[i] for i in self.tensor_idx], *outs)  # None entries are fine
        ctx.vals = [None if i in self.tensor_idx else v for i, v in enumerate(vals)]

    def _check(self, i, g, like):
        if g is None or like is None:
            return g
        if not isinstance(g, torch.Tensor) or g.shape != like.shape or g.dtype != like.dtype:
            got = type(g).__name__ if not isinstance(g, torch.Tensor) else f"{g.dtype} {list(g.shape)}"
            raise RuntimeError(f"opcore: backward of {self.fname} returned a gradient for input "
                               f"'{self.args[i].name}' of {got}, expected {like.dtype} {list(like.shape)}")
        return g

    def grads(self, ctx, grads):
        """The gradient of every forward input (None for non-tensors)."""
        saved = ctx.saved_tensors
        vals = list(ctx.vals)
        for k, i in enumerate(self.tensor_idx):
            vals[i] = saved[k]
        outs = saved[len(self.tensor_idx):]
        if self.plan is not None:
            def arg(p):
                kind = p[0]
                if kind == "input":
                    return vals[p[1]]
                if kind == "result":
                    return outs[p[1]]
                if kind == "default":
                    return p[1]
                g = grads[p[1]]
                return g if g is not None else torch.zeros_like(outs[p[1]] if outs else vals[self.tensor_idx[0]])
            g = self.bwd(*[arg(p) for p, _ in self.call_pos],
                         **{name: arg(p) for p, name in self.call_kw if p[0] != "default"})
        else:
            tensors = [vals[i] for i in self.tensor_idx] + [vals[i] for i in self.list_idx]
            g = self.bwd(*grads, *tensors, **{self.args[i].name: vals[i] for i in range(self.n)
                                             if self.args[i].name in self.keywords},
                         **{name: outs[i] for name, i in self.result_kw.items()})
        g = g if isinstance(g, (tuple, list)) else (g,)
        if len(g) > len(self.targets) and not self.is_op:
            raise RuntimeError(f"opcore: backward of {self.fname} returned {len(g)} gradients for "
                               f"{len(self.targets)} tensor inputs")
        out = [None] * self.n
        for i, gi in zip(self.targets, g):
            like = vals[i]
            if like is None:
                continue
            out[i] = self._check(i, gi, like if isinstance(like, torch.Tensor) else None)
        return out


# forward qualname -> (the torch.library.Library or _NativeAutograd holding
# its Autograd kernel, the backward's qualname)
_autograd_libs = {}


class _NativeAutograd:
    """A registration of the shim's C++ Autograd kernel (destroyed as a
    torch.library.Library fragment is)."""

    def __init__(self, handle):
        self._handle = handle

    def _destroy(self):
        handle, self._handle = self._handle, None
        if handle:
            _C._torch_autograd_drop(handle)


class _PyAutograd(_NativeAutograd):
    """A Python backward's registration (torch.library's Autograd kernel in
    `lib`) with the shim's kernel in front of it at AutogradCPU (handle):
    destroyed together, the shim's first."""

    def __init__(self, lib, handle):
        super().__init__(handle)
        self._lib = lib

    def _destroy(self):
        super()._destroy()
        lib, self._lib = self._lib, None
        if lib is not None:
            lib._destroy()


_FEED_KINDS = {"input": 0, "result": 1, "grad": 2, "default": 3}


def _native_feed(pairing):
    """(feed kinds, feed indices) binding the backward op's arguments for
    the shim's C++ Autograd kernel, or None where the fallback route serves:
    a Python callable backward, no shim (or OPCORE_TORCH_NATIVE=0), or a
    schema outside the kernel's reach (Tensor[] or in-place arguments,
    results that are not plain Tensors, backward results that are not
    Tensors)."""
    if not pairing.is_op or not _torch_native.available():
        return None
    fs, bs = pairing.fwd._schema, pairing.bwd._schema
    plain = lambda t: isinstance(t, torch.TensorType)  # noqa: E731
    if (not fs.returns or not all(plain(r.type) for r in fs.returns) or pairing.list_idx
            or any(a.alias_info is not None and a.alias_info.is_write for a in fs.arguments)
            or not all(_is_tensor_type(r.type) for r in bs.returns)):
        return None
    if pairing.plan is not None:
        plan = pairing.plan
    else:  # positional=True: backward(*grads, *tensor_inputs), defaults after
        plan = [("grad", j) for j in range(len(fs.returns))] + [("input", i) for i in pairing.tensor_idx]
        if len(plan) > len(bs.arguments) or not all(a.has_default_value() for a in bs.arguments[len(plan):]):
            return None
        plan += [("default", None)] * (len(bs.arguments) - len(plan))
    return (tuple(_FEED_KINDS[p[0]] for p in plan), tuple(0 if p[0] == "default" else p[1] for p in plan))


def register_autograd(forward, backward, *, positional=False):
    """Make op `forward` differentiable with `backward`, in one line.

    forward: 'library::op' (or torch.ops.library.op).
    backward: an op 'library::op_backward', bound BY NAME: an argument named
        like a forward input gets that input (tensors and the non-tensor
        values the forward was called with), one named like a forward result
        gets the saved result, `grad` gets the incoming gradient of a
        single-result forward, `grad_<result name>` (or `grad<i>`) that of a
        result of a multi-result one. Its results are the gradients of the
        forward's tensor inputs: by name (`grad_<input>`) or in order. An
        unnamed result is `result` (the only one) or `result<i>`. A backward
        argument that names nothing of these (and has no default) is a
        ValueError here, listing it and the names available: nothing is
        bound by guess.
        Or a Python callable backward(*grads, *tensor_inputs, **named)
        (Tensor[] inputs come after the Tensor ones; by keyword, the
        non-tensor inputs and the forward results it names as parameters)
        returning a Tensor (the first tensor input's gradient) or a tuple
        with one gradient (a list for a Tensor[] input; or None) per tensor
        input. A parameter after the positional ones that names nothing is
        a ValueError here too.
    positional: call an op backward the seeds' way,
        backward(*grads, *tensor_inputs), without binding by name (only
        when asked for).
    Every gradient is checked against its input's shape and dtype.
    """
    fwd = _resolve(forward)
    pairing = _Pairing(fwd, backward, positional)
    fname = pairing.fname
    schema = fwd._schema
    with _lock:
        old = _autograd_libs.pop(fname, None)
        if old is not None:
            old[0]._destroy()
        ns, name = fname.split("::", 1)
        feed = _native_feed(pairing)
        if feed is not None:
            # the shim's C++ Autograd kernel (src/torch/autograd_kernel.cc):
            # no Python on either pass
            lib = _NativeAutograd(_C._torch_autograd_impl(fname, pairing.bwd.name(), *feed, tuple(pairing.targets)))
        else:  # the fallback route: torch.library's public API
            lib = torch.library.Library(ns, "FRAGMENT")

            def setup_context(ctx, inputs, output, keyword_only_inputs=None):
                vals = list(inputs) + [(keyword_only_inputs or {}).get(a.name, pairing.defaults[i])
                                       for i, a in enumerate(schema.arguments) if i >= len(inputs)]
                pairing.save(ctx, vals, output)

            def backward_fn(ctx, *grads):
                return tuple(pairing.grads(ctx, grads)[:len(schema.arguments) - _kwarg_only_count(schema)])

            backward_fn.__name__ = f"{fname.split('::')[-1]}_backward_fn"
            torch.library.register_autograd(fname, backward_fn, setup_context=setup_context, lib=lib)
            if _torch_native.available():
                # the shim's kernel in front of it: calls that need no graph skip Python
                lib = _PyAutograd(lib, _C._torch_autograd_py_impl(fname))
        _autograd_libs[fname] = (lib, pairing.bwd.name() if pairing.is_op else "")
    # An earlier trace (torch.compile) may have cached "no autograd kernel"
    # in the op's Python-dispatcher cache (torch.library.register_autograd
    # does not clear it either): forget it.
    cache = getattr(fwd, "_dispatch_cache", None)
    if cache is not None:
        cache.clear()
    return fwd


def _kwarg_only_count(schema):
    return sum(1 for a in schema.arguments if a.kwarg_only)
