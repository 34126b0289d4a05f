/* src/ops/binary.c — element-wise ops of two same-shape, same-dtype tensors.
 *
 * Integer arithmetic runs in the unsigned wrap type `wt` so overflow wraps
 * (as in PyTorch) instead of being undefined behaviour. On bool, loads and
 * stores normalise to 0/1, which makes add a logical or and mul a logical
 * and, as in PyTorch.
 */
#include <tgmath.h>

#include "ops/ops_internal.h"

#define OC__BINARY_API(name, ...)                                                      \
    static const oc__ew_op oc__op_##name = {"oc_" #name, 2, NULL, {__VA_ARGS__}};       \
    oc_tensor *oc_##name(const oc_tensor *a, const oc_tensor *b)                        \
    {                                                                                   \
        return oc__ew_apply(&oc__op_##name, false, NULL, a, b, 0, 0);                   \
    }                                                                                   \
    oc_tensor *oc_##name##_out(oc_tensor *out, const oc_tensor *a, const oc_tensor *b)  \
    {                                                                                   \
        return oc__ew_apply(&oc__op_##name, true, out, a, b, 0, 0);                     \
    }

/* a + alpha * b / a - alpha * b; alpha (p0) must be integral for integers */
#define OC__ALPHA_API(name, ...)                                                       \
    static const oc__ew_op oc__op_##name = {"oc_" #name, 2, "alpha", {__VA_ARGS__}};    \
    oc_tensor *oc_##name(const oc_tensor *a, const oc_tensor *b, double alpha)          \
    {                                                                                   \
        return oc__ew_apply(&oc__op_##name, false, NULL, a, b, alpha, 0);               \
    }                                                                                   \
    oc_tensor *oc_##name##_out(oc_tensor *out, const oc_tensor *a, const oc_tensor *b,  \
                               double alpha)                                            \
    {                                                                                   \
        return oc__ew_apply(&oc__op_##name, true, out, a, b, alpha, 0);                 \
    }

OC_ALL_TYPES(OC__BINARY_K, add, (wt)x + (wt)p0 * (wt)y)
OC__ALPHA_API(add, OC__T(OC_ALL_TYPES, add))

/* no bool: PyTorch refuses subtraction of bool tensors */
OC_ARITH_TYPES(OC__BINARY_K, sub, (wt)x - (wt)p0 * (wt)y)
OC_COMPLEX_TYPES(OC__BINARY_K, sub, x - p0 * y)
OC__ALPHA_API(sub, OC__T(OC_ARITH_TYPES, sub) OC__T(OC_COMPLEX_TYPES, sub))

OC_ALL_TYPES(OC__BINARY_K, mul, (wt)x * (wt)y)
OC__BINARY_API(mul, OC__T(OC_ALL_TYPES, mul))

/* true division and pow: floating and complex only (no promotion of
 * integer inputs) */
OC_FLOAT_TYPES(OC__BINARY_K, div, x / y)
OC_COMPLEX_TYPES(OC__BINARY_K, div, x / y)
OC__BINARY_API(div, OC__T(OC_FLOAT_TYPES, div) OC__T(OC_COMPLEX_TYPES, div))
OC_FLOAT_TYPES(OC__BINARY_K, pow, pow(x, y))
OC_COMPLEX_TYPES(OC__BINARY_K, pow, pow(x, y))
OC__BINARY_API(pow, OC__T(OC_FLOAT_TYPES, pow) OC__T(OC_COMPLEX_TYPES, pow))

#define OC__BITWISE(name, op)                         \
    OC_INT_TYPES(OC__BINARY_K, name, x op y)          \
    OC_BOOL_TYPES(OC__BINARY_K, name, x op y)         \
    OC__BINARY_API(name, OC__T(OC_INT_TYPES, name) OC__T(OC_BOOL_TYPES, name))
OC__BITWISE(bitwise_and, &)
OC__BITWISE(bitwise_or, |)
