/* The sum of all elements: every core sums its share, oc_all_sum combines
 * the partial sums across cores (in core order: the same result on every
 * run), core 0 writes it. */
#include <opcore/kernel.h>

oc_tensor *global_sum(const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32, "x must be float32, got %s", oc_dtype_name(x->dtype));
    oc_tensor *out = oc_dst_tensor();
    int64_t lo, hi;
    oc_core_range(oc_numel(x), 16, &lo, &hi);
    double part = 0;
    if (oc_is_contiguous(x)) {
        const float *xd = x->data;
        for (int64_t i = lo; i < hi; i++) part += xd[i];
    } else {
        for (int64_t i = lo; i < hi; i++) part += *(const float *)oc_flat_ptr(x, i);
    }
    double total = oc_all_sum(part);
    if (oc_cpu_id() == 0) *(float *)out->data = (float)total;
    return out;
}

oc_tensor *global_sum_backward(const oc_tensor *grad, const oc_tensor *x)
{
    (void)x;
    oc_tensor *gx = oc_dst_tensor();
    float g = *(const float *)grad->data;
    int64_t lo, hi;
    oc_core_range(oc_numel(gx), 16, &lo, &hi);
    float *d = gx->data;
    for (int64_t i = lo; i < hi; i++) d[i] = g;
    return gx;
}
