/* The replaceable host allocator (opcore/alloc.h, core/alloc.h). */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "opcore/alloc.h"

/* Read on every allocation from any thread, written by
 * oc_replace_allocator while opcore holds no memory: relaxed atomics keep
 * the reads race-free without ordering cost. */
static _Atomic(oc_malloc_fn) alloc_malloc = malloc;
static _Atomic(oc_realloc_fn) alloc_realloc = realloc;
static _Atomic(oc_calloc_fn) alloc_calloc = calloc;
static _Atomic(oc_free_fn) alloc_free = free;

oc_status oc_replace_allocator(oc_malloc_fn malloc_fn, oc_realloc_fn realloc_fn, oc_calloc_fn calloc_fn,
                               oc_free_fn free_fn)
{
    if (!malloc_fn || !realloc_fn || !calloc_fn || !free_fn)
        return oc_set_error(OC_EINVAL, "oc_replace_allocator: every function must be given (got a NULL one)");
    atomic_store_explicit(&alloc_malloc, malloc_fn, memory_order_relaxed);
    atomic_store_explicit(&alloc_realloc, realloc_fn, memory_order_relaxed);
    atomic_store_explicit(&alloc_calloc, calloc_fn, memory_order_relaxed);
    atomic_store_explicit(&alloc_free, free_fn, memory_order_relaxed);
    return OC_OK;
}

/* Callers read errno after a failure (strerror in messages, ENOMEM vs
 * other causes): set it, whatever the installed function did. */
static void *checked(void *p)
{
    if (!p) errno = ENOMEM;
    return p;
}

void *oc__malloc(size_t size)
{
    return checked(atomic_load_explicit(&alloc_malloc, memory_order_relaxed)(size));
}

void *oc__calloc(size_t count, size_t size)
{
    return checked(atomic_load_explicit(&alloc_calloc, memory_order_relaxed)(count, size));
}

void *oc__realloc(void *ptr, size_t size)
{
    void *p = atomic_load_explicit(&alloc_realloc, memory_order_relaxed)(ptr, size);
    return size ? checked(p) : p;
}

void oc__free(void *ptr)
{
    atomic_load_explicit(&alloc_free, memory_order_relaxed)(ptr);
}

char *oc__strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *d = oc__malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *oc__strdup(const char *s)
{
    return oc__strndup(s, strlen(s));
}

/* The pointer oc__malloc returned is kept just below the aligned block. */
void *oc__aligned_alloc(size_t align, size_t size)
{
    if (size > SIZE_MAX - align - sizeof(void *)) return NULL;
    char *raw = oc__malloc(size + align + sizeof(void *));
    if (!raw) return NULL;
    uintptr_t at = ((uintptr_t)(raw + sizeof(void *)) + align - 1) & ~(uintptr_t)(align - 1);
    ((void **)at)[-1] = raw;
    return (void *)at;
}

void oc__aligned_free(void *ptr)
{
    if (ptr) oc__free(((void **)ptr)[-1]);
}

char *oc__realpath(const char *path)
{
    char buf[PATH_MAX];
    if (!realpath(path, buf)) return NULL;
    char *s = oc__strdup(buf);
    if (!s) errno = ENOMEM;
    return s;
}
