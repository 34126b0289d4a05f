/* Layer norm over the last dims: three results (out, mean, rstd) forward,
 * three gradients backward. Multicore: cores split the rows; the weight
 * and bias gradients, which sum over rows, are split by column instead so
 * no core needs another's partial sums. */
#include <math.h>

#include <opcore/kernel.h>

static int64_t prod(oc_int_list shape)
{
    int64_t n = 1;
    for (int64_t i = 0; i < shape.count; i++) n *= shape.values[i];
    return n;
}

static void check_float32(const oc_tensor *t, const char *name)
{
    OC_CHECK(t->dtype == OC_FLOAT32, "%s must be float32, got %s", name, oc_dtype_name(t->dtype));
    OC_CHECK(oc_is_contiguous(t), "%s must be contiguous", name);
}

void layer_norm(const oc_tensor *x, oc_int_list normalized_shape, const oc_tensor *weight,
                const oc_tensor *bias, double eps)
{
    check_float32(x, "x");
    if (weight) check_float32(weight, "weight");
    if (bias) check_float32(bias, "bias");
    oc_tensor *out = oc_dst_tensor_at(0), *mean = oc_dst_tensor_at(1), *rstd = oc_dst_tensor_at(2);
    int64_t cols = prod(normalized_shape), rows = cols ? oc_numel(x) / cols : 0, lo, hi;
    const float *xd = x->data, *w = weight ? weight->data : NULL, *b = bias ? bias->data : NULL;
    float *od = out->data, *md = mean->data, *rd = rstd->data;
    oc_core_range(rows, 1, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const float *xr = xd + r * cols;
        double sum = 0, var = 0;
        for (int64_t j = 0; j < cols; j++) sum += xr[j];
        double mu = sum / (double)cols;
        for (int64_t j = 0; j < cols; j++) var += (xr[j] - mu) * (xr[j] - mu);
        double rs = 1.0 / sqrt(var / (double)cols + eps);
        float *orow = od + r * cols;
        for (int64_t j = 0; j < cols; j++) {
            float y = (float)((xr[j] - mu) * rs);
            if (w) y *= w[j];
            if (b) y += b[j];
            orow[j] = y;
        }
        md[r] = (float)mu;
        rd[r] = (float)rs;
    }
}

void layer_norm_backward(const oc_tensor *grad_out, const oc_tensor *x, const oc_tensor *mean,
                         const oc_tensor *rstd, oc_int_list normalized_shape, const oc_tensor *weight)
{
    check_float32(grad_out, "grad_out");
    check_float32(x, "x");
    oc_tensor *gx = oc_dst_tensor_at(0), *gw = oc_dst_tensor_at(1), *gb = oc_dst_tensor_at(2);
    int64_t cols = prod(normalized_shape), rows = cols ? oc_numel(x) / cols : 0, lo, hi;
    const float *g = grad_out->data, *xd = x->data, *md = mean->data, *rd = rstd->data;
    const float *w = weight ? weight->data : NULL;
    float *gxd = gx->data, *gwd = gw->data, *gbd = gb->data;

    oc_core_range(rows, 1, &lo, &hi); /* grad_x: by row */
    for (int64_t r = lo; r < hi; r++) {
        const float *gr = g + r * cols, *xr = xd + r * cols;
        double mu = md[r], rs = rd[r], sum_dy = 0, sum_dy_xhat = 0;
        for (int64_t j = 0; j < cols; j++) {
            double dy = w ? (double)gr[j] * w[j] : gr[j];
            sum_dy += dy;
            sum_dy_xhat += dy * (xr[j] - mu) * rs;
        }
        double a = sum_dy / (double)cols, c = sum_dy_xhat / (double)cols;
        for (int64_t j = 0; j < cols; j++) {
            double dy = w ? (double)gr[j] * w[j] : gr[j];
            gxd[r * cols + j] = (float)(rs * (dy - a - (xr[j] - mu) * rs * c));
        }
    }
    oc_core_range(cols, 16, &lo, &hi); /* grad_weight, grad_bias: by column */
    for (int64_t j = lo; j < hi; j++) {
        double sw = 0, sb = 0;
        for (int64_t r = 0; r < rows; r++) {
            double gv = g[r * cols + j];
            sw += gv * (xd[r * cols + j] - md[r]) * rd[r];
            sb += gv;
        }
        gwd[j] = (float)sw;
        gbd[j] = (float)sb;
    }
}
