/* SiLU and a row softmax written as plain C loops (activations.c): the
 * kernels a user writes after tutorial 2. Both keep the input's shape. */
#include <opcore/library.h>

static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }

OC_LIBRARY(act_ops, m)
{
    oc_def(m, "silu(Tensor x) -> Tensor", same, "silu", .multicore = true);
    oc_def(m, "softmax(Tensor x) -> Tensor", same, "softmax", .multicore = true);
    /* the same softmax with its reductions written as `s += y[j]` loops */
    oc_def(m, "softmax_plain(Tensor x) -> Tensor", same, "softmax_plain", .multicore = true);
}
