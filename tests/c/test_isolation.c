/* Fault isolation: nothing a kernel, a shape function or an OC_LIBRARY
 * block does ends or hangs the host process. Each case of
 * tests/isolation/misbehave.h runs in a single-core and a multicore
 * kernel, and in a shape function and a library's registration block; each
 * must end that call with an error naming the op (or library), the core and
 * what happened, after which every op still works. Each test runs in its
 * own process under the runner's timeout: a hang fails it. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/runner.h"

#include "../isolation/misbehave.h"
#include "opcore/build.h"
#include "opcore/engine.h"
#include "opcore/host.h"
#include "support/oplib.h"

typedef struct iso_case {
    int how;
    int64_t arg;
    oc_status status;
    const char *needle;
} iso_case;

/* What each case must say (kernel and shape function alike). */
static const iso_case cases[] = {
    {ISO_EXIT, 0, OC_EKERNEL, "called exit(3)"},
    {ISO__EXIT, 0, OC_EKERNEL, "called _exit(4)"},
    {ISO__EXIT2, 0, OC_EKERNEL, "called _Exit(5)"},
    {ISO_QUICK_EXIT, 0, OC_EKERNEL, "called quick_exit(6)"},
    {ISO_ABORT, 0, OC_EKERNEL, "called abort()"},
    {ISO_ASSERT, 0, OC_EKERNEL, "assertion failed: how == 1234"},
    {ISO_RAISE_ABRT, 0, OC_EFAULT, "SIGABRT (Aborted) sent by raise()"},
    {ISO_PTHREAD_EXIT, 0, OC_EKERNEL, "called pthread_exit()"},
    {ISO_THRD_EXIT, 0, OC_EKERNEL, "called thrd_exit(7)"},
    {ISO_RAISE_SEGV, 0, OC_EFAULT, "SIGSEGV (Segmentation fault) sent by raise()"},
    {ISO_SEGV, 0, OC_EFAULT, "Segmentation fault at address (nil)"},
    {ISO_CHECK, 0, OC_EKERNEL, "arg is 0, not 42"},
    {ISO_LONGJMP_INSIDE, 0, OC_OK, NULL},
};
#define NUM_CASES (int)(sizeof cases / sizeof cases[0])

static int tried, survived;

/* Under valgrind a real bad access is what valgrind reports (an error exit);
 * the cases that make one are left to the plain and ASan runs. */
static bool faults_ok(int how)
{
    return !getenv("OC_UNDER_VALGRIND") || (how != ISO_SEGV && how != ISO_BIG_FRAME);
}

/* tests/isolation's library, built as `name` (-DISO_NAME=name). */
static const char *build_iso(const char *name, bool multicore, bool debug)
{
    char define[128];
    snprintf(define, sizeof define, "-DISO_NAME=%s", name);
    oc_status st;
    const char *path = test_build_files(name, test_repo_path("tests/isolation/kernels.c"),
                                        test_repo_path("tests/isolation/shape.c"),
                                        (test_lib_options){.multicore = multicore, .debug = debug, .cflag = define},
                                        &st);
    if (!path) fail_msg("building %s: %s", name, oc_errmsg());
    return path;
}

static void assert_has(const char *needle)
{
    if (!strstr(oc_errmsg(), needle)) fail_msg("expected \"%s\" in: %s", needle, oc_errmsg());
}

/* Call lib::misbehave(x, how, arg); on success check y == 2x. */
static oc_status misbehave_call(const char *lib, int64_t how, int64_t arg)
{
    char qual[128];
    snprintf(qual, sizeof qual, "%s::misbehave", lib);
    const oc_op *op = oc_op_find(qual);
    assert_non_null(op);
    float xv[1000];
    for (int i = 0; i < 1000; i++) xv[i] = (float)(i % 17) - 8.0f;
    oc_tensor x, *y = NULL;
    oc_tensor_init(&x, xv, OC_FLOAT32, 1, (int64_t[]){1000});
    oc_value a[] = {oc_value_tensor(&x), oc_value_int(how), oc_value_int(arg)};
    oc_status st = oc_op_invoke(op, a, 3, &y);
    if (st == OC_OK)
        for (int i = 0; i < 1000; i++) assert_true(((float *)y->data)[i] == 2 * xv[i]);
    oc_tensor_free(y);
    return st;
}

/* After a case: both libraries' ops still work. */
static void still_works(void)
{
    assert_int_equal(misbehave_call("iso", ISO_FINE, 0), OC_OK);
    assert_int_equal(misbehave_call("iso_multi", ISO_FINE, 0), OC_OK);
}

/* cmocka installs its own SIGSEGV/SIGILL/SIGFPE handlers around each test;
 * restarting the engine re-asserts opcore's (chaining to cmocka's). */
static void reassert_handlers(void)
{
    oc_engine_shutdown();
    assert_true(oc_engine_num_cores() >= 1);
}

static void expect(const char *lib, int how, int64_t arg, const iso_case *c, bool shape)
{
    char qual[128];
    snprintf(qual, sizeof qual, "op '%s::misbehave'", lib);
    tried++;
    oc_status st = misbehave_call(lib, how, arg);
    if (st != c->status)
        fail_msg("%s how=%d: expected %s, got %s: %s", lib, how, oc_status_name(c->status),
                 oc_status_name(st), oc_errmsg());
    if (c->status != OC_OK) {
        assert_has(qual);
        assert_has(shape ? "shape function 'misbehave_shape'" : "kernel 'misbehave' on core ");
        assert_has(c->needle);
    }
    still_works();
    survived++;
}

static void test_kernels(void **state)
{
    (void)state;
    reassert_handlers();
    for (int i = 0; i < NUM_CASES; i++) {
        if (!faults_ok(cases[i].how)) continue;
        expect("iso", cases[i].how, cases[i].arg, &cases[i], false);
        expect("iso_multi", cases[i].how, cases[i].arg, &cases[i], false);
    }
    /* longjmp to the jmp_buf the shape function of the same call set */
    const iso_case out = {0, 0, OC_EKERNEL, "called longjmp() to a jmp_buf set outside the call"};
    const iso_case sigout = {0, 0, OC_EKERNEL, "called siglongjmp() to a jmp_buf set outside the call"};
    expect("iso", ISO_LONGJMP_OTHER, 0, &out, false);
    expect("iso", ISO_SIGLONGJMP_OTHER, 0, &sigout, false);
    expect("iso_multi", ISO_LONGJMP_OTHER, 0, &out, false);
    /* a frame larger than the stack's guard region */
    const iso_case big = {0, 0, OC_ESTACK, "stack overflow"};
    if (faults_ok(ISO_BIG_FRAME)) {
        expect("iso", ISO_BIG_FRAME, 0, &big, false);
        expect("iso_multi", ISO_BIG_FRAME, 0, &big, false);
    }
    /* a failure opcore raises in a kernel is the kernel's (OC_EKERNEL) */
    const iso_case tcm = {0, 0, OC_EKERNEL, "out of range"};
    expect("iso", ISO_TCM_RANGE, 0, &tcm, false);
    expect("iso_multi", ISO_TCM_RANGE, 0, &tcm, false);
    /* raise(SIGSEGV) has no faulting address: none is shown */
    assert_int_equal(misbehave_call("iso", ISO_RAISE_SEGV, 0), OC_EFAULT);
    assert_null(strstr(oc_errmsg(), "address"));
}

/* longjmp to a live jmp_buf of the host, from a kernel and a shape function:
 * the host must not resume there. */
static jmp_buf host_buf;

static void test_longjmp_to_host(void **state)
{
    (void)state;
    reassert_handlers();
    const char *libs[] = {"iso", "iso_multi"};
    const int hows[] = {ISO_LONGJMP_HOST, 100 + ISO_LONGJMP_HOST};
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < 2; h++) {
            volatile oc_status st = OC_OK;
            volatile bool landed = false;
            tried++;
            if (setjmp(host_buf) == 0) st = misbehave_call(libs[l], hows[h], (int64_t)(uintptr_t)&host_buf);
            else landed = true;
            assert_false(landed);
            assert_int_equal(st, OC_EKERNEL);
            assert_has("called longjmp() to a jmp_buf set outside the call");
            still_works();
            survived++;
        }
}

static void test_shape_functions(void **state)
{
    (void)state;
    reassert_handlers();
    for (int i = 0; i < NUM_CASES; i++) {
        if (!faults_ok(cases[i].how)) continue;
        /* a store near NULL in a shape function reads as touching meta data */
        const iso_case meta = {ISO_SEGV, 0, OC_EMETA, "touched tensor data"};
        expect("iso", 100 + cases[i].how, cases[i].arg, cases[i].how == ISO_SEGV ? &meta : &cases[i], true);
    }
    /* longjmp to the jmp_buf a kernel set (on its own stack) */
    assert_int_equal(misbehave_call("iso", ISO_SET_BUF, 0), OC_OK);
    const iso_case out = {0, 0, OC_EKERNEL, "called longjmp() to a jmp_buf set outside the call"};
    expect("iso", 100 + ISO_LONGJMP_OTHER, 0, &out, true);
}

static void test_debug_build_catches_overrun(void **state)
{
    (void)state;
    reassert_handlers();
    const oc_op *op = oc_op_find("iso_debug::overrun");
    assert_non_null(op);
    float xv[10] = {0};
    oc_tensor x, *y = NULL;
    oc_tensor_init(&x, xv, OC_FLOAT32, 1, (int64_t[]){10});
    /* 1 and 6 floats past the end: into the alignment slack (canaries);
     * 5000: into the guard page */
    const int64_t past[] = {1, 6, 5000};
    for (int i = 0; i < (getenv("OC_UNDER_VALGRIND") ? 2 : 3); i++) {
        tried++;
        oc_value a[] = {oc_value_tensor(&x), oc_value_int(past[i])};
        assert_int_equal(oc_op_invoke(op, a, 2, &y), OC_EFAULT);
        assert_has("op 'iso_debug::overrun'");
        assert_has("wrote past the end of output 0 (float32 [10], 40 bytes)");
        still_works();
        survived++;
    }
    oc_value a[] = {oc_value_tensor(&x), oc_value_int(0)};
    assert_int_equal(oc_op_invoke(op, a, 2, &y), OC_OK);
    for (int i = 0; i < 10; i++) assert_true(((float *)y->data)[i] == (float)i);
    oc_tensor_free(y);
}

/* The OC_LIBRARY block misbehaving at load time ($OC_ISO_REGISTER). */
static void test_library_block(void **state)
{
    (void)state;
    reassert_handlers();
    const char *path = build_iso("iso_reg", false, false);
    const iso_case reg[] = {
        {ISO_EXIT, 0, OC_EKERNEL, "called exit(3)"},
        {ISO__EXIT, 0, OC_EKERNEL, "called _exit(4)"},
        {ISO_QUICK_EXIT, 0, OC_EKERNEL, "called quick_exit(6)"},
        {ISO_ABORT, 0, OC_EKERNEL, "called abort()"},
        {ISO_ASSERT, 0, OC_EKERNEL, "assertion failed"},
        {ISO_RAISE_ABRT, 0, OC_EFAULT, "SIGABRT"},
        {ISO_PTHREAD_EXIT, 0, OC_EKERNEL, "called pthread_exit()"},
        {ISO_SEGV, 0, OC_EFAULT, "Segmentation fault"},
        {ISO_CHECK, 0, OC_EKERNEL, "arg is 0, not 42"},
    };
    for (size_t i = 0; i < sizeof reg / sizeof reg[0]; i++) {
        if (!faults_ok(reg[i].how)) continue;
        char how[16];
        snprintf(how, sizeof how, "%d", reg[i].how);
        setenv("OC_ISO_REGISTER", how, 1);
        oc_library *lib = NULL;
        tried++;
        assert_int_equal(oc_library_load(path, &lib), reg[i].status);
        assert_null(lib);
        assert_has("library 'iso_reg'");
        assert_has("OC_LIBRARY block");
        assert_has(reg[i].needle);
        unsetenv("OC_ISO_REGISTER");
        lib = test_load(path);
        assert_int_equal(oc_library_unload(lib), OC_OK);
        still_works();
        survived++;
    }
    /* ...and at build time, where the build tool runs the block */
    oc_status st;
    tried++;
    assert_null(test_build("reg_exit", "int unused;\n",
                           "#include <stdlib.h>\n#include <opcore/library.h>\n"
                           "OC_LIBRARY(reg_exit, m) { (void)m; exit(3); }\n",
                           (test_lib_options){0}, &st));
    assert_int_equal(st, OC_EBUILD);
    assert_has("library 'reg_exit'");
    assert_has("called exit(3)");
    survived++;
}

static int setup(void **state)
{
    (void)state;
    test_load(build_iso("iso", false, false));
    test_load(build_iso("iso_multi", true, false));
    test_load(build_iso("iso_debug", false, true));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    printf("isolation: %d cases tried, %d ended in an error with the process alive\n", tried, survived);
    oc_engine_shutdown();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels),
        cmocka_unit_test(test_longjmp_to_host),
        cmocka_unit_test(test_shape_functions),
        cmocka_unit_test(test_debug_build_catches_overrun),
        cmocka_unit_test(test_library_block),
    };
    return oc_test_run("isolation", tests, setup, teardown);
}
