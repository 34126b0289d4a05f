/* opcore/engine.h — the engine: the machine's CPU cores as a pool of cores.
 *
 * The pool has one core per CPU the process may run on (its affinity mask),
 * or OC_NUM_CORES if that environment variable is set. Core 0 is the thread
 * that calls the op; cores 1.. are persistent worker threads that spin
 * briefly, then sleep, waiting for work, so launching a multicore op costs
 * microseconds. Each core owns a TCM arena (OC_TCM_SIZE bytes; by default
 * the core's L2 cache, at least 1 MiB) and a kernel stack with a guard
 * page below it.
 *
 * The engine starts on first use; nothing here needs calling unless you
 * want to size it yourself or tear it down (e.g. before a leak check).
 */
#ifndef OPCORE_ENGINE_H
#define OPCORE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Size the pool before it starts: `num_cores` (0: default) and `tcm_bytes`
 * per core (0: default). OC_EINVAL once the engine has started. */
OC_API oc_status oc_engine_configure(uint32_t num_cores, size_t tcm_bytes);

/* Cores in the pool (starts the engine). */
OC_API uint32_t oc_engine_num_cores(void);

/* TCM bytes per core. */
OC_API size_t oc_engine_tcm_size(void);

/* Multicore launches whose tensors (inputs and results together) take
 * fewer than `bytes` run as one share on the calling thread, with
 * oc_cpu_count() == 1: waking the pool costs microseconds, more than small
 * work is worth. Default 64 KiB, or $OC_MIN_SPLIT_BYTES; 0 splits every
 * launch. May be called at any time; applies to the next launch. */
OC_API void oc_engine_set_min_split_bytes(size_t bytes);

/* The current threshold (starts the engine). */
OC_API size_t oc_engine_min_split_bytes(void);

/* Threads a host framework lends to the multicore launches of the calling
 * thread: run(work, n) calls work() on up to n of its threads at once (the
 * caller's among them), returns when every call has returned, and returns
 * true; or returns false at once to decline (the engine's own workers then
 * run the launch). work() claims shares of the launch until none are left,
 * each on the thread's own core, so the shares' ids, oc_cpu_count() and
 * oc_barrier are what they always are: the engine's workers are woken for
 * any share left unclaimed. PyTorch's integration lends torch's intra-op
 * pool, whose threads spin for a while after each parallel region: waking
 * opcore's workers onto those cores would make them fight. A launch whose
 * run() returned over 0.5 ms after its last share finished (the host's join
 * waited for a descheduled thread) stops the engine asking for 1 s.
 * NULL: none. */
typedef void (*oc_engine_work_fn)(void);
typedef bool (*oc_engine_helpers_fn)(oc_engine_work_fn work, uint32_t n);
OC_API void oc_engine_set_thread_helpers(oc_engine_helpers_fn run);

/* Default kernel stack size for ops built without --stack-size. */
#define OC_DEFAULT_STACK_SIZE ((size_t)256 * 1024)
/* The largest kernel stack the engine maps (each core maps its own, so a
 * multicore op needs this much per core): `opcore build --stack-size` and
 * an op's stack_size option beyond it are refused, never built into an op
 * whose calls cannot get their stack. */
#define OC_MAX_STACK_SIZE ((size_t)1 << 30)

/* Stop the worker threads and free the engine's memory. The engine starts
 * again on the next call. No call may be running. */
OC_API void oc_engine_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_ENGINE_H */
