/* src/profiler/record.c — recording events, and starting/stopping profiles.
 *
 * Every recording thread owns one oc__pbuf (thread-local pointer). Its
 * events live in fixed chunks of OC__PCHUNK events, linked in a list that
 * only grows; the owner appends without locks and publishes the new count
 * with a release store. A buffer is registered on the global list once
 * (under g_list_mu) at the thread's first event; when the thread exits the
 * buffer is marked dead and a later thread may adopt it (with its chunks)
 * once its events have been written out.
 *
 * Each profile has a generation number. An owner whose buffer holds events
 * of an older generation rewinds it before appending (so chunks are reused
 * and no memory is allocated per event in steady state); the stopper reads
 * only buffers of the generation it stops.
 *
 * Names are interned into a global table (mutex); each thread keeps a small
 * cache from the caller's pointer to the interned string, checked with
 * strcmp, so the common case takes no lock.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "opcore/profiler.h"
#include "opcore/status.h"
#include "profiler/hooks.h"
#include "profiler/prof.h"

atomic_int oc__prof_active = 0;

#define OC__PCHUNK 2048     /* events per chunk (128 KiB) */
#define OC__PCACHE 64       /* name cache entries per thread */
#define OC__PMAXDEPTH 256   /* named block nesting per thread */

typedef struct oc__pchunk {
    struct oc__pchunk *_Atomic next;  /* read by the stopper while a late event may link a new chunk */
    oc__pev ev[OC__PCHUNK];
} oc__pchunk;

typedef struct oc__pbuf {
    struct oc__pbuf *next_buf;  /* global list */
    oc__pchunk *head, *cur;
    size_t used;                /* events in cur */
    atomic_size_t count;        /* published events */
    atomic_uint gen;            /* generation of the events held */
    atomic_int dead;            /* owner thread exited */
    _Atomic uint64_t dropped;   /* events over the cap (this generation) */
    int64_t tid;
    char tname[32];
    uint32_t order;             /* registration order */
    struct {
        const char *ptr;        /* the caller's pointer */
        const char *str;        /* interned copy */
        uint32_t id;
    } cache[OC__PCACHE];
} oc__pbuf;

/* ---- global state ------------------------------------------------------ */

static pthread_mutex_t g_list_mu = PTHREAD_MUTEX_INITIALIZER;
static oc__pbuf *g_bufs;
static uint32_t g_nbufs;
static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static pthread_mutex_t g_sess_mu = PTHREAD_MUTEX_INITIALIZER;  /* start/stop */
static atomic_uint g_gen = 0;
static atomic_int g_running = 0;
static atomic_uint g_kind_mask = 0;
static _Atomic uint64_t g_deadline = UINT64_MAX;
static atomic_size_t g_max_events = (size_t)4 << 20;   /* per thread and profile */

static struct {
    char logdir[2048];
    char run[256];
    oc_profile_type type;
    double ms_duration;
    uint64_t start_ns;
    int64_t real_offset_ns;
} g_sess;

static __thread oc__pbuf *t_buf;
static __thread struct {
    uint64_t t0;
    uint32_t name;  /* UINT32_MAX: began while not recording */
    uint32_t gen;
} t_blocks[OC__PMAXDEPTH];
static __thread int t_depth;

/* outputs of the last stopped profile */
static char *g_out[8];

/* ---- time --------------------------------------------------------------- */

uint64_t oc__prof_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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

/* ---- names -------------------------------------------------------------- */

static pthread_mutex_t g_names_mu = PTHREAD_MUTEX_INITIALIZER;
static char **g_names;       /* id -> string (never freed while loaded) */
static uint32_t g_nnames, g_names_cap;
static uint32_t *g_hash;     /* open addressing: id + 1, 0 = empty */
static uint32_t g_hash_cap;  /* power of two */

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* Intern `s`; returns its id and the interned string, or UINT32_MAX. */
static uint32_t intern_locked(const char *s, const char **out)
{
    uint64_t h = str_hash(s);
    if (g_hash_cap) {
        for (uint32_t i = (uint32_t)h & (g_hash_cap - 1);; i = (i + 1) & (g_hash_cap - 1)) {
            uint32_t v = g_hash[i];
            if (!v) break;
            if (strcmp(g_names[v - 1], s) == 0) {
                *out = g_names[v - 1];
                return v - 1;
            }
        }
    }
    if (g_nnames + 1 > g_hash_cap / 2) {
        uint32_t ncap = g_hash_cap ? g_hash_cap * 2 : 256;
        uint32_t *nh = calloc(ncap, sizeof *nh);
        if (!nh) return UINT32_MAX;
        for (uint32_t id = 0; id < g_nnames; id++) {
            uint32_t i = (uint32_t)str_hash(g_names[id]) & (ncap - 1);
            while (nh[i]) i = (i + 1) & (ncap - 1);
            nh[i] = id + 1;
        }
        free(g_hash);
        g_hash = nh;
        g_hash_cap = ncap;
    }
    if (g_nnames == g_names_cap) {
        uint32_t ncap = g_names_cap ? g_names_cap * 2 : 128;
        char **nn = realloc(g_names, ncap * sizeof *nn);
        if (!nn) return UINT32_MAX;
        g_names = nn;
        g_names_cap = ncap;
    }
    char *copy = strdup(s);
    if (!copy) return UINT32_MAX;
    uint32_t id = g_nnames++;
    g_names[id] = copy;
    uint32_t i = (uint32_t)h & (g_hash_cap - 1);
    while (g_hash[i]) i = (i + 1) & (g_hash_cap - 1);
    g_hash[i] = id + 1;
    *out = copy;
    return id;
}

uint32_t oc__pintern(const char *s)
{
    const char *str = NULL;
    pthread_mutex_lock(&g_names_mu);
    uint32_t id = intern_locked(s ? s : "?", &str);
    pthread_mutex_unlock(&g_names_mu);
    return id;
}

static uint32_t intern(oc__pbuf *b, const char *s)
{
    if (!s) s = "?";
    unsigned slot = (unsigned)(((uintptr_t)s >> 3) ^ ((uintptr_t)s >> 9)) & (OC__PCACHE - 1);
    if (b->cache[slot].ptr == s && strcmp(s, b->cache[slot].str) == 0) return b->cache[slot].id;
    const char *str = NULL;
    pthread_mutex_lock(&g_names_mu);
    uint32_t id = intern_locked(s, &str);
    pthread_mutex_unlock(&g_names_mu);
    if (id != UINT32_MAX) {
        b->cache[slot].ptr = s;
        b->cache[slot].str = str;
        b->cache[slot].id = id;
    }
    return id;
}

/* ---- per-thread buffers ------------------------------------------------- */

static void buf_thread_exit(void *p)
{
    oc__pbuf *b = p;
    if (b) atomic_store_explicit(&b->dead, 1, memory_order_release);
}

static void make_key(void)
{
    (void)pthread_key_create(&g_key, buf_thread_exit);
}

static void buf_name_thread(oc__pbuf *b)
{
    b->tid = (int64_t)syscall(SYS_gettid);
    b->tname[0] = 0;
    if (b->tid == (int64_t)getpid()) {
        snprintf(b->tname, sizeof b->tname, "main");
    } else {
        char nm[32] = "";
        if (pthread_getname_np(pthread_self(), nm, sizeof nm) != 0) nm[0] = 0;
        snprintf(b->tname, sizeof b->tname, "%s", nm[0] ? nm : "thread");
    }
}

static oc__pbuf *buf_get(void)
{
    oc__pbuf *b = t_buf;
    if (b) return b;
    pthread_once(&g_key_once, make_key);
    pthread_mutex_lock(&g_list_mu);
    unsigned gen = atomic_load(&g_gen);
    int running = atomic_load(&g_running);
    for (oc__pbuf *it = g_bufs; it; it = it->next_buf) {
        if (!atomic_load_explicit(&it->dead, memory_order_acquire)) continue;
        /* events of the running profile must survive until its stop */
        if (running && atomic_load(&it->gen) == gen && atomic_load(&it->count) > 0) continue;
        b = it;
        break;
    }
    if (b) {
        atomic_store(&b->count, 0);
        atomic_store(&b->gen, gen - 1); /* force a rewind on first append */
        b->cur = b->head;
        b->used = 0;
        atomic_store(&b->dropped, 0);
        memset(b->cache, 0, sizeof b->cache);
        atomic_store(&b->dead, 0);
    } else {
        b = calloc(1, sizeof *b);
        if (!b) {
            pthread_mutex_unlock(&g_list_mu);
            return NULL;
        }
        atomic_init(&b->gen, gen - 1);
        b->order = g_nbufs++;
        b->next_buf = g_bufs;
        g_bufs = b;
    }
    buf_name_thread(b);
    pthread_mutex_unlock(&g_list_mu);
    (void)pthread_setspecific(g_key, b);
    t_buf = b;
    return b;
}

/* A slot for one more event of the current generation, or NULL (dropped). */
static oc__pev *buf_slot(oc__pbuf *b)
{
    /* acquire: the stopper's reads of the previous profile happen before
     * the start that made this generation, so rewinding cannot race them */
    unsigned gen = atomic_load_explicit(&g_gen, memory_order_acquire);
    if (atomic_load_explicit(&b->gen, memory_order_relaxed) != gen) {
        atomic_store_explicit(&b->count, 0, memory_order_relaxed);
        atomic_store_explicit(&b->gen, gen, memory_order_release);
        b->cur = b->head;
        b->used = 0;
        atomic_store_explicit(&b->dropped, 0, memory_order_relaxed);
    }
    size_t count = atomic_load_explicit(&b->count, memory_order_relaxed);
    if (count >= atomic_load_explicit(&g_max_events, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&b->dropped, 1, memory_order_relaxed);
        return NULL;
    }
    if (!b->cur || b->used == OC__PCHUNK) {
        oc__pchunk *next = b->cur ? atomic_load_explicit(&b->cur->next, memory_order_relaxed) : b->head;
        if (!next) {
            next = malloc(sizeof *next);
            if (!next) {
                atomic_fetch_add_explicit(&b->dropped, 1, memory_order_relaxed);
                return NULL;
            }
            atomic_init(&next->next, NULL);
            if (b->cur) atomic_store_explicit(&b->cur->next, next, memory_order_release);
            else b->head = next;
        }
        b->cur = next;
        b->used = 0;
    }
    return &b->cur->ev[b->used++];
}

static inline void buf_publish(oc__pbuf *b)
{
    size_t c = atomic_load_explicit(&b->count, memory_order_relaxed);
    atomic_store_explicit(&b->count, c + 1, memory_order_release);
}

static inline bool past_deadline(uint64_t t0)
{
    if (t0 > atomic_load_explicit(&g_deadline, memory_order_relaxed)) {
        atomic_store_explicit(&oc__prof_active, 0, memory_order_relaxed);
        return true;
    }
    return false;
}

static inline bool kind_wanted(unsigned kind)
{
    return (atomic_load_explicit(&g_kind_mask, memory_order_relaxed) >> kind) & 1u;
}

static void record(unsigned kind, const char *name, uint64_t t0, uint64_t t1, uint32_t core,
                   uint32_t ncores, uint64_t a, uint64_t b_, uint64_t c, uint64_t d)
{
    oc__pbuf *b = buf_get();
    if (!b) return;
    uint32_t id = intern(b, name);
    if (id == UINT32_MAX) return;
    oc__pev *e = buf_slot(b);
    if (!e) return;
    e->t0 = t0;
    e->t1 = t1 < t0 ? t0 : t1;
    e->a = a;
    e->b = b_;
    e->c = c;
    e->d = d;
    e->name = id;
    e->core = core;
    e->ncores = ncores;
    e->kind = (uint8_t)kind;
    buf_publish(b);
}

/* ---- hooks (called by the runtime) ------------------------------------- */

void oc__prof_kernel(const char *op, uint32_t core, uint32_t ncores, uint64_t t0, uint64_t t1,
                     const oc_prof_counters *counters)
{
    if (!oc__prof_on() || past_deadline(t0)) return;
    oc_prof_counters z = {0, 0, 0, 0};
    if (!counters) counters = &z;
    record(OC_PROF_KERNEL, op, t0, t1, core, ncores ? ncores : 1, counters->bytes_in,
           counters->bytes_out, counters->tcm_bytes, counters->stream_bytes);
}

void oc__prof_host(oc_prof_kind kind, const char *name, uint64_t t0, uint64_t t1)
{
    if (!oc__prof_on() || (unsigned)kind > OC_PROF_STEP || !kind_wanted(kind) || past_deadline(t0))
        return;
    record(kind, name, t0, t1, 0, 0, 0, 0, 0, 0);
}

/* ---- public: blocks and steps ------------------------------------------ */

oc_status oc_profiler_begin(const char *name)
{
    if (!name) return oc_set_error(OC_EINVAL, "oc_profiler_begin: argument 'name' is NULL");
    if (t_depth >= OC__PMAXDEPTH)
        return oc_set_error(OC_EINVAL, "oc_profiler_begin: blocks nest deeper than %d on this thread "
                            "(opening '%s'; is an oc_profiler_end missing?)", OC__PMAXDEPTH, name);
    int i = t_depth++;
    t_blocks[i].name = UINT32_MAX;
    t_blocks[i].gen = 0;
    t_blocks[i].t0 = 0;
    if (oc__prof_on() && kind_wanted(OC_PROF_BLOCK)) {
        uint64_t t0 = oc__prof_now();
        if (past_deadline(t0)) return OC_OK;
        oc__pbuf *b = buf_get();
        if (!b) return OC_OK;
        t_blocks[i].name = intern(b, name);
        t_blocks[i].gen = atomic_load_explicit(&g_gen, memory_order_relaxed);
        t_blocks[i].t0 = t0;
    }
    return OC_OK;
}

oc_status oc_profiler_end(void)
{
    if (t_depth <= 0)
        return oc_set_error(OC_EINVAL, "oc_profiler_end: no open block on this thread "
                            "(oc_profiler_end called more often than oc_profiler_begin)");
    int i = --t_depth;
    if (t_blocks[i].name == UINT32_MAX) return OC_OK;
    if (!atomic_load_explicit(&g_running, memory_order_relaxed) ||
        t_blocks[i].gen != atomic_load_explicit(&g_gen, memory_order_relaxed))
        return OC_OK;
    uint64_t t1 = oc__prof_now();
    oc__pbuf *b = buf_get();
    if (!b) return OC_OK;
    oc__pev *e = buf_slot(b);
    if (!e) return OC_OK;
    memset(e, 0, sizeof *e);
    e->t0 = t_blocks[i].t0;
    e->t1 = t1;
    e->name = t_blocks[i].name;
    e->kind = OC_PROF_BLOCK;
    buf_publish(b);
    return OC_OK;
}

oc_status oc_profiler_step(int64_t step)
{
    if (!oc__prof_on() || !kind_wanted(OC_PROF_STEP)) return OC_OK;
    uint64_t t = oc__prof_now();
    if (past_deadline(t)) return OC_OK;
    record(OC_PROF_STEP, "step", t, t, 0, 0, (uint64_t)step, 0, 0, 0);
    return OC_OK;
}

bool oc_profiler_enabled(void)
{
    /* the deadline of ms_duration switches recording off lazily, at the
     * first event past it; ask the clock so that a caller polling between
     * events sees it too */
    return oc__prof_on() && !past_deadline(oc__prof_now());
}

/* ---- files -------------------------------------------------------------- */

int oc__mkdirs(const char *path)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(tmp, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == 0) {
            char c = tmp[i];
            tmp[i] = 0;
            if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
            tmp[i] = c;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
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
    if (atomic_load(&g_running)) {
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

    const char *cap = getenv("OPCORE_PROFILE_MAX_EVENTS");
    if (cap && *cap) {
        long long v = atoll(cap);
        atomic_store(&g_max_events, v > 0 ? (size_t)v : ((size_t)4 << 20));
    }

    unsigned mask;
    if (type == OC_PROFILE_TRACE) {
        mask = (1u << (OC_PROF_EXTERNAL + 1)) - 1;
    } else {
        mask = (1u << OC_PROF_KERNEL) | (1u << OC_PROF_CALL) | (1u << OC_PROF_BUILD) |
               (1u << OC_PROF_BLOCK) | (1u << OC_PROF_STEP) | (1u << OC_PROF_EXTERNAL);
    }
    atomic_store(&g_kind_mask, mask);
    oc__pimport_reset(atomic_fetch_add(&g_gen, 1) + 1);
    g_sess.real_offset_ns = real_offset();
    g_sess.start_ns = oc__prof_now();
    uint64_t dl = UINT64_MAX;
    if (ms_duration > 0) dl = g_sess.start_ns + (uint64_t)(ms_duration * 1e6);
    atomic_store(&g_deadline, dl);
    atomic_store(&g_running, 1);
    atomic_store_explicit(&oc__prof_active, 1, memory_order_release);
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

const char *oc__pname(const oc__pdata *d, uint32_t id)
{
    return id < d->nnames ? d->names[id] : "?";
}

const char *oc__pkind_name(unsigned kind)
{
    static const char *const n[] = {"kernel", "call", "shape", "alloc", "dispatch",
                                     "wait", "build", "block", "step", "external"};
    return kind < sizeof n / sizeof n[0] ? n[kind] : "?";
}

const char *oc__pcat(const oc__pdata *d, const oc__pev *e)
{
    if (e->kind == OC_PROF_EXTERNAL) return oc__pname(d, oc__pext_cat(e));
    return oc__pkind_name(e->kind);
}

bool oc__psession(unsigned *gen, int64_t *real_offset_ns)
{
    pthread_mutex_lock(&g_sess_mu);
    bool running = atomic_load(&g_running) != 0;
    *gen = atomic_load(&g_gen);
    *real_offset_ns = g_sess.real_offset_ns;
    pthread_mutex_unlock(&g_sess_mu);
    return running;
}

static void pdata_free(oc__pdata *d)
{
    for (uint32_t i = 0; i < d->ncores; i++) free(d->cores[i].ev);
    for (uint32_t i = 0; i < d->nhost; i++) free(d->host[i].ev);
    free(d->cores);
    free(d->host);
    free(d->steps.ev);
    for (uint32_t i = 0; i < d->nops; i++) free(d->ops[i].core_ns);
    free(d->ops);
    free(d->blocks);
    free(d->names);
}

bool oc__pkeep(const oc__pdata *d, oc__pev *e)
{
    if (e->t0 > d->end_ns || e->t1 < d->start_ns) return false;
    if (e->t0 < d->start_ns) e->t0 = d->start_ns;
    if (e->t1 > d->end_ns) e->t1 = d->end_ns;
    return true;
}

/* Gather the events of generation `gen` into tracks. Returns false on OOM. */
static bool snapshot(oc__pdata *d, unsigned gen)
{
    pthread_mutex_lock(&g_names_mu);
    d->nnames = g_nnames;
    d->names = malloc((g_nnames ? g_nnames : 1) * sizeof *d->names);
    if (d->names && g_nnames) memcpy(d->names, g_names, g_nnames * sizeof *d->names);
    pthread_mutex_unlock(&g_names_mu);
    if (!d->names) return false;

    pthread_mutex_lock(&g_list_mu);
    uint32_t nb = 0, maxcore = 0;
    for (oc__pbuf *b = g_bufs; b; b = b->next_buf) nb++;
    oc__pbuf **bufs = calloc(nb ? nb : 1, sizeof *bufs);
    size_t *counts = calloc(nb ? nb : 1, sizeof *counts);
    size_t *hostn = calloc(nb ? nb : 1, sizeof *hostn);
    size_t *coren = NULL;
    size_t nsteps = 0;
    bool ok = bufs && counts && hostn;
    uint32_t k = 0;
    for (oc__pbuf *b = g_bufs; ok && b; b = b->next_buf) {
        size_t c = atomic_load_explicit(&b->count, memory_order_acquire);
        if (atomic_load(&b->gen) != gen || c == 0) continue;
        d->dropped += atomic_load_explicit(&b->dropped, memory_order_relaxed);
        bufs[k] = b;
        counts[k] = c;
        k++;
    }
    /* registration order (list is newest first) */
    for (uint32_t i = 0; ok && i < k; i++)
        for (uint32_t j = i + 1; j < k; j++)
            if (bufs[j]->order < bufs[i]->order) {
                oc__pbuf *tb = bufs[i]; bufs[i] = bufs[j]; bufs[j] = tb;
                size_t tc = counts[i]; counts[i] = counts[j]; counts[j] = tc;
            }
    /* pass 1: sizes */
    for (uint32_t i = 0; ok && i < k; i++) {
        size_t left = counts[i];
        for (oc__pchunk *ch = bufs[i]->head; ch && left; ch = atomic_load_explicit(&ch->next, memory_order_acquire)) {
            size_t m = left < OC__PCHUNK ? left : OC__PCHUNK;
            for (size_t j = 0; j < m; j++) {
                const oc__pev *e = &ch->ev[j];
                if (e->kind == OC_PROF_KERNEL) {
                    uint32_t top = e->core + 1 > e->ncores ? e->core + 1 : e->ncores;
                    if (top > maxcore) maxcore = top;
                } else {
                    hostn[i]++;
                    if (e->kind == OC_PROF_STEP) nsteps++;
                }
            }
            left -= m;
        }
    }
    if (maxcore > 65536) maxcore = 65536;
    if (ok) {
        coren = calloc(maxcore ? maxcore : 1, sizeof *coren);
        d->cores = calloc(maxcore ? maxcore : 1, sizeof *d->cores);
        d->host = calloc(k ? k : 1, sizeof *d->host);
        d->steps.ev = calloc(nsteps ? nsteps : 1, sizeof *d->steps.ev);
        ok = coren && d->cores && d->host && d->steps.ev;
    }
    if (ok) {
        d->ncores = maxcore;
        for (uint32_t i = 0; i < k; i++) {
            size_t left = counts[i];
            for (oc__pchunk *ch = bufs[i]->head; ch && left; ch = atomic_load_explicit(&ch->next, memory_order_acquire)) {
                size_t m = left < OC__PCHUNK ? left : OC__PCHUNK;
                for (size_t j = 0; j < m; j++)
                    if (ch->ev[j].kind == OC_PROF_KERNEL && ch->ev[j].core < maxcore) coren[ch->ev[j].core]++;
                left -= m;
            }
        }
        for (uint32_t c = 0; ok && c < maxcore; c++) {
            oc__ptrack *t = &d->cores[c];
            snprintf(t->name, sizeof t->name, "core %u", c);
            t->tid = c;
            t->sort = (int)c;
            t->ev = malloc((coren[c] ? coren[c] : 1) * sizeof *t->ev);
            ok = t->ev != NULL;
        }
    }
    /* pass 2: copy */
    for (uint32_t i = 0; ok && i < k; i++) {
        oc__ptrack *h = &d->host[d->nhost];
        h->ev = malloc((hostn[i] ? hostn[i] : 1) * sizeof *h->ev);
        if (!h->ev) { ok = false; break; }
        h->tid = bufs[i]->tid;
        h->sort = (int)i;
        snprintf(h->name, sizeof h->name, "%.31s (%lld)", bufs[i]->tname, (long long)bufs[i]->tid);
        size_t left = counts[i];
        for (oc__pchunk *ch = bufs[i]->head; ch && left; ch = atomic_load_explicit(&ch->next, memory_order_acquire)) {
            size_t m = left < OC__PCHUNK ? left : OC__PCHUNK;
            for (size_t j = 0; j < m; j++) {
                oc__pev e = ch->ev[j];
                d->total_events++;
                if (e.kind == OC_PROF_STEP) {
                    if (e.t0 >= d->start_ns && e.t0 <= d->end_ns) d->steps.ev[d->steps.n++] = e;
                }
                if (!oc__pkeep(d, &e)) continue;
                if (e.kind == OC_PROF_KERNEL) {
                    if (e.core < maxcore) d->cores[e.core].ev[d->cores[e.core].n++] = e;
                } else {
                    h->ev[h->n++] = e;
                }
            }
            left -= m;
        }
        if (h->n) {
            d->nhost++;
        } else {  /* a core's worker thread: only kernels, no host track */
            free(h->ev);
            h->ev = NULL;
        }
    }
    pthread_mutex_unlock(&g_list_mu);
    free(bufs);
    free(counts);
    free(hostn);
    free(coren);
    if (!ok || !oc__pimport_merge(d, gen)) return false;

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

static void set_out(int i, const char *s)
{
    free(g_out[i]);
    g_out[i] = s ? strdup(s) : NULL;
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
    if (!atomic_load(&g_running)) {
        pthread_mutex_unlock(&g_sess_mu);
        return oc_set_error(OC_EINVAL, "oc_profiler_stop: no profile is running "
                            "(call oc_profiler_start first)");
    }
    atomic_store_explicit(&oc__prof_active, 0, memory_order_relaxed);
    uint64_t end = oc__prof_now();
    uint64_t dl = atomic_load(&g_deadline);
    if (end > dl) end = dl;
    atomic_store(&g_running, 0);
    unsigned gen = atomic_load(&g_gen);

    oc__pdata *d = calloc(1, sizeof *d);
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
        free(d);
        pthread_mutex_unlock(&g_sess_mu);
        return oc_set_error(OC_ENOMEM, "oc_profiler_stop: out of memory gathering the events");
    }
    d->membw_gbps = oc_profiler_membw_gbps();
    snprintf(d->membw_how, sizeof d->membw_how, "%s", oc_profiler_membw_source());
    oc__psummary_compute(d);

    size_t L = strlen(d->logdir) + strlen(d->run) + strlen(d->hostname) + 64;
    char *run_dir = malloc(L), *p_trace = malloc(L), *p_xp = malloc(L), *p_json = malloc(L),
         *p_csv = malloc(L), *p_html = malloc(L);
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
    free(run_dir);
    free(p_trace);
    free(p_xp);
    free(p_json);
    free(p_csv);
    free(p_html);
    pdata_free(d);
    free(d);
    pthread_mutex_unlock(&g_sess_mu);
    return st;
}
