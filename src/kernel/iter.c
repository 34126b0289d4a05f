/* The N-d iterator (opcore/iter.h): broadcast, simplify, order, tile, walk.
 *
 * oc_iter_init turns any set of shapes and strides into the fewest, longest
 * runs it can: size-1 dims go, dims contiguous in every tensor merge, the
 * innermost dim is the one with the smallest strides (outputs decide
 * first), and dims every tensor walks backwards are flipped.
 *
 * When a tensor is contiguous along another dim than the inner one (a
 * transposed input), the two dims are walked in tiles of OC_ITER_TILE_W x
 * OC_ITER_TILE_H: a run is one tile row, the rows of a tile follow, then the
 * next tile along dim 0, and only then the next band of tile rows along dim
 * 1. Each cache line of the transposed tensor is then used whole while it is
 * in L1, and the output (usually fresh memory, faulted in and zeroed by the
 * kernel on first touch) is finished band by band while still in cache.
 *
 * The walk, innermost first:
 *     [offset in a tile row] [row in the tile] [tile along dim 0]
 *     [tile band along dim 1] [outer dims 2.. (an odometer)]
 * Without tiling a tile is all of dims 0 and 1. Offsets are byte offsets
 * from each tensor's data pointer (never out-of-range pointers); only the
 * run's pointers are formed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "engine/core.h"
#include "kernel/kernel_internal.h"
#include "opcore/iter.h"
#include "opcore/kernel.h"

/* Tile size when tiling, in elements (width along the inner dim, height
 * along the transposed tensor's contiguous dim): a tile's lines must stay
 * in L1 while it is walked, and a tile row must be long enough that the
 * kernel's loop, not the walk, takes the time. 128 x 64 was the fastest of
 * 32..128 x 16..64 for a transposed 4096 x 4096 float32 add on a Xeon
 * (48 KiB L1d): about 3x a dense add, against 25x untiled. */
#define OC_ITER_TILE_W 128
#define OC_ITER_TILE_H 64

/* A working set of dims, innermost first. */
typedef struct dims {
    int nd;
    int64_t size[OC_MAX_DIMS];
    int64_t step[OC_ITER_MAX_TENSORS][OC_MAX_DIMS]; /* bytes */
} dims;

static oc_status fail(oc_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static oc_status fail(oc_status st, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    oc__raise(st, "oc_iter_init: %s", msg);
    return st;
}

/* Each tensor alone: present where needed, a valid dtype, data to walk. */
static oc_status check_tensors(int nout, int n, const oc_tensor *const *ts)
{
    int present = 0;
    for (int k = 0; k < n; k++) {
        const oc_tensor *t = ts[k];
        const char *what = k < nout ? "output" : "tensor";
        if (!t) {
            if (k < nout) return fail(OC_EINVAL, "output %d is NULL, expected a tensor to write", k);
            continue;
        }
        present++;
        if (!oc_dtype_is_valid(t->dtype))
            return fail(OC_EINVAL, "%s %d has dtype %d, expected a valid oc_dtype", what, k, (int)t->dtype);
        if (t->ndim < 0 || t->ndim > OC_MAX_DIMS)
            return fail(OC_EINVAL, "%s %d has %d dims, expected 0..%d", what, k, (int)t->ndim, OC_MAX_DIMS);
        if (k < nout && (t->flags & OC_TENSOR_READONLY))
            return fail(OC_EINVAL, "output %d is read-only (a kernel input); outputs are the first "
                        "`nout` tensors and must be writable (oc_dst_tensor() or a new tensor)", k);
    }
    if (!present) return fail(OC_EINVAL, "every tensor is NULL: nothing to walk");
    return OC_OK;
}

/* Data to walk, unless the walk is empty (torch gives empty tensors no data). */
static oc_status check_data(const oc_iter *it, int nout, const oc_tensor *const *ts)
{
    char shape[400];
    for (int k = 0; k < it->ntensors && it->numel > 0; k++)
        if (ts[k] && !ts[k]->data)
            return fail(OC_EMETA, "%s %d %s has no data (a meta tensor: iterate in kernels; a shape "
                        "function describes its output with oc_empty_broadcast and friends)",
                        k < nout ? "output" : "tensor", k, oc_shape_str(ts[k], shape, sizeof shape));
    return OC_OK;
}

/* Outputs must have exactly the broadcast shape: writing a broadcast view
 * would store to one element many times. */
static oc_status check_outputs(const oc_iter *it, int nout, const oc_tensor *const *ts)
{
    for (int k = 0; k < nout; k++) {
        const oc_tensor *t = ts[k];
        bool same = t->ndim == it->ndim;
        for (int d = 0; same && d < t->ndim; d++) same = t->sizes[d] == it->shape[d];
        if (!same) {
            char got[400], want[400];
            oc_tensor shape_of;
            oc_tensor_init(&shape_of, NULL, t->dtype, it->ndim, it->shape);
            return fail(OC_EINVAL, "output %d has shape %s, expected the broadcast shape %s of the "
                        "tensors", k, oc_shape_str(t, got, sizeof got),
                        oc_shape_str(&shape_of, want, sizeof want));
        }
    }
    return OC_OK;
}

/* The broadcast dims of size > 1, innermost first, with each tensor's byte
 * step (0 where it broadcasts). */
static void collect_dims(const oc_iter *it, const oc_tensor *const *ts, dims *w)
{
    w->nd = 0;
    for (int r = it->ndim - 1; r >= 0; r--) {
        if (it->shape[r] == 1) continue;
        int d = w->nd++;
        w->size[d] = it->shape[r];
        for (int j = 0; j < it->oc__.nact; j++) {
            int k = it->oc__.act[j];
            const oc_tensor *t = ts[k];
            int td = r - (it->ndim - t->ndim);
            bool bcast = td < 0 || t->sizes[td] == 1;
            w->step[k][d] = bcast ? 0 : t->strides[td] * (int64_t)oc_dtype_size(t->dtype);
        }
    }
}

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

/* Should dim x be walked inside dim y? The first tensor (outputs first)
 * whose strides in x and y differ decides; broadcast (0) strides abstain. */
static bool inner_of(const oc_iter *it, const dims *w, int x, int y)
{
    for (int j = 0; j < it->oc__.nact; j++) {
        int k = it->oc__.act[j];
        int64_t sx = abs64(w->step[k][x]), sy = abs64(w->step[k][y]);
        if (sx == 0 || sy == 0 || sx == sy) continue;
        return sx < sy;
    }
    return false;
}

static void swap_dims(const oc_iter *it, dims *w, int a, int b)
{
    int64_t s = w->size[a];
    w->size[a] = w->size[b];
    w->size[b] = s;
    for (int j = 0; j < it->oc__.nact; j++) {
        int k = it->oc__.act[j];
        int64_t t = w->step[k][a];
        w->step[k][a] = w->step[k][b];
        w->step[k][b] = t;
    }
}

/* Flip dims every tensor walks backwards (or not at all), sort the dims by
 * stride (stable insertion sort: ties keep the row-major order). */
static void order_dims(oc_iter *it, dims *w, int64_t *origin)
{
    for (int d = 0; d < w->nd; d++) {
        bool any_neg = false, all_nonpos = true;
        for (int j = 0; j < it->oc__.nact; j++) {
            int64_t s = w->step[it->oc__.act[j]][d];
            any_neg |= s < 0;
            all_nonpos &= s <= 0;
        }
        if (!any_neg || !all_nonpos) continue;
        for (int j = 0; j < it->oc__.nact; j++) {
            int k = it->oc__.act[j];
            origin[k] += (w->size[d] - 1) * w->step[k][d];
            w->step[k][d] = -w->step[k][d];
        }
    }
    for (int i = 1; i < w->nd; i++)
        for (int d = i; d > 0 && inner_of(it, w, d, d - 1); d--) swap_dims(it, w, d, d - 1);
}

/* Merge each dim into the one inside it when it continues it in every tensor. */
static void coalesce(const oc_iter *it, dims *w)
{
    if (w->nd == 0) return;
    int out = 0;
    for (int d = 1; d < w->nd; d++) {
        bool merge = true;
        for (int j = 0; j < it->oc__.nact && merge; j++) {
            int k = it->oc__.act[j];
            merge = w->step[k][d] == w->step[k][out] * w->size[out];
        }
        if (merge) {
            w->size[out] *= w->size[d];
            continue;
        }
        out++;
        w->size[out] = w->size[d];
        for (int j = 0; j < it->oc__.nact; j++) {
            int k = it->oc__.act[j];
            w->step[k][out] = w->step[k][d];
        }
    }
    w->nd = out + 1;
}

/* The dim to tile with the inner one: where a tensor that is strided in the
 * inner dim is contiguous. 0: no tiling. */
static int tile_dim(const oc_iter *it, const dims *w, const int64_t *esize)
{
    if (w->nd < 2 || w->size[0] < 2 * OC_ITER_TILE_W) return 0;
    for (int j = 0; j < it->oc__.nact; j++) {
        int k = it->oc__.act[j];
        int64_t s0 = abs64(w->step[k][0]);
        if (s0 == 0 || s0 == esize[k]) continue;
        for (int d = 1; d < w->nd; d++)
            if (abs64(w->step[k][d]) == esize[k]) return w->size[d] >= 2 * OC_ITER_TILE_H ? d : 0;
    }
    return 0;
}

/* Move dim u next to the inner dim (the walk's tiles span dims 0 and 1). */
static void move_to_1(const oc_iter *it, dims *w, int u)
{
    for (int d = u; d > 1; d--) swap_dims(it, w, d, d - 1);
}

/* Lay out the walk (see the file comment), tiled or not. */
static void build_walk(oc_iter *it, const dims *w, bool tile)
{
    struct oc__iter_state *p = &it->oc__;
    p->n0 = w->size[0];
    p->n1 = w->nd > 1 ? w->size[1] : 1;
    p->tw = tile ? OC_ITER_TILE_W : p->n0;
    p->th = tile ? OC_ITER_TILE_H : p->n1;
    p->ntw = (p->n0 + p->tw - 1) / p->tw;
    p->nth = (p->n1 + p->th - 1) / p->th;
    for (int j = 0; j < p->nact; j++) {
        int k = p->act[j];
        p->step0[k] = w->step[k][0];
        p->step1[k] = w->nd > 1 ? w->step[k][1] : 0;
    }
    p->nlev = w->nd > 2 ? w->nd - 2 : 0;
    for (int l = 0; l < p->nlev; l++) {
        p->lsize[l] = w->size[l + 2];
        for (int j = 0; j < p->nact; j++) p->lstep[p->act[j]][l] = w->step[p->act[j]][l + 2];
    }
}

/* The sizes of tile (ty, tx): the last ones along each dim may be short. */
static void tile_size(struct oc__iter_state *p)
{
    p->rows = p->n1 - p->ty * p->th < p->th ? p->n1 - p->ty * p->th : p->th;
    p->cols = p->n0 - p->tx * p->tw < p->tw ? p->n0 - p->tx * p->tw : p->tw;
}

/* The current row's start, from the indices. */
static void locate(struct oc__iter_state *p)
{
    for (int j = 0; j < p->nact; j++) {
        int k = p->act[j];
        int64_t off = (p->ty * p->th + p->row) * p->step1[k] + p->tx * p->tw * p->step0[k];
        for (int l = 0; l < p->nlev; l++) off += p->idx[l] * p->lstep[k][l];
        p->curoff[k] = off;
    }
}

/* Put the walk at position `pos` (< numel). Tiles are row-major inside a
 * band, bands follow each other: a short last band or column changes how
 * many elements the tiles before a position hold, hence the two cases. */
static void seek(oc_iter *it, int64_t pos)
{
    struct oc__iter_state *p = &it->oc__;
    int64_t plane = p->n0 * p->n1, q = pos / plane, rem = pos % plane;
    for (int l = 0; l < p->nlev; l++) {
        p->idx[l] = q % p->lsize[l];
        q /= p->lsize[l];
    }
    int64_t band = p->th * p->n0, full_bands = p->n1 / p->th;
    p->ty = rem < full_bands * band ? rem / band : full_bands;
    rem -= p->ty * band;
    p->tx = 0;
    tile_size(p);
    int64_t tile = p->tw * p->rows, full_tiles = p->n0 / p->tw;
    p->tx = rem < full_tiles * tile ? rem / tile : full_tiles;
    rem -= p->tx * tile;
    tile_size(p);
    p->row = rem / p->cols;
    p->off = rem % p->cols;
    locate(p);
    p->next = pos;
}

oc_status oc_iter_init(oc_iter *it, int nout, int n, const oc_tensor *const *ts, unsigned flags)
{
    if (!it) return fail(OC_EINVAL, "the iterator is NULL");
    memset(it, 0, sizeof *it);
    if (n < 1 || n > OC_ITER_MAX_TENSORS || !ts)
        return fail(OC_EINVAL, "%d tensors given, expected 1..%d (OC_ITER_MAX_TENSORS) in an array",
                    n, OC_ITER_MAX_TENSORS);
    if (nout < 0 || nout > n) return fail(OC_EINVAL, "nout is %d, expected 0..%d (the tensors given)", nout, n);
    const unsigned known = OC_ITER_ROW_MAJOR | OC_ITER_ALLOW_OVERLAP | OC__ITER_NO_COHERENCE;
    if (flags & ~known) return fail(OC_EINVAL, "unknown flags 0x%x", flags & ~known);
    oc_status st = check_tensors(nout, n, ts);
    if (st) return st;
    int nd;
    st = oc__broadcast_shape("oc_iter_init", n, ts, &nd, it->shape);
    if (st) return st;
    it->ndim = nd;
    it->ntensors = n;
    it->nout = nout;
    st = check_outputs(it, nout, ts);
    if (st) return st;

    struct oc__iter_state *p = &it->oc__;
    int64_t esize[OC_ITER_MAX_TENSORS] = {0}, origin[OC_ITER_MAX_TENSORS] = {0};
    for (int k = 0; k < n; k++) {
        if (!ts[k]) continue;
        p->act[p->nact++] = (int8_t)k;
        p->base[k] = ts[k]->data;
        esize[k] = (int64_t)oc_dtype_size(ts[k]->dtype);
    }
    it->numel = 1;
    for (int d = 0; d < nd; d++) it->numel *= it->shape[d];
    st = check_data(it, nout, ts);
    if (st) return st;
    if (it->numel == 0) { /* nothing to walk (and no data to point at) */
        p->unit = true;
        return OC_OK;
    }

    oc_core *core = oc__core_current();
    if (core && core->ctx.mode == OC_MODE_KERNEL && core->streams && !(flags & OC__ITER_NO_COHERENCE))
        for (int j = 0; j < p->nact; j++)
            oc__coherence_check(core, ts[p->act[j]], p->act[j] < nout, NULL, "iterator");

    dims w;
    collect_dims(it, ts, &w);
    if (!(flags & OC_ITER_ALLOW_OVERLAP))
        for (int k = 0; k < nout; k++) /* outputs are never NULL: they are act[0..nout) */
            for (int d = 0; d < w.nd; d++)
                if (w.step[k][d] == 0)
                    return fail(OC_EINVAL, "output %d has stride 0 in a dim of size %lld (an expanded "
                                "view): several of its elements are one memory location; write a "
                                "contiguous tensor, or pass OC_ITER_ALLOW_OVERLAP",
                                k, (long long)w.size[d]);
    if (!(flags & OC_ITER_ROW_MAJOR)) order_dims(it, &w, origin);
    coalesce(it, &w);
    if (w.nd == 0) { /* a single element: one run of 1, stride 1 */
        w.nd = 1;
        w.size[0] = 1;
        for (int j = 0; j < p->nact; j++) w.step[p->act[j]][0] = esize[p->act[j]];
    }
    int u = (flags & OC_ITER_ROW_MAJOR) ? 0 : tile_dim(it, &w, esize);
    if (u) move_to_1(it, &w, u);
    build_walk(it, &w, u != 0);

    p->unit = true;
    for (int j = 0; j < p->nact; j++) {
        int k = p->act[j];
        p->base[k] += origin[k];
        it->stride[k] = p->step0[k] / esize[k];
        p->unit &= it->stride[k] == 1;
    }
    p->share_align = u ? p->tw * p->th : 64 / esize[p->act[0]]; /* a cache line of the first tensor */
    oc_iter_range(it, 0, it->numel);
    return OC_OK;
}

/* Move to the start of the next row: in the tile, then the next tile, the
 * next band, the next index of the outer dims. */
static void advance(struct oc__iter_state *p)
{
    if (++p->row < p->rows) {
        for (int j = 0; j < p->nact; j++) p->curoff[p->act[j]] += p->step1[p->act[j]];
        return;
    }
    p->row = 0;
    if (++p->tx == p->ntw) {
        p->tx = 0;
        if (++p->ty == p->nth) {
            p->ty = 0;
            for (int l = 0; l < p->nlev && ++p->idx[l] == p->lsize[l]; l++) p->idx[l] = 0;
        }
    }
    tile_size(p);
    locate(p);
}

bool oc_iter_next(oc_iter *it)
{
    struct oc__iter_state *p = &it->oc__;
    if (p->next >= p->hi) return false;
    int64_t len = p->cols - p->off;
    if (len > p->hi - p->next) len = p->hi - p->next;
    for (int j = 0; j < p->nact; j++) {
        int k = p->act[j];
        it->ptr[k] = p->base[k] + p->curoff[k] + p->off * p->step0[k];
    }
    it->len = len;
    it->pos = p->next;
    p->next += len;
    p->off += len;
    if (p->off == p->cols && p->next < p->hi) {
        p->off = 0;
        advance(p);
    }
    return true;
}

void oc_iter_range(oc_iter *it, int64_t lo, int64_t hi)
{
    struct oc__iter_state *p = &it->oc__;
    if (lo < 0) lo = 0;
    if (hi > it->numel) hi = it->numel;
    p->hi = hi;
    p->next = hi;
    if (lo < hi) seek(it, lo);
}

void oc_iter_part(oc_iter *it, uint32_t id, uint32_t count)
{
    int64_t lo, hi;
    if (count == 0 || id >= count) {
        oc__raise(OC_EINVAL, "oc_iter_part: part %u of %u does not exist (expected id < count)", id, count);
        oc_iter_range(it, 0, 0);
        return;
    }
    oc__split_range(it->numel, it->oc__.share_align, id, count, &lo, &hi);
    oc_iter_range(it, lo, hi);
}

void oc_iter_share(oc_iter *it) { oc_iter_part(it, oc_cpu_id(), oc_cpu_count()); }
