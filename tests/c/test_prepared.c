/* Prepared calls (host.h: oc_call_prepare / oc_call_run): bound once, run
 * on new data pointers with the same results, checks and errors as
 * oc_op_call; strided, in-place and overlapping runs take the long way.
 * Each test runs in its own process (support/runner.h) with a timeout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/engine.h"
#include "opcore/host.h"
#include "support/oplib.h"

static const char compute[] =
    "#include <opcore/kernel.h>\n"
    "oc_tensor *axpb(const oc_tensor *x, double a, double b) {\n"
    "    const float *s = x->data; float *d = oc_dst_tensor()->data;\n"
    "    for (int64_t i = 0, n = oc_numel(x); i < n; i++) d[i] = (float)(a * s[i] + b);\n"
    "    return oc_dst_tensor();\n"
    "}\n"
    "oc_tensor *axpb_mc(const oc_tensor *x, double a, double b) {\n"
    "    const float *s = x->data; float *d = oc_dst_tensor()->data; int64_t lo, hi;\n"
    "    oc_core_range(oc_numel(x), 1, &lo, &hi);\n"
    "    for (int64_t i = lo; i < hi; i++) d[i] = (float)(a * s[i] + b);\n"
    "    return oc_dst_tensor();\n"
    "}\n"
    "oc_tensor *rev(const oc_tensor *x) {\n"
    "    const float *s = x->data; float *d = oc_dst_tensor()->data; int64_t n = oc_numel(x);\n"
    "    for (int64_t i = 0; i < n; i++) d[i] = s[n - 1 - i];\n"
    "    return oc_dst_tensor();\n"
    "}\n"
    "oc_tensor *sum_opt(oc_tensor_list xs, const oc_tensor *w) {\n"
    "    float *d = oc_dst_tensor()->data;\n"
    "    for (int64_t i = 0; i < oc_numel(oc_dst_tensor()); i++) {\n"
    "        d[i] = w ? ((const float *)w->data)[i] : 0;\n"
    "        for (int64_t k = 0; k < xs.count; k++) d[i] += ((const float *)xs.items[k].data)[i];\n"
    "    }\n"
    "    return oc_dst_tensor();\n"
    "}\n"
    "void axpy_(oc_tensor *y, const oc_tensor *x, double a) {\n"
    "    float *d = y->data; const float *s = x->data;\n"
    "    for (int64_t i = 0, n = oc_numel(y); i < n; i++) d[i] += (float)(a * s[i]);\n"
    "}\n"
    "void scale_(oc_tensor *x, double a) {\n"
    "    float *d = x->data;\n"
    "    for (int64_t i = 0, n = oc_numel(x); i < n; i++) d[i] *= (float)a;\n"
    "}\n"
    "oc_tensor *crash(const oc_tensor *x) { (void)x; *(volatile int *)16 = 1; return oc_dst_tensor(); }\n"
    "oc_tensor *refuse(const oc_tensor *x) {\n"
    "    OC_CHECK(((const float *)x->data)[0] >= 0, \"x[0] is negative\");\n"
    "    return oc_dst_tensor();\n"
    "}\n";

static const char shape[] =
    "#include <opcore/library.h>\n"
    "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
    "static oc_tensor *same3(const oc_tensor *x, double a, double b) { (void)a, (void)b; return oc_empty_like(x); }\n"
    "static oc_tensor *first(oc_tensor_list xs, const oc_tensor *w) { (void)w; return oc_empty_like(&xs.items[0]); }\n"
    "OC_LIBRARY(prep, m) {\n"
    "    oc_def(m, \"axpb(Tensor x, float a, float b=0.5) -> Tensor\", same3, \"axpb\");\n"
    "    oc_def(m, \"axpb_mc(Tensor x, float a, float b=0.5) -> Tensor\", same3, \"axpb_mc\", .multicore = true);\n"
    "    oc_def(m, \"rev(Tensor x) -> Tensor\", same, \"rev\");\n"
    "    oc_def(m, \"sum_opt(Tensor[] xs, Tensor? w) -> Tensor\", first, \"sum_opt\");\n"
    "    oc_def(m, \"scale_(Tensor(a!) x, float a) -> Tensor(a!)\", NULL, \"scale_\");\n"
    "    oc_def(m, \"axpy_(Tensor(a!) y, Tensor x, float a) -> ()\", NULL, \"axpy_\");\n"
    "    oc_def(m, \"crash(Tensor x) -> Tensor\", same, \"crash\");\n"
    "    oc_def(m, \"refuse(Tensor x) -> Tensor\", same, \"refuse\");\n"
    "}\n";

static oc_library *lib;

static int setup(void **state)
{
    (void)state;
    test_use_every_core();
    lib = test_build_and_load("prep", compute, shape, (test_lib_options){0});
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_unload_and_shutdown(&lib);
    return 0;
}

static oc_tensor vec(float *data, int64_t n) /* data may be NULL: a shape only */
{
    oc_tensor t;
    if (oc_tensor_init(&t, data, OC_FLOAT32, 1, (int64_t[]){n}) != OC_OK) fail_msg("%s", oc_errmsg());
    return t;
}

static oc_call *prepare(const char *name, const oc_value *args, int nargs, const oc_tensor *outs)
{
    oc_call *c = NULL;
    if (oc_call_prepare(test_op(name), args, nargs, outs, NULL, &c) != OC_OK) fail_msg("%s", oc_errmsg());
    return c;
}

static void run_ok(oc_call *c, void *const *data)
{
    if (oc_call_run(c, data) != OC_OK) fail_msg("%s", oc_errmsg());
}

/* one preparation, many runs on new buffers: the results of oc_op_call,
 * with the non-tensor arguments (and the default b) bound once */
static void test_runs_on_new_data(void **state)
{
    (void)state;
    oc_tensor xs = vec(NULL, 4), ys = vec(NULL, 4);
    oc_value a[] = {oc_value_tensor(&xs), oc_value_float(2.0)};
    oc_call *c = prepare("prep::axpb", a, 2, &ys);
    assert_int_equal(oc_call_num_data(c), 2);
    for (int r = 0; r < 50; r++) {
        float x[4] = {(float)r, 1, 2, 3}, y[4] = {0}, want[4] = {0};
        run_ok(c, (void *[]){x, y});
        oc_tensor xt = vec(x, 4), yt = vec(want, 4);
        oc_value b[] = {oc_value_tensor(&xt), oc_value_float(2.0)};
        if (oc_op_call(test_op("prep::axpb"), b, 2, &yt) != OC_OK) fail_msg("%s", oc_errmsg());
        assert_memory_equal(y, want, sizeof want);
        assert_true(y[0] == 2.0f * (float)r + 0.5f);
    }
    oc_call_free(c);
}

/* a multicore op: every core's share of the result is written */
static void test_multicore_op(void **state)
{
    (void)state;
    enum { N = 100000 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = (float)i;
    oc_tensor xs = vec(NULL, N), ys = vec(NULL, N);
    oc_value a[] = {oc_value_tensor(&xs), oc_value_float(3.0), oc_value_float(1.0)};
    oc_call *c = prepare("prep::axpb_mc", a, 3, &ys);
    run_ok(c, (void *[]){x, y});
    for (int i = 0; i < N; i++) assert_true(y[i] == 3.0f * (float)i + 1.0f);
    for (int i = 0; i < N; i++) x[i] = (float)(N - i);
    run_ok(c, (void *[]){x, y}); /* the planned launch again, on the new data */
    for (int i = 0; i < N; i++) assert_true(y[i] == 3.0f * (float)(N - i) + 1.0f);
    oc_call_free(c);
    /* too small to split: one share on the calling core, every element written */
    float sx[5] = {1, 2, 3, 4, 5}, sy[5] = {0};
    oc_tensor st = vec(NULL, 5), sty = vec(NULL, 5);
    oc_value b[] = {oc_value_tensor(&st), oc_value_float(3.0), oc_value_float(1.0)};
    c = prepare("prep::axpb_mc", b, 3, &sty);
    for (int r = 0; r < 3; r++) {
        sx[0] = (float)r;
        run_ok(c, (void *[]){sx, sy});
        assert_true(sy[0] == 3.0f * (float)r + 1.0f && sy[4] == 16.0f);
    }
    oc_call_free(c);
}

/* data slots: list items in order, none for a Tensor? given None; then the result */
static void test_list_and_optional_slots(void **state)
{
    (void)state;
    float p[2] = {1, 2}, q[2] = {10, 20}, w[2] = {100, 200}, y[2];
    oc_tensor items[2] = {vec(NULL, 2), vec(NULL, 2)}, wt = vec(NULL, 2), ys = vec(NULL, 2);
    oc_value none[] = {oc_value_tensors(items, 2), oc_value_none()};
    oc_call *c = prepare("prep::sum_opt", none, 2, &ys);
    assert_int_equal(oc_call_num_data(c), 3);
    run_ok(c, (void *[]){p, q, y});
    assert_true(y[0] == 11 && y[1] == 22);
    oc_call_free(c);
    oc_value some[] = {oc_value_tensors(items, 2), oc_value_tensor(&wt)};
    c = prepare("prep::sum_opt", some, 2, &ys);
    assert_int_equal(oc_call_num_data(c), 4);
    run_ok(c, (void *[]){p, q, w, y});
    assert_true(y[0] == 111 && y[1] == 222);
    oc_call_free(c);
}

/* a transposed input (prepared strides) arrives dense on every run */
static void test_strided_input_arrives_dense(void **state)
{
    (void)state;
    float x[6] = {0, 1, 2, 3, 4, 5}, y[6];
    oc_tensor xt, ys;
    oc_tensor_init_strided(&xt, NULL, OC_FLOAT32, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3});
    oc_tensor_init(&ys, NULL, OC_FLOAT32, 2, (int64_t[]){3, 2});
    oc_value a[] = {oc_value_tensor(&xt)};
    oc_call *c = prepare("prep::rev", a, 1, &ys);
    run_ok(c, (void *[]){x, y});
    const float want[6] = {5, 2, 4, 1, 3, 0};
    assert_memory_equal(y, want, sizeof want);
    oc_call_free(c);
}

/* an in-place op: written on each run's buffer */
static void test_in_place_op(void **state)
{
    (void)state;
    float x[3] = {1, 2, 3};
    oc_tensor xs = vec(NULL, 3);
    oc_value a[] = {oc_value_tensor(&xs), oc_value_float(2.0)};
    oc_call *c = prepare("prep::scale_", a, 2, NULL);
    assert_int_equal(oc_call_num_data(c), 1);
    run_ok(c, (void *[]){x});
    run_ok(c, (void *[]){x});
    assert_true(x[0] == 4 && x[1] == 8 && x[2] == 12);
    oc_call_free(c);
}

/* an argument written in place, checked against the others per run: apart,
 * the kernel runs on the bound frame; the same buffer is computed as if the
 * input were copied first; a partial overlap is refused, nothing written */
static void test_written_argument_checked_per_run(void **state)
{
    (void)state;
    float y[4] = {1, 2, 3, 4}, x[4] = {10, 20, 30, 40}, buf[5] = {0, 1, 2, 3, 4};
    oc_tensor ys = vec(NULL, 4), xs = vec(NULL, 4);
    oc_value a[] = {oc_value_tensor(&ys), oc_value_tensor(&xs), oc_value_float(0.5)};
    oc_call *c = prepare("prep::axpy_", a, 3, NULL);
    assert_int_equal(oc_call_num_data(c), 2);
    run_ok(c, (void *[]){y, x});
    const float want[4] = {6, 12, 18, 24};
    assert_memory_equal(y, want, sizeof want);
    run_ok(c, (void *[]){y, y});
    const float twice[4] = {9, 18, 27, 36};
    assert_memory_equal(y, twice, sizeof twice);
    assert_int_equal(oc_call_run(c, (void *[]){buf, buf + 1}), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "op 'prep::axpy_'");
    test_assert_contains(oc_errmsg(), "refer to a single memory location");
    const float untouched[5] = {0, 1, 2, 3, 4};
    assert_memory_equal(buf, untouched, sizeof untouched);
    run_ok(c, (void *[]){x, y});
    const float again[4] = {14.5f, 29, 43.5f, 58};
    assert_memory_equal(x, again, sizeof again);
    oc_call_free(c);
}

/* a run whose result overlaps its input: refused as oc_op_call refuses it;
 * the very same buffer is computed as if the input were copied first */
static void test_overlap_checked_per_run(void **state)
{
    (void)state;
    float buf[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    oc_tensor xs = vec(NULL, 4), ys = vec(NULL, 4);
    oc_value a[] = {oc_value_tensor(&xs)};
    oc_call *c = prepare("prep::rev", a, 1, &ys);
    assert_int_equal(oc_call_run(c, (void *[]){buf, buf + 2}), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "op 'prep::rev'");
    test_assert_contains(oc_errmsg(), "refer to a single memory location");
    const float untouched[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    assert_memory_equal(buf, untouched, sizeof untouched);
    run_ok(c, (void *[]){buf, buf});
    const float reversed[4] = {3, 2, 1, 0};
    assert_memory_equal(buf, reversed, sizeof reversed);
    run_ok(c, (void *[]){buf, buf + 4}); /* touching, not overlapping */
    const float after[4] = {0, 1, 2, 3};
    assert_memory_equal(buf + 4, after, sizeof after);
    oc_call_free(c);
}

/* a result between two inputs (inside their hull, meeting neither) runs; one
 * meeting the second input in part is refused, nothing written */
static void test_result_between_inputs(void **state)
{
    (void)state;
    float buf[16] = {1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 100, 200, 0, 0};
    oc_tensor items[1] = {vec(NULL, 2)}, wt = vec(NULL, 2), ys = vec(NULL, 2);
    oc_value a[] = {oc_value_tensors(items, 1), oc_value_tensor(&wt)};
    oc_call *c = prepare("prep::sum_opt", a, 2, &ys);
    run_ok(c, (void *[]){buf, buf + 12, buf + 4});
    assert_true(buf[4] == 101 && buf[5] == 202);
    assert_int_equal(oc_call_run(c, (void *[]){buf, buf + 12, buf + 13}), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "op 'prep::sum_opt'");
    test_assert_contains(oc_errmsg(), "refer to a single memory location");
    assert_true(buf[13] == 200 && buf[14] == 0);
    oc_call_free(c);
}

/* bad use: clear errors naming the op and the slot */
static void test_errors(void **state)
{
    (void)state;
    float x[4] = {0}, y[4];
    oc_tensor xs = vec(NULL, 4), ys = vec(NULL, 4), wrong = vec(NULL, 5);
    oc_value a[] = {oc_value_tensor(&xs), oc_value_float(1.0)};
    oc_call *c = NULL;
    assert_int_equal(oc_call_prepare(test_op("prep::axpb"), a, 2, &wrong, NULL, &c), OC_ESHAPE);
    test_assert_contains(oc_errmsg(), "op 'prep::axpb': the caller's output is float32 [5] but the shape function "
                                      "says float32 [4]");
    assert_null(c);
    assert_int_equal(oc_call_prepare(test_op("prep::axpb"), a, 2, NULL, NULL, &c), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "`outs` is required");
    oc_value bad[] = {oc_value_int(3)};
    assert_int_equal(oc_call_prepare(test_op("prep::axpb"), bad, 1, &ys, NULL, &c), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "argument 1 'x': expected Tensor, got int");
    c = prepare("prep::axpb", a, 2, &ys);
    assert_int_equal(oc_call_run(c, (void *[]){x, NULL}), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "op 'prep::axpb': oc_call_run: data pointer 1 (result 0) is NULL");
    assert_int_equal(oc_call_run(c, (void *[]){NULL, y}), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "data pointer 0 (argument 'x') is NULL");
    assert_int_equal(oc_call_run(c, NULL), OC_EINVAL);
    assert_int_equal(oc_call_run(NULL, NULL), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "oc_call_run: call is required");
    oc_call_free(c);
    oc_call_free(NULL);
    assert_int_equal(oc_call_num_data(NULL), 0);
}

/* a kernel that fails a check on some data: that run fails with its
 * message, the runs around it work */
static void test_kernel_failure_in_a_run(void **state)
{
    (void)state;
    float good[2] = {1, 2}, bad[2] = {-1, 2}, y[2];
    oc_tensor xs = vec(NULL, 2), ys = vec(NULL, 2);
    oc_value a[] = {oc_value_tensor(&xs)};
    oc_call *c = prepare("prep::refuse", a, 1, &ys);
    for (int i = 0; i < 3; i++) {
        run_ok(c, (void *[]){good, y});
        assert_int_equal(oc_call_run(c, (void *[]){bad, y}), OC_EKERNEL);
        test_assert_contains(oc_errmsg(), "x[0] is negative");
    }
    oc_call_free(c);
}

/* a kernel that faults: the run fails with the fault's message, the next
 * run of the same prepared call works */
static void test_fault_in_a_run(void **state)
{
    (void)state;
    if (getenv("OC_UNDER_VALGRIND")) return; /* the fault itself is what valgrind reports */
    float x[2] = {1, 2}, y[2];
    oc_tensor xs = vec(NULL, 2), ys = vec(NULL, 2);
    oc_value a[] = {oc_value_tensor(&xs)};
    oc_call *c = prepare("prep::crash", a, 1, &ys);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(oc_call_run(c, (void *[]){x, y}), OC_EFAULT);
        test_assert_contains(oc_errmsg(), "crash");
    }
    oc_call_free(c);
    c = prepare("prep::rev", a, 1, &ys);
    run_ok(c, (void *[]){x, y});
    assert_true(y[0] == 2 && y[1] == 1);
    oc_call_free(c);
}

/* after its library is unloaded, a prepared call's run fails cleanly */
static void test_run_after_unload(void **state)
{
    (void)state;
    float x[2] = {1, 2}, y[2];
    oc_tensor xs = vec(NULL, 2), ys = vec(NULL, 2);
    oc_value a[] = {oc_value_tensor(&xs)};
    oc_call *c = prepare("prep::rev", a, 1, &ys);
    assert_int_equal(oc_library_unload(lib), OC_OK);
    lib = NULL;
    assert_int_equal(oc_call_run(c, (void *[]){x, y}), OC_ENOTFOUND);
    test_assert_contains(oc_errmsg(), "was unloaded");
    oc_call_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_on_new_data),
        cmocka_unit_test(test_multicore_op),
        cmocka_unit_test(test_list_and_optional_slots),
        cmocka_unit_test(test_strided_input_arrives_dense),
        cmocka_unit_test(test_in_place_op),
        cmocka_unit_test(test_overlap_checked_per_run),
        cmocka_unit_test(test_result_between_inputs),
        cmocka_unit_test(test_written_argument_checked_per_run),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_kernel_failure_in_a_run),
        cmocka_unit_test(test_fault_in_a_run),
        cmocka_unit_test(test_run_after_unload),
    };
    return oc_test_run("prepared", tests, setup, teardown);
}
