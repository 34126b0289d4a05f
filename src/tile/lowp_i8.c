/* int8 x int8 products: the call of the kernel set lowp_kernels.c chose
 * for the linear layer's int8 weights (lowp.c) and for oc_tile_matmul's
 * int8 tiles (matmul.c), on rows of w or on prepacked int8 weights
 * (OC_W_I8_PACKED; the format and packing: lowp_pack.c). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "opcore/tile.h"
#include "tile/lowp_internal.h"
#include "tile/tile_internal.h"

/* ---- running int8 products ------------------------------------------------------ */

static void *scratch_get(int slot, size_t bytes, const char *fn)
{
    return oc__tile_scratch(OC__SCRATCH_LOWP + slot, bytes, fn);
}

static bool has_min_i8(const int8_t *x, int64_t xrs, int64_t m, int64_t k)
{
    for (int64_t i = 0; i < m; i++) {
        int any = 0;
        for (int64_t p = 0; p < k; p++) any |= x[i * xrs + p] == -128;
        if (any) return true;
    }
    return false;
}

/* The set's row kernel for x: its i8_full where x holds -128. */
static oc__lowp_i8_fn i8_for(const oc__lowp_kernels *ks, const int8_t *x, int64_t xrs, int64_t m,
                             int64_t k)
{
    return ks->i8_full && has_min_i8(x, xrs, m, k) ? ks->i8_full : ks->i8;
}

/* xq + 128 as u8 into xu: m rows of kp bytes (zero past k), then zero
 * rows up to mp. */
static void to_u8(uint8_t *xu, int64_t kp, int64_t mp, const int8_t *xq, int64_t xrs, int64_t m,
                  int64_t k)
{
    for (int64_t i = 0; i < m; i++) {
        for (int64_t p = 0; p < k; p++) xu[i * kp + p] = (uint8_t)(xq[i * xrs + p] ^ 0x80);
        memset(xu + i * kp + k, 0, (size_t)(kp - k));
    }
    memset(xu + m * kp, 0, (size_t)((mp - m) * kp));
}

/* AMX on w's own rows (lowp_x86.c), for 4 to 31 rows of x. */
static bool amx_rows(const oc__lowp_kernels *ks, int64_t m, int64_t k)
{
    return ks == &oc__lowp_amx && oc__lowp_i8_amx_rows && m >= OC__LOWP_I8ROWS_MIN_M &&
           m < ks->i8p_min_m && k % 64 == 0 && k > 0;
}

oc__lowp_i8pk_fn oc__lowp_i8pk_for(const oc__lowp_kernels *ks)
{
    if (ks == &oc__lowp_amx) return oc__lowp_i8pk_amx;
    return ks == &oc__lowp_avx512 || ks == &oc__lowp_avx512bf16 ? oc__lowp_i8pk_avx512 : NULL;
}

oc__lowp_i8pk_rows_fn oc__lowp_i8pk_rows_for(const oc__lowp_kernels *ks)
{
    if (ks == &oc__lowp_avx2) return oc__lowp_i8pk_avx2;
    return ks == &oc__lowp_avxvnni ? oc__lowp_i8pk_avxvnni : NULL;
}

/* Prepacked int8 weights: the set's panel kernel (AVX-512, AMX; AVX2 and
 * AVX-VNNI on 256-bit registers), or each panel's rows unpacked for the
 * portable row kernel. */
static bool run_i8_packed(float *y, int64_t yrs, const int8_t *xq, int64_t xrs, const float *xs,
                          int64_t m, const oc_weights *w, int64_t j0, int64_t j1, const char *fn)
{
    oc__lowp_pk pk;
    if (!oc__lowp_pk_of(w, &pk, fn)) return false;
    const oc__lowp_kernels *ks = oc__lowp_kernels_get();
    oc__lowp_i8pk_fn f = oc__lowp_i8pk_for(ks);
    int64_t k = pk.k;
    if (f) {
        int64_t kp = pk.kp, mp = (m + 15) / 16 * 16;
        uint8_t *xu = scratch_get(2, (size_t)(mp * kp), fn);
        void *sc = scratch_get(3, oc__LOWP_I8PK_BYTES(mp), fn);
        if (!xu || !sc) return false;
        to_u8(xu, kp, mp, xq, xrs, m, k);
        f(y, yrs, xu, kp, xs, m, pk.panels, pk.pbytes, pk.scale, j0, j1, sc);
        return true;
    }
    oc__lowp_i8pk_rows_fn g = oc__lowp_i8pk_rows_for(ks);
    oc__lowp_i8_fn i8 = NULL;
    if (g && oc__lowp_i8pk_prep) { /* x's rows padded to 4-byte steps (+ 64 if in 7 bits) */
        int64_t k4 = (k + 3) / 4 * 4;
        int8_t *xp = scratch_get(2, (size_t)(m * k4), fn);
        if (!xp) return false;
        int x7 = oc__lowp_i8pk_prep(xp, k4, xq, xrs, m, k);
        if (x7 >= 0) {
            g(y, yrs, xp, k4, xs, m, pk.panels, pk.pbytes, pk.scale, k, j0, j1, x7 == 1);
            return true;
        }
        i8 = ks->i8_full; /* x holds -128: the scan is done */
    }
    if (!i8) i8 = i8_for(ks, xq, xrs, m, k);
    int8_t *rows = scratch_get(4, (size_t)(64 * k), fn);
    if (!rows) return false;
    for (int64_t j = j0; j < j1; j += 64) {
        int nc = j1 - j < 64 ? (int)(j1 - j) : 64;
        oc__lowp_pk_unpack(rows, k, &pk, j, nc);
        i8(y + j, yrs, xq, xrs, xs, m, rows, k, pk.scale + j, k, 0, nc);
    }
    return true;
}

bool oc__lowp_run_i8(float *y, int64_t yrs, const int8_t *xq, int64_t xrs, const float *xs,
                     int64_t m, const oc_weights *w, const float *ws, int64_t j0, int64_t j1,
                     const char *fn)
{
    if (w->type == OC_W_I8_PACKED) return run_i8_packed(y, yrs, xq, xrs, xs, m, w, j0, j1, fn);
    const oc__lowp_kernels *ks = oc__lowp_kernels_get();
    if (ks->i8p && m >= ks->i8p_min_m) {
        int64_t k = w->k, ka = ks->i8p_kalign, kp = (k + ka - 1) / ka * ka;
        int64_t mp = (m + ks->i8p_malign - 1) / ks->i8p_malign * ks->i8p_malign;
        uint8_t *xu = scratch_get(2, (size_t)(mp * kp), fn);
        void *pack = scratch_get(3, oc__LOWP_PACK_BYTES(kp, mp), fn);
        if (!xu || !pack) return false;
        to_u8(xu, kp, mp, xq, xrs, m, k);
        ks->i8p(y, yrs, xu, kp, xs, m, w->data, w->row_bytes, ws, k, j0, j1, pack);
        return true;
    }
    if (amx_rows(ks, m, w->k)) {
        void *sc = scratch_get(2, oc__LOWP_I8ROWS_BYTES(w->k), fn);
        if (!sc) return false;
        oc__lowp_i8_amx_rows(y, yrs, xq, xrs, xs, m, w->data, w->row_bytes, ws, w->k, j0, j1, sc);
        return true;
    }
    i8_for(ks, xq, xrs, m, w->k)(y, yrs, xq, xrs, xs, m, w->data, w->row_bytes, ws, w->k, j0, j1);
    return true;
}

/* ---- oc_tile_matmul's int8 products ------------------------------------------ */

bool oc__lowp_i8_matmul_takes(const oc_tile *c, int64_t k)
{
    return k > 0 && k < OC__LOWP_I8_MAX_K && c->rows > 0 && c->cols > 0 &&
           (c->cs == 1 || c->cols == 1) && (c->rs >= c->cols || c->rows == 1);
}

/* Element (i, p) of op(t) (int8). */
static inline int8_t i8_at(const oc_tile *t, bool tr, int64_t i, int64_t p)
{
    return ((const int8_t *)t->data)[tr ? p * t->rs + i * t->cs : i * t->rs + p * t->cs];
}

void oc__lowp_i8_matmul(oc_tile *c, const oc_tile *a, const oc_tile *b, unsigned flags)
{
    const char *fn = "oc_tile_matmul";
    bool ta = flags & OC_TILE_TRANS_A, tb = !(flags & OC_TILE_TRANS_B); /* b as n x k rows */
    int64_t m = c->rows, n = c->cols, k = ta ? a->rows : a->cols;
    const int8_t *pa = a->data, *pb = b->data;
    int64_t ars = m > 1 ? a->rs : k, brs = n > 1 ? b->rs : k;
    if (ta || (a->cs != 1 && k > 1) || (ars < k && m > 1)) { /* a into m x k rows */
        int8_t *t = scratch_get(5, (size_t)(m * k), fn);
        if (!t) return;
        for (int64_t i = 0; i < m; i++)
            for (int64_t p = 0; p < k; p++) t[i * k + p] = i8_at(a, ta, i, p);
        pa = t, ars = k;
    }
    if (tb || (b->cs != 1 && k > 1) || (brs < k && n > 1)) { /* op(b)^T into n x k rows */
        int8_t *t = scratch_get(6, (size_t)(n * k), fn);
        if (!t) return;
        for (int64_t p = 0; p < k; p++)
            for (int64_t j = 0; j < n; j++) t[j * k + p] = i8_at(b, tb, j, p);
        pb = t, brs = k;
    }
    oc_weights w = {pb, n, k, brs, OC_W_I8, NULL, 0, NULL};
    (void)oc__lowp_run_i8(c->data, m > 1 ? c->rs : n, pa, ars, NULL, m, &w, NULL, 0, n, fn);
}

const char *oc__lowp_i8_matmul_path(int64_t m, int64_t k)
{
    static _Thread_local char buf[384];
    const oc__lowp_kernels *ks = oc__lowp_kernels_get();
    if (k >= OC__LOWP_I8_MAX_K) return NULL;
    const char *how = ks == &oc__lowp_portable ? "scalar int32 sums"
                      : ks == &oc__lowp_avx2
                          ? "vpmaddubsw + vpmaddwd, 4 rows of b^T at a time; a holding -128: "
                            "both widened to int16, vpmaddwd"
                      : ks == &oc__lowp_avxvnni
                          ? "VEX vpdpbusd, 4 rows of b^T at a time; a holding -128: both "
                            "widened to int16, vpdpwssd"
                      : amx_rows(ks, m, k)
                          ? "AMX tdpbssd on rows of b^T as they are, 16 x 16 blocks (k % 64 = 0)"
                      : m >= ks->i8p_min_m && ks == &oc__lowp_amx
                          ? "AMX tdpbusd on b^T packed in 64-column panels per call"
                      : m >= ks->i8p_min_m
                          ? "vpdpbusd on b^T packed in 64-column panels per call, 6 x 64 blocks"
                          : "vpdpbusd on 512-bit registers, 4 x 4 blocks";
    snprintf(buf, sizeof buf,
             "int8: opcore's %s int8 kernel of the linear layer (%s), exact int32 sums, for k < "
             "%d (b read as n x k rows: b transposed as it is, else copied so; longer k: "
             "opcore's portable int32 loop)",
             ks->isa, how, OC__LOWP_I8_MAX_K);
    return buf;
}

