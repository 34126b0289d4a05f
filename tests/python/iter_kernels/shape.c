/* The shape function of tests/python/test_iter.py's op: the broadcast shape. */
#include <opcore/library.h>

static oc_tensor *badd_shape(const oc_tensor *x, const oc_tensor *y, double alpha)
{
    (void)alpha;
    return oc_empty_broadcast(x->dtype, OC_TENSORS(x, y));
}

OC_LIBRARY(iter_ops, m) {
    oc_def(m, "badd(Tensor x, Tensor y, float alpha=1.0) -> Tensor", badd_shape, "badd");
}
