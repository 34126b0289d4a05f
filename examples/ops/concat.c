/* Concatenation of a Tensor[] along one dim. */
#include <string.h>

#include <opcore/kernel.h>

oc_tensor *concat(oc_tensor_list xs, int64_t dim)
{
    oc_tensor *out = oc_dst_tensor();
    if (dim < 0) dim += out->ndim;
    size_t elem = oc_dtype_size(out->dtype);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; d++) outer *= out->sizes[d];
    for (int64_t d = dim + 1; d < out->ndim; d++) inner *= out->sizes[d];
    int64_t row = out->sizes[dim] * inner, offset = 0; /* elements per outer index */
    for (int64_t i = 0; i < xs.count; i++) {
        const oc_tensor *x = &xs.items[i];
        OC_CHECK(oc_is_contiguous(x), "tensor %lld must be contiguous", (long long)i);
        int64_t chunk = x->sizes[dim] * inner;
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)out->data + (size_t)(o * row + offset) * elem,
                   (const char *)x->data + (size_t)(o * chunk) * elem, (size_t)chunk * elem);
        offset += chunk;
    }
    return out;
}
