/*
 * persist_cmd.c - the management commands of the persistence policies:
 * perf_save and perf_load (with the configured store or the call's
 * [store], persist_target.c) and the persistence part of perf_stats.
 */
#include "persist_int.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>

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

/* One perf_save or perf_load call: the collections it names, each saved to
 * or loaded from its store in turn, stopping at the first failure. */
struct pp_run {
    pc_persist *p;
    int load;    /* perf_load, else perf_save */
    pp_target t; /* the call's [store] when use */
    int use;
    unsigned n;       /* collections done */
    uint64_t rows;    /* saved or loaded */
    uint64_t expired; /* perf_load: skipped as expired */
    double secs;
};

/* Runs the call over its collections into r. On a failure the error names
 * the collection and what was done before it; r's target is closed. */
static int pp_run_each(struct pp_run *r, const pc_mgmt_call *call, pc_mgmt_err *err)
{
    pc_persist *p = r->p;
    const char *cmd = r->load ? "perf_load" : "perf_save";
    pc_coll *only = pc_mgmt_call_coll(call, 0);
    int rc = pp_call_target(p, call, !r->load, &r->t, &r->use, cmd, err);
    if (rc != 0)
        return rc;
    const double t0 = pc_mono_sec();
    for (unsigned i = 0; i < pc_coll_count(p->cache); i++) {
        pc_coll *coll = pc_coll_at(p->cache, i);
        if (only != NULL && coll != only)
            continue;
        pc_persist_result res;
        memset(&res, 0, sizeof res);
        if (!r->load)
            rc = r->use ? pp_target_save(&r->t, coll, &res) : pc_persist_save_coll(p, coll, &res);
        else if (!r->use)
            rc = pp_load_coll(p, coll, &res);
        else if ((rc = pp_target_load(&r->t, coll, &res)) == PC_ENOTFOUND)
            rc = 0; /* never saved there: nothing to load, as configured */
        if (rc != 0) {
            const char *why = pp_errmsg(p, r->use ? &r->t : NULL);
            rc = pc_mgmt_errorf(err, rc,
                                r->load ? "%s: loading collection \"%s\" failed: %s "
                                          "(%u collection(s) loaded before it)%s%.300s"
                                        : "%s: saving collection \"%s\" failed: %s "
                                          "(its previous snapshot stands; %u collection(s) saved "
                                          "before it)%s%.300s",
                                cmd, pc_coll_name(coll), pc_store_strerror(rc), r->n,
                                *why ? ": " : "", why);
            if (r->use)
                pp_target_close(&r->t);
            return rc;
        }
        r->n++;
        r->rows += res.rows;
        r->expired += res.skipped_expired;
    }
    r->secs = pc_mono_sec() - t0;
    return 0;
}

/* The result of a call that succeeded, then its target closed. */
static int pp_run_result(struct pp_run *r, const pc_result_ops *ops, void *rctx)
{
    int rc = ops->obj_begin(rctx, NULL);
    rc = rc ? rc : ops->u64(rctx, "collections", r->n);
    rc = rc ? rc : ops->u64(rctx, r->load ? "loaded" : "saved", r->rows);
    if (r->load)
        rc = rc ? rc : ops->u64(rctx, "skipped_expired", r->expired);
    rc = rc ? rc : ops->dbl(rctx, "duration", r->secs);
    if (!r->load)
        rc = rc ? rc : ops->dbl(rctx, "rate", r->secs > 0 ? (double)r->rows / r->secs : 0);
    const char *path = pp_describe(r->p, r->use ? &r->t : NULL);
    rc = rc ? rc : ops->str(rctx, "store", path, strlen(path));
    rc = rc ? rc : ops->obj_end(rctx);
    if (r->use)
        pp_target_close(&r->t);
    return rc;
}

static int pp_cmd_save(void *ctx, const pc_mgmt_call *call, const pc_result_ops *ops, void *rctx,
                       pc_mgmt_err *err)
{
    struct pp_run r = {.p = ctx, .load = 0};
    int rc = pp_run_each(&r, call, err);
    return rc != 0 ? rc : pp_run_result(&r, ops, rctx);
}

static int pp_cmd_load(void *ctx, const pc_mgmt_call *call, const pc_result_ops *ops, void *rctx,
                       pc_mgmt_err *err)
{
    struct pp_run r = {.p = ctx, .load = 1};
    int rc = pp_run_each(&r, call, err);
    return rc != 0 ? rc : pp_run_result(&r, ops, rctx);
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
