/*
 * walk.c - the one lock-free walker behind scan, keys, dump, multi-get, glob
 * delete and glob TTL re-arm.
 *
 * The cursor is a bucket index and the walk goes up. What happens when the
 * table grows during a walk: a split of bucket s only moves keys to bucket
 * s + size, a higher index, and buckets never move in memory. A key present
 * for the whole walk therefore sits, when the walk reaches its bucket, either
 * in that bucket (visited now) or in a higher one (visited later) - unless
 * it was moved up after its old bucket was visited, in which case it was
 * already returned. So every such key is returned at least once; a key
 * moved up after being visited is returned twice, which callers accept (it
 * is Redis SCAN's guarantee, without the reverse-binary cursor, because our
 * table only grows). The walk ends when the cursor reaches the table's size
 * as read at that moment.
 *
 * One bucket is copied out as a unit: its slots under the seqlock, then the
 * overflow entries that route to it (chain by chain, under the chain locks),
 * then the bucket's version and the routing word are re-checked - a drain
 * moving a key from a chain into the bucket bumps the version, so a key can
 * never fall between the two reads. Callbacks run after the copy, with no
 * lock held, so they may modify the table.
 */
#include "pc_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

struct pc_went { /* one copied entry: offsets into the scratch bytes */
    size_t koff, klen, voff, vlen;
    int64_t expires;
    uint32_t stamp;
    uint8_t flags;
};

struct pc_wscratch {
    unsigned char *bytes;
    size_t cap, used, need;
    struct pc_went *ents;
    size_t ecap, n, eneed;
};

static void pc_ws_free(struct pc_wscratch *w)
{
    free(w->bytes);
    free(w->ents);
}

/* Grows the scratch after an attempt reported what it needed. */
static int pc_ws_grow(struct pc_wscratch *w)
{
    if (w->need > w->cap) {
        size_t cap = w->need * 2;
        unsigned char *b = realloc(w->bytes, cap);
        if (b == NULL)
            return PC_EHEAP;
        w->bytes = b;
        w->cap = cap;
    }
    if (w->eneed > w->ecap) {
        size_t cap = w->eneed * 2;
        struct pc_went *e = realloc(w->ents, cap * sizeof *e);
        if (e == NULL)
            return PC_EHEAP;
        w->ents = e;
        w->ecap = cap;
    }
    return 0;
}

/* Copies one record into the scratch, clamped like every read (I2: the
 * class byte bounds the cell). Never allocates: when the scratch is too
 * small it only records what would be needed. */
static void pc_ws_copy(const pc_cache *c, const struct pc_rec_shm *r, bool values, bool raw,
                       struct pc_wscratch *w)
{
    size_t room = pc_rec_room(c, r);
    if (room <= PC_REC_HDR)
        return;
    room -= PC_REC_HDR;
    size_t kl = r->klen;
    if (kl > room)
        kl = room;
    size_t vl = r->vlen;
    if (vl > room - kl)
        vl = room - kl;
    uint8_t flags = r->flags;
    size_t want = kl + (values ? ((flags & PC_RF_COUNTER) ? 24 : vl) : 0);
    w->eneed = w->n + 1 > w->eneed ? w->n + 1 : w->eneed;
    w->need = w->used + want > w->need ? w->used + want : w->need;
    if (w->n >= w->ecap || w->used + want > w->cap) {
        w->n++; /* counted, not stored: the attempt will be redone */
        w->used += want;
        return;
    }
    struct pc_went *e = &w->ents[w->n++];
    e->koff = w->used;
    e->klen = kl;
    if (kl > 0) /* the empty key with nothing stored yet: bytes may be NULL */
        memcpy(w->bytes + w->used, r->data, kl);
    w->used += kl;
    e->flags = flags;
    e->expires = atomic_load_explicit(&((struct pc_rec_shm *)r)->expires, memory_order_relaxed);
    e->voff = w->used;
    e->vlen = 0;
    if (!values)
        return;
    if (flags & PC_RF_COUNTER) {
        int64_t v = 0;
        memcpy(&v, r->data + kl, vl < 8 ? vl : 8);
        if (raw) {
            memcpy(w->bytes + w->used, &v, 8);
            e->vlen = 8;
        } else {
            e->vlen = (size_t)snprintf((char *)w->bytes + w->used, 24, "%" PRId64, v);
        }
    } else {
        if (vl > 0)
            memcpy(w->bytes + w->used, r->data + kl, vl);
        e->vlen = vl;
    }
    w->used += want - kl; /* the key's bytes were counted above */
}

/* Copies the overflow entries routing to idx. Chains are locked one at a
 * time; the caller re-checks the bucket afterwards. */
static void pc_ws_chains(pc_coll *coll, uint64_t route, uint64_t idx, bool values, bool raw,
                         struct pc_wscratch *w)
{
    unsigned l2 = coll->shm->log2_initial;
    uint64_t size = 1ull << (l2 + (unsigned)(route >> 32));
    uint64_t split = route & 0xffffffffu;
    uint64_t m = (idx < split || idx >= size) ? 2 * size : size;
    uint64_t first = m >= PC_CHAINS ? (idx & (PC_CHAINS - 1)) : idx;
    uint64_t step = m >= PC_CHAINS ? PC_CHAINS : m;
    struct pc_chain_shm *chains = pc_at(coll->c, coll->shm->chains_off);
    for (uint64_t j = first; j < PC_CHAINS; j += step) {
        struct pc_chain_shm *ch = &chains[j];
        if (ch->count == 0)
            continue;
        pc_chain_lock(coll, ch);
        for (pc_off off = ch->head; off != 0;) {
            const struct pc_ovf_node_shm *n = pc_cell(coll->c, off);
            if (n == NULL)
                break;
            const struct pc_rec_shm *r = pc_cell(coll->c, n->rec);
            if (r != NULL && pc_route_index(route, l2, n->hlo) == idx)
                pc_ws_copy(coll->c, r, values, raw, w);
            off = n->next;
        }
        pc_chain_unlock(ch);
    }
}

/* Appends bucket idx (and its overflow) to w as one consistent unit: an
 * attempt that must be redone is cut back to what w held before. The
 * ordered walk appends a group's buckets straight into one scratch. */
static int pc_ws_bucket_append(pc_coll *coll, uint64_t idx, bool values, bool raw,
                               struct pc_wscratch *w)
{
    const pc_cache *c = coll->c;
    struct pc_bucket_shm *b = pc_bucket_at(coll, idx);
    const size_t n0 = w->n, used0 = w->used;
    for (unsigned attempt = 0;; attempt++) {
        w->n = w->eneed = n0;
        w->used = w->need = used0;
        uint64_t route = pc_route_load(coll->shm);
        bool locked = attempt >= 16; /* after many retries: under the lock */
        if (locked)
            pc_bucket_lock(coll, b, idx);
        uint32_t v1 = atomic_load_explicit(&b->version, memory_order_acquire);
        if (!locked && (v1 & 1)) {
            pc_cpu_relax();
            continue;
        }
        uint8_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
        unsigned n = used & PC_USED_MASK;
        for (unsigned i = 0; i < n && i < PC_SLOTS; i++) {
            const struct pc_rec_shm *r =
                pc_cell(c, atomic_load_explicit(&b->slot[i], memory_order_relaxed));
            if (r != NULL)
                pc_ws_copy(c, r, values, raw, w);
        }
        atomic_thread_fence(memory_order_acquire);
        bool stable = atomic_load_explicit(&b->version, memory_order_relaxed) == v1;
        if (stable && (used & PC_USED_OVF))
            pc_ws_chains(coll, route, idx, values, raw, w);
        stable = stable && atomic_load_explicit(&b->version, memory_order_acquire) == v1 &&
                 pc_route_load(coll->shm) == route;
        if (locked)
            pc_bucket_unlock(b);
        if (!stable && !locked)
            continue;
        for (size_t i = n0; i < w->n && i < w->ecap; i++)
            w->ents[i].stamp = v1;
        if (w->need > w->cap || w->eneed > w->ecap) {
            int rc = pc_ws_grow(w);
            if (rc != 0)
                return rc;
            attempt = 0;
            continue;
        }
        return 0;
    }
}

/* Copies bucket idx (and its overflow) into w, replacing what w held. */
static int pc_ws_bucket(pc_coll *coll, uint64_t idx, bool values, bool raw, struct pc_wscratch *w)
{
    w->n = w->used = 0;
    return pc_ws_bucket_append(coll, idx, values, raw, w);
}

/* The callback's view of a copied entry (borrowed from the scratch). */
static pc_entry pc_went_entry(const struct pc_wscratch *w, const struct pc_went *e, bool values,
                              int64_t now)
{
    pc_entry pe = {.key = w->bytes + e->koff,
                   .klen = e->klen,
                   .val = values ? w->bytes + e->voff : NULL,
                   .vlen = e->vlen,
                   .ttl_ms = e->expires == 0 ? -1 : e->expires - now,
                   .is_counter = (e->flags & PC_RF_COUNTER) != 0,
                   .stamp = e->stamp};
    return pe;
}

int pc_scan(pc_coll *coll, uint64_t cursor, uint64_t max_buckets, const void *glob, size_t glen,
            unsigned flags, pc_walk_fn fn, void *ctx, uint64_t *next)
{
    if (coll == NULL || fn == NULL || next == NULL || (glob == NULL && glen > 0) ||
        max_buckets == 0 || (flags & ~(PC_WALK_VALUES | PC_WALK_RAW)) != 0)
        return PC_EINVAL;
    int rc = pc_glob_check(glob, glen);
    if (rc != 0)
        return rc;
    if ((rc = pc_enter(coll->c)) != 0)
        return rc;
    unsigned l2 = coll->shm->log2_initial;
    if (cursor >= pc_route_buckets(pc_route_load(coll->shm), l2))
        return PC_EINVAL;
    struct pc_wscratch w;
    memset(&w, 0, sizeof w);
    bool values = (flags & PC_WALK_VALUES) != 0, raw = (flags & PC_WALK_RAW) != 0;
    uint64_t idx = cursor, visited = 0;
    int stop = 0;
    while (stop == 0 && visited < max_buckets &&
           idx < pc_route_buckets(pc_route_load(coll->shm), l2)) {
        if ((rc = pc_ws_bucket(coll, idx, values, raw, &w)) != 0)
            break;
        idx++;
        visited++;
        int64_t now = pc_mono_ms();
        for (size_t i = 0; i < w.n && stop == 0; i++) {
            const struct pc_went *e = &w.ents[i];
            if (e->expires != 0 && e->expires <= now)
                continue;
            if (glob != NULL && !pc_glob_match(glob, glen, w.bytes + e->koff, e->klen))
                continue;
            pc_entry pe = pc_went_entry(&w, e, values, now);
            stop = fn(ctx, &pe);
        }
    }
    pc_ws_free(&w);
    if (rc != 0)
        return rc;
    *next = idx >= pc_route_buckets(pc_route_load(coll->shm), l2) ? 0 : idx;
    return stop;
}

int pc_walk(pc_coll *coll, const void *glob, size_t glen, unsigned flags, pc_walk_fn fn, void *ctx)
{
    uint64_t cursor = 0;
    do {
        int rc = pc_scan(coll, cursor, 4096, glob, glen, flags, fn, ctx, &cursor);
        if (rc != 0)
            return rc;
    } while (cursor != 0);
    return 0;
}

struct pc_glob_op {
    pc_coll *coll;
    int64_t ttl_ms;
    uint64_t count;
    int err;
};

static int pc_del_cb(void *ctx, const pc_entry *e)
{
    struct pc_glob_op *op = ctx;
    int rc = pc_remove(op->coll, e->key, e->klen);
    if (rc == 0)
        op->count++;
    else if (rc != PC_ENOTFOUND)
        op->err = rc;
    return 0;
}

static int pc_ttl_cb(void *ctx, const pc_entry *e)
{
    struct pc_glob_op *op = ctx;
    int rc = pc_expire(op->coll, e->key, e->klen, op->ttl_ms);
    if (rc == 0)
        op->count++;
    else if (rc != PC_ENOTFOUND)
        op->err = rc;
    return 0;
}

/* A key visited twice (moved up by a split) is deleted once: the second
 * pc_remove finds nothing. For the TTL re-arm a second visit re-arms the
 * same key again, so the count is of re-arms; keys are deduplicated by the
 * delete path only, where the count is user-visible as "deleted". */
int pc_del_glob(pc_coll *coll, const void *glob, size_t glen, uint64_t *count)
{
    if (count == NULL)
        return PC_EINVAL;
    struct pc_glob_op op = {.coll = coll};
    int rc = pc_walk(coll, glob, glen, 0, pc_del_cb, &op);
    if (rc == 0 && op.err != 0)
        rc = op.err;
    if (rc == 0)
        *count = op.count;
    return rc;
}

int pc_ttl_glob(pc_coll *coll, const void *glob, size_t glen, int64_t ttl_ms, uint64_t *count)
{
    if (count == NULL || ttl_ms < 0)
        return PC_EINVAL;
    struct pc_glob_op op = {.coll = coll, .ttl_ms = ttl_ms};
    int rc = pc_walk(coll, glob, glen, 0, pc_ttl_cb, &op);
    if (rc == 0 && op.err != 0)
        rc = op.err;
    if (rc == 0)
        *count = op.count;
    return rc;
}

/* ---- the ordered walk of snapshot saves ----------------------------------
 * Every live entry in ascending pc_order_key(hash) = the hash with its bits
 * reversed. A bucket's index is the low bits of the hash, so all keys whose
 * low k bits equal g sort together once the bits are reversed. With M = 2^k
 * the unsplit modulus when the walk starts, group g is every bucket whose
 * index is g mod M (g, g + M once split, ...). Keys never leave their group
 * as the table grows (every later modulus is a multiple of M), so visiting
 * the groups in bit-reversed order of g and sorting each group's few
 * entries yields the collection sorted, with no global sort and no second
 * pass: a save writes blocks straight from it, and a point lookup in a
 * snapshot is a range search on the reversed hash. A key that a split
 * copies between two buckets of a group while we read them is emitted once.
 * A split during a group's copy appends a bucket of that group (index =
 * the old size): the group is done only when the table's size read after
 * its last bucket equals the size its loop ran to (design.md §13).
 */
uint64_t pc_order_key(uint64_t h)
{
    h = ((h >> 1) & 0x5555555555555555ull) | ((h & 0x5555555555555555ull) << 1);
    h = ((h >> 2) & 0x3333333333333333ull) | ((h & 0x3333333333333333ull) << 2);
    h = ((h >> 4) & 0x0f0f0f0f0f0f0f0full) | ((h & 0x0f0f0f0f0f0f0f0full) << 4);
    return __builtin_bswap64(h);
}

struct pc_gidx {
    uint64_t order;
    size_t i;
};

static int pc_gidx_cmp(const void *a, const void *b, void *ctx)
{
    const struct pc_wscratch *g = ctx;
    const struct pc_gidx *x = a, *y = b;
    if (x->order != y->order)
        return x->order < y->order ? -1 : 1;
    const struct pc_went *ex = &g->ents[x->i], *ey = &g->ents[y->i];
    if (ex->klen != ey->klen)
        return ex->klen < ey->klen ? -1 : 1;
    return memcmp(g->bytes + ex->koff, g->bytes + ey->koff, ex->klen);
}

/* A group holds a few entries (the table's load factor per bucket of the
 * unsplit modulus): insertion sort, no comparator calls through qsort's
 * merge buffer; qsort_r past a few dozen (a group swollen by growth). */
static void pc_gidx_sort(struct pc_gidx *idx, size_t n, const struct pc_wscratch *g)
{
    if (n > 32) {
        qsort_r(idx, n, sizeof *idx, pc_gidx_cmp, (void *)g); /* glibc: a context argument */
        return;
    }
    for (size_t i = 1; i < n; i++) {
        struct pc_gidx x = idx[i];
        size_t k = i;
        while (k > 0 &&
               (idx[k - 1].order > x.order ||
                (idx[k - 1].order == x.order && pc_gidx_cmp(&idx[k - 1], &x, (void *)g) > 0))) {
            idx[k] = idx[k - 1];
            k--;
        }
        idx[k] = x;
    }
}

/* Memory-level parallelism for the save: the walk's order is known ahead,
 * so the bucket lines of a group PC_PF_FAR ahead and the record lines of a
 * group PC_PF_NEAR ahead are prefetched. Only hints: the slot offsets read
 * here are unvalidated (any offset inside the region is safe to prefetch). */
#define PC_PF_FAR 16u
#define PC_PF_NEAR 8u
static void pc_prefetch_group(pc_coll *coll, uint64_t grp, uint64_t m, uint64_t nb, bool recs)
{
    const pc_cache *c = coll->c;
    for (uint64_t b = grp; b < nb; b += m) {
        const struct pc_bucket_shm *bk = pc_bucket_at(coll, b);
        if (!recs) {
            __builtin_prefetch(bk, 0, 0);
            continue;
        }
        unsigned n = atomic_load_explicit(&bk->used, memory_order_relaxed) & PC_USED_MASK;
        for (unsigned i = 0; i < n && i < PC_SLOTS; i++) {
            const unsigned char *r =
                pc_cell(c, atomic_load_explicit(&bk->slot[i], memory_order_relaxed));
            if (r == NULL)
                continue;
            /* the first 256 bytes, without reading the class byte (a read
             * would stall on the very miss we want to overlap) */
            for (size_t o = 0; o < 256; o += 64)
                if (((uint64_t)(r - c->base) + o) < c->region_bytes)
                    __builtin_prefetch(r + o, 0, 0);
        }
    }
}

int pc_walk_ordered(pc_coll *coll, unsigned flags, pc_walk_fn fn, void *ctx)
{
    if (coll == NULL || fn == NULL || (flags & ~(PC_WALK_VALUES | PC_WALK_RAW)) != 0)
        return PC_EINVAL;
    int rc = pc_enter(coll->c);
    if (rc != 0)
        return rc;
    bool values = (flags & PC_WALK_VALUES) != 0, raw = (flags & PC_WALK_RAW) != 0;
    unsigned l2 = coll->shm->log2_initial;
    unsigned bits = l2 + (unsigned)(pc_route_load(coll->shm) >> 32);
    uint64_t m = 1ull << bits; /* the unsplit modulus at the start */
    struct pc_wscratch g;
    memset(&g, 0, sizeof g);
    struct pc_gidx *idx = NULL;
    size_t icap = 0;
    int stop = 0;
    for (uint64_t j = 0; j < m && stop == 0 && rc == 0; j++) {
        uint64_t grp = pc_order_key(j) >> (64 - bits);
        uint64_t nb = pc_route_buckets(pc_route_load(coll->shm), l2);
        if (bits > 0 && j + PC_PF_FAR < m)
            pc_prefetch_group(coll, pc_order_key(j + PC_PF_FAR) >> (64 - bits), m, nb, false);
        if (bits > 0 && j + PC_PF_NEAR < m)
            pc_prefetch_group(coll, pc_order_key(j + PC_PF_NEAR) >> (64 - bits), m, nb, true);
        g.n = g.used = 0;
        /* Until the table's size is the same before and after: a split
         * appends its new bucket at the end, so one that ran while the
         * group was copied may have moved keys out of a bucket not yet
         * copied into one past the size read before. */
        for (uint64_t b = grp; rc == 0;) {
            for (; b < nb && rc == 0; b += m)
                rc = pc_ws_bucket_append(coll, b, values, raw, &g);
            uint64_t nb2 = pc_route_buckets(pc_route_load(coll->shm), l2);
            if (nb2 == nb)
                break;
            nb = nb2;
        }
        if (rc != 0 || g.n == 0)
            continue;
        if (g.n > icap) {
            struct pc_gidx *ni = realloc(idx, g.n * 2 * sizeof *ni);
            if (ni == NULL) {
                rc = PC_EHEAP;
                break;
            }
            idx = ni;
            icap = g.n * 2;
        }
        for (size_t i = 0; i < g.n; i++) {
            idx[i].order = pc_order_key(pc_key_hash(g.bytes + g.ents[i].koff, g.ents[i].klen));
            idx[i].i = i;
        }
        pc_gidx_sort(idx, g.n, &g);
        int64_t now = pc_mono_ms();
        for (size_t k = 0; k < g.n && stop == 0; k++) {
            if (k > 0 && pc_gidx_cmp(&idx[k - 1], &idx[k], &g) == 0)
                continue; /* seen twice across a split */
            const struct pc_went *e = &g.ents[idx[k].i];
            if (e->expires != 0 && e->expires <= now)
                continue;
            pc_entry pe = pc_went_entry(&g, e, values, now);
            stop = fn(ctx, &pe);
        }
    }
    pc_ws_free(&g);
    free(idx);
    return rc != 0 ? rc : stop;
}
