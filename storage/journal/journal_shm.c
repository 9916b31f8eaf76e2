/*
 * journal_shm.c - the journal's shared area as a file, <dir>/journal/rings
 * (docs/journal-format.md §6.1): set up at open, written out at the next
 * open when every process of a run died before a drainer wrote its rings.
 *
 * Why a file and not anonymous memory: a record is acknowledged once it is
 * in its process's ring. With anonymous memory the rings die with the last
 * process of the host (a kill -9 of the whole process group, an OOM kill of
 * the master after its workers); a MAP_SHARED mapping of a file leaves them
 * in the page cache, where the next open finds them, writes them to their
 * segments and fdatasyncs them before the replay reads the segments. The
 * file costs the hot path nothing more than anonymous memory: the pages
 * are the same page-cache pages, written back by the kernel now and then.
 *
 * Invariants:
 *   - the opener holds flock(LOCK_EX) on the file (its children inherit
 *     the descriptor): while any process of a run lives, no other open may
 *     read or reset the area;
 *   - a ring's range of the file has its blocks allocated before a process
 *     writes there (pc_jshm_reserve at slot claim): a store into a hole of
 *     a shared mapping on a full file system raises SIGBUS;
 *   - the recovery reads the old area through a private (copy-on-write)
 *     mapping: it never changes the file, so a recovery killed half-way
 *     leaves it as it was and the next one writes the same bytes at the
 *     same offsets (§6.2); only after every recovered segment is
 *     fdatasynced is the area set up anew;
 *   - what the file holds is hostile: every length, index and item is
 *     checked before use (pc_jring_check), and an area written before the
 *     machine restarted is not written out (its pages may be any mix of old
 *     and new: §6.1 says what a machine crash may cost).
 */
#include "journal_int.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The first 72 bytes mean the same in every layout (docs/journal-format.md
 * §6.5): any build can tell whether it may read a file. */
_Static_assert(offsetof(struct pc_jshm, version) == 8, "layout field");
_Static_assert(offsetof(struct pc_jshm, boot_gen) == 16, "boot generation field");
_Static_assert(offsetof(struct pc_jshm, slot_size) == 52, "slot size field");
_Static_assert(offsetof(struct pc_jshm, area_bytes) == 56, "area size field");
_Static_assert(offsetof(struct pc_jshm, clean) == 64, "clean field");
_Static_assert(offsetof(struct pc_jshm, boot_id) == 72, "boot id field");

/* The layout of an area of (nslots, ring_bytes). */
static size_t pc_jshm_slots_at(void)
{
    return (sizeof(struct pc_jshm) + 63) & ~(size_t)63;
}

static size_t pc_jshm_rings_at(unsigned nslots)
{
    return (pc_jshm_slots_at() + nslots * sizeof(struct pc_jslot_shm) + 4095) & ~(size_t)4095;
}

const char *pc_jcoll_name(const pc_journal *j, unsigned c)
{
    return j->shm->coll_names[c];
}

/* The kernel's boot id (a UUID, 36 characters) as 16 bytes; zeros when it
 * cannot be read. */
static void pc_jboot_id(uint8_t out[16])
{
    memset(out, 0, 16);
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char txt[64];
    ssize_t n = read(fd, txt, sizeof txt - 1);
    close(fd);
    if (n < 36)
        return;
    unsigned k = 0;
    for (ssize_t i = 0; i < n && k < 32; i++) {
        int v = pc_hex_val(txt[i]);
        if (v < 0)
            continue;
        out[k / 2] = (uint8_t)(out[k / 2] << 4 | v);
        k++;
    }
    if (k != 32)
        memset(out, 0, 16);
}

/* ---- the recovery of an earlier run's rings -------------------------------- */

/* Checks what an old area's header says, against the file's size. */
static const char *pc_jshm_header_bad(const struct pc_jshm *h, size_t size)
{
    if (h->nslots == 0 || h->nslots > 4096)
        return "bad slot count";
    if (h->ring_bytes < 4096 || h->ring_bytes > ((uint64_t)1 << 30) ||
        (h->ring_bytes & (h->ring_bytes - 1)) != 0)
        return "bad ring size";
    if (h->ncoll > PC_MAX_COLLECTIONS)
        return "bad collection count";
    uint64_t need = pc_jshm_rings_at(h->nslots) + (uint64_t)h->nslots * h->ring_bytes;
    if (h->area_bytes != need || need > size)
        return "its size disagrees with its geometry";
    for (unsigned c = 0; c < h->ncoll; c++) {
        const char *n = h->coll_names[c];
        size_t len = strnlen(n, PC_COLL_NAME_MAX + 1);
        if (len == 0 || len > PC_COLL_NAME_MAX)
            return "bad collection name";
        for (size_t i = 0; i < len; i++)
            if (n[i] == '/' || n[i] == '.' || (unsigned char)n[i] < 0x21 ||
                (unsigned char)n[i] > 0x7e)
                return "bad collection name";
    }
    return NULL;
}

/* Makes the segment state of an old slot safe to append to: a segment that
 * is gone (retired) or shorter than the recorded end starts a new one. */
static void pc_jshm_check_segs(const pc_journal *v, struct pc_jslot_shm *s)
{
    uint32_t pid = atomic_load_explicit(&s->owner, memory_order_relaxed);
    for (unsigned c = 0; c < PC_MAX_COLLECTIONS; c++) {
        struct pc_jseg_shm *g = &s->seg[c];
        if (g->n < 0)
            continue;
        char name[160];
        struct stat st;
        if (c >= v->ncoll || g->n > 1000 || g->bytes < PC_JSEG_HDR_SIZE) {
            *g = (struct pc_jseg_shm){.n = -1};
            continue;
        }
        pc_jseg_name(name, sizeof name, pc_jcoll_name(v, c), g->epoch, pid, g->n);
        if (fstatat(v->dirfd, name, &st, 0) != 0 || (uint64_t)st.st_size < g->bytes)
            *g = (struct pc_jseg_shm){.n = -1};
        g->synced = 0; /* fdatasync it again: the old run may not have */
    }
}

/* Writes out the rings of the old area mapped (privately) at h: every slot
 * with records, into its process's segments, each fdatasynced. */
static int pc_jshm_drain_old(pc_journal *j, struct pc_jshm *h)
{
    pc_journal v = *j; /* a view of the handle on the old area */
    v.shm = h;
    v.slots = (struct pc_jslot_shm *)((uint8_t *)h + pc_jshm_slots_at());
    v.rings = (uint8_t *)h + pc_jshm_rings_at(h->nslots);
    v.ring_bytes = h->ring_bytes;
    v.nslots = h->nslots;
    v.ncoll = h->ncoll;
    v.boot_gen = h->boot_gen; /* the records' segments are that run's */
    v.slot = NULL;
    v.private_ring = false;
    struct pc_jfd fds[PC_MAX_COLLECTIONS];
    uint64_t recs = 0, dropped = 0;
    unsigned procs = 0;
    for (unsigned i = 0; i < v.nslots; i++) {
        struct pc_jslot_shm *s = &v.slots[i];
        if (atomic_load_explicit(&s->owner, memory_order_relaxed) == 0 ||
            atomic_load_explicit(&s->head, memory_order_relaxed) ==
                atomic_load_explicit(&s->tail, memory_order_relaxed))
            continue;
        uint64_t n;
        const char *why;
        uint64_t good = pc_jring_check(&v, s, &n, &why);
        if (good != atomic_load_explicit(&s->head, memory_order_relaxed)) {
            pc_jlog(j, PC_LOG_ERR,
                    "%s/" PC_JRINGS_FILE ": the ring of process %lu is damaged (%s) after %llu "
                    "records: the rest of it (%llu bytes) is not written out",
                    j->path, (unsigned long)atomic_load(&s->owner), why ? why : "?",
                    (unsigned long long)n, (unsigned long long)(atomic_load(&s->head) - good));
            dropped += atomic_load(&s->head) - good;
            atomic_store_explicit(&s->head, good, memory_order_relaxed);
        }
        if (n == 0)
            continue;
        if (s->c_coll != UINT32_MAX && s->c_coll >= v.ncoll)
            s->c_coll = UINT32_MAX; /* pc_jring_check stopped before any record then */
        pc_jshm_check_segs(&v, s);
        /* nobody else maps this copy: the mutex is set up anew, whatever
         * state the dead run left it in */
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutex_init(&s->lock, &a);
        pthread_mutexattr_destroy(&a);
        for (unsigned c = 0; c < PC_MAX_COLLECTIONS; c++)
            fds[c] = (struct pc_jfd){.fd = -1};
        struct pc_jioerr e = {0};
        int rc = pc_jdrain_locked(&v, s, fds, NULL, &e);
        for (unsigned c = 0; rc == 0 && c < v.ncoll; c++) {
            struct pc_jseg_shm *g = &s->seg[c];
            if (g->n < 0 || fds[c].fd < 0)
                continue;
            if (fdatasync(fds[c].fd) != 0) {
                e.err = errno;
                snprintf(e.what, sizeof e.what, "fdatasync");
                rc = PC_EIO;
            }
        }
        for (unsigned c = 0; c < PC_MAX_COLLECTIONS; c++)
            pc_jfd_close(&fds[c]);
        if (rc == 0 && fsync(j->dirfd) != 0) {
            e.err = errno;
            snprintf(e.what, sizeof e.what, "fsync of the directory");
            rc = PC_EIO;
        }
        if (rc != 0) {
            pc_jlog(j, PC_LOG_ERR,
                    "%s/" PC_JRINGS_FILE ": cannot write out the %llu acknowledged records the "
                    "previous run (process %lu) left in its ring: %s failed: %s; the file is "
                    "kept as it is: free space or repair the disk, then start again",
                    j->path, (unsigned long long)n, (unsigned long)atomic_load(&s->owner), e.what,
                    strerror(e.err));
            return PC_EIO;
        }
        recs += n;
        procs++;
    }
    j->prev.records = recs;
    j->prev.procs = procs;
    if (recs > 0)
        pc_jlog(j, PC_LOG_WARN,
                "%s: wrote out %llu acknowledged records that %u process(es) of the previous "
                "run (boot generation %llu) left in their rings",
                j->path, (unsigned long long)recs, procs, (unsigned long long)h->boot_gen);
    (void)dropped; /* logged per ring above */
    return 0;
}

/* Reads what an earlier run left in the file fd (size bytes). 0 when there
 * is nothing to write out or it was written out; PC_EIO / PC_EFORMAT
 * (logged) when the records cannot be written out or the file is of a
 * layout this build cannot read and may hold records. */
static int pc_jshm_recover(pc_journal *j, int fd, size_t size)
{
    if (size < sizeof(struct pc_jshm))
        return 0; /* an area that was never set up */
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
        pc_jlog(j, PC_LOG_ERR, "%s/" PC_JRINGS_FILE ": mmap failed: %s", j->path, strerror(errno));
        return PC_ESYS;
    }
    struct pc_jshm *h = m;
    int rc = 0;
    const char *bad = NULL;
    uint8_t boot[16], zero[16] = {0};
    if (h->magic == PC_JSHM_MAGIC) { /* a run set it up: did it close it? */
        j->prev.found = 1;
        j->prev.unclean = atomic_load(&h->clean) != 1;
        j->prev.boot_gen = h->boot_gen;
    }
    if (h->magic != PC_JSHM_MAGIC) {
        pc_jlog(j, PC_LOG_WARN, "%s/" PC_JRINGS_FILE ": not a rings file: set up anew", j->path);
    } else if (h->version != PC_JSHM_LAYOUT || h->slot_size != sizeof(struct pc_jslot_shm)) {
        if (atomic_load(&h->clean) == 1)
            goto done; /* closed with every ring written out: nothing to read */
        pc_jlog(j, PC_LOG_ERR,
                "%s/" PC_JRINGS_FILE ": written by a build with another layout (%u, slot %u "
                "bytes; this build: %u, %zu bytes) and not closed cleanly: it may hold "
                "acknowledged records this build cannot read. Start the build that wrote it "
                "once and stop it, or remove the file to accept losing them",
                j->path, h->version, h->slot_size, PC_JSHM_LAYOUT, sizeof(struct pc_jslot_shm));
        rc = PC_EFORMAT;
    } else if ((bad = pc_jshm_header_bad(h, size)) != NULL) {
        pc_jlog(j, PC_LOG_ERR,
                "%s/" PC_JRINGS_FILE ": damaged header (%s): its rings are not written out",
                j->path, bad);
    } else if (pc_jboot_id(boot), memcmp(boot, h->boot_id, 16) != 0 &&
                                      memcmp(boot, zero, 16) != 0 &&
                                      memcmp(h->boot_id, zero, 16) != 0) {
        j->prev.machine_restarted = j->prev.unclean;
        pc_jlog(j, PC_LOG_WARN,
                "%s/" PC_JRINGS_FILE ": written before the machine restarted: its rings are "
                "not written out (a machine crash may cost what was not fdatasynced, about "
                "the last second of everysec writes)",
                j->path);
    } else {
        rc = pc_jshm_drain_old(j, h);
    }
done:
    munmap(m, size);
    return rc;
}

/* ---- open / close ----------------------------------------------------------- */

/* Maps an area of the handle's geometry: the file when it can be set up,
 * anonymous memory otherwise. */
static int pc_jshm_map(pc_journal *j)
{
    j->rings_at = pc_jshm_rings_at(j->nslots);
    j->shm_bytes = j->rings_at + (size_t)j->nslots * j->ring_bytes;
    int err = 0;
    if (ftruncate(j->shm_fd, (off_t)j->shm_bytes) != 0)
        err = errno;
    else
        err = posix_fallocate(j->shm_fd, 0, (off_t)j->rings_at);
    if (err == 0) {
        j->shm = mmap(NULL, j->shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, j->shm_fd, 0);
        if (j->shm != MAP_FAILED)
            return 0;
        err = errno;
    }
    /* a full disk at the first start: the journal works, but rings die
     * with the host's last process (and writes are refused anyway while
     * the disk is full) */
    pc_jlog(j, PC_LOG_WARN,
            "%s/" PC_JRINGS_FILE ": cannot set up the rings file (%s): the rings are in "
            "anonymous memory, so a crash of every process loses what they hold; restart "
            "once space returns",
            j->path, strerror(err));
    j->shm_anon = true;
    j->shm = mmap(NULL, j->shm_bytes, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (j->shm == MAP_FAILED) {
        pc_jlog(j, PC_LOG_ERR, "mmap of the shared area (%zu bytes) failed: %s", j->shm_bytes,
                strerror(errno));
        return PC_ESYS;
    }
    return 0;
}

int pc_jshm_open(pc_journal *j)
{
    j->shm = MAP_FAILED;
    j->shm_fd = openat(j->dirfd, PC_JRINGS_FILE, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    if (j->shm_fd < 0) {
        pc_jlog(j, PC_LOG_ERR, "open %s/" PC_JRINGS_FILE ": %s", j->path, strerror(errno));
        return PC_EIO;
    }
    if (flock(j->shm_fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        pc_jlog(j, PC_LOG_ERR, "%s/" PC_JRINGS_FILE ": %s", j->path,
                e == EWOULDBLOCK ? "in use by another live process (one host per store; a "
                                   "process of an earlier start may still be running)"
                                 : strerror(e));
        return e == EWOULDBLOCK ? PC_ELOCKED : PC_EIO;
    }
    struct stat st;
    if (fstat(j->shm_fd, &st) != 0) {
        pc_jlog(j, PC_LOG_ERR, "stat %s/" PC_JRINGS_FILE ": %s", j->path, strerror(errno));
        return PC_EIO;
    }
    int rc = pc_jshm_recover(j, j->shm_fd, (size_t)st.st_size);
    if (rc != 0)
        return rc;
    if ((rc = pc_jshm_map(j)) != 0)
        return rc;
    struct pc_jshm *h = j->shm;
    atomic_store(&h->clean, 0);
    h->magic = 0; /* valid again once set up (a crash before then: "not a rings file") */
    h->nslots = j->nslots;
    h->ring_bytes = j->ring_bytes;
    h->slot_size = sizeof(struct pc_jslot_shm);
    h->area_bytes = j->shm_bytes;
    pc_jboot_id(h->boot_id);
    /* the health state is the live host's (docs/journal-format.md §6.4): a
     * host killed while failing, or while its start held the journal, left
     * its flags and failure time here, and nobody else would clear them.
     * The rings lock above says no process of that host runs any more. */
    atomic_store(&h->h_hold, 0);
    atomic_store(&h->h_failing, 0);
    atomic_store(&h->h_err, 0);
    atomic_store(&h->h_since_wall_ms, 0);
    atomic_store(&h->h_lost, 0);
    atomic_store(&h->h_failures, 0);
    j->slots = (struct pc_jslot_shm *)((uint8_t *)h + pc_jshm_slots_at());
    j->rings = (uint8_t *)h + j->rings_at;
    return 0;
}

int pc_jshm_reserve(pc_journal *j, unsigned slot)
{
    if (j->shm_anon)
        return 0;
    return posix_fallocate(j->shm_fd, (off_t)(j->rings_at + (size_t)slot * j->ring_bytes),
                           (off_t)j->ring_bytes);
}

void pc_jshm_close(pc_journal *j, bool clean)
{
    if (j->shm != MAP_FAILED) {
        if (clean)
            atomic_store(&j->shm->clean, 1);
        munmap(j->shm, j->shm_bytes);
    }
    j->shm = MAP_FAILED;
    if (j->shm_fd >= 0)
        close(j->shm_fd);
    j->shm_fd = -1;
}
