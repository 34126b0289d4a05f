/* The x86 micro-kernels of the low-precision linear layer (lowp.c picks a
 * set at run time from the CPU's features; OC_TILE_ISA caps it):
 *
 *   avx2    (AVX2 + FMA + F16C): float weights 8 at a time (bfloat16 and
 *           float16 widened in registers), 4 rows of w sharing each load of
 *           x; int8 blocks with vpmaddubsw + vpmaddwd on |w| and x signed
 *           by w (exact: x within [-127, 127], which lowp.c ensures).
 *   avx512  (AVX-512 F/BW/VL + VNNI): the block dots with vpdpbusd; int8 x
 *           int8 as u8 x s8 on 512-bit registers, (x + 128) w - 128 sum(w),
 *           4 x 4 blocks of (rows of x) x (rows of w); float weights as avx2.
 *
 * Integer sums are exact, and each block's float32 contribution goes into
 * the partial sum tile.h names, so both sets give the portable loop's
 * bits. Built with target attributes: the rest of libopcore stays at the
 * baseline, and these run only where lowp.c found the features. */
#include <string.h>

#include "opcore/tile.h"
#include "tile/lowp_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define T2 __attribute__((target("avx2,fma,f16c")))
#define T5 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define INL inline __attribute__((always_inline))

/* ---- float weights ------------------------------------------------------- */

static INL T2 __m256 ld8(const char *w, oc_wtype t, int64_t p)
{
    if (t == OC_W_F32) return _mm256_loadu_ps((const float *)w + p);
    __m128i h = _mm_loadu_si128((const __m128i *)(w + 2 * p));
    if (t == OC_W_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static INL T2 float w1(const char *w, oc_wtype t, int64_t p)
{
    if (t == OC_W_F32) return ((const float *)w)[p];
    uint16_t h;
    memcpy(&h, w + 2 * p, 2);
    if (t == OC_W_F16) return _cvtsh_ss(h);
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static INL T2 float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* nr (1 or 4) rows of w from row j against every row of x. */
static INL T2 void fdot_rows(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                             const char *w, int64_t wrb, oc_wtype t, int64_t k, int64_t j, int nr)
{
    const char *wr[4];
    for (int r = 0; r < nr; r++) wr[r] = w + (j + r) * wrb;
    for (int64_t i = 0; i < m; i++) {
        const float *xr = x + i * xrs;
        __m256 acc[4], acc2[4];
        for (int r = 0; r < nr; r++) acc[r] = acc2[r] = _mm256_setzero_ps();
        int64_t p = 0;
        for (; p + 16 <= k; p += 16) {
            __m256 xv = _mm256_loadu_ps(xr + p), xv2 = _mm256_loadu_ps(xr + p + 8);
            for (int r = 0; r < nr; r++) {
                acc[r] = _mm256_fmadd_ps(xv, ld8(wr[r], t, p), acc[r]);
                acc2[r] = _mm256_fmadd_ps(xv2, ld8(wr[r], t, p + 8), acc2[r]);
            }
        }
        for (; p + 8 <= k; p += 8) {
            __m256 xv = _mm256_loadu_ps(xr + p);
            for (int r = 0; r < nr; r++) acc[r] = _mm256_fmadd_ps(xv, ld8(wr[r], t, p), acc[r]);
        }
        for (int r = 0; r < nr; r++) {
            float s = hsum8(_mm256_add_ps(acc[r], acc2[r]));
            for (int64_t q = p; q < k; q++) s += xr[q] * w1(wr[r], t, q);
            y[i * yrs + j + r] = s;
        }
    }
}

static INL T2 void fdot_t(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                          const char *w, int64_t wrb, oc_wtype t, int64_t k, int64_t j0, int64_t j1)
{
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4) fdot_rows(y, yrs, x, xrs, m, w, wrb, t, k, j, 4);
    for (; j < j1; j++) fdot_rows(y, yrs, x, xrs, m, w, wrb, t, k, j, 1);
}

static T2 void fdot_avx2(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                         const char *w, int64_t wrb, oc_wtype t, int64_t k, int64_t j0, int64_t j1)
{
    switch (t) {
    case OC_W_BF16: fdot_t(y, yrs, x, xrs, m, w, wrb, OC_W_BF16, k, j0, j1); break;
    case OC_W_F16: fdot_t(y, yrs, x, xrs, m, w, wrb, OC_W_F16, k, j0, j1); break;
    default: fdot_t(y, yrs, x, xrs, m, w, wrb, OC_W_F32, k, j0, j1); break;
    }
}

/* ---- Q8_0 / Q4_0 blocks ---------------------------------------------------- */

/* A block's 32 weights as int8 (Q4_0: nibble - 8, elements 0..15 from the
 * low nibbles, 16..31 from the high ones). */
static INL T2 __m256i block_w(const char *blk, oc_wtype t)
{
    if (t == OC_W_Q8_0) return _mm256_loadu_si256((const __m256i *)(blk + 2));
    __m128i v = _mm_loadu_si128((const __m128i *)(blk + 2)), f = _mm_set1_epi8(15);
    __m256i w = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), f), _mm_and_si128(v, f));
    return _mm256_sub_epi8(w, _mm256_set1_epi8(8));
}

/* 8 int32 lanes summing to the block's exact product with x (|x| <= 127). */
static INL T2 __m256i bsum_avx2(const char *blk, oc_wtype t, const int8_t *xq)
{
    __m256i w = block_w(blk, t), x = _mm256_loadu_si256((const __m256i *)xq);
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static INL T5 __m256i bsum_vnni(const char *blk, oc_wtype t, const int8_t *xq)
{
    __m256i w = block_w(blk, t), x = _mm256_loadu_si256((const __m256i *)xq);
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w),
                               _mm256_sign_epi8(x, w));
}

/* The totals of 8 vectors of 8 lanes, lane l = the sum of s[l]. */
static INL T2 __m256i totals8(const __m256i s[8])
{
    __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                            _mm256_permute2x128_si256(a, b, 0x31));
}

static INL T2 int32_t hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static INL T2 float half1(const char *blk)
{
    uint16_t h;
    memcpy(&h, blk, 2);
    return _cvtsh_ss(h);
}

#define QDOT_BODY(BSUM)                                                                            \
    int64_t bb = t == OC_W_Q8_0 ? (int64_t)sizeof(oc_block_q8_0) : (int64_t)sizeof(oc_block_q4_0); \
    __m256 acc = _mm256_setzero_ps();                                                              \
    int64_t b = 0;                                                                                 \
    for (; b + 8 <= nb; b += 8) {                                                                  \
        __m256i s[8];                                                                              \
        uint16_t hd[8];                                                                            \
        for (int l = 0; l < 8; l++) {                                                              \
            const char *blk = wrow + (b + l) * bb;                                                 \
            s[l] = BSUM(blk, t, xq + (b + l) * OC_QK);                                             \
            memcpy(&hd[l], blk, 2);                                                                \
        }                                                                                          \
        __m256 d = _mm256_mul_ps(_mm256_loadu_ps(xd + b),                                          \
                                 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)hd)));           \
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(totals8(s)), d, acc);                             \
    }                                                                                              \
    float part[8];                                                                                 \
    _mm256_storeu_ps(part, acc);                                                                   \
    for (; b < nb; b++) {                                                                          \
        const char *blk = wrow + b * bb;                                                           \
        float d = xd[b] * half1(blk);                                                              \
        part[b % 8] =                                                                              \
            __builtin_fmaf((float)hsum_i32(BSUM(blk, t, xq + b * OC_QK)), d, part[b % 8]);         \
    }                                                                                              \
    return oc__lowp_sum8(part);

static INL T2 float qdot_avx2_t(const char *wrow, oc_wtype t, const int8_t *xq, const float *xd,
                                int64_t nb)
{
    QDOT_BODY(bsum_avx2)
}

static T2 float qdot_avx2(const char *wrow, oc_wtype t, const int8_t *xq, const float *xd,
                          int64_t nb)
{
    return t == OC_W_Q8_0 ? qdot_avx2_t(wrow, OC_W_Q8_0, xq, xd, nb)
                          : qdot_avx2_t(wrow, OC_W_Q4_0, xq, xd, nb);
}

static INL T5 float qdot_vnni_t(const char *wrow, oc_wtype t, const int8_t *xq, const float *xd,
                                int64_t nb)
{
    QDOT_BODY(bsum_vnni)
}

static T5 float qdot_vnni(const char *wrow, oc_wtype t, const int8_t *xq, const float *xd,
                          int64_t nb)
{
    return t == OC_W_Q8_0 ? qdot_vnni_t(wrow, OC_W_Q8_0, xq, xd, nb)
                          : qdot_vnni_t(wrow, OC_W_Q4_0, xq, xd, nb);
}

/* ---- int8 x int8 ------------------------------------------------------------ */

static INL T2 void i8_rows_avx2(float *y, int64_t yrs, const int8_t *x, int64_t xrs,
                                const float *xs, int64_t m, const int8_t *w, int64_t wrb,
                                const float *ws, int64_t k, int64_t j, int nr)
{
    const int8_t *wr[4];
    for (int r = 0; r < nr; r++) wr[r] = w + (j + r) * wrb;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < m; i++) {
        const int8_t *xr = x + i * xrs;
        __m256i acc[4];
        for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_si256();
        int64_t p = 0;
        for (; p + 32 <= k; p += 32) {
            __m256i xv = _mm256_loadu_si256((const __m256i *)(xr + p));
            for (int r = 0; r < nr; r++) {
                __m256i wv = _mm256_loadu_si256((const __m256i *)(wr[r] + p));
                __m256i pr =
                    _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
                acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(pr, ones));
            }
        }
        for (int r = 0; r < nr; r++) {
            int32_t s = hsum_i32(acc[r]);
            for (int64_t q = p; q < k; q++) s += (int32_t)xr[q] * wr[r][q];
            y[i * yrs + j + r] = ((float)s * xs[i]) * ws[j + r];
        }
    }
}

static T2 void i8_avx2(float *y, int64_t yrs, const int8_t *x, int64_t xrs, const float *xs,
                       int64_t m, const int8_t *w, int64_t wrb, const float *ws, int64_t k,
                       int64_t j0, int64_t j1)
{
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4) i8_rows_avx2(y, yrs, x, xrs, xs, m, w, wrb, ws, k, j, 4);
    for (; j < j1; j++) i8_rows_avx2(y, yrs, x, xrs, xs, m, w, wrb, ws, k, j, 1);
}

/* One 64-byte step of an mr x nr block: (x + 128) as u8 times w as s8. */
#define I8_STEP(LOADW, LOADX)                                                                      \
    do {                                                                                           \
        __m512i wv[4], xv[4];                                                                      \
        _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++) wv[r] = LOADW(wr[r] + p);             \
        _Pragma("GCC unroll 4") for (int a = 0; a < mr; a++) xv[a] =                               \
            _mm512_xor_si512(LOADX(x + (i + a) * xrs + p), flip);                                  \
        _Pragma("GCC unroll 4") for (int a = 0; a < mr; a++)                                       \
            _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++) acc[a][r] =                       \
                _mm512_dpbusd_epi32(acc[a][r], xv[a], wv[r]);                                      \
    } while (0)

#define LOAD_FULL(q) _mm512_loadu_si512((const void *)(q))
#define LOAD_TAIL(q) _mm512_maskz_loadu_epi8(mk, (q))

/* mr rows of x from i against nr rows of w from j: (x + 128) as u8 times w
 * as s8 (vpdpbusd, no intermediate saturation), minus 128 sum(w). */
static INL T5 void i8_block512(float *y, int64_t yrs, const int8_t *x, int64_t xrs, const float *xs,
                               const int8_t *const wr[4], const int32_t wsum[4], const float *ws,
                               int64_t k, int64_t i, int64_t j, int mr, int nr)
{
    __m512i acc[4][4];
    _Pragma("GCC unroll 4") for (int a = 0; a < mr; a++)
        _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++) acc[a][r] = _mm512_setzero_si512();
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    int64_t p = 0;
    for (; p + 64 <= k; p += 64) I8_STEP(LOAD_FULL, LOAD_FULL);
    if (p < k) {
        __mmask64 mk = ((__mmask64)1 << (k - p)) - 1;
        I8_STEP(LOAD_TAIL, LOAD_TAIL);
    }
    _Pragma("GCC unroll 4") for (int a = 0; a < mr; a++)
        _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++) {
            int32_t s = _mm512_reduce_add_epi32(acc[a][r]) - 128 * wsum[r];
            y[(i + a) * yrs + j + r] = ((float)s * xs[i + a]) * ws[j + r];
        }
}

static INL T5 int32_t wsum512(const int8_t *w, int64_t k)
{
    __m512i acc = _mm512_setzero_si512();
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t p = 0; p < k; p += 64) {
        __mmask64 mk = k - p >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (k - p)) - 1);
        acc = _mm512_dpbusd_epi32(acc, ones, _mm512_maskz_loadu_epi8(mk, w + p));
    }
    return _mm512_reduce_add_epi32(acc);
}

#define I8_NR(NR)                                                                                 \
    do {                                                                                          \
        int64_t i = 0;                                                                            \
        for (; i + 4 <= m; i += 4) i8_block512(y, yrs, x, xrs, xs, wr, wsum, ws, k, i, j, 4, NR); \
        switch (m - i) {                                                                          \
        case 3: i8_block512(y, yrs, x, xrs, xs, wr, wsum, ws, k, i, j, 3, NR); break;             \
        case 2: i8_block512(y, yrs, x, xrs, xs, wr, wsum, ws, k, i, j, 2, NR); break;             \
        case 1: i8_block512(y, yrs, x, xrs, xs, wr, wsum, ws, k, i, j, 1, NR); break;             \
        default: break;                                                                           \
        }                                                                                         \
    } while (0)

static T5 void i8_avx512(float *y, int64_t yrs, const int8_t *x, int64_t xrs, const float *xs,
                         int64_t m, const int8_t *w, int64_t wrb, const float *ws, int64_t k,
                         int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j += 4) {
        int nr = j1 - j >= 4 ? 4 : (int)(j1 - j);
        const int8_t *wr[4];
        int32_t wsum[4];
        for (int r = 0; r < nr; r++) {
            wr[r] = w + (j + r) * wrb;
            wsum[r] = wsum512(wr[r], k);
        }
        switch (nr) {
        case 4: I8_NR(4); break;
        case 3: I8_NR(3); break;
        case 2: I8_NR(2); break;
        default: I8_NR(1); break;
        }
    }
}

const oc__lowp_kernels oc__lowp_avx2 = {"avx2", fdot_avx2, qdot_avx2, i8_avx2, true};
const oc__lowp_kernels oc__lowp_avx512 = {"avx512-vnni", fdot_avx2, qdot_vnni, i8_avx512, false};

#else /* not x86-64 with GCC or clang: the portable set only */
const oc__lowp_kernels oc__lowp_avx2 = {"avx2", 0, 0, 0, false};
const oc__lowp_kernels oc__lowp_avx512 = {"avx512-vnni", 0, 0, 0, false};
#endif
