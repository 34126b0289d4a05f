/* tests/c/test_tensor_ops.c — the in-kernel tensor library (tensor_ops.h),
 * called outside a kernel: results are owned by the test and errors come
 * back as NULL with oc_errcode()/oc_errmsg() set.
 *
 * Values go in and out through float64 (oc_to_dtype), so every dtype is
 * checked against plain double arithmetic.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "support/runner.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/internal.h"
#include "ops/ops_internal.h"
#include "opcore/tensor_ops.h"

/* ---- helpers ------------------------------------------------------------- */

/* every tensor a test creates is freed by the teardown */
#define MAX_KEEP 512
static oc_tensor *kept[MAX_KEEP];
static int nkept;

static oc_tensor *keep(oc_tensor *t)
{
    assert_non_null(t);
    assert_true(nkept < MAX_KEEP);
    kept[nkept++] = t;
    return t;
}

static int free_all(void **state)
{
    (void)state;
    while (nkept > 0)
        oc_tensor_free(kept[--nkept]);
    oc_clear_error();
    return 0;
}

/* A tensor of `dt` holding v (row-major), made by converting a float64 view. */
static oc_tensor *mk(oc_dtype dt, int ndim, const int64_t *sizes, const double *v)
{
    oc_tensor src;
    assert_int_equal(oc_tensor_init(&src, (void *)v, OC_FLOAT64, ndim, sizes), OC_OK);
    return keep(oc_to_dtype(&src, dt));
}

/* A view with explicit strides over data. */
static oc_tensor view(void *data, oc_dtype dt, int ndim, const int64_t *sizes,
                      const int64_t *strides)
{
    oc_tensor t;
    assert_int_equal(oc_tensor_init_strided(&t, data, dt, ndim, sizes, strides), OC_OK);
    return t;
}

/* Compare t's elements (row-major, any layout) with want, within tol. */
static void expect_vals(const oc_tensor *t, const double *want, int64_t n, double tol)
{
    assert_non_null(t);
    assert_int_equal(oc_numel(t), n);
    oc_tensor *d = keep(oc_to_dtype(t, OC_FLOAT64));
    const double *got = (const double *)d->data;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(want[i])) {
            assert_true(isnan(got[i]));
            continue;
        }
        if (fabs(got[i] - want[i]) > tol * (1 + fabs(want[i]))) {
            print_error("element %lld: got %.9g, want %.9g\n", (long long)i, got[i], want[i]);
            fail();
        }
    }
}

static void expect_error(const void *result, oc_status code, const char *needle)
{
    assert_null(result);
    assert_int_equal(oc_errcode(), code);
    if (!strstr(oc_errmsg(), needle)) {
        print_error("message '%s' lacks '%s'\n", oc_errmsg(), needle);
        fail();
    }
    oc_clear_error();
}

static const oc_dtype FLOATS[] = {OC_FLOAT32, OC_FLOAT64, OC_FLOAT16, OC_BFLOAT16};
static const double FTOL[] = {1e-6, 1e-12, 2e-3, 1.6e-2}; /* relative, per FLOATS */
#define NFLOATS 4

/* ---- factories ----------------------------------------------------------- */

static void test_factories(void **state)
{
    (void)state;
    const oc_dtype dts[] = {OC_FLOAT32, OC_FLOAT16, OC_BFLOAT16, OC_INT64, OC_UINT8, OC_BOOL};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        oc_tensor *z = keep(oc_zeros(dts[k], OC_SHAPE(2, 3)));
        assert_int_equal(z->dtype, dts[k]);
        assert_int_equal(z->ndim, 2);
        assert_true(oc_is_contiguous(z));
        expect_vals(z, (double[]){0, 0, 0, 0, 0, 0}, 6, 0);
        expect_vals(keep(oc_ones(dts[k], OC_SHAPE(3))), (double[]){1, 1, 1}, 3, 0);
        oc_tensor *e = keep(oc_empty(dts[k], OC_SHAPE(4, 1)));
        assert_int_equal(oc_numel(e), 4);
        expect_vals(keep(oc_eye(dts[k], 2, 3)), (double[]){1, 0, 0, 0, 1, 0}, 6, 0);
        expect_vals(keep(oc_eye(dts[k], 3, 2)), (double[]){1, 0, 0, 1, 0, 0}, 6, 0);
    }
}

static void test_full(void **state)
{
    (void)state;
    expect_vals(keep(oc_full(OC_FLOAT32, OC_SHAPE(2), 2.5)), (double[]){2.5, 2.5}, 2, 0);
    expect_vals(keep(oc_full(OC_INT32, OC_SHAPE(2), 3.7)), (double[]){3, 3}, 2, 0);
    expect_vals(keep(oc_full(OC_INT32, OC_SHAPE(1), -3.7)), (double[]){-3}, 1, 0);
    expect_vals(keep(oc_full(OC_BOOL, OC_SHAPE(2), 2)), (double[]){1, 1}, 2, 0);
    expect_vals(keep(oc_full(OC_FLOAT16, OC_SHAPE(1), 1.0 / 3)), (double[]){0.333251953125}, 1, 0);
    expect_vals(keep(oc_full(OC_BFLOAT16, OC_SHAPE(1), 1.0 / 3)), (double[]){0.333984375}, 1, 0);
}

static void test_zero_dim_and_empty(void **state)
{
    (void)state;
    /* 0-dim and empty tensors */
    oc_tensor *s = keep(oc_full(OC_FLOAT64, 0, NULL, 7));
    assert_int_equal(s->ndim, 0);
    expect_vals(s, (double[]){7}, 1, 0);
    oc_tensor *empty = keep(oc_ones(OC_FLOAT32, OC_SHAPE(0, 3)));
    assert_int_equal(oc_numel(empty), 0);
    assert_int_equal(oc_numel(keep(oc_eye(OC_FLOAT32, 0, 0))), 0);
}

static void test_like_factories(void **state)
{
    (void)state;
    /* _like: shape and dtype of a (non-contiguous) source, contiguous result */
    int16_t buf[6] = {1, 2, 3, 4, 5, 6};
    oc_tensor tv = view(buf, OC_INT16, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3});
    oc_tensor *likes[] = {keep(oc_empty_like(&tv)), keep(oc_zeros_like(&tv)),
                          keep(oc_ones_like(&tv)), keep(oc_full_like(&tv, -4))};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(likes[k]->dtype, OC_INT16);
        assert_true(oc_same_shape(likes[k], &tv));
        assert_true(oc_is_contiguous(likes[k]));
    }
    expect_vals(likes[1], (double[]){0, 0, 0, 0, 0, 0}, 6, 0);
    expect_vals(likes[2], (double[]){1, 1, 1, 1, 1, 1}, 6, 0);
    expect_vals(likes[3], (double[]){-4, -4, -4, -4, -4, -4}, 6, 0);
}

/* ---- conversion, copy_, fill_ -------------------------------------------- */

/* what the conversions convert: rounding, saturation, NaN, overflow */
static const double conv_v[] = {-1.5, 0, 2.7, 300, -300, NAN, 1e30, 0.5};

static void test_to_dtype(void **state)
{
    (void)state;
    oc_tensor *f = mk(OC_FLOAT64, OC_SHAPE(8), conv_v);
    expect_vals(keep(oc_to_dtype(f, OC_UINT8)), (double[]){0, 0, 2, 255, 0, 0, 255, 0}, 8, 0);
    expect_vals(keep(oc_to_dtype(f, OC_INT8)), (double[]){-1, 0, 2, 127, -128, 0, 127, 0}, 8, 0);
    expect_vals(keep(oc_to_dtype(f, OC_INT64)),
                (double[]){-1, 0, 2, 300, -300, 0, (double)INT64_MAX, 0}, 8, 0);
    expect_vals(keep(oc_to_dtype(f, OC_BOOL)), (double[]){1, 0, 1, 1, 1, 1, 1, 1}, 8, 0);
    expect_vals(keep(oc_to_dtype(f, OC_FLOAT32)),
                (double[]){-1.5, 0, 2.7f, 300, -300, NAN, 1e30f, 0.5}, 8, 0);
    expect_vals(keep(oc_to_dtype(f, OC_FLOAT16)),
                (double[]){-1.5, 0, 2.69921875, 300, -300, NAN, INFINITY, 0.5}, 8, 0);
}

static void test_to_same_dtype_copies(void **state)
{
    (void)state;
    /* same dtype: a contiguous copy, not the same tensor */
    oc_tensor *f = mk(OC_FLOAT64, OC_SHAPE(8), conv_v);
    oc_tensor *c = keep(oc_to_dtype(f, OC_FLOAT64));
    assert_ptr_not_equal(c->data, f->data);
    expect_vals(c, conv_v, 8, 0);
}

static void test_to_dtype_int64_exact(void **state)
{
    (void)state;
    /* int64 beyond 2^53 survives a same-dtype copy exactly */
    int64_t big[2] = {INT64_MAX, INT64_MIN + 1};
    oc_tensor bv = view(big, OC_INT64, 1, (int64_t[]){2}, (int64_t[]){1});
    oc_tensor *bc = keep(oc_to_dtype(&bv, OC_INT64));
    assert_memory_equal(bc->data, big, sizeof big);
}

static void test_copy_into_transposed(void **state)
{
    (void)state;
    /* copy a contiguous [2, 3] into a transposed view, converting dtypes */
    float dst_buf[6] = {0};
    oc_tensor dst = view(dst_buf, OC_FLOAT32, 2, (int64_t[]){2, 3}, (int64_t[]){1, 2});
    oc_tensor *src = mk(OC_INT32, OC_SHAPE(2, 3), (double[]){1, 2, 3, 4, 5, 6});
    assert_ptr_equal(oc_copy_(&dst, src), &dst);
    const float want_buf[6] = {1, 4, 2, 5, 3, 6}; /* storage order of the view */
    assert_memory_equal(dst_buf, want_buf, sizeof want_buf);
    expect_vals(&dst, (double[]){1, 2, 3, 4, 5, 6}, 6, 0);
}

static void test_copy_reversed(void **state)
{
    (void)state;
    /* same-dtype strided copy with a negative stride (reversal) */
    double rev_src[4] = {1, 2, 3, 4};
    oc_tensor rs = view(rev_src + 3, OC_FLOAT64, 1, (int64_t[]){4}, (int64_t[]){-1});
    oc_tensor *rd = keep(oc_zeros(OC_FLOAT64, OC_SHAPE(4)));
    oc_copy_(rd, &rs);
    expect_vals(rd, (double[]){4, 3, 2, 1}, 4, 0);
}

static void test_copy_bfloat16_to_float16(void **state)
{
    (void)state;
    /* bfloat16 -> float16 */
    oc_tensor *h = keep(oc_zeros(OC_FLOAT16, OC_SHAPE(3)));
    oc_copy_(h, mk(OC_BFLOAT16, OC_SHAPE(3), (double[]){0.5, -2, 65504}));
    expect_vals(h, (double[]){0.5, -2, INFINITY} /* bf16 rounds 65504 up to 65536 */, 3, 0);
}

static void test_fill_strided(void **state)
{
    (void)state;
    /* fill_ touches only the elements of a strided view (every 2nd one) */
    int32_t ibuf[6] = {9, 9, 9, 9, 9, 9};
    oc_tensor every2 = view(ibuf, OC_INT32, 1, (int64_t[]){3}, (int64_t[]){2});
    assert_ptr_equal(oc_fill_(&every2, -7.9), &every2);
    const int32_t iwant[6] = {-7, 9, -7, 9, -7, 9};
    assert_memory_equal(ibuf, iwant, sizeof iwant);
}

static void test_fill_bool(void **state)
{
    (void)state;
    oc_tensor *b = keep(oc_zeros(OC_BOOL, OC_SHAPE(2, 2)));
    oc_fill_(b, 0.25);
    expect_vals(b, (double[]){1, 1, 1, 1}, 4, 0);
}

/* ---- unary ops ----------------------------------------------------------- */

typedef oc_tensor *(*unary_fn)(const oc_tensor *);
typedef oc_tensor *(*unary_out_fn)(oc_tensor *, const oc_tensor *);

static const struct {
    const char *name;
    unary_fn fn;
    unary_out_fn out;
    double (*ref)(double);
    double lo, hi; /* input range */
} FLOAT_UNARY[] = {
    {"abs", oc_abs, oc_abs_out, fabs, -3, 3},
    {"ceil", oc_ceil, oc_ceil_out, ceil, -3, 3},
    {"floor", oc_floor, oc_floor_out, floor, -3, 3},
    {"sin", oc_sin, oc_sin_out, sin, -3, 3},
    {"cos", oc_cos, oc_cos_out, cos, -3, 3},
    {"tan", oc_tan, oc_tan_out, tan, -1.2, 1.2},
    {"log", oc_log, oc_log_out, log, 0.1, 10},
    {"log2", oc_log2, oc_log2_out, log2, 0.1, 10},
    {"log10", oc_log10, oc_log10_out, log10, 0.1, 10},
    {"exp", oc_exp, oc_exp_out, exp, -3, 3},
};

static double neg_ref(double x) { return -x; }

/* 37 elements: two vector blocks and a tail */
#define NU 37

static void check_unary_float(unary_fn fn, unary_out_fn out_fn, double (*ref)(double),
                              double lo, double hi)
{
    double in[NU], want[NU];
    for (int d = 0; d < NFLOATS; d++) {
        /* inputs as the dtype rounds them, so the reference sees the same */
        for (int i = 0; i < NU; i++)
            in[i] = lo + (hi - lo) * i / (NU - 1);
        oc_tensor *a = mk(FLOATS[d], OC_SHAPE(NU), in);
        oc_tensor *a64 = keep(oc_to_dtype(a, OC_FLOAT64));
        for (int i = 0; i < NU; i++)
            want[i] = ref(((double *)a64->data)[i]);
        expect_vals(keep(fn(a)), want, NU, FTOL[d]);
        oc_tensor *o = keep(oc_empty_like(a));
        assert_ptr_equal(out_fn(o, a), o);
        expect_vals(o, want, NU, FTOL[d]);
        /* in place: out is a */
        assert_ptr_equal(out_fn(a, a), a);
        expect_vals(a, want, NU, FTOL[d]);
    }
}

static void test_unary_float(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof FLOAT_UNARY / sizeof FLOAT_UNARY[0]; k++)
        check_unary_float(FLOAT_UNARY[k].fn, FLOAT_UNARY[k].out, FLOAT_UNARY[k].ref,
                          FLOAT_UNARY[k].lo, FLOAT_UNARY[k].hi);
    check_unary_float(oc_neg, oc_neg_out, neg_ref, -3, 3);
    /* abs(-0.0) is +0.0; NaN stays NaN */
    oc_tensor *z = keep(oc_abs(mk(OC_FLOAT32, OC_SHAPE(2), (double[]){-0.0, NAN})));
    assert_false(signbit(((float *)z->data)[0]));
    assert_true(isnan(((float *)z->data)[1]));
    expect_vals(keep(oc_log(mk(OC_FLOAT32, OC_SHAPE(2), (double[]){0, -1}))),
                (double[]){-INFINITY, NAN}, 2, 0);
}

static void test_unary_int(void **state)
{
    (void)state;
    const double v[] = {-5, -1, 0, 3, 127};
    const oc_dtype dts[] = {OC_INT8, OC_INT16, OC_INT32, OC_INT64};
    for (int k = 0; k < 4; k++) {
        oc_tensor *a = mk(dts[k], OC_SHAPE(5), v);
        expect_vals(keep(oc_abs(a)), (double[]){5, 1, 0, 3, 127}, 5, 0);
        expect_vals(keep(oc_neg(a)), (double[]){5, 1, 0, -3, -127}, 5, 0);
        expect_vals(keep(oc_ceil(a)), v, 5, 0);
        expect_vals(keep(oc_floor(a)), v, 5, 0);
        expect_vals(keep(oc_bitwise_not(a)), (double[]){4, 0, -1, -4, -128}, 5, 0);
    }
    /* wrap-around like PyTorch: abs(INT32_MIN) == INT32_MIN, -(uint8)1 == 255 */
    oc_tensor *m = mk(OC_INT32, OC_SHAPE(1), (double[]){INT32_MIN});
    expect_vals(keep(oc_abs(m)), (double[]){INT32_MIN}, 1, 0);
    oc_tensor *u = mk(OC_UINT8, OC_SHAPE(3), (double[]){1, 0, 200});
    expect_vals(keep(oc_neg(u)), (double[]){255, 0, 56}, 3, 0);
    expect_vals(keep(oc_abs(u)), (double[]){1, 0, 200}, 3, 0);
    expect_vals(keep(oc_bitwise_not(u)), (double[]){254, 255, 55}, 3, 0);
    /* bool: bitwise_not is logical, ceil/floor the identity */
    oc_tensor *b = mk(OC_BOOL, OC_SHAPE(2), (double[]){1, 0});
    expect_vals(keep(oc_bitwise_not(b)), (double[]){0, 1}, 2, 0);
    expect_vals(keep(oc_ceil(b)), (double[]){1, 0}, 2, 0);
    expect_vals(keep(oc_floor(b)), (double[]){1, 0}, 2, 0);
}

static void test_clamp_pow_scalar(void **state)
{
    (void)state;
    const double v[] = {-3, -0.5, 0, 0.5, 3, NAN};
    for (int d = 0; d < NFLOATS; d++) {
        oc_tensor *a = mk(FLOATS[d], OC_SHAPE(6), v);
        expect_vals(keep(oc_clamp(a, -1, 1)), (double[]){-1, -0.5, 0, 0.5, 1, NAN}, 6, 0);
        expect_vals(keep(oc_clamp(a, -INFINITY, 0.25)), (double[]){-3, -0.5, 0, 0.25, 0.25, NAN},
                    6, 0);
        expect_vals(keep(oc_clamp(a, 2, 1)), (double[]){1, 1, 1, 1, 1, NAN}, 6, 0); /* lo > hi */
        oc_tensor *o = keep(oc_empty_like(a));
        oc_clamp_out(o, a, 0, INFINITY);
        expect_vals(o, (double[]){0, 0, 0, 0.5, 3, NAN}, 6, 0);
        expect_vals(keep(oc_pow_scalar(a, 2)), (double[]){9, 0.25, 0, 0.25, 9, NAN}, 6, FTOL[d]);
        oc_pow_scalar_out(o, a, 0.5);
        expect_vals(o, (double[]){NAN, NAN, 0, sqrt(0.5), sqrt(3), NAN}, 6, FTOL[d]);
    }
    oc_tensor *i = mk(OC_INT32, OC_SHAPE(4), (double[]){-100, -2, 5, 100});
    expect_vals(keep(oc_clamp(i, -3, 10)), (double[]){-3, -2, 5, 10}, 4, 0);
    expect_vals(keep(oc_clamp(i, -INFINITY, INFINITY)), (double[]){-100, -2, 5, 100}, 4, 0);
    oc_tensor *u = mk(OC_UINT8, OC_SHAPE(3), (double[]){0, 50, 255});
    expect_vals(keep(oc_clamp(u, 10, 1000)), (double[]){10, 50, 255}, 3, 0);
}

/* ---- binary ops ---------------------------------------------------------- */

static void test_binary_float(void **state)
{
    (void)state;
    double x[NU], y[NU], w_add[NU], w_sub[NU], w_mul[NU], w_div[NU], w_pow[NU];
    for (int d = 0; d < NFLOATS; d++) {
        for (int i = 0; i < NU; i++) {
            x[i] = 0.25 * (i + 1);
            y[i] = 1.5 - 0.125 * i;
        }
        oc_tensor *a = mk(FLOATS[d], OC_SHAPE(NU), x), *b = mk(FLOATS[d], OC_SHAPE(NU), y);
        for (int i = 0; i < NU; i++) {
            w_add[i] = x[i] + 2 * y[i];
            w_sub[i] = x[i] - 0.5 * y[i];
            w_mul[i] = x[i] * y[i];
            w_div[i] = x[i] / y[i];
            w_pow[i] = pow(x[i], y[i]);
        }
        double tol = FTOL[d] * 4;
        expect_vals(keep(oc_add(a, b, 2)), w_add, NU, tol);
        expect_vals(keep(oc_sub(a, b, 0.5)), w_sub, NU, tol);
        expect_vals(keep(oc_mul(a, b)), w_mul, NU, tol);
        expect_vals(keep(oc_div(a, b)), w_div, NU, tol);
        expect_vals(keep(oc_pow(a, b)), w_pow, NU, tol);
        oc_tensor *o = keep(oc_empty_like(a));
        assert_ptr_equal(oc_add_out(o, a, b, 2), o);
        expect_vals(o, w_add, NU, tol);
        oc_sub_out(o, a, b, 0.5);
        expect_vals(o, w_sub, NU, tol);
        oc_mul_out(o, a, b);
        expect_vals(o, w_mul, NU, tol);
        oc_div_out(o, a, b);
        expect_vals(o, w_div, NU, tol);
        oc_pow_out(o, a, b);
        expect_vals(o, w_pow, NU, tol);
        /* in place into b */
        oc_add_out(b, a, b, 2);
        expect_vals(b, w_add, NU, tol);
    }
}

static void test_binary_int_bool(void **state)
{
    (void)state;
    oc_tensor *a = mk(OC_INT32, OC_SHAPE(4), (double[]){1, -2, 12, 7});
    oc_tensor *b = mk(OC_INT32, OC_SHAPE(4), (double[]){3, 5, 10, -1});
    expect_vals(keep(oc_add(a, b, 1)), (double[]){4, 3, 22, 6}, 4, 0);
    expect_vals(keep(oc_add(a, b, -2)), (double[]){-5, -12, -8, 9}, 4, 0);
    expect_vals(keep(oc_sub(a, b, 1)), (double[]){-2, -7, 2, 8}, 4, 0);
    expect_vals(keep(oc_mul(a, b)), (double[]){3, -10, 120, -7}, 4, 0);
    expect_vals(keep(oc_bitwise_and(a, b)), (double[]){1 & 3, -2 & 5, 12 & 10, 7 & -1}, 4, 0);
    expect_vals(keep(oc_bitwise_or(a, b)), (double[]){1 | 3, -2 | 5, 12 | 10, 7 | -1}, 4, 0);
    oc_tensor *o = keep(oc_empty_like(a));
    oc_bitwise_and_out(o, a, b);
    expect_vals(o, (double[]){1, 4, 8, 7}, 4, 0);
    oc_bitwise_or_out(o, a, b);
    expect_vals(o, (double[]){3, -1, 14, -1}, 4, 0);

    /* int8 overflow wraps */
    oc_tensor *c = mk(OC_INT8, OC_SHAPE(2), (double[]){100, -100});
    expect_vals(keep(oc_add(c, c, 1)), (double[]){-56, 56}, 2, 0);
    expect_vals(keep(oc_mul(c, c)), (double[]){16, 16}, 2, 0);
    oc_tensor *u = mk(OC_UINT8, OC_SHAPE(2), (double[]){1, 200});
    expect_vals(keep(oc_sub(u, u, 2)), (double[]){255, 56}, 2, 0);
    oc_tensor *l = mk(OC_INT64, OC_SHAPE(1), (double[]){4e15});
    expect_vals(keep(oc_add(l, l, 3)), (double[]){16e15}, 1, 0);

    /* bool: add is or, mul is and, bitwise ops are logical */
    oc_tensor *p = mk(OC_BOOL, OC_SHAPE(4), (double[]){0, 0, 1, 1});
    oc_tensor *q = mk(OC_BOOL, OC_SHAPE(4), (double[]){0, 1, 0, 1});
    expect_vals(keep(oc_add(p, q, 1)), (double[]){0, 1, 1, 1}, 4, 0);
    expect_vals(keep(oc_mul(p, q)), (double[]){0, 0, 0, 1}, 4, 0);
    expect_vals(keep(oc_bitwise_and(p, q)), (double[]){0, 0, 0, 1}, 4, 0);
    expect_vals(keep(oc_bitwise_or(p, q)), (double[]){0, 1, 1, 1}, 4, 0);
    /* a non-0/1 byte in a bool tensor still reads as true */
    uint8_t raw[4] = {2, 0, 4, 0};
    oc_tensor rb = view(raw, OC_BOOL, 1, (int64_t[]){4}, (int64_t[]){1});
    expect_vals(keep(oc_bitwise_and(&rb, q)), (double[]){0, 0, 0, 0}, 4, 0);
    expect_vals(keep(oc_bitwise_or(&rb, q)), (double[]){1, 1, 1, 1}, 4, 0);
    expect_vals(keep(oc_bitwise_not(&rb)), (double[]){0, 1, 0, 1}, 4, 0);
}

/* ---- layouts ------------------------------------------------------------- */

static void test_noncontiguous(void **state)
{
    (void)state;
    /* a: [3, 4] transposed view of a [4, 3] buffer; b: every other column of
     * a [3, 8] buffer; c: rows reversed (negative stride); d: broadcast row
     * (zero stride) */
    float abuf[12], bbuf[24], cbuf[12], dbuf[4] = {10, 20, 30, 40};
    for (int i = 0; i < 12; i++)
        abuf[i] = (float)i, cbuf[i] = (float)(100 + i);
    for (int i = 0; i < 24; i++)
        bbuf[i] = (float)(i * i);
    oc_tensor a = view(abuf, OC_FLOAT32, 2, (int64_t[]){3, 4}, (int64_t[]){1, 3});
    oc_tensor b = view(bbuf, OC_FLOAT32, 2, (int64_t[]){3, 4}, (int64_t[]){8, 2});
    oc_tensor c = view(cbuf + 8, OC_FLOAT32, 2, (int64_t[]){3, 4}, (int64_t[]){-4, 1});
    oc_tensor d = view(dbuf, OC_FLOAT32, 2, (int64_t[]){3, 4}, (int64_t[]){0, 1});
    a.flags |= OC_TENSOR_READONLY; /* inputs may be read-only */
    double av[12], bv[12], cv[12], dv[12], want[12];
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 4; k++) {
            av[r * 4 + k] = abuf[k * 3 + r];
            bv[r * 4 + k] = bbuf[r * 8 + k * 2];
            cv[r * 4 + k] = cbuf[(2 - r) * 4 + k];
            dv[r * 4 + k] = dbuf[k];
        }
    for (int i = 0; i < 12; i++)
        want[i] = av[i] + bv[i];
    expect_vals(keep(oc_add(&a, &b, 1)), want, 12, 0);
    for (int i = 0; i < 12; i++)
        want[i] = cv[i] * dv[i];
    expect_vals(keep(oc_mul(&c, &d)), want, 12, 0);
    for (int i = 0; i < 12; i++)
        want[i] = -av[i];
    expect_vals(keep(oc_neg(&a)), want, 12, 0);

    /* out into a strided view (columns 1, 3, 5, 7 of a [3, 8] buffer) */
    float obuf[24] = {0};
    oc_tensor o = view(obuf + 1, OC_FLOAT32, 2, (int64_t[]){3, 4}, (int64_t[]){8, 2});
    oc_sub_out(&o, &b, &a, 1);
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 4; k++) {
            assert_true(obuf[r * 8 + 2 * k] == 0); /* untouched */
            assert_true(obuf[r * 8 + 2 * k + 1] == (float)(bv[r * 4 + k] - av[r * 4 + k]));
        }

    /* bfloat16 and bool through strided views */
    uint16_t hb[8];
    for (int i = 0; i < 8; i++)
        hb[i] = oc_f32_to_bf16((float)i - 4);
    oc_tensor hv = view(hb + 7, OC_BFLOAT16, 2, (int64_t[]){2, 2}, (int64_t[]){-4, -2});
    expect_vals(keep(oc_abs(&hv)), (double[]){3, 1, 1, 3}, 4, 0);
    uint8_t bb[6] = {1, 0, 0, 1, 1, 0};
    oc_tensor bt = view(bb, OC_BOOL, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3});
    expect_vals(keep(oc_bitwise_not(&bt)), (double[]){0, 0, 1, 0, 1, 1}, 6, 0);

    /* a large, 3-d permuted case against the contiguous result */
    enum { X = 7, Y = 33, Z = 5 };
    oc_tensor *big = keep(oc_empty(OC_FLOAT64, OC_SHAPE(X, Y, Z)));
    for (int i = 0; i < X * Y * Z; i++)
        ((double *)big->data)[i] = sin(i);
    oc_tensor perm = view(big->data, OC_FLOAT64, 3, (int64_t[]){Z, X, Y},
                          (int64_t[]){1, Y * Z, Z});
    oc_tensor *pc = keep(oc_to_dtype(&perm, OC_FLOAT64)); /* contiguous copy */
    oc_tensor *r1 = keep(oc_exp(&perm)), *r2 = keep(oc_exp(pc));
    assert_memory_equal(r1->data, r2->data, sizeof(double) * X * Y * Z);
}

static double visited[16];
static void record(void *p, int64_t i, void *ctx)
{
    (void)ctx;
    visited[i] = *(const double *)p;
}

/* oc__for_each walks row-major order of a transposed view */
static void test_for_each_row_major(void **state)
{
    (void)state;
    double buf[6] = {0, 1, 2, 3, 4, 5};
    oc_tensor t = view(buf, OC_FLOAT64, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3});
    oc__for_each(&t, record, NULL);
    const double want[6] = {0, 3, 1, 4, 2, 5};
    assert_memory_equal(visited, want, sizeof want);
}

/* load/store as double for each dtype */
static void test_load_store_as_double(void **state)
{
    (void)state;
    for (int d = 0; d < OC_NUM_DTYPES; d++) {
        oc_complex128 cell = 0; /* room for the largest element */
        oc__store_from_double(&cell, (oc_dtype)d, 2.0);
        assert_true(oc__load_as_double(&cell, (oc_dtype)d) == (d == OC_BOOL ? 1.0 : 2.0));
    }
}

/* ---- errors: one test per refused call ----------------------------------- */

/* The tensors the refused calls are given (zeros unless said). */
typedef struct {
    oc_tensor *a, *b, *d, *v; /* float32 [2, 4], float32 [2, 3], float64 [2, 4], float32 [8] */
    oc_tensor *i, *f, *bo;    /* [2] of int32, float32, bool */
    oc_tensor *ones, *ro;     /* float32 [3]: ones, and read-only zeros */
    oc_tensor meta;           /* float32 [3], no data */
} errs;

static int errs_setup(void **state)
{
    static errs e;
    e.a = keep(oc_zeros(OC_FLOAT32, OC_SHAPE(2, 4)));
    e.b = keep(oc_zeros(OC_FLOAT32, OC_SHAPE(2, 3)));
    e.d = keep(oc_zeros(OC_FLOAT64, OC_SHAPE(2, 4)));
    e.v = keep(oc_zeros(OC_FLOAT32, OC_SHAPE(8)));
    e.i = keep(oc_zeros(OC_INT32, OC_SHAPE(2)));
    e.f = keep(oc_zeros(OC_FLOAT32, OC_SHAPE(2)));
    e.bo = keep(oc_zeros(OC_BOOL, OC_SHAPE(2)));
    e.ones = keep(oc_ones(OC_FLOAT32, OC_SHAPE(3)));
    e.ro = keep(oc_zeros(OC_FLOAT32, OC_SHAPE(3)));
    e.ro->flags |= OC_TENSOR_READONLY;
    /* a meta tensor has no data to read outside a shape function */
    assert_int_equal(oc_tensor_init(&e.meta, NULL, OC_FLOAT32, 1, (int64_t[]){3}), OC_OK);
    e.meta.flags |= OC_TENSOR_META;
    *state = &e;
    return 0;
}

/* A test that `call`, on the fixture's tensors, fails with `code` and a
 * message holding `needle`. */
#define ERROR_TEST(name, call, code, needle) \
    static void name(void **state)           \
    {                                        \
        errs *e = *state;                    \
        (void)e;                             \
        expect_error(call, code, needle);    \
    }

/* ... and, refused for a read-only output, leaves it untouched. */
#define READ_ONLY_TEST(name, call, needle)                    \
    static void name(void **state)                           \
    {                                                        \
        errs *e = *state;                                    \
        expect_error(call, OC_EINVAL, needle);               \
        expect_vals(e->ro, (double[]){0, 0, 0}, 3, 0);       \
    }

/* shapes and dtypes must match: no broadcasting, no type promotion */
ERROR_TEST(test_error_add_shape, oc_add(e->a, e->b, 1), OC_EINVAL,
           "oc_add: argument 'b' has shape [2, 3], expected [2, 4] (no broadcasting)")
ERROR_TEST(test_error_mul_dtype, oc_mul(e->a, e->d), OC_EINVAL,
           "oc_mul: argument 'b' has dtype float64, expected float32 (no type promotion)")
ERROR_TEST(test_error_div_out_shape, oc_div_out(e->b, e->a, e->a), OC_EINVAL,
           "oc_div_out: argument 'out' has shape [2, 3], expected [2, 4]")
ERROR_TEST(test_error_exp_out_dtype, oc_exp_out(e->d, e->a), OC_EINVAL,
           "oc_exp_out: argument 'out' has dtype float64, expected float32")
ERROR_TEST(test_error_clamp_out_dtype, oc_clamp_out(e->d, e->a, 0, 1), OC_EINVAL,
           "oc_clamp_out: argument 'out'")
ERROR_TEST(test_error_copy_shape, oc_copy_(e->b, e->a), OC_EINVAL,
           "oc_copy_: argument 'src' has shape [2, 4], expected [2, 3]")
ERROR_TEST(test_error_add_null, oc_add(NULL, e->a, 1), OC_EINVAL,
           "oc_add: argument 'a' is NULL")
ERROR_TEST(test_error_sub_null, oc_sub(e->a, NULL, 1), OC_EINVAL,
           "oc_sub: argument 'b' is NULL")
ERROR_TEST(test_error_abs_out_null, oc_abs_out(NULL, e->a), OC_EINVAL,
           "oc_abs_out: argument 'out' is NULL")
ERROR_TEST(test_error_pow_rank, oc_pow(e->a, e->v), OC_EINVAL,
           "argument 'b' has shape [8], expected [2, 4]")

/* dtypes an op does not support, bad dtypes and sizes */
ERROR_TEST(test_error_sin_int, oc_sin(e->i), OC_EINVAL,
           "oc_sin: argument 'a' has dtype int32, expected one of float32, float64, "
                 "float16, bfloat16")
ERROR_TEST(test_error_log2_out_int, oc_log2_out(e->i, e->i), OC_EINVAL,
           "oc_log2_out: argument 'a' has dtype int32")
ERROR_TEST(test_error_bitwise_and_float, oc_bitwise_and(e->f, e->f), OC_EINVAL,
           "oc_bitwise_and: argument 'a' has dtype float32, expected one of int8")
ERROR_TEST(test_error_bitwise_or_float, oc_bitwise_or(e->f, e->f), OC_EINVAL,
           "oc_bitwise_or: argument 'a' has dtype float32")
ERROR_TEST(test_error_bitwise_not_float, oc_bitwise_not(e->f), OC_EINVAL,
           "oc_bitwise_not: argument 'a' has dtype float32")
ERROR_TEST(test_error_div_int, oc_div(e->i, e->i), OC_EINVAL,
           "oc_div: argument 'a' has dtype int32")
ERROR_TEST(test_error_pow_int, oc_pow(e->i, e->i), OC_EINVAL,
           "oc_pow: argument 'a' has dtype int32")
ERROR_TEST(test_error_pow_scalar_int, oc_pow_scalar(e->i, 2), OC_EINVAL,
           "oc_pow_scalar: argument 'a' has dtype int32")
ERROR_TEST(test_error_abs_bool, oc_abs(e->bo), OC_EINVAL,
           "oc_abs: argument 'a' has dtype bool")
ERROR_TEST(test_error_neg_bool, oc_neg(e->bo), OC_EINVAL,
           "oc_neg: argument 'a' has dtype bool")
ERROR_TEST(test_error_sub_bool, oc_sub(e->bo, e->bo, 1), OC_EINVAL,
           "oc_sub: argument 'a' has dtype bool")
ERROR_TEST(test_error_clamp_bool, oc_clamp(e->bo, 0, 1), OC_EINVAL,
           "oc_clamp: argument 'a' has dtype bool")
ERROR_TEST(test_error_add_int_fractional_alpha, oc_add(e->i, e->i, 0.5), OC_EINVAL,
           "oc_add: argument 'alpha' is 0.5, expected an integer for int32 tensors")
ERROR_TEST(test_error_zeros_bad_dtype, oc_zeros((oc_dtype)42, OC_SHAPE(2)), OC_EINVAL,
           "oc_zeros: argument 'dtype' is 42")
ERROR_TEST(test_error_to_dtype_bad_dtype, oc_to_dtype(e->f, (oc_dtype)-1), OC_EINVAL,
           "oc_to_dtype: argument 'dtype'")
ERROR_TEST(test_error_eye_negative, oc_eye(OC_FLOAT32, -1, 2), OC_EINVAL,
           "oc_eye")

READ_ONLY_TEST(test_error_add_out_read_only, oc_add_out(e->ro, e->ones, e->ones, 1),
               "oc_add_out: argument 'out' is read-only")
READ_ONLY_TEST(test_error_sin_out_read_only, oc_sin_out(e->ro, e->ones),
               "oc_sin_out: argument 'out' is read-only")
READ_ONLY_TEST(test_error_fill_read_only, oc_fill_(e->ro, 1),
               "oc_fill_: argument 't' is read-only")
READ_ONLY_TEST(test_error_copy_read_only, oc_copy_(e->ro, e->ones),
               "oc_copy_: argument 'dst' is read-only")

/* a meta tensor has no data to read outside a shape function */
ERROR_TEST(test_error_add_meta, oc_add(e->ones, &e->meta, 1), OC_EMETA,
           "oc_add: argument 'b'")
ERROR_TEST(test_error_exp_meta, oc_exp(&e->meta), OC_EMETA,
           "oc_exp: argument 'a'")
ERROR_TEST(test_error_neg_out_meta, oc_neg_out(&e->meta, e->ones), OC_EMETA,
           "oc_neg_out: argument 'out'")
ERROR_TEST(test_error_to_dtype_meta, oc_to_dtype(&e->meta, OC_INT32), OC_EMETA,
           "oc_to_dtype: argument 't'")

#define E(fn) cmocka_unit_test_setup_teardown(fn, errs_setup, free_all)

#define T(fn) cmocka_unit_test_teardown(fn, free_all)

static void test_dense(void **state)
{
    (void)state;
    float buf[24];
    oc_tensor t;
    oc_tensor_init_strided(&t, buf, OC_FLOAT32, 2, (int64_t[]){4, 6}, (int64_t[]){1, 4}); /* a transpose */
    assert_true(oc_is_dense(&t) && !oc_is_contiguous(&t));
    oc_tensor_init_strided(&t, buf, OC_FLOAT32, 2, (int64_t[]){4, 3}, (int64_t[]){6, 2}); /* a slice */
    assert_false(oc_is_dense(&t));
    oc_tensor_init_strided(&t, buf, OC_FLOAT32, 2, (int64_t[]){4, 3}, (int64_t[]){0, 1}); /* expanded */
    assert_false(oc_is_dense(&t));
    oc_tensor_init_strided(&t, buf, OC_FLOAT32, 3, (int64_t[]){2, 1, 12}, (int64_t[]){1, 99, 2});
    assert_true(oc_is_dense(&t)); /* a size-1 dim's stride does not matter */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense),
        T(test_factories),
        T(test_full),
        T(test_zero_dim_and_empty),
        T(test_like_factories),
        T(test_to_dtype),
        T(test_to_same_dtype_copies),
        T(test_to_dtype_int64_exact),
        T(test_copy_into_transposed),
        T(test_copy_reversed),
        T(test_copy_bfloat16_to_float16),
        T(test_fill_strided),
        T(test_fill_bool),
        T(test_unary_float),
        T(test_unary_int),       T(test_clamp_pow_scalar),
        T(test_binary_float),    T(test_binary_int_bool),
        T(test_noncontiguous),   T(test_for_each_row_major),
        T(test_load_store_as_double),
        E(test_error_add_shape),
        E(test_error_mul_dtype),
        E(test_error_div_out_shape),
        E(test_error_exp_out_dtype),
        E(test_error_clamp_out_dtype),
        E(test_error_copy_shape),
        E(test_error_add_null),
        E(test_error_sub_null),
        E(test_error_abs_out_null),
        E(test_error_pow_rank),
        E(test_error_sin_int),
        E(test_error_log2_out_int),
        E(test_error_bitwise_and_float),
        E(test_error_bitwise_or_float),
        E(test_error_bitwise_not_float),
        E(test_error_div_int),
        E(test_error_pow_int),
        E(test_error_pow_scalar_int),
        E(test_error_abs_bool),
        E(test_error_neg_bool),
        E(test_error_sub_bool),
        E(test_error_clamp_bool),
        E(test_error_add_int_fractional_alpha),
        E(test_error_zeros_bad_dtype),
        E(test_error_to_dtype_bad_dtype),
        E(test_error_eye_negative),
        E(test_error_add_out_read_only),
        E(test_error_sin_out_read_only),
        E(test_error_fill_read_only),
        E(test_error_copy_read_only),
        E(test_error_add_meta),
        E(test_error_exp_meta),
        E(test_error_neg_out_meta),
        E(test_error_to_dtype_meta),
    };
    return oc_test_run("tensor_ops", tests, NULL, NULL);
}
