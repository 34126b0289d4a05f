/* SiLU and a row softmax written as plain C loops (activations.c): the
 * kernels a user writes after tutorial 2, and their backwards. All keep
 * the input's shape. */
#include <opcore/library.h>

static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }

static oc_tensor *like_second(const oc_tensor *grad, const oc_tensor *x)
{
    (void)grad;
    return oc_empty_like(x);
}

OC_LIBRARY(act_ops, m)
{
    oc_def(m, "silu(Tensor x) -> Tensor", same, "silu", .multicore = true);
    oc_def(m, "softmax(Tensor x) -> Tensor", same, "softmax", .multicore = true);
    /* the same softmax with its reductions written as `s += y[j]` loops */
    oc_def(m, "softmax_plain(Tensor x) -> Tensor", same, "softmax_plain", .multicore = true);
    /* backwards, bound by name by opcore.torch.register_autograd: `x` is the
     * forward's input, `result` its output (softmax's gradient needs only y) */
    oc_def(m, "silu_backward(Tensor grad, Tensor x) -> Tensor", like_second, "silu_backward", .multicore = true);
    oc_def(m, "softmax_backward(Tensor grad, Tensor result) -> Tensor", like_second, "softmax_backward",
           .multicore = true);
}
