/* Each cmocka test in a forked child, reported through cmocka (runner.h). */
#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/oplib.h"
#include "support/runner.h"

typedef struct isolated {
    const struct CMUnitTest *test;
    const char *group;
    int (*setup)(void **);
    int (*teardown)(void **);
} isolated;

static int timeout_seconds(void)
{
    const char *s = getenv("OC_TEST_TIMEOUT");
    int t = s ? atoi(s) : 0;
    return t > 0 ? t : 300;
}

/* Wait for `pid` at most `seconds`; kills it when it takes longer. Returns
 * its wait status, or -1 when it was killed for the timeout. */
static int wait_bounded(pid_t pid, int seconds)
{
    struct timespec start, now, nap = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int status = 0;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return status;
        if (r < 0 && errno != EINTR) return status;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= seconds) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        nanosleep(&nap, NULL);
        if (nap.tv_nsec < 50000000) nap.tv_nsec *= 2; /* quick tests return quickly */
    }
}

/* The child's output, less the lines of its own one-test cmocka run (the
 * parent's cmocka prints the test's outcome and the summary): what the test
 * printed, and cmocka's failure details, which go to standard error. */
static void replay_output(FILE *out)
{
    static const char *const own[] = {"[==========]", "[ RUN      ]", "[       OK ]", "[  PASSED  ]",
                                      "[  FAILED  ]", "[  SKIPPED ]"};
    char line[4096];
    rewind(out);
    while (fgets(line, sizeof line, out)) {
        int n;
        bool skip = line[0] == '\n' || sscanf(line, " %d FAILED TEST(S)", &n) == 1;
        for (size_t i = 0; !skip && i < sizeof own / sizeof own[0]; i++) skip = !strncmp(line, own[i], strlen(own[i]));
        if (!skip) fputs(line, line[0] == '[' ? stderr : stdout);
    }
    fflush(NULL);
}

/* The child's one cmocka test: the fixtures and the test as one body, so
 * cmocka's signal handlers stay installed (and whatever a fixture installs
 * over them stays, as when the group ran in one process) from the group's
 * setup to its teardown. */
static void child_body(void **state)
{
    const isolated *t = *state;
    void *group_state = NULL;
    if (t->setup && t->setup(&group_state) != 0) fail_msg("the group's setup failed");
    void *test_state = t->test->initial_state ? t->test->initial_state : group_state;
    if (t->test->setup_func && t->test->setup_func(&test_state) != 0) fail_msg("the test's setup failed");
    t->test->test_func(&test_state);
    if (t->test->teardown_func && t->test->teardown_func(&test_state) != 0) fail_msg("the test's teardown failed");
    if (t->teardown && t->teardown(&group_state) != 0) fail_msg("the group's teardown failed");
}

static void run_isolated(void **state)
{
    const isolated *t = *state;
    FILE *out = tmpfile();
    if (!out) fail_msg("cannot make a file for the test's output");
    fflush(NULL); /* the child must not write the parent's buffered output again */
    pid_t pid = fork();
    if (pid < 0) fail_msg("cannot fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(fileno(out), STDOUT_FILENO);
        dup2(fileno(out), STDERR_FILENO);
        const struct CMUnitTest body[] = {{.name = t->test->name, .test_func = child_body,
                                           .initial_state = (void *)t}};
        int failed = _cmocka_run_group_tests(t->group, body, 1, NULL, NULL);
        exit(failed ? 1 : 0); /* exit(), not _exit(): LeakSanitizer checks at exit */
    }
    int seconds = timeout_seconds();
    int status = wait_bounded(pid, seconds);
    replay_output(out);
    fclose(out);
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    if (status == -1) fail_msg("%s timed out after %d s (OC_TEST_TIMEOUT) and was killed", t->test->name, seconds);
    if (WIFSIGNALED(status))
        fail_msg("%s's process was killed by signal %d (%s)", t->test->name, WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    fail_msg("%s's process exited with status %d", t->test->name, WEXITSTATUS(status));
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

int oc_test_run_tests(const char *group_name, const struct CMUnitTest *tests, size_t count,
                      int (*group_setup)(void **), int (*group_teardown)(void **))
{
    isolated *slots = calloc(count, sizeof *slots);
    struct CMUnitTest *wrapped = calloc(count, sizeof *wrapped);
    if (!slots || !wrapped) {
        fprintf(stderr, "%s: out of memory\n", group_name);
        return 1;
    }
    for (size_t i = 0; i < count; i++) {
        slots[i] = (isolated){&tests[i], group_name, group_setup, group_teardown};
        wrapped[i] = (struct CMUnitTest){.name = tests[i].name, .test_func = run_isolated,
                                         .initial_state = &slots[i]};
    }
    const char *filter = getenv("OC_TEST_FILTER");
    if (filter && filter[0]) cmocka_set_test_filter(filter);
    /* One scratch directory for the whole run, made here so every child
     * shares it (and it is removed once, below). */
    const char *tmp = test_tmpdir();
    int failed = _cmocka_run_group_tests(group_name, wrapped, count, NULL, NULL);
    if (!getenv("OC_KEEP_TEST_FILES")) nftw(tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(slots);
    free(wrapped);
    return failed;
}
