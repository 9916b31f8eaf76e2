/*
 * advice.c - what the start tells the operator beyond "it works": every
 * configuration that will lose data at a restart (said at start and by
 * --check, a WARN line naming the key to set), how the previous run of the
 * store ended and what this start recovered from it, and, for a permission
 * error, the user pcached runs as and the fix.
 *
 * It only reads the configuration and the facts the persistence layer
 * reports; it decides nothing the start does.
 */
#include "pcached.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- configurations that lose data ------------------------------------------- */

struct names {
    unsigned n;
    char name[PC_MAX_COLLECTIONS][PC_COLL_NAME_MAX + 1];
    int mode[PC_MAX_COLLECTIONS]; /* journal: 1 = a mode other than off */
};

static int add_name(void *ctx, const char *name, size_t len, const char *val, size_t vlen)
{
    struct names *l = ctx;
    if (l->n == PC_MAX_COLLECTIONS || len == 0 || len > PC_COLL_NAME_MAX)
        return 0;
    snprintf(l->name[l->n], sizeof l->name[l->n], "%.*s", (int)len, name);
    l->mode[l->n] = val != NULL && !(vlen == 3 && strncmp(val, "off", 3) == 0);
    l->n++;
    return 0;
}

static int in_list(const struct names *l, const char *name, int need_mode)
{
    for (unsigned i = 0; i < l->n; i++)
        if (strcmp(l->name[i], name) == 0 && (!need_mode || l->mode[i]))
            return 1;
    return 0;
}

unsigned srv_advise_data(const srv_config *cfg, int sql, srv_advice_fn emit, void *ctx)
{
    char msg[600];
    unsigned n = 0;
    if (cfg->db_url[0] == '\0') {
        emit(ctx, "no store (db_url is empty): every key is lost when pcached stops; set "
                  "db_url (or Redis's dir) to keep them");
        return 1;
    }
    if (cfg->db_mode == 0) {
        emit(ctx, "db_mode 0: the store is neither loaded at start nor saved at shutdown, so "
                  "the keys are lost at a restart (saved only on request); set db_mode = 2");
        return 1;
    }
    struct names colls = {0}, persisted = {0}, journaled = {0};
    (void)pc_list_items(cfg->collections[0] ? cfg->collections : "default", add_name, &colls);
    (void)pc_list_items(cfg->persist_collections, add_name, &persisted);
    (void)pc_list_items(cfg->journal, add_name, &journaled);
    for (unsigned i = 0; i < colls.n; i++) {
        const char *c = colls.name[i];
        if (!in_list(&persisted, c, 0)) {
            snprintf(msg, sizeof msg,
                     "collection '%s' is not in persist_collections: its keys are lost at a "
                     "restart; add it to persist_collections",
                     c);
        } else if (in_list(&journaled, c, 1)) {
            continue;
        } else if (cfg->db_mode == 1) {
            snprintf(msg, sizeof msg,
                     "collection '%s' has no journal and db_mode 1 saves nothing at shutdown: "
                     "its writes since the last save are lost at every restart; set db_mode = 2%s",
                     c, sql ? "" : " or journal = <collection>=everysec");
        } else if (sql) {
            snprintf(msg, sizeof msg,
                     "collection '%s' has no journal (an SQL store has none): a crash (kill -9, "
                     "OOM, power loss) loses its writes since the last save; set "
                     "snapshot_period_s to bound them",
                     c);
        } else {
            snprintf(msg, sizeof msg,
                     "collection '%s' has no journal: a crash (kill -9, OOM, power loss) loses "
                     "its writes since the last save; set journal = %s=everysec",
                     c, c);
        }
        emit(ctx, msg);
        n++;
    }
    return n;
}

/* ---- the previous run of the store ---------------------------------------------- */

void srv_advise_last_stop(const srv *s)
{
    pc_persist_last_stop ls;
    if (s->persist == NULL || pc_persist_last_stop_get(s->persist, &ls) != 0 || !ls.journal.unclean)
        return;
    char got[400];
    if (s->cfg.db_mode == 0)
        snprintf(got, sizeof got, "nothing was loaded (db_mode 0): PERF.LOAD restores it");
    else
        snprintf(got, sizeof got,
                 "this start restored %u collection(s): %llu entries from snapshots and %llu "
                 "journal records (%llu operations applied)",
                 ls.collections, (unsigned long long)ls.snapshot_entries,
                 (unsigned long long)ls.journal_records, (unsigned long long)ls.journal_applied);
    srv_log(PC_LOG_WARN,
            "the previous run of store %s (boot generation %llu) did not stop cleanly (killed, "
            "crashed or the machine lost power): %s%llu acknowledged record(s) it left in "
            "memory were written to the journal; %s",
            s->cfg.db_url, (unsigned long long)ls.journal.boot_gen,
            ls.journal.machine_restarted
                ? "the machine restarted since, so its journal rings were not read (everysec "
                  "writes of its last second may be lost); "
                : "",
            (unsigned long long)ls.journal.records, got);
}

/* ---- permission errors ------------------------------------------------------------ */

void srv_perm_hint(const char *key, const char *path, char *buf, size_t cap)
{
    /* the deepest existing directory on the way to path: where the
     * missing permission is */
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", path);
    struct stat st;
    while (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        char *slash = strrchr(dir, '/');
        if (slash == NULL) {
            snprintf(dir, sizeof dir, ".");
            break;
        }
        if (slash == dir) {
            dir[1] = '\0';
            break;
        }
        *slash = '\0';
    }
    if (stat(dir, &st) != 0)
        memset(&st, 0, sizeof st);
    uid_t uid = geteuid();
    const struct passwd *me = getpwuid(uid);
    char user[64], owner[64], group[64];
    snprintf(user, sizeof user, "%s", me != NULL ? me->pw_name : "?");
    const struct passwd *ow = getpwuid(st.st_uid);
    const struct group *gr = getgrgid(st.st_gid);
    snprintf(owner, sizeof owner, "%s", ow != NULL ? ow->pw_name : "?");
    snprintf(group, sizeof group, "%s", gr != NULL ? gr->gr_name : "?");
    snprintf(buf, cap,
             "pcached runs as user %s (uid %u), and %s is owned by %s:%s with mode %04o; give "
             "it to that user (chown %s %s), run pcached as %s, or set %.*s to a path %s can "
             "write",
             user, (unsigned)uid, dir, owner, group, (unsigned)(st.st_mode & 07777), user, dir,
             owner, (int)strcspn(key, ": "), key, user);
}

int srv_db_url_sql(const char *db_url)
{
    const pc_persist_backend *be = srv_sql_backend();
    return db_url[0] != '\0' && be != NULL && be->accepts(db_url);
}

int srv_perm_errno(int e)
{
    return e == EACCES || e == EPERM;
}
