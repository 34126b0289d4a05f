/* Op schema parser: PyTorch's function-schema grammar, the part opcore's
 * kernels can take (see schema.h). Hand-written recursive descent.
 *
 * It is deliberately stricter than torch's parser where torch accepts text
 * it then misreads or refuses later (`int a=5.0`, `int a=0x10` read as 0,
 * `int[2] k=[1,2,3]`, `+5`, `inf`, `1e400`): every schema opcore accepts is
 * one torch registers exactly as written. */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "library/schema.h"

typedef struct parser {
    const char *text; /* whole schema, for messages */
    const char *p;
} parser;

static const struct {
    const char *spelling;
    oc_arg_type type;
} base_types[] = {
    {"Tensor", OC_ARG_TENSOR}, {"float", OC_ARG_FLOAT}, {"int", OC_ARG_INT},
    {"SymInt", OC_ARG_INT},    {"bool", OC_ARG_BOOL},   {"Scalar", OC_ARG_SCALAR},
    {"str", OC_ARG_STR},       {"ScalarType", OC_ARG_DTYPE}, {"Dict", OC_ARG_DICT},
};
#define NUM_BASE_TYPES (int)(sizeof base_types / sizeof base_types[0])

#define SUPPORTED_TYPES                                                                      \
    "Tensor, Tensor?, Tensor[], Tensor(a!), int, SymInt, int[], int[N], float, float[], " \
    "bool, Scalar, str, ScalarType, T? of these, and Dict"

const char *oc_arg_type_name(oc_arg_type type)
{
    switch (type) {
    case OC_ARG_TENSOR: return "Tensor";
    case OC_ARG_FLOAT: return "float";
    case OC_ARG_INT: return "int";
    case OC_ARG_BOOL: return "bool";
    case OC_ARG_SCALAR: return "Scalar";
    case OC_ARG_STR: return "str";
    case OC_ARG_DTYPE: return "ScalarType";
    case OC_ARG_TENSOR_LIST: return "Tensor[]";
    case OC_ARG_INT_LIST: return "int[]";
    case OC_ARG_FLOAT_LIST: return "float[]";
    case OC_ARG_DICT: return "Dict";
    case OC_ARG_NONE: return "None";
    }
    return "?";
}

const char *oc__arg_c_type(const oc_schema_arg *a)
{
    bool opt = a->optional;
    switch (a->type) {
    case OC_ARG_TENSOR: return a->is_mutable ? "oc_tensor *" : "const oc_tensor *";
    case OC_ARG_TENSOR_LIST: return a->is_mutable ? "oc_tensor_list_mut" : "oc_tensor_list";
    case OC_ARG_INT_LIST: return opt ? "const oc_int_list *" : "oc_int_list";
    case OC_ARG_FLOAT_LIST: return opt ? "const oc_float_list *" : "oc_float_list";
    case OC_ARG_FLOAT: return opt ? "const double *" : "double";
    case OC_ARG_INT: return opt ? "const int64_t *" : "int64_t";
    case OC_ARG_BOOL: return opt ? "const bool *" : "bool";
    case OC_ARG_SCALAR: return opt ? "const oc_scalar *" : "oc_scalar";
    case OC_ARG_STR: return "const char *";
    case OC_ARG_DTYPE: return opt ? "const oc_dtype *" : "oc_dtype";
    case OC_ARG_DICT: return "const oc_dict *";
    case OC_ARG_NONE: break;
    }
    return "?";
}

/* ---- lexing ----------------------------------------------------------------- */

static oc_status fail(parser *ps, const char *what)
{
    return oc_set_error(OC_EINVAL, "schema \"%s\": %s at column %d", ps->text, what,
                        (int)(ps->p - ps->text) + 1);
}

__attribute__((format(printf, 2, 3))) static oc_status failf(parser *ps, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fail(ps, msg);
}

static void skip_space(parser *ps)
{
    while (isspace((unsigned char)*ps->p)) ps->p++;
}

static bool peek(parser *ps, const char *tok)
{
    skip_space(ps);
    return strncmp(ps->p, tok, strlen(tok)) == 0;
}

static bool accept(parser *ps, const char *tok)
{
    if (!peek(ps, tok)) return false;
    ps->p += strlen(tok);
    return true;
}

/* identifier: [A-Za-z_][A-Za-z0-9_]* */
static bool ident(parser *ps, char *out, size_t len)
{
    skip_space(ps);
    const char *s = ps->p;
    if (!(isalpha((unsigned char)*s) || *s == '_')) return false;
    while (isalnum((unsigned char)*ps->p) || *ps->p == '_') ps->p++;
    size_t n = (size_t)(ps->p - s);
    if (n >= len) {
        ps->p = s;
        return false;
    }
    memcpy(out, s, n);
    out[n] = '\0';
    return true;
}

/* A number as torch's lexer reads it: -?(digits[.digits*] | .digits)([eE][+-]?digits)?
 * `is_int` when it has neither '.' nor an exponent. */
static bool number(parser *ps, double *f, long long *i, bool *is_int, bool *overflow)
{
    skip_space(ps);
    const char *s = ps->p, *q = s;
    if (*q == '-') q++;
    bool digits = isdigit((unsigned char)*q) != 0;
    while (isdigit((unsigned char)*q)) q++;
    bool frac = *q == '.';
    if (frac) {
        q++;
        bool fd = isdigit((unsigned char)*q) != 0;
        while (isdigit((unsigned char)*q)) q++;
        if (!digits && !fd) return false;
    } else if (!digits) {
        return false;
    }
    bool expo = false;
    if (*q == 'e' || *q == 'E') {
        const char *e = q + 1;
        if (*e == '+' || *e == '-') e++;
        if (!isdigit((unsigned char)*e)) return false;
        while (isdigit((unsigned char)*e)) e++;
        q = e;
        expo = true;
    }
    if (isalnum((unsigned char)*q) || *q == '_' || *q == '.') return false; /* 0x10, 1_000, 1e5.5 */
    char buf[128];
    size_t n = (size_t)(q - s);
    if (n >= sizeof buf) return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    *is_int = !frac && !expo;
    *overflow = false;
    errno = 0;
    if (*is_int) {
        *i = strtoll(buf, NULL, 10);
        *overflow = errno == ERANGE;
        *f = (double)*i;
    } else {
        *f = strtod(buf, NULL);
        *overflow = errno == ERANGE; /* underflow too: torch's parser (std::stod) refuses it */
    }
    ps->p = q;
    return true;
}

/* ---- defaults --------------------------------------------------------------- */

static oc_status number_default(parser *ps, oc_schema_arg *a, oc_arg_type want, oc_value *out)
{
    double f;
    long long i;
    bool is_int, overflow;
    const char *at = ps->p;
    skip_space(ps);
    if (*ps->p == '+') return fail(ps, "a default may not start with '+' (torch rejects it): write 5, not +5");
    if (strncmp(ps->p, "inf", 3) == 0 || strncmp(ps->p, "nan", 3) == 0 || strncmp(ps->p, "-inf", 4) == 0)
        return failf(ps, "argument '%s': torch's schema grammar has no inf or nan literal; give no "
                         "default and handle it in the kernel, or use a large finite number", a->name);
    if (!number(ps, &f, &i, &is_int, &overflow)) {
        ps->p = at;
        return failf(ps, "argument '%s': expected %s default", a->name,
                     want == OC_ARG_INT ? "an integer (e.g. 1, -3) as" : "a number (e.g. 0.5, 1e-05, 3) as");
    }
    if (overflow && !is_int && fabs(f) <= 1.0)
        return failf(ps, "argument '%s': default %.*s is too small for a double: below %g it loses precision "
                     "or becomes 0, and torch's schema parser refuses it; write 0.0, or a value of at least %g",
                     a->name, (int)(ps->p - at), at, DBL_MIN, DBL_MIN);
    if (overflow)
        return failf(ps, "argument '%s': default out of range (%s)", a->name,
                     is_int ? "an int is a signed 64-bit integer" : "a float is a double");
    if (want == OC_ARG_INT) {
        if (!is_int) return failf(ps, "argument '%s': an int default must be an integer, got %g", a->name, f);
        *out = oc_value_int(i);
    } else if (want == OC_ARG_FLOAT) {
        *out = oc_value_float(f);
    } else { /* Scalar */
        *out = oc_value_scalar(is_int ? oc_scalar_int(i) : oc_scalar_float(f));
    }
    return OC_OK;
}

static oc_status string_default(parser *ps, oc_schema_arg *a)
{
    skip_space(ps);
    char quote = *ps->p;
    if (quote != '"' && quote != '\'')
        return failf(ps, "argument '%s': expected a quoted string default (\"mean\")", a->name);
    ps->p++;
    size_t n = 0;
    while (*ps->p && *ps->p != quote) {
        char c = *ps->p++;
        if (c == '\\') {
            c = *ps->p++;
            switch (c) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case '\\': case '\'': case '"': break;
            default: return failf(ps, "argument '%s': unsupported escape in a string default", a->name);
            }
        }
        if (n + 1 >= sizeof a->default_str)
            return failf(ps, "argument '%s': string default too long (at most %d bytes)", a->name,
                         OC_MAX_STR_DEFAULT - 1);
        a->default_str[n++] = c;
    }
    if (*ps->p != quote) return failf(ps, "argument '%s': unterminated string default", a->name);
    ps->p++;
    a->default_str[n] = '\0';
    return OC_OK;
}

static oc_status list_default(parser *ps, oc_schema_arg *a)
{
    oc_arg_type item = a->type == OC_ARG_INT_LIST ? OC_ARG_INT : OC_ARG_FLOAT;
    oc_value v;
    if (!peek(ps, "[")) {
        /* int[2] stride=1 means [1, 1]; torch allows that only with a length */
        if (!a->list_len)
            return failf(ps, "argument '%s': a %s default is a list such as [1, 1] (a single "
                             "number needs a fixed length: %s[2] %s=1)",
                         a->name, a->type_text, item == OC_ARG_INT ? "int" : "float", a->name);
        if (a->list_len > OC_MAX_LIST_DEFAULT) /* found by fuzzing: int[404] s=2 overran the array */
            return failf(ps, "argument '%s': a single-number default fills at most %d items, not %lld",
                         a->name, OC_MAX_LIST_DEFAULT, (long long)a->list_len);
        oc_status st = number_default(ps, a, item, &v);
        if (st) return st;
        a->default_count = a->list_len;
        for (int64_t k = 0; k < a->list_len; k++) {
            if (item == OC_ARG_INT) a->default_list.ints[k] = v.v.i;
            else a->default_list.floats[k] = v.v.f;
        }
        return OC_OK;
    }
    accept(ps, "[");
    a->default_count = 0;
    if (!accept(ps, "]")) {
        do {
            if (a->default_count == OC_MAX_LIST_DEFAULT)
                return failf(ps, "argument '%s': list default too long (at most %d items)", a->name,
                             OC_MAX_LIST_DEFAULT);
            oc_status st = number_default(ps, a, item, &v);
            if (st) return st;
            if (item == OC_ARG_INT) a->default_list.ints[a->default_count++] = v.v.i;
            else a->default_list.floats[a->default_count++] = v.v.f;
        } while (accept(ps, ","));
        if (!accept(ps, "]")) return failf(ps, "argument '%s': expected ',' or ']' in the list default", a->name);
    }
    if (a->list_len && a->default_count != a->list_len)
        return failf(ps, "argument '%s': %s default has %lld item%s, expected %lld", a->name, a->type_text,
                     (long long)a->default_count, a->default_count == 1 ? "" : "s", (long long)a->list_len);
    return OC_OK;
}

static oc_status parse_default(parser *ps, oc_schema_arg *a)
{
    a->has_default = true;
    if (accept(ps, "None")) {
        if (!a->optional)
            return failf(ps, "argument '%s': only an optional argument can default to None: write %s? %s=None",
                         a->name, a->type_text, a->name);
        a->default_none = true;
        return OC_OK;
    }
    switch (a->type) {
    case OC_ARG_BOOL:
        if (accept(ps, "True")) a->default_scalar = oc_value_bool(true);
        else if (accept(ps, "False")) a->default_scalar = oc_value_bool(false);
        else return failf(ps, "argument '%s': expected True or False as a bool default", a->name);
        return OC_OK;
    case OC_ARG_INT:
    case OC_ARG_FLOAT:
        return number_default(ps, a, a->type, &a->default_scalar);
    case OC_ARG_SCALAR:
        if (accept(ps, "True")) a->default_scalar = oc_value_scalar(oc_scalar_bool(true));
        else if (accept(ps, "False")) a->default_scalar = oc_value_scalar(oc_scalar_bool(false));
        else return number_default(ps, a, OC_ARG_SCALAR, &a->default_scalar);
        return OC_OK;
    case OC_ARG_STR:
        return string_default(ps, a);
    case OC_ARG_INT_LIST:
    case OC_ARG_FLOAT_LIST:
        return list_default(ps, a);
    case OC_ARG_DTYPE:
        return failf(ps, "argument '%s': a ScalarType default can only be None: write "
                         "ScalarType? %s=None and pick the dtype in the shape function", a->name, a->name);
    case OC_ARG_DICT: /* parse_type refuses Dict? and the grammar has no dictionary literal */
    case OC_ARG_TENSOR:
    case OC_ARG_TENSOR_LIST:
        return failf(ps, "argument '%s': a tensor argument can default only to None, as a Tensor? "
                         "(Tensor? %s=None)", a->name, a->name);
    case OC_ARG_NONE: break;
    }
    return fail(ps, "unexpected default");
}

bool oc__schema_default(const oc_schema_arg *a, oc_value *out)
{
    if (!a->has_default) return false;
    if (a->default_none) *out = oc_value_none();
    else if (a->type == OC_ARG_STR) *out = oc_value_str(a->default_str);
    else if (a->type == OC_ARG_INT_LIST) *out = oc_value_ints(a->default_list.ints, a->default_count);
    else if (a->type == OC_ARG_FLOAT_LIST) *out = oc_value_floats(a->default_list.floats, a->default_count);
    else *out = a->default_scalar;
    return true;
}

/* ---- types ------------------------------------------------------------------ */

/* "(a!)" after Tensor: the alias set. */
static oc_status parse_alias(parser *ps, char *set, size_t len, bool *is_mutable, const char *what)
{
    *is_mutable = false;
    set[0] = '\0';
    if (!accept(ps, "(")) return OC_OK;
    if (!ident(ps, set, len)) return failf(ps, "expected an alias set name in %s: Tensor(a!)", what);
    if (!accept(ps, "!"))
        return failf(ps, "%s: Tensor(%s) without '!' is a view of an input; opcore ops cannot "
                         "return views: write Tensor(%s!) for a tensor the op writes in place, or "
                         "plain Tensor for a new one", what, set, set);
    if (!accept(ps, ")")) return failf(ps, "expected ')' after '!' in %s", what);
    *is_mutable = true;
    return OC_OK;
}

static oc_status parse_type(parser *ps, oc_schema_arg *a)
{
    char base[OC_MAX_NAME];
    const char *start = ps->p;
    if (!ident(ps, base, sizeof base)) {
        if (peek(ps, ")") || peek(ps, ","))
            return fail(ps, "expected an argument (a type and a name, e.g. Tensor x)");
        return fail(ps, "expected an argument type (" SUPPORTED_TYPES ")");
    }
    int t = 0;
    while (t < NUM_BASE_TYPES && strcmp(base_types[t].spelling, base) != 0) t++;
    if (t == NUM_BASE_TYPES) {
        ps->p = start;
        skip_space(ps);
        return failf(ps, "unknown type '%s' (opcore supports " SUPPORTED_TYPES ")", base);
    }
    a->type = base_types[t].type;
    char what[OC_MAX_NAME + 32];
    snprintf(what, sizeof what, "an argument of type %s", base);
    oc_status st = parse_alias(ps, a->alias_set, sizeof a->alias_set, &a->is_mutable, what);
    if (st) return st;
    if (a->is_mutable && a->type != OC_ARG_TENSOR)
        return fail(ps, "only Tensor arguments can be written in place (Tensor(a!))");
    char dims[32] = "";
    if (accept(ps, "[")) {
        skip_space(ps);
        if (isdigit((unsigned char)*ps->p)) {
            char *end;
            errno = 0;
            long long n = strtoll(ps->p, &end, 10);
            if (errno || n < 1 || n > 1024)
                return failf(ps, "%s[%.*s]: a list length must be 1 to 1024; for a longer list write %s[] and "
                             "check its length in the shape function", base, (int)(end - ps->p), ps->p, base);
            a->list_len = n;
            ps->p = end;
        }
        if (!accept(ps, "]")) return fail(ps, "expected ']' after a list type (int[] or int[2])");
        switch (a->type) {
        case OC_ARG_TENSOR:
            if (a->list_len) return fail(ps, "a Tensor list has no fixed length: write Tensor[]");
            a->type = OC_ARG_TENSOR_LIST;
            break;
        case OC_ARG_INT: a->type = OC_ARG_INT_LIST; break;
        case OC_ARG_FLOAT: a->type = OC_ARG_FLOAT_LIST; break;
        default:
            return failf(ps, "lists of %s are not supported (opcore lists: Tensor[], int[], int[N], "
                             "float[], float[N])", base);
        }
        if (a->list_len) snprintf(dims, sizeof dims, "[%lld]", (long long)a->list_len);
        else snprintf(dims, sizeof dims, "[]");
    }
    if (a->type == OC_ARG_DICT && (peek(ps, "?") || a->list_len || dims[0]))
        return fail(ps, "a Dict argument is neither optional nor a list (Dict? and Dict[] are not supported: "
                        "pass an empty dictionary for no settings)");
    if (accept(ps, "?")) {
        if (a->type == OC_ARG_TENSOR_LIST)
            return fail(ps, "an optional Tensor list (Tensor[]?) is not supported: use Tensor[] "
                            "and pass an empty list");
        if (a->is_mutable && a->type == OC_ARG_TENSOR)
            return fail(ps, "an optional in-place tensor (Tensor(a!)?) is not supported");
        a->optional = true;
    }
    if (peek(ps, "[") || peek(ps, "?"))
        return fail(ps, "nested optional/list types (Tensor?[], int[][]) are not supported");
    snprintf(a->type_text, sizeof a->type_text, "%.12s%s%.15s%s%.20s%s", base, a->is_mutable ? "(" : "",
             a->alias_set, a->is_mutable ? "!)" : "", dims, a->optional ? "?" : "");
    return OC_OK;
}

static oc_status parse_arg(parser *ps, oc_schema *s, bool keyword_only)
{
    if (s->num_args == OC_MAX_ARGS) return failf(ps, "too many arguments (at most %d)", OC_MAX_ARGS);
    oc_schema_arg *arg = &s->args[s->num_args];
    memset(arg, 0, sizeof *arg);
    oc_status st = parse_type(ps, arg);
    if (st) return st;
    arg->keyword_only = keyword_only;
    if (!ident(ps, arg->name, sizeof arg->name)) {
        if (peek(ps, "[") || peek(ps, "?"))
            return fail(ps, "expected an argument name");
        return failf(ps, "expected a name for the %s argument", arg->type_text);
    }
    for (int i = 0; i < s->num_args; i++)
        if (strcmp(s->args[i].name, arg->name) == 0) return failf(ps, "duplicate argument name '%s'", arg->name);
    if (arg->is_mutable)
        for (int i = 0; i < s->num_args; i++)
            if (s->args[i].is_mutable && strcmp(s->args[i].alias_set, arg->alias_set) == 0)
                return failf(ps, "arguments '%s' and '%s' share the alias set (%s!); give each "
                                 "in-place argument its own letter",
                             s->args[i].name, arg->name, arg->alias_set);
    if (arg->type == OC_ARG_DICT && peek(ps, "="))
        return failf(ps, "argument '%s': a Dict argument has no default (the schema grammar has no "
                         "dictionary literal): callers pass one, {} for none", arg->name);
    if (accept(ps, "=")) {
        st = parse_default(ps, arg);
        if (st) return st;
    } else if (s->num_args > 0 && s->args[s->num_args - 1].has_default && !keyword_only) {
        return failf(ps, "argument '%s' has no default but follows one that has (make it "
                         "keyword-only with '*', or give it a default)", arg->name);
    }
    s->num_args++;
    return OC_OK;
}

/* ---- results ------------------------------------------------------------------ */

static oc_status parse_result(parser *ps, oc_schema *s)
{
    if (s->num_results == OC_MAX_RESULTS) return failf(ps, "too many results (at most %d)", OC_MAX_RESULTS);
    oc_schema_result *r = &s->results[s->num_results];
    memset(r, 0, sizeof *r);
    r->alias_arg = -1;
    char base[OC_MAX_NAME];
    const char *start = ps->p;
    if (!ident(ps, base, sizeof base) || strcmp(base, "Tensor") != 0) {
        ps->p = start;
        skip_space(ps);
        return fail(ps, "a result must be Tensor (results: Tensor, (Tensor, Tensor, ...), () "
                        "or Tensor(a!) for an argument written in place)");
    }
    char set[16];
    bool is_mutable;
    oc_status st = parse_alias(ps, set, sizeof set, &is_mutable, "a result");
    if (st) return st;
    if (peek(ps, "[") || peek(ps, "?"))
        return fail(ps, "a result must be a single Tensor: list (Tensor[]) and optional results "
                        "are not supported");
    if (is_mutable) {
        for (int i = 0; i < s->num_args && r->alias_arg < 0; i++)
            if (s->args[i].is_mutable && s->args[i].type == OC_ARG_TENSOR && strcmp(s->args[i].alias_set, set) == 0)
                r->alias_arg = i;
        if (r->alias_arg < 0)
            return failf(ps, "result Tensor(%s!) names no Tensor(%s!) argument", set, set);
        for (int i = 0; i < s->num_results; i++)
            if (s->results[i].alias_arg == r->alias_arg)
                return failf(ps, "argument '%s' is returned twice", s->args[r->alias_arg].name);
    }
    skip_space(ps);
    if (isalpha((unsigned char)*ps->p) || *ps->p == '_') {
        if (!ident(ps, r->name, sizeof r->name)) return fail(ps, "expected a result name");
        for (int i = 0; i < s->num_results; i++)
            if (strcmp(s->results[i].name, r->name) == 0) return failf(ps, "duplicate result name '%s'", r->name);
    }
    s->num_results++;
    return OC_OK;
}

static oc_status parse_results(parser *ps, oc_schema *s)
{
    if (accept(ps, "(")) {
        if (accept(ps, ")")) return OC_OK; /* () */
        do {
            oc_status st = parse_result(ps, s);
            if (st) return st;
        } while (accept(ps, ","));
        if (!accept(ps, ")")) return fail(ps, "expected ',' or ')' in the results");
        return OC_OK;
    }
    return parse_result(ps, s);
}

oc_status oc__schema_parse(const char *text, oc_schema *out)
{
    parser ps = {text ? text : "", text ? text : ""};
    memset(out, 0, sizeof *out);
    if (!text) return fail(&ps, "no schema");
    if (!ident(&ps, out->name, sizeof out->name)) return fail(&ps, "expected the op name");
    if (peek(&ps, "::"))
        return fail(&ps, "write the op name without a namespace: the library's name (OC_LIBRARY) is the namespace");
    if (peek(&ps, "."))
        return fail(&ps, "overload names (op.overload) are not supported: give each op its own name");
    if (!accept(&ps, "(")) {
        skip_space(&ps);
        if (!*ps.p)
            return failf(&ps, "a schema is the op's signature, not just its name: write e.g. "
                              "\"%s(Tensor x) -> Tensor\"", out->name);
        return fail(&ps, "expected '(' after the op name (a schema reads \"name(Tensor x, float "
                         "alpha=1.0) -> Tensor\")");
    }
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
    if (!accept(&ps, "->")) return fail(&ps, "expected '->' and the results (e.g. -> Tensor)");
    oc_status st = parse_results(&ps, out);
    if (st) return st;
    skip_space(&ps);
    if (*ps.p) return fail(&ps, "unexpected text after the results");
    return OC_OK;
}

/* ---- what the C side sees ------------------------------------------------------- */

int oc__schema_fresh_results(const oc_schema *s)
{
    int n = 0;
    for (int i = 0; i < s->num_results; i++) n += s->results[i].alias_arg < 0;
    return n;
}

bool oc__schema_returns_tensor(const oc_schema *s)
{
    return s->num_results == 1 && s->results[0].alias_arg < 0;
}

void oc__schema_prototype(const oc_schema *s, const char *fn_name, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "%s%s(", oc__schema_returns_tensor(s) ? "oc_tensor *" : "void ",
                                fn_name);
    for (int i = 0; i < s->num_args && n < len; i++) {
        const char *ct = oc__arg_c_type(&s->args[i]);
        const char *sep = ct[strlen(ct) - 1] == '*' || !s->args[i].name[0] ? "" : " ";
        n += (size_t)snprintf(buf + n, len - n, "%s%s%s%s", i ? ", " : "", ct, sep, s->args[i].name);
    }
    if (n < len && s->num_args == 0) n += (size_t)snprintf(buf + n, len - n, "void");
    if (n < len) snprintf(buf + n, len - n, ")");
}

oc_status oc_schema_check(const char *schema, char *prototype, size_t len)
{
    oc_schema *s = oc__malloc(sizeof *s); /* large: keep it off small stacks */
    if (!s) return oc_set_error(OC_ENOMEM, "oc_schema_check: out of memory");
    oc_status st = oc__schema_parse(schema, s);
    if (st == OC_OK && prototype && len) oc__schema_prototype(s, s->name, prototype, len);
    oc__free(s);
    return st;
}
