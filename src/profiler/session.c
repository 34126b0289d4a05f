/* src/profiler/session.c — starting and stopping a profile: naming the
 * run, driving the event store (record.c), merging imported spans, and
 * writing the exporters' files (trace.c, xplane.c, summary.c, report.c).
 * Nothing below calls back up here. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "opcore/profiler.h"
#include "opcore/status.h"
#include "profiler/hooks.h"
#include "profiler/prof.h"

static pthread_mutex_t g_sess_mu = PTHREAD_MUTEX_INITIALIZER;  /* start/stop */

static struct {
    char logdir[2048];
    char run[256];
    oc_profile_type type;
    double ms_duration;
    uint64_t start_ns;
    int64_t real_offset_ns;
} g_sess;

/* outputs of the last stopped profile */
static char *g_out[8];

/* CLOCK_REALTIME - CLOCK_MONOTONIC, in ns: the realtime read bracketed by two
 * monotonic reads, against their midpoint, the tightest of a few tries, so
 * that spans imported on the realtime clock (oc_profiler_import) land
 * within a few ns of where they belong. */
static int64_t real_offset(void)
{
    int64_t best = 0, width = INT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t m0 = oc__prof_now();
        int64_t r = oc_profiler_now_ns(OC_PROFILER_CLOCK_REALTIME);
        uint64_t m1 = oc__prof_now();
        if ((int64_t)(m1 - m0) < width) {
            width = (int64_t)(m1 - m0);
            best = r - (int64_t)(m0 + (m1 - m0) / 2);
        }
    }
    return best;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static bool run_name_ok(const char *s)
{
    if (!*s || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) return false;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

static bool run_taken(const char *logdir, const char *run)
{
    char p[4400];
    snprintf(p, sizeof p, "%s/plugins/profile/%s", logdir, run);
    if (exists(p)) return true;
    snprintf(p, sizeof p, "%s/%s.trace.json.gz", logdir, run);
    return exists(p);
}

/* ---- start / stop ------------------------------------------------------- */

oc_status oc_profiler_start(const char *logdir, oc_profile_type type, double ms_duration,
                            const char *run_name)
{
    if (!logdir || !*logdir) logdir = "logs";
    if (type != OC_PROFILE_TRACE && type != OC_PROFILE_OPERATOR)
        return oc_set_error(OC_EINVAL, "oc_profiler_start: argument 'type' is %d; expected "
                            "OC_PROFILE_TRACE (0) or OC_PROFILE_OPERATOR (1)", (int)type);
    if (!(ms_duration >= 0) || isinf(ms_duration))
        return oc_set_error(OC_EINVAL, "oc_profiler_start: argument 'ms_duration' is %g; expected a "
                            "finite number of milliseconds >= 0 (0: until oc_profiler_stop)", ms_duration);
    if (run_name && *run_name && (!run_name_ok(run_name) || strlen(run_name) > 200))
        return oc_set_error(OC_EINVAL, "oc_profiler_start: argument 'run_name' is \"%s\"; expected "
                            "1 to 200 letters, digits, '.', '_' or '-'", run_name);
    if (strlen(logdir) >= sizeof g_sess.logdir)
        return oc_set_error(OC_EINVAL, "oc_profiler_start: argument 'logdir' is too long (%zu bytes)",
                            strlen(logdir));

    pthread_mutex_lock(&g_sess_mu);
    unsigned gen;
    int64_t offset;
    if (oc__psession(&gen, &offset)) {
        pthread_mutex_unlock(&g_sess_mu);
        return oc_set_error(OC_EEXIST, "oc_profiler_start: a profile is already running (run '%s' in "
                            "'%s'); stop it first", g_sess.run, g_sess.logdir);
    }
    if (oc__mkdirs(logdir) != 0) {
        int e = errno;
        pthread_mutex_unlock(&g_sess_mu);
        return oc_set_error(OC_EIO, "oc_profiler_start: cannot create logdir '%s': %s", logdir, strerror(e));
    }
    char run[256];
    if (run_name && *run_name) {
        snprintf(run, sizeof run, "%s", run_name);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(run, sizeof run, "%Y_%m_%d_%H_%M_%S", &tm);
    }
    if (run_taken(logdir, run)) {
        char base[256];
        snprintf(base, sizeof base, "%s", run);
        for (int i = 1;; i++) {
            snprintf(run, sizeof run, "%.200s_%d", base, i);
            if (!run_taken(logdir, run)) break;
        }
    }
    snprintf(g_sess.logdir, sizeof g_sess.logdir, "%s", logdir);
    snprintf(g_sess.run, sizeof g_sess.run, "%s", run);
    g_sess.type = type;
    g_sess.ms_duration = ms_duration;

    size_t max_events = 0; /* unchanged */
    const char *cap = getenv("OPCORE_PROFILE_MAX_EVENTS");
    if (cap && *cap) {
        long long v = atoll(cap);
        max_events = v > 0 ? (size_t)v : ((size_t)4 << 20);
    }

    unsigned mask;
    if (type == OC_PROFILE_TRACE) {
        mask = (1u << (OC_PROF_EXTERNAL + 1)) - 1;
    } else {
        mask = (1u << OC_PROF_KERNEL) | (1u << OC_PROF_CALL) | (1u << OC_PROF_BUILD) |
               (1u << OC_PROF_BLOCK) | (1u << OC_PROF_STEP) | (1u << OC_PROF_EXTERNAL);
    }
    oc__pimport_reset(oc__pstore_new_gen());
    g_sess.real_offset_ns = real_offset();
    g_sess.start_ns = oc__prof_now();
    uint64_t dl = UINT64_MAX;
    if (ms_duration > 0) dl = g_sess.start_ns + (uint64_t)(ms_duration * 1e6);
    oc__pstore_start(mask, dl, max_events, g_sess.real_offset_ns);
    pthread_mutex_unlock(&g_sess_mu);
    return OC_OK;
}

static int cmp_ev(const void *x, const void *y)
{
    const oc__pev *a = x, *b = y;
    if (a->t0 != b->t0) return a->t0 < b->t0 ? -1 : 1;
    if (a->t1 != b->t1) return a->t1 > b->t1 ? -1 : 1;  /* parents first */
    return 0;
}

/* The events of generation `gen` as the exporters read them: the store's
 * tracks with the imported spans merged in, sorted, and the step markers
 * made spans. Returns false on OOM. */
static bool snapshot(oc__pdata *d, unsigned gen)
{
    if (!oc__psnapshot(d, gen) || !oc__pimport_merge(d, gen)) return false;

    for (uint32_t c = 0; c < d->ncores; c++) qsort(d->cores[c].ev, d->cores[c].n, sizeof(oc__pev), cmp_ev);
    for (uint32_t i = 0; i < d->nhost; i++) qsort(d->host[i].ev, d->host[i].n, sizeof(oc__pev), cmp_ev);
    /* steps: marker i lasts until marker i+1 or the end */
    qsort(d->steps.ev, d->steps.n, sizeof(oc__pev), cmp_ev);
    for (size_t i = 0; i < d->steps.n; i++)
        d->steps.ev[i].t1 = i + 1 < d->steps.n ? d->steps.ev[i + 1].t0 : d->end_ns;
    snprintf(d->steps.name, sizeof d->steps.name, "steps");
    d->steps.tid = 0;
    d->steps.sort = -1;
    return true;
}

static void pdata_free(oc__pdata *d)
{
    for (uint32_t i = 0; i < d->ncores; i++) oc__free(d->cores[i].ev);
    for (uint32_t i = 0; i < d->nhost; i++) oc__free(d->host[i].ev);
    oc__free(d->cores);
    oc__free(d->host);
    oc__free(d->steps.ev);
    for (uint32_t i = 0; i < d->nops; i++) oc__free(d->ops[i].core_ns);
    oc__free(d->ops);
    oc__free(d->blocks);
    oc__free(d->names);
}

static void set_out(int i, const char *s)
{
    oc__free(g_out[i]);
    g_out[i] = s ? oc__strdup(s) : NULL;
}

const char *oc_profiler_output(oc_profile_output what)
{
    if ((unsigned)what >= sizeof g_out / sizeof g_out[0]) return NULL;
    return g_out[what];
}

oc_status oc_profiler_stop(char *run_dir_out, size_t len)
{
    if (run_dir_out && len) run_dir_out[0] = 0;
    pthread_mutex_lock(&g_sess_mu);
    unsigned gen;
    int64_t offset;
    if (!oc__psession(&gen, &offset)) {
        pthread_mutex_unlock(&g_sess_mu);
        return oc_set_error(OC_EINVAL, "oc_profiler_stop: no profile is running "
                            "(call oc_profiler_start first)");
    }
    uint64_t end = oc__pstore_stop(oc__prof_now());

    oc__pdata *d = oc__calloc(1, sizeof *d);
    if (!d) {
        pthread_mutex_unlock(&g_sess_mu);
        return oc_set_error(OC_ENOMEM, "oc_profiler_stop: out of memory");
    }
    snprintf(d->logdir, sizeof d->logdir, "%s", g_sess.logdir);
    snprintf(d->run, sizeof d->run, "%s", g_sess.run);
    if (gethostname(d->hostname, sizeof d->hostname - 1) != 0 || !d->hostname[0]) snprintf(d->hostname, sizeof d->hostname, "localhost");
    for (char *p = d->hostname; *p; p++)
        if (*p == '/') *p = '_';
    d->type = g_sess.type;
    d->ms_duration = g_sess.ms_duration;
    d->start_ns = g_sess.start_ns;
    d->end_ns = end;
    d->real_offset_ns = g_sess.real_offset_ns;

    oc_status st = OC_OK;
    if (!snapshot(d, gen)) {
        pdata_free(d);
        oc__free(d);
        pthread_mutex_unlock(&g_sess_mu);
        return oc_set_error(OC_ENOMEM, "oc_profiler_stop: out of memory gathering the events");
    }
    d->membw_gbps = oc_profiler_membw_gbps();
    snprintf(d->membw_how, sizeof d->membw_how, "%s", oc_profiler_membw_source());
    oc__psummary_compute(d);

    size_t L = strlen(d->logdir) + strlen(d->run) + strlen(d->hostname) + 64;
    char *run_dir = oc__malloc(L), *p_trace = oc__malloc(L), *p_xp = oc__malloc(L), *p_json = oc__malloc(L),
         *p_csv = oc__malloc(L), *p_html = oc__malloc(L);
    if (!run_dir || !p_trace || !p_xp || !p_json || !p_csv || !p_html) {
        st = oc_set_error(OC_ENOMEM, "oc_profiler_stop: out of memory");
    } else {
        snprintf(run_dir, L, "%s/plugins/profile/%s", d->logdir, d->run);
        snprintf(p_trace, L, "%s/%s.trace.json.gz", d->logdir, d->run);
        snprintf(p_xp, L, "%s/%s.xplane.pb", run_dir, d->hostname);
        snprintf(p_json, L, "%s/%s.summary.json", d->logdir, d->run);
        snprintf(p_csv, L, "%s/%s.summary.csv", d->logdir, d->run);
        snprintf(p_html, L, "%s/%s.report.html", d->logdir, d->run);
        if (oc__mkdirs(run_dir) != 0) {
            st = oc_set_error(OC_EIO, "oc_profiler_stop: cannot create '%s': %s", run_dir, strerror(errno));
        } else {
            oc_status s;
            if ((s = oc__pexport_trace(d, p_trace)) != OC_OK) st = s;
            if ((s = oc__pexport_xplane(d, p_xp)) != OC_OK && st == OC_OK) st = s;
            if ((s = oc__pexport_summary(d, p_json, p_csv)) != OC_OK && st == OC_OK) st = s;
            if ((s = oc__pexport_html(d, p_html)) != OC_OK && st == OC_OK) st = s;
        }
        const char *q = getenv("OPCORE_PROFILE_QUIET");
        if (!q || !*q || strcmp(q, "0") == 0) oc__psummary_print(d, stdout);
        set_out(OC_PROFILE_OUT_RUN_DIR, run_dir);
        set_out(OC_PROFILE_OUT_TRACE, p_trace);
        set_out(OC_PROFILE_OUT_XPLANE, p_xp);
        set_out(OC_PROFILE_OUT_SUMMARY_JSON, p_json);
        set_out(OC_PROFILE_OUT_SUMMARY_CSV, p_csv);
        set_out(OC_PROFILE_OUT_HTML, p_html);
        set_out(OC_PROFILE_OUT_LOGDIR, d->logdir);
        set_out(OC_PROFILE_OUT_RUN_NAME, d->run);
        if (run_dir_out && len) snprintf(run_dir_out, len, "%s", run_dir);
    }
    oc__free(run_dir);
    oc__free(p_trace);
    oc__free(p_xp);
    oc__free(p_json);
    oc__free(p_csv);
    oc__free(p_html);
    pdata_free(d);
    oc__free(d);
    pthread_mutex_unlock(&g_sess_mu);
    return st;
}
