/* src/build/build_internal.h — the build tool's internals (not public).
 *
 * build.c    oc_build: validation, the two checks, link, atomic install
 * jobs.c     running compiler commands in parallel, capturing their output
 * cache.c    content hashing, the compiler's identity, stamp files
 * lock.c     the build lock: waiting with a timeout, naming the holder
 * sources.c  only regular files: includes of FIFOs and devices refused
 * sigcheck.c generated prototype headers and reading "conflicting types"
 * strbuf.c   growable strings and argument vectors
 */
#ifndef OPCORE_BUILD_INTERNAL_H
#define OPCORE_BUILD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "opcore/build.h"

/* ---- strings and argv ---------------------------------------------------- */

#include "core/strbuf.h"

typedef struct oc__argv {
    char **v; /* NULL-terminated */
    int n, cap;
    bool oom;
} oc__argv;

void oc__argv_add(oc__argv *a, const char *s);
void oc__argv_addf(oc__argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void oc__argv_extend(oc__argv *a, const oc__argv *b);
void oc__argv_free(oc__argv *a);
/* Append the words of `s`, split on blanks; '...' and "..." quote, \ escapes. */
void oc__argv_split(oc__argv *a, const char *s);
/* The command as a shell would read it (quoted where needed). */
void oc__argv_format(const oc__argv *a, oc__sb *out);

/* Read a whole file; NULL (errno set) on failure. */
char *oc__read_file(const char *path, size_t *len);

/* ---- jobs ------------------------------------------------------------------ */

typedef struct oc__job {
    oc__argv argv;      /* the command */
    const char *what;   /* "compute source relu.c" (for messages) */
    int exit_code;      /* 0 ok; -1 could not start; 128+sig if killed */
    char *output;       /* stdout + stderr as written */
    size_t output_len;
    bool oom;           /* memory ran out for its command (not run) or its output */
} oc__job;

/* Run every job, at most `parallel` at a time (stdout and stderr captured
 * through a pipe). Returns the number that failed. */
int oc__jobs_run(oc__job *jobs, int njobs, int parallel, bool verbose);
/* OC_ENOMEM (with a message naming library `name`) if a job failed for
 * want of memory, else OC_OK: check it before reading a failure as the
 * compiler's. */
oc_status oc__jobs_oom(const oc__job *jobs, int njobs, const char *name);
void oc__job_free(oc__job *job);
/* Usable CPUs (affinity mask). */
int oc__num_cpus(void);

/* ---- cache ---------------------------------------------------------------- */

typedef struct oc__hash {
    uint64_t lo, hi;
} oc__hash;

/* The compiler's identity (resolved path, stat, `--version` output), once
 * per process per compiler command. Fails if the compiler cannot run. */
oc_status oc__compiler_identity(const oc__argv *cc, const char **out);

void oc__hash_hex(oc__hash h, char out[33]);

typedef struct oc__stamp {
    char key[33];
    char full[33];
    long long lib_size;
    long long lib_mtime_ns;
    oc__argv deps;
} oc__stamp;

/* False if there is no valid stamp at `path` (errno ENOMEM: memory ran out). */
bool oc__stamp_read(const char *path, oc__stamp *out);
oc_status oc__stamp_write(const char *path, const oc__stamp *st);
void oc__stamp_free(oc__stamp *st);
/* Hash of `key` + the contents of each dependency; false if one is gone
 * (errno ENOMEM: memory ran out). */
bool oc__deps_hash(const char *key_hex, const oc__argv *deps, oc__hash *out);
/* Add the prerequisites in a make-style .d file to `deps` (skipping those
 * under `skip_prefix` and duplicates). */
void oc__deps_parse(const char *dfile, const char *skip_prefix, oc__argv *deps);

/* ---- only regular files (sources.c) ----------------------------------------- */

/* NULL if `path` is a regular file outside /dev and /proc (or missing),
 * else what it is ("a FIFO", "a device"...). */
const char *oc__not_regular(const char *path);
/* Refuse a source whose literal #include lines (followed through the
 * headers they reach, resolved against its folder and `incs`) name a file
 * that is not regular. */
oc_status oc__check_includes(const char *lib, const char *const *srcs, int nsrcs, const oc__argv *incs);
/* Refuse deps->v[from..] (what compiling `src` read) if one is not regular. */
oc_status oc__check_deps(const char *lib, const char *src, const oc__argv *deps, int from);

/* ---- the build lock (lock.c) ------------------------------------------------- */

/* Take out_dir/.lib<name>.so.lock (one build of a library at a time, in
 * threads or processes); returns its descriptor, or -1 with the error set.
 * Waits for the holder, saying so on stderr with its pid after a second;
 * takes the lock over when its holder is dead; gives up after
 * $OPCORE_BUILD_LOCK_TIMEOUT seconds (default 60) naming the holder. */
int oc__build_lock(const char *out_dir, const char *name);

/* ---- errors that teach (hints.c) ------------------------------------------ */

/* True for a C++ (or CUDA, HIP, Objective-C++) source by its extension. */
bool oc__is_cxx_source(const char *path);
/* The name the library file gets: 'librelu' and 'librelu.so' give 'relu'
 * (so the file is librelu.so, not liblibrelu.so); other names unchanged. */
const char *oc__library_file_stem(const char *name, char *buf, size_t len);
/* Append "hint: ..." lines for the first mistakes recognised in a
 * compiler's output (C++ headers, an oc_acc from a const tensor, two
 * OC_LIBRARY blocks in one file). */
void oc__build_hints(const char *output, oc__sb *out);
/* True if a link failed on two definitions of oc_library_entry (two
 * OC_LIBRARY blocks); the object numbers (".../N.o") of both. */
bool oc__two_library_blocks(const char *output, int *first, int *second);

/* ---- vectorisation report (vec_report.c) ----------------------------------- */

/* Summarise the compiler's vectoriser remarks about `src` (the path it was
 * compiled as) into out, one line per loop, labelled with `shown`. */
void oc__vec_report_format(const char *opt_info, const char *src, const char *shown, oc__sb *out);

/* The same for `src`, then for each of the author's own headers it
 * includes that has loops: files in src's folder (or below) or in one of
 * `dirs` (the build's include directories), listed under their names
 * (beside `shown` for a header in src's folder). */
void oc__vec_report_sources(const char *opt_info, const char *src, const char *shown, const char *const *dirs,
                            int ndirs, oc__sb *out);

/* ---- signature check ------------------------------------------------------ */

#endif /* OPCORE_BUILD_INTERNAL_H */
