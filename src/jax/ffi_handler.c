/* src/jax/ffi_handler.c — the one XLA FFI handler behind opcore.jax.
 *
 * Every opcore op called from JAX lowers to the same custom call,
 *
 *     custom_call_target="opcore", api_version=API_VERSION_TYPED_FFI,
 *     backend_config={op = "my_ops::relu_forward", alpha = 0.5 : f64, ...}
 *
 * and this handler dispatches on the "op" attribute. The call frame carries
 * the op's Tensor arguments as XLA buffers (in schema order), one result
 * buffer, and the op's non-tensor arguments as attributes named after the
 * schema's argument names (float, int, bool; a Scalar arrives as a float,
 * int or bool attribute). A non-tensor argument without an attribute takes
 * its schema default.
 *
 * Inputs and the result are wrapped as oc_tensor views of XLA's buffers
 * (dense row-major: XLA's default layout, which jax.ffi.ffi_call requests),
 * and oc_op_call writes the op's output straight into XLA's result buffer:
 * zero copies.
 *
 * Written in C11 against jaxlib's xla/ffi/api/c_api.h (compiled at first
 * use by python/opcore/jax.py against the installed jaxlib's header, linked
 * against libopcore). It mirrors what XLA_FFI_DEFINE_HANDLER in api.h does:
 * check the call frame's struct size, answer the metadata probe (API
 * version + traits), run only in the execute stage.
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

static XLA_FFI_Error_Code status_to_code(oc_status st)
{
    switch (st) {
    case OC_EINVAL:
    case OC_ESHAPE:
    case OC_EMETA:
        return XLA_FFI_Error_Code_INVALID_ARGUMENT;
    case OC_ENOTFOUND:
        return XLA_FFI_Error_Code_NOT_FOUND;
    case OC_ENOMEM:
        return XLA_FFI_Error_Code_RESOURCE_EXHAUSTED;
    case OC_EEXIST:
        return XLA_FFI_Error_Code_ALREADY_EXISTS;
    case OC_EABI:
        return XLA_FFI_Error_Code_FAILED_PRECONDITION;
    default:
        return XLA_FFI_Error_Code_INTERNAL;
    }
}

/* An error from the opcore runtime: the message names the op (prefixed if
 * oc_errmsg() does not already name it). */
static XLA_FFI_Error *op_error(const XLA_FFI_Api *api, const char *qualname, oc_status st)
{
    const char *msg = oc_errmsg();
    if (msg == NULL || msg[0] == '\0') msg = oc_status_name(st);
    if (strstr(msg, qualname) != NULL)
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
 * `qualname` receives a NUL-terminated copy of the name. */
static const oc_op *lookup_op(const char *p, size_t n, char *qualname, size_t cap)
{
    size_t len = n < cap - 1 ? n : cap - 1;
    memcpy(qualname, p, len);
    qualname[len] = '\0';

    /* Invalid after any library load/unload, or an explicit forget. */
    uint64_t gen = atomic_load_explicit(&g_generation, memory_order_acquire) + oc_registry_generation();
    cache_entry *e = &t_cache[hash_name(p, n) % OC_JAX_CACHE_SLOTS];
    if (e->generation == gen && e->len == n && memcmp(e->name, p, n) == 0) return e->op;

    const oc_op *op = oc_op_find(qualname);
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

static bool span_eq(const XLA_FFI_ByteSpan *s, const char *str)
{
    size_t n = strlen(str);
    return s->len == n && memcmp(s->ptr, str, n) == 0;
}

/* The attribute called `name`, or -1. Attributes are sorted by name, but
 * they are few: a linear scan is as fast as a binary search here. */
static int64_t find_attr(const XLA_FFI_Attrs *attrs, const char *name)
{
    for (int64_t i = 0; i < attrs->size; i++)
        if (span_eq(attrs->names[i], name)) return i;
    return -1;
}

static bool xla_to_oc_dtype(XLA_FFI_DataType t, oc_dtype *out)
{
    switch (t) {
    case XLA_FFI_DataType_F32: *out = OC_FLOAT32; return true;
    case XLA_FFI_DataType_F64: *out = OC_FLOAT64; return true;
    case XLA_FFI_DataType_F16: *out = OC_FLOAT16; return true;
    case XLA_FFI_DataType_BF16: *out = OC_BFLOAT16; return true;
    case XLA_FFI_DataType_S8: *out = OC_INT8; return true;
    case XLA_FFI_DataType_S16: *out = OC_INT16; return true;
    case XLA_FFI_DataType_S32: *out = OC_INT32; return true;
    case XLA_FFI_DataType_S64: *out = OC_INT64; return true;
    case XLA_FFI_DataType_U8: *out = OC_UINT8; return true;
    case XLA_FFI_DataType_PRED: *out = OC_BOOL; return true;
    default: return false;
    }
}

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
    case XLA_FFI_DataType_U64: *out = oc_scalar_int((int64_t)*(const uint64_t *)v); return true;
    case XLA_FFI_DataType_U32: *out = oc_scalar_int(*(const uint32_t *)v); return true;
    case XLA_FFI_DataType_U16: *out = oc_scalar_int(*(const uint16_t *)v); return true;
    case XLA_FFI_DataType_U8: *out = oc_scalar_int(*(const uint8_t *)v); return true;
    case XLA_FFI_DataType_PRED: *out = oc_scalar_bool(*(const uint8_t *)v != 0); return true;
    default: return false;
    }
}

/* Wrap an XLA buffer as a row-major oc_tensor view. `argname` names the
 * argument in messages (NULL: the result); nothing is formatted unless the
 * buffer is refused, since this runs for every buffer of every call. */
static XLA_FFI_Error *buffer_view(const XLA_FFI_Api *api, const char *qualname, const char *argname,
                                  const XLA_FFI_Buffer *buf, oc_tensor *t, bool readonly)
{
    char what[160];
    CHECK_SIZE(api, "XLA_FFI_Buffer", XLA_FFI_Buffer_STRUCT_SIZE, buf->struct_size);
    oc_dtype dt;
    bool dtype_ok = xla_to_oc_dtype(buf->dtype, &dt);
    if (!dtype_ok || buf->rank < 0 || buf->rank > OC_MAX_DIMS) {
        if (argname) snprintf(what, sizeof what, "argument '%s'", argname);
        else snprintf(what, sizeof what, "the result");
    }
    if (!dtype_ok)
        return make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                          "opcore: op '%s': %s has XLA dtype %d, which opcore does not "
                          "support (float32/64, float16, bfloat16, int8/16/32/64, uint8, bool)",
                          qualname, what, (int)buf->dtype);
    if (buf->rank < 0 || buf->rank > OC_MAX_DIMS)
        return make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                          "opcore: op '%s': %s has rank %lld; opcore tensors have at most %d dims",
                          qualname, what, (long long)buf->rank, OC_MAX_DIMS);
    oc_status st = oc_tensor_init(t, buf->data, dt, (int)buf->rank, buf->dims);
    if (st != OC_OK) return op_error(api, qualname, st);
    if (readonly) t->flags |= OC_TENSOR_READONLY;
    return NULL;
}

/* ---- the handler ---------------------------------------------------------------- */

static XLA_FFI_Error *run_op(XLA_FFI_CallFrame *cf, const XLA_FFI_Api *api)
{
    /* The op's name. */
    int64_t ai = find_attr(&cf->attrs, "op");
    if (ai < 0 || cf->attrs.types[ai] != XLA_FFI_AttrType_STRING)
        return make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                          "opcore: custom call without a string attribute 'op' (the op's "
                          "qualified name); call ops through opcore.jax.op()");
    const XLA_FFI_ByteSpan *name = (const XLA_FFI_ByteSpan *)cf->attrs.attrs[ai];
    char qualname[256];
    const oc_op *op = lookup_op(name->ptr, name->len, qualname, sizeof qualname);
    if (op == NULL)
        return make_error(api, XLA_FFI_Error_Code_NOT_FOUND,
                          "opcore: op '%s' is not loaded (%s); load its library first "
                          "(opcore.custom_op.load / load_library)",
                          qualname, oc_errmsg());

    /* One result buffer. */
    if (cf->rets.size != 1 || cf->rets.types[0] != XLA_FFI_RetType_BUFFER)
        return make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                          "opcore: op '%s': expected 1 result buffer, got %lld", qualname,
                          (long long)cf->rets.size);
    oc_tensor out;
    XLA_FFI_Error *err =
        buffer_view(api, qualname, NULL, (const XLA_FFI_Buffer *)cf->rets.rets[0], &out, false);
    if (err) return err;

    /* Arguments: tensors from the buffers in order, the rest from attributes. */
    int nargs = oc_op_num_args(op);
    oc_value stack_vals[OC_JAX_STACK_ARGS];
    oc_tensor stack_tensors[OC_JAX_STACK_ARGS];
    oc_value *vals = stack_vals;
    oc_tensor *tensors = stack_tensors;
    void *heap = NULL;
    if (nargs > OC_JAX_STACK_ARGS) {
        heap = malloc((size_t)nargs * (sizeof *vals + sizeof *tensors));
        if (heap == NULL)
            return make_error(api, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED,
                              "opcore: op '%s': out of memory", qualname);
        tensors = (oc_tensor *)heap;
        vals = (oc_value *)(tensors + nargs);
    }

    int64_t nbuf = 0;
    for (int i = 0; i < nargs && err == NULL; i++) {
        oc_arg_type type = oc_op_arg_type(op, i);
        const char *aname = oc_op_arg_name(op, i);
        if (type == OC_ARG_TENSOR) {
            if (nbuf >= cf->args.size) {
                err = make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                                 "opcore: op '%s' (%s): got only %lld tensor arguments",
                                 qualname, oc_op_schema(op), (long long)cf->args.size);
                break;
            }
            if (cf->args.types[nbuf] != XLA_FFI_ArgType_BUFFER) {
                err = make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                                 "opcore: op '%s': argument '%s' is not a buffer", qualname, aname);
                break;
            }
            err = buffer_view(api, qualname, aname, (const XLA_FFI_Buffer *)cf->args.args[nbuf],
                              &tensors[i], true);
            nbuf++;
            if (err == NULL) vals[i] = oc_value_tensor(&tensors[i]);
            continue;
        }

        int64_t k = find_attr(&cf->attrs, aname);
        if (k < 0) {
            if (!oc_op_arg_default(op, i, &vals[i]))
                err = make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                                 "opcore: op '%s' (%s): missing argument '%s' (%s)", qualname,
                                 oc_op_schema(op), aname, oc_arg_type_name(type));
            continue;
        }
        oc_scalar s;
        if (cf->attrs.types[k] != XLA_FFI_AttrType_SCALAR ||
            !scalar_attr((const XLA_FFI_Scalar *)cf->attrs.attrs[k], &s)) {
            err = make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                             "opcore: op '%s': argument '%s' (%s) must be a number attribute",
                             qualname, aname, oc_arg_type_name(type));
            continue;
        }
        switch (type) {
        case OC_ARG_FLOAT: vals[i] = oc_value_float(oc_scalar_to_double(s)); break;
        case OC_ARG_INT:
            if (s.kind == OC_SCALAR_FLOAT)
                err = make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                                 "opcore: op '%s': argument '%s' (int) got a float %g", qualname,
                                 aname, s.value.f);
            else
                vals[i] = oc_value_int(oc_scalar_to_int64(s));
            break;
        case OC_ARG_BOOL: vals[i] = oc_value_bool(oc_scalar_to_int64(s) != 0); break;
        case OC_ARG_SCALAR: vals[i] = oc_value_scalar(s); break;
        default:
            err = make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                             "opcore: op '%s': argument '%s' has an unknown type", qualname, aname);
        }
    }
    if (err == NULL && nbuf != cf->args.size)
        err = make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "opcore: op '%s' (%s) takes %lld tensor arguments, got %lld", qualname,
                         oc_op_schema(op), (long long)nbuf, (long long)cf->args.size);

    if (err == NULL) {
        oc_status st = oc_op_call(op, vals, nargs, &out);
        if (st != OC_OK) err = op_error(api, qualname, st);
    }
    free(heap);
    return err;
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

    /* Registered for the execute stage only; nothing to do in the others. */
    if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;

    CHECK_SIZE(api, "XLA_FFI_Args", XLA_FFI_Args_STRUCT_SIZE, cf->args.struct_size);
    CHECK_SIZE(api, "XLA_FFI_Rets", XLA_FFI_Rets_STRUCT_SIZE, cf->rets.struct_size);
    CHECK_SIZE(api, "XLA_FFI_Attrs", XLA_FFI_Attrs_STRUCT_SIZE, cf->attrs.struct_size);
    return run_op(cf, api);
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
