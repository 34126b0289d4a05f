/* Flash attention forward, q k v [b, h, s, d] float32: one query block of
 * BR rows per program, the programs folded onto the cores; each key block
 * is scored (S = Q K^T, BLIS), masked (causal), and folded into the running
 * max m, sum l and output acc (online softmax). */
#include <math.h>

#include <opcore/kernel.h>
#include <opcore/tile.h>

#define BR 128
#define BC 128

oc_tensor *flash_attention(const oc_tensor *q, const oc_tensor *k, const oc_tensor *v, bool causal)
{
    oc_tensor *out = oc_dst_tensor();
    int64_t s = q->sizes[2], d = q->sizes[3], nq = (s + BR - 1) / BR, nbh = q->sizes[0] * q->sizes[1];
    float scale = 1.0f / sqrtf((float)d);
    oc_tile S = oc_tile_alloc(BR, BC, OC_FLOAT32), acc = oc_tile_alloc(BR, d, OC_FLOAT32);
    oc_tile m = oc_tile_alloc(BR, 1, OC_FLOAT32), mnew = oc_tile_alloc(BR, 1, OC_FLOAT32);
    oc_tile l = oc_tile_alloc(BR, 1, OC_FLOAT32), t = oc_tile_alloc(BR, 1, OC_FLOAT32);
    for (int64_t p = oc_cpu_id(); p < nbh * nq; p += oc_cpu_count()) {
        int64_t bh = p / nq, q0 = p % nq * BR, br = s - q0 < BR ? s - q0 : BR;
        oc_tile Q = oc_tile_of_tensor(q, bh), K = oc_tile_of_tensor(k, bh), V = oc_tile_of_tensor(v, bh);
        oc_tile Qb = oc_tile_view(&Q, q0, 0, br, d), A = oc_tile_view(&acc, 0, 0, br, d);
        oc_tile M = oc_tile_view(&m, 0, 0, br, 1), Mn = oc_tile_view(&mnew, 0, 0, br, 1);
        oc_tile L = oc_tile_view(&l, 0, 0, br, 1), T = oc_tile_view(&t, 0, 0, br, 1);
        oc_tile_fill(&M, -INFINITY), oc_tile_fill(&L, 0.0f), oc_tile_fill(&A, 0.0f);
        for (int64_t k0 = 0; k0 < (causal ? q0 + br : s); k0 += BC) {
            int64_t bc = s - k0 < BC ? s - k0 : BC;
            oc_tile Sb = oc_tile_view(&S, 0, 0, br, bc), Kb = oc_tile_view(&K, k0, 0, bc, d);
            oc_tile Vb = oc_tile_view(&V, k0, 0, bc, d);
            oc_tile_matmul_to(&Sb, &Qb, &Kb, OC_TILE_TRANS_B);
            if (causal && k0 + bc > q0) oc_tile_affine_select(&Sb, &Sb, q0 - k0, 1, -1, -INFINITY);
            oc_tile_reduce_rows(&Mn, &Sb, OC_TILE_RMAX);                 /* m' = max(m, scale * rowmax) */
            oc_tile_binary_scalar(&Mn, &Mn, scale, OC_TILE_MUL);
            oc_tile_binary(&Mn, &Mn, &M, OC_TILE_MAX);
            oc_tile_binary(&M, &M, &Mn, OC_TILE_SUB);                    /* alpha = exp(m - m') */
            oc_tile_unary(&M, &M, OC_TILE_EXP, 1.0f, 0.0f);
            oc_tile_binary(&L, &L, &M, OC_TILE_MUL);
            oc_tile_binary(&A, &A, &M, OC_TILE_MUL);
            oc_tile_unary(&T, &Mn, OC_TILE_IDENTITY, -1.0f, 0.0f);       /* P = exp(scale * S - m') */
            oc_tile_unary_rowbias(&Sb, &Sb, OC_TILE_EXP, scale, &T);
            oc_tile_reduce_rows(&T, &Sb, OC_TILE_SUM);
            oc_tile_binary(&L, &L, &T, OC_TILE_ADD);
            oc_tile_matmul(&A, &Sb, &Vb, 0);                             /* acc += P V */
            oc_tile_binary(&M, &Mn, &Mn, OC_TILE_MAX);                   /* m = m' */
        }
        oc_tile_binary(&A, &A, &L, OC_TILE_DIV);
        oc_tile_store(&A, out, bh, q0, 0);
    }
    return out;
}
