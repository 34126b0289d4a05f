/* src/engine/core.h — an engine core: one thread's execution context
 * (internal).
 *
 * Every thread that runs kernels owns one oc_core: the engine's worker
 * threads, and each host thread that calls ops (it is core 0 of its calls).
 * A core holds the TCM arena, the kernel stack with its guard region, the
 * jump buffer used to end a failing kernel, and the running call's state:
 * its call context (core/ctx.h: mode, temporaries, hooks), which the core
 * installs on the thread while the call runs, open streams, profiler
 * counters. The engine knows nothing of ops, libraries or streams: what it
 * runs comes in an oc_exec, what it must call back comes as hooks.
 */
#ifndef OPCORE_ENGINE_CORE_H
#define OPCORE_ENGINE_CORE_H

#include <setjmp.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#include <ffi.h>

#include "core/ctx.h"
#include "opcore/library.h"
#include "opcore/tensor.h"
#include "profiler/hooks.h"

struct oc_core;
struct oc_exec;

/* What the oc_dim_* helpers record while a shape function is traced for
 * dynamic shapes (host/trace.c reads it back). */
#define OC_DIM_LOG_MAX 256
typedef struct oc_dim_entry {
    int op; /* oc_dim_op */
    int64_t a, b, r;
} oc_dim_entry;
typedef struct oc_dim_log {
    int n;
    bool overflow;
    oc_dim_entry e[OC_DIM_LOG_MAX];
} oc_dim_log;

/* Runs share `id` of a multicore launch on `core`: handed down by the call
 * path (the engine never calls up into it). */
typedef void (*oc_share_fn)(struct oc_core *core, struct oc_exec *job, uint32_t id);

/* oc_shared_alloc calls per launch (kernel.h). */
#define OC_MAX_SHARED 8

/* One call of a kernel or shape function, shared by all cores running it.
 * The engine knows nothing of ops: the caller (host/call.c) fills in what
 * to run and the names the engine's messages use. */
/* A direct call's argument registers (engine/core.c: oc__direct_plan):
 * integer and pointer ones, then doubles. */
typedef struct oc_direct_regs {
    uint64_t g[6];
    double d[4];
} oc_direct_regs;

typedef struct oc_exec {
    oc_fn fn;                  /* kernel or shape function */
    void **ffi_values;         /* libffi argument slots */
    const ffi_cif *cif;        /* fn's C signature */
    const uint8_t *direct;     /* how to load each argument for a direct call (oc__direct_plan); NULL: libffi */
    const oc_direct_regs *regs; /* direct call: the registers, loaded once by the caller (a prepared
                                   call, whose argument slots never change); NULL: loaded per call */
    size_t stack_size;         /* kernel: the stack it needs */
    const char *name;          /* "lib::op" (or, OC_MODE_LIBRARY, what runs), for messages */
    const char *kernel_name;   /* for messages */
    const char *shape_fn_name; /* for messages */
    const void *owner;         /* the caller's own record of the call (host/call.c: the struct oc_op),
                                  read back by the kernel API above the engine; never by it */
    oc_tensor *dsts;     /* the results: outputs (kernel) or metas being described (shape) */
    int ndst;            /* number of results */
    uint32_t described;  /* shape mode: bit i set once result i is described */
    uint32_t ncores;     /* shares: cores running it, or (grid launch) program instances */
    int grid_ndim;       /* a grid launch: 1 to 3 axes (0: none; shape mode: set by oc_set_grid) */
    int64_t grid[3];     /* its dims; instance `id` is row-major over them */
    uint64_t bytes_in;   /* total input bytes: for the profiler, and (multicore) whether to split */
    bool debug;          /* a --debug build: TCM blocks get redzones (tcm.c) */
    oc_share_fn run_share;           /* multicore: runs one share */
    struct oc_exec_failure *failure; /* multicore: where shares report */
    /* Workspaces shared by the launch's cores (kernel/collective.c:
     * oc_shared_alloc), made by core 0, freed when the launch ends
     * (oc__exec_release); NULL until the first (a pointer, not the table:
     * every call fills an oc_exec). */
    struct oc_shared_set *shared;
} oc_exec;

typedef struct oc_shared_set {
    int n;
    void *block[OC_MAX_SHARED];
    size_t bytes[OC_MAX_SHARED];
} oc_shared_set;

/* The first failure among a multicore launch's shares. */
typedef struct oc_exec_failure {
    atomic_int failed;
    oc_status status;
    char msg[4096];
    /* what the shares of an op returning a Tensor returned: oc_dst_tensor()
     * on some and NULL on others means a core may have left its share
     * unwritten (host/call.c) */
    atomic_bool some_dst, some_null;
    _Atomic uint32_t null_share;   /* a share that returned NULL */
} oc_exec_failure;

typedef struct oc_stream_impl oc_stream_impl;

typedef struct oc_core {
    oc_ctx ctx;               /* mode, guarded flag, temporaries, hooks: core/ctx.h */
    uint32_t id, count;       /* oc_cpu_id / oc_cpu_count of the running call (a grid launch:
                                 the instance's linear id and the number of instances) */
    uint32_t lane;            /* the engine core this is: 0 for a calling thread, i for worker i */
    uint32_t last_share;      /* the share this thread ran last (pool.c: it takes it again) */
    oc_exec *exec;

    char *tcm;                /* TCM arena */
    size_t tcm_size;
    uint32_t tcm_allocs;      /* oc_tcm_malloc calls of this call so far (debug messages number them) */

    char *stack_map;          /* guard region + kernel stack */
    size_t stack_map_size;
    char *stack_lo;           /* lowest usable byte of the kernel stack */
    size_t stack_size;        /* usable bytes */
    size_t stack_requested;   /* the op's stack size the stack was made for */
    void *altstack;           /* signal stack this core installed, if any */

    sigjmp_buf jump;          /* where a failure or fault resumes */
    volatile int fault_signal;
    volatile int fault_code;        /* si_code: <= 0 when sent by kill/raise */
    volatile int fault_pid;         /* the sender, when sent */
    void *volatile fault_addr;
    void *volatile fault_sp;        /* the stack pointer at the fault */

    bool failed;
    oc_status fail_status;
    char fail_msg[4096];

    void *ret;                /* what the kernel returned */
    struct oc_dim_log *dim_log; /* shape mode: where oc_dim_* record (NULL: off) */
    uint32_t barriers;        /* oc_barrier calls of this share so far */
    int shared_calls;         /* oc_shared_alloc calls of this share so far */
    oc_stream_impl *streams;  /* open streams (kernel/stream.c; closed by its ctx.at_end hook) */
    oc_prof_counters counters;

    /* Kernels run on the calling thread's own stack where it has room for
     * the op's stack size (engine/core.c: run_in_place): its usable bytes
     * [host_lo, host_hi), read once; in_place says where the running
     * kernel is. */
    char *host_lo, *host_hi;
    bool host_known;
    bool in_place;

    /* Switching to the kernel stack (engine/core.c): the stack's context is
     * entered once through kernel_ctx, then host and kernel jump between
     * host_env and kernel_env (__builtin_setjmp buffers: no signal mask,
     * no unwinding, a few instructions). */
    ucontext_t kernel_ctx;
    void *host_env[5];        /* where the host resumes when the kernel is done */
    void *kernel_env[5];      /* where the parked kernel side resumes */
    bool kernel_parked;       /* kernel_env is valid (the stack was entered) */
    const void *host_stack_bottom; /* the host stack, for ASan's fiber switches */
    size_t host_stack_size;

    /* The call path on a spare stack, for threads with little room left
     * (engine/core.c: oc__run_on_spare_stack). */
    char *spare_map;          /* guard region + spare stack; NULL until needed */
    unsigned spare_valgrind;  /* its valgrind stack id */
    ucontext_t spare_ctx;
    oc_status (*spare_fn)(void *arg);
    void *spare_arg;
    oc_status spare_status;
    bool spare_busy;          /* a call runs on the spare stack (or above it) */
    const void *spare_back_bottom; /* the thread's own stack, for ASan */
    size_t spare_back_size;
} oc_core;

/* The program id of instance `id` of a grid launch: its row-major
 * coordinates over e->grid (p[a] = 0 for the axes past the grid's). */
static inline void oc__grid_coords(const oc_exec *e, uint64_t id, int64_t p[3])
{
    p[0] = p[1] = p[2] = 0;
    for (int a = e->grid_ndim - 1; a >= 0; a--) {
        p[a] = (int64_t)(id % (uint64_t)e->grid[a]);
        id /= (uint64_t)e->grid[a];
    }
}

/* The calling thread's core, created on first use (NULL if out of memory,
 * with the error set). */
oc_core *oc__thread_core(void);

_Static_assert(offsetof(oc_core, ctx) == 0, "oc__core_of relies on ctx being oc_core's first member");

/* The core whose context is `ctx` (ctx is its first member). */
static inline oc_core *oc__core_of(oc_ctx *ctx)
{
    return (oc_core *)(void *)ctx;
}

/* The core running a call on this thread, or NULL outside calls: the
 * installed call context is always a core's (only the engine installs). */
static inline oc_core *oc__core_current(void)
{
    return oc__core_of(oc__ctx_current());
}

/* The core running a kernel on this thread. Elsewhere (a shape function,
 * or no call at all) raises an error naming `fn` and returns NULL. */
oc_core *oc__kernel_core(const char *fn);

/* Create / destroy a core (workers use these directly). */
oc_core *oc__core_create(size_t tcm_size);
void oc__core_destroy(oc_core *core);

/* Run `exec` on `core` on the current thread: a kernel on the core's
 * engine stack, a shape function in place. Returns OC_OK or the failure
 * (message in core->fail_msg). Temporaries and TCM are released after,
 * except the returned tensor, left in core->ret (caller frees it). */
oc_status oc__core_run(oc_core *core, oc_exec *exec, oc_core_mode mode, uint32_t id, uint32_t count);

/* Whether a function of signature `cif` can be called without libffi on
 * this platform (core.c's direct call), and how to load each argument:
 * kinds[i] for each of cif->nargs. Worked out once per op, at load. */
bool oc__direct_plan(const ffi_cif *cif, uint8_t *kinds);

/* Load the registers of a direct call of `e` (e->direct set) from its
 * argument slots. */
void oc__direct_load(const oc_exec *e, oc_direct_regs *regs);

/* Stack the call path (binding, the shape function, result checks and
 * their messages) may take on the calling thread before a kernel runs. */
#define OC_CALL_PATH_ROOM ((size_t)128 * 1024)

/* Per thread, the bottom of its short band (core.c): a direct-mapped
 * table keyed by the thread pointer. */
#define OC_ROOM_SLOTS 256
typedef struct oc_room_slot {
    _Alignas(16) _Atomic uintptr_t lo; /* the band's bottom (0: a stack opcore cannot place) */
    _Atomic uintptr_t tp;              /* the thread it is for */
} oc_room_slot;
extern oc_room_slot oc__room[OC_ROOM_SLOTS] __attribute__((visibility("hidden")));
static inline size_t oc__room_slot(uintptr_t tp)
{
    return (size_t)(tp >> 12) & (OC_ROOM_SLOTS - 1);
}

/* The stack pointer, without forcing a frame pointer on the caller. */
static inline uintptr_t oc__stack_pointer(void)
{
    uintptr_t sp;
#if defined(__x86_64__)
    __asm__("mov %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
    __asm__("mov %0, sp" : "=r"(sp));
#else
    sp = (uintptr_t)__builtin_frame_address(0);
#endif
    return sp;
}

/* False when the calling thread surely has OC_CALL_PATH_ROOM of stack left
 * below here (or is on a stack opcore cannot place): two loads, two
 * comparisons, no call. True: ask oc__call_stack_short. A call site keeps
 * its fast path free of calls by taking a noinline slow path on true
 * (host/call.c). */
static inline bool oc__call_stack_maybe_short(void)
{
    uintptr_t sp = oc__stack_pointer(), tp = (uintptr_t)__builtin_thread_pointer();
    oc_room_slot *r = &oc__room[oc__room_slot(tp)];
    uintptr_t lo = atomic_load_explicit(&r->lo, memory_order_acquire);
    if (__builtin_expect(atomic_load_explicit(&r->tp, memory_order_relaxed) != tp, 0)) return true;
    return sp - lo < OC_CALL_PATH_ROOM; /* lo 0: never (sp is above 128 KiB) */
}

/* Whether the calling thread's stack has less than OC_CALL_PATH_ROOM left
 * below here (a stack opcore cannot place: no). Writes the thread's slot
 * the first time; creates the thread's core. */
bool oc__call_stack_short(void);

/* The check as call sites write it: the inline test, the call only when it
 * is not sure. */
#define OC_CALL_STACK_SHORT() \
    (__builtin_expect(oc__call_stack_maybe_short(), 0) && oc__call_stack_short())

/* Run fn(arg) on a spare stack of the calling thread's core (1 MiB, mapped
 * at the first use) and come back with what it returned: the call path of
 * a thread whose own stack is short. OC_ENOMEM if the spare stack cannot
 * be mapped (fn does not run). */
oc_status oc__run_on_spare_stack(oc_status (*fn)(void *arg), void *arg);

/* Free what a finished launch of `exec` kept for all its cores (the
 * workspaces of oc_shared_alloc); the exec can run again. */
void oc__exec_release(oc_exec *exec);

/* Free everything a finished call left on the core (temporaries, TCM). */
void oc__core_release(oc_core *core);

/* Record a failure on the current core and leave the kernel (longjmp). */
_Noreturn void oc__core_fail(oc_core *core, oc_status status, const char *msg);

/* TCM arena management. */
void oc__tcm_reset(oc_core *core);
/* Debug builds: fail the core's call if a live TCM block's redzone was
 * written (called when the kernel returns; tcm.c). */
void oc__tcm_check(oc_core *core);
bool oc__tcm_contains(const oc_core *core, const void *p, size_t bytes);

/* Faults: install the process-wide handlers (idempotent) and make sure
 * this thread has an alternate signal stack. */
void oc__fault_install(void);
oc_status oc__fault_thread_init(oc_core *core);

/* Allocate `core`'s signal stack (if it has none yet) on the calling
 * thread, so a worker's is allocated, and can fail, before it starts. */
oc_status oc__fault_stack_alloc(oc_core *core);

/* Turn the fault the signal handler recorded on `core` into its failure
 * status and message (fault.c). */
void oc__fault_describe(oc_core *core);

/* "op 'lib::op': kernel 'k' on core 1" -- where the running call is, for
 * messages (escape.c). */
void oc__core_where(const oc_core *core, char *buf, size_t len);

/* Run fn(arg) on the calling thread under the fault and escape guard
 * (OC_MODE_LIBRARY): a fault, exit(), abort() or oc__raise there ends it
 * with an error prefixed by `label` ("the OC_LIBRARY block of library 'x'
 * (path)"), returned, the thread's error set. Inside a running call fn is
 * already guarded and just called. (escape.c) */
oc_status oc__run_protected(void (*fn)(void *arg), void *arg, const char *label);

/* The guard region below every kernel stack (core.c). */
#define OC_STACK_GUARD ((size_t)64 * 1024)

/* Engine-wide settings. */
size_t oc__engine_default_tcm(void);
size_t oc__page_size(void);

#endif /* OPCORE_ENGINE_CORE_H */
