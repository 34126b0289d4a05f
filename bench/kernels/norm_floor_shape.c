/* Shapes of bench/kernels/norm_floor.c's ops: x float32 rows of a multiple
 * of 64 floats (w, where taken, float32 [row length]), any strides; each
 * returns a fresh tensor like x. */
#include <opcore/library.h>

static oc_tensor *like_x(const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32, "x must be float32, got %s", oc_dtype_name(x->dtype));
    OC_CHECK(x->ndim >= 1, "x must have at least 1 dim");
    int64_t d = x->sizes[x->ndim - 1];
    OC_CHECK((d & 63) == 0, "x's rows must be a multiple of 64 floats, got %lld", (long long)d);
    return oc_empty_like(x);
}

static oc_tensor *scale_shape(const oc_tensor *x, const oc_tensor *w)
{
    oc_tensor *out = like_x(x);
    int64_t d = x->sizes[x->ndim - 1];
    OC_CHECK(w->dtype == OC_FLOAT32 && w->ndim == 1 && w->sizes[0] == d,
             "w must be float32 [%lld], got %s of %d dims", (long long)d, oc_dtype_name(w->dtype),
             (int)w->ndim);
    return out;
}

static oc_tensor *one_pass_shape(const oc_tensor *x, const oc_tensor *w, double eps)
{
    (void)eps;
    return scale_shape(x, w);
}

OC_LIBRARY(norm_floor, m)
{
    oc_def(m, "one_pass(Tensor x, Tensor w, float eps) -> Tensor", one_pass_shape, "one_pass");
    oc_def(m, "scale(Tensor x, Tensor w) -> Tensor", scale_shape, "scale");
    oc_def(m, "exp_rows(Tensor x) -> Tensor", like_x, "exp_rows");
    oc_def(m, "copy(Tensor x) -> Tensor", like_x, "copy");
}
