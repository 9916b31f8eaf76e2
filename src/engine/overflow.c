/*
 * overflow.c - the side chains that take keys whose bucket is full.
 *
 * A collection has PC_CHAINS chains; a key's chain is fixed by its hash
 * (hash & (PC_CHAINS-1)), independent of the table's size, so growth never
 * moves a key between chains. Chains are read and written only under their
 * lock: a lookup reaches a chain only after a stable miss on a bucket that
 * carries PC_USED_OVF, which is rare once growth keeps up, so a lock here
 * costs nothing on the hot path and spares the chain a second seqlock.
 *
 * Nodes are 16-byte arena cells whose byte 0 stays the class id (I2): the
 * link lives at bytes 4..7. The original put its next pointer at offset 0
 * and, once overflow met the expiry sweep, wrote pointer bytes over class
 * ids and corrupted the allocator.
 *
 * The maintenance process drains chains back into buckets that have room
 * (pc_overflow_drain, growth.c), so overflow empties once growth catches
 * up. This file takes no bucket lock: its callers hold the one it needs.
 */
#include "pc_int.h"

#include <inttypes.h>

#define PC_CHAIN_WALK_MAX (1u << 24) /* a chain longer than this is corrupt */

void pc_chain_lock(pc_coll *coll, struct pc_chain_shm *ch)
{
    PC_ASSERT(coll->c, I7, pc_dbg_chain_locks == 0);
    if (pc_lock_word(coll->c, &ch->lock) == PC_LOCK_RECOVERED)
        pc_chain_repair(coll, ch);
    PC_DEBUG_ONLY(pc_dbg_chain_locks++);
}

void pc_chain_unlock(struct pc_chain_shm *ch)
{
    PC_DEBUG_ONLY(pc_dbg_chain_locks--);
    pc_unlock_word(&ch->lock);
}

/* Whether this process holds the lock of the bucket hash h routes to: the
 * set of chain nodes routing to a bucket changes only under that bucket's
 * lock, which keeps its PC_USED_OVF flag sound (I4). PC_ASSERT only. */
static bool pc_route_locked(pc_coll *coll, uint64_t h)
{
    uint64_t idx = pc_route_index(pc_route_load(coll->shm), coll->shm->log2_initial, h);
    return atomic_load_explicit(&pc_bucket_at(coll, idx)->lock, memory_order_relaxed) ==
           coll->c->token;
}

pc_off pc_chain_find(pc_coll *coll, struct pc_chain_shm *ch, const void *key, size_t klen,
                     pc_off *prev)
{
    const pc_cache *c = coll->c;
    uint64_t h = pc_key_hash(key, klen);
    uint8_t tag = (uint8_t)(h >> 56);
    pc_off p = 0;
    for (pc_off off = ch->head; off != 0;) {
        struct pc_ovf_node_shm *n = pc_ovf_node(c, off);
        if (n == NULL)
            break;
        if (n->tag == tag && n->hlo == (uint32_t)h) {
            const struct pc_rec_shm *r = pc_cell(c, n->rec);
            if (r != NULL && pc_rec_key_eq(c, r, key, klen)) {
                *prev = p;
                return off;
            }
        }
        p = off;
        off = n->next;
    }
    return 0;
}

void pc_chain_push(pc_coll *coll, struct pc_chain_shm *ch, pc_off node, pc_off rec, uint64_t h,
                   int64_t expires)
{
    struct pc_ovf_node_shm *n = pc_cell(coll->c, node);
    /* n->cls is left alone (I2) */
    PC_ASSERT(coll->c, I2, pc_class_bytes(coll->c, n->cls) == sizeof *n);
    PC_ASSERT(coll->c, I4, pc_route_locked(coll, h));
    n->tag = (uint8_t)(h >> 56);
    n->pad = 0;
    n->rec = rec;
    n->hlo = (uint32_t)h;
    n->next = ch->head;
    ch->head = node;
    ch->count++;
    uint32_t hint = pc_hint_of(expires);
    if (hint != 0 && (ch->hint == 0 || hint < ch->hint))
        ch->hint = hint;
    PC_STAT_ADD(coll, ovf_in, 1);
}

void pc_chain_unlink(pc_coll *coll, struct pc_chain_shm *ch, pc_off prev, pc_off node)
{
    struct pc_ovf_node_shm *n = pc_cell(coll->c, node);
    PC_ASSERT(coll->c, I4, pc_route_locked(coll, n->hlo));
    if (prev == 0)
        ch->head = n->next;
    else
        ((struct pc_ovf_node_shm *)pc_cell(coll->c, prev))->next = n->next;
    ch->count--;
    PC_STAT_ADD(coll, ovf_out, 1);
}

bool pc_chain_routes_to(pc_coll *coll, struct pc_chain_shm *ch, uint64_t route, uint64_t idx)
{
    unsigned l2 = coll->shm->log2_initial;
    for (pc_off off = ch->head; off != 0;) {
        struct pc_ovf_node_shm *n = pc_ovf_node(coll->c, off);
        if (n == NULL)
            break;
        if (pc_route_index(route, l2, n->hlo) == idx)
            return true;
        off = n->next;
    }
    return false;
}

/* Whether any chain holds a key routing to bucket idx. Keys of idx satisfy
 * h = idx (mod m), m being idx's modulus under route, so they sit in chain
 * idx mod PC_CHAINS when m >= PC_CHAINS, else in the chains idx + k*m. The
 * caller holds idx's bucket lock and no chain lock: every change to the
 * set of nodes routing to idx needs that bucket lock, so the answer is
 * stable while it is held; chains are locked one at a time. */
bool pc_bucket_has_overflow(pc_coll *coll, uint64_t route, uint64_t idx)
{
    unsigned l2 = coll->shm->log2_initial;
    uint64_t size = 1ull << (l2 + (unsigned)(route >> 32));
    uint64_t split = route & 0xffffffffu;
    uint64_t m = (idx < split || idx >= size) ? 2 * size : size;
    struct pc_chain_shm *chains = pc_at(coll->c, coll->shm->chains_off);
    uint64_t first = m >= PC_CHAINS ? (idx & (PC_CHAINS - 1)) : idx; /* idx < m */
    uint64_t step = m >= PC_CHAINS ? PC_CHAINS : m;
    for (uint64_t j = first; j < PC_CHAINS; j += step) {
        struct pc_chain_shm *ch = &chains[j];
        if (ch->count == 0)
            continue;
        pc_chain_lock(coll, ch);
        bool hit = pc_chain_routes_to(coll, ch, route, idx);
        pc_chain_unlock(ch);
        if (hit)
            return true;
    }
    return false;
}

/* A dead process held the chain lock. A push or unlink is a few stores, so
 * the chain is walked and cut at the first node that is not a plausible
 * node; what was cut off leaks (logged). */
void pc_chain_repair(pc_coll *coll, struct pc_chain_shm *ch)
{
    uint32_t n = 0;
    pc_off *link = &ch->head;
    while (*link != 0 && n < PC_CHAIN_WALK_MAX) {
        struct pc_ovf_node_shm *nd = pc_ovf_node(coll->c, *link);
        if (nd == NULL || pc_cell(coll->c, nd->rec) == NULL) {
            *link = 0;
            break;
        }
        n++;
        link = &nd->next;
    }
    pc_log(coll->c, PC_LOG_WARN,
           "pcache: %s: repaired an overflow chain after a dead writer "
           "(%u nodes, count was %u)",
           coll->shm->name, n, ch->count);
    ch->count = n;
}
