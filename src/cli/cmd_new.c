/* opcore new — start an op project; opcore config — flags for C programs
 * that use opcore (the project's C test builds with them). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "opcore/build.h"

static const char new_usage[] =
    "usage: opcore new NAME [DIR]\n"
    "\n"
    "Write a small op project into DIR (default ./NAME): an op library NAME with one\n"
    "operator, NAME::scale_add(Tensor x, Tensor y, float alpha=1.0) -> Tensor:\n"
    "  kernel.c        the kernel (broadcasting, any strides, vectorised, multicore-ready)\n"
    "  shape.c         its shape function and the OC_LIBRARY registration\n"
    "  test_NAME.c     a C test through the host API\n"
    "  test_NAME.py    a Python test through torch.ops.NAME\n"
    "  Makefile        `make` builds build/libNAME.so, `make test` runs both tests\n"
    "  README.md\n"
    "NAME must be a C identifier. Nothing is overwritten.\n";

int cli_new(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(new_usage, stdout);
        return CLI_OK;
    }
    if (argc > 1 && argv[1][0] == '-') return cli_usage_error("new", "unrecognized option '%s'", argv[1]);
    if (argc < 2) return cli_usage_error("new", "expected the project's NAME");
    if (argc > 3) return cli_usage_error("new", "unexpected argument '%s'", argv[3]);
    const char *name = argv[1], *dir = argc > 2 ? argv[2] : argv[1];
    if (oc_new_project(dir, name) != OC_OK) {
        fprintf(stderr, "%s\n", oc_errmsg());
        return oc_errcode() == OC_EINVAL ? CLI_USAGE : CLI_FAIL;
    }
    printf("wrote %s/: kernel.c shape.c test_%s.c test_%s.py Makefile README.md\n"
           "next: cd %s && make test\n", dir, name, name, dir);
    return CLI_OK;
}

static const char config_usage[] =
    "usage: opcore config [--cflags] [--libs]\n"
    "\n"
    "Print the compiler flags for a C program that uses opcore's host API:\n"
    "  --cflags   -I of opcore's headers\n"
    "  --libs     -L, -rpath and -lopcore for libopcore\n"
    "(both by default), like pkg-config, also for an uninstalled build or the\n"
    "Python package's copy.\n";

int cli_config(int argc, char **argv)
{
    bool cflags = false, libs = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cflags")) cflags = true;
        else if (!strcmp(argv[i], "--libs")) libs = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(config_usage, stdout);
            return CLI_OK;
        } else return cli_usage_error("config", "unrecognized option '%s'", argv[i]);
    }
    if (!cflags && !libs) cflags = libs = true;
    const char *inc = oc_build_include_dir(), *lib = oc_build_lib_dir();
    if (!inc[0] || !lib[0]) {
        fprintf(stderr, "opcore config: cannot find opcore's headers or libopcore.so; set "
                        "OPCORE_INCLUDE_DIR and OPCORE_LIB_DIR\n");
        return CLI_FAIL;
    }
    if (cflags) printf("-I%s", inc);
    if (cflags && libs) printf(" ");
    if (libs) printf("-L%s -Wl,-rpath,%s -lopcore", lib, lib);
    printf("\n");
    return CLI_OK;
}
