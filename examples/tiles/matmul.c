/* C = A x B with a float32 accumulator: the cores split C's rows, each
 * core one BLIS call on its row block (A's rows, all of B); the result is
 * rounded once to the inputs' dtype (float32 or bfloat16). The backward,
 * grad_a = grad x B^T and grad_b = A^T x grad, reads the transposes in
 * place (the matmul's TRANS flags), the cores splitting each result's rows. */
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

/* Rows [lo, hi) of this core's share of c = op(a) x op(b); a's rows (or,
 * transposed, its columns) follow c's. */
static void rows_of(oc_tensor *c, const oc_tensor *a, const oc_tensor *b, unsigned flags)
{
    oc_tile ta = oc_tile_of_tensor(a, 0), tb = oc_tile_of_tensor(b, 0);
    oc_tile tc = oc_tile_of_tensor(c, 0);
    int64_t lo, hi;
    oc_core_range(tc.rows, 16, &lo, &hi);
    if (hi <= lo) return;
    oc_tile ca = flags & OC_TILE_TRANS_A ? oc_tile_view(&ta, 0, lo, ta.rows, hi - lo)
                                         : oc_tile_view(&ta, lo, 0, hi - lo, ta.cols);
    oc_tile cc = oc_tile_view(&tc, lo, 0, hi - lo, tc.cols);
    oc_tile_matmul_to(&cc, &ca, &tb, flags);
}

void matmul_backward(const oc_tensor *grad, const oc_tensor *a, const oc_tensor *b)
{
    oc_tensor *ga = oc_dst_tensor_at(0), *gb = oc_dst_tensor_at(1);
    if (oc_numel(grad) == 0) { /* an empty sum over grad's rows or columns: zeros */
        if (oc_cpu_id() == 0) oc_fill_(ga, 0.0), oc_fill_(gb, 0.0);
        return;
    }
    if (oc_numel(ga)) rows_of(ga, grad, b, OC_TILE_TRANS_B); /* [m, n] x [k, n]^T */
    if (oc_numel(gb)) rows_of(gb, a, grad, OC_TILE_TRANS_A); /* [m, k]^T x [m, n] */
}
