/* opcore/library.h — registering ops (shape sources, host side).
 *
 * A shape source holds the shape functions and one OC_LIBRARY block:
 *
 *     #include <opcore/library.h>
 *
 *     static oc_tensor *relu_fwd_shape(const oc_tensor *x) { return oc_empty_like(x); }
 *
 *     OC_LIBRARY(my_ops, m) {
 *         oc_def(m, "relu_forward(Tensor x) -> Tensor", relu_fwd_shape, "relu_forward");
 *     }
 *
 * The schema is PyTorch's op-schema grammar (a subset): argument types
 * Tensor, float, int, bool, Scalar; defaults (`float alpha=1.0`) and the
 * keyword-only marker `*` are accepted; the result is `Tensor`. The same
 * string defines the op in torch.library and in JAX.
 *
 * A shape function has the kernel's signature. It runs on the host on meta
 * tensors (shapes and dtypes, no data) and returns a meta tensor describing
 * the output, usually from the factories in tensor_ops.h (oc_empty_like,
 * oc_empty, ...). Touching tensor data there is reported as an error.
 *
 * The library's name is the namespace of its ops: torch.ops.my_ops.relu_forward,
 * "my_ops::relu_forward" in the host API. One OC_LIBRARY per built library;
 * any number of libraries may be loaded at once.
 */
#ifndef OPCORE_LIBRARY_H
#define OPCORE_LIBRARY_H

#include <stddef.h>
#include <stdint.h>

#include "check.h"
#include "scalar.h"
#include "status.h"
#include "tensor.h"
#include "tensor_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version of the library <-> runtime contract. A library built for
 * another version is refused at load time ("rebuild it"). */
#define OC_ABI_VERSION 2

typedef struct oc_library_builder oc_library_builder;
typedef void (*oc_fn)(void);

/* What OC_LIBRARY exports; the loader looks it up by name. */
typedef struct oc_library_decl {
    uint32_t abi_version;
    const char *name;
    void (*init)(oc_library_builder *m);
} oc_library_decl;

/* What `opcore build` embeds next to it: how the library was built. */
typedef struct oc_build_info {
    uint32_t abi_version;
    uint32_t multicore;     /* 1 if kernels run on every core */
    uint64_t stack_size;    /* kernel stack size in bytes */
    const char *cflags;     /* the compute sources' flags, for `opcore info` */
    uint32_t debug;         /* 1 if built with --debug (outputs get redzones) */
} oc_build_info;

#define OC__EXPORT __attribute__((visibility("default"), used))

/* Declare the library `name` and open the block that defines its ops. */
#define OC_LIBRARY(name, m)                                                  \
    static void oc__library_init_##name(oc_library_builder *m);              \
    OC__EXPORT const oc_library_decl oc_library_entry = {                    \
        OC_ABI_VERSION, #name, oc__library_init_##name};                     \
    static void oc__library_init_##name(oc_library_builder *m)

/* Define an op: its schema, its shape function and the name of its kernel
 * (a non-static function in a compute source; NULL means "the op's name"). */
#define oc_def(m, schema, shape_fn, kernel_name)                             \
    oc__def((m), (schema), (oc_fn)(shape_fn), #shape_fn, (kernel_name))

void oc__def(oc_library_builder *m, const char *schema, oc_fn shape_fn,
             const char *shape_fn_name, const char *kernel_name);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_LIBRARY_H */
