/* opcore/dtype.h — element types.
 *
 * The twelve dtypes a tensor may hold. float16 and bfloat16 are stored as
 * uint16_t bit patterns (oc_half, oc_bfloat16); convert with the helpers
 * below, which round to nearest even like PyTorch.
 *
 * complex64 and complex128 are C99's `float _Complex` and `double _Complex`
 * (oc_complex64, oc_complex128; `float complex` once <complex.h> is
 * included). C11 6.2.5p13 lays a complex out as an array of two reals,
 * [re, im], which is exactly how NumPy, PyTorch, DLPack and XLA store
 * theirs: a kernel reads the framework's memory with no conversion, and
 * <complex.h>'s arithmetic, cabsf, conjf... work on it directly.
 */
#ifndef OPCORE_DTYPE_H
#define OPCORE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every dtype, once; the enum below, oc_dtype_name/size/is_floating and
 * the framework mappings (DLPack, XLA, torch) are generated from it:
 *
 *     XX(NAME, "name", code, bytes, kind, xla, dlpack)
 *
 *   NAME      the constant is OC_<NAME>
 *   "name"    as PyTorch, NumPy and JAX spell it (oc_dtype_name)
 *   code      its oc_dtype value (part of the ABI: never renumber)
 *   bytes     the element size (oc_dtype_size); DLPack's bits: 8 * bytes
 *   kind      0 integral (and bool), 1 floating (oc_dtype_is_floating),
 *             2 complex (oc_dtype_is_complex)
 *   xla       XLA's element type, XLA_FFI_DataType_<xla>
 *   dlpack    DLPack's type code, kDL<dlpack>
 */
#define OC_DTYPE_MAP(XX)                              \
    XX(FLOAT32, "float32", 0, 4, 1, F32, Float)       \
    XX(FLOAT64, "float64", 1, 8, 1, F64, Float)       \
    XX(FLOAT16, "float16", 2, 2, 1, F16, Float)       \
    XX(BFLOAT16, "bfloat16", 3, 2, 1, BF16, Bfloat)   \
    XX(INT8, "int8", 4, 1, 0, S8, Int)                \
    XX(INT16, "int16", 5, 2, 0, S16, Int)             \
    XX(INT32, "int32", 6, 4, 0, S32, Int)             \
    XX(INT64, "int64", 7, 8, 0, S64, Int)             \
    XX(UINT8, "uint8", 8, 1, 0, U8, UInt)             \
    XX(BOOL, "bool", 9, 1, 0, PRED, Bool)             \
    XX(COMPLEX64, "complex64", 10, 8, 2, C64, Complex) \
    XX(COMPLEX128, "complex128", 11, 16, 2, C128, Complex)

#define OC_DTYPE_ENUM_(NAME, name, code, ...) OC_##NAME = code,
#define OC_DTYPE_COUNT_(...) +1
typedef enum oc_dtype {
    OC_DTYPE_MAP(OC_DTYPE_ENUM_)
    OC_NUM_DTYPES = 0 OC_DTYPE_MAP(OC_DTYPE_COUNT_) /* 12 */
} oc_dtype;
#undef OC_DTYPE_ENUM_
#undef OC_DTYPE_COUNT_

typedef uint16_t oc_half;     /* IEEE 754 binary16 bit pattern */
typedef uint16_t oc_bfloat16; /* bfloat16 bit pattern (top half of a float) */
#ifndef __cplusplus
typedef float _Complex oc_complex64;   /* [re, im] as two floats */
typedef double _Complex oc_complex128; /* [re, im] as two doubles */
#endif

/* Bytes per element; 0 for an invalid dtype. */
OC_API size_t oc_dtype_size(oc_dtype dtype);

/* Short name, as PyTorch spells it: "float32", "bfloat16", "bool"... */
OC_API const char *oc_dtype_name(oc_dtype dtype);

/* Parse a name produced by oc_dtype_name (also "float", "half", "int",
 * "long", "double"); returns false if unknown. */
OC_API bool oc_dtype_from_name(const char *name, oc_dtype *out);

/* True for float32/64, float16 and bfloat16. */
OC_API bool oc_dtype_is_floating(oc_dtype dtype);

/* True for int8/16/32/64, uint8 and bool. */
OC_API bool oc_dtype_is_integral(oc_dtype dtype);

/* True for complex64 and complex128 (neither floating nor integral, as in
 * PyTorch's is_floating_point / is_complex). */
OC_API bool oc_dtype_is_complex(oc_dtype dtype);

/* True if `dtype` is one of the twelve above. */
OC_API bool oc_dtype_is_valid(oc_dtype dtype);

/* float <-> half / bfloat16 conversions (round to nearest even). */
static inline float oc_bf16_to_f32(oc_bfloat16 h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline oc_bfloat16 oc_f32_to_bf16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) /* NaN stays a quiet NaN */
        return (oc_bfloat16)((bits >> 16) | 0x40u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (oc_bfloat16)(bits >> 16);
}

static inline float oc_half_to_f32(oc_half h)
{
    _Float16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v;
}

static inline oc_half oc_f32_to_half(float f)
{
    _Float16 v = (_Float16)f;
    oc_half h;
    memcpy(&h, &v, sizeof h);
    return h;
}

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_DTYPE_H */
