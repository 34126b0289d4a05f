/* JAX's FFI example rms_norm (jax-ml/jax examples/ffi rms_norm.cc) in C:
 * float32, float64, complex64 and complex128, the complex dtypes as C99
 * `float complex` / `double complex` (opcore/dtype.h: [re, im], the
 * frameworks' own layout, so the kernel reads their memory as it is).
 *
 * Each row of the last dim: scale = 1 / sqrt(mean(x * x) + eps), y = x * scale.
 * As upstream, x * x is the complex square (not |x|^2) and the square root
 * complex: the op is holomorphic, and rms_norm_bwd is its vjp in JAX's
 * convention (ct_x = ct_y * dy/dx, no conjugate). <tgmath.h> picks sqrtf,
 * sqrt, csqrtf or csqrt from the type, so one body serves the four dtypes.
 * Cores split the rows. */
#include <complex.h>
#include <tgmath.h>

#include <opcore/kernel.h>

/* x: at least 1 dim, contiguous, one of the four dtypes; rows x cols. */
static void check_x(const oc_tensor *x, const char *name, int64_t *rows, int64_t *cols)
{
    OC_CHECK(x->dtype == OC_FLOAT32 || x->dtype == OC_FLOAT64 || oc_dtype_is_complex(x->dtype),
             "%s must be float32, float64, complex64 or complex128, got %s", name, oc_dtype_name(x->dtype));
    OC_CHECK(x->ndim >= 1, "%s must be an array (at least 1 dim), got a scalar", name);
    OC_CHECK(oc_is_contiguous(x), "%s must be contiguous", name);
    *cols = x->sizes[x->ndim - 1];
    *rows = *cols ? oc_numel(x) / *cols : 0;
}

/* For each element type T (suffix S): a row's forward (returns its scale)
 * and backward, and the three kernels' typed loops over this core's rows.
 * `res` may be NULL (rms_norm keeps no scale). */
#define RMS_NORM_TYPED(T, S)                                                                    \
    static T row_fwd_##S(double eps, int64_t n, const T *x, T *y)                               \
    {                                                                                           \
        T sm = 0;                                                                               \
        for (int64_t i = 0; i < n; i++) sm += x[i] * x[i];                                      \
        T scale = (T)1 / sqrt(sm / (T)n + (T)(float)eps); /* eps is a float32 upstream */      \
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;                                    \
        return scale;                                                                           \
    }                                                                                           \
    static void fwd_##S(double eps, int64_t cols, int64_t lo, int64_t hi, const T *x, T *y, T *res) \
    {                                                                                           \
        for (int64_t r = lo; r < hi; r++) {                                                     \
            T scale = row_fwd_##S(eps, cols, x + r * cols, y + r * cols);                       \
            if (res) res[r] = scale;                                                            \
        }                                                                                       \
    }                                                                                           \
    static void bwd_##S(int64_t cols, int64_t lo, int64_t hi, const T *res, const T *x,         \
                        const T *ct_y, T *ct_x)                                                 \
    {                                                                                           \
        for (int64_t r = lo; r < hi; r++) {                                                     \
            const T *xr = x + r * cols, *gr = ct_y + r * cols;                                  \
            T s = res[r], ct_res = 0;                                                           \
            for (int64_t i = 0; i < cols; i++) ct_res += xr[i] * gr[i];                         \
            T factor = ct_res * s * s * s / (T)cols;                                            \
            for (int64_t i = 0; i < cols; i++) ct_x[r * cols + i] = s * gr[i] - factor * xr[i]; \
        }                                                                                       \
    }
RMS_NORM_TYPED(float, f32)
RMS_NORM_TYPED(double, f64)
RMS_NORM_TYPED(float complex, c64)
RMS_NORM_TYPED(double complex, c128)

/* Call name_<suffix>(args) for dtype dt (one of the four check_x allows). */
#define DISPATCH(dt, name, ...)                          \
    switch (dt) {                                        \
    case OC_FLOAT32: name##_f32(__VA_ARGS__); break;     \
    case OC_FLOAT64: name##_f64(__VA_ARGS__); break;     \
    case OC_COMPLEX64: name##_c64(__VA_ARGS__); break;   \
    default: name##_c128(__VA_ARGS__); break;            \
    }

static void forward(const oc_tensor *x, double eps, oc_tensor *y, oc_tensor *res)
{
    int64_t rows, cols, lo, hi;
    check_x(x, "x", &rows, &cols);
    oc_core_range(rows, 1, &lo, &hi);
    void *r = res ? res->data : NULL;
    DISPATCH(x->dtype, fwd, eps, cols, lo, hi, x->data, y->data, r)
}

oc_tensor *rms_norm(const oc_tensor *x, double eps)
{
    forward(x, eps, oc_dst_tensor(), NULL);
    return oc_dst_tensor();
}

void rms_norm_fwd(const oc_tensor *x, double eps) { forward(x, eps, oc_dst_tensor_at(0), oc_dst_tensor_at(1)); }

oc_tensor *rms_norm_bwd(const oc_tensor *grad_y, const oc_tensor *res, const oc_tensor *x)
{
    int64_t rows, cols, lo, hi;
    check_x(x, "x", &rows, &cols);
    OC_CHECK(grad_y->dtype == x->dtype && res->dtype == x->dtype, "grad_y (%s), res (%s) and x (%s) must share a dtype",
             oc_dtype_name(grad_y->dtype), oc_dtype_name(res->dtype), oc_dtype_name(x->dtype));
    OC_CHECK(oc_is_contiguous(grad_y) && oc_is_contiguous(res), "grad_y and res must be contiguous");
    oc_core_range(rows, 1, &lo, &hi);
    DISPATCH(x->dtype, bwd, cols, lo, hi, res->data, x->data, grad_y->data, oc_dst_tensor()->data)
    return oc_dst_tensor();
}
