/* opcore/host.h — the host API: load op libraries, find ops, call them.
 *
 *     oc_library *lib;
 *     if (oc_library_load("build/librelu.so", &lib) != OC_OK)
 *         fprintf(stderr, "%s\n", oc_errmsg());
 *     const oc_op *relu = oc_op_find("my_ops::relu_forward");
 *     oc_value args[] = { oc_value_tensor(&x) };
 *     oc_tensor *y;
 *     if (oc_op_invoke(relu, args, 1, &y) != OC_OK) ...
 *     oc_tensor_free(y);
 *
 * Every call returns an oc_status; on failure oc_errmsg() says what went
 * wrong, naming the op and the argument. All calls are thread-safe; ops may
 * be called from any number of threads at once.
 */
#ifndef OPCORE_HOST_H
#define OPCORE_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scalar.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oc_library oc_library;
typedef struct oc_op oc_op;

/* Argument types of a schema. */
typedef enum oc_arg_type {
    OC_ARG_TENSOR = 0, /* Tensor  -> const oc_tensor *  */
    OC_ARG_FLOAT = 1,  /* float   -> double             */
    OC_ARG_INT = 2,    /* int     -> int64_t            */
    OC_ARG_BOOL = 3,   /* bool    -> bool               */
    OC_ARG_SCALAR = 4  /* Scalar  -> oc_scalar          */
} oc_arg_type;

/* One argument value for a call. */
typedef struct oc_value {
    oc_arg_type type;
    union {
        const oc_tensor *tensor;
        double f;
        int64_t i;
        bool b;
        oc_scalar scalar;
    } v;
} oc_value;

static inline oc_value oc_value_tensor(const oc_tensor *t) { oc_value v; v.type = OC_ARG_TENSOR; v.v.tensor = t; return v; }
static inline oc_value oc_value_float(double f) { oc_value v; v.type = OC_ARG_FLOAT; v.v.f = f; return v; }
static inline oc_value oc_value_int(int64_t i) { oc_value v; v.type = OC_ARG_INT; v.v.i = i; return v; }
static inline oc_value oc_value_bool(bool b) { oc_value v; v.type = OC_ARG_BOOL; v.v.b = b; return v; }
static inline oc_value oc_value_scalar(oc_scalar s) { oc_value v; v.type = OC_ARG_SCALAR; v.v.scalar = s; return v; }

/* The schema spelling of an argument type: "Tensor", "float", ... */
const char *oc_arg_type_name(oc_arg_type type);

/* ---- libraries ----------------------------------------------------------- */

/* A counter that changes whenever a library is loaded or unloaded: caches
 * of oc_op pointers compare it to know they are still valid. */
uint64_t oc_registry_generation(void);

/* Load an op library built by `opcore build` and register its ops. Fails
 * with OC_EABI for a library built for another ABI, OC_EEXIST if its name
 * is taken by a loaded library (the message names both files). */
oc_status oc_library_load(const char *path, oc_library **out);

/* Unregister the library's ops and unload it. No call may be running. */
oc_status oc_library_unload(oc_library *lib);

/* The loaded library called `name`, or NULL. */
oc_library *oc_library_find(const char *name);

const char *oc_library_name(const oc_library *lib);   /* "my_ops" */
const char *oc_library_path(const oc_library *lib);   /* file it came from */
bool oc_library_multicore(const oc_library *lib);     /* built --multicore */
size_t oc_library_stack_size(const oc_library *lib);  /* kernel stack, bytes */
const char *oc_library_cflags(const oc_library *lib); /* compute flags used */
int oc_library_num_ops(const oc_library *lib);
const oc_op *oc_library_op(const oc_library *lib, int index);

/* ---- ops ------------------------------------------------------------------ */

/* Find an op by "library::op" name; NULL (with oc_errmsg) if none. */
const oc_op *oc_op_find(const char *qualified_name);

const char *oc_op_name(const oc_op *op);      /* "relu_forward" */
const char *oc_op_qualname(const oc_op *op);  /* "my_ops::relu_forward" */
const char *oc_op_schema(const oc_op *op);    /* as written in oc_def */
const oc_library *oc_op_library(const oc_op *op);
const char *oc_op_kernel_name(const oc_op *op);   /* C function run as the kernel */
const char *oc_op_shape_fn_name(const oc_op *op); /* C function run as the shape function */
bool oc_op_multicore(const oc_op *op);            /* runs on every core */
int oc_op_num_args(const oc_op *op);
oc_arg_type oc_op_arg_type(const oc_op *op, int index);
const char *oc_op_arg_name(const oc_op *op, int index);
/* The default of an optional argument; false if it has none. */
bool oc_op_arg_default(const oc_op *op, int index, oc_value *out);

/* Run the shape function: fills `out_meta` with the output's shape and
 * dtype (a meta tensor). Arguments may be meta or real tensors. */
oc_status oc_op_infer(const oc_op *op, const oc_value *args, int nargs, oc_tensor *out_meta);

/* Run the op writing into `out`, which the caller allocated with the shape
 * and dtype oc_op_infer gave (any strides). */
oc_status oc_op_call(const oc_op *op, const oc_value *args, int nargs, oc_tensor *out);

/* Output allocator: given the inferred meta tensor, make `out` a real
 * tensor of that shape and dtype (e.g. backed by a framework's memory). */
typedef oc_status (*oc_alloc_fn)(void *ctx, const oc_tensor *meta, oc_tensor *out);

/* Infer, allocate through `alloc`, then call: the frameworks' path. */
oc_status oc_op_run(const oc_op *op, const oc_value *args, int nargs,
                    oc_alloc_fn alloc, void *alloc_ctx, oc_tensor *out);

/* Infer, allocate with malloc, call; free *out with oc_tensor_free. */
oc_status oc_op_invoke(const oc_op *op, const oc_value *args, int nargs, oc_tensor **out);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_HOST_H */
