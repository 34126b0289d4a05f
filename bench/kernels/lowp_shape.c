/* Shape functions of bench/kernels/lowp_linear.c: x [m, k] float32 or
 * bfloat16, w [n, row] (row: k elements, k / 2 bytes of uint4 pairs or
 * k / 32 GGML blocks of bytes), y [m, n] of x's dtype. The kernels check w
 * against its type. */
#include <opcore/dim.h>
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

static oc_tensor *lowp_pack_i8_shape(const oc_tensor *w, const oc_tensor *scale)
{
    OC_CHECK(w->dtype == OC_INT8 && w->ndim == 2, "w must be a 2-D int8 tensor, got %d-D %s",
             w->ndim, oc_dtype_name(w->dtype));
    OC_CHECK(scale->dtype == OC_FLOAT32 && oc_numel(scale) == w->sizes[0],
             "scale must be float32 with one value per row of w (%lld), got %s with %lld",
             (long long)w->sizes[0], oc_dtype_name(scale->dtype), (long long)oc_numel(scale));
    size_t nb = oc_weights_pack_bytes(OC_W_I8, w->sizes[0], w->sizes[1]);
    OC_CHECK(nb > 0, "w's k = %lld is too long for exact int32 sums", (long long)w->sizes[1]);
    return oc_empty(OC_UINT8, 1, (int64_t[]){(int64_t)nb});
}

static oc_tensor *lowp_pack_q_shape(const oc_tensor *w, int64_t wtype)
{
    OC_CHECK(wtype == OC_W_Q8_0 || wtype == OC_W_Q4_0, "wtype must be %d (Q8_0) or %d (Q4_0), "
             "got %lld", OC_W_Q8_0, OC_W_Q4_0, (long long)wtype);
    int64_t bb = (int64_t)oc_wtype_row_bytes((oc_wtype)wtype, OC_QK);
    OC_CHECK(w->dtype == OC_UINT8 && w->ndim == 2 && oc_is_contiguous(w),
             "w must be contiguous 2-D uint8 (GGML blocks), got %d-D %s", w->ndim,
             oc_dtype_name(w->dtype));
    bool whole = w->sizes[1] % bb == 0;
    OC_CHECK(whole, "w's rows (%lld bytes) must be whole %lld-byte blocks",
             (long long)w->sizes[1], (long long)bb);
    /* a 128-byte header, then groups of 8 rows (opcore/tile.h: oc_weights_pack) */
    int64_t bytes = oc_dim_add(128, oc_dim_mul(oc_dim_mul(oc_dim_ceil_div(w->sizes[0], 8), 8),
                                               w->sizes[1]));
    OC_CHECK(bytes == (int64_t)oc_weights_pack_bytes((oc_wtype)wtype, w->sizes[0],
                                                      w->sizes[1] / bb * OC_QK),
             "packed size %lld: not oc_weights_pack_bytes'", (long long)bytes);
    return oc_empty(OC_UINT8, 1, (int64_t[]){bytes});
}

static oc_tensor *lowp_linear_packed_shape(const oc_tensor *x, const oc_tensor *wp, int64_t n)
{
    OC_CHECK((x->dtype == OC_FLOAT32 || x->dtype == OC_BFLOAT16) && x->ndim == 2,
             "x must be a 2-D float32 or bfloat16 tensor, got %d-D %s", x->ndim,
             oc_dtype_name(x->dtype));
    OC_CHECK(wp->dtype == OC_UINT8 && wp->ndim == 1,
             "wp must be the 1-D uint8 tensor lowp_pack_i8 / lowp_pack_q made, got %d-D %s",
             wp->ndim,
             oc_dtype_name(wp->dtype));
    OC_CHECK(n >= 0, "n must be >= 0, got %lld", (long long)n);
    return oc_empty(x->dtype, 2, (int64_t[]){x->sizes[0], n});
}

static oc_tensor *lowp_linear_packed_x7_shape(const oc_tensor *x, const oc_tensor *wp, int64_t n)
{
    OC_CHECK(x->dtype == OC_FLOAT32, "x must be float32 (quantised to 7 bits here), got %s",
             oc_dtype_name(x->dtype));
    return lowp_linear_packed_shape(x, wp, n);
}

static oc_tensor *lowp_matmul_i8_shape(const oc_tensor *a, const oc_tensor *b)
{
    OC_CHECK(a->dtype == OC_INT8 && b->dtype == OC_INT8 && a->ndim == 2 && b->ndim == 2 &&
                 a->sizes[1] == b->sizes[1],
             "a (m x k) and b (n x k) must be 2-D int8 with the same k");
    return oc_empty(OC_INT32, 2, (int64_t[]){a->sizes[0], b->sizes[0]});
}

static void lowp_copy_shape(const oc_tensor *src, oc_tensor *dst)
{
    OC_CHECK(oc_nbytes(src) == oc_nbytes(dst),
             "src and dst must hold the same number of bytes, got %lld and %lld",
             (long long)oc_nbytes(src), (long long)oc_nbytes(dst));
    OC_CHECK(oc_is_contiguous(src) && oc_is_contiguous(dst),
             "src and dst must be contiguous, got src %s, dst %s",
             oc_is_contiguous(src) ? "contiguous" : "strided",
             oc_is_contiguous(dst) ? "contiguous" : "strided");
}

static oc_tensor *lowp_widen_shape(const oc_tensor *w)
{
    OC_CHECK((w->dtype == OC_FLOAT16 || w->dtype == OC_BFLOAT16 || w->dtype == OC_FLOAT32) &&
                 w->ndim == 2,
             "w must be a 2-D float16, bfloat16 or float32 tensor, got %d-D %s", w->ndim,
             oc_dtype_name(w->dtype));
    return oc_empty(OC_FLOAT32, 1, (int64_t[]){w->sizes[0]});
}

static oc_tensor *lowp_widen_u4_shape(const oc_tensor *w, const oc_tensor *scale,
                                      const oc_tensor *zero, int64_t group)
{
    (void)scale, (void)zero, (void)group;
    OC_CHECK(w->dtype == OC_UINT8 && w->ndim == 2,
             "w must be 2-D uint8 (two uint4 a byte), got %d-D %s", w->ndim,
             oc_dtype_name(w->dtype));
    return oc_empty(OC_FLOAT32, 1, (int64_t[]){w->sizes[0]});
}

static void lowp_i8_mix_shape(int64_t m, int64_t k, int64_t n, oc_tensor *sink)
{
    OC_CHECK(m >= 0 && k >= 0 && n >= 0, "m, k and n must be >= 0, got %lld, %lld, %lld",
             (long long)m, (long long)k, (long long)n);
    OC_CHECK(sink->dtype == OC_INT32 && oc_is_contiguous(sink),
             "sink must be a contiguous int32 tensor (an element per core), got %s %s",
             oc_is_contiguous(sink) ? "contiguous" : "strided", oc_dtype_name(sink->dtype));
}

OC_LIBRARY(lowp, m)
{
    oc_def(m, "lowp_widen_u4(Tensor w, Tensor scale, Tensor zero, int group) -> Tensor",
           lowp_widen_u4_shape, "lowp_widen_u4", .multicore = true);
    oc_def(m, "lowp_i8_mix(int m, int k, int n, Tensor(a!) sink) -> ()", lowp_i8_mix_shape,
           "lowp_i8_mix", .multicore = true);
    oc_def(m, "lowp_widen(Tensor w) -> Tensor", lowp_widen_shape, "lowp_widen",
           .multicore = true);
    oc_def(m, "lowp_copy(Tensor src, Tensor(a!) dst) -> ()", lowp_copy_shape, "lowp_copy",
           .multicore = true);
    oc_def(m, "lowp_pack_i8(Tensor w, Tensor scale) -> Tensor", lowp_pack_i8_shape,
           "lowp_pack_i8", .multicore = true);
    oc_def(m, "lowp_pack_q(Tensor w, int wtype) -> Tensor", lowp_pack_q_shape, "lowp_pack_q",
           .multicore = true);
    oc_def(m, "lowp_linear_packed(Tensor x, Tensor wp, int n) -> Tensor",
           lowp_linear_packed_shape, "lowp_linear_packed", .multicore = true);
    oc_def(m, "lowp_linear_packed_x7(Tensor x, Tensor wp, int n) -> Tensor",
           lowp_linear_packed_x7_shape, "lowp_linear_packed_x7", .multicore = true);
    oc_def(m, "lowp_matmul_i8(Tensor a, Tensor b) -> Tensor", lowp_matmul_i8_shape,
           "lowp_matmul_i8", .multicore = true);
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
