/*
 * persist.c - the persistence policies the hosts use: which store
 * (db_url), when to load and save (db_mode, persist_collections, periodic
 * snapshots), the journal modes, and the perf_save / perf_load commands.
 *
 * The policy layer owns no format: saves and loads go through the snapshot
 * store (pc_store_*) and, together with the write-ahead journal, through
 * pc_journal_save / pc_journal_restore, the one order in which the two work
 * together. Host lifecycle:
 *   pc_persist_open      before fork: parse and check the policy, open the
 *                        store and the journal (new boot generation)
 *   pc_persist_startup   before fork: db_mode >= 1 restores every persist
 *                        collection (snapshot + journal), then installs the
 *                        journal hook so workers inherit it
 *   pc_persist_tick      in the maintenance process, about once a second:
 *                        journal fdatasync, periodic snapshots
 *   pc_persist_shutdown  on a graceful stop: db_mode 2 saves every persist
 *                        collection
 * Facts about the last save and load of each collection live in a small
 * shared area, so perf_stats in any process reports what the maintenance
 * process did.
 *
 * This file holds the lifecycle (open, the ticks, shutdown, close) and
 * the store handle of each process; the policy's parsing and checks are
 * in persist_config.c, saving and loading a collection in persist_coll.c,
 * the perf_save / perf_load / perf_stats commands in persist_cmd.c.
 *
 * Processes: a store handle never crosses fork() (an LMDB rule), while the
 * hosts open the policy before they fork and save from a child (pcached's
 * maintenance process, OpenSIPS's MI and timer processes). So every use of
 * the store goes through pp_store, which opens the store again, once, in a
 * process other than the one that opened it (the inherited handle is
 * dropped the way pc_store_close does it in a child: its environment is
 * left alone).
 *
 * An SQL db_url ("odbc://DSN", an ODBC connection string) is served by the
 * pc_persist_backend the host passes in cfg->sql_backend (the ODBC
 * exporter, odbc/): storage/ does not depend on it. Such a store has no
 * journal; saves and loads go to the backend, everything else is the same.
 */
#include "persist_int.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int pp_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* The errno that best names why a write to the store failed: ENOSPC when
 * its file system has (almost) no room left, else EIO. */
static int pp_disk_errno(const char *dir)
{
    struct statvfs v;
    if (statvfs(dir, &v) == 0 && (uint64_t)v.f_bavail * v.f_frsize < (1u << 20))
        return ENOSPC;
    return EIO;
}

unsigned pp_index(const pc_persist *p, const pc_coll *coll)
{
    for (unsigned i = 0; i < pc_coll_count(p->cache); i++)
        if (pc_coll_at(p->cache, i) == coll)
            return i;
    return 0;
}

void pp_result_of_save(pc_persist_result *out, const pc_store_save_result *r)
{
    memset(out, 0, sizeof *out);
    out->rows = r->saved;
    out->skipped_expired = r->skipped_expired;
    out->generation = r->generation;
    out->seconds = r->seconds;
    out->rate = r->rate;
}

void pp_result_of_load(pc_persist_result *out, const pc_store_load_result *r)
{
    memset(out, 0, sizeof *out);
    out->rows = r->loaded;
    out->skipped_expired = r->skipped_expired;
    out->failed = r->failed;
    out->generation = r->meta.generation;
    out->seconds = r->seconds;
    out->rate = r->rate;
}

/* A handle with the policy read from cfg and its shared area mapped; no
 * store, backend or journal opened yet. */
static int pp_new(pc_cache *c, const pc_persist_config *cfg, pc_persist **out, char *err,
                  size_t errlen)
{
    pc_persist *p = calloc(1, sizeof *p);
    if (p == NULL)
        return PC_EHEAP;
    p->cache = c;
    p->lock_fd = -1;
    p->db_mode = cfg->db_mode;
    p->period_s = cfg->snapshot_period_s;
    p->rewrite_percent = cfg->journal_rewrite_percent;
    p->rewrite_min_bytes = (uint64_t)cfg->journal_rewrite_min_mb << 20;
    p->journal_max_bytes = (uint64_t)cfg->journal_max_mb << 20;
    p->log = cfg->log;
    p->shm = mmap(NULL, PC_MAX_COLLECTIONS * sizeof *p->shm, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p->shm == MAP_FAILED) {
        free(p);
        return pp_fail(err, errlen, PC_ESYS, "cannot map the persistence state");
    }
    int rc = pc_sync_open(p, cfg, err, errlen);
    if (rc == 0)
        rc = pp_policy_lists(p, cfg, err, errlen);
    p->sql_backend = cfg->sql_backend;
    if (rc != 0) {
        pc_persist_close(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* db_url names an SQL store: the host's backend opens it (no journal). */
static int pp_open_sql(pc_persist *p, const pc_persist_config *cfg, char *err, size_t errlen)
{
    p->backend = cfg->sql_backend;
    if ((p->db_url = strdup(cfg->db_url)) == NULL) { /* for pc_sync_reopen */
        p->backend = NULL;
        return pp_fail(err, errlen, PC_EHEAP, "out of memory");
    }
    int rc = p->backend->open(cfg->db_url, &cfg->log, &p->bh, err, errlen);
    if (rc != 0)
        p->backend = NULL;
    return rc;
}

/* Records this start's boot generation in the store into *gen. A full disk
 * must not stop the start: load what there is and serve it read-only (the
 * journal held failing) until the boot generation can be committed
 * (pp_gen_retry). The next one is gen + 1 whoever commits it: the store
 * lock excludes any other writer of the store. */
static int pp_boot_gen(pc_persist *p, const char *url, uint64_t *gen, char *err, size_t errlen)
{
    int rc = pc_store_next_boot_gen(p->store, gen);
    if (rc == 0)
        return 0;
    uint64_t cur;
    if (rc != PC_EIO || pc_store_boot_gen(p->store, &cur) != 0)
        return pp_fail(err, errlen, rc, "db_url '%.200s': cannot record a new boot generation: %s",
                       url, pc_store_strerror(rc));
    *gen = cur + 1;
    p->gen_pending = *gen;
    p->gen_err = pp_disk_errno(url);
    pc_log_emit(&p->log, PC_LOG_ERR,
                "pcache: db_url '%.200s': cannot record a new boot generation (%s): "
                "starting read-only, writes are refused until it can be recorded",
                url, strerror(p->gen_err));
    return 0;
}

/* db_url names an LMDB store: lock it, check it, open it, record the boot
 * generation, open the journal beside it. */
static int pp_open_lmdb(pc_persist *p, const pc_persist_config *cfg, char *err, size_t errlen)
{
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    sc.log = cfg->log;
    if ((p->db_url = strdup(cfg->db_url)) == NULL)
        return pp_fail(err, errlen, PC_EHEAP, "out of memory");
    int rc;
    if ((rc = pp_check_path(cfg, err, errlen)) != 0 || /* as pc_persist_check says it */
        (rc = pp_lock_store(p, cfg->db_url, err, errlen)) != 0 ||
        (rc = pp_check_store(cfg->db_url, &sc, err, errlen)) != 0 ||
        (rc = pc_store_open_checked(cfg->db_url, &sc, &p->store, err, errlen)) != 0)
        return rc;
    p->store_pid = getpid();
    uint64_t gen;
    if ((rc = pp_boot_gen(p, cfg->db_url, &gen, err, errlen)) != 0)
        return rc;
    pc_journal_config jc;
    pc_journal_config_init(&jc);
    jc.dir = pc_store_path(p->store);
    jc.boot_gen = gen;
    jc.log = cfg->log;
    if ((rc = pc_journal_open(p->cache, &jc, &p->journal)) != 0)
        return pp_fail(err, errlen, rc, "cannot open the journal in '%s': %s", jc.dir,
                       pc_store_strerror(rc));
    return 0;
}

/* check_only (pc_persist_check): every check below up to the first one
 * that opens the store or the SQL backend, then the store's path
 * (pp_check_path); nothing is created and *out is not written. */
static int pp_open(pc_cache *c, const pc_persist_config *cfg, int check_only, pc_persist **out,
                   char *err, size_t errlen)
{
    if (c == NULL || cfg == NULL || (out == NULL && !check_only))
        return PC_EINVAL;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (cfg->db_mode < 0 || cfg->db_mode > 2)
        return pp_fail(err, errlen, PC_ECONFIG,
                       "db_mode %d: expected 0 (on demand), 1 (load "
                       "at startup) or 2 (load at startup, save at shutdown)",
                       cfg->db_mode);
    if (cfg->db_url == NULL || cfg->db_url[0] == '\0')
        return pp_fail(err, errlen, PC_ECONFIG,
                       "no db_url: persistence needs a store "
                       "(lmdb:///path)");
    pc_persist *p = NULL;
    int rc = pp_store_path(cfg->db_url, cfg->sql_backend, err, errlen);
    if (rc != 0 || (rc = pp_new(c, cfg, &p, err, errlen)) != 0)
        return rc;
    bool sql = cfg->sql_backend != NULL && cfg->sql_backend->accepts(cfg->db_url);
    if (sql && cfg->journal != NULL && cfg->journal[0] != '\0')
        rc = pp_fail(err, errlen, PC_ECONFIG,
                     "journal: the write-ahead journal needs an lmdb:// store; "
                     "db_url is an %s store",
                     cfg->sql_backend->name);
    else if (check_only) /* the scratch handle is closed below; rc is the verdict */
        rc = sql ? 0 : pp_check_path(cfg, err, errlen);
    else
        rc = sql ? pp_open_sql(p, cfg, err, errlen) : pp_open_lmdb(p, cfg, err, errlen);
    if (rc == 0 && !check_only)
        rc = pp_root_init(p, cfg, err, errlen);
    if (rc != 0 || check_only) {
        pc_persist_close(p);
        return rc;
    }
    *out = p;
    return 0;
}

int pc_persist_open(pc_cache *c, const pc_persist_config *cfg, pc_persist **out, char *err,
                    size_t errlen)
{
    return pp_open(c, cfg, 0, out, err, errlen);
}

int pc_persist_check(pc_cache *c, const pc_persist_config *cfg, char *err, size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    return pp_open(c, cfg, 1, NULL, err, errlen);
}

int pc_persist_journal_health(const pc_persist *p, pc_journal_health *out)
{
    if (p == NULL || out == NULL)
        return PC_EINVAL;
    if (p->journal == NULL) {
        memset(out, 0, sizeof *out);
        return 0;
    }
    return pc_journal_health_get(p->journal, out);
}

void pc_persist_close(pc_persist *p)
{
    if (p == NULL)
        return;
    pc_journal_close(p->journal);
    pc_store_close(p->store);
    pc_store_close(p->inherited); /* in a child: frees the handle, leaves the env */
    if (p->backend != NULL)
        p->backend->close(p->bh);
    if (p->shm != NULL && p->shm != MAP_FAILED)
        munmap(p->shm, PC_MAX_COLLECTIONS * sizeof *p->shm);
    pc_sync_close(p);
    if (p->lock_fd >= 0)
        close(p->lock_fd); /* the lock goes with the last process that has it open */
    free(p->db_url);
    free(p->store_root);
    free(p);
}

/* The store handle of this process: the one opened by pc_persist_open in
 * the process that opened it, a new one (opened once) in a forked child. */
int pp_store(pc_persist *p, pc_store **out)
{
    if (p->store != NULL && p->store_pid == getpid()) {
        *out = p->store;
        return 0;
    }
    /* The parent's handle is set aside, never used, and kept referenced:
     * its environment must not be closed here (that would drop the parent's
     * locks on the store) and must stay reachable, or LeakSanitizer reports
     * the copy this process inherited when it exits. A second reopen (a
     * grandchild) drops the intermediate handle as pc_store_close does in a
     * child. */
    if (p->inherited == NULL)
        p->inherited = p->store;
    else
        pc_store_close(p->store);
    p->store = NULL;
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.log = p->log;
    char err[256];
    int rc = pc_store_open_checked(p->db_url, &sc, &p->store, err, sizeof err);
    if (rc != 0) {
        pc_log_emit(&p->log, PC_LOG_ERR, "pcache: cannot open the store in process %d: %s",
                    (int)getpid(), err);
        return rc;
    }
    p->store_pid = getpid();
    *out = p->store;
    return 0;
}

/* pp_store opens the store in a forked process on first use; a host that
 * wants to learn of a failure at fork time (pcached's maintenance process)
 * calls this right after the fork. An SQL backend reconnects in a child by
 * itself. */
int pc_persist_after_fork(pc_persist *p, char *err, size_t errlen)
{
    if (p == NULL)
        return PC_EINVAL;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (p->backend != NULL)
        return 0;
    pc_store *s = NULL;
    int rc = pp_store(p, &s);
    if (rc != 0)
        return pp_fail(err, errlen, rc, "cannot open the store %.200s in process %d: %s", p->db_url,
                       (int)getpid(), pc_store_strerror(rc));
    return 0;
}

int pc_persist_last_stop_get(const pc_persist *p, pc_persist_last_stop *out)
{
    if (p == NULL || out == NULL)
        return PC_EINVAL;
    *out = p->restored;
    if (p->journal != NULL)
        (void)pc_journal_last_stop_get(p->journal, &out->journal);
    return 0;
}

int pc_persist_startup(pc_persist *p)
{
    if (p == NULL)
        return PC_EINVAL;
    int first = 0;
    memset(&p->restored, 0, sizeof p->restored);
    p->starting = true; /* counted in p->restored; perf_load's restores are not */
    if (p->db_mode >= 1) {
        for (unsigned i = 0; i < pc_coll_count(p->cache); i++) {
            if (!p->persist[i])
                continue;
            int rc = pp_load_coll(p, pc_coll_at(p->cache, i), NULL);
            if (rc != 0 && first == 0)
                first = rc;
        }
    }
    p->starting = false;
    /* journaling starts only now, so the restore is not journaled again */
    int rc = p->journal != NULL ? pc_journal_install(p->journal) : 0; /* none with a backend */
    /* after the restore (which writes the table): writes refused from here */
    if (p->journal != NULL && p->gen_pending != 0)
        pc_journal_hold(p->journal, p->gen_err);
    p->next_periodic_ms = pc_mono_ms() + (int64_t)p->period_s * 1000;
    return first != 0 ? first : rc;
}

/* The boot generation the start could not commit: committed as soon as
 * the disk takes it, then the journal is released (writes resume after
 * its next probe). Whether it is still pending is the journal's hold,
 * shared, so a replacement maintenance process does not commit twice. */
static void pp_gen_retry(pc_persist *p)
{
    pc_journal_health h;
    if (p->gen_pending == 0 || p->journal == NULL || pc_journal_health_get(p->journal, &h) != 0 ||
        !h.held)
        return;
    pc_store *s;
    uint64_t gen;
    if (pp_store(p, &s) != 0 || pc_store_next_boot_gen(s, &gen) != 0)
        return;
    if (gen != p->gen_pending) { /* cannot happen under the store lock */
        pc_log_emit(&p->log, PC_LOG_ERR,
                    "pcache: recorded boot generation %llu, the journal uses %llu: writes stay "
                    "refused until a restart",
                    (unsigned long long)gen, (unsigned long long)p->gen_pending);
        return;
    }
    pc_log_emit(&p->log, PC_LOG_WARN, "pcache: boot generation %llu recorded",
                (unsigned long long)gen);
    pc_journal_release(p->journal);
}

int pc_persist_tick(pc_persist *p)
{
    if (p == NULL)
        return PC_EINVAL;
    pp_gen_retry(p);
    int rc = p->journal != NULL ? pc_journal_sync_all(p->journal) : 0;
    int src = pc_persist_sync_tick(p);
    if (rc == 0)
        rc = src;
    if (p->period_s > 0 && pc_mono_ms() >= p->next_periodic_ms) {
        for (unsigned i = 0; i < pc_coll_count(p->cache); i++)
            if (p->persist[i]) {
                int r = pc_persist_save_coll(p, pc_coll_at(p->cache, i), NULL);
                if (r != 0 && rc == 0)
                    rc = r;
            }
        p->next_periodic_ms = pc_mono_ms() + (int64_t)p->period_s * 1000;
    }
    for (unsigned i = 0; p->journal != NULL && i < pc_coll_count(p->cache); i++) {
        if (!p->persist[i])
            continue;
        int r = pp_bound_check(p, i);
        if (r != 0 && rc == 0)
            rc = r;
    }
    return rc;
}

int pc_persist_worker_tick(pc_persist *p)
{
    if (p == NULL)
        return PC_EINVAL;
    return p->journal != NULL ? pc_journal_tick(p->journal, 0) : 0;
}

int pc_persist_defer_sync(pc_persist *p, int on)
{
    if (p == NULL)
        return PC_EINVAL;
    return p->journal != NULL ? pc_journal_defer_sync(p->journal, on) : 0;
}

uint64_t pc_persist_commit_pending(const pc_persist *p)
{
    return p != NULL && p->journal != NULL ? pc_journal_commit_pending(p->journal) : 0;
}

int pc_persist_commit(pc_persist *p)
{
    if (p == NULL)
        return PC_EINVAL;
    return p->journal != NULL ? pc_journal_commit(p->journal) : 0;
}

int pc_persist_commit_start(pc_persist *p, pc_journal_batch *b)
{
    if (p == NULL || b == NULL)
        return PC_EINVAL;
    return p->journal != NULL ? pc_journal_commit_start(p->journal, b) : 0;
}

int pc_persist_commit_finish(pc_persist *p, pc_journal_batch *b)
{
    if (p == NULL || b == NULL)
        return PC_EINVAL;
    return p->journal != NULL ? pc_journal_commit_finish(p->journal, b) : 0;
}

int pc_persist_shutdown(pc_persist *p)
{
    return pc_persist_shutdown_as(p, -1);
}

int pc_persist_shutdown_as(pc_persist *p, int save)
{
    if (p == NULL)
        return PC_EINVAL;
    int first = p->journal != NULL ? pc_journal_flush(p->journal, 1) : 0;
    bool any = false;
    for (unsigned i = 0; i < pc_coll_count(p->cache); i++)
        any |= p->persist[i];
    if (save < 0 ? p->db_mode == 2 : save > 0) {
        for (unsigned i = 0; i < pc_coll_count(p->cache); i++) {
            if (!p->persist[i] && any)
                continue;
            int rc = pc_persist_save_coll(p, pc_coll_at(p->cache, i), NULL);
            if (rc != 0 && first == 0)
                first = rc;
        }
    }
    return first;
}

pc_store *pc_persist_store(const pc_persist *p)
{
    pc_store *s = NULL;
    if (p == NULL || p->backend != NULL) /* an SQL store has no pc_store */
        return NULL;
    return pp_store((pc_persist *)p, &s) != 0 ? NULL : s;
}

int pc_persist_is_persisted(const pc_persist *p, const pc_coll *coll)
{
    return p != NULL && coll != NULL && p->persist[pp_index(p, coll)];
}
