/* opcore build — compile an op library (a front end to oc_build). */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "opcore/build.h"
#include "opcore/engine.h"

static const char usage[] =
    "usage: opcore build --name NAME --compute FILE.c [FILE.c...] --shape FILE.c [FILE.c...]\n"
    "                    [options]\n"
    "\n"
    "Compile shape sources as host code and compute sources as kernel code (-O3\n"
    "-march=native), check every kernel and shape function against its schema, and\n"
    "link DIR/libNAME.so. An unchanged rebuild reuses the library (content-hash cache).\n"
    "Prints the library's path and \"(cached)\" or the build time.\n"
    "\n"
    "options:\n"
    "  -n, --name NAME        library name (a C identifier): produces libNAME.so\n"
    "                         ('librelu' also gives librelu.so)\n"
    "  -c, --compute FILE...  kernel sources (repeatable)\n"
    "  -s, --shape FILE...    shape sources, one holding OC_LIBRARY (repeatable)\n"
    "  -m, --multicore        run kernels on every engine core\n"
    "      --stack-size N     kernel stack in bytes (suffix k or M allowed); default\n"
    "                         -DSTACK_SIZE=N from --cflags, else 256k\n"
    "      --cflags \"FLAGS\"   extra compiler flags for both kinds (repeatable)\n"
    "  -I, --include DIR      extra include directory (repeatable)\n"
    "  -o, --out-dir DIR      where libNAME.so goes (default: the build cache,\n"
    "                         `opcore config --cache-dir`/build/NAME, shared with\n"
    "                         Python's custom_op.load)\n"
    "  -g, --debug            -O0 -g -DOC_DEBUG: bounds-checked accessors\n"
    "      --vec-report       after building, list each loop of the compute sources:\n"
    "                         vectorized or not, with the compiler's reason\n"
    "  -f, --force            rebuild even if cached\n"
    "  -v, --verbose          print each compiler command\n"
    "  -q, --quiet            print only the library's path\n"
    "  -h, --help             show this help\n"
    "\n"
    "environment: CC (compiler, default cc), OPCORE_INCLUDE_DIR, OPCORE_LIB_DIR,\n"
    "OPCORE_CACHE_DIR (the build cache).\n";

/* A size in bytes: digits with an optional k or M suffix. A size too large
 * for size_t becomes SIZE_MAX, which oc_build refuses naming the maximum. */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (end == s || s[0] == '-' || s[0] == ' ') return -1;
    bool big = errno == ERANGE;
    unsigned long long unit = 1;
    if (*end == 'k' || *end == 'K') unit = 1024, end++;
    else if (*end == 'm' || *end == 'M') unit = 1024 * 1024, end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end || v == 0) return -1;
    *out = big || v > SIZE_MAX / unit ? SIZE_MAX : (size_t)(v * unit);
    return 0;
}

typedef struct list {
    const char **v;
    int n;
} list;

static int list_add(list *l, const char *s)
{
    const char **g = realloc(l->v, (size_t)(l->n + 1) * sizeof *g);
    if (!g) return -1;
    l->v = g;
    l->v[l->n++] = s;
    return 0;
}

int cli_build(int argc, char **argv)
{
    static const struct option opts[] = {
        {"name", required_argument, 0, 'n'},    {"compute", required_argument, 0, 'c'},
        {"shape", required_argument, 0, 's'},   {"multicore", no_argument, 0, 'm'},
        {"stack-size", required_argument, 0, 'S'}, {"cflags", required_argument, 0, 'C'},
        {"include", required_argument, 0, 'I'}, {"out-dir", required_argument, 0, 'o'},
        {"debug", no_argument, 0, 'g'},         {"force", no_argument, 0, 'f'},
        {"verbose", no_argument, 0, 'v'},       {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},          {"vec-report", no_argument, 0, 'R'},
        {0, 0, 0, 0}};
    oc_build_options o;
    memset(&o, 0, sizeof o);
    list compute = {0}, shape = {0}, cflags = {0}, incs = {0};
    bool quiet = false;
    int rc = CLI_OK;
    opterr = 0;
    optind = 1;
    for (;;) {
        optopt = 0;
        int c = getopt_long(argc, argv, "+:n:c:s:mI:o:gfvqh", opts, NULL);
        if (c == -1) break;
        switch (c) {
        case 'n': o.name = optarg; break;
        case 'c':
        case 's': {
            list *l = c == 'c' ? &compute : &shape;
            list_add(l, optarg);
            /* --compute a.c b.c: take the following non-option words too. */
            while (optind < argc && argv[optind][0] != '-') list_add(l, argv[optind++]);
            break;
        }
        case 'm': o.multicore = true; break;
        case 'S':
            if (parse_size(optarg, &o.stack_size) != 0) {
                rc = cli_usage_error("build", "--stack-size '%s' is not a size: expected a positive "
                                     "number of bytes, optionally with a k or M suffix (e.g. 65536, "
                                     "512k, 2M; at most %zuM)", optarg, OC_MAX_STACK_SIZE >> 20);
                goto out;
            }
            break;
        case 'C': list_add(&cflags, optarg); break;
        case 'I': list_add(&incs, optarg); break;
        case 'o': o.out_dir = optarg; break;
        case 'g': o.debug = true; break;
        case 'f': o.force = true; break;
        case 'R': o.vec_report = true; break;
        case 'v': o.verbose = true; break;
        case 'q': quiet = true; break;
        case 'h': fputs(usage, stdout); goto out;
        case ':':
            rc = cli_usage_error("build", "option '%s' requires an argument", argv[optind - 1]);
            goto out;
        default:
            rc = cli_usage_error("build", "unrecognized option '%s'", cli_bad_option(argc, argv));
            goto out;
        }
    }
    if (optind < argc) {
        rc = cli_usage_error("build", "unexpected argument '%s' (sources go after --compute or "
                                      "--shape)", argv[optind]);
        goto out;
    }
    if (!o.name) {
        rc = cli_usage_error("build", "--name is required");
        goto out;
    }
    if (shape.n == 0) {
        rc = cli_usage_error("build", "at least one --shape source is required (it holds "
                                      "OC_LIBRARY)");
        goto out;
    }
    o.compute_srcs = compute.v;
    o.num_compute_srcs = compute.n;
    o.shape_srcs = shape.v;
    o.num_shape_srcs = shape.n;
    o.cflags = cflags.v;
    o.num_cflags = cflags.n;
    o.include_dirs = incs.v;
    o.num_include_dirs = incs.n;
    oc_build_result r;
    if (oc_build(&o, &r) != OC_OK) {
        fprintf(stderr, "%s\n", oc_errmsg());
        rc = CLI_FAIL;
        goto out;
    }
    if (quiet) printf("%s\n", r.path);
    else if (r.cached) printf("%s (cached)\n", r.path);
    else printf("%s (built in %.3f s)\n", r.path, r.seconds);
    if (r.vec_report) printf("%s", r.vec_report);
    free(r.vec_report);
out:
    free(compute.v);
    free(shape.v);
    free(cflags.v);
    free(incs.v);
    return rc;
}
