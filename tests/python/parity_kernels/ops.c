/* Kernels of the test library oc_parity (float32, contiguous: opcore
 * hands kernels dense tensors unless they ask for strides). */
#include <math.h>
#include <opcore/kernel.h>

static const float *f32(const oc_tensor *t, const char *what)
{
    OC_CHECK(t->dtype == OC_FLOAT32 && oc_is_contiguous(t), "%s: a contiguous float32 tensor expected", what);
    return t->data;
}

void myadd_out(const oc_tensor *a, const oc_tensor *b, oc_tensor *out)
{
    const float *ad = f32(a, "a"), *bd = f32(b, "b");
    float *od = (float *)f32(out, "out");
    for (int64_t i = 0, n = oc_numel(out); i < n; i++) od[i] = ad[i] + bd[i];
}

/* new_cell = c + tanh(x + h); new_h = tanh(new_cell) */
void cell(const oc_tensor *x, const oc_tensor *h, const oc_tensor *c)
{
    const float *xd = f32(x, "x"), *hd = f32(h, "h"), *cd = f32(c, "c");
    float *new_h = oc_dst_tensor_at(0)->data, *new_cell = oc_dst_tensor_at(1)->data;
    for (int64_t i = 0, n = oc_numel(x); i < n; i++) {
        new_cell[i] = cd[i] + tanhf(xd[i] + hd[i]);
        new_h[i] = tanhf(new_cell[i]);
    }
}

/* d new_cell = grad1 + grad0 * (1 - new_h^2); d (x + h) = d new_cell * (1 - tanh(x + h)^2) */
static void cell_grad_at(int64_t i, float g0, float g1, float new_h, float x, float h)
{
    float dcell = g1 + g0 * (1.0f - new_h * new_h), t = tanhf(x + h);
    ((float *)oc_dst_tensor_at(2)->data)[i] = dcell;
    ((float *)oc_dst_tensor_at(0)->data)[i] = ((float *)oc_dst_tensor_at(1)->data)[i] = dcell * (1.0f - t * t);
}

void cell_backward(const oc_tensor *grad0, const oc_tensor *grad1, const oc_tensor *result0, const oc_tensor *x,
                   const oc_tensor *h)
{
    const float *g0 = f32(grad0, "grad0"), *g1 = f32(grad1, "grad1"), *nh = f32(result0, "result0");
    const float *xd = f32(x, "x"), *hd = f32(h, "h");
    for (int64_t i = 0, n = oc_numel(x); i < n; i++) cell_grad_at(i, g0[i], g1[i], nh[i], xd[i], hd[i]);
}

/* the same gradients, new_h recomputed from the inputs */
void cell_backward_seeds(const oc_tensor *dh, const oc_tensor *dc, const oc_tensor *x, const oc_tensor *h,
                         const oc_tensor *c)
{
    const float *g0 = f32(dh, "dh"), *g1 = f32(dc, "dc"), *xd = f32(x, "x"), *hd = f32(h, "h"), *cd = f32(c, "c");
    for (int64_t i = 0, n = oc_numel(x); i < n; i++)
        cell_grad_at(i, g0[i], g1[i], tanhf(cd[i] + tanhf(xd[i] + hd[i])), xd[i], hd[i]);
}
