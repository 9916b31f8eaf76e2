/*
 * growth.c - linear hashing over a segmented directory.
 *
 * A collection starts with n0 = 2^log2 buckets in segment 0. Level L covers
 * size = n0 << L buckets plus `split` already-split ones; the routing word
 * packs (L, split). Splitting bucket s creates bucket s + size in segment
 * L + 1 (carved, zeroed, when the level starts). Buckets never move, so a
 * reader's bucket pointer stays valid forever; the only thing a reader
 * re-checks on a miss is the routing word.
 *
 * One split (the maintenance lock holder only, I6):
 *   1. lock bucket s;
 *   2. copy the entries whose hash now routes to s + size into the new
 *      bucket, which no route reaches yet (so no bracket is needed there);
 *   3. publish the routing word (release): readers now find them there;
 *   4. remove them from s inside a version bracket, and unlock.
 * A reader that routed with the old word and looks at s after step 4 sees
 * a stable miss, re-reads the routing word, finds it changed and retries.
 * A writer that waited on s's lock re-routes under the lock (pc_lock_route).
 *
 * Splits make room in buckets whose keys went to overflow chains; the pass
 * after them (pc_overflow_drain, end of this file) moves those keys back.
 * overflow.c keeps the chains themselves and takes no bucket lock.
 */
#include "pc_int.h"

#include <inttypes.h>

/* Carves bucket and hint segment j (j >= 1 holds n0 << (j-1) buckets). */
int pc_coll_carve_segment(pc_coll *coll, unsigned j)
{
    struct pc_coll_shm *cs = coll->shm;
    if (j >= PC_MAX_SEGS)
        return PC_ENOMEM;
    if (cs->seg_off[j] != 0)
        return 0;
    uint64_t n = j == 0 ? (1ull << cs->log2_initial) : (1ull << (cs->log2_initial + j - 1));
    uint64_t boff = pc_region_carve(coll->c, n * sizeof(struct pc_bucket_shm), 4096);
    if (boff == 0)
        return PC_ENOMEM;
    uint64_t hoff = pc_region_carve(coll->c, n * sizeof(uint32_t), 64);
    if (hoff == 0)
        return PC_ENOMEM; /* the bucket segment is lost; growth stops */
    atomic_fetch_add(&coll->c->hdr->table_bytes, n * (sizeof(struct pc_bucket_shm) + 4));
    cs->seg_off[j] = boff;
    cs->hint_off[j] = hoff;
    return 0;
}

static uint64_t pc_hash_of_slot(pc_cache *c, pc_off off)
{
    const struct pc_rec_shm *r = pc_cell(c, off);
    return pc_key_hash(r->data, r->klen);
}

/* Splits the next bucket. Returns 0, or PC_ENOMEM when the table cannot
 * grow (no room for the next segment, or the size cap). */
static int pc_split_one(pc_coll *coll)
{
    pc_cache *c = coll->c;
    struct pc_coll_shm *cs = coll->shm;
    PC_ASSERT(c, I6, atomic_load_explicit(&c->hdr->maint_lock, memory_order_relaxed) == c->token);
    uint64_t route = atomic_load_explicit(&cs->route, memory_order_relaxed);
    unsigned level = (unsigned)(route >> 32);
    uint64_t split = route & 0xffffffffu;
    unsigned l2 = cs->log2_initial;
    if (l2 + level + 1 > PC_MAX_BUCKETS_LOG2 || level + 1 >= PC_MAX_SEGS)
        return PC_ENOMEM;
    uint64_t size = 1ull << (l2 + level);
    if (cs->seg_off[level + 1] == 0 && pc_coll_carve_segment(coll, level + 1) != 0) {
        if (!atomic_exchange(&cs->grow_failed, 1))
            pc_log(c, PC_LOG_WARN,
                   "pcache: %s: no shared memory for the next bucket segment; "
                   "the table stops growing at %" PRIu64 " buckets",
                   cs->name, size + split);
        return PC_ENOMEM;
    }
    uint64_t s = split, ns = split + size;
    struct pc_bucket_shm *b = pc_bucket_at(coll, s);
    struct pc_bucket_shm *nb = pc_bucket_at(coll, ns);
    pc_bucket_lock(coll, b, s);
    uint8_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
    unsigned n = used & PC_USED_MASK, k = 0, keep = 0;
    pc_off stay[PC_SLOTS];
    uint8_t stay_tag[PC_SLOTS];
    for (unsigned i = 0; i < n; i++) {
        pc_off off = atomic_load_explicit(&b->slot[i], memory_order_relaxed);
        uint8_t tag = atomic_load_explicit(&b->tags[i], memory_order_relaxed);
        if ((pc_hash_of_slot(c, off) & (2 * size - 1)) == ns) {
            atomic_store_explicit(&nb->slot[k], off, memory_order_relaxed);
            atomic_store_explicit(&nb->tags[k++], tag, memory_order_relaxed);
        } else {
            stay[keep] = off;
            stay_tag[keep++] = tag;
        }
    }
    /* the new bucket inherits the hint (a lower bound stays a lower bound) */
    atomic_store_explicit(pc_hint_at(coll, ns),
                          atomic_load_explicit(pc_hint_at(coll, s), memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&nb->used, (uint8_t)(k | (used & PC_USED_OVF)), memory_order_relaxed);
    /* the new bucket continues the old one's version, so write stamps of a
     * key stay ordered across the split (pc_mutation.stamp) */
    atomic_store_explicit(&nb->version, atomic_load_explicit(&b->version, memory_order_relaxed),
                          memory_order_relaxed);
    uint64_t next = split + 1 == size ? ((uint64_t)(level + 1) << 32) : (route + 1);
    PC_ASSERT(c, I6, atomic_load_explicit(&b->lock, memory_order_relaxed) == c->token);
    atomic_store_explicit(&cs->route, next, memory_order_release);
    if (k > 0) {
        pc_wbegin(b);
        for (unsigned i = 0; i < PC_SLOTS; i++) {
            atomic_store_explicit(&b->slot[i], i < keep ? stay[i] : 0, memory_order_relaxed);
            atomic_store_explicit(&b->tags[i], i < keep ? stay_tag[i] : 0, memory_order_relaxed);
        }
        atomic_store_explicit(&b->used, (uint8_t)(keep | (used & PC_USED_OVF)),
                              memory_order_relaxed);
        pc_wend(b);
    }
    if (used & PC_USED_OVF) {
        /* the chains' keys of s now split between s and ns: recompute both
         * flags exactly (ns is reachable now; lock it too, s before ns) */
        pc_bucket_lock(coll, nb, ns);
        bool so = pc_bucket_has_overflow(coll, next, s);
        bool no = pc_bucket_has_overflow(coll, next, ns);
        pc_wbegin(b);
        atomic_store_explicit(&b->used, (uint8_t)(keep | (so ? PC_USED_OVF : 0)),
                              memory_order_relaxed);
        pc_wend(b);
        uint8_t nu = atomic_load_explicit(&nb->used, memory_order_relaxed) & PC_USED_MASK;
        pc_wbegin(nb);
        atomic_store_explicit(&nb->used, (uint8_t)(nu | (no ? PC_USED_OVF : 0)),
                              memory_order_relaxed);
        pc_wend(nb);
        pc_bucket_unlock(nb);
    }
    pc_bucket_unlock(b);
    atomic_fetch_add_explicit(&cs->splits, 1, memory_order_relaxed);
    return 0;
}

/* Splits toward growth_load_factor entries per bucket for the collection's
 * entries plus extra (keys about to be inserted), at most budget. */
unsigned pc_grow(pc_coll *coll, uint64_t extra, unsigned budget)
{
    unsigned lf = coll->c->hdr->growth_load_factor;
    if (lf == 0 || atomic_load(&coll->shm->grow_failed))
        return 0;
    uint64_t entries = pc_coll_entries(coll) + extra;
    uint64_t buckets = pc_route_buckets(pc_route_load(coll->shm), coll->shm->log2_initial);
    unsigned done = 0;
    while (done < budget && entries > (uint64_t)lf * (buckets + done)) {
        if (pc_split_one(coll) != 0)
            break;
        done++;
    }
    return done;
}

/* ---- draining the overflow chains ------------------------------------------
 * Splits make room in buckets whose keys overflowed; the maintenance pass
 * after them (PC_MAINT_GROW) moves chain nodes back into their buckets. */

/* Whether record rec's key already sits in a slot of bucket b (locked by
 * the caller). PC_ASSERT only. */
static bool pc_bucket_holds(const pc_cache *c, const struct pc_bucket_shm *b, pc_off rec)
{
    const struct pc_rec_shm *r = pc_cell(c, rec);
    unsigned n = atomic_load_explicit(&b->used, memory_order_relaxed) & PC_USED_MASK;
    for (unsigned i = 0; i < n && i < PC_SLOTS; i++) {
        const struct pc_rec_shm *o =
            pc_cell(c, atomic_load_explicit(&b->slot[i], memory_order_relaxed));
        if (o != NULL && pc_rec_key_eq(c, o, r->data, r->klen))
            return true;
    }
    return false;
}

/* Moves one node into its bucket if the bucket has room. Returns 1 when
 * moved. Lock order: bucket, then chain (I7). */
static int pc_drain_one(pc_coll *coll, struct pc_chain_shm *ch, pc_off node, pc_off rec,
                        uint32_t hlo, pc_off *freed)
{
    pc_cache *c = coll->c;
    uint64_t idx;
    struct pc_bucket_shm *b = pc_lock_route(coll, hlo, &idx);
    pc_chain_lock(coll, ch);
    int moved = 0;
    pc_off prev = 0, off = ch->head;
    while (off != 0 && off != node) {
        struct pc_ovf_node_shm *n = pc_ovf_node(c, off);
        if (n == NULL)
            break;
        prev = off;
        off = n->next;
    }
    struct pc_ovf_node_shm *n = off == node ? pc_ovf_node(c, node) : NULL;
    uint8_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
    unsigned cnt = used & PC_USED_MASK;
    if (n != NULL && n->rec == rec && cnt < PC_SLOTS) {
        /* The bracket opens before the unlink: a reader or the walker that
         * read the bucket before the move and the chain after it sees the
         * version change and retries, so the key never falls between. */
        PC_ASSERT(c, I4, (used & PC_USED_OVF) != 0);
        PC_ASSERT(c, I4, !pc_bucket_holds(c, b, rec));
        uint8_t tag = n->tag;
        pc_wbegin(b);
        pc_chain_unlink(coll, ch, prev, node);
        atomic_store_explicit(&b->slot[cnt], rec, memory_order_relaxed);
        /* a chain node keeps all 8 bits; a slot's tag has 7 and the access bit */
        atomic_store_explicit(&b->tags[cnt], (uint8_t)(tag & PC_TAG_BITS), memory_order_relaxed);
        atomic_store_explicit(&b->used, (uint8_t)((cnt + 1) | PC_USED_OVF), memory_order_relaxed);
        pc_wend(b);
        pc_chain_unlock(ch);
        /* the flag stayed set (conservative); clear it if nothing is left */
        if (!pc_bucket_has_overflow(coll, pc_route_load(coll->shm), idx)) {
            pc_wbegin(b);
            atomic_store_explicit(&b->used, (uint8_t)(cnt + 1), memory_order_relaxed);
            pc_wend(b);
        }
        struct pc_rec_shm *r = pc_cell(c, rec);
        uint32_t hint = pc_hint_of(atomic_load_explicit(&r->expires, memory_order_relaxed));
        _Atomic uint32_t *hp = pc_hint_at(coll, idx);
        uint32_t cur = atomic_load_explicit(hp, memory_order_relaxed);
        if (hint != 0 && (cur == 0 || hint < cur))
            atomic_store_explicit(hp, hint, memory_order_relaxed);
        *freed = node;
        moved = 1;
    } else {
        pc_chain_unlock(ch);
    }
    pc_bucket_unlock(b);
    return moved;
}

/* Maintenance: walks non-empty chains and moves nodes into buckets that
 * have a free slot, at most budget moves. */
unsigned pc_overflow_drain(pc_coll *coll, unsigned budget)
{
    pc_cache *c = coll->c;
    struct pc_chain_shm *chains = pc_at(c, coll->shm->chains_off);
    unsigned moved = 0;
    for (unsigned i = 0; i < PC_CHAINS && moved < budget; i++) {
        struct pc_chain_shm *ch = &chains[i];
        if (ch->count == 0) /* racy peek; the locks decide */
            continue;
        /* snapshot a batch of candidates, then move them one by one */
        enum { BATCH = 32 };
        pc_off nodes[BATCH], recs[BATCH];
        uint32_t hlos[BATCH];
        unsigned k = 0;
        pc_chain_lock(coll, ch);
        for (pc_off off = ch->head; off != 0 && k < BATCH;) {
            struct pc_ovf_node_shm *n = pc_ovf_node(c, off);
            if (n == NULL)
                break;
            nodes[k] = off;
            recs[k] = n->rec;
            hlos[k++] = n->hlo;
            off = n->next;
        }
        pc_chain_unlock(ch);
        unsigned moved_here = 0;
        for (unsigned j = 0; j < k && moved < budget; j++) {
            pc_off freed = 0;
            if (pc_drain_one(coll, ch, nodes[j], recs[j], hlos[j], &freed)) {
                pc_free(c, freed);
                moved++;
                moved_here++;
            }
        }
        if (moved_here == k && k == BATCH)
            i--; /* the chain may hold more: visit it again */
    }
    return moved;
}
