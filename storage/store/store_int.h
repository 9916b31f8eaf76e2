/*
 * store_int.h - internals of the snapshot store (storage/store/). Not installed,
 * not included outside storage/store/ (the format codec it includes,
 * store_format.h, is also the store's white-box test interface, and
 * store_raw.h the interface of storage/storecheck/).
 *
 * The on-disk format is docs/snapshot-format.md; every constant and layout
 * here cites the section of that document it implements. The code that
 * encodes and decodes the format is store_format.c and it is the only code
 * that knows byte offsets. Every decoder treats its input as hostile: it
 * bounds-checks every length against the bytes it was given and returns
 * PC_ECORRUPT with a static reason instead of trusting a field.
 *
 * Files:
 *   store_format.c  byte layouts, varints, checksums (pure functions)
 *   store_env.c     open/close, the store header, boot generations, map
 *                   growth, logging
 *   store_block.c   building, compressing and unpacking one block
 *   store_pipe.c    the ordered worker pool that compresses / decompresses
 *                   blocks beside the thread that walks or loads
 *   store_save.c    pc_store_save
 *   store_load.c    pc_store_load and the prune of expired records
 *   store_read.c    the offline API: list, get, iterate, verify, info
 *   store_compact.c the lock-owner probe and compaction (whole-store, by path)
 *
 * The walk of LMDB's pages, the structural check every open runs and
 * salvage are storage/storecheck/, above this library: the core calls the
 * check only through the pc_store_check_fn its caller gives it
 * (store_raw.h, the core's interface for that component).
 */
#ifndef PC_STORE_INT_H
#define PC_STORE_INT_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pcache.h"
#include "pcache_store.h"

#include "store_format.h"
#include "store_raw.h"

/* ---- invariants ------------------------------------------------------------
 * Debug builds check them with PC_ASSERT where the code relies on them
 * ("checked" names where). Corruption of what is read from disk is never
 * one of them: that is PC_ECORRUPT, returned.
 *  S1  A block's records are in ascending order key, first <= each <=
 *      last: load, verify and the offline reads seek blocks by that range.
 *      Checked: pc_sb_raw_add.
 *  S2  The codec writes exactly the sizes it announces: a record
 *      pc_sf_rec_size bytes, a block header PC_SF_BLOCK_HDR bytes.
 *      Checked: pc_sb_raw_add, pc_sb_pack.
 *  S3  The pipe holds at most depth jobs and hands them back in the order
 *      they were submitted: tail <= next <= head <= tail + depth. The
 *      blocks of a save are written in walk order because of it.
 *      Checked: pc_pipe_submit, pc_pipe_take_locked.
 *  S4  A write transaction runs only on a read-write handle: every writing
 *      entry point refuses a read-only one first. Checked: pc_store_txn_begin.
 * s is the pc_store (its logger reports a failure). */
#define PC_ASSERT(s, inv, cond) PC_INVARIANT(&(s)->log, inv, cond)

/* ---- store_block.c: one block in memory ---------------------------------------- */
/* Raw records being collected for one block, in record order. */
typedef struct pc_sb_raw {
    uint8_t *buf;
    size_t len, cap;
    uint32_t count;
    uint64_t first, last; /* order keys of the first and last record */
    uint64_t key_bytes, value_bytes;
} pc_sb_raw;
/* Appends one record (r->key etc. borrowed) with its order key. PC_EHEAP
 * when memory runs out. */
int pc_sb_raw_add(pc_sb_raw *b, const pc_sf_rec *r, uint64_t order);
void pc_sb_raw_reset(pc_sb_raw *b);
void pc_sb_raw_free(pc_sb_raw *b);

/* A finished block: its LMDB key and value (header + payload). */
typedef struct pc_sb_out {
    uint8_t key[PC_SF_BKEY_MAX];
    size_t klen;
    uint8_t *val; /* malloc'd, exactly val_len bytes */
    size_t val_len;
    uint64_t raw_sum;
    uint32_t count;
    uint32_t raw_len;
} pc_sb_out;
/* Compresses b (zstd at level with cc; stored as is when that is not
 * smaller) into out->val and fills out: a block of this format version,
 * naming collection name and generation (0 when it is not known yet: the
 * save sets it with pc_sf_block_set_gen in its write transaction). PC_EHEAP
 * on allocation failure, PC_EIO when zstd fails. */
typedef struct pc_sb_scratch { /* a compression buffer reused across blocks */
    uint8_t *buf;
    size_t cap;
} pc_sb_scratch;
int pc_sb_pack(void *zstd_cctx, int level, const pc_sb_raw *b, const char *name, size_t nlen,
               uint64_t generation, pc_sb_scratch *scratch, pc_sb_out *out);

/* pc_sb_unpack, the decoder of a whole block value, is declared with the
 * format codec (store_format.h) so the fuzz target reaches it. */

/* ---- the handle (store_env.c) --------------------------------------------- */
struct pc_store {
    MDB_env *env;
    MDB_dbi meta, blocks;
    unsigned flags; /* PC_STORE_RDONLY, PC_STORE_CREATE */
    pid_t pid;      /* the opener: an LMDB env must not cross fork() */
    pc_logger log;  /* pc_store_config.log */
    int zlevel;
    size_t block_bytes;
    unsigned threads;
    size_t map_size;  /* current map size as set by this process */
    unsigned psize;   /* LMDB page size */
    char path[4096];  /* the directory */
    char dpath[4200]; /* path/data.mdb */
};

/* Logging: the level is checked before the arguments are formatted. */
void pc_slog_emit(const pc_store *s, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define PC_SLOG(s, lvl, ...)                                                                       \
    do {                                                                                           \
        if (pc_log_enabled(&(s)->log, (lvl)))                                                      \
            pc_slog_emit((s), (lvl), __VA_ARGS__);                                                 \
    } while (0)

/* pc_store_perm_msg: store_raw.h (the check uses it too). */
/* Maps an LMDB or errno code to PC_E*, logging what failed at level ERR. */
int pc_store_mdb_err(const pc_store *s, int mrc, const char *what);
/* 0, or PC_EINVAL (logged) when the handle is used after fork(). */
int pc_store_check_pid(const pc_store *s);
/* mdb_txn_begin that adopts a map size grown by another process
 * (MDB_MAP_RESIZED) and retries. flags: 0 or MDB_RDONLY. */
int pc_store_txn_begin(pc_store *s, unsigned flags, MDB_txn **txn);
/* Grows the map (no transaction of this process may be open) to at least
 * need bytes, doubling at least. */
int pc_store_grow(pc_store *s, size_t need);
/* Ends a write transaction that ran to mrc (an LMDB code): commits it when
 * commit and mrc is 0, else aborts it. 0 when done, PC_STORE_AGAIN when
 * the map was full and has grown (run the transaction again), else a PC_E*
 * code with what logged (pc_store_mdb_err). */
#define PC_STORE_AGAIN 1
int pc_store_txn_finish(pc_store *s, MDB_txn *txn, int mrc, int commit, const char *what);
/* Clears reader slots of dead processes (mdb_reader_check): a reader that
 * died inside a read transaction would otherwise keep every page freed
 * since from being reused, and the file would grow. */
void pc_store_reap_readers(pc_store *s);
/* Bytes in use in the environment (last page + 1) * page size. */
size_t pc_store_used_bytes(pc_store *s);
/* In a write transaction that writes records of this format version: a
 * store header of an older version is rewritten with this one (so a
 * reader of the older version refuses the store as newer instead of
 * meeting blocks it cannot read). 0, or an LMDB / PC_E* code. */
int pc_store_hdr_upgrade(pc_store *s, MDB_txn *txn);
/* Reads the decoded meta of collection name in txn: 0, PC_ENOTFOUND,
 * PC_ECORRUPT (logged), PC_EFORMAT (logged). */
int pc_store_meta_read(pc_store *s, MDB_txn *txn, const char *name, size_t nlen,
                       pc_store_coll_meta *m);

/* ---- store_pipe.c: ordered jobs on worker threads -------------------------
 * The producing thread submits jobs in order; nworkers threads run them; the
 * producer takes results back in the same order. With nworkers == 0 every
 * job runs inline in pc_pipe_submit. A job is a caller-owned pointer; run()
 * receives the worker's index (nworkers for the inline case) so the caller
 * can keep one compression context per worker. */
typedef struct pc_pipe pc_pipe;
typedef void (*pc_pipe_run_fn)(void *ctx, unsigned worker, void *job);
/* depth: jobs in flight at most (>= 1). */
int pc_pipe_create(unsigned nworkers, unsigned depth, pc_pipe_run_fn run, void *ctx, pc_pipe **out);
/* Submits a job. When depth jobs are in flight, first waits for the oldest
 * and returns it in *done (else *done = NULL): the caller must consume it. */
void pc_pipe_submit(pc_pipe *p, void *job, void **done);
/* Waits for the oldest job in flight and returns it, NULL when none is. */
void *pc_pipe_next(pc_pipe *p);
/* Joins the workers. Jobs still in flight are waited for and dropped (the
 * caller owns them and must have kept track). Accepts NULL. */
void pc_pipe_destroy(pc_pipe *p);

/* store_load.c: logs a block that failed a check (why) at PC_LOG_ERR with
 * the collection, its order-key range when hdr_ok, and the keys raw (may be
 * NULL) still names. */
void pc_store_report_block(const pc_store *s, const char *name, const pc_sf_block *hdr, int hdr_ok,
                           const char *why, const uint8_t *raw);
unsigned pc_store_auto_threads(unsigned requested);

#endif /* PC_STORE_INT_H */
