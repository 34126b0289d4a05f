/* src/ops/ops_internal.h — shared machinery of the in-kernel tensor library.
 *
 * Every dtype is described once, in the X-macro lists below; kernels are
 * generated from them so each op is written once per dtype *family*
 * (floating, signed, unsigned, bool, complex) rather than once per dtype.
 *
 * Work is split into rows: the iterator (iterate.c) coalesces the operands'
 * dims and calls a row function once per innermost run, so the per-element
 * loops are plain typed C loops the compiler can vectorise; there is no
 * function pointer per element.
 */
#ifndef OPCORE_OPS_INTERNAL_H
#define OPCORE_OPS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"
#include "opcore/tensor.h"
#include "opcore/tensor_ops.h"

/* ---- dtypes as X-macros --------------------------------------------------
 * X(dtype, sfx, S, C, W, LD, ST, FROMD, ...extra)
 *   S      storage type of one element
 *   C      compute type (float for the 16-bit floats, as PyTorch's opmath)
 *   W      wrap-around type for + - * and negation: unsigned for integers
 *          so overflow wraps like PyTorch instead of being undefined
 *   LD(s)  storage -> compute       ST(c)  compute -> storage
 *   FROMD(d)  double -> compute, saturating and NaN-safe for integers      */

#define OC__ID(v) (v)
#define OC__BOOL_NORM(v) ((uint8_t)((v) != 0))
#define OC__D2F(v) ((float)(v))
#define OC__D2D(v) ((double)(v))
#define OC__D2I8(v) ((int8_t)oc__d2i64((v), INT8_MIN, INT8_MAX))
#define OC__D2I16(v) ((int16_t)oc__d2i64((v), INT16_MIN, INT16_MAX))
#define OC__D2I32(v) ((int32_t)oc__d2i64((v), INT32_MIN, INT32_MAX))
#define OC__D2I64(v) (oc__d2i64((v), INT64_MIN, INT64_MAX))
#define OC__D2U8(v) ((uint8_t)oc__d2i64((v), 0, UINT8_MAX))
#define OC__D2B(v) OC__BOOL_NORM(v) /* NaN is true, as in C and PyTorch */
#define OC__D2C64(v) ((oc_complex64)(v)) /* also complex -> complex, imaginary part kept */
#define OC__D2C128(v) ((oc_complex128)(v))

#define OC_FLOAT_TYPES(X, ...)                                                        \
    X(OC_FLOAT32, f32, float, float, float, OC__ID, OC__ID, OC__D2F, __VA_ARGS__)        \
    X(OC_FLOAT64, f64, double, double, double, OC__ID, OC__ID, OC__D2D, __VA_ARGS__)     \
    X(OC_FLOAT16, f16, uint16_t, float, float, oc_half_to_f32, oc_f32_to_half, OC__D2F,  \
      __VA_ARGS__)                                                                       \
    X(OC_BFLOAT16, bf16, uint16_t, float, float, oc_bf16_to_f32, oc_f32_to_bf16, OC__D2F, \
      __VA_ARGS__)

#define OC_SINT_TYPES(X, ...)                                                         \
    X(OC_INT8, i8, int8_t, int8_t, uint32_t, OC__ID, OC__ID, OC__D2I8, __VA_ARGS__)      \
    X(OC_INT16, i16, int16_t, int16_t, uint32_t, OC__ID, OC__ID, OC__D2I16, __VA_ARGS__) \
    X(OC_INT32, i32, int32_t, int32_t, uint32_t, OC__ID, OC__ID, OC__D2I32, __VA_ARGS__) \
    X(OC_INT64, i64, int64_t, int64_t, uint64_t, OC__ID, OC__ID, OC__D2I64, __VA_ARGS__)

#define OC_UINT_TYPES(X, ...) \
    X(OC_UINT8, u8, uint8_t, uint8_t, uint32_t, OC__ID, OC__ID, OC__D2U8, __VA_ARGS__)

/* bool is stored as a byte; loads and stores normalise to 0/1 so that
 * add/mul/and/or on it are the logical ops. */
#define OC_BOOL_TYPES(X, ...)                                                       \
    X(OC_BOOL, b8, uint8_t, uint8_t, uint32_t, OC__BOOL_NORM, OC__BOOL_NORM, OC__D2B, \
      __VA_ARGS__)

/* complex is C99's _Complex ([re, im], opcore/dtype.h); it computes in its
 * own type, and <tgmath.h> picks csin, cpow... for it. A FROMD of a
 * complex value keeps the imaginary part; a real type's FROMD (a cast or a
 * double parameter) takes the real part, as C converts complex to real. */
#define OC_COMPLEX_TYPES(X, ...)                                                        \
    X(OC_COMPLEX64, c64, oc_complex64, oc_complex64, oc_complex64, OC__ID, OC__ID,         \
      OC__D2C64, __VA_ARGS__)                                                           \
    X(OC_COMPLEX128, c128, oc_complex128, oc_complex128, oc_complex128, OC__ID, OC__ID,    \
      OC__D2C128, __VA_ARGS__)

#define OC_INT_TYPES(X, ...) OC_SINT_TYPES(X, __VA_ARGS__) OC_UINT_TYPES(X, __VA_ARGS__)
#define OC_ARITH_TYPES(X, ...) OC_FLOAT_TYPES(X, __VA_ARGS__) OC_INT_TYPES(X, __VA_ARGS__)
#define OC_REAL_TYPES(X, ...)                                         \
    OC_FLOAT_TYPES(X, __VA_ARGS__) OC_INT_TYPES(X, __VA_ARGS__) \
    OC_BOOL_TYPES(X, __VA_ARGS__)
#define OC_ALL_TYPES(X, ...) OC_REAL_TYPES(X, __VA_ARGS__) OC_COMPLEX_TYPES(X, __VA_ARGS__)

/* double -> integer: truncate toward zero, saturate, NaN -> 0 (a plain C
 * cast is undefined out of range). */
static inline int64_t oc__d2i64(double v, int64_t lo, int64_t hi)
{
    if (v != v)
        return 0;
    if (v <= (double)lo)
        return lo;
    if (v >= (double)hi) /* (double)INT64_MAX rounds up to 2^63: still safe */
        return hi;
    return (int64_t)v;
}

/* The contiguous loops are in-place safe (out may *be* an input) but must
 * not overlap partially; telling the compiler so lets -O2 vectorise them
 * without runtime alias checks. */
#if defined(__clang__)
#define OC__IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define OC__IVDEP _Pragma("GCC ivdep")
#else
#define OC__IVDEP
#endif

/* ---- rows ---------------------------------------------------------------- */

/* Scalar parameters of an op (alpha, clamp bounds, exponent...). */
typedef struct oc__params {
    double p0, p1;
    void *ctx; /* op-specific extra state */
} oc__params;

/* Process n elements; p[k] points at operand k's first element and s[k] is
 * its step in elements. Operand 0 is the output. */
typedef void (*oc__row_fn)(int64_t n, char *const *p, const int64_t *s, const oc__params *prm);

/* Call fn for every innermost run of the nt same-shaped tensors ts, after
 * dropping size-1 dims and merging dims that are contiguous in all of
 * them (a fully contiguous set becomes a single row). */
void oc__foreach_row(int nt, const oc_tensor *const *ts, oc__row_fn fn, const oc__params *prm);

/* Kernel-generation helpers: the same loop with unit steps (vectorisable)
 * and with arbitrary steps. The body (variadic: it may hold commas) uses
 * i0 (out index) and i1, i2 (input indices). The unit-step loop runs in
 * fixed blocks of OC__BLOCK: GCC's -O2 cost model only vectorises loops
 * whose trip count is a known multiple of the vector width. */
#define OC__BLOCK 16
#define OC__ROW_LOOP(n, s, ...)                                         \
    do {                                                                \
        if ((s)[0] == 1 && (s)[1] == 1 && (s)[2] == 1) {                \
            int64_t b_i = 0;                                            \
            for (; b_i + OC__BLOCK <= (n); b_i += OC__BLOCK) {          \
                OC__IVDEP for (int j_ = 0; j_ < OC__BLOCK; j_++)        \
                {                                                       \
                    const int64_t i0 = b_i + j_, i1 = i0, i2 = i0;      \
                    (void)i2;                                           \
                    __VA_ARGS__;                                        \
                }                                                       \
            }                                                           \
            for (; b_i < (n); b_i++) {                                  \
                const int64_t i0 = b_i, i1 = i0, i2 = i0;               \
                (void)i2;                                               \
                __VA_ARGS__;                                            \
            }                                                           \
        } else {                                                        \
            for (int64_t i_ = 0; i_ < (n); i_++) {                      \
                const int64_t i0 = i_ * (s)[0], i1 = i_ * (s)[1],       \
                              i2 = i_ * (s)[2];                         \
                (void)i2;                                               \
                __VA_ARGS__;                                            \
            }                                                           \
        }                                                               \
    } while (0)

/* An element-wise row kernel oc__k_<name>_<sfx> for one dtype, from an
 * expression over x (operand a), y (operand b, binary only) and the
 * parameters p0, p1, all of compute type `ct`; `wt` is the wrap type.
 * Used as an X-macro: OC_FLOAT_TYPES(OC__UNARY_K, sin, sin(x)). */
#define OC__EW_KERNEL(ARITY, dt, sfx, S, C, W, LD, ST, FROMD, name, ...)               \
    static void oc__k_##name##_##sfx(int64_t n, char *const *p, const int64_t *s,       \
                                     const oc__params *prm)                             \
    {                                                                                   \
        typedef C ct;                                                                   \
        typedef W wt;                                                                   \
        S *o_ = (S *)p[0];                                                              \
        const S *a_ = (const S *)p[1], *b_ = (const S *)p[2];                           \
        const ct p0 = FROMD(prm->p0), p1 = FROMD(prm->p1);                              \
        (void)sizeof(wt), (void)b_, (void)p0, (void)p1;                                 \
        OC__ROW_LOOP(n, s, const ct x = LD(a_[i1]); OC__LOAD_Y##ARITY(LD)               \
                     o_[i0] = ST((ct)(__VA_ARGS__)));                                   \
    }
#define OC__LOAD_Y1(LD)
#define OC__LOAD_Y2(LD) const ct y = LD(b_[i2]);
#define OC__UNARY_K(...) OC__EW_KERNEL(1, __VA_ARGS__)
#define OC__BINARY_K(...) OC__EW_KERNEL(2, __VA_ARGS__)

/* ---- element-wise ops ---------------------------------------------------- */

typedef struct oc__ew_op {
    const char *name;  /* "oc_add"; "_out" is appended for out variants */
    int arity;         /* 1 or 2 tensor inputs */
    const char *int_p0; /* if set, p0 must be integral for integer dtypes
                          (PyTorch's rule for alpha); names it */
    oc__row_fn tbl[OC_NUM_DTYPES]; /* kernel per dtype; NULL: unsupported */
    const char *no_complex; /* why complex is refused, added to the message */
} oc__ew_op;

/* Check operands (NULL, dtype support, same dtype/shape, out writable,
 * data present), allocate the result unless `is_out`, and run the kernel
 * (skipped inside a shape function). Returns the result or NULL after
 * oc__raise. */
oc_tensor *oc__ew_apply(const oc__ew_op *op, bool is_out, oc_tensor *out, const oc_tensor *a,
                        const oc_tensor *b, double p0, double p1);

/* Table entries for generated kernels: OC__T(OC_FLOAT_TYPES, add) gives
 * [OC_FLOAT32] = oc__k_add_f32, [OC_FLOAT64] = ... */
#define OC__TBL_ENTRY(dt, sfx, S, C, W, LD, ST, FROMD, name) [dt] = oc__k_##name##_##sfx,
#define OC__T(FAMILY, name) FAMILY(OC__TBL_ENTRY, name)

/* "oc_add: argument 'out'" style prefix into buf. */
const char *oc__argname(char *buf, size_t len, const char *fn, bool is_out, const char *arg);

/* Raise unless t is non-NULL (and, if `writable`, not read-only).
 * Returns false after raising. */
bool oc__check_tensor_arg(const oc_tensor *t, const char *fn, bool is_out, const char *arg,
                          bool writable);

/* Element value as double (a complex one's real part) / store a double
 * (a complex one gets imaginary part 0), for any dtype (slow path;
 * convert.c). */
double oc__load_as_double(const void *p, oc_dtype dtype);
void oc__store_from_double(void *p, oc_dtype dtype, double v);

/* Iterate the flattened elements of `t` in row-major order: calls
 * fn(ptr, index, ctx) for each element pointer (iterate.c). */
typedef void (*oc__elem_fn)(void *p, int64_t i, void *ctx);
void oc__for_each(const oc_tensor *t, oc__elem_fn fn, void *ctx);

/* Write `value` converted to `dtype` into every element of t. */
void oc__fill_raw(oc_tensor *t, double value);

#endif /* OPCORE_OPS_INTERNAL_H */
