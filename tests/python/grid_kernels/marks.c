/* tests/python/grid_kernels/marks.c — grid kernels for test_grid.py.
 *
 * marks(x): row `id` of the int64 output [instances, 4] gets the program
 * ids (p0, p1, p2) of instance `id` (row-major linear id) and a 1, so the
 * test sees which instances ran. x is [instances, n] float32, large enough
 * that the engine splits the launch over its cores. */
#include <opcore/kernel.h>

oc_tensor *marks(const oc_tensor *x)
{
    oc_tensor *out = oc_dst_tensor();
    int64_t *o = out->data;
    const int64_t row = (oc_program_id(0) * oc_num_programs(1) + oc_program_id(1)) * oc_num_programs(2) +
                        oc_program_id(2);
    OC_CHECK(row < out->sizes[0], "marks: instance %lld of a grid larger than x's %lld rows", (long long)row,
             (long long)x->sizes[0]);
    for (int a = 0; a < 3; a++) o[row * 4 + a] = oc_program_id(a);
    o[row * 4 + 3] = 1;
    return out;
}

/* barrier(x): a collective, which a grid launch refuses. */
oc_tensor *barrier(const oc_tensor *x)
{
    (void)x;
    oc_barrier();
    return oc_dst_tensor();
}
