/* src/profiler/record.c — the event store: recording events, and handing
 * a stopped profile's events over (oc__psnapshot). Starting and stopping a
 * profile, and writing it out, is the session's (session.c), which drives
 * the store through the oc__pstore_* calls.
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
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
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

static pthread_mutex_t g_state_mu = PTHREAD_MUTEX_INITIALIZER;  /* running, gen, real offset together */
static int64_t g_real_offset;   /* of the running profile (oc__psession) */
static atomic_uint g_gen = 0;
static atomic_int g_running = 0;
static atomic_uint g_kind_mask = 0;
static _Atomic uint64_t g_deadline = UINT64_MAX;
static atomic_size_t g_max_events = (size_t)4 << 20;   /* per thread and profile */

static __thread oc__pbuf *t_buf;
static __thread struct {
    uint64_t t0;
    uint32_t name;  /* UINT32_MAX: began while not recording */
    uint32_t gen;
} t_blocks[OC__PMAXDEPTH];
static __thread int t_depth;

/* ---- time --------------------------------------------------------------- */

static _Atomic uint64_t g_fixed_now;  /* 0: CLOCK_MONOTONIC (oc__prof_set_clock) */

void oc__prof_set_clock(uint64_t ns)
{
    atomic_store(&g_fixed_now, ns);
}

uint64_t oc__prof_now(void)
{
    uint64_t fixed = atomic_load_explicit(&g_fixed_now, memory_order_relaxed);
    if (__builtin_expect(fixed != 0, 0)) return fixed;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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
        uint32_t *nh = oc__calloc(ncap, sizeof *nh);
        if (!nh) return UINT32_MAX;
        for (uint32_t id = 0; id < g_nnames; id++) {
            uint32_t i = (uint32_t)str_hash(g_names[id]) & (ncap - 1);
            while (nh[i]) i = (i + 1) & (ncap - 1);
            nh[i] = id + 1;
        }
        oc__free(g_hash);
        g_hash = nh;
        g_hash_cap = ncap;
    }
    if (g_nnames == g_names_cap) {
        uint32_t ncap = g_names_cap ? g_names_cap * 2 : 128;
        char **nn = oc__realloc(g_names, ncap * sizeof *nn);
        if (!nn) return UINT32_MAX;
        g_names = nn;
        g_names_cap = ncap;
    }
    char *copy = oc__strdup(s);
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
        b = oc__calloc(1, sizeof *b);
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
            next = oc__malloc(sizeof *next);
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
                   uint32_t ncores, uint64_t a, uint64_t b_, uint64_t c, uint64_t d, uint64_t program)
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
    e->program = program;
    buf_publish(b);
}

/* ---- hooks (called by the runtime) ------------------------------------- */

void oc__prof_kernel(const char *op, uint32_t core, uint32_t ncores, uint64_t t0, uint64_t t1,
                     const oc_prof_counters *counters)
{
    if (!oc__prof_on() || past_deadline(t0)) return;
    oc_prof_counters z = {0, 0, 0, 0, 0};
    if (!counters) counters = &z;
    record(OC_PROF_KERNEL, op, t0, t1, core, ncores ? ncores : 1, counters->bytes_in, counters->bytes_out,
           counters->tcm_bytes, counters->stream_bytes, counters->program);
}

void oc__prof_host(oc_prof_kind kind, const char *name, uint64_t t0, uint64_t t1)
{
    if (!oc__prof_on() || (unsigned)kind > OC_PROF_STEP || !kind_wanted(kind) || past_deadline(t0))
        return;
    record(kind, name, t0, t1, 0, 0, 0, 0, 0, 0, 0);
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
    record(OC_PROF_STEP, "step", t, t, 0, 0, (uint64_t)step, 0, 0, 0, 0);
    return OC_OK;
}

bool oc_profiler_enabled(void)
{
    /* the deadline of ms_duration switches recording off lazily, at the
     * first event past it; ask the clock so that a caller polling between
     * events sees it too */
    return oc__prof_on() && !past_deadline(oc__prof_now());
}

/* ---- the store, as the session drives it -------------------------------- */

bool oc__psession(unsigned *gen, int64_t *real_offset_ns)
{
    pthread_mutex_lock(&g_state_mu);
    bool running = atomic_load(&g_running) != 0;
    *gen = atomic_load(&g_gen);
    *real_offset_ns = g_real_offset;
    pthread_mutex_unlock(&g_state_mu);
    return running;
}

unsigned oc__pstore_new_gen(void) { return atomic_fetch_add(&g_gen, 1) + 1; }

void oc__pstore_start(unsigned kind_mask, uint64_t deadline, size_t max_events, int64_t real_offset_ns)
{
    pthread_mutex_lock(&g_state_mu);
    if (max_events) atomic_store(&g_max_events, max_events);
    atomic_store(&g_kind_mask, kind_mask);
    g_real_offset = real_offset_ns;
    atomic_store(&g_deadline, deadline);
    atomic_store(&g_running, 1);
    atomic_store_explicit(&oc__prof_active, 1, memory_order_release);
    pthread_mutex_unlock(&g_state_mu);
}

uint64_t oc__pstore_stop(uint64_t now)
{
    pthread_mutex_lock(&g_state_mu);
    atomic_store_explicit(&oc__prof_active, 0, memory_order_relaxed);
    uint64_t dl = atomic_load(&g_deadline);
    atomic_store(&g_running, 0);
    pthread_mutex_unlock(&g_state_mu);
    return now > dl ? dl : now;
}

bool oc__psnapshot(oc__pdata *d, unsigned gen)
{
    pthread_mutex_lock(&g_names_mu);
    d->nnames = g_nnames;
    d->names = oc__malloc((g_nnames ? g_nnames : 1) * sizeof *d->names);
    if (d->names && g_nnames) memcpy(d->names, g_names, g_nnames * sizeof *d->names);
    pthread_mutex_unlock(&g_names_mu);
    if (!d->names) return false;

    pthread_mutex_lock(&g_list_mu);
    uint32_t nb = 0, maxcore = 0;
    for (oc__pbuf *b = g_bufs; b; b = b->next_buf) nb++;
    oc__pbuf **bufs = oc__calloc(nb ? nb : 1, sizeof *bufs);
    size_t *counts = oc__calloc(nb ? nb : 1, sizeof *counts);
    size_t *hostn = oc__calloc(nb ? nb : 1, sizeof *hostn);
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
        coren = oc__calloc(maxcore ? maxcore : 1, sizeof *coren);
        d->cores = oc__calloc(maxcore ? maxcore : 1, sizeof *d->cores);
        d->host = oc__calloc(k ? k : 1, sizeof *d->host);
        d->steps.ev = oc__calloc(nsteps ? nsteps : 1, sizeof *d->steps.ev);
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
            t->ev = oc__malloc((coren[c] ? coren[c] : 1) * sizeof *t->ev);
            ok = t->ev != NULL;
        }
    }
    /* pass 2: copy */
    for (uint32_t i = 0; ok && i < k; i++) {
        oc__ptrack *h = &d->host[d->nhost];
        h->ev = oc__malloc((hostn[i] ? hostn[i] : 1) * sizeof *h->ev);
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
            oc__free(h->ev);
            h->ev = NULL;
        }
    }
    pthread_mutex_unlock(&g_list_mu);
    oc__free(bufs);
    oc__free(counts);
    oc__free(hostn);
    oc__free(coren);
    return ok;
}
