/*
 * commands.c - the command table of the RESP door: lookup, AUTH and arity
 * checks, Redis's error shapes, and the hand-off of save/load requests to
 * the maintenance process through the worker's slot (pcached.h).
 *
 * The handlers live by family in cmd_string.c (values), cmd_rewrite.c
 * (values rewritten: APPEND, SETRANGE, INCRBYFLOAT, LCS...), cmd_keys.c
 * (keys, expiry, iteration), cmd_keymove.c (RENAME, COPY, MOVE, TIME,
 * LATENCY...) and cmd_server.c (connection, server, persistence and
 * PERF.<NAME>). A handler gets arguments that are already framed and
 * counted against its arity; it queues exactly one reply, unless it blocks
 * the connection on the slot (see cmd_slot_submit).
 */
#include "resp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

int arg_i64(const char *p, size_t n, int64_t *out)
{
    /* Redis's string2ll: optional '-', digits, no '+', no spaces, no
     * leading zeros other than "0" itself ("-0" is not a number), within
     * int64 - the engine's own rule for a counter's text. */
    return pc_parse_i64((const unsigned char *)p, n, out) == 0 ? 0 : -1;
}

int arg_pairs_check(conn *c, const char *name, unsigned argc, const size_t *argl)
{
    if ((argc - 1) % 2 != 0) {
        reply_error(c, "ERR wrong number of arguments for '%s' command", name);
        return -1;
    }
    /* every size before anything is written: nothing is written half way */
    for (unsigned i = 1; i < argc; i += 2)
        if (argl[i] > PC_KEY_MAX || argl[i + 1] > PC_VALUE_MAX) {
            reply_pc_error(c, PC_ETOOBIG);
            return -1;
        }
    return 0;
}

int arg_eq(const char *p, size_t n, const char *word)
{
    return strlen(word) == n && strncasecmp(p, word, n) == 0;
}

static const pc_persist *reply_persist; /* names why writes are refused */

void reply_set_persist(const pc_persist *p)
{
    reply_persist = p;
}

/* PC_EREFUSED: the journal cannot write (pcache_journal.h, health). The
 * reply names the cause, like Redis's MISCONF for a failed save. */
static void reply_refused(conn *c)
{
    pc_journal_health h = {0};
    if (reply_persist != NULL)
        (void)pc_persist_journal_health(reply_persist, &h);
    const char *cause = h.err != 0 ? strerror(h.err) : "unknown error";
    if (h.since_wall_ms > 0) {
        time_t t = (time_t)(h.since_wall_ms / 1000);
        struct tm tm;
        char when[32];
        gmtime_r(&t, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        reply_error(c,
                    "MISCONF journal writes are failing since %s: %s; writes are refused until "
                    "it recovers",
                    when, cause);
    } else {
        reply_error(c,
                    "MISCONF journal writes are failing: %s; writes are refused until it "
                    "recovers",
                    cause);
    }
}

void reply_nx(conn *c, int rc)
{
    if (rc == 0)
        reply_int(c, 1);
    else if (rc == PC_EEXIST)
        reply_int(c, 0);
    else
        reply_pc_error(c, rc);
}

void reply_pc_error(conn *c, int rc)
{
    switch (rc) {
    case PC_EREFUSED:
        reply_refused(c);
        break;
    case PC_EIO: {
        /* the write that found the journal failing (undone by the engine) */
        pc_journal_health h = {0};
        if (reply_persist != NULL)
            (void)pc_persist_journal_health(reply_persist, &h);
        if (h.failing)
            reply_refused(c);
        else
            reply_error(c, "ERR internal error: %s", pc_store_strerror(rc));
        break;
    }
    case PC_ETOOBIG:
        reply_error(c,
                    "ERR string exceeds maximum allowed size (keys up to %u bytes, values up to "
                    "%u bytes)",
                    PC_KEY_MAX, PC_VALUE_MAX);
        break;
    case PC_ENOMEM:
        reply_error(c, "OOM command not allowed: the shared arena is full (maxmemory, mem_mb) "
                       "and no collection's policy found a key to evict, the write was dropped");
        break;
    case PC_ENOTNUM:
        reply_error(c, "ERR value is not an integer or out of range");
        break;
    case PC_ERANGE:
        reply_error(c, "ERR increment or decrement would overflow");
        break;
    default:
        reply_error(c, "ERR internal error: %s", pc_store_strerror(rc));
        break;
    }
}

/* ---- lookup ----------------------------------------------------------------- */

#define CMD_MAX SRV_CMD_SLOTS
static const cmd_def *cmd_sorted[CMD_MAX];
static int cmd_get = -1, cmd_set = -1; /* the hot two, found without searching */
static unsigned cmd_n;

static int cmd_cmp(const void *a, const void *b)
{
    return strcmp((*(const cmd_def *const *)a)->name, (*(const cmd_def *const *)b)->name);
}

static void cmd_init(void)
{
    const cmd_def *tabs[] = {cmd_string_table,  cmd_keys_table,   cmd_server_table,
                             cmd_txn_table,     cmd_script_table, cmd_rewrite_table,
                             cmd_keymove_table, cmd_slowlog_table};
    unsigned counts[] = {cmd_string_count, cmd_keys_count,    cmd_server_count,  cmd_txn_count,
                         cmd_script_count, cmd_rewrite_count, cmd_keymove_count, cmd_slowlog_count};
    for (unsigned t = 0; t < sizeof tabs / sizeof tabs[0]; t++)
        for (unsigned i = 0; i < counts[t] && cmd_n < CMD_MAX; i++)
            cmd_sorted[cmd_n++] = &tabs[t][i];
    qsort(cmd_sorted, cmd_n, sizeof cmd_sorted[0], cmd_cmp);
    for (unsigned i = 0; i < cmd_n; i++) {
        if (strcmp(cmd_sorted[i]->name, "GET") == 0)
            cmd_get = (int)i;
        if (strcmp(cmd_sorted[i]->name, "SET") == 0)
            cmd_set = (int)i;
    }
}

unsigned cmd_all(const cmd_def **out, unsigned cap)
{
    if (cmd_n == 0)
        cmd_init();
    unsigned n = cmd_n < cap ? cmd_n : cap;
    memcpy(out, cmd_sorted, n * sizeof *out);
    return n;
}

/* The index of a command in the sorted table (its commandstats slot), or
 * -1 when unknown. */
static int cmd_lookup(const char *name, size_t len)
{
    if (cmd_n == 0)
        cmd_init();
    /* hot path: GET and SET without the case fold and the search */
    if (len == 3 && (name[1] | 0x20) == 'e' && (name[2] | 0x20) == 't') {
        char c0 = (char)(name[0] | 0x20);
        if (c0 == 'g' && cmd_get >= 0)
            return cmd_get;
        if (c0 == 's' && cmd_set >= 0)
            return cmd_set;
    }
    char up[32];
    if (len == 0 || len >= sizeof up)
        return -1;
    for (size_t i = 0; i < len; i++) {
        char ch = name[i];
        up[i] = (ch >= 'a' && ch <= 'z') ? (char)(ch - 32) : ch;
    }
    up[len] = '\0';
    unsigned lo = 0, hi = cmd_n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        int r = strcmp(up, cmd_sorted[mid]->name);
        if (r == 0)
            return (int)mid;
        if (r < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return -1;
}

void cmd_perf(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl);

static void reply_unknown(conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    /* as Redis: the arguments shown share 128 bytes, each cut to what is left */
    char name[129], args[200] = "", one[140];
    resp_sanitize(name, sizeof name, argv[0], argl[0]);
    size_t used = 0;
    for (unsigned i = 1; i < argc && used < 128; i++) {
        char a[129];
        resp_sanitize(a, 128 - used + 1, argv[i], argl[i]);
        int n = snprintf(one, sizeof one, "'%s' ", a);
        if (n < 0 || used + (size_t)n >= sizeof args)
            break;
        memcpy(args + used, one, (size_t)n + 1);
        used += (size_t)n;
    }
    reply_error(c, "ERR unknown command '%s', with args beginning with: %s", name, args);
}

const cmd_def *cmd_at(unsigned i)
{
    if (cmd_n == 0)
        cmd_init();
    return i < cmd_n ? cmd_sorted[i] : NULL;
}

/* INFO commandstats and errorstats: a command's counters live in our
 * worker's row of shared memory (one writer, relaxed); an error reply is
 * told by reply_error's count (c->nerr), so no reply is re-read. */
void cmd_dispatch(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    int idx = cmd_lookup(argv[0], argl[0]);
    const cmd_def *d = idx >= 0 ? cmd_sorted[idx] : NULL;
    struct srv_cmdstat_shm *st = d != NULL ? &w->s->shm->cmdstats[w->slot][idx] : NULL;
    uint32_t nerr = c->nerr;
    int is_perf = d == NULL && argl[0] > 5 && strncasecmp(argv[0], "PERF.", 5) == 0;
    if (w->s->cfg.requirepass[0] != '\0' && !c->authed && (d == NULL || !(d->flags & CMD_NOAUTH))) {
        reply_error(c, "NOAUTH Authentication required.");
        goto rejected;
    }
    if (is_perf) {
        if (c->txn == NULL || !cmd_txn_queue(w, c, "PERF.*", argc, argv, argl))
            cmd_perf(w, c, argc, argv, argl);
        goto out;
    }
    if (d == NULL) {
        reply_unknown(c, argc, argv, argl);
        cmd_txn_flag(c);
        goto out;
    }
    if ((d->arity > 0 && argc != (unsigned)d->arity) ||
        (d->arity < 0 && argc < (unsigned)-d->arity)) {
        char lower[32];
        size_t n = strlen(d->name);
        for (size_t i = 0; i <= n; i++)
            lower[i] =
                (d->name[i] >= 'A' && d->name[i] <= 'Z') ? (char)(d->name[i] + 32) : d->name[i];
        reply_error(c, "ERR wrong number of arguments for '%s' command", lower);
        goto rejected;
    }
    if ((d->flags & CMD_NO_MULTI) && cmd_txn_multi(c)) {
        reply_error(c, "ERR Command not allowed inside a transaction");
        goto rejected;
    }
    if (c->txn != NULL && cmd_txn_queue(w, c, d->name, argc, argv, argl))
        goto out; /* queued (+QUEUED) or refused: counted when EXEC runs it */
    c->lastcmd = d->name;
    /* the start is the batch's previous command's end: its time includes
     * its own parsing, a few ns (resp.h, cmd_end_us) */
    int64_t t0 = w->cmd_end_us != 0 ? w->cmd_end_us : pc_mono_us();
    if (d->flags & CMD_ATOMIC)
        cmd_txn_atomic(w, c, d->fn, argc, argv, argl);
    else if ((d->flags & CMD_SNAPSHOT) && argc > 2)
        cmd_txn_snapshot(w, c, d->fn, argc, argv, argl);
    else
        d->fn(w, c, argc, argv, argl);
    int64_t t1 = pc_mono_us();
    w->cmd_end_us = t1;
    /* one comparison per command; logging is the rare case (slowlog.c) */
    if ((uint64_t)(t1 - t0) >= w->s->cfg.slowlog_log_slower_than &&
        w->s->cfg.slowlog_log_slower_than != SRV_SLOW_OFF)
        srv_slowlog_add(w, c, argc, argv, argl, (uint64_t)(t1 - t0));
    srv_ctab_act(c, t1, (unsigned)idx); /* CLIENT LIST cmd= and idle= in other workers */
    atomic_store_explicit(&st->calls, atomic_load_explicit(&st->calls, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(
        &st->usec, atomic_load_explicit(&st->usec, memory_order_relaxed) + (uint64_t)(t1 - t0),
        memory_order_relaxed);
    _Atomic uint64_t *lat = &st->lat[srv_lat_bucket((uint64_t)(t1 - t0))];
    atomic_store_explicit(lat, atomic_load_explicit(lat, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    if (c->nerr != nerr)
        atomic_fetch_add_explicit(&st->failed, 1, memory_order_relaxed);
    goto out;
rejected:
    cmd_txn_flag(c);
    if (st != NULL)
        atomic_fetch_add_explicit(&st->rejected, 1, memory_order_relaxed);
out:
    if (c->nerr != nerr)
        srv_errstat_count(w, c->errcode);
}

/* ---- the slot: requests to the maintenance process ------------------------------ */

int srv_slot_encode(struct srv_slot_shm *slot, const char *cmd, unsigned nargs,
                    const char *const *argv, const size_t *argl)
{
    size_t cl = strlen(cmd) + 1, need = cl + 4;
    for (unsigned i = 0; i < nargs; i++)
        need += 4 + argl[i];
    if (need > sizeof slot->buf)
        return -1;
    char *p = slot->buf;
    memcpy(p, cmd, cl);
    p += cl;
    uint32_t n = nargs;
    memcpy(p, &n, 4);
    p += 4;
    for (unsigned i = 0; i < nargs; i++) {
        uint32_t l = (uint32_t)argl[i];
        memcpy(p, &l, 4);
        memcpy(p + 4, argv[i], argl[i]);
        p += 4 + argl[i];
    }
    slot->len = (uint32_t)need;
    return 0;
}

int cmd_slot_submit(srv_worker *w, conn *c, const char *cmd, unsigned nargs,
                    const char *const *argv, const size_t *argl, int async)
{
    struct srv_slot_shm *slot = &w->s->shm->slots[w->slot];
    if (w->slot_waiter != NULL || w->slot_async || w->slot_orphan ||
        atomic_load_explicit(&slot->state, memory_order_acquire) != SRV_SLOT_FREE) {
        c->blocked = 2; /* retried when the slot frees */
        return 1;
    }
    if (srv_slot_encode(slot, cmd, nargs, argv, argl) != 0) {
        reply_error(c, "ERR request too large for the maintenance process (%u bytes)",
                    (unsigned)sizeof slot->buf);
        return -1;
    }
    slot->async = (uint32_t)async;
    if (async) /* in progress from now on, for INFO and the next BGSAVE */
        atomic_fetch_add(&w->s->shm->bgsave_pending, 1);
    slot->rc = 0;
    atomic_store_explicit(&slot->state, SRV_SLOT_PENDING, memory_order_release);
    uint64_t one = 1;
    if (write(w->s->maint_efd, &one, sizeof one) != (ssize_t)sizeof one && errno != EAGAIN) {
        /* the maintenance process also scans the slots on its timer */
    }
    if (async) {
        w->slot_async = 1;
    } else {
        w->slot_waiter = c;
        c->blocked = 1;
    }
    return 0;
}
