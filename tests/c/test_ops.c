/* The op language end to end from C: the examples/ops library (several
 * results, Tensor[], Tensor?, int[2], in-place lists, a cross-core
 * reduction) checked against plain C references; collectives at every core
 * count from 1 to twice the CPUs; misuse errors; dynamic-shape tracing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/build.h"
#include "opcore/engine.h"
#include "opcore/host.h"
#include "support/oplib.h"

static void assert_msg(const char *needle)
{
    if (!strstr(oc_errmsg(), needle)) fail_msg("expected \"%s\" in: %s", needle, oc_errmsg());
}

static oc_library *nn_ops;

static int setup_nn_ops(void **state)
{
    (void)state;
    static const char *kernels[] = {"layer_norm.c", "sgd.c", "concat.c", "avg_pool.c", "linear.c", "global_sum.c"};
    char paths[6][512], shape[512], out[512];
    const char *compute[6];
    for (int i = 0; i < 6; i++) {
        snprintf(paths[i], sizeof paths[i], "%s", test_repo_path("examples/ops/"));
        strncat(paths[i], kernels[i], sizeof paths[i] - strlen(paths[i]) - 1);
        compute[i] = paths[i];
    }
    snprintf(shape, sizeof shape, "%s", test_repo_path("examples/ops/shape.c"));
    snprintf(out, sizeof out, "%s/nn_ops", test_tmpdir());
    const char *shapes[] = {shape};
    oc_build_options o = {.name = "nn_ops", .compute_srcs = compute, .num_compute_srcs = 6,
                          .shape_srcs = shapes, .num_shape_srcs = 1, .out_dir = out};
    oc_build_result r;
    if (oc_build(&o, &r) != OC_OK) fail_msg("%s", oc_errmsg());
    if (oc_library_load(r.path, &nn_ops) != OC_OK) fail_msg("%s", oc_errmsg());
    return 0;
}

static int teardown_nn_ops(void **state)
{
    (void)state;
    oc_library_unload(nn_ops);
    oc_engine_shutdown();
    return 0;
}

static float *random_floats(int64_t n, unsigned seed)
{
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
    }
    return v;
}

static void assert_close(const float *got, const float *want, int64_t n, float tol, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(got[i] - want[i]) <= tol * (1.0f + fabsf(want[i]))))
            fail_msg("%s[%lld]: got %g, want %g", what, (long long)i, got[i], want[i]);
}

/* ---- the examples ------------------------------------------------------------ */

/* nn_ops::layer_norm's arguments: x [rows, cols], normalized over cols,
 * w and b random. */
typedef struct {
    float *x, *w, *b;
    oc_tensor xt, wt, bt;
    int64_t shape[1];
    oc_value args[4];
} layer_norm_case;

static void layer_norm_case_init(layer_norm_case *c, int64_t rows, int64_t cols, unsigned seed)
{
    c->x = random_floats(rows * cols, seed), c->w = random_floats(cols, seed + 1), c->b = random_floats(cols, seed + 2);
    oc_tensor_init(&c->xt, c->x, OC_FLOAT32, 2, (int64_t[]){rows, cols});
    oc_tensor_init(&c->wt, c->w, OC_FLOAT32, 1, (int64_t[]){cols});
    oc_tensor_init(&c->bt, c->b, OC_FLOAT32, 1, (int64_t[]){cols});
    c->shape[0] = cols;
    c->args[0] = oc_value_tensor(&c->xt), c->args[1] = oc_value_ints(c->shape, 1);
    c->args[2] = oc_value_tensor(&c->wt), c->args[3] = oc_value_tensor(&c->bt);
}

static void test_layer_norm(void **state)
{
    (void)state;
    enum { R = 37, C = 19 };
    layer_norm_case lc;
    layer_norm_case_init(&lc, R, C, 1);
    float *x = lc.x, *w = lc.w, *b = lc.b;
    oc_value *args = lc.args;
    const oc_op *ln = test_op("nn_ops::layer_norm");
    assert_int_equal(oc_op_num_results(ln), 3);
    assert_string_equal(oc_op_result_name(ln, 1), "mean");
    assert_true(oc_op_multicore(ln)); /* .multicore = true in a single-core library */
    oc_tensor *res[3];
    if (oc_op_invoke(ln, args, 4, res) != OC_OK) fail_msg("%s", oc_errmsg()); /* eps: its default */
    assert_int_equal(res[1]->ndim, 1);
    assert_int_equal(res[1]->sizes[0], R);
    float want[R * C], mean[R], rstd[R];
    for (int r = 0; r < R; r++) {
        double s = 0, v = 0;
        for (int j = 0; j < C; j++) s += x[r * C + j];
        double mu = s / C;
        for (int j = 0; j < C; j++) v += (x[r * C + j] - mu) * (x[r * C + j] - mu);
        double rs = 1 / sqrt(v / C + 1e-5);
        mean[r] = (float)mu;
        rstd[r] = (float)rs;
        for (int j = 0; j < C; j++) want[r * C + j] = (float)((x[r * C + j] - mu) * rs) * w[j] + b[j];
    }
    assert_close(res[0]->data, want, R * C, 1e-5f, "out");
    assert_close(res[1]->data, mean, R, 1e-6f, "mean");
    assert_close(res[2]->data, rstd, R, 1e-5f, "rstd");

    /* backward, without a weight (None): grad_bias is the column sum */
    float *g = random_floats(R * C, 4);
    oc_tensor gt;
    oc_tensor_init(&gt, g, OC_FLOAT32, 2, (int64_t[]){R, C});
    oc_value bargs[] = {oc_value_tensor(&gt), oc_value_tensor(&lc.xt), oc_value_tensor(res[1]),
                        oc_value_tensor(res[2]), oc_value_ints(lc.shape, 1), oc_value_none()};
    oc_tensor *grads[3];
    if (oc_op_invoke(test_op("nn_ops::layer_norm_backward"), bargs, 6, grads) != OC_OK) fail_msg("%s", oc_errmsg());
    float colsum[C] = {0};
    for (int r = 0; r < R; r++)
        for (int j = 0; j < C; j++) colsum[j] += g[r * C + j];
    assert_close(grads[2]->data, colsum, C, 1e-5f, "grad_bias");
    /* each row of grad_x sums to ~0 (the mean is subtracted) */
    for (int r = 0; r < R; r++) {
        double s = 0;
        for (int j = 0; j < C; j++) s += ((float *)grads[0]->data)[r * C + j];
        assert_true(fabs(s) < 1e-4);
    }
    for (int i = 0; i < 3; i++) {
        oc_tensor_free(res[i]);
        oc_tensor_free(grads[i]);
    }
    free(x), free(w), free(b), free(g);
}

/* sgd_momentum_'s arguments: params (a [5] and a [3, 11]), their momentum
 * buffers (zeros) and grads, lr 0.1, momentum 0.9, weight decay 0.01. */
enum { N0 = 5, N1 = 33 };
typedef struct {
    float *p0, *p1, *g0, *g1, b0[N0], b1[N1];
    oc_tensor params[2], bufs[2], grads[2];
    oc_value args[6];
} sgd_args;

static int sgd_setup(void **state)
{
    sgd_args *s = calloc(1, sizeof *s);
    if (!s) return -1;
    s->p0 = random_floats(N0, 5), s->p1 = random_floats(N1, 6);
    s->g0 = random_floats(N0, 7), s->g1 = random_floats(N1, 8);
    oc_tensor_init(&s->params[0], s->p0, OC_FLOAT32, 1, (int64_t[]){N0});
    oc_tensor_init(&s->params[1], s->p1, OC_FLOAT32, 2, (int64_t[]){3, 11});
    oc_tensor_init(&s->bufs[0], s->b0, OC_FLOAT32, 1, (int64_t[]){N0});
    oc_tensor_init(&s->bufs[1], s->b1, OC_FLOAT32, 2, (int64_t[]){3, 11});
    oc_tensor_init(&s->grads[0], s->g0, OC_FLOAT32, 1, (int64_t[]){N0});
    oc_tensor_init(&s->grads[1], s->g1, OC_FLOAT32, 2, (int64_t[]){3, 11});
    oc_value args[] = {oc_value_tensors(s->params, 2), oc_value_tensors(s->bufs, 2),
                       oc_value_tensors(s->grads, 2),  oc_value_float(0.1),
                       oc_value_float(0.9),            oc_value_float(0.01)};
    memcpy(s->args, args, sizeof args);
    *state = s;
    return 0;
}

static int sgd_teardown(void **state)
{
    sgd_args *s = *state;
    free(s->p0), free(s->p1), free(s->g0), free(s->g1);
    free(s);
    return 0;
}

/* A fresh result of several MiB is advised as transparent huge pages
 * before the kernel's first touch (the first touch of 4 KiB pages cost
 * more than the kernel: see src/host/call.c). The advice shows as "hg" in
 * the flags of the mapping that holds the result. */
static bool mapping_has_flag(const void *addr, const char *flag)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) fail_msg("cannot read /proc/self/smaps");
    char line[512];
    bool inside = false, found = false;
    uintptr_t a = (uintptr_t)addr;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            inside = a >= lo && a < hi;
        } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            char want[8];
            snprintf(want, sizeof want, " %s", flag);
            found = strstr(line, want) != NULL;
            break;
        }
    }
    fclose(f);
    return found;
}

static void test_big_fresh_result_advised_huge_pages(void **state)
{
    (void)state;
    enum { R = 256, C = 8192 }; /* 8 MiB */
    layer_norm_case lc;
    layer_norm_case_init(&lc, R, C, 4);
    oc_tensor *res[3];
    if (oc_op_invoke(test_op("nn_ops::layer_norm"), lc.args, 4, res) != OC_OK) fail_msg("%s", oc_errmsg());
    uintptr_t mid = ((uintptr_t)res[0]->data + (4u << 20)) & ~(uintptr_t)((2u << 20) - 1);
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0) /* a kernel with THP */
        assert_true(mapping_has_flag((void *)mid, "hg"));
    assert_false(mapping_has_flag(res[1]->data, "hg")); /* 1 KiB: not advised */
    for (int i = 0; i < 3; i++) oc_tensor_free(res[i]);
    free(lc.x), free(lc.w), free(lc.b);
}

static void test_sgd_in_place(void **state)
{
    sgd_args *s = *state;
    float ref0[N0], ref1[N1], rb0[N0] = {0}, rb1[N1] = {0};
    memcpy(ref0, s->p0, sizeof ref0);
    memcpy(ref1, s->p1, sizeof ref1);
    const oc_op *sgd = test_op("nn_ops::sgd_momentum_");
    assert_int_equal(oc_op_num_results(sgd), 0);
    assert_true(oc_op_arg_mutable(sgd, 0) && !oc_op_arg_mutable(sgd, 2));
    for (int step = 0; step < 3; step++) {
        if (oc_op_call(sgd, s->args, 6, NULL) != OC_OK) fail_msg("%s", oc_errmsg());
        for (int k = 0; k < N0; k++) {
            float g = fmaf(ref0[k], 0.01f, s->g0[k]);
            rb0[k] = rb0[k] * 0.9f + g;
            ref0[k] = fmaf(rb0[k], -0.1f, ref0[k]);
        }
        for (int k = 0; k < N1; k++) {
            float g = fmaf(ref1[k], 0.01f, s->g1[k]);
            rb1[k] = rb1[k] * 0.9f + g;
            ref1[k] = fmaf(rb1[k], -0.1f, ref1[k]);
        }
    }
    assert_memory_equal(s->p0, ref0, sizeof ref0); /* in place, bit for bit */
    assert_memory_equal(s->p1, ref1, sizeof ref1);
    assert_memory_equal(s->b1, rb1, sizeof rb1);
}

/* a read-only tensor cannot be written in place */
static void test_sgd_read_only_param(void **state)
{
    sgd_args *s = *state;
    s->params[1].flags |= OC_TENSOR_READONLY;
    assert_int_equal(oc_op_call(test_op("nn_ops::sgd_momentum_"), s->args, 6, NULL), OC_EINVAL);
    assert_msg("argument 1 'params' item 1: is written in place (Tensor(a!)[]) but the tensor given is read-only");
}

/* a [2, 3] = 1..6 and b [2, 2] = 7..10, concatenated along `dim` */
static float cat_a[6] = {1, 2, 3, 4, 5, 6}, cat_b[4] = {7, 8, 9, 10};
static oc_tensor cat_xs[2];

static oc_status concat(int64_t dim, oc_tensor **out)
{
    oc_tensor_init(&cat_xs[0], cat_a, OC_FLOAT32, 2, (int64_t[]){2, 3});
    oc_tensor_init(&cat_xs[1], cat_b, OC_FLOAT32, 2, (int64_t[]){2, 2});
    oc_value args[] = {oc_value_tensors(cat_xs, 2), oc_value_int(dim)};
    return oc_op_invoke(test_op("nn_ops::concat"), args, 2, out);
}

static void test_concat(void **state)
{
    (void)state;
    oc_tensor *out;
    if (concat(-1, &out) != OC_OK) fail_msg("%s", oc_errmsg());
    assert_int_equal(out->sizes[1], 5);
    const float want_cat[10] = {1, 2, 3, 7, 8, 4, 5, 6, 9, 10};
    assert_memory_equal(out->data, want_cat, sizeof want_cat);
    oc_tensor_free(out);
}

/* shapes that do not fit: the shape function says why */
static void test_concat_shapes_do_not_fit(void **state)
{
    (void)state;
    oc_tensor *out;
    assert_int_equal(concat(0, &out), OC_EKERNEL);
    assert_msg("tensor 1: size 1 is 2, expected 3");
}

/* oc_op_call_prechecked runs the kernel into the caller's outputs without
 * the shape function: the same result as oc_op_call; values that do not fit
 * the schema and missing outputs are still refused. */
static void test_call_prechecked(void **state)
{
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {7, 8, 9, 10}, got[10] = {0};
    oc_tensor xs[2], out;
    oc_tensor_init(&xs[0], a, OC_FLOAT32, 2, (int64_t[]){2, 3});
    oc_tensor_init(&xs[1], b, OC_FLOAT32, 2, (int64_t[]){2, 2});
    oc_tensor_init(&out, got, OC_FLOAT32, 2, (int64_t[]){2, 5});
    oc_value args[] = {oc_value_tensors(xs, 2), oc_value_int(-1)};
    if (oc_op_call_prechecked(test_op("nn_ops::concat"), args, 2, &out, NULL) != OC_OK) fail_msg("%s", oc_errmsg());
    const float want[10] = {1, 2, 3, 7, 8, 4, 5, 6, 9, 10};
    assert_memory_equal(got, want, sizeof want);
    oc_value bad[] = {oc_value_tensors(xs, 2), oc_value_float(1.5)};
    assert_int_equal(oc_op_call_prechecked(test_op("nn_ops::concat"), bad, 2, &out, NULL), OC_EINVAL);
    assert_int_equal(oc_op_call_prechecked(test_op("nn_ops::concat"), args, 2, NULL, NULL), OC_EINVAL);
    assert_msg("`outs` is required");
}

/* avg pool of a [1, 1, 4, 4] image 0..15, kernel_size `k` (n ints), stride 2 */
static float pool_img[16];
static oc_tensor pool_x;

static oc_status avg_pool(const int64_t *k, size_t n, oc_tensor **out)
{
    for (int i = 0; i < 16; i++) pool_img[i] = (float)i;
    oc_tensor_init(&pool_x, pool_img, OC_FLOAT32, 4, (int64_t[]){1, 1, 4, 4});
    oc_value pargs[] = {oc_value_tensor(&pool_x), oc_value_ints(k, n), oc_value_int(2)};
    return oc_op_invoke(test_op("nn_ops::avg_pool2d"), pargs, 3, out);
}

/* int[2] given as a list (and its stride as one int: torch's broadcast) */
static void test_avg_pool(void **state)
{
    (void)state;
    oc_tensor *out;
    if (avg_pool((int64_t[]){2, 2}, 2, &out) != OC_OK) fail_msg("%s", oc_errmsg());
    const float want_pool[4] = {2.5f, 4.5f, 10.5f, 12.5f};
    assert_memory_equal(out->data, want_pool, sizeof want_pool);
    oc_tensor_free(out);
}

static void test_avg_pool_list_of_wrong_length(void **state)
{
    (void)state;
    oc_tensor *out;
    assert_int_equal(avg_pool((int64_t[]){2, 2, 2}, 3, &out), OC_EINVAL);
    assert_msg("argument 2 'kernel_size': expected 2 ints (int[2]), got a list of 3");
}

/* linear: x [2, 3], w [2, 3], bias [2] */
static float lin_x[6] = {1, 2, 3, 4, 5, 6}, lin_w[6] = {1, 0, -1, 2, 1, 0}, lin_b[2] = {10, 20};
static oc_tensor lin_xt, lin_wt, lin_bt;

static void linear_args(oc_value largs[3])
{
    oc_tensor_init(&lin_xt, lin_x, OC_FLOAT32, 2, (int64_t[]){2, 3});
    oc_tensor_init(&lin_wt, lin_w, OC_FLOAT32, 2, (int64_t[]){2, 3});
    oc_tensor_init(&lin_bt, lin_b, OC_FLOAT32, 1, (int64_t[]){2});
    largs[0] = oc_value_tensor(&lin_xt);
    largs[1] = oc_value_tensor(&lin_wt);
    largs[2] = oc_value_tensor(&lin_bt);
}

static void test_linear_with_bias(void **state)
{
    (void)state;
    oc_value largs[3];
    oc_tensor *out;
    linear_args(largs);
    if (oc_op_invoke(test_op("nn_ops::linear"), largs, 3, &out) != OC_OK) fail_msg("%s", oc_errmsg());
    const float want_lin[4] = {1 - 3 + 10, 2 + 2 + 20, 4 - 6 + 10, 8 + 5 + 20};
    assert_memory_equal(out->data, want_lin, sizeof want_lin);
    oc_tensor_free(out);
}

/* the optional bias left out: None */
static void test_linear_without_bias(void **state)
{
    (void)state;
    oc_value largs[3];
    oc_tensor *out;
    linear_args(largs);
    if (oc_op_invoke(test_op("nn_ops::linear"), largs, 2, &out) != OC_OK) fail_msg("%s", oc_errmsg());
    assert_true(((float *)out->data)[0] == -2.0f);
    oc_tensor_free(out);
}

static void test_linear_none_for_required_tensor(void **state)
{
    (void)state;
    oc_value largs[3];
    oc_tensor *out;
    linear_args(largs);
    largs[0] = oc_value_none(); /* None for a Tensor that is not optional */
    assert_int_equal(oc_op_invoke(test_op("nn_ops::linear"), largs, 3, &out), OC_EINVAL);
    assert_msg("argument 1 'x': expected Tensor, got None");
}

/* ---- collectives at every core count -------------------------------------------- */

static const char *coll_compute =
    "#include <math.h>\n#include <opcore/kernel.h>\n"
    "oc_tensor *softmax_all(const oc_tensor *x) {\n"
    "  oc_tensor *o = oc_dst_tensor(); int64_t lo, hi; oc_core_range(oc_numel(x), 1, &lo, &hi);\n"
    "  const float *xd = x->data; float *od = o->data; double m = -INFINITY, s = 0;\n"
    "  for (int64_t i = lo; i < hi; i++) m = xd[i] > m ? xd[i] : m;\n"
    "  m = oc_all_max(m);\n"
    "  for (int64_t i = lo; i < hi; i++) s += exp(xd[i] - m);\n"
    "  s = oc_all_sum(s);\n"
    "  for (int64_t i = lo; i < hi; i++) od[i] = (float)(exp(xd[i] - m) / s);\n"
    "  return o; }\n"
    "oc_tensor *barriers(const oc_tensor *x) {\n" /* 200 barriers; counts cores each round */
    "  oc_tensor *o = oc_dst_tensor(); int64_t total = 0;\n"
    "  for (int r = 0; r < 200; r++) { total += oc_all_sum_i64(oc_cpu_id() + 1); oc_barrier(); }\n"
    "  if (oc_cpu_id() == 0) *(int64_t *)o->data = total; (void)x; return o; }\n"
    "oc_tensor *mismatch(const oc_tensor *x) { if (oc_cpu_id() == 0) oc_barrier(); (void)x; return oc_dst_tensor(); }\n"
    "oc_tensor *fail_one(const oc_tensor *x) { OC_CHECK(oc_cpu_id() != 1, \"core 1 fails on purpose\");\n"
    "  oc_barrier(); (void)x; return oc_dst_tensor(); }\n"
    "void two(const oc_tensor *x) { float *a = oc_dst_tensor_at(0)->data; int64_t *b = oc_dst_tensor_at(1)->data;\n"
    "  a[0] = 1.5f; b[0] = oc_numel(x); }\n"
    "void bad_index(const oc_tensor *x) { (void)x; oc_dst_tensor_at(2); }\n"
    "void undescribed(const oc_tensor *x) { (void)x; }\n"
    "void scale_(oc_tensor *x, double s) { float *d = x->data; for (int64_t i = 0; i < oc_numel(x); i++) d[i] *= (float)s; }\n";

static const char *coll_shape =
    "#include <opcore/library.h>\n"
    "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
    "static oc_tensor *one_i64(const oc_tensor *x) { (void)x; return oc_empty(OC_INT64, OC_SHAPE(1)); }\n"
    "static void two_shape(const oc_tensor *x) { (void)x; oc_set_result(0, oc_empty(OC_FLOAT32, OC_SHAPE(1)));\n"
    "  oc_set_result(1, oc_empty(OC_INT64, OC_SHAPE(1))); }\n"
    "static void half_shape(const oc_tensor *x) { oc_set_result(0, oc_empty_like(x)); }\n"
    "OC_LIBRARY(coll, m) {\n"
    "  oc_def(m, \"softmax_all(Tensor x) -> Tensor\", same, \"softmax_all\", .multicore = true);\n"
    "  oc_def(m, \"barriers(Tensor x) -> Tensor\", one_i64, \"barriers\", .multicore = true);\n"
    "  oc_def(m, \"mismatch(Tensor x) -> Tensor\", same, \"mismatch\", .multicore = true);\n"
    "  oc_def(m, \"fail_one(Tensor x) -> Tensor\", same, \"fail_one\", .multicore = true);\n"
    "  oc_def(m, \"two(Tensor x) -> (Tensor, Tensor n)\", two_shape, \"two\");\n"
    "  oc_def(m, \"bad_index(Tensor x) -> (Tensor, Tensor)\", two_shape, \"bad_index\");\n"
    "  oc_def(m, \"undescribed(Tensor x) -> (Tensor a, Tensor b)\", half_shape, \"undescribed\");\n"
    "  oc_def(m, \"scale_(Tensor(a!) x, float s) -> Tensor(a!)\", NULL, \"scale_\");\n"
    "}\n";

static void test_collectives_every_core_count(void **state)
{
    (void)state;
    oc_library *lib = test_build_and_load("coll", coll_compute, coll_shape, (test_lib_options){0});
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    enum { N = 1000 };
    float *x = random_floats(N, 9), want[N];
    double m = -INFINITY, s = 0;
    for (int i = 0; i < N; i++) m = x[i] > m ? x[i] : m;
    for (int i = 0; i < N; i++) s += exp(x[i] - m);
    for (int i = 0; i < N; i++) want[i] = (float)(exp(x[i] - m) / s);
    oc_tensor xt;
    oc_tensor_init(&xt, x, OC_FLOAT32, 1, (int64_t[]){N});
    oc_value args[] = {oc_value_tensor(&xt)};
    float first[N];
    for (uint32_t cores = 1; cores <= (uint32_t)(2 * cpus); cores++) {
        oc_engine_shutdown();
        assert_int_equal(oc_engine_configure(cores, 0), OC_OK);
        assert_int_equal(oc_engine_num_cores(), cores);
        oc_tensor *out;
        if (oc_op_invoke(test_op("coll::softmax_all"), args, 1, &out) != OC_OK) fail_msg("%s", oc_errmsg());
        assert_close(out->data, want, N, 1e-5f, "softmax");
        if (cores == 1) memcpy(first, out->data, sizeof first);
        oc_tensor_free(out);
        if (oc_op_invoke(test_op("coll::barriers"), args, 1, &out) != OC_OK) fail_msg("%s", oc_errmsg());
        assert_int_equal(*(int64_t *)out->data, 200 * (int64_t)cores * (cores + 1) / 2);
        oc_tensor_free(out);
        /* the global sum of the example library, in core order */
        if (oc_op_invoke(test_op("nn_ops::global_sum"), args, 1, &out) != OC_OK) fail_msg("%s", oc_errmsg());
        double sum = 0;
        for (int i = 0; i < N; i++) sum += x[i];
        assert_true(fabs(*(float *)out->data - sum) < 1e-3);
        oc_tensor_free(out);
        if (cores > 1) {
            /* a core that returns without reaching the barrier, or fails: no hang */
            assert_int_equal(oc_op_invoke(test_op("coll::mismatch"), args, 1, &out), OC_EKERNEL);
            assert_msg("without reaching this barrier");
            assert_int_equal(oc_op_invoke(test_op("coll::fail_one"), args, 1, &out), OC_EKERNEL);
            assert_msg("core 1 fails on purpose");
        }
    }
    oc_engine_shutdown();
    assert_int_equal(oc_engine_configure(0, 0), OC_OK);
    free(x);
    oc_library_unload(lib);
}

/* ---- results, aliases and misuse ------------------------------------------------- */

/* The collectives' library again, built under another file name; x = [1, 2, 3]
 * as argument 0, 2.0 as argument 1. */
static float coll_x[3] = {1, 2, 3};
static oc_tensor coll_xt;
static oc_value coll_args[2];

static int coll2_setup(void **state)
{
    *state = test_build_and_load("coll2", coll_compute, coll_shape, (test_lib_options){0});
    oc_tensor_init(&coll_xt, coll_x, OC_FLOAT32, 1, (int64_t[]){3});
    coll_args[0] = oc_value_tensor(&coll_xt);
    coll_args[1] = oc_value_float(2.0);
    return 0;
}

static int coll2_teardown(void **state)
{
    oc_library_unload(*state);
    return 0;
}

static void test_two_results(void **state)
{
    (void)state;
    oc_tensor *res[2];
    if (oc_op_invoke(test_op("coll::two"), coll_args, 1, res) != OC_OK) fail_msg("%s", oc_errmsg());
    assert_true(*(float *)res[0]->data == 1.5f && *(int64_t *)res[1]->data == 3);
    oc_tensor_free(res[0]);
    oc_tensor_free(res[1]);
}

static void test_result_index_out_of_range(void **state)
{
    (void)state;
    oc_tensor *res[2];
    assert_int_equal(oc_op_invoke(test_op("coll::bad_index"), coll_args, 1, res), OC_EKERNEL);
    assert_msg("oc_dst_tensor_at(2): the op has 2 results");
}

static void test_result_not_described(void **state)
{
    (void)state;
    oc_tensor *res[2];
    assert_int_equal(oc_op_invoke(test_op("coll::undescribed"), coll_args, 1, res), OC_ESHAPE);
    assert_msg("did not describe result 1 'b'");
}

/* in place, returning the argument */
static void test_in_place_returns_argument(void **state)
{
    (void)state;
    oc_tensor *res[2];
    const oc_op *scale = test_op("coll::scale_");
    assert_int_equal(oc_op_result_alias(scale, 0), 0);
    if (oc_op_invoke(scale, coll_args, 2, res) != OC_OK) fail_msg("%s", oc_errmsg());
    assert_ptr_equal(res[0], &coll_xt);
    assert_true(coll_x[2] == 6.0f);
}

static void test_in_place_infer(void **state)
{
    (void)state;
    oc_tensor meta[1];
    assert_int_equal(oc_op_infer(test_op("coll::scale_"), coll_args, 2, meta), OC_OK);
    assert_int_equal(meta[0].sizes[0], 3);
}

/* ---- dynamic shapes ------------------------------------------------------------------ */

/* The dynamic sizes the traces run on: 3 runs, dim sizes 8, 10007, 10009. */
static const int64_t trace_hs[3] = {8, 10007, 10009};

/* avg_pool2d: out = (H + 2p - k) / s + 1 through oc_dim_*; N and C copied */
static void test_trace_avg_pool(void **state)
{
    (void)state;
    oc_tensor xs[3];
    oc_value runs_v[3][3];
    const oc_value *runs[3];
    int64_t k2[] = {3, 3};
    for (int r = 0; r < 3; r++) {
        oc_tensor_init(&xs[r], NULL, OC_FLOAT32, 4, (int64_t[]){trace_hs[r] + 1, 3, trace_hs[r], 16});
        runs_v[r][0] = oc_value_tensor(&xs[r]);
        runs_v[r][1] = oc_value_ints(k2, 2);
        runs_v[r][2] = oc_value_int(2);
        runs[r] = runs_v[r];
    }
    oc_shape_trace tr;
    if (oc_op_trace_shapes(test_op("nn_ops::avg_pool2d"), runs, 3, 3, &tr) != OC_OK) fail_msg("%s", oc_errmsg());
    assert_int_equal(tr.num_results, 1);
    assert_int_equal(tr.ndims[0], 4);
    const oc_dim_node *n0 = &tr.nodes[tr.sizes[0][0]], *n1 = &tr.nodes[tr.sizes[0][1]], *n3 = &tr.nodes[tr.sizes[0][3]];
    assert_true(n0->op == OC_DIM_INPUT && n0->arg == 0 && n0->dim == 0);
    assert_true(n1->op == OC_DIM_CONST && n1->value == 3);
    assert_true(n3->op == OC_DIM_CONST && n3->value == 7); /* (16 - 3) / 2 + 1 */
    const oc_dim_node *h = &tr.nodes[tr.sizes[0][2]]; /* ((H + 0) - 3) / 2 + 1 */
    assert_int_equal(h->op, OC_DIM_ADD);
    const oc_dim_node *div = &tr.nodes[h->lhs];
    assert_int_equal(div->op, OC_DIM_DIV);
    assert_true(tr.nodes[h->rhs].op == OC_DIM_CONST && tr.nodes[h->rhs].value == 1);
}

/* concat: the sum of the inputs' sizes */
static void test_trace_concat(void **state)
{
    (void)state;
    oc_tensor items[3][2];
    oc_value runs_v[3][2];
    const oc_value *runs[3];
    for (int r = 0; r < 3; r++) {
        oc_tensor_init(&items[r][0], NULL, OC_FLOAT32, 2, (int64_t[]){trace_hs[r], 4});
        oc_tensor_init(&items[r][1], NULL, OC_FLOAT32, 2, (int64_t[]){trace_hs[r] * 0 + 5, 4});
        runs_v[r][0] = oc_value_tensors(items[r], 2);
        runs_v[r][1] = oc_value_int(0);
        runs[r] = runs_v[r];
    }
    oc_shape_trace tr;
    if (oc_op_trace_shapes(test_op("nn_ops::concat"), runs, 3, 2, &tr) != OC_OK) fail_msg("%s", oc_errmsg());
    const oc_dim_node *sum = &tr.nodes[tr.sizes[0][0]];
    assert_int_equal(sum->op, OC_DIM_ADD);
    assert_true(tr.nodes[sum->lhs].op == OC_DIM_INPUT && tr.nodes[sum->lhs].item == 0);
    assert_true(tr.nodes[sum->rhs].op == OC_DIM_CONST && tr.nodes[sum->rhs].value == 5);
}

/* plain C arithmetic on a dynamic size is an error, not a constant */
static void test_trace_plain_c_arithmetic(void **state)
{
    (void)state;
    oc_library *lib = test_build_and_load(
        "flat", "#include <opcore/kernel.h>\noc_tensor *flat(const oc_tensor *x) { return oc_dst_tensor(); (void)x; }\n",
        "#include <opcore/library.h>\n"
        "static oc_tensor *flat_shape(const oc_tensor *x) { return oc_empty(x->dtype, OC_SHAPE(x->sizes[0] * x->sizes[1])); }\n"
        "OC_LIBRARY(flat, m) { oc_def(m, \"flat(Tensor x) -> Tensor\", flat_shape, \"flat\"); }\n",
        (test_lib_options){0});
    oc_tensor xs[3];
    oc_value runs_v[3][1];
    const oc_value *runs[3];
    for (int r = 0; r < 3; r++) {
        oc_tensor_init(&xs[r], NULL, OC_FLOAT32, 3, (int64_t[]){trace_hs[r], 4, 2});
        runs_v[r][0] = oc_value_tensor(&xs[r]);
        runs[r] = runs_v[r];
    }
    oc_shape_trace tr;
    assert_int_equal(oc_op_trace_shapes(test_op("flat::flat"), runs, 3, 1, &tr), OC_ESHAPE);
    assert_msg("C arithmetic opcore cannot follow; compute it with the oc_dim_* helpers");
    oc_library_unload(lib);
}

/* A branch on a size: plain C is an error naming the helper at every hint,
 * because the small probe disagrees with the large ones; oc_dim_if_gt and an
 * oc_dim_min whose bound lies beyond the probes are traced as what they are. */
static const char *branch_shape_src =
    "#include <opcore/library.h>\n"
    "#include <opcore/dim.h>\n"
    "static oc_tensor *plain(const oc_tensor *x) { return oc_empty(x->dtype, OC_SHAPE(x->sizes[0] > 4 ? 4 : 3)); }\n"
    "static oc_tensor *helper(const oc_tensor *x) { return oc_empty(x->dtype, OC_SHAPE(oc_dim_if_gt(x->sizes[0], 4, 4, 3))); }\n"
    "static oc_tensor *far_min(const oc_tensor *x) { return oc_empty(x->dtype, OC_SHAPE(oc_dim_min(x->sizes[0], 30000))); }\n"
    "OC_LIBRARY(branchy, m) {\n"
    "  oc_def(m, \"plain(Tensor x) -> Tensor\", plain, \"k\");\n"
    "  oc_def(m, \"helper(Tensor x) -> Tensor\", helper, \"k\");\n"
    "  oc_def(m, \"far_min(Tensor x) -> Tensor\", far_min, \"k\");\n"
    "}\n";

static oc_status trace_1d(const char *name, const int64_t *sizes, int nruns, oc_shape_trace *tr)
{
    oc_tensor xs[4];
    oc_value runs_v[4][1];
    const oc_value *runs[4];
    for (int r = 0; r < nruns; r++) {
        oc_tensor_init(&xs[r], NULL, OC_FLOAT32, 1, &sizes[r]);
        runs_v[r][0] = oc_value_tensor(&xs[r]);
        runs[r] = runs_v[r];
    }
    return oc_op_trace_shapes(test_op(name), runs, nruns, 1, tr);
}

static void test_trace_branch_on_a_size(void **state)
{
    (void)state;
    oc_library *lib = test_build_and_load(
        "branchy", "#include <opcore/kernel.h>\noc_tensor *k(const oc_tensor *x) { (void)x; return oc_dst_tensor(); }\n",
        branch_shape_src, (test_lib_options){0});
    oc_shape_trace tr;
    const int64_t hints[] = {3, 7};
    for (int h = 0; h < 2; h++) {
        const int64_t sizes[] = {hints[h], 10007, 20014, 2}; /* the real size, large and small probes */
        assert_int_equal(trace_1d("branchy::plain", sizes, 4, &tr), OC_ESHAPE);
        assert_msg("op 'branchy::plain': result 0 size 0");
        assert_msg("oc_dim_if_gt(n, 4, a, b)");
        if (trace_1d("branchy::helper", sizes, 4, &tr) != OC_OK) fail_msg("%s", oc_errmsg());
        assert_int_equal(tr.nodes[tr.sizes[0][0]].op, OC_DIM_ADD); /* 3 + (4 - 3) * min(max(n - 4, 0), 1) */
        if (trace_1d("branchy::far_min", sizes, 4, &tr) != OC_OK) fail_msg("%s", oc_errmsg());
        const oc_dim_node *m = &tr.nodes[tr.sizes[0][0]];
        assert_int_equal(m->op, OC_DIM_MIN); /* not the input size it equals at every probe */
        assert_true(tr.nodes[m->lhs].op == OC_DIM_INPUT && tr.nodes[m->rhs].op == OC_DIM_CONST);
    }
    oc_library_unload(lib);
}

/* ---- messages ------------------------------------------------------------------- */

/* a shape function returning a tensor with an invalid dtype: one clear message */
static void test_message_bad_result_dtype(void **state)
{
    (void)state;
    oc_library *lib = test_build_and_load(
        "baddt", "#include <opcore/kernel.h>\noc_tensor *f(const oc_tensor *x) { (void)x; return oc_dst_tensor(); }\n",
        "#include <opcore/library.h>\n"
        "static oc_tensor t;\n"
        "static oc_tensor *bad(const oc_tensor *x) { t = *x; t.dtype = (oc_dtype)77; return &t; }\n"
        "OC_LIBRARY(baddt, m) { oc_def(m, \"f(Tensor x) -> Tensor\", bad, \"f\"); }\n",
        (test_lib_options){0});
    float a = 1;
    oc_tensor x, *y;
    oc_tensor_init(&x, &a, OC_FLOAT32, 1, (int64_t[]){1});
    oc_value v[] = {oc_value_tensor(&x)};
    assert_int_equal(oc_op_invoke(test_op("baddt::f"), v, 1, &y), OC_ESHAPE);
    assert_string_equal(oc_errmsg(), "op 'baddt::f': shape function 'bad' returned a bad tensor: invalid dtype 77");
    oc_library_unload(lib);
}

/* a bad schema: the library is named once */
static void test_message_bad_schema(void **state)
{
    (void)state;
    oc_status st;
    assert_null(test_build("badschema", "#include <opcore/kernel.h>\n",
                           "#include <opcore/library.h>\nstatic oc_tensor *s(const oc_tensor *x) { return (oc_tensor *)x; }\n"
                           "OC_LIBRARY(badschema, m) { oc_def(m, \"f(Tensr x) -> Tensor\", s, \"f\"); }\n",
                           (test_lib_options){0}, &st));
    assert_int_equal(st, OC_EBUILD);
    assert_non_null(strstr(oc_errmsg(), "opcore build: library 'badschema': schema \"f(Tensr x) -> Tensor\": unknown type 'Tensr'"));
    assert_null(strstr(oc_errmsg(), "library 'badschema': library"));
}

/* ---- rebuild and reload in place ------------------------------------------------ */

static float bump_once(const oc_op *o)
{
    float a = 0;
    oc_tensor x, *y;
    oc_tensor_init(&x, &a, OC_FLOAT32, 1, (int64_t[]){1});
    oc_value v[] = {oc_value_tensor(&x)};
    if (oc_op_invoke(o, v, 1, &y) != OC_OK) fail_msg("%s", oc_errmsg());
    float r = *(float *)y->data;
    oc_tensor_free(y);
    return r;
}

static void test_reload(void **state)
{
    (void)state;
    const char *shape = "#include <opcore/library.h>\n"
                        "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
                        "OC_LIBRARY(rl, m) { oc_def(m, \"bump(Tensor x) -> Tensor\", same, \"bump\"); }\n";
    char kernel[512];
    const char *fmt = "#include <opcore/kernel.h>\noc_tensor *bump(const oc_tensor *x) { oc_tensor *y = oc_dst_tensor();\n"
                      "  ((float *)y->data)[0] = ((const float *)x->data)[0] + %d; return y; }\n";
    oc_status st;
    snprintf(kernel, sizeof kernel, fmt, 1);
    const char *path = test_build("rl", kernel, shape, (test_lib_options){0}, &st);
    char saved[512];
    snprintf(saved, sizeof saved, "%s", path);
    oc_library *l1, *l2, *l3;
    assert_int_equal(oc_library_load(saved, &l1), OC_OK);
    const oc_op *old = test_op("rl::bump");
    assert_true(bump_once(old) == 1.0f);
    snprintf(kernel, sizeof kernel, fmt, 5);
    assert_non_null(test_build("rl", kernel, shape, (test_lib_options){0}, &st)); /* rebuilt in place */
    assert_int_equal(oc_library_load(saved, &l2), OC_OK);                        /* replaces l1 */
    assert_ptr_not_equal(l1, l2);
    assert_true(bump_once(test_op("rl::bump")) == 5.0f);
    assert_true(bump_once(old) == 1.0f); /* an old op pointer stays valid and runs its code */
    assert_int_equal(oc_library_load(saved, &l3), OC_OK); /* unchanged file: a no-op */
    assert_ptr_equal(l2, l3);
    assert_int_equal(oc_library_forget(l2), OC_OK);
    assert_null(oc_op_find("rl::bump"));
    assert_int_equal(oc_library_load(saved, &l3), OC_OK); /* again after forgetting: current code */
    assert_true(bump_once(test_op("rl::bump")) == 5.0f);
    assert_int_equal(oc_library_unload(l3), OC_OK);
}

#define COLL2(fn) cmocka_unit_test_setup_teardown(fn, coll2_setup, coll2_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_norm),
        cmocka_unit_test_setup_teardown(test_sgd_in_place, sgd_setup, sgd_teardown),
        cmocka_unit_test_setup_teardown(test_sgd_read_only_param, sgd_setup, sgd_teardown),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_concat_shapes_do_not_fit),
        cmocka_unit_test(test_call_prechecked),
        cmocka_unit_test(test_avg_pool),
        cmocka_unit_test(test_avg_pool_list_of_wrong_length),
        cmocka_unit_test(test_big_fresh_result_advised_huge_pages),
        cmocka_unit_test(test_linear_with_bias),
        cmocka_unit_test(test_linear_without_bias),
        cmocka_unit_test(test_linear_none_for_required_tensor),
        cmocka_unit_test(test_collectives_every_core_count),
        COLL2(test_two_results),
        COLL2(test_result_index_out_of_range),
        COLL2(test_result_not_described),
        COLL2(test_in_place_returns_argument),
        COLL2(test_in_place_infer),
        cmocka_unit_test(test_trace_avg_pool),
        cmocka_unit_test(test_trace_concat),
        cmocka_unit_test(test_trace_plain_c_arithmetic),
        cmocka_unit_test(test_trace_branch_on_a_size),
        cmocka_unit_test(test_message_bad_result_dtype),
        cmocka_unit_test(test_message_bad_schema),
        cmocka_unit_test(test_reload),
    };
    test_use_every_core(); /* small test tensors still run on every core */
    return oc_test_run("ops", tests, setup_nn_ops, teardown_nn_ops);
}
