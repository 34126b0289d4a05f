/* src/cli/op_call.h — calling an op from the command line (internal): what
 * `opcore run` and `opcore bench` share. Inputs generated from --shape,
 * --dtype, --arg and --seed; the output allocated once and reused, as a
 * framework's caching allocator would; timing helpers. */
#ifndef OPCORE_CLI_OP_CALL_H
#define OPCORE_CLI_OP_CALL_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "opcore/host.h"

#define CLI_MAX_ARGS 64    /* the schema grammar's limit */
#define CLI_MAX_TENSORS 64 /* tensors over all arguments (list items included) */
#define CLI_MAX_ITEMS 16   /* values of an int[] / float[] given with --arg */

/* The input options, as given. */
typedef struct cli_inputs {
    const char *shapes[CLI_MAX_ARGS], *dtypes[CLI_MAX_ARGS], *argdefs[CLI_MAX_ARGS];
    int nshapes, ndtypes, nargdefs;
    unsigned long long seed;
    oc_grid grid; /* --grid (ndim 0: the op's own) */
} cli_inputs;

/* getopt_long entries and short options for them (append to a command's). */
#define CLI_INPUT_LONGOPTS                                                              \
    {"shape", required_argument, 0, 's'}, {"dtype", required_argument, 0, 'd'},        \
        {"arg", required_argument, 0, 'a'}, {"seed", required_argument, 0, 'S'},          \
        {"grid", required_argument, 0, 'G'}
#define CLI_INPUT_SHORTOPTS "s:d:a:"

/* The help lines for them. */
extern const char cli_inputs_help[];

/* Take one input option (getopt's c and optarg): CLI_OK, CLI_USAGE after
 * printing why, or -1 if c is not an input option. */
int cli_inputs_option(const char *cmd, cli_inputs *in, int c, const char *arg);

/* The last cases of a run/bench option loop: -h/--help (prints `head`, the
 * input options' help, `tail`; CLI_OK), a missing argument or an unknown
 * option (CLI_USAGE). */
int cli_other_option(const char *cmd, int c, int argc, char **argv, const char *head, const char *tail);

/* A count option (--repeat, --rounds) in 1..max into *out: CLI_OK, or
 * CLI_USAGE after "--OPTION 'ARG' is not a positive count". */
int cli_parse_count(const char *cmd, const char *option, const char *arg, long max, long *out);

/* An output buffer kept across calls: allocated (64-byte aligned) only
 * when a call needs more than it holds. */
typedef struct cli_outbuf {
    void *data;
    size_t cap;
} cli_outbuf;

/* A prepared call: the op and its arguments (tensors own their data), and
 * its results' buffers, reused by every call as a framework's caching
 * allocator would. */
typedef struct cli_call {
    oc_library *lib;
    const oc_op *op;
    int nargs;
    oc_value args[CLI_MAX_ARGS];
    int ntensors;
    oc_tensor tensors[CLI_MAX_TENSORS];
    void *datas[CLI_MAX_TENSORS];
    int64_t ints[CLI_MAX_ARGS][CLI_MAX_ITEMS];
    double floats[CLI_MAX_ARGS][CLI_MAX_ITEMS];
    int64_t in_bytes; /* bytes of all tensor arguments */
    oc_tensor outs[OC_MAX_RESULTS];
    cli_outbuf bufs[OC_MAX_RESULTS];
    oc_grid grid; /* the launch grid (ndim 0: the op's own) */
} cli_call;

/* After the options (argv[optind..]): exactly LIB.so and OP must remain.
 * Keep freed heap memory in the process from here on (no trimming, no
 * per-allocation mmap), as a long-running framework process does:
 * temporaries a kernel makes then cost what they cost in PyTorch, not a brk
 * and fresh page faults on every call. Load LIB.so, find OP in it, make its
 * arguments, printing the op and each input ("  input  x  float32 [2, 3]"),
 * with every value if `print_all`. CLI_OK, CLI_FAIL or CLI_USAGE (message
 * printed); on failure nothing is left to free. */
int cli_call_prepare(const char *cmd, const cli_inputs *in, int argc, char **argv, bool print_all,
                     cli_call *call);
void cli_call_free(cli_call *call);

/* One call into call->outs (oc_op_run with the reused buffers). */
oc_status cli_call_run(cli_call *call);

/* Bytes the results of the last call take (fresh and written in place). */
int64_t cli_out_bytes(const cli_call *call);

/* Print each result of the last call ("  output   float32 [2, 3]"), a
 * Tensor(a!) one as the argument it wrote, and its first (or all) values;
 * "(no results)" for `-> ()` ops, with the arguments they wrote. */
void cli_print_results(const cli_call *call, bool print_all);

/* Print "  LABEL[v0, v1, ...]": the first 8 values, or all (up to 10000). */
void cli_print_values(const char *label, const oc_tensor *t, bool all);

double cli_now(void);
/* "12.3 us" / "1.234 ms" / "1.234 s" after `label`. */
void cli_print_time(const char *label, double seconds);
/* Median of n values (sorts them: v[0] is then the smallest). */
double cli_median(double *v, int n);

#endif /* OPCORE_CLI_OP_CALL_H */
