/*
 * txn.c - optimistic transactions over keys of one or more collections
 * (pcache.h, "transactions"; docs/design.md, "Transactions").
 *
 * A transaction is process-local: an array of entries, one per key it
 * touched. An entry holds the observation of its key (the bucket the key
 * routed to, that bucket's even seqlock version, the record offset and
 * expiry found, a copy of the value) and at most one staged write (the key's
 * final state: a record to put, or a delete). Observations are made
 * lock-free, like any read; the staged writes live in process memory.
 *
 * The commit (pc_txn_commit) in four steps:
 *   1. no lock held: build every new record and the overflow node an insert
 *      may need (I5), and check the write blocks;
 *   2. lock every bucket an entry observed, ascending (collection index,
 *      bucket index) - the order a split takes its two locks, so no cycle
 *      can form with a split or another commit (I7: chain locks are only
 *      taken one at a time, below the bucket locks);
 *   3. verify: each key still routes to the bucket it was observed in, each
 *      bucket's version is the one observed (nothing in it changed since),
 *      each key's record and expiry are the ones observed (the TTL-only
 *      refresh changes an expiry without a version bump) and its liveness
 *      is unchanged (no lapse). Any difference: unlock, PC_ECONFLICT;
 *   4. open the version brackets of all the locked buckets, install the
 *      staged writes, close every bracket, unlock, then hand each write to
 *      the mutation hook (the journal) and free what was replaced.
 * Because every bracket opens before any closes, a lock-free reader that
 * sees one of the transaction's writes sees all of them.
 */
#include "pc_int.h"

#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TX_READ_RETRIES 16 /* optimistic observations before the lock fallback */

enum { TX_NONE = 0, TX_PUT = 1, TX_DEL = 2 };

struct pc_txn_ent {
    pc_coll *coll;
    uint64_t h;
    unsigned char *key; /* heap copy, klen bytes (one more allocated) */
    size_t klen;
    bool watch;  /* made by pc_txn_watch: kept by pc_txn_reset */
    bool loaded; /* oval holds the value (a watch copies none until read) */
    /* the observation */
    uint64_t idx;  /* bucket the key routed to */
    uint32_t ver;  /* that bucket's even version */
    pc_off rec;    /* record found, 0 = absent */
    int64_t rexp;  /* its expiry */
    uint64_t rfp;  /* its value's fingerprint (tx_fingerprint) */
    bool rlive;    /* live when observed */
    bool stale;    /* a later load saw the key changed: the commit conflicts */
    uint64_t lidx; /* the bucket the commit locks (the key's route then) */
    uint8_t oflags;
    unsigned char *oval; /* the value (counters: 8 raw bytes) */
    size_t olen, ocap;
    /* the staged write */
    int op;
    uint8_t sflags;
    unsigned char *sval;
    size_t slen, scap;
    int64_t sexp;
    /* commit scratch */
    pc_off new_rec, node, old, old_node;
    uint32_t stamp;
    bool applied;
};

struct pc_txn {
    pc_cache *c;
    struct pc_txn_ent *e;
    unsigned n, cap;
    unsigned writes;
    /* the entries by key hash: open addressing, entry index + 1 (0 =
     * free), at most half full; NULL (after a failed allocation) means a
     * linear search, so a key is found in O(1) whatever a transaction holds */
    uint32_t *slots;
    unsigned mask;
};

/* Rebuilds the index of t's n entries; on no memory, drops it. */
static void tx_index_rebuild(pc_txn *t)
{
    free(t->slots);
    t->slots = NULL;
    t->mask = 0;
    if (t->n == 0)
        return;
    size_t size = 16;
    while (size < 2 * (size_t)t->n)
        size *= 2;
    if ((t->slots = calloc(size, sizeof *t->slots)) == NULL)
        return;
    t->mask = (unsigned)(size - 1);
    for (unsigned i = 0; i < t->n; i++) {
        unsigned j = (unsigned)t->e[i].h & t->mask;
        while (t->slots[j] != 0)
            j = (j + 1) & t->mask;
        t->slots[j] = i + 1;
    }
}

static bool tx_same(const struct pc_txn_ent *e, pc_coll *coll, uint64_t h, const void *key,
                    size_t klen)
{
    return e->h == h && e->coll == coll && e->klen == klen &&
           (klen == 0 || memcmp(e->key, key, klen) == 0);
}

/* The entry of key, or NULL. */
static struct pc_txn_ent *tx_find(pc_txn *t, pc_coll *coll, uint64_t h, const void *key,
                                  size_t klen)
{
    if (t->slots == NULL) {
        for (unsigned i = 0; i < t->n; i++)
            if (tx_same(&t->e[i], coll, h, key, klen))
                return &t->e[i];
        return NULL;
    }
    for (unsigned j = (unsigned)h & t->mask; t->slots[j] != 0; j = (j + 1) & t->mask)
        if (tx_same(&t->e[t->slots[j] - 1], coll, h, key, klen))
            return &t->e[t->slots[j] - 1];
    return NULL;
}

/* Indexes the entry just appended (t->n - 1). */
static void tx_index_add(pc_txn *t)
{
    if (t->slots == NULL || 2 * (size_t)t->n > (size_t)t->mask + 1) {
        tx_index_rebuild(t);
        return;
    }
    unsigned j = (unsigned)t->e[t->n - 1].h & t->mask;
    while (t->slots[j] != 0)
        j = (j + 1) & t->mask;
    t->slots[j] = t->n;
}

/* ---- observing a key ------------------------------------------------------ */

/* What one lookup saw. */
struct tx_obs {
    uint64_t idx;
    uint32_t ver;
    pc_off rec;
    int64_t exp;
    uint8_t flags;
    size_t vlen; /* clamped to the cell */
    uint64_t fp; /* tx_fingerprint of the record, 0 when absent */
};

/* What a watch compares when the key's bucket has changed since it was
 * observed: the value, its length and its flags, hashed, so that a watch
 * needs no copy of the value. A 64-bit hash can only make two different
 * values look alike by chance, and only for a record at the same offset
 * with the same expiry (tx_same_key). */
static uint64_t tx_fingerprint(const unsigned char *v, size_t vl, uint8_t flags)
{
    return pc_key_hash(v, vl) ^ ((uint64_t)flags << 56) ^ ((uint64_t)vl * 0x9e3779b97f4a7c15u);
}

/* Copies what record r (or its absence) holds into o and, when val is not
 * NULL and the value fits cap, into val. Every length is clamped to the
 * cell (a torn record copies garbage, never past the cell; the caller's
 * version check then discards it). Returns false when val is too small. */
static bool tx_take(const pc_cache *c, const struct pc_rec_shm *r, pc_off off, size_t klen,
                    struct tx_obs *o, bool want, unsigned char *val, size_t cap)
{
    o->rec = 0;
    o->exp = 0;
    o->flags = 0;
    o->vlen = 0;
    o->fp = 0;
    if (r == NULL)
        return true;
    size_t room = pc_class_bytes(c, r->cls);
    if (room <= PC_REC_HDR || r->klen != klen || klen > room - PC_REC_HDR)
        return true; /* not a record of this key: a torn read, re-checked */
    room -= PC_REC_HDR + klen;
    size_t vl = r->vlen <= room ? r->vlen : room;
    o->rec = off;
    o->exp = atomic_load_explicit(&((struct pc_rec_shm *)r)->expires, memory_order_relaxed);
    o->flags = r->flags;
    o->vlen = vl;
    o->fp = tx_fingerprint(r->data + klen, vl, o->flags);
    if (!want)
        return true;
    if (vl > cap)
        return false;
    if (vl > 0)
        memcpy(val, r->data + klen, vl);
    return true;
}

/* Looks key up as the read path does (lock-free, then under the bucket lock
 * after TX_READ_RETRIES unstable attempts) and reports what it saw in *o,
 * with the value copied into *val (grown with realloc, never under a lock)
 * when val is not NULL. 0 or PC_EHEAP. */
static int tx_lookup(pc_coll *coll, uint64_t h, const void *key, size_t klen, struct tx_obs *o,
                     unsigned char **val, size_t *cap)
{
    pc_cache *c = coll->c;
    const struct pc_coll_shm *cs = coll->shm;
    uint8_t tag = pc_tag_of(h);
    unsigned attempt = 0;
    for (;;) {
        bool locked = attempt >= TX_READ_RETRIES;
        uint64_t route = pc_route_load(cs);
        uint64_t idx;
        struct pc_bucket_shm *b;
        if (locked) {
            b = pc_lock_route(coll, h, &idx);
        } else {
            idx = pc_route_index(route, cs->log2_initial, h);
            b = pc_bucket_at(coll, idx);
        }
        uint32_t v1 = atomic_load_explicit(&b->version, memory_order_acquire);
        if (!locked && (v1 & 1)) {
            attempt++;
            pc_cpu_relax();
            continue;
        }
        uint8_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
        unsigned n = used & PC_USED_MASK;
        if (n > PC_SLOTS)
            n = PC_SLOTS;
        const struct pc_rec_shm *r = NULL;
        pc_off off = 0;
        for (unsigned i = 0; i < n && r == NULL; i++) {
            if (!pc_tag_eq(atomic_load_explicit(&b->tags[i], memory_order_relaxed), tag))
                continue;
            off = atomic_load_explicit(&b->slot[i], memory_order_relaxed);
            const struct pc_rec_shm *rr = pc_cell(c, off);
            if (rr != NULL && pc_rec_key_eq(c, rr, key, klen))
                r = rr;
        }
        struct pc_chain_shm *ch = NULL;
        if (r == NULL && (used & PC_USED_OVF)) {
            ch = pc_chain_for(coll, h);
            pc_chain_lock(coll, ch);
            pc_off prev;
            pc_off node = pc_chain_find(coll, ch, key, klen, &prev);
            const struct pc_ovf_node_shm *nd = node != 0 ? pc_cell(c, node) : NULL;
            if (nd != NULL) {
                off = nd->rec;
                r = pc_cell(c, off);
            }
        }
        if (r == NULL)
            off = 0;
        bool fits = tx_take(c, r, off, klen, o, val != NULL, val != NULL ? *val : NULL,
                            cap != NULL ? *cap : 0);
        if (ch != NULL)
            pc_chain_unlock(ch);
        bool stable = true;
        if (!locked) {
            atomic_thread_fence(memory_order_acquire);
            stable = atomic_load_explicit(&b->version, memory_order_relaxed) == v1 &&
                     pc_route_load(cs) == route;
        } else {
            pc_bucket_unlock(b);
        }
        if (!fits) { /* no lock held here */
            unsigned char *p = realloc(*val, o->vlen + 1);
            if (p == NULL)
                return PC_EHEAP;
            *val = p;
            *cap = o->vlen;
            continue; /* the attempt did not count: it only lacked room */
        }
        if (!stable) {
            attempt++;
            pc_cpu_relax();
            continue;
        }
        o->idx = idx;
        o->ver = v1;
        if (attempt > 0)
            PC_STAT_ADD(coll, retries, attempt < TX_READ_RETRIES ? attempt : TX_READ_RETRIES);
        if (locked)
            PC_STAT_ADD(coll, fallbacks, 1);
        return 0;
    }
}

static bool tx_live(int64_t exp, int64_t now)
{
    return exp == 0 || exp > now;
}

/* Whether e's key is in the state it was observed in, judged by the key
 * alone, as Redis's WATCH judges it: a key live then is live now in the
 * same record (a write of the key always installs a new one, bar in-place
 * counters and expiries, which the fingerprint and the expiry catch) with
 * the same expiry and value; a key absent or expired then is absent or
 * expired now. Writes to other keys of its bucket, a split that moved it
 * and the sweep's reclaim of an expired record change nothing here. A
 * record reused at the same offset with an equal value passes: the key
 * then holds what the transaction read, so committing now is the same as
 * committing after that write. */
static bool tx_same_key(const struct pc_txn_ent *e, const struct tx_obs *o, int64_t now)
{
    bool live = o->rec != 0 && tx_live(o->exp, now);
    if (!e->rlive)
        return !live;
    return live && o->rec == e->rec && o->exp == e->rexp && o->fp == e->rfp;
}

/* Whether e's key still looks as observed, by a lookup made now: the same
 * bucket at the same version, or else the key itself the same. */
static bool tx_unchanged(const struct pc_txn_ent *e, const struct tx_obs *o, int64_t now)
{
    if (e->stale)
        return false;
    if (o->idx == e->idx && o->ver == e->ver && o->rec == e->rec &&
        (e->rec == 0 || (o->exp == e->rexp && tx_live(o->exp, now) == e->rlive)))
        return true;
    return tx_same_key(e, o, now);
}

/* Copies the value of e's key into e (a watch's entry, observed without
 * it). What the lookup sees may be newer than the observation: the entry
 * is then marked stale and its commit conflicts, so the view may use it. */
static int tx_load(struct pc_txn_ent *e)
{
    struct tx_obs o;
    int rc = tx_lookup(e->coll, e->h, e->key, e->klen, &o, &e->oval, &e->ocap);
    if (rc != 0)
        return rc;
    if (!tx_unchanged(e, &o, pc_mono_ms()))
        e->stale = true; /* the value loaded is not the one watched */
    e->oflags = o.flags;
    e->olen = o.vlen;
    e->loaded = true;
    return 0;
}

/* The entry of key in t, observed now if t has none (PC_EHEAP); with
 * want_value, its value loaded. */
static int tx_entry_v(pc_txn *t, pc_coll *coll, const void *key, size_t klen, bool want_value,
                      struct pc_txn_ent **out)
{
    if (coll->c != t->c)
        return PC_EINVAL;
    uint64_t h = pc_key_hash(key, klen);
    struct pc_txn_ent *found = tx_find(t, coll, h, key, klen);
    if (found != NULL) {
        int rc = want_value && !found->loaded ? tx_load(found) : 0;
        if (rc == 0)
            *out = found;
        return rc;
    }
    if (t->n == t->cap) {
        unsigned ncap = t->cap ? t->cap * 2 : 8;
        struct pc_txn_ent *ne = realloc(t->e, ncap * sizeof *ne);
        if (ne == NULL)
            return PC_EHEAP;
        t->e = ne;
        t->cap = ncap;
    }
    struct pc_txn_ent *e = &t->e[t->n];
    memset(e, 0, sizeof *e);
    e->coll = coll;
    e->h = h;
    e->klen = klen;
    if ((e->key = malloc(klen + 1)) == NULL)
        return PC_EHEAP;
    if (klen > 0)
        memcpy(e->key, key, klen);
    struct tx_obs o;
    int rc = tx_lookup(coll, h, key, klen, &o, want_value ? &e->oval : NULL,
                       want_value ? &e->ocap : NULL);
    if (rc != 0) {
        free(e->key);
        free(e->oval);
        return rc;
    }
    int64_t now = pc_mono_ms();
    e->idx = o.idx;
    e->ver = o.ver;
    e->rec = o.rec;
    e->rexp = o.exp;
    e->rfp = o.fp;
    e->rlive = o.rec != 0 && tx_live(o.exp, now);
    e->oflags = o.flags;
    e->olen = want_value ? o.vlen : 0;
    e->loaded = want_value;
    PC_STAT_ADD(coll, reads, 1);
    if (e->rlive)
        PC_STAT_ADD(coll, hits, 1);
    else
        PC_STAT_ADD(coll, misses, 1);
    t->n++;
    tx_index_add(t);
    *out = e;
    return 0;
}

static int tx_entry(pc_txn *t, pc_coll *coll, const void *key, size_t klen, struct pc_txn_ent **out)
{
    return tx_entry_v(t, coll, key, klen, true, out);
}

/* The transaction's view of an entry: whether the key is live, and its
 * flags, value and expiry. */
static bool tx_view(const struct pc_txn_ent *e, int64_t now, uint8_t *flags,
                    const unsigned char **val, size_t *vlen, int64_t *exp)
{
    if (e->op == TX_DEL)
        return false;
    if (e->op == TX_PUT) {
        *flags = e->sflags;
        *val = e->sval;
        *vlen = e->slen;
        *exp = e->sexp;
        return tx_live(e->sexp, now);
    }
    *flags = e->oflags;
    *val = e->oval;
    *vlen = e->olen;
    *exp = e->rexp;
    return e->rec != 0 && tx_live(e->rexp, now);
}

static int64_t tx_counter_of(const unsigned char *val, size_t vlen)
{
    int64_t v = 0;
    memcpy(&v, val, vlen < 8 ? vlen : 8);
    return v;
}

/* The transaction's view of one key, as tx_look reads it. */
struct tx_seen {
    int64_t now; /* the clock read after the entry was found or observed */
    bool live;
    uint8_t flags;
    const unsigned char *val; /* valid until the entry is staged again */
    size_t len;
    int64_t exp;
};

/* The entry of key in t (tx_entry, its value loaded) and the transaction's
 * view of it (tx_view); what tx_view leaves unset (a deleted key) is 0.
 * With need_live, a key not live is PC_ENOTFOUND. */
static int tx_look(pc_txn *t, pc_coll *coll, const void *key, size_t klen, bool need_live,
                   struct pc_txn_ent **out, struct tx_seen *v)
{
    int rc = tx_entry(t, coll, key, klen, out);
    if (rc != 0)
        return rc;
    *v = (struct tx_seen){.now = pc_mono_ms()};
    v->live = tx_view(*out, v->now, &v->flags, &v->val, &v->len, &v->exp);
    return need_live && !v->live ? PC_ENOTFOUND : 0;
}

/* Stages a put of (flags, val, vlen, exp) for e. val may be e->sval. */
static int tx_stage(pc_txn *t, struct pc_txn_ent *e, uint8_t flags, const void *val, size_t vlen,
                    int64_t exp)
{
    if (val != e->sval) {
        if (vlen + 1 > e->scap) {
            unsigned char *p = realloc(e->sval, vlen + 1);
            if (p == NULL)
                return PC_EHEAP;
            e->sval = p;
            e->scap = vlen + 1;
        }
        if (vlen > 0)
            memcpy(e->sval, val, vlen);
    }
    if (e->op == TX_NONE)
        t->writes++;
    e->op = TX_PUT;
    e->sflags = flags;
    e->slen = vlen;
    e->sexp = exp;
    return 0;
}

static void tx_fill_meta(pc_meta *meta, uint8_t flags, size_t vlen, int64_t exp, int64_t now)
{
    if (meta == NULL)
        return;
    meta->ttl_ms = exp == 0 ? -1 : (exp > now ? exp - now : 0);
    meta->is_counter = (flags & PC_RF_COUNTER) != 0;
    meta->vlen = vlen;
}

/* ---- the data operations of a bound transaction ----------------------------- */

int pc_txn_op_get(pc_txn *t, pc_coll *coll, const void *key, size_t klen, void *buf, size_t cap,
                  const pc_allocator *a, void **aval, size_t *vlen, size_t *needed, pc_meta *meta)
{
    struct pc_txn_ent *e;
    struct tx_seen v;
    int rc = tx_look(t, coll, key, klen, true, &e, &v);
    if (rc != 0)
        return rc;
    const unsigned char *val = v.val;
    size_t len = v.len;
    char num[24];
    if (v.flags & PC_RF_COUNTER) {
        if (meta != NULL)
            meta->counter = tx_counter_of(val, len);
        int n = snprintf(num, sizeof num, "%" PRId64, tx_counter_of(val, len));
        val = (const unsigned char *)num;
        len = (size_t)n;
    }
    if (a != NULL) {
        char *p = a->obtain(len + 1, a->ctx);
        if (p == NULL)
            return PC_EHEAP;
        if (len > 0)
            memcpy(p, val, len);
        p[len] = '\0';
        *aval = p;
    } else {
        if (len > cap) {
            *needed = len;
            return PC_ETOOSMALL;
        }
        if (len > 0)
            memcpy(buf, val, len);
    }
    *vlen = len;
    tx_fill_meta(meta, v.flags, len, v.exp, v.now);
    return 0;
}

int pc_txn_op_probe(pc_txn *t, pc_coll *coll, const void *key, size_t klen, pc_meta *meta)
{
    struct pc_txn_ent *e;
    struct tx_seen v;
    int rc = tx_look(t, coll, key, klen, true, &e, &v);
    if (rc != 0)
        return rc;
    tx_fill_meta(meta, v.flags, v.len, v.exp, v.now);
    return 0;
}

int pc_txn_op_counter(pc_txn *t, pc_coll *coll, const void *key, size_t klen, int64_t *out)
{
    struct pc_txn_ent *e;
    struct tx_seen v;
    int rc = tx_look(t, coll, key, klen, true, &e, &v);
    if (rc != 0)
        return rc;
    if (v.flags & PC_RF_COUNTER) {
        *out = tx_counter_of(v.val, v.len);
        return 0;
    }
    if (v.len > 24)
        return PC_ENOTNUM;
    return pc_parse_i64(v.val, v.len, out);
}

int pc_txn_op_set(pc_txn *t, pc_coll *coll, const void *key, size_t klen, const void *val,
                  size_t vlen, uint8_t rflags, int64_t ttl_ms, unsigned flags)
{
    struct pc_txn_ent *e;
    struct tx_seen v;
    int rc = tx_look(t, coll, key, klen, false, &e, &v);
    if (rc != 0)
        return rc;
    if ((flags & PC_SET_NX) && v.live)
        return PC_EEXIST;
    if ((flags & PC_SET_XX) && !v.live)
        return PC_ENOTFOUND;
    int64_t exp = (flags & PC_SET_KEEPTTL) && v.live ? v.exp : pc_deadline(v.now, ttl_ms);
    return tx_stage(t, e, rflags, val, vlen, exp);
}

int pc_txn_op_remove(pc_txn *t, pc_coll *coll, const void *key, size_t klen)
{
    struct pc_txn_ent *e;
    struct tx_seen v;
    int rc = tx_look(t, coll, key, klen, true, &e, &v);
    if (rc != 0)
        return rc;
    if (e->op == TX_NONE)
        t->writes++;
    e->op = TX_DEL;
    return 0;
}

int pc_txn_op_add(pc_txn *t, pc_coll *coll, const void *key, size_t klen, int64_t delta, bool neg,
                  int64_t ttl_ms, int64_t *result)
{
    struct pc_txn_ent *e;
    struct tx_seen v;
    int rc = tx_look(t, coll, key, klen, false, &e, &v);
    if (rc != 0)
        return rc;
    int64_t base = 0, value;
    if (v.live && (v.flags & PC_RF_COUNTER)) {
        base = tx_counter_of(v.val, v.len);
    } else if (v.live) {
        rc = pc_parse_i64(v.val, v.len, &base);
        if (rc != 0)
            return PC_ENOTNUM; /* a stored string past int64 is not a counter's text */
    }
    if (neg ? __builtin_sub_overflow(base, delta, &value)
            : __builtin_add_overflow(base, delta, &value))
        return PC_ERANGE;
    int64_t exp = ttl_ms > 0 ? pc_deadline(v.now, ttl_ms) : v.live ? v.exp : 0;
    rc = tx_stage(t, e, PC_RF_COUNTER, &value, sizeof value, exp);
    if (rc == 0 && result != NULL)
        *result = value;
    return rc;
}

int pc_txn_op_expire(pc_txn *t, pc_coll *coll, const void *key, size_t klen, int64_t ttl_ms)
{
    struct pc_txn_ent *e;
    struct tx_seen v;
    int rc = tx_look(t, coll, key, klen, true, &e, &v);
    if (rc != 0)
        return rc;
    return tx_stage(t, e, v.flags, v.val, v.len, pc_deadline(v.now, ttl_ms));
}

/* ---- the transaction's life ----------------------------------------------------- */

int pc_txn_begin(pc_cache *c, pc_txn **out)
{
    if (c == NULL || out == NULL)
        return PC_EINVAL;
    pc_txn *t = calloc(1, sizeof *t);
    if (t == NULL)
        return PC_EHEAP;
    t->c = c;
    *out = t;
    return 0;
}

static void tx_ent_free(struct pc_txn_ent *e)
{
    free(e->key);
    free(e->oval);
    free(e->sval);
}

/* Keeps the entries keep() says, in order, dropping the staged writes of
 * all. */
static void tx_drop(pc_txn *t, bool keep_watches)
{
    unsigned k = 0;
    for (unsigned i = 0; i < t->n; i++) {
        struct pc_txn_ent *e = &t->e[i];
        if (keep_watches && e->watch) {
            e->op = TX_NONE;
            t->e[k++] = *e;
        } else {
            tx_ent_free(e);
        }
    }
    t->n = k;
    t->writes = 0;
    tx_index_rebuild(t);
}

void pc_txn_reset(pc_txn *t)
{
    if (t != NULL)
        tx_drop(t, true);
}

void pc_txn_clear(pc_txn *t)
{
    if (t != NULL)
        tx_drop(t, false);
}

void pc_txn_free(pc_txn *t)
{
    if (t == NULL)
        return;
    if (t->c->txn == t)
        t->c->txn = NULL;
    tx_drop(t, false);
    free(t->slots);
    free(t->e);
    free(t);
}

int pc_txn_bind(pc_cache *c, pc_txn *t)
{
    if (c == NULL || (t != NULL && t->c != c))
        return PC_EINVAL;
    c->txn = t;
    return 0;
}

unsigned pc_txn_writes(const pc_txn *t)
{
    return t == NULL ? 0 : t->writes;
}

int pc_txn_watch(pc_txn *t, pc_coll *coll, const void *key, size_t klen)
{
    if (t == NULL || coll == NULL || (key == NULL && klen > 0))
        return PC_EINVAL;
    if (klen > PC_KEY_MAX)
        return PC_ETOOBIG;
    int rc = pc_enter(t->c);
    struct pc_txn_ent *e;
    if (rc == 0 && (rc = tx_entry_v(t, coll, key, klen, false, &e)) == 0)
        e->watch = true;
    return rc;
}

int pc_txn_validate(pc_txn *t)
{
    if (t == NULL)
        return PC_EINVAL;
    int rc = pc_enter(t->c);
    if (rc != 0)
        return rc;
    for (unsigned i = 0; i < t->n; i++) {
        struct pc_txn_ent *e = &t->e[i];
        struct tx_obs o;
        if ((rc = tx_lookup(e->coll, e->h, e->key, e->klen, &o, NULL, NULL)) != 0)
            return rc;
        if (!tx_unchanged(e, &o, pc_mono_ms()))
            return PC_ECONFLICT;
    }
    return 0;
}

/* ---- the commit --------------------------------------------------------------- */

struct tx_lock {
    pc_coll *coll;
    uint64_t idx;
    struct pc_bucket_shm *b;
};

static int tx_lock_cmp(const void *pa, const void *pb)
{
    const struct tx_lock *a = pa, *b = pb;
    if (a->coll->idx != b->coll->idx)
        return a->coll->idx < b->coll->idx ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* The locked bucket of entry e (locks sorted and unique). */
static struct pc_bucket_shm *tx_bucket(const struct tx_lock *locks, unsigned nl,
                                       const struct pc_txn_ent *e)
{
    struct tx_lock key = {e->coll, e->lidx, NULL};
    const struct tx_lock *l = bsearch(&key, locks, nl, sizeof *locks, tx_lock_cmp);
    return l != NULL ? l->b : NULL;
}

/* Step 3 under every lock: whether every key is as observed. A split
 * between the commit's routing (step 2) and its lock conflicts: the key
 * then lives in a bucket the commit does not hold. */
static bool tx_verify_locked(pc_txn *t, const struct tx_lock *locks, unsigned nl, int64_t now)
{
    for (unsigned i = 0; i < t->n; i++) {
        struct pc_txn_ent *e = &t->e[i];
        struct pc_bucket_shm *b = tx_bucket(locks, nl, e);
        const struct pc_coll_shm *cs = e->coll->shm;
        if (pc_route_index(pc_route_load(cs), cs->log2_initial, e->h) != e->lidx)
            return false;
        struct pc_loc loc;
        pc_locate_held(e->coll, b, e->lidx, e->h, e->key, e->klen, now, &loc);
        struct tx_obs o = {.idx = e->lidx,
                           .ver = atomic_load_explicit(&b->version, memory_order_relaxed),
                           .rec = loc.where != 0 ? loc.rec_off : 0};
        if (loc.rec != NULL) {
            o.exp = atomic_load_explicit(&loc.rec->expires, memory_order_relaxed);
            /* only a changed bucket compares values (tx_unchanged) */
            if (o.idx != e->idx || o.ver != e->ver)
                tx_take(t->c, loc.rec, loc.rec_off, e->klen, &o, false, NULL, 0);
        }
        if (loc.ch != NULL)
            pc_chain_unlock(loc.ch);
        if (!tx_unchanged(e, &o, now))
            return false;
    }
    return true;
}

/* Step 4 under every lock, inside every bracket: installs e's write. */
static void tx_apply_locked(struct pc_txn_ent *e, struct pc_bucket_shm *b, int64_t now)
{
    pc_coll *coll = e->coll;
    struct pc_loc loc;
    pc_locate_held(coll, b, e->lidx, e->h, e->key, e->klen, now, &loc);
    if (e->op == TX_PUT) {
        if (loc.where != 0) {
            pc_replace_br(coll->c, &loc, e->new_rec, false);
            pc_hint_lower(coll, &loc, e->sexp);
            e->old = loc.rec_off;
            e->applied = true;
        } else if (pc_insert_br(coll, &loc, e->h, e->new_rec, e->sexp, &e->node, false)) {
            e->applied = true;
        }
        if (e->applied)
            e->new_rec = 0; /* in the table now; e->old is what it replaced */
    } else if (e->op == TX_DEL && loc.where != 0) {
        e->old = loc.rec_off;
        pc_unlink_br(coll, &loc, &e->old_node, false);
        e->applied = true;
    }
    if (loc.ch != NULL)
        pc_chain_unlock(loc.ch);
}

/* Hands the applied writes to the mutation hook in order; from the first
 * refusal on, undoes each write (as pc_set does one). Each call names the
 * writes of its collection still to come (pc_mutation.group), when there
 * are several, so the journal keeps them whole. */
static int tx_hooks(pc_txn *t, pc_off *mine)
{
    int rc = 0;
    uint64_t txn = ++t->c->txn_seq;
    uint32_t left[PC_MAX_COLLECTIONS] = {0}, total[PC_MAX_COLLECTIONS];
    for (unsigned i = 0; i < t->n; i++)
        left[t->e[i].coll->idx] += t->e[i].applied;
    memcpy(total, left, sizeof total);
    for (unsigned i = 0; i < t->n; i++) {
        struct pc_txn_ent *e = &t->e[i];
        if (!e->applied)
            continue;
        unsigned w = rc == 0 ? pc_hooked(e->coll) : 0;
        left[e->coll->idx]--;
        if (w != 0) {
            /* this write and those after it; 0 for a collection's only one */
            uint32_t g = total[e->coll->idx] > 1 ? left[e->coll->idx] + 1 : 0;
            if (e->op == TX_DEL)
                rc = pc_mutated_grp(e->coll, w, PC_MUT_DEL, e->key, e->klen, NULL, 0, 0, 0,
                                    e->stamp, g, txn);
            else if (e->sflags & PC_RF_COUNTER)
                rc = pc_mutated_grp(e->coll, w, PC_MUT_COUNTER, e->key, e->klen, NULL, 0,
                                    tx_counter_of(e->sval, e->slen), e->sexp, e->stamp, g, txn);
            else
                rc = pc_mutated_grp(e->coll, w, PC_MUT_SET, e->key, e->klen, e->sval, e->slen, 0,
                                    e->sexp, e->stamp, g, txn);
        }
        if (rc == 0)
            continue;
        bool undone = e->op == TX_DEL
                          ? pc_undo_remove(e->coll, e->h, e->key, e->klen, e->old)
                          : pc_undo_put(e->coll, e->h, e->key, e->klen, mine[i], e->old);
        if (undone)
            e->old = 0; /* back in the table (pc_undo_put freed our record) */
    }
    return rc;
}

/* Step 1, no lock held: the write blocks, then every record and node the
 * commit may need, each record written and noted in mine. */
static int tx_build(pc_txn *t, pc_off *mine)
{
    int rc = 0;
    for (unsigned i = 0; i < t->n && rc == 0; i++) {
        struct pc_txn_ent *e = &t->e[i];
        e->new_rec = e->node = e->old = e->old_node = 0;
        e->applied = false;
        if (e->op != TX_NONE)
            rc = atomic_load_explicit(&e->coll->shm->wblock, memory_order_relaxed);
    }
    for (unsigned i = 0; i < t->n && rc == 0; i++) {
        struct pc_txn_ent *e = &t->e[i];
        if (e->op != TX_PUT)
            continue;
        size_t bytes = PC_REC_HDR + e->klen + e->slen;
        if (bytes <= PC_REC_HDR)
            bytes = PC_REC_HDR + 1;
        /* an eviction here may take a key this transaction observed: the
         * commit then conflicts and runs again, as after any writer */
        /* a key not live when observed may be absent at the commit: its
         * insert may need an overflow node */
        if ((e->new_rec = pc_alloc_evict(e->coll, bytes)) == 0 ||
            (!e->rlive &&
             (e->node = pc_alloc_evict(e->coll, sizeof(struct pc_ovf_node_shm))) == 0)) {
            pc_nomem(e->coll, e->key, e->klen, bytes);
            return PC_ENOMEM;
        }
        pc_fill_rec(t->c, e->new_rec, e->key, e->klen, e->sval, e->slen, e->sflags, e->sexp);
        mine[i] = e->new_rec;
    }
    return rc;
}

/* Step 2: locks every key's bucket as the table routes it now (a split
 * since the observation moved some), once each, in the global order (I8).
 * locks has room for t->n; returns how many it holds, sorted. */
static unsigned tx_lock_all(pc_txn *t, struct tx_lock *locks)
{
    unsigned nl = 0;
    for (unsigned i = 0; i < t->n; i++) {
        struct pc_txn_ent *e = &t->e[i];
        const struct pc_coll_shm *cs = e->coll->shm;
        e->lidx = pc_route_index(pc_route_load(cs), cs->log2_initial, e->h);
        locks[nl++] = (struct tx_lock){e->coll, e->lidx, NULL};
    }
    qsort(locks, nl, sizeof *locks, tx_lock_cmp);
    unsigned u = 0;
    for (unsigned i = 0; i < nl; i++)
        if (u == 0 || tx_lock_cmp(&locks[u - 1], &locks[i]) != 0)
            locks[u++] = locks[i];
    nl = u;
    PC_ASSERT(t->c, I8, pc_dbg_bucket_locks + pc_dbg_chain_locks == 0);
    for (unsigned i = 0; i < nl; i++) {
        PC_ASSERT(t->c, I8, i == 0 || tx_lock_cmp(&locks[i - 1], &locks[i]) < 0);
        locks[i].b = pc_bucket_at(locks[i].coll, locks[i].idx);
        pc_bucket_lock(locks[i].coll, locks[i].b, locks[i].idx);
    }
    return nl;
}

static void tx_unlock_all(const struct tx_lock *locks, unsigned nl)
{
    for (unsigned i = nl; i-- > 0;)
        pc_bucket_unlock(locks[i].b);
}

/* Step 4, under the locks of step 2: installs every write inside one
 * bracket per bucket, all open at once, stamps each entry with its
 * bucket's version, then releases the locks and counts what applied. */
static void tx_install(pc_txn *t, const struct tx_lock *locks, unsigned nl, int64_t now)
{
    for (unsigned i = 0; i < nl; i++)
        pc_wbegin(locks[i].b);
    for (unsigned i = 0; i < t->n; i++)
        if (t->e[i].op != TX_NONE)
            tx_apply_locked(&t->e[i], tx_bucket(locks, nl, &t->e[i]), now);
    for (unsigned i = 0; i < nl; i++)
        pc_wend(locks[i].b);
    for (unsigned i = 0; i < t->n; i++)
        t->e[i].stamp =
            atomic_load_explicit(&tx_bucket(locks, nl, &t->e[i])->version, memory_order_relaxed);
    tx_unlock_all(locks, nl);
    for (unsigned i = 0; i < t->n; i++) {
        struct pc_txn_ent *e = &t->e[i];
        if (e->applied && e->op == TX_PUT)
            PC_STAT_ADD(e->coll, stores, 1);
        else if (e->applied)
            PC_STAT_ADD(e->coll, removes, 1);
    }
}

/* The commit's end, no lock held: frees what was replaced and what was
 * not used, and forgets the commit's state in every entry. */
static void tx_settle(pc_txn *t)
{
    for (unsigned i = 0; i < t->n; i++) {
        struct pc_txn_ent *e = &t->e[i];
        if (e->old != 0) {
            pc_free(t->c, e->old);
            PC_STAT_ADD(e->coll, destroyed, 1);
        }
        if (e->old_node != 0)
            pc_free(t->c, e->old_node);
        if (e->node != 0)
            pc_free(t->c, e->node);
        if (e->new_rec != 0)
            pc_free(t->c, e->new_rec);
        e->new_rec = e->node = e->old = e->old_node = 0;
        e->applied = false;
    }
}

int pc_txn_commit(pc_txn *t)
{
    if (t == NULL)
        return PC_EINVAL;
    pc_cache *c = t->c;
    int rc = pc_enter(c);
    if (rc != 0 || t->n == 0)
        return rc;
    pc_txn *bound = c->txn;
    c->txn = NULL; /* the commit's own calls go to the table */
    struct tx_lock *locks = malloc(t->n * sizeof *locks);
    pc_off *mine = calloc(t->n, sizeof *mine);
    if (locks == NULL || mine == NULL) {
        rc = PC_EHEAP;
        goto out;
    }
    /* 1. build, 2. lock */
    if ((rc = tx_build(t, mine)) != 0)
        goto out;
    unsigned nl = tx_lock_all(t, locks);
    /* 3. verify */
    int64_t now = pc_mono_ms();
    if (!tx_verify_locked(t, locks, nl, now)) {
        tx_unlock_all(locks, nl);
        rc = PC_ECONFLICT;
        goto out;
    }
    /* 4. install; a transaction of several buckets is in flight until its
     * hooks return */
    struct pc_proc_shm *self = nl > 1 ? &c->hdr->procs[c->slot] : NULL;
    if (self != NULL)
        atomic_fetch_add_explicit(&self->txn_begun, 1, memory_order_seq_cst);
    tx_install(t, locks, nl, now);
    rc = tx_hooks(t, mine);
    if (self != NULL)
        atomic_fetch_add_explicit(&self->txn_done, 1, memory_order_release);
out:
    tx_settle(t);
    free(locks);
    free(mine);
    c->txn = bound;
    if (rc == 0)
        pc_txn_clear(t);
    return rc;
}

int pc_txn_run(pc_cache *c, pc_txn_fn fn, void *ctx, unsigned max_attempts)
{
    if (c == NULL || fn == NULL)
        return PC_EINVAL;
    if (max_attempts == 0)
        max_attempts = 100;
    int rc = pc_enter(c);
    if (rc != 0)
        return rc;
    if (c->txn != NULL) /* inside a bound transaction: join it */
        return fn(ctx);
    pc_txn *t;
    if ((rc = pc_txn_begin(c, &t)) != 0)
        return rc;
    pc_txn *prev = c->txn;
    for (unsigned a = 0; a < max_attempts; a++) {
        c->txn = t;
        rc = fn(ctx);
        c->txn = prev;
        if (rc != 0)
            break;
        if ((rc = pc_txn_commit(t)) != PC_ECONFLICT)
            break;
        pc_txn_reset(t);
        if (a >= 4)
            sched_yield();
    }
    pc_txn_free(t);
    return rc;
}

/* Polls every slot up to the high-water mark; a slot whose owner died or
 * changed (its token) has nothing more to hand to a hook. */
int pc_txn_quiesce(pc_cache *c, unsigned timeout_ms)
{
    if (c == NULL)
        return PC_EINVAL;
    struct pc_header_shm *h = c->hdr;
    uint32_t hwm = atomic_load(&h->proc_hwm);
    int64_t deadline = pc_mono_ms() + timeout_ms;
    atomic_thread_fence(memory_order_seq_cst);
    for (uint32_t i = 1; i <= hwm && i < PC_MAX_PROCS; i++) {
        struct pc_proc_shm *p = &h->procs[i];
        uint32_t tok = atomic_load_explicit(&p->token, memory_order_acquire);
        uint64_t want = atomic_load_explicit(&p->txn_begun, memory_order_acquire);
        unsigned spins = 0;
        while (atomic_load_explicit(&p->txn_done, memory_order_acquire) < want) {
            if (tok == 0 || (++spins % 64 == 0 && pc_token_gone(c, tok)))
                break;
            if (pc_mono_ms() >= deadline)
                return PC_ELOCKED;
            struct timespec ts = {0, 100000}; /* 0.1 ms: a hook may be at its fdatasync */
            nanosleep(&ts, NULL);
        }
    }
    return 0;
}
