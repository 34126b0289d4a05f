/* src/engine/redzone.h — debug builds: catching writes outside an output
 * (internal).
 *
 * For an op library built with --debug, each output tensor is handed to
 * the kernel as a shadow copy with an inaccessible guard page right after
 * it (and one before), and canary bytes in the few bytes of alignment
 * slack between. A write past the end faults at once in the guard page and
 * is reported naming the op, the core and the output; a write into the
 * slack is found by the canaries when the kernel returns. The shadow is
 * copied back into the real output after a successful call. Release
 * builds skip all of it (no cost, no check: docs/engine.md, limits). */
#ifndef OPCORE_ENGINE_REDZONE_H
#define OPCORE_ENGINE_REDZONE_H

#include <stdbool.h>
#include <stddef.h>

#include "opcore/tensor.h"

typedef struct oc__redzone {
    struct oc__redzone *next;   /* the active list (for fault reports) */
    const char *op, *kernel;    /* names, for messages */
    int index;                  /* which output */
    void *data;                 /* the real output's data pointer */
    char *map;                  /* the mapping: guard page, body, guard page */
    size_t map_size;
    char *start, *end;          /* the output's bytes in the body; canaries around them */
    long long lo;               /* the tensor's extent, relative to data */
    char shape[128];            /* "float32 [8], 32 bytes" for messages */
} oc__redzone;

/* The out-of-line parts of the two calls below (redzone.c). */
oc_status oc__redzone_map(const char *op, const char *kernel, int index, oc_tensor *t, oc__redzone *rz);
oc_status oc__redzone_unmap(oc_tensor *t, oc__redzone *rz, oc_status status);

/* Swap output `index`'s data for a guarded shadow when the op's library
 * is a `debug` build (else nothing: a release build's call pays one flag
 * test). `op` and `kernel` name them in messages. */
static inline oc_status oc__redzone_begin(bool debug, const char *op, const char *kernel, int index,
                                          oc_tensor *t, oc__redzone *rz)
{
    rz->map = NULL;
    return debug ? oc__redzone_map(op, kernel, index, t, rz) : OC_OK;
}

/* Check the canaries, copy the shadow back (if the call succeeded), give
 * `t` its data back. Returns `status`, or the overrun error if the call
 * had succeeded. */
static inline oc_status oc__redzone_end(oc_tensor *t, oc__redzone *rz, oc_status status)
{
    return rz->map ? oc__redzone_unmap(t, rz, status) : status;
}

/* If `addr` lies in an active redzone, describe it ("wrote past the end of
 * output 0 (float32 [8], 32 bytes): ...") for the fault report. */
bool oc__redzone_describe(const void *addr, char *buf, size_t len);

#endif /* OPCORE_ENGINE_REDZONE_H */
