/* Element-wise tile math, reductions, transpose, scan and affine select.
 *
 * Built at -O3 -fno-math-errno (mk/tile.mk) and cloned for AVX2+FMA with a
 * generic fallback (target_clones: the loader picks one per CPU), so the
 * loops vectorise whatever the kernel's flags. -std=c11 keeps FMA
 * contraction off, and reductions use vecmath.h's fixed-order lane sums:
 * both clones give the same bits for them. EXP on unit-stride runs is
 * glibc's AVX2 expf written out (8 or 16 lanes: the same bits) on any CPU
 * with AVX2; strided runs, and CPUs without AVX2, call libm's expf as the
 * compiler vectorises it (libmvec's SSE and AVX2 versions differ in the
 * last bit for some inputs). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/internal.h"
#include "opcore/tile.h"
#include "opcore/vecmath.h"
#include "tile/tile_internal.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(OC_TILE_NO_CLONES)
#define OC_TILE_FN __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define OC_TILE_FN
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define OC_TILE_EXP_X86 1
#endif
/* Helpers are inlined into each clone, so they compile for its target. */
#define OC_TILE_INLINE static inline __attribute__((always_inline))

#define F32(t, i) ((float *)(t)->data + (i) * (t)->rs)
#define CF32(t, i) ((const float *)(t)->data + (i) * (t)->rs)

static int exp_path(void);

/* b broadcasts to a's rows x cols? (same, or 1 along a dim) */
static bool fits(const oc_tile *b, int64_t rows, int64_t cols)
{
    return (b->rows == rows || b->rows == 1) && (b->cols == cols || b->cols == 1);
}

static bool check_shapes(const char *fn, const oc_tile *dst, const oc_tile *a, const oc_tile *b)
{
    if (!oc__tile_want_f32(dst, fn, "dst") || !oc__tile_want_f32(a, fn, "a") || (b && !oc__tile_want_f32(b, fn, "b")))
        return false;
    if (!oc__tile_apart(dst, a, true, fn, "a") || (b && !oc__tile_apart(dst, b, true, fn, "b"))) return false;
    if (fits(a, dst->rows, dst->cols) && (!b || fits(b, dst->rows, dst->cols))) return true;
    oc__raise(OC_EINVAL, "%s: dst is %lld x %lld, a %lld x %lld%s%lld x %lld (each operand must match dst "
              "or be 1 along a dim)", fn, (long long)dst->rows, (long long)dst->cols, (long long)a->rows,
              (long long)a->cols, b ? ", b " : "", b ? (long long)b->rows : 0LL, b ? (long long)b->cols : 0LL);
    return false;
}

/* ---- binary ------------------------------------------------------------------ */

/* One row: d[j] = a[j*as] op b[j*bs], a stride 0 broadcasts a scalar. The
 * switch is outside the loop (each case is its own vector loop). */
#define BIN_LOOP(EXPR)                                                                   \
    do {                                                                                 \
        if (as == 1 && bs == 1 && ds == 1)                                               \
            for (int64_t j = 0; j < n; j++) { float x = a[j], y = b[j]; d[j] = (EXPR); } \
        else if (as == 1 && bs == 0 && ds == 1)                                          \
            for (int64_t j = 0; j < n; j++) { float x = a[j], y = b[0]; d[j] = (EXPR); } \
        else if (as == 0 && bs == 1 && ds == 1)                                          \
            for (int64_t j = 0; j < n; j++) { float x = a[0], y = b[j]; d[j] = (EXPR); } \
        else                                                                             \
            for (int64_t j = 0; j < n; j++) { float x = a[j * as], y = b[j * bs]; d[j * ds] = (EXPR); } \
    } while (0)

OC_TILE_INLINE void bin_row(float *d, int64_t ds, const float *a, int64_t as, const float *b, int64_t bs,
                           int64_t n, oc_tile_binop op)
{
    switch (op) {
    case OC_TILE_ADD: BIN_LOOP(x + y); break;
    case OC_TILE_SUB: BIN_LOOP(x - y); break;
    case OC_TILE_MUL: BIN_LOOP(x * y); break;
    case OC_TILE_DIV: BIN_LOOP(x / y); break;
    case OC_TILE_MAX: BIN_LOOP(x > y || x != x ? x : y); break;
    case OC_TILE_MIN: BIN_LOOP(x < y || x != x ? x : y); break;
    }
}

/* A column (rows x 1, e.g. a per-row statistic) runs as one strided run
 * down the rows, not a call per row: element-wise, so the same bits. */
OC_TILE_FN void oc_tile_binary(oc_tile *dst, const oc_tile *a, const oc_tile *b, oc_tile_binop op)
{
    if (!check_shapes("oc_tile_binary", dst, a, b)) return;
    if (dst->cols == 1 && dst->rows > 1) {
        bin_row(F32(dst, 0), dst->rs, CF32(a, 0), a->rows == 1 ? 0 : a->rs, CF32(b, 0), b->rows == 1 ? 0 : b->rs,
                dst->rows, op);
        return;
    }
    int64_t as = a->cols == 1 ? 0 : a->cs, bs = b->cols == 1 ? 0 : b->cs;
    for (int64_t i = 0; i < dst->rows; i++)
        bin_row(F32(dst, i), dst->cs, CF32(a, a->rows == 1 ? 0 : i), as, CF32(b, b->rows == 1 ? 0 : i), bs,
                dst->cols, op);
}

OC_TILE_FN void oc_tile_binary_scalar(oc_tile *dst, const oc_tile *a, float s, oc_tile_binop op)
{
    if (!check_shapes("oc_tile_binary_scalar", dst, a, NULL)) return;
    if (dst->cols == 1 && dst->rows > 1) {
        bin_row(F32(dst, 0), dst->rs, CF32(a, 0), a->rows == 1 ? 0 : a->rs, &s, 0, dst->rows, op);
        return;
    }
    int64_t as = a->cols == 1 ? 0 : a->cs;
    for (int64_t i = 0; i < dst->rows; i++)
        bin_row(F32(dst, i), dst->cs, CF32(a, a->rows == 1 ? 0 : i), as, &s, 0, dst->cols, op);
}

/* ---- normalize ----------------------------------------------------------------- */

/* One row of oc_tile_normalize; w or b NULL: none. Written as the separate
 * ops round (each product and sum to float, no contraction): the same bits. */
#define NORM_LOOP(UNIT, EXPR)                                                                 \
    do {                                                                                      \
        if (xs == 1 && ds == 1 && (UNIT))                                                     \
            for (int64_t j = 0; j < n; j++) { float y = (x[j] - m) * r; d[j] = (EXPR); } \
        else                                                                                  \
            for (int64_t j = 0; j < n; j++) { float y = (x[j * xs] - m) * r; d[j * ds] = (EXPR); } \
    } while (0)

OC_TILE_INLINE void norm_row(float *d, int64_t ds, const float *x, int64_t xs, float m, float r, const float *w,
                            int64_t ws, const float *b, int64_t bs, int64_t n)
{
    /* unit-stride w and b get loops of their own: the vectorised ones */
    if (w && b && ws == 1 && bs == 1) NORM_LOOP(1, y * w[j] + b[j]);
    else if (w && b) NORM_LOOP(0, y * w[j * ws] + b[j * bs]);
    else if (w && ws == 1) NORM_LOOP(1, y * w[j]);
    else if (w) NORM_LOOP(0, y * w[j * ws]);
    else if (b && bs == 1) NORM_LOOP(1, y + b[j]);
    else if (b) NORM_LOOP(0, y + b[j * bs]);
    else NORM_LOOP(1, y);
}

static bool check_norm(const oc_tile *dst, const oc_tile *x, const oc_tile *mean, const oc_tile *rstd,
                       const oc_tile *w, const oc_tile *b)
{
    const char *fn = "oc_tile_normalize";
    if (!oc__tile_want_f32(dst, fn, "dst") || !oc__tile_want_f32(x, fn, "x") ||
        !oc__tile_want_f32(mean, fn, "mean") || !oc__tile_want_f32(rstd, fn, "rstd") ||
        (w && !oc__tile_want_f32(w, fn, "w")) || (b && !oc__tile_want_f32(b, fn, "b")))
        return false;
    bool ok = x->rows == dst->rows && x->cols == dst->cols;
    ok = ok && mean->cols == 1 && (mean->rows == dst->rows || mean->rows == 1);
    ok = ok && rstd->cols == 1 && (rstd->rows == dst->rows || rstd->rows == 1);
    ok = ok && (!w || (w->rows == 1 && (w->cols == dst->cols || w->cols == 1)));
    ok = ok && (!b || (b->rows == 1 && (b->cols == dst->cols || b->cols == 1)));
    if (!ok)
        oc__raise(OC_EINVAL, "%s: dst is %lld x %lld, x %lld x %lld, mean %lld x %lld, rstd %lld x %lld%s (x "
                  "matches dst; mean and rstd are rows x 1, w and b 1 x cols, each may be 1 x 1)", fn,
                  (long long)dst->rows, (long long)dst->cols, (long long)x->rows, (long long)x->cols,
                  (long long)mean->rows, (long long)mean->cols, (long long)rstd->rows, (long long)rstd->cols,
                  w || b ? ", w and b" : "");
    return ok;
}

/* Sixteen floats as one vector: a zmm register with AVX-512, two ymm with
 * AVX2, four xmm otherwise; lane k holds element 16 t + k, as a lanes
 * state does (a: lanes 0-7, b: 8-15), so its sums have lanes_add16's bits. */
typedef float vf16 __attribute__((vector_size(64), aligned(4)));
typedef float vf16_from __attribute__((vector_size(64), aligned(4), may_alias));
#define LOAD16(p) (*(const vf16_from *)(const void *)(p))

#define NORM_PF 256

/* One unit-stride row of oc_tile_normalize (w and b unit stride, or NULL),
 * sixteen lanes a step: norm_row's bits. */
OC_TILE_INLINE void norm_run16(float *d, const float *x, float m, float r, const float *w,
                               const float *b, int64_t n)
{
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        if (j + NORM_PF < n) __builtin_prefetch(d + j + NORM_PF, 1, 3);
        vf16 y = (LOAD16(x + j) - m) * r;
        if (w) y = y * LOAD16(w + j);
        if (b) y = y + LOAD16(b + j);
        memcpy(d + j, &y, sizeof y);
    }
    norm_row(d + j, 1, x + j, 1, m, r, w ? w + j : NULL, 1, b ? b + j : NULL, 1, n - j);
}

/* NORM_GROUP unit-stride rows d[k] of oc_tile_normalize at once, as
 * norm_run16 does each: a block in cache is bound by what it moves between
 * L2 and L1, and the rows share each load of w and b. */
#define NORM_GROUP 4
OC_TILE_INLINE void norm_group16(float *const *d, const float *const *x, const float *m,
                                 const float *r, const float *w, const float *b, int64_t n)
{
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        vf16 wv = {0}, bv = {0};
        if (w) wv = LOAD16(w + j);
        if (b) bv = LOAD16(b + j);
        for (int k = 0; k < NORM_GROUP; k++) {
            vf16 y = (LOAD16(x[k] + j) - m[k]) * r[k];
            if (w) y = y * wv;
            if (b) y = y + bv;
            memcpy(d[k] + j, &y, sizeof y);
        }
    }
    for (int k = 0; k < NORM_GROUP; k++)
        norm_row(d[k] + j, 1, x[k] + j, 1, m[k], r[k], w ? w + j : NULL, 1, b ? b + j : NULL, 1,
                 n - j);
}

/* oc_tile_normalize once its shapes are checked. */
OC_TILE_INLINE void normalize_rows(oc_tile *dst, const oc_tile *x, const oc_tile *mean, const oc_tile *rstd,
                                   const oc_tile *w, const oc_tile *b)
{
    const float *wp = w ? CF32(w, 0) : NULL, *bp = b ? CF32(b, 0) : NULL;
    int64_t ws = w && w->cols > 1 ? w->cs : 0, bs = b && b->cols > 1 ? b->cs : 0;
    bool unit = dst->cs == 1 && x->cs == 1 && (!w || ws == 1) && (!b || bs == 1);
    int64_t i = 0;
    for (; unit && i + NORM_GROUP <= dst->rows; i += NORM_GROUP) {
        float *d[NORM_GROUP], m[NORM_GROUP], r[NORM_GROUP];
        const float *xr[NORM_GROUP];
        for (int k = 0; k < NORM_GROUP; k++) {
            d[k] = F32(dst, i + k), xr[k] = CF32(x, i + k);
            m[k] = *CF32(mean, mean->rows == 1 ? 0 : i + k);
            r[k] = *CF32(rstd, rstd->rows == 1 ? 0 : i + k);
        }
        norm_group16(d, xr, m, r, wp, bp, dst->cols);
    }
    for (; i < dst->rows; i++) {
        float m = *CF32(mean, mean->rows == 1 ? 0 : i), r = *CF32(rstd, rstd->rows == 1 ? 0 : i);
        if (unit) norm_run16(F32(dst, i), CF32(x, i), m, r, wp, bp, dst->cols);
        else norm_row(F32(dst, i), dst->cs, CF32(x, i), x->cs, m, r, wp, ws, bp, bs, dst->cols);
    }
}

#ifdef OC_TILE_EXP_X86
/* normalize_rows in zmm registers (the AVX-512 path): half the AVX2 loop's
 * instructions, where a row block in cache is bound by them. */
__attribute__((target("avx512f"))) static void normalize_rows16(oc_tile *dst, const oc_tile *x,
                                                                const oc_tile *mean,
                                                                const oc_tile *rstd,
                                                                const oc_tile *w, const oc_tile *b)
{
    normalize_rows(dst, x, mean, rstd, w, b);
}
#endif

/* normalize_rows on the CPU's path (its shapes checked). */
static void normalize_go(oc_tile *dst, const oc_tile *x, const oc_tile *mean, const oc_tile *rstd,
                         const oc_tile *w, const oc_tile *b)
{
#ifdef OC_TILE_EXP_X86
    if (exp_path() == 2) {
        normalize_rows16(dst, x, mean, rstd, w, b);
        return;
    }
#endif
    normalize_rows(dst, x, mean, rstd, w, b);
}

OC_TILE_FN void oc_tile_normalize(oc_tile *dst, const oc_tile *x, const oc_tile *mean, const oc_tile *rstd,
                                  const oc_tile *w, const oc_tile *b)
{
    if (check_norm(dst, x, mean, rstd, w, b)) normalize_go(dst, x, mean, rstd, w, b);
}

/* ---- unary --------------------------------------------------------------------- */

/* exp on unit-stride rows: glibc's AVX2 expf (libmvec's _ZGVdN8v_expf:
 * x * log2(e) rounded by a shifter, x - n ln 2 in two parts, a degree-5
 * polynomial, 2^n from the exponent bits; lanes with |x| > 87.34 or NaN
 * through the scalar expf) written out with its constants, 8 lanes for
 * AVX2 and the very same operations 16 lanes wide for AVX-512: both give
 * the bits of _ZGVdN8v_expf for every input (test_tile checks every float
 * in [-104, 89]). Row tails run masked through the same operations, so an
 * element's bits never depend on where it sits in a row, and the AVX-512
 * and AVX2 paths agree. OC_TILE_ISA=avx2 or portable caps the path
 * (portable: the plain loop, libmvec and libm as the compiler calls them). */
#ifdef OC_TILE_EXP_X86
enum {
    EXP_LOG2E = 0x3fb8aa3b, EXP_SHIFT = 0x4b400000, EXP_LN2HI = 0x3f317200, EXP_LN2LO = 0x35bfbe8e,
    EXP_P0 = 0x3f800000, EXP_P1 = 0x3f7ffffe, EXP_P2 = 0x3effff34, EXP_P3 = 0x3e2aacac,
    EXP_P4 = 0x3d2b8392, EXP_P5 = 0x3c07d9fe, EXP_BIG = 0x42aeac4f, EXP_ABS = 0x7fffffff
};

/* The shifter with the exponent's bias in it: m = x log2(e) + 1.5 2^23 + 127
 * holds n + 127 in its low bits, so 2^n is those bits shifted (libmvec adds the
 * 127 after the rounding; both constants are integers whose ulp is 1, so the
 * rounding is the same wherever x log2(e) is not a half-integer, which needs
 * |x| >= 2^22: a lane for the scalar expf). */
enum { EXP_SHIFT_B = EXP_SHIFT + 0x7f };

/* y = exp(x) on every lane, sp = the lanes for the scalar expf (as an
 * integer mask vector, or with AVX-512 a mask register when CMPGT is
 * given one): V is _mm256 or _mm512, I 256 or 512. */
#define EXP_C(V, I, c) V##_castsi##I##_ps(V##_set1_epi32(c))
#define EXP_LANES(V, I, x, y, sp, CMPGT)                                                       \
    do {                                                                                       \
        __typeof__(x) m_ = V##_fmadd_ps(x, EXP_C(V, I, EXP_LOG2E), EXP_C(V, I, EXP_SHIFT_B));  \
        __typeof__(x) n_ = V##_sub_ps(m_, EXP_C(V, I, EXP_SHIFT_B)), r_, p_;                   \
        __typeof__(V##_castps_si##I(x)) e_ = V##_slli_epi32(V##_castps_si##I(m_), 23);        \
        sp = CMPGT(V##_and_si##I(V##_castps_si##I(x), V##_set1_epi32(EXP_ABS)),                    \
                   V##_set1_epi32(EXP_BIG));                                                   \
        r_ = V##_fnmadd_ps(n_, EXP_C(V, I, EXP_LN2HI), x);                                     \
        r_ = V##_fnmadd_ps(n_, EXP_C(V, I, EXP_LN2LO), r_);                                    \
        p_ = V##_fmadd_ps(r_, EXP_C(V, I, EXP_P5), EXP_C(V, I, EXP_P4));                       \
        p_ = V##_fmadd_ps(r_, p_, EXP_C(V, I, EXP_P3));                                        \
        p_ = V##_fmadd_ps(r_, p_, EXP_C(V, I, EXP_P2));                                        \
        p_ = V##_fmadd_ps(r_, p_, EXP_C(V, I, EXP_P1));                                        \
        p_ = V##_fmadd_ps(r_, p_, EXP_C(V, I, EXP_P0));                                        \
        y = V##_mul_ps(V##_castsi##I##_ps(e_), p_);                                            \
    } while (0)

/* The lanes the vector code leaves to the scalar expf (|x| > 87.34, Inf,
 * NaN), again: d[j] = expf(a[j] * scale + bias) for each of them in the
 * run. Out of the vector loop, so that loop makes no call (every vector
 * register is the caller's to save: its constants would live on the stack). */
static void exp_fix(float *d, const float *a, int64_t n, float scale, float bias)
{
    for (int64_t j = 0; j < n; j++) {
        float x = a[j] * scale;
        x = x + bias;
        uint32_t u;
        memcpy(&u, &x, sizeof u);
        if ((int32_t)(u & EXP_ABS) > EXP_BIG) d[j] = expf(x);
    }
}

/* `run` on d in place, a block at a time from a copy of it (exp_fix
 * reads the inputs again after the vector pass wrote d). */
static void exp_in_place(float *d, int64_t n, float scale, float bias,
                         void (*run)(float *, const float *, int64_t, float, float))
{
    float xs[256];
    for (int64_t j = 0, w; j < n; j += w) {
        w = n - j < 256 ? n - j : 256;
        memcpy(xs, d + j, (size_t)w * sizeof *xs);
        run(d + j, xs, w, scale, bias);
    }
}

/* The first k lanes (k >= 8: all) as an integer mask. */
__attribute__((target("avx2"), always_inline)) static inline __m256i first8(int64_t k)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k < 8 ? (int)k : 8),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* 8 lanes of exp(a * scale + bias) into d, true if a lane needs exp_fix;
 * left < 8: only the first left (masked loads and stores, nothing touched
 * past them). */
__attribute__((target("avx2,fma"), always_inline)) static inline bool
exp8(float *d, const float *a, __m256 sc, __m256 bi, int64_t left)
{
    __m256i tail = first8(left), sp;
    __m256 x = left >= 8 ? _mm256_loadu_ps(a) : _mm256_maskload_ps(a, tail), y;
    x = _mm256_add_ps(_mm256_mul_ps(x, sc), bi);
    EXP_LANES(_mm256, 256, x, y, sp, _mm256_cmpgt_epi32);
    if (left >= 8) _mm256_storeu_ps(d, y);
    else _mm256_maskstore_ps(d, tail, y), sp = _mm256_and_si256(sp, tail);
    return !_mm256_testz_si256(sp, sp);
}

__attribute__((target("avx2,fma"))) static void exp_run8(float *d, const float *a, int64_t n,
                                                         float scale, float bias)
{
    if (d == a) { /* in place: exp_fix needs the inputs */
        exp_in_place(d, n, scale, bias, exp_run8);
        return;
    }
    const __m256 sc = _mm256_set1_ps(scale), bi = _mm256_set1_ps(bias);
    bool fix = false;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) fix |= exp8(d + j, a + j, sc, bi, 8); /* whole vectors: no masks */
    if (j < n) fix |= exp8(d + j, a + j, sc, bi, n - j);
    if (fix) exp_fix(d, a, n, scale, bias);
}

/* 16 lanes, as exp8. */
__attribute__((target("avx512f"), always_inline)) static inline bool
exp16(float *d, const float *a, __m512 sc, __m512 bi, int64_t left)
{
    __mmask16 tail = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1), sp;
    __m512 x = left >= 16 ? _mm512_loadu_ps(a) : _mm512_maskz_loadu_ps(tail, a), y;
    x = _mm512_add_ps(_mm512_mul_ps(x, sc), bi);
    EXP_LANES(_mm512, 512, x, y, sp, _mm512_cmpgt_epi32_mask);
    if (left >= 16) _mm512_storeu_ps(d, y);
    else _mm512_mask_storeu_ps(d, tail, y);
    return (sp & tail) != 0;
}

__attribute__((target("avx512f"))) static void exp_run16(float *d, const float *a, int64_t n,
                                                        float scale, float bias)
{
    if (d == a) {
        exp_in_place(d, n, scale, bias, exp_run16);
        return;
    }
    const __m512 sc = _mm512_set1_ps(scale), bi = _mm512_set1_ps(bias);
    bool fix = false;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) fix |= exp16(d + j, a + j, sc, bi, 16);
    if (j < n) fix |= exp16(d + j, a + j, sc, bi, n - j);
    if (fix) exp_fix(d, a, n, scale, bias);
}
#endif

/* The exp path: 2 AVX-512, 1 AVX2, 0 the plain loop; chosen once from the
 * CPU's features, capped by OC_TILE_ISA. */
static int exp_path(void)
{
    static atomic_int path = -1;
    int p = atomic_load_explicit(&path, memory_order_relaxed);
    if (p >= 0) return p;
    p = 0;
#ifdef OC_TILE_EXP_X86
    int cap = oc__tile_isa_cap();
    int lim = cap == OC__ISA_PORTABLE ? 0 : cap == OC__ISA_AVX2 ? 1 : 2;
    if (lim >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) p = 1;
    if (lim >= 2 && p == 1 && __builtin_cpu_supports("avx512f")) p = 2;
#endif
    atomic_store_explicit(&path, p, memory_order_relaxed);
    return p;
}

/* d = exp(a * scale + bias) over a unit-stride run on `path` (capped by
 * what exp_path allows); false where that path is the plain loop. */
static bool exp_fast(float *d, const float *a, int64_t n, float scale, float bias, int path)
{
    int most = exp_path();
    path = path < most ? path : most;
#ifdef OC_TILE_EXP_X86
    if (path == 2) exp_run16(d, a, n, scale, bias);
    else if (path == 1) exp_run8(d, a, n, scale, bias);
#else
    (void)d, (void)a, (void)n, (void)scale, (void)bias;
#endif
    return path > 0;
}

int oc__tile_exp_run(float *d, const float *a, int64_t n, int path)
{
    int most = exp_path();
    if (exp_fast(d, a, n, 1.0f, 0.0f, path)) return path < most ? path : most;
    for (int64_t j = 0; j < n; j++) d[j] = expf(a[j]);
    return 0;
}

#define UN_LOOP(EXPR)                                                                          \
    do {                                                                                       \
        if (as == 1 && ds == 1)                                                                \
            for (int64_t j = 0; j < n; j++) { float x = a[j] * scale + bias; d[j] = (EXPR); }  \
        else                                                                                   \
            for (int64_t j = 0; j < n; j++) { float x = a[j * as] * scale + bias; d[j * ds] = (EXPR); } \
    } while (0)

OC_TILE_INLINE void un_row(float *d, int64_t ds, const float *a, int64_t as, int64_t n, oc_tile_unop f,
                          float scale, float bias)
{
    switch (f) {
    case OC_TILE_IDENTITY: UN_LOOP(x); break;
    case OC_TILE_EXP:
        if (as == 1 && ds == 1 && exp_fast(d, a, n, scale, bias, 2)) break;
        UN_LOOP(expf(x));
        break;
    case OC_TILE_LOG: UN_LOOP(logf(x)); break;
    case OC_TILE_TANH: UN_LOOP(tanhf(x)); break;
    case OC_TILE_SIGMOID: UN_LOOP(1.0f / (1.0f + expf(-x))); break;
    case OC_TILE_SILU: UN_LOOP(x / (1.0f + expf(-x))); break;
    case OC_TILE_GELU: UN_LOOP(0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)))); break;
    case OC_TILE_RSQRT: UN_LOOP(1.0f / sqrtf(x)); break;
    case OC_TILE_RECIPROCAL: UN_LOOP(1.0f / x); break;
    case OC_TILE_SQUARE: UN_LOOP(x * x); break;
    }
}

static bool unop_ok(const char *fn, oc_tile_unop f)
{
    if ((unsigned)f <= OC_TILE_SQUARE) return true;
    oc__raise(OC_EINVAL, "%s: unknown function %d", fn, (int)f);
    return false;
}

OC_TILE_FN void oc_tile_unary(oc_tile *dst, const oc_tile *a, oc_tile_unop f, float scale, float bias)
{
    if (!check_shapes("oc_tile_unary", dst, a, NULL) || !unop_ok("oc_tile_unary", f)) return;
    if (dst->cols == 1 && dst->rows > 1) { /* a column: one run down the rows */
        un_row(F32(dst, 0), dst->rs, CF32(a, 0), a->rows == 1 ? 0 : a->rs, dst->rows, f, scale, bias);
        return;
    }
    int64_t as = a->cols == 1 ? 0 : a->cs;
    for (int64_t i = 0; i < dst->rows; i++)
        un_row(F32(dst, i), dst->cs, CF32(a, a->rows == 1 ? 0 : i), as, dst->cols, f, scale, bias);
}

/* The checks of oc_tile_unary_rowbias (bias NULL allowed where `bias_optional`). */
static bool check_rowbias(const char *fn, const oc_tile *dst, const oc_tile *a, oc_tile_unop f, const oc_tile *bias,
                          bool bias_optional)
{
    if (!check_shapes(fn, dst, a, NULL) || !unop_ok(fn, f)) return false;
    if (!bias && bias_optional) return true;
    if (!oc__tile_want_f32(bias, fn, "bias")) return false;
    if (bias->cols == 1 && (bias->rows == dst->rows || bias->rows == 1)) return true;
    oc__raise(OC_EINVAL, "%s: bias is %lld x %lld, want %lld x 1", fn, (long long)bias->rows, (long long)bias->cols,
              (long long)dst->rows);
    return false;
}

/* Row i's bias (0 without one). */
OC_TILE_INLINE float row_bias(const oc_tile *bias, int64_t i)
{
    return bias ? *CF32(bias, bias->rows == 1 ? 0 : i) : 0.0f;
}

/* oc_tile_unary_rowbias once its shapes are checked. */
OC_TILE_INLINE void rowbias_rows(oc_tile *dst, const oc_tile *a, oc_tile_unop f, float scale, const oc_tile *bias)
{
    int64_t as = a->cols == 1 ? 0 : a->cs;
    for (int64_t i = 0; i < dst->rows; i++)
        un_row(F32(dst, i), dst->cs, CF32(a, a->rows == 1 ? 0 : i), as, dst->cols, f, scale, row_bias(bias, i));
}

OC_TILE_FN void oc_tile_unary_rowbias(oc_tile *dst, const oc_tile *a, oc_tile_unop f, float scale,
                                      const oc_tile *bias)
{
    if (check_rowbias("oc_tile_unary_rowbias", dst, a, f, bias, false)) rowbias_rows(dst, a, f, scale, bias);
}

/* ---- reductions ------------------------------------------------------------------ */

/* Every fixed-order reduction of the tile layer: 16 lanes stepped 16
 * elements at a time, then summed pairwise, in vecmath.h's order (the
 * bits of oc_sum_f32, oc_max_f32 and oc_min_f32); SUMSQ takes the squares
 * of (x - c), c = 0 the plain sum of squares (x - 0 is x, bit for bit).
 * Kept as state, a reduction can ride along another loop (normalize_ahead,
 * activation_reduce) with the same bits as reduce_rows. */
typedef struct {
    oc__vf8 a, b;
} lanes;

OC_TILE_INLINE void lanes_init(lanes *l, oc_tile_redop op)
{
    float v = op == OC_TILE_RMAX ? -INFINITY : op == OC_TILE_RMIN ? INFINITY : 0.0f;
    oc__vf8 z = {0};
    l->a = z + v, l->b = z + v;
}

/* x[0..16): elements 0-7 into a, 8-15 into b. */
OC_TILE_INLINE void lanes_add16(lanes *l, const float *x, oc_tile_redop op, float c)
{
    oc__vf8 lo = OC__LOAD8(x), hi = OC__LOAD8(x + 8);
    switch (op) {
    case OC_TILE_SUM:
    case OC_TILE_MEAN: l->a += lo, l->b += hi; break;
    case OC_TILE_SUMSQ: lo -= c, hi -= c, l->a += lo * lo, l->b += hi * hi; break;
    case OC_TILE_RMAX: OC__VREDUCE_STEP(l->a, x, >); OC__VREDUCE_STEP(l->b, x + 8, >); break;
    case OC_TILE_RMIN: OC__VREDUCE_STEP(l->a, x, <); OC__VREDUCE_STEP(l->b, x + 8, <); break;
    }
}

/* The reduction's value once x[0..j) went through lanes_add16 and
 * x[j..n) is the tail. */
OC_TILE_INLINE float lanes_finish(const lanes *l, const float *x, int64_t j, int64_t n, oc_tile_redop op, float c)
{
    float r;
    if (op == OC_TILE_RMAX || op == OC_TILE_RMIN) {
        bool mx = op == OC_TILE_RMAX;
        r = l->b[0];
        for (int k = 0; k < 8; k++) r = mx ? oc__max1(oc__max1(r, l->a[k]), l->b[k]) : oc__min1(oc__min1(r, l->a[k]), l->b[k]);
        for (; j < n; j++) r = mx ? oc__max1(r, x[j]) : oc__min1(r, x[j]);
        return r;
    }
    oc__vf8 t = l->a + l->b;
    r = ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
    for (; j < n; j++) r += op == OC_TILE_SUMSQ ? (x[j] - c) * (x[j] - c) : x[j];
    return op == OC_TILE_MEAN ? r / (float)n : r;
}

/* op over x[0..n), as one loop. */
OC_TILE_INLINE float lanes_run(const float *x, int64_t n, oc_tile_redop op, float c)
{
    lanes l;
    lanes_init(&l, op);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) lanes_add16(&l, x + j, op, c);
    return lanes_finish(&l, x, j, n, op, c);
}

/* l as l0 was, then nb lanes_add16 steps of op over x: a fast path's state
 * taken again by the exact steps. */
static inline void lanes_redo(lanes *l, const lanes *l0, const float *x, int64_t nb,
                              oc_tile_redop op)
{
    *l = *l0;
    for (int64_t i = 0; i < nb; i++) lanes_add16(l, x + 16 * i, op, 0.0f);
}

/* ---- x86: the extreme of a run, and exp with its sums, in one pass ---------------- */

#ifdef OC_TILE_EXP_X86
/* b where it is strictly beyond a (RMAX mx: larger, else smaller), else a: vmaxps /
 * vminps are the fixed-order step exactly where neither is NaN (a tie keeps a, the
 * earlier); a NaN is caught apart. */
#define EXT8(mx, b, a) ((mx) ? _mm256_max_ps(b, a) : _mm256_min_ps(b, a))
#define EXT16(mx, b, a) ((mx) ? _mm512_max_ps(b, a) : _mm512_min_ps(b, a))

/* The RMAX / RMIN state l after nb more lanes_add16 steps over x, in fewer
 * dependent steps: the step is associative on what it keeps (the last NaN, else
 * the first extreme value), so each pair of 16-element blocks is folded before it
 * meets the state (the same bits; the state's chain is one step per 32 elements,
 * and a step is one instruction). false, l untouched, where a NaN is in x: the
 * caller then takes the exact steps. */
__attribute__((target("avx2"))) static bool ext_steps8(lanes *l, const float *x, int64_t nb,
                                                       bool mx)
{
    __m256 a, b, nan = _mm256_setzero_ps();
    memcpy(&a, &l->a, sizeof a), memcpy(&b, &l->b, sizeof b);
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const float *p = x + 16 * i;
        __m256 a0 = _mm256_loadu_ps(p), b0 = _mm256_loadu_ps(p + 8);
        __m256 a1 = _mm256_loadu_ps(p + 16), b1 = _mm256_loadu_ps(p + 24);
        nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(a0, a1, _CMP_UNORD_Q),
                                             _mm256_cmp_ps(b0, b1, _CMP_UNORD_Q)));
        a = EXT8(mx, EXT8(mx, a1, a0), a), b = EXT8(mx, EXT8(mx, b1, b0), b);
    }
    if (i < nb) {
        __m256 a0 = _mm256_loadu_ps(x + 16 * i), b0 = _mm256_loadu_ps(x + 16 * i + 8);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(a0, b0, _CMP_UNORD_Q));
        a = EXT8(mx, a0, a), b = EXT8(mx, b0, b);
    }
    if (!_mm256_testz_ps(nan, nan)) return false;
    memcpy(&l->a, &a, sizeof a), memcpy(&l->b, &b, sizeof b);
    return true;
}

/* The 16 lanes of a state as one vector (a's lanes, then b's), and back. */
__attribute__((target("avx512f"), always_inline)) static inline __m512 lanes_get16(const lanes *l)
{
    float t[16];
    memcpy(t, &l->a, 8 * sizeof *t), memcpy(t + 8, &l->b, 8 * sizeof *t);
    return _mm512_loadu_ps(t);
}

__attribute__((target("avx512f"), always_inline)) static inline void lanes_put16(lanes *l, __m512 v)
{
    float t[16];
    _mm512_storeu_ps(t, v);
    memcpy(&l->a, t, 8 * sizeof *t), memcpy(&l->b, t + 8, 8 * sizeof *t);
}

/* 16 lanes, as ext_steps8. */
__attribute__((target("avx512f"))) static bool ext_steps16(lanes *l, const float *x, int64_t nb,
                                                           bool mx)
{
    __m512 m = lanes_get16(l);
    __mmask16 nan = 0;
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) { /* two pairs, then the pairs: a chain step per 64 elements */
        const float *p = x + 16 * i;
        __m512 v0 = _mm512_loadu_ps(p), v1 = _mm512_loadu_ps(p + 16);
        __m512 v2 = _mm512_loadu_ps(p + 32), v3 = _mm512_loadu_ps(p + 48);
        nan |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v2, v3, _CMP_UNORD_Q);
        m = EXT16(mx, EXT16(mx, EXT16(mx, v3, v2), EXT16(mx, v1, v0)), m);
    }
    for (; i + 2 <= nb; i += 2) {
        __m512 v0 = _mm512_loadu_ps(x + 16 * i), v1 = _mm512_loadu_ps(x + 16 * i + 16);
        nan |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q);
        m = EXT16(mx, EXT16(mx, v1, v0), m);
    }
    if (i < nb) {
        __m512 v0 = _mm512_loadu_ps(x + 16 * i);
        nan |= _mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q);
        m = EXT16(mx, v0, m);
    }
    if (nan) return false;
    lanes_put16(l, m);
    return true;
}
#endif

/* l (RMAX mx, else RMIN) after the whole 16-element steps of x[0..n), on the
 * x86 vector path; false (l untouched) where there is none or x holds a NaN. */
static bool ext_fast(lanes *l, const float *x, int64_t n, bool mx)
{
#ifdef OC_TILE_EXP_X86
    int p = exp_path();
    if (p == 2) return ext_steps16(l, x, n / 16, mx);
    if (p == 1) return ext_steps8(l, x, n / 16, mx);
#else
    (void)l, (void)x, (void)n, (void)mx;
#endif
    return false;
}

/* RMAX / RMIN over x[0..n): lanes_run's bits. */
OC_TILE_INLINE float ext_run(const float *x, int64_t n, oc_tile_redop op)
{
    lanes l;
    lanes_init(&l, op);
    if (n >= 64 && ext_fast(&l, x, n, op == OC_TILE_RMAX))
        return lanes_finish(&l, x, n / 16 * 16, n, op, 0.0f);
    return lanes_run(x, n, op, 0.0f);
}

/* A constant op in each case: each its own loop. */
OC_TILE_INLINE float reduce_run(const float *x, int64_t n, oc_tile_redop op, float center)
{
    switch (op) {
    case OC_TILE_SUM: return lanes_run(x, n, OC_TILE_SUM, 0.0f);
    case OC_TILE_MEAN: return lanes_run(x, n, OC_TILE_MEAN, 0.0f);
    case OC_TILE_SUMSQ: return lanes_run(x, n, OC_TILE_SUMSQ, center);
    case OC_TILE_RMAX: return ext_run(x, n, OC_TILE_RMAX);
    default: return ext_run(x, n, OC_TILE_RMIN);
    }
}

static bool red_ok(const char *fn, const oc_tile *dst, const char *dst_name, const oc_tile *a, int64_t rows,
                   int64_t cols, oc_tile_redop op)
{
    if (!oc__tile_want_f32(dst, fn, dst_name) || !oc__tile_want_f32(a, fn, "a")) return false;
    if ((unsigned)op > OC_TILE_SUMSQ) {
        oc__raise(OC_EINVAL, "%s: unknown reduction %d", fn, (int)op);
        return false;
    }
    if (dst->rows == rows && dst->cols == cols) return true;
    oc__raise(OC_EINVAL, "%s: %s is %lld x %lld, want %lld x %lld for a %lld x %lld tile", fn, dst_name,
              (long long)dst->rows, (long long)dst->cols, (long long)rows, (long long)cols,
              (long long)a->rows, (long long)a->cols);
    return false;
}

/* op over row i of a (SUMSQ: of the deviations from center). */
OC_TILE_INLINE float row_reduce(const oc_tile *a, int64_t i, oc_tile_redop op, float center)
{
    const float *x = CF32(a, i);
    if (a->cs == 1) return reduce_run(x, a->cols, op, center);
    /* strided row: gather blocks, then the same order */
    float tmp[256], part[256 / 16];
    int64_t nb = 0, n = a->cols;
    oc_tile_redop inner = op == OC_TILE_MEAN ? OC_TILE_SUM : op, outer = op == OC_TILE_SUMSQ ? OC_TILE_SUM : inner;
    for (int64_t j0 = 0; j0 < n; j0 += 256) {
        int64_t m = n - j0 < 256 ? n - j0 : 256;
        for (int64_t j = 0; j < m; j++) tmp[j] = x[(j0 + j) * a->cs];
        part[nb++] = reduce_run(tmp, m, inner, center);
        if (nb == 256 / 16) { /* fold the parts kept so far into one */
            part[0] = reduce_run(part, nb, outer, 0.0f);
            nb = 1;
        }
    }
    float r = reduce_run(part, nb, outer, 0.0f);
    return op == OC_TILE_MEAN ? r / (float)n : r;
}

/* oc_tile_reduce_rows once its shapes are checked. */
OC_TILE_INLINE void reduce_rows_body(oc_tile *dst, const oc_tile *a, oc_tile_redop op)
{
    for (int64_t i = 0; i < a->rows; i++) *F32(dst, i) = row_reduce(a, i, op, 0.0f);
}

OC_TILE_FN void oc_tile_reduce_rows(oc_tile *dst, const oc_tile *a, oc_tile_redop op)
{
    if (red_ok("oc_tile_reduce_rows", dst, "dst", a, a->rows, 1, op)) reduce_rows_body(dst, a, op);
}

/* A lanes state from a vf16 one, then lanes_finish. */
OC_TILE_INLINE float vf16_finish(const vf16 *v, const float *x, int64_t j, int64_t n,
                                 oc_tile_redop op, float c)
{
    lanes l;
    memcpy(&l.a, v, sizeof l.a), memcpy(&l.b, (const char *)v + sizeof l.a, sizeof l.b);
    return lanes_finish(&l, x, j, n, op, c);
}

/* One pass over n columns: the SUM of each row s[k < ns] into sum[k] and
 * the SUMSQ of each row q[k < nq] about c[k] into dev[k] (centred false: about
 * 0), each row a chain of its own (constant ns and nq where inlined: the
 * loop keeps them all in registers), each with reduce_run's bits. */
OC_TILE_INLINE void moments_pass(const float *const *s, int ns, float *sum, const float *const *q,
                                 int nq, const float *c, bool centred, float *dev, int64_t n)
{
    vf16 vs[2] = {{0}}, vq[4] = {{0}};
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        for (int k = 0; k < ns; k++) vs[k] += LOAD16(s[k] + j);
        for (int k = 0; k < nq; k++) {
            vf16 d = LOAD16(q[k] + j);
            if (centred) d -= c[k];
            vq[k] += d * d;
        }
    }
    for (int k = 0; k < ns; k++) sum[k] = vf16_finish(&vs[k], s[k], j, n, OC_TILE_SUM, 0.0f);
    for (int k = 0; k < nq; k++)
        dev[k] = vf16_finish(&vq[k], q[k], j, n, OC_TILE_SUMSQ, centred ? c[k] : 0.0f);
}

/* oc_tile_moments on unit-stride rows. With a mean, each pass sums rows i
 * and i + 1 and takes the squared deviations of rows i - 2 and i - 1 (their
 * means known, their data fresh in cache); without, four rows' squares a
 * pass: the adds of one row wait on each other (a chain), four rows' do
 * not, so the passes run at the FP units' rate, not the adds' latency. */
OC_TILE_INLINE void moments_pipe(oc_tile *mean, oc_tile *var, const oc_tile *a)
{
    int64_t rows = a->rows, n = a->cols;
    const float *q[4];
    float dev[4], sum[2], c[2] = {0.0f, 0.0f};
    if (!mean) {
        for (int64_t i = 0; i < rows; i += 4) {
            int nq = rows - i < 4 ? (int)(rows - i) : 4;
            for (int k = 0; k < nq; k++) q[k] = CF32(a, i + k);
            if (nq == 4) moments_pass(NULL, 0, NULL, q, 4, c, false, dev, n);
            else moments_pass(NULL, 0, NULL, q, nq, c, false, dev, n);
            for (int k = 0; k < nq; k++) *F32(var, i + k) = dev[k] / (float)n;
        }
        return;
    }
    for (int64_t i = 0; i < rows + 2; i += 2) {
        int ns = rows - i < 2 ? (int)(rows - i) : 2, nq = i == 0 ? 0 : rows - (i - 2) < 2 ? 1 : 2;
        const float *s[2] = {ns > 0 ? CF32(a, i) : NULL, ns > 1 ? CF32(a, i + 1) : NULL};
        for (int k = 0; k < nq; k++) q[k] = CF32(a, i - 2 + k), c[k] = *F32(mean, i - 2 + k);
        if (ns == 2 && nq == 2) moments_pass(s, 2, sum, q, 2, c, true, dev, n);
        else moments_pass(s, ns < 0 ? 0 : ns, sum, q, nq, c, true, dev, n);
        for (int k = 0; k < nq; k++) *F32(var, i - 2 + k) = dev[k] / (float)n;
        for (int k = 0; k < ns; k++) *F32(mean, i + k) = sum[k] / (float)n;
    }
}

/* oc_tile_moments once its shapes are checked. */
OC_TILE_INLINE void moments_rows(oc_tile *mean, oc_tile *var, const oc_tile *a)
{
    if (a->cs == 1) {
        moments_pipe(mean, var, a);
        return;
    }
    for (int64_t i = 0; i < a->rows; i++) {
        float m = mean ? row_reduce(a, i, OC_TILE_MEAN, 0.0f) : 0.0f; /* no mean: about 0 */
        if (mean) *F32(mean, i) = m;
        *F32(var, i) = row_reduce(a, i, OC_TILE_SUMSQ, m) / (float)a->cols;
    }
}

#ifdef OC_TILE_EXP_X86
/* moments_rows in zmm registers (the AVX-512 path). */
__attribute__((target("avx512f"))) static void moments_rows16(oc_tile *mean, oc_tile *var,
                                                              const oc_tile *a)
{
    moments_rows(mean, var, a);
}
#endif

/* moments_rows on the CPU's path (its shapes checked). */
static void moments_go(oc_tile *mean, oc_tile *var, const oc_tile *a)
{
#ifdef OC_TILE_EXP_X86
    if (exp_path() == 2) {
        moments_rows16(mean, var, a);
        return;
    }
#endif
    moments_rows(mean, var, a);
}

OC_TILE_FN void oc_tile_moments(oc_tile *mean, oc_tile *var, const oc_tile *a)
{
    const char *fn = "oc_tile_moments";
    if ((!mean || red_ok(fn, mean, "mean", a, a->rows, 1, OC_TILE_MEAN)) &&
        red_ok(fn, var, "var", a, a->rows, 1, OC_TILE_SUMSQ))
        moments_go(mean, var, a);
}

/* How far ahead (elements) the fused normalising loop prefetches the row
 * it reads from memory (the hardware's streamer restarts at each 4 KiB
 * page) and the row it writes (a store to a line not yet in L1 waits for
 * it; a fresh page's lines are in cache, zeroed by the kernel, where a
 * non-temporal store would only evict them). With the one-pass mean(x^2):
 * rmsnorm [4096, 8192] 0.80x -> 0.95x a copy of the same bytes, 1 core. */
#define OC_TILE_PF_AHEAD 512

/* One row of oc_tile_normalize_ahead's fused path (unit strides; w and b
 * may be NULL): row d = normalised x; the sum of row nx into *sum (nx
 * given); and, when dv is given, the sum of squared deviations of row dv
 * from c into *dev (the bits of reduce_run). pf: the row from memory, to
 * prefetch ahead of the loop. */
OC_TILE_INLINE void norm_row_ahead(float *d, const float *x, float m, float r, const float *w, const float *b,
                                   int64_t n, const float *nx, float *sum, const float *dv, float c, float *dev,
                                   const float *pf)
{
    vf16 ls = {0}, lq = {0};
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        if (j + OC_TILE_PF_AHEAD < n)
            __builtin_prefetch(pf + j + OC_TILE_PF_AHEAD, 0, 3), __builtin_prefetch(d + j + OC_TILE_PF_AHEAD, 1, 3);
        vf16 y = (LOAD16(x + j) - m) * r;
        if (w) y = y * LOAD16(w + j); /* the same for the whole row: predicted */
        if (b) y = y + LOAD16(b + j);
        memcpy(d + j, &y, sizeof y);
        if (nx) ls += LOAD16(nx + j);
        if (dv) {
            vf16 e = LOAD16(dv + j) - c;
            lq += e * e;
        }
    }
    norm_row(d + j, 1, x + j, 1, m, r, w ? w + j : NULL, 1, b ? b + j : NULL, 1, n - j);
    if (dv) *dev = vf16_finish(&lq, dv, j, n, OC_TILE_SUMSQ, c);
    if (nx) *sum = vf16_finish(&ls, nx, j, n, OC_TILE_SUM, 0.0f);
}

/* oc_tile_normalize_ahead's fused path: rows of one length, unit strides. */
OC_TILE_INLINE void ahead_rows(oc_tile *dst, const oc_tile *x, const oc_tile *mean,
                               const oc_tile *rstd, const oc_tile *w, const oc_tile *b,
                               oc_tile *next_mean, oc_tile *next_var, const oc_tile *next)
{
    int64_t rows = dst->rows > next->rows ? dst->rows : next->rows, n = x->cols;
    const float *wp = w ? CF32(w, 0) : NULL, *bp = b ? CF32(b, 0) : NULL;
    if (!next_mean) {
        /* mean(x^2), the moment about 0: row i's loop writes dst row i and
         * takes the squares of next row i (from memory) as it reads it, one
         * pass (the same lanes, so the same bits as reduce_run). */
        for (int64_t i = 0; i < rows; i++) {
            const float *nv = i < next->rows ? CF32(next, i) : NULL;
            float q = 0.0f;
            if (i < dst->rows && nv)
                norm_row_ahead(F32(dst, i), CF32(x, i), *CF32(mean, mean->rows == 1 ? 0 : i),
                               *CF32(rstd, rstd->rows == 1 ? 0 : i), wp, bp, n, NULL, NULL, nv, 0.0f, &q, nv);
            else if (i < dst->rows)
                norm_run16(F32(dst, i), CF32(x, i), *CF32(mean, mean->rows == 1 ? 0 : i),
                           *CF32(rstd, rstd->rows == 1 ? 0 : i), wp, bp, n);
            else
                q = reduce_run(nv, n, OC_TILE_SUMSQ, 0.0f);
            if (nv) *F32(next_var, i) = q / (float)n;
        }
        return;
    }
    /* Row i's loop writes dst row i, sums next row i (from memory) and
     * takes the squared deviations of next row i - 1 (in cache, its mean
     * known): no pass but the last row's waits on memory alone. */
    float c = 0.0f; /* the mean of next row i - 1 */
    for (int64_t i = 0; i <= rows; i++) {
        const float *dv = i > 0 && i - 1 < next->rows ? CF32(next, i - 1) : NULL;
        float q = 0.0f, s = 0.0f, m = 0.0f, r = 0.0f;
        if (i < dst->rows) m = *CF32(mean, mean->rows == 1 ? 0 : i), r = *CF32(rstd, rstd->rows == 1 ? 0 : i);
        if (i < dst->rows && i < next->rows) {
            const float *nx = CF32(next, i);
            norm_row_ahead(F32(dst, i), CF32(x, i), m, r, wp, bp, n, nx, &s, dv, c, &q, nx);
        } else {
            if (i < dst->rows) norm_run16(F32(dst, i), CF32(x, i), m, r, wp, bp, n);
            if (i < next->rows) s = reduce_run(CF32(next, i), n, OC_TILE_SUM, 0.0f);
            if (dv) q = reduce_run(dv, n, OC_TILE_SUMSQ, c);
        }
        if (dv) *F32(next_var, i - 1) = q / (float)n;
        if (i < next->rows) *F32(next_mean, i) = c = s / (float)n;
    }
}

#ifdef OC_TILE_EXP_X86
/* ahead_rows in zmm registers (the AVX-512 path): in cache ([32, 4096]) the
 * fused loop is bound by its instructions, which this halves. */
__attribute__((target("avx512f"))) static void ahead_rows16(oc_tile *dst, const oc_tile *x,
                                                            const oc_tile *mean,
                                                            const oc_tile *rstd,
                                                            const oc_tile *w, const oc_tile *b,
                                                            oc_tile *next_mean, oc_tile *next_var,
                                                            const oc_tile *next)
{
    ahead_rows(dst, x, mean, rstd, w, b, next_mean, next_var, next);
}
#endif

OC_TILE_FN void oc_tile_normalize_ahead(oc_tile *dst, const oc_tile *x, const oc_tile *mean, const oc_tile *rstd,
                                        const oc_tile *w, const oc_tile *b, oc_tile *next_mean, oc_tile *next_var,
                                        const oc_tile *next)
{
    const char *fn = "oc_tile_normalize_ahead";
    if (!check_norm(dst, x, mean, rstd, w, b)) return;
    if (next == NULL) {
        normalize_go(dst, x, mean, rstd, w, b);
        return;
    }
    if ((next_mean && !red_ok(fn, next_mean, "next_mean", next, next->rows, 1, OC_TILE_MEAN)) ||
        !red_ok(fn, next_var, "next_var", next, next->rows, 1, OC_TILE_SUMSQ))
        return;
    /* Fused only where every row is unit stride and of one length;
     * otherwise the two calls it stands for (the same results). */
    bool fused = (!w || (w->cols == x->cols && w->cs == 1)) && (!b || (b->cols == x->cols && b->cs == 1)) &&
                 x->cs == 1 && dst->cs == 1 && next->cs == 1 && next->cols == x->cols;
    if (!fused) {
        normalize_go(dst, x, mean, rstd, w, b);
        moments_go(next_mean, next_var, next);
        return;
    }
#ifdef OC_TILE_EXP_X86
    if (exp_path() == 2) {
        ahead_rows16(dst, x, mean, rstd, w, b, next_mean, next_var, next);
        return;
    }
#endif
    ahead_rows(dst, x, mean, rstd, w, b, next_mean, next_var, next);
}

/* ---- activation with ride-along reductions --------------------------------------- */

#ifdef OC_TILE_EXP_X86
/* One chunk of act_row on the x86 vector path, in one loop: d[0..w) = exp(x * scale
 * + bias) (exp16's lanes), the whole 16-element steps of d into the SUM state ls and
 * those of nx (NULL: none) into the RMAX / RMIN state ln (mx: RMAX); d must not be x.
 * The sum's adds ride in the exp's loop (the same adds in the same order as
 * lanes_add16's: the bits of a pass after it), the extreme's steps as ext_steps16
 * folds them. Lanes for the scalar expf (exp_fix) or a NaN in nx: that chunk's
 * state is taken again by the exact steps. */
__attribute__((target("avx512f"))) static void exp_chunk16(float *d, const float *x, int64_t w,
                                                          float scale, float bias, lanes *ls,
                                                          const float *nx, lanes *ln, bool mx)
{
    const __m512 sc = _mm512_set1_ps(scale), bi = _mm512_set1_ps(bias);
    const bool unit = scale == 1.0f; /* x * 1 is x (a NaN lane goes to exp_fix anyway) */
    const lanes ls0 = *ls, ln0 = *ln;
    __m512 s = lanes_get16(ls), m = lanes_get16(ln);
    __mmask16 fix = 0, nan = 0;
    int64_t nb = w / 16, i = 0;
    for (; i < nb; i++) {
        if (nx) __builtin_prefetch(nx + 16 * i + OC_TILE_PF_AHEAD, 0, 3);
        __builtin_prefetch(d + 16 * i + OC_TILE_PF_AHEAD, 1, 3);
        __m512 v = _mm512_loadu_ps(x + 16 * i), y;
        v = _mm512_add_ps(unit ? v : _mm512_mul_ps(v, sc), bi);
        __mmask16 sp;
        EXP_LANES(_mm512, 512, v, y, sp, _mm512_cmpgt_epi32_mask);
        _mm512_storeu_ps(d + 16 * i, y);
        fix |= sp, s = _mm512_add_ps(s, y);
        if (nx && (i & 1)) { /* blocks i - 1 and i, folded, then the state */
            __m512 v0 = _mm512_loadu_ps(nx + 16 * i - 16), v1 = _mm512_loadu_ps(nx + 16 * i);
            nan |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q);
            m = EXT16(mx, EXT16(mx, v1, v0), m);
        }
    }
    if (nx && (nb & 1)) {
        __m512 v0 = _mm512_loadu_ps(nx + 16 * nb - 16);
        nan |= _mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q);
        m = EXT16(mx, v0, m);
    }
    if (w > 16 * nb && exp16(d + 16 * nb, x + 16 * nb, sc, bi, w - 16 * nb)) fix = 1;
    lanes_put16(ls, s), lanes_put16(ln, m);
    if (fix) {
        exp_fix(d, x, w, scale, bias);
        lanes_redo(ls, &ls0, d, nb, OC_TILE_SUM);
    }
    if (nan) lanes_redo(ln, &ln0, nx, nb, mx ? OC_TILE_RMAX : OC_TILE_RMIN);
}

/* 8 lanes, as exp_chunk16: two exp8 vectors a step, the first into ls's a, the second into b. */
__attribute__((target("avx2,fma"))) static void exp_chunk8(float *d, const float *x, int64_t w,
                                                          float scale, float bias, lanes *ls,
                                                          const float *nx, lanes *ln, bool mx)
{
    const __m256 sc = _mm256_set1_ps(scale), bi = _mm256_set1_ps(bias);
    const bool unit = scale == 1.0f;
    const lanes ls0 = *ls, ln0 = *ln;
    __m256 sab[2], mab[2], nan = _mm256_setzero_ps();
    __m256i fix = _mm256_setzero_si256();
    memcpy(&sab[0], &ls->a, 32), memcpy(&sab[1], &ls->b, 32);
    memcpy(&mab[0], &ln->a, 32), memcpy(&mab[1], &ln->b, 32);
    int64_t nb = w / 16, i = 0;
    for (; i < nb; i++) {
        if (nx) __builtin_prefetch(nx + 16 * i + OC_TILE_PF_AHEAD, 0, 3);
        __builtin_prefetch(d + 16 * i + OC_TILE_PF_AHEAD, 1, 3);
        for (int h = 0; h < 2; h++) {
            __m256 v = _mm256_loadu_ps(x + 16 * i + 8 * h), y;
            v = _mm256_add_ps(unit ? v : _mm256_mul_ps(v, sc), bi);
            __m256i sp;
            EXP_LANES(_mm256, 256, v, y, sp, _mm256_cmpgt_epi32);
            _mm256_storeu_ps(d + 16 * i + 8 * h, y);
            fix = _mm256_or_si256(fix, sp), sab[h] = _mm256_add_ps(sab[h], y);
            if (nx && (i & 1)) {
                __m256 v0 = _mm256_loadu_ps(nx + 16 * i - 16 + 8 * h);
                __m256 v1 = _mm256_loadu_ps(nx + 16 * i + 8 * h);
                nan = _mm256_or_ps(nan, _mm256_cmp_ps(v0, v1, _CMP_UNORD_Q));
                mab[h] = EXT8(mx, EXT8(mx, v1, v0), mab[h]);
            }
        }
    }
    for (int h = 0; nx && (nb & 1) && h < 2; h++) {
        __m256 v0 = _mm256_loadu_ps(nx + 16 * nb - 16 + 8 * h);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v0, v0, _CMP_UNORD_Q));
        mab[h] = EXT8(mx, v0, mab[h]);
    }
    bool fixed = !_mm256_testz_si256(fix, fix);
    for (int64_t j = 16 * nb; j < w; j += 8) fixed |= exp8(d + j, x + j, sc, bi, w - j);
    memcpy(&ls->a, &sab[0], 32), memcpy(&ls->b, &sab[1], 32);
    memcpy(&ln->a, &mab[0], 32), memcpy(&ln->b, &mab[1], 32);
    if (fixed) {
        exp_fix(d, x, w, scale, bias);
        lanes_redo(ls, &ls0, d, nb, OC_TILE_SUM);
    }
    if (!_mm256_testz_ps(nan, nan)) lanes_redo(ln, &ln0, nx, nb, mx ? OC_TILE_RMAX : OC_TILE_RMIN);
}
#endif

/* One row of oc_tile_activation_reduce's fused path (unit strides): d =
 * f(x * scale + bias), *sum = the sum of d (when sum is given), *next_r =
 * op over row nx (when nx is given). 1024 elements of d at a time (4 KiB:
 * still in L1 for the sum; a call of the exp per 64 cost a quarter of
 * softmax [32, 4096]'s time), then the
 * reductions as far as they have whole 16-element steps, so the reads of
 * nx from memory overlap the writes of d. Each chunk of nx is prefetched
 * (every line, to L2) before its chunk of d is computed: read in bursts
 * after the compute, a 4 KiB chunk waited on memory each time (the
 * hardware's streamer restarts at each 4 KiB page); prefetched, softmax
 * [4096, 8192] ran 1.08-1.13x faster on one core (0.96-0.98x at [32, 4096],
 * in cache, for the prefetch instructions). The chunk length stays a
 * run-time value: un_row's loop is then the one a whole row runs, and each
 * element takes the same path (libmvec's vector exp or glibc's scalar one,
 * which can differ in the last bit) as in oc_tile_unary_rowbias. */
OC_TILE_INLINE void act_row(float *d, const float *x, oc_tile_unop f, float scale, float bias, int64_t n,
                            float *sum, const float *nx, oc_tile_redop op, float *next_r)
{
    lanes ls, ln;
    lanes_init(&ls, OC_TILE_SUM), lanes_init(&ln, op);
    int64_t k = 0; /* reduced up to k */
    int path = 0;
#ifdef OC_TILE_EXP_X86
    if (f == OC_TILE_EXP && d != x && (!nx || op == OC_TILE_RMAX || op == OC_TILE_RMIN))
        path = exp_path();
#endif
    for (int64_t j = 0, w; j < n; j += w) {
        w = n - j < 1024 ? n - j : 1024;
        if (nx && !path) /* each line of nx's chunk into L2 before this chunk's exp: see above */
            for (int64_t q = j; q < j + w; q += 16) __builtin_prefetch(nx + q, 0, 2);
#ifdef OC_TILE_EXP_X86
        if (path && j == 0) /* the fused loop prefetches OC_TILE_PF_AHEAD on: the lines before */
            for (int64_t q = 0; q < OC_TILE_PF_AHEAD && q < n; q += 16) {
                if (nx) __builtin_prefetch(nx + q, 0, 3);
                __builtin_prefetch(d + q, 1, 3);
            }
        if (path) { /* exp and both reductions in one loop */
            (path == 2 ? exp_chunk16 : exp_chunk8)(d + j, x + j, w, scale, bias, &ls,
                                                  nx ? nx + j : NULL, &ln, op == OC_TILE_RMAX);
            k = j + w / 16 * 16;
            continue;
        }
#endif
        un_row(d + j, 1, x + j, 1, w, f, scale, bias);
        for (; k + 16 <= j + w; k += 16) {
            if (sum) lanes_add16(&ls, d + k, OC_TILE_SUM, 0.0f);
            if (nx) lanes_add16(&ln, nx + k, op, 0.0f);
        }
    }
    if (sum) *sum = lanes_finish(&ls, d, k, n, OC_TILE_SUM, 0.0f);
    if (nx) *next_r = lanes_finish(&ln, nx, k, n, op, 0.0f);
}

OC_TILE_FN void oc_tile_activation_reduce(oc_tile *dst, const oc_tile *a, oc_tile_unop f, float scale,
                                          const oc_tile *bias, oc_tile *sum, oc_tile *next_red, const oc_tile *next,
                                          oc_tile_redop next_op)
{
    const char *fn = "oc_tile_activation_reduce";
    if (!check_rowbias(fn, dst, a, f, bias, true)) return;
    if (sum && !red_ok(fn, sum, "sum", dst, dst->rows, 1, OC_TILE_SUM)) return;
    if (next && !red_ok(fn, next_red, "next_red", next, next->rows, 1, next_op)) return;
    /* Fused where every row is unit stride and of one length; otherwise
     * the calls it stands for (the same results). */
    bool fused = a->cs == 1 && dst->cs == 1 && a->cols == dst->cols && (!next || (next->cs == 1 && next->cols == dst->cols));
    if (!fused) {
        rowbias_rows(dst, a, f, scale, bias);
        if (sum) reduce_rows_body(sum, dst, OC_TILE_SUM);
        if (next) reduce_rows_body(next_red, next, next_op);
        return;
    }
    int64_t nrows = next ? next->rows : 0, rows = dst->rows > nrows ? dst->rows : nrows, n = dst->cols;
    for (int64_t i = 0; i < rows; i++) {
        const float *nx = i < nrows ? CF32(next, i) : NULL;
        float *nr = nx ? F32(next_red, i) : NULL;
        if (i < dst->rows)
            act_row(F32(dst, i), CF32(a, a->rows == 1 ? 0 : i), f, scale, row_bias(bias, i), n,
                    sum ? F32(sum, i) : NULL, nx, next_op, nr);
        else
            *nr = reduce_run(nx, n, next_op, 0.0f);
    }
}

/* ---- softmax ---------------------------------------------------------------------- */

/* The softmax's bias for a row whose max is m: m * -1 + 0, as
 * oc_tile_unary(IDENTITY, -1, 0) gives it. */
static inline float neg_max(float m)
{
    return m * -1.0f + 0.0f;
}

/* 1 / a row's sum, as oc_tile_unary(RECIPROCAL, 1, 0) gives it. */
static inline float inv_sum(float s)
{
    return 1.0f / (s * 1.0f + 0.0f);
}

/* One row of the softmax: d = exp(x - m) with its sum and the next row's
 * max (act_row), then d *= 1 / sum. */
OC_TILE_INLINE float softmax_row(float *d, const float *x, int64_t n, float bias,
                                        const float *nx)
{
    float sum = 0.0f, nm = 0.0f;
    act_row(d, x, OC_TILE_EXP, 1.0f, bias, n, &sum, nx, OC_TILE_RMAX, &nm);
    float r = inv_sum(sum);
    bin_row(d, 1, d, 1, &r, 0, n, OC_TILE_MUL);
    return nm;
}

/* Up to this many elements a tile is small: x and dst stay in L1 (32 KiB). */
enum { SOFTMAX_SMALL_NUMEL = 4096 };
#ifdef OC_TILE_EXP_X86
static void softmax_passes(oc_tile *dst, const oc_tile *x, bool w16);
#endif

OC_TILE_FN void oc_tile_softmax(oc_tile *dst, const oc_tile *x)
{
    const char *fn = "oc_tile_softmax";
    if (!oc__tile_want_f32(dst, fn, "dst") || !oc__tile_want_f32(x, fn, "x") ||
        !oc__tile_apart(dst, x, true, fn, "x"))
        return;
    if (dst->rows != x->rows || dst->cols != x->cols) {
        oc__raise(OC_EINVAL, "%s: dst is %lld x %lld, x %lld x %lld (want the same shape)", fn,
                  (long long)dst->rows, (long long)dst->cols, (long long)x->rows,
                  (long long)x->cols);
        return;
    }
    int64_t n = x->cols, rows = x->rows;
    if (rows == 0 || n == 0) return;
    if (x->cs != 1 || dst->cs != 1) { /* strided rows: the composition, a row at a time */
        for (int64_t i = 0; i < rows; i++) {
            float *d = F32(dst, i), bias = neg_max(row_reduce(x, i, OC_TILE_RMAX, 0.0f));
            un_row(d, dst->cs, CF32(x, i), n == 1 ? 0 : x->cs, n, OC_TILE_EXP, 1.0f, bias);
            float r = inv_sum(row_reduce(dst, i, OC_TILE_SUM, 0.0f));
            bin_row(d, dst->cs, d, dst->cs, &r, 0, n, OC_TILE_MUL);
        }
        return;
    }
#ifdef OC_TILE_EXP_X86
    if (rows * n <= SOFTMAX_SMALL_NUMEL && exp_path() > 0) { /* a tiny input's share */
        softmax_passes(dst, x, exp_path() == 2);
        return;
    }
#endif
    float m = reduce_run(CF32(x, 0), n, OC_TILE_RMAX, 0.0f);
    /* One exp an element, its row scaled in place while still in L1 / L2 (a
     * row at a time, the next row's max riding along). Rows from memory ran
     * 1.12-1.20x faster this way than taking the exps again in a second pass
     * that writes each output once (softmax [4096, 8192], [1024, 8192],
     * [256, 65536], [16, 1048576] on 1 and 2 cores of a Sapphire Rapids KVM
     * guest; streaming stores on that second pass were slower still). */
    for (int64_t i = 0; i < rows; i++)
        m = softmax_row(F32(dst, i), CF32(x, i), n, neg_max(m),
                               i + 1 < rows ? CF32(x, i + 1) : NULL);
}

OC_TILE_FN void oc_tile_reduce_cols(oc_tile *dst, const oc_tile *a, oc_tile_redop op)
{
    if (!red_ok("oc_tile_reduce_cols", dst, "dst", a, 1, a->cols, op)) return;
    float *d = F32(dst, 0);
    int64_t n = a->cols, ds = dst->cs, as = a->cs;
    /* row by row into dst: one vector loop per row, rows in order */
    for (int64_t i = 0; i < a->rows; i++) {
        const float *x = CF32(a, i);
        if (i == 0) {
            for (int64_t j = 0; j < n; j++) d[j * ds] = op == OC_TILE_SUMSQ ? x[j * as] * x[j * as] : x[j * as];
            continue;
        }
        switch (op) {
        case OC_TILE_SUM:
        case OC_TILE_MEAN:
            if (ds == 1 && as == 1) for (int64_t j = 0; j < n; j++) d[j] += x[j];
            else for (int64_t j = 0; j < n; j++) d[j * ds] += x[j * as];
            break;
        case OC_TILE_SUMSQ:
            if (ds == 1 && as == 1) for (int64_t j = 0; j < n; j++) d[j] += x[j] * x[j];
            else for (int64_t j = 0; j < n; j++) d[j * ds] += x[j * as] * x[j * as];
            break;
        case OC_TILE_RMAX:
            for (int64_t j = 0; j < n; j++) d[j * ds] = oc__max1(d[j * ds], x[j * as]);
            break;
        case OC_TILE_RMIN:
            for (int64_t j = 0; j < n; j++) d[j * ds] = oc__min1(d[j * ds], x[j * as]);
            break;
        }
    }
    if (op == OC_TILE_MEAN)
        for (int64_t j = 0; j < n; j++) d[j * ds] /= (float)a->rows;
}

void oc_tile_argmax_rows(oc_tile *dst, const oc_tile *a)
{
    const char *fn = "oc_tile_argmax_rows";
    if (!oc__tile_want_f32(a, fn, "a")) return;
    if (dst->dtype != OC_INT32 || dst->rows != a->rows || dst->cols != 1) {
        oc__raise(OC_EINVAL, "%s: dst is a %lld x %lld %s tile, want %lld x 1 int32", fn, (long long)dst->rows,
                  (long long)dst->cols, oc_dtype_name(dst->dtype), (long long)a->rows);
        return;
    }
    for (int64_t i = 0; i < a->rows; i++) {
        const float *x = CF32(a, i);
        int32_t best = 0;
        float m = x[0];
        /* the row's max first (vectorised when contiguous), then its first index */
        float target = a->cs == 1 ? reduce_run(x, a->cols, OC_TILE_RMAX, 0.0f) : m;
        if (a->cs != 1)
            for (int64_t j = 1; j < a->cols; j++) target = oc__max1(target, x[j * a->cs]);
        for (int64_t j = 0; j < a->cols; j++) {
            float v = x[j * a->cs];
            if (v == target || (target != target && v != v)) {
                best = (int32_t)j;
                break;
            }
        }
        ((int32_t *)dst->data)[i * dst->rs] = best;
    }
}

/* ---- transpose, scan, select -------------------------------------------------- */

void oc_tile_transpose(oc_tile *dst, const oc_tile *a)
{
    if (dst->rows != a->cols || dst->cols != a->rows || dst->dtype != a->dtype) {
        oc__raise(OC_EINVAL, "oc_tile_transpose: dst is %lld x %lld %s, want %lld x %lld %s",
                  (long long)dst->rows, (long long)dst->cols, oc_dtype_name(dst->dtype), (long long)a->cols,
                  (long long)a->rows, oc_dtype_name(a->dtype));
        return;
    }
    if (!oc__tile_want_convertible(a, "oc_tile_transpose", "a") ||
        !oc__tile_apart(dst, a, a->rows * a->cols == 1, "oc_tile_transpose", "a"))
        return;
    size_t es = oc_dtype_size(a->dtype);
    enum { B = 16 }; /* 16 x 16 blocks: both sides stay in L1 */
    for (int64_t i0 = 0; i0 < a->rows; i0 += B)
        for (int64_t j0 = 0; j0 < a->cols; j0 += B) {
            int64_t ie = i0 + B < a->rows ? i0 + B : a->rows, je = j0 + B < a->cols ? j0 + B : a->cols;
            for (int64_t j = j0; j < je; j++)
                for (int64_t i = i0; i < ie; i++)
                    memcpy((char *)dst->data + (j * dst->rs + i * dst->cs) * (int64_t)es,
                           (const char *)a->data + (i * a->rs + j * a->cs) * (int64_t)es, es);
        }
}

OC_TILE_FN void oc_tile_scan_rows(oc_tile *dst, const oc_tile *a, const oc_tile *b, float init)
{
    const char *fn = "oc_tile_scan_rows";
    if (!check_shapes(fn, dst, a, b)) return;
    if (b->rows != dst->rows || b->cols != dst->cols) {
        oc__raise(OC_EINVAL, "%s: b is %lld x %lld, want dst's %lld x %lld", fn, (long long)b->rows,
                  (long long)b->cols, (long long)dst->rows, (long long)dst->cols);
        return;
    }
    /* column by column, all rows at once: the loop over rows vectorises */
    int64_t ars = a->rows == 1 ? 0 : a->rs, acs = a->cols == 1 ? 0 : a->cs;
    const float *pa = a->data, *pb = b->data;
    float *pd = dst->data;
    for (int64_t j = 0; j < dst->cols; j++)
        for (int64_t i = 0; i < dst->rows; i++) {
            float prev = j ? pd[i * dst->rs + (j - 1) * dst->cs] : init;
            pd[i * dst->rs + j * dst->cs] = pa[i * ars + j * acs] * prev + pb[i * b->rs + j * b->cs];
        }
}

OC_TILE_FN void oc_tile_affine_select(oc_tile *dst, const oc_tile *a, int64_t c0, int64_t ci, int64_t cj,
                                      float fill)
{
    if (!check_shapes("oc_tile_affine_select", dst, a, NULL)) return;
    int64_t as = a->cols == 1 ? 0 : a->cs;
    for (int64_t i = 0; i < dst->rows; i++) {
        const float *x = CF32(a, a->rows == 1 ? 0 : i);
        float *d = F32(dst, i);
        int64_t base = c0 + ci * i;
        for (int64_t j = 0; j < dst->cols; j++) d[j * dst->cs] = base + cj * j >= 0 ? x[j * as] : fill;
    }
}

/* ---- softmax of a small tile ----------------------------------------------------- */

#ifdef OC_TILE_EXP_X86
/* exp16's lanes of v = x + bias (src: x, the first left lanes in use), the
 * lanes for the scalar expf fixed in the vector by exp_fix. */
__attribute__((target("avx512f"), always_inline)) static inline __m512
exp16_fixed(__m512 v, const float *src, int64_t left, float bias)
{
    __m512 y;
    __mmask16 sp;
    EXP_LANES(_mm512, 512, v, y, sp, _mm512_cmpgt_epi32_mask);
    sp &= left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    if (__builtin_expect(sp != 0, 0)) {
        float t[16];
        _mm512_storeu_ps(t, y);
        exp_fix(t, src, left < 16 ? left : 16, 1.0f, bias);
        y = _mm512_loadu_ps(t);
    }
    return y;
}

/* The softmax's bias for row x (n floats): neg_max of its max, lanes_run's
 * bits. The max of a row without NaN is one value whatever the order, but
 * for the sign of a zero, which m * -1 + 0 drops: so vmaxps, and the exact
 * steps only for a row holding a NaN (whose payload they choose). */
__attribute__((target("avx512f"))) static float small_bias16(const float *x, int64_t n)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 m = ninf;
    __mmask16 nan = 0;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 v = _mm512_loadu_ps(x + j);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), m = _mm512_max_ps(v, m);
    }
    if (j < n) {
        __m512 v = _mm512_mask_loadu_ps(ninf, (__mmask16)((1u << (n - j)) - 1), x + j);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), m = _mm512_max_ps(v, m);
    }
    if (__builtin_expect(nan != 0, 0)) return neg_max(lanes_run(x, n, OC_TILE_RMAX, 0.0f));
    return neg_max(_mm512_reduce_max_ps(m));
}

/* A lanes state's a + b as 8 lanes, finished as lanes_finish sums them:
 * ((t0 + t4) + (t2 + t6)) + ((t1 + t5) + (t3 + t7)). */
__attribute__((target("avx2"), always_inline)) static inline float small_sum8(__m256 t)
{
    __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    __m128 w = _mm_add_ps(u, _mm_movehl_ps(u, u));
    return _mm_cvtss_f32(_mm_add_ss(w, _mm_movehdup_ps(w)));
}

/* exp(x + bias) of one row into d, 1 / its sum returned: exp16's lanes (the
 * scalar expf's fixed), summed in the lanes' order as act_row sums them (16
 * lanes a block, a + b, pairwise, then the tail in order). Each block is read
 * before it is written: d may be x. */
__attribute__((target("avx512f"))) static float small_exp16(float *d, const float *x, int64_t n,
                                                            float bias)
{
    const __m512 bi = _mm512_set1_ps(bias);
    const int64_t nb = n / 16, left = n - 16 * nb;
    __m512 s = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m512 v = _mm512_add_ps(_mm512_loadu_ps(x + 16 * i), bi);
        __m512 y = exp16_fixed(v, x + 16 * i, 16, bias);
        _mm512_storeu_ps(d + 16 * i, y);
        s = _mm512_add_ps(s, y);
    }
    float sum = small_sum8(_mm256_add_ps(_mm512_castps512_ps256(s), _mm256_castpd_ps(
                                             _mm512_extractf64x4_pd(_mm512_castps_pd(s), 1))));
    if (left) {
        const __mmask16 tm = (__mmask16)((1u << left) - 1);
        __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(tm, x + 16 * nb), bi);
        __m512 y = exp16_fixed(v, x + 16 * nb, left, bias);
        _mm512_mask_storeu_ps(d + 16 * nb, tm, y);
        float e[16];
        _mm512_storeu_ps(e, y);
        for (int64_t j = 0; j < left; j++) sum += e[j];
    }
    return inv_sum(sum);
}

/* d[0..n) *= r (bin_row MUL's bits: one product each). */
__attribute__((target("avx512f"))) static void small_mul16(float *d, int64_t n, float r)
{
    const __m512 rv = _mm512_set1_ps(r);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(d + j, _mm512_mul_ps(_mm512_loadu_ps(d + j), rv));
    if (j < n) {
        const __mmask16 tm = (__mmask16)((1u << (n - j)) - 1);
        _mm512_mask_storeu_ps(d + j, tm, _mm512_mul_ps(_mm512_maskz_loadu_ps(tm, d + j), rv));
    }
}

/* Rows of at most 16 floats on the AVX-512 path: each row one masked
 * vector, its steps (small_bias16's, small_exp16's, small_mul16's, with their
 * bits) in registers, in one loop whose rows' chains overlap. */
__attribute__((target("avx512f"))) static void softmax_tiny16(oc_tile *dst, const oc_tile *x)
{
    const int64_t n = x->cols;
    const __mmask16 tm = (__mmask16)((1u << n) - 1);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < x->rows; i++) {
        const float *xr = CF32(x, i);
        __m512 v = _mm512_mask_loadu_ps(ninf, tm, xr);
        float bias = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)
                         ? neg_max(lanes_run(xr, n, OC_TILE_RMAX, 0.0f))
                         : neg_max(_mm512_reduce_max_ps(v));
        v = _mm512_add_ps(_mm512_maskz_loadu_ps(tm, xr), _mm512_set1_ps(bias));
        __m512 y = exp16_fixed(v, xr, n, bias);
        float sum = 0.0f, e[16]; /* no whole block: the lanes' sum is +0 */
        if (n == 16) {
            sum = small_sum8(_mm256_add_ps(_mm512_castps512_ps256(y), _mm256_castpd_ps(
                                               _mm512_extractf64x4_pd(_mm512_castps_pd(y), 1))));
        } else {
            _mm512_storeu_ps(e, y);
            for (int64_t j = 0; j < n; j++) sum += e[j];
        }
        _mm512_mask_storeu_ps(F32(dst, i), tm, _mm512_mul_ps(y, _mm512_set1_ps(inv_sum(sum))));
    }
}

/* The AVX2 path's: 8 lanes a vector, a 16-element block's elements 0-7 and
 * 8-15 in two sums (a lanes state's a and b). */
__attribute__((target("avx2,fma"))) static float small_bias8(const float *x, int64_t n)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 m = ninf, nan = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j += 8) {
        __m256i tm = first8(n - j);
        __m256 v = _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + j, tm), _mm256_castsi256_ps(tm));
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q)), m = _mm256_max_ps(v, m);
    }
    if (__builtin_expect(!_mm256_testz_ps(nan, nan), 0))
        return neg_max(lanes_run(x, n, OC_TILE_RMAX, 0.0f));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return neg_max(_mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h))));
}

/* exp8's lanes of v = x + bias over the first lanes of tm (src: x), the
 * lanes for the scalar expf fixed in the vector by exp_fix. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256
exp8_fixed(__m256 v, const float *src, __m256i tm, float bias)
{
    __m256 y;
    __m256i sp;
    EXP_LANES(_mm256, 256, v, y, sp, _mm256_cmpgt_epi32);
    sp = _mm256_and_si256(sp, tm);
    if (__builtin_expect(!_mm256_testz_si256(sp, sp), 0)) {
        float t[8];
        _mm256_storeu_ps(t, y);
        exp_fix(t, src, __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(tm))),
                1.0f, bias);
        y = _mm256_loadu_ps(t);
    }
    return y;
}

/* small_exp16 on 8 lanes. */
__attribute__((target("avx2,fma"))) static float small_exp8(float *d, const float *x, int64_t n,
                                                            float bias)
{
    const __m256 bi = _mm256_set1_ps(bias);
    const __m256i all = _mm256_set1_epi32(-1);
    const int64_t nb = n / 16, left = n - 16 * nb;
    __m256 s[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < nb; i++)
        for (int h = 0; h < 2; h++) {
            const float *p = x + 16 * i + 8 * h;
            __m256 y = exp8_fixed(_mm256_add_ps(_mm256_loadu_ps(p), bi), p, all, bias);
            _mm256_storeu_ps(d + 16 * i + 8 * h, y);
            s[h] = _mm256_add_ps(s[h], y);
        }
    float sum = small_sum8(_mm256_add_ps(s[0], s[1])), e[16];
    for (int64_t h = 0; 8 * h < left; h++) {
        __m256i tm = first8(left - 8 * h);
        const float *p = x + 16 * nb + 8 * h;
        __m256 y = exp8_fixed(_mm256_add_ps(_mm256_maskload_ps(p, tm), bi), p, tm, bias);
        _mm256_maskstore_ps(d + 16 * nb + 8 * h, tm, y);
        _mm256_storeu_ps(e + 8 * h, y);
    }
    for (int64_t j = 0; j < left; j++) sum += e[j];
    return inv_sum(sum);
}

__attribute__((target("avx2"))) static void small_mul8(float *d, int64_t n, float r)
{
    const __m256 rv = _mm256_set1_ps(r);
    for (int64_t j = 0; j < n; j += 8) {
        __m256i tm = first8(n - j);
        _mm256_maskstore_ps(d + j, tm, _mm256_mul_ps(_mm256_maskload_ps(d + j, tm), rv));
    }
}

/* Unit-stride rows of oc_tile_softmax in L1, with its bits, in three passes
 * over up to 16 rows: each row's bias, each row's exps and 1 / sum, the
 * products. A row's steps are a chain of dependent latencies (the max, the
 * sum's tail, the division); in passes, the rows' chains overlap. */
static void softmax_passes(oc_tile *dst, const oc_tile *x, bool w16)
{
    const int64_t n = x->cols;
    if (w16 && n <= 16) {
        softmax_tiny16(dst, x);
        return;
    }
    for (int64_t i0 = 0; i0 < x->rows; i0 += 16) {
        int64_t k = x->rows - i0 < 16 ? x->rows - i0 : 16;
        float b[16], r[16];
        for (int64_t i = 0; i < k; i++)
            b[i] = (w16 ? small_bias16 : small_bias8)(CF32(x, i0 + i), n);
        for (int64_t i = 0; i < k; i++)
            r[i] = (w16 ? small_exp16 : small_exp8)(F32(dst, i0 + i), CF32(x, i0 + i), n, b[i]);
        for (int64_t i = 0; i < k; i++)
            (w16 ? small_mul16 : small_mul8)(F32(dst, i0 + i), n, r[i]);
    }
}
#endif
