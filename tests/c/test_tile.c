/* The tile layer (opcore/tile.h): every tile function run inside a real
 * kernel (tests/c/tile_kernels) and checked against a plain C reference. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opcore/engine.h"
#include "opcore/host.h"
#include "opcore/tile.h"
#include "support/oplib.h"
#include "tile/tile_internal.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__)
#include <immintrin.h>
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif
#define EXP_REF 1
__m256 _ZGVdN8v_expf(__m256 x); /* libmvec's AVX2 expf: the bits the tile EXP keeps */
#endif

#ifndef OC_TILE_XSMM
#define OC_TILE_XSMM 0 /* mk/tile.mk: whether libopcore's tile matmul has libxsmm */
#endif

enum { R = 37, C = 53 }; /* odd sizes: vector bodies and tails both run */

static oc_library *lib;

static int setup(void **state)
{
    (void)state;
    lib = test_build_dir("tiletest", "tests/c/tile_kernels", (test_lib_options){0});
    return lib ? 0 : 1;
}

static int teardown(void **state)
{
    (void)state;
    oc_library_unload(lib);
    return 0;
}

static void fill(float *p, int64_t n, unsigned seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 9) % 2001) / 500.0f - 2.0f; /* [-2, 2] */
    }
}

static oc_status run(const char *op, oc_tensor *out, const oc_tensor *x, const oc_tensor *y, int which)
{
    oc_tensor *res = NULL;
    oc_value a[] = {oc_value_tensor(out), oc_value_tensor(x), oc_value_tensor(y), oc_value_int(which)};
    oc_status st = oc_op_invoke(oc_op_find(op), a, 4, &res);
    if (st != OC_OK) print_message("case %d: %s\n", which, oc_errmsg());
    return st;
}

static oc_tensor mk(void *data, oc_dtype dt, int64_t rows, int64_t cols)
{
    oc_tensor t;
    oc_tensor_init(&t, data, dt, 2, (int64_t[]){rows, cols});
    return t;
}

static void near(double got, double want, double tol, const char *what, int64_t i)
{
    if (!(got == want || fabs(got - want) <= tol * (1.0 + fabs(want)) || (isnan(got) && isnan(want))))
        fail_msg("%s[%lld]: got %.9g, want %.9g", what, (long long)i, got, want);
}

static void test_load_store_window(void **state)
{
    (void)state;
    /* x is a transposed (column-major) view: any strides */
    float xs[R * C], o[6 * 60];
    fill(xs, R * C, 1);
    oc_tensor x;
    oc_tensor_init(&x, xs, OC_FLOAT32, 2, (int64_t[]){R, C});
    x.strides[0] = 1;
    x.strides[1] = R;
    oc_tensor out = mk(o, OC_FLOAT32, 6, 60);
    assert_int_equal(run("tiletest::tcase", &out, &x, &x, 0), OC_OK);
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 60; j++) {
            int xi = i - 1, xj = j + 2;
            float want = xi < 0 || xj >= C ? -7.0f : xs[xi + xj * R];
            near(o[i * 60 + j], want, 0, "window", i * 60 + j);
        }
}

static double bin_ref(double a, double b, int op)
{
    switch (op) {
    case OC_TILE_ADD: return a + b;
    case OC_TILE_SUB: return a - b;
    case OC_TILE_MUL: return a * b;
    case OC_TILE_DIV: return a / b;
    case OC_TILE_MAX: return a > b ? a : b;
    default: return a < b ? a : b;
    }
}

static void test_binary_broadcast(void **state)
{
    (void)state;
    float xs[R * C], ys[R * C], o[R * C];
    fill(xs, R * C, 2);
    fill(ys, R * C, 3);
    for (int i = 0; i < R * C; i++) ys[i] += ys[i] >= 0 ? 0.5f : -0.5f; /* no division by ~0 */
    oc_tensor x = mk(xs, OC_FLOAT32, R, C), out = mk(o, OC_FLOAT32, R, C);
    const int64_t yshapes[3][2] = {{R, C}, {1, C}, {R, 1}};
    for (int s = 0; s < 3; s++)
        for (int op = OC_TILE_ADD; op <= OC_TILE_MIN; op++) {
            oc_tensor y = mk(ys, OC_FLOAT32, yshapes[s][0], yshapes[s][1]);
            assert_int_equal(run("tiletest::tcase", &out, &x, &y, 10 + op), OC_OK);
            for (int i = 0; i < R; i++)
                for (int j = 0; j < C; j++) {
                    int yi = yshapes[s][0] == 1 ? 0 : i, yj = yshapes[s][1] == 1 ? 0 : j;
                    float want = (float)bin_ref(xs[i * C + j], ys[yi * yshapes[s][1] + yj], op);
                    near(o[i * C + j], want, 0, "binary", op * 1000 + i * C + j);
                }
        }
    /* a column (R x 1, strided in the TCM) with a column or a scalar: one run down the rows */
    oc_tensor xc = mk(xs, OC_FLOAT32, R, 1), oc = mk(o, OC_FLOAT32, R, 1);
    for (int s = 0; s < 2; s++)
        for (int op = OC_TILE_ADD; op <= OC_TILE_MIN; op++) {
            oc_tensor y = mk(ys, OC_FLOAT32, s ? 1 : R, 1);
            assert_int_equal(run("tiletest::tcase", &oc, &xc, &y, 10 + op), OC_OK);
            for (int i = 0; i < R; i++)
                near(o[i], (float)bin_ref(xs[i], ys[s ? 0 : i], op), 0, "binary column", op * 1000 + i);
        }
    /* shape mismatch: a clear error naming the function */
    oc_tensor bad = mk(ys, OC_FLOAT32, 2, C);
    assert_int_equal(run("tiletest::tcase", &out, &x, &bad, 10), OC_EKERNEL);
    test_assert_contains(oc_errmsg(), "oc_tile_binary: dst is 37 x 53, a 37 x 53, b 2 x 53");
}

/* oc_tile_normalize: the same bits as the separate binary ops it fuses */
static void test_normalize(void **state)
{
    (void)state;
    float xs[R * C], wb[2 * C], sep[R * C], fused[R * C];
    fill(xs, R * C, 5);
    fill(wb, 2 * C, 6);
    oc_tensor x = mk(xs, OC_FLOAT32, R, C), y = mk(wb, OC_FLOAT32, 2, C);
    oc_tensor a = mk(sep, OC_FLOAT32, R, C), b = mk(fused, OC_FLOAT32, R, C);
    for (int k = 0; k < 4; k += 2) {
        memset(sep, 0, sizeof sep), memset(fused, 0xff, sizeof fused);
        assert_int_equal(run("tiletest::tcase", &a, &x, &y, 90 + k), OC_OK);
        assert_int_equal(run("tiletest::tcase", &b, &x, &y, 91 + k), OC_OK);
        assert_memory_equal(sep, fused, sizeof sep);
    }
    assert_int_equal(run("tiletest::tcase", &b, &x, &y, 94), OC_EKERNEL);
    test_assert_contains(oc_errmsg(), "oc_tile_normalize: dst is 37 x 53, x 37 x 53, mean 1 x 53, rstd 37 x 1");
}

/* got[2 i], got[2 i + 1]: the mean and variance of the n elements
 * x[i * is + j * js], against a two-pass mean and variance in double */
static void moments_near(const float *got, const float *x, int rows, int n, int is, int js, const char *what)
{
    for (int i = 0; i < rows; i++) {
        double m = 0, v = 0;
        for (int j = 0; j < n; j++) m += x[i * is + j * js];
        m /= n;
        for (int j = 0; j < n; j++) v += (x[i * is + j * js] - m) * (x[i * is + j * js] - m);
        near(got[2 * i], m, 1e-6, what, i);
        near(got[2 * i + 1], v / n, 1e-5, what, i);
    }
}

/* oc_tile_moments: the separate ops' bits, strided rows, a clear error */
static void test_moments(void **state)
{
    (void)state;
    float xs[R * C], sep[R * 2], fused[R * 2], tr[C * 2];
    fill(xs, R * C, 7);
    for (int i = 0; i < R * C; i++) xs[i] += 3.0f; /* a mean far from 0 */
    oc_tensor x = mk(xs, OC_FLOAT32, R, C), a = mk(sep, OC_FLOAT32, R, 2), b = mk(fused, OC_FLOAT32, R, 2);
    memset(fused, 0xff, sizeof fused);
    assert_int_equal(run("tiletest::tcase", &a, &x, &x, 95), OC_OK);
    assert_int_equal(run("tiletest::tcase", &b, &x, &x, 96), OC_OK);
    assert_memory_equal(sep, fused, sizeof sep);
    moments_near(fused, xs, R, C, C, 1, "row"); /* and right */
    oc_tensor t = mk(tr, OC_FLOAT32, C, 2); /* columns of x: rows with stride C in the TCM */
    assert_int_equal(run("tiletest::tcase", &t, &x, &x, 97), OC_OK);
    moments_near(tr, xs, C, R, 1, C, "column");
    assert_int_equal(run("tiletest::tcase", &b, &x, &x, 98), OC_EKERNEL);
    test_assert_contains(oc_errmsg(), "oc_tile_moments: var is 1 x 2, want 37 x 1 for a 37 x 53 tile");
    /* without a mean: mean(x^2), the bits of sum of squares / cols; an
     * infinite element makes it infinite (not NaN) */
    xs[5 * C + 7] = INFINITY;
    assert_int_equal(run("tiletest::tcase", &b, &x, &x, 99), OC_OK);
    for (int i = 0; i < R; i++) {
        assert_memory_equal(&fused[2 * i], &fused[2 * i + 1], sizeof *fused);
        double q = 0;
        for (int j = 0; j < C; j++) q += (double)xs[i * C + j] * xs[i * C + j];
        near(fused[2 * i + 1], q / C, 1e-5, "mean of squares", i);
    }
    assert_true(isinf(fused[2 * 5 + 1]));
}

/* oc_tile_normalize_ahead: the bits of the normalize and moments calls it
 * stands for (next longer and shorter than the block; without w and b;
 * the unfused path; no next; no next_mean), and a clear error */
static void test_normalize_ahead(void **state)
{
    (void)state;
    float xs[R * C], wb[2 * C], sep[R * (C + 2)], fused[R * (C + 2)];
    fill(xs, R * C, 8);
    fill(wb, 2 * C, 9);
    oc_tensor x = mk(xs, OC_FLOAT32, R, C), y = mk(wb, OC_FLOAT32, 2, C);
    oc_tensor a = mk(sep, OC_FLOAT32, R, C + 2), b = mk(fused, OC_FLOAT32, R, C + 2);
    for (int k = 100; k < 128; k += k == 106 ? 18 : 2) { /* 100-105, 106 and 107, 124-127 */
        memset(sep, 0, sizeof sep), memset(fused, 0xff, sizeof fused);
        assert_int_equal(run("tiletest::tcase", &a, &x, &y, k), OC_OK);
        assert_int_equal(run("tiletest::tcase", &b, &x, &y, k + 1), OC_OK);
        assert_memory_equal(sep, fused, sizeof sep);
    }
    /* and right: the next rows' moments against double (h 16, case 101) */
    assert_int_equal(run("tiletest::tcase", &b, &x, &y, 101), OC_OK);
    float got[2 * (R - 16)];
    for (int i = 0; i < R - 16; i++) got[2 * i] = fused[i * (C + 2) + C], got[2 * i + 1] = fused[i * (C + 2) + C + 1];
    moments_near(got, xs + 16 * C, R - 16, C, C, 1, "next");
    assert_int_equal(run("tiletest::tcase", &b, &x, &y, 108), OC_EKERNEL);
    test_assert_contains(oc_errmsg(), "oc_tile_normalize_ahead: next_var is 1 x 2, want 21 x 1 for a 21 x 53 tile");
}

/* oc_tile_activation_reduce: the bits of the unary_rowbias and
 * reduce_rows calls it stands for (each reduction; next longer and shorter
 * than the block; no bias, no sum, no next; the unfused path), right
 * against double, and clear errors */
static void test_activation_reduce(void **state)
{
    (void)state;
    float xs[R * C], ys[R * C], sep[R * (C + 2)], fused[R * (C + 2)];
    fill(xs, R * C, 10);
    fill(ys, R * C, 11);
    xs[20 * C + 7] = NAN; /* in the next rows: max and min propagate it */
    oc_tensor x = mk(xs, OC_FLOAT32, R, C), y = mk(ys, OC_FLOAT32, R, C);
    oc_tensor a = mk(sep, OC_FLOAT32, R, C + 2), b = mk(fused, OC_FLOAT32, R, C + 2);
    for (int k = 110; k < 122; k += 2) {
        memset(sep, 0, sizeof sep), memset(fused, 0xff, sizeof fused);
        assert_int_equal(run("tiletest::tcase", &a, &x, &y, k), OC_OK);
        assert_int_equal(run("tiletest::tcase", &b, &x, &y, k + 1), OC_OK);
        for (int i = 0; i < R * (C + 2); i++)
            if (memcmp(&sep[i], &fused[i], sizeof *sep) != 0)
                fail_msg("case %d: row %d col %d: %.9g, the separate calls %.9g", k + 1, i / (C + 2), i % (C + 2),
                         fused[i], sep[i]);
    }
    /* and right: exp(x / 2 + y[i][0]) and its row sums, the next rows' max (case 111) */
    assert_int_equal(run("tiletest::tcase", &b, &x, &y, 111), OC_OK);
    for (int i = 0; i < 16; i++) {
        double s = 0.0;
        for (int j = 0; j < C; j++) {
            double e = exp(xs[i * C + j] * 0.5 + ys[i * C]);
            near(fused[i * (C + 2) + j], e, 1e-5, "exp", i * C + j);
            s += e;
        }
        near(fused[i * (C + 2) + C], s, 1e-5, "sum", i);
    }
    for (int i = 16; i < R; i++) {
        double m = -INFINITY;
        for (int j = 0; j < C; j++) m = isnan(m) || isnan(xs[i * C + j]) ? NAN : fmax(m, xs[i * C + j]);
        near(fused[(i - 16) * (C + 2) + C + 1], m, 0, "next max", i);
    }
    assert_int_equal(run("tiletest::tcase", &b, &x, &y, 122), OC_EKERNEL);
    test_assert_contains(oc_errmsg(), "oc_tile_activation_reduce: next_red is 1 x 1, want 21 x 1 for a 21 x 53 tile");
    assert_int_equal(run("tiletest::tcase", &b, &x, &y, 123), OC_EKERNEL);
    test_assert_contains(oc_errmsg(), "oc_tile_activation_reduce: bias is 17 x 1, want 16 x 1");
}

static double un_ref(double x, int f)
{
    switch (f) {
    case OC_TILE_IDENTITY: return x;
    case OC_TILE_EXP: return exp(x);
    case OC_TILE_LOG: return log(x);
    case OC_TILE_TANH: return tanh(x);
    case OC_TILE_SIGMOID: return 1 / (1 + exp(-x));
    case OC_TILE_SILU: return x / (1 + exp(-x));
    case OC_TILE_GELU: return 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));
    case OC_TILE_RSQRT: return 1 / sqrt(x);
    case OC_TILE_RECIPROCAL: return 1 / x;
    default: return x * x;
    }
}

static void test_unary(void **state)
{
    (void)state;
    float xs[R * C], bias[R], o[R * C];
    fill(xs, R * C, 4);
    fill(bias, R, 5);
    oc_tensor x = mk(xs, OC_FLOAT32, R, C), b = mk(bias, OC_FLOAT32, R, 1), out = mk(o, OC_FLOAT32, R, C);
    for (int f = OC_TILE_IDENTITY; f <= OC_TILE_SQUARE; f++)
        for (int rowbias = 0; rowbias < 2; rowbias++) {
            assert_int_equal(run("tiletest::tcase", &out, &x, &b, (rowbias ? 30 : 20) + f), OC_OK);
            for (int i = 0; i < R * C; i++) {
                double v = (double)xs[i] * 0.5 + (rowbias ? bias[i / C] : 0.25);
                near(o[i], un_ref(v, f), 4e-6, "unary", f * 100000 + i);
            }
        }
    /* a column (R x 1): one run down the rows */
    oc_tensor xc = mk(xs, OC_FLOAT32, R, 1), oc = mk(o, OC_FLOAT32, R, 1);
    for (int f = OC_TILE_IDENTITY; f <= OC_TILE_SQUARE; f++) {
        assert_int_equal(run("tiletest::tcase", &oc, &xc, &b, 20 + f), OC_OK);
        for (int i = 0; i < R; i++)
            near(o[i], un_ref((double)xs[i] * 0.5 + 0.25, f), 4e-6, "unary column", f * 1000 + i);
    }
}

static void test_reductions(void **state)
{
    (void)state;
    float xs[R * C], o[R * C], o2[R * C];
    fill(xs, R * C, 6);
    xs[5 * C + 7] = NAN; /* row 5, column 7: max/min propagate it */
    oc_tensor x = mk(xs, OC_FLOAT32, R, C);
    for (int op = OC_TILE_SUM; op <= OC_TILE_SUMSQ; op++)
        for (int along = 0; along < 2; along++) {
            int n = along ? C : R;
            oc_tensor out = along ? mk(o, OC_FLOAT32, 1, C) : mk(o, OC_FLOAT32, R, 1);
            assert_int_equal(run("tiletest::tcase", &out, &x, &x, (along ? 50 : 40) + op), OC_OK);
            memcpy(o2, o, sizeof o);
            assert_int_equal(run("tiletest::tcase", &out, &x, &x, (along ? 50 : 40) + op), OC_OK);
            assert_memory_equal(o, o2, (size_t)n * sizeof(float)); /* the same bits again */
            for (int k = 0; k < n; k++) {
                double s = 0, sq = 0, mx = -INFINITY, mn = INFINITY;
                int m = along ? R : C;
                bool nan = false;
                for (int t = 0; t < m; t++) {
                    double v = along ? xs[t * C + k] : xs[k * C + t];
                    nan |= isnan(v);
                    s += v, sq += v * v;
                    mx = v > mx ? v : mx, mn = v < mn ? v : mn;
                }
                double want = op == OC_TILE_SUM ? s : op == OC_TILE_MEAN ? s / m : op == OC_TILE_SUMSQ ? sq
                              : op == OC_TILE_RMAX ? mx : mn;
                if (nan) want = NAN;
                near(o[k], want, 1e-5, "reduce", op * 1000 + along * 100 + k);
            }
        }
    int32_t idx[R];
    oc_tensor out = mk(idx, OC_INT32, R, 1);
    xs[3 * C + 9] = 5.0f; /* ties: the first wins */
    xs[3 * C + 20] = 5.0f;
    assert_int_equal(run("tiletest::tcase", &out, &x, &x, 60), OC_OK);
    assert_int_equal(idx[3], 9);
    assert_int_equal(idx[5], 7); /* NaN counts as largest */
    for (int i = 0; i < R; i++) {
        if (i == 3 || i == 5) continue;
        int best = 0;
        for (int j = 1; j < C; j++) if (xs[i * C + j] > xs[i * C + best]) best = j;
        assert_int_equal(idx[i], best);
    }
}

static void test_transpose_scan_select(void **state)
{
    (void)state;
    float xs[R * C], ys[R * C], o[R * C];
    fill(xs, R * C, 7);
    fill(ys, R * C, 8);
    oc_tensor x = mk(xs, OC_FLOAT32, R, C), y = mk(ys, OC_FLOAT32, R, C);
    oc_tensor out = mk(o, OC_FLOAT32, C, R);
    assert_int_equal(run("tiletest::tcase", &out, &x, &y, 61), OC_OK);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) near(o[j * R + i], xs[i * C + j], 0, "transpose", i * C + j);
    out = mk(o, OC_FLOAT32, R, C);
    assert_int_equal(run("tiletest::tcase", &out, &x, &y, 62), OC_OK);
    for (int i = 0; i < R; i++) {
        float prev = 1.0f;
        for (int j = 0; j < C; j++) {
            prev = xs[i * C + j] * prev + ys[i * C + j];
            near(o[i * C + j], prev, 0, "scan", i * C + j);
        }
    }
    assert_int_equal(run("tiletest::tcase", &out, &x, &y, 63), OC_OK);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            near(o[i * C + j], 2 + i - j >= 0 ? xs[i * C + j] : -1e30f, 0, "select", i * C + j);
}

static void test_conversions(void **state)
{
    (void)state;
    float xs[R * C];
    fill(xs, R * C, 9);
    for (int i = 0; i < R * C; i++) xs[i] *= 80.0f; /* int8 saturates beyond +-127 */
    xs[0] = NAN;
    oc_tensor x = mk(xs, OC_FLOAT32, R, C);
    uint16_t h[R * C];
    int8_t i8[R * C];
    oc_tensor out = mk(h, OC_BFLOAT16, R, C);
    assert_int_equal(run("tiletest::tcase", &out, &x, &x, 64), OC_OK);
    for (int i = 0; i < R * C; i++) assert_int_equal(h[i], oc_f32_to_bf16(xs[i]));
    out = mk(h, OC_FLOAT16, R, C);
    assert_int_equal(run("tiletest::tcase", &out, &x, &x, 64), OC_OK);
    for (int i = 0; i < R * C; i++) assert_int_equal(h[i], oc_f32_to_half(xs[i]));
    out = mk(i8, OC_INT8, R, C);
    assert_int_equal(run("tiletest::tcase", &out, &x, &x, 64), OC_OK);
    assert_int_equal(i8[0], 0); /* NaN */
    for (int i = 1; i < R * C; i++) {
        double r = nearbyint(xs[i]);
        assert_int_equal(i8[i], r > 127 ? 127 : r < -128 ? -128 : (int)r);
    }
}

/* out (m x n) = op(a) op(b) in double, a/b float32 data of the stored shapes. */
static void mm_ref(double *out, const float *a, const float *b, int m, int n, int k, unsigned flags)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                double av = flags & OC_TILE_TRANS_A ? a[p * m + i] : a[i * k + p];
                double bv = flags & OC_TILE_TRANS_B ? b[j * k + p] : b[p * n + j];
                s += av * bv;
            }
            out[i * n + j] = s;
        }
}

enum { M = 67, N = 45, K = 91 };

static void test_matmul_float(void **state)
{
    (void)state;
    static float a[M * K], b[K * N], c[M * N];
    static double ref[M * N];
    static uint16_t a16[M * K], b16[K * N];
    fill(a, M * K, 10);
    fill(b, K * N, 11);
    for (unsigned flags = 0; flags < 4; flags++) {
        oc_tensor ta = flags & OC_TILE_TRANS_A ? mk(a, OC_FLOAT32, K, M) : mk(a, OC_FLOAT32, M, K);
        oc_tensor tb = flags & OC_TILE_TRANS_B ? mk(b, OC_FLOAT32, N, K) : mk(b, OC_FLOAT32, K, N);
        for (int i = 0; i < M * N; i++) c[i] = 1.0f; /* accumulates: c += a b */
        oc_tensor tc = mk(c, OC_FLOAT32, M, N);
        assert_int_equal(run("tiletest::tcase", &tc, &ta, &tb, 70 + (int)flags), OC_OK);
        mm_ref(ref, a, b, M, N, K, flags);
        for (int i = 0; i < M * N; i++) near(c[i], ref[i] + 1, 1e-5, "matmul", (int)flags * 10000 + i);
    }
    /* bfloat16 and float16 in, float32 accumulate: exact inputs, float32 sums */
    for (int d = 0; d < 2; d++) {
        oc_dtype dt = d ? OC_FLOAT16 : OC_BFLOAT16;
        static float ar[M * K], br[K * N];
        for (int i = 0; i < M * K; i++) {
            a16[i] = d ? oc_f32_to_half(a[i]) : oc_f32_to_bf16(a[i]);
            ar[i] = d ? oc_half_to_f32(a16[i]) : oc_bf16_to_f32(a16[i]);
        }
        for (int i = 0; i < K * N; i++) {
            b16[i] = d ? oc_f32_to_half(b[i]) : oc_f32_to_bf16(b[i]);
            br[i] = d ? oc_half_to_f32(b16[i]) : oc_bf16_to_f32(b16[i]);
        }
        /* b as k x n and transposed (n x k: the same values read as b^T); with
         * AMX-BF16 bfloat16 takes its kernel (M >= 32), the panels packed from
         * either layout; float16 and other CPUs widen */
        for (unsigned flags = 0; flags <= OC_TILE_TRANS_B; flags += OC_TILE_TRANS_B) {
            oc_tensor ta = mk(a16, dt, M, K), tc = mk(c, OC_FLOAT32, M, N);
            oc_tensor tb = flags ? mk(b16, dt, N, K) : mk(b16, dt, K, N);
            for (int i = 0; i < M * N; i++) c[i] = 1.0f; /* accumulates: c += a b */
            assert_int_equal(run("tiletest::tcase", &tc, &ta, &tb, 70 + (int)flags), OC_OK);
            mm_ref(ref, ar, br, M, N, K, flags);
            for (int i = 0; i < M * N; i++) near(c[i], ref[i] + 1, 1e-5, "matmul16", i);
            /* matmul_to: the result in bfloat16, rounded once from float32 */
            static uint16_t c16[M * N];
            tc = mk(c16, OC_BFLOAT16, M, N);
            assert_int_equal(run("tiletest::tcase", &tc, &ta, &tb, 74 + (int)flags), OC_OK);
            for (int i = 0; i < M * N; i++)
                near(oc_bf16_to_f32(c16[i]), ref[i], 1.0 / 128, "matmul_to", i);
        }
    }
    /* a single column of b (k x 1, or 1 x k transposed): one partial panel */
    for (int i = 0; i < M * K; i++) a16[i] = oc_f32_to_bf16(a[i]);
    for (unsigned flags = 0; flags <= OC_TILE_TRANS_B; flags += OC_TILE_TRANS_B) {
        oc_tensor ta = mk(a16, OC_BFLOAT16, M, K), tc = mk(c, OC_FLOAT32, M, 1);
        oc_tensor tb = flags ? mk(b16, OC_BFLOAT16, 1, K) : mk(b16, OC_BFLOAT16, K, 1);
        for (int i = 0; i < K; i++) b16[i] = oc_f32_to_bf16(b[i]);
        for (int i = 0; i < M; i++) c[i] = 0.0f;
        assert_int_equal(run("tiletest::tcase", &tc, &ta, &tb, 70 + (int)flags), OC_OK);
        for (int i = 0; i < M; i++) {
            double want = 0;
            for (int p = 0; p < K; p++)
                want += (double)oc_bf16_to_f32(a16[i * K + p]) * oc_bf16_to_f32(b16[p]);
            near(c[i], want, 1e-5, "matmul16 n = 1", i);
        }
    }
    const char *isa = getenv("OC_TILE_ISA");
    bool bf16k = (!isa || !*isa) && __builtin_cpu_supports("amx-bf16");
    const char *p32 = oc_tile_matmul_path_shape(OC_BFLOAT16, M, N, K, 0);
    if (bf16k) test_assert_contains(p32, "exact products summed in float32");
    else test_assert_contains(p32, "widened to float32");
    test_assert_contains(oc_tile_matmul_path_shape(OC_BFLOAT16, 31, N, K, 0), "widened to float32");
    /* wrong shapes and dtypes: clear errors */
    oc_tensor ta = mk(a, OC_FLOAT32, M, K), tb = mk(b, OC_FLOAT32, N, K), tc = mk(c, OC_FLOAT32, M, N);
    assert_int_equal(run("tiletest::tcase", &tc, &ta, &tb, 70), OC_EKERNEL);
    test_assert_contains(oc_errmsg(), "oc_tile_matmul: c is 67 x 45, op(a) 67 x 91, op(b) 45 x 91");
    assert_non_null(strstr(oc_tile_matmul_path(OC_FLOAT32), "BLIS"));
}

/* The float32 paths by shape and layout: libxsmm's small products (when
 * built with it and the CPU has AVX2+FMA), their transposed-operand
 * copies (8 x 8 blocks and the tails), and BLIS for what libxsmm does not
 * take (a dim over 256, c with a column stride); the same bits twice. */
static void test_matmul_paths(void **state)
{
    (void)state;
    static const int shapes[][3] = {{64, 64, 64}, {128, 96, 128}, {13, 17, 19}, {1, 9, 5}, {9, 1, 5}, {7, 8, 1},
                                    {300, 24, 40}, {24, 260, 16}, {16, 24, 270}};
    enum { MAXE = 300 * 300 };
    static float a[MAXE], b[MAXE], c[MAXE], c2[MAXE];
    static double ref[MAXE];
    fill(a, MAXE, 21);
    fill(b, MAXE, 22);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
        for (unsigned flags = 0; flags < 8; flags++) {
            bool ccol = flags & 4; /* c column-major: a column stride */
            oc_tensor ta = flags & OC_TILE_TRANS_A ? mk(a, OC_FLOAT32, k, m) : mk(a, OC_FLOAT32, m, k);
            oc_tensor tb = flags & OC_TILE_TRANS_B ? mk(b, OC_FLOAT32, n, k) : mk(b, OC_FLOAT32, k, n);
            mm_ref(ref, a, b, m, n, k, flags & 3);
            for (int rep = 0; rep < 2; rep++) {
                float *cp = rep ? c2 : c;
                for (int i = 0; i < m * n; i++) cp[i] = 0.5f; /* accumulates: c += a b */
                oc_tensor tc = mk(cp, OC_FLOAT32, m, n);
                if (ccol) tc.strides[0] = 1, tc.strides[1] = m;
                assert_int_equal(run("tiletest::tcase", &tc, &ta, &tb, 70 + (int)(flags & 3)), OC_OK);
            }
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    int64_t at = ccol ? (int64_t)j * m + i : (int64_t)i * n + j;
                    near(c[at], ref[i * n + j] + 0.5, 1e-5, "matmul shape",
                         (int64_t)si * 1000000 + flags * 100000 + at);
                }
            assert_memory_equal(c, c2, (size_t)(m * n) * sizeof(float));
        }
    }
    const char *path = oc_tile_matmul_path(OC_FLOAT32), *env = getenv("OC_TILE_XSMM");
    print_message("float32 path: %s\n", path);
    assert_non_null(strstr(path, "BLIS"));
#if defined(__x86_64__)
    bool xsmm = OC_TILE_XSMM && !(env && !strcmp(env, "0")) && __builtin_cpu_supports("avx2") &&
                __builtin_cpu_supports("fma");
#else
    bool xsmm = false; /* libxsmm is used on x86-64 only */
#endif
    assert_int_equal(strstr(path, "libxsmm") != NULL, xsmm);
}

static void test_matmul_int8(void **state)
{
    (void)state;
    static int8_t a[M * K], b[K * N];
    static int32_t c[M * N];
    for (int i = 0; i < M * K; i++) a[i] = (int8_t)((i * 37) % 255 - 127);
    for (int i = 0; i < K * N; i++) b[i] = (int8_t)((i * 91) % 255 - 127);
    for (unsigned flags = 0; flags < 4; flags++) {
        oc_tensor ta = flags & OC_TILE_TRANS_A ? mk(a, OC_INT8, K, M) : mk(a, OC_INT8, M, K);
        oc_tensor tb = flags & OC_TILE_TRANS_B ? mk(b, OC_INT8, N, K) : mk(b, OC_INT8, K, N);
        for (int i = 0; i < M * N; i++) c[i] = 3;
        oc_tensor tc = mk(c, OC_INT32, M, N);
        assert_int_equal(run("tiletest::tcase", &tc, &ta, &tb, 70 + (int)flags), OC_OK);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                int32_t s = 3;
                for (int p = 0; p < K; p++)
                    s += (flags & OC_TILE_TRANS_A ? a[p * M + i] : a[i * K + p]) *
                         (flags & OC_TILE_TRANS_B ? b[j * K + p] : b[p * N + j]);
                assert_int_equal(c[i * N + j], s);
            }
    }
    const char *path = oc_tile_matmul_path(OC_INT8);
    print_message("int8 path: %s\n", path);
    assert_non_null(strstr(path, "portable int32 loop"));
}

static void test_tcm_limits(void **state)
{
    (void)state;
    float o[8];
    oc_tensor out = mk(o, OC_FLOAT32, 1, 8);
    assert_int_equal(run("tiletest::tcase", &out, &out, &out, 80), OC_ENOMEM);
    test_assert_contains(oc_errmsg(), "oc_tile_alloc: a 1048576 x 1024 float32 tile needs 4294967296 bytes of TCM");
    assert_int_equal(run("tiletest::tcase", &out, &out, &out, 81), OC_ENOMEM); /* the two fit, the third not */
    test_assert_contains(oc_errmsg(), "oc_tile_alloc");
    assert_int_equal(run("tiletest::tcase", &out, &out, &out, 82), OC_OK);
    assert_true(o[0] >= 32 * 1024 && o[1] >= 512 * 1024);
    assert_true(o[3] >= 1024 * 1024 && o[3] >= o[1]); /* the TCM follows L2, at least 1 MiB */
    assert_true(o[2] >= 120); /* two float32 120 x 1024 tiles fit (NKI's two 128 x 512 too) */
}

/* The cache sizes come from sysfs, read once (a kernel asks at every call):
 * the same answer each time, and the one sysfs gives (or the floor). */
static void test_cache_sizes(void **state)
{
    (void)state;
    size_t want[2] = {32 * 1024, 512 * 1024};
    for (int k = 0; k < 2; k++) {
        char path[80];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", k ? 2 : 0);
        FILE *f = fopen(path, "r");
        unsigned long n = 0;
        char unit = 0;
        if (f && fscanf(f, "%lu%c", &n, &unit) >= 1) {
            n *= unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1;
            if (n > want[k]) want[k] = n;
        }
        if (f) fclose(f);
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(oc_tile_l1_bytes(), want[0]);
        assert_int_equal(oc_tile_l2_bytes(), want[1]);
    }
}

#ifdef EXP_REF
/* libmvec's AVX2 expf on x[0..n), n a multiple of 8. */
__attribute__((target("avx2,fma"))) static void exp_ref(float *d, const float *x, int64_t n)
{
    for (int64_t j = 0; j < n; j += 8)
        _mm256_storeu_ps(d + j, _ZGVdN8v_expf(_mm256_loadu_ps(x + j)));
}
#endif

/* The tile EXP's AVX-512 and AVX2 kernels give libmvec's AVX2 expf bit
 * for bit: every float in [-104, 89] on a CPU with AVX-512 (every 4099th
 * elsewhere, and under valgrind), with Inf, NaN, in place and tails of every length. */
static void test_exp_bits(void **state)
{
    (void)state;
#ifdef EXP_REF
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        assert_int_equal(oc__tile_exp_run(NULL, NULL, 0, 2), 0); /* the plain loop: no reference */
        return;
    }
    const char *cap = getenv("OC_TILE_ISA"); /* avx2 or portable: a lower path */
    int lim = !cap ? 2 : !strcmp(cap, "portable") ? 0 : !strcmp(cap, "avx2") ? 1 : 2;
    int best = oc__tile_exp_run(NULL, NULL, 0, 2);
    assert_int_equal(best, lim < 1 ? 0 : lim < 2 || !__builtin_cpu_supports("avx512f") ? 1 : 2);
    if (best == 0) return; /* the plain loop: libmvec's and libm's own bits */
    uint32_t step = best == 2 && !RUNNING_ON_VALGRIND ? 1 : 4099;
    enum { N = 1 << 16 };
    static float x[N], want[N], got[N];
    /* [-104, -0] by bits down from -0, then [0, 89] up from 0 */
    const uint32_t ends[2][2] = {{0x80000000u, 0xc2d00000u}, {0u, 0x42b20000u}};
    uint64_t checked = 0;
    for (int half = 0; half < 2; half++) {
        for (uint64_t u = ends[half][0]; u <= ends[half][1];) {
            int64_t n = 0;
            for (; n < N && u <= ends[half][1]; n++, u += step) {
                uint32_t b = (uint32_t)u;
                memcpy(&x[n], &b, 4);
            }
            for (; n % 8; n++) x[n] = 0.0f;
            exp_ref(want, x, n);
            for (int path = 1; path <= best; path++) {
                assert_int_equal(oc__tile_exp_run(got, x, n, path), path);
                if (memcmp(got, want, (size_t)n * 4) == 0) continue;
                for (int64_t i = 0; i < n; i++)
                    if (memcmp(&got[i], &want[i], 4))
                        fail_msg("exp path %d: x = %.9g: got %.9g, libmvec %.9g", path, x[i],
                                 got[i], want[i]);
            }
            checked += (uint64_t)n;
        }
    }
    print_message("exp: %llu inputs, paths 1..%d, bit for bit\n", (unsigned long long)checked,
                  best);
    /* Inf, NaN, overflow and underflow lanes (the scalar expf), and row
     * tails of 1..40 elements at odd offsets: each element as in whole rows */
    float sp[16] = {INFINITY, -INFINITY, NAN, 88.8f, -103.9f, 89.5f, -150.0f, 0.0f,
                    -0.0f, 1e-30f, -87.5f, 87.3f, 87.4f, -87.34f, 1.0f, -1.0f};
    exp_ref(want, sp, 16);
    for (int path = 1; path <= best; path++) {
        oc__tile_exp_run(got, sp, 16, path);
        for (int i = 0; i < 16; i++)
            if (memcmp(&got[i], &want[i], 4) && !(isnan(got[i]) && isnan(want[i])))
                fail_msg("exp path %d: x = %.9g: got %.9g, libmvec %.9g", path, sp[i], got[i],
                         want[i]);
    }
    /* in place, Inf/NaN/overflow lanes spread over several of its blocks */
    for (int i = 0; i < 600; i++) x[i] = sp[i % 16] + (i % 7 ? 0.0f : 0.25f);
    exp_ref(want, x, 600);
    for (int path = 1; path <= best; path++) {
        memcpy(got, x, 600 * 4);
        oc__tile_exp_run(got, got, 600, path);
        for (int i = 0; i < 600; i++)
            if (memcmp(&got[i], &want[i], 4) && !(isnan(got[i]) && isnan(want[i])))
                fail_msg("exp path %d in place: x = %.9g: got %.9g, libmvec %.9g", path, x[i],
                         got[i], want[i]);
    }
    fill(x, 48, 3);
    exp_ref(want, x, 48);
    for (int path = 1; path <= best; path++)
        for (int off = 0; off < 8; off++)
            for (int64_t n = 1; n <= 40; n++) {
                memset(got, 0xff, 48 * 4);
                oc__tile_exp_run(got + off, x + off, n, path);
                assert_memory_equal(got + off, want + off, (size_t)n * 4);
                uint32_t canary;
                memcpy(&canary, &got[off + n], 4);
                assert_int_equal(canary, 0xffffffffu); /* nothing past the row */
            }
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_store_window),
        cmocka_unit_test(test_binary_broadcast),
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_moments),
        cmocka_unit_test(test_normalize_ahead),
        cmocka_unit_test(test_activation_reduce),
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_exp_bits),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_transpose_scan_select),
        cmocka_unit_test(test_conversions),
        cmocka_unit_test(test_matmul_float),
        cmocka_unit_test(test_matmul_paths),
        cmocka_unit_test(test_matmul_int8),
        cmocka_unit_test(test_tcm_limits),
        cmocka_unit_test(test_cache_sizes),
    };
    int rc = cmocka_run_group_tests_name("tile", tests, setup, teardown);
    oc_engine_shutdown();
    return rc;
}
