/* The tile layer's refusals (opcore/tile.h: "a bad argument fails the
 * kernel with a message naming the function"): a tile of a dtype tiles do
 * not hold (a complex64 tensor viewed as a tile), and tiles that overlap in
 * part (dst sharing some elements of an operand without being the very
 * same tile). Each case is a real kernel; each test runs in its own process
 * (support/runner.h); after each refusal the next call gives the right
 * answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/engine.h"
#include "opcore/host.h"
#include "support/oplib.h"

/* case(x, which): x is 4 x 4 float32 (or complex64 for case 0); the result
 * is 4 x 4 float32. */
static const char compute[] =
    "#include <opcore/kernel.h>\n"
    "#include <opcore/tile.h>\n"
    "oc_tensor *tcase(const oc_tensor *x, int64_t which) {\n"
    "    oc_tensor *out = oc_dst_tensor();\n"
    "    oc_tile o = oc_tile_of_tensor(out, 0);\n"
    "    oc_tile t = oc_tile_alloc(4, 8, OC_FLOAT32);\n"
    "    oc_tile_fill(&t, 1.0f);\n"
    "    oc_tile a = oc_tile_view(&t, 0, 0, 4, 4), b = oc_tile_view(&t, 0, 1, 4, 4);\n"
    "    oc_tile c = oc_tile_view(&t, 0, 4, 4, 4);\n"
    "    switch (which) {\n"
    "    case 0: { oc_tile v = oc_tile_of_tensor(x, 0); oc_tile_copy(&o, &v); break; }\n"
    "    case 1: oc_tile_binary(&b, &a, &c, OC_TILE_ADD); break;      /* dst one column on */\n"
    "    case 2: oc_tile_copy(&b, &a); break;\n"
    "    case 3: oc_tile_unary(&a, &b, OC_TILE_EXP, 1.0f, 0.0f); break;\n"
    "    case 4: { oc_tile r = oc_tile_row(&a, 1); oc_tile_binary(&a, &a, &r, OC_TILE_MUL); break; }\n"
    "    case 5: oc_tile_transpose(&a, &a); break;\n"
    "    /* allowed: the same tile in place, and tiles that interleave without sharing */\n"
    "    case 6: oc_tile_binary(&a, &a, &c, OC_TILE_ADD); break;     /* a = 2 */\n"
    "    case 7: { oc_tile e = oc_tile_col(&a, 0), f = oc_tile_col(&a, 1);\n"
    "              oc_tile_unary(&f, &e, OC_TILE_EXP, 0.0f, 0.0f); break; } /* col 1 = 1 */\n"
    "    default: oc_tile_load(&a, x, 0, 0, 0, 0.0f); break;            /* a = x */\n"
    "    }\n"
    "    oc_tile_copy(&o, &a);\n"
    "    return out;\n"
    "}\n";

static const char shape[] =
    "#include <opcore/library.h>\n"
    "static oc_tensor *sq(const oc_tensor *x, int64_t w) { (void)x; (void)w;\n"
    "    return oc_empty(OC_FLOAT32, 2, (int64_t[]){4, 4}); }\n"
    "OC_LIBRARY(tilechk, m) { oc_def(m, \"tcase(Tensor x, int which) -> Tensor\", sq, \"tcase\"); }\n";

static oc_library *lib;

static int setup(void **state)
{
    (void)state;
    lib = test_build_and_load("tilechk", compute, shape, (test_lib_options){0});
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_unload_and_shutdown(&lib);
    return 0;
}

static float xs[32];

static oc_status run(int which, oc_dtype dtype, float *out)
{
    oc_tensor x, o;
    oc_tensor_init(&x, xs, dtype, 2, (int64_t[]){4, 4});
    oc_tensor_init(&o, out, OC_FLOAT32, 2, (int64_t[]){4, 4});
    oc_value args[] = {oc_value_tensor(&x), oc_value_int(which)};
    return oc_op_call(test_op("tilechk::tcase"), args, 2, &o);
}

/* The next call after a refusal: the tile of x, copied out. */
static void next_call_right(void)
{
    float out[16];
    for (int i = 0; i < 16; i++) xs[i] = (float)i;
    assert_int_equal(run(99, OC_FLOAT32, out), OC_OK);
    for (int i = 0; i < 16; i++) assert_true(out[i] == (float)i);
}

static void expect_refused(int which, oc_dtype dtype, const char *fn, const char *why)
{
    float out[16];
    memset(out, 0, sizeof out);
    assert_int_equal(run(which, dtype, out), OC_EKERNEL);
    test_assert_contains(oc_errmsg(), "tilechk::tcase");
    test_assert_contains(oc_errmsg(), fn);
    test_assert_contains(oc_errmsg(), why);
    next_call_right();
}

static void test_complex_tensor_is_not_a_tile(void **state)
{
    (void)state;
    expect_refused(0, OC_COMPLEX64, "oc_tile_of_tensor: a complex64 tensor", "tiles hold float32");
}

static void test_partial_overlap_refused(void **state)
{
    (void)state;
    expect_refused(1, OC_FLOAT32, "oc_tile_binary: dst and 'a' overlap in part", "the very same tile");
    expect_refused(2, OC_FLOAT32, "oc_tile_copy: dst and 'src' overlap in part", "the very same tile");
    expect_refused(3, OC_FLOAT32, "oc_tile_unary: dst and 'a' overlap in part", "the very same tile");
    expect_refused(4, OC_FLOAT32, "oc_tile_binary: dst and 'b' overlap in part", "the very same tile");
    expect_refused(5, OC_FLOAT32, "oc_tile_transpose: dst and 'a' share elements", "cannot work in place");
}

static void test_same_tile_and_interleaved_tiles_allowed(void **state)
{
    (void)state;
    float out[16];
    assert_int_equal(run(6, OC_FLOAT32, out), OC_OK);
    for (int i = 0; i < 16; i++) assert_true(out[i] == 2.0f);
    assert_int_equal(run(7, OC_FLOAT32, out), OC_OK);
    for (int i = 0; i < 16; i++) assert_true(out[i] == 1.0f); /* exp(0 * 1) = 1 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_complex_tensor_is_not_a_tile),
        cmocka_unit_test(test_partial_overlap_refused),
        cmocka_unit_test(test_same_tile_and_interleaved_tiles_allowed),
    };
    return oc_test_run("tile_checks", tests, setup, teardown);
}
