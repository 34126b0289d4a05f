/* opcore/args.h — the C types of an op's list arguments.
 *
 * A kernel or shape function receives each schema argument as a natural C
 * value. Lists arrive as small structs passed by value: a count and a
 * pointer to the items, valid for the duration of the call.
 *
 *     schema type     C type                     None (for T?)
 *     Tensor          const oc_tensor *
 *     Tensor?         const oc_tensor *          NULL
 *     Tensor(a!)      oc_tensor *                (written in place)
 *     Tensor[]        oc_tensor_list
 *     Tensor(a!)[]    oc_tensor_list_mut         (each item written in place)
 *     int, SymInt     int64_t
 *     int[], int[N]   oc_int_list                (int[N]: count == N)
 *     float           double
 *     float[]         oc_float_list
 *     bool            bool
 *     Scalar          oc_scalar
 *     str             const char *               NULL
 *     ScalarType      oc_dtype
 *     other T?        const T *                  NULL   (int? -> const int64_t *)
 *     Dict            const oc_dict *            (no Dict?: opcore/dict.h)
 */
#ifndef OPCORE_ARGS_H
#define OPCORE_ARGS_H

#include <stdint.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tensor[]: read-only tensors, items[0 .. count-1]. */
typedef struct oc_tensor_list {
    int64_t count;
    const oc_tensor *items;
} oc_tensor_list;

/* Tensor(a!)[]: tensors the op writes in place. */
typedef struct oc_tensor_list_mut {
    int64_t count;
    oc_tensor *items;
} oc_tensor_list_mut;

/* int[] and int[N] (also SymInt[]). */
typedef struct oc_int_list {
    int64_t count;
    const int64_t *values;
} oc_int_list;

/* float[]. */
typedef struct oc_float_list {
    int64_t count;
    const double *values;
} oc_float_list;

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_ARGS_H */
