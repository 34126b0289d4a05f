/* src/python/state.h — the opcore._C extension's shared state (state.c):
 * its exception types, what opcore.torch hands over, interned names, and
 * how errors are raised. Every other file of the extension includes this;
 * state.c itself calls none of them, so the files call in one direction:
 *
 *   module.c -> op.c -> tensor.c -> state.c
 *   (torch_native.c, torch_dlpack.c, profiler_methods.c -> state.c)
 */
#ifndef OPCORE_PY_STATE_H
#define OPCORE_PY_STATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "opcore/host.h"

extern PyObject *ocpy_OpError;       /* opcore.OpError(RuntimeError) */
extern PyObject *ocpy_ArgumentError; /* opcore.OpArgumentError(OpError, TypeError, ValueError) */
extern PyObject *ocpy_BuildError;    /* opcore.BuildError(RuntimeError) */

/* opcore._C.MISSING: an argument left out of a call (its default applies),
 * in what Op.bind returns. */
extern PyObject *ocpy_missing;

/* Set by _set_torch(): torch.Tensor, torch.empty, the ten torch dtypes in
 * oc_dtype order. NULL until opcore.torch registers itself. */
extern PyObject *ocpy_tensor_type;
extern PyObject *ocpy_empty_fn;
extern PyObject *ocpy_dtypes[OC_NUM_DTYPES];

/* Interned attribute names, made once at import. */
extern PyObject *ocpy_str_data_ptr, *ocpy_str_shape, *ocpy_str_stride, *ocpy_str_dtype,
    *ocpy_str_is_cpu, *ocpy_str_device, *ocpy_str_dtype_kw;
extern PyObject *ocpy_kwnames_dtype; /* ("dtype",) */

/* Make the exceptions (added to module `m`), MISSING and the interned
 * names; -1 with an exception on failure. */
int ocpy_state_init(PyObject *m);

/* Raise `type` with message `msg` and the attributes .status (`st`'s
 * name), .code and .op (the qualname, or None). Returns NULL. */
PyObject *ocpy_raise(PyObject *type, const char *msg, oc_status st, const oc_op *op);

/* Raise the exception matching `st` with opcore's message for this thread
 * (oc_errmsg()); OC_EINVAL raises OpArgumentError. Returns NULL. */
PyObject *ocpy_raise_status(oc_status st, const oc_op *op);

/* Raise OpArgumentError "op 'Q': <formatted>". Returns NULL. */
PyObject *ocpy_arg_error(const oc_op *op, const char *fmt, ...);

#endif /* OPCORE_PY_STATE_H */
