/* y = x @ weight^T (+ bias): a Tensor? argument (NULL for None).
 * Multicore: cores split the rows of each result. */
#include <opcore/kernel.h>

static float dot(const float *a, const float *b, int64_t n)
{
    float acc = 0;
    for (int64_t k = 0; k < n; k++) acc += a[k] * b[k];
    return acc;
}

oc_tensor *linear(const oc_tensor *x, const oc_tensor *weight, const oc_tensor *bias)
{
    OC_CHECK(oc_is_contiguous(x) && oc_is_contiguous(weight) && (!bias || oc_is_contiguous(bias)),
             "contiguous tensors only");
    oc_tensor *y = oc_dst_tensor();
    int64_t m = x->sizes[0], k = x->sizes[1], n = weight->sizes[0], lo, hi;
    const float *xd = x->data, *wd = weight->data, *bd = bias ? bias->data : NULL;
    float *yd = y->data;
    oc_core_range(m, 1, &lo, &hi);
    for (int64_t i = lo; i < hi; i++)
        for (int64_t j = 0; j < n; j++) yd[i * n + j] = dot(xd + i * k, wd + j * k, k) + (bd ? bd[j] : 0.0f);
    return y;
}

void linear_backward(const oc_tensor *grad, const oc_tensor *x, const oc_tensor *weight, const oc_tensor *bias)
{
    (void)bias; /* only its presence matters, to the caller */
    oc_tensor *gx = oc_dst_tensor_at(0), *gw = oc_dst_tensor_at(1), *gb = oc_dst_tensor_at(2);
    int64_t m = x->sizes[0], k = x->sizes[1], n = weight->sizes[0], lo, hi;
    const float *g = grad->data, *xd = x->data, *wd = weight->data;
    float *gxd = gx->data, *gwd = gw->data, *gbd = gb->data;
    oc_core_range(m, 1, &lo, &hi); /* grad_x = grad @ weight */
    for (int64_t i = lo; i < hi; i++)
        for (int64_t c = 0; c < k; c++) {
            float acc = 0;
            for (int64_t j = 0; j < n; j++) acc += g[i * n + j] * wd[j * k + c];
            gxd[i * k + c] = acc;
        }
    oc_core_range(n, 1, &lo, &hi); /* grad_weight = grad^T @ x, grad_bias = column sums */
    for (int64_t j = lo; j < hi; j++) {
        float sb = 0;
        for (int64_t c = 0; c < k; c++) gwd[j * k + c] = 0;
        for (int64_t i = 0; i < m; i++) {
            float gv = g[i * n + j];
            sb += gv;
            for (int64_t c = 0; c < k; c++) gwd[j * k + c] += gv * xd[i * k + c];
        }
        gbd[j] = sb;
    }
}
