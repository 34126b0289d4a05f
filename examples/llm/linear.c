/* y = x W^T for the decoder's linear layers: x [m, k] float32, W [n, k]
 * in float32, bfloat16, or GGML's Q8_0 / Q4_0 blocks (uint8 [n, k / 32 *
 * 34] and [n, k / 32 * 18]: the bytes of a GGUF tensor, as they are).
 *
 * The tile layer's oc_tile_linear does the work: every core calls it with
 * its index and takes its share of W's rows (n), so each weight byte is
 * read once, by one core, whatever m is. Decoding (m <= 32) runs its
 * skinny kernels at memory speed; Q8_0 / Q4_0 quantise x to int8 blocks
 * of 32 as llama.cpp does; oc_tile_linear_path says which kernel runs. */
#include <stdlib.h>

#include <opcore/kernel.h>
#include <opcore/tile.h>

static oc_tensor *linear_as(const oc_tensor *x, const oc_tensor *w, oc_wtype type)
{
    oc_tensor *out = oc_dst_tensor();
    if (oc_numel(out) == 0) return out;
    oc_weights wt = oc_weights_of_tensor(w, type, NULL);
    if (!wt.data) return out; /* the kernel has failed, naming the mismatch */
    oc_tile X = oc_tile_of_tensor(x, 0), Y = oc_tile_of_tensor(out, 0), C = X;
    /* x's rows must be rows of floats: a transposed or expanded x is
     * copied (each core its own copy) */
    if (X.cols > 1 && (X.cs != 1 || (X.rows > 1 && X.rs < X.cols))) {
        C.rs = C.cols, C.cs = 1;
        C.data = malloc((size_t)(C.rows * C.cols) * sizeof(float));
        OC_CHECK(C.data, "linear: no memory for a copy of x (%lld x %lld)", (long long)C.rows,
                 (long long)C.cols);
        oc_tile_copy(&C, &X);
    }
    oc_tile_linear(&Y, &C, &wt, (int)oc_cpu_id(), (int)oc_cpu_count());
    if (C.data != X.data) free(C.data);
    return out;
}

oc_tensor *linear(const oc_tensor *x, const oc_tensor *w)
{
    return linear_as(x, w, w->dtype == OC_BFLOAT16 ? OC_W_BF16 : OC_W_F32);
}

oc_tensor *linear_q8_0(const oc_tensor *x, const oc_tensor *w)
{
    return linear_as(x, w, OC_W_Q8_0);
}

oc_tensor *linear_q4_0(const oc_tensor *x, const oc_tensor *w)
{
    return linear_as(x, w, OC_W_Q4_0);
}
