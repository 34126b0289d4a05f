/* src/cli/cli.h — the `opcore` command's subcommands (internal). */
#ifndef OPCORE_CLI_H
#define OPCORE_CLI_H

#include <stdio.h>

/* Exit codes: 0 success, 1 the operation failed, 2 bad usage. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

#ifndef OC_VERSION_STRING
#define OC_VERSION_STRING "0.1.0"
#endif

int cli_build(int argc, char **argv);
int cli_config(int argc, char **argv);
int cli_info(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_new(int argc, char **argv);
int cli_version(int argc, char **argv);

/* Usage helpers (usage.c). */

/* "opcore <cmd>: unrecognized option '--x'" + "try --help" on stderr; returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The text of the option getopt_long just rejected (argv[optind-1] or optopt). */
const char *cli_bad_option(int argc, char **argv);

#endif /* OPCORE_CLI_H */
