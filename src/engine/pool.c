/*
 * pool.c - the global free pools of the arena and what makes them, and the
 * processes' free stacks, survive a SIGKILL at any instruction.
 *
 * A pool is a singly linked list of free cells of one class behind an
 * owner-token lock. A process moves cells between the pool and its own
 * free stack (struct pc_alloc_shm, in its process slot) one at a time, and
 * every move follows the same four stores, each ordered by PC_CRASH_ORDER:
 *
 *     pool.inflight = X; pool.inflight_list = &from.head    (announce)
 *     from.head = X->next                                    (unlink)
 *     X->next = to.head                                      (link)
 *     to.head = X                                            (publish)
 *
 * Both lists stay well formed after every store, and X is always on one of
 * them or named by inflight. So the next holder of a lock taken over from a
 * dead owner (PC_LOCK_RECOVERED) repairs the pool exactly: it cuts the pool
 * list at the first implausible cell (none with this protocol; a check),
 * recounts it, and, when X is on neither the pool nor the list
 * inflight_list names, pushes X onto the pool. Nothing leaks; nothing is
 * reachable twice. (Before this, a taken-over pool was emptied and its cells
 * leaked: 113,581 cells in one FLUSHDB-heavy run with 300 worker deaths.)
 *
 * A slot whose owner died still holds that owner's free stacks and the
 * rest of its bump chunks. Whoever takes the slot over (pc_procs_reap in
 * the maintenance process, or a process claiming it when no free slot is
 * left) first reaps it: every class's bump remainder becomes free-stack
 * cells and the stack moves to the pool, under the pool's lock, with the
 * protocol above. Locks the dead owner held on a pool are taken over on the
 * way, so when the reap ends no lock holds the dead token and nobody will
 * touch the slot's lists but its new owner.
 */
#include "pc_int.h"

#define PC_BATCH 32u

uint64_t pc_class_cells_bound(const pc_cache *c)
{
    /* every cell lies in a carved chunk of at least 16 bytes */
    return atomic_load_explicit(&c->hdr->chunk_bytes, memory_order_relaxed) / 16u + 1u;
}

static struct pc_alloc_shm *pc_slot_alloc(const pc_cache *c, uint32_t idx)
{
    uint64_t off = atomic_load_explicit(&c->hdr->procs[idx].alloc_off, memory_order_acquire);
    return off == 0 ? NULL : pc_at(c, off);
}

/* Whether a free-list cell is plausible for class cls: inside the region,
 * aligned, its class byte cls. */
static struct pc_free_shm *pc_free_cell(const pc_cache *c, pc_off off, unsigned cls)
{
    struct pc_free_shm *f = pc_cell(c, off);
    if (f == NULL || (uint64_t)off * PC_CELL_ALIGN + c->class_size[cls] > c->region_bytes ||
        f->cls != cls)
        return NULL;
    return f;
}

/* Whether x is on the list starting at head (bounded walk). */
static bool pc_list_has(const pc_cache *c, pc_off head, pc_off x, unsigned cls)
{
    uint64_t bound = pc_class_cells_bound(c);
    for (pc_off o = head; o != 0 && bound-- > 0;) {
        if (o == x)
            return true;
        const struct pc_free_shm *f = pc_free_cell(c, o, cls);
        if (f == NULL)
            return false;
        o = f->next;
    }
    return false;
}

/* Repairs a pool whose lock was taken from a dead holder (see the top). */
static void pc_pool_repair(pc_cache *c, struct pc_pool_shm *pool, unsigned cls)
{
    uint64_t bound = pc_class_cells_bound(c), n = 0;
    pc_off prev = 0;
    for (pc_off o = pool->head; o != 0; n++) {
        struct pc_free_shm *f = pc_free_cell(c, o, cls);
        if (f == NULL || n >= bound) {
            pc_log(c, PC_LOG_ERR, "pcache: free pool of class %u cut at a bad cell %u", cls, o);
            if (prev == 0)
                pool->head = 0;
            else
                ((struct pc_free_shm *)pc_cell(c, prev))->next = 0;
            break;
        }
        prev = o;
        o = f->next;
    }
    pc_off x = pool->inflight;
    struct pc_free_shm *fx = x != 0 ? pc_free_cell(c, x, cls) : NULL;
    if (fx != NULL && !pc_list_has(c, pool->head, x, cls)) {
        const pc_off *other = NULL;
        uint64_t lo = pool->inflight_list;
        if (lo != 0 && lo + sizeof(pc_off) <= c->region_bytes && lo % sizeof(pc_off) == 0)
            other = pc_at(c, lo);
        if (other == NULL || !pc_list_has(c, *other, x, cls)) {
            fx->next = pool->head;
            pool->head = x;
            n++;
        }
    }
    pool->inflight = 0;
    pool->inflight_list = 0;
    pool->count = n;
    pc_log(c, PC_LOG_WARN,
           "pcache: free pool of class %u taken over from a dead process: %llu cells kept", cls,
           (unsigned long long)n);
}

void pc_pool_lock(pc_cache *c, struct pc_pool_shm *pool, unsigned cls)
{
    if (pc_lock_word(c, &pool->lock) == PC_LOCK_RECOVERED)
        pc_pool_repair(c, pool, cls);
}

void pc_pool_unlock(struct pc_pool_shm *pool)
{
    pool->inflight = 0;
    pool->inflight_list = 0;
    pc_unlock_word(&pool->lock);
}

/* One move of the head cell of the list at *from onto the list at *to, in
 * the order the top of the file gives. list_off is the byte offset of the
 * free-stack head that is not the pool's. Caller holds the pool lock. */
static bool pc_move_one(pc_cache *c, struct pc_pool_shm *pool, pc_off *from, pc_off *to,
                        uint64_t list_off, unsigned cls)
{
    pc_off x = *from;
    struct pc_free_shm *f = pc_free_cell(c, x, cls);
    if (f == NULL)
        return false;
    PC_ASSERT(c, I2, f->cls == cls);
    pool->inflight_list = list_off;
    PC_CRASH_ORDER();
    pool->inflight = x;
    PC_CRASH_ORDER();
    *from = f->next;
    PC_CRASH_ORDER();
    f->next = *to;
    PC_CRASH_ORDER();
    *to = x;
    PC_CRASH_ORDER();
    return true;
}

static uint64_t pc_list_off(const pc_cache *c, const pc_off *head)
{
    return (uint64_t)((const unsigned char *)head - c->base);
}

/* Moves up to PC_BATCH cells from the global pool to the private stack. */
unsigned pc_pool_take(pc_cache *c, unsigned cls)
{
    struct pc_pool_shm *pool = &c->hdr->pool[cls];
    if (pool->count == 0) /* racy peek; the lock decides */
        return 0;
    struct pc_alloc_shm *L = &c->cls[cls];
    unsigned n = 0;
    pc_pool_lock(c, pool, cls);
    uint64_t lo = pc_list_off(c, &L->free_head);
    while (n < PC_BATCH && pool->head != 0 &&
           pc_move_one(c, pool, &pool->head, &L->free_head, lo, cls)) {
        pool->count--;
        L->free_count++;
        n++;
    }
    pc_pool_unlock(pool);
    return n;
}

void pc_pool_give(pc_cache *c, unsigned cls, unsigned n)
{
    struct pc_pool_shm *pool = &c->hdr->pool[cls];
    struct pc_alloc_shm *L = &c->cls[cls];
    pc_pool_lock(c, pool, cls);
    uint64_t lo = pc_list_off(c, &L->free_head);
    while (n-- > 0 && L->free_head != 0 &&
           pc_move_one(c, pool, &L->free_head, &pool->head, lo, cls)) {
        pool->count++;
        L->free_count--;
    }
    pc_pool_unlock(pool);
}

/* Reaps one class of a dead slot's state into its pool. */
static void pc_reap_class(pc_cache *c, struct pc_alloc_shm *L, unsigned cls)
{
    struct pc_pool_shm *pool = &c->hdr->pool[cls];
    uint32_t step = c->class_size[cls] >> PC_OFF_SHIFT;
    pc_pool_lock(c, pool, cls);
    /* The bump remainder becomes stack cells, from the end: shrink the range
     * first, then push, so a reaper dying between leaks one cell at most and
     * never leaves a cell both in the range and on the stack. */
    while (L->bump != 0 && L->end > L->bump && L->end - L->bump >= step) {
        pc_off x = L->end - step;
        L->end = x;
        PC_CRASH_ORDER();
        struct pc_free_shm *f = pc_free_cell(c, x, cls);
        if (f == NULL)
            break;
        f->next = L->free_head;
        PC_CRASH_ORDER();
        L->free_head = x;
        PC_CRASH_ORDER();
    }
    L->bump = L->end = 0;
    uint64_t lo = pc_list_off(c, &L->free_head), bound = pc_class_cells_bound(c);
    while (L->free_head != 0 && bound-- > 0 &&
           pc_move_one(c, pool, &L->free_head, &pool->head, lo, cls))
        pool->count++;
    if (L->free_head != 0) {
        pc_log(c, PC_LOG_ERR, "pcache: a dead process's free stack of class %u ends in a bad cell",
               cls);
        L->free_head = 0;
    }
    L->free_count = 0;
    pc_pool_unlock(pool);
}

/* A chunk the dead owner was carving or re-classing: unless it had become
 * the owner's bump range (then its cells may be handed out), take its cells
 * off the old class's pool, finish its publication and make the whole chunk
 * that range, so the reap frees every cell of it once. */
static void pc_reap_carving(pc_cache *c, struct pc_proc_shm *p, struct pc_alloc_shm *a)
{
    pc_off first = p->carving;
    unsigned cls = p->carving_cls, from = p->carving_from;
    uint64_t bytes = (uint64_t)p->carving_len8 << 3;
    uint64_t off = (uint64_t)first << PC_OFF_SHIFT;
    if (first == 0 || cls >= c->nclasses || from > c->nclasses ||
        p->carving_tab >= c->hdr->chunk_tab_cap || bytes < c->class_size[cls] ||
        off + bytes > c->region_bytes)
        goto out;
    struct pc_alloc_shm *L = &a[cls];
    pc_off last = (pc_off)((off + bytes) >> PC_OFF_SHIFT);
    last = (pc_off)((off + bytes / c->class_size[cls] * c->class_size[cls]) >> PC_OFF_SHIFT);
    if (L->end == last && L->bump >= first && L->bump <= last)
        goto out; /* published: the owner's bump range, reaped as such */
    if (from != 0) {
        struct pc_pool_shm *pool = &c->hdr->pool[from - 1];
        pc_pool_lock(c, pool, from - 1);
        pc_pool_drop_range_locked(c, from - 1, off, bytes);
        pc_pool_unlock(pool);
    }
    pc_chunk_publish(c, p->carving_tab, off, bytes, cls, from);
    uint64_t used = bytes / c->class_size[cls] * c->class_size[cls];
    pc_bump_set(L, first, (pc_off)((off + used) >> PC_OFF_SHIFT));
out:
    p->carving = 0;
}

uint64_t pc_pool_drop_range_locked(pc_cache *c, unsigned cls, uint64_t off, uint64_t bytes)
{
    struct pc_pool_shm *pool = &c->hdr->pool[cls];
    uint64_t bound = pc_class_cells_bound(c), n = 0;
    pc_off lo = (pc_off)(off >> PC_OFF_SHIFT), hi = (pc_off)((off + bytes) >> PC_OFF_SHIFT);
    pc_off *link = &pool->head;
    while (*link != 0 && bound-- > 0) {
        pc_off o = *link;
        struct pc_free_shm *f = pc_free_cell(c, o, cls);
        if (f == NULL)
            break;
        if (o >= lo && o < hi) {
            *link = f->next; /* one store: the list stays well formed */
            PC_CRASH_ORDER();
            n++;
        } else {
            link = &f->next;
        }
    }
    pool->count = pool->count >= n ? pool->count - n : 0;
    return n;
}

void pc_slot_reap(pc_cache *c, uint32_t idx)
{
    struct pc_alloc_shm *a = pc_slot_alloc(c, idx);
    if (a == NULL)
        return;
    pc_reap_carving(c, &c->hdr->procs[idx], a);
    /* every class, even an empty one: its pool's lock may be the dead
     * owner's, mid-move, with the cell in flight named by the pool */
    for (unsigned k = 0; k < c->nclasses; k++)
        pc_reap_class(c, &a[k], k);
}
