/* DLPack views, tensor basics, checked accessors in debug
 * builds, and shape functions written with the tensor library. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/dlpack.h"
#include "opcore/engine.h"
#include "opcore/host.h"
#include "support/oplib.h"

static void assert_msg(const char *needle)
{
    if (!strstr(oc_errmsg(), needle)) fail_msg("expected \"%s\" in: %s", needle, oc_errmsg());
}

static void test_dlpack_views(void **state)
{
    (void)state;
    float data[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3}, strides[2] = {1, 2};
    DLTensor dl = {.data = data, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1},
                   .shape = shape, .strides = strides, .byte_offset = 4};
    oc_tensor t;
    assert_int_equal(oc_tensor_from_dlpack(&dl, &t), OC_OK);
    assert_ptr_equal(t.data, &data[1]);
    assert_int_equal(t.dtype, OC_FLOAT32);
    assert_int_equal(t.strides[1], 2);
    assert_false(oc_is_contiguous(&t));
    assert_true(*(float *)oc_flat_ptr(&t, 1) == 4.0f); /* element (0, 1) */
    dl.strides = NULL;
    assert_int_equal(oc_tensor_from_dlpack(&dl, &t), OC_OK);
    assert_true(oc_is_contiguous(&t));
    DLTensor back;
    int64_t bs[2], bst[2];
    assert_int_equal(oc_tensor_to_dlpack(&t, &back, bs, bst), OC_OK);
    assert_int_equal(back.dtype.code, kDLFloat);
    assert_int_equal(bst[0], 3);
    dl.device.device_type = kDLCUDA;
    assert_int_equal(oc_tensor_from_dlpack(&dl, &t), OC_EINVAL);
    assert_msg("not the CPU");
    dl.device.device_type = kDLCPU;
    dl.dtype = (DLDataType){kDLFloat, 8, 1};
    assert_int_equal(oc_tensor_from_dlpack(&dl, &t), OC_EINVAL);
}

static void test_tensor_basics(void **state)
{
    (void)state;
    oc_tensor t;
    char buf[64];
    assert_int_equal(oc_tensor_init(&t, NULL, OC_BFLOAT16, 3, (int64_t[]){2, 0, 5}), OC_OK);
    assert_true(oc_is_meta(&t));
    assert_int_equal(oc_numel(&t), 0);
    assert_string_equal(oc_shape_str(&t, buf, sizeof buf), "[2, 0, 5]");
    assert_int_equal(oc_tensor_init(&t, NULL, OC_FLOAT32, 17, (int64_t[17]){0}), OC_EINVAL);
    assert_int_equal(oc_tensor_init(&t, NULL, OC_FLOAT32, 1, (int64_t[]){-1}), OC_EINVAL);
    assert_int_equal(oc_tensor_init(&t, NULL, (oc_dtype)42, 1, (int64_t[]){1}), OC_EINVAL);
    oc_dtype d;
    assert_true(oc_dtype_from_name("half", &d) && d == OC_FLOAT16);
    assert_false(oc_dtype_from_name("complex64", &d));
    assert_string_equal(oc_status_name(OC_ESTACK), "OC_ESTACK");
    assert_true(oc_bf16_to_f32(oc_f32_to_bf16(1.5f)) == 1.5f);
    assert_true(oc_half_to_f32(oc_f32_to_half(-2.25f)) == -2.25f);
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

static void test_debug_accessors_and_shape_ops(void **state)
{
    (void)state;
    oc_library *lib = test_build_and_load("acc", acc_compute, acc_shape, (test_lib_options){.debug = true});
    float av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {1, 1, 1, 1, 1, 1};
    oc_tensor a, b, *y;
    oc_tensor_init(&a, av, OC_FLOAT32, 2, (int64_t[]){2, 3});
    oc_tensor_init(&b, bv, OC_FLOAT32, 2, (int64_t[]){2, 3});
    oc_value args[] = {oc_value_tensor(&a), oc_value_tensor(&b)};
    assert_int_equal(oc_op_invoke(oc_op_find("acc::addmul"), args, 2, &y), OC_OK);
    for (int i = 0; i < 6; i++) assert_true(((float *)y->data)[i] == (av[i] + 1) * av[i]);
    oc_tensor_free(y);
    oc_tensor c;
    oc_tensor_init(&c, bv, OC_FLOAT32, 2, (int64_t[]){3, 2});
    args[1] = oc_value_tensor(&c);
    assert_int_equal(oc_op_invoke(oc_op_find("acc::addmul"), args, 2, &y), OC_EINVAL);
    assert_msg("shape function");
    assert_msg("[3, 2]");

    oc_value p[] = {oc_value_tensor(&a), oc_value_int(2)};
    assert_int_equal(oc_op_invoke(oc_op_find("acc::poke"), p, 2, &y), OC_OK);
    assert_true(((float *)y->data)[0] == 3.0f);
    oc_tensor_free(y);
    p[1] = oc_value_int(3); /* out of bounds: caught in a debug build */
    assert_int_equal(oc_op_invoke(oc_op_find("acc::poke"), p, 2, &y), OC_EKERNEL);
    assert_msg("index 3 is out of bounds for dim 1 of size 3");
    oc_tensor i32;
    int32_t iv[6];
    oc_tensor_init(&i32, iv, OC_INT32, 2, (int64_t[]){2, 3});
    p[0] = oc_value_tensor(&i32);
    p[1] = oc_value_int(0);
    assert_int_equal(oc_op_invoke(oc_op_find("acc::poke"), p, 2, &y), OC_EKERNEL);
    assert_msg("tensor is int32, accessor asks for float32");
    oc_library_unload(lib);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dlpack_views),
        cmocka_unit_test(test_tensor_basics),
        cmocka_unit_test(test_debug_accessors_and_shape_ops),
    };
    atexit(oc_engine_shutdown); /* in each test's process */
    return oc_test_run("kernel_api", tests, NULL, NULL);
}
