/* opcore/tensor_ops.h — the in-kernel tensor library (seeds' aten subset).
 *
 * Factories and element-wise ops for kernels and shape functions. Inside a
 * shape function every result is a meta tensor (shape and dtype only), so a
 * shape function can be written with the same calls as the kernel.
 *
 * Rules of the element-wise ops, as in the seeds: no broadcasting and no
 * type promotion (broadcast with oc_broadcast_shape and opcore/iter.h).
 * Operands must have the same shape and dtype; `_out` variants write into `out`,
 * which must have that shape and dtype too. A violation fails the running
 * kernel with a message naming the op, the operand, expected and got (or,
 * outside a kernel, returns NULL with oc_errmsg set).
 *
 * Tensors returned here are owned by the running call and freed after it
 * unless returned from the kernel; oc_tensor_free releases one early.
 */
#ifndef OPCORE_TENSOR_OPS_H
#define OPCORE_TENSOR_OPS_H

#include "tensor.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Shape literal: oc_zeros(OC_FLOAT32, OC_SHAPE(2, 3)). */
#define OC_SHAPE(...)                                                        \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),               \
        (const int64_t[]) { __VA_ARGS__ }

/* Tensor list literal: oc_empty_broadcast(OC_FLOAT32, OC_TENSORS(x, bias))
 * passes the count and a `const oc_tensor *const[]` array. */
#define OC_TENSORS(...)                                                      \
    (int)(sizeof((const oc_tensor *[]){__VA_ARGS__}) / sizeof(const oc_tensor *)), \
        (const oc_tensor *const[]) { __VA_ARGS__ }

/* ---- broadcasting (for shape functions and kernels) ---------------------- */
/* NumPy's rule: shapes are aligned at their last dim; in each dim the sizes
 * must be equal or 1 (a missing dim counts as 1), and the result takes the
 * larger. NULL tensors (an optional argument that is None) are skipped. */

/* The broadcast shape of `n` tensors into *ndim and sizes[OC_MAX_DIMS].
 * OC_EINVAL if two shapes do not broadcast; the message names both shapes
 * and the dim ("tensor 0 of shape [4, 3] and tensor 1 of shape [5] do not
 * broadcast: dim -1 is 3 vs 5"). Inside a shape function or kernel the
 * failure ends it, as every opcore call does. */
OC_API oc_status oc_broadcast_shape(int n, const oc_tensor *const *tensors, int *ndim,
                                    int64_t *sizes);

/* A new tensor of the broadcast shape of `n` tensors and `dtype` (a meta
 * tensor in a shape function): oc_empty_broadcast(x->dtype, OC_TENSORS(x, bias)).
 * NULL if the shapes do not broadcast (outside a call: oc_errmsg says why). */
OC_API oc_tensor *oc_empty_broadcast(oc_dtype dtype, int n, const oc_tensor *const *tensors);

/* ---- factories ---------------------------------------------------------- */

OC_API oc_tensor *oc_empty(oc_dtype dtype, int ndim, const int64_t *sizes); /* uninitialised */
OC_API oc_tensor *oc_zeros(oc_dtype dtype, int ndim, const int64_t *sizes);
OC_API oc_tensor *oc_ones(oc_dtype dtype, int ndim, const int64_t *sizes);
OC_API oc_tensor *oc_full(oc_dtype dtype, int ndim, const int64_t *sizes, double value);
OC_API oc_tensor *oc_eye(oc_dtype dtype, int64_t rows, int64_t cols); /* 2-D identity */

OC_API oc_tensor *oc_empty_like(const oc_tensor *t); /* same shape and dtype */
OC_API oc_tensor *oc_zeros_like(const oc_tensor *t);
OC_API oc_tensor *oc_ones_like(const oc_tensor *t);
OC_API oc_tensor *oc_full_like(const oc_tensor *t, double value);

/* A contiguous copy of `t` in `dtype` (a plain copy if dtype == t->dtype). */
OC_API oc_tensor *oc_to_dtype(const oc_tensor *t, oc_dtype dtype);

/* Copy src into dst element by element (same shape, any strides; dtypes
 * may differ: values are converted). Returns dst. */
OC_API oc_tensor *oc_copy_(oc_tensor *dst, const oc_tensor *src);

/* Set every element of t to value. Returns t. */
OC_API oc_tensor *oc_fill_(oc_tensor *t, double value);

/* ---- element-wise, unary ------------------------------------------------ */
/* Floating dtypes for the transcendental ops; abs/ceil/floor also accept
 * integers; bitwise_not takes integers and bool. */

OC_API oc_tensor *oc_abs(const oc_tensor *a);
OC_API oc_tensor *oc_abs_out(oc_tensor *out, const oc_tensor *a);
OC_API oc_tensor *oc_neg(const oc_tensor *a);
OC_API oc_tensor *oc_neg_out(oc_tensor *out, const oc_tensor *a);
OC_API oc_tensor *oc_ceil(const oc_tensor *a);
OC_API oc_tensor *oc_ceil_out(oc_tensor *out, const oc_tensor *a);
OC_API oc_tensor *oc_floor(const oc_tensor *a);
OC_API oc_tensor *oc_floor_out(oc_tensor *out, const oc_tensor *a);
OC_API oc_tensor *oc_sin(const oc_tensor *a);
OC_API oc_tensor *oc_sin_out(oc_tensor *out, const oc_tensor *a);
OC_API oc_tensor *oc_cos(const oc_tensor *a);
OC_API oc_tensor *oc_cos_out(oc_tensor *out, const oc_tensor *a);
OC_API oc_tensor *oc_tan(const oc_tensor *a);
OC_API oc_tensor *oc_tan_out(oc_tensor *out, const oc_tensor *a);
OC_API oc_tensor *oc_log(const oc_tensor *a);
OC_API oc_tensor *oc_log_out(oc_tensor *out, const oc_tensor *a);
OC_API oc_tensor *oc_log2(const oc_tensor *a);
OC_API oc_tensor *oc_log2_out(oc_tensor *out, const oc_tensor *a);
OC_API oc_tensor *oc_log10(const oc_tensor *a);
OC_API oc_tensor *oc_log10_out(oc_tensor *out, const oc_tensor *a);
OC_API oc_tensor *oc_exp(const oc_tensor *a);
OC_API oc_tensor *oc_exp_out(oc_tensor *out, const oc_tensor *a);
OC_API oc_tensor *oc_bitwise_not(const oc_tensor *a);
OC_API oc_tensor *oc_bitwise_not_out(oc_tensor *out, const oc_tensor *a);

/* clamp(a, lo, hi): min(max(a, lo), hi); pass -INFINITY / INFINITY to leave
 * a side open. */
OC_API oc_tensor *oc_clamp(const oc_tensor *a, double lo, double hi);
OC_API oc_tensor *oc_clamp_out(oc_tensor *out, const oc_tensor *a, double lo, double hi);

/* a ** exponent, element-wise (floating dtypes). */
OC_API oc_tensor *oc_pow_scalar(const oc_tensor *a, double exponent);
OC_API oc_tensor *oc_pow_scalar_out(oc_tensor *out, const oc_tensor *a, double exponent);

/* ---- element-wise, binary (same shape, same dtype) ---------------------- */

/* a + alpha * b  and  a - alpha * b */
OC_API oc_tensor *oc_add(const oc_tensor *a, const oc_tensor *b, double alpha);
OC_API oc_tensor *oc_add_out(oc_tensor *out, const oc_tensor *a, const oc_tensor *b, double alpha);
OC_API oc_tensor *oc_sub(const oc_tensor *a, const oc_tensor *b, double alpha);
OC_API oc_tensor *oc_sub_out(oc_tensor *out, const oc_tensor *a, const oc_tensor *b, double alpha);
OC_API oc_tensor *oc_mul(const oc_tensor *a, const oc_tensor *b);
OC_API oc_tensor *oc_mul_out(oc_tensor *out, const oc_tensor *a, const oc_tensor *b);
/* true division; floating dtypes only */
OC_API oc_tensor *oc_div(const oc_tensor *a, const oc_tensor *b);
OC_API oc_tensor *oc_div_out(oc_tensor *out, const oc_tensor *a, const oc_tensor *b);
/* a ** b; floating dtypes only */
OC_API oc_tensor *oc_pow(const oc_tensor *a, const oc_tensor *b);
OC_API oc_tensor *oc_pow_out(oc_tensor *out, const oc_tensor *a, const oc_tensor *b);
/* integers and bool only */
OC_API oc_tensor *oc_bitwise_and(const oc_tensor *a, const oc_tensor *b);
OC_API oc_tensor *oc_bitwise_and_out(oc_tensor *out, const oc_tensor *a, const oc_tensor *b);
OC_API oc_tensor *oc_bitwise_or(const oc_tensor *a, const oc_tensor *b);
OC_API oc_tensor *oc_bitwise_or_out(oc_tensor *out, const oc_tensor *a, const oc_tensor *b);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_TENSOR_OPS_H */
