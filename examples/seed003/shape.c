/* examples/seed003/shape.c — shape function and registration of add_ops.
 *
 * The output has the inputs' shape and dtype. oc_add on meta tensors
 * computes exactly that, and refuses inputs whose shapes or dtypes differ
 * (no broadcasting), with a message naming the operands.
 */
#include <opcore/library.h>

static oc_tensor *add_shape(const oc_tensor *a, const oc_tensor *b)
{
    return oc_add(a, b, 1.0);
}

OC_LIBRARY(add_ops, m)
{
    oc_def(m, "tensor_add(Tensor a, Tensor b) -> Tensor", add_shape, "tensor_add");
}
