/*
 * testhooks.c - the white-box hooks of pc_testhooks.h: states a crash or a
 * race would produce, and the invariant checker (pc__test_verify) that the
 * tests and the soak run against a quiescent cache.
 */
#include "pc_int.h"
#include "pc_testhooks.h"

#include <inttypes.h>
#include <stdio.h>

int pc__test_hold_bucket_lock(pc_coll *coll, const void *key, size_t klen)
{
    int rc = pc_enter(coll->c);
    if (rc != 0)
        return rc;
    uint64_t idx;
    struct pc_bucket_shm *b = pc_lock_route(coll, pc_hash(key, klen), &idx);
    pc_wbegin(b); /* as a writer stopped mid-update */
    return 0;
}

int pc__test_release_bucket_lock(pc_coll *coll, const void *key, size_t klen)
{
    int rc = pc_enter(coll->c);
    if (rc != 0)
        return rc;
    /* the holder's lock keeps the route to this bucket stable (I6) */
    uint64_t idx =
        pc_route_index(pc_route_load(coll->shm), coll->shm->log2_initial, pc_hash(key, klen));
    struct pc_bucket_shm *b = pc_bucket_at(coll, idx);
    if (atomic_load(&b->lock) != coll->c->token || (atomic_load(&b->version) & 1) == 0)
        return PC_EINVAL; /* not held open by this process */
    pc_wend(b);
    pc_bucket_unlock(b);
    return 0;
}

int pc__test_value_bytes(pc_coll *coll, const void *key, size_t klen, unsigned char **val,
                         size_t *vlen)
{
    int rc = pc_enter(coll->c);
    if (rc != 0)
        return rc;
    pc_cache *c = coll->c;
    uint64_t h = pc_hash(key, klen);
    struct pc_bucket_shm *b =
        pc_bucket_at(coll, pc_route_index(pc_route_load(coll->shm), coll->shm->log2_initial, h));
    struct pc_rec_shm *r = NULL;
    unsigned n = atomic_load(&b->used) & PC_USED_MASK;
    for (unsigned i = 0; i < n && i < PC_SLOTS && r == NULL; i++) {
        struct pc_rec_shm *x = pc_cell(c, atomic_load(&b->slot[i]));
        if (x != NULL && pc_rec_key_eq(c, x, key, klen))
            r = x;
    }
    if (r == NULL) {
        struct pc_chain_shm *ch = pc_chain_for(coll, h);
        pc_chain_lock(coll, ch);
        pc_off prev;
        pc_off node = pc_chain_find(coll, ch, key, klen, &prev);
        if (node != 0)
            r = pc_cell(c, ((struct pc_ovf_node_shm *)pc_cell(c, node))->rec);
        pc_chain_unlock(ch);
    }
    if (r == NULL)
        return PC_ENOTFOUND;
    *val = r->data + r->klen;
    *vlen = r->vlen;
    return 0;
}

/* Finds key under its bucket lock; returns the record or NULL and whether
 * it sits in a chain. The bucket stays locked in *bp. */
static struct pc_rec_shm *pc_find_locked(pc_coll *coll, const void *key, size_t klen,
                                         struct pc_bucket_shm **bp, int *in_chain)
{
    pc_cache *c = coll->c;
    uint64_t h = pc_hash(key, klen), idx;
    struct pc_bucket_shm *b = pc_lock_route(coll, h, &idx);
    *bp = b;
    *in_chain = 0;
    unsigned n = atomic_load(&b->used) & PC_USED_MASK;
    for (unsigned i = 0; i < n; i++) {
        struct pc_rec_shm *r = pc_cell(c, atomic_load(&b->slot[i]));
        if (r != NULL && pc_rec_key_eq(c, r, key, klen))
            return r;
    }
    struct pc_chain_shm *ch = pc_chain_for(coll, h);
    pc_chain_lock(coll, ch);
    pc_off prev;
    pc_off node = pc_chain_find(coll, ch, key, klen, &prev);
    struct pc_rec_shm *r = NULL;
    if (node != 0) {
        r = pc_cell(c, ((struct pc_ovf_node_shm *)pc_cell(c, node))->rec);
        *in_chain = 1;
    }
    pc_chain_unlock(ch);
    return r;
}

int pc__test_tear_lengths(pc_coll *coll, const void *key, size_t klen, uint16_t klen_bits,
                          uint32_t vlen_bits)
{
    int rc = pc_enter(coll->c);
    if (rc != 0)
        return rc;
    struct pc_bucket_shm *b;
    int in_chain;
    struct pc_rec_shm *r = pc_find_locked(coll, key, klen, &b, &in_chain);
    if (r != NULL) {
        r->klen = klen_bits;
        r->vlen = vlen_bits;
    }
    pc_bucket_unlock(b);
    return r != NULL ? 0 : PC_ENOTFOUND;
}

int pc__test_in_overflow(pc_coll *coll, const void *key, size_t klen)
{
    int rc = pc_enter(coll->c);
    if (rc != 0)
        return rc;
    struct pc_bucket_shm *b;
    int in_chain;
    struct pc_rec_shm *r = pc_find_locked(coll, key, klen, &b, &in_chain);
    pc_bucket_unlock(b);
    return r == NULL ? PC_ENOTFOUND : in_chain;
}

#define PC_FAIL(...)                                                                               \
    do {                                                                                           \
        snprintf(msg, msglen, __VA_ARGS__);                                                        \
        pc_log(c, PC_LOG_ERR, "pcache verify: %s", msg);                                           \
        return PC_EINVAL;                                                                          \
    } while (0)

static int pc_verify_chunks(pc_cache *c, char *msg, size_t msglen)
{
    const struct pc_header_shm *h = c->hdr;
    const uint64_t *tab = pc_at(c, h->chunk_tab_off);
    uint64_t n = atomic_load(&h->chunk_tab_len);
    for (uint64_t i = 0; i < n && i < h->chunk_tab_cap; i++) {
        uint64_t e = tab[i];
        unsigned cls = (unsigned)(e & 0xff);
        uint64_t off = pc_chunk_e_off(e);
        if (cls == 0xff || off == 0)
            continue;
        if (cls >= c->nclasses)
            PC_FAIL("chunk %" PRIu64 " has invalid class %u", i, cls);
        uint32_t cell = c->class_size[cls];
        uint64_t bytes = pc_chunk_e_len(e);
        for (uint64_t o = 0; o + cell <= bytes; o += cell) {
            uint8_t got = *(const uint8_t *)pc_at(c, off + o);
            if (got != cls)
                PC_FAIL("cell at byte %" PRIu64 " has class byte %u, its chunk is class %u",
                        off + o, got, cls);
        }
    }
    return 0;
}

static int pc_verify_coll(pc_coll *coll, char *msg, size_t msglen)
{
    pc_cache *c = coll->c;
    const char *name = coll->shm->name;
    uint64_t route = pc_route_load(coll->shm);
    unsigned l2 = coll->shm->log2_initial;
    uint64_t nb = pc_route_buckets(route, l2), count = 0;
    for (uint64_t idx = 0; idx < nb; idx++) {
        struct pc_bucket_shm *b = pc_bucket_at(coll, idx);
        uint32_t v = atomic_load(&b->version);
        if ((v & 1) || atomic_load(&b->lock) != 0)
            PC_FAIL("%s: bucket %" PRIu64 " is locked or mid-write (version %u)", name, idx, v);
        unsigned n = atomic_load(&b->used) & PC_USED_MASK;
        if (n > PC_SLOTS)
            PC_FAIL("%s: bucket %" PRIu64 " claims %u slots", name, idx, n);
        for (unsigned i = 0; i < n; i++) {
            pc_off off = atomic_load(&b->slot[i]);
            const struct pc_rec_shm *r = pc_cell(c, off);
            size_t cell = r != NULL ? pc_class_bytes(c, r->cls) : 0;
            if (r == NULL || cell <= PC_REC_HDR || (size_t)r->klen + r->vlen > cell - PC_REC_HDR)
                PC_FAIL("%s: bucket %" PRIu64 " slot %u holds a bad record", name, idx, i);
            uint64_t h = pc_hash(r->data, r->klen);
            if (pc_route_index(route, l2, h) != idx)
                PC_FAIL("%s: key in bucket %" PRIu64 " routes elsewhere", name, idx);
            if (!pc_tag_eq(atomic_load(&b->tags[i]), pc_tag_of(h)))
                PC_FAIL("%s: bucket %" PRIu64 " slot %u has a wrong tag", name, idx, i);
            for (unsigned j = 0; j < i; j++)
                if (atomic_load(&b->slot[j]) == off)
                    PC_FAIL("%s: bucket %" PRIu64 " holds a record twice", name, idx);
            count++;
        }
    }
    struct pc_chain_shm *chains = pc_at(c, coll->shm->chains_off);
    for (unsigned i = 0; i < PC_CHAINS; i++) {
        uint32_t len = 0;
        for (pc_off off = chains[i].head; off != 0; len++) {
            const struct pc_ovf_node_shm *nd = pc_cell(c, off);
            if (nd == NULL || pc_class_bytes(c, nd->cls) != 16)
                PC_FAIL("%s: chain %u has a bad node", name, i);
            const struct pc_rec_shm *r = pc_cell(c, nd->rec);
            if (r == NULL || pc_class_bytes(c, r->cls) <= PC_REC_HDR)
                PC_FAIL("%s: chain %u node points at a bad record", name, i);
            uint64_t h = pc_hash(r->data, r->klen);
            if ((h & (PC_CHAINS - 1)) != i || (uint32_t)h != nd->hlo)
                PC_FAIL("%s: chain %u holds a key of another chain", name, i);
            uint64_t idx = pc_route_index(route, l2, h);
            struct pc_bucket_shm *b = pc_bucket_at(coll, idx);
            if (!(atomic_load(&b->used) & PC_USED_OVF))
                PC_FAIL("%s: key in chain %u but bucket %" PRIu64 " lacks the overflow flag", name,
                        i, idx);
            unsigned n = atomic_load(&b->used) & PC_USED_MASK;
            for (unsigned s = 0; s < n; s++) {
                const struct pc_rec_shm *o = pc_cell(c, atomic_load(&b->slot[s]));
                if (o->klen == r->klen && memcmp(o->data, r->data, r->klen) == 0)
                    PC_FAIL("%s: a key lives in bucket %" PRIu64 " and in chain %u", name, idx, i);
            }
            count++;
            off = nd->next;
        }
        if (len != chains[i].count)
            PC_FAIL("%s: chain %u counts %u nodes but holds %u", name, i, chains[i].count, len);
    }
    uint64_t entries = pc_coll_entries(coll);
    if (entries != count)
        PC_FAIL("%s: %" PRIu64 " entries counted, %" PRIu64 " found", name, entries, count);
    return 0;
}

int pc__test_verify(pc_cache *c, char *msg, size_t msglen)
{
    int rc = pc_enter(c);
    if (rc != 0)
        return rc;
    if ((rc = pc_verify_chunks(c, msg, msglen)) != 0)
        return rc;
    for (unsigned i = 0; i < c->ncoll; i++)
        if ((rc = pc_verify_coll(&c->coll[i], msg, msglen)) != 0)
            return rc;
    if (msglen > 0)
        msg[0] = '\0';
    return 0;
}

void pc__test_free_counts(pc_cache *c, uint64_t *private_cells, uint64_t *global_cells)
{
    uint64_t p = 0, g = 0;
    for (unsigned i = 0; i < c->nclasses; i++) {
        p += c->cls != NULL ? c->cls[i].free_count : 0;
        g += c->hdr->pool[i].count;
    }
    *private_cells = p;
    *global_cells = g;
}

/* Cells on the list at head, walked with a bound; the walk stops at a cell
 * of another class. */
static uint64_t pc_count_list(const pc_cache *c, pc_off head, unsigned cls, uint64_t bound)
{
    uint64_t n = 0;
    for (pc_off o = head; o != 0 && n < bound; n++) {
        const struct pc_free_shm *f = pc_cell(c, o);
        if (f == NULL || f->cls != cls)
            break;
        o = f->next;
    }
    return n;
}

void pc__test_arena_census(pc_cache *c, pc_arena_census *out)
{
    struct pc_header_shm *h = c->hdr;
    pc_arena_census m;
    memset(&m, 0, sizeof m);
    uint64_t bound = pc_class_cells_bound(c);
    const uint64_t *tab = pc_at(c, h->chunk_tab_off);
    uint64_t len = atomic_load(&h->chunk_tab_len);
    for (uint64_t i = 0; i < len && i < h->chunk_tab_cap; i++) {
        unsigned cls = (unsigned)(tab[i] & 0xff);
        if (cls < c->nclasses && pc_chunk_e_off(tab[i]) != 0) { /* 0: not carved (yet) */
            uint64_t clen = pc_chunk_e_len(tab[i]);
            m.carved += clen / c->class_size[cls];
            m.carved_bytes += clen / c->class_size[cls] * c->class_size[cls];
        }
    }
    for (unsigned k = 0; k < c->nclasses; k++) {
        uint64_t n = pc_count_list(c, h->pool[k].head, k, bound);
        m.pooled += n;
        m.free_bytes += n * c->class_size[k];
    }
    uint32_t hwm = atomic_load(&h->proc_hwm);
    for (uint32_t i = 1; i <= hwm && i < PC_MAX_PROCS; i++) {
        uint64_t off = atomic_load(&h->procs[i].alloc_off);
        if (off == 0)
            continue;
        const struct pc_alloc_shm *a = pc_at(c, off);
        bool mine = i == c->slot && c->token != 0;
        for (unsigned k = 0; k < c->nclasses; k++) {
            uint64_t n = pc_count_list(c, a[k].free_head, k, bound);
            if (a[k].bump != 0 && a[k].end > a[k].bump)
                n += (a[k].end - a[k].bump) / (c->class_size[k] >> PC_OFF_SHIFT);
            m.on_slots += n;
            if (mine) {
                m.own_slot_cells += n;
                m.free_bytes += n * c->class_size[k];
            }
        }
        m.slots_held += atomic_load(&h->procs[i].token) != 0;
    }
    *out = m;
}

int pc__test_hold_pool_lock(pc_cache *c, size_t bytes, int stage)
{
    int rc = pc_enter(c);
    if (rc != 0)
        return rc;
    int cls = pc_class_for(c, bytes);
    if (cls < 0)
        return PC_EINVAL;
    /* a cell of our own on the private stack, for the give */
    pc_off mine = pc_alloc(c, bytes);
    if (mine == 0)
        return PC_ENOMEM;
    pc_free(c, mine);
    struct pc_pool_shm *pool = &c->hdr->pool[cls];
    struct pc_alloc_shm *L = &c->cls[cls];
    if (pc_lock_word(c, &pool->lock) != 0)
        return PC_EINVAL; /* the test wants a clean start */
    pc_off *from = stage == 2 ? &pool->head : &L->free_head;
    pc_off *to = stage == 2 ? &L->free_head : &pool->head;
    if (stage == 0)
        return 0;
    pc_off x = *from;
    struct pc_free_shm *f = pc_cell(c, x);
    if (f == NULL)
        return PC_ENOTFOUND; /* stage 2 on an empty pool */
    pool->inflight_list = (uint64_t)((unsigned char *)&L->free_head - c->base);
    pool->inflight = x;
    *from = f->next; /* unlinked, not yet linked: only inflight names it */
    (void)to;
    return 0;
}

unsigned pc__test_reap_dead(pc_cache *c)
{
    if (pc_enter(c) != 0)
        return 0;
    return pc_procs_reap(c);
}
