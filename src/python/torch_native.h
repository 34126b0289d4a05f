/* src/python/torch_native.h — the native torch kernels (torch_native.c)
 * and the one C++ function they need (torch_native_throw.cc). */
#ifndef OPCORE_TORCH_NATIVE_H
#define OPCORE_TORCH_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <opcore/engine.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The interface of the boxed-kernel shim (src/torch/boxed_kernel.cc, built
 * on its own against torch's headers, repeats these): its version, and a
 * Tensor argument as the shim read it from torch's stack, so the kernel
 * need not ask torch's C ABI for each field. */
#define OCPY_TORCH_SHIM_VERSION 3
/* Arguments a native kernel takes at most (the shim's kMaxArgs). */
#define OCPY_TORCH_MAX_ARGS 64
typedef struct ocpy_torch_view {
    void *data;
    const int64_t *sizes, *strides;
    int64_t ndim;
    int32_t dtype, device; /* torch's codes (c10::ScalarType, c10::DeviceType), as the aoti_torch_* calls give */
    int32_t ok;            /* 0: not read (not a strided tensor with storage): ask the ABI */
} ocpy_torch_view;

/* _torch_native_init / _torch_native_impl, added to opcore._C. */
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

/* Call `fn`, torch's bump_version(const at::Tensor &), on a tensor handle:
 * 0, or -1 with torch's message in err (an inference tensor outside
 * inference mode has no version counter). */
int ocpy_torch_bump_version(void *fn, void *tensor_handle, char *err, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_TORCH_NATIVE_H */
