/* Shape functions of bench/kernels/lowp_linear.c: x [m, k] float32 or
 * bfloat16, w [n, row] (row: k elements, k / 2 bytes of uint4 pairs or
 * k / 32 GGML blocks of bytes), y [m, n] of x's dtype. The kernels check w
 * against its type. */
#include <opcore/library.h>
#include <opcore/tile.h>

static oc_tensor *lowp_linear_shape(const oc_tensor *x, const oc_tensor *w, const oc_tensor *scale,
                                    int64_t wtype)
{
    (void)scale, (void)wtype;
    OC_CHECK((x->dtype == OC_FLOAT32 || x->dtype == OC_BFLOAT16) && x->ndim == 2,
             "x must be a 2-D float32 or bfloat16 tensor, got %d-D %s", x->ndim,
             oc_dtype_name(x->dtype));
    OC_CHECK(w->ndim == 2, "w must be 2-D (one row per output), got %d-D", w->ndim);
    return oc_empty(x->dtype, 2, (int64_t[]){x->sizes[0], w->sizes[0]});
}

static oc_tensor *lowp_linear_g_shape(const oc_tensor *x, const oc_tensor *w,
                                      const oc_tensor *scale, const oc_tensor *zero,
                                      int64_t wtype, int64_t group)
{
    (void)zero, (void)group;
    return lowp_linear_shape(x, w, scale, wtype);
}

static oc_tensor *lowp_quantize_shape(const oc_tensor *x, int64_t wtype)
{
    OC_CHECK(x->dtype == OC_FLOAT32 && x->ndim == 2, "x must be a 2-D float32 tensor, got %d-D %s",
             x->ndim, oc_dtype_name(x->dtype));
    OC_CHECK(wtype == OC_W_Q8_0 || wtype == OC_W_Q4_0,
             "wtype must be OC_W_Q8_0 (3) or OC_W_Q4_0 (4), got %lld", (long long)wtype);
    size_t rb = oc_wtype_row_bytes((oc_wtype)wtype, x->sizes[1]);
    OC_CHECK(rb > 0, "x's %lld columns are not whole blocks of 32", (long long)x->sizes[1]);
    return oc_empty(OC_UINT8, 2, (int64_t[]){x->sizes[0], (int64_t)rb});
}

static void lowp_quantize_u4_shape(const oc_tensor *x, int64_t group)
{
    OC_CHECK(x->dtype == OC_FLOAT32 && x->ndim == 2, "x must be a 2-D float32 tensor, got %d-D %s",
             x->ndim, oc_dtype_name(x->dtype));
    OC_CHECK(group == 32 || group == 64 || group == 128, "group must be 32, 64 or 128, got %lld",
             (long long)group);
    int64_t n = x->sizes[0], k = x->sizes[1];
    OC_CHECK(k % group == 0, "x's %lld columns are not whole groups of %lld", (long long)k,
             (long long)group);
    oc_set_result(0, oc_empty(OC_UINT8, 2, (int64_t[]){n, k / 2}));
    oc_set_result(1, oc_empty(OC_FLOAT32, 2, (int64_t[]){n, k / group}));
    oc_set_result(2, oc_empty(OC_FLOAT32, 2, (int64_t[]){n, k / group}));
}

OC_LIBRARY(lowp, m)
{
    oc_def(m, "lowp_linear(Tensor x, Tensor w, Tensor scale, int wtype) -> Tensor",
           lowp_linear_shape, "lowp_linear", .multicore = true);
    oc_def(m,
           "lowp_linear_g(Tensor x, Tensor w, Tensor scale, Tensor zero, int wtype, int group) "
           "-> Tensor",
           lowp_linear_g_shape, "lowp_linear_g", .multicore = true);
    oc_def(m, "lowp_quantize(Tensor x, int wtype) -> Tensor", lowp_quantize_shape, "lowp_quantize");
    oc_def(m, "lowp_quantize_u4(Tensor x, int group) -> (Tensor, Tensor, Tensor)",
           lowp_quantize_u4_shape, "lowp_quantize_u4");
}
