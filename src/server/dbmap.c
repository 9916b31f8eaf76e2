/*
 * dbmap.c - which collection each SELECT index names, and SWAPDB, which
 * exchanges two of them for every client of every worker at one instant
 * (docs/pcached.md §3.1, "SWAPDB").
 *
 * A database index is a name for a collection (select_collections). SWAPDB
 * a b swaps the names: the two collections keep their data, their journal,
 * their snapshots and their eviction policy, and index a now names what b
 * named. The map lives in shared memory (struct srv_dbmap_shm); each worker
 * keeps a copy (w->dbcoll, and each connection's c->coll) that it refreshes
 * at a command boundary when the map's generation changed. The engine and
 * its lock-free read path are untouched: a command resolves its database
 * once, before it runs.
 *
 * The exchange is atomic across workers: no command sees the new map while
 * a command that resolved the old one is still running, in any worker. The
 * protocol, with gen even while the map is stable:
 *   worker   at the start of each event-loop turn stores its map's gen into
 *            its wstats line (seen), then a seq_cst fence; before each
 *            command it loads gen (relaxed): equal to its own, it runs the
 *            command; else it stores seen = IDLE, waits while gen is odd,
 *            copies the map, stores seen = gen, fence, and checks gen again.
 *            Before epoll_wait it stores seen = IDLE (release).
 *   swapper  takes owner (CAS 0 -> its pid), records the pair and their old
 *            collections, makes gen odd, fence, then waits until every other
 *            worker's seen is IDLE (it has no command of the old map running
 *            and will wait before its next one); writes the two entries;
 *            stores gen + 2 (release); releases owner.
 * The store-fence-load on both sides (a store-buffering pattern) means that
 * either the swapper sees a worker's seen, and waits for it, or that worker
 * sees the odd gen before it runs a command. A worker that dies is IDLE from
 * the master's reap on; a swapper that dies before it published the new map
 * (gen still odd) is undone by the master (owner is its pid: the two entries
 * restored, gen made even), so nothing stays wedged and no command saw a map
 * that was then taken back.
 */
#include "resp.h"

#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DBMAP_IDLE UINT64_MAX /* seen: no command of any map running */
#define DBMAP_WAIT_MS 10000   /* a swapper waits this long for the other workers */

static int coll_index(pc_cache *cache, const pc_coll *coll)
{
    for (unsigned i = 0; i < pc_coll_count(cache); i++)
        if (pc_coll_at(cache, i) == coll)
            return (int)i;
    return 0;
}

void srv_dbmap_setup(srv *s)
{
    struct srv_dbmap_shm *m = &s->shm->dbmap;
    for (unsigned d = 0; d < s->ndbs; d++)
        atomic_store(&m->coll[d], (uint32_t)coll_index(s->cache, s->dbs[d]));
    atomic_store(&m->owner, 0);
    atomic_store(&m->gen, 0);
    for (unsigned i = 0; i < SRV_MAX_WORKERS; i++)
        atomic_store(&s->shm->wstats[i].dbmap_seen, DBMAP_IDLE);
}

void srv_dbmap_worker_gone(srv *s, unsigned slot, int64_t pid)
{
    struct srv_dbmap_shm *m = &s->shm->dbmap;
    atomic_store_explicit(&s->shm->wstats[slot].dbmap_seen, DBMAP_IDLE, memory_order_release);
    if (pid <= 0 || atomic_load(&m->owner) != pid)
        return;
    uint64_t g = atomic_load(&m->gen);
    if (g & 1) { /* died mid-swap: nobody got +OK; the map goes back */
        atomic_store(&m->coll[m->a], m->old_a);
        atomic_store(&m->coll[m->b], m->old_b);
        atomic_store_explicit(&m->gen, g + 1, memory_order_release);
        srv_log(PC_LOG_WARN, "worker %u died during SWAPDB %u %u: the swap was undone", slot, m->a,
                m->b);
    }
    atomic_store_explicit(&m->owner, 0, memory_order_release);
}

/* Takes the map of generation g (even) into the worker's copy: the
 * database's collection, its management handle (PERF.<NAME>'s default
 * collection), and every connection's c->coll. Watches on a database whose
 * collection changed are broken, as SWAPDB touches the watched keys. */
static void dbmap_apply(srv_worker *w, uint64_t g, const uint32_t *coll)
{
    srv *s = w->s;
    uint64_t changed = 0;
    for (unsigned d = 0; d < s->ndbs; d++) {
        pc_coll *pc = pc_coll_at(s->cache, coll[d]);
        if (pc == NULL)
            continue;
        if (pc != w->dbcoll[d])
            changed |= 1ull << d;
        w->dbcoll[d] = pc;
        for (unsigned k = 0; k < s->ndbs; k++) /* a handle made for that collection */
            if (s->dbs[k] == pc)
                w->mgmt_db[d] = w->mgmt_cfg[k];
    }
    w->dbmap_gen = g;
    if (changed == 0)
        return;
    for (conn *c = w->conns; c != NULL; c = c->next) {
        c->coll = w->dbcoll[c->db];
        if (c->txn != NULL)
            cmd_txn_dbs_changed(c, changed);
    }
}

static void pause_briefly(unsigned spins)
{
    if (spins < 64) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 200 * 1000};
    nanosleep(&ts, NULL);
}

void srv_dbmap_refresh(srv_worker *w)
{
    struct srv_dbmap_shm *m = &w->s->shm->dbmap;
    _Atomic uint64_t *seen = &w->st->dbmap_seen;
    for (unsigned spins = 0;; spins++) {
        uint64_t g = atomic_load_explicit(&m->gen, memory_order_acquire);
        if (g & 1) { /* a swap in progress: nothing of ours runs until it is done */
            atomic_store_explicit(seen, DBMAP_IDLE, memory_order_release);
            pause_briefly(spins);
            continue;
        }
        uint32_t coll[SRV_MAX_DBS];
        for (unsigned d = 0; d < w->s->ndbs; d++)
            coll[d] = atomic_load_explicit(&m->coll[d], memory_order_relaxed);
        atomic_store_explicit(seen, g, memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&m->gen, memory_order_relaxed) != g)
            continue; /* a swapper started meanwhile: it may not have seen us */
        dbmap_apply(w, g, coll);
        return;
    }
}

void srv_dbmap_turn_begin(srv_worker *w)
{
    atomic_store_explicit(&w->st->dbmap_seen, w->dbmap_gen, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
}

void srv_dbmap_turn_end(srv_worker *w)
{
    atomic_store_explicit(&w->st->dbmap_seen, DBMAP_IDLE, memory_order_release);
}

void srv_dbmap_worker_init(srv_worker *w)
{
    srv_dbmap_turn_end(w);
    for (unsigned d = 0; d < w->s->ndbs; d++) {
        w->dbcoll[d] = w->s->dbs[d];
        w->mgmt_db[d] = w->mgmt_cfg[d];
    }
    w->dbmap_gen = UINT64_MAX - 1; /* even, never published: the first command refreshes */
}

/* Waits until no other worker runs a command of the old map; 0, or -1 with
 * *slot the worker still busy at the deadline. */
static int wait_others(srv_worker *w, unsigned *slot)
{
    int64_t deadline = pc_mono_ms() + DBMAP_WAIT_MS;
    for (unsigned i = 0; i < w->s->cfg.workers; i++) {
        if (i == w->slot)
            continue;
        _Atomic uint64_t *seen = &w->s->shm->wstats[i].dbmap_seen;
        for (unsigned spins = 0; atomic_load_explicit(seen, memory_order_acquire) != DBMAP_IDLE;
             spins++) {
            if (pc_mono_ms() > deadline) {
                *slot = i;
                return -1;
            }
            pause_briefly(spins);
        }
    }
    return 0;
}

/* Why db's collection cannot be swapped (a restart would load each
 * persisted collection under the index the configuration gives it, so an
 * acknowledged swap would not survive), or NULL. */
static const char *persisted(srv *s, pc_coll *coll)
{
    if (pc_coll_hook_word(coll) != 0)
        return "journaled";
    if (s->persist != NULL && pc_persist_is_persisted(s->persist, coll))
        return "in persist_collections";
    return NULL;
}

/* Exchanges the collections of databases a and b. 0, or -1 with the error
 * replied. */
static int dbmap_swap(srv_worker *w, conn *c, unsigned a, unsigned b)
{
    struct srv_dbmap_shm *m = &w->s->shm->dbmap;
    int64_t me = (int64_t)getpid(), zero = 0;
    if (!atomic_compare_exchange_strong(&m->owner, &zero, me)) {
        /* another worker swaps: step aside (IDLE, running nothing) until it is done */
        srv_dbmap_turn_end(w);
        for (unsigned spins = 0;; spins++) {
            zero = 0;
            if (atomic_compare_exchange_strong(&m->owner, &zero, me))
                break;
            pause_briefly(spins);
        }
    }
    srv_dbmap_refresh(w); /* the map as the last swap left it */
    for (int k = 0; k < 2; k++) {
        pc_coll *coll = w->dbcoll[k == 0 ? a : b];
        const char *why = persisted(w->s, coll);
        if (why != NULL) {
            atomic_store_explicit(&m->owner, 0, memory_order_release);
            reply_error(c,
                        "ERR SWAPDB is refused for persisted collections: '%s' (db %u) is %s, "
                        "and a restart loads each collection under its configured index",
                        pc_coll_name(coll), k == 0 ? a : b, why);
            return -1;
        }
    }
    uint64_t g = w->dbmap_gen;
    m->a = a;
    m->b = b;
    m->old_a = atomic_load(&m->coll[a]);
    m->old_b = atomic_load(&m->coll[b]);
    atomic_store(&m->gen, g + 1); /* seq_cst: ordered before the loads of seen */
    atomic_thread_fence(memory_order_seq_cst);
    unsigned busy = 0;
    int rc = wait_others(w, &busy);
    if (rc == 0) {
        atomic_store_explicit(&m->coll[a], m->old_b, memory_order_relaxed);
        atomic_store_explicit(&m->coll[b], m->old_a, memory_order_relaxed);
    }
    atomic_store_explicit(&m->gen, g + 2, memory_order_release);
    atomic_store_explicit(&m->owner, 0, memory_order_release);
    srv_dbmap_refresh(w);
    if (rc != 0)
        reply_error(c,
                    "ERR SWAPDB gave up: worker %u has been running one command for more than "
                    "%d ms; nothing was swapped",
                    busy, DBMAP_WAIT_MS);
    return rc;
}

static int db_arg(conn *c, const char *p, size_t n, const char *which, int64_t *out)
{
    if (arg_i64(p, n, out) != 0 || *out < INT32_MIN || *out > INT32_MAX) {
        reply_error(c, "ERR invalid %s DB index", which); /* Redis: one text for both */
        return -1;
    }
    return 0;
}

void cmd_swapdb(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)argc;
    int64_t a, b;
    if (db_arg(c, argv[1], argl[1], "first", &a) != 0 ||
        db_arg(c, argv[2], argl[2], "second", &b) != 0)
        return;
    if (a < 0 || b < 0 || a >= (int64_t)w->s->ndbs || b >= (int64_t)w->s->ndbs) {
        reply_error(c, "ERR DB index is out of range");
        return;
    }
    if (a == b) {
        reply_ok(c);
        return;
    }
    if (dbmap_swap(w, c, (unsigned)a, (unsigned)b) == 0)
        reply_ok(c);
}
