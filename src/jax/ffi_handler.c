/* src/jax/ffi_handler.c — the one XLA FFI handler behind opcore.jax.
 *
 * Every opcore op called from JAX lowers to the same custom call,
 *
 *     custom_call_target="opcore", api_version=API_VERSION_TYPED_FFI,
 *     backend_config={op = "my_ops::relu_forward", alpha = 0.5 : f64, ...}
 *
 * and this handler dispatches on the "op" attribute. The call frame is the
 * op's functional form (docs/jax.md):
 *
 *   operands    the tensors, in schema order: one per Tensor, none for a
 *               Tensor? given None, one per item of a Tensor[];
 *   results     one buffer per fresh result (in order), then one per
 *               mutated tensor (Tensor(a!), each item of a Tensor(a!)[]),
 *               aliased by XLA to its operand (input_output_aliases);
 *   attributes  named after the schema's arguments: a non-tensor's value
 *               (scalar; int64/float64 array for int[]/float[]; string for
 *               str and for ScalarType by dtype name; {} for None; absent
 *               for the schema default), a Tensor[]'s length, {} for a
 *               Tensor? given None.
 *
 * Inputs and results are wrapped as oc_tensor views of XLA's buffers
 * (dense row-major: XLA's default layout, which jax.ffi.ffi_call requests),
 * and oc_op_call writes the op's results straight into XLA's result
 * buffers: zero copies. A mutated tensor is updated in its result buffer;
 * if XLA did not alias that buffer to the operand, the operand is copied
 * into it first.
 *
 * Written in C11 against jaxlib's xla/ffi/api/c_api.h (compiled at first
 * use by python/opcore/jax.py against the installed jaxlib's header, linked
 * against libopcore). It mirrors what XLA_FFI_DEFINE_HANDLER in api.h does:
 * check the call frame's struct size, answer the metadata probe (API
 * version + traits), run only in the execute stage.
 *
 * Per call site, once: the handler also runs in XLA's instantiate stage
 * (when an executable is loaded), where it decodes the custom call's
 * attributes -- the op's name, every non-tensor argument, list lengths,
 * defaults -- into a `site` that XLA keeps with that call site (XLA FFI's
 * per-call-site state, XLA_FFI_State_Set). A call then only wraps its
 * buffers and calls the op: no name lookup, no attribute decoding. After
 * a site's first call has checked its result buffers against the shape
 * function, the site also keeps an oc_call prepared for those buffers'
 * shapes (host.h: oc_call_prepare): later calls check each buffer's dtype
 * and dims against it and only swap data pointers (a thread that finds it
 * taken by another binds its call itself). A site
 * made before a library was loaded or unloaded since is not trusted: the
 * call decodes its frame itself, as it does where no site could be made
 * (the error, if any, is then reported by the call that runs).
 *
 * Thread safety: XLA calls handlers from many threads at once. Op lookups
 * are cached per thread (no locks on the hot path); oc_op_find and
 * oc_op_call are thread-safe. oc_jax_forget_ops() invalidates every
 * thread's cache (call it after unloading a library).
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xla/ffi/api/c_api.h"

#include "opcore/host.h"

#define OC_JAX_EXPORT __attribute__((visibility("default")))

/* Largest number of op arguments handled without a heap allocation. */
#define OC_JAX_STACK_ARGS 32

/* ---- errors ---------------------------------------------------------------- */

static XLA_FFI_Error *make_error(const XLA_FFI_Api *api, XLA_FFI_Error_Code code,
                                 const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static XLA_FFI_Error *make_error(const XLA_FFI_Api *api, XLA_FFI_Error_Code code,
                                 const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    XLA_FFI_Error_Create_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
    args.extension_start = NULL;
    args.message = msg; /* XLA copies the message */
    args.errc = code;
    return api->XLA_FFI_Error_Create(&args);
}

/* XLA's error code for each status (OC_STATUS_MAP, opcore/status.h). */
static XLA_FFI_Error_Code status_to_code(oc_status st)
{
    switch (st) {
#define OC_XLA_CODE_(NAME, code, xla, message) \
    case OC_##NAME: return XLA_FFI_Error_Code_##xla;
        OC_STATUS_MAP(OC_XLA_CODE_)
#undef OC_XLA_CODE_
    }
    return XLA_FFI_Error_Code_INTERNAL;
}

/* An error from the opcore runtime, naming the op: the runtime's message
 * already does when the failure came out of calling this op (oc_errop),
 * else it gets the op's name in front. */
static XLA_FFI_Error *op_error(const XLA_FFI_Api *api, const char *qualname, oc_status st)
{
    const char *msg = oc_errmsg();
    if (msg == NULL || msg[0] == '\0') msg = oc_status_message(st);
    const char *failed = oc_errop();
    if (failed != NULL && strcmp(failed, qualname) == 0)
        return make_error(api, status_to_code(st), "opcore: %s", msg);
    return make_error(api, status_to_code(st), "opcore: op '%s': %s", qualname, msg);
}

/* Struct size checks, as in api.h (the runtime may be newer: its structs may
 * be larger than ours, never smaller). */
#define CHECK_SIZE(api, name, expected, actual)                                       \
    do {                                                                              \
        if ((size_t)(actual) < (size_t)(expected))                                    \
            return make_error((api), XLA_FFI_Error_Code_INVALID_ARGUMENT,             \
                              "opcore: unexpected %s size: expected at least %zu got " \
                              "%zu. Check installed software versions (rebuild the "  \
                              "opcore JAX handler against this jaxlib).",             \
                              (name), (size_t)(expected), (size_t)(actual));          \
    } while (0)

/* ---- the metadata probe ------------------------------------------------------ */

static XLA_FFI_Error *populate_metadata(const XLA_FFI_Api *api, XLA_FFI_Metadata_Extension *ext)
{
    CHECK_SIZE(api, "XLA_FFI_Metadata_Extension", XLA_FFI_Metadata_Extension_STRUCT_SIZE,
               ext->extension_base.struct_size);
    if (ext->metadata == NULL)
        return make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                          "opcore: metadata probe without a metadata struct");
    CHECK_SIZE(api, "XLA_FFI_Metadata", XLA_FFI_Metadata_STRUCT_SIZE, ext->metadata->struct_size);

    /* The API version is the one of the headers this handler was built with. */
    ext->metadata->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
    ext->metadata->api_version.extension_start = NULL;
    ext->metadata->api_version.major_version = XLA_FFI_API_MAJOR;
    ext->metadata->api_version.minor_version = XLA_FFI_API_MINOR;
    /* No traits: a CPU handler, not command-buffer compatible. */
    ext->metadata->traits = 0;
    /* Stateless: state_type_id is XLA_FFI_UNKNOWN_TYPE_ID (0). The field
     * lies past the struct's declared last field; write it only if the
     * runtime's struct is large enough to hold it. */
    if (ext->metadata->struct_size >= offsetof(XLA_FFI_Metadata, state_type_id) +
                                          sizeof ext->metadata->state_type_id)
        ext->metadata->state_type_id.type_id = 0;
    return NULL;
}

/* ---- op lookup cache (per thread, lock-free) -------------------------------- */

#define OC_JAX_CACHE_SLOTS 16
#define OC_JAX_CACHE_NAME 128

typedef struct cache_entry {
    uint64_t generation; /* 0: empty */
    size_t len;
    const oc_op *op;
    char name[OC_JAX_CACHE_NAME];
} cache_entry;

static _Atomic uint64_t g_generation = 1;
static _Thread_local cache_entry t_cache[OC_JAX_CACHE_SLOTS];

static uint64_t hash_name(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Find the op named by (p, n); NULL with oc_errmsg() set if there is none.
 * On a cache miss `buf` receives a NUL-terminated copy of the name (for
 * oc_op_find and the not-found message); a hit copies nothing. */
static const oc_op *lookup_op(const char *p, size_t n, char *buf, size_t cap)
{
    /* Invalid after any library load/unload, or an explicit forget. */
    uint64_t gen = atomic_load_explicit(&g_generation, memory_order_acquire) + oc_registry_generation();
    cache_entry *e = &t_cache[hash_name(p, n) % OC_JAX_CACHE_SLOTS];
    if (e->generation == gen && e->len == n && memcmp(e->name, p, n) == 0) return e->op;

    size_t len = n < cap - 1 ? n : cap - 1;
    memcpy(buf, p, len);
    buf[len] = '\0';
    const oc_op *op = oc_op_find(buf);
    if (op != NULL && n < OC_JAX_CACHE_NAME) {
        e->generation = gen;
        e->len = n;
        e->op = op;
        memcpy(e->name, p, n);
    }
    return op;
}

OC_JAX_EXPORT void oc_jax_forget_ops(void)
{
    atomic_fetch_add_explicit(&g_generation, 1, memory_order_acq_rel);
}

/* ---- call frame decoding ------------------------------------------------------ */

/* The attribute called `name`, or -1. Attributes are sorted by name, but
 * they are few: a linear scan is as fast as a binary search here. */
static int64_t find_attr(const XLA_FFI_Attrs *attrs, const char *name)
{
    size_t n = strlen(name);
    for (int64_t i = 0; i < attrs->size; i++)
        if (attrs->names[i]->len == n && memcmp(attrs->names[i]->ptr, name, n) == 0) return i;
    return -1;
}

/* The opcore dtype of an XLA element type (OC_DTYPE_MAP, opcore/dtype.h). */
static bool xla_to_oc_dtype(XLA_FFI_DataType t, oc_dtype *out)
{
    switch (t) {
#define OC_XLA_DTYPE_(NAME, name, code, bytes, floating, xla, dlpack) \
    case XLA_FFI_DataType_##xla: *out = OC_##NAME; return true;
        OC_DTYPE_MAP(OC_XLA_DTYPE_)
#undef OC_XLA_DTYPE_
    default: return false;
    }
}

/* " float32 float64 ... bool": the dtypes opcore has, for messages. */
#define OC_DTYPE_SPACED_(NAME, name, ...) " " name
static const char oc_dtype_list[] = "" OC_DTYPE_MAP(OC_DTYPE_SPACED_);
#undef OC_DTYPE_SPACED_

/* A scalar attribute as a tagged number. */
static bool scalar_attr(const XLA_FFI_Scalar *s, oc_scalar *out)
{
    const void *v = s->value;
    switch (s->dtype) {
    case XLA_FFI_DataType_F64: *out = oc_scalar_float(*(const double *)v); return true;
    case XLA_FFI_DataType_F32: *out = oc_scalar_float(*(const float *)v); return true;
    case XLA_FFI_DataType_S64: *out = oc_scalar_int(*(const int64_t *)v); return true;
    case XLA_FFI_DataType_S32: *out = oc_scalar_int(*(const int32_t *)v); return true;
    case XLA_FFI_DataType_S16: *out = oc_scalar_int(*(const int16_t *)v); return true;
    case XLA_FFI_DataType_S8: *out = oc_scalar_int(*(const int8_t *)v); return true;
    case XLA_FFI_DataType_U64: /* exact or refused: past INT64_MAX it does not fit an int */
        if (*(const uint64_t *)v > (uint64_t)INT64_MAX) return false;
        *out = oc_scalar_int((int64_t)*(const uint64_t *)v);
        return true;
    case XLA_FFI_DataType_U32: *out = oc_scalar_int(*(const uint32_t *)v); return true;
    case XLA_FFI_DataType_U16: *out = oc_scalar_int(*(const uint16_t *)v); return true;
    case XLA_FFI_DataType_U8: *out = oc_scalar_int(*(const uint8_t *)v); return true;
    case XLA_FFI_DataType_PRED: *out = oc_scalar_bool(*(const uint8_t *)v != 0); return true;
    default: return false;
    }
}

/* Bytes per item of an integer or bool array attribute; 0 for other types. */
static size_t oc_xla_itemsize(XLA_FFI_DataType t)
{
    switch (t) {
    case XLA_FFI_DataType_PRED:
    case XLA_FFI_DataType_S8:
    case XLA_FFI_DataType_U8: return 1;
    case XLA_FFI_DataType_S16:
    case XLA_FFI_DataType_U16: return 2;
    case XLA_FFI_DataType_S32:
    case XLA_FFI_DataType_U32: return 4;
    case XLA_FFI_DataType_S64:
    case XLA_FFI_DataType_U64: return 8;
    default: return 0;
    }
}

/* ---- per-call scratch memory ---------------------------------------------------- */

/* Lists and strings of one call live here: a stack block first (no malloc
 * for ordinary calls), heap blocks beyond it, all freed after the call. */
#define OC_JAX_SCRATCH 4096
#define OC_JAX_SCRATCH_HEAP 64

typedef struct scratch {
    _Alignas(max_align_t) unsigned char block[OC_JAX_SCRATCH];
    size_t used;
    void *heap[OC_JAX_SCRATCH_HEAP];
    int nheap;
} scratch;

static void *scratch_alloc(scratch *s, size_t bytes)
{
    size_t align = _Alignof(max_align_t);
    size_t need = (bytes + align - 1) / align * align;
    if (need <= OC_JAX_SCRATCH - s->used) {
        void *p = s->block + s->used;
        s->used += need;
        return p;
    }
    if (s->nheap == OC_JAX_SCRATCH_HEAP) return NULL;
    void *p = malloc(bytes ? bytes : 1);
    if (p) s->heap[s->nheap++] = p;
    return p;
}

static void scratch_free(scratch *s)
{
    for (int i = 0; i < s->nheap; i++) free(s->heap[i]);
    s->nheap = 0;
}

/* ---- binding the call frame to the op's arguments ------------------------------ */

/* One call being decoded: buffers are consumed in order, fresh results
 * first, then one result per mutated tensor (schema order). */
typedef struct call {
    XLA_FFI_CallFrame *cf;
    const XLA_FFI_Api *api;
    const oc_op *op;
    const char *qualname;
    int64_t next_arg;  /* next operand buffer */
    int64_t next_ret;  /* next result buffer */
    scratch mem;
} call;

/* "argument 'xs' item 2" / "result 1" for messages, formatted only on error. */
static void label(char *buf, size_t cap, const char *what, const char *name, int64_t item)
{
    if (item >= 0) snprintf(buf, cap, "%s '%s' item %lld", what, name, (long long)item);
    else snprintf(buf, cap, "%s '%s'", what, name);
}

/* Wrap an XLA buffer as a row-major oc_tensor view; nothing is formatted
 * unless the buffer is refused (this runs for every buffer of every call). */
static XLA_FFI_Error *buffer_view(call *c, const char *what, const char *name, int64_t item,
                                  const XLA_FFI_Buffer *buf, oc_tensor *t, bool readonly)
{
    char where[192];
    CHECK_SIZE(c->api, "XLA_FFI_Buffer", XLA_FFI_Buffer_STRUCT_SIZE, buf->struct_size);
    oc_dtype dt;
    if (!xla_to_oc_dtype(buf->dtype, &dt)) {
        label(where, sizeof where, what, name, item);
        return make_error(c->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                          "opcore: op '%s': %s has XLA dtype %d, which opcore does not "
                          "support (it has:%s)",
                          c->qualname, where, (int)buf->dtype, oc_dtype_list);
    }
    if (buf->rank < 0 || buf->rank > OC_MAX_DIMS) {
        label(where, sizeof where, what, name, item);
        return make_error(c->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                          "opcore: op '%s': %s has rank %lld; opcore tensors have at most %d dims",
                          c->qualname, where, (long long)buf->rank, OC_MAX_DIMS);
    }
    oc_status st = oc_tensor_init(t, buf->data, dt, (int)buf->rank, buf->dims);
    if (st != OC_OK) return op_error(c->api, c->qualname, st);
    if (readonly) t->flags |= OC_TENSOR_READONLY;
    return NULL;
}

static XLA_FFI_Error *out_of_memory(call *c)
{
    return make_error(c->api, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "opcore: op '%s': out of memory",
                      c->qualname);
}

static XLA_FFI_Error *frame_mismatch(call *c, const char *what)
{
    return make_error(c->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "opcore: op '%s' (%s): the custom call's %s do not match the schema (%lld "
                      "operands, %lld results); call ops through opcore.jax.op()",
                      c->qualname, oc_op_schema(c->op), what, (long long)c->cf->args.size,
                      (long long)c->cf->rets.size);
}

/* Counts the mutated tensors whose result buffer XLA did not alias to the
 * operand (the handler then copied the operand): tests read it. */
static _Atomic uint64_t g_alias_copies;

/* The next operand as argument `name` (item `item` of a list, or -1). A
 * mutated tensor (Tensor(a!)) is written in its result buffer, which XLA
 * aliases to the operand (input_output_aliases); where it did not, the
 * operand is copied there first so the kernel updates the right value. */
static XLA_FFI_Error *take_tensor(call *c, const char *name, int64_t item, bool mutated, oc_tensor *t)
{
    if (c->next_arg >= c->cf->args.size || c->cf->args.types[c->next_arg] != XLA_FFI_ArgType_BUFFER)
        return frame_mismatch(c, "operands");
    const XLA_FFI_Buffer *in = (const XLA_FFI_Buffer *)c->cf->args.args[c->next_arg++];
    XLA_FFI_Error *err = buffer_view(c, "argument", name, item, in, t, !mutated);
    if (err || !mutated) return err;

    if (c->next_ret >= c->cf->rets.size || c->cf->rets.types[c->next_ret] != XLA_FFI_RetType_BUFFER)
        return frame_mismatch(c, "results");
    const XLA_FFI_Buffer *out = (const XLA_FFI_Buffer *)c->cf->rets.rets[c->next_ret++];
    oc_tensor o;
    err = buffer_view(c, "mutated argument", name, item, out, &o, false);
    if (err) return err;
    if (o.dtype != t->dtype || !oc_same_shape(&o, t)) {
        char where[192];
        label(where, sizeof where, "argument", name, item);
        return make_error(c->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                          "opcore: op '%s': %s is mutated, but its result buffer differs from it in "
                          "shape or dtype", c->qualname, where);
    }
    if (o.data != t->data) {
        size_t bytes = (size_t)oc_nbytes(t);
        if (bytes) memcpy(o.data, t->data, bytes);
        atomic_fetch_add_explicit(&g_alias_copies, 1, memory_order_relaxed);
    }
    *t = o;
    return NULL;
}

/* The integer attribute `k` (a scalar of any integer type). */
static bool int_attr(const XLA_FFI_Attrs *attrs, int64_t k, int64_t *out)
{
    oc_scalar s;
    if (attrs->types[k] != XLA_FFI_AttrType_SCALAR ||
        !scalar_attr((const XLA_FFI_Scalar *)attrs->attrs[k], &s) || s.kind == OC_SCALAR_FLOAT)
        return false;
    *out = oc_scalar_to_int64(s);
    return true;
}

static XLA_FFI_Error *bad_attr(call *c, int i, const char *expected)
{
    return make_error(c->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "opcore: op '%s': argument '%s' (%s): expected %s attribute", c->qualname,
                      oc_op_arg_name(c->op, i), oc_op_arg_schema_type(c->op, i), expected);
}

/* Whether dictionary attribute `k` is empty: `{}` stands for None. */
static bool empty_dict(const XLA_FFI_Attrs *attrs, int64_t k)
{
    return ((const XLA_FFI_Attrs *)attrs->attrs[k])->size == 0;
}

/* A Tensor[] argument: attribute `name` holds its length, the items are
 * the next operands. */
static XLA_FFI_Error *bind_tensor_list(call *c, int i, const char *name, int64_t k, oc_value *v)
{
    int64_t n;
    if (k < 0 || !int_attr(&c->cf->attrs, k, &n) || n < 0 || n > c->cf->args.size - c->next_arg)
        return bad_attr(c, i, "its length as an integer");
    oc_tensor *items = scratch_alloc(&c->mem, (size_t)n * sizeof *items);
    if (items == NULL) return out_of_memory(c);
    bool mutated = oc_op_arg_mutable(c->op, i);
    for (int64_t j = 0; j < n; j++) {
        XLA_FFI_Error *err = take_tensor(c, name, j, mutated, &items[j]);
        if (err) return err;
    }
    *v = oc_value_tensors(items, n);
    return NULL;
}

/* An int[] / float[] argument from a dense array attribute. XLA FFI
 * handlers take arrays of many element types; each maps exactly onto
 * opcore's lists (docs/jax.md, "Attribute kinds"): any integer or bool
 * (0/1) array becomes an int[] (int64: every value fits), a float32 or
 * float64 array a float[] (double: every float32 is one). Anything else
 * (a uint64 past INT64_MAX, a float array for an int[], ...) is refused
 * rather than rounded. */
static XLA_FFI_Error *bind_array(call *c, int i, const XLA_FFI_Array *a, oc_arg_type type, oc_value *v)
{
    int64_t n = (int64_t)a->size;
    if (type == OC_ARG_FLOAT_LIST && a->dtype == XLA_FFI_DataType_F64) {
        *v = oc_value_floats((const double *)a->data, n);
        return NULL;
    }
    if (type == OC_ARG_INT_LIST && a->dtype == XLA_FFI_DataType_S64) {
        *v = oc_value_ints((const int64_t *)a->data, n);
        return NULL;
    }
    if (type == OC_ARG_FLOAT_LIST && a->dtype == XLA_FFI_DataType_F32) {
        double *d = scratch_alloc(&c->mem, (size_t)n * sizeof *d);
        if (d == NULL) return out_of_memory(c);
        for (int64_t j = 0; j < n; j++) d[j] = ((const float *)a->data)[j];
        *v = oc_value_floats(d, n);
        return NULL;
    }
    if (type != OC_ARG_INT_LIST)
        return bad_attr(c, i, "a float32 or float64 array (float[])");
    int64_t *d = scratch_alloc(&c->mem, (size_t)n * sizeof *d);
    if (d == NULL) return out_of_memory(c);
    for (int64_t j = 0; j < n; j++) {
        XLA_FFI_Scalar item = {.dtype = a->dtype, .value = (char *)a->data + j * (int64_t)oc_xla_itemsize(a->dtype)};
        oc_scalar sc;
        if (oc_xla_itemsize(a->dtype) == 0 || !scalar_attr(&item, &sc) || sc.kind == OC_SCALAR_FLOAT)
            return bad_attr(c, i, "an integer or bool array (int[]) whose items fit int64");
        d[j] = oc_scalar_to_int64(sc);
    }
    *v = oc_value_ints(d, n);
    return NULL;
}

/* A non-tensor argument from attribute `k`: a scalar, a dense array
 * (int[], float[]), a string (str, ScalarType by name). The runtime checks
 * the value against the schema (list lengths, int vs float...). */
static XLA_FFI_Error *bind_attr(call *c, int i, int64_t k, oc_value *v)
{
    const XLA_FFI_Attrs *attrs = &c->cf->attrs;
    oc_arg_type type = oc_op_arg_type(c->op, i);
    switch (attrs->types[k]) {
    case XLA_FFI_AttrType_SCALAR: {
        oc_scalar s;
        if (!scalar_attr((const XLA_FFI_Scalar *)attrs->attrs[k], &s)) return bad_attr(c, i, "a number");
        if (type == OC_ARG_SCALAR) *v = oc_value_scalar(s);
        else if (s.kind == OC_SCALAR_FLOAT) *v = oc_value_float(s.value.f);
        else if (s.kind == OC_SCALAR_BOOL && type == OC_ARG_BOOL) *v = oc_value_bool(s.value.b);
        else *v = oc_value_int(oc_scalar_to_int64(s));
        return NULL;
    }
    case XLA_FFI_AttrType_ARRAY: return bind_array(c, i, (const XLA_FFI_Array *)attrs->attrs[k], type, v);
    case XLA_FFI_AttrType_STRING: {
        const XLA_FFI_ByteSpan *span = (const XLA_FFI_ByteSpan *)attrs->attrs[k];
        char *s = scratch_alloc(&c->mem, span->len + 1);
        if (s == NULL) return out_of_memory(c);
        memcpy(s, span->ptr, span->len);
        s[span->len] = '\0';
        if (type != OC_ARG_DTYPE) {
            *v = oc_value_str(s);
            return NULL;
        }
        oc_dtype dt;
        if (!oc_dtype_from_name(s, &dt))
            return make_error(c->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                              "opcore: op '%s': argument '%s' (ScalarType): unknown dtype '%s'", c->qualname,
                              oc_op_arg_name(c->op, i), s);
        *v = oc_value_dtype(dt);
        return NULL;
    }
    case XLA_FFI_AttrType_DICTIONARY: /* {} stands for None (bind_arg refuses any other) */
        *v = oc_value_none();
        return NULL;
    }
    return bad_attr(c, i, "a known");
}

/* ---- Dict arguments ------------------------------------------------------------ */

typedef void *(*dict_alloc_fn)(void *ctx, size_t bytes);

static void *scratch_alloc_ctx(void *ctx, size_t bytes) { return scratch_alloc(ctx, bytes); }

static size_t round8(size_t n) { return (n + 7) / 8 * 8; }

static XLA_FFI_Error *dict_key_error(call *c, int i, const XLA_FFI_ByteSpan *key, const char *what)
{
    return make_error(c->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "opcore: op '%s': argument '%s' (Dict): key '%.*s': %s", c->qualname,
                      oc_op_arg_name(c->op, i), (int)key->len, key->ptr, what);
}

/* One dictionary item as an entry; list items and strings go at *p. The
 * mapping is the one of plain arguments (docs/jax.md, "Attribute kinds"):
 * integer scalars int, float32/64 float, bool bool; integer and bool
 * arrays int[], float32/64 arrays float[]; anything else is refused. */
static XLA_FFI_Error *dict_entry(call *c, int i, const XLA_FFI_Attrs *d, int64_t j, char **p, oc_dict_entry *e)
{
    const XLA_FFI_ByteSpan *key = d->names[j];
    switch (d->types[j]) {
    case XLA_FFI_AttrType_SCALAR: {
        oc_scalar s;
        if (!scalar_attr((const XLA_FFI_Scalar *)d->attrs[j], &s))
            return dict_key_error(c, i, key, "expected an int (fitting int64), float or bool scalar");
        if (s.kind == OC_SCALAR_FLOAT) *e = oc_dict_float(e->key, s.value.f);
        else if (s.kind == OC_SCALAR_BOOL) *e = oc_dict_bool(e->key, s.value.b);
        else *e = oc_dict_int(e->key, oc_scalar_to_int64(s));
        return NULL;
    }
    case XLA_FFI_AttrType_ARRAY: {
        const XLA_FFI_Array *a = d->attrs[j];
        int64_t n = (int64_t)a->size;
        if (a->dtype == XLA_FFI_DataType_F32 || a->dtype == XLA_FFI_DataType_F64) {
            double *out = (double *)*p;
            for (int64_t q = 0; q < n; q++)
                out[q] = a->dtype == XLA_FFI_DataType_F64 ? ((const double *)a->data)[q] : ((const float *)a->data)[q];
            *e = oc_dict_floats(e->key, out, n);
        } else {
            int64_t *out = (int64_t *)*p;
            size_t size = oc_xla_itemsize(a->dtype);
            for (int64_t q = 0; q < n; q++) {
                XLA_FFI_Scalar item = {.dtype = a->dtype, .value = (char *)a->data + q * (int64_t)size};
                oc_scalar sc;
                if (size == 0 || !scalar_attr(&item, &sc) || sc.kind == OC_SCALAR_FLOAT)
                    return dict_key_error(c, i, key, "expected an integer or bool array whose items fit int64, "
                                                     "or a float32/float64 array");
                out[q] = oc_scalar_to_int64(sc);
            }
            *e = oc_dict_ints(e->key, out, n);
        }
        *p += (size_t)n * 8;
        return NULL;
    }
    case XLA_FFI_AttrType_STRING: {
        const XLA_FFI_ByteSpan *span = d->attrs[j];
        memcpy(*p, span->ptr, span->len);
        (*p)[span->len] = '\0';
        *e = oc_dict_str(e->key, *p);
        *p += round8(span->len + 1);
        return NULL;
    }
    case XLA_FFI_AttrType_DICTIONARY:
        return dict_key_error(c, i, key, "a nested dictionary is not supported (values: int, float, bool, str, "
                                         "int[], float[])");
    }
    return dict_key_error(c, i, key, "an attribute of unknown type");
}

/* A Dict argument from dictionary attribute `k`. One block from `alloc`
 * holds the oc_dict, its entries, keys, strings and list items. */
static XLA_FFI_Error *bind_dict(call *c, int i, int64_t k, dict_alloc_fn alloc, void *ctx, oc_value *v)
{
    const XLA_FFI_Attrs *attrs = &c->cf->attrs;
    if (k < 0) return bad_attr(c, i, "a dictionary (a Dict has no default: pass {} for none), not a missing");
    if (attrs->types[k] != XLA_FFI_AttrType_DICTIONARY) return bad_attr(c, i, "a dictionary");
    const XLA_FFI_Attrs *d = attrs->attrs[k];
    size_t bytes = sizeof(oc_dict) + (size_t)d->size * sizeof(oc_dict_entry);
    for (int64_t j = 0; j < d->size; j++) {
        bytes += round8(d->names[j]->len + 1);
        if (d->types[j] == XLA_FFI_AttrType_ARRAY) bytes += ((const XLA_FFI_Array *)d->attrs[j])->size * 8;
        if (d->types[j] == XLA_FFI_AttrType_STRING) bytes += round8(((const XLA_FFI_ByteSpan *)d->attrs[j])->len + 1);
    }
    oc_dict *od = alloc(ctx, bytes);
    if (od == NULL) return out_of_memory(c);
    oc_dict_entry *entries = (oc_dict_entry *)(od + 1);
    char *p = (char *)(entries + d->size);
    for (int64_t j = 0; j < d->size; j++) {
        memcpy(p, d->names[j]->ptr, d->names[j]->len);
        p[d->names[j]->len] = '\0';
        entries[j].key = p;
        p += round8(d->names[j]->len + 1);
        XLA_FFI_Error *err = dict_entry(c, i, d, j, &p, &entries[j]);
        if (err) return err;
    }
    *od = oc_dict_of(entries, d->size);
    *v = oc_value_dict(od);
    return NULL;
}

/* Argument `i` as an oc_value. Attributes named after arguments describe
 * them: for a non-tensor, its value ({} = None; absent = the schema
 * default); for a Tensor? given None, {}; for a Tensor[], its length. A
 * plain Tensor is the next operand. */
static XLA_FFI_Error *bind_arg(call *c, int i, oc_tensor *tensor, oc_value *v)
{
    oc_arg_type type = oc_op_arg_type(c->op, i);
    const char *name = oc_op_arg_name(c->op, i);
    int64_t k = find_attr(&c->cf->attrs, name);
    if (type == OC_ARG_TENSOR_LIST) return bind_tensor_list(c, i, name, k, v);
    if (type == OC_ARG_DICT) return bind_dict(c, i, k, scratch_alloc_ctx, &c->mem, v);
    if (k >= 0 && c->cf->attrs.types[k] == XLA_FFI_AttrType_DICTIONARY) {
        if (!empty_dict(&c->cf->attrs, k))
            return bad_attr(c, i, "an empty dictionary ({} = None; opcore has no dictionary arguments), not a "
                                  "non-empty dictionary");
        *v = oc_value_none(); /* the runtime refuses None for a non-optional argument */
        return NULL;
    }
    if (type == OC_ARG_TENSOR) {
        *v = oc_value_tensor(tensor);
        return take_tensor(c, name, -1, oc_op_arg_mutable(c->op, i), tensor);
    }
    if (k >= 0) return bind_attr(c, i, k, v);
    if (oc_op_arg_default(c->op, i, v)) return NULL;
    return make_error(c->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "opcore: op '%s' (%s): missing argument '%s'",
                      c->qualname, oc_op_schema(c->op), name);
}

/* ---- per-call-site state (XLA's instantiate stage) ---------------------------- */

/* How a call supplies argument i: a value decoded once (non-tensors, None,
 * defaults), the next operand, or the next `count` operands (Tensor[]). */
typedef enum { PLAN_VALUE, PLAN_TENSOR, PLAN_LIST } plan_kind;

typedef struct plan {
    plan_kind kind;
    bool mutated;
    int64_t count; /* PLAN_LIST */
} plan;

/* A site's prepared call and the buffers it was prepared for: each
 * buffer's dtype and dims (operands, then results). */
typedef struct prepared {
    oc_call *call;
    int nbufs;
    struct {
        XLA_FFI_DataType dtype;
        int64_t rank;
        int64_t dims[OC_MAX_DIMS];
    } buf[];
} prepared;

static void prepared_free(prepared *p)
{
    if (p == NULL) return;
    oc_call_free(p->call);
    free(p);
}

/* One call site's decoded custom call: the op, each argument's plan, the
 * decoded values (tensor slots are filled per call), the memory they own. */
typedef struct site {
    const oc_op *op;
    uint64_t generation; /* registry generation the op was found in */
    int nargs;
    _Atomic bool checked; /* a call ran with the shape function: later ones skip it */
    bool mutates;         /* some argument is Tensor(a!): no prepared call */
    plan *plans;
    oc_value *vals;
    /* After the first call: the call prepared for this site's buffers (a
     * run only swaps data pointers), taken by one thread at a time, and
     * each buffer's dtype and dims it was prepared for (operands, then
     * results), which every run checks it is given. */
    _Atomic(struct prepared *) prepared;
    int nowned;
    void *owned[]; /* strings and lists copied out of the attributes */
} site;

/* Assigned by XLA when opcore.jax registers the type (oc_jax_site_type_id). */
static XLA_FFI_TypeId g_site_type;

static void site_free(void *p)
{
    site *s = p;
    if (s == NULL) return;
    prepared_free(atomic_load(&s->prepared));
    for (int i = 0; i < s->nowned; i++) free(s->owned[i]);
    free(s->plans);
    free(s->vals);
    free(s);
}

static const XLA_FFI_TypeInfo g_site_type_info = {
    .struct_size = XLA_FFI_TypeInfo_STRUCT_SIZE, .extension_start = NULL, .deleter = site_free};

/* Sites whose calls skip the per-call decoding (tests read it). */
static _Atomic uint64_t g_sites;

static uint64_t current_generation(void)
{
    return atomic_load_explicit(&g_generation, memory_order_acquire) + oc_registry_generation();
}

static void drop_error(const XLA_FFI_Api *api, XLA_FFI_Error *err)
{
    XLA_FFI_Error_Destroy_Args a = {.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE,
                                    .extension_start = NULL, .error = err};
    api->XLA_FFI_Error_Destroy(&a);
}

/* A copy of `bytes` bytes the site owns; false when out of memory. */
static bool site_keep(site *s, const void **p, size_t bytes)
{
    void *copy = malloc(bytes ? bytes : 1);
    if (copy == NULL) return false;
    if (bytes) memcpy(copy, *p, bytes);
    s->owned[s->nowned++] = copy;
    *p = copy;
    return true;
}

/* A block the site owns (a Dict's), or NULL when out of memory. */
static void *site_alloc(void *ctx, size_t bytes)
{
    site *s = ctx;
    void *p = malloc(bytes ? bytes : 1);
    if (p) s->owned[s->nowned++] = p;
    return p;
}

/* Argument i's plan (and value) from the attributes; false when it cannot
 * be decoded here (the calls then decode and report it). */
static bool plan_arg(call *c, site *s, int i)
{
    oc_arg_type type = oc_op_arg_type(c->op, i);
    int64_t k = find_attr(&c->cf->attrs, oc_op_arg_name(c->op, i));
    plan *pl = &s->plans[i];
    oc_value *v = &s->vals[i];
    pl->mutated = oc_op_arg_mutable(c->op, i);
    s->mutates |= pl->mutated;
    if (type == OC_ARG_TENSOR_LIST) {
        pl->kind = PLAN_LIST;
        return k >= 0 && int_attr(&c->cf->attrs, k, &pl->count) && pl->count >= 0;
    }
    pl->kind = PLAN_VALUE;
    if (type == OC_ARG_DICT) {
        XLA_FFI_Error *err = bind_dict(c, i, k, site_alloc, s, v);
        if (err) drop_error(c->api, err);
        return err == NULL;
    }
    if (k >= 0 && c->cf->attrs.types[k] == XLA_FFI_AttrType_DICTIONARY) {
        *v = oc_value_none();
        return empty_dict(&c->cf->attrs, k); /* another dictionary: the calls report it */
    }
    if (type == OC_ARG_TENSOR) {
        pl->kind = PLAN_TENSOR;
        return true;
    }
    if (k < 0) return oc_op_arg_default(c->op, i, v); /* the op's own memory: valid while it is loaded */
    XLA_FFI_Error *err = bind_attr(c, i, k, v);
    if (err) {
        drop_error(c->api, err);
        return false;
    }
    switch (v->type) { /* bind_attr's strings live in the call's scratch, its lists in the frame */
    case OC_ARG_STR: return site_keep(s, (const void **)&v->v.s, strlen(v->v.s) + 1);
    case OC_ARG_INT_LIST:
        return site_keep(s, (const void **)&v->v.ints.values, (size_t)v->v.ints.count * sizeof(int64_t));
    case OC_ARG_FLOAT_LIST:
        return site_keep(s, (const void **)&v->v.floats.values, (size_t)v->v.floats.count * sizeof(double));
    default: return true;
    }
}

/* The site of the custom call in `cf` (the instantiate stage's frame:
 * attributes only), or NULL when it cannot be decoded here. */
static site *make_site(XLA_FFI_CallFrame *cf, const XLA_FFI_Api *api)
{
    int64_t ai = find_attr(&cf->attrs, "op");
    if (ai < 0 || cf->attrs.types[ai] != XLA_FFI_AttrType_STRING) return NULL;
    const XLA_FFI_ByteSpan *name = (const XLA_FFI_ByteSpan *)cf->attrs.attrs[ai];
    char buf[256];
    uint64_t gen = current_generation();
    const oc_op *op = lookup_op(name->ptr, name->len, buf, sizeof buf);
    if (op == NULL) return NULL;
    int nargs = oc_op_num_args(op);
    site *s = calloc(1, sizeof *s + (size_t)nargs * sizeof(void *));
    if (s == NULL) return NULL;
    s->op = op;
    s->generation = gen;
    s->nargs = nargs;
    s->plans = calloc((size_t)nargs + 1, sizeof *s->plans);
    s->vals = calloc((size_t)nargs + 1, sizeof *s->vals);
    call c;
    c.cf = cf;
    c.api = api;
    c.op = op;
    c.qualname = oc_op_qualname(op);
    c.mem.used = 0;
    c.mem.nheap = 0;
    bool ok = s->plans != NULL && s->vals != NULL;
    for (int i = 0; ok && i < nargs; i++) ok = plan_arg(&c, s, i);
    scratch_free(&c.mem);
    if (!ok) {
        site_free(s);
        return NULL;
    }
    return s;
}

/* The instantiate stage: make this call site's state. Never an error: a
 * site that cannot be made leaves its calls to decode themselves. */
static XLA_FFI_Error *instantiate(XLA_FFI_CallFrame *cf, const XLA_FFI_Api *api)
{
    if (g_site_type.type_id == 0) return NULL; /* the type was not registered: no state */
    site *s = make_site(cf, api);
    if (s == NULL) return NULL;
    XLA_FFI_State_Set_Args a = {.struct_size = XLA_FFI_State_Set_Args_STRUCT_SIZE, .extension_start = NULL,
                                .ctx = cf->ctx, .stage = XLA_FFI_ExecutionStage_INSTANTIATE,
                                .type_id = &g_site_type, .state = s};
    XLA_FFI_Error *err = api->XLA_FFI_State_Set(&a);
    if (err) {
        drop_error(api, err);
        site_free(s);
        return NULL;
    }
    atomic_fetch_add_explicit(&g_sites, 1, memory_order_relaxed);
    return NULL;
}

/* This call site's state, if it has a trustworthy one. */
static site *find_site(XLA_FFI_CallFrame *cf, const XLA_FFI_Api *api)
{
    if (g_site_type.type_id == 0) return NULL;
    XLA_FFI_State_Get_Args a = {.struct_size = XLA_FFI_State_Get_Args_STRUCT_SIZE, .extension_start = NULL,
                                .ctx = cf->ctx, .stage = XLA_FFI_ExecutionStage_INSTANTIATE,
                                .type_id = &g_site_type, .state = NULL};
    XLA_FFI_Error *err = api->XLA_FFI_State_Get(&a);
    if (err) {
        drop_error(api, err);
        return NULL;
    }
    site *s = a.state;
    return s != NULL && s->generation == current_generation() ? s : NULL;
}

/* Argument i of a call at a site: its decoded value, or the next operands. */
static XLA_FFI_Error *bind_planned(call *c, site *s, int i, oc_tensor *tensor, oc_value *v)
{
    const plan *pl = &s->plans[i];
    switch (pl->kind) {
    case PLAN_VALUE: *v = s->vals[i]; return NULL;
    case PLAN_TENSOR:
        *v = oc_value_tensor(tensor);
        return take_tensor(c, oc_op_arg_name(c->op, i), -1, pl->mutated, tensor);
    case PLAN_LIST: {
        if (pl->count > c->cf->args.size - c->next_arg) return frame_mismatch(c, "operands");
        oc_tensor *items = scratch_alloc(&c->mem, (size_t)pl->count * sizeof *items);
        if (items == NULL) return out_of_memory(c);
        for (int64_t j = 0; j < pl->count; j++) {
            XLA_FFI_Error *err = take_tensor(c, oc_op_arg_name(c->op, i), j, pl->mutated, &items[j]);
            if (err) return err;
        }
        *v = oc_value_tensors(items, pl->count);
        return NULL;
    }
    }
    return NULL;
}

/* ---- a site's prepared call ----------------------------------------------------- */

/* Sites whose calls run through a prepared call (tests read it). */
static _Atomic uint64_t g_prepared_sites;

/* Buffer k of the frame: operands, then results; NULL if not a buffer. */
static const XLA_FFI_Buffer *frame_buffer(const XLA_FFI_CallFrame *cf, int64_t k)
{
    if (k < cf->args.size)
        return cf->args.types[k] == XLA_FFI_ArgType_BUFFER ? (const XLA_FFI_Buffer *)cf->args.args[k] : NULL;
    k -= cf->args.size;
    return cf->rets.types[k] == XLA_FFI_RetType_BUFFER ? (const XLA_FFI_Buffer *)cf->rets.rets[k] : NULL;
}

/* After a site's first call (checked against the shape function):
 * prepare the call for these buffers, so later calls only swap data
 * pointers. Ops that mutate an argument keep binding per call (XLA may
 * or may not alias its buffer). Nothing is reported when it cannot be
 * made: the calls then bind themselves. */
static void prepare_site(call *c, site *s, const oc_value *vals, int nargs, const oc_tensor *outs,
                         const oc_grid *grid)
{
    int64_t nbufs = c->cf->args.size + c->cf->rets.size;
    if (s->mutates || nbufs > OC_JAX_STACK_ARGS || atomic_load_explicit(&s->prepared, memory_order_relaxed))
        return;
    prepared *p = calloc(1, sizeof *p + (size_t)nbufs * sizeof p->buf[0]);
    if (p == NULL) return;
    p->nbufs = (int)nbufs;
    bool ok = oc_call_prepare(c->op, vals, nargs, outs, grid, &p->call) == OC_OK &&
              oc_call_num_data(p->call) == p->nbufs;
    for (int k = 0; ok && k < p->nbufs; k++) {
        const XLA_FFI_Buffer *b = frame_buffer(c->cf, k);
        ok = b != NULL && b->rank >= 0 && b->rank <= OC_MAX_DIMS;
        if (!ok) break;
        p->buf[k].dtype = b->dtype;
        p->buf[k].rank = b->rank;
        memcpy(p->buf[k].dims, b->dims, (size_t)b->rank * sizeof(int64_t));
    }
    prepared *none = NULL;
    if (!ok || !atomic_compare_exchange_strong(&s->prepared, &none, p)) {
        oc_clear_error();
        prepared_free(p);
        return;
    }
    atomic_fetch_add_explicit(&g_prepared_sites, 1, memory_order_relaxed);
}

/* Run the call through the site's prepared call: true if it did (the
 * call's error, if any, in *err); false when another thread holds it or
 * the buffers are not the ones it was prepared for. */
static bool run_prepared(XLA_FFI_CallFrame *cf, const XLA_FFI_Api *api, site *s, XLA_FFI_Error **err)
{
    prepared *p = atomic_exchange_explicit(&s->prepared, NULL, memory_order_acquire);
    if (p == NULL) return false;
    void *data[OC_JAX_STACK_ARGS];
    bool ok = cf->args.size + cf->rets.size == p->nbufs;
    for (int k = 0; ok && k < p->nbufs; k++) {
        const XLA_FFI_Buffer *b = frame_buffer(cf, k);
        ok = b != NULL && b->dtype == p->buf[k].dtype && b->rank == p->buf[k].rank;
        for (int64_t d = 0; ok && d < b->rank; d++) ok = b->dims[d] == p->buf[k].dims[d];
        if (ok) data[k] = b->data;
    }
    if (ok) {
        oc_status st = oc_call_run(p->call, data);
        *err = st != OC_OK ? op_error(api, oc_op_qualname(s->op), st) : NULL;
    }
    atomic_store_explicit(&s->prepared, p, memory_order_release);
    return ok;
}

/* ---- the handler ---------------------------------------------------------------- */

static XLA_FFI_Error *run_bound(call *c, oc_value *vals, oc_tensor *tensors, site *s)
{
    int nargs = oc_op_num_args(c->op), nres = oc_op_num_results(c->op);
    oc_tensor outs[OC_MAX_RESULTS];
    /* Fresh results are the first result buffers, in order; aliased ones
     * (-> Tensor(a!)) are filled by the runtime. */
    for (int r = 0; r < nres; r++) {
        if (oc_op_result_alias(c->op, r) >= 0) continue;
        if (c->next_ret >= c->cf->rets.size || c->cf->rets.types[c->next_ret] != XLA_FFI_RetType_BUFFER)
            return frame_mismatch(c, "results");
        const char *rname = oc_op_result_name(c->op, r);
        XLA_FFI_Error *err = buffer_view(c, "result", rname[0] ? rname : "0", -1,
                                         (const XLA_FFI_Buffer *)c->cf->rets.rets[c->next_ret++], &outs[r], false);
        if (err) return err;
    }
    for (int i = 0; i < nargs; i++) {
        XLA_FFI_Error *err = s ? bind_planned(c, s, i, &tensors[i], &vals[i]) : bind_arg(c, i, &tensors[i], &vals[i]);
        if (err) return err;
    }
    if (c->next_arg != c->cf->args.size) return frame_mismatch(c, "operands");
    if (c->next_ret != c->cf->rets.size) return frame_mismatch(c, "results");
    /* A launch grid for this call (opcore.jax.op(..., grid=...) / op[grid]):
     * an int64 array attribute, checked by the runtime. */
    oc_grid grid = {0};
    int64_t g = find_attr(&c->cf->attrs, "opcore_grid");
    if (g >= 0) {
        const XLA_FFI_Array *a = (const XLA_FFI_Array *)c->cf->attrs.attrs[g];
        if (c->cf->attrs.types[g] != XLA_FFI_AttrType_ARRAY || a->dtype != XLA_FFI_DataType_S64 ||
            a->size > OC_MAX_GRID_DIMS)
            return make_error(c->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                              "opcore: op '%s': attribute 'opcore_grid' must be 1 to %d int64s", c->qualname,
                              OC_MAX_GRID_DIMS);
        grid.ndim = (int)a->size;
        for (int d = 0; d < grid.ndim; d++) grid.dims[d] = ((const int64_t *)a->data)[d];
    }
    /* A site's result buffers keep their shapes (XLA compiled them): once
     * one call has checked them against the shape function, the others
     * skip it. */
    bool checked = s && atomic_load_explicit(&s->checked, memory_order_relaxed);
    const oc_grid *gp = g >= 0 ? &grid : NULL;
    oc_status st = checked ? oc_op_call_prechecked(c->op, vals, nargs, nres ? outs : NULL, gp)
                           : oc_op_call_grid(c->op, vals, nargs, nres ? outs : NULL, gp);
    if (st != OC_OK) return op_error(c->api, c->qualname, st);
    if (s && !checked) {
        atomic_store_explicit(&s->checked, true, memory_order_relaxed);
        prepare_site(c, s, vals, nargs, nres ? outs : NULL, gp);
    }
    return NULL;
}

/* Run `op` on the frame, through the site's plan when there is one. */
static XLA_FFI_Error *run_call(XLA_FFI_CallFrame *cf, const XLA_FFI_Api *api, const oc_op *op, site *s)
{
    call c; /* not zero-initialised: the scratch block is 4 KiB */
    c.cf = cf;
    c.api = api;
    c.op = op;
    c.qualname = oc_op_qualname(op);
    c.next_arg = c.next_ret = 0;
    c.mem.used = 0;
    c.mem.nheap = 0;
    int nargs = oc_op_num_args(op);
    oc_value stack_vals[OC_JAX_STACK_ARGS];
    oc_tensor stack_tensors[OC_JAX_STACK_ARGS];
    oc_value *vals = stack_vals;
    oc_tensor *tensors = stack_tensors;
    XLA_FFI_Error *err = NULL;
    if (nargs > OC_JAX_STACK_ARGS) { /* beyond the stack arrays: the call's scratch memory */
        tensors = scratch_alloc(&c.mem, (size_t)nargs * (sizeof *vals + sizeof *tensors));
        if (tensors == NULL) err = out_of_memory(&c);
        else vals = (oc_value *)(tensors + nargs);
    }
    if (err == NULL) err = run_bound(&c, vals, tensors, s);
    scratch_free(&c.mem);
    return err;
}

static XLA_FFI_Error *run_op(XLA_FFI_CallFrame *cf, const XLA_FFI_Api *api)
{
    site *s = find_site(cf, api);
    XLA_FFI_Error *err;
    if (s != NULL && run_prepared(cf, api, s, &err)) return err;
    if (s != NULL) return run_call(cf, api, s->op, s);

    /* No site: decode the frame. The op's name first. */
    int64_t ai = find_attr(&cf->attrs, "op");
    if (ai < 0 || cf->attrs.types[ai] != XLA_FFI_AttrType_STRING)
        return make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                          "opcore: custom call without a string attribute 'op' (the op's "
                          "qualified name); call ops through opcore.jax.op()");
    const XLA_FFI_ByteSpan *name = (const XLA_FFI_ByteSpan *)cf->attrs.attrs[ai];
    char missing[256];
    const oc_op *op = lookup_op(name->ptr, name->len, missing, sizeof missing);
    if (op == NULL)
        return make_error(api, XLA_FFI_Error_Code_NOT_FOUND,
                          "opcore: op '%s' is not loaded (%s); load its library first "
                          "(opcore.custom_op.load / load_library)",
                          missing, oc_errmsg());
    return run_call(cf, api, op, NULL);
}

/* The XLA FFI handler: register it with
 *   jax.ffi.register_ffi_target("opcore", jax.ffi.pycapsule(lib.oc_jax_ffi_handler), platform="cpu") */
OC_JAX_EXPORT XLA_FFI_Error *oc_jax_ffi_handler(XLA_FFI_CallFrame *cf)
{
    const XLA_FFI_Api *api = cf->api;
    CHECK_SIZE(api, "XLA_FFI_CallFrame", XLA_FFI_CallFrame_STRUCT_SIZE, cf->struct_size);

    /* The metadata probe (at registration): report API version and traits. */
    if (cf->extension_start != NULL && cf->extension_start->type == XLA_FFI_Extension_Metadata)
        return populate_metadata(api, (XLA_FFI_Metadata_Extension *)cf->extension_start);

    /* Registered for the instantiate and execute stages. */
    if (cf->stage == XLA_FFI_ExecutionStage_INSTANTIATE) {
        CHECK_SIZE(api, "XLA_FFI_Attrs", XLA_FFI_Attrs_STRUCT_SIZE, cf->attrs.struct_size);
        return instantiate(cf, api);
    }
    if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;

    CHECK_SIZE(api, "XLA_FFI_Args", XLA_FFI_Args_STRUCT_SIZE, cf->args.struct_size);
    CHECK_SIZE(api, "XLA_FFI_Rets", XLA_FFI_Rets_STRUCT_SIZE, cf->rets.struct_size);
    CHECK_SIZE(api, "XLA_FFI_Attrs", XLA_FFI_Attrs_STRUCT_SIZE, cf->attrs.struct_size);
    return run_op(cf, api);
}

/* How many mutated tensors the handler had to copy into their result
 * buffer because XLA did not alias them (see take_tensor). */
OC_JAX_EXPORT uint64_t oc_jax_alias_copies(void)
{
    return atomic_load_explicit(&g_alias_copies, memory_order_relaxed);
}

/* The call-site state's type: its id (XLA assigns it when opcore.jax
 * registers the type with jax.ffi.register_ffi_type) and its deleter. */
OC_JAX_EXPORT void *oc_jax_site_type_id(void) { return &g_site_type; }

OC_JAX_EXPORT const void *oc_jax_site_type_info(void) { return &g_site_type_info; }

/* How many call sites were decoded once, in the instantiate stage. */
OC_JAX_EXPORT uint64_t oc_jax_sites(void)
{
    return atomic_load_explicit(&g_sites, memory_order_relaxed);
}

/* How many call sites run their calls through a prepared call (the
 * buffers bound once, data pointers swapped per call). */
OC_JAX_EXPORT uint64_t oc_jax_prepared_sites(void)
{
    return atomic_load_explicit(&g_prepared_sites, memory_order_relaxed);
}

/* The handler's address (for ctypes: no function-pointer casts in Python). */
OC_JAX_EXPORT void *oc_jax_handler_address(void)
{
    return (void *)(uintptr_t)&oc_jax_ffi_handler;
}

/* The XLA FFI API version this handler was compiled against (major*1000+minor). */
OC_JAX_EXPORT int oc_jax_ffi_api_version(void)
{
    return XLA_FFI_API_MAJOR * 1000 + XLA_FFI_API_MINOR;
}
