"""Every use of torch's internals by opcore.torch, in one module, behind one
switch.

opcore.torch's eager autograd fast path leans on torch internals: an
Autograd kernel registered with_keyset=True that redispatches below
autograd (``torch._C._after_autograd_keyset``,
``torch._C._AutoDispatchBelowAutograd``), checks for dispatch modes and
gradients in C (``torch._C._len_torch_dispatch_stack``,
``torch._C._any_requires_grad``) and an autograd.Function per pairing
written out as straight-line code (``exec``). Each is a private detail that
a torch release may change.

With the switch on -- ``OPCORE_TORCH_PUBLIC_API=1`` in the environment, or
``use_public_api(True)`` -- opcore.torch takes none of them: autograd pairs
register through ``torch.library.register_autograd`` (the route tensor-list
ops always take), slower per call but on public API only, and the native
kernels of in-place ops (src/python/torch_native.c) do not bump the version
counters of what they write (torch's C++ ``bump_version``, found by its
mangled name). Destroying a
torch.library.Library fragment (``Library._destroy``, for reloads) has no
public counterpart and is used either way, as is clearing the
OpOverload's Python-dispatcher cache (``_dispatch_cache``) after a pairing
is registered (a trace before it may have cached "no autograd kernel").
"""
import os

import torch

_public = os.environ.get("OPCORE_TORCH_PUBLIC_API", "") not in ("", "0")


def use_public_api(on=None):
    """Whether opcore.torch uses public torch.library APIs only (no torch
    internals); with `on`, set it first (for registrations made after).
    Defaults to $OPCORE_TORCH_PUBLIC_API."""
    global _public
    if on is not None:
        _public = bool(on)
    return _public


def destroy(lib):
    """Remove every registration a torch.library.Library fragment made."""
    lib._destroy()


def clear_dispatch_cache(overload):
    """Forget what the op's Python-dispatcher cache holds: an earlier trace
    (torch.compile) may have cached "no autograd kernel", whichever route
    registers the pairing (torch.library.register_autograd does not clear
    it either)."""
    cache = getattr(overload, "_dispatch_cache", None)
    if cache is not None:
        cache.clear()


_BELOW_AUTOGRAD = torch._C._after_autograd_keyset


def lean_autograd(pairing, c_op, c_bwd):
    """The Autograd kernel (with_keyset=True) of a pairing (opcore.torch's
    _Pairing) without tensor lists: an autograd.Function around the op's own
    kernel, binding the backward as the pairing says; specialized
    (_specialize) for the eager case. c_op / c_bwd: the forward's and the
    backward's C ops for direct calls, or None."""
    fwd, n = pairing.fwd, pairing.n
    # Plain CPU tensors and no dispatch mode: call the C op itself, as the
    # seeds' autograd.Function does (no second trip through the dispatcher);
    # anything else (FakeTensors under torch.compile, modes) is redispatched.
    Tensor, modes = torch.Tensor, torch._C._len_torch_dispatch_stack

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, keyset, kwargs, *args):
            if c_op is not None and not modes() and all(type(a) is Tensor and a.is_cpu
                                                        for a in args if isinstance(a, Tensor)):
                out = c_op(*args, **kwargs)
            else:
                with torch._C._AutoDispatchBelowAutograd():
                    out = fwd.redispatch(keyset & _BELOW_AUTOGRAD, *args, **kwargs)
            vals = args if not kwargs and len(args) == n else pairing.inputs(args, kwargs)
            pairing.save(ctx, vals, out)
            ctx.nargs = len(args)
            return out

        @staticmethod
        def backward(ctx, *grads):
            return (None, None, *pairing.grads(ctx, grads, tensors_only=True)[:ctx.nargs])

    Fn.__name__ = f"{pairing.fname.replace('::', '_')}_autograd"
    any_requires_grad = torch._C._any_requires_grad
    grad_enabled = torch.is_grad_enabled

    def autograd_kernel(keyset, *args, **kwargs):
        if grad_enabled() and any_requires_grad(*args, **kwargs):
            return Fn.apply(keyset, kwargs, *args)
        with torch._C._AutoDispatchBelowAutograd():
            return fwd.redispatch(keyset & _BELOW_AUTOGRAD, *args, **kwargs)

    return _specialize(autograd_kernel, pairing, c_op, c_bwd) or autograd_kernel


def _specialize(generic_kernel, pairing, c_op, c_bwd):
    """An Autograd kernel written out for this pairing: for plain CPU tensors
    (the eager case) it calls the C op directly and, when grad is needed, an
    autograd.Function whose forward and backward are straight-line code --
    what a hand-written autograd.Function around the op would do. Calls that
    do not fit (keyword arguments, defaults left out, FakeTensors, dispatch
    modes) go to the generic kernel. None when the binding is outside the
    common case (keyword-only backward arguments, a Python callable)."""
    if pairing.plan is None or pairing.call_kw or c_op is None:
        return None
    n, tensor_idx, nt = pairing.n, pairing.tensor_idx, len(pairing.tensor_idx)
    tpos = {i: k for k, i in enumerate(tensor_idx)}
    # the backward's arguments: (0, saved position) a tensor input, (1, index)
    # a non-tensor input, (2, saved position) a saved result, (3, index) a
    # gradient, (4, index) a default (passed: later arguments must not shift)
    feed, defaults = [], []
    for p, _ in pairing.call_pos:
        if p[0] == "input":
            feed.append((0, tpos[p[1]]) if p[1] in tpos else (1, p[1]))
        elif p[0] == "result":
            feed.append((2, nt + p[1]))
        elif p[0] == "grad":
            feed.append((3, p[1]))
        else:
            feed.append((4, len(defaults)))
            defaults.append(p[1])
    need_vals = any(kind == 1 for kind, _ in feed)
    # c_bwd, the backward op's C op, serves gradients that are plain tensors
    # (not FakeTensors under compiled autograd, say) outside create_graph=True
    # (where the backward op's own autograd applies): called directly, as
    # the forward's is.
    a = [f"a{i}" for i in range(n)]
    args = ", ".join(a) + ("," if n == 1 else "")
    # plain: CPU tensors (a meta tensor, say, goes through the dispatcher to its shape function)
    plain = " and ".join(f"({a[i]} is None or (type({a[i]}) is Tensor and {a[i]}.is_cpu))" for i in tensor_idx)
    res = "out if isinstance(out, tuple) else (out,)" if pairing.need_results else "()"
    ngrads = len(pairing.fwd._schema.returns)
    g = [f"g{i}" for i in range(ngrads)]
    call = []
    for kind, k in feed:
        if kind in (0, 2):
            call.append(f"s[{k}]")
        elif kind == 1:
            call.append(f"ctx.vals[{k}]")
        elif kind == 4:
            call.append(f"defaults[{k}]")
        else:
            zero = f"s[{nt + k}]" if pairing.need_results else "s[0]"
            call.append(f"({g[k]} if {g[k]} is not None else zeros_like({zero}))")
    outs = ["None"] * n
    grads = []
    for j, i in enumerate(pairing.targets):
        k = tpos.get(i)
        if k is None:
            continue
        grads += [f"        x{j} = r[{j}] if len(r) > {j} else None",
                  f"        if x{j} is not None and s[{k}] is not None and (type(x{j}) is not Tensor or "
                  f"x{j}.shape != s[{k}].shape or x{j}.dtype != s[{k}].dtype):",
                  f"            x{j} = check({i}, x{j}, s[{k}])",
                  f"        if s[{k}] is None:",
                  f"            x{j} = None"]
        outs[i] = f"x{j}"
    src = [f"class Fast(Function):",
           f"    @staticmethod",
           f"    def forward(ctx, {', '.join(a)}):",
           f"        out = c_op({', '.join(a)})",
           f"        ctx.save_for_backward({''.join(a[i] + ', ' for i in tensor_idx)}*({res}))",
           f"        ctx.vals = ({args})" if need_vals else "        pass",
           f"        return out",
           f"    @staticmethod",
           f"    def backward(ctx, {', '.join(g)}):",
           f"        s = ctx.saved_tensors",
           *([f"        if {' and '.join(f'type({x}) is Tensor and {x}.is_cpu' for x in g)} and not modes() "
              f"and not grad_enabled():",
              f"            r = c_bwd({', '.join(call)})",
              f"        else:",
              f"            r = bwd({', '.join(call)})"] if c_bwd is not None else
             [f"        r = bwd({', '.join(call)})"]),
           f"        r = r if isinstance(r, (tuple, list)) else (r,)",
           *grads,
           f"        return {', '.join(outs)}{',' if n == 1 else ''}",
           f"",
           f"def kernel(keyset, *args, **kwargs):",
           f"    if not kwargs and len(args) == {n}:",
           f"        {args} = args",
           f"        if {plain} and not modes():",
           f"            if grad_enabled() and any_requires_grad(*args):",
           f"                return Fast.apply(*args)",
           f"            return c_op(*args)",
           f"    return generic_kernel(keyset, *args, **kwargs)"]
    ns = dict(Function=torch.autograd.Function, generic_kernel=generic_kernel, c_op=c_op, Tensor=torch.Tensor,
              modes=torch._C._len_torch_dispatch_stack, grad_enabled=torch.is_grad_enabled,
              any_requires_grad=torch._C._any_requires_grad, bwd=pairing.bwd, c_bwd=c_bwd, zeros_like=torch.zeros_like,
              check=pairing._check, defaults=defaults)
    exec(compile("\n".join(src) + "\n", f"<opcore autograd {pairing.fname}>", "exec"), ns)
    ns["Fast"].__name__ = f"{pairing.fname.replace('::', '_')}_autograd"
    return ns["kernel"]
