/* 2-D average pooling over [N, C, H, W] (zero padding counted, as torch's
 * default count_include_pad=True). Multicore: cores split the N*C planes. */
#include <stdbool.h>

#include <opcore/kernel.h>

/* The pooling geometry and this core's planes. */
typedef struct pool {
    int64_t kh, kw, sh, sw, ph, pw; /* kernel, stride, padding */
    int64_t h, w, oh, ow;           /* input and output plane sizes */
    int64_t lo, hi;                 /* this core's planes */
    float inv;                      /* 1 / window size */
} pool;

static pool pool_of(const oc_tensor *x, const oc_tensor *pooled, oc_int_list k, oc_int_list s, oc_int_list p)
{
    pool g = {k.values[0], k.values[1], s.values[0], s.values[1], p.values[0], p.values[1],
              x->sizes[2], x->sizes[3], pooled->sizes[2], pooled->sizes[3], 0, 0,
              1.0f / (float)(k.values[0] * k.values[1])};
    oc_core_range(x->sizes[0] * x->sizes[1], 1, &g.lo, &g.hi);
    return g;
}

/* Visit the input positions of output (i, j)'s window inside the plane:
 * forward sums them, backward spreads the gradient over them. */
static float window_pass(const pool *g, int64_t i, int64_t j, float *plane, float v, bool spread)
{
    float acc = 0;
    for (int64_t a = 0; a < g->kh; a++) {
        int64_t y = i * g->sh - g->ph + a;
        if (y < 0 || y >= g->h) continue;
        for (int64_t b = 0; b < g->kw; b++) {
            int64_t x = j * g->sw - g->pw + b;
            if (x < 0 || x >= g->w) continue;
            if (spread) plane[y * g->w + x] += v;
            else acc += plane[y * g->w + x];
        }
    }
    return acc;
}

oc_tensor *avg_pool2d(const oc_tensor *x, oc_int_list kernel_size, oc_int_list stride, oc_int_list padding)
{
    OC_CHECK(x->dtype == OC_FLOAT32 && oc_is_contiguous(x), "x must be contiguous float32");
    oc_tensor *out = oc_dst_tensor();
    pool g = pool_of(x, out, kernel_size, stride, padding);
    for (int64_t p = g.lo; p < g.hi; p++) {
        float *in = (float *)x->data + p * g.h * g.w; /* read only: window_pass does not write it */
        float *o = (float *)out->data + p * g.oh * g.ow;
        for (int64_t i = 0; i < g.oh; i++)
            for (int64_t j = 0; j < g.ow; j++) o[i * g.ow + j] = window_pass(&g, i, j, in, 0, false) * g.inv;
    }
    return out;
}

oc_tensor *avg_pool2d_backward(const oc_tensor *grad, const oc_tensor *x, oc_int_list kernel_size,
                               oc_int_list stride, oc_int_list padding)
{
    OC_CHECK(grad->dtype == OC_FLOAT32 && oc_is_contiguous(grad), "grad must be contiguous float32");
    oc_tensor *gx = oc_dst_tensor();
    pool g = pool_of(x, grad, kernel_size, stride, padding);
    for (int64_t p = g.lo; p < g.hi; p++) {
        float *g_in = (float *)gx->data + p * g.h * g.w;
        const float *gp = (const float *)grad->data + p * g.oh * g.ow;
        for (int64_t k = 0; k < g.h * g.w; k++) g_in[k] = 0;
        for (int64_t i = 0; i < g.oh; i++)
            for (int64_t j = 0; j < g.ow; j++) window_pass(&g, i, j, g_in, gp[i * g.ow + j] * g.inv, true);
    }
    return gx;
}
