/* src/kernel/kernel_internal.h — shared by the accessors, the iterator and
 * broadcasting (internal; src/ops may use it: ops sit above kernel). */
#ifndef OPCORE_KERNEL_INTERNAL_H
#define OPCORE_KERNEL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/core.h"
#include "opcore/tensor.h"

/* Copy `n` elements starting at flattened index `start` between tensor `t`
 * and the dense buffer `buf` (to_tensor: buf -> t). Any strides. */
void oc__flat_copy(const oc_tensor *t, int64_t start, int64_t n, void *buf, bool to_tensor);

/* Memory extent [lo, hi) the tensor's elements occupy. */
void oc__tensor_extent(const oc_tensor *t, const char **lo, const char **hi);

/* Check a new access to `t` against the core's open streams, applying the
 * tensor's coherence policy; `write` if the access writes; `what` names it. */
void oc__coherence_check(oc_core *core, const oc_tensor *t, bool write, const void *self,
                         const char *what);

/* oc_iter_init flag for opcore's own ops (src/ops): they never checked
 * coherence against open streams, and keep not doing so. */
#define OC__ITER_NO_COHERENCE (1u << 31)

/* Part `id` of `count` near-equal parts of [0, n), in multiples of `align`
 * (except the last): oc_core_range and oc_iter_part (context.c). */
void oc__split_range(int64_t n, int64_t align, int64_t id, int64_t count, int64_t *lo, int64_t *hi);

/* The broadcast shape of n tensors (NULL ones skipped); `fn` names the
 * caller in the message when two shapes do not broadcast (broadcast.c). */
oc_status oc__broadcast_shape(const char *fn, int n, const oc_tensor *const *tensors, int *ndim,
                              int64_t *sizes);

#endif /* OPCORE_KERNEL_INTERNAL_H */
