/*
 * check.c - `pcached --check`: every validation the start runs short of
 * binding its sockets and opening (creating) the store, so that the unit's
 * ExecStartPre=--check fails exactly when the start would fail on its
 * configuration. Beyond srv_config_check (keys against keys):
 *   - the listen addresses the start parses (bind, and http_bind /
 *     sync_bind when their port is set) as the start parses them;
 *   - the collections and the SELECT map, by building the cache;
 *   - the persistence policy (pc_persist_check): db_url's form (lmdb://
 *     takes an absolute path), persist_collections and journal naming
 *     declared collections, the journal modes, store_root, and the store's
 *     path (an existing directory, or a missing one in an existing
 *     directory: never under a regular file);
 *   - the files the start creates (unix_socket, pidfile, log_file): their
 *     directory, when it exists, is a directory (never a regular file).
 * It then prints what would run and the effective configuration.
 */
#include "pcached.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int srv_setup_cache(srv *s, char *err, size_t errlen);

void srv_persist_config_fill(srv *s, pc_persist_config *pc)
{
    pc_persist_config_init(pc);
    pc->db_url = s->cfg.db_url;
    pc->db_mode = (int)s->cfg.db_mode;
    pc->persist_collections = s->cfg.persist_collections;
    pc->journal = s->cfg.journal[0] ? s->cfg.journal : NULL;
    pc->snapshot_period_s = s->cfg.snapshot_period_s;
    pc->journal_rewrite_percent = s->cfg.journal_rewrite_percent;
    pc->journal_rewrite_min_mb = s->cfg.journal_rewrite_min_mb;
    pc->journal_max_mb = s->cfg.journal_max_mb;
    pc->log.fn = srv_log_cb;
    pc->log.level = srv_log_level();
    pc->sql_backend = srv_sql_backend();
    pc->node_id = s->node_id;
    pc->sync_push = srv_sync_push;
    pc->sync_push_ctx = s;
    pc->sync_poll_ms = s->cfg.sync_poll_ms;
    pc->sync_check_ms = s->cfg.sync_check_ms;
    pc->store_root = s->cfg.store_root;
    pc->store_sql_targets = (int)s->cfg.store_sql_targets;
}

/* An address the start hands to inet_pton (sync_udp.c, the HTTP door). */
static int check_addr(const char *key, const char *addr, char *err, size_t errlen)
{
    struct in_addr a;
    if (inet_pton(AF_INET, addr, &a) == 1)
        return 0;
    snprintf(err, errlen,
             "%s: '%.100s' is not an IPv4 address (a name such as localhost is not "
             "resolved: write 127.0.0.1)",
             key, addr);
    return -1;
}

/* The directory of a file the start creates is a directory. A missing one
 * passes for the runtime files: the unit's RuntimeDirectory= (/run/pcache)
 * exists by the start but not on the machine that checks the configuration
 * file; the start then says what is missing. */
static int check_parent(const char *key, const char *path, char *err, size_t errlen)
{
    if (path[0] == '\0')
        return 0;
    char dir[1100];
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return 0; /* the working directory */
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= sizeof dir) {
        snprintf(err, errlen, "%s: '%.100s...': path too long", key, path);
        return -1;
    }
    memcpy(dir, path, n);
    dir[n] = '\0';
    struct stat st;
    if (stat(dir, &st) != 0 && errno == ENOENT)
        return 0;
    if (stat(dir, &st) != 0) {
        snprintf(err, errlen, "%s: %.200s: directory %.200s: %s", key, path, dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: %.200s: %.200s is not a directory", key, path, dir);
        return -1;
    }
    return 0;
}

static int check_all(srv *s, char *err, size_t errlen)
{
    unsigned nb = 0;
    char berr[512];
    if (srv_bind_parse(s->cfg.bind, NULL, SRV_MAX_BINDS, &nb, berr, sizeof berr) != 0) {
        snprintf(err, errlen, "%s", berr); /* as the start parses it (listen.c) */
        return -1;
    }
    if (s->cfg.http_port != 0 && check_addr("http_bind", s->cfg.http_bind, err, errlen) != 0)
        return -1;
    if (s->cfg.sync_port != 0 && check_addr("sync_bind", s->cfg.sync_bind, err, errlen) != 0)
        return -1;
    if (s->cfg.metrics_port != 0 &&
        check_addr("metrics_bind", s->cfg.metrics_bind, err, errlen) != 0)
        return -1;
    if (check_parent("unix_socket", s->cfg.unix_socket, err, errlen) != 0 ||
        check_parent("unixsocket", s->cfg.unixsocket, err, errlen) != 0 ||
        check_parent("pidfile", s->cfg.pidfile, err, errlen) != 0 ||
        check_parent("log_file", s->cfg.log_file, err, errlen) != 0)
        return -1;
    /* the collections and the databases map are checked by building them */
    if (srv_setup_cache(s, err, errlen) != 0)
        return -1;
    if (s->cfg.db_url[0] != '\0') {
        pc_persist_config pc;
        srv_persist_config_fill(s, &pc);
        char perr[1024];
        int rc = pc_persist_check(s->cache, &pc, perr, sizeof perr);
        if (rc != 0) {
            snprintf(err, errlen, "persistence: %s", perr[0] ? perr : pc_store_strerror(rc));
            return -1;
        }
    }
    return 0;
}

/* A configuration that loses data passes, said on stderr (the unit's
 * ExecStartPre output reaches the journal). */
static void check_warn(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "pcached: WARN %s\n", msg);
}

int srv_check_run(srv *s, const char *file)
{
    char err[1400];
    srv_log_quiet(); /* --check prints the configuration, not the engine's info lines */
    if (check_all(s, err, sizeof err) != 0) {
        fprintf(stderr, "pcached: %s\n", err);
        pc_cache_destroy(s->cache);
        return 2;
    }
    (void)srv_advise_data(&s->cfg, srv_db_url_sql(s->cfg.db_url), check_warn, NULL);
    printf("# pcached %s: configuration OK%s%s\n", SRV_VERSION, file ? " in " : "",
           file ? file : "");
    printf("# would run: %u worker(s) + 1 maintenance process, RESP on '%s' port %u%s%s, "
           "%u database(s)",
           s->cfg.workers, s->cfg.bind, s->cfg.port,
           s->cfg.unixsocket[0] ? " and unix socket " : "", s->cfg.unixsocket, s->ndbs);
    for (unsigned i = 0; i < s->ndbs; i++)
        printf("%s%u=%s", i ? ", " : " (", i, pc_coll_name(s->dbs[i]));
    printf(")\n# store: %s, db_mode %u", s->cfg.db_url[0] ? s->cfg.db_url : "none", s->cfg.db_mode);
    if (s->cfg.db_url[0] != '\0')
        printf(", persisted: %s, journal: %s",
               s->cfg.persist_collections[0] ? s->cfg.persist_collections : "none",
               s->cfg.journal[0] ? s->cfg.journal : "none");
    printf("\n");
    srv_config_print(&s->cfg, stdout);
    pc_cache_destroy(s->cache);
    return 0;
}
