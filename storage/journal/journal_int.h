/*
 * journal_int.h - internals of the write-ahead journal, shared by the files
 * of storage/journal/ only: the segment and record codec, the per-process
 * rings and the shared area they live in, the handle's layout, and the
 * calls between journal.c, journal_ring.c, journal_drain.c and
 * journal_replay.c. The API is include/pcache_journal.h; the journal's own
 * tests reach this header through testing/pc_journal_testing.h.
 */
#ifndef PC_JOURNAL_INT_H
#define PC_JOURNAL_INT_H

#include "pcache.h"
#include "pcache_journal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* ---- invariants ------------------------------------------------------------
 * Debug builds check them with PC_ASSERT where the code relies on them
 * ("checked" names where). A damaged segment is never one of them: the
 * replay returns and quarantines it.
 *  J1  A segment only grows while it is current (same n and epoch in its
 *      slot): the append offset a group-commit batch read at start is at
 *      most the offset at finish, so marking it synced never claims bytes
 *      that were not written. Checked: pc_jbatch_finish.
 *  J2  A batch holds at most one entry per collection (each pending
 *      segment is taken once, under the slot's lock). Checked:
 *      pc_jbatch_start.
 * j is the pc_journal (its logger reports a failure). */
#define PC_ASSERT(j, inv, cond) PC_INVARIANT(&(j)->log, inv, cond)

/* ---- the on-disk format (docs/journal-format.md) -------------------------
 * For the writer, the replay and the tests (testing/pc_journal_testing.h):
 * pure functions over bytes, every input treated as hostile. All integers
 * little-endian. */
#define PC_JOURNAL_VERSION 2u /* written (docs/journal-format.md §10) */
#define PC_JSEG_HDR_SIZE 128u /* segment header */
#define PC_JREC_HDR_SIZE 32u  /* record header before the key */
#define PC_JREC_SUM_SIZE 8u   /* XXH3-64 after the value */
#define PC_JREC_MIN_SIZE (PC_JREC_HDR_SIZE + PC_JREC_SUM_SIZE)
#define PC_JREC_MAX_SIZE (PC_JREC_MIN_SIZE + PC_KEY_MAX + PC_VALUE_MAX)
#define PC_JSEG_SUFFIX ".wal"
/* The oldest version still read (version 1: no GROUP records). */
#define PC_JOURNAL_VERSION_MIN 1u
/* Segments the replay cannot read go here instead of being retired
 * (journal.c); the tools read the names from pcache_journal.h. */
#define PC_JQUARANTINE_DIR PC_JOURNAL_QUARANTINE_DIR
#define PC_JQUARANTINE_REASON PC_JOURNAL_QUARANTINE_REASON

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

/* Record flags (byte 9); a replay winner carries its record's. */
#define PC_JREC_F_STATE PC_JOURNAL_F_STATE /* the key's state in the table (§5.3) */
/* One of the records of one transaction (an EXEC) in this collection, all
 * of them back to back in one segment; group_left counts those after it
 * (0: the last). Replay applies a group whole or, cut short, not at all. */
#define PC_JREC_F_GROUP 0x02u

/* A decoded record: pointers borrow the buffer it was decoded from. */
typedef struct pc_jrec {
    int op;         /* PC_MUT_SET .. PC_MUT_EXPIRE */
    unsigned flags; /* PC_JREC_F_* */
    uint32_t stamp;
    int64_t expires_wall_ms;
    const void *key;
    size_t klen;
    const void *val; /* SET: the value; COUNTER: 8 bytes of int64 */
    size_t vlen;
    int64_t counter;     /* COUNTER */
    uint32_t group_left; /* PC_JREC_F_GROUP: records of the group after this one */
    size_t size;         /* bytes of the whole record */
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
/* The same checks but for the sum, for a ring item (its sum is not yet
 * computed): 0 and out->size, or PC_ECORRUPT with *why. */
int pc_jrec_decode_body(const void *buf, size_t avail, pc_jrec *out, const char **why);

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

/* ---- the handle ------------------------------------------------------------
 * Its layout, shared by the writer (journal.c), the rings (journal_ring.c),
 * the drainer (journal_drain.c) and the replay (journal_replay.c). */
#define PC_JBEAT_STALE_MS 1500 /* no drainer heartbeat for this long: a tick drains */

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

/* The shared area: a MAP_SHARED mapping of the file <dir>/journal/rings
 * (journal_shm.c), mapped by pc_journal_open before the host forks: this
 * header, nslots ring slots, then the rings (ring_bytes each, page
 * aligned). Because it is a file, what the rings hold outlives every
 * process of the host in the page cache, and the next open writes it out
 * (docs/journal-format.md §6.1). Host byte order: the file is read back
 * only on the machine that wrote it, and only when boot_id says the
 * machine did not restart in between. epoch[i] is collection i's save
 * epoch: written only by pc_journal_begin_save (atomic increment + seq_cst
 * fence), read lock-free by every writer after a seq_cst fence (journal.c,
 * §5 of the format document). */
#define PC_JSHM_MAGIC 0x4d48534a4e4a4350ull /* "PCJNJSHM" */
#define PC_JSHM_LAYOUT 2u                   /* the layout of this struct and the slots */
#define PC_JRINGS_FILE "rings"
struct pc_jshm {
    uint64_t magic;
    uint32_t version; /* PC_JSHM_LAYOUT */
    uint32_t ncoll;
    uint64_t boot_gen;
    uint32_t nslots;
    uint32_t light_fence; /* writers fence with a compiler barrier (journal.c) */
    uint64_t ring_bytes;
    _Atomic int64_t drain_beat_ms; /* CLOCK_MONOTONIC ms of a drainer's last pass, 0 = never */
    _Atomic uint32_t drain_futex;  /* bumped (and futex-woken) to wake drainers */
    uint32_t slot_size;            /* sizeof(struct pc_jslot_shm) of the writer */
    uint64_t area_bytes;           /* the whole area: header, slots, rings */
    _Atomic uint32_t clean;        /* 1: closed with every ring written out */
    uint32_t pad1;
    uint8_t boot_id[16]; /* the kernel's boot id when the area was set up (0s: unknown) */
    char coll_names[PC_MAX_COLLECTIONS][PC_COLL_NAME_MAX + 1]; /* collection i's name */
    _Atomic uint64_t epoch[PC_MAX_COLLECTIONS];
    /* retired[i]: the epoch of collection i's last retire (a committed
     * snapshot covers every record of an epoch below it): a drainer drops
     * ring records below it instead of creating a segment for them.
     * Written by pc_journal_retire (atomic max), read by drainers. */
    _Atomic uint64_t retired[PC_MAX_COLLECTIONS];
    /* health (pc_journal_health): h_failing 0 -> 1 by CAS in pc_jhealth_fail
     * (any process or thread), back to 0 only by pc_jhealth_ok; h_hold
     * keeps it failing whatever the probe says (pc_journal_hold) */
    _Atomic uint32_t h_failing;
    _Atomic uint32_t h_hold;
    _Atomic int32_t h_err;
    _Atomic int64_t h_since_wall_ms;
    _Atomic uint64_t h_lost;
    _Atomic uint64_t h_failures;
};

/* A process-local open segment: the descriptor and which segment it is.
 * The drainer's descriptors also keep an O_DIRECT descriptor of the same
 * file for the whole blocks of a run (journal_ring.c, pc_jdio); a zeroed
 * struct has none. */
struct pc_jfd {
    int fd; /* -1 = none */
    int32_t n;
    uint32_t pid;
    uint64_t epoch;
    bool dio_open; /* dio is an O_DIRECT descriptor of the same segment */
    int dio;
};

/* The drainer's direct-I/O state (docs/journal-format.md §6.2, "Direct
 * writes"): an aligned bounce buffer the whole blocks of a run are
 * composed in, and room for longer runs than a caller's stack holds.
 * Private to the drainer thread (under dmu); allocated before any lock. */
struct pc_jdio {
    uint8_t *buf; /* cap bytes, align-aligned */
    size_t cap;   /* a multiple of align */
    size_t align; /* the block: offsets and lengths of direct writes */
    bool off;     /* the file system refused O_DIRECT: buffered only */
    struct iovec *iov;
    uint64_t *sum;
    unsigned recs; /* records a run may hold */
};

/* One collection's writer state in this process (process-local). */
struct pc_jpc {
    pc_coll *coll;
    uint64_t seen_epoch; /* the epoch of this process's last record, 0 = none yet */
    uint32_t grp_left;   /* records still to come of the group being journaled */
    uint64_t grp_txn;    /* its pc_mutation.txn */
};

struct pc_journal {
    pc_cache *c;
    struct pc_jshm *shm; /* shared: see above */
    size_t shm_bytes;
    int shm_fd;      /* <dir>/journal/rings, flock'ed by the opener (inherited), -1 = none */
    bool shm_anon;   /* the area is anonymous memory: the file could not be set up */
    size_t rings_at; /* offset of the first ring in the area */
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
    /* group commit (pc_journal_defer_sync; docs/journal-format.md §6.6),
     * process-local: while defer_sync is on, an always record is written to
     * its segment by the hook but fdatasynced by the next pc_journal_commit.
     * staged counts such records since the last commit; pend[c] names the
     * segment of collection c that holds some of them (the one to sync);
     * commit_err says a segment holding staged records could not be made
     * durable when the hook had to leave it (the next commit fails). */
    bool defer_sync;
    bool commit_err;
    uint64_t staged;
    struct pc_jpend {
        bool on;
        int32_t n;
        uint64_t epoch;
    } pend[PC_MAX_COLLECTIONS];
    /* this process as the drainer (journal_drain.c); dmu guards the rest */
    pthread_mutex_t dmu;
    bool drainer;       /* the drainer thread runs in this process */
    _Atomic bool dstop; /* asks it to stop */
    pthread_t dthr;
    struct pc_jfd *dfd; /* [nslots * PC_MAX_COLLECTIONS]: the drainer's descriptors */
    struct pc_jdio dio; /* the drainer's direct writes (buf NULL until allocated) */
    int64_t last_sync;  /* coarse ms of its last fdatasync pass */
    int drc;            /* the first error of its passes since the last report */
    int pass_err;       /* errno of an I/O failure in the current pass, 0 = none */
    bool recovered;     /* a pass cleared the health: logged by pc_journal_sync_all */
    char derr[512];     /* its first error's text, logged by pc_journal_sync_all */
    /* what the open found of the previous run (journal_shm.c) */
    pc_journal_last_stop prev;
    /* segments a replay in this process (or in the one it was forked
     * from) skipped whole: "<file>\0<reason>\0" each; a retire moves them
     * to the quarantine instead of unlinking them (journal.c) */
    char **bad;
    size_t nbad;
    struct pc_jsynced *synced; /* sync pass: files and sizes last synced */
    size_t nsynced, capsynced;
    struct pc_jpc pcs[PC_MAX_COLLECTIONS];
};

/* journal_shm.c: the shared area. open maps <dir>/journal/rings (taking
 * its lock, PC_ELOCKED when another live process holds it), after writing
 * out and fdatasyncing what a previous run left in it (PC_EIO, PC_EFORMAT
 * when it cannot: the file is then left as it is); falls back to
 * anonymous memory, logged, when the file cannot be allocated. close
 * marks the area clean when every ring is empty and unmaps it. reserve
 * allocates slot i's ring in the file before its first use (0 or an
 * errno). */
int pc_jshm_open(pc_journal *j);
void pc_jshm_close(pc_journal *j, bool clean);
int pc_jshm_reserve(pc_journal *j, unsigned slot);
/* Collection c's name (the area's copy: a recovery reads the old run's). */
const char *pc_jcoll_name(const pc_journal *j, unsigned c);

/* journal_ring.c: the producer side (the hook), draining. */
int pc_jring_put(pc_journal *j, unsigned coll, uint64_t epoch, const pc_jrec *rec, size_t size);
/* Drains this process's own ring into its segments; with sync also
 * fdatasyncs them (and the directory for new ones). Logs failures. */
int pc_jown_flush(pc_journal *j, bool sync);
/* The always mode: drain the own ring, then fdatasync coll's segment;
 * with stage (group commit) the fdatasync is left to pc_jown_sync_staged
 * and the segment is noted in j->pend[coll]. */
int pc_jown_commit(pc_journal *j, unsigned coll, bool stage);
/* journal_commit.c: group commit. start takes this process's staged
 * records (j->pend, j->staged) into b; finish records the result of b's
 * pc_journal_batch_sync (or of its absence: then it fails) and returns 0 or
 * PC_EIO. Both in the handle's thread. */
int pc_jbatch_start(pc_journal *j, pc_journal_batch *b);
int pc_jbatch_finish(pc_journal *j, pc_journal_batch *b);
/* Takes the record the hook just put back out of the ring, unless a
 * consumer already wrote it (the caller refuses the write). */
void pc_jown_takeback(pc_journal *j);
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
/* Drains slot s's items into its segments through fds[]; under s's lock; PC_EIO with e set.
 * dio (the drainer's, or NULL): write whole blocks with O_DIRECT. */
int pc_jdrain_locked(pc_journal *j, struct pc_jslot_shm *s, struct pc_jfd *fds, struct pc_jdio *dio,
                     struct pc_jioerr *e);
/* A run of whole records on its way to a segment: each record's bytes but
 * its sum (iov[2i], in the ring) and its sum (iov[2i + 1], pointing at
 * sum[i], the consumer's memory). The consumer never writes into the ring:
 * lines it only reads stay shared, and the producer's next lap over them
 * costs no transfer of a modified line from the consumer's core. */
struct pc_jrun {
    struct iovec *iov; /* [2 * cap] */
    uint64_t *sum;     /* [cap] */
    unsigned n, cap;   /* records, and the most it may hold */
    size_t bytes;      /* their total size */
};
/* journal_direct.c: writes run at offset at of f's segment, its whole
 * blocks through f->dio from d's buffer, the partial ones through f->fd.
 * 0; PC_EIO with e set (the file cut back to at, *cut_failed when that
 * failed); 1 when the file system refused the direct write (d->off is set,
 * the file cut back: write the run through the page cache instead). */
int pc_jrun_write_direct(struct pc_jdio *d, struct pc_jfd *f, const struct pc_jrun *run,
                         uint64_t at, struct pc_jioerr *e, bool *cut_failed);
/* Allocates the drainer's direct-I/O state (no lock held); PC_EHEAP. */
int pc_jdio_alloc(struct pc_jdio *d);
void pc_jdio_free(struct pc_jdio *d);
/* Wakes the drainer threads (bumps and futex-wakes shm->drain_futex). */
void pc_jdrainer_wake(pc_journal *j);

/* journal.c: the health (pcache_journal.h). fail marks the journal
 * failing with errno err and refuses writes on its journaled collections;
 * ok clears it (and lets writes go) unless held. Both thread-safe, never
 * log. probe writes and fdatasyncs a small file in the journal directory:
 * 0 or the errno. */
void pc_jhealth_fail(pc_journal *j, int err);
bool pc_jhealth_failing(const pc_journal *j);
bool pc_jhealth_ok(pc_journal *j);
int pc_jhealth_probe(pc_journal *j);
/* journal_ring.c: records in slot s's ring not yet in a segment. */
uint64_t pc_jring_pending(pc_journal *j, struct pc_jslot_shm *s);
/* Walks slot s's items in [tail, head) as hostile bytes (a rings file left
 * by an earlier run): returns the end of the last whole valid item, which
 * is head when every item is valid; *recs gets the records before it and
 * *why (when it is short of head) the reason. Sets nothing in the slot. */
uint64_t pc_jring_check(const pc_journal *j, const struct pc_jslot_shm *s, uint64_t *recs,
                        const char **why);

/* journal_drain.c: the drainer. */
/* One drain + sync pass over every slot, in the calling thread; starts the
 * drainer thread first when start. */
int pc_jdrain_pass(pc_journal *j, bool start);
/* Stops this process's drainer thread (if any) and closes its descriptors. */
void pc_jdrainer_stop(pc_journal *j);
/* Frees the drainer's descriptors and sync list (after pc_jdrainer_stop). */
void pc_jdrainer_free(pc_journal *j);

/* Calls fn for each segment file of collection cn in the journal directory
 * (its name and epoch); stops at fn's non-zero result, which it returns.
 * PC_EIO (logged) when the directory cannot be listed. */
typedef int (*pc_jseg_each_fn)(void *ctx, const char *file, uint64_t epoch);
int pc_jseg_each(pc_journal *j, const char *cn, pc_jseg_each_fn fn, void *ctx);
/* Remembers that the replay skipped segment file whole, and why (journal.c). */
void pc_jbad_note(pc_journal *j, const char *file, const char *why);
/* Logs "journal: <msg>" through the handle's callback (level checked first). */
void pc_jlog(const pc_journal *j, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A printable rendering of a binary key for log lines (escaped, cut at 64
 * bytes with "..."), NUL-terminated in out. */
void pc_jkey_text(const void *key, size_t klen, char *out, size_t cap);

#endif /* PC_JOURNAL_INT_H */
