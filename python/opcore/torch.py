"""PyTorch integration: opcore ops as first-class torch ops.

Loading a library (opcore.custom_op.load / load_library) calls
register_library(), which for each op:

* defines it with its schema in torch.library (namespace = the library's
  name), tagged ``pt2_compliant_tag`` so torch.compile and torch.export
  treat it as a well-behaved custom op;
* registers the C op itself as the CPU kernel: inputs are viewed in place
  (any strides, requires_grad accepted), the output is allocated by
  torch.empty from the shape function's answer, the kernel runs with the
  GIL released;
* registers a fake (meta) implementation backed by the C shape function,
  so FakeTensor tracing (torch.compile, torch.export, opcheck) works.

Autograd: the seeds' autograd.Function pattern works as is; or pair a
forward op with its backward op in one line:

    opcore.torch.register_autograd("my_ops::relu_forward", "my_ops::relu_backward")

after which torch.ops.my_ops.relu_forward is differentiable.
"""
import threading

import torch

from opcore import _C, _torch_native

__all__ = ["register_library", "register_op", "register_autograd", "to_torch_dtype", "registered_ops"]

# torch dtypes in oc_dtype order (include/opcore/dtype.h)
_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
           torch.int32, torch.int64, torch.uint8, torch.bool)
_C._set_torch(torch.Tensor, torch.empty, _DTYPES)
_NAME_TO_DTYPE = dict(zip(_C.dtype_names(), _DTYPES))

_lock = threading.RLock()
_torch_libs = {}    # namespace -> torch.library.Library("ns", "FRAGMENT")
_registered = {}    # qualname -> opcore._C.Op
_autograd_libs = {}  # qualname -> kept alive


def to_torch_dtype(name):
    """The torch dtype for an opcore dtype name ('float32', ...)."""
    return _NAME_TO_DTYPE[name]


def registered_ops():
    """{qualname: opcore._C.Op} of the ops registered with torch."""
    with _lock:
        return dict(_registered)


def _make_fake(op):
    infer = op.infer
    name_to_dtype = _NAME_TO_DTYPE

    def fake(*args, **kwargs):
        (sizes, dtype), = infer(*args, **kwargs)
        device = next((a.device for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), "cpu")
        return torch.empty(sizes, dtype=name_to_dtype[dtype], device=device)

    fake.__name__ = f"{op.name}_fake"
    fake.__qualname__ = fake.__name__
    return fake


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
        try:
            tlib.define(op.schema, tags=(torch.Tag.pt2_compliant_tag,))
        except RuntimeError as e:
            raise RuntimeError(f"opcore: cannot define {op.qualname} in torch ({e}); is an op of that name "
                               "already registered by another extension?") from e
        if not _torch_native.register(op):  # the C kernel without Python, else the Python kernel
            tlib.impl(op.name, op, "CPU")
        torch.library.register_fake(op.qualname, _make_fake(op), lib=tlib)
        _registered[op.qualname] = op
        return getattr(getattr(torch.ops, ns), op.name)


def register_library(lib):
    """Register every op of a loaded opcore Library with torch."""
    for op in lib.ops.values():
        register_op(op)


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


def register_autograd(forward, backward):
    """Make op `forward` differentiable with `backward`, in one line.

    forward: 'library::op' (or torch.ops.library.op).
    backward: another op 'library::op_backward', called as
        backward(grad, *tensor_inputs_of_forward) and returning the gradient
        of forward's first tensor input (the seeds' relu_backward(grad, x));
        or a Python callable with the same arguments returning a Tensor (the
        first tensor input's gradient) or a tuple with one gradient (or None)
        per tensor input.
    The forward's tensor inputs are saved for the backward.
    """
    fwd = _resolve(forward)
    bwd = _resolve(backward) if isinstance(backward, (str, torch._ops.OpOverload, torch._ops.OpOverloadPacket)) \
        else backward
    if not callable(bwd):
        raise TypeError("backward must be an op name or a callable")
    args = fwd._schema.arguments
    tensor_idx = [i for i, a in enumerate(args) if isinstance(a.type, torch.TensorType)]
    if not tensor_idx:
        raise ValueError(f"{fwd.name()} has no Tensor input to differentiate")
    n_inputs = len(args)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*[inputs[i] for i in tensor_idx])

    def backward_fn(ctx, grad):
        saved = ctx.saved_tensors
        g = bwd(grad, *saved)
        grads = [None] * n_inputs
        if isinstance(g, (tuple, list)):
            if len(g) > len(tensor_idx):
                raise RuntimeError(f"backward of {fwd.name()} returned {len(g)} gradients for "
                                   f"{len(tensor_idx)} tensor inputs")
            for k, gi in enumerate(g):
                grads[tensor_idx[k]] = gi
        else:
            grads[tensor_idx[0]] = g
        return tuple(grads)

    backward_fn.__name__ = f"{fwd._schema.name.split('::')[-1]}_backward_fn"
    torch.library.register_autograd(fwd.name(), backward_fn, setup_context=setup_context)
    # An earlier trace (torch.compile) may have cached "no autograd kernel"
    # in the op's Python-dispatcher cache: forget it.
    _clear_dispatch_cache(fwd)
    return fwd


def _clear_dispatch_cache(overload):
    cache = getattr(overload, "_dispatch_cache", None)
    if cache is not None:
        cache.clear()
