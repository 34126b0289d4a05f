/* Engine cores: creation, kernel stacks, and running one kernel or shape
 * function under fault protection.
 *
 * Kernels run on an engine-owned stack of the op's configured size, with an
 * inaccessible guard region below it. The stack's context is entered once
 * with makecontext/swapcontext (which save and set the signal mask: two
 * system calls); from then on host and kernel switch with the compiler's
 * __builtin_setjmp / __builtin_longjmp, which keep only the frame and stack
 * pointers and the resume address (the compiler saves the other registers
 * around the setjmp): no system call, and a few instructions where libc's
 * siglongjmp unwinds and checks (about 150 per call). No frame is abandoned
 * by these switches: both sides resume where they parked. The kernel side
 * is a loop (kernel_main) that runs one call, then parks itself and jumps
 * back to the host; the next call jumps into the parked frame. A fault
 * while the kernel runs lands in the signal handler (fault.c), which jumps
 * back to the loop's sigsetjmp on the kernel stack with siglongjmp (which
 * does abandon frames, and which sanitizers intercept); the loop then
 * parks as after any call.
 *
 * (Jumping between two live stacks with longjmp is the coroutine technique
 * QEMU uses too; it needs _FORTIFY_SOURCE's longjmp check off, and would
 * need a shadow-stack switch on a CPU running with CET shadow stacks.)
 */
#undef _FORTIFY_SOURCE /* longjmp between stacks is intended here */
#include <ffi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "engine/core.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define OC_HAVE_VALGRIND 1
#endif
#endif

/* Under AddressSanitizer, tell it about each switch to and from a kernel
 * stack, so it tracks the right stack (no false reports, no warnings). */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define OC_ASAN_FIBERS 1
#endif

#define OC_STACK_RESERVE ((size_t)16 * 1024)  /* opcore's own frames: ffi, printf */
#define OC_SPARE_STACK ((size_t)1 << 20)      /* the call path of a thread whose stack is short */

static _Thread_local oc_core *tls_core;     /* this thread's core */
static pthread_key_t core_key;
static pthread_once_t core_key_once = PTHREAD_ONCE_INIT;

size_t oc__page_size(void)
{
    static size_t page;
    if (!page) page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

static void room_forget(void);
static void thread_core_dtor(void *p)
{
    room_forget();
    oc__core_destroy(p);
}
static void make_core_key(void) { pthread_key_create(&core_key, thread_core_dtor); }

/* The core's fail hook (its ctx.fail): prefix the message with where it
 * happened (op, function, core) and end the call. A failure opcore raises
 * inside a kernel (a TCM range, an accessor's bounds) is the kernel's
 * failure, not a bad argument of the call: OC_EINVAL becomes OC_EKERNEL,
 * so Python raises OpError rather than OpArgumentError. (In a shape
 * function it stays: there it means the inputs do not fit.) */
__attribute__((noreturn)) static void fail_here(oc_ctx *ctx, oc_status status, const char *fmt, va_list ap)
{
    oc_core *c = oc__core_of(ctx);
    char msg[3072], where[1024], full[sizeof where + sizeof msg + 2];
    vsnprintf(msg, sizeof msg, fmt, ap);
    oc__core_where(c, where, sizeof where);
    snprintf(full, sizeof full, "%s: %s", where, msg);
    oc__core_fail(c, ctx->mode == OC_MODE_KERNEL && status == OC_EINVAL ? OC_EKERNEL : status, full);
}

oc_core *oc__core_create(size_t tcm_size)
{
    oc_core *c = oc__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->tcm_size = tcm_size;
    c->tcm = oc__aligned_alloc(64, tcm_size);
    if (!c->tcm) { oc__free(c); return NULL; }
    oc__ctx_init(&c->ctx, fail_here);
    c->count = 1;
    oc__tcm_reset(c);
    return c;
}

static void free_stack(oc_core *c)
{
    if (!c->stack_map) return;
#ifdef OC_HAVE_VALGRIND
    VALGRIND_STACK_DEREGISTER((unsigned)(uintptr_t)c->stack_map);
#endif
    munmap(c->stack_map, c->stack_map_size);
    c->stack_map = NULL;
    c->stack_size = 0;
    c->stack_requested = 0;
    c->kernel_parked = false; /* its parked frame went with the stack */
}

void oc__core_destroy(oc_core *c)
{
    if (!c) return;
    if (c == tls_core) tls_core = NULL;
    oc__core_release(c);
    oc__tensor_cache_free(&c->ctx);
    free_stack(c);
    if (c->spare_map) {
#ifdef OC_HAVE_VALGRIND
        VALGRIND_STACK_DEREGISTER(c->spare_valgrind);
#endif
        munmap(c->spare_map, OC_SPARE_STACK + OC_STACK_GUARD);
    }
    if (c->altstack) {
        stack_t off = {.ss_flags = SS_DISABLE};
        stack_t cur;
        /* Only turn off the signal stack if it is still the one we set. */
        if (sigaltstack(NULL, &cur) == 0 && cur.ss_sp == c->altstack) sigaltstack(&off, NULL);
        oc__free(c->altstack);
    }
    oc__aligned_free(c->tcm);
    oc__free(c);
}

oc_core *oc__thread_core(void)
{
    if (tls_core) return tls_core;
    pthread_once(&core_key_once, make_core_key);
    oc_core *c = oc__core_create(oc__engine_default_tcm());
    if (!c) {
        oc_set_error(OC_ENOMEM, "cannot allocate an engine core (TCM of %zu bytes)",
                     oc__engine_default_tcm());
        return NULL;
    }
    if (oc__fault_thread_init(c) != OC_OK) {
        oc__core_destroy(c);
        return NULL;
    }
    tls_core = c;
    pthread_setspecific(core_key, c);
    return c;
}

oc_core *oc__kernel_core(const char *fn)
{
    oc_core *c = oc__core_current();
    if (c && c->ctx.mode == OC_MODE_KERNEL) return c;
    bool shape = c && c->ctx.mode == OC_MODE_SHAPE;
    oc__raise(shape ? OC_EMETA : OC_EINVAL, "%s: only a running kernel may call it (called %s)", fn,
              shape ? "from a shape function: shapes and dtypes only" : "outside a kernel");
    return NULL;
}

/* Make the core's kernel stack fit `requested` bytes: reuse it if the size
 * is unchanged (the common case: no syscall per call). */
static oc_status ensure_stack(oc_core *c, size_t requested)
{
    if (c->stack_map && c->stack_requested == requested) return OC_OK;
    free_stack(c);
    size_t page = oc__page_size();
    size_t usable = (requested + OC_STACK_RESERVE + page - 1) / page * page;
    size_t total = usable + OC_STACK_GUARD;
    char *map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (map == MAP_FAILED)
        return oc_set_error(OC_ENOMEM, "cannot map a kernel stack of %zu bytes", usable);
    if (mprotect(map, OC_STACK_GUARD, PROT_NONE) != 0) {
        munmap(map, total);
        return oc_set_error(OC_ENOMEM, "cannot protect the kernel stack's guard region");
    }
    c->stack_map = map;
    c->stack_map_size = total;
    c->stack_lo = map + OC_STACK_GUARD;
    c->stack_size = usable;
    c->stack_requested = requested;
#ifdef OC_HAVE_VALGRIND
    VALGRIND_STACK_REGISTER(c->stack_lo, c->stack_lo + usable);
#endif
    return OC_OK;
}

_Noreturn void oc__core_fail(oc_core *c, oc_status status, const char *msg)
{
    if (!c->failed) {
        c->failed = true;
        c->fail_status = status;
        snprintf(c->fail_msg, sizeof c->fail_msg, "%s", msg);
    }
    c->ctx.guarded = 0;
    siglongjmp(c->jump, 1);
}

/* ---- calling the kernel or shape function ----------------------------------
 *
 * ffi_call classifies every argument again on every call (a few hundred
 * instructions). Where the C calling convention passes each argument of
 * the signature in a register of its class, in order within the class
 * (x86-64 System V, AArch64), the function is called directly instead:
 * pointers, integers and the two-word structs (lists, oc_scalar) take
 * integer registers, doubles take vector registers, and extra trailing
 * registers are ignored by the callee. The classification is done once
 * per op (oc__direct_plan, when the library is loaded); anything that does
 * not fit goes through libffi. */
enum { DK_U64, DK_S32, DK_U32, DK_U8, DK_F64, DK_PAIR }; /* how one argument is loaded */

#if (defined(__x86_64__) && !defined(_WIN64)) || defined(__aarch64__)
#define OC_DIRECT_INT 6 /* integer argument registers used (x86-64 has 6) */
#define OC_DIRECT_FP 4
typedef void *(*direct_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, double, double, double,
                           double);

bool oc__direct_plan(const ffi_cif *cif, uint8_t *kinds)
{
    unsigned ng = 0, nd = 0;
    if (cif->rtype != &ffi_type_pointer && cif->rtype != &ffi_type_void) return false;
    for (unsigned i = 0; i < cif->nargs; i++) {
        const ffi_type *t = cif->arg_types[i];
        switch (t->type) {
        case FFI_TYPE_POINTER:
        case FFI_TYPE_SINT64:
        case FFI_TYPE_UINT64: kinds[i] = DK_U64; ng++; break;
        case FFI_TYPE_SINT32: kinds[i] = DK_S32; ng++; break;
        case FFI_TYPE_UINT32: kinds[i] = DK_U32; ng++; break;
        case FFI_TYPE_UINT8: kinds[i] = DK_U8; ng++; break;
        case FFI_TYPE_DOUBLE: kinds[i] = DK_F64; nd++; break;
        case FFI_TYPE_STRUCT: /* { int64, int64 or pointer }: two integer registers */
            if (t->size != 16 || !t->elements[0] || !t->elements[1] || t->elements[2] ||
                t->elements[0]->type == FFI_TYPE_DOUBLE || t->elements[1]->type == FFI_TYPE_DOUBLE ||
                t->elements[0]->size != 8 || t->elements[1]->size != 8)
                return false;
            kinds[i] = DK_PAIR;
            ng += 2;
            break;
        default: return false;
        }
    }
    return ng <= OC_DIRECT_INT && nd <= OC_DIRECT_FP;
}

void oc__direct_load(const oc_exec *e, oc_direct_regs *r)
{
    uint64_t *g = r->g;
    double *d = r->d;
    memset(r, 0, sizeof *r);
    unsigned ng = 0, nd = 0;
    for (unsigned i = 0; i < e->cif->nargs; i++) {
        const void *v = e->ffi_values[i];
        switch (e->direct[i]) {
        case DK_U64: g[ng++] = *(const uint64_t *)v; break;
        case DK_S32: g[ng++] = (uint64_t)(int64_t)*(const int32_t *)v; break;
        case DK_U32: g[ng++] = *(const uint32_t *)v; break;
        case DK_U8: g[ng++] = *(const uint8_t *)v; break;
        case DK_F64: d[nd++] = *(const double *)v; break;
        default: /* DK_PAIR */
            g[ng++] = ((const uint64_t *)v)[0];
            g[ng++] = ((const uint64_t *)v)[1];
        }
    }
}

static void *call_direct(const oc_exec *e)
{
    oc_direct_regs own;
    const oc_direct_regs *r = e->regs;
    if (!r) oc__direct_load(e, &own), r = &own;
    const uint64_t *g = r->g;
    const double *d = r->d;
    return ((direct_fn)(void (*)(void))e->fn)(g[0], g[1], g[2], g[3], g[4], g[5], d[0], d[1], d[2], d[3]);
}
#else
bool oc__direct_plan(const ffi_cif *cif, uint8_t *kinds)
{
    (void)cif, (void)kinds;
    return false;
}

void oc__direct_load(const oc_exec *e, oc_direct_regs *regs)
{
    (void)e, (void)regs; /* never called: no op has a plan here */
}

static void *call_direct(const oc_exec *e)
{
    (void)e;
    return NULL; /* never called: no op has a plan here */
}
#endif

static void call_fn(oc_core *c)
{
    oc_exec *e = c->exec;
    if (e->direct) {
        void *r = call_direct(e);
        c->ret = e->cif->rtype == &ffi_type_pointer ? r : NULL;
    } else {
        ffi_call((ffi_cif *)e->cif, e->fn, &c->ret, e->ffi_values);
    }
}

/* ---- switching to the kernel stack and back ------------------------------- */

/* Tell AddressSanitizer about each switch between stacks, so it tracks the
 * right one (no false reports, no warnings). */
static inline void asan_leave(void **fake, const void *bottom, size_t size)
{
#ifdef OC_ASAN_FIBERS
    __sanitizer_start_switch_fiber(fake, bottom, size);
#else
    (void)fake, (void)bottom, (void)size;
#endif
}

static inline void asan_arrive(void *fake, const void **old_bottom, size_t *old_size)
{
#ifdef OC_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(fake, old_bottom, old_size);
#else
    (void)fake, (void)old_bottom, (void)old_size;
#endif
}

/* After a fault the signal handler jumped here from the signal stack, so
 * ASan could not clear the abandoned frames' redzones on the kernel stack;
 * clear everything below this (uninstrumented, local-free) frame, or the
 * next frames there would trip over them. */
#ifdef OC_ASAN_FIBERS
__attribute__((noinline)) static void asan_forget_frames(const oc_core *c)
{
    char *top = __builtin_frame_address(0);
    if (top > c->stack_lo && top <= c->stack_lo + c->stack_size)
        __asan_unpoison_memory_region(c->stack_lo, (size_t)(top - c->stack_lo));
}
#else
static inline void asan_forget_frames(const oc_core *c) { (void)c; }
#endif

/* Resume the other side of a host/kernel switch. Not inlined: a function
 * may not both __builtin_setjmp and __builtin_longjmp. */
__attribute__((noinline, noreturn)) static void switch_to(void **env) { __builtin_longjmp(env, 1); }

/* The kernel side: entered once per stack (makecontext), then one loop
 * turn per call. Never returns. */
static void kernel_main(void)
{
    oc_core *c = oc__core_current(); /* this stack's core, for good */
    void *fake = NULL;        /* ASan's fake stack of this side while parked */
    asan_arrive(NULL, &c->host_stack_bottom, &c->host_stack_size);
    for (;;) {
        if (sigsetjmp(c->jump, 0) == 0) {
            c->ctx.guarded = 1;
            call_fn(c);
            c->ctx.guarded = 0;
        } else {
            asan_forget_frames(c);
        }
        /* park here; the next call resumes at this setjmp */
        if (__builtin_setjmp(c->kernel_env) == 0) {
            asan_leave(&fake, c->host_stack_bottom, c->host_stack_size);
            switch_to(c->host_env);
        }
        asan_arrive(fake, &c->host_stack_bottom, &c->host_stack_size);
    }
}

/* ---- or on the calling thread's own stack ---------------------------------- */

/* Room kept below the deepest frame an in-place kernel may use: opcore's
 * own frames (ffi, printf) and the fault handler's way in. */
#define OC_IN_PLACE_MARGIN ((size_t)64 * 1024)

/* A kernel runs on the calling thread's stack when that has room for the
 * op's stack size (OC_KERNEL_STACK=1: always on the engine's stack). The
 * kernel's frames then share the caller's hot cache lines and TLB entries
 * and no stack is switched: a 1x1 op through torch.ops costs 0.16 us less
 * (bench/torch_bench.py). The op's stack size is then a minimum, not an
 * exact limit: a kernel needing more runs on until the thread's stack ends,
 * which is reported as OC_ESTACK as the engine stack's end is (fault.c).
 * --debug builds always use the engine's stack, which holds a kernel to
 * exactly its size. */
/* This thread's stack (the main thread's: up to its rlimit), read once. */
static void host_bounds(oc_core *c)
{
    pthread_attr_t attr;
    void *addr = NULL;
    size_t size = 0, guard = 0; /* a thread's stack block starts with its guard page */
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        if (pthread_attr_getstack(&attr, &addr, &size) != 0 || pthread_attr_getguardsize(&attr, &guard) != 0)
            addr = NULL;
        pthread_attr_destroy(&attr);
    }
    c->host_lo = addr ? (char *)addr + guard : NULL;
    c->host_hi = addr ? (char *)addr + size : NULL;
    c->host_known = true;
}

static bool run_in_place(oc_core *c, const oc_exec *e)
{
    static atomic_int engine_stack = -1; /* read once */
    int forced = atomic_load_explicit(&engine_stack, memory_order_relaxed);
    if (forced < 0) {
        forced = oc__env_on("OC_KERNEL_STACK");
        atomic_store_explicit(&engine_stack, forced, memory_order_relaxed);
    }
    if (forced || e->debug) return false;
    if (!c->host_known) host_bounds(c);
    const char *sp = __builtin_frame_address(0); /* outside the bounds (another stack already): no */
    return c->host_lo && sp > c->host_lo && sp < c->host_hi &&
           (size_t)(sp - c->host_lo) >= e->stack_size + OC_STACK_RESERVE + OC_IN_PLACE_MARGIN;
}

/* ---- the call path on a spare stack ---------------------------------------
 *
 * The call path itself (binding, the shape function, which runs in place,
 * the result checks and their messages) takes tens of KiB of stack before
 * any kernel runs. A thread with a small stack (a 64 KiB pthread, Python's
 * threading.stack_size(64 * 1024)) has no room for it: its calls run on a
 * spare stack of the thread's core instead (mapped at the first such call,
 * kept for the next), entered with swapcontext. Threads with room pay one
 * comparison. A stack opcore cannot place (a coroutine's, a fiber's) is
 * trusted. */
/* The check is inline (core.h) and costs a few instructions and no
 * thread-local access (which in a shared library is a call to
 * __tls_get_addr, and an initial-exec variable would need libopcore's
 * whole TLS in the static block, which a dlopen cannot get): a
 * direct-mapped table keyed by the thread pointer holds, per thread, the
 * bottom of its short band -- the lowest usable byte of its stack, or for
 * a stack smaller than the band, its top less the band's width -- and the
 * thread pointer it is for. A slot is written by its thread only: the
 * pointer cleared, the bottom, the pointer (release); a reader reads the
 * bottom (acquire), then the pointer, and trusts the bottom only if the
 * pointer is its own. A thread's slot is cleared when it exits (its core's
 * destructor); two threads sharing a slot only take the slow path more
 * often. A pointer on another stack that falls in the band (memory just
 * below a small stack) takes the spare stack too, which is harmless:
 * oc__run_on_spare_stack runs in place when the spare stack is in use. */
oc_room_slot oc__room[OC_ROOM_SLOTS];

__attribute__((noinline)) bool oc__call_stack_short(void)
{
    if (!oc__call_stack_maybe_short()) return false;
    uintptr_t sp = oc__stack_pointer(), tp = (uintptr_t)__builtin_thread_pointer();
    oc_room_slot *r = &oc__room[oc__room_slot(tp)];
    uintptr_t lo = atomic_load_explicit(&r->lo, memory_order_acquire);
    if (atomic_load_explicit(&r->tp, memory_order_relaxed) == tp)
        return sp - lo < OC_CALL_PATH_ROOM;
    oc_core *c = oc__thread_core();
    if (!c) return false;
    if (!c->host_known) host_bounds(c);
    lo = 0; /* unknown: trusted */
    if (c->host_lo) {
        lo = (uintptr_t)c->host_lo;
        if ((size_t)(c->host_hi - c->host_lo) < OC_CALL_PATH_ROOM)
            lo = (uintptr_t)c->host_hi - OC_CALL_PATH_ROOM; /* the whole stack is short */
    }
    atomic_store_explicit(&r->tp, 0, memory_order_relaxed);
    atomic_store_explicit(&r->lo, lo, memory_order_release);
    atomic_store_explicit(&r->tp, tp, memory_order_release);
    return sp - lo < OC_CALL_PATH_ROOM;
}

/* A thread's slot goes with it (another thread may get its pointer). */
static void room_forget(void)
{
    uintptr_t tp = (uintptr_t)__builtin_thread_pointer();
    oc_room_slot *r = &oc__room[oc__room_slot(tp)];
    uintptr_t mine = tp;
    atomic_compare_exchange_strong(&r->tp, &mine, 0);
}

static void spare_main(void)
{
    oc_core *c = tls_core;
    asan_arrive(NULL, &c->spare_back_bottom, &c->spare_back_size);
    c->spare_status = c->spare_fn(c->spare_arg);
    /* this side ends (its fake stack goes); back to the thread's stack through uc_link */
    asan_leave(NULL, c->spare_back_bottom, c->spare_back_size);
}

oc_status oc__run_on_spare_stack(oc_status (*fn)(void *arg), void *arg)
{
    oc_core *c = oc__thread_core();
    if (!c) return oc_errcode();
    if (!c->spare_map) {
        size_t total = OC_SPARE_STACK + OC_STACK_GUARD;
        char *map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (map == MAP_FAILED || mprotect(map, OC_STACK_GUARD, PROT_NONE) != 0) {
            if (map != MAP_FAILED) munmap(map, total);
            return oc_set_error(OC_ENOMEM, "the calling thread's stack has less than %zu KiB left for "
                                "opcore's call path, and a spare stack of %zu KiB cannot be mapped",
                                OC_CALL_PATH_ROOM >> 10, OC_SPARE_STACK >> 10);
        }
        c->spare_map = map;
#ifdef OC_HAVE_VALGRIND
        c->spare_valgrind = VALGRIND_STACK_REGISTER(map + OC_STACK_GUARD, map + total);
#endif
    }
    if (c->spare_busy) return fn(arg); /* on it already, or on a stack above it: room enough */
    c->spare_fn = fn;
    c->spare_arg = arg;
    c->spare_busy = true;
    ucontext_t back;
    getcontext(&c->spare_ctx);
    c->spare_ctx.uc_stack.ss_sp = c->spare_map + OC_STACK_GUARD;
    c->spare_ctx.uc_stack.ss_size = OC_SPARE_STACK;
    c->spare_ctx.uc_link = &back;
    makecontext(&c->spare_ctx, spare_main, 0);
    void *fake = NULL;
    asan_leave(&fake, c->spare_map + OC_STACK_GUARD, OC_SPARE_STACK);
    swapcontext(&back, &c->spare_ctx);
    asan_arrive(fake, NULL, NULL);
    c->spare_busy = false;
    return c->spare_status;
}

/* Run the prepared call on the kernel stack and come back. */
static void run_on_kernel_stack(oc_core *c)
{
    void *fake = NULL;
    if (__builtin_setjmp(c->host_env) == 0) {
        asan_leave(&fake, c->stack_lo, c->stack_size);
        if (c->kernel_parked) switch_to(c->kernel_env);
        /* First call on this stack: enter kernel_main (the one place that
         * saves and sets the signal mask). It comes back through host_env. */
        c->kernel_parked = true;
        getcontext(&c->kernel_ctx);
        c->kernel_ctx.uc_stack.ss_sp = c->stack_lo;
        c->kernel_ctx.uc_stack.ss_size = c->stack_size;
        c->kernel_ctx.uc_link = NULL;
        makecontext(&c->kernel_ctx, kernel_main, 0);
        ucontext_t here;
        swapcontext(&here, &c->kernel_ctx);
    }
    asan_arrive(fake, NULL, NULL);
}

oc_status oc__core_run(oc_core *c, oc_exec *e, oc_core_mode mode, uint32_t id, uint32_t count)
{
    oc_ctx *outer = oc__ctx_install(&c->ctx); /* one thread-local access for the swap, not two */
    if (mode == OC_MODE_KERNEL && outer == &c->ctx && c->ctx.mode == OC_MODE_KERNEL)
        return oc_set_error(OC_EINVAL, "op '%s' was called from inside kernel '%s': a kernel cannot call "
                            "an op (its core's stack is in use)", e->name, c->exec->kernel_name);
    c->exec = e;
    c->ctx.mode = mode;
    c->id = id;
    c->count = count;
    c->failed = false;
    c->fail_status = OC_OK;
    c->fault_signal = 0;
    c->ret = NULL;
    c->barriers = 0;
    c->shared_calls = 0;
    memset(&c->counters, 0, sizeof c->counters);

    c->in_place = mode != OC_MODE_KERNEL || run_in_place(c, e);
    if (c->in_place) { /* a shape function, an OC_LIBRARY block, or a kernel with room here */
        if (sigsetjmp(c->jump, 0) == 0) {
            c->ctx.guarded = 1;
            call_fn(c);
            c->ctx.guarded = 0;
        }
    } else {
        if (ensure_stack(c, e->stack_size) == OC_OK) {
            run_on_kernel_stack(c);
        } else { /* the kernel does not run: the call (each share of a launch) fails */
            char where[1024];
            oc__core_where(c, where, sizeof where);
            c->failed = true;
            c->fail_status = OC_ENOMEM;
            snprintf(c->fail_msg, sizeof c->fail_msg, "%s: %s (the op's stack size, %zu bytes)", where,
                     oc_errmsg(), e->stack_size);
        }
    }
    if (mode == OC_MODE_KERNEL) {
        oc__ctx_end(&c->ctx); /* e.g. streams the kernel left open */
        if (e->debug && !c->failed && !c->fault_signal) oc__tcm_check(c);
    }
    c->ctx.guarded = 0;
    if (c->fault_signal && !c->failed) oc__fault_describe(c);
    if (c->failed && c->fail_status == OC_OK) c->fail_status = OC_EKERNEL;
    /* printf from kernels shows up now, not when the buffer fills; a call
     * that printed nothing costs no flush. */
    if (__fpending(stdout)) fflush(stdout);
    oc__ctx_install(outer);
    c->ctx.mode = OC_MODE_IDLE;
    return c->failed ? c->fail_status : OC_OK;
}

void oc__exec_release(oc_exec *e)
{
    for (int k = 0; k < e->shared->n; k++) oc__aligned_free(e->shared->block[k]);
    oc__free(e->shared);
    e->shared = NULL;
}

void oc__core_release(oc_core *c)
{
    oc__tensor_temps_release(&c->ctx);
    oc__ctx_end(&c->ctx);
    if (c->tcm) oc__tcm_reset(c);
}
