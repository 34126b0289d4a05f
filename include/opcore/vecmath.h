/* opcore/vecmath.h — vector math for kernels, without -ffast-math
 * (included by kernel.h).
 *
 * Kernels build with -O3 -march=native -fno-math-errno -fno-trapping-math
 * (docs/build.md says why). Two things keep a plain loop from vectorising
 * there, and this header removes both without changing a result for NaN,
 * Inf or denormal inputs:
 *
 *   - Calls to expf, logf, tanhf... : glibc's vector math library (libmvec)
 *     has SIMD versions of them, but <math.h> declares them as such only
 *     under -ffast-math. Below, the same declarations are made for GCC on
 *     x86-64 glibc, so `y[i] = x[i] / (1.0f + expf(-x[i]))` becomes 8 or 16
 *     lanes per call. (libmvec is linked through -lm; its results are within
 *     4 ulp, NaN, Inf and denormals as the scalar functions.)
 *
 *   - Reductions: `s += x[i]` and `m = x[i] > m ? x[i] : m` stay one element
 *     at a time, because reordering a float sum changes its rounding and a
 *     vector max treats NaN differently. oc_sum_f32 / oc_max_f32 /
 *     oc_min_f32 are vectorised reductions with a fixed order (16 lanes,
 *     then pairwise), NaN propagating as in torch.sum / torch.max.
 */
#ifndef OPCORE_VECMATH_H
#define OPCORE_VECMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- glibc's vector math (libmvec) without -ffast-math --------------------- */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && \
    !defined(__FAST_MATH__) && !defined(OC_NO_VECMATH)
#define OC__SIMD __attribute__((__simd__("notinbranch")))
/* The double names are in parentheses so that <tgmath.h>, included before
 * this header, does not expand them as its type-generic macros. */
/* glibc 2.22 */
OC__SIMD float expf(float);
OC__SIMD float logf(float);
OC__SIMD float sinf(float);
OC__SIMD float cosf(float);
OC__SIMD float powf(float, float);
OC__SIMD double (exp)(double);
OC__SIMD double (log)(double);
OC__SIMD double (sin)(double);
OC__SIMD double (cos)(double);
OC__SIMD double (pow)(double, double);
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35)
/* glibc 2.35 */
OC__SIMD float tanhf(float);
OC__SIMD float expm1f(float);
OC__SIMD float log1pf(float);
OC__SIMD float exp2f(float);
OC__SIMD float log2f(float);
OC__SIMD float log10f(float);
OC__SIMD float erff(float);
OC__SIMD float tanf(float);
OC__SIMD float atanf(float);
OC__SIMD float sinhf(float);
OC__SIMD float coshf(float);
OC__SIMD float cbrtf(float);
OC__SIMD double (tanh)(double);
OC__SIMD double (expm1)(double);
OC__SIMD double (log1p)(double);
OC__SIMD double (exp2)(double);
OC__SIMD double (log2)(double);
OC__SIMD double (erf)(double);
#endif
#undef OC__SIMD
#endif

/* ---- reductions ---------------------------------------------------------------- */

/* Eight floats in a vector register (GCC/Clang vector extension; lowered
 * to what the target has). Only locals of these types, never arguments or
 * results: passing them by value would depend on the target's ABI. */
typedef float oc__vf8 __attribute__((vector_size(32), aligned(4)));
typedef int32_t oc__vi8 __attribute__((vector_size(32), aligned(4)));
/* Eight floats read from any float pointer: a plain vector load. Through
 * memcpy, GCC 12 tuned for Zen 3 (-march=native) copied the floats to the
 * stack in halves and read them back whole, a store-forwarding stall per
 * step (oc_max_f32 ran at a third of its speed in kernels). */
typedef float oc__vf8_from __attribute__((vector_size(32), aligned(4), may_alias));
#define OC__LOAD8(p) (*(const oc__vf8_from *)(const void *)(p))

/* b where the mask is set, else a */
#define OC__VSELECT(mask, b, a) ((oc__vf8)(((oc__vi8)(b) & (mask)) | ((oc__vi8)(a) & ~(mask))))

/* acc = the larger (or smaller, with `<`) of acc and the 8 floats at p, per
 * lane; a NaN, in either, stays. */
#define OC__VREDUCE_STEP(acc, p, cmp)                                                            \
    do {                                                                                        \
        oc__vf8 v_ = OC__LOAD8(p);                                                              \
        oc__vi8 take_ = (v_ cmp (acc)) | (v_ != v_);                                           \
        (acc) = OC__VSELECT(take_, v_, acc);                                                    \
    } while (0)

static inline float oc__max1(float a, float b) { return b > a || b != b ? b : a; }
static inline float oc__min1(float a, float b) { return b < a || b != b ? b : a; }

/* Sum of x[0..n): 16 lanes summed in order, then pairwise. The same
 * inputs always give the same result. */
static inline float oc_sum_f32(const float *x, int64_t n)
{
    oc__vf8 a = {0}, b = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a += OC__LOAD8(x + i);
        b += OC__LOAD8(x + i + 8);
    }
    a += b;
    float s = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
    for (; i < n; i++) s += x[i];
    return s;
}

/* Largest of x[0..n) (-INFINITY if n == 0); NaN if any is NaN, as
 * torch.max. */
static inline float oc_max_f32(const float *x, int64_t n)
{
    oc__vf8 a = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    oc__vf8 b = a;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        OC__VREDUCE_STEP(a, x + i, >);
        OC__VREDUCE_STEP(b, x + i + 8, >);
    }
    float m = b[0];
    for (int k = 0; k < 8; k++) m = oc__max1(oc__max1(m, a[k]), b[k]);
    for (; i < n; i++) m = oc__max1(m, x[i]);
    return m;
}

/* Smallest of x[0..n) (INFINITY if n == 0); NaN if any is NaN, as
 * torch.min. */
static inline float oc_min_f32(const float *x, int64_t n)
{
    oc__vf8 a = {INFINITY, INFINITY, INFINITY, INFINITY, INFINITY, INFINITY, INFINITY, INFINITY};
    oc__vf8 b = a;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        OC__VREDUCE_STEP(a, x + i, <);
        OC__VREDUCE_STEP(b, x + i + 8, <);
    }
    float m = b[0];
    for (int k = 0; k < 8; k++) m = oc__min1(oc__min1(m, a[k]), b[k]);
    for (; i < n; i++) m = oc__min1(m, x[i]);
    return m;
}

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_VECMATH_H */
