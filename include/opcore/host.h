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
 * Arguments are oc_values in schema order (oc_value_tensor, oc_value_int,
 * oc_value_ints, oc_value_none for an optional's None...); missing trailing
 * arguments take their schema defaults. Results come back one tensor per
 * schema result.
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

#include "args.h"
#include "dict.h"
#include "scalar.h"
#include "status.h"
#include "tensor.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oc_library oc_library;
typedef struct oc_op oc_op;

/* Argument types of a schema (the base type; optional, mutable and list
 * length are properties of the argument, see oc_op_arg_*). */
typedef enum oc_arg_type {
    OC_ARG_TENSOR = 0,      /* Tensor, Tensor?, Tensor(a!)  -> const oc_tensor * (oc_tensor *) */
    OC_ARG_FLOAT = 1,       /* float          -> double                          */
    OC_ARG_INT = 2,         /* int, SymInt    -> int64_t                         */
    OC_ARG_BOOL = 3,        /* bool           -> bool                            */
    OC_ARG_SCALAR = 4,      /* Scalar         -> oc_scalar                       */
    OC_ARG_STR = 5,         /* str            -> const char *                    */
    OC_ARG_DTYPE = 6,       /* ScalarType     -> oc_dtype                        */
    OC_ARG_TENSOR_LIST = 7, /* Tensor[]       -> oc_tensor_list (_mut for (a!))  */
    OC_ARG_INT_LIST = 8,    /* int[], int[N]  -> oc_int_list                     */
    OC_ARG_FLOAT_LIST = 9,  /* float[]        -> oc_float_list                   */
    OC_ARG_NONE = 10,       /* a value only: None, for an optional argument      */
    OC_ARG_DICT = 11        /* Dict           -> const oc_dict * (opcore/dict.h)  */
} oc_arg_type;

/* One argument value for a call. Lists point at the caller's arrays, which
 * must stay valid for the call. A mutable (Tensor(a!)) argument's tensor is
 * written in place, even though it is reached through a const pointer. */
typedef struct oc_value {
    oc_arg_type type;
    union {
        const oc_tensor *tensor;
        double f;
        int64_t i;
        bool b;
        oc_scalar scalar;
        const char *s;
        oc_dtype dtype;
        oc_tensor_list tensors;
        oc_int_list ints;
        oc_float_list floats;
        const oc_dict *dict;
    } v;
} oc_value;

static inline oc_value oc_value_tensor(const oc_tensor *t) { oc_value v; v.type = OC_ARG_TENSOR; v.v.tensor = t; return v; }
static inline oc_value oc_value_float(double f) { oc_value v; v.type = OC_ARG_FLOAT; v.v.f = f; return v; }
static inline oc_value oc_value_int(int64_t i) { oc_value v; v.type = OC_ARG_INT; v.v.i = i; return v; }
static inline oc_value oc_value_bool(bool b) { oc_value v; v.type = OC_ARG_BOOL; v.v.b = b; return v; }
static inline oc_value oc_value_scalar(oc_scalar s) { oc_value v; v.type = OC_ARG_SCALAR; v.v.scalar = s; return v; }
static inline oc_value oc_value_str(const char *s) { oc_value v; v.type = OC_ARG_STR; v.v.s = s; return v; }
static inline oc_value oc_value_dtype(oc_dtype d) { oc_value v; v.type = OC_ARG_DTYPE; v.v.dtype = d; return v; }
static inline oc_value oc_value_none(void) { oc_value v; v.type = OC_ARG_NONE; v.v.i = 0; return v; }
static inline oc_value oc_value_tensors(const oc_tensor *items, int64_t count)
{ oc_value v; v.type = OC_ARG_TENSOR_LIST; v.v.tensors.items = items; v.v.tensors.count = count; return v; }
static inline oc_value oc_value_ints(const int64_t *values, int64_t count)
{ oc_value v; v.type = OC_ARG_INT_LIST; v.v.ints.values = values; v.v.ints.count = count; return v; }
static inline oc_value oc_value_floats(const double *values, int64_t count)
{ oc_value v; v.type = OC_ARG_FLOAT_LIST; v.v.floats.values = values; v.v.floats.count = count; return v; }

/* A Dict argument: the dictionary (and what it points at) must stay valid
 * for the call; the kernel gets a copy naming the op and argument. */
static inline oc_value oc_value_dict(const oc_dict *d) { oc_value v; v.type = OC_ARG_DICT; v.v.dict = d; return v; }

/* Check `schema` as oc_def will: OC_OK, or OC_EINVAL with the reason in
 * oc_errmsg(). On success `prototype` (if not NULL) receives the C
 * prototype the op's kernel must have, named after the op. Everything it
 * accepts, torch.library accepts and registers the same way, but a Dict
 * argument (opcore/dict.h), which torch's schema language cannot express. */
OC_API oc_status oc_schema_check(const char *schema, char *prototype, size_t len);

/* The schema spelling of a base type: "Tensor", "float", "int[]", ... */
OC_API const char *oc_arg_type_name(oc_arg_type type);

/* Most results an op may have. */
#define OC_MAX_RESULTS 16

/* ---- libraries ----------------------------------------------------------- */

/* A counter that changes whenever a library is loaded or unloaded: caches
 * of oc_op pointers compare it to know they are still valid. */
OC_API uint64_t oc_registry_generation(void);

/* Load an op library built by `opcore build` and register its ops. Fails
 * with OC_EABI for a library built for another ABI, OC_EEXIST if its name
 * is taken by a library loaded from another file (the message names both
 * files). Loading the same file again is a no-op; loading a path whose
 * file was rebuilt since it was loaded replaces that library: oc_op_find
 * then finds the new ops, while pointers to the old ones stay valid (their
 * code stays mapped) -- the edit, rebuild, reload loop. */
OC_API oc_status oc_library_load(const char *path, oc_library **out);

/* Unregister the library's ops and unload it. Calls of its ops running on
 * other threads are waited for, and its code is unmapped only after they
 * returned (so never unload a library from inside one of its own calls: it
 * would wait for itself). A call that starts later, through an oc_op
 * pointer kept from before, fails with OC_ENOTFOUND naming the op and
 * saying its library was unloaded: the library's records (about 34 KB an
 * op) stay until the process ends for that. Unloading it again fails with
 * OC_ENOTFOUND. */
OC_API oc_status oc_library_unload(oc_library *lib);

/* Unregister the library's ops as oc_library_unload does (running calls
 * waited for, later calls fail naming the op) but keep its code mapped
 * until the process ends: for when its functions may still be referenced
 * elsewhere (a framework's registrations, function pointers). */
OC_API oc_status oc_library_forget(oc_library *lib);

/* The loaded library called `name`, or NULL. */
OC_API oc_library *oc_library_find(const char *name);

OC_API const char *oc_library_name(const oc_library *lib);   /* "my_ops" */
OC_API const char *oc_library_path(const oc_library *lib);   /* file it came from */
OC_API bool oc_library_multicore(const oc_library *lib);     /* built --multicore */
OC_API bool oc_library_debug(const oc_library *lib);         /* built --debug */
OC_API size_t oc_library_stack_size(const oc_library *lib);  /* kernel stack, bytes */
OC_API const char *oc_library_cflags(const oc_library *lib); /* compute flags used */
OC_API int oc_library_num_ops(const oc_library *lib);
OC_API const oc_op *oc_library_op(const oc_library *lib, int index);

/* ---- ops ------------------------------------------------------------------ */

/* Find an op by "library::op" name; NULL (with oc_errmsg) if none. */
OC_API const oc_op *oc_op_find(const char *qualified_name);

OC_API const char *oc_op_name(const oc_op *op);      /* "relu_forward" */
OC_API const char *oc_op_qualname(const oc_op *op);  /* "my_ops::relu_forward" */
OC_API const char *oc_op_schema(const oc_op *op);    /* as written in oc_def */
OC_API const oc_library *oc_op_library(const oc_op *op);
OC_API const char *oc_op_kernel_name(const oc_op *op);   /* C function run as the kernel */
OC_API const char *oc_op_shape_fn_name(const oc_op *op); /* C function run as the shape function */
/* The C prototype the op's kernel has, e.g. "oc_tensor *relu_forward(const
 * oc_tensor *x)" (no ';'), written to `buf` (cut to `len` bytes); returns buf. */
OC_API const char *oc_op_kernel_prototype(const oc_op *op, char *buf, size_t len);
OC_API bool oc_op_multicore(const oc_op *op);            /* runs on every core */
OC_API bool oc_op_strided(const oc_op *op);              /* `.strided`: gets the caller's strides */
OC_API size_t oc_op_stack_size(const oc_op *op);         /* its kernel stack, bytes */

OC_API int oc_op_num_args(const oc_op *op);
OC_API oc_arg_type oc_op_arg_type(const oc_op *op, int index);
OC_API const char *oc_op_arg_name(const oc_op *op, int index);
/* The argument's type as the schema spells it: "Tensor(a!)", "int[2]". */
OC_API const char *oc_op_arg_schema_type(const oc_op *op, int index);
OC_API bool oc_op_arg_optional(const oc_op *op, int index);  /* T?: may be None */
OC_API bool oc_op_arg_mutable(const oc_op *op, int index);   /* Tensor(a!): written in place */
OC_API int64_t oc_op_arg_list_len(const oc_op *op, int index); /* int[N]: N; else 0 */
OC_API bool oc_op_arg_keyword_only(const oc_op *op, int index);
/* The default of an optional argument; false if it has none. */
OC_API bool oc_op_arg_default(const oc_op *op, int index, oc_value *out);

/* Results: how many (0 for `-> ()`), and for each, the argument it aliases
 * (a `Tensor(a!)` result: the mutated argument, returned as is) or -1 for a
 * fresh tensor the caller allocates. Names come from `-> (Tensor out, ...)`
 * ("" when unnamed). */
OC_API int oc_op_num_results(const oc_op *op);
OC_API int oc_op_result_alias(const oc_op *op, int index);
OC_API const char *oc_op_result_name(const oc_op *op, int index);

/* ---- calling ----------------------------------------------------------- */
/* `outs` below is an array of oc_op_num_results(op) tensors, one per
 * result (NULL is allowed for an op without results). An aliased result's
 * entry is filled with the mutated argument's tensor.
 *
 * Tensors of any strides may be passed: the kernel gets dense row-major
 * copies of those that are not contiguous (unless the op is `.strided`),
 * and written ones (Tensor(a!) arguments, `outs`) are written back. A
 * written tensor with internal overlap, or sharing memory with an input
 * (other than being the very same view) or with another written tensor,
 * is refused with OC_EINVAL (kernel.h says why). */

/* Run the shape function: fills `out_meta` with each result's shape and
 * dtype (meta tensors). Arguments may be meta or real tensors. */
OC_API oc_status oc_op_infer(const oc_op *op, const oc_value *args, int nargs, oc_tensor *out_meta);

/* Run the op writing into `outs`, which the caller allocated with the
 * shapes and dtypes oc_op_infer gave (any strides; none may overlap an
 * argument). */
OC_API oc_status oc_op_call(const oc_op *op, const oc_value *args, int nargs, oc_tensor *outs);

/* Output allocator: given result `index`'s inferred meta tensor, make `out`
 * a real tensor of that shape and dtype (e.g. backed by a framework's
 * memory). Called once per fresh result, in order. */
typedef oc_status (*oc_alloc_fn)(void *ctx, int index, const oc_tensor *meta, oc_tensor *out);

/* Infer, allocate through `alloc`, then call: the frameworks' path. */
OC_API oc_status oc_op_run(const oc_op *op, const oc_value *args, int nargs,
                           oc_alloc_fn alloc, void *alloc_ctx, oc_tensor *outs);

/* Infer, allocate with malloc, call. `outs` receives one pointer per
 * result: free the fresh ones (oc_op_result_alias(op, i) < 0) with
 * oc_tensor_free; an aliased one points at the caller's argument. */
OC_API oc_status oc_op_invoke(const oc_op *op, const oc_value *args, int nargs, oc_tensor **outs);

/* A launch grid for one call (up to OC_MAX_GRID_DIMS axes, each >= 1):
 * overrides the op's .grid and its shape function's oc_set_grid. */
#define OC_MAX_GRID_DIMS 3
typedef struct oc_grid {
    int ndim;                        /* 1 to OC_MAX_GRID_DIMS */
    int64_t dims[OC_MAX_GRID_DIMS];
} oc_grid;

/* oc_op_call / oc_op_run launched on `grid` (NULL: the op's own grid, if
 * any). A bad grid is OC_EINVAL naming the op. */
OC_API oc_status oc_op_call_grid(const oc_op *op, const oc_value *args, int nargs, oc_tensor *outs,
                                 const oc_grid *grid);
OC_API oc_status oc_op_run_grid(const oc_op *op, const oc_value *args, int nargs, oc_alloc_fn alloc,
                                void *alloc_ctx, oc_tensor *outs, const oc_grid *grid);

/* oc_op_call without running the shape function: for a caller that has
 * already checked `outs` against it for arguments of these very shapes,
 * dtypes and values (a compiled graph's call site, whose shapes are fixed:
 * opcore.jax checks a site's first call with oc_op_call, then uses this).
 * Outputs that disagree with the shape function are not detected. `grid`
 * as for oc_op_call_grid (NULL: the op's own). An op whose shape function
 * sets a launch grid still runs it. */
OC_API oc_status oc_op_call_prechecked(const oc_op *op, const oc_value *args, int nargs, oc_tensor *outs,
                                       const oc_grid *grid);

/* ---- prepared calls ------------------------------------------------------ */
/* A call bound once and run many times on new data, as SQLite prepares a
 * statement once and steps it: oc_call_prepare binds the arguments, runs
 * the shape function and checks the result buffers against it, for these
 * shapes, strides, dtypes and non-tensor values; oc_call_run then only
 * swaps in the tensors' data pointers and runs the kernel. For a loop over
 * same-shaped tensors, or a compiled graph's call site (opcore.jax keeps
 * one per XLA call site).
 *
 *     oc_call *call;
 *     oc_value args[] = { oc_value_tensor(&x) };
 *     if (oc_call_prepare(relu, args, 1, &y, NULL, &call) != OC_OK) ...
 *     for (int i = 0; i < n; i++) {
 *         void *data[] = { xs[i], ys[i] };   // x's data, then y's
 *         if (oc_call_run(call, data) != OC_OK) ...
 *     }
 *     oc_call_free(call);
 *
 * Each run has the checks of oc_op_call that depend on the data (a NULL
 * pointer, a result overlapping an argument or another result, in-place
 * arguments that are not dense), and runs the kernel exactly as
 * oc_op_call would; what was checked at prepare is not checked again.
 * The strings, lists and dictionaries `args` point at must stay valid
 * until oc_call_free (tensor structs are copied). A prepared call is used
 * by one thread at a time; prepare one per thread for more. After its
 * op's library is unloaded, a run fails (OC_ENOTFOUND). */
typedef struct oc_call oc_call;

/* Prepare `op` for `args` and the result buffers `outs` (shapes, dtypes
 * and strides as oc_op_infer gives; their data may be NULL here: each
 * run gives it). `grid` as for oc_op_call_grid. */
OC_API oc_status oc_call_prepare(const oc_op *op, const oc_value *args, int nargs, const oc_tensor *outs,
                                 const oc_grid *grid, oc_call **call);

/* How many data pointers a run takes: one per tensor argument given (in
 * argument order; each item of a Tensor[]; none for a Tensor? given None),
 * then one per fresh result (oc_op_result_alias(op, i) < 0), in order. */
OC_API int oc_call_num_data(const oc_call *call);

/* Run the prepared call on `data` (oc_call_num_data pointers, in that
 * order). */
OC_API oc_status oc_call_run(oc_call *call, void *const *data);

/* Free a prepared call (NULL is a no-op). */
OC_API void oc_call_free(oc_call *call);

/* ---- dynamic shapes ------------------------------------------------------ */
/* Frameworks with symbolic sizes (torch.compile(dynamic=True), torch.export,
 * jax.export) need each result size as an expression of the input sizes,
 * not a number. oc_op_trace_shapes runs the shape function once per `runs`
 * entry (the same arguments with different concrete sizes for the dynamic
 * dims: real values and probe values) and explains every result size that
 * changes between runs as an input size, a constant, or oc_dim_* arithmetic
 * (include/opcore/dim.h) on those. A size computed by plain C arithmetic on
 * a dynamic size cannot be explained: OC_ESHAPE, with a message saying how
 * to write it. */

typedef enum oc_dim_op {
    OC_DIM_CONST = 0,    /* value */
    OC_DIM_INPUT = 1,    /* size `dim` of tensor argument `arg` (list item `item`);
                            dim -1: the value of int argument `arg` (int[] item `item`) */
    OC_DIM_ADD = 2,      /* lhs + rhs */
    OC_DIM_SUB = 3,      /* lhs - rhs */
    OC_DIM_MUL = 4,      /* lhs * rhs */
    OC_DIM_DIV = 5,      /* floor(lhs / rhs) */
    OC_DIM_CEIL_DIV = 6, /* ceil(lhs / rhs) */
    OC_DIM_MOD = 7,      /* lhs mod rhs (floor) */
    OC_DIM_MIN = 8,      /* min(lhs, rhs) */
    OC_DIM_MAX = 9       /* max(lhs, rhs) */
} oc_dim_op;

typedef struct oc_dim_node {
    oc_dim_op op;
    int64_t value;        /* OC_DIM_CONST */
    int32_t arg, item, dim; /* OC_DIM_INPUT (item: 0 unless a Tensor[]) */
    int32_t lhs, rhs;     /* operands: indices into nodes[] */
} oc_dim_node;

#define OC_MAX_DIM_NODES 256

typedef struct oc_shape_trace {
    int num_results;                           /* fresh and aliased */
    oc_dtype dtypes[OC_MAX_RESULTS];
    int32_t ndims[OC_MAX_RESULTS];
    int32_t sizes[OC_MAX_RESULTS][OC_MAX_DIMS]; /* node index of each size */
    int num_nodes;
    oc_dim_node nodes[OC_MAX_DIM_NODES];
} oc_shape_trace;

/* `runs[r]` is the r-th argument array (nargs values each); every run must
 * give the same arguments apart from tensor sizes. At least 2 runs. */
OC_API oc_status oc_op_trace_shapes(const oc_op *op, const oc_value *const *runs, int nruns, int nargs,
                                    oc_shape_trace *out);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_HOST_H */
