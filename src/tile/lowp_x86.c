/* The x86 micro-kernels of the low-precision linear layer (lowp.c picks a
 * set at run time from the CPU's features; OC_TILE_ISA caps it):
 *
 *   avx-vnni (AVX2 + the VEX vpdpbusd): avx2's set with int8 x int8 by
 *           vpdpbusd on 256-bit registers (CPUs with AVX-VNNI, with or
 *           without AVX-512).
 *   avx2    (AVX2 + FMA + F16C): float weights 8 at a time (bfloat16 and
 *           float16 widened in registers), 4 rows of w sharing each load of
 *           x; int8 blocks with vpmaddubsw + vpmaddwd on |w| and x signed
 *           by w (exact for x within [-127, 127]; x holding -128: both
 *           sides widened to int16, vpmaddwd); Q8_0 / Q4_0 from 4 rows of
 *           x on panels of 16 rows of w packed per call.
 *   avx512  (AVX-512 F/BW/VL + VNNI): the block dots with vpdpbusd; int8 x
 *           int8 as u8 x s8 on 512-bit registers, (w + 128) x - 128 sum(x),
 *           4 x 4 blocks of (rows of x) x (rows of w); float weights as avx2.
 *
 * Integer sums are exact, and each block's float32 contribution goes into
 * the partial sum tile.h names, so both sets give the portable loop's
 * bits. Built with target attributes: the rest of libopcore stays at the
 * baseline, and these run only where lowp.c found the features. */
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "opcore/tile.h"
#include "tile/lowp_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define T2 __attribute__((target("avx2,fma,f16c")))
#define T5 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
/* AVX-VNNI (the VEX form: Alder Lake, Zen 4... without AVX-512 too) */
#define TV __attribute__((target("avx2,fma,f16c,avxvnni")))
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

/* Bytes ahead of the part of each row of w in use that the float dots
 * prefetch (as the block dots do, QPF below): a GEMV reads its weights once,
 * from memory, and more requests in flight than the hardware prefetcher
 * keeps raise the rate a core reads them at. */
#ifndef FPF
#define FPF 1024
#endif
#define WSIZE(t) ((t) == OC_W_F32 ? 4 : 2)
/* Half weights against one row of x on AVX-512 take 8 rows of w a step,
 * each prefetched this many bytes ahead: more streams, each nearer, kept
 * more of w's lines in flight than 4 rows at FPF: in a C loop of the
 * kernel (1x4096x4096 float16, 8 copies of the weights called in turn,
 * three runs) 1.02-1.07x on two cores and 1.02-1.06x on one; with the
 * weights in the last-level cache even (0.99-1.02x). With more rows of x,
 * 8 rows of w would no longer stay in L1 between them. */
#ifndef FPF8
#define FPF8 512
#endif

/* The byte offset from a row's start that its prefetch at off reaches: past
 * the row's kb bytes in use, the same distance into the next group's row
 * (jump bytes on). The rows of a group are read side by side, so without
 * this each group's first FPF bytes of every row but the first come from
 * memory uncovered: the half weights' 8 KiB rows at k = 4096 read 1.10x
 * faster with it on one core, 1.12x on two (float32 1.03x). */
static INL int64_t pf_off(int64_t off, int64_t kb, int64_t jump)
{
    return off >= kb ? off + jump : off;
}

/* jump for the group of nr rows of w from row j, in a part ending at j1. */
static INL int64_t pf_jump(int64_t j, int nr, int64_t j1, int64_t wrb, int64_t kb)
{
    return j + nr < j1 ? nr * wrb - kb : 0;
}

/* nr (1 or 4) rows of w from row j against every row of x. */
static INL T2 void fdot_rows(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                             const char *w, int64_t wrb, oc_wtype t, int64_t k, int64_t j, int nr,
                             int64_t jump)
{
    const char *wr[4];
    for (int r = 0; r < nr; r++) wr[r] = w + (j + r) * wrb;
    int64_t kb = WSIZE(t) * k;
    for (int64_t i = 0; i < m; i++) {
        const float *xr = x + i * xrs;
        __m256 acc[4], acc2[4];
        for (int r = 0; r < nr; r++) acc[r] = acc2[r] = _mm256_setzero_ps();
        int64_t p = 0;
        for (; p + 16 <= k; p += 16) {
            __m256 xv = _mm256_loadu_ps(xr + p), xv2 = _mm256_loadu_ps(xr + p + 8);
            int64_t o = pf_off(WSIZE(t) * p + FPF, kb, jump);
            for (int r = 0; r < nr; r++) {
                _mm_prefetch(wr[r] + o, _MM_HINT_T0);
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
    int64_t kb = WSIZE(t) * k;
    for (; j + 4 <= j1; j += 4)
        fdot_rows(y, yrs, x, xrs, m, w, wrb, t, k, j, 4, pf_jump(j, 4, j1, wrb, kb));
    for (; j < j1; j++)
        fdot_rows(y, yrs, x, xrs, m, w, wrb, t, k, j, 1, pf_jump(j, 1, j1, wrb, kb));
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

/* The same on 512-bit registers (the AVX-512 set): 16 floats a step, the
 * last partial step with masked loads. */
static INL T5 __m512 ld16(const char *w, oc_wtype t, int64_t p, __mmask16 mk)
{
    if (t == OC_W_F32) return _mm512_maskz_loadu_ps(mk, (const float *)w + p);
    __m256i h = _mm256_maskz_loadu_epi16(mk, w + 2 * p);
    if (t == OC_W_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static INL T5 void fdot_rows512(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                                const char *w, int64_t wrb, oc_wtype t, int64_t k, int64_t j,
                                int nr, int64_t jump, int64_t fpf)
{
    const char *wr[8];
    for (int r = 0; r < nr; r++) wr[r] = w + (j + r) * wrb;
    int64_t kb = WSIZE(t) * k;
    const __mmask16 all = 0xffff;
    /* bfloat16: 32 weights a load, each 32-bit lane's pair widened by a
     * shift (the even element) and a mask (the odd one), x's 32 split to
     * match; no shuffle of w: fewer instructions per byte of w keep more
     * of its lines in flight (weights beyond the cache, against the
     * vpmovzxwd-and-shift form: 1.01x / 1.04x on one / two cores with the
     * prefetch above, 1.03x / 1.06x without it). */
    const __m512i bf_hi = _mm512_set1_epi32((int)0xffff0000u);
    const __m512i bf_even =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i bf_odd =
        _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    for (int64_t i = 0; i < m; i++) {
        const float *xr = x + i * xrs;
        __m512 acc[8], acc2[8];
        _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++) acc[r] = acc2[r] = _mm512_setzero_ps();
        int64_t p = 0;
        for (; p + 32 <= k; p += 32) {
            __m512 xv = _mm512_loadu_ps(xr + p), xv2 = _mm512_loadu_ps(xr + p + 16);
            int64_t o = pf_off(WSIZE(t) * p + fpf, kb, jump);
            int64_t o2 = pf_off(4 * p + fpf + 64, kb, jump);
            if (t == OC_W_BF16) { /* acc: x's even elements of the 32, acc2: the odd ones */
                __m512 xe = _mm512_permutex2var_ps(xv, bf_even, xv2);
                __m512 xo = _mm512_permutex2var_ps(xv, bf_odd, xv2);
                _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++)
                {
                    _mm_prefetch(wr[r] + o, _MM_HINT_T0);
                    __m512i v = _mm512_loadu_si512(wr[r] + 2 * p);
                    acc[r] = _mm512_fmadd_ps(xe, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)),
                                             acc[r]);
                    acc2[r] = _mm512_fmadd_ps(xo, _mm512_castsi512_ps(_mm512_and_si512(v, bf_hi)),
                                              acc2[r]);
                }
                continue;
            }
            _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++)
            {
                _mm_prefetch(wr[r] + o, _MM_HINT_T0);
                if (t == OC_W_F32) _mm_prefetch(wr[r] + o2, _MM_HINT_T0);
                acc[r] = _mm512_fmadd_ps(xv, ld16(wr[r], t, p, all), acc[r]);
                acc2[r] = _mm512_fmadd_ps(xv2, ld16(wr[r], t, p + 16, all), acc2[r]);
            }
        }
        for (; p < k; p += 16) {
            __mmask16 mk = k - p >= 16 ? all : (__mmask16)((1u << (k - p)) - 1);
            __m512 xv = _mm512_maskz_loadu_ps(mk, xr + p);
            _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++) acc[r] =
                _mm512_fmadd_ps(xv, ld16(wr[r], t, p, mk), acc[r]);
        }
        _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++) y[i * yrs + j + r] =
            _mm512_reduce_add_ps(_mm512_add_ps(acc[r], acc2[r]));
    }
}

static INL T5 void fdot512_t(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                             const char *w, int64_t wrb, oc_wtype t, int64_t k, int64_t j0,
                             int64_t j1)
{
    int64_t j = j0;
    int64_t kb = WSIZE(t) * k;
    if (m == 1 && t != OC_W_F32)
        for (; j + 8 <= j1; j += 8)
            fdot_rows512(y, yrs, x, xrs, m, w, wrb, t, k, j, 8, pf_jump(j, 8, j1, wrb, kb), FPF8);
    for (; j + 4 <= j1; j += 4)
        fdot_rows512(y, yrs, x, xrs, m, w, wrb, t, k, j, 4, pf_jump(j, 4, j1, wrb, kb), FPF);
    for (; j < j1; j++)
        fdot_rows512(y, yrs, x, xrs, m, w, wrb, t, k, j, 1, pf_jump(j, 1, j1, wrb, kb), FPF);
}

static T5 void fdot_avx512(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                           const char *w, int64_t wrb, oc_wtype t, int64_t k, int64_t j0,
                           int64_t j1)
{
    switch (t) {
    case OC_W_BF16: fdot512_t(y, yrs, x, xrs, m, w, wrb, OC_W_BF16, k, j0, j1); break;
    case OC_W_F16: fdot512_t(y, yrs, x, xrs, m, w, wrb, OC_W_F16, k, j0, j1); break;
    default: fdot512_t(y, yrs, x, xrs, m, w, wrb, OC_W_F32, k, j0, j1); break;
    }
}

/* ---- Q8_0 / Q4_0 blocks ---------------------------------------------------- */

/* Bytes of one Q8_0 / Q4_0 block */
static INL int64_t qblock_bytes(oc_wtype t)
{
    return t == OC_W_Q8_0 ? (int64_t)sizeof(oc_block_q8_0) : (int64_t)sizeof(oc_block_q4_0);
}

/* A block's 32 weights as int8: Q8_0's as they are; Q4_0's as unsigned
 * nibbles 0..15 (elements 0..15 from the low nibbles, 16..31 from the
 * high ones), the - 8 applied to the sum instead: sum((q - 8) x) =
 * sum(q x) - 8 sum(x), with 8 sum(x) per block computed once per call. */
static INL T2 __m256i block_w(const char *blk, oc_wtype t)
{
    if (t == OC_W_Q8_0) return _mm256_loadu_si256((const __m256i *)(blk + 2));
    /* the 16 bytes in both halves (vbroadcasti128: a load, no shuffle), the
     * upper half shifted right by 4 (vpsrlvd), every byte masked to 4 bits:
     * two ALU steps where the 128-bit form took four (a shift, two masks
     * and an insert on the shuffle port) */
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(blk + 2)));
    return _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                            _mm256_set1_epi8(15));
}

/* 8 int32 lanes summing to the block's product with x (|x| <= 127):
 * exact, and for Q4_0 before the - 8 sum(x). Q8_0: |w| times x signed
 * by w; Q4_0: the nibbles are already unsigned. */
static INL T2 __m256i bsum_avx2(const char *blk, oc_wtype t, const int8_t *xq)
{
    __m256i w = block_w(blk, t), x = _mm256_loadu_si256((const __m256i *)xq);
    __m256i p = t == OC_W_Q8_0
                    ? _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w))
                    : _mm256_maddubs_epi16(w, x);
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static INL T5 __m256i bsum_vnni(const char *blk, oc_wtype t, const int8_t *xq)
{
    __m256i w = block_w(blk, t), x = _mm256_loadu_si256((const __m256i *)xq);
    if (t == OC_W_Q4_0) return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, x);
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

/* Bytes ahead of the blocks in use that the block dots prefetch: the
 * weights stream from memory once per token, and a core's own requests
 * keep more of them in flight than the hardware prefetcher alone. */
#ifndef QPF
#define QPF 2048
#endif

#define QDOT_BODY(BSUM)                                                                            \
    int64_t bb = qblock_bytes(t);                                                                  \
    __m256 acc = _mm256_setzero_ps();                                                              \
    int64_t b = 0;                                                                                 \
    for (; b + 8 <= nb; b += 8) {                                                                  \
        __m256i s[8];                                                                              \
        uint16_t hd[8];                                                                            \
        for (int64_t o = 0; o < 8 * bb; o += 64)                                                   \
            _mm_prefetch(wrow + b * bb + QPF + o, _MM_HINT_T0);                                    \
        for (int l = 0; l < 8; l++) {                                                              \
            const char *blk = wrow + (b + l) * bb;                                                 \
            s[l] = BSUM(blk, t, xq + (b + l) * OC_QK);                                             \
            memcpy(&hd[l], blk, 2);                                                                \
        }                                                                                          \
        __m256 d = _mm256_mul_ps(_mm256_loadu_ps(xd + b),                                          \
                                 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)hd)));           \
        __m256i tot = totals8(s);                                                                  \
        if (t == OC_W_Q4_0)                                                                        \
            tot = _mm256_sub_epi32(tot, _mm256_loadu_si256((const __m256i *)(xsum8 + b)));         \
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), d, acc);                                    \
    }                                                                                              \
    float part[8];                                                                                 \
    _mm256_storeu_ps(part, acc);                                                                   \
    for (; b < nb; b++) {                                                                          \
        const char *blk = wrow + b * bb;                                                           \
        float d = xd[b] * half1(blk);                                                              \
        part[b % 8] = __builtin_fmaf(                                                              \
            (float)(hsum_i32(BSUM(blk, t, xq + b * OC_QK)) - (t == OC_W_Q4_0 ? xsum8[b] : 0)), d,  \
            part[b % 8]);                                                                          \
    }                                                                                              \
    return oc__lowp_sum8(part);

#define QARGS                                                                              \
    const char *wrow, oc_wtype t, const int8_t *xq, const float *xd, const int32_t *xsum8, \
        int64_t nb

static INL T2 float qdot_avx2_t(QARGS) { QDOT_BODY(bsum_avx2) }

static T2 float qdot_avx2(QARGS)
{
    return t == OC_W_Q8_0 ? qdot_avx2_t(wrow, OC_W_Q8_0, xq, xd, xsum8, nb)
                          : qdot_avx2_t(wrow, OC_W_Q4_0, xq, xd, xsum8, nb);
}

/* 8 rows of w at a time against each row of x (decode: m < 4): per block
 * the 8 rows' lanes reduce by one totals8 into a register of 8 row totals
 * (lane r: row r), whose float term goes into accumulator b % 8; the 8
 * accumulators add in tile.h's order at the end. The per-pair dot's
 * terms and order, lane by lane, with no per-row reduction and no scalar
 * tail (lowp.c takes it for short rows). Rows past the last 8: the pair
 * dot. */
/* tile.h's order of 8 partial sums, 8 lanes at once: P(l) the partial l */
#define SUM8_PS(P)                                                                              \
    _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(P(0), P(4)), _mm256_add_ps(P(2), P(6))),          \
                  _mm256_add_ps(_mm256_add_ps(P(1), P(5)), _mm256_add_ps(P(3), P(7))))
#define QROWS_ACC(l) acc[l]

#define QROWS_BODY(BSUM, QDOT)                                                                     \
    int64_t nb = k / OC_QK;                                                                        \
    int64_t bb = qblock_bytes(t);                                                                  \
    int64_t j = j0;                                                                                \
    for (; j + 8 <= j1; j += 8) {                                                                  \
        const char *wr = w + j * wrb;                                                              \
        for (int64_t i = 0; i < m; i++) {                                                          \
            const int8_t *xr = xq + i * k;                                                         \
            __m256 acc[8];                                                                         \
            for (int l = 0; l < 8; l++) acc[l] = _mm256_setzero_ps();                              \
            /* the 8 rows' scales of block b + 1 stored while block b runs, so that */        \
            /* their 16-byte load does not wait on 8 narrower stores just made */               \
            uint16_t hd[2][8];                                                                     \
            for (int r = 0; r < 8; r++) memcpy(&hd[0][r], wr + r * wrb, 2);                        \
            for (int64_t b = 0; b < nb; b++) {                                                     \
                __m256i s[8];                                                                      \
                bool line = ((b * bb) & 63) < bb; /* a new line of row 0 */                        \
                for (int r = 0; r < 8; r++) {                                                      \
                    const char *blk = wr + r * wrb + b * bb;                                       \
                    if (line) _mm_prefetch(blk + QPF, _MM_HINT_T0);                                \
                    s[r] = BSUM(blk, t, xr + b * OC_QK);                                           \
                    if (b + 1 < nb) memcpy(&hd[(b + 1) & 1][r], blk + bb, 2);                      \
                }                                                                                  \
                __m256i tot = totals8(s);                                                          \
                if (t == OC_W_Q4_0)                                                                \
                    tot = _mm256_sub_epi32(tot, _mm256_set1_epi32(xsum8[i * nb + b]));             \
                __m256 d = _mm256_mul_ps(                                                          \
                    _mm256_set1_ps(xd[i * nb + b]),                                                \
                    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)hd[b & 1])));                 \
                acc[b % 8] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), d, acc[b % 8]);              \
            }                                                                                      \
            _mm256_storeu_ps(y + i * yrs + j, SUM8_PS(QROWS_ACC));                                 \
        }                                                                                          \
    }                                                                                              \
    for (; j < j1; j++)                                                                            \
        for (int64_t i = 0; i < m; i++)                                                            \
            y[i * yrs + j] = QDOT(w + j * wrb, t, xq + i * k, xd + i * nb, xsum8 + i * nb, nb);

#define QGEMMARGS                                                                            \
    float *y, int64_t yrs, const int8_t *xq, const float *xd, const int32_t *xsum8,          \
        int64_t m, const char *w, int64_t wrb, oc_wtype t, int64_t k, int64_t j0, int64_t j1, \
        void *scratch

/* FN with the block type a constant (each type its own code), and x8:
 * w is groups of 8 rows packed by oc_weights_pack (lowp_pack.c) */
#define Q_BY_TYPE(FN)                                                                  \
    bool x8 = t == OC_W_Q8_0_PACKED || t == OC_W_Q4_0_PACKED;                          \
    if (t == OC_W_Q8_0 || t == OC_W_Q8_0_PACKED)                                       \
        FN(y, yrs, xq, xd, xsum8, m, w, wrb, OC_W_Q8_0, k, j0, j1, scratch, x8);       \
    else                                                                               \
        FN(y, yrs, xq, xd, xsum8, m, w, wrb, OC_W_Q4_0, k, j0, j1, scratch, x8);

static INL T2 void qrows_avx2_t(QGEMMARGS, bool x8)
{
    (void)scratch, (void)x8;
    QROWS_BODY(bsum_avx2, qdot_avx2_t)
}

static T2 void qrows_avx2(QGEMMARGS) { Q_BY_TYPE(qrows_avx2_t) }

static INL T5 float qdot_vnni_t(QARGS) { QDOT_BODY(bsum_vnni) }

static T5 float qdot_vnni(QARGS)
{
    return t == OC_W_Q8_0 ? qdot_vnni_t(wrow, OC_W_Q8_0, xq, xd, xsum8, nb)
                          : qdot_vnni_t(wrow, OC_W_Q4_0, xq, xd, xsum8, nb);
}

/* ---- Q8_0 / Q4_0 blocks, many rows of x: packed column panels -------------
 *
 * Prefill: every row of w meets many rows of x. The per-pair dot above
 * reduces each block's 8 lanes across the register for every (row of x,
 * row of w); here 64 rows of w are packed per block into a panel (4
 * consecutive weights of one row in each int32, 16 rows a register, as
 * u8: Q8_0's w + 128, Q4_0's nibbles) with their scales as float32, and
 * a 4 x 64 block of y takes vpdpbusd of x's 4 bytes, broadcast, lane by
 * lane: each lane ends a block holding the block's exact int32 total for
 * one (row of x, row of w), less 128 sum(x) (Q8_0) or 8 sum(x) (Q4_0).
 * Its float32 term goes into partial sum b % 8 in order of b, and the 8
 * partial sums are added in tile.h's order: the per-pair kernels' bits. */
#define QP 64                          /* rows of w a panel */
#define QPB (8 * QP * 4 + QP * 4)      /* panel bytes per block: 8 quads x 64, 64 scales */
#define QMR 4                          /* rows of x a block of y */

/* Block b of the 8-row groups from row j (x8: w the groups, wrb their
 * stride) into a panel of `rows` rows, rows [j, j + nc) of w: group g's
 * quads at pq + q * rows + 8 g (int32 units; Q4_0's as nibbles 0..15,
 * Q8_0's + 128 as u8 where flip), its scales at pd + 8 g; rows past the
 * groups zero. The groups' quads are already 8 rows a register: no
 * transpose. */
static INL T2 void qpack_x8(int32_t *pq, float *pd, int rows, const char *w, int64_t wrb,
                            oc_wtype t, int64_t b, int64_t j, int nc, bool flip)
{
    int64_t ib = OC__LOWP_QX8_BYTES(t), stride = rows;
    const __m256i nib = _mm256_set1_epi8(15), fl = _mm256_set1_epi8((char)0x80);
    for (int g = 0; g < rows / 8; g++) {
        if (8 * g >= nc) {
            _mm256_storeu_ps(pd + 8 * g, _mm256_setzero_ps());
            for (int q = 0; q < 8; q++)
                _mm256_storeu_si256((__m256i *)(pq + q * stride + 8 * g), _mm256_setzero_si256());
            continue;
        }
        const char *o = w + (j / 8 + g) * wrb + b * ib;
        _mm256_storeu_ps(pd + 8 * g, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)o)));
        if (t == OC_W_Q8_0) {
            for (int q = 0; q < 8; q++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(o + 16 + 32 * q));
                _mm256_storeu_si256((__m256i *)(pq + q * stride + 8 * g),
                                    flip ? _mm256_xor_si256(v, fl) : v);
            }
        } else {
            for (int q = 0; q < 4; q++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(o + 16 + 32 * q));
                _mm256_storeu_si256((__m256i *)(pq + q * stride + 8 * g), _mm256_and_si256(v, nib));
                _mm256_storeu_si256((__m256i *)(pq + (q + 4) * stride + 8 * g),
                                    _mm256_and_si256(_mm256_srli_epi16(v, 4), nib));
            }
        }
    }
}

/* Rows [j, j + nc) of w, every block, into pack (QPB bytes a block). */
static T5 void qpack_panel(char *pack, const char *w, int64_t wrb, oc_wtype t, int64_t nb,
                           int64_t j, int nc, bool x8)
{
    if (x8) {
        for (int64_t b = 0; b < nb; b++)
            qpack_x8((int32_t *)(pack + b * QPB), (float *)(pack + b * QPB + 8 * QP * 4), QP, w,
                     wrb, t, b, j, nc, true);
        return;
    }
    int64_t bb = qblock_bytes(t);
    const char *base = w + j * wrb;
    __m512i off[4];
    __mmask16 mk[4];
    for (int g = 0; g < 4; g++) {
        int left = nc - 16 * g;
        mk[g] = left >= 16 ? (__mmask16)0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
        off[g] = _mm512_mullo_epi32(
            _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                             _mm512_set1_epi32(16 * g)),
            _mm512_set1_epi32((int)wrb));
    }
    const __m512i zero = _mm512_setzero_si512(), flip = _mm512_set1_epi8((char)0x80);
    const __m512i nib = _mm512_set1_epi8(15);
    for (int64_t b = 0; b < nb; b++) {
        const char *blk = base + b * bb;
        int32_t *pq = (int32_t *)(pack + b * QPB);
        float *pd = (float *)(pack + b * QPB + 8 * QP * 4);
        for (int g = 0; g < 4; g++) {
            __m512i h = _mm512_mask_i32gather_epi32(zero, mk[g], off[g], (const void *)blk, 1);
            _mm512_storeu_ps(pd + 16 * g, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)));
            if (t == OC_W_Q8_0) {
                for (int q = 0; q < 8; q++) {
                    __m512i v = _mm512_mask_i32gather_epi32(zero, mk[g], off[g],
                                                            (const void *)(blk + 2 + 4 * q), 1);
                    _mm512_storeu_si512(pq + q * QP + 16 * g, _mm512_xor_si512(v, flip));
                }
            } else {
                for (int q = 0; q < 4; q++) {
                    __m512i v = _mm512_mask_i32gather_epi32(zero, mk[g], off[g],
                                                            (const void *)(blk + 2 + 4 * q), 1);
                    _mm512_storeu_si512(pq + q * QP + 16 * g, _mm512_and_si512(v, nib));
                    _mm512_storeu_si512(pq + (q + 4) * QP + 16 * g,
                                        _mm512_and_si512(_mm512_srli_epi16(v, 4), nib));
                }
            }
        }
    }
}

/* Rows [i, i + mr) of x against the packed panel: part holds mr x 8 x 64
 * float32 partial sums. */
static INL T5 void qp_block(float *y, int64_t yrs, const int8_t *xq, const float *xd,
                            const int32_t *xsum8, int64_t k, const char *pack, oc_wtype t,
                            int64_t nb, int64_t i, int64_t j, int nc, int mr, float *part)
{
    memset(part, 0, sizeof(float) * (size_t)mr * 8 * QP);
    for (int64_t b = 0; b < nb; b++) {
        const int32_t *pq = (const int32_t *)(pack + b * QPB);
        const float *pd = (const float *)(pack + b * QPB + 8 * QP * 4);
        __m512i acc[QMR][4];
        _Pragma("GCC unroll 4") for (int a = 0; a < mr; a++)
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) acc[a][r] = _mm512_setzero_si512();
        _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++)
        {
            __m512i w0 = _mm512_loadu_si512(pq + q * QP), w1 = _mm512_loadu_si512(pq + q * QP + 16);
            __m512i w2 = _mm512_loadu_si512(pq + q * QP + 32);
            __m512i w3 = _mm512_loadu_si512(pq + q * QP + 48);
            _Pragma("GCC unroll 4") for (int a = 0; a < mr; a++)
            {
                int32_t xv;
                memcpy(&xv, xq + (i + a) * k + b * OC_QK + 4 * q, 4);
                __m512i bx = _mm512_set1_epi32(xv);
                acc[a][0] = _mm512_dpbusd_epi32(acc[a][0], w0, bx);
                acc[a][1] = _mm512_dpbusd_epi32(acc[a][1], w1, bx);
                acc[a][2] = _mm512_dpbusd_epi32(acc[a][2], w2, bx);
                acc[a][3] = _mm512_dpbusd_epi32(acc[a][3], w3, bx);
            }
        }
        _Pragma("GCC unroll 4") for (int a = 0; a < mr; a++)
        {
            int32_t o = xsum8[(i + a) * nb + b] * (t == OC_W_Q8_0 ? 16 : 1);
            __m512i ov = _mm512_set1_epi32(o);
            __m512 xdv = _mm512_set1_ps(xd[(i + a) * nb + b]);
            float *pp = part + (a * 8 + b % 8) * QP;
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
            {
                __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[a][r], ov));
                __m512 d = _mm512_mul_ps(xdv, _mm512_loadu_ps(pd + 16 * r));
                _mm512_storeu_ps(pp + 16 * r, _mm512_fmadd_ps(f, d, _mm512_loadu_ps(pp + 16 * r)));
            }
        }
    }
    for (int a = 0; a < mr; a++) {
        const float *s = part + a * 8 * QP;
        for (int r = 0; r < 4 && nc - 16 * r > 0; r++) {
            int left = nc - 16 * r;
            __mmask16 mk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
#define QPS(l) _mm512_loadu_ps(s + (l) * QP + 16 * r)
            __m512 v = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(QPS(0), QPS(4)),
                                                   _mm512_add_ps(QPS(2), QPS(6))),
                                     _mm512_add_ps(_mm512_add_ps(QPS(1), QPS(5)),
                                                   _mm512_add_ps(QPS(3), QPS(7))));
#undef QPS
            _mm512_mask_storeu_ps(y + (i + a) * yrs + j + 16 * r, mk, v);
        }
    }
}

static INL T5 void qgemm_avx512_t(QGEMMARGS, bool x8)
{
    int64_t nb = k / OC_QK;
    char *pack = scratch;
    float *part = (float *)(pack + nb * QPB);
    for (int64_t j = j0; j < j1; j += QP) {
        int nc = j1 - j >= QP ? QP : (int)(j1 - j);
        qpack_panel(pack, w, wrb, t, nb, j, nc, x8);
        int64_t i = 0;
        for (; i + QMR <= m; i += QMR)
            qp_block(y, yrs, xq, xd, xsum8, k, pack, t, nb, i, j, nc, QMR, part);
        switch (m - i) {
        case 3: qp_block(y, yrs, xq, xd, xsum8, k, pack, t, nb, i, j, nc, 3, part); break;
        case 2: qp_block(y, yrs, xq, xd, xsum8, k, pack, t, nb, i, j, nc, 2, part); break;
        case 1: qp_block(y, yrs, xq, xd, xsum8, k, pack, t, nb, i, j, nc, 1, part); break;
        default: break;
        }
    }
}

static T5 void qgemm_avx512(QGEMMARGS) { Q_BY_TYPE(qgemm_avx512_t) }

/* The same on 256-bit registers (AVX2; AVX-VNNI): 16 rows of w a panel
 * (two registers of 8 lanes), 4 rows of x a block of y. Packing reads 8
 * rows of a block at once and transposes their 8 quads (an 8 x 8 int32
 * transpose). Q4_0's nibbles are u8 as above; Q8_0's w stay signed and
 * meet x by the sign trick (|w| times x signed by w: vpmaddubsw's pairs
 * stay within int16, |pair| <= 2 * 128 * 127), so no 128 sum(x) comes
 * off. AVX2 adds each 4-byte quad's products by vpmaddubsw then vpmaddwd
 * by 1; AVX-VNNI by one vpdpbusd. */
#define QP2 16                       /* rows of w a panel */
#define QPB2 (8 * QP2 * 4 + QP2 * 4) /* panel bytes per block: 8 quads x 16, 16 scales */

static INL T2 void transpose8_i32(__m256i v[8])
{
    __m256i t[8], u[8];
    for (int r = 0; r < 8; r += 2) {
        t[r] = _mm256_unpacklo_epi32(v[r], v[r + 1]);
        t[r + 1] = _mm256_unpackhi_epi32(v[r], v[r + 1]);
    }
    for (int r = 0; r < 8; r += 4) {
        u[r] = _mm256_unpacklo_epi64(t[r], t[r + 2]);
        u[r + 1] = _mm256_unpackhi_epi64(t[r], t[r + 2]);
        u[r + 2] = _mm256_unpacklo_epi64(t[r + 1], t[r + 3]);
        u[r + 3] = _mm256_unpackhi_epi64(t[r + 1], t[r + 3]);
    }
    for (int q = 0; q < 4; q++) {
        v[q] = _mm256_permute2x128_si256(u[q], u[q + 4], 0x20);
        v[q + 4] = _mm256_permute2x128_si256(u[q], u[q + 4], 0x31);
    }
}

/* Rows [j, j + nc) of w, every block, into pack (QPB2 bytes a block; rows
 * past nc zero). */
static T2 void qpack_panel2(char *pack, const char *w, int64_t wrb, oc_wtype t, int64_t nb,
                            int64_t j, int nc, bool x8)
{
    if (x8) {
        for (int64_t b = 0; b < nb; b++)
            qpack_x8((int32_t *)(pack + b * QPB2), (float *)(pack + b * QPB2 + 8 * QP2 * 4), QP2,
                     w, wrb, t, b, j, nc, false);
        return;
    }
    int64_t bb = qblock_bytes(t);
    for (int64_t b = 0; b < nb; b++) {
        int32_t *pq = (int32_t *)(pack + b * QPB2);
        float *pd = (float *)(pack + b * QPB2 + 8 * QP2 * 4);
        for (int g = 0; g < QP2 / 8; g++) {
            __m256i v[8];
            for (int r = 0; r < 8; r++) {
                int row = 8 * g + r;
                if (row >= nc) {
                    v[r] = _mm256_setzero_si256();
                    pd[row] = 0.0f;
                    continue;
                }
                const char *blk = w + (j + row) * wrb + b * bb;
                v[r] = block_w(blk, t);
                pd[row] = half1(blk);
            }
            transpose8_i32(v);
            for (int q = 0; q < 8; q++)
                _mm256_storeu_si256((__m256i *)(pq + q * QP2 + 8 * g), v[q]);
        }
    }
}

/* Rows [i, i + mr) of x against the packed panel (DOT: a quad's products
 * into int32 lanes); part holds mr x 8 x 16 float32 partial sums. */
#define QP2_BLOCK_BODY(DOT)                                                                   \
    memset(part, 0, sizeof(float) * (size_t)mr * 8 * QP2);                                    \
    for (int64_t b = 0; b < nb; b++) {                                                        \
        const int32_t *pq = (const int32_t *)(pack + b * QPB2);                               \
        const float *pd = (const float *)(pack + b * QPB2 + 8 * QP2 * 4);                     \
        __m256i acc[QMR][2];                                                                  \
        _Pragma("GCC unroll 4") for (int a = 0; a < mr; a++) acc[a][0] = acc[a][1] =          \
            _mm256_setzero_si256();                                                           \
        _Pragma("GCC unroll 2") for (int q = 0; q < 8; q++)                                   \
        {                                                                                     \
            __m256i w0 = _mm256_loadu_si256((const __m256i *)(pq + q * QP2));                 \
            __m256i w1 = _mm256_loadu_si256((const __m256i *)(pq + q * QP2 + 8));             \
            __m256i u0 = t == OC_W_Q8_0 ? _mm256_abs_epi8(w0) : w0;                           \
            __m256i u1 = t == OC_W_Q8_0 ? _mm256_abs_epi8(w1) : w1;                           \
            _Pragma("GCC unroll 4") for (int a = 0; a < mr; a++)                              \
            {                                                                                 \
                __m256i bx = xquad(xq + (i + a) * k + b * OC_QK + 4 * q);                     \
                acc[a][0] = DOT(acc[a][0], u0, t == OC_W_Q8_0 ? _mm256_sign_epi8(bx, w0) : bx); \
                acc[a][1] = DOT(acc[a][1], u1, t == OC_W_Q8_0 ? _mm256_sign_epi8(bx, w1) : bx); \
            }                                                                                 \
        }                                                                                     \
        _Pragma("GCC unroll 4") for (int a = 0; a < mr; a++)                                  \
        {                                                                                     \
            __m256i ov = _mm256_set1_epi32(t == OC_W_Q4_0 ? xsum8[(i + a) * nb + b] : 0);     \
            __m256 xdv = _mm256_set1_ps(xd[(i + a) * nb + b]);                                \
            float *pp = part + (a * 8 + b % 8) * QP2;                                         \
            _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++)                               \
            {                                                                                 \
                __m256 f = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc[a][r], ov));               \
                __m256 d = _mm256_mul_ps(xdv, _mm256_loadu_ps(pd + 8 * r));                   \
                _mm256_storeu_ps(pp + 8 * r,                                                  \
                                 _mm256_fmadd_ps(f, d, _mm256_loadu_ps(pp + 8 * r)));         \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    for (int a = 0; a < mr; a++) {                                                            \
        const float *s = part + a * 8 * QP2;                                                  \
        for (int r = 0; r < 2 && nc - 8 * r > 0; r++) {                                       \
            float v[8];                                                                       \
            _mm256_storeu_ps(v, SUM8_PS(QP2_PART));                                           \
            int left = nc - 8 * r < 8 ? nc - 8 * r : 8;                                       \
            memcpy(y + (i + a) * yrs + j + 8 * r, v, sizeof(float) * (size_t)left);          \
        }                                                                                     \
    }

/* partial l of lanes [8 r, 8 r + 8) of row a's 8 x 16 partials s */
#define QP2_PART(l) _mm256_loadu_ps(s + 8 * r + (l) * QP2)

#define QP2ARGS                                                                                 \
    float *y, int64_t yrs, const int8_t *xq, const float *xd, const int32_t *xsum8, int64_t k, \
        const char *pack, oc_wtype t, int64_t nb, int64_t i, int64_t j, int nc, int mr,       \
        float *part

#define QGEMM2_BODY(BLOCK)                                                                \
    int64_t nb = k / OC_QK;                                                               \
    char *pack = scratch;                                                                 \
    float *part = (float *)(pack + nb * QPB2);                                            \
    for (int64_t j = j0; j < j1; j += QP2) {                                              \
        int nc = j1 - j >= QP2 ? QP2 : (int)(j1 - j);                                     \
        qpack_panel2(pack, w, wrb, t, nb, j, nc, x8);                                     \
        int64_t i = 0;                                                                    \
        for (; i + QMR <= m; i += QMR)                                                    \
            BLOCK(y, yrs, xq, xd, xsum8, k, pack, t, nb, i, j, nc, QMR, part);            \
        switch (m - i) {                                                                  \
        case 3: BLOCK(y, yrs, xq, xd, xsum8, k, pack, t, nb, i, j, nc, 3, part); break;   \
        case 2: BLOCK(y, yrs, xq, xd, xsum8, k, pack, t, nb, i, j, nc, 2, part); break;   \
        case 1: BLOCK(y, yrs, xq, xd, xsum8, k, pack, t, nb, i, j, nc, 1, part); break;   \
        default: break;                                                                   \
        }                                                                                 \
    }


/* ---- int8 x int8 ------------------------------------------------------------ */

/* nr (1 or 4) rows of w from j against every row of x, 32 bytes a step:
 * |w| times x signed by w (exact for x without -128), DOT32 adding the
 * 32 products into 8 int32 lanes. */
#define I8_ROWS_BODY(DOT32)                                                           \
    const int8_t *wr[4];                                                              \
    for (int r = 0; r < nr; r++) wr[r] = w + (j + r) * wrb;                           \
    for (int64_t i = 0; i < m; i++) {                                                 \
        const int8_t *xr = x + i * xrs;                                               \
        __m256i acc[4];                                                               \
        for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_si256();                 \
        int64_t p = 0;                                                                \
        for (; p + 32 <= k; p += 32) {                                                \
            __m256i xv = _mm256_loadu_si256((const __m256i *)(xr + p));               \
            for (int r = 0; r < nr; r++) {                                            \
                __m256i wv = _mm256_loadu_si256((const __m256i *)(wr[r] + p));        \
                acc[r] = DOT32(acc[r], _mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv)); \
            }                                                                         \
        }                                                                             \
        for (int r = 0; r < nr; r++) {                                                \
            int32_t s = hsum_i32(acc[r]);                                             \
            for (int64_t q = p; q < k; q++) s += (int32_t)xr[q] * wr[r][q];           \
            oc__lowp_i8_put(y, i * yrs + j + r, s, xs, i, ws, j + r);                 \
        }                                                                             \
    }

#define I8ARGS                                                                              \
    float *y, int64_t yrs, const int8_t *x, int64_t xrs, const float *xs, int64_t m,        \
        const int8_t *w, int64_t wrb, const float *ws, int64_t k

/* AVX2: vpmaddubsw (pairs into int16, no saturation: |w| x |x| <= 127^2)
 * then vpmaddwd by 1. */
static INL T2 __m256i dot32_avx2(__m256i acc, __m256i uw, __m256i sx)
{
    __m256i pr = _mm256_maddubs_epi16(uw, sx);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pr, _mm256_set1_epi16(1)));
}

/* Rows [j0, j1) of w, 4 at a time, then 1, through ROWS (a row kernel). */
#define I8_COLS_BODY(ROWS)                                                                  \
    int64_t j = j0;                                                                         \
    for (; j + 4 <= j1; j += 4) ROWS(y, yrs, x, xrs, xs, m, w, wrb, ws, k, j, 4);           \
    for (; j < j1; j++) ROWS(y, yrs, x, xrs, xs, m, w, wrb, ws, k, j, 1);

static INL T2 void i8_rows_avx2(I8ARGS, int64_t j, int nr) { I8_ROWS_BODY(dot32_avx2) }

static T2 void i8_avx2(I8ARGS, int64_t j0, int64_t j1) { I8_COLS_BODY(i8_rows_avx2) }

/* x holding -128, where x signed by w does not fit int8 (the sign trick's
 * one gap): both sides widened to int16 and multiplied in pairs into
 * int32 (vpmaddwd; AVX-VNNI: vpdpwssd), exact for all of int8. R rows of
 * x against the nr rows of w from j, 16 k a step. */
static INL T2 __m256i wide16(const int8_t *p)
{
    return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)p));
}

#define I8W_BLOCK(DOTW, R)                                                                  \
    {                                                                                       \
        __m256i acc[R][4];                                                                  \
        for (int a = 0; a < R; a++)                                                         \
            for (int r = 0; r < nr; r++) acc[a][r] = _mm256_setzero_si256();                \
        int64_t p = 0;                                                                      \
        for (; p + 16 <= k; p += 16) {                                                      \
            __m256i xv[R];                                                                  \
            for (int a = 0; a < R; a++) xv[a] = wide16(x + (i + a) * xrs + p);              \
            for (int r = 0; r < nr; r++) {                                                  \
                __m256i wv = wide16(wr[r] + p);                                             \
                for (int a = 0; a < R; a++) acc[a][r] = DOTW(acc[a][r], wv, xv[a]);         \
            }                                                                               \
        }                                                                                   \
        for (int a = 0; a < R; a++)                                                         \
            for (int r = 0; r < nr; r++) {                                                  \
                const int8_t *xr = x + (i + a) * xrs;                                       \
                int32_t s = hsum_i32(acc[a][r]);                                            \
                for (int64_t q = p; q < k; q++) s += (int32_t)xr[q] * wr[r][q];             \
                oc__lowp_i8_put(y, (i + a) * yrs + j + r, s, xs, i + a, ws, j + r);         \
            }                                                                               \
    }

#define I8W_ROWS_BODY(DOTW)                                                                 \
    const int8_t *wr[4];                                                                    \
    for (int r = 0; r < nr; r++) wr[r] = w + (j + r) * wrb;                                 \
    int64_t i = 0;                                                                          \
    for (; i + 2 <= m; i += 2) I8W_BLOCK(DOTW, 2)                                           \
    if (i < m) I8W_BLOCK(DOTW, 1)

static INL T2 __m256i dotw_avx2(__m256i acc, __m256i a, __m256i b)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}

static INL T2 void i8w_rows_avx2(I8ARGS, int64_t j, int nr) { I8W_ROWS_BODY(dotw_avx2) }

static T2 void i8w_avx2(I8ARGS, int64_t j0, int64_t j1) { I8_COLS_BODY(i8w_rows_avx2) }

/* Prepacked int8 weights read as they are on 256-bit registers: per 2
 * rows of x and 4 k, each row's 4 bytes broadcast against half a panel
 * (4 vectors of 8 columns x 4 k), each int32 lane one column's sum; a
 * last single row against the whole panel. x: rows of k bytes rounded
 * up to 4 (zero past k), xrs apart. x7: the rows hold x + 64 as
 * u8, every x in [-64, 63], so each u8 is at most 127 and vpmaddubsw's
 * pairs of u8 x s8 products stay within int16 (|pair| <= 2 * 127 * 128):
 * one multiply step, then 64 times the panel's column sums taken off.
 * Else |w| times x signed by w as above (x without -128: the caller
 * checks). Both are exact int32 sums, so the same bits. Each step also
 * prefetches a line of the core's next panel into L2: the first pass over
 * a panel otherwise waits on memory (16 x 4096 x 4096: 0.81 -> 0.93 of
 * the instructions' own rate, 1 core). */
#define PANEL OC__LOWP_PANEL
#define I8PKARGS                                                                           \
    float *y, int64_t yrs, const int8_t *x, int64_t xrs, const float *xs, int64_t m,      \
        const char *panels, int64_t pbytes, const float *ws, int64_t k, int64_t j0,        \
        int64_t j1, bool x7

/* x's 4 bytes at p in each 32-bit lane (a broadcast from memory) */
static INL T2 __m256i xquad(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Q8_0 / Q4_0 against many rows of x (QGEMM2_BODY above) */
static INL T2 void qp2_block_avx2(QP2ARGS) { QP2_BLOCK_BODY(dot32_avx2) }

static INL T2 void qgemm_avx2_t(QGEMMARGS, bool x8) { QGEMM2_BODY(qp2_block_avx2) }

static T2 void qgemm_avx2(QGEMMARGS) { Q_BY_TYPE(qgemm_avx2_t) }

/* Q8_0 / Q4_0 packed 8 rows a group (lowp_pack.c), a few rows of x
 * (decode): per block, each 32-byte load is a quad of the 8 rows (lane r:
 * row r), met by x's matching 4 bytes broadcast, so the lanes end the
 * block holding the 8 rows' exact totals with no reduction across lanes;
 * the float term goes into accumulator b % 8 and the 8 accumulators add
 * in tile.h's order (the per-pair dot's terms, order and bits, lane by
 * lane). TOT: a block's 8 totals (Q4_0: before - 8 sum(x); Q8_0 with U8:
 * of w + 128, before - 128 sum(x)). */
#define QX8_BODY(TOT, U8)                                                                      \
    (void)scratch, (void)x8;                                                                   \
    int64_t nb = k / OC_QK, ib = OC__LOWP_QX8_BYTES(t);                                        \
    for (int64_t j = j0; j < j1; j += 8) {                                                     \
        const char *g = w + j / 8 * wrb;                                                       \
        for (int64_t i = 0; i < m; i++) {                                                      \
            const int8_t *xr = xq + i * k;                                                     \
            __m256 acc[8];                                                                     \
            for (int l = 0; l < 8; l++) acc[l] = _mm256_setzero_ps();                          \
            for (int64_t b = 0; b < nb; b++) {                                                 \
                const char *o = g + b * ib;                                                    \
                for (int64_t f = 0; f < ib; f += 64) _mm_prefetch(o + QPF + f, _MM_HINT_T0);   \
                __m256i tot = TOT(o, t, xr + b * OC_QK);                                       \
                if (t == OC_W_Q4_0 || U8)                                                      \
                    tot = _mm256_sub_epi32(                                                    \
                        tot, _mm256_set1_epi32(xsum8[i * nb + b] * (t == OC_W_Q4_0 ? 1 : 16))); \
                __m256 d = _mm256_mul_ps(_mm256_set1_ps(xd[i * nb + b]),                       \
                                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)o))); \
                acc[b % 8] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), d, acc[b % 8]);          \
            }                                                                                  \
            __m256 v = SUM8_PS(QROWS_ACC);                                                     \
            if (j1 - j >= 8) {                                                                 \
                _mm256_storeu_ps(y + i * yrs + j, v);                                          \
            } else {                                                                           \
                float part[8];                                                                 \
                _mm256_storeu_ps(part, v);                                                     \
                memcpy(y + i * yrs + j, part, sizeof(float) * (size_t)(j1 - j));               \
            }                                                                                  \
        }                                                                                      \
    }

/* A block's 8 totals through DOT (a quad's 4 products into int32 lanes):
 * Q4_0's nibbles as they are; Q8_0 by the sign trick or, with U8 (DOT
 * vpdpbusd: no int16 step to saturate), as w + 128 (one vpxor a quad). */
#define X8TOT_BODY(DOT, U8)                                                                      \
    __m256i a0 = _mm256_setzero_si256(), a1 = a0; /* two chains: DOT's latency, not its rate */ \
    if (t == OC_W_Q4_0) {                                                                        \
        const __m256i m4 = _mm256_set1_epi8(15);                                                 \
        for (int q = 0; q < 4; q++) {                                                            \
            __m256i v = _mm256_loadu_si256((const __m256i *)(o + 16 + 32 * q));                  \
            a0 = DOT(a0, _mm256_and_si256(v, m4), xquad(x + 4 * q));                             \
            a1 = DOT(a1, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), xquad(x + 16 + 4 * q));  \
        }                                                                                        \
    } else {                                                                                     \
        for (int q = 0; q < 8; q += 2) {                                                         \
            __m256i v = _mm256_loadu_si256((const __m256i *)(o + 16 + 32 * q));                  \
            __m256i u = _mm256_loadu_si256((const __m256i *)(o + 48 + 32 * q));                  \
            if (U8) {                                                                            \
                const __m256i fl = _mm256_set1_epi8((char)0x80);                                 \
                a0 = DOT(a0, _mm256_xor_si256(v, fl), xquad(x + 4 * q));                         \
                a1 = DOT(a1, _mm256_xor_si256(u, fl), xquad(x + 4 * q + 4));                     \
            } else {                                                                             \
                a0 = DOT(a0, _mm256_abs_epi8(v), _mm256_sign_epi8(xquad(x + 4 * q), v));         \
                a1 = DOT(a1, _mm256_abs_epi8(u), _mm256_sign_epi8(xquad(x + 4 * q + 4), u));     \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
    return _mm256_add_epi32(a0, a1);

/* AVX2: Q4_0's 8 quads of pair sums add in int16 before one vpmaddwd
 * (|sum| <= 8 * 2 * 15 * 127 = 30480: exact), Q8_0's through dot32_avx2. */
static INL T2 __m256i x8tot_avx2(const char *o, oc_wtype t, const int8_t *x)
{
    if (t == OC_W_Q4_0) {
        const __m256i m4 = _mm256_set1_epi8(15);
        __m256i s = _mm256_setzero_si256();
        for (int q = 0; q < 4; q++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(o + 16 + 32 * q));
            s = _mm256_add_epi16(
                s, _mm256_maddubs_epi16(_mm256_and_si256(v, m4), xquad(x + 4 * q)));
            s = _mm256_add_epi16(s, _mm256_maddubs_epi16(
                                        _mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                                        xquad(x + 16 + 4 * q)));
        }
        return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
    }
    X8TOT_BODY(dot32_avx2, 0)
}

static INL T2 void qx8_avx2_t(QGEMMARGS, bool x8) { QX8_BODY(x8tot_avx2, 0) }

static T2 void qx8_avx2(QGEMMARGS) { Q_BY_TYPE(qx8_avx2_t) }

/* The AVX-512 sets: VNNI on 256-bit registers (8 rows a group) */
static INL T5 __m256i dot32_vnni256(__m256i acc, __m256i uw, __m256i sx)
{
    return _mm256_dpbusd_epi32(acc, uw, sx);
}

static INL T5 __m256i x8tot_vnni256(const char *o, oc_wtype t, const int8_t *x)
{
    X8TOT_BODY(dot32_vnni256, 1)
}

static INL T5 void qx8_vnni256_t(QGEMMARGS, bool x8) { QX8_BODY(x8tot_vnni256, 1) }

static T5 void qx8_avx512(QGEMMARGS) { Q_BY_TYPE(qx8_vnni256_t) }

/* R rows of x from i against V vectors (8 columns each) of the panel from
 * column c0, into y. */
#define I8PK_BLOCK(DOT32, R, V, X7)                                                        \
    {                                                                                      \
        const int8_t *xr[R];                                                               \
        __m256i acc[R][V];                                                                 \
        for (int a = 0; a < R; a++) {                                                      \
            xr[a] = x + (i + a) * xrs;                                                     \
            for (int r = 0; r < V; r++) acc[a][r] = _mm256_setzero_si256();                \
        }                                                                                  \
        for (int64_t q = 0; 4 * q < k; q++) {                                              \
            __m256i b[R];                                                                  \
            for (int a = 0; a < R; a++) b[a] = xquad(xr[a] + 4 * q);                       \
            const char *row = pk + q * 4 * PANEL + 4 * c0;                                 \
            for (int l = 0; l < V / 2; l++) /* 16 steps of k on: the first pass's reads */ \
                _mm_prefetch(row + 16 * 4 * PANEL + 64 * l, _MM_HINT_T0);                  \
            if (npos < pbytes) { /* the next panel into L2, a line a step */               \
                _mm_prefetch(pk + pbytes + npos, _MM_HINT_T1);                             \
                npos += 64;                                                                \
            }                                                                              \
            for (int r = 0; r < V; r++) {                                                  \
                __m256i wv = _mm256_loadu_si256((const __m256i *)(row + 32 * r));          \
                __m256i uw = X7 ? wv : _mm256_sign_epi8(wv, wv);                           \
                for (int a = 0; a < R; a++)                                                \
                    acc[a][r] = X7 ? DOT32(acc[a][r], b[a], wv)                            \
                                   : DOT32(acc[a][r], uw, _mm256_sign_epi8(b[a], wv));     \
            }                                                                              \
        }                                                                                  \
        for (int a = 0; a < R; a++) {                                                      \
            for (int r = 0; r < V; r++)                                                    \
                _mm256_storeu_si256((__m256i *)(void *)(out + 8 * r), acc[a][r]);          \
            for (int c = c0; c < nc && c < c0 + 8 * V; c++)                                \
                oc__lowp_i8_put(y, (i + a) * yrs + j + c,                                  \
                                out[c - c0] - (X7 ? 64 * colsum[c] : 0), xs, i + a, ws,    \
                                j + c);                                                    \
        }                                                                                  \
    }

#define I8PK_PANEL(DOT32, X7)                                                              \
    {                                                                                      \
        int64_t i = 0;                                                                     \
        for (; i + 2 <= m; i += 2)                                                         \
            for (int c0 = 0; c0 < nc; c0 += 32) I8PK_BLOCK(DOT32, 2, 4, X7)                \
        if (i < m) {                                                                       \
            int c0 = 0;                                                                    \
            I8PK_BLOCK(DOT32, 1, 8, X7)                                                    \
        }                                                                                  \
    }

#define I8PK_BODY(DOT32)                                                                   \
    int32_t out[PANEL];                                                                    \
    for (int64_t j = j0; j < j1; j += PANEL) {                                             \
        int nc = j1 - j >= PANEL ? PANEL : (int)(j1 - j);                                  \
        const char *pk = panels + j / PANEL * pbytes;                                      \
        const int32_t *colsum = (const int32_t *)(const void *)(pk + pbytes - 4 * PANEL);  \
        int64_t npos = j + PANEL < j1 ? 0 : pbytes;                                        \
        if (x7)                                                                            \
            I8PK_PANEL(DOT32, 1)                                                           \
        else                                                                               \
            I8PK_PANEL(DOT32, 0)                                                           \
    }

/* lowp.c's quantize_row on 256-bit registers, the same bits: absmax (NaN
 * ignored, as fmaxf does), x / scale rounded in the current mode, clamped
 * to [-127, 127], NaN to 0 (what the C cast gives on x86). */
static T2 void quantize_row_avx2(int8_t *q, float *scale, const float *x, int64_t n)
{
    __m256 am = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    int64_t p = 0;
    for (; p + 8 <= n; p += 8)
        am = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + p)), am);
    float lanes[8], amax = 0.0f;
    _mm256_storeu_ps(lanes, am);
    for (int l = 0; l < 8; l++) amax = fmaxf(amax, lanes[l]);
    for (; p < n; p++) amax = fmaxf(amax, fabsf(x[p]));
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    __m256 vid = _mm256_set1_ps(id), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    for (p = 0; p + 8 <= n; p += 8) {
        __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + p), vid),
                                   _MM_FROUND_CUR_DIRECTION);
        v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
        __m256i i = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
        _mm_storel_epi64((__m128i *)(void *)(q + p), _mm_packs_epi16(w, w));
    }
    for (; p < n; p++) {
        float v = nearbyintf(x[p] * id);
        q[p] = (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
    }
    *scale = d;
}

static T2 void i8pk_avx2(I8PKARGS) { I8PK_BODY(dot32_avx2) }

/* x's rows for the 256-bit panel kernels: each row's k bytes into xp (k4
 * apart, zero past k), as x + 64 (u8) where every x fits 7 bits. Returns
 * -1 where some x is -128 (xp untouched), 1 for 7 bits, 0 else. */
static T2 int i8pk_prep_avx2(int8_t *xp, int64_t k4, const int8_t *x, int64_t xrs, int64_t m,
                             int64_t k)
{
    __m256i mn = _mm256_set1_epi8(127), mx = _mm256_set1_epi8(-128);
    int lo = 127, hi = -128;
    for (int64_t i = 0; i < m; i++) {
        const int8_t *r = x + i * xrs;
        int64_t p = 0;
        for (; p + 32 <= k; p += 32) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(r + p));
            mn = _mm256_min_epi8(mn, v);
            mx = _mm256_max_epi8(mx, v);
        }
        for (; p < k; p++) {
            lo = r[p] < lo ? r[p] : lo;
            hi = r[p] > hi ? r[p] : hi;
        }
    }
    int8_t a[32], b[32];
    _mm256_storeu_si256((__m256i *)(void *)a, mn);
    _mm256_storeu_si256((__m256i *)(void *)b, mx);
    for (int l = 0; l < 32; l++) {
        lo = a[l] < lo ? a[l] : lo;
        hi = b[l] > hi ? b[l] : hi;
    }
    if (lo == -128) return -1;
    bool x7 = lo >= -64 && hi <= 63;
    __m256i add = _mm256_set1_epi8(x7 ? 64 : 0);
    for (int64_t i = 0; i < m; i++) {
        const int8_t *r = x + i * xrs;
        int8_t *o = xp + i * k4;
        int64_t p = 0;
        for (; p + 32 <= k; p += 32) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(r + p));
            _mm256_storeu_si256((__m256i *)(void *)(o + p), _mm256_add_epi8(v, add));
        }
        for (; p < k; p++) o[p] = (int8_t)(uint8_t)(r[p] + (x7 ? 64 : 0));
        memset(o + k, 0, (size_t)(k4 - k));
    }
    return x7;
}

/* AVX-VNNI: one vpdpbusd for the 32 products. */

static INL TV __m256i dot32_vnni(__m256i acc, __m256i uw, __m256i sx)
{
    return _mm256_dpbusd_avx_epi32(acc, uw, sx);
}

static INL TV void i8_rows_vnni(I8ARGS, int64_t j, int nr) { I8_ROWS_BODY(dot32_vnni) }

static TV void i8_avxvnni(I8ARGS, int64_t j0, int64_t j1) { I8_COLS_BODY(i8_rows_vnni) }

static TV void i8pk_avxvnni(I8PKARGS) { I8PK_BODY(dot32_vnni) }

static INL TV __m256i dotw_vnni(__m256i acc, __m256i a, __m256i b)
{
    return _mm256_dpwssd_avx_epi32(acc, a, b);
}

static INL TV void i8w_rows_vnni(I8ARGS, int64_t j, int nr) { I8W_ROWS_BODY(dotw_vnni) }

static TV void i8w_avxvnni(I8ARGS, int64_t j0, int64_t j1) { I8_COLS_BODY(i8w_rows_vnni) }

static INL TV void qp2_block_vnni(QP2ARGS) { QP2_BLOCK_BODY(dot32_vnni) }

static INL TV void qgemm_vnni_t(QGEMMARGS, bool x8) { QGEMM2_BODY(qp2_block_vnni) }

static TV void qgemm_avxvnni(QGEMMARGS) { Q_BY_TYPE(qgemm_vnni_t) }

static INL TV __m256i x8tot_avxvnni(const char *o, oc_wtype t, const int8_t *x)
{
    X8TOT_BODY(dot32_vnni, 1)
}

static INL TV void qx8_avxvnni_t(QGEMMARGS, bool x8) { QX8_BODY(x8tot_avxvnni, 1) }

static TV void qx8_avxvnni(QGEMMARGS) { Q_BY_TYPE(qx8_avxvnni_t) }

/* One 64-byte step of an mr x nr block: (w + 128) as u8 times x as s8. */
#define I8_STEP(LOADW, LOADX)                                                          \
    do {                                                                               \
        __m512i wv[4], xv[4];                                                          \
        _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++) wv[r] =                   \
            _mm512_xor_si512(LOADW(wr[r] + p), flip);                                  \
        _Pragma("GCC unroll 4") for (int a = 0; a < mr; a++) xv[a] =                   \
            LOADX(x + (i + a) * xrs + p);                                              \
        _Pragma("GCC unroll 4") for (int a = 0; a < mr; a++)                           \
            _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++) acc[a][r] =           \
                _mm512_dpbusd_epi32(acc[a][r], wv[r], xv[a]);                          \
    } while (0)

#define LOAD_FULL(q) _mm512_loadu_si512((const void *)(q))
#define LOAD_TAIL(q) _mm512_maskz_loadu_epi8(mk, (q))

/* mr rows of x from i against nr rows of w from j: (w + 128) as u8 times x
 * as s8 (vpdpbusd, no intermediate saturation), minus 128 sum(x): x's sums
 * come once per call (xsum, by row of x), where w's would cost a second
 * pass over every row of w. */
static INL T5 void i8_block512(float *y, int64_t yrs, const int8_t *x, int64_t xrs, const float *xs,
                               const int8_t *const wr[4], const int32_t *xsum, const float *ws,
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
        _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++)
    {
        int32_t s = _mm512_reduce_add_epi32(acc[a][r]) - 128 * xsum[i + a];
        oc__lowp_i8_put(y, (i + a) * yrs + j + r, s, xs, i + a, ws, j + r);
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

#define I8_NR(NR, Y, X, XS, M)                                                              \
    do {                                                                                    \
        int64_t i = 0;                                                                      \
        for (; i + 4 <= (M); i += 4)                                                        \
            i8_block512(Y, yrs, X, xrs, XS, wr, xsum, ws, k, i, j, 4, NR);                  \
        switch ((M) - i) {                                                                  \
        case 3: i8_block512(Y, yrs, X, xrs, XS, wr, xsum, ws, k, i, j, 3, NR); break;       \
        case 2: i8_block512(Y, yrs, X, xrs, XS, wr, xsum, ws, k, i, j, 2, NR); break;       \
        case 1: i8_block512(Y, yrs, X, xrs, XS, wr, xsum, ws, k, i, j, 1, NR); break;       \
        default: break;                                                                     \
        }                                                                                   \
    } while (0)

static T5 void i8_avx512(float *y, int64_t yrs, const int8_t *x, int64_t xrs, const float *xs,
                         int64_t m, const int8_t *w, int64_t wrb, const float *ws, int64_t k,
                         int64_t j0, int64_t j1)
{
    for (int64_t i0 = 0; i0 < m; i0 += 32) { /* x's rows 32 at a time (lowp.c: m < 32) */
        int64_t mc = m - i0 < 32 ? m - i0 : 32;
        int32_t xsum[32];
        const __m512i ones = _mm512_set1_epi8(1);
        for (int64_t i = 0; i < mc; i++) {
            __m512i acc = _mm512_setzero_si512();
            for (int64_t p = 0; p < k; p += 64) {
                __mmask64 mk = k - p >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (k - p)) - 1);
                acc = _mm512_dpbusd_epi32(acc, ones,
                                          _mm512_maskz_loadu_epi8(mk, x + (i0 + i) * xrs + p));
            }
            xsum[i] = _mm512_reduce_add_epi32(acc);
        }
        const int8_t *xc = x + i0 * xrs;
        float *yc = y + i0 * yrs;
        const float *xsc = xs + i0;
        for (int64_t j = j0; j < j1; j += 4) {
            int nr = j1 - j >= 4 ? 4 : (int)(j1 - j);
            const int8_t *wr[4];
            for (int r = 0; r < nr; r++) wr[r] = w + (j + r) * wrb;
            switch (nr) {
            case 4: I8_NR(4, yc, xc, xsc, mc); break;
            case 3: I8_NR(3, yc, xc, xsc, mc); break;
            case 2: I8_NR(2, yc, xc, xsc, mc); break;
            default: I8_NR(1, yc, xc, xsc, mc); break;
            }
        }
    }
}

/* ---- int8 x int8, many rows: packed column panels ----------------------------
 *
 * For m >= 32 rows of x the dot-product form above re-reads x for every 4
 * rows of w and reduces each accumulator across lanes. Here each 64-column
 * panel of w^T is packed (4 consecutive k of one column in each int32,
 * 16 columns a register) and a 6 x 64 block of y accumulates lane-wise:
 * vpdpbusd of x's 4 bytes, broadcast, with 4 registers of the panel. */
#define MR 6

/* Columns [j, j + nc) of w^T into pack (kp / 4 groups of 64 int32: k and
 * kp count bytes) and, if sums, their int8 sums over k after them;
 * columns past nc are zero. */
static T5 void pack_panel(int32_t *pack, const int8_t *w, int64_t wrb, int64_t k, int64_t kp,
                          int64_t j, int nc, bool sums)
{
    int64_t nq = kp / 4, full = k / 4;
    int32_t *sum = pack + nq * PANEL;
    const int8_t *base = w + j * wrb;
    /* quads outer, columns inner: the panel is written in order and each
     * row of w read forward (64 streams), not the panel 64 times over */
    if (nc == PANEL && wrb * PANEL < ((int64_t)1 << 31)) {
        __m512i off = _mm512_mullo_epi32(
            _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
            _mm512_set1_epi32((int)wrb));
        __m512i step = _mm512_set1_epi32((int)(16 * wrb));
        for (int64_t q = 0; q < full; q++) {
            __m512i o = off;
            for (int g = 0; g < 4; g++, o = _mm512_add_epi32(o, step))
                _mm512_store_si512(pack + q * PANEL + 16 * g,
                                   _mm512_i32gather_epi32(o, (const void *)(base + 4 * q), 1));
            /* 64 rows read forward at once, more streams than the hardware
             * prefetcher follows: each row's line two lines ahead of the
             * gathers goes to L2, four rows a step (bfloat16 prefill, m = 32,
             * k = 576: 1.12-1.34x) */
            int64_t ahead = 64 * (q / 16 + 2);
            if (ahead < wrb)
                for (int r = 0; r < 4; r++)
                    __builtin_prefetch(base + (4 * (q % 16) + r) * wrb + ahead, 0, 2);
        }
    } else {
        for (int64_t q = 0; q < full; q++)
            for (int c = 0; c < PANEL; c++) {
                int32_t v = 0;
                if (c < nc) memcpy(&v, base + c * wrb + 4 * q, 4);
                pack[q * PANEL + c] = v;
            }
    }
    for (int64_t q = full; q < nq; q++) /* the last partial quad, then AMX's padding */
        for (int c = 0; c < PANEL; c++) {
            int8_t last[4] = {0, 0, 0, 0};
            if (c < nc && q == full) memcpy(last, base + c * wrb + 4 * q, (size_t)(k - 4 * q));
            memcpy(&pack[q * PANEL + c], last, 4);
        }
    if (sums)
        for (int c = 0; c < PANEL; c++) sum[c] = c < nc ? wsum512(base + c * wrb, k) : 0;
}

/* 16 (mk) exact sums d of row i of x into y at `at`: scaled by xs[i] and
 * ws[j..] into float32, or (ws NULL) added to y's int32 sums. */
static INL T5 void i8_put16(float *y, int64_t at, __mmask16 mk, __m512i d, const float *xs,
                            int64_t i, const float *ws, int64_t j)
{
    if (!ws) {
        int32_t *c = (int32_t *)(void *)y + at;
        _mm512_mask_storeu_epi32(c, mk, _mm512_add_epi32(_mm512_maskz_loadu_epi32(mk, c), d));
        return;
    }
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(d), _mm512_set1_ps(xs[i]));
    _mm512_mask_storeu_ps(y + at, mk, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(mk, ws + j)));
}

/* Quads [q0, q1) of k for rows [i, i + mr) of x against the packed panel,
 * into y's 6 x 64 block: the sums start at 0 (first) or from part (mr x
 * 64 int32, the earlier quads), and go to y scaled (last) or back to
 * part. Blocks of k keep the panel's chunk in L1 while x's rows pass. */
static INL T5 void i8p_block(float *y, int64_t yrs, const uint8_t *xu, int64_t kp, const float *xs,
                             const int32_t *pack, const float *ws, int64_t i, int64_t j, int nc,
                             int mr, int64_t q0, int64_t q1, int32_t *part, bool first, bool last)
{
    __m512i acc[MR][4];
    _Pragma("GCC unroll 6") for (int a = 0; a < mr; a++)
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) acc[a][r] =
            first ? _mm512_setzero_si512() : _mm512_load_si512(part + a * PANEL + 16 * r);
    const uint8_t *xr = xu + i * kp;
    for (int64_t q = q0; q < q1; q++) {
        const int32_t *pq = pack + q * PANEL;
        __m512i b0 = _mm512_loadu_si512(pq), b1 = _mm512_loadu_si512(pq + 16);
        __m512i b2 = _mm512_loadu_si512(pq + 32), b3 = _mm512_loadu_si512(pq + 48);
        _Pragma("GCC unroll 6") for (int a = 0; a < mr; a++)
        {
            int32_t xv;
            memcpy(&xv, xr + a * kp + 4 * q, 4);
            __m512i bx = _mm512_set1_epi32(xv);
            acc[a][0] = _mm512_dpbusd_epi32(acc[a][0], bx, b0);
            acc[a][1] = _mm512_dpbusd_epi32(acc[a][1], bx, b1);
            acc[a][2] = _mm512_dpbusd_epi32(acc[a][2], bx, b2);
            acc[a][3] = _mm512_dpbusd_epi32(acc[a][3], bx, b3);
        }
    }
    if (!last) {
        _Pragma("GCC unroll 6") for (int a = 0; a < mr; a++)
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
                _mm512_store_si512(part + a * PANEL + 16 * r, acc[a][r]);
        return;
    }
    const int32_t *sum = pack + kp / 4 * PANEL;
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
    {
        int left = nc - 16 * r;
        if (left <= 0) break;
        __mmask16 mk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        __m512i corr = _mm512_slli_epi32(_mm512_loadu_si512(sum + 16 * r), 7); /* 128 sum(w) */
        _Pragma("GCC unroll 6") for (int a = 0; a < mr; a++) i8_put16(
            y, (i + a) * yrs + j + 16 * r, mk, _mm512_sub_epi32(acc[a][r], corr), xs, i + a, ws,
            j + 16 * r);
    }
}

/* quads of k per block: 128 x 256 bytes of panel, 32 KiB (L1) */
#define KQ 128

#define I8P_BLOCK(R) i8p_block(y, yrs, xu, kp, xs, pack, ws, i, j, nc, R, q0, q1, pt, first, last)

/* Rows of x (xu) against the packed panel of columns [j, j + nc) (and its
 * sums after it), into y; part: m x 64 int32 of scratch, 64-byte aligned.
 * Up to MR rows the panel streams by once (no blocks of k). */
static T5 void i8p_panel(float *y, int64_t yrs, const uint8_t *xu, int64_t kp, const float *xs,
                         int64_t m, const int32_t *pack, const float *ws, int64_t j, int nc,
                         int32_t *part)
{
    int64_t nq = kp / 4, kq = m <= MR ? nq : KQ;
    for (int64_t q0 = 0; q0 < nq; q0 += kq) {
        int64_t q1 = nq - q0 > kq ? q0 + kq : nq;
        bool first = q0 == 0, last = q1 == nq;
        for (int64_t i = 0; i < m; i += MR) {
            int32_t *pt = part + i * PANEL;
            switch (m - i >= MR ? MR : m - i) {
            case 6: I8P_BLOCK(6); break;
            case 5: I8P_BLOCK(5); break;
            case 4: I8P_BLOCK(4); break;
            case 3: I8P_BLOCK(3); break;
            case 2: I8P_BLOCK(2); break;
            default: I8P_BLOCK(1); break;
            }
        }
    }
}

static T5 void i8p_avx512(float *y, int64_t yrs, const uint8_t *xu, int64_t kp, const float *xs,
                          int64_t m, const int8_t *w, int64_t wrb, const float *ws, int64_t k,
                          int64_t j0, int64_t j1, void *pack)
{
    int32_t *part = (int32_t *)pack + kp / 4 * PANEL + PANEL; /* after the panel and its sums */
    for (int64_t j = j0; j < j1; j += PANEL) {
        int nc = j1 - j >= PANEL ? PANEL : (int)(j1 - j);
        pack_panel(pack, w, wrb, k, kp, j, nc, true);
        i8p_panel(y, yrs, xu, kp, xs, m, pack, ws, j, nc, part);
    }
}

/* Prepacked weights (lowp.c's OC_W_I8_PACKED): panel j / 64 at panels +
 * (j / 64) * pbytes, already in pack_panel's form; j0 a multiple of 64. */
static T5 void i8pk_avx512(float *y, int64_t yrs, const uint8_t *xu, int64_t kp,
                           const float *xs, int64_t m, const char *panels, int64_t pbytes,
                           const float *ws, int64_t j0, int64_t j1, void *scratch)
{
    for (int64_t j = j0; j < j1; j += PANEL) {
        int nc = j1 - j >= PANEL ? PANEL : (int)(j1 - j);
        const int32_t *pk = (const int32_t *)(const void *)(panels + j / PANEL * pbytes);
        i8p_panel(y, yrs, xu, kp, xs, m, pk, ws, j, nc, scratch);
    }
}

/* ---- int8 x int8, many rows, on AMX (Sapphire Rapids on) -----------------------
 *
 * The same packed panels are AMX's B layout (rows of 4 k x 16 columns):
 * per 16 rows of x + 128 (the A tile, 64 k) and 64 k of the panel, four
 * tdpbusd into four 16 x 16 int32 tiles. x's rows are padded to 16 and k
 * to 64 with zeros (lowp.c); the int32 sums are exact, so the result is
 * the same bits as the other forms. */
#define TA                                                                                   \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,amx-tile,amx-" \
                          "int8")))

/* 16 rows of A (a, a row every as bytes; 64 bytes of each per row of the
 * panel pk, qb bytes per 32-bit element) times nq rows of the 64-column
 * panel pk, with DP, into cbuf's 16 x 64 (tiles 0-3 the sums, 4 A, 5 B). */
#define AMX_16X64(DP, a, qb, as, nq)                          \
    do {                                                      \
        _tile_zero(0);                                        \
        _tile_zero(1);                                        \
        _tile_zero(2);                                        \
        _tile_zero(3);                                        \
        for (int64_t q = 0; q < (nq); q += 16) {              \
            _tile_loadd(4, (a) + (qb) * q, (as));             \
            _tile_loadd(5, pk + q * PANEL, 256);              \
            DP(0, 4, 5);                                      \
            _tile_loadd(5, pk + q * PANEL + 16, 256);         \
            DP(1, 4, 5);                                      \
            _tile_loadd(5, pk + q * PANEL + 32, 256);         \
            DP(2, 4, 5);                                      \
            _tile_loadd(5, pk + q * PANEL + 48, 256);         \
            DP(3, 4, 5);                                      \
        }                                                     \
        _tile_stored(0, cbuf, PANEL * 4);                     \
        _tile_stored(1, cbuf + 16, PANEL * 4);                \
        _tile_stored(2, cbuf + 32, PANEL * 4);                \
        _tile_stored(3, cbuf + 48, PANEL * 4);                \
    } while (0)

struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

static __attribute__((target("amx-tile"))) void amx_config(int tiles)
{
    struct amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < tiles; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    _tile_loadconfig(&cfg);
}

/* Rows of x (xu, padded to 16) against the panel pk of columns [j, j +
 * nc) and its sums, into y; cbuf 16 x 64 int32 of scratch. */
static INL TA void i8p_panel_amx(float *y, int64_t yrs, const uint8_t *xu, int64_t kp,
                                 const float *xs, int64_t m, const int32_t *pk, const float *ws,
                                 int64_t j, int nc, int32_t *cbuf)
{
    int64_t nq = kp / 4;
    const int32_t *sum = pk + nq * PANEL;
    for (int64_t i = 0; i < m; i += 16) {
        AMX_16X64(_tile_dpbusd, xu + i * kp, 4, kp, nq);
        int mr = m - i >= 16 ? 16 : (int)(m - i);
        for (int r = 0; r < 4 && nc - 16 * r > 0; r++) {
            int left = nc - 16 * r;
            __mmask16 mk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
            __m512i corr = _mm512_slli_epi32(_mm512_loadu_si512(sum + 16 * r), 7);
            for (int a = 0; a < mr; a++)
                i8_put16(y, (i + a) * yrs + j + 16 * r, mk,
                         _mm512_sub_epi32(_mm512_load_si512(cbuf + a * PANEL + 16 * r), corr), xs,
                         i + a, ws, j + 16 * r);
        }
    }
}

static TA void i8p_amx(float *y, int64_t yrs, const uint8_t *xu, int64_t kp, const float *xs,
                       int64_t m, const int8_t *w, int64_t wrb, const float *ws, int64_t k,
                       int64_t j0, int64_t j1, void *pack)
{
    amx_config(6);
    int32_t *pk = pack, *cbuf = pk + kp / 4 * PANEL + PANEL;
    for (int64_t j = j0; j < j1; j += PANEL) {
        int nc = j1 - j >= PANEL ? PANEL : (int)(j1 - j);
        pack_panel(pk, w, wrb, k, kp, j, nc, true);
        i8p_panel_amx(y, yrs, xu, kp, xs, m, pk, ws, j, nc, cbuf);
    }
    _tile_release();
}

/* ---- int8 x int8, 4 to 31 rows of x, on AMX, w as it is ---------------------
 *
 * Turned around, the product needs no packing of w: C^T = w x^T with 16
 * rows of w (64 k, rows wrb bytes apart: its own layout) as the A tile
 * and x's rows as B (x packed per call into AMX's B form: 4 consecutive
 * k of each of 16 rows of x per 64-byte row, zeros past m), tdpbssd (s8 x
 * s8, no offset to take off); w streams by once per 16 rows of x. One A
 * tile at a time (16 streams along rows of w) measured faster than four
 * (64 streams), and software prefetch slower than none. k a multiple of
 * 64; the rows of w past the last whole 16 go to the AVX-512 kernel. */
static TA void i8_amx_rows(float *y, int64_t yrs, const int8_t *x, int64_t xrs, const float *xs,
                           int64_t m, const int8_t *w, int64_t wrb, const float *ws, int64_t k,
                           int64_t j0, int64_t j1, void *scratch)
{
    int32_t *xb = scratch, *cb = xb + k * 4; /* k / 4 rows of 16 int32, then 16 x 16 */
    int64_t jt = j0 + (j1 - j0) / 16 * 16;
    amx_config(6);
    for (int64_t i0 = 0; i0 < m; i0 += 16) {
        int mc = m - i0 >= 16 ? 16 : (int)(m - i0);
        for (int64_t q = 0; q < k / 4; q++)
            for (int i = 0; i < 16; i++) {
                int32_t v = 0;
                if (i < mc) memcpy(&v, x + (i0 + i) * xrs + 4 * q, 4);
                xb[q * 16 + i] = v;
            }
        for (int64_t j = j0; j < jt; j += 16) {
            _tile_zero(0);
            for (int64_t p = 0; p < k; p += 64) {
                _tile_loadd(5, xb + p * 4, 64);
                _tile_loadd(4, w + j * wrb + p, wrb);
                _tile_dpbssd(0, 4, 5);
            }
            _tile_stored(0, cb, 64);
            for (int r = 0; r < 16; r++)
                for (int i = 0; i < mc; i++)
                    oc__lowp_i8_put(y, (i0 + i) * yrs + j + r, cb[r * 16 + i], xs, i0 + i, ws,
                                    j + r);
        }
    }
    _tile_release();
    if (jt < j1) i8_avx512(y, yrs, x, xrs, xs, m, w, wrb, ws, k, jt, j1);
}

const oc__lowp_i8rows_fn oc__lowp_i8_amx_rows = i8_amx_rows;

/* Prepacked weights on AMX from I8PK_AMX_M rows of x (fewer: the
 * vpdpbusd panel kernel, which reads each panel once as well). */
#define I8PK_AMX_M 4

static TA void i8pk_amx(float *y, int64_t yrs, const uint8_t *xu, int64_t kp, const float *xs,
                        int64_t m, const char *panels, int64_t pbytes, const float *ws,
                        int64_t j0, int64_t j1, void *scratch)
{
    if (m < I8PK_AMX_M) {
        i8pk_avx512(y, yrs, xu, kp, xs, m, panels, pbytes, ws, j0, j1, scratch);
        return;
    }
    amx_config(6);
    for (int64_t j = j0; j < j1; j += PANEL) {
        int nc = j1 - j >= PANEL ? PANEL : (int)(j1 - j);
        const int32_t *pk = (const int32_t *)(const void *)(panels + j / PANEL * pbytes);
        i8p_panel_amx(y, yrs, xu, kp, xs, m, pk, ws, j, nc, scratch);
    }
    _tile_release();
}

const oc__lowp_i8pk_fn oc__lowp_i8pk_avx512 = i8pk_avx512, oc__lowp_i8pk_amx = i8pk_amx;
const int oc__lowp_i8pk_amx_m = I8PK_AMX_M;

/* Rows [i, i + mr) and columns [j, j + nc) of y from cbuf (rows of 64). */
static INL T5 void bf16p_out(float *y, int64_t yrs, const int32_t *cbuf, int64_t i, int64_t j,
                             int mr, int nc)
{
    for (int r = 0; r < 4 && nc - 16 * r > 0; r++) {
        int left = nc - 16 * r;
        __mmask16 mk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        for (int a = 0; a < mr; a++)
            _mm512_mask_storeu_ps(y + (i + a) * yrs + j + 16 * r, mk,
                                  _mm512_load_ps((const float *)cbuf + a * PANEL + 16 * r));
    }
}

/* pack_panel's bfloat16 panel of columns [j, j + nc) from a k x n b (rows
 * brs elements apart): the pair (b[2q][c], b[2q + 1][c]) in element
 * q * 64 + c, rows 2q and 2q + 1 of b interleaved by vpermt2w, zeros past
 * k and n. */
static T5 void pack_panel_kn(int32_t *pack, const uint16_t *b, int64_t brs, int64_t k,
                             int64_t kp, int64_t j, int nc)
{
    static const uint16_t il[2][32] = {
        {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
         8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47},
        {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
         24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63}};
    __m512i lo = _mm512_loadu_si512(il[0]), hi = _mm512_loadu_si512(il[1]);
    __mmask32 m0 = nc >= 32 ? ~0u : (1u << nc) - 1;
    __mmask32 m1 = nc >= 64 ? ~0u : nc > 32 ? (1u << (nc - 32)) - 1 : 0;
    for (int64_t q = 0; q < kp / 2; q++) {
        __m512i r[2][2];
        for (int h = 0; h < 2; h++) {
            int64_t row = 2 * q + h;
            r[h][0] = r[h][1] = _mm512_setzero_si512();
            if (row >= k) continue;
            const uint16_t *p = b + row * brs + j;
            r[h][0] = _mm512_maskz_loadu_epi16(m0, p);
            r[h][1] = _mm512_maskz_loadu_epi16(m1, p + 32);
        }
        int32_t *o = pack + q * PANEL;
        for (int g = 0; g < 2; g++) {
            _mm512_store_si512(o + 32 * g, _mm512_permutex2var_epi16(r[0][g], lo, r[1][g]));
            _mm512_store_si512(o + 32 * g + 16, _mm512_permutex2var_epi16(r[0][g], hi, r[1][g]));
        }
    }
}

/* A panel of columns [j, j + nc) of the bfloat16 w^T in AMX's B layout:
 * from w's rows, or from a k x n b (kn). */
static T5 void bf16_panel(int32_t *pack, const char *w, int64_t wrb, bool kn, int64_t k,
                          int64_t kp, int64_t j, int nc)
{
    if (kn)
        pack_panel_kn(pack, (const uint16_t *)w, wrb / 2, k, kp, j, nc);
    else
        pack_panel(pack, (const int8_t *)w, wrb, 2 * k, 2 * kp, j, nc, false);
}

/* ---- bfloat16 weights, many rows, on AMX-BF16 ---------------------------------
 *
 * The same panels hold bfloat16 w^T in AMX's B layout for tdpbf16ps (2
 * consecutive k of one column in each 32-bit element, 16 columns a tile
 * row): pack_panel on w's bytes. x arrives rounded to bfloat16 (rows
 * padded to 16, k to 32, zeros); per 16 rows of x and 32 k, four
 * tdpbf16ps into four 16 x 16 float32 tiles, the pair products summed
 * before each add (tile.h's bound). */
#define TB                                                                                   \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,amx-tile,amx-" \
                          "bf16")))

static TB void bf16p_amx(float *y, int64_t yrs, const uint16_t *xb, int64_t xs, int64_t kp,
                         int64_t m, const char *w, int64_t wrb, bool kn, int64_t k, int64_t j0,
                         int64_t j1, void *pack)
{
    struct amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    _tile_loadconfig(&cfg);
    int64_t np = kp / 2; /* pairs of k: rows of the panel */
    int32_t *pk = pack, *cbuf = pk + np * PANEL;
    for (int64_t j = j0; j < j1; j += PANEL) {
        int nc = j1 - j >= PANEL ? PANEL : (int)(j1 - j);
        bf16_panel(pk, w, wrb, kn, k, kp, j, nc);
        int64_t i = 0;
        for (; i + 32 <= m; i += 32) { /* 32 x 32 blocks of y: 2 A and 2 B tiles */
            for (int h = 0; h < 2; h++) {
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
                const int32_t *pb = pk + 32 * h;
                for (int64_t q = 0; q < np; q += 16) {
                    _tile_loadd(4, xb + i * xs + 2 * q, xs * 2);
                    _tile_loadd(6, pb + q * PANEL, PANEL * 4);
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_loadd(5, xb + (i + 16) * xs + 2 * q, xs * 2);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_loadd(7, pb + q * PANEL + 16, PANEL * 4);
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_dpbf16ps(3, 5, 7);
                }
                _tile_stored(0, cbuf + 32 * h, PANEL * 4);
                _tile_stored(1, cbuf + 32 * h + 16, PANEL * 4);
                _tile_stored(2, cbuf + 16 * PANEL + 32 * h, PANEL * 4);
                _tile_stored(3, cbuf + 16 * PANEL + 32 * h + 16, PANEL * 4);
            }
            bf16p_out(y, yrs, cbuf, i, j, 32, nc);
        }
        for (; i < m; i += 16) { /* the last rows: 16 x 64 blocks */
            AMX_16X64(_tile_dpbf16ps, xb + i * xs, 2, xs * 2, np);
            bf16p_out(y, yrs, cbuf, i, j, m - i >= 16 ? 16 : (int)(m - i), nc);
        }
    }
    _tile_release();
}


/* ---- bfloat16 weights, many rows, on AVX512-BF16 (no AMX) ---------------------
 *
 * The same panels (2 k of a column per 32-bit element) and x rounded to
 * bfloat16: a 6 x 64 block of y takes vdpbf16ps of x's pair, broadcast,
 * with 4 registers of the panel; k in blocks that keep the panel's part
 * in L1, float32 partial sums in between (tile.h's bound, as on AMX). */
#define TF \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16")))

static INL TF void bf16_block(float *y, int64_t yrs, const uint16_t *xb, int64_t xs,
                              const int32_t *pack, int64_t i, int64_t j, int nc, int mr,
                              int64_t q0, int64_t q1, float *part, bool first, bool last)
{
    __m512 acc[MR][4];
    _Pragma("GCC unroll 6") for (int a = 0; a < mr; a++)
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) acc[a][r] =
            first ? _mm512_setzero_ps() : _mm512_load_ps(part + a * PANEL + 16 * r);
    const uint16_t *xr = xb + i * xs;
    for (int64_t q = q0; q < q1; q++) {
        const int32_t *pq = pack + q * PANEL;
        __m512bh b0 = (__m512bh)_mm512_load_si512(pq), b1 = (__m512bh)_mm512_load_si512(pq + 16);
        __m512bh b2 = (__m512bh)_mm512_load_si512(pq + 32);
        __m512bh b3 = (__m512bh)_mm512_load_si512(pq + 48);
        _Pragma("GCC unroll 6") for (int a = 0; a < mr; a++)
        {
            int32_t xv;
            memcpy(&xv, xr + a * xs + 2 * q, 4);
            __m512bh bx = (__m512bh)_mm512_set1_epi32(xv);
            acc[a][0] = _mm512_dpbf16_ps(acc[a][0], bx, b0);
            acc[a][1] = _mm512_dpbf16_ps(acc[a][1], bx, b1);
            acc[a][2] = _mm512_dpbf16_ps(acc[a][2], bx, b2);
            acc[a][3] = _mm512_dpbf16_ps(acc[a][3], bx, b3);
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
    {
        int left = nc - 16 * r;
        __mmask16 mk = left >= 16  ? (__mmask16)0xffff
                       : left <= 0 ? (__mmask16)0
                                   : (__mmask16)((1u << left) - 1);
        _Pragma("GCC unroll 6") for (int a = 0; a < mr; a++)
        {
            if (last)
                _mm512_mask_storeu_ps(y + (i + a) * yrs + j + 16 * r, mk, acc[a][r]);
            else
                _mm512_store_ps(part + a * PANEL + 16 * r, acc[a][r]);
        }
    }
}

#define BF16_BLOCK(R) bf16_block(y, yrs, xb, xs, pack, i, j, nc, R, q0, q1, pt, first, last)

static TF void bf16p_avx512(float *y, int64_t yrs, const uint16_t *xb, int64_t xs, int64_t kp,
                            int64_t m, const char *w, int64_t wrb, bool kn, int64_t k,
                            int64_t j0, int64_t j1, void *pack)
{
    int64_t np = kp / 2;
    float *part = (float *)((int32_t *)pack + np * PANEL + PANEL);
    for (int64_t j = j0; j < j1; j += PANEL) {
        int nc = j1 - j >= PANEL ? PANEL : (int)(j1 - j);
        bf16_panel(pack, w, wrb, kn, k, kp, j, nc);
        for (int64_t q0 = 0; q0 < np; q0 += KQ) {
            int64_t q1 = np - q0 > KQ ? q0 + KQ : np;
            bool first = q0 == 0, last = q1 == np;
            for (int64_t i = 0; i < m; i += MR) {
                int mr = m - i >= MR ? MR : (int)(m - i);
                float *pt = part + i * PANEL;
                switch (mr) {
                case 6: BF16_BLOCK(6); break;
                case 5: BF16_BLOCK(5); break;
                case 4: BF16_BLOCK(4); break;
                case 3: BF16_BLOCK(3); break;
                case 2: BF16_BLOCK(2); break;
                default: BF16_BLOCK(1);
                }
            }
        }
    }
}

void (*const oc__lowp_quantize_row_avx2)(int8_t *, float *, const float *, int64_t) =
    quantize_row_avx2;
int (*const oc__lowp_i8pk_prep)(int8_t *, int64_t, const int8_t *, int64_t, int64_t, int64_t) =
    i8pk_prep_avx2;
const oc__lowp_i8pk_rows_fn oc__lowp_i8pk_avx2 = i8pk_avx2, oc__lowp_i8pk_avxvnni = i8pk_avxvnni;
const oc__lowp_kernels oc__lowp_avx2 = {"avx2", fdot_avx2, qdot_avx2, i8_avx2, NULL, 1, 1, 0,
                                         i8w_avx2, NULL, qgemm_avx2, qrows_avx2, qx8_avx2};
const oc__lowp_kernels oc__lowp_avxvnni = {"avx-vnni", fdot_avx2, qdot_avx2, i8_avxvnni, NULL, 1, 1,
                                           0, i8w_avxvnni, NULL, qgemm_avxvnni, qrows_avx2,
                                           qx8_avxvnni};
const oc__lowp_kernels oc__lowp_avx512 = {"avx512-vnni", fdot_avx512, qdot_vnni, i8_avx512,
                                          i8p_avx512, 4, 1, 32, NULL, NULL, qgemm_avx512, NULL,
                                          qx8_avx512};
const oc__lowp_kernels oc__lowp_avx512bf16 = {"avx512-vnni+bf16", fdot_avx512, qdot_vnni,
                                              i8_avx512, i8p_avx512, 4, 1, 32, NULL,
                                              bf16p_avx512, qgemm_avx512, NULL, qx8_avx512};
const oc__lowp_kernels oc__lowp_amx = {"avx512-vnni+amx", fdot_avx512, qdot_vnni, i8_avx512,
                                       i8p_amx, 64, 16, 32, NULL, bf16p_amx, qgemm_avx512, NULL,
                                       qx8_avx512};

/* AMX's tile data needs the kernel's leave (once per process): Linux 5.16 on. */
bool oc__lowp_amx_usable(void)
{
    unsigned a, b, c, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
    /* AMX-TILE, AMX-INT8, AMX-BF16 (every AMX CPU so far has all three) */
    if (!(d & (1u << 24)) || !(d & (1u << 25)) || !(d & (1u << 22))) return false;
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
}

#else /* not x86-64 with GCC or clang: the portable set only */
const oc__lowp_kernels oc__lowp_avx2 = {"avx2", 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
const oc__lowp_kernels oc__lowp_avxvnni = {"avx-vnni", 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
const oc__lowp_kernels oc__lowp_avx512 = {"avx512-vnni", 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
const oc__lowp_kernels oc__lowp_avx512bf16 = {"avx512-vnni+bf16", 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
const oc__lowp_kernels oc__lowp_amx = {"amx", 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
bool oc__lowp_amx_usable(void) { return false; }
const oc__lowp_i8pk_fn oc__lowp_i8pk_avx512 = 0, oc__lowp_i8pk_amx = 0;
const oc__lowp_i8pk_rows_fn oc__lowp_i8pk_avx2 = 0, oc__lowp_i8pk_avxvnni = 0;
int (*const oc__lowp_i8pk_prep)(int8_t *, int64_t, const int8_t *, int64_t, int64_t, int64_t) = 0;
void (*const oc__lowp_quantize_row_avx2)(int8_t *, float *, const float *, int64_t) = 0;
const int oc__lowp_i8pk_amx_m = 0;
const oc__lowp_i8rows_fn oc__lowp_i8_amx_rows = 0;
#endif
