/* Kernels of the test library oc_agk (tests/python/test_autograd_kernel.py):
 * register_autograd's C++ node fed defaults, optional tensors, integer
 * results and a backward whose gradient has the wrong shape. float32,
 * dense (opcore's default). */
#include <opcore/kernel.h>

/* y = alpha * x (+ bias) */
oc_tensor *scale(const oc_tensor *x, double alpha, const oc_tensor *bias)
{
    const float *xd = x->data, *bd = bias ? bias->data : NULL;
    oc_tensor *y = oc_dst_tensor();
    float *yd = y->data;
    for (int64_t i = 0, n = oc_numel(x); i < n; i++) yd[i] = (float)alpha * xd[i] + (bd ? bd[i] : 0.0f);
    return y;
}

/* grad_x = grad * alpha * beta / 3 (beta: a default between bound
 * arguments, 3 unless misbound); grad_bias = grad */
void scale_backward(const oc_tensor *grad, double beta, double alpha, const oc_tensor *bias)
{
    (void)bias;
    const float *g = grad->data;
    float *gx = oc_dst_tensor_at(0)->data, *gb = oc_dst_tensor_at(1)->data;
    for (int64_t i = 0, n = oc_numel(grad); i < n; i++) {
        gx[i] = g[i] * (float)(alpha * beta / 3.0);
        gb[i] = g[i];
    }
}

/* (x * 2, the sign of x as int32) */
void twice_sign(const oc_tensor *x)
{
    const float *xd = x->data;
    float *y = oc_dst_tensor_at(0)->data;
    int32_t *s = oc_dst_tensor_at(1)->data;
    for (int64_t i = 0, n = oc_numel(x); i < n; i++) {
        y[i] = 2.0f * xd[i];
        s[i] = (xd[i] > 0) - (xd[i] < 0);
    }
}

/* grad_x = 2 * grad0 + grad1 (zeros: the int result has no gradient) */
oc_tensor *twice_sign_backward(const oc_tensor *grad0, const oc_tensor *grad1)
{
    const float *g0 = grad0->data;
    const int32_t *g1 = grad1->data;
    oc_tensor *gx = oc_dst_tensor();
    for (int64_t i = 0, n = oc_numel(grad0); i < n; i++) ((float *)gx->data)[i] = 2.0f * g0[i] + (float)g1[i];
    return gx;
}

/* a gradient of the wrong shape: one element */
oc_tensor *shrink_backward(const oc_tensor *grad)
{
    oc_tensor *g = oc_dst_tensor();
    ((float *)g->data)[0] = ((const float *)grad->data)[0];
    return g;
}
