/* opcore — the command-line tool: build op libraries, inspect them, try ops.
 *
 *   opcore build --name N --compute F.c... --shape G.c... [options]
 *   opcore info LIB.so
 *   opcore run LIB.so OP --shape 2,3 [options]
 *   opcore bench LIB.so OP --shape 2,3 [options]
 *   opcore new NAME [DIR]
 *   opcore version
 *   opcore config [--cflags] [--libs] ...
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "opcore/library.h"

static const char top_usage[] =
    "usage: opcore <command> [options]\n"
    "\n"
    "Build, inspect and try opcore op libraries.\n"
    "\n"
    "commands:\n"
    "  build     compile shape and compute sources into lib<name>.so\n"
    "  info      show a library's ops, schemas, kernel prototypes and build settings\n"
    "  run       call an op of a library on generated inputs\n"
    "  bench     time an op per call, in GB/s and against memcpy of the same bytes\n"
    "  new       write a small op project (kernel, shape function, C and Python tests)\n"
    "  version   print opcore's version and ABI\n"
    "  config    print the compiler flags for a C host, and the build cache's place\n"
    "\n"
    "Run `opcore <command> --help` for a command's options.\n";

int cli_version(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: opcore version\n\nPrint opcore's version and the op library ABI version.\n");
        return CLI_OK;
    }
    if (argc > 1) return cli_usage_error("version", "unexpected argument '%s'", argv[1]);
    printf("opcore %s (op library ABI %d)\n", OC_VERSION_STRING, OC_ABI_VERSION);
    return CLI_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(top_usage, stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    static char help_opt[] = "--help";
    char *sub[3] = {argv[1], help_opt, NULL};
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        if (argc <= 2 || strcmp(cmd, "help") != 0) {
            fputs(top_usage, stdout);
            return CLI_OK;
        }
        /* opcore help build == opcore build --help */
        cmd = sub[0] = argv[2];
        argc = 2;
        argv = sub;
    } else if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        return cli_version(1, argv + 1);
    } else {
        argc -= 1;
        argv += 1;
    }
    if (strcmp(cmd, "build") == 0) return cli_build(argc, argv);
    if (strcmp(cmd, "info") == 0) return cli_info(argc, argv);
    if (strcmp(cmd, "run") == 0) return cli_run(argc, argv);
    if (strcmp(cmd, "bench") == 0) return cli_bench(argc, argv);
    if (strcmp(cmd, "new") == 0) return cli_new(argc, argv);
    if (strcmp(cmd, "config") == 0) return cli_config(argc, argv);
    if (strcmp(cmd, "version") == 0) return cli_version(argc, argv);
    if (cmd[0] == '-') fprintf(stderr, "opcore: unrecognized option '%s'\n", cmd);
    else fprintf(stderr, "opcore: unknown command '%s'\n", cmd);
    fputs(top_usage, stderr);
    return CLI_USAGE;
}
