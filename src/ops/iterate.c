/* src/ops/iterate.c — walking tensors of any layout, row by row.
 *
 * The walk coalesces dims first so the common cases cost nothing: a set of
 * contiguous tensors is one row of numel elements, and a transposed or
 * sliced view is a few long rows rather than numel single elements.
 */
#include "ops/ops_internal.h"

#define OC__MAX_OPERANDS 3

typedef struct oc__walk {
    int nt, nd;                                   /* operands, coalesced dims */
    int64_t size[OC_MAX_DIMS];                    /* coalesced sizes */
    int64_t step[OC__MAX_OPERANDS][OC_MAX_DIMS];  /* byte steps per operand */
    int64_t inner[OC__MAX_OPERANDS];              /* innermost step, elements */
} oc__walk;

/* Build the coalesced description; returns false if there are no elements. */
static bool oc__walk_init(oc__walk *w, int nt, const oc_tensor *const *ts)
{
    const oc_tensor *t0 = ts[0];
    int nd = 0;
    w->nt = nt;
    for (int d = 0; d < t0->ndim; d++) {
        int64_t n = t0->sizes[d];
        if (n == 0)
            return false;
        if (n == 1) /* a size-1 dim never moves the pointers */
            continue;
        /* merge with the previous kept dim when d continues it in all operands */
        bool merge = nd > 0;
        for (int k = 0; k < nt && merge; k++)
            merge = w->step[k][nd - 1] == ts[k]->strides[d] * n;
        if (merge) {
            w->size[nd - 1] *= n;
            for (int k = 0; k < nt; k++)
                w->step[k][nd - 1] = ts[k]->strides[d];
            continue;
        }
        w->size[nd] = n;
        for (int k = 0; k < nt; k++)
            w->step[k][nd] = ts[k]->strides[d];
        nd++;
    }
    if (nd == 0) { /* a scalar or all dims of size 1: one element */
        w->size[0] = 1;
        for (int k = 0; k < nt; k++)
            w->step[k][0] = 1;
        nd = 1;
    }
    w->nd = nd;
    for (int k = 0; k < OC__MAX_OPERANDS; k++)
        w->inner[k] = k < nt ? w->step[k][nd - 1] : 1;
    /* element steps -> byte steps for the outer dims */
    for (int k = 0; k < nt; k++) {
        int64_t es = (int64_t)oc_dtype_size(ts[k]->dtype);
        for (int d = 0; d < nd; d++)
            w->step[k][d] *= es;
    }
    return true;
}

void oc__foreach_row(int nt, const oc_tensor *const *ts, oc__row_fn fn, const oc__params *prm)
{
    oc__walk w;
    if (!oc__walk_init(&w, nt, ts))
        return;
    char *p[OC__MAX_OPERANDS] = {NULL, NULL, NULL};
    for (int k = 0; k < nt; k++)
        p[k] = (char *)ts[k]->data;
    int64_t idx[OC_MAX_DIMS] = {0};
    const int outer = w.nd - 1;
    const int64_t rowlen = w.size[outer];
    for (;;) {
        fn(rowlen, p, w.inner, prm);
        /* odometer over the outer dims, innermost first */
        int d = outer - 1;
        for (; d >= 0; d--) {
            for (int k = 0; k < nt; k++)
                p[k] += w.step[k][d];
            if (++idx[d] < w.size[d])
                break;
            for (int k = 0; k < nt; k++)
                p[k] -= w.step[k][d] * w.size[d];
            idx[d] = 0;
        }
        if (d < 0)
            return;
    }
}

/* ---- oc__for_each: the per-element callback form (slow path) ------------ */

typedef struct oc__each_ctx {
    oc__elem_fn fn;
    void *ctx;
    int64_t esize, next;
} oc__each_ctx;

static void oc__each_row(int64_t n, char *const *p, const int64_t *s, const oc__params *prm)
{
    oc__each_ctx *c = (oc__each_ctx *)prm->ctx;
    for (int64_t i = 0; i < n; i++)
        c->fn(p[0] + i * s[0] * c->esize, c->next++, c->ctx);
}

void oc__for_each(const oc_tensor *t, oc__elem_fn fn, void *ctx)
{
    oc__each_ctx c = {fn, ctx, (int64_t)oc_dtype_size(t->dtype), 0};
    oc__params prm = {0, 0, &c};
    oc__foreach_row(1, &t, oc__each_row, &prm);
}
