/* Concatenation of a Tensor[] along one dim: each input is copied into its
 * slice of the output (a view: the output's strides, a shifted start), so
 * inputs of any strides work. */
#include <opcore/kernel.h>

oc_tensor *concat(oc_tensor_list xs, int64_t dim)
{
    oc_tensor *out = oc_dst_tensor();
    if (dim < 0) dim += out->ndim;
    oc_tensor slice = *out;
    size_t elem = oc_dtype_size(out->dtype);
    for (int64_t i = 0; i < xs.count; i++) {
        slice.sizes[dim] = xs.items[i].sizes[dim];
        oc_copy_(&slice, &xs.items[i]);
        slice.data = (char *)slice.data + (size_t)(slice.sizes[dim] * out->strides[dim]) * elem;
    }
    return out;
}
