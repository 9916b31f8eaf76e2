/*
 * sweep.c - reclaiming expired entries.
 *
 * Expiry itself is instant: a read compares the record's deadline with the
 * clock and reports an expired entry absent. The sweep only gives the
 * memory back. Each bucket has a 32-bit hint, a lower bound of the earliest
 * deadline among its records (in pc_hint units); the hints sit in their own
 * arrays, sixteen to a cache line, so the sweep reads 4 bytes per bucket and
 * locks only the buckets whose hint has passed (far cheaper than locking
 * every bucket, at no cost to the hot path). Writers lower a
 * hint when they store an earlier deadline; only the sweep raises one, after
 * recomputing it under the bucket lock. Chains carry the same hint.
 */
#include "pc_int.h"

#define PC_REAP_BATCH 32

static uint32_t pc_rec_hint(pc_cache *c, pc_off off)
{
    const struct pc_rec_shm *r = pc_cell(c, off);
    return pc_hint_of(atomic_load_explicit(&r->expires, memory_order_relaxed));
}

/* Raises the expired event for an unlinked record (opt-in per collection). */
static void pc_expired_event(pc_coll *coll, pc_off off)
{
    if (!pc_event_wanted(coll->c, PC_EV_EXPIRED) ||
        !atomic_load_explicit(&coll->shm->expired_events, memory_order_relaxed))
        return;
    const struct pc_rec_shm *r = pc_cell(coll->c, off);
    pc_event ev = {
        .type = PC_EV_EXPIRED, .collection = coll->shm->name, .key = r->data, .klen = r->klen};
    pc_event_raise_slow(coll->c, &ev);
}

/* Reaps one bucket under its lock; returns the number reclaimed. */
static unsigned pc_sweep_bucket(pc_coll *coll, uint64_t idx, int64_t now)
{
    pc_cache *c = coll->c;
    struct pc_bucket_shm *b = pc_bucket_at(coll, idx);
    pc_off dead[PC_SLOTS], keep[PC_SLOTS];
    uint8_t keep_tag[PC_SLOTS];
    unsigned nd = 0, nk = 0;
    uint32_t hint = 0;
    pc_bucket_lock(coll, b, idx);
    uint8_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
    unsigned n = used & PC_USED_MASK;
    for (unsigned i = 0; i < n; i++) {
        pc_off off = atomic_load_explicit(&b->slot[i], memory_order_relaxed);
        const struct pc_rec_shm *r = pc_cell(c, off);
        int64_t e = atomic_load_explicit(&r->expires, memory_order_relaxed);
        if (e != 0 && e <= now) {
            dead[nd++] = off;
            continue;
        }
        uint32_t rh = pc_hint_of(e);
        if (rh != 0 && (hint == 0 || rh < hint))
            hint = rh;
        keep_tag[nk] = atomic_load_explicit(&b->tags[i], memory_order_relaxed);
        keep[nk++] = off;
    }
    if (nd > 0)
        pc_bucket_keep(b, n, used, keep, keep_tag, nk);
    atomic_store_explicit(pc_hint_at(coll, idx), hint, memory_order_relaxed);
    pc_bucket_unlock(b);
    /* the records are ours now: raise events from them, then free (I5) */
    for (unsigned i = 0; i < nd; i++) {
        pc_expired_event(coll, dead[i]);
        pc_free(c, dead[i]);
    }
    if (nd > 0) {
        PC_STAT_ADD(coll, expired, nd);
        PC_STAT_ADD(coll, destroyed, nd);
        PC_STAT_ADD(coll, deleted, nd);
    }
    return nd;
}

/* Reaps expired nodes of one chain. The candidates are listed under the
 * chain lock, then each is removed under its bucket lock and the chain
 * lock (I7), re-checked there. */
static unsigned pc_sweep_chain(pc_coll *coll, struct pc_chain_shm *ch, int64_t now)
{
    pc_cache *c = coll->c;
    pc_off nodes[PC_REAP_BATCH], recs[PC_REAP_BATCH];
    uint32_t hlos[PC_REAP_BATCH];
    unsigned k, reaped = 0;
again:
    k = 0;
    pc_chain_lock(coll, ch);
    for (pc_off off = ch->head; off != 0 && k < PC_REAP_BATCH;) {
        const struct pc_ovf_node_shm *n = pc_cell(c, off);
        const struct pc_rec_shm *r = pc_cell(c, n->rec);
        int64_t e = atomic_load_explicit(&r->expires, memory_order_relaxed);
        if (e != 0 && e <= now) {
            nodes[k] = off;
            recs[k] = n->rec;
            hlos[k++] = n->hlo;
        }
        off = n->next;
    }
    pc_chain_unlock(ch);
    for (unsigned j = 0; j < k; j++) {
        uint64_t idx;
        struct pc_bucket_shm *b = pc_lock_route(coll, hlos[j], &idx);
        pc_chain_lock(coll, ch);
        pc_off prev = 0, off = ch->head;
        while (off != 0 && off != nodes[j]) {
            prev = off;
            off = ((const struct pc_ovf_node_shm *)pc_cell(c, off))->next;
        }
        bool gone = false;
        if (off != 0 && ((const struct pc_ovf_node_shm *)pc_cell(c, off))->rec == recs[j]) {
            const struct pc_rec_shm *r = pc_cell(c, recs[j]);
            int64_t e = atomic_load_explicit(&r->expires, memory_order_relaxed);
            if (e != 0 && e <= now) {
                PC_ASSERT(c, I4,
                          atomic_load_explicit(&b->used, memory_order_relaxed) & PC_USED_OVF);
                pc_chain_unlink(coll, ch, prev, off);
                gone = true;
            }
        }
        pc_chain_unlock(ch);
        if (gone && !pc_bucket_has_overflow(coll, pc_route_load(coll->shm), idx)) {
            uint8_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
            pc_wbegin(b);
            atomic_store_explicit(&b->used, (uint8_t)(used & PC_USED_MASK), memory_order_relaxed);
            pc_wend(b);
        }
        pc_bucket_unlock(b);
        if (gone) {
            pc_expired_event(coll, recs[j]);
            pc_free(c, recs[j]);
            pc_free(c, nodes[j]);
            reaped++;
        }
    }
    if (k == PC_REAP_BATCH)
        goto again; /* the batch was full: there may be more */
    /* recompute the chain's hint from what is left */
    pc_chain_lock(coll, ch);
    uint32_t hint = 0;
    for (pc_off off = ch->head; off != 0;) {
        const struct pc_ovf_node_shm *n = pc_cell(c, off);
        uint32_t rh = pc_rec_hint(c, n->rec);
        if (rh != 0 && (hint == 0 || rh < hint))
            hint = rh;
        off = n->next;
    }
    ch->hint = hint;
    pc_chain_unlock(ch);
    if (reaped > 0) {
        PC_STAT_ADD(coll, expired, reaped);
        PC_STAT_ADD(coll, destroyed, reaped);
        PC_STAT_ADD(coll, deleted, reaped);
    }
    return reaped;
}

/* One pass over the collection's hints. Runs under the maintenance lock,
 * so bucket indexes are stable (no concurrent split). */
unsigned pc_sweep(pc_coll *coll, unsigned *probed)
{
    PC_ASSERT(coll->c, I6,
              atomic_load_explicit(&coll->c->hdr->maint_lock, memory_order_relaxed) ==
                  coll->c->token);
    int64_t now = pc_mono_ms();
    uint32_t now_hint = pc_hint_of(now);
    uint64_t nb = pc_route_buckets(pc_route_load(coll->shm), coll->shm->log2_initial);
    unsigned reaped = 0;
    for (uint64_t idx = 0; idx < nb; idx++) {
        uint32_t h = atomic_load_explicit(pc_hint_at(coll, idx), memory_order_relaxed);
        if (h == 0 || h > now_hint)
            continue;
        (*probed)++;
        reaped += pc_sweep_bucket(coll, idx, now);
    }
    struct pc_chain_shm *chains = pc_at(coll->c, coll->shm->chains_off);
    for (unsigned i = 0; i < PC_CHAINS; i++) {
        uint32_t h = chains[i].hint; /* racy peek; the locks decide */
        if (chains[i].count == 0 || h == 0 || h > now_hint)
            continue;
        (*probed)++;
        reaped += pc_sweep_chain(coll, &chains[i], now);
    }
    return reaped;
}
