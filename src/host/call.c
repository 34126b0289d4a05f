/* Calling an op: bind the arguments to the schema, run the shape function,
 * allocate the results, run the kernel on one core or all. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "engine/pool.h"
#include "engine/redzone.h"
#include "host/call_internal.h"
#include "opcore/tensor_ops.h"

/* ---- binding -------------------------------------------------------------- */

__attribute__((format(printf, 4, 5))) static oc_status arg_error(const struct oc_op *op, int i, int item,
                                                                 const char *fmt, ...)
{
    char msg[512], where[64] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (item >= 0) snprintf(where, sizeof where, " item %d", item);
    return oc_set_error(OC_EINVAL, "op '%s': argument %d '%s'%s: %s", op->qualname, i + 1,
                        op->def.schema.args[i].name, where, msg);
}

/* Also notes in f->plain whether the tensor is contiguous and read only
 * (what oc__frame_layout needs to know, found in this one pass). */
static oc_status check_tensor(const struct oc_op *op, int i, int item, const oc_tensor *t, bool need_data,
                              call_frame *f)
{
    if (!t) return arg_error(op, i, item, "expected a Tensor, got NULL (pass oc_value_none() for None)");
    if (!oc_dtype_is_valid(t->dtype)) return arg_error(op, i, item, "has an invalid dtype (%d)", (int)t->dtype);
    if (t->ndim < 0 || t->ndim > OC_MAX_DIMS)
        return arg_error(op, i, item, "has %d dims (0 to %d allowed)", t->ndim, OC_MAX_DIMS);
    int64_t expected = 1;
    bool contiguous = true, decided = false; /* as oc_is_contiguous decides, from the last dim */
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->sizes[d] < 0) return arg_error(op, i, item, "has a negative size (dim %d: %lld)", d, (long long)t->sizes[d]);
        if (decided) continue;
        if (t->sizes[d] == 0) decided = true;
        else if (t->sizes[d] != 1 && t->strides[d] != expected) contiguous = false, decided = true;
        expected *= t->sizes[d];
    }
    f->plain &= contiguous && !op->def.schema.args[i].is_mutable;
    f->spans_dense &= contiguous;
    if (contiguous && expected > 0) { /* expected: its element count */
        uintptr_t lo = (uintptr_t)t->data, hi = lo + (uintptr_t)expected * oc__elem_bytes[t->dtype];
        f->lo = lo < f->lo ? lo : f->lo;
        f->hi = hi > f->hi ? hi : f->hi;
        if (f->nspans < OC_MAX_ARGS) {
            f->spans[f->nspans].lo = lo, f->spans[f->nspans].hi = hi;
            f->spans[f->nspans++].written = op->def.schema.args[i].is_mutable;
        } else {
            f->spans_dense = false;
        }
    }
    if (need_data && !t->data && oc_numel(t) > 0) return arg_error(op, i, item, "is a meta tensor (no data)");
    return OC_OK;
}

/* A copy of the caller's tensor for the kernel: inputs read-only, in-place
 * arguments writable, never owned by the frame. */
static oc_status copy_tensor(const struct oc_op *op, int i, int item, const oc_tensor *t, bool writable,
                             oc_tensor *out)
{
    if (writable && (t->flags & OC_TENSOR_READONLY))
        return arg_error(op, i, item, "is written in place (%s) but the tensor given is read-only (a JAX array, "
                         "or a NumPy array or memmap that is not writeable): pass a writable copy; through "
                         "opcore.jax.op() a JAX array's new value is returned instead",
                         op->def.schema.args[i].type_text);
    *out = *t;
    out->flags &= ~(uint32_t)OC_TENSOR_OWNED;
    if (!writable) out->flags |= OC_TENSOR_READONLY;
    return OC_OK;
}

static void *frame_alloc(call_frame *f, size_t bytes)
{
    void *p = oc__malloc(bytes ? bytes : 1);
    if (p) f->heap[f->nheap++] = p;
    else oc_set_error(OC_ENOMEM, "out of memory binding a list argument of %zu bytes", bytes);
    return p;
}

void oc__frame_release(call_frame *f)
{
    for (int i = 0; i < f->nheap; i++) oc__free(f->heap[i]);
    f->nheap = 0;
}

static oc_status bind_tensor_list(const struct oc_op *op, int i, const oc_schema_arg *a, oc_tensor_list l,
                                  bool need_data, call_frame *f)
{
    if (l.count < 0 || (l.count > 0 && !l.items))
        return arg_error(op, i, -1, "a list of %lld tensors with no items", (long long)l.count);
    size_t n = (size_t)l.count;
    /* one block: the tensor copies, then their data pointers for the shape pass */
    oc_tensor *items = frame_alloc(f, n * (sizeof(oc_tensor) + sizeof(void *)));
    if (!items) return OC_ENOMEM;
    for (int64_t k = 0; k < l.count; k++) {
        oc_status st = check_tensor(op, i, (int)k, &l.items[k], need_data, f);
        if (!st) st = copy_tensor(op, i, (int)k, &l.items[k], a->is_mutable, &items[k]);
        if (st) return st;
    }
    f->saved_data[i] = (void **)(items + n);
    f->values[i].tensors = (oc_tensor_list){l.count, items};
    f->slots[i] = &f->values[i];
    return OC_OK;
}

/* int[] / int[N] (a single int fills an int[N], as in torch). */
static oc_status bind_int_list(const struct oc_op *op, int i, const oc_schema_arg *a, oc_value v,
                               oc_int_list *out, call_frame *f)
{
    if (v.type == OC_ARG_INT && a->list_len) {
        int64_t *vals = frame_alloc(f, (size_t)a->list_len * sizeof *vals);
        if (!vals) return OC_ENOMEM;
        for (int64_t k = 0; k < a->list_len; k++) vals[k] = v.v.i;
        *out = (oc_int_list){a->list_len, vals};
        return OC_OK;
    }
    if (v.type != OC_ARG_INT_LIST)
        return arg_error(op, i, -1, "expected %s, got %s", a->type_text, oc_arg_type_name(v.type));
    if (v.v.ints.count < 0 || (v.v.ints.count > 0 && !v.v.ints.values))
        return arg_error(op, i, -1, "a list of %lld ints with no values", (long long)v.v.ints.count);
    if (a->list_len && v.v.ints.count != a->list_len)
        return arg_error(op, i, -1, "expected %lld ints (%s), got a list of %lld", (long long)a->list_len,
                         a->type_text, (long long)v.v.ints.count);
    *out = v.v.ints;
    return OC_OK;
}

/* float[] / float[N]: ints convert, a single number fills a float[N]. */
static oc_status bind_float_list(const struct oc_op *op, int i, const oc_schema_arg *a, oc_value v,
                                 oc_float_list *out, call_frame *f)
{
    bool single = v.type == OC_ARG_FLOAT || v.type == OC_ARG_INT;
    if (single && a->list_len) {
        double x = v.type == OC_ARG_INT ? (double)v.v.i : v.v.f;
        double *vals = frame_alloc(f, (size_t)a->list_len * sizeof *vals);
        if (!vals) return OC_ENOMEM;
        for (int64_t k = 0; k < a->list_len; k++) vals[k] = x;
        *out = (oc_float_list){a->list_len, vals};
        return OC_OK;
    }
    int64_t count;
    if (v.type == OC_ARG_FLOAT_LIST) count = v.v.floats.count;
    else if (v.type == OC_ARG_INT_LIST) count = v.v.ints.count;
    else return arg_error(op, i, -1, "expected %s, got %s", a->type_text, oc_arg_type_name(v.type));
    const void *src = v.type == OC_ARG_FLOAT_LIST ? (const void *)v.v.floats.values : (const void *)v.v.ints.values;
    if (count < 0 || (count > 0 && !src)) return arg_error(op, i, -1, "a list of %lld numbers with no values", (long long)count);
    if (a->list_len && count != a->list_len)
        return arg_error(op, i, -1, "expected %lld floats (%s), got a list of %lld", (long long)a->list_len,
                         a->type_text, (long long)count);
    if (v.type == OC_ARG_FLOAT_LIST) {
        *out = v.v.floats;
        return OC_OK;
    }
    double *vals = frame_alloc(f, (size_t)count * sizeof *vals);
    if (!vals) return OC_ENOMEM;
    for (int64_t k = 0; k < count; k++) vals[k] = (double)v.v.ints.values[k];
    *out = (oc_float_list){count, vals};
    return OC_OK;
}

/* A by-value argument: its storage is values[i], or optional[i] behind a
 * pointer for a T?. */
static call_value *value_slot(call_frame *f, int i, bool optional)
{
    if (!optional) {
        f->slots[i] = &f->values[i];
        return &f->values[i];
    }
    f->optional_ptrs[i] = &f->optional[i];
    f->slots[i] = &f->optional_ptrs[i];
    return &f->optional[i];
}

static oc_status bind_arg(const struct oc_op *op, int i, oc_value v, bool need_data, call_frame *f)
{
    const oc_schema_arg *a = &op->def.schema.args[i];
    if (v.type == OC_ARG_NONE) {
        if (!a->optional)
            return arg_error(op, i, -1, "expected %s, got None (only %s? arguments take None)", a->type_text,
                             a->type_text);
        f->optional_ptrs[i] = NULL;
        f->slots[i] = &f->optional_ptrs[i];
        return OC_OK;
    }
    bool compatible = v.type == a->type || (a->type == OC_ARG_FLOAT && v.type == OC_ARG_INT) ||
                      (a->type == OC_ARG_SCALAR && (v.type == OC_ARG_FLOAT || v.type == OC_ARG_INT ||
                                                    v.type == OC_ARG_BOOL)) ||
                      a->type == OC_ARG_INT_LIST || a->type == OC_ARG_FLOAT_LIST; /* checked below */
    if (!compatible) return arg_error(op, i, -1, "expected %s, got %s", a->type_text, oc_arg_type_name(v.type));
    oc_status st = OC_OK;
    call_value *cv;
    switch (a->type) {
    case OC_ARG_TENSOR:
        st = check_tensor(op, i, -1, v.v.tensor, need_data, f);
        if (!st) st = copy_tensor(op, i, -1, v.v.tensor, a->is_mutable, &f->tensors[i]);
        f->tensor_ptrs[i] = &f->tensors[i];
        f->slots[i] = &f->tensor_ptrs[i];
        break;
    case OC_ARG_TENSOR_LIST:
        st = bind_tensor_list(op, i, a, v.v.tensors, need_data, f);
        break;
    case OC_ARG_INT_LIST:
        cv = value_slot(f, i, a->optional);
        st = bind_int_list(op, i, a, v, &cv->ints, f);
        break;
    case OC_ARG_FLOAT_LIST:
        cv = value_slot(f, i, a->optional);
        st = bind_float_list(op, i, a, v, &cv->floats, f);
        break;
    case OC_ARG_FLOAT:
        value_slot(f, i, a->optional)->f = v.type == OC_ARG_INT ? (double)v.v.i : v.v.f;
        break;
    case OC_ARG_INT:
        value_slot(f, i, a->optional)->i = v.v.i;
        break;
    case OC_ARG_BOOL:
        value_slot(f, i, a->optional)->b = v.v.b;
        break;
    case OC_ARG_SCALAR:
        value_slot(f, i, a->optional)->s = v.type == OC_ARG_SCALAR ? v.v.scalar
                                         : v.type == OC_ARG_FLOAT  ? oc_scalar_float(v.v.f)
                                         : v.type == OC_ARG_INT    ? oc_scalar_int(v.v.i)
                                                                   : oc_scalar_bool(v.v.b);
        break;
    case OC_ARG_STR:
        if (!v.v.s) return arg_error(op, i, -1, "expected a str, got NULL (pass oc_value_none() for None)");
        f->values[i].str = v.v.s;
        f->slots[i] = &f->values[i];
        break;
    case OC_ARG_DTYPE:
        if (!oc_dtype_is_valid(v.v.dtype)) return arg_error(op, i, -1, "invalid dtype %d", (int)v.v.dtype);
        value_slot(f, i, a->optional)->dtype = (int)v.v.dtype;
        break;
    case OC_ARG_DICT: {
        /* the kernel gets a copy that names the op and argument in lookup errors */
        oc_dict named = v.v.dict ? *v.v.dict : (oc_dict){0, NULL, NULL, NULL};
        named.op = op->qualname;
        named.arg = a->name;
        if (!v.v.dict) return arg_error(op, i, -1, "expected a Dict, got NULL (pass an empty dictionary for none)");
        if (oc_dict_validate(&named)) return oc_errcode();
        value_slot(f, i, true)->dict = named;
        break;
    }
    case OC_ARG_NONE:
        break;
    }
    return st;
}

oc_status oc__frame_bind(const struct oc_op *op, const oc_value *args, int nargs, bool need_data, call_frame *f)
{
    const oc_schema *s = &op->def.schema;
    f->nheap = 0;
    f->plain = true;
    f->lo = UINTPTR_MAX, f->hi = 0;
    f->nspans = 0;
    f->spans_dense = true;
    f->ndense = 0;
    f->regs = NULL;
    f->nargs = s->num_args;
    f->grid.ndim = 0;
    if (nargs < 0 || nargs > s->num_args || (nargs > 0 && !args))
        return oc_set_error(OC_EINVAL, "op '%s' takes %d argument%s, got %d (schema: %s)", op->qualname,
                            s->num_args, s->num_args == 1 ? "" : "s", nargs, op->def.schema_text);
    for (int i = 0; i < s->num_args; i++) {
        oc_value v;
        f->saved_data[i] = NULL;
        if (i < nargs) v = args[i];
        else if (!oc__schema_default(&s->args[i], &v))
            return oc_set_error(OC_EINVAL, "op '%s': missing argument %d '%s' (schema: %s)", op->qualname, i + 1,
                                s->args[i].name, op->def.schema_text);
        oc_status st = bind_arg(op, i, v, need_data, f);
        if (st) return st;
    }
    return OC_OK;
}

/* ---- the shape pass ---------------------------------------------------------- */

static oc_status core_error(const oc_core *c) { return oc_set_error(c->fail_status, "%s", c->fail_msg); }

/* The shape function sees meta views of the frame's tensors: the same
 * structs with their data hidden, restored afterwards for the kernel. */
static void hide_data(const struct oc_op *op, call_frame *f, void **data, bool hide)
{
    for (int i = 0; i < f->nargs; i++) {
        oc_tensor *x = oc__frame_tensor(op, f, i);
        if (x) {
            if (hide) {
                data[i] = x->data;
                x->data = NULL;
                x->flags |= OC_TENSOR_META;
            } else {
                x->data = data[i];
                if (data[i]) x->flags &= ~(uint32_t)OC_TENSOR_META;
            }
        } else if (op->def.schema.args[i].type == OC_ARG_TENSOR_LIST && f->saved_data[i]) {
            oc_tensor_list *l = &f->values[i].tensors;
            oc_tensor *items = (oc_tensor *)l->items;
            for (int64_t k = 0; k < l->count; k++) {
                if (hide) {
                    f->saved_data[i][k] = items[k].data;
                    items[k].data = NULL;
                    items[k].flags |= OC_TENSOR_META;
                } else {
                    items[k].data = f->saved_data[i][k];
                    if (items[k].data) items[k].flags &= ~(uint32_t)OC_TENSOR_META;
                }
            }
        }
    }
}

/* After the shape function: every fresh result described, each valid. */
static oc_status collect_results(const struct oc_op *op, oc_core *core, oc_exec *e, oc_tensor *metas)
{
    const char *fn = op->def.shape_fn_name;
    if (op->returns_tensor && !(e->described & 1u)) {
        const oc_tensor *r = core->ret;
        if (!r)
            return oc_set_error(OC_ESHAPE, "op '%s': shape function '%s' returned NULL (return e.g. "
                                "oc_empty_like(x))", op->qualname, fn);
        if (oc_tensor_init(&metas[0], NULL, r->dtype, r->ndim, r->sizes) != OC_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", oc_errmsg()); /* the message is rewritten below */
            return oc_set_error(OC_ESHAPE, "op '%s': shape function '%s' returned a bad tensor: %s",
                                op->qualname, fn, why);
        }
        return OC_OK;
    }
    for (int i = 0; i < op->num_results; i++) {
        if (op->def.schema.results[i].alias_arg >= 0 || (e->described & (1u << i))) continue;
        const char *rname = op->def.schema.results[i].name;
        return oc_set_error(OC_ESHAPE,
                            "op '%s': shape function '%s' did not describe result %d%s%s%s (the op has "
                            "%d result%s: %s): call oc_set_result(%d, meta) for each new result",
                            op->qualname, fn, i, rname[0] ? " '" : "", rname, rname[0] ? "'" : "",
                            op->num_results, op->num_results == 1 ? "" : "s", op->def.schema_text, i);
    }
    return OC_OK;
}

/* What the engine runs for `op`: `fn` (its kernel or shape function, which
 * share one C signature) and the names its messages use. */
static inline oc_exec exec_of(const struct oc_op *op, oc_fn fn)
{
    return (oc_exec){.fn = fn, .cif = &op->cif, .direct = op->direct ? op->direct_kind : NULL,
                     .stack_size = op->stack_size, .name = op->qualname, .kernel_name = op->def.kernel_name,
                     .shape_fn_name = op->def.shape_fn_name, .owner = op, .ncores = 1,
                     .debug = op->lib && op->lib->debug};
}

oc_status oc__frame_infer(const struct oc_op *op, call_frame *f, oc_tensor *metas, oc_dim_log *log)
{
    /* Aliased results are their arguments. */
    for (int i = 0; i < op->num_results; i++) {
        int a = op->def.schema.results[i].alias_arg;
        if (a >= 0) {
            const oc_tensor *t = &f->tensors[a];
            oc_tensor_init_strided(&metas[i], NULL, t->dtype, t->ndim, t->sizes, t->strides);
        }
    }
    if (!op->def.shape_fn) return OC_OK;
    oc__memo_key key;
    if (oc__infer_memo_get(op, f, metas, log, &key)) return OC_OK; /* asked before on this thread (infer_memo.c) */
    oc_core *core = oc__thread_core();
    if (!core) return oc_errcode();
    oc_exec e = exec_of(op, op->def.shape_fn);
    e.ffi_values = f->slots;
    e.dsts = metas;
    e.ndst = op->num_results;
    uint64_t t0 = oc__prof_on() ? oc__prof_now() : 0;
    void *data[OC_MAX_ARGS];
    hide_data(op, f, data, true);
    core->dim_log = log;
    oc_status st = oc__core_run(core, &e, OC_MODE_SHAPE, 0, 1);
    core->dim_log = NULL;
    hide_data(op, f, data, false);
    f->grid.ndim = e.grid_ndim;
    memcpy(f->grid.dims, e.grid, sizeof f->grid.dims);
    if (e.grid_ndim && !atomic_load_explicit(&op->shape_sets_grid, memory_order_relaxed))
        atomic_store_explicit(&((struct oc_op *)op)->shape_sets_grid, true, memory_order_relaxed);
    st = st != OC_OK ? core_error(core) : collect_results(op, core, &e, metas);
    oc__core_release(core);
    if (st == OC_OK) oc__infer_memo_put(op, f, metas, &key);
    if (t0) oc__prof_host(OC_PROF_SHAPE, op->qualname, t0, oc__prof_now());
    return st;
}

/* ---- running the kernel -------------------------------------------------------- */

/* *dst = *src, the dims in use only (an oc_tensor has room for
 * OC_MAX_DIMS: most of its bytes are unused). */
static inline void copy_struct(oc_tensor *dst, const oc_tensor *src)
{
    size_t dims = (size_t)(src->ndim > 0 && src->ndim <= OC_MAX_DIMS ? src->ndim : 0) * sizeof(int64_t);
    memcpy(dst, src, offsetof(oc_tensor, sizes));
    memcpy(dst->sizes, src->sizes, dims);
    memcpy(dst->strides, src->strides, dims);
    memcpy((char *)dst + offsetof(oc_tensor, strides) + sizeof dst->strides,
           (const char *)src + offsetof(oc_tensor, strides) + sizeof src->strides,
           sizeof *dst - offsetof(oc_tensor, strides) - sizeof dst->strides);
}

oc_status oc__check_out(const struct oc_op *op, int i, const oc_tensor *meta, const oc_tensor *out, bool need_data,
                        const char *who)
{
    bool no_data = !out || (need_data && !out->data && oc_numel(meta) > 0);
    if (!no_data && out->dtype == meta->dtype && oc_same_shape(out, meta)) return OC_OK;
    char want[256], got[256], which[32] = ""; /* only on the way to an error: a call's cost */
    if (op->num_results > 1) snprintf(which, sizeof which, " result %d", i);
    if (no_data) return oc_set_error(OC_EINVAL, "op '%s': %s%s output has no data", op->qualname, who, which);
    return oc_set_error(OC_ESHAPE, "op '%s': %s%s output is %s %s but the shape function says %s %s",
                        op->qualname, who, which, oc_dtype_name(out->dtype), oc_shape_str(out, got, sizeof got),
                        oc_dtype_name(meta->dtype), oc_shape_str(meta, want, sizeof want));
}

static void record_kernel(oc_core *c, oc_exec *job, uint64_t t0)
{
    uint64_t n = job->ncores ? job->ncores : 1, out = 0;
    for (int i = 0; i < job->ndst; i++) out += (uint64_t)oc_nbytes(&job->dsts[i]);
    c->counters.bytes_in = job->bytes_in / n;
    c->counters.bytes_out = out / n;
    c->counters.program = 0;
    if (job->grid_ndim) {
        int64_t p[3];
        oc__grid_coords(job, c->id, p);
        c->counters.program = oc__prof_program(job->grid_ndim, p);
    }
    /* A grid instance goes on the lane of the engine core that ran it,
     * with its program id. */
    oc__prof_kernel(job->name, job->grid_ndim ? c->lane : c->id, (uint32_t)n, t0, oc__prof_now(), &c->counters);
}

/* One share of a multicore launch (handed to the engine as job->run_share). */
static void run_share(oc_core *core, oc_exec *job, uint32_t id)
{
    uint64_t t0 = oc__prof_on() ? oc__prof_now() : 0;
    oc__core_run(core, job, OC_MODE_KERNEL, id, job->ncores);
    if (t0) record_kernel(core, job, t0);
    /* Every share writes its part of oc_dst_tensor(): a tensor a share made
     * itself holds that share's values at best, so it is refused (one
     * core's kernel may return its own tensor: run_single copies it). */
    const struct oc_op *op = job->owner;
    if (!core->failed && op->returns_tensor && core->ret && core->ret != &job->dsts[0]) {
        core->failed = true;
        core->fail_status = OC_EKERNEL;
        snprintf(core->fail_msg, sizeof core->fail_msg, "op '%s': multicore kernel '%s' on core %u returned a "
                 "tensor other than oc_dst_tensor(): each core writes its share of the result into "
                 "oc_dst_tensor() and returns it (or NULL)", op->qualname, op->def.kernel_name, id);
    }
    if (!core->failed && op->returns_tensor) { /* NULL on some shares, the result on others: below */
        atomic_bool *seen = core->ret ? &job->failure->some_dst : &job->failure->some_null;
        if (!core->ret) atomic_store_explicit(&job->failure->null_share, id, memory_order_relaxed);
        if (!atomic_load_explicit(seen, memory_order_relaxed)) atomic_store_explicit(seen, true, memory_order_relaxed);
    }
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
    } else if (op->returns_tensor) {
        oc_tensor *dst = &e->dsts[0];
        if (!core->ret) {
            st = oc_set_error(OC_EKERNEL, "op '%s': kernel '%s' returned NULL (return oc_dst_tensor() "
                              "or the tensor it made)", op->qualname, op->def.kernel_name);
        } else if (core->ret != dst) {
            st = oc__check_out(op, 0, dst, core->ret, true, "the kernel's returned");
            /* an empty output may have no data pointer at all: nothing to copy */
            if (st == OC_OK && oc_numel(dst) > 0 && !oc_copy_(dst, core->ret)) st = oc_errcode();
        }
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
    atomic_init(&failure.some_dst, false);
    atomic_init(&failure.some_null, false);
    atomic_init(&failure.null_share, 0);
    e->failure = &failure;
    e->run_share = run_share;
    uint64_t t0 = oc__prof_on() ? oc__prof_now() : 0;
    oc_status st = oc__pool_launch(caller, e);
    if (st == OC_OK && atomic_load(&failure.failed)) st = oc_set_error(failure.status, "%s", failure.msg);
    if (st == OC_OK && atomic_load(&failure.some_dst) && atomic_load(&failure.some_null)) {
        const char *unit = e->grid_ndim ? "instance" : "core";
        st = oc_set_error(OC_EKERNEL, "op '%s': kernel '%s' returned oc_dst_tensor() on some %s and NULL on "
                          "%s %u, which may have left its share of the result unwritten: return "
                          "oc_dst_tensor() from every %s (or NULL from every one)", op->qualname,
                          op->def.kernel_name, e->grid_ndim ? "program instances" : "cores", unit,
                          atomic_load(&failure.null_share), unit);
    }
    if (t0) oc__prof_host(OC_PROF_DISPATCH, op->qualname, t0, oc__prof_now());
    return st;
}

/* Bytes of the call's input tensors: the profiler's "bytes in", and what
 * tells the engine whether a multicore launch is worth splitting. */
static uint64_t input_bytes(const struct oc_op *op, call_frame *f)
{
    uint64_t bytes = 0;
    for (int i = 0; i < f->nargs; i++) {
        const oc_tensor *x = oc__frame_tensor(op, f, i);
        if (x) bytes += (uint64_t)oc_nbytes(x);
        else if (op->def.schema.args[i].type == OC_ARG_TENSOR_LIST)
            for (int64_t k = 0; k < f->values[i].tensors.count; k++)
                bytes += (uint64_t)oc_nbytes(&f->values[i].tensors.items[k]);
    }
    return bytes;
}

/* The call's grid: the caller's, else the shape function's, else the
 * op's .grid; ndim 0: none. Checked: 1 to 3 axes, each >= 1, fewer than
 * 2^31 instances in all. */
static oc_status resolve_grid(const struct oc_op *op, const call_frame *f, const oc_grid *given, oc_exec *e)
{
    oc_grid g = {0};
    const int64_t *dflt = op->def.options.grid;
    if (given) g = *given;
    else if (f->grid.ndim) g = f->grid;
    else
        for (; g.ndim < 3 && dflt[g.ndim] > 0; g.ndim++) g.dims[g.ndim] = dflt[g.ndim];
    if (!given && !g.ndim) return OC_OK;
    if (g.ndim < 1 || g.ndim > OC_MAX_GRID_DIMS)
        return oc_set_error(OC_EINVAL, "op '%s': a launch grid has 1 to %d axes, got %d", op->qualname,
                            OC_MAX_GRID_DIMS, g.ndim);
    int64_t total = 1;
    for (int d = 0; d < g.ndim; d++) {
        if (g.dims[d] < 1)
            return oc_set_error(OC_EINVAL, "op '%s': axis %d of the launch grid is %lld; every axis needs at "
                                "least 1 program", op->qualname, d, (long long)g.dims[d]);
        total = g.dims[d] > INT32_MAX ? (int64_t)INT32_MAX + 1 : total * g.dims[d];
        if (total > INT32_MAX)
            return oc_set_error(OC_EINVAL, "op '%s': the launch grid has more than %d program instances",
                                op->qualname, INT32_MAX);
    }
    e->grid_ndim = g.ndim;
    memcpy(e->grid, g.dims, sizeof e->grid);
    e->ncores = (uint32_t)total;
    return OC_OK;
}

oc_status oc__frame_execute(const struct oc_op *op, call_frame *f, oc_tensor *outs, const oc_grid *grid)
{
    /* The kernel may not disturb the caller's structs: it gets copies. */
    oc_tensor dsts[OC_MAX_RESULTS];
    for (int i = 0; i < op->num_results; i++) {
        int a = op->def.schema.results[i].alias_arg;
        copy_struct(&dsts[i], a >= 0 ? &f->tensors[a] : &outs[i]);
        dsts[i].flags &= ~(uint32_t)(OC_TENSOR_READONLY | OC_TENSOR_OWNED);
    }
    oc_exec e = exec_of(op, op->kernel_fn);
    e.ffi_values = f->slots;
    e.regs = f->regs;
    e.dsts = dsts;
    e.ndst = op->num_results;
    oc_status st = resolve_grid(op, f, grid, &e);
    if (st) return st;
    bool launch = op->multicore || (e.grid_ndim && e.ncores > 1);
    e.bytes_in = launch || oc__prof_on() ? input_bytes(op, f) : 0;
    /* Debug builds: each fresh result in a guarded shadow (redzone.c). */
    oc__redzone rz[OC_MAX_RESULTS];
    int nrz = 0;
    bool debug = e.debug;
    for (; debug && st == OC_OK && nrz < op->num_results; nrz++)
        st = op->def.schema.results[nrz].alias_arg >= 0
                 ? (rz[nrz].map = NULL, OC_OK)
                 : oc__redzone_begin(debug, e.name, e.kernel_name, nrz, &dsts[nrz], &rz[nrz]);
    uint64_t *sums = NULL; /* debug builds: the inputs' checksums (debug_inputs.c) */
    if (st == OC_OK && debug) st = oc__debug_inputs_sum(op, f, &sums);
    if (st == OC_OK) st = launch ? run_multi(op, &e) : run_single(op, &e);
    if (e.shared) oc__exec_release(&e);
    if (sums) st = oc__debug_inputs_check(op, f, sums, st);
    while (nrz-- > 0) st = oc__redzone_end(&dsts[nrz], &rz[nrz], st);
    if (f->ndense) st = oc__frame_write_back(f, st); /* dense copies back into the caller's tensors */
    /* The caller sees each aliased result as the argument it passed. */
    for (int i = 0; st == OC_OK && outs && op->fresh_results < op->num_results && i < op->num_results; i++) {
        int a = op->def.schema.results[i].alias_arg;
        if (a >= 0) {
            outs[i] = f->tensors[a];
            outs[i].flags &= ~(uint32_t)OC_TENSOR_READONLY;
        }
    }
    return st;
}

void oc__launch_plan(const struct oc_op *op, call_frame *f, const oc_grid *grid, oc__launch *l)
{
    l->ready = false;
    if (f->ndense || op->fresh_results < op->num_results) return;
    oc_exec e = exec_of(op, op->kernel_fn);
    if (e.debug) return;
    if (resolve_grid(op, f, grid, &e) != OC_OK) { /* a bad grid: oc__frame_execute reports it per run */
        oc_clear_error();
        return;
    }
    if (e.grid_ndim && e.ncores > 1) return;
    e.ffi_values = f->slots;
    e.regs = f->regs;
    e.dsts = l->dsts;
    e.ndst = op->num_results;
    /* a multicore op: the engine splits it, or runs it as one share, by
     * these bytes (the prepared call's shapes: the same every run) */
    if (op->multicore) e.bytes_in = input_bytes(op, f);
    l->exec = e;
    l->ready = true;
}

oc_status oc__launch_run(const struct oc_op *op, oc__launch *l, const oc_tensor *outs)
{
    for (int i = 0; i < op->num_results; i++) { /* fresh copies: the kernel may have changed the last ones */
        l->dsts[i] = outs[i];
        l->dsts[i].flags &= ~(uint32_t)(OC_TENSOR_READONLY | OC_TENSOR_OWNED);
    }
    oc_status st = op->multicore ? run_multi(op, &l->exec) : run_single(op, &l->exec);
    if (l->exec.shared) oc__exec_release(&l->exec);
    return st;
}

bool oc__frame_regs(const struct oc_op *op, call_frame *f, oc_direct_regs *regs)
{
    if (!op->direct) return false;
    oc_exec e = exec_of(op, op->kernel_fn);
    e.ffi_values = f->slots;
    oc__direct_load(&e, regs);
    return true;
}

oc_status oc__need_outs(const struct oc_op *op, const oc_tensor *outs, const char *fn)
{
    if (!outs && op->fresh_results > 0)
        return oc_set_error(OC_EINVAL, "op '%s': %s: the op has %d result%s: `outs` is required", op->qualname,
                            fn, op->fresh_results, op->fresh_results == 1 ? "" : "s");
    return OC_OK;
}

/* ---- the host API ----------------------------------------------------------------- */

/* A call from a thread whose stack is short runs on its core's spare
 * stack (engine/core.c: oc__call_stack_short): the arguments of the entry
 * point, for the thunk that runs there. */
typedef struct spare_call {
    const oc_op *op;
    const oc_value *args;
    int nargs;
    oc_alloc_fn alloc;
    void *alloc_ctx;
    oc_tensor *outs;
    const oc_grid *grid;
    const char *api;
} spare_call;

__attribute__((noinline)) static oc_status infer_here(const oc_op *op, const oc_value *args, int nargs,
                                                      oc_tensor *out_meta)
{
    call_frame f;
    oc_tensor scratch[OC_MAX_RESULTS];
    f.nheap = 0;
    oc_status st = oc__op_enter(op);
    if (st) return st;
    st = oc__need_outs(op, out_meta, "oc_op_infer");
    if (!st) st = oc__frame_bind(op, args, nargs, false, &f);
    if (!st) st = oc__frame_infer(op, &f, out_meta ? out_meta : scratch, NULL);
    oc__frame_release(&f);
    oc__op_leave(op);
    if (st) oc__error_in_op(op->qualname);
    return st;
}

static oc_status infer_spare(void *p)
{
    const spare_call *a = p;
    return infer_here(a->op, a->args, a->nargs, a->outs);
}

oc_status oc_op_infer(const oc_op *op, const oc_value *args, int nargs, oc_tensor *out_meta)
{
    if (!op) return oc_set_error(OC_EINVAL, "oc_op_infer: op is required");
    if (OC_CALL_STACK_SHORT())
        return oc__run_on_spare_stack(infer_spare,
                                      &(spare_call){.op = op, .args = args, .nargs = nargs, .outs = out_meta});
    return infer_here(op, args, nargs, out_meta);
}

/* A fresh result of several MiB is about to be written whole by the
 * kernel: its first touch costs a page fault per 4 KiB page, which for a
 * 128 MiB output takes longer than the kernel itself (90 ms against 25 on
 * this project's bench machine). Asking for transparent huge pages before
 * that first touch makes it one fault per 2 MiB. Only the 2 MiB-aligned
 * interior is advised; the advice is a hint (ignored where THP is off, or
 * the memory is not anonymous) and OC_HUGEPAGE_OUTPUTS=0 turns it off. */
static void advise_fresh(const oc_tensor *t)
{
    static atomic_int enabled = -1; /* read once: several host threads may call */
    const size_t huge = 2u << 20;
    size_t bytes = (size_t)oc_nbytes(t);
    if (bytes < 2 * huge) return;
    if (enabled < 0) atomic_store(&enabled, !oc__env_off("OC_HUGEPAGE_OUTPUTS"));
    if (!atomic_load(&enabled)) return;
    uintptr_t lo = ((uintptr_t)t->data + huge - 1) & ~(uintptr_t)(huge - 1);
    uintptr_t hi = ((uintptr_t)t->data + bytes) & ~(uintptr_t)(huge - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

/* Bind, infer, get the fresh results' buffers, run. `alloc` NULL: the
 * caller gave them in `outs` (oc_op_call). `api` names the entry point. */
__attribute__((noinline)) static oc_status call_op_here(const oc_op *op, const oc_value *args, int nargs,
                                                        oc_alloc_fn alloc, void *alloc_ctx, oc_tensor *outs,
                                                        const oc_grid *grid, const char *api)
{
    call_frame f;
    oc_tensor metas[OC_MAX_RESULTS];
    uint64_t t0 = oc__prof_on() ? oc__prof_now() : 0;
    f.nheap = 0;
    oc_status st = oc__op_enter(op); /* its library's code stays until oc__op_leave */
    if (st) return st;
    st = oc__need_outs(op, outs, api);
    if (!st) st = oc__frame_bind(op, args, nargs, true, &f);
    if (!st) st = oc__frame_infer(op, &f, metas, NULL);
    if (!st && op->fresh_results > 0) {
        uint64_t ta = t0 && alloc ? oc__prof_now() : 0;
        for (int i = 0; !st && i < op->num_results; i++) {
            if (op->def.schema.results[i].alias_arg >= 0) continue;
            if (alloc) {
                oc_clear_error();
                st = alloc(alloc_ctx, i, &metas[i], &outs[i]);
                if (st && oc_errcode() == OC_OK) oc_set_error(st, "op '%s': the output allocator failed", op->qualname);
                if (st) st = oc_errcode();
            }
            if (!st) st = oc__check_out(op, i, &metas[i], &outs[i], true, alloc ? "the allocator's" : "the caller's");
            if (!st && alloc) {
                f.plain &= oc__contiguous(&outs[i]); /* the caller's: oc__outs_clear */
                advise_fresh(&outs[i]);
            }
        }
        if (ta) oc__prof_host(OC_PROF_ALLOC, op->qualname, ta, oc__prof_now());
    }
    /* else nothing to do: fresh buffers, or the caller's missing every input */
    if (!st && !(oc__args_clear(&f) && (alloc || oc__outs_clear(op, &f, outs))))
        st = oc__frame_layout(op, &f, outs, !alloc);
    if (!st) st = oc__frame_execute(op, &f, outs, grid);
    oc__frame_release(&f);
    oc__op_leave(op);
    if (t0) oc__prof_host(OC_PROF_CALL, op->qualname, t0, oc__prof_now());
    if (st) oc__error_in_op(op->qualname);
    return st;
}

static oc_status call_op_spare(void *p)
{
    const spare_call *a = p;
    return call_op_here(a->op, a->args, a->nargs, a->alloc, a->alloc_ctx, a->outs, a->grid, a->api);
}

/* The check's slow path, out of line: call_op's fast path then has no
 * frame of its own (two tail calls). */
__attribute__((noinline)) static oc_status call_op_checked(const oc_op *op, const oc_value *args,
                                                           int nargs, oc_alloc_fn alloc,
                                                           void *alloc_ctx, oc_tensor *outs,
                                                           const oc_grid *grid, const char *api)
{
    if (oc__call_stack_short())
        return oc__run_on_spare_stack(call_op_spare,
                                      &(spare_call){op, args, nargs, alloc, alloc_ctx, outs, grid, api});
    return call_op_here(op, args, nargs, alloc, alloc_ctx, outs, grid, api);
}

/* Inline in each entry point: one call from there to the call path. */
__attribute__((always_inline)) static inline oc_status call_op(const oc_op *op,
                                                               const oc_value *args, int nargs,
                                                               oc_alloc_fn alloc, void *alloc_ctx,
                                                               oc_tensor *outs, const oc_grid *grid,
                                                               const char *api)
{
    if (__builtin_expect(oc__call_stack_maybe_short(), 0))
        return call_op_checked(op, args, nargs, alloc, alloc_ctx, outs, grid, api);
    return call_op_here(op, args, nargs, alloc, alloc_ctx, outs, grid, api);
}

oc_status oc_op_call(const oc_op *op, const oc_value *args, int nargs, oc_tensor *outs)
{
    if (!op) return oc_set_error(OC_EINVAL, "oc_op_call: op is required");
    return call_op(op, args, nargs, NULL, NULL, outs, NULL, "oc_op_call");
}

oc_status oc_op_call_grid(const oc_op *op, const oc_value *args, int nargs, oc_tensor *outs, const oc_grid *grid)
{
    if (!op) return oc_set_error(OC_EINVAL, "oc_op_call_grid: op is required");
    return call_op(op, args, nargs, NULL, NULL, outs, grid, "oc_op_call_grid");
}

__attribute__((noinline)) static oc_status prechecked_here(const oc_op *op, const oc_value *args, int nargs,
                                                           oc_tensor *outs, const oc_grid *grid)
{
    /* A shape function that sets the launch grid must run: the grid is
     * part of its answer. */
    if (atomic_load_explicit(&op->shape_sets_grid, memory_order_relaxed))
        return call_op(op, args, nargs, NULL, NULL, outs, grid, "oc_op_call_prechecked");
    call_frame f;
    uint64_t t0 = oc__prof_on() ? oc__prof_now() : 0;
    f.nheap = 0;
    f.grid.ndim = 0;
    oc_status st = oc__op_enter(op); /* its library's code stays until oc__op_leave */
    if (st) return st;
    st = oc__need_outs(op, outs, "oc_op_call_prechecked");
    if (!st) st = oc__frame_bind(op, args, nargs, true, &f);
    if (!st && !(oc__args_clear(&f) && oc__outs_clear(op, &f, outs)))
        st = oc__frame_layout(op, &f, outs, true);
    if (!st) st = oc__frame_execute(op, &f, outs, grid); /* no shape function: the caller checked the outputs */
    oc__frame_release(&f);
    oc__op_leave(op);
    if (t0) oc__prof_host(OC_PROF_CALL, op->qualname, t0, oc__prof_now());
    if (st) oc__error_in_op(op->qualname);
    return st;
}

static oc_status prechecked_spare(void *p)
{
    const spare_call *a = p;
    return prechecked_here(a->op, a->args, a->nargs, a->outs, a->grid);
}

__attribute__((noinline)) static oc_status prechecked_checked(const oc_op *op,
                                                              const oc_value *args, int nargs,
                                                              oc_tensor *outs, const oc_grid *grid)
{
    if (oc__call_stack_short())
        return oc__run_on_spare_stack(prechecked_spare,
                                      &(spare_call){.op = op, .args = args, .nargs = nargs,
                                                    .outs = outs, .grid = grid});
    return prechecked_here(op, args, nargs, outs, grid);
}

oc_status oc_op_call_prechecked(const oc_op *op, const oc_value *args, int nargs, oc_tensor *outs,
                                const oc_grid *grid)
{
    if (!op) return oc_set_error(OC_EINVAL, "oc_op_call_prechecked: op is required");
    if (__builtin_expect(oc__call_stack_maybe_short(), 0))
        return prechecked_checked(op, args, nargs, outs, grid);
    return prechecked_here(op, args, nargs, outs, grid);
}

oc_status oc_op_run(const oc_op *op, const oc_value *args, int nargs, oc_alloc_fn alloc, void *alloc_ctx,
                    oc_tensor *outs)
{
    if (!op || !alloc) return oc_set_error(OC_EINVAL, "oc_op_run: op and alloc are required");
    return call_op(op, args, nargs, alloc, alloc_ctx, outs, NULL, "oc_op_run");
}

oc_status oc_op_run_grid(const oc_op *op, const oc_value *args, int nargs, oc_alloc_fn alloc, void *alloc_ctx,
                         oc_tensor *outs, const oc_grid *grid)
{
    if (!op || !alloc) return oc_set_error(OC_EINVAL, "oc_op_run_grid: op and alloc are required");
    return call_op(op, args, nargs, alloc, alloc_ctx, outs, grid, "oc_op_run_grid");
}

static oc_status malloc_alloc(void *ctx, int index, const oc_tensor *meta, oc_tensor *out)
{
    oc_tensor **results = ctx;
    results[index] = oc__tensor_new(meta->dtype, meta->ndim, meta->sizes);
    if (!results[index]) return oc_errcode();
    *out = *results[index];
    return OC_OK;
}

oc_status oc_op_invoke(const oc_op *op, const oc_value *args, int nargs, oc_tensor **outs)
{
    oc_tensor views[OC_MAX_RESULTS];
    oc_tensor *made[OC_MAX_RESULTS] = {0};
    if (!op) return oc_set_error(OC_EINVAL, "oc_op_invoke: op is required");
    if (!outs && op->num_results > 0) return oc_set_error(OC_EINVAL, "oc_op_invoke: outs is required");
    oc_status st = oc_op_run(op, args, nargs, malloc_alloc, made, views);
    for (int i = 0; i < op->num_results; i++) {
        int a = op->def.schema.results[i].alias_arg;
        if (st != OC_OK) {
            oc_tensor_free(made[i]);
            outs[i] = NULL;
        } else {
            outs[i] = a >= 0 ? (oc_tensor *)args[a].v.tensor : made[i];
        }
    }
    return st;
}
