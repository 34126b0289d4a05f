/* lowp_linear: y = x w^T for weights of any oc_wtype (float32, bfloat16, float16, Q8_0,
 * Q4_0 as GGUF bytes, int8 with one scale per output), split along w's
 * rows across the op's cores; x float32 or bfloat16, y the same dtype.
 * lowp_linear_g: the same for group-wise weights (int8 with a scale per
 * group, uint4 two a byte with a scale and zero point per group).
 * The kernels of bench/lowp_bench.py and tests/python/test_lowp*.py
 * (docs/tutorial_5_quantised.md walks through them). lowp_quantize: the
 * rows of float32 x as GGML Q8_0 / Q4_0 blocks; lowp_quantize_u4: as
 * packed uint4 with per-group scales and zero points (GPTQ's quantiser). */
#include <opcore/kernel.h>
#include <opcore/tile.h>

oc_tensor *lowp_linear(const oc_tensor *x, const oc_tensor *w, const oc_tensor *scale, int64_t wtype)
{
    oc_tensor *y = oc_dst_tensor();
    oc_weights wt = oc_weights_of_tensor(w, (oc_wtype)wtype, wtype == OC_W_I8 ? scale : NULL);
    if (!wt.data) return y; /* the kernel failed with oc_weights_of_tensor's message */
    oc_tile tx = oc_tile_of_tensor(x, 0), ty = oc_tile_of_tensor(y, 0);
    oc_tile_linear(&ty, &tx, &wt, (int)oc_cpu_id(), (int)oc_cpu_count());
    return y;
}

oc_tensor *lowp_linear_g(const oc_tensor *x, const oc_tensor *w, const oc_tensor *scale,
                         const oc_tensor *zero, int64_t wtype, int64_t group)
{
    oc_tensor *y = oc_dst_tensor();
    oc_weights wt =
        oc_weights_grouped(w, (oc_wtype)wtype, group, scale, wtype == OC_W_U4G ? zero : NULL);
    if (!wt.data) return y;
    oc_tile tx = oc_tile_of_tensor(x, 0), ty = oc_tile_of_tensor(y, 0);
    oc_tile_linear(&ty, &tx, &wt, (int)oc_cpu_id(), (int)oc_cpu_count());
    return y;
}

oc_tensor *lowp_quantize(const oc_tensor *x, int64_t wtype)
{
    oc_tensor *y = oc_dst_tensor();
    oc_tile tx = oc_tile_of_tensor(x, 0);
    oc_tile_quantize_blocks(y->data, (oc_wtype)wtype, &tx);
    return y;
}

void lowp_quantize_u4(const oc_tensor *x, int64_t group)
{
    oc_tile tx = oc_tile_of_tensor(x, 0), ts = oc_tile_of_tensor(oc_dst_tensor_at(1), 0),
            tz = oc_tile_of_tensor(oc_dst_tensor_at(2), 0);
    oc_tile_quantize_u4(oc_dst_tensor_at(0)->data, &ts, &tz, &tx, group);
}
