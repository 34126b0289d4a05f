/* The TCM arena: each core's private scratch memory.
 *
 * A first-fit allocator over a fixed arena with 64-byte block headers
 * (kernels allocate a handful of buffers per call, so a linear walk is
 * cheaper than anything cleverer). The arena is reset after every call.
 *
 * Debug builds (--debug) catch a kernel writing past the end of a block
 * while staying inside the arena (into the next block, which no guard page
 * separates): each block gets TCM_REDZONE more bytes, and everything from
 * the end of what was asked to the next header is filled with canaries,
 * checked when the block is freed and, for the blocks still live, when
 * the kernel returns. The error names the op and the buffer (which
 * oc_tcm_malloc of the call, its size, its offset). */
#include <stdint.h>
#include <string.h>

#include "core/internal.h"
#include "engine/core.h"
#include "opcore/kernel.h"

#define TCM_ALIGN 64
#define TCM_REDZONE 64 /* debug builds: canary bytes after each block at least */

typedef struct tcm_block {
    size_t size;  /* bytes including this header; multiple of TCM_ALIGN */
    size_t used;  /* 0 = free */
    uint32_t seq; /* debug builds: its oc_tcm_malloc's number in the call (1, 2, ...) */
    char pad[TCM_ALIGN - 2 * sizeof(size_t) - sizeof(uint32_t)];
} tcm_block;

_Static_assert(sizeof(tcm_block) == TCM_ALIGN, "TCM block header must keep alignment");

void oc__tcm_reset(oc_core *c)
{
    tcm_block *b = (tcm_block *)c->tcm;
    b->size = c->tcm_size / TCM_ALIGN * TCM_ALIGN;
    b->used = 0;
    c->tcm_allocs = 0;
}

static unsigned char canary(const char *p) { return (unsigned char)(0x5A ^ ((uintptr_t)p * 131 >> 4)); }

static bool debug_call(const oc_core *c) { return c->exec && c->exec->debug; }

/* The first canary byte of block `b` that the kernel changed, or NULL. */
static const char *overrun(const tcm_block *b)
{
    const char *end = (const char *)(b + 1) + b->used, *limit = (const char *)b + b->size;
    for (const char *p = end; p < limit; p++)
        if ((unsigned char)*p != canary(p)) return p;
    return NULL;
}

static void overrun_message(const oc_core *c, const tcm_block *b, const char *at, char *buf, size_t len)
{
    snprintf(buf, len, "op '%s': kernel '%s' wrote past the end of TCM buffer %u (the call's oc_tcm_malloc "
             "number %u: %zu bytes at offset %td of core %u's TCM): byte %td after its end changed (found by "
             "the debug build's TCM redzones)", c->exec->name, c->exec->kernel_name, b->seq, b->seq, b->used,
             (const char *)(b + 1) - c->tcm, c->id, at - ((const char *)(b + 1) + b->used));
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
    bool debug = debug_call(c);
    size_t need = (bytes + TCM_ALIGN - 1) / TCM_ALIGN * TCM_ALIGN + TCM_ALIGN + (debug ? TCM_REDZONE : 0);
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
        b->seq = ++c->tcm_allocs;
        if (debug)
            for (char *p = (char *)(b + 1) + bytes; p < (char *)b + b->size; p++) *p = (char)canary(p);
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
    const char *at = debug_call(c) ? overrun(b) : NULL;
    if (at) {
        char msg[512];
        overrun_message(c, b, at, msg, sizeof msg);
        oc__raise(OC_EFAULT, "%s", msg);
    }
    b->used = 0;
}

void oc__tcm_check(oc_core *c)
{
    const char *end = c->tcm + c->tcm_size / TCM_ALIGN * TCM_ALIGN;
    for (tcm_block *b = (tcm_block *)c->tcm; b; b = next_block(c, b)) {
        /* an overrun long enough to reach the next header breaks the chain
         * (the block before it reports first: its canaries changed too) */
        bool broken = b->size < TCM_ALIGN || b->size % TCM_ALIGN || (const char *)b + b->size > end ||
                      b->used > b->size;
        const char *at = b->used && !broken ? overrun(b) : NULL;
        if (!at && !broken) continue;
        c->failed = true;
        c->fail_status = OC_EFAULT;
        if (at) overrun_message(c, b, at, c->fail_msg, sizeof c->fail_msg);
        else snprintf(c->fail_msg, sizeof c->fail_msg, "op '%s': kernel '%s' overwrote the TCM allocator's "
                      "header at offset %td of core %u's TCM: a buffer before it was written past its end (found by "
                      "the debug build's TCM redzones)", c->exec->name, c->exec->kernel_name,
                      (const char *)b - c->tcm, c->id);
        return;
    }
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
