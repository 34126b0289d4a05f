/* RMS norm over the last dim: y = x * rsqrt(mean(x^2) + eps) * w. Each
 * block's output pass also takes the next block's mean(x^2) (the next
 * block's reads from memory overlap this block's writes). */
#include "rows.h"

oc_tensor *rmsnorm(const oc_tensor *x, const oc_tensor *w, double eps)
{
    oc_tensor xv = rows_view(x), ov = rows_view(oc_dst_tensor());
    rows_plan p = rows_split(x, 2);
    p.rb = (p.rb + 1) / 2; /* in L2 at once: a block, its output, and the next block */
    /* x from memory (this core's rows larger than L2): blocks of a sixteenth of L2 (4 rows
     * of 8192 floats in 2 MiB), which stay in L2 while fresh output pages are zeroed through
     * it (half the L2 ran 0.80x a copy of the same bytes at [4096, 8192], this 0.89x) */
    int64_t l2 = (int64_t)oc_tile_l2_bytes(), l2rows = l2 / 16 / (p.d * 4);
    if ((p.hi - p.lo) * p.d * 4 > l2) p.rb = l2rows < 1 ? 1 : l2rows < p.rb ? l2rows : p.rb;
    oc_tile X = oc_tile_of_tensor(&xv, 0), O = oc_tile_of_tensor(&ov, 0), zero = oc_tile_alloc(1, 1, OC_FLOAT32);
    oc_tile tw = vec_tile(w, p.d);
    oc_tile s[2] = {oc_tile_alloc(p.rb, 1, OC_FLOAT32), oc_tile_alloc(p.rb, 1, OC_FLOAT32)};
    oc_tile_fill(&zero, 0.0f);
    for (int64_t r = p.lo, n = p.rb, k = 0; r < p.hi; r += n, k ^= 1) {
        n = rows_at(&p, r);
        oc_tile xt = oc_tile_view(&X, r, 0, n, p.d), ot = oc_tile_view(&O, r, 0, n, p.d);
        oc_tile st = oc_tile_view(&s[k], 0, 0, n, 1);
        if (r == p.lo) oc_tile_moments(NULL, &st, &xt); /* mean(x^2); later blocks': with the block before */
        oc_tile_unary(&st, &st, OC_TILE_RSQRT, 1.0f, (float)eps);
        int64_t r2 = r + n, n2 = rows_at(&p, r2); /* the next block, and its statistics */
        oc_tile nx = n2 ? oc_tile_view(&X, r2, 0, n2, p.d) : xt, ns = n2 ? oc_tile_view(&s[k ^ 1], 0, 0, n2, 1) : st;
        oc_tile_normalize_ahead(&ot, &xt, &zero, &st, &tw, NULL, NULL, &ns, n2 ? &nx : NULL);
    }
    return oc_dst_tensor();
}
