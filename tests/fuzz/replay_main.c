/*
 * replay_main.c - the main() of a fuzz target in the normal build: feeds
 * every file named on the command line, and every file of every folder
 * named there (not recursing; names starting with '.' skipped, so a folder
 * can be kept in git by a .gitkeep), to LLVMFuzzerTestOneInput once, in
 * name order. Each input is copied into a heap block of exactly its size,
 * so under ASan a read past the input faults as it does under libFuzzer.
 *
 * Exit status: 0 when every input ran (a violated invariant aborts before
 * that), 1 when a path cannot be read or no input was found at all (a
 * replay that ran nothing must not pass).
 */
#include "fuzz_target.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    int rc = -1;
    if (buf == NULL)
        goto out;
    for (;;) {
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (nb == NULL)
                goto out;
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        fprintf(stderr, "replay: %s: read error\n", path);
        goto out;
    }
    /* exactly len bytes: an over-read is a heap overflow under ASan */
    uint8_t *exact = malloc(len > 0 ? len : 1);
    if (exact == NULL)
        goto out;
    memcpy(exact, buf, len);
    free(buf);
    buf = NULL;
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    rc = 0;
out:
    if (rc != 0 && buf != NULL)
        fprintf(stderr, "replay: %s: cannot read\n", path);
    free(buf);
    fclose(f);
    return rc;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs the files of folder dir; adds their number to *n. */
static int run_dir(const char *dir, unsigned long *n)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t count = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (count == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (nn == NULL) {
                rc = -1;
                goto out;
            }
            names = nn;
        }
        size_t l = strlen(dir) + strlen(e->d_name) + 2;
        if ((names[count] = malloc(l)) == NULL) {
            rc = -1;
            goto out;
        }
        snprintf(names[count++], l, "%s/%s", dir, e->d_name);
    }
    if (count > 1) /* qsort's base must not be NULL, even for no items */
        qsort(names, count, sizeof *names, by_name);
    for (size_t i = 0; i < count && rc == 0; i++) {
        struct stat st;
        if (stat(names[i], &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        rc = run_file(names[i]);
        if (rc == 0)
            (*n)++;
    }
out:
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    unsigned long n = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        if (S_ISDIR(st.st_mode)) {
            if (run_dir(argv[i], &n) != 0)
                return 1;
        } else {
            if (run_file(argv[i]) != 0)
                return 1;
            n++;
        }
    }
    printf("replay: %lu inputs ran\n", n);
    if (n == 0) {
        fprintf(stderr, "replay: no input found: the corpus is missing\n");
        return 1;
    }
    return 0;
}
