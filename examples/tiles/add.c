/* Seed 003's SPMD tensor add, with tiles: the grid of [TR, cols] row tiles
 * folded onto the cores (program t runs on core t % cores). */
#include <opcore/kernel.h>
#include <opcore/tile.h>

#define TR 64 /* rows per tile */

oc_tensor *tensor_add(const oc_tensor *a, const oc_tensor *b)
{
    oc_tensor *out = oc_dst_tensor();
    if (oc_numel(a) == 0) return out; /* no tiles at all */
    oc_tile ta = oc_tile_of_tensor(a, 0);
    oc_tile x = oc_tile_alloc(TR, ta.cols, OC_FLOAT32), y = oc_tile_alloc(TR, ta.cols, OC_FLOAT32);
    int64_t nb = oc_numel(a) / (ta.rows * ta.cols), nt = (ta.rows + TR - 1) / TR;
    for (int64_t t = oc_cpu_id(); t < nb * nt; t += oc_cpu_count()) {
        oc_tile_load(&x, a, t / nt, t % nt * TR, 0, 0.0f);
        oc_tile_load(&y, b, t / nt, t % nt * TR, 0, 0.0f);
        oc_tile_binary(&x, &x, &y, OC_TILE_ADD);
        oc_tile_store(&x, out, t / nt, t % nt * TR, 0);
    }
    return out;
}
