/* Per-thread last error, in the manner of sqlite3_errmsg(). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "opcore/status.h"

#define OC_ERRMSG_MAX 8192 /* compiler output can be long; keep the start */

static _Thread_local char tls_msg[OC_ERRMSG_MAX];
static _Thread_local oc_status tls_code;
static _Thread_local char tls_op[512]; /* oc_errop(), when tls_has_op */
static _Thread_local bool tls_has_op;

const char *oc_errmsg(void) { return tls_msg; }

oc_status oc_errcode(void) { return tls_code; }

const char *oc_errop(void) { return tls_has_op ? tls_op : NULL; }

void oc_clear_error(void)
{
    tls_msg[0] = '\0';
    tls_code = OC_OK;
    tls_has_op = false;
}

oc_status oc__set_errorv(oc_status status, const char *fmt, va_list ap)
{
    vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
    tls_code = status;
    tls_has_op = false;
    return status;
}

void oc__error_in_op(const char *qualname)
{
    /* The call path's messages name the op first ("op 'lib::op': ..."); a
     * lower layer's (out of memory, a kernel stack that cannot be mapped)
     * gets that prefix here, so the message always names the op. */
    char prefix[sizeof tls_op + 8];
    int n = snprintf(prefix, sizeof prefix, "op '%s'", qualname);
    if (n > 0 && strncmp(tls_msg, prefix, (size_t)n) != 0) {
        char rest[sizeof tls_msg];
        snprintf(rest, sizeof rest, "%s", tls_msg[0] ? tls_msg : oc_status_message(tls_code));
        /* (a message that long loses its end, as oc_set_error's do) */
        snprintf(tls_msg, sizeof tls_msg, "%s: %.*s", prefix, (int)(sizeof tls_msg - sizeof prefix - 3), rest);
    }
    snprintf(tls_op, sizeof tls_op, "%s", qualname);
    tls_has_op = true;
}

oc_status oc_set_error(oc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    oc__set_errorv(status, fmt, ap);
    va_end(ap);
    return status;
}

#define OC_STATUS_NAME_(NAME, code, xla, message) [code] = "OC_" #NAME,
#define OC_STATUS_MESSAGE_(NAME, code, xla, message) [code] = message,
static const char *const status_names[] = {OC_STATUS_MAP(OC_STATUS_NAME_)};
static const char *const status_messages[] = {OC_STATUS_MAP(OC_STATUS_MESSAGE_)};

const char *oc_status_name(oc_status status)
{
    if ((unsigned)status < sizeof status_names / sizeof status_names[0]) return status_names[status];
    return "OC_UNKNOWN";
}

const char *oc_status_message(oc_status status)
{
    if ((unsigned)status < sizeof status_messages / sizeof status_messages[0]) return status_messages[status];
    return "an unknown status code";
}
