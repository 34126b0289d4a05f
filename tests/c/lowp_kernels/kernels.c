/* Low-precision tile cases for tests/c/test_tile_lowp.c, run on every core
 * of a multicore op (tensors viewed in place as tiles):
 *   0  y = x w^T, oc_tile_linear, w of oc_wtype `type` (ws its scales for
 *      int8), split over the op's cores
 *   1  y = oc_tile_linear_i8(x int8, ws row scales, w int8 with scales z)
 *   2  the same as 0 on core 0 alone, looping ith over nth = type + 1 parts
 *      (type then names OC_W_Q4_0's cases: the block type is fixed)
 *   3  z (uint8 bytes) = oc_tile_quantize_blocks(x) for `type`
 *   4  y = oc_tile_dequantize_weights(w of `type`) rows [1, 1 + y rows)
 *   5  y (int8) and z (scales) = oc_tile_quantize_rows(x, group `type`)
 *   6  y = oc_tile_dequantize_rows(x int8, ws, group `type`)
 *   7  y = absmax rows of x; 8 gather_rows(x, w int32); 9 logsumexp rows;
 *   10 y = oc_tile_dot_rows(x, w)
 *   11 y = x w^T with float32 weights given as an oc_weights of type
 *      `type` filled by hand (a bad type or layout) */
#include <opcore/kernel.h>
#include <opcore/tile.h>

void lcase(oc_tensor *y, oc_tensor *z, const oc_tensor *x, const oc_tensor *w, const oc_tensor *ws,
           int64_t which, int64_t type)
{
    int ith = (int)oc_cpu_id(), nth = (int)oc_cpu_count();
    oc_tile ty = oc_tile_of_tensor(y, 0), tz = oc_tile_of_tensor(z, 0),
            tx = oc_tile_of_tensor(x, 0);
    oc_tile tw = oc_tile_of_tensor(w, 0), ts = oc_tile_of_tensor(ws, 0);
    if (which == 0 || which == 2) {
        oc_wtype t = which == 2 ? OC_W_Q4_0 : (oc_wtype)type;
        oc_weights wt = oc_weights_of_tensor(w, t, t == OC_W_I8 ? ws : NULL);
        if (!wt.data) return;
        if (which == 0) {
            oc_tile_linear(&ty, &tx, &wt, ith, nth);
        } else if (ith == 0) {
            for (int part = 0; part <= type; part++)
                oc_tile_linear(&ty, &tx, &wt, part, (int)type + 1);
        }
        return;
    }
    if (which == 1) {
        oc_weights wt = oc_weights_of_tensor(w, OC_W_I8, z);
        if (!wt.data) return;
        oc_tile xs = oc_tile_t(&ts); /* ws is a 1 x m row: the m x 1 column */
        oc_tile_linear_i8(&ty, &tx, &xs, &wt, ith, nth);
        return;
    }
    if (which == 11) {
        oc_weights wt = {w->data,           w->sizes[0],    w->sizes[1],
                         w->strides[0] * 4, (oc_wtype)type, NULL};
        oc_tile_linear(&ty, &tx, &wt, ith, nth);
        return;
    }
    if (ith != 0) return; /* the helpers: one core */
    switch (which) {
    case 3: oc_tile_quantize_blocks(z->data, (oc_wtype)type, &tx); break;
    case 4: {
        oc_weights wt = oc_weights_of_tensor(w, (oc_wtype)type, type == OC_W_I8 ? ws : NULL);
        if (wt.data) oc_tile_dequantize_weights(&ty, &wt, 1);
        break;
    }
    case 5: oc_tile_quantize_rows(&ty, &tz, &tx, type); break;
    case 6: oc_tile_dequantize_rows(&ty, &tx, &ts, type); break;
    case 7: oc_tile_absmax_rows(&ty, &tx); break;
    case 8: oc_tile_gather_rows(&ty, &tx, &tw); break;
    case 9: oc_tile_logsumexp_rows(&ty, &tx); break;
    case 10: oc_tile_dot_rows(&ty, &tx, &tw); break;
    default: OC_CHECK(0, "lcase: no case %lld", (long long)which);
    }
}
