/* tests/c/test_iter.c — the N-d iterator (opcore/iter.h) and broadcasting
 * (oc_broadcast_shape, oc_empty_broadcast).
 *
 * The core check is a property test: random ranks 0..5, sizes (zero
 * included), layouts (permuted, sliced, flipped = negative strides,
 * expanded = zero strides), dtypes and broadcasting; the iterator computes
 * out = a + 2b + 3c and counts its visits of every output element, and a
 * plain coordinate loop checks both. The same walks are cut into parts (1..4
 * cores' shares) and ranges. Then multicore ops built with the real build
 * tool use oc_iter_share on 1..4 engine cores.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/runner.h"

#include "core/internal.h"
#include "ops/ops_internal.h"
#include "opcore/engine.h"
#include "opcore/host.h"
#include "opcore/iter.h"
#include "support/oplib.h"

static void assert_msg(const char *needle)
{
    if (!strstr(oc_errmsg(), needle)) fail_msg("expected \"%s\" in: %s", needle, oc_errmsg());
}

/* ---- random views ---------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

typedef struct view {
    oc_tensor t;
    char *buf; /* owned allocation */
} view;

/* A view of `sizes` with a random layout: dims permuted in memory, some
 * sliced (step 2), some flipped, and (inputs only) some expanded. */
static void make_view(view *v, oc_dtype dt, int nd, const int64_t *sizes, bool allow_expand,
                      bool plain)
{
    int perm[OC_MAX_DIMS];
    for (int d = 0; d < nd; d++) perm[d] = d;
    for (int d = nd - 1; d > 0 && !plain; d--) {
        int j = (int)rnd((uint32_t)d + 1), t = perm[d];
        perm[d] = perm[j];
        perm[j] = t;
    }
    int64_t strides[OC_MAX_DIMS], span = 1, offset = 0;
    for (int j = nd - 1; j >= 0; j--) {
        int d = perm[j];
        if (!plain && allow_expand && sizes[d] > 1 && rnd(7) == 0) {
            strides[d] = 0;
            continue;
        }
        int64_t step = !plain && rnd(5) == 0 ? 2 : 1;
        strides[d] = span * step;
        span = strides[d] * (sizes[d] > 0 ? sizes[d] : 1);
    }
    for (int d = 0; d < nd && !plain; d++) {
        if (sizes[d] > 1 && strides[d] > 0 && rnd(4) == 0) {
            offset += (sizes[d] - 1) * strides[d];
            strides[d] = -strides[d];
        }
    }
    size_t es = oc_dtype_size(dt);
    v->buf = calloc((size_t)span + 1, es);
    assert_non_null(v->buf);
    assert_int_equal(oc_tensor_init_strided(&v->t, v->buf + offset * (int64_t)es, dt, nd, sizes, strides),
                     OC_OK);
}

static char *at(const oc_tensor *t, const int64_t *coord)
{
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += coord[d] * t->strides[d];
    return (char *)t->data + off * (int64_t)oc_dtype_size(t->dtype);
}

/* The element of input t seen at broadcast coordinate c (rank nd). */
static char *at_broadcast(const oc_tensor *t, int nd, const int64_t *c)
{
    int64_t tc[OC_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) tc[d] = t->sizes[d] == 1 ? 0 : c[d + nd - t->ndim];
    return at(t, tc);
}

/* Step a row-major coordinate; false after the last. */
static bool step_coord(int nd, const int64_t *sizes, int64_t *c)
{
    for (int d = nd - 1; d >= 0; d--) {
        if (++c[d] < sizes[d]) return true;
        c[d] = 0;
    }
    return false;
}

static int64_t numel_of(int nd, const int64_t *sizes)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= sizes[d];
    return n;
}

static double value_at(int k, int nd, const int64_t *c)
{
    int64_t s = 7 * k;
    for (int d = 0; d < nd; d++) s += c[d] * (d + 3);
    return (double)(s % 17 - 8); /* small integers: exact in every dtype */
}

/* ---- the property test ----------------------------------------------------- */

enum { MODE_ALL, MODE_ROW_MAJOR, MODE_PARTS, MODE_RANGE };

typedef struct scene {
    int nd, nin;
    int64_t shape[OC_MAX_DIMS];
    view out, count, in[3];
} scene;

static const oc_dtype dtypes[] = {OC_FLOAT32, OC_FLOAT64, OC_INT32, OC_INT8, OC_BFLOAT16,
                                  OC_FLOAT16, OC_INT64, OC_INT16};

/* big: two dims large enough for the walk to tile them (>= 256 x 128) */
static void scene_make(scene *s, bool big)
{
    static const int64_t small[] = {1, 2, 3, 5, 1, 2, 4, 0};
    s->nd = big ? 2 + (int)rnd(3) : (int)rnd(6);
    int b0 = big ? (int)rnd((uint32_t)s->nd) : -1, b1 = big ? (b0 + 1 + (int)rnd((uint32_t)s->nd - 1)) % s->nd : -1;
    int64_t n = 1;
    for (int d = 0; d < s->nd; d++) {
        s->shape[d] = d == b0 ? 256 + rnd(60) : d == b1 ? 128 + rnd(60) : small[rnd(rnd(9) == 0 ? 8 : 7)];
        if (big && d != b0 && d != b1) s->shape[d] = n > 1 ? 1 : 1 + rnd(2);
        n *= s->shape[d] ? s->shape[d] : 1;
    }
    s->nin = 1 + (int)rnd(3);
    oc_dtype odt = dtypes[rnd(sizeof dtypes / sizeof *dtypes)];
    make_view(&s->out, odt, s->nd, s->shape, false, false);
    make_view(&s->count, OC_INT32, s->nd, s->shape, false, rnd(2) == 0);
    for (int k = 0; k < s->nin; k++) {
        /* broadcast: a suffix of the shape, some dims forced to 1 */
        int ind = s->nd - (int)rnd((uint32_t)s->nd + 1);
        int64_t sz[OC_MAX_DIMS];
        for (int d = 0; d < ind; d++) sz[d] = rnd(3) == 0 ? 1 : s->shape[d + s->nd - ind];
        make_view(&s->in[k], dtypes[rnd(sizeof dtypes / sizeof *dtypes)], ind, sz, true, false);
        int64_t c[OC_MAX_DIMS] = {0};
        if (numel_of(ind, sz) > 0)
            do oc__store_from_double(at(&s->in[k].t, c), s->in[k].t.dtype, value_at(k, ind, c));
            while (step_coord(ind, sz, c));
    }
}

static void scene_free(scene *s)
{
    free(s->out.buf);
    free(s->count.buf);
    for (int k = 0; k < s->nin; k++) free(s->in[k].buf);
}

/* Walk `it` (already limited as wanted) applying out = a + 2b + 3c. */
static int64_t walk(oc_iter *it, const scene *s, int64_t *last_end)
{
    int64_t seen = 0;
    size_t es[5];
    const oc_tensor *ts[5] = {&s->out.t, &s->count.t, &s->in[0].t, &s->in[1].t, &s->in[2].t};
    for (int k = 0; k < 2 + s->nin; k++) es[k] = oc_dtype_size(ts[k]->dtype);
    while (oc_iter_next(it)) {
        assert_true(it->len > 0);
        if (last_end) { /* runs come in increasing, adjacent positions */
            assert_int_equal(it->pos, *last_end);
            *last_end = it->pos + it->len;
        }
        for (int64_t i = 0; i < it->len; i++) {
            double v = 0;
            for (int k = 0; k < s->nin; k++)
                v += (k + 1) * oc__load_as_double((char *)it->ptr[2 + k] + i * it->stride[2 + k] * (int64_t)es[2 + k],
                                                  ts[2 + k]->dtype);
            oc__store_from_double((char *)it->ptr[0] + i * it->stride[0] * (int64_t)es[0], ts[0]->dtype, v);
            (*(int32_t *)((char *)it->ptr[1] + i * it->stride[1] * 4))++;
        }
        seen += it->len;
    }
    return seen;
}

/* Every output element visited as often as want_count says (NULL: once
 * each; ANY_ONCE: at most once, `total` in all) and right where visited. */
static const int32_t ANY_ONCE[1];

static void check_scene(const scene *s, const int32_t *want_count, int64_t total)
{
    int64_t n = numel_of(s->nd, s->shape), c[OC_MAX_DIMS] = {0}, flat = 0, visits = 0;
    if (n == 0) return;
    do {
        int32_t got = *(int32_t *)at(&s->count.t, c);
        int32_t want = want_count == ANY_ONCE ? (got ? 1 : 0) : want_count ? want_count[flat] : 1;
        if (got != want) fail_msg("element %lld visited %d times, expected %d", (long long)flat, got, want);
        visits += got;
        if (want) {
            double v = 0;
            for (int k = 0; k < s->nin; k++)
                v += (k + 1) * oc__load_as_double(at_broadcast(&s->in[k].t, s->nd, c), s->in[k].t.dtype);
            double o = oc__load_as_double(at(&s->out.t, c), s->out.t.dtype);
            /* small integers: exact in every dtype of the test */
            if (o != v) fail_msg("element %lld: %g, expected %g", (long long)flat, o, v);
        }
        flat++;
    } while (step_coord(s->nd, s->shape, c));
    if (want_count == ANY_ONCE && visits != total)
        fail_msg("%lld elements visited, expected %lld", (long long)visits, (long long)total);
}

static void reset_count(scene *s)
{
    int64_t c[OC_MAX_DIMS] = {0};
    if (numel_of(s->nd, s->shape) == 0) return;
    do *(int32_t *)at(&s->count.t, c) = 0;
    while (step_coord(s->nd, s->shape, c));
}

static void run_scene(scene *s, int mode, unsigned flags)
{
    oc_iter it;
    const oc_tensor *ts[5] = {&s->out.t, &s->count.t, &s->in[0].t, &s->in[1].t, &s->in[2].t};
    assert_int_equal(oc_iter_init(&it, 2, 2 + s->nin, ts, flags), OC_OK);
    assert_int_equal(it.ndim, s->nd);
    assert_int_equal(it.numel, numel_of(s->nd, s->shape));
    reset_count(s);
    if (mode == MODE_ALL) {
        int64_t end = 0;
        assert_int_equal(walk(&it, s, &end), it.numel);
        check_scene(s, NULL, 0);
    } else if (mode == MODE_ROW_MAJOR) {
        /* positions are flattened indices: the output pointer must match */
        int64_t end = 0;
        while (oc_iter_next(&it)) {
            assert_int_equal(it.pos, end);
            end += it.len;
            for (int64_t i = 0; i < it.len; i += 1 + it.len / 7)
                assert_ptr_equal((char *)it.ptr[0] + i * it.stride[0] * (int64_t)oc_dtype_size(s->out.t.dtype),
                                 oc_flat_ptr(&s->out.t, it.pos + i));
        }
        assert_int_equal(end, it.numel);
        oc_iter_range(&it, 0, it.numel);
        end = 0;
        assert_int_equal(walk(&it, s, &end), it.numel);
        check_scene(s, NULL, 0);
    } else if (mode == MODE_PARTS) {
        for (uint32_t count = 1; count <= 4; count++) {
            reset_count(s);
            int64_t end = 0, total = 0;
            for (uint32_t id = 0; id < count; id++) {
                oc_iter_part(&it, id, count);
                total += walk(&it, s, &end); /* parts are adjacent, in order */
            }
            assert_int_equal(total, it.numel);
            check_scene(s, NULL, 0);
        }
    } else { /* a random range: in row-major mode exactly those flat indices */
        int64_t lo = it.numel ? rnd((uint32_t)it.numel + 1) : 0;
        int64_t hi = lo + (it.numel - lo ? rnd((uint32_t)(it.numel - lo) + 1) : 0);
        oc_iter_range(&it, lo, hi);
        int64_t end = lo;
        assert_int_equal(walk(&it, s, &end), hi - lo);
        if ((flags & OC_ITER_ROW_MAJOR) && it.numel) {
            int32_t *want = calloc((size_t)it.numel, sizeof *want);
            for (int64_t i = lo; i < hi; i++) want[i] = 1;
            check_scene(s, want, 0);
            free(want);
        } else {
            check_scene(s, ANY_ONCE, hi - lo);
        }
    }
}

static void test_random_layouts(void **state)
{
    (void)state;
    for (int trial = 0; trial < 400; trial++) {
        scene s;
        scene_make(&s, trial % 3 == 2);
        int mode = trial % 4;
        unsigned flags = (mode == MODE_ROW_MAJOR || (mode == MODE_RANGE && rnd(2))) ? OC_ITER_ROW_MAJOR : 0;
        run_scene(&s, mode, flags);
        scene_free(&s);
    }
}

/* ---- what the walk looks like ---------------------------------------------- */

static int64_t count_runs(oc_iter *it, int64_t *maxlen)
{
    int64_t runs = 0;
    *maxlen = 0;
    while (oc_iter_next(it)) {
        runs++;
        if (it->len > *maxlen) *maxlen = it->len;
    }
    return runs;
}

/* Buffers the walk-shape tests view (too big for a test's stack). */
static float big[600 * 400], small[400], outb[600 * 400];

/* out [600, 400] over outb, x [600, 400] over big, row [400] over small. */
static void init_rows(oc_tensor *out, oc_tensor *x, oc_tensor *row)
{
    oc_tensor_init(out, outb, OC_FLOAT32, 2, (int64_t[]){600, 400});
    oc_tensor_init(x, big, OC_FLOAT32, 2, (int64_t[]){600, 400});
    oc_tensor_init(row, small, OC_FLOAT32, 1, (int64_t[]){400});
}

/* ... and xt, x transposed ([600, 400] view of a [400, 600] buffer). */
static void init_transposed(oc_tensor *out, oc_tensor *xt, oc_tensor *row)
{
    oc_tensor x;
    init_rows(out, &x, row);
    oc_tensor_init_strided(xt, big, OC_FLOAT32, 2, (int64_t[]){600, 400}, (int64_t[]){1, 600});
}

/* dense tensors: one run of numel elements, contiguous */
static void test_run_dense(void **state)
{
    (void)state;
    oc_iter it;
    int64_t maxlen;
    oc_tensor out, x;
    oc_tensor_init(&out, outb, OC_FLOAT32, 3, (int64_t[]){4, 5, 6});
    oc_tensor_init(&x, big, OC_FLOAT32, 3, (int64_t[]){4, 5, 6});
    assert_int_equal(oc_iter_init(&it, 1, OC_TENSORS(&out, &x), 0), OC_OK);
    assert_true(oc_iter_contiguous(&it));
    assert_int_equal(count_runs(&it, &maxlen), 1);
    assert_int_equal(maxlen, 120);
}

/* a broadcast row: runs as long as rows, still contiguous */
static void test_run_broadcast_row(void **state)
{
    (void)state;
    oc_iter it;
    int64_t maxlen;
    oc_tensor out, x, row;
    init_rows(&out, &x, &row);
    assert_int_equal(oc_iter_init(&it, 1, OC_TENSORS(&out, &x, &row), 0), OC_OK);
    assert_true(oc_iter_contiguous(&it));
    assert_int_equal(count_runs(&it, &maxlen), 600);
    assert_int_equal(maxlen, 400);
}

/* a column broadcast along rows: stride 0 for it */
static void test_run_broadcast_column(void **state)
{
    (void)state;
    oc_iter it;
    oc_tensor out, x, row, col;
    init_rows(&out, &x, &row);
    oc_tensor_init(&col, big, OC_FLOAT32, 2, (int64_t[]){600, 1});
    assert_int_equal(oc_iter_init(&it, 1, OC_TENSORS(&out, &x, &col), 0), OC_OK);
    assert_int_equal(it.stride[2], 0);
    assert_false(oc_iter_contiguous(&it));
}

/* a transposed input: tiled, runs of one tile row (128) */
static void test_run_transposed_tiled(void **state)
{
    (void)state;
    oc_iter it;
    int64_t maxlen;
    oc_tensor out, xt, row;
    init_transposed(&out, &xt, &row);
    assert_int_equal(oc_iter_init(&it, 1, OC_TENSORS(&out, &xt, &row), 0), OC_OK);
    assert_int_equal(it.stride[0], 1);
    assert_int_equal(it.stride[1], 600);
    assert_int_equal(count_runs(&it, &maxlen), 600 * ((400 + 127) / 128));
    assert_int_equal(maxlen, 128);
}

/* ... which OC_ITER_ROW_MAJOR does not do */
static void test_run_transposed_row_major(void **state)
{
    (void)state;
    oc_iter it;
    int64_t maxlen;
    oc_tensor out, xt, row;
    init_transposed(&out, &xt, &row);
    assert_int_equal(oc_iter_init(&it, 1, OC_TENSORS(&out, &xt, &row), OC_ITER_ROW_MAJOR), OC_OK);
    assert_int_equal(count_runs(&it, &maxlen), 600);
}

/* both flipped: walked forwards, contiguous */
static void test_run_flipped(void **state)
{
    (void)state;
    oc_iter it;
    oc_tensor fo, fx;
    oc_tensor_init_strided(&fo, outb + 599, OC_FLOAT32, 1, (int64_t[]){600}, (int64_t[]){-1});
    oc_tensor_init_strided(&fx, big + 599, OC_FLOAT32, 1, (int64_t[]){600}, (int64_t[]){-1});
    assert_int_equal(oc_iter_init(&it, 1, OC_TENSORS(&fo, &fx), 0), OC_OK);
    assert_true(oc_iter_contiguous(&it));
    assert_true(oc_iter_next(&it));
    assert_ptr_equal(it.ptr[0], outb);
    assert_ptr_equal(it.ptr[1], big);
}

/* rank 0: one run of one element */
static void test_run_rank0(void **state)
{
    (void)state;
    oc_iter it;
    int64_t maxlen;
    oc_tensor s0, s1;
    oc_tensor_init(&s0, outb, OC_FLOAT32, 0, NULL);
    oc_tensor_init(&s1, big, OC_FLOAT64, 0, NULL);
    assert_int_equal(oc_iter_init(&it, 1, OC_TENSORS(&s0, &s1), 0), OC_OK);
    assert_int_equal(it.numel, 1);
    assert_int_equal(count_runs(&it, &maxlen), 1);
    assert_int_equal(maxlen, 1);
}

/* a zero-size dim: nothing to walk, so no data needed */
static void test_run_zero_size(void **state)
{
    (void)state;
    oc_iter it;
    oc_tensor z0, z1;
    oc_tensor_init(&z0, NULL, OC_FLOAT32, 3, (int64_t[]){3, 0, 2});
    oc_tensor_init(&z1, NULL, OC_INT8, 1, (int64_t[]){2});
    assert_int_equal(oc_iter_init(&it, 1, OC_TENSORS(&z0, &z1), 0), OC_OK);
    assert_int_equal(it.numel, 0);
    assert_false(oc_iter_next(&it));
    oc_iter_part(&it, 1, 3);
    assert_false(oc_iter_next(&it));
}

/* A NULL tensor (an optional argument that is None) is skipped. */
static void test_null_optional(void **state)
{
    (void)state;
    float o[6], a[6] = {1, 2, 3, 4, 5, 6};
    oc_tensor out, x;
    oc_tensor_init(&out, o, OC_FLOAT32, 2, (int64_t[]){2, 3});
    oc_tensor_init(&x, a, OC_FLOAT32, 2, (int64_t[]){2, 3});
    oc_iter it;
    assert_int_equal(oc_iter_init(&it, 1, OC_TENSORS(&out, &x, NULL), 0), OC_OK);
    assert_int_equal(it.ndim, 2);
    assert_true(oc_iter_contiguous(&it));
    int runs = 0;
    while (oc_iter_next(&it)) {
        assert_null(it.ptr[2]);
        assert_int_equal(it.stride[2], 0);
        runs++;
    }
    assert_int_equal(runs, 1);
}

/* ---- errors: each names the tensor and what was expected ------------------- */

/* What the error tests share: out and a are [4, 3], b is [3], all views of
 * one zeroed buffer. */
typedef struct {
    float buf[64];
    oc_iter it;
    oc_tensor out, a, b;
} errs;

static int errs_setup(void **state)
{
    errs *e = calloc(1, sizeof *e);
    if (!e) return -1;
    oc_tensor_init(&e->out, e->buf, OC_FLOAT32, 2, (int64_t[]){4, 3});
    oc_tensor_init(&e->a, e->buf, OC_FLOAT32, 2, (int64_t[]){4, 3});
    oc_tensor_init(&e->b, e->buf, OC_FLOAT32, 1, (int64_t[]){3});
    *state = e;
    return 0;
}

/* Frees the test's state; clears the error its checks left. */
static int clear_and_free(void **state)
{
    oc_clear_error();
    free(*state);
    return 0;
}

static void test_error_no_broadcast(void **state)
{
    errs *e = *state;
    oc_tensor_init(&e->b, e->buf, OC_FLOAT32, 1, (int64_t[]){5});
    assert_int_equal(oc_iter_init(&e->it, 1, OC_TENSORS(&e->out, &e->a, &e->b), 0), OC_EINVAL);
    assert_msg("oc_iter_init: tensor 0 of shape [4, 3] and tensor 2 of shape [5] do not broadcast: dim -1 is 3 vs 5");
}

static void test_error_output_not_broadcast_shape(void **state)
{
    errs *e = *state;
    oc_tensor_init(&e->out, e->buf, OC_FLOAT32, 1, (int64_t[]){3});
    assert_int_equal(oc_iter_init(&e->it, 1, OC_TENSORS(&e->out, &e->a, &e->b), 0), OC_EINVAL);
    assert_msg("output 0 has shape [3], expected the broadcast shape [4, 3]");
}

static void test_error_output_read_only(void **state)
{
    errs *e = *state;
    oc_tensor ro = e->a;
    ro.flags |= OC_TENSOR_READONLY;
    assert_int_equal(oc_iter_init(&e->it, 1, OC_TENSORS(&ro, &e->b), 0), OC_EINVAL);
    assert_msg("output 0 is read-only");
}

static void test_error_output_null(void **state)
{
    errs *e = *state;
    assert_int_equal(oc_iter_init(&e->it, 1, OC_TENSORS(NULL, &e->b), 0), OC_EINVAL);
    assert_msg("output 0 is NULL");
}

static void test_error_every_tensor_null(void **state)
{
    errs *e = *state;
    assert_int_equal(oc_iter_init(&e->it, 0, OC_TENSORS(NULL, NULL), 0), OC_EINVAL);
    assert_msg("every tensor is NULL");
}

static void test_error_meta_tensor(void **state)
{
    errs *e = *state;
    oc_tensor meta;
    oc_tensor_init(&meta, NULL, OC_FLOAT32, 2, (int64_t[]){4, 3});
    assert_int_equal(oc_iter_init(&e->it, 1, OC_TENSORS(&e->a, &meta), 0), OC_EMETA);
    assert_msg("tensor 1 [4, 3] has no data (a meta tensor");
}

/* out [4, 3] with stride 0 in dim 0: every row writes the same elements */
static void init_expanded(errs *e, oc_tensor *ex)
{
    oc_tensor_init_strided(ex, e->buf, OC_FLOAT32, 2, (int64_t[]){4, 3}, (int64_t[]){0, 1});
}

static void test_error_output_overlaps_itself(void **state)
{
    errs *e = *state;
    oc_tensor ex;
    init_expanded(e, &ex);
    assert_int_equal(oc_iter_init(&e->it, 1, OC_TENSORS(&ex, &e->a), 0), OC_EINVAL);
    assert_msg("output 0 has stride 0 in a dim of size 4");
}

static void test_allow_overlap_flag(void **state)
{
    errs *e = *state;
    oc_tensor ex;
    init_expanded(e, &ex);
    assert_int_equal(oc_iter_init(&e->it, 1, OC_TENSORS(&ex, &e->a), OC_ITER_ALLOW_OVERLAP), OC_OK);
}

static void test_error_too_many_tensors(void **state)
{
    errs *e = *state;
    const oc_tensor *many[OC_ITER_MAX_TENSORS + 1];
    for (int i = 0; i <= OC_ITER_MAX_TENSORS; i++) many[i] = &e->a;
    assert_int_equal(oc_iter_init(&e->it, 1, OC_ITER_MAX_TENSORS + 1, many, 0), OC_EINVAL);
    assert_msg("17 tensors given, expected 1..16");
}

static void test_error_nout_too_big(void **state)
{
    errs *e = *state;
    assert_int_equal(oc_iter_init(&e->it, 3, OC_TENSORS(&e->a, &e->b), 0), OC_EINVAL);
    assert_msg("nout is 3");
}

static void test_error_unknown_flags(void **state)
{
    errs *e = *state;
    assert_int_equal(oc_iter_init(&e->it, 1, OC_TENSORS(&e->a, &e->b), 0x80), OC_EINVAL);
    assert_msg("unknown flags");
}

static void test_error_part_out_of_range(void **state)
{
    errs *e = *state;
    assert_int_equal(oc_iter_init(&e->it, 1, OC_TENSORS(&e->a, &e->b), 0), OC_OK);
    oc_iter_part(&e->it, 2, 2);
    assert_msg("part 2 of 2 does not exist");
    assert_false(oc_iter_next(&e->it));
}

/* ---- broadcasting in shape functions --------------------------------------- */

/* a [2, 1, 4], b [3, 1], c a scalar, z [0, 1]: meta tensors */
typedef struct {
    oc_tensor a, b, c, z;
} bcast;

static int bcast_setup(void **state)
{
    bcast *t = calloc(1, sizeof *t);
    if (!t) return -1;
    oc_tensor_init(&t->a, NULL, OC_FLOAT32, 3, (int64_t[]){2, 1, 4});
    oc_tensor_init(&t->b, NULL, OC_FLOAT32, 2, (int64_t[]){3, 1});
    oc_tensor_init(&t->c, NULL, OC_FLOAT32, 0, NULL);
    oc_tensor_init(&t->z, NULL, OC_FLOAT32, 2, (int64_t[]){0, 1});
    *state = t;
    return 0;
}

static void test_broadcast_shape(void **state)
{
    bcast *t = *state;
    int nd;
    int64_t sizes[OC_MAX_DIMS];
    assert_int_equal(oc_broadcast_shape(OC_TENSORS(&t->a, &t->b, &t->c, NULL), &nd, sizes), OC_OK);
    assert_int_equal(nd, 3);
    assert_int_equal(sizes[0], 2);
    assert_int_equal(sizes[1], 3);
    assert_int_equal(sizes[2], 4);
}

static void test_broadcast_shape_of_none(void **state)
{
    (void)state;
    int nd;
    int64_t sizes[OC_MAX_DIMS];
    assert_int_equal(oc_broadcast_shape(0, NULL, &nd, sizes), OC_OK);
    assert_int_equal(nd, 0);
}

static void test_broadcast_shape_zero_size(void **state)
{
    bcast *t = *state;
    int nd;
    int64_t sizes[OC_MAX_DIMS];
    assert_int_equal(oc_broadcast_shape(OC_TENSORS(&t->z, &t->c), &nd, sizes), OC_OK);
    assert_int_equal(sizes[0], 0);
    assert_int_equal(sizes[1], 1);
}

static void test_broadcast_shape_error(void **state)
{
    bcast *t = *state;
    int nd;
    int64_t sizes[OC_MAX_DIMS];
    assert_int_equal(oc_broadcast_shape(OC_TENSORS(&t->b, &t->a, &t->z), &nd, sizes), OC_EINVAL);
    assert_msg("oc_broadcast_shape: tensor 0 of shape [3, 1] and tensor 2 of shape [0, 1] do not "
               "broadcast: dim -2 is 3 vs 0");
}

static void test_empty_broadcast(void **state)
{
    bcast *t = *state;
    oc_tensor *e = oc_empty_broadcast(OC_BFLOAT16, OC_TENSORS(&t->a, &t->b));
    assert_non_null(e);
    assert_int_equal(e->dtype, OC_BFLOAT16);
    assert_int_equal(e->ndim, 3);
    assert_int_equal(e->sizes[1], 3);
    oc_tensor_free(e);
}

static void test_empty_broadcast_error(void **state)
{
    bcast *t = *state;
    oc_tensor d;
    oc_tensor_init(&d, NULL, OC_FLOAT32, 1, (int64_t[]){5});
    assert_null(oc_empty_broadcast(OC_FLOAT32, OC_TENSORS(&t->a, &d)));
    assert_msg("oc_empty_broadcast: tensor 0 of shape [2, 1, 4] and tensor 1 of shape [5] do not broadcast: dim -1 is 4 vs 5");
}

/* ---- in real ops, on 1..4 engine cores ------------------------------------- */

static const char add_compute[] =
    "#include <opcore/kernel.h>\n"
    "oc_tensor *badd(const oc_tensor *x, const oc_tensor *y, double alpha)\n"
    "{\n"
    "    OC_CHECK(x->dtype == OC_FLOAT32 && y->dtype == OC_FLOAT32, \"float32 only\");\n"
    "    oc_tensor *out = oc_dst_tensor();\n"
    "    oc_iter it;\n"
    "    oc_iter_init(&it, 1, OC_TENSORS(out, x, y), 0);\n"
    "    oc_iter_share(&it);\n"
    "    const float a = (float)alpha;\n"
    "    while (oc_iter_next(&it)) {\n"
    "        float *o = it.ptr[0];\n"
    "        const float *p = it.ptr[1], *q = it.ptr[2];\n"
    "        int64_t n = it.len;\n"
    "        if (oc_iter_contiguous(&it))\n"
    "            for (int64_t i = 0; i < n; i++) o[i] = p[i] + a * q[i];\n"
    "        else\n"
    "            for (int64_t i = 0; i < n; i++)\n"
    "                o[i * it.stride[0]] = p[i * it.stride[1]] + a * q[i * it.stride[2]];\n"
    "    }\n"
    "    return out;\n"
    "}\n"
    "/* the iterator checks coherence like every accessor */\n"
    "oc_tensor *coh(const oc_tensor *x, const oc_tensor *y, double alpha)\n"
    "{\n"
    "    (void)alpha;\n"
    "    oc_stream *w = oc_write_stream(oc_dst_tensor());\n"
    "    OC_STREAM_WRITE(w, float, 1.0f);\n"
    "    oc_iter it;\n"
    "    oc_iter_init(&it, 1, OC_TENSORS(oc_dst_tensor(), x, y), 0);\n"
    "    return oc_dst_tensor();\n"
    "}\n";

static const char add_shape[] =
    "#include <opcore/library.h>\n"
    "static oc_tensor *badd_shape(const oc_tensor *x, const oc_tensor *y, double alpha)\n"
    "{\n"
    "    (void)alpha;\n"
    "    return oc_empty_broadcast(x->dtype, OC_TENSORS(x, y));\n"
    "}\n"
    "OC_LIBRARY(iter_ops, m) {\n"
    "    oc_def(m, \"badd(Tensor x, Tensor y, float alpha=1.0) -> Tensor\", badd_shape, \"badd\");\n"
    "    oc_def(m, \"coh(Tensor x, Tensor y, float alpha=1.0) -> Tensor\", badd_shape, \"coh\");\n"
    "}\n";

/* The built library; x transposed ([R, C] view of a [C, R] buffer), y a
 * sliced row. */
enum { R = 67, C = 301 };
static float xb[R * C], yb[2 * C];
static oc_tensor xt, y;

static int ops_setup(void **state)
{
    test_lib_options o = {.multicore = true};
    *state = test_build_and_load("iter_ops", add_compute, add_shape, o);
    for (int i = 0; i < R * C; i++) xb[i] = (float)(i % 97) - 40.0f;
    for (int i = 0; i < 2 * C; i++) yb[i] = (float)(i % 13);
    oc_tensor_init_strided(&xt, xb, OC_FLOAT32, 2, (int64_t[]){R, C}, (int64_t[]){1, R});
    oc_tensor_init_strided(&y, yb, OC_FLOAT32, 1, (int64_t[]){C}, (int64_t[]){2});
    return 0;
}

static int ops_teardown(void **state)
{
    oc_engine_shutdown();
    assert_int_equal(oc_engine_configure(0, 0), OC_OK);
    assert_int_equal(oc_library_unload(*state), OC_OK);
    oc_engine_shutdown();
    return 0;
}

static void test_multicore_shares(void **state)
{
    (void)state;
    const oc_op *op = oc_op_find("iter_ops::badd");
    assert_non_null(op);
    for (uint32_t cores = 1; cores <= 4; cores++) {
        oc_engine_shutdown();
        assert_int_equal(oc_engine_configure(cores, 0), OC_OK);
        assert_int_equal(oc_engine_num_cores(), cores);
        oc_value args[] = {oc_value_tensor(&xt), oc_value_tensor(&y), oc_value_float(0.5)};
        oc_tensor *out = NULL;
        if (oc_op_invoke(op, args, 3, &out) != OC_OK) fail_msg("%s", oc_errmsg());
        assert_int_equal(out->ndim, 2);
        for (int i = 0; i < R; i++)
            for (int j = 0; j < C; j++) {
                float want = xb[i + j * R] + 0.5f * yb[2 * j];
                float got = ((float *)out->data)[i * C + j];
                if (got != want) fail_msg("%u cores: [%d, %d] = %g, expected %g", cores, i, j, got, want);
            }
        oc_tensor_free(out);
    }
}

/* the shape function's broadcast error names both shapes */
static void test_shape_fn_broadcast_error(void **state)
{
    (void)state;
    const oc_op *op = oc_op_find("iter_ops::badd");
    assert_non_null(op);
    oc_tensor bad;
    oc_tensor_init(&bad, yb, OC_FLOAT32, 1, (int64_t[]){7});
    oc_value args[] = {oc_value_tensor(&xt), oc_value_tensor(&bad), oc_value_float(1)};
    oc_tensor *out = NULL;
    assert_int_not_equal(oc_op_invoke(op, args, 3, &out), OC_OK);
    assert_msg("shape function 'badd_shape'");
    assert_msg("tensor 0 of shape [67, 301] and tensor 1 of shape [7] do not broadcast");
}

/* an open write stream on the output: the iterator refuses, as accessors do */
static void test_open_write_stream_refused(void **state)
{
    (void)state;
    oc_tensor *out = NULL;
    const oc_op *coh = oc_op_find("iter_ops::coh");
    assert_non_null(coh);
    oc_value cargs[] = {oc_value_tensor(&xt), oc_value_tensor(&y), oc_value_float(1)};
    assert_int_equal(oc_op_invoke(coh, cargs, 3, &out), OC_ECOHERENCE);
    assert_msg("iterator overlaps an open write stream");
}

#define ERR(fn) cmocka_unit_test_setup_teardown(fn, errs_setup, clear_and_free)
#define BCAST(fn) cmocka_unit_test_setup_teardown(fn, bcast_setup, clear_and_free)
#define OPS(fn) cmocka_unit_test_setup_teardown(fn, ops_setup, ops_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_layouts),
        cmocka_unit_test(test_run_dense),
        cmocka_unit_test(test_run_broadcast_row),
        cmocka_unit_test(test_run_broadcast_column),
        cmocka_unit_test(test_run_transposed_tiled),
        cmocka_unit_test(test_run_transposed_row_major),
        cmocka_unit_test(test_run_flipped),
        cmocka_unit_test(test_run_rank0),
        cmocka_unit_test(test_run_zero_size),
        cmocka_unit_test(test_null_optional),
        ERR(test_error_no_broadcast),
        ERR(test_error_output_not_broadcast_shape),
        ERR(test_error_output_read_only),
        ERR(test_error_output_null),
        ERR(test_error_every_tensor_null),
        ERR(test_error_meta_tensor),
        ERR(test_error_output_overlaps_itself),
        ERR(test_allow_overlap_flag),
        ERR(test_error_too_many_tensors),
        ERR(test_error_nout_too_big),
        ERR(test_error_unknown_flags),
        ERR(test_error_part_out_of_range),
        BCAST(test_broadcast_shape),
        cmocka_unit_test(test_broadcast_shape_of_none),
        BCAST(test_broadcast_shape_zero_size),
        BCAST(test_broadcast_shape_error),
        BCAST(test_empty_broadcast),
        BCAST(test_empty_broadcast_error),
        OPS(test_multicore_shares),
        OPS(test_shape_fn_broadcast_error),
        OPS(test_open_write_stream_refused),
    };
    return oc_test_run("iter", tests, NULL, NULL);
}
