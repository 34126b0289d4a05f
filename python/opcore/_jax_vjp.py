"""opcore.jax.with_vjp: a forward op and its backward as a jax.custom_vjp.

The backward is bound the way OPLANG's backward-binding convention says
(the same as opcore.torch.register_autograd): by name, then positionally;
every gradient it returns is checked against its input's shape and dtype.
"""
from __future__ import annotations

import re

import numpy as np

import jax
import jax.numpy as jnp

from opcore import _jax_vma
from opcore._C import MISSING

_GRAD_I = re.compile(r"grad(\d+)")


class _Ctx:
    """What one backward pass has: the forward's bound values (schema
    order), its results and their incoming gradients."""

    def __init__(self, fwd, vals, outs, cts):
        self.fwd, self.vals, self.outs, self.cts = fwd, vals, outs, cts


def _results_tuple(r) -> tuple:
    if r is None:
        return ()
    return tuple(r) if isinstance(r, tuple) else (r,)


def _bind_by_name(bwd, ctx: _Ctx, missing):
    """Keyword arguments for the backward op, or None when one of its
    required arguments has no counterpart (then the positional form)."""
    fm = ctx.fwd._meta
    res_names = {name: i for i, (name, _) in enumerate(fm.results) if name}
    nres = len(fm.results)
    kw = {}
    for a in bwd._meta.args:
        n = a.name
        if n in fm.by_name:
            fa = fm.by_name[n]
            v = ctx.vals[fa.index]
            kw[n] = fa.default if v is missing else v  # the forward's value, not the backward's default
        elif n in res_names:
            kw[n] = ctx.outs[res_names[n]]
        elif n == "grad" and nres == 1:
            kw[n] = ctx.cts[0]
        elif n.startswith("grad_") and n[5:] in res_names:
            kw[n] = ctx.cts[res_names[n[5:]]]
        elif _GRAD_I.fullmatch(n) and int(n[4:]) < nres:
            kw[n] = ctx.cts[int(n[4:])]
        elif not a.has_default:
            return None
    return kw


def _run_op(bwd, ctx: _Ctx, missing) -> dict:
    """Run a backward op; {forward tensor-argument index: gradient}."""
    fm = ctx.fwd._meta
    kw = _bind_by_name(bwd, ctx, missing)
    if kw is not None:
        got = _results_tuple(bwd(**kw))
    else:  # the seeds' positional form: backward(grad, *tensor_inputs)
        got = _results_tuple(bwd(*ctx.cts, *[ctx.vals[a.index] for a in fm.tensor_args]))
    # results named grad_<input> go to that input; the others positionally
    # over the forward's Tensor / Tensor? inputs
    singles = [a for a in fm.tensor_args if not a.is_list]
    out = {}
    for k, ((name, _), g) in enumerate(zip(bwd._meta.results, got)):
        a = fm.by_name.get(name[5:]) if name.startswith("grad_") else None
        if a is None or not a.is_tensor:
            if k >= len(singles):
                raise ValueError(f"opcore.jax.with_vjp: backward '{bwd.qualname}' of '{fm.qualname}' "
                                 f"returns {len(got)} results, but the forward has only "
                                 f"{len(singles)} Tensor inputs ({', '.join(x.name for x in singles)})")
            a = singles[k]
        out[fm.tensor_args.index(a)] = g
    return out


def _check(fm, bwd_name, a, x, g, item=None):
    """Gradient `g` for input `x` (argument `a`): shape and dtype must
    match; None means zero. Adjusted to x's varying manual axes."""
    if g is None or x is None:
        return None
    where = f"input '{a.name}'" + (f" item {item}" if item is not None else "")
    if not hasattr(g, "shape") or not hasattr(g, "dtype"):
        raise ValueError(f"opcore.jax.with_vjp: op '{fm.qualname}': the backward {bwd_name} returned "
                         f"{type(g).__name__} as the gradient of {where}, expected an array of shape "
                         f"{tuple(x.shape)} and dtype {np.dtype(x.dtype)}")
    if tuple(g.shape) != tuple(x.shape) or np.dtype(g.dtype) != np.dtype(x.dtype):
        raise ValueError(f"opcore.jax.with_vjp: op '{fm.qualname}': the backward {bwd_name} returned "
                         f"a gradient of shape {tuple(g.shape)} and dtype {np.dtype(g.dtype)} for "
                         f"{where}, expected shape {tuple(x.shape)} and dtype {np.dtype(x.dtype)} "
                         "(the input's)")
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        return None  # integer inputs have no gradient
    gv, xv = _jax_vma.vma(g), _jax_vma.vma(x)
    if gv - xv:  # the input was made varying for the call: the transpose sums
        g = jax.lax.psum(g, tuple(sorted(gv - xv)))
    return _jax_vma.to_varying(g, xv)


def _checked(fm, bwd_name, a, x, g):
    if x is None:
        return None
    if a.is_list:
        if g is None:
            return None
        if not isinstance(g, (list, tuple)) or len(g) != len(x):
            raise ValueError(f"opcore.jax.with_vjp: op '{fm.qualname}': the backward {bwd_name} must "
                             f"return a list of {len(x)} gradients for Tensor[] input '{a.name}', "
                             f"got {type(g).__name__}")
        return [_check(fm, bwd_name, a, xi, gi, k) for k, (xi, gi) in enumerate(zip(x, g))]
    return _check(fm, bwd_name, a, x, g)


def _saved_params(fn, fm) -> tuple:
    """The keyword-only parameters of callable backward `fn` that receive
    the forward's saved results: `results` (all of them, a tuple) and those
    named after a named result (layer_norm's `mean`, `rstd`)."""
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature
        return ()
    names = {name for name, _ in fm.results if name} | {"results"}
    return tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name in names)


def _saved_kwargs(fm, params, outs) -> dict:
    by_name = {name: outs[i] for i, (name, _) in enumerate(fm.results) if name}
    return {p: tuple(outs) if p == "results" else by_name[p] for p in params}


def _name(entry) -> str:
    q = getattr(entry, "qualname", None)
    return f"'{q}'" if q else f"'{getattr(entry, '__name__', repr(entry))}'"


def make(fwd, entries: list, op_type):
    """The custom_vjp function for forward `fwd` (an opcore.jax.Op); entries
    that are ops are instances of `op_type` (opcore.jax.Op), the rest
    callables or None."""
    fm = fwd._meta
    tensor_args = fm.tensor_args
    if fm.mutated:
        raise TypeError(f"opcore.jax.with_vjp: '{fm.qualname}' writes its arguments in place; "
                        "differentiate an op without Tensor(a!) arguments")
    if not tensor_args:
        raise TypeError(f"opcore.jax.with_vjp: '{fm.qualname}' has no tensor inputs")
    per_input = len(entries) == len(tensor_args)
    if not per_input and len(entries) != 1:
        raise TypeError(
            f"opcore.jax.with_vjp: '{fm.qualname}' has {len(tensor_args)} tensor inputs "
            f"({', '.join(a.name for a in tensor_args)}); give one backward for all of them, or "
            f"one backward per input (None for no gradient), got {len(entries)}")
    if not per_input and entries[0] is None:
        raise TypeError("opcore.jax.with_vjp: the backward is None")
    for i, e in enumerate(entries):
        covers = [tensor_args[i]] if per_input else tensor_args
        lists = [a.name for a in covers if a.is_list]
        if isinstance(e, op_type) and lists:
            raise TypeError(f"opcore.jax.with_vjp: '{fm.qualname}' takes a Tensor[] ({lists[0]}): "
                            "an op cannot return its gradients (a list); use a Python callable, "
                            "or None for no gradient")

    saved = [None if e is None or isinstance(e, op_type) else _saved_params(e, fm) for e in entries]

    def backward(vals, outs, cts):
        ctx = _Ctx(fwd, vals, outs, cts)
        tensors = [vals[a.index] for a in tensor_args]
        grads = [None] * len(tensor_args)
        for i, e in enumerate(entries):
            if e is None:
                continue
            if isinstance(e, op_type):
                got = _run_op(e, ctx, MISSING)
                if per_input and len(entries) > 1:
                    if i not in got and len(got) == 1:
                        got = {i: next(iter(got.values()))}
                    if i not in got:
                        raise ValueError(f"opcore.jax.with_vjp: backward '{e.qualname}' gives no "
                                         f"gradient for input '{tensor_args[i].name}' of '{fm.qualname}'")
                    grads[i] = got[i]
                else:
                    for k, g in got.items():
                        grads[k] = g
            else:
                g = e(*cts, *tensors, **_saved_kwargs(fm, saved[i], outs))
                if per_input:
                    grads[i] = g
                else:
                    gs = list(g) if isinstance(g, (tuple, list)) and len(tensor_args) > 1 else [g]
                    if len(gs) != len(tensor_args):
                        raise ValueError(f"opcore.jax.with_vjp: the backward {_name(e)} of '{fm.qualname}' "
                                         f"returned {len(gs)} gradients, expected one per tensor input "
                                         f"({', '.join(a.name for a in tensor_args)})")
                    grads = gs
        name = lambda i: _name(entries[i if per_input else 0])  # noqa: E731
        return tuple(_checked(fm, name(i), a, x, g)
                     for i, (a, x, g) in enumerate(zip(tensor_args, tensors, grads)))

    templates = {}

    def make_vjp(key):
        f = templates.get(key)
        if f is not None:
            return f

        @jax.custom_vjp
        def f(*tensors):
            return fwd._call(fwd._full(key, tensors))

        def f_fwd(*tensors):
            out = fwd._call(fwd._full(key, tensors))
            return out, (tensors, out)

        def f_bwd(res, ct):
            tensors, out = res
            outs = out if isinstance(out, tuple) else (out,)
            cts = ct if isinstance(out, tuple) else (ct,)
            return backward(fwd._full(key, tensors), outs, cts)

        f.defvjp(f_fwd, f_bwd)
        templates[key] = f
        return f

    def wrapped(*args, **kwargs):
        vals = fwd._bound(args, kwargs)
        key = fwd._key(vals)
        tensors = [vals[a.index] for a in tensor_args]
        vma = _jax_vma.vma_union(_jax_vma.flatten(tensors))
        if vma:  # outside the custom_vjp, so that JAX transposes the cast itself
            tensors = [None if t is None else [_jax_vma.to_varying(x, vma) for x in t] if isinstance(t, list)
                       else _jax_vma.to_varying(t, vma) for t in tensors]
        return make_vjp(key)(*tensors)

    wrapped.__name__ = fwd.__name__
    wrapped.__doc__ = f"{fwd.__doc__} (with custom_vjp)"
    wrapped.op = fwd
    return wrapped
