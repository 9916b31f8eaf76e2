/*
 * pc_testrun.c - selecting cases and reporting skips (pc_testrun.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pc_testrun.h"

static const char *only_patterns, *skip_patterns;
static int skipped;
static size_t ran; /* cases selected, over every group */

void pc_test_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--only") == 0) {
            only_patterns = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--skip") == 0) {
            skip_patterns = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--only PATTERNS] [--skip PATTERNS]\n", argv[0]);
            exit(2);
        }
    }
}

/* Whether one of the comma-separated patterns matches group/name or name. */
static int matches(const char *patterns, const char *group, const char *name)
{
    char full[256], pat[256];
    snprintf(full, sizeof full, "%s/%s", group, name);
    for (const char *p = patterns; *p != '\0';) {
        size_t n = strcspn(p, ",");
        snprintf(pat, sizeof pat, "%.*s", (int)n, p);
        if (fnmatch(pat, full, 0) == 0 || fnmatch(pat, name, 0) == 0)
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

int pc_test_selected(const char *group, const char *name)
{
    if (only_patterns != NULL && !matches(only_patterns, group, name))
        return 0;
    return skip_patterns == NULL || !matches(skip_patterns, group, name);
}

size_t pc_test_count(const char *group, const struct CMUnitTest *tests, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (size_t)pc_test_selected(group, tests[i].name);
    return k;
}

int pc_test_run_group(const char *group, const struct CMUnitTest *tests, size_t n,
                      CMFixtureFunction setup, CMFixtureFunction teardown)
{
    struct CMUnitTest *sel = calloc(n > 0 ? n : 1, sizeof *sel);
    if (sel == NULL) {
        fprintf(stderr, "%s: out of memory\n", group);
        return 1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (pc_test_selected(group, tests[i].name))
            sel[k++] = tests[i];
    ran += k;
    int failed = k > 0 ? _cmocka_run_group_tests(group, sel, k, setup, teardown) : 0;
    free(sel);
    return failed;
}

void pc_test_note_skip(const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    print_message("*** SKIPPED: %s ***\n", why);
    skipped = 1;
}

int pc_test_exit(int failed)
{
    if (failed != 0)
        return 1;
    if (only_patterns != NULL && ran == 0) { /* a registration that names no case */
        print_error("--only %s: no case matches\n", only_patterns);
        return 1;
    }
    return skipped ? 77 : 0;
}
