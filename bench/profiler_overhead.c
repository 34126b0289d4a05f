/* Per-call time of a tiny opcore op (ReLU of a 1x1 float tensor, single core,
 * examples/relu/elementwise) through the C host API, no profile running.
 *
 * bench/profiler_bench.py builds this twice: against the normal libopcore
 * (build/) and against one built with -DOC_PROFILER_COMPILED_OUT
 * (build-noprof/), where the runtime's profiler hooks fold away; it runs
 * the two alternately and compares the medians. See mk/profiler_bench.mk.
 *
 * Usage (from the repository root):
 *   profiler_overhead OUT_DIR [BATCHES [CALLS_PER_BATCH]]
 * Prints one JSON object: {"variant": ..., "ns_per_call": [one per batch]}. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "opcore/build.h"
#include "opcore/host.h"
#include "opcore/profiler.h"

#ifdef OC_PROFILER_COMPILED_OUT
#define VARIANT "compiled_out"
#else
#define VARIANT "hooks_off"
#endif

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: profiler_overhead OUT_DIR [BATCHES [CALLS_PER_BATCH]]\n");
        return 2;
    }
    int batches = argc > 2 ? atoi(argv[2]) : 20;
    long calls = argc > 3 ? atol(argv[3]) : 50000;
    if (batches < 1 || batches > 10000 || calls < 1) return 2;
    const char *c[] = {"examples/relu/elementwise/relu.c"}, *s[] = {"examples/relu/shape.c"};
    oc_build_options o = {.name = "relu", .compute_srcs = c, .num_compute_srcs = 1, .shape_srcs = s,
                          .num_shape_srcs = 1, .out_dir = argv[1]};
    oc_build_result r;
    oc_library *lib;
    if (oc_build(&o, &r) != OC_OK || oc_library_load(r.path, &lib) != OC_OK) {
        fprintf(stderr, "profiler_overhead: %s\n", oc_errmsg());
        return 1;
    }
    const oc_op *op = oc_op_find("my_ops::relu_forward");
    if (!op || oc_profiler_enabled()) {
        fprintf(stderr, "profiler_overhead: no op, or a profile is running\n");
        return 1;
    }
    float x = -1.5f, y = 7;
    oc_tensor xt, out;
    oc_tensor_init(&xt, &x, OC_FLOAT32, 2, (int64_t[]){1, 1});
    oc_tensor_init(&out, &y, OC_FLOAT32, 2, (int64_t[]){1, 1});
    oc_value args[1] = {oc_value_tensor(&xt)};
    for (long i = 0; i < calls; i++) /* warm up */
        if (oc_op_call(op, args, 1, &out) != OC_OK) {
            fprintf(stderr, "profiler_overhead: %s\n", oc_errmsg());
            return 1;
        }
    if (y != 0) {
        fprintf(stderr, "profiler_overhead: relu(-1.5) gave %g\n", y);
        return 1;
    }
    printf("{\"variant\": \"%s\", \"calls_per_batch\": %ld, \"ns_per_call\": [", VARIANT, calls);
    for (int b = 0; b < batches; b++) {
        double t0 = now_ns();
        for (long i = 0; i < calls; i++) (void)oc_op_call(op, args, 1, &out);
        printf("%s%.3f", b ? ", " : "", (now_ns() - t0) / (double)calls);
    }
    printf("]}\n");
    oc_library_unload(lib);
    return 0;
}
