/* src/profiler/xplane.c — XSpace protobuf for TensorBoard's profile plugin.
 *
 * The wire format is written by hand (varints and length-delimited fields)
 * following tsl/profiler/protobuf/xplane.proto:
 *
 *   XSpace         { planes = 1; hostnames = 4 }
 *   XPlane         { id = 1; name = 2; lines = 3; event_metadata = 4 (map);
 *                    stat_metadata = 5 (map); stats = 6 }
 *   XLine          { id = 1; name = 2; timestamp_ns = 3; events = 4;
 *                    duration_ps = 9; display_id = 10; display_name = 11 }
 *   XEvent         { metadata_id = 1; offset_ps = 2; duration_ps = 3; stats = 4 }
 *   XStat          { metadata_id = 1; double = 2; uint64 = 3; int64 = 4; str = 5 }
 *   XEventMetadata { id = 1; name = 2; display_name = 4 }
 *   XStatMetadata  { id = 1; name = 2; description = 3 }
 *   map entries    { key = 1; value = 2 }
 *
 * Planes: "/host:CPU" (xprof's host-threads plane) has a "Steps" line and
 * one line per host thread; "/device:CUSTOM:0" is the opcore engine, one
 * line per core ("core 0".. in order). xprof's trace viewer shows host
 * threads and then the first of the GPU, TPU or CUSTOM device planes, so
 * the engine is a CUSTOM device.
 */
#include <stdlib.h>
#include <string.h>

#include "opcore/status.h"
#include "profiler/prof.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };

enum {
    ST_BYTES_IN = 1, ST_BYTES_OUT, ST_TCM, ST_STREAM, ST_CORE, ST_NCORES, ST_KIND, ST_STEP,
    ST_COUNT_ = ST_STEP
};
static const char *const stat_names[] = {
    "", "bytes_in", "bytes_out", "tcm_bytes", "stream_bytes", "core", "ncores", "kind", "step_num"};
static const char *const stat_desc[] = {
    "", "bytes of the op's inputs read by this core", "bytes of the output written by this core",
    "bytes moved between tensors and TCM", "bytes moved by streaming accessors",
    "engine core", "cores running the op", "event kind", "step number"};

static void pb_varint(oc__pw *s, uint64_t v)
{
    unsigned char b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (unsigned char)v;
    oc__pw_put(s, b, n);
}

static void pb_tag(oc__pw *s, unsigned field, unsigned wt)
{
    pb_varint(s, ((uint64_t)field << 3) | wt);
}

static void pb_int(oc__pw *s, unsigned field, int64_t v)
{
    if (!v) return;  /* proto3 default */
    pb_tag(s, field, WT_VARINT);
    pb_varint(s, (uint64_t)v);
}

static void pb_uint(oc__pw *s, unsigned field, uint64_t v)
{
    pb_tag(s, field, WT_VARINT);
    pb_varint(s, v);
}

static void pb_str(oc__pw *s, unsigned field, const char *str)
{
    size_t n = strlen(str);
    pb_tag(s, field, WT_LEN);
    pb_varint(s, n);
    oc__pw_put(s, str, n);
}

/* Open a length-delimited submessage; returns where its body starts. */
static size_t pb_open(oc__pw *s, unsigned field)
{
    pb_tag(s, field, WT_LEN);
    return s->buf.len;
}

/* Close it: insert the body's length (varint) before the body. */
static void pb_close(oc__pw *s, size_t start)
{
    if (s->failed) return;
    size_t len = s->buf.len - start;
    unsigned char b[10];
    size_t k = 0;
    uint64_t v = len;
    while (v >= 0x80) {
        b[k++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    b[k++] = (unsigned char)v;
    oc__pw_put(s, b, k);  /* grow by k */
    if (s->failed) return;
    memmove(s->buf.s + start + k, s->buf.s + start, len);
    memcpy(s->buf.s + start, b, k);
}

static void stat_u(oc__pw *s, unsigned id, uint64_t v)
{
    size_t m = pb_open(s, 4);
    pb_int(s, 1, id);
    pb_uint(s, 3, v);
    pb_close(s, m);
}

static void stat_i(oc__pw *s, unsigned id, int64_t v)
{
    size_t m = pb_open(s, 4);
    pb_int(s, 1, id);
    pb_tag(s, 4, WT_VARINT);
    pb_varint(s, (uint64_t)v);
    pb_close(s, m);
}

static void stat_str(oc__pw *s, unsigned id, const char *v)
{
    size_t m = pb_open(s, 4);
    pb_int(s, 1, id);
    pb_str(s, 5, v);
    pb_close(s, m);
}

typedef struct plane_ctx {
    const oc__pdata *d;
    bool *used;          /* [nnames]: event metadata needed */
    int64_t *step_ids;   /* metadata ids of step names */
} plane_ctx;

static void event(oc__pw *s, plane_ctx *pc, const oc__pev *e, int64_t md)
{
    const oc__pdata *d = pc->d;
    size_t m = pb_open(s, 4);
    pb_int(s, 1, md);
    pb_tag(s, 2, WT_VARINT);  /* offset_ps, always present (oneof) */
    pb_varint(s, (e->t0 - d->start_ns) * 1000u);
    pb_int(s, 3, (int64_t)((e->t1 - e->t0) * 1000u));
    if (e->kind == OC_PROF_KERNEL) {
        stat_u(s, ST_BYTES_IN, e->a);
        stat_u(s, ST_BYTES_OUT, e->b);
        stat_u(s, ST_TCM, e->c);
        stat_u(s, ST_STREAM, e->d);
        stat_u(s, ST_CORE, e->core);
        stat_u(s, ST_NCORES, e->ncores);
    } else if (e->kind == OC_PROF_STEP) {
        stat_i(s, ST_STEP, (int64_t)e->a);
    } else {
        stat_str(s, ST_KIND, oc__pkind_name(e->kind));
    }
    pb_close(s, m);
}

static void line_head(oc__pw *s, const oc__pdata *d, int64_t id, int64_t display_id, const char *name)
{
    pb_int(s, 1, id);
    pb_str(s, 2, name);
    pb_int(s, 3, (int64_t)d->start_ns + d->real_offset_ns);
    pb_int(s, 9, (int64_t)((d->end_ns - d->start_ns) * 1000u));
    pb_int(s, 10, display_id);
    pb_str(s, 11, name);
}

static void metadata(oc__pw *s, plane_ctx *pc, bool with_steps)
{
    const oc__pdata *d = pc->d;
    for (uint32_t i = 0; i < d->nnames; i++) {
        if (!pc->used[i]) continue;
        size_t m = pb_open(s, 4);
        pb_int(s, 1, (int64_t)i + 1);
        size_t v = pb_open(s, 2);
        pb_int(s, 1, (int64_t)i + 1);
        pb_str(s, 2, d->names[i]);
        pb_str(s, 4, d->names[i]);
        pb_close(s, v);
        pb_close(s, m);
    }
    if (with_steps) {
        for (size_t i = 0; i < d->steps.n; i++) {
            char nm[48];
            snprintf(nm, sizeof nm, "step %lld", (long long)d->steps.ev[i].a);
            size_t m = pb_open(s, 4);
            pb_int(s, 1, pc->step_ids[i]);
            size_t v = pb_open(s, 2);
            pb_int(s, 1, pc->step_ids[i]);
            pb_str(s, 2, nm);
            pb_str(s, 4, nm);
            pb_close(s, v);
            pb_close(s, m);
        }
    }
    for (unsigned i = 1; i <= ST_COUNT_; i++) {
        size_t m = pb_open(s, 5);
        pb_int(s, 1, i);
        size_t v = pb_open(s, 2);
        pb_int(s, 1, i);
        pb_str(s, 2, stat_names[i]);
        pb_str(s, 3, stat_desc[i]);
        pb_close(s, v);
        pb_close(s, m);
    }
}

oc_status oc__pexport_xplane(const oc__pdata *d, const char *path)
{
    oc__pw s = {0};
    plane_ctx pc = {d, calloc(d->nnames ? d->nnames : 1, sizeof(bool)),
                    calloc(d->steps.n ? d->steps.n : 1, sizeof(int64_t))};
    if (!pc.used || !pc.step_ids) {
        free(pc.used);
        free(pc.step_ids);
        return oc_set_error(OC_ENOMEM, "oc_profiler_stop: out of memory writing '%s'", path);
    }
    for (size_t i = 0; i < d->steps.n; i++) pc.step_ids[i] = (int64_t)d->nnames + 1 + (int64_t)i;

    /* plane 0: host threads */
    size_t plane = pb_open(&s, 1);
    pb_int(&s, 1, 0);
    pb_str(&s, 2, "/host:CPU");
    if (d->steps.n) {
        size_t ln = pb_open(&s, 3);
        line_head(&s, d, 0, 0, "Steps");
        for (size_t i = 0; i < d->steps.n; i++) event(&s, &pc, &d->steps.ev[i], pc.step_ids[i]);
        pb_close(&s, ln);
    }
    for (uint32_t h = 0; h < d->nhost; h++) {
        const oc__ptrack *t = &d->host[h];
        size_t ln = pb_open(&s, 3);
        line_head(&s, d, t->tid, (int64_t)h + 1, t->name);
        for (size_t i = 0; i < t->n; i++) {
            const oc__pev *e = &t->ev[i];
            if (e->kind == OC_PROF_STEP) continue;  /* on the Steps line */
            pc.used[e->name] = true;
            event(&s, &pc, e, (int64_t)e->name + 1);
        }
        pb_close(&s, ln);
    }
    metadata(&s, &pc, true);
    pb_close(&s, plane);

    /* plane 1: the engine */
    if (d->ncores) {
        memset(pc.used, 0, d->nnames * sizeof(bool));
        plane = pb_open(&s, 1);
        pb_int(&s, 1, 1);
        pb_str(&s, 2, "/device:CUSTOM:0");
        for (uint32_t c = 0; c < d->ncores; c++) {
            const oc__ptrack *t = &d->cores[c];
            int nl = 1;
            uint8_t *lanes = oc__plane_assign(t, &nl);
            if (!lanes) {
                s.failed = true;
                break;
            }
            for (int l = 0; l < nl; l++) {
                char nm[80];
                if (l) snprintf(nm, sizeof nm, "%s #%d", t->name, l + 1);
                else snprintf(nm, sizeof nm, "%s", t->name);
                size_t ln = pb_open(&s, 3);
                int64_t id = (int64_t)c + (int64_t)l * 100000;
                line_head(&s, d, id, (int64_t)c * OC__PMAX_LANES + l, nm);
                for (size_t i = 0; i < t->n; i++) {
                    if (lanes[i] != l) continue;
                    pc.used[t->ev[i].name] = true;
                    event(&s, &pc, &t->ev[i], (int64_t)t->ev[i].name + 1);
                }
                pb_close(&s, ln);
            }
            free(lanes);
        }
        metadata(&s, &pc, false);
        pb_close(&s, plane);
    }
    pb_str(&s, 4, d->hostname);

    free(pc.used);
    free(pc.step_ids);
    bool failed = s.failed || s.buf.oom;
    if (!failed) {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(s.buf.s, 1, s.buf.len, f) != s.buf.len) failed = true;
        if (f && fclose(f) != 0) failed = true;
    }
    oc__pw_free(&s);
    if (failed) return oc_set_error(OC_EIO, "oc_profiler_stop: writing '%s' failed", path);
    return OC_OK;
}
