/* complex64 and complex128 from C: the dtype vocabulary and DLPack, the
 * in-kernel tensor library (conversions, 16-byte copies, the arithmetic it
 * has for complex and the refusals it gives), kernels reading complex
 * through accessors, streams and the iterator, the examples/complex
 * rms_norm through the host API against a <complex.h> reference, and the
 * errors of a kernel written for float32 or declared with a complex
 * pointer. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/dlpack.h"
#include "opcore/engine.h"
#include "opcore/host.h"
#include "opcore/tensor_ops.h"
#include "support/oplib.h"

static void assert_msg(const char *needle) { test_assert_contains(oc_errmsg(), needle); }

static void assert_cclose(double complex got, double complex want, double tol, const char *what, int64_t i)
{
    if (!(cabs(got - want) <= tol * (1.0 + cabs(want))))
        fail_msg("%s[%lld]: got %.9g%+.9gj, want %.9g%+.9gj", what, (long long)i, creal(got), cimag(got), creal(want),
                 cimag(want));
}

/* ---- the dtypes ----------------------------------------------------------------- */

static void test_dtype_vocabulary(void **state)
{
    (void)state;
    static const struct { oc_dtype d; const char *name, *alias; size_t size; } want[] = {
        {OC_COMPLEX64, "complex64", "cfloat", 8}, {OC_COMPLEX128, "complex128", "cdouble", 16}};
    for (int i = 0; i < 2; i++) {
        oc_dtype d = want[i].d, back;
        assert_string_equal(oc_dtype_name(d), want[i].name);
        assert_int_equal(oc_dtype_size(d), want[i].size);
        assert_true(oc_dtype_is_complex(d));
        assert_false(oc_dtype_is_floating(d));
        assert_false(oc_dtype_is_integral(d));
        assert_true(oc_dtype_from_name(want[i].name, &back) && back == d);
        assert_true(oc_dtype_from_name(want[i].alias, &back) && back == d);
        oc_complex128 cell = 0;
        oc_tensor t, t2;
        DLTensor dl;
        assert_int_equal(oc_tensor_init(&t, &cell, d, 0, NULL), OC_OK);
        assert_int_equal(oc_tensor_to_dlpack(&t, &dl, NULL, NULL), OC_OK);
        assert_int_equal(dl.dtype.code, kDLComplex);
        assert_int_equal(dl.dtype.bits, 8 * want[i].size);
        assert_int_equal(oc_tensor_from_dlpack(&dl, &t2), OC_OK);
        assert_int_equal(t2.dtype, d);
    }
    assert_false(oc_dtype_is_complex(OC_FLOAT64));
    assert_false(oc_dtype_is_complex(OC_NUM_DTYPES));
    /* [re, im]: the layout of NumPy, PyTorch, DLPack and XLA */
    oc_complex64 z = CMPLXF(1.5f, -2.0f);
    float parts[2];
    memcpy(parts, &z, sizeof parts);
    assert_true(sizeof z == 8 && parts[0] == 1.5f && parts[1] == -2.0f);
}

/* ---- the in-kernel tensor library ------------------------------------------------ */

static oc_tensor *c128(int ndim, const int64_t *sizes, double complex *v)
{
    oc_tensor t;
    assert_int_equal(oc_tensor_init(&t, v, OC_COMPLEX128, ndim, sizes), OC_OK);
    oc_tensor *r = oc_to_dtype(&t, OC_COMPLEX128); /* an owned copy */
    assert_non_null(r);
    return r;
}

static void test_conversions(void **state)
{
    (void)state;
    double complex v[3] = {CMPLX(1.5, 2.0), CMPLX(0.0, -1.0), 0};
    oc_tensor *z = c128(1, (int64_t[]){3}, v);
    oc_tensor *z64 = oc_to_dtype(z, OC_COMPLEX64), *re = oc_to_dtype(z, OC_FLOAT32), *b = oc_to_dtype(z, OC_BOOL);
    const oc_complex64 *zp = z64->data;
    const float *rp = re->data;
    const uint8_t *bp = b->data;
    for (int i = 0; i < 3; i++) {
        assert_cclose(zp[i], v[i], 1e-7, "complex128 -> complex64 keeps the imaginary part", i);
        assert_true(rp[i] == (float)creal(v[i])); /* complex -> real: the real part */
        assert_int_equal(bp[i], v[i] != 0);       /* complex -> bool: z != 0 (0 + -1j is true) */
    }
    oc_tensor *back = oc_to_dtype(re, OC_COMPLEX128); /* real -> complex: imaginary part 0 */
    for (int i = 0; i < 3; i++) assert_cclose(((oc_complex128 *)back->data)[i], creal(v[i]), 0, "real -> complex", i);
    oc_tensor *full = oc_full(OC_COMPLEX128, 1, (int64_t[]){2}, 3.0);
    assert_true(((oc_complex128 *)full->data)[1] == CMPLX(3.0, 0.0));
    oc_tensor *eye = oc_eye(OC_COMPLEX64, 2, 2);
    assert_true(((oc_complex64 *)eye->data)[3] == 1.0f && ((oc_complex64 *)eye->data)[1] == 0);
    oc_tensor *tensors[] = {z, z64, re, b, back, full, eye};
    for (int i = 0; i < 7; i++) oc_tensor_free(tensors[i]);
}

/* 16-byte elements move whole through a strided (transposed) copy */
static void test_copy_complex128_transposed(void **state)
{
    (void)state;
    double complex v[6];
    for (int i = 0; i < 6; i++) v[i] = CMPLX(i, -10.0 * i);
    oc_tensor *src = c128(2, (int64_t[]){2, 3}, v);
    double complex dst_mem[6] = {0};
    oc_tensor dst;
    assert_int_equal(oc_tensor_init_strided(&dst, dst_mem, OC_COMPLEX128, 2, (int64_t[]){2, 3}, (int64_t[]){1, 2}),
                     OC_OK);
    assert_non_null(oc_copy_(&dst, src));
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 3; c++) assert_cclose(dst_mem[r + 2 * c], v[r * 3 + c], 0, "copy", r * 3 + c);
    oc_tensor_free(src);
}

static void test_arithmetic(void **state)
{
    (void)state;
    double complex a[4] = {CMPLX(1, 2), CMPLX(-0.5, 0.25), CMPLX(0, 1), CMPLX(3, -4)};
    double complex b[4] = {CMPLX(2, -1), CMPLX(1, 1), CMPLX(-2, 0.5), CMPLX(0.5, 0.5)};
    oc_tensor *ta = c128(1, (int64_t[]){4}, a), *tb = c128(1, (int64_t[]){4}, b);
    oc_tensor *r[] = {oc_add(ta, tb, 0.5), oc_sub(ta, tb, 2), oc_mul(ta, tb), oc_div(ta, tb),
                      oc_neg(ta),          oc_exp(ta),        oc_sin(ta),     oc_pow_scalar(ta, 2)};
    for (int i = 0; i < 4; i++) {
        const double complex want[] = {a[i] + 0.5 * b[i], a[i] - 2 * b[i], a[i] * b[i], a[i] / b[i],
                                       -a[i],             cexp(a[i]),      csin(a[i]),  cpow(a[i], 2)};
        for (int k = 0; k < 8; k++) {
            assert_non_null(r[k]);
            assert_int_equal(r[k]->dtype, OC_COMPLEX128);
            assert_cclose(((oc_complex128 *)r[k]->data)[i], want[k], 1e-12, "op", k);
        }
    }
    for (int k = 0; k < 8; k++) oc_tensor_free(r[k]);
    oc_tensor_free(ta);
    oc_tensor_free(tb);
}

/* what has no complex meaning is refused, saying why */
static void test_refusals(void **state)
{
    (void)state;
    oc_tensor *z = oc_zeros(OC_COMPLEX64, 1, (int64_t[]){2});
    assert_null(oc_clamp(z, 0, 1));
    assert_msg("oc_clamp: argument 'a' has dtype complex64, expected one of float32");
    assert_msg("(complex numbers have no order)");
    assert_null(oc_floor(z));
    assert_msg("complex numbers have no order");
    assert_null(oc_abs(z));
    assert_msg("|z| is real, not complex: compute it with cabsf/cabs in a kernel");
    assert_null(oc_log2(z));
    assert_msg("oc_log2: argument 'a' has dtype complex64, expected one of float32, float64, float16, bfloat16");
    assert_null(oc_bitwise_and(z, z));
    assert_msg("oc_bitwise_and: argument 'a' has dtype complex64");
    oc_tensor_free(z);
}

/* ---- kernels ---------------------------------------------------------------------- */

static oc_library *load_dir(const char *name, const char *dir, const char *compute, const char *shape)
{
    char c[512], s[512];
    snprintf(c, sizeof c, "%s/%s", test_repo_path(dir), compute);
    snprintf(s, sizeof s, "%s/%s", test_repo_path(dir), shape);
    oc_status st;
    const char *path = test_build_files(name, c, s, (test_lib_options){.multicore = true}, &st);
    if (!path) fail_msg("%s", oc_errmsg());
    return test_load(path);
}

/* call a one-result op on tensors; returns the result (free it) or NULL */
static oc_tensor *call(const char *name, int n, oc_tensor *const *ts)
{
    oc_value args[4];
    for (int i = 0; i < n; i++) args[i] = oc_value_tensor(ts[i]);
    oc_tensor *out;
    return oc_op_invoke(test_op(name), args, n, &out) == OC_OK ? out : NULL;
}

static void test_accessor_stream_iterator(void **state)
{
    (void)state;
    oc_library *lib = load_dir("cplx_kinds", "tests/c/complex_kernels", "kernels.c", "shape.c");
    enum { N = 5, R = 3, C = 700 }; /* C * 16 bytes: several stream buffers per row */
    oc_complex64 x[N];
    for (int i = 0; i < N; i++) x[i] = CMPLXF(i, 1.0f - i);
    oc_tensor tx;
    oc_tensor_init(&tx, x, OC_COMPLEX64, 1, (int64_t[]){N});
    oc_tensor *y = call("cplx_kinds::conj_acc", 1, (oc_tensor *[]){&tx});
    if (!y) fail_msg("%s", oc_errmsg());
    for (int i = 0; i < N; i++) assert_cclose(((oc_complex64 *)y->data)[i], conjf(x[i]), 0, "conj_acc", i);
    oc_tensor_free(y);

    oc_complex128 *big = malloc(R * C * sizeof *big);
    for (int i = 0; i < R * C; i++) big[i] = CMPLX(i * 0.5, -i * 0.25);
    oc_tensor tb;
    oc_tensor_init(&tb, big, OC_COMPLEX128, 2, (int64_t[]){R, C});
    y = call("cplx_kinds::conj_stream", 1, (oc_tensor *[]){&tb});
    if (!y) fail_msg("%s", oc_errmsg());
    for (int i = 0; i < R * C; i++) assert_cclose(((oc_complex128 *)y->data)[i], conj(big[i]), 0, "conj_stream", i);
    oc_tensor_free(y);
    free(big);

    oc_complex64 a[6];
    float b[3] = {2, -1, 0.5f};
    for (int i = 0; i < 6; i++) a[i] = CMPLXF(i, i + 1);
    oc_tensor ta, tf;
    oc_tensor_init(&ta, a, OC_COMPLEX64, 2, (int64_t[]){2, 3});
    oc_tensor_init(&tf, b, OC_FLOAT32, 1, (int64_t[]){3});
    y = call("cplx_kinds::mul_iter", 2, (oc_tensor *[]){&ta, &tf});
    if (!y) fail_msg("%s", oc_errmsg());
    assert_int_equal(y->dtype, OC_COMPLEX64);
    for (int i = 0; i < 6; i++) assert_cclose(((oc_complex64 *)y->data)[i], a[i] * b[i % 3], 0, "mul_iter", i);
    oc_tensor_free(y);

    /* a kernel written for float32 gets complex64: its accessor says so */
    assert_null(call("cplx_kinds::twice_f32", 1, (oc_tensor *[]){&tx}));
    assert_msg("op 'cplx_kinds::twice_f32'");
    assert_msg("oc_accessor: tensor is complex64, accessor asks for float32");
    oc_library_unload(lib);
    oc_engine_shutdown();
}

/* JAX's rms_norm: y = x / sqrt(mean(x * x) + eps) per row, with the complex
 * square and square root, as upstream */
static void rms_norm_ref(const double complex *x, int64_t rows, int64_t cols, double eps, double complex *y,
                         double complex *res)
{
    for (int64_t r = 0; r < rows; r++) {
        double complex sm = 0;
        for (int64_t j = 0; j < cols; j++) sm += x[r * cols + j] * x[r * cols + j];
        double complex scale = 1.0 / csqrt(sm / (double)cols + eps);
        for (int64_t j = 0; j < cols; j++) y[r * cols + j] = x[r * cols + j] * scale;
        res[r] = scale;
    }
}

static void test_rms_norm_example(void **state)
{
    (void)state;
    oc_library *lib = load_dir("complex_ops", "examples/complex", "rms_norm.c", "shape.c");
    enum { R = 3, C = 5 };
    double complex x[R * C], want[R * C], want_res[R];
    for (int i = 0; i < R * C; i++) x[i] = CMPLX(-0.5 + i / 14.0, 0.3 - i / 20.0);
    rms_norm_ref(x, R, C, (float)1e-5, want, want_res); /* eps is a float32, as upstream */
    for (int wide = 0; wide < 2; wide++) {
        oc_dtype dt = wide ? OC_COMPLEX128 : OC_COMPLEX64;
        oc_tensor t128, *tx;
        oc_tensor_init(&t128, x, OC_COMPLEX128, 2, (int64_t[]){R, C});
        tx = oc_to_dtype(&t128, dt);
        oc_value args[] = {oc_value_tensor(tx), oc_value_float(1e-5)};
        oc_tensor *outs[2];
        if (oc_op_invoke(test_op("complex_ops::rms_norm_fwd"), args, 2, outs) != OC_OK) fail_msg("%s", oc_errmsg());
        oc_tensor *y = oc_to_dtype(outs[0], OC_COMPLEX128), *res = oc_to_dtype(outs[1], OC_COMPLEX128);
        assert_int_equal(outs[0]->dtype, dt);
        assert_int_equal(outs[1]->ndim, 1);
        double tol = wide ? 1e-12 : 1e-4; /* float32: sum x * x cancels (re^2 - im^2) */
        for (int i = 0; i < R * C; i++) assert_cclose(((oc_complex128 *)y->data)[i], want[i], tol, "y", i);
        for (int r = 0; r < R; r++) assert_cclose(((oc_complex128 *)res->data)[r], want_res[r], tol, "res", r);
        /* the vjp, JAX's convention (no conjugate): ct_x = res * ct_y - (x . ct_y) res^3 / n * x */
        oc_value bargs[] = {oc_value_tensor(tx), oc_value_tensor(outs[1]), oc_value_tensor(tx)};
        oc_tensor *gx;
        if (oc_op_invoke(test_op("complex_ops::rms_norm_bwd"), bargs, 3, &gx) != OC_OK) fail_msg("%s", oc_errmsg());
        oc_tensor *g = oc_to_dtype(gx, OC_COMPLEX128);
        for (int r = 0; r < R; r++) {
            double complex s = want_res[r], dot = 0;
            for (int j = 0; j < C; j++) dot += x[r * C + j] * x[r * C + j];
            for (int j = 0; j < C; j++)
                assert_cclose(((oc_complex128 *)g->data)[r * C + j],
                              s * x[r * C + j] - dot * s * s * s / C * x[r * C + j], tol * 10, "ct_x", j);
        }
        oc_tensor *owned[] = {tx, outs[0], outs[1], y, res, gx, g};
        for (int i = 0; i < 7; i++) oc_tensor_free(owned[i]);
    }
    int32_t ints[C] = {0};
    oc_tensor ti;
    oc_tensor_init(&ti, ints, OC_INT32, 1, (int64_t[]){C});
    oc_value args[] = {oc_value_tensor(&ti), oc_value_float(1e-5)};
    oc_tensor *out;
    assert_int_not_equal(oc_op_invoke(test_op("complex_ops::rms_norm"), args, 2, &out), OC_OK);
    assert_msg("x must be float32, float64, complex64 or complex128, got int32");
    oc_library_unload(lib);
    oc_engine_shutdown();
}

/* a kernel taking a complex pointer for a Tensor is told its prototype */
static void test_kernel_declared_with_complex_pointer(void **state)
{
    (void)state;
    oc_status st;
    const char *path = test_build("cplx_sig",
                                  "#include <complex.h>\n#include <opcore/kernel.h>\n"
                                  "oc_tensor *cdouble_it(const float complex *x) { (void)x; return 0; }\n",
                                  "#include <opcore/library.h>\n"
                                  "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
                                  "OC_LIBRARY(cplx_sig, m) { oc_def(m, \"cdouble_it(Tensor x) -> Tensor\", same, "
                                  "\"cdouble_it\"); }\n",
                                  (test_lib_options){0}, &st);
    assert_null(path);
    assert_int_equal(st, OC_EBUILD);
    assert_msg("kernel 'cdouble_it' must be declared as: oc_tensor *cdouble_it(const oc_tensor *x);");
}

/* `float complex` without <complex.h>: the compiler's error, and the header to include */
static void test_complex_without_header_hint(void **state)
{
    (void)state;
    oc_status st;
    const char *path = test_build("cplx_hint",
                                  "#include <opcore/kernel.h>\n"
                                  "oc_tensor *twice(const oc_tensor *x)\n"
                                  "{\n    float complex *z = x->data;\n    (void)z;\n    return oc_dst_tensor();\n}\n",
                                  "#include <opcore/library.h>\n"
                                  "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
                                  "OC_LIBRARY(cplx_hint, m) { oc_def(m, \"twice(Tensor x) -> Tensor\", same, \"twice\"); }\n",
                                  (test_lib_options){0}, &st);
    assert_null(path);
    assert_int_equal(st, OC_EBUILD);
    assert_msg("hint: `float complex` and `double complex` need #include <complex.h>");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_vocabulary),
        cmocka_unit_test(test_conversions),
        cmocka_unit_test(test_copy_complex128_transposed),
        cmocka_unit_test(test_arithmetic),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_accessor_stream_iterator),
        cmocka_unit_test(test_rms_norm_example),
        cmocka_unit_test(test_kernel_declared_with_complex_pointer),
        cmocka_unit_test(test_complex_without_header_hint),
    };
    return oc_test_run("complex", tests, NULL, NULL);
}
