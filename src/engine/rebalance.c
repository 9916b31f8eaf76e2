/*
 * rebalance.c - fully free chunks move to the class that needs them.
 *
 * Cells are carved per class in chunks, and a class keeps its chunks: after
 * 16 MiB of 1000-byte values were deleted, their cells sat on the
 * 1000-byte class's pool and every write of another size was refused. Now a
 * writer that finds its class without a cell and the region without room
 * for a chunk (pc_alloc) calls pc_arena_reclaim, which
 *
 *  1. gives this process's own free cells of every class back to the pools
 *     (the rest of its bump chunks first), so they can complete a chunk;
 *  2. walks each other class's pool under its lock, counting the pooled
 *     cells of every chunk (a sorted copy of the chunk table, built in
 *     process memory before any lock), and picks a chunk all of whose cells
 *     are on the pool and that holds at least one cell of the new class;
 *  3. marks it on its process slot (carving, carving_from), takes its cells
 *     off the pool (one store each, the list stays well formed), unlocks;
 *  4. re-stamps the chunk's class bytes for the new class, writes its chunk
 *     table entry, and makes it its bump range; clears the mark.
 *
 * The lock-free read protocol holds (I2): a chunk is re-classed only while
 * every cell of it is free, so no bucket slot or chain node names one of
 * them; a reader that read a slot before the record was removed holds a
 * stale offset, exactly as when a freed cell is reused in its own class, and
 * the removal's version bracket makes it retry. What is new is that its
 * stale offset may now land inside a cell of another size, so the class
 * byte it reads may be any byte: every lock-free copy takes its room from
 * pc_rec_room (that byte read once, clamped to the region's end), so the
 * garbage it copies stays inside the region and the version check drops it.
 *
 * A death at any step leaves the mark; the reaper (pool.c) drops the
 * chunk's cells from the old pool again (idempotent), finishes the
 * re-stamp and frees the chunk's cells, once. The work is bounded by the
 * pooled cells; a process that found nothing does not scan again until the
 * pools have grown by 64 cells or a second has passed. A partly used chunk
 * is first emptied by drain.c (its residents move, or are evicted); a chunk
 * of a small class (about 64 KiB) cannot serve a class whose cell is
 * larger.
 */
#include "pc_int.h"

#include <stdlib.h>

struct pc_chunk_ref {
    uint64_t off, len, tab;
};

static int pc_ref_cmp(const void *a, const void *b)
{
    const struct pc_chunk_ref *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The chunk holding byte offset off, or -1. */
static long pc_ref_find(const struct pc_chunk_ref *r, size_t n, uint64_t off)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r[mid].off + r[mid].len <= off)
            lo = mid + 1;
        else if (r[mid].off > off)
            hi = mid;
        else
            return (long)mid;
    }
    return -1;
}

/* Step 1: this process's bump remainders and free stacks go to the pools. */
static void pc_give_all(pc_cache *c)
{
    for (unsigned k = 0; k < c->nclasses; k++) {
        struct pc_alloc_shm *L = &c->cls[k];
        uint32_t step = c->class_size[k] >> PC_OFF_SHIFT;
        while (L->bump != 0 && L->end > L->bump && L->end - L->bump >= step) {
            pc_off x = L->end - step;
            L->end = x; /* shrink, then push: never in both */
            PC_CRASH_ORDER();
            struct pc_free_shm *f = pc_cell(c, x);
            if (f == NULL)
                break;
            f->next = L->free_head;
            PC_CRASH_ORDER();
            L->free_head = x;
            L->free_count++;
            PC_CRASH_ORDER();
        }
        if (L->free_count > 0)
            pc_pool_give(c, k, L->free_count);
    }
}

static uint64_t pc_pooled(const pc_cache *c)
{
    uint64_t n = 0;
    for (unsigned k = 0; k < c->nclasses; k++)
        n += c->hdr->pool[k].count; /* racy sum: a hint */
    return n;
}

/* Step 2 and 3 for pool j: a fully pooled chunk that fits class cls, taken
 * off the pool under its lock. Returns its index in refs or -1. */
static long pc_take_free_chunk(pc_cache *c, unsigned j, unsigned cls, struct pc_chunk_ref *refs,
                               size_t n, uint32_t *count)
{
    struct pc_pool_shm *pool = &c->hdr->pool[j];
    uint32_t cell = c->class_size[j];
    long pick = -1;
    memset(count, 0, n * sizeof *count);
    pc_pool_lock(c, pool, j);
    uint64_t bound = pc_class_cells_bound(c);
    for (pc_off o = pool->head; o != 0 && bound-- > 0;) {
        const struct pc_free_shm *f = pc_cell(c, o);
        if (f == NULL || f->cls != j)
            break;
        long r = pc_ref_find(refs, n, (uint64_t)o << PC_OFF_SHIFT);
        if (r >= 0 && ++count[r] == refs[r].len / cell && refs[r].len >= c->class_size[cls] &&
            pick < 0)
            pick = r;
        o = f->next;
    }
    if (pick >= 0) {
        struct pc_proc_shm *me = &c->hdr->procs[c->slot];
        me->carving_tab = refs[pick].tab;
        me->carving_cls = cls;
        me->carving_from = j + 1;
        me->carving_len8 = (uint32_t)(refs[pick].len >> 3);
        PC_CRASH_ORDER();
        me->carving = (pc_off)(refs[pick].off >> PC_OFF_SHIFT);
        PC_CRASH_ORDER();
        uint64_t got = pc_pool_drop_range_locked(c, j, refs[pick].off, refs[pick].len);
        PC_ASSERT(c, I2, got == refs[pick].len / cell);
        (void)got;
    }
    pc_pool_unlock(pool);
    return pick;
}

int pc_arena_reclaim(pc_cache *c, unsigned cls)
{
    struct pc_header_shm *h = c->hdr;
    uint64_t pooled = pc_pooled(c);
    int64_t now = pc_mono_ms();
    if (c->reclaim_seen != 0 && pooled < c->reclaim_seen + 64 && now - c->reclaim_at_ms < 1000)
        return PC_ENOMEM; /* nothing new since the last fruitless look */
    pc_give_all(c);
    uint64_t len = atomic_load_explicit(&h->chunk_tab_len, memory_order_acquire);
    if (len > h->chunk_tab_cap)
        len = h->chunk_tab_cap;
    struct pc_chunk_ref *refs = malloc((len + 1) * sizeof *refs);
    uint32_t *count = malloc((len + 1) * sizeof *count);
    int rc = PC_ENOMEM;
    if (refs == NULL || count == NULL)
        goto out;
    const _Atomic uint64_t *tab = pc_at(c, h->chunk_tab_off);
    size_t n = 0;
    for (uint64_t i = 0; i < len; i++) {
        uint64_t e = atomic_load_explicit(&tab[i], memory_order_acquire);
        unsigned k = (unsigned)(e & 0xff);
        if (k >= c->nclasses || pc_chunk_e_off(e) == 0)
            continue;
        refs[n++] = (struct pc_chunk_ref){pc_chunk_e_off(e), pc_chunk_e_len(e), i};
    }
    qsort(refs, n, sizeof *refs, pc_ref_cmp);
    for (unsigned j = 0; j < c->nclasses; j++) {
        if (j == cls || h->pool[j].count == 0 ||
            h->pool[j].count < pc_chunk_bytes(c->class_size[j]) / c->class_size[j])
            continue;
        long r = pc_take_free_chunk(c, j, cls, refs, n, count);
        if (r < 0)
            continue;
        /* step 4: every cell of it is ours; stamp it for cls */
        uint64_t off = refs[r].off, bytes = refs[r].len;
        pc_chunk_publish(c, refs[r].tab, off, bytes, cls, j + 1);
        uint64_t used = bytes / c->class_size[cls] * c->class_size[cls];
        pc_bump_set(&c->cls[cls], (pc_off)(off >> PC_OFF_SHIFT),
                    (pc_off)((off + used) >> PC_OFF_SHIFT));
        h->procs[c->slot].carving = 0;
        c->reclaim_seen = 0;
        rc = 0;
        goto out;
    }
    c->reclaim_seen = pc_pooled(c) | 1;
    c->reclaim_at_ms = now;
out:
    free(count);
    free(refs);
    return rc;
}
