/* Dtype conversion of element runs between tensors and tiles. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/internal.h"
#include "opcore/vec.h"
#include "tile/tile_internal.h"

bool oc__tile_dtype_ok(oc_dtype dtype)
{
    return dtype == OC_FLOAT32 || dtype == OC_BFLOAT16 || dtype == OC_FLOAT16 || dtype == OC_INT8 ||
           dtype == OC_INT32;
}

bool oc__tile_want_f32(const oc_tile *t, const char *fn, const char *arg)
{
    if (t->dtype == OC_FLOAT32) return true;
    oc__raise(OC_EINVAL, "%s: argument '%s' is a %s tile, want float32 (oc_tile_copy converts)", fn, arg,
              oc_dtype_name(t->dtype));
    return false;
}

bool oc__tile_want_convertible(const oc_tile *t, const char *fn, const char *arg)
{
    if (oc__tile_dtype_ok(t->dtype) || t->dtype == OC_FLOAT64) return true;
    oc__raise(OC_EINVAL, "%s: argument '%s' is a %s tile; tiles hold float32, bfloat16, float16, int8 or "
              "int32 (float64 tensors convert on the way in and out)", fn, arg, oc_dtype_name(t->dtype));
    return false;
}

/* The lowest and one past the highest byte t's elements touch. */
static void tile_span(const oc_tile *t, uintptr_t *lo, uintptr_t *hi)
{
    int64_t es = (int64_t)oc_dtype_size(t->dtype);
    int64_t r = (t->rows - 1) * t->rs * es, c = (t->cols - 1) * t->cs * es;
    uintptr_t p = (uintptr_t)t->data;
    *lo = p + (uintptr_t)((r < 0 ? r : 0) + (c < 0 ? c : 0));
    *hi = p + (uintptr_t)((r > 0 ? r : 0) + (c > 0 ? c : 0) + es);
}

/* Whether some element of a is an element of b: with equal strides and
 * dtypes, whether the offset between them is i * rs + j * cs for a row
 * and column distance the shapes allow (one check per row distance);
 * with different ones, any shared byte counts. */
static bool tiles_share(const oc_tile *a, const oc_tile *b)
{
    uintptr_t alo, ahi, blo, bhi;
    tile_span(a, &alo, &ahi);
    tile_span(b, &blo, &bhi);
    if (ahi <= blo || bhi <= alo) return false; /* apart: the common case, at once */
    int64_t es = (int64_t)oc_dtype_size(a->dtype);
    intptr_t bytes = (intptr_t)((uintptr_t)b->data - (uintptr_t)a->data);
    if (a->dtype != b->dtype || a->rs != b->rs || a->cs != b->cs || bytes % es) return true;
    int64_t delta = (int64_t)(bytes / es); /* b's (0, 0) is a's element at this offset */
    /* shared: delta = di * rs + dj * cs, di in (-b->rows, a->rows), dj in (-b->cols, a->cols) */
    for (int64_t di = -(b->rows - 1); di <= a->rows - 1; di++) {
        int64_t rest = delta - di * a->rs;
        if (a->cs == 0 ? rest == 0 : rest % a->cs == 0 && rest / a->cs > -b->cols && rest / a->cs < a->cols)
            return true;
        if (a->rs == 0) break; /* every row distance gives the same offset */
    }
    return false;
}

bool oc__tile_apart(const oc_tile *dst, const oc_tile *src, bool same_ok, const char *fn, const char *src_name)
{
    bool same = same_ok && dst->data == src->data && dst->rows == src->rows && dst->cols == src->cols &&
                dst->rs == src->rs && dst->cs == src->cs && dst->dtype == src->dtype;
    if (same || !tiles_share(dst, src)) return true;
    if (!same_ok)
        oc__raise(OC_EINVAL, "%s: dst and '%s' share elements (it cannot work in place)", fn, src_name);
    else
        oc__raise(OC_EINVAL, "%s: dst and '%s' overlap in part (dst may be the very same tile as an "
                  "operand, never a part of it or a tile sharing some of its elements)", fn, src_name);
    return false;
}

/* Round to nearest even and saturate; NaN gives 0. nearbyintf follows the
 * default rounding mode (nearest even) and vectorises. */
static inline int32_t sat_i32(float v)
{
    v = nearbyintf(v);
    return v != v ? 0 : v >= 2147483648.0f ? INT32_MAX : v <= -2147483648.0f ? INT32_MIN : (int32_t)v;
}

static inline int8_t sat_i8(float v)
{
    v = nearbyintf(v);
    return (int8_t)(v != v ? 0 : v > 127.0f ? 127 : v < -128.0f ? -128 : (int)v);
}

float oc__tile_load1(const void *p, oc_dtype dtype)
{
    switch (dtype) {
    case OC_FLOAT32: return *(const float *)p;
    case OC_FLOAT64: return (float)*(const double *)p;
    case OC_BFLOAT16: return oc_bf16_to_f32(*(const oc_bfloat16 *)p);
    case OC_FLOAT16: return oc_half_to_f32(*(const oc_half *)p);
    case OC_INT8: return *(const int8_t *)p;
    case OC_INT32: return (float)*(const int32_t *)p;
    default: return NAN;
    }
}

void oc__tile_store1(void *p, oc_dtype dtype, float v)
{
    switch (dtype) {
    case OC_FLOAT32: *(float *)p = v; break;
    case OC_FLOAT64: *(double *)p = v; break;
    case OC_BFLOAT16: *(oc_bfloat16 *)p = oc_f32_to_bf16(v); break;
    case OC_FLOAT16: *(oc_half *)p = oc_f32_to_half(v); break;
    case OC_INT8: *(int8_t *)p = sat_i8(v); break;
    case OC_INT32: *(int32_t *)p = sat_i32(v); break;
    default: break;
    }
}

/* Contiguous run to/from float32 for the integer dtypes (the float ones are
 * vec.h's oc_load_f32_n / oc_store_f32_n). */
static bool int_to_f32(float *d, const void *src, oc_dtype sdt, int64_t n)
{
    if (sdt == OC_INT8) {
        const int8_t *s = src;
        for (int64_t i = 0; i < n; i++) d[i] = s[i];
        return true;
    }
    if (sdt == OC_INT32) {
        const int32_t *s = src;
        for (int64_t i = 0; i < n; i++) d[i] = (float)s[i];
        return true;
    }
    return false;
}

static bool f32_to_int(void *dst, oc_dtype ddt, const float *s, int64_t n)
{
    if (ddt == OC_INT8) {
        int8_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = sat_i8(s[i]);
        return true;
    }
    if (ddt == OC_INT32) {
        int32_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = sat_i32(s[i]);
        return true;
    }
    return false;
}

void oc__tile_convert_run(void *dst, oc_dtype ddt, int64_t dcs, const void *src, oc_dtype sdt, int64_t scs,
                          int64_t n)
{
    size_t des = oc_dtype_size(ddt), ses = oc_dtype_size(sdt);
    if (dcs == 1 && scs == 1) {
        if (ddt == sdt) {
            memcpy(dst, src, (size_t)n * des);
            return;
        }
        if (ddt == OC_FLOAT32 && (oc_load_f32_n(dst, src, sdt, n) || int_to_f32(dst, src, sdt, n))) return;
        if (sdt == OC_FLOAT32 && (oc_store_f32_n(dst, ddt, src, n) || f32_to_int(dst, ddt, src, n))) return;
        if (sdt == OC_INT8 && ddt == OC_INT32) {
            for (int64_t i = 0; i < n; i++) ((int32_t *)dst)[i] = ((const int8_t *)src)[i];
            return;
        }
    }
    if (ddt == sdt && ddt == OC_INT32) { /* exact, not through float */
        for (int64_t i = 0; i < n; i++) ((int32_t *)dst)[i * dcs] = ((const int32_t *)src)[i * scs];
        return;
    }
    /* strided or a rare pair: one element at a time through float */
    for (int64_t i = 0; i < n; i++)
        oc__tile_store1((char *)dst + i * dcs * (int64_t)des, ddt,
                        oc__tile_load1((const char *)src + i * scs * (int64_t)ses, sdt));
}

void oc__tile_fill_run(void *dst, oc_dtype dt, int64_t cs, int64_t n, float v)
{
    if (dt == OC_FLOAT32) {
        float *d = dst;
        for (int64_t i = 0; i < n; i++) d[i * cs] = v;
        return;
    }
    size_t es = oc_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) oc__tile_store1((char *)dst + i * cs * (int64_t)es, dt, v);
}
