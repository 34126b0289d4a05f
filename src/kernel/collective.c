/* Combining values across the cores of a multicore launch: oc_barrier and
 * the oc_all_* collectives (kernel.h). The waiting is the engine's
 * (pool.c); here, the kernel-facing entry points and the combine rules,
 * applied in core order so the result does not depend on scheduling. */
#include <math.h>

#include "core/internal.h"
#include "engine/core.h"
#include "engine/pool.h"
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
