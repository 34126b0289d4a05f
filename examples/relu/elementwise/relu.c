/* ReLU with the element-wise accessor (seed 000's kernel, in C).
 * Simple and general; each access is an index computation. */
#include <opcore/kernel.h>

oc_tensor *relu_forward(const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32, "relu_forward takes float32, got %s", oc_dtype_name(x->dtype));
    OC_CHECK(x->ndim == 2, "relu_forward takes a 2-D tensor, got %d dims", x->ndim);
    oc_tensor *out = oc_zeros_like(x);
    oc_cacc in = oc_accessor(x, OC_FLOAT32, 2);
    oc_acc o = oc_accessor(out, OC_FLOAT32, 2);
    for (int64_t i = 0; i < x->sizes[0]; i++)
        for (int64_t j = 0; j < x->sizes[1]; j++)
            OC_AT(o, float, i, j) = OC_AT(in, float, i, j) > 0.0f ? OC_AT(in, float, i, j) : 0.0f;
    return out;
}

oc_tensor *relu_backward(const oc_tensor *grad, const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32 && grad->dtype == OC_FLOAT32, "relu_backward takes float32");
    OC_CHECK(x->ndim == 2 && oc_same_shape(grad, x), "relu_backward takes two 2-D tensors of one shape");
    oc_tensor *out = oc_zeros_like(x);
    oc_cacc in = oc_accessor(x, OC_FLOAT32, 2);
    oc_cacc g = oc_accessor(grad, OC_FLOAT32, 2);
    oc_acc o = oc_accessor(out, OC_FLOAT32, 2);
    for (int64_t i = 0; i < x->sizes[0]; i++)
        for (int64_t j = 0; j < x->sizes[1]; j++)
            OC_AT(o, float, i, j) = OC_AT(in, float, i, j) > 0.0f ? OC_AT(g, float, i, j) : 0.0f;
    return out;
}
