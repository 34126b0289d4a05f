/* src/python/module.c — the opcore._C extension module.
 *
 *   load_library(path) -> dict      load an op library (idempotent per file)
 *   find_op("lib::op") -> Op        an op of a loaded library
 *   build(name, compute_srcs, shape_srcs, out_dir=None, multicore=False,
 *         stack_size=0, cflags=(), include_dirs=(), debug=False,
 *         verbose=False, force=False, vec_report=False) -> (path, cached, seconds[, report])
 *   new_project(dir, name)          what `opcore new` writes
 *   include_dir(), lib_dir()        what oc_build uses
 *   cache_dir()                     opcore's cache root (oc_build_cache_dir)
 *   _set_torch(Tensor, empty, dtypes)   opcore.torch hands over torch
 *   OpError, OpArgumentError, BuildError
 *   profiler_* (src/python/profiler_methods.c)
 */
#include "pyopcore.h"

#include <stdlib.h>
#include <stdio.h>

#include "opcore/build.h"
#include "opcore/library.h"

extern PyMethodDef oc_py_profiler_methods[];
extern PyMethodDef ocpy_torch_native_methods[]; /* torch_native.c */

/* ---- libraries -------------------------------------------------------------- */

static PyObject *library_info(const oc_library *lib)
{
    int n = oc_library_num_ops(lib);
    PyObject *ops = PyList_New(n);
    if (!ops) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *op = ocpy_op_new(oc_library_op(lib, i));
        if (!op) {
            Py_DECREF(ops);
            return NULL;
        }
        PyList_SET_ITEM(ops, i, op);
    }
    const char *cflags = oc_library_cflags(lib);
    return Py_BuildValue("{s:s,s:N,s:O,s:K,s:s,s:N,s:N}", "name", oc_library_name(lib), "path",
                         PyUnicode_DecodeFSDefault(oc_library_path(lib)), "multicore",
                         oc_library_multicore(lib) ? Py_True : Py_False, "stack_size",
                         (unsigned long long)oc_library_stack_size(lib), "cflags", cflags ? cflags : "", "ops",
                         ops, "handle", PyLong_FromVoidPtr((void *)lib));
}

static PyObject *py_load_library(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *bytes;
    if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
    oc_library *lib;
    oc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = oc_library_load(PyBytes_AS_STRING(bytes), &lib);
    Py_END_ALLOW_THREADS
    Py_DECREF(bytes);
    if (st != OC_OK) {
        if (st == OC_ENOTFOUND) {
            PyErr_SetString(PyExc_FileNotFoundError, oc_errmsg());
            return NULL;
        }
        return ocpy_raise_status(st, NULL);
    }
    return library_info(lib);
}

static PyObject *py_forget_library(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    oc_library *lib = oc_library_find(name);
    if (!lib) return PyErr_Format(PyExc_KeyError, "no op library '%s' is loaded", name);
    oc_status st;
    /* It waits for the library's running calls, which may need the GIL
     * (a direct call's allocator takes it): release it meanwhile. */
    Py_BEGIN_ALLOW_THREADS
    st = oc_library_forget(lib);
    Py_END_ALLOW_THREADS
    if (st != OC_OK) return ocpy_raise_status(st, NULL);
    Py_RETURN_NONE;
}

static PyObject *py_find_op(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    const oc_op *op = oc_op_find(name);
    if (!op) {
        PyErr_SetString(PyExc_KeyError, oc_errmsg());
        return NULL;
    }
    return ocpy_op_new(op);
}

static PyObject *py_check_schema(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *text = PyUnicode_AsUTF8(arg);
    if (!text) return NULL;
    char proto[4096];
    if (oc_schema_check(text, proto, sizeof proto) != OC_OK) return ocpy_raise_status(OC_EINVAL, NULL);
    return PyUnicode_FromString(proto);
}

/* ---- building --------------------------------------------------------------- */

/* A list of str/PathLike -> NULL-terminated array of fs-encoded bytes objects. */
typedef struct {
    PyObject *holder; /* list of bytes */
    const char **items;
    int n;
} strlist;

static void strlist_free(strlist *s)
{
    Py_XDECREF(s->holder);
    PyMem_Free(s->items);
}

static int strlist_from(PyObject *seq_obj, const char *what, strlist *s)
{
    s->holder = NULL;
    s->items = NULL;
    s->n = 0;
    if (!seq_obj || seq_obj == Py_None) return 0;
    if (PyUnicode_Check(seq_obj) || PyBytes_Check(seq_obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of paths or strings, not a single string", what);
        return -1;
    }
    PyObject *seq = PySequence_Fast(seq_obj, what);
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    s->holder = PyList_New(n);
    s->items = PyMem_Calloc((size_t)n + 1, sizeof *s->items);
    if (!s->holder || !s->items) {
        Py_DECREF(seq);
        strlist_free(s);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b;
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(seq, i), &b)) {
            Py_DECREF(seq);
            strlist_free(s);
            return -1;
        }
        PyList_SET_ITEM(s->holder, i, b);
        s->items[i] = PyBytes_AS_STRING(b);
    }
    Py_DECREF(seq);
    s->n = (int)n;
    return 0;
}

static PyObject *py_build(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"name", "compute_srcs", "shape_srcs", "out_dir", "multicore", "stack_size",
                             "cflags", "include_dirs", "debug", "verbose", "force", "vec_report", NULL};
    const char *name;
    PyObject *compute = NULL, *shape = NULL, *out_dir_o = Py_None, *cflags = NULL, *incs = NULL;
    int multicore = 0, debug = 0, verbose = 0, force = 0, vec_report = 0;
    unsigned long long stack_size = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sOO|OpKOOpppp:build", kwlist, &name, &compute, &shape, &out_dir_o,
                                     &multicore, &stack_size, &cflags, &incs, &debug, &verbose, &force,
                                     &vec_report))
        return NULL;
    strlist c = {0}, s = {0}, f = {0}, in = {0};
    PyObject *out_dir_b = NULL;
    PyObject *result = NULL;
    if (strlist_from(compute, "compute_srcs", &c) < 0 || strlist_from(shape, "shape_srcs", &s) < 0 ||
        strlist_from(cflags, "cflags", &f) < 0 || strlist_from(incs, "include_dirs", &in) < 0)
        goto done;
    if (out_dir_o != Py_None && !PyUnicode_FSConverter(out_dir_o, &out_dir_b)) goto done;

    oc_build_options o = {0};
    o.name = name;
    o.compute_srcs = c.items;
    o.num_compute_srcs = c.n;
    o.shape_srcs = s.items;
    o.num_shape_srcs = s.n;
    o.out_dir = out_dir_b ? PyBytes_AS_STRING(out_dir_b) : NULL;
    o.multicore = multicore;
    o.stack_size = (size_t)stack_size;
    o.cflags = f.items;
    o.num_cflags = f.n;
    o.include_dirs = in.items;
    o.num_include_dirs = in.n;
    o.debug = debug;
    o.verbose = verbose;
    o.force = force;
    o.vec_report = vec_report;
    oc_build_result r;
    oc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = oc_build(&o, &r);
    Py_END_ALLOW_THREADS
    if (st != OC_OK) {
        ocpy_raise(st == OC_EBUILD ? ocpy_BuildError : (st == OC_EINVAL ? PyExc_ValueError : ocpy_BuildError),
                   oc_errmsg(), st, NULL);
        goto done;
    }
    if (vec_report) /* (path, cached, seconds, report) */
        result = Py_BuildValue("(NOds)", PyUnicode_DecodeFSDefault(r.path), r.cached ? Py_True : Py_False,
                               r.seconds, r.vec_report ? r.vec_report : "");
    else
        result = Py_BuildValue("(NOd)", PyUnicode_DecodeFSDefault(r.path), r.cached ? Py_True : Py_False, r.seconds);
    free(r.vec_report);
done:
    strlist_free(&c);
    strlist_free(&s);
    strlist_free(&f);
    strlist_free(&in);
    Py_XDECREF(out_dir_b);
    return result;
}

static PyObject *py_new_project(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *dir_b = NULL;
    const char *name;
    if (!PyArg_ParseTuple(args, "O&s:new_project", PyUnicode_FSConverter, &dir_b, &name)) return NULL;
    oc_status st = oc_new_project(PyBytes_AS_STRING(dir_b), name);
    Py_DECREF(dir_b);
    if (st != OC_OK) {
        PyErr_SetString(st == OC_EEXIST ? PyExc_FileExistsError : st == OC_EINVAL ? PyExc_ValueError : PyExc_OSError,
                        oc_errmsg());
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *py_include_dir(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyUnicode_DecodeFSDefault(oc_build_include_dir());
}

static PyObject *py_lib_dir(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyUnicode_DecodeFSDefault(oc_build_lib_dir());
}

static PyObject *py_cache_dir(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyUnicode_DecodeFSDefault(oc_build_cache_dir());
}

/* ---- torch hand-over -------------------------------------------------------- */

static PyObject *py_set_torch(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *tensor_type, *empty, *dtypes;
    if (!PyArg_ParseTuple(args, "O!OO!:_set_torch", &PyType_Type, &tensor_type, &empty, &PyTuple_Type, &dtypes))
        return NULL;
    if (PyTuple_GET_SIZE(dtypes) != OC_NUM_DTYPES)
        return PyErr_Format(PyExc_ValueError, "_set_torch: expected %d dtypes", OC_NUM_DTYPES);
    Py_XSETREF(ocpy_tensor_type, Py_NewRef(tensor_type));
    Py_XSETREF(ocpy_empty_fn, Py_NewRef(empty));
    for (int i = 0; i < OC_NUM_DTYPES; i++) Py_XSETREF(ocpy_dtypes[i], Py_NewRef(PyTuple_GET_ITEM(dtypes, i)));
    ocpy_tensor_attrs_init();
    Py_RETURN_NONE;
}

static PyObject *py_dtype_names(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    PyObject *t = PyTuple_New(OC_NUM_DTYPES);
    if (!t) return NULL;
    for (int i = 0; i < OC_NUM_DTYPES; i++) PyTuple_SET_ITEM(t, i, PyUnicode_FromString(oc_dtype_name((oc_dtype)i)));
    return t;
}

/* The status codes' names, in code order (OC_STATUS_MAP, opcore/status.h). */
static PyObject *py_status_names(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
#define OC_STATUS_ONE_(...) +1
    enum { num_status = 0 OC_STATUS_MAP(OC_STATUS_ONE_) };
#undef OC_STATUS_ONE_
    PyObject *t = PyTuple_New(num_status);
    for (int i = 0; t && i < num_status; i++) {
        PyObject *name = PyUnicode_FromString(oc_status_name((oc_status)i));
        if (!name) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, name);
    }
    return t;
}

static PyMethodDef methods[] = {
    {"load_library", py_load_library, METH_O,
     "load_library(path) -> dict\nLoad an op library built by opcore (loading the same file again is a "
     "no-op); returns {name, path, multicore, stack_size, cflags, ops: [Op]}."},
    {"find_op", py_find_op, METH_O, "find_op('library::op') -> Op"},
    {"forget_library", py_forget_library, METH_O,
     "forget_library(name)\nUnregister a loaded library's ops; its code stays mapped, so Op objects and calls "
     "in flight stay valid."},
    {"check_schema", py_check_schema, METH_O,
     "check_schema(schema) -> str\nCheck an op schema as oc_def will; returns the C prototype its kernel must "
     "have, or raises OpArgumentError saying what is wrong where."},
    {"build", (PyCFunction)(void (*)(void))py_build, METH_VARARGS | METH_KEYWORDS,
     "build(name, compute_srcs, shape_srcs, out_dir=None, multicore=False, stack_size=0, cflags=(), "
     "include_dirs=(), debug=False, verbose=False, force=False, vec_report=False) -> (path, cached, seconds)\n"
     "Build (or reuse from the content-hash cache) lib<name>.so; raises BuildError with the compiler's "
     "output. With vec_report=True: (path, cached, seconds, report)."},
    {"new_project", py_new_project, METH_VARARGS,
     "new_project(dir, name)\nWrite a small op project (what `opcore new NAME DIR` does)."},
    {"include_dir", py_include_dir, METH_NOARGS, "include_dir() -> str: opcore's headers, as builds use them"},
    {"lib_dir", py_lib_dir, METH_NOARGS, "lib_dir() -> str: libopcore's directory, as builds use it"},
    {"cache_dir", py_cache_dir, METH_NOARGS, "cache_dir() -> str: opcore's cache root, as the CLI uses it "
     "(\"\" when no HOME is set)"},
    {"dtype_names", py_dtype_names, METH_NOARGS, "dtype_names() -> tuple of names in oc_dtype order"},
    {"status_names", py_status_names, METH_NOARGS,
     "status_names() -> tuple of the status names ('OC_OK', 'OC_ERROR', ...) indexed by code"},
    {"_set_torch", py_set_torch, METH_VARARGS, "_set_torch(Tensor, empty, dtypes): used by opcore.torch"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "opcore._C", "opcore's C extension: load, build and call C tensor operators.", -1,
    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__C(void)
{
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    if (PyModule_AddFunctions(m, oc_py_profiler_methods) < 0) goto fail;
    if (PyModule_AddFunctions(m, ocpy_torch_native_methods) < 0) goto fail;
    if (ocpy_state_init(m) < 0) goto fail;

    if (PyType_Ready(&ocpy_OpType) < 0) goto fail;
    if (PyModule_AddObjectRef(m, "Op", (PyObject *)&ocpy_OpType) < 0) goto fail;
    if (PyModule_AddIntConstant(m, "ABI_VERSION", OC_ABI_VERSION) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
