/* examples/tiles/rows.h — the row blocking the row-wise kernels share:
 * x seen as [rows, d] (all leading dims folded), each core a contiguous
 * share of the rows, walked in blocks sized to half this core's L2. */
#ifndef TILES_ROWS_H
#define TILES_ROWS_H
#include <opcore/kernel.h>
#include <opcore/tile.h>

typedef struct {
    int64_t d, lo, hi, rb; /* row length, this core's rows [lo, hi), rows per block */
} rows_plan;

static inline rows_plan rows_split(const oc_tensor *x, int ntiles)
{
    OC_CHECK(oc_is_contiguous(x), "x must be contiguous");
    rows_plan p = {.d = x->sizes[x->ndim - 1]};
    oc_core_range(oc_numel(x) / p.d, 1, &p.lo, &p.hi);
    int64_t fit = oc_tile_max_rows(p.d, OC_FLOAT32, ntiles, 1), want = (int64_t)oc_tile_l2_bytes() / 2 / (p.d * 4);
    p.rb = want < 1 ? 1 : want < fit ? want : fit;
    OC_CHECK(p.rb >= 1, "a row of %lld floats does not fit in the TCM", (long long)p.d);
    return p;
}

/* Rows in the block that starts at row r (0 once past this core's rows). */
static inline int64_t rows_at(const rows_plan *p, int64_t r)
{
    return r >= p->hi ? 0 : p->hi - r < p->rb ? p->hi - r : p->rb;
}

/* Contiguous x as one [rows, d] matrix. */
static inline oc_tensor rows_view2(const oc_tensor *x, int64_t d)
{
    oc_tensor v = *x;
    v.ndim = 2;
    v.sizes[0] = d ? oc_numel(x) / d : 0, v.sizes[1] = d;
    v.strides[0] = d, v.strides[1] = 1;
    return v;
}
static inline oc_tensor rows_view(const oc_tensor *x) { return rows_view2(x, x->sizes[x->ndim - 1]); }
/* ... and as one row [1, numel] (per-row statistics, weight gradients). */
static inline oc_tensor flat_view(const oc_tensor *x) { return rows_view2(x, oc_numel(x)); }

/* A weight vector of d floats as a [1, d] tile: viewed in place when it is
 * contiguous float32 (no copy into the TCM each call), else loaded. */
static inline oc_tile vec_tile(const oc_tensor *t, int64_t d)
{
    if (t->dtype == OC_FLOAT32 && oc_is_contiguous(t)) {
        oc_tensor v = flat_view(t);
        return oc_tile_of_tensor(&v, 0);
    }
    oc_tile c = oc_tile_alloc(1, d, OC_FLOAT32);
    oc_tile_load(&c, t, 0, 0, 0, 0.0f);
    return c;
}
#endif
