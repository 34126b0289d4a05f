/* The ReLU the benchmarks' peers run (a C++ extension op, an apache-tvm-ffi
 * function, a C++ XLA FFI handler): a raw loop over contiguous float32
 * memory into the output the framework allocated, so that per-call
 * comparisons weigh the calling machinery, not the loops. Other layouts are
 * first copied to contiguous temporaries, as the C++ op's .contiguous()
 * does (autograd hands backward an expanded, stride-0 gradient). Pairs with
 * examples/relu/shape.c. */
#include <opcore/kernel.h>

static const float *contiguous(const oc_tensor *t)
{
    return oc_is_contiguous(t) ? t->data : oc_to_dtype(t, OC_FLOAT32)->data;
}

/* out[i] = x[i] > 0 ? g[i] : 0 (g == x: the ReLU itself) */
static oc_tensor *relu_like(const oc_tensor *g, const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32 && g->dtype == OC_FLOAT32, "takes float32, got %s", oc_dtype_name(x->dtype));
    OC_CHECK(oc_same_shape(g, x), "the two tensors must have one shape");
    oc_tensor *out = oc_dst_tensor();
    OC_CHECK(oc_is_contiguous(out), "the output must be contiguous");
    const float *s = contiguous(x), *gg = g == x ? s : contiguous(g);
    float *d = out->data;
    int64_t n = oc_numel(x);
    if (gg == s) /* the forward: the peers' loop, letter for letter (a select from a second array
                    makes gcc keep a vector in a stack slot: half the speed on AVX-512) */
        for (int64_t i = 0; i < n; i++) d[i] = s[i] > 0.0f ? s[i] : 0.0f;
    else
        for (int64_t i = 0; i < n; i++) d[i] = s[i] > 0.0f ? gg[i] : 0.0f;
    return out;
}

oc_tensor *relu_forward(const oc_tensor *x) { return relu_like(x, x); }

oc_tensor *relu_backward(const oc_tensor *grad, const oc_tensor *x) { return relu_like(grad, x); }
