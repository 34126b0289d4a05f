/* Engine cores: creation, kernel stacks, and running one kernel or shape
 * function under fault protection.
 *
 * Kernels run on an engine-owned stack (makecontext/swapcontext) of the
 * op's configured size, with an inaccessible guard region below it. A
 * fault there (or anywhere while the kernel runs) lands in the signal
 * handler (fault.c), which jumps back to the trampoline's sigsetjmp on the
 * kernel stack; the trampoline then returns to the host context normally.
 */
#undef _FORTIFY_SOURCE /* longjmp between stacks is intended here */
#include <ffi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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
#include <sanitizer/common_interface_defs.h>
#define OC_ASAN_FIBERS 1
static _Thread_local const void *asan_host_bottom;
static _Thread_local size_t asan_host_size;
#endif

#define OC_STACK_RESERVE ((size_t)16 * 1024)  /* opcore's own frames: ffi, printf */

static _Thread_local oc_core *tls_core;     /* this thread's core */
static _Thread_local oc_core *tls_running;  /* core with a call in progress */
static pthread_key_t core_key;
static pthread_once_t core_key_once = PTHREAD_ONCE_INIT;

size_t oc__page_size(void)
{
    static size_t page;
    if (!page) page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

static void thread_core_dtor(void *p) { oc__core_destroy(p); }
static void make_core_key(void) { pthread_key_create(&core_key, thread_core_dtor); }

oc_core *oc__core_create(size_t tcm_size)
{
    oc_core *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->tcm_size = tcm_size;
    c->tcm = aligned_alloc(64, tcm_size);
    if (!c->tcm) { free(c); return NULL; }
    c->temps.next = c->temps.prev = &c->temps;
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
}

void oc__core_destroy(oc_core *c)
{
    if (!c) return;
    if (c == tls_core) tls_core = NULL;
    oc__core_release(c);
    free_stack(c);
    if (c->altstack) {
        stack_t off = {.ss_flags = SS_DISABLE};
        stack_t cur;
        /* Only turn off the signal stack if it is still the one we set. */
        if (sigaltstack(NULL, &cur) == 0 && cur.ss_sp == c->altstack) sigaltstack(&off, NULL);
        free(c->altstack);
    }
    free(c->tcm);
    free(c);
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

oc_core *oc__core_current(void) { return tls_running; }

oc_core *oc__kernel_core(const char *fn)
{
    oc_core *c = tls_running;
    if (c && c->mode == OC_MODE_KERNEL) return c;
    bool shape = c && c->mode == OC_MODE_SHAPE;
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
    getcontext(&c->kernel_ctx);
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
    c->guarded = 0;
    siglongjmp(c->jump, 1);
}

static void call_fn(oc_core *c)
{
    oc_exec *e = c->exec;
    ffi_call((ffi_cif *)&e->op->cif, e->fn, &c->ret, e->ffi_values);
}

/* Entry of the kernel context: runs on the kernel stack. */
static void kernel_trampoline(void)
{
    oc_core *c = tls_running;
#ifdef OC_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(NULL, &asan_host_bottom, &asan_host_size);
#endif
    if (sigsetjmp(c->jump, 0) == 0) {
        c->guarded = 1;
        call_fn(c);
        c->guarded = 0;
    }
#ifdef OC_ASAN_FIBERS
    /* this fiber ends here: no fake stack to keep */
    __sanitizer_start_switch_fiber(NULL, asan_host_bottom, asan_host_size);
#endif
    /* returning resumes host_ctx through uc_link */
}

oc_status oc__core_run(oc_core *c, oc_exec *e, oc_core_mode mode, uint32_t id, uint32_t count)
{
    oc_core *outer = tls_running;
    c->exec = e;
    c->mode = mode;
    c->id = id;
    c->count = count;
    c->failed = false;
    c->fail_status = OC_OK;
    c->fault_signal = 0;
    c->ret = NULL;
    c->barriers = 0;
    memset(&c->counters, 0, sizeof c->counters);
    tls_running = c;

    if (mode != OC_MODE_KERNEL) { /* shape function or OC_LIBRARY block: in place */
        if (sigsetjmp(c->jump, 0) == 0) {
            c->guarded = 1;
            call_fn(c);
            c->guarded = 0;
        }
    } else {
        oc_status st = ensure_stack(c, e->op->stack_size);
        if (st != OC_OK) { tls_running = outer; c->mode = OC_MODE_IDLE; return st; }
        /* getcontext (a syscall) ran once when the stack was made; makecontext
         * just re-points the saved context at the trampoline. */
        c->kernel_ctx.uc_stack.ss_sp = c->stack_lo;
        c->kernel_ctx.uc_stack.ss_size = c->stack_size;
        c->kernel_ctx.uc_link = &c->host_ctx;
        makecontext(&c->kernel_ctx, kernel_trampoline, 0);
#ifdef OC_ASAN_FIBERS
        void *fake_stack = NULL;
        __sanitizer_start_switch_fiber(&fake_stack, c->stack_lo, c->stack_size);
#endif
        swapcontext(&c->host_ctx, &c->kernel_ctx);
#ifdef OC_ASAN_FIBERS
        __sanitizer_finish_switch_fiber(fake_stack, NULL, NULL);
#endif
        oc__streams_close_all(c);
    }
    c->guarded = 0;
    if (c->fault_signal && !c->failed) oc__fault_describe(c);
    if (c->failed && c->fail_status == OC_OK) c->fail_status = OC_EKERNEL;
    /* printf from kernels shows up now, not when the buffer fills. */
    fflush(stdout);
    tls_running = outer;
    c->mode = OC_MODE_IDLE;
    return c->failed ? c->fail_status : OC_OK;
}

void oc__core_release(oc_core *c)
{
    oc_tensor_block *b = c->temps.next;
    while (b != &c->temps) {
        oc_tensor_block *next = b->next;
        free(b);
        b = next;
    }
    c->temps.next = c->temps.prev = &c->temps;
    oc__streams_close_all(c);
    if (c->tcm) oc__tcm_reset(c);
}
