/* src/ops/iterate.c — walking tensors of any layout, row by row.
 *
 * The ops run on the public iterator (opcore/iter.h): it coalesces dims so
 * a set of contiguous tensors is one row of numel elements, and a
 * transposed or sliced view is a few long rows (tiled so the transposed
 * operand stays in cache) rather than numel single elements.
 */
#include "kernel/kernel_internal.h"
#include "opcore/iter.h"
#include "ops/ops_internal.h"

#define OC__MAX_OPERANDS 3

void oc__foreach_row(int nt, const oc_tensor *const *ts, oc__row_fn fn, const oc__params *prm)
{
    /* The ops write every element once; fill and copy into an expanded view
     * (stride 0) stay allowed, as before the iterator existed. */
    oc_iter it;
    if (oc_iter_init(&it, 1, nt, ts, OC_ITER_ALLOW_OVERLAP | OC__ITER_NO_COHERENCE) != OC_OK) return;
    int64_t s[OC__MAX_OPERANDS] = {1, 1, 1};
    for (int k = 0; k < nt; k++) s[k] = it.stride[k];
    char *p[OC__MAX_OPERANDS] = {NULL, NULL, NULL};
    while (oc_iter_next(&it)) {
        for (int k = 0; k < nt; k++) p[k] = it.ptr[k];
        fn(it.len, p, s, prm);
    }
}

/* ---- oc__for_each: the per-element callback form (slow path) ------------ */

void oc__for_each(const oc_tensor *t, oc__elem_fn fn, void *ctx)
{
    /* row-major: the callback receives each element's flattened index */
    oc_iter it;
    if (oc_iter_init(&it, 0, 1, &t, OC_ITER_ROW_MAJOR | OC__ITER_NO_COHERENCE) != OC_OK) return;
    const int64_t step = it.stride[0] * (int64_t)oc_dtype_size(t->dtype);
    while (oc_iter_next(&it))
        for (int64_t i = 0; i < it.len; i++) fn((char *)it.ptr[0] + i * step, it.pos + i, ctx);
}
