/* Tensor collectives and the per-launch shared workspace (kernel.h):
 * oc_all_sum_f32 / _f64 / _tensor over buffers, oc_shared_alloc. Column
 * sums of a matrix whose rows are split over the cores, three ways; two
 * threads calling the ops at once each get their own right answer (a
 * file-level static table would be shared by them); counts or sizes that
 * differ between cores, and a grid launch, fail naming the op, and the
 * next call is right. Each test runs in its own process (runner.h). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/engine.h"
#include "opcore/host.h"
#include "support/oplib.h"

enum { ROWS = 301, COLS = 37 };

static const char compute[] =
    "#include <opcore/kernel.h>\n"
    "#include <string.h>\n"
    "/* this core's rows of x summed per column into part[COLS] */\n"
    "static void partial(const oc_tensor *x, float *part) {\n"
    "    int64_t cols = x->sizes[1], lo, hi;\n"
    "    oc_core_range(x->sizes[0], 1, &lo, &hi);\n"
    "    for (int64_t j = 0; j < cols; j++) part[j] = 0;\n"
    "    for (int64_t i = lo; i < hi; i++)\n"
    "        for (int64_t j = 0; j < cols; j++) part[j] += ((const float *)x->data)[i * cols + j];\n"
    "}\n"
    "oc_tensor *colsum(const oc_tensor *x, int64_t bad) {\n"
    "    float part[64];\n"
    "    partial(x, part);\n"
    "    oc_all_sum_f32(part, x->sizes[1] + (bad && oc_cpu_id() == 1));\n"
    "    if (oc_cpu_id() == 0) memcpy(oc_dst_tensor()->data, part, (size_t)x->sizes[1] * 4);\n"
    "    return oc_dst_tensor();\n"
    "}\n"
    "oc_tensor *colsum_t(const oc_tensor *x, int64_t bad) {\n"
    "    (void)bad;\n"
    "    oc_tensor *t = oc_empty(OC_FLOAT64, 1, (int64_t[]){x->sizes[1]});\n"
    "    float part[64];\n"
    "    partial(x, part);\n"
    "    for (int64_t j = 0; j < x->sizes[1]; j++) ((double *)t->data)[j] = part[j];\n"
    "    oc_all_sum_tensor(t);\n"
    "    if (oc_cpu_id() == oc_cpu_count() - 1)\n"
    "        for (int64_t j = 0; j < x->sizes[1]; j++)\n"
    "            ((float *)oc_dst_tensor()->data)[j] = (float)((double *)t->data)[j];\n"
    "    return oc_dst_tensor();\n"
    "}\n"
    "oc_tensor *colsum_ws(const oc_tensor *x, int64_t bad) {\n"
    "    int64_t cols = x->sizes[1];\n"
    "    size_t bytes = (size_t)(oc_cpu_count() * cols) * 4 + (size_t)(bad && oc_cpu_id() == 1);\n"
    "    float *ws = oc_shared_alloc(bytes);\n"
    "    partial(x, ws + oc_cpu_id() * cols);\n"
    "    oc_barrier();\n"
    "    if (oc_cpu_id() == 0)\n"
    "        for (int64_t j = 0; j < cols; j++) {\n"
    "            float s = 0;\n"
    "            for (uint32_t k = 0; k < oc_cpu_count(); k++) s += ws[k * cols + j];\n"
    "            ((float *)oc_dst_tensor()->data)[j] = s;\n"
    "        }\n"
    "    return oc_dst_tensor();\n"
    "}\n";

static const char shape[] =
    "#include <opcore/library.h>\n"
    "static oc_tensor *cols(const oc_tensor *x, int64_t bad) {\n"
    "    (void)bad; return oc_empty(OC_FLOAT32, 1, (int64_t[]){x->sizes[1]}); }\n"
    "OC_LIBRARY(coll, m) {\n"
    "    oc_def(m, \"colsum(Tensor x, int bad) -> Tensor\", cols, \"colsum\", .multicore = true);\n"
    "    oc_def(m, \"colsum_t(Tensor x, int bad) -> Tensor\", cols, \"colsum_t\", .multicore = true);\n"
    "    oc_def(m, \"colsum_ws(Tensor x, int bad) -> Tensor\", cols, \"colsum_ws\", .multicore = true);\n"
    "    oc_def(m, \"colsum_1(Tensor x, int bad) -> Tensor\", cols, \"colsum\");\n"
    "    oc_def(m, \"colsum_grid(Tensor x, int bad) -> Tensor\", cols, \"colsum_ws\", .grid = {2});\n"
    "}\n";

static oc_library *lib;

static int setup(void **state)
{
    (void)state;
    assert_int_equal(oc_engine_configure(3, 0), OC_OK); /* 301 rows split unevenly */
    test_use_every_core();
    lib = test_build_and_load("coll", compute, shape, (test_lib_options){0});
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_unload_and_shutdown(&lib);
    return 0;
}

/* Rows of small integers: every sum is exact in float32, in any order. */
static void make_input(float *x, int seed)
{
    for (int i = 0; i < ROWS * COLS; i++) x[i] = (float)((i * 7 + seed * 13) % 11) - 5;
}

static oc_status colsum(const char *op, const float *x, float *out, int64_t bad)
{
    oc_tensor xt, ot;
    oc_tensor_init(&xt, (void *)x, OC_FLOAT32, 2, (int64_t[]){ROWS, COLS});
    oc_tensor_init(&ot, out, OC_FLOAT32, 1, (int64_t[]){COLS});
    oc_value args[] = {oc_value_tensor(&xt), oc_value_int(bad)};
    return oc_op_call(test_op(op), args, 2, &ot);
}

static bool right(const char *op, const float *x)
{
    float out[COLS];
    if (colsum(op, x, out, 0) != OC_OK) return false;
    for (int j = 0; j < COLS; j++) {
        float want = 0;
        for (int i = 0; i < ROWS; i++) want += x[i * COLS + j];
        if (out[j] != want) return false;
    }
    return true;
}

static const char *const ops[] = {"coll::colsum", "coll::colsum_t", "coll::colsum_ws", "coll::colsum_1"};

static void test_column_sums_every_way(void **state)
{
    (void)state;
    static float x[ROWS * COLS];
    make_input(x, 1);
    for (int k = 0; k < 4; k++)
        if (!right(ops[k], x)) fail_msg("%s: %s", ops[k], oc_errmsg());
}

typedef struct job {
    pthread_t thread;
    int seed;
    int wrong;
    char msg[512];
} job;

static void *calls(void *arg)
{
    job *j = arg;
    static _Thread_local float x[ROWS * COLS];
    make_input(x, j->seed);
    for (int n = 0; n < 100; n++)
        for (int k = 0; k < 3; k++)
            if (!right(ops[k], x)) {
                if (!j->wrong++) snprintf(j->msg, sizeof j->msg, "%s: %s", ops[k], oc_errmsg());
            }
    return NULL;
}

/* Two threads call the ops at once, with different inputs: each launch
 * has its own workspace and its own buffers. */
static void two_threads(void)
{
    job jobs[2] = {{.seed = 2}, {.seed = 3}};
    for (int t = 0; t < 2; t++) assert_int_equal(pthread_create(&jobs[t].thread, NULL, calls, &jobs[t]), 0);
    for (int t = 0; t < 2; t++) {
        pthread_join(jobs[t].thread, NULL);
        if (jobs[t].wrong) fail_msg("thread %d: %d wrong: %s", t, jobs[t].wrong, jobs[t].msg);
    }
}

/* Split launches (one at a time over the pool), then launches too small to
 * split, which run on both callers at the same moment. */
static void test_two_threads_at_once(void **state)
{
    (void)state;
    two_threads();
    oc_engine_set_min_split_bytes((size_t)1 << 30);
    two_threads();
}

static void expect_error(const char *op, const char *a, const char *b)
{
    static float x[ROWS * COLS];
    float out[COLS];
    make_input(x, 4);
    assert_int_equal(colsum(op, x, out, 1), OC_EKERNEL);
    test_assert_contains(oc_errmsg(), op);
    test_assert_contains(oc_errmsg(), a);
    test_assert_contains(oc_errmsg(), b);
    assert_true(right(op, x)); /* the next call */
}

static void test_mismatches_and_grids_fail(void **state)
{
    (void)state;
    if (oc_engine_num_cores() > 1) {
        expect_error("coll::colsum", "oc_all_sum_f32: core ", "every core passes the same count");
        expect_error("coll::colsum_ws", "oc_shared_alloc: core 1 asks for",
                     "every core asks for the same size");
    }
    static float x[ROWS * COLS];
    float out[COLS];
    make_input(x, 5);
    assert_int_equal(colsum("coll::colsum_grid", x, out, 0), OC_EKERNEL);
    test_assert_contains(oc_errmsg(), "oc_shared_alloc is not allowed in a grid launch");
    assert_true(right("coll::colsum", x));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_column_sums_every_way),
        cmocka_unit_test(test_two_threads_at_once),
        cmocka_unit_test(test_mismatches_and_grids_fail),
    };
    return oc_test_run("collectives", tests, setup, teardown);
}
