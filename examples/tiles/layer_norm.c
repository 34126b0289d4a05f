/* Layer norm over the last dim, forward (out, mean, rstd) and backward
 * (grad_x by row blocks; grad_w and grad_b by column chunks over all rows
 * in a fixed order, so every core count gives the same bits). */
#include "rows.h"

void layer_norm(const oc_tensor *x, const oc_tensor *w, const oc_tensor *b, double eps)
{
    oc_tensor xv = rows_view(x), ov = rows_view(oc_dst_tensor_at(0));
    oc_tensor mv = flat_view(oc_dst_tensor_at(1)), rv = flat_view(oc_dst_tensor_at(2));
    rows_plan p = rows_split(x, 2);
    p.rb = (p.rb + 1) / 2; /* in L2 at once: a block, its output, and the next block */
    /* x from memory (this core's rows larger than L2): blocks of a sixteenth of L2 (4 rows
     * of 8192 floats in 2 MiB), which stay in L2 while fresh output pages are zeroed through
     * it (half the L2 ran 0.80x a copy of the same bytes at [4096, 8192], this 0.89x) */
    int64_t l2 = (int64_t)oc_tile_l2_bytes(), l2rows = l2 / 16 / (p.d * 4);
    if ((p.hi - p.lo) * p.d * 4 > l2) p.rb = l2rows < 1 ? 1 : l2rows < p.rb ? l2rows : p.rb;
    oc_tile X = oc_tile_of_tensor(&xv, 0), O = oc_tile_of_tensor(&ov, 0);
    oc_tile Mr = oc_tile_of_tensor(&mv, 0), Rr = oc_tile_of_tensor(&rv, 0);
    oc_tile M = oc_tile_t(&Mr), R = oc_tile_t(&Rr); /* mean and rstd in place, as [rows, 1] */
    oc_tile tw = vec_tile(w, p.d), tb = vec_tile(b, p.d);
    for (int64_t r = p.lo, n = p.rb; r < p.hi; r += n) {
        n = rows_at(&p, r);
        oc_tile xt = oc_tile_view(&X, r, 0, n, p.d), ot = oc_tile_view(&O, r, 0, n, p.d);
        oc_tile m = oc_tile_view(&M, r, 0, n, 1), s = oc_tile_view(&R, r, 0, n, 1);
        if (r == p.lo) oc_tile_moments(&m, &s, &xt); /* later blocks': with the block before */
        oc_tile_unary(&s, &s, OC_TILE_RSQRT, 1.0f, (float)eps); /* variance -> rstd */
        int64_t r2 = r + n, n2 = rows_at(&p, r2);
        if (n2 == 0) { oc_tile_normalize(&ot, &xt, &m, &s, &tw, &tb); break; }
        oc_tile nx = oc_tile_view(&X, r2, 0, n2, p.d), nm = oc_tile_view(&M, r2, 0, n2, 1), nv = oc_tile_view(&R, r2, 0, n2, 1);
        oc_tile_normalize_ahead(&ot, &xt, &m, &s, &tw, &tb, &nm, &nv, &nx); /* next block's reads overlap these writes */
    }
}

/* xh = (x - mean) * rstd for a window; mean and rstd come as [1, rows]. */
static void normalise(oc_tile *xh, const oc_tensor *xv, const oc_tensor *mv, const oc_tensor *rv, int64_t r,
                      int64_t c, oc_tile *row)
{
    oc_tile_load(xh, xv, 0, r, c, 0.0f);
    oc_tile col = oc_tile_t(row);
    oc_tile_load(row, mv, 0, 0, r, 0.0f);
    oc_tile_binary(xh, xh, &col, OC_TILE_SUB);
    oc_tile_load(row, rv, 0, 0, r, 0.0f);
    oc_tile_binary(xh, xh, &col, OC_TILE_MUL);
}

#define CB 8    /* rows per block of the column pass (fixed: the sum order) */
#define CW 2048 /* columns per chunk */

void layer_norm_backward(const oc_tensor *grad_out, const oc_tensor *x, const oc_tensor *mean,
                         const oc_tensor *rstd, const oc_tensor *w)
{
    OC_CHECK(oc_is_contiguous(grad_out), "grad_out must be contiguous");
    oc_tensor xv = rows_view(x), gv = rows_view(grad_out), dxv = rows_view(oc_dst_tensor_at(0));
    oc_tensor mv = flat_view(mean), rv = flat_view(rstd);
    /* X, G, T, and the [rb, 1] and [1, rb] tiles (each no larger than a
     * [rb, d] one once padded), within the TCM */
    rows_plan p = rows_split(x, 7);
    int64_t rows = xv.sizes[0];
    /* grad_x = rstd * (wg - mean(wg) - xh * mean(wg * xh)), wg = w * grad */
    oc_tile X = oc_tile_alloc(p.rb, p.d, OC_FLOAT32), G = oc_tile_alloc(p.rb, p.d, OC_FLOAT32);
    oc_tile T = oc_tile_alloc(p.rb, p.d, OC_FLOAT32), tw = oc_tile_alloc(1, p.d, OC_FLOAT32);
    oc_tile c1 = oc_tile_alloc(p.rb, 1, OC_FLOAT32), c2 = oc_tile_alloc(p.rb, 1, OC_FLOAT32);
    oc_tile row = oc_tile_alloc(1, p.rb, OC_FLOAT32);
    oc_tile_load(&tw, w, 0, 0, 0, 0.0f);
    for (int64_t r = p.lo; r < p.hi; r += p.rb) {
        int64_t n = rows_at(&p, r);
        oc_tile xh = oc_tile_view(&X, 0, 0, n, p.d), g = oc_tile_view(&G, 0, 0, n, p.d), t = oc_tile_view(&T, 0, 0, n, p.d);
        oc_tile a = oc_tile_view(&c1, 0, 0, n, 1), bb = oc_tile_view(&c2, 0, 0, n, 1), rr = oc_tile_view(&row, 0, 0, 1, n);
        normalise(&xh, &xv, &mv, &rv, r, 0, &rr);
        oc_tile_load(&g, &gv, 0, r, 0, 0.0f);
        oc_tile_binary(&g, &g, &tw, OC_TILE_MUL);
        oc_tile_reduce_rows(&a, &g, OC_TILE_MEAN);
        oc_tile_binary(&t, &g, &xh, OC_TILE_MUL);
        oc_tile_reduce_rows(&bb, &t, OC_TILE_MEAN);
        oc_tile_binary(&xh, &xh, &bb, OC_TILE_MUL);
        oc_tile_binary(&g, &g, &xh, OC_TILE_SUB);
        oc_tile_binary(&g, &g, &a, OC_TILE_SUB);
        oc_tile_load(&rr, &rv, 0, 0, r, 0.0f);
        oc_tile rc = oc_tile_t(&rr);
        oc_tile_binary(&g, &g, &rc, OC_TILE_MUL);
        oc_tile_store(&g, &dxv, 0, r, 0);
    }
    /* grad_w = sum over rows of grad * xh, grad_b = sum of grad: by columns */
    oc_tile_free(&T), oc_tile_free(&G), oc_tile_free(&X);
    oc_tensor dw = flat_view(oc_dst_tensor_at(1)), db = flat_view(oc_dst_tensor_at(2));
    int64_t clo, chi;
    oc_core_range(p.d, 16, &clo, &chi);
    oc_tile xh = oc_tile_alloc(CB, CW, OC_FLOAT32), g = oc_tile_alloc(CB, CW, OC_FLOAT32);
    oc_tile part = oc_tile_alloc(1, CW, OC_FLOAT32);
    oc_tile sw = oc_tile_alloc(1, CW, OC_FLOAT32), sb = oc_tile_alloc(1, CW, OC_FLOAT32);
    oc_tile rr = oc_tile_alloc(1, CB, OC_FLOAT32);
    for (int64_t c = clo; c < chi; c += CW) {
        oc_tile_fill(&sw, 0.0f), oc_tile_fill(&sb, 0.0f);
        for (int64_t r = 0; r < rows; r += CB) { /* rows past the end load as 0 */
            normalise(&xh, &xv, &mv, &rv, r, c, &rr);
            oc_tile_load(&g, &gv, 0, r, c, 0.0f);
            oc_tile_reduce_cols(&part, &g, OC_TILE_SUM);
            oc_tile_binary(&sb, &sb, &part, OC_TILE_ADD);
            oc_tile_binary(&xh, &xh, &g, OC_TILE_MUL);
            oc_tile_reduce_cols(&part, &xh, OC_TILE_SUM);
            oc_tile_binary(&sw, &sw, &part, OC_TILE_ADD);
        }
        int64_t n = chi - c < CW ? chi - c : CW;
        oc_tile swv = oc_tile_view(&sw, 0, 0, 1, n), sbv = oc_tile_view(&sb, 0, 0, 1, n);
        oc_tile_store(&swv, &dw, 0, 0, c);
        oc_tile_store(&sbv, &db, 0, 0, c);
    }
}
