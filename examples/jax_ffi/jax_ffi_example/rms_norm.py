"""RMS normalisation with its custom_vjp pair (upstream's rms_norm.py,
JAX's FFI tutorial), on the opcore kernels of rms_norm/rms_norm.c.

Upstream implements float32 only in C++; the opcore kernels take every
float dtype (float32, float64, float16, bfloat16), so there is no dtype
check here: a wrong dtype is refused by the kernel with the op's name.
"""
from functools import partial

import jax

import opcore.jax

from jax_ffi_example import _build

_build.load("rms_norm", ["rms_norm.c"])
# broadcast_all: the kernels treat every leading axis as a batch axis, so
# vmap can call them once on the batched array (upstream: broadcast_fullrank)
_rms_norm = opcore.jax.op("jax_ffi_rms_norm::rms_norm", vmap_method="broadcast_all")
_rms_norm_fwd = opcore.jax.op("jax_ffi_rms_norm::rms_norm_fwd", vmap_method="broadcast_all")
_rms_norm_bwd = opcore.jax.op("jax_ffi_rms_norm::rms_norm_bwd", vmap_method="broadcast_all")


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def rms_norm(x, eps=1e-5):
    return _rms_norm(x, eps=float(eps))


def rms_norm_fwd(x, eps=1e-5):
    y, res = _rms_norm_fwd(x, eps=float(eps))
    return y, (res, x)


def rms_norm_bwd(eps, res, ct):
    del eps
    res, x = res
    return (_rms_norm_bwd(res, x, ct),)


rms_norm.defvjp(rms_norm_fwd, rms_norm_bwd)
