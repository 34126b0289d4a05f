/* Settings read from the environment, one spelling for every part: sizes
 * with an optional K / M suffix, "0" as the one way to say off and "1" to
 * turn on what is off by default. */
#include <stdlib.h>

#include "core/internal.h"

bool oc__env_off(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] == '0' && !v[1];
}

bool oc__env_on(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] == '1' && !v[1];
}

size_t oc__env_size(const char *name, size_t fallback)
{
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (*end == 'k' || *end == 'K') n *= 1024;
    else if (*end == 'm' || *end == 'M') n *= 1024 * 1024;
    return n ? (size_t)n : fallback;
}

size_t oc__env_size_or_off(const char *name, size_t fallback)
{
    return oc__env_off(name) ? 0 : oc__env_size(name, fallback);
}
