/* RMS norm over the last dim: y = x * rsqrt(mean(x^2) + eps) * w. */
#include "rows.h"

oc_tensor *rmsnorm(const oc_tensor *x, const oc_tensor *w, double eps)
{
    oc_tensor xv = rows_view(x), ov = rows_view(oc_dst_tensor());
    rows_plan p = rows_split(x, 2);
    oc_tile X = oc_tile_of_tensor(&xv, 0), O = oc_tile_of_tensor(&ov, 0), s = oc_tile_alloc(p.rb, 1, OC_FLOAT32);
    oc_tile tw = oc_tile_alloc(1, p.d, OC_FLOAT32);
    oc_tile_load(&tw, w, 0, 0, 0, 0.0f);
    for (int64_t r = p.lo; r < p.hi; r += p.rb) {
        int64_t n = p.hi - r < p.rb ? p.hi - r : p.rb;
        oc_tile xt = oc_tile_view(&X, r, 0, n, p.d), ot = oc_tile_view(&O, r, 0, n, p.d), st = oc_tile_view(&s, 0, 0, n, 1);
        oc_tile_reduce_rows(&st, &xt, OC_TILE_SUMSQ);
        oc_tile_unary(&st, &st, OC_TILE_RSQRT, 1.0f / (float)p.d, (float)eps);
        oc_tile_binary(&ot, &xt, &st, OC_TILE_MUL);
        oc_tile_binary(&ot, &ot, &tw, OC_TILE_MUL);
    }
    return oc_dst_tensor();
}
