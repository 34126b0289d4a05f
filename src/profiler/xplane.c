/* src/profiler/xplane.c — XSpace protobuf for TensorBoard's profile plugin
 * (xprof), written so that its tools fill in, not only the trace viewer.
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
 *   XStat          { metadata_id = 1; double = 2; uint64 = 3; int64 = 4;
 *                    str = 5; ref = 7 (the name of a stat metadata) }
 *   XEventMetadata { id = 1; name = 2; display_name = 4 }
 *   XStatMetadata  { id = 1; name = 2; description = 3 }
 *   map entries    { key = 1; value = 2 }
 *
 * What xprof reads (xprof/convert: xplane_to_op_stats, xplane_to_step_events,
 * xplane_to_op_metrics_db; tsl/profiler/utils: xplane_schema, tf_op_utils):
 *
 * - Op-level tools (op_profile, the device half of framework_op_stats, the
 *   step breakdown) read only GPU or TPU planes; a CPU-only XSpace gets no
 *   op profile at all. So the engine is the plane "/device:GPU:0" (its
 *   "gpu_device_name" says what it really is): one line per engine core,
 *   each kernel an event whose metadata is named "core N" and displayed as
 *   the op's name, with stat "tf_op" = "<op path>:<type>" (how xprof files
 *   a non-XLA op: op_profile shows op type -> op -> one entry per core),
 *   "group_id" = its step and "correlation_id" (a device event needs both
 *   to count as step time), and opcore's byte counters. The plane's stats
 *   "core_count" and "memory_bandwidth" give xprof the machine's peak.
 * - Steps: xprof groups events into steps by the "group_id" stat; an
 *   XSpace that has one is taken as grouped already, so its own grouping
 *   (which needs TensorFlow's root events) is skipped. Every event in
 *   step i (from its step marker to the next) gets group_id i, and each
 *   plane has a "Steps" line: on the device plane with xprof's line id for
 *   step info (0xdeadbeef) — the device step markers —, on "/host:CPU" with
 *   a "step_name" stat on each step — the host step markers.
 * - Host ops: events of "/host:CPU" with a "tf_op" stat are the host half of
 *   framework_op_stats (self time = time not spent in a nested op): opcore's
 *   op calls and imported operators (PyTorch's aten ops).
 *
 * "tf_op" values are parsed by tsl's ParseTfOpFullname ("name:type"; name
 * [A-Za-z0-9.][A-Za-z0-9_./>-]*, type a TF type [A-Z_]\w* or a JAX type
 * [a-z_][a-z0-9_]*, or empty: derived from the name), so "my_ops::relu"
 * becomes "my_ops/relu:relu".
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "opcore/status.h"
#include "profiler/prof.h"

#define ENGINE_PLANE "/device:GPU:0 (opcore engine)"
#define STEP_INFO_LINE_ID ((int64_t)(int32_t)0xdeadbeefu) /* tsl kThreadIdStepInfo: an int */
#define KIND_REF0 100                   /* stat metadata ids of kind names */
#define NAME_REF0 1000                  /* ... of tf_op strings (2i) and names (2i+1) */

enum {
    ST_BYTES_IN = 1, ST_BYTES_OUT, ST_TCM, ST_STREAM, ST_CORE, ST_NCORES, ST_KIND, ST_STEP_NUM,
    ST_GROUP_ID, ST_STEP_NAME, ST_TF_OP, ST_CORRELATION_ID, ST_SOURCE, ST_CATEGORY, ST_CORE_COUNT,
    ST_MEMBW, ST_DEVICE_NAME, ST_COUNT_ = ST_DEVICE_NAME
};
static const char *const stat_names[] = {
    "", "bytes_in", "bytes_out", "tcm_bytes", "stream_bytes", "core", "ncores", "kind", "step_num",
    "group_id", "step_name", "tf_op", "correlation_id", "source", "category", "core_count",
    "memory_bandwidth", "gpu_device_name"};
static const char *const stat_desc[] = {
    "", "bytes of the op's inputs read by this core", "bytes of the output written by this core",
    "bytes moved between tensors and TCM", "bytes moved by streaming accessors", "engine core",
    "cores running the op", "event kind", "step number", "step (index of the step marker)", "step name",
    "op path:type", "id of the kernel", "profiler the span came from", "category in that profiler",
    "engine cores", "memory bandwidth, bytes/s", "what the device is"};

/* ---- wire format -------------------------------------------------------- */

/* `v` as a varint into b[10]; its length. */
static size_t varint(unsigned char *b, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (unsigned char)v;
    return n;
}

static void pb_varint(oc__pw *s, uint64_t v)
{
    unsigned char b[10];
    oc__pw_put(s, b, varint(b, v));
}

static void pb_tag(oc__pw *s, unsigned field, unsigned wt)
{
    pb_varint(s, ((uint64_t)field << 3) | wt);
}

static void pb_int(oc__pw *s, unsigned field, int64_t v)
{
    if (!v) return;  /* proto3 default */
    pb_tag(s, field, OC__PB_VARINT);
    pb_varint(s, (uint64_t)v);
}

static void pb_str(oc__pw *s, unsigned field, const char *str)
{
    size_t n = strlen(str);
    pb_tag(s, field, OC__PB_LEN);
    pb_varint(s, n);
    oc__pw_put(s, str, n);
}

/* Open a length-delimited submessage; returns where its body starts. */
static size_t pb_open(oc__pw *s, unsigned field)
{
    pb_tag(s, field, OC__PB_LEN);
    return s->buf.len;
}

/* Close it: insert the body's length (varint) before the body. */
static void pb_close(oc__pw *s, size_t start)
{
    if (s->failed || s->buf.oom) return;
    size_t len = s->buf.len - start;
    unsigned char b[10];
    size_t k = varint(b, len);
    oc__pw_put(s, b, k);  /* grow by k */
    if (s->failed || s->buf.oom) return;
    memmove(s->buf.s + start + k, s->buf.s + start, len);
    memcpy(s->buf.s + start, b, k);
}

/* XStat values are a oneof: always written, even when 0. `field` 4 is
 * `stats` of XEvent and 6 of XPlane. */
static void stat_val(oc__pw *s, unsigned field, unsigned id, unsigned vfield, uint64_t v)
{
    size_t m = pb_open(s, field);
    pb_int(s, 1, id);
    pb_tag(s, vfield, OC__PB_VARINT);
    pb_varint(s, v);
    pb_close(s, m);
}
#define STAT_U(s, id, v) stat_val(s, 4, id, 3, (uint64_t)(v))
#define STAT_I(s, id, v) stat_val(s, 4, id, 4, (uint64_t)(int64_t)(v))
#define STAT_REF(s, id, ref) stat_val(s, 4, id, 7, (uint64_t)(ref))

static void stat_str(oc__pw *s, unsigned field, unsigned id, const char *v)
{
    size_t m = pb_open(s, field);
    pb_int(s, 1, id);
    pb_str(s, 5, v);
    pb_close(s, m);
}

/* An entry of a metadata map (`map` 4: events, 5: stats): {key; value =
 * {id = 1; name = 2; `extra_field` = extra}} (display_name = 4 of an event,
 * description = 3 of a stat). */
static void md_entry(oc__pw *s, unsigned map, int64_t id, const char *name, unsigned extra_field,
                     const char *extra)
{
    size_t m = pb_open(s, map);
    pb_int(s, 1, id);
    size_t v = pb_open(s, 2);
    pb_int(s, 1, id);
    pb_str(s, 2, name);
    if (extra) pb_str(s, extra_field, extra);
    pb_close(s, v);
    pb_close(s, m);
}
#define event_md(s, id, name, display) md_entry(s, 4, id, name, 4, display)
#define stat_md(s, id, name, desc) md_entry(s, 5, id, name, 3, desc)

/* ---- what the events refer to -------------------------------------------- */

typedef struct ctx {
    const oc__pdata *d;
    int64_t *gid;         /* [steps.n] group id of each step */
    char **tf_op;         /* [nnames] "path:type", made on first use */
    bool *opcore_op;      /* [nnames] names of opcore ops (the summary's) */
    uint8_t *ref_used;    /* [nnames] bit 0: tf_op ref, bit 1: name ref */
    bool kind_used[16];
    bool *md_used;        /* event metadata used on the current plane */
    size_t md_n;
} ctx;

static bool is_tf_type(const char *s)
{
    if (!((*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
    for (s++; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

static bool is_jax_type(const char *s)
{
    if (!((*s >= 'a' && *s <= 'z') || *s == '_')) return false;
    for (s++; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')) return false;
    return true;
}

/* "my_ops::relu_forward" -> "my_ops/relu_forward:relu_forward" (see top). */
static char *make_tf_op(const char *name)
{
    size_t n = strlen(name);
    char *path = oc__malloc(2 * n + 8), *out = oc__malloc(3 * n + 12);
    if (!path || !out) {
        oc__free(path);
        oc__free(out);
        return NULL;
    }
    size_t k = 0;
    if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') ||
          (name[0] >= '0' && name[0] <= '9') || name[0] == '.')) {
        memcpy(path, "op", 2);
        k = 2;
    }
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (c == ':' && p[1] == ':') {
            path[k++] = '/';
            p++;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                   c == '.' || c == '/' || c == '>' || c == '-') {
            path[k++] = c;
        } else {
            path[k++] = '_';
        }
    }
    path[k] = 0;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(out, 3 * n + 12, "%s:%s", path, (is_tf_type(base) || is_jax_type(base)) ? base : "");
    oc__free(path);
    return out;
}

/* The tf_op ref of an op-level event, or 0 for none. */
static uint64_t tf_op_ref(ctx *c, const oc__pev *e)
{
    if (e->name >= c->d->nnames || !oc__pis_op(e)) return 0;
    /* PyTorch's record of a call to an opcore op encloses opcore's own
     * record of it: count the call once, as opcore's */
    if (e->kind == OC_PROF_EXTERNAL && c->opcore_op[e->name]) return 0;
    if (!c->tf_op[e->name] && !(c->tf_op[e->name] = make_tf_op(c->d->names[e->name]))) return 0;
    c->ref_used[e->name] |= 1;
    return NAME_REF0 + 2 * (uint64_t)e->name;
}

static uint64_t name_ref(ctx *c, uint32_t name)
{
    c->ref_used[name] |= 2;
    return NAME_REF0 + 2 * (uint64_t)name + 1;
}

/* The step whose span holds time t (steps last until the next marker), or -1. */
static int64_t step_of(const ctx *c, uint64_t t)
{
    const oc__ptrack *st = &c->d->steps;
    if (!st->n || t < st->ev[0].t0) return -1;
    size_t lo = 0, hi = st->n;  /* last step with t0 <= t */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (st->ev[mid].t0 <= t) lo = mid;
        else hi = mid;
    }
    return c->gid[lo];
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

static void event_head(oc__pw *s, const oc__pdata *d, const oc__pev *e, int64_t md)
{
    pb_int(s, 1, md);
    pb_tag(s, 2, OC__PB_VARINT);  /* offset_ps, always present (oneof) */
    pb_varint(s, (e->t0 - d->start_ns) * 1000u);
    pb_int(s, 3, (int64_t)((e->t1 - e->t0) * 1000u));
}

static int64_t step_md(const ctx *c, size_t i) { return (int64_t)c->d->nnames + 1 + (int64_t)i; }

static void steps_line(oc__pw *s, ctx *c, int64_t line_id, bool host)
{
    const oc__pdata *d = c->d;
    size_t ln = pb_open(s, 3);
    line_head(s, d, line_id, 0, "Steps");
    for (size_t i = 0; i < d->steps.n; i++) {
        const oc__pev *e = &d->steps.ev[i];
        size_t m = pb_open(s, 4);
        event_head(s, d, e, step_md(c, i));
        STAT_I(s, ST_GROUP_ID, c->gid[i]);
        if (host) {
            char nm[48];
            snprintf(nm, sizeof nm, "step %lld", (long long)e->a);
            STAT_I(s, ST_STEP_NUM, (int64_t)e->a);
            stat_str(s, 4, ST_STEP_NAME, nm);
        }
        pb_close(s, m);
    }
    pb_close(s, ln);
}

static void host_event(oc__pw *s, ctx *c, const oc__pev *e)
{
    size_t m = pb_open(s, 4);
    event_head(s, c->d, e, (int64_t)e->name + 1);
    c->md_used[e->name] = true;
    int64_t g = step_of(c, e->t0);
    if (g >= 0) STAT_I(s, ST_GROUP_ID, g);
    uint64_t tf = tf_op_ref(c, e);
    if (tf) STAT_REF(s, ST_TF_OP, tf);
    if (e->kind == OC_PROF_EXTERNAL) {
        STAT_REF(s, ST_SOURCE, name_ref(c, (uint32_t)e->b));
        if (e->a) STAT_REF(s, ST_CATEGORY, name_ref(c, (uint32_t)(e->a - 1)));
    } else {
        c->kind_used[e->kind] = true;
        STAT_REF(s, ST_KIND, KIND_REF0 + e->kind);
    }
    pb_close(s, m);
}

static void kernel_event(oc__pw *s, ctx *c, const oc__pev *e, uint64_t seq)
{
    const oc__pdata *d = c->d;
    size_t m = pb_open(s, 4);
    size_t md = (size_t)e->name * d->ncores + e->core;
    event_head(s, d, e, (int64_t)(d->nnames + d->steps.n + 1 + md));
    c->md_used[md] = true;
    STAT_U(s, ST_BYTES_IN, e->a);
    STAT_U(s, ST_BYTES_OUT, e->b);
    STAT_U(s, ST_TCM, e->c);
    STAT_U(s, ST_STREAM, e->d);
    STAT_U(s, ST_CORE, e->core);
    STAT_U(s, ST_NCORES, e->ncores);
    uint64_t tf = tf_op_ref(c, e);
    if (tf) STAT_REF(s, ST_TF_OP, tf);
    int64_t g = step_of(c, e->t0);
    if (g >= 0) STAT_I(s, ST_GROUP_ID, g);
    STAT_I(s, ST_CORRELATION_ID, (int64_t)seq);
    pb_close(s, m);
}

/* Stat metadata: the fixed stats, then each string a ref stat points to. */
static void stat_metadata(oc__pw *s, ctx *c)
{
    for (unsigned i = 1; i <= ST_COUNT_; i++) stat_md(s, i, stat_names[i], stat_desc[i]);
    for (unsigned k = 0; k < 16; k++)
        if (c->kind_used[k]) stat_md(s, KIND_REF0 + k, oc__pkind_name(k), NULL);
    for (uint32_t i = 0; i < c->d->nnames; i++) {
        if (c->ref_used[i] & 1) stat_md(s, NAME_REF0 + 2 * (int64_t)i, c->tf_op[i], NULL);
        if (c->ref_used[i] & 2) stat_md(s, NAME_REF0 + 2 * (int64_t)i + 1, c->d->names[i], NULL);
    }
    memset(c->kind_used, 0, sizeof c->kind_used);
    memset(c->ref_used, 0, c->d->nnames ? c->d->nnames : 1);
}

static void steps_metadata(oc__pw *s, const ctx *c)
{
    for (size_t i = 0; i < c->d->steps.n; i++) {
        char nm[48];
        snprintf(nm, sizeof nm, "step %lld", (long long)c->d->steps.ev[i].a);
        event_md(s, step_md(c, i), nm, NULL);
    }
}

static void host_plane(oc__pw *s, ctx *c)
{
    const oc__pdata *d = c->d;
    size_t plane = pb_open(s, 1);
    pb_int(s, 1, 0);
    pb_str(s, 2, "/host:CPU");
    if (d->steps.n) steps_line(s, c, 0, true);
    for (uint32_t h = 0; h < d->nhost; h++) {
        const oc__ptrack *t = &d->host[h];
        size_t ln = pb_open(s, 3);
        line_head(s, d, t->tid, (int64_t)h + 1, t->name);
        for (size_t i = 0; i < t->n; i++)
            if (t->ev[i].kind != OC_PROF_STEP) host_event(s, c, &t->ev[i]);  /* on the Steps line */
        pb_close(s, ln);
    }
    for (uint32_t i = 0; i < d->nnames; i++)
        if (c->md_used[i]) event_md(s, (int64_t)i + 1, d->names[i], NULL);
    steps_metadata(s, c);
    stat_metadata(s, c);
    pb_close(s, plane);
}

static void engine_plane(oc__pw *s, ctx *c)
{
    const oc__pdata *d = c->d;
    char nm[96];
    size_t plane = pb_open(s, 1);
    pb_int(s, 1, 1);
    pb_str(s, 2, ENGINE_PLANE);
    stat_val(s, 6, ST_CORE_COUNT, 3, d->ncores);
    if (d->membw_gbps > 0) stat_val(s, 6, ST_MEMBW, 3, (uint64_t)(d->membw_gbps * 1e9));
    snprintf(nm, sizeof nm, "opcore engine (%u CPU cores)", d->ncores);
    stat_str(s, 6, ST_DEVICE_NAME, nm);
    if (d->steps.n) steps_line(s, c, STEP_INFO_LINE_ID, false);
    uint64_t seq = 0;
    for (uint32_t k = 0; k < d->ncores; k++) {
        const oc__ptrack *t = &d->cores[k];
        int nl = 1;
        uint8_t *lanes = oc__plane_assign(t, &nl);
        if (!lanes) {
            s->failed = true;
            break;
        }
        for (int l = 0; l < nl; l++) {
            if (l) snprintf(nm, sizeof nm, "%s #%d", t->name, l + 1);
            else snprintf(nm, sizeof nm, "%s", t->name);
            size_t ln = pb_open(s, 3);
            line_head(s, d, (int64_t)k + (int64_t)l * 100000, (int64_t)k * OC__PMAX_LANES + l + 1, nm);
            for (size_t i = 0; i < t->n; i++)
                if (lanes[i] == l) kernel_event(s, c, &t->ev[i], seq++);
            pb_close(s, ln);
        }
        oc__free(lanes);
    }
    for (size_t md = 0; md < c->md_n; md++) {
        if (!c->md_used[md]) continue;
        snprintf(nm, sizeof nm, "core %u", (unsigned)(md % d->ncores));
        event_md(s, (int64_t)(d->nnames + d->steps.n + 1 + md), nm, d->names[md / d->ncores]);
    }
    steps_metadata(s, c);
    stat_metadata(s, c);
    pb_close(s, plane);
}

/* Group ids: the step numbers if they rise and are >= 0 (the common case,
 * so xprof's step numbers are the user's), else the markers' indices. */
static void group_ids(ctx *c)
{
    const oc__ptrack *st = &c->d->steps;
    bool own = true;
    for (size_t i = 0; i < st->n; i++)
        if ((int64_t)st->ev[i].a < 0 || (i && (int64_t)st->ev[i].a <= (int64_t)st->ev[i - 1].a)) own = false;
    for (size_t i = 0; i < st->n; i++) c->gid[i] = own ? (int64_t)st->ev[i].a : (int64_t)i;
}

oc_status oc__pexport_xplane(const oc__pdata *d, const char *path)
{
    oc__pw s = {0};
    size_t nn = d->nnames ? d->nnames : 1;
    size_t kmd = (size_t)d->nnames * (d->ncores ? d->ncores : 1);
    ctx c = {.d = d, .gid = oc__calloc(d->steps.n ? d->steps.n : 1, sizeof(int64_t)),
             .tf_op = oc__calloc(nn, sizeof(char *)), .opcore_op = oc__calloc(nn, sizeof(bool)),
             .ref_used = oc__calloc(nn, 1), .md_used = oc__calloc(kmd > nn ? kmd : nn, sizeof(bool))};
    bool ok = c.gid && c.tf_op && c.opcore_op && c.ref_used && c.md_used;
    if (ok) {
        group_ids(&c);
        for (uint32_t i = 0; i < d->nops; i++)  /* the summary's ops, opcore's own */
            if (d->ops[i].source == UINT32_MAX) c.opcore_op[d->ops[i].name] = true;
        c.md_n = d->nnames;
        host_plane(&s, &c);
        if (d->ncores) {
            memset(c.md_used, 0, kmd * sizeof(bool));
            c.md_n = kmd;
            engine_plane(&s, &c);
        }
        pb_str(&s, 4, d->hostname);
    }
    for (size_t i = 0; c.tf_op && i < d->nnames; i++) oc__free(c.tf_op[i]);
    oc__free(c.gid);
    oc__free(c.tf_op);
    oc__free(c.opcore_op);
    oc__free(c.ref_used);
    oc__free(c.md_used);
    bool failed = !ok || s.failed || s.buf.oom;
    if (!failed) {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(s.buf.s, 1, s.buf.len, f) != s.buf.len) failed = true;
        if (f && fclose(f) != 0) failed = true;
    }
    oc__pw_free(&s);
    if (failed) return oc_set_error(OC_EIO, "oc_profiler_stop: writing '%s' failed", path);
    return OC_OK;
}
