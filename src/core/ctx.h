/* src/core/ctx.h — the call context: what a running call's code needs of
 * its thread, owned by the layer that runs calls (internal).
 *
 * core knows nothing of engines, ops or streams. The engine embeds one
 * oc_ctx in each of its cores, installs it on the thread for the length of
 * a call (oc__ctx_install) and hands down what only it can do as function
 * pointers: `fail` ends the running call (the engine's longjmp), `at_end`
 * is run when the call ends (set by whoever left something open: the
 * kernel layer's streams). oc__raise, oc__in_shape_fn and the tensor
 * allocator (core/tensor.c) work through the installed context only.
 */
#ifndef OPCORE_CORE_CTX_H
#define OPCORE_CORE_CTX_H

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>

#include "opcore/status.h"
#include "opcore/tensor.h"

typedef enum oc_core_mode {
    OC_MODE_IDLE = 0,   /* no call running on this thread */
    OC_MODE_KERNEL = 1, /* running a kernel */
    OC_MODE_SHAPE = 2,  /* running a shape function (meta tensors only) */
    OC_MODE_LIBRARY = 3 /* running a protected function: a library's OC_LIBRARY block */
} oc_core_mode;

/* Header of every tensor opcore allocates; links it into the running
 * context's list of temporaries while a call runs. */
typedef struct oc_tensor_block {
    struct oc_tensor_block *prev, *next;
    bool meta;                /* made by a shape function: no data, recyclable */
    oc_tensor tensor;
} oc_tensor_block;

/* Meta tensors a context keeps for the next shape pass: a shape-preserving
 * op's oc_empty_like then allocates nothing. */
#define OC_META_CACHE 8

typedef struct oc_ctx oc_ctx;

/* Ends the running call with `status` and the formatted message; never
 * returns (the engine jumps back to where it started the call). */
typedef void (*oc_ctx_fail_fn)(oc_ctx *ctx, oc_status status, const char *fmt, va_list ap)
    __attribute__((noreturn));
/* Run once when the call ends, then cleared. */
typedef void (*oc_ctx_end_fn)(oc_ctx *ctx);

struct oc_ctx {
    oc_core_mode mode;
    volatile sig_atomic_t guarded;  /* a failure or fault ends the call while set */
    oc_tensor_block temps;          /* list head of the call's temporaries */
    oc_tensor_block *meta_cache[OC_META_CACHE]; /* free meta tensors */
    int meta_cached;
    oc_ctx_fail_fn fail;            /* set by the owner (the engine) */
    oc_ctx_end_fn at_end;           /* set while something needs closing at the end */
};

/* An idle context with no temporaries that fails through `fail`. */
void oc__ctx_init(oc_ctx *ctx, oc_ctx_fail_fn fail);

/* The context running a call on this thread (NULL outside calls). */
oc_ctx *oc__ctx_current(void);

/* Make `ctx` (or NULL) this thread's context; returns the one before. */
oc_ctx *oc__ctx_install(oc_ctx *ctx);

/* The call is over: run and clear its at-end hook, if any. */
static inline void oc__ctx_end(oc_ctx *ctx)
{
    oc_ctx_end_fn fn = ctx->at_end;
    ctx->at_end = NULL;
    if (fn) fn(ctx);
}

/* Free the context's temporaries (meta ones go back to its cache), and the
 * cache itself when the context goes away (core/tensor.c). */
void oc__tensor_temps_release(oc_ctx *ctx);
void oc__tensor_cache_free(oc_ctx *ctx);

#endif /* OPCORE_CORE_CTX_H */
