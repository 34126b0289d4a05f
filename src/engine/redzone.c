/* Debug builds: outputs in shadows with guard pages and canaries (see
 * redzone.h). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "core/internal.h"
#include "engine/core.h"
#include "engine/redzone.h"
#include "opcore/tensor_ops.h"

#define OC_REDZONE_ALIGN 64 /* what kernels may assume of an output's start */

static pthread_mutex_t active_lock = PTHREAD_MUTEX_INITIALIZER;
static oc__redzone *active;

static unsigned char canary(const char *p) { return (unsigned char)(0xA5 ^ ((uintptr_t)p * 31 >> 3)); }

/* Byte extent [lo, hi) of the tensor's elements relative to its data. */
static void extent(const oc_tensor *t, long long *lo, long long *hi)
{
    long long a = 0, b = 0, elem = (long long)oc_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) {
        long long span = (long long)(t->sizes[d] - 1) * t->strides[d] * elem;
        if (span < 0) a += span;
        else b += span;
    }
    *lo = a;
    *hi = b + elem;
}

oc_status oc__redzone_map(const char *op, const char *kernel, int index, oc_tensor *t, oc__redzone *rz)
{
    if (!t->data || oc_numel(t) == 0) return OC_OK;
    long long lo, hi;
    extent(t, &lo, &hi);
    size_t page = oc__page_size(), span = (size_t)(hi - lo);
    size_t body = (span + OC_REDZONE_ALIGN - 1) / OC_REDZONE_ALIGN * OC_REDZONE_ALIGN;
    size_t usable = (body + page - 1) / page * page;
    size_t total = usable + 2 * page;
    char *map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return oc_set_error(OC_ENOMEM, "op '%s': cannot map a debug shadow of output %d (%zu bytes)",
                            op, index, span);
    if (mprotect(map, page, PROT_NONE) != 0 || mprotect(map + page + usable, page, PROT_NONE) != 0) {
        munmap(map, total);
        return oc_set_error(OC_ENOMEM, "op '%s': cannot protect a debug shadow's guard pages", op);
    }
    *rz = (oc__redzone){.op = op, .kernel = kernel, .index = index, .data = t->data, .map = map,
                        .map_size = total, .lo = lo};
    rz->start = map + page + usable - body;
    rz->end = rz->start + span;
    for (char *p = map + page; p < rz->start; p++) *p = (char)canary(p);
    for (char *p = rz->end; p < map + page + usable; p++) *p = (char)canary(p);
    memcpy(rz->start, (char *)t->data + lo, span); /* a kernel may read its output */
    char shape[96];
    snprintf(rz->shape, sizeof rz->shape, "%s %s, %zu bytes", oc_dtype_name(t->dtype),
             oc_shape_str(t, shape, sizeof shape), span);
    t->data = rz->start - lo;
    pthread_mutex_lock(&active_lock);
    rz->next = active;
    active = rz;
    pthread_mutex_unlock(&active_lock);
    return OC_OK;
}

/* The first changed canary in [a, b), or NULL. */
static const char *changed(const char *a, const char *b)
{
    for (const char *p = a; p < b; p++)
        if ((unsigned char)*p != canary(p)) return p;
    return NULL;
}

oc_status oc__redzone_unmap(oc_tensor *t, oc__redzone *rz, oc_status status)
{
    pthread_mutex_lock(&active_lock);
    for (oc__redzone **p = &active; *p; p = &(*p)->next)
        if (*p == rz) { *p = rz->next; break; }
    pthread_mutex_unlock(&active_lock);
    size_t page = oc__page_size(); /* the canaries lie between the guard pages */
    const char *after = changed(rz->end, rz->map + rz->map_size - page), *before = NULL;
    for (const char *p = rz->start; p > rz->map + page && !before; p--)
        if ((unsigned char)p[-1] != canary(p - 1)) before = p - 1; /* nearest the start first */
    if (status == OC_OK && (after || before)) {
        status = oc_set_error(
            OC_EFAULT, "op '%s': kernel '%s' wrote %s output %d (%s): byte %td %s it changed "
                       "(found by the debug build's canaries)",
            rz->op, rz->kernel, after ? "past the end of" : "before the start of",
            rz->index, rz->shape, after ? after - rz->end : rz->start - before,
            after ? "after the end" : "before the start");
    }
    if (status == OC_OK) memcpy((char *)rz->data + rz->lo, rz->start, (size_t)(rz->end - rz->start));
    t->data = rz->data;
    munmap(rz->map, rz->map_size);
    rz->map = NULL;
    return status;
}

bool oc__redzone_describe(const void *addr, char *buf, size_t len)
{
    const char *a = addr;
    bool found = false;
    pthread_mutex_lock(&active_lock);
    for (oc__redzone *r = active; r && !found; r = r->next) {
        if (a < r->map || a >= r->map + r->map_size) continue;
        found = true;
        if (a >= r->end)
            snprintf(buf, len, "wrote past the end of output %d (%s): address %p is byte %td after "
                     "the end (caught by the debug build's guard page)", r->index, r->shape, addr, a - r->end);
        else
            snprintf(buf, len, "wrote before the start of output %d (%s): address %p is byte %td before "
                     "the start (caught by the debug build's guard page)", r->index, r->shape, addr, r->start - a);
    }
    pthread_mutex_unlock(&active_lock);
    return found;
}
