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

In-place ops (``Tensor(a!)`` arguments) are functionalized by torch under
torch.compile and torch.export (auto_functionalize). An op returning its
mutated argument (``-> Tensor(a!)``) is registered as a composite wrapper
around an internal ``_oc_<name>`` op returning ``()``: torch cannot
functionalize a custom op whose results alias its inputs.

Autograd: the seeds' autograd.Function pattern works as is; or pair a
forward op with its backward op in one line:

    opcore.torch.register_autograd("my_ops::relu_forward", "my_ops::relu_backward")

after which torch.ops.my_ops.relu_forward is differentiable (see
register_autograd for how the backward's arguments are bound).
"""
import re
import threading

import torch

from opcore import _C, _torch_native
from opcore._C import OpArgumentError

__all__ = ["register_library", "unregister_library", "register_op", "register_autograd", "to_torch_dtype",
           "registered_ops"]

# torch dtypes in oc_dtype order (include/opcore/dtype.h)
_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
           torch.int32, torch.int64, torch.uint8, torch.bool)
_C._set_torch(torch.Tensor, torch.empty, _DTYPES)
_NAME_TO_DTYPE = dict(zip(_C.dtype_names(), _DTYPES))

_lock = threading.RLock()
_torch_libs = {}    # namespace -> torch.library.Library("ns", "FRAGMENT")
_registered = {}    # qualname -> opcore._C.Op


def to_torch_dtype(name):
    """The torch dtype for an opcore dtype name ('float32', ...)."""
    return _NAME_TO_DTYPE[name]


def registered_ops():
    """{qualname: opcore._C.Op} of the ops registered with torch."""
    with _lock:
        return dict(_registered)


# ---------------------------------------------------------------------------
# Arguments in schema order.

_MISSING = object()


def _bind(names, args, kwargs):
    """The call's values in schema order (_MISSING where a default applies)."""
    vals = list(args) + [_MISSING] * (len(names) - len(args))
    for k, v in kwargs.items():
        vals[names.index(k)] = v
    return vals


def _tensors_in(vals):
    for v in vals:
        if isinstance(v, torch.Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from (t for t in v if isinstance(t, torch.Tensor))


# ---------------------------------------------------------------------------
# Dynamic shapes: SymInt sizes stay symbolic.

class _Spec:
    """A tensor's shape and dtype, as the shape function sees it."""
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


def _symints(v):
    if isinstance(v, torch.SymInt):
        yield v
    elif isinstance(v, torch.Tensor):
        yield from (s for s in v.shape if isinstance(s, torch.SymInt))
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _symints(x)


# Probe values of the dynamic sizes: symbol i takes P[i] * (r + 1) in large
# run r -- large, different per symbol, with prime differences between runs
# so that no size mod a small number is the same in every run -- and 2 + i
# in one small run, so that min(n, k) / max(n, k) with a small k differ
# between runs too (shape functions that refuse small sizes are traced on
# the large runs alone). The same choice as opcore.jax's.
_PRIMES = (10007, 10009, 10037, 10039, 10061, 10067, 10069, 10079, 10091, 10093, 10099, 10103)
_PROBES = tuple(tuple(p * (r + 1) for p in _PRIMES) for r in range(2))
_SMALL = tuple(2 + i for i in range(len(_PRIMES)))


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
    args, kwargs = [], {}
    for name, v in zip(names, vals):
        if v is not _MISSING:
            kwargs[name] = _concrete(v, value_of)
    return tuple(args), kwargs


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
    symbolic shapes: the shape function's checks run on probe sizes, and a
    dynamic size that a check needs to be a particular value is specialized
    (guarded) exactly as torch's own ops do; result sizes must be explainable
    by op.trace, else the error says how to write the shape function."""
    syms = {}
    for s in (s for v in vals for s in _symints(v)):
        for f in s.node.expr.free_symbols:
            syms.setdefault(f, s)
    hinted = all(s.node.hint is not None for v in vals for s in _symints(v))
    order = sorted(syms, key=str)
    if hinted:
        shape_env = next(iter(syms.values())).node.shape_env
        known = getattr(shape_env, "backed_var_to_val", None)
        if known is None:  # torch before 2.13
            known = shape_env.var_to_val
        hints = {f: int(known[f]) for f in order if f in known}
        # A symbol the shape function's checks need at its value is specialized.
        for k, f in enumerate(order):
            if f not in hints:
                continue
            probe = dict(hints)
            probe[f] = _PROBES[0][k % len(_PRIMES)] + 2 * (k // len(_PRIMES))
            try:
                op.infer(**_run(vals, names, _probe_value(probe))[1])
            except _C.OpError:
                for v in vals:
                    for s in _symints(v):
                        if f in s.node.expr.free_symbols:
                            int(s)  # torch guards on the value: specialized, not silently
    def assigned(probe):
        return _run(vals, names, _probe_value({f: probe[k % len(probe)] + 2 * (k // len(probe))
                                               for k, f in enumerate(order)}))

    runs = ([_run(vals, names, _hint)] if hinted else []) + [assigned(p) for p in _PROBES]
    try:
        traced = op.trace(runs + [assigned(_SMALL)])
    except _C.OpError:
        traced = op.trace(runs)

    def build(e):
        if isinstance(e, int):
            return e
        if e[0] == "input":
            _, arg, item, dim = e
            v = vals[arg]
            if isinstance(v, (list, tuple)):
                v = v[item]
            return v if dim < 0 else v.shape[dim]
        a, b = build(e[1]), build(e[2])
        return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "div": lambda: a // b,
                "ceil_div": lambda: -((-a) // b), "mod": lambda: a % b, "min": lambda: torch.sym_min(a, b),
                "max": lambda: torch.sym_max(a, b)}[e[0]]()

    return [([build(e) for e in dims], dtype) for dtype, dims in traced]


def _make_fake(op):
    infer = op.infer
    names = [a["name"] for a in op.arg_info]
    results = op.results

    def fake(*args, **kwargs):
        vals = _bind(names, args, kwargs)
        if any(True for v in vals for _ in _symints(v)):
            metas = _symbolic_metas(op, names, vals)
        else:
            metas = infer(*args, **kwargs)
        device = next(_tensors_in(vals), None)
        device = device.device if device is not None else "cpu"
        outs = tuple(vals[alias] if alias is not None else
                     torch.empty(sizes, dtype=_NAME_TO_DTYPE[dtype], device=device)
                     for (_, alias), (sizes, dtype) in zip(results, metas))
        return None if not outs else outs[0] if len(outs) == 1 else outs

    fake.__name__ = f"{op.name}_fake"
    fake.__qualname__ = fake.__name__
    return fake


# ---------------------------------------------------------------------------
# Registration.

def _check_no_grad(op, mutated):
    """An in-place op on a tensor that autograd tracks would leave wrong
    gradients behind (torch itself only refuses leaves)."""
    names = [a["name"] for a in op.arg_info]

    def check(vals):
        if not torch.is_grad_enabled():
            return
        for i in mutated:
            v = vals[i]
            for t in (v if isinstance(v, (list, tuple)) else (v,)):
                if isinstance(t, torch.Tensor) and t.requires_grad:
                    raise OpArgumentError(
                        f"op '{op.qualname}': argument '{names[i]}' is written in place but requires grad; "
                        "autograd cannot follow an in-place opcore op: call it under torch.no_grad() (as "
                        "optimizer steps do) or on a tensor that does not require grad")
    return check


def _internal_schema(op):
    """The schema of the internal op behind a `-> Tensor(a!)` op: the same
    arguments, only the fresh results."""
    head, _ = op.schema.rsplit("->", 1)
    fresh = [f"Tensor {n}".strip() for n, alias in op.results if alias is None]
    rets = "()" if not fresh else fresh[0] if len(fresh) == 1 else "(" + ", ".join(fresh) + ")"
    return f"_oc_{head.strip()} -> {rets}"


def register_op(op):
    """Define `op` (an opcore._C.Op) in torch.library: schema, CPU kernel
    (the C op), fake implementation (the C shape function). Idempotent."""
    with _lock:
        if op.qualname in _registered:
            return getattr(getattr(torch.ops, op.library), op.name)
        ns = op.library
        tlib = _torch_libs.get(ns)
        if tlib is None:
            tlib = torch.library.Library(ns, "FRAGMENT")
            _torch_libs[ns] = tlib
        names = [a["name"] for a in op.arg_info]
        mutated = [i for i, a in enumerate(op.arg_info) if a["mutable"]]
        aliased = any(alias is not None for _, alias in op.results)
        tags = (torch.Tag.pt2_compliant_tag,)
        try:
            tlib.define(op.schema, tags=tags)
            if aliased:
                tlib.define(_internal_schema(op), tags=tags)
        except RuntimeError as e:
            raise RuntimeError(f"opcore: cannot define {op.qualname} in torch ({e}); is an op of that name "
                               "already registered by another extension?") from e
        kernel = op
        if mutated:
            check = _check_no_grad(op, mutated)

            def kernel(*args, **kwargs):
                check(_bind(names, args, kwargs))
                return op(*args, **kwargs)
        if not aliased:
            # the C kernel without Python (in-place ops keep the Python kernel:
            # its requires_grad check has no counterpart in the stable ABI)
            if mutated or not _torch_native.register(op):
                tlib.impl(op.name, kernel, "CPU")
            torch.library.register_fake(op.qualname, _make_fake(op), lib=tlib)
        else:
            # torch functionalizes the internal `-> ()` op; the public one
            # decomposes into it and returns the mutated arguments.
            internal = f"_oc_{op.name}"
            fresh = [i for i, (_, alias) in enumerate(op.results) if alias is None]

            def internal_kernel(*args, **kwargs):
                out = kernel(*args, **kwargs)
                out = out if isinstance(out, tuple) else (out,)
                picked = tuple(out[i] for i in fresh)
                return None if not picked else picked[0] if len(picked) == 1 else picked

            fake = _make_fake(op)

            def internal_fake(*args, **kwargs):
                out = fake(*args, **kwargs)
                out = out if isinstance(out, tuple) else (out,)
                picked = tuple(out[i] for i in fresh)
                return None if not picked else picked[0] if len(picked) == 1 else picked

            impl_op = getattr(getattr(torch.ops, ns), internal)

            def composite(*args, **kwargs):
                made = impl_op(*args, **kwargs)
                made = iter(made if isinstance(made, tuple) else (made,) if made is not None else ())
                vals = _bind(names, args, kwargs)
                outs = tuple(vals[alias] if alias is not None else next(made) for _, alias in op.results)
                return outs[0] if len(outs) == 1 else outs

            tlib.impl(internal, internal_kernel, "CPU")
            torch.library.register_fake(f"{ns}::{internal}", internal_fake, lib=tlib)
            tlib.impl(op.name, composite, "CompositeImplicitAutograd")
        _registered[op.qualname] = op
        return getattr(getattr(torch.ops, ns), op.name)


def register_library(lib):
    """Register every op of a loaded opcore Library with torch."""
    for op in lib.ops.values():
        register_op(op)


def unregister_library(name):
    """Remove every op of library `name` from torch (before a reload or on
    unload): the torch.library fragment that defined them is destroyed."""
    with _lock:
        _torch_native.unregister(name)
        tlib = _torch_libs.pop(name, None)
        if tlib is not None:
            tlib._destroy()
        for qualname in [q for q in _registered if q.split("::", 1)[0] == name]:
            del _registered[qualname]


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


def _backward_plan(fwd_schema, bwd_schema):
    """How each backward argument is fed (OPLANG's convention): a list of
    ("input", i) | ("result", i) | ("grad", i) | ("default",), or None when the
    arguments cannot all be bound by name."""
    inputs = {a.name: i for i, a in enumerate(fwd_schema.arguments)}
    rets = [r.name for r in fwd_schema.returns]
    results = {n: i for i, n in enumerate(rets) if n}
    plan = []
    for a in bwd_schema.arguments:
        n = a.name
        m = re.fullmatch(r"grad(\d+)", n)
        if n in inputs:
            plan.append(("input", inputs[n]))
        elif n in results:
            plan.append(("result", results[n]))
        elif n == "grad" and len(rets) == 1:
            plan.append(("grad", 0))
        elif n.startswith("grad_") and n[5:] in results:
            plan.append(("grad", results[n[5:]]))
        elif m and int(m.group(1)) < len(rets):
            plan.append(("grad", int(m.group(1))))
        elif a.has_default_value():
            plan.append(("default",))
        else:
            return None
    return plan


def _grad_targets(fwd_schema, bwd_returns, tensor_idx):
    """The forward input each backward result is the gradient of."""
    inputs = {a.name: i for i, a in enumerate(fwd_schema.arguments)}
    named = [r.name[5:] if r.name and r.name.startswith("grad_") else None for r in bwd_returns]
    if bwd_returns and all(n in inputs for n in named):
        return [inputs[n] for n in named]
    return tensor_idx[:len(bwd_returns)]


def _keyword_params(fn, names):
    """The names among `names` that fn accepts as keyword arguments."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return set()
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return set(names)
    by_name = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {n for n in names if n in params and params[n].kind in by_name}


def register_autograd(forward, backward):
    """Make op `forward` differentiable with `backward`, in one line.

    forward: 'library::op' (or torch.ops.library.op).
    backward: an op 'library::op_backward', bound BY NAME: an argument named
        like a forward input gets that input (tensors and the non-tensor
        values the forward was called with), one named like a forward result
        gets the saved result, `grad` gets the incoming gradient of a
        single-result forward, `grad_<result name>` (or `grad<i>`) that of a
        result of a multi-result one. Its results are the gradients of the
        forward's tensor inputs: by name (`grad_<input>`) or in order. If the
        arguments cannot be bound by name, it is called the seeds' way:
        backward(grad, *tensor_inputs).
        Or a Python callable backward(*grads, *tensor_inputs, **non_tensor_inputs)
        (the non-tensor inputs it names as parameters, by keyword; Tensor[]
        inputs come after the Tensor ones) returning a Tensor (the first
        tensor input's gradient) or a tuple with one gradient (a list for a
        Tensor[] input; or None) per tensor input.
    Every gradient is checked against its input's shape and dtype.
    """
    fwd = _resolve(forward)
    schema = fwd._schema
    args = schema.arguments
    n_inputs = len(args)
    tensor_idx = [i for i, a in enumerate(args) if _is_tensor_type(a.type)]
    list_idx = [i for i, a in enumerate(args) if _is_tensor_list_type(a.type)]
    if not tensor_idx and not list_idx:
        raise ValueError(f"{fwd.name()} has no Tensor input to differentiate")
    is_op = isinstance(backward, (str, torch._ops.OpOverload, torch._ops.OpOverloadPacket))
    bwd = _resolve(backward) if is_op else backward
    if not callable(bwd):
        raise TypeError("backward must be an op name or a callable")
    plan = _backward_plan(schema, bwd._schema) if is_op else None
    keywords = set() if is_op else _keyword_params(bwd, [a.name for i, a in enumerate(args)
                                                          if i not in tensor_idx and i not in list_idx])
    targets = _grad_targets(schema, bwd._schema.returns, tensor_idx) if is_op else tensor_idx + list_idx
    need_results = plan is not None and any(p[0] == "result" for p in plan)
    fname = fwd.name()

    def setup_context(ctx, inputs, output):
        tensors = [inputs[i] if isinstance(inputs[i], torch.Tensor) else None for i in tensor_idx]
        outs = (output if isinstance(output, tuple) else (output,)) if need_results else ()
        ctx.none_inputs = [t is None for t in tensors]
        ctx.save_for_backward(*[t for t in tensors if t is not None], *outs)
        ctx.n_outs = len(outs)
        ctx.others = {i: inputs[i] for i in range(n_inputs) if i not in tensor_idx}
        ctx.input_meta = {i: (tuple(inputs[i].shape), inputs[i].dtype) for i in tensor_idx
                          if isinstance(inputs[i], torch.Tensor)}

    def saved_inputs(ctx):
        saved = list(ctx.saved_tensors)
        outs = saved[len(saved) - ctx.n_outs:] if ctx.n_outs else []
        it = iter(saved[:len(saved) - ctx.n_outs])
        vals = dict(ctx.others)
        for i, none in zip(tensor_idx, ctx.none_inputs):
            vals[i] = None if none else next(it)
        return vals, outs

    def check(i, g, ctx):
        if g is None or i not in ctx.input_meta:
            return g
        shape, dtype = ctx.input_meta[i]
        if not isinstance(g, torch.Tensor) or tuple(g.shape) != shape or g.dtype != dtype:
            got = f"{type(g).__name__}" if not isinstance(g, torch.Tensor) else f"{g.dtype} {list(g.shape)}"
            raise RuntimeError(f"opcore: backward of {fname} returned a gradient for input "
                               f"'{args[i].name}' of {got}, expected {dtype} {list(shape)}")
        return g

    def backward_fn(ctx, *grads):
        vals, outs = saved_inputs(ctx)
        if plan is not None:
            call_args = {}
            for a, p in zip(bwd._schema.arguments, plan):
                if p[0] == "input":
                    call_args[a.name] = vals[p[1]]
                elif p[0] == "result":
                    call_args[a.name] = outs[p[1]]
                elif p[0] == "grad":
                    g = grads[p[1]]
                    call_args[a.name] = g if g is not None else torch.zeros_like(outs[p[1]] if outs else vals[tensor_idx[0]])
            g = bwd(**call_args)
        else:
            tensors = [vals[i] for i in tensor_idx] + [vals[i] for i in list_idx]
            g = bwd(*grads, *tensors, **{args[i].name: vals[i] for i in ctx.others if args[i].name in keywords})
        g = g if isinstance(g, (tuple, list)) else (g,)
        if len(g) > len(targets) and not is_op:
            raise RuntimeError(f"opcore: backward of {fname} returned {len(g)} gradients for "
                               f"{len(targets)} tensor inputs")
        out = [None] * n_inputs
        for i, gi in zip(targets, g):
            out[i] = None if vals.get(i, 0) is None else check(i, gi, ctx)
        return tuple(out)

    backward_fn.__name__ = f"{fname.split('::')[-1]}_backward_fn"
    torch.library.register_autograd(fname, backward_fn, setup_context=setup_context)
    # An earlier trace (torch.compile) may have cached "no autograd kernel"
    # in the op's Python-dispatcher cache: forget it.
    _clear_dispatch_cache(fwd)
    return fwd


def _clear_dispatch_cache(overload):
    cache = getattr(overload, "_dispatch_cache", None)
    if cache is not None:
        cache.clear()
