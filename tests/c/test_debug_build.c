/* What a --debug build catches beyond output overruns (issue 18, item 8):
 * a kernel writing into one of its read-only input tensors (found by the
 * input checksums, src/host/debug_inputs.c) and a TCM buffer overrun that
 * stays inside the arena (found by the TCM redzones, src/engine/tcm.c),
 * each named by op and argument or buffer. The same kernels in a release
 * build run unchecked (documented: no cost, no check). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/host.h"
#include "support/oplib.h"

static const char *compute_src =
    "#include <stdbool.h>\n"
    "#include <string.h>\n"
    "#include <opcore/kernel.h>\n"
    "/* copies x; first writes 99 into x[at] (casting const away) when at >= 0 */\n"
    "oc_tensor *poke_input(const oc_tensor *x, int64_t at) {\n"
    "  if (at >= 0) ((float *)x->data)[at * x->strides[0]] = 99;\n"
    "  oc_tensor *o = oc_dst_tensor();\n"
    "  for (int64_t i = 0; i < oc_numel(x); i++) ((float *)o->data)[i] = ((const float *)x->data)[i * x->strides[0]];\n"
    "  return o; }\n"
    "oc_tensor *poke_list(oc_tensor_list xs, int64_t item) {\n"
    "  if (item >= 0) ((float *)xs.items[item].data)[0] = 99;\n"
    "  oc_tensor *o = oc_dst_tensor();\n"
    "  memcpy(o->data, xs.items[0].data, (size_t)oc_numel(o) * 4);\n"
    "  return o; }\n"
    "/* writes its in-place argument: allowed */\n"
    "void bump_(oc_tensor *x) {\n"
    "  for (int64_t i = 0; i < oc_numel(x); i++) ((float *)x->data)[i] += 1; }\n"
    "/* two TCM buffers of 40 floats; writes `past` floats beyond the first's\n"
    " * end (into the space before the second), frees it first if free_it */\n"
    "oc_tensor *tcm_overrun(const oc_tensor *x, int64_t past, bool free_it) {\n"
    "  float *a = oc_tcm_malloc(40 * sizeof(float)), *b = oc_tcm_malloc(40 * sizeof(float));\n"
    "  for (int64_t i = 0; i < 40 + past; i++) a[i] = (float)i;\n"
    "  for (int i = 0; i < 40; i++) b[i] = 1;\n"
    "  if (free_it) oc_tcm_free(a);\n"
    "  oc_tensor *o = oc_dst_tensor();\n"
    "  for (int64_t i = 0; i < oc_numel(x); i++) ((float *)o->data)[i] = b[i % 40] + ((const float *)x->data)[i];\n"
    "  return o; }\n";

static const char *shape_src =
    "#include <opcore/library.h>\n"
    "static oc_tensor *same(const oc_tensor *x, int64_t n) { (void)n; return oc_empty_like(x); }\n"
    "static oc_tensor *first(oc_tensor_list xs, int64_t n) { (void)n; return oc_empty_like(&xs.items[0]); }\n"
    "static oc_tensor *same_b(const oc_tensor *x, int64_t n, bool f) { (void)n; (void)f; return oc_empty_like(x); }\n"
    "OC_LIBRARY(dbg, m) {\n"
    "  oc_def(m, \"poke_input(Tensor x, int at) -> Tensor\", same, \"poke_input\");\n"
    "  oc_def(m, \"poke_list(Tensor[] xs, int item) -> Tensor\", first, \"poke_list\");\n"
    "  oc_def(m, \"bump_(Tensor(a!) x) -> Tensor(a!)\", NULL, \"bump_\");\n"
    "  oc_def(m, \"tcm_overrun(Tensor x, int past, bool free_it) -> Tensor\", same_b, \"tcm_overrun\");\n"
    "}\n";

static oc_library *load(bool debug, bool multicore)
{
    return test_build_and_load("dbg", compute_src, shape_src,
                               (test_lib_options){.debug = debug, .multicore = multicore});
}

static oc_status call(const char *name, oc_value *args, int nargs, float *out, int64_t n)
{
    oc_tensor yt;
    oc_tensor_init(&yt, out, OC_FLOAT32, 1, (int64_t[]){n});
    const oc_op *op = oc_op_find(name);
    assert_non_null(op);
    return oc_op_call(op, args, nargs, &yt);
}

/* dbg::poke_input on 8 zeros in x, writing x[at] (at >= 0) */
static oc_status poke(float *x, int64_t at)
{
    float y[8];
    oc_tensor xt;
    oc_tensor_init(&xt, x, OC_FLOAT32, 1, (int64_t[]){8});
    oc_value args[] = {oc_value_tensor(&xt), oc_value_int(at)};
    memset(x, 0, 8 * sizeof *x);
    return call("dbg::poke_input", args, 2, y, 8);
}

static void test_write_into_input_names_op_and_argument(void **state)
{
    (void)state;
    oc_library *lib = load(true, false);
    float x[8];
    assert_int_equal(poke(x, 3), OC_EFAULT);
    test_assert_contains(oc_errmsg(), "op 'dbg::poke_input': kernel 'poke_input' wrote into its input 'x' "
                                      "(argument 1, float32 [8])");
    test_assert_contains(oc_errmsg(), "declare the argument Tensor(a!) in the schema");
    assert_int_equal(poke(x, -1), OC_OK); /* a kernel that only reads its input passes */
    oc_library_unload(lib);
}

/* A strided view: only its elements count, not the gaps between them. */
static void test_write_into_a_strided_input_is_caught(void **state)
{
    (void)state;
    oc_library *lib = load(true, false);
    float x[16] = {0}, y[8];
    oc_tensor xt;
    oc_tensor_init_strided(&xt, x, OC_FLOAT32, 1, (int64_t[]){8}, (int64_t[]){2});
    oc_value args[] = {oc_value_tensor(&xt), oc_value_int(7)};
    assert_int_equal(call("dbg::poke_input", args, 2, y, 8), OC_EFAULT);
    test_assert_contains(oc_errmsg(), "wrote into its input 'x' (argument 1, float32 [8])");
    oc_library_unload(lib);
}

static void test_write_into_a_list_item_names_the_item(void **state)
{
    (void)state;
    oc_library *lib = load(true, false);
    float a[4] = {0}, b[4] = {0}, y[4];
    oc_tensor items[2];
    oc_tensor_init(&items[0], a, OC_FLOAT32, 1, (int64_t[]){4});
    oc_tensor_init(&items[1], b, OC_FLOAT32, 1, (int64_t[]){4});
    oc_value args[] = {oc_value_tensors(items, 2), oc_value_int(1)};
    assert_int_equal(call("dbg::poke_list", args, 2, y, 4), OC_EFAULT);
    test_assert_contains(oc_errmsg(), "op 'dbg::poke_list': kernel 'poke_list' wrote into its input 'xs' item 1 "
                                      "(argument 1, float32 [4])");
    test_assert_contains(oc_errmsg(), "Tensor(a!)[]");
    oc_library_unload(lib);
}

static void test_in_place_argument_may_be_written(void **state)
{
    (void)state;
    oc_library *lib = load(true, false);
    float x[4] = {1, 2, 3, 4};
    oc_tensor xt;
    oc_tensor_init(&xt, x, OC_FLOAT32, 1, (int64_t[]){4});
    oc_value args[] = {oc_value_tensor(&xt)};
    const oc_op *op = oc_op_find("dbg::bump_");
    assert_non_null(op);
    oc_tensor out;
    assert_int_equal(oc_op_call(op, args, 1, &out), OC_OK);
    assert_true(x[0] == 2 && x[3] == 5);
    oc_library_unload(lib);
}

static void tcm_case(bool multicore, int64_t past, bool free_it, const char *needle)
{
    oc_library *lib = load(true, multicore);
    float x[64] = {0}, y[64];
    oc_tensor xt;
    oc_tensor_init(&xt, x, OC_FLOAT32, 1, (int64_t[]){64});
    oc_value args[] = {oc_value_tensor(&xt), oc_value_int(past), oc_value_bool(free_it)};
    assert_int_equal(call("dbg::tcm_overrun", args, 3, y, 64), OC_EFAULT);
    test_assert_contains(oc_errmsg(), "op 'dbg::tcm_overrun': kernel 'tcm_overrun' wrote past the end of TCM "
                                      "buffer 1 (the call's oc_tcm_malloc number 1: 160 bytes at offset 64");
    test_assert_contains(oc_errmsg(), needle);
    /* in bounds, it runs */
    args[1] = oc_value_int(0);
    assert_int_equal(call("dbg::tcm_overrun", args, 3, y, 64), OC_OK);
    assert_true(y[0] == 1 && y[63] == 1);
    oc_library_unload(lib);
}

static void test_tcm_overrun_caught_when_the_kernel_returns(void **state)
{
    (void)state;
    tcm_case(false, 1, false, "byte 0 after its end changed (found by the debug build's TCM redzones)");
}

static void test_tcm_overrun_caught_at_oc_tcm_free(void **state)
{
    (void)state;
    tcm_case(false, 8, true, "byte 0 after its end changed");
}

static void test_tcm_overrun_caught_on_every_core(void **state)
{
    (void)state;
    tcm_case(true, 2, false, "TCM redzones");
}

/* The release build of the same kernels: nothing is checked (its call
 * pays nothing for it). */
static void test_release_build_does_not_check(void **state)
{
    (void)state;
    oc_library *lib = load(false, false);
    float x[8];
    assert_int_equal(poke(x, 3), OC_OK);
    assert_true(x[3] == 99);
    oc_library_unload(lib);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_into_input_names_op_and_argument),
        cmocka_unit_test(test_write_into_a_strided_input_is_caught),
        cmocka_unit_test(test_write_into_a_list_item_names_the_item),
        cmocka_unit_test(test_in_place_argument_may_be_written),
        cmocka_unit_test(test_tcm_overrun_caught_when_the_kernel_returns),
        cmocka_unit_test(test_tcm_overrun_caught_at_oc_tcm_free),
        cmocka_unit_test(test_tcm_overrun_caught_on_every_core),
        cmocka_unit_test(test_release_build_does_not_check),
    };
    return oc_test_run("debug_build", tests, NULL, NULL);
}
