/* Shape functions and registration of the JAX test library jax_kinds. */
#include <opcore/library.h>

static oc_tensor *poly_shape(const oc_tensor *x, oc_float_list coeffs, const char *mode, bool negate,
                             const int64_t *clip)
{
    (void)coeffs, (void)mode, (void)negate, (void)clip;
    return oc_empty_like(x);
}

static oc_tensor *cast_shape(const oc_tensor *x, oc_dtype dtype, oc_scalar scale)
{
    (void)scale;
    return oc_empty(dtype, x->ndim, x->sizes);
}

static void normalize_shape(oc_tensor *x)
{
    (void)x;
    oc_set_result(0, oc_empty(OC_FLOAT32, 0, NULL));
}

static oc_tensor *repeat_rows_shape(const oc_tensor *x, int64_t times)
{
    int64_t sizes[OC_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) sizes[d] = x->sizes[d];
    sizes[0] = oc_dim_mul(x->sizes[0], times);
    return oc_empty(x->dtype, x->ndim, sizes);
}

static oc_tensor *repeat_rows_plain_shape(const oc_tensor *x, int64_t times)
{
    int64_t sizes[OC_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) sizes[d] = x->sizes[d];
    sizes[0] = x->sizes[0] * times; /* plain C: a dynamic-shape tracer cannot follow it */
    return oc_empty(x->dtype, x->ndim, sizes);
}

static oc_tensor *scale_shape(const oc_tensor *x, double s)
{
    (void)s;
    return oc_empty_like(x);
}

static oc_tensor *transposed_shape(const oc_tensor *grad, const oc_tensor *x, double s)
{
    (void)grad, (void)s;
    OC_CHECK(x->ndim == 2, "x must be 2-D");
    return oc_empty(x->dtype, OC_SHAPE(x->sizes[1], x->sizes[0]));
}

static oc_tensor *mul_grad_shape(const oc_tensor *dy, const oc_tensor *inp, double factor)
{
    (void)inp, (void)factor;
    return oc_empty_like(dy);
}

/* [ceil(n/k), n mod k + 1, min(n, k), max(n, k), 2n - 1, n * k / 3] for n rows */
static oc_tensor *dim_ops_shape(const oc_tensor *x, int64_t k)
{
    int64_t n = x->sizes[0];
    return oc_empty(OC_FLOAT32, OC_SHAPE(oc_dim_ceil_div(n, k), oc_dim_add(oc_dim_mod(n, k), 1), oc_dim_min(n, k),
                                         oc_dim_max(n, k), oc_dim_sub(oc_dim_mul(n, 2), 1), oc_dim_div(oc_dim_mul(n, k), 3)));
}

OC_LIBRARY(jax_kinds, m)
{
    oc_def(m, "poly(Tensor x, float[] coeffs, str mode=\"horner\", *, bool negate=False, int? clip=None) -> Tensor",
           poly_shape, "poly");
    oc_def(m, "cast(Tensor x, ScalarType dtype, Scalar scale=1) -> Tensor", cast_shape, "cast");
    oc_def(m, "add_(Tensor(a!) x, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", NULL, "add_");
    oc_def(m, "swap_scale_(Tensor(a!) x, Tensor(b!) y, float s=1.0) -> ()", NULL, "swap_scale_");
    oc_def(m, "normalize_(Tensor(a!) x) -> (Tensor norm, Tensor(a!))", normalize_shape, "normalize_");
    oc_def(m, "repeat_rows(Tensor x, int times) -> Tensor", repeat_rows_shape, "repeat_rows");
    oc_def(m, "repeat_rows_plain(Tensor x, int times) -> Tensor", repeat_rows_plain_shape, "repeat_rows_plain");
    oc_def(m, "scale(Tensor x, float s=2.0) -> Tensor", scale_shape, "scale");
    oc_def(m, "scale_backward_transposed(Tensor grad, Tensor x, float s=2.0) -> Tensor", transposed_shape,
           "scale_backward_transposed");
    oc_def(m, "check_finite(Tensor x, str what=\"x\") -> ()", NULL, "check_finite");
    oc_def(m, "dim_ops(Tensor x, int k) -> Tensor", dim_ops_shape, "dim_ops");
    oc_def(m, "mul_grad(Tensor dy, Tensor inp, float factor=2.0) -> Tensor", mul_grad_shape, "mul_grad");
}
