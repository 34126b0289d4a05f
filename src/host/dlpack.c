/* DLPack <-> oc_tensor. */
#include <string.h>

#include "opcore/dlpack.h"

/* kDLBool arrived in DLPack 0.8; Debian ships 0.6. Same code (6) either way. */
#if DLPACK_VERSION < 80
#define kDLBool 6U
#endif

/* Each dtype's DLPack type code and bits, from OC_DTYPE_MAP. */
#define OC_DLPACK_ROW_(NAME, name, code, bytes, kind, xla, dlpack) {kDL##dlpack, 8 * (bytes), OC_##NAME},
static const struct {
    uint8_t code, bits;
    oc_dtype dtype;
} dtype_map[] = {OC_DTYPE_MAP(OC_DLPACK_ROW_)};
#define NUM_DTYPES (int)(sizeof dtype_map / sizeof dtype_map[0])

oc_status oc_tensor_from_dlpack(const DLTensor *dl, oc_tensor *out)
{
    if (!dl || !out) return oc_set_error(OC_EINVAL, "oc_tensor_from_dlpack: arguments are required");
    if (dl->device.device_type != kDLCPU)
        return oc_set_error(OC_EINVAL, "oc_tensor_from_dlpack: device type %d is not the CPU (%d)",
                            (int)dl->device.device_type, (int)kDLCPU);
    if (dl->dtype.lanes != 1)
        return oc_set_error(OC_EINVAL, "oc_tensor_from_dlpack: vector dtypes (%d lanes) are not supported",
                            dl->dtype.lanes);
    int i = 0;
    while (i < NUM_DTYPES && !(dtype_map[i].code == dl->dtype.code && dtype_map[i].bits == dl->dtype.bits)) i++;
    if (i == NUM_DTYPES)
        return oc_set_error(OC_EINVAL, "oc_tensor_from_dlpack: dtype code %d with %d bits has no opcore dtype",
                            dl->dtype.code, dl->dtype.bits);
    if (dl->ndim < 0 || dl->ndim > OC_MAX_DIMS)
        return oc_set_error(OC_EINVAL, "oc_tensor_from_dlpack: %d dims (0 to %d allowed)", dl->ndim, OC_MAX_DIMS);
    char *data = (char *)dl->data + dl->byte_offset;
    if (dl->strides)
        return oc_tensor_init_strided(out, data, dtype_map[i].dtype, dl->ndim, dl->shape, dl->strides);
    return oc_tensor_init(out, data, dtype_map[i].dtype, dl->ndim, dl->shape);
}

oc_status oc_tensor_to_dlpack(const oc_tensor *t, DLTensor *out, int64_t *shape, int64_t *strides)
{
    if (!t || !out || (t->ndim > 0 && (!shape || !strides)))
        return oc_set_error(OC_EINVAL, "oc_tensor_to_dlpack: arguments are required");
    int i = 0;
    while (i < NUM_DTYPES && dtype_map[i].dtype != t->dtype) i++;
    if (i == NUM_DTYPES) return oc_set_error(OC_EINVAL, "oc_tensor_to_dlpack: invalid dtype %d", (int)t->dtype);
    memset(out, 0, sizeof *out);
    out->data = t->data;
    out->device.device_type = kDLCPU;
    out->ndim = t->ndim;
    out->dtype.code = dtype_map[i].code;
    out->dtype.bits = dtype_map[i].bits;
    out->dtype.lanes = 1;
    for (int d = 0; d < t->ndim; d++) {
        shape[d] = t->sizes[d];
        strides[d] = t->strides[d];
    }
    out->shape = shape;
    out->strides = strides;
    return OC_OK;
}
