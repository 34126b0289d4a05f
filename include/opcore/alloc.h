/* opcore/alloc.h — the allocator opcore uses for its own host memory.
 *
 * Every allocation libopcore makes for itself (registry entries, call
 * records, tensors' host data, the cores' TCM, build-tool strings, the
 * profiler's events)
 * goes through four functions, the C library's by default. A host can
 * install its own, in the manner of libuv's uv_replace_allocator(): to
 * count or limit opcore's memory, or to make allocations fail in tests (every
 * failure then ends the opcore call with OC_ENOMEM and a message, and leaks
 * nothing).
 *
 * Not covered: memory other libraries allocate for opcore (the dynamic
 * loader, libffi's closures, the C library's stdio, xxHash's states), the
 * kernel stacks (mapped pages), and what op libraries allocate themselves.
 *
 * Memory opcore hands to the caller to free (oc_build_result.vec_report)
 * comes from the installed allocator: free it with the matching free.
 */
#ifndef OPCORE_ALLOC_H
#define OPCORE_ALLOC_H

#include <stddef.h>

#include "opcore/export.h"
#include "opcore/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void *(*oc_malloc_fn)(size_t size);
typedef void *(*oc_realloc_fn)(void *ptr, size_t size);
typedef void *(*oc_calloc_fn)(size_t count, size_t size);
typedef void (*oc_free_fn)(void *ptr);

/* Install the four functions opcore allocates with; they must behave like
 * the C library's (malloc(0) may return NULL or a unique pointer; free(NULL)
 * does nothing) and be safe to call from any thread. Call it before any
 * other opcore call, or after everything opcore allocated has been released
 * (oc_engine_shutdown, every library unloaded): memory allocated by one
 * allocator must not reach another's free. Returns OC_EINVAL (changing
 * nothing) if any function is NULL.
 * oc_replace_allocator(malloc, realloc, calloc, free) restores the default. */
OC_API oc_status oc_replace_allocator(oc_malloc_fn malloc_fn, oc_realloc_fn realloc_fn, oc_calloc_fn calloc_fn,
                               oc_free_fn free_fn);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_ALLOC_H */
