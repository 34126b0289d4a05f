/* opcore run — call an op from the shell on generated inputs. */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "opcore/host.h"

#define RUN_MAX_ARGS 32 /* the schema grammar's limit */

static const char usage[] =
    "usage: opcore run LIB.so OP [options]\n"
    "\n"
    "Load LIB.so and call OP (\"relu_forward\" or \"my_ops::relu_forward\") on\n"
    "generated inputs: a random tensor for each Tensor argument, the given or\n"
    "default value for each scalar. Prints the inputs' and the output's shape and\n"
    "dtype, the first values and the time of the call. Errors (oc_errmsg) go to\n"
    "stderr with exit status 1.\n"
    "\n"
    "options:\n"
    "  -s, --shape 2,3        shape of the Tensor arguments (repeat for the 1st, 2nd,\n"
    "                         ... tensor; the last one given is reused; default 2,3)\n"
    "  -d, --dtype float32    dtype of the Tensor arguments (repeatable like --shape)\n"
    "  -a, --arg NAME=VALUE   value of a scalar argument (float, int, bool, Scalar),\n"
    "                         or a constant to fill a Tensor argument with\n"
    "      --seed N           seed of the random inputs (default 1)\n"
    "  -r, --repeat N         call N times; report the best and the median time\n"
    "  -p, --print            print every value of the inputs and the output\n"
    "  -h, --help             show this help\n";

/* ---- element values --------------------------------------------------------- */

static float half_to_float(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
    if (e == 0) {
        float f = ldexpf((float)m, -24);
        return s ? -f : f;
    }
    if (e == 31) bits = s | 0x7f800000u | (m << 13);
    else bits = s | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t s = (uint16_t)((x >> 16) & 0x8000);
    if (isnan(f)) return s | 0x7e00;
    float a = fabsf(f);
    if (a >= 65520.0f) return s | 0x7c00;
    if (a < 6.103515625e-05f) return s | (uint16_t)lrintf(a * 16777216.0f); /* subnormal */
    int e;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    uint32_t mant = (uint32_t)lrintf((m * 2.0f - 1.0f) * 1024.0f);
    uint32_t exp = (uint32_t)(e - 1 + 15);
    if (mant == 1024) mant = 0, exp++;
    return s | (uint16_t)(exp << 10) | (uint16_t)mant;
}

static double load(const void *p, oc_dtype t)
{
    switch (t) {
    case OC_FLOAT32: return *(const float *)p;
    case OC_FLOAT64: return *(const double *)p;
    case OC_FLOAT16: return half_to_float(*(const uint16_t *)p);
    case OC_BFLOAT16: {
        uint32_t bits = (uint32_t)*(const uint16_t *)p << 16;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
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
    case OC_FLOAT16: *(uint16_t *)p = float_to_half((float)v); break;
    case OC_BFLOAT16: {
        float f = (float)v;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        bits += 0x7fff + ((bits >> 16) & 1); /* round to nearest even */
        *(uint16_t *)p = (uint16_t)(bits >> 16);
        break;
    }
    case OC_INT8: *(int8_t *)p = (int8_t)v; break;
    case OC_INT16: *(int16_t *)p = (int16_t)v; break;
    case OC_INT32: *(int32_t *)p = (int32_t)v; break;
    case OC_INT64: *(int64_t *)p = (int64_t)v; break;
    case OC_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case OC_BOOL: *(bool *)p = v != 0; break;
    default: break;
    }
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
    if (oc_dtype_is_floating(t)) return u * 2.0 - 1.0;
    if (t == OC_BOOL) return u < 0.5;
    if (t == OC_UINT8) return floor(u * 21.0);
    return floor(u * 21.0) - 10.0;
}

static void print_values(const char *label, const oc_tensor *t, bool all)
{
    int64_t n = oc_numel(t), shown = all ? (n < 10000 ? n : 10000) : (n < 8 ? n : 8);
    printf("  %s[", label);
    for (int64_t i = 0; i < shown; i++) printf("%s%.6g", i ? ", " : "", load(oc_flat_ptr(t, i), t->dtype));
    printf("%s]\n", shown < n ? ", ..." : "");
}

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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void print_time(const char *label, double s)
{
    if (s < 1e-3) printf("%s%.1f us", label, s * 1e6);
    else if (s < 1.0) printf("%s%.3f ms", label, s * 1e3);
    else printf("%s%.3f s", label, s);
}

int cli_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"shape", required_argument, 0, 's'}, {"dtype", required_argument, 0, 'd'},
        {"arg", required_argument, 0, 'a'},   {"seed", required_argument, 0, 'S'},
        {"repeat", required_argument, 0, 'r'}, {"print", no_argument, 0, 'p'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    const char *shapes[RUN_MAX_ARGS], *dtypes[RUN_MAX_ARGS], *argdefs[RUN_MAX_ARGS];
    int nshapes = 0, ndtypes = 0, nargdefs = 0;
    unsigned long long seed = 1;
    long repeat = 1;
    bool print_all = false;
    opterr = 0;
    optind = 1;
    for (;;) {
        optopt = 0;
        int c = getopt_long(argc, argv, ":s:d:a:r:ph", opts, NULL);
        if (c == -1) break;
        char *end;
        switch (c) {
        case 's':
            if (nshapes == RUN_MAX_ARGS) return cli_usage_error("run", "too many --shape options");
            shapes[nshapes++] = optarg;
            break;
        case 'd':
            if (ndtypes == RUN_MAX_ARGS) return cli_usage_error("run", "too many --dtype options");
            dtypes[ndtypes++] = optarg;
            break;
        case 'a':
            if (nargdefs == RUN_MAX_ARGS) return cli_usage_error("run", "too many --arg options");
            if (!strchr(optarg, '='))
                return cli_usage_error("run", "--arg '%s' is not NAME=VALUE", optarg);
            argdefs[nargdefs++] = optarg;
            break;
        case 'S':
            seed = strtoull(optarg, &end, 0);
            if (end == optarg || *end) return cli_usage_error("run", "--seed '%s' is not a number", optarg);
            break;
        case 'r':
            repeat = strtol(optarg, &end, 10);
            if (end == optarg || *end || repeat < 1 || repeat > 100000000)
                return cli_usage_error("run", "--repeat '%s' is not a positive count", optarg);
            break;
        case 'p': print_all = true; break;
        case 'h': fputs(usage, stdout); return CLI_OK;
        case ':':
            return cli_usage_error("run", "option '%s' requires an argument", argv[optind - 1]);
        default:
            return cli_usage_error("run", "unrecognized option '%s'", cli_bad_option(argc, argv));
        }
    }
    if (argc - optind < 2) return cli_usage_error("run", "expected LIB.so and OP");
    if (argc - optind > 2) return cli_usage_error("run", "unexpected argument '%s'", argv[optind + 2]);
    const char *path = argv[optind], *opname = argv[optind + 1];

    /* Check the options before touching the library. */
    int ndims[RUN_MAX_ARGS];
    int64_t sizes[RUN_MAX_ARGS][OC_MAX_DIMS];
    oc_dtype dts[RUN_MAX_ARGS];
    for (int i = 0; i < nshapes; i++)
        if (parse_shape(shapes[i], &ndims[i], sizes[i]) != 0)
            return cli_usage_error("run", "--shape '%s' is not a list of sizes like 2,3", shapes[i]);
    for (int i = 0; i < ndtypes; i++)
        if (!oc_dtype_from_name(dtypes[i], &dts[i]))
            return cli_usage_error("run", "--dtype '%s' is not a dtype (float32, float64, float16, "
                                          "bfloat16, int8, int16, int32, int64, uint8, bool)",
                                   dtypes[i]);

    oc_library *lib;
    if (oc_library_load(path, &lib) != OC_OK) {
        fprintf(stderr, "opcore run: %s\n", oc_errmsg());
        return CLI_FAIL;
    }
    const oc_op *op = NULL;
    if (strstr(opname, "::")) {
        op = oc_op_find(opname);
    } else {
        for (int i = 0; i < oc_library_num_ops(lib) && !op; i++)
            if (strcmp(oc_op_name(oc_library_op(lib, i)), opname) == 0) op = oc_library_op(lib, i);
    }
    if (!op) {
        fprintf(stderr, "opcore run: library '%s' (%s) has no op '%s'; its ops:", oc_library_name(lib),
                oc_library_path(lib), opname);
        for (int i = 0; i < oc_library_num_ops(lib); i++)
            fprintf(stderr, " %s", oc_op_name(oc_library_op(lib, i)));
        fprintf(stderr, "\n");
        return CLI_FAIL;
    }

    int nargs = oc_op_num_args(op);
    for (int k = 0; k < nargdefs; k++) {
        size_t len = (size_t)(strchr(argdefs[k], '=') - argdefs[k]);
        bool found = false;
        for (int i = 0; i < nargs && !found; i++)
            found = strlen(oc_op_arg_name(op, i)) == len && !strncmp(oc_op_arg_name(op, i), argdefs[k], len);
        if (!found)
            return cli_usage_error("run", "--arg '%s': op '%s' has no argument '%.*s' (schema: %s)",
                                   argdefs[k], oc_op_qualname(op), (int)len, argdefs[k], oc_op_schema(op));
    }

    rng_state = seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
    if (!rng_state) rng_state = 1;
    oc_value args[RUN_MAX_ARGS];
    oc_tensor tensors[RUN_MAX_ARGS];
    void *datas[RUN_MAX_ARGS] = {0};
    int ntensors = 0, rc = CLI_OK;
    printf("op %s: %s\n", oc_op_qualname(op), oc_op_schema(op));
    for (int i = 0; i < nargs; i++) {
        const char *aname = oc_op_arg_name(op, i);
        const char *given = NULL;
        for (int k = 0; k < nargdefs; k++) {
            size_t len = (size_t)(strchr(argdefs[k], '=') - argdefs[k]);
            if (strlen(aname) == len && !strncmp(aname, argdefs[k], len)) given = argdefs[k] + len + 1;
        }
        oc_arg_type type = oc_op_arg_type(op, i);
        double num = 0;
        bool bv;
        if (type == OC_ARG_TENSOR) {
            int si = nshapes ? (ntensors < nshapes ? ntensors : nshapes - 1) : -1;
            int di = ndtypes ? (ntensors < ndtypes ? ntensors : ndtypes - 1) : -1;
            int nd = 2;
            int64_t def_sizes[2] = {2, 3};
            const int64_t *sz = si >= 0 ? sizes[si] : def_sizes;
            if (si >= 0) nd = ndims[si];
            oc_dtype dt = di >= 0 ? dts[di] : OC_FLOAT32;
            if (given && !parse_number(given, &num)) {
                rc = cli_usage_error("run", "--arg %s=%s: a Tensor argument takes a number to fill "
                                            "it with", aname, given);
                goto out;
            }
            int64_t n = 1;
            for (int d = 0; d < nd; d++) n *= sz[d];
            datas[ntensors] = calloc((size_t)(n ? n : 1), oc_dtype_size(dt));
            if (!datas[ntensors]) {
                fprintf(stderr, "opcore run: out of memory for argument '%s'\n", aname);
                rc = CLI_FAIL;
                goto out;
            }
            oc_tensor *t = &tensors[ntensors];
            if (oc_tensor_init(t, datas[ntensors], dt, nd, sz) != OC_OK) {
                fprintf(stderr, "opcore run: argument '%s': %s\n", aname, oc_errmsg());
                ntensors++;
                rc = CLI_FAIL;
                goto out;
            }
            for (int64_t e = 0; e < n; e++) store(oc_flat_ptr(t, e), dt, given ? num : random_value(dt));
            args[i] = oc_value_tensor(t);
            ntensors++;
            char shp[256];
            printf("  input  %-8s %s %s\n", aname, oc_dtype_name(dt), oc_shape_str(t, shp, sizeof shp));
            if (print_all) print_values("         ", t, true);
            continue;
        }
        if (!given) {
            if (!oc_op_arg_default(op, i, &args[i])) {
                rc = cli_usage_error("run", "op '%s' needs a value for argument '%s' (%s); give "
                                            "--arg %s=VALUE", oc_op_qualname(op), aname,
                                     oc_op_schema(op), aname);
                goto out;
            }
            printf("  input  %-8s (default)\n", aname);
            continue;
        }
        bool ok = true;
        switch (type) {
        case OC_ARG_FLOAT: ok = parse_number(given, &num); args[i] = oc_value_float(num); break;
        case OC_ARG_INT: {
            char *end;
            long long v = strtoll(given, &end, 0);
            ok = end != given && !*end;
            args[i] = oc_value_int(v);
            break;
        }
        case OC_ARG_BOOL: ok = parse_bool(given, &bv); args[i] = oc_value_bool(bv); break;
        case OC_ARG_SCALAR:
            if (parse_bool(given, &bv) && strcmp(given, "0") && strcmp(given, "1"))
                args[i] = oc_value_scalar(oc_scalar_bool(bv));
            else if (strpbrk(given, ".eEnN") && parse_number(given, &num))
                args[i] = oc_value_scalar(oc_scalar_float(num));
            else {
                char *end;
                long long v = strtoll(given, &end, 0);
                ok = end != given && !*end;
                args[i] = oc_value_scalar(oc_scalar_int(v));
            }
            break;
        default: ok = false;
        }
        if (!ok) {
            rc = cli_usage_error("run", "--arg %s=%s: not a valid value for this argument (%s)",
                                 aname, given, oc_op_schema(op));
            goto out;
        }
        printf("  input  %-8s %s\n", aname, given);
    }

    double *times = calloc((size_t)repeat, sizeof *times);
    if (!times) {
        rc = CLI_FAIL;
        goto out;
    }
    oc_tensor *y = NULL;
    for (long r = 0; r < repeat; r++) {
        if (y) oc_tensor_free(y);
        y = NULL;
        double t0 = now_s();
        oc_status st = oc_op_invoke(op, args, nargs, &y);
        times[r] = now_s() - t0;
        if (st != OC_OK) {
            fprintf(stderr, "opcore run: %s: %s\n", oc_status_name(st), oc_errmsg());
            free(times);
            rc = CLI_FAIL;
            goto out;
        }
    }
    char shp[256];
    printf("  output %-8s %s %s\n", "", oc_dtype_name(y->dtype), oc_shape_str(y, shp, sizeof shp));
    print_values("         ", y, print_all);
    qsort(times, (size_t)repeat, sizeof *times, cmp_double);
    if (repeat == 1) print_time("time ", times[0]);
    else {
        print_time("time best ", times[0]);
        print_time(", median ", times[repeat / 2]);
        printf(" (%ld calls)", repeat);
    }
    printf("\n");
    free(times);
    oc_tensor_free(y);
out:
    for (int i = 0; i < ntensors; i++) free(datas[i]);
    return rc;
}
