/* Prepared calls (host.h): bind, infer and check once, then run on new
 * data pointers.
 *
 * A run takes one of two paths. The bound frame itself, when every tensor
 * is dense (the frameworks' usual call, and every call XLA makes): the run
 * sets the frame's data pointers, checks that no result overlaps an
 * argument or another result and that no argument written in place meets
 * another argument, and runs the kernel; no binding, no shape function, no
 * layout pass. Anything else (strided tensors, a written tensor or result
 * that meets an argument) goes through oc_op_call_prechecked on copies of
 * the caller's arguments, which makes the dense copies, writes back, and
 * reports overlaps exactly as a plain call would. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "host/call_internal.h"
#include "profiler/hooks.h"

struct oc_call {
    const struct oc_op *op;
    bool fast;                        /* runs the bound frame (see above) */
    bool has_grid;
    oc_grid grid;
    int nargs;
    int ndata, ninputs;               /* data slots; the first ninputs are arguments' */
    oc_tensor **frame_slot;           /* per slot: the frame's struct it sets (fast path) */
    oc_tensor **copy_slot;            /* per slot: the copied caller's struct it sets (other path) */
    size_t *bytes;                    /* per slot: the dense tensor's bytes (the inputs' hull, fast path) */
    bool *empty;                      /* per slot: no elements (its data may be NULL) */
    oc_value *args;                   /* the caller's arguments, tensors pointing at `tensors` */
    oc_tensor *tensors;               /* copies of the caller's tensor structs, list items included */
    oc_tensor outs[OC_MAX_RESULTS];   /* the result buffers (fresh ones' data set per run) */
    oc_direct_regs regs;              /* the kernel's argument registers (fast path; the slots never move) */
    call_frame f;                     /* bound once (fast path) */
    oc__launch launch;                /* the kernel's launch, planned once (fast path) */
};

static oc_status need_call(const oc_call *c, const char *fn)
{
    return c ? OC_OK : oc_set_error(OC_EINVAL, "%s: call is required (from oc_call_prepare)", fn);
}

void oc_call_free(oc_call *c)
{
    if (!c) return;
    oc__frame_release(&c->f);
    oc__free(c->frame_slot);
    oc__free(c->args);
    oc__free(c->tensors);
    oc__free(c);
}

int oc_call_num_data(const oc_call *c) { return c ? c->ndata : 0; }

/* The caller's arguments with every tensor struct copied (a list's items
 * too) and each data slot pointed at its copy and at the frame's struct. */
static oc_status copy_args(oc_call *c, const oc_value *args)
{
    const struct oc_op *op = c->op;
    int64_t ntensors = 0;
    for (int i = 0; i < c->nargs; i++)
        ntensors += args[i].type == OC_ARG_TENSOR ? 1 : args[i].type == OC_ARG_TENSOR_LIST ? args[i].v.tensors.count : 0;
    size_t nslots = (size_t)ntensors + (size_t)op->num_results;
    c->args = oc__malloc(((size_t)c->nargs + 1) * sizeof *c->args);
    c->tensors = oc__malloc(((size_t)ntensors + 1) * sizeof *c->tensors);
    /* one block: frame slots, copy slots, byte counts */
    c->frame_slot = oc__malloc(nslots * (2 * sizeof(oc_tensor *) + sizeof(size_t) + sizeof(bool)) + 1);
    if (!c->args || !c->tensors || !c->frame_slot)
        return oc_set_error(OC_ENOMEM, "op '%s': oc_call_prepare: out of memory", op->qualname);
    c->copy_slot = c->frame_slot + nslots;
    c->bytes = (size_t *)(c->copy_slot + nslots);
    c->empty = (bool *)(c->bytes + nslots);
    int64_t t = 0;
    int n = 0;
    for (int i = 0; i < c->nargs; i++) {
        c->args[i] = args[i];
        if (args[i].type == OC_ARG_TENSOR) {
            c->tensors[t] = *args[i].v.tensor;
            c->args[i].v.tensor = &c->tensors[t];
            c->copy_slot[n] = &c->tensors[t++];
            c->frame_slot[n++] = &c->f.tensors[i];
        } else if (args[i].type == OC_ARG_TENSOR_LIST) {
            oc_tensor *items = (oc_tensor *)c->f.values[i].tensors.items; /* the frame's copies */
            c->args[i].v.tensors.items = &c->tensors[t];
            for (int64_t k = 0; k < args[i].v.tensors.count; k++) {
                c->tensors[t] = args[i].v.tensors.items[k];
                c->copy_slot[n] = &c->tensors[t++];
                c->frame_slot[n++] = &items[k];
            }
        }
    }
    c->ninputs = n;
    for (int r = 0; r < op->num_results; r++) {
        if (op->def.schema.results[r].alias_arg >= 0) continue;
        c->copy_slot[n] = c->frame_slot[n] = &c->outs[r];
        n++;
    }
    c->ndata = n;
    /* Data comes with each run: no struct stays a meta tensor. */
    for (int k = 0; k < n; k++) {
        c->frame_slot[k]->flags &= ~(uint32_t)OC_TENSOR_META;
        c->copy_slot[k]->flags &= ~(uint32_t)OC_TENSOR_META;
        const oc_tensor *x = c->frame_slot[k];
        c->bytes[k] = oc__contiguous(x) ? (size_t)oc_numel(x) * oc__elem_bytes[x->dtype] : 0;
        c->empty[k] = oc_numel(x) == 0;
        c->fast &= oc__contiguous(x);
    }
    if (c->fast && oc__frame_regs(op, &c->f, &c->regs)) c->f.regs = &c->regs;
    if (c->fast) oc__launch_plan(op, &c->f, c->has_grid ? &c->grid : NULL, &c->launch);
    return OC_OK;
}

__attribute__((noinline)) static oc_status prepare_here(const oc_op *op, const oc_value *args, int nargs,
                                                        const oc_tensor *outs, const oc_grid *grid, oc_call **out)
{
    if (!out) return oc_set_error(OC_EINVAL, "oc_call_prepare: `call` (where the prepared call goes) is required");
    *out = NULL;
    if (!op) return oc_set_error(OC_EINVAL, "oc_call_prepare: op is required");
    oc_status st = oc__need_outs(op, outs, "oc_call_prepare");
    if (st) return st;
    oc_call *c = oc__calloc(1, sizeof *c);
    if (!c) return oc_set_error(OC_ENOMEM, "op '%s': oc_call_prepare: out of memory", op->qualname);
    c->op = op;
    c->nargs = nargs;
    c->has_grid = grid != NULL;
    if (grid) c->grid = *grid;
    st = oc__op_enter(op);
    if (st) {
        oc__free(c);
        return st;
    }
    oc_tensor metas[OC_MAX_RESULTS];
    st = oc__frame_bind(op, args, nargs, false, &c->f);
    if (!st) st = oc__frame_infer(op, &c->f, metas, NULL);
    for (int r = 0; !st && r < op->num_results; r++) {
        if (op->def.schema.results[r].alias_arg >= 0) continue;
        st = oc__check_out(op, r, &metas[r], &outs[r], false, "the caller's");
        c->outs[r] = outs[r];
    }
    c->fast = c->f.plain || c->f.spans_dense; /* every tensor contiguous (written ones too) */
    if (!st) st = copy_args(c, args);
    oc__op_leave(op);
    if (st) {
        oc__error_in_op(op->qualname);
        oc_call_free(c);
        return st;
    }
    *out = c;
    return OC_OK;
}

/* A thread whose stack is short prepares and runs its calls on its core's
 * spare stack (engine/core.c: oc__call_stack_short). */
typedef struct spare_prepare {
    const oc_op *op;
    const oc_value *args;
    int nargs;
    const oc_tensor *outs;
    const oc_grid *grid;
    oc_call **out;
} spare_prepare;

static oc_status prepare_spare(void *p)
{
    const spare_prepare *a = p;
    return prepare_here(a->op, a->args, a->nargs, a->outs, a->grid, a->out);
}

oc_status oc_call_prepare(const oc_op *op, const oc_value *args, int nargs, const oc_tensor *outs,
                          const oc_grid *grid, oc_call **out)
{
    if (OC_CALL_STACK_SHORT())
        return oc__run_on_spare_stack(prepare_spare, &(spare_prepare){op, args, nargs, outs, grid, out});
    return prepare_here(op, args, nargs, outs, grid, out);
}

/* The name of data slot k in messages: the argument's, or "result r". */
static void slot_name(const oc_call *c, int k, char *buf, size_t cap)
{
    const struct oc_op *op = c->op;
    int n = 0;
    for (int i = 0; i < c->nargs; i++) {
        int64_t m = c->args[i].type == OC_ARG_TENSOR ? 1 : c->args[i].type == OC_ARG_TENSOR_LIST ? c->args[i].v.tensors.count : 0;
        if (k < n + m) {
            if (c->args[i].type == OC_ARG_TENSOR) snprintf(buf, cap, "argument '%s'", op->def.schema.args[i].name);
            else snprintf(buf, cap, "argument '%s' item %d", op->def.schema.args[i].name, k - n);
            return;
        }
        n += (int)m;
    }
    for (int r = 0; r < op->num_results; r++)
        if (op->def.schema.results[r].alias_arg < 0 && n++ == k) {
            snprintf(buf, cap, "result %d", r);
            return;
        }
}

/* OC_EINVAL for data pointer k, NULL where its tensor has elements. */
static oc_status null_data(const oc_call *c, int k)
{
    char what[128] = "";
    slot_name(c, k, what, sizeof what);
    return oc_set_error(OC_EINVAL, "op '%s': oc_call_run: data pointer %d (%s) is NULL", c->op->qualname, k, what);
}

__attribute__((noinline)) static oc_status run_here(oc_call *c, void *const *data)
{
    oc_status st = need_call(c, "oc_call_run");
    if (st) return st;
    const struct oc_op *op = c->op;
    if (!data && c->ndata > 0)
        return oc_set_error(OC_EINVAL, "op '%s': oc_call_run: `data` is required (%d pointers)", op->qualname,
                            c->ndata);
    if (c->fast) {
        /* the frame's data, and what binding finds from it: the inputs' hull
         * for oc__outs_clear, and each input's bytes for its exact test and,
         * with arguments written in place, oc__args_clear (the same spans in
         * the same order: the non-empty inputs, all dense here) */
        uintptr_t lo = UINTPTR_MAX, hi = 0;
        for (int k = 0, s = 0; k < c->ndata; k++) {
            if (!data[k] && !c->empty[k]) return null_data(c, k);
            c->frame_slot[k]->data = data[k];
            if (k >= c->ninputs || !c->bytes[k]) continue;
            uintptr_t l = (uintptr_t)data[k], h = l + c->bytes[k];
            lo = l < lo ? l : lo;
            hi = h > hi ? h : hi;
            c->f.spans[s].lo = l, c->f.spans[s++].hi = h;
        }
        c->f.lo = lo, c->f.hi = hi;
    } else {
        for (int k = 0; k < c->ndata; k++)
            if (!data[k] && !c->empty[k]) return null_data(c, k);
    }
    if (!c->fast || !oc__args_clear(&c->f) || !oc__outs_clear(op, &c->f, c->outs)) {
        /* the long way decides, and reports */
        for (int k = 0; k < c->ndata; k++) c->copy_slot[k]->data = data[k];
        return oc_op_call_prechecked(op, c->args, c->nargs, c->outs, c->has_grid ? &c->grid : NULL);
    }
    uint64_t t0 = oc__prof_on() ? oc__prof_now() : 0;
    st = oc__op_enter(op);
    if (st) return st;
    /* the planned launch; with the profiler on, the full one (it counts the inputs' bytes) */
    st = c->launch.ready && !t0 ? oc__launch_run(op, &c->launch, c->outs)
                                : oc__frame_execute(op, &c->f, c->outs, c->has_grid ? &c->grid : NULL);
    oc__op_leave(op);
    if (t0) oc__prof_host(OC_PROF_CALL, op->qualname, t0, oc__prof_now());
    if (st) oc__error_in_op(op->qualname);
    return st;
}

static oc_status run_spare(void *p)
{
    void **a = p;
    return run_here(a[0], a[1]);
}

__attribute__((noinline)) static oc_status run_checked(oc_call *c, void *const *data)
{
    if (oc__call_stack_short())
        return oc__run_on_spare_stack(run_spare, (void *[]){c, (void *)data});
    return run_here(c, data);
}

oc_status oc_call_run(oc_call *c, void *const *data)
{
    if (__builtin_expect(oc__call_stack_maybe_short(), 0))
        return run_checked(c, data); /* out of line: no frame here */
    return run_here(c, data);
}
