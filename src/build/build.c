/* oc_build: compile, check and link an op library (what `opcore build` does).
 *
 *  1. Validate the options, read the sources, hash everything that decides
 *     the output; an unchanged stamp means "cached", no compiler run.
 *  2. Compile every source in parallel into a private temp directory inside
 *     out_dir: shape sources as host code (-O2), compute sources as kernel
 *     code (-O3 -march=native), plus a generated file holding
 *     oc_build_info_entry. Link them into tmp/lib<name>.so (-z defs).
 *  3. dlopen the temp library and run its OC_LIBRARY block to learn the
 *     schemas, kernel names and shape function names. Check every kernel
 *     resolves in the library itself.
 *  4. Re-run the compiler in syntax-only mode on each source with a
 *     generated header of the prototypes the schemas require (-include): a
 *     mismatch is the compiler's own "conflicting types", reported with the
 *     expected prototype.
 *  5. rename() the library into place (a process that loaded the old file
 *     keeps its copy), write the stamp.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "build/build_internal.h"
#include "core/alloc.h"
#include "build/sigcheck.h"
#include "engine/escape.h"
#include "library/elfcheck.h"
#include "library/load_hint.h"
#include "library/registry.h"
#include "opcore/engine.h"
#include "opcore/library.h"
#include "profiler/hooks.h"

/* ---- where opcore's headers and library are ----------------------------- */

static char inc_dir[PATH_MAX], lib_dir[PATH_MAX];
static pthread_once_t dirs_once = PTHREAD_ONCE_INIT;

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void find_dirs(void)
{
    char self_dir[PATH_MAX] = "";
    Dl_info info;
    if (dladdr((void *)(uintptr_t)&oc_build, &info) && info.dli_fname) {
        char *real = oc__realpath(info.dli_fname);
        if (real) {
            char *slash = strrchr(real, '/');
            if (slash) {
                *slash = '\0';
                snprintf(self_dir, sizeof self_dir, "%s", real[0] ? real : "/");
            }
            oc__free(real);
        }
    }
    char probe[PATH_MAX + 64];
    const char *env = getenv("OPCORE_INCLUDE_DIR");
    if (env && *env) snprintf(inc_dir, sizeof inc_dir, "%s", env);
    if (!inc_dir[0] && self_dir[0]) {
        const char *rel[] = {"/include", "/../include"};
        for (int i = 0; i < 2 && !inc_dir[0]; i++) {
            snprintf(probe, sizeof probe, "%s%s/opcore/library.h", self_dir, rel[i]);
            if (is_file(probe)) {
                snprintf(probe, sizeof probe, "%s%s", self_dir, rel[i]);
                char *real = oc__realpath(probe);
                if (real) snprintf(inc_dir, sizeof inc_dir, "%s", real);
                oc__free(real);
            }
        }
    }
#ifdef OC_BUILD_INCLUDE_DIR
    if (!inc_dir[0]) snprintf(inc_dir, sizeof inc_dir, "%s", OC_BUILD_INCLUDE_DIR);
#endif
    env = getenv("OPCORE_LIB_DIR");
    if (env && *env) snprintf(lib_dir, sizeof lib_dir, "%s", env);
    if (!lib_dir[0] && self_dir[0]) {
        snprintf(probe, sizeof probe, "%s/libopcore.so", self_dir);
        if (is_file(probe)) snprintf(lib_dir, sizeof lib_dir, "%s", self_dir);
    }
#ifdef OC_BUILD_LIB_DIR
    if (!lib_dir[0]) snprintf(lib_dir, sizeof lib_dir, "%s", OC_BUILD_LIB_DIR);
#endif
}

const char *oc_build_include_dir(void)
{
    pthread_once(&dirs_once, find_dirs);
    return inc_dir;
}

const char *oc_build_lib_dir(void)
{
    pthread_once(&dirs_once, find_dirs);
    return lib_dir;
}

/* ---- helpers -------------------------------------------------------------- */

/* snprintf for paths and labels (truncation is checked by the caller or
 * harmless; vsnprintf keeps -Wformat-truncation quiet). */
__attribute__((format(printf, 3, 4))) static void strf(char *out, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, len, fmt, ap);
    va_end(ap);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return errno;
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return errno;
    return 0;
}

static void hash_str(XXH3_state_t *s, const char *str)
{
    XXH3_128bits_update(s, str ? str : "", strlen(str ? str : "") + 1);
}

static void hash_u64(XXH3_state_t *s, uint64_t v) { XXH3_128bits_update(s, &v, sizeof v); }

/* The CPU model and features: -march=native output depends on them. */
static void hash_cpu(XXH3_state_t *s)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[8192];
    int got = 0;
    while (got < 2 && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0 || strncmp(line, "flags", 5) == 0) {
            hash_str(s, line);
            got++;
        }
    }
    fclose(f);
}

static int filter_h(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n > 2 && strcmp(d->d_name + n - 2, ".h") == 0;
}

/* False when out of memory (a header that cannot be read otherwise is
 * hashed as absent). */
static bool hash_public_headers(XXH3_state_t *s, const char *inc)
{
    bool ok = true;
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/opcore", inc);
    struct dirent **list = NULL;
    int n = scandir(dir, &list, filter_h, alphasort);
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
        size_t len = 0;
        char *text = oc__read_file(path, &len);
        if (!text && errno == ENOMEM) ok = false;
        hash_str(s, list[i]->d_name);
        if (text) XXH3_128bits_update(s, text, len);
        oc__free(text);
        (free)(list[i]); /* scandir's memory is the C library's: (free) keeps it off oc__free */
    }
    (free)(list);
    return ok;
}

/* Escape for a C string literal. */
static void c_string(oc__sb *b, const char *s)
{
    oc__sb_put(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') oc__sb_printf(b, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f) oc__sb_printf(b, "\\%03o", c);
        else oc__sb_putn(b, s, 1);
    }
    oc__sb_put(b, "\"");
}

static bool write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(text, 1, len, f) == len;
    if (fclose(f) != 0) ok = false;
    return ok;
}

/* ---- one build ------------------------------------------------------------ */

typedef struct source {
    char *path;    /* absolute */
    const char *given; /* as the caller wrote it (messages, the report) */
    bool compute;  /* kernel code, else host (shape) code */
    bool has_library_block;
} source;

typedef struct build {
    const oc_build_options *o;
    char out_dir[PATH_MAX];
    char lib_path[PATH_MAX + 256];
    char stamp_path[PATH_MAX + 256];
    char tmp_dir[PATH_MAX + 256];
    source *srcs;
    int nsrcs;
    oc__argv cc;          /* the compiler command */
    oc__argv user_flags;  /* cflags, split into words */
    oc__argv incs;        /* -I directories, absolute where they exist */
    size_t stack_size;
    oc__argv tmp_files;   /* to remove */
    oc__argv deps;
    char key[33];
} build;

static void build_free(build *b)
{
    for (int i = 0; i < b->tmp_files.n; i++) unlink(b->tmp_files.v[i]);
    if (b->tmp_dir[0]) rmdir(b->tmp_dir);
    for (int i = 0; i < b->nsrcs; i++) oc__free(b->srcs[i].path);
    oc__free(b->srcs);
    oc__argv_free(&b->cc);
    oc__argv_free(&b->user_flags);
    oc__argv_free(&b->incs);
    oc__argv_free(&b->tmp_files);
    oc__argv_free(&b->deps);
}

static oc_status parse_stack_size(const char *lib, const char *text, size_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 0);
    if (errno || end == text || *end || v == 0 || text[0] == '-')
        return oc_set_error(OC_EINVAL,
                            "opcore build: library '%s': -DSTACK_SIZE=%s in cflags is not a "
                            "positive number of bytes",
                            lib, text);
    *out = (size_t)v;
    return OC_OK;
}

static oc_status check_c_sources(const build *b);

static oc_status prepare(build *b)
{
    const oc_build_options *o = b->o;
    const char *name = o->name;
    if (!oc__is_c_identifier(name) || strlen(name) >= 100)
        return oc_set_error(OC_EINVAL,
                            "opcore build: library name '%s' is not a C identifier (letters, "
                            "digits and '_', not starting with a digit; it names lib<name>.so)",
                            name ? name : "(null)");
    if (o->num_shape_srcs < 1 || !o->shape_srcs)
        return oc_set_error(OC_EINVAL,
                            "opcore build: library '%s': no shape source given (one must hold "
                            "the OC_LIBRARY block)",
                            name);
    if (o->num_compute_srcs < 0 || (o->num_compute_srcs > 0 && !o->compute_srcs) ||
        o->num_cflags < 0 || (o->num_cflags > 0 && !o->cflags) || o->num_include_dirs < 0 ||
        (o->num_include_dirs > 0 && !o->include_dirs))
        return oc_set_error(OC_EINVAL, "opcore build: library '%s': bad source, flag or include "
                                       "list (a count with no array)", name);

    /* Output directory: out_dir, else <cache>/build/<name>, the directory
     * the Python package's load() uses too (one cache for CLI and Python). */
    char cache_out[PATH_MAX];
    const char *out = o->out_dir;
    if (!out || !*out) {
        const char *root = oc_build_cache_dir();
        if (!root[0])
            return oc_set_error(OC_EINVAL, "opcore build: library '%s': no output directory "
                                           "given and no cache directory (set OPCORE_CACHE_DIR, "
                                           "XDG_CACHE_HOME or HOME)", name);
        if (snprintf(cache_out, sizeof cache_out, "%s/build/%s", root, name) >= (int)sizeof cache_out)
            return oc_set_error(OC_EINVAL, "opcore build: library '%s': cache directory path too "
                                           "long: %s", name, root);
        out = cache_out;
    }
    int err = mkdir_p(out);
    if (err || !realpath(out, b->out_dir))
        return oc_set_error(OC_EIO, "opcore build: library '%s': cannot create the output "
                                    "directory %s: %s", name, out, strerror(err ? err : errno));
    if (strlen(b->out_dir) + strlen(name) + 64 >= sizeof ((oc_build_result *)0)->path)
        return oc_set_error(OC_EINVAL, "opcore build: library '%s': output directory path too "
                                       "long: %s", name, b->out_dir);
    strf(b->lib_path, sizeof b->lib_path, "%s/lib%s.so", b->out_dir, name);
    strf(b->stamp_path, sizeof b->stamp_path, "%s/.lib%s.so.stamp", b->out_dir, name);

    /* Sources. */
    int n = o->num_shape_srcs + o->num_compute_srcs;
    b->srcs = oc__calloc((size_t)n, sizeof *b->srcs);
    if (!b->srcs) return oc_set_error(OC_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        bool compute = i >= o->num_shape_srcs;
        const char *p = compute ? o->compute_srcs[i - o->num_shape_srcs] : o->shape_srcs[i];
        const char *kind = compute ? "compute" : "shape";
        if (!p || !*p)
            return oc_set_error(OC_EINVAL, "opcore build: library '%s': a %s source path is empty",
                                name, kind);
        char *real = oc__realpath(p);
        if (!real || !is_file(real)) {
            int e = errno;
            oc__free(real);
            return oc_set_error(!real && e == ENOMEM ? OC_ENOMEM : OC_ENOTFOUND,
                                "opcore build: library '%s': %s source %s: %s", name, kind, p,
                                real ? "not a regular file" : strerror(e));
        }
        b->srcs[b->nsrcs].path = real;
        b->srcs[b->nsrcs].given = p;
        b->srcs[b->nsrcs].compute = compute;
        b->nsrcs++;
    }
    oc_status lang = check_c_sources(b);
    if (lang) return lang;

    /* Flags: each cflags entry may hold several words. */
    for (int i = 0; i < o->num_cflags; i++)
        if (o->cflags[i]) oc__argv_split(&b->user_flags, o->cflags[i]);
    b->stack_size = 0;
    for (int i = 0; i < b->user_flags.n; i++) {
        const char *f = b->user_flags.v[i];
        const char *v = NULL;
        if (strncmp(f, "-DSTACK_SIZE=", 13) == 0) v = f + 13;
        else if (strcmp(f, "-D") == 0 && i + 1 < b->user_flags.n &&
                 strncmp(b->user_flags.v[i + 1], "STACK_SIZE=", 11) == 0)
            v = b->user_flags.v[i + 1] + 11;
        if (v) {
            oc_status st = parse_stack_size(name, v, &b->stack_size);
            if (st) return st;
        }
    }
    if (o->stack_size) b->stack_size = o->stack_size;
    if (!b->stack_size) b->stack_size = OC_DEFAULT_STACK_SIZE;
    if (b->stack_size > OC_MAX_STACK_SIZE)
        return oc_set_error(OC_EINVAL,
                            "opcore build: library '%s': a kernel stack of %zu bytes is more than the "
                            "engine maps: at most %zu bytes (%zu MiB)",
                            name, b->stack_size, OC_MAX_STACK_SIZE, OC_MAX_STACK_SIZE >> 20);

    for (int i = 0; i < o->num_include_dirs; i++) {
        const char *d = o->include_dirs[i];
        if (!d || !*d) continue;
        char *real = oc__realpath(d);
        oc__argv_add(&b->incs, real ? real : d);
        oc__free(real);
    }

    const char *cc = getenv("CC");
    oc__argv_split(&b->cc, cc && *cc ? cc : "cc");
    if (b->cc.n == 0) oc__argv_add(&b->cc, "cc");
    if (b->user_flags.oom || b->incs.oom || b->cc.oom)
        return oc_set_error(OC_ENOMEM, "out of memory");
    if (!oc_build_include_dir()[0] || !oc_build_lib_dir()[0])
        return oc_set_error(OC_EBUILD,
                            "opcore build: cannot find opcore's headers or libopcore.so; set "
                            "OPCORE_INCLUDE_DIR and OPCORE_LIB_DIR");
    return OC_OK;
}

/* Before compiling (not on a cache hit: a source whose includes changed has
 * a new key and is compiled, so scanned, again): no include may name a FIFO,
 * a device or /dev/stdin, on which the compiler would wait forever. */
static oc_status check_includes(const build *b)
{
    const char **paths = oc__malloc((size_t)(b->nsrcs > 0 ? b->nsrcs : 1) * sizeof *paths);
    if (!paths) return oc_set_error(OC_ENOMEM, "out of memory");
    for (int i = 0; i < b->nsrcs; i++) paths[i] = b->srcs[i].path;
    oc_status st = oc__check_includes(b->o->name, paths, b->nsrcs, &b->incs);
    oc__free(paths);
    return st;
}

/* The kernel's -march: native by default; $OPCORE_MARCH overrides it
 * (empty: no -march at all), e.g. x86-64-v2 for a run under valgrind,
 * which cannot decode AVX-512. */
static const char *kernel_march(void)
{
    const char *m = getenv("OPCORE_MARCH");
    return m ? m : "native";
}

static oc_status compute_key(build *b)
{
    const oc_build_options *o = b->o;
    const char *ident = NULL;
    oc_status st = oc__compiler_identity(&b->cc, &ident);
    if (st) return st;
    XXH3_state_t *s = XXH3_createState();
    if (!s) return oc_set_error(OC_ENOMEM, "out of memory");
    XXH3_128bits_reset(s);
    hash_str(s, "opcore-build 3"); /* 3: the load-hint constructor calls oc_library_constructor */
    hash_u64(s, OC_ABI_VERSION);
    hash_str(s, o->name);
    for (int i = 0; i < b->nsrcs; i++) {
        size_t len = 0;
        char *text = oc__read_file(b->srcs[i].path, &len);
        if (!text) {
            int e = errno;
            XXH3_freeState(s);
            return oc_set_error(e == ENOMEM ? OC_ENOMEM : OC_EIO, "opcore build: library '%s': cannot read %s: %s",
                                o->name, b->srcs[i].path, strerror(e));
        }
        b->srcs[i].has_library_block = strstr(text, "OC_LIBRARY") != NULL;
        hash_str(s, b->srcs[i].compute ? "compute" : "shape");
        hash_str(s, b->srcs[i].path);
        hash_u64(s, len);
        XXH3_128bits_update(s, text, len);
        oc__free(text);
    }
    hash_str(s, "flags");
    for (int i = 0; i < b->user_flags.n; i++) hash_str(s, b->user_flags.v[i]);
    hash_str(s, "includes");
    for (int i = 0; i < b->incs.n; i++) hash_str(s, b->incs.v[i]);
    hash_u64(s, o->multicore);
    hash_u64(s, b->stack_size);
    hash_u64(s, o->debug);
    hash_str(s, kernel_march());
    hash_str(s, ident);
    hash_str(s, oc_build_include_dir());
    hash_str(s, oc_build_lib_dir());
    if (!hash_public_headers(s, oc_build_include_dir())) {
        XXH3_freeState(s);
        return oc_set_error(OC_ENOMEM, "opcore build: library '%s': out of memory hashing the opcore headers",
                            o->name);
    }
    hash_cpu(s);
    XXH128_hash_t h = XXH3_128bits_digest(s);
    XXH3_freeState(s);
    oc__hash_hex((oc__hash){h.low64, h.high64}, b->key);
    return OC_OK;
}

/* *hit: the stamp says the library is up to date. OC_ENOMEM when memory
 * ran out checking (anything else unreadable is a miss). */
static oc_status cache_check(build *b, bool *hit_out)
{
    oc__stamp st;
    *hit_out = false;
    errno = 0;
    if (!oc__stamp_read(b->stamp_path, &st))
        return errno == ENOMEM ? oc_set_error(OC_ENOMEM, "opcore build: library '%s': out of memory "
                                                         "reading the cache stamp", b->o->name) : OC_OK;
    bool hit = false;
    oc_status status = OC_OK;
    struct stat lib;
    if (strcmp(st.key, b->key) == 0 && stat(b->lib_path, &lib) == 0 &&
        (long long)lib.st_size == st.lib_size &&
        (long long)lib.st_mtim.tv_sec * 1000000000LL + lib.st_mtim.tv_nsec == st.lib_mtime_ns) {
        oc__hash h;
        char hex[33];
        errno = 0;
        if (oc__deps_hash(b->key, &st.deps, &h)) {
            oc__hash_hex(h, hex);
            hit = strcmp(hex, st.full) == 0;
        } else if (errno == ENOMEM) {
            status = oc_set_error(OC_ENOMEM, "opcore build: library '%s': out of memory hashing its "
                                             "dependencies", b->o->name);
        }
    }
    oc__stamp_free(&st);
    *hit_out = hit;
    return status;
}

/* A debug build, for either kind of source: after the optimisation flag,
 * as the last -O wins. */
static void debug_flags(const build *b, oc__argv *a)
{
    if (!b->o->debug) return;
    oc__argv_add(a, "-DOC_DEBUG");
    oc__argv_add(a, "-O0");
    oc__argv_add(a, "-g");
}

/* The kernel code flags, as built and as shown by `opcore info`.
 * -fno-math-errno: a math call may become a vector one (libmvec, through
 * opcore/vecmath.h) or an instruction (sqrtss), as errno no longer has to
 * be set; -fno-trapping-math: FP exceptions are never unmasked, so
 * conditional arithmetic may be if-converted. Neither changes a result;
 * -ffast-math's other parts would (NaN and Inf handling, reciprocals,
 * flushing denormals): docs/build.md. */
static void kernel_flags(const build *b, oc__argv *a)
{
    oc__argv_add(a, "-O3");
    if (*kernel_march()) oc__argv_addf(a, "-march=%s", kernel_march());
    oc__argv_add(a, "-fno-math-errno");
    oc__argv_add(a, "-fno-trapping-math");
    debug_flags(b, a);
}

/* The kernel flags and the user's as one line: what `opcore info` shows
 * (the build info) and what the vectorisation report names. */
static void shown_flags(const build *b, oc__sb *out)
{
    oc__argv shown = {0};
    kernel_flags(b, &shown);
    oc__argv_extend(&shown, &b->user_flags);
    oc__argv_format(&shown, out);
    if (shown.oom) out->oom = true; /* a word missing from the line */
    oc__argv_free(&shown);
}

/* Common compiler words for a source of the given kind. */
static void compile_flags(build *b, bool compute, oc__argv *a)
{
    oc__argv_extend(a, &b->cc);
    oc__argv_add(a, "-std=c11");
    oc__argv_add(a, "-D_GNU_SOURCE");
    oc__argv_add(a, "-fPIC");
    oc__argv_add(a, "-pipe");
    /* Probe every page of a large stack frame, so a frame larger than the
     * kernel stack's guard region faults in the guard (a stack overflow
     * error) instead of writing past it. */
    oc__argv_add(a, "-fstack-clash-protection");
    if (compute) {
        kernel_flags(b, a);
    } else {
        oc__argv_add(a, "-O2");
        debug_flags(b, a);
    }
    oc__argv_addf(a, "-I%s", oc_build_include_dir());
    for (int i = 0; i < b->incs.n; i++) oc__argv_addf(a, "-I%s", b->incs.v[i]);
    oc__argv_extend(a, &b->user_flags);
}

static void tmp_path(build *b, char *out, size_t len, const char *fmt, int i)
{
    char leaf[64];
    snprintf(leaf, sizeof leaf, fmt, i);
    strf(out, len, "%s/%s", b->tmp_dir, leaf);
    oc__argv_add(&b->tmp_files, out);
}

static void load_hint_constructor(oc__sb *src);

static oc_status write_build_info(build *b, char *path, size_t len)
{
    oc__sb flags = {0};
    shown_flags(b, &flags);
    oc__sb src = {0};
    oc__sb_printf(&src,
                  "/* Generated by opcore build for library '%s'. */\n"
                  "#include <opcore/library.h>\n"
                  "OC__EXPORT const oc_build_info oc_build_info_entry = {\n"
                  "    OC_ABI_VERSION, %d, %zu,\n    ",
                  b->o->name, b->o->multicore ? 1 : 0, b->stack_size);
    c_string(&src, oc__sb_str(&flags));
    oc__sb_printf(&src, ", %d};\n", b->o->debug ? 1 : 0);
    load_hint_constructor(&src);
    tmp_path(b, path, len, "build_info.c", 0);
    bool oom = src.oom || flags.oom;
    bool ok = !oom && write_file(path, src.s, src.len);
    oc__sb_free(&src);
    oc__sb_free(&flags);
    if (oom) return oc_set_error(OC_ENOMEM, "opcore build: library '%s': out of memory writing %s", b->o->name, path);
    if (!ok) return oc_set_error(OC_EIO, "opcore build: cannot write %s: %s", path, strerror(errno));
    return OC_OK;
}

/* Report failed jobs: hints for the mistakes recognised (hints.c), then
 * the compiler's output as written. */
static oc_status jobs_error(build *b, oc__job *jobs, int n, const char *stage)
{
    oc__sb msg = {0};
    oc__sb_printf(&msg, "opcore build: library '%s': %s failed\n", b->o->name, stage);
    for (int i = 0; i < n; i++)
        if (jobs[i].exit_code != 0) oc__build_hints(jobs[i].output, &msg);
    for (int i = 0; i < n; i++) {
        if (jobs[i].exit_code == 0) continue;
        oc__sb_printf(&msg, "--- %s:\n", jobs[i].what);
        if (b->o->verbose) {
            oc__argv_format(&jobs[i].argv, &msg);
            oc__sb_put(&msg, "\n");
        }
        oc__sb_putn(&msg, jobs[i].output ? jobs[i].output : "", jobs[i].output_len);
    }
    oc_status st = oc_set_error(OC_EBUILD, "%s", oc__sb_str(&msg));
    oc__sb_free(&msg);
    return st;
}

static void show_warnings(oc__job *jobs, int n)
{
    for (int i = 0; i < n; i++)
        if (jobs[i].exit_code == 0 && jobs[i].output_len)
            fwrite(jobs[i].output, 1, jobs[i].output_len, stderr);
}

static void free_jobs(oc__job *jobs, int n)
{
    for (int i = 0; i < n; i++) oc__job_free(&jobs[i]);
    oc__free(jobs);
}

static oc_status two_blocks_error(build *b, const oc__job *link);

/* Phase 1: compile everything and link tmp/lib<name>.so. */
static oc_status compile_and_link(build *b, char *tmp_lib, size_t tmp_len)
{
    char info_c[PATH_MAX + 512];
    oc_status st = write_build_info(b, info_c, sizeof info_c);
    if (st) return st;
    int njobs = b->nsrcs + 1;
    oc__job *jobs = oc__calloc((size_t)njobs, sizeof *jobs);
    char(*objs)[PATH_MAX + 512] = oc__calloc((size_t)njobs, sizeof *objs);
    char(*whats)[PATH_MAX + 32] = oc__calloc((size_t)njobs, sizeof *whats);
    if (!jobs || !objs || !whats) {
        oc__free(jobs);
        oc__free(objs);
        oc__free(whats);
        return oc_set_error(OC_ENOMEM, "out of memory");
    }
    for (int i = 0; i < njobs; i++) {
        bool info = i == b->nsrcs;
        const char *src = info ? info_c : b->srcs[i].path;
        char dep[PATH_MAX + 512];
        tmp_path(b, objs[i], sizeof objs[i], "%d.o", i);
        tmp_path(b, dep, sizeof dep, "%d.d", i);
        compile_flags(b, info ? false : b->srcs[i].compute, &jobs[i].argv);
        oc__argv_add(&jobs[i].argv, "-MD");
        oc__argv_add(&jobs[i].argv, "-MF");
        oc__argv_add(&jobs[i].argv, dep);
        oc__argv_add(&jobs[i].argv, "-c");
        oc__argv_add(&jobs[i].argv, src);
        oc__argv_add(&jobs[i].argv, "-o");
        oc__argv_add(&jobs[i].argv, objs[i]);
        strf(whats[i], sizeof whats[i], "%s %s",
                 info ? "generated" : b->srcs[i].compute ? "compute source" : "shape source", src);
        jobs[i].what = whats[i];
    }
    int failed = oc__jobs_run(jobs, njobs, oc__num_cpus(), b->o->verbose);
    if (failed) {
        st = oc__jobs_oom(jobs, njobs, b->o->name);
        if (!st) st = jobs_error(b, jobs, njobs, "compiling");
        goto out;
    }
    show_warnings(jobs, njobs);
    for (int i = 0; i < njobs && !st; i++) {
        char dep[PATH_MAX + 512];
        strf(dep, sizeof dep, "%s/%d.d", b->tmp_dir, i);
        int from = b->deps.n;
        oc__deps_parse(dep, b->tmp_dir, &b->deps);
        st = oc__check_deps(b->o->name, i < b->nsrcs ? b->srcs[i].given : "the generated build info",
                            &b->deps, from);
    }
    if (st) goto out;

    /* Link. */
    oc__job link = {0};
    strf(tmp_lib, tmp_len, "%s/lib%s.so", b->tmp_dir, b->o->name);
    oc__argv_add(&b->tmp_files, tmp_lib);
    oc__argv_extend(&link.argv, &b->cc);
    oc__argv_add(&link.argv, "-shared");
    oc__argv_add(&link.argv, "-o");
    oc__argv_add(&link.argv, tmp_lib);
    for (int i = 0; i < njobs; i++) oc__argv_add(&link.argv, objs[i]);
    oc__argv_extend(&link.argv, &b->user_flags);
    oc__argv_addf(&link.argv, "-L%s", oc_build_lib_dir());
    oc__argv_add(&link.argv, "-lopcore");
    oc__argv_addf(&link.argv, "-Wl,-rpath,%s", oc_build_lib_dir());
    oc__argv_add(&link.argv, "-lm");
    oc__argv_add(&link.argv, "-Wl,-z,defs");
    oc__argv_add(&link.argv, OC_ESCAPE_WRAPS); /* exit(), abort()...: errors (escape.c) */
    link.what = "linking";
    if (oc__jobs_run(&link, 1, 1, b->o->verbose)) {
        st = oc__jobs_oom(&link, 1, b->o->name);
        if (!st) st = two_blocks_error(b, &link);
        if (!st) st = jobs_error(b, &link, 1, "linking");
    } else {
        show_warnings(&link, 1);
    }
    if (!st) st = oc__elf_seal(tmp_lib); /* the loader checks the checksum (elfcheck.c) */
    oc__job_free(&link);
out:
    free_jobs(jobs, njobs);
    oc__free(objs);
    oc__free(whats);
    if (!st && (b->tmp_files.oom || b->deps.oom)) st = oc_set_error(OC_ENOMEM, "out of memory");
    return st;
}

typedef struct expected {
    char name[OC_MAX_NAME];
    char proto[2048]; /* with argument names, no ';' */
    char bare[2048];  /* without */
    char op[2 * OC_MAX_NAME + 2];
    bool kernel;
    bool is_static;
} expected;

static oc_status check_library(build *b, const char *tmp_lib)
{
    const char *name = b->o->name;
    oc__loader_enter();
    void *h = dlopen(tmp_lib, RTLD_NOW | RTLD_LOCAL);
    oc__loader_leave();
    if (!h)
        return oc_set_error(OC_EBUILD, "opcore build: library '%s': the linked library does not "
                                       "load: %s", name, dlerror());
    oc_library_defs defs;
    oc_status st = oc__library_read_defs(h, b->lib_path, &defs);
    if (st) {
        char msg[4096];
        snprintf(msg, sizeof msg, "%s", oc_errmsg());
        dlclose(h);
        /* a registration block's failure is the library's; memory is not */
        return oc_set_error(st == OC_ENOMEM ? OC_ENOMEM : OC_EBUILD, "opcore build: %s", msg);
    }
    Dl_info self;
    const void *entry = dlsym(h, "oc_library_entry");
    void *base = entry && dladdr(entry, &self) ? self.dli_fbase : NULL;

    int nexp = 0;
    expected *exp = oc__calloc((size_t)(2 * defs.num_defs + 1), sizeof *exp);
    oc__sb missing = {0};
    oc__sb kernels_h = {0}, shapes_h = {0}, static_lines = {0};
    oc__sig_header_begin(&kernels_h);
    oc__sig_header_begin(&shapes_h);
    if (!exp) {
        st = oc_set_error(OC_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < defs.num_defs && !st; i++) {
        const oc_op_def *d = &defs.defs[i];
        char qual[2 * OC_MAX_NAME + 2], proto[2048], bare[2048];
        snprintf(qual, sizeof qual, "%s::%s", defs.name, d->schema.name);
        if (!oc__is_c_identifier(d->kernel_name)) {
            st = oc_set_error(OC_EBUILD, "opcore build: library '%s': op '%s': kernel name '%s' is "
                                         "not a C identifier", name, qual, d->kernel_name);
            break;
        }
        oc__prototype(&d->schema, d->kernel_name, true, proto, sizeof proto);
        oc__prototype(&d->schema, d->kernel_name, false, bare, sizeof bare);
        /* One name, two schemas: the generated header would contradict itself. */
        bool dup = false;
        for (int j = 0; j < nexp && !dup; j++) {
            if (!exp[j].kernel || strcmp(exp[j].name, d->kernel_name) != 0) continue;
            dup = true;
            if (strcmp(exp[j].bare, bare) != 0)
                st = oc_set_error(OC_EBUILD,
                                  "opcore build: library '%s': ops '%s' and '%s' use the same "
                                  "kernel '%s' with different signatures (%s; and %s;)",
                                  name, exp[j].op, qual, d->kernel_name, exp[j].proto, proto);
        }
        if (st) break;
        if (!dup) {
            expected *e = &exp[nexp++];
            snprintf(e->name, sizeof e->name, "%s", d->kernel_name);
            snprintf(e->proto, sizeof e->proto, "%s", proto);
            snprintf(e->bare, sizeof e->bare, "%s", bare);
            snprintf(e->op, sizeof e->op, "%s", qual);
            e->kernel = true;
            oc__sig_header_add(&kernels_h, bare, false);
            void *sym = dlsym(h, d->kernel_name);
            Dl_info in;
            if (!sym || !dladdr(sym, &in) || in.dli_fbase != base)
                oc__sb_printf(&missing,
                              "op '%s': no compute source defines kernel '%s'; expected: %s;\n",
                              qual, d->kernel_name, proto);
        }
        /* The shape function: same signature, static or not. */
        char sname[OC_MAX_NAME];
        if (!oc__shape_fn_identifier(d->shape_fn_name, sname, sizeof sname)) continue;
        bool seen = false;
        for (int j = 0; j < nexp && !seen; j++) seen = !exp[j].kernel && strcmp(exp[j].name, sname) == 0;
        if (seen) continue;
        void *sym = dlsym(h, sname);
        bool is_static = !(sym && sym == (void *)(uintptr_t)d->shape_fn);
        expected *e = &exp[nexp++];
        snprintf(e->name, sizeof e->name, "%s", sname);
        oc__prototype(&d->schema, sname, true, e->proto, sizeof e->proto);
        snprintf(e->op, sizeof e->op, "%s", qual);
        e->is_static = is_static;
        oc__prototype(&d->schema, sname, false, bare, sizeof bare);
        oc__sig_header_add(is_static ? &static_lines : &shapes_h, bare, is_static);
    }
    if (st) goto done;
    if (kernels_h.oom || shapes_h.oom || static_lines.oom || missing.oom) {
        st = oc_set_error(OC_ENOMEM, "out of memory");
        goto done;
    }

    /* Phase 2: syntax-only compiles against the generated prototypes. */
    {
        char kpath[PATH_MAX + 512], spath[PATH_MAX + 512], sspath[PATH_MAX + 512];
        tmp_path(b, kpath, sizeof kpath, "kernels.h", 0);
        tmp_path(b, spath, sizeof spath, "shapes.h", 0);
        tmp_path(b, sspath, sizeof sspath, "shapes_library.h", 0);
        /* The static prototypes go to the shape source(s) holding the
         * OC_LIBRARY block (a static shape function must live there). */
        bool any_block = false;
        for (int i = 0; i < b->nsrcs; i++)
            any_block = any_block || (!b->srcs[i].compute && b->srcs[i].has_library_block);
        /* shapes_library.h = the extern prototypes + the static ones */
        oc__sb lib_h = {0};
        oc__sb_putn(&lib_h, shapes_h.s, shapes_h.len);
        if (static_lines.s) oc__sb_putn(&lib_h, static_lines.s, static_lines.len);
        if (lib_h.oom) {
            oc__sb_free(&lib_h);
            st = oc_set_error(OC_ENOMEM, "opcore build: library '%s': out of memory", name);
            goto done;
        }
        if (!write_file(kpath, kernels_h.s, kernels_h.len) ||
            !write_file(spath, shapes_h.s, shapes_h.len) ||
            !write_file(sspath, lib_h.s, lib_h.len)) {
            oc__sb_free(&lib_h);
            st = oc_set_error(OC_EIO, "opcore build: cannot write the generated headers in %s: %s",
                              b->tmp_dir, strerror(errno));
            goto done;
        }
        oc__sb_free(&lib_h);
        oc__job *jobs = oc__calloc((size_t)b->nsrcs, sizeof *jobs);
        char(*whats)[PATH_MAX + 32] = oc__calloc((size_t)b->nsrcs, sizeof *whats);
        if (!jobs || !whats) {
            oc__free(jobs);
            oc__free(whats);
            st = oc_set_error(OC_ENOMEM, "out of memory");
            goto done;
        }
        for (int i = 0; i < b->nsrcs; i++) {
            const source *s = &b->srcs[i];
            compile_flags(b, s->compute, &jobs[i].argv);
            oc__argv_add(&jobs[i].argv, "-fsyntax-only");
            oc__argv_add(&jobs[i].argv, "-w"); /* warnings were shown by phase 1 */
            oc__argv_add(&jobs[i].argv, "-include");
            oc__argv_add(&jobs[i].argv, s->compute ? kpath
                                        : (s->has_library_block || !any_block) ? sspath
                                                                                 : spath);
            oc__argv_add(&jobs[i].argv, s->path);
            strf(whats[i], sizeof whats[i], "%s %s",
                     s->compute ? "compute source" : "shape source", s->path);
            jobs[i].what = whats[i];
        }
        int failed = oc__jobs_run(jobs, b->nsrcs, oc__num_cpus(), b->o->verbose);
        if (failed) st = oc__jobs_oom(jobs, b->nsrcs, name);
        if (failed && !st) {
            oc__sb msg = {0};
            oc__sb_printf(&msg, "opcore build: library '%s': ", name);
            int found = 0;
            for (int i = 0; i < b->nsrcs; i++) {
                if (jobs[i].exit_code == 0) continue;
                char names[32][OC_MAX_NAME];
                bool stat_clash[32];
                int n = oc__sig_conflicts(jobs[i].output, names, 32, stat_clash);
                for (int k = 0; k < n; k++) {
                    for (int j = 0; j < nexp; j++) {
                        if (strcmp(exp[j].name, names[k]) != 0) continue;
                        if (exp[j].kernel != b->srcs[i].compute) continue;
                        if (found++) oc__sb_put(&msg, "\n");
                        if (exp[j].kernel && stat_clash[k])
                            oc__sb_printf(&msg, "op '%s': kernel '%s' must be a non-static function "
                                                "declared as: %s;", exp[j].op, exp[j].name,
                                          exp[j].proto);
                        else
                            oc__sb_printf(&msg, "op '%s': %s '%s' must be declared as: %s%s;",
                                          exp[j].op, exp[j].kernel ? "kernel" : "shape function",
                                          exp[j].name, exp[j].is_static ? "static " : "",
                                          exp[j].proto);
                        oc__sb_printf(&msg, " (in %s)", b->srcs[i].path);
                        break;
                    }
                }
            }
            if (!found) oc__sb_put(&msg, "checking the sources against the op schemas failed");
            oc__sb_put(&msg, "\n");
            for (int i = 0; i < b->nsrcs; i++) {
                if (jobs[i].exit_code == 0) continue;
                oc__sb_printf(&msg, "--- %s:\n", jobs[i].what);
                if (b->o->verbose) {
                    oc__argv_format(&jobs[i].argv, &msg);
                    oc__sb_put(&msg, "\n");
                }
                oc__sb_putn(&msg, jobs[i].output, jobs[i].output_len);
            }
            st = oc_set_error(OC_EBUILD, "%s", oc__sb_str(&msg));
            oc__sb_free(&msg);
        }
        free_jobs(jobs, b->nsrcs);
        oc__free(whats);
        if (st) goto done;
    }
    if (missing.len) {
        missing.s[--missing.len] = '\0'; /* drop the last newline */
        st = oc_set_error(OC_EBUILD, "opcore build: library '%s': %s", name, missing.s);
    }
done:
    oc__free(exp);
    oc__sb_free(&missing);
    oc__sb_free(&kernels_h);
    oc__sb_free(&shapes_h);
    oc__sb_free(&static_lines);
    oc__library_defs_free(&defs);
    dlclose(h);
    return st;
}

static oc_status install(build *b, const char *tmp_lib)
{
    if (rename(tmp_lib, b->lib_path) != 0)
        return oc_set_error(OC_EIO, "opcore build: library '%s': cannot move the library to %s: %s",
                            b->o->name, b->lib_path, strerror(errno));
    struct stat lib;
    if (stat(b->lib_path, &lib) != 0)
        return oc_set_error(OC_EIO, "opcore build: %s vanished: %s", b->lib_path, strerror(errno));
    oc__stamp stamp = {0};
    memcpy(stamp.key, b->key, sizeof stamp.key);
    oc__hash h;
    errno = 0;
    if (!oc__deps_hash(b->key, &b->deps, &h)) {
        int e = errno;
        unlink(b->stamp_path); /* a header vanished mid-build: no cache */
        return e == ENOMEM ? oc_set_error(OC_ENOMEM, "opcore build: library '%s': out of memory hashing "
                                                     "its dependencies for the cache stamp", b->o->name)
                           : OC_OK;
    }
    oc__hash_hex(h, stamp.full);
    stamp.lib_size = (long long)lib.st_size;
    stamp.lib_mtime_ns = (long long)lib.st_mtim.tv_sec * 1000000000LL + lib.st_mtim.tv_nsec;
    stamp.deps = b->deps;
    return oc__stamp_write(b->stamp_path, &stamp);
}

/* ---- errors that teach (the text checks are in hints.c) ------------------ */

/* opcore kernels are C: a C++ source would only meet "torch/torch.h: No
 * such file" or worse in the C compiler. */
static oc_status check_c_sources(const build *b)
{
    const oc_build_options *o = b->o;
    for (int i = 0; i < b->nsrcs; i++) {
        const char *given = b->srcs[i].given;
        if (!oc__is_cxx_source(given)) continue;
        return oc_set_error(OC_EINVAL,
                            "opcore build: library '%s': %s is a C++ source; opcore kernels and shape "
                            "functions are C (C11, no torch headers: <opcore/kernel.h> and "
                            "<opcore/library.h> replace torch/extension.h). See "
                            "docs/tutorial_1_first_operator.md for the seeds' operator in C, then save "
                            "the file as .c",
                            o->name, given);
    }
    return OC_OK;
}

/* 'librelu' (or 'librelu.so') builds librelu.so, not liblibrelu.so. */
static const oc_build_options *with_file_stem(const oc_build_options *opts, oc_build_options *named,
                                              char *stem, size_t len)
{
    const char *s = oc__library_file_stem(opts->name, stem, len);
    if (s == opts->name || !oc__is_c_identifier(s)) return opts;
    *named = *opts;
    named->name = s;
    return named;
}

/* Two OC_LIBRARY blocks in two sources: one clear error instead of the
 * linker's "multiple definition of `oc_library_entry'". Sets the error and
 * returns its status, or OC_OK if that was not the failure. */
static oc_status two_blocks_error(build *b, const oc__job *link)
{
    int first, second;
    if (!oc__two_library_blocks(link->output, &first, &second)) return OC_OK;
    const char *a = first >= 0 && first < b->nsrcs ? b->srcs[first].path : "a source";
    const char *c = second >= 0 && second < b->nsrcs ? b->srcs[second].path : "another source";
    return oc_set_error(OC_EBUILD,
                        "opcore build: library '%s': two OC_LIBRARY blocks, in %s and in %s; a library "
                        "has exactly one: put every oc_def() in one block (the shape functions it "
                        "names may live in any source; build two libraries for two namespaces)",
                        b->o->name, a, c);
}

/* The generated build info's constructor: an op library loaded by a plain
 * dlopen (torch.ops.load_library) says to use opcore's loader instead. */
static void load_hint_constructor(oc__sb *src)
{
    oc__sb_put(src, "__attribute__((constructor)) static void oc__loaded(void)\n"
                    "{\n    oc_library_constructor(&oc_build_info_entry);\n}\n");
}

/* --vec-report: compile each compute source again with the compiler's
 * vectoriser remarks and summarise them (vec_report.c). */
static oc_status vec_report(build *b, oc_build_result *result)
{
    const char *ident = NULL;
    oc_status st = oc__compiler_identity(&b->cc, &ident);
    if (st) return st;
    bool clang = ident && strstr(ident, "clang");
    oc__job *jobs = oc__calloc((size_t)b->nsrcs + 1, sizeof *jobs);
    if (!jobs) return oc_set_error(OC_ENOMEM, "out of memory");
    int n = 0;
    for (int i = 0; i < b->nsrcs; i++) {
        if (!b->srcs[i].compute) continue;
        oc__argv *a = &jobs[n].argv;
        compile_flags(b, true, a);
        if (clang) {
            oc__argv_add(a, "-Rpass=loop-vectorize");
            oc__argv_add(a, "-Rpass-missed=loop-vectorize");
            oc__argv_add(a, "-Rpass-analysis=loop-vectorize");
        } else {
            /* internals too: only they say a reduction was kept in order */
            oc__argv_add(a, "-fopt-info-vec-all-internals");
        }
        oc__argv_add(a, "-c");
        oc__argv_add(a, b->srcs[i].path);
        oc__argv_add(a, "-o");
        oc__argv_add(a, "/dev/null");
        jobs[n].what = b->srcs[i].path;
        n++;
    }
    oc__jobs_run(jobs, n, oc__num_cpus(), b->o->verbose);
    if ((st = oc__jobs_oom(jobs, n, b->o->name))) {
        free_jobs(jobs, n);
        return st;
    }
    oc__sb rep = {0}, flags = {0};
    shown_flags(b, &flags);
    oc__sb_printf(&rep, "vectorization report: compute sources compiled with %s (%s's remarks)\n",
                  oc__sb_str(&flags), clang ? "clang" : "gcc");
    if (n == 0) oc__sb_put(&rep, "(no compute sources)\n");
    for (int i = 0, j = 0; i < b->nsrcs; i++) { /* jobs[j]: the j-th compute source */
        const source *src = &b->srcs[i];
        if (!src->compute) continue;
        if (jobs[j].exit_code != 0)
            oc__sb_printf(&rep, "%s: the report's compile failed:\n%.*s", src->given, (int)jobs[j].output_len,
                          jobs[j].output ? jobs[j].output : "");
        else
            oc__vec_report_sources(jobs[j].output, src->path, src->given, b->o->include_dirs,
                                   b->o->num_include_dirs, &rep);
        j++;
    }
    free_jobs(jobs, n);
    oc__sb_free(&flags);
    if (rep.oom) {
        oc__sb_free(&rep);
        return oc_set_error(OC_ENOMEM, "out of memory");
    }
    result->vec_report = rep.s; /* the caller frees it */
    return OC_OK;
}

oc_status oc_build(const oc_build_options *opts, oc_build_result *result)
{
    double t_start = now_s();
    uint64_t p0 = oc__prof_on() ? oc__prof_now() : 0;
    if (result) memset(result, 0, sizeof *result);
    if (!opts || !result)
        return oc_set_error(OC_EINVAL, "oc_build: options and result are required");
    oc_build_options named;
    char stem[128];
    opts = with_file_stem(opts, &named, stem, sizeof stem);
    build b;
    memset(&b, 0, sizeof b);
    b.o = opts;
    int lock_fd = -1;
    oc_status st = prepare(&b);
    if (!st) st = compute_key(&b);
    if (!st) {
        lock_fd = oc__build_lock(b.out_dir, opts->name); /* one build of a library at a time */
        if (lock_fd < 0) st = oc_errcode();
    }
    bool hit = false;
    if (!st && !opts->force) st = cache_check(&b, &hit);
    if (!st && hit) {
        strf(result->path, sizeof result->path, "%s", b.lib_path);
        result->cached = true;
        goto out;
    }
    if (!st) st = check_includes(&b);
    if (!st) {
        strf(b.tmp_dir, sizeof b.tmp_dir, "%s/.opcore-build-%s-XXXXXX", b.out_dir, opts->name);
        if (!mkdtemp(b.tmp_dir)) {
            int e = errno;
            b.tmp_dir[0] = '\0';
            st = oc_set_error(OC_EIO, "opcore build: library '%s': cannot create a temporary "
                                      "directory in %s: %s", opts->name, b.out_dir, strerror(e));
        }
    }
    char tmp_lib[PATH_MAX + 512];
    if (!st) st = compile_and_link(&b, tmp_lib, sizeof tmp_lib);
    if (!st) st = check_library(&b, tmp_lib);
    /* a temporary file left untracked, or a dependency unrecorded (the
     * cache would miss its changes): out of memory along the way */
    if (!st && (b.tmp_files.oom || b.deps.oom))
        st = oc_set_error(OC_ENOMEM, "opcore build: library '%s': out of memory", opts->name);
    if (!st) st = install(&b, tmp_lib);
    if (!st) strf(result->path, sizeof result->path, "%s", b.lib_path);
out:
    if (!st && opts->vec_report) st = vec_report(&b, result);
    if (lock_fd >= 0) close(lock_fd);
    build_free(&b);
    result->seconds = now_s() - t_start;
    if (p0 && oc__prof_on()) oc__prof_host(OC_PROF_BUILD, opts->name, p0, oc__prof_now());
    return st;
}
