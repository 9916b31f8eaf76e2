/*
 * table.c - the data operations on one collection: the seqlock read
 * protocol and the locked write protocol of docs/design.md ("Reads" and
 * "Writes"). Growth lives in growth.c, expiry reclamation in sweep.c, the
 * overflow chains in overflow.c.
 *
 * Read (hot path, no lock, no atomic RMW): route the hash, sample an even
 * bucket version, scan the 1-byte tags, copy the matching record out with
 * every length clamped subtractively against the cell size its class byte
 * gives, re-check the version. A stable miss on a bucket flagged
 * PC_USED_OVF searches the overflow chain under its lock; any miss re-checks
 * the routing word (a concurrent split may have moved the key). After
 * PC_READ_RETRIES unstable attempts the read takes the bucket lock.
 * Cost of a hit: the routing word's line, the bucket's line, the record's
 * line(s); zero stores to shared memory except the process's own stats line.
 */
#include "pc_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define PC_READ_RETRIES 16

/* ---- locking buckets ----------------------------------------------------- */

/* A record offset is plausible when it names a record cell (class > 0:
 * class 0 is the 16-byte cell of overflow nodes) with a sane key length. */
static struct pc_rec_shm *pc_rec_checked(const pc_cache *c, pc_off off, size_t *room)
{
    struct pc_rec_shm *r = pc_cell(c, off);
    if (r == NULL)
        return NULL;
    size_t cell = pc_class_bytes(c, r->cls);
    if (cell <= PC_REC_HDR || (((uint64_t)off << PC_OFF_SHIFT) + cell > c->region_bytes))
        return NULL;
    *room = cell - PC_REC_HDR;
    return r;
}

/* Repairs a bucket whose lock was taken from a dead writer: drops slots
 * that are not plausible records, duplicates, and records that do not route
 * here; rebuilds the tags; closes the version bracket. Records the dead
 * writer had unlinked but not freed leak (logged). */
static void pc_bucket_repair(pc_coll *coll, struct pc_bucket_shm *b, uint64_t idx)
{
    pc_cache *c = coll->c;
    uint64_t route = pc_route_load(coll->shm);
    unsigned n = atomic_load_explicit(&b->used, memory_order_relaxed) & PC_USED_MASK;
    uint8_t ovf = atomic_load_explicit(&b->used, memory_order_relaxed) & PC_USED_OVF;
    if (n > PC_SLOTS)
        n = PC_SLOTS;
    pc_off keep[PC_SLOTS];
    uint8_t tags[PC_SLOTS];
    unsigned k = 0, dropped = 0;
    for (unsigned i = 0; i < n; i++) {
        pc_off off = atomic_load_explicit(&b->slot[i], memory_order_relaxed);
        size_t room = 0;
        struct pc_rec_shm *r = pc_rec_checked(c, off, &room);
        bool dup = false;
        for (unsigned j = 0; j < k; j++)
            dup |= keep[j] == off;
        if (r == NULL || dup || r->klen > room ||
            pc_route_index(route, coll->shm->log2_initial, pc_key_hash(r->data, r->klen)) != idx) {
            dropped++;
            continue;
        }
        tags[k] = pc_tag_of(pc_key_hash(r->data, r->klen));
        keep[k++] = off;
    }
    uint32_t v = atomic_load_explicit(&b->version, memory_order_relaxed);
    if ((v & 1) == 0)
        pc_wbegin(b);
    for (unsigned i = 0; i < PC_SLOTS; i++) {
        atomic_store_explicit(&b->slot[i], i < k ? keep[i] : 0, memory_order_relaxed);
        atomic_store_explicit(&b->tags[i], i < k ? tags[i] : 0, memory_order_relaxed);
    }
    atomic_store_explicit(&b->used, (uint8_t)(k | ovf | (dropped ? PC_USED_OVF : 0)),
                          memory_order_relaxed);
    pc_wend(b);
    pc_log(c, PC_LOG_WARN,
           "pcache: %s: repaired bucket %" PRIu64 " after a dead writer "
           "(%u slots kept, %u dropped)",
           coll->shm->name, idx, k, dropped);
}

/* I3 for a bucket whose lock the caller holds and is about to release: no
 * bracket open, slots [0, used) filled (PC_ASSERT only: a release build
 * emits no code for it). */
static bool pc_bucket_settled(const struct pc_bucket_shm *b)
{
    unsigned n = atomic_load_explicit(&b->used, memory_order_relaxed) & PC_USED_MASK;
    if ((atomic_load_explicit(&b->version, memory_order_relaxed) & 1) != 0 || n > PC_SLOTS)
        return false;
    for (unsigned i = 0; i < n; i++)
        if (atomic_load_explicit(&b->slot[i], memory_order_relaxed) == 0)
            return false;
    return true;
}

int pc_bucket_lock(pc_coll *coll, struct pc_bucket_shm *b, uint64_t idx)
{
    PC_ASSERT(coll->c, I7, pc_dbg_chain_locks == 0);
    int rc = pc_lock_word(coll->c, &b->lock);
    if (PC_UNLIKELY(rc == PC_LOCK_RECOVERED))
        pc_bucket_repair(coll, b, idx);
    /* every unlock checks what it leaves; here only what a repair made */
    PC_ASSERT(coll->c, I3, rc != PC_LOCK_RECOVERED || pc_bucket_settled(b));
    PC_DEBUG_ONLY(pc_dbg_bucket_locks++);
    return 0;
}

void pc_bucket_unlock(struct pc_bucket_shm *b)
{
    PC_ASSERT(NULL, I3, pc_bucket_settled(b));
    PC_DEBUG_ONLY(pc_dbg_bucket_locks--);
    pc_unlock_word(&b->lock);
}

/* Locks the bucket hash h routes to, re-checking the route under the lock:
 * while we hold it nobody can split it (I6), so the mapping is stable. */
struct pc_bucket_shm *pc_lock_route(pc_coll *coll, uint64_t h, uint64_t *idx)
{
    unsigned l2 = coll->shm->log2_initial;
    for (;;) {
        uint64_t i = pc_route_index(pc_route_load(coll->shm), l2, h);
        struct pc_bucket_shm *b = pc_bucket_at(coll, i);
        pc_bucket_lock(coll, b, i);
        if (pc_route_index(pc_route_load(coll->shm), l2, h) == i) {
            *idx = i;
            return b;
        }
        pc_bucket_unlock(b);
    }
}

bool pc_bucket_may_hold(pc_coll *coll, uint64_t h, pc_off off)
{
    const struct pc_coll_shm *cs = coll->shm;
    const struct pc_bucket_shm *b =
        pc_bucket_at(coll, pc_route_index(pc_route_load(cs), cs->log2_initial, h));
    uint8_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
    if (used & PC_USED_OVF)
        return true;
    unsigned n = used & PC_USED_MASK;
    for (unsigned i = 0; i < n && i < PC_SLOTS; i++)
        if (atomic_load_explicit(&b->slot[i], memory_order_relaxed) == off)
            return true;
    return false;
}

/* ---- the read path ------------------------------------------------------ */

/* The most value bytes a read with an allocator prefetches before it
 * calls the allocator: a few lines cover the values a cache holds most;
 * past that the copy streams anyway. */
#define PC_PREFETCH_VALUE_MAX 1024u

/* What a read copies out. Filled speculatively; valid only once the
 * bracket it was read in proves stable (or under the lock). */
struct pc_rd {
    void *buf;  /* caller's buffer or NULL (probe) */
    size_t cap; /* its capacity */
    /* pc_get_alloc: buf comes from the caller's allocator, obtained (or
     * replaced by a larger one) during an optimistic read, which holds no
     * lock; a read under a lock only notes the size it needs */
    const pc_allocator *alloc;
    bool alloc_failed;
    size_t vlen;
    uint8_t flags;
    int64_t expires;
    int64_t counter;
    unsigned retries; /* seqlock retries this lookup took */
    bool fallback;    /* it ended under the bucket lock */
};

/* Copies rec's value into rd with every length clamped: a torn klen/vlen
 * can shrink what is copied but never push it past the cell (the clamp is
 * subtractive, so it cannot wrap). The one copy routine of every read. */
static PC_ALWAYS_INLINE bool pc_copy_out(const pc_cache *c, const struct pc_rec_shm *r,
                                         const void *key, size_t klen, struct pc_rd *rd,
                                         bool locked)
{
    size_t room = pc_rec_room(c, r);
    if (room <= PC_REC_HDR)
        return false;
    room -= PC_REC_HDR;
    size_t kl = r->klen;
    if (kl != klen || kl > room || !pc_bytes_eq(r->data, key, klen))
        return false;
    size_t vroom = room - kl;
    size_t vl = r->vlen;
    if (vl > vroom)
        vl = vroom;
    rd->flags = r->flags;
    rd->expires = atomic_load_explicit(&((struct pc_rec_shm *)r)->expires, memory_order_relaxed);
    rd->vlen = vl;
    if (rd->flags & PC_RF_COUNTER) {
        rd->counter = 0;
        memcpy(&rd->counter, r->data + kl, vl < 8 ? vl : 8);
        return true;
    }
    if (rd->alloc != NULL && !locked && (rd->buf == NULL || vl > rd->cap)) {
        /* no lock is held here; a torn vl is bounded by the cell, and the
         * seqlock check after the copy sends a torn read round again.
         * The value's lines are asked for first: a host's allocator (an
         * OpenSIPS pkg_malloc walks its free lists) then runs while they
         * come from memory, instead of the copy waiting for them after it */
        const uint8_t *vp = r->data + kl;
        size_t pf = vl < PC_PREFETCH_VALUE_MAX ? vl : PC_PREFETCH_VALUE_MAX;
        for (size_t o = 0; o < pf; o += 64)
            __builtin_prefetch(vp + o, 0, 3);
        if (rd->buf != NULL)
            rd->alloc->release(rd->buf, rd->alloc->ctx);
        rd->cap = 0;
        if ((rd->buf = rd->alloc->obtain(vl + 1, rd->alloc->ctx)) == NULL)
            rd->alloc_failed = true;
        else
            rd->cap = vl;
    }
    if (rd->buf != NULL && vl <= rd->cap) {
        memcpy(rd->buf, r->data + kl, vl);
    }
    return true;
}

enum { PC_RD_MISS = 0, PC_RD_HIT = 1, PC_RD_RETRY = 2 };

/* The largest guess pc_obtain_ahead acts on: what a wrong guess can waste. */
#define PC_GUESS_MAX PC_PREFETCH_VALUE_MAX

/* A read with an allocator that has found a candidate record obtains its
 * block before it touches the record: the record's lines are asked for
 * first, and the host's allocator (an OpenSIPS pkg_malloc scans its free
 * lists for hundreds of ns) runs while they come from memory, where the
 * copy would otherwise wait for them. Only a tag match gets here, so a miss
 * still allocates nothing (bar a tag collision, whose block is released).
 * The size is a guess, this process's last hit in the collection; a value
 * that turns out larger is obtained again at its size in pc_copy_out, and a
 * failed obtain here only means no block yet. */
static void pc_obtain_ahead(pc_coll *coll, const struct pc_rec_shm *r, size_t klen,
                            struct pc_rd *rd)
{
    uint32_t guess = atomic_load_explicit(&coll->alloc_guess, memory_order_relaxed);
    if (guess == 0 || guess > PC_GUESS_MAX)
        return;
    /* a prefetch past the record or the region cannot fault: the first
     * four lines (a typical record) without a loop, then the rest */
    const char *p = (const char *)r, *end = p + PC_REC_HDR + klen + guess;
    __builtin_prefetch(p, 0, 3);
    __builtin_prefetch(p + 64, 0, 3);
    __builtin_prefetch(p + 128, 0, 3);
    __builtin_prefetch(p + 192, 0, 3);
    for (p += 256; p < end; p += 64)
        __builtin_prefetch(p, 0, 3);
    if ((rd->buf = rd->alloc->obtain((size_t)guess + 1, rd->alloc->ctx)) != NULL)
        rd->cap = guess;
}

/* The next guess after a hit of vlen bytes: kept while it fits and wastes
 * under half, else vlen rounded up to a line (values of a collection often
 * vary by a few bytes); 0 past PC_GUESS_MAX. Stored only when it changes,
 * so a steady collection writes nothing. */
static void pc_note_guess(pc_coll *coll, size_t vlen)
{
    uint32_t g = atomic_load_explicit(&coll->alloc_guess, memory_order_relaxed);
    if (g != 0 && vlen <= g && vlen >= g / 2)
        return;
    uint32_t ng = vlen > PC_GUESS_MAX ? 0 : (uint32_t)((vlen + 64) & ~(size_t)63);
    if (ng != g)
        atomic_store_explicit(&coll->alloc_guess, ng, memory_order_relaxed);
}

/* Scans one bucket. With locked=false this is the optimistic attempt and
 * may return PC_RD_RETRY; *v gets the version it was read under, *ovf
 * whether the bucket points at overflow and *hit_slot the slot of a hit. */
static PC_ALWAYS_INLINE int pc_bucket_read(pc_coll *coll, struct pc_bucket_shm *b, uint8_t tag,
                                           const void *key, size_t klen, struct pc_rd *rd,
                                           bool locked, uint32_t *v, bool *ovf, unsigned *hit_slot)
{
    const pc_cache *c = coll->c;
    uint32_t v1 = atomic_load_explicit(&b->version, memory_order_acquire);
    if (!locked && (v1 & 1))
        return PC_RD_RETRY;
    uint8_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
    unsigned n = used & PC_USED_MASK;
    if (n > PC_SLOTS)
        n = PC_SLOTS;
    int res = PC_RD_MISS;
    for (unsigned i = 0; i < n; i++) {
        if (!pc_tag_eq(atomic_load_explicit(&b->tags[i], memory_order_relaxed), tag))
            continue;
        pc_off off = atomic_load_explicit(&b->slot[i], memory_order_relaxed);
        const struct pc_rec_shm *r = pc_cell(c, off);
        if (r != NULL && !locked && rd->alloc != NULL && rd->buf == NULL)
            pc_obtain_ahead(coll, r, klen, rd);
        if (r != NULL && pc_copy_out(c, r, key, klen, rd, locked)) {
            res = PC_RD_HIT;
            *hit_slot = i;
            break;
        }
    }
    if (!locked) {
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&b->version, memory_order_relaxed) != v1)
            return PC_RD_RETRY;
    }
    *v = v1;
    *ovf = (used & PC_USED_OVF) != 0;
    return res;
}

/* A hit's access bit: stored only when clear (so a hot key's bucket line
 * is written once per sweep, not per read), with an atomic OR so that no
 * tag a writer stores meanwhile is overwritten. */
static inline void pc_mark_ref(struct pc_bucket_shm *b, unsigned slot)
{
    _Atomic uint8_t *t = &b->tags[slot];
    if (!(atomic_load_explicit(t, memory_order_relaxed) & PC_TAG_REF))
        atomic_fetch_or_explicit(t, PC_TAG_REF, memory_order_relaxed);
}

static int pc_chain_read(pc_coll *coll, uint64_t h, const void *key, size_t klen, struct pc_rd *rd)
{
    struct pc_chain_shm *ch = pc_chain_for(coll, h);
    pc_chain_lock(coll, ch);
    pc_off prev;
    pc_off node = pc_chain_find(coll, ch, key, klen, &prev);
    int res = PC_RD_MISS;
    if (node != 0) {
        const struct pc_ovf_node_shm *n = pc_cell(coll->c, node);
        const struct pc_rec_shm *r = pc_cell(coll->c, n->rec);
        if (r != NULL && pc_copy_out(coll->c, r, key, klen, rd, true))
            res = PC_RD_HIT;
    }
    pc_chain_unlock(ch);
    return res;
}

/* ---- snapshot reads (pcache.h, pc_snap_begin) ----------------------------- */

/* One read of a snapshot: the bucket, the version it was read under, the
 * collection's routing then. */
struct pc_snap_ent {
    const struct pc_bucket_shm *b;
    const struct pc_coll_shm *cs;
    uint64_t route;
    uint32_t ver;
};

/* Records a read of bucket b at version v (routing route). Cold: called
 * only between pc_snap_begin and pc_snap_end, never under a lock. */
__attribute__((noinline, cold)) static void pc_snap_note(pc_cache *c, const struct pc_coll_shm *cs,
                                                         const struct pc_bucket_shm *b, uint32_t v,
                                                         uint64_t route)
{
    if (c->snap_n == c->snap_cap) {
        unsigned cap = c->snap_cap ? 2 * c->snap_cap : 64;
        struct pc_snap_ent *e = realloc(c->snap, cap * sizeof *e);
        if (e == NULL) {
            c->snap_lost = true;
            return;
        }
        c->snap = e;
        c->snap_cap = cap;
    }
    c->snap[c->snap_n++] = (struct pc_snap_ent){b, cs, route, v};
}

void pc_snap_begin(pc_cache *c)
{
    if (c == NULL)
        return;
    c->snap_n = 0;
    c->snap_lost = false;
    c->snap_on = true;
}

int pc_snap_end(pc_cache *c)
{
    if (c == NULL)
        return PC_EINVAL;
    c->snap_on = false;
    if (c->snap_lost)
        return PC_ECONFLICT;
    /* the reads' loads before the re-check's (the read path's own fence) */
    atomic_thread_fence(memory_order_acquire);
    for (unsigned i = 0; i < c->snap_n; i++) {
        const struct pc_snap_ent *e = &c->snap[i];
        if (atomic_load_explicit(&((struct pc_bucket_shm *)e->b)->version, memory_order_relaxed) !=
                e->ver ||
            pc_route_load(e->cs) != e->route)
            return PC_ECONFLICT;
    }
    return 0;
}

/* The shared lookup of get, get_buf, probe and get_counter. Returns 0 on a
 * live hit (rd filled), PC_ENOTFOUND otherwise. */
static int pc_lookup(pc_coll *coll, const void *key, size_t klen, struct pc_rd *rd)
{
    const struct pc_coll_shm *cs = coll->shm;
    uint64_t h = pc_key_hash(key, klen);
    uint8_t tag = pc_tag_of(h);
    unsigned l2 = cs->log2_initial;
    int res = PC_RD_RETRY;
    unsigned retries = 0, slot = 0;
    /* LRU and S3-FIFO read the access bits; noeviction and random do not,
     * and their reads store nothing */
    uint32_t pol = atomic_load_explicit(&cs->evict_policy, memory_order_relaxed) & 0x0fu;
    bool track = pol == PC_EVICT_LRU || pol == PC_EVICT_S3FIFO;
    for (int attempt = 0; attempt < PC_READ_RETRIES && res == PC_RD_RETRY; attempt++) {
        uint64_t route = pc_route_load(cs);
        uint64_t idx = pc_route_index(route, l2, h);
        struct pc_bucket_shm *b = pc_bucket_at(coll, idx);
        uint32_t v;
        bool ovf;
        res = pc_bucket_read(coll, b, tag, key, klen, rd, false, &v, &ovf, &slot);
        if (res == PC_RD_HIT && track)
            pc_mark_ref(b, slot);
        if (res == PC_RD_MISS && ovf)
            res = pc_chain_read(coll, h, key, klen, rd);
        if (res == PC_RD_MISS && (pc_route_load(cs) != route ||
                                  atomic_load_explicit(&b->version, memory_order_acquire) != v))
            res = PC_RD_RETRY; /* a split or a drain may have moved the key */
        if (res == PC_RD_RETRY) {
            retries++;
            pc_cpu_relax();
        } else if (PC_UNLIKELY(coll->c->snap_on)) {
            pc_snap_note(coll->c, cs, b, v, route);
        }
    }
    if (res == PC_RD_RETRY) { /* fallback: read under the bucket lock */
        uint64_t idx;
        struct pc_bucket_shm *b = pc_lock_route(coll, h, &idx);
        uint32_t v;
        bool ovf;
        res = pc_bucket_read(coll, b, tag, key, klen, rd, true, &v, &ovf, &slot);
        if (res == PC_RD_HIT && track)
            pc_mark_ref(b, slot);
        if (res == PC_RD_MISS && ovf)
            res = pc_chain_read(coll, h, key, klen, rd);
        uint64_t route = pc_route_load(cs); /* stable: a split takes this lock */
        pc_bucket_unlock(b);
        if (PC_UNLIKELY(coll->c->snap_on))
            pc_snap_note(coll->c, cs, b, v, route);
        rd->fallback = true;
    }
    rd->retries = retries;
    if (res == PC_RD_HIT && (rd->expires == 0 || rd->expires > pc_mono_ms()))
        return 0;
    return PC_ENOTFOUND;
}

/* Warms the lines a later read or write of key will touch, without waiting
 * for them. stage 0 prefetches the routing word's target bucket; stage 1
 * reads that bucket (issue it after stage 0 has had time to land, e.g. for
 * the next few keys of a pipelined batch) and prefetches the records whose
 * tags match. Nothing is validated and nothing is returned: a torn or
 * concurrently split bucket only makes the hint useless, never wrong (a
 * prefetch never faults, and pc_cell bounds every offset). */
void pc_prefetch(pc_coll *coll, const void *key, size_t klen, int stage)
{
    if (coll == NULL || key == NULL || klen > PC_KEY_MAX)
        return;
    const struct pc_coll_shm *cs = coll->shm;
    uint64_t h = pc_key_hash(key, klen);
    const struct pc_bucket_shm *b =
        pc_bucket_at(coll, pc_route_index(pc_route_load(cs), cs->log2_initial, h));
    if (stage == 0) {
        __builtin_prefetch(b, 0, 3);
        return;
    }
    uint8_t tag = pc_tag_of(h);
    unsigned n = atomic_load_explicit(&b->used, memory_order_relaxed) & PC_USED_MASK;
    if (n > PC_SLOTS)
        n = PC_SLOTS;
    for (unsigned i = 0; i < n; i++)
        if (pc_tag_eq(atomic_load_explicit(&b->tags[i], memory_order_relaxed), tag)) {
            const char *r =
                pc_cell(coll->c, atomic_load_explicit(&b->slot[i], memory_order_relaxed));
            if (r == NULL)
                continue;
            /* header, key and the start of the value; the size is not known
             * without waiting for the first line, so a typical record's
             * four lines (a prefetch past the region's end cannot fault) */
            for (unsigned l = 0; l < 4; l++)
                __builtin_prefetch(r + 64 * l, 0, 3);
        }
}

/* Records one read in this process's stats line. Called once per user
 * read, so an internal retry (pc_get growing its buffer) is not counted
 * twice. */
static inline void pc_read_stats(pc_coll *coll, const struct pc_rd *rd, bool hit)
{
    struct pc_stats_shm *s = pc_stats(coll);
    if (PC_UNLIKELY(rd->retries | rd->fallback)) {
        PC_STAT_BUMP(s, retries, rd->retries);
        PC_STAT_BUMP(s, fallbacks, rd->fallback ? 1 : 0);
    }
    PC_STAT_BUMP(s, reads, 1);
    if (hit)
        PC_STAT_BUMP(s, hits, 1);
    else
        PC_STAT_BUMP(s, misses, 1);
}

static int pc_check_key(const pc_coll *coll, const void *key, size_t klen)
{
    if (coll == NULL || (key == NULL && klen > 0))
        return PC_EINVAL;
    if (klen > PC_KEY_MAX)
        return PC_ETOOBIG;
    return 0;
}

static void pc_fill_meta(const struct pc_rd *rd, size_t vlen, pc_meta *meta)
{
    if (meta == NULL)
        return;
    if (rd->expires == 0) {
        meta->ttl_ms = -1;
    } else {
        int64_t left = rd->expires - pc_mono_ms();
        meta->ttl_ms = left > 0 ? left : 0;
    }
    meta->is_counter = (rd->flags & PC_RF_COUNTER) != 0;
    meta->vlen = vlen;
    meta->counter = meta->is_counter ? rd->counter : 0;
}

/* quiet_toosmall: a too-small result is not counted (pc_get retries it). */
static int pc_get_buf_impl(pc_coll *coll, const void *key, size_t klen, void *buf, size_t cap,
                           size_t *vlen, size_t *needed, pc_meta *meta, bool quiet_toosmall)
{
    if (vlen != NULL)
        *vlen = 0;
    if (needed != NULL)
        *needed = 0;
    int rc = pc_check_key(coll, key, klen);
    if (rc != 0 || vlen == NULL || needed == NULL || (buf == NULL && cap > 0))
        return rc != 0 ? rc : PC_EINVAL;
    if ((rc = pc_enter(coll->c)) != 0)
        return rc;
    if (PC_UNLIKELY(coll->c->txn != NULL))
        return pc_txn_op_get(coll->c->txn, coll, key, klen, buf, cap, NULL, NULL, vlen, needed,
                             meta);
    struct pc_rd rd = {.buf = buf, .cap = cap};
    rc = pc_lookup(coll, key, klen, &rd);
    if (rc != 0) {
        pc_read_stats(coll, &rd, false);
        return rc;
    }
    size_t out = rd.vlen;
    if (rd.flags & PC_RF_COUNTER) {
        char num[24];
        int n = snprintf(num, sizeof num, "%" PRId64, rd.counter);
        out = (size_t)n;
        if (out <= cap)
            memcpy(buf, num, out);
    }
    if (out > cap) {
        if (!quiet_toosmall)
            pc_read_stats(coll, &rd, true);
        *needed = out;
        return PC_ETOOSMALL;
    }
    pc_read_stats(coll, &rd, true);
    *vlen = out;
    pc_fill_meta(&rd, out, meta);
    return 0;
}

int pc_get_buf(pc_coll *coll, const void *key, size_t klen, void *buf, size_t cap, size_t *vlen,
               size_t *needed, pc_meta *meta)
{
    return pc_get_buf_impl(coll, key, klen, buf, cap, vlen, needed, meta, false);
}

int pc_get(pc_coll *coll, const void *key, size_t klen, void **val, size_t *vlen, pc_meta *meta)
{
    if (val == NULL || vlen == NULL)
        return PC_EINVAL;
    char stackbuf[512];
    size_t got = 0, need = 0;
    int rc = pc_get_buf_impl(coll, key, klen, stackbuf, sizeof stackbuf, &got, &need, meta, true);
    if (rc == 0) {
        char *p = malloc(got + 1);
        if (p == NULL)
            return PC_EHEAP;
        memcpy(p, stackbuf, got);
        p[got] = '\0';
        *val = p;
        *vlen = got;
        return 0;
    }
    while (rc == PC_ETOOSMALL) { /* large value: read straight into the heap */
        char *p = malloc(need + 1);
        if (p == NULL)
            return PC_EHEAP;
        size_t cap = need;
        rc = pc_get_buf_impl(coll, key, klen, p, cap, &got, &need, meta, true);
        if (rc == 0) {
            p[got] = '\0';
            *val = p;
            *vlen = got;
            return 0;
        }
        free(p);
    }
    return rc;
}

/* What pc_get_alloc's common hit does not need, out of its line: a read
 * under the lock that found no room (room is made here, outside the lock,
 * and the read repeated), a counter, a failed obtain, a miss, meta. rd and
 * rc are the first lookup's. */
static __attribute__((noinline)) int pc_get_alloc_rest(pc_coll *coll, const void *key, size_t klen,
                                                       const pc_allocator *a, struct pc_rd *rd,
                                                       int rc, void **val, size_t *vlen,
                                                       pc_meta *meta)
{
    unsigned retries = rd->retries;
    bool fallback = rd->fallback;
    while (rc == 0 && !rd->alloc_failed && !(rd->flags & PC_RF_COUNTER) && rd->vlen > rd->cap) {
        if (rd->buf != NULL)
            a->release(rd->buf, a->ctx);
        rd->cap = 0;
        if ((rd->buf = a->obtain(rd->vlen + 1, a->ctx)) == NULL) {
            rd->alloc_failed = true;
            break;
        }
        rd->cap = rd->vlen;
        rc = pc_lookup(coll, key, klen, rd);
        retries += rd->retries;
        fallback |= rd->fallback;
    }
    rd->retries = retries;
    rd->fallback = fallback;
    pc_read_stats(coll, rd, rc == 0 && !rd->alloc_failed);
    if (rc == 0 && !rd->alloc_failed && !(rd->flags & PC_RF_COUNTER))
        pc_note_guess(coll, rd->vlen);
    if (rc == 0 && !rd->alloc_failed && (rd->flags & PC_RF_COUNTER)) {
        char num[24];
        int n = snprintf(num, sizeof num, "%" PRId64, rd->counter);
        if (rd->buf == NULL || (size_t)n > rd->cap) {
            if (rd->buf != NULL)
                a->release(rd->buf, a->ctx);
            rd->cap = (size_t)n;
            if ((rd->buf = a->obtain((size_t)n + 1, a->ctx)) == NULL)
                rd->alloc_failed = true;
        }
        if (rd->buf != NULL)
            memcpy(rd->buf, num, (size_t)n);
        rd->vlen = (size_t)n;
    }
    if (rc == 0 && rd->alloc_failed)
        rc = PC_EHEAP;
    if (rc != 0) {
        if (rd->buf != NULL)
            a->release(rd->buf, a->ctx);
        return rc;
    }
    ((char *)rd->buf)[rd->vlen] = '\0';
    *val = rd->buf;
    *vlen = rd->vlen;
    pc_fill_meta(rd, rd->vlen, meta);
    return 0;
}

int pc_get_alloc(pc_coll *coll, const void *key, size_t klen, const pc_allocator *a, void **val,
                 size_t *vlen, pc_meta *meta)
{
    if (val != NULL)
        *val = NULL;
    if (vlen != NULL)
        *vlen = 0;
    int rc = pc_check_key(coll, key, klen);
    if (rc != 0 || val == NULL || vlen == NULL || a == NULL || a->obtain == NULL ||
        a->release == NULL)
        return rc != 0 ? rc : PC_EINVAL;
    if ((rc = pc_enter(coll->c)) != 0)
        return rc;
    if (PC_UNLIKELY(coll->c->txn != NULL))
        return pc_txn_op_get(coll->c->txn, coll, key, klen, NULL, 0, a, val, vlen, NULL, meta);
    struct pc_rd rd = {.alloc = a};
    rc = pc_lookup(coll, key, klen, &rd);
    /* the common hit: a value in the block the lookup obtained ahead; the
     * rest (pc_get_alloc_rest) stays out of this function's registers */
    if (PC_LIKELY(rc == 0 && !rd.alloc_failed && !(rd.flags & PC_RF_COUNTER) && rd.vlen <= rd.cap &&
                  meta == NULL)) {
        pc_read_stats(coll, &rd, true);
        pc_note_guess(coll, rd.vlen);
        ((char *)rd.buf)[rd.vlen] = '\0';
        *val = rd.buf;
        *vlen = rd.vlen;
        return 0;
    }
    return pc_get_alloc_rest(coll, key, klen, a, &rd, rc, val, vlen, meta);
}

int pc_probe(pc_coll *coll, const void *key, size_t klen, pc_meta *meta)
{
    int rc = pc_check_key(coll, key, klen);
    if (rc != 0)
        return rc;
    if ((rc = pc_enter(coll->c)) != 0)
        return rc;
    if (PC_UNLIKELY(coll->c->txn != NULL))
        return pc_txn_op_probe(coll->c->txn, coll, key, klen, meta);
    struct pc_rd rd = {0};
    rc = pc_lookup(coll, key, klen, &rd);
    pc_read_stats(coll, &rd, rc == 0);
    if (rc == 0)
        pc_fill_meta(&rd, rd.vlen, meta);
    return rc;
}

/* Parses the canonical text of an int64, exactly as pc_get formats one and
 * as Redis's string2ll accepts it: an optional '-', then "0" alone or
 * digits without a leading zero; no '+', no spaces, no "-0", no byte after
 * the last digit (a stored "1\0" is not the number 1). Its own loop rather
 * than strtoll: the value is not NUL-terminated and may hold NULs. */
int pc_parse_i64(const unsigned char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    bool neg = n > 0 && s[0] == '-';
    if (neg)
        i = 1;
    if (i == n)
        return PC_ENOTNUM;
    if (s[i] == '0') {
        if (n != 1)
            return PC_ENOTNUM; /* "01", "-0", "00" */
        *out = 0;
        return 0;
    }
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    bool over = false;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return PC_ENOTNUM;
        unsigned d = (unsigned)(s[i] - '0');
        if (over || v > (lim - d) / 10)
            over = true; /* keep checking: a non-digit later is still not a number */
        else
            v = v * 10 + d;
    }
    if (over)
        return PC_ERANGE;
    *out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    return 0;
}

int pc_get_counter(pc_coll *coll, const void *key, size_t klen, int64_t *out)
{
    int rc = pc_check_key(coll, key, klen);
    if (rc != 0 || out == NULL)
        return rc != 0 ? rc : PC_EINVAL;
    if ((rc = pc_enter(coll->c)) != 0)
        return rc;
    if (PC_UNLIKELY(coll->c->txn != NULL))
        return pc_txn_op_counter(coll->c->txn, coll, key, klen, out);
    unsigned char buf[24];
    struct pc_rd rd = {.buf = buf, .cap = sizeof buf};
    rc = pc_lookup(coll, key, klen, &rd);
    pc_read_stats(coll, &rd, rc == 0);
    if (rc != 0)
        return rc;
    if (rd.flags & PC_RF_COUNTER) {
        *out = rd.counter;
        return 0;
    }
    if (rd.vlen > sizeof buf)
        return PC_ENOTNUM;
    return pc_parse_i64(buf, rd.vlen, out);
}
