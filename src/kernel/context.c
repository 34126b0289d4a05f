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

oc_tensor *oc_dst_tensor(void)
{
    oc_core *c = oc__core_current();
    if (!c || c->mode != OC_MODE_KERNEL) {
        oc__raise(OC_EINVAL, "oc_dst_tensor: only a running kernel has a dst tensor%s",
                  c && c->mode == OC_MODE_SHAPE ? " (called from a shape function)" : "");
        return NULL;
    }
    return c->exec->dst;
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

/* Prefix a message with where it happened: op, function, core. */
static void fail_here(oc_core *c, oc_status status, const char *fmt, va_list ap)
{
    char msg[3072], full[4096];
    vsnprintf(msg, sizeof msg, fmt, ap);
    const struct oc_op *op = c->exec->op;
    if (c->mode == OC_MODE_SHAPE)
        snprintf(full, sizeof full, "op '%s': shape function '%s': %s", op->qualname,
                 op->def.shape_fn_name, msg);
    else if (c->count > 1)
        snprintf(full, sizeof full, "op '%s': kernel '%s' on core %u: %s", op->qualname,
                 op->def.kernel_name, c->id, msg);
    else
        snprintf(full, sizeof full, "op '%s': kernel '%s': %s", op->qualname, op->def.kernel_name, msg);
    oc__core_fail(c, status, full);
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
