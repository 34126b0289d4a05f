/* Ending a kernel, shape function or OC_LIBRARY block that tries to leave
 * its call: exit() and its kin, abort(), a failed assert(), pthread_exit()
 * on an engine core, longjmp() to a jmp_buf set outside the call.
 *
 * `opcore build` links every op library with -Wl,--wrap=exit,... (the list
 * is OC_ESCAPE_WRAPS in escape.h), so the library's own calls to these reach
 * the __wrap_* functions here. Inside a guarded call they end the call with
 * an error naming the op, the core and what was called; anywhere else
 * (host code in the library, called outside any op call) they do what the
 * real function does. Calls made by other libraries the op library links
 * against are not wrapped; their aborts still reach the SIGABRT handler
 * (fault.c). Why not let exit() run: in a multicore kernel every core
 * enters glibc's exit together and the process hangs; in one core it ends
 * the host process, which is never the kernel's to end.
 *
 * Any function can run under the same guard as a shape function through
 * oc__run_protected() below (the loader runs each OC_LIBRARY block so).
 *
 * The __wrap_* functions are OC_API: op libraries link against them, so
 * libopcore exports them beside the oc_ API. */
#undef _FORTIFY_SOURCE /* the real longjmp, unchecked, is what we call */
#include <ffi.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <unistd.h>

#include "core/internal.h"
#include "engine/core.h"

void oc__core_where(const oc_core *c, char *buf, size_t len)
{
    const oc_exec *e = c->exec;
    switch (c->ctx.mode) {
    case OC_MODE_KERNEL:
        if (e->grid_ndim) { /* c->id is the instance: name it by its program id, and the core */
            char prog[96] = "", dims[96] = "";
            int64_t p[3];
            oc__grid_coords(e, c->id, p);
            for (int a = 0; a < e->grid_ndim; a++) {
                size_t np = strlen(prog), nd = strlen(dims);
                snprintf(prog + np, sizeof prog - np, "%s%lld", a ? ", " : "", (long long)p[a]);
                snprintf(dims + nd, sizeof dims - nd, "%s%lld", a ? ", " : "", (long long)e->grid[a]);
            }
            snprintf(buf, len, "op '%s': kernel '%s' (program (%s) of grid [%s]) on core %u", e->name,
                     e->kernel_name, prog, dims, c->lane);
        } else {
            snprintf(buf, len, "op '%s': kernel '%s' on core %u", e->name, e->kernel_name, c->id);
        }
        break;
    case OC_MODE_SHAPE:
        snprintf(buf, len, "op '%s': shape function '%s'", e->name, e->shape_fn_name);
        break;
    case OC_MODE_LIBRARY:
        snprintf(buf, len, "%s", e && e->name ? e->name : "an OC_LIBRARY block");
        break;
    default:
        snprintf(buf, len, "opcore");
    }
}

/* Is this thread running a guarded call? Then oc__raise ends that call
 * with the error, "op 'x::y': kernel 'k' on core 1: <what>". */
static bool guarded(void)
{
    oc_core *c = oc__core_current();
    return c && c->ctx.guarded && c->ctx.mode != OC_MODE_IDLE;
}

#define NOT_YOURS "; a kernel, shape function or OC_LIBRARY block must not end the process " \
                  "(return, or fail with OC_CHECK)"

/* __wrap_exit, __wrap__exit, __wrap__Exit, __wrap_quick_exit. */
#define OC_WRAP_EXIT(name)                                                  \
    OC_API _Noreturn void __wrap_##name(int status);                       \
    _Noreturn void __wrap_##name(int status)                               \
    {                                                                      \
        if (guarded()) oc__raise(OC_EKERNEL, "called " #name "(%d)" NOT_YOURS, status); \
        name(status);                                                      \
    }
OC_WRAP_EXIT(exit)
OC_WRAP_EXIT(_exit)
OC_WRAP_EXIT(_Exit)
OC_WRAP_EXIT(quick_exit)

OC_API _Noreturn void __wrap_abort(void);
_Noreturn void __wrap_abort(void)
{
    if (guarded()) oc__raise(OC_EKERNEL, "called abort()" NOT_YOURS);
    abort();
}

/* What assert() calls when its condition is false. */
OC_API _Noreturn void __wrap___assert_fail(const char *assertion, const char *file, unsigned line,
                                           const char *function);
_Noreturn void __wrap___assert_fail(const char *assertion, const char *file, unsigned line,
                                    const char *function)
{
    if (guarded()) oc__raise(OC_EKERNEL, "assertion failed: %s (%s:%u, in %s())", assertion, file, line, function);
    fprintf(stderr, "%s:%u: %s: Assertion `%s' failed.\n", file, line, function, assertion);
    abort();
}

OC_API _Noreturn void __wrap_pthread_exit(void *value);
_Noreturn void __wrap_pthread_exit(void *value)
{
    if (guarded())
        oc__raise(OC_EKERNEL,
                  "called pthread_exit(); the thread is the engine's or the caller's, not the call's to end");
    pthread_exit(value);
}

OC_API _Noreturn void __wrap_thrd_exit(int result);
_Noreturn void __wrap_thrd_exit(int result)
{
    if (guarded())
        oc__raise(OC_EKERNEL, "called thrd_exit(%d); the thread is the engine's or the caller's, not the call's to end",
                  result);
    thrd_exit(result);
}

/* ---- longjmp ---------------------------------------------------------------
 * A jump within the call (both ends inside the kernel) is ordinary C and
 * goes ahead. A jump to a jmp_buf set outside it would resume the host with
 * the engine still in the middle of the call (a multicore launch's lock
 * held, the core marked busy). The saved stack pointer tells them apart: a
 * target inside the call lies between the current stack pointer and the
 * frame where the engine entered the call (which the engine's own jump
 * buffer records). glibc mangles saved stack pointers with the thread's
 * pointer guard; on architectures where we do not know how, jumps are not
 * checked (docs/engine.md, limits). */

#if defined(__x86_64__) && defined(__GLIBC__)
#define OC_CHECK_LONGJMP 1
static uintptr_t saved_sp(const struct __jmp_buf_tag *env)
{
    uintptr_t v = (uintptr_t)env->__jmpbuf[6], guard; /* JB_RSP */
    __asm__("mov %%fs:0x30, %0" : "=r"(guard));      /* tcbhead_t.pointer_guard */
    v = (v >> 17) | (v << (64 - 17));                /* PTR_DEMANGLE: ror 17, xor */
    return v ^ guard;
}
#endif

static void check_jump(const struct __jmp_buf_tag *env, const char *fn)
{
    if (!guarded()) return;
#ifdef OC_CHECK_LONGJMP
    uintptr_t target = saved_sp(env), entry = saved_sp(oc__core_current()->jump),
              here = (uintptr_t)__builtin_frame_address(0);
    if (target > here && target <= entry) return;
    oc__raise(OC_EKERNEL, "called %s() to a jmp_buf set outside the call; a kernel, shape function or "
                          "OC_LIBRARY block may only jump within itself (return, or fail with OC_CHECK)",
              fn);
#else
    (void)env;
    (void)fn;
#endif
}

/* __wrap_<name>: check the jump, then make it (`shown` names it in the
 * message; __longjmp_chk is longjmp under _FORTIFY_SOURCE). */
#define OC_WRAP_JUMP(name, shown)                                           \
    OC_API _Noreturn void __wrap_##name(struct __jmp_buf_tag *env, int val); \
    _Noreturn void __wrap_##name(struct __jmp_buf_tag *env, int val)       \
    {                                                                      \
        check_jump(env, shown);                                            \
        siglongjmp(env, val);                                              \
    }
OC_WRAP_JUMP(longjmp, "longjmp")
OC_WRAP_JUMP(_longjmp, "_longjmp")
OC_WRAP_JUMP(siglongjmp, "siglongjmp")
OC_WRAP_JUMP(__longjmp_chk, "longjmp")

/* ---- running any function under the guard --------------------------------- */

oc_status oc__run_protected(void (*fn)(void *arg), void *arg, const char *label)
{
    oc_core *c = oc__thread_core();
    if (!c) return oc_errcode();
    oc__fault_install(); /* a host may have replaced the handlers since */
    if (oc__core_current()) { /* from inside a call: already guarded */
        fn(arg);
        return OC_OK;
    }
    ffi_cif cif;
    ffi_type *args[1] = {&ffi_type_pointer};
    if (ffi_prep_cif(&cif, FFI_DEFAULT_ABI, 1, &ffi_type_void, args) != FFI_OK)
        return oc_set_error(OC_ERROR, "libffi could not describe %s", label);
    void *values[1] = {&arg};
    oc_exec e = {.fn = (oc_fn)fn, .ffi_values = values, .cif = &cif, .name = label, .ncores = 1};
    oc_status st = oc__core_run(c, &e, OC_MODE_LIBRARY, 0, 1);
    if (st != OC_OK) st = oc_set_error(c->fail_status, "%s", c->fail_msg);
    oc__core_release(c);
    return st;
}
