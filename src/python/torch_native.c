/* src/python/torch_native.c — opcore ops as native kernels of torch's
 * dispatcher: torch.ops calls the C op without entering Python.
 *
 * The kernels live in the torch kernel shim (src/torch/boxed_kernel.cc and
 * autograd_kernel.cc), built per torch version against its headers and
 * loaded here (opcore/_torch_native.py finds it). This file registers ops
 * through it and lends it the two things it cannot do alone:
 *
 *   fail      raise opcore's exception (opcore.OpError with .op and .status,
 *             OpArgumentError for bad arguments) and carry it through
 *             torch's dispatcher as a C++ throw (torch_native_throw.cc), so
 *             torch.ops callers catch what a direct call raises;
 *   lending   torch's intra-op threads to multicore launches, also for
 *             direct calls on torch tensors (op.c), through the stable C
 *             ABI's torch_parallel_for: no shim needed for that.
 */
#include "pyopcore.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "opcore/engine.h"
#include "torch_native.h"

/* Lend torch's threads to multicore launches (_torch_native_lend_threads):
 * on by default. A lent launch ends only when every torch thread has
 * joined torch_parallel_for, so one descheduled torch thread stalls it
 * (bench/grid_bench.py measured 8 ms stalls at p90 under load); the engine
 * stops asking for a second after such a stall (src/engine/pool.c,
 * docs/engine.md "Lending torch's threads"). */
static bool lend_torch = true;

static struct {
    int32_t (*parallel_for)(int64_t begin, int64_t end, int64_t grain, void (*fn)(int64_t, int64_t, void *),
                            void *ctx);
    int32_t (*get_num_threads)(uint32_t *ret);
} T;

/* The shim's entry points (NULL: not loaded). */
static struct {
    int (*impl)(const oc_op *op, const char *ns, const char *name, int fresh_only, void **reg, char *err,
                size_t errlen);
    void (*drop)(void *reg);
    int (*swap)(void *reg, const oc_op *op);
    void (*retire)(void *reg);
    uint64_t (*prepared)(void);
    int (*autograd)(const char *forward, const char *backward, const int32_t *feed_kind, const int32_t *feed_index,
                    int nfeed, const int32_t *targets, int ntargets, void **reg, char *err, size_t errlen);
    void (*autograd_drop)(void *reg);
    int (*autograd_py)(const char *forward, void **reg, char *err, size_t errlen);
} S;

/* _torch_native_init(path) -> bool: find torch's thread pool calls through
 * the loaded object at path (torch._C's file) */
static PyObject *py_native_init(PyObject *self, PyObject *arg)
{
    (void)self;
    if (T.parallel_for) Py_RETURN_TRUE;
    PyObject *bytes;
    if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
    void *h = dlopen(PyBytes_AS_STRING(bytes), RTLD_NOW | RTLD_NOLOAD); /* loaded already: torch imported */
    Py_DECREF(bytes);
    if (!h) Py_RETURN_FALSE;
    *(void **)&T.get_num_threads = dlsym(h, "torch_get_num_threads");
    if (T.get_num_threads) *(void **)&T.parallel_for = dlsym(h, "torch_parallel_for");
    /* the handle stays open: torch is never unloaded */
    return PyBool_FromLong(T.parallel_for != NULL);
}

/* ---- what the shim borrows ------------------------------------------------------ */

/* Raise the failure as a Python exception carried by a C++ throw. */
static void fail(const oc_op *op, oc_status st)
{
    PyGILState_STATE g = PyGILState_Ensure();
    ocpy_raise_status(st, op);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *str = value ? PyObject_Str(value) : NULL;
    const char *msg = str ? PyUnicode_AsUTF8(str) : NULL;
    char text[4096];
    snprintf(text, sizeof text, "%s", msg ? msg : oc_errmsg());
    PyErr_Clear();
    Py_XDECREF(str);
    PyGILState_Release(g);
    ocpy_torch_throw(type, value, tb, text);
}

typedef struct {
    oc_engine_work_fn work;
} lent_work;

static void lent_range(int64_t begin, int64_t end, void *ctx)
{
    (void)begin, (void)end; /* one call per thread, whatever its range */
    ((lent_work *)ctx)->work();
}

/* After a torch op, torch's intra-op threads spin, waiting for the next
 * parallel region: an opcore multicore launch right then runs its shares on
 * them (torch_parallel_for) instead of waking opcore's workers onto the
 * same cores. Declined when torch has fewer threads than the launch has
 * shares (torch.set_num_threads(1), say): opcore's pool runs it. */
static bool lend_torch_threads(oc_engine_work_fn work, uint32_t n)
{
    uint32_t threads = 0;
    if (T.get_num_threads(&threads) || threads < n) return false;
    lent_work w = {work};
    return T.parallel_for(0, n, 1, lent_range, &w) == 0;
}

bool ocpy_torch_lend_begin(void)
{
    if (!lend_torch || !T.parallel_for) return false;
    oc_engine_set_thread_helpers(lend_torch_threads);
    return true;
}

void ocpy_torch_lend_end(bool lent)
{
    if (lent) oc_engine_set_thread_helpers(NULL);
}

static const ocpy_torch_host host = {fail, ocpy_torch_lend_begin, ocpy_torch_lend_end};

/* _torch_native_use_shim(path): load the shim at path for later registrations */
static PyObject *py_use_shim(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *bytes;
    if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
    void *h = dlopen(PyBytes_AS_STRING(bytes), RTLD_NOW | RTLD_LOCAL);
    Py_DECREF(bytes);
    if (!h) return PyErr_Format(PyExc_OSError, "opcore: cannot load the torch kernel shim: %s", dlerror());
    int (*version)(void) = (int (*)(void))dlsym(h, "oc_torch_shim_version");
    void (*init)(const ocpy_torch_host *) = (void (*)(const ocpy_torch_host *))dlsym(h, "oc_torch_shim_init");
    *(void **)&S.impl = dlsym(h, "oc_torch_shim_impl");
    *(void **)&S.drop = dlsym(h, "oc_torch_shim_drop");
    *(void **)&S.swap = dlsym(h, "oc_torch_shim_swap");
    *(void **)&S.retire = dlsym(h, "oc_torch_shim_retire");
    *(void **)&S.prepared = dlsym(h, "oc_torch_shim_prepared");
    *(void **)&S.autograd = dlsym(h, "oc_torch_shim_autograd");
    *(void **)&S.autograd_drop = dlsym(h, "oc_torch_shim_autograd_drop");
    *(void **)&S.autograd_py = dlsym(h, "oc_torch_shim_autograd_py");
    if (!version || version() != OCPY_TORCH_SHIM_VERSION || !init || !S.impl || !S.drop || !S.swap ||
        !S.retire || !S.prepared ||
        !S.autograd || !S.autograd_drop || !S.autograd_py) {
        S.impl = NULL;
        return PyErr_Format(PyExc_OSError, "opcore: the torch kernel shim is not this opcore's (interface %d, "
                            "expected %d): rebuild it (python -m opcore build-torch-shim)",
                            version ? version() : -1, OCPY_TORCH_SHIM_VERSION);
    }
    init(&host);
    /* the handle stays open: registrations made through it live in torch */
    Py_RETURN_TRUE;
}

/* ---- registration ------------------------------------------------------------- */

typedef struct native_reg {
    struct native_reg *next;
    char library[256]; /* the op's library, for _torch_native_drop */
    char op[256];      /* the op's name in it (not the torch name: `_oc_<op>` for some) */
    void *reg;         /* the shim's registration */
} native_reg;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static native_reg *registry;

/* _torch_native_impl(qualname, torch_name=None, fresh_only=False) */
static PyObject *py_native_impl(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kwlist[] = {"qualname", "torch_name", "fresh_only", NULL};
    const char *qualname, *torch_name = NULL;
    int fresh_only = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|zp:_torch_native_impl", kwlist, &qualname, &torch_name,
                                     &fresh_only))
        return NULL;
    if (!S.impl) Py_RETURN_FALSE;
    const oc_op *op = oc_op_find(qualname);
    if (!op) {
        PyErr_SetString(PyExc_KeyError, oc_errmsg());
        return NULL;
    }
    native_reg *n = calloc(1, sizeof *n);
    if (!n) return PyErr_NoMemory();
    snprintf(n->library, sizeof n->library, "%s", oc_library_name(oc_op_library(op)));
    snprintf(n->op, sizeof n->op, "%s", oc_op_name(op));
    char err[512] = "";
    int r = S.impl(op, n->library, torch_name ? torch_name : oc_op_name(op), fresh_only, &n->reg, err, sizeof err);
    if (r <= 0) {
        free(n);
        if (r == 0) Py_RETURN_FALSE; /* an argument kind the shim does not carry */
        return PyErr_Format(PyExc_RuntimeError, "opcore: torch refused the native kernel of %s: %s", qualname, err);
    }
    pthread_mutex_lock(&registry_lock);
    n->next = registry;
    registry = n;
    pthread_mutex_unlock(&registry_lock);
    Py_RETURN_TRUE;
}

/* _torch_native_drop(library_name, op_name=None): take out the native
 * kernels of every op of that library, or of its op op_name (after
 * oc_library_forget: calls running then have returned, later ones fail
 * naming the op). */
static PyObject *py_native_drop(PyObject *self, PyObject *args)
{
    (void)self;
    const char *lib, *name = NULL;
    if (!PyArg_ParseTuple(args, "s|z:_torch_native_drop", &lib, &name)) return NULL;
    int count = 0;
    pthread_mutex_lock(&registry_lock);
    for (native_reg **p = &registry; *p;) {
        native_reg *n = *p;
        if (strcmp(n->library, lib) != 0 || (name && strcmp(n->op, name) != 0)) {
            p = &n->next;
            continue;
        }
        *p = n->next;
        S.drop(n->reg);
        free(n);
        count++;
    }
    pthread_mutex_unlock(&registry_lock);
    return PyLong_FromLong(count);
}

/* _torch_native_swap(qualname) -> int: the native kernels registered for
 * op qualname call the op of that name loaded now (a reload); the number
 * swapped, or -1 (none swapped) when the loaded op's schema differs from a
 * registered one's. */
static PyObject *py_native_swap(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *qualname = PyUnicode_AsUTF8(arg);
    if (!qualname) return NULL;
    const oc_op *op = oc_op_find(qualname);
    if (!op) {
        PyErr_SetString(PyExc_KeyError, oc_errmsg());
        return NULL;
    }
    const char *lib = oc_library_name(oc_op_library(op)), *name = oc_op_name(op);
    int count = 0;
    pthread_mutex_lock(&registry_lock);
    for (native_reg *n = registry; n && count >= 0; n = n->next)
        if (!strcmp(n->library, lib) && !strcmp(n->op, name))
            count = S.swap(n->reg, op) ? count + 1 : -1;
    pthread_mutex_unlock(&registry_lock);
    return PyLong_FromLong(count);
}

/* _torch_native_retire(library_name, op_name) -> int: its library was
 * reloaded without the op: its native kernels raise OpError saying so. */
static PyObject *py_native_retire(PyObject *self, PyObject *args)
{
    (void)self;
    const char *lib, *name;
    if (!PyArg_ParseTuple(args, "ss:_torch_native_retire", &lib, &name)) return NULL;
    int count = 0;
    pthread_mutex_lock(&registry_lock);
    for (native_reg *n = registry; n; n = n->next)
        if (!strcmp(n->library, lib) && !strcmp(n->op, name)) {
            S.retire(n->reg);
            count++;
        }
    pthread_mutex_unlock(&registry_lock);
    return PyLong_FromLong(count);
}

/* Read a tuple of small ints into out[n]; false with a Python error. */
static bool int_tuple(PyObject *t, const char *what, int32_t *out, Py_ssize_t max, int *n)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) > max) {
        PyErr_Format(PyExc_ValueError, "opcore: %s: a tuple of at most %zd ints", what, max);
        return false;
    }
    *n = (int)PyTuple_GET_SIZE(t);
    for (int i = 0; i < *n; i++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(t, i));
        if (v == -1 && PyErr_Occurred()) return false;
        out[i] = (int32_t)v;
    }
    return true;
}

#define MAX_FEED 64

/* _torch_autograd_impl(forward, backward, feed_kinds, feed_indices, targets)
 * -> int: register the shim's Autograd kernel pairing the two ops
 * (src/torch/autograd_kernel.cc says how the tuples bind them); the int is
 * the registration, for _torch_autograd_drop. */
static PyObject *py_autograd_impl(PyObject *self, PyObject *args)
{
    (void)self;
    const char *fwd, *bwd;
    PyObject *kinds_t, *idx_t, *targets_t;
    if (!PyArg_ParseTuple(args, "ssOOO", &fwd, &bwd, &kinds_t, &idx_t, &targets_t)) return NULL;
    if (!S.impl) return PyErr_Format(PyExc_RuntimeError, "opcore: the torch kernel shim is not loaded");
    int32_t kinds[MAX_FEED], idx[MAX_FEED], targets[MAX_FEED];
    int nfeed, nidx, ntargets;
    if (!int_tuple(kinds_t, "feed kinds", kinds, MAX_FEED, &nfeed) ||
        !int_tuple(idx_t, "feed indices", idx, MAX_FEED, &nidx) ||
        !int_tuple(targets_t, "targets", targets, MAX_FEED, &ntargets))
        return NULL;
    if (nidx != nfeed) return PyErr_Format(PyExc_ValueError, "opcore: %d feed kinds, %d indices", nfeed, nidx);
    void *reg = NULL;
    char err[512];
    if (S.autograd(fwd, bwd, kinds, idx, nfeed, targets, ntargets, &reg, err, sizeof err) != 0)
        return PyErr_Format(PyExc_RuntimeError, "opcore: cannot register the autograd kernel of %s: %s", fwd, err);
    return PyLong_FromVoidPtr(reg);
}

/* _torch_autograd_py_impl(forward) -> int: the shim's kernel in front of
 * forward's Python Autograd kernel (src/torch/autograd_kernel.cc:
 * oc_torch_shim_autograd_py); the int is the registration, for
 * _torch_autograd_drop. */
static PyObject *py_autograd_py_impl(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *fwd = PyUnicode_AsUTF8(arg);
    if (!fwd) return NULL;
    if (!S.impl)
        return PyErr_Format(PyExc_RuntimeError, "opcore: the torch kernel shim is not loaded");
    void *reg = NULL;
    char err[512];
    if (S.autograd_py(fwd, &reg, err, sizeof err) != 0)
        return PyErr_Format(PyExc_RuntimeError,
                            "opcore: cannot register the autograd kernel of %s: %s", fwd, err);
    return PyLong_FromVoidPtr(reg);
}

/* _torch_autograd_drop(registration): take it out of torch again */
static PyObject *py_autograd_drop(PyObject *self, PyObject *arg)
{
    (void)self;
    void *reg = PyLong_AsVoidPtr(arg);
    if (!reg && PyErr_Occurred()) return NULL;
    if (reg) S.autograd_drop(reg);
    Py_RETURN_NONE;
}

static PyObject *py_lend_threads(PyObject *self, PyObject *arg)
{
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    bool was = lend_torch;
    lend_torch = on && T.parallel_for;
    return PyBool_FromLong(was);
}

static PyObject *py_prepared(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyLong_FromUnsignedLongLong(S.prepared ? S.prepared() : 0);
}

PyMethodDef ocpy_torch_native_methods[] = {
    {"_torch_native_prepared", py_prepared, METH_NOARGS,
     "_torch_native_prepared() -> int: prepared calls made so far (an op called twice in a row with one "
     "argument metadata and values runs through one after: src/torch/boxed_kernel.cc)"},
    {"_torch_native_lend_threads", py_lend_threads, METH_O,
     "_torch_native_lend_threads(on) -> bool (the previous setting): multicore ops called from torch run their "
     "shares on torch's intra-op threads first (default on, paused for 1 s after a launch torch's join held up: "
     "see docs/engine.md)"},
    {"_torch_native_use_shim", py_use_shim, METH_O,
     "_torch_native_use_shim(path) -> True: register later native kernels through the torch kernel shim built "
     "at path (src/torch/boxed_kernel.cc); OSError if it cannot be loaded or is not this opcore's"},
    {"_torch_autograd_impl", py_autograd_impl, METH_VARARGS,
     "_torch_autograd_impl(forward, backward, feed_kinds, feed_indices, targets) -> int: register the shim's "
     "C++ Autograd kernel pairing op forward with op backward (src/torch/autograd_kernel.cc); the registration"},
    {"_torch_autograd_py_impl", py_autograd_py_impl, METH_O,
     "_torch_autograd_py_impl(forward) -> int: register the shim's kernel in front of forward's "
     "Python Autograd kernel: calls that need no graph skip Python (src/torch/autograd_kernel.cc)"},
    {"_torch_autograd_drop", py_autograd_drop, METH_O,
     "_torch_autograd_drop(registration): take a _torch_autograd_impl registration out of torch"},
    {"_torch_native_init", py_native_init, METH_O,
     "_torch_native_init(path) -> bool: find torch's thread pool calls through the loaded object at path"},
    {"_torch_native_impl", (PyCFunction)(void (*)(void))py_native_impl, METH_VARARGS | METH_KEYWORDS,
     "_torch_native_impl('lib::op', torch_name=None, fresh_only=False) -> bool: register the op's CPU kernel "
     "through the shim, as torch op lib::<torch_name> (default: the op's name), returning every result or only "
     "the fresh ones (not the Tensor(a!) arguments); False: no shim, or an argument kind it does not carry"},
    {"_torch_native_drop", py_native_drop, METH_VARARGS,
     "_torch_native_drop(library_name, op_name=None) -> int: take out the native kernels of that library's ops "
     "(or of its op op_name) (after forgetting it: a call still entering one fails naming the op)"},
    {"_torch_native_retire", py_native_retire, METH_VARARGS,
     "_torch_native_retire(library_name, op_name) -> int: its library was reloaded without the op: its native "
     "kernels raise OpError saying so (until _torch_native_swap)"},
    {"_torch_native_swap", py_native_swap, METH_O,
     "_torch_native_swap('lib::op') -> int: the op's native kernels call the op of that name loaded now (same "
     "schema); the number swapped, -1 (none) if the loaded op's schema differs"},
    {NULL, NULL, 0, NULL}};
