/* Shape functions and registration of the `llm` example library: the ops
 * of a Llama-architecture decoder. Every op is multicore. */
#include <opcore/dim.h>
#include <opcore/library.h>

#include <opcore/tile.h>

/* A float32 matrix in any layout (strided: transposed, expanded, sliced). */
static void f32_any(const oc_tensor *t, const char *name)
{
    OC_CHECK(t->dtype == OC_FLOAT32, "%s must be float32, got %s", name, oc_dtype_name(t->dtype));
    OC_CHECK(t->ndim == 2, "%s must be 2-D, got %d-D", name, t->ndim);
}

static void f32_matrix(const oc_tensor *t, const char *name)
{
    f32_any(t, name);
    OC_CHECK(oc_is_contiguous(t), "%s must be contiguous", name);
}

static oc_tensor *linear_out(const oc_tensor *x, const oc_tensor *w, int64_t k_per_row)
{
    f32_any(x, "x");
    OC_CHECK(w->ndim == 2 && oc_is_contiguous(w), "w must be a contiguous 2-D tensor, got %d-D",
             w->ndim);
    OC_CHECK(w->sizes[1] == k_per_row,
             "w's rows must be %lld elements for x's %lld columns, got %lld",
             (long long)k_per_row, (long long)x->sizes[1], (long long)w->sizes[1]);
    return oc_empty(OC_FLOAT32, 2, (int64_t[]){x->sizes[0], w->sizes[0]});
}

static oc_tensor *linear_shape(const oc_tensor *x, const oc_tensor *w)
{
    OC_CHECK(w->dtype == OC_FLOAT32 || w->dtype == OC_BFLOAT16,
             "w must be float32 or bfloat16, got %s", oc_dtype_name(w->dtype));
    return linear_out(x, w, x->sizes[x->ndim - 1]);
}

static oc_tensor *block_linear(const oc_tensor *x, const oc_tensor *w, oc_wtype type)
{
    const char *fmt = type == OC_W_Q8_0 ? "Q8_0" : "Q4_0";
    f32_any(x, "x");
    OC_CHECK(w->dtype == OC_UINT8, "w must be uint8 (%s blocks), got %s", fmt,
             oc_dtype_name(w->dtype));
    bool whole = x->sizes[1] % OC_QK == 0; /* (OC_CHECK prints its condition: no % in it) */
    OC_CHECK(whole, "x's columns (%lld) must be a multiple of %s's block of %d",
             (long long)x->sizes[1], fmt, OC_QK);
    return linear_out(x, w, (int64_t)oc_wtype_row_bytes(type, x->sizes[1]));
}

static oc_tensor *linear_q8_0_shape(const oc_tensor *x, const oc_tensor *w)
{
    return block_linear(x, w, OC_W_Q8_0);
}

static oc_tensor *linear_q4_0_shape(const oc_tensor *x, const oc_tensor *w)
{
    return block_linear(x, w, OC_W_Q4_0);
}

static oc_tensor *pack_shape(const oc_tensor *w, oc_wtype type)
{
    const char *fmt = type == OC_W_Q8_0 ? "Q8_0" : "Q4_0";
    int64_t bb = (int64_t)oc_wtype_row_bytes(type, OC_QK);
    OC_CHECK(w->dtype == OC_UINT8 && w->ndim == 2 && oc_is_contiguous(w),
             "w must be contiguous 2-D uint8 (%s blocks), got %d-D %s", fmt, w->ndim,
             oc_dtype_name(w->dtype));
    bool whole = w->sizes[1] % bb == 0;
    OC_CHECK(whole, "w's rows (%lld bytes) must be whole %s blocks of %lld bytes",
             (long long)w->sizes[1], fmt, (long long)bb);
    size_t nb = oc_weights_pack_bytes(type, w->sizes[0], w->sizes[1] / bb * OC_QK);
    OC_CHECK(nb > 0, "w (%lld x %lld bytes) is too large to pack", (long long)w->sizes[0],
             (long long)w->sizes[1]);
    /* the same count in sizes a dynamic-shape tracer follows: a 128-byte
     * header, then groups of 8 rows, each 8 rows' bytes */
    int64_t rows8 = oc_dim_mul(oc_dim_ceil_div(w->sizes[0], 8), 8);
    int64_t bytes = oc_dim_add(128, oc_dim_mul(rows8, w->sizes[1]));
    OC_CHECK(bytes == (int64_t)nb, "packed %s: %lld bytes, oc_weights_pack_bytes says %zu", fmt,
             (long long)bytes, nb);
    return oc_empty(OC_UINT8, 1, (int64_t[]){bytes});
}

static oc_tensor *pack_q8_0_shape(const oc_tensor *w) { return pack_shape(w, OC_W_Q8_0); }

static oc_tensor *pack_q4_0_shape(const oc_tensor *w) { return pack_shape(w, OC_W_Q4_0); }

static oc_tensor *linear_packed_shape(const oc_tensor *x, const oc_tensor *w, int64_t n)
{
    f32_any(x, "x");
    OC_CHECK(w->dtype == OC_UINT8 && w->ndim == 1,
             "w must be the 1-D uint8 bytes pack_q8_0 / pack_q4_0 made, got %d-D %s", w->ndim,
             oc_dtype_name(w->dtype));
    OC_CHECK(n >= 0, "n must be >= 0, got %lld", (long long)n);
    return oc_empty(OC_FLOAT32, 2, (int64_t[]){x->sizes[0], n});
}

static oc_tensor *attention_shape(const oc_tensor *qkv, oc_tensor *k_cache, oc_tensor *v_cache,
                                  const oc_tensor *cos, const oc_tensor *sin, int64_t pos,
                                  int64_t n_heads)
{
    f32_matrix(qkv, "qkv");
    bool caches = k_cache->ndim == 3 && oc_same_shape(k_cache, v_cache) &&
                  k_cache->dtype == OC_FLOAT32 && v_cache->dtype == OC_FLOAT32 &&
                  oc_is_contiguous(k_cache) && oc_is_contiguous(v_cache);
    OC_CHECK(caches, "k_cache and v_cache must be contiguous float32 "
                     "[kv_heads, max_seq, head_dim] of one shape");
    int64_t g = k_cache->sizes[0], ms = k_cache->sizes[1], d = k_cache->sizes[2];
    bool grouped = n_heads > 0 && g > 0 && n_heads % g == 0, even = d % 2 == 0;
    OC_CHECK(grouped, "n_heads (%lld) must be a multiple of the cache's "
             "kv_heads (%lld)", (long long)n_heads, (long long)g);
    OC_CHECK(even, "head_dim (%lld) must be even", (long long)d);
    OC_CHECK(qkv->sizes[1] == (n_heads + 2 * g) * d,
             "qkv must have (n_heads + 2 kv_heads) * head_dim = %lld columns, got %lld",
             (long long)((n_heads + 2 * g) * d), (long long)qkv->sizes[1]);
    OC_CHECK(pos >= 0 && pos + qkv->sizes[0] <= ms,
             "positions [%lld, %lld) must fit the cache's %lld",
             (long long)pos, (long long)(pos + qkv->sizes[0]), (long long)ms);
    f32_matrix(cos, "cos"), f32_matrix(sin, "sin");
    OC_CHECK(cos->sizes[0] >= ms && cos->sizes[1] == d / 2 && oc_same_shape(cos, sin),
             "cos and sin must be [>= %lld, %lld], got [%lld, %lld]", (long long)ms,
             (long long)(d / 2), (long long)cos->sizes[0], (long long)cos->sizes[1]);
    return oc_empty(OC_FLOAT32, 2, (int64_t[]){qkv->sizes[0], n_heads * d});
}

static oc_tensor *swiglu_shape(const oc_tensor *gu)
{
    f32_any(gu, "gu");
    bool even = gu->sizes[1] % 2 == 0;
    OC_CHECK(even, "gu's columns (gate, then up) must be even, got %lld",
             (long long)gu->sizes[1]);
    return oc_empty(OC_FLOAT32, 2, (int64_t[]){gu->sizes[0], gu->sizes[1] / 2});
}

static oc_tensor *rmsnorm_shape(const oc_tensor *x, const oc_tensor *w, double eps)
{
    (void)eps;
    f32_matrix(x, "x");
    OC_CHECK(w->dtype == OC_FLOAT32 && w->ndim == 1 && w->sizes[0] == x->sizes[1],
             "w must be float32 [%lld], got %s %d-D", (long long)x->sizes[1],
             oc_dtype_name(w->dtype), w->ndim);
    return oc_empty_like(x);
}

OC_LIBRARY(llm, m)
{
    oc_def(m, "rmsnorm(Tensor x, Tensor w, float eps) -> Tensor", rmsnorm_shape, "rmsnorm",
           .multicore = true);
    oc_def(m, "linear(Tensor x, Tensor w) -> Tensor", linear_shape, "linear", .multicore = true);
    oc_def(m, "linear_q8_0(Tensor x, Tensor w) -> Tensor", linear_q8_0_shape, "linear_q8_0",
           .multicore = true);
    oc_def(m, "linear_q4_0(Tensor x, Tensor w) -> Tensor", linear_q4_0_shape, "linear_q4_0",
           .multicore = true);
    oc_def(m, "pack_q8_0(Tensor w) -> Tensor", pack_q8_0_shape, "pack_q8_0", .multicore = true);
    oc_def(m, "pack_q4_0(Tensor w) -> Tensor", pack_q4_0_shape, "pack_q4_0", .multicore = true);
    oc_def(m, "linear_packed(Tensor x, Tensor w, int n) -> Tensor", linear_packed_shape,
           "linear_packed", .multicore = true);
    oc_def(m, "attention(Tensor qkv, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor cos, "
              "Tensor sin, int pos, int n_heads) -> Tensor", attention_shape, "attention",
           .multicore = true);
    oc_def(m, "swiglu(Tensor gu) -> Tensor", swiglu_shape, "swiglu", .multicore = true);
}
