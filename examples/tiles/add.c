/* Seed 003's SPMD tensor add, with tiles: one [TR, cols] row tile per
 * program of a launch grid (shape.c: one program per tile), each handed to
 * whichever core is free. */
#include <opcore/kernel.h>
#include <opcore/tile.h>

#define TR 64 /* rows per tile */

oc_tensor *tensor_add(const oc_tensor *a, const oc_tensor *b)
{
    oc_tensor *out = oc_dst_tensor();
    if (oc_numel(a) == 0) return out; /* no tiles at all */
    oc_tile ta = oc_tile_of_tensor(a, 0);
    int64_t nt = (ta.rows + TR - 1) / TR, t = oc_program_id(0);
    oc_tile x = oc_tile_alloc(TR, ta.cols, OC_FLOAT32), y = oc_tile_alloc(TR, ta.cols, OC_FLOAT32);
    oc_tile_load(&x, a, t / nt, t % nt * TR, 0, 0.0f);
    oc_tile_load(&y, b, t / nt, t % nt * TR, 0, 0.0f);
    oc_tile_binary(&x, &x, &y, OC_TILE_ADD);
    oc_tile_store(&x, out, t / nt, t % nt * TR, 0);
    return out;
}
