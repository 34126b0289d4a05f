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
 *         oc_def(m, "sum_all(Tensor x) -> Tensor", sum_shape, "sum_all", .multicore = true);
 *         oc_def(m, "concat(Tensor[] xs) -> Tensor", cat_shape, "concat", .strided = true);
 *     }
 *
 * The schema is PyTorch's op-schema grammar, the same string torch.library
 * and opcore.jax use:
 *
 *   arguments  Tensor, Tensor?, Tensor[], Tensor(a!), Tensor(a!)[], int,
 *              SymInt, int[], int[N], float, float[], bool, Scalar, str,
 *              ScalarType, and T? for the others; defaults (`float eps=1e-05`,
 *              `int[2] stride=1`, `str reduction="mean"`, `Tensor? bias=None`)
 *              and the keyword-only marker `*`;
 *   results    `Tensor`, `(Tensor, Tensor, ...)` (names allowed:
 *              `(Tensor out, Tensor mean)`), `()` for an op that only
 *              mutates, and `Tensor(a!)` to return a mutated argument.
 *
 * The C types are in args.h. A `Tensor(a!)` argument is written in place by
 * the kernel (PyTorch functionalizes it under torch.compile; JAX gets the
 * updated value as a result).
 *
 * A shape function has the kernel's signature and runs on the host on meta
 * tensors (shapes and dtypes, no data):
 *   - an op with one fresh `Tensor` result: the shape function returns a
 *     meta tensor describing it, usually from the factories in
 *     tensor_ops.h (oc_empty_like, oc_empty, ...);
 *   - any other op (several results, `()`, `Tensor(a!)`): it returns void
 *     and describes each fresh result with oc_set_result(i, meta). An op
 *     without fresh results may pass NULL as its shape function.
 * Touching tensor data there is reported as an error. Sizes computed from
 * input sizes with the oc_dim_* helpers (dim.h) stay symbolic under
 * torch.compile(dynamic=True), torch.export and jax.export.
 * A shape function must answer from its arguments alone (their dtypes,
 * sizes, strides and flags, and the values of the other arguments): each
 * thread remembers its last few answers and a call asking the same again
 * reuses the answer without running it (OC_INFER_MEMO=0: always run it).
 *
 * The library's name is the namespace of its ops: torch.ops.my_ops.relu_forward,
 * "my_ops::relu_forward" in the host API. One OC_LIBRARY per built library;
 * any number of libraries may be loaded at once.
 */
#ifndef OPCORE_LIBRARY_H
#define OPCORE_LIBRARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "check.h"
#include "dict.h"
#include "dim.h"
#include "scalar.h"
#include "status.h"
#include "tensor.h"
#include "tensor_ops.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version of the library <-> runtime contract. A library built for
 * another version is refused at load time ("rebuild it"). 5: oc_op_options
 * gained .grid and .strided; oc_dtype complex64/complex128; Dict arguments.
 * 6: oc_weights_pack_bytes takes the weight type (packed Q8_0 / Q4_0). */
#define OC_ABI_VERSION 6

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

/* Per-op options, given to oc_def as designated initializers after the
 * kernel name: oc_def(m, schema, shape, "kernel", .multicore = true). */
typedef struct oc_op_options {
    uint32_t struct_size; /* set by oc_def */
    bool multicore;       /* run on every core (else: the library's default) */
    bool single_core;     /* run on one core even in a --multicore library */
    size_t stack_size;    /* kernel stack bytes (0: the library's) */
    /* A launch grid (up to 3 axes, e.g. .grid = {2, 2}): the kernel runs
     * once per program instance, reading oc_program_id(axis) (kernel.h);
     * {0}: no grid. A shape function's oc_set_grid and a per-call grid
     * override it. */
    int64_t grid[3];
    bool strided;         /* the kernel handles any strides: its tensors arrive
                             as the caller's views, not dense row-major copies
                             (kernel.h); off by default */
} oc_op_options;

/* Define an op: its schema, its shape function and the name of its kernel
 * (a non-static function in a compute source; NULL means "the op's name"),
 * then any options. */
#define oc_def(m, schema, shape_fn, kernel_name, ...)                         \
    oc_def_op((m), (schema), (oc_fn)(shape_fn), #shape_fn, (kernel_name),     \
              &(const oc_op_options){.struct_size = sizeof(oc_op_options), __VA_ARGS__})

/* What oc_def expands to (write oc_def: it fills in the shape function's
 * name and the options' struct_size). */
OC_API void oc_def_op(oc_library_builder *m, const char *schema, oc_fn shape_fn,
                      const char *shape_fn_name, const char *kernel_name, const oc_op_options *options);

/* In a shape function of an op whose results are not a single fresh Tensor:
 * result `index` (0-based, in schema order) has the shape and dtype of
 * `meta`. Every fresh result must be described; aliased (`Tensor(a!)`)
 * results are the arguments themselves and must not be. */
OC_API void oc_set_result(int index, const oc_tensor *meta);

/* In a shape function: launch the kernel as a grid of `ndim` (1 to 3)
 * axes of dims[0] x dims[1] x ... program instances, e.g. one per 128-row
 * block of the input: overrides the op's .grid default for this call (a
 * per-call grid from the host overrides both). Every dim must be >= 1.
 * OC_SET_GRID(2, 2) spells the dims inline. */
OC_API void oc_set_grid(int ndim, const int64_t *dims);
#define OC_SET_GRID(...) \
    oc_set_grid((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__})

/* Called by the constructor that `opcore build` puts in every op library,
 * with the address of the library's build info: when something other than
 * opcore's loader loads the library (torch.ops.load_library, ctypes), it
 * says on stderr to load it with opcore instead (whose loader registers its
 * ops). Not for direct use. */
OC_API void oc_library_constructor(const void *self);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_LIBRARY_H */
