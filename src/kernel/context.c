/* What a kernel asks of its core: ids, the dst tensor, failing. */
#include <stdarg.h>
#include <stdio.h>

#include "core/internal.h"
#include "engine/core.h"
#include "kernel/kernel_internal.h"
#include "opcore/kernel.h"

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
    if (!c || c->mode != OC_MODE_KERNEL) {
        oc__raise(OC_EINVAL, "oc_dst_tensor: only a running kernel has dst tensors%s",
                  c && c->mode == OC_MODE_SHAPE ? " (called from a shape function: describe "
                                                  "results with oc_set_result)" : "");
        return NULL;
    }
    if (index < 0 || index >= c->exec->ndst) {
        oc__raise(OC_EKERNEL, "oc_dst_tensor_at(%d): the op has %d result%s (schema: %s)", index,
                  c->exec->ndst, c->exec->ndst == 1 ? "" : "s", c->exec->op->def.schema_text);
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
    if (!c || c->mode != OC_MODE_SHAPE) {
        oc__raise(OC_EINVAL, "oc_set_result: only a shape function describes results (in a "
                             "kernel, write oc_dst_tensor_at(i))");
        return;
    }
    const struct oc_op *op = c->exec->op;
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

void oc_core_range(int64_t n, int64_t align, int64_t *lo, int64_t *hi)
{
    oc__split_range(n, align, oc_cpu_id(), oc_cpu_count(), lo, hi);
}

bool oc__in_shape_fn(void)
{
    oc_core *c = oc__core_current();
    return c && c->mode == OC_MODE_SHAPE;
}

/* Prefix a message with where it happened: op, function, core. A failure
 * opcore raises inside a kernel (a TCM range, an accessor's bounds) is the
 * kernel's failure, not a bad argument of the call: OC_EINVAL becomes
 * OC_EKERNEL, so Python raises OpError rather than OpArgumentError. (In a
 * shape function it stays: there it means the inputs do not fit.) */
static void fail_here(oc_core *c, oc_status status, const char *fmt, va_list ap)
{
    char msg[3072], where[1024], full[sizeof where + sizeof msg + 2];
    vsnprintf(msg, sizeof msg, fmt, ap);
    oc__core_where(c, where, sizeof where);
    snprintf(full, sizeof full, "%s: %s", where, msg);
    oc__core_fail(c, c->mode == OC_MODE_KERNEL && status == OC_EINVAL ? OC_EKERNEL : status, full);
}

void oc__raise(oc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    oc_core *c = oc__core_current();
    if (c && c->mode != OC_MODE_IDLE && c->guarded) fail_here(c, status, fmt, ap);
    oc__set_errorv(status, fmt, ap);
    va_end(ap);
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
