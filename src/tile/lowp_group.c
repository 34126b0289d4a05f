/* Group-wise weights of the low-precision linear layer (opcore/tile.h:
 * OC_W_I8G, int8 with a scale per group along k; OC_W_U4G, uint4 two a
 * byte with a scale and a zero point per group, as GPTQ / AWQ / torchao
 * store them). Each weight is dequantised in registers, w = (float)q * s
 * or ((float)q - z) * s, and each output is tile.h's 16-lane sum:
 * acc[p % 16] = fmaf(x_p, w_p, acc[p % 16]) in order of p, the lanes
 * added as halves. Every step is one IEEE operation in a fixed order, so
 * the portable loop, AVX2 (two 8-lane halves) and AVX-512 (one 16-lane
 * register) give the same bits. lowp.c picks the set (the one it picked
 * for the other weight types) and splits n across cores. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "opcore/tile.h"
#include "tile/lowp_internal.h"

/* ---- portable ----------------------------------------------------------------- */

static inline const float *grow_ptr(const float *a, const oc_weights *w, int64_t j)
{
    return a ? a + j * (w->k / w->group) : NULL;
}

void oc__lowp_gdeq_row(float *dst, const oc_weights *w, int64_t j)
{
    const char *row = (const char *)w->data + j * w->row_bytes;
    const float *s = grow_ptr(w->scale, w, j), *z = grow_ptr(w->zero, w, j);
    int64_t gs = w->group;
    for (int64_t g = 0; g < w->k / gs; g++)
        for (int64_t p = g * gs; p < (g + 1) * gs; p++) {
            if (w->type == OC_W_I8G) {
                dst[p] = (float)((const int8_t *)row)[p] * s[g];
            } else {
                uint8_t b = ((const uint8_t *)row)[p >> 1];
                dst[p] = ((float)(p & 1 ? b >> 4 : b & 15) - z[g]) * s[g];
            }
        }
}

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
    for (int64_t j = j0; j < j1; j++) {
        oc__lowp_gdeq_row(wbuf, w, j);
        for (int64_t i = 0; i < m; i++) {
            const float *xr = x + i * xrs;
            float acc[16] = {0};
            for (int64_t p = 0; p < w->k; p++) acc[p & 15] = fmaf(xr[p], wbuf[p], acc[p & 15]);
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

static INL T2 __m256 g8_avx2(__m128i e, oc_wtype t, __m256 s, __m256 z)
{
    if (t == OC_W_I8G) return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(e)), s);
    return _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(e)), z), s);
}

static INL T2 float red16_avx2(__m256 lo, __m256 hi)
{
    __m256 s8 = _mm256_add_ps(lo, hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

/* nr (1 or 4) rows of w against every row of x; t OC_W_F32: rows already
 * dequantised (wr float rows). */
static INL T2 void grows_avx2(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                              const char *const *wr, const float *const *sr,
                              const float *const *zr, oc_wtype t, int64_t k, int64_t gs,
                              int64_t j, int nr)
{
    for (int64_t i = 0; i < m; i++) {
        const float *xr = x + i * xrs;
        __m256 lo[4], hi[4];
        for (int r = 0; r < nr; r++) lo[r] = hi[r] = _mm256_setzero_ps();
        for (int64_t g = 0; g < k / gs; g++) {
            __m256 s[4], z[4];
            if (t != OC_W_F32)
                for (int r = 0; r < nr; r++) {
                    s[r] = _mm256_set1_ps(sr[r][g]);
                    z[r] = t == OC_W_U4G ? _mm256_set1_ps(zr[r][g]) : _mm256_setzero_ps();
                }
            for (int64_t p = g * gs; p < (g + 1) * gs; p += 16) {
                __m256 x0 = _mm256_loadu_ps(xr + p), x1 = _mm256_loadu_ps(xr + p + 8);
                for (int r = 0; r < nr; r++) {
                    __m256 w0, w1;
                    if (t == OC_W_F32) {
                        w0 = _mm256_loadu_ps((const float *)wr[r] + p);
                        w1 = _mm256_loadu_ps((const float *)wr[r] + p + 8);
                    } else {
                        __m128i e = g16_bytes(wr[r], t, p);
                        w0 = g8_avx2(e, t, s[r], z[r]);
                        w1 = g8_avx2(_mm_srli_si128(e, 8), t, s[r], z[r]);
                    }
                    lo[r] = _mm256_fmadd_ps(x0, w0, lo[r]);
                    hi[r] = _mm256_fmadd_ps(x1, w1, hi[r]);
                }
            }
        }
        for (int r = 0; r < nr; r++) y[i * yrs + j + r] = red16_avx2(lo[r], hi[r]);
    }
}

/* Rows j .. j + nr of w dequantised into buf (nr rows of k floats). */
static INL T2 void gdeq_avx2(float *buf, const oc_weights *w, oc_wtype t, int64_t j, int nr)
{
    int64_t k = w->k, gs = w->group, ng = k / gs;
    for (int r = 0; r < nr; r++) {
        const char *row = (const char *)w->data + (j + r) * w->row_bytes;
        const float *sr = w->scale + (j + r) * ng, *zr = t == OC_W_U4G ? w->zero + (j + r) * ng : 0;
        for (int64_t g = 0; g < ng; g++) {
            __m256 s = _mm256_set1_ps(sr[g]), z = zr ? _mm256_set1_ps(zr[g]) : _mm256_setzero_ps();
            for (int64_t p = g * gs; p < (g + 1) * gs; p += 16) {
                __m128i e = g16_bytes(row, t, p);
                _mm256_storeu_ps(buf + r * k + p, g8_avx2(e, t, s, z));
                _mm256_storeu_ps(buf + r * k + p + 8, g8_avx2(_mm_srli_si128(e, 8), t, s, z));
            }
        }
    }
}

/* The row loop of both sets: 4 rows of w at a time (then 1); m <= 2
 * dequantises in registers for each row of x, more rows once into wbuf. */
#define GDOT_BODY(GROWS, GDEQ)                                                                  \
    int64_t k = w->k, ng = k / w->group;                                                     \
    for (int64_t j = j0; j < j1;) {                                                          \
        int nr = j1 - j >= 4 ? 4 : 1;                                                        \
        const char *wr[4] = {0};                                                             \
        const float *sr[4] = {0}, *zr[4] = {0};                                              \
        oc_wtype tt = t;                                                                     \
        if (m <= 2) {                                                                        \
            for (int r = 0; r < nr; r++) {                                                   \
                wr[r] = (const char *)w->data + (j + r) * w->row_bytes;                      \
                sr[r] = w->scale + (j + r) * ng;                                             \
                zr[r] = t == OC_W_U4G ? w->zero + (j + r) * ng : NULL;                       \
            }                                                                                \
        } else {                                                                             \
            GDEQ(wbuf, w, t, j, nr);                                                         \
            for (int r = 0; r < nr; r++) wr[r] = (const char *)(wbuf + r * k);              \
            tt = OC_W_F32;                                                                   \
        }                                                                                    \
        if (nr == 4 && tt == OC_W_F32)                                                       \
            GROWS(y, yrs, x, xrs, m, wr, sr, zr, OC_W_F32, k, w->group, j, 4);               \
        else if (nr == 4)                                                                    \
            GROWS(y, yrs, x, xrs, m, wr, sr, zr, t, k, w->group, j, 4);                      \
        else if (tt == OC_W_F32)                                                             \
            GROWS(y, yrs, x, xrs, m, wr, sr, zr, OC_W_F32, k, w->group, j, 1);               \
        else                                                                                 \
            GROWS(y, yrs, x, xrs, m, wr, sr, zr, t, k, w->group, j, 1);                      \
        j += nr;                                                                             \
    }

static INL T2 void gdot_avx2_t(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                               const oc_weights *w, oc_wtype t, int64_t j0, int64_t j1, float *wbuf)
{
    GDOT_BODY(grows_avx2, gdeq_avx2)
}

static T2 void gdot_avx2(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                         const oc_weights *w, int64_t j0, int64_t j1, float *wbuf)
{
    if (w->type == OC_W_I8G)
        gdot_avx2_t(y, yrs, x, xrs, m, w, OC_W_I8G, j0, j1, wbuf);
    else
        gdot_avx2_t(y, yrs, x, xrs, m, w, OC_W_U4G, j0, j1, wbuf);
}

/* ---- AVX-512: 16 lanes in one register ---------------------------------------- */

static INL T5 __m512 g16_avx512(__m128i e, oc_wtype t, __m512 s, __m512 z)
{
    if (t == OC_W_I8G) return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(e)), s);
    return _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(e)), z), s);
}

static INL T5 float red16_avx512(__m512 v)
{
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

static INL T5 void grows_avx512(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                                const char *const *wr, const float *const *sr,
                                const float *const *zr, oc_wtype t, int64_t k, int64_t gs,
                                int64_t j, int nr)
{
    for (int64_t i = 0; i < m; i++) {
        const float *xr = x + i * xrs;
        __m512 acc[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
        for (int64_t g = 0; g < k / gs; g++) {
            __m512 s[4], z[4];
            if (t != OC_W_F32)
                _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++)
                {
                    s[r] = _mm512_set1_ps(sr[r][g]);
                    z[r] = t == OC_W_U4G ? _mm512_set1_ps(zr[r][g]) : _mm512_setzero_ps();
                }
            for (int64_t p = g * gs; p < (g + 1) * gs; p += 16) {
                __m512 xv = _mm512_loadu_ps(xr + p);
                _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++)
                {
                    __m512 wv = t == OC_W_F32 ? _mm512_loadu_ps((const float *)wr[r] + p)
                                              : g16_avx512(g16_bytes(wr[r], t, p), t, s[r], z[r]);
                    acc[r] = _mm512_fmadd_ps(xv, wv, acc[r]);
                }
            }
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++) y[i * yrs + j + r] =
            red16_avx512(acc[r]);
    }
}

static INL T5 void gdeq_avx512(float *buf, const oc_weights *w, oc_wtype t, int64_t j, int nr)
{
    int64_t k = w->k, gs = w->group, ng = k / gs;
    for (int r = 0; r < nr; r++) {
        const char *row = (const char *)w->data + (j + r) * w->row_bytes;
        const float *sr = w->scale + (j + r) * ng, *zr = t == OC_W_U4G ? w->zero + (j + r) * ng : 0;
        for (int64_t g = 0; g < ng; g++) {
            __m512 s = _mm512_set1_ps(sr[g]), z = zr ? _mm512_set1_ps(zr[g]) : _mm512_setzero_ps();
            for (int64_t p = g * gs; p < (g + 1) * gs; p += 16)
                _mm512_storeu_ps(buf + r * k + p, g16_avx512(g16_bytes(row, t, p), t, s, z));
        }
    }
}

static INL T5 void gdot_avx512_t(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                                 const oc_weights *w, oc_wtype t, int64_t j0, int64_t j1,
                                 float *wbuf)
{
    GDOT_BODY(grows_avx512, gdeq_avx512)
}

static T5 void gdot_avx512(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                           const oc_weights *w, int64_t j0, int64_t j1, float *wbuf)
{
    if (w->type == OC_W_I8G)
        gdot_avx512_t(y, yrs, x, xrs, m, w, OC_W_I8G, j0, j1, wbuf);
    else
        gdot_avx512_t(y, yrs, x, xrs, m, w, OC_W_U4G, j0, j1, wbuf);
}

const oc__lowp_gdot_fn oc__lowp_gdot_avx2 = gdot_avx2, oc__lowp_gdot_avx512 = gdot_avx512;

#else
const oc__lowp_gdot_fn oc__lowp_gdot_avx2 = 0, oc__lowp_gdot_avx512 = 0;
#endif
