/* src/profiler/trace.c — Chrome trace-event JSON (gzip), as Perfetto reads it.
 *
 * Process 1 "opcore engine" has one thread per engine core ("core 0"..,
 * ordered by thread_sort_index). Process 2 "host" has the "steps" track
 * (tid 0: one span per step) and one thread per host thread that recorded
 * events (named "<thread name> (<tid>)"). Spans are complete events
 * ("ph":"X", microseconds from the start of the profile, ns precision);
 * step markers are also instant events on the thread that marked them.
 *
 * Kernels that overlap on one core (two host threads each acting as core 0
 * at once) go to an extra track "core N #2" so that every track nests.
 */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "opcore/status.h"
#include "profiler/prof.h"

#define PID_ENGINE 1
#define PID_HOST 2
#define MAX_LANES 16

static void ts(oc__pw *s, const oc__pdata *d, const char *key, uint64_t t)
{
    uint64_t rel = t - d->start_ns;
    oc__pw_printf(s, ",\"%s\":%llu.%03llu", key, (unsigned long long)(rel / 1000),
                  (unsigned long long)(rel % 1000));
}

static void dur(oc__pw *s, uint64_t ns)
{
    oc__pw_printf(s, ",\"dur\":%llu.%03llu", (unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000));
}

static void meta(oc__pw *s, bool *first, int pid, long long tid, const char *what, const char *name, int sort)
{
    oc__pw_puts(s, *first ? "\n" : ",\n");
    *first = false;
    if (name) {
        oc__pw_printf(s, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%lld,\"name\":\"%s_name\",\"args\":{\"name\":", pid,
                      tid, what);
        oc__pw_json_str(s, name);
        oc__pw_puts(s, "}}");
    } else {
        oc__pw_printf(s, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%lld,\"name\":\"%s_sort_index\",\"args\":"
                      "{\"sort_index\":%d}}", pid, tid, what, sort);
    }
}

static void span_head(oc__pw *s, const oc__pdata *d, int pid, long long tid, const oc__pev *e, const char *name)
{
    oc__pw_printf(s, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%lld,\"cat\":", pid, tid);
    oc__pw_json_str(s, oc__pcat(d, e));
    oc__pw_puts(s, ",\"name\":");
    oc__pw_json_str(s, name);
    ts(s, d, "ts", e->t0);
    dur(s, e->t1 - e->t0);
}

static long long lane_tid(uint32_t core, int lane)
{
    return (long long)core + 1 + (long long)lane * 100000;
}

oc_status oc__pexport_trace(const oc__pdata *d, const char *path)
{
    gzFile gz = gzopen(path, "wb1");
    if (!gz) return oc_set_error(OC_EIO, "oc_profiler_stop: cannot write '%s'", path);
    oc__pw s = {0};
    s.gz = gz;

    oc__pw_printf(&s, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"opcore profiler\",\"run\":");
    oc__pw_json_str(&s, d->run);
    oc__pw_puts(&s, ",\"host\":");
    oc__pw_json_str(&s, d->hostname);
    oc__pw_printf(&s, ",\"profile_type\":\"%s\",\"ms_duration\":%g,\"engine_cores\":%u,"
                  "\"membw_gbps\":%.3f,\"start_unix_ns\":%lld,\"dropped_events\":%llu},\"traceEvents\":[",
                  d->type == OC_PROFILE_OPERATOR ? "operator" : "trace", d->ms_duration, d->ncores,
                  d->membw_gbps, (long long)((int64_t)d->start_ns + d->real_offset_ns),
                  (unsigned long long)d->dropped);

    bool first = true;
    meta(&s, &first, PID_ENGINE, 0, "process", "opcore engine", 0);
    meta(&s, &first, PID_ENGINE, 0, "process", NULL, 0);
    meta(&s, &first, PID_HOST, 0, "process", "host", 0);
    meta(&s, &first, PID_HOST, 0, "process", NULL, 1);

    /* engine cores, with extra lanes where kernels overlap on one core */
    for (uint32_t c = 0; c < d->ncores; c++) {
        const oc__ptrack *t = &d->cores[c];
        uint64_t lane_end[MAX_LANES] = {0};
        int nlanes = 1;
        meta(&s, &first, PID_ENGINE, lane_tid(c, 0), "thread", t->name, (int)c);
        meta(&s, &first, PID_ENGINE, lane_tid(c, 0), "thread", NULL, (int)c * MAX_LANES);
        for (size_t i = 0; i < t->n; i++) {
            const oc__pev *e = &t->ev[i];
            int lane = 0;
            while (lane < nlanes && lane_end[lane] > e->t0) lane++;
            if (lane == MAX_LANES) lane = MAX_LANES - 1;
            if (lane == nlanes && nlanes < MAX_LANES) {
                char nm[80];
                snprintf(nm, sizeof nm, "%s #%d", t->name, lane + 1);
                meta(&s, &first, PID_ENGINE, lane_tid(c, lane), "thread", nm, 0);
                meta(&s, &first, PID_ENGINE, lane_tid(c, lane), "thread", NULL, (int)c * MAX_LANES + lane);
                nlanes++;
            }
            if (e->t1 > lane_end[lane]) lane_end[lane] = e->t1;
            span_head(&s, d, PID_ENGINE, lane_tid(c, lane), e, oc__pname(d, e->name));
            oc__pw_puts(&s, ",\"args\":{\"op\":");
            oc__pw_json_str(&s, oc__pname(d, e->name));
            oc__pw_printf(&s, ",\"core\":%u,\"ncores\":%u,\"bytes_in\":%llu,\"bytes_out\":%llu,"
                          "\"tcm_bytes\":%llu,\"stream_bytes\":%llu", e->core, e->ncores,
                          (unsigned long long)e->a, (unsigned long long)e->b, (unsigned long long)e->c,
                          (unsigned long long)e->d);
            if (e->program) { /* a grid instance: its program id, one number per axis */
                int nd = (int)(e->program >> 60);
                oc__pw_puts(&s, ",\"program\":[");
                for (int a = 0; a < nd; a++)
                    oc__pw_printf(&s, "%s%llu", a ? "," : "",
                                  (unsigned long long)((e->program >> (40 - 20 * a)) & 0xFFFFF));
                oc__pw_puts(&s, "]");
            }
            oc__pw_puts(&s, "}}");
        }
    }

    /* steps */
    if (d->steps.n) {
        meta(&s, &first, PID_HOST, 0, "thread", "steps", 0);
        meta(&s, &first, PID_HOST, 0, "thread", NULL, -1);
        for (size_t i = 0; i < d->steps.n; i++) {
            const oc__pev *e = &d->steps.ev[i];
            char nm[48];
            snprintf(nm, sizeof nm, "step %lld", (long long)e->a);
            span_head(&s, d, PID_HOST, 0, e, nm);
            oc__pw_printf(&s, ",\"args\":{\"step\":%lld}}", (long long)e->a);
        }
    }

    /* host threads */
    for (uint32_t h = 0; h < d->nhost; h++) {
        const oc__ptrack *t = &d->host[h];
        long long tid = t->tid;
        meta(&s, &first, PID_HOST, tid, "thread", t->name, 0);
        meta(&s, &first, PID_HOST, tid, "thread", NULL, t->sort);
        for (size_t i = 0; i < t->n; i++) {
            const oc__pev *e = &t->ev[i];
            if (e->kind == OC_PROF_STEP) {
                oc__pw_printf(&s, ",\n{\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,\"tid\":%lld,\"cat\":\"step\","
                              "\"name\":\"step %lld\"", PID_HOST, tid, (long long)e->a);
                ts(&s, d, "ts", e->t0);
                oc__pw_printf(&s, ",\"args\":{\"step\":%lld}}", (long long)e->a);
                continue;
            }
            span_head(&s, d, PID_HOST, tid, e, oc__pname(d, e->name));
            if (e->kind == OC_PROF_EXTERNAL) {
                oc__pw_puts(&s, ",\"args\":{\"source\":");
                oc__pw_json_str(&s, oc__pname(d, (uint32_t)e->b));
                oc__pw_printf(&s, ",\"op\":%s}}", e->ncores ? "true" : "false");
            } else {
                oc__pw_printf(&s, ",\"args\":{\"kind\":\"%s\"}}", oc__pkind_name(e->kind));
            }
        }
    }
    oc__pw_puts(&s, "\n]}\n");
    oc__pw_flush(&s);
    bool failed = s.failed || s.buf.oom;
    oc__pw_free(&s);
    if (gzclose(gz) != Z_OK) failed = true;
    if (failed) return oc_set_error(OC_EIO, "oc_profiler_stop: writing '%s' failed", path);
    return OC_OK;
}
