/* src/kernel/broadcast.c — NumPy broadcasting of shapes, for shape functions
 * (oc_empty_broadcast) and for the iterator (opcore/iter.h).
 *
 * One implementation, so a shape function and its kernel can never
 * disagree about the output's shape; failures name both shapes and the dim
 * because "do not broadcast" alone leaves the author counting dims.
 */
#include <stdio.h>

#include "core/internal.h"
#include "kernel/kernel_internal.h"
#include "opcore/tensor_ops.h"

oc_status oc__broadcast_shape(const char *fn, int n, const oc_tensor *const *tensors, int *ndim,
                              int64_t *sizes)
{
    int nd = 0;
    int owner[OC_MAX_DIMS]; /* which tensor set each dim of the result (-1: none yet) */
    *ndim = 0;
    if (n < 0 || (n > 0 && !tensors)) {
        oc__raise(OC_EINVAL, "%s: %d tensors given (expected a count >= 0 and an array)", fn, n);
        return OC_EINVAL;
    }
    for (int d = 0; d < OC_MAX_DIMS; d++) sizes[d] = 1, owner[d] = -1;
    for (int k = 0; k < n; k++) {
        const oc_tensor *t = tensors[k];
        if (!t) continue; /* an optional tensor that is None */
        if (t->ndim < 0 || t->ndim > OC_MAX_DIMS) {
            oc__raise(OC_EINVAL, "%s: tensor %d has %d dims, expected 0..%d", fn, k, (int)t->ndim,
                      OC_MAX_DIMS);
            return OC_EINVAL;
        }
        /* right-align t's dims with the result's: grow the result first */
        if (t->ndim > nd) {
            int shift = t->ndim - nd;
            for (int d = nd - 1; d >= 0; d--) sizes[d + shift] = sizes[d], owner[d + shift] = owner[d];
            for (int d = 0; d < shift; d++) sizes[d] = 1, owner[d] = -1;
            nd = t->ndim;
        }
        for (int d = 0; d < t->ndim; d++) {
            int r = d + nd - t->ndim;
            int64_t s = t->sizes[d];
            if (s == sizes[r] || s == 1) continue;
            if (sizes[r] == 1) {
                sizes[r] = s;
                owner[r] = k;
                continue;
            }
            char a[400], b[400];
            const oc_tensor *o = tensors[owner[r]];
            oc__raise(OC_EINVAL,
                      "%s: tensor %d of shape %s and tensor %d of shape %s do not broadcast: dim %d "
                      "is %lld vs %lld (sizes must be equal, or 1 to repeat)",
                      fn, owner[r], oc_shape_str(o, a, sizeof a), k, oc_shape_str(t, b, sizeof b),
                      r - nd, (long long)sizes[r], (long long)s);
            return OC_EINVAL;
        }
    }
    *ndim = nd;
    return OC_OK;
}

oc_status oc_broadcast_shape(int n, const oc_tensor *const *tensors, int *ndim, int64_t *sizes)
{
    if (!ndim || !sizes) {
        oc__raise(OC_EINVAL, "oc_broadcast_shape: arguments 'ndim' and 'sizes' are required");
        return OC_EINVAL;
    }
    return oc__broadcast_shape("oc_broadcast_shape", n, tensors, ndim, sizes);
}

oc_tensor *oc_empty_broadcast(oc_dtype dtype, int n, const oc_tensor *const *tensors)
{
    int nd;
    int64_t sizes[OC_MAX_DIMS];
    if (!oc_dtype_is_valid(dtype)) {
        oc__raise(OC_EINVAL, "oc_empty_broadcast: argument 'dtype' is %d, expected a valid oc_dtype",
                  (int)dtype);
        return NULL;
    }
    if (oc__broadcast_shape("oc_empty_broadcast", n, tensors, &nd, sizes) != OC_OK) return NULL;
    return oc__tensor_new(dtype, nd, sizes);
}
