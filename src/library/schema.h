/* src/library/schema.h — parsing op schemas (internal).
 *
 * The grammar is PyTorch's function schema, the part opcore ops can use:
 *
 *   schema  := name "(" [arg {"," arg}] ")" "->" results
 *   arg     := "*" | type name ["=" default]
 *   type    := base [alias] ["[" [N] "]"] ["?"]
 *   base    := Tensor | int | SymInt | float | bool | Scalar | str | ScalarType | Dict
 *   alias   := "(" ident "!" ")"                      (Tensor only: written in place)
 *   results := "()" | result | "(" result {"," result} ")"
 *   result  := "Tensor" [alias] [name]
 *
 * Everything accepted here is accepted by torch's own parser and registers
 * the same way in torch.library, but `Dict` (opcore's dictionary of named
 * attributes: no `?`, no list, no default), which torch's grammar cannot
 * express and opcore.torch refuses to register; what torch would take but opcore cannot
 * run (overload names, views, Tensor?[], other base types, defaults torch
 * misreads) is refused with the reason and what to write instead.
 */
#ifndef OPCORE_SCHEMA_H
#define OPCORE_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#include "opcore/host.h"

#define OC_MAX_ARGS 64
#define OC_MAX_NAME 128
#define OC_MAX_LIST_DEFAULT 16 /* items in a list default */
#define OC_MAX_STR_DEFAULT 64

typedef struct oc_schema_arg {
    char name[OC_MAX_NAME];
    oc_arg_type type;     /* base type; lists have their own */
    bool optional;        /* T? */
    bool is_mutable;      /* Tensor(a!), Tensor(a!)[] */
    char alias_set[16];   /* "a" of (a!) */
    int64_t list_len;     /* int[N] / float[N]: N; 0 for any length */
    bool keyword_only;
    char type_text[64];   /* the type as written, normalized: "int[2]?" */
    /* default (see oc__schema_default; lists and strings point in here) */
    bool has_default;
    bool default_none;
    oc_value default_scalar; /* non-list, non-str defaults */
    int64_t default_count;
    union {
        int64_t ints[OC_MAX_LIST_DEFAULT];
        double floats[OC_MAX_LIST_DEFAULT];
    } default_list;
    char default_str[OC_MAX_STR_DEFAULT];
} oc_schema_arg;

typedef struct oc_schema_result {
    char name[OC_MAX_NAME]; /* "" if unnamed */
    int alias_arg;          /* the Tensor(a!) argument it returns, or -1 */
} oc_schema_result;

typedef struct oc_schema {
    char name[OC_MAX_NAME];
    int num_args;
    oc_schema_arg args[OC_MAX_ARGS];
    int num_results;
    oc_schema_result results[OC_MAX_RESULTS];
} oc_schema;

/* Parse `text`; on failure returns OC_EINVAL with a message quoting the
 * schema and saying what was expected where. */
oc_status oc__schema_parse(const char *text, oc_schema *out);

/* The argument's default as a call value (lists point into `arg`).
 * False if it has none. */
bool oc__schema_default(const oc_schema_arg *arg, oc_value *out);

/* True if the kernel and shape function return the one fresh result
 * (oc_tensor *); false if they return void. */
bool oc__schema_returns_tensor(const oc_schema *s);

/* Number of fresh (not aliased) results. */
int oc__schema_fresh_results(const oc_schema *s);

/* The C type of an argument as a kernel receives it ("const oc_tensor *"). */
const char *oc__arg_c_type(const oc_schema_arg *arg);

/* Write the C prototype a function implementing `s` must have, e.g.
 * "oc_tensor *relu_forward(const oc_tensor *x)" (no trailing ';'). */
void oc__schema_prototype(const oc_schema *s, const char *fn_name, char *buf, size_t len);

#endif /* OPCORE_SCHEMA_H */
