/* src/library/schema.h — parsing op schemas (internal).
 *
 * The grammar is a subset of PyTorch's function schema:
 *   name "(" [arg {"," arg}] ")" "->" "Tensor"
 *   arg  := type name ["=" default] | "*"
 *   type := "Tensor" | "float" | "int" | "bool" | "Scalar"
 */
#ifndef OPCORE_SCHEMA_H
#define OPCORE_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#include "opcore/host.h"

#define OC_MAX_ARGS 32
#define OC_MAX_NAME 128

typedef struct oc_schema_arg {
    char name[OC_MAX_NAME];
    oc_arg_type type;
    bool has_default;
    oc_value default_value;
    bool keyword_only;
} oc_schema_arg;

typedef struct oc_schema {
    char name[OC_MAX_NAME];
    int num_args;
    oc_schema_arg args[OC_MAX_ARGS];
} oc_schema;

/* Parse `text`; on failure returns OC_EINVAL with a message quoting the
 * schema and saying what was expected where. */
oc_status oc__schema_parse(const char *text, oc_schema *out);

/* The C type of an argument as a kernel receives it ("const oc_tensor *"). */
const char *oc__arg_c_type(oc_arg_type type);

/* The schema spelling of a type ("Tensor", "float", ...). */
const char *oc__arg_schema_type(oc_arg_type type);

/* Write the C prototype a function implementing `s` must have, e.g.
 * "oc_tensor *relu_forward(const oc_tensor *x)" (no trailing ';'). */
void oc__schema_prototype(const oc_schema *s, const char *fn_name, char *buf, size_t len);

#endif /* OPCORE_SCHEMA_H */
