/*
 * clients_shm.c - the client tables: every worker publishes its
 * connections in shared memory so CLIENT LIST and CLIENT KILL run by any
 * worker see and close the connections of all of them (docs/pcached.md,
 * "Connections"; the layout in pcached.h, srv_client_shm).
 *
 * One writer per table (the worker of its slot). An entry's plain fields
 * are written inside a seqlock (seq odd while written); readers retry a
 * torn copy (yielding after a few tries, so an owner descheduled in the
 * middle of a write can finish) for at most SRV_CTAB_READ_MS and skip the
 * entry after that. A
 * kill is a store of the victim's id into kill_id and a write of the owner's
 * kill eventfd; the owner closes the connection when it sees its own id
 * there (an entry reused by another connection ignores a stale mark).
 */
#include "resp.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#define SRV_CTAB_READ_MS 50 /* the longest a reader waits for one entry */

static struct srv_client_shm *entry(const srv *s, unsigned slot, unsigned i)
{
    return &s->ctab[(size_t)slot * s->ctab_cap + i];
}

int srv_ctab_setup(srv *s)
{
    unsigned cap = s->cfg.maxclients < SRV_CTAB_MAX ? s->cfg.maxclients : SRV_CTAB_MAX;
    size_t hdr = sizeof(struct srv_ctab_hdr) * SRV_MAX_WORKERS;
    size_t len = hdr + sizeof(struct srv_client_shm) * (size_t)cap * s->cfg.workers;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        srv_log(PC_LOG_ERR, "cannot map the client tables (%zu bytes): %m", len);
        return -1;
    }
    s->ctab_hdr = p;
    s->ctab = (struct srv_client_shm *)((char *)p + hdr);
    s->ctab_cap = cap;
    for (unsigned i = 0; i < s->cfg.workers; i++)
        if ((s->kill_efd[i] = eventfd(0, EFD_NONBLOCK)) < 0) {
            srv_log(PC_LOG_ERR, "eventfd: %m");
            return -1;
        }
    return 0;
}

/* The worker's free entries: a stack of indexes, lowest on top. */
static uint32_t *free_ix;
static unsigned nfree;

void srv_ctab_clear(srv *s, unsigned slot)
{
    struct srv_ctab_hdr *h = &s->ctab_hdr[slot];
    unsigned hi = atomic_load(&h->hi);
    for (unsigned i = 0; i < hi && i < s->ctab_cap; i++) {
        struct srv_client_shm *e = entry(s, slot, i);
        atomic_store(&e->id, 0);
        atomic_store(&e->kill_id, 0);
        atomic_store(&e->seq, 0);
    }
    atomic_store(&h->hi, 0);
}

int srv_ctab_worker_init(srv_worker *w)
{
    srv *s = w->s;
    /* a previous incarnation's entries are ghosts: free them first, so no
     * reader sees them once we accept (the master cleared them when it
     * reaped that incarnation; this covers a master that could not) */
    srv_ctab_clear(s, w->slot);
    free_ix = malloc(sizeof *free_ix * (s->ctab_cap ? s->ctab_cap : 1));
    if (free_ix == NULL)
        return -1;
    nfree = s->ctab_cap;
    for (unsigned i = 0; i < nfree; i++)
        free_ix[i] = nfree - 1 - i;
    return 0;
}

/* Writes c's plain fields into its entry inside the seqlock. */
static void write_fields(conn *c)
{
    struct srv_client_shm *e = c->pub;
    uint32_t q = atomic_load_explicit(&e->seq, memory_order_relaxed);
    atomic_store_explicit(&e->seq, q + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    e->fd = (uint32_t)c->fd;
    e->born_ms = c->born_ms;
    e->db = c->db;
    e->proto = (uint32_t)c->proto;
    memcpy(e->addr, c->addr, sizeof e->addr);
    memcpy(e->laddr, c->laddr, sizeof e->laddr);
    size_t n = c->name != NULL ? strlen(c->name) : 0;
    e->name_len = (uint32_t)n;
    size_t k = n < SRV_CTAB_NAME - 1 ? n : SRV_CTAB_NAME - 1;
    memcpy(e->name, c->name != NULL ? c->name : "", k);
    e->name[k] = '\0';
    atomic_store_explicit(&e->seq, q + 2, memory_order_release);
}

void srv_ctab_publish(srv_worker *w, conn *c)
{
    c->pub = NULL;
    if (nfree == 0)
        return; /* listed by its own worker only (docs) */
    uint32_t i = free_ix[--nfree];
    struct srv_ctab_hdr *h = &w->s->ctab_hdr[w->slot];
    if (i >= atomic_load_explicit(&h->hi, memory_order_relaxed))
        atomic_store_explicit(&h->hi, i + 1, memory_order_release);
    c->pub = entry(w->s, w->slot, i);
    atomic_store_explicit(&c->pub->kill_id, 0, memory_order_relaxed);
    atomic_store_explicit(&c->pub->act, 0, memory_order_relaxed);
    write_fields(c);
    atomic_store_explicit(&c->pub->id, c->id, memory_order_release);
}

void srv_ctab_update(conn *c)
{
    if (c->pub != NULL)
        write_fields(c);
}

void srv_ctab_unpublish(srv_worker *w, conn *c)
{
    if (c->pub == NULL)
        return;
    atomic_store_explicit(&c->pub->id, 0, memory_order_release);
    free_ix[nfree++] = (uint32_t)(c->pub - entry(w->s, w->slot, 0));
    c->pub = NULL;
}

int srv_ctab_read(const srv *s, unsigned slot, unsigned i, struct srv_client_shm *out)
{
    struct srv_client_shm *e = entry(s, slot, i);
    int64_t deadline = 0;
    for (unsigned tries = 0;; tries++) {
        if (tries >= 64) { /* the owner may be descheduled mid-write: let it run */
            int64_t now = pc_mono_ms();
            if (deadline == 0)
                deadline = now + SRV_CTAB_READ_MS;
            else if (now > deadline)
                return 0;
            sched_yield();
        }
        uint64_t id = atomic_load_explicit(&e->id, memory_order_acquire);
        if (id == 0)
            return 0;
        uint32_t q1 = atomic_load_explicit(&e->seq, memory_order_acquire);
        if (q1 & 1u)
            continue;
        out->fd = e->fd;
        out->born_ms = e->born_ms;
        out->db = e->db;
        out->proto = e->proto;
        out->name_len = e->name_len;
        memcpy(out->addr, e->addr, sizeof out->addr);
        memcpy(out->laddr, e->laddr, sizeof out->laddr);
        memcpy(out->name, e->name, sizeof out->name);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&e->seq, memory_order_relaxed) != q1 ||
            atomic_load_explicit(&e->id, memory_order_relaxed) != id)
            continue;
        /* a torn copy never gets here; terminate the strings anyway */
        out->addr[sizeof out->addr - 1] = out->laddr[sizeof out->laddr - 1] = '\0';
        out->name[sizeof out->name - 1] = '\0';
        atomic_store_explicit(&out->id, id, memory_order_relaxed);
        atomic_store_explicit(&out->act, atomic_load_explicit(&e->act, memory_order_relaxed),
                              memory_order_relaxed);
        return 1;
    }
}

void srv_ctab_mark_kill(srv *s, unsigned slot, unsigned i, uint64_t id)
{
    atomic_store_explicit(&entry(s, slot, i)->kill_id, id, memory_order_release);
    uint64_t one = 1;
    ssize_t r = write(s->kill_efd[slot], &one, sizeof one);
    (void)r; /* fails only at 2^64-1 pending: the owner's tick looks anyway */
}

void srv_ctab_reap(srv_worker *w, void (*close_fn)(srv_worker *, conn *))
{
    uint64_t v;
    while (read(w->s->kill_efd[w->slot], &v, sizeof v) == (ssize_t)sizeof v) {
    }
    for (conn *c = w->conns; c != NULL;) {
        conn *next = c->next;
        if (c->pub != NULL && atomic_load_explicit(&c->pub->kill_id, memory_order_acquire) == c->id)
            close_fn(w, c);
        c = next;
    }
}
