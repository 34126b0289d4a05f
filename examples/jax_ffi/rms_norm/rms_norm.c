/* RMS normalisation over the last axis: JAX's FFI tutorial op
 * (examples/ffi/src/jax_ffi_example/rms_norm.cc upstream) as opcore kernels,
 * for every float dtype (float32, float64, float16, bfloat16).
 *
 *   y = x / sqrt(mean(x^2) + eps)          per row of the last axis
 *   rms_norm_fwd also returns res = 1 / sqrt(mean(x^2) + eps) per row;
 *   rms_norm_bwd(res, x, ct) = res * ct - (sum(x * ct) * res^3 / n) * x
 *
 * float32 and float64 are computed in their own type; float16 and bfloat16
 * in float32, converted a block at a time (a stack buffer: any row length).
 * The sums use several accumulators so the compiler vectorises them
 * without -ffast-math (one running sum is a serial dependency chain). */
#include <math.h>

#include <opcore/kernel.h>
#include <opcore/vec.h>

#define LANES 16  /* independent partial sums */
#define BLOCK 512 /* float16/bfloat16: elements converted at a time */

/* sum(a[i] * b[i]) over n elements, of type T. */
#define DEFINE_DOT(name, T)                                           \
    static T name(const T *a, const T *b, int64_t n)                  \
    {                                                                 \
        T acc[LANES] = {0};                                           \
        int64_t i = 0;                                                \
        for (; i + LANES <= n; i += LANES)                            \
            for (int l = 0; l < LANES; l++) acc[l] += a[i + l] * b[i + l]; \
        T s = 0;                                                      \
        for (; i < n; i++) s += a[i] * b[i];                          \
        for (int l = 0; l < LANES; l++) s += acc[l];                  \
        return s;                                                     \
    }
DEFINE_DOT(dot_f32, float)
DEFINE_DOT(dot_f64, double)

/* y = x * s, in type T. */
#define DEFINE_SCALE(name, T)                                         \
    static void name(T *y, const T *x, T s, int64_t n)                \
    {                                                                 \
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;              \
    }
DEFINE_SCALE(scale_f32, float)
DEFINE_SCALE(scale_f64, double)

/* ct_x = res * ct - f * x, in type T. */
#define DEFINE_BWD(name, T)                                                   \
    static void name(T *ctx, const T *ct, const T *x, T res, T f, int64_t n)  \
    {                                                                         \
        for (int64_t i = 0; i < n; i++) ctx[i] = res * ct[i] - f * x[i];      \
    }
DEFINE_BWD(bwd_f32, float)
DEFINE_BWD(bwd_f64, double)

/* Element `i` of a row of dtype dt, as a byte address. */
static const char *at(const void *row, oc_dtype dt, int64_t i) { return (const char *)row + i * (int64_t)oc_dtype_size(dt); }

/* sum(a*b) over a row of a 16-bit float dtype, in float32. */
static float dot_half(const void *a, const void *b, oc_dtype dt, int64_t n)
{
    float fa[BLOCK], fb[BLOCK], s = 0.0f;
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t c = n - i < BLOCK ? n - i : BLOCK;
        oc_load_f32_n(fa, at(a, dt, i), dt, c);
        oc_load_f32_n(fb, at(b, dt, i), dt, c);
        s += dot_f32(fa, fb, c);
    }
    return s;
}

/* One row: y = x * scale, scale = 1/sqrt(mean(x^2) + eps); returns scale. */
static double norm_row(void *y, const void *x, oc_dtype dt, int64_t n, double eps)
{
    if (dt == OC_FLOAT64) {
        double s = 1.0 / sqrt(dot_f64(x, x, n) / (double)n + eps);
        scale_f64(y, x, s, n);
        return s;
    }
    if (dt == OC_FLOAT32) {
        float s = 1.0f / sqrtf(dot_f32(x, x, n) / (float)n + (float)eps);
        scale_f32(y, x, s, n);
        return s;
    }
    float s = 1.0f / sqrtf(dot_half(x, x, dt, n) / (float)n + (float)eps), buf[BLOCK];
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t c = n - i < BLOCK ? n - i : BLOCK;
        oc_load_f32_n(buf, at(x, dt, i), dt, c);
        scale_f32(buf, buf, s, c);
        oc_store_f32_n((char *)y + (at(x, dt, i) - (const char *)x), dt, buf, c);
    }
    return s;
}

/* One row of the backward: ct_x from res (this row's scale), x and ct. */
static void bwd_row(void *ctx, const void *ct, const void *x, double res, oc_dtype dt, int64_t n)
{
    if (dt == OC_FLOAT64) {
        double f = dot_f64(x, ct, n) * res * res * res / (double)n;
        bwd_f64(ctx, ct, x, res, f, n);
        return;
    }
    if (dt == OC_FLOAT32) {
        float r = (float)res, f = dot_f32(x, ct, n) * r * r * r / (float)n;
        bwd_f32(ctx, ct, x, r, f, n);
        return;
    }
    float r = (float)res, f = dot_half(x, ct, dt, n) * r * r * r / (float)n, bc[BLOCK], bx[BLOCK];
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t c = n - i < BLOCK ? n - i : BLOCK;
        oc_load_f32_n(bc, at(ct, dt, i), dt, c);
        oc_load_f32_n(bx, at(x, dt, i), dt, c);
        bwd_f32(bc, bc, bx, r, f, c);
        oc_store_f32_n((char *)ctx + (at(x, dt, i) - (const char *)x), dt, bc, c);
    }
}

/* A row's scale stored in, or read from, res (dtype dt). */
static void put(void *res, int64_t r, oc_dtype dt, double v)
{
    float f = (float)v;
    if (dt == OC_FLOAT64) ((double *)res)[r] = v;
    else oc_store_f32_n((char *)res + r * (int64_t)oc_dtype_size(dt), dt, &f, 1);
}

static double get(const void *res, int64_t r, oc_dtype dt)
{
    float f;
    if (dt == OC_FLOAT64) return ((const double *)res)[r];
    oc_load_f32_n(&f, at(res, dt, r), dt, 1);
    return f;
}

/* Elements per row of x. The shape functions checked x (a float array of
 * rank >= 1), and opcore hands kernels dense, row-major tensors (kernel.h),
 * as XLA's buffers are: no checks or copies here, as in upstream's handler. */
static int64_t row_length(const oc_tensor *x) { return x->sizes[x->ndim - 1]; }

static void forward(const oc_tensor *x, double eps, oc_tensor *y, oc_tensor *res)
{
    int64_t n = row_length(x);
    const char *xs = x->data;
    char *ys = y->data;
    size_t row = (size_t)n * oc_dtype_size(x->dtype);
    for (int64_t r = 0, rows = n ? oc_numel(x) / n : 0; r < rows; r++) {
        double s = norm_row(ys + r * row, xs + r * row, x->dtype, n, eps);
        if (res) put(res->data, r, res->dtype, s);
    }
}

oc_tensor *rms_norm(const oc_tensor *x, double eps)
{
    oc_tensor *y = oc_dst_tensor();
    forward(x, eps, y, NULL);
    return y;
}

void rms_norm_fwd(const oc_tensor *x, double eps)
{
    forward(x, eps, oc_dst_tensor_at(0), oc_dst_tensor_at(1));
}

oc_tensor *rms_norm_bwd(const oc_tensor *res, const oc_tensor *x, const oc_tensor *ct)
{
    int64_t n = row_length(x);
    oc_tensor *out = oc_dst_tensor();
    const char *xs = x->data, *cs = ct->data, *rs = res->data;
    size_t row = (size_t)n * oc_dtype_size(x->dtype);
    for (int64_t r = 0, rows = n ? oc_numel(x) / n : 0; r < rows; r++)
        bwd_row((char *)out->data + r * row, cs + r * row, xs + r * row, get(rs, r, res->dtype), x->dtype, n);
    return out;
}
