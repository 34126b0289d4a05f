/* The row reductions and the fused exp of the tile layer (opcore/tile.h)
 * give the bits of vecmath.h's fixed-order loops on every row length and on
 * every input that can tell two orders apart: ties of +0 and -0, NaNs with
 * different payloads, lanes for the scalar expf (|x| > 87.34, Inf),
 * lengths on both sides of the 16-element step, the 32-element pair and
 * the 1024-element chunk. The vector paths fold pairs of steps first and
 * take the exact steps again where they see a NaN; this checks that no
 * input tells them apart. main() runs every test in a child process per
 * instruction set (the CPU's best, avx2, portable): the path is chosen
 * once per process. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opcore/engine.h"
#include "opcore/tile.h"
#include "opcore/vecmath.h"
#include "support/oplib.h"

enum { MAXN = 3100, ROWS = 6 };

static const int64_t lengths[] = {1,  15,  16,  17,   31,   32,   33,   47,   48,   63,  64,
                                  65, 100, 129, 1023, 1024, 1025, 1040, 1056, 2049, 3100};

static uint32_t rnd(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static float nan_with(uint32_t payload)
{
    uint32_t u = 0x7fc00000u | (payload & 0x3fffffu);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Row r of pattern p, n long: 0 plain values; 1 only +0, -0 and negative
 * values (the max is a zero: which one is the order's choice); 2 as 1 with
 * positives (the min is the tie); 3 NaNs with different payloads at places
 * the lanes meet differently; 4 values for the scalar expf (overflow,
 * underflow, Inf) among plain ones; 5 every element the same zero sign
 * flipped at random, and a NaN in the last tail. */
static void fill_row(float *x, int64_t n, int p, int r)
{
    uint32_t s = (uint32_t)(p * 7919 + r * 104729 + (int)n);
    for (int64_t j = 0; j < n; j++) {
        float v = (float)((int)(rnd(&s) % 2001) - 1000) / 97.0f;
        switch (p) {
        case 1: v = rnd(&s) % 3 == 0 ? -fabsf(v) - 1.0f : (rnd(&s) & 1 ? -0.0f : 0.0f); break;
        case 2: v = rnd(&s) % 3 == 0 ? fabsf(v) + 1.0f : (rnd(&s) & 1 ? -0.0f : 0.0f); break;
        case 3: if (rnd(&s) % 5 == 0) v = nan_with(rnd(&s)); break;
        case 4: {
            uint32_t k = rnd(&s) % 9;
            v = k == 0 ? 88.9f : k == 1 ? -103.5f : k == 2 ? INFINITY : k == 3 ? -INFINITY : v;
            break;
        }
        case 5: v = rnd(&s) & 1 ? -0.0f : 0.0f; break;
        default: break;
        }
        x[j] = v;
    }
    if (p == 3 && n > 2) x[0] = nan_with(1), x[n - 1] = nan_with(2); /* first and last */
    if (p == 5) x[n - 1] = nan_with(3);
}

/* got has want's bits (a sum's NaN: any NaN; which payload an add keeps is the
 * compiler's choice of operand order) */
static void same_bits(float got, float want, const char *what, int p, int64_t n, int r)
{
    if (memcmp(&got, &want, sizeof got) == 0) return;
    if (strstr(what, "sum") && isnan(got) && isnan(want)) return;
    uint32_t g, w;
    memcpy(&g, &got, 4), memcpy(&w, &want, 4);
    fail_msg("%s, pattern %d, row %d of %lld: got %.9g (0x%08x), want %.9g (0x%08x)", what, p, r,
             (long long)n, got, g, want, w);
}

static oc_tile tile_of(float *p, int64_t rows, int64_t cols)
{
    return (oc_tile){p, rows, cols, cols, 1, OC_FLOAT32, false};
}

/* oc_tile_reduce_rows: RMAX, RMIN and SUM against oc_max_f32, oc_min_f32
 * and oc_sum_f32 of each row. */
static void test_reduce_rows_bits(void **state)
{
    (void)state;
    static float x[ROWS * MAXN], got[ROWS];
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
        int64_t n = lengths[li];
        for (int p = 0; p < 6; p++) {
            for (int r = 0; r < ROWS; r++) fill_row(x + r * n, n, p, r);
            oc_tile X = tile_of(x, ROWS, n), G = tile_of(got, ROWS, 1);
            const oc_tile_redop ops[] = {OC_TILE_RMAX, OC_TILE_RMIN, OC_TILE_SUM};
            for (int o = 0; o < 3; o++) {
                oc_tile_reduce_rows(&G, &X, ops[o]);
                for (int r = 0; r < ROWS; r++) {
                    const float *row = x + r * n;
                    float want = o == 0 ? oc_max_f32(row, n) : o == 1 ? oc_min_f32(row, n)
                                                                      : oc_sum_f32(row, n);
                    same_bits(got[r], want, o == 0 ? "max" : o == 1 ? "min" : "sum", p, n, r);
                }
            }
        }
    }
}

/* oc_tile_activation_reduce(EXP) on rows of every length (but 1: a
 * [rows, 1] tile is a broadcast and a column run for oc_tile_unary, which
 * may take libm's expf where a row takes the vector one): dst as
 * oc_tile_unary_rowbias gives it, each row's sum as oc_sum_f32 of that dst
 * row, the next rows' max (min) as oc_max_f32 (oc_min_f32) of them. */
static void test_exp_reduce_bits(void **state)
{
    (void)state;
    static float x[ROWS * MAXN], nx[ROWS * MAXN], d[ROWS * MAXN], want_d[ROWS * MAXN];
    float bias[ROWS], sum[ROWS], red[ROWS];
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
        int64_t n = lengths[li];
        for (int p = 0; p < 6 && n > 1; p++) {
            for (int r = 0; r < ROWS; r++) {
                fill_row(x + r * n, n, p == 3 || p == 5 ? 0 : p, r);
                fill_row(nx + r * n, n, p, r + ROWS);
                bias[r] = p == 4 ? 0.0f : -(float)r / 4.0f;
            }
            oc_tile X = tile_of(x, ROWS, n), N = tile_of(nx, ROWS, n), D = tile_of(d, ROWS, n);
            oc_tile W = tile_of(want_d, ROWS, n), B = tile_of(bias, ROWS, 1);
            oc_tile S = tile_of(sum, ROWS, 1), R = tile_of(red, ROWS, 1);
            oc_tile_unary_rowbias(&W, &X, OC_TILE_EXP, 0.5f, &B);
            for (int mx = 0; mx < 2; mx++) {
                memset(d, 0xff, sizeof(float) * (size_t)(ROWS * n));
                oc_tile_activation_reduce(&D, &X, OC_TILE_EXP, 0.5f, &B, &S, &R, &N,
                                          mx ? OC_TILE_RMAX : OC_TILE_RMIN);
                assert_int_equal(oc_errcode(), OC_OK);
                for (int r = 0; r < ROWS; r++) {
                    for (int64_t j = 0; j < n; j++)
                        if (memcmp(&d[r * n + j], &want_d[r * n + j], 4))
                            fail_msg("exp, pattern %d, row %d of %lld, element %lld: got %.9g, "
                                     "want %.9g", p, r, (long long)n, (long long)j,
                                     d[r * n + j], want_d[r * n + j]);
                    same_bits(sum[r], oc_sum_f32(want_d + r * n, n), "exp's sum", p, n, r);
                    const float *row = nx + r * n;
                    same_bits(red[r], mx ? oc_max_f32(row, n) : oc_min_f32(row, n),
                              mx ? "next max" : "next min", p, n, r);
                }
            }
            /* no next rows and no bias, as a softmax of one block */
            oc_tile_unary(&W, &X, OC_TILE_EXP, 1.0f, 0.0f);
            oc_tile_activation_reduce(&D, &X, OC_TILE_EXP, 1.0f, NULL, &S, NULL, NULL, OC_TILE_SUM);
            for (int64_t j = 0; j < ROWS * n; j++)
                if (memcmp(&d[j], &want_d[j], 4))
                    fail_msg("exp, no bias, pattern %d, row %lld of %lld, element %lld: got %.9g, "
                             "want %.9g (x %.9g)", p, (long long)(j / n), (long long)n,
                             (long long)(j % n), d[j], want_d[j], x[j]);
            for (int r = 0; r < ROWS; r++)
                same_bits(sum[r], oc_sum_f32(d + r * n, n), "sum", p, n, r);
        }
    }
}

/* softmax by the public calls it stands for: the row max, negated by
 * oc_tile_unary(IDENTITY, -1, 0), activation_reduce EXP with it as bias and
 * the sums, RECIPROCAL, MUL. */
static void softmax_ref(float *d, const oc_tile *x)
{
    int64_t rows = x->rows, n = x->cols;
    float *m = malloc(sizeof(float) * (size_t)rows), *s = malloc(sizeof(float) * (size_t)rows);
    oc_tile X = *x, D = tile_of(d, rows, n);
    oc_tile M = tile_of(m, rows, 1), S = tile_of(s, rows, 1);
    oc_tile_reduce_rows(&M, &X, OC_TILE_RMAX);
    oc_tile_unary(&M, &M, OC_TILE_IDENTITY, -1.0f, 0.0f);
    oc_tile_activation_reduce(&D, &X, OC_TILE_EXP, 1.0f, &M, &S, NULL, NULL, OC_TILE_SUM);
    oc_tile_unary(&S, &S, OC_TILE_RECIPROCAL, 1.0f, 0.0f);
    oc_tile_binary(&D, &D, &S, OC_TILE_MUL);
    free(m), free(s);
}

static void same_rows(const float *got, const float *want, int64_t count, const char *what, int p,
                      int64_t n)
{
    for (int64_t j = 0; j < count; j++)
        if (memcmp(&got[j], &want[j], 4) && !(isnan(got[j]) && isnan(want[j])))
            fail_msg("softmax %s, pattern %d, row %lld of %lld, element %lld: got %.9g, want %.9g",
                     what, p, (long long)(j / n), (long long)n, (long long)(j % n), got[j],
                     want[j]);
}

/* oc_tile_softmax: the composition's bits (on the same layout) on small
 * tiles (in passes), rows in cache and rows from memory (more than half of L2),
 * in place, and on strided rows; patterns with
 * lanes for the scalar expf (-Inf, far below the max), NaNs and zeros. */
static void test_softmax_bits(void **state)
{
    (void)state;
    const int64_t shapes[][2] = {{6, 1}, {2, 5}, {3, 15}, {4, 16}, {6, 17}, {8, 64}, {6, 100},
                                 {64, 64}, {3, 1040}, {5, 3100},
                                 {2 + (int64_t)oc_tile_l2_bytes() / 4096 / 4 * 4 / 2, 1024 + 7},
                                 {2 + (int64_t)oc_tile_l2_bytes() / 8200 / 4 / 2, 8200}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int64_t rows = shapes[si][0], n = shapes[si][1];
        size_t bytes = sizeof(float) * (size_t)(rows * n);
        float *x = malloc(bytes), *d = malloc(bytes), *want = malloc(bytes);
        float *xs = malloc(2 * bytes);
        for (int p = 0; p < 6; p++) {
            for (int64_t r = 0; r < rows; r++) fill_row(x + r * n, n, p, (int)r);
            if (p == 4) /* below the max by more than 87 */
                x[n / 2] = -INFINITY, x[n - 1] = -200.0f;
            oc_tile X = tile_of(x, rows, n), D = tile_of(d, rows, n);
            softmax_ref(want, &X);
            memset(d, 0xff, bytes);
            oc_tile_softmax(&D, &X);
            assert_int_equal(oc_errcode(), OC_OK);
            same_rows(d, want, rows * n, "", p, n);
            memcpy(d, x, bytes); /* in place */
            oc_tile_softmax(&D, &D);
            same_rows(d, want, rows * n, "in place", p, n);
            for (int64_t j = 0; j < rows * n; j++) xs[2 * j] = x[j], xs[2 * j + 1] = 7.0f;
            oc_tile XS = {xs, rows, n, 2 * n, 2, OC_FLOAT32, false}; /* every other element */
            softmax_ref(want, &XS); /* strided: libm's expf, as the calls take it there */
            memset(d, 0xff, bytes);
            oc_tile_softmax(&D, &XS);
            same_rows(d, want, rows * n, "strided", p, n);
        }
        free(x), free(d), free(want), free(xs);
    }
    float a[8], b[6];
    oc_tile A = tile_of(a, 2, 4), B = tile_of(b, 2, 3);
    oc_tile_softmax(&B, &A);
    assert_int_equal(oc_errcode(), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "oc_tile_softmax: dst is 2 x 3, x 2 x 4");
    float e[12] = {0};
    oc_tile E = tile_of(e, 2, 4), F = tile_of(e + 1, 2, 4); /* overlapping, not the same tile */
    oc_tile_softmax(&F, &E);
    assert_int_equal(oc_errcode(), OC_EINVAL);
    test_assert_contains(oc_errmsg(), "overlap in part");
}

static int run_rows(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_rows_bits),
        cmocka_unit_test(test_exp_reduce_bits),
        cmocka_unit_test(test_softmax_bits),
    };
    int rc = cmocka_run_group_tests_name("tile_rows", tests, NULL, NULL);
    oc_engine_shutdown();
    return rc;
}

int main(void)
{
    static const char *isas[] = {NULL, "avx2", "portable"};
    return test_each_tile_isa(isas, 3, 0, run_rows);
}
