/*
 * write.c - the write protocol: set, remove, add/sub, expire.
 *
 * Every write builds what it needs (a record, an overflow node) before it
 * takes the bucket lock and frees what it replaced after releasing it (I5).
 * When the locked state turns out to need something not built yet - a full
 * bucket needing an overflow node, a string needing a counter record - the
 * write unlocks, allocates and starts over. Changes visible to lock-free
 * readers happen inside a version bracket (I3), except the TTL-only refresh:
 * a set whose value is byte-identical to a live string stores the new expiry
 * with one atomic store and leaves the version alone.
 */
#include "pc_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned pc_used(const struct pc_bucket_shm *b)
{
    return atomic_load_explicit(&b->used, memory_order_relaxed) & PC_USED_MASK;
}

/* Whether key sits in its overflow chain. The caller holds the key's
 * bucket lock (so the chain lock comes second, I7, and no node for the key
 * can be pushed meanwhile: the count peek is safe). PC_ASSERT only. */
static bool pc_in_chain(pc_coll *coll, uint64_t h, const void *key, size_t klen)
{
    struct pc_chain_shm *ch = pc_chain_for(coll, h);
    if (ch->count == 0)
        return false;
    pc_chain_lock(coll, ch);
    pc_off prev;
    bool found = pc_chain_find(coll, ch, key, klen, &prev) != 0;
    pc_chain_unlock(ch);
    return found;
}

/* Locks key's bucket and finds the key. When the bucket points at
 * overflow and the key is not in the bucket, the chain is left locked in
 * loc->ch so the caller can insert there without a second lookup. */
static void pc_locate(pc_coll *coll, uint64_t h, const void *key, size_t klen, int64_t now,
                      struct pc_loc *loc)
{
    uint64_t idx;
    struct pc_bucket_shm *b = pc_lock_route(coll, h, &idx);
    pc_locate_held(coll, b, idx, h, key, klen, now, loc);
}

void pc_locate_held(pc_coll *coll, struct pc_bucket_shm *b, uint64_t idx, uint64_t h,
                    const void *key, size_t klen, int64_t now, struct pc_loc *loc)
{
    pc_cache *c = coll->c;
    memset(loc, 0, sizeof *loc);
    loc->b = b;
    loc->idx = idx;
    uint8_t tag = pc_tag_of(h);
    unsigned n = pc_used(b);
    for (unsigned i = 0; i < n; i++) {
        if (!pc_tag_eq(atomic_load_explicit(&b->tags[i], memory_order_relaxed), tag))
            continue;
        pc_off off = atomic_load_explicit(&b->slot[i], memory_order_relaxed);
        struct pc_rec_shm *r = pc_cell(c, off);
        if (r != NULL && pc_rec_key_eq(c, r, key, klen)) {
            loc->where = 1;
            loc->slot = i;
            loc->rec_off = off;
            loc->rec = r;
            break;
        }
    }
    if (loc->where == 0 && (atomic_load_explicit(&b->used, memory_order_relaxed) & PC_USED_OVF)) {
        loc->ch = pc_chain_for(coll, h);
        pc_chain_lock(coll, loc->ch);
        loc->node = pc_chain_find(coll, loc->ch, key, klen, &loc->prev);
        if (loc->node != 0) {
            struct pc_ovf_node_shm *nd = pc_cell(c, loc->node);
            loc->where = 2;
            loc->rec_off = nd->rec;
            loc->rec = pc_cell(c, nd->rec);
        }
    }
    if (loc->rec != NULL) {
        int64_t e = atomic_load_explicit(&loc->rec->expires, memory_order_relaxed);
        loc->live = e == 0 || e > now;
    }
    /* the chain was not searched because the key was in the bucket or the
     * bucket has no PC_USED_OVF: either way it is not in the chain (I4) */
    PC_ASSERT(c, I4, loc->ch != NULL || !pc_in_chain(coll, h, key, klen));
}

static void pc_release(struct pc_loc *loc)
{
    if (loc->ch != NULL)
        pc_chain_unlock(loc->ch);
    pc_bucket_unlock(loc->b);
}

/* The hook word a write to coll hands to this process's mutation hook: 0
 * (no hook call) without a hook, else one relaxed read of the shared word. */
unsigned pc_hooked(const pc_coll *coll)
{
    return coll->c->mut_fn == NULL
               ? 0
               : atomic_load_explicit(&coll->shm->hook_word, memory_order_relaxed);
}

/* The collection's "refuse writes" code, 0 when writes go on. */
static inline int pc_wblocked(const pc_coll *coll)
{
    return atomic_load_explicit(&coll->shm->wblock, memory_order_relaxed);
}

/* The write's stamp: the bucket version after its bracket (lock held). */
static uint32_t pc_stamp(const struct pc_loc *loc)
{
    return atomic_load_explicit(&loc->b->version, memory_order_relaxed);
}

/* Hands an acknowledged write to the mutation hook (no lock held). */
int pc_mutated(pc_coll *coll, unsigned word, int op, const void *key, size_t klen, const void *val,
               size_t vlen, int64_t counter, int64_t expires, uint32_t stamp)
{
    return pc_mutated_grp(coll, word, op, key, klen, val, vlen, counter, expires, stamp, 0, 0);
}

int pc_mutated_grp(pc_coll *coll, unsigned word, int op, const void *key, size_t klen,
                   const void *val, size_t vlen, int64_t counter, int64_t expires, uint32_t stamp,
                   uint32_t group, uint64_t txn)
{
    pc_mutation m = {.group = group,
                     .txn = txn,
                     .coll = coll,
                     .op = op,
                     .word = word,
                     .key = key,
                     .klen = klen,
                     .val = val,
                     .vlen = vlen,
                     .counter = counter,
                     .expires_mono_ms = expires,
                     .stamp = stamp};
    return coll->c->mut_fn(coll->c->mut_ctx, &m);
}

/* Lowers the expiry hint covering loc's key so the sweep will look. */
void pc_hint_lower(pc_coll *coll, struct pc_loc *loc, int64_t expires)
{
    uint32_t nh = pc_hint_of(expires);
    if (nh == 0)
        return;
    if (loc->where == 2) {
        if (loc->ch->hint == 0 || nh < loc->ch->hint)
            loc->ch->hint = nh;
        return;
    }
    _Atomic uint32_t *hp = pc_hint_at(coll, loc->idx);
    uint32_t cur = atomic_load_explicit(hp, memory_order_relaxed);
    if (cur == 0 || nh < cur)
        atomic_store_explicit(hp, nh, memory_order_relaxed);
}

/* Replaces the found record with rec_off: bracketed in a bucket slot; a
 * chain node is only read under the chain lock, which we hold. */
void pc_replace_br(pc_cache *c, struct pc_loc *loc, pc_off rec_off, bool br)
{
    if (loc->where == 1) {
        pc_wbegin_if(loc->b, br);
        atomic_store_explicit(&loc->b->slot[loc->slot], rec_off, memory_order_relaxed);
        pc_wend_if(loc->b, br);
        /* an overwrite is an access (evict.c): the bit is only read there */
        atomic_fetch_or_explicit(&loc->b->tags[loc->slot], PC_TAG_REF, memory_order_relaxed);
    } else {
        /* chain nodes are read under the chain lock; the bracket only
         * advances the bucket version, which stamps the write (mutation hook) */
        struct pc_ovf_node_shm *nd = pc_cell(c, loc->node);
        pc_wbegin_if(loc->b, br);
        nd->rec = rec_off;
        pc_wend_if(loc->b, br);
    }
}

static void pc_replace(pc_cache *c, struct pc_loc *loc, pc_off rec_off)
{
    pc_replace_br(c, loc, rec_off, true);
}

/* Inserts a new key: into the bucket when it has a free slot, else into
 * the chain using the prebuilt node. Returns false when a node is needed
 * but none was built (the caller unlocks, allocates, retries). */
bool pc_insert_br(pc_coll *coll, struct pc_loc *loc, uint64_t h, pc_off rec_off, int64_t expires,
                  pc_off *node, bool br)
{
    struct pc_bucket_shm *b = loc->b;
    unsigned n = pc_used(b);
    PC_ASSERT(coll->c, I6,
              pc_route_index(pc_route_load(coll->shm), coll->shm->log2_initial, h) == loc->idx);
    if (n < PC_SLOTS) {
        uint8_t ovf = atomic_load_explicit(&b->used, memory_order_relaxed) & PC_USED_OVF;
        uint8_t tag = pc_evict_on_insert(coll, h, rec_off);
        pc_wbegin_if(b, br);
        atomic_store_explicit(&b->slot[n], rec_off, memory_order_relaxed);
        atomic_store_explicit(&b->tags[n], tag, memory_order_relaxed);
        atomic_store_explicit(&b->used, (uint8_t)((n + 1) | ovf), memory_order_relaxed);
        pc_wend_if(b, br);
        loc->where = 0; /* the bucket's hint covers the new slot */
        pc_hint_lower(coll, loc, expires);
    } else {
        if (*node == 0)
            return false;
        (void)pc_evict_on_insert(coll, h, rec_off); /* a chain slot has no access bit */
        if (loc->ch == NULL) {
            loc->ch = pc_chain_for(coll, h);
            pc_chain_lock(coll, loc->ch);
        }
        pc_wbegin_if(b, br); /* sets the flag and stamps the write */
        /* the overflow flag before the link (I4): a writer killed between
         * the two leaves a flag with nothing behind it (readers search the
         * chain and miss, which is sound), never a key in the chain that
         * readers of the bucket do not look for */
        atomic_store_explicit(&b->used, (uint8_t)(n | PC_USED_OVF), memory_order_relaxed);
        atomic_thread_fence(memory_order_release);
        pc_chain_push(coll, loc->ch, *node, rec_off, h, expires);
        *node = 0;
        pc_wend_if(b, br);
    }
    PC_STAT_ADD(coll, inserted, 1);
    return true;
}

static bool pc_insert(pc_coll *coll, struct pc_loc *loc, uint64_t h, pc_off rec_off,
                      int64_t expires, pc_off *node)
{
    return pc_insert_br(coll, loc, h, rec_off, expires, node, true);
}

/* Removes the found key from where it lives; the record is freed by the
 * caller after unlocking. */
void pc_unlink_br(pc_coll *coll, struct pc_loc *loc, pc_off *freed_node, bool br)
{
    struct pc_bucket_shm *b = loc->b;
    uint8_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
    if (loc->where == 1) {
        unsigned n = used & PC_USED_MASK, last = n - 1;
        pc_wbegin_if(b, br);
        atomic_store_explicit(&b->slot[loc->slot],
                              atomic_load_explicit(&b->slot[last], memory_order_relaxed),
                              memory_order_relaxed);
        atomic_store_explicit(&b->tags[loc->slot],
                              atomic_load_explicit(&b->tags[last], memory_order_relaxed),
                              memory_order_relaxed);
        atomic_store_explicit(&b->slot[last], 0, memory_order_relaxed);
        atomic_store_explicit(&b->used, (uint8_t)((used & PC_USED_OVF) | last),
                              memory_order_relaxed);
        pc_wend_if(b, br);
    } else {
        pc_wbegin_if(b, br);
        pc_chain_unlink(coll, loc->ch, loc->prev, loc->node);
        pc_wend_if(b, br);
        *freed_node = loc->node;
        pc_chain_unlock(loc->ch); /* the scan below locks chains one by one */
        loc->ch = NULL;
        if (!pc_bucket_has_overflow(coll, pc_route_load(coll->shm), loc->idx)) {
            pc_wbegin_if(b, br);
            atomic_store_explicit(&b->used, (uint8_t)(used & PC_USED_MASK), memory_order_relaxed);
            pc_wend_if(b, br);
        }
    }
    PC_STAT_ADD(coll, deleted, 1);
}

static void pc_unlink_found(pc_coll *coll, struct pc_loc *loc, pc_off *freed_node)
{
    pc_unlink_br(coll, loc, freed_node, true);
}

/* ---- undo of a write the hook did not take (pc_mutation_fn) ----------------
 * Each puts the key back as it was before the write when the key still
 * holds what the write left (the same record, the same value or expiry):
 * a later writer's change is never undone. Returns true when undone. */

/* The write put record mine where prev was (0: the key was absent). On
 * success prev is in the table again (the caller must not free it) and
 * mine is freed. */
bool pc_undo_put(pc_coll *coll, uint64_t h, const void *key, size_t klen, pc_off mine, pc_off prev)
{
    pc_cache *c = coll->c;
    struct pc_loc loc;
    pc_off node = 0;
    pc_locate(coll, h, key, klen, pc_mono_ms(), &loc);
    bool done = loc.where != 0 && loc.rec_off == mine;
    if (done) {
        if (prev != 0)
            pc_replace(c, &loc, prev);
        else
            pc_unlink_found(coll, &loc, &node);
    }
    pc_release(&loc);
    if (done)
        pc_free(c, mine);
    if (node != 0)
        pc_free(c, node);
    return done;
}

/* The write set record roff's expiry from prev to now_exp in place. */
static void pc_undo_expiry(pc_coll *coll, uint64_t h, const void *key, size_t klen, pc_off roff,
                           int64_t now_exp, int64_t prev)
{
    struct pc_loc loc;
    pc_locate(coll, h, key, klen, pc_mono_ms(), &loc);
    if (loc.where != 0 && loc.rec_off == roff &&
        atomic_load_explicit(&loc.rec->expires, memory_order_relaxed) == now_exp) {
        pc_wbegin(loc.b);
        atomic_store_explicit(&loc.rec->expires, prev, memory_order_relaxed);
        pc_wend(loc.b);
        pc_hint_lower(coll, &loc, prev);
    }
    pc_release(&loc);
}

/* The write removed record old (detached, not freed): it goes back when
 * the key is still absent. On success the caller must not free old. */
bool pc_undo_remove(pc_coll *coll, uint64_t h, const void *key, size_t klen, pc_off old)
{
    pc_cache *c = coll->c;
    struct pc_rec_shm *r = pc_cell(c, old);
    int64_t e = atomic_load_explicit(&r->expires, memory_order_relaxed);
    pc_off node = 0;
    bool done = false;
    for (;;) {
        struct pc_loc loc;
        pc_locate(coll, h, key, klen, pc_mono_ms(), &loc);
        if (loc.where != 0) { /* written again since */
            pc_release(&loc);
            break;
        }
        if (pc_insert(coll, &loc, h, old, e, &node)) {
            pc_release(&loc);
            done = true;
            break;
        }
        pc_release(&loc);
        if ((node = pc_alloc_evict(coll, sizeof(struct pc_ovf_node_shm))) == 0)
            break;
    }
    if (node != 0)
        pc_free(c, node);
    return done;
}

static int pc_check_kv(const pc_coll *coll, const void *key, size_t klen, const void *val,
                       size_t vlen)
{
    if (coll == NULL || (key == NULL && klen > 0) || (val == NULL && vlen > 0))
        return PC_EINVAL;
    if (klen > PC_KEY_MAX || vlen > PC_VALUE_MAX)
        return PC_ETOOBIG;
    return 0;
}

int64_t pc_deadline(int64_t now, int64_t ttl_ms)
{
    if (ttl_ms <= 0)
        return 0;
    if (ttl_ms > INT64_MAX - now)
        return INT64_MAX;
    return now + ttl_ms;
}

/* Lock-free prediction that a set would only refresh the TTL: the stored
 * record is a live string with the same bytes. Confirmed under the lock. */
static bool pc_predict_identical(pc_coll *coll, uint64_t h, const void *key, size_t klen,
                                 const void *val, size_t vlen)
{
    pc_cache *c = coll->c;
    uint64_t idx = pc_route_index(pc_route_load(coll->shm), coll->shm->log2_initial, h);
    struct pc_bucket_shm *b = pc_bucket_at(coll, idx);
    uint32_t v1 = atomic_load_explicit(&b->version, memory_order_acquire);
    if (v1 & 1)
        return false;
    unsigned n = pc_used(b);
    bool same = false;
    for (unsigned i = 0; i < n && i < PC_SLOTS; i++) {
        if (!pc_tag_eq(atomic_load_explicit(&b->tags[i], memory_order_relaxed), pc_tag_of(h)))
            continue;
        struct pc_rec_shm *r = pc_cell(c, atomic_load_explicit(&b->slot[i], memory_order_relaxed));
        if (r == NULL || !pc_rec_key_eq(c, r, key, klen))
            continue;
        size_t cell = pc_rec_room(c, r); /* the class byte read once (I2) */
        size_t room = cell >= PC_REC_HDR + klen ? cell - PC_REC_HDR - klen : 0;
        same = r->flags == 0 && r->vlen == vlen && vlen <= room &&
               memcmp(r->data + klen, val, vlen) == 0;
        break;
    }
    atomic_thread_fence(memory_order_acquire);
    return same && atomic_load_explicit(&b->version, memory_order_relaxed) == v1;
}

/* The TTL-only refresh under the lock. Returns true when it applied. The
 * flags must be those of a plain string: a counter whose int64 bytes happen
 * to equal the new string is NOT identical. */
static bool pc_refresh_locked(pc_coll *coll, struct pc_loc *loc, size_t klen, const void *val,
                              size_t vlen, int64_t expires, unsigned flags)
{
    struct pc_rec_shm *r = loc->rec;
    if (loc->where == 0 || !loc->live || r->flags != 0 || r->vlen != vlen ||
        memcmp(r->data + klen, val, vlen) != 0)
        return false;
    if (!(flags & PC_SET_KEEPTTL)) {
        /* versionless for readers; a hooked collection still bumps the
         * version so the refresh gets its own stamp */
        bool j = pc_hooked(coll) != 0;
        if (j)
            pc_wbegin(loc->b);
        atomic_store_explicit(&r->expires, expires, memory_order_relaxed);
        if (j)
            pc_wend(loc->b);
        pc_hint_lower(coll, loc, expires);
    }
    return true;
}

void pc_fill_rec(pc_cache *c, pc_off off, const void *key, size_t klen, const void *val,
                 size_t vlen, uint8_t flags, int64_t expires)
{
    struct pc_rec_shm *r = pc_cell(c, off);
    /* r->cls is the cell's class: never written (I2) */
    r->flags = flags;
    r->klen = (uint16_t)klen;
    r->vlen = (uint32_t)vlen;
    atomic_store_explicit(&r->expires, expires, memory_order_relaxed);
    if (klen)
        memcpy(r->data, key, klen);
    if (vlen)
        memcpy(r->data + klen, val, vlen);
}

void pc_nomem(pc_coll *coll, const void *key, size_t klen, size_t bytes)
{
    PC_STAT_ADD(coll, nomem, 1);
    if (pc_event_wanted(coll->c, PC_EV_NOMEM)) {
        pc_event ev = {.type = PC_EV_NOMEM,
                       .collection = coll->shm->name,
                       .key = key,
                       .klen = klen,
                       .size = bytes};
        pc_event_raise_slow(coll->c, &ev);
    }
    pc_log(coll->c, PC_LOG_DEBUG, "pcache: %s: arena full, dropped a write of %zu bytes",
           coll->shm->name, bytes);
}

/* The write changed counter record roff in place from (prev, prev_exp) to
 * (value, now_exp). */
static void pc_undo_counter(pc_coll *coll, uint64_t h, const void *key, size_t klen, pc_off roff,
                            int64_t value, int64_t now_exp, const uint8_t prev[8], int64_t prev_exp)
{
    struct pc_loc loc;
    pc_locate(coll, h, key, klen, pc_mono_ms(), &loc);
    if (loc.where != 0 && loc.rec_off == roff && memcmp(loc.rec->data + klen, &value, 8) == 0 &&
        atomic_load_explicit(&loc.rec->expires, memory_order_relaxed) == now_exp) {
        pc_wbegin(loc.b);
        memcpy(loc.rec->data + klen, prev, 8);
        atomic_store_explicit(&loc.rec->expires, prev_exp, memory_order_relaxed);
        pc_wend(loc.b);
        pc_hint_lower(coll, &loc, prev_exp);
    }
    pc_release(&loc);
}

/* cur + delta, or cur - delta when neg; false on int64 overflow. */
static bool pc_apply(int64_t cur, int64_t delta, bool neg, int64_t *out)
{
    return neg ? !__builtin_sub_overflow(cur, delta, out)
               : !__builtin_add_overflow(cur, delta, out);
}

/* The checks and the entry of a write of one key: the key's arguments, the
 * collection's write block, the fork check (pc_enter). */
static inline int pc_key_write_enter(pc_coll *coll, const void *key, size_t klen)
{
    if (coll == NULL || (key == NULL && klen > 0))
        return PC_EINVAL;
    if (klen > PC_KEY_MAX)
        return PC_ETOOBIG;
    int rc = pc_wblocked(coll);
    if (rc == 0)
        rc = pc_enter(coll->c);
    return rc;
}

/* pc_insert with the overflow node passed through a local: the address of
 * a field of the caller's struct pc_put would make the compiler keep the
 * whole struct in memory on the SET path. */
static inline bool pc_insert_node(pc_coll *coll, struct pc_loc *loc, uint64_t h, pc_off rec,
                                  int64_t expires, pc_off *node)
{
    pc_off n = *node;
    bool done = pc_insert(coll, loc, h, rec, expires, &n);
    *node = n;
    return done;
}

/* What a set or an add built, installed and replaced, carried from the
 * locked step to pc_put_finish. Lives on the writer's stack only. */
struct pc_put {
    pc_off rec;            /* built and not installed: freed at the end */
    pc_off node;           /* an overflow node built and not used: freed at the end */
    pc_off mine;           /* the record installed */
    pc_off old;            /* the record replaced: freed after the hook */
    pc_off inplace;        /* an add's counter record changed in place (0: none) */
    uint8_t prev_bytes[8]; /* and its value and expiry before the add */
    int64_t prev_exp;
    int64_t final_exp; /* the expiry the hook is told */
    uint32_t stamp;    /* the bucket version after the write's bracket */
};

/* The end of a set or an add, no lock held: counts the store, frees what
 * was built and not used, hands the write to the hook and undoes it when
 * the hook refuses. The replaced record is freed last: the undo may put it
 * back. Hot path (SET, INCR): inlined into both callers. */
static inline int pc_put_finish(pc_coll *coll, uint64_t h, const void *key, size_t klen, int rc,
                                int op, const void *val, size_t vlen, int64_t counter,
                                struct pc_put *p)
{
    pc_cache *c = coll->c;
    if (rc == 0)
        PC_STAT_ADD(coll, stores, 1);
    if (p->rec != 0)
        pc_free(c, p->rec);
    if (p->node != 0)
        pc_free(c, p->node);
    unsigned w = rc == 0 ? pc_hooked(coll) : 0;
    if (w != 0) {
        rc = pc_mutated(coll, w, op, key, klen, val, vlen, counter, p->final_exp, p->stamp);
        if (rc != 0 && p->inplace != 0)
            pc_undo_counter(coll, h, key, klen, p->inplace, counter, p->final_exp, p->prev_bytes,
                            p->prev_exp);
        else if (rc != 0 && pc_undo_put(coll, h, key, klen, p->mine, p->old))
            p->old = 0;
    }
    if (p->old != 0) {
        pc_free(c, p->old);
        PC_STAT_ADD(coll, destroyed, 1);
    }
    return rc;
}

/* The TTL-only refresh of a set predicted identical (pc_predict_identical),
 * confirmed under the lock and handed to the hook. Returns false when the
 * lock showed otherwise (the full set runs), else true with the set's *rc. */
static inline bool pc_set_refresh(pc_coll *coll, uint64_t h, const void *key, size_t klen,
                                  const void *val, size_t vlen, int64_t now, int64_t expires,
                                  unsigned flags, int *rc)
{
    struct pc_loc loc;
    pc_locate(coll, h, key, klen, now, &loc);
    pc_off roff = loc.rec_off;
    int64_t prev_exp =
        loc.where != 0 ? atomic_load_explicit(&loc.rec->expires, memory_order_relaxed) : 0;
    bool done = pc_refresh_locked(coll, &loc, klen, val, vlen, expires, flags);
    int64_t final_exp = done ? atomic_load_explicit(&loc.rec->expires, memory_order_relaxed) : 0;
    uint32_t stamp = pc_stamp(&loc);
    pc_release(&loc);
    if (!done)
        return false;
    PC_STAT_ADD(coll, stores, 1);
    *rc = 0;
    unsigned w = pc_hooked(coll);
    if (w == 0)
        return true;
    *rc = pc_mutated(coll, w, PC_MUT_SET, key, klen, val, vlen, 0, final_exp, stamp);
    if (*rc != 0 && final_exp != prev_exp)
        pc_undo_expiry(coll, h, key, klen, roff, final_exp, prev_exp);
    return true;
}

/* Installs the set's record p->rec (built, bytes long) under the key's
 * lock, over the key or as a new key, unless NX or XX refuse. Returns 0,
 * PC_EEXIST, PC_ENOTFOUND, or PC_ENOMEM when no overflow node could be built
 * (p->rec is then freed). */
static inline int pc_set_install(pc_coll *coll, uint64_t h, const void *key, size_t klen,
                                 int64_t now, int64_t expires, unsigned flags, size_t bytes,
                                 struct pc_put *p)
{
    pc_cache *c = coll->c;
    struct pc_rec_shm *nr = pc_cell(c, p->rec);
    struct pc_loc loc;
    int rc = 0;
    for (;;) {
        pc_locate(coll, h, key, klen, now, &loc);
        if ((flags & PC_SET_NX) && loc.live) {
            rc = PC_EEXIST;
        } else if ((flags & PC_SET_XX) && !loc.live) {
            rc = PC_ENOTFOUND;
        } else if (loc.where != 0) {
            if ((flags & PC_SET_KEEPTTL) && loc.live) {
                int64_t e = atomic_load_explicit(&loc.rec->expires, memory_order_relaxed);
                atomic_store_explicit(&nr->expires, e, memory_order_relaxed);
                p->final_exp = e;
            }
            pc_replace(c, &loc, p->rec);
            pc_hint_lower(coll, &loc, atomic_load_explicit(&nr->expires, memory_order_relaxed));
            p->old = loc.rec_off;
            p->mine = p->rec;
            p->rec = 0;
        } else if (pc_insert_node(coll, &loc, h, p->rec, expires, &p->node)) {
            p->mine = p->rec;
            p->rec = 0;
        } else {
            pc_release(&loc);
            p->node = pc_alloc_evict(coll, sizeof(struct pc_ovf_node_shm));
            if (p->node == 0) {
                pc_free(c, p->rec);
                p->rec = 0;
                pc_nomem(coll, key, klen, bytes);
                return PC_ENOMEM;
            }
            continue;
        }
        break;
    }
    p->stamp = pc_stamp(&loc);
    pc_release(&loc);
    return rc;
}

/* The set of pc_set (rflags 0) and pc_set_counter (PC_RF_COUNTER, 8-byte
 * value). Only a plain string can take the TTL-only refresh. Hot path: the
 * helpers above are static inline so this stays one body. */
static int pc_set_rec(pc_coll *coll, const void *key, size_t klen, const void *val, size_t vlen,
                      uint8_t rflags, int64_t ttl_ms, unsigned flags)
{
    int rc = pc_check_kv(coll, key, klen, val, vlen);
    if (rc != 0)
        return rc;
    if ((flags & ~(PC_SET_NX | PC_SET_XX | PC_SET_KEEPTTL)) != 0 ||
        (flags & (PC_SET_NX | PC_SET_XX)) == (PC_SET_NX | PC_SET_XX) || ttl_ms < 0)
        return PC_EINVAL;
    pc_cache *c = coll->c;
    if ((rc = pc_wblocked(coll)) != 0)
        return rc;
    if ((rc = pc_enter(c)) != 0)
        return rc;
    if (PC_UNLIKELY(c->txn != NULL))
        return pc_txn_op_set(c->txn, coll, key, klen, val, vlen, rflags, ttl_ms, flags);
    uint64_t h = pc_key_hash(key, klen);
    int64_t now = pc_mono_ms();
    int64_t expires = pc_deadline(now, ttl_ms);
    if (rflags == 0 && !(flags & PC_SET_NX) &&
        pc_predict_identical(coll, h, key, klen, val, vlen) &&
        pc_set_refresh(coll, h, key, klen, val, vlen, now, expires, flags, &rc))
        return rc;

    /* at least one byte past the header, so a record never shares the
     * 16-byte class of overflow nodes (a record cell always has room) */
    size_t bytes = PC_REC_HDR + klen + vlen;
    if (bytes <= PC_REC_HDR)
        bytes = PC_REC_HDR + 1;
    struct pc_put p = {.rec = pc_alloc_evict(coll, bytes), .final_exp = expires};
    if (p.rec == 0) {
        pc_nomem(coll, key, klen, bytes);
        return PC_ENOMEM;
    }
    pc_fill_rec(c, p.rec, key, klen, val, vlen, rflags, expires);
    rc = pc_set_install(coll, h, key, klen, now, expires, flags, bytes, &p);
    bool counter = (rflags & PC_RF_COUNTER) != 0;
    int64_t cv = 0;
    if (counter)
        memcpy(&cv, val, 8);
    return pc_put_finish(coll, h, key, klen, rc, counter ? PC_MUT_COUNTER : PC_MUT_SET,
                         counter ? NULL : val, counter ? 0 : vlen, cv, &p);
}

int pc_set(pc_coll *coll, const void *key, size_t klen, const void *val, size_t vlen,
           int64_t ttl_ms, unsigned flags)
{
    return pc_set_rec(coll, key, klen, val, vlen, 0, ttl_ms, flags);
}

int pc_set_counter(pc_coll *coll, const void *key, size_t klen, int64_t value, int64_t ttl_ms)
{
    return pc_set_rec(coll, key, klen, &value, sizeof value, PC_RF_COUNTER, ttl_ms, 0);
}

int pc_mutation_hook(pc_cache *c, pc_mutation_fn fn, void *ctx)
{
    if (c == NULL)
        return PC_EINVAL;
    c->mut_fn = fn;
    c->mut_ctx = ctx;
    return 0;
}

int pc_coll_set_hook_word(pc_coll *coll, unsigned word)
{
    if (coll == NULL)
        return PC_EINVAL;
    atomic_store(&coll->shm->hook_word, word);
    return 0;
}

int pc_coll_set_write_block(pc_coll *coll, int rc)
{
    if (coll == NULL || rc > 0)
        return PC_EINVAL;
    atomic_store(&coll->shm->wblock, rc);
    return 0;
}

int pc_coll_write_block(const pc_coll *coll)
{
    return coll == NULL ? 0 : atomic_load(&coll->shm->wblock);
}

unsigned pc_coll_hook_word(const pc_coll *coll)
{
    return coll == NULL ? 0 : atomic_load(&coll->shm->hook_word);
}

int pc_remove(pc_coll *coll, const void *key, size_t klen)
{
    int rc = pc_key_write_enter(coll, key, klen);
    if (rc != 0)
        return rc;
    pc_cache *c = coll->c;
    if (PC_UNLIKELY(c->txn != NULL))
        return pc_txn_op_remove(c->txn, coll, key, klen);
    uint64_t h = pc_key_hash(key, klen);
    struct pc_loc loc;
    pc_locate(coll, h, key, klen, pc_mono_ms(), &loc);
    pc_off old = 0, old_node = 0;
    bool live = loc.live;
    if (loc.where != 0) {
        old = loc.rec_off;
        pc_unlink_found(coll, &loc, &old_node);
    }
    uint32_t stamp = pc_stamp(&loc);
    pc_release(&loc);
    if (old_node != 0)
        pc_free(c, old_node);
    if (live) {
        PC_STAT_ADD(coll, removes, 1);
        rc = 0;
        /* the old record is freed only after the hook: the undo may put it back */
        unsigned w = pc_hooked(coll);
        if (w != 0) {
            rc = pc_mutated(coll, w, PC_MUT_DEL, key, klen, NULL, 0, 0, 0, stamp);
            if (rc != 0 && pc_undo_remove(coll, h, key, klen, old))
                old = 0;
        }
    } else {
        rc = PC_ENOTFOUND;
    }
    if (old != 0) {
        pc_free(c, old);
        PC_STAT_ADD(coll, destroyed, 1);
    }
    return rc;
}

/* An add's new expiry: ttl_ms from now, else the live key's own. */
static inline int64_t pc_add_expiry(const struct pc_loc *loc, int64_t ttl_ms, int64_t now)
{
    return ttl_ms > 0  ? pc_deadline(now, ttl_ms)
           : loc->live ? atomic_load_explicit(&loc->rec->expires, memory_order_relaxed)
                       : 0;
}

/* An add on a counter record changes it in place (lock held, and left
 * held): a live counter continues, an expired one restarts. The value and
 * expiry before go to p for the undo. */
static inline int pc_add_inplace(pc_coll *coll, struct pc_loc *loc, size_t klen, int64_t delta,
                                 bool neg, int64_t ttl_ms, int64_t now, int64_t *value,
                                 struct pc_put *p)
{
    struct pc_rec_shm *r = loc->rec;
    int64_t cur = 0;
    if (loc->live)
        memcpy(&cur, r->data + klen, 8);
    if (!pc_apply(cur, delta, neg, value))
        return PC_ERANGE;
    int64_t e = pc_add_expiry(loc, ttl_ms, now);
    p->inplace = loc->rec_off;
    memcpy(p->prev_bytes, r->data + klen, 8);
    p->prev_exp = atomic_load_explicit(&r->expires, memory_order_relaxed);
    pc_wbegin(loc->b); /* a chain record is bracketed too: the stamp */
    memcpy(r->data + klen, value, 8);
    atomic_store_explicit(&r->expires, e, memory_order_relaxed);
    pc_wend(loc->b);
    pc_hint_lower(coll, loc, e);
    p->final_exp = e;
    return 0;
}

/* The number an add starts from when the key holds no counter record: 0
 * for an absent or expired key, else the stored string read as an integer. */
static inline int pc_add_base(pc_cache *c, const struct pc_loc *loc, size_t klen, int64_t *base)
{
    *base = 0;
    if (loc->where == 0 || !loc->live)
        return 0;
    const struct pc_rec_shm *r = loc->rec;
    size_t room = pc_class_bytes(c, r->cls) - PC_REC_HDR - klen;
    int rc = pc_parse_i64(r->data + klen, r->vlen <= room ? r->vlen : room, base);
    /* a stored string past int64 is not a counter's text */
    return rc == PC_ERANGE ? PC_ENOTNUM : rc;
}

/* Puts the built counter record p->rec, holding value, over the key (a
 * string or an expired record) or in as a new key (lock held). Returns false
 * when the new key needs an overflow node not built yet. */
static inline bool pc_add_install(pc_coll *coll, struct pc_loc *loc, uint64_t h, const void *key,
                                  size_t klen, int64_t value, int64_t ttl_ms, int64_t now,
                                  struct pc_put *p)
{
    int64_t e = pc_add_expiry(loc, ttl_ms, now);
    pc_fill_rec(coll->c, p->rec, key, klen, &value, 8, PC_RF_COUNTER, e);
    p->final_exp = e;
    if (loc->where != 0) {
        pc_replace(coll->c, loc, p->rec);
        p->old = loc->rec_off;
        pc_hint_lower(coll, loc, e);
    } else if (!pc_insert_node(coll, loc, h, p->rec, e, &p->node)) {
        return false;
    }
    p->mine = p->rec;
    p->rec = 0;
    return true;
}

/* pc_add and pc_sub. Hot path (INCR): the helpers above are static inline
 * so this stays one body. */
static int pc_addsub(pc_coll *coll, const void *key, size_t klen, int64_t delta, bool neg,
                     int64_t ttl_ms, int64_t *result)
{
    if (ttl_ms < 0)
        return PC_EINVAL;
    int rc = pc_key_write_enter(coll, key, klen);
    if (rc != 0)
        return rc;
    pc_cache *c = coll->c;
    if (PC_UNLIKELY(c->txn != NULL))
        return pc_txn_op_add(c->txn, coll, key, klen, delta, neg, ttl_ms, result);
    uint64_t h = pc_key_hash(key, klen);
    int64_t now = pc_mono_ms();
    const size_t bytes = PC_REC_HDR + klen + 8;
    int64_t value = 0;
    struct pc_put p = {0};
    struct pc_loc loc;
    for (;;) {
        pc_locate(coll, h, key, klen, now, &loc);
        if (loc.where != 0 && (loc.rec->flags & PC_RF_COUNTER) && loc.rec->vlen == 8) {
            rc = pc_add_inplace(coll, &loc, klen, delta, neg, ttl_ms, now, &value, &p);
            p.stamp = pc_stamp(&loc);
            pc_release(&loc);
            break;
        }
        int64_t base;
        rc = pc_add_base(c, &loc, klen, &base);
        if (rc == 0 && !pc_apply(base, delta, neg, &value))
            rc = PC_ERANGE;
        if (rc == 0 && p.rec != 0 &&
            pc_add_install(coll, &loc, h, key, klen, value, ttl_ms, now, &p)) {
            p.stamp = pc_stamp(&loc);
            pc_release(&loc);
            break;
        }
        pc_release(&loc);
        if (rc != 0)
            break;
        /* built with no lock held (I5): the record first, then a node */
        pc_off got = pc_alloc_evict(coll, p.rec == 0 ? bytes : sizeof(struct pc_ovf_node_shm));
        if (got == 0) {
            pc_nomem(coll, key, klen, bytes);
            rc = PC_ENOMEM;
            break;
        }
        if (p.rec == 0)
            p.rec = got;
        else
            p.node = got;
    }
    if (rc == 0 && result != NULL)
        *result = value;
    return pc_put_finish(coll, h, key, klen, rc, PC_MUT_COUNTER, NULL, 0, value, &p);
}

int pc_add(pc_coll *coll, const void *key, size_t klen, int64_t delta, int64_t ttl_ms,
           int64_t *result)
{
    return pc_addsub(coll, key, klen, delta, false, ttl_ms, result);
}

int pc_sub(pc_coll *coll, const void *key, size_t klen, int64_t delta, int64_t ttl_ms,
           int64_t *result)
{
    return pc_addsub(coll, key, klen, delta, true, ttl_ms, result);
}

int pc_expire(pc_coll *coll, const void *key, size_t klen, int64_t ttl_ms)
{
    if (ttl_ms < 0)
        return PC_EINVAL;
    int rc = pc_key_write_enter(coll, key, klen);
    if (rc != 0)
        return rc;
    if (PC_UNLIKELY(coll->c->txn != NULL))
        return pc_txn_op_expire(coll->c->txn, coll, key, klen, ttl_ms);
    uint64_t h = pc_key_hash(key, klen);
    int64_t now = pc_mono_ms();
    struct pc_loc loc;
    pc_locate(coll, h, key, klen, now, &loc);
    rc = PC_ENOTFOUND;
    int64_t e = 0, prev_exp = 0;
    pc_off roff = loc.rec_off;
    if (loc.where != 0 && loc.live) {
        e = pc_deadline(now, ttl_ms);
        prev_exp = atomic_load_explicit(&loc.rec->expires, memory_order_relaxed);
        bool j = pc_hooked(coll) != 0; /* versionless unless hooked (stamp) */
        if (j)
            pc_wbegin(loc.b);
        atomic_store_explicit(&loc.rec->expires, e, memory_order_relaxed);
        if (j)
            pc_wend(loc.b);
        pc_hint_lower(coll, &loc, e);
        rc = 0;
    }
    uint32_t stamp = pc_stamp(&loc);
    pc_release(&loc);
    unsigned w = rc == 0 ? pc_hooked(coll) : 0;
    if (w != 0) {
        rc = pc_mutated(coll, w, PC_MUT_EXPIRE, key, klen, NULL, 0, 0, e, stamp);
        if (rc != 0 && e != prev_exp)
            pc_undo_expiry(coll, h, key, klen, roff, e, prev_exp);
    }
    return rc;
}
