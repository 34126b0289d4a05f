/* The ops' schemas (extension-cpp's TORCH_LIBRARY block, in opcore) and
 * their shape functions: results of a's shape and dtype. */
#include <opcore/library.h>

static oc_tensor *like_a(const oc_tensor *a, const oc_tensor *b)
{
    OC_CHECK(oc_same_shape(a, b), "a and b differ in shape");
    return oc_empty_like(a);
}

static oc_tensor *muladd_shape(const oc_tensor *a, const oc_tensor *b, double c)
{
    (void)c;
    return like_a(a, b);
}

static void add_out_shape(const oc_tensor *a, const oc_tensor *b, oc_tensor *out)
{
    OC_CHECK(oc_same_shape(a, b) && oc_same_shape(a, out), "a, b and out differ in shape");
}

OC_LIBRARY(extension_cpp, m)
{
    oc_def(m, "mymuladd(Tensor a, Tensor b, float c) -> Tensor", muladd_shape, "mymuladd");
    oc_def(m, "mymul(Tensor a, Tensor b) -> Tensor", like_a, "mymul");
    oc_def(m, "myadd_out(Tensor a, Tensor b, Tensor(a!) out) -> ()", add_out_shape, "myadd_out");
}
