/*
 * main.c - pcached's command line: configuration (defaults, then the file,
 * then --KEY=VALUE overrides), --check, then the master (master.c).
 *
 *   pcached [-c FILE] [--check] [--KEY=VALUE | --KEY VALUE]...
 *
 * pcached always runs in the foreground (systemd Type=simple, or a
 * terminal); it writes a pidfile when asked to.
 */
#include "pcached.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: pcached [-c FILE] [--check] [--KEY=VALUE]...\n"
               "  -c, --config FILE  configuration file (key = value lines)\n"
               "  --check            validate the configuration, print what would run, exit\n"
               "  --KEY=VALUE        override one configuration key (see --help-keys)\n"
               "  --help-keys        list every key with its default\n"
               "  -V, -v, --version  print the version\n"
               "manual: pcached(8), pcached.conf(5); docs/pcached.md\n");
}

static void log_warn(void *ctx, const char *msg)
{
    (void)ctx;
    srv_log(PC_LOG_WARN, "%s", msg);
}

int main(int argc, char **argv)
{
    static srv s; /* static: large, and inherited as is by every child */
    memset(&s, 0, sizeof s);
    s.http_fd = s.unix_fd = s.metrics_fd = s.pid_fd = -1;
    srv_config_defaults(&s.cfg);
    const char *file = NULL;
    int check = 0;
    char err[1400];
    /* the file first, whatever its position, so overrides always win */
    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) && i + 1 < argc)
            file = argv[++i];
        else if (strncmp(argv[i], "--config=", 9) == 0)
            file = argv[i] + 9;
    }
    if (file != NULL && srv_config_load(&s.cfg, file, err, sizeof err) != 0) {
        fprintf(stderr, "pcached: %s\n", err);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) {
            i++;
            continue;
        }
        if (strncmp(a, "--config=", 9) == 0)
            continue;
        if (strcmp(a, "--check") == 0) {
            check = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--help-keys") == 0) {
            srv_config_defaults(&s.cfg);
            srv_config_print(&s.cfg, stdout);
            return 0;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
            printf("pcached %s\n", SRV_VERSION);
            return 0;
        } else if (strncmp(a, "--", 2) == 0 && a[2] != '\0') {
            int used =
                srv_config_arg(&s.cfg, a, i + 1 < argc ? argv[i + 1] : NULL, err, sizeof err);
            if (used < 0) {
                fprintf(stderr, "pcached: %s\n", err);
                return 2;
            }
            i += used - 1;
        } else {
            fprintf(stderr, "pcached: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    srv_config_store_defaults(&s.cfg, srv_db_url_sql(s.cfg.db_url));
    if (srv_config_check(&s.cfg, err, sizeof err) != 0) {
        fprintf(stderr, "pcached: %s\n", err);
        return 2;
    }
    srv_log_init(&s.cfg, "master");
    if (check)
        return srv_check_run(&s, file);
    (void)srv_advise_data(&s.cfg, srv_db_url_sql(s.cfg.db_url), log_warn, NULL);
    return srv_master_run(&s);
}
