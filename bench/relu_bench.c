/* ReLU bandwidth per variant vs memcpy, empty-launch latency, build time.
 *
 * Every number is measured in this run; ratios compare measurements taken
 * back to back, so a noisy, shared machine skews both sides alike.
 * Usage: relu_bench [results.json]   (from the repository root) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opcore/build.h"
#include "opcore/engine.h"
#include "opcore/host.h"

#define REPEAT_SECONDS 0.25

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds of fn(ctx) over repeats filling REPEAT_SECONDS. */
static double median_time(void (*fn)(void *), void *ctx, int min_reps)
{
    static double t[100000];
    int n = 0;
    double start = now();
    fn(ctx); /* warm up */
    while (n < (int)(sizeof t / sizeof t[0]) && (n < min_reps || now() - start < REPEAT_SECONDS)) {
        double t0 = now();
        fn(ctx);
        t[n++] = now() - t0;
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    return t[n / 2];
}

typedef struct copy_job {
    char *dst;
    const char *src;
    size_t bytes;
    int threads;
} copy_job;

static void *copy_part(void *arg)
{
    copy_job *j = arg;
    memcpy(j->dst, j->src, j->bytes);
    return NULL;
}

static void run_memcpy(void *ctx)
{
    copy_job *j = ctx;
    if (j->threads == 1) { memcpy(j->dst, j->src, j->bytes); return; }
    pthread_t t[64];
    copy_job parts[64];
    size_t chunk = (j->bytes / (size_t)j->threads + 63) / 64 * 64;
    for (int i = 0; i < j->threads; i++) {
        size_t off = (size_t)i * chunk, len = off >= j->bytes ? 0 : (j->bytes - off < chunk ? j->bytes - off : chunk);
        parts[i] = (copy_job){j->dst + off, j->src + off, len, 1};
        if (i) pthread_create(&t[i], NULL, copy_part, &parts[i]);
    }
    copy_part(&parts[0]);
    for (int i = 1; i < j->threads; i++) pthread_join(t[i], NULL);
}

typedef struct op_job {
    const oc_op *op;
    oc_value args[1];
    oc_tensor out;
} op_job;

static void run_op(void *ctx)
{
    op_job *j = ctx;
    if (oc_op_call(j->op, j->args, 1, &j->out) != OC_OK) {
        fprintf(stderr, "relu_bench: %s\n", oc_errmsg());
        exit(1);
    }
}

static const char *variants[] = {"elementwise", "stream", "tcm", "multicore"};

static oc_library *build_variant(int v, const char *dir, double *seconds, double *cached_seconds)
{
    char compute[256], out[512];
    snprintf(compute, sizeof compute, "examples/relu/%s/relu.c", variants[v]);
    snprintf(out, sizeof out, "%s/%s", dir, variants[v]);
    const char *c[] = {compute}, *s[] = {"examples/relu/shape.c"};
    oc_build_options o = {.name = "relu", .compute_srcs = c, .num_compute_srcs = 1, .shape_srcs = s,
                          .num_shape_srcs = 1, .out_dir = out, .multicore = v == 3, .force = true};
    oc_build_result r;
    if (oc_build(&o, &r) != OC_OK) { fprintf(stderr, "relu_bench: %s\n", oc_errmsg()); exit(1); }
    *seconds = r.seconds;
    o.force = false;
    double t0 = now();
    if (oc_build(&o, &r) != OC_OK || !r.cached) { fprintf(stderr, "relu_bench: cache miss\n"); exit(1); }
    *cached_seconds = now() - t0;
    oc_library *lib;
    if (oc_library_load(r.path, &lib) != OC_OK) { fprintf(stderr, "relu_bench: %s\n", oc_errmsg()); exit(1); }
    return lib;
}

int main(int argc, char **argv)
{
    const char *json_path = argc > 1 ? argv[1] : "bench/results/relu.json";
    const size_t sizes[] = {4096, 1 << 20, 64 << 20};
    const char *size_names[] = {"4 KB", "1 MB", "64 MB"};
    char dir[] = "/tmp/opcore-bench-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    uint32_t ncores = oc_engine_num_cores();
    oc_engine_shutdown();

    float *x = aligned_alloc(64, sizes[2]), *y = aligned_alloc(64, sizes[2]);
    for (size_t i = 0; i < sizes[2] / 4; i++) x[i] = (float)((int)(i % 17) - 8);
    memset(y, 0, sizes[2]);

    FILE *js = fopen(json_path, "w");
    if (!js) { perror(json_path); return 1; }
    fprintf(js, "{\"title\": \"ReLU bandwidth (float32): opcore variants vs memcpy\",\n \"rows\": [\n");
    printf("%-10s %-18s %-6s %10s %10s\n", "size", "variant", "cores", "GB/s", "x memcpy");
    int first_row = 1;
    double build_s[4], cached_s[4], mc_ratio_64 = 0, launch_us = 0;
    for (int si = 0; si < 3; si++) {
        size_t bytes = sizes[si];
        copy_job cj1 = {(char *)y, (const char *)x, bytes, 1}, cjn = {(char *)y, (const char *)x, bytes, (int)ncores};
        double mem1 = median_time(run_memcpy, &cj1, 5), memn = median_time(run_memcpy, &cjn, 5);
        /* GB/s counts bytes read + bytes written, for memcpy and ReLU alike. */
        double gb = 2.0 * (double)bytes / 1e9;
        printf("%-10s %-18s %-6d %10.2f %10s\n", size_names[si], "memcpy", 1, gb / mem1, "1.00");
        printf("%-10s %-18s %-6u %10.2f %10.2f\n", size_names[si], "memcpy", ncores, gb / memn, mem1 / memn);
        for (int v = 0; v < 4; v++) {
            for (int all = 0; all < (v == 3 ? 2 : 1); all++) {
                uint32_t cores = all ? ncores : 1;
                oc_engine_shutdown();
                oc_engine_configure(cores, 0);
                double bs, cs;
                oc_library *lib = build_variant(v, dir, &bs, &cs);
                if (si == 0 && !all) { build_s[v] = bs; cached_s[v] = cs; }
                op_job j;
                j.op = oc_op_find("my_ops::relu_forward");
                int64_t n = (int64_t)(bytes / 4);
                oc_tensor xt;
                int64_t shape[2] = {n / 256 ? n / 256 : 1, n / 256 ? 256 : n};
                oc_tensor_init(&xt, x, OC_FLOAT32, 2, shape);
                oc_tensor_init(&j.out, y, OC_FLOAT32, 2, shape);
                j.args[0] = oc_value_tensor(&xt);
                double t = median_time(run_op, &j, 5);
                /* the physical limit: the faster of memcpy on one thread or all */
                double base = mem1 < memn ? mem1 : memn;
                double ratio = base / t;
                if (v == 3 && all && si == 2) mc_ratio_64 = ratio;
                char name[64];
                snprintf(name, sizeof name, "%s", variants[v]);
                printf("%-10s %-18s %-6u %10.2f %10.2f\n", size_names[si], name, cores, gb / t, ratio);
                fprintf(js, "%s  {\"size\": \"%s\", \"variant\": \"%s\", \"cores\": %u, \"GB/s\": %.2f, "
                            "\"memcpy GB/s (best)\": %.2f, \"x memcpy\": %.2f}",
                        first_row ? "" : ",\n", size_names[si], name, cores, gb / t, gb / base, ratio);
                first_row = 0;
                oc_library_unload(lib);
            }
        }
    }

    /* Empty multicore kernel on all cores: the cost of a launch. */
    oc_engine_shutdown();
    oc_engine_configure(0, 0);
    {
        FILE *f;
        char shape_path[600], compute_path[600];
        snprintf(shape_path, sizeof shape_path, "%s/empty_shape.c", dir);
        snprintf(compute_path, sizeof compute_path, "%s/empty.c", dir);
        f = fopen(shape_path, "w");
        fputs("#include <opcore/library.h>\nstatic oc_tensor *s(const oc_tensor *x) { return oc_empty_like(x); }\n"
              "OC_LIBRARY(empty_ops, m) { oc_def(m, \"empty(Tensor x) -> Tensor\", s, \"empty\"); }\n", f);
        fclose(f);
        f = fopen(compute_path, "w");
        fputs("#include <opcore/kernel.h>\noc_tensor *empty(const oc_tensor *x) { (void)x; return oc_dst_tensor(); }\n", f);
        fclose(f);
        const char *c[] = {compute_path}, *s[] = {shape_path};
        oc_build_options o = {.name = "empty", .compute_srcs = c, .num_compute_srcs = 1, .shape_srcs = s,
                              .num_shape_srcs = 1, .out_dir = dir, .multicore = true};
        oc_build_result r;
        oc_library *lib;
        if (oc_build(&o, &r) != OC_OK || oc_library_load(r.path, &lib) != OC_OK) {
            fprintf(stderr, "relu_bench: %s\n", oc_errmsg());
            return 1;
        }
        op_job j = {.op = oc_op_find("empty_ops::empty")};
        float one = 1;
        oc_tensor xt;
        oc_tensor_init(&xt, &one, OC_FLOAT32, 1, (int64_t[]){1});
        oc_tensor_init(&j.out, y, OC_FLOAT32, 1, (int64_t[]){1});
        j.args[0] = oc_value_tensor(&xt);
        double t = median_time(run_op, &j, 2000);
        launch_us = t * 1e6;
        printf("\nempty multicore launch on %u cores: %.2f us median (target <= 5 us)\n", ncores, t * 1e6);
        fprintf(js, ",\n  {\"size\": \"-\", \"variant\": \"empty multicore launch\", \"cores\": %u, \"median us\": %.2f}",
                ncores, t * 1e6);
        oc_library_unload(lib);
    }
    printf("build of the ReLU library: cold %.3f s (target <= 1 s), cached %.1f ms (target <= 50 ms)\n",
           build_s[2], cached_s[2] * 1e3);
    fprintf(js, ",\n  {\"size\": \"-\", \"variant\": \"opcore build (tcm ReLU)\", \"cold s\": %.3f, \"cached ms\": %.2f}",
            build_s[2], cached_s[2] * 1e3);
    printf("TCM + multicore ReLU on 64 MB: %.2fx memcpy on the same cores (target >= 0.85x)\n", mc_ratio_64);
    fprintf(js, "\n ],\n \"order\": 20,\n \"columns\": [\"size\", \"variant\", \"cores\", \"GB/s\", "
                "\"memcpy GB/s (best)\", \"x memcpy\", \"median us\", \"cold s\", \"cached ms\"],\n");
    fprintf(js, " \"target\": [{\"metric\": \"TCM + multicore ReLU, 64 MB, x memcpy\", \"min\": 0.85, "
                "\"value\": %.2f, \"met\": %s},\n", mc_ratio_64, mc_ratio_64 >= 0.85 ? "true" : "false");
    fprintf(js, "  {\"metric\": \"empty multicore launch, median us\", \"max\": 5, \"value\": %.2f, \"met\": %s},\n",
            launch_us, launch_us <= 5 ? "true" : "false");
    fprintf(js, "  {\"metric\": \"opcore build cold, s\", \"max\": 1, \"value\": %.3f, \"met\": %s},\n",
            build_s[2], build_s[2] <= 1 ? "true" : "false");
    fprintf(js, "  {\"metric\": \"opcore build cached, ms\", \"max\": 50, \"value\": %.2f, \"met\": %s}],\n",
            cached_s[2] * 1e3, cached_s[2] * 1e3 <= 50 ? "true" : "false");
    fprintf(js, " \"notes\": \"GB/s counts bytes read plus bytes written. x memcpy compares with a memcpy of the "
                "same bytes (the faster of 1 thread and all threads), measured in the same run. %u cores.\"}\n", ncores);
    fclose(js);
    free(x);
    free(y);
    oc_engine_shutdown();
    return 0;
}
