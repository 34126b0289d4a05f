/* SwiGLU: out = silu(gate) * up, with gu [t, 2 f] holding gate (first f
 * columns) and up (last f) side by side: the output of one linear with
 * the gate and up weights stacked. The cores split the columns. */
#include <opcore/kernel.h>
#include <opcore/tile.h>

oc_tensor *swiglu(const oc_tensor *gu)
{
    oc_tensor *out = oc_dst_tensor();
    int64_t t = out->sizes[0], f = out->sizes[1], lo, hi;
    oc_core_range(f, 16, &lo, &hi);
    if (hi <= lo || t == 0) return out;
    oc_tile GU = oc_tile_of_tensor(gu, 0), O = oc_tile_of_tensor(out, 0);
    oc_tile g = oc_tile_view(&GU, 0, lo, t, hi - lo), u = oc_tile_view(&GU, 0, f + lo, t, hi - lo);
    oc_tile o = oc_tile_view(&O, 0, lo, t, hi - lo);
    oc_tile_unary(&o, &g, OC_TILE_SILU, 1.0f, 0.0f);
    oc_tile_binary(&o, &o, &u, OC_TILE_MUL);
    return out;
}
