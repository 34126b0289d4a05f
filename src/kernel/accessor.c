/* Element-wise accessors: checked once when made, free to index after. */
#include <string.h>

#include "core/internal.h"
#include "kernel/kernel_internal.h"
#include "opcore/kernel.h"

static void make(const oc_tensor *t, oc_dtype dtype, int ndim, bool write, oc_acc *a)
{
    char shape[128];
    memset(a, 0, sizeof *a);
    if (!t) { oc__raise(OC_EINVAL, "oc_accessor: tensor is NULL"); return; }
    if (t->dtype != dtype)
        oc__raise(OC_EINVAL, "oc_accessor: tensor is %s, accessor asks for %s", oc_dtype_name(t->dtype),
                  oc_dtype_name(dtype));
    if (t->ndim != ndim)
        oc__raise(OC_EINVAL, "oc_accessor: tensor has %d dims %s, accessor asks for %d", t->ndim,
                  oc_shape_str(t, shape, sizeof shape), ndim);
    if (!t->data && oc_numel(t) > 0)
        oc__raise(OC_EMETA, "oc_accessor: tensor %s has no data (a meta tensor: shape functions cannot "
                  "read data)", oc_shape_str(t, shape, sizeof shape));
    if (write && (t->flags & OC_TENSOR_READONLY))
        oc__raise(OC_EINVAL, "oc_accessor: tensor is a read-only input");
    oc_core *c = oc__core_current();
    if (c && c->ctx.mode == OC_MODE_KERNEL) oc__coherence_check(c, t, write, NULL, "element-wise accessor");
    a->data = t->data;
    a->ndim = t->ndim;
    a->elem_size = (int32_t)oc_dtype_size(t->dtype);
    memcpy(a->sizes, t->sizes, sizeof a->sizes);
    memcpy(a->strides, t->strides, sizeof a->strides);
}

oc_acc oc_accessor_rw(oc_tensor *t, oc_dtype dtype, int ndim)
{
    oc_acc a;
    make(t, dtype, ndim, true, &a);
    return a;
}

oc_cacc oc_accessor_ro(const oc_tensor *t, oc_dtype dtype, int ndim)
{
    oc_acc a;
    oc_cacc r;
    make(t, dtype, ndim, false, &a);
    _Static_assert(sizeof(oc_acc) == sizeof(oc_cacc), "accessor layouts must match");
    memcpy(&r, &a, sizeof r);
    return r;
}

void oc_accessor_out_of_bounds(int ndim, int dim, int64_t index, int64_t size)
{
    if (dim < 0)
        oc__raise(OC_EINVAL, "element-wise accessor: %lld indices given for a %d-dim tensor",
                  (long long)index, ndim);
    else
        oc__raise(OC_EINVAL, "element-wise accessor: index %lld is out of bounds for dim %d of size %lld",
                  (long long)index, dim, (long long)size);
}
