"""opcore's cache root (custom_op.cache_dir documents the rule), in a
module of its own so that the modules custom_op imports can use it too."""
import os

from opcore import _C


def cache_dir(*parts):
    # the C side's rule (read now: the environment may have changed); with
    # no HOME set, the home directory Python finds instead
    root = _C.cache_dir() or os.path.join(os.path.expanduser("~"), ".cache", "opcore")
    return os.path.join(root, *parts)
