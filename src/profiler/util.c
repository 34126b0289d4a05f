/* src/profiler/util.c — a growable text buffer for the exporters, with
 * JSON and HTML escaping; it can stream to a gzFile or a FILE. And the
 * lanes of overlapping kernels, growing an array, reading a snapshot's
 * names, and making directories. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "core/alloc.h"
#include "profiler/prof.h"

#define SB_FLUSH_AT (1u << 20)

void oc__pw_flush(oc__pw *s)
{
    if (s->buf.oom) s->failed = true;
    if (!s->buf.len) return;
    if (s->gz) {
        if (gzwrite((gzFile)s->gz, s->buf.s, (unsigned)s->buf.len) != (int)s->buf.len) s->failed = true;
        s->buf.len = 0;
    } else if (s->f) {
        if (fwrite(s->buf.s, 1, s->buf.len, s->f) != s->buf.len) s->failed = true;
        s->buf.len = 0;
    }
}

/* Writers to a file flush every SB_FLUSH_AT bytes; in-memory ones keep all. */
static void maybe_flush(oc__pw *s)
{
    if (s->buf.oom) s->failed = true;
    if ((s->gz || s->f) && s->buf.len >= SB_FLUSH_AT) oc__pw_flush(s);
}

void oc__pw_put(oc__pw *s, const void *p, size_t n)
{
    oc__sb_putn(&s->buf, p, n);
    maybe_flush(s);
}

void oc__pw_puts(oc__pw *s, const char *str)
{
    oc__pw_put(s, str, strlen(str));
}

void oc__pw_printf(oc__pw *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !oc__sb_reserve(&s->buf, (size_t)n)) { s->failed = true; return; }
    va_start(ap, fmt);
    vsnprintf(s->buf.s + s->buf.len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    s->buf.len += (size_t)n;
    maybe_flush(s);
}

static void json_str(oc__pw *s, const char *str, bool lt)
{
    oc__pw_put(s, "\"", 1);
    const char *run = str;
    for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
        const char *esc = NULL;
        char u[8];
        switch (*p) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '<': esc = lt ? "\\u003c" : NULL; break;
        default:
            if (*p < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", *p);
                esc = u;
            }
        }
        if (esc) {
            oc__pw_put(s, run, (size_t)((const char *)p - run));
            oc__pw_puts(s, esc);
            run = (const char *)p + 1;
        }
    }
    oc__pw_puts(s, run);
    oc__pw_put(s, "\"", 1);
}

void oc__pw_json_str(oc__pw *s, const char *str) { json_str(s, str, false); }

void oc__pw_json_str_html(oc__pw *s, const char *str) { json_str(s, str, true); }

void oc__pw_html(oc__pw *s, const char *str)
{
    const char *run = str;
    for (const char *p = str; *p; p++) {
        const char *esc = NULL;
        switch (*p) {
        case '&': esc = "&amp;"; break;
        case '<': esc = "&lt;"; break;
        case '>': esc = "&gt;"; break;
        case '"': esc = "&quot;"; break;
        case '\'': esc = "&#39;"; break;
        default: break;
        }
        if (esc) {
            oc__pw_put(s, run, (size_t)(p - run));
            oc__pw_puts(s, esc);
            run = p + 1;
        }
    }
    oc__pw_puts(s, run);
}

void oc__pw_free(oc__pw *s) { oc__sb_free(&s->buf); }

uint8_t *oc__plane_assign(const oc__ptrack *t, int *nlanes)
{
    uint8_t *lanes = oc__malloc(t->n ? t->n : 1);
    uint64_t end[OC__PMAX_LANES] = {0};
    int n = 1;
    if (!lanes) return NULL;
    for (size_t i = 0; i < t->n; i++) {
        int l = 0;
        while (l < n && end[l] > t->ev[i].t0) l++;
        if (l == OC__PMAX_LANES) l = OC__PMAX_LANES - 1;
        if (l == n) n++;
        if (t->ev[i].t1 > end[l]) end[l] = t->ev[i].t1;
        lanes[i] = (uint8_t)l;
    }
    *nlanes = n;
    return lanes;
}

void *oc__pgrow(void *p, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (p && need <= *cap) return p;
    size_t n = *cap ? *cap : first;
    while (n < need) n *= 2;
    void *grown = oc__realloc(p, n * elem);
    if (grown) *cap = n;
    return grown;
}

/* ---- a snapshot's names and window ------------------------------------- */

const char *oc__pname(const oc__pdata *d, uint32_t id)
{
    return id < d->nnames ? d->names[id] : "?";
}

const char *oc__pkind_name(unsigned kind)
{
    static const char *const n[] = {"kernel", "call", "shape", "alloc", "dispatch",
                                     "wait", "build", "block", "step", "external"};
    return kind < sizeof n / sizeof n[0] ? n[kind] : "?";
}

const char *oc__pcat(const oc__pdata *d, const oc__pev *e)
{
    if (e->kind == OC_PROF_EXTERNAL) return oc__pname(d, oc__pext_cat(e));
    return oc__pkind_name(e->kind);
}

bool oc__pkeep(const oc__pdata *d, oc__pev *e)
{
    if (e->t0 > d->end_ns || e->t1 < d->start_ns) return false;
    if (e->t0 < d->start_ns) e->t0 = d->start_ns;
    if (e->t1 > d->end_ns) e->t1 = d->end_ns;
    return true;
}

/* ---- files --------------------------------------------------------------- */

int oc__mkdirs(const char *path)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(tmp, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == 0) {
            char c = tmp[i];
            tmp[i] = 0;
            if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
            tmp[i] = c;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}
