#!/bin/sh
# Route every host allocation of libopcore through its replaceable allocator
# (include/opcore/alloc.h, src/core/alloc.h): malloc/calloc/realloc/free/
# strdup/strndup calls in the library's sources become oc__malloc/... and
# each file that now uses them includes "core/alloc.h". Mechanical and
# idempotent: run it again after moving or adding files.
#
# Left alone: the parts that are not the library (src/cli, src/python,
# src/jax: they are hosts of libopcore), the allocator itself
# (src/core/alloc.c), the templates `opcore new` writes (src/build/
# templates.c: C text for other projects), member calls (x.free(), p->free()),
# and `(free)(p)`, the spelling for memory another library allocated
# (scandir's list, ...), which the C library's free must release.
set -e
cd "$(dirname "$0")/.."
files=$(find src -name '*.[ch]' \
    ! -path 'src/cli/*' ! -path 'src/python/*' ! -path 'src/jax/*' \
    ! -path src/core/alloc.c ! -path src/core/alloc.h ! -path src/build/templates.c | sort)
for f in $files; do
    # twice: a call right after another's "(" (free(strdup(...))) needs the
    # "(" the first pass consumed
    sed -E -i \
        -e 's/(^|[^._>[:alnum:]])(malloc|calloc|realloc|free|strdup|strndup)\(/\1oc__\2(/g' \
        -e 's/(^|[^._>[:alnum:]])(malloc|calloc|realloc|free|strdup|strndup)\(/\1oc__\2(/g' "$f"
    if grep -Eq '\boc__(malloc|calloc|realloc|free|strdup|strndup)\(' "$f" &&
       ! grep -q '#include "core/alloc.h"' "$f"; then
        # before the file's first project include, else after its last system one
        if grep -q '^#include "' "$f"; then
            sed -i '0,/^#include "/s//#include "core\/alloc.h"\n#include "/' "$f"
        else
            last=$(grep -n '^#include <' "$f" | tail -1 | cut -d: -f1)
            sed -i "${last}a\\
\\
#include \"core/alloc.h\"" "$f"
        fi
    fi
done
