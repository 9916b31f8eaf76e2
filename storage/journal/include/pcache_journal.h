/*
 * pcache_journal.h - the write-ahead journal of the snapshot store: the one
 * public header of storage/journal/.
 *
 * The journal records every acknowledged mutation of a journaled collection
 * after the last snapshot, so a restart can rebuild the table as
 * snapshot + journal. It is opt-in per collection (pc_journal_set_mode with
 * PC_JOURNAL_EVERYSEC or PC_JOURNAL_ALWAYS). The format and the protocol
 * are docs/journal-format.md. Hosts use the journal through the persistence
 * policies (pcache_persist.h); the policies, the snapshot tool, the
 * benchmarks and the tests use this header. A pc_journal is opaque: its
 * rings, the shared-memory layout and the segment codec are private to
 * storage/journal (journal_int.h).
 *
 * Lifecycle (one store, one cache):
 *
 *   parent, before fork:
 *     pc_store_next_boot_gen(store, &gen)
 *     pc_journal_open(cache, {dir = the store's directory, boot_gen = gen}, &j)
 *     for each persisted collection: pc_journal_restore(j, store, coll, NULL)
 *       (= pc_journal_replay_open at the snapshot's journal epoch, the store's
 *        load through pc_journal_replay_filter, pc_journal_replay_apply)
 *     pc_journal_install(j); pc_journal_set_mode(coll, mode)
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
#ifndef PCACHE_JOURNAL_H
#define PCACHE_JOURNAL_H

#include "pcache.h"
#include "pcache_store.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- modes: the collection's hook word (pcache.h) holds its mode -------- */
#define PC_JOURNAL_OFF 0u
#define PC_JOURNAL_EVERYSEC                                                                        \
    1u /* acknowledged in the process's shared-memory ring; written by the drainer, fsynced        \
        * about once per second */
#define PC_JOURNAL_ALWAYS                                                                          \
    2u /* written + fdatasynced before the hook returns, or (pc_journal_defer_sync)                \
        * written before the hook returns and fdatasynced by pc_journal_commit */

/* "off", "everysec", "always" (exact, case-sensitive) -> *mode. PC_EINVAL
 * for anything else. s is borrowed. */
int pc_journal_mode_parse(const char *s, unsigned *mode);
/* Static name of a mode ("off", "everysec", "always", "?" otherwise). */
const char *pc_journal_mode_name(unsigned mode);
/* Sets / reads the journal mode of a collection: its engine hook word, so
 * it applies to every process, and with PC_JOURNAL_OFF the engine makes no
 * hook call for it. PC_EINVAL for a NULL coll. */
int pc_journal_set_mode(pc_coll *coll, unsigned mode);
unsigned pc_journal_mode(const pc_coll *coll);

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
 * PC_ESYS (mmap), PC_EHEAP. */
int pc_journal_open(pc_cache *c, const pc_journal_config *cfg, pc_journal **out);

/* Stops this process's drainer thread, writes out and fdatasyncs its own
 * ring, gives its ring slot back, closes its segments and releases the
 * handle in this process (other processes are unaffected). In the process
 * that opened the journal it also writes out what dead processes left in
 * their rings. Accepts NULL. */
void pc_journal_close(pc_journal *j);

/* The engine's mutation hook (a pc_mutation_fn, ctx = the pc_journal;
 * r->word is the collection's mode). Hot path: see journal.c. Returns 0,
 * or PC_EIO when the record could not be journaled (always: written and
 * fdatasynced, or only written with pc_journal_defer_sync; everysec: in
 * the ring). */
int pc_journal_hook(void *ctx, const pc_mutation *r);
/* pc_mutation_hook(cache, pc_journal_hook, j) / pc_mutation_hook(cache,
 * NULL, NULL). Children forked after the call inherit it. */
int pc_journal_install(pc_journal *j);
int pc_journal_uninstall(pc_journal *j);

/* Periodic work of this process (call about once per second from the
 * event loop): closes its descriptors of segments of past epochs, and
 * writes its own ring out when no drainer ran for 1.5 s; with
 * PC_JOURNAL_TICK_SYNC it always writes its ring out and fdatasyncs its
 * segments. Returns the first error (PC_EIO) and keeps going. */
#define PC_JOURNAL_TICK_SYNC 0x1u
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

/* ---- group commit (docs/journal-format.md §6.6) ------------------------------
 * For a host with an event loop that can hold its replies: with the switch
 * on (this process only; off in a new child), the hook of an always
 * collection still writes the record to this process's segment before it
 * returns - so a failed write (ENOSPC, EIO) is refused and undone as
 * without it - but leaves the fdatasync to the next pc_journal_commit,
 * which makes every record staged since the last commit durable with one
 * fdatasync per segment. The host must not acknowledge a write while
 * pc_journal_commit_pending says records are staged, nor any reply that
 * may depend on one (the simplest rule: no reply at all), and calls
 * pc_journal_commit before it sends them. everysec collections are not
 * affected. */

/* Switches deferred fdatasync on (on != 0) or off for this process.
 * Switching it off commits first (its result is returned). 0, PC_EINVAL,
 * or pc_journal_commit's error. */
int pc_journal_defer_sync(pc_journal *j, int on);
/* The number of always records staged by this process since its last
 * commit (0 = nothing to commit). Process-local: no lock, no system call. */
uint64_t pc_journal_commit_pending(const pc_journal *j);
/* fdatasyncs this process's segments that hold staged records (and the
 * journal directory for a segment created since), then forgets them.
 * Returns 0 when every staged record is durable (also when none was
 * staged), or PC_EIO: some may not be - the journal is marked failing
 * (writes refused, see health below) and the host must not acknowledge
 * the writes of the batch. Either way the batch is over. */
int pc_journal_commit(pc_journal *j);

/* pc_journal_commit in three steps, for a host that fdatasyncs in another
 * thread while its loop stages the next batch: commit_start (the handle's
 * thread) takes every record staged so far into b and starts a new batch
 * for the records staged after it; pc_journal_batch_sync (any thread: it
 * touches b only, never the handle) makes them durable; commit_finish
 * (the handle's thread) records the result and returns what
 * pc_journal_commit would have: 0, or PC_EIO (the records of b may not be
 * durable; the journal is failing, and the next batch fails too). A batch
 * finished without its sync is synced by finish, in the calling thread.
 * One batch in flight per process. b is
 * caller-owned (batch_new / batch_free) and reused batch after batch. */
typedef struct pc_journal_batch pc_journal_batch;
int pc_journal_batch_new(pc_journal_batch **out); /* PC_EINVAL, PC_EHEAP */
void pc_journal_batch_free(pc_journal_batch *b);  /* accepts NULL */
int pc_journal_commit_start(pc_journal *j, pc_journal_batch *b);
void pc_journal_batch_sync(pc_journal_batch *b);
int pc_journal_commit_finish(pc_journal *j, pc_journal_batch *b);
/* The records b covers (as counted by pc_journal_commit_pending). */
uint64_t pc_journal_batch_records(const pc_journal_batch *b);

/* ---- health (docs/journal-format.md §8) ------------------------------------
 * Shared by every process of the journal. Whichever process or thread sees
 * a write or an fdatasync of a segment fail marks the journal failing and
 * sets the engine's "refuse writes" switch (pc_coll_set_write_block,
 * PC_EREFUSED) on every journaled collection: from then on writes are
 * refused before they touch the table, reads go on. The drainer (or, with
 * no drainer, a tick) retries while failing; once every ring is written
 * out and a probe write + fdatasync in the journal directory succeeds, the
 * state clears and writes resume. pc_journal_hold marks it failing by hand
 * (the host could not commit its boot generation, for instance) until
 * pc_journal_release. */
typedef struct pc_journal_health {
    int failing;           /* 1 while writes are refused */
    int err;               /* errno of the failure (ENOSPC, EIO, EDQUOT...), 0 = ok */
    int64_t since_wall_ms; /* wall-clock ms of the first failure, 0 = ok */
    uint64_t lost;         /* acknowledged records reported lost since open */
    uint64_t failures;     /* ok -> failing transitions since open */
    int held;              /* pc_journal_hold is in force */
} pc_journal_health;
int pc_journal_health_get(const pc_journal *j, pc_journal_health *out);
/* Marks the journal failing with err (writes refused) until a release. */
void pc_journal_hold(pc_journal *j, int err);
/* Ends a hold; the journal is ok again after the next successful probe. */
void pc_journal_release(pc_journal *j);

/* How the previous run of this store ended, as its rings file told the
 * open (docs/journal-format.md §6.1, the clean field): for the host's
 * start message. All zero when there was no earlier run's area. */
typedef struct pc_journal_last_stop {
    int found;             /* 1: an earlier run's area was there */
    int unclean;           /* 1: that run did not close it (killed, crashed, power lost) */
    int machine_restarted; /* 1: ... and the machine restarted since: its rings were not
                            * written out (about the last second of everysec may be lost) */
    uint64_t boot_gen;     /* that run's boot generation */
    uint64_t records;      /* acknowledged records its rings still held, written out now */
    unsigned procs;        /* processes those records came from */
} pc_journal_last_stop;
int pc_journal_last_stop_get(const pc_journal *j, pc_journal_last_stop *out);

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
 * process's, any boot's); *removed (may be NULL) gets their number. A
 * segment among them that a replay of this handle skipped whole is moved to
 * the quarantine folder instead (logged, not counted in *removed; see
 * PC_JOURNAL_QUARANTINE_DIR). One save per collection at a time. */
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
    uint64_t groups_dropped;        /* transactions cut short (never acknowledged): not applied */
    uint64_t group_records_dropped; /* their records */
} pc_journal_replay_stats;

/* Errors: PC_EINVAL, PC_EHEAP (process memory), PC_EIO (logged). A corrupt
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

/* A winner's record flag (pc_journal_winner.flags): the record holds the
 * key's state in the table when it was written, under the stamp of an
 * earlier write (docs/journal-format.md §5.3). */
#define PC_JOURNAL_F_STATE 0x01u

/* One key's state in the journal (borrowed: valid during the callback). */
typedef struct pc_journal_winner {
    const void *key;
    size_t klen;
    int op;          /* latest value record: PC_MUT_SET/COUNTER/DEL, 0 = none */
    const void *val; /* SET: the value */
    size_t vlen;
    int64_t counter;         /* COUNTER: the value */
    int64_t expires_wall_ms; /* of that record: wall-clock ms, 0 = never */
    uint64_t boot_gen;
    uint32_t stamp;
    unsigned flags; /* of that record: PC_JOURNAL_F_* */
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

/* ---- the journal directory, for tools --------------------------------------
 * <dir>/journal holds the segment files, one per (collection, save epoch,
 * writing process), named "<collection>.<epoch: 16 hex>.<pid>[-<n>].wal"
 * (docs/journal-format.md). A tool that lists the directory tells them
 * from other files with this; their content is the journal's own. */

/* Parses a segment file name. coll receives the NUL-terminated collection
 * name (cap >= 64), *epoch the segment's save epoch. 0, or PC_EINVAL when
 * name is not a segment name. */
int pc_journal_segment_name_parse(const char *name, char *coll, size_t cap, uint64_t *epoch);

/* A segment the replay skips whole (its header does not decode, is of a
 * newer version, or names another collection or epoch) is never deleted:
 * the handle remembers it, and the save that would retire it moves it to <dir>/journal/quarantine/
 * and writes "<segment>.reason" beside it (one line: why). */
#define PC_JOURNAL_QUARANTINE_DIR "quarantine"
#define PC_JOURNAL_QUARANTINE_REASON ".reason"

/* The bytes and the number of coll's segment files in <dir>/journal (every
 * epoch: also covered ones a retire has not removed yet), what a restore
 * would read at most. PC_EINVAL, PC_EIO (the directory cannot be listed;
 * logged). */
int pc_journal_size(pc_journal *j, const pc_coll *coll, uint64_t *bytes, unsigned *segments);

#ifdef __cplusplus
}
#endif
#endif /* PCACHE_JOURNAL_H */
