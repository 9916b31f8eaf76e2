/*
 * cmd_keys.c - the key commands of the RESP door: DEL UNLINK EXISTS TYPE,
 * the expiry family (EXPIRE PEXPIRE EXPIREAT PEXPIREAT TTL PTTL PERSIST),
 * and the iteration family (KEYS SCAN DBSIZE FLUSHDB FLUSHALL), which runs
 * on the engine's lock-free walker: a KEYS or a FLUSHDB over a big
 * collection costs this worker's time, never a lock other workers wait on.
 *
 * Every value is a string to pcache, so TYPE answers "string" or "none".
 * EXPIRE's NX/XX/GT/LT read the current expiry, then set it: two atomic
 * steps, not one.
 */
#include "resp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void cmd_del(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    if (argc > 2 && !c->atomic) {
        /* several keys go at one instant, as in Redis (cmd_txn_atomic) */
        cmd_txn_atomic(w, c, cmd_del, argc, argv, argl);
        return;
    }
    int64_t n = 0;
    for (unsigned i = 1; i < argc; i++)
        n += pc_remove(c->coll, argv[i], argl[i]) == 0;
    reply_int(c, n);
}

static void cmd_exists(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w;
    int64_t n = 0;
    for (unsigned i = 1; i < argc; i++)
        n += pc_probe(c->coll, argv[i], argl[i], NULL) == 0;
    reply_int(c, n);
}

static void cmd_type(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc;
    reply_simple(c, pc_probe(c->coll, argv[1], argl[1], NULL) == 0 ? "string" : "none");
}

/* EXPIRE family: unit_ms, absolute as the command says. */
static void expire_generic(conn *c, unsigned argc, const char **argv, const size_t *argl,
                           int unit_ms, int absolute, const char *name)
{
    int64_t v;
    if (arg_i64(argv[2], argl[2], &v) != 0) {
        reply_error(c, "ERR value is not an integer or out of range");
        return;
    }
    int nx = 0, xx = 0, gt = 0, lt = 0;
    for (unsigned i = 3; i < argc; i++) {
        if (arg_eq(argv[i], argl[i], "NX"))
            nx = 1;
        else if (arg_eq(argv[i], argl[i], "XX"))
            xx = 1;
        else if (arg_eq(argv[i], argl[i], "GT"))
            gt = 1;
        else if (arg_eq(argv[i], argl[i], "LT"))
            lt = 1;
        else {
            char opt[64];
            resp_sanitize(opt, sizeof opt, argv[i], argl[i]);
            reply_error(c, "ERR Unsupported option %s", opt);
            return;
        }
    }
    if (nx && (xx || gt || lt)) {
        reply_error(c, "ERR NX and XX, GT or LT options at the same time are not compatible");
        return;
    }
    if (gt && lt) {
        reply_error(c, "ERR GT and LT options at the same time are not compatible");
        return;
    }
    if (!unit_ms && (v > INT64_MAX / 1000 || v < INT64_MIN / 1000)) {
        reply_error(c, "ERR invalid expire time in '%s' command", name);
        return;
    }
    int64_t ms = unit_ms ? v : v * 1000;
    /* Redis's rule: a relative time must not overflow once the current
     * time is added (an error); an absolute one is taken as it is, and one
     * in the past deletes. The remaining time is computed only for a
     * deadline ahead of now, so it cannot wrap. */
    int64_t now = pc_wall_ms();
    if (!absolute && ms > INT64_MAX - now) {
        reply_error(c, "ERR invalid expire time in '%s' command", name);
        return;
    }
    int64_t when = absolute ? ms : ms + now;
    ms = when <= now ? 0 : when - now;
    pc_meta m;
    if (pc_probe(c->coll, argv[1], argl[1], &m) != 0) {
        reply_int(c, 0);
        return;
    }
    int has = m.ttl_ms >= 0;
    if ((nx && has) || (xx && !has) || (gt && (!has || ms <= m.ttl_ms)) ||
        (lt && has && ms >= m.ttl_ms)) {
        reply_int(c, 0);
        return;
    }
    int rc =
        ms <= 0 ? pc_remove(c->coll, argv[1], argl[1]) : pc_expire(c->coll, argv[1], argl[1], ms);
    reply_int(c, rc == 0);
}

static void cmd_expire(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w;
    expire_generic(c, argc, argv, argl, 0, 0, "expire");
}

static void cmd_pexpire(srv_worker *w, conn *c, unsigned argc, const char **argv,
                        const size_t *argl)
{
    (void)w;
    expire_generic(c, argc, argv, argl, 1, 0, "pexpire");
}

static void cmd_expireat(srv_worker *w, conn *c, unsigned argc, const char **argv,
                         const size_t *argl)
{
    (void)w;
    expire_generic(c, argc, argv, argl, 0, 1, "expireat");
}

static void cmd_pexpireat(srv_worker *w, conn *c, unsigned argc, const char **argv,
                          const size_t *argl)
{
    (void)w;
    expire_generic(c, argc, argv, argl, 1, 1, "pexpireat");
}

static void ttl_generic(conn *c, const char *k, size_t kl, int unit_ms)
{
    pc_meta m;
    if (pc_probe(c->coll, k, kl, &m) != 0)
        reply_int(c, -2);
    else if (m.ttl_ms < 0)
        reply_int(c, -1);
    else
        reply_int(c, unit_ms ? m.ttl_ms : (m.ttl_ms + 500) / 1000);
}

static void cmd_ttl(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc;
    ttl_generic(c, argv[1], argl[1], 0);
}

static void cmd_pttl(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc;
    ttl_generic(c, argv[1], argl[1], 1);
}

static void cmd_persist(srv_worker *w, conn *c, unsigned argc, const char **argv,
                        const size_t *argl)
{
    (void)w, (void)argc;
    pc_meta m;
    if (pc_probe(c->coll, argv[1], argl[1], &m) != 0 || m.ttl_ms < 0) {
        reply_int(c, 0);
        return;
    }
    reply_int(c, pc_expire(c->coll, argv[1], argl[1], 0) == 0);
}

/* ---- iteration ------------------------------------------------------------------ */

/* Collects key names as RESP bulks in a side buffer (the count comes
 * first on the wire). */
struct key_list {
    conn tmp; /* only its out buffer is used */
    int64_t n;
    const char *glob; /* NULL = every key; else Redis's glob (redis_glob.c) */
    size_t glen;
};

static int collect_key(void *ctx, const pc_entry *e)
{
    struct key_list *kl = ctx;
    if (kl->glob != NULL && !srv_glob_match(kl->glob, kl->glen, e->key, e->klen, 0))
        return 0;
    reply_bulk(&kl->tmp, e->key, e->klen);
    kl->n++;
    return kl->tmp.closing ? PC_EHEAP : 0;
}

static void flush_key_list(conn *c, struct key_list *kl)
{
    reply_array(c, kl->n);
    out_add(c, kl->tmp.out.p, kl->tmp.out.len);
    free(kl->tmp.out.p);
}

/* KEYS and SCAN MATCH filter with Redis's own glob rules (redis_glob.c),
 * not the engine's: a malformed pattern finds what Redis finds. */
static void cmd_keys(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc;
    if (argl[1] > PC_GLOB_MAX) {
        reply_error(c, "ERR pattern too long (at most %u bytes)", PC_GLOB_MAX);
        return;
    }
    struct key_list kl;
    memset(&kl, 0, sizeof kl);
    if (!(argl[1] == 1 && argv[1][0] == '*')) {
        kl.glob = argv[1];
        kl.glen = argl[1];
    }
    int rc = pc_walk(c->coll, NULL, 0, 0, collect_key, &kl);
    if (rc != 0) {
        free(kl.tmp.out.p);
        reply_pc_error(c, rc);
        return;
    }
    flush_key_list(c, &kl);
}

static void cmd_scan(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w;
    /* Redis reads the cursor with strtoul over the argument as a C string
     * (up to its first NUL byte): no leading blank, an optional sign ("-1"
     * is the largest cursor, "+0" is 0), digits (leading zeros allowed),
     * nothing after them, within 64 bits; an empty string is cursor 0 */
    uint64_t cursor = 0;
    const char *cp = argv[1];
    const char *nul = memchr(cp, '\0', argl[1]);
    size_t cn = nul != NULL ? (size_t)(nul - cp) : argl[1], ci = 0;
    int neg = cn > 0 && cp[0] == '-';
    if (cn > 0 && (cp[0] == '-' || cp[0] == '+'))
        ci = 1;
    if (ci == cn && cn > 0) {
        reply_error(c, "ERR invalid cursor");
        return;
    }
    for (; ci < cn; ci++) {
        unsigned d = (unsigned)(cp[ci] - '0');
        if (d > 9 || cursor > (UINT64_MAX - d) / 10) {
            reply_error(c, "ERR invalid cursor");
            return;
        }
        cursor = cursor * 10 + d;
    }
    if (neg)
        cursor = (uint64_t)0 - cursor;
    const char *glob = NULL;
    size_t glen = 0;
    int64_t count = 10;
    int strings = 1;
    for (unsigned i = 2; i < argc; i += 2) {
        if (i + 1 >= argc) {
            reply_error(c, "ERR syntax error");
            return;
        }
        if (arg_eq(argv[i], argl[i], "MATCH")) {
            glob = argv[i + 1];
            glen = argl[i + 1];
            if (glen > PC_GLOB_MAX) {
                reply_error(c, "ERR pattern too long (at most %u bytes)", PC_GLOB_MAX);
                return;
            }
        } else if (arg_eq(argv[i], argl[i], "COUNT")) {
            if (arg_i64(argv[i + 1], argl[i + 1], &count) != 0) {
                reply_error(c, "ERR value is not an integer or out of range");
                return;
            }
            if (count < 1) {
                reply_error(c, "ERR syntax error");
                return;
            }
        } else if (arg_eq(argv[i], argl[i], "TYPE")) {
            strings = arg_eq(argv[i + 1], argl[i + 1], "string");
        } else {
            reply_error(c, "ERR syntax error");
            return;
        }
    }
    struct key_list kl;
    memset(&kl, 0, sizeof kl);
    uint64_t next = 0;
    int rc = 0;
    if (strings) {
        if (glob != NULL && !(glen == 1 && glob[0] == '*')) {
            kl.glob = glob;
            kl.glen = glen;
        }
        /* COUNT is Redis's "about this many keys": visit buckets COUNT at a
         * time until that many were found, the walk ended, or 64 x COUNT
         * buckets were visited (a sparse table answers short, never slow) */
        uint64_t visited = 0, budget = (uint64_t)count * 64;
        next = cursor;
        do {
            rc = pc_scan(c->coll, next, (uint64_t)count, NULL, 0, 0, collect_key, &kl, &next);
            visited += (uint64_t)count;
        } while (rc == 0 && next != 0 && kl.n < count && visited < budget);
        if (rc == PC_EINVAL) { /* a cursor past the end: the scan is over */
            rc = 0;
            next = 0;
        }
    }
    if (rc != 0) {
        free(kl.tmp.out.p);
        reply_pc_error(c, rc);
        return;
    }
    char cur[24];
    int n = snprintf(cur, sizeof cur, "%" PRIu64, next);
    reply_array(c, 2);
    reply_bulk(c, cur, (size_t)n);
    flush_key_list(c, &kl);
}

static void cmd_dbsize(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc, (void)argv, (void)argl;
    pc_coll_stats st;
    if (pc_coll_stats_get(c->coll, &st) != 0) {
        reply_error(c, "ERR cannot read the collection's stats");
        return;
    }
    reply_int(c, (int64_t)st.entries);
}

static int flush_args_ok(conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    if (argc == 2 && (arg_eq(argv[1], argl[1], "ASYNC") || arg_eq(argv[1], argl[1], "SYNC")))
        return 1;
    if (argc == 1)
        return 1;
    reply_error(c, "ERR syntax error");
    return 0;
}

static void cmd_flushdb(srv_worker *w, conn *c, unsigned argc, const char **argv,
                        const size_t *argl)
{
    (void)w;
    if (!flush_args_ok(c, argc, argv, argl))
        return;
    uint64_t n;
    int rc = pc_del_glob(c->coll, "*", 1, &n);
    if (rc == 0)
        reply_ok(c);
    else
        reply_pc_error(c, rc);
}

static void cmd_flushall(srv_worker *w, conn *c, unsigned argc, const char **argv,
                         const size_t *argl)
{
    if (!flush_args_ok(c, argc, argv, argl))
        return;
    for (unsigned i = 0; i < pc_coll_count(w->s->cache); i++) {
        uint64_t n;
        int rc = pc_del_glob(pc_coll_at(w->s->cache, i), "*", 1, &n);
        if (rc != 0) {
            reply_pc_error(c, rc);
            return;
        }
    }
    reply_ok(c);
}

const cmd_def cmd_keys_table[] = {
    {"DEL", -2, CMD_WRITE, cmd_del, 1, -1, 1},
    {"UNLINK", -2, CMD_WRITE | CMD_FAST, cmd_del, 1, -1, 1},
    {"EXISTS", -2, CMD_READONLY | CMD_FAST | CMD_SNAPSHOT, cmd_exists, 1, -1, 1},
    {"TYPE", 2, CMD_READONLY | CMD_FAST, cmd_type, 1, 1, 1},
    {"EXPIRE", -3, CMD_WRITE | CMD_FAST, cmd_expire, 1, 1, 1},
    {"PEXPIRE", -3, CMD_WRITE | CMD_FAST, cmd_pexpire, 1, 1, 1},
    {"EXPIREAT", -3, CMD_WRITE | CMD_FAST, cmd_expireat, 1, 1, 1},
    {"PEXPIREAT", -3, CMD_WRITE | CMD_FAST, cmd_pexpireat, 1, 1, 1},
    {"TTL", 2, CMD_READONLY | CMD_FAST, cmd_ttl, 1, 1, 1},
    {"PTTL", 2, CMD_READONLY | CMD_FAST, cmd_pttl, 1, 1, 1},
    {"PERSIST", 2, CMD_WRITE | CMD_FAST, cmd_persist, 1, 1, 1},
    {"KEYS", 2, CMD_READONLY, cmd_keys, 0, 0, 0},
    {"SCAN", -2, CMD_READONLY, cmd_scan, 0, 0, 0},
    {"DBSIZE", 1, CMD_READONLY | CMD_FAST, cmd_dbsize, 0, 0, 0},
    {"FLUSHDB", -1, CMD_WRITE, cmd_flushdb, 0, 0, 0},
    {"FLUSHALL", -1, CMD_WRITE, cmd_flushall, 0, 0, 0},
};
const unsigned cmd_keys_count = sizeof cmd_keys_table / sizeof cmd_keys_table[0];
