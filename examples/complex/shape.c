/* Shape functions and registration of the complex_ops example library:
 * JAX's FFI rms_norm (rms_norm.c) for float32, float64, complex64 and
 * complex128. y has x's shape and dtype; res (the per-row scale, which
 * rms_norm_bwd takes back) drops x's last dim. */
#include <opcore/library.h>

static void check_array(const oc_tensor *x)
{
    OC_CHECK(x->ndim >= 1, "x must be an array (at least 1 dim), got a scalar");
}

static oc_tensor *rms_norm_shape(const oc_tensor *x, double eps)
{
    (void)eps;
    check_array(x);
    return oc_empty_like(x);
}

static void rms_norm_fwd_shape(const oc_tensor *x, double eps)
{
    (void)eps;
    check_array(x);
    oc_set_result(0, oc_empty_like(x));
    oc_set_result(1, oc_empty(x->dtype, x->ndim - 1, x->sizes));
}

static oc_tensor *rms_norm_bwd_shape(const oc_tensor *grad_y, const oc_tensor *res, const oc_tensor *x)
{
    check_array(x);
    OC_CHECK(oc_same_shape(grad_y, x), "grad_y and x differ in shape");
    OC_CHECK(res->ndim == x->ndim - 1, "res must have x's leading dims (%d dims), got %d", x->ndim - 1,
             res->ndim);
    return oc_empty_like(x);
}

OC_LIBRARY(complex_ops, m)
{
    oc_def(m, "rms_norm(Tensor x, float eps=1e-05) -> Tensor", rms_norm_shape, "rms_norm", .multicore = true);
    oc_def(m, "rms_norm_fwd(Tensor x, float eps=1e-05) -> (Tensor y, Tensor res)", rms_norm_fwd_shape,
           "rms_norm_fwd", .multicore = true);
    oc_def(m, "rms_norm_bwd(Tensor grad_y, Tensor res, Tensor x) -> Tensor grad_x", rms_norm_bwd_shape,
           "rms_norm_bwd", .multicore = true);
}
