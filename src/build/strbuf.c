/* Growable strings and argument vectors for the build tool. Allocation
 * failure is sticky (oom) and checked once by the caller. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build/build_internal.h"

static bool sb_reserve(oc__sb *b, size_t extra)
{
    if (b->oom) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *s = realloc(b->s, cap);
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
    if (!sb_reserve(b, n)) return;
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
    if (n < 0 || !sb_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void oc__sb_free(oc__sb *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

static void argv_push(oc__argv *a, char *s)
{
    if (!s) {
        a->oom = true;
        return;
    }
    if (a->n + 2 > a->cap) {
        int cap = a->cap ? 2 * a->cap : 16;
        char **v = realloc(a->v, (size_t)cap * sizeof *v);
        if (!v) {
            free(s);
            a->oom = true;
            return;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = s;
    a->v[a->n] = NULL;
}

void oc__argv_add(oc__argv *a, const char *s) { argv_push(a, strdup(s)); }

void oc__argv_addf(oc__argv *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    argv_push(a, s);
}

void oc__argv_extend(oc__argv *a, const oc__argv *b)
{
    for (int i = 0; i < b->n; i++) oc__argv_add(a, b->v[i]);
    if (b->oom) a->oom = true;
}

void oc__argv_free(oc__argv *a)
{
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    memset(a, 0, sizeof *a);
}

void oc__argv_split(oc__argv *a, const char *s)
{
    oc__sb w = {0};
    bool in_word = false;
    char quote = 0;
    for (const char *p = s;; p++) {
        char c = *p;
        if (c == '\0') break;
        if (quote) {
            if (c == quote) quote = 0;
            else if (c == '\\' && quote == '"' && p[1]) oc__sb_putn(&w, ++p, 1);
            else oc__sb_putn(&w, p, 1);
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            if (in_word) {
                oc__argv_add(a, oc__sb_str(&w));
                w.len = 0;
                if (w.s) w.s[0] = '\0';
                in_word = false;
            }
            continue;
        }
        in_word = true;
        if (c == '\'' || c == '"') quote = c;
        else if (c == '\\' && p[1]) oc__sb_putn(&w, ++p, 1);
        else oc__sb_putn(&w, p, 1);
    }
    if (in_word) oc__argv_add(a, oc__sb_str(&w));
    if (w.oom) a->oom = true;
    oc__sb_free(&w);
}

void oc__argv_format(const oc__argv *a, oc__sb *out)
{
    for (int i = 0; i < a->n; i++) {
        const char *s = a->v[i];
        if (i) oc__sb_put(out, " ");
        if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                            "-_=+/.,:@%") == strlen(s)) {
            oc__sb_put(out, s);
            continue;
        }
        oc__sb_put(out, "'");
        for (; *s; s++) {
            if (*s == '\'') oc__sb_put(out, "'\\''");
            else oc__sb_putn(out, s, 1);
        }
        oc__sb_put(out, "'");
    }
}

char *oc__read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    oc__sb b = {0};
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) oc__sb_putn(&b, buf, n);
    int err = ferror(f);
    fclose(f);
    if (err || b.oom) {
        oc__sb_free(&b);
        errno = err ? EIO : ENOMEM;
        return NULL;
    }
    if (!b.s) {
        b.s = calloc(1, 1);
        if (!b.s) {
            errno = ENOMEM;
            return NULL;
        }
    }
    if (len) *len = b.len;
    return b.s;
}
