/* Argument vectors for the build tool (strings: src/core/strbuf.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "build/build_internal.h"

static void argv_push(oc__argv *a, char *s)
{
    if (!s) {
        a->oom = true;
        return;
    }
    if (a->n + 2 > a->cap) {
        int cap = a->cap ? 2 * a->cap : 16;
        char **v = oc__realloc(a->v, (size_t)cap * sizeof *v);
        if (!v) {
            oc__free(s);
            a->oom = true;
            return;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = s;
    a->v[a->n] = NULL;
}

void oc__argv_add(oc__argv *a, const char *s) { argv_push(a, oc__strdup(s)); }

void oc__argv_addf(oc__argv *a, const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = n < 0 ? NULL : oc__malloc((size_t)n + 1);
    if (s) vsnprintf(s, (size_t)n + 1, fmt, again);
    va_end(again);
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
    for (int i = 0; i < a->n; i++) oc__free(a->v[i]);
    oc__free(a->v);
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
    /* Regular files only, opened without blocking: a FIFO or a terminal
     * named by a stale stamp or a source must not hang the build. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    /* read(2) directly: stdio's fdopen would add an fcntl and an fstat per
     * file, and a cached build reads dozens of them. */
    oc__sb b = {0};
    char buf[65536];
    ssize_t n;
    int err = 0;
    for (;;) {
        n = read(fd, buf, sizeof buf);
        if (n > 0) oc__sb_putn(&b, buf, (size_t)n);
        else if (n < 0 && errno == EINTR) continue;
        else {
            err = n < 0;
            break;
        }
    }
    close(fd);
    if (err || b.oom) {
        oc__sb_free(&b);
        errno = err ? EIO : ENOMEM;
        return NULL;
    }
    if (!b.s) {
        b.s = oc__calloc(1, 1);
        if (!b.s) {
            errno = ENOMEM;
            return NULL;
        }
    }
    if (len) *len = b.len;
    return b.s;
}
