/* Per-thread last error, in the manner of sqlite3_errmsg(). */
#include <stdarg.h>
#include <stdio.h>

#include "core/internal.h"
#include "opcore/status.h"

#define OC_ERRMSG_MAX 8192 /* compiler output can be long; keep the start */

static _Thread_local char tls_msg[OC_ERRMSG_MAX];
static _Thread_local oc_status tls_code;

const char *oc_errmsg(void) { return tls_msg; }

oc_status oc_errcode(void) { return tls_code; }

void oc_clear_error(void)
{
    tls_msg[0] = '\0';
    tls_code = OC_OK;
}

oc_status oc__set_errorv(oc_status status, const char *fmt, va_list ap)
{
    vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
    tls_code = status;
    return status;
}

oc_status oc_set_error(oc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    oc__set_errorv(status, fmt, ap);
    va_end(ap);
    return status;
}

const char *oc_status_name(oc_status status)
{
    static const char *const names[] = {
        "OC_OK",     "OC_ERROR", "OC_EINVAL",  "OC_ENOMEM", "OC_ENOTFOUND",
        "OC_EEXIST", "OC_EABI",  "OC_EBUILD",  "OC_EKERNEL", "OC_EFAULT",
        "OC_ESTACK", "OC_ESHAPE", "OC_ECOHERENCE", "OC_EIO", "OC_EMETA"};
    if ((unsigned)status < sizeof names / sizeof names[0]) return names[status];
    return "OC_UNKNOWN";
}
