/* src/python/op.c — the Op type: one op of a loaded library.
 *
 *   op(*args, **kwargs)    eager CPU call: inputs viewed in place, the output
 *                          allocated by torch.empty (through _set_torch) from
 *                          the shape function's answer; the GIL is released
 *                          while the kernel runs
 *   op.infer(*args, **kw)  shape function only: (sizes tuple, dtype name);
 *                          works on FakeTensors and meta tensors
 *   op.qualname, op.name, op.schema, op.library, op.args
 *
 * The call path is lean on purpose: vectorcall, interned attribute names,
 * argument values on the C stack, no Python objects beyond the output.
 */
#include "pyopcore.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#define MAX_ARGS 32 /* the schema parser's limit */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    const oc_op *op;
    int nargs;
    oc_arg_type types[MAX_ARGS];
    bool has_default[MAX_ARGS];
    oc_value defaults[MAX_ARGS];
    PyObject *argnames; /* tuple of interned str */
    PyObject *qualname;
} OpObject;

/* ---- binding arguments ---------------------------------------------------- */

/* Put positional and keyword arguments into schema order; slots of missing
 * arguments stay NULL. */
static int bind(OpObject *o, PyObject *const *args, Py_ssize_t n, PyObject *kwnames, PyObject **bound)
{
    const oc_op *op = o->op;
    if (n > o->nargs) {
        ocpy_arg_error(op, "takes %d argument%s, got %zd (schema: %s)", o->nargs, o->nargs == 1 ? "" : "s",
                       n + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0), oc_op_schema(op));
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) bound[i] = args[i];
    for (Py_ssize_t i = n; i < o->nargs; i++) bound[i] = NULL;
    if (kwnames) {
        Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t k = 0; k < nk; k++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, k);
            int found = -1;
            for (int i = 0; i < o->nargs && found < 0; i++)
                if (PyTuple_GET_ITEM(o->argnames, i) == key) found = i;
            for (int i = 0; i < o->nargs && found < 0; i++) {
                int eq = PyUnicode_Compare(PyTuple_GET_ITEM(o->argnames, i), key);
                if (eq == -1 && PyErr_Occurred()) return -1;
                if (eq == 0) found = i;
            }
            if (found < 0) {
                ocpy_arg_error(op, "got an unexpected keyword argument '%U' (schema: %s)", key, oc_op_schema(op));
                return -1;
            }
            if (bound[found]) {
                ocpy_arg_error(op, "got multiple values for argument '%U'", key);
                return -1;
            }
            bound[found] = args[n + k];
        }
    }
    for (int i = 0; i < o->nargs; i++)
        if (!bound[i] && !o->has_default[i]) {
            ocpy_arg_error(op, "missing argument %d '%s' (schema: %s)", i + 1, oc_op_arg_name(op, i),
                           oc_op_schema(op));
            return -1;
        }
    return 0;
}

static int wrong_type(const oc_op *op, int i, oc_arg_type want, PyObject *got)
{
    ocpy_arg_error(op, "argument %d '%s': expected %s, got %s", i + 1, oc_op_arg_name(op, i),
                   oc_arg_type_name(want), Py_TYPE(got)->tp_name);
    return -1;
}

/* Convert the bound arguments into oc_values; tensors land in `tensors`. */
static int convert(OpObject *o, PyObject **bound, int meta, oc_value *vals, oc_tensor *tensors)
{
    const oc_op *op = o->op;
    for (int i = 0; i < o->nargs; i++) {
        PyObject *a = bound[i];
        oc_arg_type ty = o->types[i];
        if (!a) {
            vals[i] = o->defaults[i];
            continue;
        }
        vals[i].type = ty;
        switch (ty) {
        case OC_ARG_TENSOR:
            if (ocpy_view_tensor(op, i, a, meta, &tensors[i]) < 0) return -1;
            vals[i].v.tensor = &tensors[i];
            break;
        case OC_ARG_FLOAT:
            if (PyFloat_Check(a)) vals[i].v.f = PyFloat_AS_DOUBLE(a);
            else if (PyLong_Check(a) ||
                     (!ocpy_is_tensor(a) && (PyIndex_Check(a) || (Py_TYPE(a)->tp_as_number &&
                                                                   Py_TYPE(a)->tp_as_number->nb_float)))) {
                vals[i].v.f = PyFloat_AsDouble(a);
                if (vals[i].v.f == -1.0 && PyErr_Occurred()) return -1;
            } else
                return wrong_type(op, i, ty, a);
            break;
        case OC_ARG_INT:
            if (PyLong_Check(a) || (!ocpy_is_tensor(a) && PyIndex_Check(a))) {
                long long v = PyLong_AsLongLong(a);
                if (v == -1 && PyErr_Occurred()) return -1;
                vals[i].v.i = v;
            } else
                return wrong_type(op, i, ty, a);
            break;
        case OC_ARG_BOOL:
            if (PyBool_Check(a)) vals[i].v.b = a == Py_True;
            else return wrong_type(op, i, ty, a);
            break;
        case OC_ARG_SCALAR:
            if (PyBool_Check(a)) vals[i].v.scalar = oc_scalar_bool(a == Py_True);
            else if (PyLong_Check(a)) {
                long long v = PyLong_AsLongLong(a);
                if (v == -1 && PyErr_Occurred()) return -1;
                vals[i].v.scalar = oc_scalar_int(v);
            } else if (PyFloat_Check(a)) vals[i].v.scalar = oc_scalar_float(PyFloat_AS_DOUBLE(a));
            else return wrong_type(op, i, ty, a);
            break;
        }
    }
    return 0;
}

/* A call's arguments (positional and keyword) as oc_values in schema
 * order; `meta`: tensors are read for their shapes only. */
static int arguments(OpObject *o, PyObject *const *args, size_t nargsf, PyObject *kwnames, int meta,
                     oc_value *vals, oc_tensor *tensors)
{
    PyObject *bound[MAX_ARGS];
    if (bind(o, args, PyVectorcall_NARGS(nargsf), kwnames, bound) < 0) return -1;
    return convert(o, bound, meta, vals, tensors);
}

/* ---- the output allocator --------------------------------------------------- */

typedef struct {
    PyThreadState *tstate; /* the caller's, saved while the GIL is released */
    pthread_t thread;      /* the caller's thread */
    const oc_op *op;
    PyObject *result;                     /* the torch tensor made */
    PyObject *exc_type, *exc_value, *exc_tb; /* a Python error inside the allocator */
} alloc_ctx;

static PyObject *sizes_tuple(const oc_tensor *t)
{
    PyObject *tup = PyTuple_New(t->ndim);
    if (!tup) return NULL;
    for (int d = 0; d < t->ndim; d++) {
        PyObject *v = PyLong_FromLongLong(t->sizes[d]);
        if (!v) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, d, v);
    }
    return tup;
}

static oc_status alloc_locked(alloc_ctx *c, const oc_tensor *meta, oc_tensor *out)
{
    if (!ocpy_empty_fn || !ocpy_dtypes[meta->dtype]) {
        PyErr_SetString(PyExc_RuntimeError, "opcore: torch is not registered (import opcore.torch)");
        return OC_ERROR;
    }
    PyObject *t;
    if (meta->ndim > 0) {
        /* torch.empty(d0, d1, ..., dtype=dt): sizes as separate ints parse
         * about twice as fast as a tuple. */
        PyObject *argv[OC_MAX_DIMS + 1];
        int n = meta->ndim;
        for (int d = 0; d < n; d++) {
            argv[d] = PyLong_FromLongLong(meta->sizes[d]);
            if (!argv[d]) {
                while (d--) Py_DECREF(argv[d]);
                return OC_ENOMEM;
            }
        }
        argv[n] = ocpy_dtypes[meta->dtype];
        /* float32 is usually torch's default dtype: skip parsing dtype=
         * then, and check that the default was indeed float32. */
        t = NULL;
        if (meta->dtype == OC_FLOAT32) {
            t = PyObject_Vectorcall(ocpy_empty_fn, argv, (size_t)n, NULL);
            if (t) {
                PyObject *dt = ocpy_tensor_attr(t, OCPY_DTYPE);
                if (!dt) Py_CLEAR(t);
                else {
                    if (dt != ocpy_dtypes[OC_FLOAT32]) Py_CLEAR(t); /* another default: redo */
                    Py_DECREF(dt);
                }
            }
            if (!t && PyErr_Occurred()) {
                for (int d = 0; d < n; d++) Py_DECREF(argv[d]);
                return OC_ENOMEM;
            }
        }
        if (!t) t = PyObject_Vectorcall(ocpy_empty_fn, argv, (size_t)n, ocpy_kwnames_dtype);
        for (int d = 0; d < n; d++) Py_DECREF(argv[d]);
    } else {
        PyObject *sizes = sizes_tuple(meta);
        if (!sizes) return OC_ENOMEM;
        PyObject *argv[2] = {sizes, ocpy_dtypes[meta->dtype]};
        t = PyObject_Vectorcall(ocpy_empty_fn, argv, 1, ocpy_kwnames_dtype);
        Py_DECREF(sizes);
    }
    if (!t) return OC_ENOMEM;
    PyObject *ptr = ocpy_tensor_attr(t, OCPY_DATA_PTR);
    if (!ptr) {
        Py_DECREF(t);
        return OC_ERROR;
    }
    void *data = PyLong_AsVoidPtr(ptr);
    Py_DECREF(ptr);
    if (!data && PyErr_Occurred()) {
        Py_DECREF(t);
        return OC_ERROR;
    }
    /* torch gives empty tensors a NULL data pointer; the runtime accepts
     * that for outputs with no elements. */
    oc_status st = oc_tensor_init(out, data, meta->dtype, meta->ndim, meta->sizes);
    if (st != OC_OK) {
        Py_DECREF(t);
        return st;
    }
    c->result = t;
    return OC_OK;
}

static oc_status alloc_cb(void *vctx, const oc_tensor *meta, oc_tensor *out)
{
    alloc_ctx *c = vctx;
    /* Re-take the GIL: on the calling thread (always, today) by restoring
     * its saved thread state, the cheapest way; on any other thread
     * through PyGILState. */
    bool same = c->tstate && pthread_equal(c->thread, pthread_self());
    PyGILState_STATE g = PyGILState_UNLOCKED;
    if (same) PyEval_RestoreThread(c->tstate);
    else g = PyGILState_Ensure();
    oc_status st = alloc_locked(c, meta, out);
    if (st != OC_OK && PyErr_Occurred()) {
        PyErr_Fetch(&c->exc_type, &c->exc_value, &c->exc_tb);
        oc_set_error(st, "op '%s': allocating the output failed (a Python exception)", oc_op_qualname(c->op));
    }
    if (same) c->tstate = PyEval_SaveThread();
    else PyGILState_Release(g);
    return st;
}

/* ---- calling --------------------------------------------------------------- */

static PyObject *op_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    OpObject *o = (OpObject *)self;
    oc_value vals[MAX_ARGS];
    oc_tensor tensors[MAX_ARGS];
    if (arguments(o, args, nargsf, kwnames, 0, vals, tensors) < 0) return NULL;

    alloc_ctx ctx = {NULL, pthread_self(), o->op, NULL, NULL, NULL, NULL};
    oc_tensor out;
    /* The GIL is released while the op runs (kernels may run long); the
     * allocator callback re-takes it for torch.empty. */
    ctx.tstate = PyEval_SaveThread();
    oc_status st = oc_op_run(o->op, vals, o->nargs, alloc_cb, &ctx, &out);
    PyEval_RestoreThread(ctx.tstate);
    if (st == OC_OK) return ctx.result;
    Py_XDECREF(ctx.result);
    if (ctx.exc_type) {
        PyErr_Restore(ctx.exc_type, ctx.exc_value, ctx.exc_tb);
        return NULL;
    }
    return ocpy_raise_status(st, o->op);
}

static PyObject *op_infer(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    OpObject *o = (OpObject *)self;
    oc_value vals[MAX_ARGS];
    oc_tensor tensors[MAX_ARGS];
    if (arguments(o, args, nargsf, kwnames, 1, vals, tensors) < 0) return NULL;
    oc_tensor meta;
    oc_status st = oc_op_infer(o->op, vals, o->nargs, &meta);
    if (st != OC_OK) return ocpy_raise_status(st, o->op);
    PyObject *sizes = sizes_tuple(&meta);
    if (!sizes) return NULL;
    return Py_BuildValue("(Ns)", sizes, oc_dtype_name(meta.dtype));
}

/* ---- attributes ------------------------------------------------------------ */

static PyObject *value_to_py(const oc_value *v)
{
    switch (v->type) {
    case OC_ARG_FLOAT: return PyFloat_FromDouble(v->v.f);
    case OC_ARG_INT: return PyLong_FromLongLong(v->v.i);
    case OC_ARG_BOOL: return PyBool_FromLong(v->v.b);
    case OC_ARG_SCALAR:
        switch (v->v.scalar.kind) {
        case OC_SCALAR_FLOAT: return PyFloat_FromDouble(v->v.scalar.value.f);
        case OC_SCALAR_INT: return PyLong_FromLongLong(v->v.scalar.value.i);
        default: return PyBool_FromLong(v->v.scalar.value.b);
        }
    case OC_ARG_TENSOR: break;
    }
    Py_RETURN_NONE;
}

/* [(name, type, has_default, default), ...] */
static PyObject *op_get_args(PyObject *self, void *closure)
{
    (void)closure;
    OpObject *o = (OpObject *)self;
    PyObject *list = PyList_New(o->nargs);
    if (!list) return NULL;
    for (int i = 0; i < o->nargs; i++) {
        PyObject *dflt = o->has_default[i] ? value_to_py(&o->defaults[i]) : (Py_INCREF(Py_None), Py_None);
        PyObject *item = dflt ? Py_BuildValue("(OsON)", PyTuple_GET_ITEM(o->argnames, i),
                                              oc_arg_type_name(o->types[i]),
                                              o->has_default[i] ? Py_True : Py_False, dflt)
                              : NULL;
        if (!item) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *op_get_qualname(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef(((OpObject *)self)->qualname);
}

static PyObject *op_get_name(PyObject *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(oc_op_name(((OpObject *)self)->op));
}

static PyObject *op_get_schema(PyObject *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(oc_op_schema(((OpObject *)self)->op));
}

static PyObject *op_get_library(PyObject *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(oc_library_name(oc_op_library(((OpObject *)self)->op)));
}

static PyObject *op_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<opcore op %s: %s>", oc_op_qualname(((OpObject *)self)->op),
                                oc_op_schema(((OpObject *)self)->op));
}

static void op_dealloc(PyObject *self)
{
    OpObject *o = (OpObject *)self;
    Py_XDECREF(o->argnames);
    Py_XDECREF(o->qualname);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef op_methods[] = {
    {"infer", (PyCFunction)(void (*)(void))op_infer, METH_FASTCALL | METH_KEYWORDS,
     "infer(*args, **kwargs) -> (sizes, dtype_name)\nRun the shape function on tensors' shapes and dtypes "
     "only: FakeTensors, meta tensors and plain shape specs (.shape and .dtype, e.g. jax.ShapeDtypeStruct) work."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef op_getset[] = {
    {"qualname", op_get_qualname, NULL, "'library::op'", NULL},
    {"name", op_get_name, NULL, "the op's name", NULL},
    {"schema", op_get_schema, NULL, "the schema as written in oc_def", NULL},
    {"library", op_get_library, NULL, "the library's name (the namespace)", NULL},
    {"args", op_get_args, NULL, "[(name, type, has_default, default), ...]", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject ocpy_OpType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "opcore._C.Op",
    .tp_basicsize = sizeof(OpObject),
    .tp_dealloc = op_dealloc,
    .tp_vectorcall_offset = offsetof(OpObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = op_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "An op of a loaded opcore library: op(*args) runs it on CPU tensors; op.infer(*args) "
              "runs its shape function.",
    .tp_methods = op_methods,
    .tp_getset = op_getset,
};

PyObject *ocpy_op_new(const oc_op *op)
{
    int n = oc_op_num_args(op);
    if (n < 0 || n > MAX_ARGS) return PyErr_Format(PyExc_ValueError, "op '%s' has %d arguments", oc_op_qualname(op), n);
    OpObject *o = PyObject_New(OpObject, &ocpy_OpType);
    if (!o) return NULL;
    o->vectorcall = op_vectorcall;
    o->op = op;
    o->nargs = n;
    o->argnames = PyTuple_New(n);
    o->qualname = PyUnicode_FromString(oc_op_qualname(op));
    if (!o->argnames || !o->qualname) {
        Py_DECREF(o);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        o->types[i] = oc_op_arg_type(op, i);
        memset(&o->defaults[i], 0, sizeof o->defaults[i]);
        o->has_default[i] = oc_op_arg_default(op, i, &o->defaults[i]);
        PyObject *name = PyUnicode_InternFromString(oc_op_arg_name(op, i));
        if (!name) {
            Py_DECREF(o);
            return NULL;
        }
        PyTuple_SET_ITEM(o->argnames, i, name);
    }
    return (PyObject *)o;
}
