/* The shape function's answers remembered per thread (src/host/infer_memo.c):
 * asked again with the same argument metadata and values, a call reuses the
 * answer instead of running the shape function; anything that differs
 * (sizes, strides, dtype, a value, None) runs it. The shape function below
 * breaks the rule on purpose so the tests can see it run: its result's
 * length is how many times it ran in this process. Each test runs in its
 * own process (support/runner.h). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/engine.h"
#include "opcore/host.h"
#include "support/oplib.h"

static const char compute[] =
    "#include <opcore/kernel.h>\n"
    "oc_tensor *k(const oc_tensor *x, int64_t n, double f, bool b, const oc_tensor *w) {\n"
    "    (void)x, (void)n, (void)f, (void)b, (void)w; return oc_dst_tensor();\n"
    "}\n"
    "oc_tensor *ks(const oc_tensor *x, const char *s) { (void)x, (void)s; return oc_dst_tensor(); }\n";

static const char shape[] =
    "#include <opcore/library.h>\n"
    "static int runs;\n"
    "static oc_tensor *count(const oc_tensor *x, int64_t n, double f, bool b, const oc_tensor *w) {\n"
    "    (void)x, (void)n, (void)f, (void)b, (void)w;\n"
    "    return oc_empty(OC_FLOAT32, 1, (int64_t[]){++runs});\n"
    "}\n"
    "static oc_tensor *count_s(const oc_tensor *x, const char *s) {\n"
    "    (void)x, (void)s; return oc_empty(OC_FLOAT32, 1, (int64_t[]){++runs});\n"
    "}\n"
    "OC_LIBRARY(memo, m) {\n"
    "    oc_def(m, \"count(Tensor x, int n, float f, bool b, Tensor? w) -> Tensor\", count, \"k\");\n"
    "    oc_def(m, \"count_s(Tensor x, str s) -> Tensor\", count_s, \"ks\");\n"
    "}\n";

static oc_library *lib;

static int setup(void **state)
{
    (void)state;
    lib = test_build_and_load("memo", compute, shape, (test_lib_options){0});
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_unload_and_shutdown(&lib);
    return 0;
}

static oc_tensor meta(oc_dtype dt, int64_t rows, int64_t cols, bool transposed)
{
    oc_tensor t;
    int64_t sizes[] = {rows, cols}, strides[] = {transposed ? 1 : cols, transposed ? rows : 1};
    if (oc_tensor_init_strided(&t, NULL, dt, 2, sizes, strides) != OC_OK) fail_msg("%s", oc_errmsg());
    return t;
}

/* How many times the shape function had run when it answered this call. */
static int64_t answer(const oc_tensor *x, int64_t n, double f, bool b, const oc_tensor *w)
{
    oc_value args[] = {oc_value_tensor(x), oc_value_int(n), oc_value_float(f), oc_value_bool(b),
                       w ? oc_value_tensor(w) : oc_value_none()};
    oc_tensor out;
    if (oc_op_infer(test_op("memo::count"), args, 5, &out) != OC_OK) fail_msg("%s", oc_errmsg());
    return out.sizes[0];
}

static void test_same_question_same_answer_without_running(void **state)
{
    (void)state;
    /* oc_op_call checks its output against the answer: [1] each time only
     * if the shape function ran once */
    float xs[12] = {0}, ys[1];
    oc_tensor x = meta(OC_FLOAT32, 3, 4, false), xd = x, yd;
    xd.data = xs;
    oc_tensor_init(&yd, ys, OC_FLOAT32, 1, (int64_t[]){1});
    oc_value args[] = {oc_value_tensor(&xd), oc_value_int(1), oc_value_float(0.5), oc_value_bool(true),
                       oc_value_none()};
    for (int i = 0; i < 3; i++)
        if (oc_op_call(test_op("memo::count"), args, 5, &yd) != OC_OK) fail_msg("call %d: %s", i, oc_errmsg());
    /* oc_op_infer on a meta tensor asks the same question */
    assert_int_equal(answer(&x, 1, 0.5, true, NULL), 1);
}

static void test_anything_different_runs_it(void **state)
{
    (void)state;
    oc_tensor x = meta(OC_FLOAT32, 3, 4, false), w = meta(OC_FLOAT32, 4, 1, false);
    oc_tensor xt = meta(OC_FLOAT32, 3, 4, true), x5 = meta(OC_FLOAT32, 3, 5, false),
              xd = meta(OC_FLOAT64, 3, 4, false);
    assert_int_equal(answer(&x, 1, 0.5, true, NULL), 1);
    assert_int_equal(answer(&x5, 1, 0.5, true, NULL), 2);  /* sizes */
    assert_int_equal(answer(&xt, 1, 0.5, true, NULL), 3);  /* strides */
    assert_int_equal(answer(&xd, 1, 0.5, true, NULL), 4);  /* dtype */
    assert_int_equal(answer(&x, 2, 0.5, true, NULL), 5);   /* an int */
    assert_int_equal(answer(&x, 1, -0.5, true, NULL), 6);  /* a float */
    assert_int_equal(answer(&x, 1, 0.5, false, NULL), 7);  /* a bool */
    assert_int_equal(answer(&x, 1, 0.5, true, &w), 8);     /* a tensor for None */
    /* a few answers back, still remembered; further back, forgotten */
    assert_int_equal(answer(&x, 1, 0.5, true, &w), 8);
    assert_int_equal(answer(&x, 1, 0.5, false, NULL), 7);
    assert_int_equal(answer(&x, 1, 0.5, true, NULL), 9);
}

static void test_str_arguments_run_it_every_time(void **state)
{
    (void)state;
    oc_tensor x = meta(OC_FLOAT32, 2, 2, false), out;
    oc_value args[] = {oc_value_tensor(&x), oc_value_str("a")};
    for (int64_t i = 1; i <= 3; i++) {
        assert_int_equal(oc_op_infer(test_op("memo::count_s"), args, 2, &out), OC_OK);
        assert_int_equal(out.sizes[0], i);
    }
}

static void *ask_on_a_thread(void *x) { return (void *)(intptr_t)answer(x, 1, 0.5, true, NULL); }

static void test_each_thread_remembers_its_own(void **state)
{
    (void)state;
    oc_tensor x = meta(OC_FLOAT32, 3, 4, false);
    assert_int_equal(answer(&x, 1, 0.5, true, NULL), 1);
    pthread_t t;
    void *ran;
    assert_int_equal(pthread_create(&t, NULL, ask_on_a_thread, &x), 0);
    assert_int_equal(pthread_join(t, &ran), 0);
    assert_int_equal((intptr_t)ran, 2);
    assert_int_equal(answer(&x, 1, 0.5, true, NULL), 1);
}

static void test_off_with_the_environment(void **state)
{
    (void)state;
    setenv("OC_INFER_MEMO", "0", 1); /* read at the first call of this process */
    oc_tensor x = meta(OC_FLOAT32, 3, 4, false);
    for (int64_t i = 1; i <= 3; i++) assert_int_equal(answer(&x, 1, 0.5, true, NULL), i);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_question_same_answer_without_running),
        cmocka_unit_test(test_anything_different_runs_it),
        cmocka_unit_test(test_str_arguments_run_it_every_time),
        cmocka_unit_test(test_each_thread_remembers_its_own),
        cmocka_unit_test(test_off_with_the_environment),
    };
    return oc_test_run("infer_memo", tests, setup, teardown);
}
