/* Turning faults inside kernels into errors.
 *
 * One process-wide handler for SIGSEGV, SIGBUS, SIGFPE and SIGILL runs on
 * the thread's alternate signal stack (so a stack overflow can be handled).
 * If the faulting thread is inside a guarded kernel or shape function, the
 * handler records the fault and jumps back into the engine; otherwise it
 * passes the signal to whatever handler was installed before opcore's. */
#undef _FORTIFY_SOURCE /* siglongjmp out of a handler on the signal stack */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "engine/core.h"

#define OC_ALTSTACK_SIZE ((size_t)64 * 1024)

static const int fault_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
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
        if (info->si_code <= 0) raise(sig); /* sent by kill(): re-send */
    }
}

static void on_fault(int sig, siginfo_t *info, void *uctx)
{
    oc_core *c = oc__core_current();
    if (c && c->guarded) {
        c->guarded = 0;
        c->fault_signal = sig;
        c->fault_addr = info->si_addr;
        siglongjmp(c->jump, 2);
    }
    for (int i = 0; i < NUM_FAULT_SIGNALS; i++)
        if (fault_signals[i] == sig) pass_on(i, sig, info, uctx);
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

oc_status oc__fault_thread_init(oc_core *core)
{
    stack_t cur;
    oc__fault_install();
    if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE)) return OC_OK;
    core->altstack = malloc(OC_ALTSTACK_SIZE);
    if (!core->altstack) return oc_set_error(OC_ENOMEM, "cannot allocate a signal stack");
    stack_t ss = {.ss_sp = core->altstack, .ss_size = OC_ALTSTACK_SIZE, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        free(core->altstack);
        core->altstack = NULL;
        return oc_set_error(OC_ERROR, "cannot install a signal stack for kernel fault handling");
    }
    return OC_OK;
}
