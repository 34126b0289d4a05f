/* The launch grid: program ids over 1-3 axes from the op's default, its
 * shape function and a per-call grid; every instance runs exactly once on
 * any core count (uneven grids on 2 cores); collectives refused; bad grids
 * are errors naming the op. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/engine.h"
#include "opcore/host.h"
#include "support/oplib.h"

/* Each instance writes its row of the int64 output [instances, 5]: its
 * linear id as the row, then oc_program_id(0..2) and a count of visits. */
static const char *compute_src =
    "#include <opcore/kernel.h>\n"
    "static void mark(void) {\n"
    "    oc_tensor *out = oc_dst_tensor();\n"
    "    int64_t *o = out->data;\n"
    "    int64_t row = (oc_program_id(0) * oc_num_programs(1) + oc_program_id(1)) * oc_num_programs(2)\n"
    "                  + oc_program_id(2);\n"
    "    OC_CHECK(row < out->sizes[0], \"row %lld of %lld\", (long long)row, (long long)out->sizes[0]);\n"
    "    OC_CHECK((int64_t)oc_cpu_id() == row, \"cpu id %u is not the linear id %lld\", oc_cpu_id(), (long long)row);\n"
    "    OC_CHECK(oc_cpu_count() == (uint32_t)out->sizes[0], \"cpu count %u\", oc_cpu_count());\n"
    "    o[row * 5 + 0] = row;\n"
    "    for (int a = 0; a < 3; a++) o[row * 5 + 1 + a] = oc_program_id(a);\n"
    "    o[row * 5 + 4] += 1;\n"
    "    volatile double x = 0; /* uneven cost: later instances work longer */\n"
    "    for (int64_t i = 0; i < row * 2000; i++) x += (double)i;\n"
    "}\n"
    "oc_tensor *marks(const oc_tensor *n) { (void)n; mark(); return oc_dst_tensor(); }\n"
    "oc_tensor *rows(const oc_tensor *x) { (void)x; mark(); return oc_dst_tensor(); }\n"
    "oc_tensor *multi(const oc_tensor *x) {\n"
    "    (void)x;\n"
    "    int64_t *o = oc_dst_tensor()->data;\n"
    "    o[oc_cpu_id()] = oc_program_id(0) == (int64_t)oc_cpu_id() && oc_num_programs(0) == oc_cpu_count();\n"
    "    return oc_dst_tensor();\n"
    "}\n"
    "oc_tensor *barrier(const oc_tensor *x) { (void)x; oc_barrier(); return oc_dst_tensor(); }\n"
    "oc_tensor *allsum(const oc_tensor *x) { (void)x; oc_all_sum(1.0); return oc_dst_tensor(); }\n"
    "oc_tensor *bad_axis(const oc_tensor *x) { (void)x; oc_program_id(3); return oc_dst_tensor(); }\n"
    "oc_tensor *fails(const oc_tensor *x) {\n"
    "    (void)x;\n"
    "    OC_CHECK(oc_program_id(0) != 2, \"instance 2 fails\");\n"
    "    return oc_dst_tensor();\n"
    "}\n";

/* marks(n): the output has one row per instance of the grid the caller
 * wants, given as the sizes of `n` (its product). rows(x): one instance per
 * row of x, set by the shape function. */
static const char *shape_src =
    "#include <opcore/library.h>\n"
    "#include <opcore/tensor_ops.h>\n"
    "static oc_tensor *per_instance(const oc_tensor *n) {\n"
    "    return oc_empty(OC_INT64, 2, (int64_t[]){oc_numel(n), 5});\n"
    "}\n"
    "static oc_tensor *per_row(const oc_tensor *x) {\n"
    "    OC_SET_GRID(x->sizes[0]);\n"
    "    return oc_empty(OC_INT64, 2, (int64_t[]){x->sizes[0], 5});\n"
    "}\n"
    "static oc_tensor *bad_grid(const oc_tensor *x) {\n"
    "    OC_SET_GRID(2, 0);\n"
    "    return oc_empty_like(x);\n"
    "}\n"
    "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
    "OC_LIBRARY(grid_ops, m) {\n"
    "    oc_def(m, \"marks(Tensor n) -> Tensor\", per_instance, \"marks\", .grid = {2, 2});\n"
    "    oc_def(m, \"rows(Tensor x) -> Tensor\", per_row, \"rows\");\n"
    "    oc_def(m, \"multi(Tensor x) -> Tensor\", same, \"multi\", .multicore = true);\n"
    "    oc_def(m, \"barrier(Tensor x) -> Tensor\", same, \"barrier\", .grid = {2});\n"
    "    oc_def(m, \"allsum(Tensor x) -> Tensor\", same, \"allsum\", .grid = {1});\n"
    "    oc_def(m, \"bad_axis(Tensor x) -> Tensor\", same, \"bad_axis\", .grid = {2});\n"
    "    oc_def(m, \"bad_grid(Tensor x) -> Tensor\", bad_grid, \"bad_axis\");\n"
    "    oc_def(m, \"fails(Tensor x) -> Tensor\", same, \"fails\", .grid = {64}, .multicore = true);\n"
    "}\n";

static oc_library *lib;

static int setup(void **state)
{
    (void)state;
    oc_engine_shutdown();
    assert_int_equal(oc_engine_configure(2, 0), OC_OK); /* uneven grids on 2 cores */
    test_use_every_core(); /* small test tensors still run on every core */
    lib = test_build_and_load("grid_ops", compute_src, shape_src, (test_lib_options){0});
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    oc_library_unload(lib);
    oc_engine_shutdown();
    return 0;
}

/* Call grid_ops::marks on `grid` (NULL: its default [2, 2]) and check every
 * instance of the row-major grid ran exactly once with its own program ids. */
static void check_marks(const oc_grid *grid, int ndim, const int64_t *dims)
{
    const oc_op *op = oc_op_find("grid_ops::marks");
    assert_non_null(op);
    int64_t total = 1;
    for (int d = 0; d < ndim; d++) total *= dims[d];
    oc_tensor n, out;
    int64_t *buf = calloc((size_t)total * 5, sizeof *buf);
    int8_t *sized = calloc((size_t)total, 1); /* only its size counts; its own memory (an input
                                                 sharing the output's is refused) */
    oc_tensor_init(&n, sized, OC_INT8, 1, (int64_t[]){total});
    oc_tensor_init(&out, buf, OC_INT64, 2, (int64_t[]){total, 5});
    oc_value args[] = {oc_value_tensor(&n)};
    if (oc_op_call_grid(op, args, 1, &out, grid) != OC_OK) fail_msg("%s", oc_errmsg());
    for (int64_t id = 0; id < total; id++) {
        int64_t want[3] = {0, 0, 0}, rest = id;
        for (int d = ndim - 1; d >= 0; d--) {
            want[d] = rest % dims[d];
            rest /= dims[d];
        }
        assert_int_equal(buf[id * 5 + 0], id);
        for (int a = 0; a < 3; a++) assert_int_equal(buf[id * 5 + 1 + a], want[a]);
        assert_int_equal(buf[id * 5 + 4], 1); /* exactly once */
    }
    free(sized);
    free(buf);
}

static void test_default_grid_from_oc_def(void **state)
{
    (void)state;
    check_marks(NULL, 2, (int64_t[]){2, 2});
}

static void test_call_grid_overrides(void **state)
{
    (void)state;
    /* uneven on 2 cores, a one-instance grid, and all three axes */
    check_marks(&(oc_grid){1, {7}}, 1, (int64_t[]){7});
    check_marks(&(oc_grid){1, {3}}, 1, (int64_t[]){3});
    check_marks(&(oc_grid){2, {1, 1}}, 2, (int64_t[]){1, 1});
    check_marks(&(oc_grid){1, {1}}, 1, (int64_t[]){1});
    check_marks(&(oc_grid){3, {2, 3, 4}}, 3, (int64_t[]){2, 3, 4});
    check_marks(&(oc_grid){2, {5, 40}}, 2, (int64_t[]){5, 40});
}

static void test_grid_from_shape_function(void **state)
{
    (void)state;
    const oc_op *op = oc_op_find("grid_ops::rows");
    int64_t x[9] = {0}, o[9 * 5] = {0};
    oc_tensor xt, out;
    oc_tensor_init(&xt, x, OC_INT64, 2, (int64_t[]){9, 1});
    oc_tensor_init(&out, o, OC_INT64, 2, (int64_t[]){9, 5});
    oc_value args[] = {oc_value_tensor(&xt)};
    if (oc_op_call(op, args, 1, &out) != OC_OK) fail_msg("%s", oc_errmsg());
    for (int64_t r = 0; r < 9; r++) {
        assert_int_equal(o[r * 5 + 1], r);
        assert_int_equal(o[r * 5 + 4], 1);
    }
}

/* Outside a grid, a multicore op is the 1-d grid of its cores. */
static void test_multicore_op_is_a_grid_of_cores(void **state)
{
    (void)state;
    const oc_op *op = oc_op_find("grid_ops::multi");
    int64_t x[2] = {0}, o[2] = {0};
    oc_tensor xt, out;
    oc_tensor_init(&xt, x, OC_INT64, 1, (int64_t[]){2});
    oc_tensor_init(&out, o, OC_INT64, 1, (int64_t[]){2});
    oc_value args[] = {oc_value_tensor(&xt)};
    assert_int_equal(oc_op_call(op, args, 1, &out), OC_OK);
    assert_int_equal(o[0], 1);
    assert_int_equal(o[1], 1);
}

static void expect_error(const char *qualname, const oc_grid *grid, oc_status status, const char *a,
                         const char *b)
{
    const oc_op *op = oc_op_find(qualname);
    assert_non_null(op);
    int64_t x[4] = {0}, o[4] = {0};
    oc_tensor xt, out;
    oc_tensor_init(&xt, x, OC_INT64, 1, (int64_t[]){4});
    oc_tensor_init(&out, o, OC_INT64, 1, (int64_t[]){4});
    oc_value args[] = {oc_value_tensor(&xt)};
    assert_int_equal(oc_op_call_grid(op, args, 1, &out, grid), status);
    test_assert_contains(oc_errmsg(), a);
    test_assert_contains(oc_errmsg(), b);
}

static void test_collectives_refused_in_a_grid(void **state)
{
    (void)state;
    expect_error("grid_ops::barrier", NULL, OC_EKERNEL, "grid_ops::barrier",
                 "oc_barrier is not allowed in a grid launch");
    expect_error("grid_ops::allsum", NULL, OC_EKERNEL, "grid_ops::allsum",
                 "oc_all_sum is not allowed in a grid launch");
    /* a multicore op given a grid per call runs one instance per program */
    expect_error("grid_ops::multi", &(oc_grid){1, {3}}, OC_OK, "", "");
}

static void test_bad_grids_are_errors(void **state)
{
    (void)state;
    expect_error("grid_ops::multi", &(oc_grid){0, {0}}, OC_EINVAL, "op 'grid_ops::multi'", "1 to 3 axes, got 0");
    expect_error("grid_ops::multi", &(oc_grid){4, {1, 1, 1}}, OC_EINVAL, "grid_ops::multi", "got 4");
    expect_error("grid_ops::multi", &(oc_grid){2, {3, 0}}, OC_EINVAL, "axis 1 of the launch grid is 0",
                 "at least 1 program");
    expect_error("grid_ops::multi", &(oc_grid){2, {1 << 20, 1 << 20}}, OC_EINVAL, "grid_ops::multi",
                 "more than 2147483647 program instances");
    expect_error("grid_ops::bad_grid", NULL, OC_ESHAPE, "op 'grid_ops::bad_grid'",
                 "oc_set_grid: axis 1 of the grid is 0");
    expect_error("grid_ops::bad_axis", NULL, OC_EKERNEL, "grid_ops::bad_axis",
                 "oc_program_id(3): the axis must be 0, 1 or 2");
}

/* A bad .grid in oc_def is refused when the library loads, naming the
 * library, the op and the axis, as a bad grid from a shape function or
 * the caller is refused per call. */
static void test_bad_grid_option_refused_at_load(void **state)
{
    (void)state;
    static const char *grids[][2] = {
        {"{-2, 2}", "axis 0 is -2: every axis needs at least 1 program"},
        {"{2, -1}", "axis 1 is -1: every axis needs at least 1 program"},
        {"{2, 0, 3}", "axis 2 is 3: an axis after a 0"},
        {"{1 << 20, 1 << 20}", "more than 2^31 - 1 program instances"},
    };
    const char *compute = "#include <opcore/kernel.h>\n"
                          "oc_tensor *k(const oc_tensor *x) { (void)x; return oc_dst_tensor(); }\n";
    for (int i = 0; i < 4; i++) {
        char shape[512], name[32];
        snprintf(name, sizeof name, "badgrid%d", i);
        snprintf(shape, sizeof shape,
                 "#include <opcore/library.h>\n"
                 "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
                 "OC_LIBRARY(%s, m) { oc_def(m, \"g(Tensor x) -> Tensor\", same, \"k\", .grid = %s); }\n",
                 name, grids[i][0]);
        oc_status st;
        const char *path = test_build(name, compute, shape, (test_lib_options){0}, &st);
        if (path) { /* the build ran the block too: else it refused it already */
            oc_library *bad = NULL;
            assert_int_equal(oc_library_load(path, &bad), OC_EINVAL);
            assert_null(bad);
        }
        char op[64];
        snprintf(op, sizeof op, "library '%s', op 'g': .grid = {", name);
        test_assert_contains(oc_errmsg(), op);
        test_assert_contains(oc_errmsg(), grids[i][1]);
    }
    check_marks(NULL, 2, (int64_t[]){2, 2}); /* the loaded library still works */
}

/* A failing instance fails the call; the rest of the grid is skipped. */
static void test_failing_instance_fails_the_launch(void **state)
{
    (void)state;
    expect_error("grid_ops::fails", NULL, OC_EKERNEL, "kernel 'fails' (program (2) of grid [64]) on core ",
                 "instance 2 fails");
    /* the engine keeps serving */
    check_marks(&(oc_grid){1, {5}}, 1, (int64_t[]){5});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_grid_from_oc_def),
        cmocka_unit_test(test_call_grid_overrides),
        cmocka_unit_test(test_grid_from_shape_function),
        cmocka_unit_test(test_multicore_op_is_a_grid_of_cores),
        cmocka_unit_test(test_collectives_refused_in_a_grid),
        cmocka_unit_test(test_bad_grids_are_errors),
        cmocka_unit_test(test_bad_grid_option_refused_at_load),
        cmocka_unit_test(test_failing_instance_fails_the_launch),
    };
    return oc_test_run("grid", tests, setup, teardown);
}
