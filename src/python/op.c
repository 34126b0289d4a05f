/* src/python/op.c — the Op type: one op of a loaded library.
 *
 *   op(*args, **kwargs)    eager CPU call: inputs viewed in place (zero
 *                          copy), fresh results allocated by torch.empty
 *                          (through _set_torch) from the shape function's
 *                          answer, `Tensor(a!)` arguments written in place;
 *                          returns the result, a tuple of results, or None
 *                          for `-> ()`. The GIL is released while it runs.
 *   op.infer(*args, **kw)  shape function only: [(sizes, dtype name), ...]
 *                          per result; works on FakeTensors, meta tensors
 *                          and shape specs (.shape + .dtype)
 *   op.trace(runs)         dynamic shapes: the result sizes as expressions
 *                          of the input sizes (see oc_op_trace_shapes)
 *   op.qualname, .name, .schema, .library, .multicore, .strided, .args, .arg_info,
 *   .results
 *
 * Arguments convert from Python by the schema: tensors (torch.Tensor),
 * None for optionals, lists/tuples for Tensor[] / int[] / float[] (a single
 * number for int[N] / float[N]), str, and a dtype (torch.float32,
 * numpy.float32 or "float32") for ScalarType.
 */
#include "pyopcore.h"
#include "torch_native.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define MAX_ARGS 64 /* the schema parser's limit */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    const oc_op *op;
    int nargs;
    int npositional; /* arguments before the first keyword-only one */
    int nresults;
    oc_arg_type types[MAX_ARGS];
    bool optional[MAX_ARGS];
    int64_t list_len[MAX_ARGS];
    bool has_default[MAX_ARGS];
    oc_value defaults[MAX_ARGS];
    int alias[OC_MAX_RESULTS]; /* per result: the argument it returns, or -1 */
    bool writes;               /* any Tensor(a!) argument */
    PyObject *argnames;        /* tuple of interned str */
    PyObject *qualname;
    oc_grid grid;              /* op[2, 2]: the launch grid of its calls (ndim 0: the op's own) */
} OpObject;

/* ---- per-call storage for lists --------------------------------------------- */

typedef struct arena {
    void *blocks[MAX_ARGS];
    int n;
    PyObject *keep; /* DLPack capsules of the call's non-torch arrays, resolved
                       copies of lazy torch views (tensor.c) */
} arena;

static void *arena_alloc(arena *a, size_t bytes)
{
    void *p = PyMem_Malloc(bytes ? bytes : 1);
    if (!p) {
        PyErr_NoMemory();
        return NULL;
    }
    a->blocks[a->n++] = p;
    return p;
}

static void arena_free(arena *a)
{
    for (int i = 0; i < a->n; i++) PyMem_Free(a->blocks[i]);
    a->n = 0;
    Py_CLEAR(a->keep);
}

/* ---- binding arguments ---------------------------------------------------- */

/* An argument-binding error. The plain form is Python's ("op 'Q': takes 1
 * argument, got 2", arguments by position and name); the strict form is
 * opcore.jax's ("opcore op 'Q': missing argument 'x' (Tensor) (schema: S)",
 * arguments by name and schema type). */
static int bind_error(const oc_op *op, bool strict, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyObject *detail = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (!detail) return -1;
    if (!strict) {
        ocpy_arg_error(op, "%U", detail);
    } else {
        PyObject *msg = PyUnicode_FromFormat("opcore op '%s': %U (schema: %s)", oc_op_qualname(op), detail,
                                             oc_op_schema(op));
        const char *text = msg ? PyUnicode_AsUTF8(msg) : NULL;
        if (text) ocpy_raise(ocpy_ArgumentError, text, OC_EINVAL, op);
        Py_XDECREF(msg);
    }
    Py_DECREF(detail);
    return -1;
}

/* Put positional and keyword arguments into schema order; slots of missing
 * arguments stay NULL. The one binder of every Python call path: the C op
 * itself, opcore.torch's fake and Python kernels, and (`strict`: keyword-only
 * arguments by keyword only, the strict error form) opcore.jax. */
static int bind(OpObject *o, PyObject *const *args, Py_ssize_t n, PyObject *kwnames, PyObject **bound, bool strict)
{
    const oc_op *op = o->op;
    if (n > o->nargs) {
        if (strict)
            return bind_error(op, strict, "takes %d argument%s, got %zd", o->nargs, o->nargs == 1 ? "" : "s", n);
        return bind_error(op, strict, "takes %d argument%s, got %zd (schema: %s)", o->nargs, o->nargs == 1 ? "" : "s",
                          n + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0), oc_op_schema(op));
    }
    /* as torch.ops: keyword-only arguments bind by keyword only (torch's own
     * calls into the op pass them as keywords too) */
    if (n > o->npositional) {
        const char *name = oc_op_arg_name(op, o->npositional);
        return bind_error(op, strict, "argument '%s' is keyword-only: pass %s=%R", name, name, args[o->npositional]);
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
                if (strict) return bind_error(op, strict, "has no argument '%U'", key);
                return bind_error(op, strict, "got an unexpected keyword argument '%U' (schema: %s)", key,
                                  oc_op_schema(op));
            }
            if (bound[found]) {
                if (strict) return bind_error(op, strict, "argument '%U' given twice", key);
                return bind_error(op, strict, "got multiple values for argument '%U'", key);
            }
            bound[found] = args[n + k];
        }
    }
    for (int i = 0; i < o->nargs; i++)
        if (!bound[i] && !o->has_default[i]) {
            if (strict)
                return bind_error(op, strict, "missing argument '%s' (%s)", oc_op_arg_name(op, i),
                                  oc_op_arg_schema_type(op, i));
            return bind_error(op, strict, "missing argument %d '%s' (schema: %s)", i + 1, oc_op_arg_name(op, i),
                              oc_op_schema(op));
        }
    return 0;
}

/* "bool, uint8, ..., complex128": the names a ScalarType argument takes. */
static const char *dtype_names_text(void)
{
    static char text[256];
    if (!text[0]) {
        size_t used = 0;
        for (int d = 0; d < OC_NUM_DTYPES && used < sizeof text; d++)
            used += (size_t)snprintf(text + used, sizeof text - used, "%s%s", d ? ", " : "", oc_dtype_name((oc_dtype)d));
    }
    return text;
}

/* A ScalarType argument's dtype, or -1. Takes the forms a user of each
 * framework writes: a torch dtype, a NumPy dtype, a NumPy/JAX scalar type
 * (numpy.float32, jax.numpy.float32, ml_dtypes.bfloat16), Python's float,
 * int, bool and complex as NumPy and torch read them, and a name
 * ('float32', 'torch.float32'). Anything else (an int code, a str that only
 * ends in a dtype's name) is refused rather than guessed at. */
static int scalar_type_of(PyObject *a)
{
    for (int i = 0; i < OC_NUM_DTYPES; i++)
        if (ocpy_dtypes[i] == a) return i;
    static const struct { PyTypeObject *type; oc_dtype dtype; } builtins[] = {
        {&PyFloat_Type, OC_FLOAT64}, {&PyLong_Type, OC_INT64}, {&PyBool_Type, OC_BOOL}, {&PyComplex_Type, OC_COMPLEX128},
    };
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (a == (PyObject *)builtins[i].type) return (int)builtins[i].dtype;
    PyObject *name = NULL;
    if (PyUnicode_Check(a)) {
        Py_INCREF(a);
        name = a;
    } else {
        /* the framework's own dtype objects: a class (numpy.float32) by its
         * name, an instance (numpy.dtype('float32'), torch.float32 before
         * torch registered its dtypes) by str() */
        PyObject *cls = PyType_Check(a) ? a : (PyObject *)Py_TYPE(a);
        PyObject *mod = PyObject_GetAttrString(cls, "__module__");
        const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
        bool known = m && (!strncmp(m, "numpy", 5) || !strncmp(m, "jax", 3) || !strncmp(m, "ml_dtypes", 9) ||
                           !strncmp(m, "torch", 5));
        Py_XDECREF(mod);
        if (known) name = PyType_Check(a) ? PyObject_GetAttrString(a, "__name__") : PyObject_Str(a);
    }
    const char *text = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    int result = -1;
    oc_dtype dt;
    if (text && !strncmp(text, "torch.", 6)) text += 6;
    if (text && oc_dtype_from_name(text, &dt)) result = (int)dt;
    Py_XDECREF(name);
    PyErr_Clear();
    return result;
}

static int wrong_type(const oc_op *op, int i, PyObject *got)
{
    /* schema numbers are real (oc_scalar has no complex kind): say where complex values go */
    const char *why = PyComplex_Check(got) ? " (float, int and Scalar arguments are real: pass complex values "
                                             "in a complex64/complex128 tensor)" : "";
    ocpy_arg_error(op, "argument %d '%s': expected %s, got %s%s", i + 1, oc_op_arg_name(op, i),
                   oc_op_arg_schema_type(op, i), Py_TYPE(got)->tp_name, why);
    return -1;
}

/* An integer that fits int64, or an error naming the argument. */
static int to_int64(const oc_op *op, int i, PyObject *a, int64_t *out)
{
    if (!PyLong_Check(a) && (ocpy_is_tensor(a) || !PyIndex_Check(a))) return wrong_type(op, i, a);
    int overflow = 0;
    PyObject *idx = PyNumber_Index(a);
    if (!idx) return -1;
    long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
    Py_DECREF(idx);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow) {
        ocpy_arg_error(op, "argument %d '%s': %R does not fit in a 64-bit int", i + 1, oc_op_arg_name(op, i), a);
        return -1;
    }
    *out = v;
    return 0;
}

static int to_double(const oc_op *op, int i, PyObject *a, double *out)
{
    if (PyFloat_Check(a)) {
        *out = PyFloat_AS_DOUBLE(a);
        return 0;
    }
    if (PyBool_Check(a) || ocpy_is_tensor(a) ||
        !(PyLong_Check(a) || PyIndex_Check(a) || (Py_TYPE(a)->tp_as_number && Py_TYPE(a)->tp_as_number->nb_float)))
        return wrong_type(op, i, a);
    *out = PyFloat_AsDouble(a);
    if (*out == -1.0 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            ocpy_arg_error(op, "argument %d '%s': %R does not fit in a float (double)", i + 1,
                           oc_op_arg_name(op, i), a);
        }
        return -1;
    }
    return 0;
}

static int to_scalar(const oc_op *op, int i, PyObject *a, oc_scalar *out)
{
    if (PyBool_Check(a)) {
        *out = oc_scalar_bool(a == Py_True);
        return 0;
    }
    if (PyLong_Check(a)) {
        int64_t v;
        if (to_int64(op, i, a, &v) < 0) return -1;
        *out = oc_scalar_int(v);
        return 0;
    }
    if (PyFloat_Check(a)) {
        *out = oc_scalar_float(PyFloat_AS_DOUBLE(a));
        return 0;
    }
    return wrong_type(op, i, a);
}

/* A list argument: its items as a fast sequence (NULL + error if `a` is
 * not a list or tuple). */
static PyObject *as_sequence(const oc_op *op, int i, PyObject *a)
{
    if (!PyList_Check(a) && !PyTuple_Check(a) && !PySequence_Check(a)) {
        wrong_type(op, i, a);
        return NULL;
    }
    if (PyUnicode_Check(a) || PyBytes_Check(a) || ocpy_is_tensor(a)) {
        wrong_type(op, i, a);
        return NULL;
    }
    return PySequence_Fast(a, "expected a list");
}

static int convert_list(OpObject *o, int i, PyObject *a, int meta, oc_value *val, arena *ar)
{
    const oc_op *op = o->op;
    oc_arg_type ty = o->types[i];
    /* int[N] / float[N] take one number for all N */
    if (ty != OC_ARG_TENSOR_LIST && o->list_len[i] && !PySequence_Check(a)) {
        if (ty == OC_ARG_INT_LIST) {
            val->type = OC_ARG_INT;
            return to_int64(op, i, a, &val->v.i);
        }
        val->type = OC_ARG_FLOAT;
        return to_double(op, i, a, &val->v.f);
    }
    PyObject *seq = as_sequence(op, i, a);
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int rc = 0;
    if (ty == OC_ARG_TENSOR_LIST) {
        oc_tensor *items = arena_alloc(ar, (size_t)n * sizeof *items);
        for (Py_ssize_t k = 0; items && k < n && rc == 0; k++)
            rc = ocpy_view_tensor(op, i, PySequence_Fast_GET_ITEM(seq, k), meta, &items[k], &ar->keep);
        if (!items) rc = -1;
        *val = oc_value_tensors(items, n);
    } else if (ty == OC_ARG_INT_LIST) {
        int64_t *v = arena_alloc(ar, (size_t)n * sizeof *v);
        for (Py_ssize_t k = 0; v && k < n && rc == 0; k++)
            rc = to_int64(op, i, PySequence_Fast_GET_ITEM(seq, k), &v[k]);
        if (!v) rc = -1;
        *val = oc_value_ints(v, n);
    } else {
        double *v = arena_alloc(ar, (size_t)n * sizeof *v);
        for (Py_ssize_t k = 0; v && k < n && rc == 0; k++)
            rc = to_double(op, i, PySequence_Fast_GET_ITEM(seq, k), &v[k]);
        if (!v) rc = -1;
        *val = oc_value_floats(v, n);
    }
    Py_DECREF(seq);
    return rc;
}

/* ---- Dict arguments: a Python dict of str keys ------------------------------- */

static int dict_error(const oc_op *op, int i, PyObject *key, const char *what, PyObject *got)
{
    ocpy_arg_error(op, "argument %d '%s' (Dict): key %R: %s, got %s", i + 1, oc_op_arg_name(op, i), key, what,
                   Py_TYPE(got)->tp_name);
    return -1;
}

static bool is_number_list(PyObject *x)
{
    return (PyList_Check(x) || PyTuple_Check(x) || PySequence_Check(x)) && !PyUnicode_Check(x) &&
           !PyBytes_Check(x) && !PyDict_Check(x);
}

/* An int (Python or NumPy integer, not a bool) or a float; 1 int, 2 float, 0 neither. */
static int number_kind(PyObject *x)
{
    if (PyBool_Check(x) || PySequence_Check(x)) return 0; /* a NumPy array has __float__ too */
    if (PyLong_Check(x) || (PyIndex_Check(x) && !PyFloat_Check(x))) return 1;
    if (PyFloat_Check(x) || (Py_TYPE(x)->tp_as_number && Py_TYPE(x)->tp_as_number->nb_float)) return 2;
    return 0;
}

static int dict_int(const oc_op *op, int i, PyObject *key, PyObject *x, int64_t *out)
{
    PyObject *ix = PyNumber_Index(x);
    if (!ix) return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(ix, &overflow);
    Py_DECREF(ix);
    if (overflow) return dict_error(op, i, key, "an int must fit in 64 bits", x);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

/* One value: int, float, bool, str, or a list of numbers (int[] when every
 * item is an int, else float[]). `store`: where list items go. */
static int dict_value(const oc_op *op, int i, PyObject *key, PyObject *x, oc_dict_entry *e, void **store)
{
    int nk = number_kind(x);
    if (PyBool_Check(x)) {
        e->kind = OC_DICT_BOOL;
        e->v.b = x == Py_True;
    } else if (nk == 1) {
        e->kind = OC_DICT_INT;
        return dict_int(op, i, key, x, &e->v.i);
    } else if (nk == 2) {
        e->kind = OC_DICT_FLOAT;
        e->v.f = PyFloat_AsDouble(x);
        if (e->v.f == -1.0 && PyErr_Occurred()) return -1;
    } else if (PyUnicode_Check(x)) {
        Py_ssize_t len = 0;
        e->kind = OC_DICT_STR;
        e->v.s = PyUnicode_AsUTF8AndSize(x, &len); /* lives as long as the dict, which the caller holds */
        if (!e->v.s) return -1;
        if (strlen(e->v.s) != (size_t)len) return dict_error(op, i, key, "a str may not hold a NUL character", x);
    } else if (is_number_list(x)) {
        PyObject *seq = PySequence_Fast(x, "expected a list");
        if (!seq) return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        bool floats = false;
        int rc = 0;
        for (Py_ssize_t k = 0; k < n && rc == 0; k++) {
            int kind = number_kind(PySequence_Fast_GET_ITEM(seq, k));
            if (!kind) rc = dict_error(op, i, key, "a list holds ints or floats only", PySequence_Fast_GET_ITEM(seq, k));
            floats |= kind == 2;
        }
        for (Py_ssize_t k = 0; k < n && rc == 0; k++) {
            PyObject *item = PySequence_Fast_GET_ITEM(seq, k);
            if (floats) {
                ((double *)*store)[k] = PyFloat_AsDouble(item);
                if (((double *)*store)[k] == -1.0 && PyErr_Occurred()) rc = -1;
            } else {
                rc = dict_int(op, i, key, item, &((int64_t *)*store)[k]);
            }
        }
        Py_DECREF(seq);
        if (rc) return rc;
        if (floats) *e = oc_dict_floats(e->key, (const double *)*store, n);
        else *e = oc_dict_ints(e->key, (const int64_t *)*store, n);
        *store = (char *)*store + n * 8;
    } else {
        return dict_error(op, i, key, "expected an int, float, bool, str or a list of numbers", x);
    }
    return 0;
}

/* A dict as an oc_dict: one arena block holds the struct, the entries and
 * the list items; keys and strings point into the caller's objects. */
static int convert_dict(const oc_op *op, int i, PyObject *a, oc_value *val, arena *ar)
{
    if (!PyDict_Check(a)) return wrong_type(op, i, a);
    Py_ssize_t n = PyDict_Size(a), pos = 0, items = 0;
    PyObject *key, *x;
    while (PyDict_Next(a, &pos, &key, &x))
        if (is_number_list(x)) {
            Py_ssize_t len = PySequence_Size(x);
            if (len < 0) return -1;
            items += len;
        }
    oc_dict *d = arena_alloc(ar, sizeof *d + (size_t)n * sizeof(oc_dict_entry) + (size_t)items * 8);
    if (!d) return -1;
    oc_dict_entry *entries = (oc_dict_entry *)(d + 1);
    void *store = entries + n;
    pos = 0;
    for (Py_ssize_t k = 0; PyDict_Next(a, &pos, &key, &x); k++) {
        if (!PyUnicode_Check(key)) return dict_error(op, i, key, "keys must be str", key);
        Py_ssize_t klen = 0;
        entries[k].key = PyUnicode_AsUTF8AndSize(key, &klen);
        if (!entries[k].key) return -1;
        if (strlen(entries[k].key) != (size_t)klen)
            return dict_error(op, i, key, "a key may not hold a NUL character (the kernel gets a C string)", key);
        if (dict_value(op, i, key, x, &entries[k], &store) < 0) return -1;
    }
    *d = oc_dict_of(entries, n);
    *val = oc_value_dict(d);
    return 0;
}

/* Convert the bound arguments into oc_values; tensors land in `tensors`. */
static int convert(OpObject *o, PyObject **bound, int meta, oc_value *vals, oc_tensor *tensors, arena *ar)
{
    const oc_op *op = o->op;
    for (int i = 0; i < o->nargs; i++) {
        PyObject *a = bound[i];
        oc_arg_type ty = o->types[i];
        if (!a) {
            vals[i] = o->defaults[i];
            continue;
        }
        if (a == Py_None) {
            if (!o->optional[i]) {
                ocpy_arg_error(op, "argument %d '%s': expected %s, got None", i + 1, oc_op_arg_name(op, i),
                               oc_op_arg_schema_type(op, i));
                return -1;
            }
            vals[i] = oc_value_none();
            continue;
        }
        vals[i].type = ty;
        switch (ty) {
        case OC_ARG_TENSOR:
            if (ocpy_view_tensor(op, i, a, meta, &tensors[i], &ar->keep) < 0) return -1;
            vals[i].v.tensor = &tensors[i];
            break;
        case OC_ARG_TENSOR_LIST:
        case OC_ARG_INT_LIST:
        case OC_ARG_FLOAT_LIST:
            if (convert_list(o, i, a, meta, &vals[i], ar) < 0) return -1;
            break;
        case OC_ARG_FLOAT:
            if (to_double(op, i, a, &vals[i].v.f) < 0) return -1;
            break;
        case OC_ARG_INT:
            if (PyBool_Check(a)) return wrong_type(op, i, a);
            if (to_int64(op, i, a, &vals[i].v.i) < 0) return -1;
            break;
        case OC_ARG_BOOL:
            if (!PyBool_Check(a)) return wrong_type(op, i, a);
            vals[i].v.b = a == Py_True;
            break;
        case OC_ARG_SCALAR:
            if (to_scalar(op, i, a, &vals[i].v.scalar) < 0) return -1;
            break;
        case OC_ARG_STR:
        {
            if (!PyUnicode_Check(a)) return wrong_type(op, i, a);
            Py_ssize_t len = 0;
            vals[i].v.s = PyUnicode_AsUTF8AndSize(a, &len); /* lives as long as `a`, which the caller holds */
            if (!vals[i].v.s) return -1;
            size_t nul = strlen(vals[i].v.s);
            if (nul != (size_t)len) {
                /* the kernel gets a C string: it would end at the NUL (docs/c_api.md) */
                ocpy_arg_error(op, "argument %d '%s': the str holds a NUL character at index %zu; a kernel "
                               "receives a str as a C string, which would end there (pass the data as a "
                               "tensor instead)", i + 1, oc_op_arg_name(op, i), nul);
                return -1;
            }
            break;
        }
        case OC_ARG_DTYPE: {
            int dt = scalar_type_of(a);
            if (dt < 0) {
                const char *why = PyLong_Check(a) ? " (an int code is not a dtype)" : "";
                ocpy_arg_error(op, "argument %d '%s': expected a dtype: torch.float32, numpy.float32, "
                               "jax.numpy.float32, numpy.dtype('float32') or a name such as 'float32' (one of %s), "
                               "got %R%s", i + 1, oc_op_arg_name(op, i), dtype_names_text(), a, why);
                return -1;
            }
            vals[i].v.dtype = (oc_dtype)dt;
            break;
        }
        case OC_ARG_DICT:
            if (convert_dict(op, i, a, &vals[i], ar) < 0) return -1;
            break;
        case OC_ARG_NONE:
            break;
        }
    }
    return 0;
}

/* A call's arguments (positional and keyword) as oc_values in schema
 * order; `meta`: tensors are read for their shapes only. */
static int arguments(OpObject *o, PyObject *const *args, size_t nargsf, PyObject *kwnames, int meta,
                     oc_value *vals, oc_tensor *tensors, arena *ar, PyObject **bound)
{
    if (bind(o, args, PyVectorcall_NARGS(nargsf), kwnames, bound, false) < 0) return -1;
    return convert(o, bound, meta, vals, tensors, ar);
}

/* ---- the output allocator --------------------------------------------------- */

/* Results are made in the caller's kind: torch tensors for torch inputs
 * (and when nothing says otherwise and torch is there), NumPy arrays for
 * NumPy and other DLPack inputs (then converted back, e.g. to JAX arrays,
 * by `convert`). */
typedef enum { ALLOC_TORCH, ALLOC_NUMPY } alloc_kind;

typedef struct {
    PyThreadState *tstate; /* the caller's, saved while the GIL is released */
    pthread_t thread;      /* the caller's thread */
    const oc_op *op;
    alloc_kind kind;
    PyObject *results[OC_MAX_RESULTS];       /* the tensors or arrays made */
    void *managed[OC_MAX_RESULTS];           /* ... or torch tensors made without the GIL (torch_dlpack.c), to wrap */
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

static oc_status alloc_numpy(alloc_ctx *c, int index, const oc_tensor *meta, oc_tensor *out)
{
    if (ocpy_numpy_init() < 0) return OC_ERROR;
    if (!ocpy_np_dtypes[meta->dtype]) {
        PyErr_Format(PyExc_TypeError, "opcore: op '%s': a %s result needs NumPy support for that dtype "
                     "(bfloat16: pip install ml_dtypes)", oc_op_qualname(c->op), oc_dtype_name(meta->dtype));
        return OC_ERROR;
    }
    PyObject *sizes = sizes_tuple(meta);
    PyObject *arr = sizes ? PyObject_CallFunctionObjArgs(ocpy_np_empty, sizes, ocpy_np_dtypes[meta->dtype], NULL) : NULL;
    Py_XDECREF(sizes);
    if (!arr) return OC_ERROR;
    void *data = oc_numel(meta) ? ocpy_numpy_data(arr) : NULL;
    if (!data && oc_numel(meta)) {
        Py_DECREF(arr);
        return OC_ERROR;
    }
    oc_status st = oc_tensor_init(out, data, meta->dtype, meta->ndim, meta->sizes);
    if (st != OC_OK) {
        Py_DECREF(arr);
        return st;
    }
    c->results[index] = arr;
    return OC_OK;
}

static oc_status alloc_locked(alloc_ctx *c, int index, const oc_tensor *meta, oc_tensor *out)
{
    if (c->kind == ALLOC_NUMPY) return alloc_numpy(c, index, meta, out);
    if (!ocpy_empty_fn || !ocpy_dtypes[meta->dtype]) {
        PyErr_SetString(PyExc_RuntimeError, "opcore: torch is not registered (import opcore.torch)");
        return OC_ERROR;
    }
    /* torch.empty(sizes, dtype=dt): torches without the DLPack exchange
     * API (alloc_cb tries that first) */
    PyObject *sizes = sizes_tuple(meta);
    if (!sizes) return OC_ENOMEM;
    PyObject *argv[2] = {sizes, ocpy_dtypes[meta->dtype]};
    PyObject *t = PyObject_Vectorcall(ocpy_empty_fn, argv, 1, ocpy_kwnames_dtype);
    Py_DECREF(sizes);
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
    c->results[index] = t;
    return OC_OK;
}

static oc_status alloc_cb(void *vctx, int index, const oc_tensor *meta, oc_tensor *out)
{
    alloc_ctx *c = vctx;
    /* torch's DLPack exchange API allocates without the GIL */
    if (c->kind == ALLOC_TORCH && (c->managed[index] = ocpy_dlpack_alloc(meta, out))) return OC_OK;
    /* Re-take the GIL: on the calling thread (always, today) by restoring
     * its saved thread state, the cheapest way; on any other thread
     * through PyGILState. */
    bool same = c->tstate && pthread_equal(c->thread, pthread_self());
    PyGILState_STATE g = PyGILState_UNLOCKED;
    if (same) PyEval_RestoreThread(c->tstate);
    else g = PyGILState_Ensure();
    oc_status st = alloc_locked(c, index, meta, out);
    if (st != OC_OK && PyErr_Occurred()) {
        PyErr_Fetch(&c->exc_type, &c->exc_value, &c->exc_tb);
        oc_set_error(st, "op '%s': allocating result %d failed (a Python exception)", oc_op_qualname(c->op), index);
    }
    if (same) c->tstate = PyEval_SaveThread();
    else PyGILState_Release(g);
    return st;
}

/* ---- calling --------------------------------------------------------------- */

/* What the call returns: None, one result, or a tuple; aliased results are
 * the argument objects the caller passed. Steals the fresh results. */
static PyObject *results_object(OpObject *o, alloc_ctx *ctx, PyObject **bound)
{
    if (o->nresults == 0) Py_RETURN_NONE;
    PyObject *items[OC_MAX_RESULTS];
    for (int i = 0; i < o->nresults; i++) {
        items[i] = o->alias[i] >= 0 ? Py_NewRef(bound[o->alias[i]]) : ctx->results[i];
        ctx->results[i] = NULL;
    }
    if (o->nresults == 1) return items[0];
    PyObject *tup = PyTuple_New(o->nresults);
    if (!tup) {
        for (int i = 0; i < o->nresults; i++) Py_XDECREF(items[i]);
        return NULL;
    }
    for (int i = 0; i < o->nresults; i++) PyTuple_SET_ITEM(tup, i, items[i]);
    return tup;
}

/* The first array-like argument decides the kind of the results, and for
 * non-NumPy DLPack arrays (JAX...) how to convert them back: *convert is
 * set to a new reference to that converter, or NULL. */
static alloc_kind result_kind(OpObject *o, PyObject **bound, PyObject **convert)
{
    *convert = NULL;
    for (int i = 0; i < o->nargs; i++) {
        PyObject *a = bound[i];
        if (!a || a == Py_None || (o->types[i] != OC_ARG_TENSOR && o->types[i] != OC_ARG_TENSOR_LIST)) continue;
        if (o->types[i] == OC_ARG_TENSOR_LIST) {
            if (!PySequence_Check(a) || PySequence_Size(a) < 1) continue;
            a = PySequence_GetItem(a, 0);
            if (!a) {
                PyErr_Clear();
                continue;
            }
            Py_DECREF(a); /* the list holds it */
        }
        if (ocpy_is_tensor(a)) return ALLOC_TORCH;
        /* a JAX array: results go back through jax.numpy.asarray */
        PyObject *mod = PyObject_GetAttrString((PyObject *)Py_TYPE(a), "__module__");
        const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
        bool jax = m && strncmp(m, "jax", 3) == 0;
        Py_XDECREF(mod);
        PyErr_Clear();
        if (jax) {
            PyObject *jnp = PyImport_ImportModule("jax.numpy");
            *convert = jnp ? PyObject_GetAttrString(jnp, "asarray") : NULL;
            Py_XDECREF(jnp);
            PyErr_Clear();
        }
        return ALLOC_NUMPY;
    }
    return ocpy_empty_fn ? ALLOC_TORCH : ALLOC_NUMPY;
}

/* The torch tensors the call wrote (Tensor(a!) arguments, and the items
 * of Tensor(a!)[] ones) count an in-place change, as torch's own in-place
 * ops and torch.ops do: autograd then refuses a backward that saved them
 * before the call, instead of using the new values. -1 with an error. */
static int bump_versions(const OpObject *o, PyObject **bound)
{
    static PyObject *increment; /* torch._C._increment_version(tensors) */
    PyObject *written = NULL;
    int rc = 0;
    for (int i = 0; i < o->nargs && rc == 0; i++) {
        PyObject *a = bound[i];
        if (!a || a == Py_None || !oc_op_arg_mutable(o->op, i)) continue;
        PyObject *items = PyList_Check(a) || PyTuple_Check(a) ? a : NULL;
        Py_ssize_t n = items ? PySequence_Fast_GET_SIZE(items) : 1;
        for (Py_ssize_t k = 0; k < n && rc == 0; k++) {
            PyObject *t = items ? PySequence_Fast_GET_ITEM(items, k) : a;
            if (!ocpy_is_tensor(t)) continue;
            if (!written && !(written = PyList_New(0))) rc = -1;
            else rc = PyList_Append(written, t);
        }
    }
    if (rc == 0 && written) {
        if (!increment) {
            PyObject *m = PyImport_ImportModule("torch._C");
            increment = m ? PyObject_GetAttrString(m, "_increment_version") : NULL;
            Py_XDECREF(m);
        }
        PyObject *r = increment ? PyObject_CallOneArg(increment, written) : NULL;
        rc = r ? 0 : -1;
        Py_XDECREF(r);
    }
    Py_XDECREF(written);
    return rc;
}

static PyObject *op_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    OpObject *o = (OpObject *)self;
    oc_value vals[MAX_ARGS];
    oc_tensor tensors[MAX_ARGS];
    PyObject *bound[MAX_ARGS];
    arena ar = {.n = 0};
    if (arguments(o, args, nargsf, kwnames, 0, vals, tensors, &ar, bound) < 0) {
        arena_free(&ar);
        return NULL;
    }
    PyObject *convert = NULL;
    alloc_ctx ctx = {.thread = pthread_self(), .op = o->op};
    ctx.kind = result_kind(o, bound, &convert);
    oc_tensor outs[OC_MAX_RESULTS];
    /* The GIL is released while the op runs (kernels may run long); the
     * allocator callback re-takes it for torch.empty. */
    ctx.tstate = PyEval_SaveThread();
    /* On torch tensors, a multicore launch runs on torch's intra-op threads
     * as it does through torch.ops (they spin after torch's last op: waking
     * opcore's workers would fight them for the cores) */
    bool lent = ctx.kind == ALLOC_TORCH && ocpy_torch_lend_begin();
    oc_status st = oc_op_run_grid(o->op, vals, o->nargs, alloc_cb, &ctx, outs, o->grid.ndim ? &o->grid : NULL);
    ocpy_torch_lend_end(lent);
    PyEval_RestoreThread(ctx.tstate);
    if (st == OC_OK && o->writes && (ocpy_write_back(ar.keep) < 0 || bump_versions(o, bound) < 0))
        st = OC_ERROR;
    arena_free(&ar);
    for (int i = 0; i < o->nresults; i++) {
        if (!ctx.managed[i]) continue;
        if (st == OC_OK && !(ctx.results[i] = ocpy_dlpack_to_tensor(ctx.managed[i]))) st = OC_ERROR;
        else if (st != OC_OK) ocpy_dlpack_free(ctx.managed[i]);
        ctx.managed[i] = NULL;
    }
    if (st == OC_OK && convert) { /* back to the caller's framework (e.g. JAX) */
        for (int i = 0; i < o->nresults; i++) {
            if (!ctx.results[i]) continue;
            PyObject *c = PyObject_CallOneArg(convert, ctx.results[i]);
            if (!c) {
                st = OC_ERROR;
                break;
            }
            Py_SETREF(ctx.results[i], c);
        }
    }
    Py_XDECREF(convert);
    if (st == OC_OK) return results_object(o, &ctx, bound);
    for (int i = 0; i < o->nresults; i++) Py_XDECREF(ctx.results[i]);
    if (PyErr_Occurred()) return NULL; /* wrapping a result failed */
    if (ctx.exc_type) {
        PyErr_Restore(ctx.exc_type, ctx.exc_value, ctx.exc_tb);
        return NULL;
    }
    return ocpy_raise_status(st, o->op);
}

/* op.bind(args, kwargs=None, strict=False): the binder, for the Python call
 * paths that need the values in schema order before (or instead of)
 * calling the op. */
static PyObject *op_bind(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"args", "kwargs", "strict", NULL};
    PyObject *pos, *kwargs = NULL;
    int strict = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|Op:bind", kwlist, &PyTuple_Type, &pos, &kwargs, &strict))
        return NULL;
    if (kwargs == Py_None) kwargs = NULL;
    if (kwargs && !PyDict_Check(kwargs)) return PyErr_Format(PyExc_TypeError, "bind: kwargs must be a dict");
    OpObject *o = (OpObject *)self;
    Py_ssize_t n = PyTuple_GET_SIZE(pos), nk = kwargs ? PyDict_GET_SIZE(kwargs) : 0;
    PyObject *bound[MAX_ARGS], *kwnames = NULL, *result = NULL;
    PyObject **stack = PyMem_Malloc((size_t)(n + nk + 1) * sizeof *stack);
    if (!stack) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) stack[i] = PyTuple_GET_ITEM(pos, i);
    if (nk) {
        kwnames = PyTuple_New(nk);
        if (!kwnames) goto done;
        Py_ssize_t it = 0, k = 0;
        PyObject *key, *value;
        while (PyDict_Next(kwargs, &it, &key, &value)) {
            if (!PyUnicode_Check(key)) {
                PyErr_SetString(PyExc_TypeError, "bind: keywords must be strings");
                goto done;
            }
            PyTuple_SET_ITEM(kwnames, k, Py_NewRef(key));
            stack[n + k++] = value;
        }
    }
    if (bind(o, stack, n, kwnames, bound, strict) < 0) goto done;
    result = PyList_New(o->nargs);
    for (int i = 0; result && i < o->nargs; i++) PyList_SET_ITEM(result, i, Py_NewRef(bound[i] ? bound[i] : ocpy_missing));
done:
    Py_XDECREF(kwnames);
    PyMem_Free(stack);
    return result;
}

static PyObject *metas_list(const oc_tensor *metas, int n)
{
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        PyObject *sizes = sizes_tuple(&metas[i]);
        PyObject *item = sizes ? Py_BuildValue("(Ns)", sizes, oc_dtype_name(metas[i].dtype)) : NULL;
        if (!item) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *op_infer(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    OpObject *o = (OpObject *)self;
    oc_value vals[MAX_ARGS];
    oc_tensor tensors[MAX_ARGS];
    PyObject *bound[MAX_ARGS];
    arena ar = {.n = 0};
    oc_tensor metas[OC_MAX_RESULTS];
    oc_status st = OC_OK;
    int rc = arguments(o, args, nargsf, kwnames, 1, vals, tensors, &ar, bound);
    if (rc == 0) st = oc_op_infer(o->op, vals, o->nargs, metas);
    arena_free(&ar);
    if (rc < 0) return NULL;
    if (st != OC_OK) return ocpy_raise_status(st, o->op);
    return metas_list(metas, o->nresults);
}

/* ---- dynamic shapes: op.trace(runs) ------------------------------------------ */

static const char *const dim_op_names[] = {"const", "input", "add", "sub", "mul", "div", "ceil_div", "mod", "min", "max"};

static PyObject *dim_expr(const oc_shape_trace *tr, int node)
{
    const oc_dim_node *n = &tr->nodes[node];
    switch (n->op) {
    case OC_DIM_CONST: return PyLong_FromLongLong(n->value);
    case OC_DIM_INPUT: return Py_BuildValue("(siii)", "input", n->arg, n->item, n->dim);
    default: {
        PyObject *lhs = dim_expr(tr, n->lhs), *rhs = lhs ? dim_expr(tr, n->rhs) : NULL;
        if (!rhs) {
            Py_XDECREF(lhs);
            return NULL;
        }
        return Py_BuildValue("(sNN)", dim_op_names[n->op], lhs, rhs);
    }
    }
}

/* op.trace(runs): runs is a list of (args tuple, kwargs dict), one per
 * assignment of the dynamic sizes (tensors: anything with .shape and
 * .dtype). Returns [(dtype name, [expr, ...]), ...] per result; an expr is
 * an int, ("input", arg, item, dim) or (op, lhs, rhs). */
static PyObject *op_trace(PyObject *self, PyObject *runs_obj)
{
    OpObject *o = (OpObject *)self;
    PyObject *runs = PySequence_Fast(runs_obj, "trace(runs): runs must be a list of (args, kwargs)");
    if (!runs) return NULL;
    Py_ssize_t nruns = PySequence_Fast_GET_SIZE(runs);
    if (nruns < 2 || nruns > 8) {
        Py_DECREF(runs);
        return PyErr_Format(PyExc_ValueError, "trace(runs): 2 to 8 runs, got %zd", nruns);
    }
    struct run {
        oc_value vals[MAX_ARGS];
        oc_tensor tensors[MAX_ARGS];
        PyObject *bound[MAX_ARGS];
        arena ar;
    } *rs = PyMem_Calloc((size_t)nruns, sizeof *rs);
    oc_shape_trace *tr = PyMem_Malloc(sizeof *tr);
    const oc_value *argv[8];
    PyObject *result = NULL;
    if (!rs || !tr) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t r = 0; r < nruns; r++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(runs, r), *a, *kw;
        if (!PyArg_ParseTuple(pair, "O!O!:trace run", &PyTuple_Type, &a, &PyDict_Type, &kw)) goto done;
        /* keyword arguments after the positional ones, as vectorcall has them */
        Py_ssize_t na = PyTuple_GET_SIZE(a), nk = PyDict_GET_SIZE(kw), pos = 0, k = 0;
        PyObject *flat[MAX_ARGS], *key, *value;
        if (na + nk > MAX_ARGS) {
            ocpy_arg_error(o->op, "too many arguments");
            goto done;
        }
        PyObject *kwnames = nk ? PyTuple_New(nk) : NULL;
        for (Py_ssize_t i = 0; i < na; i++) flat[i] = PyTuple_GET_ITEM(a, i);
        while (PyDict_Next(kw, &pos, &key, &value)) {
            flat[na + k] = value;
            PyTuple_SET_ITEM(kwnames, k++, Py_NewRef(key));
        }
        int rc = arguments(o, flat, (size_t)na, kwnames, 1, rs[r].vals, rs[r].tensors, &rs[r].ar, rs[r].bound);
        Py_XDECREF(kwnames);
        if (rc < 0) goto done;
        argv[r] = rs[r].vals;
    }
    oc_status st = oc_op_trace_shapes(o->op, argv, (int)nruns, o->nargs, tr);
    if (st != OC_OK) {
        ocpy_raise_status(st, o->op);
        goto done;
    }
    result = PyList_New(tr->num_results);
    for (int i = 0; result && i < tr->num_results; i++) {
        PyObject *dims = PyList_New(tr->ndims[i]);
        for (int d = 0; dims && d < tr->ndims[i]; d++) {
            PyObject *e = dim_expr(tr, tr->sizes[i][d]);
            if (!e) Py_CLEAR(dims);
            else PyList_SET_ITEM(dims, d, e);
        }
        PyObject *item = dims ? Py_BuildValue("(sN)", oc_dtype_name(tr->dtypes[i]), dims) : NULL;
        if (!item) Py_CLEAR(result);
        else PyList_SET_ITEM(result, i, item);
    }
done:
    for (Py_ssize_t r = 0; rs && r < nruns; r++) arena_free(&rs[r].ar);
    PyMem_Free(rs);
    PyMem_Free(tr);
    Py_DECREF(runs);
    return result;
}

/* ---- attributes ------------------------------------------------------------ */

static PyObject *value_to_py(const oc_value *v)
{
    switch (v->type) {
    case OC_ARG_FLOAT: return PyFloat_FromDouble(v->v.f);
    case OC_ARG_INT: return PyLong_FromLongLong(v->v.i);
    case OC_ARG_BOOL: return PyBool_FromLong(v->v.b);
    case OC_ARG_STR: return PyUnicode_FromString(v->v.s);
    case OC_ARG_DTYPE: return PyUnicode_FromString(oc_dtype_name(v->v.dtype));
    case OC_ARG_SCALAR:
        switch (v->v.scalar.kind) {
        case OC_SCALAR_FLOAT: return PyFloat_FromDouble(v->v.scalar.value.f);
        case OC_SCALAR_INT: return PyLong_FromLongLong(v->v.scalar.value.i);
        default: return PyBool_FromLong(v->v.scalar.value.b);
        }
    case OC_ARG_INT_LIST:
    case OC_ARG_FLOAT_LIST: {
        int64_t n = v->type == OC_ARG_INT_LIST ? v->v.ints.count : v->v.floats.count;
        PyObject *list = PyList_New((Py_ssize_t)n);
        for (int64_t k = 0; list && k < n; k++) {
            PyObject *x = v->type == OC_ARG_INT_LIST ? PyLong_FromLongLong(v->v.ints.values[k])
                                                     : PyFloat_FromDouble(v->v.floats.values[k]);
            if (!x) Py_CLEAR(list);
            else PyList_SET_ITEM(list, (Py_ssize_t)k, x);
        }
        return list;
    }
    case OC_ARG_TENSOR:
    case OC_ARG_TENSOR_LIST:
    case OC_ARG_DICT: /* has no default */
    case OC_ARG_NONE: break;
    }
    Py_RETURN_NONE;
}

static PyObject *default_of(OpObject *o, int i)
{
    return o->has_default[i] ? value_to_py(&o->defaults[i]) : Py_NewRef(Py_None);
}

/* [(name, base type, has_default, default), ...] */
static PyObject *op_get_args(PyObject *self, void *closure)
{
    (void)closure;
    OpObject *o = (OpObject *)self;
    PyObject *list = PyList_New(o->nargs);
    for (int i = 0; list && i < o->nargs; i++) {
        PyObject *dflt = default_of(o, i);
        PyObject *item = dflt ? Py_BuildValue("(OsON)", PyTuple_GET_ITEM(o->argnames, i), oc_arg_type_name(o->types[i]),
                                              o->has_default[i] ? Py_True : Py_False, dflt)
                              : NULL;
        if (!item) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* [{name, type, schema_type, optional, mutable, list_len, keyword_only,
 *   has_default, default}, ...] */
static PyObject *op_get_arg_info(PyObject *self, void *closure)
{
    (void)closure;
    OpObject *o = (OpObject *)self;
    const oc_op *op = o->op;
    PyObject *list = PyList_New(o->nargs);
    for (int i = 0; list && i < o->nargs; i++) {
        PyObject *dflt = default_of(o, i);
        PyObject *item = dflt ? Py_BuildValue(
                                    "{s:O,s:s,s:s,s:O,s:O,s:L,s:O,s:O,s:N}", "name", PyTuple_GET_ITEM(o->argnames, i),
                                    "type", oc_arg_type_name(o->types[i]), "schema_type", oc_op_arg_schema_type(op, i),
                                    "optional", o->optional[i] ? Py_True : Py_False, "mutable",
                                    oc_op_arg_mutable(op, i) ? Py_True : Py_False, "list_len", (long long)o->list_len[i],
                                    "keyword_only", oc_op_arg_keyword_only(op, i) ? Py_True : Py_False, "has_default",
                                    o->has_default[i] ? Py_True : Py_False, "default", dflt)
                              : NULL;
        if (!item) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* [(name, alias argument index or None), ...] */
static PyObject *op_get_results(PyObject *self, void *closure)
{
    (void)closure;
    OpObject *o = (OpObject *)self;
    PyObject *list = PyList_New(o->nresults);
    for (int i = 0; list && i < o->nresults; i++) {
        PyObject *alias = o->alias[i] >= 0 ? PyLong_FromLong(o->alias[i]) : Py_NewRef(Py_None);
        PyObject *item = alias ? Py_BuildValue("(sN)", oc_op_result_name(o->op, i), alias) : NULL;
        if (!item) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, item);
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

static PyObject *op_get_multicore(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(oc_op_multicore(((OpObject *)self)->op));
}

static PyObject *grid_tuple(const oc_grid *g)
{
    if (!g->ndim) Py_RETURN_NONE;
    PyObject *t = PyTuple_New(g->ndim);
    for (int d = 0; t && d < g->ndim; d++) {
        PyObject *v = PyLong_FromLongLong(g->dims[d]);
        if (!v) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, d, v);
    }
    return t;
}

static PyObject *op_get_grid(PyObject *self, void *c)
{
    (void)c;
    return grid_tuple(&((OpObject *)self)->grid);
}

int ocpy_parse_grid(PyObject *key, const char *qualname, oc_grid *out)
{
    PyObject *seq = PyTuple_Check(key) || PyList_Check(key) ? Py_NewRef(key) : PyTuple_Pack(1, key);
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Size(seq);
    int rc = -1;
    if (n < 1 || n > OC_MAX_GRID_DIMS) {
        PyErr_Format(PyExc_ValueError, "op '%s': a launch grid has 1 to %d axes, got %zd", qualname,
                     OC_MAX_GRID_DIMS, n);
        goto done;
    }
    out->ndim = (int)n;
    for (Py_ssize_t d = 0; d < n; d++) {
        PyObject *item = PySequence_GetItem(seq, d);
        PyObject *ix = item && PyIndex_Check(item) ? PyNumber_Index(item) : NULL;
        int overflow = 0;
        long long v = ix ? PyLong_AsLongLongAndOverflow(ix, &overflow) : -2;
        if (item && !PyIndex_Check(item))
            PyErr_Format(PyExc_TypeError, "op '%s': axis %zd of the launch grid must be an int, got %s", qualname,
                         d, Py_TYPE(item)->tp_name);
        else if (overflow)
            PyErr_Format(PyExc_ValueError,
                         "op '%s': axis %zd of the launch grid is %S; every axis needs %s", qualname, d,
                         ix, overflow > 0 ? "at most 2**63 - 1 programs" : "at least 1 program");
        Py_XDECREF(ix);
        Py_XDECREF(item);
        if (PyErr_Occurred()) goto done;
        if (v < 1) {
            PyErr_Format(PyExc_ValueError, "op '%s': axis %zd of the launch grid is %lld; every axis needs at "
                         "least 1 program", qualname, d, v);
            goto done;
        }
        out->dims[d] = v;
    }
    rc = 0;
done:
    Py_DECREF(seq);
    return rc;
}

/* op[2, 2], op[(2, 2)], op[7]: the op launched on that grid (NKI's
 * kernel[grid]), as an op object of its own. */
static PyObject *op_subscript(PyObject *self, PyObject *key)
{
    OpObject *o = (OpObject *)self;
    oc_grid g = {0};
    if (ocpy_parse_grid(key, oc_op_qualname(o->op), &g) < 0) return NULL;
    OpObject *r = (OpObject *)ocpy_op_new(o->op);
    if (r) r->grid = g;
    return (PyObject *)r;
}

static PyMappingMethods op_as_mapping = {.mp_subscript = op_subscript};

static PyObject *op_get_strided(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(oc_op_strided(((OpObject *)self)->op));
}

static PyObject *op_repr(PyObject *self)
{
    OpObject *o = (OpObject *)self;
    if (!o->grid.ndim)
        return PyUnicode_FromFormat("<opcore op %s: %s>", oc_op_qualname(o->op), oc_op_schema(o->op));
    PyObject *g = grid_tuple(&o->grid);
    PyObject *r = g ? PyUnicode_FromFormat("<opcore op %s%R: %s>", oc_op_qualname(o->op), g, oc_op_schema(o->op)) : NULL;
    Py_XDECREF(g);
    return r;
}

static void op_dealloc(PyObject *self)
{
    OpObject *o = (OpObject *)self;
    Py_XDECREF(o->argnames);
    Py_XDECREF(o->qualname);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef op_methods[] = {
    {"bind", (PyCFunction)(void (*)(void))op_bind, METH_VARARGS | METH_KEYWORDS,
     "bind(args, kwargs=None, strict=False) -> list\nThe call's values in schema order, opcore._C.MISSING "
     "where a default applies; raises OpArgumentError as a call would. strict=True: keyword-only arguments "
     "only by keyword, errors in opcore.jax's form (arguments by name and schema type)."},
    {"infer", (PyCFunction)(void (*)(void))op_infer, METH_FASTCALL | METH_KEYWORDS,
     "infer(*args, **kwargs) -> [(sizes, dtype_name), ...]\nRun the shape function on tensors' shapes and dtypes "
     "only, one entry per result: FakeTensors, meta tensors and plain shape specs (.shape and .dtype, e.g. "
     "jax.ShapeDtypeStruct) work."},
    {"trace", op_trace, METH_O,
     "trace(runs) -> [(dtype_name, [expr, ...]), ...]\nDynamic shapes: run the shape function once per "
     "(args, kwargs) in runs (the same arguments with other values for the dynamic sizes) and explain each "
     "result size as an int, ('input', arg, item, dim) or (op, lhs, rhs) with op in add, sub, mul, div, "
     "ceil_div, mod, min, max."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef op_getset[] = {
    {"qualname", op_get_qualname, NULL, "'library::op'", NULL},
    {"name", op_get_name, NULL, "the op's name", NULL},
    {"schema", op_get_schema, NULL, "the schema as written in oc_def", NULL},
    {"library", op_get_library, NULL, "the library's name (the namespace)", NULL},
    {"multicore", op_get_multicore, NULL, "True if the kernel runs on every core", NULL},
    {"grid", op_get_grid, NULL, "the launch grid given with op[grid] (a tuple), else None (the op's own)", NULL},
    {"strided", op_get_strided, NULL,
     "True if the kernel takes any strides (.strided = true); else its tensors arrive dense and row-major", NULL},
    {"args", op_get_args, NULL, "[(name, type, has_default, default), ...]", NULL},
    {"arg_info", op_get_arg_info, NULL, "one dict per argument: name, type, schema_type, optional, mutable, "
     "list_len, keyword_only, has_default, default", NULL},
    {"results", op_get_results, NULL, "[(name, index of the argument it returns or None), ...]", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject ocpy_OpType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "opcore._C.Op",
    .tp_basicsize = sizeof(OpObject),
    .tp_dealloc = op_dealloc,
    .tp_vectorcall_offset = offsetof(OpObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = op_repr,
    .tp_as_mapping = &op_as_mapping,
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
    o->grid.ndim = 0;
    o->nargs = n;
    o->npositional = n;
    o->nresults = oc_op_num_results(op);
    o->argnames = PyTuple_New(n);
    o->qualname = PyUnicode_FromString(oc_op_qualname(op));
    if (!o->argnames || !o->qualname) {
        Py_DECREF(o);
        return NULL;
    }
    for (int i = 0; i < o->nresults; i++) o->alias[i] = oc_op_result_alias(op, i);
    o->writes = false;
    for (int i = 0; i < n; i++) {
        o->writes |= oc_op_arg_mutable(op, i);
        o->types[i] = oc_op_arg_type(op, i);
        o->optional[i] = oc_op_arg_optional(op, i);
        o->list_len[i] = oc_op_arg_list_len(op, i);
        memset(&o->defaults[i], 0, sizeof o->defaults[i]);
        o->has_default[i] = oc_op_arg_default(op, i, &o->defaults[i]);
        if (oc_op_arg_keyword_only(op, i) && o->npositional == n) o->npositional = i;
        PyObject *name = PyUnicode_InternFromString(oc_op_arg_name(op, i));
        if (!name) {
            Py_DECREF(o);
            return NULL;
        }
        PyTuple_SET_ITEM(o->argnames, i, name);
    }
    return (PyObject *)o;
}
