/* src/ops/convert.c — dtype conversion: element load/store as double,
 * oc_copy_, oc_to_dtype and oc_fill_.
 *
 * Conversions go through double (exact for every dtype but int64 beyond
 * 2^53); double -> integer truncates toward zero and saturates, NaN -> 0.
 * When either side is complex they go through double _Complex instead:
 * real -> complex gets imaginary part 0, complex -> real keeps the real
 * part (as C and NumPy do; PyTorch warns), complex -> bool is z != 0.
 * A same-dtype copy or a fill moves raw elements and never converts.
 */
#include <string.h>

#include "ops/ops_internal.h"

/* ---- one element ---------------------------------------------------------- */

#define OC__LOAD_CASE(dt, sfx, S, C, W, LD, ST, FROMD, _) \
    case dt:                                              \
        return (double)LD(*(const S *)p); /* complex: the real part */
#define OC__STORE_CASE(dt, sfx, S, C, W, LD, ST, FROMD, _) \
    case dt:                                               \
        *(S *)p = ST(FROMD(v));                            \
        return;

double oc__load_as_double(const void *p, oc_dtype dtype)
{
    switch (dtype) {
        OC_ALL_TYPES(OC__LOAD_CASE, _)
    default:
        return 0.0;
    }
}

void oc__store_from_double(void *p, oc_dtype dtype, double v)
{
    switch (dtype) {
        OC_ALL_TYPES(OC__STORE_CASE, _)
    default:
        return;
    }
}

/* ---- rows of conversions, through a small buffer -------------------------
 * of double (real dtypes) or of double _Complex (when either side is
 * complex); B is the buffer's element type, b its suffix. */

typedef void (*oc__cvt_fn)(int64_t n, char *p, int64_t s, void *buf);

#define OC__TO_BUF(dt, sfx, S, C, W, LD, ST, FROMD, B, b)                        \
    static void oc__to_##b##_##sfx(int64_t n, char *p, int64_t s, void *vbuf)    \
    {                                                                           \
        const S *x = (const S *)p;                                              \
        B *buf = (B *)vbuf;                                                     \
        for (int64_t i = 0; i < n; i++)                                         \
            buf[i] = (B)LD(x[i * s]);                                           \
    }
#define OC__FROM_BUF(dt, sfx, S, C, W, LD, ST, FROMD, B, b)                        \
    static void oc__from_##b##_##sfx(int64_t n, char *p, int64_t s, void *vbuf)    \
    {                                                                             \
        S *x = (S *)p;                                                            \
        const B *buf = (const B *)vbuf;                                           \
        for (int64_t i = 0; i < n; i++)                                           \
            x[i * s] = ST(FROMD(buf[i]));                                         \
    }
OC_REAL_TYPES(OC__TO_BUF, double, d)
OC_REAL_TYPES(OC__FROM_BUF, double, d)
OC_ALL_TYPES(OC__TO_BUF, oc_complex128, z)
OC_ALL_TYPES(OC__FROM_BUF, oc_complex128, z)

#define OC__TO_ENTRY(dt, sfx, S, C, W, LD, ST, FROMD, b) [dt] = oc__to_##b##_##sfx,
#define OC__FROM_ENTRY(dt, sfx, S, C, W, LD, ST, FROMD, b) [dt] = oc__from_##b##_##sfx,
static const oc__cvt_fn oc__to_double[OC_NUM_DTYPES] = {OC_REAL_TYPES(OC__TO_ENTRY, d)};
static const oc__cvt_fn oc__from_double[OC_NUM_DTYPES] = {OC_REAL_TYPES(OC__FROM_ENTRY, d)};
static const oc__cvt_fn oc__to_complex[OC_NUM_DTYPES] = {OC_ALL_TYPES(OC__TO_ENTRY, z)};
static const oc__cvt_fn oc__from_complex[OC_NUM_DTYPES] = {OC_ALL_TYPES(OC__FROM_ENTRY, z)};

typedef struct oc__cvt_ctx {
    oc_dtype dst, src;
} oc__cvt_ctx;

#define OC__CVT_CHUNK 256

static void oc__convert_row(int64_t n, char *const *p, const int64_t *s, const oc__params *prm)
{
    const oc__cvt_ctx *c = (const oc__cvt_ctx *)prm->ctx;
    const int64_t es_dst = (int64_t)oc_dtype_size(c->dst), es_src = (int64_t)oc_dtype_size(c->src);
    const bool cplx = oc_dtype_is_complex(c->dst) || oc_dtype_is_complex(c->src);
    const oc__cvt_fn to = (cplx ? oc__to_complex : oc__to_double)[c->src];
    const oc__cvt_fn from = (cplx ? oc__from_complex : oc__from_double)[c->dst];
    oc_complex128 buf[OC__CVT_CHUNK]; /* room for either buffer type */
    for (int64_t i = 0; i < n; i += OC__CVT_CHUNK) {
        int64_t m = n - i < OC__CVT_CHUNK ? n - i : OC__CVT_CHUNK;
        to(m, p[1] + i * s[1] * es_src, s[1], buf);
        from(m, p[0] + i * s[0] * es_dst, s[0], buf);
    }
}

/* ---- raw moves, by element size (dtype-agnostic) ------------------------- */

typedef struct { uint64_t lo, hi; } oc__bytes16; /* a complex128, moved as bits */
#define OC__SIZED(X) X(1, uint8_t) X(2, uint16_t) X(4, uint32_t) X(8, uint64_t) X(16, oc__bytes16)

/* copy: operand 1 -> operand 0 */
#define OC__COPY_ROW(bytes, T)                                                         \
    static void oc__copy_row##bytes(int64_t n, char *const *p, const int64_t *s,        \
                                    const oc__params *prm)                              \
    {                                                                                   \
        (void)prm;                                                                      \
        T *o = (T *)p[0];                                                               \
        const T *a = (const T *)p[1];                                                   \
        if (s[0] == 1 && s[1] == 1) {                                                   \
            memmove(o, a, (size_t)n * sizeof(T));                                       \
            return;                                                                     \
        }                                                                               \
        for (int64_t i = 0; i < n; i++)                                                 \
            o[i * s[0]] = a[i * s[1]];                                                  \
    }
/* fill: the element bit pattern is in prm->ctx */
#define OC__FILL_ROW(bytes, T)                                                         \
    static void oc__fill_row##bytes(int64_t n, char *const *p, const int64_t *s,        \
                                    const oc__params *prm)                              \
    {                                                                                   \
        T *o = (T *)p[0];                                                               \
        const T v = *(const T *)prm->ctx;                                               \
        const int64_t st = s[0];                                                        \
        if (st == 1) {                                                                  \
            for (int64_t i = 0; i < n; i++)                                             \
                o[i] = v;                                                               \
            return;                                                                     \
        }                                                                               \
        for (int64_t i = 0; i < n; i++)                                                 \
            o[i * st] = v;                                                              \
    }
OC__SIZED(OC__COPY_ROW)
OC__SIZED(OC__FILL_ROW)

static oc__row_fn oc__sized_row(oc_dtype dt, bool fill)
{
    switch (oc_dtype_size(dt)) {
    case 1: return fill ? oc__fill_row1 : oc__copy_row1;
    case 2: return fill ? oc__fill_row2 : oc__copy_row2;
    case 4: return fill ? oc__fill_row4 : oc__copy_row4;
    case 8: return fill ? oc__fill_row8 : oc__copy_row8;
    default: return fill ? oc__fill_row16 : oc__copy_row16;
    }
}

void oc__fill_raw(oc_tensor *t, double value)
{
    oc_complex128 elem = 0; /* large and aligned enough for any dtype */
    oc__store_from_double(&elem, t->dtype, value);
    oc__params prm = {0, 0, &elem};
    const oc_tensor *ts[1] = {t};
    oc__foreach_row(1, ts, oc__sized_row(t->dtype, true), &prm);
}

/* Copy without checks (shapes equal, both have data). */
static void oc__copy_raw(oc_tensor *dst, const oc_tensor *src)
{
    const oc_tensor *ts[2] = {dst, src};
    oc__cvt_ctx c = {dst->dtype, src->dtype};
    oc__params prm = {0, 0, &c};
    oc__foreach_row(2, ts, dst->dtype == src->dtype ? oc__sized_row(dst->dtype, false)
                                                    : oc__convert_row, &prm);
}

/* ---- public -------------------------------------------------------------- */

oc_tensor *oc_fill_(oc_tensor *t, double value)
{

    if (!oc__check_tensor_arg(t, "oc_fill_", false, "t", true))
        return NULL;
    if (!oc__require_data(t, "oc_fill_", "t"))
        return NULL;
    if (!oc__in_shape_fn() && !oc_is_meta(t))
        oc__fill_raw(t, value);
    return t;
}

oc_tensor *oc_copy_(oc_tensor *dst, const oc_tensor *src)
{
    char a[400], b[400];
    if (!oc__check_tensor_arg(dst, "oc_copy_", false, "dst", true) ||
        !oc__check_tensor_arg(src, "oc_copy_", false, "src", false))
        return NULL;
    if (!oc_same_shape(dst, src)) {
        oc__raise(OC_EINVAL, "oc_copy_: argument 'src' has shape %s, expected %s (no broadcasting)",
                  oc_shape_str(src, a, sizeof a), oc_shape_str(dst, b, sizeof b));
        return NULL;
    }
    if (!oc__require_data(dst, "oc_copy_", "dst") ||
        !oc__require_data(src, "oc_copy_", "src"))
        return NULL;
    if (!oc__in_shape_fn() && !oc_is_meta(dst) && !oc_is_meta(src))
        oc__copy_raw(dst, src);
    return dst;
}

oc_tensor *oc_to_dtype(const oc_tensor *t, oc_dtype dtype)
{

    if (!oc__check_tensor_arg(t, "oc_to_dtype", false, "t", false))
        return NULL;
    if (!oc_dtype_is_valid(dtype)) {
        oc__raise(OC_EINVAL, "oc_to_dtype: argument 'dtype' is %d, expected a valid oc_dtype",
                  (int)dtype);
        return NULL;
    }
    if (!oc__require_data(t, "oc_to_dtype", "t"))
        return NULL;
    oc_tensor *r = oc__tensor_new(dtype, t->ndim, t->sizes);
    if (r && !oc_is_meta(r) && !oc_is_meta(t))
        oc__copy_raw(r, t);
    return r;
}
