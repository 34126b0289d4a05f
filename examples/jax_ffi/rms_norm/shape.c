/* Shape functions and registration of the rms_norm example (rms_norm.c). */
#include <opcore/library.h>

/* What the kernels take: a float array of rank >= 1 (checked here, once
 * per shape, instead of in the kernels on every call). */
static void check_input(const oc_tensor *x, const char *op)
{
    OC_CHECK(x->ndim >= 1, "%s: the input must be an array (rank >= 1), got a scalar", op);
    OC_CHECK(oc_dtype_is_floating(x->dtype), "%s: takes a float dtype, got %s", op, oc_dtype_name(x->dtype));
}

static oc_tensor *rms_norm_shape(const oc_tensor *x, double eps)
{
    (void)eps;
    check_input(x, "rms_norm");
    return oc_empty_like(x);
}

/* y like x; res: x's shape without its last axis. */
static void rms_norm_fwd_shape(const oc_tensor *x, double eps)
{
    (void)eps;
    check_input(x, "rms_norm_fwd");
    oc_set_result(0, oc_empty_like(x));
    oc_set_result(1, oc_empty(x->dtype, x->ndim - 1, x->sizes));
}

static oc_tensor *rms_norm_bwd_shape(const oc_tensor *res, const oc_tensor *x, const oc_tensor *ct)
{
    check_input(x, "rms_norm_bwd");
    OC_CHECK(oc_same_shape(x, ct), "rms_norm_bwd: x and ct must have one shape");
    OC_CHECK(res->ndim == x->ndim - 1, "rms_norm_bwd: res must have x's shape without its last axis");
    return oc_empty_like(ct);
}

OC_LIBRARY(jax_ffi_rms_norm, m)
{
    oc_def(m, "rms_norm(Tensor x, float eps=1e-05) -> Tensor", rms_norm_shape, "rms_norm");
    oc_def(m, "rms_norm_fwd(Tensor x, float eps=1e-05) -> (Tensor y, Tensor res)", rms_norm_fwd_shape,
           "rms_norm_fwd");
    oc_def(m, "rms_norm_bwd(Tensor res, Tensor x, Tensor ct) -> Tensor", rms_norm_bwd_shape, "rms_norm_bwd");
}
