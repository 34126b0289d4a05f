/* tests/isolation/misbehave.h — everything a hostile kernel, shape function
 * or OC_LIBRARY block might do to end or hijack the host process. Each
 * `how` is one case; tests/c/test_isolation.c and
 * tests/python/test_isolation.py expect each to end the call with an error
 * (or, for the cases marked "fine", to work) and the process to go on. */
#ifndef ISO_MISBEHAVE_H
#define ISO_MISBEHAVE_H

#include <assert.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>
#include <unistd.h>

#include <opcore/check.h>

/* A jmp_buf set by the shape function (on the host's stack) and one set
 * by the kernel (on a kernel stack): each is "outside" the other's call. */
extern jmp_buf iso_shape_buf, iso_kernel_buf;

enum {
    ISO_FINE = 0,
    ISO_EXIT = 1,        /* exit(3) */
    ISO__EXIT = 2,       /* _exit(4) */
    ISO__EXIT2 = 3,      /* _Exit(5) */
    ISO_QUICK_EXIT = 4,  /* quick_exit(6) */
    ISO_ABORT = 5,       /* abort() */
    ISO_ASSERT = 6,      /* assert(how == 1234) */
    ISO_RAISE_ABRT = 7,  /* raise(SIGABRT) */
    ISO_PTHREAD_EXIT = 8,
    ISO_LONGJMP_HOST = 9,    /* longjmp to the jmp_buf whose address is `arg` */
    ISO_LONGJMP_OTHER = 10,  /* longjmp to the buf the other side set */
    ISO_SIGLONGJMP_OTHER = 11,
    ISO_LONGJMP_INSIDE = 12, /* fine: a longjmp within the call */
    ISO_BIG_FRAME = 13,      /* a 64 MiB stack frame: beyond any thread's stack */
    ISO_RAISE_SEGV = 14,     /* raise(SIGSEGV) */
    ISO_CHECK = 15,          /* OC_CHECK fails */
    ISO_SEGV = 16,           /* a store through NULL */
    ISO_THRD_EXIT = 17,
    ISO_SET_BUF = 19,        /* fine: set this side's jmp_buf and return */
    ISO_TCM_RANGE = 20,      /* kernels only: oc_tensor_to_tcm past the end */
    ISO_NUM_CASES = 21
};

static __attribute__((noinline, unused)) void iso_jump_back(jmp_buf *b) { longjmp(*b, 7); }

static __attribute__((noinline, unused)) int iso_big_frame(int64_t n)
{
    volatile char buf[64 << 20];
    buf[0] = (char)n;
    buf[sizeof buf - 1] = 1;
    return buf[0] + buf[n & 1023];
}

/* Do case `how`; `mine` is the jmp_buf of this side, `other` the other's. */
static inline void iso_misbehave(int64_t how, int64_t arg, jmp_buf mine, jmp_buf other)
{
    switch (how) {
    case ISO_EXIT: exit(3);
    case ISO__EXIT: _exit(4);
    case ISO__EXIT2: _Exit(5);
    case ISO_QUICK_EXIT: quick_exit(6);
    case ISO_ABORT: abort();
    case ISO_ASSERT: assert(how == 1234); break;
    case ISO_RAISE_ABRT: raise(SIGABRT); break;
    case ISO_PTHREAD_EXIT: pthread_exit(NULL);
    case ISO_LONGJMP_HOST: longjmp(*(jmp_buf *)(uintptr_t)arg, 1);
    case ISO_LONGJMP_OTHER: longjmp(other, 1);
    case ISO_SIGLONGJMP_OTHER: siglongjmp(other, 1);
    case ISO_LONGJMP_INSIDE: {
        jmp_buf here;
        volatile int r = setjmp(here);
        if (r == 0) iso_jump_back(&here);
        OC_CHECK(r == 7, "setjmp came back with %d", r);
        break;
    }
    case ISO_BIG_FRAME: (void)iso_big_frame(arg); break;
    case ISO_RAISE_SEGV: raise(SIGSEGV); break;
    case ISO_CHECK: OC_CHECK(arg == 42, "arg is %lld, not 42", (long long)arg); break;
    case ISO_SEGV: *(volatile int *)(uintptr_t)arg = 1; break;
    case ISO_THRD_EXIT: thrd_exit(7);
    case ISO_SET_BUF: if (setjmp(mine)) OC_CHECK(0, "came back to a stale jmp_buf"); break;
    default: break;
    }
}

#endif
