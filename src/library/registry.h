/* src/library/registry.h — loaded libraries and their ops (internal). */
#ifndef OPCORE_REGISTRY_H
#define OPCORE_REGISTRY_H

#include <ffi.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#include "library/schema.h"
#include "opcore/library.h"

/* One oc_def() as the library's init block declared it. */
typedef struct oc_op_def {
    char schema_text[1024];
    oc_schema schema;
    oc_fn shape_fn;                /* NULL: an op without fresh results */
    char shape_fn_name[OC_MAX_NAME];
    char kernel_name[OC_MAX_NAME];
    oc_op_options options;         /* as given to oc_def */
} oc_op_def;

/* All defs of one library, read by running its OC_LIBRARY block. */
typedef struct oc_library_defs {
    char name[OC_MAX_NAME];
    int num_defs;
    oc_op_def *defs;
} oc_library_defs;

/* Run the OC_LIBRARY block of a dlopen'ed library and collect its defs
 * (used by the loader and by the build tool's signature check). */
oc_status oc__library_read_defs(void *dl_handle, const char *path, oc_library_defs *out);
void oc__library_defs_free(oc_library_defs *defs);

struct oc_op {
    char name[OC_MAX_NAME];
    char qualname[2 * OC_MAX_NAME + 2];
    oc_op_def def;
    oc_fn kernel_fn;
    oc_library *lib;
    bool multicore;      /* resolved: the op's option, else the library's */
    size_t stack_size;   /* resolved likewise */
    int num_results;
    int fresh_results;   /* results the caller allocates */
    bool returns_tensor; /* kernel and shape function return oc_tensor * */
    ffi_cif cif; /* the kernel's (and shape function's) C signature */
    ffi_type *ffi_args[OC_MAX_ARGS];
    bool direct;                        /* called without libffi (engine/core.c) */
    uint8_t direct_kind[OC_MAX_ARGS];   /* ... loading each argument this way */
    /* Set by the host once the shape function has set a launch grid
     * (oc_set_grid): oc_op_call_prechecked then still runs it. */
    atomic_bool shape_sets_grid;
};

struct oc_library {
    char name[OC_MAX_NAME];
    char path[4096];
    dev_t dev;
    ino_t ino;
    void *handle;
    bool multicore;
    bool debug; /* built with --debug: outputs get redzones (redzone.c) */
    size_t stack_size;
    char cflags[1024];
    int num_ops;
    struct oc_op *ops;
    size_t ops_bytes;                /* its mapping (records_map) */
    struct oc_library *retired_next; /* out of the table: the retired list */
    /* Unload safety (oc__op_enter/leave): calls of its ops running now, and
     * whether it was unloaded or forgotten (calls that start later fail). */
    atomic_llong calls;
    atomic_bool unloaded;
};

/* Bracket every run of a library's code (shape function, kernel) for
 * `op`: enter fails (OC_ENOTFOUND, naming the op) once its library was
 * unloaded or forgotten; unloading waits until every entered call left. */
oc_status oc__op_enter(const struct oc_op *op);
void oc__op_leave(const struct oc_op *op);

#endif /* OPCORE_REGISTRY_H */
