#!/bin/sh
# scripts/check-exports.sh LIB — libopcore exports exactly its public API:
# the functions include/opcore/*.h declare OC_API (opcore/export.h), plus
# the __wrap_* functions op libraries are linked against (src/engine/escape.c);
# no oc__ internal, and no public declaration left without OC_API.
set -eu
lib=${1:?usage: check-exports.sh build/libopcore.so.0}
here=$(dirname "$0")/..
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# gcc's target_clones (the tile math's AVX2 / generic versions) exports an
# ifunc resolver beside each cloned API function: part of that function.
nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/\.resolver$//' | sort -u > "$tmp/exported"
# A declaration: a line at file level naming an oc_ function, not a macro,
# typedef or static inline (the pattern that put OC_API on each of them).
grep -hE '^[A-Za-z_][^;{}()=#]*\boc_[a-z0-9_]+[[:space:]]*\(' "$here"/include/opcore/*.h |
    grep -vE '^(static|typedef|extern "C")' > "$tmp/decls" || true
if grep -v '^OC_API ' "$tmp/decls" > "$tmp/bare"; then
    echo "check-exports: public declarations without OC_API (they would not be exported):" >&2
    cat "$tmp/bare" >&2
    exit 1
fi
sed -E 's/^[^(]*\b(oc_[a-z0-9_]+)[[:space:]]*\(.*/\1/' "$tmp/decls" | sort -u > "$tmp/api"

grep -E '^oc__' "$tmp/exported" > "$tmp/internal" || true
grep -vE '^(oc_|__wrap_)' "$tmp/exported" > "$tmp/other" || true
grep -E '^oc_[a-z0-9]' "$tmp/exported" | comm -23 - "$tmp/api" > "$tmp/undeclared"
comm -13 "$tmp/exported" "$tmp/api" > "$tmp/missing"
status=0
for f in internal other undeclared missing; do
    if [ -s "$tmp/$f" ]; then
        case $f in
        internal) echo "check-exports: $lib exports internal oc__ symbols:" >&2 ;;
        other) echo "check-exports: $lib exports symbols outside the API:" >&2 ;;
        undeclared) echo "check-exports: $lib exports oc_ symbols no public header declares:" >&2 ;;
        missing) echo "check-exports: public OC_API functions $lib does not define:" >&2 ;;
        esac
        sed 's/^/  /' "$tmp/$f" >&2
        status=1
    fi
done
[ $status -eq 0 ] && echo "check-exports: $lib exports $(wc -l < "$tmp/api") oc_ API functions and $(grep -c '^__wrap_' "$tmp/exported") __wrap_ functions, no internals"
exit $status
