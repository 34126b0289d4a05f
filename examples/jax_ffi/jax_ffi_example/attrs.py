"""Attributes (upstream's attrs.py): an array attribute and a dictionary
of attributes. Upstream's handlers are cpu_examples' array_attr and
dictionary_attr; so are this port's.
"""
from jax_ffi_example.cpu_examples import array_attr, dictionary_attr  # noqa: F401
