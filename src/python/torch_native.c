/* src/python/torch_native.c — opcore ops as native kernels of torch's
 * dispatcher: PyTorch calls the C op without entering Python.
 *
 *   _torch_native_init(path) -> bool   resolve libtorch's stable C ABI from
 *                                      the loaded object at `path`
 *                                      (torch._C's file); False if absent
 *   _torch_native_impl(qualname) -> bool
 *                                      register the op's CPU kernel as a
 *                                      boxed C function; False if the op
 *                                      has a type the ABI cannot carry
 *
 * In-place ops (Tensor(a!) arguments) take this path too, as a C++ op of
 * the same schema does: torch's autograd fallback runs them whether or not
 * their tensors require grad. Unlike a C++ op (whose version counters stay
 * put unless it bumps them), the kernel bumps the version counter of every
 * tensor it wrote, as torch's own in-place ops do, so a backward that saved
 * the tensor raises "modified by an inplace operation" instead of using the
 * new values. The stable ABI has no call for it: torch's C++
 * torch::autograd::impl::bump_version is found by its mangled name (absent:
 * no bump) and called from torch_native_throw.cc, which catches what it
 * throws.
 *
 * The route is libtorch's stable C ABI (torch/csrc/stable/c/shim.h and the
 * aoti_torch_* functions it builds on): torch_library_impl registers a
 * boxed kernel `void fn(StableIValue *stack, uint64_t nargs, uint64_t
 * nresults)`; the stack holds each argument in the encoding of
 * torch/csrc/stable/stableivalue_conversions.h (as of torch 2.13, the
 * version passed to torch_library_impl, so later torch versions adapt):
 *
 *   Tensor        an owned AtenTensorHandle (deleted after the call)
 *   int, SymInt   int64_t;  float: double;  bool: the low byte
 *   ScalarType    the int32 code of aoti_torch_dtype_*()
 *   str           an owned StringHandle
 *   T[]           an owned StableListHandle of the items' encodings
 *   T?            0 for None, else an owned StableIValue* box of T's
 *
 * and a result is an owned AtenTensorHandle. Every symbol is looked up at
 * run time (dlsym), so opcore builds without torch's headers; the few
 * prototypes are declared below. Schema `Scalar` has no encoding in that
 * ABI: ops with one keep the Python kernel (opcore/torch.py), as do all
 * ops under a torch without the ABI.
 *
 * A boxed kernel reports failure only by throwing a C++ exception:
 * torch_native_throw.cc throws the opcore.OpError (or OpArgumentError)
 * built here, so torch.ops callers catch the same exception, with .op and
 * .status, as from the Python kernel.
 *
 * One kernel per op: the dispatcher passes no op identity to a boxed C
 * function, so each op gets its own entry point, a libffi closure bound to
 * the op's record.
 */
#include "pyopcore.h"

#include <dlfcn.h>
#include <ffi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "opcore/engine.h"
#include "torch_native.h"
#include "torch_prepared.h"

/* ---- the stable ABI, as much as opcore uses ------------------------------------ */

typedef uint64_t StableIValue;
typedef void *AtenTensorHandle;
typedef void *TorchLibraryHandle;
typedef void *StableListHandle;
typedef void *StringHandle;
typedef int32_t AOTITorchError; /* 0: success */

/* The encoding opcore implements: torch 2.13.0 (TORCH_ABI_VERSION). */
#define OC_TORCH_ABI_2_13 ((2ULL << 56) | (13ULL << 48))

#define MAX_ARGS OCPY_TORCH_MAX_ARGS

/* Lend torch's threads to multicore launches (_torch_native_lend_threads):
 * on by default. A lent launch ends only when every torch thread has
 * joined torch_parallel_for, so one descheduled torch thread stalls it
 * (bench/grid_bench.py measured 8 ms stalls at p90 under load); the engine
 * stops asking for a second after such a stall (src/engine/pool.c,
 * docs/engine.md "Lending torch's threads"). */
static bool lend_torch = true;

static struct {
    AOTITorchError (*library_init_impl)(const char *ns, const char *key, const char *file, uint32_t line,
                                        TorchLibraryHandle *ret);
    AOTITorchError (*library_impl)(TorchLibraryHandle lib, const char *name,
                                   void (*fn)(StableIValue *, uint64_t, uint64_t), uint64_t version);
    AOTITorchError (*delete_library)(TorchLibraryHandle lib);
    AOTITorchError (*get_data_ptr)(AtenTensorHandle t, void **ret);
    AOTITorchError (*get_dim)(AtenTensorHandle t, int64_t *ret);
    AOTITorchError (*get_sizes)(AtenTensorHandle t, int64_t **ret);
    AOTITorchError (*get_strides)(AtenTensorHandle t, int64_t **ret);
    AOTITorchError (*get_dtype)(AtenTensorHandle t, int32_t *ret);
    AOTITorchError (*get_device_type)(AtenTensorHandle t, int32_t *ret);
    AOTITorchError (*empty_strided)(int64_t ndim, const int64_t *sizes, const int64_t *strides, int32_t dtype,
                                    int32_t device_type, int32_t device_index, AtenTensorHandle *ret);
    AOTITorchError (*new_tensor_handle)(AtenTensorHandle t, AtenTensorHandle *ret);
    AOTITorchError (*delete_tensor)(AtenTensorHandle t);
    AOTITorchError (*delete_box)(StableIValue *box);
    AOTITorchError (*list_size)(StableListHandle l, size_t *ret);
    AOTITorchError (*list_get_item)(StableListHandle l, size_t i, StableIValue *ret);
    AOTITorchError (*delete_list)(StableListHandle l);
    AOTITorchError (*string_c_str)(StringHandle s, const char **ret);
    AOTITorchError (*string_length)(StringHandle s, size_t *ret);
    AOTITorchError (*delete_string)(StringHandle s);
    const char *(*exception_what)(void);
    AOTITorchError (*parallel_for)(int64_t begin, int64_t end, int64_t grain,
                                   void (*fn)(int64_t begin, int64_t end, void *ctx), void *ctx);
    AOTITorchError (*get_num_threads)(uint32_t *ret);
    void *bump_version; /* torch::autograd::impl::bump_version(const at::Tensor &), or NULL */
    int32_t dtype_code[OC_NUM_DTYPES]; /* aoti code of each oc_dtype */
    int32_t device_cpu;
    bool ready;
} T;

/* dtypes torch has and opcore does not, for error messages */
static const char *const other_dtypes[] = {"uint16", "uint32", "uint64", "complex32", "complex64", "complex128",
                                           "float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz"};
static int32_t other_dtype_code[sizeof other_dtypes / sizeof *other_dtypes];
static const char *const device_names[] = {"cuda", "meta", "xpu", "mps", "privateuseone"};
static int32_t device_code[sizeof device_names / sizeof *device_names];

static void *sym(void *h, const char *name, bool *ok)
{
    void *p = dlsym(h, name);
    if (!p) *ok = false;
    return p;
}

static int32_t code_of(void *h, const char *name, bool *ok)
{
    int32_t (*fn)(void) = (int32_t(*)(void))sym(h, name, ok);
    return fn ? fn() : -1;
}

#define SYM(field, name) (*(void **)&T.field = sym(h, name, &ok))

static PyObject *py_native_init(PyObject *self, PyObject *arg)
{
    (void)self;
    if (T.ready) Py_RETURN_TRUE;
    PyObject *bytes;
    if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
    /* The object is loaded already (torch imported); its dependency tree
     * holds libtorch's C ABI. */
    void *h = dlopen(PyBytes_AS_STRING(bytes), RTLD_NOW | RTLD_NOLOAD);
    Py_DECREF(bytes);
    if (!h) Py_RETURN_FALSE;
    bool ok = true;
    SYM(library_init_impl, "aoti_torch_library_init_impl");
    SYM(library_impl, "torch_library_impl");
    SYM(delete_library, "aoti_torch_delete_library_object");
    SYM(get_data_ptr, "aoti_torch_get_data_ptr");
    SYM(get_dim, "aoti_torch_get_dim");
    SYM(get_sizes, "aoti_torch_get_sizes");
    SYM(get_strides, "aoti_torch_get_strides");
    SYM(get_dtype, "aoti_torch_get_dtype");
    SYM(get_device_type, "aoti_torch_get_device_type");
    SYM(empty_strided, "aoti_torch_empty_strided");
    SYM(new_tensor_handle, "aoti_torch_new_tensor_handle");
    SYM(delete_tensor, "aoti_torch_delete_tensor_object");
    SYM(delete_box, "torch_delete_stable_ivalue"); /* 2.13: optionals are boxed with torch_new_stable_ivalue */
    SYM(list_size, "torch_list_size");
    SYM(list_get_item, "torch_list_get_item");
    SYM(delete_list, "torch_delete_list");
    SYM(string_c_str, "torch_string_c_str");
    SYM(string_length, "torch_string_length");
    SYM(delete_string, "torch_delete_string");
    SYM(exception_what, "torch_exception_get_what_without_backtrace");
    SYM(parallel_for, "torch_parallel_for");
    SYM(get_num_threads, "torch_get_num_threads");
    T.bump_version = dlsym(h, "_ZN5torch8autograd4impl12bump_versionERKN2at6TensorE"); /* optional */
    char name[64];
    for (int i = 0; i < OC_NUM_DTYPES && ok; i++) { /* torch spells each dtype as opcore does */
        snprintf(name, sizeof name, "aoti_torch_dtype_%s", oc_dtype_name((oc_dtype)i));
        T.dtype_code[i] = code_of(h, name, &ok);
    }
    for (size_t i = 0; i < sizeof other_dtypes / sizeof *other_dtypes; i++) {
        bool found = true; /* a missing one only loses a name in a message */
        snprintf(name, sizeof name, "aoti_torch_dtype_%s", other_dtypes[i]);
        other_dtype_code[i] = code_of(h, name, &found);
    }
    T.device_cpu = code_of(h, "aoti_torch_device_type_cpu", &ok);
    for (size_t i = 0; i < sizeof device_names / sizeof *device_names; i++) {
        bool found = true;
        snprintf(name, sizeof name, "aoti_torch_device_type_%s", device_names[i]);
        device_code[i] = code_of(h, name, &found);
    }
    T.ready = ok;
    /* the handle stays open: torch is never unloaded */
    return PyBool_FromLong(ok);
}

/* ---- one registered op --------------------------------------------------------- */

typedef struct native_op {
    struct native_op *next;    /* the registry's list */
    const oc_op *op;
    int nargs, nresults;
    oc_arg_type type[MAX_ARGS];
    bool optional[MAX_ARGS];
    bool bump[MAX_ARGS];       /* a Tensor(a!) argument whose version counter the call bumps */
    int alias[OC_MAX_RESULTS]; /* per result: the argument it returns, or -1 */
    int nret;                  /* results the torch op returns: all, or only the fresh ones */
    int ret_index[OC_MAX_RESULTS]; /* the op's result index of each */
    ffi_cif cif;
    ffi_type *cif_args[3];
    ffi_closure *closure;
    void (*entry)(StableIValue *, uint64_t, uint64_t);
    TorchLibraryHandle lib;
    void *boxed;               /* the registration through the boxed-kernel shim, or NULL */
    ocpy_prepared_site prepared; /* calls repeating one key skip binding and the shape function */
} native_op;

/* What one call owns until it ends. */
typedef struct call {
    native_op *n;
    const ocpy_torch_view *views; /* the boxed-kernel shim's call: per argument, its tensor as the shim read
                                     it (ok: usable); the tensor handles are borrowed, never deleted. NULL:
                                     the stable C ABI's call, which hands the handles over */
    StableIValue stack[MAX_ARGS]; /* the arguments as the stack held them (results overwrite it) */
    oc_value vals[MAX_ARGS];
    oc_tensor tensors[MAX_ARGS];
    void *heap[MAX_ARGS];               /* list storage */
    AtenTensorHandle results[OC_MAX_RESULTS];
} call;

static const char *dtype_name_of(int32_t code, char *buf, size_t len)
{
    for (size_t i = 0; i < sizeof other_dtypes / sizeof *other_dtypes; i++)
        if (other_dtype_code[i] == code) return other_dtypes[i];
    snprintf(buf, len, "code %d", (int)code);
    return buf;
}

static oc_status arg_error(const call *c, int i, const char *fmt, const char *what)
{
    char detail[256];
    snprintf(detail, sizeof detail, fmt, what);
    return oc_set_error(OC_EINVAL, "op '%s': argument %d '%s' %s", oc_op_qualname(c->n->op), i + 1,
                        oc_op_arg_name(c->n->op, i), detail);
}

/* View a CPU tensor handle as an oc_tensor (zero copy). */
static oc_status view(const call *c, int i, AtenTensorHandle h, const ocpy_torch_view *v, oc_tensor *t)
{
    int32_t dev, dt;
    int64_t ndim;
    const int64_t *sizes, *strides;
    void *data;
    if (v && v->ok) { /* read by the shim already: the same fields, without six calls into torch */
        dev = v->device, dt = v->dtype, ndim = v->ndim, sizes = v->sizes, strides = v->strides, data = v->data;
    } else if (T.get_device_type(h, &dev) || T.get_dtype(h, &dt) || T.get_dim(h, &ndim) ||
               T.get_sizes(h, (int64_t **)&sizes) || T.get_strides(h, (int64_t **)&strides) ||
               T.get_data_ptr(h, &data)) {
        return arg_error(c, i, "cannot be read through torch's C ABI: %s", T.exception_what());
    }
    if (dev != T.device_cpu) {
        const char *name = "another device";
        for (size_t k = 0; k < sizeof device_names / sizeof *device_names; k++)
            if (device_code[k] == dev) name = device_names[k];
        return arg_error(c, i, "is on device '%s'; opcore runs kernels on the CPU: move the tensor with .cpu()",
                         name);
    }
    int d = 0;
    while (d < OC_NUM_DTYPES && T.dtype_code[d] != dt) d++;
    if (d == OC_NUM_DTYPES) {
        char buf[32], what[64];
        snprintf(what, sizeof what, "torch.%s", dtype_name_of(dt, buf, sizeof buf));
        return arg_error(c, i, "has dtype %s, which opcore does not support", what);
    }
    if (ndim > OC_MAX_DIMS)
        return oc_set_error(OC_EINVAL, "op '%s': argument %d '%s' has %lld dims; opcore allows at most %d",
                            oc_op_qualname(c->n->op), i + 1, oc_op_arg_name(c->n->op, i), (long long)ndim,
                            OC_MAX_DIMS);
    t->data = data;
    t->dtype = (oc_dtype)d;
    t->ndim = (int32_t)ndim;
    memcpy(t->sizes, sizes, (size_t)ndim * sizeof *sizes);
    memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
    t->flags = 0;
    t->coherence = OC_COHERENT;
    return OC_OK;
}

static oc_status list_items(const call *c, int i, StableListHandle l, size_t *n)
{
    if (T.list_size(l, n)) return arg_error(c, i, "(a list) cannot be read: %s", T.exception_what());
    return OC_OK;
}

/* Convert argument i's stack value (`v`: the value, unboxed already for T?). */
static oc_status convert(call *c, int i, StableIValue v)
{
    native_op *n = c->n;
    oc_value *out = &c->vals[i];
    size_t count;
    oc_status st;
    switch (n->type[i]) {
    case OC_ARG_TENSOR:
        st = view(c, i, (AtenTensorHandle)(uintptr_t)v, c->views ? &c->views[i] : NULL, &c->tensors[i]);
        *out = oc_value_tensor(&c->tensors[i]);
        return st;
    case OC_ARG_INT: *out = oc_value_int((int64_t)v); return OC_OK;
    case OC_ARG_FLOAT: {
        double f;
        memcpy(&f, &v, sizeof f);
        *out = oc_value_float(f);
        return OC_OK;
    }
    case OC_ARG_BOOL: *out = oc_value_bool((v & 0xff) != 0); return OC_OK;
    case OC_ARG_DTYPE: {
        int32_t code = (int32_t)(uint32_t)v;
        for (int d = 0; d < OC_NUM_DTYPES; d++)
            if (T.dtype_code[d] == code) {
                *out = oc_value_dtype((oc_dtype)d);
                return OC_OK;
            }
        char buf[32], what[64];
        snprintf(what, sizeof what, "torch.%s", dtype_name_of(code, buf, sizeof buf));
        return arg_error(c, i, "is %s, a dtype opcore does not support", what);
    }
    case OC_ARG_STR: {
        const char *s;
        size_t len = 0;
        if (T.string_c_str((StringHandle)(uintptr_t)v, &s) || T.string_length((StringHandle)(uintptr_t)v, &len))
            return arg_error(c, i, "(a str) cannot be read: %s", T.exception_what());
        if (strlen(s) != len) { /* the kernel gets a C string: it would end at the NUL */
            char at[48];
            snprintf(at, sizeof at, "at index %zu", strlen(s));
            return arg_error(c, i, "(a str) holds a NUL character %s; a kernel receives a str as a C string, "
                             "which would end there (pass the data as a tensor instead)", at);
        }
        *out = oc_value_str(s);
        return OC_OK;
    }
    case OC_ARG_INT_LIST:
    case OC_ARG_FLOAT_LIST:
    case OC_ARG_TENSOR_LIST: {
        StableListHandle l = (StableListHandle)(uintptr_t)v;
        if ((st = list_items(c, i, l, &count))) return st;
        size_t item = n->type[i] == OC_ARG_TENSOR_LIST ? sizeof(oc_tensor) : sizeof(int64_t);
        void *items = malloc(count ? count * item : 1);
        if (!items) return oc_set_error(OC_ENOMEM, "op '%s': out of memory for a list of %zu", oc_op_qualname(n->op), count);
        c->heap[i] = items;
        for (size_t k = 0; k < count; k++) {
            StableIValue e;
            if (T.list_get_item(l, k, &e)) return arg_error(c, i, "(a list) cannot be read: %s", T.exception_what());
            if (n->type[i] == OC_ARG_TENSOR_LIST) {
                if ((st = view(c, i, (AtenTensorHandle)(uintptr_t)e, NULL, (oc_tensor *)items + k))) return st;
            } else {
                memcpy((int64_t *)items + k, &e, sizeof(int64_t)); /* int64 or double bits */
            }
        }
        *out = n->type[i] == OC_ARG_TENSOR_LIST ? oc_value_tensors(items, (int64_t)count)
             : n->type[i] == OC_ARG_INT_LIST    ? oc_value_ints(items, (int64_t)count)
                                                : oc_value_floats(items, (int64_t)count);
        return OC_OK;
    }
    case OC_ARG_SCALAR:
    case OC_ARG_DICT:
    case OC_ARG_NONE: break;
    }
    return oc_set_error(OC_EINVAL, "op '%s': argument %d has a type the native kernel does not carry",
                        oc_op_qualname(n->op), i + 1);
}

/* The stack value of argument i itself (a T? unboxed; None: 0 and false). */
static bool unboxed(const call *c, int i, StableIValue *v)
{
    StableIValue raw = c->stack[i];
    if (!c->n->optional[i]) {
        *v = raw;
        return true;
    }
    if (!raw) return false;
    *v = *(StableIValue *)(uintptr_t)raw;
    return true;
}

/* Free what the stack handed over for the arguments converted so far (and
 * the list storage), whatever happened. */
static void release_args(call *c)
{
    native_op *n = c->n;
    for (int i = 0; i < n->nargs; i++) {
        StableIValue v;
        bool present = unboxed(c, i, &v);
        if (present) {
            switch (n->type[i]) {
            case OC_ARG_TENSOR:
                if (!c->views) T.delete_tensor((AtenTensorHandle)(uintptr_t)v);
                break;
            case OC_ARG_STR: T.delete_string((StringHandle)(uintptr_t)v); break;
            case OC_ARG_TENSOR_LIST: {
                size_t count = 0;
                StableListHandle l = (StableListHandle)(uintptr_t)v;
                if (!c->views && !T.list_size(l, &count)) /* the items' handles are ours too */
                    for (size_t k = 0; k < count; k++) {
                        StableIValue e;
                        if (!T.list_get_item(l, k, &e)) T.delete_tensor((AtenTensorHandle)(uintptr_t)e);
                    }
                T.delete_list(l);
                break;
            }
            case OC_ARG_INT_LIST:
            case OC_ARG_FLOAT_LIST: T.delete_list((StableListHandle)(uintptr_t)v); break;
            default: break;
            }
        }
        if (n->optional[i] && c->stack[i]) T.delete_box((StableIValue *)(uintptr_t)c->stack[i]);
        free(c->heap[i]);
    }
}

static oc_status alloc_result(void *ctx, int index, const oc_tensor *meta, oc_tensor *out)
{
    call *c = ctx;
    int64_t strides[OC_MAX_DIMS];
    oc_contiguous_strides(meta->ndim, meta->sizes, strides);
    AtenTensorHandle h;
    void *data;
    if (T.empty_strided(meta->ndim, meta->sizes, strides, T.dtype_code[meta->dtype], T.device_cpu, 0, &h))
        return oc_set_error(OC_ENOMEM, "op '%s': torch could not allocate result %d: %s", oc_op_qualname(c->n->op),
                            index, T.exception_what());
    c->results[index] = h;
    if (T.get_data_ptr(h, &data))
        return oc_set_error(OC_ERROR, "op '%s': result %d has no data: %s", oc_op_qualname(c->n->op), index,
                            T.exception_what());
    return oc_tensor_init(out, data, meta->dtype, meta->ndim, meta->sizes);
}

/* Raise the failure as a Python exception carried by a C++ throw. */
static _Noreturn void fail(call *c, oc_status st)
{
    for (int i = 0; i < c->n->nresults; i++)
        if (c->results[i]) T.delete_tensor(c->results[i]);
    release_args(c);
    PyGILState_STATE g = PyGILState_Ensure();
    ocpy_raise_status(st, c->n->op);
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

/* ---- torch's threads for multicore launches ---------------------------------- */

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
    if (!lend_torch || !T.ready) return false;
    oc_engine_set_thread_helpers(lend_torch_threads);
    return true;
}

void ocpy_torch_lend_end(bool lent)
{
    if (lent) oc_engine_set_thread_helpers(NULL);
}

/* After the kernel wrote its Tensor(a!) arguments: bump their version
 * counters. A tensor without one (an inference tensor outside inference
 * mode) is left as a C++ op leaves it: written, nothing raised. */
static void bump_versions(const call *c)
{
    const native_op *n = c->n;
    char err[256];
    for (int i = 0; i < n->nargs; i++) {
        StableIValue v;
        if (!n->bump[i] || !unboxed(c, i, &v)) continue;
        if (n->type[i] == OC_ARG_TENSOR) {
            ocpy_torch_bump_version(T.bump_version, (void *)(uintptr_t)v, err, sizeof err);
            continue;
        }
        size_t count = 0; /* Tensor(a!)[] */
        StableListHandle l = (StableListHandle)(uintptr_t)v;
        if (T.list_size(l, &count)) continue;
        for (size_t k = 0; k < count; k++) {
            StableIValue e;
            if (!T.list_get_item(l, k, &e)) ocpy_torch_bump_version(T.bump_version, (void *)(uintptr_t)e, err, sizeof err);
        }
    }
}

/* A call's record, before its arguments are converted. */
static void call_init(call *c, native_op *n, const StableIValue *stack, const ocpy_torch_view *views)
{
    c->n = n;
    c->views = views;
    memcpy(c->stack, stack, (size_t)n->nargs * sizeof *stack);
    for (int i = 0; i < n->nargs; i++) c->heap[i] = NULL;
    for (int i = 0; i < n->nresults; i++) c->results[i] = NULL;
}

/* After the kernel: bump the written tensors' version counters, put the
 * results the torch op returns on the stack (a fresh result is handed
 * over; `-> Tensor(a!)` is the argument itself, as a new reference) and
 * drop the fresh results it does not return (never seen by Python: no GIL
 * needed). */
static void finish(call *c, StableIValue *stack)
{
    native_op *n = c->n;
    bump_versions(c);
    for (int j = 0; j < n->nret; j++) {
        int i = n->ret_index[j], a = n->alias[i];
        if (a < 0) {
            stack[j] = (StableIValue)(uintptr_t)c->results[i];
            c->results[i] = NULL; /* the stack owns it now */
            continue;
        }
        AtenTensorHandle h = NULL;
        StableIValue v;
        if (!unboxed(c, a, &v) || T.new_tensor_handle((AtenTensorHandle)(uintptr_t)v, &h)) {
            oc_set_error(OC_ERROR, "op '%s': cannot return argument '%s': %s", oc_op_qualname(n->op),
                         oc_op_arg_name(n->op, a), T.exception_what());
            for (int k = 0; k < j; k++) T.delete_tensor((AtenTensorHandle)(uintptr_t)stack[k]);
            fail(c, OC_ERROR);
        }
        stack[j] = (StableIValue)(uintptr_t)h;
    }
    for (int i = 0; i < n->nresults; i++)
        if (c->results[i]) T.delete_tensor(c->results[i]);
}

/* The call through the op's prepared call `p` (torch_prepared.h): the
 * arguments as the shim read them (borrowed: nothing to release), fresh
 * results allocated as last time. */
static void run_prepared(native_op *n, StableIValue *stack, const ocpy_torch_view *views, ocpy_prepared *p)
{
    call c;
    call_init(&c, n, stack, views);
    void *data[MAX_ARGS + OC_MAX_RESULTS];
    int k = 0;
    for (int i = 0; i < n->nargs; i++)
        if (n->type[i] == OC_ARG_TENSOR) data[k++] = views[i].data;
    oc_status st = OC_OK;
    for (int r = 0; r < n->nresults && !st; r++) {
        if (n->alias[r] >= 0) continue; /* `-> Tensor(a!)`: the argument */
        oc_tensor out;
        st = alloc_result(&c, r, &p->metas[r], &out);
        data[k++] = out.data;
    }
    if (!st) {
        bool lent = ocpy_torch_lend_begin();
        st = oc_call_run(p->call, data);
        ocpy_torch_lend_end(lent);
    }
    ocpy_prepared_put(&n->prepared, p);
    if (st) fail(&c, st);
    finish(&c, stack);
}

/* One call (`rec`: the op's native_op), from the stable ABI's entry below
 * or from the shim. */
static void run(void *rec, StableIValue *stack, const ocpy_torch_view *views)
{
    native_op *n = rec;
    int64_t key[OCPY_PREPARED_KEY_MAX];
    int nkey = ocpy_prepared_key(&n->prepared, stack, views, key);
    if (nkey >= 0) {
        ocpy_prepared *p = ocpy_prepared_take(&n->prepared, key, nkey);
        if (p) {
            run_prepared(n, stack, views, p);
            return;
        }
    }
    call c;
    call_init(&c, n, stack, views);
    for (int i = 0; i < n->nargs; i++) {
        StableIValue v;
        if (!unboxed(&c, i, &v)) {
            c.vals[i] = oc_value_none();
            continue;
        }
        oc_status st = convert(&c, i, v);
        if (st) fail(&c, st);
    }
    oc_tensor outs[OC_MAX_RESULTS];
    bool lent = ocpy_torch_lend_begin();
    oc_status st = oc_op_run(n->op, c.vals, n->nargs, alloc_result, &c, outs);
    ocpy_torch_lend_end(lent);
    if (st) fail(&c, st);
    if (nkey >= 0) ocpy_prepared_learn(&n->prepared, n->op, key, nkey, c.vals, outs);
    finish(&c, stack);
    /* Dropping an argument's handle can leave the Python tensor as its only
     * owner: torch then hands the tensor's PyObject back under the GIL,
     * which it takes itself, once per tensor (torch.ops released it for
     * the call). On a thread Python knows, take it once for them all (a
     * third of the kernel's instructions for myadd_out's three tensors,
     * callgrind); torch's own acquire then nests for free. A thread Python
     * never ran on is left to torch as before. */
    bool gil = !views && Py_IsInitialized() && PyGILState_GetThisThreadState() != NULL;
    PyGILState_STATE g = gil ? PyGILState_Ensure() : PyGILState_UNLOCKED;
    release_args(&c);
    if (gil) PyGILState_Release(g);
}

static void entry(ffi_cif *cif, void *ret, void **args, void *user)
{
    (void)cif, (void)ret;
    run(user, *(StableIValue **)args[0], NULL);
}

/* ---- the boxed-kernel shim (src/torch/boxed_kernel.cc) -------------------------- */

/* Built per torch version against its headers and loaded by
 * opcore/_torch_native.py (_torch_native_use_boxed); when present, ops
 * register through it instead of torch_library_impl: the same run on the
 * same stack encoding, its tensors borrowed from torch's IValue stack. */
static struct {
    int (*impl)(const char *ns, const char *name, void (*run)(void *, StableIValue *, const ocpy_torch_view *),
                void *rec, const int32_t *kinds, const int32_t *optional, int nargs, int nret, void **reg, char *err,
                size_t errlen);
    void (*drop)(void *reg);
    int (*autograd)(const char *forward, const char *backward, const int32_t *feed_kind, const int32_t *feed_index,
                    int nfeed, const int32_t *targets, int ntargets, void **reg, char *err, size_t errlen);
} B;

/* The shim's argument kinds (its enum Kind), -1: none */
static int32_t boxed_kind(oc_arg_type t)
{
    switch (t) {
    case OC_ARG_TENSOR: return 0;
    case OC_ARG_INT: return 1;
    case OC_ARG_FLOAT: return 2;
    case OC_ARG_BOOL: return 3;
    case OC_ARG_DTYPE: return 4;
    case OC_ARG_STR: return 5;
    case OC_ARG_INT_LIST: return 6;
    case OC_ARG_FLOAT_LIST: return 7;
    case OC_ARG_TENSOR_LIST: return 8;
    default: return -1;
    }
}

/* _torch_native_use_boxed(path) -> bool: load the shim at path (None: stop
 * using it for later registrations) */
static PyObject *py_use_boxed(PyObject *self, PyObject *arg)
{
    (void)self;
    if (arg == Py_None) {
        B.impl = NULL;
        Py_RETURN_FALSE;
    }
    PyObject *bytes;
    if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
    void *h = dlopen(PyBytes_AS_STRING(bytes), RTLD_NOW | RTLD_LOCAL);
    Py_DECREF(bytes);
    if (!h) return PyErr_Format(PyExc_OSError, "opcore: cannot load the torch kernel shim: %s", dlerror());
    int (*version)(void) = (int (*)(void))dlsym(h, "oc_torch_boxed_version");
    *(void **)&B.impl = dlsym(h, "oc_torch_boxed_impl");
    *(void **)&B.drop = dlsym(h, "oc_torch_boxed_drop");
    *(void **)&B.autograd = dlsym(h, "oc_torch_boxed_autograd");
    if (!version || version() != OCPY_TORCH_SHIM_VERSION || !B.impl || !B.drop || !B.autograd) {
        B.impl = NULL;
        return PyErr_Format(PyExc_OSError, "opcore: the torch kernel shim is not this opcore's (interface %d, "
                            "expected %d): rebuild it (make python)", version ? version() : -1,
                            OCPY_TORCH_SHIM_VERSION);
    }
    /* the handle stays open: registrations made through it live in torch */
    Py_RETURN_TRUE;
}

/* Register n through the shim; false: it refused (err says why). */
static bool boxed_register(native_op *n, const char *ns, const char *name, char *err, size_t errlen)
{
    int32_t kinds[MAX_ARGS], optional[MAX_ARGS];
    for (int i = 0; i < n->nargs; i++) {
        kinds[i] = boxed_kind(n->type[i]);
        optional[i] = n->optional[i];
        if (kinds[i] < 0) {
            snprintf(err, errlen, "argument %d has no encoding", i + 1);
            return false;
        }
    }
    return B.impl(ns, name, run, n, kinds, optional, n->nargs, n->nret, &n->boxed, err, errlen) == 0;
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
    if (!B.impl) return PyErr_Format(PyExc_RuntimeError, "opcore: the torch kernel shim is not loaded");
    int32_t kinds[MAX_ARGS], idx[MAX_ARGS], targets[MAX_ARGS];
    int nfeed, nidx, ntargets;
    if (!int_tuple(kinds_t, "feed kinds", kinds, MAX_ARGS, &nfeed) ||
        !int_tuple(idx_t, "feed indices", idx, MAX_ARGS, &nidx) ||
        !int_tuple(targets_t, "targets", targets, MAX_ARGS, &ntargets))
        return NULL;
    if (nidx != nfeed) return PyErr_Format(PyExc_ValueError, "opcore: %d feed kinds, %d indices", nfeed, nidx);
    void *reg = NULL;
    char err[512];
    if (B.autograd(fwd, bwd, kinds, idx, nfeed, targets, ntargets, &reg, err, sizeof err) != 0)
        return PyErr_Format(PyExc_RuntimeError, "opcore: cannot register the autograd kernel of %s: %s", fwd, err);
    return PyLong_FromVoidPtr(reg);
}

/* _torch_autograd_drop(registration): take it out of torch again */
static PyObject *py_autograd_drop(PyObject *self, PyObject *arg)
{
    (void)self;
    void *reg = PyLong_AsVoidPtr(arg);
    if (!reg && PyErr_Occurred()) return NULL;
    if (reg) B.drop(reg);
    Py_RETURN_NONE;
}

/* ---- registration ------------------------------------------------------------- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static native_op *registry; /* every native registration, for _torch_native_drop */
/* Dropped registrations: torch may still be entering their closures on
 * other threads (a call that looked the kernel up just before the drop),
 * so they are kept, and such a call fails as the op's library was
 * unloaded (its oc_op record stays: registry.c). */
static native_op *dropped;

static void native_free(native_op *n)
{
    ocpy_prepared_site_clear(&n->prepared);
    if (n->closure) ffi_closure_free(n->closure);
    free(n);
}

/* _torch_native_impl(qualname, torch_name=None, fresh_only=False, bump_versions=True) */
static PyObject *py_native_impl(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kwlist[] = {"qualname", "torch_name", "fresh_only", "bump_versions", NULL};
    const char *qualname, *torch_name = NULL;
    int fresh_only = 0, bump_versions_on = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|zpp:_torch_native_impl", kwlist, &qualname, &torch_name,
                                     &fresh_only, &bump_versions_on))
        return NULL;
    if (!T.ready) Py_RETURN_FALSE;
    const oc_op *op = oc_op_find(qualname);
    if (!op) {
        PyErr_SetString(PyExc_KeyError, oc_errmsg());
        return NULL;
    }
    int nargs = oc_op_num_args(op), nres = oc_op_num_results(op);
    if (nargs > MAX_ARGS || nres > OC_MAX_RESULTS) Py_RETURN_FALSE;
    for (int i = 0; i < nargs; i++)
        if (oc_op_arg_type(op, i) == OC_ARG_SCALAR) Py_RETURN_FALSE; /* no Scalar in the stable ABI */
    native_op *n = calloc(1, sizeof *n);
    if (!n) return PyErr_NoMemory();
    n->op = op;
    n->nargs = nargs;
    n->nresults = nres;
    ocpy_prepared_site_init(&n->prepared, op);
    for (int i = 0; i < nargs; i++) {
        n->type[i] = oc_op_arg_type(op, i);
        n->optional[i] = oc_op_arg_optional(op, i);
        n->bump[i] = bump_versions_on && T.bump_version && oc_op_arg_mutable(op, i) &&
                     (n->type[i] == OC_ARG_TENSOR || n->type[i] == OC_ARG_TENSOR_LIST);
    }
    for (int i = 0; i < nres; i++) {
        n->alias[i] = oc_op_result_alias(op, i);
        if (!fresh_only || n->alias[i] < 0) n->ret_index[n->nret++] = i;
    }
    n->cif_args[0] = &ffi_type_pointer;
    n->cif_args[1] = &ffi_type_uint64;
    n->cif_args[2] = &ffi_type_uint64;
    void *code = NULL;
    n->closure = ffi_closure_alloc(sizeof(ffi_closure), &code);
    if (!n->closure || ffi_prep_cif(&n->cif, FFI_DEFAULT_ABI, 3, &ffi_type_void, n->cif_args) != FFI_OK ||
        ffi_prep_closure_loc(n->closure, &n->cif, entry, n, code) != FFI_OK) {
        native_free(n);
        return PyErr_Format(PyExc_RuntimeError, "opcore: cannot make a native entry point for %s", qualname);
    }
    *(void **)&n->entry = code;
    /* One IMPL library per registration (namespace = the op's library, key
     * CPU): deleting it (_torch_native_drop) takes the kernel out again. */
    char ns[256], name[256];
    snprintf(ns, sizeof ns, "%s", oc_library_name(oc_op_library(op)));
    snprintf(name, sizeof name, "%s", torch_name ? torch_name : oc_op_name(op));
    pthread_mutex_lock(&registry_lock);
    char why[512] = "";
    AOTITorchError e = 0;
    if (B.impl) {
        if (!boxed_register(n, ns, name, why, sizeof why)) e = -1;
    } else {
        e = T.library_init_impl(ns, "CPU", "opcore/torch_native.c", __LINE__, &n->lib);
        if (!e) e = T.library_impl(n->lib, name, n->entry, OC_TORCH_ABI_2_13);
        if (e) snprintf(why, sizeof why, "%s", T.exception_what());
    }
    if (!e) {
        n->next = registry;
        registry = n;
    }
    pthread_mutex_unlock(&registry_lock);
    if (e) {
        if (n->lib) T.delete_library(n->lib);
        native_free(n);
        return PyErr_Format(PyExc_RuntimeError, "opcore: torch refused the native kernel of %s: %s", qualname, why);
    }
    Py_RETURN_TRUE;
}

/* _torch_native_drop(library_name): take out the native kernels of every op
 * of that library (after oc_library_forget: calls running then have
 * returned, later ones fail naming the op). */
static PyObject *py_native_drop(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *lib = PyUnicode_AsUTF8(arg);
    if (!lib) return NULL;
    int count = 0;
    pthread_mutex_lock(&registry_lock);
    for (native_op **p = &registry; *p;) {
        native_op *n = *p;
        if (strcmp(oc_library_name(oc_op_library(n->op)), lib) != 0) {
            p = &n->next;
            continue;
        }
        *p = n->next;
        if (n->boxed) B.drop(n->boxed);
        else T.delete_library(n->lib);
        ocpy_prepared_site_clear(&n->prepared); /* its oc_call holds the op's bound arguments */
        n->next = dropped;
        dropped = n;
        count++;
    }
    pthread_mutex_unlock(&registry_lock);
    return PyLong_FromLong(count);
}

static PyObject *py_lend_threads(PyObject *self, PyObject *arg)
{
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    bool was = lend_torch;
    lend_torch = on && T.ready;
    return PyBool_FromLong(was);
}

static PyObject *py_prepared(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyLong_FromUnsignedLongLong(ocpy_prepared_made());
}

PyMethodDef ocpy_torch_native_methods[] = {
    {"_torch_native_prepared", py_prepared, METH_NOARGS,
     "_torch_native_prepared() -> int: prepared calls made so far (an op called twice in a row with one "
     "argument metadata and values runs through one after: src/python/torch_prepared.h)"},
    {"_torch_native_lend_threads", py_lend_threads, METH_O,
     "_torch_native_lend_threads(on) -> bool (the previous setting): multicore ops called from torch run their "
     "shares on torch's intra-op threads first (default on, paused for 1 s after a launch torch's join held up: "
     "see docs/engine.md)"},
    {"_torch_native_use_boxed", py_use_boxed, METH_O,
     "_torch_native_use_boxed(path) -> bool: register later native kernels through the boxed-kernel shim built "
     "at path (src/torch/boxed_kernel.cc); None: through the stable C ABI again"},
    {"_torch_autograd_impl", py_autograd_impl, METH_VARARGS,
     "_torch_autograd_impl(forward, backward, feed_kinds, feed_indices, targets) -> int: register the shim's "
     "C++ Autograd kernel pairing op forward with op backward (src/torch/autograd_kernel.cc); the registration"},
    {"_torch_autograd_drop", py_autograd_drop, METH_O,
     "_torch_autograd_drop(registration): take a _torch_autograd_impl registration out of torch"},
    {"_torch_native_init", py_native_init, METH_O,
     "_torch_native_init(path) -> bool: find libtorch's stable C ABI through the loaded object at path"},
    {"_torch_native_impl", (PyCFunction)(void (*)(void))py_native_impl, METH_VARARGS | METH_KEYWORDS,
     "_torch_native_impl('lib::op', torch_name=None, fresh_only=False, bump_versions=True) -> bool: register the "
     "op's CPU kernel natively, as torch op lib::<torch_name> (default: the op's name), returning every result "
     "or only the fresh ones (not the Tensor(a!) arguments), bumping the version counters of the Tensor(a!) "
     "arguments (if this torch exports bump_version); False: keep the Python kernel"},
    {"_torch_native_drop", py_native_drop, METH_O,
     "_torch_native_drop(library_name) -> int: take out the native kernels of that library's ops (after "
     "forgetting it: a call still entering one fails naming the op)"},
    {NULL, NULL, 0, NULL}};
