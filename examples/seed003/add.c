/* examples/seed003/add.c — the SPMD tensor-add kernel of seed 003.
 *
 * The seed's kernel, in C: it runs on a [2, 2] launch grid for the seed's
 * 256x1024 inputs (the shape function sets the grid from the input sizes,
 * as the seed's nki_tensor_add does: one program per 128x512 tile). Each
 * program instance reads its position with oc_program_id(0) / (1), stages
 * its tile of a and b in its core's TCM, adds them and stores the tile of
 * the output (oc_dst_tensor()). The engine hands the instances to whichever
 * cores are free; nothing here knows how many cores there are.
 *
 *     NKI                                      here
 *     offset_i_x = nl.program_id(0) * 128      r0 = oc_program_id(0) * TILE_ROWS
 *     offset_i_y = nl.program_id(1) * 512      c0 = oc_program_id(1) * TILE_COLS
 *     a_tile = nl.load(a_input[ix, iy])        oc_tensor_to_tcm(a, ta + ..., ...) per row
 *     c_tile = a_tile + b_tile                 ta[i] += tb[i]
 *     nl.store(c_output[ix, iy], c_tile)       oc_tcm_to_tensor(out, ta + ..., ...) per row
 *
 * Any shape works: it is read as a matrix of rows x cols (cols: the last
 * dim), and tiles at the ragged edges are cut to what lies inside.
 * float32 only.
 */
#include <opcore/kernel.h>

#include "tile_size.h"

oc_tensor *tensor_add(const oc_tensor *a, const oc_tensor *b)
{
    oc_tensor *out = oc_dst_tensor();
    OC_CHECK(a->dtype == OC_FLOAT32 && b->dtype == OC_FLOAT32,
             "tensor_add: a and b must be float32");
    OC_CHECK(oc_same_shape(a, b) && oc_same_shape(a, out),
             "tensor_add: a, b and the output must have the same shape");

    const int64_t cols = a->ndim ? a->sizes[a->ndim - 1] : 1;
    const int64_t rows = cols ? oc_numel(a) / cols : 0;

    /* This program's tile: rows [r0, r0 + h), cols [c0, c0 + w). */
    const int64_t r0 = oc_program_id(0) * TILE_ROWS, c0 = oc_program_id(1) * TILE_COLS;
    const int64_t h = rows - r0 < TILE_ROWS ? rows - r0 : TILE_ROWS;
    const int64_t w = cols - c0 < TILE_COLS ? cols - c0 : TILE_COLS;
    if (h <= 0 || w <= 0) return out;

    float *ta = oc_tcm_malloc((size_t)(h * w) * sizeof *ta);
    float *tb = oc_tcm_malloc((size_t)(h * w) * sizeof *tb);
    for (int64_t i = 0; i < h; i++) { /* load */
        oc_tensor_to_tcm(a, ta + i * w, (r0 + i) * cols + c0, w);
        oc_tensor_to_tcm(b, tb + i * w, (r0 + i) * cols + c0, w);
    }
    for (int64_t i = 0; i < h * w; i++) ta[i] += tb[i]; /* a_tile + b_tile */
    for (int64_t i = 0; i < h; i++)                    /* store */
        oc_tcm_to_tensor(out, ta + i * w, (r0 + i) * cols + c0, w);

    oc_tcm_free(tb);
    oc_tcm_free(ta);
    return out;
}
