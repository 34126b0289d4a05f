"""Building and loading the examples' opcore libraries (cached by content)."""
import os

from opcore import custom_op

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # examples/jax_ffi


def load(name, kernels, **kw):
    """Load the library examples/jax_ffi/<name> (kernels + shape.c),
    building it into opcore's cache when its sources changed."""
    d = os.path.join(HERE, name)
    return custom_op.load(name=f"jax_ffi_{name}", compute_srcs=[os.path.join(d, k) for k in kernels],
                          shape_srcs=[os.path.join(d, "shape.c")], **kw)
