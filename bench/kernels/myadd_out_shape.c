/* myadd_out's schema, as extension-cpp's TORCH_LIBRARY block defines it. */
#include <opcore/library.h>

static void add_out_shape(const oc_tensor *a, const oc_tensor *b, oc_tensor *out)
{
    OC_CHECK(oc_same_shape(a, b) && oc_same_shape(a, out), "a, b and out differ in shape");
}

OC_LIBRARY(bench_inplace, m)
{
    oc_def(m, "myadd_out(Tensor a, Tensor b, Tensor(a!) out) -> ()", add_out_shape, "myadd_out");
}
