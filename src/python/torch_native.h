/* src/python/torch_native.h — the native torch kernels (torch_native.c)
 * and the one C++ function they need (torch_native_throw.cc). */
#ifndef OPCORE_TORCH_NATIVE_H
#define OPCORE_TORCH_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef __cplusplus
extern "C" {
#endif

/* _torch_native_init / _torch_native_impl, added to opcore._C. */
extern PyMethodDef ocpy_torch_native_methods[];

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
