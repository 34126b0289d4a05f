/* Only regular files go into a build.
 *
 * A compiler that includes a FIFO blocks in open() until a writer comes,
 * one that includes /dev/zero reads forever, and /dev/stdin or /dev/tty is
 * whatever the host process (a terminal, Python's pipe) has: the build would
 * hang without a word. So before compiling, the literal #include lines of
 * the sources (and of the headers they reach) are resolved and each file
 * must be a regular file outside /dev and /proc; after compiling, every file
 * the compiler's dependency output names is checked the same way (an
 * include spelled through a macro). The compiler itself runs with stdin
 * from /dev/null and without a controlling terminal, and a compile found
 * waiting to open a FIFO is ended (jobs.c), so what the first check cannot
 * see fails instead of waiting for input. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "build/build_internal.h"
#include "core/internal.h"

#define MAX_SCANNED 256 /* headers followed per build: enough, and bounded */

/* NULL if `path` is a regular file opcore may read, else what it is. */
const char *oc__not_regular(const char *path)
{
    if (strncmp(path, "/dev/", 5) == 0 || strncmp(path, "/proc/", 6) == 0) return "a device or process file";
    struct stat st;
    if (stat(path, &st) != 0) return NULL; /* missing: the compiler says so */
    if (S_ISREG(st.st_mode)) return NULL;
    return S_ISFIFO(st.st_mode) ? "a FIFO"
           : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
           : S_ISSOCK(st.st_mode) ? "a socket"
           : S_ISDIR(st.st_mode) ? "a directory"
                                  : "not a regular file";
}

static oc_status refuse(const char *lib, const char *src, int line, const char *inc, const char *what)
{
    char at[32] = "";
    if (line > 0) snprintf(at, sizeof at, ":%d", line);
    return oc_set_error(OC_EBUILD,
                        "opcore build: library '%s': %s%s includes %s, which is %s; a build reads only "
                        "regular files (a device, FIFO or the terminal would block it)",
                        lib, src, at, inc, what);
}

/* The file `name` of an #include in `src` names, or false if none exists. */
static bool resolve(const char *src, const char *name, bool quoted, const oc__argv *incs, char *out,
                    size_t len)
{
    struct stat st;
    if (name[0] == '/') {
        snprintf(out, len, "%s", name);
        return true;
    }
    if (quoted) {
        const char *slash = strrchr(src, '/');
        int dir = slash ? (int)(slash - src) : 1;
        snprintf(out, len, "%.*s/%s", dir, slash ? src : ".", name);
        if (lstat(out, &st) == 0) return true;
    }
    for (int i = 0; i < incs->n; i++) {
        snprintf(out, len, "%s/%s", incs->v[i], name);
        if (lstat(out, &st) == 0) return true;
    }
    return false;
}

/* Check the literal includes of seen->v[k] and queue the regular ones. */
static oc_status scan_one(const char *lib, int k, oc__argv *seen, const oc__argv *incs)
{
    errno = 0;
    char *text = oc__read_file(seen->v[k], NULL);
    if (!text && errno == ENOMEM) return oc_set_error(OC_ENOMEM, "out of memory reading %s", seen->v[k]);
    if (!text) return OC_OK; /* unreadable: the compiler reports it */
    oc_status st = OC_OK;
    int line = 1;
    for (char *p = text; *p && !st; line++) {
        char *eol = strchr(p, '\n');
        char *q = p;
        while (*q == ' ' || *q == '\t') q++;
        if (*q == '#') {
            q++;
            while (*q == ' ' || *q == '\t') q++;
            if (strncmp(q, "include", 7) == 0) {
                q += 7;
                while (*q == ' ' || *q == '\t') q++;
                char close = *q == '"' ? '"' : *q == '<' ? '>' : 0;
                char *end = close ? strchr(q + 1, close) : NULL;
                if (end && (!eol || end < eol)) {
                    char name[PATH_MAX], path[2 * PATH_MAX];
                    snprintf(name, sizeof name, "%.*s", (int)(end - q - 1), q + 1);
                    if (resolve(seen->v[k], name, close == '"', incs, path, sizeof path)) {
                        const char *what = oc__not_regular(path);
                        if (what) st = refuse(lib, seen->v[k], line, path, what);
                        else if (seen->n < MAX_SCANNED) {
                            errno = 0;
                            char *real = oc__realpath(path);
                            if (!real && errno == ENOMEM) {
                                st = oc_set_error(OC_ENOMEM, "out of memory resolving %s", path);
                                break;
                            }
                            bool known = !real;
                            for (int i = 0; i < seen->n && !known; i++) known = strcmp(seen->v[i], real) == 0;
                            if (!known) oc__argv_add(seen, real);
                            oc__free(real);
                        }
                    }
                }
            }
        }
        if (!eol) break;
        p = eol + 1;
    }
    oc__free(text);
    return st;
}

oc_status oc__check_includes(const char *lib, const char *const *srcs, int nsrcs, const oc__argv *incs)
{
    oc__argv seen = {0};
    for (int i = 0; i < nsrcs; i++) oc__argv_add(&seen, srcs[i]);
    oc_status st = OC_OK;
    for (int k = 0; k < seen.n && !st; k++) st = scan_one(lib, k, &seen, incs);
    if (!st && seen.oom) st = oc_set_error(OC_ENOMEM, "out of memory checking the includes of library '%s'", lib);
    oc__argv_free(&seen);
    return st;
}

oc_status oc__check_deps(const char *lib, const char *src, const oc__argv *deps, int from)
{
    for (int i = from; i < deps->n; i++) {
        const char *what = oc__not_regular(deps->v[i]);
        if (what) return refuse(lib, src, 0, deps->v[i], what);
    }
    return OC_OK;
}
