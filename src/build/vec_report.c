/* `opcore build --vec-report`: which loops of a compute source the compiler
 * vectorised, and why not the others.
 *
 * The build compiles each compute source once more with its kernel flags
 * and gcc's -fopt-info-vec-optimized-missed (clang: -Rpass=loop-vectorize
 * -Rpass-missed=loop-vectorize -Rpass-analysis=loop-vectorize), and this
 * file turns that output -- dozens of lines per loop, most of them about
 * opcore's inline helpers or internal attempts -- into one line per loop of
 * the user's own source, with the compiler's reason and, for the common
 * reasons, what usually fixes it. Loops in the author's own headers (files
 * in the source's folder or an include directory the build was given, as
 * opposed to opcore's and the system's) are listed the same way, under the
 * header's name: a helper's loop is compiled where it is inlined.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "build/build_internal.h"

typedef struct loop {
    int line;
    bool vectorized, versioned, outer;
    bool in_order;        /* a float reduction kept in order: its adds stay scalar */
    int bytes;            /* widest vector used */
    char reasons[512];    /* "; "-separated, deduplicated */
} loop;

typedef struct loops {
    loop *v;
    int n, cap;
} loops;

static loop *loop_at(loops *ls, int line)
{
    for (int i = 0; i < ls->n; i++)
        if (ls->v[i].line == line) return &ls->v[i];
    if (ls->n == ls->cap) {
        int cap = ls->cap ? 2 * ls->cap : 16;
        loop *v = oc__realloc(ls->v, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        ls->v = v;
        ls->cap = cap;
    }
    loop *l = &ls->v[ls->n++];
    memset(l, 0, sizeof *l);
    l->line = line;
    return l;
}

static void add_reason(loop *l, const char *r, size_t len)
{
    while (len && (r[len - 1] == '.' || r[len - 1] == ' ' || r[len - 1] == '\r')) len--;
    char buf[256];
    snprintf(buf, sizeof buf, "%.*s", (int)len, r);
    if (strstr(l->reasons, buf)) return;
    if (strstr(buf, "loop nest containing two or more consecutive inner loops") ||
        strstr(buf, "outer-loop") || strstr(buf, "multiple nested loops")) {
        l->outer = true;
        return;
    }
    size_t used = strlen(l->reasons);
    snprintf(l->reasons + used, sizeof l->reasons - used, "%s%s", used ? "; " : "", buf);
}

/* What the usual reasons mean, for someone who has not read gcc's source. */
static const struct {
    const char *key, *meaning;
} meanings[] = {
    {"control flow in loop", "the body branches (if/break/continue): compute both sides and select "
                             "(x > 0 ? x : 0), or hoist the test out of the loop"},
    {"number of iterations cannot be computed", "the trip count is not known on entry (a while "
                                                "loop, or a bound changed inside it)"},
    {"complicated access pattern", "an index the compiler cannot follow: keep a plain unit-stride "
                                   "loop (oc_iter_contiguous) for the fast path"},
    {"no vectype for stmt", "no vector form for a statement: often a loop-carried dependence "
                            "(o[i] uses o[i-1]), a strided or mixed-width access, or _Float16 "
                            "(opcore/vec.h converts runs)"},
    {"function call", "a call the compiler cannot vectorise: make your function static inline; for "
                      "math (expf, sqrtf...) see docs/tutorial_2_performance.md"},
    {"not supported", "an operation with no vector form on this CPU"},
    {"possible alias", "the compiler cannot tell the arrays apart: declare the pointers restrict"},
    {"dependence", "one iteration may use another's result (a loop-carried dependence, or arrays "
                   "that may overlap: restrict)"},
    {"not profitable", "the cost model found it not worth it (a short, strided or mixed-type loop)"},
    {"unsupported data-type", "an element type with no vector form (long double, complex...)"},
};

static const char *meaning_of(const char *reasons)
{
    for (size_t i = 0; i < sizeof meanings / sizeof *meanings; i++)
        if (strstr(reasons, meanings[i].key)) return meanings[i].meaning;
    return NULL;
}

static int by_line(const void *a, const void *b)
{
    return ((const loop *)a)->line - ((const loop *)b)->line;
}

/* Parse one diagnostic line "FILE:LINE:COL: KIND: TEXT" for FILE == src. */
static bool parse_line(const char *p, size_t len, const char *src, int *line, const char **text,
                       size_t *tlen)
{
    size_t sl = strlen(src);
    if (len <= sl + 1 || strncmp(p, src, sl) != 0 || p[sl] != ':') return false;
    char *end;
    long ln = strtol(p + sl + 1, &end, 10);
    if (end == p + sl + 1 || *end != ':') return false;
    const char *t = end + 1;
    while (t < p + len && *t != ' ') t++; /* the column */
    while (t < p + len && *t == ' ') t++;
    *line = (int)ln;
    *text = t;
    *tlen = (size_t)(p + len - t);
    return true;
}

void oc__vec_report_format(const char *opt_info, const char *src, const char *shown, oc__sb *out)
{
    loops ls = {0};
    int open = -1; /* the loop whose reasons the next "not vectorized:" lines give */
    struct {
        int line;
        char fn[64];
    } calls[64];
    int ncalls = 0;
    for (const char *p = opt_info ? opt_info : ""; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        int line;
        const char *t;
        size_t tl;
        if (parse_line(p, len, src, &line, &t, &tl)) {
            const char *body = t;
            /* gcc: "optimized: ..." / "missed: ..."; clang: "remark: ..." */
            if (!strncmp(body, "optimized: ", 11) || !strncmp(body, "missed: ", 8) ||
                !strncmp(body, "remark: ", 8))
                body = strchr(body, ' ') + 1;
            size_t bl = tl - (size_t)(body - t);
            const char *tag = memchr(body, '[', bl); /* clang: " [-Rpass...]" */
            if (tag) bl = (size_t)(tag - body);
            char text[512];
            snprintf(text, sizeof text, "%.*s", (int)bl, body);
            if (!strncmp(text, "note:", 5) || (text[0] == ' ' && !strstr(text, "loop versioned"))) {
                /* gcc's internals (indented, or notes; asked for the one below)
                 * leave `open` alone */
                if (strstr(text, "in-order (fold-left) reduction")) {
                    loop *l = loop_at(&ls, line);
                    if (l) l->in_order = true;
                }
            } else if (!strncmp(text, "loop vectorized", 15) || !strncmp(text, "vectorized loop", 15)) {
                loop *l = loop_at(&ls, line);
                const char *u = strstr(text, "using ");
                int bytes = u ? atoi(u + 6) : 0;
                if (l) l->vectorized = true;
                if (l && bytes > l->bytes) l->bytes = bytes;
                open = -1;
            } else if (strstr(text, "loop versioned for vectorization")) {
                loop *l = loop_at(&ls, line);
                if (l) l->versioned = true;
            } else if (!strncmp(text, "couldn't vectorize loop", 23) ||
                       !strncmp(text, "loop not vectorized", 19)) { /* gcc, clang */
                loop *l = loop_at(&ls, line);
                open = l ? (int)(l - ls.v) : -1;
                if (open >= 0 && text[19] == ':') add_reason(&ls.v[open], text + 21, strlen(text + 21));
            } else if (open >= 0 && !strncmp(text, "not vectorized: ", 16)) {
                add_reason(&ls.v[open], text + 16, strlen(text + 16));
            } else if (strncmp(text, "not vectorized: ", 16) != 0 && strncmp(text, "statement clobbers", 18) != 0) {
                open = -1;
            } else if (!strncmp(text, "statement clobbers memory: ", 27) && ncalls < 64) {
                open = -1;
                /* gcc names a call this way, apart from the loop it blocks */
                const char *call = strstr(text, " = ") ? strstr(text, " = ") + 3 : text + 27;
                calls[ncalls].line = line;
                calls[ncalls].fn[0] = '\0';
                sscanf(call, "%63[A-Za-z0-9_]", calls[ncalls].fn);
                if (calls[ncalls].fn[0]) ncalls++;
            }
        } else if (memmem(p, len, ": missed: ", 10) || memmem(p, len, ": optimized: ", 13) ||
                 memmem(p, len, ": remark: ", 10))
            open = -1; /* another file's diagnostic ends the reasons of `open` */
        p += len + (nl ? 1 : 0);
    }
    qsort(ls.v, (size_t)ls.n, sizeof *ls.v, by_line);
    /* A loop gcc gave no reason for: the calls from its line up to the next
     * loop's are the reason. */
    for (int i = 0; i < ls.n; i++) {
        loop *l = &ls.v[i];
        if (l->vectorized || l->reasons[0]) continue;
        int end = i + 1 < ls.n ? ls.v[i + 1].line : 1 << 30;
        for (int c = 0; c < ncalls; c++) {
            if (calls[c].line < l->line || calls[c].line >= end) continue;
            char r[128];
            snprintf(r, sizeof r, "calls %s() (a function call in the loop)", calls[c].fn);
            add_reason(l, r, strlen(r));
        }
    }
    int nvec = 0, nmiss = 0;
    for (int i = 0; i < ls.n; i++) {
        if (ls.v[i].outer && !ls.v[i].vectorized) continue;
        if (ls.v[i].vectorized && !ls.v[i].in_order) nvec++;
        else nmiss++;
    }
    oc__sb_printf(out, "%s: %d loop%s vectorized, %d not\n", shown, nvec, nvec == 1 ? "" : "s", nmiss);
    for (int i = 0; i < ls.n; i++) {
        const loop *l = &ls.v[i];
        if (l->outer && !l->vectorized) continue; /* an outer loop: its inner loops are listed */
        if (l->vectorized && l->in_order) {
            /* gcc says "vectorized", but without reassociation the sum is
             * added one lane at a time: as slow as the scalar loop */
            oc__sb_printf(out, "  %s:%d: NOT vectorized: a float reduction kept in order (gcc's fold-left: "
                          "its adds run one element at a time)\n", shown, l->line);
            oc__sb_put(out, "      use oc_sum_f32 (opcore/vecmath.h) or oc_tile_reduce_rows (opcore/tile.h), "
                            "fixed-order lane sums; or `#pragma omp simd reduction(+:s)` with --cflags "
                            "-fopenmp-simd (reorders the sum: the last bits change)\n");
            continue;
        }
        if (l->vectorized) {
            oc__sb_printf(out, "  %s:%d: vectorized", shown, l->line);
            if (l->bytes) oc__sb_printf(out, " (%d-byte vectors%s)", l->bytes,
                                        l->versioned ? ", with a run-time overlap check" : "");
            oc__sb_put(out, "\n");
            continue;
        }
        oc__sb_printf(out, "  %s:%d: NOT vectorized: %s\n", shown, l->line,
                      l->reasons[0] ? l->reasons : "no reason given");
        const char *m = meaning_of(l->reasons);
        if (m) oc__sb_printf(out, "      %s\n", m);
    }
    oc__free(ls.v);
}

/* Does `path` lie in folder `dir` (or below)? */
static bool inside(const char *path, const char *dir, size_t dl)
{
    while (dl > 1 && dir[dl - 1] == '/') dl--;
    return dl && strncmp(path, dir, dl) == 0 && path[dl] == '/';
}

/* The file named by diagnostic line [p, p + len) ("FILE:LINE:COL: ...")
 * into file[], if it reports a loop. */
static bool loop_file(const char *p, size_t len, char *file, size_t cap)
{
    static const char *const says[] = {"loop vectorized", "vectorized loop", "couldn't vectorize loop",
                                       "loop not vectorized"};
    bool loop = false;
    for (size_t i = 0; i < sizeof says / sizeof *says && !loop; i++) loop = memmem(p, len, says[i], strlen(says[i]));
    const char *colon = memchr(p, ':', len);
    if (!loop || !colon || (size_t)(colon - p) >= cap) return false;
    snprintf(file, cap, "%.*s", (int)(colon - p), p);
    return true;
}

void oc__vec_report_sources(const char *opt_info, const char *src, const char *shown, const char *const *dirs,
                            int ndirs, oc__sb *out)
{
    oc__vec_report_format(opt_info, src, shown, out);
    const char *slash = strrchr(src, '/'), *shown_slash = strrchr(shown, '/');
    size_t src_dir = slash ? (size_t)(slash - src) : 0;
    char done[16][1024];
    int ndone = 0;
    for (const char *p = opt_info ? opt_info : ""; *p && ndone < 16;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char file[1024];
        if (loop_file(p, len, file, sizeof file) && strcmp(file, src) != 0) {
            bool own = src_dir && inside(file, src, src_dir);
            for (int d = 0; d < ndirs && !own; d++) own = inside(file, dirs[d], strlen(dirs[d]));
            for (int d = 0; d < ndone && own; d++) own = strcmp(done[d], file) != 0;
            if (own) {
                snprintf(done[ndone++], sizeof done[0], "%s", file);
                /* shown as the source is: a header beside it, beside its shown name */
                char name[1100];
                if (src_dir && inside(file, src, src_dir))
                    snprintf(name, sizeof name, "%.*s%s", shown_slash ? (int)(shown_slash - shown + 1) : 0, shown,
                             file + src_dir + 1);
                else
                    snprintf(name, sizeof name, "%s", file);
                oc__vec_report_format(opt_info, file, name, out);
            }
        }
        p += len + (nl ? 1 : 0);
    }
}
