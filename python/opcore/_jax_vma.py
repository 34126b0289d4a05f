"""Varying manual axes (jax.shard_map) for opcore.jax: an op's results vary
over the axes any input varies over, so out_specs are checked the way they
are for jnp ops. Shared by opcore.jax, _jax_vjp and _jax_sharding (which
import it; it imports none of them)."""
from __future__ import annotations

import jax


def flatten(tensors: list) -> list:
    """The operands of bound tensor values: each array, each item of a list
    (Tensor[]), none for None."""
    return [x for t in tensors if t is not None for x in (t if isinstance(t, list) else [t])]


def vma_union(flat: list) -> frozenset:
    """The axes any of the arrays `flat` varies over."""
    return frozenset().union(*map(vma, flat))


def vma(x) -> frozenset:
    aval = jax.typeof(x)
    mat = getattr(aval, "mat", None)
    if mat is not None:
        return frozenset(mat.varying)
    return frozenset(getattr(aval, "vma", ()))


def to_varying(x, axes: frozenset):
    missing = axes - vma(x)
    return jax.lax.pcast(x, tuple(sorted(missing)), to="varying") if missing else x


def result_struct(shape, dtype, axes: frozenset, like=None):
    """A result's type; inside shard_map it varies over `axes` (the mesh
    comes from `like`, an operand)."""
    if not axes:
        return jax.ShapeDtypeStruct(shape, dtype)
    sharding = jax.sharding.NamedSharding(jax.typeof(like).sharding.mesh, jax.sharding.PartitionSpec())
    return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding,
                                manual_axis_type=jax.sharding.ManualAxisType(varying=axes))
