/*
 * drain.c - emptying one chunk so that a starved class can have it
 * (memcached's slab reassign; rebalance.c then re-classes the chunk).
 *
 * rebalance.c moves only chunks whose every cell is free. After a delete
 * pattern that leaves each chunk of a class partly used, or at the cap with
 * all memory in records of other sizes, no such chunk exists and a write of
 * a new size was refused while the memory reported free (or evictable) was
 * plenty. A writer whose class finds no cell (pc_alloc_evict) therefore
 * picks one chunk of another class and makes every record in it leave:
 *  - moved, when a free cell of that class lies outside the chunk: the
 *    record is copied under its bucket lock into the spare cell (taken
 *    before the lock, I5) and its slot or chain node repointed inside a
 *    version bracket (I3), exactly as an overwrite with the same bytes;
 *  - evicted, when its collection's policy evicts it (or it expired): the
 *    drain unlinks it and hands it to its caller's eviction (evict.c
 *    passes its own in), so this file never calls back into evict.c;
 *  - otherwise the drain stops: the chunk stays where it is.
 * A cell's record is found from its own key: read without a lock (bounded
 * by the cell, I1/I2), hashed, and looked up under the lock of the bucket
 * it routes to in each collection; only a bucket slot or chain node that
 * holds that very offset counts, so a free cell, a torn key or a record
 * written meanwhile is passed over. The drain never decides that the chunk
 * is free: the rebalancer re-counts its cells on the pool under the pool
 * lock and takes it only then.
 *
 * One drain runs at a time (the header's drain lock; the order is drain
 * lock, then bucket, then chain, with pool locks inside the allocator as
 * ever). Every cell a drain holds - its spare, and the chunk's own free
 * cells the allocator hands it meanwhile, kept aside so they stay free - is
 * in the drain log before it is used and leaves it before it is published
 * or freed; a process that takes the lock over from a dead drainer frees
 * what the log still names, so a kill mid-drain leaks nothing.
 */
#include "pc_int.h"

#include <stdlib.h>

/* The class to take a chunk from for cls, the attempt-th candidate: first
 * the one with the most free cells (at least a chunk's worth, so its
 * residents have somewhere to go); with eviction, then the others by the
 * chunks they hold, most first. A later attempt of the same write skips
 * the classes an earlier one tried: a chunk whose residents could neither
 * move nor be evicted (a noeviction collection's, with no room elsewhere)
 * must not end the write while another class could give one. */
static int pc_drain_pick_class(pc_cache *c, unsigned cls, bool may_evict, unsigned attempt)
{
    pc_mem_class cl[PC_MAX_CLASSES];
    unsigned n = 0;
    if (pc_mem_classes(c, cl, PC_MAX_CLASSES, &n) != 0)
        return -1;
    int best_free = -1;
    uint64_t most_free = 0;
    int cand[PC_MAX_CLASSES];
    uint64_t chunks[PC_MAX_CLASSES];
    unsigned nc = 0;
    for (unsigned i = 0; i < n; i++) {
        int k = pc_class_for(c, cl[i].cell_bytes);
        if (k <= 0 || (unsigned)k == cls || cl[i].chunks == 0 ||
            pc_chunk_bytes(cl[i].cell_bytes) < c->class_size[cls])
            continue; /* class 0 holds chain nodes, which follow their records */
        uint64_t per_chunk = pc_chunk_bytes(cl[i].cell_bytes) / cl[i].cell_bytes;
        if (cl[i].free_cells >= per_chunk && cl[i].free_cells > most_free) {
            most_free = cl[i].free_cells;
            best_free = k;
        }
        cand[nc] = k;
        chunks[nc++] = cl[i].chunks;
    }
    if (best_free >= 0 && attempt-- == 0)
        return best_free;
    if (!may_evict)
        return -1;
    for (unsigned i = 0; i < nc; i++) { /* by chunks held, most first */
        unsigned m = i;
        for (unsigned j = i + 1; j < nc; j++)
            if (chunks[j] > chunks[m])
                m = j;
        int tk = cand[i];
        uint64_t tc = chunks[i];
        cand[i] = cand[m], chunks[i] = chunks[m];
        cand[m] = tk, chunks[m] = tc;
        if (cand[i] == best_free)
            continue; /* tried first */
        if (attempt-- == 0)
            return cand[i];
    }
    return -1;
}

static int pc_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The byte offsets of class k's cells that other processes hold free (their
 * private stacks, the rest of their bump chunks), read without a lock (a
 * snapshot: their owners write them freely). A chunk holding one of them
 * cannot become wholly pooled while its holder keeps it, so draining it
 * would evict its residents for nothing. *n = how many; NULL on no memory. */
static bool pc_push_u64(uint64_t **v, size_t *len, size_t *cap, uint64_t x)
{
    if (*len == *cap) {
        uint64_t *w = realloc(*v, 2 * *cap * sizeof *w);
        if (w == NULL)
            return false;
        *v = w;
        *cap *= 2;
    }
    (*v)[(*len)++] = x;
    return true;
}

static uint64_t *pc_drain_held_elsewhere(pc_cache *c, unsigned k, size_t *n)
{
    struct pc_header_shm *h = c->hdr;
    uint32_t hwm = atomic_load_explicit(&h->proc_hwm, memory_order_acquire);
    size_t cap = 256, len = 0;
    uint64_t *v = malloc(cap * sizeof *v);
    bool ok = v != NULL;
    for (uint32_t i = 1; ok && i <= hwm && i < PC_MAX_PROCS; i++) {
        uint64_t aoff = atomic_load_explicit(&h->procs[i].alloc_off, memory_order_acquire);
        if (i == c->slot || aoff == 0 ||
            atomic_load_explicit(&h->procs[i].token, memory_order_relaxed) == 0)
            continue;
        const struct pc_alloc_shm *L = (const struct pc_alloc_shm *)pc_at(c, aoff) + k;
        pc_off bump = L->bump, end = L->end;
        if (bump != 0 && end > bump) /* the rest of its chunk: one offset names the chunk */
            ok = pc_push_u64(&v, &len, &cap, (uint64_t)bump << PC_OFF_SHIFT);
        pc_off x = L->free_head;
        for (uint32_t j = 0; ok && x != 0 && j <= L->free_count + 8; j++) {
            ok = pc_push_u64(&v, &len, &cap, (uint64_t)x << PC_OFF_SHIFT);
            const struct pc_free_shm *f = pc_cell(c, x);
            x = f != NULL && f->cls == k ? f->next : 0; /* a torn link ends the walk */
        }
    }
    if (!ok) {
        free(v);
        return NULL;
    }
    qsort(v, len, sizeof *v, pc_u64_cmp);
    *n = len;
    return v;
}

/* Whether [off, off + len) holds one of the sorted offsets. */
static bool pc_range_holds(const uint64_t *v, size_t n, uint64_t off, uint64_t len)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid] < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo] < off + len;
}

/* A chunk of class k, taken round-robin through the chunk table, that no
 * other process holds a free cell of (if there is one; else any). */
static bool pc_drain_pick_chunk(pc_cache *c, unsigned k, uint64_t *off, uint64_t *len)
{
    struct pc_header_shm *h = c->hdr;
    uint64_t n = atomic_load_explicit(&h->chunk_tab_len, memory_order_acquire);
    if (n > h->chunk_tab_cap)
        n = h->chunk_tab_cap;
    if (n == 0)
        return false;
    size_t nheld = 0;
    uint64_t *held = pc_drain_held_elsewhere(c, k, &nheld);
    const _Atomic uint64_t *tab = pc_at(c, h->chunk_tab_off);
    uint64_t start = atomic_fetch_add_explicit(&h->drain_cursor, 1, memory_order_relaxed);
    bool found = false;
    for (int strict = 1; strict >= 0 && !found; strict--)
        for (uint64_t i = 0; i < n; i++) {
            uint64_t e = atomic_load_explicit(&tab[(start + i) % n], memory_order_acquire);
            if ((e & 0xff) != k || pc_chunk_e_off(e) == 0)
                continue;
            if (strict && held != NULL &&
                pc_range_holds(held, nheld, pc_chunk_e_off(e), pc_chunk_e_len(e)))
                continue;
            *off = pc_chunk_e_off(e);
            *len = pc_chunk_e_len(e);
            found = true;
            break;
        }
    free(held);
    return found;
}

struct pc_drain {
    pc_cache *c;
    unsigned k;        /* the chunk's class */
    uint64_t lo, hi;   /* the chunk's byte range */
    pc_off spare;      /* a free cell of class k outside the chunk, or 0 */
    uint32_t spare_at; /* its entry in the log */
    pc_off *log;       /* this slot's drain log: every cell in hand */
    uint32_t *logn;
    unsigned char *key;              /* PC_KEY_MAX bytes */
    pc_drain_evicted_fn *evict_done; /* the caller's eviction, after the unlock */
    unsigned moved, evicted;
};

static bool pc_drain_inside(const struct pc_drain *d, pc_off off)
{
    uint64_t b = (uint64_t)off << PC_OFF_SHIFT;
    return b >= d->lo && b < d->hi;
}

/* A cell in hand enters the log before it is used; an entry is cleared
 * before its cell is published or freed, so a death leaves in the log only
 * cells that no table and no free list names (a death between a pop and
 * its entry loses that one cell). */
static bool pc_drain_hold(struct pc_drain *d, pc_off o, uint32_t *at)
{
    uint32_t n = *d->logn;
    if (n >= PC_DRAIN_LOG)
        return false;
    d->log[n] = o;
    PC_CRASH_ORDER();
    *d->logn = n + 1;
    PC_CRASH_ORDER();
    *at = n;
    return true;
}

static void pc_drain_release(struct pc_drain *d, uint32_t at)
{
    d->log[at] = 0;
    PC_CRASH_ORDER();
}

/* A spare cell outside the chunk; cells inside it stay in the log (in
 * hand) until the end, so the allocator does not hand them out again. */
static void pc_drain_spare(struct pc_drain *d)
{
    while (d->spare == 0) {
        pc_off o = pc_alloc_quiet(d->c, d->c->class_size[d->k]);
        uint32_t at;
        if (o == 0)
            return;
        if (!pc_drain_hold(d, o, &at)) {
            pc_free(d->c, o);
            return;
        }
        if (!pc_drain_inside(d, o)) {
            d->spare = o;
            d->spare_at = at;
        }
    }
}

/* Makes the record at off leave, if it is one. Returns false when it is
 * a record that can neither move nor be evicted (the drain stops). */
static bool pc_drain_cell(struct pc_drain *d, pc_off off)
{
    pc_cache *c = d->c;
    const struct pc_rec_shm *r = pc_cell(c, off);
    if (r == NULL)
        return true;
    size_t klen = r->klen, room = pc_rec_room(c, r);
    if (PC_REC_HDR + klen > room)
        return true; /* not a record now (a free cell's bytes) */
    memcpy(d->key, r->data, klen);
    uint64_t h = pc_key_hash(d->key, klen);
    int64_t now = pc_mono_ms();
    for (unsigned ci = 0; ci < c->ncoll; ci++) {
        pc_coll *coll = &c->coll[ci];
        uint32_t pol = pc_evict_policy_of(coll);
        if (!pc_bucket_may_hold(coll, h, off))
            continue; /* not this collection's (or a free cell's bytes) */
        if (d->spare == 0)
            pc_drain_spare(d);
        uint64_t idx;
        struct pc_bucket_shm *b = pc_lock_route(coll, h, &idx);
        struct pc_loc loc;
        pc_locate_held(coll, b, idx, h, d->key, klen, now, &loc);
        int act = 0; /* 1 moved, 2 evicted, -1 stuck */
        pc_off node = 0;
        uint32_t stamp = 0;
        if (loc.where != 0 && loc.rec_off == off &&
            (loc.rec->cls != d->k ||
             PC_REC_HDR + (size_t)loc.rec->klen + loc.rec->vlen > c->class_size[d->k])) {
            /* the chunk changed class meanwhile (it became free and the
             * rebalancer took it): what it holds now is not ours to move */
            act = -1;
        } else if (loc.where != 0 && loc.rec_off == off) {
            int64_t e = atomic_load_explicit(&loc.rec->expires, memory_order_relaxed);
            bool evictable = pol != PC_EVICT_NONE && !((pol & PC_EVICT_VOLATILE) && e == 0);
            if (d->spare != 0) {
                size_t bytes = PC_REC_HDR + loc.rec->klen + loc.rec->vlen;
                unsigned char *to = pc_cell(c, d->spare);
                /* byte 0 is the class byte, the same in both cells (I2) */
                memcpy(to + 1, (const unsigned char *)loc.rec + 1, bytes - 1);
                pc_drain_release(d, d->spare_at); /* published next: no longer in hand */
                if (loc.where == 1) {
                    pc_wbegin(b);
                    atomic_store_explicit(&b->slot[loc.slot], d->spare, memory_order_relaxed);
                    pc_wend(b);
                } else {
                    pc_replace_br(c, &loc, d->spare, true);
                }
                d->spare = 0;
                act = 1;
            } else if (evictable || (e != 0 && e <= now)) {
                pc_unlink_br(coll, &loc, &node, true);
                stamp = atomic_load_explicit(&b->version, memory_order_relaxed);
                act = 2;
            } else {
                act = -1;
            }
        }
        if (loc.ch != NULL)
            pc_chain_unlock(loc.ch);
        pc_bucket_unlock(b);
        if (act == 0)
            continue; /* not this collection's */
        if (act < 0)
            return false;
        if (act == 1) {
            pc_free(c, off);
            d->moved++;
        } else {
            d->evict_done(coll, off, node, stamp, now);
            d->evicted++;
        }
        return true;
    }
    return true;
}

/* The cells a dead drainer held: each entry cleared, then freed (a death
 * between the two loses that cell, never frees one twice). */
static void pc_drain_log_recover(pc_cache *c, pc_off *log)
{
    uint32_t n = c->hdr->drain_log_n < PC_DRAIN_LOG ? c->hdr->drain_log_n : PC_DRAIN_LOG;
    unsigned freed = 0;
    for (uint32_t i = 0; i < n; i++) {
        pc_off x = log[i];
        log[i] = 0;
        PC_CRASH_ORDER();
        const struct pc_free_shm *f = pc_cell(c, x);
        if (f != NULL && f->cls < c->nclasses) {
            pc_free(c, x);
            freed++;
        }
    }
    c->hdr->drain_log_n = 0;
    pc_log(c, PC_LOG_WARN, "pcache: memory: a chunk drain's process died; %u cells it held freed",
           freed);
}

/* Picks a chunk of another class than cls (attempt n: the n-th candidate
 * class, see pc_drain_pick_class) and moves (or, may_evict, evicts) every
 * record in it; the rebalancer then re-classes it. 0 when every record
 * left, PC_ENOMEM when none could be picked or one had to stay. */
static int pc_chunk_drain(pc_cache *c, unsigned cls, bool may_evict, unsigned attempt,
                          pc_drain_evicted_fn *evicted)
{
    int k = pc_drain_pick_class(c, cls, may_evict, attempt);
    uint64_t off = 0, len = 0;
    if (k < 0 || !pc_drain_pick_chunk(c, (unsigned)k, &off, &len))
        return PC_ENOMEM;
    struct pc_header_shm *h = c->hdr;
    pc_off *log = pc_at(c, h->drain_log_off);
    if (pc_lock_word(c, &h->drain_lock) == PC_LOCK_RECOVERED)
        pc_drain_log_recover(c, log);
    uint32_t cell = c->class_size[k];
    struct pc_drain d = {.c = c,
                         .k = (unsigned)k,
                         .lo = off,
                         .hi = off + len,
                         .log = log,
                         .logn = &h->drain_log_n,
                         .evict_done = evicted};
    *d.logn = 0;
    d.key = malloc(PC_KEY_MAX);
    int rc = d.key == NULL ? PC_EHEAP : 0;
    for (uint64_t o = off; rc == 0 && o + cell <= off + len; o += cell)
        if (!pc_drain_cell(&d, (pc_off)(o >> PC_OFF_SHIFT)))
            rc = PC_ENOMEM;
    /* what is still in hand (the spare, the chunk's own cells the
     * allocator gave us) goes back: each entry cleared, then freed */
    for (uint32_t i = 0; i < *d.logn; i++)
        if (log[i] != 0) {
            pc_off x = log[i];
            pc_drain_release(&d, i);
            pc_free(c, x);
        }
    *d.logn = 0;
    pc_unlock_word(&h->drain_lock);
    free(d.key);
    /* the cells are on this process's stacks now: let the rebalancer look
     * again at once (it waits for the pools to grow otherwise) */
    c->reclaim_seen = 0;
    pc_log(c, PC_LOG_DEBUG,
           "pcache: memory: drained a chunk of %u-byte cells for %u-byte cells: %u moved, %u "
           "evicted%s",
           cell, c->class_size[cls], d.moved, d.evicted, rc == 0 ? "" : " (stopped)");
    return rc == 0 ? 0 : PC_ENOMEM;
}

/* The one entry point into drains (pc_alloc_evict's). After a write whose
 * attempts all failed (last) none runs for 100 ms in this process: a full
 * arena of records that must stay makes each refused write pay only one
 * look. Within a write, a failed attempt does not stop the next one, which
 * tries the next candidate class. */
pc_off pc_alloc_drained(pc_cache *c, unsigned cls, size_t bytes, bool may_evict, unsigned attempt,
                        bool last, pc_drain_evicted_fn *evicted)
{
    int64_t now = pc_mono_ms();
    if (now < c->drain_next_ms[cls])
        return 0;
    int rc = pc_chunk_drain(c, cls, may_evict, attempt, evicted);
    pc_off off = pc_alloc_quiet(c, bytes);
    if (off == 0 && rc != 0 && last)
        c->drain_next_ms[cls] = now + 100;
    return off;
}
