/* Shape functions and registration of the nn_ops example library: each op
 * shows one part of the schema language (see README.md). Sizes derived
 * from input sizes go through oc_dim_* so they stay symbolic under
 * torch.compile(dynamic=True), torch.export and jax.export. */
#include <opcore/library.h>

/* ---- layer norm: int[], Tensor?, float default, three results ---------------- */

static void check_normalized(const oc_tensor *x, oc_int_list shape)
{
    OC_CHECK(shape.count >= 1 && shape.count <= x->ndim, "normalized_shape has %lld dims; x has %d",
             (long long)shape.count, x->ndim);
    for (int64_t i = 0; i < shape.count; i++)
        OC_CHECK(x->sizes[x->ndim - shape.count + i] == shape.values[i],
                 "normalized_shape[%lld] is %lld but x's dim %lld is %lld", (long long)i,
                 (long long)shape.values[i], (long long)(x->ndim - shape.count + i),
                 (long long)x->sizes[x->ndim - shape.count + i]);
}

static void layer_norm_shape(const oc_tensor *x, oc_int_list normalized_shape, const oc_tensor *weight,
                             const oc_tensor *bias, double eps)
{
    (void)eps;
    check_normalized(x, normalized_shape);
    if (weight) OC_CHECK(weight->ndim == normalized_shape.count, "weight must have normalized_shape");
    if (bias) OC_CHECK(bias->ndim == normalized_shape.count, "bias must have normalized_shape");
    /* mean and rstd: one value per row, shaped like x's leading dims */
    int batch = x->ndim - (int)normalized_shape.count;
    oc_set_result(0, oc_empty_like(x));
    oc_set_result(1, oc_empty(OC_FLOAT32, batch, x->sizes));
    oc_set_result(2, oc_empty(OC_FLOAT32, batch, x->sizes));
}

static void layer_norm_backward_shape(const oc_tensor *grad_out, const oc_tensor *x, const oc_tensor *mean,
                                      const oc_tensor *rstd, oc_int_list normalized_shape,
                                      const oc_tensor *weight)
{
    (void)mean, (void)rstd, (void)weight;
    check_normalized(x, normalized_shape);
    OC_CHECK(oc_same_shape(grad_out, x), "grad_out and x differ in shape");
    oc_set_result(0, oc_empty_like(x));
    oc_set_result(1, oc_empty(OC_FLOAT32, (int)normalized_shape.count, normalized_shape.values));
    oc_set_result(2, oc_empty(OC_FLOAT32, (int)normalized_shape.count, normalized_shape.values));
}

/* ---- fused SGD: Tensor(a!)[] written in place, no results ----------------------- */

static void sgd_shape(oc_tensor_list_mut params, oc_tensor_list_mut bufs, oc_tensor_list grads, double lr,
                      double momentum, double weight_decay)
{
    (void)lr, (void)momentum, (void)weight_decay;
    OC_CHECK(params.count == bufs.count && params.count == grads.count,
             "got %lld params, %lld momentum buffers and %lld grads", (long long)params.count,
             (long long)bufs.count, (long long)grads.count);
    for (int64_t i = 0; i < params.count; i++)
        OC_CHECK(oc_same_shape(&params.items[i], &grads.items[i]) && oc_same_shape(&params.items[i], &bufs.items[i]),
                 "parameter %lld: param, momentum buffer and grad shapes differ", (long long)i);
}

/* ---- concat: Tensor[] in, a size that is a sum of input sizes ------------------ */

static oc_tensor *concat_shape(oc_tensor_list xs, int64_t dim)
{
    OC_CHECK(xs.count > 0, "needs at least one tensor");
    const oc_tensor *x0 = &xs.items[0];
    int64_t d = dim < 0 ? dim + x0->ndim : dim;
    OC_CHECK(d >= 0 && d < x0->ndim, "dim %lld is out of range for %d-dim tensors", (long long)dim, x0->ndim);
    int64_t total = x0->sizes[d];
    for (int64_t i = 1; i < xs.count; i++) {
        const oc_tensor *x = &xs.items[i];
        OC_CHECK(x->ndim == x0->ndim && x->dtype == x0->dtype, "tensor %lld differs in rank or dtype", (long long)i);
        for (int k = 0; k < x0->ndim; k++)
            OC_CHECK(k == d || x->sizes[k] == x0->sizes[k], "tensor %lld: size %d is %lld, expected %lld",
                     (long long)i, k, (long long)x->sizes[k], (long long)x0->sizes[k]);
        total = oc_dim_add(total, x->sizes[d]);
    }
    int64_t sizes[OC_MAX_DIMS];
    for (int k = 0; k < x0->ndim; k++) sizes[k] = k == d ? total : x0->sizes[k];
    return oc_empty(x0->dtype, x0->ndim, sizes);
}

/* ---- avg pool: int[2] with defaults; arithmetic on sizes via oc_dim_* ------------ */

static int64_t pooled(int64_t in, int64_t k, int64_t s, int64_t p)
{
    OC_CHECK(k > 0 && s > 0 && p >= 0 && 2 * p <= k, "kernel %lld, stride %lld, padding %lld: need "
             "kernel > 0, stride > 0, 0 <= padding <= kernel/2", (long long)k, (long long)s, (long long)p);
    OC_CHECK(in + 2 * p >= k, "input size %lld (+ padding) is smaller than the kernel %lld", (long long)in, (long long)k);
    return oc_dim_add(oc_dim_div(oc_dim_sub(oc_dim_add(in, 2 * p), k), s), 1);
}

static oc_tensor *avg_pool2d_shape(const oc_tensor *x, oc_int_list kernel_size, oc_int_list stride,
                                   oc_int_list padding)
{
    OC_CHECK(x->ndim == 4, "x must be [N, C, H, W], got %d dims", x->ndim);
    int64_t oh = pooled(x->sizes[2], kernel_size.values[0], stride.values[0], padding.values[0]);
    int64_t ow = pooled(x->sizes[3], kernel_size.values[1], stride.values[1], padding.values[1]);
    return oc_empty(x->dtype, OC_SHAPE(x->sizes[0], x->sizes[1], oh, ow));
}

static oc_tensor *avg_pool2d_backward_shape(const oc_tensor *grad, const oc_tensor *x, oc_int_list kernel_size,
                                            oc_int_list stride, oc_int_list padding)
{
    (void)grad, (void)kernel_size, (void)stride, (void)padding;
    return oc_empty_like(x);
}

/* ---- linear: an optional bias (NULL for None) ---------------------------------- */

static oc_tensor *linear_shape(const oc_tensor *x, const oc_tensor *weight, const oc_tensor *bias)
{
    OC_CHECK(x->ndim == 2 && weight->ndim == 2, "x and weight must be 2-D");
    OC_CHECK(x->sizes[1] == weight->sizes[1], "x is [M, %lld] but weight is [N, %lld]", (long long)x->sizes[1],
             (long long)weight->sizes[1]);
    OC_CHECK(x->dtype == OC_FLOAT32 && weight->dtype == OC_FLOAT32, "float32 only");
    if (bias) OC_CHECK(bias->ndim == 1 && bias->sizes[0] == weight->sizes[0], "bias must be [N]");
    return oc_empty(OC_FLOAT32, OC_SHAPE(x->sizes[0], weight->sizes[0]));
}

static void linear_backward_shape(const oc_tensor *grad, const oc_tensor *x, const oc_tensor *weight,
                                  const oc_tensor *bias)
{
    (void)grad, (void)bias;
    oc_set_result(0, oc_empty_like(x));
    oc_set_result(1, oc_empty_like(weight));
    oc_set_result(2, oc_empty(OC_FLOAT32, OC_SHAPE(weight->sizes[0])));
}

/* ---- global sum: a cross-core reduction ----------------------------------------- */

static oc_tensor *global_sum_shape(const oc_tensor *x) { return oc_empty(x->dtype, 0, NULL); }

static oc_tensor *global_sum_backward_shape(const oc_tensor *grad, const oc_tensor *x)
{
    OC_CHECK(grad->ndim == 0, "grad must be a 0-dim tensor");
    return oc_empty_like(x);
}

OC_LIBRARY(nn_ops, m)
{
    oc_def(m, "layer_norm(Tensor x, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
              "float eps=1e-05) -> (Tensor out, Tensor mean, Tensor rstd)",
           layer_norm_shape, "layer_norm", .multicore = true);
    oc_def(m, "layer_norm_backward(Tensor grad_out, Tensor x, Tensor mean, Tensor rstd, int[] normalized_shape, "
              "Tensor? weight=None) -> (Tensor grad_x, Tensor grad_weight, Tensor grad_bias)",
           layer_norm_backward_shape, "layer_norm_backward", .multicore = true);
    oc_def(m, "sgd_momentum_(Tensor(a!)[] params, Tensor(b!)[] momentum_bufs, Tensor[] grads, float lr, "
              "float momentum=0.0, float weight_decay=0.0) -> ()",
           sgd_shape, "sgd_momentum_");
    /* concat copies each input with oc_copy_, which takes any strides: the
     * inputs need no dense copies */
    oc_def(m, "concat(Tensor[] xs, int dim=0) -> Tensor", concat_shape, "concat", .strided = true);
    oc_def(m, "avg_pool2d(Tensor x, int[2] kernel_size, int[2] stride=1, int[2] padding=0) -> Tensor",
           avg_pool2d_shape, "avg_pool2d", .multicore = true);
    oc_def(m, "avg_pool2d_backward(Tensor grad, Tensor x, int[2] kernel_size, int[2] stride=1, "
              "int[2] padding=0) -> Tensor",
           avg_pool2d_backward_shape, "avg_pool2d_backward", .multicore = true);
    oc_def(m, "linear(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor", linear_shape, "linear",
           .multicore = true);
    oc_def(m, "linear_backward(Tensor grad, Tensor x, Tensor weight, Tensor? bias=None) -> "
              "(Tensor grad_x, Tensor grad_weight, Tensor grad_bias)",
           linear_backward_shape, "linear_backward", .multicore = true);
    oc_def(m, "global_sum(Tensor x) -> Tensor", global_sum_shape, "global_sum", .multicore = true,
           .strided = true); /* its kernel walks a non-contiguous x with oc_flat_ptr */
    oc_def(m, "global_sum_backward(Tensor grad, Tensor x) -> Tensor", global_sum_backward_shape,
           "global_sum_backward", .multicore = true);
}
