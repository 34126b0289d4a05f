/* Out of memory: a test allocator (oc_replace_allocator) fails the Nth
 * allocation opcore makes, for N = 0, 1, 2, ... until the operation no
 * longer reaches an Nth allocation, on the call path, the registry (loading
 * a library, which registers its ops) and the build tool. Each failure must
 * end the operation with OC_ENOMEM and a message, leave no allocation
 * behind (the allocator counts allocations minus frees; ASan's and
 * valgrind's leak checks see the rest), and the same operation must then
 * work again. Every test installs the allocator first thing in its own
 * process (the runner forks one per test). OC_OOM_TRACE=1 prints the stack
 * of each allocation made to fail. */
#include <execinfo.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opcore/alloc.h"
#include "opcore/build.h"
#include "opcore/engine.h"
#include "opcore/host.h"
#include "support/oplib.h"
#include "support/runner.h"

/* ---- the failing, counting allocator ---- */

static atomic_long live;          /* allocations not freed yet */
static atomic_long made;          /* allocations asked for since armed */
static atomic_long fail_index = -1; /* which of those fails; -1: none */
static atomic_bool failed;        /* the armed failure happened */

static void *trace[16];

static bool fail_this_one(void)
{
    if (atomic_fetch_add(&made, 1) != atomic_load(&fail_index)) return false;
    atomic_store(&failed, true);
    if (getenv("OC_OOM_TRACE")) backtrace_symbols_fd(trace, backtrace(trace, 16), 2);
    return true;
}

static void *oom_malloc(size_t n)
{
    if (fail_this_one()) return NULL;
    void *p = malloc(n);
    if (p) atomic_fetch_add(&live, 1);
    return p;
}

static void *oom_calloc(size_t count, size_t n)
{
    if (fail_this_one()) return NULL;
    void *p = calloc(count, n);
    if (p) atomic_fetch_add(&live, 1);
    return p;
}

static void *oom_realloc(void *old, size_t n)
{
    if (fail_this_one()) return NULL; /* like realloc: `old` stays valid */
    void *p = realloc(old, n);
    if (!old && p) atomic_fetch_add(&live, 1);
    if (old && !p && n == 0) atomic_fetch_sub(&live, 1); /* glibc's realloc(p, 0) frees */
    return p;
}

static void oom_free(void *p)
{
    if (p) atomic_fetch_sub(&live, 1);
    free(p);
}

static void arm(long index)
{
    atomic_store(&made, 0);
    atomic_store(&failed, false);
    atomic_store(&fail_index, index);
}

static void disarm(void)
{
    atomic_store(&fail_index, -1);
}

static int install_allocator(void **state)
{
    (void)state;
    assert_int_equal(oc_replace_allocator(oom_malloc, oom_realloc, oom_calloc, oom_free), OC_OK);
    return 0;
}

/* ---- the driver ---- */

typedef struct oom_case {
    const char *what;
    oc_status (*run)(struct oom_case *c); /* the operation */
    void (*undo)(struct oom_case *c);     /* after it succeeded: release what it made */
    void (*reset)(void);                  /* or NULL: after every run, back to the start state */
    long stride;                          /* fail allocation 0, stride, 2 * stride, ... (0: 1) */
    const char *path;                     /* a library, for the cases that need one */
    oc_library *lib;
    const oc_op *op;
    oc_tensor *out;
    oc_build_result built;
} oom_case;

/* Runs c->run once failing allocation 0, once failing allocation 1, ...
 * (or every c->stride-th) until a run makes fewer allocations than the
 * index armed; returns that index. */
static long drive(oom_case *c)
{
    for (long n = 0;; n += c->stride > 0 ? c->stride : 1) {
        long before = atomic_load(&live);
        arm(n);
        oc_status st = c->run(c);
        disarm();
        if (!atomic_load(&failed)) {
            if (st != OC_OK) fail_msg("%s: failed without a failing allocation: %s", c->what, oc_errmsg());
            c->undo(c);
            if (c->reset) c->reset();
            return n;
        }
        if (st != OC_ENOMEM)
            fail_msg("%s, allocation %ld failing: got %s (\"%s\"), want OC_ENOMEM", c->what, n,
                     oc_status_name(st), oc_errmsg());
        if (!oc_errmsg()[0]) fail_msg("%s, allocation %ld failing: OC_ENOMEM without a message", c->what, n);
        if (c->reset) c->reset();
        long after = atomic_load(&live);
        if (after != before)
            fail_msg("%s, allocation %ld failing: %ld allocation(s) left behind (%s)", c->what, n, after - before,
                     oc_errmsg());
        /* the allocator works again: so does the operation */
        st = c->run(c);
        if (st != OC_OK) fail_msg("%s after allocation %ld failed: %s", c->what, n, oc_errmsg());
        c->undo(c);
        if (c->reset) c->reset();
        if (atomic_load(&live) != before)
            fail_msg("%s after allocation %ld failed: %ld allocation(s) left behind", c->what, n,
                     atomic_load(&live) - before);
    }
}

/* ---- what is driven ---- */

static const char *ops_shape_fmt = /* printf: the library's name */
    "#include <opcore/library.h>\n"
    "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
    "static oc_tensor *same_k(const oc_tensor *x, double k) { (void)k; return oc_empty_like(x); }\n"
    "OC_LIBRARY(%s, m) {\n"
    "  oc_def(m, \"scale(Tensor x, float k=2.0) -> Tensor\", same_k, \"scale\");\n"
    "  oc_def(m, \"with_temps(Tensor x) -> Tensor\", same, \"with_temps\");\n"
    "}\n";
static const char *ops_compute =
    "#include <opcore/kernel.h>\n"
    "oc_tensor *scale(const oc_tensor *x, double k) {\n"
    "  oc_tensor *o = oc_dst_tensor(); oc_cacc in = oc_accessor(x, OC_FLOAT32, 1);\n"
    "  oc_acc out = oc_accessor(o, OC_FLOAT32, 1);\n"
    "  for (int64_t i = 0; i < x->sizes[0]; i++) OC_AT(out, float, i) = (float)k * OC_AT(in, float, i);\n"
    "  return o; }\n"
    "oc_tensor *with_temps(const oc_tensor *x) {\n"
    "  oc_tensor *t = oc_zeros_like(x); oc_tensor *u = oc_add(t, x, 1.0);\n"
    "  return oc_copy_(oc_dst_tensor(), u); }\n";

static float xs[16];
static oc_tensor x;

static oc_status call_op(oom_case *c)
{
    oc_value a[] = {oc_value_tensor(&x)};
    c->out = NULL;
    return oc_op_invoke(c->op, a, 1, &c->out);
}

static void check_and_free_out(oom_case *c)
{
    const float *y = c->out->data;
    for (int i = 0; i < 16; i++) assert_true(y[i] == 2.0f * xs[i] || (strstr(c->what, "temps") && y[i] == xs[i]));
    oc_tensor_free(c->out);
    c->out = NULL;
}

/* Builds the ops above as library `name`. */
static oom_case load_ops(const char *name, bool multicore)
{
    for (int i = 0; i < 16; i++) xs[i] = (float)i - 7.5f;
    oc_tensor_init(&x, xs, OC_FLOAT32, 1, (int64_t[]){16});
    char shape[2048];
    snprintf(shape, sizeof shape, ops_shape_fmt, name);
    oc_status st;
    const char *path = test_build(name, ops_compute, shape, (test_lib_options){.multicore = multicore}, &st);
    if (!path) fail_msg("building %s: %s", name, oc_errmsg());
    return (oom_case){.path = path};
}

static void drive_call(const char *qualname, const char *what)
{
    oom_case c = load_ops("oomops", false);
    c.lib = test_load(c.path);
    c.op = oc_op_find(qualname);
    assert_non_null(c.op);
    c.what = what;
    c.run = call_op;
    c.undo = check_and_free_out;
    /* A first call starts the engine: its lasting allocations are not the call's. */
    assert_int_equal(call_op(&c), OC_OK);
    check_and_free_out(&c);
    long n = drive(&c);
    print_message("%s: %ld allocations, each failed once\n", what, n);
    assert_true(n > 0);
    oc_library_unload(c.lib);
}

static void test_call(void **state)
{
    (void)state;
    drive_call("oomops::scale", "oc_op_invoke(oomops::scale)");
}

static void test_call_kernel_temporaries(void **state)
{
    (void)state;
    drive_call("oomops::with_temps", "oc_op_invoke(oomops::with_temps)");
}

/* The first call of a process (or after oc_engine_shutdown) starts the
 * engine: its cores, their TCM and signal stacks, the worker threads. */
static void test_first_call_starts_engine(void **state)
{
    (void)state;
    oom_case c = load_ops("oommc", true); /* a multicore op starts the worker cores */
    c.lib = test_load(c.path);
    c.op = oc_op_find("oommc::scale");
    c.what = "first oc_op_invoke (engine start)";
    c.run = call_op;
    c.undo = check_and_free_out;
    c.reset = oc_engine_shutdown;
    /* the calling thread's own core outlives the engine: made once, here */
    assert_int_equal(call_op(&c), OC_OK);
    check_and_free_out(&c);
    oc_engine_shutdown();
    long n = drive(&c);
    print_message("%s: %ld allocations, each failed once\n", c.what, n);
    assert_true(n > 1); /* more than the call's result */
    oc_library_unload(c.lib);
}

static oc_status load_lib(oom_case *c)
{
    c->lib = NULL;
    return oc_library_load(c->path, &c->lib);
}

static void unload_lib(oom_case *c)
{
    assert_non_null(oc_op_find("oomops::scale"));
    assert_int_equal(oc_library_unload(c->lib), OC_OK);
    assert_null(oc_op_find("oomops::scale"));
}

static void test_library_load(void **state)
{
    (void)state;
    oom_case c = load_ops("oomops", false);
    c.what = "oc_library_load (registering its ops)";
    c.run = load_lib;
    c.undo = unload_lib;
    assert_int_equal(load_lib(&c), OC_OK); /* the first load starts the engine */
    unload_lib(&c);
    long n = drive(&c);
    print_message("%s: %ld allocations, each failed once\n", c.what, n);
    assert_true(n > 0);
}

static oc_build_options build_opts;

static oc_status build(oom_case *c)
{
    return oc_build(&build_opts, &c->built);
}

static void built_ok(oom_case *c)
{
    assert_true(c->built.path[0] != '\0');
    free(c->built.vec_report);
}

static void setup_build_opts(const char *name, const char **compute, const char **shape)
{
    static char out[512];
    snprintf(out, sizeof out, "%s/%s", test_tmpdir(), name);
    build_opts = (oc_build_options){.name = name, .compute_srcs = compute, .num_compute_srcs = 1,
                                    .shape_srcs = shape, .num_shape_srcs = 1, .out_dir = out};
}

/* A build whose output is up to date: the options, the sources' and the
 * compiler's hashes, the stamp. */
static void test_build_cached(void **state)
{
    (void)state;
    static const char *compute[1], *shape[1];
    compute[0] = test_path(test_tmpdir(), "oomc_compute.c");
    shape[0] = test_path(test_tmpdir(), "oomc_shape.c");
    test_write_file(compute[0], ops_compute);
    char text[2048];
    snprintf(text, sizeof text, ops_shape_fmt, "oomops");
    test_write_file(shape[0], text);
    setup_build_opts("oomops", compute, shape);
    oom_case c = {.what = "oc_build (cached)", .run = build, .undo = built_ok};
    assert_int_equal(build(&c), OC_OK);
    built_ok(&c);
    assert_int_equal(build(&c), OC_OK);
    assert_true(c.built.cached);
    built_ok(&c);
    long n = drive(&c);
    print_message("%s: %ld allocations, each failed once\n", c.what, n);
    assert_true(n > 0);
}

/* A build that compiles (force: the cache is not consulted): options,
 * hashing, the compiler jobs, loading the library to learn its ops, the
 * prototype check, the stamp. About 300 allocations, and a failure after
 * the compiler ran costs a compile and a rebuild: every 23rd fails here
 * (a prime, so successive runs of the suite's changes land on other
 * sites), every one with OC_OOM_BUILD_STRIDE=1 (some ten minutes). */
static void test_build_fresh(void **state)
{
    (void)state;
    static const char *compute[1], *shape[1];
    compute[0] = test_path(test_tmpdir(), "oomf_compute.c");
    shape[0] = test_path(test_tmpdir(), "oomf_shape.c");
    test_write_file(compute[0], ops_compute);
    char text[2048];
    snprintf(text, sizeof text, ops_shape_fmt, "oomfresh");
    test_write_file(shape[0], text);
    setup_build_opts("oomfresh", compute, shape);
    build_opts.force = true;
    const char *stride = getenv("OC_OOM_BUILD_STRIDE");
    oom_case c = {.what = "oc_build (compiling)", .run = build, .undo = built_ok,
                  .stride = stride && atol(stride) > 0 ? atol(stride) : 23};
    assert_int_equal(build(&c), OC_OK);
    assert_false(c.built.cached);
    built_ok(&c);
    long n = drive(&c);
    print_message("%s: about %ld allocations, every %ld-th failed once\n", c.what, n, c.stride);
    assert_true(n > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_call, install_allocator),
        cmocka_unit_test_setup(test_call_kernel_temporaries, install_allocator),
        cmocka_unit_test_setup(test_first_call_starts_engine, install_allocator),
        cmocka_unit_test_setup(test_library_load, install_allocator),
        cmocka_unit_test_setup(test_build_cached, install_allocator),
        cmocka_unit_test_setup(test_build_fresh, install_allocator),
    };
    atexit(oc_engine_shutdown); /* in each test's process */
    return oc_test_run("oom", tests, NULL, NULL);
}
