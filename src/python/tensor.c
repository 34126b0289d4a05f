/* src/python/tensor.c — viewing framework tensors as oc_tensor, zero copy.
 *
 * torch tensors through Python attributes, so real tensors, FakeTensors and
 * meta tensors all work: the shape pass (meta != 0) reads .shape, .stride()
 * and .dtype; the eager pass also checks .is_cpu and reads .data_ptr().
 * Anything else with __dlpack__ (NumPy and JAX arrays, CuPy, ...) through
 * DLPack: its capsule is kept alive for the call, and released after it.
 */
#include "pyopcore.h"

#include <string.h>

#include "opcore/dlpack.h"
#include "torch_native.h"

PyObject *ocpy_np_empty, *ocpy_np_dtypes[OC_NUM_DTYPES];

static PyObject *descrs[OCPY_NUM_ATTRS]; /* borrowed from TensorBase's dict */

void ocpy_tensor_attrs_init(void)
{
    static const char *names[OCPY_NUM_ATTRS] = {"shape", "dtype", "is_cpu", "stride", "data_ptr"};
    for (int i = 0; i < OCPY_NUM_ATTRS; i++) descrs[i] = NULL;
    if (!ocpy_tensor_type) return;
    PyTypeObject *base = ((PyTypeObject *)ocpy_tensor_type)->tp_base;
    if (!base || !base->tp_dict) return;
    for (int i = 0; i < OCPY_NUM_ATTRS; i++) {
        /* torch.Tensor must not override it, and it must be what we expect */
        PyObject *own = PyDict_GetItemString(((PyTypeObject *)ocpy_tensor_type)->tp_dict, names[i]);
        PyObject *d = PyDict_GetItemString(base->tp_dict, names[i]);
        bool ok = !own && d &&
                  (i < OCPY_STRIDE ? Py_IS_TYPE(d, &PyGetSetDescr_Type) : Py_IS_TYPE(d, &PyMethodDescr_Type));
        descrs[i] = ok ? d : NULL;
    }
}

PyObject *ocpy_tensor_attr(PyObject *obj, int which)
{
    PyObject *d = descrs[which];
    if (d && (PyObject *)Py_TYPE(obj) == ocpy_tensor_type) {
        if (which < OCPY_STRIDE) return Py_TYPE(d)->tp_descr_get(d, obj, (PyObject *)Py_TYPE(obj));
        return PyObject_Vectorcall(d, &obj, 1, NULL);
    }
    switch (which) {
    case OCPY_SHAPE: return PyObject_GetAttr(obj, ocpy_str_shape);
    case OCPY_DTYPE: return PyObject_GetAttr(obj, ocpy_str_dtype);
    case OCPY_IS_CPU: return PyObject_GetAttr(obj, ocpy_str_is_cpu);
    case OCPY_STRIDE: return PyObject_CallMethodNoArgs(obj, ocpy_str_stride);
    default: return PyObject_CallMethodNoArgs(obj, ocpy_str_data_ptr);
    }
}

int ocpy_dtype_of(PyObject *dtype_obj)
{
    for (int i = 0; i < OC_NUM_DTYPES; i++)
        if (ocpy_dtypes[i] == dtype_obj) return i;
    /* Not a torch dtype object (or torch not registered yet): parse
     * str(dtype): "torch.float32", numpy's and JAX's "float32", "bfloat16". */
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

/* t->strides from obj.stride(), which must match the `ndim` sizes read. */
static int read_strides(const oc_op *op, int index, PyObject *obj, int ndim, oc_tensor *t)
{
    PyObject *stride_obj = ocpy_tensor_attr(obj, OCPY_STRIDE);
    if (!stride_obj) return -1; /* e.g. a sparse or nested tensor: no strides */
    PyObject *stride = as_tuple(stride_obj);
    Py_DECREF(stride_obj);
    if (!stride) return -1;
    if (PyTuple_GET_SIZE(stride) != ndim) {
        Py_DECREF(stride);
        ocpy_arg_error(op, "argument %d '%s': stride() and shape disagree", index + 1, oc_op_arg_name(op, index));
        return -1;
    }
    int rc = read_dims(op, index, stride, "stride", t->strides, ndim);
    Py_DECREF(stride);
    return rc;
}

static PyObject *type_name_of(PyObject *obj) { return PyUnicode_FromString(Py_TYPE(obj)->tp_name); }

int ocpy_is_tensor(PyObject *obj)
{
    if (ocpy_tensor_type) return PyObject_TypeCheck(obj, (PyTypeObject *)ocpy_tensor_type);
    return PyObject_HasAttr(obj, ocpy_str_data_ptr);
}

int ocpy_numpy_init(void)
{
    if (ocpy_np_empty) return 0;
    PyObject *np = PyImport_ImportModule("numpy");
    if (!np) return -1;
    PyObject *empty = PyObject_GetAttrString(np, "empty"), *dtype = PyObject_GetAttrString(np, "dtype");
    Py_DECREF(np);
    if (!empty || !dtype) {
        Py_XDECREF(empty);
        Py_XDECREF(dtype);
        return -1;
    }
    for (int i = 0; i < OC_NUM_DTYPES; i++) {
        const char *name = i == OC_BOOL ? "bool" : oc_dtype_name((oc_dtype)i);
        PyObject *d = NULL;
        if (i == OC_BFLOAT16) { /* NumPy has no bfloat16: ml_dtypes (which JAX uses) does */
            PyObject *ml = PyImport_ImportModule("ml_dtypes");
            PyObject *bf = ml ? PyObject_GetAttrString(ml, "bfloat16") : NULL;
            d = bf ? PyObject_CallOneArg(dtype, bf) : NULL;
            Py_XDECREF(ml);
            Py_XDECREF(bf);
            PyErr_Clear();
        } else {
            d = PyObject_CallFunction(dtype, "s", name);
        }
        Py_XSETREF(ocpy_np_dtypes[i], d);
        if (!d && PyErr_Occurred()) {
            Py_DECREF(empty);
            Py_DECREF(dtype);
            return -1;
        }
    }
    Py_DECREF(dtype);
    ocpy_np_empty = empty;
    return 0;
}

void *ocpy_numpy_data(PyObject *arr)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arr, &view, PyBUF_SIMPLE | PyBUF_WRITABLE) == 0) {
        void *p = view.buf;
        PyBuffer_Release(&view);
        return p;
    }
    /* dtypes the buffer protocol cannot describe: the array interface */
    PyErr_Clear();
    PyObject *ai = PyObject_GetAttrString(arr, "__array_interface__");
    PyObject *data = ai ? PyDict_GetItemString(ai, "data") : NULL;
    void *p = data && PyTuple_Check(data) ? PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0)) : NULL;
    Py_XDECREF(ai);
    if (!p && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "opcore: cannot find the array's data");
    return p;
}

/* A read-only NumPy array, which the DLPack version Debian ships cannot
 * export: its array interface, marked read-only (zero copy too). */
static int view_array_interface(const oc_op *op, int index, PyObject *obj, oc_tensor *t)
{
    PyObject *ai = PyObject_GetAttrString(obj, "__array_interface__");
    PyObject *dt = PyObject_GetAttrString(obj, "dtype");
    PyObject *shape = ai ? PyDict_GetItemString(ai, "shape") : NULL;
    PyObject *strides = ai ? PyDict_GetItemString(ai, "strides") : NULL;
    PyObject *data = ai ? PyDict_GetItemString(ai, "data") : NULL;
    int dtype = dt ? ocpy_dtype_of(dt) : -1, rc = -1;
    Py_ssize_t ndim = shape && PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
    if (dtype < 0 || ndim < 0 || ndim > OC_MAX_DIMS || !data || !PyTuple_Check(data)) {
        PyErr_Clear();
        ocpy_arg_error(op, "argument %d '%s': cannot view this %s (dtype %R)", index + 1, oc_op_arg_name(op, index),
                       Py_TYPE(obj)->tp_name, dt ? dt : Py_None);
        goto done;
    }
    int64_t sizes[OC_MAX_DIMS], elem_strides[OC_MAX_DIMS];
    size_t item = oc_dtype_size((oc_dtype)dtype);
    for (Py_ssize_t d = 0; d < ndim; d++) {
        sizes[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
        if (strides && PyTuple_Check(strides)) elem_strides[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, d)) / (int64_t)item;
    }
    void *ptr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
    if (PyErr_Occurred()) goto done;
    if (strides && PyTuple_Check(strides)) oc_tensor_init_strided(t, ptr, (oc_dtype)dtype, (int)ndim, sizes, elem_strides);
    else oc_tensor_init(t, ptr, (oc_dtype)dtype, (int)ndim, sizes);
    t->flags = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1)) ? OC_TENSOR_READONLY : 0;
    rc = 0;
done:
    Py_XDECREF(ai);
    Py_XDECREF(dt);
    return rc;
}

/* 1 if torch tensor `obj` is a lazy view whose memory does not hold its
 * values: the conjugate bit (x.conj(); complex dtypes only) or the
 * negative bit (x.conj().imag) set; 0 if not; -1 with an error. On a
 * torch.Tensor the checks call TensorBase's methods directly (tens of ns). */
static int lazy_bits(PyObject *obj, bool complex)
{
    static PyObject *names[2], *descrs[2], *descrs_of;
    if (!names[0] && (!(names[0] = PyUnicode_InternFromString("is_conj")) ||
                      !(names[1] = PyUnicode_InternFromString("is_neg"))))
        return -1;
    if (descrs_of != ocpy_tensor_type) {
        PyTypeObject *base = ocpy_tensor_type ? ((PyTypeObject *)ocpy_tensor_type)->tp_base : NULL;
        for (int i = 0; i < 2; i++) {
            PyObject *d = base && base->tp_dict ? PyDict_GetItem(base->tp_dict, names[i]) : NULL;
            descrs[i] = d && Py_IS_TYPE(d, &PyMethodDescr_Type) ? d : NULL;
        }
        descrs_of = ocpy_tensor_type;
    }
    bool exact = (PyObject *)Py_TYPE(obj) == ocpy_tensor_type;
    for (int i = complex ? 0 : 1; i < 2; i++) {
        PyObject *b = exact && descrs[i] ? PyObject_Vectorcall(descrs[i], &obj, 1, NULL)
                                         : PyObject_CallMethodNoArgs(obj, names[i]);
        if (!b) return -1;
        Py_DECREF(b); /* a bool singleton: the pointer stays valid */
        if (b == Py_True) return 1;
    }
    return 0;
}

/* Append `item` to the call's keep list (made on first need). */
static int keep_for_call(PyObject **keep, PyObject *item)
{
    if (!item || (!*keep && !(*keep = PyList_New(0)))) return -1;
    return PyList_Append(*keep, item);
}

/* A lazy view (lazy_bits) as the kernel must see it: a resolved copy,
 * kept for the call. A written argument's copy is kept as (view, copy), and
 * ocpy_write_back copies it into the view after the call, as torch's own
 * fallback for these bits does for torch.ops. */
static int view_resolved(const oc_op *op, int index, PyObject *obj, oc_tensor *t, PyObject **keep)
{
    PyObject *c = PyObject_CallMethod(obj, "resolve_conj", NULL);
    PyObject *r = c ? PyObject_CallMethod(c, "resolve_neg", NULL) : NULL;
    Py_XDECREF(c);
    if (!r) return -1;
    PyObject *item = oc_op_arg_mutable(op, index) ? PyTuple_Pack(2, obj, r) : Py_NewRef(r);
    int rc = keep_for_call(keep, item);
    Py_XDECREF(item);
    if (rc == 0) rc = ocpy_view_tensor(op, index, r, 0, t, keep);
    Py_DECREF(r);
    return rc;
}

int ocpy_write_back(PyObject *keep)
{
    Py_ssize_t n = keep ? PyList_GET_SIZE(keep) : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(keep, i);
        if (!PyTuple_Check(pair)) continue;
        PyObject *view = PyTuple_GET_ITEM(pair, 0), *copy = PyTuple_GET_ITEM(pair, 1);
        PyObject *r = PyObject_CallMethod(view, "copy_", "O", copy);
        if (!r) return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* A non-torch array through DLPack (zero copy). */
static int view_dlpack(const oc_op *op, int index, PyObject *obj, oc_tensor *t, PyObject **keep)
{
    const char *argname = oc_op_arg_name(op, index);
    PyObject *cap = PyObject_CallMethod(obj, "__dlpack__", NULL);
    if (!cap) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb); /* before the look-up below, which runs Python for a subclass */
        if (PyObject_HasAttrString(obj, "__array_interface__")) { /* a read-only NumPy array or memmap */
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            return view_array_interface(op, index, obj, t);
        }
        ocpy_arg_error(op, "argument %d '%s': %s.__dlpack__() failed: %S", index + 1, argname,
                       Py_TYPE(obj)->tp_name, value ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    DLManagedTensor *m = PyCapsule_IsValid(cap, "dltensor") ? PyCapsule_GetPointer(cap, "dltensor") : NULL;
    if (!m) {
        Py_DECREF(cap);
        PyErr_Clear();
        ocpy_arg_error(op, "argument %d '%s': %s.__dlpack__() did not return a DLPack capsule", index + 1,
                       argname, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (oc_tensor_from_dlpack(&m->dl_tensor, t) != OC_OK) {
        Py_DECREF(cap);
        ocpy_arg_error(op, "argument %d '%s' (%s): %s", index + 1, argname, Py_TYPE(obj)->tp_name,
                       oc_errmsg() + strlen("oc_tensor_from_dlpack: "));
        return -1;
    }
    t->flags &= ~(uint32_t)OC_TENSOR_META;
    /* A JAX array is immutable: an in-place op is refused (opcore.jax
     * returns the new value instead). */
    if (oc_op_arg_mutable(op, index)) {
        PyObject *mod = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__module__");
        const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
        if (m && (strncmp(m, "jax", 3) == 0)) t->flags |= OC_TENSOR_READONLY;
        Py_XDECREF(mod);
        PyErr_Clear();
    }
    /* The capsule owns the producer's reference: keep it until the call
     * ends (its destructor then releases the array). */
    int rc = keep_for_call(keep, cap);
    Py_DECREF(cap);
    return rc;
}

int ocpy_view_tensor(const oc_op *op, int index, PyObject *obj, int meta, oc_tensor *t, PyObject **keep)
{
    /* a plain CPU torch.Tensor, in one C call (a lazy view: resolved below) */
    if (!meta && ocpy_dlpack_view(obj, t) > 0) {
        int lazy = lazy_bits(obj, oc_dtype_is_complex(t->dtype));
        if (lazy <= 0) return lazy;
    }
    const char *argname = oc_op_arg_name(op, index);
    /* The shape pass also takes plain shape specs (.shape and .dtype, like
     * jax.ShapeDtypeStruct or a numpy array): they describe row-major data. */
    int is_tensor = ocpy_is_tensor(obj);
    if (!is_tensor && !meta && PyObject_HasAttrString(obj, "__dlpack__")) return view_dlpack(op, index, obj, t, keep);
    if (!is_tensor && !(meta && PyObject_HasAttr(obj, ocpy_str_shape) && PyObject_HasAttr(obj, ocpy_str_dtype))) {
        PyObject *tn = type_name_of(obj);
        ocpy_arg_error(op, "argument %d '%s': expected a Tensor (a torch tensor, or any array with __dlpack__ "
                       "such as a NumPy or JAX array), got %U", index + 1, argname, tn);
        Py_XDECREF(tn);
        return -1;
    }

    if (!meta && is_tensor) {
        int lazy = lazy_bits(obj, true);
        if (lazy) return lazy < 0 ? -1 : view_resolved(op, index, obj, t, keep);
    }
    if (!meta) {
        PyObject *is_cpu = ocpy_tensor_attr(obj, OCPY_IS_CPU);
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

    PyObject *dt = ocpy_tensor_attr(obj, OCPY_DTYPE);
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

    PyObject *shape_obj = ocpy_tensor_attr(obj, OCPY_SHAPE);
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

    if (!is_tensor) oc_contiguous_strides((int)ndim, t->sizes, t->strides);
    else if (read_strides(op, index, obj, (int)ndim, t) < 0) return -1;

    t->dtype = (oc_dtype)dtype;
    t->ndim = (int32_t)ndim;
    t->coherence = OC_COHERENT;
    if (meta) {
        t->data = NULL;
        t->flags = OC_TENSOR_META;
        return 0;
    }
    PyObject *ptr = ocpy_tensor_attr(obj, OCPY_DATA_PTR);
    if (!ptr) return -1;
    t->data = PyLong_AsVoidPtr(ptr);
    Py_DECREF(ptr);
    if (!t->data && PyErr_Occurred()) return -1;
    t->flags = 0;
    return 0;
}
