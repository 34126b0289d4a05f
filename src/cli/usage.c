/* The CLI's usage helpers, shared by every subcommand (cli.h): called by
 * the cmd_*.c files and op_call.c, calling nothing of theirs, so main.c
 * (which dispatches to the subcommands) stays at the top. */
#include <stdarg.h>
#include <stdio.h>

#include "cli/cli.h"

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "opcore %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry `opcore %s --help`.\n", cmd);
    return CLI_USAGE;
}

const char *cli_bad_option(int argc, char **argv)
{
    extern int optind, optopt;
    static char buf[8];
    if (optopt) {
        snprintf(buf, sizeof buf, "-%c", optopt);
        return buf;
    }
    if (optind - 1 >= 0 && optind - 1 < argc) return argv[optind - 1];
    return "?";
}
