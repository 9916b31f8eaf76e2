/*
 * cmd_txn.c - MULTI, EXEC, DISCARD, WATCH, UNWATCH, with Redis 7's replies
 * (docs/pcached.md, "Transactions").
 *
 * A connection's transaction state (struct srv_txn) is made by its first
 * MULTI or WATCH and lives until the connection closes. Between MULTI and
 * EXEC, cmd_dispatch hands every command to cmd_txn_queue: a command that
 * fails its checks (unknown, wrong arity, refused inside MULTI, over the
 * queue's limits) is answered with its error and flags the transaction,
 * whose EXEC then answers EXECABORT; any other is copied and answered
 * +QUEUED. MULTI, EXEC, DISCARD, WATCH and QUIT run at once.
 *
 * EXEC runs the queued commands through their ordinary handlers with the
 * connection's engine transaction (pcache.h, pc_txn) bound: their reads
 * observe keys lock-free and see the transaction's own writes, their writes
 * are staged; then pc_txn_commit installs every write at once under the
 * locks of all the buckets involved, after checking that nothing observed
 * changed - so no other client's command interleaves with the EXEC on its
 * keys, in any worker. A conflict (a concurrent write to one of the keys or
 * to their buckets) is not the client's business: the replies are dropped
 * and the commands run again, a bounded number of times. WATCH observes its
 * keys in the same transaction before MULTI: if one of them changed, EXEC
 * answers the nil array instead of retrying.
 *
 * Commands whose keys are not known when they are queued (KEYS, SCAN,
 * DBSIZE, FLUSHDB, FLUSHALL, RANDOMKEY, SAVE, BGSAVE, PERF.*) cannot be
 * isolated that way: they are refused inside MULTI (the error flags the
 * transaction, as any queue-time error does).
 */
#include "resp.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define TXN_MAX_CMDS 100000u              /* queued commands per MULTI, watched keys */
#define TXN_MAX_BYTES (64u * 1024 * 1024) /* bytes of queued arguments, of watched keys */
#define TXN_MAX_ATTEMPTS 1000u            /* EXEC runs before it gives up on conflicts */

/* One queued command: one allocation holding argl[argc], argv[argc] and
 * the argument bytes (each followed by a NUL). */
struct txq {
    unsigned argc;
    const char **argv;
    size_t *argl;
};

struct srv_txn {
    int multi;   /* between MULTI and EXEC/DISCARD */
    int dirty;   /* a command was refused while queued: EXEC answers EXECABORT */
    int running; /* EXEC is running the queue */
    unsigned nwatch;
    size_t wbytes;      /* bytes of the watched keys */
    uint64_t watch_dbs; /* bit d: a key of database d is watched */
    int watch_broken;   /* SWAPDB changed a watched database's collection */
    pc_txn *t;          /* the watches, then the EXEC's work; NULL until needed */
    struct txq *q;
    unsigned nq, qcap;
    size_t qbytes;
};

/* Commands refused inside MULTI: their key set is not known when queued. */
static const char *const txn_refused[] = {"KEYS",      "SCAN", "DBSIZE", "FLUSHDB", "FLUSHALL",
                                          "RANDOMKEY", "SAVE", "BGSAVE", "SWAPDB"};

/* Commands that run at once inside MULTI instead of being queued. */
static const char *const txn_immediate[] = {"MULTI", "EXEC", "DISCARD", "WATCH", "QUIT", "RESET"};

static int name_in(const char *name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, list[i]) == 0)
            return 1;
    return 0;
}

static struct srv_txn *txn_of(srv_worker *w, conn *c)
{
    if (c->txn == NULL) {
        struct srv_txn *x = calloc(1, sizeof *x);
        if (x == NULL)
            return NULL;
        if (pc_txn_begin(w->s->cache, &x->t) != 0) {
            free(x);
            return NULL;
        }
        c->txn = x;
    }
    return c->txn;
}

static void txn_drop_queue(struct srv_txn *x)
{
    for (unsigned i = 0; i < x->nq; i++)
        free(x->q[i].argl); /* the block starts with argl */
    x->nq = 0;
    x->qbytes = 0;
}

/* After EXEC or DISCARD: out of MULTI, nothing queued, nothing watched. */
static void txn_end(struct srv_txn *x)
{
    txn_drop_queue(x);
    x->multi = x->dirty = 0;
    x->nwatch = 0;
    x->wbytes = 0;
    x->watch_dbs = 0;
    x->watch_broken = 0;
    pc_txn_clear(x->t);
}

void cmd_txn_dbs_changed(conn *c, uint64_t mask)
{
    if (c->txn != NULL && c->txn->nwatch > 0 && (c->txn->watch_dbs & mask) != 0)
        c->txn->watch_broken = 1;
}

int cmd_txn_multi(const conn *c)
{
    return c->txn != NULL && c->txn->multi && !c->txn->running;
}

void cmd_txn_reset_conn(conn *c)
{
    if (c->txn != NULL && !c->txn->running)
        txn_end(c->txn);
}

void cmd_txn_conn_free(conn *c)
{
    struct srv_txn *x = c->txn;
    if (x == NULL)
        return;
    txn_drop_queue(x);
    free(x->q);
    pc_txn_free(x->t);
    free(x);
    c->txn = NULL;
}

void cmd_txn_flag(conn *c)
{
    if (c->txn != NULL && c->txn->multi && !c->txn->running)
        c->txn->dirty = 1;
}

static int txn_push(struct srv_txn *x, unsigned argc, const char **argv, const size_t *argl)
{
    size_t bytes = 0;
    for (unsigned i = 0; i < argc; i++)
        bytes += argl[i] + 1;
    if (x->nq >= TXN_MAX_CMDS || bytes > TXN_MAX_BYTES - x->qbytes)
        return -1;
    if (x->nq == x->qcap) {
        unsigned cap = x->qcap ? x->qcap * 2 : 16;
        struct txq *q = realloc(x->q, cap * sizeof *q);
        if (q == NULL)
            return -2;
        x->q = q;
        x->qcap = cap;
    }
    size_t head = argc * (sizeof(size_t) + sizeof(char *));
    char *blk = malloc(head + bytes);
    if (blk == NULL)
        return -2;
    struct txq *e = &x->q[x->nq];
    e->argc = argc;
    e->argl = (size_t *)blk;
    e->argv = (const char **)(blk + argc * sizeof(size_t));
    char *p = blk + head;
    for (unsigned i = 0; i < argc; i++) {
        memcpy(p, argv[i], argl[i]);
        p[argl[i]] = '\0';
        e->argv[i] = p;
        e->argl[i] = argl[i];
        p += argl[i] + 1;
    }
    x->nq++;
    x->qbytes += bytes;
    return 0;
}

int cmd_txn_queue(srv_worker *w, conn *c, const char *name, unsigned argc, const char **argv,
                  const size_t *argl)
{
    (void)w;
    struct srv_txn *x = c->txn;
    if (x == NULL || !x->multi || x->running ||
        name_in(name, txn_immediate, sizeof txn_immediate / sizeof txn_immediate[0]))
        return 0;
    if (name_in(name, txn_refused, sizeof txn_refused / sizeof txn_refused[0]) ||
        strncmp(name, "PERF.", 5) == 0) {
        char lower[40];
        size_t n = strlen(name);
        if (n >= sizeof lower)
            n = sizeof lower - 1;
        for (size_t i = 0; i < n; i++)
            lower[i] = (name[i] >= 'A' && name[i] <= 'Z') ? (char)(name[i] + 32) : name[i];
        lower[n] = '\0';
        reply_error(c,
                    "ERR '%s' is not allowed inside MULTI in pcached: it has no fixed set of "
                    "keys to isolate",
                    lower);
        x->dirty = 1;
        return 1;
    }
    int rc = txn_push(x, argc, argv, argl);
    if (rc == -1)
        reply_error(c, "ERR transaction too large (at most %u queued commands and %u bytes)",
                    TXN_MAX_CMDS, TXN_MAX_BYTES);
    else if (rc != 0)
        reply_error(c, "ERR out of memory queuing the command");
    if (rc != 0)
        x->dirty = 1;
    else
        reply_simple(c, "QUEUED");
    return 1;
}

static void cmd_multi(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)argc, (void)argv, (void)argl;
    struct srv_txn *x = txn_of(w, c);
    if (x == NULL) {
        reply_error(c, "ERR out of memory");
        return;
    }
    if (x->multi) {
        reply_error(c, "ERR MULTI calls can not be nested");
        return;
    }
    x->multi = 1;
    x->dirty = 0;
    reply_ok(c);
}

static void cmd_discard(srv_worker *w, conn *c, unsigned argc, const char **argv,
                        const size_t *argl)
{
    (void)w, (void)argc, (void)argv, (void)argl;
    if (c->txn == NULL || !c->txn->multi) {
        reply_error(c, "ERR DISCARD without MULTI");
        return;
    }
    txn_end(c->txn);
    reply_ok(c);
}

static void cmd_watch(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    if (c->txn != NULL && c->txn->multi) {
        reply_error(c, "ERR WATCH inside MULTI is not allowed");
        return;
    }
    struct srv_txn *x = txn_of(w, c);
    if (x == NULL) {
        reply_error(c, "ERR out of memory");
        return;
    }
    for (unsigned i = 1; i < argc; i++) {
        if (argl[i] > PC_KEY_MAX)
            continue; /* no key that long can exist, nor be written */
        if (x->nwatch >= TXN_MAX_CMDS || argl[i] > TXN_MAX_BYTES - x->wbytes) {
            reply_error(c, "ERR too many watched keys (at most %u keys and %u bytes)", TXN_MAX_CMDS,
                        TXN_MAX_BYTES);
            return;
        }
        int rc = pc_txn_watch(x->t, c->coll, argv[i], argl[i]);
        if (rc != 0) {
            reply_pc_error(c, rc);
            return;
        }
        x->nwatch++;
        x->wbytes += argl[i];
        x->watch_dbs |= 1ull << c->db;
    }
    reply_ok(c);
}

static void cmd_unwatch(srv_worker *w, conn *c, unsigned argc, const char **argv,
                        const size_t *argl)
{
    (void)w, (void)argc, (void)argv, (void)argl;
    struct srv_txn *x = c->txn;
    /* inside EXEC the watches were already checked: nothing to drop */
    if (x != NULL && !x->running) {
        x->nwatch = 0;
        x->wbytes = 0;
        x->watch_dbs = 0;
        x->watch_broken = 0;
        pc_txn_clear(x->t);
    }
    reply_ok(c);
}

/* Waits a little before attempt a (> 0) of a conflicting EXEC. */
static void txn_backoff(unsigned a)
{
    if (a < 4)
        return;
    if (a < 32) {
        sched_yield();
        return;
    }
    unsigned us = a < 200 ? a * 5u : 1000u;
    struct timespec ts = {0, (long)us * 1000L};
    nanosleep(&ts, NULL);
}

static void cmd_exec(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)argc, (void)argv, (void)argl;
    struct srv_txn *x = c->txn;
    if (x == NULL || !x->multi) {
        reply_error(c, "ERR EXEC without MULTI");
        return;
    }
    if (x->dirty) {
        reply_error(c, "EXECABORT Transaction discarded because of previous errors.");
        txn_end(x);
        return;
    }
    if (x->nwatch > 0 && (x->watch_broken || pc_txn_validate(x->t) == PC_ECONFLICT)) {
        reply_nil_array(c);
        txn_end(x);
        return;
    }
    unsigned db0 = c->db;
    pc_coll *coll0 = c->coll;
    size_t keep = c->out.len - c->out.off; /* what stays if an attempt is dropped */
    int rc = PC_ECONFLICT;
    unsigned a;
    for (a = 0; a < TXN_MAX_ATTEMPTS && rc == PC_ECONFLICT; a++) {
        txn_backoff(a);
        reply_array(c, x->nq);
        x->running = 1;
        (void)pc_txn_bind(w->s->cache, x->t);
        for (unsigned i = 0; i < x->nq && !c->closing; i++)
            cmd_dispatch(w, c, x->q[i].argc, x->q[i].argv, x->q[i].argl);
        (void)pc_txn_bind(w->s->cache, NULL);
        x->running = 0;
        rc = pc_txn_commit(x->t);
        if (rc == 0)
            break;
        /* nothing was applied: drop this attempt's replies and state */
        c->out.len = c->out.off + keep;
        c->db = db0;
        c->coll = coll0;
        if (rc != PC_ECONFLICT)
            break;
        pc_txn_reset(x->t); /* keeps the watches */
        if (x->nwatch > 0 && pc_txn_validate(x->t) == PC_ECONFLICT) {
            rc = 1; /* a watched key changed */
            break;
        }
    }
    if (rc == 1)
        reply_nil_array(c);
    else if (rc == PC_ECONFLICT)
        reply_error(c,
                    "ERR EXEC gave up after %u attempts that conflicted with concurrent writes "
                    "to the same keys; nothing was applied",
                    TXN_MAX_ATTEMPTS);
    else if (rc != 0)
        reply_pc_error(c, rc);
    txn_end(x);
}

const cmd_def cmd_txn_table[] = {
    {"MULTI", 1, CMD_FAST, cmd_multi, 0, 0, 0},     {"EXEC", 1, 0, cmd_exec, 0, 0, 0},
    {"DISCARD", 1, CMD_FAST, cmd_discard, 0, 0, 0}, {"WATCH", -2, CMD_FAST, cmd_watch, 1, -1, 1},
    {"UNWATCH", 1, CMD_FAST, cmd_unwatch, 0, 0, 0},
};
const unsigned cmd_txn_count = sizeof cmd_txn_table / sizeof cmd_txn_table[0];

/* ---- one command as one transaction ------------------------------------------------------ */

struct atomic_run {
    srv_worker *w;
    conn *c;
    cmd_fn fn;
    unsigned argc;
    const char **argv;
    const size_t *argl;
    size_t keep; /* the output before the command: an attempt's replies start here */
};

static int atomic_attempt(void *ctx)
{
    struct atomic_run *r = ctx;
    r->c->out.len = r->c->out.off + r->keep; /* a conflicted attempt's replies go */
    r->fn(r->w, r->c, r->argc, r->argv, r->argl);
    return 0;
}

#define TXN_SNAP_TRIES 8u /* lock-free snapshot attempts before the locked read */

void cmd_txn_snapshot(srv_worker *w, conn *c, cmd_fn fn, unsigned argc, const char **argv,
                      const size_t *argl)
{
    size_t keep = c->out.len - c->out.off;
    for (unsigned a = 0; a < TXN_SNAP_TRIES; a++) {
        pc_snap_begin(w->s->cache);
        fn(w, c, argc, argv, argl);
        if (pc_snap_end(w->s->cache) == 0)
            return;
        c->out.len = c->out.off + keep; /* a write came between two reads */
        txn_backoff(a);
    }
    cmd_txn_atomic(w, c, fn, argc, argv, argl);
}

void cmd_txn_atomic(srv_worker *w, conn *c, cmd_fn fn, unsigned argc, const char **argv,
                    const size_t *argl)
{
    struct atomic_run r = {w, c, fn, argc, argv, argl, c->out.len - c->out.off};
    c->atomic = 1;
    int rc = pc_txn_run(w->s->cache, atomic_attempt, &r, TXN_MAX_ATTEMPTS);
    c->atomic = 0;
    if (rc == 0)
        return;
    c->out.len = c->out.off + r.keep; /* nothing was applied: neither is its reply */
    if (rc == PC_ECONFLICT)
        reply_error(c,
                    "ERR gave up after %u attempts that conflicted with concurrent writes to "
                    "the same keys; nothing was applied",
                    TXN_MAX_ATTEMPTS);
    else
        reply_pc_error(c, rc);
}
