/* opcore/build.h — building an op library (what `opcore build` does).
 *
 * Shape sources compile as host code; compute sources compile as kernel code
 * optimised for this machine (-O3 -march=native); both link into one
 * lib<name>.so together with the build info (ABI version, multicore, stack
 * size). Each kernel and shape function is checked against its schema at
 * build time: a mismatch, or a kernel no compute source defines, fails the
 * build with the expected prototype in the message.
 *
 * Builds are cached by content: if the sources, headers named on the
 * command line, flags and compiler are unchanged, the existing library is
 * reused without compiling.
 */
#ifndef OPCORE_BUILD_H
#define OPCORE_BUILD_H

#include <stdbool.h>
#include <stddef.h>

#include "status.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oc_build_options {
    const char *name;                 /* library name: produces lib<name>.so */
    const char *const *compute_srcs;  /* kernel sources */
    int num_compute_srcs;
    const char *const *shape_srcs;    /* shape functions + OC_LIBRARY */
    int num_shape_srcs;
    const char *out_dir;              /* where lib<name>.so goes (NULL: the
                                         cache, oc_build_cache_dir()/build/<name>) */
    bool multicore;                   /* run kernels on every core */
    size_t stack_size;                /* kernel stack bytes (0: default or
                                         -DSTACK_SIZE=N found in cflags) */
    const char *const *cflags;        /* extra compiler flags, both kinds */
    int num_cflags;
    const char *const *include_dirs;  /* extra -I directories */
    int num_include_dirs;
    bool debug;                       /* -O0 -g -DOC_DEBUG: checked accessors */
    bool verbose;                     /* print each compiler command */
    bool force;                       /* rebuild even if cached */
    bool vec_report;                  /* also report which loops of the compute
                                         sources were vectorised, and why not
                                         (result->vec_report) */
} oc_build_options;

/* Result of a build. */
typedef struct oc_build_result {
    char path[4096];  /* absolute path of lib<name>.so */
    bool cached;      /* true if nothing was compiled */
    double seconds;   /* wall time of the build */
    char *vec_report; /* with opts->vec_report: the report (free() it, or
                         the free given to oc_replace_allocator); else NULL */
} oc_build_result;

/* Build (or reuse) the library. On OC_EBUILD, oc_errmsg() holds the
 * compiler's output as it wrote it (after a hint when the mistake is a
 * known one), or the schema mismatch found. The name is what goes between
 * "lib" and ".so": 'relu' and 'librelu' (or 'librelu.so') both build
 * librelu.so. Sources must be C: a C++ source (.cpp, .cc, .cu...) is an
 * error saying so. */
OC_API oc_status oc_build(const oc_build_options *opts, oc_build_result *result);

/* Write a small op project called `name` into `dir` (NULL: ./name): a
 * kernel (kernel.c), its shape function and registration (shape.c), a C
 * test, a Python test, a Makefile (`make test` builds and runs both) and a
 * README -- what `opcore new NAME` does. `name` must be a C identifier (it
 * names lib<name>.so and the namespace). OC_EEXIST, with nothing written,
 * if any of the files exists. */
OC_API oc_status oc_new_project(const char *dir, const char *name);

/* The same op as a pip package (what `opcore new --package NAME` does):
 * csrc/kernel.c and csrc/shape.c, setup.py (opcore.setuptools: the library
 * is built when the wheel is built), pyproject.toml, NAME/__init__.py
 * (`import NAME` loads the prebuilt library), tests/test_NAME.py and a
 * README. Same name rule and OC_EEXIST as oc_new_project. */
OC_API oc_status oc_new_package(const char *dir, const char *name);

/* Directory of opcore's public headers and of libopcore, as the build uses
 * them (set OPCORE_INCLUDE_DIR / OPCORE_LIB_DIR to override). */
OC_API const char *oc_build_include_dir(void);
OC_API const char *oc_build_lib_dir(void);

/* opcore's cache directory: $OPCORE_CACHE_DIR, else $XDG_CACHE_HOME/opcore,
 * else ~/.cache/opcore ("" when none of these is set). A build without
 * out_dir goes to <cache>/build/<name>, where the Python package's
 * custom_op.load() without build_directory builds too, so the CLI and
 * Python share one cache. Read at each call (a per-thread buffer). */
OC_API const char *oc_build_cache_dir(void);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_BUILD_H */
