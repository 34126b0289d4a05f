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
 *      `type` filled by hand (a bad type or layout)
 *   12 z (uint8 bytes) = oc_weights_pack(w int8, scales ws), a part per core
 *   13 y = x w^T, w the packed bytes (OC_W_I8_PACKED): type % 10 = 0
 *      float32 x (oc_tile_linear), 1 int8 x with row scales z
 *      (oc_tile_linear_i8), 2 as 0 with the oc_weights' k one short (a
 *      mismatch); type / 10 = p > 0: core 0 alone runs parts 0..p-1 of p
 *   14 y (int32) += oc_tile_matmul(x int8, w int8, flags `type`), core 0
 *   15 z (uint8 bytes) = oc_weights_pack(w GGML blocks of `type`), a part
 *      per core
 *   16 as 2 with w packed Q4_0 bytes (OC_W_Q4_0_PACKED) */
#include <opcore/kernel.h>
#include <opcore/tile.h>

/* Every argument viewed as a tile, except block bytes (uint8: no tile
 * dtype, and oc_tile_of_tensor refuses them): those cases read the tensor. */
static oc_tile view(const oc_tensor *t)
{
    oc_tile v = {0};
    if (t->dtype != OC_UINT8) v = oc_tile_of_tensor(t, 0);
    return v;
}

void lcase(oc_tensor *y, oc_tensor *z, const oc_tensor *x, const oc_tensor *w, const oc_tensor *ws,
           int64_t which, int64_t type)
{
    int ith = (int)oc_cpu_id(), nth = (int)oc_cpu_count();
    oc_tile ty = view(y), tz = view(z), tx = view(x), tw = view(w), ts = view(ws);
    if (which == 0 || which == 2 || which == 16) {
        oc_wtype t = which == 2 ? OC_W_Q4_0 : which == 16 ? OC_W_Q4_0_PACKED : (oc_wtype)type;
        oc_weights wt = oc_weights_of_tensor(w, t, t == OC_W_I8 ? ws : NULL);
        if (!wt.data) return;
        if (which == 0) {
            oc_tile_linear(&ty, &tx, &wt, ith, nth);
        } else if (ith == 0) { /* 2, 16 */
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
    if (which == 12) {
        oc_weights wt = oc_weights_of_tensor(w, OC_W_I8, ws);
        if (wt.data) oc_weights_pack(z->data, (size_t)oc_numel(z), &wt, ith, nth);
        return;
    }
    if (which == 15) {
        oc_weights wt = oc_weights_of_tensor(w, (oc_wtype)type, NULL);
        if (wt.data) oc_weights_pack(z->data, (size_t)oc_numel(z), &wt, ith, nth);
        return;
    }
    if (which == 13) {
        oc_weights wt = oc_weights_of_tensor(w, OC_W_I8_PACKED, NULL);
        if (!wt.data) return;
        int mode = (int)(type % 10), parts = (int)(type / 10);
        if (mode == 2) wt.k -= 1;
        oc_tile xs = oc_tile_t(&tz);
        for (int part = 0; part < (parts ? parts : 1); part++) {
            if (parts && ith != 0) break;
            int pi = parts ? part : ith, pn = parts ? parts : nth;
            if (mode == 1)
                oc_tile_linear_i8(&ty, &tx, &xs, &wt, pi, pn);
            else
                oc_tile_linear(&ty, &tx, &wt, pi, pn);
        }
        return;
    }
    if (ith != 0) return; /* the helpers: one core */
    if (which == 14) {
        oc_tile_matmul(&ty, &tx, &tw, (unsigned)type);
        return;
    }
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
