/* Softmax along the last dim: exp(x - max) / sum, one block of a few rows
 * (in L1) at a time; each block's exp pass also sums its rows and takes the
 * next block's row max (the next block's reads from memory overlap this
 * block's writes), then scales it by 1 / sum, as torch's kernel does.
 * The backward: grad_x = y * (grad - sum(grad * y)) along each row. */
#include "rows.h"

/* Tiny inputs (this core's share at most SMALL_ROWS rows, the whole input at
 * most SMALL_NUMEL floats): the same math, bit for bit, with one tile call
 * instead of five and no TCM tile or row blocking. The row max is
 * oc_max_f32 (the tile layer's reduction order), negated as
 * oc_tile_unary(IDENTITY, -1, 0) does; exp and the row sums are
 * oc_tile_activation_reduce's own; then 1 / sum and the products, as
 * oc_tile_unary(RECIPROCAL) and oc_tile_binary(MUL) compute them. At
 * [2, 5] the blocked path's fixed cost was 4 times this one's. */
enum { SMALL_ROWS = 64, SMALL_NUMEL = 4096 };

static bool softmax_small(const oc_tensor *x, oc_tensor *out)
{
    int64_t d = x->ndim ? x->sizes[x->ndim - 1] : 1, lo, hi;
    if (d < 1 || oc_numel(x) > SMALL_NUMEL || !oc_is_contiguous(x) || !oc_is_contiguous(out))
        return false;
    oc_core_range(oc_numel(x) / d, 1, &lo, &hi);
    if (hi - lo > SMALL_ROWS) return false;
    if (hi <= lo) return true;
    int64_t n = hi - lo;
    float neg_max[SMALL_ROWS], sum[SMALL_ROWS];
    const float *xp = (const float *)x->data + lo * d;
    float *op = (float *)out->data + lo * d;
    for (int64_t i = 0; i < n; i++) neg_max[i] = oc_max_f32(xp + i * d, d) * -1.0f + 0.0f;
    oc_tile X = {(void *)xp, n, d, d, 1, OC_FLOAT32, false};
    oc_tile O = {op, n, d, d, 1, OC_FLOAT32, false};
    oc_tile m = {neg_max, n, 1, 1, 1, OC_FLOAT32, false}, s = {sum, n, 1, 1, 1, OC_FLOAT32, false};
    oc_tile_activation_reduce(&O, &X, OC_TILE_EXP, 1.0f, &m, &s, NULL, NULL, OC_TILE_SUM);
    for (int64_t i = 0; i < n; i++) {
        float r = 1.0f / (sum[i] * 1.0f + 0.0f);
        for (int64_t j = 0; j < d; j++) op[i * d + j] = op[i * d + j] * r;
    }
    return true;
}

oc_tensor *softmax(const oc_tensor *x)
{
    if (softmax_small(x, oc_dst_tensor())) return oc_dst_tensor();
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
