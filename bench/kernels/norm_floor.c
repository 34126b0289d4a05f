/* The floors the tiles bench sets beside the row-wise ops at [32, 4096]
 * (in cache, where a copy of the bytes takes microseconds): what the
 * fastest kernel of each kind reaches through the same call path, so that
 * a target against torch's copy is shown with its ceiling. Plain C over
 * float32 rows, each core its share of the rows, compiled with opcore's
 * default flags; none keeps the tile layer's fixed summing order. Inputs of
 * other layouts are copied to contiguous temporaries first (the bench
 * passes contiguous ones).
 *
 *   one_pass(x, w, eps): an rmsnorm reading each row once from L2: the sum
 *     of squares in 64 lanes (four independent 16-lane sums, no chain of
 *     dependent adds to wait on), then the row scaled while it is in L1.
 *     No norm that takes its own statistics does less.
 *   scale(x, w): y = x * w: a norm whose statistics came with x (taken by
 *     the op that wrote it): one read, one product, one write.
 *   exp_rows(x): y = exp(x) by the tile layer's exp (faster here than
 *     glibc's vector expf): the exp a softmax cannot skip, and nothing else.
 *   copy(x): each core's rows by memcpy: a copy through the same call path. */
#include <opcore/kernel.h>
#include <opcore/tile.h>

typedef float v16 __attribute__((vector_size(64), aligned(4), may_alias));
#define AT(p) (*(v16 *)(void *)(p))

/* t's elements, contiguous (a copy where t is strided). */
static const float *dense(const oc_tensor *t)
{
    return oc_is_contiguous(t) ? t->data : oc_to_dtype(t, OC_FLOAT32)->data;
}

/* x's row length and this core's rows (the shape function checked x). */
static void rows_of(const oc_tensor *x, int64_t *d, int64_t *lo, int64_t *hi)
{
    *d = x->sizes[x->ndim - 1];
    oc_core_range(oc_numel(x) / *d, 1, lo, hi);
}

oc_tensor *one_pass(const oc_tensor *x, const oc_tensor *w, double eps)
{
    int64_t d, lo, hi;
    rows_of(x, &d, &lo, &hi);
    float *y = oc_dst_tensor()->data;
    const float *wp = dense(w), *xp = dense(x);
    for (int64_t i = lo; i < hi; i++) {
        const float *xr = xp + i * d;
        v16 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
        for (int64_t j = 0; j < d; j += 64) {
            v16 a = AT(xr + j), b = AT(xr + j + 16), c = AT(xr + j + 32), e = AT(xr + j + 48);
            s0 += a * a, s1 += b * b, s2 += c * c, s3 += e * e;
        }
        v16 t = (s0 + s1) + (s2 + s3);
        float q = 0.0f;
        for (int k = 0; k < 16; k++) q += t[k];
        float r = 1.0f / sqrtf(q / (float)d + (float)eps);
        for (int64_t j = 0; j < d; j += 16) AT(y + i * d + j) = AT(xr + j) * r * AT(wp + j);
    }
    return oc_dst_tensor();
}

oc_tensor *scale(const oc_tensor *x, const oc_tensor *w)
{
    int64_t d, lo, hi;
    rows_of(x, &d, &lo, &hi);
    float *y = oc_dst_tensor()->data;
    const float *wp = dense(w), *xp = dense(x);
    for (int64_t i = lo * d; i < hi * d; i += d)
        for (int64_t j = 0; j < d; j += 16) AT(y + i + j) = AT(xp + i + j) * AT(wp + j);
    return oc_dst_tensor();
}

oc_tensor *exp_rows(const oc_tensor *x)
{
    int64_t d, lo, hi;
    rows_of(x, &d, &lo, &hi);
    oc_tile X = {(float *)dense(x) + lo * d, hi - lo, d, d, 1, OC_FLOAT32, false};
    oc_tile Y = {(float *)oc_dst_tensor()->data + lo * d, hi - lo, d, d, 1, OC_FLOAT32, false};
    if (hi > lo) oc_tile_unary(&Y, &X, OC_TILE_EXP, 1.0f, 0.0f);
    return oc_dst_tensor();
}

oc_tensor *copy(const oc_tensor *x)
{
    int64_t d, lo, hi;
    rows_of(x, &d, &lo, &hi);
    memcpy((float *)oc_dst_tensor()->data + lo * d, dense(x) + lo * d,
           (size_t)((hi - lo) * d) * sizeof(float));
    return oc_dst_tensor();
}
