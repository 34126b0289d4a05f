/* Grouped-query attention over a KV cache, with the rotary embedding.
 *
 * qkv [t, (h + 2 g) * d]: the rows of t new tokens at positions pos ..
 * pos + t - 1, each holding h query heads, then g key heads, then g value
 * heads of d floats. The keys (rotated) and values go into the caches
 * k_cache, v_cache [g, max_seq, d] at those positions; each query head
 * (rotated, scaled by 1 / sqrt(d)) then attends causally to the cache's
 * first pos + t positions. Query head i reads key/value head i / (h / g).
 *
 * RoPE rotates each adjacent pair (x[2i], x[2i+1]) of a head by the angle
 * of its position and frequency i: cos and sin are [max_seq, d / 2]
 * (Meta's Llama and llama.cpp's LLAMA order).
 *
 * The cores split the key/value heads: each core writes its heads' cache
 * rows and then reads only those, so no core waits for another. A
 * decoding step (one new token) takes its scores as dot products of q
 * with the cache's key rows (oc_tile_dot_rows), where a prompt's block
 * multiplies by K^T (a copy of K transposed for the small-product
 * kernel: most of a one-row product's time). */
#include <math.h>
#include <string.h>

#include <opcore/kernel.h>
#include <opcore/tile.h>

#define BR 32 /* query rows per block */

static void rope(float *dst, const float *x, const float *c, const float *s, int64_t half,
                 float scale)
{
    for (int64_t i = 0; i < half; i++) {
        float x0 = x[2 * i], x1 = x[2 * i + 1];
        dst[2 * i] = (x0 * c[i] - x1 * s[i]) * scale;
        dst[2 * i + 1] = (x0 * s[i] + x1 * c[i]) * scale;
    }
}

oc_tensor *attention(const oc_tensor *qkv, oc_tensor *k_cache, oc_tensor *v_cache,
                     const oc_tensor *cos, const oc_tensor *sin, int64_t pos, int64_t n_heads)
{
    oc_tensor *out = oc_dst_tensor();
    int64_t t = qkv->sizes[0], g = k_cache->sizes[0], ms = k_cache->sizes[1];
    int64_t d = k_cache->sizes[2];
    int64_t h = n_heads, rep = h / g, width = qkv->sizes[1], half = d / 2, seen = pos + t, g0, g1;
    const float *src = qkv->data, *cs = cos->data, *sn = sin->data;
    float *kc = k_cache->data, *vc = v_cache->data;
    oc_core_range(g, 1, &g0, &g1);
    if (g1 <= g0 || t == 0) return out;
    for (int64_t j = g0; j < g1; j++) /* this core's cache rows */
        for (int64_t i = 0; i < t; i++) {
            const float *row = src + i * width;
            int64_t p = pos + i;
            rope(kc + (j * ms + p) * d, row + (h + j) * d, cs + p * half, sn + p * half, half,
                 1.0f);
            memcpy(vc + (j * ms + p) * d, row + (h + g + j) * d, (size_t)d * sizeof(float));
        }
    float scale = 1.0f / sqrtf((float)d);
    int64_t br = t < BR ? t : BR;
    oc_tile Q = oc_tile_alloc(br, d, OC_FLOAT32), S = oc_tile_alloc(br, seen, OC_FLOAT32);
    oc_tile M = oc_tile_alloc(br, 1, OC_FLOAT32), L = oc_tile_alloc(br, 1, OC_FLOAT32);
    oc_tile O = oc_tile_of_tensor(out, 0);
    for (int64_t j = g0; j < g1; j++) {
        oc_tile K = oc_tile_of_tensor(k_cache, j), V = oc_tile_of_tensor(v_cache, j);
        for (int64_t qh = j * rep; qh < (j + 1) * rep; qh++)
            for (int64_t t0 = 0; t0 < t; t0 += br) {
                int64_t rows = t - t0 < br ? t - t0 : br;
                int64_t kn = pos + t0 + rows; /* the keys the block sees */
                for (int64_t i = 0; i < rows; i++) {
                    int64_t p = pos + t0 + i;
                    rope((float *)Q.data + i * Q.rs, src + (t0 + i) * width + qh * d,
                         cs + p * half, sn + p * half, half, scale);
                }
                oc_tile qv = oc_tile_view(&Q, 0, 0, rows, d);
                oc_tile sv = oc_tile_view(&S, 0, 0, rows, kn);
                oc_tile kv = oc_tile_view(&K, 0, 0, kn, d), vv = oc_tile_view(&V, 0, 0, kn, d);
                oc_tile mv = oc_tile_view(&M, 0, 0, rows, 1), lv = oc_tile_view(&L, 0, 0, rows, 1);
                oc_tile ov = oc_tile_view(&O, t0, qh * d, rows, d);
                if (rows == 1) { /* decoding: q against each key row, no K^T */
                    oc_tile scol = {S.data, kn, 1, 1, 1, OC_FLOAT32, false};
                    oc_tile_dot_rows(&scol, &kv, &qv);
                } else {
                    oc_tile_matmul_to(&sv, &qv, &kv, OC_TILE_TRANS_B);
                }
                if (rows > 1) /* causal: key j for row i when j <= pos + t0 + i */
                    oc_tile_affine_select(&sv, &sv, pos + t0, 1, -1, -INFINITY);
                oc_tile_reduce_rows(&mv, &sv, OC_TILE_RMAX);
                oc_tile_unary(&mv, &mv, OC_TILE_IDENTITY, -1.0f, 0.0f);
                oc_tile_activation_reduce(&sv, &sv, OC_TILE_EXP, 1.0f, &mv, &lv, NULL, NULL,
                                          OC_TILE_SUM);
                oc_tile_matmul_to(&ov, &sv, &vv, 0);
                oc_tile_binary(&ov, &ov, &lv, OC_TILE_DIV);
            }
    }
    oc_tile_free(&L), oc_tile_free(&M), oc_tile_free(&S), oc_tile_free(&Q);
    return out;
}
