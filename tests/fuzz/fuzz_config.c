/*
 * fuzz_config.c - pcached's configuration readers (src/server/config.c):
 * the "key = value" file (srv_config_read) and the command-line overrides
 * (srv_config_arg), then the cross-key check (srv_config_check, which
 * parses sync_peers). An input that starts with "--" is a command line,
 * its arguments separated by NUL bytes; any other input is a file.
 *
 * Invariants: every reader answers 0 (or, for an argument, 1 or 2: the
 * arguments it took) or -1 with a non-empty message; a string key's value
 * stays NUL-terminated inside its field; a file with a NUL byte or a line
 * past 4096 bytes is refused (config.c's header: such a line is an error,
 * never read in part); and a configuration read from a file, printed by
 * srv_config_print and read back, gives the same value for every key (the
 * masked requirepass and management_password aside).
 */
#include "fuzz_target.h"
#include "resp.h"

#include <string.h>

static void check_fields(const srv_config *cfg)
{
    char buf[32];
    for (unsigned i = 0; i < srv_config_count(); i++) {
        const char *name;
        const char *v = srv_config_get(cfg, i, &name, buf, sizeof buf);
        FUZZ_CHECK(v != NULL && name != NULL);
        FUZZ_CHECK(strlen(v) < 4096);
    }
    const char *name;
    FUZZ_CHECK(srv_config_get(cfg, srv_config_count(), &name, buf, sizeof buf) == NULL);
}

static void check_err(int rc, const char *err)
{
    if (rc < 0)
        FUZZ_CHECK(rc == -1 && err[0] != '\0' && strlen(err) < 1400);
}

/* 1 when some line of p[0, n) is longer than 4096 bytes (its '\n' aside). */
static int long_line(const uint8_t *p, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            run = 0;
        } else if (++run > 4096) {
            return 1;
        }
    }
    return 0;
}

static void command_line(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1), *argv[64];
    if (copy == NULL)
        return;
    memcpy(copy, data, size);
    copy[size] = '\0';
    unsigned argc = 0;
    for (size_t i = 0; i <= size && argc < 64; argc++) {
        argv[argc] = copy + i;
        i += strlen(copy + i) + 1;
    }
    srv_config cfg;
    srv_config_defaults(&cfg);
    char err[1400] = "";
    for (unsigned i = 0; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0)
            continue;
        err[0] = '\0';
        int used =
            srv_config_arg(&cfg, argv[i], i + 1 < argc ? argv[i + 1] : NULL, err, sizeof err);
        check_err(used, err);
        FUZZ_CHECK(used == -1 || used == 1 || (used == 2 && i + 1 < argc));
        if (used < 0)
            break;
        i += (unsigned)used - 1;
    }
    check_fields(&cfg);
    err[0] = '\0';
    check_err(srv_config_check(&cfg, err, sizeof err), err);
    free(copy);
}

static int read_mem(srv_config *cfg, const void *p, size_t n, char *err, size_t errlen)
{
    FILE *f = fmemopen((void *)p, n, "r");
    if (f == NULL)
        return -2;
    int rc = srv_config_read(cfg, f, "fuzz.conf", err, errlen);
    fclose(f);
    return rc;
}

static void file(const uint8_t *data, size_t size)
{
    if (size == 0) /* fmemopen refuses an empty buffer */
        return;
    srv_config cfg;
    srv_config_defaults(&cfg);
    char err[1400] = "";
    int rc = read_mem(&cfg, data, size, err, sizeof err);
    if (rc == -2)
        return;
    check_err(rc, err);
    check_fields(&cfg);
    if (rc == 0) {
        FUZZ_CHECK(memchr(data, '\0', size) == NULL);
        FUZZ_CHECK(!long_line(data, size));
    }
    err[0] = '\0';
    check_err(srv_config_check(&cfg, err, sizeof err), err);
    if (rc != 0)
        return;

    /* print, read back, compare */
    char *text = NULL;
    size_t tlen = 0;
    FILE *out = open_memstream(&text, &tlen);
    if (out == NULL)
        return;
    srv_config_print(&cfg, out);
    fclose(out);
    srv_config again;
    srv_config_defaults(&again);
    rc = read_mem(&again, text, tlen, err, sizeof err);
    if (rc != -2) {
        if (rc != 0)
            fprintf(stderr, "re-read: %s\n", err);
        FUZZ_CHECK(rc == 0);
        char b1[32], b2[32];
        for (unsigned i = 0; i < srv_config_count(); i++) {
            const char *n1, *n2;
            const char *v1 = srv_config_get(&cfg, i, &n1, b1, sizeof b1);
            const char *v2 = srv_config_get(&again, i, &n2, b2, sizeof b2);
            if (strcmp(n1, "requirepass") != 0 && strcmp(n1, "management_password") != 0)
                FUZZ_CHECK(strcmp(v1, v2) == 0);
        }
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= 2 && data[0] == '-' && data[1] == '-')
        command_line(data, size);
    else
        file(data, size);
    return 0;
}
