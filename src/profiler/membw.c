/* src/profiler/membw.c — the machine's memory bandwidth, which the summary
 * compares each op's GB/s against.
 *
 * Measured as memcpy of a 128 MiB buffer ($OPCORE_MEMBW_MIB MiB if set;
 * well beyond the caches either way) -- bytes read + bytes written per
 * second -- on one thread and on one thread per online CPU, MEMBW_ROUNDS
 * rounds of MEMBW_REPS copies each, a short pause between rounds; the best
 * copy of all wins. One measurement taken while other jobs load the machine
 * reads low (the issue behind this file saw 6.5 GB/s where memcpy reaches
 * 20+); the best of many, on both thread counts, is robust to passing load.
 *
 * Cached in <cache>/membw (<cache>: $OPCORE_CACHE_DIR, else
 * $XDG_CACHE_HOME/opcore, else ~/.cache/opcore) as key=value lines with
 * what was measured where; the cache is used only on the same machine (CPU
 * model, online CPU count, kernel release) and for MEMBW_MAX_AGE_S, else the
 * bandwidth is measured again. OPCORE_MEMBW_GBPS overrides it all.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "opcore/profiler.h"
#include "core/internal.h"
#include "profiler/prof.h"

#define MEMBW_MIB 128  /* default buffer size; OPCORE_MEMBW_MIB overrides */
#define MEMBW_ROUNDS 3
#define MEMBW_REPS 3
#define MEMBW_MAX_AGE_S (30 * 24 * 3600)
#define MEMBW_MAX_THREADS 64

/* ---- measuring ------------------------------------------------------------ */

typedef struct bw_ctx {
    char *src, *dst;
    size_t bytes;
    unsigned nthreads;
    atomic_int gate;    /* 1: nthreads and the barrier are set; -1: give up */
    pthread_barrier_t bar;
    uint64_t best_ns;   /* fastest copy of the whole buffer */
} bw_ctx;

typedef struct bw_arg {
    bw_ctx *c;
    unsigned id;
} bw_arg;

static void *bw_thread(void *p)
{
    bw_arg *a = p;
    bw_ctx *c = a->c;
    int g;
    while ((g = atomic_load(&c->gate)) == 0) sched_yield();
    if (g < 0) return NULL;
    size_t lo = c->bytes * a->id / c->nthreads, hi = c->bytes * (a->id + 1) / c->nthreads;
    for (int r = 0; r < MEMBW_REPS; r++) {
        uint64_t t0 = 0;
        pthread_barrier_wait(&c->bar);
        if (a->id == 0) t0 = oc__prof_now();
        memcpy(c->dst + lo, c->src + lo, hi - lo);
        pthread_barrier_wait(&c->bar);
        if (a->id == 0) {
            uint64_t dt = oc__prof_now() - t0;
            if (dt && dt < c->best_ns) c->best_ns = dt;
        }
    }
    return NULL;
}

/* Best copy time (ns) of the buffer split over up to `want` threads (as
 * many as start); *used: how many. 0 on failure. */
static uint64_t copy_ns(char *src, char *dst, size_t bytes, unsigned want, unsigned *used)
{
    bw_ctx c = {.src = src, .dst = dst, .bytes = bytes, .best_ns = UINT64_MAX};
    pthread_t th[MEMBW_MAX_THREADS];
    bw_arg args[MEMBW_MAX_THREADS];
    atomic_init(&c.gate, 0);
    unsigned started = 1;
    for (unsigned i = 0; i < want; i++) args[i] = (bw_arg){&c, i};
    for (; started < want; started++)
        if (pthread_create(&th[started], NULL, bw_thread, &args[started]) != 0) break;
    c.nthreads = started;
    uint64_t ns = 0;
    if (pthread_barrier_init(&c.bar, NULL, started) == 0) {
        atomic_store(&c.gate, 1);
        bw_thread(&args[0]);
        for (unsigned i = 1; i < started; i++) pthread_join(th[i], NULL);
        pthread_barrier_destroy(&c.bar);
        ns = c.best_ns == UINT64_MAX ? 0 : c.best_ns;
    } else {
        atomic_store(&c.gate, -1);
        for (unsigned i = 1; i < started; i++) pthread_join(th[i], NULL);
    }
    *used = started;
    return ns;
}

static unsigned buffer_mib(void)
{
    const char *e = getenv("OPCORE_MEMBW_MIB");
    long v = e && *e ? strtol(e, NULL, 10) : 0;
    return v >= 1 && v <= 65536 ? (unsigned)v : MEMBW_MIB;
}

/* GB/s (read + write) of the best copy; *threads_out: the thread count of it. */
static double measure(unsigned *threads_out)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned all = ncpu < 1 ? 1 : ncpu > MEMBW_MAX_THREADS ? MEMBW_MAX_THREADS : (unsigned)ncpu;
    size_t bytes = (size_t)buffer_mib() << 20;
    char *src = oc__malloc(bytes), *dst = oc__malloc(bytes);
    double best = 0;
    if (src && dst) {
        memset(src, 1, bytes); /* fault the pages in */
        memset(dst, 0, bytes);
        for (int round = 0; round < MEMBW_ROUNDS; round++) {
            if (round) {
                struct timespec pause = {0, 20 * 1000 * 1000};  /* let a passing burst of load go */
                nanosleep(&pause, NULL);
            }
            for (unsigned k = 0; k < (all > 1 ? 2u : 1u); k++) {
                unsigned n = 1;
                uint64_t ns = copy_ns(src, dst, bytes, k ? all : 1, &n);
                double gbps = ns ? 2.0 * (double)bytes / (double)ns : 0;
                if (gbps > best) {
                    best = gbps;
                    *threads_out = n;
                }
            }
        }
    }
    oc__free(src);
    oc__free(dst);
    return best;
}

/* ---- the machine and the cache ------------------------------------------- */

typedef struct machine {
    char cpu[160];
    long cpus;
    char kernel[128];
} machine;

static void this_machine(machine *m)
{
    snprintf(m->cpu, sizeof m->cpu, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        /* x86: "model name"; arm64: "Model" or "CPU part" */
        if (strncmp(line, "model name", 10) && strncmp(line, "Model", 5) && strncmp(line, "CPU part", 8)) continue;
        char *v = strchr(line, ':');
        if (!v) continue;
        for (v++; *v == ' ' || *v == '\t'; v++) {}
        v[strcspn(v, "\r\n")] = 0;
        snprintf(m->cpu, sizeof m->cpu, "%s", v);
        break;
    }
    if (f) fclose(f);
    m->cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct utsname u;
    snprintf(m->kernel, sizeof m->kernel, "%s", uname(&u) == 0 ? u.release : "unknown");
}

typedef struct entry {
    double gbps;
    unsigned threads, mib;
    long long when;   /* unix seconds */
    machine m;
} entry;

static bool read_entry(const char *file, entry *e)
{
    FILE *f = fopen(file, "r");
    if (!f) return false;
    memset(e, 0, sizeof *e);
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        char *v = strchr(line, '=');
        if (!v || line[0] == '#') continue;
        *v++ = 0;
        if (!strcmp(line, "gbps")) e->gbps = strtod(v, NULL);
        else if (!strcmp(line, "threads")) e->threads = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(line, "buffer_mib")) e->mib = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(line, "measured_unix")) e->when = atoll(v);
        else if (!strcmp(line, "cpu_model")) snprintf(e->m.cpu, sizeof e->m.cpu, "%s", v);
        else if (!strcmp(line, "cpus")) e->m.cpus = atol(v);
        else if (!strcmp(line, "kernel")) snprintf(e->m.kernel, sizeof e->m.kernel, "%s", v);
    }
    fclose(f);
    return e->gbps > 0 && isfinite(e->gbps) && e->when > 0;
}

static void write_entry(const char *dir, const char *file, const entry *e)
{
    if (oc__mkdirs(dir) != 0) return;
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", file, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "# opcore: the machine's memory bandwidth (GB/s, read+write) for the profiler's summary.\n"
               "# Measured again when stale or on another machine; delete to measure again.\n"
               "gbps=%.3f\nthreads=%u\nbuffer_mib=%u\nmeasured_unix=%lld\ncpu_model=%s\ncpus=%ld\nkernel=%s\n",
            e->gbps, e->threads, e->mib, e->when, e->m.cpu, e->m.cpus, e->m.kernel);
    if (fclose(f) == 0) rename(tmp, file);
    else remove(tmp);
}

static void fmt_when(char *out, size_t n, long long when)
{
    time_t t = (time_t)when;
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(out, n, "%Y-%m-%d %H:%M", &tm);
}

/* ---- public --------------------------------------------------------------- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static double g_nocache_bw;   /* measured once per process when there is no cache dir */
static unsigned g_nocache_threads;
static char g_how[8192];

#define METHOD "memcpy of %u MiB, best of %d copies on 1 and on %ld threads"

double oc_profiler_membw_gbps(void)
{
    pthread_mutex_lock(&g_mu);
    const char *env = getenv("OPCORE_MEMBW_GBPS");
    char *end = NULL;
    double v = env && *env ? strtod(env, &end) : 0;
    if (env && *env && end && !*end && v > 0 && isfinite(v)) {
        snprintf(g_how, sizeof g_how, "set by OPCORE_MEMBW_GBPS");
        pthread_mutex_unlock(&g_mu);
        return v;
    }
    const char *bad = env && *env ? "OPCORE_MEMBW_GBPS is not a positive number; " : "";
    machine m;
    this_machine(&m);
    char dir[4096], file[4200], when[64];
    entry e;
    double bw;
    if (!oc__cache_root(dir, sizeof dir)) {  /* one rule for the build cache and this one */
        if (g_nocache_bw <= 0) g_nocache_bw = measure(&g_nocache_threads);
        snprintf(g_how, sizeof g_how, "%smeasured in this process (" METHOD "; best on %u), no cache directory",
                 bad, buffer_mib(), MEMBW_ROUNDS * MEMBW_REPS, m.cpus, g_nocache_threads);
        bw = g_nocache_bw;
    } else {
        snprintf(file, sizeof file, "%s/membw", dir);
        long long now = (long long)time(NULL);
        const char *why = "no measurement cached";
        if (read_entry(file, &e)) {
            if (strcmp(e.m.cpu, m.cpu) || e.m.cpus != m.cpus || strcmp(e.m.kernel, m.kernel))
                why = "the cached one was taken on another machine";
            else if (now - e.when > MEMBW_MAX_AGE_S || e.when > now + 60)
                why = "the cached one is over 30 days old";
            else
                why = NULL;
        }
        if (why) {
            e.m = m;
            e.when = now;
            e.mib = buffer_mib();
            e.gbps = measure(&e.threads);
            if (e.gbps > 0) write_entry(dir, file, &e);
        }
        fmt_when(when, sizeof when, e.when);
        snprintf(g_how, sizeof g_how, "%s%s " METHOD " (best on %u) on %s (%ld CPUs, Linux %s) at %s; "
                 "cached in %s%s%s", bad, why ? "measured now:" : "cached:", e.mib ? e.mib : MEMBW_MIB, MEMBW_ROUNDS * MEMBW_REPS, m.cpus,
                 e.threads, m.cpu, m.cpus, m.kernel, when, file, why ? " because " : "", why ? why : "");
        bw = e.gbps;
    }
    pthread_mutex_unlock(&g_mu);
    return bw;
}

const char *oc_profiler_membw_source(void)
{
    pthread_mutex_lock(&g_mu);
    bool empty = !g_how[0];
    pthread_mutex_unlock(&g_mu);
    if (empty) (void)oc_profiler_membw_gbps();
    return g_how;
}
