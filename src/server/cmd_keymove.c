/*
 * cmd_keymove.c - the key commands that move or copy an entry (RENAME
 * RENAMENX COPY MOVE), RANDOMKEY TOUCH EXPIRETIME PEXPIRETIME, and the
 * server commands clients and exporters probe: TIME WAIT LATENCY, with
 * Redis 7.0's replies and errors (docs/pcached.md, section 3.1).
 *
 * The engine has no rename: an entry is read (value, counter or string,
 * remaining time to live), written under its new name, and the old one
 * removed, in one function named rmw_<command>. The commands carry
 * CMD_ATOMIC, so the three steps run as one engine transaction
 * (cmd_txn_atomic): other clients see the old name or the new one, never
 * both or neither. A counter stays a native counter under its new name.
 *
 * A DB index names a collection through the SELECT map (srv.dbs); MOVE and
 * COPY ... DB between two indexes that map to one collection are "the same
 * object", as Redis says of one database.
 */
#include "resp.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/* The entry key copied to (dst, dk) with its expiry, as it is: a counter
 * as a counter. flags: PC_SET_NX or 0. Reads into w->scratch. */
static int copy_entry(srv_worker *w, pc_coll *src, const char *k, size_t kl, pc_coll *dst,
                      const char *dk, size_t dkl, unsigned flags)
{
    if (kl > PC_KEY_MAX)
        return PC_ENOTFOUND;
    size_t len = 0, need = 0;
    pc_meta m;
    int rc = pc_get_buf(src, k, kl, w->scratch, w->scratch_cap, &len, &need, &m);
    if (rc != 0)
        return rc;
    /* an expiry that lapses as we copy: still one, never "none" */
    int64_t ttl = m.ttl_ms < 0 ? 0 : (m.ttl_ms > 0 ? m.ttl_ms : 1);
    int64_t v;
    if (m.is_counter && arg_i64(w->scratch, len, &v) == 0) {
        if ((flags & PC_SET_NX) && pc_probe(dst, dk, dkl, NULL) == 0)
            return PC_EEXIST;
        return pc_set_counter(dst, dk, dkl, v, ttl);
    }
    return pc_set(dst, dk, dkl, w->scratch, len, ttl, flags);
}

/* RENAME(NX): 0, PC_ENOTFOUND (no source), PC_EEXIST (NX and the
 * destination exists: nothing changed). */
static int rmw_rename(srv_worker *w, pc_coll *coll, const char *k, size_t kl, const char *nk,
                      size_t nkl, int nx)
{
    int rc = copy_entry(w, coll, k, kl, coll, nk, nkl, nx ? PC_SET_NX : 0);
    if (rc == 0)
        (void)pc_remove(coll, k, kl);
    return rc;
}

static void rename_generic(srv_worker *w, conn *c, const char **argv, const size_t *argl, int nx)
{
    int same = argl[1] == argl[2] && memcmp(argv[1], argv[2], argl[1]) == 0;
    if (same) {
        if (argl[1] > PC_KEY_MAX || pc_probe(c->coll, argv[1], argl[1], NULL) != 0)
            reply_error(c, "ERR no such key");
        else if (nx)
            reply_int(c, 0);
        else
            reply_ok(c);
        return;
    }
    int rc = rmw_rename(w, c->coll, argv[1], argl[1], argv[2], argl[2], nx);
    if (rc == PC_ENOTFOUND)
        reply_error(c, "ERR no such key");
    else if (rc == PC_EEXIST)
        reply_int(c, 0);
    else if (rc != 0)
        reply_pc_error(c, rc);
    else if (nx)
        reply_int(c, 1);
    else
        reply_ok(c);
}

static void cmd_rename(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)argc;
    rename_generic(w, c, argv, argl, 0);
}

static void cmd_renamenx(srv_worker *w, conn *c, unsigned argc, const char **argv,
                         const size_t *argl)
{
    (void)argc;
    rename_generic(w, c, argv, argl, 1);
}

/* A DB index argument (Redis's getIntFromObjectOrReply, then the range of
 * SELECT): the collection, or NULL after queuing the error. */
static pc_coll *db_arg(srv_worker *w, conn *c, const char *p, size_t n)
{
    int64_t id;
    if (arg_i64(p, n, &id) != 0) {
        reply_error(c, "ERR value is not an integer or out of range");
        return NULL;
    }
    if (id < INT_MIN || id > INT_MAX) {
        reply_error(c, "ERR value is out of range, value must between %d and %d", INT_MIN, INT_MAX);
        return NULL;
    }
    if (id < 0 || id >= (int64_t)w->s->ndbs) {
        reply_error(c, "ERR DB index is out of range");
        return NULL;
    }
    return w->dbcoll[id];
}

/* COPY: 1 copied, 0 not (no source, or the destination exists without
 * REPLACE), or a negative engine code. */
static int rmw_copy(srv_worker *w, pc_coll *src, const char *k, size_t kl, pc_coll *dst,
                    const char *dk, size_t dkl, int replace)
{
    int rc = copy_entry(w, src, k, kl, dst, dk, dkl, replace ? 0 : PC_SET_NX);
    if (rc == 0)
        return 1;
    return rc == PC_ENOTFOUND || rc == PC_EEXIST ? 0 : rc;
}

static void cmd_copy(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    pc_coll *dst = c->coll;
    int replace = 0;
    for (unsigned j = 3; j < argc; j++) {
        if (arg_eq(argv[j], argl[j], "REPLACE")) {
            replace = 1;
        } else if (arg_eq(argv[j], argl[j], "DB") && j + 1 < argc) {
            dst = db_arg(w, c, argv[j + 1], argl[j + 1]);
            if (dst == NULL)
                return;
            j++;
        } else {
            reply_error(c, "ERR syntax error");
            return;
        }
    }
    if (dst == c->coll && argl[1] == argl[2] && memcmp(argv[1], argv[2], argl[1]) == 0) {
        reply_error(c, "ERR source and destination objects are the same");
        return;
    }
    int rc = rmw_copy(w, c->coll, argv[1], argl[1], dst, argv[2], argl[2], replace);
    if (rc < 0)
        reply_pc_error(c, rc);
    else
        reply_int(c, rc);
}

/* MOVE: 1 moved, 0 not (no source, or the key exists in dst), or a
 * negative engine code. */
static int rmw_move(srv_worker *w, pc_coll *src, const char *k, size_t kl, pc_coll *dst)
{
    int rc = copy_entry(w, src, k, kl, dst, k, kl, PC_SET_NX);
    if (rc == 0) {
        (void)pc_remove(src, k, kl);
        return 1;
    }
    return rc == PC_ENOTFOUND || rc == PC_EEXIST ? 0 : rc;
}

static void cmd_move(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)argc;
    pc_coll *dst = db_arg(w, c, argv[2], argl[2]);
    if (dst == NULL)
        return;
    if (dst == c->coll) {
        reply_error(c, "ERR source and destination objects are the same");
        return;
    }
    int rc = rmw_move(w, c->coll, argv[1], argl[1], dst);
    if (rc < 0)
        reply_pc_error(c, rc);
    else
        reply_int(c, rc);
}

/* ---- RANDOMKEY ---------------------------------------------------------------------- */

/* Reservoir of one over the keys of the buckets visited: the key in buf. */
struct pick {
    char *buf;
    size_t cap, len;
    uint64_t seen;
    unsigned rnd;
};

static int pick_key(void *ctx, const pc_entry *e)
{
    struct pick *p = ctx;
    p->seen++;
    if (e->klen <= p->cap && (unsigned)rand_r(&p->rnd) % p->seen == 0) {
        memcpy(p->buf, e->key, e->klen);
        p->len = e->klen;
    }
    return 0;
}

/* Starts at a random bucket and walks forward (wrapping once) until a
 * bucket holds a live key; picks one of that bucket's keys at random.
 * Not uniform over keys (neither is Redis's), never slower than one pass. */
static void cmd_randomkey(srv_worker *w, conn *c, unsigned argc, const char **argv,
                          const size_t *argl)
{
    (void)argc, (void)argv, (void)argl;
    static unsigned seed;
    if (seed == 0)
        seed = (unsigned)pc_mono_ms() ^ (unsigned)getpid();
    pc_coll_stats st;
    if (pc_coll_stats_get(c->coll, &st) != 0 || st.entries == 0 || st.buckets == 0) {
        reply_nil(c);
        return;
    }
    struct pick p = {w->scratch, w->scratch_cap, 0, 0, seed};
    uint64_t start = (uint64_t)rand_r(&seed) % st.buckets, cur = start, visited = 0;
    int wrapped = 0;
    while (p.seen == 0) {
        uint64_t next = 0;
        int rc = pc_scan(c->coll, cur, 1, NULL, 0, 0, pick_key, &p, &next);
        if (rc == PC_EINVAL)
            next = 0; /* past the end: wrap */
        else if (rc != 0) {
            reply_pc_error(c, rc);
            return;
        }
        if (++visited > st.buckets * 2 + 2)
            break; /* the table changed under us: give up, as if empty */
        if (next == 0) {
            if (wrapped)
                break;
            wrapped = 1;
        }
        cur = next;
        if (wrapped && cur >= start)
            break;
    }
    seed = p.rnd;
    if (p.seen == 0)
        reply_nil(c);
    else
        reply_bulk(c, p.buf, p.len);
}

/* ---- TOUCH, EXPIRETIME, PEXPIRETIME --------------------------------------------------- */

static void cmd_touch(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w;
    int64_t n = 0;
    for (unsigned i = 1; i < argc; i++)
        n += argl[i] <= PC_KEY_MAX && pc_probe(c->coll, argv[i], argl[i], NULL) == 0;
    reply_int(c, n);
}

/* The unix time of the expiry: the engine keeps a remaining time on a
 * monotonic clock, so this is now (wall) + remaining, within a few ms of
 * the time that was set. */
static void expiretime_generic(conn *c, const char *k, size_t kl, int unit_ms)
{
    pc_meta m;
    if (kl > PC_KEY_MAX || pc_probe(c->coll, k, kl, &m) != 0) {
        reply_int(c, -2);
        return;
    }
    if (m.ttl_ms < 0) {
        reply_int(c, -1);
        return;
    }
    int64_t at = pc_wall_ms() + m.ttl_ms;
    reply_int(c, unit_ms ? at : (at + 500) / 1000);
}

static void cmd_expiretime(srv_worker *w, conn *c, unsigned argc, const char **argv,
                           const size_t *argl)
{
    (void)w, (void)argc;
    expiretime_generic(c, argv[1], argl[1], 0);
}

static void cmd_pexpiretime(srv_worker *w, conn *c, unsigned argc, const char **argv,
                            const size_t *argl)
{
    (void)w, (void)argc;
    expiretime_generic(c, argv[1], argl[1], 1);
}

/* ---- TIME, WAIT --------------------------------------------------------------------- */

static void cmd_time(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc, (void)argv, (void)argl;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    char s[24], us[24];
    int sn = snprintf(s, sizeof s, "%lld", (long long)tv.tv_sec);
    int un = snprintf(us, sizeof us, "%ld", (long)tv.tv_usec);
    reply_array(c, 2);
    reply_bulk(c, s, (size_t)sn);
    reply_bulk(c, us, (size_t)un);
}

/* pcached has no replicas: every write is acknowledged by 0 of them, at
 * once (Redis waits out the timeout when numreplicas > 0; nothing could
 * change the answer here). */
static void cmd_wait(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc;
    int64_t n, t;
    if (arg_i64(argv[1], argl[1], &n) != 0) {
        reply_error(c, "ERR value is not an integer or out of range");
        return;
    }
    if (arg_i64(argv[2], argl[2], &t) != 0) {
        reply_error(c, "ERR timeout is not an integer or out of range");
        return;
    }
    if (t < 0) {
        reply_error(c, "ERR timeout is negative");
        return;
    }
    reply_int(c, 0);
}

/* ---- LATENCY -------------------------------------------------------------------------- */

/* LATENCY HISTOGRAM [command...]: Redis 7.0's reply, from the counters
 * every command already updates (srv_cmdstat_shm.lat): per command that
 * ran (and was named, when names are given), its calls and the cumulative
 * count at each power-of-two microsecond bound where it grows. */
static void latency_histogram(srv_worker *w, conn *c, unsigned argc, const char **argv,
                              const size_t *argl)
{
    unsigned long long calls[SRV_CMD_SLOTS];
    unsigned n = 0;
    for (unsigned k = 0; k < SRV_CMD_SLOTS && cmd_at(k) != NULL; k++) {
        calls[k] = 0;
        int named = argc == 2;
        for (unsigned a = 2; a < argc && !named; a++)
            named = arg_eq(argv[a], argl[a], cmd_at(k)->name);
        for (unsigned i = 0; named && i < w->s->cfg.workers; i++)
            calls[k] +=
                atomic_load_explicit(&w->s->shm->cmdstats[i][k].calls, memory_order_relaxed);
        n += calls[k] > 0;
    }
    reply_map(c, n);
    for (unsigned k = 0; k < SRV_CMD_SLOTS && cmd_at(k) != NULL; k++) {
        if (calls[k] == 0)
            continue;
        uint64_t lat[SRV_LAT_BUCKETS] = {0};
        for (unsigned i = 0; i < w->s->cfg.workers; i++)
            for (unsigned b = 0; b < SRV_LAT_BUCKETS; b++)
                lat[b] +=
                    atomic_load_explicit(&w->s->shm->cmdstats[i][k].lat[b], memory_order_relaxed);
        unsigned grows = 0;
        for (unsigned b = 0; b < SRV_LAT_BUCKETS; b++)
            grows += lat[b] > 0;
        char name[32];
        size_t j = 0;
        for (const char *p = cmd_at(k)->name; *p != '\0' && j + 1 < sizeof name; p++)
            name[j++] = (*p >= 'A' && *p <= 'Z') ? (char)(*p + 32) : *p;
        name[j] = '\0';
        reply_bulk(c, name, j);
        reply_map(c, 2);
        reply_bulk(c, "calls", 5);
        reply_int(c, (int64_t)calls[k]);
        reply_bulk(c, "histogram_usec", 14);
        reply_map(c, grows);
        uint64_t cum = 0;
        for (unsigned b = 0; b < SRV_LAT_BUCKETS; b++) {
            cum += lat[b];
            if (lat[b] == 0)
                continue;
            /* the last bucket holds everything slower: its bound is 2^23 */
            reply_int(c, (int64_t)1 << b);
            reply_int(c, (int64_t)cum);
        }
    }
}

/* Otherwise pcached records no latency events (Redis with latency-monitor-threshold
 * 0, its default): every list is empty, as Redis answers then. */
static void cmd_latency(srv_worker *w, conn *c, unsigned argc, const char **argv,
                        const size_t *argl)
{
    static const char *help[] = {
        "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return a human readable latency analysis report.",
        "GRAPH <event>",
        "    Return an ASCII latency graph for the <event> class.",
        "HISTORY <event>",
        "    Return time-latency samples for the <event> class.",
        "LATEST",
        "    Return the latest latency samples for all events.",
        "RESET [<event> ...]",
        "    Reset latency data of one or more <event> classes.",
        "    (default: reset all data for all event classes)",
        "HISTOGRAM [COMMAND ...]",
        "    Return a cumulative distribution of latencies in the format of a histogram for "
        "the specified command names.",
        "    If no commands are specified then all histograms are replied.",
        "HELP",
        "    Prints this help.",
    };
    static const char doctor[] =
        "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis "
        "instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in "
        "order to enable it. If we weren't in a deep space mission I'd suggest to take a look "
        "at https://redis.io/topics/latency-monitor.\n";
    static const struct {
        const char *name;
        int arity; /* as Redis's subcommand table: n exact, -n at least n */
    } subs[] = {{"HISTORY", 3}, {"GRAPH", 3},      {"LATEST", 2}, {"DOCTOR", 2},
                {"RESET", -2},  {"HISTOGRAM", -2}, {"HELP", 2}};
    const char *sub = argv[1];
    size_t sl = argl[1];
    for (unsigned i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        if (!arg_eq(sub, sl, subs[i].name))
            continue;
        int a = subs[i].arity;
        if ((a > 0 && argc != (unsigned)a) || (a < 0 && argc < (unsigned)-a)) {
            char lower[16] = "";
            for (size_t j = 0; subs[i].name[j] != '\0' && j + 1 < sizeof lower; j++)
                lower[j] = (char)(subs[i].name[j] | 0x20);
            reply_error(c, "ERR wrong number of arguments for 'latency|%s' command", lower);
            return;
        }
        if (i == 5) {
            latency_histogram(w, c, argc, argv, argl);
        } else if (i == 0 || i == 2) { /* HISTORY, LATEST */
            reply_array(c, 0);
        } else if (i == 1) {
            char ev[129];
            resp_sanitize(ev, sizeof ev, argv[2], argl[2]);
            reply_error(c, "ERR No samples available for event '%s'", ev);
        } else if (i == 3) {
            reply_bulk(c, doctor, sizeof doctor - 1);
        } else if (i == 4) {
            reply_int(c, 0);
        } else {
            reply_array(c, (int64_t)(sizeof help / sizeof help[0]));
            for (unsigned j = 0; j < sizeof help / sizeof help[0]; j++)
                reply_simple(c, help[j]);
        }
        return;
    }
    char name[129];
    resp_sanitize(name, sizeof name, sub, sl);
    reply_error(c, "ERR unknown subcommand '%s'. Try LATENCY HELP.", name);
}

const cmd_def cmd_keymove_table[] = {
    {"RENAME", 3, CMD_WRITE | CMD_ATOMIC, cmd_rename, 1, 2, 1},
    {"RENAMENX", 3, CMD_WRITE | CMD_FAST | CMD_ATOMIC, cmd_renamenx, 1, 2, 1},
    {"COPY", -3, CMD_WRITE | CMD_ATOMIC, cmd_copy, 1, 2, 1},
    {"MOVE", 3, CMD_WRITE | CMD_FAST | CMD_ATOMIC, cmd_move, 1, 1, 1},
    {"RANDOMKEY", 1, CMD_READONLY, cmd_randomkey, 0, 0, 0},
    {"TOUCH", -2, CMD_READONLY | CMD_FAST | CMD_SNAPSHOT, cmd_touch, 1, -1, 1},
    {"EXPIRETIME", 2, CMD_READONLY | CMD_FAST, cmd_expiretime, 1, 1, 1},
    {"PEXPIRETIME", 2, CMD_READONLY | CMD_FAST, cmd_pexpiretime, 1, 1, 1},
    {"TIME", 1, CMD_FAST, cmd_time, 0, 0, 0},
    {"WAIT", 3, 0, cmd_wait, 0, 0, 0},
    {"LATENCY", -2, CMD_ADMIN, cmd_latency, 0, 0, 0},
    {"SWAPDB", 3, CMD_WRITE | CMD_FAST, cmd_swapdb, 0, 0, 0}, /* dbmap.c */
};
const unsigned cmd_keymove_count = sizeof cmd_keymove_table / sizeof cmd_keymove_table[0];
