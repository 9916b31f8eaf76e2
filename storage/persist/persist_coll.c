/*
 * persist_coll.c - saving and loading one collection with the configured
 * store (the LMDB store with its journal, or the SQL backend), the facts
 * each leaves in the shared area for perf_stats, and the journal's bound
 * that turns a grown journal into a save (called by pc_persist_tick).
 */
#include "persist_int.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

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

int pp_load_coll(pc_persist *p, pc_coll *coll, pc_persist_result *res)
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

/* The journal's bound of collection i (pc_persist_config): saves it when
 * its segment files passed the bound. The snapshot's size is read from its
 * meta only once the journal is past the minimum (one read transaction). A
 * save that fails is retried after 10 s, not every tick. */
#define PP_BOUND_RETRY_MS 10000
int pp_bound_check(pc_persist *p, unsigned i)
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
