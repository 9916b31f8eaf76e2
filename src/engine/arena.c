/*
 * arena.c - the slab arena: records and overflow nodes live in fixed-size
 * cells carved from chunks of the shared region. Chunks are never returned
 * (the lock-free read path depends on it, I1/I2) and byte 0 of every cell is
 * its class id, stamped at carve time, so a reader holding a stale offset
 * can always bound what it copies.
 *
 * Allocation state is per process - a bump pointer into the current chunk
 * and a private free stack per class - so the fast path takes no lock and
 * no atomic (one shared append point costs more than it saves). A global
 * pool per class, behind its own lock, rebalances: a
 * process whose private stack grows past PC_DONATE_AT hands a batch over;
 * one that runs dry takes a batch before carving a new chunk.
 *
 * Why our own allocator and not malloc: cells must live in the shared
 * region, keep their class byte forever and never be unmapped; no libc or
 * Debian allocator offers that contract.
 */
#include "pc_int.h"

#define PC_BATCH 32u
#define PC_DONATE_AT (4u * PC_BATCH)

/* Classes: 8-byte steps from 16 to 256 B (a SIP-sized record wastes < 8 B;
 * class 0, 16 B, holds overflow nodes - records are at least 17 B), then
 * ~12.5% steps to 4 KiB, then 25% steps up to the largest record. */
#define PC_SMALL_CLASSES 31u /* 16, 24, ..., 256 */
void pc_arena_classes_init(uint32_t *sizes, uint32_t *n)
{
    uint32_t k = 0;
    uint64_t max_rec = PC_REC_HDR + (uint64_t)PC_KEY_MAX + PC_VALUE_MAX;
    for (uint32_t s = 16; s <= 256; s += 8)
        sizes[k++] = s;
    uint64_t s = 256;
    while (s < max_rec && k < PC_MAX_CLASSES) {
        uint64_t step = s < 4096 ? s / 8 : s / 4;
        s = (s + step + 15) / 16 * 16;
        if (s > max_rec)
            s = (max_rec + 15) / 16 * 16;
        sizes[k++] = (uint32_t)s;
    }
    *n = k;
}

int pc_class_for(const pc_cache *c, size_t bytes)
{
    if (bytes <= 256)
        return bytes <= 16 ? 0 : (int)((bytes + 7) / 8 - 2);
    unsigned lo = PC_SMALL_CLASSES, hi = c->nclasses; /* first class >= bytes */
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (c->class_size[mid] >= bytes)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo < c->nclasses ? (int)lo : -1;
}

uint64_t pc_chunk_bytes(uint32_t cell)
{
    uint32_t cells = cell >= PC_CHUNK_TARGET ? 1 : PC_CHUNK_TARGET / cell;
    return (uint64_t)cells * cell;
}

/* Carves a new chunk for class cls and stamps every cell's byte 0. */
static int pc_carve_chunk(pc_cache *c, unsigned cls)
{
    struct pc_header_shm *h = c->hdr;
    uint32_t cell = c->class_size[cls];
    uint64_t bytes = pc_chunk_bytes(cell);
    uint64_t slot = atomic_fetch_add(&h->chunk_tab_len, 1);
    if (slot >= h->chunk_tab_cap) {
        atomic_fetch_sub(&h->chunk_tab_len, 1);
        return PC_ENOMEM;
    }
    uint64_t off = pc_region_carve(c, bytes, PC_CELL_ALIGN);
    uint64_t *tab = pc_at(c, h->chunk_tab_off);
    if (off == 0) {
        /* leave a harmless empty entry: class 0xff marks "no chunk" */
        atomic_store_explicit((_Atomic uint64_t *)&tab[slot], 0xff, memory_order_release);
        return PC_ENOMEM;
    }
    for (uint64_t o = 0; o < bytes; o += cell)
        *(uint8_t *)pc_at(c, off + o) = (uint8_t)cls;
    atomic_store_explicit((_Atomic uint64_t *)&tab[slot], off << 8 | cls, memory_order_release);
    atomic_fetch_add_explicit(&h->chunks, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->chunk_bytes, bytes, memory_order_relaxed);
    struct pc_local_class *L = &c->cls[cls];
    L->bump = (pc_off)(off >> PC_OFF_SHIFT);
    L->end = (pc_off)((off + bytes) >> PC_OFF_SHIFT);
    return 0;
}

/* Takes a pool's lock. If its holder died mid-push or mid-pop the list may
 * be inconsistent (a cell reachable twice would be handed out twice), so the
 * pool is emptied: its cells leak, which is logged, and nothing is shared. */
static void pc_pool_lock(pc_cache *c, struct pc_pool_shm *pool, unsigned cls)
{
    if (pc_lock_word(c, &pool->lock) == PC_LOCK_RECOVERED) {
        pc_log(c, PC_LOG_WARN,
               "pcache: free pool of class %u abandoned by a dead process: %llu cells leaked", cls,
               (unsigned long long)pool->count);
        pool->head = 0;
        pool->count = 0;
    }
}

/* Moves up to PC_BATCH cells from the global pool to the private stack. */
static unsigned pc_pool_take(pc_cache *c, unsigned cls)
{
    struct pc_pool_shm *pool = &c->hdr->pool[cls];
    if (pool->count == 0) /* racy peek; the lock decides */
        return 0;
    struct pc_local_class *L = &c->cls[cls];
    unsigned n = 0;
    pc_pool_lock(c, pool, cls);
    while (n < PC_BATCH && pool->head != 0) {
        struct pc_free_shm *f = pc_cell(c, pool->head);
        if (f == NULL)
            break;
        PC_ASSERT(c, I2, f->cls == cls);
        pc_off next = f->next;
        f->next = L->free_head;
        L->free_head = pool->head;
        pool->head = next;
        pool->count--;
        n++;
    }
    pc_unlock_word(&pool->lock);
    L->free_count += n;
    return n;
}

static void pc_pool_give(pc_cache *c, unsigned cls, unsigned n)
{
    struct pc_pool_shm *pool = &c->hdr->pool[cls];
    struct pc_local_class *L = &c->cls[cls];
    pc_pool_lock(c, pool, cls);
    while (n-- > 0 && L->free_head != 0) {
        struct pc_free_shm *f = pc_cell(c, L->free_head);
        PC_ASSERT(c, I2, f->cls == cls);
        pc_off next = f->next;
        f->next = pool->head;
        pool->head = L->free_head;
        pool->count++;
        L->free_head = next;
        L->free_count--;
    }
    pc_unlock_word(&pool->lock);
}

/* Hot path: a private pop or a bump; no lock, no atomic. */
pc_off pc_alloc(pc_cache *c, size_t bytes)
{
    PC_ASSERT(c, I5, pc_dbg_bucket_locks + pc_dbg_chain_locks == 0);
    int cls = pc_class_for(c, bytes);
    if (cls < 0)
        return 0;
    struct pc_local_class *L = &c->cls[cls];
    for (;;) {
        if (L->free_head != 0) {
            pc_off off = L->free_head;
            struct pc_free_shm *f = pc_cell(c, off);
            PC_ASSERT(c, I1, f != NULL);
            PC_ASSERT(c, I2, f->cls == cls); /* a free cell's link left byte 0 alone */
            L->free_head = f->next;
            L->free_count--;
            return off;
        }
        if (L->bump != 0 && L->bump < L->end) {
            pc_off off = L->bump;
            PC_ASSERT(c, I2, *(const uint8_t *)pc_cell(c, off) == cls); /* stamped at carve */
            L->bump += c->class_size[cls] >> PC_OFF_SHIFT;
            return off;
        }
        if (pc_pool_take(c, (unsigned)cls) > 0)
            continue;
        if (pc_carve_chunk(c, (unsigned)cls) != 0)
            return 0;
    }
}

void pc_free(pc_cache *c, pc_off off)
{
    PC_ASSERT(c, I5, pc_dbg_bucket_locks + pc_dbg_chain_locks == 0);
    struct pc_free_shm *f = pc_cell(c, off);
    PC_ASSERT(c, I1, f != NULL);
    if (f == NULL)
        return;
    unsigned cls = f->cls;
    PC_ASSERT(c, I2, cls < c->nclasses);
    if (cls >= c->nclasses) {
        /* never corrupt the pool over a bad class byte: log and leak */
        pc_log(c, PC_LOG_ERR, "pcache: free of cell %u with invalid class %u: leaked", off, cls);
        return;
    }
    struct pc_local_class *L = &c->cls[cls];
    f->next = L->free_head;
    L->free_head = off;
    L->free_count++;
    if (L->free_count > PC_DONATE_AT)
        pc_pool_give(c, cls, PC_BATCH * 2);
}

/* After fork: forget the inherited bump chunks and free stacks. They are
 * the parent's; donating them would hand the same cells to two owners. */
void pc_arena_drop_local(pc_cache *c)
{
    memset(c->cls, 0, sizeof c->cls);
}
