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
 *   - the directories the start writes in (dirs.c): the runtime ones of
 *     unix_socket, unixsocket and pidfile exist and are writable, or are
 *     missing in a writable parent (the start makes them); log_file's and
 *     the LMDB store's exist and are writable, all for the user running
 *     the check (the unit's ExecStartPre, /etc/init.d/pcached: the
 *     service's user).
 * It then prints what would run and the effective configuration.
 */
#include "pcached.h"

#include <arpa/inet.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int srv_setup_cache(srv *s, int map_huge, char *err, size_t errlen);

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

/* db_url's store, when it is an LMDB one: its directory when it exists,
 * else the directory the start creates it in, writable by this user (the
 * form and the parent's existence are pc_persist_check's). */
static int check_store_dir(const char *url, char *err, size_t errlen)
{
    const char *path = url;
    if (strncmp(url, "lmdb://", 7) == 0)
        path = url + 7;
    else if (strstr(url, "://") != NULL)
        return 0; /* an SQL store: the database's business */
    char dir[1100];
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n == 0 || n >= sizeof dir)
        return 0; /* pc_persist_check has said it */
    memcpy(dir, path, n);
    dir[n] = '\0';
    struct stat st;
    if (stat(dir, &st) != 0) { /* missing: the start makes it in its parent */
        char *slash = strrchr(dir, '/');
        if (slash == NULL)
            snprintf(dir, sizeof dir, ".");
        else if (slash == dir)
            dir[1] = '\0'; /* a store right under / */
        else
            *slash = '\0';
    }
    char pfx[1200];
    snprintf(pfx, sizeof pfx, "db_url: %.1000s", url);
    return srv_dir_writable(pfx, dir, err, errlen);
}

/* Every directory the start writes in exists (or is a runtime one the
 * start makes) and is writable by the user running this check: the unit's
 * ExecStartPre and /etc/init.d/pcached run it as the service's user.
 * notes gets the runtime directories the start will make. */
static int check_dirs(srv *s, char *notes, size_t ncap, char *err, size_t errlen)
{
    const char *const keys[] = {"unix_socket", "unixsocket", "pidfile"};
    const char *const paths[] = {s->cfg.unix_socket, s->cfg.unixsocket, s->cfg.pidfile};
    notes[0] = '\0';
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char note[1200];
        if (srv_rundir_ready(keys[i], paths[i], 0, note, sizeof note, err, errlen) != 0)
            return -1;
        size_t used = strlen(notes);
        if (note[0] != '\0' && strstr(notes, note) == NULL) /* one line per directory */
            snprintf(notes + used, ncap - used, "# %s: %s\n", keys[i], note);
    }
    if (!s->cfg.syslog && srv_file_dir_writable("log_file", s->cfg.log_file, err, errlen) != 0)
        return -1;
    return 0;
}

static int check_all(srv *s, char *notes, size_t ncap, char *err, size_t errlen)
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
    if (check_dirs(s, notes, ncap, err, errlen) != 0)
        return -1;
    /* the collections and the databases map are checked by building them */
    if (srv_setup_cache(s, 0, err, errlen) != 0)
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
        if (check_store_dir(s->cfg.db_url, err, errlen) != 0)
            return -1;
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
    char err[1400], notes[4000];
    srv_log_quiet(); /* --check prints the configuration, not the engine's info lines */
    if (check_all(s, notes, sizeof notes, err, sizeof err) != 0) {
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
    struct passwd *pw = getpwuid(geteuid());
    printf("# directories checked for user %s (uid %u): run --check as the service's user\n%s",
           pw ? pw->pw_name : "?", (unsigned)geteuid(), notes);
    srv_config_print(&s->cfg, stdout);
    pc_cache_destroy(s->cache);
    return 0;
}
