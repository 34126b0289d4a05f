/* src/profiler/xspace_read.c — oc_profiler_import_xspace(): the host-thread
 * spans of another profiler's XSpace (jax.profiler's .xplane.pb), imported
 * into the running profile.
 *
 * A small reader of the protobuf wire format (oc__pb_next; see xplane.c
 * for the messages). Of the XSpace it reads the "/host:CPU" plane (its lines,
 * events, event and stat metadata) and the "Task Environment" plane's
 * "profile_start_time": tsl's profiler stores line timestamps relative to
 * that start (NormalizeTimestamps), on CLOCK_REALTIME.
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "opcore/profiler.h"
#include "opcore/status.h"
#include "profiler/prof.h"

static bool rd_varint(oc__pbr *b, uint64_t *v)
{
    *v = 0;
    for (int s = 0; s < 64 && b->p < b->end; s += 7) {
        uint8_t c = *b->p++;
        *v |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80)) return true;
    }
    return false;
}

bool oc__pb_next(oc__pbr *b, unsigned *field, unsigned *wt, uint64_t *v, oc__pbr *sub, bool *bad)
{
    if (b->p >= b->end) return false;
    uint64_t tag;
    if (!rd_varint(b, &tag)) goto fail;
    *field = (unsigned)(tag >> 3);
    *wt = (unsigned)(tag & 7);
    sub->p = sub->end = NULL;
    switch (*wt) {
    case OC__PB_VARINT:
        if (!rd_varint(b, v)) goto fail;
        return true;
    case OC__PB_LEN:
        if (!rd_varint(b, v) || *v > (uint64_t)(b->end - b->p)) goto fail;
        sub->p = b->p;
        sub->end = b->p + *v;
        b->p += *v;
        return true;
    case OC__PB_I64:
        if (b->end - b->p < 8) goto fail;
        memcpy(v, b->p, 8);
        b->p += 8;
        return true;
    case OC__PB_I32:
        if (b->end - b->p < 4) goto fail;
        b->p += 4;
        *v = 0;
        return true;
    default:
        break;
    }
fail:
    *bad = true;
    return false;
}

/* The next field of `b` (oc__pb_next without the wire type). */
static bool rd_next(oc__pbr *b, unsigned *field, uint64_t *v, oc__pbr *sub, bool *bad)
{
    unsigned wt;
    return oc__pb_next(b, field, &wt, v, sub, bad);
}

static bool rd_eq(const oc__pbr *s, const char *str)
{
    return s->p && (size_t)(s->end - s->p) == strlen(str) && !memcmp(s->p, str, strlen(str));
}

static char *rd_dup(const oc__pbr *s)
{
    size_t n = s->p ? (size_t)(s->end - s->p) : 0;
    char *c = oc__malloc(n + 1);
    if (c) {
        if (n) memcpy(c, s->p, n);
        c[n] = 0;
    }
    return c;
}

typedef struct emd {
    int64_t id;
    char *name;
} emd;

typedef struct reader {
    emd *md;
    size_t nmd, capmd;
    int64_t op_stats[4];  /* stat metadata ids of "hlo_op" / "tf_op" */
    int nop_stats;
    oc_profiler_span *sp;
    char **threads;
    size_t nsp, capsp, nthreads, capthreads;
    bool bad, oom;
} reader;

static int cmp_emd(const void *x, const void *y)
{
    int64_t a = ((const emd *)x)->id, b = ((const emd *)y)->id;
    return a < b ? -1 : a > b;
}

static const char *md_name(const reader *r, int64_t id)
{
    size_t lo = 0, hi = r->nmd;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->md[mid].id == id) return r->md[mid].name;
        if (r->md[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static bool push_md(reader *r, int64_t id, const oc__pbr *name)
{
    emd *p = oc__pgrow(r->md, &r->capmd, r->nmd + 1, sizeof *p, 256);
    if (!p) return !(r->oom = true);
    r->md = p;
    char *c = rd_dup(name);
    if (!c) return !(r->oom = true);
    r->md[r->nmd].id = id;
    r->md[r->nmd++].name = c;
    return true;
}

/* A plane's event metadata names (display name if it has one) and the ids
 * of its stats that mark an operator. */
static void read_metadata(reader *r, oc__pbr plane)
{
    unsigned f;
    uint64_t v;
    oc__pbr entry;
    while (!r->oom && rd_next(&plane, &f, &v, &entry, &r->bad)) {
        if ((f != 4 && f != 5) || !entry.p) continue;
        unsigned map = f;
        oc__pbr val = {0, 0}, x;
        while (rd_next(&entry, &f, &v, &x, &r->bad))
            if (f == 2 && x.p) val = x;
        int64_t id = 0;
        oc__pbr name = {0, 0}, display = {0, 0};
        while (val.p && rd_next(&val, &f, &v, &x, &r->bad)) {
            if (f == 1) id = (int64_t)v;
            else if (f == 2 && x.p) name = x;
            else if (f == 4 && x.p) display = x;
        }
        if (map == 4) {
            (void)push_md(r, id, display.p && display.end > display.p ? &display : &name);
        } else if ((rd_eq(&name, "hlo_op") || rd_eq(&name, "tf_op")) && r->nop_stats < 4) {
            r->op_stats[r->nop_stats++] = id;
        }
    }
    qsort(r->md, r->nmd, sizeof *r->md, cmp_emd);
}

static bool push_span(reader *r, const oc_profiler_span *s)
{
    oc_profiler_span *p = oc__pgrow(r->sp, &r->capsp, r->nsp + 1, sizeof *p, 1024);
    if (!p) return !(r->oom = true);
    r->sp = p;
    r->sp[r->nsp++] = *s;
    return true;
}

static void read_lines(reader *r, oc__pbr plane, int64_t start_ns)
{
    unsigned f;
    uint64_t v;
    oc__pbr line;
    while (!r->oom && rd_next(&plane, &f, &v, &line, &r->bad)) {
        if (f != 3 || !line.p) continue;
        int64_t id = 0, ts = 0;
        oc__pbr name = {0, 0}, display = {0, 0}, x, l = line;
        while (rd_next(&l, &f, &v, &x, &r->bad)) {
            if (f == 1) id = (int64_t)v;
            else if (f == 3) ts = (int64_t)v;
            else if (f == 2 && x.p) name = x;
            else if (f == 11 && x.p) display = x;
        }
        /* tsl stores line times relative to the profile start */
        if (start_ns > 0 && ts < start_ns) ts += start_ns;
        char **th = oc__pgrow(r->threads, &r->capthreads, r->nthreads + 1, sizeof *th, 16);
        if (!th) { r->oom = true; return; }
        r->threads = th;
        if (!(th[r->nthreads] = rd_dup(display.p && display.end > display.p ? &display : &name))) {
            r->oom = true;
            return;
        }
        const char *thread = th[r->nthreads++];
        l = line;
        while (!r->oom && rd_next(&l, &f, &v, &x, &r->bad)) {
            if (f != 4 || !x.p) continue;
            int64_t md = 0, off = 0, dur = 0;
            bool op = false;
            oc__pbr e = x, y;
            while (rd_next(&e, &f, &v, &y, &r->bad)) {
                if (f == 1) md = (int64_t)v;
                else if (f == 2) off = (int64_t)v;
                else if (f == 3) dur = (int64_t)v;
                else if (f == 4 && y.p) {
                    oc__pbr st = y, z;
                    while (rd_next(&st, &f, &v, &z, &r->bad))
                        if (f == 1)
                            for (int k = 0; k < r->nop_stats; k++) op |= (int64_t)v == r->op_stats[k];
                }
            }
            const char *nm = md_name(r, md);
            if (!nm || dur < 0 || off < 0) continue;
            oc_profiler_span s = {.name = nm, .category = NULL, .thread = thread, .tid = id,
                                  .t0_ns = ts + off / 1000, .t1_ns = ts + (off + dur) / 1000, .op = op};
            (void)push_span(r, &s);
        }
    }
}

/* "profile_start_time" of the "Task Environment" plane, or 0. */
static int64_t read_start(reader *r, oc__pbr plane)
{
    unsigned f;
    uint64_t v;
    oc__pbr sub, x, q = plane;
    int64_t want = -1, start = 0;
    while (rd_next(&q, &f, &v, &sub, &r->bad)) {
        if (f != 5 || !sub.p) continue;
        oc__pbr val = {0, 0};
        while (rd_next(&sub, &f, &v, &x, &r->bad))
            if (f == 2 && x.p) val = x;
        int64_t id = 0;
        bool is = false;
        while (val.p && rd_next(&val, &f, &v, &x, &r->bad)) {
            if (f == 1) id = (int64_t)v;
            else if (f == 2) is = rd_eq(&x, "profile_start_time");
        }
        if (is) want = id;
    }
    q = plane;
    while (want >= 0 && rd_next(&q, &f, &v, &sub, &r->bad)) {
        if (f != 6 || !sub.p) continue;
        int64_t id = -2, val = 0;
        while (rd_next(&sub, &f, &v, &x, &r->bad)) {
            if (f == 1) id = (int64_t)v;
            else if (f == 3 || f == 4) val = (int64_t)v;
        }
        if (id == want) start = val;
    }
    return start;
}

oc_status oc_profiler_import_xspace(const char *source, const void *data, size_t len)
{
    if (!data && len) return oc_set_error(OC_EINVAL, "oc_profiler_import_xspace: argument 'data' is NULL");
    reader r = {0};
    oc__pbr space = {data, (const uint8_t *)data + len}, plane, x, host = {0, 0};
    unsigned f;
    uint64_t v;
    int64_t start = 0;
    bool any = false;
    while (rd_next(&space, &f, &v, &plane, &r.bad)) {
        if (f != 1 || !plane.p) continue;
        any = true;
        oc__pbr q = plane;
        while (rd_next(&q, &f, &v, &x, &r.bad)) {
            if (f != 2) continue;
            if (rd_eq(&x, "/host:CPU")) host = plane;
            else if (rd_eq(&x, "Task Environment")) start = read_start(&r, plane);
        }
    }
    oc_status st = OC_OK;
    if (r.bad || (len && !any)) {
        st = oc_set_error(OC_EINVAL, "oc_profiler_import_xspace: the %zu bytes from '%s' are not an XSpace "
                          "(malformed protobuf)", len, source ? source : "?");
    } else if (host.p) {
        read_metadata(&r, host);
        if (!r.oom) read_lines(&r, host, start);
        if (r.oom) st = oc_set_error(OC_ENOMEM, "oc_profiler_import_xspace: out of memory");
        else if (r.bad) st = oc_set_error(OC_EINVAL, "oc_profiler_import_xspace: malformed XSpace from '%s'",
                                          source ? source : "?");
        else st = oc_profiler_import(source, OC_PROFILER_CLOCK_REALTIME, r.sp, r.nsp);
    }
    for (size_t i = 0; i < r.nmd; i++) oc__free(r.md[i].name);
    for (size_t i = 0; i < r.nthreads; i++) oc__free(r.threads[i]);
    oc__free(r.md);
    oc__free(r.threads);
    oc__free(r.sp);
    return st;
}
