/* Group-wise weights of the low-precision linear layer (opcore/tile.h:
 * OC_W_I8G, OC_W_U4G; float32 and bfloat16 x and y), run inside a real
 * multicore kernel (tests/c/lowp_group_kernels) and checked bit for bit
 * against a scalar reference of tile.h's order written here.
 * main() runs every test in a child process per instruction set
 * (OC_TILE_ISA unset, avx512, avxvnni, avx2, portable) and per engine size (1, 2
 * and 3 cores): the kernels are chosen, and the engine sized, once per
 * process. */
#include <math.h>
#include <setjmp.h>
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
    lib = test_build_dir("lowpgtest", "tests/c/lowp_group_kernels", (test_lib_options){.multicore = true});
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

static oc_status run(oc_tensor *y, oc_tensor *s, oc_tensor *z, const oc_tensor *x,
                     const oc_tensor *w, int which, int type, int group)
{
    oc_tensor *res = NULL;
    oc_value a[] = {oc_value_tensor(y),  oc_value_tensor(s),  oc_value_tensor(z),
                    oc_value_tensor(x),  oc_value_tensor(w),  oc_value_int(which),
                    oc_value_int(type), oc_value_int(group)};
    oc_status st = oc_op_invoke(oc_op_find("lowpgtest::gcase"), a, 8, &res);
    if (st != OC_OK)
        print_message("case %d type %d group %d: %s\n", which, type, group, oc_errmsg());
    return st;
}

static uint16_t to_bf16(float f) /* round to nearest even (finite values) */
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

static float of_bf16(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* ---- the scalar reference (tile.h's definition) ------------------------------- */

static float ref_w(const void *w, int t, int64_t k, int64_t group, const float *s, const float *z,
                   int64_t j, int64_t p)
{
    int64_t g = j * (k / group) + p / group;
    if (t == OC_W_I8G) return (float)((const int8_t *)w)[j * k + p] * s[g];
    uint8_t b = ((const uint8_t *)w)[j * (k / 2) + p / 2];
    int q = p % 2 ? b >> 4 : b & 15;
    return ((float)q - z[g]) * s[g];
}

/* q' = (float)q or (float)q - zero: the weight before its group's scale */
static float ref_q(const void *w, int t, int64_t k, int64_t group, const float *z, int64_t j,
                   int64_t p)
{
    if (t == OC_W_I8G) return (float)((const int8_t *)w)[j * k + p];
    uint8_t b = ((const uint8_t *)w)[j * (k / 2) + p / 2];
    return (float)(p % 2 ? b >> 4 : b & 15) - z[j * (k / group) + p / group];
}

static void ref_linear(float *y, const float *x, const void *w, int t, int64_t m, int64_t n,
                       int64_t k, int64_t group, const float *s, const float *z)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc[16] = {0}, h8[8], h4[4];
            for (int64_t g = 0; g < k / group; g++) {
                float part[16] = {0};
                for (int64_t p = g * group; p < (g + 1) * group; p++)
                    part[p % 16] =
                        fmaf(x[i * k + p], ref_q(w, t, k, group, z, j, p), part[p % 16]);
                for (int l = 0; l < 16; l++)
                    acc[l] = fmaf(part[l], s[j * (k / group) + g], acc[l]);
            }
            for (int l = 0; l < 8; l++) h8[l] = acc[l] + acc[l + 8];
            for (int l = 0; l < 4; l++) h4[l] = h8[l] + h8[l + 4];
            y[i * n + j] = (h4[0] + h4[2]) + (h4[1] + h4[3]);
        }
}

static void expect_bits(const float *got, const float *want, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], 4))
            fail_msg("%s: element %lld is %.9g, want %.9g (bit for bit)", what, (long long)i,
                     got[i], want[i]);
}

/* GPTQ's quantiser as tile.h states it, for the test's own weights. */
static void ref_quant_u4(uint8_t *q, float *s, float *z, const float *x, int64_t rows, int64_t k,
                         int64_t group)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t g = 0; g < k / group; g++) {
            const float *v = x + i * k + g * group;
            float lo = 0, hi = 0;
            for (int64_t p = 0; p < group; p++) lo = fminf(lo, v[p]), hi = fmaxf(hi, v[p]);
            if (lo == 0 && hi == 0) lo = -1, hi = 1;
            float sc = (hi - lo) / 15.0f, zp = nearbyintf(-lo / sc);
            s[i * (k / group) + g] = sc, z[i * (k / group) + g] = zp;
            for (int64_t p = 0; p < group; p++) {
                float t = nearbyintf(v[p] / sc) + zp;
                int qv = (int)(t < 0 ? 0 : t > 15 ? 15 : t);
                uint8_t *b = q + i * (k / 2) + (g * group + p) / 2;
                *b = (uint8_t)(p % 2 ? (*b & 15) | (qv << 4) : qv);
            }
        }
}

static void quant_i8(int8_t *q, float *s, const float *x, int64_t rows, int64_t k, int64_t group)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t g = 0; g < k / group; g++) {
            const float *v = x + i * k + g * group;
            float amax = 0;
            for (int64_t p = 0; p < group; p++) amax = fmaxf(amax, fabsf(v[p]));
            float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0;
            s[i * (k / group) + g] = d;
            for (int64_t p = 0; p < group; p++)
                q[i * k + g * group + p] = (int8_t)nearbyintf(v[p] * id);
        }
}

/* ---- tests -------------------------------------------------------------------- */

enum { N = 37, K = 384, MMAX = 40 };
static const int64_t GROUPS[] = {32, 64, 128};
static const int64_t MS[] = {1, 2, 3, 17, 32, 40}; /* 40: dequantised, then the tile matmul */

struct wset {
    int8_t q8[N * K];
    uint8_t q4[N * K / 2];
    float s[N * K / 32], z[N * K / 32], wf[N * K];
};

static void make_weights(struct wset *ws, int t, int64_t group)
{
    fill(ws->wf, N * K, 3 + (unsigned)group);
    ws->wf[5] = 0; /* a group that is not all zero, and one that is */
    for (int p = 0; p < 128; p++) ws->wf[2 * K + p] = 0;
    if (t == OC_W_I8G)
        quant_i8(ws->q8, ws->s, ws->wf, N, K, group);
    else
        ref_quant_u4(ws->q4, ws->s, ws->z, ws->wf, N, K, group);
}

static void test_group_linear(void **state)
{
    (void)state;
    struct wset *ws = malloc(sizeof *ws);
    float *x = malloc(sizeof(float) * MMAX * K), *y = malloc(sizeof(float) * MMAX * N),
          *want = malloc(sizeof(float) * MMAX * N);
    uint16_t *xb = malloc(2 * MMAX * K), *yb = malloc(2 * MMAX * N);
    fill(x, MMAX * K, 11);
    for (int t = OC_W_I8G; t <= OC_W_U4G; t++)
        for (int gi = 0; gi < 3; gi++) {
            int64_t group = GROUPS[gi], ng = K / group;
            make_weights(ws, t, group);
            oc_tensor tw =
                t == OC_W_I8G ? mk(ws->q8, OC_INT8, N, K) : mk(ws->q4, OC_UINT8, N, K / 2);
            oc_tensor ts = mk(ws->s, OC_FLOAT32, N, ng), tz = mk(ws->z, OC_FLOAT32, N, ng);
            for (size_t mi = 0; mi < sizeof MS / sizeof MS[0]; mi++) {
                int64_t m = MS[mi];
                char what[96];
                snprintf(what, sizeof what, "%s group %lld m %lld", oc_wtype_name(t),
                         (long long)group, (long long)m);
                oc_tensor tx = mk(x, OC_FLOAT32, m, K), ty = mk(y, OC_FLOAT32, m, N);
                ref_linear(want, x, t == OC_W_I8G ? (void *)ws->q8 : (void *)ws->q4, t, m, N, K,
                           group, ws->s, ws->z);
                memset(y, 0xff, sizeof(float) * m * N);
                assert_int_equal(run(&ty, &ts, &tz, &tx, &tw, 0, t, (int)group), OC_OK);
                if (m <= 32) {
                    expect_bits(y, want, m * N, what);
                    memset(y, 0xff, sizeof(float) * m * N);
                    assert_int_equal(run(&ty, &ts, &tz, &tx, &tw, 1, t, (int)group), OC_OK);
                    expect_bits(y, want, m * N, "in 3 parts by hand");
                } else { /* the tile matmul: float32 rounding of the same sum */
                    for (int64_t e = 0; e < m * N; e++) {
                        double mag = 0;
                        for (int64_t p = 0; p < K; p++)
                            mag += fabs((double)x[e / N * K + p] *
                                        ref_w(t == OC_W_I8G ? (void *)ws->q8 : (void *)ws->q4, t,
                                              K, group, ws->s, ws->z, e % N, p));
                        if (fabs(y[e] - want[e]) > 1e-5 * mag)
                            fail_msg("%s: y[%lld] = %.9g, want %.9g", what, (long long)e, y[e],
                                     want[e]);
                    }
                }
                /* against the float weights: the quantisation's error, not a wrong sum */
                for (int64_t j = 0; j < N; j++) {
                    double s = 0, mag = 0;
                    for (int64_t p = 0; p < K; p++)
                        s += (double)x[p] * ws->wf[j * K + p],
                            mag += fabs(x[p] * ws->wf[j * K + p]);
                    assert_true(fabs(y[j] - s) <= (t == OC_W_U4G ? 0.1 : 0.01) * mag + 1e-6);
                }
                if (m > 32) continue;
                /* bfloat16 x: widened exactly, the same sums; bfloat16 y: rounded once */
                for (int64_t e = 0; e < m * K; e++) xb[e] = to_bf16(x[e]);
                float *xw = malloc(sizeof(float) * m * K);
                for (int64_t e = 0; e < m * K; e++) xw[e] = of_bf16(xb[e]);
                ref_linear(want, xw, t == OC_W_I8G ? (void *)ws->q8 : (void *)ws->q4, t, m, N, K,
                           group, ws->s, ws->z);
                free(xw);
                oc_tensor txb = mk(xb, OC_BFLOAT16, m, K), tyb = mk(yb, OC_BFLOAT16, m, N);
                assert_int_equal(run(&ty, &ts, &tz, &txb, &tw, 0, t, (int)group), OC_OK);
                expect_bits(y, want, m * N, "bfloat16 x");
                memset(yb, 0xff, 2 * (size_t)(m * N));
                assert_int_equal(run(&tyb, &ts, &tz, &txb, &tw, 0, t, (int)group), OC_OK);
                for (int64_t e = 0; e < m * N; e++)
                    if (yb[e] != to_bf16(want[e]))
                        fail_msg("bfloat16 y[%lld] = %#x, want %#x", (long long)e, yb[e],
                                 to_bf16(want[e]));
            }
        }
    free(ws), free(x), free(y), free(want), free(xb), free(yb);
}

/* bfloat16 x and y with the other weight types: the float32 x result of
 * the same (widened) values, rounded once for a bfloat16 y. */
static void test_bf16_activations(void **state)
{
    (void)state;
    enum { M = 3, KK = 96, NN = 20 };
    float x[M * KK], w[NN * KK], y[M * NN], y2[M * NN], s[1] = {0}, z[1] = {0};
    uint16_t xb[M * KK], yb[M * NN];
    fill(x, M * KK, 7);
    fill(w, NN * KK, 8);
    for (int e = 0; e < M * KK; e++) xb[e] = to_bf16(x[e]), x[e] = of_bf16(xb[e]);
    oc_tensor tx = mk(x, OC_FLOAT32, M, KK), txb = mk(xb, OC_BFLOAT16, M, KK),
              tw = mk(w, OC_FLOAT32, NN, KK), ty = mk(y, OC_FLOAT32, M, NN),
              ty2 = mk(y2, OC_FLOAT32, M, NN), tyb = mk(yb, OC_BFLOAT16, M, NN),
              tsd = mk(s, OC_FLOAT32, 1, 1), tzd = mk(z, OC_FLOAT32, 1, 1);
    /* case 5 with the float32 weights filled by hand (group 0, no scales) */
    assert_int_equal(run(&ty, &tsd, &tzd, &tx, &tw, 5, OC_W_F32, 0), OC_OK);
    assert_int_equal(run(&ty2, &tsd, &tzd, &txb, &tw, 5, OC_W_F32, 0), OC_OK);
    expect_bits(y2, y, M * NN, "float32 weights, bfloat16 x");
    assert_int_equal(run(&tyb, &tsd, &tzd, &txb, &tw, 5, OC_W_F32, 0), OC_OK);
    for (int e = 0; e < M * NN; e++) assert_int_equal(yb[e], to_bf16(y[e]));
}

static void test_quantize_u4(void **state)
{
    (void)state;
    enum { R = 5, KQ = 256 };
    float x[R * KQ], s[R * KQ / 32], z[R * KQ / 32], ws[R * KQ / 32], wz[R * KQ / 32];
    float back[R * KQ];
    uint8_t q[R * KQ / 2], wq[R * KQ / 2];
    fill(x, R * KQ, 31);
    for (int p = 0; p < 64; p++) x[KQ + p] = 0.5f; /* all positive: lo = 0 */
    for (int p = 0; p < 64; p++) x[2 * KQ + p] = 0;
    for (int gi = 0; gi < 3; gi++) {
        int64_t group = GROUPS[gi], ng = KQ / group;
        ref_quant_u4(wq, ws, wz, x, R, KQ, group);
        oc_tensor tq = mk(q, OC_UINT8, R, KQ / 2), ts = mk(s, OC_FLOAT32, R, ng),
                  tz = mk(z, OC_FLOAT32, R, ng), tx = mk(x, OC_FLOAT32, R, KQ);
        assert_int_equal(run(&tq, &ts, &tz, &tx, &tx, 2, 0, (int)group), OC_OK);
        assert_memory_equal(q, wq, sizeof q);
        assert_memory_equal(s, ws, sizeof(float) * (size_t)(R * ng));
        assert_memory_equal(z, wz, sizeof(float) * (size_t)(R * ng));
        /* dequantised: within one step of each value */
        oc_tensor tb = mk(back, OC_FLOAT32, R, KQ);
        assert_int_equal(run(&tb, &ts, &tz, &tx, &tq, 3, OC_W_U4G, (int)group), OC_OK);
        for (int64_t e = 0; e < R * KQ; e++)
            assert_true(fabsf(back[e] - x[e]) <= s[e / KQ * ng + e % KQ / group] * 1.0001f);
        for (int p = 0; p < 64; p++) assert_true(back[2 * KQ + p] == 0);
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
    enum { NB = 8, KB = 128 };
    float x[2 * KB], y[2 * NB], s[NB * 4], z[NB * 4], z2[NB * 4], wf[NB * KB];
    uint8_t q4[NB * KB / 2];
    int8_t q8[NB * KB];
    fill(x, 2 * KB, 1);
    fill(wf, NB * KB, 2);
    ref_quant_u4(q4, s, z, wf, NB, KB, 32);
    oc_tensor tx = mk(x, OC_FLOAT32, 2, KB), ty = mk(y, OC_FLOAT32, 2, NB),
              tw4 = mk(q4, OC_UINT8, NB, KB / 2), tw8 = mk(q8, OC_INT8, NB, KB),
              ts = mk(s, OC_FLOAT32, NB, 4), tz = mk(z, OC_FLOAT32, NB, 4),
              ts3 = mk(s, OC_FLOAT32, NB, 3), tsb = mk(z2, OC_FLOAT32, NB, 2);
    memset(q8, 1, sizeof q8);
    expect_fail(run(&ty, &ts, &tz, &tx, &tw4, 0, OC_W_U4G, 48),
                "oc_weights_grouped: uint4-group weights [8, 64] with group 48 (want 32, 64 or "
                "128)");
    expect_fail(run(&ty, &ts3, &tz, &tx, &tw4, 0, OC_W_U4G, 32),
                "oc_weights_grouped: uint4-group weights [8, 128] in groups of 32 need a "
                "contiguous float32 scale of [8, 4], got float32 [8, 3]");
    expect_fail(run(&ty, &ts, &tsb, &tx, &tw4, 0, OC_W_U4G, 32),
                "need a contiguous float32 zero of [8, 4], got float32 [8, 2]");
    expect_fail(run(&ty, &ts, &tz, &tx, &tw4, 0, OC_W_I8G, 32),
                "oc_weights_grouped: int8-group weights must be a 2-D int8 tensor, got 2-D uint8");
    expect_fail(run(&ty, &ts, &tz, &tx, &tw8, 4, OC_W_I8G, 32),
                "oc_weights_grouped: int8-group weights are symmetric: zero must be NULL");
    oc_tensor tw4o = mk(q4, OC_UINT8, NB, 40); /* k = 80 inputs */
    expect_fail(run(&ty, &ts, &tz, &tx, &tw4o, 0, OC_W_U4G, 64),
                "oc_weights_grouped: uint4-group weights [8, 40] hold k = 80 inputs, not a "
                "multiple of the group 64");
    expect_fail(run(&ty, &ts, &tz, &tx, &tw4, 0, OC_W_Q4_0, 32),
                "oc_weights_grouped: type q4_0 is not a group type");
    /* weights filled by hand: the linear layer's own checks */
    float x2[2 * 33];
    fill(x2, 66, 3);
    oc_tensor tx33 = mk(x2, OC_FLOAT32, 2, 33);
    expect_fail(run(&ty, &ts, &tz, &tx33, &tw4, 5, OC_W_U4G, 32),
                "oc_tile_linear: uint4-group weights with k = 33, not a multiple of the group 32");
    expect_fail(run(&ty, &ts, &tz, &tx, &tw4, 5, OC_W_U4G, 16),
                "oc_tile_linear: uint4-group weights 8 x 128 with group 16");
    expect_fail(run(&ty, &ts, &tz, &tx, &tw8, 5, OC_W_I8G, 32),
                "oc_tile_linear: int8-group weights 8 x 128: scale given, zero given (want a "
                "scale and no zero)");
    /* unsupported dtype pairs */
    int32_t xi[2 * KB] = {0};
    oc_tensor txi = mk(xi, OC_INT32, 2, KB);
    expect_fail(run(&ty, &ts, &tz, &txi, &tw4, 0, OC_W_U4G, 32),
                "oc_tile_linear: x is int32, y float32, w uint4-group (want x and y float32 or "
                "bfloat16");
    /* the quantiser */
    uint8_t qo[2 * KB / 2];
    oc_tensor tq = mk(qo, OC_UINT8, 2, KB / 2), ts2 = mk(s, OC_FLOAT32, 2, 4),
              tz2 = mk(z, OC_FLOAT32, 2, 3), tz4 = mk(z2, OC_FLOAT32, 2, 4);
    expect_fail(run(&tq, &ts2, &tz2, &tx, &tx, 2, 0, 32),
                "oc_tile_quantize_u4: zero is a 2 x 3 float32 tile, want 2 x 4 float32");
    expect_fail(run(&tq, &ts2, &tz4, &tx33, &tx, 2, 0, 32),
                "oc_tile_quantize_u4: x is 2 x 33, its 33 columns are not whole groups of 32");
    /* the next call works */
    float want[2 * NB];
    ref_linear(want, x, q4, OC_W_U4G, 2, NB, KB, 32, s, z);
    assert_int_equal(run(&ty, &ts, &tz, &tx, &tw4, 0, OC_W_U4G, 32), OC_OK);
    expect_bits(y, want, 2 * NB, "after the errors");
}

/* oc_tile_matmul's skinny products (b transposed, m <= 3: the dot
 * kernels) and the BLIS products beside them, within float32 rounding of
 * a double sum, into c (matmul_to) and added to it (matmul). */
static void test_skinny_matmul(void **state)
{
    (void)state;
    enum { KS = 300, NS = 270, MS2 = 40 };
    float *a = malloc(sizeof(float) * MS2 * KS), *b = malloc(sizeof(float) * KS * NS),
          *c = malloc(sizeof(float) * MS2 * NS), *c0 = malloc(sizeof(float) * MS2 * NS);
    uint16_t *bh = malloc(2 * KS * NS);
    float s[1] = {0}, z[1] = {0};
    oc_tensor ts = mk(s, OC_FLOAT32, 1, 1), tz = mk(z, OC_FLOAT32, 1, 1);
    fill(a, MS2 * KS, 41);
    fill(b, KS * NS, 42);
    fill(c0, MS2 * NS, 43);
    const int64_t ms[] = {1, 3, 4, 33};
    for (int dt = 0; dt < 3; dt++) {
        oc_dtype bdt = dt == 0 ? OC_FLOAT32 : dt == 1 ? OC_BFLOAT16 : OC_FLOAT16;
        for (int64_t e = 0; e < KS * NS; e++) {
            if (dt == 1) bh[e] = to_bf16(b[e]), b[e] = of_bf16(bh[e]);
            if (dt == 2) {
                oc_half h = oc_f32_to_half(b[e]);
                bh[e] = h, b[e] = oc_half_to_f32(h);
            }
        }
        for (unsigned flags = 0; flags <= OC_TILE_TRANS_B; flags += OC_TILE_TRANS_B)
            for (int mi = 0; mi < 4; mi++) {
                int64_t m = ms[mi];
                bool bt = flags != 0; /* b is NS x KS then */
                oc_tensor tb = dt ? mk(bh, bdt, bt ? NS : KS, bt ? KS : NS)
                                  : mk(b, bdt, bt ? NS : KS, bt ? KS : NS);
                oc_tensor ta = mk(a, OC_FLOAT32, m, KS), tc = mk(c, OC_FLOAT32, m, NS);
                const char *path = oc_tile_matmul_path_shape(bdt, m, NS, KS, flags);
                if (bt && m <= 3)
                    test_assert_contains(path, "skinny");
                else
                    test_assert_contains(path, "BLIS");
                for (int acc = 0; acc < 2; acc++) {
                    memcpy(c, c0, sizeof(float) * (size_t)(m * NS));
                    assert_int_equal(run(&tc, &ts, &tz, &ta, &tb, 6 + acc, (int)flags, 0), OC_OK);
                    for (int64_t i = 0; i < m; i++)
                        for (int64_t j = 0; j < NS; j++) {
                            double d = 0, mag = 0;
                            for (int64_t p = 0; p < KS; p++) {
                                float bv = bt ? b[j * KS + p] : b[p * NS + j];
                                d += (double)a[i * KS + p] * bv, mag += fabs(a[i * KS + p] * bv);
                            }
                            float got = c[i * NS + j], base = acc ? c0[i * NS + j] : 0;
                            if (fabs(got - (base + d)) > 1e-5 * (mag + fabs(base)))
                                fail_msg("%s %s m %lld acc %d: c[%lld][%lld] = %.9g, want %.9g",
                                         bt ? "b^T" : "b", oc_dtype_name(bdt), (long long)m, acc,
                                         (long long)i, (long long)j, got, base + d);
                        }
                }
            }
    }
    test_assert_contains(oc_tile_matmul_path_shape(OC_FLOAT32, 4, 64, 64, 0), "float32:");
    free(a), free(b), free(c), free(c0), free(bh);
}

static void test_path_names(void **state)
{
    (void)state;
    const char *isa = getenv("OC_TILE_ISA");
    const char *p = oc_tile_linear_path(OC_W_U4G, 1);
    print_message("%s\n", p);
    test_assert_contains(p, "uint4-group weights, m <= 32");
    if (isa && !strcmp(isa, "portable")) test_assert_contains(p, "portable");
    if (isa && !strcmp(isa, "avx2") && __builtin_cpu_supports("avx2"))
        test_assert_contains(p, "avx2");
    test_assert_contains(oc_tile_linear_path(OC_W_I8G, 64), "int8-group weights, m > 32");
    assert_int_equal(oc_wtype_row_bytes(OC_W_U4G, 4096), 2048);
    assert_int_equal(oc_wtype_row_bytes(OC_W_U4G, 33), 0);
    assert_int_equal(oc_wtype_row_bytes(OC_W_I8G, 4096), 4096);
}

static int run_group(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_linear), cmocka_unit_test(test_bf16_activations),
        cmocka_unit_test(test_quantize_u4),  cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_skinny_matmul), cmocka_unit_test(test_path_names),
    };
    int rc = cmocka_run_group_tests_name("tile_lowp_group", tests, setup, teardown);
    oc_engine_shutdown();
    return rc;
}

int main(void)
{
    static const char *isas[] = {NULL, "avx512", "avxvnni", "avx2", "portable"};
    return test_each_tile_isa(isas, 5, 3, run_group);
}
