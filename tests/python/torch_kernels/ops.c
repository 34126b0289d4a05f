/* Kernels of the test library oc_torch_test. */
#include <opcore/kernel.h>

/* Dereferences NULL: must become an OpError, not a crash. */
oc_tensor *fault(const oc_tensor *x)
{
    (void)x;
    volatile float *p = NULL;
    *p = 1.0f;
    return oc_dst_tensor();
}

/* printf from a kernel reaches the process's stdout. */
oc_tensor *hello(const oc_tensor *x)
{
    printf("hello from an opcore kernel: %lld elements\n", (long long)oc_numel(x));
    return oc_copy_(oc_dst_tensor(), x);
}

oc_tensor *scale(const oc_tensor *x, double alpha, bool neg)
{
    OC_CHECK(x->dtype == OC_FLOAT32, "scale takes float32, got %s", oc_dtype_name(x->dtype));
    oc_tensor *out = oc_dst_tensor();
    int64_t n = oc_numel(x);
    for (int64_t i = 0; i < n; i++) {
        float v = *(const float *)oc_flat_ptr(x, i) * (float)alpha;
        *(float *)oc_flat_ptr(out, i) = neg ? -v : v;
    }
    return out;
}

/* a + b, element by element (float32), any strides. */
oc_tensor *add(const oc_tensor *a, const oc_tensor *b)
{
    OC_CHECK(a->dtype == OC_FLOAT32 && b->dtype == OC_FLOAT32, "add takes float32");
    oc_tensor *out = oc_dst_tensor();
    int64_t n = oc_numel(a);
    for (int64_t i = 0; i < n; i++)
        *(float *)oc_flat_ptr(out, i) = *(const float *)oc_flat_ptr(a, i) + *(const float *)oc_flat_ptr(b, i);
    return out;
}

oc_tensor *only_1d(const oc_tensor *x) { return oc_copy_(oc_dst_tensor(), x); }

/* Row sums of a 2-D float32 tensor, as float64 (an output dtype and shape
 * that differ from the input's). */
oc_tensor *sum_rows(const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32, "sum_rows takes float32");
    oc_tensor *out = oc_dst_tensor();
    oc_cacc in = oc_accessor(x, OC_FLOAT32, 2);
    for (int64_t i = 0; i < x->sizes[0]; i++) {
        double s = 0;
        for (int64_t j = 0; j < x->sizes[1]; j++) s += OC_AT(in, float, i, j);
        *(double *)oc_flat_ptr(out, i) = s;
    }
    return out;
}
