/* Building op libraries from source strings with the real build tool. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "opcore/build.h"
#include "opcore/engine.h"
#include "support/oplib.h"

const char *test_tmpdir(void)
{
    static char dir[256];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/opcore-test-%d-XXXXXX", (int)getpid());
        if (!mkdtemp(dir)) fail_msg("cannot make a temp dir");
    }
    return dir;
}

const char *test_repo_path(const char *rel)
{
    static char bufs[4][PATH_MAX]; /* a few alive at once: a call's arguments */
    static int next;
    char *b = bufs[next++ % 4];
    /* this file is tests/c/support/oplib.c */
    snprintf(b, sizeof bufs[0], "%s/../../../%s", OPCORE_TEST_SUPPORT_DIR, rel);
    return b;
}

const char *test_path(const char *dir, const char *leaf)
{
    static char bufs[8][600];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, leaf);
    return b;
}

void test_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) fail_msg("cannot write %s", path);
    fputs(text, f);
    if (fclose(f) != 0) fail_msg("cannot write %s", path);
}

void test_assert_contains(const char *hay, const char *needle)
{
    if (!hay || !strstr(hay, needle)) fail_msg("expected to find\n  %s\nin\n  %s", needle, hay ? hay : "(null)");
}

const oc_op *test_op(const char *name)
{
    const oc_op *o = oc_op_find(name);
    if (!o) fail_msg("%s", oc_errmsg());
    return o;
}

const char *test_build_files(const char *name, const char *compute_path, const char *shape_path,
                             test_lib_options opts, oc_status *status)
{
    static oc_build_result result;
    char out[512];
    snprintf(out, sizeof out, "%s/%s", test_tmpdir(), name);
    const char *c[] = {compute_path}, *s[] = {shape_path}, *flags[] = {opts.cflag};
    oc_build_options o = {.name = name, .compute_srcs = c, .num_compute_srcs = 1,
                          .shape_srcs = s, .num_shape_srcs = 1, .out_dir = out,
                          .multicore = opts.multicore, .stack_size = opts.stack_size,
                          .debug = opts.debug, .cflags = flags, .num_cflags = opts.cflag ? 1 : 0};
    *status = oc_build(&o, &result);
    return *status == OC_OK ? result.path : NULL;
}

const char *test_build(const char *name, const char *compute, const char *shape,
                       test_lib_options opts, oc_status *status)
{
    char cpath[512], spath[512];
    snprintf(cpath, sizeof cpath, "%s/%s_compute.c", test_tmpdir(), name);
    snprintf(spath, sizeof spath, "%s/%s_shape.c", test_tmpdir(), name);
    test_write_file(cpath, compute);
    test_write_file(spath, shape);
    return test_build_files(name, cpath, spath, opts, status);
}

oc_library *test_load(const char *path)
{
    oc_library *lib = NULL;
    if (oc_library_load(path, &lib) != OC_OK) fail_msg("loading %s failed: %s", path, oc_errmsg());
    return lib;
}

oc_library *test_build_and_load(const char *name, const char *compute, const char *shape,
                                test_lib_options opts)
{
    oc_status st;
    const char *path = test_build(name, compute, shape, opts, &st);
    if (!path) fail_msg("building %s failed: %s", name, oc_errmsg());
    return test_load(path);
}

void test_unload_and_shutdown(oc_library **lib)
{
    if (*lib) oc_library_unload(*lib);
    *lib = NULL;
    oc_engine_shutdown();
}

void test_use_every_core(void)
{
    oc_engine_set_min_split_bytes(0);
    setenv("OC_STRAGGLER_US", "0", 0); /* read when the engine starts */
}

oc_library *test_build_dir(const char *name, const char *dir, test_lib_options opts)
{
    char cpath[PATH_MAX], spath[PATH_MAX];
    snprintf(cpath, sizeof cpath, "%s/kernels.c", test_repo_path(dir));
    snprintf(spath, sizeof spath, "%s/shape.c", test_repo_path(dir));
    oc_status st;
    const char *path = test_build_files(name, cpath, spath, opts, &st);
    if (!path) {
        fprintf(stderr, "building %s failed: %s\n", name, oc_errmsg());
        return NULL;
    }
    return test_load(path);
}

int test_each_tile_isa(const char *const *isas, int count, unsigned max_cores, int (*run)(void))
{
    const char *asked = getenv("OC_TILE_ISA");
    if (asked && *asked) return run(); /* one path asked for */
    int rc = 0;
    for (int i = 0; i < count; i++)
        for (unsigned cores = max_cores ? 1 : 0; cores <= max_cores; cores++) {
            printf("== OC_TILE_ISA=%s", isas[i] ? isas[i] : "(the CPU's best)");
            if (cores) printf(", %u cores", cores);
            printf("\n");
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                if (isas[i]) setenv("OC_TILE_ISA", isas[i], 1);
                if (cores && oc_engine_configure(cores, 0) != OC_OK) _exit(1);
                _exit(run());
            }
            int st = 0;
            if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) rc = 1;
        }
    return rc;
}
