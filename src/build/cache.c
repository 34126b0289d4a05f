/* The build cache: the compiler's identity, stamp files and dependency
 * lists.
 *
 * A stamp (out_dir/.lib<name>.so.stamp) records
 *   key   hash of everything known before compiling (sources, paths, flags,
 *         options, compiler identity, ABI, opcore's headers, the CPU)
 *   full  hash of key + the contents of every header the compiles read
 *         (from the compiler's -MD output), so editing a header rebuilds
 *   lib   size and mtime of the library written, so a library replaced
 *         behind our back is rebuilt
 *   dep   one line per header
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "build/build_internal.h"
#include "core/alloc.h"
#include "core/internal.h"

void oc__hash_hex(oc__hash h, char out[33])
{
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.hi, (unsigned long long)h.lo);
}

/* ---- compiler identity ------------------------------------------------ */

typedef struct cc_ident {
    char *cmd;   /* the compiler command, words joined */
    char *ident; /* path, stat and --version output */
} cc_ident;

static pthread_mutex_t cc_lock = PTHREAD_MUTEX_INITIALIZER;
static cc_ident *cc_cache;
static int cc_count;

static char *resolve_in_path(const char *prog)
{
    if (strchr(prog, '/')) return oc__realpath(prog);
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        char buf[PATH_MAX];
        if (n > 0 && n + strlen(prog) + 2 < sizeof buf) {
            memcpy(buf, path, n);
            buf[n] = '/';
            strcpy(buf + n + 1, prog);
            if (access(buf, X_OK) == 0) return oc__realpath(buf);
        }
        if (!end) break;
        path = end + 1;
    }
    return NULL;
}

/* The compiler's `--version` text is kept on disk per compiler command and
 * binary (its path, size and mtime: ccache's default compiler_check), so a
 * cached build does not start the compiler at all. */
static void saved_identity_path(const char *cmd, const char *resolved, const struct stat *st, char *out,
                                size_t len)
{
    const char *root = oc_build_cache_dir();
    if (!root[0]) return;
    XXH64_state_t *h = XXH64_createState();
    if (!h) return;
    XXH64_reset(h, 0);
    XXH64_update(h, cmd, strlen(cmd) + 1);
    XXH64_update(h, resolved, strlen(resolved) + 1);
    long long meta[3] = {(long long)st->st_size, (long long)st->st_mtim.tv_sec, (long long)st->st_mtim.tv_nsec};
    XXH64_update(h, meta, sizeof meta);
    unsigned long long key = (unsigned long long)XXH64_digest(h);
    XXH64_freeState(h);
    if (snprintf(out, len, "%s/compilers/%016llx.version", root, key) >= (int)len) out[0] = '\0';
}

static void save_identity(const char *path, const char *text, size_t len)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = '\0';
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return; /* the cache root exists: builds made it */
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    bool ok = fwrite(text, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp); /* best effort: the next build asks the compiler */
}

oc_status oc__compiler_identity(const oc__argv *cc, const char **out)
{
    oc__sb cmd = {0};
    oc__argv_format(cc, &cmd);
    if (cmd.oom) return oc_set_error(OC_ENOMEM, "out of memory");
    pthread_mutex_lock(&cc_lock);
    for (int i = 0; i < cc_count; i++) {
        if (strcmp(cc_cache[i].cmd, cmd.s) == 0) {
            *out = cc_cache[i].ident;
            pthread_mutex_unlock(&cc_lock);
            oc__sb_free(&cmd);
            return OC_OK;
        }
    }
    pthread_mutex_unlock(&cc_lock);

    char *resolved = resolve_in_path(cc->v[0]);
    if (!resolved) {
        oc_status st = oc_set_error(OC_EBUILD,
                                    "opcore build: the C compiler '%s' was not found (set CC to "
                                    "a C compiler, e.g. CC=gcc)",
                                    cc->v[0]);
        oc__sb_free(&cmd);
        return st;
    }
    oc__job job = {0};
    struct stat cst;
    bool have_stat = stat(resolved, &cst) == 0;
    char saved[PATH_MAX];
    saved[0] = '\0';
    if (have_stat) saved_identity_path(oc__sb_str(&cmd), resolved, &cst, saved, sizeof saved);
    errno = 0;
    if (saved[0]) job.output = oc__read_file(saved, &job.output_len);
    if (!job.output && saved[0] && errno == ENOMEM) {
        oc__sb_free(&cmd);
        oc__free(resolved);
        return oc_set_error(OC_ENOMEM, "out of memory");
    }
    int failed = 0;
    if (!job.output) {
        oc__argv_extend(&job.argv, cc);
        oc__argv_add(&job.argv, "--version");
        job.what = "compiler identity";
        failed = oc__jobs_run(&job, 1, 1, false);
        if (!failed && saved[0]) save_identity(saved, job.output, job.output_len);
    }
    if (failed) {
        oc_status st = job.oom ? oc_set_error(OC_ENOMEM, "opcore build: out of memory running the C compiler '%s'",
                                              oc__sb_str(&cmd))
                               : oc_set_error(OC_EBUILD, "opcore build: the C compiler '%s' does not run: %s",
                                              oc__sb_str(&cmd), job.output ? job.output : "");
        oc__job_free(&job);
        oc__sb_free(&cmd);
        oc__free(resolved);
        return st;
    }
    oc__sb id = {0};
    oc__sb_printf(&id, "%s\n%s\n", oc__sb_str(&cmd), resolved);
    if (have_stat)
        oc__sb_printf(&id, "%lld %lld.%09ld\n", (long long)cst.st_size, (long long)cst.st_mtim.tv_sec,
                      cst.st_mtim.tv_nsec);
    oc__sb_putn(&id, job.output, job.output_len);
    oc__job_free(&job);
    oc__free(resolved);
    if (id.oom) {
        oc__sb_free(&cmd);
        oc__sb_free(&id);
        return oc_set_error(OC_ENOMEM, "out of memory");
    }

    pthread_mutex_lock(&cc_lock);
    cc_ident *grown = oc__realloc(cc_cache, (size_t)(cc_count + 1) * sizeof *grown);
    if (!grown) {
        pthread_mutex_unlock(&cc_lock);
        oc__sb_free(&cmd);
        oc__sb_free(&id);
        return oc_set_error(OC_ENOMEM, "out of memory");
    }
    cc_cache = grown;
    cc_cache[cc_count].cmd = cmd.s;
    cc_cache[cc_count].ident = id.s;
    *out = id.s;
    cc_count++;
    pthread_mutex_unlock(&cc_lock);
    return OC_OK;
}

/* Released at exit so leak checkers see a clean process. */
__attribute__((destructor)) static void cc_cache_free(void)
{
    for (int i = 0; i < cc_count; i++) {
        oc__free(cc_cache[i].cmd);
        oc__free(cc_cache[i].ident);
    }
    oc__free(cc_cache);
    cc_cache = NULL;
    cc_count = 0;
}

/* ---- stamps --------------------------------------------------------------- */

void oc__stamp_free(oc__stamp *st) { oc__argv_free(&st->deps); }

bool oc__stamp_read(const char *path, oc__stamp *out)
{
    memset(out, 0, sizeof *out);
    char *text = oc__read_file(path, NULL);
    if (!text) return false;
    bool ok = strncmp(text, "opcore-build-stamp 1\n", 21) == 0;
    char *save = NULL;
    int have = 0;
    for (char *line = strtok_r(text, "\n", &save); ok && line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "key ", 4) == 0 && strlen(line + 4) == 32) {
            memcpy(out->key, line + 4, 33);
            have |= 1;
        } else if (strncmp(line, "full ", 5) == 0 && strlen(line + 5) == 32) {
            memcpy(out->full, line + 5, 33);
            have |= 2;
        } else if (strncmp(line, "lib ", 4) == 0) {
            if (sscanf(line + 4, "%lld %lld", &out->lib_size, &out->lib_mtime_ns) == 2) have |= 4;
        } else if (strncmp(line, "dep ", 4) == 0) {
            oc__argv_add(&out->deps, line + 4);
        }
    }
    oc__free(text);
    if (!ok || have != 7 || out->deps.oom) {
        errno = out->deps.oom ? ENOMEM : 0;
        oc__stamp_free(out);
        return false;
    }
    return true;
}

oc_status oc__stamp_write(const char *path, const oc__stamp *st)
{
    oc__sb b = {0};
    oc__sb_printf(&b, "opcore-build-stamp 1\nkey %s\nfull %s\nlib %lld %lld\n", st->key, st->full,
                  st->lib_size, st->lib_mtime_ns);
    for (int i = 0; i < st->deps.n; i++) oc__sb_printf(&b, "dep %s\n", st->deps.v[i]);
    if (b.oom) {
        oc__sb_free(&b);
        return oc_set_error(OC_ENOMEM, "opcore build: out of memory writing the cache stamp %s", path);
    }
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fwrite(b.s, 1, b.len, f) == b.len;
    if (f && fclose(f) != 0) ok = false;
    oc__sb_free(&b);
    if (!ok || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return oc_set_error(OC_EIO, "opcore build: cannot write the cache stamp %s: %s", path,
                            strerror(err));
    }
    return OC_OK;
}

bool oc__deps_hash(const char *key_hex, const oc__argv *deps, oc__hash *out)
{
    XXH3_state_t *s = XXH3_createState();
    if (!s) return false;
    XXH3_128bits_reset(s);
    XXH3_128bits_update(s, key_hex, strlen(key_hex) + 1);
    bool ok = true;
    for (int i = 0; ok && i < deps->n; i++) {
        size_t len = 0;
        char *text = oc__read_file(deps->v[i], &len);
        if (!text) {
            ok = false;
            break;
        }
        XXH3_128bits_update(s, deps->v[i], strlen(deps->v[i]) + 1);
        XXH3_128bits_update(s, &len, sizeof len);
        XXH3_128bits_update(s, text, len);
        oc__free(text);
    }
    XXH128_hash_t h = XXH3_128bits_digest(s);
    XXH3_freeState(s);
    out->lo = h.low64;
    out->hi = h.high64;
    return ok;
}

static void add_dep(oc__argv *deps, const char *word, const char *skip_prefix)
{
    char *abs = NULL;
    if (word[0] != '/') {
        abs = oc__realpath(word);
        if (!abs) {
            if (errno == ENOMEM) deps->oom = true;
            return;
        }
        word = abs;
    }
    if (!(skip_prefix && *skip_prefix && strncmp(word, skip_prefix, strlen(skip_prefix)) == 0)) {
        bool seen = false;
        for (int i = 0; i < deps->n && !seen; i++) seen = strcmp(deps->v[i], word) == 0;
        if (!seen) oc__argv_add(deps, word);
    }
    oc__free(abs);
}

void oc__deps_parse(const char *dfile, const char *skip_prefix, oc__argv *deps)
{
    char *text = oc__read_file(dfile, NULL);
    if (!text) {
        if (errno == ENOMEM) deps->oom = true; /* else: no dependency file, no dependencies */
        return;
    }
    /* Skip the target: everything up to the first ": ". */
    char *p = strstr(text, ": ");
    if (!p) p = strchr(text, ':');
    if (!p) {
        oc__free(text);
        return;
    }
    p++;
    oc__sb w = {0};
    for (;;) {
        char c = *p;
        bool end = c == '\0';
        if (c == '\\' && (p[1] == '\n' || (p[1] == '\r' && p[2] == '\n'))) {
            p += p[1] == '\n' ? 2 : 3;
            c = ' ';
        } else if (c == '\\' && (p[1] == ' ' || p[1] == '#' || p[1] == '\\')) {
            oc__sb_putn(&w, p + 1, 1);
            p += 2;
            continue;
        } else if (c == '$' && p[1] == '$') {
            oc__sb_putn(&w, "$", 1);
            p += 2;
            continue;
        } else if (!end) {
            p++;
        }
        if (end || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            if (w.len) {
                if (w.s[w.len - 1] != ':') add_dep(deps, w.s, skip_prefix);
                w.len = 0;
                w.s[0] = '\0';
            }
            if (end) break;
            continue;
        }
        oc__sb_putn(&w, &c, 1);
    }
    if (w.oom) deps->oom = true;
    oc__sb_free(&w);
    oc__free(text);
}

/* ---- the cache directory ------------------------------------------------ */

const char *oc_build_cache_dir(void)
{
    /* per thread: the environment may change between calls (tests do) */
    static _Thread_local char dir[PATH_MAX];
    if (!oc__cache_root(dir, sizeof dir)) dir[0] = '\0';
    return dir;
}
