/* Shape functions of the test library oc_agk (ops.c says what each op does). */
#include <opcore/check.h>
#include <opcore/library.h>
#include <opcore/tensor_ops.h>

static oc_tensor *scale_shape(const oc_tensor *x, double alpha, const oc_tensor *bias)
{
    (void)alpha;
    OC_CHECK(x->dtype == OC_FLOAT32, "scale: float32 x expected");
    OC_CHECK(!bias || (oc_same_shape(x, bias) && bias->dtype == OC_FLOAT32), "scale: bias must be x's shape");
    return oc_empty_like(x);
}

static void scale_backward_shape(const oc_tensor *grad, double beta, double alpha, const oc_tensor *bias)
{
    (void)beta, (void)alpha, (void)bias;
    oc_set_result(0, oc_empty_like(grad));
    oc_set_result(1, oc_empty_like(grad));
}

static void twice_sign_shape(const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32, "twice_sign: float32 x expected");
    oc_set_result(0, oc_empty_like(x));
    oc_set_result(1, oc_empty(OC_INT32, x->ndim, x->sizes));
}

static oc_tensor *twice_sign_backward_shape(const oc_tensor *grad0, const oc_tensor *grad1)
{
    OC_CHECK(grad1->dtype == OC_INT32, "twice_sign_backward: grad1 of the int32 result expected");
    return oc_empty_like(grad0);
}

static oc_tensor *shrink_backward_shape(const oc_tensor *grad)
{
    int64_t one = 1;
    return oc_empty(grad->dtype, 1, &one);
}

OC_LIBRARY(oc_agk, m)
{
    oc_def(m, "scale(Tensor x, float alpha, Tensor? bias=None) -> Tensor", scale_shape, "scale");
    oc_def(m, "scale_backward(Tensor grad, float beta=3.0, float alpha=1.0, Tensor? bias=None) "
              "-> (Tensor grad_x, Tensor grad_bias)",
           scale_backward_shape, "scale_backward");
    oc_def(m, "twice_sign(Tensor x) -> (Tensor, Tensor)", twice_sign_shape, "twice_sign");
    oc_def(m, "twice_sign_backward(Tensor grad0, Tensor grad1) -> Tensor grad_x", twice_sign_backward_shape,
           "twice_sign_backward");
    oc_def(m, "shrink(Tensor x, float alpha, Tensor? bias=None) -> Tensor", scale_shape, "scale");
    oc_def(m, "shrink_backward(Tensor grad) -> Tensor", shrink_backward_shape, "shrink_backward");
}
