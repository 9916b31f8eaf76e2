/*
 * pc_testrun.h - a cmocka program as one or more ctest tests, and skips
 * that ctest sees.
 *
 * A case that cannot run on this machine (a server, a driver or a privilege
 * is missing) calls pc_skip("why"): the reason is printed, the case is
 * cmocka's skipped, and pc_test_exit() then makes the program exit 77, which
 * ctest reports as Skipped (SKIP_RETURN_CODE), not Passed - unless a case
 * failed. A part of a program that may have to skip is registered as a
 * ctest test of its own (PC_TEST_PARTS in tests/CMakeLists.txt), so the
 * rest of the program still reports Passed. For that every program using
 * pc_test_args takes
 *   --only PATTERNS   run only the cases matching one of the comma-separated
 *                     fnmatch(3) patterns, each tried on "group/case" and
 *                     on "case"
 *   --skip PATTERNS   run all the other cases
 *
 *   int main(int argc, char **argv)
 *   {
 *       pc_test_args(argc, argv);
 *       const struct CMUnitTest tests[] = {...};
 *       return pc_test_exit(PC_RUN_GROUP("store", tests, setup, teardown));
 *   }
 *
 * The including file includes cmocka.h first.
 */
#ifndef PC_TESTRUN_H
#define PC_TESTRUN_H

#include <stddef.h>

/* Parses the options above (exits 2 on a bad one). */
void pc_test_args(int argc, char **argv);
/* Whether case name of group runs under the options. */
int pc_test_selected(const char *group, const char *name);
/* How many of the n cases of group run. */
size_t pc_test_count(const char *group, const struct CMUnitTest *tests, size_t n);
/* Runs the selected cases of group (none: nothing, 0); the failed count. */
int pc_test_run_group(const char *group, const struct CMUnitTest *tests, size_t n,
                      CMFixtureFunction setup, CMFixtureFunction teardown);
#define PC_RUN_GROUP(group, tests, setup, teardown)                                                \
    pc_test_run_group(group, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown)
#define PC_SELECTED(group, tests) pc_test_count(group, tests, sizeof(tests) / sizeof((tests)[0]))

/* Prints "*** SKIPPED: <why> ***" and remembers it; pc_skip also ends the
 * running case as skipped (cmocka's skip(): does not return). */
void pc_test_note_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define pc_skip(...)                                                                               \
    do {                                                                                           \
        pc_test_note_skip(__VA_ARGS__);                                                            \
        skip();                                                                                    \
    } while (0)

/* The program's exit status: 1 when a case failed (or --only matched none),
 * else 77 when one was skipped, else 0. */
int pc_test_exit(int failed);

#endif
