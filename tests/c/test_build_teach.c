/* tests/c/test_build_teach.c — the build tool's errors that teach and its
 * vectorisation report, with the real compiler: each first mistake of a
 * kernel author coming from the seeds' C++ gives a message that says what to
 * write instead.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/runner.h"

#include <dlfcn.h>

#include "build/build_internal.h"
#include "opcore/build.h"
#include "opcore/host.h"
#include "support/oplib.h"

/* Each test builds in its own directory under the process's scratch dir. */
static char dir[512];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "%s/teachXXXXXX", test_tmpdir());
    assert_non_null(mkdtemp(dir));
    oc_clear_error();
    return 0;
}

static const char *path_in(const char *leaf) { return test_path(dir, leaf); }

static const char *write_text(const char *leaf, const char *text)
{
    const char *p = path_in(leaf);
    test_write_file(p, text);
    return p;
}

static const char shape_src[] =
    "#include <opcore/library.h>\n"
    "static oc_tensor *relu_fwd_shape(const oc_tensor *x) { return oc_empty_like(x); }\n"
    "OC_LIBRARY(teach_ops, m) {\n"
    "    oc_def(m, \"relu_forward(Tensor x) -> Tensor\", relu_fwd_shape, \"relu_forward\");\n"
    "}\n";

/* A kernel with one loop the compiler vectorises (line 8) and one it
 * cannot (line 9: a break). */
static const char relu_src[] =
    "#include <opcore/kernel.h>\n"
    "oc_tensor *relu_forward(const oc_tensor *x)\n"
    "{\n"
    "    oc_tensor *out = oc_dst_tensor();\n"
    "    float *o = out->data;\n"
    "    const float *in = x->data;\n"
    "    int64_t n = oc_numel(x);\n"
    "    for (int64_t i = 0; i < n; i++) o[i] = in[i] > 0 ? in[i] : 0;\n"
    "    for (int64_t i = 0; i < n; i++) { if (in[i] > 100) break; o[i] += 0; }\n"
    "    return out;\n"
    "}\n";

static oc_status build(const char *name, const char *compute, const char *shape, const char *shape2,
                       bool vec_report, oc_build_result *r)
{
    const char *c[1] = {compute}, *s[2] = {shape, shape2};
    oc_build_options o = {.name = name, .compute_srcs = c, .num_compute_srcs = 1, .shape_srcs = s,
                          .num_shape_srcs = shape2 ? 2 : 1, .out_dir = path_in("out"),
                          .vec_report = vec_report};
    memset(r, 0, sizeof *r);
    return oc_build(&o, r);
}

/* relu_src and shape_src (relu.c, shape.c) built as library `name`; fails
 * the test unless it builds. */
static void build_relu(const char *name, bool vec_report, oc_build_result *r)
{
    const char *k = write_text("relu.c", relu_src), *s = write_text("shape.c", shape_src);
    if (build(name, k, s, NULL, vec_report, r)) fail_msg("%s", oc_errmsg());
}

static void test_cpp_source(void **state)
{
    (void)state;
    oc_build_result r;
    const char *k = write_text("relu.cpp", "#include <torch/extension.h>\n");
    assert_int_equal(build("relu", k, write_text("shape.c", shape_src), NULL, false, &r), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "relu.cpp is a C++ source; opcore kernels and shape functions are C");
    test_assert_contains(oc_errmsg(), "docs/tutorial_1_first_operator.md");
}

static void test_cuda_source(void **state)
{
    (void)state;
    oc_build_result r;
    const char *k = write_text("relu.cu", "__global__ void f() {}\n");
    assert_int_equal(build("relu", k, write_text("shape.c", shape_src), NULL, false, &r), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "relu.cu is a C++ source");
}

static void test_torch_header_in_c(void **state)
{
    (void)state;
    oc_build_result r;
    const char *k = write_text("relu.c", "#include <torch/torch.h>\ntorch::Tensor relu_forward(torch::Tensor x);\n");
    assert_int_equal(build("relu", k, write_text("shape.c", shape_src), NULL, false, &r), OC_EBUILD);
    test_assert_contains(oc_errmsg(), "hint: opcore kernels and shape functions are C, without torch's headers");
    test_assert_contains(oc_errmsg(), "torch/torch.h"); /* the compiler's own words follow */
}

static void test_const_accessor(void **state)
{
    (void)state;
    oc_build_result r;
    const char *k = write_text("relu.c",
                               "#include <opcore/kernel.h>\n"
                               "oc_tensor *relu_forward(const oc_tensor *x) {\n"
                               "    oc_acc a = oc_accessor(x, OC_FLOAT32, 1);\n"
                               "    (void)a; return oc_dst_tensor();\n"
                               "}\n");
    assert_int_equal(build("relu", k, write_text("shape.c", shape_src), NULL, false, &r), OC_EBUILD);
    test_assert_contains(oc_errmsg(), "hint: oc_accessor of a `const oc_tensor *` (a kernel input) is a read-only "
                                 "oc_cacc: write `oc_cacc a = oc_accessor(x, OC_FLOAT32, 2);`");
    test_assert_contains(oc_errmsg(), "oc_accessor_of_a_const_tensor_is_an_oc_cacc");
}

/* the right spelling builds */
static void test_const_accessor_right_spelling(void **state)
{
    (void)state;
    oc_build_result r;
    const char *k = write_text("relu.c",
                               "#include <opcore/kernel.h>\n"
                               "oc_tensor *relu_forward(const oc_tensor *x) {\n"
                               "    oc_cacc a = oc_accessor(x, OC_FLOAT32, 1);\n"
                               "    oc_acc o = oc_accessor(oc_dst_tensor(), OC_FLOAT32, 1);\n"
                               "    for (int64_t i = 0; i < x->sizes[0]; i++) OC_AT(o, float, i) = OC_AT(a, float, i);\n"
                               "    return oc_dst_tensor();\n"
                               "}\n");
    if (build("relu", k, write_text("shape.c", shape_src), NULL, false, &r)) fail_msg("%s", oc_errmsg());
}

static void test_lib_prefix_name(void **state)
{
    (void)state;
    oc_build_result r;
    build_relu("librelu", false, &r);
    assert_string_equal(r.path + strlen(r.path) - strlen("/librelu.so"), "/librelu.so");
    assert_int_equal(access(path_in("out/liblibrelu.so"), F_OK), -1);
}

/* the same library as name 'relu': a cache hit */
static void test_lib_prefix_name_is_the_plain_name(void **state)
{
    (void)state;
    oc_build_result r;
    build_relu("librelu", false, &r);
    build_relu("relu", false, &r);
    assert_true(r.cached);
}

static void test_lib_prefix_and_suffix_name(void **state)
{
    (void)state;
    oc_build_result r;
    build_relu("librelu", false, &r);
    build_relu("librelu.so", false, &r);
    assert_true(r.cached);
}

static void test_two_library_blocks(void **state)
{
    (void)state;
    oc_build_result r;
    const char *k = write_text("relu.c", relu_src), *s = write_text("shape.c", shape_src);
    const char *s2 = write_text("more.c", "#include <opcore/library.h>\n"
                                          "static oc_tensor *sh(const oc_tensor *x) { return oc_empty_like(x); }\n"
                                          "OC_LIBRARY(more_ops, m) {\n"
                                          "    oc_def(m, \"relu_forward(Tensor x) -> Tensor\", sh, \"relu_forward\");\n"
                                          "}\n");
    assert_int_equal(build("relu", k, s, s2, false, &r), OC_EBUILD);
    test_assert_contains(oc_errmsg(), "two OC_LIBRARY blocks, in ");
    test_assert_contains(oc_errmsg(), "shape.c and in ");
    test_assert_contains(oc_errmsg(), "more.c; a library has exactly one: put every oc_def() in one block");
    assert_null(strstr(oc_errmsg(), "multiple definition"));
}

static void test_two_library_blocks_in_one_file(void **state)
{
    (void)state;
    oc_build_result r;
    char both[1024];
    snprintf(both, sizeof both, "%sOC_LIBRARY(other_ops, m2) {\n"
                                "    oc_def(m2, \"relu_forward(Tensor x) -> Tensor\", relu_fwd_shape, \"relu_forward\");\n}\n",
             shape_src);
    const char *k = write_text("relu.c", relu_src);
    assert_int_equal(build("relu", k, write_text("shape.c", both), NULL, false, &r), OC_EBUILD);
    test_assert_contains(oc_errmsg(), "hint: this source has two OC_LIBRARY blocks; a library has exactly one");
}

/* "relu.c:9: NOT vectorized: ...": the report's line for relu_src's loop with a break */
static const char *not_vectorized_line(char *buf, size_t len)
{
    snprintf(buf, len, "%s:9: NOT vectorized: control flow in loop", path_in("relu.c"));
    return buf;
}

static void test_vec_report(void **state)
{
    (void)state;
    oc_build_result r;
    build_relu("relu", true, &r);
    char line8[600], line9[600];
    snprintf(line8, sizeof line8, "%s:8: vectorized (", path_in("relu.c"));
    test_assert_contains(r.vec_report, "vectorization report: compute sources compiled with -O3");
    test_assert_contains(r.vec_report, "1 loop vectorized, 1 not");
    test_assert_contains(r.vec_report, line8);
    test_assert_contains(r.vec_report, not_vectorized_line(line9, sizeof line9));
    test_assert_contains(r.vec_report, "compute both sides and select");
    assert_null(strstr(r.vec_report, "kernel.h")); /* only the user's sources */
    free(r.vec_report);
}

/* a cached build reports too */
static void test_vec_report_when_cached(void **state)
{
    (void)state;
    oc_build_result r;
    char line9[600];
    build_relu("relu", true, &r);
    free(r.vec_report);
    build_relu("relu", true, &r);
    assert_true(r.cached);
    test_assert_contains(r.vec_report, not_vectorized_line(line9, sizeof line9));
    free(r.vec_report);
}

/* without the option there is no report */
static void test_no_vec_report_without_option(void **state)
{
    (void)state;
    oc_build_result r;
    build_relu("relu", true, &r);
    free(r.vec_report);
    build_relu("relu", false, &r);
    assert_null(r.vec_report);
}

/* The report's parser on canned compiler output (gcc 12 and clang 14
 * wordings), independent of the compiler installed. */
static void test_vec_report_parsing_gcc(void **state)
{
    (void)state;
    const char *gcc =
        "/s/k.c:7:12: missed: couldn't vectorize loop\n"
        "/s/k.c:7:12: missed: not vectorized: loop nest containing two or more consecutive inner loops cannot be vectorized\n"
        "/s/k.c:14:53: missed: couldn't vectorize loop\n"
        "/s/k.c:14:53: missed: not vectorized: control flow in loop.\n"
        "/s/k.c:11:35: optimized: loop vectorized using 32 byte vectors\n"
        "/s/k.c:11:35: optimized:  loop versioned for vectorization because of possible aliasing\n"
        "/s/k.c:11:35: optimized: loop vectorized using 16 byte vectors\n"
        "/inc/opcore/vec.h:37:27: optimized: loop vectorized using 32 byte vectors\n"
        "/s/k.c:20:27: missed: couldn't vectorize loop\n"
        "/s/k.c:21:9: missed: statement clobbers memory: _5 = expf (_4);\n"
        "/s/k.c:6:26: missed: not vectorized: vectorization is not profitable.\n"
        /* -fopt-info-vec-all-internals: indented analysis lines and notes
         * are skipped, except the note that a reduction was kept in order */
        "/s/k.c:24:24: note:   using an in-order (fold-left) reduction.\n"
        "/s/k.c:24:24: missed:   not vectorized: latch block not empty.\n"
        "/s/k.c:24:24: optimized: loop vectorized using 32 byte vectors\n";
    oc__sb out = {0};
    oc__vec_report_format(gcc, "/s/k.c", "k.c", &out);
    const char *r = oc__sb_str(&out);
    test_assert_contains(r, "k.c: 1 loop vectorized, 3 not\n");
    test_assert_contains(r, "  k.c:24: NOT vectorized: a float reduction kept in order");
    test_assert_contains(r, "oc_tile_reduce_rows");
    test_assert_contains(r, "  k.c:11: vectorized (32-byte vectors, with a run-time overlap check)\n");
    test_assert_contains(r, "  k.c:14: NOT vectorized: control flow in loop\n");
    test_assert_contains(r, "  k.c:20: NOT vectorized: calls expf() (a function call in the loop)\n");
    assert_null(strstr(r, "k.c:7:")); /* an outer loop: its inner loops are listed */
    assert_null(strstr(r, "vec.h"));  /* not the user's source */
    oc__sb_free(&out);
}

static void test_vec_report_parsing_clang(void **state)
{
    (void)state;
    const char *clang =
        "/s/k.c:9:5: remark: vectorized loop (vectorization width: 8, interleaved count: 4) [-Rpass=loop-vectorize]\n"
        "/s/k.c:10:5: remark: loop not vectorized: could not determine number of loop iterations [-Rpass-analysis=loop-vectorize]\n"
        "/s/k.c:10:5: remark: loop not vectorized [-Rpass-missed=loop-vectorize]\n";
    oc__sb out = {0};
    oc__vec_report_format(clang, "/s/k.c", "k.c", &out);
    const char *r = oc__sb_str(&out);
    test_assert_contains(r, "k.c: 1 loop vectorized, 1 not\n");
    test_assert_contains(r, "  k.c:9: vectorized\n");
    test_assert_contains(r, "  k.c:10: NOT vectorized: could not determine number of loop iterations\n");
    oc__sb_free(&out);
}

/* Loops in the author's own headers are listed under the header's name:
 * one beside the source (or below its folder), one in an include directory
 * the build was given; opcore's and the system's headers are not. */
static void test_vec_report_lists_the_authors_headers(void **state)
{
    (void)state;
    const char *gcc =
        "/s/k.c:9:5: optimized: loop vectorized using 32 byte vectors\n"
        "/s/my_helpers.h:4:24: note:   using an in-order (fold-left) reduction.\n"
        "/s/my_helpers.h:4:24: optimized: loop vectorized using 32 byte vectors\n"
        "/s/my_helpers.h:9:24: optimized: loop vectorized using 32 byte vectors\n"
        "/s/sub/deep.h:3:5: missed: couldn't vectorize loop\n"
        "/s/sub/deep.h:3:5: missed: not vectorized: control flow in loop.\n"
        "/inc/opcore/vec.h:37:27: optimized: loop vectorized using 32 byte vectors\n"
        "/usr/include/x86_64-linux-gnu/bits/string_fortified.h:29:10: missed: couldn't vectorize loop\n"
        "/mine/inc/util.h:12:3: optimized: loop vectorized using 16 byte vectors\n";
    const char *dirs[] = {"/mine/inc/"};
    oc__sb out = {0};
    oc__vec_report_sources(gcc, "/s/k.c", "src/k.c", dirs, 1, &out);
    const char *r = oc__sb_str(&out);
    test_assert_contains(r, "src/k.c: 1 loop vectorized, 0 not\n");
    test_assert_contains(r, "src/my_helpers.h: 1 loop vectorized, 1 not\n");
    test_assert_contains(r, "  src/my_helpers.h:4: NOT vectorized: a float reduction kept in order");
    test_assert_contains(r, "  src/my_helpers.h:9: vectorized (32-byte vectors)\n");
    test_assert_contains(r, "src/sub/deep.h: 0 loops vectorized, 1 not\n");
    test_assert_contains(r, "  src/sub/deep.h:3: NOT vectorized: control flow in loop\n");
    test_assert_contains(r, "/mine/inc/util.h: 1 loop vectorized, 0 not\n");
    assert_null(strstr(r, "vec.h"));
    assert_null(strstr(r, "string_fortified.h"));
    oc__sb_free(&out);
}

/* dlopen in a child with stderr in a file: what did the library print? */
static void child_dlopen_stderr(const char *lib, char *out, size_t len)
{
    const char *err = path_in("stderr.txt");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen(err, "w", stderr)) _exit(2);
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        fflush(stderr);
        _exit(h ? 0 : 3);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    FILE *f = fopen(err, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    fclose(f);
}

static void test_plain_dlopen_hint(void **state)
{
    (void)state;
    oc_build_result r;
    build_relu("relu", false, &r);
    char text[4096];
    child_dlopen_stderr(r.path, text, sizeof text);
    test_assert_contains(text, "is an opcore op library loaded by plain dlopen (torch.ops.load_library");
    test_assert_contains(text, "torch.ops.teach_ops.<op> will not exist");
    test_assert_contains(text, "opcore.custom_op.load_library('");
}

/* opcore's own loader: silent (stderr to a file around the load) */
static void test_own_loader_silent(void **state)
{
    (void)state;
    oc_build_result r;
    build_relu("relu", false, &r);
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path_in("own.txt"), "w");
    assert_non_null(f);
    dup2(fileno(f), 2);
    oc_library *lib = NULL;
    oc_status st = oc_library_load(r.path, &lib);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    if (st) fail_msg("%s", oc_errmsg());
    f = fopen(path_in("own.txt"), "r");
    assert_non_null(f);
    assert_int_equal(fgetc(f), EOF);
    fclose(f);
    assert_int_equal(oc_library_unload(lib), OC_OK);
}

#define IN_DIR(fn) cmocka_unit_test_setup_teardown(fn, setup, NULL)

int main(void)
{
    const struct CMUnitTest tests[] = {
        IN_DIR(test_cpp_source),
        IN_DIR(test_cuda_source),
        IN_DIR(test_torch_header_in_c),
        IN_DIR(test_const_accessor),
        IN_DIR(test_const_accessor_right_spelling),
        IN_DIR(test_lib_prefix_name),
        IN_DIR(test_lib_prefix_name_is_the_plain_name),
        IN_DIR(test_lib_prefix_and_suffix_name),
        IN_DIR(test_two_library_blocks),
        IN_DIR(test_two_library_blocks_in_one_file),
        IN_DIR(test_vec_report),
        IN_DIR(test_vec_report_when_cached),
        IN_DIR(test_no_vec_report_without_option),
        cmocka_unit_test(test_vec_report_parsing_gcc),
        cmocka_unit_test(test_vec_report_parsing_clang),
        cmocka_unit_test(test_vec_report_lists_the_authors_headers),
        IN_DIR(test_plain_dlopen_hint),
        IN_DIR(test_own_loader_silent),
    };
    return oc_test_run("build_teach", tests, NULL, NULL);
}
