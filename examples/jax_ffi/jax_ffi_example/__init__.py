"""JAX's FFI examples (jax-ml/jax, examples/ffi/src/jax_ffi_example) ported
to opcore: each module builds (cached) and loads its opcore library and
exposes the same Python functions as upstream's module (see ../README.md)."""
