/*
 * pcache.h - the public interface of libpcache, the shared-memory engine.
 *
 * libpcache is a key-value table shared by N processes that forked from one
 * parent. The parent creates the cache (pc_cache_create) before it forks;
 * every child inherits the mapping at the same address and uses the handle it
 * inherited. Nothing here is thread-safe within one process: a process uses
 * its handle from one thread at a time (the hosts are single-threaded
 * workers). Many processes use the same cache concurrently.
 *
 * Conventions (see docs/design.md):
 *  - every function returns int: 0 on success, a negative PC_E* code on
 *    failure (the scheme is below); pc_strerror() names each engine code.
 *    Out-parameters are written only on success unless the function says
 *    otherwise.
 *  - keys and values are binary-safe byte strings (pointer + length).
 *  - "borrowed" pointer parameters are read during the call only;
 *    "caller-owned" results are released by the caller with the named free.
 *  - the library never prints: it logs through pc_config.log.
 */
#ifndef PCACHE_H
#define PCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "pcache_util.h" /* pc_log_fn, PC_LOG_*, pc_logger */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- error codes ----------------------------------------------------------
 * One scheme for every layer of the project: a failure is a code in the
 * private range -1 .. -99. A code is never a negated errno (the errno of a
 * failed system call is logged, or put in the message, instead). Each
 * number has one meaning and belongs to the one layer that defines it in
 * its public header; a number is never reused, even after its code is
 * retired, because hosts show it (JSON-RPC error -32000 + code).
 *   the engine (this header)   -1 .. -9, -11 .. -14, -19 .. -22
 *   the layers above           -10 (management), -15 .. -18 (storage)
 * A new code takes the next free number (-23 onward), is defined by the
 * lowest layer that returns it and is named by that layer's strerror
 * function, which falls back to the layer below (pc_strerror here, the
 * bottom). A caller names a code with the function of the highest layer
 * whose codes it can see. */
#define PC_OK 0
#define PC_ENOTFOUND (-1) /* key absent or expired */
#define PC_ENOMEM (-2)    /* the shared arena is full: the write was dropped */
#define PC_EINVAL (-3)    /* a bad argument */
#define PC_ETOOBIG (-4)   /* key or value longer than the limits below */
#define PC_ETOOSMALL (-5) /* caller's buffer too small: see *needed */
#define PC_ENOTNUM (-6)   /* the value is not an integer */
#define PC_ERANGE (-7)    /* a counter would overflow int64 */
#define PC_EEXIST (-8)    /* NX write on an existing key */
#define PC_ENOCOLL (-9)   /* collection not declared */
#define PC_ESYS (-11)     /* a system call failed (errno is logged) */
#define PC_ECONFIG (-12)  /* bad configuration (collections spec, sizes) */
#define PC_EBUSY (-13)    /* another process holds the maintenance role */
#define PC_ELOCKED (-14)  /* a lock could not be taken in time */
#define PC_EHEAP (-19)    /* out of process memory (malloc and friends failed) */
#define PC_EPROCS (-20)   /* every process slot (PC_MAX_PROCS) is held by a live process */
#define PC_EREFUSED (-21) /* writes refused for now (pc_coll_set_write_block) */
/* a transaction saw a key change before it committed (pc_txn_commit) */
#define PC_ECONFLICT (-22)

/* Returns a static, human-readable name for an engine code (never NULL;
 * "unknown error" for a code of another layer). */
const char *pc_strerror(int err);

/* The library's version, "MAJOR.MINOR.PATCH" (the project's one version
 * number; the soname's number is MAJOR). A static string: never freed. */
const char *pcache_version(void);

/* ---- limits ----------------------------------------------------------- */
#define PC_KEY_MAX 65535u            /* bytes in a key (fits the u16 length) */
#define PC_VALUE_MAX (1024u * 1024u) /* bytes in a value */
#define PC_COLL_NAME_MAX 63u         /* bytes in a collection name */
#define PC_MAX_COLLECTIONS 64u
#define PC_MAX_PROCS 1024u /* processes that may attach over the cache's life */
#define PC_LOG2_MIN 4u     /* collection sizes are clamped to [4, 24] */
#define PC_LOG2_MAX 24u
#define PC_LOG2_DEFAULT 14u

/* ---- logging and events --------------------------------------------------
 * The log levels, pc_log_fn and pc_logger come from pcache_util.h. */
struct pc_event;
/* An event handler: ev is borrowed for the call. */
typedef void (*pc_event_fn)(void *ctx, const struct pc_event *ev);

/* ---- memory tiers (best first) ---------------------------------------- */
enum pc_mem_tier {
    PC_TIER_HUGETLB = 1,  /* MAP_HUGETLB from the (overcommit) hugetlb pool */
    PC_TIER_THP = 2,      /* shmem transparent huge pages via MADV_HUGEPAGE */
    PC_TIER_COLLAPSE = 3, /* MADV_COLLAPSE of the pre-faulted reservation */
    PC_TIER_4K = 4        /* plain demand-faulted 4 KiB pages */
};
/* Static name of a tier: "hugetlb", "thp", "collapse", "4k". */
const char *pc_tier_name(int tier);

/* ---- configuration ---------------------------------------------------- */
typedef struct pc_config {
    /* "name;name=log2size;..." - NULL or "" declares only "default".
     * Borrowed during pc_cache_create. */
    const char *collections;
    size_t mem_mb;               /* plain (4K) shared region for records and tables */
    size_t hugepage_mb;          /* huge-page reservation in front of it; 0 = none */
    int lock_memory;             /* mlock the huge-page reservation (tiers 2-4) */
    unsigned growth_load_factor; /* entries per bucket to grow toward; 0 = never grow */
    unsigned growth_budget;      /* max bucket splits per pc_maintain call */
    pc_logger log;               /* fn NULL = silent; level: above it, nothing is formatted */
    pc_event_fn event_fn;        /* handler set at creation (sees mem_degraded) */
    void *event_ctx;
    unsigned event_mask; /* initial subscriptions: 1u << PC_EV_* */
} pc_config;

/* Fills *cfg with the defaults: collections "default", mem_mb 64,
 * hugepage_mb 0, lock_memory 1, growth_load_factor 4, growth_budget 4096,
 * log.fn NULL, log.level PC_LOG_INFO. */
void pc_config_init(pc_config *cfg);

/* ---- the cache ------------------------------------------------------------ */
typedef struct pc_cache pc_cache; /* process-local handle to the shared cache */
typedef struct pc_coll pc_coll;   /* a collection; valid as long as its cache */

/* Creates the shared region, the arena and every declared collection.
 * Call before fork(). On success *out is caller-owned: pc_cache_destroy. */
int pc_cache_create(const pc_config *cfg, pc_cache **out);

/* The most shared memory one cache maps, mem_mb + hugepage_mb + the
 * tables together: records are addressed by 32-bit offsets in 8-byte
 * units (a bucket's slots are 32-bit), so 32 GiB less 8 bytes. */
#define PC_REGION_MAX_BYTES ((uint64_t)UINT32_MAX << 3)
/* The bytes pc_cache_create would map for cfg (mem_mb, hugepage_mb and the
 * tables of cfg->collections), so a host can check them against
 * PC_REGION_MAX_BYTES when it reads its configuration. Maps nothing.
 * 0, or the collections parser's error (PC_ECONFIG...), logged through
 * cfg->log. */
int pc_cache_region_bytes(const pc_config *cfg, uint64_t *bytes);

/* Unmaps the region in this process. Other processes are unaffected; the
 * memory is gone once the last process unmaps or exits. Accepts NULL. */
void pc_cache_destroy(pc_cache *c);

/* Optional explicit post-fork hook. A fork is also detected by itself
 * (pthread_atfork), so calling this is never required. */
void pc_after_fork_child(pc_cache *c);

/* Finds a declared collection by exact name (binary compare, no prefix
 * match). The result is valid as long as the cache. */
int pc_coll_find(pc_cache *c, const char *name, size_t len, pc_coll **out);
/* Number of collections and the i-th one (declaration order). */
unsigned pc_coll_count(const pc_cache *c);
pc_coll *pc_coll_at(pc_cache *c, unsigned i);
/* Name of a collection: valid as long as the cache. */
const char *pc_coll_name(const pc_coll *coll);

/* ---- data operations --------------------------------------------------------
 * ttl_ms: 0 = no expiry; > 0 = expires that many milliseconds from now.
 * An expired entry reads as absent the moment it lapses. */

/* set flags */
#define PC_SET_NX 0x1u      /* only if absent: PC_EEXIST otherwise */
#define PC_SET_XX 0x2u      /* only if present: PC_ENOTFOUND otherwise */
#define PC_SET_KEEPTTL 0x4u /* keep an existing entry's expiry (ttl_ms ignored) */

/* Stores value under key. A write whose value is byte-identical to the
 * stored string only refreshes the expiry (one atomic store). Errors:
 * PC_ETOOBIG, PC_ENOMEM, PC_EEXIST / PC_ENOTFOUND (NX / XX), PC_EINVAL. */
int pc_set(pc_coll *coll, const void *key, size_t klen, const void *val, size_t vlen,
           int64_t ttl_ms, unsigned flags);

/* Metadata returned alongside a read. */
typedef struct pc_meta {
    int64_t ttl_ms; /* remaining milliseconds, -1 = never expires */
    int is_counter; /* 1 when the value is a native int64 counter */
    size_t vlen;    /* the value's length as returned (decimal for counters) */
    /* When is_counter, the counter as a number (the value a read returns is
     * its decimal text): a layer above needs no parser to get it back.
     * Filled by pc_get_buf, pc_get and pc_get_alloc. */
    int64_t counter;
} pc_meta;

/* Reads into the caller's buffer (no allocation). *vlen and *needed are
 * zeroed first. On a hit returns 0 and sets *vlen. When buf is too small
 * returns PC_ETOOSMALL and sets *needed to the size required (*vlen stays 0).
 * PC_ENOTFOUND on a miss. vlen and needed are required (PC_EINVAL when
 * NULL). buf is caller-owned and private to this process;
 * its contents are undefined after any non-hit. meta may be NULL. Counters
 * are formatted as decimal. */
int pc_get_buf(pc_coll *coll, const void *key, size_t klen, void *buf, size_t cap, size_t *vlen,
               size_t *needed, pc_meta *meta);

/* Hint: warm the cache lines a coming read or write of key will touch
 * (stage 0: its bucket; stage 1, once that bucket has arrived: the records
 * its tags point at). For hosts that see several keys ahead, such as a
 * pipelined batch: prefetch stage 0 for all, stage 1 for all, then run the
 * operations, so their memory misses overlap instead of queueing. Never
 * fails and changes nothing; cheap enough to be wrong. A stage other than 0
 * acts as 1. */
void pc_prefetch(pc_coll *coll, const void *key, size_t klen, int stage);

/* Memory a read copies into, from the caller's own allocator (an OpenSIPS
 * module's pkg_malloc, say), so a value is copied once, straight into
 * memory the caller owns. obtain(n, ctx) returns n bytes or NULL;
 * release(p, ctx) gives back a block obtain returned. */
typedef struct pc_allocator {
    void *(*obtain)(size_t n, void *ctx);
    void (*release)(void *p, void *ctx);
    void *ctx;
} pc_allocator;

/* Reads into a block obtained from a: on a hit *val is that block (the
 * caller's, to release as it releases the allocator's memory), holding
 * *vlen bytes and a NUL after them (not counted); a counter is formatted
 * as decimal. The allocator is called only while no lock is held, usually
 * once per hit and not at all for an absent key; a block the read did not keep is
 * released before it returns. The block may be larger than *vlen + 1: it is
 * obtained while the record is still loading, at a size guessed from this
 * process's earlier hits in the collection (a value larger than the guess
 * gets a block of its own size). PC_ENOTFOUND, PC_EHEAP when obtain fails
 * (nothing is kept), PC_EINVAL, PC_ETOOBIG (key). meta may be NULL. */
int pc_get_alloc(pc_coll *coll, const void *key, size_t klen, const pc_allocator *a, void **val,
                 size_t *vlen, pc_meta *meta);

/* Reads into a fresh malloc'd buffer. On a hit *val is caller-owned
 * (free()), NUL-terminated for convenience (the NUL is not counted in
 * *vlen). meta may be NULL. */
int pc_get(pc_coll *coll, const void *key, size_t klen, void **val, size_t *vlen, pc_meta *meta);

/* 0 when key is present and live, PC_ENOTFOUND otherwise. meta may be NULL
 * (only ttl_ms, is_counter and vlen of the stored bytes are filled). */
int pc_probe(pc_coll *coll, const void *key, size_t klen, pc_meta *meta);

/* Deletes key: 0 if it was present, PC_ENOTFOUND otherwise. */
int pc_remove(pc_coll *coll, const void *key, size_t klen);

/* Adds delta to a native int64 counter. An absent or expired key starts at
 * 0; a string value that pc_parse_i64 accepts is converted; any other
 * string (also digits past int64) gives PC_ENOTNUM. ttl_ms > 0 sets the expiry, 0 keeps the current
 * one (none for a new key). *result (may be NULL) receives the new value.
 * PC_ERANGE on overflow (the value is unchanged). */
int pc_add(pc_coll *coll, const void *key, size_t klen, int64_t delta, int64_t ttl_ms,
           int64_t *result);
int pc_sub(pc_coll *coll, const void *key, size_t klen, int64_t delta, int64_t ttl_ms,
           int64_t *result);

/* Reads a counter (or a string holding a decimal int64) as a number.
 * PC_ENOTFOUND, PC_ENOTNUM. */
int pc_get_counter(pc_coll *coll, const void *key, size_t klen, int64_t *out);

/* Parses s[0..n) as the canonical text of an int64 - an optional '-',
 * then "0" or digits without a leading zero, nothing else (Redis's
 * string2ll): the text form of a counter, as pc_get formats it (and layers
 * above keep it). "01", "-0", "+1", " 1" and "1\0" are not numbers.
 * 0, PC_ENOTNUM (not a number), PC_ERANGE (digits out of int64). */
int pc_parse_i64(const unsigned char *s, size_t n, int64_t *out);

/* Sets the expiry of an existing key without touching its value (one
 * atomic write that readers need not retry for): ttl_ms 0 = never expire.
 * PC_ENOTFOUND if absent. */
int pc_expire(pc_coll *coll, const void *key, size_t klen, int64_t ttl_ms);

/* ---- maintenance ---------------------------------------------------------
 * One process (the host's maintenance process or timer) calls pc_maintain
 * periodically. It splits buckets toward growth_load_factor (at most
 * growth_budget per call), drains overflow back into buckets, and, when
 * sweep is set, reclaims expired entries guided by per-bucket hints. With
 * PC_MAINT_REAP (at most once a second) it finds the process slots of
 * processes that died and returns the cells they held (their free stacks,
 * the rest of their chunks) to the shared pools. */
typedef struct pc_maint_report {
    unsigned splits;         /* buckets split in this call */
    unsigned drained;        /* entries moved from overflow into buckets */
    unsigned reaped;         /* expired entries reclaimed */
    unsigned buckets_probed; /* buckets the sweep locked */
    unsigned procs_reaped;   /* slots of dead processes whose cells were recovered */
    unsigned evicted;        /* keys evicted ahead of need (PC_MAINT_EVICT) */
} pc_maint_report;
#define PC_MAINT_GROW 0x1u
#define PC_MAINT_SWEEP 0x2u
#define PC_MAINT_REAP 0x4u
/* With a collection that evicts and the arena at its cap, evicts until the
 * free cells reach a low-water mark (a 64th of the cap, at most 1024 keys a
 * call), so writers seldom have to evict themselves. */
#define PC_MAINT_EVICT 0x8u
#define PC_MAINT_ALL (PC_MAINT_GROW | PC_MAINT_SWEEP | PC_MAINT_REAP | PC_MAINT_EVICT)
/* Returns PC_EBUSY when another process is inside pc_maintain. report may
 * be NULL. */
int pc_maintain(pc_cache *c, unsigned what, pc_maint_report *report);

/* Grows the collection now so that entries more keys fit at the cache's
 * growth_load_factor without overflowing (splits with no budget, up to the
 * largest size; nothing when growth is off). For a bulk load that knows its
 * size and runs before any maintenance process does (a snapshot's load):
 * without it the keys pile into the overflow chains of the initial table,
 * whose walk every later insert pays. Returns the splits made (>= 0),
 * PC_EBUSY when another process is inside pc_maintain, PC_EINVAL. */
int pc_coll_reserve(pc_coll *coll, uint64_t entries);

/* ---- gauges and counters (cheap snapshot; sums per-process shards) ------- */
typedef struct pc_coll_stats {
    uint64_t entries; /* live + not yet reclaimed entries */
    uint64_t buckets;
    uint64_t overflow; /* entries living in the overflow side chains */
    uint64_t hits, misses, stores, removes, expired, destroyed;
    uint64_t reads, seqlock_retries, lock_fallbacks, nomem;
    uint64_t splits;
    uint64_t evicted;      /* keys evicted to make room (pc_coll_set_eviction) */
    unsigned log2_initial; /* declared size after clamping */
    int64_t reset_at;      /* wall-clock seconds of the last pc_stats_reset, 0 = never */
} pc_coll_stats;
int pc_coll_stats_get(pc_coll *coll, pc_coll_stats *out);
/* The same with every counter counted from the cache's creation, whatever
 * pc_stats_reset recorded (for hosts whose statistics are cumulative, such
 * as OpenSIPS's); reset_at still tells when the last reset was. */
int pc_coll_stats_total(pc_coll *coll, pc_coll_stats *out);

typedef struct pc_mem_stats {
    int tier;              /* enum pc_mem_tier actually achieved */
    int pinned;            /* mlock succeeded on the huge-page reservation */
    size_t hugepage_bytes; /* size of the huge-page reservation (0 = none) */
    size_t hugepage_free;  /* never negative: carving falls through to the plain extent */
    size_t plain_bytes;
    size_t plain_free;
    uint64_t chunks;      /* slab chunks carved */
    uint64_t chunk_bytes; /* bytes in carved chunks */
    uint64_t table_bytes; /* bytes in bucket segments and hint arrays */
    /* Of chunk_bytes: bytes of the cells holding records or overflow nodes,
     * and of the free cells (on the pools, on every process's free stacks,
     * the rest of their current chunks). Summed without locks: a snapshot
     * that may be off by what moves meanwhile. */
    uint64_t used_cell_bytes;
    uint64_t free_cell_bytes;
    uint64_t starved;   /* allocations refused (PC_ENOMEM) since creation, all classes */
    uint64_t maxmemory; /* the cap of pc_set_maxmemory; 0 = none (the region's end) */
    uint64_t evicted;   /* keys evicted, all collections, since creation */
} pc_mem_stats;
int pc_mem_stats_get(pc_cache *c, pc_mem_stats *out);

/* One size class of the arena, for memory reports (pc_mem_classes). */
typedef struct pc_mem_class {
    uint32_t cell_bytes; /* the cell size of the class */
    uint64_t chunks;     /* chunks the class holds now */
    uint64_t cells;      /* cells in them */
    uint64_t free_cells; /* of which free (pooled or on a process's stack or chunk) */
    uint64_t starved;    /* allocations of this class refused: no cell, no chunk */
} pc_mem_class;
/* Fills out[0 .. *n) with the classes that hold a chunk or were starved,
 * smallest first, at most cap of them (cap >= 96 gets them all). Errors:
 * PC_EINVAL. */
int pc_mem_classes(pc_cache *c, pc_mem_class *out, unsigned cap, unsigned *n);

/* ---- iteration: one lock-free walker ------------------------------------
 * The walker visits buckets in ascending index order. Each bucket (with the
 * overflow entries that route to it) is copied out under its seqlock, then
 * the callback runs with no lock held, so it may call any operation of this
 * header (glob delete calls pc_remove from it). Every entry present for the
 * whole walk is visited at least once, even while the table grows: a split
 * only moves keys to a higher bucket index. An entry may be visited twice. */
typedef struct pc_entry { /* borrowed: valid during the callback only */
    const void *key;
    size_t klen;
    const void *val; /* NULL unless PC_WALK_VALUES; counters as decimal */
    size_t vlen;
    int64_t ttl_ms; /* remaining milliseconds, -1 = never */
    int is_counter;
    uint32_t stamp; /* bucket version the entry was read under (see pc_mutation) */
} pc_entry;
/* Returns 0 to continue, anything else to stop the walk (that value is
 * passed back by the walk). */
typedef int (*pc_walk_fn)(void *ctx, const pc_entry *e);
#define PC_WALK_VALUES 0x1u
#define PC_WALK_RAW 0x2u  /* counters as their 8 little-endian int64 bytes */
#define PC_GLOB_MAX 4096u /* bytes in a glob pattern */

/* Shell glob over binary strings: '*' any run, '?' one byte, '[...]' a set
 * ('!' or '^' negates, 'a-z' ranges), '\' escapes the next byte. Returns 1
 * on a match, 0 otherwise. A malformed pattern (unterminated '[' or a
 * trailing '\') matches its bytes literally where they cannot be read as
 * syntax; pc_glob_check reports it. */
int pc_glob_match(const void *pat, size_t plen, const void *s, size_t slen);
/* 0 when pat is a well-formed glob, PC_EINVAL otherwise, PC_ETOOBIG past
 * PC_GLOB_MAX. */
int pc_glob_check(const void *pat, size_t plen);

/* Visits up to max_buckets buckets starting at bucket index cursor, calling
 * fn for each live entry whose key matches glob (NULL glob = all). *next
 * receives the cursor to continue from, 0 when the walk is complete.
 * PC_EINVAL for a cursor past the table's end. */
int pc_scan(pc_coll *coll, uint64_t cursor, uint64_t max_buckets, const void *glob, size_t glen,
            unsigned flags, pc_walk_fn fn, void *ctx, uint64_t *next);
/* The whole collection: pc_scan from 0 until done. */
int pc_walk(pc_coll *coll, const void *glob, size_t glen, unsigned flags, pc_walk_fn fn, void *ctx);
/* Every live entry in ascending pc_order_key(pc_hash(key)) order (each key
 * once): a stable order for copies of a whole collection, see walk.c. Same
 * guarantees as pc_walk; the callback runs with no lock held. */
int pc_walk_ordered(pc_coll *coll, unsigned flags, pc_walk_fn fn, void *ctx);
/* The order of pc_walk_ordered: the 64-bit hash with its bits reversed. */
uint64_t pc_order_key(uint64_t hash);

/* Deletes every key matching glob; *count = keys deleted. */
int pc_del_glob(pc_coll *coll, const void *glob, size_t glen, uint64_t *count);
/* Re-arms the expiry of every live key matching glob (as pc_expire does);
 * ttl_ms 0 = never expire. *count = keys updated. */
int pc_ttl_glob(pc_coll *coll, const void *glob, size_t glen, int64_t ttl_ms, uint64_t *count);

/* ---- statistics baseline ----------------------------------------------- */
/* Records the current counters as the collection's baseline: later
 * pc_coll_stats_get() counters (hits .. nomem) report the difference.
 * Counters are never rewound; gauges (entries, buckets, overflow) are not
 * affected. */
int pc_stats_reset(pc_coll *coll);
/* The hit rate of a stats snapshot (-1 when there were no reads) and a
 * one-line note (static string) that follows the measured value. */
const char *pc_hit_rate_note(const pc_coll_stats *st, double *rate);

/* ---- events --------------------------------------------------------------
 * Events are raised in the process that observes them (the sweep's process
 * for expired, the writer for nomem, the maintenance process for grown) and
 * handed to that process's handler. The subscription mask lives in shared
 * memory: with no subscriber an event costs one shared read. None is raised
 * on the get/set hit path. */
enum pc_event_type {
    PC_EV_EXPIRED = 0,      /* collection, key */
    PC_EV_NOMEM = 1,        /* collection, key, size */
    PC_EV_GROWN = 2,        /* collection, prev_buckets, buckets, splits, entries */
    PC_EV_MEM_DEGRADED = 3, /* requested_mb, tier, backing, overcommit_pages */
    PC_EV_RELOADED = 4,     /* collection, source: see pc_event_reloaded */
    PC_EV_EVICTED = 5,      /* collection, key (opt-in per collection) */
    PC_EV_COUNT = 6
};
typedef struct pc_event { /* borrowed: valid during the handler only */
    int type;
    const char *collection; /* NULL for mem_degraded */
    const void *key;
    size_t klen;
    uint64_t size;
    uint64_t prev_buckets, buckets, splits, entries;
    uint64_t requested_mb;
    int tier;
    const char *backing; /* "hugetlb", "thp", "collapse", "4k" */
    uint64_t overcommit_pages;
    const char *source; /* reloaded: who the new contents came from ("" = unknown) */
} pc_event;
/* Sets this process's handler (inherited by children forked later). */
int pc_event_handler(pc_cache *c, pc_event_fn fn, void *ctx);
/* Subscribes (on=1) or unsubscribes every process to an event type. */
int pc_event_subscribe(pc_cache *c, int type, int on);
/* Expired and evicted events are opt-in per collection. */
int pc_event_expired(pc_coll *coll, int on);
int pc_event_evicted(pc_coll *coll, int on);
/* Raises reloaded in this process: a layer above replaced the collection's
 * contents as a whole; source (borrowed, may be NULL) names where they came
 * from, in that layer's terms. The engine raises it never by itself. */
void pc_event_reloaded(pc_coll *coll, const char *source);
/* Static name of an event type as hosts show it ("expired", "nomem",
 * "grown", "mem_degraded", ...; see events.c); "unknown" otherwise. Names,
 * like the type numbers, are fixed once released. */
const char *pc_event_name(int type);

/* ---- mutation hook -----------------------------------------------------
 * Every collection has a hook word in shared memory, 0 unless a layer above
 * sets it (pc_coll_set_hook_word); its meaning is that layer's. On a
 * collection whose word is not 0, every acknowledged mutation calls this
 * process's hook after the bucket lock is released and before the
 * operation returns, with the word as it was read for that mutation; a
 * non-zero hook result is returned by the operation (the layer above did
 * not take the change: it is undone when it can be, see pc_mutation_fn).
 * With the word at 0 a
 * mutation costs one relaxed shared read more than without a hook.
 * stamp orders writes of one key across processes: two writes of the same
 * key carry stamps a < b in serial-number order ((int32_t)(b - a) > 0)
 * when b happened later. It is the key's bucket version after the write
 * (splits hand a bucket's version to the bucket they create), so it is also
 * comparable with pc_entry.stamp read by a walk. */
enum pc_mutation_op {
    PC_MUT_SET = 1,     /* val/vlen, expires */
    PC_MUT_COUNTER = 2, /* counter (the resulting value), expires */
    PC_MUT_DEL = 3,
    PC_MUT_EXPIRE = 4, /* expires only */
    /* the engine removed the key to make room (eviction): key only. A
     * journal records it as a delete so that replay agrees with memory;
     * a replicating layer keeps it local. The hook's result is ignored:
     * the key is gone from memory either way. */
    PC_MUT_EVICT = 5
};
typedef struct pc_mutation { /* borrowed: valid during the hook only */
    pc_coll *coll;
    int op;
    unsigned word; /* the collection's hook word (not 0) */
    const void *key;
    size_t klen;
    const void *val;
    size_t vlen;
    int64_t counter;
    int64_t expires_mono_ms; /* CLOCK_MONOTONIC deadline in ms, 0 = never */
    uint32_t stamp;
    /* A transaction's writes (pc_txn_commit) come one call per key, after
     * every one of them is in the table. group = 0: a write alone; n > 0:
     * one of the commit's writes to this collection, with n - 1 more of
     * them still to come in this process's next calls (1: the last), and
     * txn the commit's number (process-local, never 0), so that a layer
     * above can keep them together (the journal: all or none at replay). */
    uint32_t group;
    uint64_t txn;
} pc_mutation;
/* A non-zero hook result means the layer above did not take the write:
 * the operation then undoes it in the table before returning that result,
 * when nothing changed the key since (it re-takes the lock and puts the
 * previous record, value or expiry back; the previous record is freed only
 * after the hook returned). A write some other writer already superseded
 * stays. */
typedef int (*pc_mutation_fn)(void *ctx, const pc_mutation *m);
/* Sets this process's hook (inherited by children forked later); NULL
 * removes it. */
int pc_mutation_hook(pc_cache *c, pc_mutation_fn fn, void *ctx);
/* The hook word of a collection (0 = no hook calls). Stored in shared
 * memory, so it applies to every process. */
int pc_coll_set_hook_word(pc_coll *coll, unsigned word);
unsigned pc_coll_hook_word(const pc_coll *coll);
/* The "refuse writes" switch of a collection, in shared memory (every
 * process): while rc != 0, every write function (pc_set, pc_set_counter,
 * pc_remove, pc_add, pc_sub, pc_expire and the glob forms) returns rc
 * before it touches the table; reads go on. The engine does not know why:
 * the storage layer sets it while the journal cannot write (PC_EREFUSED).
 * rc must be 0 or negative. The write path reads it next to the hook word,
 * one relaxed load. */
int pc_coll_set_write_block(pc_coll *coll, int rc);
int pc_coll_write_block(const pc_coll *coll);

/* Stores a native counter with its value (restoring a snapshot). */
int pc_set_counter(pc_coll *coll, const void *key, size_t klen, int64_t value, int64_t ttl_ms);

/* ---- transactions (txn.c) -------------------------------------------------
 * An optimistic transaction over keys of one or more collections of one
 * cache, serializable against every other operation of every process:
 *  - while a transaction is bound to its cache in this process
 *    (pc_txn_bind), the data operations of this header - pc_get_buf,
 *    pc_get, pc_get_alloc, pc_probe, pc_get_counter, pc_set,
 *    pc_set_counter, pc_remove, pc_add, pc_sub, pc_expire - run against the
 *    transaction instead of the table: a read observes the key lock-free
 *    (its bucket, that bucket's even seqlock version, its record and
 *    expiry) and copies the value into the transaction; a write is staged
 *    in the transaction's process memory. Reads see the transaction's own
 *    staged writes (the overlay is the engine's). Nothing in the table
 *    changes and nothing is journaled before the commit. Walks, scans and
 *    the glob forms are not transactional (the hosts refuse them inside a
 *    transaction);
 *  - pc_txn_commit builds every new record outside any lock, locks the
 *    bucket each observed key routes to now in one global order
 *    (collection, then bucket index: the order splits take), re-checks the
 *    routing and that each key is as observed, opens the version brackets
 *    of all those buckets, installs every staged write, closes the
 *    brackets, unlocks, then calls the mutation hook once per written key
 *    (as any write does, so the journal sees a committed transaction as
 *    its writes) and frees the records replaced. A reader of any two of
 *    its keys sees both old or both new. "As observed" is judged per key:
 *    a bucket at the version observed is unchanged; otherwise a key live
 *    then must be live in the same record with the same expiry and value
 *    (a 64-bit fingerprint of its bytes and flags), and a key absent or
 *    expired then must be absent or expired. A write of the key (bar a set
 *    of the very bytes and expiry it holds, which changes nothing), its
 *    removal, an expiry change or the key lapsing is a conflict: nothing
 *    is applied and PC_ECONFLICT is returned; the caller resets and runs
 *    the transaction again (pc_txn_run does it). Writes to other keys of
 *    its bucket and splits are not conflicts, bar a split between the
 *    commit's routing and its lock.
 * A transaction belongs to the process that began it and is used from one
 * thread. Expiries are taken at the time of the staged call (ttl_ms from
 * then). */
typedef struct pc_txn pc_txn;

/* A new, empty transaction on c. *out is caller-owned: pc_txn_free.
 * PC_EHEAP, PC_EINVAL. */
int pc_txn_begin(pc_cache *c, pc_txn **out);
/* Frees t (unbinding it first if bound). Accepts NULL. */
void pc_txn_free(pc_txn *t);
/* Routes this process's data operations on t's cache through t (t NULL:
 * back to the table). One transaction is bound at a time; binding another
 * replaces it. PC_EINVAL when t belongs to another cache. */
int pc_txn_bind(pc_cache *c, pc_txn *t);
/* Observes key as pc_txn's reads do, without copying its value (that
 * waits for a read through t): the key is checked at commit (and by
 * pc_txn_validate) like a read one, and survives pc_txn_reset (Redis's
 * WATCH). A transaction holds the bytes of every key it touched (and the
 * values it read or staged) until reset: its caller bounds how many.
 * PC_EINVAL, PC_ETOOBIG, PC_EHEAP. */
int pc_txn_watch(pc_txn *t, pc_coll *coll, const void *key, size_t klen);
/* Whether every key t observed is still as observed, checked lock-free
 * now: 0, or PC_ECONFLICT. Cheap; a later commit checks again. */
int pc_txn_validate(pc_txn *t);
/* Drops t's staged writes and its observations, except those of
 * pc_txn_watch (which stay as observed then), so the work can run again. */
void pc_txn_reset(pc_txn *t);
/* Drops everything, watches too: t is as new. */
void pc_txn_clear(pc_txn *t);
/* Number of keys t has staged a write for. */
unsigned pc_txn_writes(const pc_txn *t);
/* Commits t as described above. Need not be unbound first (the commit
 * itself never runs through a binding). 0: every staged write is in the
 * table and was handed to the mutation hook; t is then empty (as after
 * pc_txn_clear: its observations are stale once it wrote). PC_ECONFLICT:
 * nothing applied, t unchanged (reset it to retry). PC_ENOMEM (arena full),
 * PC_EREFUSED or another write-block code (pc_coll_set_write_block of a
 * collection written), PC_EHEAP: nothing applied. A non-zero result of the
 * mutation hook: the writes of that key and of every key after it in the
 * transaction are undone as pc_set undoes one (writes the hook already
 * took stay), and that result is returned. */
int pc_txn_commit(pc_txn *t);

/* Waits until every transaction of two or more buckets whose writes were
 * in the table when it was called has handed them all to the mutation
 * hook, in every process of the cache (a dead process's are given up).
 * A walk that ends, then this, then a sync of what the hooks staged
 * (pcache_journal.h, pc_journal_save) can see part of a transaction only
 * if all of it is in the journal. 0, or PC_ELOCKED after timeout_ms with
 * one still in flight (a stopped process). */
int pc_txn_quiesce(pc_cache *c, unsigned timeout_ms);

/* The retry loop for a read-modify-write: begins a transaction, binds it,
 * calls fn(ctx) (which uses the ordinary data operations), unbinds and
 * commits; on PC_ECONFLICT resets and goes again, up to max_attempts (0 =
 * 100). A non-zero result of fn stops without committing and is returned.
 * PC_ECONFLICT when every attempt conflicted. fn runs once per attempt,
 * so any output it produces must be redone (or undone) per attempt. Called
 * while a transaction is bound (a command running inside an EXEC), it joins
 * that one: fn runs once, through it, and nothing is committed here. */
typedef int (*pc_txn_fn)(void *ctx);
int pc_txn_run(pc_cache *c, pc_txn_fn fn, void *ctx, unsigned max_attempts);

/* ---- snapshot reads of several keys (table.c) -----------------------------
 * A read of several keys (pcached's MGET) that must see one moment - all of
 * a committed transaction's writes or none - without taking locks: between
 * pc_snap_begin and pc_snap_end, every read of this process's handle
 * (pc_get_buf, pc_get, pc_get_alloc, pc_probe, pc_get_counter) records the
 * version of the bucket it read and the table's routing; pc_snap_end checks
 * that none changed since. A commit opens the brackets of all its buckets
 * before it closes any (pc_txn_commit), so if every bucket read is
 * unchanged at the end, there was an instant (between the last read and
 * the first re-check) at which every value read was the current one.
 * Reads made through a bound transaction record nothing (its commit checks
 * them). Not nestable; one thread of a handle at a time, as pc_txn_bind.
 * The caller that gets PC_ECONFLICT discards what it read and reads again,
 * or reads through a transaction (pc_txn_run), whose commit locks. */
void pc_snap_begin(pc_cache *c);
/* Stops recording. 0: the reads since pc_snap_begin are of one moment;
 * PC_ECONFLICT: a bucket read changed (or the record of one read could not
 * be kept: no memory). PC_EINVAL when c is NULL. */
int pc_snap_end(pc_cache *c);

/* ---- eviction (evict.c) ---------------------------------------------------
 * A collection's policy says whether a write that finds the arena full
 * (or at the cap of pc_set_maxmemory) may make room by removing other keys,
 * and which. The policy lives in shared memory (every process); the arena
 * is shared, so a write into any collection may evict from the collections
 * whose policy evicts - its own first, then the others in turn - and a
 * write finds nothing to evict only when none does (PC_ENOMEM, as before).
 *  - PC_EVICT_LRU: CLOCK, a second-chance approximation of LRU. Each bucket
 *    slot has an access bit that a read sets (one atomic OR, only while it
 *    is clear) and an insert sets; a sweep hand goes round the buckets,
 *    clearing set bits and evicting keys whose bit is clear.
 *  - PC_EVICT_S3FIFO: S3-FIFO (Yang et al., SOSP 2023) on the same bits. A
 *    new key enters a small FIFO queue (a tenth of the entries) with its
 *    bit clear; when it reaches the queue's end unread it is evicted and
 *    remembered in a ghost table, read since and it stays in the main part,
 *    which the CLOCK hand serves. A key inserted while its ghost is
 *    remembered skips the queue. One-hit wonders leave fast; a scan larger
 *    than the cache leaves a part of it resident.
 *  - PC_EVICT_RANDOM: the hand evicts what it meets, no bits.
 *  - | PC_EVICT_VOLATILE: only keys with a TTL are evicted (Redis's
 *    volatile-*); a full arena with none left refuses the write.
 * An expired key the hand meets is always taken first. Every eviction runs
 * in the process that needs the room (or in pc_maintain ahead of need),
 * takes one bucket lock at a time, allocates nothing and is bounded per
 * write. Evicted keys are counted (pc_coll_stats.evicted), raise
 * PC_EV_EVICTED when the collection opted in, and reach the mutation hook
 * as PC_MUT_EVICT. */
enum pc_evict_policy {
    PC_EVICT_NONE = 0,   /* "noeviction": the default */
    PC_EVICT_LRU = 1,    /* "allkeys-lru" */
    PC_EVICT_S3FIFO = 2, /* "allkeys-s3fifo" */
    PC_EVICT_RANDOM = 3  /* "allkeys-random" */
};
#define PC_EVICT_VOLATILE 0x10u /* "volatile-lru", "volatile-s3fifo", "volatile-random" */
/* Sets coll's policy. PC_EINVAL for an unknown one; PC_ENOMEM when the
 * S3-FIFO tables (about 1.6% of the region, carved once for the cache)
 * find no room. */
int pc_coll_set_eviction(pc_coll *coll, int policy);
int pc_coll_eviction(const pc_coll *coll);
/* Redis's spelling of a policy (static string; "unknown" otherwise). */
const char *pc_evict_policy_name(int policy);
/* Parses Redis's spelling (case-insensitive) and pcache's
 * allkeys-s3fifo / volatile-s3fifo. PC_EINVAL for anything else, including
 * Redis's LFU and volatile-ttl policies, which pcache does not have. */
int pc_evict_policy_parse(const char *name, size_t len, int *policy);
/* Caps the bytes of slab chunks the arena carves for records (0 = no cap:
 * the region's end). Chunks are never returned (I2), so a cap below what is
 * carved already stops further carving; evicting collections then write
 * into the cells eviction frees. PC_EINVAL for a NULL cache. */
int pc_set_maxmemory(pc_cache *c, uint64_t bytes);
uint64_t pc_maxmemory(const pc_cache *c);

/* 64-bit hash used for keys (XXH3). Exposed for tests and tools. */
uint64_t pc_hash(const void *key, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* PCACHE_H */
