/* src/profiler/hooks.h — what the runtime tells the profiler (internal).
 *
 * The runtime calls these at each event; when no profile is active the
 * only cost is one relaxed atomic load (oc__prof_on()), or nothing at all
 * with -DOC_PROFILER_COMPILED_OUT (see below). Timestamps are
 * oc__prof_now(): nanoseconds of CLOCK_MONOTONIC.
 *
 * Name strings passed in are only valid during the call: the profiler
 * copies (interns) what it keeps.
 */
#ifndef OPCORE_PROFILER_HOOKS_H
#define OPCORE_PROFILER_HOOKS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum oc_prof_kind {
    OC_PROF_KERNEL = 0,   /* a kernel running on one engine core */
    OC_PROF_CALL = 1,     /* a host call of an op (whole call) */
    OC_PROF_SHAPE = 2,    /* shape inference inside a call */
    OC_PROF_ALLOC = 3,    /* output allocation inside a call */
    OC_PROF_DISPATCH = 4, /* handing the kernel to the cores */
    OC_PROF_WAIT = 5,     /* waiting for the other cores */
    OC_PROF_BUILD = 6,    /* an op library build */
    OC_PROF_BLOCK = 7,    /* a named block (user scope) */
    OC_PROF_STEP = 8,     /* a step marker (instant) */
    OC_PROF_EXTERNAL = 9  /* a span imported from another profiler (oc_profiler_import) */
} oc_prof_kind;

/* Per-kernel counters, kept by each core while its kernel runs. */
typedef struct oc_prof_counters {
    uint64_t bytes_in;     /* bytes of the op's input tensors (this core's share) */
    uint64_t bytes_out;    /* bytes of the output (this core's share) */
    uint64_t tcm_bytes;    /* bytes moved by tensor_to_tcm / tcm_to_tensor */
    uint64_t stream_bytes; /* bytes moved by streaming accessors */
    uint64_t program;      /* a grid instance: oc__prof_program(...); 0 outside a grid launch */
} oc_prof_counters;

/* A grid instance's program id, packed for oc_prof_counters.program: the
 * axes (1 to 3) in bits 60-61, each coordinate in 20 bits (axis 0 highest;
 * coordinates past 2^20 - 1 are shown as that). */
static inline uint64_t oc__prof_program(int ndim, const int64_t *p)
{
    uint64_t v = (uint64_t)ndim << 60;
    for (int a = 0; a < 3; a++) {
        uint64_t x = a < ndim ? (uint64_t)(p[a] < 0xFFFFF ? p[a] : 0xFFFFF) : 0;
        v |= x << (40 - 20 * a);
    }
    return v;
}

extern atomic_int oc__prof_active;

/* -DOC_PROFILER_COMPILED_OUT builds a libopcore whose runtime never asks
 * the profiler anything (the hooks fold away): the baseline of the
 * "profiler off costs nothing" benchmark (bench/profiler_bench.py). Such a
 * library records nothing. */
#ifdef OC_PROFILER_COMPILED_OUT
static inline bool oc__prof_on(void)
{
    return false;
}
#else
static inline bool oc__prof_on(void)
{
    /* unlikely: keeps the recording code out of the runtime's hot path */
    return __builtin_expect(atomic_load_explicit(&oc__prof_active, memory_order_relaxed) != 0, 0);
}
#endif

uint64_t oc__prof_now(void);

/* Tests only: oc__prof_now() answers `ns` until called again (0: the real
 * clock again), so a test moves time on by setting it instead of sleeping
 * and its result holds at any machine speed or load. */
void oc__prof_set_clock(uint64_t ns);

/* A kernel ran on engine core `core` of `ncores` from t0 to t1 (ns). Called
 * on the core's own thread right after the kernel. */
void oc__prof_kernel(const char *op, uint32_t core, uint32_t ncores, uint64_t t0, uint64_t t1,
                     const oc_prof_counters *counters);

/* A host-side span on the calling thread (CALL, SHAPE, ALLOC, DISPATCH,
 * WAIT, BUILD, BLOCK). */
void oc__prof_host(oc_prof_kind kind, const char *name, uint64_t t0, uint64_t t1);

#endif /* OPCORE_PROFILER_HOOKS_H */
