/*
 * journal_commit.c - group commit of the always mode
 * (docs/journal-format.md §6.6). With pc_journal_defer_sync on, the hook
 * writes each always record to this process's segment (journal_ring.c,
 * pc_jown_commit with stage) and notes the segment in j->pend; a batch
 * makes every noted segment durable with one fdatasync each.
 *
 * A commit is three steps so that the fdatasync can run in another thread
 * while the host's loop goes on staging the next batch:
 *   start  (the handle's thread, under the slot's lock): takes the noted
 *          segments into the batch - a descriptor of its own for each
 *          (dup, or opened by name for one that is no longer current), and
 *          the append offset it will cover - and empties j->pend;
 *   sync   (any thread, touches only the batch): fdatasync of each
 *          descriptor, fsync of the directory when a segment is new;
 *   finish (the handle's thread, under the slot's lock): records what is
 *          durable (struct pc_jseg_shm.synced, dir_synced) or, on failure,
 *          abandons the segment as the synchronous path does, marks the
 *          journal failing and fails the next batch too: records staged
 *          after start went to the same segment, and after a failed
 *          fdatasync the kernel may have dropped their pages while a later
 *          fdatasync reports success.
 *          A batch finished without its sync is synced by finish itself.
 * Records staged after start belong to the next batch: the batch covers
 * the offsets it read at start, and appends after them only make it cover
 * more, never less.
 */
#include "journal_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pc_journal_batch {
    unsigned n;
    int dirfd;      /* a dup of the journal directory when a segment is new; -1 = none */
    int err;        /* errno of the first failure (start or sync), 0 = none */
    char what[160]; /* what failed, for the log line of finish */
    bool prev_err;  /* a segment of an earlier batch could not be made durable */
    bool synced;    /* pc_journal_batch_sync ran since start */
    uint64_t staged;
    struct pc_jbseg {
        int fd;       /* -1 = nothing to sync (a retired segment) */
        bool current; /* the slot's current segment of coll at start */
        bool dir;     /* the directory must be synced for it */
        unsigned coll;
        int32_t n;
        uint64_t epoch;
        uint64_t bytes; /* the append offset at start: durable up to here after sync */
    } seg[PC_MAX_COLLECTIONS];
};

int pc_journal_batch_new(pc_journal_batch **out)
{
    if (out == NULL)
        return PC_EINVAL;
    pc_journal_batch *b = calloc(1, sizeof *b);
    if (b == NULL)
        return PC_EHEAP;
    b->dirfd = -1;
    *out = b;
    return 0;
}

static void pc_jbatch_close(pc_journal_batch *b)
{
    for (unsigned i = 0; i < b->n; i++) {
        if (b->seg[i].fd >= 0)
            close(b->seg[i].fd);
        b->seg[i].fd = -1;
    }
    if (b->dirfd >= 0)
        close(b->dirfd);
    b->dirfd = -1;
}

void pc_journal_batch_free(pc_journal_batch *b)
{
    if (b == NULL)
        return;
    pc_jbatch_close(b);
    free(b);
}

uint64_t pc_journal_batch_records(const pc_journal_batch *b)
{
    return b != NULL ? b->staged : 0;
}

static void pc_jbatch_err(pc_journal_batch *b, int err, const char *what)
{
    if (b->err != 0)
        return;
    b->err = err != 0 ? err : EIO;
    snprintf(b->what, sizeof b->what, "%s", what);
}

int pc_jbatch_start(pc_journal *j, pc_journal_batch *b)
{
    pc_jbatch_close(b);
    b->n = 0;
    b->err = 0;
    b->synced = false;
    b->what[0] = '\0';
    b->prev_err = j->commit_err;
    b->staged = j->staged;
    j->commit_err = false;
    j->staged = 0;
    struct pc_jslot_shm *s = j->slot;
    if (s == NULL)
        return 0; /* nothing was ever staged by this process */
    if (pc_jslot_lock(s) != 0) {
        pc_jbatch_err(b, EDEADLK, "locking the ring");
        return 0;
    }
    bool dir = false;
    for (unsigned c = 0; c < j->ncoll; c++) {
        struct pc_jpend *p = &j->pend[c];
        if (!p->on)
            continue;
        p->on = false;
        const struct pc_jseg_shm *g = &s->seg[c];
        PC_ASSERT(j, J2, b->n < j->ncoll && b->n < PC_MAX_COLLECTIONS);
        struct pc_jbseg *e = &b->seg[b->n++];
        *e = (struct pc_jbseg){.fd = -1, .coll = c, .n = p->n, .epoch = p->epoch};
        e->current = g->n == p->n && g->epoch == p->epoch;
        /* not current: a save or a failed write replaced it after its last
         * record (the hook synced it then); bytes 0 = nothing to record */
        e->bytes = e->current ? g->bytes : 0;
        e->dir = !e->current || !g->dir_synced;
        const struct pc_jfd *f = &j->own[c];
        if (e->current && f->fd >= 0 && f->pid == (uint32_t)j->pid && f->epoch == p->epoch &&
            f->n == p->n) {
            e->fd = fcntl(f->fd, F_DUPFD_CLOEXEC, 0);
            if (e->fd < 0)
                pc_jbatch_err(b, errno, "dup of a segment descriptor");
        } else {
            char name[160];
            pc_jseg_name(name, sizeof name, pc_coll_name(j->pcs[c].coll), p->epoch,
                         (uint32_t)j->pid, p->n);
            e->fd = openat(j->dirfd, name, O_WRONLY | O_CLOEXEC);
            if (e->fd < 0 && errno == ENOENT)
                e->dir = false; /* retired: a committed snapshot covers its records */
            else if (e->fd < 0)
                pc_jbatch_err(b, errno, "opening a segment");
        }
        dir = dir || e->dir;
    }
    pc_jslot_unlock(s);
    if (dir && (b->dirfd = fcntl(j->dirfd, F_DUPFD_CLOEXEC, 0)) < 0)
        pc_jbatch_err(b, errno, "dup of the journal directory");
    return 0;
}

void pc_journal_batch_sync(pc_journal_batch *b)
{
    if (b == NULL)
        return;
    b->synced = true;
    if (b->err != 0)
        return;
    for (unsigned i = 0; i < b->n && b->err == 0; i++)
        if (b->seg[i].fd >= 0 && fdatasync(b->seg[i].fd) != 0)
            pc_jbatch_err(b, errno, "fdatasync");
    if (b->err == 0 && b->dirfd >= 0 && fsync(b->dirfd) != 0)
        pc_jbatch_err(b, errno, "fsync of the directory");
    pc_jbatch_close(b);
}

int pc_jbatch_finish(pc_journal *j, pc_journal_batch *b)
{
    if (!b->synced)
        pc_journal_batch_sync(b); /* finished without its sync: synced here */
    pc_jbatch_close(b);
    struct pc_jslot_shm *s = j->slot;
    if (s != NULL && b->n > 0 && pc_jslot_lock(s) == 0) {
        for (unsigned i = 0; i < b->n; i++) {
            const struct pc_jbseg *e = &b->seg[i];
            struct pc_jseg_shm *g = &s->seg[e->coll];
            if (!e->current || g->n != e->n || g->epoch != e->epoch)
                continue;
            PC_ASSERT(j, J1, e->bytes <= g->bytes);
            if (b->err != 0) { /* as pc_jseg_sync_locked: the pages may be gone */
                g->n = -1;
                pc_jfd_close(&j->own[e->coll]);
                continue;
            }
            if (g->synced < e->bytes)
                g->synced = e->bytes;
            if (e->dir)
                g->dir_synced = 1;
        }
        pc_jslot_unlock(s);
    }
    if (b->err != 0) {
        pc_jhealth_fail(j, b->err);
        if (!j->failing)
            pc_jlog(j, PC_LOG_ERR, "%s: %s failed: %s; writes are refused until it recovers",
                    j->path, b->what, strerror(b->err));
        j->failing = true;
        if (j->staged > 0)
            j->commit_err = true; /* see the top of the file */
    }
    return b->err != 0 || b->prev_err ? PC_EIO : 0;
}
