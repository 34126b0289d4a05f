/* Growable NUL-terminated strings: the one buffer the build tool and the
 * profiler's writers share. Allocation failure is sticky (oom) and checked
 * once by the caller. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"

bool oc__sb_reserve(oc__sb *b, size_t extra)
{
    if (b->oom) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *s = oc__realloc(b->s, cap);
    if (!s) {
        b->oom = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

void oc__sb_putn(oc__sb *b, const char *s, size_t n)
{
    if (!oc__sb_reserve(b, n)) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void oc__sb_put(oc__sb *b, const char *s) { oc__sb_putn(b, s, strlen(s)); }

void oc__sb_printf(oc__sb *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !oc__sb_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void oc__sb_free(oc__sb *b)
{
    oc__free(b->s);
    memset(b, 0, sizeof *b);
}

