/* The TCM arena: each core's private scratch memory.
 *
 * A first-fit allocator over a fixed arena with 64-byte block headers
 * (kernels allocate a handful of buffers per call, so a linear walk is
 * cheaper than anything cleverer). The arena is reset after every call. */
#include <stdint.h>
#include <string.h>

#include "core/internal.h"
#include "engine/core.h"
#include "opcore/kernel.h"

#define TCM_ALIGN 64

typedef struct tcm_block {
    size_t size; /* bytes including this header; multiple of TCM_ALIGN */
    size_t used; /* 0 = free */
    char pad[TCM_ALIGN - 2 * sizeof(size_t)];
} tcm_block;

_Static_assert(sizeof(tcm_block) == TCM_ALIGN, "TCM block header must keep alignment");

void oc__tcm_reset(oc_core *c)
{
    tcm_block *b = (tcm_block *)c->tcm;
    b->size = c->tcm_size / TCM_ALIGN * TCM_ALIGN;
    b->used = 0;
}

bool oc__tcm_contains(const oc_core *c, const void *p, size_t bytes)
{
    const char *q = p;
    return q >= c->tcm && bytes <= c->tcm_size && q - c->tcm <= (ptrdiff_t)(c->tcm_size - bytes);
}

static tcm_block *next_block(oc_core *c, tcm_block *b)
{
    char *n = (char *)b + b->size;
    return n < c->tcm + c->tcm_size / TCM_ALIGN * TCM_ALIGN ? (tcm_block *)n : NULL;
}

void *oc_tcm_malloc(size_t bytes)
{
    oc_core *c = oc__kernel_core("oc_tcm_malloc");
    if (!c) return NULL;
    size_t need = (bytes + TCM_ALIGN - 1) / TCM_ALIGN * TCM_ALIGN + TCM_ALIGN;
    if (bytes == 0 || need < bytes) return NULL;
    for (tcm_block *b = (tcm_block *)c->tcm; b; b = next_block(c, b)) {
        if (b->used) continue;
        /* coalesce following free blocks first */
        tcm_block *n;
        while ((n = next_block(c, b)) && !n->used) b->size += n->size;
        if (b->size < need) continue;
        if (b->size - need >= 2 * TCM_ALIGN) {
            tcm_block *rest = (tcm_block *)((char *)b + need);
            rest->size = b->size - need;
            rest->used = 0;
            b->size = need;
        }
        b->used = bytes;
        return b + 1;
    }
    /* Fail here, with the numbers, rather than hand back a NULL that some
     * later call reports as a buffer outside the TCM. */
    oc__raise(OC_ENOMEM, "oc_tcm_malloc: %zu bytes asked, %zu free of core %u's %zu-byte TCM "
              "(OC_TCM_SIZE or oc_engine_configure sets the size per core)", bytes, oc_tcm_available(), c->id,
              c->tcm_size);
    return NULL;
}

void oc_tcm_free(void *p)
{
    if (!p) return;
    oc_core *c = oc__kernel_core("oc_tcm_free");
    if (!c) return;
    tcm_block *b = (tcm_block *)p - 1;
    if (!oc__tcm_contains(c, b, sizeof *b) || ((char *)b - c->tcm) % TCM_ALIGN || !b->used)
        oc__raise(OC_EINVAL, "oc_tcm_free: %p is not a live TCM allocation of core %u", p, c->id);
    b->used = 0;
}

size_t oc_tcm_capacity(void)
{
    oc_core *c = oc__core_current();
    return c ? c->tcm_size : oc__engine_default_tcm();
}

size_t oc_tcm_available(void)
{
    oc_core *c = oc__core_current();
    if (!c) return 0;
    size_t free_bytes = 0;
    for (tcm_block *b = (tcm_block *)c->tcm; b; b = next_block(c, b))
        if (!b->used) free_bytes += b->size - TCM_ALIGN;
    return free_bytes;
}
