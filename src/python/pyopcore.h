/* src/python/pyopcore.h — what the files of the opcore._C extension share.
 *
 *   state.c    the shared state: exceptions, torch hooks, interned names (state.h)
 *   module.c   the module: load_library, build, find_op, _set_torch
 *   op.c       the Op type: infer() for fake/meta tensors, __call__ for eager CPU
 *   tensor.c   viewing framework tensors (torch.Tensor, FakeTensor) as oc_tensor
 *   profiler_methods.c   the profiler's functions (its own engineer's file)
 *
 * The extension is plain C against CPython's C API; it knows torch only
 * through Python attributes (.data_ptr(), .shape, .stride(), .dtype, .is_cpu)
 * and through the callables opcore.torch hands it with _set_torch().
 */
#ifndef OPCORE_PYOPCORE_H
#define OPCORE_PYOPCORE_H

#include "state.h"

/* torch.Tensor attributes, fetched fast for plain torch.Tensor objects
 * (descriptors of torch._C.TensorBase, found by _set_torch) and through
 * ordinary attribute lookup for anything else (FakeTensor, subclasses). */
enum { OCPY_SHAPE, OCPY_DTYPE, OCPY_IS_CPU, OCPY_STRIDE, OCPY_DATA_PTR, OCPY_NUM_ATTRS };
PyObject *ocpy_tensor_attr(PyObject *obj, int which);
void ocpy_tensor_attrs_init(void);

/* ---- tensors (tensor.c) -------------------------------------------------- */

/* The oc_dtype of a torch dtype object, or -1 (no exception set). */
int ocpy_dtype_of(PyObject *dtype_obj);

/* View `obj` (a torch.Tensor on the CPU) as `t`, zero copy. `meta` reads
 * only the shape, strides and dtype (FakeTensor, meta tensors, or any
 * object with .shape and .dtype, taken as row-major). On failure
 * raises an error naming the op and argument `index` and returns -1. */
/* True for a torch.Tensor (or, before opcore.torch registered torch, for
 * anything with .data_ptr). */
int ocpy_is_tensor(PyObject *obj);

/* `keep`: where to hold objects that must outlive the call (DLPack
 * capsules of non-torch arrays); a list made on first need. */
int ocpy_view_tensor(const oc_op *op, int index, PyObject *obj, int meta, oc_tensor *t, PyObject **keep);
/* After a call that succeeded: the resolved copies of written lazy torch
 * views (conjugate or negative bit) in `keep` copied back into the views;
 * -1 with an error. */
int ocpy_write_back(PyObject *keep);

/* ---- NumPy (tensor.c) ----------------------------------------------------- */

/* numpy.empty and the numpy dtypes in oc_dtype order (bfloat16 from
 * ml_dtypes when installed, else NULL), imported on first use; -1 with an
 * ImportError naming what is missing. */
int ocpy_numpy_init(void);
extern PyObject *ocpy_np_empty, *ocpy_np_dtypes[OC_NUM_DTYPES];

/* The data pointer of a NumPy array (NULL with an exception on failure). */
void *ocpy_numpy_data(PyObject *arr);

/* ---- the Op type (op.c) -------------------------------------------------- */

extern PyTypeObject ocpy_OpType;

/* A new Op object for `op` (owned by a loaded library: never freed). */
PyObject *ocpy_op_new(const oc_op *op);
/* A launch grid from Python: an int or a tuple/list of 1 to 3 ints >= 1;
 * -1 with the error set (naming the op). */
int ocpy_parse_grid(PyObject *key, const char *qualname, oc_grid *out);

#endif /* OPCORE_PYOPCORE_H */
