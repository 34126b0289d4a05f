/* opcore/vec.h — converting runs of bfloat16 / float16 to and from float32,
 * written so the compiler vectorises them.
 *
 * The single-value conversions are in dtype.h (oc_bf16_to_f32, ...). These
 * run forms are static inline so they compile inside your kernel with its
 * flags (-O3 -march=native): bfloat16 becomes shifts and a rounding add on
 * whole vectors, float16 uses the CPU's conversion instructions where it has
 * them (F16C, AVX-512 FP16). Results are bit-identical to the single-value
 * forms: round to nearest even, NaN stays NaN, like PyTorch.
 *
 * A typical mixed-precision kernel converts a block into float32 TCM
 * buffers, computes there in float32, and converts back:
 *
 *     oc_bf16_to_f32_n(xf, (const oc_bfloat16 *)it.ptr[1], n);
 *     for (int64_t i = 0; i < n; i++) yf[i] = alpha * xf[i] + yf[i];
 *     oc_f32_to_bf16_n((oc_bfloat16 *)it.ptr[0], yf, n);
 *
 * `dst` and `src` must not overlap. `opcore build --vec-report` shows
 * whether your own loops were vectorised, and why not.
 */
#ifndef OPCORE_VEC_H
#define OPCORE_VEC_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* bfloat16 -> float32: the bits become the float's top half (exact). The
 * single-value form is plain integer work, which vectorises as it is. */
static inline void oc_bf16_to_f32_n(float *__restrict dst, const oc_bfloat16 *__restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = oc_bf16_to_f32(src[i]);
}

/* float32 -> bfloat16, round to nearest even; NaN stays a quiet NaN. */
static inline void oc_f32_to_bf16_n(oc_bfloat16 *__restrict dst, const float *__restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = oc_f32_to_bf16(src[i]);
}

/* Bit casts the vectoriser sees through. */
static inline float oc__u32_as_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t oc__f32_as_u32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* float16 -> float32 (exact; a signalling NaN comes back quiet, as from the
 * CPU's own conversion). Integer and float arithmetic with selects, no
 * branches: compilers do not vectorise _Float16 conversions themselves. */
static inline void oc_half_to_f32_n(float *__restrict dst, const oc_half *__restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t h = src[i];
        uint32_t em = (h & 0x7fffu) << 13; /* exponent and mantissa, float-aligned */
        uint32_t e = em & (0x7c00u << 13);
        uint32_t normal = em + ((127u - 15u) << 23);
        uint32_t special = (normal + ((128u - 16u) << 23)) | (em > (0x7c00u << 13) ? 0x400000u : 0u);
        /* subnormal or zero: let the FPU normalise (magic = 2^-14) */
        uint32_t sub = oc__f32_as_u32(oc__u32_as_f32(normal + (1u << 23)) - oc__u32_as_f32(113u << 23));
        uint32_t bits = e == (0x7c00u << 13) ? special : e == 0 ? sub : normal;
        dst[i] = oc__u32_as_f32(bits | (h & 0x8000u) << 16);
    }
}

/* float32 -> float16, round to nearest even; overflow gives infinity, NaN
 * stays a quiet NaN (the same bits as the CPU's conversion). */
static inline void oc_f32_to_half_n(oc_half *__restrict dst, const float *__restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t f = oc__f32_as_u32(src[i]);
        uint32_t sign = (f >> 16) & 0x8000u;
        f &= 0x7fffffffu;
        /* NaN: quiet, payload's top bits; too large: infinity */
        uint32_t big = f > 0x7f800000u ? 0x7e00u | ((f >> 13) & 0x3ffu) : 0x7c00u;
        /* subnormal result: the FPU rounds when adding 0.5 (magic) */
        const uint32_t magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
        uint32_t sub = oc__f32_as_u32(oc__u32_as_f32(f) + oc__u32_as_f32(magic)) - magic;
        /* normal: rebias, round to nearest even by hand */
        uint32_t norm = (f + ((15u - 127u) << 23) + 0xfffu + ((f >> 13) & 1u)) >> 13;
        uint32_t o = f >= ((127u + 16u) << 23) ? big : f < (113u << 23) ? sub : norm;
        dst[i] = (oc_half)(o | sign);
    }
}

/* Any floating dtype (float32, float64, float16, bfloat16) -> float32 run;
 * false (nothing written) for another dtype. One switch per run, then a
 * vectorised loop: the way to write one kernel for every float dtype. */
static inline bool oc_load_f32_n(float *__restrict dst, const void *__restrict src, oc_dtype dtype,
                                 int64_t n)
{
    switch (dtype) {
    case OC_FLOAT32: memcpy(dst, src, (size_t)n * sizeof *dst); return true;
    case OC_FLOAT64: {
        const double *s = (const double *)src;
        for (int64_t i = 0; i < n; i++) dst[i] = (float)s[i];
        return true;
    }
    case OC_FLOAT16: oc_half_to_f32_n(dst, (const oc_half *)src, n); return true;
    case OC_BFLOAT16: oc_bf16_to_f32_n(dst, (const oc_bfloat16 *)src, n); return true;
    default: return false;
    }
}

/* float32 run -> any floating dtype; false (nothing written) for another. */
static inline bool oc_store_f32_n(void *__restrict dst, oc_dtype dtype, const float *__restrict src,
                                  int64_t n)
{
    switch (dtype) {
    case OC_FLOAT32: memcpy(dst, src, (size_t)n * sizeof *src); return true;
    case OC_FLOAT64: {
        double *d = (double *)dst;
        for (int64_t i = 0; i < n; i++) d[i] = src[i];
        return true;
    }
    case OC_FLOAT16: oc_f32_to_half_n((oc_half *)dst, src, n); return true;
    case OC_BFLOAT16: oc_f32_to_bf16_n((oc_bfloat16 *)dst, src, n); return true;
    default: return false;
    }
}

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_VEC_H */
