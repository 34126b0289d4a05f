/* float32 weights against a few rows of x on AVX-512 (prefill: m from
 * F32_SKINNY_M + 1 to OC__LOWP_FMM_MAX_M - 1): y = x w^T in blocks of 4
 * rows of x by 4 rows of w, each output a dot product over k in 16 lanes
 * (one register a product: 16 of them, 4 loads of x and 4 of w a step of
 * 16 k), the lanes added by _mm512_reduce_add_ps. w's rows come from memory
 * once, the next block's prefetched while the first rows of x run; x's come
 * from L2. An output's bits depend only on its row of x and of w (not on m,
 * the block it falls in, or the part of n a core takes).
 *
 * Why not BLIS here: BLIS packs w for every call (a copy of the weights
 * through the cache) and, below 48 rows, runs its AVX2 'haswell' kernels on
 * this kind of CPU (docs/gemm_library.md). */
#include <stdint.h>

#include "tile/lowp_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define TF __attribute__((target("avx2,fma,avx512f,avx512vl")))
#define INL inline __attribute__((always_inline))

/* rm rows of x (from x) by rn rows of w (from w) into y; pf: the next
 * block's rows of w to prefetch (NULL: none). */
static INL TF void fmm_block(float *y, int64_t yrs, const float *x, int64_t xrs, const float *w,
                             int64_t wrs, int64_t k, int rm, int rn, const float *pf)
{
    __m512 acc[4][4];
    for (int a = 0; a < rm; a++)
        for (int b = 0; b < rn; b++) acc[a][b] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 16 <= k; p += 16) {
        __m512 wv[4];
        for (int b = 0; b < rn; b++) {
            if (pf) _mm_prefetch((const char *)(pf + b * wrs + p), _MM_HINT_T0);
            wv[b] = _mm512_loadu_ps(w + b * wrs + p);
        }
        for (int a = 0; a < rm; a++) {
            __m512 xv = _mm512_loadu_ps(x + a * xrs + p);
            for (int b = 0; b < rn; b++) acc[a][b] = _mm512_fmadd_ps(xv, wv[b], acc[a][b]);
        }
    }
    if (p < k) { /* the last partial step: masked loads, the same lanes */
        __mmask16 mk = (__mmask16)((1u << (k - p)) - 1);
        __m512 wv[4];
        for (int b = 0; b < rn; b++) wv[b] = _mm512_maskz_loadu_ps(mk, w + b * wrs + p);
        for (int a = 0; a < rm; a++) {
            __m512 xv = _mm512_maskz_loadu_ps(mk, x + a * xrs + p);
            for (int b = 0; b < rn; b++) acc[a][b] = _mm512_fmadd_ps(xv, wv[b], acc[a][b]);
        }
    }
    for (int a = 0; a < rm; a++)
        for (int b = 0; b < rn; b++) y[a * yrs + b] = _mm512_reduce_add_ps(acc[a][b]);
}

#define FMM_ROWS(RN)                                                                           \
    switch (rm) {                                                                              \
    case 4: fmm_block(yb, yrs, xb, xrs, wj, wrs, k, 4, RN, pf); break;                         \
    case 3: fmm_block(yb, yrs, xb, xrs, wj, wrs, k, 3, RN, pf); break;                         \
    case 2: fmm_block(yb, yrs, xb, xrs, wj, wrs, k, 2, RN, pf); break;                         \
    default: fmm_block(yb, yrs, xb, xrs, wj, wrs, k, 1, RN, pf); break;                        \
    }

TF void oc__lowp_fmm_avx512(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                            const float *w, int64_t wrs, int64_t k, int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1;) {
        int rn = j1 - j >= 4 ? 4 : 1;
        const float *wj = w + j * wrs;
        for (int64_t i = 0; i < m; i += 4) {
            int rm = m - i >= 4 ? 4 : (int)(m - i);
            float *yb = y + i * yrs + j;
            const float *xb = x + i * xrs;
            const float *pf = i == 0 && j + rn < j1 ? wj + rn * wrs : NULL;
            if (rn == 4) {
                FMM_ROWS(4)
            } else {
                FMM_ROWS(1)
            }
        }
        j += rn;
    }
}

#else

void oc__lowp_fmm_avx512(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                         const float *w, int64_t wrs, int64_t k, int64_t j0, int64_t j1)
{
    (void)y, (void)yrs, (void)x, (void)xrs, (void)m, (void)w, (void)wrs, (void)k, (void)j0,
        (void)j1;
}

#endif
