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

int srv_setup_cache(srv *s, char *err, size_t errlen);

static void usage(FILE *f)
{
    fprintf(f, "usage: pcached [-c FILE] [--check] [--KEY=VALUE]...\n"
               "  -c, --config FILE  configuration file (key = value lines)\n"
               "  --check            validate the configuration, print what would run, exit\n"
               "  --KEY=VALUE        override one configuration key (see --help-keys)\n"
               "  --help-keys        list every key with its default\n"
               "  -v, --version      print the version\n");
}

int main(int argc, char **argv)
{
    static srv s; /* static: large, and inherited as is by every child */
    memset(&s, 0, sizeof s);
    s.http_fd = s.unix_fd = s.pid_fd = -1;
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
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--version") == 0) {
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
    if (srv_config_check(&s.cfg, err, sizeof err) != 0) {
        fprintf(stderr, "pcached: %s\n", err);
        return 2;
    }
    srv_log_init(&s.cfg, "master");
    if (check) {
        srv_log_quiet(); /* --check prints the configuration, not the engine's info lines */
        /* the collections and the databases map are checked by building
         * them; the store is not opened (that would create it) */
        if (srv_setup_cache(&s, err, sizeof err) != 0) {
            fprintf(stderr, "pcached: %s\n", err);
            return 2;
        }
        printf("# pcached %s: configuration OK%s%s\n", SRV_VERSION, file ? " in " : "",
               file ? file : "");
        printf("# would run: %u worker(s) + 1 maintenance process, RESP on '%s' port %u%s%s, "
               "%u database(s)",
               s.cfg.workers, s.cfg.bind, s.cfg.port, s.cfg.unixsocket[0] ? " and unix socket " : "",
               s.cfg.unixsocket, s.ndbs);
        for (unsigned i = 0; i < s.ndbs; i++)
            printf("%s%u=%s", i ? ", " : " (", i, pc_coll_name(s.dbs[i]));
        printf(")\n# store: %s, db_mode %u\n", s.cfg.db_url[0] ? s.cfg.db_url : "none",
               s.cfg.db_mode);
        srv_config_print(&s.cfg, stdout);
        pc_cache_destroy(s.cache);
        return 0;
    }
    return srv_master_run(&s);
}
