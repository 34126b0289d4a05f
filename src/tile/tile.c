/* Tiles: allocation in the TCM, views, sizes, and moving data between
 * tensors and tiles with dtype conversion and bounds masks. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "opcore/kernel.h"
#include "opcore/tile.h"
#include "opcore/vec.h"
#include "tile/tile_internal.h"

#define TILE_ALIGN 64

static int64_t padded_cols(int64_t cols, oc_dtype dtype)
{
    int64_t per = TILE_ALIGN / oc_dtype_size(dtype);
    return (cols + per - 1) / per * per;
}

size_t oc_tile_bytes(int64_t rows, int64_t cols, oc_dtype dtype)
{
    /* the TCM allocator rounds to 64 bytes and adds a 64-byte header */
    return (size_t)(rows * padded_cols(cols, dtype) * oc_dtype_size(dtype)) + TILE_ALIGN;
}

oc_tile oc_tile_alloc(int64_t rows, int64_t cols, oc_dtype dtype)
{
    oc_tile t = {0};
    if (rows <= 0 || cols <= 0 || !oc__tile_dtype_ok(dtype)) {
        oc__raise(OC_EINVAL, "oc_tile_alloc: a %lld x %lld tile of %s (want rows, cols >= 1 and float32, "
                  "bfloat16, float16, int8 or int32)", (long long)rows, (long long)cols, oc_dtype_name(dtype));
        return t;
    }
    size_t bytes = oc_tile_bytes(rows, cols, dtype) - TILE_ALIGN;
    /* checked here so the message names the tile, not only the bytes */
    if (bytes > oc_tcm_available() || !(t.data = oc_tcm_malloc(bytes))) {
        oc__raise(OC_ENOMEM, "oc_tile_alloc: a %lld x %lld %s tile needs %zu bytes of TCM, %zu of %zu are free "
                  "(OC_TCM_SIZE sets the TCM per core)", (long long)rows, (long long)cols,
                  oc_dtype_name(dtype), bytes, oc_tcm_available(), oc_tcm_capacity());
        return t;
    }
    t.rows = rows;
    t.cols = cols;
    t.rs = padded_cols(cols, dtype);
    t.cs = 1;
    t.dtype = dtype;
    t.in_tcm = true;
    return t;
}

void oc_tile_free(oc_tile *t)
{
    if (t->in_tcm) oc_tcm_free(t->data);
    memset(t, 0, sizeof *t);
}

/* Rows, cols and strides of x's matrix at `batch`, and its first element. */
static bool matrix_of(const oc_tensor *x, int64_t batch, const char *fn, oc__tile_mat *m)
{
    if (!oc__require_data(x, fn, "x")) return false;
    if (x->ndim == 0) {
        m->rows = m->cols = 1;
        m->rs = m->cs = 1;
    } else if (x->ndim == 1) {
        m->rows = 1;
        m->cols = x->sizes[0];
        m->rs = 0;
        m->cs = x->strides[0];
    } else {
        m->rows = x->sizes[x->ndim - 2];
        m->cols = x->sizes[x->ndim - 1];
        m->rs = x->strides[x->ndim - 2];
        m->cs = x->strides[x->ndim - 1];
    }
    int64_t nbatch = 1, off = 0, rest = batch;
    for (int d = x->ndim - 3; d >= 0; d--) nbatch *= x->sizes[d];
    if (batch < 0 || batch >= nbatch) {
        oc__raise(OC_EINVAL, "%s: batch %lld is outside the tensor's %lld leading matrices", fn,
                  (long long)batch, (long long)nbatch);
        return false;
    }
    for (int d = x->ndim - 3; d >= 0; d--) {
        off += rest % x->sizes[d] * x->strides[d];
        rest /= x->sizes[d];
    }
    m->data = (char *)x->data + off * (int64_t)oc_dtype_size(x->dtype);
    m->dtype = x->dtype;
    return true;
}

oc_tile oc_tile_of_tensor(const oc_tensor *x, int64_t batch)
{
    oc_tile t = {0};
    oc__tile_mat m;
    if (!matrix_of(x, batch, "oc_tile_of_tensor", &m)) return t;
    if (!oc__tile_dtype_ok(m.dtype) && m.dtype != OC_FLOAT64) {
        oc__raise(OC_EINVAL, "oc_tile_of_tensor: a %s tensor; tiles hold float32, bfloat16, float16, int8 or "
                  "int32 (float64 tensors convert on the way in and out)", oc_dtype_name(m.dtype));
        return t;
    }
    t.data = m.data;
    t.rows = m.rows;
    t.cols = m.cols;
    t.rs = m.rs;
    t.cs = m.cs;
    t.dtype = m.dtype;
    return t;
}

oc_tile oc_tile_view(const oc_tile *t, int64_t r0, int64_t c0, int64_t rows, int64_t cols)
{
    oc_tile v = *t;
    if (r0 < 0 || c0 < 0 || rows < 1 || cols < 1 || r0 + rows > t->rows || c0 + cols > t->cols) {
        oc__raise(OC_EINVAL, "oc_tile_view: window [%lld:%lld, %lld:%lld] is not inside a %lld x %lld tile",
                  (long long)r0, (long long)(r0 + rows), (long long)c0, (long long)(c0 + cols),
                  (long long)t->rows, (long long)t->cols);
        return v;
    }
    v.data = (char *)t->data + (r0 * t->rs + c0 * t->cs) * (int64_t)oc_dtype_size(t->dtype);
    v.rows = rows;
    v.cols = cols;
    v.in_tcm = false;
    return v;
}

oc_tile oc_tile_row(const oc_tile *t, int64_t i) { return oc_tile_view(t, i, 0, 1, t->cols); }
oc_tile oc_tile_col(const oc_tile *t, int64_t j) { return oc_tile_view(t, 0, j, t->rows, 1); }

oc_tile oc_tile_t(const oc_tile *t)
{
    oc_tile v = *t;
    v.rows = t->cols, v.cols = t->rows;
    v.rs = t->cs, v.cs = t->rs;
    v.in_tcm = false;
    return v;
}

float oc_tile_get(const oc_tile *t, int64_t i, int64_t j)
{
    if (i < 0 || j < 0 || i >= t->rows || j >= t->cols) {
        oc__raise(OC_EINVAL, "oc_tile_get: (%lld, %lld) is outside a %lld x %lld tile", (long long)i,
                  (long long)j, (long long)t->rows, (long long)t->cols);
        return NAN;
    }
    if (!oc__tile_want_convertible(t, "oc_tile_get", "t")) return NAN;
    return oc__tile_load1((const char *)t->data + (i * t->rs + j * t->cs) * (int64_t)oc_dtype_size(t->dtype),
                          t->dtype);
}

void oc_tile_set(oc_tile *t, int64_t i, int64_t j, float v)
{
    if (i < 0 || j < 0 || i >= t->rows || j >= t->cols) {
        oc__raise(OC_EINVAL, "oc_tile_set: (%lld, %lld) is outside a %lld x %lld tile", (long long)i,
                  (long long)j, (long long)t->rows, (long long)t->cols);
        return;
    }
    if (!oc__tile_want_convertible(t, "oc_tile_set", "t")) return;
    oc__tile_store1((char *)t->data + (i * t->rs + j * t->cs) * (int64_t)oc_dtype_size(t->dtype), t->dtype, v);
}

/* ---- scratch ------------------------------------------------------------------ */

/* A pthread key's destructor runs on the exiting thread before its
 * thread-local storage goes: what an engine worker grew is freed when it
 * ends (oc_engine_shutdown), not lost. */
static _Thread_local struct {
    void *p;
    size_t n;
} scratch[OC__SCRATCH_SLOTS];
static _Thread_local bool scratch_keyed;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *unused)
{
    (void)unused;
    for (int i = 0; i < OC__SCRATCH_SLOTS; i++) {
        free(scratch[i].p);
        scratch[i].p = NULL;
        scratch[i].n = 0;
    }
}

static void scratch_key_make(void) { (void)pthread_key_create(&scratch_key, scratch_free); }

void *oc__tile_scratch(int slot, size_t bytes, const char *fn)
{
    if (scratch[slot].n < bytes) {
        if (!scratch_keyed) {
            pthread_once(&scratch_once, scratch_key_make);
            scratch_keyed = pthread_setspecific(scratch_key, &scratch_keyed) == 0;
        }
        free(scratch[slot].p);
        scratch[slot].p = NULL;
        scratch[slot].n = 0;
        if (posix_memalign(&scratch[slot].p, 64, bytes ? bytes : 64)) {
            scratch[slot].p = NULL;
            oc__raise(OC_ENOMEM, "%s: no memory for %zu bytes of scratch", fn, bytes);
            return NULL;
        }
        scratch[slot].n = bytes;
    }
    return scratch[slot].p;
}

/* ---- sizes -------------------------------------------------------------------- */

static size_t cache_bytes(int index, size_t floor_bytes)
{
    size_t n = oc__cpu_cache_bytes(index);
    return n >= floor_bytes ? n : floor_bytes;
}

/* index0 is L1d, index2 L2 on x86 Linux (index1 is L1i). Read once: a
 * kernel asks at every call, and opening sysfs costs more than a small
 * op's whole run (threads racing here store the same value). */
static _Atomic size_t l1_bytes, l2_bytes;

size_t oc_tile_l1_bytes(void)
{
    size_t n = atomic_load_explicit(&l1_bytes, memory_order_relaxed);
    if (!n) atomic_store_explicit(&l1_bytes, n = cache_bytes(0, 32 * 1024), memory_order_relaxed);
    return n;
}

size_t oc_tile_l2_bytes(void)
{
    size_t n = atomic_load_explicit(&l2_bytes, memory_order_relaxed);
    if (!n) atomic_store_explicit(&l2_bytes, n = cache_bytes(2, 512 * 1024), memory_order_relaxed);
    return n;
}

int64_t oc_tile_max_rows(int64_t cols, oc_dtype dtype, int ntiles, int64_t multiple)
{
    if (cols < 1 || ntiles < 1 || multiple < 1 || !oc__tile_dtype_ok(dtype)) return 0;
    size_t avail = oc_tcm_available();
    /* each tile has its 64-byte header; the first one's is already counted out */
    size_t headers = (size_t)(ntiles - 1) * TILE_ALIGN;
    if (avail <= headers) return 0;
    size_t row = (size_t)(padded_cols(cols, dtype) * oc_dtype_size(dtype));
    int64_t rows = (int64_t)((avail - headers) / ntiles / row);
    return rows / multiple * multiple;
}

/* ---- load / store -------------------------------------------------------------- */

int64_t oc_tile_load(oc_tile *t, const oc_tensor *x, int64_t batch, int64_t r0, int64_t c0, float pad)
{
    oc__tile_mat m;
    if (!matrix_of(x, batch, "oc_tile_load", &m)) return 0;
    if (!oc__tile_dtype_ok(m.dtype) && m.dtype != OC_FLOAT64) {
        oc__raise(OC_EINVAL, "oc_tile_load: tensor dtype %s (want a float, int8 or int32 dtype)",
                  oc_dtype_name(m.dtype));
        return 0;
    }
    int64_t in_rows = 0;
    int64_t jlo = c0 < 0 ? -c0 : 0;
    int64_t jhi = m.cols - c0 < t->cols ? m.cols - c0 : t->cols;
    if (jhi < jlo) jhi = jlo;
    size_t tes = oc_dtype_size(t->dtype), xes = oc_dtype_size(m.dtype);
    for (int64_t i = 0; i < t->rows; i++) {
        char *dst = (char *)t->data + i * t->rs * (int64_t)tes;
        int64_t xi = r0 + i;
        if (xi < 0 || xi >= m.rows || jhi == jlo) {
            oc__tile_fill_run(dst, t->dtype, t->cs, t->cols, pad);
            continue;
        }
        in_rows++;
        const char *src = (const char *)m.data + (xi * m.rs + (c0 + jlo) * m.cs) * (int64_t)xes;
        if (jlo) oc__tile_fill_run(dst, t->dtype, t->cs, jlo, pad);
        oc__tile_convert_run(dst + jlo * t->cs * (int64_t)tes, t->dtype, t->cs, src, m.dtype, m.cs, jhi - jlo);
        if (jhi < t->cols)
            oc__tile_fill_run(dst + jhi * t->cs * (int64_t)tes, t->dtype, t->cs, t->cols - jhi, pad);
    }
    return in_rows;
}

void oc_tile_store(const oc_tile *t, oc_tensor *x, int64_t batch, int64_t r0, int64_t c0)
{
    if (x->flags & OC_TENSOR_READONLY) {
        oc__raise(OC_EINVAL, "oc_tile_store: the tensor is an input (read-only); store into oc_dst_tensor()");
        return;
    }
    oc__tile_mat m;
    if (!matrix_of(x, batch, "oc_tile_store", &m)) return;
    if (!oc__tile_dtype_ok(m.dtype) && m.dtype != OC_FLOAT64) {
        oc__raise(OC_EINVAL, "oc_tile_store: tensor dtype %s (want a float, int8 or int32 dtype)",
                  oc_dtype_name(m.dtype));
        return;
    }
    int64_t jlo = c0 < 0 ? -c0 : 0;
    int64_t jhi = m.cols - c0 < t->cols ? m.cols - c0 : t->cols;
    if (jhi <= jlo) return;
    size_t tes = oc_dtype_size(t->dtype), xes = oc_dtype_size(m.dtype);
    for (int64_t i = 0; i < t->rows; i++) {
        int64_t xi = r0 + i;
        if (xi < 0 || xi >= m.rows) continue;
        const char *src = (const char *)t->data + (i * t->rs + jlo * t->cs) * (int64_t)tes;
        char *dst = (char *)m.data + (xi * m.rs + (c0 + jlo) * m.cs) * (int64_t)xes;
        oc__tile_convert_run(dst, m.dtype, m.cs, src, t->dtype, t->cs, jhi - jlo);
    }
}

void oc_tile_copy(oc_tile *dst, const oc_tile *src)
{
    if (dst->rows != src->rows || dst->cols != src->cols) {
        oc__raise(OC_EINVAL, "oc_tile_copy: dst is %lld x %lld, src %lld x %lld (want the same shape)",
                  (long long)dst->rows, (long long)dst->cols, (long long)src->rows, (long long)src->cols);
        return;
    }
    const char *fn = "oc_tile_copy";
    if (!oc__tile_want_convertible(dst, fn, "dst") || !oc__tile_want_convertible(src, fn, "src") ||
        !oc__tile_apart(dst, src, true, fn, "src"))
        return;
    size_t des = oc_dtype_size(dst->dtype), ses = oc_dtype_size(src->dtype);
    for (int64_t i = 0; i < dst->rows; i++)
        oc__tile_convert_run((char *)dst->data + i * dst->rs * (int64_t)des, dst->dtype, dst->cs,
                             (const char *)src->data + i * src->rs * (int64_t)ses, src->dtype, src->cs,
                             dst->cols);
}

void oc_tile_fill(oc_tile *t, float v)
{
    if (!oc__tile_want_convertible(t, "oc_tile_fill", "t")) return;
    size_t es = oc_dtype_size(t->dtype);
    for (int64_t i = 0; i < t->rows; i++)
        oc__tile_fill_run((char *)t->data + i * t->rs * (int64_t)es, t->dtype, t->cs, t->cols, v);
}
