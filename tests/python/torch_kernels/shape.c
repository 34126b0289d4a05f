/* Test ops for tests/python/test_torch.py (library oc_torch_test). */
#include <opcore/check.h>
#include <opcore/library.h>

static oc_tensor *same_shape(const oc_tensor *x) { return oc_empty_like(x); }

static oc_tensor *scale_shape(const oc_tensor *x, double alpha, bool neg)
{
    (void)alpha;
    (void)neg;
    return oc_empty_like(x);
}

static oc_tensor *add_shape(const oc_tensor *a, const oc_tensor *b)
{
    OC_CHECK(oc_same_shape(a, b), "add: a and b must have one shape");
    return oc_empty_like(a);
}

/* Fails for anything but a 1-D tensor. */
static oc_tensor *only_1d_shape(const oc_tensor *x)
{
    OC_CHECK(x->ndim == 1, "only_1d takes a 1-D tensor, got %d dims", (int)x->ndim);
    return oc_empty_like(x);
}

static oc_tensor *sum_rows_shape(const oc_tensor *x)
{
    OC_CHECK(x->ndim == 2, "sum_rows takes a 2-D tensor");
    int64_t sizes[1] = {x->sizes[0]};
    return oc_empty(OC_FLOAT64, 1, sizes);
}

OC_LIBRARY(oc_torch_test, m)
{
    oc_def(m, "fault(Tensor x) -> Tensor", same_shape, "fault");
    oc_def(m, "hello(Tensor x) -> Tensor", same_shape, "hello");
    oc_def(m, "scale(Tensor x, float alpha=2.0, *, bool neg=False) -> Tensor", scale_shape, "scale");
    oc_def(m, "add(Tensor a, Tensor b) -> Tensor", add_shape, "add");
    oc_def(m, "only_1d(Tensor x) -> Tensor", only_1d_shape, "only_1d");
    oc_def(m, "sum_rows(Tensor x) -> Tensor", sum_rows_shape, "sum_rows");
}
