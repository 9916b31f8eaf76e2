/*
 * journal_drain.c - the drainer (docs/journal-format.md §6.2-§6.3): a thread
 * that the first pc_journal_sync_all call of a process (the maintenance
 * process) starts, which drains every process's ring into that process's
 * segments when a producer wakes it or every PC_JDRAIN_WAIT_MS and, every
 * PC_JSYNC_MS, also fdatasyncs the segment files that grew, closes
 * descriptors of past epochs and frees the slots of dead processes once
 * they are empty.
 * pc_jdrain_pass runs the same pass in the calling thread. Draining one
 * slot (pc_jdrain_locked) and the producer's side are journal_ring.c.
 *
 * Locks: the process's dmu guards its descriptors (dfd), its sync list,
 * last_sync and the error it reports (drc, derr); a pass holds dmu and
 * takes one slot lock at a time. No allocation happens under a slot lock:
 * the descriptor table is allocated before any lock is taken, the sync
 * list grows under dmu only. The thread never calls the host's log
 * callback (it may not be thread-safe): it keeps its first error for
 * pc_journal_sync_all to log. A dead process's slot is freed only when it
 * is empty and still that process's.
 */
#include "journal_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define PC_JDRAIN_WAIT_MS 50 /* the drainer's idle period */
#define PC_JSYNC_MS 1000     /* the drainer's fdatasync period */
/* ... and while the journal is failing: writes resume at the first sync
 * pass whose probe succeeds, so this bounds how long after space returns
 * writes stay refused (well under the second the docs promise); few
 * records arrive while writes are refused, so the passes cost little */
#define PC_JSYNC_FAILING_MS 250

/* ---- the drainer ------------------------------------------------------------ */

/* Keeps a pass's error for the report; err != 0 is an I/O failure of the
 * journal (its errno): the journal turns failing right away, so writes
 * are refused from now on (pcache_journal.h, health). */
static void pc_jnote(pc_journal *j, int rc, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void pc_jnote(pc_journal *j, int rc, int err, const char *fmt, ...)
{
    if (err != 0) {
        j->pass_err = err;
        pc_jhealth_fail(j, err);
    }
    if (j->drc != 0)
        return;
    j->drc = rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->derr, sizeof j->derr, fmt, ap);
    va_end(ap);
}

/* One file the sync pass knows: its size when last synced. */
struct pc_jsynced {
    uint64_t name_hash;
    uint64_t ino;
    off_t size;
    bool seen;
};

/* fdatasyncs every segment file that grew since this process last synced
 * it, whoever wrote it (an fsync flushes a file's dirty pages whatever
 * descriptor wrote them), then the directory when segments appeared.
 * Under dmu. */
static void pc_jsync_scan(pc_journal *j)
{
    int dfd = openat(j->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (d == NULL) {
        pc_jnote(j, PC_EIO, errno, "cannot list the directory: %s", strerror(errno));
        if (dfd >= 0)
            close(dfd);
        return;
    }
    bool fresh = false;
    for (size_t i = 0; i < j->nsynced; i++)
        j->synced[i].seen = false;
    struct dirent *de;
    char cn[PC_COLL_NAME_MAX + 1];
    uint64_t e;
    while ((de = readdir(d)) != NULL) {
        if (pc_journal_segment_name_parse(de->d_name, cn, sizeof cn, &e) != 0)
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
                    pc_jnote(j, PC_EHEAP, 0, "out of memory listing the segments");
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
        if (fdatasync(fd) == 0)
            k->size = sb.st_size;
        else
            pc_jnote(j, PC_EIO, errno, "%s: fdatasync failed: %s", de->d_name, strerror(errno));
        close(fd);
    }
    closedir(d);
    size_t n = 0; /* forget files that are gone */
    for (size_t i = 0; i < j->nsynced; i++)
        if (j->synced[i].seen)
            j->synced[n++] = j->synced[i];
    j->nsynced = n;
    if (fresh && fsync(j->dirfd) != 0)
        pc_jnote(j, PC_EIO, errno, "fsync of the directory failed: %s", strerror(errno));
}

/* Drains every slot; with maint also closes descriptors of past epochs
 * and frees the slots of dead processes once they are empty. Under dmu. */
static void pc_jdrain_all(pc_journal *j, bool maint)
{
    for (unsigned i = 0; i < j->nslots; i++) {
        struct pc_jslot_shm *s = &j->slots[i];
        struct pc_jfd *fds = &j->dfd[(size_t)i * PC_MAX_COLLECTIONS];
        uint32_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
        if (owner == 0)
            continue;
        bool busy = atomic_load_explicit(&s->head, memory_order_acquire) !=
                    atomic_load_explicit(&s->tail, memory_order_relaxed);
        bool dead = maint && kill((pid_t)owner, 0) != 0 && errno == ESRCH;
        if (busy || dead) {
            if (pc_jslot_lock(s) != 0)
                continue;
            struct pc_jioerr e = {0};
            if (pc_jdrain_locked(j, s, fds, &j->dio, &e) != 0) {
                pc_jnote(j, PC_EIO, e.err != 0 ? e.err : EIO,
                         "draining the ring of process %lu: %s failed: %s", (unsigned long)owner,
                         e.what, strerror(e.err));
            }
            /* free the slot only if it is still the dead process's: a
             * process that released it (it was alive when checked) may
             * have let another claim it meanwhile */
            uint32_t was = owner;
            if (dead && atomic_load(&s->head) == atomic_load(&s->tail) &&
                atomic_load(&s->owner) == owner) {
                pc_jslot_reset(s);
                (void)atomic_compare_exchange_strong(&s->owner, &was, 0);
            }
            pc_jslot_unlock(s);
        }
        if (maint || dead) {
            for (unsigned c = 0; c < j->ncoll; c++)
                if (fds[c].fd >= 0 && (dead || fds[c].epoch != atomic_load(&j->shm->epoch[c])))
                    pc_jfd_close(&fds[c]);
        }
    }
}

static int pc_jdfd_alloc(pc_journal *j)
{
    if (j->dfd != NULL)
        return 0;
    if (pc_jdio_alloc(&j->dio) != 0)
        return PC_EHEAP;
    size_t n = (size_t)j->nslots * PC_MAX_COLLECTIONS;
    if ((j->dfd = malloc(n * sizeof *j->dfd)) == NULL)
        return PC_EHEAP;
    for (size_t i = 0; i < n; i++)
        j->dfd[i] = (struct pc_jfd){.fd = -1};
    return 0;
}

/* Whether every ring is written out. */
static bool pc_jall_drained(pc_journal *j)
{
    for (unsigned i = 0; i < j->nslots; i++) {
        struct pc_jslot_shm *s = &j->slots[i];
        if (atomic_load(&s->owner) != 0 && atomic_load(&s->head) != atomic_load(&s->tail))
            return false;
    }
    return true;
}

static void pc_jpass_locked(pc_journal *j, bool sync)
{
    int64_t now = pc_mono_coarse_ms();
    j->pass_err = 0;
    pc_jdrain_all(j, sync);
    if (sync) {
        pc_jsync_scan(j);
        j->last_sync = now;
        /* failing: writes resume once a whole pass wrote and synced every
         * ring and a probe write + fdatasync succeeds (every
         * PC_JSYNC_FAILING_MS) */
        if (j->pass_err == 0 && pc_jhealth_failing(j) && pc_jall_drained(j)) {
            int perr = pc_jhealth_probe(j);
            if (perr == 0 && pc_jhealth_ok(j))
                j->recovered = true;
        }
    }
    atomic_store_explicit(&j->shm->drain_beat_ms, now, memory_order_relaxed);
}

static void *pc_jdrainer_main(void *arg)
{
    pc_journal *j = arg;
    /* the host's signals are for its own threads */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    while (!atomic_load(&j->dstop)) {
        uint32_t seq = atomic_load_explicit(&j->shm->drain_futex, memory_order_acquire);
        pthread_mutex_lock(&j->dmu);
        int64_t period = pc_jhealth_failing(j) ? PC_JSYNC_FAILING_MS : PC_JSYNC_MS;
        pc_jpass_locked(j, pc_mono_coarse_ms() - j->last_sync >= period);
        pthread_mutex_unlock(&j->dmu);
        struct timespec ts = {0, PC_JDRAIN_WAIT_MS * 1000000L};
        syscall(SYS_futex, &j->shm->drain_futex, FUTEX_WAIT, seq, &ts, NULL, 0);
    }
    return NULL;
}

int pc_jdrain_pass(pc_journal *j, bool start)
{
    if (pc_jdfd_alloc(j) != 0)
        return PC_EHEAP;
    int rc = 0;
    pthread_mutex_lock(&j->dmu);
    if (start && !j->drainer) {
        atomic_store(&j->dstop, false);
        int prc = pthread_create(&j->dthr, NULL, pc_jdrainer_main, j);
        if (prc == 0)
            j->drainer = true;
        else
            pc_jlog(j, PC_LOG_ERR, "%s: cannot start the drainer thread: %s", j->path,
                    strerror(prc));
    }
    pc_jpass_locked(j, true);
    if (j->drc != 0) {
        pc_jlog(j, PC_LOG_ERR, "%s: %s%s", j->path, j->derr,
                pc_jhealth_failing(j) ? "; writes are refused until it recovers" : "");
        rc = j->drc;
        j->drc = 0;
        j->derr[0] = '\0';
    }
    if (j->recovered) {
        pc_jlog(j, PC_LOG_WARN, "%s: writing again: writes resume", j->path);
        j->recovered = false;
    }
    pthread_mutex_unlock(&j->dmu);
    return rc;
}

void pc_jdrainer_stop(pc_journal *j)
{
    if (j->drainer) {
        atomic_store(&j->dstop, true);
        pc_jdrainer_wake(j);
        pthread_join(j->dthr, NULL);
        j->drainer = false;
    }
}

void pc_jdrainer_free(pc_journal *j)
{
    if (j->dfd != NULL)
        for (size_t i = 0; i < (size_t)j->nslots * PC_MAX_COLLECTIONS; i++)
            pc_jfd_close(&j->dfd[i]);
    free(j->dfd);
    j->dfd = NULL;
    pc_jdio_free(&j->dio);
    free(j->synced);
    j->synced = NULL;
    j->nsynced = j->capsynced = 0;
}
