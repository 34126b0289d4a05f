/* Group-wise weights of the low-precision linear layer (opcore/tile.h:
 * OC_W_I8G, int8 with a scale per group along k; OC_W_U4G, uint4 two a
 * byte with a scale and a zero point per group, as GPTQ / AWQ / torchao
 * store them). Each weight is widened in registers to q' = (float)q or
 * (float)q - zero, and each output is tile.h's sum: per group, 16 lane
 * sums t[p % 16] = fmaf(x_p, q'_p, t) in order of p, then acc[l] =
 * fmaf(t[l], scale, acc[l]); at the end the lanes added as halves. Every
 * step is one IEEE operation in a fixed order, so the portable loop, AVX2
 * (two 8-lane halves) and AVX-512 (one 16-lane register) give the same
 * bits. The scale once per group (not per weight) saves a multiply per
 * weight. lowp.c picks the set (the one it picked for the other weight
 * types) and splits n across cores. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "opcore/tile.h"
#include "tile/lowp_internal.h"

/* ---- portable ----------------------------------------------------------------- */

static inline const float *grow_ptr(const float *a, const oc_weights *w, int64_t j)
{
    return a ? a + j * (w->k / w->group) : NULL;
}

/* Row j's q' (scaled: the dequantised weights) into dst (k floats). */
static void gq_row(float *dst, const oc_weights *w, int64_t j, bool scaled)
{
    const char *row = (const char *)w->data + j * w->row_bytes;
    const float *s = grow_ptr(w->scale, w, j), *z = grow_ptr(w->zero, w, j);
    int64_t gs = w->group;
    for (int64_t g = 0; g < w->k / gs; g++)
        for (int64_t p = g * gs; p < (g + 1) * gs; p++) {
            float q;
            if (w->type == OC_W_I8G) {
                q = (float)((const int8_t *)row)[p];
            } else {
                uint8_t b = ((const uint8_t *)row)[p >> 1];
                q = (float)(p & 1 ? b >> 4 : b & 15) - z[g];
            }
            dst[p] = scaled ? q * s[g] : q;
        }
}

void oc__lowp_gdeq_row(float *dst, const oc_weights *w, int64_t j) { gq_row(dst, w, j, true); }

static inline float red16(const float a[16])
{
    float h8[8], h4[4];
    for (int l = 0; l < 8; l++) h8[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; l++) h4[l] = h8[l] + h8[l + 4];
    return (h4[0] + h4[2]) + (h4[1] + h4[3]);
}

static void gdot_portable(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                          const oc_weights *w, int64_t j0, int64_t j1, float *wbuf)
{
    int64_t gs = w->group;
    for (int64_t j = j0; j < j1; j++) {
        gq_row(wbuf, w, j, false);
        const float *s = grow_ptr(w->scale, w, j);
        for (int64_t i = 0; i < m; i++) {
            const float *xr = x + i * xrs;
            float acc[16] = {0};
            for (int64_t g = 0; g < w->k / gs; g++) {
                float t[16] = {0};
                for (int64_t p = g * gs; p < (g + 1) * gs; p++)
                    t[p & 15] = fmaf(xr[p], wbuf[p], t[p & 15]);
                for (int l = 0; l < 16; l++) acc[l] = fmaf(t[l], s[g], acc[l]);
            }
            y[i * yrs + j] = red16(acc);
        }
    }
}

const oc__lowp_gdot_fn oc__lowp_gdot_portable = gdot_portable;

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define T2 __attribute__((target("avx2,fma,f16c")))
#define T5 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define INL inline __attribute__((always_inline))

/* 16 weights from element p of a row, as bytes: int8's as they are,
 * uint4's unpacked in element order (low nibble first). */
static INL T2 __m128i g16_bytes(const char *row, oc_wtype t, int64_t p)
{
    if (t == OC_W_I8G) return _mm_loadu_si128((const __m128i *)(row + p));
    __m128i b = _mm_loadl_epi64((const __m128i *)(row + p / 2)), f = _mm_set1_epi8(15);
    return _mm_unpacklo_epi8(_mm_and_si128(b, f), _mm_and_si128(_mm_srli_epi16(b, 4), f));
}

/* ---- AVX2: 16 lanes as two 8-lane halves -------------------------------------- */

static INL T2 __m256 g8_avx2(__m128i e, oc_wtype t, __m256 z)
{
    if (t == OC_W_I8G) return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(e));
    return _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(e)), z);
}

/* uint4 elements p .. p + 7 as q' (the same two steps as g8_avx2's)
 * without a shuffle: vpbroadcastd of their 4 bytes (a load), vpsrlvd by
 * 4 l and a mask put element p + l in lane l. */
static INL T2 __m256 u4_8(const char *row, int64_t p, __m256 z)
{
    const __m256i sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    int32_t b;
    memcpy(&b, row + p / 2, 4);
    __m256i q = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b), sh),
                                 _mm256_set1_epi32(15));
    return _mm256_sub_ps(_mm256_cvtepi32_ps(q), z);
}

static INL T2 float red16_avx2(__m256 lo, __m256 hi)
{
    __m256 s8 = _mm256_add_ps(lo, hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

/* nr (1 or 4) rows of w against every row of x; pre: wr are rows of q'
 * already widened (floats), else the weights' own bytes. */
static INL T2 void grows_avx2(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                              const char *const *wr, const float *const *sr,
                              const float *const *zr, oc_wtype t, bool pre, int64_t k,
                              int64_t gs, int64_t j, int nr)
{
    for (int64_t i = 0; i < m; i++) {
        const float *xr = x + i * xrs;
        __m256 alo[4], ahi[4];
        for (int r = 0; r < nr; r++) alo[r] = ahi[r] = _mm256_setzero_ps();
        for (int64_t g = 0; g < k / gs; g++) {
            __m256 z[4], lo[4], hi[4];
            for (int r = 0; r < nr; r++) {
                z[r] = t == OC_W_U4G && !pre ? _mm256_set1_ps(zr[r][g]) : _mm256_setzero_ps();
                lo[r] = hi[r] = _mm256_setzero_ps();
            }
            for (int64_t p = g * gs; p < (g + 1) * gs; p += 16) {
                __m256 x0 = _mm256_loadu_ps(xr + p), x1 = _mm256_loadu_ps(xr + p + 8);
                for (int r = 0; r < nr; r++) {
                    __m256 w0, w1;
                    if (pre) {
                        w0 = _mm256_loadu_ps((const float *)wr[r] + p);
                        w1 = _mm256_loadu_ps((const float *)wr[r] + p + 8);
                    } else if (t == OC_W_U4G) {
                        w0 = u4_8(wr[r], p, z[r]);
                        w1 = u4_8(wr[r], p + 8, z[r]);
                    } else {
                        __m128i e = g16_bytes(wr[r], t, p);
                        w0 = g8_avx2(e, t, z[r]);
                        w1 = g8_avx2(_mm_srli_si128(e, 8), t, z[r]);
                    }
                    lo[r] = _mm256_fmadd_ps(x0, w0, lo[r]);
                    hi[r] = _mm256_fmadd_ps(x1, w1, hi[r]);
                }
            }
            for (int r = 0; r < nr; r++) {
                __m256 s = _mm256_set1_ps(sr[r][g]);
                alo[r] = _mm256_fmadd_ps(lo[r], s, alo[r]);
                ahi[r] = _mm256_fmadd_ps(hi[r], s, ahi[r]);
            }
        }
        for (int r = 0; r < nr; r++) y[i * yrs + j + r] = red16_avx2(alo[r], ahi[r]);
    }
}

/* q' of rows j .. j + nr of w into buf (nr rows of k floats). */
static INL T2 void gq_avx2(float *buf, const oc_weights *w, oc_wtype t, int64_t j, int nr)
{
    int64_t k = w->k, gs = w->group, ng = k / gs;
    for (int r = 0; r < nr; r++) {
        const char *row = (const char *)w->data + (j + r) * w->row_bytes;
        const float *zr = t == OC_W_U4G ? w->zero + (j + r) * ng : 0;
        for (int64_t g = 0; g < ng; g++) {
            __m256 z = zr ? _mm256_set1_ps(zr[g]) : _mm256_setzero_ps();
            for (int64_t p = g * gs; p < (g + 1) * gs; p += 16) {
                __m128i e = g16_bytes(row, t, p);
                _mm256_storeu_ps(buf + r * k + p, g8_avx2(e, t, z));
                _mm256_storeu_ps(buf + r * k + p + 8, g8_avx2(_mm_srli_si128(e, 8), t, z));
            }
        }
    }
}

/* Rows j .. j + nr of w: their bytes, scales and (uint4) zero points;
 * 4 rows from j where as many are left, else 1 (the count returned). */
static inline int grows_of(const oc_weights *w, int64_t j, int64_t j1, const char *wr[4],
                           const float *sr[4], const float *zr[4])
{
    int nr = j1 - j >= 4 ? 4 : 1;
    int64_t ng = w->k / w->group;
    for (int r = 0; r < nr; r++) {
        wr[r] = (const char *)w->data + (j + r) * w->row_bytes;
        sr[r] = w->scale + (j + r) * ng;
        zr[r] = w->type == OC_W_U4G ? w->zero + (j + r) * ng : NULL;
    }
    return nr;
}

/* The row loop of both sets: 4 rows of w at a time (then 1); m <= 2
 * widens in registers for each row of x, more rows once into wbuf; gs
 * the group (a constant where the caller made one). */
#define GDOT_BODY(GROWS, GQ)                                                                  \
    int64_t k = w->k;                                                                         \
    for (int64_t j = j0; j < j1;) {                                                           \
        const char *wr[4] = {0};                                                              \
        const float *sr[4] = {0}, *zr[4] = {0};                                               \
        int nr = grows_of(w, j, j1, wr, sr, zr);                                              \
        bool pre = m > 2;                                                                     \
        if (pre) {                                                                            \
            GQ(wbuf, w, t, j, nr);                                                            \
            for (int r = 0; r < nr; r++) wr[r] = (const char *)(wbuf + r * k);               \
        }                                                                                     \
        if (nr == 4 && pre)                                                                   \
            GROWS(y, yrs, x, xrs, m, wr, sr, zr, t, true, k, gs, j, 4);                      \
        else if (nr == 4)                                                                     \
            GROWS(y, yrs, x, xrs, m, wr, sr, zr, t, false, k, gs, j, 4);                     \
        else if (pre)                                                                         \
            GROWS(y, yrs, x, xrs, m, wr, sr, zr, t, true, k, gs, j, 1);                      \
        else                                                                                  \
            GROWS(y, yrs, x, xrs, m, wr, sr, zr, t, false, k, gs, j, 1);                     \
        j += nr;                                                                              \
    }

/* Both sets' entry: int8 groups, or uint4 with the common group sizes made
 * constants (its steps per group known: the loop unrolled). */
#define GDOT_BY_TYPE(FN)                                                                      \
    if (w->type == OC_W_I8G)                                                                  \
        FN(y, yrs, x, xrs, m, w, OC_W_I8G, w->group, j0, j1, wbuf);                           \
    else if (w->group == 32)                                                                  \
        FN(y, yrs, x, xrs, m, w, OC_W_U4G, 32, j0, j1, wbuf);                                 \
    else if (w->group == 128)                                                                 \
        FN(y, yrs, x, xrs, m, w, OC_W_U4G, 128, j0, j1, wbuf);                                \
    else                                                                                      \
        FN(y, yrs, x, xrs, m, w, OC_W_U4G, w->group, j0, j1, wbuf);

static INL T2 void gdot_avx2_t(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                               const oc_weights *w, oc_wtype t, int64_t gs, int64_t j0,
                               int64_t j1, float *wbuf)
{
    GDOT_BODY(grows_avx2, gq_avx2)
}

static T2 void gdot_avx2(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                         const oc_weights *w, int64_t j0, int64_t j1, float *wbuf)
{
    GDOT_BY_TYPE(gdot_avx2_t)
}

/* ---- AVX-512: 16 lanes in one register ---------------------------------------- */

/* uint4: a group's 16 values of q' (q = 0..15 minus the zero point: the
 * same subtraction as the others make) looked up with vpermps, which
 * reads the low 4 bits of each index, so the nibbles need no masking. */
static INL T5 __m512 u4_table(float zero)
{
    const __m512 iota =
        _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return _mm512_sub_ps(iota, _mm512_set1_ps(zero));
}

static INL T5 __m512 g16_avx512(const char *row, oc_wtype t, int64_t p, __m512 tab)
{
    if (t == OC_W_I8G)
        return _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(row + p))));
    __m128i b = _mm_loadl_epi64((const __m128i *)(row + p / 2));
    __m128i e = _mm_unpacklo_epi8(b, _mm_srli_epi16(b, 4)); /* low 4 bits: elements p.. */
    return _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(e), tab);
}

static INL T5 float red16_avx512(__m512 v)
{
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return red16_avx2(_mm512_castps512_ps256(v), hi);
}

/* uint4 for one or two rows of x (a GEMV: weights read once, the
 * shuffle port the limit): vpbroadcastq of 8 bytes (16 weights, a load,
 * no shuffle), vpsrlvd by 4 * (l / 2) puts element l / 2 + 8 (l & 1) in
 * the low 4 bits of lane l, and vpermps looks its q' up: one shuffle per
 * 16 weights (g16_avx512 takes two). x's 16 values of each step are
 * ordered the same way (xp, once per call), so each lane sums tile.h's
 * lane l / 2 + 8 (l & 1) in order of p, and the lanes are put back in
 * order before the halves are added: the same bits. */
static INL T5 __m512 u4_bcast(const char *row, int64_t p, __m512 tab)
{
    const __m512i sh =
        _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);
    int64_t b;
    memcpy(&b, row + p / 2, 8);
    return _mm512_permutexvar_ps(_mm512_srlv_epi32(_mm512_set1_epi64(b), sh), tab);
}

/* Lane l of x's each 16 values from element l / 2 + 8 (l & 1) (u4_bcast's
 * order): k a multiple of 16 (of the group). */
static INL T5 void u4_xorder(float *xp, const float *x, int64_t k)
{
    const __m512i ix = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    for (int64_t p = 0; p < k; p += 16)
        _mm512_storeu_ps(xp + p, _mm512_permutexvar_ps(ix, _mm512_loadu_ps(x + p)));
}

static INL T5 void grows_avx512(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                                const char *const *wr, const float *const *sr,
                                const float *const *zr, oc_wtype t, bool pre, int64_t k,
                                int64_t gs, int64_t j, int nr)
{
    for (int64_t i = 0; i < m; i++) {
        const float *xr = x + i * xrs;
        __m512 acc[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
        for (int64_t g = 0; g < k / gs; g++) {
            __m512 z[4], part[4];
            _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++)
            {
                z[r] = t == OC_W_U4G && !pre ? u4_table(zr[r][g]) : _mm512_setzero_ps();
                part[r] = _mm512_setzero_ps();
            }
            for (int64_t p = g * gs; p < (g + 1) * gs; p += 16) {
                __m512 xv = _mm512_loadu_ps(xr + p);
                _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++)
                {
                    __m512 wv = pre             ? _mm512_loadu_ps((const float *)wr[r] + p)
                                : t == OC_W_U4G ? u4_bcast(wr[r], p, z[r])
                                                : g16_avx512(wr[r], t, p, z[r]);
                    part[r] = _mm512_fmadd_ps(xv, wv, part[r]);
                }
            }
            _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++) acc[r] =
                _mm512_fmadd_ps(part[r], _mm512_set1_ps(sr[r][g]), acc[r]);
        }
        /* u4_bcast's lanes back in tile.h's order: l < 8 from 2 l, the others 2 (l - 8) + 1 */
        const __m512i back =
            _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++) y[i * yrs + j + r] = red16_avx512(
            t == OC_W_U4G && !pre ? _mm512_permutexvar_ps(back, acc[r]) : acc[r]);
    }
}

static INL T5 void gq_avx512(float *buf, const oc_weights *w, oc_wtype t, int64_t j, int nr)
{
    int64_t k = w->k, gs = w->group, ng = k / gs;
    for (int r = 0; r < nr; r++) {
        const char *row = (const char *)w->data + (j + r) * w->row_bytes;
        const float *zr = t == OC_W_U4G ? w->zero + (j + r) * ng : 0;
        for (int64_t g = 0; g < ng; g++) {
            __m512 tab = zr ? u4_table(zr[g]) : _mm512_setzero_ps();
            for (int64_t p = g * gs; p < (g + 1) * gs; p += 16)
                _mm512_storeu_ps(buf + r * k + p, g16_avx512(row, t, p, tab));
        }
    }
}

static INL T5 void gdot_avx512_t(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                                 const oc_weights *w, oc_wtype t, int64_t gs, int64_t j0,
                                 int64_t j1, float *wbuf)
{
    if (t == OC_W_U4G && m <= 2) { /* u4_bcast's order of x, in wbuf */
        for (int64_t i = 0; i < m; i++) u4_xorder(wbuf + i * w->k, x + i * xrs, w->k);
        x = wbuf, xrs = w->k;
    }
    GDOT_BODY(grows_avx512, gq_avx512)
}

static T5 void gdot_avx512(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                           const oc_weights *w, int64_t j0, int64_t j1, float *wbuf)
{
    GDOT_BY_TYPE(gdot_avx512_t)
}

const oc__lowp_gdot_fn oc__lowp_gdot_avx2 = gdot_avx2, oc__lowp_gdot_avx512 = gdot_avx512;

#else
const oc__lowp_gdot_fn oc__lowp_gdot_avx2 = 0, oc__lowp_gdot_avx512 = 0;
#endif
