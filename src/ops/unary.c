/* src/ops/unary.c — element-wise ops of one tensor (abs ... pow_scalar).
 *
 * Each op is an expression per dtype family; the kernels, dispatch tables
 * and the public pair oc_<op> / oc_<op>_out are generated from it.
 * <tgmath.h> makes sin(x) sinf for float compute and sin for double.
 */
#include <tgmath.h>

#include "ops/ops_internal.h"

/* the public pair for an op taking no scalar parameters; `why` says why
 * complex is refused (NULL: no reason beyond the list of dtypes) */
#define OC__NO_ORDER "complex numbers have no order"
#define OC__UNARY_API(name, ...) OC__UNARY_API_WHY(name, NULL, __VA_ARGS__)
#define OC__UNARY_API_WHY(name, why, ...)                                                 \
    static const oc__ew_op oc__op_##name = {"oc_" #name, 1, NULL, {__VA_ARGS__}, why};    \
    oc_tensor *oc_##name(const oc_tensor *a)                                          \
    {                                                                                 \
        return oc__ew_apply(&oc__op_##name, false, NULL, a, NULL, 0, 0);              \
    }                                                                                 \
    oc_tensor *oc_##name##_out(oc_tensor *out, const oc_tensor *a)                    \
    {                                                                                 \
        return oc__ew_apply(&oc__op_##name, true, out, a, NULL, 0, 0);                \
    }

/* abs: -0.0 -> 0.0 for floats; integers wrap (abs(INT_MIN) == INT_MIN).
 * |z| of a complex is real, a dtype change these same-dtype ops do not
 * make: a kernel computes it with cabs. */
OC_FLOAT_TYPES(OC__UNARY_K, abs, fabs(x))
OC_SINT_TYPES(OC__UNARY_K, abs, x < 0 ? (ct)(-(wt)x) : x)
OC_UINT_TYPES(OC__UNARY_K, abs, x)
OC__UNARY_API_WHY(abs, "|z| is real, not complex: compute it with cabsf/cabs in a kernel",
                  OC__T(OC_FLOAT_TYPES, abs) OC__T(OC_SINT_TYPES, abs) OC__T(OC_UINT_TYPES, abs))

OC_FLOAT_TYPES(OC__UNARY_K, neg, -x)
OC_INT_TYPES(OC__UNARY_K, neg, -(wt)x)
OC_COMPLEX_TYPES(OC__UNARY_K, neg, -x)
OC__UNARY_API(neg, OC__T(OC_FLOAT_TYPES, neg) OC__T(OC_INT_TYPES, neg) OC__T(OC_COMPLEX_TYPES, neg))

/* ceil/floor are the identity on integers and bool, as in PyTorch */
OC_INT_TYPES(OC__UNARY_K, ident, x)
OC_BOOL_TYPES(OC__UNARY_K, ident, x)
#define OC__ROUNDING(f)                                                                  \
    OC_FLOAT_TYPES(OC__UNARY_K, f, f(x))                                                 \
    OC__UNARY_API_WHY(f, OC__NO_ORDER, OC__T(OC_FLOAT_TYPES, f) OC__T(OC_INT_TYPES, ident) \
                                           OC__T(OC_BOOL_TYPES, ident))
OC__ROUNDING(ceil)
OC__ROUNDING(floor)

/* transcendental: floating dtypes, and complex where C99 has the function
 * (csin ... cexp; there is no clog2 or clog10) */
#define OC__FLOAT_FN(f) \
    OC_FLOAT_TYPES(OC__UNARY_K, f, f(x)) OC__UNARY_API(f, OC__T(OC_FLOAT_TYPES, f))
#define OC__FLOAT_COMPLEX_FN(f)                                              \
    OC_FLOAT_TYPES(OC__UNARY_K, f, f(x)) OC_COMPLEX_TYPES(OC__UNARY_K, f, f(x)) \
    OC__UNARY_API(f, OC__T(OC_FLOAT_TYPES, f) OC__T(OC_COMPLEX_TYPES, f))
OC__FLOAT_COMPLEX_FN(sin)
OC__FLOAT_COMPLEX_FN(cos)
OC__FLOAT_COMPLEX_FN(tan)
OC__FLOAT_COMPLEX_FN(log)
OC__FLOAT_FN(log2)
OC__FLOAT_FN(log10)
OC__FLOAT_COMPLEX_FN(exp)

/* bitwise_not: ~x on integers, logical not on bool */
OC_INT_TYPES(OC__UNARY_K, bitwise_not, ~x)
OC_BOOL_TYPES(OC__UNARY_K, bitwise_not, !x)
OC__UNARY_API(bitwise_not, OC__T(OC_INT_TYPES, bitwise_not) OC__T(OC_BOOL_TYPES, bitwise_not))

/* ---- ops with scalar parameters (p0, p1) -------------------------------- */

/* min(max(x, lo), hi); bounds are converted to the dtype first (integers:
 * truncated and saturated, so +-INFINITY leaves a side open). A NaN x
 * stays NaN. */
#define OC__CLAMP_EXPR (x < p0 ? p0 : x) > p1 ? p1 : (x < p0 ? p0 : x)
OC_ARITH_TYPES(OC__UNARY_K, clamp, OC__CLAMP_EXPR)
static const oc__ew_op oc__op_clamp = {"oc_clamp", 1, NULL, {OC__T(OC_ARITH_TYPES, clamp)},
                                       OC__NO_ORDER};

oc_tensor *oc_clamp(const oc_tensor *a, double lo, double hi)
{
    return oc__ew_apply(&oc__op_clamp, false, NULL, a, NULL, lo, hi);
}

oc_tensor *oc_clamp_out(oc_tensor *out, const oc_tensor *a, double lo, double hi)
{
    return oc__ew_apply(&oc__op_clamp, true, out, a, NULL, lo, hi);
}

OC_FLOAT_TYPES(OC__UNARY_K, pow_scalar, pow(x, p0))
OC_COMPLEX_TYPES(OC__UNARY_K, pow_scalar, pow(x, p0))
static const oc__ew_op oc__op_pow_scalar = {
    "oc_pow_scalar", 1, NULL, {OC__T(OC_FLOAT_TYPES, pow_scalar) OC__T(OC_COMPLEX_TYPES, pow_scalar)}};

oc_tensor *oc_pow_scalar(const oc_tensor *a, double exponent)
{
    return oc__ew_apply(&oc__op_pow_scalar, false, NULL, a, NULL, exponent, 0);
}

oc_tensor *oc_pow_scalar_out(oc_tensor *out, const oc_tensor *a, double exponent)
{
    return oc__ew_apply(&oc__op_pow_scalar, true, out, a, NULL, exponent, 0);
}
