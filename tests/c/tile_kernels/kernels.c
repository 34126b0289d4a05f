/* Tile cases for tests/c/test_tile.c: each loads x (and y) into TCM tiles,
 * runs one tile function and stores the result into out. Cases:
 *   0        window load at (-1, 2) with pad -7, out's shape; store
 *   10 + op  binary x op y (y may be a row or a column: broadcast)
 *   20 + f   unary f(x * 0.5 + 0.25); 30 + f: the same with row bias y
 *   40 + r   reduce along rows (out rows x 1); 50 + r: down columns
 *   60       argmax rows (out int32); 61 transpose; 62 scan (x * prev + y,
 *            init 1); 63 causal affine select at offset 2, fill -1e30
 *   64       round trip: x (float32) -> tile of out's dtype -> out
 *   70 + f   matmul out += op(x) op(y) (f: OC_TILE_TRANS_* bits), out f32
 *            or int32 accumulates in place, x and y used in place
 *   74 + f   matmul_to out (any float dtype) = x op(y) (f: 0 or OC_TILE_TRANS_B)
 *   80       a TCM tile bigger than the TCM; 81 max_rows then one more
 *   82       the tile sizes: out[0..3] = l1, l2, max_rows(cols 1024, f32, 2),
 *            the TCM's capacity.
 *   90 + k   x normalized by its rows' mean and rstd, w and b the rows of y
 *            ([2, cols]): k 0 the separate binary ops, 1 oc_tile_normalize;
 *            2 and 3 the same without w and b; 4: a mean of the wrong shape.
 *   95 + k   rows' mean and variance into out's columns ([rows, 2]): k 0
 *            the separate ops (mean, x - mean, sum of squares / cols), 1
 *            oc_tile_moments; 2 oc_tile_moments of x's transpose (strided
 *            rows); 3 a var of the wrong shape. 99: column 0 the rows' sums
 *            of squares / cols, column 1 oc_tile_moments without a mean.
 *   100 + 2 v + k   rows [0, h) of x normalized by their moments into
 *            out's first cols columns, and the moments of rows [h, rows)
 *            into its last two columns: k 0 oc_tile_normalize then
 *            oc_tile_moments, 1 oc_tile_normalize_ahead; v 0: h 16, w and b
 *            the rows of y; 1: h 20; 2: h 16 without w and b. 106
 *            oc_tile_normalize of rows [0, 16), 107
 *            oc_tile_normalize_ahead with no next; 108 a next_var of the
 *            wrong shape; 124 + k: h 16, w one number (1 x 1, broadcast)
 *            and no b (the unfused path); 126 + k: h 16, w and b, no
 *            next_mean (mean(x^2) into next_var).
 *   110 + 2 v + k   f(x * 0.5 + bias) of rows [0, h) into out's first cols
 *            columns, their sums into column cols, and the reduction of rows
 *            [h, rows) into column cols + 1: k 0 oc_tile_unary_rowbias and
 *            oc_tile_reduce_rows, 1 oc_tile_activation_reduce; bias y's
 *            first column. v 0: h 16, exp, next max; 1: h 20, next sum;
 *            2: h 16, no bias, next sum of squares; 3: h 16, next min over
 *            all columns but the last (the unfused path); 4: h 16, silu, no
 *            sum, next mean; 5: h 16, exp, no next. 122 a next_red of the
 *            wrong shape, 123 a bias of the wrong shape. */
#include <opcore/kernel.h>
#include <opcore/tile.h>

static oc_tile load(const oc_tensor *t, oc_dtype dtype)
{
    oc_tile r = oc_tile_alloc(t->ndim > 1 ? t->sizes[t->ndim - 2] : 1, t->sizes[t->ndim - 1], dtype);
    oc_tile_load(&r, t, 0, 0, 0, 0.0f);
    return r;
}

static oc_tile out_tile(const oc_tensor *out, oc_dtype dtype)
{
    return oc_tile_alloc(out->ndim > 1 ? out->sizes[out->ndim - 2] : 1, out->sizes[out->ndim - 1], dtype);
}

void tcase(oc_tensor *out, const oc_tensor *x, const oc_tensor *y, int64_t which)
{
    oc_tile o = out_tile(out, which == 60 ? OC_INT32 : OC_FLOAT32);
    if (which == 0) {
        oc_tile_load(&o, x, 0, -1, 2, -7.0f);
    } else if (which >= 10 && which < 20) {
        oc_tile a = load(x, OC_FLOAT32), b = load(y, OC_FLOAT32);
        oc_tile_binary(&o, &a, &b, (oc_tile_binop)(which - 10));
    } else if (which >= 20 && which < 30) {
        oc_tile a = load(x, OC_FLOAT32);
        oc_tile_unary(&o, &a, (oc_tile_unop)(which - 20), 0.5f, 0.25f);
    } else if (which >= 30 && which < 40) {
        oc_tile a = load(x, OC_FLOAT32), b = load(y, OC_FLOAT32);
        oc_tile_unary_rowbias(&o, &a, (oc_tile_unop)(which - 30), 0.5f, &b);
    } else if (which >= 40 && which < 60) {
        oc_tile a = load(x, OC_FLOAT32);
        if (which < 50) oc_tile_reduce_rows(&o, &a, (oc_tile_redop)(which - 40));
        else oc_tile_reduce_cols(&o, &a, (oc_tile_redop)(which - 50));
    } else if (which == 60) {
        oc_tile a = load(x, OC_FLOAT32);
        oc_tile_argmax_rows(&o, &a);
    } else if (which == 61) {
        oc_tile a = load(x, OC_FLOAT32);
        oc_tile_transpose(&o, &a);
    } else if (which == 62) {
        oc_tile a = load(x, OC_FLOAT32), b = load(y, OC_FLOAT32);
        oc_tile_scan_rows(&o, &a, &b, 1.0f);
    } else if (which == 63) {
        oc_tile a = load(x, OC_FLOAT32);
        oc_tile_affine_select(&o, &a, 2, 1, -1, -1e30f);
    } else if (which == 64) {
        oc_tile_free(&o);
        o = load(x, out->dtype);
    } else if (which >= 70 && which < 74) {
        oc_tile c = oc_tile_of_tensor(out, 0), a = oc_tile_of_tensor(x, 0), b = oc_tile_of_tensor(y, 0);
        oc_tile_matmul(&c, &a, &b, (unsigned)(which - 70));
        return;
    } else if (which == 74 || which == 74 + OC_TILE_TRANS_B) {
        oc_tile c = oc_tile_of_tensor(out, 0), a = oc_tile_of_tensor(x, 0), b = oc_tile_of_tensor(y, 0);
        oc_tile_matmul_to(&c, &a, &b, (unsigned)(which - 74));
        return;
    } else if (which == 80) {
        oc_tile_alloc(1 << 20, 1024, OC_FLOAT32);
    } else if (which == 81) {
        oc_tile_free(&o);
        int64_t rows = oc_tile_max_rows(256, OC_FLOAT32, 2, 8);
        OC_CHECK(rows >= 8, "max_rows gave %lld", (long long)rows);
        oc_tile t1 = oc_tile_alloc(rows, 256, OC_FLOAT32), t2 = oc_tile_alloc(rows, 256, OC_FLOAT32);
        (void)t1, (void)t2;
        oc_tile_alloc(8 + oc_tcm_available() / 1024, 256, OC_FLOAT32); /* fails */
    } else if (which >= 90 && which < 95) {
        oc_tile a = load(x, OC_FLOAT32), wb = load(y, OC_FLOAT32);
        oc_tile m = oc_tile_alloc(a.rows, 1, OC_FLOAT32), r = oc_tile_alloc(a.rows, 1, OC_FLOAT32);
        oc_tile w = oc_tile_view(&wb, 0, 0, 1, a.cols), b = oc_tile_view(&wb, 1, 0, 1, a.cols);
        oc_tile_reduce_rows(&m, &a, OC_TILE_MEAN);
        oc_tile_reduce_rows(&r, &a, OC_TILE_SUMSQ);
        oc_tile_unary(&r, &r, OC_TILE_RSQRT, 1.0f / (float)a.cols, 1e-5f);
        bool affine = which < 92;
        if (which == 94) {
            oc_tile_normalize(&o, &a, &w, &r, NULL, NULL);
        } else if (which % 2 == 0) {
            oc_tile_binary(&o, &a, &m, OC_TILE_SUB);
            oc_tile_binary(&o, &o, &r, OC_TILE_MUL);
            if (affine) oc_tile_binary(&o, &o, &w, OC_TILE_MUL), oc_tile_binary(&o, &o, &b, OC_TILE_ADD);
        } else {
            oc_tile_normalize(&o, &a, &m, &r, affine ? &w : NULL, affine ? &b : NULL);
        }
    } else if (which == 99) {
        oc_tile a = load(x, OC_FLOAT32), n = oc_tile_alloc(1, 1, OC_FLOAT32);
        oc_tile s = oc_tile_view(&o, 0, 0, o.rows, 1), v = oc_tile_view(&o, 0, 1, o.rows, 1);
        oc_tile_fill(&n, (float)a.cols);
        oc_tile_reduce_rows(&s, &a, OC_TILE_SUMSQ);
        oc_tile_binary(&s, &s, &n, OC_TILE_DIV);
        oc_tile_moments(NULL, &v, &a);
    } else if (which >= 95 && which < 99) {
        oc_tile a = load(x, OC_FLOAT32), src = which == 97 ? oc_tile_t(&a) : a;
        oc_tile m = oc_tile_view(&o, 0, 0, o.rows, 1), v = oc_tile_view(&o, 0, 1, o.rows, 1);
        if (which == 95) {
            oc_tile t = oc_tile_alloc(a.rows, a.cols, OC_FLOAT32), n = oc_tile_alloc(1, 1, OC_FLOAT32);
            oc_tile_fill(&n, (float)a.cols);
            oc_tile_reduce_rows(&m, &a, OC_TILE_MEAN);
            oc_tile_binary(&t, &a, &m, OC_TILE_SUB);
            oc_tile_reduce_rows(&v, &t, OC_TILE_SUMSQ);
            oc_tile_binary(&v, &v, &n, OC_TILE_DIV);
        } else {
            oc_tile bad = oc_tile_view(&o, 0, 0, 1, 2);
            oc_tile_moments(&m, which == 98 ? &bad : &v, &src);
        }
    } else if ((which >= 100 && which < 109) || (which >= 124 && which < 128)) {
        oc_tile a = load(x, OC_FLOAT32), wb = load(y, OC_FLOAT32);
        int64_t h = which == 102 || which == 103 ? 20 : 16, n = a.cols;
        bool affine = which < 104 || (which >= 106 && which < 124) || which >= 126, w1 = which == 124 || which == 125;
        oc_tile w = oc_tile_view(&wb, 0, 0, 1, w1 ? 1 : n), b = oc_tile_view(&wb, 1, 0, 1, n);
        const oc_tile *wp = affine || w1 ? &w : NULL, *bp = affine ? &b : NULL;
        oc_tile first = oc_tile_view(&a, 0, 0, h, n), next = oc_tile_view(&a, h, 0, a.rows - h, n);
        oc_tile dst = oc_tile_view(&o, 0, 0, h, n), m = oc_tile_alloc(h, 1, OC_FLOAT32), r = oc_tile_alloc(h, 1, OC_FLOAT32);
        oc_tile nm = oc_tile_view(&o, 0, n, a.rows - h, 1), nv = oc_tile_view(&o, 0, n + 1, a.rows - h, 1);
        oc_tile *nmp = which >= 126 ? NULL : &nm;
        oc_tile_fill(&o, 0.0f);
        oc_tile_moments(&m, &r, &first);
        oc_tile_unary(&r, &r, OC_TILE_RSQRT, 1.0f, 1e-5f);
        if (which == 106) {
            oc_tile_normalize(&dst, &first, &m, &r, wp, bp);
        } else if (which == 107) {
            oc_tile_normalize_ahead(&dst, &first, &m, &r, wp, bp, NULL, NULL, NULL);
        } else if (which == 108) {
            oc_tile bad = oc_tile_view(&o, 0, 0, 1, 2);
            oc_tile_normalize_ahead(&dst, &first, &m, &r, wp, bp, &nm, &bad, &next);
        } else if (which % 2 == 0) {
            oc_tile_normalize(&dst, &first, &m, &r, wp, bp);
            oc_tile_moments(nmp, &nv, &next);
        } else {
            oc_tile_normalize_ahead(&dst, &first, &m, &r, wp, bp, nmp, &nv, &next);
        }
    } else if (which >= 110 && which < 124) {
        static const oc_tile_redop ops[6] = {OC_TILE_RMAX, OC_TILE_SUM, OC_TILE_SUMSQ, OC_TILE_RMIN, OC_TILE_MEAN,
                                             OC_TILE_RMAX};
        int v = which >= 122 ? 0 : (int)(which - 110) / 2, fused = which >= 122 || which % 2;
        oc_tile a = load(x, OC_FLOAT32), yt = load(y, OC_FLOAT32);
        int64_t h = v == 1 ? 20 : 16, n = a.cols, nc = v == 3 ? n - 1 : n;
        oc_tile_unop f = v == 4 ? OC_TILE_SILU : OC_TILE_EXP;
        oc_tile bias = oc_tile_view(&yt, 0, 0, which == 123 ? h + 1 : h, 1), first = oc_tile_view(&a, 0, 0, h, n);
        oc_tile next = oc_tile_view(&a, h, 0, a.rows - h, nc), dst = oc_tile_view(&o, 0, 0, h, n);
        oc_tile sum = oc_tile_view(&o, 0, n, h, 1), red = oc_tile_view(&o, 0, n + 1, which == 122 ? 1 : a.rows - h, 1);
        const oc_tile *bp = v == 2 ? NULL : &bias, *np = v == 5 ? NULL : &next;
        oc_tile *sp = v == 4 ? NULL : &sum;
        oc_tile_fill(&o, 0.0f);
        if (fused) {
            oc_tile_activation_reduce(&dst, &first, f, 0.5f, bp, sp, &red, np, ops[v]);
        } else {
            oc_tile zero = oc_tile_alloc(h, 1, OC_FLOAT32);
            oc_tile_fill(&zero, 0.0f);
            oc_tile_unary_rowbias(&dst, &first, f, 0.5f, bp ? bp : &zero);
            if (sp) oc_tile_reduce_rows(sp, &dst, OC_TILE_SUM);
            if (np) oc_tile_reduce_rows(&red, np, ops[v]);
        }
    } else if (which == 82) {
        float *p = out->data;
        p[0] = (float)oc_tile_l1_bytes();
        p[1] = (float)oc_tile_l2_bytes();
        p[2] = (float)oc_tile_max_rows(1024, OC_FLOAT32, 2, 1);
        p[3] = (float)oc_tcm_capacity();
        return;
    }
    oc_tile_store(&o, out, 0, 0, 0);
}
