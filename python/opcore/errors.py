"""opcore's exceptions (defined in the C extension, re-exported here).

OpError(RuntimeError)
    An op call failed: a kernel or shape-function OC_CHECK, a fault
    (SIGSEGV...), a stack overflow, an output that disagrees with the shape
    function. Attributes: .op ('lib::op'), .status ('OC_EFAULT'...), .code.
OpArgumentError(OpError, TypeError, ValueError)
    A bad argument: wrong arity, argument type, dtype or device.
BuildError(RuntimeError)
    Building an op library failed; str(e) is the compiler's output.
"""
from opcore._C import BuildError, OpArgumentError, OpError

__all__ = ["BuildError", "OpArgumentError", "OpError"]
