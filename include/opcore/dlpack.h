/* opcore/dlpack.h — DLPack interop: DLTensor <-> oc_tensor views.
 *
 * Both are plain structs describing memory owned by someone else, so the
 * conversion is a field-by-field copy: no data moves. Only CPU tensors of
 * opcore's ten dtypes convert; anything else is OC_EINVAL with a message.
 */
#ifndef OPCORE_DLPACK_H
#define OPCORE_DLPACK_H

#include <dlpack/dlpack.h>

#include "status.h"
#include "tensor.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* View a DLTensor as an oc_tensor (NULL strides mean row-major). */
OC_API oc_status oc_tensor_from_dlpack(const DLTensor *dl, oc_tensor *out);

/* Describe an oc_tensor as a DLTensor. `shape` and `strides` must hold
 * t->ndim entries each; they back out->shape and out->strides. */
OC_API oc_status oc_tensor_to_dlpack(const oc_tensor *t, DLTensor *out, int64_t *shape, int64_t *strides);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_DLPACK_H */
