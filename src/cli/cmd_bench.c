/* opcore bench — an op's time per call, its bandwidth, and how it compares
 * with memcpy moving the same bytes on this machine, measured in the same
 * run (interleaved rounds, median of the paired ratios). */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/op_call.h"
#include "opcore/engine.h"

static const char usage_head[] =
    "usage: opcore bench LIB.so OP [options]\n"
    "\n"
    "Time OP (\"relu_forward\" or \"my_ops::relu_forward\") on generated inputs as a\n"
    "framework calls it (shape function, output allocated once and reused, kernel),\n"
    "and memcpy of the same number of bytes (inputs read + output written), in\n"
    "alternating rounds. Prints the time per call (median and best round), the\n"
    "bytes each call moves, GB/s of both, and the op's speed as a fraction of\n"
    "memcpy's: the median over rounds of memcpy's time / the op's time. memcpy runs\n"
    "on one thread for a single-core op, on every engine core for a multicore op.\n"
    "\n"
    "options:\n";
static const char usage_tail[] =
    "  -r, --rounds N         rounds of each (default 11)\n"
    "  -t, --round-time S     seconds per round, at least (default 0.02)\n"
    "  -h, --help             show this help\n";

/* ---- memcpy on several threads ------------------------------------------------ */

typedef struct copier {
    int nthreads;
    pthread_t *threads;
    pthread_barrier_t start, done;
    char *dst;
    const char *src;
    size_t bytes;
    long reps;
    bool quit, started;
} copier;

typedef struct copier_arg {
    copier *c;
    int id;
} copier_arg;

static void copy_share(copier *c, int id)
{
    size_t lo = c->bytes * (size_t)id / (size_t)c->nthreads, hi = c->bytes * (size_t)(id + 1) / (size_t)c->nthreads;
    for (long r = 0; r < c->reps; r++) memcpy(c->dst + lo, c->src + lo, hi - lo);
}

static void *copier_main(void *p)
{
    copier_arg *a = p;
    for (;;) {
        pthread_barrier_wait(&a->c->start);
        if (a->c->quit) return NULL;
        copy_share(a->c, a->id);
        pthread_barrier_wait(&a->c->done);
    }
}

/* `reps` copies of the buffer, split over the threads (the caller is one). */
static void copier_run(copier *c, long reps)
{
    c->reps = reps;
    if (c->nthreads > 1) pthread_barrier_wait(&c->start);
    copy_share(c, 0);
    if (c->nthreads > 1) pthread_barrier_wait(&c->done);
}

static bool copier_start(copier *c, int nthreads, size_t bytes, copier_arg *args)
{
    memset(c, 0, sizeof *c);
    c->nthreads = nthreads;
    c->bytes = bytes;
    size_t cap = (bytes + 63) / 64 * 64 + 64;
    c->dst = aligned_alloc(64, cap);
    char *src = aligned_alloc(64, cap);
    c->src = src;
    c->threads = calloc((size_t)nthreads, sizeof *c->threads);
    if (!c->dst || !src || !c->threads) return false;
    memset(c->dst, 0, cap); /* fault both in before timing */
    for (size_t i = 0; i < cap; i++) src[i] = (char)i;
    if (nthreads > 1) {
        pthread_barrier_init(&c->start, NULL, (unsigned)nthreads);
        pthread_barrier_init(&c->done, NULL, (unsigned)nthreads);
        for (int i = 1; i < nthreads; i++) {
            args[i] = (copier_arg){c, i};
            pthread_create(&c->threads[i], NULL, copier_main, &args[i]);
        }
    }
    c->started = true;
    return true;
}

static void copier_stop(copier *c)
{
    if (c->started && c->nthreads > 1) {
        c->quit = true;
        pthread_barrier_wait(&c->start);
        for (int i = 1; i < c->nthreads; i++) pthread_join(c->threads[i], NULL);
        pthread_barrier_destroy(&c->start);
        pthread_barrier_destroy(&c->done);
    }
    free(c->dst);
    free((void *)c->src);
    free(c->threads);
}

/* ---- the command ------------------------------------------------------------------ */

static int op_calls(cli_call *call, long reps)
{
    for (long i = 0; i < reps; i++) {
        oc_status st = cli_call_run(call);
        if (st != OC_OK) {
            fprintf(stderr, "opcore bench: %s: %s\n", oc_status_name(st), oc_errmsg());
            return CLI_FAIL;
        }
    }
    return CLI_OK;
}

static void print_rate(const char *label, double bytes, double seconds)
{
    printf("%s%.2f GB/s", label, bytes / seconds / 1e9);
}

int cli_bench(int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_INPUT_LONGOPTS,
        {"rounds", required_argument, 0, 'r'}, {"round-time", required_argument, 0, 't'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    cli_inputs in = {.seed = 1};
    long rounds = 11;
    double round_time = 0.02;
    opterr = 0;
    optind = 1;
    for (;;) {
        optopt = 0;
        int c = getopt_long(argc, argv, ":" CLI_INPUT_SHORTOPTS "r:t:h", opts, NULL);
        if (c == -1) break;
        int rc = cli_inputs_option("bench", &in, c, optarg);
        if (rc == CLI_OK) continue;
        if (rc != -1) return rc;
        char *end;
        switch (c) {
        case 'r':
            if ((rc = cli_parse_count("bench", "--rounds", optarg, 100000, &rounds)) != CLI_OK) return rc;
            break;
        case 't':
            round_time = strtod(optarg, &end);
            if (end == optarg || *end || !(round_time > 0) || round_time > 60)
                return cli_usage_error("bench", "--round-time '%s' is not a number of seconds in (0, 60]", optarg);
            break;
        default: return cli_other_option("bench", c, argc, argv, usage_head, usage_tail);
        }
    }
    cli_call call;
    int rc = cli_call_prepare("bench", &in, argc, argv, false, &call);
    if (rc != CLI_OK) return rc;
    copier cp = {0};
    copier_arg *cargs = NULL;
    double *t_op = calloc((size_t)rounds, sizeof *t_op), *t_cp = calloc((size_t)rounds, sizeof *t_cp);
    double *ratio = calloc((size_t)rounds, sizeof *ratio);
    if (!t_op || !t_cp || !ratio) {
        rc = CLI_FAIL;
        goto out;
    }
    /* warm up, then find how many calls fill a round */
    if ((rc = op_calls(&call, 2)) != CLI_OK) goto out;
    long reps = 1;
    for (;;) {
        double t0 = cli_now();
        if ((rc = op_calls(&call, reps)) != CLI_OK) goto out;
        double t = cli_now() - t0;
        if (t >= round_time || reps >= 10000000) break;
        long next = t > 0 ? (long)(reps * (round_time / t) * 1.2) + 1 : reps * 10;
        reps = next > reps * 10 ? reps * 10 : next;
    }
    double bytes = (double)call.in_bytes + (double)cli_out_bytes(&call);
    bool multicore = oc_op_multicore(call.op);
    int threads = multicore ? (int)oc_engine_num_cores() : 1;
    cargs = calloc((size_t)threads, sizeof *cargs);
    size_t copy_bytes = (size_t)(bytes / 2); /* memcpy reads and writes each byte */
    if (!cargs || !copier_start(&cp, threads, copy_bytes ? copy_bytes : 1, cargs)) {
        fprintf(stderr, "opcore bench: out of memory for the memcpy buffers\n");
        rc = CLI_FAIL;
        goto out;
    }
    copier_run(&cp, 1);
    for (long r = 0; r < rounds; r++) {
        /* alternate which goes first, so neither always follows the other */
        for (int k = 0; k < 2; k++) {
            double t0 = cli_now();
            if ((k == 0) == (r % 2 == 0)) {
                if ((rc = op_calls(&call, reps)) != CLI_OK) goto out;
                t_op[r] = (cli_now() - t0) / (double)reps;
            } else {
                copier_run(&cp, reps);
                t_cp[r] = (cli_now() - t0) / (double)reps;
            }
        }
        ratio[r] = t_cp[r] / t_op[r];
    }
    cli_print_results(&call, false);
    /* sorting for the medians leaves t_op[0] the best round (the ratios are taken) */
    double med_op = cli_median(t_op, (int)rounds), med_cp = cli_median(t_cp, (int)rounds);
    cli_print_time("per call  ", med_op);
    cli_print_time(" median, ", t_op[0]);
    printf(" best (%ld rounds of %ld calls, %s op)\n", rounds, reps,
           multicore ? "multicore" : "single-core");
    printf("bytes     %.0f per call (inputs %lld + outputs %lld)\n", bytes, (long long)call.in_bytes,
           (long long)cli_out_bytes(&call));
    print_rate("bandwidth ", bytes, med_op);
    print_rate(" op, ", bytes, med_cp);
    printf(" memcpy of %zu bytes on %d thread%s\n", copy_bytes, threads, threads == 1 ? "" : "s");
    printf("x memcpy  %.3f (median over rounds of memcpy's time / the op's; 1 = memcpy speed)\n",
           cli_median(ratio, (int)rounds));
out:
    if (cargs) copier_stop(&cp);
    free(cargs);
    free(t_op);
    free(t_cp);
    free(ratio);
    cli_call_free(&call);
    return rc;
}
