/* src/build/sigcheck.h — generated prototype headers (internal). */
#ifndef OPCORE_BUILD_SIGCHECK_H
#define OPCORE_BUILD_SIGCHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "build/build_internal.h"
#include "library/schema.h"

bool oc__is_c_identifier(const char *s);

/* The identifier in oc_def's `#shape_fn` text ("&f", "(f)" -> "f"); false
 * if it is not a plain name (a cast, a call, ...): then it is not checked. */
bool oc__shape_fn_identifier(const char *text, char *out, size_t len);

/* The prototype of `fn` for schema `s`, with or without argument names
 * (the generated header leaves them out so no user macro can touch them). */
void oc__prototype(const oc_schema *s, const char *fn, bool with_names, char *buf, size_t len);

void oc__sig_header_begin(oc__sb *b);
void oc__sig_header_add(oc__sb *b, const char *proto, bool is_static);

/* Names the compiler reported as "conflicting types for 'NAME'" or "static
 * declaration of 'NAME' follows non-static declaration" (static_clash[i]
 * true) in `output`; returns how many (at most `max`). */
int oc__sig_conflicts(const char *output, char names[][OC_MAX_NAME], int max, bool *static_clash);

#endif /* OPCORE_BUILD_SIGCHECK_H */
