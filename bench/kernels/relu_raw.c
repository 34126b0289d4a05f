/* The ReLU the benchmarks' peers run (a C++ extension op, an apache-tvm-ffi
 * function, a C++ XLA FFI handler): a raw loop over contiguous float32
 * memory into the output the framework allocated, so that per-call
 * comparisons weigh the calling machinery, not the loops. Any other layout
 * takes the general path. Pairs with examples/relu/shape.c. */
#include <opcore/kernel.h>

static float relu1(float x, float g) { return x > 0.0f ? g : 0.0f; }

/* out[i] = relu'(x[i]) * g[i] (g == x: the ReLU itself) */
static oc_tensor *relu_like(const oc_tensor *g, const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32 && g->dtype == OC_FLOAT32, "takes float32, got %s", oc_dtype_name(x->dtype));
    OC_CHECK(oc_same_shape(g, x), "the two tensors must have one shape");
    oc_tensor *out = oc_dst_tensor();
    int64_t n = oc_numel(x);
    if (oc_is_contiguous(x) && oc_is_contiguous(g) && oc_is_contiguous(out)) {
        const float *s = x->data, *gg = g->data;
        float *d = out->data;
        for (int64_t i = 0; i < n; i++) d[i] = relu1(s[i], gg[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            *(float *)oc_flat_ptr(out, i) = relu1(*(const float *)oc_flat_ptr(x, i), *(const float *)oc_flat_ptr(g, i));
    }
    return out;
}

oc_tensor *relu_forward(const oc_tensor *x) { return relu_like(x, x); }

oc_tensor *relu_backward(const oc_tensor *grad, const oc_tensor *x) { return relu_like(grad, x); }
