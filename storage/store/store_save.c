/*
 * store_save.c - pc_store_save: one collection to one snapshot, atomically.
 *
 * Three stages, the first two overlapped:
 *   1. walk: the calling thread runs pc_walk_ordered (lock-free; workers
 *      keep serving) and encodes each live entry as a record (§6) into the
 *      current raw block; a block is closed once it holds block_bytes, but
 *      never between two records of equal order key (§5.2), and handed to
 *      the pipe.
 *   2. compress: worker threads (store_pipe.c) compress closed blocks into
 *      their stored values; the walk thread takes them back in order and
 *      keeps them in memory.
 *   3. write: ONE LMDB write transaction deletes the collection's old
 *      blocks, puts the new ones and the meta (generation + 1), and commits
 *      with LMDB's durable sync. The transaction is short because nothing
 *      is computed inside it. MDB_MAP_FULL aborts it, grows the map and
 *      redoes it from the blocks in memory; the map is also pre-sized from
 *      the exact size of the new blocks before the first attempt.
 *
 * Atomicity is LMDB's: until the commit writes its meta page, readers and a
 * process that reopens after a crash see the previous snapshot, whole.
 *
 * Expiry: the walk hands remaining TTLs; a record stores the absolute wall
 * clock (CLOCK_REALTIME ms) at which it lapses, read once per block.
 */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "store_int.h"

/* one block travelling through the pipe */
struct pc_sv_job {
    pc_sb_raw raw;
    pc_sb_out out;
    int rc;
};

struct pc_sv {
    pc_store *s;
    const char *name;
    size_t nlen;
    pc_pipe *pipe;
    ZSTD_CCtx **cctx;       /* one per worker, + one for the inline case */
    pc_sb_scratch *scratch; /* likewise */
    unsigned ncctx;
    struct pc_sv_job *cur;
    struct pc_sv_job **spare; /* finished jobs whose raw buffers are reused */
    size_t nspare, spare_cap;
    pc_sb_out *blocks; /* compressed blocks in order */
    size_t nblocks, blocks_cap;
    uint64_t saved, skipped, key_bytes, value_bytes, raw_bytes, stored_bytes;
    int64_t now_ms; /* wall clock for the current block's expiries */
    uint64_t prev_order;
    int have_prev;
    int err;
};

static void pc_sv_run(void *ctx, unsigned worker, void *jobp)
{
    struct pc_sv *sv = ctx;
    struct pc_sv_job *job = jobp;
    /* the generation is known in the write transaction (pc_sv_write) */
    job->rc = pc_sb_pack(sv->cctx[worker], sv->s->zlevel, &job->raw, sv->name, sv->nlen, 0,
                         &sv->scratch[worker], &job->out);
}

/* Takes a compressed job back: its block joins the list, the job is kept
 * for reuse. */
static int pc_sv_collect(struct pc_sv *sv, struct pc_sv_job *job)
{
    int rc = job->rc;
    if (rc == 0 && sv->nblocks == sv->blocks_cap) {
        size_t cap = sv->blocks_cap == 0 ? 256 : sv->blocks_cap * 2;
        pc_sb_out *nb = realloc(sv->blocks, cap * sizeof *nb);
        if (nb == NULL)
            rc = PC_EHEAP;
        else {
            sv->blocks = nb;
            sv->blocks_cap = cap;
        }
    }
    if (rc == 0) {
        sv->blocks[sv->nblocks++] = job->out;
        sv->stored_bytes += job->out.val_len;
    } else {
        free(job->out.val);
    }
    memset(&job->out, 0, sizeof job->out);
    pc_sb_raw_reset(&job->raw);
    if (sv->nspare == sv->spare_cap) {
        size_t cap = sv->spare_cap == 0 ? 16 : sv->spare_cap * 2;
        struct pc_sv_job **ns = realloc(sv->spare, cap * sizeof *ns);
        if (ns == NULL) {
            pc_sb_raw_free(&job->raw);
            free(job);
            return rc != 0 ? rc : PC_EHEAP;
        }
        sv->spare = ns;
        sv->spare_cap = cap;
    }
    sv->spare[sv->nspare++] = job;
    return rc;
}

static struct pc_sv_job *pc_sv_job_get(struct pc_sv *sv)
{
    if (sv->nspare > 0)
        return sv->spare[--sv->nspare];
    return calloc(1, sizeof(struct pc_sv_job));
}

/* Closes the current block: into the pipe. */
static int pc_sv_flush(struct pc_sv *sv)
{
    struct pc_sv_job *job = sv->cur, *done = NULL;
    sv->cur = NULL;
    if (job == NULL || job->raw.count == 0) {
        sv->cur = job;
        return 0;
    }
    sv->raw_bytes += job->raw.len;
    sv->key_bytes += job->raw.key_bytes;
    sv->value_bytes += job->raw.value_bytes;
    pc_pipe_submit(sv->pipe, job, (void **)&done);
    return done != NULL ? pc_sv_collect(sv, done) : 0;
}

static int pc_sv_cb(void *ctx, const pc_entry *e)
{
    struct pc_sv *sv = ctx;
    if (e->ttl_ms == 0) { /* lapses this very millisecond */
        sv->skipped++;
        return 0;
    }
    uint64_t order = pc_sf_order(e->key, e->klen);
    if (sv->have_prev && order < sv->prev_order) {
        /* the engine promises ascending order; a block range relies on it */
        PC_SLOG(sv->s, PC_LOG_ERR,
                "store %s: save of %s: pc_walk_ordered returned order key %016llx after %016llx",
                sv->s->path, sv->name, (unsigned long long)order,
                (unsigned long long)sv->prev_order);
        sv->err = PC_EINVAL;
        return 1;
    }
    if (sv->cur != NULL && sv->cur->raw.len >= sv->s->block_bytes && order != sv->cur->raw.last) {
        if ((sv->err = pc_sv_flush(sv)) != 0)
            return 1;
    }
    if (sv->cur == NULL) {
        if ((sv->cur = pc_sv_job_get(sv)) == NULL) {
            sv->err = PC_EHEAP;
            return 1;
        }
        sv->now_ms = pc_wall_ms();
    }
    if (sv->cur->raw.len > PC_SF_BLOCK_RAW_MAX / 2) { /* only equal order keys get here */
        PC_SLOG(sv->s, PC_LOG_ERR, "store %s: save of %s: too many records share order key %016llx",
                sv->s->path, sv->name, (unsigned long long)order);
        sv->err = PC_ETOOBIG;
        return 1;
    }
    pc_sf_rec r = {.key = e->key,
                   .klen = (uint32_t)e->klen,
                   .val = e->val,
                   .vlen = (uint32_t)e->vlen,
                   .expires_ms = e->ttl_ms < 0 ? 0 : (uint64_t)(sv->now_ms + e->ttl_ms),
                   .stamp = e->stamp,
                   .flags = e->is_counter ? PC_SF_REC_COUNTER : 0};
    if ((sv->err = pc_sb_raw_add(&sv->cur->raw, &r, order)) != 0)
        return 1;
    sv->prev_order = order;
    sv->have_prev = 1;
    sv->saved++;
    return 0;
}

/* Pages LMDB needs for the new blocks: each value above a page's worth
 * lives on its own run of overflow pages (a 16-byte page header first). */
static size_t pc_sv_pages_bytes(const struct pc_sv *sv)
{
    size_t ps = sv->s->psize, total = 0;
    for (size_t i = 0; i < sv->nblocks; i++)
        total += (sv->blocks[i].val_len + 16 + ps - 1) / ps * ps;
    return total + (sv->nblocks / 16 + 16) * ps; /* leaves and branches */
}

/* The write transaction. 0, MDB_MAP_FULL (to retry) or a PC_E* code. */
static int pc_sv_write(struct pc_sv *sv, const pc_store_save_opts *opts, double t0,
                       pc_store_coll_meta *meta)
{
    pc_store *s = sv->s;
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    int rc = pc_store_txn_begin(s, 0, &txn), mrc = 0;
    if (rc != 0)
        return rc;
    pc_store_coll_meta old;
    memset(meta, 0, sizeof *meta);
    rc = pc_store_meta_read(s, txn, sv->name, sv->nlen, &old);
    if (rc == 0)
        meta->generation = old.generation + 1;
    else if (rc == PC_ENOTFOUND || rc == PC_ECORRUPT) {
        if (rc == PC_ECORRUPT)
            PC_SLOG(s, PC_LOG_WARN, "store %s: collection %s: replacing a corrupt meta record",
                    s->path, sv->name);
        meta->generation = 1;
        rc = 0;
    } else {
        goto out; /* PC_EFORMAT: never overwrite what a newer version wrote */
    }
    /* delete the old blocks: every key "name\0..." */
    uint8_t pk[PC_SF_BKEY_MAX];
    memcpy(pk, sv->name, sv->nlen);
    pk[sv->nlen] = 0;
    if ((mrc = mdb_cursor_open(txn, s->blocks, &cur)) != 0)
        goto out;
    for (;;) { /* re-seek after each delete: no reliance on cursor state after a delete */
        MDB_val k = {sv->nlen + 1, pk}, v;
        mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
        if (mrc != 0 || k.mv_size <= sv->nlen || memcmp(k.mv_data, pk, sv->nlen + 1) != 0)
            break;
        if ((mrc = mdb_cursor_del(cur, 0)) != 0)
            break;
    }
    if (mrc != 0 && mrc != MDB_NOTFOUND)
        goto out;
    mrc = 0;
    mdb_cursor_close(cur);
    cur = NULL;
    pc_sf_sum sum = {0};
    if ((rc = pc_sf_sum_init(&sum)) != 0)
        goto out;
    for (size_t i = 0; i < sv->nblocks && mrc == 0; i++) {
        pc_sf_block_set_gen(sv->blocks[i].val, sv->blocks[i].val_len, meta->generation);
        MDB_val bk = {sv->blocks[i].klen, sv->blocks[i].key};
        MDB_val bv = {sv->blocks[i].val_len, sv->blocks[i].val};
        mrc = mdb_put(txn, s->blocks, &bk, &bv, 0);
        pc_sf_sum_add(&sum, sv->blocks[i].raw_sum);
    }
    meta->content_checksum = pc_sf_sum_final(&sum);
    if (mrc != 0)
        goto out;
    meta->format_version = PC_SF_VERSION;
    meta->count = sv->saved;
    meta->blocks = sv->nblocks;
    meta->raw_bytes = sv->raw_bytes;
    meta->stored_bytes = sv->stored_bytes;
    meta->key_bytes = sv->key_bytes;
    meta->value_bytes = sv->value_bytes;
    meta->saved_at_ms = pc_wall_ms();
    meta->journal_epoch = opts != NULL ? opts->journal_epoch : 0;
    meta->save_usec = (uint64_t)((pc_mono_sec() - t0) * 1e6);
    MDB_val hk = {PC_SF_HDR_KEYLEN, (void *)PC_SF_HDR_KEY}, hv;
    if ((mrc = mdb_get(txn, s->meta, &hk, &hv)) != 0)
        goto out;
    pc_sf_hdr hdr;
    const char *why = "";
    if ((rc = pc_sf_hdr_decode(hv.mv_data, hv.mv_size, &hdr, &why)) != 0) {
        PC_SLOG(s, PC_LOG_ERR, "store %s: %s", s->path, why);
        goto out;
    }
    meta->boot_gen = opts != NULL && opts->boot_gen != 0 ? opts->boot_gen : hdr.boot_gen;
    if ((mrc = pc_store_hdr_upgrade(s, txn)) != 0)
        goto out;
    uint8_t mb[PC_SF_META_SIZE], mk[2 + PC_COLL_NAME_MAX];
    pc_sf_meta_encode(meta, mb);
    MDB_val mkv = {pc_sf_meta_key(mk, 'c', sv->name, sv->nlen), mk}, mv = {sizeof mb, mb};
    if ((mrc = mdb_put(txn, s->meta, &mkv, &mv, 0)) != 0)
        goto out;
    mrc = mdb_txn_commit(txn); /* durable: LMDB syncs data, then the meta page */
    txn = NULL;
out:
    if (cur != NULL)
        mdb_cursor_close(cur);
    if (txn != NULL)
        mdb_txn_abort(txn);
    if (rc == 0 && mrc == MDB_MAP_FULL)
        return MDB_MAP_FULL;
    if (rc == 0 && mrc != 0)
        rc = pc_store_mdb_err(s, mrc, "write the snapshot");
    return rc;
}

/* Stages 1 and 2: the walk, cut into blocks, compressed by the pipe and
 * collected in order. */
static int pc_sv_gather(struct pc_sv *sv, pc_coll *coll)
{
    int rc = pc_walk_ordered(coll, PC_WALK_VALUES | PC_WALK_RAW, pc_sv_cb, sv);
    if (sv->err != 0)
        rc = sv->err;
    if (rc == 0)
        rc = pc_sv_flush(sv);
    for (void *j; (j = pc_pipe_next(sv->pipe)) != NULL;) {
        int crc = pc_sv_collect(sv, j);
        if (rc == 0)
            rc = crc;
    }
    if (rc != 0)
        PC_SLOG(sv->s, PC_LOG_ERR, "store %s: save of %s failed before writing: %s", sv->s->path,
                sv->name, pc_store_strerror(rc));
    return rc;
}

/* Stage 3: the map pre-sized from the blocks, then the one transaction,
 * again after each MDB_MAP_FULL with a grown map (*grows counts them). */
static int pc_sv_commit(struct pc_sv *sv, const pc_store_save_opts *opts, double t0,
                        pc_store_coll_meta *meta, unsigned *grows)
{
    pc_store *s = sv->s;
    pc_store_reap_readers(s);
    size_t need = pc_store_used_bytes(s) + pc_sv_pages_bytes(sv) + (8u << 20);
    int rc = 0;
    if (need > s->map_size && (rc = pc_store_grow(s, need + need / 4)) != 0)
        return rc;
    for (;;) {
        rc = pc_sv_write(sv, opts, t0, meta);
        if (rc != MDB_MAP_FULL)
            break;
        if (++*grows > 12) {
            rc = PC_EIO;
            PC_SLOG(s, PC_LOG_ERR, "store %s: save of %s: the map keeps filling up", s->path,
                    sv->name);
            break;
        }
        if ((rc = pc_store_grow(s, 0)) != 0)
            break;
    }
    if (rc != 0)
        PC_SLOG(s, PC_LOG_ERR,
                "store %s: save of %s not committed (the previous snapshot stays): %s", s->path,
                sv->name, pc_store_strerror(rc));
    return rc;
}

/* Everything a save holds, whether it committed or not. */
static void pc_sv_free(struct pc_sv *sv)
{
    if (sv->pipe != NULL) {
        for (void *j; (j = pc_pipe_next(sv->pipe)) != NULL;)
            (void)pc_sv_collect(sv, j);
        pc_pipe_destroy(sv->pipe);
    }
    if (sv->cur != NULL) {
        pc_sb_raw_free(&sv->cur->raw);
        free(sv->cur);
    }
    for (size_t i = 0; i < sv->nspare; i++) {
        pc_sb_raw_free(&sv->spare[i]->raw);
        free(sv->spare[i]);
    }
    free(sv->spare);
    for (size_t i = 0; i < sv->nblocks; i++)
        free(sv->blocks[i].val);
    free(sv->blocks);
    for (unsigned i = 0; i < sv->ncctx; i++) {
        ZSTD_freeCCtx(sv->cctx[i]);
        free(sv->scratch[i].buf);
    }
    free(sv->cctx);
    free(sv->scratch);
}

int pc_store_save(pc_store *s, pc_coll *coll, const pc_store_save_opts *opts,
                  pc_store_save_result *result)
{
    if (s == NULL || coll == NULL)
        return PC_EINVAL;
    if ((s->flags & PC_STORE_RDONLY) != 0) {
        PC_SLOG(s, PC_LOG_ERR, "store %s: save on a read-only handle", s->path);
        return PC_EINVAL;
    }
    int rc = pc_store_check_pid(s);
    if (rc != 0)
        return rc;
    double t0 = pc_mono_sec();
    struct pc_sv sv;
    memset(&sv, 0, sizeof sv);
    sv.s = s;
    sv.name = pc_coll_name(coll);
    if ((rc = pc_sf_name_ok(sv.name, &sv.nlen)) != 0)
        return rc;
    unsigned nw = pc_store_auto_threads(s->threads);
    sv.ncctx = nw + 1;
    sv.cctx = calloc(sv.ncctx, sizeof *sv.cctx);
    sv.scratch = calloc(sv.ncctx, sizeof *sv.scratch);
    if (sv.cctx == NULL || sv.scratch == NULL) {
        free(sv.cctx);
        free(sv.scratch);
        return PC_EHEAP;
    }
    for (unsigned i = 0; i < sv.ncctx; i++)
        if ((sv.cctx[i] = ZSTD_createCCtx()) == NULL) {
            rc = PC_EHEAP;
            goto out;
        }
    pc_store_coll_meta meta;
    unsigned grows = 0;
    double t1 = 0;
    if ((rc = pc_pipe_create(nw, 2 * nw + 2, pc_sv_run, &sv, &sv.pipe)) != 0 ||
        (rc = pc_sv_gather(&sv, coll)) != 0)
        goto out;
    t1 = pc_mono_sec();
    if (opts != NULL && opts->before_commit != NULL &&
        (rc = opts->before_commit(opts->before_commit_ctx)) != 0) {
        PC_SLOG(s, PC_LOG_ERR,
                "store %s: save of %s not committed (the previous snapshot "
                "stays): its pre-commit step failed: %s",
                s->path, sv.name, pc_store_strerror(rc));
        goto out;
    }
    if ((rc = pc_sv_commit(&sv, opts, t0, &meta, &grows)) != 0)
        goto out;
    double t2 = pc_mono_sec();
    PC_SLOG(s, PC_LOG_INFO,
            "store %s: saved %s generation %llu: %llu records in %zu blocks, %llu -> %llu bytes, "
            "%.3f s (commit %.3f s)",
            s->path, sv.name, (unsigned long long)meta.generation, (unsigned long long)sv.saved,
            sv.nblocks, (unsigned long long)sv.raw_bytes, (unsigned long long)sv.stored_bytes,
            t2 - t0, t2 - t1);
    if (result != NULL) {
        memset(result, 0, sizeof *result);
        result->saved = sv.saved;
        result->skipped_expired = sv.skipped;
        result->blocks = sv.nblocks;
        result->raw_bytes = sv.raw_bytes;
        result->stored_bytes = sv.stored_bytes;
        result->value_bytes = sv.value_bytes;
        result->generation = meta.generation;
        result->seconds = t2 - t0;
        result->walk_seconds = t1 - t0;
        result->commit_seconds = t2 - t1;
        result->rate = result->seconds > 0 ? (double)sv.saved / result->seconds : 0;
        result->map_grows = grows;
    }
out:
    pc_sv_free(&sv);
    return rc;
}
