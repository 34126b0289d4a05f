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

/* Every status code, once; the enum below, oc_status_name,
 * oc_status_message and the framework mappings (XLA's error codes) are
 * generated from it:
 *
 *     XX(NAME, code, xla, "message")
 *
 *   NAME       the constant is OC_<NAME>, its name (oc_status_name) "OC_<NAME>"
 *   code       its value (part of the ABI: never renumber)
 *   xla        the XLA FFI error code it becomes, XLA_FFI_Error_Code_<xla>
 *   "message"  what it means (oc_status_message)
 */
#define OC_STATUS_MAP(XX)                                                                     \
    XX(OK, 0, OK, "success")                                                                  \
    XX(ERROR, 1, INTERNAL, "unspecified failure")                                             \
    XX(EINVAL, 2, INVALID_ARGUMENT, "a bad argument: arity, type, dtype, shape")              \
    XX(ENOMEM, 3, RESOURCE_EXHAUSTED, "out of memory (host memory or TCM)")                   \
    XX(ENOTFOUND, 4, NOT_FOUND, "no such library, op, symbol or file")                        \
    XX(EEXIST, 5, ALREADY_EXISTS, "name clash: an op or library is already loaded")           \
    XX(EABI, 6, FAILED_PRECONDITION, "library built for another opcore ABI: rebuild it")      \
    XX(EBUILD, 7, INTERNAL, "compiling or linking an op library failed")                      \
    XX(EKERNEL, 8, INTERNAL, "a kernel or shape function failed an OC_CHECK")                 \
    XX(EFAULT, 9, INTERNAL, "a kernel faulted (SIGSEGV, SIGBUS, SIGFPE, SIGILL)")             \
    XX(ESTACK, 10, INTERNAL, "a kernel overflowed its stack")                                 \
    XX(ESHAPE, 11, INVALID_ARGUMENT, "an output disagrees with the shape function")           \
    XX(ECOHERENCE, 12, INTERNAL, "a potentially incoherent access under COHERENT")            \
    XX(EIO, 13, INTERNAL, "reading or writing a file failed")                                 \
    XX(EMETA, 14, INVALID_ARGUMENT, "tensor data touched where only shapes exist")

#define OC_STATUS_ENUM_(NAME, code, ...) OC_##NAME = code,
typedef enum oc_status {
    OC_STATUS_MAP(OC_STATUS_ENUM_)
} oc_status;
#undef OC_STATUS_ENUM_

/* The message of the last failure on this thread ("" if none). The string
 * stays valid until the next opcore call on this thread. */
OC_API const char *oc_errmsg(void);

/* The status of the last failure on this thread (OC_OK if none). */
OC_API oc_status oc_errcode(void);

/* The symbolic name of a status code, e.g. "OC_EINVAL" ("OC_UNKNOWN" for
 * a value that is none). */
OC_API const char *oc_status_name(oc_status status);

/* What a status code means, e.g. "out of memory (host memory or TCM)": the
 * kind of failure, where oc_errmsg says what failed. */
OC_API const char *oc_status_message(oc_status status);

/* The op whose call made the last failure on this thread: its qualified
 * name ("lib::op") when the failure came out of calling it (oc_op_call,
 * oc_op_run, oc_op_invoke, oc_op_infer), and oc_errmsg then begins with
 * "op '<that name>'"; NULL when the last failure was no op call's (or there
 * was none). Adapters use it to name the op without reading the message. */
OC_API const char *oc_errop(void);

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
