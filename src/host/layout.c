/* How a call's tensors reach the kernel: dense and row-major unless the op
 * asked for raw strides (`.strided = true`), and never written where they
 * share memory with what the kernel reads.
 *
 *   - an input that is not contiguous (a transpose, a slice, an expanded
 *     gradient with stride 0) is copied into a dense tensor the call owns;
 *   - a written tensor (a Tensor(a!) argument, an item of a Tensor(a!)[],
 *     a result buffer the caller passed) that is not contiguous is copied
 *     in, written by the kernel, and copied back after it;
 *   - a written tensor with internal overlap (a stride 0, an as_strided
 *     view whose elements share memory) is refused, as torch refuses it;
 *   - a written tensor that shares memory with an input: the very same
 *     view (`op(x, out=x)`) reads a copy of the input (as if the input had
 *     been copied first); any other overlap is refused, as are two written
 *     tensors that share memory.
 *
 * Contiguous tensors that share nothing cost one contiguity test each and,
 * for ops that write in place, one sort of their extents. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "host/call_internal.h"
#include "opcore/tensor_ops.h"

/* A frame tensor the kernel gets a dense copy of (set in the frame's
 * copies only while the layout is worked out; never seen by a kernel). */
#define DENSIFY (1u << 31)

/* One tensor of the call, for the overlap checks. */
typedef struct span {
    uintptr_t lo, hi;  /* bytes [lo, hi) */
    oc_tensor *t;
    int arg, item;     /* argument index (-1: result `item`), list item or -1 */
    bool written;
} span;

static const char *who_name(const struct oc_op *op, const span *s, char *buf, size_t len)
{
    if (s->arg < 0) snprintf(buf, len, "result %d", s->item);
    else if (s->item >= 0) snprintf(buf, len, "'%s' (argument %d, item %d)", op->def.schema.args[s->arg].name, s->arg + 1, s->item);
    else snprintf(buf, len, "'%s' (argument %d)", op->def.schema.args[s->arg].name, s->arg + 1);
    return buf;
}


/* Bytes a tensor's elements span; false for an empty tensor. */
static bool extent(const oc_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
    int64_t neg = 0, pos = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->sizes[d] == 0) return false;
        int64_t reach = t->strides[d] * (t->sizes[d] - 1);
        if (reach < 0) neg += reach;
        else pos += reach;
    }
    int64_t elem = oc__elem_bytes[t->dtype];
    *lo = (uintptr_t)t->data + (uintptr_t)(neg * elem);
    *hi = (uintptr_t)t->data + (uintptr_t)((pos + 1) * elem);
    return true;
}

/* True unless every element has its own memory: dims of size > 1 sorted by
 * |stride| must each step past everything the inner dims span (stride 0
 * and as_strided overlaps fail; a layout this cannot prove counts as
 * overlapping). */
static bool internal_overlap(const oc_tensor *t)
{
    int64_t st[OC_MAX_DIMS], sz[OC_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->sizes[d] == 0) return false;
        if (t->sizes[d] == 1) continue;
        int64_t s = t->strides[d] < 0 ? -t->strides[d] : t->strides[d];
        int j = n++;
        for (; j > 0 && st[j - 1] > s; j--) {
            st[j] = st[j - 1];
            sz[j] = sz[j - 1];
        }
        st[j] = s;
        sz[j] = t->sizes[d];
    }
    int64_t reach = 0; /* elements the inner dims span, minus one */
    for (int k = 0; k < n; k++) {
        if (st[k] <= reach) return true;
        reach += st[k] * (sz[k] - 1);
    }
    return false;
}

static bool same_view(const oc_tensor *a, const oc_tensor *b)
{
    if (a->data != b->data || a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->sizes[d] != b->sizes[d] || (a->sizes[d] > 1 && a->strides[d] != b->strides[d])) return false;
    return true;
}

/* ---- walking the call's tensors ------------------------------------------------ */

typedef struct walk {
    const struct oc_op *op;
    call_frame *f;
    oc_tensor *outs;
    int nouts;       /* results with buffers (0: none yet) */
    bool check_outs; /* the caller gave them: they may overlap the inputs */
    bool strided;    /* the op takes raw strides */
} walk;

typedef oc_status (*visit_fn)(walk *w, oc_tensor *t, int arg, int item, bool written, void *ctx);

static oc_status each_tensor(walk *w, visit_fn fn, void *ctx)
{
    const struct oc_op *op = w->op;
    oc_status st;
    for (int i = 0; i < w->f->nargs; i++) {
        const oc_schema_arg *a = &op->def.schema.args[i];
        oc_tensor *x = oc__frame_tensor(op, w->f, i);
        if (x) {
            if ((st = fn(w, x, i, -1, a->is_mutable, ctx))) return st;
        } else if (a->type == OC_ARG_TENSOR_LIST && w->f->saved_data[i]) {
            oc_tensor_list *l = &w->f->values[i].tensors;
            for (int64_t k = 0; k < l->count; k++)
                if ((st = fn(w, (oc_tensor *)&l->items[k], i, (int)k, a->is_mutable, ctx))) return st;
        }
    }
    for (int r = 0; r < w->nouts; r++)
        if (op->def.schema.results[r].alias_arg < 0 && (st = fn(w, &w->outs[r], -1, r, true, ctx))) return st;
    return OC_OK;
}

/* ---- the passes ---------------------------------------------------------------- */

typedef struct tally {
    int copies, writes, spans;
    size_t bytes;
} tally;

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Pass 1: which tensors need a dense copy; how many take part in overlap checks. */
static oc_status mark(walk *w, oc_tensor *t, int arg, int item, bool written, void *ctx)
{
    tally *n = ctx;
    (void)arg, (void)item;
    if (!w->strided && !oc_is_contiguous(t)) t->flags |= DENSIFY;
    if (written && (arg >= 0 || w->check_outs)) n->writes++;
    n->spans++;
    return OC_OK;
}

typedef struct spans {
    span *s;
    int n;
} spans;

static oc_status collect(walk *w, oc_tensor *t, int arg, int item, bool written, void *ctx)
{
    spans *out = ctx;
    span *s = &out->s[out->n];
    if (arg < 0 && !w->check_outs) return OC_OK; /* fresh from the allocator */
    if (written && !oc_is_contiguous(t) && internal_overlap(t)) {
        char buf[160], sz[256];
        span me = {0, 0, t, arg, item, true};
        return oc_set_error(OC_EINVAL,
                            "op '%s': unsupported operation: more than one element of the written-to tensor %s "
                            "refers to a single memory location (shape %s; a stride 0 from expand(), or an "
                            "overlapping as_strided view). Please clone() the tensor before performing the "
                            "operation.", w->op->qualname, who_name(w->op, &me, buf, sizeof buf),
                            oc_shape_str(t, sz, sizeof sz));
    }
    if (!extent(t, &s->lo, &s->hi)) return OC_OK;
    s->t = t, s->arg = arg, s->item = item, s->written = written;
    out->n++;
    return OC_OK;
}

static int by_lo(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* One overlapping pair, at least one of them written. */
static oc_status judge(const struct oc_op *op, bool strided, span *a, span *b)
{
    char ba[160], bb[160];
    if (a->written && b->written)
        return oc_set_error(OC_EINVAL, "op '%s': unsupported operation: some elements of the written-to tensors "
                            "%s and %s refer to a single memory location. Please clone() one of them before "
                            "performing the operation.", op->qualname, who_name(op, a, ba, sizeof ba),
                            who_name(op, b, bb, sizeof bb));
    span *in = a->written ? b : a, *out = a->written ? a : b;
    /* the kernel reads a copy of the input, or writes a copy of the output */
    if (in->t->flags & DENSIFY || (!strided && out->t->flags & DENSIFY)) return OC_OK;
    if (same_view(in->t, out->t)) {
        in->t->flags |= DENSIFY; /* as if the input had been copied first */
        return OC_OK;
    }
    return oc_set_error(OC_EINVAL, "op '%s': unsupported operation: some elements of the input tensor %s and the "
                        "written-to tensor %s refer to a single memory location. Please clone() the tensor "
                        "before performing the operation.", op->qualname, who_name(op, in, ba, sizeof ba),
                        who_name(op, out, bb, sizeof bb));
}

static oc_status check_overlap(walk *w, int count)
{
    span local[16];
    bool small = count <= 16; /* the usual call: nothing to allocate */
    spans sp = {small ? local : oc__malloc((size_t)count * sizeof(span)), 0};
    if (!sp.s) return oc_set_error(OC_ENOMEM, "op '%s': out of memory checking %d tensors", w->op->qualname, count);
    oc_status st = each_tensor(w, collect, &sp);
    if (!st && small) { /* a few tensors: every pair, no sort */
        for (int j = 1; !st && j < sp.n; j++)
            for (int i = 0; !st && i < j; i++)
                if ((sp.s[i].written || sp.s[j].written) && sp.s[i].lo < sp.s[j].hi && sp.s[j].lo < sp.s[i].hi)
                    st = judge(w->op, w->strided, &sp.s[i], &sp.s[j]);
        return st;
    }
    if (!st) qsort(sp.s, (size_t)sp.n, sizeof(span), by_lo);
    /* reach[j]: the highest end among spans 0..j; going back from j, no
     * earlier span reaches span j's start once reach falls to it */
    uintptr_t reach = 0;
    uintptr_t *ends = st ? NULL : oc__malloc((size_t)(sp.n ? sp.n : 1) * sizeof *ends);
    if (!st && !ends) st = oc_set_error(OC_ENOMEM, "op '%s': out of memory checking overlap", w->op->qualname);
    for (int j = 0; !st && j < sp.n; j++) {
        for (int i = j - 1; !st && i >= 0 && ends[i] > sp.s[j].lo; i--)
            if (sp.s[i].hi > sp.s[j].lo && (sp.s[i].written || sp.s[j].written))
                st = judge(w->op, w->strided, &sp.s[i], &sp.s[j]);
        reach = sp.s[j].hi > reach ? sp.s[j].hi : reach;
        ends[j] = reach;
    }
    oc__free(ends);
    if (!small) oc__free(sp.s);
    return st;
}

typedef struct copier {
    char *mem;
    oc__dense_rec *recs;
    int nrecs;
} copier;

static oc_status unmark(walk *w, oc_tensor *t, int arg, int item, bool written, void *ctx)
{
    (void)w, (void)arg, (void)item, (void)written, (void)ctx;
    t->flags &= ~(uint32_t)DENSIFY;
    return OC_OK;
}

static oc_status count_copies(walk *w, oc_tensor *t, int arg, int item, bool written, void *ctx)
{
    tally *n = ctx;
    (void)w, (void)arg, (void)item;
    if (t->flags & DENSIFY) {
        n->copies++;
        n->writes += written;
        n->bytes += round64((size_t)oc_nbytes(t));
    }
    return OC_OK;
}

/* Pass 3: the dense copies (written ones filled too, and remembered for
 * the copy back). */
static oc_status make_copy(walk *w, oc_tensor *t, int arg, int item, bool written, void *ctx)
{
    copier *c = ctx;
    (void)arg, (void)item;
    if (!(t->flags & DENSIFY)) return OC_OK;
    t->flags &= ~(uint32_t)DENSIFY;
    oc_tensor dense, src = *t;
    src.flags &= ~(uint32_t)OC_TENSOR_READONLY;
    oc_tensor_init(&dense, c->mem, t->dtype, t->ndim, t->sizes);
    if (oc_numel(t) > 0 && !oc_copy_(&dense, &src))
        return oc_set_error(oc_errcode(), "op '%s': making a dense copy of a tensor: %s", w->op->qualname, oc_errmsg());
    c->mem += round64((size_t)oc_nbytes(t));
    if (written) c->recs[c->nrecs++] = (oc__dense_rec){t, *t};
    dense.flags = t->flags;
    dense.coherence = t->coherence;
    *t = dense;
    return OC_OK;
}

/* A contiguous tensor's bytes [lo, hi) (lo == hi: empty); false if it is
 * not contiguous. One pass: this runs on every call. */
static inline bool dense_span(const oc_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
    int64_t n = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t size = t->sizes[d];
        if (size == 0) {
            n = 0;
            break;
        }
        if (size != 1 && t->strides[d] != n) return false;
        n *= size;
    }
    *lo = (uintptr_t)t->data;
    *hi = *lo + (uintptr_t)n * oc__elem_bytes[t->dtype];
    return true;
}

/* The usual call, in one plain loop: true when every tensor is contiguous,
 * no argument is written and the caller's result buffers (`check_outs`)
 * overlap nothing. Anything else takes the general path below. */
static bool nothing_to_do(const struct oc_op *op, call_frame *f, const oc_tensor *outs, bool check_outs)
{
    enum { MAX_SEEN = 8 };
    uintptr_t lo[MAX_SEEN], hi[MAX_SEEN], l, h;
    int n = 0;
    for (int i = 0; i < f->nargs; i++) {
        const oc_schema_arg *a = &op->def.schema.args[i];
        const oc_tensor *x = oc__frame_tensor(op, f, i);
        int64_t count = 1;
        if (!x) {
            if (a->type != OC_ARG_TENSOR_LIST || !f->saved_data[i]) continue;
            count = f->values[i].tensors.count;
            x = f->values[i].tensors.items;
        }
        if (a->is_mutable && count > 0) return false;
        for (int64_t k = 0; k < count; k++) {
            if (!dense_span(&x[k], &l, &h)) return false;
            if (!check_outs || l == h) continue;
            if (n == MAX_SEEN) return false;
            lo[n] = l, hi[n++] = h;
        }
    }
    for (int r = 0; outs && r < op->num_results; r++) {
        if (op->def.schema.results[r].alias_arg >= 0) continue;
        if (!dense_span(&outs[r], &l, &h)) return false;
        if (!check_outs || l == h) continue;
        for (int k = 0; k < n; k++)
            if (lo[k] < h && l < hi[k]) return false;
        if (n == MAX_SEEN) return false;
        lo[n] = l, hi[n++] = h;
    }
    return true;
}

oc_status oc__frame_layout(const struct oc_op *op, call_frame *f, oc_tensor *outs, bool check_outs)
{
    if (nothing_to_do(op, f, outs, check_outs)) return OC_OK;
    walk w = {op, f, outs, outs ? op->num_results : 0, check_outs, op->def.options.strided};
    tally n = {0}, c = {0};
    each_tensor(&w, mark, &n);
    oc_status st = n.writes ? check_overlap(&w, n.spans) : OC_OK;
    if (!st) each_tensor(&w, count_copies, &c);
    if (st) each_tensor(&w, unmark, NULL); /* the caller's `outs` keep their flags */
    if (st || !c.copies) return st;
    /* one block: the copy-back records, then each copy 64-byte aligned */
    size_t head = round64((size_t)c.writes * sizeof(oc__dense_rec));
    char *block = oc__malloc(head + c.bytes + 63);
    if (!block) return oc_set_error(OC_ENOMEM, "op '%s': out of memory for dense copies of its tensors (%zu bytes)",
                                    op->qualname, c.bytes);
    f->heap[f->nheap++] = block;
    copier cp = {(char *)(((uintptr_t)block + head + 63) & ~(uintptr_t)63), (oc__dense_rec *)(void *)block, 0};
    st = each_tensor(&w, make_copy, &cp);
    f->dense = cp.recs;
    f->ndense = cp.nrecs;
    return st;
}

oc_status oc__frame_write_back(call_frame *f, oc_status st)
{
    for (int k = 0; k < f->ndense; k++) {
        oc__dense_rec *r = &f->dense[k];
        if (st == OC_OK && oc_numel(&r->orig) > 0 && !oc_copy_(&r->orig, r->slot))
            st = oc_set_error(oc_errcode(), "copying a result back into its strided tensor: %s", oc_errmsg());
        *r->slot = r->orig;
    }
    f->ndense = 0;
    return st;
}
