/* Registration of the complex test kernels (kernels.c). */
#include <opcore/library.h>

static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }

static oc_tensor *broadcast_c64(const oc_tensor *a, const oc_tensor *b)
{
    return oc_empty_broadcast(OC_COMPLEX64, OC_TENSORS(a, b));
}

OC_LIBRARY(cplx_kinds, m)
{
    oc_def(m, "conj_acc(Tensor x) -> Tensor", same, "conj_acc");
    oc_def(m, "conj_stream(Tensor x) -> Tensor", same, "conj_stream");
    oc_def(m, "mul_iter(Tensor a, Tensor b) -> Tensor", broadcast_c64, "mul_iter");
    oc_def(m, "twice_f32(Tensor x) -> Tensor", same, "twice_f32");
}
