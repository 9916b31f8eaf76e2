/*
 * pc_journal.h - the write-ahead journal of the snapshot store (internal).
 *
 * The journal records every acknowledged mutation of a journaled collection
 * after the last snapshot, so a restart can rebuild the table as
 * snapshot + journal. It is opt-in per collection (pc_coll_set_journal with
 * PC_JOURNAL_EVERYSEC or PC_JOURNAL_ALWAYS). The format and the protocol
 * are docs/journal-format.md; this header is the API the store and the hosts
 * use. The lead exposes what hosts need through the store's public header.
 *
 * Lifecycle (one store, one cache):
 *
 *   parent, before fork:
 *     pc_store_next_boot_gen(store, &gen)
 *     pc_journal_open(cache, {dir = the store's directory, boot_gen = gen}, &j)
 *     for each persisted collection: pc_journal_restore(j, store, coll, NULL)
 *       (= pc_journal_replay_open at the snapshot's journal epoch, the store's
 *        load through pc_journal_replay_filter, pc_journal_replay_apply)
 *     pc_journal_install(j); pc_coll_set_journal(coll, mode)
 *   every process (workers, maintenance):
 *     the engine calls pc_journal_hook after each acknowledged mutation;
 *     pc_journal_tick(j, 0) about once per second; pc_journal_flush(j, 1)
 *     at exit (an atexit handler also does it).
 *   one process (maintenance): pc_journal_sync_all(j) about once per
 *     second (or every process ticks with PC_JOURNAL_TICK_SYNC).
 *   a save of coll (one at a time per collection): pc_journal_save(j, store,
 *     coll, ...) = pc_journal_begin_save BEFORE the walk, pc_store_save with
 *     the epoch and boot_gen, pc_journal_retire AFTER the commit.
 *
 * Threads: like the engine, a process uses its handle from one thread at a
 * time. Many processes use the handle they inherited concurrently.
 */
#ifndef PC_JOURNAL_H
#define PC_JOURNAL_H

#include "pcache.h"
#include "pcache_store.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- modes: the values pc_coll_set_journal stores ----------------------- */
#define PC_JOURNAL_OFF 0u
#define PC_JOURNAL_EVERYSEC                                                                        \
    1u                       /* buffered; written when 64 KiB fill or 1 s passed; fsync by tick    \
                              */
#define PC_JOURNAL_ALWAYS 2u /* write + fdatasync of each record before the hook returns */

/* "off", "everysec", "always" (exact, case-sensitive) -> *mode. PC_EINVAL
 * for anything else. s is borrowed. */
int pc_journal_mode_parse(const char *s, unsigned *mode);
/* Static name of a mode ("off", "everysec", "always", "?" otherwise). */
const char *pc_journal_mode_name(unsigned mode);

/* ---- the journal handle ------------------------------------------------- */
typedef struct pc_journal pc_journal;

typedef struct pc_journal_config {
    const char *dir;     /* the store directory (must exist); the journal lives in
                          * <dir>/journal, created if missing. Borrowed. */
    uint64_t boot_gen;   /* this start's boot generation, 1 .. 2^32-1: strictly
                          * greater than at any earlier start of the same store */
    size_t buffer_bytes; /* everysec buffer per (process, collection); 0 = 64 KiB */
    pc_log_fn log;       /* NULL = silent */
    void *log_ctx;
    int log_level; /* messages above this level are not formatted */
} pc_journal_config;

/* Fills *cfg with the defaults: dir NULL, boot_gen 0 (must be set),
 * buffer_bytes 0, log NULL, log_level PC_LOG_INFO. */
void pc_journal_config_init(pc_journal_config *cfg);

/* Opens the journal of cache c: creates <dir>/journal and the small shared
 * area that holds each collection's save epoch. Call before fork(); every
 * child uses the handle it inherits. On success *out is caller-owned:
 * pc_journal_close. Errors: PC_EINVAL, PC_EIO (logged with errno text),
 * PC_ESYS (mmap). */
int pc_journal_open(pc_cache *c, const pc_journal_config *cfg, pc_journal **out);

/* Flushes and fdatasyncs this process's buffered records, closes its
 * segments and releases the handle in this process (other processes are
 * unaffected). Accepts NULL. */
void pc_journal_close(pc_journal *j);

/* The engine's write-ahead hook (a pc_wal_fn, ctx = the pc_journal). Hot
 * path: see journal.c. Returns 0, or PC_EIO when the record could not be
 * written (always: written and fdatasynced; everysec: buffered). */
int pc_journal_hook(void *ctx, const pc_wal_rec *r);
/* pc_wal_hook(cache, pc_journal_hook, j) / pc_wal_hook(cache, NULL, NULL).
 * Children forked after the call inherit it. */
int pc_journal_install(pc_journal *j);
int pc_journal_uninstall(pc_journal *j);

/* Periodic work of this process (call about once per second from the
 * event loop): writes buffered records and closes idle segments of past
 * epochs; with PC_JOURNAL_TICK_SYNC also fdatasyncs this process's
 * segments. Without it, one process (the maintenance process) must call
 * pc_journal_sync_all about once per second: that keeps the fdatasync,
 * which waits for the disk, off the workers (docs/journal-format.md §6).
 * Returns the first error (PC_EIO) and keeps going. */
#define PC_JOURNAL_TICK_SYNC 0x1u
int pc_journal_tick(pc_journal *j, unsigned flags);
/* fdatasyncs every segment file of the journal that grew since this
 * process last synced it, whichever process wrote it, and the directory
 * when segments appeared. */
int pc_journal_sync_all(pc_journal *j);
/* Writes this process's buffered records; with sync also fdatasyncs them
 * (and the directory when a segment was created). */
int pc_journal_flush(pc_journal *j, int sync);

/* The boot generation given at open. */
uint64_t pc_journal_boot_gen(const pc_journal *j);
/* The current save epoch of coll (writers append to segments of it). */
int pc_journal_epoch(const pc_journal *j, const pc_coll *coll, uint64_t *epoch);

/* ---- saves ---------------------------------------------------------------
 * begin_save advances coll's epoch and issues a seq_cst fence: call it
 * BEFORE the snapshot walk starts. *epoch receives the new epoch; the
 * snapshot records it as its journal epoch (with pc_journal_boot_gen), and
 * replay reads only segments of that epoch or later. After the snapshot is
 * committed, retire unlinks coll's segments older than epoch (every
 * process's, any boot's); *removed (may be NULL) gets their number. One
 * save per collection at a time. */
int pc_journal_begin_save(pc_journal *j, pc_coll *coll, uint64_t *epoch);
int pc_journal_retire(pc_journal *j, pc_coll *coll, uint64_t epoch, unsigned *removed);

/* ---- replay --------------------------------------------------------------
 * At startup, before any journaled write of this boot and before workers
 * fork. replay_open reads every segment of coll with epoch >= min_epoch (the
 * snapshot's journal epoch; 0 = all), validates each record, cuts a torn
 * tail (ftruncate, logged) and names and skips a corrupt record, and keeps
 * for every key its latest value record (SET/COUNTER/DEL) and its latest
 * EXPIRE record in (boot_gen, stamp) order. Then the snapshot load asks
 * pc_journal_replay_filter about each snapshot record, and replay_apply
 * writes the journal's winners into the table with pc_set /
 * pc_set_counter / pc_remove / pc_expire (without journaling them). */
typedef struct pc_journal_replay pc_journal_replay;

#define PC_JOURNAL_RDONLY 0x1u /* replay_open: never truncate a torn tail */

typedef struct pc_journal_replay_stats {
    uint64_t segments;     /* segments read */
    uint64_t bad_segments; /* skipped: unreadable header, or name and header disagree */
    uint64_t records;      /* valid records read */
    uint64_t bad_records;  /* corrupt records named and skipped */
    uint64_t torn_tails;   /* torn tails found (cut unless PC_JOURNAL_RDONLY) */
    uint64_t bytes_cut;    /* bytes in those tails */
    uint64_t keys;         /* distinct keys in the journal */
    uint64_t snap_loaded;  /* filter calls that answered load (1 or 2) */
    uint64_t snap_skipped; /* filter calls that answered skip: the journal is later */
    uint64_t set, counter, del, expire; /* operations applied */
    uint64_t expired;                   /* winners skipped (or removed) because they had expired */
    uint64_t errors;                    /* engine calls that failed while applying */
} pc_journal_replay_stats;

/* Errors: PC_EINVAL, PC_ENOMEM (process memory), PC_EIO (logged). A corrupt
 * record or segment is not an error of the call: it is logged, counted and
 * skipped. On success *out is caller-owned: pc_journal_replay_close. */
int pc_journal_replay_open(pc_journal *j, pc_coll *coll, uint64_t min_epoch, unsigned flags,
                           pc_journal_replay **out);

/* The snapshot store's load filter (ctx = the replay). The store calls it
 * for EVERY record of the snapshot, expired ones included, before deciding
 * to load it: a call is how the journal learns that the snapshot holds a
 * state of that key. key is borrowed; stamp is the snapshot record's stamp
 * (pc_entry.stamp at save) and boot_gen the snapshot's boot generation.
 * Returns: */
#define PC_JOURNAL_SKIP 0 /* the journal holds a later state: do not load */
#define PC_JOURNAL_LOAD 1 /* load it (unless it has expired) */
#define PC_JOURNAL_LOAD_ANY                                                                        \
    2 /* load it even if it has expired (any TTL will do): a                                       \
       * later EXPIRE record re-arms or removes it at apply */
int pc_journal_replay_filter(void *ctx, const void *key, size_t klen, uint32_t stamp,
                             uint64_t boot_gen);

/* Applies the journal's winners that are later than the snapshot records
 * the filter saw. Run once, after the snapshot load (or alone: no
 * snapshot). If the journal's hook is installed it is removed for the call
 * and put back. Returns 0, or the first engine error (every winner is still
 * attempted; failures are counted and logged). */
int pc_journal_replay_apply(pc_journal_replay *rp);

/* What was read and done so far. */
void pc_journal_replay_stats_get(const pc_journal_replay *rp, pc_journal_replay_stats *out);

/* One key's state in the journal (borrowed: valid during the callback). */
typedef struct pc_journal_winner {
    const void *key;
    size_t klen;
    int op;          /* latest value record: PC_WAL_SET/COUNTER/DEL, 0 = none */
    const void *val; /* SET: the value */
    size_t vlen;
    int64_t counter;         /* COUNTER: the value */
    int64_t expires_wall_ms; /* of that record: wall-clock ms, 0 = never */
    uint64_t boot_gen;
    uint32_t stamp;
    unsigned flags; /* of that record: PC_JREC_F_* */
    int has_expire; /* a latest EXPIRE record exists (it may be older than op's) */
    int64_t expire_wall_ms;
    uint64_t expire_boot_gen;
    uint32_t expire_stamp;
} pc_journal_winner;
/* Calls fn for every key of the journal (hash order); a non-zero return
 * stops and is returned. */
int pc_journal_replay_foreach(const pc_journal_replay *rp,
                              int (*fn)(void *ctx, const pc_journal_winner *w), void *ctx);

/* Unmaps the segments and frees the replay. Accepts NULL. */
void pc_journal_replay_close(pc_journal_replay *rp);

/* replay_open(min_epoch, 0) + replay_apply + replay_close: the journal
 * alone (no snapshot). st may be NULL. */
int pc_journal_replay_run(pc_journal *j, pc_coll *coll, uint64_t min_epoch,
                          pc_journal_replay_stats *st);

/* ---- with the snapshot store (journal_store.c) ---------------------------
 * The only order in which the store and the journal work together. */

/* A snapshot save of coll: pc_journal_begin_save, pc_store_save recording
 * the new epoch and this boot generation, then (after the commit)
 * pc_journal_retire. result and retired (segments removed) may be NULL.
 * Returns pc_store_save's error (nothing retired) or 0; a failed retire is
 * logged only (replay skips covered segments, the next save retires them).
 * One save per collection at a time. */
int pc_journal_save(pc_journal *j, pc_store *s, pc_coll *coll, pc_store_save_result *result,
                    unsigned *retired);

typedef struct pc_journal_restore_result {
    int snapshot;              /* 1 when the store held a snapshot of coll */
    int load_rc;               /* pc_store_load's result (0 or PC_ECORRUPT) */
    pc_store_load_result load; /* when snapshot */
    pc_journal_replay_stats replay;
} pc_journal_restore_result;

/* Restores coll at startup, before workers fork and before the hook is
 * installed: the snapshot (if any) through pc_journal_replay_filter, the
 * replay opened at the snapshot's journal epoch (all segments when there
 * is no snapshot), then pc_journal_replay_apply. out may be NULL. Errors:
 * the store's when its meta cannot be read (nothing restored: the journal
 * alone would pass for the whole state), the replay's, or the first engine
 * error while applying. A snapshot with corrupt units still loads the rest
 * (out->load_rc = PC_ECORRUPT, logged by the store). */
int pc_journal_restore(pc_journal *j, pc_store *s, pc_coll *coll, pc_journal_restore_result *out);

/* ---- the on-disk format (docs/journal-format.md) -------------------------
 * For the replay, tools (pcache-snapshot) and fuzzers: pure functions over
 * bytes, every input treated as hostile. All integers little-endian. */
#define PC_JOURNAL_VERSION 1u
#define PC_JSEG_HDR_SIZE 128u /* segment header */
#define PC_JREC_HDR_SIZE 32u  /* record header before the key */
#define PC_JREC_SUM_SIZE 8u   /* XXH3-64 after the value */
#define PC_JREC_MIN_SIZE (PC_JREC_HDR_SIZE + PC_JREC_SUM_SIZE)
#define PC_JREC_MAX_SIZE (PC_JREC_MIN_SIZE + PC_KEY_MAX + PC_VALUE_MAX)
#define PC_JSEG_SUFFIX ".wal"

typedef struct pc_jseg_hdr {
    unsigned version;
    uint32_t pid;
    uint64_t epoch;
    uint64_t boot_gen;
    int64_t created_wall_ms;
    size_t coll_len;
    char coll[PC_COLL_NAME_MAX + 1]; /* NUL-terminated */
} pc_jseg_hdr;

/* Writes a 128-byte header into buf. */
void pc_jseg_hdr_encode(void *buf, const pc_jseg_hdr *h);
/* Decodes the first 128 bytes of buf. PC_ECORRUPT (short, bad magic, bad
 * checksum, bad name), PC_EFORMAT (a newer version). *why (may be NULL) gets a
 * static reason on error. */
int pc_jseg_hdr_decode(const void *buf, size_t len, pc_jseg_hdr *out, const char **why);

/* A decoded record: pointers borrow the buffer it was decoded from. */
/* Record flags (byte 9). */
#define PC_JREC_F_STATE                                                                            \
    0x01u /* the key's state in the table when the record was written,                             \
           * under the stamp of an earlier write (§5.3) */

typedef struct pc_jrec {
    int op;         /* PC_WAL_SET .. PC_WAL_EXPIRE */
    unsigned flags; /* PC_JREC_F_* */
    uint32_t stamp;
    int64_t expires_wall_ms;
    const void *key;
    size_t klen;
    const void *val; /* SET: the value; COUNTER: 8 bytes of int64 */
    size_t vlen;
    int64_t counter; /* COUNTER */
    size_t size;     /* bytes of the whole record */
} pc_jrec;

/* Size of the record of an operation: 40 + klen + vlen. */
size_t pc_jrec_size(size_t klen, size_t vlen);
/* Writes one record into buf (pc_jrec_size(r->klen, r->vlen) bytes; a
 * COUNTER encodes r->counter and ignores r->val). Returns its size. */
size_t pc_jrec_encode(void *buf, const pc_jrec *r);
/* Decodes the record at the start of buf[0, avail). 0 on success;
 * PC_ECORRUPT otherwise, with *why (may be NULL) a static reason and, when
 * the header and the key bytes are present, out->key/klen set (NULL
 * otherwise) so a caller can name the key. */
int pc_jrec_decode(const void *buf, size_t avail, pc_jrec *out, const char **why);

/* Walks the records of a whole segment image buf[0, len) (header
 * included). record is called for each valid record in file order (a
 * non-zero return stops the scan and is returned). bad is called for each
 * run of bytes that is not a valid record: torn = 1 when no valid record
 * follows it (a torn tail, which runs to the end), 0 for a corrupt record
 * followed by valid ones (the scan resynchronises on the next record that
 * validates). *valid_end (may be NULL) receives the end of the last valid
 * record (the header's end when there is none). PC_ECORRUPT / PC_EFORMAT
 * when the header itself does not decode. */
typedef struct pc_jscan_ops {
    int (*record)(void *ctx, const pc_jrec *r, uint64_t off);
    void (*bad)(void *ctx, uint64_t off, uint64_t len, int torn, const pc_jrec *partial,
                const char *why);
} pc_jscan_ops;
int pc_jseg_scan(const void *buf, size_t len, const pc_jscan_ops *ops, void *ctx, pc_jseg_hdr *hdr,
                 uint64_t *valid_end);

/* Parses a segment file name "<collection>.<epoch: 16 hex>.<pid>[-<n>].wal".
 * coll receives the NUL-terminated collection name (cap >= 64). 0 or
 * PC_EINVAL when name is not a segment name. */
int pc_jseg_name_parse(const char *name, char *coll, size_t cap, uint64_t *epoch);

/* ---- internal to storage/journal*.c ----------------------------------------
 * Not API: the handle's layout, shared by the writer (journal.c) and the
 * replay (journal_replay.c). */
#include <stdbool.h>
#include <sys/types.h>

/* The shared area (MAP_SHARED | MAP_ANONYMOUS, mapped by pc_journal_open
 * before the host forks). epoch[i] is collection i's save epoch: written
 * only by pc_journal_begin_save (atomic increment + seq_cst fence), read
 * lock-free by every writer after a seq_cst fence (journal.c, §5 of the
 * format document). */
#define PC_JSHM_MAGIC 0x4d48534a4e4a4350ull /* "PCJNJSHM" */
struct pc_jshm {
    uint64_t magic;
    uint32_t version;
    uint32_t ncoll;
    uint64_t boot_gen;
    uint64_t pad[5];
    _Atomic uint64_t epoch[PC_MAX_COLLECTIONS];
};

/* One collection's writer state in this process (process-local). */
struct pc_jpc {
    pc_coll *coll;
    int fd;                /* open segment of seg_epoch, -1 = none */
    int old_fd;            /* a segment of a past epoch awaiting its fdatasync, -1 = none */
    uint64_t seg_epoch;    /* epoch of fd's segment */
    uint64_t seg_bytes;    /* bytes written to fd's segment (header included) */
    uint64_t synced_bytes; /* of which fdatasynced */
    uint8_t *buf;          /* records not yet written (everysec), NULL until first use */
    size_t used, cap;
    uint64_t buf_epoch;  /* the epoch every record in buf read (when used > 0) */
    uint64_t seen_epoch; /* the epoch of this process's last record, 0 = none yet */
    int64_t last_flush;  /* CLOCK_MONOTONIC_COARSE ms of the last write of buf */
    bool failing;        /* the last I/O failed (logged once per streak) */
};

struct pc_journal {
    pc_cache *c;
    struct pc_jshm *shm; /* shared: see above */
    size_t shm_bytes;
    int dirfd;  /* <dir>/journal */
    char *path; /* <dir>/journal, for log lines */
    uint64_t boot_gen;
    size_t buf_bytes;
    pc_log_fn log;
    void *log_ctx;
    int log_level;
    unsigned long fork_gen; /* pc_jfork_gen when this process's state was set up */
    pid_t pid;              /* this process (names its segments) */
    bool installed;         /* pc_journal_install called in this process's line */
    bool dir_dirty;         /* a segment was created since the directory's last fsync */
    int64_t wall_off;       /* CLOCK_REALTIME - CLOCK_MONOTONIC in ms */
    int64_t wall_off_at;    /* coarse monotonic ms when wall_off was sampled */
    unsigned ncoll;
    struct pc_jpc *last; /* the last collection written: the hook's first guess */
    uint8_t *scratch;    /* the rotation record's read of the table (§5.3) */
    size_t scratch_cap;
    struct pc_jsynced *synced; /* pc_journal_sync_all: files and sizes last synced */
    size_t nsynced, capsynced;
    struct pc_jpc pcs[PC_MAX_COLLECTIONS];
};

/* Logs "journal: <msg>" through the handle's callback (level checked first). */
/* Calls fn for each segment file of collection cn in the journal directory
 * (its name and epoch); stops at fn's non-zero result, which it returns.
 * PC_EIO (logged) when the directory cannot be listed. */
typedef int (*pc_jseg_each_fn)(void *ctx, const char *file, uint64_t epoch);
int pc_jseg_each(pc_journal *j, const char *cn, pc_jseg_each_fn fn, void *ctx);
void pc_jlog(const pc_journal *j, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A printable rendering of a binary key for log lines (escaped, cut at 64
 * bytes with "..."), NUL-terminated in out. */
void pc_jkey_text(const void *key, size_t klen, char *out, size_t cap);
/* CLOCK_REALTIME in ms. */
int64_t pc_jwall_now_ms(void);

#ifdef __cplusplus
}
#endif
#endif /* PC_JOURNAL_H */
