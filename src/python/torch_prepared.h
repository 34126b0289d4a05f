/* src/python/torch_prepared.h — prepared calls for torch's native kernels
 * (torch_native.c): an op called again with the same argument metadata
 * runs through an oc_call (host.h: oc_call_prepare / oc_call_run) instead
 * of binding its arguments, asking its shape function and checking its
 * results once more, as opcore.jax does per XLA call site.
 *
 * The key of a call is what the prepared call was bound for: each Tensor
 * argument's dtype (torch's code), dims, sizes and strides as the shim read
 * them, and each int, float, bool and dtype argument's value. Ops with any
 * other kind of argument (optional, list, str) have no prepared calls, nor
 * do calls on the stable C ABI's route (no views), calls while the profiler
 * records, ops of --debug libraries, and any call under OC_INFER_MEMO=0:
 * the same rules as the shape function's memo (src/host/infer_memo.c),
 * whose answers these are. In-place ops (Tensor(a!)) have them too: each
 * run still checks that what it writes meets nothing else it reads or
 * writes (oc_call_run), and torch's version counters are bumped as on the
 * usual path.
 *
 * Each op keeps one prepared call. It is made when two calls in a row that
 * missed it had one key (a loop over one shape prepares on its second
 * call; alternating shapes never pay for preparing), and a call takes it
 * for itself while it runs (threads calling the op at once take the usual
 * path meanwhile). */
#ifndef OPCORE_PY_TORCH_PREPARED_H
#define OPCORE_PY_TORCH_PREPARED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <opcore/host.h>

#include "torch_native.h"

/* int64s in a key: enough for 16 tensors of 8 dims; longer keys: no prepared call. */
#define OCPY_PREPARED_KEY_MAX 296

typedef struct ocpy_prepared {
    oc_call *call;
    oc_tensor metas[OC_MAX_RESULTS]; /* the results to allocate (dtype, sizes) */
    int nkey;
    int64_t key[OCPY_PREPARED_KEY_MAX];
} ocpy_prepared;

/* One op's prepared call, and the key of its last miss. */
typedef struct ocpy_prepared_site {
    bool eligible;                 /* the op's arguments and results allow one (see above) */
    int nargs;
    bool tensor[OCPY_TORCH_MAX_ARGS]; /* per argument: a Tensor (else a scalar), read per call */
    _Atomic(ocpy_prepared *) ready; /* NULL: none, or taken by a running call */
    pthread_mutex_t lock;          /* guards `missed` */
    ocpy_prepared *missed;         /* the last miss's key (call NULL) */
} ocpy_prepared_site;

/* Set up a site for `op` (eligible or not); ocpy_prepared_site_clear frees
 * what it holds. */
void ocpy_prepared_site_init(ocpy_prepared_site *s, const oc_op *op);
void ocpy_prepared_site_clear(ocpy_prepared_site *s);

/* This call's key into key[]: its length, or -1 when the call cannot use a
 * prepared call (an argument the shim did not read, a key too long, the
 * profiler recording). `stack`: the arguments' StableIValues, `views`: the
 * shim's tensor views. */
int ocpy_prepared_key(const ocpy_prepared_site *s, const uint64_t *stack, const ocpy_torch_view *views,
                      int64_t *key);

/* The site's prepared call if it was made for `key`, taken for this call
 * (give it back with ocpy_prepared_put); else NULL. */
ocpy_prepared *ocpy_prepared_take(ocpy_prepared_site *s, const int64_t *key, int nkey);
void ocpy_prepared_put(ocpy_prepared_site *s, ocpy_prepared *p);

/* After a call that missed and succeeded: remember its key, and when the
 * last miss had the same one, prepare a call for it (`args`: the call's
 * arguments, `outs`: its results) and make it the site's. */
void ocpy_prepared_learn(ocpy_prepared_site *s, const oc_op *op, const int64_t *key, int nkey,
                         const oc_value *args, const oc_tensor *outs);

/* How many prepared calls were made in this process. */
uint64_t ocpy_prepared_made(void);

#endif /* OPCORE_PY_TORCH_PREPARED_H */
