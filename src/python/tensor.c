/* src/python/tensor.c — viewing torch tensors as oc_tensor, zero copy.
 *
 * Only Python attributes are used, so real tensors, FakeTensors and meta
 * tensors all work: the shape pass (meta != 0) reads .shape, .stride() and
 * .dtype; the eager pass also checks .is_cpu and reads .data_ptr().
 */
#include "pyopcore.h"

#include <string.h>

int ocpy_dtype_of(PyObject *dtype_obj)
{
    for (int i = 0; i < OC_NUM_DTYPES; i++)
        if (ocpy_dtypes[i] == dtype_obj) return i;
    if (ocpy_dtypes[0]) return -1; /* torch registered: identity is the answer */
    /* Before opcore.torch registered the dtypes: parse str(dtype), "torch.float32". */
    PyObject *s = PyObject_Str(dtype_obj);
    if (!s) {
        PyErr_Clear();
        return -1;
    }
    const char *name = PyUnicode_AsUTF8(s);
    int result = -1;
    if (name) {
        const char *dot = strrchr(name, '.');
        oc_dtype dt;
        if (oc_dtype_from_name(dot ? dot + 1 : name, &dt)) result = (int)dt;
    } else {
        PyErr_Clear();
    }
    Py_DECREF(s);
    return result;
}

static int read_dims(const oc_op *op, int index, PyObject *seq, const char *what, int64_t *dst, int ndim)
{
    for (int d = 0; d < ndim; d++) {
        PyObject *item = PyTuple_GET_ITEM(seq, d);
        long long v;
        if (PyLong_CheckExact(item)) {
            v = PyLong_AsLongLong(item);
        } else {
            /* SymInt and friends: __index__ (specialises a symbolic size). */
            PyObject *idx = PyNumber_Index(item);
            if (!idx) {
                PyErr_Clear();
                ocpy_arg_error(op, "argument %d '%s': %s[%d] is not an integer", index + 1,
                               oc_op_arg_name(op, index), what, d);
                return -1;
            }
            v = PyLong_AsLongLong(idx);
            Py_DECREF(idx);
        }
        if (v == -1 && PyErr_Occurred()) return -1;
        dst[d] = (int64_t)v;
    }
    return 0;
}

/* A tuple of exactly `ndim` ints from obj (tuple, torch.Size, or a list). */
static PyObject *as_tuple(PyObject *obj)
{
    if (PyTuple_Check(obj)) {
        Py_INCREF(obj);
        return obj;
    }
    return PySequence_Tuple(obj);
}

static PyObject *type_name_of(PyObject *obj) { return PyUnicode_FromString(Py_TYPE(obj)->tp_name); }

int ocpy_view_tensor(const oc_op *op, int index, PyObject *obj, int meta, oc_tensor *t)
{
    const char *argname = oc_op_arg_name(op, index);
    if (ocpy_tensor_type ? !PyObject_TypeCheck(obj, (PyTypeObject *)ocpy_tensor_type)
                         : !PyObject_HasAttr(obj, ocpy_str_data_ptr)) {
        PyObject *tn = type_name_of(obj);
        ocpy_arg_error(op, "argument %d '%s': expected a Tensor, got %U", index + 1, argname, tn);
        Py_XDECREF(tn);
        return -1;
    }

    if (!meta) {
        PyObject *is_cpu = PyObject_GetAttr(obj, ocpy_str_is_cpu);
        if (!is_cpu) return -1;
        Py_DECREF(is_cpu); /* a bool singleton: the pointer stays valid */
        if (is_cpu != Py_True) {
            PyObject *dev = PyObject_GetAttr(obj, ocpy_str_device);
            PyObject *ds = dev ? PyObject_Str(dev) : NULL;
            Py_XDECREF(dev);
            if (!ds) return -1;
            ocpy_arg_error(op,
                           "argument %d '%s' is on device '%U'; opcore runs kernels on the CPU: "
                           "move the tensor with .cpu()",
                           index + 1, argname, ds);
            Py_DECREF(ds);
            return -1;
        }
    }

    PyObject *dt = PyObject_GetAttr(obj, ocpy_str_dtype);
    if (!dt) return -1;
    int dtype = ocpy_dtype_of(dt);
    if (dtype < 0) {
        PyObject *ds = PyObject_Str(dt);
        Py_DECREF(dt);
        if (!ds) return -1;
        ocpy_arg_error(op, "argument %d '%s' has dtype %U, which opcore does not support", index + 1,
                       argname, ds);
        Py_DECREF(ds);
        return -1;
    }
    Py_DECREF(dt);

    PyObject *shape_obj = PyObject_GetAttr(obj, ocpy_str_shape);
    if (!shape_obj) return -1;
    PyObject *shape = as_tuple(shape_obj);
    Py_DECREF(shape_obj);
    if (!shape) return -1;
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
    if (ndim > OC_MAX_DIMS) {
        Py_DECREF(shape);
        ocpy_arg_error(op, "argument %d '%s' has %zd dims; opcore allows at most %d", index + 1, argname,
                       ndim, OC_MAX_DIMS);
        return -1;
    }
    int rc = read_dims(op, index, shape, "shape", t->sizes, (int)ndim);
    Py_DECREF(shape);
    if (rc < 0) return -1;

    PyObject *stride_obj = PyObject_CallMethodNoArgs(obj, ocpy_str_stride);
    if (!stride_obj) {
        /* e.g. a sparse or nested tensor: no strides */
        return -1;
    }
    PyObject *stride = as_tuple(stride_obj);
    Py_DECREF(stride_obj);
    if (!stride) return -1;
    if (PyTuple_GET_SIZE(stride) != ndim) {
        Py_DECREF(stride);
        ocpy_arg_error(op, "argument %d '%s': stride() and shape disagree", index + 1, argname);
        return -1;
    }
    rc = read_dims(op, index, stride, "stride", t->strides, (int)ndim);
    Py_DECREF(stride);
    if (rc < 0) return -1;

    t->dtype = (oc_dtype)dtype;
    t->ndim = (int32_t)ndim;
    t->coherence = OC_COHERENT;
    if (meta) {
        t->data = NULL;
        t->flags = OC_TENSOR_META;
        return 0;
    }
    PyObject *ptr = PyObject_CallMethodNoArgs(obj, ocpy_str_data_ptr);
    if (!ptr) return -1;
    t->data = PyLong_AsVoidPtr(ptr);
    Py_DECREF(ptr);
    if (!t->data && PyErr_Occurred()) return -1;
    t->flags = 0;
    return 0;
}
