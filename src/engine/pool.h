/* src/engine/pool.h — multicore launches (internal). */
#ifndef OPCORE_ENGINE_POOL_H
#define OPCORE_ENGINE_POOL_H

#include "engine/core.h"

/* Start the worker threads if they are not running. */
oc_status oc__pool_start(void);

/* Run every share of `job` (one per core in the pool), the caller taking
 * part; returns when all are done. A failing share records itself in the
 * job (oc__exec_fail); the first failure wins. */
oc_status oc__pool_launch(oc_core *caller, oc_exec *job);

/* Run share `id` of a job on `core` (defined by the call path). */
void oc__pool_run_share(oc_core *core, oc_exec *job, uint32_t id);

#endif /* OPCORE_ENGINE_POOL_H */
