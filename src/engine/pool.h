/* src/engine/pool.h — multicore launches (internal). */
#ifndef OPCORE_ENGINE_POOL_H
#define OPCORE_ENGINE_POOL_H

#include "engine/core.h"

/* Start the worker threads if they are not running. */
oc_status oc__pool_start(void);

/* Run `job` on every core, the caller as core 0. On OC_OK the launch lock
 * is held: read each core's result from (*cores)[0..n-1], then call
 * oc__pool_finish(). */
oc_status oc__pool_launch(oc_core *caller, oc_exec *job, oc_core ***cores, uint32_t *n);
void oc__pool_finish(void);

/* Run core `id`'s share of a job (defined by the call path). */
void oc__pool_run_share(oc_core *core, oc_exec *job, uint32_t id);

#endif /* OPCORE_ENGINE_POOL_H */
