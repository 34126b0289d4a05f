/* tests/c/support/runner.h — run each cmocka test in its own process.
 *
 * oc_test_run() is cmocka_run_group_tests() with isolation: every test (with
 * the group's setup and teardown around it) runs in a forked child, so a
 * crash, a hang or state left behind by one test cannot hide or break the
 * next. The parent reports each child's outcome through cmocka itself, so
 * the output ends with cmocka's usual summary lines ("[  PASSED  ] N
 * test(s)." / "[  FAILED  ] ...") and the exit status is cmocka's.
 *
 * A child that runs longer than OC_TEST_TIMEOUT seconds (default 300) is
 * killed with everything it started, and its test fails. OC_TEST_FILTER=glob
 * runs only the tests whose names match (cmocka's own filter syntax).
 * What the test prints is shown between its RUN and OK/FAILED lines.
 * Memory checkers see each child:
 * valgrind's and LeakSanitizer's leak checks run at every child's exit. */
#ifndef OPCORE_TEST_RUNNER_H
#define OPCORE_TEST_RUNNER_H

#include <stddef.h>

struct CMUnitTest;

int oc_test_run_tests(const char *group_name, const struct CMUnitTest *tests, size_t count,
                      int (*group_setup)(void **), int (*group_teardown)(void **));

#define oc_test_run(name, tests, setup, teardown) \
    oc_test_run_tests((name), (tests), sizeof(tests) / sizeof((tests)[0]), (setup), (teardown))

#endif
