/* opcore/status.h — status codes and the per-thread last error.
 *
 * Every opcore call that can fail returns an oc_status (OC_OK == 0) and, on
 * failure, leaves a readable message for the calling thread, in the manner of
 * SQLite's sqlite3_errmsg(): the message names the op, the argument and what
 * was expected versus what was given.
 */
#ifndef OPCORE_STATUS_H
#define OPCORE_STATUS_H

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum oc_status {
    OC_OK = 0,          /* success */
    OC_ERROR = 1,       /* unspecified failure (see oc_errmsg) */
    OC_EINVAL = 2,      /* a bad argument: arity, type, dtype, shape */
    OC_ENOMEM = 3,      /* out of memory (host memory or TCM) */
    OC_ENOTFOUND = 4,   /* no such library, op, symbol or file */
    OC_EEXIST = 5,      /* name clash: an op or library is already loaded */
    OC_EABI = 6,        /* library built for another opcore ABI: rebuild it */
    OC_EBUILD = 7,      /* compiling or linking an op library failed */
    OC_EKERNEL = 8,     /* a kernel or shape function failed an OC_CHECK */
    OC_EFAULT = 9,      /* a kernel faulted (SIGSEGV, SIGBUS, SIGFPE, SIGILL) */
    OC_ESTACK = 10,     /* a kernel overflowed its stack */
    OC_ESHAPE = 11,     /* an output disagrees with the shape function */
    OC_ECOHERENCE = 12, /* a potentially incoherent access under COHERENT */
    OC_EIO = 13,        /* reading or writing a file failed */
    OC_EMETA = 14       /* tensor data touched where only shapes exist */
} oc_status;

/* The message of the last failure on this thread ("" if none). The string
 * stays valid until the next opcore call on this thread. */
OC_API const char *oc_errmsg(void);

/* The status of the last failure on this thread (OC_OK if none). */
OC_API oc_status oc_errcode(void);

/* The symbolic name of a status code, e.g. "OC_EINVAL". */
OC_API const char *oc_status_name(oc_status status);

/* Forget the last error on this thread. */
OC_API void oc_clear_error(void);

/* Record a failure for this thread and return `status`; printf-style.
 * Host code (shape functions, frameworks glue) may use it directly. */
OC_API oc_status oc_set_error(oc_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_STATUS_H */
