/* examples/seed003/add.c — the SPMD tensor-add kernel of seed 003.
 *
 * A multicore kernel (build with --multicore): every engine core runs this
 * function at once. The flattened tensors are cut into tiles of TILE
 * elements; core `id` of `cores` adds tiles id, id + cores, id + 2*cores...
 * (the seed's SPMD grid, one program per tile, folded onto the cores). Each
 * tile is staged in the core's TCM: a and b in, a + b computed in place,
 * the sum written to this core's tiles of the output (oc_dst_tensor()).
 *
 * Any shape works (the seed's 256x1024 is 64 tiles of 4096); float32 only.
 */
#include <opcore/kernel.h>

#define TILE 4096 /* elements per tile: two float32 tiles = 32 KiB of TCM */

oc_tensor *tensor_add(const oc_tensor *a, const oc_tensor *b)
{
    oc_tensor *out = oc_dst_tensor();
    OC_CHECK(a->dtype == OC_FLOAT32 && b->dtype == OC_FLOAT32,
             "tensor_add: a and b must be float32");
    OC_CHECK(oc_same_shape(a, b) && oc_same_shape(a, out),
             "tensor_add: a, b and the output must have the same shape");

    const int64_t n = oc_numel(a);
    const int64_t ntiles = (n + TILE - 1) / TILE;
    const int64_t id = oc_cpu_id(), cores = oc_cpu_count();

    float *ta = oc_tcm_malloc(TILE * sizeof *ta);
    float *tb = oc_tcm_malloc(TILE * sizeof *tb);
    OC_CHECK(ta != NULL && tb != NULL, "tensor_add: TCM too small for two %d-element tiles", TILE);

    for (int64_t t = id; t < ntiles; t += cores) {
        const int64_t start = t * TILE;
        const int64_t count = n - start < TILE ? n - start : TILE;
        oc_tensor_to_tcm(a, ta, start, count);
        oc_tensor_to_tcm(b, tb, start, count);
        for (int64_t i = 0; i < count; i++) ta[i] += tb[i];
        oc_tcm_to_tensor(out, ta, start, count);
    }

    oc_tcm_free(tb);
    oc_tcm_free(ta);
    return out;
}
