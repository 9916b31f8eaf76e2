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
 * pool per class, behind its own lock (pool.c), rebalances: a
 * process whose private stack grows past PC_DONATE_AT hands a batch over;
 * one that runs dry takes a batch before carving a new chunk. The private
 * state lives in the process's slot in shared memory, so the cells a dead
 * process held go back to the pools (pool.c, pc_slot_reap).
 *
 * The memory figures (pc_mem_classes, and pc_mem_snapshot for
 * pc_mem_stats_get and the eviction ahead of need) are read here, next to
 * the state they sum.
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

/* Every chunk of a small class spans PC_CHUNK_TARGET bytes (its tail, less
 * than one cell, unused), so a chunk that changes class (rebalance.c) holds
 * as many cells as a fresh chunk of its new class would. */
uint64_t pc_chunk_bytes(uint32_t cell)
{
    return cell >= PC_CHUNK_TARGET ? cell : PC_CHUNK_TARGET;
}

void pc_bump_set(struct pc_alloc_shm *L, pc_off first, pc_off last)
{
    L->end = 0; /* never a range mixing two chunks, whenever this dies */
    PC_CRASH_ORDER();
    L->bump = first;
    PC_CRASH_ORDER();
    L->end = last;
    PC_CRASH_ORDER();
}

/* Carves a new chunk for class cls and stamps every cell's byte 0. The
 * slot's carving mark names the chunk from the moment it is carved until it
 * is this process's bump range, so a death at any point leaves it to the
 * reaper (pool.c) instead of leaking it. */
static int pc_carve_chunk(pc_cache *c, unsigned cls)
{
    struct pc_header_shm *h = c->hdr;
    struct pc_proc_shm *me = &h->procs[c->slot];
    uint32_t cell = c->class_size[cls];
    uint64_t bytes = pc_chunk_bytes(cell);
    /* the cap of pc_set_maxmemory: racing carvers may pass it by a chunk each */
    uint64_t cap = atomic_load_explicit(&h->maxmemory, memory_order_relaxed);
    if (cap != 0 && atomic_load_explicit(&h->chunk_bytes, memory_order_relaxed) + bytes > cap)
        return PC_ENOMEM;
    uint64_t slot = atomic_fetch_add(&h->chunk_tab_len, 1);
    if (slot >= h->chunk_tab_cap) {
        atomic_fetch_sub(&h->chunk_tab_len, 1);
        return PC_ENOMEM;
    }
    uint64_t *tab = pc_at(c, h->chunk_tab_off);
    me->carving_tab = slot;
    me->carving_cls = cls;
    me->carving_from = 0;
    me->carving_len8 = (uint32_t)(bytes >> 3);
    PC_CRASH_ORDER();
    uint64_t off = pc_region_carve(c, bytes, PC_CELL_ALIGN);
    if (off == 0) {
        /* leave a harmless empty entry: class 0xff marks "no chunk" */
        atomic_store_explicit((_Atomic uint64_t *)&tab[slot], 0xff, memory_order_release);
        return PC_ENOMEM;
    }
    /* a death between the carve and this store leaks the chunk's bytes
     * (the tab entry stays 0, "no chunk"): one store's window */
    me->carving = (pc_off)(off >> PC_OFF_SHIFT);
    PC_CRASH_ORDER();
    pc_region_populate(c, off, bytes);
    pc_chunk_publish(c, slot, off, bytes, cls, 0);
    pc_bump_set(&c->cls[cls], (pc_off)(off >> PC_OFF_SHIFT),
                (pc_off)((off + bytes / cell * cell) >> PC_OFF_SHIFT));
    me->carving = 0;
    return 0;
}

void pc_chunk_publish(pc_cache *c, uint64_t slot, uint64_t off, uint64_t bytes, unsigned cls,
                      unsigned from)
{
    struct pc_header_shm *h = c->hdr;
    uint64_t *tab = pc_at(c, h->chunk_tab_off);
    uint32_t cell = c->class_size[cls];
    /* the stamps of a fresh chunk miss the cache one line after another;
     * asked for a few cells ahead, the misses overlap instead */
    unsigned char *p = pc_at(c, off);
    for (uint64_t o = 0; o + cell <= bytes; o += cell) {
        __builtin_prefetch(p + o + 8 * (uint64_t)cell, 1, 3);
        p[o] = (uint8_t)cls;
    }
    uint64_t e = pc_chunk_entry(off, bytes, cls);
    uint64_t was =
        atomic_exchange_explicit((_Atomic uint64_t *)&tab[slot], e, memory_order_acq_rel);
    if (was == e)
        return;
    atomic_fetch_add_explicit(&h->class_chunks[cls], 1, memory_order_relaxed);
    if (from != 0) {
        atomic_fetch_sub_explicit(&h->class_chunks[from - 1], 1, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&h->chunks, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&h->chunk_bytes, bytes, memory_order_relaxed);
    }
}

/* A refused allocation: counted per class, and, at most once a minute per
 * cache, a warning that says what the free memory is doing (the memory
 * doctor's words: which class starves while how much sits free elsewhere). */
void pc_arena_starved(pc_cache *c, unsigned cls)
{
    struct pc_header_shm *h = c->hdr;
    atomic_fetch_add_explicit(&h->class_starved[cls], 1, memory_order_relaxed);
    int64_t now = pc_mono_ms(),
            last = atomic_load_explicit(&h->starved_logged_ms, memory_order_relaxed);
    if (last != 0 && now - last < 60000)
        return;
    if (!atomic_compare_exchange_strong(&h->starved_logged_ms, &last, now))
        return;
    uint64_t free_elsewhere = 0;
    for (unsigned k = 0; k < c->nclasses; k++)
        if (k != cls)
            free_elsewhere += h->pool[k].count * c->class_size[k]; /* racy: a hint */
    pc_log(c, PC_LOG_WARN,
           "pcache: memory: class %u (%u-byte cells) is starved: no free cell and no free chunk; "
           "%llu bytes are free in other classes' partly used chunks (a chunk moves only when all "
           "its cells are free: raise mem_mb, or delete keys of those sizes)",
           cls, c->class_size[cls], (unsigned long long)free_elsewhere);
}

/* Hot path: a private pop or a bump; no lock, no atomic. report: a
 * refusal is counted and may log (pc_arena_starved); the evicting writer
 * (evict.c) reports only its last try. */
static pc_off pc_alloc_impl(pc_cache *c, size_t bytes, bool report)
{
    PC_ASSERT(c, I5, pc_dbg_bucket_locks + pc_dbg_chain_locks == 0);
    int cls = pc_class_for(c, bytes);
    if (cls < 0)
        return 0;
    struct pc_alloc_shm *L = &c->cls[cls];
    for (;;) {
        if (L->free_head != 0) {
            pc_off off = L->free_head;
            struct pc_free_shm *f = pc_cell(c, off);
            PC_ASSERT(c, I1, f != NULL);
            PC_ASSERT(c, I2, f->cls == cls); /* a free cell's link left byte 0 alone */
            L->free_head = f->next;
            L->free_count--;
            PC_CRASH_ORDER(); /* unlinked before the caller writes bytes 4..7 */
            return off;
        }
        if (L->bump != 0 && L->bump < L->end) {
            pc_off off = L->bump;
            PC_ASSERT(c, I2, *(const uint8_t *)pc_cell(c, off) == cls); /* stamped at carve */
            L->bump += c->class_size[cls] >> PC_OFF_SHIFT;
            PC_CRASH_ORDER(); /* out of the bump range before the caller writes it */
            return off;
        }
        if (pc_pool_take(c, (unsigned)cls) > 0)
            continue;
        if (pc_carve_chunk(c, (unsigned)cls) != 0 && pc_arena_reclaim(c, (unsigned)cls) != 0) {
            if (report)
                pc_arena_starved(c, (unsigned)cls);
            return 0;
        }
    }
}

pc_off pc_alloc(pc_cache *c, size_t bytes)
{
    return pc_alloc_impl(c, bytes, true);
}

pc_off pc_alloc_quiet(pc_cache *c, size_t bytes)
{
    return pc_alloc_impl(c, bytes, false);
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
    struct pc_alloc_shm *L = &c->cls[cls];
    f->next = L->free_head;
    PC_CRASH_ORDER(); /* linked before it is published: a death between leaks one cell */
    L->free_head = off;
    L->free_count++;
    if (L->free_count > PC_DONATE_AT)
        pc_pool_give(c, cls, PC_BATCH * 2);
}

/* After fork: forget the inherited slot's state. It is the parent's (it
 * lives in the parent's process slot); the child claims a slot of its own. */
void pc_arena_drop_local(pc_cache *c)
{
    c->cls = NULL;
}

/* ---- what the arena and the region hold (pc_mem_stats_get, pc_mem_classes) -- */

void pc_mem_snapshot(pc_cache *c, pc_mem_stats *out)
{
    const struct pc_header_shm *h = c->hdr;
    uint64_t bh = atomic_load(&h->bump_huge), bp = atomic_load(&h->bump_plain);
    pc_mem_stats m;
    memset(&m, 0, sizeof m);
    m.tier = h->tier;
    m.pinned = h->pinned;
    m.hugepage_bytes = (size_t)h->huge_end;
    /* a bump pointer never passes its extent's end (region.c), and the
     * subtraction is still guarded so free space can never wrap */
    m.hugepage_free = (size_t)(h->huge_end > bh ? h->huge_end - bh : 0);
    m.plain_bytes = (size_t)(h->plain_end - h->huge_end);
    m.plain_free = (size_t)(h->plain_end > bp ? h->plain_end - bp : 0);
    m.chunks = atomic_load(&h->chunks);
    m.chunk_bytes = atomic_load(&h->chunk_bytes);
    m.table_bytes = atomic_load(&h->table_bytes);
    pc_mem_class cl[PC_MAX_CLASSES];
    unsigned n = 0;
    (void)pc_mem_classes(c, cl, PC_MAX_CLASSES, &n);
    for (unsigned i = 0; i < n; i++) {
        m.used_cell_bytes += (cl[i].cells - cl[i].free_cells) * cl[i].cell_bytes;
        m.free_cell_bytes += cl[i].free_cells * cl[i].cell_bytes;
        m.starved += cl[i].starved;
    }
    m.maxmemory = atomic_load_explicit(&h->maxmemory, memory_order_relaxed);
    *out = m;
}

int pc_mem_classes(pc_cache *c, pc_mem_class *out, unsigned cap, unsigned *n)
{
    if (c == NULL || out == NULL || n == NULL)
        return PC_EINVAL;
    struct pc_header_shm *h = c->hdr;
    uint64_t free_cells[PC_MAX_CLASSES] = {0};
    uint32_t hwm = atomic_load_explicit(&h->proc_hwm, memory_order_acquire);
    for (uint32_t i = 1; i <= hwm && i < PC_MAX_PROCS; i++) {
        uint64_t off = atomic_load_explicit(&h->procs[i].alloc_off, memory_order_acquire);
        if (off == 0)
            continue;
        const struct pc_alloc_shm *a = pc_at(c, off);
        for (unsigned k = 0; k < c->nclasses; k++) {
            pc_off bump = a[k].bump, end = a[k].end; /* racy reads: a snapshot */
            uint32_t step = c->class_size[k] >> PC_OFF_SHIFT;
            free_cells[k] += a[k].free_count;
            if (bump != 0 && end > bump && step > 0)
                free_cells[k] += (end - bump) / step;
        }
    }
    unsigned k2 = 0;
    for (unsigned k = 0; k < c->nclasses && k2 < cap; k++) {
        uint64_t chunks = atomic_load_explicit(&h->class_chunks[k], memory_order_relaxed);
        uint64_t starved = atomic_load_explicit(&h->class_starved[k], memory_order_relaxed);
        if (chunks == 0 && starved == 0)
            continue;
        uint32_t cell = c->class_size[k];
        uint64_t cells = chunks * (pc_chunk_bytes(cell) / cell);
        uint64_t fr = free_cells[k] + h->pool[k].count;
        out[k2++] = (pc_mem_class){.cell_bytes = cell,
                                   .chunks = chunks,
                                   .cells = cells,
                                   .free_cells = fr < cells ? fr : cells,
                                   .starved = starved};
    }
    *n = k2;
    return 0;
}
