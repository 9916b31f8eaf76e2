/*
 * sync.c - the shared-database read-replica refresh (perf_sync;
 * docs/sync.md): the authority's side (save + record the source +
 * push), the replica's side (notices, the rate-limited check, the poll,
 * the reload in sync_reload.c) and the facts perf_stats reports.
 *
 * Processes. A notice may arrive in any process (OpenSIPS: whichever
 * process the clusterer delivers to); the database work runs only in the
 * process that calls pc_persist_sync_tick (the host's maintenance process),
 * and perf_stats may run anywhere. So everything a second process must see
 * lives in pc_sync_coll_shm, one per collection, in a MAP_SHARED array made
 * by pc_persist_open before the host forks.
 *
 * Invariants:
 *  1. Data changes only by a reload, and a reload only applies a snapshot
 *     whose generation the database reports above the node's generation
 *     (read in the reload's own read transaction, with its rows).
 *  2. The node's generation (pc_persist_coll_shm.generation) never
 *     decreases through a reload (atomic max).
 *  3. A notice costs no database access by itself; a notice above the
 *     node's generation is checked at most once per sync_check_ms per
 *     collection, and a notice the database does not confirm is dropped
 *     after that one check (so a forged generation cannot keep costing).
 *  4. A node never reloads a generation whose source is its own node_id.
 */
#include "persist_int.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* One collection's sync facts, in shared memory. Counters and times are
 * atomics written by the ticking process (last_out_ms by the process that
 * runs perf_sync); source is guarded by the src_seq seqlock (odd = being
 * written; writers take it with a CAS, so two writers serialize). */
struct pc_sync_coll_shm {
    _Atomic int64_t last_out_ms, last_in_ms; /* wall clock, 0 = never */
    _Atomic uint64_t pending;                /* highest unconfirmed notice generation, 0 = none */
    _Atomic int64_t next_check_ms;           /* monotonic: the rate limit of notice checks */
    _Atomic uint64_t notices, checks, polls, rejected, reloads, pruned;
    _Atomic int32_t last_rc;
    _Atomic int32_t checker; /* pid checking / reloading the collection, 0 = none */
    _Atomic uint32_t src_seq;
    char source[PC_SYNC_NODE_MAX + 1];
};

/* A node id travels in datagrams and log lines: printable ASCII, no space. */
static bool sy_node_ok(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] <= ' ' || s[i] > '~')
            return false;
    return true;
}

/* Bounded: a writer killed between its two increments leaves the
 * sequence odd forever, so after SY_SPINS tries a writer takes the
 * sequence over and a reader returns what it copied (a name that may be
 * torn - a report, never a decision - rather than hanging perf_stats). */
#define SY_SPINS 100000
static void sy_set_source(struct pc_sync_coll_shm *st, const char *src)
{
    uint32_t seq = atomic_load_explicit(&st->src_seq, memory_order_relaxed), end;
    for (int i = 0;; i++) {
        if ((seq & 1u) == 0) {
            if (atomic_compare_exchange_weak_explicit(&st->src_seq, &seq, seq + 1,
                                                      memory_order_acq_rel, memory_order_relaxed)) {
                end = seq + 2;
                break;
            }
            continue; /* seq was reloaded by the failed CAS */
        }
        if (i >= SY_SPINS) { /* a dead writer's odd sequence: it stays odd while we write */
            end = seq + 1;
            break;
        }
        seq = atomic_load_explicit(&st->src_seq, memory_order_relaxed);
    }
    size_t n = strnlen(src, PC_SYNC_NODE_MAX);
    memcpy(st->source, src, n);
    memset(st->source + n, 0, sizeof st->source - n);
    atomic_store_explicit(&st->src_seq, end, memory_order_release);
}

static void sy_get_source(const struct pc_sync_coll_shm *st, char *out)
{
    for (int i = 0; i < SY_SPINS; i++) {
        uint32_t a = atomic_load_explicit(&st->src_seq, memory_order_acquire);
        memcpy(out, st->source, PC_SYNC_NODE_MAX + 1);
        atomic_thread_fence(memory_order_acquire);
        if ((a & 1u) == 0 && atomic_load_explicit(&st->src_seq, memory_order_relaxed) == a)
            break;
    }
    out[PC_SYNC_NODE_MAX] = '\0';
}

/* Invariant 2: the generation only moves up. */
static void sy_gen_max(struct pc_persist_coll_shm *ps, uint64_t gen)
{
    uint64_t cur = atomic_load(&ps->generation);
    while (cur < gen && !atomic_compare_exchange_weak(&ps->generation, &cur, gen))
        ;
}

static bool sy_capable(const pc_persist *p)
{
    return p->backend != NULL && p->backend->save_as != NULL && p->backend->generation != NULL &&
           p->backend->rows != NULL;
}

int pc_sync_open(pc_persist *p, const pc_persist_config *cfg, char *err, size_t errlen)
{
    const char *id = cfg->node_id != NULL ? cfg->node_id : "";
    size_t n = strlen(id);
    if (n > PC_SYNC_NODE_MAX || !sy_node_ok(id, n)) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen,
                     "node_id '%.80s': expected at most %u printable characters without spaces", id,
                     PC_SYNC_NODE_MAX);
        return PC_ECONFIG;
    }
    memcpy(p->node_id, id, n + 1);
    p->push = cfg->sync_push;
    p->push_ctx = cfg->sync_push_ctx;
    p->poll_ms = cfg->sync_poll_ms;
    p->check_ms = cfg->sync_check_ms != 0 ? cfg->sync_check_ms : 1000;
    p->next_poll_ms = pc_mono_ms() + p->poll_ms;
    p->sync = mmap(NULL, PC_MAX_COLLECTIONS * sizeof *p->sync, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p->sync == MAP_FAILED) {
        p->sync = NULL;
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "cannot map the sync state");
        return PC_ESYS;
    }
    return 0;
}

void pc_sync_close(pc_persist *p)
{
    if (p->sync != NULL)
        munmap(p->sync, PC_MAX_COLLECTIONS * sizeof *p->sync);
    p->sync = NULL;
}

void pc_sync_saved(pc_persist *p, pc_coll *coll, uint64_t gen)
{
    (void)gen; /* pc_persist_save_coll records it */
    sy_set_source(&p->sync[pp_index(p, coll)], p->node_id);
}

void pc_sync_note_failure(pc_persist *p, int rc)
{
    if (rc == PC_EIO || rc == PC_ESTORE)
        p->reopen = true;
}

void pc_sync_reopen_if_lost(pc_persist *p)
{
    if (!p->reopen || p->backend == NULL || p->db_url == NULL)
        return;
    void *h = NULL;
    char err[512];
    int rc = p->backend->open(p->db_url, &p->log, &h, err, sizeof err);
    if (rc != 0) {
        pc_log_emit(&p->log, PC_LOG_ERR, "pcache: reconnecting to the database failed: %s", err);
        return; /* still lost: the next use tries again */
    }
    p->backend->close(p->bh); /* in a forked child it leaves the parent's connection alone */
    p->bh = h;
    p->reopen = false;
    pc_log_emit(&p->log, PC_LOG_INFO, "pcache: reconnected to the database %s",
                p->backend->describe(h));
}

/* ---- the authority: perf_sync ------------------------------------------- */

int pc_persist_sync(pc_persist *p, pc_coll *coll, pc_sync_result *result)
{
    if (p == NULL || coll == NULL)
        return PC_EINVAL;
    pc_sync_result r;
    memset(&r, 0, sizeof r);
    pc_persist_result sr;
    int rc = pc_persist_save_coll(p, coll, &sr);
    if (rc != 0)
        return rc; /* nothing committed: the peers are not told anything */
    r.saved = sr.rows;
    const char *name = pc_coll_name(coll);
    if (!sy_capable(p)) {
        r.degraded = 1;
        snprintf(r.note, sizeof r.note,
                 "no shared SQL database (db_url is not an SQL store with sync): saved "
                 "locally, no peer notified");
    } else {
        r.generation = sr.generation;
        atomic_store(&p->sync[pp_index(p, coll)].last_out_ms, pc_wall_ms());
        r.peers = p->push != NULL ? p->push(p->push_ctx, name, r.generation, p->node_id) : 0;
        if (r.peers < 0) {
            r.degraded = 1;
            snprintf(r.note, sizeof r.note,
                     "saved, but notifying the peers failed (%s): replicas that poll pick up "
                     "generation %llu at their next poll",
                     pc_store_strerror(r.peers), (unsigned long long)r.generation);
        } else if (r.peers == 0) {
            r.degraded = 1;
            snprintf(r.note, sizeof r.note,
                     "no peers configured: saved to the database, nobody notified (replicas "
                     "that poll pick it up)");
        }
    }
    pc_log_emit(&p->log, r.degraded ? PC_LOG_WARN : PC_LOG_INFO,
                "pcache: sync of %s: %llu entries, generation %llu, %d peer(s) notified%s%s", name,
                (unsigned long long)r.saved, (unsigned long long)r.generation,
                r.peers > 0 ? r.peers : 0, r.degraded ? ": " : "", r.note);
    if (result != NULL)
        *result = r;
    return 0;
}

static const pc_mgmt_param sy_params[] = {
    {"collection", PC_MP_COLL_ALL, 0, NULL, 0, 0, "collection (omitted: every collection)"},
};

static int sy_cmd_sync(void *ctx, const pc_mgmt_call *call, const pc_result_ops *ops, void *rctx,
                       pc_mgmt_err *err)
{
    pc_persist *p = ctx;
    pc_coll *only = pc_mgmt_call_coll(call, 0);
    pc_sync_result res[PC_MAX_COLLECTIONS];
    unsigned idx[PC_MAX_COLLECTIONS], n = 0;
    const double t0 = pc_mono_sec();
    for (unsigned i = 0; i < pc_coll_count(p->cache) && n < PC_MAX_COLLECTIONS; i++) {
        pc_coll *coll = pc_coll_at(p->cache, i);
        if (only != NULL && coll != only)
            continue;
        int rc = pc_persist_sync(p, coll, &res[n]);
        if (rc != 0)
            return pc_mgmt_errorf(err, rc,
                                  "perf_sync: saving collection \"%s\" failed: %s (its previous "
                                  "generation stands, no peer was notified; %u collection(s) "
                                  "synced before it)%s%.300s",
                                  pc_coll_name(coll), pc_store_strerror(rc), n,
                                  p->backend != NULL ? ": " : "",
                                  p->backend != NULL ? p->backend->errmsg(p->bh) : "");
        idx[n++] = i;
    }
    const double secs = pc_mono_sec() - t0;
    uint64_t saved = 0, gen = 0;
    int peers = 0;
    const char *note = "";
    for (unsigned k = 0; k < n; k++) {
        saved += res[k].saved;
        gen = res[k].generation > gen ? res[k].generation : gen;
        peers = res[k].peers > peers ? res[k].peers : peers;
        if (res[k].degraded && note[0] == '\0')
            note = res[k].note;
    }
    int rc = ops->obj_begin(rctx, NULL);
    rc = rc ? rc : ops->u64(rctx, "collections", n);
    rc = rc ? rc : ops->u64(rctx, "saved", saved);
    rc = rc ? rc : ops->u64(rctx, "generation", gen);
    rc = rc ? rc : ops->i64(rctx, "peers", peers);
    rc = rc ? rc : ops->str(rctx, "source", p->node_id, strlen(p->node_id));
    rc = rc ? rc : ops->dbl(rctx, "duration", secs);
    if (note[0] != '\0')
        rc = rc ? rc : ops->str(rctx, "note", note, strlen(note));
    rc = rc ? rc : ops->arr_begin(rctx, "synced");
    for (unsigned k = 0; k < n && rc == 0; k++) {
        const char *name = pc_coll_name(pc_coll_at(p->cache, idx[k]));
        rc = ops->obj_begin(rctx, NULL);
        rc = rc ? rc : ops->str(rctx, "collection", name, strlen(name));
        rc = rc ? rc : ops->u64(rctx, "saved", res[k].saved);
        rc = rc ? rc : ops->u64(rctx, "generation", res[k].generation);
        rc = rc ? rc : ops->i64(rctx, "peers", res[k].peers);
        rc = rc ? rc : ops->obj_end(rctx);
    }
    rc = rc ? rc : ops->arr_end(rctx);
    rc = rc ? rc : ops->obj_end(rctx);
    return rc;
}

int pc_sync_register(pc_persist *p, pc_mgmt *m)
{
    pc_mgmt_cmd sync = {"perf_sync",
                        "save collections to the shared database (new generation) and tell "
                        "the peers to reload them",
                        sy_params,
                        1,
                        sy_cmd_sync,
                        p};
    return pc_mgmt_register(m, &sync);
}

/* ---- the replica: notices, checks, polls ------------------------------- */

int pc_persist_sync_notice(pc_persist *p, const char *coll, size_t len, uint64_t gen,
                           const char *source)
{
    if (p == NULL || coll == NULL || gen == 0)
        return PC_EINVAL;
    pc_coll *c;
    if (pc_coll_find(p->cache, coll, len, &c) != 0)
        return PC_ENOCOLL;
    unsigned i = pp_index(p, c);
    struct pc_sync_coll_shm *st = &p->sync[i];
    if (gen <= atomic_load(&p->shm[i].generation))
        return 0; /* a replay, or a notice of what we have: free */
    uint64_t cur = atomic_load(&st->pending);
    while (cur < gen && !atomic_compare_exchange_weak(&st->pending, &cur, gen))
        ;
    atomic_fetch_add(&st->notices, 1);
    (void)source; /* the database's source column is the one reported */
    return 0;
}

/* Two processes must never reload one collection at once (the prune of
 * an older snapshot would remove keys a newer one just stored), whatever a
 * host does: the check runs under a per-collection claim in shared memory.
 * A claim whose holder died is taken over. */
static bool sy_claim(struct pc_sync_coll_shm *st)
{
    int32_t me = (int32_t)getpid(), cur = 0;
    if (atomic_compare_exchange_strong(&st->checker, &cur, me) || cur == me)
        return true;
    if (kill((pid_t)cur, 0) != 0 && errno == ESRCH)
        return atomic_compare_exchange_strong(&st->checker, &cur, me);
    return false;
}

/* One check of collection i: read the database's generation; reload when it
 * is above ours. by_notice: the check answers a notice of generation
 * pending (dropped afterwards unless a newer one arrived meanwhile). */
static int sy_check(pc_persist *p, unsigned i, bool by_notice, uint64_t pending)
{
    pc_coll *coll = pc_coll_at(p->cache, i);
    const char *name = pc_coll_name(coll);
    struct pc_sync_coll_shm *st = &p->sync[i];
    uint64_t mine = atomic_load(&p->shm[i].generation), dbgen = 0;
    char src[PC_SYNC_NODE_MAX + 1] = "";
    atomic_fetch_add(by_notice ? &st->checks : &st->polls, 1);
    pc_sync_reopen_if_lost(p);
    int rc = p->backend->generation(p->bh, name, &dbgen, src, sizeof src);
    if (rc == PC_ENOTFOUND) { /* never saved: nothing to reload */
        dbgen = 0;
        rc = 0;
    }
    /* Invariant 4: never reload a generation this node made. Its copy was
     * that generation when it saved and may have moved on since; a restarted
     * authority (db_mode 0) polling its own last save would otherwise prune
     * what its clients wrote since the restart. */
    bool own = p->node_id[0] != '\0' && strcmp(src, p->node_id) == 0;
    if (rc == 0 && dbgen > mine && own) {
        pc_log_emit(&p->log, PC_LOG_DEBUG,
                    "pcache: sync: %s generation %llu in the database is this node's own save: "
                    "not reloaded",
                    name, (unsigned long long)dbgen);
    } else if (rc == 0 && dbgen > mine) {
        uint64_t gen = 0, loaded = 0, pruned = 0;
        rc = pc_sync_reload(p, coll, mine, &gen, src, sizeof src, &loaded, &pruned);
        if (rc == 0 && gen > mine) {
            sy_gen_max(&p->shm[i], gen);
            sy_set_source(st, src);
            atomic_store(&st->last_in_ms, pc_wall_ms());
            atomic_fetch_add(&st->reloads, 1);
            atomic_fetch_add(&st->pruned, pruned);
            pc_log_emit(&p->log, PC_LOG_INFO,
                        "pcache: sync: reloaded %s generation %llu (from node %s%s): %llu "
                        "entries, %llu pruned",
                        name, (unsigned long long)gen, src[0] != '\0' ? src : "unknown",
                        by_notice ? ", pushed" : ", polled", (unsigned long long)loaded,
                        (unsigned long long)pruned);
            pc_event_reloaded(coll, src);
            dbgen = gen;
        } else if (rc != 0) {
            pc_log_emit(&p->log, PC_LOG_ERR,
                        "pcache: sync: reloading %s failed: %s%s%.300s (generation %llu kept; "
                        "the next poll retries)",
                        name, pc_store_strerror(rc),
                        p->backend->errmsg(p->bh)[0] != '\0' ? ": " : "", p->backend->errmsg(p->bh),
                        (unsigned long long)mine);
        }
    } else if (rc != 0) {
        pc_log_emit(&p->log, PC_LOG_ERR,
                    "pcache: sync: reading the generation of %s failed: %s: %.300s", name,
                    pc_store_strerror(rc), p->backend->errmsg(p->bh));
    }
    atomic_store(&st->last_rc, rc);
    if (rc != 0)
        pc_sync_note_failure(p, rc);
    if (by_notice && rc == 0) {
        if (pending > dbgen) {
            atomic_fetch_add(&st->rejected, 1);
            pc_log_emit(&p->log, PC_LOG_WARN,
                        "pcache: sync: a notice of generation %llu for %s is not confirmed by the "
                        "database (generation %llu): ignored",
                        (unsigned long long)pending, name, (unsigned long long)dbgen);
        }
        /* invariant 3: dropped after one check, unless a newer one came in */
        uint64_t exp = pending;
        atomic_compare_exchange_strong(&st->pending, &exp, 0);
    }
    return rc;
}

int pc_persist_sync_tick(pc_persist *p)
{
    if (p == NULL)
        return PC_EINVAL;
    if (!sy_capable(p) || p->sync == NULL)
        return 0;
    int64_t now = pc_mono_ms();
    bool poll = p->poll_ms > 0 && now >= p->next_poll_ms;
    if (poll)
        p->next_poll_ms = now + p->poll_ms;
    int first = 0;
    for (unsigned i = 0; i < pc_coll_count(p->cache); i++) {
        struct pc_sync_coll_shm *st = &p->sync[i];
        uint64_t pending = atomic_load(&st->pending);
        bool notice = pending != 0;
        if (notice && pending <= atomic_load(&p->shm[i].generation)) {
            uint64_t exp = pending; /* overtaken by a reload or a save: nothing to check */
            atomic_compare_exchange_strong(&st->pending, &exp, 0);
            notice = false;
        }
        if (notice) {
            int64_t next = atomic_load(&st->next_check_ms);
            if (now < next)
                notice = false; /* rate limited: checked when the interval ends */
            else
                atomic_store(&st->next_check_ms, now + p->check_ms);
        }
        if (!notice && !poll)
            continue;
        if (!sy_claim(st))
            continue; /* another process checks it now; a notice stays pending */
        int rc = sy_check(p, i, notice, notice ? pending : 0);
        atomic_store(&st->checker, 0);
        if (rc != 0 && first == 0)
            first = rc;
    }
    return first;
}

int pc_persist_sync_due_ms(pc_persist *p)
{
    if (p == NULL || !sy_capable(p) || p->sync == NULL)
        return -1;
    int64_t now = pc_mono_ms(), due = INT64_MAX;
    if (p->poll_ms > 0)
        due = p->next_poll_ms;
    for (unsigned i = 0; i < pc_coll_count(p->cache); i++) {
        if (atomic_load(&p->sync[i].pending) == 0)
            continue;
        int64_t next = atomic_load(&p->sync[i].next_check_ms);
        if (next < due)
            due = next;
    }
    if (due == INT64_MAX)
        return -1;
    return due <= now ? 0 : due - now > 3600000 ? 3600000 : (int)(due - now);
}

/* ---- facts ------------------------------------------------------------------ */

int pc_persist_sync_stats(const pc_persist *p, const pc_coll *coll, pc_sync_stats *out)
{
    if (p == NULL || coll == NULL || out == NULL || p->sync == NULL)
        return PC_EINVAL;
    unsigned i = pp_index(p, coll);
    const struct pc_sync_coll_shm *st = &p->sync[i];
    pc_sync_stats s;
    memset(&s, 0, sizeof s);
    s.last_sync_out_ms = atomic_load(&st->last_out_ms);
    s.last_sync_in_ms = atomic_load(&st->last_in_ms);
    s.generation = atomic_load(&p->shm[i].generation);
    sy_get_source(st, s.source);
    s.notices = atomic_load(&st->notices);
    s.checks = atomic_load(&st->checks);
    s.polls = atomic_load(&st->polls);
    s.rejected = atomic_load(&st->rejected);
    s.reloads = atomic_load(&st->reloads);
    s.pruned = atomic_load(&st->pruned);
    s.last_rc = atomic_load(&st->last_rc);
    *out = s;
    return 0;
}

int pc_sync_stats_emit(pc_persist *p, pc_coll *coll, const pc_result_ops *ops, void *rctx)
{
    pc_sync_stats s;
    int rc = pc_persist_sync_stats(p, coll, &s);
    if (rc != 0)
        return rc;
    rc = ops->i64(rctx, "last_sync_out", s.last_sync_out_ms / 1000);
    rc = rc ? rc : ops->i64(rctx, "last_sync_out_ms", s.last_sync_out_ms);
    rc = rc ? rc : ops->i64(rctx, "last_sync_in", s.last_sync_in_ms / 1000);
    rc = rc ? rc : ops->i64(rctx, "last_sync_in_ms", s.last_sync_in_ms);
    rc = rc ? rc : ops->str(rctx, "source", s.source, strlen(s.source));
    rc = rc ? rc : ops->u64(rctx, "sync_notices", s.notices);
    rc = rc ? rc : ops->u64(rctx, "sync_checks", s.checks);
    rc = rc ? rc : ops->u64(rctx, "sync_polls", s.polls);
    rc = rc ? rc : ops->u64(rctx, "sync_rejected", s.rejected);
    rc = rc ? rc : ops->u64(rctx, "sync_reloads", s.reloads);
    rc = rc ? rc : ops->u64(rctx, "sync_pruned", s.pruned);
    const char *err = s.last_rc != 0 ? pc_store_strerror(s.last_rc) : "";
    rc = rc ? rc : ops->str(rctx, "sync_error", err, strlen(err));
    return rc;
}
