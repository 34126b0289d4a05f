/* y = x W^T for the decoder's linear layers: x [m, k] float32, W [n, k]
 * in float32, bfloat16, or GGML's Q8_0 / Q4_0 blocks (uint8 [n, k / 32 *
 * 34] and [n, k / 32 * 18]: the bytes of a GGUF tensor, as they are).
 * The cores split W's rows (n), so every core reads its own share of the
 * weights once, whatever m is.
 *
 * Decoding (m <= SKINNY): each weight row is widened to float32 in an L1
 * buffer and dotted with the m rows of x (16 lane-wise partial sums, a
 * fixed order). Prefill: a panel of PANEL weight rows is widened into the
 * TCM and multiplied with the tile layer's matmul (BLIS / libxsmm). */
#include <string.h>

#include <opcore/kernel.h>
#include <opcore/tile.h>
#include <opcore/vec.h>

#include "quant.h"

#define SKINNY 4
#define PANEL 64

/* Row j of W widened to float32 (k elements). */
typedef void (*widen_fn)(float *dst, const uint8_t *row, int64_t k);

static void widen_f32(float *dst, const uint8_t *row, int64_t k) { memcpy(dst, row, (size_t)k * 4); }
static void widen_bf16(float *dst, const uint8_t *row, int64_t k)
{
    oc_bf16_to_f32_n(dst, (const oc_bfloat16 *)row, k);
}
static void widen_q8_0(float *dst, const uint8_t *row, int64_t k) { llm_dequant_q8_0(dst, row, k); }
static void widen_q4_0(float *dst, const uint8_t *row, int64_t k) { llm_dequant_q4_0(dst, row, k); }

static float dot(const float *a, const float *b, int64_t k)
{
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= k; i += 16)
        for (int l = 0; l < 16; l++) acc[l] += a[i + l] * b[i + l];
    for (; i < k; i++) acc[i & 15] += a[i] * b[i];
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

static void linear_any(const oc_tensor *x, const oc_tensor *w, widen_fn widen, int64_t row_bytes)
{
    oc_tensor *out = oc_dst_tensor();
    int64_t m = x->sizes[0], k = x->sizes[1], n = out->sizes[1], lo, hi;
    oc_core_range(n, 16, &lo, &hi);
    if (hi <= lo || m == 0) return;
    const float *xs = x->data;
    float *ys = out->data;
    const uint8_t *ws = w->data;
    if (m <= SKINNY) {
        float *buf = oc_tcm_malloc((size_t)k * sizeof *buf);
        for (int64_t j = lo; j < hi; j++) {
            const float *wr = (const float *)(ws + j * row_bytes);
            if (widen != widen_f32) widen(buf, ws + j * row_bytes, k), wr = buf;
            for (int64_t i = 0; i < m; i++) ys[i * n + j] = dot(xs + i * k, wr, k);
        }
        oc_tcm_free(buf);
        return;
    }
    oc_tile X = oc_tile_of_tensor(x, 0), Y = oc_tile_of_tensor(out, 0);
    if (widen == widen_f32) { /* W as it is: one call on this core's rows */
        oc_tile W = oc_tile_of_tensor(w, 0);
        oc_tile wv = oc_tile_view(&W, lo, 0, hi - lo, k), yv = oc_tile_view(&Y, 0, lo, m, hi - lo);
        oc_tile_matmul_to(&yv, &X, &wv, OC_TILE_TRANS_B);
        return;
    }
    oc_tile P = oc_tile_alloc(PANEL, k, OC_FLOAT32);
    for (int64_t j0 = lo; j0 < hi; j0 += PANEL) {
        int64_t nb = hi - j0 < PANEL ? hi - j0 : PANEL;
        for (int64_t r = 0; r < nb; r++)
            widen((float *)P.data + r * P.rs, ws + (j0 + r) * row_bytes, k);
        oc_tile pv = oc_tile_view(&P, 0, 0, nb, k), yv = oc_tile_view(&Y, 0, j0, m, nb);
        oc_tile_matmul_to(&yv, &X, &pv, OC_TILE_TRANS_B);
    }
    oc_tile_free(&P);
}

oc_tensor *linear(const oc_tensor *x, const oc_tensor *w)
{
    bool bf = w->dtype == OC_BFLOAT16;
    linear_any(x, w, bf ? widen_bf16 : widen_f32, x->sizes[1] * (bf ? 2 : 4));
    return oc_dst_tensor();
}

oc_tensor *linear_q8_0(const oc_tensor *x, const oc_tensor *w)
{
    linear_any(x, w, widen_q8_0, w->sizes[1]);
    return oc_dst_tensor();
}

oc_tensor *linear_q4_0(const oc_tensor *x, const oc_tensor *w)
{
    linear_any(x, w, widen_q4_0, w->sizes[1]);
    return oc_dst_tensor();
}
