/* Shape functions and registration for the seeds' ReLU (host side).
 * Shared by all four kernel variants in this directory. */
#include <opcore/library.h>

/* The output has the input's shape and dtype. */
static oc_tensor *relu_fwd_shape(const oc_tensor *x) { return oc_empty_like(x); }

static oc_tensor *relu_bwd_shape(const oc_tensor *grad, const oc_tensor *x)
{
    (void)grad;
    return oc_empty_like(x);
}

OC_LIBRARY(my_ops, m)
{
    oc_def(m, "relu_forward(Tensor x) -> Tensor", relu_fwd_shape, "relu_forward");
    oc_def(m, "relu_backward(Tensor grad, Tensor x) -> Tensor", relu_bwd_shape, "relu_backward");
}
