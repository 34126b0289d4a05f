/* A fused SGD-with-momentum step over every parameter at once, written in
 * place: the same arithmetic, in the same order and rounding, as
 * torch.optim.SGD (grad + wd*param; buf = buf*momentum + grad;
 * param + (-lr)*buf, each add-with-alpha one fused multiply-add as in
 * torch's vectorised kernels), so training matches it exactly. */
#include <math.h>

#include <opcore/kernel.h>

void sgd_momentum_(oc_tensor_list_mut params, oc_tensor_list_mut momentum_bufs, oc_tensor_list grads,
                   double lr, double momentum, double weight_decay)
{
    OC_CHECK(params.count == momentum_bufs.count && params.count == grads.count,
             "got %lld params, %lld momentum buffers and %lld grads", (long long)params.count,
             (long long)momentum_bufs.count, (long long)grads.count);
    const float neg_lr = (float)-lr, m = (float)momentum, wd = (float)weight_decay;
    for (int64_t i = 0; i < params.count; i++) {
        oc_tensor *p = &params.items[i], *buf = &momentum_bufs.items[i];
        const oc_tensor *gt = &grads.items[i];
        OC_CHECK(p->dtype == OC_FLOAT32 && buf->dtype == OC_FLOAT32 && gt->dtype == OC_FLOAT32,
                 "parameter %lld: float32 tensors only", (long long)i);
        OC_CHECK(oc_same_shape(p, buf) && oc_same_shape(p, gt), "parameter %lld: param, buffer and "
                 "grad shapes differ", (long long)i);
        OC_CHECK(oc_is_contiguous(p) && oc_is_contiguous(buf) && oc_is_contiguous(gt),
                 "parameter %lld: contiguous tensors only", (long long)i);
        float *pd = p->data, *bd = buf->data;
        const float *gd = gt->data;
        int64_t lo, hi;
        oc_core_range(oc_numel(p), 16, &lo, &hi);
        for (int64_t k = lo; k < hi; k++) {
            float g = wd != 0.0f ? fmaf(pd[k], wd, gd[k]) : gd[k];
            if (m != 0.0f) {
                bd[k] = bd[k] * m + g;
                g = bd[k];
            }
            pd[k] = fmaf(g, neg_lr, pd[k]);
        }
    }
}
