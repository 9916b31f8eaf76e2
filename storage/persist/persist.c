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

void pc_persist_config_init(pc_persist_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->log.level = PC_LOG_INFO;
    cfg->journal_rewrite_percent = 100;
    cfg->journal_rewrite_min_mb = 64;
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

/* Calls fn(ctx, name, len, value, vlen) for each item of "a;b=c" or "a,b"
 * (both separators accepted; spaces trimmed). */
typedef int (*pp_item_fn)(void *ctx, const char *name, size_t len, const char *val, size_t vlen,
                          char *err, size_t errlen);
static int pp_items(const char *list, pp_item_fn fn, void *ctx, char *err, size_t errlen)
{
    const char *s = list;
    while (s != NULL && *s != '\0') {
        size_t n = strcspn(s, ",;");
        const char *a = s, *e = s + n;
        while (a < e && (*a == ' ' || *a == '\t'))
            a++;
        while (e > a && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (a < e) {
            const char *eq = memchr(a, '=', (size_t)(e - a));
            const char *ne = eq != NULL ? eq : e;
            while (ne > a && ne[-1] == ' ')
                ne--;
            const char *v = eq != NULL ? eq + 1 : NULL;
            while (v != NULL && v < e && *v == ' ')
                v++;
            int rc = fn(ctx, a, (size_t)(ne - a), v, v != NULL ? (size_t)(e - v) : 0, err, errlen);
            if (rc != 0)
                return rc;
        }
        s = s[n] == '\0' ? s + n : s + n + 1;
    }
    return 0;
}

static int pp_persist_item(void *ctx, const char *name, size_t len, const char *val, size_t vlen,
                           char *err, size_t errlen)
{
    pc_persist *p = ctx;
    (void)vlen;
    pc_coll *coll;
    if (val != NULL)
        return pp_fail(err, errlen, PC_ECONFIG,
                       "persist_collections: '%.*s=...': expected a "
                       "list of collection names",
                       (int)len, name);
    if (pc_coll_find(p->cache, name, len, &coll) != 0)
        return pp_fail(err, errlen, PC_ENOCOLL,
                       "persist_collections names '%.*s', which is not "
                       "a declared collection",
                       (int)len, name);
    p->persist[pp_index(p, coll)] = true;
    return 0;
}

static int pp_journal_item(void *ctx, const char *name, size_t len, const char *val, size_t vlen,
                           char *err, size_t errlen)
{
    pc_persist *p = ctx;
    char mode[16];
    unsigned m;
    if (val == NULL || vlen == 0 || vlen >= sizeof mode)
        return pp_fail(err, errlen, PC_ECONFIG,
                       "journal: '%.*s' needs a mode: name=off, "
                       "name=everysec or name=always",
                       (int)len, name);
    memcpy(mode, val, vlen);
    mode[vlen] = '\0';
    if (pc_journal_mode_parse(mode, &m) != 0)
        return pp_fail(err, errlen, PC_ECONFIG,
                       "journal: '%.*s=%s': the mode must be off, "
                       "everysec or always",
                       (int)len, name, mode);
    pc_coll *coll;
    if (pc_coll_find(p->cache, name, len, &coll) != 0)
        return pp_fail(err, errlen, PC_ENOCOLL,
                       "journal names '%.*s', which is not a declared "
                       "collection",
                       (int)len, name);
    pc_journal_set_mode(coll, m);
    return 0;
}

/* db_url: "lmdb:///abs/path" or a plain path; an SQL URL only through the
 * backend (the URL is not echoed: a connection string may hold a
 * password). */
static int pp_store_path(const char *url, const pc_persist_backend *be, char *err, size_t errlen)
{
    if (be != NULL && be->accepts(url))
        return 0;
    if (strncmp(url, "odbc:", 5) == 0)
        return pp_fail(err, errlen, PC_EURL,
                       "db_url odbc:...: the odbc:// store is not "
                       "available in this build (the host did not link the ODBC exporter)");
    if (strncmp(url, "lmdb:", 5) == 0 && strncmp(url, "lmdb:///", 8) != 0)
        return pp_fail(err, errlen, PC_ECONFIG,
                       "db_url '%.200s': expected lmdb:///absolute/path (an lmdb:// URL takes "
                       "an absolute path, three slashes; a relative store is a plain path)",
                       url);
    const char *colon = strstr(url, "://");
    if (colon != NULL && strncmp(url, "lmdb://", 7) != 0) {
        /* only the scheme is shown: the rest may carry user:password@ */
        int slen = (int)(colon - url) < 32 ? (int)(colon - url) : 32;
        return pp_fail(err, errlen, PC_EURL,
                       "db_url with scheme '%.*s': unknown scheme (expected lmdb:///path%s)", slen,
                       url,
                       be != NULL ? ", odbc://DSN or an ODBC connection string DSN=... / DRIVER=..."
                                  : "; odbc:// needs a host that links the ODBC exporter");
    }
    return 0;
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

/* For pc_persist_check: what pc_store_open would find at db_url's path
 * short of creating it. The path, when it exists, is a directory; when it
 * does not, its parent is an existing directory (the store creates its own
 * directory, never its parents: systemd's StateDirectory= makes
 * /var/lib/pcache). Every component is walked, so "a store under a regular
 * file" names that file. store_root, when given, resolves. */
static int pp_check_path(const pc_persist_config *cfg, char *err, size_t errlen)
{
    const char *path = cfg->db_url;
    if (strncmp(path, "lmdb://", 7) == 0)
        path += 7;
    char buf[PATH_MAX];
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n == 0 || n >= sizeof buf)
        return pp_fail(err, errlen, PC_ECONFIG, "db_url '%.200s': empty or too long a path",
                       cfg->db_url);
    memcpy(buf, path, n);
    buf[n] = '\0';
    struct stat st;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && buf[i] != '/')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        int r = stat(buf, &st);
        int e = errno;
        bool last = i == n;
        if (r != 0 && e == ENOENT && last) {
            buf[i] = c;
            break; /* the store's own directory: created by the start */
        }
        if (r != 0) {
            int rc = pp_fail(err, errlen, PC_EIO, /* pc_store_open's code for it */
                             "db_url '%.200s': %s: %s%s", cfg->db_url, buf, strerror(e),
                             e == ENOENT ? " (the store's parent directory must exist)" : "");
            return rc;
        }
        if (!S_ISDIR(st.st_mode))
            return pp_fail(err, errlen, PC_ESTORE, /* pc_store_open's code for it */
                           "db_url '%.200s': %s is not a directory (a store is a directory, "
                           "in a directory)",
                           cfg->db_url, buf);
        buf[i] = c;
    }
    if (cfg->store_root != NULL && cfg->store_root[0] != '\0') {
        char *r = realpath(cfg->store_root, NULL);
        if (r == NULL)
            return pp_fail(err, errlen, PC_ECONFIG, "store_root '%.200s': %s", cfg->store_root,
                           strerror(errno));
        free(r);
    }
    return 0;
}

/* Before the first write (the boot generation, then loads that prune and
 * saves that replace): the whole store is checked, LMDB's pages and every
 * block's checksums (pc_store_check, in a forked child). A damaged store
 * is refused, with what is damaged and what to do: a start that loaded
 * part of it would serve the rest as if it were all, and the next save
 * would write the loss over what is left. On success sc gains
 * PC_STORE_NOCHECK (the open need not walk it again). */
static int pp_check_store(const char *url, pc_store_config *sc, char *err, size_t errlen)
{
    pc_store_problem *pr = NULL;
    size_t n = 0;
    char why[600];
    int rc = pc_store_check(url, PC_STORE_CHECK_DEEP, &pr, &n, why, sizeof why);
    if (rc == PC_ESTORE)
        return 0; /* no data.mdb: a new store, pc_store_open decides */
    if (rc != 0)
        return pp_fail(err, errlen, rc, "db_url '%.200s': %s", url, why);
    if (n == 0) {
        sc->flags |= PC_STORE_NOCHECK;
        return 0;
    }
    /* the words of pcache-snapshot's verify and info on the same store */
    rc = pc_store_verdict(url, pr, n, PC_STORE_CHECK_DEEP, why, sizeof why);
    pc_store_problems_free(pr, n);
    return pp_fail(err, errlen, rc, "db_url '%.200s': %s. Nothing was read or written", url, why);
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
    int rc = pp_store_path(cfg->db_url, cfg->sql_backend, err, errlen);
    if (rc != 0)
        return rc;
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
    if ((rc = pc_sync_open(p, cfg, err, errlen)) != 0)
        goto fail;
    if ((rc = pp_items(cfg->persist_collections, pp_persist_item, p, err, errlen)) != 0 ||
        (rc = pp_items(cfg->journal, pp_journal_item, p, err, errlen)) != 0)
        goto fail;
    p->sql_backend = cfg->sql_backend;
    bool sql = cfg->sql_backend != NULL && cfg->sql_backend->accepts(cfg->db_url);
    if (sql && cfg->journal != NULL && cfg->journal[0] != '\0') {
        rc = pp_fail(err, errlen, PC_ECONFIG,
                     "journal: the write-ahead journal needs an lmdb:// store; "
                     "db_url is an %s store",
                     cfg->sql_backend->name);
        goto fail;
    }
    if (check_only) {
        rc = sql ? 0 : pp_check_path(cfg, err, errlen);
        goto fail; /* closes the scratch handle; rc is the verdict */
    }
    if (sql) {
        p->backend = cfg->sql_backend;
        if ((p->db_url = strdup(cfg->db_url)) == NULL) { /* for pc_sync_reopen */
            p->backend = NULL;
            rc = pp_fail(err, errlen, PC_EHEAP, "out of memory");
            goto fail;
        }
        rc = p->backend->open(cfg->db_url, &cfg->log, &p->bh, err, errlen);
        if (rc != 0) {
            p->backend = NULL;
            goto fail;
        }
        if ((rc = pp_root_init(p, cfg, err, errlen)) != 0)
            goto fail;
        *out = p;
        return 0;
    }
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    sc.log = cfg->log;
    if ((p->db_url = strdup(cfg->db_url)) == NULL) {
        rc = pp_fail(err, errlen, PC_EHEAP, "out of memory");
        goto fail;
    }
    if ((rc = pp_check_path(cfg, err, errlen)) != 0 || /* as pc_persist_check says it */
        (rc = pp_lock_store(p, cfg->db_url, err, errlen)) != 0 ||
        (rc = pp_check_store(cfg->db_url, &sc, err, errlen)) != 0 ||
        (rc = pc_store_open(cfg->db_url, &sc, &p->store, err, errlen)) != 0)
        goto fail;
    p->store_pid = getpid();
    uint64_t gen;
    if ((rc = pc_store_next_boot_gen(p->store, &gen)) != 0) {
        /* a full disk must not stop the start: load what there is and
         * serve it read-only (the journal held failing) until the boot
         * generation can be committed (pp_gen_retry). The next one is
         * gen + 1 whoever commits it: the store lock excludes any other
         * writer of the store. */
        uint64_t cur;
        if (rc != PC_EIO || pc_store_boot_gen(p->store, &cur) != 0) {
            pp_fail(err, errlen, rc, "db_url '%.200s': cannot record a new boot generation: %s",
                    cfg->db_url, pc_store_strerror(rc));
            goto fail;
        }
        gen = cur + 1;
        p->gen_pending = gen;
        p->gen_err = pp_disk_errno(cfg->db_url);
        rc = 0;
        pc_log_emit(&p->log, PC_LOG_ERR,
                    "pcache: db_url '%.200s': cannot record a new boot generation (%s): "
                    "starting read-only, writes are refused until it can be recorded",
                    cfg->db_url, strerror(p->gen_err));
    }
    pc_journal_config jc;
    pc_journal_config_init(&jc);
    jc.dir = pc_store_path(p->store);
    jc.boot_gen = gen;
    jc.log = cfg->log;
    if ((rc = pc_journal_open(c, &jc, &p->journal)) != 0) {
        pp_fail(err, errlen, rc, "cannot open the journal in '%s': %s", jc.dir,
                pc_store_strerror(rc));
        goto fail;
    }
    if ((rc = pp_root_init(p, cfg, err, errlen)) != 0)
        goto fail;
    *out = p;
    return 0;
fail:
    pc_persist_close(p);
    return rc;
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
static int pp_store(pc_persist *p, pc_store **out)
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
    int rc = pc_store_open(p->db_url, &sc, &p->store, err, sizeof err);
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

int pc_persist_save_coll(pc_persist *p, pc_coll *coll, pc_persist_result *res)
{
    pc_persist_result r;
    memset(&r, 0, sizeof r);
    int rc;
    if (p->backend != NULL) {
        pc_sync_reopen_if_lost(p);
        /* with sync support the generation row also names its maker */
        rc = p->backend->save_as != NULL ? p->backend->save_as(p->bh, coll, p->node_id, &r)
                                         : p->backend->save(p->bh, coll, &r);
        if (rc == 0)
            pc_sync_saved(p, coll, r.generation);
        else
            pc_sync_note_failure(p, rc);
    } else {
        pc_store *store = NULL;
        pc_store_save_result sr;
        memset(&sr, 0, sizeof sr);
        rc = pp_store(p, &store);
        if (rc == 0)
            rc = pc_journal_save(p->journal, store, coll, &sr, NULL);
        pp_result_of_save(&r, &sr);
    }
    struct pc_persist_coll_shm *st = &p->shm[pp_index(p, coll)];
    atomic_store(&st->last_save_rc, rc);
    if (rc == 0) {
        atomic_store(&st->last_save_ms, pc_wall_ms());
        atomic_store(&st->last_save_count, r.rows);
        atomic_store(&st->last_save_us, (uint64_t)(r.seconds * 1e6));
        atomic_store(&st->generation, r.generation);
        pc_log_emit(&p->log, PC_LOG_INFO,
                    "pcache: saved %s: %llu entries in %.3f s (%.0f/s), generation "
                    "%llu",
                    pc_coll_name(coll), (unsigned long long)r.rows, r.seconds, r.rate,
                    (unsigned long long)r.generation);
    } else {
        pc_log_emit(&p->log, PC_LOG_ERR,
                    "pcache: save of %s failed: %s (the previous snapshot stands)",
                    pc_coll_name(coll), pc_store_strerror(rc));
    }
    if (res != NULL)
        *res = r;
    return rc;
}

static int pc_persist_load_coll(pc_persist *p, pc_coll *coll, pc_persist_result *res)
{
    pc_persist_result r;
    memset(&r, 0, sizeof r);
    bool snapshot = false; /* a snapshot of coll was loaded */
    const double t0 = pc_mono_sec();
    int rc;
    if (p->backend != NULL) {
        pc_sync_reopen_if_lost(p);
        rc = p->backend->load(p->bh, coll, &r);
        pc_sync_note_failure(p, rc);
        snapshot = rc == 0;
        if (rc == PC_ENOTFOUND) /* never saved: nothing to restore, as with LMDB */
            rc = 0;
    } else {
        pc_journal_restore_result jr;
        memset(&jr, 0, sizeof jr);
        pc_store *store = NULL;
        rc = pp_store(p, &store);
        if (rc == 0)
            rc = pc_journal_restore(p->journal, store, coll, &jr);
        snapshot = jr.snapshot;
        pp_result_of_load(&r, &jr.load);
        const pc_journal_replay_stats *rs = &jr.replay;
        if (p->starting) {
            p->restored.journal_records += rs->records;
            p->restored.journal_applied += rs->set + rs->counter + rs->del + rs->expire;
        }
    }
    if (rc == 0 && p->starting) {
        p->restored.collections++;
        p->restored.snapshot_entries += snapshot ? r.rows : 0;
    }
    double secs = pc_mono_sec() - t0;
    struct pc_persist_coll_shm *st = &p->shm[pp_index(p, coll)];
    atomic_store(&st->last_load_rc, rc);
    if (rc == 0) {
        atomic_store(&st->last_load_ms, pc_wall_ms());
        atomic_store(&st->last_load_count, r.rows);
        atomic_store(&st->last_load_us, (uint64_t)(secs * 1e6));
        if (snapshot)
            atomic_store(&st->generation, r.generation);
        pc_log_emit(
            &p->log, PC_LOG_INFO,
            "pcache: loaded %s: %llu entries from the snapshot, %llu expired "
            "skipped, %s, in %.3f s",
            pc_coll_name(coll), (unsigned long long)r.rows, (unsigned long long)r.skipped_expired,
            p->journal != NULL && pc_journal_mode(coll) != 0 ? "journal replayed" : "journal off",
            secs);
    } else {
        pc_log_emit(&p->log, PC_LOG_ERR, "pcache: load of %s failed: %s", pc_coll_name(coll),
                    pc_store_strerror(rc));
    }
    if (res != NULL)
        *res = r;
    return rc;
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
            int rc = pc_persist_load_coll(p, pc_coll_at(p->cache, i), NULL);
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

/* The journal's bound of collection i (pc_persist_config): saves it when
 * its segment files passed the bound. The snapshot's size is read from its
 * meta only once the journal is past the minimum (one read transaction). A
 * save that fails is retried after 10 s, not every tick. */
#define PP_BOUND_RETRY_MS 10000
static int pp_bound_check(pc_persist *p, unsigned i)
{
    pc_coll *coll = pc_coll_at(p->cache, i);
    if (pc_journal_mode(coll) == 0 || (p->rewrite_percent == 0 && p->journal_max_bytes == 0))
        return 0;
    int64_t now = pc_mono_ms();
    if (now < p->bound_retry_ms[i])
        return 0;
    uint64_t jbytes = 0;
    unsigned nseg = 0;
    if (pc_journal_size(p->journal, coll, &jbytes, &nseg) != 0)
        return 0; /* logged by the journal */
    bool capped = p->journal_max_bytes > 0 && jbytes >= p->journal_max_bytes;
    uint64_t snap = 0, rel = UINT64_MAX;
    if (!capped && (p->rewrite_percent == 0 || jbytes < p->rewrite_min_bytes))
        return 0;
    pc_store *store = NULL;
    pc_store_coll_meta meta;
    if (pp_store(p, &store) == 0 && pc_store_coll_meta_get(store, pc_coll_name(coll), &meta) == 0)
        snap = meta.stored_bytes; /* else never saved (or unreadable): 0 */
    if (p->rewrite_percent > 0) {
        rel = snap / 100 * p->rewrite_percent + snap % 100 * p->rewrite_percent / 100;
        if (rel < p->rewrite_min_bytes)
            rel = p->rewrite_min_bytes;
    }
    if (!capped && jbytes <= rel)
        return 0;
    pc_log_emit(&p->log, PC_LOG_INFO,
                "pcache: journal of %s is %llu bytes in %u segment(s), past its bound (%s: "
                "snapshot %llu bytes, journal_rewrite_percent %u, journal_rewrite_min_mb %llu, "
                "journal_max_mb %llu): saving",
                pc_coll_name(coll), (unsigned long long)jbytes, nseg,
                capped ? "journal_max_mb" : "journal_rewrite_percent", (unsigned long long)snap,
                p->rewrite_percent, (unsigned long long)(p->rewrite_min_bytes >> 20),
                (unsigned long long)(p->journal_max_bytes >> 20));
    int rc = pc_persist_save_coll(p, coll, NULL);
    if (rc != 0) {
        p->bound_retry_ms[i] = pc_mono_ms() + PP_BOUND_RETRY_MS;
        return rc;
    }
    uint64_t after = 0;
    (void)pc_journal_size(p->journal, coll, &after, &nseg);
    pc_log_emit(&p->log, PC_LOG_INFO,
                "pcache: journal of %s: %llu bytes before the save, %llu bytes in %u segment(s) "
                "after it",
                pc_coll_name(coll), (unsigned long long)jbytes, (unsigned long long)after, nseg);
    return 0;
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

/* ---- perf_save / perf_load -------------------------------------------------- */

static const pc_mgmt_param pp_params[] = {
    {"collection", PC_MP_COLL_ALL, 0, NULL, 0, 0, "collection (omitted: every collection)"},
    {"store", PC_MP_STRING, 0, NULL, 0, 1024,
     "another store for this call only: lmdb:///path, a directory or an ODBC target "
     "(omitted: the configured db_url)"},
};

/* The call's [store] as a NUL-terminated string in buf, or NULL when it is
 * omitted or names the configured LMDB store itself (one LMDB environment
 * must not be opened twice in a process: the configured handle serves). */
static const char *pp_call_store(pc_persist *p, const pc_mgmt_call *call, char *buf, size_t cap)
{
    size_t len = 0;
    const char *v = pc_mgmt_call_given(call, 1) ? pc_mgmt_call_bytes(call, 1, &len) : NULL;
    if (v == NULL || len == 0 || len >= cap)
        return NULL;
    memcpy(buf, v, len);
    buf[len] = '\0';
    if (p->backend == NULL) {
        const char *a = strncmp(buf, "lmdb://", 7) == 0 ? buf + 7 : buf;
        const char *b = strncmp(p->db_url, "lmdb://", 7) == 0 ? p->db_url + 7 : p->db_url;
        struct stat sa, sb;
        if (stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
            sa.st_ino == sb.st_ino)
            return NULL;
    }
    return buf;
}

/* Opens the call's [store] into *t; *use is 1 when there is one. */
static int pp_call_target(pc_persist *p, const pc_mgmt_call *call, int create, pp_target *t,
                          int *use, const char *cmd, pc_mgmt_err *err)
{
    char url[1025], msg[600];
    *use = 0;
    const char *u = pp_call_store(p, call, url, sizeof url);
    if (u == NULL)
        return 0;
    int rc = pp_confine(p, u, msg, sizeof msg);
    if (rc == 0)
        rc = pp_target_open(u, p->sql_backend, create, &p->log, t, msg, sizeof msg);
    if (rc != 0)
        return pc_mgmt_errorf(err, rc, "%s: store: %s", cmd, msg);
    *use = 1;
    return 0;
}

/* The store a perf_save / perf_load result names: the call's [store] when
 * t is non-NULL, else the configured one (an SQL target with its password
 * masked). */
static const char *pp_describe(const pc_persist *p, const pp_target *t)
{
    return t != NULL            ? pp_target_describe(t)
           : p->backend != NULL ? p->backend->describe(p->bh)
           : p->store != NULL   ? pc_store_path(p->store)
                                : p->db_url;
}

/* The backend's message for the last failure ("" for LMDB). */
static const char *pp_errmsg(const pc_persist *p, const pp_target *t)
{
    return t != NULL ? pp_target_errmsg(t) : p->backend != NULL ? p->backend->errmsg(p->bh) : "";
}

static int pp_cmd_save(void *ctx, const pc_mgmt_call *call, const pc_result_ops *ops, void *rctx,
                       pc_mgmt_err *err)
{
    pc_persist *p = ctx;
    pc_coll *only = pc_mgmt_call_coll(call, 0);
    unsigned n = 0;
    uint64_t saved = 0;
    pp_target t;
    int use = 0, rc = pp_call_target(p, call, 1, &t, &use, "perf_save", err);
    if (rc != 0)
        return rc;
    const double t0 = pc_mono_sec();
    for (unsigned i = 0; i < pc_coll_count(p->cache); i++) {
        pc_coll *coll = pc_coll_at(p->cache, i);
        if (only != NULL && coll != only)
            continue;
        pc_persist_result r;
        rc = use ? pp_target_save(&t, coll, &r) : pc_persist_save_coll(p, coll, &r);
        if (rc != 0) {
            const char *why = pp_errmsg(p, use ? &t : NULL);
            rc =
                pc_mgmt_errorf(err, rc,
                               "perf_save: saving collection \"%s\" failed: %s "
                               "(its previous snapshot stands; %u collection(s) saved "
                               "before it)%s%.300s",
                               pc_coll_name(coll), pc_store_strerror(rc), n, *why ? ": " : "", why);
            if (use)
                pp_target_close(&t);
            return rc;
        }
        n++;
        saved += r.rows;
    }
    double secs = pc_mono_sec() - t0;
    rc = ops->obj_begin(rctx, NULL);
    rc = rc ? rc : ops->u64(rctx, "collections", n);
    rc = rc ? rc : ops->u64(rctx, "saved", saved);
    rc = rc ? rc : ops->dbl(rctx, "duration", secs);
    rc = rc ? rc : ops->dbl(rctx, "rate", secs > 0 ? (double)saved / secs : 0);
    const char *path = pp_describe(p, use ? &t : NULL);
    rc = rc ? rc : ops->str(rctx, "store", path, strlen(path));
    rc = rc ? rc : ops->obj_end(rctx);
    if (use)
        pp_target_close(&t);
    return rc;
}

static int pp_cmd_load(void *ctx, const pc_mgmt_call *call, const pc_result_ops *ops, void *rctx,
                       pc_mgmt_err *err)
{
    pc_persist *p = ctx;
    pc_coll *only = pc_mgmt_call_coll(call, 0);
    unsigned n = 0;
    uint64_t loaded = 0, expired = 0;
    pp_target t;
    int use = 0, rc = pp_call_target(p, call, 0, &t, &use, "perf_load", err);
    if (rc != 0)
        return rc;
    const double t0 = pc_mono_sec();
    for (unsigned i = 0; i < pc_coll_count(p->cache); i++) {
        pc_coll *coll = pc_coll_at(p->cache, i);
        if (only != NULL && coll != only)
            continue;
        pc_persist_result r;
        memset(&r, 0, sizeof r);
        if (use) {
            rc = pp_target_load(&t, coll, &r);
            if (rc == PC_ENOTFOUND) /* never saved there: nothing to load, as configured */
                rc = 0;
        } else {
            rc = pc_persist_load_coll(p, coll, &r);
        }
        if (rc != 0) {
            const char *why = pp_errmsg(p, use ? &t : NULL);
            rc =
                pc_mgmt_errorf(err, rc,
                               "perf_load: loading collection \"%s\" failed: %s "
                               "(%u collection(s) loaded before it)%s%.300s",
                               pc_coll_name(coll), pc_store_strerror(rc), n, *why ? ": " : "", why);
            if (use)
                pp_target_close(&t);
            return rc;
        }
        n++;
        loaded += r.rows;
        expired += r.skipped_expired;
    }
    const double secs = pc_mono_sec() - t0;
    rc = ops->obj_begin(rctx, NULL);
    rc = rc ? rc : ops->u64(rctx, "collections", n);
    rc = rc ? rc : ops->u64(rctx, "loaded", loaded);
    rc = rc ? rc : ops->u64(rctx, "skipped_expired", expired);
    rc = rc ? rc : ops->dbl(rctx, "duration", secs);
    const char *path = pp_describe(p, use ? &t : NULL);
    rc = rc ? rc : ops->str(rctx, "store", path, strlen(path));
    rc = rc ? rc : ops->obj_end(rctx);
    if (use)
        pp_target_close(&t);
    return rc;
}

int pc_persist_save_stats_get(const pc_persist *p, const pc_coll *coll, pc_persist_save_stats *out)
{
    if (p == NULL || coll == NULL || out == NULL)
        return PC_EINVAL;
    unsigned i = pp_index(p, coll);
    const struct pc_persist_coll_shm *st = &p->shm[i];
    pc_persist_save_stats s;
    memset(&s, 0, sizeof s);
    s.persisted = p->persist[i] ? 1 : 0;
    s.last_save_ms = atomic_load(&st->last_save_ms);
    s.last_save_rc = atomic_load(&st->last_save_rc);
    s.last_save_entries = atomic_load(&st->last_save_count);
    s.last_load_ms = atomic_load(&st->last_load_ms);
    s.last_load_rc = atomic_load(&st->last_load_rc);
    *out = s;
    return 0;
}

/* perf_stats: the last save and load of each collection. */
static int pp_stats(void *ctx, pc_coll *coll, const pc_result_ops *ops, void *rctx)
{
    pc_persist *p = ctx;
    const struct pc_persist_coll_shm *st = &p->shm[pp_index(p, coll)];
    int rc = ops->boolean(rctx, "persisted", p->persist[pp_index(p, coll)]);
    rc = rc ? rc : ops->i64(rctx, "last_save", atomic_load(&st->last_save_ms) / 1000);
    rc = rc ? rc : ops->u64(rctx, "last_save_entries", atomic_load(&st->last_save_count));
    rc = rc ? rc : ops->dbl(rctx, "last_save_duration", atomic_load(&st->last_save_us) / 1e6);
    rc = rc ? rc : ops->i64(rctx, "last_load", atomic_load(&st->last_load_ms) / 1000);
    rc = rc ? rc : ops->u64(rctx, "last_load_entries", atomic_load(&st->last_load_count));
    rc = rc ? rc : ops->u64(rctx, "generation", atomic_load(&st->generation));
    const char *jm = pc_journal_mode_name(pc_journal_mode(coll));
    rc = rc ? rc : ops->str(rctx, "journal", jm, strlen(jm));
    if (p->journal != NULL && pc_journal_mode(coll) != 0) {
        /* the journal's health (pcache_journal.h): ok, or failing since a
         * time with its cause, while writes are refused */
        pc_journal_health h;
        (void)pc_journal_health_get(p->journal, &h);
        const char *status = h.failing ? "failing" : "ok";
        const char *cause = h.failing ? strerror(h.err) : "";
        rc = rc ? rc : ops->str(rctx, "journal_status", status, strlen(status));
        rc = rc ? rc : ops->i64(rctx, "journal_failing_since", h.since_wall_ms / 1000);
        rc = rc ? rc : ops->str(rctx, "journal_error", cause, strlen(cause));
        rc = rc ? rc : ops->u64(rctx, "journal_lost_writes", h.lost);
        rc = rc ? rc : ops->u64(rctx, "journal_failures", h.failures);
    }
    rc = rc ? rc : pc_sync_stats_emit(p, coll, ops, rctx);
    return rc;
}

int pc_persist_register(pc_persist *p, pc_mgmt *m)
{
    if (p == NULL || m == NULL)
        return PC_EINVAL;
    pc_mgmt_cmd save = {"perf_save", "snapshot collections to the store (one transaction each)",
                        pp_params,   2,
                        pp_cmd_save, p};
    pc_mgmt_cmd load = {"perf_load", "restore collections from the store (snapshot + journal)",
                        pp_params,   2,
                        pp_cmd_load, p};
    int rc = pc_mgmt_register(m, &save);
    if (rc == 0)
        rc = pc_mgmt_register(m, &load);
    if (rc == 0)
        rc = pc_sync_register(p, m);
    if (rc == 0)
        rc = pc_mgmt_stats_hook(m, pp_stats, p);
    return rc;
}
