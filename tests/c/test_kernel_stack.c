/* Where a kernel's frames go (docs/engine.md, "Kernel stacks and faults"):
 * on the calling thread's own stack when it has room for the op's stack
 * size, else (a small thread stack, OC_KERNEL_STACK=1) on the engine
 * core's stack; a kernel running off the end of either is OC_ESTACK and the
 * next call works. The kernel below reports the address of one of its
 * locals, which the tests place against the calling thread's stack. Each
 * test runs in its own process (support/runner.h). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/engine.h"
#include "opcore/host.h"
#include "support/oplib.h"

static const char compute[] =
    "#include <opcore/kernel.h>\n"
    "oc_tensor *where(const oc_tensor *x) {\n"
    "    volatile char here = 0;\n"
    "    ((int64_t *)oc_dst_tensor()->data)[0] = (int64_t)(intptr_t)&here;\n"
    "    (void)x; return oc_dst_tensor();\n"
    "}\n"
    "static __attribute__((noinline)) int64_t down(int64_t n) {\n"
    "    volatile char pad[256]; pad[0] = (char)n;\n"
    "    return n <= 0 ? pad[0] : down(n - 1) + pad[0];\n"
    "}\n"
    "oc_tensor *deep(const oc_tensor *x, int64_t n) {\n"
    "    ((int64_t *)oc_dst_tensor()->data)[0] = down(n); (void)x; return oc_dst_tensor();\n"
    "}\n";

static const char shape[] =
    "#include <opcore/library.h>\n"
    "static oc_tensor *one(const oc_tensor *x) { (void)x; return oc_empty(OC_INT64, 1, (int64_t[]){1}); }\n"
    "static oc_tensor *one_n(const oc_tensor *x, int64_t n) { (void)n; return one(x); }\n"
    "OC_LIBRARY(kstack, m) {\n"
    "    oc_def(m, \"where(Tensor x) -> Tensor\", one, \"where\");\n"
    "    oc_def(m, \"deep(Tensor x, int n) -> Tensor\", one_n, \"deep\");\n"
    "    oc_def(m, \"huge(Tensor x) -> Tensor\", one, \"where\", .stack_size = (size_t)1 << 30);\n"
    "    oc_def(m, \"huge_mc(Tensor x) -> Tensor\", one, \"where\", .stack_size = (size_t)1 << 30,\n"
    "           .multicore = true);\n"
    "}\n";

static oc_library *lib;

static int setup(void **state)
{
    (void)state;
    lib = test_build_and_load("kstack", compute, shape, (test_lib_options){0}); /* 256 KiB stacks */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_unload_and_shutdown(&lib);
    return 0;
}

/* The calling thread's stack: [lo, hi). */
static void thread_stack(uintptr_t *lo, uintptr_t *hi)
{
    pthread_attr_t a;
    void *addr;
    size_t size;
    assert_int_equal(pthread_getattr_np(pthread_self(), &a), 0);
    assert_int_equal(pthread_attr_getstack(&a, &addr, &size), 0);
    pthread_attr_destroy(&a);
    *lo = (uintptr_t)addr, *hi = (uintptr_t)addr + size;
}

/* Run `where` on this thread: the address of the kernel's local; and
 * whether it lies on this thread's stack. */
static bool kernel_ran_here(void)
{
    float one = 1;
    int64_t got = 0;
    oc_tensor x, out;
    oc_tensor_init(&x, &one, OC_FLOAT32, 1, (int64_t[]){1});
    oc_tensor_init(&out, &got, OC_INT64, 1, (int64_t[]){1});
    oc_value args[] = {oc_value_tensor(&x)};
    if (oc_op_call(test_op("kstack::where"), args, 1, &out) != OC_OK) fail_msg("%s", oc_errmsg());
    uintptr_t lo, hi;
    thread_stack(&lo, &hi);
    return (uintptr_t)got >= lo && (uintptr_t)got < hi;
}

/* Under valgrind a forked process's main thread reports only the stack it
 * has mapped so far (a few KiB), so its kernels take the engine's stack:
 * the safe way when the room cannot be known. */
static bool in_place_expected(void) { return !getenv("OC_UNDER_VALGRIND"); }

/* Overflows are provoked for real: not under valgrind (which reports a
 * stack overflow of its own), and the calling thread's stack must end
 * (no `ulimit -s unlimited`). */
static bool overflow_ok(bool on_this_thread)
{
    struct rlimit r;
    if (getenv("OC_UNDER_VALGRIND")) return false;
    return !on_this_thread || (getrlimit(RLIMIT_STACK, &r) == 0 && r.rlim_cur != RLIM_INFINITY);
}

/* What `deep` computes for n: pad[0] is (char)n at every level. */
static int64_t deep_sum(int64_t n)
{
    int64_t s = 0;
    for (int64_t k = n; k >= 0; k--) s += (char)k;
    return s;
}

static oc_status deep(int64_t n)
{
    float one = 1;
    int64_t got = 0;
    oc_tensor x, out;
    oc_tensor_init(&x, &one, OC_FLOAT32, 1, (int64_t[]){1});
    oc_tensor_init(&out, &got, OC_INT64, 1, (int64_t[]){1});
    oc_value args[] = {oc_value_tensor(&x), oc_value_int(n)};
    return oc_op_call(test_op("kstack::deep"), args, 2, &out);
}

static void test_on_the_calling_threads_stack(void **state)
{
    (void)state;
    assert_true(kernel_ran_here() || !in_place_expected()); /* the main thread: 8 MiB */
    assert_true(kernel_ran_here() || !in_place_expected());
}

static void *on_small_thread(void *unused)
{
    (void)unused;
    bool here = kernel_ran_here();
    bool overflow = true;
    if (overflow_ok(false)) {
        oc_status st = deep(1 << 20); /* 256 MiB of frames: past the engine stack's end */
        overflow = st == OC_ESTACK && strstr(oc_errmsg(), "its stack of") != NULL;
    }
    bool again = deep(10) == OC_OK && !kernel_ran_here();
    return (void *)(intptr_t)(!here && overflow && again);
}

static void test_small_thread_stacks_use_the_engines(void **state)
{
    (void)state;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 192 * 1024); /* less than 256 KiB + opcore's margin */
    pthread_t t;
    void *ok;
    assert_int_equal(pthread_create(&t, &a, on_small_thread, NULL), 0);
    pthread_attr_destroy(&a);
    assert_int_equal(pthread_join(t, &ok), 0);
    assert_true((intptr_t)ok);
}

/* A thread with a 64 KiB stack (Python's threading.stack_size(64 * 1024)
 * makes such threads; libopcore's thread-local data takes about 22 KiB of
 * it): its calls run the call path (binding, the shape function, messages)
 * on a spare stack and the kernel on the engine's; errors come back as
 * usual, and the next call works. */
static void *on_tiny_thread(void *unused)
{
    (void)unused;
    bool ok = true;
    for (int i = 0; i < 3; i++) ok = ok && !kernel_ran_here() && deep(10) == OC_OK;
    /* an error comes back as usual, and the next call works */
    float one = 1;
    int64_t got = 0;
    oc_tensor x, out, meta;
    oc_tensor_init(&x, &one, OC_FLOAT32, 1, (int64_t[]){1});
    oc_tensor_init(&out, &got, OC_INT64, 1, (int64_t[]){1});
    oc_value args[] = {oc_value_tensor(&x), oc_value_int(10)};
    ok = ok && oc_op_call(test_op("kstack::deep"), args, 1, &out) == OC_EINVAL &&
         strstr(oc_errmsg(), "kstack::deep") != NULL;
    ok = ok && oc_op_infer(test_op("kstack::deep"), args, 2, &meta) == OC_OK && meta.dtype == OC_INT64;
    oc_call *call = NULL;
    ok = ok && oc_call_prepare(test_op("kstack::deep"), args, 2, &out, NULL, &call) == OC_OK;
    ok = ok && oc_call_run(call, (void *[]){&one, &got}) == OC_OK && got == deep_sum(10);
    oc_call_free(call);
    return (void *)(intptr_t)(ok && deep(10) == OC_OK);
}

static void test_tiny_thread_stacks(void **state)
{
    (void)state;
    for (size_t kib = 64; kib <= 128; kib *= 2) {
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, kib * 1024);
        pthread_t t;
        void *ok;
        assert_int_equal(pthread_create(&t, &a, on_tiny_thread, NULL), 0);
        pthread_attr_destroy(&a);
        assert_int_equal(pthread_join(t, &ok), 0);
        if (!(intptr_t)ok) fail_msg("a thread with a %zu KiB stack: %s", kib, oc_errmsg());
    }
}

static void test_engine_stack_when_asked(void **state)
{
    (void)state;
    setenv("OC_KERNEL_STACK", "1", 1); /* read at the first kernel call of this process */
    assert_false(kernel_ran_here());
    if (overflow_ok(false)) {
        assert_int_equal(deep(1 << 20), OC_ESTACK);
        assert_non_null(strstr(oc_errmsg(), "stack overflow: it needs more than its stack of"));
    }
    assert_int_equal(deep(10), OC_OK);
}

static void test_overflow_on_the_calling_threads_stack(void **state)
{
    (void)state;
    assert_int_equal(deep(500), OC_OK); /* about 150 KiB: within its stack size */
    if (overflow_ok(true)) {
        assert_int_equal(deep(1 << 20), OC_ESTACK); /* 256 MiB: past the thread's stack */
        assert_non_null(strstr(oc_errmsg(), "kstack::deep"));
        assert_non_null(strstr(oc_errmsg(), "stack overflow: it needs more than the calling thread's stack"));
    }
    assert_int_equal(deep(10), OC_OK);
    assert_true(kernel_ran_here() || !in_place_expected());
}

/* An op whose stack cannot be mapped (here: an address-space limit below
 * its 1 GiB) fails naming the op and the stack; its kernel never ran, so
 * there is no result to hand back. The next call works. */
static void test_unmappable_stack_fails_the_call(void **state)
{
    (void)state;
    if (getenv("OC_UNDER_VALGRIND")) skip(); /* valgrind keeps its own address-space limits */
    assert_int_equal(deep(10), OC_OK);
    struct rlimit r;
    assert_int_equal(getrlimit(RLIMIT_AS, &r), 0);
    r.rlim_cur = (rlim_t)768 << 20; /* leaves room for the rest, not for 1 GiB */
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    r.rlim_cur += (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
    assert_int_equal(setrlimit(RLIMIT_AS, &r), 0);
    const char *ops[] = {"kstack::huge", "kstack::huge_mc"};
    for (int i = 0; i < 2; i++) {
        float one = 1;
        int64_t got = -1;
        oc_tensor x, out;
        oc_tensor_init(&x, &one, OC_FLOAT32, 1, (int64_t[]){1});
        oc_tensor_init(&out, &got, OC_INT64, 1, (int64_t[]){1});
        oc_value args[] = {oc_value_tensor(&x)};
        assert_int_equal(oc_op_call(test_op(ops[i]), args, 1, &out), OC_ENOMEM);
        assert_non_null(strstr(oc_errmsg(), ops[i]));
        assert_non_null(strstr(oc_errmsg(), "cannot map a kernel stack"));
        assert_int_equal(got, -1);
        assert_int_equal(deep(10), OC_OK);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_on_the_calling_threads_stack),
        cmocka_unit_test(test_small_thread_stacks_use_the_engines),
        cmocka_unit_test(test_tiny_thread_stacks),
        cmocka_unit_test(test_unmappable_stack_fails_the_call),
        cmocka_unit_test(test_engine_stack_when_asked),
        cmocka_unit_test(test_overflow_on_the_calling_threads_stack),
    };
    return oc_test_run("kernel_stack", tests, setup, teardown);
}
