/* Collecting a library's oc_def() calls by running its OC_LIBRARY block. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core.h"
#include "library/registry.h"

struct oc_library_builder {
    oc_library_defs *defs;
    int capacity;
    oc_status error; /* first failure inside the block */
    char message[2048];
};

void oc__def(oc_library_builder *m, const char *schema, oc_fn shape_fn,
             const char *shape_fn_name, const char *kernel_name)
{
    if (!m || m->error) return;
    oc_library_defs *defs = m->defs;
    oc_op_def def;
    memset(&def, 0, sizeof def);
    if (!schema || strlen(schema) >= sizeof def.schema_text) {
        m->error = OC_EINVAL;
        snprintf(m->message, sizeof m->message, "oc_def: missing or overlong schema");
        return;
    }
    snprintf(def.schema_text, sizeof def.schema_text, "%s", schema);
    if (oc__schema_parse(schema, &def.schema) != OC_OK) {
        m->error = OC_EINVAL;
        snprintf(m->message, sizeof m->message, "library '%s': %s", defs->name, oc_errmsg());
        return;
    }
    if (!shape_fn) {
        m->error = OC_EINVAL;
        snprintf(m->message, sizeof m->message, "library '%s', op '%s': the shape function is NULL",
                 defs->name, def.schema.name);
        return;
    }
    for (int i = 0; i < defs->num_defs; i++) {
        if (strcmp(defs->defs[i].schema.name, def.schema.name) == 0) {
            m->error = OC_EEXIST;
            snprintf(m->message, sizeof m->message, "library '%s': op '%s' is defined twice",
                     defs->name, def.schema.name);
            return;
        }
    }
    def.shape_fn = shape_fn;
    snprintf(def.shape_fn_name, sizeof def.shape_fn_name, "%s", shape_fn_name ? shape_fn_name : "?");
    snprintf(def.kernel_name, sizeof def.kernel_name, "%s", kernel_name ? kernel_name : def.schema.name);
    if (defs->num_defs == m->capacity) {
        int cap = m->capacity ? 2 * m->capacity : 16;
        oc_op_def *grown = realloc(defs->defs, (size_t)cap * sizeof *grown);
        if (!grown) { m->error = OC_ENOMEM; snprintf(m->message, sizeof m->message, "out of memory"); return; }
        defs->defs = grown;
        m->capacity = cap;
    }
    defs->defs[defs->num_defs++] = def;
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
    oc_status guard = oc__library_run_init(decl, &m, path); /* faults, exit(): an error */
    if (guard != OC_OK) { oc__library_defs_free(out); return guard; }
    if (m.error) {
        oc__library_defs_free(out);
        return oc_set_error(m.error, "%s", m.message);
    }
    return OC_OK;
}

void oc__library_defs_free(oc_library_defs *defs)
{
    free(defs->defs);
    defs->defs = NULL;
    defs->num_defs = 0;
}
