/* Streaming accessors: sequential reads and writes through a TCM buffer,
 * with the seeds' per-tensor coherence policy. */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "kernel/kernel_internal.h"
#include "opcore/kernel.h"

#define STREAM_BUFFER_BYTES 4096 /* each open stream takes this much TCM */

struct oc_stream_impl {
    oc_stream pub; /* first: kernels hold &pub */
    oc_stream_impl *next;
    oc_tensor view;
    bool write;
    int64_t start, count, done; /* done: elements loaded (read) or flushed (write) */
    char *buf;
    int64_t cap; /* elements per buffer */
    const char *lo, *hi;
};

static oc_stream_impl *impl_of(oc_stream *s) { return (oc_stream_impl *)s; }

static void close_all(oc_ctx *ctx);

void oc__coherence_check(oc_core *c, const oc_tensor *t, bool write, const void *self, const char *what)
{
    if (!t->data) return;
    const char *lo, *hi;
    oc__tensor_extent(t, &lo, &hi);
    for (oc_stream_impl *s = c->streams; s; s = s->next) {
        if (s == self || !(s->write || write) || hi <= s->lo || lo >= s->hi) continue;
        switch (t->coherence) {
        case OC_INCOHERENT_QUIET:
            break;
        case OC_INCOHERENT_VERBOSE:
            fprintf(stderr, "opcore: warning: op '%s': %s overlaps an open %s stream; it may see stale "
                            "data (policy INCOHERENT_VERBOSE)\n",
                    c->exec->name, what, s->write ? "write" : "read");
            break;
        default:
            oc__raise(OC_ECOHERENCE, "%s overlaps an open %s stream on the same memory and may see stale "
                      "data; close the stream first, or set the tensor's policy with oc_set_coherence "
                      "(OC_INCOHERENT_VERBOSE or OC_INCOHERENT_QUIET)", what, s->write ? "write" : "read");
        }
    }
}

static oc_stream *open_stream(const oc_tensor *t, int64_t start, int64_t count, bool write, const char *fn)
{
    char shape[128];
    oc_core *c = oc__kernel_core(fn);
    if (!c) return NULL;
    if (!t) { oc__raise(OC_EINVAL, "%s: tensor is NULL", fn); return NULL; }
    int64_t n = oc_numel(t);
    if (!t->data && n > 0) { oc__raise(OC_EMETA, "%s: tensor has no data (a meta tensor)", fn); return NULL; }
    if (write && (t->flags & OC_TENSOR_READONLY)) {
        oc__raise(OC_EINVAL, "%s: the tensor is a read-only input (write to oc_dst_tensor())", fn);
        return NULL;
    }
    if (start < 0 || count < 0 || start > n || count > n - start) {
        oc__raise(OC_EINVAL, "%s: elements [%lld, %lld) are out of range for a tensor of %lld elements %s", fn,
                  (long long)start, (long long)(start + count), (long long)n, oc_shape_str(t, shape, sizeof shape));
        return NULL;
    }
    oc__coherence_check(c, t, write, NULL, write ? "a write stream" : "a read stream");
    oc_stream_impl *s = oc_tcm_malloc(sizeof *s + STREAM_BUFFER_BYTES);
    if (!s) {
        oc__raise(OC_ENOMEM, "%s: TCM exhausted: a stream needs %d bytes, core %u has %zu free of %zu", fn,
                  (int)(sizeof *s + STREAM_BUFFER_BYTES), c->id, oc_tcm_available(), c->tcm_size);
        return NULL;
    }
    memset(s, 0, sizeof *s);
    s->view = *t;
    s->write = write;
    s->start = start;
    s->count = count;
    s->buf = (char *)(s + 1);
    s->pub.elem_size = (int32_t)oc_dtype_size(t->dtype);
    s->pub.dtype = t->dtype;
    s->cap = STREAM_BUFFER_BYTES / s->pub.elem_size;
    oc__tensor_extent(t, &s->lo, &s->hi);
    s->pub.pos = s->buf;
    s->pub.end = write ? s->buf + (count < s->cap ? count : s->cap) * s->pub.elem_size : s->buf;
    s->next = c->streams;
    c->streams = s;
    c->ctx.at_end = close_all; /* the engine runs it when the kernel ends */
    return &s->pub;
}

oc_stream *oc_read_stream_range(const oc_tensor *t, int64_t start, int64_t count)
{
    return open_stream(t, start, count, false, "oc_read_stream");
}

oc_stream *oc_write_stream_range(oc_tensor *t, int64_t start, int64_t count)
{
    return open_stream(t, start, count, true, "oc_write_stream");
}

oc_stream *oc_read_stream(const oc_tensor *t) { return oc_read_stream_range(t, 0, t ? oc_numel(t) : 0); }
oc_stream *oc_write_stream(oc_tensor *t) { return oc_write_stream_range(t, 0, t ? oc_numel(t) : 0); }

void *oc_stream_refill(oc_stream *p)
{
    oc_stream_impl *s = impl_of(p);
    if (s->write) { oc__raise(OC_EINVAL, "OC_STREAM_READ on a write stream"); return s->buf; }
    int64_t left = s->count - s->done;
    if (left <= 0) {
        oc__raise(OC_EINVAL, "read past the end of a stream of %lld elements", (long long)s->count);
        return s->buf;
    }
    int64_t n = left < s->cap ? left : s->cap;
    oc__flat_copy(&s->view, s->start + s->done, n, s->buf, false);
    oc_core *c = oc__core_current();
    if (c) c->counters.stream_bytes += (uint64_t)(n * p->elem_size);
    s->done += n;
    p->pos = s->buf + p->elem_size;
    p->end = s->buf + n * p->elem_size;
    return s->buf;
}

static void flush(oc_stream_impl *s)
{
    int64_t n = (s->pub.pos - s->buf) / s->pub.elem_size;
    oc__flat_copy(&s->view, s->start + s->done, n, s->buf, true);
    oc_core *c = oc__core_current();
    if (c) c->counters.stream_bytes += (uint64_t)(n * s->pub.elem_size);
    s->done += n;
    int64_t left = s->count - s->done;
    s->pub.pos = s->buf;
    s->pub.end = s->buf + (left < s->cap ? left : s->cap) * s->pub.elem_size;
}

void *oc_stream_flush(oc_stream *p)
{
    oc_stream_impl *s = impl_of(p);
    if (!s->write) { oc__raise(OC_EINVAL, "OC_STREAM_WRITE on a read stream"); return s->buf; }
    flush(s);
    if (p->pos == p->end) {
        oc__raise(OC_EINVAL, "wrote past the end of a stream of %lld elements", (long long)s->count);
        return s->buf;
    }
    p->pos += p->elem_size;
    return s->buf;
}

int64_t oc_stream_remaining(const oc_stream *p)
{
    const oc_stream_impl *s = (const oc_stream_impl *)p;
    int64_t buffered = (p->end - p->pos) / p->elem_size;
    return s->write ? s->count - s->done - (p->pos - s->buf) / p->elem_size : s->count - s->done + buffered;
}

static void unlink_stream(oc_core *c, oc_stream_impl *s)
{
    for (oc_stream_impl **pp = &c->streams; *pp; pp = &(*pp)->next)
        if (*pp == s) { *pp = s->next; return; }
}

void oc_stream_close(oc_stream *p)
{
    if (!p) return;
    oc_core *c = oc__kernel_core("oc_stream_close");
    if (!c) return;
    oc_stream_impl *s = impl_of(p);
    if (s->write) flush(s);
    unlink_stream(c, s);
    oc_tcm_free(s);
}

static void close_all(oc_ctx *ctx)
{
    /* Flush writers a kernel forgot to close; the TCM goes with the reset. */
    oc_core *c = oc__core_of(ctx);
    while (c->streams) {
        oc_stream_impl *s = c->streams;
        c->streams = s->next;
        if (s->write && !c->failed) flush(s);
    }
}

void oc_set_coherence(const oc_tensor *t, oc_coherence policy)
{
    if (t) ((oc_tensor *)t)->coherence = policy; /* a call-local copy, never the caller's */
}
