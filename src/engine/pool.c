/* The pool of cores: persistent worker threads plus the calling thread.
 *
 * A multicore launch of N shares (oc_cpu_count() == N) publishes the job
 * and bumps a generation counter the workers wait on. Shares are *claimed*,
 * not assigned: the caller and every worker that wakes take shares from one
 * atomic counter until none are left, so each oc_cpu_id() runs exactly
 * once, on whichever thread got there first (a thread takes the share it
 * ran last if that one is still free: pick_share). On an idle machine every
 * thread takes one share; on a busy one, the caller runs the shares of
 * workers the OS has not scheduled yet instead of waiting for them.
 *
 * Workers spin briefly on the counter when launches come back to back (a
 * launch then costs no syscall), else sleep on a futex. Launches are
 * serialised by a mutex; single-core calls never touch the pool and run
 * concurrently on their callers' own cores.
 *
 * A launch whose tensors are too small to be worth splitting (fewer bytes
 * than OC_MIN_SPLIT_BYTES, default 64 KiB, inputs and results together)
 * runs as one share on the caller, with oc_cpu_count() == 1: waking the
 * pool would cost more than the work.
 *
 * A host framework may lend its own threads (oc_engine_set_thread_helpers:
 * PyTorch's intra-op pool, whose threads spin for a while after each
 * parallel region). Its threads then claim the shares first, and the
 * launch is offered to the engine's workers (the generation they spin or
 * sleep on bumped) only if shares are left unclaimed: a worker that takes
 * a share on a core where such a thread spins fights it for the core, and
 * one still spinning from the last launch would take shares from them.
 *
 * A grid launch (job->grid_ndim > 0) is the same machinery with one share
 * per program instance instead of one per core: the claim counter is the
 * scheduler. Each thread that finishes an instance takes the next id, so
 * an instance costing 10x another simply leaves its core busy while the
 * others drain the rest: the load balances itself at the granularity of
 * one instance, with one atomic add per instance and no queues. Work
 * stealing would balance the same (every instance is independent and
 * equally likely to run anywhere) at the cost of per-core deques; the
 * counter also keeps ids handed out in order, so neighbouring instances
 * (neighbouring tiles) run at about the same time. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif
#include <unistd.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "engine/core.h"
#include "engine/pool.h"
#include "opcore/engine.h"

static struct {
    pthread_mutex_t lock;        /* start/stop and launches */
    atomic_bool started;
    uint32_t num_cores;          /* configured (0 = default) */
    size_t tcm_size;             /* configured (0 = default) */
    uint32_t ncores;             /* running */
    pthread_t *threads;
    oc_core **cores;             /* [1..ncores-1] are the workers' */
    oc_exec *job;
    _Atomic uint32_t generation; /* bumped when a launch is offered to the workers */
    _Atomic uint64_t claim;      /* next share id of the running launch */
    _Atomic uint64_t taken;      /* shares taken, one bit each (launches of up to 64 shares) */
    atomic_bool offered;         /* the running launch was offered to the workers */
    unsigned fpcsr;              /* the launching thread's MXCSR (x86): shares run with it */
    _Atomic uint32_t pending;    /* shares not finished yet */
    atomic_int sleepers;
    atomic_int waiter_sleeping;
    atomic_bool stopping;
    uint64_t spin_ns;
    uint64_t straggler_ns;       /* OC_STRAGGLER_US; 0: never run solo */
    _Atomic uint64_t min_split_bytes; /* smaller launches run as one share */
    atomic_bool min_split_set;   /* set by oc_engine_set_min_split_bytes */
    uint32_t start_generation;   /* workers wait for the first job after it */
    /* collectives of the running launch (kernel/collective.c) */
    _Atomic uint32_t bar_count;  /* shares arrived at the current barrier */
    _Atomic uint32_t bar_done;   /* barriers completed in this launch */
    _Atomic uint32_t exited;     /* shares that have returned */
    _Atomic uint32_t bar_seq;    /* futex word: bumped on any of the above */
    atomic_int bar_sleepers;
    uint64_t *slots;             /* exchange: one 8-byte value per share */
    _Atomic uint64_t solo_until; /* launches run on their caller until then (a straggler was seen) */
    uint64_t solo_ns;            /* the last solo period (under the lock) */
    _Atomic uint64_t lend_until; /* lent threads declined until then (their join stalled a launch) */
    _Atomic uint64_t last_done;  /* when the running launch's last share finished */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

#define OC_MIN_SPLIT_DEFAULT ((size_t)64 * 1024)

/* Two waits mean the machine is busier than its cores, and each pauses
 * what caused it:
 *   - a launch whose caller, done with every share it could claim, then
 *     waited more than OC_STRAGGLER_US (default 1 ms; and more than twice
 *     its own longest share) for a worker's share: that worker was
 *     descheduled. For a while launches run on their caller alone: SOLO_MIN_NS,
 *     doubled (up to SOLO_NS) each time the first split launch after a solo
 *     period straggles again: a blip (another process's threads spinning down)
 *     costs 10 ms on one core, a machine that stays busier than its cores
 *     soon gets the whole 200 ms.
 *   - a launch on lent threads whose helpers returned more than LEND_STALL_NS
 *     after its last share finished: the host's join waited for one of its
 *     threads the OS had descheduled. For LEND_PAUSE_NS, lent threads are
 *     not asked; the engine's own workers run the launches. */
#define SOLO_NS 200000000ull
#define SOLO_MIN_NS 10000000ull
#define LEND_STALL_NS 500000ull
#define LEND_PAUSE_NS 1000000000ull

static _Thread_local oc_engine_helpers_fn tls_helpers; /* the calling thread's lent threads */

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

size_t oc__engine_default_tcm(void)
{
    if (pool.tcm_size) return pool.tcm_size;
    static size_t tcm;
    if (!tcm) {
        /* The core's private L2, at least 1 MiB: tiles of NKI's sizes (two
         * float32 128 x 512 = 512 KiB, plus headers and a third) must fit
         * where L2 is 512 KiB (Zen 3); the excess lives in L3. */
        size_t dflt = oc__cpu_cache_bytes(2);
        if (dflt < 1024 * 1024) dflt = 1024 * 1024;
        tcm = oc__env_size("OC_TCM_SIZE", dflt);
        if (tcm < 4096) tcm = 4096;
    }
    return tcm;
}

static uint32_t default_num_cores(void)
{
    size_t n = oc__env_size("OC_NUM_CORES", 0);
    if (n) return (uint32_t)(n > 1024 ? 1024 : n);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return (uint32_t)CPU_COUNT(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (uint32_t)online : 1;
}

/* Wait for the next job. Spinning only pays when jobs come back to back
 * (a launch loop); when the last gap was longer than the spin budget, the
 * worker sleeps at once and leaves the CPU to the host's other threads
 * (PyTorch's matmul threads, say). */
static void wait_for_generation(uint32_t seen, uint64_t last_gap_ns)
{
    uint64_t deadline = 0, budget = last_gap_ns <= pool.spin_ns ? pool.spin_ns : 0;
    for (unsigned i = 0;; i++) {
        if (atomic_load_explicit(&pool.generation, memory_order_acquire) != seen) return;
        if ((i & 63) == 63 || !budget) {
            uint64_t t = now_ns();
            if (!deadline) deadline = t + budget;
            if (t >= deadline) {
                atomic_fetch_add(&pool.sleepers, 1);
                futex(&pool.generation, FUTEX_WAIT_PRIVATE, seen);
                atomic_fetch_sub(&pool.sleepers, 1);
                deadline = 0;
            }
        }
        cpu_relax();
    }
}

/* x86's MXCSR (rounding, flush-to-zero, denormals-are-zero) is per thread,
 * and a thread starts with its creator's: shares run with the launching
 * thread's, so an op's results never depend on which core ran a share or
 * on what the thread that started the engine had set (XLA runs its work
 * with denormals flushed, for one). */
#if defined(__x86_64__) || defined(__i386__)
static inline unsigned fp_mode(void) { return _mm_getcsr(); }
static inline void set_fp_mode(unsigned m) { _mm_setcsr(m); }
#else
static inline unsigned fp_mode(void) { return 0; }
static inline void set_fp_mode(unsigned m) { (void)m; }
#endif

/* Which share a thread entitled to one takes: in a launch of up to 64
 * shares (one per core), the one it ran last if it is free, else the
 * lowest free one. A row-split op's rows then stay with the thread whose
 * cache holds them from the last call, whichever thread claims first (a
 * lent thread that was already spinning, often, rather than the caller):
 * a [32, 4096] layer norm's shares moving between cores ran 1.5x longer.
 * The claim counter has already reserved one share for the thread, so a
 * free one exists. */
static uint32_t pick_share(oc_core *core, uint32_t n)
{
    uint32_t p = core->last_share;
    uint64_t bit = p < n ? 1ull << p : 0;
    while (!bit || (atomic_fetch_or(&pool.taken, bit) & bit))
        bit = 1ull << __builtin_ctzll(~atomic_load(&pool.taken));
    return (uint32_t)__builtin_ctzll(bit);
}

/* Take shares of the current job until none are left. A launch resets the
 * claim counter after publishing its job, so a late thread can never take
 * a share of a job that has finished: it gets an id >= ncores, or a share
 * of the next job, which is already published (release/acquire through
 * `claim`). */
static void run_claimed_shares(oc_core *core, uint64_t *longest)
{
    unsigned own = fp_mode(), cur = own;
    for (;;) {
        uint64_t c = atomic_fetch_add_explicit(&pool.claim, 1, memory_order_acq_rel);
        oc_exec *job = pool.job;
        uint32_t id = (uint32_t)c;
        if (!job || id >= job->ncores) {
            if (cur != own) set_fp_mode(own);
            return;
        }
        if (!job->grid_ndim && job->ncores <= 64)
            id = core->last_share = pick_share(core, job->ncores);
        if (pool.fpcsr != cur) set_fp_mode(cur = pool.fpcsr);
        uint64_t t0 = longest ? now_ns() : 0;
        if (!job->grid_ndim || !atomic_load_explicit(&job->failure->failed, memory_order_relaxed))
            job->run_share(core, job, id); /* a grid stops at its first failure */
        if (longest) {
            uint64_t took = now_ns() - t0;
            if (took > *longest) *longest = took;
        }
        /* Shares still waiting at a barrier learn that this one is gone. */
        atomic_fetch_add(&pool.exited, 1);
        atomic_fetch_add(&pool.bar_seq, 1);
        if (atomic_load(&pool.bar_sleepers) > 0) futex(&pool.bar_seq, FUTEX_WAKE_PRIVATE, INT32_MAX);
        if (atomic_fetch_sub_explicit(&pool.pending, 1, memory_order_acq_rel) == 1) {
            atomic_store_explicit(&pool.last_done, now_ns(), memory_order_relaxed);
            if (atomic_load(&pool.waiter_sleeping)) futex(&pool.pending, FUTEX_WAKE_PRIVATE, 1);
        }
    }
}

static void *worker_main(void *arg)
{
    oc_core *core = pool.cores[(uintptr_t)arg];
    /* Named, for debuggers, top -H and profilers (and the tests that check
     * where shares ran): "opcore-core N". */
    char name[16];
    snprintf(name, sizeof name, "opcore-core %u", (unsigned)(uintptr_t)arg);
    pthread_setname_np(pthread_self(), name);
    /* Not the current value: a launch may already have bumped it. */
    uint32_t seen = pool.start_generation;
    oc__fault_thread_init(core);
    uint64_t last_gap = 0, done_at = now_ns();
    for (;;) {
        wait_for_generation(seen, last_gap);
        last_gap = now_ns() - done_at;
        seen = atomic_load_explicit(&pool.generation, memory_order_acquire);
        if (atomic_load(&pool.stopping)) break;
        run_claimed_shares(core, NULL);
        done_at = now_ns();
    }
    /* The signal stack belongs to this thread: disable before freeing. */
    return NULL;
}

static oc_status start_locked(void)
{
    if (atomic_load(&pool.started)) return OC_OK;
    uint32_t n = pool.num_cores ? pool.num_cores : default_num_cores();
    size_t tcm = oc__engine_default_tcm();
    pool.spin_ns = oc__env_size("OC_SPIN_US", 50) * 1000;
    pool.straggler_ns = oc__env_size_or_off("OC_STRAGGLER_US", 1000) * 1000;
    atomic_store(&pool.solo_until, 0);
    atomic_store(&pool.lend_until, 0);
    if (!atomic_load(&pool.min_split_set)) /* "0": always split */
        atomic_store(&pool.min_split_bytes, oc__env_size_or_off("OC_MIN_SPLIT_BYTES", OC_MIN_SPLIT_DEFAULT));
    pool.cores = oc__calloc(n, sizeof *pool.cores);
    pool.threads = oc__calloc(n, sizeof *pool.threads);
    pool.slots = oc__calloc(n, sizeof *pool.slots);
    if (!pool.cores || !pool.threads || !pool.slots) goto nomem;
    atomic_store(&pool.stopping, false);
    for (uint32_t i = 1; i < n; i++) {
        pool.cores[i] = oc__core_create(tcm);
        if (!pool.cores[i] || oc__fault_stack_alloc(pool.cores[i])) goto nomem;
        pool.cores[i]->lane = pool.cores[i]->last_share = i;
    }
    oc__fault_install();
    pool.ncores = n;
    pool.start_generation = atomic_load(&pool.generation);
    for (uint32_t i = 1; i < n; i++) {
        if (pthread_create(&pool.threads[i], NULL, worker_main, (void *)(uintptr_t)i) != 0) {
            pool.ncores = i; /* run with what we have */
            break;
        }
    }
    atomic_store(&pool.started, true);
    return OC_OK;
nomem:
    for (uint32_t i = 1; pool.cores && i < n; i++) oc__core_destroy(pool.cores[i]);
    oc__free(pool.cores);
    oc__free(pool.threads);
    oc__free(pool.slots);
    pool.cores = NULL;
    pool.threads = NULL;
    pool.slots = NULL;
    return oc_set_error(OC_ENOMEM, "cannot start the engine: out of memory for %u cores", n);
}

oc_status oc__pool_start(void)
{
    if (atomic_load_explicit(&pool.started, memory_order_acquire)) return OC_OK;
    pthread_mutex_lock(&pool.lock);
    oc_status st = start_locked();
    pthread_mutex_unlock(&pool.lock);
    return st;
}

oc_status oc_engine_configure(uint32_t num_cores, size_t tcm_bytes)
{
    pthread_mutex_lock(&pool.lock);
    oc_status st = OC_OK;
    if (atomic_load(&pool.started))
        st = oc_set_error(OC_EINVAL, "oc_engine_configure: the engine has already started "
                                     "(call it before the first op, or after oc_engine_shutdown)");
    else if (tcm_bytes && tcm_bytes < 4096)
        st = oc_set_error(OC_EINVAL, "oc_engine_configure: TCM of %zu bytes is too small (>= 4096)", tcm_bytes);
    else {
        pool.num_cores = num_cores;
        pool.tcm_size = tcm_bytes;
    }
    pthread_mutex_unlock(&pool.lock);
    return st;
}

uint32_t oc_engine_num_cores(void)
{
    if (oc__pool_start() != OC_OK) return 1;
    return pool.ncores;
}

size_t oc_engine_tcm_size(void) { return oc__engine_default_tcm(); }

void oc_engine_set_min_split_bytes(size_t bytes)
{
    atomic_store(&pool.min_split_bytes, bytes);
    atomic_store(&pool.min_split_set, true);
}

size_t oc_engine_min_split_bytes(void)
{
    if (oc__pool_start() != OC_OK) return OC_MIN_SPLIT_DEFAULT;
    return (size_t)atomic_load(&pool.min_split_bytes);
}

void oc_engine_shutdown(void)
{
    pthread_mutex_lock(&pool.lock);
    if (atomic_load(&pool.started)) {
        atomic_store(&pool.stopping, true);
        atomic_fetch_add(&pool.generation, 1);
        futex(&pool.generation, FUTEX_WAKE_PRIVATE, INT32_MAX);
        for (uint32_t i = 1; i < pool.ncores; i++) pthread_join(pool.threads[i], NULL);
        for (uint32_t i = 1; i < pool.ncores; i++) oc__core_destroy(pool.cores[i]);
        oc__free(pool.cores);
        oc__free(pool.threads);
        oc__free(pool.slots);
        pool.cores = NULL;
        pool.threads = NULL;
        pool.slots = NULL;
        pool.ncores = 0;
        atomic_store(&pool.started, false);
    }
    pthread_mutex_unlock(&pool.lock);
}

/* True if the launch's tensors (its inputs, counted by the call path in
 * job->bytes_in, and its results) reach `limit` bytes. */
static bool job_reaches(const oc_exec *job, uint64_t limit)
{
    uint64_t bytes = job->bytes_in;
    for (int i = 0; i < job->ndst && bytes < limit; i++) bytes += (uint64_t)oc_nbytes(&job->dsts[i]);
    return bytes >= limit;
}

void oc_engine_set_thread_helpers(oc_engine_helpers_fn run) { tls_helpers = run; }

/* Offer the running launch to the engine's workers: bump the generation
 * they spin or sleep on, and wake the sleeping ones. */
static void offer_to_workers(void)
{
    if (!atomic_exchange(&pool.offered, true)) atomic_fetch_add(&pool.generation, 1);
    if (atomic_load_explicit(&pool.sleepers, memory_order_seq_cst) > 0)
        futex(&pool.generation, FUTEX_WAKE_PRIVATE, INT32_MAX);
}

/* Offer the launch to the workers if shares of it are still unclaimed
 * (after lent threads took theirs, or while a share waits at a barrier for
 * one nobody has claimed). */
static void wake_for_unclaimed(const oc_exec *job)
{
    if ((uint32_t)atomic_load(&pool.claim) < job->ncores) offer_to_workers();
}

/* What a lent thread runs: claim shares of the current launch on its own
 * core until none are left. */
static void help_claim(void)
{
    oc_core *core = oc__thread_core();
    if (core) run_claimed_shares(core, NULL);
}

/* Every instance of a grid launch on the caller, in order, stopping at the
 * first failure. */
static void run_grid_here(oc_core *caller, oc_exec *job)
{
    for (uint32_t id = 0; id < job->ncores && !atomic_load(&job->failure->failed); id++)
        job->run_share(caller, job, id);
}

oc_status oc__pool_launch(oc_core *caller, oc_exec *job)
{
    oc_status st = oc__pool_start();
    if (st != OC_OK) return st;
    /* A grid's instances were counted by the caller (job->ncores); a
     * multicore launch has one share per core. */
    uint32_t n = job->grid_ndim ? job->ncores : pool.ncores;
    if (n <= 1 || pool.ncores <= 1 ||
        !job_reaches(job, atomic_load_explicit(&pool.min_split_bytes, memory_order_relaxed)) ||
        now_ns() < atomic_load_explicit(&pool.solo_until, memory_order_relaxed)) {
        /* Too small to split, or the machine too busy to wait for workers:
         * on the caller's core, no lock (several host threads may do this
         * at once); a multicore op as one share. */
        if (job->grid_ndim) {
            run_grid_here(caller, job);
        } else {
            job->ncores = 1;
            job->run_share(caller, job, 0);
        }
        return OC_OK;
    }
    pthread_mutex_lock(&pool.lock);
    job->ncores = n;
    atomic_store(&pool.pending, n);
    atomic_store(&pool.bar_count, 0);
    atomic_store(&pool.bar_done, 0);
    atomic_store(&pool.exited, 0);
    pool.job = job;
    pool.fpcsr = fp_mode();
    atomic_store(&pool.offered, false);
    atomic_store_explicit(&pool.taken, 0, memory_order_relaxed);
    atomic_store_explicit(&pool.claim, 0, memory_order_release);
    oc_engine_helpers_fn helpers = tls_helpers;
    if (helpers && now_ns() < atomic_load_explicit(&pool.lend_until, memory_order_relaxed)) helpers = NULL;
    uint64_t t_done = 0, longest = 0; /* the caller's own shares, when it ran them */
    bool lent = helpers && helpers(help_claim, n < pool.ncores ? n : pool.ncores);
    if (lent) {
        uint64_t t = now_ns(), done = atomic_load(&pool.last_done);
        if (atomic_load(&pool.pending) == 0 && t - done > LEND_STALL_NS)
            atomic_store_explicit(&pool.lend_until, t + LEND_PAUSE_NS, memory_order_relaxed);
    } else {
        offer_to_workers();
        run_claimed_shares(caller, &longest);
        t_done = now_ns();
    }
    wake_for_unclaimed(job); /* lent threads could not take them all */

    uint64_t deadline = 0;
    for (unsigned i = 0;; i++) {
        uint32_t left = atomic_load_explicit(&pool.pending, memory_order_acquire);
        if (left == 0) break;
        if ((i & 63) == 63) {
            uint64_t t = now_ns();
            if (!deadline) deadline = t + pool.spin_ns;
            else if (t > deadline) {
                atomic_store(&pool.waiter_sleeping, 1);
                left = atomic_load(&pool.pending);
                if (left) futex(&pool.pending, FUTEX_WAIT_PRIVATE, left);
                atomic_store(&pool.waiter_sleeping, 0);
            }
        }
        cpu_relax();
    }
    if (t_done) {
        uint64_t t = now_ns(), waited = t - t_done;
        if (pool.straggler_ns && waited > pool.straggler_ns && waited > 2 * longest) {
            /* a launch begun within one period of the last one's end: twice as long */
            uint64_t until = atomic_load_explicit(&pool.solo_until, memory_order_relaxed);
            bool again = until && t_done - until < pool.solo_ns;
            pool.solo_ns = !again ? SOLO_MIN_NS : 2 * pool.solo_ns > SOLO_NS ? SOLO_NS
                                                                             : 2 * pool.solo_ns;
            atomic_store_explicit(&pool.solo_until, t + pool.solo_ns, memory_order_relaxed);
        }
    }
    pool.job = NULL;
    pthread_mutex_unlock(&pool.lock);
    return OC_OK;
}


/* ---- collectives --------------------------------------------------------------
 *
 * A barrier counts arrivals; the last share to arrive completes it. Waiting
 * shares spin briefly, then sleep on bar_seq, which changes whenever a
 * barrier completes or a share returns: a share that failed (or returned
 * without reaching the barrier) can never arrive, so the waiters fail
 * instead of hanging. More shares than CPUs is fine: every share is held by
 * its own thread while it waits, so the others get claimed and run. */

static _Noreturn void barrier_fail(oc_core *core, const char *why)
{
    const oc_exec *e = core->exec;
    char msg[512];
    snprintf(msg, sizeof msg, "op '%s': kernel '%s' on core %u: %s (at oc_barrier #%u)", e->name,
             e->kernel_name, core->id, why, core->barriers + 1);
    oc__core_fail(core, OC_EKERNEL, msg);
}

void oc__pool_barrier(oc_core *core)
{
    oc_exec *job = core->exec;
    uint32_t n = job->ncores, target = core->barriers + 1;
    if (n <= 1) {
        core->barriers = target;
        return;
    }
    if (atomic_fetch_add(&pool.bar_count, 1) + 1 == n) {
        atomic_store(&pool.bar_count, 0);
        atomic_store(&pool.bar_done, target);
        atomic_fetch_add(&pool.bar_seq, 1);
        if (atomic_load(&pool.bar_sleepers) > 0) futex(&pool.bar_seq, FUTEX_WAKE_PRIVATE, INT32_MAX);
        core->barriers = target;
        return;
    }
    uint64_t deadline = 0;
    for (unsigned i = 0;; i++) {
        uint32_t seq = atomic_load(&pool.bar_seq);
        if (atomic_load(&pool.bar_done) >= target) break;
        if (atomic_load(&job->failure->failed)) barrier_fail(core, "stopped: another core failed");
        if (atomic_load(&pool.exited)) {
            if (atomic_load(&pool.bar_done) >= target) break;
            barrier_fail(core, "another core returned from the kernel without reaching this "
                               "barrier (every core must make the same oc_barrier/oc_all_* calls)");
        }
        if ((i & 63) == 63) {
            uint64_t t = now_ns();
            if (!deadline) deadline = t + pool.spin_ns;
            else if (t > deadline) {
                wake_for_unclaimed(job); /* the share this one waits for may have nobody to run it */
                atomic_fetch_add(&pool.bar_sleepers, 1);
                futex(&pool.bar_seq, FUTEX_WAIT_PRIVATE, seq);
                atomic_fetch_sub(&pool.bar_sleepers, 1);
            }
        }
        cpu_relax();
    }
    core->barriers = target;
}

void oc__pool_allreduce(oc_core *core, const void *mine, oc_combine_fn combine, void *out)
{
    memcpy(&pool.slots[core->id], mine, sizeof *pool.slots);
    oc__pool_barrier(core);
    memcpy(out, &pool.slots[0], sizeof *pool.slots);
    for (uint32_t i = 1; i < core->exec->ncores; i++) combine(out, &pool.slots[i]);
    oc__pool_barrier(core); /* nobody overwrites a slot before all have read */
}

void *const *oc__pool_publish(oc_core *core, void *mine)
{
    pool.slots[core->id] = (uint64_t)(uintptr_t)mine;
    oc__pool_barrier(core);
    _Static_assert(sizeof(void *) <= sizeof *pool.slots, "a pointer fits a slot");
    return (void *const *)(void *)pool.slots;
}
