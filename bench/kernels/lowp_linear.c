/* lowp_linear: y = x w^T for weights of any oc_wtype (float32, bfloat16, float16, Q8_0,
 * Q4_0 as GGUF bytes, int8 with one scale per output), split along w's
 * rows across the op's cores: the kernel of bench/lowp_bench.py and
 * tests/python/test_lowp.py (docs/tutorial_5_quantised.md walks through
 * it). lowp_quantize: the rows of float32 x as GGML Q8_0 / Q4_0 blocks. */
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

oc_tensor *lowp_quantize(const oc_tensor *x, int64_t wtype)
{
    oc_tensor *y = oc_dst_tensor();
    oc_tile tx = oc_tile_of_tensor(x, 0);
    oc_tile_quantize_blocks(y->data, (oc_wtype)wtype, &tx);
    return y;
}
