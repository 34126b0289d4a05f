/* opcore run — call an op from the shell on generated inputs. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/op_call.h"

static const char usage_head[] =
    "usage: opcore run LIB.so OP [options]\n"
    "\n"
    "Load LIB.so and call OP (\"relu_forward\" or \"my_ops::relu_forward\") on\n"
    "generated inputs: a random tensor for each Tensor argument, the given or\n"
    "default value for each scalar. Prints the inputs' and the output's shape and\n"
    "dtype, the first values and the time of the call. Errors (oc_errmsg) go to\n"
    "stderr with exit status 1.\n"
    "\n"
    "Each call is what a framework's call costs: shape function, output, kernel.\n"
    "The output is allocated once and reused, and the process keeps freed memory\n"
    "as a framework process does (no heap growing and shrinking per call).\n"
    "With --repeat, one untimed call warms up first.\n"
    "\n"
    "options:\n";
static const char usage_tail[] =
    "  -r, --repeat N         call N times; report the best and the median time\n"
    "  -p, --print            print every value of the inputs and the output\n"
    "  -h, --help             show this help\n";

int cli_run(int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_INPUT_LONGOPTS,
        {"repeat", required_argument, 0, 'r'}, {"print", no_argument, 0, 'p'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    cli_inputs in = {.seed = 1};
    long repeat = 1;
    bool print_all = false;
    opterr = 0;
    optind = 1;
    for (;;) {
        optopt = 0;
        int c = getopt_long(argc, argv, ":" CLI_INPUT_SHORTOPTS "r:ph", opts, NULL);
        if (c == -1) break;
        int rc = cli_inputs_option("run", &in, c, optarg);
        if (rc == CLI_OK) continue;
        if (rc != -1) return rc;
        switch (c) {
        case 'r':
            if ((rc = cli_parse_count("run", "--repeat", optarg, 100000000, &repeat)) != CLI_OK) return rc;
            break;
        case 'p': print_all = true; break;
        default: return cli_other_option("run", c, argc, argv, usage_head, usage_tail);
        }
    }
    cli_call call;
    int rc = cli_call_prepare("run", &in, argc, argv, print_all, &call);
    if (rc != CLI_OK) return rc;
    double *times = calloc((size_t)repeat, sizeof *times);
    if (!times) {
        rc = CLI_FAIL;
        goto out;
    }
    for (long r = repeat > 1 ? -1 : 0; r < repeat; r++) {
        double t0 = cli_now();
        oc_status st = cli_call_run(&call);
        double t = cli_now() - t0;
        if (st != OC_OK) {
            fprintf(stderr, "opcore run: %s: %s\n", oc_status_name(st), oc_errmsg());
            rc = CLI_FAIL;
            goto out;
        }
        if (r >= 0) times[r] = t;
    }
    cli_print_results(&call, print_all);
    if (repeat == 1) cli_print_time("time ", times[0]);
    else {
        double median = cli_median(times, (int)repeat); /* sorts: times[0] is the best */
        cli_print_time("time best ", times[0]);
        cli_print_time(", median ", median);
        printf(" (%ld calls)", repeat);
    }
    printf("\n");
out:
    free(times);
    cli_call_free(&call);
    return rc;
}
