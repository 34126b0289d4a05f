/* Softmax along the last dim: exp(x - max) / sum, one row block at a time. */
#include "rows.h"

oc_tensor *softmax(const oc_tensor *x)
{
    oc_tensor xv = rows_view(x), ov = rows_view(oc_dst_tensor());
    rows_plan p = rows_split(x, 2);
    oc_tile X = oc_tile_of_tensor(&xv, 0), O = oc_tile_of_tensor(&ov, 0), s = oc_tile_alloc(p.rb, 1, OC_FLOAT32);
    for (int64_t r = p.lo; r < p.hi; r += p.rb) {
        int64_t n = p.hi - r < p.rb ? p.hi - r : p.rb;
        oc_tile xt = oc_tile_view(&X, r, 0, n, p.d), ot = oc_tile_view(&O, r, 0, n, p.d), st = oc_tile_view(&s, 0, 0, n, 1);
        oc_tile_reduce_rows(&st, &xt, OC_TILE_RMAX);
        oc_tile_unary(&st, &st, OC_TILE_IDENTITY, -1.0f, 0.0f);
        oc_tile_unary_rowbias(&ot, &xt, OC_TILE_EXP, 1.0f, &st);
        oc_tile_reduce_rows(&st, &ot, OC_TILE_SUM);
        oc_tile_binary(&ot, &ot, &st, OC_TILE_DIV);
    }
    return oc_dst_tensor();
}
