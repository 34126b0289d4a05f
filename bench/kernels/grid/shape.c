/* bench/kernels/grid/shape.c — the grid_bench library: work(units) on a
 * grid given per call (op[grid]); one float64 checksum per instance. */
#include <opcore/library.h>
#include <opcore/tensor_ops.h>

static oc_tensor *per_instance(const oc_tensor *units)
{
    return oc_empty(OC_FLOAT64, 1, (int64_t[]){oc_numel(units)});
}

OC_LIBRARY(grid_bench, m)
{
    oc_def(m, "work(Tensor units) -> Tensor", per_instance, "work", .grid = {1});
}
