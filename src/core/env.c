/* Settings read from the environment, one spelling for every part: sizes
 * with an optional K / M suffix, "0" as the one way to say off and "1" to
 * turn on what is off by default. */
#include <stdio.h>
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

size_t oc__cpu_cache_bytes(int index)
{
    char path[96], buf[32];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    FILE *f = fopen(path, "r");
    size_t n = 0;
    if (f) {
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            n = strtoull(buf, &end, 10);
            if (*end == 'K') n *= 1024;
            else if (*end == 'M') n *= 1024 * 1024;
        }
        fclose(f);
    }
    return n;
}
