"""Batch-sharded opcore ops: ``opcore.jax.op(name, batch_dims=...)``.

An op declared batch-separable (its result for a slice of the batch is the
slice of its result) runs per shard when its inputs are sharded along the
batch, instead of on inputs XLA gathers first:

  * explicit sharding (the axes of ``jax.make_mesh`` by default; the
    arrays' types carry the sharding): the call is wrapped in
    ``jax.shard_map`` over the mesh axes that shard the batch;
  * automatic sharding (``jax.sharding.Mesh`` with ``AxisType.Auto``, a
    ``NamedSharding`` given to ``jit``): the call is a
    ``jax.experimental.custom_partitioning`` function whose Shardy rule ties
    the batch dimension of every batched argument and result together;
    when XLA partitions the program, each device runs the op on its shard.

Everything else (one device, a batch the mesh does not divide, inside
``shard_map``, under ``opcore.jax.export``) is the plain custom call.
"""
from __future__ import annotations

import contextlib
import functools
import math
import threading

import numpy as np

import jax
from jax.sharding import NamedSharding, PartitionSpec as P

from opcore import _jax_dims, _jax_vma

_state = threading.local()


@contextlib.contextmanager
def exporting():
    """Inside: ops lower as plain custom calls (custom partitioning uses a
    Python callback at compile time, which jax.export cannot serialise)."""
    old = getattr(_state, "exporting", False)
    _state.exporting = True
    try:
        yield
    finally:
        _state.exporting = old


class BatchDims:
    """Where the batch is: a tuple of dimensions per tensor argument and per
    fresh result, () for one not batched (a mutated argument's result has
    its argument's). An op may have several batch dimensions, at any
    positions: the j-th of every batched tensor is the same batch axis
    (rms_norm over [B, T, D]: (0, 1) for x, its result and its [B, T]
    scale)."""

    def __init__(self, args: tuple, results: tuple):
        self.args, self.results = args, results

    @classmethod
    def parse(cls, meta, spec) -> "BatchDims":
        def one(v, what):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(f"opcore.jax.op('{meta.qualname}', batch_dims=...): {what}: expected "
                                 f"a dimension (int >= 0), a tuple of them, or None, got {v!r}")
            return v

        def check(v, what):
            """() / (d,) / (d0, d1, ...) from None, an int or a tuple."""
            if isinstance(v, (tuple, list)):
                dims = tuple(one(d, what) for d in v)
                if None in dims or len(set(dims)) != len(dims):
                    raise ValueError(f"opcore.jax.op('{meta.qualname}', batch_dims=...): {what}: the batch "
                                     f"dimensions must be distinct ints, got {v!r}")
                return dims
            return () if one(v, what) is None else (v,)

        names = meta.result_names
        if isinstance(spec, (int, tuple, list)) and not isinstance(spec, bool):
            dims = check(spec, "batch_dims")
            args = tuple(dims for _ in meta.tensor_args)
            fresh = tuple(dims for _ in meta.fresh)
        elif isinstance(spec, dict):
            known = {a.name for a in meta.tensor_args} | set(names)
            for k in spec:
                if k not in known:
                    raise ValueError(f"opcore.jax.op('{meta.qualname}', batch_dims=...): no tensor "
                                     f"argument or result '{k}' (tensor arguments: "
                                     f"{', '.join(a.name for a in meta.tensor_args)}; results: "
                                     f"{', '.join(names)})")
            args = tuple(check(spec.get(a.name), f"'{a.name}'") for a in meta.tensor_args)
            fresh = tuple(check(spec.get(names[i]), f"'{names[i]}'") for i in meta.fresh)
        else:
            raise TypeError(f"opcore.jax.op('{meta.qualname}', batch_dims=...): expected an int, a tuple "
                            f"of ints, or a dict of argument/result names to those, got {spec!r}")
        if all(not d for d in args):
            raise ValueError(f"opcore.jax.op('{meta.qualname}', batch_dims=...): no tensor argument "
                             "is batched")
        counts = {len(d) for d in (*args, *fresh) if d}
        if len(counts) != 1:
            raise ValueError(f"opcore.jax.op('{meta.qualname}', batch_dims=...): every batched tensor must "
                             f"have as many batch dimensions (the j-th of each is one batch axis), got "
                             f"{sorted(counts)}")
        return cls(args, fresh)

    @property
    def count(self) -> int:
        """The number of batch axes."""
        return max(len(d) for d in self.args)


def _flat_dims(bd: BatchDims, meta, tensors, mutated_only: bool = False) -> list:
    """The batch dimension of each operand (lists: each item), or of each
    mutated one."""
    out = []
    for a, t, d in zip(meta.tensor_args, tensors, bd.args):
        if t is not None and (a.mutable or not mutated_only):
            out += [d] * (len(t) if a.is_list else 1)
    return out


def _result_dims(bd: BatchDims, meta, tensors) -> list:
    """The batch dimension of each result, as the call returns them: fresh
    results, then each mutated operand's new value."""
    return list(bd.results) + _flat_dims(bd, meta, tensors, mutated_only=True)


def _check_results(op, leaves, rdims):
    names = [op._meta.result_names[i] for i in op._meta.fresh] + [a.name for a in op._meta.mutated]
    for k, (r, dims) in enumerate(zip(leaves, rdims)):
        for d in dims:
            if d >= r.ndim:
                raise ValueError(f"opcore.jax: op '{op.qualname}' (batch_dims): result "
                                 f"'{names[min(k, len(names) - 1)]}' has {r.ndim} dims, no batch dimension {d}")


def _spec(ndim: int, dims: tuple, axes: tuple) -> P:
    """The PartitionSpec of a tensor whose batch dimensions `dims` are
    sharded over `axes` (one entry per batch axis: mesh axes or None)."""
    parts = [None] * ndim
    for d, a in zip(dims, axes):
        parts[d] = a
    return P(*parts)


def _axes_tuple(axes) -> tuple:
    return axes if isinstance(axes, tuple) else (axes,)


def _unflatten(tensors, flat):
    it = iter(flat)
    return [None if t is None else [next(it) for _ in t] if isinstance(t, list) else next(it)
            for t in tensors]


def _batch_sizes(meta, flat, dims, count) -> tuple:
    """The size of each batch axis (the batched arguments must agree)."""
    out = []
    for j in range(count):
        sizes = {int(x.shape[d[j]]) for x, d in zip(flat, dims) if d and d[j] < x.ndim}
        if len(sizes) != 1 or any(d and d[j] >= x.ndim for x, d in zip(flat, dims)):
            raise ValueError(f"opcore.jax: op '{meta.qualname}' (batch_dims): the batched arguments "
                             f"disagree on the size of batch axis {j} or lack its dimension (sizes "
                             f"{sorted(sizes)})")
        out.append(sizes.pop())
    return tuple(out)


def _divides(mesh, axes, batch) -> bool:
    return all(a is None or b % math.prod(mesh.shape[m] for m in _axes_tuple(a)) == 0
               for a, b in zip(axes, batch))


def route(op, key: tuple, tensors: list):
    """The op's value computed per shard, or None for the plain call."""
    if getattr(_state, "exporting", False):
        return None
    meta = op._meta
    flat = _jax_vma.flatten(tensors)
    dims = _flat_dims(op.batch_dims, meta, tensors)
    if not flat or not all(_jax_dims.is_static(x.shape) for x in flat):
        return None
    if any(_jax_vma.vma(x) for x in flat):  # already inside shard_map: per-shard values
        return None
    count = op.batch_dims.count
    batch = _batch_sizes(meta, flat, dims, count)
    explicit = _explicit_axes(flat, dims, count)
    if explicit is not None:
        mesh, axes = explicit
        if not _divides(mesh, axes, batch):
            return None
        return _shard_mapped(op, key, tensors, flat, dims, mesh, axes)
    if jax.device_count() > 1:
        return _partitioned(op, key, _shapes(flat))(*flat)
    return None


def _plain(op, key, template, *operands):
    """(run, result structure, result leaves, their batch dims): run is the
    op on flat operands as the plain custom call; the results are those of
    `operands` (arrays or shape structs), checked against batch_dims."""
    def run(*xs):
        return op._lower(key, _unflatten(template, xs))

    out = jax.eval_shape(run, *operands)  # result ranks, from the shape function
    leaves = jax.tree_util.tree_leaves(out)
    rdims = _result_dims(op.batch_dims, op._meta, template)
    _check_results(op, leaves, rdims)
    return run, out, leaves, rdims


def _sharded_axes(specs, dims, count, usable=lambda axes: True) -> tuple:
    """For each batch axis j, the mesh axes that shard it in the first
    batched operand whose spec shards its dimension (None: unsharded).
    `specs` holds each operand's PartitionSpec (or None)."""
    out = []
    for j in range(count):
        found = None
        for spec, d in zip(specs, dims):
            if d and spec is not None and len(spec) > d[j] and spec[d[j]] is not None and usable(spec[d[j]]):
                found = spec[d[j]]
                break
        out.append(found)
    return tuple(out)


def _explicit_axes(flat, dims, count):
    """(mesh, axes per batch axis) if a batched argument's type says a batch
    dimension is sharded over explicit mesh axes."""
    shardings = [getattr(jax.typeof(x), "sharding", None) for x in flat]
    meshes = [sh.mesh for sh, d in zip(shardings, dims) if d and getattr(sh, "spec", None) is not None]
    if not meshes:
        return None
    mesh = meshes[0]
    types = dict(zip(mesh.axis_names, mesh.axis_types))

    def explicit(axes):
        return all(str(types.get(a, "")).endswith("Explicit") for a in _axes_tuple(axes))

    axes = _sharded_axes([getattr(sh, "spec", None) for sh in shardings], dims, count, explicit)
    return (mesh, axes) if any(a is not None for a in axes) else None


def _shard_mapped(op, key, tensors, flat, dims, mesh, axes):
    """The op under jax.shard_map over the explicit mesh axes `axes` that
    shard the batch: each device runs it on its slice."""
    in_specs = tuple(_spec(x.ndim, d, axes) for x, d in zip(flat, dims))
    run, shapes, leaves, rdims = _plain(op, key, tensors, *flat)
    out_specs = [_spec(s.ndim, d, axes) for s, d in zip(leaves, rdims)]

    def local(*xs):
        return jax.tree_util.tree_leaves(run(*xs))

    names = {m for a in axes if a is not None for m in _axes_tuple(a)}
    got = jax.shard_map(local, mesh=mesh, in_specs=in_specs, out_specs=out_specs, axis_names=names)(*flat)
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shapes), got)


def _shapes(flat) -> tuple:
    return tuple((tuple(x.shape), np.dtype(x.dtype)) for x in flat)


def forget():
    """Drop the cached partitioned calls (after unloading a library)."""
    _partitioned.cache_clear()


@functools.lru_cache(maxsize=1024)
def _partitioned(op, key: tuple, shapes: tuple):
    """A custom_partitioning function running op on flat operands of these
    shapes; XLA's partitioner asks it how to split, and it splits only
    along the batch."""
    from jax.custom_batching import custom_vmap
    from jax.experimental.custom_partitioning import custom_partitioning

    meta = op._meta
    # the tensors' structure from the key: None (absent), -1 (one) or a length
    template = []
    for a in meta.tensor_args:
        k = key[a.index]
        template.append(None if k is None else [0] * k if a.is_list else 0)
    dims = _flat_dims(op.batch_dims, meta, template)
    run, out_struct, leaves, rdims = _plain(op, key, template, *[jax.ShapeDtypeStruct(s, d) for s, d in shapes])

    f = custom_partitioning(run)

    # custom_partitioning has no vmap rule: under vmap, the plain call is vmapped
    @custom_vmap
    def g(*xs):
        return f(*xs)

    @g.def_vmap
    def g_vmap(axis_size, in_batched, *xs):
        out = jax.vmap(run, in_axes=[0 if b else None for b in in_batched], axis_size=axis_size)(*xs)
        return out, jax.tree_util.tree_map(lambda _: True, out)

    count = op.batch_dims.count
    batch = tuple(next(s[d[j]] for (s, _), d in zip(shapes, dims) if d) for j in range(count))

    def batch_axes(mesh, arg_shapes):
        """For each batch axis, the mesh axes sharding it in the first
        batched operand whose spec shards it; None where they do not divide
        it (that axis stays whole)."""
        axes = _sharded_axes([getattr(s.sharding, "spec", None) for s in arg_shapes], dims, count)
        return tuple(a if a is not None and _divides(mesh, (a,), (b,)) else None for a, b in zip(axes, batch))

    def shardings(mesh, axes):
        args = tuple(NamedSharding(mesh, _spec(len(s), d, axes)) for (s, _), d in zip(shapes, dims))
        res = [NamedSharding(mesh, _spec(r.ndim, d, axes)) for r, d in zip(leaves, rdims)]
        return args, res

    def partition(mesh, arg_shapes, result_shape):
        axes = batch_axes(mesh, arg_shapes)
        args, res = shardings(mesh, axes)
        res_tree = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_struct), res)
        return mesh, run, res_tree, args

    def infer(mesh, arg_shapes, result_shape):
        _, res = shardings(mesh, batch_axes(mesh, arg_shapes))
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_struct), res)

    # Shardy: batch axis j is the shared factor "b<j>"; every other
    # dimension is its own factor that must stay replicated.
    others, k = [], 0

    def mapping(ndim, d):
        nonlocal k
        names = []
        for i in range(ndim):
            if i in d:
                names.append(f"b{d.index(i)}")
            else:
                names.append(f"f{k}")
                others.append(f"f{k}")
                k += 1
        return " ".join(names) if names else "()"

    ins = ", ".join(mapping(len(s), d) for (s, _), d in zip(shapes, dims))
    outs = ", ".join(mapping(r.ndim, d) for r, d in zip(leaves, rdims))
    rule = f"{ins} -> {outs}"
    f.def_partition(partition=partition, infer_sharding_from_operands=infer, sharding_rule=rule,
                    need_replication_factors=tuple(others))
    return g
