/* src/core/alloc.h — the allocator every host allocation in libopcore goes
 * through (opcore/alloc.h installs it). Same contracts as the C library's
 * functions; a NULL result (errno ENOMEM) must be handled as out of memory
 * (OC_ENOMEM).
 * Memory that another library allocates (realpath(p, NULL), scandir,
 * vasprintf, ...) is released with the C library's free, never oc__free. */
#ifndef OPCORE_CORE_ALLOC_H
#define OPCORE_CORE_ALLOC_H

#include <stddef.h>

void *oc__malloc(size_t size);
void *oc__calloc(size_t count, size_t size);
void *oc__realloc(void *ptr, size_t size);
void oc__free(void *ptr);
char *oc__strdup(const char *s);
char *oc__strndup(const char *s, size_t n);

/* `size` bytes aligned to `align` (a power of two, at most 4096), from
 * oc__malloc; released only with oc__aligned_free. */
void *oc__aligned_alloc(size_t align, size_t size);
void oc__aligned_free(void *ptr);

/* realpath(path, NULL), allocated with oc__malloc. NULL with errno set
 * (ENOMEM when allocating failed). */
char *oc__realpath(const char *path);

#endif /* OPCORE_CORE_ALLOC_H */
