"""Attributes (upstream's attrs.py): an array attribute. Upstream's
handler is cpu_examples' array_attr; so is this port's.

dictionary_attr is not here: opcore has no dictionary of named attributes
(an op's arguments are its schema's); see ../README.md.
"""
from jax_ffi_example.cpu_examples import array_attr  # noqa: F401
