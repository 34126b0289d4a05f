/* Shape functions and registration of the `tiles` example library (the
 * NKI samples written with opcore/tile.h). Every op is multicore. */
#include <opcore/library.h>

static void float_input(const oc_tensor *t, const char *name, bool bf16_ok)
{
    OC_CHECK(t->dtype == OC_FLOAT32 || (bf16_ok && t->dtype == OC_BFLOAT16), "%s must be float32%s, got %s",
             name, bf16_ok ? " or bfloat16" : "", oc_dtype_name(t->dtype));
}

static void last_dim(const oc_tensor *x, const oc_tensor *w, const char *name)
{
    float_input(w, name, false);
    OC_CHECK(x->ndim >= 1 && w->ndim == 1 && w->sizes[0] == x->sizes[x->ndim - 1],
             "%s must be 1-D with x's last dim (%lld)", name, x->ndim ? (long long)x->sizes[x->ndim - 1] : 0LL);
}

static oc_tensor *add_shape(const oc_tensor *a, const oc_tensor *b)
{
    float_input(a, "a", false);
    OC_CHECK(a->ndim >= 1, "a must have at least one dim");
    oc_tensor *out = oc_add(a, b, 1.0);
    /* one program per 64-row tile (add.c's TR) of each [rows, cols] matrix */
    int64_t cols = out->sizes[out->ndim - 1], rows = out->ndim >= 2 ? out->sizes[out->ndim - 2] : 1;
    int64_t mats = cols && rows ? oc_numel(out) / (rows * cols) : 0;
    OC_SET_GRID(mats * ((rows + 63) / 64) > 0 ? mats * ((rows + 63) / 64) : 1);
    return out;
}

static oc_tensor *matmul_shape(const oc_tensor *a, const oc_tensor *b)
{
    float_input(a, "a", true);
    OC_CHECK(a->ndim == 2 && b->ndim == 2, "a and b must be 2-D, got %d-D and %d-D", a->ndim, b->ndim);
    OC_CHECK(b->dtype == a->dtype, "a is %s but b is %s", oc_dtype_name(a->dtype), oc_dtype_name(b->dtype));
    OC_CHECK(a->sizes[1] == b->sizes[0], "a's columns (%lld) must equal b's rows (%lld)",
             (long long)a->sizes[1], (long long)b->sizes[0]);
    return oc_empty(a->dtype, 2, (int64_t[]){a->sizes[0], b->sizes[1]});
}

static void matmul_backward_shape(const oc_tensor *grad, const oc_tensor *a, const oc_tensor *b)
{
    oc_tensor_free(matmul_shape(a, b)); /* a and b checked as the forward checks them */
    OC_CHECK(grad->dtype == a->dtype && grad->ndim == 2 && grad->sizes[0] == a->sizes[0] &&
             grad->sizes[1] == b->sizes[1], "grad must be a %s tensor of a x b's shape "
             "[%lld, %lld]", oc_dtype_name(a->dtype), (long long)a->sizes[0],
             (long long)b->sizes[1]);
    oc_set_result(0, oc_empty_like(a));
    oc_set_result(1, oc_empty_like(b));
}

static oc_tensor *rmsnorm_shape(const oc_tensor *x, const oc_tensor *w, double eps)
{
    (void)eps;
    float_input(x, "x", false);
    last_dim(x, w, "w");
    return oc_empty_like(x);
}

static void layer_norm_shape(const oc_tensor *x, const oc_tensor *w, const oc_tensor *b, double eps)
{
    (void)eps;
    float_input(x, "x", false);
    last_dim(x, w, "w");
    last_dim(x, b, "b");
    oc_set_result(0, oc_empty_like(x));
    oc_set_result(1, oc_empty(OC_FLOAT32, x->ndim - 1, x->sizes));
    oc_set_result(2, oc_empty(OC_FLOAT32, x->ndim - 1, x->sizes));
}

static void layer_norm_backward_shape(const oc_tensor *grad_out, const oc_tensor *x, const oc_tensor *mean,
                                      const oc_tensor *rstd, const oc_tensor *w)
{
    (void)mean, (void)rstd;
    OC_CHECK(oc_same_shape(grad_out, x), "grad_out and x differ in shape");
    oc_set_result(0, oc_empty_like(x));
    oc_set_result(1, oc_empty_like(w));
    oc_set_result(2, oc_empty_like(w));
}

static oc_tensor *softmax_shape(const oc_tensor *x)
{
    float_input(x, "x", false);
    OC_CHECK(x->ndim >= 1, "x must have at least one dim");
    return oc_empty_like(x);
}

static oc_tensor *softmax_backward_shape(const oc_tensor *grad, const oc_tensor *result)
{
    float_input(result, "result", false);
    OC_CHECK(result->ndim >= 1, "result must have at least one dim");
    OC_CHECK(grad->dtype == OC_FLOAT32 && oc_same_shape(grad, result),
             "grad must be float32 with result's shape");
    return oc_empty_like(result);
}

static oc_tensor *flash_attention_shape(const oc_tensor *q, const oc_tensor *k, const oc_tensor *v, bool causal)
{
    (void)causal;
    float_input(q, "q", false);
    OC_CHECK(q->ndim == 4, "q must be [b, h, s, d], got %d dims", q->ndim);
    OC_CHECK(oc_same_shape(q, k) && oc_same_shape(q, v) && k->dtype == q->dtype && v->dtype == q->dtype,
             "q, k and v must have the same shape and dtype");
    /* one program per 256-row query block (flash_attention.c's BR) and head */
    OC_SET_GRID(q->sizes[2] > 0 ? (q->sizes[2] + 255) / 256 : 1, q->sizes[0] * q->sizes[1] > 0 ? q->sizes[0] * q->sizes[1] : 1);
    return oc_empty_like(q);
}

OC_LIBRARY(tiles, m)
{
    oc_def(m, "tensor_add(Tensor a, Tensor b) -> Tensor", add_shape, "tensor_add");
    oc_def(m, "matmul(Tensor a, Tensor b) -> Tensor", matmul_shape, "matmul");
    oc_def(m, "matmul_backward(Tensor grad, Tensor a, Tensor b) -> (Tensor grad_a, Tensor grad_b)",
           matmul_backward_shape, "matmul_backward");
    oc_def(m, "rmsnorm(Tensor x, Tensor w, float eps) -> Tensor", rmsnorm_shape, "rmsnorm");
    oc_def(m, "layer_norm(Tensor x, Tensor w, Tensor b, float eps) -> (Tensor out, Tensor mean, Tensor rstd)",
           layer_norm_shape, "layer_norm");
    oc_def(m, "layer_norm_backward(Tensor grad_out, Tensor x, Tensor mean, Tensor rstd, Tensor w) -> "
              "(Tensor grad_x, Tensor grad_w, Tensor grad_b)", layer_norm_backward_shape, "layer_norm_backward");
    oc_def(m, "softmax(Tensor x) -> Tensor", softmax_shape, "softmax");
    oc_def(m, "softmax_backward(Tensor grad, Tensor result) -> Tensor", softmax_backward_shape,
           "softmax_backward");
    oc_def(m, "flash_attention(Tensor q, Tensor k, Tensor v, bool causal) -> Tensor", flash_attention_shape,
           "flash_attention");
}
