/*
 * store_read.c - the offline API: collection metadata, list, drop, point
 * lookup, ordered iteration, verify and info. Every call is one LMDB
 * transaction, so it sees one committed state of the store even while
 * another process saves.
 *
 * The point lookup is the reason blocks are keyed by their LAST order key
 * (docs/snapshot-format.md §5.2): a range search for name\0 + BE(order of
 * the key) lands on the first block whose last order key is >= the key's,
 * the only block whose range can hold it, since equal order keys never
 * straddle two blocks. One block (~64 KiB raw) is decompressed and scanned.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#include "store_int.h"

/* The start of every offline read: the caller's own arguments (args_ok
 * false: PC_EINVAL before anything else), the store, the process that
 * opened it, name when given, then a read-only transaction. */
static int pc_rd_begin(pc_store *s, int args_ok, const char *name, size_t *nlen, MDB_txn **txn)
{
    if (!args_ok || s == NULL)
        return PC_EINVAL;
    int rc = pc_store_check_pid(s);
    if (rc != 0)
        return rc;
    if (name != NULL && (rc = pc_sf_name_ok(name, nlen)) != 0)
        return rc;
    return pc_store_txn_begin(s, MDB_RDONLY, txn);
}

/* The end of a read of blocks: releases what pc_rd_begin and the block
 * walk took, in reverse order (cur and dc may be NULL); returns rc. */
static int pc_rd_end(MDB_txn *txn, MDB_cursor *cur, ZSTD_DCtx *dc, void *buf, int rc)
{
    if (cur != NULL)
        mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    ZSTD_freeDCtx(dc);
    free(buf);
    return rc;
}

int pc_store_coll_meta_get(pc_store *s, const char *name, pc_store_coll_meta *out)
{
    size_t nlen;
    MDB_txn *txn;
    int rc = pc_rd_begin(s, out != NULL, name, &nlen, &txn);
    if (rc != 0)
        return rc;
    rc = pc_store_meta_read(s, txn, name, nlen, out);
    mdb_txn_abort(txn);
    return rc;
}

int pc_store_list(pc_store *s, pc_store_coll_meta **out, size_t *n)
{
    MDB_txn *txn;
    MDB_cursor *cur = NULL;
    pc_store_coll_meta *list = NULL;
    size_t cnt = 0, cap = 0;
    int rc = pc_rd_begin(s, out != NULL && n != NULL, NULL, NULL, &txn), mrc;
    if (rc != 0)
        return rc;
    if ((mrc = mdb_cursor_open(txn, s->meta, &cur)) != 0) {
        rc = pc_store_mdb_err(s, mrc, "list collections");
        goto out;
    }
    MDB_val k = {2, (void *)"c:"}, v;
    for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); mrc == 0;
         mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        const char *kd = k.mv_data;
        if (k.mv_size < 2 || kd[0] != 'c' || kd[1] != ':')
            break;
        size_t nl = k.mv_size - 2;
        if (nl == 0 || nl > PC_COLL_NAME_MAX) {
            PC_SLOG(s, PC_LOG_WARN, "store %s: a meta key of %zu bytes ignored", s->path,
                    k.mv_size);
            continue;
        }
        if (cnt == cap) {
            cap = cap == 0 ? 16 : cap * 2;
            pc_store_coll_meta *nl2 = realloc(list, cap * sizeof *nl2);
            if (nl2 == NULL) {
                rc = PC_EHEAP;
                goto out;
            }
            list = nl2;
        }
        pc_store_coll_meta *m = &list[cnt++];
        memset(m, 0, sizeof *m);
        const char *why = "";
        if (pc_sf_meta_decode(v.mv_data, v.mv_size, m, &why) != 0) {
            PC_SLOG(s, PC_LOG_ERR, "store %s: collection %.*s: %s", s->path, (int)nl, kd + 2, why);
            memset(m, 0, sizeof *m);
        }
        memcpy(m->name, kd + 2, nl);
        m->name[nl] = 0;
    }
    if (mrc != 0 && mrc != MDB_NOTFOUND)
        rc = pc_store_mdb_err(s, mrc, "list collections");
out:
    if (cur != NULL)
        mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    if (rc != 0) {
        free(list);
        return rc;
    }
    *out = list;
    *n = cnt;
    return 0;
}

void pc_store_list_free(pc_store_coll_meta *list)
{
    free(list);
}

int pc_store_drop(pc_store *s, const char *name)
{
    size_t nlen;
    if (s == NULL || (s->flags & PC_STORE_RDONLY) != 0)
        return PC_EINVAL;
    int rc = pc_store_check_pid(s);
    if (rc != 0)
        return rc;
    if ((rc = pc_sf_name_ok(name, &nlen)) != 0)
        return rc;
    for (int attempt = 0; attempt < 12; attempt++) {
        MDB_txn *txn;
        MDB_cursor *cur = NULL;
        if ((rc = pc_store_txn_begin(s, 0, &txn)) != 0)
            return rc;
        uint8_t mk[2 + PC_COLL_NAME_MAX], pk[PC_SF_BKEY_MAX];
        MDB_val mkv = {pc_sf_meta_key(mk, 'c', name, nlen), mk};
        int mrc = mdb_del(txn, s->meta, &mkv, NULL), found = mrc == 0;
        if (mrc == MDB_NOTFOUND)
            mrc = 0;
        memcpy(pk, name, nlen);
        pk[nlen] = 0;
        if (mrc == 0)
            mrc = mdb_cursor_open(txn, s->blocks, &cur);
        while (mrc == 0) {
            MDB_val k = {nlen + 1, pk}, v;
            mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
            if (mrc != 0 || k.mv_size <= nlen || memcmp(k.mv_data, pk, nlen + 1) != 0)
                break;
            if ((mrc = mdb_cursor_del(cur, 0)) == 0)
                found = 1;
        }
        if (cur != NULL)
            mdb_cursor_close(cur);
        if (mrc == MDB_NOTFOUND)
            mrc = 0;
        rc = pc_store_txn_finish(s, txn, mrc, found, "drop a collection");
        if (rc == PC_STORE_AGAIN)
            continue;
        if (rc != 0)
            return rc;
        if (found)
            PC_SLOG(s, PC_LOG_INFO, "store %s: collection %s dropped", s->path, name);
        return found ? 0 : PC_ENOTFOUND;
    }
    return PC_EIO;
}

/* ---- point lookup ---------------------------------------------------------------- */
int pc_store_get(pc_store *s, const char *name, const void *key, size_t klen, unsigned flags,
                 void **val, size_t *vlen, pc_store_record *rec)
{
    size_t nlen;
    MDB_txn *txn;
    int args_ok = val != NULL && vlen != NULL && (key != NULL || klen == 0) && klen <= PC_KEY_MAX;
    int rc = pc_rd_begin(s, args_ok, name, &nlen, &txn);
    if (rc != 0)
        return rc;
    MDB_cursor *cur = NULL;
    ZSTD_DCtx *dc = NULL;
    uint8_t *buf = NULL;
    size_t cap = 0;
    pc_store_coll_meta m;
    if ((rc = pc_store_meta_read(s, txn, name, nlen, &m)) != 0)
        goto out;
    uint64_t order = pc_sf_order(key, klen);
    uint8_t bk[PC_SF_BKEY_MAX];
    MDB_val k = {pc_sf_bkey(bk, name, nlen, order), bk}, v;
    int mrc = mdb_cursor_open(txn, s->blocks, &cur);
    if (mrc == 0)
        mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    if (mrc == MDB_NOTFOUND ||
        (mrc == 0 && (k.mv_size != nlen + 9 || memcmp(k.mv_data, bk, nlen + 1) != 0))) {
        rc = PC_ENOTFOUND; /* past the collection's last block */
        goto out;
    }
    if (mrc != 0) {
        rc = pc_store_mdb_err(s, mrc, "look up a key");
        goto out;
    }
    if ((dc = ZSTD_createDCtx()) == NULL) {
        rc = PC_EHEAP;
        goto out;
    }
    pc_sf_block hdr;
    const uint8_t *raw;
    unsigned state;
    const char *why = "";
    rc = pc_sb_unpack(dc, v.mv_data, v.mv_size, &hdr, &buf, &cap, &raw, &state, &why);
    if (rc != 0) {
        pc_store_report_block(s, name, &hdr, (state & PC_SB_HDR) != 0, why,
                              (state & PC_SB_RAW) ? raw : NULL);
        goto out;
    }
    rc = PC_ENOTFOUND;
    if (order < hdr.first)
        goto out;
    size_t off = 0, used;
    for (uint32_t i = 0; i < hdr.count && off < hdr.raw_len; i++) {
        pc_sf_rec r;
        int key_ok;
        int drc = pc_sf_rec_decode(raw + off, hdr.raw_len - off, &used, &r, &key_ok, &why);
        int match = key_ok && r.klen == klen && (klen == 0 || memcmp(r.key, key, klen) == 0);
        if (drc != 0 && (match || !key_ok)) {
            char ks[360];
            PC_SLOG(s, PC_LOG_ERR, "store %s: collection %s: key '%s': %s", s->path, name,
                    pc_sf_keystr(key_ok ? r.key : key, key_ok ? r.klen : klen, ks, sizeof ks), why);
            rc = PC_ECORRUPT;
            goto out;
        }
        off += used;
        if (!match)
            continue;
        if (r.expires_ms != 0 && (int64_t)r.expires_ms <= pc_wall_ms() &&
            (flags & PC_STORE_INCLUDE_EXPIRED) == 0)
            goto out;
        uint8_t *copy = malloc(r.vlen + 1);
        if (copy == NULL) {
            rc = PC_EHEAP;
            goto out;
        }
        if (r.vlen > 0)
            memcpy(copy, r.val, r.vlen);
        copy[r.vlen] = 0;
        *val = copy;
        *vlen = r.vlen;
        if (rec != NULL) {
            memset(rec, 0, sizeof *rec);
            rec->klen = r.klen;
            rec->vlen = r.vlen;
            rec->expires_ms = (int64_t)r.expires_ms;
            rec->is_counter = (r.flags & PC_SF_REC_COUNTER) != 0;
            rec->stamp = r.stamp;
            rec->order = order;
        }
        rc = 0;
        break;
    }
out:
    return pc_rd_end(txn, cur, dc, buf, rc);
}

/* ---- iteration --------------------------------------------------------------------- */
/* The records of one unpacked block (hdr, raw) handed to fn, expired ones
 * passed over unless flags include them; *seen counts the records decoded,
 * *bad is set by one that does not decode (logged). fn's non-zero stops. */
static int pc_it_block(pc_store *s, const char *name, const pc_sf_block *hdr, const uint8_t *raw,
                       unsigned flags, int64_t now, pc_store_iter_fn fn, void *ctx, uint64_t *seen,
                       int *bad)
{
    size_t off = 0, used;
    int rc = 0;
    for (uint32_t i = 0; i < hdr->count && off < hdr->raw_len && rc == 0; i++) {
        pc_sf_rec r;
        int key_ok;
        const char *why = "";
        if (pc_sf_rec_decode(raw + off, hdr->raw_len - off, &used, &r, &key_ok, &why) != 0) {
            char ks[360] = "?";
            if (key_ok)
                pc_sf_keystr(r.key, r.klen, ks, sizeof ks);
            PC_SLOG(s, PC_LOG_ERR, "store %s: collection %s: block %016llx..%016llx, key '%s': %s",
                    s->path, name, (unsigned long long)hdr->first, (unsigned long long)hdr->last,
                    ks, why);
            *bad = 1;
            if (!key_ok)
                break;
            off += used;
            continue;
        }
        off += used;
        (*seen)++;
        if (r.expires_ms != 0 && (int64_t)r.expires_ms <= now &&
            (flags & PC_STORE_INCLUDE_EXPIRED) == 0)
            continue;
        pc_store_record pr = {.key = r.key,
                              .klen = r.klen,
                              .val = r.val,
                              .vlen = r.vlen,
                              .expires_ms = (int64_t)r.expires_ms,
                              .is_counter = (r.flags & PC_SF_REC_COUNTER) != 0,
                              .stamp = r.stamp,
                              .order = pc_sf_order(r.key, r.klen)};
        rc = fn(ctx, &pr);
    }
    return rc;
}

int pc_store_iterate(pc_store *s, const char *name, unsigned flags, pc_store_iter_fn fn, void *ctx)
{
    size_t nlen;
    MDB_txn *txn;
    int rc = pc_rd_begin(s, fn != NULL, name, &nlen, &txn);
    if (rc != 0)
        return rc;
    MDB_cursor *cur = NULL;
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    uint8_t *buf = NULL;
    size_t cap = 0;
    int bad = 0, mrc;
    uint64_t seen = 0, nblocks = 0; /* records decoded, blocks met */
    pc_store_coll_meta m;
    if (dc == NULL) {
        rc = PC_EHEAP;
        goto out;
    }
    if ((rc = pc_store_meta_read(s, txn, name, nlen, &m)) != 0)
        goto out;
    if ((mrc = mdb_cursor_open(txn, s->blocks, &cur)) != 0) {
        rc = pc_store_mdb_err(s, mrc, "iterate");
        goto out;
    }
    uint8_t pk[PC_SF_BKEY_MAX];
    memcpy(pk, name, nlen);
    pk[nlen] = 0;
    MDB_val k = {nlen + 1, pk}, v;
    int64_t now = pc_wall_ms();
    for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); mrc == 0 && rc == 0;
         mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size <= nlen || memcmp(k.mv_data, pk, nlen + 1) != 0)
            break;
        pc_sf_block hdr;
        const uint8_t *raw;
        unsigned state;
        const char *why = "";
        nblocks++;
        if (pc_sb_unpack(dc, v.mv_data, v.mv_size, &hdr, &buf, &cap, &raw, &state, &why) != 0) {
            pc_store_report_block(s, name, &hdr, (state & PC_SB_HDR) != 0, why,
                                  (state & PC_SB_RAW) ? raw : NULL);
            bad = 1;
            continue;
        }
        rc = pc_it_block(s, name, &hdr, raw, flags, now, fn, ctx, &seen, &bad);
    }
    if (rc == 0 && mrc != 0 && mrc != MDB_NOTFOUND)
        rc = pc_store_mdb_err(s, mrc, "iterate");
    if (rc == 0 && bad)
        rc = PC_ECORRUPT;
    /* every block read and none stopped the walk: the snapshot must be all
     * there. A damaged index can hide blocks from the cursor without any
     * block failing; the meta's counts catch it. */
    if (rc == 0 && (seen != m.count || nblocks != m.blocks)) {
        PC_SLOG(s, PC_LOG_ERR,
                "store %s: collection %s: read %llu records in %llu blocks, the meta says %llu in "
                "%llu: the snapshot is incomplete (run verify)",
                s->path, name, (unsigned long long)seen, (unsigned long long)nblocks,
                (unsigned long long)m.count, (unsigned long long)m.blocks);
        rc = PC_ECORRUPT;
    }
out:
    return pc_rd_end(txn, cur, dc, buf, rc);
}

/* ---- verify ----------------------------------------------------------------------------- */
#define PC_VERIFY_MAX 1000u

struct pc_vf {
    pc_store *s;
    pc_store_problem *list;
    size_t n, cap;
    int oom;
};

__attribute__((format(printf, 7, 8))) static void pc_vf_add(struct pc_vf *vf, int kind,
                                                            const char *coll, const pc_sf_block *h,
                                                            const void *key, size_t klen,
                                                            const char *fmt, ...)
{
    if (vf->n >= PC_VERIFY_MAX || vf->oom)
        return;
    if (vf->n == vf->cap) {
        size_t cap = vf->cap == 0 ? 16 : vf->cap * 2;
        pc_store_problem *nl = realloc(vf->list, cap * sizeof *nl);
        if (nl == NULL) {
            vf->oom = 1;
            return;
        }
        vf->list = nl;
        vf->cap = cap;
    }
    pc_store_problem *p = &vf->list[vf->n];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    snprintf(p->collection, sizeof p->collection, "%s", coll);
    if (h != NULL) {
        p->first = h->first;
        p->last = h->last;
    }
    if (key != NULL) {
        p->key = malloc(klen + 1);
        if (p->key == NULL) {
            vf->oom = 1;
            return;
        }
        memcpy(p->key, key, klen);
        ((char *)p->key)[klen] = 0;
        p->klen = klen;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->message, sizeof p->message, fmt, ap);
    va_end(ap);
    vf->n++;
    char ks[360] = "";
    if (key != NULL)
        pc_sf_keystr(key, klen, ks, sizeof ks);
    PC_SLOG(vf->s, PC_LOG_ERR, "store %s: verify: collection %s%s%s%s: %s", vf->s->path, coll,
            key != NULL ? ", key '" : "", ks, key != NULL ? "'" : "", p->message);
}

/* Checks the records of one verified block. */
static void pc_vf_records(struct pc_vf *vf, const char *name, const pc_sf_block *h,
                          const uint8_t *raw, uint64_t *prev_order, const uint8_t **prev_key,
                          size_t *prev_klen, uint8_t **keep, size_t *keep_cap)
{
    size_t off = 0, used;
    uint32_t n = 0;
    for (; n < h->count && off < h->raw_len; n++) {
        pc_sf_rec r;
        int key_ok;
        const char *why;
        if (pc_sf_rec_decode(raw + off, h->raw_len - off, &used, &r, &key_ok, &why) != 0) {
            pc_vf_add(vf, PC_SP_RECORD, name, h, key_ok ? r.key : NULL, key_ok ? r.klen : 0,
                      "record %u: %s", n, why);
            if (!key_ok)
                return;
            off += used;
            continue;
        }
        off += used;
        uint64_t o = pc_sf_order(r.key, r.klen);
        if (o < h->first || o > h->last || (n == 0 && o != h->first) ||
            (n + 1 == h->count && o != h->last))
            pc_vf_add(vf, PC_SP_ORDER, name, h, r.key, r.klen,
                      "record order key %016llx outside its block's range or not at its end",
                      (unsigned long long)o);
        if (*prev_key != NULL &&
            pc_sf_rec_cmp(*prev_order, *prev_key, *prev_klen, o, r.key, r.klen) >= 0)
            pc_vf_add(vf, PC_SP_ORDER, name, h, r.key, r.klen,
                      "record not after the one before it (order %016llx)", (unsigned long long)o);
        /* remember this key for the next comparison (raw is reused) */
        if (*keep_cap < r.klen + 1) {
            uint8_t *nk = realloc(*keep, r.klen + 1);
            if (nk == NULL) {
                vf->oom = 1;
                return;
            }
            *keep = nk;
            *keep_cap = r.klen + 1;
        }
        if (r.klen > 0)
            memcpy(*keep, r.key, r.klen);
        *prev_key = *keep;
        *prev_klen = r.klen;
        *prev_order = o;
    }
    if (n != h->count || off != h->raw_len)
        pc_vf_add(vf, PC_SP_RECORD, name, h, NULL, 0,
                  "block holds %u records in %zu bytes, its header says %u in %u", n, off, h->count,
                  h->raw_len);
}

/* Format version 2: the block header names the collection and the
 * generation too (m NULL: no meta to compare with). */
static void pc_vf_block_names(struct pc_vf *vf, const char *name, size_t nlen, const pc_sf_block *h,
                              const pc_store_coll_meta *m)
{
    if (h->version < 2)
        return;
    if (h->nlen != nlen || memcmp(h->name, name, nlen) != 0)
        pc_vf_add(vf, PC_SP_BLOCK, name, h, NULL, 0, "block header names collection '%s'", h->name);
    else if (m != NULL && h->generation != m->generation)
        pc_vf_add(vf, PC_SP_BLOCK, name, h, NULL, 0,
                  "block of generation %llu in snapshot generation %llu (a stale block)",
                  (unsigned long long)h->generation, (unsigned long long)m->generation);
}

static int pc_vf_coll(struct pc_vf *vf, MDB_txn *txn, ZSTD_DCtx *dc, const char *name, size_t nlen,
                      const pc_store_coll_meta *m)
{
    pc_store *s = vf->s;
    MDB_cursor *cur;
    int mrc = mdb_cursor_open(txn, s->blocks, &cur);
    if (mrc != 0)
        return pc_store_mdb_err(s, mrc, "verify");
    pc_sf_sum sum;
    if (pc_sf_sum_init(&sum) != 0) {
        mdb_cursor_close(cur);
        return PC_EHEAP;
    }
    uint8_t pk[PC_SF_BKEY_MAX], *buf = NULL, *keep = NULL;
    size_t cap = 0, keep_cap = 0, prev_klen = 0;
    const uint8_t *prev_key = NULL;
    uint64_t prev_order = 0, count = 0, blocks = 0, rawb = 0, stored = 0, prev_last = 0;
    int have_prev_block = 0;
    memcpy(pk, name, nlen);
    pk[nlen] = 0;
    MDB_val k = {nlen + 1, pk}, v;
    for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); mrc == 0;
         mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size <= nlen || memcmp(k.mv_data, pk, nlen + 1) != 0)
            break;
        blocks++;
        stored += v.mv_size;
        pc_sf_block h;
        const uint8_t *raw;
        unsigned state;
        const char *why = "";
        int rc = pc_sb_unpack(dc, v.mv_data, v.mv_size, &h, &buf, &cap, &raw, &state, &why);
        if ((state & PC_SB_HDR) == 0) {
            pc_vf_add(vf, PC_SP_BLOCK, name, NULL, NULL, 0, "block #%llu: %s",
                      (unsigned long long)blocks - 1, why);
            prev_key = NULL;
            continue;
        }
        count += h.count;
        rawb += h.raw_len;
        pc_sf_sum_add(&sum, h.raw_sum);
        if (k.mv_size != nlen + 9 || pc_get_be64((const uint8_t *)k.mv_data + nlen + 1) != h.last)
            pc_vf_add(vf, PC_SP_ORDER, name, &h, NULL, 0,
                      "block stored under a key that does not name its last order key");
        pc_vf_block_names(vf, name, nlen, &h, m);
        if (have_prev_block && h.first <= prev_last)
            pc_vf_add(vf, PC_SP_ORDER, name, &h, NULL, 0,
                      "block range starts at or before the previous block's end %016llx",
                      (unsigned long long)prev_last);
        have_prev_block = 1;
        prev_last = h.last;
        if (rc != 0) {
            const uint8_t *bk = NULL;
            size_t bkl = 0;
            if ((state & PC_SB_RAW) != 0) { /* name the first key that the raw bytes show */
                pc_sf_rec r;
                size_t used;
                int key_ok;
                const char *w;
                (void)pc_sf_rec_decode(raw, h.raw_len, &used, &r, &key_ok, &w);
                if (key_ok) {
                    bk = r.key;
                    bkl = r.klen;
                }
            }
            pc_vf_add(vf, PC_SP_BLOCK, name, &h, bk, bkl, "%s (%u records)", why, h.count);
            prev_key = NULL;
            continue;
        }
        pc_vf_records(vf, name, &h, raw, &prev_order, &prev_key, &prev_klen, &keep, &keep_cap);
    }
    mdb_cursor_close(cur);
    free(buf);
    free(keep);
    uint64_t cs = pc_sf_sum_final(&sum);
    if (mrc != 0 && mrc != MDB_NOTFOUND)
        return pc_store_mdb_err(s, mrc, "verify");
    if (m == NULL) {
        if (blocks > 0)
            pc_vf_add(vf, PC_SP_ORPHAN, name, NULL, NULL, 0, "%llu blocks without a meta record",
                      (unsigned long long)blocks);
        return 0;
    }
    if (count != m->count || blocks != m->blocks)
        pc_vf_add(vf, PC_SP_COUNT, name, NULL, NULL, 0,
                  "the blocks hold %llu records in %llu blocks, the meta says %llu in %llu",
                  (unsigned long long)count, (unsigned long long)blocks,
                  (unsigned long long)m->count, (unsigned long long)m->blocks);
    if (cs != m->content_checksum)
        pc_vf_add(vf, PC_SP_CHECKSUM, name, NULL, NULL, 0,
                  "content checksum of the blocks %016llx, the meta says %016llx",
                  (unsigned long long)cs, (unsigned long long)m->content_checksum);
    if (rawb != m->raw_bytes || stored != m->stored_bytes)
        pc_vf_add(vf, PC_SP_COUNT, name, NULL, NULL, 0,
                  "the blocks hold %llu raw / %llu stored bytes, the meta says %llu / %llu",
                  (unsigned long long)rawb, (unsigned long long)stored,
                  (unsigned long long)m->raw_bytes, (unsigned long long)m->stored_bytes);
    return 0;
}

/* verify of one named collection: its meta (damaged or absent) and blocks. */
static int pc_vf_one(struct pc_vf *vf, MDB_txn *txn, ZSTD_DCtx *dc, const char *name, size_t nlen)
{
    pc_store_coll_meta m;
    int rc = pc_store_meta_read(vf->s, txn, name, nlen, &m);
    if (rc == PC_ECORRUPT || rc == PC_EFORMAT) {
        pc_vf_add(vf, PC_SP_META, name, NULL, NULL, 0, "meta record: %s", pc_store_strerror(rc));
        return pc_vf_coll(vf, txn, dc, name, nlen, NULL);
    }
    if (rc == PC_ENOTFOUND) {
        rc = pc_vf_coll(vf, txn, dc, name, nlen, NULL);
        return rc == 0 && vf->n == 0 ? PC_ENOTFOUND : rc;
    }
    return rc == 0 ? pc_vf_coll(vf, txn, dc, name, nlen, &m) : rc;
}

/* verify of every collection that has a meta record. */
static int pc_vf_metas(struct pc_vf *vf, MDB_txn *txn, ZSTD_DCtx *dc)
{
    pc_store *s = vf->s;
    MDB_cursor *cur = NULL;
    int rc = 0, mrc = mdb_cursor_open(txn, s->meta, &cur);
    MDB_val k = {2, (void *)"c:"}, v;
    for (mrc = mrc != 0 ? mrc : mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); mrc == 0 && rc == 0;
         mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size < 2 || memcmp(k.mv_data, "c:", 2) != 0)
            break;
        char nm[PC_COLL_NAME_MAX + 1];
        size_t nl = k.mv_size - 2, l2;
        snprintf(nm, sizeof nm, "%.*s", (int)(nl > PC_COLL_NAME_MAX ? PC_COLL_NAME_MAX : nl),
                 (const char *)k.mv_data + 2);
        if (pc_sf_name_ok(nm, &l2) != 0 || l2 != nl) {
            pc_vf_add(vf, PC_SP_META, nm, NULL, NULL, 0, "a meta key that names no collection");
            continue;
        }
        pc_store_coll_meta m;
        int r = pc_store_meta_read(s, txn, nm, nl, &m);
        if (r == PC_ECORRUPT || r == PC_EFORMAT)
            pc_vf_add(vf, PC_SP_META, nm, NULL, NULL, 0, "meta record: %s", pc_store_strerror(r));
        rc = pc_vf_coll(vf, txn, dc, nm, nl, r == 0 ? &m : NULL);
    }
    if (rc == 0 && mrc != 0 && mrc != MDB_NOTFOUND)
        rc = pc_store_mdb_err(s, mrc, "verify");
    if (cur != NULL)
        mdb_cursor_close(cur);
    return rc;
}

/* verify of the blocks whose collection has no meta record: one name at a
 * time. */
static int pc_vf_orphans(struct pc_vf *vf, MDB_txn *txn, ZSTD_DCtx *dc)
{
    pc_store *s = vf->s;
    MDB_cursor *cur = NULL;
    MDB_val k, v;
    int rc = 0, mrc = mdb_cursor_open(txn, s->blocks, &cur);
    if (mrc == 0)
        mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    while (mrc == 0 && rc == 0) {
        const uint8_t *z = memchr(k.mv_data, 0, k.mv_size);
        size_t nl = z != NULL ? (size_t)(z - (const uint8_t *)k.mv_data) : k.mv_size, l2;
        char nm[PC_COLL_NAME_MAX + 1];
        snprintf(nm, sizeof nm, "%.*s", (int)(nl > PC_COLL_NAME_MAX ? PC_COLL_NAME_MAX : nl),
                 (const char *)k.mv_data);
        uint8_t nk[PC_SF_BKEY_MAX + 1];
        if (z == NULL || pc_sf_name_ok(nm, &l2) != 0 || l2 != nl) {
            pc_vf_add(vf, PC_SP_ORPHAN, nm, NULL, NULL, 0,
                      "a block key of %zu bytes that names no collection", k.mv_size);
            mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
            continue;
        }
        uint8_t mk[2 + PC_COLL_NAME_MAX];
        MDB_val mkv = {pc_sf_meta_key(mk, 'c', nm, nl), mk}, mv;
        if (mdb_get(txn, s->meta, &mkv, &mv) == MDB_NOTFOUND)
            rc = pc_vf_coll(vf, txn, dc, nm, nl, NULL);
        /* on to the first key after this collection's: name + 0x01 */
        memcpy(nk, nm, nl);
        nk[nl] = 1;
        k.mv_size = nl + 1;
        k.mv_data = nk;
        mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    }
    if (rc == 0 && mrc != 0 && mrc != MDB_NOTFOUND)
        rc = pc_store_mdb_err(s, mrc, "verify");
    if (cur != NULL)
        mdb_cursor_close(cur);
    return rc;
}

int pc_store_verify(pc_store *s, const char *name, pc_store_problem **out, size_t *n)
{
    size_t nlen = 0;
    MDB_txn *txn;
    int rc = pc_rd_begin(s, out != NULL && n != NULL, name, &nlen, &txn);
    if (rc != 0)
        return rc;
    struct pc_vf vf = {.s = s};
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    if (dc == NULL)
        rc = PC_EHEAP;
    else if (name != NULL)
        rc = pc_vf_one(&vf, txn, dc, name, nlen);
    else if ((rc = pc_vf_metas(&vf, txn, dc)) == 0)
        rc = pc_vf_orphans(&vf, txn, dc);
    mdb_txn_abort(txn);
    ZSTD_freeDCtx(dc);
    if (rc == 0 && vf.oom)
        rc = PC_EHEAP;
    if (rc != 0) {
        pc_store_problems_free(vf.list, vf.n);
        return rc;
    }
    *out = vf.list;
    *n = vf.n;
    return 0;
}

void pc_store_problems_free(pc_store_problem *list, size_t n)
{
    if (list == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(list[i].key);
    free(list);
}

const char *pc_store_problem_kind_name(int kind)
{
    switch (kind) {
    case PC_SP_META:
        return "meta";
    case PC_SP_BLOCK:
        return "block";
    case PC_SP_RECORD:
        return "record";
    case PC_SP_ORDER:
        return "order";
    case PC_SP_COUNT:
        return "count";
    case PC_SP_CHECKSUM:
        return "checksum";
    case PC_SP_ORPHAN:
        return "orphan";
    case PC_SP_PAGE:
        return "lmdb-page";
    case PC_SP_FILE:
        return "file";
    case PC_SP_NEWER:
        return "newer-format";
    case PC_SP_FOREIGN:
        return "not-a-store";
    default:
        return "unknown";
    }
}

/* ---- info --------------------------------------------------------------------------- */
int pc_store_info_get(pc_store *s, pc_store_info *out)
{
    MDB_txn *txn;
    int rc = pc_rd_begin(s, out != NULL, NULL, NULL, &txn);
    if (rc != 0)
        return rc;
    pc_store_info in;
    memset(&in, 0, sizeof in);
    MDB_envinfo ei;
    MDB_stat ms, bs;
    struct stat st;
    MDB_val hk = {PC_SF_HDR_KEYLEN, (void *)PC_SF_HDR_KEY}, hv;
    int mrc = mdb_env_info(s->env, &ei);
    if (mrc == 0)
        mrc = mdb_stat(txn, s->meta, &ms);
    if (mrc == 0)
        mrc = mdb_stat(txn, s->blocks, &bs);
    if (mrc == 0)
        mrc = mdb_get(txn, s->meta, &hk, &hv);
    if (mrc != 0) {
        rc = pc_store_mdb_err(s, mrc, "info");
        goto out;
    }
    pc_sf_hdr h;
    const char *why = "";
    if ((rc = pc_sf_hdr_decode(hv.mv_data, hv.mv_size, &h, &why)) != 0) {
        PC_SLOG(s, PC_LOG_ERR, "store %s: %s", s->path, why);
        goto out;
    }
    in.format_version = h.version;
    in.created_ms = h.created_ms;
    in.boot_gen = h.boot_gen;
    in.file_bytes = stat(s->dpath, &st) == 0 ? (uint64_t)st.st_size : 0;
    in.used_bytes = (uint64_t)(ei.me_last_pgno + 1) * s->psize;
    in.map_bytes = ei.me_mapsize;
    in.page_size = s->psize;
    in.max_readers = ei.me_maxreaders;
    in.readers = ei.me_numreaders;
    in.block_records = bs.ms_entries;
    in.overflow_pages = bs.ms_overflow_pages + ms.ms_overflow_pages;
    in.tree_pages = bs.ms_branch_pages + bs.ms_leaf_pages + ms.ms_branch_pages + ms.ms_leaf_pages;
    /* collections: the "c:" keys of meta */
    MDB_cursor *cur;
    if ((mrc = mdb_cursor_open(txn, s->meta, &cur)) == 0) {
        MDB_val k = {2, (void *)"c:"}, v;
        for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); mrc == 0;
             mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
            if (k.mv_size < 2 || memcmp(k.mv_data, "c:", 2) != 0)
                break;
            in.collections++;
        }
        mdb_cursor_close(cur);
    }
    *out = in;
out:
    mdb_txn_abort(txn);
    return rc;
}
