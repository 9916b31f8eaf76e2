/*
 * store_load.c - pc_store_load: one snapshot into a live collection, and
 * the prune of the expired records it met.
 *
 * The load reads the collection's meta and blocks in ONE read transaction
 * (so it sees exactly one committed snapshot, whatever saves run
 * meanwhile). Worker threads (store_pipe.c) verify and decompress blocks
 * ahead of the calling thread, which parses the records and stores the live
 * ones with pc_set / pc_set_counter and their remaining TTL. A block that
 * fails a check is reported (collection, order-key range, and the keys its
 * raw bytes still name) and none of its records is loaded; a record that
 * fails its own checksum is reported by key and skipped. At the end the
 * count and content checksum re-derived from the block headers are compared
 * with the meta.
 *
 * Prune: blocks that held expired records are rewritten without them in one
 * write transaction that first checks the generation is still the one
 * loaded (a save in between makes the prune moot), re-reads each block from
 * the store (the truth, not what the load saw) and re-derives the meta's
 * count, sizes and checksum from the block headers. The generation stays:
 * the snapshot's content for any reader after the expiry is unchanged.
 */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "store_int.h"

/* ---- reporting -------------------------------------------------------------- */
void pc_store_report_block(const pc_store *s, const char *name, const pc_sf_block *hdr, int hdr_ok,
                           const char *why, const uint8_t *raw)
{
    if (!pc_log_enabled(&s->log, PC_LOG_ERR))
        return;
    char a[360] = "", b[360] = "";
    if (raw != NULL && hdr_ok) {
        /* name what the raw bytes still show: the first key that fails its
         * checksum, or the block's first and last key */
        size_t off = 0, used;
        unsigned n = 0;
        pc_sf_rec r, first = {0}, last = {0};
        int key_ok, have = 0;
        const char *w;
        while (off < hdr->raw_len && n < hdr->count) {
            int rc = pc_sf_rec_decode(raw + off, hdr->raw_len - off, &used, &r, &key_ok, &w);
            if (rc != 0 && key_ok) {
                pc_sf_keystr(r.key, r.klen, a, sizeof a);
                PC_SLOG(s, PC_LOG_ERR,
                        "store %s: collection %s: block %016llx..%016llx: %s; key '%s': %s",
                        s->path, name, (unsigned long long)hdr->first,
                        (unsigned long long)hdr->last, why, a, w);
                return;
            }
            if (rc != 0)
                break;
            if (!have)
                first = r;
            last = r;
            have = 1;
            off += used;
            n++;
        }
        if (have) {
            pc_sf_keystr(first.key, first.klen, a, sizeof a);
            pc_sf_keystr(last.key, last.klen, b, sizeof b);
            PC_SLOG(s, PC_LOG_ERR,
                    "store %s: collection %s: block %016llx..%016llx (%u records, keys '%s' .. "
                    "'%s'): %s; not loaded",
                    s->path, name, (unsigned long long)hdr->first, (unsigned long long)hdr->last,
                    hdr->count, a, b, why);
            return;
        }
    }
    if (hdr_ok)
        PC_SLOG(s, PC_LOG_ERR,
                "store %s: collection %s: block %016llx..%016llx (%u records): %s; not loaded",
                s->path, name, (unsigned long long)hdr->first, (unsigned long long)hdr->last,
                hdr->count, why);
    else
        PC_SLOG(s, PC_LOG_ERR, "store %s: collection %s: a block: %s; not loaded", s->path, name,
                why);
}

/* ---- the load ----------------------------------------------------------------- */
struct pc_ld_job {
    MDB_val key, val; /* borrowed from the read transaction */
    pc_sf_block hdr;
    int hdr_ok;
    uint8_t *buf;
    size_t cap;
    const uint8_t *raw;
    unsigned state;
    int rc;
    const char *why;
};

struct pc_ld {
    pc_store *s;
    pc_coll *coll;
    const char *name;
    size_t nlen;
    const pc_store_load_opts *opts;
    pc_store_coll_meta meta;
    ZSTD_DCtx **dctx;
    unsigned ndctx;
    int64_t now_ms;
    pc_store_load_result res;
    uint64_t hdr_count;
    pc_sf_sum sum;
    uint8_t (*prune)[PC_SF_BKEY_MAX]; /* keys of blocks holding expired records */
    size_t *prune_len;
    size_t nprune, prune_cap;
    unsigned fail_logged;
    int bad; /* some unit was corrupt */
};

static void pc_ld_run(void *ctx, unsigned worker, void *jobp)
{
    struct pc_ld *ld = ctx;
    struct pc_ld_job *j = jobp;
    j->why = "";
    j->rc = pc_sb_unpack(ld->dctx[worker], j->val.mv_data, j->val.mv_size, &j->hdr, &j->buf,
                         &j->cap, &j->raw, &j->state, &j->why);
    j->hdr_ok = (j->state & PC_SB_HDR) != 0;
}

static int pc_ld_mark_prune(struct pc_ld *ld, const MDB_val *key)
{
    if (ld->nprune == ld->prune_cap) {
        size_t cap = ld->prune_cap == 0 ? 64 : ld->prune_cap * 2;
        void *nk = realloc(ld->prune, cap * sizeof *ld->prune);
        if (nk == NULL)
            return PC_EHEAP;
        ld->prune = nk;
        size_t *nl = realloc(ld->prune_len, cap * sizeof *nl);
        if (nl == NULL)
            return PC_EHEAP;
        ld->prune_len = nl;
        ld->prune_cap = cap;
    }
    memcpy(ld->prune[ld->nprune], key->mv_data, key->mv_size);
    ld->prune_len[ld->nprune++] = key->mv_size;
    return 0;
}

/* Grows the collection for the snapshot's records before the first is
 * stored: nothing else grows the table before the host's maintenance
 * starts, and the blocks come in hash order, so without it each bucket
 * of the initial table gets all its keys at once and overflows into the
 * chains, whose walk every later insert pays (1M records into the
 * default 2^14 buckets: 2.7 s). Never fails the load: a cache that
 * cannot grow (growth off, out of memory) loads as before. */
static int pc_ld_reserve(struct pc_ld *ld)
{
    int rc = pc_coll_reserve(ld->coll, ld->meta.count);
    if (rc < 0 && rc != PC_EBUSY)
        PC_SLOG(ld->s, PC_LOG_WARN, "store %s: load of %s: growing the table ahead: %s",
                ld->s->path, ld->name, pc_store_strerror(rc));
    return 0;
}

static void pc_ld_store(struct pc_ld *ld, const pc_sf_rec *r)
{
    int64_t ttl = r->expires_ms == 0 ? 0 : (int64_t)r->expires_ms - ld->now_ms;
    int rc;
    if ((r->flags & PC_SF_REC_COUNTER) != 0)
        rc = pc_set_counter(ld->coll, r->key, r->klen, (int64_t)pc_get_le64(r->val), ttl);
    else
        rc = pc_set(ld->coll, r->key, r->klen, r->val, r->vlen, ttl, 0);
    if (rc == 0) {
        ld->res.loaded++;
        return;
    }
    ld->res.failed++;
    if (ld->fail_logged++ < 5) {
        char k[360];
        PC_SLOG(ld->s, PC_LOG_WARN, "store %s: load of %s: key '%s' not stored: %s", ld->s->path,
                ld->name, pc_sf_keystr(r->key, r->klen, k, sizeof k), pc_store_strerror(rc));
    }
}

#define PC_LD_AHEAD 8u

/* Prefetches the bucket of the record at offset at in j's raw block and
 * returns the next record's offset (the block's end once nothing frames). */
static size_t pc_ld_prefetch(struct pc_ld *ld, const struct pc_ld_job *j, size_t at)
{
    const uint8_t *key;
    size_t klen, used;
    if (at >= j->hdr.raw_len ||
        pc_sf_rec_peek(j->raw + at, j->hdr.raw_len - at, &key, &klen, &used) != 0)
        return j->hdr.raw_len;
    pc_prefetch(ld->coll, key, klen, 0);
    return at + used;
}

/* Takes a verified (or failed) block back on the calling thread. */
static int pc_ld_consume(struct pc_ld *ld, struct pc_ld_job *j)
{
    ld->res.blocks++;
    if (j->hdr_ok) {
        ld->hdr_count += j->hdr.count;
        pc_sf_sum_add(&ld->sum, j->hdr.raw_sum);
    }
    if (j->rc != 0) {
        ld->bad = 1;
        ld->res.corrupt_blocks++;
        ld->res.corrupt += j->hdr_ok ? j->hdr.count : 0;
        pc_store_report_block(ld->s, ld->name, &j->hdr, j->hdr_ok, j->why,
                              (j->state & PC_SB_RAW) ? j->raw : NULL);
        return 0;
    }
    if (j->key.mv_size != ld->nlen + 9 ||
        pc_get_be64((const uint8_t *)j->key.mv_data + ld->nlen + 1) != j->hdr.last)
        PC_SLOG(ld->s, PC_LOG_WARN,
                "store %s: collection %s: block %016llx..%016llx is stored under a key that does "
                "not name its last order key (point lookups may miss it)",
                ld->s->path, ld->name, (unsigned long long)j->hdr.first,
                (unsigned long long)j->hdr.last);
    size_t off = 0, used;
    uint32_t n = 0;
    int expired = 0, keep = 0;
    const pc_store_load_opts *o = ld->opts;
    /* Look-ahead: the bucket of the record PC_LD_AHEAD places further on is
     * prefetched while this one is stored, so the inserts' bucket misses
     * overlap (the load runs pc_set on one thread; that miss is most of a
     * set into a large table). A record that does not frame ends it. */
    size_t ahead = 0;
    for (unsigned a = 0; a < PC_LD_AHEAD; a++)
        ahead = pc_ld_prefetch(ld, j, ahead);
    while (off < j->hdr.raw_len && n < j->hdr.count) {
        pc_sf_rec r;
        int key_ok;
        const char *why;
        ahead = pc_ld_prefetch(ld, j, ahead);
        int rc = pc_sf_rec_decode(j->raw + off, j->hdr.raw_len - off, &used, &r, &key_ok, &why);
        if (rc != 0) {
            ld->bad = 1;
            char k[360] = "?";
            if (key_ok)
                pc_sf_keystr(r.key, r.klen, k, sizeof k);
            PC_SLOG(ld->s, PC_LOG_ERR,
                    "store %s: collection %s: block %016llx..%016llx, record %u, key '%s': %s; not "
                    "loaded",
                    ld->s->path, ld->name, (unsigned long long)j->hdr.first,
                    (unsigned long long)j->hdr.last, n, k, why);
            if (!key_ok) { /* cannot step over it: the rest of the block is lost */
                ld->res.corrupt += j->hdr.count - n;
                return 0;
            }
            ld->res.corrupt++;
            off += used;
            n++;
            continue;
        }
        off += used;
        n++;
        int dead = r.expires_ms != 0 && (int64_t)r.expires_ms <= ld->now_ms;
        int f = o->filter == NULL
                    ? 1
                    : o->filter(o->filter_ctx, r.key, r.klen, r.stamp, ld->meta.boot_gen);
        if (f <= 0) {
            ld->res.filtered++;
            expired |= dead;
        } else if (dead && f == 1) {
            ld->res.skipped_expired++;
            expired = 1;
        } else if (dead) {
            /* the journal will re-arm or remove it: keep it until then,
             * and keep its block out of the prune */
            r.expires_ms = (uint64_t)(ld->now_ms + PC_STORE_LOAD_ANY_TTL_MS);
            keep = 1;
            pc_ld_store(ld, &r);
        } else {
            pc_ld_store(ld, &r);
        }
    }
    if (n != j->hdr.count || off != j->hdr.raw_len) {
        ld->bad = 1;
        PC_SLOG(ld->s, PC_LOG_ERR,
                "store %s: collection %s: block %016llx..%016llx holds %u records in %zu bytes, "
                "its header says %u in %u",
                ld->s->path, ld->name, (unsigned long long)j->hdr.first,
                (unsigned long long)j->hdr.last, n, off, j->hdr.count, j->hdr.raw_len);
        if (n < j->hdr.count)
            ld->res.corrupt += j->hdr.count - n;
    }
    return expired && !keep ? pc_ld_mark_prune(ld, &j->key) : 0;
}

static int pc_store_prune(pc_store *s, const char *name, size_t nlen, uint64_t gen,
                          uint8_t (*keys)[PC_SF_BKEY_MAX], const size_t *klens, size_t nkeys,
                          uint64_t *pruned);

/* Every block of the collection, in key order, through the pipe (jobs:
 * depth + 1 slots) into pc_ld_consume; then the blocks' totals against the
 * meta (a mismatch marks the load bad). */
static int pc_ld_blocks(struct pc_ld *ld, MDB_txn *txn, pc_pipe *pipe, struct pc_ld_job *jobs,
                        unsigned depth)
{
    pc_store *s = ld->s;
    MDB_cursor *cur = NULL;
    int rc = 0, mrc = mdb_cursor_open(txn, s->blocks, &cur);
    if (mrc != 0)
        return pc_store_mdb_err(s, mrc, "open a cursor");
    ld->now_ms = pc_wall_ms();
    uint8_t pk[PC_SF_BKEY_MAX];
    memcpy(pk, ld->name, ld->nlen);
    pk[ld->nlen] = 0;
    MDB_val k = {ld->nlen + 1, pk}, v;
    uint64_t submitted = 0;
    for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); mrc == 0;
         mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size <= ld->nlen || memcmp(k.mv_data, pk, ld->nlen + 1) != 0)
            break;
        if (k.mv_size > PC_SF_BKEY_MAX) {
            ld->bad = 1;
            PC_SLOG(s, PC_LOG_ERR, "store %s: collection %s: a block key of %zu bytes; skipped",
                    s->path, ld->name, k.mv_size);
            continue;
        }
        struct pc_ld_job *j = &jobs[submitted++ % (depth + 1)], *done = NULL;
        j->key = k;
        j->val = v;
        j->state = 0;
        j->hdr_ok = 0;
        pc_pipe_submit(pipe, j, (void **)&done);
        if (done != NULL && (rc = pc_ld_consume(ld, done)) != 0)
            break;
        if (ld->res.blocks % 64 == 0)
            ld->now_ms = pc_wall_ms();
    }
    for (void *j; (j = pc_pipe_next(pipe)) != NULL;) {
        int crc = pc_ld_consume(ld, j);
        if (rc == 0)
            rc = crc;
    }
    mdb_cursor_close(cur);
    if (rc == 0 && mrc != 0 && mrc != MDB_NOTFOUND)
        rc = pc_store_mdb_err(s, mrc, "read the blocks");
    if (rc != 0)
        return rc;
    uint64_t sum = pc_sf_sum_final(&ld->sum);
    if (ld->hdr_count != ld->meta.count || ld->res.blocks != ld->meta.blocks ||
        sum != ld->meta.content_checksum) {
        ld->bad = 1;
        PC_SLOG(s, PC_LOG_ERR,
                "store %s: collection %s generation %llu: the blocks hold %llu records in %llu "
                "blocks (checksum %016llx) but the meta says %llu in %llu (checksum %016llx)",
                s->path, ld->name, (unsigned long long)ld->meta.generation,
                (unsigned long long)ld->hdr_count, (unsigned long long)ld->res.blocks,
                (unsigned long long)sum, (unsigned long long)ld->meta.count,
                (unsigned long long)ld->meta.blocks, (unsigned long long)ld->meta.content_checksum);
    }
    return 0;
}

/* After the read transaction: the prune of expired records, the result
 * and its log line. */
static void pc_ld_finish(struct pc_ld *ld, double t0)
{
    pc_store *s = ld->s;
    if (ld->nprune > 0 && !ld->opts->no_prune && (s->flags & PC_STORE_RDONLY) == 0) {
        int prc = pc_store_prune(s, ld->name, ld->nlen, ld->meta.generation, ld->prune,
                                 ld->prune_len, ld->nprune, &ld->res.pruned);
        if (prc != 0)
            PC_SLOG(s, PC_LOG_WARN, "store %s: collection %s: prune not done: %s", s->path,
                    ld->name, pc_store_strerror(prc));
    }
    ld->res.seconds = pc_mono_sec() - t0;
    ld->res.rate = ld->res.seconds > 0 ? (double)ld->res.loaded / ld->res.seconds : 0;
    ld->res.meta = ld->meta;
    PC_SLOG(s, PC_LOG_INFO,
            "store %s: loaded %s generation %llu: %llu records (%llu expired, %llu filtered, %llu "
            "refused, %llu corrupt, %llu pruned) in %.3f s",
            s->path, ld->name, (unsigned long long)ld->meta.generation,
            (unsigned long long)ld->res.loaded, (unsigned long long)ld->res.skipped_expired,
            (unsigned long long)ld->res.filtered, (unsigned long long)ld->res.failed,
            (unsigned long long)ld->res.corrupt, (unsigned long long)ld->res.pruned,
            ld->res.seconds);
}

int pc_store_load(pc_store *s, pc_coll *coll, const pc_store_load_opts *opts,
                  pc_store_load_result *result)
{
    if (s == NULL || coll == NULL)
        return PC_EINVAL;
    int rc = pc_store_check_pid(s);
    if (rc != 0)
        return rc;
    pc_store_load_opts none;
    memset(&none, 0, sizeof none);
    struct pc_ld ld;
    memset(&ld, 0, sizeof ld);
    ld.s = s;
    ld.coll = coll;
    ld.opts = opts != NULL ? opts : &none;
    ld.name = pc_coll_name(coll);
    if ((rc = pc_sf_name_ok(ld.name, &ld.nlen)) != 0)
        return rc;
    double t0 = pc_mono_sec();
    unsigned nw = pc_store_auto_threads(s->threads);
    unsigned depth = 2 * nw + 2;
    struct pc_ld_job *jobs = calloc(depth + 1, sizeof *jobs);
    MDB_txn *txn = NULL;
    pc_pipe *pipe = NULL;
    ld.ndctx = nw + 1;
    ld.dctx = calloc(ld.ndctx, sizeof *ld.dctx);
    if (jobs == NULL || ld.dctx == NULL) {
        rc = PC_EHEAP;
        goto out;
    }
    for (unsigned i = 0; i < ld.ndctx; i++)
        if ((ld.dctx[i] = ZSTD_createDCtx()) == NULL) {
            rc = PC_EHEAP;
            goto out;
        }
    if ((rc = pc_sf_sum_init(&ld.sum)) != 0 ||
        (rc = pc_store_txn_begin(s, MDB_RDONLY, &txn)) != 0 ||
        (rc = pc_store_meta_read(s, txn, ld.name, ld.nlen, &ld.meta)) != 0 ||
        (ld.opts->on_meta != NULL && (rc = ld.opts->on_meta(ld.opts->meta_ctx, &ld.meta)) != 0) ||
        (rc = pc_ld_reserve(&ld)) != 0 ||
        (rc = pc_pipe_create(nw, depth, pc_ld_run, &ld, &pipe)) != 0 ||
        (rc = pc_ld_blocks(&ld, txn, pipe, jobs, depth)) != 0)
        goto out;
    mdb_txn_abort(txn);
    txn = NULL;
    pc_ld_finish(&ld, t0); /* prunes outside the read transaction */
    if (result != NULL)
        *result = ld.res;
    rc = ld.bad ? PC_ECORRUPT : 0;
out:
    if (pipe != NULL) {
        while (pc_pipe_next(pipe) != NULL)
            ;
        pc_pipe_destroy(pipe);
    }
    if (txn != NULL)
        mdb_txn_abort(txn);
    pc_sf_sum_free(&ld.sum);
    if (jobs != NULL)
        for (unsigned i = 0; i <= depth; i++)
            free(jobs[i].buf);
    free(jobs);
    if (ld.dctx != NULL)
        for (unsigned i = 0; i < ld.ndctx; i++)
            ZSTD_freeDCtx(ld.dctx[i]);
    free(ld.dctx);
    free(ld.prune);
    free(ld.prune_len);
    return rc;
}

/* ---- prune ---------------------------------------------------------------------- */
/* Rewrites the block under key without the records expired at now_ms.
 * *removed counts them; *key_bytes / *value_bytes their lengths. */
static int pc_prune_block(pc_store *s, MDB_txn *txn, ZSTD_CCtx *cc, ZSTD_DCtx *dc,
                          pc_sb_scratch *scratch, const char *name, size_t nlen, uint64_t gen,
                          const uint8_t *key, size_t klen, int64_t now_ms, uint64_t *removed,
                          uint64_t *key_bytes, uint64_t *value_bytes)
{
    MDB_val k = {klen, (void *)key}, v;
    int mrc = mdb_get(txn, s->blocks, &k, &v);
    if (mrc == MDB_NOTFOUND)
        return 0; /* gone meanwhile */
    if (mrc != 0)
        return mrc;
    pc_sf_block hdr;
    uint8_t *buf = NULL;
    size_t cap = 0;
    const uint8_t *raw;
    unsigned state;
    const char *why;
    pc_sb_raw nb;
    memset(&nb, 0, sizeof nb);
    pc_sb_out out;
    memset(&out, 0, sizeof out);
    int rc = pc_sb_unpack(dc, v.mv_data, v.mv_size, &hdr, &buf, &cap, &raw, &state, &why);
    if (rc != 0) { /* never rewrite a block that fails a check: leave it be */
        rc = 0;
        goto out;
    }
    uint64_t gone = 0, kb = 0, vb = 0;
    size_t off = 0, used;
    for (uint32_t i = 0; i < hdr.count; i++) {
        pc_sf_rec r;
        int key_ok;
        if (pc_sf_rec_decode(raw + off, hdr.raw_len - off, &used, &r, &key_ok, &why) != 0)
            goto out; /* a corrupt record: leave the block as it is */
        off += used;
        if (r.expires_ms != 0 && (int64_t)r.expires_ms <= now_ms) {
            gone++;
            kb += r.klen;
            vb += r.vlen;
            continue;
        }
        if ((rc = pc_sb_raw_add(&nb, &r, pc_sf_order(r.key, r.klen))) != 0)
            goto out;
    }
    if (gone == 0 || off != hdr.raw_len)
        goto out;
    if ((mrc = mdb_del(txn, s->blocks, &k, NULL)) != 0)
        goto out;
    if (nb.count > 0) {
        if ((rc = pc_sb_pack(cc, s->zlevel, &nb, name, nlen, gen, scratch, &out)) != 0)
            goto out;
        MDB_val ok = {out.klen, out.key}, ov = {out.val_len, out.val};
        if ((mrc = mdb_put(txn, s->blocks, &ok, &ov, 0)) != 0)
            goto out;
    }
    *removed += gone;
    *key_bytes += kb;
    *value_bytes += vb;
out:
    free(buf);
    free(out.val);
    pc_sb_raw_free(&nb);
    if (rc != 0)
        return rc;
    return mrc;
}

/* Re-derives a collection's count, sizes and checksum from its block
 * headers inside txn. */
static int pc_prune_rederive(pc_store *s, MDB_txn *txn, const char *name, size_t nlen,
                             pc_store_coll_meta *m)
{
    MDB_cursor *cur;
    int mrc = mdb_cursor_open(txn, s->blocks, &cur);
    if (mrc != 0)
        return mrc;
    pc_sf_sum sum;
    if (pc_sf_sum_init(&sum) != 0) {
        mdb_cursor_close(cur);
        return PC_EHEAP;
    }
    uint8_t pk[PC_SF_BKEY_MAX];
    memcpy(pk, name, nlen);
    pk[nlen] = 0;
    MDB_val k = {nlen + 1, pk}, v;
    uint64_t count = 0, blocks = 0, rawb = 0, stored = 0;
    int rc = 0;
    for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); mrc == 0;
         mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size <= nlen || memcmp(k.mv_data, pk, nlen + 1) != 0)
            break;
        pc_sf_block h;
        const char *why;
        if ((rc = pc_sf_block_decode(v.mv_data, v.mv_size, &h, &why)) != 0)
            break;
        count += h.count;
        blocks++;
        rawb += h.raw_len;
        stored += v.mv_size;
        pc_sf_sum_add(&sum, h.raw_sum);
    }
    mdb_cursor_close(cur);
    if (rc != 0 || (mrc != 0 && mrc != MDB_NOTFOUND)) {
        pc_sf_sum_free(&sum);
        return rc != 0 ? rc : mrc;
    }
    m->count = count;
    m->blocks = blocks;
    m->raw_bytes = rawb;
    m->stored_bytes = stored;
    m->content_checksum = pc_sf_sum_final(&sum);
    return 0;
}

static int pc_store_prune(pc_store *s, const char *name, size_t nlen, uint64_t gen,
                          uint8_t (*keys)[PC_SF_BKEY_MAX], const size_t *klens, size_t nkeys,
                          uint64_t *pruned)
{
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    pc_sb_scratch scratch = {NULL, 0};
    int rc = cc != NULL && dc != NULL ? 0 : PC_EHEAP;
    for (int attempt = 0; rc == 0 && attempt < 12; attempt++) {
        MDB_txn *txn;
        if ((rc = pc_store_txn_begin(s, 0, &txn)) != 0)
            break;
        pc_store_coll_meta m;
        rc = pc_store_meta_read(s, txn, name, nlen, &m);
        if (rc != 0 || m.generation != gen) {
            mdb_txn_abort(txn);
            if (rc == 0)
                PC_SLOG(s, PC_LOG_DEBUG,
                        "store %s: collection %s: generation %llu saved meanwhile, no prune",
                        s->path, name, (unsigned long long)m.generation);
            rc = rc == PC_ENOTFOUND ? 0 : rc;
            break;
        }
        int64_t now = pc_wall_ms();
        uint64_t removed = 0, kb = 0, vb = 0;
        int mrc = 0;
        for (size_t i = 0; i < nkeys && mrc == 0; i++)
            mrc = pc_prune_block(s, txn, cc, dc, &scratch, name, nlen, gen, keys[i], klens[i], now,
                                 &removed, &kb, &vb);
        if (mrc == 0 && removed > 0)
            mrc = pc_prune_rederive(s, txn, name, nlen, &m);
        if (mrc == 0 && removed > 0) /* blocks of this version were written */
            mrc = pc_store_hdr_upgrade(s, txn);
        if (mrc == 0 && removed > 0) {
            m.key_bytes -= kb <= m.key_bytes ? kb : m.key_bytes;
            m.value_bytes -= vb <= m.value_bytes ? vb : m.value_bytes;
            uint8_t mb[PC_SF_META_SIZE], mk[2 + PC_COLL_NAME_MAX];
            pc_sf_meta_encode(&m, mb);
            MDB_val mkv = {pc_sf_meta_key(mk, 'c', name, nlen), mk}, mv = {sizeof mb, mb};
            mrc = mdb_put(txn, s->meta, &mkv, &mv, 0);
        }
        if (mrc == 0 && removed > 0) {
            mrc = mdb_txn_commit(txn);
            txn = NULL;
        }
        if (txn != NULL)
            mdb_txn_abort(txn);
        if (mrc == MDB_MAP_FULL) {
            rc = pc_store_grow(s, 0);
            continue;
        }
        if (mrc < 0 && mrc > -100) /* a PC_E* code from the block rewrite */
            rc = mrc;
        else if (mrc != 0)
            rc = pc_store_mdb_err(s, mrc, "prune expired records");
        if (rc == 0) {
            *pruned += removed;
            if (removed > 0)
                PC_SLOG(s, PC_LOG_INFO, "store %s: collection %s: pruned %llu expired records",
                        s->path, name, (unsigned long long)removed);
        }
        break;
    }
    ZSTD_freeCCtx(cc);
    ZSTD_freeDCtx(dc);
    free(scratch.buf);
    return rc;
}
