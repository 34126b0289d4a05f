/* Unloading a library while other threads call its ops (issue 24, item
 * 9): oc_library_unload waits for the calls running in it, never unmaps
 * code under one, and every call that starts afterwards -- through an
 * oc_op pointer kept from before -- fails with OC_ENOTFOUND naming the op.
 * Each test runs in its own process with a timeout (support/runner.h). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/host.h"
#include "support/oplib.h"

static const char *shape_src =
    "#include <opcore/library.h>\n"
    "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
    "OC_LIBRARY(unloadme, m) { oc_def(m, \"slow_inc(Tensor x) -> Tensor\", same, \"slow_inc\"); }\n";
/* x + 1 after a nap: calls are still running when the unload starts */
static const char *compute_src =
    "#include <time.h>\n"
    "#include <opcore/kernel.h>\n"
    "oc_tensor *slow_inc(const oc_tensor *x) {\n"
    "  struct timespec nap = {0, 2000000}; nanosleep(&nap, NULL);\n"
    "  oc_tensor *o = oc_dst_tensor();\n"
    "  for (int64_t i = 0; i < oc_numel(x); i++) ((float *)o->data)[i] = ((const float *)x->data)[i] + 1;\n"
    "  return o; }\n";

#define THREADS 4
#define N 256

typedef struct caller {
    pthread_t thread;
    const oc_op *op;
    atomic_int ok;      /* right answers so far */
    int wrong;          /* wrong answers (must stay 0) */
    oc_status end;      /* the status that stopped it */
    atomic_bool done;   /* it stopped */
    bool prepared;      /* calls through oc_call_prepare / oc_call_run (torch.ops' route) */
    char msg[512];
} caller;

static void *call_until_refused(void *arg)
{
    caller *c = arg;
    float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = (float)i;
    oc_tensor xt, yt;
    oc_tensor_init(&xt, x, OC_FLOAT32, 1, (int64_t[]){N});
    oc_tensor_init(&yt, y, OC_FLOAT32, 1, (int64_t[]){N});
    oc_value args[] = {oc_value_tensor(&xt)};
    oc_call *call = NULL;
    if (c->prepared && oc_call_prepare(c->op, args, 1, &yt, NULL, &call) != OC_OK) call = NULL;
    for (;;) {
        oc_status st = c->prepared && !call ? oc_errcode()
                       : call ? oc_call_run(call, (void *[]){x, y}) : oc_op_call(c->op, args, 1, &yt);
        if (st != OC_OK) {
            c->end = st;
            snprintf(c->msg, sizeof c->msg, "%s", oc_errmsg());
            oc_call_free(call);
            atomic_store(&c->done, true);
            return NULL;
        }
        for (int i = 0; i < N; i++) c->wrong += y[i] != x[i] + 1;
        atomic_fetch_add(&c->ok, 1);
    }
}

static void nap_ms(long ms)
{
    struct timespec t = {0, ms * 1000000};
    nanosleep(&t, NULL);
}

/* THREADS callers on one op; unload (or forget) once each has had right
 * answers; every caller must then stop with the unloaded error. */
static void race_with(bool multicore, bool prepared, oc_status (*unload)(oc_library *))
{
    oc_library *lib = test_build_and_load("unloadme", compute_src, shape_src,
                                          (test_lib_options){.multicore = multicore});
    const oc_op *op = oc_op_find("unloadme::slow_inc");
    assert_non_null(op);
    caller callers[THREADS];
    memset(callers, 0, sizeof callers);
    for (int t = 0; t < THREADS; t++) {
        callers[t].op = op;
        callers[t].prepared = prepared;
        assert_int_equal(pthread_create(&callers[t].thread, NULL, call_until_refused, &callers[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        while (atomic_load(&callers[t].ok) < 3 && !atomic_load(&callers[t].done)) nap_ms(1);
        if (atomic_load(&callers[t].done)) fail_msg("caller %d stopped before the unload: %s", t, callers[t].msg);
    }
    assert_int_equal(unload(lib), OC_OK);
    for (int t = 0; t < THREADS; t++) {
        pthread_join(callers[t].thread, NULL);
        assert_int_equal(callers[t].wrong, 0);
        assert_int_equal(callers[t].end, OC_ENOTFOUND);
        test_assert_contains(callers[t].msg, "op 'unloadme::slow_inc': its library 'unloadme' was unloaded");
    }
    assert_null(oc_op_find("unloadme::slow_inc"));
}

static void race(bool multicore, oc_status (*unload)(oc_library *)) { race_with(multicore, false, unload); }

static void test_unload_while_calls_run(void **state)
{
    (void)state;
    race(false, oc_library_unload);
}

static void test_unload_while_multicore_calls_run(void **state)
{
    (void)state;
    race(true, oc_library_unload);
}

static void test_forget_while_calls_run(void **state)
{
    (void)state;
    race(false, oc_library_forget);
}

/* Prepared calls (the route torch.ops takes) stop the same way: the
 * prepared call outlives its library and reports it unloaded. */
static void test_unload_while_prepared_calls_run(void **state)
{
    (void)state;
    race_with(false, true, oc_library_unload);
    race_with(true, true, oc_library_unload);
}

/* Load, race, unload, many times over: each round's calls see only their
 * own library's code, alive. */
static void test_load_unload_rounds_while_calls_run(void **state)
{
    (void)state;
    for (int round = 0; round < 5; round++) race(round % 2 == 1, oc_library_unload);
}

static void test_infer_after_unload_names_the_op(void **state)
{
    (void)state;
    oc_library *lib = test_build_and_load("unloadme", compute_src, shape_src, (test_lib_options){0});
    const oc_op *op = oc_op_find("unloadme::slow_inc");
    assert_non_null(op);
    assert_int_equal(oc_library_unload(lib), OC_OK);
    float x[2] = {0, 0};
    oc_tensor xt, meta;
    oc_tensor_init(&xt, x, OC_FLOAT32, 1, (int64_t[]){2});
    oc_value args[] = {oc_value_tensor(&xt)};
    assert_int_equal(oc_op_infer(op, args, 1, &meta), OC_ENOTFOUND);
    test_assert_contains(oc_errmsg(), "op 'unloadme::slow_inc': its library 'unloadme' was unloaded");
}

static void test_unload_twice_says_it_is_not_loaded(void **state)
{
    (void)state;
    oc_library *lib = test_build_and_load("unloadme", compute_src, shape_src, (test_lib_options){0});
    assert_int_equal(oc_library_unload(lib), OC_OK);
    assert_int_equal(oc_library_unload(lib), OC_ENOTFOUND);
    test_assert_contains(oc_errmsg(), "oc_library_unload: library 'unloadme' is not loaded");
    /* and it loads again, working */
    lib = test_build_and_load("unloadme", compute_src, shape_src, (test_lib_options){0});
    assert_non_null(oc_op_find("unloadme::slow_inc"));
    assert_int_equal(oc_library_unload(lib), OC_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unload_while_calls_run),
        cmocka_unit_test(test_unload_while_multicore_calls_run),
        cmocka_unit_test(test_forget_while_calls_run),
        cmocka_unit_test(test_load_unload_rounds_while_calls_run),
        cmocka_unit_test(test_unload_while_prepared_calls_run),
        cmocka_unit_test(test_infer_after_unload_names_the_op),
        cmocka_unit_test(test_unload_twice_says_it_is_not_loaded),
    };
    return oc_test_run("unload", tests, NULL, NULL);
}
