/* How tensors reach a kernel through the C host API (src/host/layout.c):
 * dense and row-major unless the op is `.strided`; written tensors that are
 * not contiguous are written back; written tensors with internal overlap or
 * sharing memory with an input are refused (or, for the very same view,
 * read from a copy of the input), single-core and multicore. Each test runs
 * in its own process (support/runner.h) with a timeout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/engine.h"
#include "opcore/host.h"
#include "support/oplib.h"

/* Every kernel reads and writes ->data as dense row-major float32: right
 * only if the layout rule holds. */
static const char compute[] =
    "#include <opcore/kernel.h>\n"
    "void rev_into(const oc_tensor *x, oc_tensor *out) {\n"
    "    const float *s = x->data; float *d = out->data; int64_t n = oc_numel(x);\n"
    "    for (int64_t i = 0; i < n; i++) d[i] = s[n - 1 - i];\n"
    "}\n"
    "oc_tensor *rev(const oc_tensor *x) { rev_into(x, oc_dst_tensor()); return oc_dst_tensor(); }\n"
    "void add_(oc_tensor *x, const oc_tensor *y) {\n"
    "    float *d = x->data; const float *s = y->data; int64_t lo, hi;\n"
    "    oc_core_range(oc_numel(x), 1, &lo, &hi);\n"
    "    for (int64_t i = lo; i < hi; i++) d[i] += s[i];\n"
    "}\n"
    "void add_mc_(oc_tensor *x, const oc_tensor *y) { add_(x, y); }\n"
    "oc_tensor *total(oc_tensor_list xs) {\n"
    "    float acc = 0;\n"
    "    for (int64_t k = 0; k < xs.count; k++) {\n"
    "        const float *s = xs.items[k].data;\n"
    "        for (int64_t i = 0; i < oc_numel(&xs.items[k]); i++) acc += s[i] * (float)(i + 1);\n"
    "    }\n"
    "    *(float *)oc_dst_tensor()->data = acc;\n"
    "    return oc_dst_tensor();\n"
    "}\n"
    "static oc_tensor *stride0(const oc_tensor *x) {\n"
    "    *(int64_t *)oc_dst_tensor()->data = x->strides[0];\n"
    "    return oc_dst_tensor();\n"
    "}\n"
    "void pair_(oc_tensor *a, oc_tensor *b) {\n"
    "    for (int64_t i = 0; i < oc_numel(a); i++) ((float *)a->data)[i] += 1, ((float *)b->data)[i] += 1;\n"
    "}\n"
    "oc_tensor *dense_stride(const oc_tensor *x) { return stride0(x); }\n"
    "oc_tensor *raw_stride(const oc_tensor *x) { return stride0(x); }\n";

static const char shape[] =
    "#include <opcore/library.h>\n"
    "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
    "static oc_tensor *scalar(oc_tensor_list xs) { (void)xs; return oc_empty(OC_FLOAT32, 0, NULL); }\n"
    "static oc_tensor *one(const oc_tensor *x) { (void)x; return oc_empty(OC_INT64, 0, NULL); }\n"
    "OC_LIBRARY(lay, m) {\n"
    "    oc_def(m, \"rev_into(Tensor x, Tensor(a!) out) -> ()\", NULL, \"rev_into\");\n"
    "    oc_def(m, \"rev(Tensor x) -> Tensor\", same, \"rev\");\n"
    "    oc_def(m, \"add_(Tensor(a!) x, Tensor y) -> Tensor(a!)\", NULL, \"add_\");\n"
    "    oc_def(m, \"add_mc_(Tensor(a!) x, Tensor y) -> ()\", NULL, \"add_mc_\", .multicore = true);\n"
    "    oc_def(m, \"total(Tensor[] xs) -> Tensor\", scalar, \"total\");\n"
    "    oc_def(m, \"pair_(Tensor(a!) a, Tensor(b!) b) -> ()\", NULL, \"pair_\");\n"
    "    oc_def(m, \"dense_stride(Tensor x) -> Tensor\", one, \"dense_stride\");\n"
    "    oc_def(m, \"raw_stride(Tensor x) -> Tensor\", one, \"raw_stride\", .strided = true);\n"
    "}\n";

static oc_library *lib;

static int setup(void **state)
{
    (void)state;
    test_use_every_core(); /* small test tensors still run on every core */
    lib = test_build_and_load("lay", compute, shape, (test_lib_options){0});
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    oc_library_unload(lib);
    oc_engine_shutdown();
    return 0;
}

static oc_tensor view(float *data, int ndim, const int64_t *sizes, const int64_t *strides)
{
    oc_tensor t;
    oc_status st = strides ? oc_tensor_init_strided(&t, data, OC_FLOAT32, ndim, sizes, strides)
                           : oc_tensor_init(&t, data, OC_FLOAT32, ndim, sizes);
    if (st != OC_OK) fail_msg("%s", oc_errmsg());
    return t;
}

static void call_ok(const char *name, oc_value *args, int nargs, oc_tensor *outs)
{
    if (oc_op_call(test_op(name), args, nargs, outs) != OC_OK) fail_msg("%s", oc_errmsg());
}

static void call_refused(const char *name, oc_value *args, int nargs, oc_tensor *outs, const char *needle)
{
    assert_int_equal(oc_op_call(test_op(name), args, nargs, outs), OC_EINVAL);
    test_assert_contains(oc_errmsg(), needle);
}

/* a transposed input arrives dense; the caller's struct is untouched */
static void test_transposed_input_arrives_dense(void **state)
{
    (void)state;
    float x[6] = {0, 1, 2, 3, 4, 5}, y[6] = {0};
    oc_tensor xt = view(x, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3}); /* [[0,3],[1,4],[2,5]] */
    oc_tensor out = view(y, 2, (int64_t[]){3, 2}, NULL);
    oc_value a[] = {oc_value_tensor(&xt)};
    call_ok("lay::rev", a, 1, &out);
    const float want[6] = {5, 2, 4, 1, 3, 0};
    assert_memory_equal(y, want, sizeof want);
    assert_int_equal(xt.strides[0], 1);
    assert_ptr_equal(xt.data, x);
}

/* an expanded input (stride 0, as torch's gradient of .sum()) is read as
 * its broadcast values */
static void test_expanded_input_arrives_dense(void **state)
{
    (void)state;
    float one = 2.0f, acc = 0;
    oc_tensor g = view(&one, 1, (int64_t[]){4}, (int64_t[]){0});
    oc_tensor out;
    oc_tensor_init(&out, &acc, OC_FLOAT32, 0, NULL);
    oc_value a[] = {oc_value_tensors(&g, 1)};
    call_ok("lay::total", a, 1, &out);
    assert_true(acc == 2.0f * (1 + 2 + 3 + 4));
}

/* .strided: the kernel gets the caller's strides; otherwise row-major */
static void test_strided_op_gets_raw_strides(void **state)
{
    (void)state;
    float x[6] = {0};
    int64_t s = -1;
    oc_tensor xt = view(x, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3}), out;
    oc_tensor_init(&out, &s, OC_INT64, 0, NULL);
    oc_value a[] = {oc_value_tensor(&xt)};
    call_ok("lay::raw_stride", a, 1, &out);
    assert_int_equal(s, 1);
    call_ok("lay::dense_stride", a, 1, &out);
    assert_int_equal(s, 2);
}

/* an in-place argument that is not contiguous: computed on a dense copy,
 * written back into the caller's elements only */
static void test_in_place_strided_written_back(void **state)
{
    (void)state;
    float x[8] = {0, 1, 2, 3, 4, 5, 6, 7}, y[4] = {10, 20, 30, 40};
    oc_tensor xs = view(x, 1, (int64_t[]){4}, (int64_t[]){2}), yt = view(y, 1, (int64_t[]){4}, NULL), res;
    oc_value a[] = {oc_value_tensor(&xs), oc_value_tensor(&yt)};
    call_ok("lay::add_", a, 2, &res);
    const float want[8] = {10, 1, 22, 3, 34, 5, 46, 7};
    assert_memory_equal(x, want, sizeof want);
    assert_ptr_equal(res.data, x); /* the returned argument is the caller's view */
    assert_int_equal(res.strides[0], 2);
}

/* out=x: the very same view as the input is computed as if x were copied first */
static void test_out_is_the_input(void **state)
{
    (void)state;
    float x[6] = {0, 1, 2, 3, 4, 5};
    oc_tensor t = view(x, 1, (int64_t[]){6}, NULL);
    oc_value a[] = {oc_value_tensor(&t), oc_value_tensor(&t)};
    call_ok("lay::rev_into", a, 2, NULL);
    const float want[6] = {5, 4, 3, 2, 1, 0};
    assert_memory_equal(x, want, sizeof want);
}

/* an in-place argument sharing some elements with an input: refused */
static void test_partial_overlap_refused(void **state)
{
    (void)state;
    float x[6] = {0, 1, 2, 3, 4, 5};
    oc_tensor in = view(x, 1, (int64_t[]){4}, NULL), out = view(x + 2, 1, (int64_t[]){4}, NULL);
    oc_value a[] = {oc_value_tensor(&in), oc_value_tensor(&out)};
    call_refused("lay::rev_into", a, 2, NULL,
                 "op 'lay::rev_into': unsupported operation: some elements of the input tensor 'x' (argument 1) "
                 "and the written-to tensor 'out' (argument 2) refer to a single memory location");
    const float same[6] = {0, 1, 2, 3, 4, 5};
    assert_memory_equal(x, same, sizeof same);
}

/* an in-place target with stride 0 (expand): refused, nothing written */
static void test_expanded_target_refused(void **state)
{
    (void)state;
    float x = 1, y[3] = {1, 1, 1};
    oc_tensor xt = view(&x, 1, (int64_t[]){3}, (int64_t[]){0}), yt = view(y, 1, (int64_t[]){3}, NULL);
    oc_value a[] = {oc_value_tensor(&xt), oc_value_tensor(&yt)};
    call_refused("lay::add_", a, 2, NULL,
                 "op 'lay::add_': unsupported operation: more than one element of the written-to tensor 'x' "
                 "(argument 1) refers to a single memory location");
    assert_true(x == 1.0f);
}

/* an as_strided target whose rows overlap: refused */
static void test_as_strided_target_refused(void **state)
{
    (void)state;
    float x[5] = {0}, y[9] = {0};
    oc_tensor xt = view(x, 2, (int64_t[]){3, 3}, (int64_t[]){1, 1}), yt = view(y, 2, (int64_t[]){3, 3}, NULL);
    oc_value a[] = {oc_value_tensor(&xt), oc_value_tensor(&yt)};
    call_refused("lay::add_", a, 2, NULL, "more than one element of the written-to tensor 'x'");
}

/* multicore: the same refusal */
static void test_multicore_expanded_target_refused(void **state)
{
    (void)state;
    float x = 1, y[64] = {0};
    oc_tensor xt = view(&x, 1, (int64_t[]){64}, (int64_t[]){0}), yt = view(y, 1, (int64_t[]){64}, NULL);
    oc_value a[] = {oc_value_tensor(&xt), oc_value_tensor(&yt)};
    call_refused("lay::add_mc_", a, 2, NULL, "op 'lay::add_mc_': unsupported operation: more than one element");
}

/* multicore: a strided in-place target is written back */
static void test_multicore_strided_written_back(void **state)
{
    (void)state;
    float x[128], y[64];
    for (int i = 0; i < 128; i++) x[i] = (float)i;
    for (int i = 0; i < 64; i++) y[i] = 1000;
    oc_tensor xt = view(x, 1, (int64_t[]){64}, (int64_t[]){2}), yt = view(y, 1, (int64_t[]){64}, NULL);
    oc_value a[] = {oc_value_tensor(&xt), oc_value_tensor(&yt)};
    call_ok("lay::add_mc_", a, 2, NULL);
    for (int i = 0; i < 128; i++) assert_true(x[i] == (float)i + (i % 2 ? 0 : 1000));
}

/* a result buffer the caller gives that overlaps an input: refused */
static void test_caller_out_overlapping_input_refused(void **state)
{
    (void)state;
    float x[8] = {0};
    oc_tensor in = view(x, 1, (int64_t[]){6}, NULL), out = view(x + 2, 1, (int64_t[]){6}, NULL);
    oc_value a[] = {oc_value_tensor(&in)};
    call_refused("lay::rev", a, 1, &out,
                 "some elements of the input tensor 'x' (argument 1) and the written-to tensor result 0 refer");
}

/* the span test's edges: a result buffer ending where the input starts
 * runs; one sharing only the input's last element is refused */
static void test_caller_out_touching_input_runs(void **state)
{
    (void)state;
    float x[6] = {1, 2, 3, 0, 0, 0};
    oc_tensor in = view(x, 1, (int64_t[]){3}, NULL), out = view(x + 3, 1, (int64_t[]){3}, NULL);
    oc_value a[] = {oc_value_tensor(&in)};
    call_ok("lay::rev", a, 1, &out);
    const float want[6] = {1, 2, 3, 3, 2, 1};
    assert_memory_equal(x, want, sizeof want);
}

static void test_caller_out_sharing_one_element_refused(void **state)
{
    (void)state;
    float x[6] = {0};
    oc_tensor in = view(x, 1, (int64_t[]){3}, NULL), out = view(x + 2, 1, (int64_t[]){3}, NULL);
    oc_value a[] = {oc_value_tensor(&in)};
    call_refused("lay::rev", a, 1, &out, "refer to a single memory location");
}

/* a result buffer between two list items (inside their hull, overlapping
 * neither) runs; one inside an item is refused */
static void test_caller_out_between_list_items_runs(void **state)
{
    (void)state;
    float m[5] = {1, 2, -1, 3, 4};
    oc_tensor items[2] = {view(m, 1, (int64_t[]){2}, NULL), view(m + 3, 1, (int64_t[]){2}, NULL)};
    oc_tensor out = view(m + 2, 0, NULL, NULL);
    oc_value a[] = {oc_value_tensors(items, 2)};
    call_ok("lay::total", a, 1, &out);
    assert_true(m[2] == 1 + 2 * 2 + 3 + 2 * 4);
}

static void test_caller_out_inside_a_list_item_refused(void **state)
{
    (void)state;
    float m[4] = {1, 2, 3, 4};
    oc_tensor items[2] = {view(m, 1, (int64_t[]){2}, NULL), view(m + 2, 1, (int64_t[]){2}, NULL)};
    oc_tensor out = view(m + 3, 0, NULL, NULL);
    oc_value a[] = {oc_value_tensors(items, 2)};
    call_refused("lay::total", a, 1, &out, "refer to a single memory location");
}

/* oc_op_call_prechecked (the JAX handler's call) checks the caller's buffers too */
static void test_prechecked_out_overlapping_input_refused(void **state)
{
    (void)state;
    float x[8] = {0};
    oc_tensor in = view(x, 1, (int64_t[]){6}, NULL), out = view(x + 2, 1, (int64_t[]){6}, NULL);
    oc_value a[] = {oc_value_tensor(&in)};
    assert_int_equal(oc_op_call_prechecked(test_op("lay::rev"), a, 1, &out, NULL), OC_EINVAL);
    assert_non_null(strstr(oc_errmsg(), "refer to a single memory location"));
}

/* a result buffer that is not contiguous is written back */
static void test_caller_out_strided_written_back(void **state)
{
    (void)state;
    float x[3] = {1, 2, 3}, y[6] = {0};
    oc_tensor in = view(x, 1, (int64_t[]){3}, NULL), out = view(y, 1, (int64_t[]){3}, (int64_t[]){2});
    oc_value a[] = {oc_value_tensor(&in)};
    call_ok("lay::rev", a, 1, &out);
    const float want[6] = {3, 0, 2, 0, 1, 0};
    assert_memory_equal(y, want, sizeof want);
    assert_ptr_equal(out.data, y);
    assert_int_equal(out.strides[0], 2);
}

/* x += x: the input that is the in-place argument itself is read from a copy */
static void test_in_place_with_itself(void **state)
{
    (void)state;
    float y[4] = {1, 2, 3, 4};
    oc_tensor yt = view(y, 1, (int64_t[]){4}, NULL);
    oc_value b[] = {oc_value_tensor(&yt), oc_value_tensor(&yt)};
    call_ok("lay::add_", b, 2, NULL);
    const float twice[4] = {2, 4, 6, 8};
    assert_memory_equal(y, twice, sizeof twice);
}

/* two written tensors sharing memory: refused, nothing written */
static void test_written_tensors_sharing_memory_refused(void **state)
{
    (void)state;
    float x[5] = {0};
    oc_tensor a = view(x, 1, (int64_t[]){4}, NULL), b = view(x + 1, 1, (int64_t[]){4}, NULL);
    oc_value v[] = {oc_value_tensor(&a), oc_value_tensor(&b)};
    call_refused("lay::pair_", v, 2, NULL,
                 "op 'lay::pair_': unsupported operation: some elements of the written-to tensors 'a' (argument 1) "
                 "and 'b' (argument 2) refer to a single memory location");
    assert_true(x[0] == 0 && x[4] == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transposed_input_arrives_dense),
        cmocka_unit_test(test_expanded_input_arrives_dense),
        cmocka_unit_test(test_strided_op_gets_raw_strides),
        cmocka_unit_test(test_in_place_strided_written_back),
        cmocka_unit_test(test_out_is_the_input),
        cmocka_unit_test(test_partial_overlap_refused),
        cmocka_unit_test(test_expanded_target_refused),
        cmocka_unit_test(test_as_strided_target_refused),
        cmocka_unit_test(test_multicore_expanded_target_refused),
        cmocka_unit_test(test_multicore_strided_written_back),
        cmocka_unit_test(test_caller_out_overlapping_input_refused),
        cmocka_unit_test(test_caller_out_touching_input_runs),
        cmocka_unit_test(test_caller_out_sharing_one_element_refused),
        cmocka_unit_test(test_caller_out_between_list_items_runs),
        cmocka_unit_test(test_caller_out_inside_a_list_item_refused),
        cmocka_unit_test(test_prechecked_out_overlapping_input_refused),
        cmocka_unit_test(test_caller_out_strided_written_back),
        cmocka_unit_test(test_in_place_with_itself),
        cmocka_unit_test(test_written_tensors_sharing_memory_refused),
    };
    return oc_test_run("layout", tests, setup, teardown);
}
