/* Engine and call-path tests: every ReLU variant, multicore, each failure
 * turned into an error (check, fault, stack overflow, shape mismatch),
 * TCM, streams and coherence, printf, and calls from many threads. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/engine.h"
#include "opcore/host.h"
#include "opcore/tensor_ops.h"
#include "support/oplib.h"

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    s[fread(s, 1, (size_t)n, f)] = '\0';
    fclose(f);
    return s;
}

/* Load examples/relu/<variant> under a library name of its own. */
static oc_library *load_relu_variant(const char *variant, const char *libname, bool multicore)
{
    char rel[256];
    snprintf(rel, sizeof rel, "examples/relu/%s/relu.c", variant);
    char *compute = read_text(test_repo_path(rel));
    char *shape = read_text(test_repo_path("examples/relu/shape.c"));
    char *renamed = malloc(strlen(shape) + 64);
    char *at = strstr(shape, "OC_LIBRARY(my_ops");
    assert_non_null(at);
    sprintf(renamed, "%.*sOC_LIBRARY(%s%s", (int)(at - shape), shape, libname, at + strlen("OC_LIBRARY(my_ops"));
    oc_library *lib = test_build_and_load(libname, compute, renamed,
                                          (test_lib_options){.multicore = multicore});
    free(compute);
    free(shape);
    free(renamed);
    return lib;
}

static void check_relu(const char *qual_fwd, const char *qual_bwd, int64_t rows, int64_t cols)
{
    const oc_op *fwd = oc_op_find(qual_fwd), *bwd = oc_op_find(qual_bwd);
    assert_non_null(fwd);
    assert_non_null(bwd);
    int64_t n = rows * cols;
    float *x = malloc((size_t)(n ? n : 1) * sizeof *x), *g = malloc((size_t)(n ? n : 1) * sizeof *g);
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)((i * 7919) % 201 - 100) / 10.0f;
        g[i] = (float)(i % 13) - 6.0f;
    }
    oc_tensor xt, gt, *y = NULL, *dx = NULL;
    oc_tensor_init(&xt, x, OC_FLOAT32, 2, (int64_t[]){rows, cols});
    oc_tensor_init(&gt, g, OC_FLOAT32, 2, (int64_t[]){rows, cols});
    oc_value a[] = {oc_value_tensor(&xt)};
    oc_value b[] = {oc_value_tensor(&gt), oc_value_tensor(&xt)};
    assert_int_equal(oc_op_invoke(fwd, a, 1, &y), OC_OK);
    assert_int_equal(oc_op_invoke(bwd, b, 2, &dx), OC_OK);
    const float *yd = y->data, *dd = dx->data;
    for (int64_t i = 0; i < n; i++) {
        assert_true(yd[i] == (x[i] > 0 ? x[i] : 0.0f));
        assert_true(dd[i] == (x[i] > 0 ? g[i] : 0.0f));
    }
    oc_tensor_free(y);
    oc_tensor_free(dx);
    free(x);
    free(g);
}

static void test_relu_variants(void **state)
{
    (void)state;
    static const char *variants[] = {"elementwise", "stream", "tcm", "multicore"};
    for (int v = 0; v < 4; v++) {
        char lib[64], f[128], b[128];
        snprintf(lib, sizeof lib, "relu_%s", variants[v]);
        oc_library *l = load_relu_variant(variants[v], lib, v == 3);
        snprintf(f, sizeof f, "%s::relu_forward", lib);
        snprintf(b, sizeof b, "%s::relu_backward", lib);
        const int64_t shapes[][2] = {{1, 1}, {3, 5}, {32, 120}, {7, 4099}, {0, 4}};
        for (int s = 0; s < 5; s++) check_relu(f, b, shapes[s][0], shapes[s][1]);
        assert_int_equal(oc_library_unload(l), OC_OK);
    }
}

static const char *mc_shape =
    "#include <opcore/library.h>\n"
    "static oc_tensor *ids_shape(const oc_tensor *x) { return oc_empty(OC_INT32, OC_SHAPE(64)); (void)x; }\n"
    "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
    "static oc_tensor *same2(const oc_tensor *x, int64_t core) { (void)core; return oc_empty_like(x); }\n"
    "OC_LIBRARY(mc, m) {\n"
    "  oc_def(m, \"ids(Tensor x) -> Tensor\", ids_shape, \"ids\");\n"
    "  oc_def(m, \"empty(Tensor x) -> Tensor\", same, \"empty_kernel\");\n"
    "  oc_def(m, \"fault_on(Tensor x, int core) -> Tensor\", same2, \"fault_on\");\n"
    "  oc_def(m, \"streams(Tensor x) -> Tensor\", same, \"streams\");\n"
    "}\n";
static const char *mc_compute =
    "#include <opcore/kernel.h>\n"
    "oc_tensor *ids(const oc_tensor *x) {\n"
    "  (void)x; oc_tensor *o = oc_dst_tensor(); int32_t *d = o->data;\n"
    "  int64_t lo, hi; oc_core_range(64, 1, &lo, &hi);\n"
    "  for (int64_t i = lo; i < hi; i++) d[i] = (int32_t)(oc_cpu_id() * 1000 + oc_cpu_count());\n"
    "  printf(\"core %u of %u says hello\\n\", oc_cpu_id(), oc_cpu_count());\n"
    "  return o; }\n"
    "oc_tensor *empty_kernel(const oc_tensor *x) { (void)x; return oc_dst_tensor(); }\n"
    "oc_tensor *fault_on(const oc_tensor *x, int64_t core) {\n"
    "  if ((int64_t)oc_cpu_id() == core) { volatile int *p = NULL; *p = 1; }\n"
    "  (void)x; return oc_dst_tensor(); }\n"
    /* every core streams its own share: streams are allowed in multicore */
    "oc_tensor *streams(const oc_tensor *x) {\n"
    "  oc_tensor *o = oc_dst_tensor(); int64_t lo, hi; oc_core_range(oc_numel(x), 1, &lo, &hi);\n"
    "  oc_stream *r = oc_read_stream_range(x, lo, hi - lo), *w = oc_write_stream_range(o, lo, hi - lo);\n"
    "  for (int64_t i = lo; i < hi; i++) OC_STREAM_WRITE(w, float, 2.0f * OC_STREAM_READ(r, float));\n"
    "  oc_stream_close(r); oc_stream_close(w); return o; }\n";

static void test_multicore_model(void **state)
{
    (void)state;
    oc_library *lib = test_build_and_load("mc", mc_compute, mc_shape, (test_lib_options){.multicore = true});
    uint32_t n = oc_engine_num_cores();
    assert_true(n >= 1);
    float xv[1000];
    for (int i = 0; i < 1000; i++) xv[i] = (float)i;
    oc_tensor x, *y;
    oc_tensor_init(&x, xv, OC_FLOAT32, 1, (int64_t[]){1000});
    oc_value a[] = {oc_value_tensor(&x), oc_value_int(-1)};

    assert_int_equal(oc_op_invoke(oc_op_find("mc::ids"), a, 1, &y), OC_OK);
    const int32_t *ids = y->data;
    int seen[64] = {0};
    for (int i = 0; i < 64; i++) {
        assert_int_equal(ids[i] % 1000, (int)n);        /* oc_cpu_count */
        seen[ids[i] / 1000] = 1;                        /* oc_cpu_id */
    }
    for (uint32_t c = 0; c < n && c < 64; c++) assert_true(seen[c]);
    oc_tensor_free(y);

    assert_int_equal(oc_op_invoke(oc_op_find("mc::streams"), a, 1, &y), OC_OK);
    for (int i = 0; i < 1000; i++) assert_true(((float *)y->data)[i] == 2.0f * (float)i);
    oc_tensor_free(y);

    /* A fault on a worker core names that core; the engine keeps serving. */
    if (n > 1 && !getenv("OC_UNDER_VALGRIND")) {
        a[1] = oc_value_int(n - 1);
        assert_int_equal(oc_op_invoke(oc_op_find("mc::fault_on"), a, 2, &y), OC_EFAULT);
        char want[64];
        snprintf(want, sizeof want, "on core %u", n - 1);
        assert_non_null(strstr(oc_errmsg(), want));
        assert_non_null(strstr(oc_errmsg(), "mc::fault_on"));
    }
    for (int k = 0; k < 1000; k++) {
        assert_int_equal(oc_op_invoke(oc_op_find("mc::empty"), a, 1, &y), OC_OK);
        oc_tensor_free(y);
    }
    oc_library_unload(lib);
}

/* A launch whose caller waited over OC_STRAGGLER_US for a worker's share
 * (the worker descheduled) makes the next launches, for a while, run on the
 * caller alone: oc_cpu_count() is 1. OC_STRAGGLER_US=0 turns that off.
 * The shares order themselves instead of racing a clock: the caller's share
 * waits until a worker has taken one, and a worker's share then runs 50 ms
 * plus three times the caller's share after the caller's has finished, so
 * the caller waits more than 1 ms and more than twice its own share at any
 * machine speed or load. */
static const char *straggle_shape =
    "#include <opcore/library.h>\n"
    "static oc_tensor *counts(int64_t caller, int64_t launch) {\n"
    "  (void)caller; (void)launch; return oc_empty(OC_INT32, OC_SHAPE(65)); }\n"
    "OC_LIBRARY(straggle, m) {\n"
    "  oc_def(m, \"straggle(int caller, int launch) -> Tensor\", counts, \"straggle\",\n"
    "         .multicore = true);\n"
    "}\n";
static const char *straggle_compute =
    "#include <pthread.h>\n"
    "#include <sched.h>\n"
    "#include <stdatomic.h>\n"
    "#include <time.h>\n"
    "#include <opcore/kernel.h>\n"
    "static _Atomic int64_t worker_began, caller_done, caller_took;\n"
    "static int64_t now(void) {\n"
    "  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);\n"
    "  return t.tv_sec * 1000000000LL + t.tv_nsec; }\n"
    "static void wait_for(_Atomic int64_t *flag, int64_t launch) {\n"
    "  for (int64_t end = now() + 5000000000LL; atomic_load(flag) != launch && now() < end;)\n"
    "    sched_yield(); }\n"
    "oc_tensor *straggle(int64_t caller, int64_t launch) {\n"
    "  int32_t *d = oc_dst_tensor()->data;\n"
    "  bool worker = (int64_t)pthread_self() != caller;\n"
    "  if (oc_cpu_count() > 1 && worker) {\n"
    "    atomic_store(&worker_began, launch);\n"
    "    wait_for(&caller_done, launch);\n"
    "    for (int64_t end = now() + 50000000 + 3 * atomic_load(&caller_took); now() < end;) {}\n"
    "  } else if (oc_cpu_count() > 1 && atomic_load(&caller_done) != launch) {\n"
    "    int64_t t0 = now();\n"
    "    wait_for(&worker_began, launch);\n"
    "    atomic_store(&caller_took, now() - t0);\n"
    "    atomic_store(&caller_done, launch);\n"
    "  }\n"
    "  if (oc_cpu_id() < 64) d[1 + oc_cpu_id()] = worker;\n" /* each share its own slot: results are not zeroed */
    "  if (oc_cpu_id() == 0) d[0] = (int32_t)oc_cpu_count();\n"
    "  return oc_dst_tensor(); }\n";

/* For each of up to `tries` launches in which a worker took a share:
 * oc_cpu_count() of the launch right after it. Returns the first count
 * equal to `want`, else the last count seen (0: no worker ever took a
 * share). A try can miss the solo window only if this thread is descheduled
 * for longer than it lasts (10 ms, doubled for a straggler right after one):
 * the next try catches it. */
static int count_after_straggler(int want, int tries)
{
    oc_library *lib = test_build_and_load("straggle", straggle_compute, straggle_shape,
                                          (test_lib_options){.multicore = true});
    static int64_t launch;
    int after = 0;
    for (int i = 0; i < tries && after != want; i++) {
        oc_value a[] = {oc_value_int((int64_t)pthread_self()), oc_value_int(++launch)};
        oc_tensor *y;
        assert_int_equal(oc_op_invoke(oc_op_find("straggle::straggle"), a, 2, &y), OC_OK);
        const int32_t *d = y->data;
        bool worker_ran = false; /* a worker took a share (and straggled) */
        for (int c = 0; c < d[0] && c < 64; c++) worker_ran |= d[1 + c] != 0;
        oc_tensor_free(y);
        if (!worker_ran) continue;
        a[1] = oc_value_int(++launch);
        assert_int_equal(oc_op_invoke(oc_op_find("straggle::straggle"), a, 2, &y), OC_OK);
        after = ((int32_t *)y->data)[0];
        oc_tensor_free(y);
    }
    oc_library_unload(lib);
    return after;
}

static void test_straggler_makes_launches_run_solo(void **state)
{
    (void)state;
    if (oc_engine_num_cores() < 2 || getenv("OC_UNDER_VALGRIND")) skip(); /* one core: nothing to wait for */
    oc_engine_shutdown();
    setenv("OC_STRAGGLER_US", "1000", 1);
    assert_int_equal(count_after_straggler(1, 10), 1);
    oc_engine_shutdown();
    setenv("OC_STRAGGLER_US", "0", 1);
    assert_int_equal(count_after_straggler(-1, 1), (int)oc_engine_num_cores()); /* never solo */
}

/* A multicore kernel returns oc_dst_tensor() or NULL: a tensor a share made
 * itself would be that core's values at best (garbage elsewhere). */
static const char *own_shape =
    "#include <opcore/library.h>\n"
    "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
    "OC_LIBRARY(mc_own, m) {\n"
    "  oc_def(m, \"own(Tensor x) -> Tensor\", same, \"own\");\n"
    "  oc_def(m, \"null_ret(Tensor x) -> Tensor\", same, \"null_ret\");\n"
    "  oc_def(m, \"null_some(Tensor x) -> Tensor\", same, \"null_some\");\n"
    "}\n";
static const char *own_compute =
    "#include <opcore/kernel.h>\n"
    "oc_tensor *own(const oc_tensor *x) { return oc_empty_like(x); }\n"
    "oc_tensor *null_ret(const oc_tensor *x) {\n"
    "  float *o = oc_dst_tensor()->data; int64_t lo, hi; oc_core_range(oc_numel(x), 1, &lo, &hi);\n"
    "  for (int64_t i = lo; i < hi; i++) o[i] = 3.0f;\n"
    "  return NULL; }\n"
    "oc_tensor *null_some(const oc_tensor *x) {\n" /* core 1 skips its share */
    "  if (oc_cpu_id() == 1) return NULL;\n"
    "  float *o = oc_dst_tensor()->data; int64_t lo, hi; oc_core_range(oc_numel(x), 1, &lo, &hi);\n"
    "  for (int64_t i = lo; i < hi; i++) o[i] = 3.0f;\n"
    "  return oc_dst_tensor(); }\n";

static void test_multicore_kernel_returning_its_own_tensor_is_an_error(void **state)
{
    (void)state;
    test_use_every_core(); /* the 4096 elements below split over the cores */
    oc_library *lib = test_build_and_load("mc_own", own_compute, own_shape, (test_lib_options){.multicore = true});
    float xv[4096] = {0};
    oc_tensor x, *y = NULL;
    oc_tensor_init(&x, xv, OC_FLOAT32, 1, (int64_t[]){4096});
    oc_value a[] = {oc_value_tensor(&x)};
    assert_int_equal(oc_op_invoke(oc_op_find("mc_own::own"), a, 1, &y), OC_EKERNEL);
    assert_null(y);
    assert_non_null(strstr(oc_errmsg(), "op 'mc_own::own': multicore kernel 'own' on core"));
    assert_non_null(strstr(oc_errmsg(), "returned a tensor other than oc_dst_tensor()"));
    /* NULL is fine: the result is what the cores wrote */
    assert_int_equal(oc_op_invoke(oc_op_find("mc_own::null_ret"), a, 1, &y), OC_OK);
    for (int i = 0; i < 4096; i++) assert_true(((float *)y->data)[i] == 3.0f);
    oc_tensor_free(y);
    y = NULL;
    /* NULL from some cores and the result from others: a core may have
     * skipped its share, so the launch fails (with one core, nothing to
     * compare: the result is right) */
    oc_status st = oc_op_invoke(oc_op_find("mc_own::null_some"), a, 1, &y);
    if (oc_engine_num_cores() > 1) {
        assert_int_equal(st, OC_EKERNEL);
        assert_null(y);
        test_assert_contains(oc_errmsg(), "op 'mc_own::null_some': kernel 'null_some' returned "
                             "oc_dst_tensor() on some cores and NULL on core 1");
    } else {
        assert_int_equal(st, OC_OK);
        oc_tensor_free(y);
    }
    assert_int_equal(oc_op_invoke(oc_op_find("mc_own::null_ret"), a, 1, &y), OC_OK); /* the next call */
    for (int i = 0; i < 4096; i++) assert_true(((float *)y->data)[i] == 3.0f);
    oc_tensor_free(y);
    oc_library_unload(lib);
}

static const char *err_shape =
    "#include <opcore/library.h>\n"
    "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
    "static oc_tensor *touch(const oc_tensor *x) { volatile float v = *(volatile float *)x->data; (void)v; return oc_empty_like(x); }\n"
    "static oc_tensor *checks(const oc_tensor *x) { OC_CHECK(x->ndim == 1, \"want 1-D, got %d dims\", x->ndim); return oc_empty_like(x); }\n"
    "static oc_tensor *nullshape(const oc_tensor *x) { (void)x; return NULL; }\n"
    "static oc_tensor *deep_shape(const oc_tensor *x, int64_t depth) { (void)depth; return oc_empty_like(x); }\n"
    "OC_LIBRARY(errs, m) {\n"
    "  oc_def(m, \"check_fails(Tensor x) -> Tensor\", same, \"check_fails\");\n"
    "  oc_def(m, \"segv(Tensor x) -> Tensor\", same, \"segv\");\n"
    "  oc_def(m, \"fpe(Tensor x) -> Tensor\", same, \"fpe\");\n"
    "  oc_def(m, \"deep(Tensor x, int depth) -> Tensor\", deep_shape, \"deep\");\n"
    "  oc_def(m, \"wrong_shape(Tensor x) -> Tensor\", same, \"wrong_shape\");\n"
    "  oc_def(m, \"returns_null(Tensor x) -> Tensor\", same, \"returns_null\");\n"
    "  oc_def(m, \"shape_touches(Tensor x) -> Tensor\", touch, \"ok_kernel\");\n"
    "  oc_def(m, \"shape_checks(Tensor x) -> Tensor\", checks, \"ok_kernel\");\n"
    "  oc_def(m, \"shape_null(Tensor x) -> Tensor\", nullshape, \"ok_kernel\");\n"
    "  oc_def(m, \"ok(Tensor x) -> Tensor\", same, \"ok_kernel\");\n"
    "  oc_def(m, \"tcm_abuse(Tensor x, int how) -> Tensor\", deep_shape, \"tcm_abuse\");\n"
    "  oc_def(m, \"coherence(Tensor x, int policy) -> Tensor\", deep_shape, \"coherence\");\n"
    "  oc_def(m, \"leaky(Tensor x) -> Tensor\", same, \"leaky\");\n"
    "}\n";
static const char *err_compute =
    "#include <opcore/kernel.h>\n"
    "oc_tensor *check_fails(const oc_tensor *x) { OC_CHECK(x->ndim == 7, \"need 7 dims, got %d\", x->ndim); return NULL; }\n"
    "oc_tensor *segv(const oc_tensor *x) { (void)x; volatile float *p = (float *)16; *p = 1; return oc_dst_tensor(); }\n"
    "oc_tensor *fpe(const oc_tensor *x) { volatile int64_t z = 0; volatile int64_t v = oc_numel(x) / z; (void)v; return oc_dst_tensor(); }\n"
    "static int64_t recurse(volatile char *prev, int64_t d) { volatile char buf[1024]; buf[0] = prev ? prev[0] : 1;\n"
    "  return d > 0 ? recurse(buf, d - 1) + buf[0] : buf[0]; }\n"
    "oc_tensor *deep(const oc_tensor *x, int64_t depth) { (void)x; volatile int64_t r = recurse(NULL, depth); (void)r; return oc_dst_tensor(); }\n"
    "oc_tensor *wrong_shape(const oc_tensor *x) { return oc_zeros(x->dtype, OC_SHAPE(3, 3)); }\n"
    "oc_tensor *returns_null(const oc_tensor *x) { (void)x; return NULL; }\n"
    "oc_tensor *ok_kernel(const oc_tensor *x) { return oc_copy_(oc_dst_tensor(), x); }\n"
    "oc_tensor *tcm_abuse(const oc_tensor *x, int64_t how) {\n"
    "  oc_tensor *o = oc_dst_tensor(); float stack_buf[4];\n"
    "  float *t = oc_tcm_malloc(64);\n"
    "  if (how == 0) oc_tensor_to_tcm(x, t, oc_numel(x) - 1, 2);\n"   /* out of range */
    "  if (how == 1) oc_tensor_to_tcm(x, stack_buf, 0, 2);\n"       /* not TCM */
    "  if (how == 2) oc_tcm_to_tensor((oc_tensor *)x, t, 0, 1);\n"  /* read-only input */
    "  if (how == 3) for (;;) oc_tcm_malloc(4096);\n"  /* fails the kernel when the TCM is full */
    "  return o; }\n"
    "oc_tensor *coherence(const oc_tensor *x, int64_t policy) {\n"
    "  oc_tensor *o = oc_dst_tensor(); oc_set_coherence(o, (oc_coherence)policy);\n"
    "  oc_stream *w = oc_write_stream(o); OC_STREAM_WRITE(w, float, 1.0f);\n"
    "  oc_stream *r = oc_read_stream(o);\n"  /* reads what the writer has not flushed */
    "  oc_stream_close(r); oc_stream_close(w); (void)x; return o; }\n"
    "oc_tensor *leaky(const oc_tensor *x) { for (int i = 0; i < 10; i++) oc_zeros_like(x); oc_tcm_malloc(100);\n"
    "  oc_stream *w = oc_write_stream(oc_dst_tensor()); (void)w; return oc_copy_(oc_dst_tensor(), x); }\n";

static oc_status call1(const char *op, const oc_tensor *x, oc_value extra, int nargs)
{
    oc_tensor *y = NULL;
    oc_value a[] = {oc_value_tensor(x), extra};
    oc_status st = oc_op_invoke(oc_op_find(op), a, nargs, &y);
    oc_tensor_free(y);
    return st;
}

static void assert_msg(const char *needle)
{
    if (!strstr(oc_errmsg(), needle)) fail_msg("expected \"%s\" in: %s", needle, oc_errmsg());
}

/* Each failure kind below is one test: the errs library is loaded around
 * it (setup/teardown), it checks the call's status and message, then that
 * the next call of a working op still succeeds. */
static oc_library *errs_lib;
static oc_tensor errs_x;
static float errs_xv[8] = {1, -2, 3, -4, 5, -6, 7, -8};

static int errs_setup(void **state)
{
    (void)state;
    errs_lib = test_build_and_load("errs", err_compute, err_shape, (test_lib_options){.stack_size = 32 * 1024});
    oc_tensor_init(&errs_x, errs_xv, OC_FLOAT32, 1, (int64_t[]){8});
    return 0;
}

static int errs_teardown(void **state)
{
    (void)state;
    oc_library_unload(errs_lib);
    errs_lib = NULL;
    return 0;
}

static void assert_next_call_works(void)
{
    assert_int_equal(call1("errs::ok", &errs_x, oc_value_int(0), 1), OC_OK);
}

/* Faults are what valgrind itself reports: those tests check nothing under it. */
static bool faults_testable(void)
{
    return !getenv("OC_UNDER_VALGRIND");
}

static void test_failed_check_is_kernel_error(void **state)
{
    (void)state;
    assert_int_equal(call1("errs::check_fails", &errs_x, oc_value_int(0), 1), OC_EKERNEL);
    assert_msg("errs::check_fails");
    assert_msg("need 7 dims, got 1");
    assert_next_call_works();
}

static void test_segfault_is_fault_error(void **state)
{
    (void)state;
    if (!faults_testable()) return;
    assert_int_equal(call1("errs::segv", &errs_x, oc_value_int(0), 1), OC_EFAULT);
    assert_msg("errs::segv");
    assert_msg("Segmentation fault");
    assert_next_call_works();
}

static void test_fpe_is_fault_error(void **state)
{
    (void)state;
    if (!faults_testable()) return;
    assert_int_equal(call1("errs::fpe", &errs_x, oc_value_int(0), 1), OC_EFAULT);
    assert_msg("Floating point exception");
    assert_next_call_works();
}

static void test_stack_overflow_is_stack_error(void **state)
{
    (void)state;
    if (!faults_testable()) return;
    assert_int_equal(call1("errs::deep", &errs_x, oc_value_int(100000), 2), OC_ESTACK);
    assert_msg("stack overflow");
    assert_msg("errs::deep");
    assert_msg("core 0");
    assert_msg("32768 bytes");
    assert_int_equal(call1("errs::deep", &errs_x, oc_value_int(10), 2), OC_OK);
}

static void test_shape_fn_touching_data_is_meta_error(void **state)
{
    (void)state;
    if (!faults_testable()) return;
    assert_int_equal(call1("errs::shape_touches", &errs_x, oc_value_int(0), 1), OC_EMETA);
    assert_msg("touched tensor data");
    assert_msg("'touch'");
    assert_next_call_works();
}

static void test_result_of_wrong_shape_is_shape_error(void **state)
{
    (void)state;
    assert_int_equal(call1("errs::wrong_shape", &errs_x, oc_value_int(0), 1), OC_ESHAPE);
    assert_msg("float32 [3, 3]");
    assert_msg("float32 [8]");
    assert_next_call_works();
}

static void test_kernel_returning_null_is_kernel_error(void **state)
{
    (void)state;
    assert_int_equal(call1("errs::returns_null", &errs_x, oc_value_int(0), 1), OC_EKERNEL);
    assert_msg("returned NULL");
    assert_next_call_works();
}

static void test_failed_shape_check_is_kernel_error(void **state)
{
    (void)state;
    assert_int_equal(call1("errs::shape_checks", &errs_x, oc_value_int(0), 1), OC_OK);
    oc_tensor x2;
    oc_tensor_init(&x2, errs_xv, OC_FLOAT32, 2, (int64_t[]){2, 4});
    assert_int_equal(call1("errs::shape_checks", &x2, oc_value_int(0), 1), OC_EKERNEL);
    assert_msg("shape function 'checks'");
    assert_msg("want 1-D, got 2 dims");
    assert_next_call_works();
}

static void test_shape_fn_returning_null_is_shape_error(void **state)
{
    (void)state;
    assert_int_equal(call1("errs::shape_null", &errs_x, oc_value_int(0), 1), OC_ESHAPE);
    assert_next_call_works();
}

static void test_tcm_copy_out_of_range_is_kernel_error(void **state)
{
    (void)state;
    assert_int_equal(call1("errs::tcm_abuse", &errs_x, oc_value_int(0), 2), OC_EKERNEL);
    assert_msg("out of range");
    assert_next_call_works();
}

static void test_tcm_copy_to_non_tcm_is_kernel_error(void **state)
{
    (void)state;
    assert_int_equal(call1("errs::tcm_abuse", &errs_x, oc_value_int(1), 2), OC_EKERNEL);
    assert_msg("not inside core 0's TCM");
    assert_next_call_works();
}

static void test_tcm_copy_into_read_only_is_kernel_error(void **state)
{
    (void)state;
    assert_int_equal(call1("errs::tcm_abuse", &errs_x, oc_value_int(2), 2), OC_EKERNEL);
    assert_msg("read-only");
    assert_next_call_works();
}

static void test_tcm_running_out_is_nomem_error(void **state)
{
    (void)state;
    assert_int_equal(call1("errs::tcm_abuse", &errs_x, oc_value_int(3), 2), OC_ENOMEM);
    assert_msg("oc_tcm_malloc: 4096 bytes asked");
    assert_msg("free of core 0's");
    assert_next_call_works();
}

static void test_stale_read_is_coherence_error(void **state)
{
    (void)state;
    assert_int_equal(call1("errs::coherence", &errs_x, oc_value_int(OC_COHERENT), 2), OC_ECOHERENCE);
    assert_msg("stale");
    assert_next_call_works();
}

static void test_incoherent_policies_allow_stale_reads(void **state)
{
    (void)state;
    assert_int_equal(call1("errs::coherence", &errs_x, oc_value_int(OC_INCOHERENT_VERBOSE), 2), OC_OK);
    assert_int_equal(call1("errs::coherence", &errs_x, oc_value_int(OC_INCOHERENT_QUIET), 2), OC_OK);
}

/* Temporaries, TCM and open streams a kernel forgets are released (ASan's
 * and valgrind's leak checks of this test's process catch leaks). */
static void test_forgotten_kernel_resources_are_released(void **state)
{
    (void)state;
    for (int i = 0; i < 100; i++) assert_int_equal(call1("errs::leaky", &errs_x, oc_value_int(0), 1), OC_OK);
}

static const char *args_shape =
    "#include <opcore/library.h>\n"
    "static oc_tensor *s(const oc_tensor *x, double a, int64_t n, bool neg, oc_scalar b) {\n"
    "  (void)a; (void)n; (void)neg; (void)b; return oc_empty_like(x); }\n"
    "static oc_tensor *big(const oc_tensor *x) { return oc_empty(OC_INT64, OC_SHAPE(1)); (void)x; }\n"
    "OC_LIBRARY(args, m) {\n"
    "  oc_def(m, \"affine(Tensor x, float a, int n=2, bool neg=False, *, Scalar b=0.5) -> Tensor\", s, \"affine\");\n"
    "  oc_def(m, \"count(Tensor x) -> Tensor\", big, NULL);\n"
    "}\n";
static const char *args_compute =
    "#include <opcore/kernel.h>\n"
    "oc_tensor *affine(const oc_tensor *x, double a, int64_t n, bool neg, oc_scalar b) {\n"
    "  oc_tensor *o = oc_dst_tensor(); oc_cacc in = oc_accessor(x, OC_FLOAT64, 1); oc_acc out = oc_accessor(o, OC_FLOAT64, 1);\n"
    "  for (int64_t i = 0; i < x->sizes[0]; i++) {\n"
    "    double v = a * OC_AT(in, double, i) * (double)n + oc_scalar_to_double(b);\n"
    "    OC_AT(out, double, i) = neg ? -v : v; }\n"
    "  return o; }\n"
    "oc_tensor *count(const oc_tensor *x) { oc_tensor *o = oc_dst_tensor(); *(int64_t *)o->data = oc_numel(x); return o; }\n";

/* The "args" library loaded; args_x = [1, 2, 3] (float64), and `all`
 * gives every argument of args::affine. */
static double args_xv[3] = {1, 2, 3};
static oc_tensor args_x;
static oc_value all[5];

static int args_setup(void **state)
{
    *state = test_build_and_load("args", args_compute, args_shape, (test_lib_options){0});
    oc_tensor_init(&args_x, args_xv, OC_FLOAT64, 1, (int64_t[]){3});
    oc_value v[] = {oc_value_tensor(&args_x), oc_value_float(0.5), oc_value_int(4), oc_value_bool(true),
                    oc_value_scalar(oc_scalar_int(3))};
    memcpy(all, v, sizeof all);
    return 0;
}

static int unload_state(void **state)
{
    if (*state) oc_library_unload(*state);
    return 0;
}

static const oc_op *affine(void)
{
    const oc_op *op = oc_op_find("args::affine");
    assert_non_null(op);
    return op;
}

static void test_argument_metadata(void **state)
{
    (void)state;
    const oc_op *op = affine();
    assert_int_equal(oc_op_num_args(op), 5);
    assert_int_equal(oc_op_arg_type(op, 4), OC_ARG_SCALAR);
    assert_string_equal(oc_op_arg_name(op, 2), "n");
    oc_value dflt;
    assert_true(oc_op_arg_default(op, 2, &dflt));
    assert_int_equal(dflt.v.i, 2);
}

static void test_argument_types(void **state)
{
    (void)state;
    oc_tensor *y;
    assert_int_equal(oc_op_invoke(affine(), all, 5, &y), OC_OK);
    for (int i = 0; i < 3; i++) assert_true(((double *)y->data)[i] == -(0.5 * args_xv[i] * 4 + 3));
    oc_tensor_free(y);
}

/* defaults fill the tail; an int is accepted for a float */
static void test_argument_defaults(void **state)
{
    (void)state;
    oc_tensor *y;
    oc_value two[] = {oc_value_tensor(&args_x), oc_value_int(1)};
    assert_int_equal(oc_op_invoke(affine(), two, 2, &y), OC_OK);
    for (int i = 0; i < 3; i++) assert_true(((double *)y->data)[i] == args_xv[i] * 2 + 0.5);
    oc_tensor_free(y);
}

/* arity and types are checked, with names */
static void test_argument_missing(void **state)
{
    (void)state;
    oc_tensor *y;
    assert_int_equal(oc_op_invoke(affine(), all, 1, &y), OC_EINVAL);
    assert_msg("missing argument 2 'a'");
}

static void test_argument_wrong_type(void **state)
{
    (void)state;
    oc_tensor *y;
    oc_value bad[] = {oc_value_tensor(&args_x), oc_value_tensor(&args_x)};
    assert_int_equal(oc_op_invoke(affine(), bad, 2, &y), OC_EINVAL);
    assert_msg("argument 2 'a': expected float, got Tensor");
}

static void test_argument_too_many(void **state)
{
    (void)state;
    oc_tensor *y;
    oc_value many[6] = {all[0], all[1], all[2], all[3], all[4], all[4]};
    assert_int_equal(oc_op_invoke(affine(), many, 6, &y), OC_EINVAL);
    assert_msg("takes 5 arguments, got 6");
}

static void test_argument_null_tensor(void **state)
{
    (void)state;
    oc_tensor *y;
    oc_value nulltensor[] = {oc_value_tensor(NULL), oc_value_float(1)};
    assert_int_equal(oc_op_invoke(affine(), nulltensor, 2, &y), OC_EINVAL);
}

/* a kernel name defaults to the op name; more than 8 dims of sizes > 65535 */
static void test_default_kernel_name_and_many_dims(void **state)
{
    (void)state;
    oc_tensor *y;
    const oc_op *count = oc_op_find("args::count");
    assert_non_null(count);
    oc_tensor big;
    int64_t sizes[12] = {70000, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2};
    oc_tensor_init(&big, NULL, OC_UINT8, 12, sizes);
    oc_tensor meta;
    oc_value bv[] = {oc_value_tensor(&big)};
    assert_int_equal(oc_op_infer(count, bv, 1, &meta), OC_OK);
    assert_int_equal(meta.dtype, OC_INT64);
    big.data = calloc(140000, 1);
    assert_int_equal(oc_op_invoke(count, bv, 1, &y), OC_OK);
    assert_int_equal(*(int64_t *)y->data, 140000);
    oc_tensor_free(y);
    free(big.data);
}

/* ---- libraries: loading, names, lookup ------------------------------------------ */

/* The args library built twice, as clash_a and clash_b (both name their
 * library "args"); clash_a loaded. */
static char clash_a[1024], clash_b[1024];

static int clash_setup(void **state)
{
    oc_status st;
    const char *p = test_build("clash_a", args_compute, args_shape, (test_lib_options){0}, &st);
    assert_non_null(p);
    snprintf(clash_a, sizeof clash_a, "%s", p);
    p = test_build("clash_b", args_compute, args_shape, (test_lib_options){0}, &st);
    assert_non_null(p);
    snprintf(clash_b, sizeof clash_b, "%s", p);
    oc_library *a;
    assert_int_equal(oc_library_load(clash_a, &a), OC_OK);
    *state = a;
    return 0;
}

static void test_load_same_file_twice(void **state)
{
    oc_library *b;
    assert_int_equal(oc_library_load(clash_a, &b), OC_OK); /* same file: same library */
    assert_ptr_equal(*state, b);
}

static void test_load_name_clash(void **state)
{
    (void)state;
    oc_library *b;
    assert_int_equal(oc_library_load(clash_b, &b), OC_EEXIST);
    assert_msg("clash_a");
    assert_msg("clash_b");
}

static void test_load_missing_file(void **state)
{
    (void)state;
    oc_library *b;
    assert_int_equal(oc_library_load("/nonexistent/libx.so", &b), OC_ENOTFOUND);
    assert_msg("/nonexistent/libx.so");
}

static void test_op_find_no_op(void **state)
{
    (void)state;
    assert_null(oc_op_find("args::nope"));
    assert_msg("has no op 'nope'");
}

static void test_op_find_no_library(void **state)
{
    (void)state;
    assert_null(oc_op_find("nolib::op"));
    assert_msg("no library 'nolib'");
}

static void test_op_find_no_separator(void **state)
{
    (void)state;
    assert_null(oc_op_find("no_separator"));
}

static void test_library_lists_its_ops(void **state)
{
    oc_library *a = *state;
    assert_ptr_equal(oc_library_find("args"), a);
    assert_int_equal(oc_library_num_ops(a), 2);
    assert_string_equal(oc_op_qualname(oc_library_op(a, 0)), "args::affine");
    assert_null(oc_library_op(a, 5));
}

static void test_unload_frees_the_name(void **state)
{
    oc_library *b;
    assert_int_equal(oc_library_unload(*state), OC_OK);
    *state = NULL;
    assert_null(oc_library_find("args"));
    assert_int_equal(oc_library_load(clash_b, &b), OC_OK); /* the name is free again */
    *state = b;
}

static void test_many_libraries_and_ops(void **state)
{
    (void)state;
    /* The seeds allowed one library of <= 10 ops; load 3 of 12 each. */
    oc_library *libs[3];
    for (int l = 0; l < 3; l++) {
        char shape[8192], compute[4096], name[32];
        snprintf(name, sizeof name, "many%d", l);
        int n = snprintf(shape, sizeof shape,
                         "#include <opcore/library.h>\nstatic oc_tensor *s(const oc_tensor *x) { return oc_empty_like(x); }\n"
                         "OC_LIBRARY(%s, m) {\n", name);
        int c = snprintf(compute, sizeof compute, "#include <opcore/kernel.h>\n");
        for (int i = 0; i < 12; i++) {
            n += snprintf(shape + n, sizeof shape - (size_t)n, "  oc_def(m, \"op%d(Tensor x) -> Tensor\", s, NULL);\n", i);
            c += snprintf(compute + c, sizeof compute - (size_t)c,
                          "oc_tensor *op%d(const oc_tensor *x) { return oc_fill_(oc_empty_like(x), %d); }\n", i, l * 100 + i);
        }
        snprintf(shape + n, sizeof shape - (size_t)n, "}\n");
        libs[l] = test_build_and_load(name, compute, shape, (test_lib_options){0});
    }
    float xv[4];
    oc_tensor x, *y;
    oc_tensor_init(&x, xv, OC_FLOAT32, 1, (int64_t[]){4});
    oc_value a[] = {oc_value_tensor(&x)};
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < 12; i++) {
            char q[64];
            snprintf(q, sizeof q, "many%d::op%d", l, i);
            assert_int_equal(oc_op_invoke(oc_op_find(q), a, 1, &y), OC_OK);
            assert_true(((float *)y->data)[3] == (float)(l * 100 + i));
            oc_tensor_free(y);
        }
    for (int l = 0; l < 3; l++) oc_library_unload(libs[l]);
}

typedef struct thread_job {
    const char *op;
    int iterations;
    int errors;
} thread_job;

static void *hammer(void *arg)
{
    thread_job *job = arg;
    int64_t n = 3000;
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 7) - 3.0f;
    oc_tensor xt, *y;
    oc_tensor_init(&xt, x, OC_FLOAT32, 2, (int64_t[]){3, 1000});
    oc_value a[] = {oc_value_tensor(&xt)};
    const oc_op *op = oc_op_find(job->op);
    for (int k = 0; k < job->iterations; k++) {
        if (oc_op_invoke(op, a, 1, &y) != OC_OK) { job->errors++; continue; }
        for (int64_t i = 0; i < n; i++)
            if (((float *)y->data)[i] != (x[i] > 0 ? x[i] : 0.0f)) { job->errors++; break; }
        oc_tensor_free(y);
    }
    free(x);
    return NULL;
}

static void test_many_threads(void **state)
{
    (void)state;
    oc_library *single = load_relu_variant("tcm", "thr_single", false);
    oc_library *multi = load_relu_variant("multicore", "thr_multi", true);
    pthread_t t[8];
    thread_job jobs[8];
    int iters = getenv("OC_UNDER_VALGRIND") ? 20 : 300;
    for (int i = 0; i < 8; i++) {
        jobs[i] = (thread_job){i % 2 ? "thr_multi::relu_forward" : "thr_single::relu_forward", iters, 0};
        pthread_create(&t[i], NULL, hammer, &jobs[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(jobs[i].errors, 0);
    }
    oc_library_unload(single);
    oc_library_unload(multi);
}

static void test_engine_configure(void **state)
{
    (void)state;
    oc_engine_shutdown();
    assert_int_equal(oc_engine_configure(3, 128 * 1024), OC_OK);
    assert_int_equal(oc_engine_num_cores(), 3);
}

static void test_engine_configure_while_running(void **state)
{
    (void)state;
    oc_engine_shutdown();
    assert_int_equal(oc_engine_configure(3, 128 * 1024), OC_OK);
    assert_int_equal(oc_engine_num_cores(), 3);             /* which starts the engine */
    assert_int_equal(oc_engine_configure(2, 0), OC_EINVAL); /* already running */
    assert_msg("already started");
}

static void test_engine_configure_bad_tcm_size(void **state)
{
    (void)state;
    oc_engine_shutdown();
    assert_int_equal(oc_engine_configure(0, 100), OC_EINVAL);
}

static void test_engine_configure_defaults(void **state)
{
    (void)state;
    oc_engine_shutdown();
    assert_int_equal(oc_engine_configure(0, 0), OC_OK);
    assert_true(oc_engine_num_cores() >= 1);
}

static void previous_handler(int sig)
{
    _exit(40 + sig % 10);
}

static void test_foreign_faults_reach_previous_handler(void **state)
{
    (void)state;
    if (getenv("OC_UNDER_VALGRIND")) return; /* the fault itself is what valgrind reports */
    pid_t pid = fork();
    if (pid == 0) {
        /* The host's own handler, installed before opcore's... */
        signal(SIGSEGV, previous_handler);
        oc_library *lib = test_build_and_load("foreign", args_compute, args_shape, (test_lib_options){0});
        (void)lib;
        /* ...still gets a fault that happens outside any kernel. */
        volatile int *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        *p = 1;
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 40 + SIGSEGV % 10);
}

static int teardown(void **state)
{
    (void)state;
    oc_engine_shutdown();
    return 0;
}

#define ARGS(fn) cmocka_unit_test_setup_teardown(fn, args_setup, unload_state)
#define ERRS(fn) cmocka_unit_test_setup_teardown(fn, errs_setup, errs_teardown)
#define CLASH(fn) cmocka_unit_test_setup_teardown(fn, clash_setup, unload_state)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relu_variants),
        cmocka_unit_test(test_multicore_model),
        cmocka_unit_test(test_multicore_kernel_returning_its_own_tensor_is_an_error),
        cmocka_unit_test(test_straggler_makes_launches_run_solo),
        ERRS(test_failed_check_is_kernel_error),
        ERRS(test_segfault_is_fault_error),
        ERRS(test_fpe_is_fault_error),
        ERRS(test_stack_overflow_is_stack_error),
        ERRS(test_shape_fn_touching_data_is_meta_error),
        ERRS(test_result_of_wrong_shape_is_shape_error),
        ERRS(test_kernel_returning_null_is_kernel_error),
        ERRS(test_failed_shape_check_is_kernel_error),
        ERRS(test_shape_fn_returning_null_is_shape_error),
        ERRS(test_tcm_copy_out_of_range_is_kernel_error),
        ERRS(test_tcm_copy_to_non_tcm_is_kernel_error),
        ERRS(test_tcm_copy_into_read_only_is_kernel_error),
        ERRS(test_tcm_running_out_is_nomem_error),
        ERRS(test_stale_read_is_coherence_error),
        ERRS(test_incoherent_policies_allow_stale_reads),
        ERRS(test_forgotten_kernel_resources_are_released),
        ARGS(test_argument_metadata),
        ARGS(test_argument_types),
        ARGS(test_argument_defaults),
        ARGS(test_argument_missing),
        ARGS(test_argument_wrong_type),
        ARGS(test_argument_too_many),
        ARGS(test_argument_null_tensor),
        ARGS(test_default_kernel_name_and_many_dims),
        CLASH(test_load_same_file_twice),
        CLASH(test_load_name_clash),
        CLASH(test_load_missing_file),
        CLASH(test_op_find_no_op),
        CLASH(test_op_find_no_library),
        CLASH(test_op_find_no_separator),
        CLASH(test_library_lists_its_ops),
        CLASH(test_unload_frees_the_name),
        cmocka_unit_test(test_many_libraries_and_ops),
        cmocka_unit_test(test_many_threads),
        cmocka_unit_test(test_engine_configure),
        cmocka_unit_test(test_engine_configure_while_running),
        cmocka_unit_test(test_engine_configure_bad_tcm_size),
        cmocka_unit_test(test_engine_configure_defaults),
        cmocka_unit_test(test_foreign_faults_reach_previous_handler),
    };
    test_use_every_core(); /* small test tensors still run on every core */
    return oc_test_run("engine", tests, NULL, teardown);
}
