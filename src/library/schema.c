/* Op schema parser: PyTorch's function-schema grammar, the subset opcore's
 * kernels can take. Hand-written recursive descent; the grammar is tiny. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "library/schema.h"

typedef struct parser {
    const char *text; /* whole schema, for messages */
    const char *p;
} parser;

static const struct {
    const char *spelling;
    oc_arg_type type;
    const char *c_type;
} arg_types[] = {
    {"Tensor", OC_ARG_TENSOR, "const oc_tensor *"},
    {"float", OC_ARG_FLOAT, "double"},
    {"int", OC_ARG_INT, "int64_t"},
    {"bool", OC_ARG_BOOL, "bool"},
    {"Scalar", OC_ARG_SCALAR, "oc_scalar"},
};
#define NUM_ARG_TYPES (int)(sizeof arg_types / sizeof arg_types[0])

const char *oc__arg_c_type(oc_arg_type type)
{
    for (int i = 0; i < NUM_ARG_TYPES; i++)
        if (arg_types[i].type == type) return arg_types[i].c_type;
    return "?";
}

const char *oc_arg_type_name(oc_arg_type type) { return oc__arg_schema_type(type); }

const char *oc__arg_schema_type(oc_arg_type type)
{
    for (int i = 0; i < NUM_ARG_TYPES; i++)
        if (arg_types[i].type == type) return arg_types[i].spelling;
    return "?";
}

static oc_status fail(parser *ps, const char *what)
{
    return oc_set_error(OC_EINVAL, "schema \"%s\": %s at column %d", ps->text, what,
                        (int)(ps->p - ps->text) + 1);
}

static void skip_space(parser *ps)
{
    while (isspace((unsigned char)*ps->p)) ps->p++;
}

static bool accept(parser *ps, const char *tok)
{
    skip_space(ps);
    size_t n = strlen(tok);
    if (strncmp(ps->p, tok, n) != 0) return false;
    ps->p += n;
    return true;
}

/* identifier: [A-Za-z_][A-Za-z0-9_.]* ('.' allows overload names) */
static bool ident(parser *ps, char *out, size_t len)
{
    skip_space(ps);
    const char *s = ps->p;
    if (!(isalpha((unsigned char)*s) || *s == '_')) return false;
    while (isalnum((unsigned char)*ps->p) || *ps->p == '_' || *ps->p == '.') ps->p++;
    size_t n = (size_t)(ps->p - s);
    if (n >= len) return false;
    memcpy(out, s, n);
    out[n] = '\0';
    return true;
}

static oc_status parse_default(parser *ps, oc_schema_arg *arg)
{
    skip_space(ps);
    const char *s = ps->p;
    char *end = NULL;
    arg->has_default = true;
    switch (arg->type) {
    case OC_ARG_BOOL:
        if (accept(ps, "True")) arg->default_value = oc_value_bool(true);
        else if (accept(ps, "False")) arg->default_value = oc_value_bool(false);
        else return fail(ps, "expected True or False as a bool default");
        return OC_OK;
    case OC_ARG_INT: {
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno) return fail(ps, "expected an integer default");
        arg->default_value = oc_value_int(v);
        break;
    }
    case OC_ARG_FLOAT:
    case OC_ARG_SCALAR: {
        double v = strtod(s, &end);
        if (end == s) return fail(ps, "expected a number as default");
        bool is_int = strcspn(s, ".eE") >= (size_t)(end - s);
        if (arg->type == OC_ARG_SCALAR && is_int && !(v >= -0x1p63 && v < 0x1p63)) /* found by fuzzing */
            return fail(ps, "an integer Scalar default must fit in int64");
        if (arg->type == OC_ARG_SCALAR)
            arg->default_value = oc_value_scalar(is_int ? oc_scalar_int((int64_t)v) : oc_scalar_float(v));
        else
            arg->default_value = oc_value_float(v);
        break;
    }
    case OC_ARG_TENSOR:
        return fail(ps, "a Tensor argument cannot have a default");
    }
    ps->p = end;
    return OC_OK;
}

static oc_status parse_arg(parser *ps, oc_schema *s, bool keyword_only)
{
    char type_name[OC_MAX_NAME];
    if (s->num_args == OC_MAX_ARGS) return fail(ps, "too many arguments (at most 32)");
    oc_schema_arg *arg = &s->args[s->num_args];
    memset(arg, 0, sizeof *arg);
    if (!ident(ps, type_name, sizeof type_name)) return fail(ps, "expected an argument type");
    int t = 0;
    while (t < NUM_ARG_TYPES && strcmp(arg_types[t].spelling, type_name) != 0) t++;
    if (t == NUM_ARG_TYPES) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "unknown type '%s' (expected Tensor, float, int, bool or Scalar)", type_name);
        return fail(ps, msg);
    }
    arg->type = arg_types[t].type;
    arg->keyword_only = keyword_only;
    if (!ident(ps, arg->name, sizeof arg->name)) return fail(ps, "expected an argument name");
    for (int i = 0; i < s->num_args; i++)
        if (strcmp(s->args[i].name, arg->name) == 0) return fail(ps, "duplicate argument name");
    if (accept(ps, "=")) {
        oc_status st = parse_default(ps, arg);
        if (st) return st;
    } else if (s->num_args > 0 && s->args[s->num_args - 1].has_default && !keyword_only) {
        return fail(ps, "a positional argument without default follows one with a default");
    }
    s->num_args++;
    return OC_OK;
}

oc_status oc__schema_parse(const char *text, oc_schema *out)
{
    parser ps = {text, text};
    memset(out, 0, sizeof *out);
    if (!ident(&ps, out->name, sizeof out->name)) return fail(&ps, "expected the op name");
    if (strchr(out->name, '.')) {
        *strchr(out->name, '.') = '\0'; /* overload name: keep the base name */
    }
    if (!accept(&ps, "(")) return fail(&ps, "expected '('");
    bool keyword_only = false;
    if (!accept(&ps, ")")) {
        do {
            if (accept(&ps, "*")) {
                if (keyword_only) return fail(&ps, "'*' given twice");
                keyword_only = true;
                continue;
            }
            oc_status st = parse_arg(&ps, out, keyword_only);
            if (st) return st;
        } while (accept(&ps, ","));
        if (!accept(&ps, ")")) return fail(&ps, "expected ',' or ')'");
    }
    if (!accept(&ps, "->")) return fail(&ps, "expected '->' and the result type");
    if (!accept(&ps, "Tensor")) return fail(&ps, "the result must be 'Tensor'");
    skip_space(&ps);
    if (*ps.p) return fail(&ps, "unexpected text after the result type");
    return OC_OK;
}

void oc__schema_prototype(const oc_schema *s, const char *fn_name, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "oc_tensor *%s(", fn_name);
    for (int i = 0; i < s->num_args && n < len; i++) {
        const char *ct = oc__arg_c_type(s->args[i].type);
        const char *sep = ct[strlen(ct) - 1] == '*' ? "" : " ";
        n += (size_t)snprintf(buf + n, len - n, "%s%s%s%s", i ? ", " : "", ct, sep, s->args[i].name);
    }
    if (n < len && s->num_args == 0) n += (size_t)snprintf(buf + n, len - n, "void");
    if (n < len) snprintf(buf + n, len - n, ")");
}
