/* src/engine/pool.h — multicore launches (internal). */
#ifndef OPCORE_ENGINE_POOL_H
#define OPCORE_ENGINE_POOL_H

#include "engine/core.h"

/* Start the worker threads if they are not running. */
oc_status oc__pool_start(void);

/* Run every share of `job` (one per core in the pool) through
 * job->run_share, the caller taking part; returns when all are done. A job
 * whose tensors (job->bytes_in plus its results) are too small to split
 * runs as one share on the caller. A
 * failing share records itself in job->failure; the first failure wins. */
oc_status oc__pool_launch(oc_core *caller, oc_exec *job);

/* Collectives for the running share of `core` (kernel/collective.c's
 * engine side): wait for every share at a barrier; reduce one 8-byte value
 * per share: *out = combine over shares 0, 1, ... in order (the first
 * share's value is copied, then combine(out, value) for each next one).
 * Fail the calling kernel when another share failed or returned instead. */
typedef void (*oc_combine_fn)(void *acc, const void *value);
void oc__pool_barrier(oc_core *core);
void oc__pool_allreduce(oc_core *core, const void *mine, oc_combine_fn combine, void *out);

/* Publish one pointer per share and wait for all: the returned array holds
 * every share's, in share order, until the calling share's next barrier. */
void *const *oc__pool_publish(oc_core *core, void *mine);

#endif /* OPCORE_ENGINE_POOL_H */
