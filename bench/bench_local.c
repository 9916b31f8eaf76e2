/*
 * bench_local.c - the cachedb_local model of bench_local.h.
 *
 * Layout of the one MAP_SHARED mapping (all pointers inside it are absolute
 * and valid in every forked worker, exactly as OpenSIPS stores them in shm):
 *
 *   struct lc_table_shm      size, bucket pointer
 *   lcache_t[size]           16 bytes each: chain head + gen_lock_t
 *   struct lc_arena_shm      the allocator: global lock, stats, free lists
 *   fragments ...            24-byte fm_frag header + payload, bump-carved
 *
 * What is modelled and what is left out is argued in docs/benchmarks.md.
 */
#include "bench_local.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- gen_lock_t: OpenSIPS fastlock.h with ADAPTIVE_WAIT on x86-64 ------ */

#define LC_ADAPTIVE_WAIT_LOOPS 1024

typedef _Atomic int lc_lock_t;

/* get_lock(): xchg until it returns 0; after 1024 failed tries, yield the
 * CPU between tries. Address-free atomics, so it works across processes. */
static inline void lc_lock(lc_lock_t *l)
{
    int spins = LC_ADAPTIVE_WAIT_LOOPS;

    while (atomic_exchange_explicit(l, 1, memory_order_acquire)) {
        if (spins > 0)
            spins--;
        else
            sched_yield();
    }
}

static inline void lc_unlock(lc_lock_t *l)
{
    atomic_store_explicit(l, 0, memory_order_release);
}

/* ---- core_hash(), verbatim from OpenSIPS hash_func.h ------------------- */

#define ch_h_inc h += v ^ (v >> 3)

static inline unsigned lc_core_hash(const char *s, size_t len, unsigned size)
{
    unsigned v, h = 0;
    size_t i;

    /* char is signed on x86-64, as in the original: keep the arithmetic
     * (the original's p <= end - 4 written as an index, same iterations) */
    for (i = 0; i + 4 <= len; i += 4) {
        const char *p = s + i;

        v = (unsigned)((p[0] << 24) + (p[1] << 16) + (p[2] << 8) + p[3]);
        ch_h_inc;
    }
    v = 0;
    for (; i < len; i++) {
        v <<= 8;
        v += (unsigned)s[i];
    }
    ch_h_inc;
    h = ((h) + (h >> 11)) + ((h >> 13) + (h >> 23));
    return size ? ((h) & (size - 1)) : h;
}

/* ---- shm_malloc: F_MALLOC's exact-size fast path behind one lock ------- */

#define LC_ROUNDTO 8u
#define LC_CLASSES 2048u /* exact-size lists up to 16 KiB, like F_MALLOC_OPTIMIZE */

/* struct fm_frag: size, free-list link, back pointer (24 bytes). */
struct lc_frag {
    unsigned long size;
    struct lc_frag *nxt_free;
    struct lc_frag **prv_free;
};

struct lc_frag_lnk {
    struct lc_frag *first;
    unsigned long no;
};

/* Lives in shared memory; every field is guarded by lock (mem_lock). */
struct lc_arena_shm {
    lc_lock_t lock;
    unsigned long size, used, real_used, max_real_used;
    char *top, *end; /* never-allocated space: what the initial big fragment holds */
    struct lc_frag_lnk free_hash[LC_CLASSES];
};

static void *lc_shm_malloc(struct lc_arena_shm *a, size_t size)
{
    size_t rs = (size + LC_ROUNDTO - 1) & ~(size_t)(LC_ROUNDTO - 1);
    size_t cls = rs / LC_ROUNDTO;
    struct lc_frag *f = NULL;

    if (cls >= LC_CLASSES)
        return NULL;
    lc_lock(&a->lock);
    if (a->free_hash[cls].first) {
        f = a->free_hash[cls].first;
        a->free_hash[cls].first = f->nxt_free;
        if (f->nxt_free)
            f->nxt_free->prv_free = &a->free_hash[cls].first;
        a->free_hash[cls].no--;
    } else if ((size_t)(a->end - a->top) >= sizeof *f + rs) {
        f = (struct lc_frag *)(void *)a->top;
        a->top += sizeof *f + rs;
        f->size = rs;
    }
    if (f) {
        f->nxt_free = NULL;
        f->prv_free = NULL;
        a->used += rs;
        a->real_used += rs + sizeof *f;
        if (a->real_used > a->max_real_used)
            a->max_real_used = a->real_used;
    }
    lc_unlock(&a->lock);
    return f ? (void *)(f + 1) : NULL;
}

static void lc_shm_free(struct lc_arena_shm *a, void *p)
{
    struct lc_frag *f = (struct lc_frag *)p - 1;
    size_t cls = f->size / LC_ROUNDTO;

    lc_lock(&a->lock);
    f->nxt_free = a->free_hash[cls].first;
    f->prv_free = &a->free_hash[cls].first;
    if (f->nxt_free)
        f->nxt_free->prv_free = &f->nxt_free;
    a->free_hash[cls].first = f;
    a->free_hash[cls].no++;
    a->used -= f->size;
    a->real_used -= f->size + sizeof *f;
    lc_unlock(&a->lock);
}

/* ---- the table: lcache_entry_t and lcache_t as in cachedb_local -------- */

typedef struct {
    char *s;
    int len;
} lc_str;

typedef struct lc_entry {
    lc_str attr;
    lc_str value;
    unsigned int expires;
    int ttl;
    int synced;
    struct lc_entry *next;
} lc_entry;

/* lcache_t: 16 bytes, four buckets to a cache line (false sharing and all) */
typedef struct {
    lc_entry *entries; /* guarded by lock */
    lc_lock_t lock;
} lc_bucket;

_Static_assert(sizeof(lc_bucket) == 16, "lcache_t is 16 bytes on x86-64");

struct lc_table_shm {
    unsigned size;
    lc_bucket *htable;
};

struct bench_local {
    void *map;
    size_t map_bytes;
    struct lc_table_shm *tab;
    struct lc_arena_shm *arena;
};

int bench_local_create(bench_local **out, unsigned buckets, size_t arena_bytes)
{
    size_t head = (sizeof(struct lc_table_shm) + 63) & ~(size_t)63;
    size_t tab = (size_t)buckets * sizeof(lc_bucket);
    size_t ahead = (sizeof(struct lc_arena_shm) + 63) & ~(size_t)63;
    bench_local *l;
    char *m;

    if (buckets == 0 || (buckets & (buckets - 1)) != 0)
        return -1;
    l = calloc(1, sizeof *l);
    if (l == NULL)
        return -1;
    l->map_bytes = head + tab + ahead + arena_bytes;
    m = mmap(NULL, l->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        free(l);
        return -1;
    }
    l->map = m;
    l->tab = (struct lc_table_shm *)(void *)m;
    l->tab->size = buckets;
    l->tab->htable = (lc_bucket *)(void *)(m + head); /* zero pages: NULL heads, free locks */
    l->arena = (struct lc_arena_shm *)(void *)(m + head + tab);
    l->arena->size = arena_bytes;
    l->arena->top = m + head + tab + ahead;
    l->arena->end = l->arena->top + arena_bytes;
    *out = l;
    return 0;
}

void bench_local_destroy(bench_local *l)
{
    if (l == NULL)
        return;
    munmap(l->map, l->map_bytes);
    free(l);
}

/* The entry is built before the bucket lock, as _lcache_htable_insert does. */
static lc_entry *lc_build(bench_local *l, const char *key, size_t klen, const void *val,
                          size_t vlen)
{
    size_t size = sizeof(lc_entry) + klen + vlen;
    lc_entry *me = lc_shm_malloc(l->arena, size);

    if (me == NULL)
        return NULL;
    memset(me, 0, size);
    me->attr.s = (char *)me + sizeof(lc_entry);
    memcpy(me->attr.s, key, klen);
    me->attr.len = (int)klen;
    me->value.s = (char *)me + sizeof(lc_entry) + klen;
    memcpy(me->value.s, val, vlen);
    me->value.len = (int)vlen;
    return me;
}

/* lcache_htable_remove_safe: caller holds the bucket lock; the shm_free
 * (and so the global allocator lock) nests inside it, as in the original. */
static void lc_remove_safe_locked(bench_local *l, const char *key, size_t klen, lc_entry **it_p)
{
    lc_entry *me = NULL, *it = *it_p;

    while (it) {
        if ((size_t)it->attr.len == klen && memcmp(it->attr.s, key, klen) == 0) {
            if (me)
                me->next = it->next;
            else
                *it_p = it->next;
            lc_shm_free(l->arena, it);
            return;
        }
        me = it;
        it = it->next;
    }
}

int bench_local_set(bench_local *l, const char *key, size_t klen, const void *val, size_t vlen)
{
    lc_entry *me = lc_build(l, key, klen, val, vlen), *it;
    lc_bucket *b;

    if (me == NULL)
        return -1;
    b = &l->tab->htable[lc_core_hash(key, klen, l->tab->size)];
    lc_lock(&b->lock);
    it = b->entries;
    lc_remove_safe_locked(l, key, klen, &it);
    me->next = it;
    b->entries = me;
    lc_unlock(&b->lock);
    return 0;
}

int bench_local_load(bench_local *l, const char *key, size_t klen, const void *val, size_t vlen)
{
    lc_entry *me = lc_build(l, key, klen, val, vlen);
    lc_bucket *b;

    if (me == NULL)
        return -1;
    b = &l->tab->htable[lc_core_hash(key, klen, l->tab->size)];
    lc_lock(&b->lock);
    me->next = b->entries;
    b->entries = me;
    lc_unlock(&b->lock);
    return 0;
}

/* Hot path of the anchor: one bucket lock (an xchg on a line shared with
 * three other buckets), one dependent miss per chain node, a key compare
 * per node, malloc + memcpy under the lock. */
int bench_local_fetch(bench_local *l, const char *key, size_t klen, char **val, size_t *vlen)
{
    lc_bucket *b = &l->tab->htable[lc_core_hash(key, klen, l->tab->size)];
    lc_entry *it;
    int rc = 1;

    lc_lock(&b->lock);
    for (it = b->entries; it; it = it->next) {
        if ((size_t)it->attr.len == klen && memcmp(it->attr.s, key, klen) == 0) {
            char *v;

            /* The benchmark sets no TTL, so expires is 0 and get_ticks() is
             * never reached, as in the module; an expired entry would be
             * unlinked and freed here, which the model leaves out. */
            if (it->expires != 0) {
                rc = 1;
                break;
            }
            v = malloc((size_t)it->value.len);
            if (v == NULL) {
                rc = -1;
                break;
            }
            memcpy(v, it->value.s, (size_t)it->value.len);
            *val = v;
            *vlen = (size_t)it->value.len;
            rc = 0;
            break;
        }
    }
    lc_unlock(&b->lock);
    return rc;
}

size_t bench_local_used_bytes(const bench_local *l)
{
    return l->arena->real_used + (size_t)l->tab->size * sizeof(lc_bucket);
}

/* ---- pool adapter ------------------------------------------------------ */

static int target_get(void *ctx, const char *key, size_t klen, uint64_t *sink)
{
    char *v;
    size_t vlen;
    int rc = bench_local_fetch(ctx, key, klen, &v, &vlen);

    if (rc == 0) {
        *sink += (unsigned char)v[vlen - 1];
        free(v); /* pkg_free by the caller, as cachedb's users do */
    }
    return rc;
}

static int target_set(void *ctx, const char *key, size_t klen, const void *val, size_t vlen)
{
    return bench_local_set(ctx, key, klen, val, vlen);
}

/* Reads one byte per page of everything carved so far, so a forked worker
 * takes its page-table faults here rather than in a timed window. */
static uint64_t target_prefault(void *ctx, const bench_keys *keys)
{
    bench_local *l = ctx;
    const volatile char *p = l->map;
    size_t used = (size_t)(l->arena->top - (char *)l->map);
    char sink = 0;

    (void)keys;
    for (size_t off = 0; off < used; off += 4096)
        sink ^= p[off];
    (void)sink;
    return 0;
}

bench_target bench_local_target(bench_local *l, const char *name)
{
    bench_target t = {.name = name,
                      .ctx = l,
                      .get = target_get,
                      .set = target_set,
                      .prefault = target_prefault,
                      .child_exit = NULL};
    return t;
}
