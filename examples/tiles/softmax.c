/* Softmax along the last dim: exp(x - max) / sum, one block of a few rows
 * (in L1) at a time; each block's exp pass also sums its rows and takes the
 * next block's row max (the next block's reads from memory overlap this
 * block's writes), then scales it by 1 / sum, as torch's kernel does.
 * The backward: grad_x = y * (grad - sum(grad * y)) along each row. */
#include "rows.h"

oc_tensor *softmax(const oc_tensor *x)
{
    oc_tensor xv = rows_view(x), ov = rows_view(oc_dst_tensor());
    rows_plan p = rows_split(x, 2);
    /* in L1 at once: a block, its output, and the next block (each pass then
     * reads and writes L1: blocks sized to L2 ran 10% slower at [4096, 8192]) */
    int64_t l1 = (int64_t)oc_tile_l1_bytes() / (3 * p.d * 4);
    p.rb = l1 < 1 ? 1 : l1 < p.rb ? l1 : p.rb;
    oc_tile X = oc_tile_of_tensor(&xv, 0), O = oc_tile_of_tensor(&ov, 0);
    /* the row sums and two blocks' row maxes: the columns of one tile (its
     * rows are padded to 64 bytes anyway; one allocation instead of three) */
    oc_tile sm = oc_tile_alloc(p.rb, 3, OC_FLOAT32), s = oc_tile_col(&sm, 0);
    oc_tile m[2] = {oc_tile_col(&sm, 1), oc_tile_col(&sm, 2)};
    for (int64_t r = p.lo, n = p.rb, k = 0; r < p.hi; r += n, k ^= 1) {
        n = rows_at(&p, r);
        oc_tile xt = oc_tile_view(&X, r, 0, n, p.d), ot = oc_tile_view(&O, r, 0, n, p.d);
        oc_tile st = oc_tile_view(&s, 0, 0, n, 1), mt = oc_tile_view(&m[k], 0, 0, n, 1);
        if (r == p.lo) oc_tile_reduce_rows(&mt, &xt, OC_TILE_RMAX); /* later blocks': with the block before */
        oc_tile_unary(&mt, &mt, OC_TILE_IDENTITY, -1.0f, 0.0f);
        int64_t r2 = r + n, n2 = rows_at(&p, r2); /* the next block, and its max */
        oc_tile nx = n2 ? oc_tile_view(&X, r2, 0, n2, p.d) : xt, nm = n2 ? oc_tile_view(&m[k ^ 1], 0, 0, n2, 1) : mt;
        oc_tile_activation_reduce(&ot, &xt, OC_TILE_EXP, 1.0f, &mt, &st, &nm, n2 ? &nx : NULL, OC_TILE_RMAX);
        oc_tile_unary(&st, &st, OC_TILE_RECIPROCAL, 1.0f, 0.0f); /* one division a row, */
        oc_tile_binary(&ot, &ot, &st, OC_TILE_MUL);                /* a product an element */
    }
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
