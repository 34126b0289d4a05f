/* src/core/internal.h — runtime internals shared across src/ (not public).
 *
 * Failing and allocating work through the thread's call context (core/ctx.h),
 * which the engine installs while a kernel, shape function or protected
 * function runs. Outside a call, oc__raise() just records the error and
 * returns. Both live in core (ctx.c, tensor.c).
 */
#ifndef OPCORE_INTERNAL_H
#define OPCORE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "opcore/status.h"
#include "opcore/tensor.h"

/* Report a failure. Inside a kernel or shape function this ends the running
 * kernel (longjmp) and never returns; outside one it sets the thread's
 * last error and returns, so callers must still return an error value. */
void oc__raise(oc_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Vararg form of oc_set_error. */
#include <stdarg.h>
oc_status oc__set_errorv(oc_status status, const char *fmt, va_list ap);

/* The last failure on this thread came out of calling the op `qualname`:
 * oc_errop() names it, and its message is made to begin with
 * "op '<qualname>'" (host/call.c calls it when an op call fails). */
void oc__error_in_op(const char *qualname);

/* True while a shape function runs on this thread: factories then make
 * meta tensors and element-wise ops compute shapes only. */
bool oc__in_shape_fn(void);

/* Allocate a tensor with row-major strides: meta inside a shape function,
 * otherwise with 64-byte aligned data (uninitialised). Registered as a
 * temporary of the running call (freed after it) when one is running.
 * On failure (bad shape, out of memory) calls oc__raise and returns NULL. */
oc_tensor *oc__tensor_new(oc_dtype dtype, int ndim, const int64_t *sizes);

/* Check an argument of an opcore function: fails (oc__raise, OC_EMETA)
 * if `t` has no data outside a shape function. `fn` and `arg` name it in
 * the message ("oc_add: argument 'a'"); formatted only on failure, since
 * this runs on every call. Returns false after raising. */
bool oc__require_data(const oc_tensor *t, const char *fn, const char *arg);

/* opcore's cache root into out[n]: $OPCORE_CACHE_DIR, else
 * $XDG_CACHE_HOME/opcore, else $HOME/.cache/opcore. False when none is set
 * or the path does not fit. */
#include <stddef.h>
bool oc__cache_root(char *out, size_t n);

/* Environment settings (core/env.c). oc__env_off: the variable is exactly
 * "0", the one way to turn a default-on feature off; oc__env_on: exactly
 * "1", the one way to turn a default-off one on. oc__env_size: a size
 * with an optional K or M suffix; unset, empty or 0 gives `fallback`.
 * oc__env_size_or_off: the same, except that "0" gives 0 (off). */
bool oc__env_off(const char *name);
bool oc__env_on(const char *name);
size_t oc__env_size(const char *name, size_t fallback);
size_t oc__env_size_or_off(const char *name, size_t fallback);

/* The size in bytes of cpu0's cache `index` as Linux's sysfs says (index0
 * L1d, index2 L2 on x86), 0 when unknown. The one source of cache sizes:
 * glibc's sysconf asks CPUID, which valgrind answers with other sizes. */
size_t oc__cpu_cache_bytes(int index);

#include <stdbool.h>
#include "opcore/tensor.h"
/* oc_is_contiguous, inline: the call path tests every tensor of a call
 * with it (host/call.c); oc_is_contiguous is this. */
static inline bool oc__contiguous(const oc_tensor *t)
{
    int64_t expected = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->sizes[d] == 0) return true;
        if (t->sizes[d] != 1 && t->strides[d] != expected) return false;
        expected *= t->sizes[d];
    }
    return true;
}

#endif /* OPCORE_INTERNAL_H */
