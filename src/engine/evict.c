/*
 * evict.c - making room: the policies of pc_coll_set_eviction and the cap
 * of pc_set_maxmemory.
 *
 * Eviction keeps the lock-free read protocol as it is. A read's only extra
 * work is the access bit of the slot it hit (bit 7 of the slot's tag, see
 * PC_TAG_REF): one atomic OR when the bit is clear, nothing when it is set.
 * Everything else happens in writers, one bucket lock at a time:
 *  - the CLOCK hand (every policy) is a per-collection counter of bucket
 *    indexes. A writer that needs room takes the next bucket, locks it,
 *    and inside one version bracket (I3) drops the slots of its victims:
 *    expired keys first, then (LRU, S3-FIFO) keys whose access bit is
 *    clear, clearing the bits that are set (their second chance), or
 *    (random) whatever it meets. The records are freed after the unlock
 *    (I5), exactly as the expiry sweep frees them;
 *  - S3-FIFO's small queue is a ring of (collection, record offset) words
 *    in the region: an insert pushes its record with one fetch-add and one
 *    store, under the bucket lock it holds anyway, and allocates nothing. A
 *    pop reads the record's key without a lock (a stale offset reads
 *    garbage inside the region, I1/I2), hashes it, locks the bucket it
 *    routes to and acts only when that bucket still holds that very
 *    record: so a lost, overwritten or stale ring word costs a lookup,
 *    never a wrong eviction. The ghost table keeps 32-bit fingerprints of
 *    the keys the queue evicted, direct-mapped; a collision only sends a
 *    new key past the queue.
 * Why our own and not a library: the policies must run on the shared
 * table's own buckets and bits, under its locks, with no allocation.
 */
#include "pc_int.h"

#include <strings.h>

/* A turn of the hand ends at its first victims, or after this many keys
 * looked at or buckets passed: CLOCK may need a whole sweep to find a
 * clear bit, and no write pays for a sweep. The last turns of a write
 * (PC_FORCE_FROM on) take what they meet, bits or not. */
#define PC_EVICT_KEYS 64u
#define PC_EVICT_BUCKETS 1024u
#define PC_EVICT_ROUNDS 8u  /* turns a write spends before PC_ENOMEM */
#define PC_ANY_FROM 4u      /* turns from here take any class */
#define PC_FORCE_FROM 6u    /* turns from here ignore the access bits */
#define PC_S3_POPS 16u      /* queue pops per turn */
#define PC_S3_KEYBUF 512u   /* longer keys skip the queue's check and stay */
#define PC_AHEAD_MAX 1024u  /* keys pc_maintain evicts per call */
#define PC_POLICY_ALG 0x0fu /* the algorithm part of a policy word */

static const struct {
    const char *name;
    int policy;
} pc_policies[] = {
    {"noeviction", PC_EVICT_NONE},
    {"allkeys-lru", PC_EVICT_LRU},
    {"volatile-lru", PC_EVICT_LRU | PC_EVICT_VOLATILE},
    {"allkeys-s3fifo", PC_EVICT_S3FIFO},
    {"volatile-s3fifo", PC_EVICT_S3FIFO | PC_EVICT_VOLATILE},
    {"allkeys-random", PC_EVICT_RANDOM},
    {"volatile-random", PC_EVICT_RANDOM | PC_EVICT_VOLATILE},
};
#define PC_NPOLICIES (sizeof pc_policies / sizeof pc_policies[0])

const char *pc_evict_policy_name(int policy)
{
    for (unsigned i = 0; i < PC_NPOLICIES; i++)
        if (pc_policies[i].policy == policy)
            return pc_policies[i].name;
    return "unknown";
}

int pc_evict_policy_parse(const char *name, size_t len, int *policy)
{
    if (name == NULL || policy == NULL)
        return PC_EINVAL;
    for (unsigned i = 0; i < PC_NPOLICIES; i++)
        if (strlen(pc_policies[i].name) == len &&
            strncasecmp(pc_policies[i].name, name, len) == 0) {
            *policy = pc_policies[i].policy;
            return 0;
        }
    return PC_EINVAL;
}

static bool pc_policy_valid(int p)
{
    for (unsigned i = 0; i < PC_NPOLICIES; i++)
        if (pc_policies[i].policy == p)
            return true;
    return false;
}

int pc_set_maxmemory(pc_cache *c, uint64_t bytes)
{
    if (c == NULL)
        return PC_EINVAL;
    atomic_store_explicit(&c->hdr->maxmemory, bytes, memory_order_relaxed);
    return 0;
}

uint64_t pc_maxmemory(const pc_cache *c)
{
    return c == NULL ? 0 : atomic_load_explicit(&c->hdr->maxmemory, memory_order_relaxed);
}

/* ---- S3-FIFO's tables ------------------------------------------------------ */

/* Carves the ring and the ghost table once per cache: ring entries are a
 * power of two near region/1024 (8 bytes each), ghost slots twice that (4
 * bytes each), so both together take about 1.6% of the region. Fresh
 * region bytes are zero (the bump never hands out a byte twice). */
static int pc_s3_tables(pc_cache *c)
{
    struct pc_header_shm *h = c->hdr;
    if (atomic_load_explicit(&h->s3_ghost_off, memory_order_acquire) != 0)
        return 0;
    pc_lock_word(c, &h->s3_lock);
    int rc = 0;
    if (atomic_load_explicit(&h->s3_ghost_off, memory_order_relaxed) == 0) {
        uint64_t n = 1024;
        while (n * 2 <= c->region_bytes / 1024)
            n *= 2;
        uint64_t ring = atomic_load_explicit(&h->s3_ring_off, memory_order_relaxed);
        if (ring == 0) { /* kept when the ghost's carve fails: the next try reuses it */
            ring = pc_region_carve(c, n * sizeof(uint64_t), 64);
            if (ring != 0) {
                h->s3_ring_mask = n - 1;
                atomic_store_explicit(&h->s3_ring_off, ring, memory_order_release);
            }
        }
        uint64_t ghost = ring != 0 ? pc_region_carve(c, 2 * n * sizeof(uint32_t), 64) : 0;
        if (ghost == 0) {
            rc = PC_ENOMEM;
        } else {
            h->s3_ghost_mask = 2 * n - 1;
            atomic_store_explicit(&h->s3_ghost_off, ghost, memory_order_release);
        }
    }
    pc_unlock_word(&h->s3_lock);
    return rc;
}

static inline _Atomic uint32_t *pc_ghost_slot(const pc_cache *c, unsigned coll_idx, uint64_t h,
                                              uint32_t *fp)
{
    const struct pc_header_shm *hd = c->hdr;
    _Atomic uint32_t *g = pc_at(c, atomic_load_explicit(&hd->s3_ghost_off, memory_order_acquire));
    *fp = (uint32_t)(h >> 32) | 1u; /* 0 is an empty slot */
    /* the ghost remembers about as many keys as the cache holds (the
     * paper's size): a larger one sends returning keys of the long tail
     * past the queue, a smaller one forgets the ones worth keeping */
    uint64_t used = atomic_load_explicit(&hd->s3_ghost_used, memory_order_relaxed);
    uint64_t mask = used != 0 && used - 1 < hd->s3_ghost_mask ? used - 1 : hd->s3_ghost_mask;
    return g + ((h ^ (uint64_t)coll_idx * 0x9e3779b97f4a7c15ull) & mask);
}

int pc_coll_set_eviction(pc_coll *coll, int policy)
{
    if (coll == NULL || !pc_policy_valid(policy))
        return PC_EINVAL;
    int rc = pc_enter(coll->c);
    if (rc != 0)
        return rc;
    if ((policy & PC_POLICY_ALG) == PC_EVICT_S3FIFO && (rc = pc_s3_tables(coll->c)) != 0)
        return rc;
    uint32_t was =
        atomic_exchange_explicit(&coll->shm->evict_policy, (uint32_t)policy, memory_order_relaxed);
    if (was == PC_EVICT_NONE && policy != PC_EVICT_NONE)
        atomic_fetch_add_explicit(&coll->c->hdr->evict_colls, 1, memory_order_relaxed);
    else if (was != PC_EVICT_NONE && policy == PC_EVICT_NONE)
        atomic_fetch_sub_explicit(&coll->c->hdr->evict_colls, 1, memory_order_relaxed);
    return 0;
}

int pc_coll_eviction(const pc_coll *coll)
{
    return coll == NULL ? PC_EVICT_NONE : (int)pc_evict_policy_of(coll);
}

uint8_t pc_evict_on_insert(pc_coll *coll, uint64_t h, pc_off rec)
{
    uint32_t alg = pc_evict_policy_of(coll) & PC_POLICY_ALG;
    uint8_t tag = pc_tag_of(h);
    if (alg == PC_EVICT_LRU)
        return (uint8_t)(tag | PC_TAG_REF); /* a new key is a recent one */
    if (alg != PC_EVICT_S3FIFO)
        return tag;
    pc_cache *c = coll->c;
    struct pc_header_shm *hd = c->hdr;
    uint64_t ring_off = atomic_load_explicit(&hd->s3_ring_off, memory_order_acquire);
    if (ring_off == 0 || atomic_load_explicit(&hd->s3_ghost_off, memory_order_acquire) == 0)
        return tag;
    uint32_t fp;
    _Atomic uint32_t *g = pc_ghost_slot(c, coll->idx, h, &fp);
    if (atomic_load_explicit(g, memory_order_relaxed) == fp) {
        /* evicted from the queue lately and wanted again: straight to main */
        atomic_store_explicit(g, 0, memory_order_relaxed);
        return tag;
    }
    _Atomic uint64_t *ring = pc_at(c, ring_off);
    uint64_t i = atomic_fetch_add_explicit(&hd->s3_head, 1, memory_order_relaxed);
    atomic_store_explicit(&ring[i & hd->s3_ring_mask], (uint64_t)coll->idx << 32 | rec,
                          memory_order_relaxed);
    return tag;
}

/* ---- victims ----------------------------------------------------------------- */

struct pc_victim {
    pc_off rec, node; /* detached from the table, freed by pc_victims_free */
    uint32_t stamp;   /* the bucket version after the removal (pc_mutation) */
    bool expired;     /* it had expired: counted as expired, not evicted */
};

/* The part after the unlock: the hook, the event, the counters, the free.
 * Returns the cell bytes freed. */
static uint64_t pc_victims_free(pc_coll *coll, const struct pc_victim *v, unsigned n)
{
    pc_cache *c = coll->c;
    unsigned w = pc_hooked(coll), evicted = 0, expired = 0;
    bool ev_exp = pc_event_wanted(c, PC_EV_EXPIRED) &&
                  atomic_load_explicit(&coll->shm->expired_events, memory_order_relaxed);
    bool ev_evi = pc_event_wanted(c, PC_EV_EVICTED) &&
                  atomic_load_explicit(&coll->shm->evicted_events, memory_order_relaxed);
    uint64_t bytes = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct pc_rec_shm *r = pc_cell(c, v[i].rec);
        if (v[i].expired) {
            expired++;
        } else {
            evicted++;
            if (w != 0) /* the key is gone either way: the result is not ours to act on */
                (void)pc_mutated(coll, w, PC_MUT_EVICT, r->data, r->klen, NULL, 0, 0, 0,
                                 v[i].stamp);
        }
        if (v[i].expired ? ev_exp : ev_evi) {
            pc_event ev = {.type = v[i].expired ? PC_EV_EXPIRED : PC_EV_EVICTED,
                           .collection = coll->shm->name,
                           .key = r->data,
                           .klen = r->klen};
            pc_event_raise_slow(c, &ev);
        }
        bytes += pc_class_bytes(c, r->cls);
        pc_free(c, v[i].rec);
        if (v[i].node != 0)
            pc_free(c, v[i].node);
    }
    if (evicted > 0)
        PC_STAT_ADD(coll, evicted, evicted);
    if (expired > 0)
        PC_STAT_ADD(coll, expired, expired);
    if (n > 0)
        PC_STAT_ADD(coll, destroyed, n);
    return bytes;
}

/* The after-unlock part of one eviction of record off (and its chain node,
 * 0 = none), unlinked under a bucket lock whose version became stamp: what
 * a chunk drain does with a record it evicts (pc_alloc_drained's evicted). */
static void pc_evicted_one(pc_coll *coll, pc_off off, pc_off node, uint32_t stamp, int64_t now)
{
    const struct pc_rec_shm *r = pc_cell(coll->c, off);
    int64_t e = atomic_load_explicit(&r->expires, memory_order_relaxed);
    struct pc_victim v = {.rec = off, .node = node, .stamp = stamp, .expired = e != 0 && e <= now};
    (void)pc_victims_free(coll, &v, 1);
}

/* One bucket under the hand: the victims' slots are dropped inside one
 * bracket; set access bits are cleared. cls >= 0 restricts the victims to
 * records of that class (a write needs a cell of its own class). */
static unsigned pc_hand_bucket(pc_coll *coll, uint64_t idx, uint32_t pol, int cls, bool force,
                               int64_t now, struct pc_victim *out, unsigned *looked)
{
    pc_cache *c = coll->c;
    uint32_t alg = pol & PC_POLICY_ALG;
    bool vol = (pol & PC_EVICT_VOLATILE) != 0;
    struct pc_bucket_shm *b = pc_bucket_at(coll, idx);
    pc_off keep[PC_SLOTS];
    uint8_t keep_tag[PC_SLOTS];
    unsigned nk = 0, nv = 0, cleared = 0;
    pc_bucket_lock(coll, b, idx);
    uint8_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
    unsigned n = used & PC_USED_MASK;
    *looked += n;
    for (unsigned i = 0; i < n; i++) {
        pc_off off = atomic_load_explicit(&b->slot[i], memory_order_relaxed);
        const struct pc_rec_shm *r = pc_cell(c, off);
        uint8_t tag = atomic_load_explicit(&b->tags[i], memory_order_relaxed);
        int64_t e = atomic_load_explicit(&r->expires, memory_order_relaxed);
        bool expired = e != 0 && e <= now, victim = expired;
        if (!expired && !(vol && e == 0) && (cls < 0 || r->cls == (unsigned)cls)) {
            if (alg != PC_EVICT_RANDOM && !force && (tag & PC_TAG_REF)) {
                tag = (uint8_t)(tag & PC_TAG_BITS); /* its second chance */
                cleared |= 1u << i;
            } else {
                victim = true;
            }
        }
        if (victim) {
            out[nv++] = (struct pc_victim){.rec = off, .expired = expired};
        } else {
            keep_tag[nk] = tag;
            keep[nk++] = off;
        }
    }
    if (nv > 0) {
        pc_bucket_keep(b, n, used, keep, keep_tag, nk);
        uint32_t stamp = atomic_load_explicit(&b->version, memory_order_relaxed);
        for (unsigned i = 0; i < nv; i++)
            out[i].stamp = stamp;
    } else {
        /* only bits to clear: readers never validate them, so no bracket */
        for (unsigned i = 0; i < n; i++)
            if (cleared & (1u << i))
                atomic_fetch_and_explicit(&b->tags[i], (uint8_t)PC_TAG_BITS, memory_order_relaxed);
    }
    pc_bucket_unlock(b);
    if (nv > 0)
        PC_STAT_ADD(coll, deleted, nv);
    return nv;
}

/* One turn of coll's hand: bucket after bucket until one gives victims,
 * within the bounds above. Empty buckets are passed without a lock. */
static unsigned pc_hand_turn(pc_coll *coll, uint32_t pol, int cls, bool force, uint64_t *bytes)
{
    struct pc_victim v[PC_SLOTS];
    int64_t now = pc_mono_ms();
    unsigned looked = 0;
    for (unsigned k = 0; k < PC_EVICT_BUCKETS && looked < PC_EVICT_KEYS; k++) {
        uint64_t nb = pc_route_buckets(pc_route_load(coll->shm), coll->shm->log2_initial);
        uint64_t idx =
            atomic_fetch_add_explicit(&coll->shm->evict_hand, 1, memory_order_relaxed) % nb;
        if ((atomic_load_explicit(&pc_bucket_at(coll, idx)->used, memory_order_relaxed) &
             PC_USED_MASK) == 0)
            continue;
        unsigned n = pc_hand_bucket(coll, idx, pol, cls, force, now, v, &looked);
        if (n > 0) {
            *bytes += pc_victims_free(coll, v, n);
            return n;
        }
    }
    return 0;
}

/* The small queue's goal: a tenth of the entries of the collections that
 * use it, recomputed at most every 100 ms (a sum over process slots). */
static uint64_t pc_s3_target(pc_cache *c)
{
    struct pc_header_shm *h = c->hdr;
    int64_t now = pc_mono_ms(),
            at = atomic_load_explicit(&h->s3_target_at_ms, memory_order_relaxed);
    if (now - at >= 100 &&
        atomic_compare_exchange_strong_explicit(&h->s3_target_at_ms, &at, now, memory_order_relaxed,
                                                memory_order_relaxed)) {
        uint64_t entries = 0;
        for (unsigned i = 0; i < c->ncoll; i++)
            if ((pc_evict_policy_of(&c->coll[i]) & PC_POLICY_ALG) == PC_EVICT_S3FIFO)
                entries += pc_coll_entries(&c->coll[i]);
        atomic_store_explicit(&h->s3_target, entries / 10 + 1, memory_order_relaxed);
        uint64_t g = 4096;
        while (g < entries && g < (1ull << 40))
            g *= 2;
        atomic_store_explicit(&h->s3_ghost_used, g, memory_order_relaxed);
    }
    return atomic_load_explicit(&h->s3_target, memory_order_relaxed);
}

enum { PC_POP_EMPTY = -1, PC_POP_KEPT = 0, PC_POP_EVICTED = 1 };

/* Pops the small queue's oldest word while the queue is over its goal and
 * acts on its record: read since it was pushed, it stays (in the main part
 * now); unread, it is evicted and remembered in the ghost table. */
static int pc_s3_pop(pc_cache *c, uint64_t *bytes)
{
    struct pc_header_shm *h = c->hdr;
    uint64_t ring_off = atomic_load_explicit(&h->s3_ring_off, memory_order_acquire);
    if (ring_off == 0 || atomic_load_explicit(&h->s3_ghost_off, memory_order_acquire) == 0)
        return PC_POP_EMPTY;
    uint64_t t = atomic_load_explicit(&h->s3_tail, memory_order_relaxed);
    uint64_t hd = atomic_load_explicit(&h->s3_head, memory_order_relaxed);
    if (hd - t <= pc_s3_target(c) || hd <= t)
        return PC_POP_EMPTY;
    if (hd - t > h->s3_ring_mask + 1) { /* the oldest words were overwritten: skip them */
        atomic_compare_exchange_strong(&h->s3_tail, &t, hd - (h->s3_ring_mask + 1));
        return PC_POP_KEPT;
    }
    if (!atomic_compare_exchange_strong(&h->s3_tail, &t, t + 1))
        return PC_POP_KEPT; /* another popper took it */
    _Atomic uint64_t *ring = pc_at(c, ring_off);
    uint64_t word = atomic_load_explicit(&ring[t & h->s3_ring_mask], memory_order_relaxed);
    unsigned ci = (unsigned)(word >> 32);
    pc_off off = (pc_off)word;
    if (ci >= c->ncoll)
        return PC_POP_KEPT;
    pc_coll *coll = &c->coll[ci];
    uint32_t pol = pc_evict_policy_of(coll);
    const struct pc_rec_shm *r = pc_cell(c, off);
    if ((pol & PC_POLICY_ALG) != PC_EVICT_S3FIFO || r == NULL)
        return PC_POP_KEPT;
    /* the key, read without a lock: bounded by the cell; a torn copy hashes
     * elsewhere and the check under the lock below finds nothing */
    unsigned char key[PC_S3_KEYBUF];
    size_t room = pc_rec_room(c, r), klen = r->klen;
    if (klen > sizeof key || PC_REC_HDR + klen > room)
        return PC_POP_KEPT;
    memcpy(key, r->data, klen);
    uint64_t kh = pc_key_hash(key, klen);
    if (!pc_bucket_may_hold(coll, kh, off))
        return PC_POP_KEPT; /* gone, moved or torn: nothing to lock for */
    int64_t now = pc_mono_ms();
    uint64_t idx;
    struct pc_bucket_shm *b = pc_lock_route(coll, kh, &idx);
    struct pc_loc loc;
    pc_locate_held(coll, b, idx, kh, key, klen, now, &loc);
    struct pc_victim v = {0};
    int res = PC_POP_KEPT;
    if (loc.where != 0 && loc.rec_off == off) {
        int64_t e = atomic_load_explicit(&loc.rec->expires, memory_order_relaxed);
        bool expired = e != 0 && e <= now;
        bool ref = loc.where == 1 &&
                   (atomic_load_explicit(&b->tags[loc.slot], memory_order_relaxed) & PC_TAG_REF);
        if (expired || (!ref && !((pol & PC_EVICT_VOLATILE) && e == 0))) {
            pc_unlink_br(coll, &loc, &v.node, true);
            v.rec = off;
            v.expired = expired;
            v.stamp = atomic_load_explicit(&b->version, memory_order_relaxed);
            res = PC_POP_EVICTED;
        } else if (ref) { /* promoted: its bit starts over in the main part */
            atomic_fetch_and_explicit(&b->tags[loc.slot], (uint8_t)PC_TAG_BITS,
                                      memory_order_relaxed);
        }
    }
    if (loc.ch != NULL)
        pc_chain_unlock(loc.ch);
    pc_bucket_unlock(b);
    if (res == PC_POP_EVICTED) {
        if (!v.expired) {
            uint32_t fp;
            _Atomic uint32_t *g = pc_ghost_slot(c, ci, kh, &fp);
            atomic_store_explicit(g, fp, memory_order_relaxed);
        }
        *bytes += pc_victims_free(coll, &v, 1);
    }
    return res;
}

/* One turn of eviction in coll: the queue while it is over its goal, then
 * the hand. Returns the keys removed. */
static unsigned pc_evict_turn(pc_coll *coll, int cls, bool force, uint64_t *bytes)
{
    uint32_t pol = pc_evict_policy_of(coll);
    if (pol == PC_EVICT_NONE)
        return 0;
    unsigned n = 0;
    if ((pol & PC_POLICY_ALG) == PC_EVICT_S3FIFO) {
        for (unsigned k = 0; k < PC_S3_POPS; k++) {
            int r = pc_s3_pop(coll->c, bytes);
            if (r == PC_POP_EMPTY)
                break;
            n += r == PC_POP_EVICTED;
        }
        if (n > 0)
            return n;
    }
    return pc_hand_turn(coll, pol, cls, force, bytes);
}

/* A turn over the cache: pref first when it evicts, then the others in
 * round-robin order, until one gives something. */
static unsigned pc_evict_batch(pc_cache *c, pc_coll *pref, int cls, bool force, uint64_t *bytes)
{
    if (pref != NULL && pc_evict_policy_of(pref) != PC_EVICT_NONE) {
        unsigned n = pc_evict_turn(pref, cls, force, bytes);
        if (n > 0)
            return n;
    }
    unsigned start = atomic_fetch_add_explicit(&c->hdr->evict_rr, 1, memory_order_relaxed);
    for (unsigned k = 0; k < c->ncoll; k++) {
        pc_coll *coll = &c->coll[(start + k) % c->ncoll];
        if (coll == pref)
            continue;
        unsigned n = pc_evict_turn(coll, cls, force, bytes);
        if (n > 0)
            return n;
    }
    return 0;
}

pc_off pc_alloc_evict(pc_coll *coll, size_t bytes)
{
    pc_cache *c = coll->c;
    pc_off off = pc_alloc_quiet(c, bytes);
    if (PC_LIKELY(off != 0))
        return off;
    int cls = pc_class_for(c, bytes);
    if (cls < 0)
        return 0;
    if (atomic_load_explicit(&c->hdr->evict_colls, memory_order_relaxed) == 0) {
        /* nothing may be evicted: residents of a hoarding class may move
         * (a chunk that another process's free stack keeps incomplete
         * sends the drain on to the next one) */
        for (unsigned k = 0; k < 3 && off == 0; k++)
            off = pc_alloc_drained(c, (unsigned)cls, bytes, false, 0, true, pc_evicted_one);
        if (off == 0)
            pc_arena_starved(c, (unsigned)cls);
        return off;
    }
    /* the first turns take only cells of the class the write needs; then a
     * chunk of another class is emptied for it; the last turns take any
     * class and, at the end, whatever they meet */
    for (unsigned round = 0; round < PC_EVICT_ROUNDS; round++) {
        uint64_t freed = 0;
        /* a drained chunk may still miss cells that sit free on another
         * process's stack (the rebalancer takes only a chunk whose every
         * cell is pooled): the next turns drain the next chunks */
        if (round >= PC_ANY_FROM && round < PC_FORCE_FROM + 1 &&
            (off = pc_alloc_drained(c, (unsigned)cls, bytes, true, round - PC_ANY_FROM,
                                    round == PC_FORCE_FROM, pc_evicted_one)) != 0)
            return off;
        (void)pc_evict_batch(c, coll, round < PC_ANY_FROM ? cls : -1, round >= PC_FORCE_FROM,
                             &freed);
        if ((off = pc_alloc_quiet(c, bytes)) != 0)
            return off;
    }
    pc_arena_starved(c, (unsigned)cls);
    return 0;
}

uint64_t pc_evict_ahead(pc_cache *c)
{
    struct pc_header_shm *h = c->hdr;
    if (atomic_load_explicit(&h->evict_colls, memory_order_relaxed) == 0)
        return 0;
    pc_mem_stats m;
    pc_mem_snapshot(c, &m);
    uint64_t cap = m.maxmemory;
    bool capped = (cap != 0 && m.chunk_bytes + PC_CHUNK_TARGET > cap) ||
                  m.hugepage_free + m.plain_free < PC_CHUNK_TARGET;
    if (!capped)
        return 0;
    /* what this process freed (as a writer or here) is for the writers: on
     * its stacks it could neither serve them nor complete a chunk for a
     * starved class */
    pc_give_all(c);
    uint64_t low = (cap != 0 && cap < m.chunk_bytes ? cap : m.chunk_bytes) / 64;
    uint64_t free_bytes = m.free_cell_bytes, evicted = 0;
    while (free_bytes < low && evicted < PC_AHEAD_MAX) {
        uint64_t freed = 0;
        unsigned n = pc_evict_batch(c, NULL, -1, false, &freed);
        if (n == 0)
            break;
        evicted += n;
        free_bytes += freed;
    }
    if (evicted > 0)
        pc_give_all(c);
    return evicted;
}
