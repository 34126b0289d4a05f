/* bfloat16 x bfloat16 products of oc_tile_matmul on the bfloat16 linear
 * layer's AMX-BF16 kernel (lowp_x86.c), and the staging of x both use:
 * x's rows copied (or rounded from float32) into the padded layout the
 * kernels read. Apart from lowp.c so that matmul.c, which lowp.c calls for
 * the widened products, can call these without a circle of files. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "opcore/tile.h"
#include "opcore/vec.h"
#include "tile/lowp_internal.h"
#include "tile/tile_internal.h"

const uint16_t *oc__lowp_bf16p_stage(const oc_tile *x, int64_t xrs, int64_t k, int64_t *xs,
                                     int64_t *kp, void **pack, const char *fn)
{
    int64_t m = x->rows, mp = (m + 15) / 16 * 16;
    *kp = (k + 31) / 32 * 32;
    *xs = *kp + 32; /* rows 64 bytes off 4 KiB strides: 16 rows in 16 L1 sets */
    oc_bfloat16 *xb =
        oc__tile_scratch(OC__SCRATCH_LOWP + 0, (size_t)(mp * *xs) * sizeof(oc_bfloat16), fn);
    *pack = oc__tile_scratch(OC__SCRATCH_LOWP + 3, oc__LOWP_BF16P_BYTES(*kp, mp), fn);
    if (!xb || !*pack) return NULL;
    for (int64_t i = 0; i < m; i++) {
        if (x->dtype == OC_BFLOAT16)
            memcpy(xb + i * *xs, (const oc_bfloat16 *)x->data + i * xrs,
                   (size_t)k * sizeof(oc_bfloat16));
        else
            oc_f32_to_bf16_n(xb + i * *xs, (const float *)x->data + i * xrs, k);
        memset(xb + i * *xs + k, 0, (size_t)(*kp - k) * sizeof(oc_bfloat16));
    }
    memset(xb + m * *xs, 0, (size_t)((mp - m) * *xs) * sizeof(oc_bfloat16));
    return xb;
}

bool oc__lowp_bf16_matmul_takes(const oc_tile *c, const oc_tile *a, const oc_tile *b,
                                unsigned flags)
{
    /* AMX only: AVX512-BF16's vdpbf16ps blocks ran a 512 x 1024 x 2048
     * product at 0.75x the widened BLIS path (OC_TILE_ISA=avx512bf16) */
    const oc__lowp_kernels *ks = oc__lowp_kernels_get();
    return a->dtype == OC_BFLOAT16 && b->dtype == OC_BFLOAT16 &&
           (c->dtype == OC_FLOAT32 || c->dtype == OC_BFLOAT16) && !(flags & OC_TILE_TRANS_A) &&
           ks == &oc__lowp_amx && oc__lowp_bf16p_for(ks, OC_W_BF16, c->rows, a->cols) &&
           (a->cs == 1 || a->cols == 1) && (b->cs == 1 || b->cols == 1) &&
           (c->cs == 1 || c->cols == 1);
}

void oc__lowp_bf16_matmul(oc_tile *c, const oc_tile *a, const oc_tile *b, unsigned flags,
                          bool accumulate, const char *fn)
{
    int64_t m = c->rows, n = c->cols, k = a->cols, xs, kp;
    bool direct = c->dtype == OC_FLOAT32 && !accumulate;
    float *y = direct ? c->data
                      : oc__tile_scratch(OC__SCRATCH_LOWP + 6, (size_t)(m * n) * sizeof(float), fn);
    void *pack;
    const uint16_t *xb =
        y ? oc__lowp_bf16p_stage(a, m > 1 ? a->rs : k, k, &xs, &kp, &pack, fn) : NULL;
    if (!xb) return;
    int64_t yrs = direct && m > 1 ? c->rs : n;
    int64_t brs = b->rows > 1 ? b->rs : 0; /* b's rows: n of k (transposed) or k of n */
    oc__lowp_kernels_get()->bf16p(y, yrs, xb, xs, kp, m, b->data,
                                  brs * (int64_t)sizeof(oc_bfloat16), !(flags & OC_TILE_TRANS_B),
                                  k, 0, n, pack);
    if (direct) return;
    oc_tile acc = {y, m, n, n, 1, OC_FLOAT32, false};
    if (accumulate)
        oc_tile_binary(c, c, &acc, OC_TILE_ADD); /* c float32: c += a op(b) */
    else
        oc_tile_copy(c, &acc); /* one rounding, to bfloat16 */
}

const char *oc__lowp_bf16_matmul_path(oc_dtype dtype, int64_t m, unsigned flags)
{
    static _Thread_local char buf[256];
    oc_tile t = {NULL, m, 1, 1, 1, OC_BFLOAT16, false}, c = {NULL, m, 1, 1, 1, OC_FLOAT32, false};
    if (dtype != OC_BFLOAT16 || !oc__lowp_bf16_matmul_takes(&c, &t, &t, flags)) return NULL;
    snprintf(buf, sizeof buf,
             "bfloat16, m >= %d: amx-bf16 tdpbf16ps, 32 x 32 blocks on b packed in 64-column "
             "panels (pairs of k), exact products summed in float32 (not the widened BLIS "
             "path's bits)",
             OC__LOWP_BF16P_M);
    return buf;
}
