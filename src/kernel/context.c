/* What a kernel asks of its core: ids, the dst tensor, failing. */
#include <stdarg.h>
#include <stdio.h>

#include "core/internal.h"
#include "engine/core.h"
#include "kernel/kernel_internal.h"
#include "library/registry.h"
#include "opcore/kernel.h"

/* The op the running call runs: host/call.c hands it to the engine as the
 * exec's owner (kernel and shape modes only). */
static const struct oc_op *running_op(const oc_core *c)
{
    return c->exec->owner;
}

uint32_t oc_cpu_id(void)
{
    oc_core *c = oc__core_current();
    return c ? c->id : 0;
}

uint32_t oc_cpu_count(void)
{
    oc_core *c = oc__core_current();
    return c ? c->count : 1;
}

oc_tensor *oc_dst_tensor_at(int index)
{
    oc_core *c = oc__core_current();
    if (!c || c->ctx.mode != OC_MODE_KERNEL) {
        oc__raise(OC_EINVAL, "oc_dst_tensor: only a running kernel has dst tensors%s",
                  c && c->ctx.mode == OC_MODE_SHAPE ? " (called from a shape function: describe "
                                                  "results with oc_set_result)" : "");
        return NULL;
    }
    if (index < 0 || index >= c->exec->ndst) {
        oc__raise(OC_EKERNEL, "oc_dst_tensor_at(%d): the op has %d result%s (schema: %s)", index,
                  c->exec->ndst, c->exec->ndst == 1 ? "" : "s", running_op(c)->def.schema_text);
        return NULL;
    }
    return &c->exec->dsts[index];
}

oc_tensor *oc_dst_tensor(void) { return oc_dst_tensor_at(0); }

int oc_num_results(void)
{
    oc_core *c = oc__core_current();
    return c && c->exec ? c->exec->ndst : 0;
}

void oc_set_result(int index, const oc_tensor *meta)
{
    oc_core *c = oc__core_current();
    if (!c || c->ctx.mode != OC_MODE_SHAPE) {
        oc__raise(OC_EINVAL, "oc_set_result: only a shape function describes results (in a "
                             "kernel, write oc_dst_tensor_at(i))");
        return;
    }
    const struct oc_op *op = running_op(c);
    if (index < 0 || index >= c->exec->ndst) {
        oc__raise(OC_ESHAPE, "oc_set_result(%d): the op has %d result%s (schema: %s)", index,
                  c->exec->ndst, c->exec->ndst == 1 ? "" : "s", op->def.schema_text);
        return;
    }
    int alias = op->def.schema.results[index].alias_arg;
    if (alias >= 0) {
        oc__raise(OC_ESHAPE, "oc_set_result(%d): result %d is argument '%s' itself (Tensor(%s!)); "
                             "only new results are described", index, index,
                  op->def.schema.args[alias].name, op->def.schema.args[alias].alias_set);
        return;
    }
    if (!meta) {
        oc__raise(OC_ESHAPE, "oc_set_result(%d): the tensor is NULL", index);
        return;
    }
    if (oc_tensor_init(&c->exec->dsts[index], NULL, meta->dtype, meta->ndim, meta->sizes) != OC_OK) {
        oc__raise(OC_ESHAPE, "oc_set_result(%d): not a valid tensor: %s", index, oc_errmsg());
        return;
    }
    c->exec->described |= 1u << index;
}

void oc__split_range(int64_t n, int64_t align, int64_t id, int64_t count, int64_t *lo, int64_t *hi)
{
    if (align < 1) align = 1;
    if (count < 1) count = 1, id = 0;
    int64_t blocks = (n + align - 1) / align;
    int64_t b0 = blocks * id / count, b1 = blocks * (id + 1) / count;
    *lo = b0 * align < n ? b0 * align : n;
    *hi = b1 * align < n ? b1 * align : n;
}

void oc_core_range(int64_t n, int64_t align, int64_t *lo, int64_t *hi)
{
    oc__split_range(n, align, oc_cpu_id(), oc_cpu_count(), lo, hi);
}

void oc_fail(const char *file, int line, const char *fmt, ...)
{
    char msg[3072];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    oc__raise(OC_EKERNEL, "%s:%d: %s", file, line, msg);
}

/* ---- the launch grid ------------------------------------------------------------ */

/* The axis's size: the grid's (1 past its axes), or, outside a grid launch,
 * the 1-d grid of the launch's shares. */
static int64_t grid_dim(const oc_core *c, int axis)
{
    if (!c->exec || !c->exec->grid_ndim) return axis == 0 ? c->count : 1;
    return axis < c->exec->grid_ndim ? c->exec->grid[axis] : 1;
}

static oc_core *grid_core(const char *fn, int axis)
{
    oc_core *c = oc__kernel_core(fn);
    if (c && (axis < 0 || axis > 2)) {
        oc__raise(OC_EKERNEL, "%s(%d): the axis must be 0, 1 or 2 (a grid has up to 3 axes)", fn, axis);
        return NULL;
    }
    return c;
}

int64_t oc_program_id(int axis)
{
    oc_core *c = grid_core("oc_program_id", axis);
    if (!c) return 0;
    if (!c->exec->grid_ndim) return axis == 0 ? c->id : 0; /* the 1-d grid of the launch's cores */
    int64_t p[3];
    oc__grid_coords(c->exec, c->id, p);
    return p[axis];
}

int64_t oc_num_programs(int axis)
{
    oc_core *c = grid_core("oc_num_programs", axis);
    return c ? grid_dim(c, axis) : 1;
}

void oc_set_grid(int ndim, const int64_t *dims)
{
    oc_core *c = oc__core_current();
    if (!c || c->ctx.mode != OC_MODE_SHAPE) {
        oc__raise(OC_EINVAL, "oc_set_grid: only a shape function sets the launch grid (a kernel reads "
                             "it with oc_program_id/oc_num_programs)");
        return;
    }
    const struct oc_op *op = running_op(c);
    if (ndim < 1 || ndim > 3 || !dims) {
        oc__raise(OC_ESHAPE, "op '%s': oc_set_grid: a grid has 1 to 3 axes, got %d%s", op->qualname, ndim,
                  dims ? "" : " (dims NULL)");
        return;
    }
    for (int d = 0; d < ndim; d++) {
        if (dims[d] < 1) {
            oc__raise(OC_ESHAPE, "op '%s': oc_set_grid: axis %d of the grid is %lld; every axis needs at "
                                 "least 1 program", op->qualname, d, (long long)dims[d]);
            return;
        }
        c->exec->grid[d] = dims[d];
    }
    c->exec->grid_ndim = ndim;
}
