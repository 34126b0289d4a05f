/* SiLU and softmax over the last dim, float32, as plain loops over the
 * tensors' memory, every core taking its share of elements (SiLU) or rows
 * (softmax). Built with opcore's default flags, expf vectorises through
 * glibc's vector math (opcore/vecmath.h); oc_max_f32 and oc_sum_f32 are the
 * vectorised reductions (docs/build.md). */
#include <opcore/kernel.h>

static void check_input(const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32, "takes float32, got %s", oc_dtype_name(x->dtype));
    OC_CHECK(oc_is_contiguous(x) && x->ndim >= 1, "takes a contiguous tensor of at least 1 dim");
}

oc_tensor *silu(const oc_tensor *x)
{
    check_input(x);
    oc_tensor *out = oc_dst_tensor();
    const float *in = x->data;
    float *y = out->data;
    int64_t lo, hi;
    oc_core_range(oc_numel(x), 16, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) y[i] = in[i] / (1.0f + expf(-in[i]));
    return out;
}

/* Run row(in, y, cols) on this core's share of the rows of x. */
static oc_tensor *by_rows(const oc_tensor *x, void (*row)(const float *in, float *y, int64_t cols))
{
    check_input(x);
    oc_tensor *out = oc_dst_tensor();
    int64_t cols = x->sizes[x->ndim - 1], rows = cols ? oc_numel(x) / cols : 0, lo, hi;
    oc_core_range(rows, 1, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) row((const float *)x->data + r * cols, (float *)out->data + r * cols, cols);
    return out;
}

static void softmax_row(const float *in, float *y, int64_t cols)
{
    float m = oc_max_f32(in, cols);
    for (int64_t j = 0; j < cols; j++) y[j] = expf(in[j] - m);
    float inv = 1.0f / oc_sum_f32(y, cols);
    for (int64_t j = 0; j < cols; j++) y[j] *= inv;
}

static void softmax_plain_row(const float *in, float *y, int64_t cols)
{
    float m = -INFINITY, s = 0;
    for (int64_t j = 0; j < cols; j++) m = in[j] > m || in[j] != in[j] ? in[j] : m;
    for (int64_t j = 0; j < cols; j++) s += y[j] = expf(in[j] - m);
    float inv = 1.0f / s;
    for (int64_t j = 0; j < cols; j++) y[j] *= inv;
}

oc_tensor *softmax(const oc_tensor *x) { return by_rows(x, softmax_row); }

oc_tensor *softmax_plain(const oc_tensor *x) { return by_rows(x, softmax_plain_row); }

/* ---- backwards (pair them with opcore.torch.register_autograd) --------------- */

/* d silu(x) / dx = s (1 + x (1 - s)), s = sigmoid(x) */
oc_tensor *silu_backward(const oc_tensor *grad, const oc_tensor *x)
{
    check_input(x);
    OC_CHECK(grad->dtype == OC_FLOAT32 && oc_same_shape(grad, x), "grad must be float32 of x's shape");
    oc_tensor *out = oc_dst_tensor();
    const float *in = x->data, *g = grad->data;
    float *gx = out->data;
    int64_t lo, hi;
    oc_core_range(oc_numel(x), 16, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        float s = 1.0f / (1.0f + expf(-in[i]));
        gx[i] = g[i] * s * (1.0f + in[i] * (1.0f - s));
    }
    return out;
}

/* softmax's: gx = y (g - sum_j g_j y_j), row by row, from the forward's result y */
oc_tensor *softmax_backward(const oc_tensor *grad, const oc_tensor *result)
{
    check_input(result);
    OC_CHECK(grad->dtype == OC_FLOAT32 && oc_same_shape(grad, result), "grad must be float32 of result's shape");
    oc_tensor *out = oc_dst_tensor();
    int64_t cols = result->sizes[result->ndim - 1], rows = cols ? oc_numel(result) / cols : 0, lo, hi;
    oc_core_range(rows, 1, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const float *y = (const float *)result->data + r * cols, *g = (const float *)grad->data + r * cols;
        float *gx = (float *)out->data + r * cols, dot = 0;
        for (int64_t j = 0; j < cols; j++) dot += g[j] * y[j];
        for (int64_t j = 0; j < cols; j++) gx[j] = y[j] * (g[j] - dot);
    }
    return out;
}
