/*
 * journal.c - the journal's write side: the engine's write-ahead hook,
 * per-process segments, everysec buffering, the save epochs and retiring
 * (docs/journal-format.md §5-§6). The replay is journal_replay.c, the bytes
 * journal_format.c.
 *
 * Each process appends to its own segment file per (collection, save
 * epoch): there is no shared append offset and no shared read-modify-write
 * on the write path. What processes share is one small MAP_SHARED area,
 * created by pc_journal_open before the host forks, holding each
 * collection's current save epoch: writers only read it, a save increments
 * it.
 *
 * Why a write is never lost between a snapshot and the journal (§5): the
 * hook runs after the write is in the table. It issues a seq_cst fence and
 * then loads the epoch; begin_save increments the epoch and issues a
 * seq_cst fence before the snapshot walk starts. By the fence rules either
 * the hook's load sees the new epoch (the record goes to a new-epoch
 * segment, which replay reads) or the walk sees the write (the snapshot
 * holds it or something later, and the old-epoch segment it went to may be
 * retired once the snapshot commits). Replay orders a key's records and
 * the snapshot's copy by (boot_gen, stamp). The mirror case - a write that
 * reached the table before the save began but whose hook read the new
 * epoch - is the rotation record's (§5.3, pc_jrotation_state).
 *
 * Process-local state is the handle: a child inherits a copy. The first
 * call after a fork (seen through a pthread_atfork counter) drops what it
 * inherited without writing it: the parent's buffered records are the
 * parent's to write, and the parent's segments its to append.
 */
#include "pc_journal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define PC_JBUF_DEFAULT (64u * 1024u)
#define PC_JFLUSH_MS 1000 /* everysec: write buffered records at least this often */

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

static void pc_jatexit(void)
{
    for (unsigned i = 0; i < PC_JOPEN_MAX; i++)
        if (pc_jopen_list[i] != NULL)
            (void)pc_journal_flush(pc_jopen_list[i], 1);
}

static void pc_jonce_init(void)
{
    (void)pthread_atfork(NULL, NULL, pc_jatfork_child);
    (void)atexit(pc_jatexit);
}

/* ---- small helpers --------------------------------------------------------- */

void pc_jlog(const pc_journal *j, int level, const char *fmt, ...)
{
    if (j == NULL || j->log == NULL || level > j->log_level)
        return;
    char buf[768];
    int n = snprintf(buf, sizeof buf, "journal: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    j->log(j->log_ctx, level, buf);
}

void pc_jkey_text(const void *key, size_t klen, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
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
            out[o++] = hex[ch >> 4];
            out[o++] = hex[ch & 15];
        }
    }
    if (show < klen && o + 4 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

static int64_t pc_jms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t pc_jwall_now_ms(void)
{
    return pc_jms(CLOCK_REALTIME);
}

/* The offset that turns the engine's CLOCK_MONOTONIC deadlines into
 * wall-clock ones; sampled at most once a second (NTP slews it by at most
 * 0.5 ms per second). */
static void pc_jwall_refresh(pc_journal *j, int64_t now)
{
    j->wall_off = pc_jms(CLOCK_REALTIME) - pc_jms(CLOCK_MONOTONIC);
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
 * seq_cst fence after the table write, then a plain load. */
static uint64_t pc_jepoch_load(const pc_journal *j, const struct pc_jpc *pc)
{
    atomic_thread_fence(memory_order_seq_cst);
    return atomic_load_explicit(&j->shm->epoch[pc - j->pcs], memory_order_relaxed);
}

/* Logs an I/O failure once per streak. */
static int pc_jio_fail(pc_journal *j, struct pc_jpc *pc, const char *what, int err)
{
    if (!pc->failing)
        pc_jlog(j, PC_LOG_ERR, "%s: collection '%s': %s failed: %s", j->path,
                pc_coll_name(pc->coll), what, strerror(err));
    pc->failing = true;
    return PC_EIO;
}

static void pc_jio_ok(pc_journal *j, struct pc_jpc *pc)
{
    if (pc->failing)
        pc_jlog(j, PC_LOG_WARN, "%s: collection '%s': writing again", j->path,
                pc_coll_name(pc->coll));
    pc->failing = false;
}

/* ---- segments -------------------------------------------------------------- */

/* Drops a segment that can no longer be trusted to grow cleanly (a failed
 * write that could not be cut back, a failed fdatasync): the next write
 * opens a new segment of the same epoch (with a "-<n>" name). */
static void pc_jseg_abandon(struct pc_jpc *pc)
{
    if (pc->fd >= 0)
        close(pc->fd);
    pc->fd = -1;
    pc->seg_bytes = pc->synced_bytes = 0;
}

/* Creates this process's segment of (collection, epoch) and writes its
 * header. The name is unique: O_EXCL, with a "-<n>" suffix when a segment
 * of the same pid exists (pid reuse within an epoch, an abandoned one). */
static int pc_jseg_create(pc_journal *j, struct pc_jpc *pc, uint64_t epoch)
{
    const char *cn = pc_coll_name(pc->coll);
    char name[160];
    int fd = -1;
    for (unsigned k = 0; fd < 0; k++) {
        if (k == 0)
            snprintf(name, sizeof name, "%s.%016llx.%ld" PC_JSEG_SUFFIX, cn,
                     (unsigned long long)epoch, (long)j->pid);
        else
            snprintf(name, sizeof name, "%s.%016llx.%ld-%u" PC_JSEG_SUFFIX, cn,
                     (unsigned long long)epoch, (long)j->pid, k);
        fd = openat(j->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
        if (fd < 0 && (errno != EEXIST || k >= 1000))
            return pc_jio_fail(j, pc, "creating a segment", errno);
    }
    pc_jseg_hdr h = {.version = PC_JOURNAL_VERSION,
                     .pid = (uint32_t)j->pid,
                     .epoch = epoch,
                     .boot_gen = j->boot_gen,
                     .created_wall_ms = pc_jwall_now_ms(),
                     .coll_len = strlen(cn)};
    memcpy(h.coll, cn, h.coll_len + 1);
    uint8_t hdr[PC_JSEG_HDR_SIZE];
    pc_jseg_hdr_encode(hdr, &h);
    ssize_t n;
    do
        n = write(fd, hdr, sizeof hdr);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof hdr) {
        int err = n < 0 ? errno : ENOSPC;
        unlinkat(j->dirfd, name, 0);
        close(fd);
        return pc_jio_fail(j, pc, "writing a segment header", err);
    }
    pc->fd = fd;
    pc->seg_epoch = epoch;
    pc->seg_bytes = PC_JSEG_HDR_SIZE;
    pc->synced_bytes = 0;
    j->dir_dirty = true;
    pc_jlog(j, PC_LOG_DEBUG, "%s: opened segment %s", j->path, name);
    return 0;
}

/* fdatasync of the open segment when it has unsynced bytes. A failed sync
 * abandons the segment: after a failed fsync the kernel may have dropped
 * the dirty pages, so nothing more is appended to it. */
static int pc_jseg_sync(pc_journal *j, struct pc_jpc *pc)
{
    if (pc->fd < 0 || pc->synced_bytes >= pc->seg_bytes)
        return 0;
    if (fdatasync(pc->fd) != 0) {
        int err = errno;
        pc_jseg_abandon(pc);
        return pc_jio_fail(j, pc, "fdatasync", err);
    }
    pc->synced_bytes = pc->seg_bytes;
    return 0;
}

static int pc_jdir_sync(pc_journal *j)
{
    if (!j->dir_dirty)
        return 0;
    if (fsync(j->dirfd) != 0) {
        pc_jlog(j, PC_LOG_ERR, "%s: fsync of the directory failed: %s", j->path, strerror(errno));
        return PC_EIO;
    }
    j->dir_dirty = false;
    return 0;
}

/* Closes a parked segment of a past epoch, after an fdatasync when sync
 * (else pc_journal_sync_all, run by some process, syncs it by name). */
static int pc_jold_close(pc_journal *j, struct pc_jpc *pc, bool sync)
{
    if (pc->old_fd < 0)
        return 0;
    int rc = 0;
    if (sync && fdatasync(pc->old_fd) != 0)
        rc = pc_jio_fail(j, pc, "fdatasync of a past segment", errno);
    close(pc->old_fd);
    pc->old_fd = -1;
    return rc;
}

/* Retires the open segment from writing: synced ones close now, others are
 * parked until the next tick or flush syncs them (not on the write path). */
static int pc_jseg_release(pc_journal *j, struct pc_jpc *pc)
{
    if (pc->fd < 0)
        return 0;
    int rc = 0;
    if (pc->synced_bytes >= pc->seg_bytes) {
        close(pc->fd);
    } else {
        rc = pc_jold_close(j, pc, true);
        pc->old_fd = pc->fd;
    }
    pc->fd = -1;
    pc->seg_bytes = pc->synced_bytes = 0;
    return rc;
}

/* Writes the buffered records to a segment of their epoch (buf_epoch),
 * opening one when the open segment is of another epoch or none is open:
 * a record always lands in a segment of the epoch its hook read (§5). On
 * failure the buffer is kept for the next attempt and the segment is cut
 * back to its last whole record, or abandoned when it cannot be. */
static int pc_jwrite_out(pc_journal *j, struct pc_jpc *pc, int64_t now)
{
    if (pc->used == 0)
        return 0;
    int rc;
    if (pc->fd >= 0 && pc->seg_epoch != pc->buf_epoch && (rc = pc_jseg_release(j, pc)) != 0)
        return rc;
    if (pc->fd < 0 && (rc = pc_jseg_create(j, pc, pc->buf_epoch)) != 0)
        return rc;
    size_t done = 0;
    while (done < pc->used) {
        ssize_t n = write(pc->fd, pc->buf + done, pc->used - done);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        int err = n < 0 ? errno : ENOSPC;
        if (done > 0 && (ftruncate(pc->fd, (off_t)pc->seg_bytes) != 0 ||
                         lseek(pc->fd, (off_t)pc->seg_bytes, SEEK_SET) < 0))
            pc_jseg_abandon(pc);
        return pc_jio_fail(j, pc, "write", err);
    }
    pc->seg_bytes += pc->used;
    pc->used = 0;
    pc->last_flush = now;
    pc_jio_ok(j, pc);
    return 0;
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
static int pc_jrotation_state(pc_journal *j, const pc_wal_rec *r, pc_wal_rec *out)
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
        out->op = PC_WAL_DEL;
        return 1;
    }
    if (rc != 0)
        return 0;
    if (m.ttl_ms >= 0)
        out->expires_mono_ms = pc_jms(CLOCK_MONOTONIC) + (m.ttl_ms > 0 ? m.ttl_ms : 1);
    if (m.is_counter) {
        /* the engine formats a counter as a decimal int64 */
        const char *p = (const char *)j->scratch;
        bool neg = got > 0 && p[0] == '-';
        uint64_t v = 0;
        for (size_t i = neg ? 1 : 0; i < got; i++)
            v = v * 10 + (uint64_t)(p[i] - '0');
        out->op = PC_WAL_COUNTER;
        out->counter = neg ? (int64_t)(0 - v) : (int64_t)v;
    } else {
        out->op = PC_WAL_SET;
        out->val = j->scratch;
        out->vlen = got;
    }
    /* unchanged: keep the write's own record (its exact deadline) */
    int64_t d = out->expires_mono_ms - r->expires_mono_ms;
    bool same_exp = (out->expires_mono_ms == 0) == (r->expires_mono_ms == 0) && d <= 5 && d >= -5;
    if (out->op == r->op && same_exp &&
        (r->op == PC_WAL_COUNTER
             ? out->counter == r->counter
             : out->vlen == r->vlen && (r->vlen == 0 || memcmp(out->val, r->val, r->vlen) == 0)))
        return 0;
    return 1;
}

static int pc_jgrow(struct pc_jpc *pc, size_t need, size_t base)
{
    size_t cap = pc->cap > 0 ? pc->cap : base;
    while (cap < need)
        cap *= 2;
    uint8_t *nb = realloc(pc->buf, cap);
    if (nb == NULL)
        return PC_ENOMEM;
    pc->buf = nb;
    pc->cap = cap;
    return 0;
}

/* After a fork: forget the parent's segments and buffered records (the
 * parent writes them), take this process's pid. */
static void pc_jafter_fork(pc_journal *j, unsigned long gen)
{
    for (unsigned i = 0; i < j->ncoll; i++) {
        struct pc_jpc *pc = &j->pcs[i];
        if (pc->fd >= 0)
            close(pc->fd);
        if (pc->old_fd >= 0)
            close(pc->old_fd);
        pc->fd = pc->old_fd = -1;
        pc->seg_bytes = pc->synced_bytes = 0;
        pc->used = 0;
        pc->seen_epoch = 0;
        pc->failing = false;
    }
    j->pid = getpid();
    j->dir_dirty = false;
    j->fork_gen = gen;
}

static inline void pc_jcheck_fork(pc_journal *j)
{
    unsigned long gen = atomic_load_explicit(&pc_jfork_gen, memory_order_relaxed);
    if (j->fork_gen != gen)
        pc_jafter_fork(j, gen);
}

static int64_t pc_jcoarse_ms(void)
{
    return pc_jms(CLOCK_MONOTONIC_COARSE);
}

/* ---- the write path ---------------------------------------------------------
 * Hot path. Per record: the fork counter and the collection (process-local),
 * the journal mode (a shared line that only changes on configuration), one
 * seq_cst fence and the epoch (a shared line written only by saves), a
 * coarse clock read (vDSO), the record encoded straight into the
 * process's buffer (header, key, value, one XXH3 pass), no allocation, no
 * lock, no shared write. everysec adds one write(2) per 64 KiB or per
 * second; always adds write(2) + fdatasync(2) per record. */
int pc_journal_hook(void *ctx, const pc_wal_rec *r)
{
    pc_journal *j = ctx;
    if (j == NULL || r == NULL || r->op < PC_WAL_SET || r->op > PC_WAL_EXPIRE ||
        r->klen > PC_KEY_MAX || (r->op == PC_WAL_SET && r->vlen > PC_VALUE_MAX))
        return PC_EINVAL;
    pc_jcheck_fork(j);
    struct pc_jpc *pc = pc_jpc_of(j, r->coll);
    if (pc == NULL)
        return PC_EINVAL;
    unsigned mode = pc_coll_journal(r->coll);
    uint64_t epoch = pc_jepoch_load(j, pc);
    int64_t now = pc_jcoarse_ms();
    int rc;
    pc_wal_rec cur;
    unsigned rflags = 0;
    if (epoch != pc->seen_epoch) {
        /* the first record since this process saw the epoch change (§5.3) */
        pc->seen_epoch = epoch;
        if ((r->op == PC_WAL_SET || r->op == PC_WAL_COUNTER) && pc_jrotation_state(j, r, &cur)) {
            r = &cur;
            rflags = PC_JREC_F_STATE;
        }
    }
    size_t vlen = r->op == PC_WAL_SET ? r->vlen : r->op == PC_WAL_COUNTER ? 8 : 0;
    size_t need = pc_jrec_size(r->klen, vlen);
    /* the buffer holds records of one epoch: older ones go out first */
    if ((pc->used > 0 && pc->buf_epoch != epoch) || pc->cap - pc->used < need) {
        if ((rc = pc_jwrite_out(j, pc, now)) != 0)
            return rc;
        if (pc->cap < need && (rc = pc_jgrow(pc, need, j->buf_bytes)) != 0)
            return rc;
    }
    if (now - j->wall_off_at >= PC_JFLUSH_MS)
        pc_jwall_refresh(j, now);
    int64_t wall = 0;
    if (r->expires_mono_ms > 0) {
        wall = r->expires_mono_ms + j->wall_off;
        if (wall <= 0)
            wall = 1; /* a deadline before 1970: long expired */
    }
    pc_jrec rec = {.op = r->op,
                   .flags = rflags,
                   .stamp = r->stamp,
                   .expires_wall_ms = r->op == PC_WAL_DEL ? 0 : wall,
                   .key = r->key,
                   .klen = r->klen,
                   .val = r->val,
                   .vlen = vlen,
                   .counter = r->counter};
    pc->used += pc_jrec_encode(pc->buf + pc->used, &rec);
    pc->buf_epoch = epoch;
    if (mode == PC_JOURNAL_ALWAYS) {
        if ((rc = pc_jwrite_out(j, pc, now)) != 0)
            return rc;
        if (j->dir_dirty && (rc = pc_jdir_sync(j)) != 0)
            return rc;
        return pc_jseg_sync(j, pc);
    }
    if (now - pc->last_flush >= PC_JFLUSH_MS)
        return pc_jwrite_out(j, pc, now);
    return 0;
}

/* ---- periodic work ------------------------------------------------------------
 * Who fsyncs everysec segments: either each process in its tick
 * (PC_JOURNAL_TICK_SYNC), or one process for all of them with
 * pc_journal_sync_all, which opens the segment files by name (an fsync
 * flushes a file's dirty pages whoever wrote them). The second keeps the
 * fdatasync - which waits for the disk, hundreds of milliseconds at a high
 * write rate - off the workers that serve traffic. */

static int pc_jflush_one(pc_journal *j, struct pc_jpc *pc, bool sync, bool rotate_idle, int64_t now)
{
    int rc = 0, r2;
    uint64_t epoch = pc_jepoch_load(j, pc);
    if (pc->used > 0 && (r2 = pc_jwrite_out(j, pc, now)) != 0)
        rc = r2;
    if (sync && (r2 = pc_jseg_sync(j, pc)) != 0 && rc == 0)
        rc = r2;
    if ((sync || rotate_idle) && (r2 = pc_jold_close(j, pc, sync)) != 0 && rc == 0)
        rc = r2;
    /* an idle segment of a past epoch: close it so a retire frees its space
     * (unsynced data is left to pc_journal_sync_all when not syncing here) */
    if (rotate_idle && pc->fd >= 0 && pc->seg_epoch != epoch && pc->used == 0) {
        if (!sync)
            pc->synced_bytes = pc->seg_bytes;
        (void)pc_jseg_release(j, pc);
    }
    return rc;
}

static int pc_jflush_all(pc_journal *j, bool sync, bool rotate_idle)
{
    if (j == NULL)
        return PC_EINVAL;
    pc_jcheck_fork(j);
    int rc = 0, r2;
    int64_t now = pc_jcoarse_ms();
    for (unsigned i = 0; i < j->ncoll; i++) {
        struct pc_jpc *pc = &j->pcs[i];
        if (pc->fd < 0 && pc->old_fd < 0 && pc->used == 0)
            continue;
        if ((r2 = pc_jflush_one(j, pc, sync, rotate_idle, now)) != 0 && rc == 0)
            rc = r2;
    }
    if (sync && (r2 = pc_jdir_sync(j)) != 0 && rc == 0)
        rc = r2;
    pc_jwall_refresh(j, now);
    return rc;
}

int pc_journal_tick(pc_journal *j, unsigned flags)
{
    if ((flags & ~PC_JOURNAL_TICK_SYNC) != 0)
        return PC_EINVAL;
    return pc_jflush_all(j, (flags & PC_JOURNAL_TICK_SYNC) != 0, true);
}

int pc_journal_flush(pc_journal *j, int sync)
{
    return pc_jflush_all(j, sync != 0, false);
}

/* One file pc_journal_sync_all knows: its size when last synced. */
struct pc_jsynced {
    uint64_t name_hash;
    uint64_t ino;
    off_t size;
    bool seen;
};

int pc_journal_sync_all(pc_journal *j)
{
    if (j == NULL)
        return PC_EINVAL;
    pc_jcheck_fork(j);
    int dfd = openat(j->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (d == NULL) {
        pc_jlog(j, PC_LOG_ERR, "%s: cannot list the directory: %s", j->path, strerror(errno));
        if (dfd >= 0)
            close(dfd);
        return PC_EIO;
    }
    int rc = 0;
    bool fresh = false;
    for (size_t i = 0; i < j->nsynced; i++)
        j->synced[i].seen = false;
    struct dirent *de;
    char cn[PC_COLL_NAME_MAX + 1];
    uint64_t e;
    while ((de = readdir(d)) != NULL) {
        if (pc_jseg_name_parse(de->d_name, cn, sizeof cn, &e) != 0)
            continue;
        struct stat sb;
        if (fstatat(j->dirfd, de->d_name, &sb, 0) != 0)
            continue; /* retired meanwhile */
        uint64_t h = XXH3_64bits(de->d_name, strlen(de->d_name));
        struct pc_jsynced *k = NULL;
        for (size_t i = 0; i < j->nsynced && k == NULL; i++)
            if (j->synced[i].name_hash == h && j->synced[i].ino == (uint64_t)sb.st_ino)
                k = &j->synced[i];
        if (k == NULL) {
            if (j->nsynced == j->capsynced) {
                size_t ncap = j->capsynced ? j->capsynced * 2 : 32;
                struct pc_jsynced *ns = realloc(j->synced, ncap * sizeof *ns);
                if (ns == NULL) {
                    rc = PC_ENOMEM;
                    break;
                }
                j->synced = ns;
                j->capsynced = ncap;
            }
            k = &j->synced[j->nsynced++];
            *k = (struct pc_jsynced){.name_hash = h, .ino = (uint64_t)sb.st_ino, .size = -1};
            fresh = true;
        }
        k->seen = true;
        if (sb.st_size == k->size)
            continue; /* nothing appended since its last sync */
        int fd = openat(j->dirfd, de->d_name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (fdatasync(fd) == 0) {
            k->size = sb.st_size;
        } else {
            pc_jlog(j, PC_LOG_ERR, "%s/%s: fdatasync failed: %s", j->path, de->d_name,
                    strerror(errno));
            rc = PC_EIO;
        }
        close(fd);
    }
    closedir(d);
    size_t n = 0; /* forget files that are gone */
    for (size_t i = 0; i < j->nsynced; i++)
        if (j->synced[i].seen)
            j->synced[n++] = j->synced[i];
    j->nsynced = n;
    if (fresh && fsync(j->dirfd) != 0 && rc == 0) {
        pc_jlog(j, PC_LOG_ERR, "%s: fsync of the directory failed: %s", j->path, strerror(errno));
        rc = PC_EIO;
    }
    return rc;
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
     * is visible to the walk that follows */
    atomic_thread_fence(memory_order_seq_cst);
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
        if (pc_jseg_name_parse(de->d_name, name, sizeof name, &e) != 0 || strcmp(name, cn) != 0)
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
    int rc;
};

static int pc_jretire_one(void *ctx, const char *file, uint64_t epoch)
{
    struct pc_jretire *r = ctx;
    if (epoch >= r->epoch)
        return 0;
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
    struct pc_jretire r = {.j = j, .epoch = epoch};
    int rc = pc_jseg_each(j, cn, pc_jretire_one, &r);
    if (rc == 0)
        rc = r.rc;
    unsigned n = r.n;
    if (n > 0 && fsync(j->dirfd) != 0 && rc == 0) {
        pc_jlog(j, PC_LOG_ERR, "%s: fsync of the directory failed: %s", j->path, strerror(errno));
        rc = PC_EIO;
    }
    pc_jlog(j, PC_LOG_DEBUG, "%s: collection '%s': retired %u segment(s) before epoch %016llx",
            j->path, cn, n, (unsigned long long)epoch);
    if (removed != NULL)
        *removed = n;
    return rc;
}

/* ---- open / close ------------------------------------------------------------ */

void pc_journal_config_init(pc_journal_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->log_level = PC_LOG_INFO;
}

int pc_journal_install(pc_journal *j)
{
    if (j == NULL)
        return PC_EINVAL;
    int rc = pc_wal_hook(j->c, pc_journal_hook, j);
    if (rc == 0)
        j->installed = true;
    return rc;
}

int pc_journal_uninstall(pc_journal *j)
{
    if (j == NULL)
        return PC_EINVAL;
    int rc = pc_wal_hook(j->c, NULL, NULL);
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
        return PC_ENOMEM;
    j->c = c;
    j->dirfd = -1;
    j->shm = MAP_FAILED;
    j->boot_gen = cfg->boot_gen;
    j->buf_bytes = cfg->buffer_bytes > 0 ? cfg->buffer_bytes : PC_JBUF_DEFAULT;
    if (j->buf_bytes < 4096)
        j->buf_bytes = 4096;
    j->log = cfg->log;
    j->log_ctx = cfg->log_ctx;
    j->log_level = cfg->log_level;
    j->fork_gen = atomic_load(&pc_jfork_gen);
    j->pid = getpid();
    size_t plen = strlen(cfg->dir) + sizeof "/journal";
    if ((j->path = malloc(plen)) == NULL) {
        rc = PC_ENOMEM;
        goto out;
    }
    snprintf(j->path, plen, "%s/journal", cfg->dir);
    if ((rc = pc_jmkdir(j, cfg->dir)) != 0)
        goto out;
    j->shm_bytes = (sizeof *j->shm + 4095) & ~(size_t)4095;
    j->shm = mmap(NULL, j->shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (j->shm == MAP_FAILED) {
        pc_jlog(j, PC_LOG_ERR, "mmap of the shared epochs failed: %s", strerror(errno));
        rc = PC_ESYS;
        goto out;
    }
    j->ncoll = pc_coll_count(c);
    j->shm->magic = PC_JSHM_MAGIC;
    j->shm->version = PC_JOURNAL_VERSION;
    j->shm->ncoll = j->ncoll;
    j->shm->boot_gen = j->boot_gen;
    /* epochs start at boot_gen << 32: they grow across restarts without
     * being stored anywhere, so a new boot's segments never reuse the name
     * or the epoch of an older boot's (§1) */
    for (unsigned i = 0; i < PC_MAX_COLLECTIONS; i++)
        atomic_init(&j->shm->epoch[i], j->boot_gen << 32);
    for (unsigned i = 0; i < j->ncoll; i++) {
        j->pcs[i].coll = pc_coll_at(c, i);
        j->pcs[i].fd = j->pcs[i].old_fd = -1;
    }
    pc_jwall_refresh(j, pc_jcoarse_ms());
    unsigned slot = 0;
    while (slot < PC_JOPEN_MAX && pc_jopen_list[slot] != NULL)
        slot++;
    if (slot < PC_JOPEN_MAX)
        pc_jopen_list[slot] = j;
out:
    if (rc != 0) {
        if (j->shm != MAP_FAILED)
            munmap(j->shm, j->shm_bytes);
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
    (void)pc_journal_flush(j, 1); /* failures are logged */
    if (j->installed)
        (void)pc_journal_uninstall(j);
    for (unsigned i = 0; i < PC_JOPEN_MAX; i++)
        if (pc_jopen_list[i] == j)
            pc_jopen_list[i] = NULL;
    for (unsigned i = 0; i < j->ncoll; i++) {
        struct pc_jpc *pc = &j->pcs[i];
        if (pc->fd >= 0)
            close(pc->fd);
        if (pc->old_fd >= 0)
            close(pc->old_fd);
        free(pc->buf);
    }
    munmap(j->shm, j->shm_bytes);
    close(j->dirfd);
    free(j->scratch);
    free(j->synced);
    free(j->path);
    free(j);
}
