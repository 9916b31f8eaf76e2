/*
 * pcache_store.h - the snapshot store of pcache: the one public header of
 * storage/store/. The persistence policies, the SQL backend interface and
 * sync are pcache_persist.h; the write-ahead journal is pcache_journal.h.
 *
 * A store is a directory holding an LMDB environment (data.mdb, lock.mdb)
 * with two named databases, "meta" and "blocks", and a journal/ folder that
 * the write-ahead journal (pcache_journal.h) owns. It keeps one snapshot per
 * collection, saved and replaced atomically:
 *
 *  - a save (pc_store_save) walks the live collection lock-free in ascending
 *    pc_order_key order (pc_walk_ordered), cuts the records into blocks of
 *    about 128 KiB, compresses each with zstd on worker threads, then in ONE
 *    LMDB write transaction deletes the collection's old blocks, puts the
 *    new ones and its metadata (generation + 1) and commits durably. A crash
 *    or an error before the commit leaves the previous snapshot whole.
 *    Readers in other processes see the old or the new snapshot, never a mix.
 *  - a load (pc_store_load) reads one consistent snapshot, verifies every
 *    checksum, and stores the live records into a collection; expired
 *    records are skipped and then pruned from the store.
 *  - the offline API (list, get, iterate, verify, info) serves the
 *    pcache-snapshot tool and any process that opens the store read-only,
 *    also while another process saves.
 *
 * The format is docs/snapshot-format.md.
 *
 * Conventions are those of pcache.h: every function returns 0 or a negative
 * PC_E* code (pc_store_strerror names it); out-parameters are written only on
 * success unless the function says otherwise; pointer parameters are
 * borrowed for the call unless documented; the library never prints, it
 * logs through pc_store_config.log. Errors that concern stored data name the
 * collection, and the key or block where they can, in a log line at
 * PC_LOG_ERR.
 *
 * Threads and processes: a pc_store handle is used by one thread at a time.
 * Any number of processes may open the same store, read-only or read-write;
 * LMDB serialises the writers. A process opens a given store at most once
 * (an LMDB rule: two handles on one environment in one process break its
 * locks), and a handle never crosses fork(): open the store in the process
 * that uses it (a handle used in a forked child returns PC_EINVAL).
 * pc_store_save and pc_store_load start worker threads for the duration of
 * the call (pc_store_config.threads) that only compress, decompress and
 * hash; the engine handle, LMDB and the log callback are only used from the
 * calling thread.
 */
#ifndef PCACHE_STORE_H
#define PCACHE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "pcache.h"
#include "pcache_mgmt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- error codes of the storage layers (the scheme: pcache.h) ----------- */
#define PC_ECORRUPT (-15) /* stored data failed a checksum or does not decode */
#define PC_EFORMAT (-16)  /* stored data has a newer or unknown format version */
#define PC_ESTORE (-17)   /* path is not a pcache store, or it cannot be opened */
#define PC_EIO (-18)      /* an I/O call on a store or journal failed */

/* Names a code of the storage layers, else falls back to pc_mgmt_strerror
 * (the layers below); static, never NULL. */
const char *pc_store_strerror(int err);

/* The snapshot format version this library writes. A store or collection
 * written by a newer version is refused with PC_EFORMAT. */
#define PC_STORE_FORMAT_VERSION 2u

typedef struct pc_store pc_store; /* process-local handle; opaque */

/* ---- opening ------------------------------------------------------------ */
#define PC_STORE_RDONLY 0x1u /* no writes (LMDB readers never block writers) */
#define PC_STORE_CREATE 0x2u /* create the directory / store when missing */
#define PC_STORE_NOCHECK                                                                           \
    0x4u /* skip the structural check of an existing store                                         \
          * (pc_store_check, pcache_storecheck.h): only for a                                      \
          * caller that ran it itself, or that runs in a process                                   \
          * it can lose */

/* The defaults of pc_store_config, chosen by measurement
 * (docs/snapshot-format.md §8): 128 KiB blocks at zstd level 1. */
#define PC_STORE_BLOCK_DEFAULT (128u * 1024u)
#define PC_STORE_ZSTD_LEVEL_DEFAULT 1

typedef struct pc_store_config {
    unsigned flags;     /* PC_STORE_RDONLY, PC_STORE_CREATE */
    pc_logger log;      /* fn NULL = silent; level: above it, nothing is formatted */
    size_t map_size;    /* initial LMDB map size in bytes; 0 = automatic (1 GiB or
                         * four times data.mdb). The map grows by itself when a write
                         * would not fit (MDB_MAP_FULL): this is only a start. */
    int zstd_level;     /* compression level of saves; 0 = the default */
    size_t block_bytes; /* target raw bytes per block, 1 KiB .. 16 MiB; 0 = the default.
                         * Larger blocks compress a little better and make a point
                         * lookup decompress more. */
    unsigned threads;   /* threads a save or load uses, the caller's included:
                         * 0 = automatic (the caller plus one worker per online CPU,
                         * at most 4 workers); 1 = the caller alone; n = n - 1
                         * workers */
} pc_store_config;

/* Fills *cfg with the defaults: flags 0, log.fn NULL, log.level PC_LOG_INFO,
 * map_size 0, zstd_level PC_STORE_ZSTD_LEVEL_DEFAULT, block_bytes
 * PC_STORE_BLOCK_DEFAULT, threads 0. */
void pc_store_config_init(pc_store_config *cfg);

/* Opens the store at where: a directory path or a URL "lmdb:///abs/path"
 * (borrowed). cfg may be NULL (the defaults). On success *out is
 * caller-owned: pc_store_close.
 *
 * With PC_STORE_CREATE a missing directory is created (one level, mode
 * 0750) and an empty directory (or one holding only a journal/ folder, or
 * an LMDB environment whose creation never committed) becomes a new store.
 * An existing environment is checked read-only before anything is written,
 * and nothing is written to what is refused.
 *
 * LMDB trusts every page it reads, so before it reads an existing
 * environment the structural check of its pages must have run. This
 * library does not hold that check (pcache_storecheck.h does): open an
 * existing store with pc_store_open_checked, which runs it here and
 * refuses what it refuses, or with PC_STORE_NOCHECK after running
 * pc_store_check yourself. pc_store_open alone refuses an existing
 * environment without PC_STORE_NOCHECK (PC_EINVAL, "...needs the
 * structural check..."); creating a store in a missing or blank directory
 * needs neither. Errors, each with a message in errbuf (when not NULL)
 * and a log line:
 *   PC_ESTORE   the path does not exist (without CREATE), is not a
 *               directory, is a non-empty directory without a store, holds
 *               a data.mdb that is not an LMDB file, an LMDB environment
 *               that is not a pcache store, or an uninitialised environment
 *               opened without CREATE;
 *   PC_EFORMAT  the store was written by a newer format version;
 *   PC_ECORRUPT the store header fails its checksum, or data.mdb is
 *               shorter than its own last committed page (truncated: LMDB
 *               would fault reading it);
 *   PC_EIO      a system call failed: permission denied, read-only file
 *               system... (the errno text is in the message);
 *   PC_EURL     a URL other than lmdb:///path;
 *   PC_EINVAL   bad arguments or configuration (RDONLY with CREATE, a
 *               block size or zstd level out of range), or an existing
 *               environment opened without the check (above). */
int pc_store_open(const char *where, const pc_store_config *cfg, pc_store **out, char *errbuf,
                  size_t errlen);

/* Closes the handle. Accepts NULL. */
void pc_store_close(pc_store *s);

/* The store's directory (valid until pc_store_close). */
const char *pc_store_path(const pc_store *s);

/* Increments the store's boot generation and commits it durably; *gen
 * receives the new value (the first call on a new store gives 1). The
 * journal takes one per process start so that its records and the
 * snapshots they follow can be told apart across restarts. PC_EINVAL on a
 * read-only handle. */
int pc_store_next_boot_gen(pc_store *s, uint64_t *gen);
/* The current boot generation, without changing it. */
int pc_store_boot_gen(pc_store *s, uint64_t *gen);

/* ---- per-collection metadata --------------------------------------------- */
typedef struct pc_store_coll_meta {
    char name[PC_COLL_NAME_MAX + 1]; /* NUL-terminated */
    uint32_t format_version;
    uint64_t generation;       /* 1 for the first save, +1 per save */
    uint64_t count;            /* records in the snapshot */
    uint64_t blocks;           /* blocks holding them */
    uint64_t raw_bytes;        /* encoded records before compression */
    uint64_t stored_bytes;     /* bytes of the block values as stored */
    uint64_t key_bytes;        /* sum of key lengths */
    uint64_t value_bytes;      /* sum of value lengths (counters: 8) */
    uint64_t content_checksum; /* XXH3-64 over the blocks' raw checksums */
    int64_t saved_at_ms;       /* unix milliseconds of the commit */
    uint32_t dict_id;          /* zstd dictionary id: 0 (version 1 uses none) */
    uint64_t boot_gen;         /* the saver's boot generation */
    uint64_t journal_epoch;    /* pc_store_save_opts.journal_epoch */
    uint64_t save_usec;        /* duration of the save that wrote it */
} pc_store_coll_meta;

/* The metadata of one collection (name borrowed, NUL-terminated).
 * PC_ENOTFOUND when it was never saved; PC_ECORRUPT / PC_EFORMAT when its
 * meta record fails its checksum or is newer. */
int pc_store_coll_meta_get(pc_store *s, const char *name, pc_store_coll_meta *out);

/* Every saved collection, in name order, read in one transaction. On
 * success *out is caller-owned (pc_store_list_free) and *n its length;
 * a collection whose meta fails to decode is logged and listed with
 * format_version 0 and every other field 0. */
int pc_store_list(pc_store *s, pc_store_coll_meta **out, size_t *n);
void pc_store_list_free(pc_store_coll_meta *list); /* accepts NULL */

/* Deletes a collection's snapshot (its blocks and meta) in one
 * transaction. PC_ENOTFOUND when there is none; PC_EINVAL on a read-only
 * handle. */
int pc_store_drop(pc_store *s, const char *name);

/* ---- save ------------------------------------------------------------------ */
typedef struct pc_store_save_opts {
    uint64_t journal_epoch; /* recorded in the meta for the journal (opaque here) */
    uint64_t boot_gen;      /* the saving process's boot generation, recorded in the
                             * meta; 0 = the store header's current value (right when
                             * this process took the last pc_store_next_boot_gen) */
    /* Called once the walk is over, before the write transaction: nonzero
     * fails the save (nothing committed, its code returned). NULL: none. */
    int (*before_commit)(void *ctx);
    void *before_commit_ctx;
} pc_store_save_opts;

typedef struct pc_store_save_result {
    uint64_t saved;           /* records written */
    uint64_t skipped_expired; /* entries the walk returned already expired */
    uint64_t blocks;
    uint64_t raw_bytes;    /* encoded records, before compression */
    uint64_t stored_bytes; /* block values as stored (headers included) */
    uint64_t value_bytes;  /* sum of value lengths */
    uint64_t generation;   /* the generation committed */
    double seconds;        /* wall time of the whole save */
    double walk_seconds;   /* walk + encode + compress (overlapped) */
    double commit_seconds; /* the write transaction, commit included */
    double rate;           /* saved / seconds */
    unsigned map_grows;    /* MDB_MAP_FULL retries */
} pc_store_save_result;

/* Saves collection coll (a live engine collection; the walk is lock-free
 * and workers keep reading and writing) as the new snapshot of the
 * collection of the same name, generation + 1. Call it from a process that
 * serves no traffic. opts may be NULL (journal epoch 0, the header's boot
 * generation); result may be NULL. Entries that expire while the save runs
 * may be saved; loads skip them. The compressed snapshot is held in memory
 * until the commit (about 0.33x the raw record bytes). Errors: PC_EINVAL
 * (read-only handle, handle from before a fork), PC_EFORMAT (the stored
 * collection was written by a newer format version: not overwritten),
 * PC_EIO (an LMDB write or the commit failed), PC_EHEAP (out of memory),
 * errors of the engine's walk. On any error nothing was committed and the
 * previous snapshot stands. */
int pc_store_save(pc_store *s, pc_coll *coll, const pc_store_save_opts *opts,
                  pc_store_save_result *result);

/* ---- load ------------------------------------------------------------------ */
/* Per-record filter of a load, called for EVERY record of the snapshot,
 * expired ones included, before the store decides about it. key is
 * borrowed for the call; stamp is the record's pc_entry.stamp at save time
 * and boot_gen the saver's boot generation (the snapshot meta's). It
 * returns one of:
 *   PC_STORE_FILTER_SKIP      do not load it;
 *   PC_STORE_FILTER_LOAD      load it unless it has expired;
 *   PC_STORE_FILTER_LOAD_ANY  load it even if it has expired: an expired
 *                             record is stored to live
 *                             PC_STORE_LOAD_ANY_TTL_MS, and its block is not
 *                             pruned (the journal's replay re-arms or
 *                             removes it). */
#define PC_STORE_FILTER_SKIP 0
#define PC_STORE_FILTER_LOAD 1
#define PC_STORE_FILTER_LOAD_ANY 2
#define PC_STORE_LOAD_ANY_TTL_MS 600000
typedef int (*pc_store_filter_fn)(void *ctx, const void *key, size_t klen, uint32_t stamp,
                                  uint64_t boot_gen);
/* Called once per load, after the snapshot's meta is read and before any
 * record is stored, with the meta of exactly the snapshot being loaded
 * (same transaction): meta->journal_epoch and meta->boot_gen are what the
 * journal's replay needs. Return 0 to go on, anything else to stop the load
 * (pc_store_load returns that value, nothing loaded). meta is borrowed. */
typedef int (*pc_store_meta_fn)(void *ctx, const pc_store_coll_meta *meta);

typedef struct pc_store_load_opts {
    pc_store_filter_fn filter; /* NULL = load every live record */
    void *filter_ctx;
    pc_store_meta_fn on_meta; /* NULL = none */
    void *meta_ctx;
    int no_prune; /* 1 = do not rewrite blocks that hold expired records */
} pc_store_load_opts;

typedef struct pc_store_load_result {
    uint64_t loaded;          /* records stored into the collection */
    uint64_t skipped_expired; /* records not loaded because their wall-clock
                               * expiry had passed */
    uint64_t filtered;        /* records the filter declined (expired or not) */
    uint64_t failed;          /* records the engine refused (PC_ENOMEM...): logged */
    uint64_t pruned;          /* expired records removed from the store */
    uint64_t corrupt;         /* records not loaded because they (or their block)
                               * failed a check */
    uint64_t corrupt_blocks;  /* blocks that failed a check */
    uint64_t blocks;
    double seconds;
    double rate;             /* loaded / seconds */
    pc_store_coll_meta meta; /* the snapshot that was loaded */
} pc_store_load_result;

/* Loads the snapshot of the collection named like coll into coll, with
 * pc_set / pc_set_counter and the remaining TTL of each record. One read
 * transaction: the snapshot is the one committed when the load began, even
 * if another process saves meanwhile. Corrupt units (a block that fails its
 * checksums or does not decompress, a record that fails its own) are
 * logged with the collection, the block's order-key range and the key where
 * the record's header parses, and not loaded; the rest loads. Then, unless
 * opts->no_prune or the handle is read-only, the blocks that held expired
 * records are rewritten without them in one write transaction (the meta's
 * count and checksum follow; its generation does not change; skipped when
 * another save committed meanwhile). opts and result may be NULL.
 *
 * Returns 0; PC_ENOTFOUND when the collection has no snapshot (nothing
 * loaded, result untouched); PC_ECORRUPT when any unit was corrupt, or the
 * records re-derived from the blocks disagree with the meta's count or
 * checksum - the rest was loaded and *result IS written; PC_ECORRUPT /
 * PC_EFORMAT when the meta itself fails its checksum or is newer (nothing
 * loaded, result untouched); the on_meta callback's non-zero value. */
int pc_store_load(pc_store *s, pc_coll *coll, const pc_store_load_opts *opts,
                  pc_store_load_result *result);

/* ---- offline reads ---------------------------------------------------------- */
/* A record as read from a snapshot: borrowed, valid during the call only. */
typedef struct pc_store_record {
    const void *key;
    size_t klen;
    const void *val; /* counters: 8 bytes, little-endian int64 */
    size_t vlen;
    int64_t expires_ms; /* absolute unix ms, 0 = never */
    int is_counter;
    uint32_t stamp;
    uint64_t order; /* pc_order_key(pc_hash(key)) */
} pc_store_record;

#define PC_STORE_INCLUDE_EXPIRED 0x1u /* also return records already expired */

/* Point lookup of key in collection name: reads the one block that can hold
 * it (a range search on the order key) and decompresses it. On a hit, *val
 * is caller-owned (free(); NUL-terminated for convenience, the NUL not
 * counted) and *rec (may be NULL) receives the record's metadata with
 * rec->key/rec->val set to NULL. PC_ENOTFOUND when absent (or expired
 * without PC_STORE_INCLUDE_EXPIRED); PC_ECORRUPT when the block that would
 * hold it is corrupt (logged). */
int pc_store_get(pc_store *s, const char *name, const void *key, size_t klen, unsigned flags,
                 void **val, size_t *vlen, pc_store_record *rec);

/* Visits every record of collection name in ascending order in one read
 * transaction; fn returns 0 to go on, anything else stops the iteration and
 * is returned. fn must not call back into this store. Corrupt units are
 * logged and skipped; PC_ECORRUPT is then returned at the end. */
typedef int (*pc_store_iter_fn)(void *ctx, const pc_store_record *r);
int pc_store_iterate(pc_store *s, const char *name, unsigned flags, pc_store_iter_fn fn, void *ctx);

/* One problem found by pc_store_verify. */
enum pc_store_problem_kind {
    PC_SP_META = 1,     /* a meta record does not decode or is newer */
    PC_SP_BLOCK = 2,    /* a block header, payload checksum or decompression */
    PC_SP_RECORD = 3,   /* a record fails its checksum or does not parse */
    PC_SP_ORDER = 4,    /* records or blocks out of order / key vs header */
    PC_SP_COUNT = 5,    /* the meta count disagrees with the blocks */
    PC_SP_CHECKSUM = 6, /* the meta content checksum disagrees */
    PC_SP_ORPHAN = 7,   /* blocks of a collection that has no meta */
    PC_SP_PAGE = 8,     /* LMDB's own structure: a meta, branch, leaf, overflow or
                         * free-list page (pc_store_check) */
    PC_SP_FILE = 9,     /* data.mdb itself: empty, shorter than its pages */
    PC_SP_NEWER = 10,   /* a newer format version (LMDB meta, store header, collection
                         * meta, block): refused, never read as empty */
    PC_SP_FOREIGN = 11  /* a sound LMDB environment holding data but neither of pcache's
                         * databases: not a pcache store (pc_store_check) */
};
typedef struct pc_store_problem {
    int kind;                              /* enum pc_store_problem_kind */
    char collection[PC_COLL_NAME_MAX + 1]; /* NUL-terminated */
    uint64_t first, last;                  /* the block's order-key range, 0 when none */
    void *key;                             /* the key when known (caller-owned with the
                                            * list), else NULL */
    size_t klen;
    char message[160];
} pc_store_problem;

/* Checks every block and record checksum of collection name (NULL = every
 * collection), that records are in order and inside their block's range,
 * and re-derives each meta's count and content checksum. One read
 * transaction. On return 0, *out (caller-owned, pc_store_problems_free; NULL
 * when n is 0) lists what is wrong, at most 1000 problems; *n == 0 means the
 * store verified clean. Returns PC_ENOTFOUND for a named collection without
 * a snapshot. */
int pc_store_verify(pc_store *s, const char *name, pc_store_problem **out, size_t *n);
void pc_store_problems_free(pc_store_problem *list, size_t n); /* accepts NULL */

/* A short name of a problem kind ("lmdb-page", "block"...; "unknown"). */
const char *pc_store_problem_kind_name(int kind);

/* The structural check of LMDB's pages (pc_store_check), the open that runs
 * it (pc_store_open_checked) and salvage are pcache_storecheck.h. */

/* Sizes of the environment. */
typedef struct pc_store_info {
    uint32_t format_version;
    int64_t created_ms;
    uint64_t boot_gen;
    uint64_t file_bytes; /* size of data.mdb */
    uint64_t used_bytes; /* pages in use (last page + 1) x page size */
    uint64_t map_bytes;  /* current map size */
    unsigned page_size;
    unsigned max_readers, readers;
    uint64_t collections;
    uint64_t block_records; /* entries of the "blocks" database */
    uint64_t overflow_pages;
    uint64_t tree_pages; /* branch + leaf pages of both databases */
} pc_store_info;
int pc_store_info_get(pc_store *s, pc_store_info *out);

/* ---- whole-store maintenance (store_compact.c) ----------------------------
 * Both take a path or URL, not a handle: they concern the other processes
 * that have the store open. */

/* Whether a process holds the store's LMDB lock file exclusively (LMDB's
 * first opener does so briefly while it initialises the reader table; a
 * process that keeps it blocks every opener, readers included, without a
 * timeout). Never blocks. 0 when nobody does (or there is no lock file);
 * PC_ELOCKED with *pid the holder; PC_EURL / PC_EINVAL for a bad path;
 * PC_EIO when the lock file cannot be read. */
int pc_store_lock_owner(const char *where, long *pid);

typedef struct pc_store_compact_result {
    uint64_t bytes_before; /* size of data.mdb before */
    uint64_t bytes_after;  /* and after */
    uint64_t entries;      /* LMDB records copied and compared (meta + blocks) */
} pc_store_compact_result;

/* pc_store_compact, which runs the structural check first, is
 * pcache_storecheck.h. */

#ifdef __cplusplus
}
#endif
#endif /* PCACHE_STORE_H */
