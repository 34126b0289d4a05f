/* Kernels of the JAX test library jax_kinds: one op per kind of schema
 * argument or result that examples/ops does not show (str, ScalarType,
 * float[], bool, Scalar, int?, keyword-only, in-place and alias results),
 * plus shape functions that do size arithmetic with and without oc_dim_*. */
#include <math.h>
#include <string.h>

#include <opcore/kernel.h>

static float get(const oc_tensor *t, int64_t i) { return *(const float *)oc_flat_ptr(t, i); }
static void put(oc_tensor *t, int64_t i, float v) { *(float *)oc_flat_ptr(t, i) = v; }

/* sum_k coeffs[k] * x^k, "horner" or "power" (the same value), negated,
 * then clamped to [-clip, clip] when clip is given. */
oc_tensor *poly(const oc_tensor *x, oc_float_list coeffs, const char *mode, bool negate, const int64_t *clip)
{
    OC_CHECK(x->dtype == OC_FLOAT32, "x must be float32");
    bool horner = strcmp(mode, "horner") == 0;
    OC_CHECK(horner || strcmp(mode, "power") == 0, "mode must be 'horner' or 'power', got '%s'", mode);
    oc_tensor *out = oc_dst_tensor();
    for (int64_t i = 0; i < oc_numel(x); i++) {
        double v = get(x, i), acc = 0;
        for (int64_t k = 0; k < coeffs.count; k++)
            acc += horner ? 0 : coeffs.values[k] * pow(v, (double)k);
        for (int64_t k = coeffs.count - 1; horner && k >= 0; k--) acc = acc * v + coeffs.values[k];
        if (negate) acc = -acc;
        if (clip) acc = fmax(-(double)*clip, fmin((double)*clip, acc));
        put(out, i, (float)acc);
    }
    return out;
}

/* x converted to `dtype` (any dtype opcore has), times `scale`. */
oc_tensor *cast(const oc_tensor *x, oc_dtype dtype, oc_scalar scale)
{
    oc_tensor *out = oc_dst_tensor();
    OC_CHECK(out->dtype == dtype, "result dtype %s, asked %s", oc_dtype_name(out->dtype), oc_dtype_name(dtype));
    oc_tensor *wide = oc_to_dtype(x, OC_FLOAT64); /* contiguous */
    double *d = wide->data, k = oc_scalar_to_double(scale);
    for (int64_t i = 0; i < oc_numel(wide); i++) d[i] *= k;
    oc_copy_(out, wide);
    oc_tensor_free(wide);
    return out;
}

/* x += alpha * other, returning x (-> Tensor(a!)). */
void add_(oc_tensor *x, const oc_tensor *other, oc_scalar alpha)
{
    float a = (float)oc_scalar_to_double(alpha);
    for (int64_t i = 0; i < oc_numel(x); i++) put(x, i, get(x, i) + a * get(other, i));
}

/* Two arguments written in place, no result. */
void swap_scale_(oc_tensor *x, oc_tensor *y, double s)
{
    OC_CHECK(oc_numel(x) == oc_numel(y), "x and y differ in size");
    for (int64_t i = 0; i < oc_numel(x); i++) {
        float a = get(x, i), b = get(y, i);
        put(x, i, b * (float)s);
        put(y, i, a * (float)s);
    }
}

/* A fresh result (the L2 norm) and x normalised in place. */
void normalize_(oc_tensor *x)
{
    double s = 0;
    for (int64_t i = 0; i < oc_numel(x); i++) s += (double)get(x, i) * get(x, i);
    double n = sqrt(s);
    for (int64_t i = 0; n > 0 && i < oc_numel(x); i++) put(x, i, (float)(get(x, i) / n));
    *(float *)oc_dst_tensor_at(0)->data = (float)n;
}

/* x's rows repeated `times` times: rows * times computed with oc_dim_mul
 * (repeat_rows) or plain C (repeat_rows_plain, which jax.export refuses). */
oc_tensor *repeat_rows(const oc_tensor *x, int64_t times)
{
    oc_tensor *out = oc_dst_tensor();
    for (int64_t t = 0; t < times; t++)
        for (int64_t i = 0; i < oc_numel(x); i++) put(out, t * oc_numel(x) + i, get(x, i));
    return out;
}

oc_tensor *repeat_rows_plain(const oc_tensor *x, int64_t times) { return repeat_rows(x, times); }

/* The result: x * s, element-wise, in x's element order. */
static oc_tensor *times(const oc_tensor *x, double s)
{
    oc_tensor *out = oc_dst_tensor();
    for (int64_t i = 0; i < oc_numel(x); i++) put(out, i, get(x, i) * (float)s);
    return out;
}

/* x * s: the batch-separable op of the sharding tests. */
oc_tensor *scale(const oc_tensor *x, double s) { return times(x, s); }

/* The wrong-shaped backward of scale: a gradient shaped like x transposed. */
oc_tensor *scale_backward_transposed(const oc_tensor *grad, const oc_tensor *x, double s)
{
    (void)x;
    return times(grad, s);
}

/* A backward whose argument names match nothing of scale's: with_vjp
 * falls back to the positional form mul_grad(grad, x). */
oc_tensor *mul_grad(const oc_tensor *dy, const oc_tensor *inp, double factor)
{
    (void)inp;
    return times(dy, factor);
}

/* No result, nothing written: a check that fails the call on a non-finite value. */
void check_finite(const oc_tensor *x, const char *what)
{
    for (int64_t i = 0; i < oc_numel(x); i++)
        OC_CHECK(isfinite(get(x, i)), "%s: element %lld is %g", what, (long long)i, (double)get(x, i));
}

/* Zeros shaped by every oc_dim_* operation on x's rows (dim_ops's shape). */
oc_tensor *dim_ops(const oc_tensor *x, int64_t k)
{
    (void)x, (void)k;
    oc_tensor *out = oc_dst_tensor();
    oc_fill_(out, 0.0);
    return out;
}
