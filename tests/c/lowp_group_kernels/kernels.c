/* Group-wise weight cases for tests/c/test_tile_lowp_group.c, run on every
 * core of a multicore op (tensors viewed in place as tiles):
 *   0  y = x w^T, oc_tile_linear with oc_weights_grouped(w, type, group, s,
 *      z for OC_W_U4G), split over the op's cores (x, y float32 or bfloat16)
 *   1  the same on core 0 alone, looping ith over 3 parts
 *   2  y (uint8, packed) , s, z = oc_tile_quantize_u4(x, group), core 0
 *   3  y = oc_tile_dequantize_weights(the weights of case 0), rows 0..
 *   4  case 0 with z given whatever the type (int8-group refuses it)
 *   6  y = oc_tile_matmul_to(x, w, flags `type`) on core 0 (w float32,
 *      bfloat16 or float16: the skinny products for m <= 32)
 *   7  y += oc_tile_matmul(x, w, flags `type`) on core 0
 *   5  case 0 with the oc_weights filled by hand: k = x's columns, group
 *      unchecked (weights_ok's checks); float32 weights without scales */
#include <opcore/kernel.h>
#include <opcore/tile.h>

void gcase(oc_tensor *y, oc_tensor *s, oc_tensor *z, const oc_tensor *x, const oc_tensor *w,
           int64_t which, int64_t type, int64_t group)
{
    int ith = (int)oc_cpu_id(), nth = (int)oc_cpu_count();
    oc_wtype t = (oc_wtype)type;
    if (which == 2) {
        if (ith) return;
        oc_tile ts = oc_tile_of_tensor(s, 0), tz = oc_tile_of_tensor(z, 0),
                tx = oc_tile_of_tensor(x, 0);
        oc_tile_quantize_u4(y->data, &ts, &tz, &tx, group);
        return;
    }
    if (which == 6 || which == 7) {
        if (ith) return;
        oc_tile ty = oc_tile_of_tensor(y, 0), tx = oc_tile_of_tensor(x, 0),
                tw = oc_tile_of_tensor(w, 0);
        if (which == 6)
            oc_tile_matmul_to(&ty, &tx, &tw, (unsigned)type);
        else
            oc_tile_matmul(&ty, &tx, &tw, (unsigned)type);
        return;
    }
    oc_weights wt;
    if (which == 5) {
        bool f = t == OC_W_F32;
        wt = (oc_weights){w->data, w->sizes[0], x->sizes[1],
                          w->strides[0] * (int64_t)oc_dtype_size(w->dtype),
                          t,       f ? NULL : s->data,
                          group,   f ? NULL : z->data};
    } else {
        wt = oc_weights_grouped(w, t, group, s, which == 4 || t == OC_W_U4G ? z : NULL);
        if (!wt.data) return;
    }
    oc_tile ty = oc_tile_of_tensor(y, 0), tx = oc_tile_of_tensor(x, 0);
    if (which == 3) {
        if (ith == 0) oc_tile_dequantize_weights(&ty, &wt, 0);
    } else if (which == 1) {
        if (ith == 0)
            for (int part = 0; part < 3; part++) oc_tile_linear(&ty, &tx, &wt, part, 3);
    } else {
        oc_tile_linear(&ty, &tx, &wt, ith, nth);
    }
}
