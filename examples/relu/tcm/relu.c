/* ReLU with the TCM accessor (seed 001's fast single-core kernel): copy a
 * block into TCM, compute there, copy it out. */
#include <opcore/kernel.h>

#define BLOCK 1024 /* elements per TCM buffer */

oc_tensor *relu_forward(const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32, "relu_forward takes float32, got %s", oc_dtype_name(x->dtype));
    oc_tensor *out = oc_dst_tensor();
    int64_t n = oc_numel(x);
    float *buf = oc_tcm_malloc(BLOCK * sizeof *buf);
    OC_CHECK(buf != NULL, "no TCM for a %d-element buffer", BLOCK);
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t len = n - i < BLOCK ? n - i : BLOCK;
        oc_tensor_to_tcm(x, buf, i, len);
        for (int64_t j = 0; j < len; j++) buf[j] = buf[j] > 0.0f ? buf[j] : 0.0f;
        oc_tcm_to_tensor(out, buf, i, len);
    }
    oc_tcm_free(buf);
    return out;
}

oc_tensor *relu_backward(const oc_tensor *grad, const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32 && grad->dtype == OC_FLOAT32, "relu_backward takes float32");
    OC_CHECK(oc_same_shape(grad, x), "relu_backward: grad and x must have one shape");
    oc_tensor *out = oc_dst_tensor();
    int64_t n = oc_numel(x);
    float *xb = oc_tcm_malloc(BLOCK * sizeof *xb);
    float *gb = oc_tcm_malloc(BLOCK * sizeof *gb);
    OC_CHECK(xb && gb, "no TCM for two %d-element buffers", BLOCK);
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t len = n - i < BLOCK ? n - i : BLOCK;
        oc_tensor_to_tcm(x, xb, i, len);
        oc_tensor_to_tcm(grad, gb, i, len);
        for (int64_t j = 0; j < len; j++) gb[j] = xb[j] > 0.0f ? gb[j] : 0.0f;
        oc_tcm_to_tensor(out, gb, i, len);
    }
    oc_tcm_free(gb);
    oc_tcm_free(xb);
    return out;
}
