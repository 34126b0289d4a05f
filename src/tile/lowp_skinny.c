/* Skinny float products for oc_tile_matmul / oc_tile_matmul_to: a GEMV-
 * like c = a b^T (m <= 3 rows of a, b n x k with unit column stride:
 * torch Linear's layout, bigger than libxsmm's small kernels) runs the
 * linear layer's dot-product kernels (the set lowp_kernels.c chose:
 * AVX-512, AVX2, portable), which read each row of b once; BLIS packs b
 * first. Measured against BLIS on the same calls (docs/gemm_library.md):
 * 1.6x at m = 1, even at m = 4, behind from m = 8; a row-update loop for
 * an untransposed b was no faster than BLIS at m = 1, so BLIS keeps that.
 * float32 a and c, float32 / bfloat16 / float16 b. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "opcore/tile.h"
#include "tile/lowp_internal.h"
#include "tile/tile_internal.h"

/* Up to this many rows of a: beyond, BLIS (it re-reads b less). */
#define SKINNY_MAX_M 3
/* Products with m, n and k all up to this stay with libxsmm (matmul.c). */
#define SMALL_DIM 256

bool oc__lowp_skinny_takes(const oc_tile *c, const oc_tile *a, const oc_tile *b, unsigned flags)
{
    if (!(flags & OC_TILE_TRANS_B)) return false;
    int64_t m = c->rows, n = c->cols, k = b->cols;
    bool bfloat = b->dtype == OC_FLOAT32 || b->dtype == OC_BFLOAT16 || b->dtype == OC_FLOAT16;
    return !(flags & OC_TILE_TRANS_A) && a->dtype == OC_FLOAT32 && c->dtype == OC_FLOAT32 &&
           bfloat && m >= 1 && m <= SKINNY_MAX_M && (n > SMALL_DIM || k > SMALL_DIM) &&
           (a->cs == 1 || k <= 1) && (c->cs == 1 || n <= 1) && (b->cs == 1 || b->cols <= 1);
}

void oc__lowp_skinny_matmul(oc_tile *c, const oc_tile *a, const oc_tile *b, unsigned flags,
                            bool accumulate, const char *fn)
{
    int64_t m = c->rows, n = c->cols, crs = m > 1 ? c->rs : n, ars = m > 1 ? a->rs : a->cols;
    int64_t es = (int64_t)oc_dtype_size(b->dtype);
    (void)flags; /* b transposed: rows of b */
    int64_t k = b->cols, brb = (n > 1 ? b->rs : k) * es;
    float *y = c->data;
    int64_t yrs = crs;
    if (accumulate) {
        y = oc__tile_scratch(OC__SCRATCH_LOWP + 7, (size_t)(m * n) * sizeof(float), fn);
        if (!y) return;
        yrs = n;
    }
    oc__lowp_kernels_get()->fdot(y, yrs, a->data, ars, m, b->data, brb,
                                 b->dtype == OC_FLOAT32    ? OC_W_F32
                                 : b->dtype == OC_BFLOAT16 ? OC_W_BF16
                                                           : OC_W_F16,
                                 k, 0, n);
    if (accumulate)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) ((float *)c->data)[i * crs + j] += y[i * n + j];
}

const char *oc__lowp_skinny_path(oc_dtype dtype, int64_t m, int64_t n, int64_t k, unsigned flags)
{
    static _Thread_local char buf[320];
    bool bt = flags & OC_TILE_TRANS_B;
    oc_tile a = {NULL, m, k, k, 1, OC_FLOAT32, false}, c = {NULL, m, n, n, 1, OC_FLOAT32, false};
    oc_tile b = {NULL, bt ? n : k, bt ? k : n, bt ? k : n, 1, dtype, false};
    if (!oc__lowp_skinny_takes(&c, &a, &b, flags)) return NULL;
    snprintf(buf, sizeof buf,
             "%s b transposed, m = %lld <= %d: opcore's skinny %s dot-product kernel (each row "
             "of b read once, 4 at a time)",
             oc_dtype_name(dtype), (long long)m, SKINNY_MAX_M, oc__lowp_kernels_get()->isa);
    return buf;
}
