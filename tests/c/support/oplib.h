/* tests/c/support/oplib.h — build real op libraries for tests. */
#ifndef OPCORE_TEST_OPLIB_H
#define OPCORE_TEST_OPLIB_H

#include <stdbool.h>
#include <stddef.h>

#include "opcore/host.h"

typedef struct test_lib_options {
    bool multicore;
    size_t stack_size;
    bool debug;
    const char *cflag; /* one extra compiler flag, or NULL */
} test_lib_options;

/* Write `compute` and `shape` source text to a temp dir, build lib<name>.so
 * with oc_build and load it. Fails the test on any error. */
oc_library *test_build_and_load(const char *name, const char *compute, const char *shape,
                                test_lib_options opts);

/* Same, but only build; returns the path (static buffer) or NULL with the
 * build's status in *status. */
const char *test_build(const char *name, const char *compute, const char *shape,
                       test_lib_options opts, oc_status *status);

/* Same, from source files (paths) instead of text. */
const char *test_build_files(const char *name, const char *compute_path, const char *shape_path,
                             test_lib_options opts, oc_status *status);

/* A group setup's library: <dir>/kernels.c and <dir>/shape.c (a folder
 * of the repository) built as lib<name>.so and loaded; NULL, with the
 * build's message on stderr, when the build fails. */
oc_library *test_build_dir(const char *name, const char *dir, test_lib_options opts);

/* Run `run` once per instruction set in isas (NULL: the CPU's best), each
 * in a child process with OC_TILE_ISA set to it and, for max_cores > 0,
 * once per engine size 1..max_cores; 0 if every child returned 0. With
 * OC_TILE_ISA already set (not empty), `run` alone, in this process. */
int test_each_tile_isa(const char *const *isas, int count, unsigned max_cores, int (*run)(void));

/* Load the library at `path`. Fails the test on any error. */
oc_library *test_load(const char *path);

/* Path of a file in the repository (tests run from anywhere); the last
 * four answers stay valid. */
const char *test_repo_path(const char *rel);

/* A scratch directory unique to this test process. */
const char *test_tmpdir(void);

/* "dir/leaf", in one of 8 rotating buffers (several may be in use at once). */
const char *test_path(const char *dir, const char *leaf);

/* Write `text` to `path`; fails the test if it cannot. */
void test_write_file(const char *path, const char *text);

/* Multicore launches use every engine core, whatever their size and the
 * machine's load: small test tensors still split, and a descheduled worker
 * never makes the engine fall back to the caller alone (docs/engine.md).
 * Call before the engine starts. */
void test_use_every_core(void);

/* A test file's teardown: unload *lib (if loaded; then NULL) and shut the
 * engine down. */
void test_unload_and_shutdown(oc_library **lib);

/* Fails the test, showing both, unless `hay` (may be NULL) holds `needle`. */
void test_assert_contains(const char *hay, const char *needle);

/* The loaded op `name` ("lib::op"); fails the test with opcore's message
 * when there is none. */
const oc_op *test_op(const char *name);

#endif
