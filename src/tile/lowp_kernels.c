/* The low-precision linear layer's kernel sets: the portable C kernels,
 * and the choice, once per process, of the set the CPU runs (lowp_x86.c's
 * AVX2, AVX-VNNI, AVX-512 VNNI and AMX sets), capped by OC_TILE_ISA.
 * lowp.c (the linear layer) and lowp_skinny.c (oc_tile_matmul's skinny
 * products) both ask here. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "opcore/tile.h"
#include "tile/lowp_internal.h"
#include "tile/tile_internal.h"

/* ---- portable kernels ------------------------------------------------------- */

static void fdot_portable(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                          const char *w, int64_t wrb, oc_wtype t, int64_t k, int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j++) {
        const char *wr = w + j * wrb;
        for (int64_t i = 0; i < m; i++) {
            const float *xr = x + i * xrs;
            float s[8] = {0};
            int64_t p = 0;
            for (; p + 8 <= k; p += 8)
                for (int l = 0; l < 8; l++) s[l] += xr[p + l] * oc__lowp_wval(wr, t, p + l);
            float r = oc__lowp_sum8(s);
            for (; p < k; p++) r += xr[p] * oc__lowp_wval(wr, t, p);
            y[i * yrs + j] = r;
        }
    }
}

int32_t oc__lowp_block_isum(const char *blk, oc_wtype type, const int8_t *xq)
{
    int32_t s = 0;
    if (type == OC_W_Q8_0) {
        const int8_t *q = (const int8_t *)(blk + 2);
        for (int l = 0; l < OC_QK; l++) s += (int32_t)q[l] * xq[l];
    } else {
        const uint8_t *q = (const uint8_t *)(blk + 2);
        for (int l = 0; l < OC_QK / 2; l++) {
            s += ((int32_t)(q[l] & 15) - 8) * xq[l];
            s += ((int32_t)(q[l] >> 4) - 8) * xq[l + OC_QK / 2];
        }
    }
    return s;
}

/* Block b's term (tile.h's rule) into partial sum b % 8 of s. */
static void qblock_term(float s[8], int64_t b, const char *blk, oc_wtype type, const int8_t *xq,
                        float xd)
{
    oc_half hd;
    memcpy(&hd, blk, 2);
    float d = xd * oc_half_to_f32(hd);
    s[b % 8] = fmaf((float)oc__lowp_block_isum(blk, type, xq), d, s[b % 8]);
}

static float qdot_portable(const char *wrow, oc_wtype type, const int8_t *xq, const float *xd,
                           const int32_t *xsum8, int64_t nb)
{
    (void)xsum8; /* the plain signed sum */
    size_t bb = type == OC_W_Q8_0 ? sizeof(oc_block_q8_0) : sizeof(oc_block_q4_0);
    float s[8] = {0};
    for (int64_t b = 0; b < nb; b++)
        qblock_term(s, b, wrow + b * (int64_t)bb, type, xq + b * OC_QK, xd[b]);
    return oc__lowp_sum8(s);
}

/* Packed Q weights (groups of 8 rows): each block rebuilt as GGML stores
 * it, then qdot_portable's terms and order. */
static void qx8_portable(float *y, int64_t yrs, const int8_t *xq, const float *xd,
                         const int32_t *xsum8, int64_t m, const char *w, int64_t wrb, oc_wtype t,
                         int64_t k, int64_t j0, int64_t j1, void *scratch)
{
    (void)xsum8, (void)scratch;
    oc_wtype bt = oc__lowp_qx8_base(t);
    int64_t nb = k / OC_QK;
    char blk[sizeof(oc_block_q8_0)];
    for (int64_t j = j0; j < j1; j++)
        for (int64_t i = 0; i < m; i++) {
            float s[8] = {0};
            for (int64_t b = 0; b < nb; b++) {
                oc__lowp_qx8_block(blk, w, wrb, bt, j, b);
                qblock_term(s, b, blk, bt, xq + i * k + b * OC_QK, xd[i * nb + b]);
            }
            y[i * yrs + j] = oc__lowp_sum8(s);
        }
}

static void i8_portable(float *y, int64_t yrs, const int8_t *x, int64_t xrs, const float *xs,
                        int64_t m, const int8_t *w, int64_t wrb, const float *ws, int64_t k,
                        int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j++) {
        const int8_t *wr = w + j * wrb;
        for (int64_t i = 0; i < m; i++) {
            const int8_t *xr = x + i * xrs;
            int32_t s = 0;
            for (int64_t p = 0; p < k; p++) s += (int32_t)xr[p] * wr[p];
            oc__lowp_i8_put(y, i * yrs + j, s, xs, i, ws, j);
        }
    }
}

const oc__lowp_kernels oc__lowp_portable = {"portable",  fdot_portable,   qdot_portable,  i8_portable,
                                          .i8p = NULL, .i8p_kalign = 1, .i8p_malign = 1,
                                          .qx8 = qx8_portable};

/* ---- choosing the kernels ------------------------------------------------------- */

static const oc__lowp_kernels *kern;
static pthread_once_t kern_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) && defined(__GNUC__)
#define CPU_HAS(f) __builtin_cpu_supports(f)
#else
#define CPU_HAS(f) 0
#endif

static bool cpu_avx2(void) { return CPU_HAS("avx2") && CPU_HAS("fma") && CPU_HAS("f16c"); }
static bool cpu_avxvnni(void) { return cpu_avx2() && CPU_HAS("avxvnni"); }

static bool cpu_avx512(void)
{
    return cpu_avx2() && CPU_HAS("avx512f") && CPU_HAS("avx512bw") && CPU_HAS("avx512vl") &&
           CPU_HAS("avx512vnni");
}

static bool cpu_avx512bf16(void) { return cpu_avx512() && CPU_HAS("avx512bf16"); }

int oc__tile_isa_cap(void)
{
    static const char *const names[] = {"portable", "avx2", "avxvnni", "avx512", "avx512bf16"};
    const char *cap = getenv("OC_TILE_ISA");
    for (int i = 0; cap && i < OC__ISA_BEST; i++)
        if (!strcasecmp(cap, names[i])) return i;
    return OC__ISA_BEST;
}

/* The best set the CPU runs (AMX for int8 x int8 and bfloat16 weights
 * from 32 rows where Linux grants its tile data, else AVX-512 VNNI with
 * AVX512-BF16's bfloat16 prefill, AVX-512 VNNI, AVX-VNNI, AVX2,
 * portable), capped by OC_TILE_ISA (avx512bf16, avx512, avxvnni, avx2 or
 * portable: a lower path for tests; a higher one than the CPU has is never
 * taken). */
static void kern_init(void)
{
    int lim = oc__tile_isa_cap();
    kern = &oc__lowp_portable;
    if (lim >= OC__ISA_AVX2 && cpu_avx2() && oc__lowp_avx2.fdot) kern = &oc__lowp_avx2;
    if (lim >= OC__ISA_AVXVNNI && cpu_avxvnni() && oc__lowp_avxvnni.fdot) kern = &oc__lowp_avxvnni;
    if (lim >= OC__ISA_AVX512 && cpu_avx512() && oc__lowp_avx512.fdot) kern = &oc__lowp_avx512;
    if (lim >= OC__ISA_AVX512BF16 && kern == &oc__lowp_avx512 && cpu_avx512bf16() && oc__lowp_avx512bf16.fdot)
        kern = &oc__lowp_avx512bf16;
    if (lim >= OC__ISA_BEST && (kern == &oc__lowp_avx512 || kern == &oc__lowp_avx512bf16) &&
        oc__lowp_amx_usable())
        kern = &oc__lowp_amx;
}

const oc__lowp_kernels *oc__lowp_kernels_get(void)
{
    pthread_once(&kern_once, kern_init);
    return kern;
}
