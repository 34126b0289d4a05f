/* y = x W^T for the decoder's linear layers: x [m, k] float32, W [n, k]
 * in float32, bfloat16, or GGML's Q8_0 / Q4_0 blocks (uint8 [n, k / 32 *
 * 34] and [n, k / 32 * 18]: the bytes of a GGUF tensor, as they are).
 *
 * The tile layer's oc_tile_linear does the work: every core calls it with
 * its index and takes its share of W's rows (n), so each weight byte is
 * read once, by one core, whatever m is. Decoding (m <= 32) runs its
 * skinny kernels at memory speed; Q8_0 / Q4_0 quantise x to int8 blocks
 * of 32 as llama.cpp does; oc_tile_linear_path says which kernel runs.
 * The model packs its Q8_0 / Q4_0 weights once (pack_q8_0 / pack_q4_0)
 * and calls linear_packed: the same bits, 8 rows of W to a register. */
#include <stdlib.h>

#include <opcore/kernel.h>
#include <opcore/tile.h>

/* y = x W^T on every core, each taking its share of W's rows. */
static oc_tensor *run_linear(const oc_tensor *x, const oc_weights *wt)
{
    oc_tensor *out = oc_dst_tensor();
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
    oc_tile_linear(&Y, &C, wt, (int)oc_cpu_id(), (int)oc_cpu_count());
    if (C.data != X.data) free(C.data);
    return out;
}

static oc_tensor *linear_as(const oc_tensor *x, const oc_tensor *w, oc_wtype type)
{
    if (oc_numel(oc_dst_tensor()) == 0) return oc_dst_tensor();
    oc_weights wt = oc_weights_of_tensor(w, type, NULL);
    if (!wt.data) return oc_dst_tensor(); /* the kernel has failed, naming the mismatch */
    return run_linear(x, &wt);
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

/* Q8_0 / Q4_0 bytes packed once, at load, 8 rows a group (oc_weights_pack:
 * the layout llama.cpp's repacking uses), each core packing its share. */
static oc_tensor *pack_as(const oc_tensor *w, oc_wtype type)
{
    oc_tensor *out = oc_dst_tensor();
    oc_weights wt = oc_weights_of_tensor(w, type, NULL);
    if (wt.data)
        oc_weights_pack(out->data, (size_t)oc_numel(out), &wt, (int)oc_cpu_id(),
                        (int)oc_cpu_count());
    return out;
}

oc_tensor *pack_q8_0(const oc_tensor *w) { return pack_as(w, OC_W_Q8_0); }

oc_tensor *pack_q4_0(const oc_tensor *w) { return pack_as(w, OC_W_Q4_0); }

/* y = x W^T with W the bytes pack_q8_0 / pack_q4_0 made (n rows): the
 * same bits as linear_q8_0 / linear_q4_0 on the unpacked W. */
oc_tensor *linear_packed(const oc_tensor *x, const oc_tensor *w, int64_t n)
{
    if (oc_numel(oc_dst_tensor()) == 0) return oc_dst_tensor();
    oc_weights wt = oc_weights_of_packed(w->data, (size_t)oc_numel(w));
    if (!wt.data) return oc_dst_tensor(); /* the kernel has failed, naming the bytes' fault */
    OC_CHECK(wt.n == n && wt.k == x->sizes[1],
             "w holds %s weights %lld x %lld, but n is %lld and x has %lld columns",
             oc_wtype_name(wt.type), (long long)wt.n, (long long)wt.k, (long long)n,
             (long long)x->sizes[1]);
    return run_linear(x, &wt);
}
