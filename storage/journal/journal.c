/*
 * journal.c - the journal's write side: the write-ahead path (the engine's
 * mutation hook), the save epochs and retiring, open/close
 * (docs/journal-format.md §5-§6). How records get from the hook into the
 * segment files - per-process rings in shared memory and their drainer - is
 * journal_ring.c and journal_drain.c; the replay is journal_replay.c, the
 * bytes journal_format.c.
 *
 * Each process's records go to its own segment files per (collection, save
 * epoch): there is no shared append offset and no shared read-modify-write
 * on the write path. What processes share is the MAP_SHARED area created
 * by pc_journal_open before the host forks: each collection's current save
 * epoch (writers only read it, a save increments it) and the rings.
 *
 * Why a write is never lost between a snapshot and the journal (§5): the
 * hook runs after the write is in the table. It fences and then loads the
 * epoch; begin_save increments the epoch and fences before the snapshot
 * walk starts. By the fence rules either the hook's load sees the new
 * epoch (the record goes to a new-epoch segment, which replay reads) or
 * the walk sees the write (the snapshot holds it or something later, and
 * the old-epoch segment it went to may be retired once the snapshot
 * commits). Replay orders a key's records and the snapshot's copy by
 * (boot_gen, stamp). The mirror case - a write that reached the table
 * before the save began but whose hook read the new epoch - is the
 * rotation record's (§5.3, pc_jrotation_state).
 *
 * Process-local state is the handle: a child inherits a copy. The first
 * call after a fork (seen through a pthread_atfork counter) drops what it
 * inherited without writing it: the parent's ring slot, descriptors and
 * drainer thread stay the parent's.
 */
#include "journal_int.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/membarrier.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xxhash.h>

#define PC_JRING_DEFAULT (4u << 20)
#define PC_JSLOTS_DEFAULT 128u

/* ---- process-wide: fork detection and the exit flush ----------------------
 * The only state outside a handle: a counter bumped in every forked child
 * (so a handle notices it was inherited) and the list of this process's open
 * handles for the exit flush. */
static _Atomic unsigned long pc_jfork_gen;
static pthread_once_t pc_jonce = PTHREAD_ONCE_INIT;
#define PC_JOPEN_MAX 16
static pc_journal *pc_jopen_list[PC_JOPEN_MAX];

static void pc_jatfork_child(void)
{
    atomic_fetch_add_explicit(&pc_jfork_gen, 1, memory_order_relaxed);
}

static inline void pc_jcheck_fork(pc_journal *j);

static void pc_jatexit(void)
{
    for (unsigned i = 0; i < PC_JOPEN_MAX; i++) {
        pc_journal *j = pc_jopen_list[i];
        if (j == NULL)
            continue;
        pc_jcheck_fork(j);
        pc_jdrainer_stop(j);
        (void)pc_journal_flush(j, 1);
        pc_jown_release(j);
    }
}

static void pc_jonce_init(void)
{
    (void)pthread_atfork(NULL, NULL, pc_jatfork_child);
    (void)atexit(pc_jatexit);
}

/* ---- small helpers --------------------------------------------------------- */

void pc_jlog(const pc_journal *j, int level, const char *fmt, ...)
{
    if (j == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    pc_log_vemit(&j->log, level, "journal: ", fmt, ap);
    va_end(ap);
}

void pc_jkey_text(const void *key, size_t klen, char *out, size_t cap)
{
    const uint8_t *k = key;
    size_t o = 0, show = klen > 64 ? 64 : klen;
    if (cap == 0)
        return;
    for (size_t i = 0; i < show && o + 5 < cap; i++) {
        uint8_t ch = k[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\' && ch != '\'') {
            out[o++] = (char)ch;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = pc_hex_digit(ch >> 4);
            out[o++] = pc_hex_digit(ch);
        }
    }
    if (show < klen && o + 4 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

/* The offset that turns the engine's CLOCK_MONOTONIC deadlines into
 * wall-clock ones; sampled at most once a second (NTP slews it by at most
 * 0.5 ms per second). */
static void pc_jwall_refresh(pc_journal *j, int64_t now)
{
    j->wall_off = pc_wall_ms() - pc_mono_ms();
    j->wall_off_at = now;
}

/* The collection's index in the handle, or -1. */
static struct pc_jpc *pc_jpc_of(pc_journal *j, const pc_coll *coll)
{
    if (j->last != NULL && j->last->coll == coll)
        return j->last;
    for (unsigned i = 0; i < j->ncoll; i++) {
        if (j->pcs[i].coll == coll) {
            j->last = &j->pcs[i];
            return j->last;
        }
    }
    return NULL;
}

/* A collection's current epoch, read the way the write path must (§5): a
 * full fence after the table write, then a plain load. When the kernel
 * has MEMBARRIER_CMD_GLOBAL the fence is only a compiler barrier: the save
 * side's membarrier() in pc_journal_begin_save acts as a full fence in
 * every running thread of every process, which is what the pairing of
 * §5.2 needs (the asymmetric-fence technique of userspace RCU). That keeps
 * a store-buffer drain - the set just wrote its value - off every write.
 * The choice is made once, before any process forks (shm->light_fence). */
static uint64_t pc_jepoch_load(const pc_journal *j, const struct pc_jpc *pc)
{
    if (j->light_fence)
        atomic_signal_fence(memory_order_seq_cst);
    else
        atomic_thread_fence(memory_order_seq_cst);
    return atomic_load_explicit(&j->shm->epoch[pc - j->pcs], memory_order_relaxed);
}

/* The rotation record (§5.3). The first SET or COUNTER record a process
 * appends after it sees a new epoch may describe a write that reached the
 * table before the save began, while a later write of the same key went to
 * a segment the save retires: replayed as is, it could bring back a state
 * the snapshot saw superseded (a deleted key). So that record carries the
 * key's state in the table now, read after a seq_cst fence - the write's
 * own state if nothing changed it, else a later one (a DEL when the key is
 * gone) flagged PC_JREC_F_STATE - under the write's stamp. Every write
 * that changed the key in between is journaled in this epoch with a later
 * stamp, or is covered by the snapshot, or was never acknowledged. Fills
 * *out and returns 1 when the record must be replaced, 0 to keep r (also
 * when the table cannot be read: never worse than the write itself).
 * Cost: one lookup per process, collection and save, plus a copy of the
 * value when it changed. */
static int pc_jrotation_state(pc_journal *j, const pc_mutation *r, pc_mutation *out)
{
    atomic_thread_fence(memory_order_seq_cst);
    pc_meta m;
    size_t got = 0, need = 0;
    int rc;
    if (j->scratch == NULL) {
        if ((j->scratch = malloc(256)) == NULL)
            return 0;
        j->scratch_cap = 256;
    }
    for (;;) {
        rc = pc_get_buf(r->coll, r->key, r->klen, j->scratch, j->scratch_cap, &got, &need, &m);
        if (rc != PC_ETOOSMALL)
            break;
        uint8_t *nb = realloc(j->scratch, need + 1);
        if (nb == NULL)
            return 0;
        j->scratch = nb;
        j->scratch_cap = need + 1;
    }
    *out = *r;
    out->val = NULL;
    out->vlen = 0;
    out->counter = 0;
    out->expires_mono_ms = 0;
    if (rc == PC_ENOTFOUND) {
        out->op = PC_MUT_DEL;
        return 1;
    }
    if (rc != 0)
        return 0;
    if (m.ttl_ms >= 0)
        out->expires_mono_ms = pc_mono_ms() + (m.ttl_ms > 0 ? m.ttl_ms : 1);
    if (m.is_counter) {
        /* the read hands the counter over as a number as well as its text */
        out->counter = m.counter;
        out->op = PC_MUT_COUNTER;
    } else {
        out->op = PC_MUT_SET;
        out->val = j->scratch;
        out->vlen = got;
    }
    /* unchanged: keep the write's own record (its exact deadline) */
    int64_t d = out->expires_mono_ms - r->expires_mono_ms;
    bool same_exp = (out->expires_mono_ms == 0) == (r->expires_mono_ms == 0) && d <= 5 && d >= -5;
    if (out->op == r->op && same_exp &&
        (r->op == PC_MUT_COUNTER
             ? out->counter == r->counter
             : out->vlen == r->vlen && (r->vlen == 0 || memcmp(out->val, r->val, r->vlen) == 0)))
        return 0;
    return 1;
}

/* After a fork: forget the parent's ring slot, descriptors and drainer
 * (the parent's records are the parent's to write), take this process's
 * pid. */
static void pc_jafter_fork(pc_journal *j, unsigned long gen)
{
    for (unsigned i = 0; i < j->ncoll; i++)
        j->pcs[i].seen_epoch = 0;
    pc_jring_after_fork(j);
    /* group commit is a per-process choice; the parent's staged records
     * are the parent's to commit */
    j->defer_sync = false;
    j->commit_err = false;
    j->staged = 0;
    memset(j->pend, 0, sizeof j->pend);
    j->pid = getpid();
    j->fork_gen = gen;
}

static inline void pc_jcheck_fork(pc_journal *j)
{
    unsigned long gen = atomic_load_explicit(&pc_jfork_gen, memory_order_relaxed);
    if (j->fork_gen != gen)
        pc_jafter_fork(j, gen);
}

/* ---- the write path ---------------------------------------------------------
 * Hot path. Per record: the fork counter and the collection (process-local),
 * the journal mode (in the record: the engine's read of the hook word), one
 * seq_cst fence and the epoch (a shared line written only by saves), the
 * record encoded straight into this process's ring (header, key, value; no
 * checksum: the consumer computes it) and one release store of the ring's
 * head - no allocation, no lock, no system call, no shared read-modify-write.
 * A record with an expiry also reads the coarse clock (vDSO) to convert it.
 * always adds the drain of the ring (one pwrite) and an fdatasync, or with
 * pc_journal_defer_sync the pwrite only: the host's pc_journal_commit
 * fdatasyncs once for every record staged since the last one. */
int pc_journal_hook(void *ctx, const pc_mutation *r)
{
    pc_journal *j = ctx;
    pc_mutation del;
    if (r != NULL && r->op == PC_MUT_EVICT) {
        /* an eviction is journaled as the delete it is, so that replay
         * does not bring back what memory no longer holds */
        del = *r;
        del.op = PC_MUT_DEL;
        del.expires_mono_ms = 0;
        r = &del;
    }
    if (j == NULL || r == NULL || r->op < PC_MUT_SET || r->op > PC_MUT_EXPIRE ||
        r->klen > PC_KEY_MAX || (r->op == PC_MUT_SET && r->vlen > PC_VALUE_MAX))
        return PC_EINVAL;
    pc_jcheck_fork(j);
    struct pc_jpc *pc = pc_jpc_of(j, r->coll);
    if (pc == NULL)
        return PC_EINVAL;
    unsigned mode = r->word; /* the mode the engine read for this write */
    /* The records of one transaction stay in one segment: after its first
     * one, the epoch that one read (the save argument of §5.2 holds: every
     * write of the transaction reached the table before the first hook's
     * fence, so a snapshot that retires the epoch holds them all). */
    bool cont = pc->grp_left > 0 && r->group == pc->grp_left && r->txn == pc->grp_txn;
    pc->grp_left = 0;
    uint64_t epoch = cont ? pc->seen_epoch : pc_jepoch_load(j, pc);
    int rc;
    pc_mutation cur;
    unsigned rflags = r->group > 0 ? PC_JREC_F_GROUP : 0;
    if (epoch != pc->seen_epoch) {
        /* the first record since this process saw the epoch change (§5.3) */
        pc->seen_epoch = epoch;
        if ((r->op == PC_MUT_SET || r->op == PC_MUT_COUNTER) && pc_jrotation_state(j, r, &cur)) {
            r = &cur;
            rflags |= PC_JREC_F_STATE;
        }
    }
    size_t vlen = r->op == PC_MUT_SET ? r->vlen : r->op == PC_MUT_COUNTER ? 8 : 0;
    int64_t wall = 0;
    if (r->expires_mono_ms > 0 && r->op != PC_MUT_DEL) {
        int64_t now = pc_mono_coarse_ms();
        if (now - j->wall_off_at >= 1000)
            pc_jwall_refresh(j, now);
        wall = r->expires_mono_ms + j->wall_off;
        if (wall <= 0)
            wall = 1; /* a deadline before 1970: long expired */
    }
    pc_jrec rec = {.op = r->op,
                   .flags = rflags,
                   .stamp = r->stamp,
                   .expires_wall_ms = wall,
                   .key = r->key,
                   .klen = r->klen,
                   .val = r->val,
                   .vlen = vlen,
                   .counter = r->counter,
                   .group_left = r->group > 0 ? r->group - 1 : 0};
    unsigned ci = (unsigned)(pc - j->pcs);
    if ((rc = pc_jring_put(j, ci, epoch, &rec, pc_jrec_size(r->klen, vlen))) != 0)
        return rc;
    if (r->group > 1) { /* more of this transaction's records follow */
        pc->grp_left = r->group - 1;
        pc->grp_txn = r->txn;
    }
    /* a failure (PC_EIO) makes the engine undo the write; the journal is
     * failing from now on, so the writes after it are refused (PC_EREFUSED) */
    if (mode == PC_JOURNAL_ALWAYS)
        return pc_jown_commit(j, ci, j->defer_sync);
    if (j->private_ring) { /* no shared ring: nobody else could write it out */
        if ((rc = pc_jown_flush(j, false)) != 0)
            pc_jown_takeback(j); /* undone: the record must not reach a segment later */
        return rc;
    }
    return 0;
}

/* ---- health ------------------------------------------------------------------
 * Refusing writes goes through the engine's per-collection switch, so a
 * write of any process is refused before it touches the table. The switch
 * follows h_failing: fail sets it after the flag, ok clears it after the
 * flag and sets it again should a concurrent fail have raced the clear. */

static void pc_jblock_all(pc_journal *j, int rc)
{
    for (unsigned i = 0; i < j->ncoll; i++)
        if (pc_journal_mode(j->pcs[i].coll) != 0)
            (void)pc_coll_set_write_block(j->pcs[i].coll, rc);
}

void pc_jhealth_fail(pc_journal *j, int err)
{
    uint32_t zero = 0;
    if (atomic_compare_exchange_strong(&j->shm->h_failing, &zero, 1)) {
        atomic_store(&j->shm->h_err, err != 0 ? err : EIO);
        atomic_store(&j->shm->h_since_wall_ms, pc_wall_ms());
        atomic_fetch_add(&j->shm->h_failures, 1);
    }
    pc_jblock_all(j, PC_EREFUSED);
}

bool pc_jhealth_failing(const pc_journal *j)
{
    return atomic_load_explicit(&j->shm->h_failing, memory_order_relaxed) != 0;
}

bool pc_jhealth_ok(pc_journal *j)
{
    if (atomic_load(&j->shm->h_hold) != 0)
        return false;
    uint32_t one = 1;
    if (!atomic_compare_exchange_strong(&j->shm->h_failing, &one, 0))
        return false;
    atomic_store(&j->shm->h_since_wall_ms, 0);
    atomic_store(&j->shm->h_err, 0);
    pc_jblock_all(j, 0);
    if (atomic_load(&j->shm->h_failing) != 0) /* a failure raced the clear */
        pc_jblock_all(j, PC_EREFUSED);
    return true;
}

/* 64 KiB: writes resume only when there is room for more than a record or
 * two, so a nearly full disk does not flap between the states. */
#define PC_JPROBE_BYTES (64u << 10)
int pc_jhealth_probe(pc_journal *j)
{
    static const uint8_t zeros[4096];
    char name[64];
    snprintf(name, sizeof name, ".probe-%ld", (long)getpid());
    int fd = openat(j->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0)
        return errno != 0 ? errno : EIO;
    int err = 0;
    for (size_t off = 0; err == 0 && off < PC_JPROBE_BYTES; off += sizeof zeros) {
        ssize_t w = pwrite(fd, zeros, sizeof zeros, (off_t)off);
        if (w != (ssize_t)sizeof zeros)
            err = w < 0 && errno != 0 ? errno : ENOSPC;
    }
    if (err == 0 && fdatasync(fd) != 0)
        err = errno != 0 ? errno : EIO;
    close(fd);
    (void)unlinkat(j->dirfd, name, 0);
    return err;
}

int pc_journal_health_get(const pc_journal *j, pc_journal_health *out)
{
    if (j == NULL || out == NULL)
        return PC_EINVAL;
    out->failing = atomic_load(&j->shm->h_failing) != 0;
    out->err = out->failing ? atomic_load(&j->shm->h_err) : 0;
    out->since_wall_ms = out->failing ? atomic_load(&j->shm->h_since_wall_ms) : 0;
    out->lost = atomic_load(&j->shm->h_lost);
    out->failures = atomic_load(&j->shm->h_failures);
    out->held = atomic_load(&j->shm->h_hold) != 0;
    return 0;
}

void pc_journal_hold(pc_journal *j, int err)
{
    if (j == NULL)
        return;
    atomic_store(&j->shm->h_hold, 1);
    pc_jhealth_fail(j, err);
}

void pc_journal_release(pc_journal *j)
{
    if (j != NULL)
        atomic_store(&j->shm->h_hold, 0);
}

/* ---- periodic work ------------------------------------------------------------
 * Who writes and fsyncs everysec records: the drainer thread, which the
 * first pc_journal_sync_all of a process starts (the maintenance process),
 * drains every ring and fdatasyncs the segments that grew about once per
 * second. A process's tick writes its own ring out only when no drainer
 * ran for PC_JBEAT_STALE_MS (or with PC_JOURNAL_TICK_SYNC, which also
 * fdatasyncs): that keeps the page-cache writes and the waits for the disk
 * off the workers that serve traffic. */

int pc_journal_tick(pc_journal *j, unsigned flags)
{
    if (j == NULL || (flags & ~PC_JOURNAL_TICK_SYNC) != 0)
        return PC_EINVAL;
    pc_jcheck_fork(j);
    int64_t now = pc_mono_coarse_ms();
    bool sync = (flags & PC_JOURNAL_TICK_SYNC) != 0;
    int64_t beat = atomic_load_explicit(&j->shm->drain_beat_ms, memory_order_relaxed);
    int rc = 0;
    bool stale = now - beat >= PC_JBEAT_STALE_MS;
    if (j->slot != NULL && (sync || stale))
        rc = pc_jown_flush(j, sync);
    /* with no drainer, a tick is what notices that the journal writes again */
    if (rc == 0 && stale && pc_jhealth_failing(j) &&
        (j->slot == NULL || pc_jring_pending(j, j->slot) == 0) && pc_jhealth_probe(j) == 0 &&
        pc_jhealth_ok(j))
        pc_jlog(j, PC_LOG_WARN, "%s: writing again: writes resume", j->path);
    pc_jown_rotate(j);
    pc_jwall_refresh(j, now);
    return rc;
}

int pc_journal_flush(pc_journal *j, int sync)
{
    if (j == NULL)
        return PC_EINVAL;
    pc_jcheck_fork(j);
    return pc_jown_flush(j, sync != 0);
}

/* ---- group commit (docs/journal-format.md §6.6) ---------------------------
 * The host batches: every always record is written to its segment inside
 * the hook (so a failed write is still refused before it is acknowledged
 * and the engine undoes it), the fdatasync is one per pc_journal_commit
 * for all of them. Only the host knows when its replies go out, so only it
 * can tell the journal when a batch ends. */

int pc_journal_defer_sync(pc_journal *j, int on)
{
    if (j == NULL)
        return PC_EINVAL;
    pc_jcheck_fork(j);
    int rc = 0;
    if (!on && j->defer_sync)
        rc = pc_journal_commit(j); /* nothing staged stays unsynced */
    j->defer_sync = on != 0;
    return rc;
}

uint64_t pc_journal_commit_pending(const pc_journal *j)
{
    /* a handle inherited across fork() and not used since: nothing of
     * this process's is staged (the count is the parent's) */
    if (j == NULL || j->fork_gen != atomic_load_explicit(&pc_jfork_gen, memory_order_relaxed))
        return 0;
    return j->staged;
}

int pc_journal_commit_start(pc_journal *j, pc_journal_batch *b)
{
    if (j == NULL || b == NULL)
        return PC_EINVAL;
    pc_jcheck_fork(j);
    return pc_jbatch_start(j, b);
}

int pc_journal_commit_finish(pc_journal *j, pc_journal_batch *b)
{
    if (j == NULL || b == NULL)
        return PC_EINVAL;
    pc_jcheck_fork(j);
    return pc_jbatch_finish(j, b);
}

int pc_journal_commit(pc_journal *j)
{
    if (j == NULL)
        return PC_EINVAL;
    pc_jcheck_fork(j);
    if (j->staged == 0 && !j->commit_err)
        return 0;
    pc_journal_batch *b = NULL;
    int rc = pc_journal_batch_new(&b);
    if (rc != 0) {
        /* no memory for the batch: the records stay staged for the next
         * commit; this one cannot say they are durable */
        return PC_EIO;
    }
    (void)pc_jbatch_start(j, b);
    pc_journal_batch_sync(b);
    rc = pc_jbatch_finish(j, b);
    pc_journal_batch_free(b);
    return rc;
}

int pc_journal_sync_all(pc_journal *j)
{
    if (j == NULL)
        return PC_EINVAL;
    pc_jcheck_fork(j);
    return pc_jdrain_pass(j, true);
}

/* ---- saves ---------------------------------------------------------------- */

static int pc_jcoll_index(const pc_journal *j, const pc_coll *coll)
{
    for (unsigned i = 0; i < j->ncoll; i++)
        if (j->pcs[i].coll == coll)
            return (int)i;
    return -1;
}

int pc_journal_begin_save(pc_journal *j, pc_coll *coll, uint64_t *epoch)
{
    int i = j != NULL ? pc_jcoll_index(j, coll) : -1;
    if (i < 0 || epoch == NULL)
        return PC_EINVAL;
    uint64_t e = atomic_fetch_add_explicit(&j->shm->epoch[i], 1, memory_order_seq_cst) + 1;
    /* the fence of §5: after it, every write whose hook read the old epoch
     * is visible to the walk that follows. With light fences in the
     * writers, the membarrier is that fence on their side; should it fail
     * the save must not go on (its retire would rely on it). */
    atomic_thread_fence(memory_order_seq_cst);
    if (j->light_fence && syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0) {
        pc_jlog(j, PC_LOG_ERR, "%s: membarrier failed: %s", j->path, strerror(errno));
        return PC_ESYS;
    }
    *epoch = e;
    return 0;
}

int pc_journal_epoch(const pc_journal *j, const pc_coll *coll, uint64_t *epoch)
{
    int i = j != NULL ? pc_jcoll_index(j, coll) : -1;
    if (i < 0 || epoch == NULL)
        return PC_EINVAL;
    *epoch = atomic_load(&j->shm->epoch[i]);
    return 0;
}

int pc_journal_last_stop_get(const pc_journal *j, pc_journal_last_stop *out)
{
    if (j == NULL || out == NULL)
        return PC_EINVAL;
    *out = j->prev;
    return 0;
}

uint64_t pc_journal_boot_gen(const pc_journal *j)
{
    return j != NULL ? j->boot_gen : 0;
}

int pc_jseg_each(pc_journal *j, const char *cn, pc_jseg_each_fn fn, void *ctx)
{
    int dfd = openat(j->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (d == NULL) {
        pc_jlog(j, PC_LOG_ERR, "%s: cannot list the directory: %s", j->path, strerror(errno));
        if (dfd >= 0)
            close(dfd);
        return PC_EIO;
    }
    int rc = 0;
    struct dirent *de;
    char name[PC_COLL_NAME_MAX + 1];
    uint64_t e;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (pc_journal_segment_name_parse(de->d_name, name, sizeof name, &e) != 0 ||
            strcmp(name, cn) != 0)
            continue;
        rc = fn(ctx, de->d_name, e);
    }
    closedir(d);
    return rc;
}

struct pc_jretire {
    pc_journal *j;
    uint64_t epoch;
    unsigned n;
    unsigned quarantined;
    int rc;
};

void pc_jbad_note(pc_journal *j, const char *file, const char *why)
{
    for (size_t i = 0; i < j->nbad; i++)
        if (strcmp(j->bad[i], file) == 0)
            return;
    size_t fl = strlen(file) + 1, wl = strlen(why) + 1;
    char *e = malloc(fl + wl);
    char **nb = e != NULL ? realloc(j->bad, (j->nbad + 1) * sizeof *nb) : NULL;
    if (nb == NULL) { /* the segment is then retired like any other: logged */
        free(e);
        pc_jlog(j, PC_LOG_ERR, "%s: out of memory: %s will not be quarantined", j->path, file);
        return;
    }
    memcpy(e, file, fl);
    memcpy(e + fl, why, wl);
    j->bad = nb;
    j->bad[j->nbad++] = e;
}

/* The reason the replay skipped segment file whole, or NULL. A lookup in
 * memory: the retire's loop stays as short as it was (a drainer that read
 * the retired epoch just before the retire raised it may still create a
 * segment of the old epoch while the loop runs). */
static const char *pc_jbad_reason(const pc_journal *j, const char *file)
{
    for (size_t i = 0; i < j->nbad; i++)
        if (strcmp(j->bad[i], file) == 0)
            return j->bad[i] + strlen(j->bad[i]) + 1;
    return NULL;
}

/* Moves a segment the replay cannot read into <journal>/quarantine/ with a
 * "<segment>.reason" file beside it, instead of the retire's unlink: an
 * operator decides what to do with it (docs/journal-format.md §4). */
static int pc_jquarantine(pc_journal *j, const char *file, const char *why)
{
    if (mkdirat(j->dirfd, PC_JQUARANTINE_DIR, 0750) != 0 && errno != EEXIST) {
        pc_jlog(j, PC_LOG_ERR, "%s: cannot create %s/: %s; %s kept in place", j->path,
                PC_JQUARANTINE_DIR, strerror(errno), file);
        return PC_EIO;
    }
    int qfd = openat(j->dirfd, PC_JQUARANTINE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (qfd < 0 || renameat(j->dirfd, file, qfd, file) != 0) {
        pc_jlog(j, PC_LOG_ERR, "%s: cannot move %s to %s/: %s; kept in place", j->path, file,
                PC_JQUARANTINE_DIR, strerror(errno));
        if (qfd >= 0)
            close(qfd);
        return PC_EIO;
    }
    char rname[NAME_MAX + 1];
    int n = snprintf(rname, sizeof rname, "%s" PC_JQUARANTINE_REASON, file);
    int rfd = n > 0 && (size_t)n < sizeof rname
                  ? openat(qfd, rname, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640)
                  : -1;
    if (rfd >= 0) {
        char line[400];
        int len = snprintf(line, sizeof line, "%s\n", why);
        if (len > 0 && write(rfd, line, (size_t)len) < 0)
            len = 0; /* the reason is a courtesy: the segment is what matters */
        (void)fsync(rfd);
        close(rfd);
    }
    (void)fsync(qfd);
    close(qfd);
    pc_jlog(j, PC_LOG_WARN, "%s: %s not replayable (%s): moved to %s/%s/, not deleted", j->path,
            file, why, j->path, PC_JQUARANTINE_DIR);
    return 0;
}

static int pc_jretire_one(void *ctx, const char *file, uint64_t epoch)
{
    struct pc_jretire *r = ctx;
    if (epoch >= r->epoch)
        return 0;
    const char *why = pc_jbad_reason(r->j, file);
    if (why != NULL) {
        if (pc_jquarantine(r->j, file, why) == 0)
            r->quarantined++;
        else
            r->rc = PC_EIO;
        return 0;
    }
    if (unlinkat(r->j->dirfd, file, 0) == 0) {
        r->n++;
    } else if (errno != ENOENT) {
        pc_jlog(r->j, PC_LOG_ERR, "%s: cannot retire %s: %s", r->j->path, file, strerror(errno));
        r->rc = PC_EIO;
    }
    return 0;
}

int pc_journal_retire(pc_journal *j, pc_coll *coll, uint64_t epoch, unsigned *removed)
{
    if (j == NULL || pc_jcoll_index(j, coll) < 0)
        return PC_EINVAL;
    const char *cn = pc_coll_name(coll);
    /* before the unlinks: from now on drainers drop ring records below
     * epoch (the caller's snapshot, committed, covers them) */
    _Atomic uint64_t *rt = &j->shm->retired[pc_jcoll_index(j, coll)];
    uint64_t was = atomic_load(rt);
    while (was < epoch && !atomic_compare_exchange_weak(rt, &was, epoch))
        ;
    struct pc_jretire r = {.j = j, .epoch = epoch};
    int rc = pc_jseg_each(j, cn, pc_jretire_one, &r);
    if (rc == 0)
        rc = r.rc;
    unsigned n = r.n;
    if ((n > 0 || r.quarantined > 0) && fsync(j->dirfd) != 0 && rc == 0) {
        pc_jlog(j, PC_LOG_ERR, "%s: fsync of the directory failed: %s", j->path, strerror(errno));
        rc = PC_EIO;
    }
    pc_jlog(j, PC_LOG_DEBUG, "%s: collection '%s': retired %u segment(s) before epoch %016llx",
            j->path, cn, n, (unsigned long long)epoch);
    if (removed != NULL)
        *removed = n;
    return rc;
}

struct pc_jsize {
    pc_journal *j;
    uint64_t bytes;
    unsigned n;
};

static int pc_jsize_one(void *ctx, const char *file, uint64_t epoch)
{
    struct pc_jsize *z = ctx;
    struct stat st;
    (void)epoch;
    if (fstatat(z->j->dirfd, file, &st, 0) == 0) { /* ENOENT: retired meanwhile */
        z->bytes += (uint64_t)st.st_size;
        z->n++;
    }
    return 0;
}

int pc_journal_size(pc_journal *j, const pc_coll *coll, uint64_t *bytes, unsigned *segments)
{
    if (j == NULL || pc_jcoll_index(j, coll) < 0)
        return PC_EINVAL;
    struct pc_jsize z = {.j = j};
    int rc = pc_jseg_each(j, pc_coll_name(coll), pc_jsize_one, &z);
    if (bytes != NULL)
        *bytes = z.bytes;
    if (segments != NULL)
        *segments = z.n;
    return rc;
}

/* ---- open / close ------------------------------------------------------------ */

void pc_journal_config_init(pc_journal_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->log.level = PC_LOG_INFO;
}

int pc_journal_install(pc_journal *j)
{
    if (j == NULL)
        return PC_EINVAL;
    int rc = pc_mutation_hook(j->c, pc_journal_hook, j);
    if (rc == 0)
        j->installed = true;
    return rc;
}

int pc_journal_uninstall(pc_journal *j)
{
    if (j == NULL)
        return PC_EINVAL;
    int rc = pc_mutation_hook(j->c, NULL, NULL);
    if (rc == 0)
        j->installed = false;
    return rc;
}

/* Creates <dir>/journal when missing (and makes the creation durable). */
static int pc_jmkdir(pc_journal *j, const char *dir)
{
    if (mkdir(j->path, 0750) == 0) {
        int pfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (pfd >= 0) {
            (void)fsync(pfd);
            close(pfd);
        }
    } else if (errno != EEXIST) {
        pc_jlog(j, PC_LOG_ERR, "mkdir %s: %s", j->path, strerror(errno));
        return PC_EIO;
    }
    j->dirfd = open(j->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (j->dirfd < 0) {
        pc_jlog(j, PC_LOG_ERR, "open %s: %s", j->path, strerror(errno));
        return PC_EIO;
    }
    return 0;
}

int pc_journal_open(pc_cache *c, const pc_journal_config *cfg, pc_journal **out)
{
    if (c == NULL || cfg == NULL || out == NULL || cfg->dir == NULL || cfg->dir[0] == '\0' ||
        cfg->boot_gen == 0 || cfg->boot_gen > UINT32_MAX)
        return PC_EINVAL;
    pthread_once(&pc_jonce, pc_jonce_init);
    int rc = 0;
    pc_journal *j = calloc(1, sizeof *j);
    if (j == NULL)
        return PC_EHEAP;
    j->c = c;
    j->dirfd = -1;
    j->shm = MAP_FAILED;
    j->shm_fd = -1;
    j->boot_gen = cfg->boot_gen;
    /* a ring holds at least two records of the largest size, so any record
     * fits once the ring is written out, whatever the wrap wasted; so the
     * smallest is 4 MiB */
    size_t ring = cfg->buffer_bytes > 0 ? cfg->buffer_bytes : PC_JRING_DEFAULT;
    if (ring < 2 * (size_t)PC_JREC_MAX_SIZE + 2 * 16)
        ring = 2 * (size_t)PC_JREC_MAX_SIZE + 2 * 16;
    if (ring > (size_t)1 << 30)
        ring = (size_t)1 << 30;
    j->ring_bytes = 4096; /* a power of two (journal_ring.c masks positions) */
    while (j->ring_bytes < ring)
        j->ring_bytes *= 2;
    j->nslots = cfg->max_procs > 0 ? cfg->max_procs : PC_JSLOTS_DEFAULT;
    if (j->nslots > 4096)
        j->nslots = 4096;
    pthread_mutex_init(&j->dmu, NULL);
    for (unsigned i = 0; i < PC_MAX_COLLECTIONS; i++)
        j->own[i].fd = -1;
    j->log = cfg->log;
    j->fork_gen = atomic_load(&pc_jfork_gen);
    j->pid = j->opener = getpid();
    size_t plen = strlen(cfg->dir) + sizeof "/journal";
    if ((j->path = malloc(plen)) == NULL) {
        rc = PC_EHEAP;
        goto out;
    }
    snprintf(j->path, plen, "%s/journal", cfg->dir);
    if ((rc = pc_jmkdir(j, cfg->dir)) != 0)
        goto out;
    if ((rc = pc_jshm_open(j)) != 0)
        goto out;
    j->shm->nslots = j->nslots;
    int mb = (int)syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    j->light_fence = mb > 0 && (mb & MEMBARRIER_CMD_GLOBAL) != 0;
    j->shm->light_fence = j->light_fence;
    j->shm->ring_bytes = j->ring_bytes;
    if ((rc = pc_jslots_init(j)) != 0)
        goto out;
    j->ncoll = pc_coll_count(c);
    j->shm->magic = PC_JSHM_MAGIC;
    j->shm->version = PC_JSHM_LAYOUT;
    j->shm->ncoll = j->ncoll;
    for (unsigned i = 0; i < j->ncoll; i++) {
        const char *cn = pc_coll_name(pc_coll_at(c, i));
        snprintf(j->shm->coll_names[i], sizeof j->shm->coll_names[i], "%s", cn);
    }
    j->shm->boot_gen = j->boot_gen;
    /* epochs start at boot_gen << 32: they grow across restarts without
     * being stored anywhere, so a new boot's segments never reuse the name
     * or the epoch of an older boot's (§1) */
    for (unsigned i = 0; i < PC_MAX_COLLECTIONS; i++) {
        atomic_init(&j->shm->epoch[i], j->boot_gen << 32);
        atomic_init(&j->shm->retired[i], 0);
    }
    for (unsigned i = 0; i < j->ncoll; i++)
        j->pcs[i].coll = pc_coll_at(c, i);
    pc_jwall_refresh(j, pc_mono_coarse_ms());
    unsigned slot = 0;
    while (slot < PC_JOPEN_MAX && pc_jopen_list[slot] != NULL)
        slot++;
    if (slot < PC_JOPEN_MAX)
        pc_jopen_list[slot] = j;
out:
    if (rc != 0) {
        pc_jshm_close(j, false);
        if (j->dirfd >= 0)
            close(j->dirfd);
        free(j->path);
        free(j);
        return rc;
    }
    *out = j;
    return 0;
}

void pc_journal_close(pc_journal *j)
{
    if (j == NULL)
        return;
    pc_jcheck_fork(j);
    pc_jdrainer_stop(j);
    (void)pc_journal_flush(j, 1); /* failures are logged */
    if (j->installed)
        (void)pc_journal_uninstall(j);
    for (unsigned i = 0; i < PC_JOPEN_MAX; i++)
        if (pc_jopen_list[i] == j)
            pc_jopen_list[i] = NULL;
    pc_jown_release(j);
    /* the process that opened the journal (the host's master) writes out
     * what dead processes left in their rings before it lets go */
    bool clean = false;
    if (j->pid == j->opener || j->dfd != NULL) {
        (void)pc_jdrain_pass(j, false);
        /* what is still in a ring now was acknowledged and is lost */
        uint64_t lost = 0;
        for (unsigned i = 0; i < j->nslots; i++)
            if (atomic_load(&j->slots[i].owner) != 0 &&
                atomic_load(&j->slots[i].head) != atomic_load(&j->slots[i].tail))
                lost += pc_jring_pending(j, &j->slots[i]);
        if (lost > 0) {
            /* they stay in the rings file: the next open writes them out */
            atomic_fetch_add(&j->shm->h_lost, lost);
            pc_jlog(j, PC_LOG_ERR, "%s: %llu acknowledged writes could not be journaled%s", j->path,
                    (unsigned long long)lost,
                    j->shm_anon ? " (lost)" : ": they stay in the rings file for the next start");
        }
        clean = lost == 0 && j->pid == j->opener;
    }
    pc_jdrainer_free(j);
    pthread_mutex_destroy(&j->dmu);
    pc_jshm_close(j, clean);
    close(j->dirfd);
    for (size_t i = 0; i < j->nbad; i++)
        free(j->bad[i]);
    free(j->bad);
    free(j->scratch);
    free(j->path);
    free(j);
}
