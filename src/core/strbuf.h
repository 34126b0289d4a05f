/* src/core/strbuf.h — growable strings (internal). */
#ifndef OPCORE_STRBUF_H
#define OPCORE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct oc__sb {
    char *s;     /* NUL-terminated once anything was added */
    size_t len, cap;
    bool oom;    /* an allocation failed; the content is incomplete */
} oc__sb;

/* Room for `extra` more bytes (and the NUL); false once out of memory. */
bool oc__sb_reserve(oc__sb *b, size_t extra);
void oc__sb_put(oc__sb *b, const char *s);
void oc__sb_putn(oc__sb *b, const char *s, size_t n);
void oc__sb_printf(oc__sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void oc__sb_free(oc__sb *b);
static inline const char *oc__sb_str(const oc__sb *b) { return b->s ? b->s : ""; }

#endif /* OPCORE_STRBUF_H */
