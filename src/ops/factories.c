/* src/ops/factories.c — tensors from nothing: empty, zeros, ones, full, eye
 * and their _like forms. All allocate through oc__tensor_new, so inside a
 * shape function they return meta tensors (and skip filling), and inside a
 * kernel the result is a temporary of the running call.
 */
#include "ops/ops_internal.h"

/* Allocate and, when there is data, fill with value (unless fill is false). */
static oc_tensor *oc__make(const char *fn, oc_dtype dtype, int ndim, const int64_t *sizes,
                           bool fill, double value)
{
    if (!oc_dtype_is_valid(dtype)) {
        oc__raise(OC_EINVAL, "%s: argument 'dtype' is %d, expected a valid oc_dtype", fn,
                  (int)dtype);
        return NULL;
    }
    oc_tensor *t = oc__tensor_new(dtype, ndim, sizes);
    if (t && fill && !oc_is_meta(t))
        oc__fill_raw(t, value);
    return t;
}

oc_tensor *oc_empty(oc_dtype dtype, int ndim, const int64_t *sizes)
{
    return oc__make("oc_empty", dtype, ndim, sizes, false, 0);
}

oc_tensor *oc_zeros(oc_dtype dtype, int ndim, const int64_t *sizes)
{
    return oc__make("oc_zeros", dtype, ndim, sizes, true, 0);
}

oc_tensor *oc_ones(oc_dtype dtype, int ndim, const int64_t *sizes)
{
    return oc__make("oc_ones", dtype, ndim, sizes, true, 1);
}

oc_tensor *oc_full(oc_dtype dtype, int ndim, const int64_t *sizes, double value)
{
    return oc__make("oc_full", dtype, ndim, sizes, true, value);
}

oc_tensor *oc_eye(oc_dtype dtype, int64_t rows, int64_t cols)
{
    if (rows < 0 || cols < 0) {
        oc__raise(OC_EINVAL, "oc_eye: arguments 'rows', 'cols' are %lld, %lld, expected >= 0",
                  (long long)rows, (long long)cols);
        return NULL;
    }
    const int64_t sizes[2] = {rows, cols};
    oc_tensor *t = oc__make("oc_eye", dtype, 2, sizes, true, 0);
    if (!t || oc_is_meta(t))
        return t;
    const int64_t n = rows < cols ? rows : cols;
    const int64_t es = (int64_t)oc_dtype_size(dtype);
    for (int64_t i = 0; i < n; i++)
        oc__store_from_double((char *)t->data + (i * t->strides[0] + i * t->strides[1]) * es,
                              dtype, 1.0);
    return t;
}

/* ---- _like: shape and dtype of t, contiguous ---------------------------- */

static oc_tensor *oc__like(const char *fn, const oc_tensor *t, bool fill, double value)
{
    if (!oc__check_tensor_arg(t, fn, false, "t", false))
        return NULL;
    return oc__make(fn, t->dtype, t->ndim, t->sizes, fill, value);
}

oc_tensor *oc_empty_like(const oc_tensor *t) { return oc__like("oc_empty_like", t, false, 0); }
oc_tensor *oc_zeros_like(const oc_tensor *t) { return oc__like("oc_zeros_like", t, true, 0); }
oc_tensor *oc_ones_like(const oc_tensor *t) { return oc__like("oc_ones_like", t, true, 1); }

oc_tensor *oc_full_like(const oc_tensor *t, double value)
{
    return oc__like("oc_full_like", t, true, value);
}
