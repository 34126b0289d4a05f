/* Tensor views and opcore-allocated tensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/internal.h"

int64_t oc_numel(const oc_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->sizes[d];
    return n;
}

int64_t oc_nbytes(const oc_tensor *t) { return oc_numel(t) * (int64_t)oc_dtype_size(t->dtype); }

void oc_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= sizes[d] > 1 ? sizes[d] : 1;
    }
}

bool oc_is_contiguous(const oc_tensor *t) { return oc__contiguous(t); }

bool oc_is_dense(const oc_tensor *t)
{
    /* dims of size > 1 ordered by stride must step by the product of the
     * inner sizes */
    int order[OC_MAX_DIMS], n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->sizes[d] == 0) return true;
        if (t->sizes[d] > 1) order[n++] = d;
    }
    for (int i = 1; i < n; i++) /* insertion sort by stride, innermost first */
        for (int j = i; j > 0 && t->strides[order[j]] < t->strides[order[j - 1]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    int64_t expected = 1;
    for (int i = 0; i < n; i++) {
        if (t->strides[order[i]] != expected) return false;
        expected *= t->sizes[order[i]];
    }
    return true;
}

int64_t oc_size(const oc_tensor *t, int d)
{
    if (d < 0) d += t->ndim;
    if (d < 0 || d >= t->ndim) {
        oc__raise(OC_EINVAL, "oc_size: dim %d is out of range for a %d-dim tensor", d, t->ndim);
        return -1;
    }
    return t->sizes[d];
}

static oc_status check_shape(oc_dtype dtype, int ndim, const int64_t *sizes, bool count_bytes)
{
    if (!oc_dtype_is_valid(dtype)) return oc_set_error(OC_EINVAL, "invalid dtype %d", (int)dtype);
    if (ndim < 0 || ndim > OC_MAX_DIMS)
        return oc_set_error(OC_EINVAL, "%d dims requested; a tensor has 0 to %d", ndim, OC_MAX_DIMS);
    for (int d = 0; d < ndim; d++)
        if (sizes[d] < 0)
            return oc_set_error(OC_EINVAL, "dim %d has negative size %lld", d, (long long)sizes[d]);
    /* Frameworks keep byte offsets in int64 (XLA aborts the process on an
     * extent product that overflows): refuse such a shape here, where the
     * error can still name the op. A shape function's meta tensors only
     * need their element count to fit (no memory is ever laid out for them,
     * and the symbolic tracer probes with large sizes); a tensor with data
     * needs its byte count to fit too. */
    int64_t bytes = count_bytes ? (int64_t)oc_dtype_size(dtype) : 1;
    for (int d = 0; d < ndim; d++)
        if (__builtin_mul_overflow(bytes, sizes[d], &bytes)) {
            char shape[256] = "";
            size_t at = 0;
            for (int k = 0; k < ndim && at < sizeof shape; k++)
                at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%lld", k ? ", " : "", (long long)sizes[k]);
            return oc_set_error(OC_EINVAL, "sizes [%s] of %s hold more elements or bytes than int64 can count",
                                shape, oc_dtype_name(dtype));
        }
    return OC_OK;
}

oc_status oc_tensor_init_strided(oc_tensor *t, void *data, oc_dtype dtype, int ndim,
                                 const int64_t *sizes, const int64_t *strides)
{
    oc_status st = check_shape(dtype, ndim, sizes, data != NULL); /* no data: a meta tensor */
    if (st != OC_OK) return st;
    memset(t, 0, sizeof *t);
    t->data = data;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        t->sizes[d] = sizes[d];
        t->strides[d] = strides[d];
    }
    if (!data) t->flags |= OC_TENSOR_META;
    return OC_OK;
}

oc_status oc_tensor_init(oc_tensor *t, void *data, oc_dtype dtype, int ndim, const int64_t *sizes)
{
    int64_t strides[OC_MAX_DIMS];
    oc_status st = check_shape(dtype, ndim, sizes, data != NULL);
    if (st != OC_OK) return st;
    oc_contiguous_strides(ndim, sizes, strides);
    return oc_tensor_init_strided(t, data, dtype, ndim, sizes, strides);
}

bool oc_same_shape(const oc_tensor *a, const oc_tensor *b)
{
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->sizes[d] != b->sizes[d]) return false;
    return true;
}

const char *oc_shape_str(const oc_tensor *t, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < t->ndim && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", d ? ", " : "", (long long)t->sizes[d]);
    if (n < len) snprintf(buf + n, len - n, "]");
    return buf;
}

void *oc_flat_ptr(const oc_tensor *t, int64_t i)
{
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t s = t->sizes[d];
        if (s == 0) break;
        off += (i % s) * t->strides[d];
        i /= s;
    }
    return (char *)t->data + off * (int64_t)oc_dtype_size(t->dtype);
}

#define BLOCK_DATA_OFFSET ((sizeof(oc_tensor_block) + 63) / 64 * 64)

oc_tensor *oc__tensor_new(oc_dtype dtype, int ndim, const int64_t *sizes)
{
    oc_ctx *ctx = oc__ctx_current();
    bool meta = ctx && ctx->mode == OC_MODE_SHAPE;
    oc_status st = check_shape(dtype, ndim, sizes, !meta);
    if (st != OC_OK) {
        oc__raise(st, "cannot create a tensor: %s", oc_errmsg());
        return NULL;
    }
    size_t bytes = oc_dtype_size(dtype);
    for (int d = 0; d < ndim && !meta; d++) {
        if (sizes[d] && bytes > SIZE_MAX / 2 / (size_t)sizes[d]) {
            oc__raise(OC_ENOMEM, "cannot create a tensor of %d dims: its size overflows", ndim);
            return NULL;
        }
        bytes *= (size_t)sizes[d];
    }
    size_t total = BLOCK_DATA_OFFSET + (meta ? 0 : (bytes + 63) / 64 * 64);
    oc_tensor_block *b = meta && ctx->meta_cached ? ctx->meta_cache[--ctx->meta_cached] : oc__aligned_alloc(64, total);
    if (!b) {
        oc__raise(OC_ENOMEM, "out of memory creating a tensor of %zu bytes", bytes);
        return NULL;
    }
    b->meta = meta;
    oc_tensor_init(&b->tensor, meta ? NULL : (char *)b + BLOCK_DATA_OFFSET, dtype, ndim, sizes);
    b->tensor.flags |= OC_TENSOR_OWNED;
    if (ctx && ctx->mode != OC_MODE_IDLE) {
        b->next = ctx->temps.next;
        b->prev = &ctx->temps;
        ctx->temps.next->prev = b;
        ctx->temps.next = b;
    } else {
        b->next = b->prev = NULL;
    }
    return &b->tensor;
}

void oc_tensor_free(oc_tensor *t)
{
    if (!t) return;
    if (!(t->flags & OC_TENSOR_OWNED)) {
        oc__raise(OC_EINVAL, "oc_tensor_free: this tensor was not created by opcore (a view or an input)");
        return;
    }
    oc_tensor_block *b = (oc_tensor_block *)((char *)t - offsetof(oc_tensor_block, tensor));
    if (b->next) {
        b->prev->next = b->next;
        b->next->prev = b->prev;
    }
    oc__aligned_free(b);
}

void oc__tensor_temps_release(oc_ctx *c)
{
    oc_tensor_block *b = c->temps.next;
    while (b != &c->temps) {
        oc_tensor_block *next = b->next;
        if (b->meta && c->meta_cached < OC_META_CACHE) c->meta_cache[c->meta_cached++] = b;
        else oc__aligned_free(b);
        b = next;
    }
    c->temps.next = c->temps.prev = &c->temps;
}

void oc__tensor_cache_free(oc_ctx *c)
{
    while (c->meta_cached) oc__aligned_free(c->meta_cache[--c->meta_cached]);
}

bool oc__require_data(const oc_tensor *t, const char *fn, const char *arg)
{
    if (!t) {
        oc__raise(OC_EINVAL, "%s: argument '%s' is NULL", fn, arg);
        return false;
    }
    if (!t->data && oc_numel(t) > 0 && !oc__in_shape_fn()) {
        oc__raise(OC_EMETA, "%s: argument '%s' is a meta tensor (no data)", fn, arg);
        return false;
    }
    return true;
}
