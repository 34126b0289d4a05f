/* examples/seed003/shape.c — shape function and registration of add_ops.
 *
 * The output has the inputs' shape and dtype. oc_add on meta tensors
 * computes exactly that, and refuses inputs whose shapes or dtypes differ
 * (no broadcasting), with a message naming the operands.
 *
 * The launch grid comes from the input sizes, as in the seed's
 * nki_tensor_add (grid_x = rows // 128, grid_y = cols // 512): one program
 * per 128x512 tile, so [2, 2] for the seed's 256x1024. Rounded up, so
 * sizes that are not multiples of the tile work too.
 */
#include <opcore/library.h>
#include <opcore/tensor_ops.h>

#include "tile_size.h"

static oc_tensor *add_shape(const oc_tensor *a, const oc_tensor *b)
{
    oc_tensor *out = oc_add(a, b, 1.0);
    const int64_t cols = a->ndim ? a->sizes[a->ndim - 1] : 1;
    const int64_t rows = cols ? oc_numel(a) / cols : 0;
    const int64_t grid_x = (rows + TILE_ROWS - 1) / TILE_ROWS, grid_y = (cols + TILE_COLS - 1) / TILE_COLS;
    OC_SET_GRID(grid_x > 0 ? grid_x : 1, grid_y > 0 ? grid_y : 1);
    return out;
}

OC_LIBRARY(add_ops, m)
{
    oc_def(m, "tensor_add(Tensor a, Tensor b) -> Tensor", add_shape, "tensor_add");
}
