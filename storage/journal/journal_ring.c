/*
 * journal_ring.c - how records get from the hook to the segment files
 * (docs/journal-format.md §6): one ring per process in the journal's shared
 * area, drained into that process's segments by a drainer thread (started
 * by pc_journal_sync_all in the maintenance process) or by the process
 * itself (always mode, a full ring, a tick with no live drainer, flush and
 * exit). This file holds the slots, the producer's side (the hook's
 * pc_jring_put), a consumer's drain of one slot into its segments
 * (pc_jdrain_locked, the segment write and fdatasync) and the process's
 * draining of its own ring; the drainer thread is journal_drain.c.
 *
 * Why a ring in shared memory: the hook then costs a memcpy into memory
 * that stays mapped and cached - no system call, no page fault, no
 * checksum (the consumer computes it) - and a record is in shared memory
 * the moment its write is acknowledged, so a worker killed with SIGKILL
 * loses nothing: a drainer writes its ring out afterwards; and as the
 * shared memory is a mapping of a file, when every process dies the next
 * open writes the rings out (journal_shm.c).
 *
 * Ring items (process-internal, never on disk), back to back from head:
 *   - a record: the on-disk record of §3, its sum not yet computed;
 *   - a control item "\x93JCT" coll(1) 0(3) epoch(8): the records that follow
 *     belong to segment (coll, epoch) of the producer;
 *   - a wrap: "\x93JWR", or fewer than 4 bytes left before the ring's end:
 *     the next item is at the ring's start.
 * An item never straddles the ring's end. A consumer computes each
 * record's sum (pc_jrec_sum, into its own memory: it never writes the
 * ring), writes each run of records with one pwritev(2) at the segment's
 * append offset (struct pc_jseg_shm.bytes, under the slot's lock) and only
 * then advances tail: a consumer killed half-way leaves the items in the
 * ring, and the next one writes the same bytes at the same offset.
 *
 * Locks: a slot's lock is taken by consumers only, never by the producer's
 * append; a drainer thread (journal_drain.c) holds its process's dmu
 * (guarding its descriptors and sync list) around a pass and takes one
 * slot lock at a time. No allocation happens under a slot lock except the drainer's
 * descriptor table, which is allocated before any lock is taken.
 */
#include "journal_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define PC_JCTL_SIZE 16u

static const uint8_t pc_jctl_marker[4] = {0x93, 'J', 'C', 'T'};
static const uint8_t pc_jwrap_marker[4] = {0x93, 'J', 'W', 'R'};

static void pc_jioerr_set(struct pc_jioerr *e, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void pc_jioerr_set(struct pc_jioerr *e, int err, const char *fmt, ...)
{
    if (e->err != 0)
        return;
    e->err = err != 0 ? err : EIO;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->what, sizeof e->what, fmt, ap);
    va_end(ap);
}

void pc_jfd_close(struct pc_jfd *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    if (f->dio_open)
        close(f->dio);
    f->dio_open = false;
}

/* Gives the drainer's f an O_DIRECT descriptor of segment name (already
 * open in f->fd), unless the file system refused one before. */
static void pc_jfd_open_direct(pc_journal *j, struct pc_jfd *f, const char *name,
                               struct pc_jdio *dio)
{
    if (dio == NULL || dio->off || f->dio_open)
        return;
    int fd = openat(j->dirfd, name, O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (fd >= 0) {
        f->dio = fd;
        f->dio_open = true;
    } else if (errno == EINVAL) {
        dio->off = true; /* tmpfs and others: the page cache only */
    }
}

void pc_jseg_name(char *out, size_t cap, const char *cn, uint64_t epoch, uint32_t pid, int32_t n)
{
    if (n == 0)
        snprintf(out, cap, "%s.%016llx.%lu" PC_JSEG_SUFFIX, cn, (unsigned long long)epoch,
                 (unsigned long)pid);
    else
        snprintf(out, cap, "%s.%016llx.%lu-%d" PC_JSEG_SUFFIX, cn, (unsigned long long)epoch,
                 (unsigned long)pid, (int)n);
}

static uint8_t *pc_jring_of(const pc_journal *j, const struct pc_jslot_shm *s)
{
    return j->rings + (size_t)(s - j->slots) * j->ring_bytes;
}

/* ---- slots --------------------------------------------------------------- */

static int pc_jmutex_init(pthread_mutex_t *m, bool shared)
{
    pthread_mutexattr_t a;
    int rc = pthread_mutexattr_init(&a);
    if (rc == 0 && shared)
        rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (rc == 0 && shared)
        rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (rc == 0)
        rc = pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
    return rc == 0 ? 0 : PC_ESYS;
}

void pc_jslot_reset(struct pc_jslot_shm *s)
{
    s->c_coll = UINT32_MAX;
    s->c_epoch = 0;
    for (unsigned c = 0; c < PC_MAX_COLLECTIONS; c++)
        s->seg[c] = (struct pc_jseg_shm){.n = -1};
}

int pc_jslots_init(pc_journal *j)
{
    for (unsigned i = 0; i < j->nslots; i++) {
        struct pc_jslot_shm *s = &j->slots[i];
        atomic_init(&s->owner, 0);
        atomic_init(&s->wake, 0);
        atomic_init(&s->head, 0);
        atomic_init(&s->tail, 0);
        pc_jslot_reset(s);
        if (pc_jmutex_init(&s->lock, true) != 0)
            return PC_ESYS;
    }
    return 0;
}

/* Takes a slot's lock. A holder that died (SIGKILL in the middle of a
 * drain) left at most a partial write past seg[].bytes and tail where it
 * was: the next drain rewrites the same bytes at the same offset, so the
 * state is consistent as it stands. */
int pc_jslot_lock(struct pc_jslot_shm *s)
{
    int rc = pthread_mutex_lock(&s->lock);
    if (rc == EOWNERDEAD)
        rc = pthread_mutex_consistent(&s->lock);
    return rc == 0 ? 0 : PC_ESYS;
}

void pc_jslot_unlock(struct pc_jslot_shm *s)
{
    pthread_mutex_unlock(&s->lock);
}

/* Claims a free slot for this process (CAS on owner), or falls back to a
 * private one: then every record is written through at once (a private
 * ring would die with the process). */
static int pc_jslot_claim(pc_journal *j)
{
    uint32_t me = (uint32_t)j->pid;
    unsigned i = 0;
    for (; i < j->nslots; i++) {
        struct pc_jslot_shm *s = &j->slots[i];
        uint32_t want = 0;
        if (atomic_load_explicit(&s->owner, memory_order_relaxed) != 0 ||
            !atomic_compare_exchange_strong(&s->owner, &want, me))
            continue;
        /* the ring's pages of the file get their disk blocks now: a write
         * into a hole of a shared file mapping on a full disk is SIGBUS */
        int err = pc_jshm_reserve(j, i);
        if (err != 0) {
            atomic_store(&s->owner, 0);
            pc_jlog(j, PC_LOG_WARN,
                    "%s: cannot allocate a ring in %s/" PC_JRINGS_FILE
                    " (%s): process %lu writes each record through",
                    j->path, j->path, strerror(err), (unsigned long)me);
            break;
        }
        /* a free slot is drained (head == tail) and nobody consumes it */
        if (pc_jslot_lock(s) != 0) {
            atomic_store(&s->owner, 0);
            return PC_ESYS;
        }
        pc_jslot_reset(s);
        atomic_store_explicit(&s->wake, 0, memory_order_relaxed);
        j->head = j->tail_seen = atomic_load_explicit(&s->tail, memory_order_relaxed);
        atomic_store_explicit(&s->head, j->head, memory_order_relaxed);
        pc_jslot_unlock(s);
        j->slot = s;
        j->ring = pc_jring_of(j, s);
        j->private_ring = false;
        j->ring_coll = UINT32_MAX;
        return 0;
    }
    struct pc_jslot_shm *s = calloc(1, sizeof *s);
    uint8_t *ring = malloc(j->ring_bytes);
    if (s == NULL || ring == NULL || pc_jmutex_init(&s->lock, false) != 0) {
        free(s);
        free(ring);
        return PC_EHEAP;
    }
    pc_jslot_reset(s);
    atomic_init(&s->owner, me);
    if (i == j->nslots)
        pc_jlog(j, PC_LOG_WARN,
                "%s: all %u ring slots are taken: process %lu writes each record through "
                "(max_procs)",
                j->path, j->nslots, (unsigned long)me);
    j->slot = s;
    j->ring = ring;
    j->private_ring = true;
    j->head = j->tail_seen = 0;
    j->ring_coll = UINT32_MAX;
    return 0;
}

/* ---- consuming ------------------------------------------------------------ */

/* Makes f the descriptor of segment g of slot s's collection c, creating
 * the segment (and writing its header) when g names none or another
 * epoch. Under s's lock. */
static int pc_jseg_ready(pc_journal *j, struct pc_jslot_shm *s, unsigned c, struct pc_jfd *f,
                         struct pc_jdio *dio, struct pc_jioerr *e)
{
    struct pc_jseg_shm *g = &s->seg[c];
    uint32_t pid = atomic_load_explicit(&s->owner, memory_order_relaxed);
    const char *cn = pc_jcoll_name(j, c);
    char name[160];
    if (g->n >= 0 && g->epoch == s->c_epoch) {
        if (f->fd >= 0 && f->pid == pid && f->epoch == g->epoch && f->n == g->n)
            return 0;
        pc_jfd_close(f);
        pc_jseg_name(name, sizeof name, cn, g->epoch, pid, g->n);
        int fd = openat(j->dirfd, name, O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            *f = (struct pc_jfd){.fd = fd, .n = g->n, .pid = pid, .epoch = g->epoch};
            pc_jfd_open_direct(j, f, name, dio);
            return 0;
        }
        if (errno != ENOENT) {
            pc_jioerr_set(e, errno, "opening segment %s", name);
            return PC_EIO;
        }
        /* retired meanwhile (its records are covered by the snapshot that
         * retired it, §5.2): a new segment of the same name takes over */
    }
    pc_jfd_close(f);
    int fd = -1;
    int32_t n = 0;
    for (; fd < 0; n++) {
        pc_jseg_name(name, sizeof name, cn, s->c_epoch, pid, n);
        fd = openat(j->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
        if (fd < 0 && (errno != EEXIST || n >= 1000)) {
            pc_jioerr_set(e, errno, "creating a segment");
            return PC_EIO;
        }
    }
    n--;
    pc_jseg_hdr h = {.version = PC_JOURNAL_VERSION,
                     .pid = pid,
                     .epoch = s->c_epoch,
                     .boot_gen = j->boot_gen,
                     .created_wall_ms = pc_wall_ms(),
                     .coll_len = strlen(cn)};
    memcpy(h.coll, cn, h.coll_len + 1);
    uint8_t hdr[PC_JSEG_HDR_SIZE];
    pc_jseg_hdr_encode(hdr, &h);
    ssize_t w;
    do
        w = pwrite(fd, hdr, sizeof hdr, 0);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)sizeof hdr) {
        pc_jioerr_set(e, w < 0 ? errno : ENOSPC, "writing a segment header");
        unlinkat(j->dirfd, name, 0);
        close(fd);
        return PC_EIO;
    }
    *g = (struct pc_jseg_shm){.epoch = s->c_epoch, .bytes = PC_JSEG_HDR_SIZE, .n = n};
    *f = (struct pc_jfd){.fd = fd, .n = n, .pid = pid, .epoch = s->c_epoch};
    pc_jfd_open_direct(j, f, name, dio);
    return 0;
}

/* The records a run holds on a consumer's stack (struct pc_jrun); the
 * drainer's runs are longer (struct pc_jdio). */
#define PC_JIOV_RECS 256u

/* Appends the run to the current segment of s. A failed or short write is
 * cut back to the last whole record; when even that fails the segment is
 * abandoned (the next run opens a "-<n>" one). */
static int pc_jrun_write(pc_journal *j, struct pc_jslot_shm *s, struct pc_jfd *fds,
                         struct pc_jdio *dio, struct pc_jrun *run, struct pc_jioerr *e)
{
    unsigned c = s->c_coll;
    if (c >= j->ncoll) { /* cannot happen: a producer writes a control item first */
        pc_jioerr_set(e, EINVAL, "ring records without a collection");
        return PC_EIO;
    }
    /* records of an epoch a committed snapshot covers, still in the ring
     * when that snapshot's retire ran: written, they would only make a
     * segment the next save retires (§5.2) */
    if (s->c_epoch < atomic_load_explicit(&j->shm->retired[c], memory_order_acquire))
        return 0;
    int rc = pc_jseg_ready(j, s, c, &fds[c], dio, e);
    if (rc != 0)
        return rc;
    struct pc_jseg_shm *g = &s->seg[c];
    if (fds[c].dio_open && dio != NULL) {
        bool cut_failed = false;
        rc = pc_jrun_write_direct(dio, &fds[c], run, g->bytes, e, &cut_failed);
        if (cut_failed) { /* what follows g->bytes is unknown: a new segment */
            g->n = -1;
            pc_jfd_close(&fds[c]);
        }
        if (rc == 0) {
            g->bytes += run->bytes;
            return 0;
        }
        if (rc < 0 || cut_failed)
            return PC_EIO;
        pc_jfd_close(&fds[c]); /* refused: through the page cache from now on */
        if ((rc = pc_jseg_ready(j, s, c, &fds[c], NULL, e)) != 0)
            return rc;
    }
    size_t done = 0;
    struct iovec *iov = run->iov;
    int niov = (int)(2 * run->n);
    while (done < run->bytes) {
        ssize_t n = pwritev(fds[c].fd, iov, niov, (off_t)(g->bytes + done));
        if (n > 0) {
            done += (size_t)n;
            /* a short write: continue after the bytes written */
            while (niov > 0 && (size_t)n >= iov->iov_len) {
                n -= (ssize_t)iov->iov_len;
                iov++;
                niov--;
            }
            if (n > 0) {
                iov->iov_base = (uint8_t *)iov->iov_base + n;
                iov->iov_len -= (size_t)n;
            }
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        pc_jioerr_set(e, n < 0 ? errno : ENOSPC, "write");
        if (done > 0 && ftruncate(fds[c].fd, (off_t)g->bytes) != 0) {
            g->n = -1;
            pc_jfd_close(&fds[c]);
        }
        return PC_EIO;
    }
    g->bytes += run->bytes;
    return 0;
}

/* Drains slot s into its segments: every item in [tail, head). Under s's
 * lock. Stops at the first failure (tail stays at the first record not
 * written). */
int pc_jdrain_locked(pc_journal *j, struct pc_jslot_shm *s, struct pc_jfd *fds, struct pc_jdio *dio,
                     struct pc_jioerr *e)
{
    const uint64_t R = j->ring_bytes;
    uint8_t *ring = s == j->slot && j->private_ring ? j->ring : pc_jring_of(j, s);
    uint64_t tail = atomic_load_explicit(&s->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&s->head, memory_order_acquire);
    struct iovec iov[2 * PC_JIOV_RECS];
    uint64_t sum[PC_JIOV_RECS];
    struct pc_jrun run = {.iov = iov, .sum = sum, .cap = PC_JIOV_RECS};
    if (dio != NULL && dio->buf != NULL && !dio->off)
        run = (struct pc_jrun){.iov = dio->iov, .sum = dio->sum, .cap = dio->recs};
    else
        dio = NULL;
    int rc;
    atomic_store_explicit(&s->wake, 0, memory_order_relaxed);
    for (;;) {
        uint64_t at = tail + run.bytes;
        size_t pos = (size_t)(at & (R - 1)), left = (size_t)R - pos;
        const uint8_t *p = ring + pos;
        bool more = at < head;
        bool rec = more && left >= 4 && memcmp(p, pc_jwrap_marker, 4) != 0 &&
                   memcmp(p, pc_jctl_marker, 4) != 0;
        if (rec && run.n < run.cap) {
            uint32_t size = pc_jrec_size_at(p); /* written by our producer */
            run.iov[2 * run.n] = (struct iovec){(void *)p, size - PC_JREC_SUM_SIZE};
            run.sum[run.n] = pc_jrec_sum(p, size);
            run.iov[2 * run.n + 1] = (struct iovec){&run.sum[run.n], PC_JREC_SUM_SIZE};
            run.n++;
            run.bytes += size;
            continue;
        }
        if (run.n > 0) {
            if ((rc = pc_jrun_write(j, s, fds, dio, &run, e)) != 0)
                return rc;
            tail += run.bytes;
            run.n = 0;
            run.bytes = 0;
            atomic_store_explicit(&s->tail, tail, memory_order_release);
        }
        if (!more)
            return 0;
        if (rec)
            continue; /* the run was full */
        if (left < 4 || memcmp(p, pc_jwrap_marker, 4) == 0) {
            tail += left;
        } else {
            uint64_t ep;
            memcpy(&ep, p + 8, 8);
            s->c_coll = p[4];
            s->c_epoch = ep;
            tail += PC_JCTL_SIZE;
        }
        atomic_store_explicit(&s->tail, tail, memory_order_release);
    }
}

uint64_t pc_jring_pending(pc_journal *j, struct pc_jslot_shm *s)
{
    const uint64_t R = j->ring_bytes;
    const uint8_t *ring = s == j->slot && j->private_ring ? j->ring : pc_jring_of(j, s);
    uint64_t tail = atomic_load_explicit(&s->tail, memory_order_acquire);
    uint64_t head = atomic_load_explicit(&s->head, memory_order_acquire);
    uint64_t n = 0;
    while (tail < head) {
        size_t pos = (size_t)(tail & (R - 1)), left = (size_t)R - pos;
        const uint8_t *p = ring + pos;
        if (left < 4 || memcmp(p, pc_jwrap_marker, 4) == 0) {
            tail += left;
        } else if (memcmp(p, pc_jctl_marker, 4) == 0) {
            tail += PC_JCTL_SIZE;
        } else {
            uint32_t size = pc_jrec_size_at(p);
            if (size < PC_JREC_MIN_SIZE)
                break; /* cannot happen: written by its producer */
            tail += size;
            n++;
        }
    }
    return n;
}

uint64_t pc_jring_check(const pc_journal *j, const struct pc_jslot_shm *s, uint64_t *recs,
                        const char **why)
{
    const uint64_t R = j->ring_bytes;
    const uint8_t *ring = pc_jring_of(j, s);
    uint64_t tail = atomic_load_explicit(&s->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&s->head, memory_order_relaxed);
    uint32_t coll = s->c_coll;
    *recs = 0;
    *why = NULL;
    if (head < tail || head - tail > R) {
        *why = "head and tail disagree";
        return tail;
    }
    if (coll != UINT32_MAX && coll >= j->ncoll) {
        *why = "bad collection index";
        return tail;
    }
    while (tail < head) {
        size_t pos = (size_t)(tail & (R - 1)), left = (size_t)R - pos;
        const uint8_t *p = ring + pos;
        uint64_t avail = head - tail < left ? head - tail : left;
        if (left < 4 || memcmp(p, pc_jwrap_marker, 4) == 0) {
            if (head - tail < left) {
                *why = "a wrap past head";
                return tail;
            }
            tail += left;
        } else if (memcmp(p, pc_jctl_marker, 4) == 0) {
            if (avail < PC_JCTL_SIZE || p[4] >= j->ncoll || p[5] != 0 || p[6] != 0 || p[7] != 0) {
                *why = "bad control item";
                return tail;
            }
            coll = p[4];
            tail += PC_JCTL_SIZE;
        } else {
            pc_jrec r;
            if (pc_jrec_decode_body(p, (size_t)avail, &r, why) != 0)
                return tail;
            if (coll == UINT32_MAX) {
                *why = "a record before any control item";
                return tail;
            }
            tail += r.size;
            (*recs)++;
        }
    }
    return tail;
}

/* fdatasync of slot s's segment of collection c (and the directory once
 * after its creation). Under s's lock. A failed fdatasync abandons the
 * segment: after it the kernel may have dropped the dirty pages. */
static int pc_jseg_sync_locked(pc_journal *j, struct pc_jslot_shm *s, unsigned c,
                               struct pc_jfd *fds, struct pc_jioerr *e)
{
    struct pc_jseg_shm *g = &s->seg[c];
    if (g->n < 0 || (g->synced >= g->bytes && g->dir_synced))
        return 0;
    struct pc_jfd *f = &fds[c];
    uint32_t pid = atomic_load_explicit(&s->owner, memory_order_relaxed);
    if (f->fd < 0 || f->pid != pid || f->epoch != g->epoch || f->n != g->n) {
        char name[160];
        pc_jfd_close(f);
        pc_jseg_name(name, sizeof name, pc_jcoll_name(j, c), g->epoch, pid, g->n);
        int fd = openat(j->dirfd, name, O_WRONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) { /* retired: nothing left to make durable */
            g->synced = g->bytes;
            g->dir_synced = 1;
            return 0;
        }
        if (fd < 0) {
            pc_jioerr_set(e, errno, "opening segment %s", name);
            return PC_EIO;
        }
        *f = (struct pc_jfd){.fd = fd, .n = g->n, .pid = pid, .epoch = g->epoch};
    }
    if (g->synced < g->bytes) {
        if (fdatasync(f->fd) != 0) {
            pc_jioerr_set(e, errno, "fdatasync");
            g->n = -1;
            pc_jfd_close(f);
            return PC_EIO;
        }
        g->synced = g->bytes;
    }
    if (!g->dir_synced) {
        if (fsync(j->dirfd) != 0) {
            pc_jioerr_set(e, errno, "fsync of the directory");
            return PC_EIO;
        }
        g->dir_synced = 1;
    }
    return 0;
}

/* ---- the producer (the hook's side) ----------------------------------------
 * Hot path: no lock, no system call, no shared read-modify-write. Touches
 * this process's slot line (head; tail only when the cached free space runs
 * out or the ring passes half full) and the ring bytes it writes. */

void pc_jdrainer_wake(pc_journal *j)
{
    atomic_fetch_add_explicit(&j->shm->drain_futex, 1, memory_order_release);
    syscall(SYS_futex, &j->shm->drain_futex, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Where an item of size bytes goes when the producer is at h: the wrap
 * skips to the next lap when it does not fit before the ring's end. R is a
 * power of two: positions are masks, not divisions (the hot path has no
 * 64-bit division). */
static uint64_t pc_jplace(uint64_t h, size_t size, uint64_t R)
{
    uint64_t left = R - (h & (R - 1));
    return left < size ? h + left : h;
}

static void pc_jput_wrap(uint8_t *ring, uint64_t h, uint64_t at, uint64_t R)
{
    if (at != h && at - h >= 4)
        memcpy(ring + (h & (R - 1)), pc_jwrap_marker, 4);
}

static int pc_jown_drain(pc_journal *j, struct pc_jioerr *e);

int pc_jring_put(pc_journal *j, unsigned coll, uint64_t epoch, const pc_jrec *rec, size_t size)
{
    int rc;
    if (j->slot == NULL && (rc = pc_jslot_claim(j)) != 0)
        return rc;
    const uint64_t R = j->ring_bytes;
    bool ctl = coll != j->ring_coll || epoch != j->ring_epoch;
    uint64_t h = j->head, c_at = 0, r_at;
    if (ctl) {
        c_at = pc_jplace(h, PC_JCTL_SIZE, R);
        h = c_at + PC_JCTL_SIZE;
    }
    r_at = pc_jplace(h, size, R);
    uint64_t end = r_at + size;
    if (end - j->tail_seen > R) {
        j->tail_seen = atomic_load_explicit(&j->slot->tail, memory_order_acquire);
        if (end - j->tail_seen > R) {
            /* the drainer is behind (or absent): write the ring out here */
            struct pc_jioerr e = {0};
            if ((rc = pc_jown_drain(j, &e)) != 0) {
                if (!j->failing)
                    pc_jlog(j, PC_LOG_ERR, "%s: %s failed: %s", j->path, e.what, strerror(e.err));
                j->failing = true;
                pc_jhealth_fail(j, e.err);
                return rc;
            }
            j->tail_seen = atomic_load_explicit(&j->slot->tail, memory_order_acquire);
        }
    }
    uint8_t *ring = j->ring;
    h = j->head;
    if (ctl) {
        pc_jput_wrap(ring, h, c_at, R);
        uint8_t *p = ring + (c_at & (R - 1));
        memcpy(p, pc_jctl_marker, 4);
        p[4] = (uint8_t)coll;
        p[5] = p[6] = p[7] = 0;
        memcpy(p + 8, &epoch, 8);
        h = c_at + PC_JCTL_SIZE;
        j->ring_coll = coll;
        j->ring_epoch = epoch;
    }
    pc_jput_wrap(ring, h, r_at, R);
    pc_jrec_encode_body(ring + (r_at & (R - 1)), rec);
    j->put_at = r_at;
    j->head = end;
    atomic_store_explicit(&j->slot->head, end, memory_order_release);
    if (end - j->tail_seen > R / 2 && !j->private_ring) {
        j->tail_seen = atomic_load_explicit(&j->slot->tail, memory_order_acquire);
        if (end - j->tail_seen > R / 2 &&
            atomic_load_explicit(&j->slot->wake, memory_order_relaxed) == 0) {
            atomic_store_explicit(&j->slot->wake, 1, memory_order_relaxed);
            pc_jdrainer_wake(j);
        }
    }
    return 0;
}

/* ---- the process's own ring ------------------------------------------------- */

static int pc_jown_drain(pc_journal *j, struct pc_jioerr *e)
{
    if (j->slot == NULL)
        return 0;
    if (pc_jslot_lock(j->slot) != 0) {
        pc_jioerr_set(e, EDEADLK, "locking the ring");
        return PC_EIO;
    }
    int rc = pc_jdrain_locked(j, j->slot, j->own, NULL, e);
    pc_jslot_unlock(j->slot);
    return rc;
}

static int pc_jown_fail(pc_journal *j, const struct pc_jioerr *e)
{
    pc_jhealth_fail(j, e->err);
    if (!j->failing)
        pc_jlog(j, PC_LOG_ERR, "%s: %s failed: %s; writes are refused until it recovers", j->path,
                e->what, strerror(e->err));
    j->failing = true;
    return PC_EIO;
}

static void pc_jown_ok(pc_journal *j)
{
    if (j->failing)
        pc_jlog(j, PC_LOG_WARN, "%s: writing again", j->path);
    j->failing = false;
}

int pc_jown_flush(pc_journal *j, bool sync)
{
    if (j->slot == NULL)
        return 0;
    struct pc_jioerr e = {0};
    if (pc_jslot_lock(j->slot) != 0)
        return PC_ESYS;
    int rc = pc_jdrain_locked(j, j->slot, j->own, NULL, &e);
    for (unsigned c = 0; sync && c < j->ncoll; c++) {
        int r2 = pc_jseg_sync_locked(j, j->slot, c, j->own, &e);
        if (rc == 0)
            rc = r2;
    }
    pc_jslot_unlock(j->slot);
    if (rc != 0)
        return pc_jown_fail(j, &e);
    pc_jown_ok(j);
    return 0;
}

/* fdatasync of this process's segment (epoch, n) of collection c found by
 * its name, and of the directory: for a segment that holds staged records
 * (group commit) but is no longer slot s's current one - a save started a
 * new epoch, or a failed write abandoned it. Under s's lock. A segment
 * gone (ENOENT) was retired: a committed snapshot covers its records. */
static int pc_jseg_sync_named(pc_journal *j, unsigned c, uint64_t epoch, int32_t n,
                              struct pc_jioerr *e)
{
    char name[160];
    pc_jseg_name(name, sizeof name, pc_coll_name(j->pcs[c].coll), epoch, (uint32_t)j->pid, n);
    int fd = openat(j->dirfd, name, O_WRONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0) {
        pc_jioerr_set(e, errno, "opening segment %s", name);
        return PC_EIO;
    }
    int rc = 0;
    if (fdatasync(fd) != 0) {
        pc_jioerr_set(e, errno, "fdatasync");
        rc = PC_EIO;
    } else if (fsync(j->dirfd) != 0) {
        pc_jioerr_set(e, errno, "fsync of the directory");
        rc = PC_EIO;
    }
    close(fd);
    return rc;
}

/* Group commit, after the hook's drain of collection c (ok: the record is
 * in the segment): notes the segment that now holds a staged record. When
 * the segment noted before is not slot s's current one any more, its
 * staged records are made durable now, by name - the commit only knows
 * the current segments (struct pc_jseg_shm). Under s's lock. */
static void pc_jstage_note_locked(pc_journal *j, struct pc_jslot_shm *s, unsigned c, bool ok,
                                  struct pc_jioerr *e)
{
    const struct pc_jseg_shm *g = &s->seg[c];
    struct pc_jpend *p = &j->pend[c];
    if (p->on && (g->n != p->n || g->epoch != p->epoch)) {
        if (pc_jseg_sync_named(j, c, p->epoch, p->n, e) != 0)
            j->commit_err = true;
        p->on = false;
    }
    /* g->n < 0 after a successful drain: the record was of a retired epoch
     * and dropped (covered by a committed snapshot), nothing to sync */
    if (ok && g->n >= 0) {
        *p = (struct pc_jpend){.on = true, .n = g->n, .epoch = g->epoch};
        j->staged++;
    }
}

/* The always mode, after the hook appended its record: the ring is drained
 * (the record is the last item) and the collection's segment - the one the
 * record went to - fdatasynced before the write is acknowledged; with stage
 * (group commit) the fdatasync waits for pc_jown_sync_staged. When the
 * drain fails the record is taken back out of the ring: the caller gets
 * PC_EIO and the write was not journaled. */
int pc_jown_commit(pc_journal *j, unsigned coll, bool stage)
{
    struct pc_jioerr e = {0};
    struct pc_jslot_shm *s = j->slot;
    if (pc_jslot_lock(s) != 0)
        return PC_ESYS;
    int rc = pc_jdrain_locked(j, s, j->own, NULL, &e);
    if (rc == 0 && !stage) {
        rc = pc_jseg_sync_locked(j, s, coll, j->own, &e);
    } else if (rc != 0 && atomic_load_explicit(&s->tail, memory_order_relaxed) <= j->put_at) {
        /* the record did not reach the segment: it leaves the ring (items
         * before it stay for the next attempt; a control item before it
         * still describes what follows) */
        atomic_store_explicit(&s->head, j->put_at, memory_order_relaxed);
        j->head = j->put_at;
    }
    if (stage)
        pc_jstage_note_locked(j, s, coll, rc == 0, &e);
    pc_jslot_unlock(s);
    /* e.err without rc: the record is in its segment, an earlier staged
     * one could not be synced (j->commit_err fails the next commit) */
    if (rc != 0 || e.err != 0) {
        (void)pc_jown_fail(j, &e);
        return rc != 0 ? PC_EIO : 0;
    }
    pc_jown_ok(j);
    return 0;
}

void pc_jown_takeback(pc_journal *j)
{
    struct pc_jslot_shm *s = j->slot;
    if (s == NULL || pc_jslot_lock(s) != 0)
        return;
    if (atomic_load_explicit(&s->tail, memory_order_relaxed) <= j->put_at) {
        atomic_store_explicit(&s->head, j->put_at, memory_order_relaxed);
        j->head = j->put_at;
    }
    pc_jslot_unlock(s);
}

void pc_jown_rotate(pc_journal *j)
{
    for (unsigned c = 0; c < j->ncoll; c++) {
        struct pc_jfd *f = &j->own[c];
        if (f->fd >= 0 && f->epoch != atomic_load(&j->shm->epoch[c]))
            pc_jfd_close(f);
    }
}

void pc_jown_release(pc_journal *j)
{
    struct pc_jslot_shm *s = j->slot;
    if (s != NULL && pc_jslot_lock(s) == 0) {
        struct pc_jioerr e = {0};
        (void)pc_jdrain_locked(j, s, j->own, NULL, &e);
        bool empty = atomic_load(&s->tail) == atomic_load(&s->head);
        pc_jslot_unlock(s);
        if (e.err != 0)
            (void)pc_jown_fail(j, &e);
        if (j->private_ring) {
            pthread_mutex_destroy(&s->lock);
            free(s);
            free(j->ring);
        } else if (empty) {
            atomic_store(&s->owner, 0);
        } /* else a drainer writes the rest and frees the slot */
    }
    j->slot = NULL;
    j->ring = NULL;
    j->private_ring = false;
    for (unsigned c = 0; c < PC_MAX_COLLECTIONS; c++)
        pc_jfd_close(&j->own[c]);
}

void pc_jring_after_fork(pc_journal *j)
{
    /* the parent's slot, ring and descriptors stay the parent's; a private
     * ring is always empty between records (written through) */
    if (j->private_ring) {
        free(j->slot);
        free(j->ring);
    }
    j->slot = NULL;
    j->ring = NULL;
    j->private_ring = false;
    j->failing = false;
    for (unsigned c = 0; c < PC_MAX_COLLECTIONS; c++)
        pc_jfd_close(&j->own[c]);
    if (j->dfd != NULL) {
        for (size_t i = 0; i < (size_t)j->nslots * PC_MAX_COLLECTIONS; i++)
            pc_jfd_close(&j->dfd[i]);
        free(j->dfd);
        j->dfd = NULL;
    }
    pc_jdio_free(&j->dio);
    j->drainer = false;
    atomic_store(&j->dstop, false);
    pthread_mutex_init(&j->dmu, NULL);
    j->drc = 0;
    j->derr[0] = '\0';
}
