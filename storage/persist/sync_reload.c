/*
 * sync_reload.c - a replica's reload of one collection from the shared
 * database (docs/sync.md "Reload"): upsert every live row of the new
 * snapshot, then prune the keys the snapshot lacks.
 *
 * Why this order: a key present before and after the sync is overwritten
 * in place (the engine's seqlocked store: a reader sees the old or the new
 * value, never a miss), and is never deleted, because the prune only
 * removes keys that the snapshot does not hold. A delete-then-load would
 * open exactly the window docs/sync.md "Guarantees and limits" forbids.
 *
 * The prune needs the set of the snapshot's keys. It is kept as 64-bit
 * hashes (pc_hash, seeded per reload) in a process-local open-addressing
 * table: 16 bytes per key at most, not the keys themselves. A hash
 * collision can only keep a key that should have been pruned (until the
 * next sync), never remove one the snapshot holds; at 10^6 keys its odds
 * are about 3 in 10^8 per reload.
 *
 * Expired rows are skipped by the backend (and again here, with this
 * process's clock): a key whose row has expired is not in the set, so it
 * is pruned if it still lingers. Keys written locally on a replica during
 * a reload and absent from the snapshot are pruned: a replica's copy is the
 * database's (single-writer topology).
 */
#include "persist_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct keyset {
    uint64_t *slot; /* 0 = empty; a hash of 0 is stored as 1 */
    size_t cap;     /* a power of two */
    size_t n;
    uint64_t seed;
};

static uint64_t ks_hash(const struct keyset *ks, const void *key, size_t klen)
{
    uint64_t h = pc_hash(key, klen) ^ ks->seed;
    h ^= h >> 33; /* the seed must reach every bit the index uses */
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h != 0 ? h : 1;
}

static int ks_grow(struct keyset *ks)
{
    size_t cap = ks->cap != 0 ? ks->cap * 2 : 1024;
    uint64_t *s = calloc(cap, sizeof *s);
    if (s == NULL)
        return PC_EHEAP;
    for (size_t i = 0; i < ks->cap; i++) {
        uint64_t h = ks->slot[i];
        if (h == 0)
            continue;
        size_t j = (size_t)h & (cap - 1);
        while (s[j] != 0)
            j = (j + 1) & (cap - 1);
        s[j] = h;
    }
    free(ks->slot);
    ks->slot = s;
    ks->cap = cap;
    return 0;
}

static int ks_add(struct keyset *ks, uint64_t h)
{
    if ((ks->n + 1) * 2 > ks->cap) {
        int rc = ks_grow(ks);
        if (rc != 0)
            return rc;
    }
    size_t j = (size_t)h & (ks->cap - 1);
    while (ks->slot[j] != 0) {
        if (ks->slot[j] == h)
            return 0;
        j = (j + 1) & (ks->cap - 1);
    }
    ks->slot[j] = h;
    ks->n++;
    return 0;
}

static bool ks_has(const struct keyset *ks, uint64_t h)
{
    if (ks->cap == 0)
        return false;
    size_t j = (size_t)h & (ks->cap - 1);
    while (ks->slot[j] != 0) {
        if (ks->slot[j] == h)
            return true;
        j = (j + 1) & (ks->cap - 1);
    }
    return false;
}

struct reload_ctx {
    pc_persist *p;
    pc_coll *coll;
    struct keyset ks;
    int64_t now_ms;
    uint64_t loaded, failed, pruned;
};

static int rl_row(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                  int64_t expires_ms, int is_counter)
{
    struct reload_ctx *r = ctx;
    int64_t ttl = 0;
    if (expires_ms != 0) {
        ttl = expires_ms - r->now_ms;
        if (ttl <= 0)
            return 0; /* expired: not loaded, so pruned if it lingers here */
    }
    /* In the set even when the store below fails: the key is in the
     * snapshot, so its previous value is better kept than pruned. */
    int rc = ks_add(&r->ks, ks_hash(&r->ks, key, klen));
    if (rc != 0)
        return rc;
    int64_t v;
    if (is_counter)
        rc = pc_parse_i64(val, vlen, &v) == 0 ? pc_set_counter(r->coll, key, klen, v, ttl)
                                              : PC_ENOTNUM;
    else
        rc = pc_set(r->coll, key, klen, val, vlen, ttl, 0);
    if (rc != 0) {
        r->failed++;
        if (r->failed <= 3)
            pc_log_emit(&r->p->log, PC_LOG_ERR,
                        "pcache: sync: reloading %s: a row (key of %zu bytes) was refused: %s",
                        pc_coll_name(r->coll), klen, pc_store_strerror(rc));
        return 0;
    }
    r->loaded++;
    return 0;
}

static int rl_prune(void *ctx, const pc_entry *e)
{
    struct reload_ctx *r = ctx;
    if (ks_has(&r->ks, ks_hash(&r->ks, e->key, e->klen)))
        return 0;
    if (pc_remove(r->coll, e->key, e->klen) == 0)
        r->pruned++;
    return 0;
}

int pc_sync_reload(pc_persist *p, pc_coll *coll, uint64_t newer_than, uint64_t *gen, char *source,
                   size_t srclen, uint64_t *loaded, uint64_t *pruned)
{
    struct reload_ctx r;
    memset(&r, 0, sizeof r);
    r.p = p;
    r.coll = coll;
    r.now_ms = pc_wall_ms();
    int64_t ns = pc_clock_ns(CLOCK_MONOTONIC);
    r.ks.seed = ((uint64_t)(ns % 1000000000) << 20) ^ (uint64_t)(ns / 1000000000) ^
                (uint64_t)(uintptr_t)&r;
    uint64_t g = 0, skipped = 0;
    int rc = p->backend->rows(p->bh, pc_coll_name(coll), newer_than, rl_row, &r, &g, source, srclen,
                              &skipped);
    /* Prune only after a complete snapshot: after a failed read the set is
     * partial, and the keys it misses must stay. */
    if (rc == 0 && g > newer_than)
        rc = pc_walk(coll, NULL, 0, 0, rl_prune, &r);
    free(r.ks.slot);
    if (rc != 0)
        return rc;
    *gen = g;
    *loaded = r.loaded;
    *pruned = r.pruned;
    return 0;
}
