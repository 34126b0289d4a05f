/* lowp_linear: y = x w^T for weights of any oc_wtype (float32, bfloat16, float16, Q8_0,
 * Q4_0 as GGUF bytes, int8 with one scale per output), split along w's
 * rows across the op's cores; x float32 or bfloat16, y the same dtype.
 * lowp_linear_g: the same for group-wise weights (int8 with a scale per
 * group, uint4 two a byte with a scale and zero point per group).
 * The kernels of bench/lowp_bench.py and tests/python/test_lowp*.py
 * (docs/tutorial_5_quantised.md walks through them). lowp_quantize: the
 * rows of float32 x as GGML Q8_0 / Q4_0 blocks; lowp_quantize_u4: as
 * packed uint4 with per-group scales and zero points (GPTQ's quantiser).
 * lowp_pack_i8: int8 weights and their scales packed once (a uint8 tensor
 * to keep, as torch's linear_prepack makes); lowp_linear_packed: y = x w^T
 * on those bytes. lowp_matmul_i8: c (int32) = a b^T for int8 a and b
 * (oc_tile_matmul), c's columns split across the op's cores.
 * lowp_copy: dst = src's bytes by C memcpy, each core copying its share
 * (whole cache lines): the bench's memory-bandwidth floor at the same
 * number of cores as the GEMV. lowp_widen: y[j] = the sum of row j of
 * float16 / bfloat16 w widened to float32, rows split across the cores as
 * the GEMV splits them, as many rows at a time as the GEMV (8 on AVX-512,
 * 4 on AVX2) with its loads, prefetches and widening instructions
 * (vcvtph2ps; bfloat16: a shift and a mask on AVX-512, vpmovzxwd and a
 * shift on AVX2) and an add where it has an FMA with x: the ceiling of a
 * half-weight GEMV that widens in registers; of float32 w, the float32
 * GEMV's loads and prefetches with an add: that GEMV's ceiling.
 * lowp_widen_u4: y[j] = the sum over row j of uint4 group weights
 * dequantised (scale times (q - zero)), read and widened as the group GEMV
 * widens them (4 rows at a time; AVX2: a broadcast, vpsrlvd, a mask, a
 * convert and the zero point's subtract per 8 weights; AVX-512: vpermps
 * on a 16-entry table per 16) with an add where it has its FMA with x:
 * that GEMV's ceiling (strided inputs copied to contiguous ones first).
 * lowp_i8_mix: the instructions of an exact int8 product with x in 7 bits
 * on AVX2 alone (vpmaddubsw, vpmaddwd by 1, vpaddd for each 32 products:
 * both fbgemm's AVX2 kernel and opcore's), in inline asm on registers for
 * m k n products, n split across the cores as the linear layer splits it:
 * the ceiling of any AVX2 kernel built on them. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__F16C__))
#include <immintrin.h>
#endif

#include <opcore/kernel.h>
#include <opcore/tile.h>

oc_tensor *lowp_linear(const oc_tensor *x, const oc_tensor *w, const oc_tensor *scale, int64_t wtype)
{
    oc_tensor *y = oc_dst_tensor();
    oc_weights wt = oc_weights_of_tensor(w, (oc_wtype)wtype, wtype == OC_W_I8 ? scale : NULL);
    if (!wt.data) return y; /* the kernel failed with oc_weights_of_tensor's message */
    oc_tile tx = oc_tile_of_tensor(x, 0), ty = oc_tile_of_tensor(y, 0);
    oc_tile_linear(&ty, &tx, &wt, (int)oc_cpu_id(), (int)oc_cpu_count());
    return y;
}

oc_tensor *lowp_linear_g(const oc_tensor *x, const oc_tensor *w, const oc_tensor *scale,
                         const oc_tensor *zero, int64_t wtype, int64_t group)
{
    oc_tensor *y = oc_dst_tensor();
    oc_weights wt =
        oc_weights_grouped(w, (oc_wtype)wtype, group, scale, wtype == OC_W_U4G ? zero : NULL);
    if (!wt.data) return y;
    oc_tile tx = oc_tile_of_tensor(x, 0), ty = oc_tile_of_tensor(y, 0);
    oc_tile_linear(&ty, &tx, &wt, (int)oc_cpu_id(), (int)oc_cpu_count());
    return y;
}

oc_tensor *lowp_quantize(const oc_tensor *x, int64_t wtype)
{
    oc_tensor *y = oc_dst_tensor();
    oc_tile tx = oc_tile_of_tensor(x, 0);
    oc_tile_quantize_blocks(y->data, (oc_wtype)wtype, &tx);
    return y;
}

void lowp_quantize_u4(const oc_tensor *x, int64_t group)
{
    oc_tile tx = oc_tile_of_tensor(x, 0), ts = oc_tile_of_tensor(oc_dst_tensor_at(1), 0),
            tz = oc_tile_of_tensor(oc_dst_tensor_at(2), 0);
    oc_tile_quantize_u4(oc_dst_tensor_at(0)->data, &ts, &tz, &tx, group);
}

oc_tensor *lowp_pack_i8(const oc_tensor *w, const oc_tensor *scale)
{
    oc_tensor *p = oc_dst_tensor();
    oc_weights wt = oc_weights_of_tensor(w, OC_W_I8, scale);
    if (wt.data)
        oc_weights_pack(p->data, (size_t)oc_numel(p), &wt, (int)oc_cpu_id(), (int)oc_cpu_count());
    return p;
}

/* Q8_0 / Q4_0 blocks packed 8 rows a group (lowp_linear_packed reads them) */
oc_tensor *lowp_pack_q(const oc_tensor *w, int64_t wtype)
{
    oc_tensor *p = oc_dst_tensor();
    oc_weights wt = oc_weights_of_tensor(w, (oc_wtype)wtype, NULL);
    if (wt.data)
        oc_weights_pack(p->data, (size_t)oc_numel(p), &wt, (int)oc_cpu_id(), (int)oc_cpu_count());
    return p;
}

/* y = x w^T, w any packed bytes (int8, Q8_0, Q4_0: the header says) */
oc_tensor *lowp_linear_packed(const oc_tensor *x, const oc_tensor *wp, int64_t n)
{
    oc_tensor *y = oc_dst_tensor();
    OC_CHECK(oc_is_contiguous(wp), "lowp_linear_packed: wp must be contiguous");
    oc_weights wt = oc_weights_of_packed(wp->data, (size_t)oc_numel(wp));
    if (!wt.data) return y;
    OC_CHECK(wt.n == n, "lowp_linear_packed: the packed weights hold %lld outputs, n = %lld given",
             (long long)wt.n, (long long)n);
    oc_tile tx = oc_tile_of_tensor(x, 0), ty = oc_tile_of_tensor(y, 0);
    oc_tile_linear(&ty, &tx, &wt, (int)oc_cpu_id(), (int)oc_cpu_count());
    return y;
}

/* Row r of x (k floats) in 7 bits into q: scale = absmax / 63, q = x /
 * scale rounded to nearest even (0 where the scale is 0), in [-63, 63]. */
static float quantize_x7(int8_t *q, const float *r, int64_t k)
{
    float amax = 0;
    int64_t p = 0;
#if defined(__AVX2__)
    __m256 am = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    for (; p + 8 <= k; p += 8)
        am = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(r + p)), am);
    float lanes[8];
    _mm256_storeu_ps(lanes, am);
    for (int l = 0; l < 8; l++) amax = fmaxf(amax, lanes[l]);
#endif
    for (; p < k; p++) amax = fmaxf(amax, fabsf(r[p]));
    float sc = amax / 63, inv = sc > 0 ? 1 / sc : 0;
    p = 0;
#if defined(__AVX2__)
    __m256 vi = _mm256_set1_ps(inv);
    for (; p + 8 <= k; p += 8) {
        __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(r + p), vi),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256i i = _mm256_cvtps_epi32(v);
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
        _mm_storel_epi64((__m128i *)(void *)(q + p), _mm_packs_epi16(w, w));
    }
#endif
    for (; p < k; p++) q[p] = (int8_t)nearbyintf(r[p] * inv);
    return sc;
}

/* lowp_linear_packed with x quantised as torch's dynamic quantised Linear
 * quantises it on x86 (reduce_range: 7 bits, quantize_x7 above), each
 * core all of x's rows into a buffer of its own, then the product on the
 * packed weights. A strided x is copied to a contiguous one first. */
oc_tensor *lowp_linear_packed_x7(const oc_tensor *x, const oc_tensor *wp, int64_t n)
{
    static _Thread_local int8_t *xq;
    static _Thread_local float *xs;
    static _Thread_local int64_t cap;
    oc_tensor *y = oc_dst_tensor();
    oc_weights wt = oc_weights_of_tensor(wp, OC_W_I8_PACKED, NULL);
    if (!wt.data) return y;
    OC_CHECK(wt.n == n, "lowp_linear_packed_x7: the packed weights hold %lld outputs, n = %lld "
             "given", (long long)wt.n, (long long)n);
    const float *xd = oc_is_contiguous(x) ? x->data : oc_to_dtype(x, OC_FLOAT32)->data;
    int64_t m = x->sizes[0], k = x->sizes[1];
    if (m * k + m > cap) {
        free(xq), free(xs);
        cap = m * k + m;
        xq = malloc((size_t)cap), xs = malloc((size_t)cap * sizeof(float));
        if (!xq || !xs) cap = 0;
        OC_CHECK(cap, "lowp_linear_packed_x7: out of memory for x's %lld rows",
                 (long long)m);
    }
    for (int64_t i = 0; i < m; i++)
        xs[i] = quantize_x7(xq + i * k, xd + i * k, k);
    oc_tile tq = {xq, m, k, k, 1, OC_INT8, false}, ts = {xs, m, 1, 1, 1, OC_FLOAT32, false},
            ty = oc_tile_of_tensor(y, 0);
    oc_tile_linear_i8(&ty, &tq, &ts, &wt, (int)oc_cpu_id(), (int)oc_cpu_count());
    return y;
}

oc_tensor *lowp_matmul_i8(const oc_tensor *a, const oc_tensor *b)
{
    oc_tensor *c = oc_dst_tensor();
    oc_tile ta = oc_tile_of_tensor(a, 0), tb = oc_tile_of_tensor(b, 0),
            tc = oc_tile_of_tensor(c, 0);
    int64_t n = tc.cols, ith = oc_cpu_id(), nth = oc_cpu_count();
    int64_t j0 = n * ith / nth / 16 * 16, j1 = ith + 1 == nth ? n : n * (ith + 1) / nth / 16 * 16;
    if (j0 >= j1) return c;
    oc_tile cv = oc_tile_view(&tc, 0, j0, tc.rows, j1 - j0),
            bv = oc_tile_view(&tb, j0, 0, j1 - j0, tb.cols);
    oc_tile_matmul_to(&cv, &ta, &bv, OC_TILE_TRANS_B);
    return c;
}

void lowp_copy(const oc_tensor *src, oc_tensor *dst)
{
    int64_t lo, hi;
    oc_core_range(oc_nbytes(src), 64, &lo, &hi);
    if (hi > lo) memcpy((char *)dst->data + lo, (const char *)src->data + lo, (size_t)(hi - lo));
}

#if defined(__AVX512F__)
#define WVEC __m512
#define WLANES 16
#define WZERO _mm512_setzero_ps()
#define WADD _mm512_add_ps
#define WSUM _mm512_reduce_add_ps
#define WLOADF _mm512_loadu_ps
/* the GEMV's groups of rows (one row of x) and its prefetch distance in bytes */
#define WROWS 8
#define WPF 512
/* 32 weights from p widened as the GEMV widens them: bfloat16 from one load,
 * the even elements by a shift, the odd ones by a mask; float16 by vcvtph2ps */
static inline void widen2(const uint16_t *p, bool bf, __m512 *lo, __m512 *hi)
{
    if (bf) {
        __m512i v = _mm512_loadu_si512(p);
        *lo = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        *hi = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
        return;
    }
    *lo = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    *hi = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p + 1));
}
#elif defined(__AVX2__) && defined(__F16C__)
#define WVEC __m256
#define WLANES 8
#define WZERO _mm256_setzero_ps()
#define WADD _mm256_add_ps
#define WLOADF _mm256_loadu_ps
#define WROWS 4
#define WPF 1024
static inline float WSUM(__m256 v)
{
    float a[8], s = 0;
    _mm256_storeu_ps(a, v);
    for (int l = 0; l < 8; l++) s += a[l];
    return s;
}
static inline __m256 widen(const uint16_t *p, bool bf)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return bf ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
              : _mm256_cvtph_ps(h);
}
static inline void widen2(const uint16_t *p, bool bf, __m256 *lo, __m256 *hi)
{
    *lo = widen(p, bf);
    *hi = widen(p + 8, bf);
}
#else
#define WROWS 4
#endif

static float widen1(uint16_t h, bool bf) { return bf ? oc_bf16_to_f32(h) : oc_half_to_f32(h); }

/* Element q of a row of w (float32, bfloat16 or float16) as float32. */
static inline float elem(const char *row, oc_dtype t, int64_t q)
{
    if (t == OC_FLOAT32) return ((const float *)(const void *)row)[q];
    return widen1(((const uint16_t *)(const void *)row)[q], t == OC_BFLOAT16);
}

#ifdef WLANES
/* 2 vectors of elements from p of a row, as the GEMV loads them */
static inline __attribute__((always_inline)) void load2(const char *row, oc_dtype t, int64_t p,
                                                        WVEC *lo, WVEC *hi)
{
    if (t == OC_FLOAT32) {
        *lo = WLOADF((const float *)(const void *)row + p);
        *hi = WLOADF((const float *)(const void *)row + p + WLANES);
        return;
    }
    widen2((const uint16_t *)(const void *)row + p, t == OC_BFLOAT16, lo, hi);
}
#endif

/* Rows [lo, hi) of w (t, es bytes an element, rows rs elements apart)
 * summed into out, read as the GEMV reads them: half weights WROWS rows a
 * step prefetched WPF bytes ahead (4 rows and 1 KiB for the last ones),
 * float32 4 rows 1 KiB ahead; each step's lines prefetched, past a row's
 * end into the next group's rows. t is a constant at each call. */
static inline __attribute__((always_inline)) void sum_rows(float *out, const char *w, oc_dtype t,
                                                           int64_t es, int64_t rs, int64_t k,
                                                           int64_t lo, int64_t hi)
{
    int64_t rows = t == OC_FLOAT32 ? 4 : WROWS, rb = rs * es;
    for (int64_t j = lo, nr; j < hi; j += nr) {
        nr = hi - j >= rows ? rows : hi - j >= 4 ? 4 : 1;
        for (int r = 0; r < nr; r++) out[j + r] = 0;
        const char *row = w + j * rb;
        int64_t p = 0;
#ifdef WLANES
        WVEC a[WROWS], b[WROWS];
        for (int r = 0; r < WROWS; r++) a[r] = b[r] = WZERO;
        int64_t pf = t != OC_FLOAT32 && nr == WROWS ? WPF : 1024;
        int64_t lines = es * 2 * WLANES / 64 > 1 ? es * 2 * WLANES / 64 : 1;
        for (; p + 2 * WLANES <= k; p += 2 * WLANES) {
            for (int64_t l = 0; l < lines; l++) {
                int64_t o = es * p + pf + 64 * l;
                if (o >= es * k && j + nr < hi) o += nr * rb - es * k;
                for (int r = 0; r < nr; r++) __builtin_prefetch(row + r * rb + o);
            }
            for (int r = 0; r < nr; r++) {
                WVEC w0, w1;
                load2(row + r * rb, t, p, &w0, &w1);
                a[r] = WADD(a[r], w0);
                b[r] = WADD(b[r], w1);
            }
        }
        for (int r = 0; r < nr; r++) out[j + r] = WSUM(WADD(a[r], b[r]));
#endif
        for (int r = 0; r < nr; r++)
            for (int64_t q = p; q < k; q++) out[j + r] += elem(row + r * rb, t, q);
    }
}

oc_tensor *lowp_widen(const oc_tensor *w)
{
    oc_tensor *y = oc_dst_tensor();
    if (w->sizes[1] > 1 && w->strides[1] != 1) w = oc_to_dtype(w, w->dtype); /* strided rows */
    int64_t k = w->sizes[1], rs = w->strides[0], lo, hi;
    oc_core_range(w->sizes[0], 16, &lo, &hi);
    switch (w->dtype) {
    case OC_FLOAT32: sum_rows(y->data, w->data, OC_FLOAT32, 4, rs, k, lo, hi); break;
    case OC_BFLOAT16: sum_rows(y->data, w->data, OC_BFLOAT16, 2, rs, k, lo, hi); break;
    default: sum_rows(y->data, w->data, OC_FLOAT16, 2, rs, k, lo, hi); break;
    }
    return y;
}

/* lowp_i8_mix's work on this core: the m k n products of its share of n,
 * 256 a step as 8 independent sums (the kernel's 2 rows of x by 4 vectors
 * of w), each step's 24 instructions written out in inline asm on
 * registers (the compiler can neither drop, hoist nor spill them), so no
 * load, store or quantising step is counted; each core's total of its
 * sums into sink[core] where sink has that element. */
#if defined(__AVX2__) && defined(__x86_64__) && defined(__GNUC__)
/* one 32-product step into accumulator A: x (u8) by w (s8) in pairs, the
 * pairs summed into int32 by vpmaddwd by 1, added */
#define MIX_STEP(A, X, W)                                                                  \
    "vpmaddubsw %[" #W "], %[" #X "], %%ymm15\n\t"                                         \
    "vpmaddwd %[one], %%ymm15, %%ymm15\n\t"                                                \
    "vpaddd %%ymm15, %[" #A "], %[" #A "]\n\t"
#endif

void lowp_i8_mix(int64_t m, int64_t k, int64_t n, oc_tensor *sink)
{
    int64_t lo, hi;
    oc_core_range(n, 64, &lo, &hi);
    int64_t steps = m * k * (hi - lo) / 256;
#if defined(__AVX2__) && defined(__x86_64__) && defined(__GNUC__)
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0, one = _mm256_set1_epi16(1);
    __m256i w0 = _mm256_set1_epi8(-2), w1 = _mm256_set1_epi8(-1), w2 = _mm256_set1_epi8(0),
            w3 = _mm256_set1_epi8(1), x0 = _mm256_set1_epi8(1), x1 = _mm256_set1_epi8(2);
    for (int64_t s = 0; s < steps; s++)
        __asm__ volatile(MIX_STEP(a0, x0, w0) MIX_STEP(a1, x0, w1) MIX_STEP(a2, x0, w2)
                             MIX_STEP(a3, x0, w3) MIX_STEP(a4, x1, w0) MIX_STEP(a5, x1, w1)
                                 MIX_STEP(a6, x1, w2) MIX_STEP(a7, x1, w3)
                         : [a0] "+x"(a0), [a1] "+x"(a1), [a2] "+x"(a2), [a3] "+x"(a3),
                           [a4] "+x"(a4), [a5] "+x"(a5), [a6] "+x"(a6), [a7] "+x"(a7)
                         : [w0] "x"(w0), [w1] "x"(w1), [w2] "x"(w2), [w3] "x"(w3),
                           [x0] "x"(x0), [x1] "x"(x1), [one] "x"(one)
                         : "xmm15");
    __m256i acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    int32_t lanes[8], total = 0;
    for (int r = 0; r < 8; r++) {
        _mm256_storeu_si256((__m256i *)(void *)lanes, acc[r]);
        for (int l = 0; l < 8; l++) total += lanes[l];
    }
    if (oc_cpu_id() < oc_numel(sink)) ((int32_t *)sink->data)[oc_cpu_id()] = total;
#else
    (void)steps, (void)sink;
    OC_CHECK(0, "lowp_i8_mix: this build has no AVX2 (built without -mavx2)");
#endif
}

/* lowp_widen_u4's rows [j, j + nr) (nr 4 or 1) of w, group gs. */
static inline __attribute__((always_inline)) void u4_rows(float *out, const oc_weights *w,
                                                          int64_t j, int nr)
{
    int64_t k = w->k, gs = w->group, ng = k / gs;
    const char *wr[4];
    const float *sr[4], *zr[4];
    for (int r = 0; r < nr; r++) {
        wr[r] = (const char *)w->data + (j + r) * w->row_bytes;
        sr[r] = w->scale + (j + r) * ng, zr[r] = w->zero + (j + r) * ng;
    }
#if defined(__AVX512F__)
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i sh = _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);
    __m512 acc[4];
    for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m512 tab[4], part[4];
        for (int r = 0; r < nr; r++) {
            tab[r] = _mm512_sub_ps(iota, _mm512_set1_ps(zr[r][g]));
            part[r] = _mm512_setzero_ps();
        }
        for (int64_t p = g * gs; p < (g + 1) * gs; p += 16)
            for (int r = 0; r < nr; r++) {
                int64_t b;
                memcpy(&b, wr[r] + p / 2, 8);
                __m512i idx = _mm512_srlv_epi32(_mm512_set1_epi64(b), sh);
                part[r] = _mm512_add_ps(part[r], _mm512_permutexvar_ps(idx, tab[r]));
            }
        for (int r = 0; r < nr; r++)
            acc[r] = _mm512_fmadd_ps(part[r], _mm512_set1_ps(sr[r][g]), acc[r]);
    }
    for (int r = 0; r < nr; r++) out[j + r] = _mm512_reduce_add_ps(acc[r]);
#elif defined(__AVX2__) && defined(__F16C__)
    const __m256i sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), f = _mm256_set1_epi32(15);
    __m256 alo[4], ahi[4];
    for (int r = 0; r < nr; r++) alo[r] = ahi[r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m256 z[4], lo[4], hi[4];
        for (int r = 0; r < nr; r++) {
            z[r] = _mm256_set1_ps(zr[r][g]);
            lo[r] = hi[r] = _mm256_setzero_ps();
        }
        for (int64_t p = g * gs; p < (g + 1) * gs; p += 16)
            for (int r = 0; r < nr; r++) {
                int32_t b0, b1;
                memcpy(&b0, wr[r] + p / 2, 4);
                memcpy(&b1, wr[r] + p / 2 + 4, 4);
                __m256i q0 = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b0), sh), f),
                        q1 = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b1), sh), f);
                lo[r] = _mm256_add_ps(lo[r], _mm256_sub_ps(_mm256_cvtepi32_ps(q0), z[r]));
                hi[r] = _mm256_add_ps(hi[r], _mm256_sub_ps(_mm256_cvtepi32_ps(q1), z[r]));
            }
        for (int r = 0; r < nr; r++) {
            __m256 sc = _mm256_set1_ps(sr[r][g]);
            alo[r] = _mm256_fmadd_ps(lo[r], sc, alo[r]);
            ahi[r] = _mm256_fmadd_ps(hi[r], sc, ahi[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[j + r] = WSUM(_mm256_add_ps(alo[r], ahi[r]));
#else
    for (int r = 0; r < nr; r++) {
        out[j + r] = 0;
        for (int64_t g = 0; g < ng; g++) {
            float part = 0;
            for (int64_t p = g * gs; p < (g + 1) * gs; p++) {
                uint8_t b = (uint8_t)wr[r][p >> 1];
                part += (float)(p & 1 ? b >> 4 : b & 15) - zr[r][g];
            }
            out[j + r] += part * sr[r][g];
        }
    }
#endif
}

oc_tensor *lowp_widen_u4(const oc_tensor *w, const oc_tensor *scale, const oc_tensor *zero,
                         int64_t group)
{
    oc_tensor *y = oc_dst_tensor();
    const oc_tensor *in[3] = {w, scale, zero}; /* strided or expanded: copied first */
    for (int t = 0; t < 3; t++)
        if (!oc_is_contiguous(in[t])) in[t] = oc_to_dtype(in[t], in[t]->dtype);
    oc_weights wt = oc_weights_grouped(in[0], OC_W_U4G, group, in[1], in[2]);
    if (!wt.data) return y; /* the kernel failed with oc_weights_grouped's message */
    OC_CHECK(group % 16 == 0, "lowp_widen_u4: group %lld is not a multiple of 16",
             (long long)group);
    int64_t lo, hi, j;
    oc_core_range(wt.n, 16, &lo, &hi);
    for (j = lo; j + 4 <= hi; j += 4) u4_rows(y->data, &wt, j, 4);
    for (; j < hi; j++) u4_rows(y->data, &wt, j, 1);
    return y;
}
