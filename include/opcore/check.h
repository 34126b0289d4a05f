/* opcore/check.h — failing a kernel or shape function with a message.
 *
 *     OC_CHECK(x->ndim == 2, "relu takes a 2-D tensor, got %d dims", x->ndim);
 *
 * ends the running kernel (on this core) or shape function; the caller gets
 * OC_EKERNEL and the message, prefixed with the op, the function, the core
 * and file:line. In Python it is an opcore.OpError naming the op.
 */
#ifndef OPCORE_CHECK_H
#define OPCORE_CHECK_H

#include "export.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* End the running kernel with a formatted message (never returns inside a
 * kernel or shape function). */
OC_API void oc_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* If `cond` is false, fail the kernel: "file:line: check failed: cond: msg". */
#define OC_CHECK(cond, ...)                                                  \
    do {                                                                     \
        if (__builtin_expect(!(cond), 0))                                    \
            oc_fail(__FILE__, __LINE__, "check failed: " #cond ": " __VA_ARGS__); \
    } while (0)

/* If `status_expr` (a call returning oc_status, e.g. oc_dict_get_int) is
 * not OC_OK, fail the kernel with its message (oc_errmsg()). */
#define OC_CHECK_OK(status_expr)                                                 \
    do {                                                                         \
        if (__builtin_expect((status_expr) != OC_OK, 0))                         \
            oc_fail(__FILE__, __LINE__, "%s", oc_errmsg());                       \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_CHECK_H */
