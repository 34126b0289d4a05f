/* opcore config — how to compile a C host against this opcore, and where it
 * caches builds (the pkg-config of an installation that has no .pc on the
 * search path, e.g. the pip-installed package). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "opcore/build.h"

static const char usage[] =
    "usage: opcore config [--cflags] [--libs] [--include-dir] [--lib-dir] [--cache-dir]\n"
    "\n"
    "Print how to compile and link a C host program against this opcore, and where\n"
    "its build cache is. The options' answers print on one line, in the order given,\n"
    "so `cc host.c $(opcore config --cflags --libs)` builds a host. With no option,\n"
    "every setting prints on its own line.\n"
    "\n"
    "options:\n"
    "  --cflags       -I<include dir>\n"
    "  --libs         -L<lib dir> -lopcore -Wl,-rpath,<lib dir>\n"
    "  --include-dir  the directory holding opcore/*.h\n"
    "  --lib-dir      the directory holding libopcore.so\n"
    "  --cache-dir    the build cache: $OPCORE_CACHE_DIR, else $XDG_CACHE_HOME/opcore,\n"
    "                 else ~/.cache/opcore (`opcore build` without -o builds in\n"
    "                 <cache>/build/NAME, as custom_op.load does)\n"
    "  -h, --help     show this help\n";

enum { CFG_CFLAGS = 1, CFG_LIBS, CFG_INCLUDE, CFG_LIB, CFG_CACHE };

static void print_setting(int what)
{
    const char *inc = oc_build_include_dir(), *lib = oc_build_lib_dir();
    switch (what) {
    case CFG_CFLAGS: printf("-I%s", inc); break;
    case CFG_LIBS: printf("-L%s -lopcore -Wl,-rpath,%s", lib, lib); break;
    case CFG_INCLUDE: fputs(inc, stdout); break;
    case CFG_LIB: fputs(lib, stdout); break;
    case CFG_CACHE: fputs(oc_build_cache_dir(), stdout); break;
    }
}

int cli_config(int argc, char **argv)
{
    static const struct option opts[] = {
        {"cflags", no_argument, 0, CFG_CFLAGS},     {"libs", no_argument, 0, CFG_LIBS},
        {"include-dir", no_argument, 0, CFG_INCLUDE}, {"lib-dir", no_argument, 0, CFG_LIB},
        {"cache-dir", no_argument, 0, CFG_CACHE},   {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int asked[16], n = 0;
    opterr = 0;
    optind = 1;
    for (;;) {
        optopt = 0;
        int c = getopt_long(argc, argv, ":h", opts, NULL);
        if (c == -1) break;
        if (c == 'h') {
            fputs(usage, stdout);
            return CLI_OK;
        }
        if (c < CFG_CFLAGS || c > CFG_CACHE)
            return cli_usage_error("config", "unrecognized option '%s'", cli_bad_option(argc, argv));
        if (n < (int)(sizeof asked / sizeof asked[0])) asked[n++] = c;
    }
    if (optind < argc) return cli_usage_error("config", "unexpected argument '%s'", argv[optind]);
    if (!oc_build_include_dir()[0] || !oc_build_lib_dir()[0]) {
        fprintf(stderr, "opcore config: cannot find opcore's headers or libopcore.so; set "
                        "OPCORE_INCLUDE_DIR and OPCORE_LIB_DIR\n");
        return CLI_FAIL;
    }
    if (n == 0) {
        static const char *names[] = {"", "cflags", "libs", "include-dir", "lib-dir", "cache-dir"};
        static const int order[] = {CFG_INCLUDE, CFG_LIB, CFG_CACHE, CFG_CFLAGS, CFG_LIBS};
        for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
            printf("%-12s", names[order[i]]);
            print_setting(order[i]);
            putchar('\n');
        }
        return CLI_OK;
    }
    for (int i = 0; i < n; i++) {
        if (i) putchar(' ');
        print_setting(asked[i]);
    }
    putchar('\n');
    return CLI_OK;
}
