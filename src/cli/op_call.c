/* Calling an op from the command line: inputs, a reused output, timing
 * (what `opcore run` and `opcore bench` share; see op_call.h). */
#include <complex.h>
#include <getopt.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/op_call.h"

const char cli_inputs_help[] =
    "  -s, --shape 2,3        shape of the Tensor arguments (repeat for the 1st, 2nd,\n"
    "                         ... tensor; the last one given is reused; default 2,3)\n"
    "  -d, --dtype float32    dtype of the Tensor arguments (repeatable like --shape)\n"
    "  -a, --arg NAME=VALUE   value of an argument: a number (float, int, Scalar), true\n"
    "                         or false, 1,2 for int[] and float[], a word for str, a\n"
    "                         dtype name for ScalarType, none for None (T?); for a\n"
    "                         Tensor, a constant to fill it with (or 'random'); for a\n"
    "                         Tensor[], how many tensors (default 2)\n"
    "      --seed N           seed of the random inputs (default 1)\n"
    "      --grid 2,2         launch the kernel on this grid of program instances (1 to\n"
    "                         3 axes), instead of the op's own grid\n";

/* ---- element values --------------------------------------------------------- */

static double load(const void *p, oc_dtype t)
{
    switch (t) {
    case OC_FLOAT32: return *(const float *)p;
    case OC_FLOAT64: return *(const double *)p;
    case OC_FLOAT16: return oc_half_to_f32(*(const oc_half *)p);
    case OC_BFLOAT16: return oc_bf16_to_f32(*(const oc_bfloat16 *)p);
    case OC_INT8: return *(const int8_t *)p;
    case OC_INT16: return *(const int16_t *)p;
    case OC_INT32: return *(const int32_t *)p;
    case OC_INT64: return (double)*(const int64_t *)p;
    case OC_UINT8: return *(const uint8_t *)p;
    case OC_BOOL: return *(const bool *)p;
    default: return NAN;
    }
}

static void store(void *p, oc_dtype t, double v)
{
    switch (t) {
    case OC_FLOAT32: *(float *)p = (float)v; break;
    case OC_FLOAT64: *(double *)p = v; break;
    case OC_FLOAT16: *(oc_half *)p = oc_f32_to_half((float)v); break;
    case OC_BFLOAT16: *(oc_bfloat16 *)p = oc_f32_to_bf16((float)v); break;
    case OC_INT8: *(int8_t *)p = (int8_t)v; break;
    case OC_INT16: *(int16_t *)p = (int16_t)v; break;
    case OC_INT32: *(int32_t *)p = (int32_t)v; break;
    case OC_INT64: *(int64_t *)p = (int64_t)v; break;
    case OC_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case OC_BOOL: *(bool *)p = v != 0; break;
    default: break;
    }
}

/* A complex element [re, im] (opcore/dtype.h); false for a real dtype. */
static bool load_complex(const void *p, oc_dtype t, double *re, double *im)
{
    if (t == OC_COMPLEX64) {
        const oc_complex64 z = *(const oc_complex64 *)p;
        *re = crealf(z), *im = cimagf(z);
    } else if (t == OC_COMPLEX128) {
        const oc_complex128 z = *(const oc_complex128 *)p;
        *re = creal(z), *im = cimag(z);
    } else {
        return false;
    }
    return true;
}

static void store_complex(void *p, oc_dtype t, double re, double im)
{
    if (t == OC_COMPLEX64) *(oc_complex64 *)p = CMPLXF((float)re, (float)im);
    else *(oc_complex128 *)p = CMPLX(re, im);
}

static uint64_t rng_state;

static uint64_t rng(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static double random_value(oc_dtype t)
{
    double u = (double)(rng() >> 11) / 9007199254740992.0; /* [0, 1) */
    if (oc_dtype_is_floating(t) || oc_dtype_is_complex(t)) return u * 2.0 - 1.0;
    if (t == OC_BOOL) return u < 0.5;
    if (t == OC_UINT8) return floor(u * 21.0);
    return floor(u * 21.0) - 10.0;
}

void cli_print_values(const char *label, const oc_tensor *t, bool all)
{
    int64_t n = oc_numel(t), shown = all ? (n < 10000 ? n : 10000) : (n < 8 ? n : 8);
    printf("  %s[", label);
    for (int64_t i = 0; i < shown; i++) {
        double re, im;
        if (load_complex(oc_flat_ptr(t, i), t->dtype, &re, &im)) /* as NumPy prints it: 0.5-1j */
            printf("%s%.6g%+.6gj", i ? ", " : "", re, im);
        else
            printf("%s%.6g", i ? ", " : "", load(oc_flat_ptr(t, i), t->dtype));
    }
    printf("%s]\n", shown < n ? ", ..." : "");
}

/* ---- parsing ------------------------------------------------------------------ */

static int parse_shape(const char *s, int *ndim, int64_t *sizes)
{
    *ndim = 0;
    if (strcmp(s, "") == 0 || strcmp(s, "scalar") == 0 || strcmp(s, "()") == 0) return 0;
    const char *p = s;
    for (;;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || *ndim >= OC_MAX_DIMS) return -1;
        sizes[(*ndim)++] = v;
        if (*end == '\0') return 0;
        if (*end != ',' && *end != 'x') return -1;
        p = end + 1;
    }
}

static bool parse_bool(const char *s, bool *out)
{
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "1")) return *out = true, true;
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "0")) return *out = false, true;
    return false;
}

static bool parse_number(const char *s, double *out)
{
    char *end;
    *out = strtod(s, &end);
    return end != s && *end == '\0';
}

/* A complex as Python and NumPy write it: "1.5", "2j", "1.5-2j", "(1+2j)". */
static bool parse_complex(const char *s, double *re, double *im)
{
    char buf[128], *end;
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '(' && s[n - 1] == ')' && n - 2 < sizeof buf) {
        memcpy(buf, s + 1, n - 2);
        buf[n - 2] = '\0';
        s = buf;
    }
    double a = strtod(s, &end);
    if (end == s) return false;
    if (*end == '\0') return *re = a, *im = 0, true;
    if ((*end == 'j' || *end == 'J') && end[1] == '\0') return *re = 0, *im = a, true;
    const char *p = end;
    if (*p != '+' && *p != '-') return false;
    double b = strtod(p, &end);
    if (end == p || (*end != 'j' && *end != 'J') || end[1] != '\0') return false;
    return *re = a, *im = b, true;
}

static bool parse_int(const char *s, long long *out)
{
    char *end;
    *out = strtoll(s, &end, 0);
    return end != s && *end == '\0';
}

static bool is_none(const char *s) { return !strcmp(s, "none") || !strcmp(s, "None"); }

/* Does --arg `def` ("NAME=VALUE") name the argument `aname`? */
static bool names_arg(const char *def, const char *aname)
{
    size_t len = (size_t)(strchr(def, '=') - def);
    return strlen(aname) == len && !strncmp(aname, def, len);
}

int cli_inputs_option(const char *cmd, cli_inputs *in, int c, const char *arg)
{
    char *end;
    switch (c) {
    case 's':
        if (in->nshapes == CLI_MAX_ARGS) return cli_usage_error(cmd, "too many --shape options");
        in->shapes[in->nshapes++] = arg;
        return CLI_OK;
    case 'd':
        if (in->ndtypes == CLI_MAX_ARGS) return cli_usage_error(cmd, "too many --dtype options");
        in->dtypes[in->ndtypes++] = arg;
        return CLI_OK;
    case 'a':
        if (in->nargdefs == CLI_MAX_ARGS) return cli_usage_error(cmd, "too many --arg options");
        if (!strchr(arg, '=')) return cli_usage_error(cmd, "--arg '%s' is not NAME=VALUE", arg);
        in->argdefs[in->nargdefs++] = arg;
        return CLI_OK;
    case 'G': {
        int ndim = 0;
        int64_t dims[OC_MAX_DIMS];
        if (parse_shape(arg, &ndim, dims) != 0 || ndim < 1 || ndim > OC_MAX_GRID_DIMS)
            return cli_usage_error(cmd, "--grid '%s' is not 1 to %d sizes like 2,2", arg, OC_MAX_GRID_DIMS);
        in->grid.ndim = ndim;
        memcpy(in->grid.dims, dims, (size_t)ndim * sizeof *dims);
        return CLI_OK;
    }
    case 'S':
        in->seed = strtoull(arg, &end, 0);
        if (end == arg || *end) return cli_usage_error(cmd, "--seed '%s' is not a number", arg);
        return CLI_OK;
    default: return -1;
    }
}

int cli_other_option(const char *cmd, int c, int argc, char **argv, const char *head, const char *tail)
{
    if (c == 'h') {
        fputs(head, stdout);
        fputs(cli_inputs_help, stdout);
        fputs(tail, stdout);
        return CLI_OK;
    }
    if (c == ':') return cli_usage_error(cmd, "option '%s' requires an argument", argv[optind - 1]);
    return cli_usage_error(cmd, "unrecognized option '%s'", cli_bad_option(argc, argv));
}

int cli_parse_count(const char *cmd, const char *option, const char *arg, long max, long *out)
{
    char *end;
    *out = strtol(arg, &end, 10);
    if (end == arg || *end || *out < 1 || *out > max)
        return cli_usage_error(cmd, "%s '%s' is not a positive count", option, arg);
    return CLI_OK;
}

/* ---- preparing a call ----------------------------------------------------------- */

static const char *given_value(const cli_inputs *in, const char *aname)
{
    const char *given = NULL; /* the last --arg NAME=... wins */
    for (int k = 0; k < in->nargdefs; k++)
        if (names_arg(in->argdefs[k], aname)) given = strchr(in->argdefs[k], '=') + 1;
    return given;
}

/* What cli_call_prepare works from: the options, parsed. */
typedef struct prep {
    const char *cmd;
    const cli_inputs *in;
    int ndims[CLI_MAX_ARGS];
    int64_t sizes[CLI_MAX_ARGS][OC_MAX_DIMS];
    oc_dtype dtypes[CLI_MAX_ARGS];
    bool print_all; /* print every value of the tensors made */
} prep;

/* A random (or --arg-filled) tensor for argument i, the next --shape and
 * --dtype; `*made` points at it. */
static int make_tensor(const prep *pp, cli_call *call, int i, const char *given, oc_tensor **made)
{
    const char *cmd = pp->cmd, *aname = oc_op_arg_name(call->op, i);
    const cli_inputs *in = pp->in;
    if (given && !strcmp(given, "random")) given = NULL;
    if (call->ntensors == CLI_MAX_TENSORS)
        return cli_usage_error(cmd, "more than %d tensors in one call", CLI_MAX_TENSORS);
    int nt = call->ntensors;
    int si = in->nshapes ? (nt < in->nshapes ? nt : in->nshapes - 1) : -1;
    int di = in->ndtypes ? (nt < in->ndtypes ? nt : in->ndtypes - 1) : -1;
    static const int64_t def_sizes[2] = {2, 3};
    const int64_t *sz = si >= 0 ? pp->sizes[si] : def_sizes;
    int nd = si >= 0 ? pp->ndims[si] : 2;
    oc_dtype dt = di >= 0 ? pp->dtypes[di] : OC_FLOAT32;
    double num = 0, num_im = 0;
    const bool cplx = oc_dtype_is_complex(dt);
    if (given && !(cplx ? parse_complex(given, &num, &num_im) : parse_number(given, &num)))
        return cli_usage_error(cmd, "--arg %s=%s: a Tensor argument takes a number to fill it with%s", aname,
                               given, cplx ? " (complex: 1.5, 2j, 1.5-2j)" : "");
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= sz[d];
    call->datas[nt] = calloc((size_t)(n ? n : 1), oc_dtype_size(dt));
    if (!call->datas[nt]) {
        fprintf(stderr, "opcore %s: out of memory for argument '%s'\n", cmd, aname);
        return CLI_FAIL;
    }
    call->ntensors++;
    oc_tensor *t = &call->tensors[nt];
    if (oc_tensor_init(t, call->datas[nt], dt, nd, sz) != OC_OK) {
        fprintf(stderr, "opcore %s: argument '%s': %s\n", cmd, aname, oc_errmsg());
        return CLI_FAIL;
    }
    for (int64_t e = 0; e < n; e++) {
        if (!cplx) store(oc_flat_ptr(t, e), dt, given ? num : random_value(dt));
        else if (given) store_complex(oc_flat_ptr(t, e), dt, num, num_im);
        else store_complex(oc_flat_ptr(t, e), dt, random_value(dt), random_value(dt));
    }
    *made = t;
    call->in_bytes += oc_nbytes(t);
    char shp[256];
    printf("  input  %-8s %s %s\n", aname, oc_dtype_name(dt), oc_shape_str(t, shp, sizeof shp));
    if (pp->print_all) cli_print_values("         ", t, true);
    return CLI_OK;
}

/* A scalar argument from --arg NAME=VALUE (`given`) or its default. */
static int make_scalar(const prep *pp, cli_call *call, int i, const char *given)
{
    const oc_op *op = call->op;
    const char *aname = oc_op_arg_name(op, i);
    if (oc_op_arg_type(op, i) == OC_ARG_DICT) /* no syntax for one (and no default) */
        return cli_usage_error(pp->cmd, "op '%s': argument '%s' is a Dict, which the command line cannot give; "
                               "call the op from Python or C", oc_op_qualname(op), aname);
    if (!given) {
        if (!oc_op_arg_default(op, i, &call->args[i]))
            return cli_usage_error(pp->cmd, "op '%s' needs a value for argument '%s' (%s); give --arg %s=VALUE",
                                   oc_op_qualname(op), aname, oc_op_schema(op), aname);
        printf("  input  %-8s (default)\n", aname);
        return CLI_OK;
    }
    bool ok = true, bv;
    double num;
    long long v;
    char *end;
    if (oc_op_arg_optional(op, i) && is_none(given)) {
        call->args[i] = oc_value_none();
        printf("  input  %-8s None\n", aname);
        return CLI_OK;
    }
    switch (oc_op_arg_type(op, i)) {
    case OC_ARG_STR: call->args[i] = oc_value_str(given); break;
    case OC_ARG_DTYPE: {
        oc_dtype dt;
        ok = oc_dtype_from_name(given, &dt);
        call->args[i] = oc_value_dtype(dt);
        break;
    }
    case OC_ARG_INT_LIST:
    case OC_ARG_FLOAT_LIST: {
        bool ints = oc_op_arg_type(op, i) == OC_ARG_INT_LIST;
        int64_t n = 0;
        for (const char *p = given; ok && *p; n++) {
            if (n == CLI_MAX_ITEMS) {
                ok = false;
                break;
            }
            if (ints) call->ints[i][n] = strtoll(p, &end, 0);
            else call->floats[i][n] = strtod(p, &end);
            ok = end != p && (*end == ',' || *end == '\0');
            p = *end ? end + 1 : end;
        }
        call->args[i] = ints ? oc_value_ints(call->ints[i], n) : oc_value_floats(call->floats[i], n);
        break;
    }
    case OC_ARG_FLOAT: ok = parse_number(given, &num); call->args[i] = oc_value_float(num); break;
    case OC_ARG_INT: ok = parse_int(given, &v); call->args[i] = oc_value_int(v); break;
    case OC_ARG_BOOL: ok = parse_bool(given, &bv); call->args[i] = oc_value_bool(bv); break;
    case OC_ARG_SCALAR:
        if (parse_bool(given, &bv) && strcmp(given, "0") && strcmp(given, "1"))
            call->args[i] = oc_value_scalar(oc_scalar_bool(bv));
        else if (strpbrk(given, ".eEnN") && parse_number(given, &num))
            call->args[i] = oc_value_scalar(oc_scalar_float(num));
        else {
            ok = parse_int(given, &v);
            call->args[i] = oc_value_scalar(oc_scalar_int(v));
        }
        break;
    default: ok = false;
    }
    if (!ok)
        return cli_usage_error(pp->cmd, "--arg %s=%s: not a valid value for this argument (%s)", aname, given,
                               oc_op_schema(op));
    printf("  input  %-8s %s\n", aname, given);
    return CLI_OK;
}

/* Argument i: tensors (Tensor, Tensor?, Tensor[] of --arg N tensors) made,
 * the rest parsed from --arg or their defaults. */
static int make_arg(const prep *pp, cli_call *call, int i)
{
    const oc_op *op = call->op;
    const char *aname = oc_op_arg_name(op, i), *given = given_value(pp->in, aname);
    oc_arg_type type = oc_op_arg_type(op, i);
    oc_tensor *t;
    if (type == OC_ARG_TENSOR) {
        bool none = oc_op_arg_optional(op, i) && (given ? is_none(given) : oc_op_arg_default(op, i, NULL));
        if (none) {
            call->args[i] = oc_value_none();
            printf("  input  %-8s None%s\n", aname, given ? "" : " (default; --arg NAME=random for a tensor)");
            return CLI_OK;
        }
        int rc = make_tensor(pp, call, i, given, &t);
        if (rc == CLI_OK) call->args[i] = oc_value_tensor(t);
        return rc;
    }
    if (type == OC_ARG_TENSOR_LIST) {
        char *end;
        long n = given ? strtol(given, &end, 10) : 2;
        if (given && (end == given || *end || n < 0 || n > CLI_MAX_TENSORS))
            return cli_usage_error(pp->cmd, "--arg %s=%s: a Tensor[] takes how many tensors to make (0 to %d)",
                                   aname, given, CLI_MAX_TENSORS);
        oc_tensor *first = &call->tensors[call->ntensors];
        for (long k = 0; k < n; k++) {
            int rc = make_tensor(pp, call, i, NULL, &t);
            if (rc != CLI_OK) return rc;
        }
        call->args[i] = oc_value_tensors(first, n);
        return CLI_OK;
    }
    return make_scalar(pp, call, i, given);
}

static const oc_op *find_op(oc_library *lib, const char *opname)
{
    if (strstr(opname, "::")) return oc_op_find(opname);
    for (int i = 0; i < oc_library_num_ops(lib); i++)
        if (strcmp(oc_op_name(oc_library_op(lib, i)), opname) == 0) return oc_library_op(lib, i);
    return NULL;
}

int cli_call_prepare(const char *cmd, const cli_inputs *in, int argc, char **argv, bool print_all,
                     cli_call *call)
{
    memset(call, 0, sizeof *call);
    /* Check the options before touching the library. */
    if (argc - optind < 2) return cli_usage_error(cmd, "expected LIB.so and OP");
    if (argc - optind > 2) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind + 2]);
    const char *path = argv[optind], *opname = argv[optind + 1];
    prep pp = {.cmd = cmd, .in = in, .print_all = print_all};
    call->grid = in->grid;
    for (int i = 0; i < in->nshapes; i++)
        if (parse_shape(in->shapes[i], &pp.ndims[i], pp.sizes[i]) != 0)
            return cli_usage_error(cmd, "--shape '%s' is not a list of sizes like 2,3", in->shapes[i]);
    for (int i = 0; i < in->ndtypes; i++)
        if (!oc_dtype_from_name(in->dtypes[i], &pp.dtypes[i])) {
            char names[256] = ""; /* "float32, float64, ..., bool" */
            for (int d = 0; d < OC_NUM_DTYPES; d++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", d ? ", " : "",
                         oc_dtype_name((oc_dtype)d));
            return cli_usage_error(cmd, "--dtype '%s' is not a dtype (%s)", in->dtypes[i], names);
        }
    mallopt(M_MMAP_THRESHOLD, 1 << 30); /* keep the heap (op_call.h) */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    if (oc_library_load(path, &call->lib) != OC_OK) {
        fprintf(stderr, "opcore %s: %s\n", cmd, oc_errmsg());
        return CLI_FAIL;
    }
    const oc_op *op = call->op = find_op(call->lib, opname);
    if (!op) {
        fprintf(stderr, "opcore %s: library '%s' (%s) has no op '%s'; its ops:", cmd, oc_library_name(call->lib),
                oc_library_path(call->lib), opname);
        for (int i = 0; i < oc_library_num_ops(call->lib); i++)
            fprintf(stderr, " %s", oc_op_name(oc_library_op(call->lib, i)));
        fprintf(stderr, "\n");
        return CLI_FAIL;
    }
    call->nargs = oc_op_num_args(op);
    for (int k = 0; k < in->nargdefs; k++) {
        bool found = false;
        for (int i = 0; i < call->nargs && !found; i++) found = names_arg(in->argdefs[k], oc_op_arg_name(op, i));
        if (!found)
            return cli_usage_error(cmd, "--arg '%s': op '%s' has no argument '%.*s' (schema: %s)", in->argdefs[k],
                                   oc_op_qualname(op), (int)(strchr(in->argdefs[k], '=') - in->argdefs[k]),
                                   in->argdefs[k], oc_op_schema(op));
    }
    rng_state = in->seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
    if (!rng_state) rng_state = 1;
    printf("op %s: %s\n", oc_op_qualname(op), oc_op_schema(op));
    for (int i = 0; i < call->nargs; i++) {
        int rc = make_arg(&pp, call, i);
        if (rc != CLI_OK) {
            cli_call_free(call);
            return rc;
        }
    }
    return CLI_OK;
}

void cli_call_free(cli_call *call)
{
    for (int i = 0; i < call->ntensors; i++) free(call->datas[i]);
    for (int i = 0; i < OC_MAX_RESULTS; i++) free(call->bufs[i].data);
    memset(call->bufs, 0, sizeof call->bufs);
    call->ntensors = 0;
}

/* ---- the reused outputs ------------------------------------------------------------- */

static oc_status outbuf_alloc(void *ctx, int index, const oc_tensor *meta, oc_tensor *out)
{
    cli_outbuf *b = &((cli_outbuf *)ctx)[index];
    size_t bytes = (size_t)oc_nbytes(meta);
    if (bytes > b->cap || !b->data) {
        size_t cap = (bytes + 63) / 64 * 64;
        void *p = aligned_alloc(64, cap ? cap : 64);
        if (!p) return oc_set_error(OC_ENOMEM, "out of memory for the output (%zu bytes)", bytes);
        memset(p, 0, cap ? cap : 64); /* fault the pages in once, here */
        free(b->data);
        b->data = p;
        b->cap = cap;
    }
    return oc_tensor_init(out, b->data, meta->dtype, meta->ndim, meta->sizes);
}

oc_status cli_call_run(cli_call *call)
{
    return oc_op_run_grid(call->op, call->args, call->nargs, outbuf_alloc, call->bufs, call->outs,
                          call->grid.ndim ? &call->grid : NULL);
}

int64_t cli_out_bytes(const cli_call *call)
{
    int64_t bytes = 0;
    for (int i = 0; i < oc_op_num_results(call->op); i++) bytes += oc_nbytes(&call->outs[i]);
    for (int i = 0; i < call->nargs; i++) {
        if (!oc_op_arg_mutable(call->op, i) || call->args[i].type == OC_ARG_NONE) continue;
        if (call->args[i].type == OC_ARG_TENSOR) bytes += oc_nbytes(call->args[i].v.tensor);
        else
            for (int64_t k = 0; k < call->args[i].v.tensors.count; k++) bytes += oc_nbytes(&call->args[i].v.tensors.items[k]);
    }
    return bytes;
}

void cli_print_results(const cli_call *call, bool print_all)
{
    const oc_op *op = call->op;
    char shp[256];
    int n = oc_op_num_results(op);
    for (int i = 0; i < n; i++) {
        int alias = oc_op_result_alias(op, i);
        printf("  output %-8s %s %s", oc_op_result_name(op, i), oc_dtype_name(call->outs[i].dtype),
               oc_shape_str(&call->outs[i], shp, sizeof shp));
        if (alias >= 0) printf(" (argument '%s', written in place)", oc_op_arg_name(op, alias));
        printf("\n");
        cli_print_values("         ", &call->outs[i], print_all);
    }
    if (n == 0) printf("  output   (no results)\n");
    for (int a = 0; a < call->nargs; a++) {
        if (!oc_op_arg_mutable(op, a) || call->args[a].type == OC_ARG_NONE) continue;
        bool returned = false;
        for (int i = 0; i < n; i++) returned = returned || oc_op_result_alias(op, i) == a;
        if (returned) continue;
        const oc_value *v = &call->args[a];
        bool list = v->type == OC_ARG_TENSOR_LIST;
        int64_t count = list ? v->v.tensors.count : 1;
        for (int64_t k = 0; k < count; k++) {
            const oc_tensor *t = list ? &v->v.tensors.items[k] : v->v.tensor;
            char label[160];
            if (list) snprintf(label, sizeof label, "%s[%lld]", oc_op_arg_name(op, a), (long long)k);
            else snprintf(label, sizeof label, "%s", oc_op_arg_name(op, a));
            printf("  wrote  %-8s %s %s\n", label, oc_dtype_name(t->dtype), oc_shape_str(t, shp, sizeof shp));
            cli_print_values("         ", t, print_all);
        }
    }
}

/* ---- time ----------------------------------------------------------------------------- */

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_print_time(const char *label, double s)
{
    if (s < 1e-3) printf("%s%.1f us", label, s * 1e6);
    else if (s < 1.0) printf("%s%.3f ms", label, s * 1e3);
    else printf("%s%.3f s", label, s);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n ? v[n / 2] : 0;
}
