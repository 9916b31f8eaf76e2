/*
 * pc_int.h - the shared-memory layout of libpcache and the internal calls
 * between its files. Nothing outside src/ includes this (tests use
 * pc_testhooks.h). docs/design.md explains the protocols; the numbered
 * invariants below are the ones the code relies on and checks.
 *
 * Shared-memory types carry the _shm suffix. Every field says which lock
 * guards it or how it is read without one.
 *
 * INVARIANTS (debug builds check them with PC_ASSERT, below; "checked"
 * names the functions that do)
 *  I1  The region is mapped before fork at one address in every process and
 *      never unmapped while the cache lives; reading any byte of it never
 *      faults. Offsets (pc_off: 8-byte units from the region base) name
 *      cells; offset 0 is NULL.
 *      Checked: pc_alloc, pc_free (a cell handed out or freed is inside).
 *  I2  Arena chunks are never returned to the region. Byte 0 of every cell
 *      is its class id, stamped when the chunk is carved, and written again
 *      only when the whole chunk changes class (rebalance.c), which happens
 *      only while every cell of it is on its class's pool, so no bucket or
 *      chain names any of them. Free-cell links and overflow nodes keep byte
 *      0 untouched. Lock-free readers clamp by pc_rec_room (the class byte,
 *      read once, and the region's end), so a stale offset into a re-classed
 *      chunk reads garbage inside the region and the version check drops it.
 *      Checked: pc_alloc (bump and free-stack pops), pc_free (arena.c), pool
 *      moves (pool.c); pc_chain_push (a node is a 16-byte-class cell).
 *  I3  A bucket's slots [0, used) hold valid record offsets, densely; its
 *      version is even whenever its lock is free. Every change a lock-free
 *      reader could observe happens inside a version bracket (odd..even).
 *      A tag's access bit (PC_TAG_REF) is no part of what readers compare:
 *      readers set it and the eviction hand clears it outside brackets.
 *      Checked: pc_wbegin/pc_wend (even to odd to even, lock held);
 *      pc_bucket_unlock and after a dead writer's repair (even version,
 *      slots [0, used) non-zero).
 *  I4  A key lives in at most one place: one slot of the bucket it routes to,
 *      or one node of the overflow chain (hash & (PC_CHAINS-1)). A bucket
 *      whose keys may be in a chain has PC_USED_OVF set in `used`.
 *      Checked: pc_locate (a key whose chain it did not search is not in
 *      it); pc_drain_one (the bucket is flagged, the key not in it yet);
 *      pc_sweep_chain (flagged); pc_chain_push/unlink (under the lock of
 *      the bucket the node routes to).
 *  I5  No arena call happens under a bucket or chain lock: records and nodes
 *      are built before the lock, freed after it.
 *      Checked: pc_alloc, pc_free, pc_region_carve (per-thread lock counts).
 *  I6  Only the process holding the maintenance lock splits buckets or
 *      publishes a routing word; a split holds the lock of the bucket it
 *      splits, so a writer holding a bucket lock sees a stable route for it.
 *      Checked: pc_split_one (both locks), pc_sweep (maintenance lock),
 *      pc_insert (the key still routes to the locked bucket).
 *  I7  Lock order: bucket lock, then chain lock, and never two chain locks
 *      at once. The maintenance lock may be held around both.
 *      Checked: pc_bucket_lock and pc_chain_lock (no chain lock held),
 *      pc_maintain (no bucket or chain lock held).
 *  I8  More than one bucket lock is held only by a transaction's commit or
 *      a split, taken in ascending (collection index, bucket index) order
 *      (a split: its bucket, then the higher one it creates), with no chain
 *      lock held meanwhile; so no cycle of waits can form.
 *      Checked: pc_txn_commit (its lock set is sorted and unique, and it
 *      holds no lock when it starts taking them).
 */
#ifndef PC_INT_H
#define PC_INT_H

#include "pcache.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* The key hash is on every read and write: XXH3 from libxxhash's header,
 * compiled into the engine (XXH_INLINE_ALL) rather than called through the
 * shared library's PLT, so a short key's hash is a few inlined instructions.
 * Same algorithm and values as the library's XXH3_64bits, which the public
 * pc_hash (errors.c) and the files it orders (store, snapshot) rely on. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#define PC_LIKELY(x) __builtin_expect(!!(x), 1)
#define PC_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* For the read path's few helpers that take a constant flag (locked or
 * not): inlined into each caller, every copy loses the branches on the flag
 * and the call's register saves. At a table the caches hold, a read is
 * bound by its instruction count, not by memory (docs/design.md). */
#define PC_ALWAYS_INLINE inline __attribute__((always_inline))

/* ---- debug checks of the invariants ------------------------------------
 * PC_ASSERT(c, I3, cond) states that invariant I3 holds at a point that
 * relies on it. The checks are on when NDEBUG is not defined, which in the
 * CMake build means the Debug build type (the ASan tree of tests/run.sh);
 * Release, RelWithDebInfo (the default) and MinSizeRel all pass -DNDEBUG,
 * and there the condition sits in an unevaluated sizeof: no code, the names
 * it uses still count as used, and a static helper called only from checks
 * is not emitted. A failed check names the invariant, the condition, the
 * file and the line through c's log callback (c may be NULL where no handle
 * is in reach) and on stderr, then aborts. PC_DEBUG_ONLY(...) holds the
 * statements that only feed the checks (the per-thread lock counts below).
 * Checks stay cheap - what the point already holds, at most one short chain
 * walk - so the debug suite's races and soak keep their timing. The list of
 * INVARIANTS above says where each one is checked. */
#ifdef NDEBUG
#define PC_DEBUG_ASSERTS 0
#define PC_ASSERT(c, inv, cond) ((void)sizeof(c), (void)sizeof(!(cond)))
#define PC_DEBUG_ONLY(...)
#else
#define PC_DEBUG_ASSERTS 1
#define PC_ASSERT(c, inv, cond)                                                                    \
    (PC_LIKELY(cond) ? (void)0 : pc_assert_fail((c), #inv, #cond, __FILE__, __LINE__))
#define PC_DEBUG_ONLY(...) __VA_ARGS__
_Noreturn void pc_assert_fail(const pc_cache *c, const char *inv, const char *cond,
                              const char *file, int line) __attribute__((cold));
#endif
/* Bucket and chain locks the calling thread holds (I5, I7), counted by
 * pc_bucket_lock/unlock and pc_chain_lock/unlock. Defined in debug builds
 * only: elsewhere they appear in nothing but PC_ASSERT's sizeof. Per thread,
 * not per process: threads of one process hold locks independently. */
extern _Thread_local unsigned pc_dbg_bucket_locks, pc_dbg_chain_locks;

typedef uint32_t pc_off; /* cell offset in 8-byte units; 0 = NULL */
#define PC_OFF_SHIFT 3u
#define PC_CELL_ALIGN 8u
#define PC_MAX_REGION_BYTES ((uint64_t)UINT32_MAX << PC_OFF_SHIFT) /* 32 GiB */

/* ---- records (one per arena cell) ------------------------------------- */
#define PC_RF_COUNTER 0x01u /* value is a native little-endian int64 */

struct pc_rec_shm {
    uint8_t cls;   /* I2: immutable class id */
    uint8_t flags; /* PC_RF_*; written before publication or in a bracket */
    uint16_t klen;
    uint32_t vlen;
    _Atomic int64_t expires; /* CLOCK_MONOTONIC ms, 0 = never; may be stored
                                without a bracket (the TTL-only refresh) */
    unsigned char data[];    /* key bytes, then value bytes */
};
#define PC_REC_HDR 16u
_Static_assert(sizeof(struct pc_rec_shm) == PC_REC_HDR, "record header is 16 bytes");

/* A free cell links through bytes 4..7, leaving the class byte alone (I2). */
struct pc_free_shm {
    uint8_t cls;
    uint8_t pad[3];
    pc_off next;
};

/* ---- buckets ---------------------------------------------------------- */
#define PC_SLOTS 11u
#define PC_USED_MASK 0x0fu
#define PC_USED_OVF 0x80u /* keys of this bucket may live in overflow (I4) */

struct pc_bucket_shm {
    _Atomic uint32_t version;       /* seqlock: odd while a writer is inside */
    _Atomic uint32_t lock;          /* owner token of the writer; 0 = free */
    _Atomic uint8_t tags[PC_SLOTS]; /* top byte of each slot's hash */
    _Atomic uint8_t used;           /* slot count | PC_USED_OVF */
    _Atomic pc_off slot[PC_SLOTS];  /* record offsets, dense in [0, used) */
};
_Static_assert(sizeof(struct pc_bucket_shm) == 64, "a bucket is one cache line");
_Static_assert(PC_SLOTS <= PC_USED_MASK, "slot count fits the used field");

/* A slot's tag is 7 bits of its key's hash; bit 7 is the slot's access
 * bit for eviction (evict.c). Lock-free readers set it with an atomic OR,
 * only when it is clear, so a key read often dirties its bucket's line
 * once per sweep, not per read; the sweep clears it under the bucket lock
 * with an atomic AND. Every tag comparison masks the bit off. A bit set on
 * a slot that a writer reused meanwhile marks the new key: harmless. */
static inline uint64_t pc_key_hash(const void *key, size_t len)
{
    return XXH3_64bits(key, len);
}

#define PC_TAG_REF 0x80u
#define PC_TAG_BITS 0x7fu
static inline uint8_t pc_tag_of(uint64_t h)
{
    return (uint8_t)((h >> 56) & PC_TAG_BITS);
}
static inline bool pc_tag_eq(uint8_t stored, uint8_t tag)
{
    return (stored & PC_TAG_BITS) == tag;
}

/* ---- overflow side chains --------------------------------------------- */
#define PC_CHAINS 1024u /* per collection; chain = hash & (PC_CHAINS-1) */

struct pc_ovf_node_shm { /* lives in a 16-byte arena cell */
    uint8_t cls;         /* I2: byte 0 stays the class id */
    uint8_t tag;
    uint16_t pad;
    pc_off next; /* guarded by the chain lock */
    pc_off rec;
    uint32_t hlo; /* low 32 bits of the key's hash: routes without a deref */
};
_Static_assert(sizeof(struct pc_ovf_node_shm) == 16, "overflow node is one 16-byte cell");

struct pc_chain_shm {
    _Atomic uint32_t lock; /* guards head, count, hint and the nodes */
    pc_off head;
    uint32_t count;
    uint32_t hint; /* lower bound of the chain's expiry (pc_hint units) */
};

/* ---- collections ------------------------------------------------------ */
#define PC_MAX_SEGS 32u
#define PC_MAX_LEVELS 24u       /* table may grow 2^24 times its declared size... */
#define PC_MAX_BUCKETS_LOG2 31u /* ...but never past 2^31 buckets */

struct pc_coll_shm {
    char name[PC_COLL_NAME_MAX + 1]; /* immutable after create */
    uint32_t log2_initial;           /* immutable */
    uint32_t index;                  /* immutable */
    /* Routing word: level << 32 | split. Written only by the maintenance
     * lock holder (I6) with release; read with acquire. */
    _Atomic uint64_t route;
    /* Byte offsets of bucket / hint segments. Segment j >= 1 holds buckets
     * [n0 << (j-1), n0 << j). Written before any route reaches them. */
    uint64_t seg_off[PC_MAX_SEGS];
    uint64_t hint_off[PC_MAX_SEGS];
    uint64_t chains_off;             /* PC_CHAINS pc_chain_shm, immutable */
    uint64_t stats_off;              /* PC_MAX_PROCS pc_stats_shm lines, immutable */
    _Atomic uint64_t splits;         /* maintenance lock holder only */
    _Atomic uint32_t grow_failed;    /* set once when a segment could not be carved */
    _Atomic uint32_t expired_events; /* opt-in for PC_EV_EXPIRED */
    _Atomic uint32_t hook_word;      /* pc_coll_set_hook_word: 0 = no mutation hook calls */
    _Atomic int32_t wblock;          /* != 0: writes return it (pc_coll_set_write_block) */
    _Atomic uint32_t evict_policy;   /* enum pc_evict_policy | PC_EVICT_VOLATILE (evict.c) */
    _Atomic uint32_t evicted_events; /* opt-in for PC_EV_EVICTED */
    _Atomic uint64_t evict_hand;     /* next bucket the CLOCK sweep looks at (evict.c) */
    /* perf_stats_reset baseline: the summed counters at the last reset.
     * Guarded by base_lock; readers take it too (rare, management only). */
    _Atomic uint32_t base_lock;
    int64_t base_reset_at;
    uint64_t base[16];
};

/* Per-process, per-collection counters: written only by the process that
 * owns the slot (plain increments through relaxed atomics), summed by
 * readers. Two cache lines so no two processes share a line. */
struct pc_stats_shm {
    _Atomic uint64_t hits, misses, stores, removes, expired, destroyed, reads, retries;
    _Atomic uint64_t inserted, deleted, ovf_in, ovf_out, fallbacks, nomem, splits_done, evicted;
};
_Static_assert(sizeof(struct pc_stats_shm) == 128, "stats are two cache lines");

/* ---- processes ---------------------------------------------------------- */
#define PC_TOKEN_IDX_BITS 12u
#define PC_TOKEN_IDX_MASK ((1u << PC_TOKEN_IDX_BITS) - 1u)
_Static_assert(PC_MAX_PROCS < (1u << PC_TOKEN_IDX_BITS), "slot index fits a token");

struct pc_proc_shm {
    _Atomic uint32_t token; /* gen << 12 | index; 0 = free. CAS to claim. */
    _Atomic int32_t pid;
    _Atomic uint64_t starttime; /* /proc/<pid>/stat field 22: tells pid reuse */
    /* The token pid and starttime were written for, stored after them: a
     * slot whose token differs is being claimed and is never judged dead
     * by its pid (that pid is the previous owner's). */
    _Atomic uint32_t pid_token;
    /* The chunk this slot's owner is carving (arena.c): its first cell, 0 =
     * none; its class and its chunk-table entry. Written by the owner only,
     * read by whoever reaps the slot after the owner died. */
    pc_off carving;
    uint32_t carving_cls;
    uint64_t carving_tab;
    uint32_t carving_from; /* old class + 1 of a chunk being re-classed (rebalance.c); 0 = fresh */
    uint32_t carving_len8; /* the chunk's length in 8-byte units */
    /* Byte offset of this slot's allocation state, PC_MAX_CLASSES
     * pc_alloc_shm, carved at the first claim of the slot and kept across
     * owners. Written once by that first claimant, before it uses it. */
    _Atomic uint64_t alloc_off;
    /* Transactions of this slot's owner that wrote two or more buckets:
     * begun when their brackets open, done when their last mutation hook
     * returned (pc_txn_commit). pc_txn_quiesce waits for done to reach
     * what begun was; both only grow, so threads of one process may share
     * them. */
    _Atomic uint64_t txn_begun;
    _Atomic uint64_t txn_done;
};

/* ---- arena ------------------------------------------------------------- */
#define PC_MAX_CLASSES 96u
#define PC_CHUNK_TARGET 65536u /* bytes carved per chunk for small classes */

struct pc_pool_shm { /* global free pool of one class */
    _Atomic uint32_t lock;
    pc_off head; /* guarded by lock */
    uint64_t count;
    /* The move in progress (guarded by lock), so that the next holder can
     * finish it when this one dies mid-move (pool.c): the cell being moved
     * between the pool and the free stack whose head word is at byte
     * offset inflight_list. 0 = none. */
    pc_off inflight;
    uint32_t pad;
    uint64_t inflight_list;
};

#define PC_RESERVED_SLOTS 64u

/* ---- the region header -------------------------------------------------- */
#define PC_MAGIC 0x31454843414350ull /* "PCACHE1" */
#define PC_LAYOUT_VERSION 1u

struct pc_header_shm {
    uint64_t magic;
    uint32_t layout_version;
    uint32_t layout_fingerprint; /* sizes of the shared types, see region.c */
    uint64_t region_bytes;
    uint64_t huge_end;           /* byte offset where the huge-page extent ends */
    uint64_t plain_end;          /* byte offset where the region ends */
    _Atomic uint64_t bump_huge;  /* next free byte in the huge extent */
    _Atomic uint64_t bump_plain; /* next free byte in the plain extent */
    int32_t tier;
    int32_t pinned;
    uint32_t growth_load_factor, growth_budget;
    uint32_t nclasses;
    uint32_t ncoll;
    uint32_t class_size[PC_MAX_CLASSES]; /* immutable */
    uint64_t coll_off[PC_MAX_COLLECTIONS];
    _Atomic uint32_t maint_lock;
    _Atomic uint32_t ev_mask;   /* subscribed event types: 1u << PC_EV_* */
    uint64_t requested_huge_mb; /* for the mem_degraded event */
    _Atomic uint32_t token_gen;
    _Atomic uint32_t proc_hwm; /* highest slot index ever claimed */
    _Atomic uint64_t chunks, chunk_bytes, table_bytes;
    uint64_t chunk_tab_off; /* uint64_t entries: pc_chunk_entry(); 0 = none */
    /* PC_RESERVED_SLOTS slots' allocation state, carved with the metadata so
     * that the first processes can always start, even with the arena full */
    uint64_t alloc_reserve_off;
    uint64_t chunk_tab_cap;
    _Atomic uint64_t chunk_tab_len;
    struct pc_pool_shm pool[PC_MAX_CLASSES];
    /* Chunks each class holds (pc_chunk_publish) and its refused
     * allocations (pc_alloc): relaxed RMWs off the hot path. */
    _Atomic uint32_t class_chunks[PC_MAX_CLASSES];
    _Atomic uint64_t class_starved[PC_MAX_CLASSES];
    _Atomic int64_t starved_logged_ms; /* the last starvation warning */
    /* Eviction (evict.c). maxmemory caps chunk_bytes (0 = the region's
     * end); evict_colls counts collections whose policy evicts, so a
     * refused allocation costs one load when none does. The S3-FIFO tables
     * are carved once, on the first collection set to that policy, under
     * s3_lock; their offsets are published with release (0 = not yet). */
    _Atomic uint64_t maxmemory;
    _Atomic uint32_t evict_colls;
    _Atomic uint32_t s3_lock;
    _Atomic uint64_t s3_ring_off; /* uint64_t entries: coll index << 32 | record offset */
    uint64_t s3_ring_mask;
    _Atomic uint64_t s3_head, s3_tail; /* pushes and pops so far; head - tail = queue length */
    _Atomic uint64_t s3_ghost_off;     /* uint32_t fingerprints of keys evicted from the queue */
    uint64_t s3_ghost_mask;
    _Atomic uint64_t s3_target;      /* the small queue's length goal: a tenth of the entries */
    _Atomic uint64_t s3_ghost_used;  /* ghost slots in use: the entries, rounded up to 2^k */
    _Atomic int64_t s3_target_at_ms; /* when s3_target was last computed */
    _Atomic uint32_t evict_rr;       /* round-robin start over evicting collections */
    _Atomic uint64_t drain_cursor;   /* where drain.c looks for a chunk next */
    /* One drain at a time (drain.c), under drain_lock: the cells it holds
     * are in the log (PC_DRAIN_LOG pc_off at drain_log_off, carved with the
     * metadata), entries [0, drain_log_n) possibly non-zero; whoever takes
     * the lock over from a dead holder frees them. */
    _Atomic uint32_t drain_lock;
    uint32_t drain_log_n;
    uint64_t drain_log_off;
    struct pc_proc_shm procs[PC_MAX_PROCS];
};

/* One process slot's allocation state for one class. It lives in shared
 * memory (pc_proc_shm.alloc_off) so that what a dead process held can be
 * recovered; only the slot's owner writes it, without atomics, except that
 * a pool's lock holder may move cells on or off it (pool.c) while that owner
 * is dead. Every store the recovery depends on is ordered by a compiler
 * fence (PC_CRASH_ORDER): a SIGKILL stops a process between two
 * instructions, and the stores it retired reach memory. */
struct pc_alloc_shm {
    pc_off bump, end; /* current chunk: next cell, chunk end */
    pc_off free_head; /* private free stack, linked through bytes 4..7 */
    uint32_t free_count;
};
_Static_assert(sizeof(struct pc_alloc_shm) == 16, "allocation state is 16 bytes");
#define PC_CRASH_ORDER() atomic_signal_fence(memory_order_seq_cst)

/* A chunk-table entry: length / 8 (bits 40..63), byte offset / 8 (8..39),
 * class (0..7; 0xff = no chunk). An entry of 0 is a chunk not carved yet.
 * Written with release by the process that carves or re-classes it. */
static inline uint64_t pc_chunk_entry(uint64_t off, uint64_t bytes, unsigned cls)
{
    return (bytes >> 3) << 40 | (off >> 3) << 8 | cls;
}
static inline uint64_t pc_chunk_e_off(uint64_t e)
{
    return ((e >> 8) & 0xffffffffu) << 3;
}
static inline uint64_t pc_chunk_e_len(uint64_t e)
{
    return (e >> 40) << 3;
}

/* ---- process-local handles -------------------------------------------- */

struct pc_coll {
    pc_cache *c;
    struct pc_coll_shm *shm;
    unsigned idx;
    /* pc_get_alloc's guess of the next value's size in this process (the
     * last hit's, rounded up), 0 = no guess; see pc_obtain_ahead */
    _Atomic uint32_t alloc_guess;
};

struct pc_cache {
    struct pc_header_shm *hdr;
    unsigned char *base; /* region base; offsets are relative to it */
    uint64_t region_bytes;
    void *map_addr; /* the whole reservation, for munmap */
    size_t map_len;
    uint64_t epoch; /* fork epoch this handle's local state belongs to */
    uint32_t token; /* this process's owner token (0 until claimed) */
    uint32_t slot;
    int64_t reap_next_ms;  /* pc_maintain's next look for dead slots */
    uint64_t reclaim_seen; /* pooled cells at this process's last fruitless reclaim */
    int64_t reclaim_at_ms; /* and when it was */
    int64_t
        drain_next_ms[PC_MAX_CLASSES];   /* per class: no chunk drain before (after a failed one) */
    struct pc_alloc_shm *cls;            /* this slot's state in the region; NULL until claimed */
    uint32_t class_size[PC_MAX_CLASSES]; /* copy of hdr->class_size */
    unsigned nclasses;
    unsigned ncoll;
    struct pc_coll coll[PC_MAX_COLLECTIONS];
    pc_logger log;     /* pc_config.log */
    pc_event_fn ev_fn; /* this process's event handler */
    void *ev_ctx;
    pc_mutation_fn mut_fn; /* this process's mutation hook */
    void *mut_ctx;
    pc_txn *txn; /* bound transaction (pc_txn_bind): data operations route to it */
    /* pc_snap_begin .. pc_snap_end: each lock-free read appends the bucket
     * version it read under (process-local, grown outside any lock) */
    uint64_t txn_seq; /* commits of this handle that called the hook (pc_mutation.txn) */
    bool snap_on;
    bool snap_lost; /* an entry could not be recorded: the check fails */
    unsigned snap_n, snap_cap;
    struct pc_snap_ent *snap;
};

/* ---- small inline helpers ----------------------------------------------- */
static inline void *pc_at(const pc_cache *c, uint64_t byte_off)
{
    return c->base + byte_off;
}

/* Resolves a cell offset with an extent check: NULL when it cannot name a
 * cell inside the region (I1: a stale offset is garbage, never a fault). */
static inline void *pc_cell(const pc_cache *c, pc_off off)
{
    uint64_t b = (uint64_t)off << PC_OFF_SHIFT;
    if (PC_UNLIKELY(off == 0 || b + PC_CELL_ALIGN > c->region_bytes))
        return NULL;
    return c->base + b;
}

static inline pc_off pc_off_of(const pc_cache *c, const void *p)
{
    return (pc_off)(((const unsigned char *)p - c->base) >> PC_OFF_SHIFT);
}

/* Cell size of a class id read from shared memory: 0 for an invalid id. */
static inline size_t pc_class_bytes(const pc_cache *c, unsigned cls)
{
    return cls < c->nclasses ? c->class_size[cls] : 0;
}

static inline struct pc_stats_shm *pc_stats(const pc_coll *coll)
{
    struct pc_stats_shm *s = pc_at(coll->c, coll->shm->stats_off);
    return s + coll->c->slot;
}
/* s: this process's stats line (pc_stats), for a caller that bumps several */
#define PC_STAT_BUMP(s, field, n)                                                                  \
    atomic_store_explicit(&(s)->field,                                                             \
                          atomic_load_explicit(&(s)->field, memory_order_relaxed) + (n),           \
                          memory_order_relaxed)
#define PC_STAT_ADD(coll, field, n) PC_STAT_BUMP(pc_stats(coll), field, n)

/* in - out of a per-process counter pair, summed over every slot ever
 * claimed (fields given by offset into pc_stats_shm). Off the hot path:
 * growth, eviction and the statistics read it. */
static inline uint64_t pc_stats_pair(const pc_coll *coll, size_t in_off, size_t out_off)
{
    const unsigned char *s = pc_at(coll->c, coll->shm->stats_off);
    uint32_t hwm = atomic_load(&coll->c->hdr->proc_hwm);
    uint64_t in = 0, out = 0;
    for (uint32_t i = 0; i <= hwm && i < PC_MAX_PROCS; i++) {
        const unsigned char *line = s + (size_t)i * sizeof(struct pc_stats_shm);
        in += atomic_load_explicit((const _Atomic uint64_t *)(line + in_off), memory_order_relaxed);
        out +=
            atomic_load_explicit((const _Atomic uint64_t *)(line + out_off), memory_order_relaxed);
    }
    return in >= out ? in - out : 0; /* a racing pair may read skewed */
}

static inline uint64_t pc_coll_entries(const pc_coll *coll)
{
    return pc_stats_pair(coll, offsetof(struct pc_stats_shm, inserted),
                         offsetof(struct pc_stats_shm, deleted));
}

static inline uint64_t pc_route_load(const struct pc_coll_shm *cs)
{
    return atomic_load_explicit(&cs->route, memory_order_acquire);
}

static inline uint64_t pc_route_index(uint64_t route, unsigned log2n0, uint64_t h)
{
    unsigned level = (unsigned)(route >> 32);
    uint64_t split = route & 0xffffffffu;
    uint64_t size = 1ull << (log2n0 + level);
    uint64_t idx = h & (size - 1);
    if (idx < split)
        idx = h & (2 * size - 1);
    return idx;
}

static inline uint64_t pc_route_buckets(uint64_t route, unsigned log2n0)
{
    return (1ull << (log2n0 + (unsigned)(route >> 32))) + (route & 0xffffffffu);
}

static inline unsigned pc_seg_of(uint64_t idx, unsigned log2n0, uint64_t *local)
{
    uint64_t hi = idx >> log2n0;
    if (hi == 0) {
        *local = idx;
        return 0;
    }
    unsigned j = 64u - (unsigned)__builtin_clzll(hi); /* hi in [2^(j-1), 2^j) */
    *local = idx - (1ull << (log2n0 + j - 1));
    return j;
}

static inline struct pc_bucket_shm *pc_bucket_at(const pc_coll *coll, uint64_t idx)
{
    uint64_t local;
    unsigned j = pc_seg_of(idx, coll->shm->log2_initial, &local);
    struct pc_bucket_shm *seg = pc_at(coll->c, coll->shm->seg_off[j]);
    return seg + local;
}

static inline _Atomic uint32_t *pc_hint_at(const pc_coll *coll, uint64_t idx)
{
    uint64_t local;
    unsigned j = pc_seg_of(idx, coll->shm->log2_initial, &local);
    _Atomic uint32_t *seg = pc_at(coll->c, coll->shm->hint_off[j]);
    return seg + local;
}

static inline struct pc_chain_shm *pc_chain_for(const pc_coll *coll, uint64_t h)
{
    struct pc_chain_shm *ch = pc_at(coll->c, coll->shm->chains_off);
    return ch + (h & (PC_CHAINS - 1));
}

/* Expiry hints are seconds of CLOCK_MONOTONIC plus one (0 = no expiry), a
 * lower bound of the earliest expiry they cover. */
static inline uint32_t pc_hint_of(int64_t expires_ms)
{
    if (expires_ms <= 0)
        return 0;
    uint64_t s = (uint64_t)expires_ms / 1000u + 1u;
    return s > UINT32_MAX ? UINT32_MAX : (uint32_t)s;
}

/* Seqlock writer bracket (I3). The opening bump is an acq_rel RMW followed
 * by a release fence so no payload store can become visible before the odd
 * version on weakly ordered CPUs (aarch64, ppc64le). */
static inline void pc_wbegin(struct pc_bucket_shm *b)
{
    uint32_t v = atomic_fetch_add_explicit(&b->version, 1, memory_order_acq_rel);
    atomic_thread_fence(memory_order_release);
    PC_ASSERT(NULL, I3, (v & 1) == 0 && atomic_load_explicit(&b->lock, memory_order_relaxed) != 0);
}
static inline void pc_wend(struct pc_bucket_shm *b)
{
    uint32_t v = atomic_fetch_add_explicit(&b->version, 1, memory_order_release);
    PC_ASSERT(NULL, I3, (v & 1) == 1 && atomic_load_explicit(&b->lock, memory_order_relaxed) != 0);
}

/* Rewrites locked bucket b, which held n slots, to the nk slots keep /
 * keep_tag (dense, in order), in one version bracket; the overflow bit of
 * used is kept. The one way a sweep or an eviction drops slots. */
static inline void pc_bucket_keep(struct pc_bucket_shm *b, unsigned n, uint8_t used,
                                  const pc_off *keep, const uint8_t *keep_tag, unsigned nk)
{
    pc_wbegin(b);
    for (unsigned i = 0; i < n; i++) {
        atomic_store_explicit(&b->slot[i], i < nk ? keep[i] : 0, memory_order_relaxed);
        atomic_store_explicit(&b->tags[i], i < nk ? keep_tag[i] : 0, memory_order_relaxed);
    }
    atomic_store_explicit(&b->used, (uint8_t)(nk | (used & PC_USED_OVF)), memory_order_relaxed);
    pc_wend(b);
}

/* The bracket of a write that may run inside an outer one (a transaction's
 * commit opens every bracket first): br false = the caller brackets. */
static inline void pc_wbegin_if(struct pc_bucket_shm *b, bool br)
{
    if (br)
        pc_wbegin(b);
}
static inline void pc_wend_if(struct pc_bucket_shm *b, bool br)
{
    if (br)
        pc_wend(b);
}

/* Spin-wait hint for the CPU (the one architecture switch of the engine). */
static inline void pc_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* ==== the internal calls between the engine's files =======================
 * One group per file that provides them, lowest layer first, each naming
 * its callers, so a file's dependencies are the groups it calls into.
 * docs/architecture.md ("Inside the engine") draws the map and lists the
 * cycles that remain. */

/* ---- errors.c: the log funnel and the invariant checks ---------------------
 * Used by every file. */
void pc_log(const pc_cache *c, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- procs.c: process slots and owner-token locks --------------------------
 * Used by every file that locks. */
extern _Atomic uint64_t pc_fork_epoch;
int pc_local_refresh(pc_cache *c);
/* Every operation starts here: claims a process slot and drops inherited
 * allocator state after a fork. Cost: one load and compare. */
static inline int pc_enter(pc_cache *c)
{
    if (PC_LIKELY(c->token != 0 &&
                  c->epoch == atomic_load_explicit(&pc_fork_epoch, memory_order_relaxed)))
        return 0;
    return pc_local_refresh(c);
}
#define PC_LOCK_RECOVERED 1 /* pc_lock_word: taken over from a dead owner */
int pc_lock_slow(pc_cache *c, _Atomic uint32_t *l);
static inline int pc_lock_word(pc_cache *c, _Atomic uint32_t *l)
{
    uint32_t z = 0;
    if (PC_LIKELY(atomic_compare_exchange_strong_explicit(l, &z, c->token, memory_order_acquire,
                                                          memory_order_relaxed)))
        return 0;
    return pc_lock_slow(c, l);
}
static inline void pc_unlock_word(_Atomic uint32_t *l)
{
    atomic_store_explicit(l, 0, memory_order_release);
}
int pc_trylock_word(pc_cache *c, _Atomic uint32_t *l); /* 0 or PC_EBUSY */
/* Reaps the slots of dead processes (pool.c moves their cells to the
 * pools); returns how many. */
unsigned pc_procs_reap(pc_cache *c);
/* Whether the process that held token t is gone for good (procs.c). */
bool pc_token_gone(pc_cache *c, uint32_t t);
void pc_procs_init(struct pc_header_shm *h);

/* ---- region.c: the shared mapping and its carving --------------------------
 * Used by arena, cache, evict, growth, procs. */
int pc_region_create(pc_cache *c, const pc_config *cfg, size_t meta_bytes);
void pc_region_destroy(pc_cache *c);
/* Carves bytes (aligned) from the region: huge extent first, then plain.
 * Returns the byte offset or 0 when the region is full. */
uint64_t pc_region_carve(pc_cache *c, uint64_t bytes, uint64_t align);
/* Faults a carved range of the plain extent in with one system call
 * instead of a page fault per 4 KiB page at its first touch: under a
 * hypervisor a fault costs microseconds, and a snapshot's load carves
 * hundreds of megabytes of chunks at once (1M records of 200 bytes: the
 * faults were about half of the load's time). Only for a range about to
 * be written whole (a chunk, whose cells are stamped as it is published):
 * the tables' stats lines and segments are touched sparsely, and
 * populating them would commit memory nothing uses. Best effort: a kernel
 * without MADV_POPULATE_WRITE (before 5.14) or a refusal leaves the pages
 * to fault in at first touch, as before; the first EINVAL stops the
 * attempts in this process. The huge extent is left alone (pre-faulted or
 * huge-page backed). */
void pc_region_populate(pc_cache *c, uint64_t off, uint64_t bytes);

/* ---- arena.c: cells, chunks and the memory figures -------------------------
 * Used by the writers (write, txn, drain, evict), growth, sweep, cache, pool, procs, rebalance. */
void pc_arena_classes_init(uint32_t *sizes, uint32_t *n);
int pc_class_for(const pc_cache *c, size_t bytes); /* -1 if too large */
pc_off pc_alloc(pc_cache *c, size_t bytes);        /* 0 = arena full */
pc_off pc_alloc_quiet(pc_cache *c, size_t bytes);  /* the same, a refusal not reported */
/* Counts a refused allocation of class cls and warns (once a minute). */
void pc_arena_starved(pc_cache *c, unsigned cls);
void pc_free(pc_cache *c, pc_off off);
void pc_arena_drop_local(pc_cache *c);
uint64_t pc_chunk_bytes(uint32_t cell); /* bytes of one chunk of this cell size */
/* Stamps a chunk's cells with cls and enters it in the chunk table at slot
 * (idempotent: the reaper finishes a dead carver's publication with it);
 * from is the chunk's old class + 1, 0 for a newly carved chunk (counted in
 * the header's totals). */
void pc_chunk_publish(pc_cache *c, uint64_t slot, uint64_t off, uint64_t bytes, unsigned cls,
                      unsigned from);
/* Makes [first, last) the bump range of L, closed while it moves. */
void pc_bump_set(struct pc_alloc_shm *L, pc_off first, pc_off last);
/* pc_mem_stats_get's figures but the eviction count (left 0), which cache.c
 * sums from the collections' counters. Used by cache.c and evict.c. */
void pc_mem_snapshot(pc_cache *c, pc_mem_stats *out);

/* ---- rebalance.c: fully free chunks move to a starved class ----------------
 * Used by arena, evict. */
/* Called by pc_alloc when class cls has no cell and no chunk can be carved:
 * returns this process's cells to the pools, finds a chunk of another class
 * whose cells are all on that class's pool and re-classes it as this
 * process's bump range for cls. 0 when it did, PC_ENOMEM when none. */
int pc_arena_reclaim(pc_cache *c, unsigned cls);
/* Removes the cells of [off, off + bytes) from pool cls's list; the caller
 * holds the pool's lock. Returns how many. */
uint64_t pc_pool_drop_range_locked(pc_cache *c, unsigned cls, uint64_t off, uint64_t bytes);
void pc_pool_lock(pc_cache *c, struct pc_pool_shm *pool, unsigned cls);
/* This process's free cells of every class (and its bump remainders) go to
 * the pools, where they can complete a chunk for the rebalancer. */
void pc_give_all(pc_cache *c);
void pc_pool_unlock(struct pc_pool_shm *pool);
/* The room a record's cell gives, read once from its class byte and clamped
 * to the region's end: a stale offset into a chunk re-classed since reads
 * a garbage class byte, and this keeps its copy inside the region (I1). */
static inline size_t pc_rec_room(const pc_cache *c, const struct pc_rec_shm *r)
{
    size_t cell = pc_class_bytes(c, r->cls);
    uint64_t at = (uint64_t)((const unsigned char *)r - c->base);
    uint64_t left = c->region_bytes > at ? c->region_bytes - at : 0;
    return cell < left ? cell : (size_t)left;
}
/* Whether n bytes at a equal those at b. Keys of 4 to 16 bytes (most of a
 * cache's: call ids, tags, "user:1234") compare as two overlapping words,
 * where memcmp's call and its dispatch on the length cost more than the
 * compare itself; it reads exactly [0, n) of each side. */
static inline bool pc_bytes_eq(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    if (n >= 8 && n <= 16)
        return ((pc_get_le64(x) ^ pc_get_le64(y)) |
                (pc_get_le64(x + n - 8) ^ pc_get_le64(y + n - 8))) == 0;
    if (n >= 4 && n < 8)
        return ((pc_get_le32(x) ^ pc_get_le32(y)) |
                (pc_get_le32(x + n - 4) ^ pc_get_le32(y + n - 4))) == 0;
    return memcmp(x, y, n) == 0;
}
/* Whether record r holds key, its length clamped by the cell (I1/I2): a
 * torn or stale record compares unequal, never reads past the region. On
 * the read path (table.c) and under bucket and chain locks. */
static inline bool pc_rec_key_eq(const pc_cache *c, const struct pc_rec_shm *r, const void *key,
                                 size_t klen)
{
    size_t room = pc_rec_room(c, r);
    room = room > PC_REC_HDR ? room - PC_REC_HDR : 0;
    return r->klen == klen && klen <= room && pc_bytes_eq(r->data, key, klen);
}

/* ---- pool.c: the global pools and recovery from dead processes -------------
 * Used by arena, procs, rebalance. */
unsigned pc_pool_take(pc_cache *c, unsigned cls); /* cells moved to this process */
void pc_pool_give(pc_cache *c, unsigned cls, unsigned n);
/* Moves everything slot idx's allocation state holds into the pools. The
 * caller owns the slot (it claimed it from a dead owner). */
void pc_slot_reap(pc_cache *c, uint32_t idx);
/* Cells of a class carved so far: a bound for every list walk. */
uint64_t pc_class_cells_bound(const pc_cache *c);

/* ---- events.c: the event callback ------------------------------------------
 * Used by cache, evict, sweep, write.
 * The cost with no subscriber: one relaxed load of the shared mask. */
void pc_event_raise_slow(pc_cache *c, const pc_event *ev);
static inline bool pc_event_wanted(const pc_cache *c, int type)
{
    return (atomic_load_explicit(&c->hdr->ev_mask, memory_order_relaxed) & (1u << type)) != 0;
}

/* ---- collections.c: the collections specification --------------------------
 * Used by cache. */
struct pc_coll_decl {
    char name[PC_COLL_NAME_MAX + 1];
    unsigned log2;
};
int pc_collections_parse(const pc_cache *c, const char *spec, struct pc_coll_decl *out,
                         unsigned *n);

/* ---- overflow.c: the side chains ------------------------------------------
 * Callers hold the chain lock unless said otherwise.
 * Used by table, write, txn, evict, drain, growth, sweep, walk. Calls none of the other engine
 * files that touch the table: the bottom of the table layer. */
void pc_chain_lock(pc_coll *coll, struct pc_chain_shm *ch);
void pc_chain_unlock(struct pc_chain_shm *ch);
/* Finds key in a chain; *prev gets the predecessor node offset (0 = head). */
pc_off pc_chain_find(pc_coll *coll, struct pc_chain_shm *ch, const void *key, size_t klen,
                     pc_off *prev);
void pc_chain_push(pc_coll *coll, struct pc_chain_shm *ch, pc_off node, pc_off rec, uint64_t h,
                   int64_t expires);
void pc_chain_unlink(pc_coll *coll, struct pc_chain_shm *ch, pc_off prev, pc_off node);
/* Whether any node of the chain routes to bucket idx under route. */
bool pc_chain_routes_to(pc_coll *coll, struct pc_chain_shm *ch, uint64_t route, uint64_t idx);
bool pc_bucket_has_overflow(pc_coll *coll, uint64_t route, uint64_t idx);
/* Repairs a chain whose lock was taken from a dead owner. */
void pc_chain_repair(pc_coll *coll, struct pc_chain_shm *ch);
/* The overflow node at off, NULL when the offset cannot name one (a cell of
 * another class: a stale or corrupt link). */
static inline struct pc_ovf_node_shm *pc_ovf_node(const pc_cache *c, pc_off off)
{
    struct pc_ovf_node_shm *n = pc_cell(c, off);
    if (n == NULL || pc_class_bytes(c, n->cls) != sizeof *n)
        return NULL;
    return n;
}

/* ---- table.c: bucket locks and lock-free peeks -----------------------------
 * Used by write, txn, evict, drain, growth, sweep, walk. Calls overflow.c, and txn.c for a read
 * while a transaction is bound (the one call up, see docs/architecture.md). */
int pc_bucket_lock(pc_coll *coll, struct pc_bucket_shm *b, uint64_t idx);
void pc_bucket_unlock(struct pc_bucket_shm *b);
struct pc_bucket_shm *pc_lock_route(pc_coll *coll, uint64_t h, uint64_t *idx);
/* Lock-free peek: whether the bucket h routes to may hold record off (a
 * slot names it, or its keys may be in overflow). The callers (evict.c's
 * queue, drain.c) find a record from its own key read without a lock, so a
 * torn key routes anywhere: this keeps them from locking buckets no key of
 * theirs is in. */
bool pc_bucket_may_hold(pc_coll *coll, uint64_t h, pc_off off);

/* ---- write.c: the lock-held steps of a write, shared with txn.c ------------
 * Used by txn, evict, drain, walk. Calls evict.c for room (pc_alloc_evict) and txn.c for a write
 * while a transaction is bound. */
/* Where a key was found, under the bucket lock. */
struct pc_loc {
    struct pc_bucket_shm *b;
    uint64_t idx;
    struct pc_chain_shm *ch; /* locked when not NULL */
    int where;               /* 0 absent, 1 bucket slot, 2 chain node */
    unsigned slot;
    pc_off node, prev;
    pc_off rec_off;
    struct pc_rec_shm *rec;
    bool live;
};
/* Finds key in bucket b (index idx, whose lock the caller holds and which
 * key routes to); leaves the chain locked in loc->ch when it searched it. */
void pc_locate_held(pc_coll *coll, struct pc_bucket_shm *b, uint64_t idx, uint64_t h,
                    const void *key, size_t klen, int64_t now, struct pc_loc *loc);
/* The writes under the lock; br false: inside the caller's version bracket. */
void pc_replace_br(pc_cache *c, struct pc_loc *loc, pc_off rec_off, bool br);
bool pc_insert_br(pc_coll *coll, struct pc_loc *loc, uint64_t h, pc_off rec_off, int64_t expires,
                  pc_off *node, bool br);
void pc_unlink_br(pc_coll *coll, struct pc_loc *loc, pc_off *freed_node, bool br);
void pc_hint_lower(pc_coll *coll, struct pc_loc *loc, int64_t expires);
/* No lock held: */
void pc_fill_rec(pc_cache *c, pc_off off, const void *key, size_t klen, const void *val,
                 size_t vlen, uint8_t flags, int64_t expires);
void pc_nomem(pc_coll *coll, const void *key, size_t klen, size_t bytes);
unsigned pc_hooked(const pc_coll *coll);
int pc_mutated(pc_coll *coll, unsigned word, int op, const void *key, size_t klen, const void *val,
               size_t vlen, int64_t counter, int64_t expires, uint32_t stamp);
/* pc_mutated for one of a transaction's writes (pc_mutation.group, .txn). */
int pc_mutated_grp(pc_coll *coll, unsigned word, int op, const void *key, size_t klen,
                   const void *val, size_t vlen, int64_t counter, int64_t expires, uint32_t stamp,
                   uint32_t group, uint64_t txn);
bool pc_undo_put(pc_coll *coll, uint64_t h, const void *key, size_t klen, pc_off mine, pc_off prev);
bool pc_undo_remove(pc_coll *coll, uint64_t h, const void *key, size_t klen, pc_off old);
int64_t pc_deadline(int64_t now, int64_t ttl_ms);

/* ---- txn.c: the data operations of a bound transaction (pc_txn_bind) -------
 * Used by table, write (their public operations hand over to it).
 * Called by the public operations, after their argument checks, when
 * c->txn is set; same contracts as the public calls. */
int pc_txn_op_get(pc_txn *t, pc_coll *coll, const void *key, size_t klen, void *buf, size_t cap,
                  const pc_allocator *a, void **aval, size_t *vlen, size_t *needed, pc_meta *meta);
int pc_txn_op_probe(pc_txn *t, pc_coll *coll, const void *key, size_t klen, pc_meta *meta);
int pc_txn_op_counter(pc_txn *t, pc_coll *coll, const void *key, size_t klen, int64_t *out);
int pc_txn_op_set(pc_txn *t, pc_coll *coll, const void *key, size_t klen, const void *val,
                  size_t vlen, uint8_t rflags, int64_t ttl_ms, unsigned flags);
int pc_txn_op_remove(pc_txn *t, pc_coll *coll, const void *key, size_t klen);
int pc_txn_op_add(pc_txn *t, pc_coll *coll, const void *key, size_t klen, int64_t delta, bool neg,
                  int64_t ttl_ms, int64_t *result);
int pc_txn_op_expire(pc_txn *t, pc_coll *coll, const void *key, size_t klen, int64_t ttl_ms);

/* ---- evict.c: room for a write and the eviction policies -------------------
 * Used by write, txn, cache. Reaches drains through pc_alloc_drained only. */
/* pc_alloc for a write into coll: when the arena refuses and some
 * collection evicts, evicts a bounded batch at a time and tries again.
 * No lock may be held (I5: the eviction takes bucket locks itself). */
pc_off pc_alloc_evict(pc_coll *coll, size_t bytes);
/* The insert-time part of the policy, under the new key's bucket lock:
 * the tag to store (the access bit set for LRU) and, for S3-FIFO, the
 * push of the record onto the small queue (no allocation, one atomic). */
uint8_t pc_evict_on_insert(pc_coll *coll, uint64_t h, pc_off rec);
/* The maintenance process's eviction ahead of need (PC_MAINT_EVICT). */
uint64_t pc_evict_ahead(pc_cache *c);
/* A collection's policy word (enum pc_evict_policy | PC_EVICT_VOLATILE),
 * set by pc_coll_set_eviction: one relaxed load. */
static inline uint32_t pc_evict_policy_of(const pc_coll *coll)
{
    return atomic_load_explicit(&coll->shm->evict_policy, memory_order_relaxed);
}

/* ---- drain.c: a chunk's residents leave for a starved class ----------------
 * Used by evict (pc_alloc_drained only). Evicts through the callback its caller hands it, never by
 * calling evict.c. */
#define PC_DRAIN_LOG 4096u /* > the cells of a 64 KiB chunk of any class a drain takes */
/* What a drain does with a record it unlinked instead of moving (expired,
 * or its collection's policy evicts it): off and its chain node (0 = none),
 * unlinked under a bucket lock whose version became stamp, now freed by the
 * caller's eviction. evict.c hands its own, so drain.c never calls it. */
typedef void pc_drain_evicted_fn(pc_coll *coll, pc_off off, pc_off node, uint32_t stamp,
                                 int64_t now);
/* The one entry point into drains, for a write of bytes (class cls) that
 * found no cell: drains a chunk of another class (attempt n: the n-th
 * candidate class; may_evict: also the classes whose records must be
 * evicted to leave) and allocates again. Returns the cell, 0 when none;
 * after a failed last attempt no drain runs for 100 ms in this process. */
pc_off pc_alloc_drained(pc_cache *c, unsigned cls, size_t bytes, bool may_evict, unsigned attempt,
                        bool last, pc_drain_evicted_fn *evicted);

/* ---- growth.c / sweep.c: upkeep under the maintenance lock -----------------
 * Used by cache (pc_maintain) only. */
int pc_coll_carve_segment(pc_coll *coll, unsigned j);
unsigned pc_grow(pc_coll *coll, uint64_t extra, unsigned budget);
/* Moves overflow nodes back into buckets with a free slot, at most budget
 * (growth.c: the maintenance pass after the splits). */
unsigned pc_overflow_drain(pc_coll *coll, unsigned budget);
unsigned pc_sweep(pc_coll *coll, unsigned *probed);

#endif /* PC_INT_H */
