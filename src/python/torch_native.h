/* src/python/torch_native.h — the native torch kernels (torch_native.c,
 * through the torch kernel shim) and the one C++ function they need
 * (torch_native_throw.cc). */
#ifndef OPCORE_TORCH_NATIVE_H
#define OPCORE_TORCH_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <opcore/engine.h>
#include <opcore/host.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The torch kernel shim's interface version (src/torch/boxed_kernel.cc's
 * oc_torch_shim_version), and what it borrows from this extension (the
 * shim repeats the struct): fail raises opcore's exception for `st` as a
 * C++ throw and never returns; lend_begin / lend_end bracket a run. */
#define OCPY_TORCH_SHIM_VERSION 6
typedef struct ocpy_torch_host {
    void (*fail)(const oc_op *op, oc_status st);
    bool (*lend_begin)(void);
    void (*lend_end)(bool lent);
} ocpy_torch_host;

/* _torch_native_* and _torch_autograd_*, added to opcore._C. */
extern PyMethodDef ocpy_torch_native_methods[];

/* Direct calls (torch_dlpack.c), through torch's DLPack C exchange API.
 * View a torch.Tensor on the CPU as `t`: 1 done, 0 not handled (take the
 * general path; nothing raised). */
int ocpy_dlpack_view(PyObject *obj, struct oc_tensor *t);
/* A new tensor for `meta`, viewed as `out`, made without the GIL: an opaque
 * handle for ocpy_dlpack_to_tensor (GIL held; makes the torch.Tensor, or
 * NULL with an exception) or ocpy_dlpack_free. NULL when not handled. */
void *ocpy_dlpack_alloc(const struct oc_tensor *meta, struct oc_tensor *out);
PyObject *ocpy_dlpack_to_tensor(void *managed);
void ocpy_dlpack_free(void *managed);

/* Around an op call on torch tensors (the native kernels, and direct calls
 * in op.c): lend torch's intra-op threads to this thread's multicore
 * launches (oc_engine_set_thread_helpers) until ocpy_torch_lend_end. False
 * (nothing lent) when the native kernels are not set up or lending is off
 * (_torch_native_lend_threads). Decided per call: the helpers are a
 * thread-local of libopcore, two calls through __tls_get_addr that a call
 * not lending has no need of. */
bool ocpy_torch_lend_begin(void);
void ocpy_torch_lend_end(bool lent);

/* Leave the boxed kernel by throwing the Python exception (type, value,
 * traceback: owned references, handed over) to torch's dispatcher, which
 * raises it in the Python caller; `msg` is its text for C++ callers. */
#if defined(__cplusplus)
[[noreturn]]
#else
_Noreturn
#endif
void ocpy_torch_throw(PyObject *type, PyObject *value, PyObject *traceback, const char *msg);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_TORCH_NATIVE_H */
