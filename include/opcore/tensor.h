/* opcore/tensor.h — the tensor: a plain struct, like DLPack's DLTensor.
 *
 * A tensor is a view: a data pointer, a dtype, a shape and strides (counted
 * in elements, any layout, negative or zero strides included). opcore never
 * hides fields behind accessors; kernels may read every field directly.
 *
 * A *meta* tensor has a shape and a dtype but no data (data == NULL, flag
 * OC_TENSOR_META). Shape functions receive and return meta tensors.
 */
#ifndef OPCORE_TENSOR_H
#define OPCORE_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "dtype.h"
#include "status.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most dimensions a tensor may have (the seeds allowed 8, each <= 65535;
 * opcore allows 16 dims of any int64 size). */
#define OC_MAX_DIMS 16

/* Tensor flags. */
enum {
    OC_TENSOR_META = 1u << 0,     /* shape and dtype only: no data */
    OC_TENSOR_READONLY = 1u << 1, /* an input: writing through it is an error */
    OC_TENSOR_OWNED = 1u << 2     /* created by opcore; oc_tensor_free frees it */
};

/* Coherence policy for streaming accessors (seeds' API reference). */
typedef enum oc_coherence {
    OC_COHERENT = 0,           /* potentially incoherent use is an error */
    OC_INCOHERENT_VERBOSE = 1, /* ... is allowed with a warning on stderr */
    OC_INCOHERENT_QUIET = 2    /* ... is allowed silently */
} oc_coherence;

typedef struct oc_tensor {
    void *data;                    /* first element; NULL for meta tensors */
    oc_dtype dtype;                /* element type */
    int32_t ndim;                  /* 0 (a scalar) .. OC_MAX_DIMS */
    int64_t sizes[OC_MAX_DIMS];    /* extent of each dim, >= 0 */
    int64_t strides[OC_MAX_DIMS];  /* step of each dim, in elements */
    uint32_t flags;                /* OC_TENSOR_* */
    oc_coherence coherence;        /* policy for streams on this tensor */
} oc_tensor;

/* Number of elements (1 for a 0-dim tensor). */
OC_API int64_t oc_numel(const oc_tensor *t);

/* Bytes the elements take (numel * element size). */
OC_API int64_t oc_nbytes(const oc_tensor *t);

/* True if the elements are dense in row-major order. */
OC_API bool oc_is_contiguous(const oc_tensor *t);

/* True if the elements fill numel slots exactly, in some order of the dims
 * (row-major, a transpose, any permutation of a dense layout). */
OC_API bool oc_is_dense(const oc_tensor *t);

/* True if the tensor carries no data (a meta tensor). */
static inline bool oc_is_meta(const oc_tensor *t) { return (t->flags & OC_TENSOR_META) != 0; }

/* Size of dim `d`; negative d counts from the end as in Python. */
OC_API int64_t oc_size(const oc_tensor *t, int d);

/* Fill `t` as a view of `data` with the given shape and row-major strides.
 * `data` may be NULL for a meta tensor. Returns OC_EINVAL on a bad shape. */
OC_API oc_status oc_tensor_init(oc_tensor *t, void *data, oc_dtype dtype, int ndim,
                                const int64_t *sizes);

/* Same, with explicit strides (in elements). */
OC_API oc_status oc_tensor_init_strided(oc_tensor *t, void *data, oc_dtype dtype, int ndim,
                                        const int64_t *sizes, const int64_t *strides);

/* Row-major strides for `sizes`. */
OC_API void oc_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides);

/* True if a and b have the same ndim and sizes. */
OC_API bool oc_same_shape(const oc_tensor *a, const oc_tensor *b);

/* Format the shape as "[2, 3]" into buf (always NUL-terminated). */
OC_API const char *oc_shape_str(const oc_tensor *t, char *buf, size_t len);

/* Element pointer for the flattened (row-major) index `i`, for any strides. */
OC_API void *oc_flat_ptr(const oc_tensor *t, int64_t i);

/* Free a tensor created by an opcore factory (oc_empty, oc_zeros, ...).
 * Inside a kernel this is optional: temporaries are freed after the call. */
OC_API void oc_tensor_free(oc_tensor *t);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_TENSOR_H */
