/* The engine's fixed cost per op call, from C: oc_op_call of a 1x1 float32
 * ReLU (shape function oc_empty_like, kernel writing oc_dst_tensor()),
 * single-core, multicore and on a launch grid of one instance ([1]), plus
 * the system calls a call makes in the
 * steady state.
 *
 * Usage: call_cost [results.json]         (from the repository root)
 *        call_cost --calls N              (N calls after a warm-up, no
 *                                          output: what --syscalls traces)
 *        call_cost --quick                (41 rounds instead of 201, no
 *                                          syscall count, no results file:
 *                                          one run of an interleaved A/B
 *                                          comparison of two libopcores)
 *        call_cost --calls N --single     (the single-core op only: what
 *                                          callgrind counts per call, with
 *                                          no other thread running)
 *
 * The syscall count runs this program twice under `strace -f -c` (warm-up
 * only, then warm-up + N calls) and divides the difference by N, so the
 * start-up's syscalls (loading, building) cancel out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "opcore/build.h"
#include "opcore/engine.h"
#include "opcore/host.h"

static const char SHAPE_SRC[] =
    "#include <opcore/library.h>\n"
    "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
    "OC_LIBRARY(cost_ops, m) {\n"
    "    oc_def(m, \"relu(Tensor x) -> Tensor\", same, \"relu\", .single_core = true);\n"
    "    oc_def(m, \"relu_mc(Tensor x) -> Tensor\", same, \"relu_mc\", .multicore = true);\n"
    "    oc_def(m, \"relu_g1(Tensor x) -> Tensor\", same, \"relu\", .grid = {1});\n"
    "}\n";

static const char COMPUTE_SRC[] =
    "#include <opcore/kernel.h>\n"
    "oc_tensor *relu(const oc_tensor *x) {\n"
    "    oc_tensor *out = oc_dst_tensor();\n"
    "    const float *s = x->data; float *d = out->data;\n"
    "    for (int64_t i = 0, n = oc_numel(x); i < n; i++) d[i] = s[i] > 0 ? s[i] : 0;\n"
    "    return out;\n"
    "}\n"
    "oc_tensor *relu_mc(const oc_tensor *x) {\n"
    "    oc_tensor *out = oc_dst_tensor();\n"
    "    const float *s = x->data; float *d = out->data;\n"
    "    int64_t lo, hi;\n"
    "    oc_core_range(oc_numel(x), 16, &lo, &hi);\n"
    "    for (int64_t i = lo; i < hi; i++) d[i] = s[i] > 0 ? s[i] : 0;\n"
    "    return out;\n"
    "}\n";

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what)
{
    fprintf(stderr, "call_cost: %s: %s\n", what, oc_errmsg());
    exit(1);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static oc_library *build_ops(char *dir)
{
    char shape[600], compute[600];
    snprintf(shape, sizeof shape, "%s/shape.c", dir);
    snprintf(compute, sizeof compute, "%s/cost.c", dir);
    write_file(shape, SHAPE_SRC);
    write_file(compute, COMPUTE_SRC);
    const char *c[] = {compute}, *s[] = {shape};
    oc_build_options o = {.name = "cost_ops", .compute_srcs = c, .num_compute_srcs = 1, .shape_srcs = s,
                          .num_shape_srcs = 1, .out_dir = dir};
    oc_build_result r;
    oc_library *lib;
    if (oc_build(&o, &r) != OC_OK) die("build");
    if (oc_library_load(r.path, &lib) != OC_OK) die("load");
    return lib;
}

typedef struct call {
    const oc_op *op;
    oc_value arg;
    oc_tensor out;
} call;

static inline void call_once(call *c)
{
    if (oc_op_call(c->op, &c->arg, 1, &c->out) != OC_OK) die("oc_op_call");
}

/* Median ns per call over `rounds` rounds of `batch` calls, the two ops
 * interleaved round by round; also the median of their paired ratios. */
static void measure(call *a, call *b, int rounds, int batch, double *ma, double *mb, double *ratio)
{
    double *ta = malloc(sizeof *ta * (size_t)rounds), *tb = malloc(sizeof *tb * (size_t)rounds),
           *tr = malloc(sizeof *tr * (size_t)rounds);
    for (int i = 0; i < 1000; i++) {
        call_once(a);
        call_once(b);
    }
    for (int r = 0; r < rounds; r++) {
        double t0 = now_ns();
        for (int i = 0; i < batch; i++) call_once(a);
        double t1 = now_ns();
        for (int i = 0; i < batch; i++) call_once(b);
        double t2 = now_ns();
        ta[r] = (t1 - t0) / batch;
        tb[r] = (t2 - t1) / batch;
        tr[r] = tb[r] / ta[r];
    }
    qsort(ta, (size_t)rounds, sizeof *ta, cmp_double);
    qsort(tb, (size_t)rounds, sizeof *tb, cmp_double);
    qsort(tr, (size_t)rounds, sizeof *tr, cmp_double);
    *ma = ta[rounds / 2];
    *mb = tb[rounds / 2];
    *ratio = tr[rounds / 2];
    free(ta);
    free(tb);
    free(tr);
}

/* Total syscalls strace counted for `self --calls n` ("total" line of -c). */
static long traced_syscalls(const char *self, long n)
{
    char out[] = "/tmp/opcore-strace-XXXXXX";
    int fd = mkstemp(out);
    if (fd < 0) return -1;
    close(fd);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "strace -f -c -o %s %s --calls %ld > /dev/null 2>&1", out, self, n);
    int rc = system(cmd);
    long total = -1;
    FILE *f = fopen(out, "r");
    char line[512];
    while (rc == 0 && f && fgets(line, sizeof line, f)) {
        /* "100.00    0.000123           1       123        4 total" */
        if (!strstr(line, " total")) continue;
        double pct, secs;
        long usecs, calls;
        if (sscanf(line, "%lf %lf %ld %ld", &pct, &secs, &usecs, &calls) == 4) total = calls;
    }
    if (f) fclose(f);
    unlink(out);
    return total;
}

int main(int argc, char **argv)
{
    long calls_only = -1;
    int single_only = 0, quick = 0;
    const char *json_path = "bench/results/call_cost.json";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc) calls_only = atol(argv[++i]);
        else if (strcmp(argv[i], "--single") == 0) single_only = 1;
        else if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else json_path = argv[i];
    }
    char dir[] = "/tmp/opcore-call-cost-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    oc_library *lib = build_ops(dir);

    float x = 1.5f, y1 = 0, y2 = 0, y3 = 0;
    oc_tensor xt;
    oc_tensor_init(&xt, &x, OC_FLOAT32, 2, (int64_t[]){1, 1});
    call single = {.op = oc_op_find("cost_ops::relu"), .arg = oc_value_tensor(&xt)};
    call multi = {.op = oc_op_find("cost_ops::relu_mc"), .arg = oc_value_tensor(&xt)};
    oc_tensor_init(&single.out, &y1, OC_FLOAT32, 2, (int64_t[]){1, 1});
    oc_tensor_init(&multi.out, &y2, OC_FLOAT32, 2, (int64_t[]){1, 1});
    call grid1 = {.op = oc_op_find("cost_ops::relu_g1"), .arg = oc_value_tensor(&xt)};
    oc_tensor_init(&grid1.out, &y3, OC_FLOAT32, 2, (int64_t[]){1, 1});
    if (!single.op || !multi.op || !grid1.op) die("find");

    if (calls_only >= 0) {
        for (int i = 0; i < 2000; i++) {
            call_once(&single);
            if (!single_only) call_once(&multi);
        }
        for (long i = 0; i < calls_only; i++) call_once(&single);
        for (long i = 0; i < calls_only && !single_only; i++) call_once(&multi);
        oc_library_unload(lib);
        oc_engine_shutdown();
        return 0;
    }

    double t_single, t_multi, ratio, t_single2, t_grid, grid_ratio;
    int rounds = quick ? 41 : 201;
    measure(&single, &multi, rounds, 2000, &t_single, &t_multi, &ratio);
    measure(&single, &grid1, rounds, 2000, &t_single2, &t_grid, &grid_ratio);
    printf("1x1 float32 ReLU through oc_op_call, %u cores in the pool\n", oc_engine_num_cores());
    printf("  single-core:  %8.1f ns per call (median; target <= 250 ns)\n", t_single);
    printf("  multicore op: %8.1f ns per call (median; %.2fx single-core: a 1-element op runs on one core)\n",
           t_multi, ratio);
    printf("  grid [1] op:  %8.1f ns per call (median; %.2fx single-core, paired; target <= 1.05x)\n", t_grid,
           grid_ratio);
    if (quick) return 0;

    long n = 20000;
    long base = traced_syscalls(argv[0], 0), traced = traced_syscalls(argv[0], n);
    /* the two runs' start-ups differ by a few calls either way: below one
     * syscall per 1000 calls is no syscall per call */
    double per_call = base >= 0 && traced >= 0 ? (double)(traced - base) / (2.0 * (double)n) : -1;
    if (per_call > -0.001 && per_call < 0.001) per_call = 0;
    if (per_call >= 0) printf("  syscalls per call (strace -f -c, steady state): %.3f (target 0)\n", per_call);
    else printf("  syscalls per call: not measured (strace is not available)\n");

    FILE *js = fopen(json_path, "w");
    if (!js) {
        perror(json_path);
        return 1;
    }
    fprintf(js,
            "{\"title\": \"Engine fixed cost from C: oc_op_call of a 1x1 float32 ReLU\",\n \"rows\": [\n"
            "  {\"case\": \"single-core op\", \"median ns\": %.1f},\n"
            "  {\"case\": \"multicore op (1 element: runs on one core)\", \"median ns\": %.1f, "
            "\"x single-core\": %.2f},\n"
            "  {\"case\": \"launch grid [1] op (.grid = {1})\", \"median ns\": %.1f, \"x single-core\": %.2f},\n"
            "  {\"case\": \"syscalls per call (steady state, strace -c)\", \"value\": %.3f}\n ],\n"
            " \"order\": 15,\n \"columns\": [\"case\", \"median ns\", \"x single-core\", \"value\"],\n"
            " \"target\": [{\"metric\": \"single-core 1x1 oc_op_call, median ns\", \"max\": 250, "
            "\"value\": %.1f, \"met\": %s},\n"
            "  {\"metric\": \"syscalls per oc_op_call (steady state)\", \"max\": 0, \"value\": %.3f, "
            "\"met\": %s},\n"
            "  {\"metric\": \"empty grid [1] op vs single-core op (paired median ratio)\", \"max\": 1.05, "
            "\"value\": %.2f, \"met\": %s}],\n"
            " \"notes\": \"Medians over 201 rounds of 2000 calls, the two ops interleaved round by round; "
            "syscalls from two strace -f -c runs (warm-up only, then %ld more calls of each op).\"}\n",
            t_single, t_multi, ratio, t_grid, grid_ratio, per_call, t_single, t_single <= 250 ? "true" : "false",
            per_call, per_call == 0 ? "true" : "false", grid_ratio, grid_ratio <= 1.05 ? "true" : "false", n);
    fclose(js);
    oc_library_unload(lib);
    oc_engine_shutdown();
    return 0;
}
