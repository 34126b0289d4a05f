/* tests/c/test_build.c — the build tool (opcore/build.h), with the real
 * compiler: op libraries are written to a temp directory, built, loaded
 * with oc_library_load and called; every error path checks the message.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "support/runner.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "opcore/build.h"
#include "opcore/engine.h"
#include "opcore/host.h"
#include "opcore/library.h"
#include "support/oplib.h"

/* ---- helpers ------------------------------------------------------------- */

static char tmp[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/oc_test_build_XXXXXX");
    assert_non_null(mkdtemp(tmp));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    assert_int_equal(system(cmd), 0);
    oc_clear_error();
    return 0;
}

static const char *path_in(const char *leaf) { return test_path(tmp, leaf); }

__attribute__((format(printf, 2, 3))) static void write_text(const char *leaf, const char *fmt, ...)
{
    char text[16384];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && n < (int)sizeof text);
    test_write_file(path_in(leaf), text);
}

/* The seeds' ReLU: shape source (library `lib`), compute source. */
static void write_relu(const char *lib)
{
    write_text("shape.c",
               "#include <opcore/library.h>\n"
               "static oc_tensor *relu_fwd_shape(const oc_tensor *x) { return oc_empty_like(x); }\n"
               "OC_LIBRARY(%s, m) {\n"
               "    oc_def(m, \"relu_forward(Tensor x) -> Tensor\", relu_fwd_shape, \"relu_forward\");\n"
               "}\n",
               lib);
    write_text("relu.c",
               "#include <opcore/kernel.h>\n"
               "oc_tensor *relu_forward(const oc_tensor *x) {\n"
               "    oc_tensor *out = oc_empty_like(x);\n"
               "    const float *in = x->data; float *o = out->data;\n"
               "    for (int64_t i = 0; i < oc_numel(x); i++) o[i] = in[i] > 0 ? in[i] : 0;\n"
               "    return out;\n"
               "}\n");
}

typedef struct opts {
    oc_build_options o;
    const char *compute[4];
    const char *shape[4];
    const char *cflags[4];
    oc_build_result r;
} opts;

static void relu_opts(opts *p, const char *name)
{
    memset(p, 0, sizeof *p);
    p->compute[0] = path_in("relu.c");
    p->shape[0] = path_in("shape.c");
    p->o.name = name;
    p->o.compute_srcs = p->compute;
    p->o.num_compute_srcs = 1;
    p->o.shape_srcs = p->shape;
    p->o.num_shape_srcs = 1;
    p->o.out_dir = path_in("out");
}

static oc_status build(opts *p) { return oc_build(&p->o, &p->r); }

/* Environment variables a test changes, saved first and put back after. */
typedef struct saved_env {
    int n;
    const char *names[4];
    char *values[4];
} saved_env;

static void env_save(saved_env *s, int n, const char *const *names)
{
    s->n = n;
    for (int i = 0; i < n; i++) {
        s->names[i] = names[i];
        s->values[i] = getenv(names[i]) ? strdup(getenv(names[i])) : NULL;
    }
}

static void env_restore(saved_env *s)
{
    for (int i = 0; i < s->n; i++) {
        if (s->values[i]) setenv(s->names[i], s->values[i], 1);
        else unsetenv(s->names[i]);
        free(s->values[i]);
    }
}

/* A finished build leaves no .opcore-build-* directory in out/. */
static void assert_no_temp_dirs(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "test $(ls -A '%s/out' | grep -c opcore-build) = 0", tmp);
    assert_int_equal(system(cmd), 0);
}

/* Call relu_forward of `qualname` on [-1, 2, -3, 4]. */
static void check_relu_runs(const char *qualname)
{
    const oc_op *op = oc_op_find(qualname);
    assert_non_null(op);
    float data[4] = {-1, 2, -3, 4};
    int64_t sizes[1] = {4};
    oc_tensor x;
    assert_int_equal(oc_tensor_init(&x, data, OC_FLOAT32, 1, sizes), OC_OK);
    oc_value args[1] = {oc_value_tensor(&x)};
    oc_tensor *y = NULL;
    oc_status st = oc_op_invoke(op, args, 1, &y);
    if (st) fail_msg("%s", oc_errmsg());
    const float *o = y->data;
    assert_true(o[0] == 0 && o[1] == 2 && o[2] == 0 && o[3] == 4);
    oc_tensor_free(y);
}

/* ---- tests ---------------------------------------------------------------- */

static void test_build_load_and_run(void **state)
{
    (void)state;
    write_relu("bt_run");
    opts p;
    relu_opts(&p, "bt_run");
    assert_int_equal(build(&p), OC_OK);
    assert_false(p.r.cached);
    assert_true(p.r.seconds > 0);
    assert_string_equal(p.r.path, path_in("out/libbt_run.so"));
    oc_library *lib;
    if (oc_library_load(p.r.path, &lib)) fail_msg("%s", oc_errmsg());
    assert_string_equal(oc_library_name(lib), "bt_run");
    assert_false(oc_library_multicore(lib));
    assert_int_equal(oc_library_stack_size(lib), OC_DEFAULT_STACK_SIZE);
    char march[128];
    snprintf(march, sizeof march, "-O3 -march=%s", getenv("OPCORE_MARCH") ? getenv("OPCORE_MARCH") : "native");
    test_assert_contains(oc_library_cflags(lib), march);
    assert_int_equal(oc_library_num_ops(lib), 1);
    check_relu_runs("bt_run::relu_forward");
    assert_int_equal(oc_library_unload(lib), OC_OK);
    /* Nothing left behind but the library, its stamp and its lock. */
    struct stat st;
    assert_int_equal(stat(path_in("out/.libbt_run.so.stamp"), &st), 0);
    assert_no_temp_dirs();
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* write_relu(name) built once, fresh; p holds its options and result. */
static void build_relu_once(opts *p, const char *name)
{
    write_relu(name);
    relu_opts(p, name);
    assert_int_equal(build(p), OC_OK);
    assert_false(p->r.cached);
}

static void test_cache_hit(void **state)
{
    (void)state;
    opts p;
    double t0 = now();
    build_relu_once(&p, "bt_cache");
    double cold = now() - t0;
    t0 = now();
    assert_int_equal(build(&p), OC_OK);
    double warm = now() - t0;
    assert_true(p.r.cached);
    /* timed for the reader only: a busy machine's times prove nothing (the
     * cached build's cost is bench/run.sh's to measure) */
    print_message("cold build %.3f s, cached %.2f ms\n", cold, warm * 1e3);
}

static void test_force_rebuilds(void **state)
{
    (void)state;
    opts p;
    build_relu_once(&p, "bt_cache");
    p.o.force = true;
    assert_int_equal(build(&p), OC_OK);
    assert_false(p.r.cached);
}

/* a flag change rebuilds, and the new build is cached */
static void test_flag_change_rebuilds(void **state)
{
    (void)state;
    opts p;
    build_relu_once(&p, "bt_cache");
    p.cflags[0] = "-DSOMETHING=1";
    p.o.cflags = p.cflags;
    p.o.num_cflags = 1;
    assert_int_equal(build(&p), OC_OK);
    assert_false(p.r.cached);
    assert_int_equal(build(&p), OC_OK);
    assert_true(p.r.cached);
}

static void test_deleted_library_rebuilt(void **state)
{
    (void)state;
    opts p;
    build_relu_once(&p, "bt_cache");
    assert_int_equal(unlink(p.r.path), 0);
    assert_int_equal(build(&p), OC_OK);
    assert_false(p.r.cached);
}

/* The ReLU's compute source, including helper.h for its slope. */
static void write_relu_with_helper(void)
{
    write_text("relu.c",
               "#include <opcore/kernel.h>\n#include \"helper.h\"\n"
               "oc_tensor *relu_forward(const oc_tensor *x) {\n"
               "    oc_tensor *out = oc_empty_like(x);\n"
               "    const float *in = x->data; float *o = out->data;\n"
               "    for (int64_t i = 0; i < oc_numel(x); i++) o[i] = in[i] > 0 ? in[i] : SLOPE * in[i];\n"
               "    return out;\n"
               "}\n");
}

/* an edited compute source rebuilds, and the new build is cached */
static void test_edited_compute_source_rebuilds(void **state)
{
    (void)state;
    opts p;
    write_text("helper.h", "#define SLOPE 0\n");
    build_relu_once(&p, "bt_change");
    assert_int_equal(build(&p), OC_OK);
    assert_true(p.r.cached);
    write_relu_with_helper();
    assert_int_equal(build(&p), OC_OK);
    assert_false(p.r.cached);
    assert_int_equal(build(&p), OC_OK);
    assert_true(p.r.cached);
}

/* an edited header the compute source includes rebuilds */
static void test_edited_header_rebuilds(void **state)
{
    (void)state;
    opts p;
    write_relu("bt_change");
    write_text("helper.h", "#define SLOPE 0\n");
    write_relu_with_helper();
    relu_opts(&p, "bt_change");
    assert_int_equal(build(&p), OC_OK);
    assert_int_equal(build(&p), OC_OK);
    assert_true(p.r.cached);
    write_text("helper.h", "#define SLOPE 0 /* still */\n");
    assert_int_equal(build(&p), OC_OK);
    assert_false(p.r.cached);
}

static void test_edited_shape_source_rebuilds(void **state)
{
    (void)state;
    opts p;
    build_relu_once(&p, "bt_change");
    assert_int_equal(build(&p), OC_OK);
    assert_true(p.r.cached);
    write_text("shape.c",
               "#include <opcore/library.h>\n"
               "static oc_tensor *relu_fwd_shape(const oc_tensor *x) { return oc_empty_like(x); }\n"
               "OC_LIBRARY(bt_change, m) {\n"
               "    oc_def(m, \"relu_forward(Tensor x) -> Tensor\", relu_fwd_shape, NULL);\n"
               "}\n");
    assert_int_equal(build(&p), OC_OK);
    assert_false(p.r.cached);
}

static void test_compiler_error_propagated(void **state)
{
    (void)state;
    write_relu("bt_cerr");
    write_text("relu.c",
               "#include <opcore/kernel.h>\n"
               "oc_tensor *relu_forward(const oc_tensor *x) {\n"
               "    (void)x; return not_declared_anywhere;\n"
               "}\n");
    opts p;
    relu_opts(&p, "bt_cerr");
    assert_int_equal(build(&p), OC_EBUILD);
    assert_int_equal(oc_errcode(), OC_EBUILD);
    const char *m = oc_errmsg();
    test_assert_contains(m, "library 'bt_cerr'");
    test_assert_contains(m, path_in("relu.c"));
    test_assert_contains(m, "not_declared_anywhere");
    test_assert_contains(m, "error");
    /* a failed build leaves no library and no temp directory */
    struct stat st;
    assert_int_not_equal(stat(path_in("out/libbt_cerr.so"), &st), 0);
    assert_no_temp_dirs();
}

static void test_link_error(void **state)
{
    (void)state;
    write_relu("bt_lerr");
    write_text("relu.c",
               "#include <opcore/kernel.h>\n"
               "void no_such_function_anywhere(void);\n"
               "oc_tensor *relu_forward(const oc_tensor *x) {\n"
               "    no_such_function_anywhere();\n"
               "    return oc_empty_like(x);\n"
               "}\n");
    opts p;
    relu_opts(&p, "bt_lerr");
    assert_int_equal(build(&p), OC_EBUILD);
    test_assert_contains(oc_errmsg(), "no_such_function_anywhere");
    test_assert_contains(oc_errmsg(), "linking");
}

static void test_kernel_signature_mismatch(void **state)
{
    (void)state;
    write_relu("bt_ksig");
    write_text("relu.c",
               "#include <opcore/kernel.h>\n"
               "oc_tensor *relu_forward(oc_tensor *x, double alpha) {\n"
               "    (void)alpha; return oc_empty_like(x);\n"
               "}\n");
    opts p;
    relu_opts(&p, "bt_ksig");
    assert_int_equal(build(&p), OC_EBUILD);
    const char *m = oc_errmsg();
    test_assert_contains(m, "op 'bt_ksig::relu_forward': kernel 'relu_forward' must be declared as: "
                       "oc_tensor *relu_forward(const oc_tensor *x);");
    test_assert_contains(m, "conflicting types");
    test_assert_contains(m, path_in("relu.c"));
}

static void test_kernel_scalar_signature(void **state)
{
    (void)state;
    write_text("shape.c",
               "#include <opcore/library.h>\n"
               "static oc_tensor *f_shape(const oc_tensor *x, double s, int64_t n, bool b, oc_scalar v)\n"
               "{ (void)s; (void)n; (void)b; (void)v; return oc_empty_like(x); }\n"
               "OC_LIBRARY(bt_scal, m) {\n"
               "    oc_def(m, \"f(Tensor x, float s, int n, bool b, Scalar v) -> Tensor\", f_shape, \"f_kernel\");\n"
               "}\n");
    write_text("relu.c",
               "#include <opcore/kernel.h>\n"
               "oc_tensor *f_kernel(const oc_tensor *x, double s, int64_t n, bool b, oc_scalar v)\n"
               "{ (void)s; (void)n; (void)b; (void)v; return oc_zeros_like(x); }\n");
    opts p;
    relu_opts(&p, "bt_scal");
    if (build(&p)) fail_msg("%s", oc_errmsg());
    /* float instead of double: the classic mistake (seed 002: only double) */
    write_text("relu.c",
               "#include <opcore/kernel.h>\n"
               "oc_tensor *f_kernel(const oc_tensor *x, float s, int64_t n, bool b, oc_scalar v)\n"
               "{ (void)s; (void)n; (void)b; (void)v; return oc_zeros_like(x); }\n");
    assert_int_equal(build(&p), OC_EBUILD);
    test_assert_contains(oc_errmsg(), "kernel 'f_kernel' must be declared as: oc_tensor *f_kernel(const "
                                 "oc_tensor *x, double s, int64_t n, bool b, oc_scalar v);");
}

static void test_kernel_static(void **state)
{
    (void)state;
    write_relu("bt_kstat");
    write_text("relu.c",
               "#include <opcore/kernel.h>\n"
               "static oc_tensor *relu_forward(const oc_tensor *x) { return oc_empty_like(x); }\n"
               "oc_tensor *(*keep)(const oc_tensor *) = relu_forward;\n");
    opts p;
    relu_opts(&p, "bt_kstat");
    assert_int_equal(build(&p), OC_EBUILD);
    test_assert_contains(oc_errmsg(), "kernel 'relu_forward' must be a non-static function");
}

static void test_shape_signature_mismatch(void **state)
{
    (void)state;
    write_relu("bt_ssig");
    write_text("shape.c",
               "#include <opcore/library.h>\n"
               "static oc_tensor *relu_fwd_shape(const oc_tensor *x, int64_t n) { (void)n; return oc_empty_like(x); }\n"
               "OC_LIBRARY(bt_ssig, m) {\n"
               "    oc_def(m, \"relu_forward(Tensor x) -> Tensor\", relu_fwd_shape, \"relu_forward\");\n"
               "}\n");
    opts p;
    relu_opts(&p, "bt_ssig");
    assert_int_equal(build(&p), OC_EBUILD);
    const char *m = oc_errmsg();
    test_assert_contains(m, "op 'bt_ssig::relu_forward': shape function 'relu_fwd_shape' must be "
                       "declared as: static oc_tensor *relu_fwd_shape(const oc_tensor *x);");
    test_assert_contains(m, "conflicting types");
}

static void test_shape_extern_and_split(void **state)
{
    (void)state;
    /* A non-static shape function defined in another shape source. */
    write_relu("bt_sext");
    write_text("shape.c",
               "#include <opcore/library.h>\n"
               "oc_tensor *relu_fwd_shape(const oc_tensor *x);\n"
               "OC_LIBRARY(bt_sext, m) {\n"
               "    oc_def(m, \"relu_forward(Tensor x) -> Tensor\", &relu_fwd_shape, \"relu_forward\");\n"
               "}\n");
    write_text("shape2.c",
               "#include <opcore/library.h>\n"
               "oc_tensor *relu_fwd_shape(const oc_tensor *x) { return oc_empty_like(x); }\n");
    opts p;
    relu_opts(&p, "bt_sext");
    p.shape[1] = path_in("shape2.c");
    p.o.num_shape_srcs = 2;
    if (build(&p)) fail_msg("%s", oc_errmsg());
    /* ... and a mismatch in it */
    write_text("shape2.c",
               "#include <opcore/library.h>\n"
               "oc_tensor *relu_fwd_shape(oc_tensor *x) { return oc_empty_like(x); }\n");
    write_text("shape.c",
               "#include <opcore/library.h>\n"
               "oc_tensor *relu_fwd_shape(oc_tensor *x);\n"
               "OC_LIBRARY(bt_sext, m) {\n"
               "    oc_def(m, \"relu_forward(Tensor x) -> Tensor\", relu_fwd_shape, \"relu_forward\");\n"
               "}\n");
    assert_int_equal(build(&p), OC_EBUILD);
    test_assert_contains(oc_errmsg(), "shape function 'relu_fwd_shape' must be declared as: "
                                 "oc_tensor *relu_fwd_shape(const oc_tensor *x);");
}

static void test_missing_kernel(void **state)
{
    (void)state;
    write_relu("bt_miss");
    write_text("relu.c",
               "#include <opcore/kernel.h>\n"
               "oc_tensor *relu_forwrd(const oc_tensor *x) { return oc_empty_like(x); }\n");
    opts p;
    relu_opts(&p, "bt_miss");
    assert_int_equal(build(&p), OC_EBUILD);
    test_assert_contains(oc_errmsg(), "op 'bt_miss::relu_forward': no compute source defines kernel "
                                 "'relu_forward'; expected: oc_tensor *relu_forward(const oc_tensor *x);");
    /* a kernel that exists only in libc or libopcore does not count */
    write_text("shape.c",
               "#include <opcore/library.h>\n"
               "static oc_tensor *s(const oc_tensor *x) { return oc_empty_like(x); }\n"
               "OC_LIBRARY(bt_miss, m) { oc_def(m, \"oc_abs(Tensor x) -> Tensor\", s, NULL); }\n");
    assert_int_equal(build(&p), OC_EBUILD);
    test_assert_contains(oc_errmsg(), "no compute source defines kernel 'oc_abs'");
}

static void test_no_library_block(void **state)
{
    (void)state;
    write_relu("bt_noblk");
    write_text("shape.c", "#include <opcore/library.h>\nint unused_thing;\n");
    opts p;
    relu_opts(&p, "bt_noblk");
    assert_int_equal(build(&p), OC_EBUILD);
    test_assert_contains(oc_errmsg(), "OC_LIBRARY");
}

static void test_stack_size_and_multicore(void **state)
{
    (void)state;
    write_relu("bt_stack");
    opts p;
    relu_opts(&p, "bt_stack");
    p.cflags[0] = "-DSTACK_SIZE=20000";
    p.o.cflags = p.cflags;
    p.o.num_cflags = 1;
    p.o.multicore = true;
    if (build(&p)) fail_msg("%s", oc_errmsg());
    oc_library *lib;
    if (oc_library_load(p.r.path, &lib)) fail_msg("%s", oc_errmsg());
    assert_int_equal(oc_library_stack_size(lib), 20000);
    assert_true(oc_library_multicore(lib));
    test_assert_contains(oc_library_cflags(lib), "-DSTACK_SIZE=20000");
    assert_int_equal(oc_library_unload(lib), OC_OK);

    /* the option wins over the flag */
    p.o.stack_size = 65536;
    p.o.multicore = false;
    p.o.out_dir = path_in("out2");
    if (build(&p)) fail_msg("%s", oc_errmsg());
    if (oc_library_load(p.r.path, &lib)) fail_msg("%s", oc_errmsg());
    assert_int_equal(oc_library_stack_size(lib), 65536);
    assert_false(oc_library_multicore(lib));
    assert_int_equal(oc_library_unload(lib), OC_OK);

    /* a bad value */
    p.o.stack_size = 0;
    p.cflags[0] = "-O2 -DSTACK_SIZE=lots";
    assert_int_equal(build(&p), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "STACK_SIZE=lots");
}

static void test_abi_mismatch_refused(void **state)
{
    (void)state;
    write_relu("bt_abi");
    write_text("info.c",
               "#include <opcore/library.h>\n"
               "OC__EXPORT const oc_build_info oc_build_info_entry = {OC_ABI_VERSION + 41, 0, 0, \"\"};\n");
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -D_GNU_SOURCE -fPIC -shared -I'%s' -o '%s' '%s' '%s' '%s' -L'%s' -lopcore",
             oc_build_include_dir(), path_in("libbt_abi.so"), path_in("shape.c"),
             path_in("relu.c"), path_in("info.c"), oc_build_lib_dir());
    assert_int_equal(system(cmd), 0);
    oc_library *lib = NULL;
    assert_int_equal(oc_library_load(path_in("libbt_abi.so"), &lib), OC_EABI);
    assert_null(lib);
    test_assert_contains(oc_errmsg(), "rebuild");
    /* and one with no build info at all */
    snprintf(cmd, sizeof cmd, "cc -std=c11 -D_GNU_SOURCE -fPIC -shared -I'%s' -o '%s' '%s' '%s' -L'%s' -lopcore",
             oc_build_include_dir(), path_in("libbt_abi2.so"), path_in("shape.c"), path_in("relu.c"),
             oc_build_lib_dir());
    assert_int_equal(system(cmd), 0);
    assert_int_equal(oc_library_load(path_in("libbt_abi2.so"), &lib), OC_EABI);
    test_assert_contains(oc_errmsg(), "rebuild");
}

static void test_name_must_be_identifier(void **state)
{
    (void)state;
    write_relu("bt_args");
    opts p;
    relu_opts(&p, "9lives");
    assert_int_equal(build(&p), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "'9lives' is not a C identifier");
    relu_opts(&p, "my-ops");
    assert_int_equal(build(&p), OC_EINVAL);
    relu_opts(&p, NULL);
    assert_int_equal(build(&p), OC_EINVAL);
}

static void test_missing_source_not_found(void **state)
{
    (void)state;
    write_relu("bt_args");
    opts p;
    relu_opts(&p, "bt_args");
    p.compute[0] = path_in("nope.c");
    assert_int_equal(build(&p), OC_ENOTFOUND);
    test_assert_contains(oc_errmsg(), path_in("nope.c"));
    test_assert_contains(oc_errmsg(), "compute source");
}

static void test_shape_source_required(void **state)
{
    (void)state;
    write_relu("bt_args");
    opts p;
    relu_opts(&p, "bt_args");
    p.o.num_shape_srcs = 0;
    assert_int_equal(build(&p), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "shape source");
}

static void test_null_options_or_result(void **state)
{
    (void)state;
    write_relu("bt_args");
    opts p;
    relu_opts(&p, "bt_args");
    assert_int_equal(oc_build(NULL, &p.r), OC_EINVAL);
    assert_int_equal(oc_build(&p.o, NULL), OC_EINVAL);
}

static void test_bad_compiler(void **state)
{
    (void)state;
    write_relu("bt_cc");
    opts p;
    relu_opts(&p, "bt_cc");
    saved_env env;
    env_save(&env, 1, (const char *[]){"CC"});
    setenv("CC", "/nonexistent/cc-9000", 1);
    assert_int_equal(build(&p), OC_EBUILD);
    test_assert_contains(oc_errmsg(), "/nonexistent/cc-9000");
    env_restore(&env);
}

static void test_replace_while_loaded(void **state)
{
    (void)state;
    write_relu("bt_repl");
    opts p;
    relu_opts(&p, "bt_repl");
    if (build(&p)) fail_msg("%s", oc_errmsg());
    oc_library *lib;
    if (oc_library_load(p.r.path, &lib)) fail_msg("%s", oc_errmsg());
    /* rebuild under the loaded library: the old mapping keeps working */
    p.cflags[0] = "-DCHANGED";
    p.o.cflags = p.cflags;
    p.o.num_cflags = 1;
    if (build(&p)) fail_msg("%s", oc_errmsg());
    assert_false(p.r.cached);
    check_relu_runs("bt_repl::relu_forward");
    assert_int_equal(oc_library_unload(lib), OC_OK);
    if (oc_library_load(p.r.path, &lib)) fail_msg("%s", oc_errmsg());
    test_assert_contains(oc_library_cflags(lib), "-DCHANGED");
    check_relu_runs("bt_repl::relu_forward");
    assert_int_equal(oc_library_unload(lib), OC_OK);
}

static void test_debug_and_include_dirs(void **state)
{
    (void)state;
    write_relu("bt_dbg");
    assert_int_equal(mkdir(path_in("inc"), 0777), 0);
    write_text("inc/zero.h", "#define ZERO 0.0f\n");
    write_text("relu.c",
               "#include <opcore/kernel.h>\n#include <zero.h>\n"
               "#ifndef OC_DEBUG\n#error OC_DEBUG missing\n#endif\n"
               "oc_tensor *relu_forward(const oc_tensor *x) {\n"
               "    oc_tensor *out = oc_empty_like(x);\n"
               "    const float *in = x->data; float *o = out->data;\n"
               "    for (int64_t i = 0; i < oc_numel(x); i++) o[i] = in[i] > ZERO ? in[i] : ZERO;\n"
               "    return out;\n"
               "}\n");
    opts p;
    relu_opts(&p, "bt_dbg");
    const char *incs[1] = {path_in("inc")};
    p.o.include_dirs = incs;
    p.o.num_include_dirs = 1;
    p.o.debug = true;
    if (build(&p)) fail_msg("%s", oc_errmsg());
    oc_library *lib;
    if (oc_library_load(p.r.path, &lib)) fail_msg("%s", oc_errmsg());
    test_assert_contains(oc_library_cflags(lib), "-DOC_DEBUG");
    check_relu_runs("bt_dbg::relu_forward");
    assert_int_equal(oc_library_unload(lib), OC_OK);
    /* the included header is part of the cache key */
    assert_int_equal(build(&p), OC_OK);
    assert_true(p.r.cached);
    write_text("inc/zero.h", "#define ZERO (0.0f)\n");
    assert_int_equal(build(&p), OC_OK);
    assert_false(p.r.cached);
}

/* The variables the cache directory comes from. */
static const char *const cache_env[] = {"OPCORE_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};

/* oc_build_cache_dir(): $OPCORE_CACHE_DIR, else $XDG_CACHE_HOME/opcore,
 * else $HOME/.cache/opcore, else "". */
static void test_cache_dir_rule(void **state)
{
    (void)state;
    saved_env env;
    env_save(&env, 3, cache_env);
    setenv("OPCORE_CACHE_DIR", "/c/oc", 1);
    setenv("XDG_CACHE_HOME", "/c/xdg", 1);
    setenv("HOME", "/c/home", 1);
    assert_string_equal(oc_build_cache_dir(), "/c/oc");
    setenv("OPCORE_CACHE_DIR", "", 1); /* empty counts as unset */
    assert_string_equal(oc_build_cache_dir(), "/c/xdg/opcore");
    unsetenv("XDG_CACHE_HOME");
    assert_string_equal(oc_build_cache_dir(), "/c/home/.cache/opcore");
    unsetenv("HOME");
    assert_string_equal(oc_build_cache_dir(), "");
    env_restore(&env);
}

/* No out_dir: the library goes to <cache>/build/<name>, where the Python
 * package's load() builds too; the second build is a cache hit. */
static void test_default_out_dir_is_the_cache(void **state)
{
    (void)state;
    saved_env env;
    env_save(&env, 3, cache_env);
    setenv("OPCORE_CACHE_DIR", path_in("cache"), 1);
    write_relu("bt_cache");
    opts p;
    relu_opts(&p, "bt_cache");
    p.o.out_dir = NULL;
    if (build(&p)) fail_msg("%s", oc_errmsg());
    char want[600];
    snprintf(want, sizeof want, "%s/build/bt_cache/libbt_cache.so", path_in("cache"));
    assert_string_equal(p.r.path, want);
    assert_false(p.r.cached);
    assert_int_equal(build(&p), OC_OK);
    assert_true(p.r.cached);
    /* and with neither a cache nor an out_dir: a clear error */
    unsetenv("OPCORE_CACHE_DIR");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    assert_int_equal(build(&p), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "no output directory given and no cache directory");
    env_restore(&env);
}

static void test_dirs(void **state)
{
    (void)state;
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/opcore/build.h", oc_build_include_dir());
    assert_int_equal(access(probe, R_OK), 0);
    snprintf(probe, sizeof probe, "%s/libopcore.so", oc_build_lib_dir());
    assert_int_equal(access(probe, R_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dirs),
        cmocka_unit_test_setup_teardown(test_build_load_and_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_hit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_force_rebuilds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flag_change_rebuilds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deleted_library_rebuilt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edited_compute_source_rebuilds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edited_header_rebuilds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edited_shape_source_rebuilds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compiler_error_propagated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_link_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kernel_signature_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kernel_scalar_signature, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kernel_static, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shape_signature_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shape_extern_and_split, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_kernel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_library_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stack_size_and_multicore, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abi_mismatch_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_name_must_be_identifier, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_source_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shape_source_required, setup, teardown),
        cmocka_unit_test_setup_teardown(test_null_options_or_result, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_compiler, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_while_loaded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_debug_and_include_dirs, setup, teardown),
        cmocka_unit_test(test_cache_dir_rule),
        cmocka_unit_test_setup_teardown(test_default_out_dir_is_the_cache, setup, teardown),
    };
    atexit(oc_engine_shutdown); /* in each test's process */
    return oc_test_run("build", tests, NULL, NULL);
}
