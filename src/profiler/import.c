/* src/profiler/import.c — spans recorded by other profilers (PyTorch's,
 * JAX's), put on the same timeline as opcore's own events.
 *
 * oc_profiler_import() converts each span to opcore's clock (CLOCK_MONOTONIC
 * ns) and keeps it, with the OS thread it ran on, in one list per profile
 * (under a mutex: imports come in a few large batches, not per event). At
 * oc_profiler_stop() the snapshot calls oc__pimport_merge(): a span joins the
 * track of the host thread with the same OS id, so PyTorch's operators and
 * the opcore op calls they made share one track and nest; spans of threads
 * opcore never saw get tracks of their own.
 *
 * Clocks: a REALTIME timestamp becomes monotonic by subtracting the offset
 * (realtime - monotonic) measured when the profile started. The two clocks
 * advance at the same rate (NTP slews both), so the conversion is exact to
 * the ~50 ns between the two clock reads, unless the wall clock is stepped
 * during the profile.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "opcore/profiler.h"
#include "opcore/status.h"
#include "profiler/prof.h"

typedef struct imp {
    oc__pev ev;
    int64_t tid;
    uint32_t thread;  /* interned thread name */
} imp;

static pthread_mutex_t g_imp_mu = PTHREAD_MUTEX_INITIALIZER;
static imp *g_imp;
static size_t g_nimp, g_imp_cap;
static unsigned g_imp_gen;

void oc__pimport_reset(unsigned gen)
{
    pthread_mutex_lock(&g_imp_mu);
    g_nimp = 0;
    g_imp_gen = gen;
    if (g_imp_cap > ((size_t)1 << 20)) {  /* don't hold on to a huge import */
        oc__free(g_imp);
        g_imp = NULL;
        g_imp_cap = 0;
    }
    pthread_mutex_unlock(&g_imp_mu);
}

oc_status oc_profiler_import(const char *source, oc_profiler_clock clock, const oc_profiler_span *spans,
                             size_t n)
{
    if (!source || !*source) return oc_set_error(OC_EINVAL, "oc_profiler_import: argument 'source' is empty");
    if (clock != OC_PROFILER_CLOCK_MONOTONIC && clock != OC_PROFILER_CLOCK_REALTIME)
        return oc_set_error(OC_EINVAL, "oc_profiler_import: argument 'clock' is %d; expected "
                            "OC_PROFILER_CLOCK_MONOTONIC (0) or OC_PROFILER_CLOCK_REALTIME (1)", (int)clock);
    if (n && !spans) return oc_set_error(OC_EINVAL, "oc_profiler_import: argument 'spans' is NULL");
    for (size_t i = 0; i < n; i++) {
        if (!spans[i].name)
            return oc_set_error(OC_EINVAL, "oc_profiler_import: span %zu of '%s' has no name", i, source);
        if (spans[i].t1_ns < spans[i].t0_ns)
            return oc_set_error(OC_EINVAL, "oc_profiler_import: span %zu ('%s') of '%s' ends (%lld ns) before "
                                "it starts (%lld ns)", i, spans[i].name, source, (long long)spans[i].t1_ns,
                                (long long)spans[i].t0_ns);
    }
    unsigned gen;
    int64_t off;
    if (!oc__psession(&gen, &off))
        return oc_set_error(OC_EINVAL, "oc_profiler_import: no profile is running (import spans before "
                            "oc_profiler_stop)");
    if (clock == OC_PROFILER_CLOCK_MONOTONIC) off = 0;
    uint32_t src = oc__pintern(source);
    if (src == UINT32_MAX) return oc_set_error(OC_ENOMEM, "oc_profiler_import: out of memory");

    pthread_mutex_lock(&g_imp_mu);
    if (g_imp_gen != gen) {  /* first import of this profile */
        g_nimp = 0;
        g_imp_gen = gen;
    }
    if (g_nimp + n > g_imp_cap) {
        imp *grown = oc__pgrow(g_imp, &g_imp_cap, g_nimp + n, sizeof *grown, 1024);
        if (!grown) {
            pthread_mutex_unlock(&g_imp_mu);
            return oc_set_error(OC_ENOMEM, "oc_profiler_import: out of memory for %zu spans", g_nimp + n);
        }
        g_imp = grown;
    }
    /* names repeat: remember the last few interned pointers */
    const char *last_name = NULL, *last_cat = NULL, *last_thread = NULL;
    uint32_t name_id = 0, cat_id = 0, thread_id = 0;
    oc_status st = OC_OK;
    for (size_t i = 0; i < n; i++) {
        const oc_profiler_span *s = &spans[i];
        const char *thread = s->thread && *s->thread ? s->thread : "thread";
        if (s->name != last_name) name_id = oc__pintern(s->name), last_name = s->name;
        if (s->category != last_cat) cat_id = s->category ? oc__pintern(s->category) + 1 : 0, last_cat = s->category;
        if (thread != last_thread) thread_id = oc__pintern(thread), last_thread = thread;
        if (name_id == UINT32_MAX || cat_id == UINT32_MAX || thread_id == UINT32_MAX) {
            st = oc_set_error(OC_ENOMEM, "oc_profiler_import: out of memory");
            break;
        }
        imp *m = &g_imp[g_nimp++];
        memset(&m->ev, 0, sizeof m->ev);
        int64_t t0 = s->t0_ns - off, t1 = s->t1_ns - off;
        m->ev.t0 = t0 > 0 ? (uint64_t)t0 : 0;
        m->ev.t1 = t1 > 0 ? (uint64_t)t1 : 0;
        m->ev.a = cat_id;
        m->ev.b = src;
        m->ev.name = name_id;
        m->ev.ncores = s->op ? 1 : 0;
        m->ev.kind = OC_PROF_EXTERNAL;
        m->tid = s->tid;
        m->thread = thread_id;
    }
    pthread_mutex_unlock(&g_imp_mu);
    return st;
}

bool oc__pimport_merge(oc__pdata *d, unsigned gen)
{
    bool ok = true;
    pthread_mutex_lock(&g_imp_mu);
    size_t n = g_imp_gen == gen ? g_nimp : 0;
    uint32_t *track = n ? oc__malloc(n * sizeof *track) : NULL;
    size_t *add = NULL;
    if (n && !track) ok = false;
    /* 1. the track of each kept span, new tracks for unseen threads */
    uint32_t cap = d->nhost;
    for (size_t i = 0; ok && i < n; i++) {
        track[i] = UINT32_MAX;
        if (!oc__pkeep(d, &g_imp[i].ev)) continue;  /* clipped in place (to the same window each time) */
        uint32_t t = i && track[i - 1] != UINT32_MAX && d->host[track[i - 1]].tid == g_imp[i].tid
                         ? track[i - 1] : UINT32_MAX;
        for (uint32_t h = 0; t == UINT32_MAX && h < d->nhost; h++)
            if (d->host[h].tid == g_imp[i].tid) t = h;
        if (t == UINT32_MAX) {
            if (d->nhost == cap) {
                cap = cap ? cap * 2 : 4;
                oc__ptrack *p = oc__realloc(d->host, cap * sizeof *p);
                if (!p) { ok = false; break; }
                d->host = p;
            }
            t = d->nhost++;
            oc__ptrack *h = &d->host[t];
            memset(h, 0, sizeof *h);
            h->tid = g_imp[i].tid;
            h->sort = (int)t;
            char tid[32];
            const char *tn = oc__pname(d, g_imp[i].thread);
            snprintf(tid, sizeof tid, "%lld", (long long)h->tid);
            if (strstr(tn, tid)) snprintf(h->name, sizeof h->name, "%.63s", tn);  /* jax: "name/<id>" */
            else snprintf(h->name, sizeof h->name, "%.40s (%.20s)", tn, tid);
        }
        track[i] = t;
    }
    /* 2. grow each track once, then copy */
    if (ok && n) {
        add = oc__calloc(d->nhost, sizeof *add);
        ok = add != NULL;
    }
    for (size_t i = 0; ok && i < n; i++)
        if (track[i] != UINT32_MAX) add[track[i]]++;
    for (uint32_t h = 0; ok && add && h < d->nhost; h++) {
        if (!add[h]) continue;
        oc__pev *p = oc__realloc(d->host[h].ev, (d->host[h].n + add[h]) * sizeof *p);
        if (!p) { ok = false; break; }
        d->host[h].ev = p;
    }
    for (size_t i = 0; ok && i < n; i++) {
        if (track[i] == UINT32_MAX) continue;
        oc__ptrack *h = &d->host[track[i]];
        h->ev[h->n++] = g_imp[i].ev;
        d->total_events++;
        d->imported++;
    }
    pthread_mutex_unlock(&g_imp_mu);
    oc__free(track);
    oc__free(add);
    return ok;
}

int64_t oc_profiler_now_ns(oc_profiler_clock clock)
{
    if (clock != OC_PROFILER_CLOCK_REALTIME) return (int64_t)oc__prof_now();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
