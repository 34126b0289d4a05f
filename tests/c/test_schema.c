/* The op-schema grammar: every argument and result type, defaults, aliases,
 * the C prototypes they imply, and the errors for what opcore refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/runner.h"

#include "library/schema.h"

static oc_schema s;

static void parse_ok(const char *text)
{
    if (oc__schema_parse(text, &s) != OC_OK) fail_msg("%s: %s", text, oc_errmsg());
}

static void parse_fails(const char *text, const char *needle)
{
    if (oc__schema_parse(text, &s) != OC_EINVAL) fail_msg("accepted: %s", text);
    if (!strstr(oc_errmsg(), needle)) fail_msg("%s: expected \"%s\" in: %s", text, needle, oc_errmsg());
}

static void expect_proto(const char *fn, const char *want)
{
    char proto[1024];
    oc__schema_prototype(&s, fn, proto, sizeof proto);
    assert_string_equal(proto, want);
}

static void test_scalar_types_and_defaults(void **state)
{
    (void)state;
    parse_ok("f(Tensor a, float b=1.5, int c=-3, bool d=True, *, Scalar e=2, float g=1e-05, float h=.5) -> Tensor");
    assert_int_equal(s.num_args, 7);
    oc_value v;
    assert_true(oc__schema_default(&s.args[1], &v) && v.type == OC_ARG_FLOAT && v.v.f == 1.5);
    assert_true(oc__schema_default(&s.args[2], &v) && v.v.i == -3);
    assert_true(oc__schema_default(&s.args[3], &v) && v.v.b);
    assert_true(s.args[4].keyword_only && !s.args[3].keyword_only);
    assert_true(oc__schema_default(&s.args[4], &v) && v.v.scalar.kind == OC_SCALAR_INT && v.v.scalar.value.i == 2);
    assert_true(oc__schema_default(&s.args[5], &v) && v.v.f == 1e-05);
    assert_true(oc__schema_default(&s.args[6], &v) && v.v.f == 0.5);
    assert_false(oc__schema_default(&s.args[0], &v));
    expect_proto("f", "oc_tensor *f(const oc_tensor *a, double b, int64_t c, bool d, oc_scalar e, double g, double h)");
}

static void test_no_arguments(void **state)
{
    (void)state;
    parse_ok("noargs() -> Tensor");
    expect_proto("noargs", "oc_tensor *noargs(void)");
}

static void test_str_dtype_and_symint(void **state)
{
    (void)state;
    oc_value v;
    parse_ok("s(Tensor x, ScalarType dtype, str reduction=\"mean\", str mode='a\\'b', SymInt n=4) -> Tensor");
    assert_true(oc__schema_default(&s.args[2], &v) && v.type == OC_ARG_STR && !strcmp(v.v.s, "mean"));
    assert_true(oc__schema_default(&s.args[3], &v) && !strcmp(v.v.s, "a'b"));
    assert_int_equal(s.args[1].type, OC_ARG_DTYPE);
    assert_int_equal(s.args[4].type, OC_ARG_INT);
    assert_string_equal(s.args[4].type_text, "SymInt");
    expect_proto("s", "oc_tensor *s(const oc_tensor *x, oc_dtype dtype, const char *reduction, const char *mode, int64_t n)");
}

static void test_dict_argument(void **state)
{
    (void)state;
    parse_ok("d(Tensor x, Dict attrs, *, int n=2) -> Tensor");
    assert_int_equal(s.args[1].type, OC_ARG_DICT);
    assert_string_equal(s.args[1].type_text, "Dict");
    assert_false(s.args[1].optional);
    assert_false(s.args[1].has_default);
    assert_string_equal(oc_arg_type_name(OC_ARG_DICT), "Dict");
    expect_proto("d", "oc_tensor *d(const oc_tensor *x, const oc_dict *attrs, int64_t n)");
}

static void test_optionals_and_lists(void **state)
{
    (void)state;
    parse_ok("pool(Tensor x, int[2] kernel_size, Tensor[] xs, int[2] stride=1, int[2] padding=[0, 0], int[] dims=[], "
             "float[] w=[1.0, 2], Tensor? bias=None, int? k=None, float? e=None, bool? b=None, "
             "ScalarType? dtype=None, str? mode=None, int[]? sizes=None) -> Tensor");
    assert_int_equal(s.args[1].type, OC_ARG_INT_LIST);
    assert_int_equal(s.args[1].list_len, 2);
    oc_value v;
    assert_int_equal(s.args[2].type, OC_ARG_TENSOR_LIST);
    assert_true(oc__schema_default(&s.args[3], &v) && v.type == OC_ARG_INT_LIST && v.v.ints.count == 2 &&
                v.v.ints.values[0] == 1 && v.v.ints.values[1] == 1); /* 1 fills int[2] */
    assert_true(oc__schema_default(&s.args[4], &v) && v.v.ints.count == 2 && v.v.ints.values[1] == 0);
    assert_true(oc__schema_default(&s.args[5], &v) && v.v.ints.count == 0);
    assert_true(oc__schema_default(&s.args[6], &v) && v.type == OC_ARG_FLOAT_LIST && v.v.floats.values[1] == 2.0);
    assert_true(s.args[7].optional && oc__schema_default(&s.args[7], &v) && v.type == OC_ARG_NONE);
    expect_proto("pool", "oc_tensor *pool(const oc_tensor *x, oc_int_list kernel_size, oc_tensor_list xs, "
                         "oc_int_list stride, oc_int_list padding, oc_int_list dims, oc_float_list w, "
                         "const oc_tensor *bias, const int64_t *k, const double *e, const bool *b, "
                         "const oc_dtype *dtype, const char *mode, const oc_int_list *sizes)");
    assert_string_equal(s.args[13].type_text, "int[]?");
}

static void test_named_results(void **state)
{
    (void)state;
    parse_ok("ln(Tensor x, int[] shape, Tensor? w=None, float eps=1e-05) -> (Tensor out, Tensor mean, Tensor rstd)");
    assert_int_equal(s.num_results, 3);
    assert_string_equal(s.results[1].name, "mean");
    assert_int_equal(s.results[2].alias_arg, -1);
    assert_false(oc__schema_returns_tensor(&s));
    expect_proto("ln", "void ln(const oc_tensor *x, oc_int_list shape, const oc_tensor *w, double eps)");
}

static void test_unnamed_results(void **state)
{
    (void)state;
    parse_ok("two(Tensor x) -> (Tensor, Tensor)");
    assert_int_equal(s.num_results, 2);
}

static void test_one_result_in_parentheses(void **state)
{
    (void)state;
    parse_ok("one(Tensor x) -> (Tensor)");
    assert_true(oc__schema_returns_tensor(&s));
}

static void test_mutable_arguments_no_results(void **state)
{
    (void)state;
    parse_ok("sgd_(Tensor(a!) p, Tensor(b!) m, Tensor g, float lr) -> ()");
    assert_int_equal(s.num_results, 0);
    assert_true(s.args[0].is_mutable && s.args[1].is_mutable && !s.args[2].is_mutable);
    assert_string_equal(s.args[0].type_text, "Tensor(a!)");
    expect_proto("sgd_", "void sgd_(oc_tensor *p, oc_tensor *m, const oc_tensor *g, double lr)");
}

static void test_result_aliases_argument(void **state)
{
    (void)state;
    parse_ok("add_(Tensor(a!) self, Tensor other) -> Tensor(a!)");
    assert_int_equal(s.results[0].alias_arg, 0);
    assert_false(oc__schema_returns_tensor(&s));
    assert_int_equal(oc__schema_fresh_results(&s), 0);
    expect_proto("add_", "void add_(oc_tensor *self, const oc_tensor *other)");
}

static void test_alias_and_fresh_results(void **state)
{
    (void)state;
    parse_ok("mix(Tensor(a!) x, Tensor(b!)[] xs) -> (Tensor(a!), Tensor)");
    assert_int_equal(s.results[0].alias_arg, 0);
    assert_int_equal(oc__schema_fresh_results(&s), 1);
    expect_proto("mix", "void mix(oc_tensor *x, oc_tensor_list_mut xs)");
}

/* ---- what opcore refuses: one test per schema -------------------------------- */

typedef struct {
    const char *text;   /* the schema */
    const char *needle; /* in the error message */
} refusal;

static const refusal refusals[] = {
    /* Dict: one required dictionary (torch's grammar has no literal for it) */
    {"f(Tensor x, Dict? d) -> Tensor", "neither optional nor a list"},
    {"f(Tensor x, Dict[] d) -> Tensor", "lists of Dict are not supported"},
    {"f(Tensor x, Dict d={}) -> Tensor", "a Dict argument has no default"},
    {"f(Tensor x, Dict d=None) -> Tensor", "a Dict argument has no default"},
    {"f(Tensor x, Dict(a!) d) -> Tensor", "only Tensor arguments can be written in place"},
    /* what torch refuses, or accepts and then misreads */
    {"f(Tensor x, float a=+5) -> Tensor", "'+'"},
    {"f(Tensor x, int a=+5) -> Tensor", "'+'"},
    {"f(Tensor x, float a=inf) -> Tensor", "no inf or nan"},
    {"f(Tensor x, float a=nan) -> Tensor", "no inf or nan"},
    {"f(Tensor x, float a=-inf) -> Tensor", "no inf or nan"},
    {"f(Tensor x, float a=1e400) -> Tensor", "out of range"},
    {"f(Tensor x, float a=1e-400) -> Tensor", "argument 'a': default 1e-400 is too small for a double"},
    {"f(Tensor x, float a=1e-310) -> Tensor", "torch's schema parser refuses it; write 0.0, or a value of at least 2.22507e-308"},
    {"f(Tensor x, int a=99999999999999999999) -> Tensor", "out of range"},
    {"f(Tensor x, int a=5.0) -> Tensor", "must be an integer"},
    {"f(Tensor x, int a=0x10) -> Tensor", "expected an integer"},
    {"f(Tensor x, int[99999999999] a) -> Tensor", "int[99999999999]: a list length must be 1 to 1024; for a longer list write int[]"},
    {"f(Tensor x, int a=1_000) -> Tensor", "expected an integer"},
    {"f(Tensor x, bool a=true) -> Tensor", "True or False"},
    {"f(Tensor x, int[2] k=[1,2,3]) -> Tensor", "has 3 items, expected 2"},
    {"f(Tensor x, int[] k=1) -> Tensor", "needs a fixed length"},
    {"f(Tensor x, ScalarType d=float) -> Tensor", "ScalarType default can only be None"},
    {"f(Tensor x, Tensor y=None) -> Tensor", "only an optional argument"},
    {"f(Tensor x, int k=None) -> Tensor", "int? k=None"},
    {"f(Tensor x, int k=1, Tensor y) -> Tensor", "keyword-only"},
    {"f.ov(Tensor x) -> Tensor", "overload names"},
    {"ns::f(Tensor x) -> Tensor", "without a namespace"},
    {"f(Tensor(a) x) -> Tensor(a)", "cannot return views"},
    {"f(Tensor(a!) x, Tensor(a!) y) -> ()", "share the alias set"},
    {"f(Tensor(a!) x) -> Tensor(b!)", "names no Tensor(b!) argument"},
    {"f(Tensor x) -> Tensor[]", "list (Tensor[]) and optional results"},
    {"f(Tensor x) -> float", "a result must be Tensor"},
    {"f(Tensor x, Tensor?[] i) -> Tensor", "nested"},
    {"f(Tensor x, bool[3] m) -> Tensor", "lists of bool"},
    {"f(Tensor x, Layout? l=None) -> Tensor", "unknown type 'Layout'"},
    {"f(Tensor x, Dimname d) -> Tensor", "opcore supports Tensor, Tensor?"},
    {"f(Tensor[]? xs) -> Tensor", "Tensor[]?"},
    {"f(int(a!) n) -> ()", "only Tensor arguments can be written in place"},
    /* the usual first mistakes */
    {"relu_forward", "not just its name: write e.g. \"relu_forward(Tensor x) -> Tensor\""},
    {"relu(Tensr x) -> Tensor", "unknown type 'Tensr'"},
    {"relu(Tensor x)", "expected '->'"},
    {"relu(Tensor x, Tensor x) -> Tensor", "duplicate"},
    {"(Tensor x) -> Tensor", "op name"},
    {"f(Tensor x) -> Tensor out junk", "column"},
    {"f(Tensor) -> Tensor", "expected a name for the Tensor argument"},
    {"f(Tensor x, ) -> Tensor", "expected an argument"},
};

static void test_refused(void **state)
{
    const refusal *r = *state;
    parse_fails(r->text, r->needle);
}

enum { NUM_REFUSALS = sizeof refusals / sizeof *refusals };

int main(void)
{
    const struct CMUnitTest accepted[] = {
        cmocka_unit_test(test_scalar_types_and_defaults),
        cmocka_unit_test(test_no_arguments),
        cmocka_unit_test(test_str_dtype_and_symint),
        cmocka_unit_test(test_dict_argument),
        cmocka_unit_test(test_optionals_and_lists),
        cmocka_unit_test(test_named_results),
        cmocka_unit_test(test_unnamed_results),
        cmocka_unit_test(test_one_result_in_parentheses),
        cmocka_unit_test(test_mutable_arguments_no_results),
        cmocka_unit_test(test_result_aliases_argument),
        cmocka_unit_test(test_alias_and_fresh_results),
    };
    enum { NUM_ACCEPTED = sizeof accepted / sizeof *accepted };
    /* each refusal is its own test, named by the schema it refuses */
    static char names[NUM_REFUSALS][160];
    struct CMUnitTest tests[NUM_ACCEPTED + NUM_REFUSALS];
    memcpy(tests, accepted, sizeof accepted);
    for (size_t k = 0; k < NUM_REFUSALS; k++) {
        snprintf(names[k], sizeof names[k], "test_refused: %s", refusals[k].text);
        tests[NUM_ACCEPTED + k] = (struct CMUnitTest)cmocka_unit_test_prestate(test_refused, (void *)&refusals[k]);
        tests[NUM_ACCEPTED + k].name = names[k];
    }
    return oc_test_run("schema", tests, NULL, NULL);
}
