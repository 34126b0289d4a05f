/* Turning faults inside kernels into errors.
 *
 * One process-wide handler for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT
 * runs on the thread's alternate signal stack (so a stack overflow can be
 * handled). If the faulting thread is inside a guarded kernel, shape
 * function or OC_LIBRARY block, the handler records the fault and jumps
 * back into the engine; otherwise it passes the signal to whatever handler
 * was installed before opcore's.
 *
 * SIGABRT is here for the aborts an op library's own code cannot be
 * relinked away from (escape.c wraps its direct calls to abort() and
 * assert()): libc's internal aborts and raise(SIGABRT). glibc's abort()
 * releases its lock before raising, so leaving the handler by longjmp is
 * safe; an abort raised by malloc on a corrupt heap is reported the same
 * way, but the heap stays corrupt (docs/engine.md, limits). */
#undef _FORTIFY_SOURCE /* siglongjmp out of a handler on the signal stack */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "engine/core.h"
#include "engine/redzone.h"

#define OC_ALTSTACK_SIZE ((size_t)64 * 1024)

/* A stack pointer this far below the kernel stack still counts as "the
 * kernel overflowed its stack" (one frame can be that large). */
#define OC_OVERFLOW_REACH ((size_t)1 << 30)

static const int fault_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NUM_FAULT_SIGNALS (int)(sizeof fault_signals / sizeof fault_signals[0])
static struct sigaction previous[NUM_FAULT_SIGNALS];
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;

static void pass_on(int index, int sig, siginfo_t *info, void *uctx)
{
    struct sigaction *prev = &previous[index];
    if (prev->sa_flags & SA_SIGINFO) {
        prev->sa_sigaction(sig, info, uctx);
    } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
        prev->sa_handler(sig);
    } else {
        /* Default action: restore it; the faulting instruction re-runs
         * and the process dies as it would have without opcore. */
        signal(sig, SIG_DFL);
        if (info->si_code <= 0) raise(sig); /* sent by kill()/raise(): re-send */
    }
}

/* The interrupted context's stack pointer (NULL where unknown). */
static void *context_sp(void *uctx)
{
    const ucontext_t *u = uctx;
#if defined(__x86_64__)
    return (void *)(uintptr_t)u->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
    return (void *)(uintptr_t)u->uc_mcontext.sp;
#else
    (void)u;
    return NULL;
#endif
}

static void on_fault(int sig, siginfo_t *info, void *uctx)
{
    oc_core *c = oc__core_current();
    if (c && c->ctx.guarded) {
        c->ctx.guarded = 0;
        c->fault_signal = sig;
        c->fault_code = info->si_code;
        c->fault_pid = info->si_code <= 0 ? (int)info->si_pid : 0;
        c->fault_addr = info->si_code > 0 ? info->si_addr : NULL;
        c->fault_sp = context_sp(uctx);
        siglongjmp(c->jump, 2);
    }
    for (int i = 0; i < NUM_FAULT_SIGNALS; i++)
        if (fault_signals[i] == sig) pass_on(i, sig, info, uctx);
}

/* Did the kernel run off the bottom of its stack? Either the faulting
 * address is in (or just below) the guard region, or the stack pointer
 * itself is below the stack: a frame larger than the guard jumps over it. */
static bool overflowed(const oc_core *c)
{
    if (c->ctx.mode != OC_MODE_KERNEL || c->fault_signal != SIGSEGV || c->fault_code <= 0) return false;
    /* the stack it ran on: the engine's, or the calling thread's own (core.c: run_in_place) */
    const char *lo = c->in_place ? c->host_lo : c->stack_map ? c->stack_lo : NULL;
    if (!lo) return false;
    const char *a = c->fault_addr, *sp = c->fault_sp;
    if (a >= lo - OC_STACK_GUARD && a < lo) return true;
    return sp && sp < lo && (size_t)(lo - sp) <= OC_OVERFLOW_REACH;
}

/* Record the core's failure (oc__core_fail would also leave the call; the
 * signal handler has done that already). */
__attribute__((format(printf, 3, 4))) static void fail(oc_core *c, oc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->fail_msg, sizeof c->fail_msg, fmt, ap);
    va_end(ap);
    c->fail_status = status;
    c->failed = true;
}

void oc__fault_describe(oc_core *c)
{
    char where[1024], what[1024];
    oc__core_where(c, where, sizeof where);
    void *a = c->fault_addr;
    bool caused = c->fault_code > 0; /* else sent: there is no faulting address to show */
    /* A debug build's guard page first: mmap may have put it right below a
     * kernel stack, where overflowed() would claim it. */
    if (c->ctx.mode == OC_MODE_KERNEL && caused && oc__redzone_describe(a, what, sizeof what))
        fail(c, OC_EFAULT, "%s %s", where, what);
    else if (overflowed(c))
        fail(c, OC_ESTACK,
             "%s: stack overflow: it needs more than %s%zu bytes (build with "
             "--stack-size N or -DSTACK_SIZE=N)",
             where, c->in_place ? "the calling thread's stack, which had room for its stack of " : "its stack of ",
             c->exec->stack_size);
    else if (c->ctx.mode == OC_MODE_SHAPE && c->fault_signal == SIGSEGV && caused && (uintptr_t)a < 65536)
        fail(c, OC_EMETA,
             "%s touched tensor data (address %p); shape functions get meta tensors: "
             "shapes and dtypes, no data",
             where, a);
    else if (!caused)
        fail(c, OC_EFAULT,
             "%s got signal SIG%s (%s) sent by raise(), kill() or abort() from process %d, "
             "not by a faulting instruction",
             where, sigabbrev_np(c->fault_signal) ? sigabbrev_np(c->fault_signal) : "?",
             strsignal(c->fault_signal), c->fault_pid);
    else
        fail(c, OC_EFAULT, "%s faulted: %s at address %p", where, strsignal(c->fault_signal), a);
}

/* (Re)install the handler where something else has replaced it since: the
 * replacement becomes the handler we pass foreign faults on to. Called at
 * library load and engine start, so hosts that install handlers of their
 * own (test frameworks, crash reporters) keep working alongside opcore. */
void oc__fault_install(void)
{
    pthread_mutex_lock(&install_lock);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < NUM_FAULT_SIGNALS; i++) {
        struct sigaction cur;
        if (sigaction(fault_signals[i], NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
            cur.sa_sigaction == on_fault)
            continue;
        sigaction(fault_signals[i], &sa, &previous[i]);
    }
    pthread_mutex_unlock(&install_lock);
}

oc_status oc__fault_stack_alloc(oc_core *core)
{
    if (!core->altstack) core->altstack = oc__malloc(OC_ALTSTACK_SIZE);
    return core->altstack ? OC_OK : oc_set_error(OC_ENOMEM, "cannot allocate a signal stack: out of memory");
}

oc_status oc__fault_thread_init(oc_core *core)
{
    stack_t cur;
    oc__fault_install();
    if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE)) return OC_OK;
    oc_status st = oc__fault_stack_alloc(core);
    if (st) return st;
    stack_t ss = {.ss_sp = core->altstack, .ss_size = OC_ALTSTACK_SIZE, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        oc__free(core->altstack);
        core->altstack = NULL;
        return oc_set_error(OC_ERROR, "cannot install a signal stack for kernel fault handling");
    }
    return OC_OK;
}
