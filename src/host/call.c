/* Calling an op: check the arguments against the schema, run the shape
 * function, allocate the output, run the kernel on one core or all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "engine/core.h"
#include "engine/pool.h"
#include "engine/redzone.h"
#include "opcore/host.h"
#include "opcore/tensor_ops.h"

/* Argument storage for one call: the kernel gets pointers into it. */
typedef struct call_frame {
    int nargs;
    oc_tensor tensors[OC_MAX_ARGS];
    const oc_tensor *tensor_ptrs[OC_MAX_ARGS];
    union {
        double f;
        int64_t i;
        uint8_t b;
        oc_scalar s;
    } values[OC_MAX_ARGS];
    void *slots[OC_MAX_ARGS];
} call_frame;

static oc_status arg_error(const struct oc_op *op, int i, const char *fmt, const char *detail)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, detail);
    return oc_set_error(OC_EINVAL, "op '%s': argument %d '%s': %s", op->qualname, i + 1,
                        op->def.schema.args[i].name, msg);
}

static oc_status check_tensor(const struct oc_op *op, int i, const oc_tensor *t, bool need_data)
{
    char buf[64];
    if (!t) return arg_error(op, i, "expected a Tensor, got NULL%s", "");
    if (!oc_dtype_is_valid(t->dtype)) {
        snprintf(buf, sizeof buf, "%d", (int)t->dtype);
        return arg_error(op, i, "has an invalid dtype (%s)", buf);
    }
    if (t->ndim < 0 || t->ndim > OC_MAX_DIMS) {
        snprintf(buf, sizeof buf, "%d", t->ndim);
        return arg_error(op, i, "has %s dims (0 to 16 allowed)", buf);
    }
    for (int d = 0; d < t->ndim; d++)
        if (t->sizes[d] < 0) return arg_error(op, i, "has a negative size%s", "");
    if (need_data && !t->data && oc_numel(t) > 0)
        return arg_error(op, i, "is a meta tensor (no data)%s", "");
    return OC_OK;
}

/* Fill the frame from `args`, applying defaults. `need_data`: tensors must
 * have data (a call), or may be meta (shape inference only). */
static oc_status bind_args(const struct oc_op *op, const oc_value *args, int nargs, bool need_data,
                           call_frame *f)
{
    const oc_schema *s = &op->def.schema;
    if (nargs > s->num_args || (nargs > 0 && !args))
        return oc_set_error(OC_EINVAL, "op '%s' takes %d argument%s, got %d (schema: %s)", op->qualname,
                            s->num_args, s->num_args == 1 ? "" : "s", nargs, op->def.schema_text);
    f->nargs = s->num_args;
    for (int i = 0; i < s->num_args; i++) {
        const oc_schema_arg *a = &s->args[i];
        oc_value v;
        if (i < nargs) v = args[i];
        else if (a->has_default) v = a->default_value;
        else
            return oc_set_error(OC_EINVAL, "op '%s': missing argument %d '%s' (schema: %s)", op->qualname,
                                i + 1, a->name, op->def.schema_text);
        bool ok = v.type == a->type || (a->type == OC_ARG_SCALAR && v.type != OC_ARG_TENSOR) ||
                  (a->type == OC_ARG_FLOAT && v.type == OC_ARG_INT);
        if (!ok) {
            char msg[128];
            snprintf(msg, sizeof msg, "expected %s, got %s", oc__arg_schema_type(a->type),
                     oc__arg_schema_type(v.type));
            return arg_error(op, i, "%s", msg);
        }
        switch (a->type) {
        case OC_ARG_TENSOR: {
            oc_status st = check_tensor(op, i, v.v.tensor, need_data);
            if (st) return st;
            f->tensors[i] = *v.v.tensor;
            f->tensors[i].flags |= OC_TENSOR_READONLY;
            f->tensors[i].flags &= ~(uint32_t)OC_TENSOR_OWNED;
            f->tensor_ptrs[i] = &f->tensors[i];
            f->slots[i] = &f->tensor_ptrs[i];
            break;
        }
        case OC_ARG_FLOAT:
            f->values[i].f = v.type == OC_ARG_INT ? (double)v.v.i : v.v.f;
            f->slots[i] = &f->values[i].f;
            break;
        case OC_ARG_INT:
            f->values[i].i = v.v.i;
            f->slots[i] = &f->values[i].i;
            break;
        case OC_ARG_BOOL:
            f->values[i].b = v.v.b;
            f->slots[i] = &f->values[i].b;
            break;
        case OC_ARG_SCALAR:
            f->values[i].s = v.type == OC_ARG_SCALAR ? v.v.scalar
                           : v.type == OC_ARG_FLOAT  ? oc_scalar_float(v.v.f)
                           : v.type == OC_ARG_INT    ? oc_scalar_int(v.v.i)
                                                     : oc_scalar_bool(v.v.b);
            f->slots[i] = &f->values[i].s;
            break;
        }
    }
    return OC_OK;
}

static oc_status core_error(const oc_core *c)
{
    return oc_set_error(c->fail_status, "%s", c->fail_msg);
}

static oc_status infer(const struct oc_op *op, call_frame *f, oc_tensor *out_meta)
{
    oc_core *core = oc__thread_core();
    if (!core) return oc_errcode();
    oc_exec e = {.op = op, .fn = op->def.shape_fn, .ffi_values = f->slots, .ncores = 1};
    uint64_t t0 = oc__prof_on() ? oc__prof_now() : 0;
    /* The shape function sees meta views of the frame's tensors: the same
     * structs with the data hidden, restored afterwards for the kernel. */
    void *data[OC_MAX_ARGS];
    uint32_t flags[OC_MAX_ARGS];
    for (int i = 0; i < f->nargs; i++)
        if (op->def.schema.args[i].type == OC_ARG_TENSOR) {
            data[i] = f->tensors[i].data;
            flags[i] = f->tensors[i].flags;
            f->tensors[i].data = NULL;
            f->tensors[i].flags |= OC_TENSOR_META;
        }
    oc_status st = oc__core_run(core, &e, OC_MODE_SHAPE, 0, 1);
    for (int i = 0; i < f->nargs; i++)
        if (op->def.schema.args[i].type == OC_ARG_TENSOR) {
            f->tensors[i].data = data[i];
            f->tensors[i].flags = flags[i];
        }
    if (st != OC_OK) {
        st = core_error(core);
    } else if (!core->ret) {
        st = oc_set_error(OC_ESHAPE, "op '%s': shape function '%s' returned NULL (return e.g. "
                          "oc_empty_like(x))", op->qualname, op->def.shape_fn_name);
    } else {
        const oc_tensor *r = core->ret;
        st = oc_tensor_init(out_meta, NULL, r->dtype, r->ndim, r->sizes);
        if (st != OC_OK)
            st = oc_set_error(st, "op '%s': shape function '%s' returned a bad tensor: %s", op->qualname,
                              op->def.shape_fn_name, oc_errmsg());
    }
    oc__core_release(core);
    if (t0) oc__prof_host(OC_PROF_SHAPE, op->qualname, t0, oc__prof_now());
    return st;
}

static oc_status check_out(const struct oc_op *op, const oc_tensor *meta, const oc_tensor *out,
                           const char *who)
{
    char want[256], got[256];
    if (!out || (!out->data && oc_numel(meta) > 0))
        return oc_set_error(OC_EINVAL, "op '%s': %s gave no output data", op->qualname, who);
    if (out->dtype != meta->dtype || !oc_same_shape(out, meta))
        return oc_set_error(OC_ESHAPE,
                            "op '%s': %s output is %s %s but the shape function says %s %s",
                            op->qualname, who, oc_dtype_name(out->dtype), oc_shape_str(out, got, sizeof got),
                            oc_dtype_name(meta->dtype), oc_shape_str(meta, want, sizeof want));
    return OC_OK;
}

static void record_kernel(oc_core *c, oc_exec *job, uint64_t t0)
{
    uint64_t n = job->ncores ? job->ncores : 1;
    c->counters.bytes_in = job->bytes_in / n;
    c->counters.bytes_out = (uint64_t)oc_nbytes(job->dst) / n;
    oc__prof_kernel(job->op->qualname, c->id, (uint32_t)n, t0, oc__prof_now(), &c->counters);
}

void oc__pool_run_share(oc_core *core, oc_exec *job, uint32_t id)
{
    uint64_t t0 = oc__prof_on() ? oc__prof_now() : 0;
    oc__core_run(core, job, OC_MODE_KERNEL, id, job->ncores);
    if (t0) record_kernel(core, job, t0);
    /* The first failing share reports for the launch; the core may run
     * another share next, so its own record does not last. */
    if (core->failed && atomic_exchange(&job->failure->failed, 1) == 0) {
        job->failure->status = core->fail_status;
        snprintf(job->failure->msg, sizeof job->failure->msg, "%s", core->fail_msg);
    }
    oc__core_release(core);
}

static oc_status run_single(const struct oc_op *op, oc_exec *e)
{
    oc_core *core = oc__thread_core();
    if (!core) return oc_errcode();
    uint64_t t0 = oc__prof_on() ? oc__prof_now() : 0;
    oc_status st = oc__core_run(core, e, OC_MODE_KERNEL, 0, 1);
    if (t0) record_kernel(core, e, t0);
    if (st != OC_OK) {
        st = core_error(core);
    } else if (!core->ret) {
        st = oc_set_error(OC_EKERNEL, "op '%s': kernel '%s' returned NULL (return oc_dst_tensor() "
                          "or the tensor it made)", op->qualname, op->def.kernel_name);
    } else if (core->ret != e->dst) {
        st = check_out(op, e->dst, core->ret, "the kernel's returned");
        /* an empty output may have no data pointer at all: nothing to copy */
        if (st == OC_OK && oc_numel(e->dst) > 0 && !oc_copy_(e->dst, core->ret)) st = oc_errcode();
    }
    oc__core_release(core);
    return st;
}

static oc_status run_multi(const struct oc_op *op, oc_exec *e)
{
    oc_core *caller = oc__thread_core();
    if (!caller) return oc_errcode();
    oc_exec_failure failure;
    atomic_init(&failure.failed, 0);
    e->failure = &failure;
    uint64_t t0 = oc__prof_on() ? oc__prof_now() : 0;
    oc_status st = oc__pool_launch(caller, e);
    if (st == OC_OK && atomic_load(&failure.failed)) st = oc_set_error(failure.status, "%s", failure.msg);
    if (t0) oc__prof_host(OC_PROF_DISPATCH, op->qualname, t0, oc__prof_now());
    return st;
}

/* Bytes of the call's input tensors: the profiler's "bytes in". */
static uint64_t input_bytes(const struct oc_op *op, const call_frame *f)
{
    uint64_t bytes = 0;
    for (int i = 0; i < f->nargs; i++)
        if (op->def.schema.args[i].type == OC_ARG_TENSOR) bytes += (uint64_t)oc_nbytes(&f->tensors[i]);
    return bytes;
}

static oc_status execute(const struct oc_op *op, call_frame *f, oc_tensor *out)
{
    oc_tensor dst = *out; /* the kernel may not disturb the caller's struct */
    dst.flags &= ~(uint32_t)(OC_TENSOR_READONLY | OC_TENSOR_OWNED);
    oc_exec e = {.op = op, .fn = op->kernel_fn, .ffi_values = f->slots, .dst = &dst,
                 .ncores = 1, .bytes_in = oc__prof_on() ? input_bytes(op, f) : 0};
    oc__redzone rz; /* debug builds: a guarded shadow of the output */
    oc_status st = oc__redzone_begin(op, 0, &dst, &rz);
    if (st == OC_OK) st = oc__redzone_end(&dst, &rz, op->multicore ? run_multi(op, &e) : run_single(op, &e));
    return st;
}

oc_status oc_op_infer(const oc_op *op, const oc_value *args, int nargs, oc_tensor *out_meta)
{
    call_frame f;
    if (!op || !out_meta) return oc_set_error(OC_EINVAL, "oc_op_infer: op and out_meta are required");
    oc_status st = bind_args(op, args, nargs, false, &f);
    return st ? st : infer(op, &f, out_meta);
}

oc_status oc_op_call(const oc_op *op, const oc_value *args, int nargs, oc_tensor *out)
{
    call_frame f;
    oc_tensor meta;
    if (!op || !out) return oc_set_error(OC_EINVAL, "oc_op_call: op and out are required");
    uint64_t t0 = oc__prof_on() ? oc__prof_now() : 0;
    oc_status st = bind_args(op, args, nargs, true, &f);
    if (!st) st = infer(op, &f, &meta);
    if (!st) st = check_out(op, &meta, out, "the caller's");
    if (!st) st = execute(op, &f, out);
    if (t0) oc__prof_host(OC_PROF_CALL, op->qualname, t0, oc__prof_now());
    return st;
}

oc_status oc_op_run(const oc_op *op, const oc_value *args, int nargs, oc_alloc_fn alloc,
                    void *alloc_ctx, oc_tensor *out)
{
    call_frame f;
    oc_tensor meta;
    if (!op || !alloc || !out) return oc_set_error(OC_EINVAL, "oc_op_run: op, alloc and out are required");
    uint64_t t0 = oc__prof_on() ? oc__prof_now() : 0;
    oc_status st = bind_args(op, args, nargs, true, &f);
    if (!st) st = infer(op, &f, &meta);
    if (!st) {
        uint64_t ta = t0 ? oc__prof_now() : 0;
        st = alloc(alloc_ctx, &meta, out);
        if (st && oc_errcode() == OC_OK) oc_set_error(st, "op '%s': the output allocator failed", op->qualname);
        if (st) st = oc_errcode();
        if (ta) oc__prof_host(OC_PROF_ALLOC, op->qualname, ta, oc__prof_now());
    }
    if (!st) st = check_out(op, &meta, out, "the allocator's");
    if (!st) st = execute(op, &f, out);
    if (t0) oc__prof_host(OC_PROF_CALL, op->qualname, t0, oc__prof_now());
    return st;
}

static oc_status malloc_alloc(void *ctx, const oc_tensor *meta, oc_tensor *out)
{
    oc_tensor **result = ctx;
    *result = oc__tensor_new(meta->dtype, meta->ndim, meta->sizes);
    if (!*result) return oc_errcode();
    *out = **result;
    return OC_OK;
}

oc_status oc_op_invoke(const oc_op *op, const oc_value *args, int nargs, oc_tensor **out)
{
    oc_tensor view;
    oc_tensor *result = NULL;
    if (!out) return oc_set_error(OC_EINVAL, "oc_op_invoke: out is required");
    *out = NULL;
    oc_status st = oc_op_run(op, args, nargs, malloc_alloc, &result, &view);
    if (st != OC_OK) {
        oc_tensor_free(result);
        return st;
    }
    *out = result;
    return OC_OK;
}
