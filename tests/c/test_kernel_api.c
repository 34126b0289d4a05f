/* DLPack views, tensor basics, the dtype and status vocabularies, checked
 * accessors in debug builds, shape functions written with the tensor
 * library, and what an op call's failure names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/dim.h"
#include "opcore/dlpack.h"
#include "opcore/engine.h"
#include "opcore/host.h"
#include "support/oplib.h"

static void assert_msg(const char *needle)
{
    if (!strstr(oc_errmsg(), needle)) fail_msg("expected \"%s\" in: %s", needle, oc_errmsg());
}

/* A [2, 3] float32 DLPack view of `data` from its element 1 (byte_offset
 * 4), column-major (strides 1, 2). */
static float dl_data[6] = {1, 2, 3, 4, 5, 6};
static int64_t dl_shape[2] = {2, 3}, dl_strides[2] = {1, 2};

static DLTensor dl_view(void)
{
    return (DLTensor){.data = dl_data, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1},
                      .shape = dl_shape, .strides = dl_strides, .byte_offset = 4};
}

static void test_dlpack_strided_view(void **state)
{
    (void)state;
    DLTensor dl = dl_view();
    oc_tensor t;
    assert_int_equal(oc_tensor_from_dlpack(&dl, &t), OC_OK);
    assert_ptr_equal(t.data, &dl_data[1]);
    assert_int_equal(t.dtype, OC_FLOAT32);
    assert_int_equal(t.strides[1], 2);
    assert_false(oc_is_contiguous(&t));
    assert_true(*(float *)oc_flat_ptr(&t, 1) == 4.0f); /* element (0, 1) */
}

static void test_dlpack_no_strides_round_trip(void **state)
{
    (void)state;
    DLTensor dl = dl_view();
    oc_tensor t;
    dl.strides = NULL;
    assert_int_equal(oc_tensor_from_dlpack(&dl, &t), OC_OK);
    assert_true(oc_is_contiguous(&t));
    DLTensor back;
    int64_t bs[2], bst[2];
    assert_int_equal(oc_tensor_to_dlpack(&t, &back, bs, bst), OC_OK);
    assert_int_equal(back.dtype.code, kDLFloat);
    assert_int_equal(bst[0], 3);
}

static void test_dlpack_not_cpu(void **state)
{
    (void)state;
    DLTensor dl = dl_view();
    oc_tensor t;
    dl.device.device_type = kDLCUDA;
    assert_int_equal(oc_tensor_from_dlpack(&dl, &t), OC_EINVAL);
    assert_msg("not the CPU");
}

static void test_dlpack_unknown_dtype(void **state)
{
    (void)state;
    DLTensor dl = dl_view();
    oc_tensor t;
    dl.dtype = (DLDataType){kDLFloat, 8, 1};
    assert_int_equal(oc_tensor_from_dlpack(&dl, &t), OC_EINVAL);
}

static void test_tensor_zero_size_meta(void **state)
{
    (void)state;
    oc_tensor t;
    char buf[64];
    assert_int_equal(oc_tensor_init(&t, NULL, OC_BFLOAT16, 3, (int64_t[]){2, 0, 5}), OC_OK);
    assert_true(oc_is_meta(&t));
    assert_int_equal(oc_numel(&t), 0);
    assert_string_equal(oc_shape_str(&t, buf, sizeof buf), "[2, 0, 5]");
}

static void test_tensor_init_too_many_dims(void **state)
{
    (void)state;
    oc_tensor t;
    assert_int_equal(oc_tensor_init(&t, NULL, OC_FLOAT32, 17, (int64_t[17]){0}), OC_EINVAL);
}

static void test_tensor_init_negative_size(void **state)
{
    (void)state;
    oc_tensor t;
    assert_int_equal(oc_tensor_init(&t, NULL, OC_FLOAT32, 1, (int64_t[]){-1}), OC_EINVAL);
}

static void test_tensor_init_bad_dtype(void **state)
{
    (void)state;
    oc_tensor t;
    assert_int_equal(oc_tensor_init(&t, NULL, (oc_dtype)42, 1, (int64_t[]){1}), OC_EINVAL);
}

static void test_dtype_alias_and_unknown_name(void **state)
{
    (void)state;
    oc_dtype d;
    assert_true(oc_dtype_from_name("half", &d) && d == OC_FLOAT16);
    assert_false(oc_dtype_from_name("complex32", &d));
}

static void test_half_and_bfloat16_conversions(void **state)
{
    (void)state;
    assert_true(oc_bf16_to_f32(oc_f32_to_bf16(1.5f)) == 1.5f);
    assert_true(oc_half_to_f32(oc_f32_to_half(-2.25f)) == -2.25f);
}

/* Each dtype from the one list: its name parses back, and DLPack carries it there and back. */
static void test_dtype_vocabulary(void **state)
{
    (void)state;
    static const struct { oc_dtype d; const char *name; size_t size; uint8_t dl_code; bool floating; } want[] = {
        {OC_FLOAT32, "float32", 4, kDLFloat, true}, {OC_FLOAT64, "float64", 8, kDLFloat, true},
        {OC_FLOAT16, "float16", 2, kDLFloat, true}, {OC_BFLOAT16, "bfloat16", 2, kDLBfloat, true},
        {OC_INT8, "int8", 1, kDLInt, false},        {OC_INT16, "int16", 2, kDLInt, false},
        {OC_INT32, "int32", 4, kDLInt, false},      {OC_INT64, "int64", 8, kDLInt, false},
        {OC_UINT8, "uint8", 1, kDLUInt, false},     {OC_BOOL, "bool", 1, 6 /* kDLBool */, false},
        {OC_COMPLEX64, "complex64", 8, kDLComplex, false}, {OC_COMPLEX128, "complex128", 16, kDLComplex, false},
    };
    assert_int_equal(OC_NUM_DTYPES, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        oc_dtype d = want[i].d, back;
        assert_int_equal(d, (oc_dtype)i);
        assert_string_equal(oc_dtype_name(d), want[i].name);
        assert_int_equal(oc_dtype_size(d), want[i].size);
        assert_int_equal(oc_dtype_is_floating(d), want[i].floating);
        assert_true(oc_dtype_from_name(want[i].name, &back) && back == d);
        char cell[16] = {0};
        oc_tensor t;
        assert_int_equal(oc_tensor_init(&t, cell, d, 0, NULL), OC_OK);
        DLTensor dl;
        assert_int_equal(oc_tensor_to_dlpack(&t, &dl, NULL, NULL), OC_OK);
        assert_int_equal(dl.dtype.code, want[i].dl_code);
        assert_int_equal(dl.dtype.bits, 8 * want[i].size);
        oc_tensor t2;
        assert_int_equal(oc_tensor_from_dlpack(&dl, &t2), OC_OK);
        assert_int_equal(t2.dtype, d);
    }
}

static void test_dtype_past_the_list(void **state)
{
    (void)state;
    assert_string_equal(oc_dtype_name(OC_NUM_DTYPES), "invalid");
    assert_false(oc_dtype_is_floating(OC_NUM_DTYPES));
}

/* Each status from the one list has its name and its own message. */
static void test_status_names(void **state)
{
    (void)state;
    assert_string_equal(oc_status_name(OC_OK), "OC_OK");
    assert_string_equal(oc_status_name(OC_EMETA), "OC_EMETA");
    assert_string_equal(oc_status_name(OC_ESTACK), "OC_ESTACK");
}

static void test_status_name_unknown(void **state)
{
    (void)state;
    assert_string_equal(oc_status_name((oc_status)15), "OC_UNKNOWN");
}

static void test_status_message(void **state)
{
    (void)state;
    assert_string_equal(oc_status_message(OC_ENOMEM), "out of memory (host memory or TCM)");
}

static void test_status_message_unknown(void **state)
{
    (void)state;
    assert_string_equal(oc_status_message((oc_status)-1), "an unknown status code");
}

static void test_status_each_named_with_own_message(void **state)
{
    (void)state;
    for (int a = OC_OK; a <= OC_EMETA; a++) {
        assert_true(strncmp(oc_status_name((oc_status)a), "OC_", 3) == 0);
        assert_true(oc_status_message((oc_status)a)[0] != '\0');
        for (int b = OC_OK; b < a; b++)
            assert_string_not_equal(oc_status_message((oc_status)a), oc_status_message((oc_status)b));
    }
}

static const char *acc_shape =
    "#include <opcore/library.h>\n"
    /* shape functions can use the tensor library: results are meta */
    "static oc_tensor *s(const oc_tensor *a, const oc_tensor *b) { return oc_mul(oc_add(a, b, 1.0), a); }\n"
    "static oc_tensor *s1(const oc_tensor *a, int64_t i) { (void)i; return oc_empty_like(a); }\n"
    "OC_LIBRARY(acc, m) {\n"
    "  oc_def(m, \"addmul(Tensor a, Tensor b) -> Tensor\", s, NULL);\n"
    "  oc_def(m, \"poke(Tensor a, int i) -> Tensor\", s1, NULL);\n"
    "}\n";
static const char *acc_compute =
    "#include <opcore/kernel.h>\n"
    "oc_tensor *addmul(const oc_tensor *a, const oc_tensor *b) { return oc_mul(oc_add(a, b, 1.0), a); }\n"
    "oc_tensor *poke(const oc_tensor *a, int64_t i) {\n"
    "  oc_cacc in = oc_accessor(a, OC_FLOAT32, 2); oc_tensor *o = oc_dst_tensor(); oc_acc out = oc_accessor(o, OC_FLOAT32, 2);\n"
    "  OC_AT(out, float, 0, 0) = OC_AT(in, float, 0, i);\n"
    "  return o; }\n";

/* The "acc" library, built for debug (checked accessors); a = [[1, 2, 3],
 * [4, 5, 6]], b = ones [2, 3], c = ones [3, 2], all float32. */
static float av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {1, 1, 1, 1, 1, 1};
static oc_tensor a, b, c;

static int acc_setup(void **state)
{
    *state = test_build_and_load("acc", acc_compute, acc_shape, (test_lib_options){.debug = true});
    oc_tensor_init(&a, av, OC_FLOAT32, 2, (int64_t[]){2, 3});
    oc_tensor_init(&b, bv, OC_FLOAT32, 2, (int64_t[]){2, 3});
    oc_tensor_init(&c, bv, OC_FLOAT32, 2, (int64_t[]){3, 2});
    return 0;
}

static int acc_teardown(void **state)
{
    oc_library_unload(*state);
    return 0;
}

static void test_shape_fn_uses_tensor_library(void **state)
{
    (void)state;
    oc_tensor *y;
    oc_value args[] = {oc_value_tensor(&a), oc_value_tensor(&b)};
    assert_int_equal(oc_op_invoke(oc_op_find("acc::addmul"), args, 2, &y), OC_OK);
    for (int i = 0; i < 6; i++) assert_true(((float *)y->data)[i] == (av[i] + 1) * av[i]);
    oc_tensor_free(y);
}

static void test_shape_fn_tensor_library_error(void **state)
{
    (void)state;
    oc_tensor *y;
    oc_value args[] = {oc_value_tensor(&a), oc_value_tensor(&c)};
    assert_int_equal(oc_op_invoke(oc_op_find("acc::addmul"), args, 2, &y), OC_EINVAL);
    assert_msg("shape function");
    assert_msg("[3, 2]");
}

static void test_accessor_reads(void **state)
{
    (void)state;
    oc_tensor *y;
    oc_value p[] = {oc_value_tensor(&a), oc_value_int(2)};
    assert_int_equal(oc_op_invoke(oc_op_find("acc::poke"), p, 2, &y), OC_OK);
    assert_true(((float *)y->data)[0] == 3.0f);
    oc_tensor_free(y);
}

/* out of bounds: caught in a debug build */
static void test_accessor_out_of_bounds(void **state)
{
    (void)state;
    oc_tensor *y;
    oc_value p[] = {oc_value_tensor(&a), oc_value_int(3)};
    assert_int_equal(oc_op_invoke(oc_op_find("acc::poke"), p, 2, &y), OC_EKERNEL);
    assert_msg("index 3 is out of bounds for dim 1 of size 3");
}

static void test_accessor_wrong_dtype(void **state)
{
    (void)state;
    oc_tensor *y, i32;
    int32_t iv[6];
    oc_tensor_init(&i32, iv, OC_INT32, 2, (int64_t[]){2, 3});
    oc_value p[] = {oc_value_tensor(&i32), oc_value_int(0)};
    assert_int_equal(oc_op_invoke(oc_op_find("acc::poke"), p, 2, &y), OC_EKERNEL);
    assert_msg("tensor is int32, accessor asks for float32");
}

static void test_op_kernel_prototype(void **state)
{
    (void)state;
    char proto[256];
    assert_string_equal(oc_op_kernel_prototype(oc_op_find("acc::addmul"), proto, sizeof proto),
                        "oc_tensor *addmul(const oc_tensor *a, const oc_tensor *b)");
}

/* A failed op call names its op through oc_errop(), and its message starts
 * with it; a failure outside any op call names none. */
static void test_shape_fn_error_names_the_op(void **state)
{
    (void)state;
    oc_tensor *y;
    oc_value args[] = {oc_value_tensor(&a), oc_value_tensor(&c)};
    oc_clear_error();
    assert_null(oc_errop());
    /* the shape function refuses [3, 2] */
    assert_int_equal(oc_op_invoke(oc_op_find("acc::addmul"), args, 2, &y), OC_EINVAL);
    assert_non_null(oc_errop());
    assert_string_equal(oc_errop(), "acc::addmul");
    assert_true(strncmp(oc_errmsg(), "op 'acc::addmul'", 16) == 0);
}

static void test_arity_error_names_the_op(void **state)
{
    (void)state;
    oc_value args[] = {oc_value_tensor(&a), oc_value_tensor(&c)};
    /* arity, before any shape function */
    assert_int_equal(oc_op_infer(oc_op_find("acc::addmul"), args, 1, NULL), OC_EINVAL);
    assert_string_equal(oc_errop(), "acc::addmul");
    assert_true(strncmp(oc_errmsg(), "op 'acc::addmul'", 16) == 0);
}

static void test_entry_point_error_names_the_op(void **state)
{
    (void)state;
    oc_value args[] = {oc_value_tensor(&a), oc_value_tensor(&c)};
    /* no `outs`: named by the entry point */
    assert_int_equal(oc_op_call(oc_op_find("acc::addmul"), args, 2, NULL), OC_EINVAL);
    assert_true(strncmp(oc_errmsg(), "op 'acc::addmul': oc_op_call:", 29) == 0);
}

static void test_error_outside_op_names_none(void **state)
{
    (void)state;
    oc_value args[] = {oc_value_tensor(&a), oc_value_tensor(&c)};
    /* an op's failure first */
    assert_int_equal(oc_op_call(oc_op_find("acc::addmul"), args, 2, NULL), OC_EINVAL);
    oc_tensor t;
    assert_int_equal(oc_tensor_init(&t, NULL, OC_FLOAT32, 1, (int64_t[]){-1}), OC_EINVAL);
    assert_null(oc_errop());
}

/* oc_dim_*: exact where int64 holds the result, an error where it does not
 * (issue 24: a wrapped product looked like a valid size). */
static void test_dim_helpers_are_checked(void **state)
{
    (void)state;
    assert_int_equal(oc_dim_ceil_div(7, 2), 4);
    assert_int_equal(oc_dim_ceil_div(-7, 2), -3);
    assert_int_equal(oc_dim_ceil_div(INT64_MIN, 2), INT64_MIN / 2);
    assert_int_equal(oc_dim_mod(-7, 3), 2);
    assert_int_equal(oc_dim_mod(7, 3), 1);
    assert_int_equal(oc_dim_mod(INT64_MIN, 3), 1); /* -2**63 = 3 * -3074457345618258603 + 1 */
    for (int64_t n = -2; n < 10; n++) assert_int_equal(oc_dim_if_gt(n, 4, 40, 3), n > 4 ? 40 : 3);
    assert_int_equal(oc_dim_mul(INT64_C(1) << 31, INT64_C(1) << 31), INT64_C(1) << 62);
    oc_clear_error();
    assert_int_equal(oc_dim_mul(INT64_C(1) << 62, 4), 0);
    assert_int_equal(oc_errcode(), OC_ESHAPE);
    assert_msg("oc_dim_mul: 4611686018427387904 * 4 overflows int64");
    assert_int_equal(oc_dim_add(INT64_MAX, 1), 0);
    assert_msg("oc_dim_add: 9223372036854775807 + 1 overflows int64");
    assert_int_equal(oc_dim_sub(INT64_MIN, 1), 0);
    assert_msg("oc_dim_sub:");
}

/* A shape whose element count (or byte count) overflows int64 is refused:
 * XLA aborts the process on one. */
static void test_size_overflow_refused(void **state)
{
    (void)state;
    oc_tensor t;
    int64_t big = INT64_C(1) << 32;
    assert_int_equal(oc_tensor_init(&t, NULL, OC_FLOAT32, 2, (int64_t[]){big, big}), OC_EINVAL);
    assert_msg("sizes [4294967296, 4294967296] of float32 hold more elements or bytes than int64 can count");
    /* a meta tensor (no data) needs only its element count to fit; one with
     * data its byte count too (init never touches the data) */
    double one = 0;
    assert_int_equal(oc_tensor_init(&t, NULL, OC_FLOAT64, 1, (int64_t[]){INT64_C(1) << 61}), OC_OK);
    assert_int_equal(oc_tensor_init(&t, &one, OC_FLOAT64, 1, (int64_t[]){INT64_C(1) << 61}), OC_EINVAL);
    assert_int_equal(oc_tensor_init(&t, NULL, OC_FLOAT32, 2, (int64_t[]){INT64_C(1) << 30, 1 << 30}), OC_OK);
}

#define ACC(fn) cmocka_unit_test_setup_teardown(fn, acc_setup, acc_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dlpack_strided_view),
        cmocka_unit_test(test_dlpack_no_strides_round_trip),
        cmocka_unit_test(test_dlpack_not_cpu),
        cmocka_unit_test(test_dlpack_unknown_dtype),
        cmocka_unit_test(test_tensor_zero_size_meta),
        cmocka_unit_test(test_tensor_init_too_many_dims),
        cmocka_unit_test(test_tensor_init_negative_size),
        cmocka_unit_test(test_tensor_init_bad_dtype),
        cmocka_unit_test(test_dtype_alias_and_unknown_name),
        cmocka_unit_test(test_half_and_bfloat16_conversions),
        cmocka_unit_test(test_dtype_vocabulary),
        cmocka_unit_test(test_dtype_past_the_list),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_status_name_unknown),
        cmocka_unit_test(test_status_message),
        cmocka_unit_test(test_status_message_unknown),
        cmocka_unit_test(test_status_each_named_with_own_message),
        ACC(test_shape_fn_uses_tensor_library),
        ACC(test_shape_fn_tensor_library_error),
        ACC(test_accessor_reads),
        ACC(test_accessor_out_of_bounds),
        ACC(test_accessor_wrong_dtype),
        ACC(test_op_kernel_prototype),
        ACC(test_shape_fn_error_names_the_op),
        ACC(test_arity_error_names_the_op),
        ACC(test_entry_point_error_names_the_op),
        ACC(test_error_outside_op_names_none),
        cmocka_unit_test(test_dim_helpers_are_checked),
        cmocka_unit_test(test_size_overflow_refused),
    };
    atexit(oc_engine_shutdown); /* in each test's process */
    return oc_test_run("kernel_api", tests, NULL, NULL);
}
