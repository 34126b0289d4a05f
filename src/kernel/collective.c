/* Combining values across the cores of a multicore launch: oc_barrier and
 * the oc_all_* collectives (kernel.h). The waiting is the engine's
 * (pool.c); here, the kernel-facing entry points and the combine rules,
 * applied in core order so the result does not depend on scheduling. */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "engine/core.h"
#include "engine/pool.h"
#include "kernel/kernel_internal.h"
#include "opcore/kernel.h"

/* A grid's instances run in any order, not all at once (a grid may have
 * more instances than there are cores): one waiting for another could wait
 * forever, so the collectives are refused there, even when the grid would
 * fit. */
static oc_core *collective_core(const char *fn)
{
    oc_core *c = oc__kernel_core(fn);
    if (c && c->exec->grid_ndim) {
        oc__raise(OC_EKERNEL, "%s is not allowed in a grid launch: the grid's program instances run in any "
                              "order and not all at once, so one must never wait for another (split the work "
                              "into two ops, or launch the op without a grid, as a multicore op)", fn);
        return NULL;
    }
    return c;
}

void oc_barrier(void)
{
    oc_core *c = collective_core("oc_barrier");
    if (c && c->count > 1) oc__pool_barrier(c);
}

static void sum_f64(void *acc, const void *x) { *(double *)acc += *(const double *)x; }

/* NaN wins, as in torch.max / torch.min. */
static void max_f64(void *acc, const void *x)
{
    double v = *(const double *)x;
    if (isnan(v) || v > *(double *)acc) *(double *)acc = v;
}

static void min_f64(void *acc, const void *x)
{
    double v = *(const double *)x;
    if (isnan(v) || v < *(double *)acc) *(double *)acc = v;
}

/* Unsigned: wraps like torch's int64 sum, without undefined behaviour. */
static void sum_i64(void *acc, const void *x)
{
    *(int64_t *)acc = (int64_t)((uint64_t) * (int64_t *)acc + (uint64_t) * (const int64_t *)x);
}

static void all_reduce(const char *fn, void *value, oc_combine_fn combine)
{
    oc_core *c = collective_core(fn);
    if (c && c->count > 1) oc__pool_allreduce(c, value, combine, value);
}

/* The kernel-facing collectives: this share's value in, the combined one out. */
#define OC_ALL_REDUCE(name, type, combine) \
    type name(type v)                     \
    {                                     \
        all_reduce(#name, &v, combine);   \
        return v;                         \
    }

OC_ALL_REDUCE(oc_all_sum, double, sum_f64)
OC_ALL_REDUCE(oc_all_max, double, max_f64)
OC_ALL_REDUCE(oc_all_min, double, min_f64)
OC_ALL_REDUCE(oc_all_sum_i64, int64_t, sum_i64)

/* ---- buffers and workspaces ---------------------------------------------------
 *
 * oc_all_sum_f32 / _f64: every core publishes its buffer (pool slots), then
 * each core sums one contiguous part of the elements over all buffers, in
 * core order, and writes the sums into that part of every buffer: the work
 * is split, no element is written by two cores, and the result does not
 * depend on scheduling. A barrier before (all published) and after (all
 * written). */

typedef struct published {
    void *data;
    int64_t n;
} published;

static void all_sum_buffer(const char *fn, void *data, int64_t n, bool f64)
{
    oc_core *c = collective_core(fn);
    if (!c) return;
    if (n < 0 || (n > 0 && !data)) {
        oc__raise(OC_EINVAL, "%s: %lld elements at %p (want n >= 0 and a buffer)", fn, (long long)n, data);
        return;
    }
    if (c->count <= 1) return;
    published mine = {data, n};
    void *const *all = oc__pool_publish(c, &mine); /* valid until the next barrier */
    uint32_t cores = c->count;
    for (uint32_t k = 0; k < cores; k++) {
        int64_t theirs = ((const published *)all[k])->n;
        if (theirs != n) {
            oc__pool_barrier(c); /* everyone has looked before anyone leaves (theirs is gone after) */
            oc__raise(OC_EKERNEL, "%s: core %u passes %lld elements, core %u %lld (every core passes the same "
                      "count)", fn, c->id, (long long)n, k, (long long)theirs);
            return;
        }
    }
    int64_t lo, hi;
    oc__split_range(n, f64 ? 8 : 16, c->id, cores, &lo, &hi); /* whole cache lines per core */
    for (int64_t i = lo; i < hi; i++) {
        if (f64) {
            double acc = ((const double *)((const published *)all[0])->data)[i];
            for (uint32_t k = 1; k < cores; k++) acc += ((const double *)((const published *)all[k])->data)[i];
            for (uint32_t k = 0; k < cores; k++) ((double *)((const published *)all[k])->data)[i] = acc;
        } else {
            float acc = ((const float *)((const published *)all[0])->data)[i];
            for (uint32_t k = 1; k < cores; k++) acc += ((const float *)((const published *)all[k])->data)[i];
            for (uint32_t k = 0; k < cores; k++) ((float *)((const published *)all[k])->data)[i] = acc;
        }
    }
    oc__pool_barrier(c); /* every part written before anyone reads its buffer */
}

void oc_all_sum_f32(float *data, int64_t n) { all_sum_buffer("oc_all_sum_f32", data, n, false); }
void oc_all_sum_f64(double *data, int64_t n) { all_sum_buffer("oc_all_sum_f64", data, n, true); }

void oc_all_sum_tensor(oc_tensor *t)
{
    const char *fn = "oc_all_sum_tensor";
    if (!t || !t->data || !oc_is_contiguous(t) || (t->dtype != OC_FLOAT32 && t->dtype != OC_FLOAT64)) {
        if (!collective_core(fn)) return;
        oc__raise(OC_EINVAL, "%s: want a contiguous float32 or float64 tensor with data, got %s", fn,
                  !t ? "NULL" : !t->data ? "a tensor with no data" : !oc_is_contiguous(t) ? "a strided view"
                                                                                  : oc_dtype_name(t->dtype));
        return;
    }
    all_sum_buffer(fn, t->data, oc_numel(t), t->dtype == OC_FLOAT64);
}

void *oc_shared_alloc(size_t bytes)
{
    const char *fn = "oc_shared_alloc";
    oc_core *c = collective_core(fn);
    if (!c) return NULL;
    oc_exec *e = c->exec;
    int k = c->shared_calls++;
    if (k >= OC_MAX_SHARED) {
        oc__raise(OC_EKERNEL, "%s: more than %d workspaces in one launch", fn, OC_MAX_SHARED);
        return NULL;
    }
    if (c->id == 0) { /* core 0 makes it; the barrier hands it to the others */
        if (!e->shared && !(e->shared = oc__calloc(1, sizeof *e->shared))) {
            oc__raise(OC_ENOMEM, "%s: out of memory", fn);
            return NULL;
        }
        void *p = bytes ? oc__aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
        if (bytes && !p) {
            oc__raise(OC_ENOMEM, "%s: out of memory for a workspace of %zu bytes", fn, bytes);
            return NULL;
        }
        if (p) memset(p, 0, bytes);
        e->shared->block[k] = p;
        e->shared->bytes[k] = bytes;
        e->shared->n = k + 1;
    }
    if (c->count > 1) oc__pool_barrier(c);
    if (e->shared->bytes[k] != bytes) {
        oc__raise(OC_EKERNEL, "%s: core %u asks for %zu bytes, core 0 for %zu (every core asks for the same "
                  "size, in the same order)", fn, c->id, bytes, e->shared->bytes[k]);
        return NULL;
    }
    return e->shared->block[k];
}
