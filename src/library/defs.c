/* Collecting a library's oc_def() calls by running its OC_LIBRARY block. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/core.h"
#include "library/registry.h"

struct oc_library_builder {
    oc_library_defs *defs;
    int capacity;
    oc_status error; /* first failure inside the block */
    char message[2048];
};

__attribute__((format(printf, 2, 3))) static void def_error(oc_library_builder *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->message, sizeof m->message, fmt, ap);
    va_end(ap);
}

/* .grid: 1 to 3 axes of >= 1 programs, then 0s (no axis); fewer than
 * 2^31 instances, as for a shape function's or a caller's grid. */
static bool grid_error(oc_library_builder *m, const char *op, const int64_t *g)
{
    int n = 0;
    while (n < 3 && g[n] != 0) n++;
    int64_t total = 1;
    for (int a = 0; a < 3; a++) {
        const char *why = a < n && g[a] < 1 ? "every axis needs at least 1 program"
                          : a >= n && g[a] != 0 ? "an axis after a 0 (the grid's end)"
                          : NULL;
        if (!why && a < n) {
            total = g[a] > INT32_MAX ? (int64_t)INT32_MAX + 1 : total * g[a];
            if (total > INT32_MAX) why = "more than 2^31 - 1 program instances in all";
        }
        if (why) {
            def_error(m, "library '%s', op '%s': .grid = {%lld, %lld, %lld}: axis %d is %lld: %s",
                      m->defs->name, op, (long long)g[0], (long long)g[1], (long long)g[2], a,
                      (long long)g[a], why);
            return true;
        }
    }
    return false;
}

void oc_def_op(oc_library_builder *m, const char *schema, oc_fn shape_fn, const char *shape_fn_name,
             const char *kernel_name, const oc_op_options *options)
{
    if (!m || m->error) return;
    oc_library_defs *defs = m->defs;
    oc_op_def def;
    memset(&def, 0, sizeof def);
    m->error = OC_EINVAL;
    if (!schema || strlen(schema) >= sizeof def.schema_text) {
        def_error(m, "library '%s': oc_def: missing or overlong schema", defs->name);
        return;
    }
    snprintf(def.schema_text, sizeof def.schema_text, "%s", schema);
    if (oc__schema_parse(schema, &def.schema) != OC_OK) {
        def_error(m, "library '%s': %s", defs->name, oc_errmsg());
        return;
    }
    const char *op = def.schema.name;
    if (options) { /* an older or newer oc_def: take the fields both know */
        size_t n = options->struct_size < sizeof def.options ? options->struct_size : sizeof def.options;
        memcpy(&def.options, options, n);
        def.options.struct_size = sizeof def.options;
    }
    if (def.options.multicore && def.options.single_core) {
        def_error(m, "library '%s', op '%s': .multicore and .single_core are both set", defs->name, op);
        return;
    }
    if (grid_error(m, op, def.options.grid)) return;
    if (!shape_fn && oc__schema_fresh_results(&def.schema) > 0) {
        def_error(m, "library '%s', op '%s': the shape function is NULL, but the op has %d new "
                     "result%s to describe", defs->name, op, oc__schema_fresh_results(&def.schema),
                  oc__schema_fresh_results(&def.schema) == 1 ? "" : "s");
        return;
    }
    for (int i = 0; i < defs->num_defs; i++) {
        if (strcmp(defs->defs[i].schema.name, op) == 0) {
            m->error = OC_EEXIST;
            def_error(m, "library '%s': op '%s' is defined twice", defs->name, op);
            return;
        }
    }
    def.shape_fn = shape_fn;
    snprintf(def.shape_fn_name, sizeof def.shape_fn_name, "%s",
             shape_fn && shape_fn_name ? shape_fn_name : shape_fn ? "?" : "");
    snprintf(def.kernel_name, sizeof def.kernel_name, "%s", kernel_name ? kernel_name : op);
    if (defs->num_defs == m->capacity) {
        int cap = m->capacity ? 2 * m->capacity : 16;
        oc_op_def *grown = oc__realloc(defs->defs, (size_t)cap * sizeof *grown);
        if (!grown) {
            m->error = OC_ENOMEM;
            def_error(m, "library '%s': out of memory", defs->name);
            return;
        }
        defs->defs = grown;
        m->capacity = cap;
    }
    defs->defs[defs->num_defs++] = def;
    m->error = OC_OK;
}

/* The OC_LIBRARY block and its builder, as one argument for
 * oc__run_protected. */
typedef struct block_call {
    const oc_library_decl *decl;
    oc_library_builder *m;
} block_call;

static void run_block(void *arg)
{
    block_call *b = arg;
    b->decl->init(b->m);
}

oc_status oc__library_read_defs(void *handle, const char *path, oc_library_defs *out)
{
    memset(out, 0, sizeof *out);
    const oc_library_decl *decl = dlsym(handle, "oc_library_entry");
    if (!decl)
        return oc_set_error(OC_ENOTFOUND,
                            "%s is not an opcore op library: it has no OC_LIBRARY(name, m) block "
                            "(put one in a shape source)", path);
    if (decl->abi_version != OC_ABI_VERSION)
        return oc_set_error(OC_EABI,
                            "%s was built for opcore ABI %u but this runtime is ABI %u: rebuild it "
                            "(opcore build, or custom_op.load)", path, decl->abi_version, OC_ABI_VERSION);
    snprintf(out->name, sizeof out->name, "%s", decl->name);
    oc_library_builder m = {.defs = out};
    char label[4096 + 2 * OC_MAX_NAME];
    snprintf(label, sizeof label, "the OC_LIBRARY block of library '%s' (%s)", decl->name, path);
    /* faults, exit(), abort() in the block: an error naming it */
    oc_status guard = oc__run_protected(run_block, &(block_call){decl, &m}, label);
    if (guard != OC_OK) { oc__library_defs_free(out); return guard; }
    if (m.error) {
        oc__library_defs_free(out);
        return oc_set_error(m.error, "%s", m.message);
    }
    return OC_OK;
}

void oc__library_defs_free(oc_library_defs *defs)
{
    oc__free(defs->defs);
    defs->defs = NULL;
    defs->num_defs = 0;
}
