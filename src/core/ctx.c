/* The thread's call context, and failing through it (see ctx.h). */
#include <stddef.h>

#include "core/ctx.h"
#include "core/internal.h"

static _Thread_local oc_ctx *tls_ctx;

void oc__ctx_init(oc_ctx *ctx, oc_ctx_fail_fn fail)
{
    *ctx = (oc_ctx){.mode = OC_MODE_IDLE, .fail = fail};
    ctx->temps.next = ctx->temps.prev = &ctx->temps;
}

oc_ctx *oc__ctx_current(void) { return tls_ctx; }

oc_ctx *oc__ctx_install(oc_ctx *ctx)
{
    oc_ctx *before = tls_ctx;
    tls_ctx = ctx;
    return before;
}

bool oc__in_shape_fn(void) { return tls_ctx && tls_ctx->mode == OC_MODE_SHAPE; }

void oc__raise(oc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    oc_ctx *x = tls_ctx;
    if (x && x->mode != OC_MODE_IDLE && x->guarded && x->fail) x->fail(x, status, fmt, ap);
    oc__set_errorv(status, fmt, ap);
    va_end(ap);
}
