/* src/python/state.c — the opcore._C extension's shared state and error
 * raising (see state.h): the one file the others take these from. */
#include "state.h"

#include <stdarg.h>
#include <stdio.h>

PyObject *ocpy_OpError, *ocpy_ArgumentError, *ocpy_BuildError;
PyObject *ocpy_missing;
PyObject *ocpy_tensor_type, *ocpy_empty_fn, *ocpy_dtypes[OC_NUM_DTYPES];
PyObject *ocpy_str_data_ptr, *ocpy_str_shape, *ocpy_str_stride, *ocpy_str_dtype, *ocpy_str_is_cpu,
    *ocpy_str_device, *ocpy_str_dtype_kw;
PyObject *ocpy_kwnames_dtype;

/* ---- errors ----------------------------------------------------------------- */

PyObject *ocpy_raise(PyObject *type, const char *msg, oc_status st, const oc_op *op)
{
    PyObject *exc = PyObject_CallFunction(type, "s", msg);
    if (!exc) return NULL;
    PyObject *status = PyUnicode_FromString(oc_status_name(st));
    PyObject *code = PyLong_FromLong((long)st);
    PyObject *opname = op ? PyUnicode_FromString(oc_op_qualname(op)) : Py_NewRef(Py_None);
    if (!status || !code || !opname || PyObject_SetAttrString(exc, "status", status) < 0 ||
        PyObject_SetAttrString(exc, "code", code) < 0 || PyObject_SetAttrString(exc, "op", opname) < 0) {
        Py_XDECREF(status);
        Py_XDECREF(code);
        Py_XDECREF(opname);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(status);
    Py_DECREF(code);
    Py_DECREF(opname);
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}

PyObject *ocpy_raise_status(oc_status st, const oc_op *op)
{
    const char *msg = oc_errmsg();
    char buf[256];
    if (!msg || !*msg) {
        snprintf(buf, sizeof buf, "op '%s' failed with %s", op ? oc_op_qualname(op) : "?", oc_status_name(st));
        msg = buf;
    }
    PyObject *type = ocpy_OpError;
    if (st == OC_EINVAL) type = ocpy_ArgumentError;
    else if (st == OC_EBUILD) type = ocpy_BuildError;
    return ocpy_raise(type, msg, st, op);
}

PyObject *ocpy_arg_error(const oc_op *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyObject *detail = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (!detail) return NULL;
    PyObject *msg = PyUnicode_FromFormat("op '%s': %U", oc_op_qualname(op), detail);
    Py_DECREF(detail);
    if (!msg) return NULL;
    const char *s = PyUnicode_AsUTF8(msg);
    if (s) ocpy_raise(ocpy_ArgumentError, s, OC_EINVAL, op);
    Py_DECREF(msg);
    return NULL;
}

/* ---- initialisation --------------------------------------------------------- */

static int intern(PyObject **slot, const char *s)
{
    *slot = PyUnicode_InternFromString(s);
    return *slot ? 0 : -1;
}

static PyObject *new_exception(PyObject *m, const char *name, PyObject *bases, const char *doc)
{
    char full[64];
    snprintf(full, sizeof full, "opcore.%s", name);
    PyObject *exc = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
    if (!exc) return NULL;
    if (PyModule_AddObjectRef(m, name, exc) < 0) {
        Py_DECREF(exc);
        return NULL;
    }
    return exc;
}

int ocpy_state_init(PyObject *m)
{
    if (intern(&ocpy_str_data_ptr, "data_ptr") || intern(&ocpy_str_shape, "shape") ||
        intern(&ocpy_str_stride, "stride") || intern(&ocpy_str_dtype, "dtype") || intern(&ocpy_str_is_cpu, "is_cpu") ||
        intern(&ocpy_str_device, "device") || intern(&ocpy_str_dtype_kw, "dtype"))
        return -1;
    ocpy_kwnames_dtype = PyTuple_Pack(1, ocpy_str_dtype_kw);
    if (!ocpy_kwnames_dtype) return -1;
    /* a plain object: only its identity matters */
    ocpy_missing = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (!ocpy_missing || PyModule_AddObjectRef(m, "MISSING", ocpy_missing) < 0) return -1;

    ocpy_OpError = new_exception(m, "OpError", PyExc_RuntimeError,
                                 "An opcore op failed: .op names it, .status is the opcore status name "
                                 "(e.g. 'OC_EFAULT'), .code its number.");
    if (!ocpy_OpError) return -1;
    PyObject *bases = PyTuple_Pack(3, ocpy_OpError, PyExc_TypeError, PyExc_ValueError);
    if (!bases) return -1;
    ocpy_ArgumentError = new_exception(m, "OpArgumentError", bases,
                                       "A bad argument to an opcore op (arity, type, dtype, device, shape); "
                                       "also a TypeError and a ValueError.");
    Py_DECREF(bases);
    if (!ocpy_ArgumentError) return -1;
    ocpy_BuildError = new_exception(m, "BuildError", PyExc_RuntimeError,
                                    "Building an op library failed; the message is the compiler's output.");
    return ocpy_BuildError ? 0 : -1;
}
