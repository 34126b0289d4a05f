/* Flash attention forward, q k v [b, h, s, d] float32: one query block of
 * BR rows per program of a [query blocks, b * h] launch grid (shape.c),
 * handed to whichever core is free, the costliest (causal: last) query
 * blocks first; each key block
 * is scored (S = Q K^T), masked (causal), and folded into the running max
 * m, sum l and output acc (online softmax). A key block that crosses the
 * diagonal goes DR query rows at a time, each against only the keys they
 * see: most of the block's masked part is neither multiplied nor
 * exponentiated. */
#include <math.h>

#include <opcore/kernel.h>
#include <opcore/tile.h>

#ifndef BR
#define BR 256
#endif
#ifndef BC
#define BC 256
#endif
#ifndef DR
#define DR 64
#endif

/* Fold the key rows K, V into the query rows Q (their output rows A, max
 * M and sum L); causal: keep key j for query i only when j <= i + c0. */
static void fold(oc_tile *S, oc_tile *Q, oc_tile *K, oc_tile *V, oc_tile *A, oc_tile *M, oc_tile *L,
                 oc_tile *Mn, oc_tile *T, float scale, bool causal, int64_t c0)
{
    oc_tile_matmul_to(S, Q, K, OC_TILE_TRANS_B);
    if (causal && S->cols - 1 > c0) oc_tile_affine_select(S, S, c0, 1, -1, -INFINITY);
    oc_tile_reduce_rows(Mn, S, OC_TILE_RMAX);                 /* m' = max(m, scale * rowmax) */
    oc_tile_binary_scalar(Mn, Mn, scale, OC_TILE_MUL);
    oc_tile_binary(Mn, Mn, M, OC_TILE_MAX);
    oc_tile_binary(M, M, Mn, OC_TILE_SUB);                    /* alpha = exp(m - m') */
    oc_tile_unary(M, M, OC_TILE_EXP, 1.0f, 0.0f);
    oc_tile_binary(L, L, M, OC_TILE_MUL);
    oc_tile_binary(A, A, M, OC_TILE_MUL);
    oc_tile_unary(T, Mn, OC_TILE_IDENTITY, -1.0f, 0.0f);       /* P = exp(scale * S - m') */
    oc_tile_unary_rowbias(S, S, OC_TILE_EXP, scale, T);
    oc_tile_reduce_rows(T, S, OC_TILE_SUM);
    oc_tile_binary(L, L, T, OC_TILE_ADD);
    oc_tile_matmul(A, S, V, 0);                               /* acc += P V */
    oc_tile_binary(M, Mn, Mn, OC_TILE_MAX);                   /* m = m' */
}

oc_tensor *flash_attention(const oc_tensor *q, const oc_tensor *k, const oc_tensor *v, bool causal)
{
    oc_tensor *out = oc_dst_tensor();
    if (oc_numel(q) == 0) return out; /* the grid's one program has nothing to do */
    int64_t s = q->sizes[2], d = q->sizes[3], bh = oc_program_id(1);
    int64_t q0 = (oc_num_programs(0) - 1 - oc_program_id(0)) * BR, br = s - q0 < BR ? s - q0 : BR;
    float scale = 1.0f / sqrtf((float)d);
    oc_tile S = oc_tile_alloc(BR, BC, OC_FLOAT32), A = oc_tile_alloc(br, d, OC_FLOAT32);
    oc_tile M = oc_tile_alloc(br, 1, OC_FLOAT32), mnew = oc_tile_alloc(br, 1, OC_FLOAT32);
    oc_tile L = oc_tile_alloc(br, 1, OC_FLOAT32), t = oc_tile_alloc(br, 1, OC_FLOAT32);
    oc_tile Q = oc_tile_of_tensor(q, bh), K = oc_tile_of_tensor(k, bh), V = oc_tile_of_tensor(v, bh);
    oc_tile Qb = oc_tile_view(&Q, q0, 0, br, d);
    oc_tile_fill(&M, -INFINITY), oc_tile_fill(&L, 0.0f), oc_tile_fill(&A, 0.0f);
    for (int64_t k0 = 0; k0 < (causal ? q0 + br : s); k0 += BC) {
        int64_t bc = s - k0 < BC ? s - k0 : BC;
        bool diag = causal && k0 + bc > q0 + 1;              /* some key is after some query */
        for (int64_t r0 = 0; r0 < br; r0 += diag ? DR : br) {
            int64_t rows = diag && br - r0 > DR ? DR : br - r0;
            int64_t kc = diag && q0 + r0 + rows - k0 < bc ? q0 + r0 + rows - k0 : bc; /* keys seen */
            if (kc <= 0) continue;
            oc_tile Sv = oc_tile_view(&S, 0, 0, rows, kc), Qv = oc_tile_view(&Qb, r0, 0, rows, d);
            oc_tile Kv = oc_tile_view(&K, k0, 0, kc, d), Vv = oc_tile_view(&V, k0, 0, kc, d);
            oc_tile Av = oc_tile_view(&A, r0, 0, rows, d), Mv = oc_tile_view(&M, r0, 0, rows, 1);
            oc_tile Lv = oc_tile_view(&L, r0, 0, rows, 1), Mn = oc_tile_view(&mnew, 0, 0, rows, 1);
            oc_tile T = oc_tile_view(&t, 0, 0, rows, 1);
            fold(&Sv, &Qv, &Kv, &Vv, &Av, &Mv, &Lv, &Mn, &T, scale, diag, q0 + r0 - k0);
        }
    }
    oc_tile_binary(&A, &A, &L, OC_TILE_DIV);
    oc_tile_store(&A, out, bh, q0, 0);
    return out;
}
