/* opcore's cache directory, one rule for every part that caches: the build
 * tool's default output (oc_build without out_dir, `opcore build` without
 * -o), the profiler's bandwidth measurement, and the Python package
 * (python/opcore/custom_op.py's cache_dir(), which spells the same rule). */
#include <stdio.h>
#include <stdlib.h>

#include "core/internal.h"

bool oc__cache_root(char *out, size_t n)
{
    const char *root = getenv("OPCORE_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int len;
    if (root && *root) len = snprintf(out, n, "%s", root);
    else if (xdg && *xdg) len = snprintf(out, n, "%s/opcore", xdg);
    else if (home && *home) len = snprintf(out, n, "%s/.cache/opcore", home);
    else return false;
    return len > 0 && (size_t)len < n;
}
