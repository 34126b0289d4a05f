/* tests/python/grid_kernels/shape.c — the grid_py library: marks runs on a
 * [2, 2] grid unless the call gives another. */
#include <opcore/library.h>
#include <opcore/tensor_ops.h>

static oc_tensor *marks_shape(const oc_tensor *x)
{
    return oc_empty(OC_INT64, 2, (int64_t[]){x->sizes[0], 4});
}

static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }

OC_LIBRARY(grid_py, m)
{
    oc_def(m, "marks(Tensor x) -> Tensor", marks_shape, "marks", .grid = {2, 2});
    oc_def(m, "barrier(Tensor x) -> Tensor", same, "barrier", .grid = {3});
}
