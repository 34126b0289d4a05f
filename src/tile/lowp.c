/* Low-precision linear layers (opcore/tile.h, "low-precision linear
 * layers"): the weights' formats, argument checks, the split along n
 * across cores and the call of the kernel set lowp_kernels.c chose; and
 * the quantising helpers. docs/gemm_library.md says what runs where. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "opcore/tile.h"
#include "opcore/vec.h"
#include "tile/lowp_internal.h"
#include "tile/tile_internal.h"

/* m up to this runs the skinny kernels for bfloat16 / float16 weights
 * (BLIS above, after widening), F32_SKINNY_M for float32 ones: the dot
 * kernels re-read each group of 4 rows of w (from L2) for each row of x,
 * BLIS packs them once; measured even at m = 4, 0.77x BLIS at m = 8
 * (docs/gemm_library.md). */
#define SKINNY_M 32
#define F32_SKINNY_M 4

static int64_t skinny_m(oc_wtype t) { return t == OC_W_F32 ? F32_SKINNY_M : SKINNY_M; }
#define I8_MAX_K OC__LOWP_I8_MAX_K

/* ---- weights ---------------------------------------------------------------- */

static size_t block_bytes(oc_wtype t)
{
    return t == OC_W_Q8_0 ? sizeof(oc_block_q8_0) : t == OC_W_Q4_0 ? sizeof(oc_block_q4_0) : 0;
}

static bool is_block(oc_wtype t) { return t == OC_W_Q8_0 || t == OC_W_Q4_0; }

const char *oc_wtype_name(oc_wtype type)
{
    switch (type) {
    case OC_W_F32: return "float32";
    case OC_W_BF16: return "bfloat16";
    case OC_W_F16: return "float16";
    case OC_W_Q8_0: return "q8_0";
    case OC_W_Q4_0: return "q4_0";
    case OC_W_I8: return "int8";
    case OC_W_I8G: return "int8-group";
    case OC_W_U4G: return "uint4-group";
    case OC_W_I8_PACKED: return "int8-packed";
    case OC_W_Q8_0_PACKED: return "q8_0-packed";
    case OC_W_Q4_0_PACKED: return "q4_0-packed";
    }
    return "unknown";
}

static bool wtype_ok(oc_wtype t) { return (unsigned)t <= (unsigned)OC_W_Q4_0_PACKED; }

static bool is_qx8(oc_wtype t) { return t == OC_W_Q8_0_PACKED || t == OC_W_Q4_0_PACKED; }

static bool is_group(oc_wtype t) { return t == OC_W_I8G || t == OC_W_U4G; }

size_t oc_wtype_row_bytes(oc_wtype type, int64_t k)
{
    if (k < 0 || !wtype_ok(type) || oc__lowp_is_packed(type)) return 0; /* not rows */
    if (is_block(type)) return k % OC_QK ? 0 : (size_t)(k / OC_QK) * block_bytes(type);
    if (type == OC_W_U4G) return k % 2 ? 0 : (size_t)k / 2;
    size_t es = type == OC_W_F32 ? 4 : type == OC_W_I8 || type == OC_W_I8G ? 1 : 2;
    return (size_t)k * es;
}

static oc_dtype wtype_dtype(oc_wtype t)
{
    return t == OC_W_F32    ? OC_FLOAT32
           : t == OC_W_BF16 ? OC_BFLOAT16
           : t == OC_W_F16  ? OC_FLOAT16
           : t == OC_W_U4G  ? OC_UINT8
                            : OC_INT8;
}

oc_weights oc_weights_of_tensor(const oc_tensor *w, oc_wtype type, const oc_tensor *scale)
{
    const char *fn = "oc_weights_of_tensor";
    oc_weights r = {0};
    if (!oc__require_data(w, fn, "w")) return r;
    if (!wtype_ok(type)) {
        oc__raise(OC_EINVAL, "%s: weight type %d is not an oc_wtype", fn, (int)type);
        return r;
    }
    const char *tn = oc_wtype_name(type);
    if (oc__lowp_is_packed(type)) {
        if (scale || w->dtype != OC_UINT8 || !oc_is_contiguous(w)) {
            oc__raise(OC_EINVAL,
                      "%s: %s weights are a contiguous uint8 tensor of "
                      "oc_weights_pack's bytes and no scale, got %s%s%s",
                      fn, tn, oc_dtype_name(w->dtype),
                      oc_is_contiguous(w) ? "" : " (non-contiguous)", scale ? " and a scale" : "");
            return r;
        }
        r = oc_weights_of_packed(w->data, (size_t)oc_numel(w));
        if (r.data && r.type != type) {
            oc__raise(OC_EINVAL, "%s: the bytes hold %s weights %lld x %lld, not %s", fn,
                      oc_wtype_name(r.type), (long long)r.n, (long long)r.k, tn);
            return (oc_weights){0};
        }
        return r;
    }
    if (is_group(type)) {
        oc__raise(OC_EINVAL,
                  "%s: %s weights carry a group size and per-group scales: use "
                  "oc_weights_grouped",
                  fn, tn);
        return r;
    }
    if (w->ndim != 2) {
        oc__raise(OC_EINVAL, "%s: %s weights must be a 2-D tensor (n outputs x row), got %d dims",
                  fn, tn, w->ndim);
        return r;
    }
    int64_t n = w->sizes[0], cols = w->sizes[1];
    bool byte_dt = w->dtype == OC_UINT8 || w->dtype == OC_INT8;
    if (is_block(type) ? !byte_dt : w->dtype != wtype_dtype(type)) {
        oc__raise(OC_EINVAL, "%s: %s weights in a %s tensor (want %s)", fn, tn,
                  oc_dtype_name(w->dtype),
                  is_block(type) ? "uint8 or int8 bytes" : oc_dtype_name(wtype_dtype(type)));
        return r;
    }
    if (cols > 1 && w->strides[1] != 1) {
        oc__raise(OC_EINVAL,
                  "%s: %s weights [%lld, %lld] with column stride %lld (each row must be "
                  "contiguous)",
                  fn, tn, (long long)n, (long long)cols, (long long)w->strides[1]);
        return r;
    }
    int64_t k = cols;
    if (is_block(type)) {
        int64_t bb = (int64_t)block_bytes(type);
        if (cols % bb) {
            oc__raise(OC_EINVAL,
                      "%s: %s weights [%lld, %lld]: a row of %lld bytes is not whole %lld-byte "
                      "blocks (GGML's block_%s)",
                      fn, tn, (long long)n, (long long)cols, (long long)cols, (long long)bb, tn);
            return r;
        }
        k = cols / bb * OC_QK;
    }
    if (type == OC_W_I8) {
        if (!scale || !oc__require_data(scale, fn, "scale")) {
            if (!scale)
                oc__raise(OC_EINVAL,
                          "%s: int8 weights [%lld, %lld] need a float32 scale of %lld "
                          "elements, got none",
                          fn, (long long)n, (long long)k, (long long)n);
            return r;
        }
        if (scale->dtype != OC_FLOAT32 || oc_numel(scale) != n || !oc_is_contiguous(scale)) {
            oc__raise(OC_EINVAL,
                      "%s: int8 weights [%lld, %lld] need a contiguous float32 scale of %lld "
                      "elements (one per output), got %s with %lld",
                      fn, (long long)n, (long long)k, (long long)n, oc_dtype_name(scale->dtype),
                      (long long)oc_numel(scale));
            return r;
        }
        r.scale = scale->data;
    } else if (scale) {
        oc__raise(OC_EINVAL, "%s: %s weights take no scale tensor (their scales are %s)", fn, tn,
                  is_block(type) ? "in the blocks" : "none");
        return r;
    }
    r.data = w->data;
    r.n = n;
    r.k = k;
    r.row_bytes = (n > 1 ? w->strides[0] : cols) * (int64_t)oc_dtype_size(w->dtype);
    r.type = type;
    return r;
}

/* scale or zero of group-wise weights: contiguous float32 [n, ng]. */
static bool group_arr_ok(const char *fn, const char *arg, const oc_tensor *a, oc_wtype type,
                         int64_t n, int64_t k, int64_t ng)
{
    if (!a) {
        oc__raise(OC_EINVAL,
                  "%s: %s weights [%lld, %lld] need a float32 %s of [%lld, %lld], got none", fn,
                  oc_wtype_name(type), (long long)n, (long long)k, arg, (long long)n,
                  (long long)ng);
        return false;
    }
    if (!oc__require_data(a, fn, arg)) return false;
    if (a->dtype == OC_FLOAT32 && a->ndim == 2 && a->sizes[0] == n && a->sizes[1] == ng &&
        oc_is_contiguous(a))
        return true;
    char shape[96] = "";
    int at = 0;
    for (int d = 0; d < a->ndim && at < (int)sizeof shape - 24; d++)
        at += snprintf(shape + at, sizeof shape - (size_t)at, "%s%lld", d ? ", " : "",
                       (long long)a->sizes[d]);
    oc__raise(OC_EINVAL,
              "%s: %s weights [%lld, %lld] in groups of %lld need a contiguous float32 %s of "
              "[%lld, %lld], got %s%s [%s]",
              fn, oc_wtype_name(type), (long long)n, (long long)k, (long long)(k / ng), arg,
              (long long)n, (long long)ng, oc_is_contiguous(a) ? "" : "non-contiguous ",
              oc_dtype_name(a->dtype), shape);
    return false;
}

oc_weights oc_weights_grouped(const oc_tensor *w, oc_wtype type, int64_t group,
                              const oc_tensor *scale, const oc_tensor *zero)
{
    const char *fn = "oc_weights_grouped";
    oc_weights r = {0};
    if (!oc__require_data(w, fn, "w")) return r;
    if (!is_group(type)) {
        oc__raise(OC_EINVAL, "%s: type %s is not a group type (want OC_W_I8G or OC_W_U4G)", fn,
                  wtype_ok(type) ? oc_wtype_name(type) : "(not an oc_wtype)");
        return r;
    }
    const char *tn = oc_wtype_name(type);
    oc_dtype want = type == OC_W_U4G ? OC_UINT8 : OC_INT8;
    if (w->ndim != 2 || w->dtype != want) {
        oc__raise(OC_EINVAL, "%s: %s weights must be a 2-D %s tensor, got %d-D %s", fn, tn,
                  oc_dtype_name(want), w->ndim, oc_dtype_name(w->dtype));
        return r;
    }
    int64_t n = w->sizes[0], cols = w->sizes[1], k = type == OC_W_U4G ? 2 * cols : cols;
    if (cols > 1 && w->strides[1] != 1) {
        oc__raise(OC_EINVAL, "%s: %s weights [%lld, %lld] with column stride %lld (want 1)", fn,
                  tn, (long long)n, (long long)cols, (long long)w->strides[1]);
        return r;
    }
    if (group != 32 && group != 64 && group != 128) {
        oc__raise(OC_EINVAL, "%s: %s weights [%lld, %lld] with group %lld (want 32, 64 or 128)",
                  fn, tn, (long long)n, (long long)cols, (long long)group);
        return r;
    }
    if (k % group) {
        oc__raise(OC_EINVAL,
                  "%s: %s weights [%lld, %lld] hold k = %lld inputs, not a multiple of the group "
                  "%lld",
                  fn, tn, (long long)n, (long long)cols, (long long)k, (long long)group);
        return r;
    }
    int64_t ng = k / group;
    if (!group_arr_ok(fn, "scale", scale, type, n, k, ng)) return r;
    if (type == OC_W_U4G) {
        if (!group_arr_ok(fn, "zero", zero, type, n, k, ng)) return r;
    } else if (zero) {
        oc__raise(OC_EINVAL, "%s: int8-group weights are symmetric: zero must be NULL", fn);
        return r;
    }
    r.data = w->data;
    r.n = n;
    r.k = k;
    r.row_bytes = n > 1 ? w->strides[0] : cols;
    r.type = type;
    r.scale = scale->data;
    r.group = group;
    r.zero = type == OC_W_U4G ? zero->data : NULL;
    return r;
}

static bool weights_ok(const char *fn, const oc_weights *w)
{
    if (!w || !w->data) {
        oc__raise(OC_EINVAL, "%s: no weights (w or w->data is NULL)", fn);
        return false;
    }
    if (!wtype_ok(w->type)) {
        oc__raise(OC_EINVAL, "%s: weight type %d is not an oc_wtype", fn, (int)w->type);
        return false;
    }
    const char *tn = oc_wtype_name(w->type);
    if (w->n < 0 || w->k < 0) {
        oc__raise(OC_EINVAL, "%s: %s weights of %lld x %lld", fn, tn, (long long)w->n,
                  (long long)w->k);
        return false;
    }
    if (is_block(w->type) && w->k % OC_QK) {
        oc__raise(OC_EINVAL, "%s: %s weights with k = %lld, not a multiple of the block size %d",
                  fn, tn, (long long)w->k, OC_QK);
        return false;
    }
    size_t rb = oc_wtype_row_bytes(w->type, w->k);
    if (w->n > 1 && w->row_bytes < (int64_t)rb) {
        oc__raise(OC_EINVAL, "%s: %s weights of k = %lld need %zu bytes a row, row_bytes is %lld",
                  fn, tn, (long long)w->k, rb, (long long)w->row_bytes);
        return false;
    }
    if (is_group(w->type)) {
        if (w->group != 32 && w->group != 64 && w->group != 128) {
            oc__raise(OC_EINVAL, "%s: %s weights %lld x %lld with group %lld (want 32, 64 or 128)",
                      fn, tn, (long long)w->n, (long long)w->k, (long long)w->group);
            return false;
        }
        if (w->k % w->group) {
            oc__raise(OC_EINVAL,
                      "%s: %s weights with k = %lld, not a multiple of the group %lld", fn, tn,
                      (long long)w->k, (long long)w->group);
            return false;
        }
        if (!w->scale || (w->type == OC_W_U4G) != (w->zero != NULL)) {
            oc__raise(OC_EINVAL, "%s: %s weights %lld x %lld: scale %s, zero %s (want %s)", fn,
                      tn, (long long)w->n, (long long)w->k, w->scale ? "given" : "NULL",
                      w->zero ? "given" : "NULL",
                      w->type == OC_W_U4G ? "both" : "a scale and no zero");
            return false;
        }
    } /* other types never read group and zero: a struct from an older tile.h still works */
    if (w->type == OC_W_I8_PACKED) {
        oc__lowp_pk pk;
        return oc__lowp_pk_of(w, &pk, fn);
    }
    if (is_qx8(w->type)) {
        const char *g;
        int64_t gs;
        return oc__lowp_qx8_of(w, &g, &gs, fn);
    }
    if (w->type == OC_W_I8 && !w->scale) {
        oc__raise(OC_EINVAL, "%s: int8 weights [%lld, %lld] without their %lld scales", fn,
                  (long long)w->n, (long long)w->k, (long long)w->n);
        return false;
    }
    return true;
}

/* ---- scratch ---------------------------------------------------------------- */

/* Each thread's scratch (tile.c), kept between calls: a decode step calls
 * every layer's linear with the same sizes. */
static void *scratch_get(int slot, size_t bytes, const char *fn)
{
    return oc__tile_scratch(OC__SCRATCH_LOWP + slot, bytes, fn);
}

/* ---- the linear layer ----------------------------------------------------------- */

/* Columns [*j0, *j1) of part ith of nth: whole 16-column groups (64-column
 * panels for prepacked int8 weights, 8-row groups for packed Q8_0 / Q4_0). */
static void part_of(const oc_weights *w, int ith, int nth, int64_t *j0, int64_t *j1)
{
    int64_t n = w->n, g = w->type == OC_W_I8_PACKED ? 64 : is_qx8(w->type) ? 8 : 16;
    int64_t groups = (n + g - 1) / g;
    int64_t g0 = groups * ith / nth, g1 = groups * (ith + 1) / nth;
    *j0 = g0 * g < n ? g0 * g : n;
    *j1 = g1 * g < n ? g1 * g : n;
}

static bool part_ok(const char *fn, int ith, int nth)
{
    if (nth >= 1 && ith >= 0 && ith < nth) return true;
    oc__raise(OC_EINVAL,
              "%s: part ith = %d of nth = %d (want 0 <= ith < nth; oc_cpu_id(), oc_cpu_count())",
              fn, ith, nth);
    return false;
}

static bool unit_cols(const char *fn, const char *arg, const oc_tile *t)
{
    if (t->cs == 1 || t->cols <= 1) return true;
    oc__raise(OC_EINVAL,
              "%s: argument '%s' (%lld x %lld) has column stride %lld, want 1 (copy it into a "
              "row-major tile)",
              fn, arg, (long long)t->rows, (long long)t->cols, (long long)t->cs);
    return false;
}

static bool shapes_ok(const char *fn, const oc_tile *y, const oc_tile *x, const oc_weights *w)
{
    if (x->cols == w->k && y->rows == x->rows && y->cols == w->n) return true;
    oc__raise(OC_EINVAL,
              "%s: y is %lld x %lld, x %lld x %lld, %s w %lld x %lld (want y m x n = x m x k "
              "times w^T, w n x k)",
              fn, (long long)y->rows, (long long)y->cols, (long long)x->rows, (long long)x->cols,
              oc_wtype_name(w->type), (long long)w->n, (long long)w->k);
    return false;
}

static int64_t yrs_of(const oc_tile *y) { return y->rows > 1 ? y->rs : y->cols; }

/* nearbyintf(v) for |v| < 2^22 in the default rounding mode (to nearest,
 * ties to even), without the library call and its saving of the
 * floating-point environment: the sum rounds away v's fraction. NaN stays
 * NaN. */
static inline float round_small(float v)
{
    const float big = 12582912.0f; /* 1.5 * 2^23 */
    return (v + big) - big;
}

/* Each row of x as int8 blocks of 32: xq (m x k), xd (m x k / 32). */
static void quantize_blocks32(int8_t *xq, float *xd, const float *x, int64_t xrs, int64_t m,
                              int64_t k)
{
    int64_t nb = k / OC_QK;
    for (int64_t i = 0; i < m; i++)
        for (int64_t b = 0; b < nb; b++) {
            const float *v = x + i * xrs + b * OC_QK;
            float amax = 0.0f;
            for (int l = 0; l < OC_QK; l++) amax = fmaxf(amax, fabsf(v[l]));
            float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int l = 0; l < OC_QK; l++) { /* |v id| <= 127: round_small's range */
                float q = round_small(v[l] * id);
                xq[i * k + b * OC_QK + l] = (int8_t)(q > 127.0f    ? 127.0f
                                                     : q < -127.0f ? -127.0f
                                                                   : q);
            }
            xd[i * nb + b] = d;
        }
}

static void quantize_row(int8_t *q, float *scale, const float *x, int64_t n)
{
    float amax = 0.0f;
    for (int64_t p = 0; p < n; p++) amax = fmaxf(amax, fabsf(x[p]));
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t p = 0; p < n; p++) {
        float v = nearbyintf(x[p] * id);
        q[p] = (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
    }
    *scale = d;
}

/* Q8_0 / Q4_0 from this many rows of x: the set's packed-panel kernel,
 * each weight block unpacked once for all rows. */
#define QGEMM_MIN_M 4
/* Below it, the set's 8-rows-at-a-time kernel (AVX2) up to this many
 * blocks a row: its per-row cost (the pair dot's last reduction and
 * scalar tail) weighs most in short rows. Q4_0, 4096 rows of w, one row of
 * x: K = 576 1.15-1.4x the pair dot at 1 and 2 threads; from K = 1024 at
 * two threads 0.8-0.9x (eight rows streaming at once on each core). */
#define QROWS_MAX_NB 24
#define QSTR_(v) #v
#define QSTR(v) QSTR_(v) /* QSTR(QROWS_MAX_NB): "24", for oc_tile_linear_path */

static bool qgemm_for(const oc__lowp_kernels *ks, int64_t m)
{
    return m >= QGEMM_MIN_M && ks->qgemm;
}

static bool i8_k_ok(const char *fn, const oc_weights *w)
{
    if (w->k < I8_MAX_K) return true;
    oc__raise(OC_EINVAL,
              "%s: int8 weights with k = %lld (want k < %d so that the int32 sum is exact)", fn,
              (long long)w->k, I8_MAX_K);
    return false;
}

static oc__lowp_gdot_fn gdot_of(const oc__lowp_kernels *ks)
{
    if (ks == &oc__lowp_portable) return oc__lowp_gdot_portable;
    return ks == &oc__lowp_avx2 || ks == &oc__lowp_avxvnni ? oc__lowp_gdot_avx2
                                                            : oc__lowp_gdot_avx512;
}

/* Rows of group-wise weights dequantised this many at a time for the
 * tile matmul (m > SKINNY_M). */
#define GROUP_CHUNK 64

static bool linear_group(oc_tile *y, const oc_tile *x, int64_t xrs, const oc_weights *w,
                         int64_t j0, int64_t j1, const char *fn)
{
    int64_t m = x->rows, k = w->k;
    if (m <= SKINNY_M) {
        float *wbuf = scratch_get(4, (size_t)(4 * k) * sizeof(float), fn);
        if (!wbuf) return false;
        gdot_of(oc__lowp_kernels_get())(y->data, yrs_of(y), x->data, xrs, m, w, j0, j1, wbuf);
        return true;
    }
    float *wf = scratch_get(4, (size_t)(GROUP_CHUNK * k) * sizeof(float), fn);
    if (!wf) return false;
    for (int64_t j = j0; j < j1; j += GROUP_CHUNK) {
        int64_t nc = j1 - j < GROUP_CHUNK ? j1 - j : GROUP_CHUNK;
        for (int64_t r = 0; r < nc; r++) oc__lowp_gdeq_row(wf + r * k, w, j + r);
        oc_tile wt = {wf, nc, k, k, 1, OC_FLOAT32, false};
        oc_tile yv = oc_tile_view(y, 0, j, m, nc);
        oc_tile_matmul_to(&yv, x, &wt, OC_TILE_TRANS_B);
    }
    return true;
}

static bool linear_f32(oc_tile *y, const oc_tile *x, const oc_weights *w, int64_t j0, int64_t j1);

/* float32 weights, a few rows of x, on AVX-512: lowp_fmm.c's blocked dots. */
static bool fmm_for(const oc__lowp_kernels *ks, oc_wtype t, int64_t m)
{
    return t == OC_W_F32 && m >= OC__LOWP_FMM_MIN_M && m < OC__LOWP_FMM_MAX_M &&
           (ks == &oc__lowp_avx512 || ks == &oc__lowp_avx512bf16 || ks == &oc__lowp_amx);
}

static bool linear_bf16p(oc_tile *y, const oc_tile *x, int64_t xrs, const oc_weights *w,
                         int64_t j0, int64_t j1, const oc__lowp_kernels *ks)
{
    int64_t xs, kp;
    void *pack;
    const uint16_t *xb = oc__lowp_bf16p_stage(x, xrs, w->k, &xs, &kp, &pack, "oc_tile_linear");
    if (!xb) return false;
    ks->bf16p(y->data, yrs_of(y), xb, xs, kp, x->rows, w->data, w->row_bytes, false, w->k, j0,
              j1, pack);
    return true;
}

/* x and y float32 or bfloat16 (dtype pairs and shapes checked here). */
void oc_tile_linear(oc_tile *y, const oc_tile *x, const oc_weights *w, int ith, int nth)
{
    const char *fn = "oc_tile_linear";
    if (!part_ok(fn, ith, nth) || !weights_ok(fn, w)) return;
    bool xb = x->dtype == OC_BFLOAT16, yb = y->dtype == OC_BFLOAT16;
    if ((!xb && x->dtype != OC_FLOAT32) || (!yb && y->dtype != OC_FLOAT32)) {
        oc__raise(OC_EINVAL,
                  "%s: x is %s, y %s, w %s (want x and y float32 or bfloat16; int8 x: "
                  "oc_tile_linear_i8)",
                  fn, oc_dtype_name(x->dtype), oc_dtype_name(y->dtype), oc_wtype_name(w->type));
        return;
    }
    if (!shapes_ok(fn, y, x, w) || !unit_cols(fn, "y", y) || !unit_cols(fn, "x", x)) return;
    int64_t j0, j1, m = x->rows, k = w->k;
    part_of(w, ith, nth, &j0, &j1);
    if (j0 >= j1 || m == 0) return;
    oc_tile xf = *x, yf = *y;
    if (xb) { /* widened exactly, once per call */
        float *buf = scratch_get(5, (size_t)(m * k) * sizeof(float), fn);
        if (!buf) return;
        xf = (oc_tile){buf, m, k, k, 1, OC_FLOAT32, false};
        oc_tile_copy(&xf, x);
    }
    if (yb) {
        float *buf = scratch_get(6, (size_t)(m * w->n) * sizeof(float), fn);
        if (!buf) return;
        yf = (oc_tile){buf, m, w->n, w->n, 1, OC_FLOAT32, false};
    }
    if (linear_f32(&yf, &xf, w, j0, j1) && yb) {
        oc_tile src = oc_tile_view(&yf, 0, j0, m, j1 - j0),
                dst = oc_tile_view(y, 0, j0, m, j1 - j0);
        oc_tile_copy(&dst, &src);
    }
}

static bool linear_f32(oc_tile *y, const oc_tile *x, const oc_weights *w, int64_t j0, int64_t j1)
{
    const char *fn = "oc_tile_linear";
    int64_t m = x->rows, k = w->k, xrs = x->rows > 1 ? x->rs : x->cols;
    const oc__lowp_kernels *ks = oc__lowp_kernels_get();
    switch (w->type) {
    case OC_W_I8G:
    case OC_W_U4G: return linear_group(y, x, xrs, w, j0, j1, fn);
    case OC_W_F32:
    case OC_W_BF16:
    case OC_W_F16:
        if (oc__lowp_bf16p_for(ks, w->type, m, k)) return linear_bf16p(y, x, xrs, w, j0, j1, ks);
        if (m <= skinny_m(w->type) || k == 0) {
            ks->fdot(y->data, yrs_of(y), x->data, xrs, m, w->data, w->row_bytes, w->type, k, j0,
                     j1);
        } else if (fmm_for(ks, w->type, m)) {
            oc__lowp_fmm_avx512(y->data, yrs_of(y), x->data, xrs, m, w->data,
                                w->row_bytes / (int64_t)sizeof(float), k, j0, j1);
        } else {
            int64_t es = (int64_t)oc_dtype_size(wtype_dtype(w->type));
            oc_tile wt = {(char *)w->data + j0 * w->row_bytes,
                          j1 - j0,
                          k,
                          w->row_bytes / es,
                          1,
                          wtype_dtype(w->type),
                          false};
            oc_tile yv = oc_tile_view(y, 0, j0, m, j1 - j0);
            oc_tile_matmul_to(&yv, x, &wt, OC_TILE_TRANS_B);
        }
        return true;
    case OC_W_Q8_0:
    case OC_W_Q4_0:
    case OC_W_Q8_0_PACKED:
    case OC_W_Q4_0_PACKED: {
        int64_t nb = k / OC_QK;
        int64_t wrb = w->row_bytes; /* packed: checked by weights_ok */
        const char *wd = is_qx8(w->type) ? oc__lowp_qx8_groups(w, &wrb) : w->data;
        int8_t *xq = scratch_get(0, (size_t)(m * k), fn);
        float *xd = scratch_get(1, (size_t)(m * nb) * sizeof(float), fn);
        int32_t *xsum8 = scratch_get(2, (size_t)(m * nb) * sizeof(int32_t), fn);
        if (!xq || !xd || !xsum8) return false;
        quantize_blocks32(xq, xd, x->data, xrs, m, k);
        for (int64_t b = 0; b < m * nb; b++) { /* Q4_0's kernels take unsigned nibbles */
            int32_t t = 0;
            for (int l = 0; l < OC_QK; l++) t += xq[b * OC_QK + l];
            xsum8[b] = 8 * t;
        }
        float *py = y->data;
        int64_t yrs = yrs_of(y);
        if (qgemm_for(ks, m)) {
            void *sc = scratch_get(3, oc__LOWP_QGEMM_BYTES(k), fn);
            if (!sc) return false;
            ks->qgemm(py, yrs, xq, xd, xsum8, m, wd, wrb, w->type, k, j0, j1, sc);
            return true;
        }
        if (is_qx8(w->type)) {
            ks->qx8(py, yrs, xq, xd, xsum8, m, wd, wrb, w->type, k, j0, j1, NULL);
            return true;
        }
        if (ks->qrows && nb <= QROWS_MAX_NB) {
            ks->qrows(py, yrs, xq, xd, xsum8, m, w->data, w->row_bytes, w->type, k, j0, j1,
                      NULL);
            return true;
        }
        for (int64_t j = j0; j < j1; j++) {
            const char *wr = (const char *)w->data + j * w->row_bytes;
            for (int64_t i = 0; i < m; i++)
                py[i * yrs + j] =
                    ks->qdot(wr, w->type, xq + i * k, xd + i * nb, xsum8 + i * nb, nb);
        }
        return true;
    }
    case OC_W_I8:
    case OC_W_I8_PACKED: {
        if (!i8_k_ok(fn, w)) return false;
        int8_t *xq = scratch_get(0, (size_t)(m * k), fn);
        float *xs = scratch_get(1, (size_t)m * sizeof(float), fn);
        if (!xq || !xs) return false;
        /* the same bits either way; the AVX2 form from the AVX2 set up */
        bool avx2q = oc__lowp_quantize_row_avx2 && oc__lowp_kernels_get() != &oc__lowp_portable;
        for (int64_t i = 0; i < m; i++)
            (avx2q ? oc__lowp_quantize_row_avx2 : quantize_row)(
                xq + i * k, xs + i, (const float *)x->data + i * xrs, k);
        return oc__lowp_run_i8(y->data, yrs_of(y), xq, k, xs, m, w, w->scale, j0, j1, fn);
    }
    }
    return false;
}

void oc_tile_linear_i8(oc_tile *y, const oc_tile *xq, const oc_tile *xscale, const oc_weights *w,
                       int ith, int nth)
{
    const char *fn = "oc_tile_linear_i8";
    if (!part_ok(fn, ith, nth) || !weights_ok(fn, w) || !oc__tile_want_f32(y, fn, "y") ||
        !oc__tile_want_f32(xscale, fn, "xscale"))
        return;
    if ((w->type != OC_W_I8 && w->type != OC_W_I8_PACKED) || xq->dtype != OC_INT8) {
        oc__raise(OC_EINVAL,
                  "%s: xq is %s and w %s (want int8 xq and OC_W_I8 or OC_W_I8_PACKED weights; "
                  "oc_tile_linear takes float32 x)",
                  fn, oc_dtype_name(xq->dtype), oc_wtype_name(w->type));
        return;
    }
    if (!shapes_ok(fn, y, xq, w) || !unit_cols(fn, "y", y) || !unit_cols(fn, "xq", xq) ||
        !i8_k_ok(fn, w))
        return;
    if (xscale->rows != xq->rows || xscale->cols != 1) {
        oc__raise(OC_EINVAL,
                  "%s: xscale is %lld x %lld, want %lld x 1 (one scale per row of xq %lld x %lld)",
                  fn, (long long)xscale->rows, (long long)xscale->cols, (long long)xq->rows,
                  (long long)xq->rows, (long long)xq->cols);
        return;
    }
    int64_t j0, j1, m = xq->rows, xrs = m > 1 ? xq->rs : xq->cols;
    part_of(w, ith, nth, &j0, &j1);
    if (j0 >= j1 || m == 0) return;
    const float *xs = xscale->data;
    float *xsc = NULL;
    if (m > 1 && xscale->rs != 1) { /* a strided column: gather it */
        xsc = scratch_get(1, (size_t)m * sizeof(float), fn);
        if (!xsc) return;
        for (int64_t i = 0; i < m; i++) xsc[i] = xs[i * xscale->rs];
        xs = xsc;
    }
    (void)oc__lowp_run_i8(y->data, yrs_of(y), xq->data, xrs, xs, m, w, w->scale, j0, j1, fn);
}

const char *oc_tile_linear_path(oc_wtype type, int64_t m)
{
    static _Thread_local char buf[512];
    const oc__lowp_kernels *ks = oc__lowp_kernels_get();
    const char *isa = ks->isa;
    switch (type) {
    case OC_W_F32:
    case OC_W_BF16:
    case OC_W_F16:
        if (oc__lowp_bf16p_for(ks, type, m, 1) && ks != &oc__lowp_amx)
            snprintf(buf, sizeof buf,
                     "bfloat16 weights, m >= %d: avx512-bf16, x rounded to bfloat16, vdpbf16ps "
                     "on w packed in 64-column panels, 6 x 64 blocks, float32 sums (not the "
                     "float32 product's bits), split along n",
                     OC__LOWP_BF16P_M);
        else if (oc__lowp_bf16p_for(ks, type, m, 1))
            snprintf(buf, sizeof buf,
                     "bfloat16 weights, m >= %d: amx-bf16, x rounded to bfloat16, tdpbf16ps on w "
                     "packed in 64-column panels, 32 x 32 blocks, float32 sums (not the float32 "
                     "product's bits), split along n",
                     OC__LOWP_BF16P_M);
        else if (m <= skinny_m(type))
            snprintf(buf, sizeof buf,
                     "%s weights, m <= %d: opcore's skinny %s kernel (dot products over k, "
                     "4 rows of w at a time, float32 sums), split along n",
                     oc_wtype_name(type), (int)skinny_m(type), isa);
        else if (fmm_for(ks, type, m))
            snprintf(buf, sizeof buf,
                     "float32 weights, %d <= m < %d: opcore's avx512 blocked dots (4 rows of x "
                     "by 4 of w, dot products over k, float32 sums), split along n",
                     OC__LOWP_FMM_MIN_M, OC__LOWP_FMM_MAX_M);
        else
            snprintf(buf, sizeof buf,
                     "%s weights, m > %d: the tile matmul on each part's rows of w (%s)",
                     oc_wtype_name(type), (int)skinny_m(type),
                     oc_tile_matmul_path(wtype_dtype(type)));
        break;
    case OC_W_Q8_0:
    case OC_W_Q4_0:
    case OC_W_Q8_0_PACKED:
    case OC_W_Q4_0_PACKED: {
        bool x8 = is_qx8(type);
        char layout[48] = "";
        if (x8) snprintf(layout, sizeof layout, " (layout %s)", oc__lowp_pk_layout(type));
        /* from qgemm's rows of x: a panel per block, packed from rows or copied from groups */
        const char *panel = x8 ? "a panel from the groups as they are" : "packed per block";
        char many[160];
        snprintf(many, sizeof many, "%s, %d rows of w %s, 4 x %d blocks of y",
                 ks == &oc__lowp_avx2     ? "vpmaddubsw + vpmaddwd"
                 : ks == &oc__lowp_avxvnni ? "vpdpbusd (AVX-VNNI)"
                                           : "vpdpbusd (VNNI)",
                 ks == &oc__lowp_avx2 || ks == &oc__lowp_avxvnni ? 16 : 64, panel,
                 ks == &oc__lowp_avx2 || ks == &oc__lowp_avxvnni ? 16 : 64);
        const char *few =
            x8 ? (ks == &oc__lowp_avx2
                      ? "vpmaddubsw + vpmaddwd on 8 rows of w a register, x's 4 bytes broadcast"
                      : "vpdpbusd on 8 rows of w a register, x's 4 bytes broadcast")
               : (ks->qrows ? "vpmaddubsw + vpmaddwd; rows of at most " QSTR(QROWS_MAX_NB)
                              " blocks 8 rows of w at a time"
                            : "vpdpbusd (VNNI)");
        snprintf(buf, sizeof buf,
                 "%s weights%s: x quantised to int8 blocks of 32, opcore's %s block-dot kernel "
                 "(%s), split along n%s",
                 oc_wtype_name(type), layout, isa,
                 ks == &oc__lowp_portable
                     ? (x8 ? "each block rebuilt, scalar int32 sums" : "scalar int32 sums")
                 : qgemm_for(ks, m) ? many
                                    : few,
                 x8 ? " in 8-row groups" : "");
        break;
    }
    case OC_W_I8:
        snprintf(buf, sizeof buf,
                 "int8 weights: int8 x int8 -> int32, opcore's %s kernel (%s), split along n", isa,
                 ks == &oc__lowp_portable        ? "scalar int32 sums"
                 : ks == &oc__lowp_avx2 ? "vpmaddubsw + vpmaddwd, 4 rows of w at a time; x "
                                          "holding -128: both widened to int16, vpmaddwd"
                 : ks == &oc__lowp_avxvnni ? "VEX vpdpbusd on 256-bit registers, 4 rows of w at a "
                                             "time; x holding -128: both widened to int16, "
                                             "vpdpwssd"
                 : m >= ks->i8p_min_m && ks == &oc__lowp_amx
                     ? "AMX tdpbusd on w packed in 64-column panels, 16 x 64 blocks"
                 : m >= OC__LOWP_I8ROWS_MIN_M && ks == &oc__lowp_amx
                     ? "AMX tdpbssd on w's rows as they are, 16 x 16 blocks, when k is a multiple "
                       "of 64; else u8 x s8 vpdpbusd, 4 x 4 blocks"
                 : m >= ks->i8p_min_m
                     ? "u8 x s8 vpdpbusd, w packed in 64-column panels, 6 x 64 blocks"
                     : "u8 x s8 vpdpbusd on 512-bit registers, 4 x 4 blocks");
        break;
    case OC_W_I8_PACKED: {
        oc__lowp_i8pk_fn f = oc__lowp_i8pk_for(ks);
        if (f)
            snprintf(buf, sizeof buf,
                     "int8 weights prepacked (layout %s): int8 x int8 -> int32, opcore's %s "
                     "kernel (%s), split along n in 64-column panels",
                     oc__lowp_pk_layout(type), isa,
                     f == oc__lowp_i8pk_amx && m >= oc__lowp_i8pk_amx_m
                         ? "AMX tdpbusd on the packed panels, 16 x 64 blocks"
                         : "u8 x s8 vpdpbusd on the packed panels, 6 x 64 blocks");
        else if (oc__lowp_i8pk_rows_for(ks))
            snprintf(buf, sizeof buf,
                     "int8 weights prepacked (layout %s): int8 x int8 -> int32, opcore's %s "
                     "kernel on the packed panels as they are (%s with x's 4 bytes broadcast, "
                     "2 rows of x by 32 columns; x within 7 bits: one multiply step; x "
                     "holding -128: each panel unpacked, both widened to int16), split along n "
                     "in 64-column panels",
                     oc__lowp_pk_layout(type), isa,
                     ks == &oc__lowp_avx2 ? "vpmaddubsw + vpmaddwd" : "VEX vpdpbusd");
        else
            snprintf(buf, sizeof buf,
                     "int8 weights prepacked (layout %s, read as it is by AVX-512 VNNI and AMX): "
                     "each 64-row panel unpacked into scratch, then opcore's %s int8 kernel "
                     "(the same bits, slower than OC_W_I8 here), split along n",
                     oc__lowp_pk_layout(type), isa);
        break;
    }
    case OC_W_I8G:
    case OC_W_U4G:
        if (m <= SKINNY_M)
            snprintf(buf, sizeof buf,
                     "%s weights, m <= %d: opcore's %s kernel, weights dequantised in "
                     "registers (%s), float32 sums in 16 lanes, split along n",
                     oc_wtype_name(type), SKINNY_M, isa,
                     m <= 2 ? "for each row of x" : "4 rows of w at a time, then each row of x");
        else
            snprintf(buf, sizeof buf,
                     "%s weights, m > %d: %d rows of w at a time dequantised to float32, then "
                     "the tile matmul (%s)",
                     oc_wtype_name(type), SKINNY_M, GROUP_CHUNK,
                     oc_tile_matmul_path(OC_FLOAT32));
        break;
    default: snprintf(buf, sizeof buf, "weight type %d: no path", (int)type); break;
    }
    return buf;
}

/* ---- quantising helpers ------------------------------------------------------- */

static inline float *frow(const oc_tile *t, int64_t i) { return (float *)t->data + i * t->rs; }

static bool column_ok(const char *fn, const char *arg, const oc_tile *t, int64_t rows, oc_dtype dt)
{
    if (t->dtype == dt && t->rows == rows && t->cols == 1) return true;
    oc__raise(OC_EINVAL, "%s: argument '%s' is a %lld x %lld %s tile, want %lld x 1 %s", fn, arg,
              (long long)t->rows, (long long)t->cols, oc_dtype_name(t->dtype), (long long)rows,
              oc_dtype_name(dt));
    return false;
}

void oc_tile_absmax_rows(oc_tile *dst, const oc_tile *a)
{
    const char *fn = "oc_tile_absmax_rows";
    if (!oc__tile_want_f32(a, fn, "a") || !column_ok(fn, "dst", dst, a->rows, OC_FLOAT32)) return;
    for (int64_t i = 0; i < a->rows; i++) {
        const float *r = frow(a, i);
        float m = 0.0f;
        bool nan = false;
        for (int64_t j = 0; j < a->cols; j++) {
            float v = fabsf(r[j * a->cs]);
            nan |= v != v;
            m = v > m ? v : m;
        }
        frow(dst, i)[0] = nan ? NAN : m;
    }
}

static bool groups_ok(const char *fn, const oc_tile *x, const oc_tile *q, const oc_tile *scale,
                      int64_t group)
{
    if (x->dtype != OC_FLOAT32 || q->dtype != OC_INT8 || scale->dtype != OC_FLOAT32) {
        oc__raise(OC_EINVAL, "%s: x %s, q %s, scale %s (want float32, int8, float32)", fn,
                  oc_dtype_name(x->dtype), oc_dtype_name(q->dtype), oc_dtype_name(scale->dtype));
        return false;
    }
    if (q->rows != x->rows || q->cols != x->cols) {
        oc__raise(OC_EINVAL, "%s: q is %lld x %lld, x %lld x %lld (want the same shape)", fn,
                  (long long)q->rows, (long long)q->cols, (long long)x->rows, (long long)x->cols);
        return false;
    }
    if (group < 0 || (group > 0 && x->cols % group)) {
        oc__raise(OC_EINVAL, "%s: group %lld does not divide the %lld columns", fn,
                  (long long)group, (long long)x->cols);
        return false;
    }
    int64_t ng = group ? x->cols / group : 1;
    if (scale->rows != x->rows || scale->cols != ng) {
        oc__raise(OC_EINVAL,
                  "%s: scale is %lld x %lld, want %lld x %lld (rows x cols / group for %lld x %lld "
                  "and group %lld)",
                  fn, (long long)scale->rows, (long long)scale->cols, (long long)x->rows,
                  (long long)ng, (long long)x->rows, (long long)x->cols, (long long)group);
        return false;
    }
    return true;
}

void oc_tile_quantize_rows(oc_tile *q, oc_tile *scale, const oc_tile *x, int64_t group)
{
    const char *fn = "oc_tile_quantize_rows";
    if (!groups_ok(fn, x, q, scale, group)) return;
    int64_t g = group ? group : x->cols;
    if (g == 0) return;
    float *tmp = scratch_get(2, (size_t)g * sizeof(float), fn);
    int8_t *qt = scratch_get(0, (size_t)g, fn);
    if (!tmp || !qt) return;
    for (int64_t i = 0; i < x->rows; i++)
        for (int64_t c0 = 0, gi = 0; c0 < x->cols; c0 += g, gi++) {
            for (int64_t j = 0; j < g; j++) tmp[j] = frow(x, i)[(c0 + j) * x->cs];
            quantize_row(qt, frow(scale, i) + gi * scale->cs, tmp, g);
            int8_t *qr = (int8_t *)q->data + i * q->rs;
            for (int64_t j = 0; j < g; j++) qr[(c0 + j) * q->cs] = qt[j];
        }
}

void oc_tile_dequantize_rows(oc_tile *x, const oc_tile *q, const oc_tile *scale, int64_t group)
{
    const char *fn = "oc_tile_dequantize_rows";
    if (!groups_ok(fn, x, q, scale, group)) return;
    int64_t g = group ? group : x->cols;
    for (int64_t i = 0; i < x->rows; i++) {
        const int8_t *qr = (const int8_t *)q->data + i * q->rs;
        for (int64_t j = 0; j < x->cols; j++)
            frow(x, i)[j * x->cs] = (float)qr[j * q->cs] * frow(scale, i)[j / g * scale->cs];
    }
}

/* ggml's quantize_row_q8_0 / q4_0 reference, for one block of 32. */
static void quantize_block(char *blk, oc_wtype type, const float *v)
{
    if (type == OC_W_Q8_0) {
        float amax = 0.0f;
        for (int l = 0; l < OC_QK; l++) amax = fmaxf(amax, fabsf(v[l]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        oc_half h = oc_f32_to_half(d);
        memcpy(blk, &h, 2);
        for (int l = 0; l < OC_QK; l++) {
            float q = nearbyintf(v[l] * id);
            blk[2 + l] = (char)(int8_t)(q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q);
        }
    } else {
        float amax = 0.0f, max = 0.0f;
        for (int l = 0; l < OC_QK; l++)
            if (amax < fabsf(v[l])) {
                amax = fabsf(v[l]);
                max = v[l];
            }
        float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        oc_half h = oc_f32_to_half(d);
        memcpy(blk, &h, 2);
        for (int l = 0; l < OC_QK / 2; l++) {
            int a = (int)(int8_t)(v[l] * id + 8.5f),
                b = (int)(int8_t)(v[l + OC_QK / 2] * id + 8.5f);
            a = a < 15 ? a : 15;
            b = b < 15 ? b : 15;
            blk[2 + l] = (char)(uint8_t)(a | (b << 4));
        }
    }
}

void oc_tile_quantize_blocks(void *blocks, oc_wtype type, const oc_tile *x)
{
    const char *fn = "oc_tile_quantize_blocks";
    if (!oc__tile_want_f32(x, fn, "x")) return;
    if (!is_block(type)) {
        oc__raise(OC_EINVAL, "%s: type %s is not a block type (want OC_W_Q8_0 or OC_W_Q4_0)", fn,
                  oc_wtype_name(type));
        return;
    }
    if (x->cols % OC_QK) {
        oc__raise(OC_EINVAL, "%s: x is %lld x %lld, its %lld columns are not whole %s blocks of %d",
                  fn, (long long)x->rows, (long long)x->cols, (long long)x->cols,
                  oc_wtype_name(type), OC_QK);
        return;
    }
    size_t rb = oc_wtype_row_bytes(type, x->cols), bb = block_bytes(type);
    float v[OC_QK];
    for (int64_t i = 0; i < x->rows; i++)
        for (int64_t b = 0; b < x->cols / OC_QK; b++) {
            for (int l = 0; l < OC_QK; l++) v[l] = frow(x, i)[(b * OC_QK + l) * x->cs];
            quantize_block((char *)blocks + (size_t)i * rb + (size_t)b * bb, type, v);
        }
}

/* GPTQ's asymmetric quantiser for one group of g values (tile.h). */
static void quantize_u4_group(uint8_t *q, float *scale, float *zero, const float *v, int64_t g)
{
    float lo = 0.0f, hi = 0.0f;
    for (int64_t p = 0; p < g; p++) {
        lo = fminf(lo, v[p]);
        hi = fmaxf(hi, v[p]);
    }
    if (lo == 0.0f && hi == 0.0f) lo = -1.0f, hi = 1.0f;
    float s = (hi - lo) / 15.0f, z = nearbyintf(-lo / s);
    for (int64_t p = 0; p < g; p++) {
        float t = nearbyintf(v[p] / s) + z;
        q[p] = (uint8_t)(t < 0.0f ? 0.0f : t > 15.0f ? 15.0f : t);
    }
    *scale = s;
    *zero = z;
}

void oc_tile_quantize_u4(void *packed, oc_tile *scale, oc_tile *zero, const oc_tile *x,
                         int64_t group)
{
    const char *fn = "oc_tile_quantize_u4";
    if (!oc__tile_want_f32(x, fn, "x")) return;
    if (group != 32 && group != 64 && group != 128) {
        oc__raise(OC_EINVAL, "%s: group %lld (want 32, 64 or 128)", fn, (long long)group);
        return;
    }
    if (x->cols % group) {
        oc__raise(OC_EINVAL, "%s: x is %lld x %lld, its %lld columns are not whole groups of %lld",
                  fn, (long long)x->rows, (long long)x->cols, (long long)x->cols,
                  (long long)group);
        return;
    }
    int64_t ng = x->cols / group;
    const oc_tile *st[2] = {scale, zero};
    for (int a = 0; a < 2; a++)
        if (st[a]->dtype != OC_FLOAT32 || st[a]->rows != x->rows || st[a]->cols != ng) {
            oc__raise(OC_EINVAL,
                      "%s: %s is a %lld x %lld %s tile, want %lld x %lld float32 (x %lld x %lld "
                      "in groups of %lld)",
                      fn, a ? "zero" : "scale", (long long)st[a]->rows, (long long)st[a]->cols,
                      oc_dtype_name(st[a]->dtype), (long long)x->rows, (long long)ng,
                      (long long)x->rows, (long long)x->cols, (long long)group);
            return;
        }
    float v[128];
    uint8_t q[128];
    for (int64_t i = 0; i < x->rows; i++) {
        uint8_t *row = (uint8_t *)packed + i * (x->cols / 2);
        for (int64_t g = 0; g < ng; g++) {
            for (int64_t p = 0; p < group; p++) v[p] = frow(x, i)[(g * group + p) * x->cs];
            quantize_u4_group(q, frow(scale, i) + g * scale->cs, frow(zero, i) + g * zero->cs, v,
                              group);
            for (int64_t p = 0; p < group; p += 2)
                row[(g * group + p) / 2] = (uint8_t)(q[p] | (q[p + 1] << 4));
        }
    }
}

void oc_tile_dequantize_weights(oc_tile *x, const oc_weights *w, int64_t r0)
{
    const char *fn = "oc_tile_dequantize_weights";
    if (!weights_ok(fn, w) || !oc__tile_want_f32(x, fn, "x")) return;
    if (x->cols != w->k || r0 < 0 || r0 + x->rows > w->n) {
        oc__raise(OC_EINVAL, "%s: x is %lld x %lld for rows [%lld, %lld) of %s weights %lld x %lld",
                  fn, (long long)x->rows, (long long)x->cols, (long long)r0,
                  (long long)(r0 + x->rows), oc_wtype_name(w->type), (long long)w->n,
                  (long long)w->k);
        return;
    }
    if (w->type == OC_W_I8_PACKED) {
        oc__lowp_pk pk;
        int8_t *row = scratch_get(4, (size_t)w->k, fn);
        if (!row || !oc__lowp_pk_of(w, &pk, fn)) return;
        for (int64_t i = 0; i < x->rows; i++) {
            oc__lowp_pk_unpack(row, w->k, &pk, r0 + i, 1);
            for (int64_t p = 0; p < w->k; p++)
                frow(x, i)[p * x->cs] = (float)row[p] * pk.scale[r0 + i];
        }
        return;
    }
    if (is_qx8(w->type)) { /* each row's blocks rebuilt, then as Q8_0 / Q4_0 */
        int64_t gs, nb = w->k / OC_QK;
        const char *g = oc__lowp_qx8_groups(w, &gs); /* checked by weights_ok */
        oc_wtype bt = oc__lowp_qx8_base(w->type);
        int64_t bb = (int64_t)block_bytes(bt);
        char *row = scratch_get(4, (size_t)(nb * bb), fn);
        if (!row) return;
        for (int64_t i = 0; i < x->rows; i++) {
            for (int64_t b = 0; b < nb; b++) oc__lowp_qx8_block(row + b * bb, g, gs, bt, r0 + i, b);
            oc_weights wr = {row, 1, w->k, nb * bb, bt, NULL, 0, NULL};
            oc_tile xr = oc_tile_view(x, i, 0, 1, x->cols);
            oc_tile_dequantize_weights(&xr, &wr, 0);
        }
        return;
    }
    if (is_group(w->type)) {
        float *buf = scratch_get(4, (size_t)w->k * sizeof(float), fn);
        if (!buf) return;
        for (int64_t i = 0; i < x->rows; i++) {
            oc__lowp_gdeq_row(buf, w, r0 + i);
            for (int64_t p = 0; p < w->k; p++) frow(x, i)[p * x->cs] = buf[p];
        }
        return;
    }
    for (int64_t i = 0; i < x->rows; i++) {
        const char *wr = (const char *)w->data + (r0 + i) * w->row_bytes;
        float *xr = frow(x, i);
        for (int64_t p = 0; p < w->k; p++) {
            float v;
            if (w->type == OC_W_I8) {
                v = (float)((const int8_t *)wr)[p] * w->scale[r0 + i];
            } else if (is_block(w->type)) {
                const char *blk = wr + p / OC_QK * (int64_t)block_bytes(w->type);
                oc_half h;
                memcpy(&h, blk, 2);
                int l = (int)(p % OC_QK), q;
                if (w->type == OC_W_Q8_0)
                    q = ((const int8_t *)(blk + 2))[l];
                else {
                    uint8_t byte = ((const uint8_t *)(blk + 2))[l % 16];
                    q = (l < 16 ? byte & 15 : byte >> 4) - 8;
                }
                v = (float)q * oc_half_to_f32(h);
            } else {
                v = oc__lowp_wval(wr, w->type, p);
            }
            xr[p * x->cs] = v;
        }
    }
}

void oc_tile_gather_rows(oc_tile *dst, const oc_tile *a, const oc_tile *idx)
{
    const char *fn = "oc_tile_gather_rows";
    if (!oc__tile_want_f32(a, fn, "a") || !column_ok(fn, "dst", dst, a->rows, OC_FLOAT32) ||
        !column_ok(fn, "idx", idx, a->rows, OC_INT32))
        return;
    for (int64_t i = 0; i < a->rows; i++) {
        int32_t j = ((const int32_t *)idx->data)[i * idx->rs];
        if (j < 0 || j >= a->cols) {
            oc__raise(OC_EINVAL, "%s: idx[%lld] = %d is outside [0, %lld) (a is %lld x %lld)", fn,
                      (long long)i, j, (long long)a->cols, (long long)a->rows, (long long)a->cols);
            return;
        }
        frow(dst, i)[0] = frow(a, i)[j * a->cs];
    }
}

void oc_tile_logsumexp_rows(oc_tile *dst, const oc_tile *a)
{
    const char *fn = "oc_tile_logsumexp_rows";
    if (!oc__tile_want_f32(a, fn, "a") || !column_ok(fn, "dst", dst, a->rows, OC_FLOAT32)) return;
    for (int64_t i = 0; i < a->rows; i++) {
        const float *r = frow(a, i);
        float m = -INFINITY;
        bool nan = false;
        for (int64_t j = 0; j < a->cols; j++) {
            nan |= r[j * a->cs] != r[j * a->cs];
            m = fmaxf(m, r[j * a->cs]);
        }
        float out;
        if (nan)
            out = NAN;
        else if (m == -INFINITY || m == INFINITY)
            out = m;
        else {
            float s[8] = {0};
            int64_t j = 0;
            for (; j + 8 <= a->cols; j += 8)
                for (int l = 0; l < 8; l++) s[l] += expf(r[(j + l) * a->cs] - m);
            float t = oc__lowp_sum8(s);
            for (; j < a->cols; j++) t += expf(r[j * a->cs] - m);
            out = m + logf(t);
        }
        frow(dst, i)[0] = out;
    }
}

void oc_tile_dot_rows(oc_tile *dst, const oc_tile *a, const oc_tile *b)
{
    const char *fn = "oc_tile_dot_rows";
    if (!oc__tile_want_f32(a, fn, "a") || !oc__tile_want_f32(b, fn, "b") ||
        !column_ok(fn, "dst", dst, a->rows, OC_FLOAT32))
        return;
    if (b->cols != a->cols || (b->rows != a->rows && b->rows != 1)) {
        oc__raise(OC_EINVAL,
                  "%s: a is %lld x %lld, b %lld x %lld (want b the same shape or 1 x %lld)", fn,
                  (long long)a->rows, (long long)a->cols, (long long)b->rows, (long long)b->cols,
                  (long long)a->cols);
        return;
    }
    for (int64_t i = 0; i < a->rows; i++) {
        const float *ra = frow(a, i), *rb = frow(b, b->rows == 1 ? 0 : i);
        float s[8] = {0};
        int64_t j = 0;
        for (; j + 8 <= a->cols; j += 8)
            for (int l = 0; l < 8; l++) s[l] += ra[(j + l) * a->cs] * rb[(j + l) * b->cs];
        float t = oc__lowp_sum8(s);
        for (; j < a->cols; j++) t += ra[j * a->cs] * rb[j * b->cs];
        frow(dst, i)[0] = t;
    }
}
