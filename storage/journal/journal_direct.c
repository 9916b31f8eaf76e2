/*
 * journal_direct.c - the drainer's direct writes (docs/journal-format.md
 * §6.2, "Direct writes"): a run's whole blocks go to the segment with
 * O_DIRECT from an aligned bounce buffer; only its partial blocks, at
 * either end, go through the page cache.
 *
 * Why: in everysec the drainer thread copies every record into the page
 * cache and the kernel's writeback then writes those pages out, both on the
 * CPUs the workers serve from. A buffered append pays per page for the
 * folio, its dirtying and the file system's delayed allocation, and again
 * for the writeback; a direct write of the same bytes is one user-space
 * copy into the bounce buffer (the records and their sums are not
 * contiguous in the ring) and a DMA from it. The everysec drain measured
 * about a quarter of the buffered path's CPU (benchmarks.md, "The journal
 * in pcached").
 *
 * Invariants:
 *   - every block of a segment is written one way only: the blocks a run
 *     covers whole by O_DIRECT, the partial ones (the one holding the
 *     segment's end, the one the run ends in) through the page cache. So a
 *     direct write never meets a dirty page cache page of its range, and a
 *     reader through the page cache sees what was written either way (the
 *     kernel drops cached pages of a direct write's range).
 *   - the file's size stays the exact end of its last whole record: the
 *     direct part ends on a block boundary and the buffered tail extends
 *     the file to the run's end. No padding reaches the file.
 *   - a failure cuts the file back to where the run started, as the
 *     buffered writer does (§4: no partial record in the middle).
 *   - the sums of the records go to the file as before: nothing here writes
 *     the ring.
 * No allocation happens here: the buffer and the run's room are the
 * drainer's, allocated before any lock (pc_jdio_alloc).
 */
#include "journal_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PC_JDIO_BYTES (1u << 20) /* the bounce buffer: the most one direct write carries */
#define PC_JDIO_RECS 8192u       /* records a drainer's run may hold */
#define PC_JDIO_ALIGN 4096u      /* the block, at least: covers every device's logical block */

int pc_jdio_alloc(struct pc_jdio *d)
{
    if (d->buf != NULL)
        return 0;
    long pg = sysconf(_SC_PAGESIZE);
    size_t a = pg > (long)PC_JDIO_ALIGN ? (size_t)pg : PC_JDIO_ALIGN;
    void *buf = NULL;
    if (posix_memalign(&buf, a, PC_JDIO_BYTES) != 0)
        return PC_EHEAP;
    d->iov = malloc(2 * (size_t)PC_JDIO_RECS * sizeof *d->iov);
    d->sum = malloc((size_t)PC_JDIO_RECS * sizeof *d->sum);
    if (d->iov == NULL || d->sum == NULL) {
        free(buf);
        free(d->iov);
        free(d->sum);
        d->iov = NULL;
        d->sum = NULL;
        return PC_EHEAP;
    }
    d->buf = buf;
    d->cap = PC_JDIO_BYTES / a * a;
    d->align = a;
    d->recs = PC_JDIO_RECS;
    return 0;
}

void pc_jdio_free(struct pc_jdio *d)
{
    free(d->buf);
    free(d->iov);
    free(d->sum);
    bool off = d->off;
    *d = (struct pc_jdio){.off = off};
}

/* A read position in a run's iovecs. */
struct pc_jcur {
    const struct iovec *iov;
    size_t i; /* the iovec */
    size_t k; /* bytes of it already taken */
};

static void pc_jcur_copy(struct pc_jcur *c, uint8_t *dst, size_t len)
{
    while (len > 0) {
        const struct iovec *v = &c->iov[c->i];
        size_t take = v->iov_len - c->k;
        if (take > len)
            take = len;
        memcpy(dst, (const uint8_t *)v->iov_base + c->k, take);
        dst += take;
        len -= take;
        c->k += take;
        if (c->k == v->iov_len) {
            c->i++;
            c->k = 0;
        }
    }
}

/* Writes len bytes at off; 0 or the errno (ENOSPC for a write that wrote
 * nothing). A direct write may only continue after a short write that
 * ended on a block boundary. */
static int pc_jpwrite_all(int fd, const uint8_t *p, size_t len, uint64_t off, size_t align)
{
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0 || (align != 0 && (size_t)n % align != 0))
            return ENOSPC;
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

int pc_jrun_write_direct(struct pc_jdio *d, struct pc_jfd *f, const struct pc_jrun *run,
                         uint64_t at, struct pc_jioerr *e, bool *cut_failed)
{
    const size_t A = d->align;
    struct pc_jcur cur = {.iov = run->iov};
    size_t left = run->bytes;
    uint64_t off = at;
    int err = 0;
    bool direct_refused = false;
    /* up to the first block boundary: the block holding the segment's end */
    size_t part = (size_t)((A - off % A) % A);
    if (part > left)
        part = left;
    if (part > 0) {
        pc_jcur_copy(&cur, d->buf, part);
        err = pc_jpwrite_all(f->fd, d->buf, part, off, 0);
        if (err == 0) {
            off += part;
            left -= part;
        }
    }
    /* the whole blocks */
    while (err == 0 && left >= A) {
        size_t n = left / A * A;
        if (n > d->cap)
            n = d->cap;
        pc_jcur_copy(&cur, d->buf, n);
        err = pc_jpwrite_all(f->dio, d->buf, n, off, A);
        if (err == EINVAL)
            direct_refused = true; /* the file system's alignment is another */
        if (err == 0) {
            off += n;
            left -= n;
        }
    }
    /* the partial block the run ends in */
    if (err == 0 && left > 0) {
        pc_jcur_copy(&cur, d->buf, left);
        err = pc_jpwrite_all(f->fd, d->buf, left, off, 0);
        if (err == 0)
            off += left;
    }
    if (err == 0)
        return 0;
    /* nothing past at stays: the next attempt writes the same bytes there */
    *cut_failed = ftruncate(f->fd, (off_t)at) != 0;
    if (direct_refused) {
        d->off = true;
        return 1;
    }
    if (e->err == 0) {
        e->err = err;
        snprintf(e->what, sizeof e->what, "write");
    }
    return PC_EIO;
}
