/* src/tile/lowp_internal.h — the low-precision linear layer's micro-kernels,
 * one set per instruction set (src/tile/lowp.c: portable C and the
 * dispatch; src/tile/lowp_x86.c: AVX2 and AVX-512). Not public. */
#ifndef OPCORE_TILE_LOWP_INTERNAL_H
#define OPCORE_TILE_LOWP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "opcore/tile.h"

/* Float weights: y[i][j] = dot(x row i, w row j) for i < m, j in [j0, j1);
 * x and y rows at strides xrs, yrs (floats); w rows wrb bytes apart. */
typedef void (*oc__lowp_fdot_fn)(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                                 const char *w, int64_t wrb, oc_wtype type, int64_t k, int64_t j0,
                                 int64_t j1);

/* Q8_0 / Q4_0 weights: one row of w (nb blocks) against one row of x
 * quantised to int8 blocks (xq: nb * 32 values, xd: nb float32 scales,
 * xsum8: 8 times each block's sum of xq, for Q4_0's unsigned nibbles);
 * the sum in the order tile.h defines (8 partial sums by block % 8). */
typedef float (*oc__lowp_qdot_fn)(const char *wrow, oc_wtype type, const int8_t *xq,
                                  const float *xd, const int32_t *xsum8, int64_t nb);

/* int8 x int8: y[i][j] = ((float)isum * xs[i]) * ws[j], isum exact;
 * ws NULL: y holds int32 and y[i][j] += isum (oc_tile_matmul's int32 c;
 * xs unread). */
typedef void (*oc__lowp_i8_fn)(float *y, int64_t yrs, const int8_t *x, int64_t xrs, const float *xs,
                               int64_t m, const int8_t *w, int64_t wrb, const float *ws, int64_t k,
                               int64_t j0, int64_t j1);

/* int8 x int8 for many rows of x: xu is x + 128 as u8 (m rows of kp
 * bytes, k rounded up to 4, zero padded), pack a workspace of
 * oc__LOWP_PACK_BYTES(kp, m) bytes (64-byte aligned); the same result as
 * oc__lowp_i8_fn. */
typedef void (*oc__lowp_i8p_fn)(float *y, int64_t yrs, const uint8_t *xu, int64_t kp,
                                const float *xs, int64_t m, const int8_t *w, int64_t wrb,
                                const float *ws, int64_t k, int64_t j0, int64_t j1, void *pack);
#define oc__LOWP_PACK_BYTES(kp, m) (((size_t)(kp) * 64 + 64 * sizeof(int32_t)) + (size_t)(m) * 256)

/* bfloat16 weights for many rows of x: xb is x rounded to bfloat16
 * (nearest even; rows xs values apart, kp = k rounded up to 32 of them
 * used, rows padded to a multiple of 16, zeros), pack a workspace of oc__LOWP_BF16P_BYTES(kp)
 * bytes (64-byte aligned); y's columns [j0, j1), float32 sums of pair
 * products (tile.h's bound, not the float32 path's bits). w: n rows of k
 * (wrb bytes apart), or with kn k rows of n (a matmul's untransposed b). */
typedef void (*oc__lowp_bf16p_fn)(float *y, int64_t yrs, const uint16_t *xb, int64_t xs,
                                  int64_t kp, int64_t m, const char *w, int64_t wrb, bool kn,
                                  int64_t k, int64_t j0, int64_t j1, void *pack);
#define oc__LOWP_BF16P_BYTES(kp, m) ((size_t)(kp) * 128 + ((size_t)(m) + 33) * 256)

/* Columns of w^T a panel: the int8 panel form of lowp_x86.c's pack_panel,
 * of the prepacked weights (lowp_i8.c) and of the kernels reading them. */
#define OC__LOWP_PANEL 64

/* Prepacked int8 weights (OC_W_I8_PACKED, lowp_i8.c): xu and xs as for
 * oc__lowp_i8p_fn (kp the packed k, a multiple of 64; rows padded to 16),
 * the panel of columns [j, j + 64) at panels + j / 64 * pbytes (pack_panel's
 * form: kp / 4 rows of 64 int32, then the 64 columns' sums); j0 a multiple
 * of 64; ws all n scales (NULL: int32 y as above). scratch:
 * oc__LOWP_I8PK_BYTES(m), 64-byte aligned. NULL where not built. */
typedef void (*oc__lowp_i8pk_fn)(float *y, int64_t yrs, const uint8_t *xu, int64_t kp,
                                 const float *xs, int64_t m, const char *panels, int64_t pbytes,
                                 const float *ws, int64_t j0, int64_t j1, void *scratch);
#define oc__LOWP_I8PK_BYTES(m) (((size_t)(m) + 16) * 256)
/* AVX-512 VNNI; AMX from oc__lowp_i8pk_amx_m rows of x (the former below). */
extern const oc__lowp_i8pk_fn oc__lowp_i8pk_avx512, oc__lowp_i8pk_amx;
/* The same panels on 256-bit registers (AVX2; AVX-VNNI), for rows of
 * int8 x (xrs apart, k rounded up to 4 bytes, zero past k, no -128; x7:
 * the rows hold x + 64 as u8, every x within [-64, 63]): each core's
 * columns [j0, j1), j0 a multiple of 64. NULL where not built. */
typedef void (*oc__lowp_i8pk_rows_fn)(float *y, int64_t yrs, const int8_t *x, int64_t xrs,
                                      const float *xs, int64_t m, const char *panels,
                                      int64_t pbytes, const float *ws, int64_t k, int64_t j0,
                                      int64_t j1, bool x7);
extern const oc__lowp_i8pk_rows_fn oc__lowp_i8pk_avx2, oc__lowp_i8pk_avxvnni;
/* Their rows of x (AVX2): m rows of k bytes, xrs apart, into xp, k4 apart
 * (k rounded up to 4, zero past k), as x + 64 where every x fits 7 bits.
 * Returns -1 where some x is -128 (xp untouched), 1 for 7 bits, 0 else. */
extern int (*const oc__lowp_i8pk_prep)(int8_t *xp, int64_t k4, const int8_t *x, int64_t xrs,
                                       int64_t m, int64_t k);
/* lowp.c's row quantiser (one scale per row, int8 in [-127, 127]) on AVX2,
 * the same bits. NULL where not built. */
extern void (*const oc__lowp_quantize_row_avx2)(int8_t *q, float *scale, const float *x,
                                                int64_t n);
extern const int oc__lowp_i8pk_amx_m;

/* k bound for an exact int32 sum of int8 x int8 (128 * 128 * k < 2^31) */
#define OC__LOWP_I8_MAX_K 131072

/* y's columns [j0, j1) (float32, rows yrs apart; ws NULL: int32 sums
 * added, for oc_tile_matmul) from m rows of xq (xs their scales) against
 * OC_W_I8 weights w (ws their scales) or prepacked ones (lowp_i8.c);
 * false after raising fn's error. */
bool oc__lowp_run_i8(float *y, int64_t yrs, const int8_t *xq, int64_t xrs, const float *xs,
                     int64_t m, const oc_weights *w, const float *ws, int64_t j0, int64_t j1,
                     const char *fn);

/* Prepacked int8 weights read back (lowp_i8.c): the header checked
 * against w (n, k, its byte count in row_bytes), raising fn's error. */
typedef struct oc__lowp_pk {
    int64_t n, k, kp, pbytes;
    const float *scale;
    const char *panels;
} oc__lowp_pk;
bool oc__lowp_pk_of(const oc_weights *w, oc__lowp_pk *pk, const char *fn);
/* Rows [j, j + nc) of w (within one panel) into rows, rrb bytes apart. */
void oc__lowp_pk_unpack(int8_t *rows, int64_t rrb, const oc__lowp_pk *pk, int64_t j, int nc);
/* The layout name of a packed weight type ("vnni-panel64", "q4_0-x8"). */
const char *oc__lowp_pk_layout(oc_wtype t);
/* t is one of the prepacked types (OC_W_I8_PACKED, OC_W_Q8_0_PACKED,
 * OC_W_Q4_0_PACKED). */
bool oc__lowp_is_packed(oc_wtype t);

/* Q8_0 / Q4_0 weights packed 8 rows a group (OC_W_Q8_0_PACKED,
 * OC_W_Q4_0_PACKED; lowp_pack.c): group g (rows [8 g, 8 g + 8)) at
 * groups + g * gstride, its block b OC__LOWP_QX8_BYTES(bt) bytes a block
 * on: the 8 rows' float16 scales d (16 bytes), then for each 4-byte quad
 * q of the block's weight bytes (Q8_0: 8, weights 4q..4q+3; Q4_0: 4, low
 * nibbles weights 4q..4q+3, high ones 16+4q..16+4q+3) the 8 rows' 4 bytes
 * in row order (32 bytes). Rows past n are zero. */
#define OC__LOWP_QX8_BYTES(bt) ((bt) == OC_W_Q8_0 ? 16 + 8 * 32 : 16 + 8 * 16)
/* The block type of a packed Q type. */
static inline oc_wtype oc__lowp_qx8_base(oc_wtype t)
{
    return t == OC_W_Q8_0_PACKED ? OC_W_Q8_0 : OC_W_Q4_0;
}
/* Row j's block b as GGML stores it, into blk (bt's block bytes). */
static inline void oc__lowp_qx8_block(char *blk, const char *groups, int64_t gstride,
                                      oc_wtype bt, int64_t j, int64_t b)
{
    const char *o = groups + j / 8 * gstride + b * OC__LOWP_QX8_BYTES(bt);
    int r = (int)(j % 8), nq = bt == OC_W_Q8_0 ? 8 : 4;
    memcpy(blk, o + 2 * r, 2);
    for (int q = 0; q < nq; q++) memcpy(blk + 2 + 4 * q, o + 16 + 32 * q + 4 * r, 4);
}
/* Bytes of the header in front of any packed weights (lowp_pack.c). */
#define OC__LOWP_PK_HDR 128
/* Packed Q weights read back: the header checked against w (type, n, k),
 * the groups and their stride; false after raising fn's error. */
bool oc__lowp_qx8_of(const oc_weights *w, const char **groups, int64_t *gstride, const char *fn);
/* The groups and their stride of packed Q weights oc__lowp_qx8_of has
 * checked (lowp.c's weights_ok, once per call). */
static inline const char *oc__lowp_qx8_groups(const oc_weights *w, int64_t *gstride)
{
    *gstride = w->k / OC_QK * OC__LOWP_QX8_BYTES(oc__lowp_qx8_base(w->type));
    return (const char *)w->data + OC__LOWP_PK_HDR;
}

/* int8 x int8 on AMX reading w's rows as they are (the AMX set, from
 * OC__LOWP_I8ROWS_MIN_M rows of x up to i8p_min_m): oc__lowp_i8_fn's
 * arguments and result, k a multiple of 64; scratch
 * oc__LOWP_I8ROWS_BYTES(k), 64-byte aligned. NULL where not built. */
typedef void (*oc__lowp_i8rows_fn)(float *y, int64_t yrs, const int8_t *x, int64_t xrs,
                                   const float *xs, int64_t m, const int8_t *w, int64_t wrb,
                                   const float *ws, int64_t k, int64_t j0, int64_t j1,
                                   void *scratch);
#define oc__LOWP_I8ROWS_BYTES(k) ((size_t)(k) * 16 + 1024)
/* below: the AVX-512 4 x 4 kernel (1 and 2 rows: 0.72 vs 0.81 ms at
 * 4096 x 4096; 4 rows even) */
#define OC__LOWP_I8ROWS_MIN_M 4
extern const oc__lowp_i8rows_fn oc__lowp_i8_amx_rows;

/* One int8 x int8 result (the kernels' last step): y[at] = ((float)s *
 * xs[i]) * ws[j], or with ws NULL the int32 y[at] += s. */
static inline void oc__lowp_i8_put(float *y, int64_t at, int32_t s, const float *xs, int64_t i,
                                   const float *ws, int64_t j)
{
    if (ws)
        y[at] = ((float)s * xs[i]) * ws[j];
    else
        ((int32_t *)(void *)y)[at] += s;
}

/* Q8_0 / Q4_0 weights against m rows of x (xq, xd, xsum8 as for
 * oc__lowp_qdot_fn, row i at i * k, i * k / 32, i * k / 32), into y's
 * columns [j0, j1): the same bits as the per-pair dot, for many rows.
 * w rows wrb bytes apart (t OC_W_Q8_0 / OC_W_Q4_0), or groups of 8 rows
 * wrb bytes apart (t OC_W_Q8_0_PACKED / OC_W_Q4_0_PACKED, j0 a multiple
 * of 8). scratch: oc__LOWP_QGEMM_BYTES(k), 64-byte aligned. */
typedef void (*oc__lowp_qgemm_fn)(float *y, int64_t yrs, const int8_t *xq, const float *xd,
                                  const int32_t *xsum8, int64_t m, const char *w, int64_t wrb,
                                  oc_wtype type, int64_t k, int64_t j0, int64_t j1, void *scratch);
#define oc__LOWP_QGEMM_BYTES(k) ((size_t)(k) / 32 * 2304 + 4 * 8 * 64 * sizeof(float))

typedef struct oc__lowp_kernels {
    const char *isa; /* "avx512-vnni", "avx-vnni", "avx2", "portable" */
    oc__lowp_fdot_fn fdot;
    oc__lowp_qdot_fn qdot;
    oc__lowp_i8_fn i8;
    oc__lowp_i8p_fn i8p;        /* NULL: i8 for every m */
    int i8p_kalign, i8p_malign; /* i8p's xu: k padded to a multiple of kalign, rows of malign */
    int i8p_min_m;              /* i8p from this many rows of x */
    /* NULL: i8 takes every x; else i8 is exact only for x without -128
     * (the sign trick of AVX2 and AVX-VNNI) and this kernel runs x holding it */
    oc__lowp_i8_fn i8_full;
    oc__lowp_bf16p_fn bf16p; /* NULL: bfloat16 weights widened for the tile matmul */
    oc__lowp_qgemm_fn qgemm; /* NULL: qdot per (row of x, row of w) for every m */
    /* below qgemm's rows of x, the same arguments (no scratch); NULL: qdot per pair */
    oc__lowp_qgemm_fn qrows;
    /* Q weights packed 8 rows a group (OC_W_Q8_0_PACKED / OC_W_Q4_0_PACKED)
     * below qgemm's rows of x (every m where qgemm is NULL): w the groups,
     * wrb their stride, t the packed type, j0 a multiple of 8, no scratch;
     * the same bits. qgemm takes such weights too (from its rows of x). */
    oc__lowp_qgemm_fn qx8;
} oc__lowp_kernels;

/* Group-wise weights (OC_W_I8G / OC_W_U4G, lowp_group.c): y[i][j] for i <
 * m, j in [j0, j1), tile.h's 16-lane order (the same bits on every set);
 * wbuf 4 * k floats (64-byte aligned) of scratch. */
typedef void (*oc__lowp_gdot_fn)(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                                 const oc_weights *w, int64_t j0, int64_t j1, float *wbuf);
extern const oc__lowp_gdot_fn oc__lowp_gdot_portable, oc__lowp_gdot_avx2, oc__lowp_gdot_avx512;

/* Row j of group-wise weights dequantised into dst (k floats). */
void oc__lowp_gdeq_row(float *dst, const oc_weights *w, int64_t j);

/* The kernel set for this CPU (and OC_TILE_ISA), chosen once
 * (lowp_kernels.c); the portable set. */
const oc__lowp_kernels *oc__lowp_kernels_get(void);
extern const oc__lowp_kernels oc__lowp_portable;
/* The prepacked int8 kernel of a set (NULL: it reads rows of w). */
oc__lowp_i8pk_fn oc__lowp_i8pk_for(const oc__lowp_kernels *ks);
oc__lowp_i8pk_rows_fn oc__lowp_i8pk_rows_for(const oc__lowp_kernels *ks);

/* Element p of a row of float weights (float32, bfloat16 or float16). */
static inline float oc__lowp_wval(const char *w, oc_wtype t, int64_t p)
{
    switch (t) {
    case OC_W_BF16: {
        oc_bfloat16 h;
        memcpy(&h, w + 2 * p, 2);
        return oc_bf16_to_f32(h);
    }
    case OC_W_F16: {
        oc_half h;
        memcpy(&h, w + 2 * p, 2);
        return oc_half_to_f32(h);
    }
    default: {
        float f;
        memcpy(&f, w + 4 * p, 4);
        return f;
    }
    }
}


/* oc_tile_matmul's skinny products (lowp_skinny.c): whether c = a op(b)
 * is one (float32 a and c, m <= 32, not all of m, n, k small), and the
 * product, into c (accumulate: c +=). Shapes and dtypes checked before. */
bool oc__lowp_skinny_takes(const oc_tile *c, const oc_tile *a, const oc_tile *b, unsigned flags);
void oc__lowp_skinny_matmul(oc_tile *c, const oc_tile *a, const oc_tile *b, unsigned flags,
                            bool accumulate, const char *fn);
/* The sentence for oc_tile_matmul_path_shape; NULL: not a skinny product. */
const char *oc__lowp_skinny_path(oc_dtype dtype, int64_t m, int64_t n, int64_t k, unsigned flags);

/* oc_tile_matmul's bfloat16 x bfloat16 products on the bfloat16 linear
 * layer's AMX-BF16 kernel (lowp_bf16.c): whether it takes
 * c = a op(b) (m >= 32, a not transposed, unit column strides, c float32
 * or bfloat16), the product (accumulate: c +=), and the path's sentence
 * (NULL: not taken). The products are exact and summed in float32,
 * denormal inputs read as zero (tile.h). Shapes and dtypes checked before. */
bool oc__lowp_bf16_matmul_takes(const oc_tile *c, const oc_tile *a, const oc_tile *b,
                                unsigned flags);
void oc__lowp_bf16_matmul(oc_tile *c, const oc_tile *a, const oc_tile *b, unsigned flags,
                          bool accumulate, const char *fn);
const char *oc__lowp_bf16_matmul_path(oc_dtype dtype, int64_t m, unsigned flags);

/* oc_tile_matmul's int8 x int8 -> int32 products (lowp_i8.c): whether the
 * linear layer's int8 kernels take c += op(a) op(b) (k below the exact
 * bound, c with unit column stride), and the product (op(a) and op(b)^T
 * copied into rows first unless they are rows with unit column stride).
 * Shapes and dtypes checked before. The path's sentence (NULL: k too
 * long, the portable loop). */
bool oc__lowp_i8_matmul_takes(const oc_tile *c, int64_t k);
void oc__lowp_i8_matmul(oc_tile *c, const oc_tile *a, const oc_tile *b, unsigned flags);
const char *oc__lowp_i8_matmul_path(int64_t m, int64_t k);

/* The 8 partial sums of a block dot added in tile.h's order. */
static inline float oc__lowp_sum8(const float s[8])
{
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

/* Exact int32 sum of one Q8_0 / Q4_0 weight block times 32 int8 values. */
int32_t oc__lowp_block_isum(const char *blk, oc_wtype type, const int8_t *xq);

/* The x86 kernel sets (lowp_x86.c); NULL members where not built. */
extern const oc__lowp_kernels oc__lowp_avx2, oc__lowp_avxvnni, oc__lowp_avx512,
    oc__lowp_avx512bf16, oc__lowp_amx;

/* The CPU has AMX-INT8 and AMX-BF16 and Linux lets this process use its tile data. */
bool oc__lowp_amx_usable(void);

/* bfloat16 weights from this many rows of x on AMX-BF16 or AVX512-BF16
 * (prefill): x rounded to bfloat16, pair products summed (tile.h's bound). */
#define OC__LOWP_BF16P_M 32

static inline bool oc__lowp_bf16p_for(const oc__lowp_kernels *ks, oc_wtype t, int64_t m,
                                      int64_t k)
{
    return t == OC_W_BF16 && ks->bf16p && m >= OC__LOWP_BF16P_M && k > 0;
}

/* x's m rows (xrs elements apart; float32 rounded to bfloat16, bfloat16 as
 * they are) staged as oc__lowp_bf16p_fn reads them (lowp_bf16.c): rows *xs
 * apart, k padded to *kp (32) and the rows to 16 with zeros; *pack its
 * workspace. NULL: out of scratch (raised, naming fn). */
const uint16_t *oc__lowp_bf16p_stage(const oc_tile *x, int64_t xrs, int64_t k, int64_t *xs,
                                     int64_t *kp, void **pack, const char *fn);

/* float32 weights (rows of wrs floats) against m rows of x, into y's
 * columns [j0, j1), for OC__LOWP_FMM_MIN_M <= m < OC__LOWP_FMM_MAX_M on a CPU
 * with AVX-512 (lowp_fmm.c; a no-op where not built). */
#define OC__LOWP_FMM_MIN_M 5
#define OC__LOWP_FMM_MAX_M 48
void oc__lowp_fmm_avx512(float *y, int64_t yrs, const float *x, int64_t xrs, int64_t m,
                         const float *w, int64_t wrs, int64_t k, int64_t j0, int64_t j1);

#endif
