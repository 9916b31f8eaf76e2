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
 *     the engine calls pc_journal_hook after each acknowledged mutation
 *     (the record goes to the process's ring in shared memory);
 *     pc_journal_tick(j, 0) about once per second; pc_journal_flush(j, 1)
 *     at exit (an atexit handler also does it).
 *   one process (maintenance): pc_journal_sync_all(j) about once per
 *     second. Its first call starts the drainer thread, which writes every
 *     process's ring out to its segments and fdatasyncs them
 *     (docs/journal-format.md §6). Without a drainer each process writes
 *     its own ring in its tick (or every process ticks with
 *     PC_JOURNAL_TICK_SYNC).
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
    1u /* acknowledged in the process's shared-memory ring; written by the drainer, fsynced        \
        * about once per second */
#define PC_JOURNAL_ALWAYS 2u /* written + fdatasynced before the hook returns */

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
    size_t buffer_bytes; /* ring per process in shared memory (everysec and always),
                          * rounded up to a power of two: 0 = 4 MiB (also the least:
                          * two records of the largest size), at most 1 GiB */
    unsigned max_procs;  /* ring slots: processes that may write at once; 0 = 128.
                          * A process beyond them writes each record through
                          * (logged once) */
    pc_logger log;       /* fn NULL = silent; level: above it, nothing is formatted */
} pc_journal_config;

/* Fills *cfg with the defaults: dir NULL, boot_gen 0 (must be set),
 * buffer_bytes 0, max_procs 0, log.fn NULL, log.level PC_LOG_INFO. */
void pc_journal_config_init(pc_journal_config *cfg);

/* Opens the journal of cache c: creates <dir>/journal and the small shared
 * area that holds each collection's save epoch. Call before fork(); every
 * child uses the handle it inherits. On success *out is caller-owned:
 * pc_journal_close. Errors: PC_EINVAL, PC_EIO (logged with errno text),
 * PC_ESYS (mmap). */
int pc_journal_open(pc_cache *c, const pc_journal_config *cfg, pc_journal **out);

/* Stops this process's drainer thread, writes out and fdatasyncs its own
 * ring, gives its ring slot back, closes its segments and releases the
 * handle in this process (other processes are unaffected). In the process
 * that opened the journal it also writes out what dead processes left in
 * their rings. Accepts NULL. */
void pc_journal_close(pc_journal *j);

/* The engine's write-ahead hook (a pc_wal_fn, ctx = the pc_journal). Hot
 * path: see journal.c. Returns 0, or PC_EIO when the record could not be
 * journaled (always: written and fdatasynced; everysec: in the ring). */
int pc_journal_hook(void *ctx, const pc_wal_rec *r);
/* pc_wal_hook(cache, pc_journal_hook, j) / pc_wal_hook(cache, NULL, NULL).
 * Children forked after the call inherit it. */
int pc_journal_install(pc_journal *j);
int pc_journal_uninstall(pc_journal *j);

/* Periodic work of this process (call about once per second from the
 * event loop): closes its descriptors of segments of past epochs, and
 * writes its own ring out when no drainer ran for 1.5 s; with
 * PC_JOURNAL_TICK_SYNC it always writes its ring out and fdatasyncs its
 * segments. Returns the first error (PC_EIO) and keeps going. */
#define PC_JOURNAL_TICK_SYNC 0x1u
#define PC_JBEAT_STALE_MS 1500 /* no drainer heartbeat for this long: a tick drains */
int pc_journal_tick(pc_journal *j, unsigned flags);
/* The maintenance process's call, about once per second. The first call in
 * a process starts the drainer thread (blocking every signal; it never
 * calls the log callback: its errors are logged by the next call here).
 * Each call also makes one pass itself: drains every ring, fdatasyncs every
 * segment file that grew since this process last synced it (whichever
 * process wrote it) and the directory when segments appeared, and frees
 * the ring slots of dead processes once empty. Returns the first error
 * since the last call. */
int pc_journal_sync_all(pc_journal *j);
/* Writes this process's ring out; with sync also fdatasyncs its segments
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
/* The same in two steps, for a writer that checksums later: encode_body
 * writes every byte but the trailing sum and returns the record's size;
 * sum computes the sum of such a record (its size bytes at buf) as the 8
 * bytes to store after it (little-endian). size_at reads the size field of
 * a record encoded by this writer (not for hostile bytes). */
size_t pc_jrec_encode_body(void *buf, const pc_jrec *r);
uint64_t pc_jrec_sum(const void *buf, size_t size);
uint32_t pc_jrec_size_at(const void *buf);
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
 * Not API: the handle's layout, shared by the writer (journal.c), the rings
 * (journal_ring.c), the drainer (journal_drain.c) and the replay
 * (journal_replay.c). */
#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

/* One (ring slot, collection): the segment the slot's records of that
 * collection go to. In shared memory; every field is guarded by the slot's
 * lock (struct pc_jslot_shm.lock): whichever process drains the ring
 * appends to the segment, so the append offset lives here, not in a file
 * descriptor. */
struct pc_jseg_shm {
    uint64_t epoch;      /* the segment's epoch (valid when n >= 0) */
    uint64_t bytes;      /* header + whole records written: the next append goes here */
    uint64_t synced;     /* of which fdatasynced by a writer (always, tick sync) */
    int32_t n;           /* -1: none; 0: "<pid>" name; k >= 1: "<pid>-<k>" */
    uint32_t dir_synced; /* the directory was fsynced since the segment was created */
};

/* One process's ring (docs/journal-format.md §6). Lives in the shared area
 * for the whole life of the journal. The owning process is the only
 * producer: it writes items at head and publishes them with a release
 * store of head. Consumers - the drainer thread of some process, or the
 * owner draining its own ring - hold lock (a robust, process-shared mutex:
 * a consumer killed while holding it is recovered from) and publish what
 * they wrote to the segment with a release store of tail. Invariant:
 * tail <= head <= tail + ring_bytes; bytes [tail, head) (modulo the ring)
 * are items not yet in a segment. */
struct pc_jslot_shm {
    _Atomic uint32_t owner; /* pid of the producer, 0 = free (CAS to claim) */
    _Atomic uint32_t wake;  /* the producer asked the drainer to run (cleared by a drain) */
    pthread_mutex_t lock;   /* consumer side: tail, c_coll, c_epoch, seg[] */
    _Alignas(64) _Atomic uint64_t head; /* written by the producer only */
    _Alignas(64) _Atomic uint64_t tail; /* written under lock only */
    uint32_t c_coll;                    /* collection of the items at tail (under lock) */
    uint64_t c_epoch;                   /* their epoch (under lock) */
    struct pc_jseg_shm seg[PC_MAX_COLLECTIONS];
};

/* The shared area (MAP_SHARED | MAP_ANONYMOUS, mapped by pc_journal_open
 * before the host forks): this header, nslots ring slots, then the rings
 * (ring_bytes each, page aligned). epoch[i] is collection i's save epoch:
 * written only by pc_journal_begin_save (atomic increment + seq_cst fence),
 * read lock-free by every writer after a seq_cst fence (journal.c, §5 of
 * the format document). */
#define PC_JSHM_MAGIC 0x4d48534a4e4a4350ull /* "PCJNJSHM" */
struct pc_jshm {
    uint64_t magic;
    uint32_t version;
    uint32_t ncoll;
    uint64_t boot_gen;
    uint32_t nslots;
    uint32_t light_fence; /* writers fence with a compiler barrier (journal.c) */
    uint64_t ring_bytes;
    _Atomic int64_t drain_beat_ms; /* CLOCK_MONOTONIC ms of a drainer's last pass, 0 = never */
    _Atomic uint32_t drain_futex;  /* bumped (and futex-woken) to wake drainers */
    uint32_t pad1;
    uint64_t pad[2];
    _Atomic uint64_t epoch[PC_MAX_COLLECTIONS];
    /* retired[i]: the epoch of collection i's last retire (a committed
     * snapshot covers every record of an epoch below it): a drainer drops
     * ring records below it instead of creating a segment for them.
     * Written by pc_journal_retire (atomic max), read by drainers. */
    _Atomic uint64_t retired[PC_MAX_COLLECTIONS];
};

/* A process-local open segment: the descriptor and which segment it is. */
struct pc_jfd {
    int fd; /* -1 = none */
    int32_t n;
    uint32_t pid;
    uint64_t epoch;
};

/* One collection's writer state in this process (process-local). */
struct pc_jpc {
    pc_coll *coll;
    uint64_t seen_epoch; /* the epoch of this process's last record, 0 = none yet */
};

struct pc_journal {
    pc_cache *c;
    struct pc_jshm *shm; /* shared: see above */
    size_t shm_bytes;
    struct pc_jslot_shm *slots; /* in shm */
    uint8_t *rings;             /* in shm */
    uint64_t ring_bytes;
    unsigned nslots;
    int dirfd;  /* <dir>/journal */
    char *path; /* <dir>/journal, for log lines */
    uint64_t boot_gen;
    pc_logger log;          /* pc_journal_config.log */
    unsigned long fork_gen; /* pc_jfork_gen when this process's state was set up */
    pid_t pid;              /* this process (names its segments) */
    pid_t opener;           /* the process that opened the journal */
    bool installed;         /* pc_journal_install called in this process's line */
    bool failing;           /* the last I/O of this process's own records failed */
    bool light_fence;       /* == shm->light_fence (set before any fork) */
    int64_t wall_off;       /* CLOCK_REALTIME - CLOCK_MONOTONIC in ms */
    int64_t wall_off_at;    /* coarse monotonic ms when wall_off was sampled */
    unsigned ncoll;
    struct pc_jpc *last; /* the last collection written: the hook's first guess */
    uint8_t *scratch;    /* the rotation record's read of the table (§5.3) */
    size_t scratch_cap;
    /* this process as a producer (journal_ring.c) */
    struct pc_jslot_shm *slot; /* its ring slot, NULL until its first record */
    uint8_t *ring;             /* the slot's ring */
    bool private_ring;         /* no shared slot was free: slot and ring are malloc'd */
    uint64_t head;             /* == slot->head */
    uint64_t tail_seen;        /* slot->tail as last read (<= the real one) */
    uint64_t put_at;           /* where the last record went (always: taken back on failure) */
    uint32_t ring_coll;        /* collection and epoch of the last control item */
    uint64_t ring_epoch;
    struct pc_jfd own[PC_MAX_COLLECTIONS]; /* its segments, as written by itself */
    /* this process as the drainer (journal_drain.c); dmu guards the rest */
    pthread_mutex_t dmu;
    bool drainer;       /* the drainer thread runs in this process */
    _Atomic bool dstop; /* asks it to stop */
    pthread_t dthr;
    struct pc_jfd *dfd;        /* [nslots * PC_MAX_COLLECTIONS]: the drainer's descriptors */
    int64_t last_sync;         /* coarse ms of its last fdatasync pass */
    int drc;                   /* the first error of its passes since the last report */
    char derr[512];            /* its first error's text, logged by pc_journal_sync_all */
    struct pc_jsynced *synced; /* sync pass: files and sizes last synced */
    size_t nsynced, capsynced;
    struct pc_jpc pcs[PC_MAX_COLLECTIONS];
};

/* journal_ring.c: the producer side (the hook), draining. */
int pc_jring_put(pc_journal *j, unsigned coll, uint64_t epoch, const pc_jrec *rec, size_t size);
/* Drains this process's own ring into its segments; with sync also
 * fdatasyncs them (and the directory for new ones). Logs failures. */
int pc_jown_flush(pc_journal *j, bool sync);
/* The always mode: drain the own ring, then fdatasync coll's segment. */
int pc_jown_commit(pc_journal *j, unsigned coll);
/* Closes own descriptors of segments of past epochs. */
void pc_jown_rotate(pc_journal *j);
/* Releases this process's slot (drained first) and frees private state. */
void pc_jown_release(pc_journal *j);
/* Process-local state after a fork (the child owns no slot and no thread). */
void pc_jring_after_fork(pc_journal *j);
/* Sets up the slots of a new shared area. */
int pc_jslots_init(pc_journal *j);
/* The segment file name of (pid, epoch, n) for collection cn. */
void pc_jseg_name(char *out, size_t cap, const char *cn, uint64_t epoch, uint32_t pid, int32_t n);

/* journal_ring.c, for the drainer (journal_drain.c): a consumer's side. */
/* A drain's I/O failure, logged by its caller (the log callback may not be thread-safe). */
struct pc_jioerr {
    int err;
    char what[320];
};
/* Takes slot s's robust lock, recovering it from a dead holder; PC_ESYS on failure. */
int pc_jslot_lock(struct pc_jslot_shm *s);
/* Releases slot s's lock. */
void pc_jslot_unlock(struct pc_jslot_shm *s);
/* Forgets slot s's segments and current collection (under its lock, or unshared). */
void pc_jslot_reset(struct pc_jslot_shm *s);
/* Closes f's descriptor, if any, and marks it none (fd = -1). */
void pc_jfd_close(struct pc_jfd *f);
/* Drains slot s's items into its segments through fds[]; under s's lock; PC_EIO with e set. */
int pc_jdrain_locked(pc_journal *j, struct pc_jslot_shm *s, struct pc_jfd *fds,
                     struct pc_jioerr *e);
/* Wakes the drainer threads (bumps and futex-wakes shm->drain_futex). */
void pc_jdrainer_wake(pc_journal *j);

/* journal_drain.c: the drainer. */
/* One drain + sync pass over every slot, in the calling thread; starts the
 * drainer thread first when start. */
int pc_jdrain_pass(pc_journal *j, bool start);
/* Stops this process's drainer thread (if any) and closes its descriptors. */
void pc_jdrainer_stop(pc_journal *j);
/* Frees the drainer's descriptors and sync list (after pc_jdrainer_stop). */
void pc_jdrainer_free(pc_journal *j);

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

#ifdef __cplusplus
}
#endif
#endif /* PC_JOURNAL_H */
