/* The low-precision linear layer and quantising helpers (opcore/tile.h),
 * run inside a real multicore kernel (tests/c/lowp_kernels) and checked
 * against scalar references written here: the integer paths bit for bit,
 * the float ones within float32 rounding. main() runs every test once per
 * instruction set, each in a child process with OC_TILE_ISA set (the
 * kernels are chosen once per process): the CPU's best (AMX for int8 from
 * 32 rows and bfloat16 weights from 32 where there is AMX), avx512bf16
 * (bfloat16 weights from 32 rows on vdpbf16ps), avx512, avxvnni, avx2,
 * portable. */
#include <math.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "opcore/engine.h"
#include "opcore/host.h"
#include "opcore/tile.h"
#include "support/oplib.h"

static oc_library *lib;

static int setup(void **state)
{
    (void)state;
    lib = test_build_dir("lowptest", "tests/c/lowp_kernels", (test_lib_options){.multicore = true});
    return lib ? 0 : 1;
}

static int teardown(void **state)
{
    (void)state;
    oc_library_unload(lib);
    return 0;
}

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 9;
}

static void fill(float *p, int64_t n, unsigned seed)
{
    for (int64_t i = 0; i < n; i++) p[i] = (float)(rnd(&seed) % 2001) / 500.0f - 2.0f; /* [-2, 2] */
}

static oc_tensor mk(void *data, oc_dtype dt, int64_t rows, int64_t cols)
{
    oc_tensor t;
    oc_tensor_init(&t, data, dt, 2, (int64_t[]){rows, cols});
    return t;
}

static oc_status run(oc_tensor *y, oc_tensor *z, const oc_tensor *x, const oc_tensor *w,
                     const oc_tensor *ws, int which, int type)
{
    static float dummy[2];
    oc_tensor d1 = mk(dummy, OC_FLOAT32, 1, 1), d2 = mk(dummy + 1, OC_FLOAT32, 1, 1);
    if (z == y) z = &d1; /* unused results: separate memory */
    if (ws == y || ws == z) ws = &d2;
    oc_tensor *res = NULL;
    oc_value a[] = {oc_value_tensor(y), oc_value_tensor(z),  oc_value_tensor(x),
                    oc_value_tensor(w), oc_value_tensor(ws), oc_value_int(which),
                    oc_value_int(type)};
    oc_status st = oc_op_invoke(oc_op_find("lowptest::lcase"), a, 7, &res);
    if (st != OC_OK) print_message("case %d type %d: %s\n", which, type, oc_errmsg());
    return st;
}

/* ---- scalar references (the math tile.h defines) ---------------------------- */

static float sum8(const float s[8])
{
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

static float half_to_f(uint16_t h)
{
    _Float16 v;
    memcpy(&v, &h, 2);
    return (float)v;
}

static uint16_t f_to_half(float f)
{
    _Float16 v = (_Float16)f;
    uint16_t h;
    memcpy(&h, &v, 2);
    return h;
}

static int8_t q127(float v)
{
    float q = nearbyintf(v);
    return (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
}

/* ggml's reference quantisers (nearest-even rounding for Q8_0). */
static void ref_quant_block(uint8_t *blk, oc_wtype t, const float *v)
{
    if (t == OC_W_Q8_0) {
        float amax = 0;
        for (int l = 0; l < 32; l++) amax = fmaxf(amax, fabsf(v[l]));
        float d = amax / 127, id = d ? 1 / d : 0;
        uint16_t h = f_to_half(d);
        memcpy(blk, &h, 2);
        for (int l = 0; l < 32; l++) blk[2 + l] = (uint8_t)q127(v[l] * id);
    } else {
        float amax = 0, max = 0;
        for (int l = 0; l < 32; l++)
            if (amax < fabsf(v[l])) amax = fabsf(v[l]), max = v[l];
        float d = max / -8, id = d ? 1 / d : 0;
        uint16_t h = f_to_half(d);
        memcpy(blk, &h, 2);
        for (int l = 0; l < 16; l++) {
            int a = (int8_t)(v[l] * id + 8.5f), b = (int8_t)(v[l + 16] * id + 8.5f);
            blk[2 + l] = (uint8_t)((a < 15 ? a : 15) | ((b < 15 ? b : 15) << 4));
        }
    }
}

static int bsize(oc_wtype t) { return t == OC_W_Q8_0 ? 34 : 18; }

static int wq(const uint8_t *blk, oc_wtype t, int l)
{
    if (t == OC_W_Q8_0) return (int8_t)blk[2 + l];
    return (l < 16 ? blk[2 + l] & 15 : blk[2 + l - 16] >> 4) - 8;
}

static void ref_linear_q(float *y, const float *x, const uint8_t *w, oc_wtype t, int64_t m,
                         int64_t n, int64_t k)
{
    int64_t nb = k / 32, rb = nb * bsize(t);
    int8_t *xq = malloc((size_t)k);
    float *xd = malloc((size_t)nb * sizeof(float));
    for (int64_t i = 0; i < m; i++) {
        for (int64_t b = 0; b < nb; b++) {
            float amax = 0;
            for (int l = 0; l < 32; l++) amax = fmaxf(amax, fabsf(x[i * k + b * 32 + l]));
            float d = amax / 127, id = d ? 1 / d : 0;
            for (int l = 0; l < 32; l++) xq[b * 32 + l] = q127(x[i * k + b * 32 + l] * id);
            xd[b] = d;
        }
        for (int64_t j = 0; j < n; j++) {
            float s[8] = {0};
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = w + j * rb + b * bsize(t);
                int32_t is = 0;
                for (int l = 0; l < 32; l++) is += wq(blk, t, l) * xq[b * 32 + l];
                uint16_t h;
                memcpy(&h, blk, 2);
                s[b % 8] = fmaf((float)is, xd[b] * half_to_f(h), s[b % 8]);
            }
            y[i * n + j] = sum8(s);
        }
    }
    free(xq);
    free(xd);
}

static void ref_linear_i8(float *y, const int8_t *x, const float *xs, const int8_t *w,
                          const float *ws, int64_t m, int64_t n, int64_t k)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int32_t s = 0;
            for (int64_t p = 0; p < k; p++) s += x[i * k + p] * w[j * k + p];
            y[i * n + j] = ((float)s * xs[i]) * ws[j];
        }
}

static void quant_weights(uint8_t *w, oc_wtype t, const float *wf, int64_t n, int64_t k)
{
    for (int64_t j = 0; j < n; j++)
        for (int64_t b = 0; b < k / 32; b++)
            ref_quant_block(w + (j * (k / 32) + b) * bsize(t), t, wf + j * k + b * 32);
}

static void expect_bits(const float *got, const float *want, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], 4))
            fail_msg("%s[%lld]: got %.9g, want %.9g (bit for bit)", what, (long long)i, got[i],
                     want[i]);
}

/* ---- tests ---------------------------------------------------------------- */

static const int64_t MS[] = {1, 3, 4, 7, 17, 33};

/* n x k of w: the rows of x from MS run the per-pair kernels (1, 3) and
 * the packed panels (4 on: 64 rows of w a panel on AVX-512, 16 on AVX2 and
 * AVX-VNNI, 4 rows of x a block, the last 1-3 alone); n = 133 makes panels
 * of 64, 64 and 5 rows (8 x 16 and 5), n = 37 of 16, 16 and 5. */
static void q_linear_k(int64_t N, int64_t K)
{
    for (int tt = 0; tt < 2; tt++) {
        oc_wtype t = tt ? OC_W_Q4_0 : OC_W_Q8_0;
        float *wf = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * 33 * K);
        float *y = malloc(sizeof(float) * 33 * N), *want = malloc(sizeof(float) * 33 * N);
        uint8_t *w = malloc((size_t)N * K / 32 * bsize(t));
        fill(wf, N * K, 5 + tt);
        fill(x, 33 * K, 9);
        quant_weights(w, t, wf, N, K);
        if (t == OC_W_Q8_0) /* -128 is a valid Q8_0 weight (not made by ggml's quantiser) */
            for (int j = 0; j < N; j += 3) w[j * (K / 32) * 34 + 2 + j % 32] = 0x80;
        float one = 0;
        oc_tensor tw = mk(w, OC_UINT8, N, K / 32 * bsize(t)), none = mk(&one, OC_FLOAT32, 1, 1);
        /* the same weights packed 8 rows a group by the op's cores */
        oc_wtype pt = tt ? OC_W_Q4_0_PACKED : OC_W_Q8_0_PACKED;
        size_t pb = oc_weights_pack_bytes(t, N, K);
        assert_int_equal(pb, 128 + (N + 7) / 8 * (K / 32) * (16 + 8 * (bsize(t) - 2)));
        uint8_t *pk = malloc(pb);
        memset(pk, 0xee, pb);
        oc_tensor tp = mk(pk, OC_UINT8, 1, (int64_t)pb);
        assert_int_equal(run(&none, &tp, &tw, &tw, &none, 15, t), OC_OK);
        float *wd = malloc(sizeof(float) * 2 * 3 * K); /* dequantised: rows 1..3 either way */
        oc_tensor td = mk(wd, OC_FLOAT32, 3, K), tdp = mk(wd + 3 * K, OC_FLOAT32, 3, K);
        assert_int_equal(run(&td, &td, &tw, &tw, &none, 4, t), OC_OK);
        assert_int_equal(run(&tdp, &tdp, &tw, &tp, &none, 4, pt), OC_OK);
        expect_bits(wd + 3 * K, wd, 3 * K, "packed weights dequantised");
        for (size_t mi = 0; mi < sizeof MS / sizeof MS[0]; mi++) {
            int64_t m = MS[mi];
            oc_tensor tx = mk(x, OC_FLOAT32, m, K), ty = mk(y, OC_FLOAT32, m, N);
            ref_linear_q(want, x, w, t, m, N, K);
            memset(y, 0xff, sizeof(float) * m * N);
            assert_int_equal(run(&ty, &ty, &tx, &tw, &none, 0, t), OC_OK);
            expect_bits(y, want, m * N, oc_wtype_name(t));
            memset(y, 0xff, sizeof(float) * m * N); /* packed 8 rows a group: the same bits */
            assert_int_equal(run(&ty, &ty, &tx, &tp, &none, 0, pt), OC_OK);
            expect_bits(y, want, m * N, oc_wtype_name(pt));
            if (t == OC_W_Q4_0) { /* ith / nth by hand: 1, 2 and 5 parts (some empty: n = 37) */
                for (int parts = 0; parts < 5; parts += 2) {
                    memset(y, 0xff, sizeof(float) * m * N);
                    assert_int_equal(run(&ty, &ty, &tx, &tw, &none, 2, parts), OC_OK);
                    expect_bits(y, want, m * N, "q4_0 in parts");
                    memset(y, 0xff, sizeof(float) * m * N);
                    assert_int_equal(run(&ty, &ty, &tx, &tp, &none, 16, parts), OC_OK);
                    expect_bits(y, want, m * N, "q4_0-packed in parts");
                }
            }
            /* against the float product: the quantisation's error, not a wrong sum */
            for (int64_t j = 0; j < N; j++) {
                double s = 0, mag = 0;
                for (int64_t p = 0; p < K; p++)
                    s += (double)x[p] * wf[j * K + p], mag += fabs(x[p] * wf[j * K + p]);
                if (t == OC_W_Q4_0 || j % 3)
                    assert_true(fabs(y[j] - s) <= (t == OC_W_Q4_0 ? 0.12 : 0.03) * mag);
            }
        }
        free(wf), free(x), free(y), free(want), free(w), free(pk), free(wd);
    }
}

static void test_q_linear(void **state)
{
    (void)state;
    q_linear_k(37, 32 * 19);  /* m < 4: 8 rows of w at a time (AVX2), then 5 alone */
    q_linear_k(133, 32 * 5);
    q_linear_k(20, 32 * 26);  /* m < 4: longer rows, the pair dot on every set */
}

static void test_i8_linear(void **state)
{
    (void)state;
    enum { N = 70 };                       /* a whole 64-column panel and a part */
    /* 1102: k blocks of the packed form, k % 4 = 2; 640: AMX on w's rows (4 to 31 rows) */
    const int64_t ks[] = {200, 608, 1102, 640};
    for (int ki = 0; ki < 4; ki++) {
        int64_t k = ks[ki];
        int8_t *w = malloc((size_t)(N * k)), *xq = malloc((size_t)(33 * k));
        float ws[N], xs[33], *y = malloc(sizeof(float) * 33 * N),
                             *want = malloc(sizeof(float) * 33 * N);
        unsigned s = 77;
        for (int64_t i = 0; i < N * k; i++) w[i] = (int8_t)(rnd(&s) % 256 - 128);
        for (int64_t i = 0; i < 33 * k; i++) xq[i] = (int8_t)(rnd(&s) % 255 - 127);
        fill(ws, N, 3);
        fill(xs, 33, 4);
        oc_tensor tw = mk(w, OC_INT8, N, k), tws = mk(ws, OC_FLOAT32, 1, N);
        for (int minus = 0; minus < 2; minus++) {
            if (minus) xq[k + 5] = -128; /* row 1: AVX2 widens both sides to int16, same bits */
            for (size_t mi = 0; mi < sizeof MS / sizeof MS[0]; mi++) {
                int64_t m = MS[mi];
                oc_tensor tx = mk(xq, OC_INT8, m, k), ty = mk(y, OC_FLOAT32, m, N),
                          txs = mk(xs, OC_FLOAT32, 1, m);
                ref_linear_i8(want, xq, xs, w, ws, m, N, k);
                memset(y, 0xff, sizeof(float) * m * N);
                assert_int_equal(run(&ty, &tws, &tx, &tw, &txs, 1, 0), OC_OK);
                expect_bits(y, want, m * N, "int8 x int8");
            }
        }
        /* float x through OC_W_I8: quantised per row, then the same product */
        float *xf = malloc(sizeof(float) * 17 * k);
        fill(xf, 17 * k, 12);
        for (int64_t i = 0; i < 17; i++) {
            float amax = 0;
            for (int64_t p = 0; p < k; p++) amax = fmaxf(amax, fabsf(xf[i * k + p]));
            float d = amax / 127, id = d ? 1 / d : 0;
            for (int64_t p = 0; p < k; p++) xq[i * k + p] = q127(xf[i * k + p] * id);
            xs[i] = d;
        }
        ref_linear_i8(want, xq, xs, w, ws, 17, N, k);
        oc_tensor tx = mk(xf, OC_FLOAT32, 17, k), ty = mk(y, OC_FLOAT32, 17, N),
                  wsv = mk(ws, OC_FLOAT32, 1, N);
        wsv.ndim = 1, wsv.sizes[0] = N, wsv.strides[0] = 1;
        assert_int_equal(run(&ty, &ty, &tx, &tw, &wsv, 0, OC_W_I8), OC_OK);
        expect_bits(y, want, 17 * N, "int8 dynamic");
        free(w), free(xq), free(y), free(want), free(xf);
    }
}

static void expect_fail(oc_status st, const char *msg);

/* Prepacked int8 weights (OC_W_I8_PACKED): packed by the op's cores, then
 * the product on the op's cores and on core 0 in 2 and 3 parts, for int8
 * and float32 x: the bits of the scalar reference (and so of OC_W_I8). */
static void packed_case(int64_t N, int64_t k, int8_t *xq, float *xs, float *xf)
{
    int8_t *w = malloc((size_t)(N * k));
    float *ws = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * 33 * N),
          *want = malloc(sizeof(float) * 33 * N);
    unsigned s = 91;
    for (int64_t i = 0; i < N * k; i++) w[i] = (int8_t)(rnd(&s) % 256 - 128);
    fill(ws, N, 5);
    size_t nb = oc_weights_pack_bytes(OC_W_I8, N, k);
    assert_true(nb > (size_t)(N * k));
    uint8_t *pk = malloc(nb + 4);
    uint8_t *pku = pk + 4; /* 4-byte aligned, not 64: the kernels must not need more */
    memset(pku, 0xee, nb);
    oc_tensor tw = mk(w, OC_INT8, N, k), tws = mk(ws, OC_FLOAT32, 1, N),
              tp = mk(pku, OC_UINT8, 1, (int64_t)nb), todd = mk(pk + 1, OC_UINT8, 1, (int64_t)nb);
    float dum[1];
    oc_tensor td1 = mk(dum, OC_FLOAT32, 1, 1);
    /* an odd address: refused (float32 scales and int32 sums are read in place) */
    expect_fail(run(&td1, &todd, &tw, &tw, &tws, 12, 0), "not a multiple of 4 bytes");
    assert_int_equal(run(&td1, &tp, &tw, &tw, &tws, 12, 0), OC_OK);
    uint8_t *odd = malloc(nb + 1); /* packed bytes moved to an odd address: refused too */
    memcpy(odd + 1, pku, nb);
    oc_tensor tpo = mk(odd + 1, OC_UINT8, 1, (int64_t)nb), tx1 = mk(xq, OC_INT8, 1, k),
              ty1 = mk(y, OC_FLOAT32, 1, N), txs1 = mk(xs, OC_FLOAT32, 1, 1);
    expect_fail(run(&ty1, &txs1, &tx1, &tpo, &tx1, 13, 1), "not a multiple of 4 bytes");
    free(odd);
    for (size_t mi = 0; mi < sizeof MS / sizeof MS[0]; mi++) {
        int64_t m = MS[mi];
        oc_tensor tx = mk(xq, OC_INT8, m, k), ty = mk(y, OC_FLOAT32, m, N),
                  txs = mk(xs, OC_FLOAT32, 1, m);
        ref_linear_i8(want, xq, xs, w, ws, m, N, k);
        for (int parts = 0; parts <= 3; parts += parts ? 1 : 2) {
            memset(y, 0xff, sizeof(float) * m * N);
            assert_int_equal(run(&ty, &txs, &tx, &tp, &tx, 13, 1 + 10 * parts), OC_OK);
            expect_bits(y, want, m * N, "packed int8 x int8");
        }
    }
    /* float x: quantised per row as OC_W_I8 does */
    int64_t m = 17;
    for (int64_t i = 0; i < m; i++) {
        float amax = 0;
        for (int64_t p = 0; p < k; p++) amax = fmaxf(amax, fabsf(xf[i * k + p]));
        float d = amax / 127, id = d ? 1 / d : 0;
        for (int64_t p = 0; p < k; p++) xq[i * k + p] = q127(xf[i * k + p] * id);
        xs[i] = d;
    }
    ref_linear_i8(want, xq, xs, w, ws, m, N, k);
    oc_tensor tx = mk(xf, OC_FLOAT32, m, k), ty = mk(y, OC_FLOAT32, m, N);
    memset(y, 0xff, sizeof(float) * m * N);
    assert_int_equal(run(&ty, &ty, &tx, &tp, &tx, 13, 0), OC_OK);
    expect_bits(y, want, m * N, "packed int8, float x");
    /* the packed bytes dequantised: w times its scales */
    float *wd = malloc(sizeof(float) * 3 * k);
    oc_tensor td = mk(wd, OC_FLOAT32, 3, k);
    assert_int_equal(run(&td, &td, &tx, &tp, &tx, 4, OC_W_I8_PACKED), OC_OK);
    for (int64_t p = 0; p < 3 * k; p++) assert_true(wd[p] == (float)w[k + p] * ws[1 + p / k]);
    free(wd), free(w), free(ws), free(y), free(want), free(pk);
}

static void test_i8_packed(void **state)
{
    (void)state;
    const int64_t ns[] = {70, 200}, ks[] = {200, 608, 1102};
    for (int ki = 0; ki < 3; ki++) {
        int64_t k = ks[ki];
        int8_t *xq = malloc((size_t)(33 * k));
        float xs[33], *xf = malloc(sizeof(float) * 17 * k);
        unsigned s = 7;
        for (int64_t i = 0; i < 33 * k; i++) xq[i] = (int8_t)(rnd(&s) % 256 - 128); /* -128 too */
        fill(xs, 33, 4);
        fill(xf, 17 * k, 12);
        packed_case(ns[ki % 2], k, xq, xs, xf);
        free(xq), free(xf);
    }
}

/* oc_tile_matmul, int8 a and b into an int32 c (accumulating): every op()
 * pairing against the plain loop, exact. */
static void test_i8_matmul(void **state)
{
    (void)state;
    const int64_t ms[] = {1, 5, 16, 33}, ks[] = {3, 200, 1102, 640};
    enum { N = 70 };
    for (int ki = 0; ki < 4; ki++)
        for (int mi = 0; mi < 4; mi++)
            for (unsigned fl = 0; fl < 4; fl++) {
                int64_t m = ms[mi], k = ks[ki];
                bool ta = fl & OC_TILE_TRANS_A, tb = fl & OC_TILE_TRANS_B;
                int8_t *a = malloc((size_t)(m * k)), *b = malloc((size_t)(N * k));
                int32_t *c = malloc(sizeof(int32_t) * m * N),
                        *want = malloc(sizeof(int32_t) * m * N);
                unsigned s = 3 + (unsigned)fl;
                for (int64_t i = 0; i < m * k; i++) a[i] = (int8_t)(rnd(&s) % 256 - 128);
                for (int64_t i = 0; i < N * k; i++) b[i] = (int8_t)(rnd(&s) % 256 - 128);
                for (int64_t i = 0; i < m * N; i++) c[i] = (int32_t)(rnd(&s) % 2001) - 1000;
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < N; j++) {
                        int32_t t = c[i * N + j];
                        for (int64_t p = 0; p < k; p++)
                            t += (ta ? a[p * m + i] : a[i * k + p]) *
                                 (tb ? b[j * k + p] : b[p * N + j]);
                        want[i * N + j] = t;
                    }
                oc_tensor tc = mk(c, OC_INT32, m, N), tat = ta ? mk(a, OC_INT8, k, m)
                                                            : mk(a, OC_INT8, m, k),
                          tbt = tb ? mk(b, OC_INT8, N, k) : mk(b, OC_INT8, k, N);
                assert_int_equal(run(&tc, &tc, &tat, &tbt, &tc, 14, fl), OC_OK);
                if (memcmp(c, want, sizeof(int32_t) * m * N))
                    fail_msg("int8 matmul %lld x %d x %lld flags %u differs", (long long)m, N,
                             (long long)k, fl);
                free(a), free(b), free(c), free(want);
            }
    const char *p = oc_tile_matmul_path_shape(OC_INT8, 16, 4096, 4096, OC_TILE_TRANS_B);
    print_message("%s\n", p);
    test_assert_contains(p, "exact int32 sums");
}

/* Packed bytes that do not fit: clear errors, and the next call works. */
static void test_packed_bad_input(void **state)
{
    (void)state;
    enum { N = 70, K = 200 };
    int8_t w[N * K], xq[2 * K];
    float ws[N], xs[2], y[2 * N], want[2 * N], xf[2 * (K + 1)];
    unsigned s = 5;
    for (int i = 0; i < N * K; i++) w[i] = (int8_t)(rnd(&s) % 256 - 128);
    for (int i = 0; i < 2 * K; i++) xq[i] = (int8_t)(rnd(&s) % 255 - 127);
    fill(ws, N, 1), fill(xs, 2, 2), fill(xf, 2 * (K + 1), 3);
    size_t nb = oc_weights_pack_bytes(OC_W_I8, N, K);
    assert_int_equal(oc_weights_pack_bytes(OC_W_I8, N, 1 << 17), 0);
    assert_int_equal(oc_weights_pack_bytes(OC_W_Q4_0, N, 33), 0);   /* not whole blocks */
    assert_int_equal(oc_weights_pack_bytes(OC_W_F32, N, K), 0);     /* nothing to pack */
    assert_int_equal(oc_weights_pack_bytes(OC_W_I8_PACKED, N, K), 0);
    uint8_t *pk = malloc(nb + 64), *bad = malloc(nb + 64);
    oc_tensor tw = mk(w, OC_INT8, N, K), tws = mk(ws, OC_FLOAT32, 1, N),
              tp = mk(pk, OC_UINT8, 1, (int64_t)nb), tp1 = mk(pk, OC_UINT8, 1, (int64_t)nb + 1),
              tb = mk(bad, OC_UINT8, 1, (int64_t)nb);
    char msg[200];
    snprintf(msg, sizeof msg, "oc_weights_pack: int8 weights 70 x 200 pack into %zu bytes", nb);
    float dum[1];
    oc_tensor td1 = mk(dum, OC_FLOAT32, 1, 1);
    expect_fail(run(&td1, &tp1, &tw, &tw, &tws, 12, 0), msg);
    assert_int_equal(run(&td1, &tp, &tw, &tw, &tws, 12, 0), OC_OK);
    oc_tensor tx = mk(xq, OC_INT8, 2, K), ty = mk(y, OC_FLOAT32, 2, N),
              txs = mk(xs, OC_FLOAT32, 1, 2);
    snprintf(msg, sizeof msg, "int8-packed weights 70 x 200 are %zu bytes, got a buffer of %zu",
             nb, nb + 1);
    expect_fail(run(&ty, &txs, &tx, &tp1, &tx, 13, 1), msg);
    memcpy(bad, pk, nb);
    bad[3] ^= 1; /* the magic */
    expect_fail(run(&ty, &txs, &tx, &tb, &tx, 13, 1),
                "oc_weights_of_packed: these bytes are not packed weights");
    memcpy(bad, pk, nb);
    bad[12] = 9; /* the layout */
    expect_fail(run(&ty, &txs, &tx, &tb, &tx, 13, 1),
                "oc_weights_of_packed: weights packed in layout 9 version 1");
    bad[12] = 3; /* another layout's: its size does not fit */
    expect_fail(run(&ty, &txs, &tx, &tb, &tx, 13, 1),
                "oc_weights_of_packed: corrupt header of q4_0-packed weights (n 70, k 200");
    memcpy(bad, pk, nb);
    bad[33] = 2; /* kp: 512 */
    expect_fail(run(&ty, &txs, &tx, &tb, &tx, 13, 1),
                "oc_weights_of_packed: corrupt header of int8-packed weights (n 70, k 200, "
                "kp 512");
    oc_tensor txf = mk(xf, OC_FLOAT32, 2, K + 1);
    expect_fail(run(&ty, &ty, &txf, &tp, &tx, 13, 0),
                "oc_tile_linear: y is 2 x 70, x 2 x 201, int8-packed w 70 x 200");
    oc_tensor txf2 = mk(xf, OC_FLOAT32, 2, K - 1);
    expect_fail(run(&ty, &ty, &txf2, &tp, &tx, 13, 2),
                "oc_tile_linear: the bytes hold int8-packed weights 70 x 200, the oc_weights "
                "says int8-packed 70 x 199");
    expect_fail(run(&ty, &ty, &txf, &tw, &tws, 0, OC_W_I8_PACKED),
                "oc_weights_of_tensor: int8-packed weights are a contiguous uint8 tensor of "
                "oc_weights_pack's bytes and no scale, got int8");
    expect_fail(run(&ty, &ty, &txf2, &tp, &tx, 0, OC_W_Q4_0_PACKED),
                "oc_weights_of_tensor: the bytes hold int8-packed weights 70 x 200, not "
                "q4_0-packed");
    /* Q4_0 blocks (70 rows of 180 bytes: k = 320) into a buffer of the wrong size */
    oc_tensor tq = mk(w, OC_UINT8, N, 180), tq1 = mk(pk, OC_UINT8, 1, 100);
    snprintf(msg, sizeof msg, "oc_weights_pack: q4_0 weights 70 x 320 pack into %zu bytes",
             oc_weights_pack_bytes(OC_W_Q4_0, N, 320));
    expect_fail(run(&td1, &tq1, &tq, &tq, &tws, 15, OC_W_Q4_0), msg);
    /* the next call works */
    ref_linear_i8(want, xq, xs, w, ws, 2, N, K);
    assert_int_equal(run(&ty, &txs, &tx, &tp, &tx, 13, 1), OC_OK);
    expect_bits(y, want, 2 * N, "after the errors");
    free(pk), free(bad);
}

/* tile.h's bound for bfloat16 weights on AMX-BF16, relative to sum |x w|:
 * eps_bf16 / 2 for x's rounding, k eps_f32 for the float32 sums. */
static double bf16_bound(int64_t k) { return ldexp(1, -8) + (double)k * ldexp(1, -23); }

static bool amx_bf16(int t, int64_t m)
{
    return t == OC_W_BF16 &&
           strstr(oc_tile_linear_path(OC_W_BF16, m), "x rounded to bfloat16") != NULL;
}

static uint16_t bf16_rne(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}

static double bf16_f(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static void test_float_linear(void **state)
{
    (void)state;
    enum { N = 37, K = 203 };
    float *wf = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * 40 * K),
          *y = malloc(sizeof(float) * 40 * N);
    uint16_t *wh = malloc(2 * N * K);
    fill(wf, N * K, 21);
    fill(x, 40 * K, 22);
    /* float32 from 5: the AVX-512 blocked dots (BLIS on other sets, and from
     * 48); the others from 33: BLIS */
    const int64_t ms[] = {1, 3, 5, 32, 40};
    float y5[5 * N]; /* float32 weights, m = 5: the rows of every larger m's result */
    bool fmm = strstr(oc_tile_linear_path(OC_W_F32, 5), "blocked dots") != NULL;
    for (int t = OC_W_F32; t <= OC_W_F16; t++) {
        for (int64_t i = 0; i < N * K; i++) {
            if (t == OC_W_BF16) {
                uint32_t b;
                memcpy(&b, &wf[i], 4);
                wh[i] = (uint16_t)(b >> 16);
            } else {
                wh[i] = f_to_half(wf[i]);
            }
        }
        oc_tensor tw = t == OC_W_F32 ? mk(wf, OC_FLOAT32, N, K)
                                     : mk(wh, t == OC_W_BF16 ? OC_BFLOAT16 : OC_FLOAT16, N, K);
        for (int mi = 0; mi < 5; mi++) {
            int64_t m = ms[mi];
            oc_tensor tx = mk(x, OC_FLOAT32, m, K), ty = mk(y, OC_FLOAT32, m, N);
            memset(y, 0xff, sizeof(float) * m * N);
            assert_int_equal(run(&ty, &ty, &tx, &tw, &ty, 0, t), OC_OK);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < N; j++) {
                    double s = 0, mag = 0;
                    for (int64_t p = 0; p < K; p++) {
                        uint32_t b;
                        float wv = wf[j * K + p];
                        if (t == OC_W_BF16) b = (uint32_t)wh[j * K + p] << 16, memcpy(&wv, &b, 4);
                        if (t == OC_W_F16) wv = half_to_f(wh[j * K + p]);
                        s += (double)x[i * K + p] * wv, mag += fabs((double)x[i * K + p] * wv);
                    }
                    double tol = amx_bf16(t, m) ? bf16_bound(K) : 1e-5;
                    if (fabs(y[i * N + j] - s) > tol * mag)
                        fail_msg("%s m %lld y[%lld][%lld] = %.9g, want %.9g", oc_wtype_name(t),
                                 (long long)m, (long long)i, (long long)j, y[i * N + j], s);
                }
            if (t == OC_W_F32 && m == 5) memcpy(y5, y, sizeof y5);
            if (t == OC_W_F32 && m > 5 && fmm) /* an output's bits do not depend on m */
                assert_memory_equal(y, y5, sizeof y5);
        }
    }
    free(wf), free(x), free(y), free(wh);
}

/* bfloat16 weights from 32 rows on AMX-BF16 or AVX512-BF16: within tile.h's bound of the
 * float64 product, and within float32 summation of the product of x
 * rounded to bfloat16 (nearest even): x really is rounded, pairs exact.
 * Shapes cover 32-row blocks, a 16-row tail, a partial panel, k % 32. */
static void test_bf16_amx(void **state)
{
    (void)state;
    enum { N = 150, K = 301, M = 81 };
    float *wf = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * M * K),
          *y = malloc(sizeof(float) * M * N);
    uint16_t *wh = malloc(2 * N * K);
    fill(wf, N * K, 41);
    fill(x, M * K, 42);
    x[5] = 1.00390625f + 1.0f / 4096; /* rounds up to bfloat16 1.0078125 */
    for (int64_t i = 0; i < N * K; i++) wh[i] = bf16_rne(wf[i]);
    oc_tensor tw = mk(wh, OC_BFLOAT16, N, K);
    const int64_t ms[] = {32, 33, 48, 64, M};
    for (int mi = 0; mi < 5; mi++) {
        int64_t m = ms[mi];
        oc_tensor tx = mk(x, OC_FLOAT32, m, K), ty = mk(y, OC_FLOAT32, m, N);
        memset(y, 0xff, sizeof(float) * m * N);
        assert_int_equal(run(&ty, &ty, &tx, &tw, &ty, 0, OC_W_BF16), OC_OK);
        bool amx = amx_bf16(OC_W_BF16, m);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0, sr = 0, mag = 0;
                for (int64_t p = 0; p < K; p++) {
                    double wv = bf16_f(wh[j * K + p]), xv = x[i * K + p];
                    s += xv * wv, sr += bf16_f(bf16_rne(x[i * K + p])) * wv;
                    mag += fabs(xv * wv);
                }
                double got = y[i * N + j];
                if (fabs(got - s) > (amx ? bf16_bound(K) : 1e-5) * mag ||
                    (amx && fabs(got - sr) > 1e-5 * mag))
                    fail_msg("bf16 m %lld y[%lld][%lld] = %.9g, want %.9g (x rounded: %.9g)",
                             (long long)m, (long long)i, (long long)j, got, s, sr);
            }
    }
    free(wf), free(x), free(y), free(wh);
}

static void test_quantise_helpers(void **state)
{
    (void)state;
    enum { R = 5, K = 128 };
    float x[R * K], y[R * K], sc[R * 4], want[R * K];
    int8_t q[R * K];
    uint8_t blocks[R * (K / 32) * 34], wantb[R * (K / 32) * 34];
    fill(x, R * K, 31);
    x[7] = 0, x[3 * K + 40] = -9.5f;
    for (int tt = 0; tt < 2; tt++) { /* blocks, and back */
        oc_wtype t = tt ? OC_W_Q4_0 : OC_W_Q8_0;
        int64_t rb = K / 32 * bsize(t);
        oc_tensor tx = mk(x, OC_FLOAT32, R, K), tz = mk(blocks, OC_UINT8, R, rb),
                  ty = mk(y, OC_FLOAT32, R - 1, K);
        assert_int_equal(run(&ty, &tz, &tx, &tx, &tx, 3, t), OC_OK);
        quant_weights(wantb, t, x, R, K);
        assert_memory_equal(blocks, wantb, (size_t)(R * rb));
        assert_int_equal(run(&ty, &ty, &tx, &tz, &tx, 4, t), OC_OK);
        for (int64_t i = 0; i < (R - 1) * K; i++) {
            const uint8_t *blk = wantb + (1 + i / K) * rb + (i % K) / 32 * bsize(t);
            uint16_t h;
            memcpy(&h, blk, 2);
            float v = (float)wq(blk, t, (int)(i % 32)) * half_to_f(h);
            if (memcmp(&y[i], &v, 4))
                fail_msg("dequantise %s [%lld]: %g, want %g", oc_wtype_name(t), (long long)i, y[i],
                         v);
        }
    }
    const int64_t groups[] = {0, 32, 64};
    for (int g = 0; g < 3; g++) {
        int64_t gs = groups[g] ? groups[g] : K, ng = K / gs;
        oc_tensor tx = mk(x, OC_FLOAT32, R, K), tq = mk(q, OC_INT8, R, K),
                  ts = mk(sc, OC_FLOAT32, R, ng);
        assert_int_equal(run(&tq, &ts, &tx, &tx, &tx, 5, (int)groups[g]), OC_OK);
        for (int64_t i = 0; i < R; i++)
            for (int64_t c = 0; c < ng; c++) {
                float amax = 0;
                for (int64_t p = 0; p < gs; p++) amax = fmaxf(amax, fabsf(x[i * K + c * gs + p]));
                float d = amax / 127, id = d ? 1 / d : 0;
                assert_memory_equal(&sc[i * ng + c], &d, 4);
                for (int64_t p = 0; p < gs; p++)
                    assert_int_equal(q[i * K + c * gs + p], q127(x[i * K + c * gs + p] * id));
            }
        oc_tensor ty = mk(y, OC_FLOAT32, R, K);
        assert_int_equal(run(&ty, &ty, &tq, &tx, &ts, 6, (int)groups[g]), OC_OK);
        for (int64_t i = 0; i < R * K; i++) want[i] = (float)q[i] * sc[i / K * ng + (i % K) / gs];
        expect_bits(y, want, R * K, "dequantize_rows");
    }
}

static void test_row_helpers(void **state)
{
    (void)state;
    enum { R = 6, C = 45 };
    float x[R * C], w[R * C], y[R];
    int32_t idx[R] = {0, 44, 3, 17, 8, 1};
    fill(x, R * C, 41);
    fill(w, R * C, 42);
    x[2 * C + 5] = -7.0f;
    oc_tensor tx = mk(x, OC_FLOAT32, R, C), ty = mk(y, OC_FLOAT32, R, 1),
              ti = mk(idx, OC_INT32, R, 1);
    assert_int_equal(run(&ty, &ty, &tx, &tx, &tx, 7, 0), OC_OK);
    for (int i = 0; i < R; i++) {
        float m = 0;
        for (int j = 0; j < C; j++) m = fmaxf(m, fabsf(x[i * C + j]));
        assert_memory_equal(&y[i], &m, 4);
    }
    assert_int_equal(run(&ty, &ty, &tx, &ti, &tx, 8, 0), OC_OK);
    for (int i = 0; i < R; i++) assert_memory_equal(&y[i], &x[i * C + idx[i]], 4);
    assert_int_equal(run(&ty, &ty, &tx, &tx, &tx, 9, 0), OC_OK);
    for (int i = 0; i < R; i++) {
        double s = 0;
        for (int j = 0; j < C; j++) s += exp(x[i * C + j]);
        assert_true(fabs(y[i] - log(s)) < 1e-5 * fabs(log(s)) + 1e-6);
    }
    oc_tensor tw = mk(w, OC_FLOAT32, R, C), tw1 = mk(w, OC_FLOAT32, 1, C);
    for (int b = 0; b < 2; b++) {
        assert_int_equal(run(&ty, &ty, &tx, b ? &tw1 : &tw, &tx, 10, 0), OC_OK);
        for (int i = 0; i < R; i++) {
            double s = 0;
            for (int j = 0; j < C; j++) s += (double)x[i * C + j] * w[(b ? 0 : i) * C + j];
            assert_true(fabs(y[i] - s) < 1e-5 * C);
        }
    }
}

/* Bad input: a clear error naming the function and the shapes or types;
 * the next call works. */
static void expect_fail(oc_status st, const char *msg)
{
    assert_int_not_equal(st, OC_OK);
    test_assert_contains(oc_errmsg(), msg);
}

static void test_bad_input(void **state)
{
    (void)state;
    enum { N = 8, K = 64 };
    float x[2 * K], y[2 * N], wf[N * K];
    uint8_t w[N * (K / 32) * 34];
    fill(x, 2 * K, 1);
    fill(wf, N * K, 2);
    quant_weights(w, OC_W_Q4_0, wf, N, K);
    oc_tensor tx = mk(x, OC_FLOAT32, 2, K), ty = mk(y, OC_FLOAT32, 2, N),
              tf = mk(wf, OC_FLOAT32, N, K);
    oc_tensor q4 = mk(w, OC_UINT8, N, K / 32 * 18), q4odd = mk(w, OC_UINT8, N, 17);
    expect_fail(run(&ty, &ty, &tx, &q4odd, &tx, 0, OC_W_Q4_0),
                "oc_weights_of_tensor: q4_0 weights [8, 17]: a row of 17 bytes is not whole "
                "18-byte blocks");
    expect_fail(run(&ty, &ty, &tx, &q4, &tx, 0, OC_W_Q8_0),
                "oc_weights_of_tensor: q8_0 weights [8, 36]");
    expect_fail(run(&ty, &ty, &tx, &tf, &tx, 0, OC_W_BF16),
                "oc_weights_of_tensor: bfloat16 weights in a float32 tensor");
    expect_fail(run(&ty, &ty, &tx, &tf, &tx, 0, OC_W_I8), "int8 weights in a float32 tensor");
    oc_tensor tx2 = mk(x, OC_FLOAT32, 1, K), ty3 = mk(y, OC_FLOAT32, 2, 3);
    expect_fail(
        run(&ty3, &ty3, &tx, &q4, &tx, 0, OC_W_Q4_0),
        "oc_tile_linear: y is 2 x 3, x 2 x 64, q4_0 w 8 x 64 (want y m x n = x m x k times w^T");
    expect_fail(run(&ty, &ty, &tx2, &q4, &tx, 0, OC_W_Q4_0),
                "oc_tile_linear: y is 2 x 8, x 1 x 64");
    expect_fail(run(&ty, &ty, &tx, &tf, &tx, 11, 99),
                "oc_tile_linear: weight type 99 is not an oc_wtype");
    oc_tensor tf40 = mk(wf, OC_FLOAT32, N, 40), tx40 = mk(x, OC_FLOAT32, 2, 40);
    expect_fail(run(&ty, &ty, &tx40, &tf40, &tx, 11, OC_W_Q8_0),
                "oc_tile_linear: q8_0 weights with k = 40, not a multiple of the block size 32");
    int8_t wi[N * K], xi[2 * K];
    memset(wi, 1, sizeof wi), memset(xi, 1, sizeof xi);
    float f3[3] = {1, 1, 1}, fn[N] = {0}, f2[2] = {1, 1};
    oc_tensor twi = mk(wi, OC_INT8, N, K), txi = mk(xi, OC_INT8, 2, K),
              s3 = mk(f3, OC_FLOAT32, 1, 3);
    oc_tensor sN = mk(fn, OC_FLOAT32, 1, N), s2 = mk(f2, OC_FLOAT32, 1, 2);
    expect_fail(
        run(&ty, &s3, &txi, &twi, &s2, 1, 0),
        "oc_weights_of_tensor: int8 weights [8, 64] need a contiguous float32 scale of 8 elements");
    expect_fail(run(&ty, &sN, &txi, &twi, &s3, 1, 0),
                "oc_tile_linear_i8: xscale is 3 x 1, want 2 x 1");
    expect_fail(run(&ty, &sN, &tx, &twi, &s2, 1, 0), "oc_tile_linear_i8: xq is float32 and w int8");
    /* helpers */
    int8_t q[2 * K];
    float sc[8];
    oc_tensor tq = mk(q, OC_INT8, 2, K), ts = mk(sc, OC_FLOAT32, 2, 2),
              ts3 = mk(sc, OC_FLOAT32, 2, 3);
    expect_fail(run(&tq, &ts, &tx, &tx, &tx, 5, 48),
                "oc_tile_quantize_rows: group 48 does not divide the 64 columns");
    expect_fail(run(&tq, &ts3, &tx, &tx, &tx, 5, 32),
                "oc_tile_quantize_rows: scale is 2 x 3, want 2 x 2");
    oc_tensor tx50 = mk(x, OC_FLOAT32, 2, 50);
    expect_fail(
        run(&ty, &ty, &tx50, &tx, &tx, 3, OC_W_Q4_0),
        "oc_tile_quantize_blocks: x is 2 x 50, its 50 columns are not whole q4_0 blocks of 32");
    expect_fail(run(&ty, &ty, &tx50, &tx, &tx, 3, OC_W_F16),
                "oc_tile_quantize_blocks: type float16 is not a block type");
    int32_t idx[2] = {0, 64};
    oc_tensor ti = mk(idx, OC_INT32, 2, 1), ty1 = mk(y, OC_FLOAT32, 2, 1);
    expect_fail(run(&ty1, &ty1, &tx, &ti, &tx, 8, 0),
                "oc_tile_gather_rows: idx[1] = 64 is outside [0, 64)");
    /* the next call works */
    float want[2 * N];
    ref_linear_q(want, x, w, OC_W_Q4_0, 2, N, K);
    assert_int_equal(run(&ty, &ty, &tx, &q4, &tx, 0, OC_W_Q4_0), OC_OK);
    expect_bits(y, want, 2 * N, "after the errors");
}

static void test_path_names(void **state)
{
    (void)state;
    const char *isa = getenv("OC_TILE_ISA");
    if (isa && !*isa) isa = NULL; /* set but empty: the library takes the best set */
    print_message("%s\n", oc_tile_linear_path(OC_W_I8, 16));
    print_message("%s\n", oc_tile_linear_path(OC_W_BF16, 64));
    const char *p = oc_tile_linear_path(OC_W_Q4_0, 1);
    print_message("%s\n", p);
    test_assert_contains(p, "q4_0 weights");
    if (isa && !strcmp(isa, "portable")) {
        test_assert_contains(p, "portable");
        test_assert_contains(oc_tile_linear_path(OC_W_Q8_0_PACKED, 9), "each block rebuilt");
    }
    else if (isa && !strcmp(isa, "avx2") && __builtin_cpu_supports("avx2")) {
        test_assert_contains(p, "avx2");
        test_assert_contains(oc_tile_linear_path(OC_W_Q8_0, 4), "16 rows of w packed");
        test_assert_contains(oc_tile_linear_path(OC_W_Q4_0_PACKED, 1),
                             "layout q4_0-x8): x quantised to int8 blocks of 32, opcore's avx2 "
                             "block-dot kernel (vpmaddubsw + vpmaddwd on 8 rows of w a register");
        test_assert_contains(oc_tile_linear_path(OC_W_Q8_0_PACKED, 4),
                             "16 rows of w a panel from the groups as they are");
    } else if (isa && !strcmp(isa, "avxvnni") && __builtin_cpu_supports("avxvnni") &&
               __builtin_cpu_supports("avx2")) {
        test_assert_contains(p, "avx-vnni");
        test_assert_contains(oc_tile_linear_path(OC_W_I8, 1), "VEX vpdpbusd");
        test_assert_contains(oc_tile_linear_path(OC_W_Q4_0, 4), "vpdpbusd (AVX-VNNI), 16 rows");
    } else if (!isa && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw"))
        test_assert_contains(p, "avx512-vnni");
    if (!isa && __builtin_cpu_supports("amx-bf16") &&
        strstr(oc_tile_linear_path(OC_W_I8, 64), "AMX"))
        test_assert_contains(oc_tile_linear_path(OC_W_BF16, 32), "amx-bf16");
    if (isa && !strcmp(isa, "avx512bf16") && __builtin_cpu_supports("avx512bf16") &&
        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw"))
        test_assert_contains(oc_tile_linear_path(OC_W_BF16, 32), "avx512-bf16, x rounded");
    else if (isa) /* a capped set keeps the exact widened path */
        test_assert_contains(oc_tile_linear_path(OC_W_BF16, 33), "the tile matmul");
    test_assert_contains(oc_tile_linear_path(OC_W_BF16, 31), "m <= 32: opcore's skinny");
    test_assert_contains(oc_tile_linear_path(OC_W_F32, 64), "m > 4: the tile matmul");
    if (!isa && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni") &&
        __builtin_cpu_supports("avx512bw"))
        test_assert_contains(oc_tile_linear_path(OC_W_F32, 32), "avx512 blocked dots");
    else if (isa && strcmp(isa, "avx512") && strcmp(isa, "avx512bf16")) /* AVX2 and below */
        test_assert_contains(oc_tile_linear_path(OC_W_F32, 32), "m > 4: the tile matmul");
    test_assert_contains(oc_tile_linear_path(OC_W_F32, 4), "m <= 4: opcore's skinny");
    test_assert_contains(oc_tile_linear_path(OC_W_F16, 32), "m <= 32: opcore's skinny");
    assert_int_equal(oc_wtype_row_bytes(OC_W_Q4_0, 4096), 4096 / 32 * 18);
    assert_int_equal(oc_wtype_row_bytes(OC_W_Q8_0, 40), 0);
    assert_int_equal(oc_wtype_row_bytes(OC_W_Q4_0_PACKED, 64), 0); /* not rows */
    assert_int_equal(sizeof(oc_block_q8_0), 34);
    assert_int_equal(sizeof(oc_block_q4_0), 18);
}

static int run_group(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q_linear),     cmocka_unit_test(test_i8_linear),
        cmocka_unit_test(test_i8_packed),    cmocka_unit_test(test_i8_matmul),
        cmocka_unit_test(test_packed_bad_input),
        cmocka_unit_test(test_float_linear), cmocka_unit_test(test_bf16_amx),
        cmocka_unit_test(test_quantise_helpers),
        cmocka_unit_test(test_row_helpers),  cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_path_names),
    };
    int rc = cmocka_run_group_tests_name("tile_lowp", tests, setup, teardown);
    oc_engine_shutdown();
    return rc;
}

int main(void)
{
    static const char *isas[] = {NULL, "avx512bf16", "avx512", "avxvnni", "avx2", "portable"};
    return test_each_tile_isa(isas, 6, 0, run_group);
}
