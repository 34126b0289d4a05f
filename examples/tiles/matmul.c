/* C = A x B with a float32 accumulator: the cores split C's rows, each
 * core one BLIS call on its row block (A's rows, all of B); the result is
 * rounded once to the inputs' dtype (float32 or bfloat16). */
#include <opcore/kernel.h>
#include <opcore/tile.h>

oc_tensor *matmul(const oc_tensor *a, const oc_tensor *b)
{
    oc_tensor *out = oc_dst_tensor();
    if (oc_numel(out) == 0) return out;
    if (a->sizes[1] == 0) { /* an empty sum over k (tiles have at least one column): zeros */
        if (oc_cpu_id() == 0) oc_fill_(out, 0.0);
        return out;
    }
    oc_tile ta = oc_tile_of_tensor(a, 0), tb = oc_tile_of_tensor(b, 0), tc = oc_tile_of_tensor(out, 0);
    int64_t lo, hi;
    oc_core_range(ta.rows, 16, &lo, &hi);
    if (hi <= lo) return out;
    oc_tile ca = oc_tile_view(&ta, lo, 0, hi - lo, ta.cols), cc = oc_tile_view(&tc, lo, 0, hi - lo, tc.cols);
    oc_tile_matmul_to(&cc, &ca, &tb, 0);
    return out;
}
