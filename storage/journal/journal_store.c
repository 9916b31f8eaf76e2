/*
 * journal_store.c - the journal's protocol around the snapshot store
 * (docs/journal-format.md §5 and §7): a save that advances the epoch before
 * its walk and retires the segments it covers after its commit, and a
 * restore that loads the snapshot through the replay's filter and then
 * applies the journal. The policies (which collections, when) are the
 * host's; these two calls are the only order in which the store and the
 * journal may be used together.
 */
#include "journal_int.h"

#include <string.h>

/* Before a snapshot commits, every journal record staged before its walk
 * ended is written and fdatasynced, whoever staged it. The walk reads
 * bucket by bucket, so it can see one key of an EXEC committed during it
 * and not another; the EXEC's records are in the new epoch (§5), which the
 * replay applies whole over the snapshot. Without this sync an everysec
 * record still in a ring could be lost to a power cut while the snapshot
 * holding half of its EXEC survives it (the power-cut test saw
 * xa = 3465, xb = 3434). The hooks run after the buckets are unlocked
 * (§5.1), so an EXEC the walk saw part of may still be handing its writes
 * over: pc_txn_quiesce waits for every such transaction first. */
#define PC_JSAVE_QUIESCE_MS 10000 /* a hook's fdatasync on a slow disk, with room */

static int pc_jsave_sync(void *ctx)
{
    pc_journal *j = ctx;
    int rc = pc_txn_quiesce(j->c, PC_JSAVE_QUIESCE_MS);
    if (rc != 0) {
        pc_jlog(j, PC_LOG_ERR,
                "a transaction was still handing its writes to the journal after %u ms (a "
                "stopped process?): the save is not committed, the next one tries again",
                PC_JSAVE_QUIESCE_MS);
        return rc;
    }
    return pc_journal_sync_all(j);
}

int pc_journal_save(pc_journal *j, pc_store *s, pc_coll *coll, pc_store_save_result *result,
                    unsigned *retired)
{
    if (j == NULL || s == NULL || coll == NULL)
        return PC_EINVAL;
    uint64_t epoch = 0;
    int rc = pc_journal_begin_save(j, coll, &epoch); /* before the walk */
    if (rc != 0)
        return rc;
    pc_store_save_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.journal_epoch = epoch;
    opts.boot_gen = j->boot_gen; /* the generation the stamps of this walk belong to */
    opts.before_commit = pc_jsave_sync;
    opts.before_commit_ctx = j;
    if ((rc = pc_store_save(s, coll, &opts, result)) != 0)
        return rc; /* nothing retired: the previous snapshot + all segments stand */
    rc = pc_journal_retire(j, coll, epoch, retired);
    if (rc != 0)
        pc_jlog(j, PC_LOG_WARN,
                "collection '%s': saved, but retiring its covered segments failed (they are "
                "retired by the next save; a replay skips them)",
                pc_coll_name(coll));
    return 0;
}

struct pc_jrestore {
    pc_journal *j;
    pc_coll *coll;
    pc_journal_replay *rp;
};

/* Called by the load with the meta of the snapshot it is about to load:
 * its journal epoch says which segments follow it. */
static int pc_jrestore_meta(void *ctx, const pc_store_coll_meta *meta)
{
    struct pc_jrestore *r = ctx;
    if (r->rp != NULL)
        return PC_EINVAL;
    return pc_journal_replay_open(r->j, r->coll, meta->journal_epoch, 0, &r->rp);
}

static int pc_jrestore_filter(void *ctx, const void *key, size_t klen, uint32_t stamp,
                              uint64_t boot_gen)
{
    struct pc_jrestore *r = ctx;
    return pc_journal_replay_filter(r->rp, key, klen, stamp, boot_gen);
}

/* The filter's answers are the store's. */
_Static_assert(PC_JOURNAL_SKIP == PC_STORE_FILTER_SKIP && PC_JOURNAL_LOAD == PC_STORE_FILTER_LOAD &&
                   PC_JOURNAL_LOAD_ANY == PC_STORE_FILTER_LOAD_ANY,
               "journal filter answers must be the store's");

int pc_journal_restore(pc_journal *j, pc_store *s, pc_coll *coll, pc_journal_restore_result *out)
{
    if (j == NULL || s == NULL || coll == NULL)
        return PC_EINVAL;
    struct pc_jrestore r = {.j = j, .coll = coll};
    pc_store_load_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.filter = pc_jrestore_filter;
    opts.filter_ctx = &r;
    opts.on_meta = pc_jrestore_meta;
    opts.meta_ctx = &r;
    pc_journal_restore_result res;
    memset(&res, 0, sizeof res);
    int lrc = pc_store_load(s, coll, &opts, &res.load);
    int rc = 0;
    if (lrc == PC_ENOTFOUND && r.rp == NULL) {
        /* no snapshot: the journal alone, every segment */
        if ((rc = pc_journal_replay_open(j, coll, 0, 0, &r.rp)) != 0)
            return rc;
    } else if (r.rp == NULL) {
        /* the meta could not be read (or the replay could not open): the
         * journal alone would restore a part of the state as if it were all */
        return lrc != 0 ? lrc : PC_EINVAL;
    } else {
        res.snapshot = 1;
        res.load_rc = lrc; /* 0, or PC_ECORRUPT: units not loaded, logged by the store */
        if (lrc != 0 && lrc != PC_ECORRUPT) {
            pc_journal_replay_close(r.rp);
            return lrc;
        }
    }
    rc = pc_journal_replay_apply(r.rp);
    pc_journal_replay_stats_get(r.rp, &res.replay);
    pc_journal_replay_close(r.rp);
    if (out != NULL)
        *out = res;
    return rc;
}
