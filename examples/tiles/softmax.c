/* Softmax along the last dim: exp(x - max) / sum, each core's rows by
 * oc_tile_softmax (the row max, exp with its sum, 1 / sum, a product: the
 * blocked composition's bits; see opcore/tile.h).
 * The backward: grad_x = y * (grad - sum(grad * y)) along each row. */
#include "rows.h"

/* Tiny inputs (the whole input at most SMALL_NUMEL floats, in L1 with its
 * result): this core's rows straight from the tensors by oc_tile_softmax,
 * without the row blocking's plan: the fixed cost of a call on [2, 5] ..
 * [8, 64]. */
enum { SMALL_NUMEL = 4096 };

static bool softmax_small(const oc_tensor *x, oc_tensor *out)
{
    int64_t d = x->ndim ? x->sizes[x->ndim - 1] : 1, lo, hi;
    if (d < 1 || oc_numel(x) > SMALL_NUMEL || !oc_is_contiguous(x) || !oc_is_contiguous(out))
        return false;
    oc_core_range(oc_numel(x) / d, 1, &lo, &hi);
    if (hi <= lo) return true;
    oc_tile X = {(float *)x->data + lo * d, hi - lo, d, d, 1, OC_FLOAT32, false};
    oc_tile O = {(float *)out->data + lo * d, hi - lo, d, d, 1, OC_FLOAT32, false};
    oc_tile_softmax(&O, &X);
    return true;
}

oc_tensor *softmax(const oc_tensor *x)
{
    if (softmax_small(x, oc_dst_tensor())) return oc_dst_tensor();
    oc_tensor xv = rows_view(x), ov = rows_view(oc_dst_tensor());
    rows_plan p = rows_split(x, 2);
    oc_tile X = oc_tile_of_tensor(&xv, 0), O = oc_tile_of_tensor(&ov, 0);
    /* this core's rows, in place in the tensors: oc_tile_softmax walks them a
     * row at a time (one pass of memory each way, the next row read while
     * this one is written) */
    oc_tile xt = oc_tile_view(&X, p.lo, 0, p.hi - p.lo, p.d);
    oc_tile ot = oc_tile_view(&O, p.lo, 0, p.hi - p.lo, p.d);
    oc_tile_softmax(&ot, &xt);
    return oc_dst_tensor();
}

oc_tensor *softmax_backward(const oc_tensor *grad, const oc_tensor *result)
{
    OC_CHECK(oc_is_contiguous(grad), "grad must be contiguous");
    oc_tensor gv = rows_view(grad), yv = rows_view(result), ov = rows_view(oc_dst_tensor());
    rows_plan p = rows_split(result, 2);
    oc_tile G = oc_tile_of_tensor(&gv, 0), Y = oc_tile_of_tensor(&yv, 0);
    oc_tile O = oc_tile_of_tensor(&ov, 0);
    oc_tile t = oc_tile_alloc(p.rb, p.d, OC_FLOAT32), s = oc_tile_alloc(p.rb, 1, OC_FLOAT32);
    for (int64_t r = p.lo, n; r < p.hi; r += n) {
        n = rows_at(&p, r);
        oc_tile g = oc_tile_view(&G, r, 0, n, p.d), y = oc_tile_view(&Y, r, 0, n, p.d);
        oc_tile o = oc_tile_view(&O, r, 0, n, p.d), tt = oc_tile_view(&t, 0, 0, n, p.d);
        oc_tile st = oc_tile_view(&s, 0, 0, n, 1);
        oc_tile_binary(&tt, &g, &y, OC_TILE_MUL);
        oc_tile_reduce_rows(&st, &tt, OC_TILE_SUM);
        oc_tile_binary(&o, &g, &st, OC_TILE_SUB);
        oc_tile_binary(&o, &o, &y, OC_TILE_MUL);
    }
    return oc_dst_tensor();
}
