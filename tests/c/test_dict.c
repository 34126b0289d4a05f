/* Dict arguments (opcore/dict.h): typed lookups and their errors, a
 * caller's dictionary checked, and an op built, loaded and called through
 * the host API with a dictionary read by its shape function and kernel. */
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

static void assert_msg(const char *needle) { test_assert_contains(oc_errmsg(), needle); }

static const int64_t k_ints[] = {3, -4, 5};
static const double k_floats[] = {0.5, -1.25};

static oc_dict_entry k_entries[7];

static oc_dict sample(void)
{
    k_entries[0] = oc_dict_int("n", -7);
    k_entries[1] = oc_dict_float("eps", 1e-5);
    k_entries[2] = oc_dict_bool("flag", true);
    k_entries[3] = oc_dict_str("mode", "mean");
    k_entries[4] = oc_dict_ints("shape", k_ints, 3);
    k_entries[5] = oc_dict_floats("w", k_floats, 2);
    k_entries[6] = oc_dict_ints("none", NULL, 0);
    return oc_dict_of(k_entries, 7);
}

static void test_typed_lookups(void **state)
{
    (void)state;
    oc_dict d = sample();
    int64_t i;
    double f;
    bool b;
    const char *s;
    oc_int_list il;
    oc_float_list fl;
    assert_int_equal(oc_dict_get_int(&d, "n", &i), OC_OK);
    assert_int_equal(i, -7);
    assert_int_equal(oc_dict_get_float(&d, "eps", &f), OC_OK);
    assert_true(f == 1e-5);
    assert_int_equal(oc_dict_get_float(&d, "n", &f), OC_OK); /* an int is a float too */
    assert_true(f == -7.0);
    assert_int_equal(oc_dict_get_bool(&d, "flag", &b), OC_OK);
    assert_true(b);
    assert_int_equal(oc_dict_get_str(&d, "mode", &s), OC_OK);
    assert_string_equal(s, "mean");
    assert_int_equal(oc_dict_get_ints(&d, "shape", &il), OC_OK);
    assert_int_equal(il.count, 3);
    assert_int_equal(il.values[1], -4);
    assert_int_equal(oc_dict_get_floats(&d, "w", &fl), OC_OK);
    assert_int_equal(fl.count, 2);
    assert_true(fl.values[1] == -1.25);
    /* an empty list is both */
    assert_int_equal(oc_dict_get_floats(&d, "none", &fl), OC_OK);
    assert_int_equal(fl.count, 0);
    assert_int_equal(oc_dict_get_ints(&d, "none", &il), OC_OK);
    assert_int_equal(il.count, 0);
    /* size, has, iteration */
    assert_int_equal(oc_dict_size(&d), 7);
    assert_true(oc_dict_has(&d, "mode"));
    assert_false(oc_dict_has(&d, "Mode"));
    assert_string_equal(oc_dict_at(&d, 4)->key, "shape");
    assert_int_equal(oc_dict_at(&d, 4)->kind, OC_DICT_INTS);
    assert_null(oc_dict_at(&d, 7));
    assert_null(oc_dict_at(&d, -1));
    assert_string_equal(oc_dict_kind_name(OC_DICT_FLOATS), "float[]");
}

static void test_lookup_errors_name_key_and_kinds(void **state)
{
    (void)state;
    oc_dict d = sample();
    int64_t i = 42;
    bool b;
    oc_int_list il;
    assert_int_equal(oc_dict_get_int(&d, "eps", &i), OC_EINVAL);
    assert_int_equal(i, 42); /* untouched */
    assert_msg("Dict: key 'eps': expected int, got float");
    assert_int_equal(oc_dict_get_bool(&d, "n", &b), OC_EINVAL);
    assert_msg("key 'n': expected bool, got int");
    assert_int_equal(oc_dict_get_ints(&d, "w", &il), OC_EINVAL);
    assert_msg("key 'w': expected int[], got float[]");
    assert_int_equal(oc_dict_get_int(&d, "missing", &i), OC_EINVAL);
    assert_msg("missing key 'missing' (expected int; the dictionary has keys 'n', 'eps', 'flag'");
    oc_dict empty = oc_dict_of(NULL, 0);
    assert_int_equal(oc_dict_get_int(&empty, "x", &i), OC_EINVAL);
    assert_msg("the dictionary has no keys");
    /* named: what a kernel's copy says */
    d.op = "lib::f";
    d.arg = "attrs";
    assert_int_equal(oc_dict_get_int(&d, "mode", &i), OC_EINVAL);
    assert_msg("op 'lib::f': argument 'attrs' (Dict): key 'mode': expected int, got str");
}

static void test_validate(void **state)
{
    (void)state;
    oc_dict d = sample();
    assert_int_equal(oc_dict_validate(&d), OC_OK);
    oc_dict_entry dup[2] = {oc_dict_int("a", 1), oc_dict_bool("a", false)};
    oc_dict bad = oc_dict_of(dup, 2);
    assert_int_equal(oc_dict_validate(&bad), OC_EINVAL);
    assert_msg("key 'a' appears twice (entries 0 and 1)");
    oc_dict_entry nokey[1] = {oc_dict_int(NULL, 1)};
    bad = oc_dict_of(nokey, 1);
    assert_int_equal(oc_dict_validate(&bad), OC_EINVAL);
    assert_msg("entry 0 has a NULL key");
    oc_dict_entry nolist[1] = {oc_dict_floats("w", NULL, 3)};
    bad = oc_dict_of(nolist, 1);
    assert_int_equal(oc_dict_validate(&bad), OC_EINVAL);
    assert_msg("key 'w' (float[]) has no value");
    oc_dict_entry kind[1] = {oc_dict_int("k", 1)};
    kind[0].kind = (oc_dict_kind)99;
    bad = oc_dict_of(kind, 1);
    assert_int_equal(oc_dict_validate(&bad), OC_EINVAL);
    assert_msg("key 'k' has an unknown kind 99");
}

/* Many keys are checked in one pass (a table, not every pair): 100k
 * distinct keys pass; a key repeated far apart is found, naming both
 * entries. */
static void test_validate_many_keys(void **state)
{
    (void)state;
    enum { N = 100000 };
    static oc_dict_entry e[N];
    static char keys[N][16];
    for (int k = 0; k < N; k++) {
        snprintf(keys[k], sizeof keys[k], "key%d", k);
        e[k] = oc_dict_int(keys[k], k);
    }
    oc_dict d = oc_dict_of(e, N);
    assert_int_equal(oc_dict_validate(&d), OC_OK);
    e[N - 1].key = keys[17];
    assert_int_equal(oc_dict_validate(&d), OC_EINVAL);
    assert_msg("key 'key17' appears twice (entries 17 and 99999)");
    e[N - 1].key = keys[N - 1];
    e[20].key = "";
    e[30].key = ""; /* the empty key twice */
    assert_int_equal(oc_dict_validate(&d), OC_EINVAL);
    assert_msg("key '' appears twice (entries 20 and 30)");
}

/* fill(Tensor x, Dict attrs) -> Tensor: a float32 vector of attrs["n"]
 * items (read by the shape function), each x[0] * scale + sum(offsets). */
static const char k_compute[] =
    "#include <opcore/kernel.h>\n"
    "oc_tensor *fill(const oc_tensor *x, const oc_dict *attrs)\n"
    "{\n"
    "    double scale;\n"
    "    oc_float_list offsets;\n"
    "    OC_CHECK_OK(oc_dict_get_float(attrs, \"scale\", &scale));\n"
    "    OC_CHECK_OK(oc_dict_get_floats(attrs, \"offsets\", &offsets));\n"
    "    double add = 0;\n"
    "    for (int64_t k = 0; k < offsets.count; k++) add += offsets.values[k];\n"
    "    oc_tensor *out = oc_dst_tensor();\n"
    "    for (int64_t k = 0; k < out->sizes[0]; k++)\n"
    "        ((float *)out->data)[k] = (float)(((const float *)x->data)[0] * scale + add + k);\n"
    "    return out;\n"
    "}\n";

static const char k_shape[] =
    "#include <opcore/library.h>\n"
    "static oc_tensor *fill_shape(const oc_tensor *x, const oc_dict *attrs)\n"
    "{\n"
    "    int64_t n;\n"
    "    OC_CHECK_OK(oc_dict_get_int(attrs, \"n\", &n));\n"
    "    return oc_empty(x->dtype, 1, (int64_t[]){n});\n"
    "}\n"
    "OC_LIBRARY(dict_ops, m) { oc_def(m, \"fill(Tensor x, Dict attrs) -> Tensor\", fill_shape, \"fill\"); }\n";

static void test_host_call_with_a_dict(void **state)
{
    (void)state;
    oc_library *lib = test_build_and_load("dict_ops", k_compute, k_shape, (test_lib_options){0});
    const oc_op *op = oc_op_find("dict_ops::fill");
    assert_non_null(op);
    assert_int_equal(oc_op_arg_type(op, 1), OC_ARG_DICT);
    float xv = 2.0f;
    oc_tensor x;
    oc_tensor_init(&x, &xv, OC_FLOAT32, 1, (int64_t[]){1});
    double offsets[] = {0.25, 0.5};
    oc_dict_entry e[3] = {oc_dict_int("n", 4), oc_dict_float("scale", 3.0), oc_dict_floats("offsets", offsets, 2)};
    oc_dict d = oc_dict_of(e, 3);
    oc_value args[2] = {oc_value_tensor(&x), oc_value_dict(&d)};
    oc_tensor *y = NULL;
    if (oc_op_invoke(op, args, 2, &y) != OC_OK) fail_msg("%s", oc_errmsg());
    assert_int_equal(y->ndim, 1);
    assert_int_equal(y->sizes[0], 4);
    for (int k = 0; k < 4; k++) assert_true(((float *)y->data)[k] == 2.0f * 3.0f + 0.75f + (float)k);
    oc_tensor_free(y);
    assert_null(d.op); /* the caller's dictionary is not written: the kernel got a named copy */

    /* the kernel's lookup fails: the caller hears op, argument, key, kinds */
    e[1] = oc_dict_str("scale", "big");
    assert_int_not_equal(oc_op_invoke(op, args, 2, &y), OC_OK);
    assert_msg("op 'dict_ops::fill': argument 'attrs' (Dict): key 'scale': expected float, got str");
    /* ... and the shape function's */
    e[0] = oc_dict_int("count", 4);
    e[1] = oc_dict_float("scale", 3.0);
    assert_int_not_equal(oc_op_invoke(op, args, 2, &y), OC_OK);
    assert_msg("argument 'attrs' (Dict): missing key 'n' (expected int; the dictionary has keys 'count', 'scale'");
    /* the binder refuses a malformed dictionary, NULL and another kind of value */
    e[0] = oc_dict_int("scale", 4);
    assert_int_equal(oc_op_invoke(op, args, 2, &y), OC_EINVAL);
    assert_msg("op 'dict_ops::fill': argument 'attrs' (Dict): key 'scale' appears twice");
    args[1] = oc_value_dict(NULL);
    assert_int_equal(oc_op_invoke(op, args, 2, &y), OC_EINVAL);
    assert_msg("argument 2 'attrs': expected a Dict, got NULL");
    args[1] = oc_value_int(3);
    assert_int_equal(oc_op_invoke(op, args, 2, &y), OC_EINVAL);
    assert_msg("argument 2 'attrs': expected Dict, got int");
    args[1] = oc_value_none();
    assert_int_equal(oc_op_invoke(op, args, 2, &y), OC_EINVAL);
    assert_msg("expected Dict, got None");
    /* a Dict has no default */
    assert_int_equal(oc_op_invoke(op, args, 1, &y), OC_EINVAL);
    assert_msg("missing argument 2 'attrs'");
    oc_library_unload(lib);
    oc_engine_shutdown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_typed_lookups),
        cmocka_unit_test(test_lookup_errors_name_key_and_kinds),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_validate_many_keys),
        cmocka_unit_test(test_host_call_with_a_dict),
    };
    return oc_test_run("dict", tests, NULL, NULL);
}
