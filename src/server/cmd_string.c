/*
 * cmd_string.c - the value commands of the RESP door: GET SET (EX PX EXAT
 * PXAT NX XX KEEPTTL GET) SETEX PSETEX SETNX GETDEL GETEX MGET MSET INCR
 * DECR INCRBY DECRBY STRLEN.
 *
 * Each maps onto one engine call where the engine has the operation (set
 * with NX/XX/KEEPTTL, add/sub under the bucket lock). The compound ones -
 * SET ... GET, GETDEL, GETEX, MSET - are a read then a write, or several
 * writes, run as one engine transaction (CMD_ATOMIC, cmd_txn_atomic).
 * Reads land in the worker's scratch buffer (no allocation per GET).
 */
#include "resp.h"

#include <stdio.h>
#include <string.h>

/* Reads key into w->scratch. Returns 0 (*len set), PC_ENOTFOUND, or an
 * error code. */
static int read_value(srv_worker *w, conn *c, const char *k, size_t kl, size_t *len)
{
    if (kl > PC_KEY_MAX)
        return PC_ENOTFOUND; /* no key that long can exist: absent, as Redis answers */
    size_t need = 0;
    return pc_get_buf(c->coll, k, kl, w->scratch, w->scratch_cap, len, &need, NULL);
}

static void reply_read(srv_worker *w, conn *c, const char *k, size_t kl)
{
    size_t len = 0;
    int rc = read_value(w, c, k, kl, &len);
    if (rc == 0)
        reply_bulk(c, w->scratch, len);
    else if (rc == PC_ENOTFOUND)
        reply_nil(c);
    else
        reply_pc_error(c, rc);
}

static void cmd_get(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)argc;
    reply_read(w, c, argv[1], argl[1]);
}

/* Parses an expiry argument of unit "s" or "ms", relative or absolute
 * (unix time), into a ttl in ms from now, with Redis's limits: the number
 * must be positive, seconds must fit in ms, and a relative time must not
 * overflow once the current time is added; an absolute time is taken as
 * it is. Returns 0; 1 when the absolute time is already past; -1 after
 * queuing the error reply. */
static int parse_expire(conn *c, const char *p, size_t n, int unit_ms, int absolute,
                        const char *cmd, int64_t *ttl)
{
    int64_t v;
    if (arg_i64(p, n, &v) != 0) {
        reply_error(c, "ERR value is not an integer or out of range");
        return -1;
    }
    int64_t now = pc_wall_ms();
    if (v <= 0 || (!unit_ms && v > INT64_MAX / 1000) ||
        (!absolute && (unit_ms ? v : v * 1000) > INT64_MAX - now)) {
        reply_error(c, "ERR invalid expire time in '%s' command", cmd);
        return -1;
    }
    int64_t ms = unit_ms ? v : v * 1000;
    if (absolute) {
        if (ms <= now)
            return 1;
        ms -= now;
    }
    *ttl = ms;
    return 0;
}

/* The expiry options of SET and GETEX, as Redis parses them: one kind at a
 * time (EX, PX, EXAT, PXAT, KEEPTTL for SET, PERSIST for GETEX), the same
 * kind may repeat and its last value is the one taken (and the only one
 * parsed). */
enum { EXP_NONE, EXP_EX, EXP_PX, EXP_EXAT, EXP_PXAT, EXP_KEEPTTL, EXP_PERSIST };

/* Whether argument a is an expiry option; sets *kind. */
static int exp_option(const char *a, size_t n, int *kind)
{
    static const char *names[] = {NULL, "EX", "PX", "EXAT", "PXAT", "KEEPTTL", "PERSIST"};
    for (int k = EXP_EX; k <= EXP_PERSIST; k++)
        if (arg_eq(a, n, names[k])) {
            *kind = k;
            return 1;
        }
    return 0;
}

/* Takes expiry option argv[*i] of kind k into *kind / *val: 0, or -1 after
 * queuing the syntax error (another kind already given, no value). */
static int exp_take(conn *c, unsigned argc, unsigned *i, int k, int *kind, unsigned *val)
{
    if (*kind != EXP_NONE && *kind != k) {
        reply_error(c, "ERR syntax error");
        return -1;
    }
    *kind = k;
    if (k == EXP_KEEPTTL || k == EXP_PERSIST)
        return 0;
    if (*i + 1 >= argc) {
        reply_error(c, "ERR syntax error");
        return -1;
    }
    *val = ++*i;
    return 0;
}

/* Parses the expiry argv[val] of kind into *ttl: 0, 1 (an absolute time
 * already past), -1 (error queued). */
static int exp_parse(conn *c, const char **argv, const size_t *argl, int kind, unsigned val,
                     const char *cmd, int64_t *ttl)
{
    int unit_ms = kind == EXP_PX || kind == EXP_PXAT;
    int absolute = kind == EXP_EXAT || kind == EXP_PXAT;
    return parse_expire(c, argv[val], argl[val], unit_ms, absolute, cmd, ttl);
}

static void cmd_set(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    unsigned flags = 0, val = 0;
    int want_get = 0, kind = EXP_NONE, past = 0;
    int64_t ttl = 0;
    for (unsigned i = 3; i < argc; i++) {
        const char *a = argv[i];
        size_t n = argl[i];
        int k;
        if (arg_eq(a, n, "NX") && !(flags & PC_SET_XX))
            flags |= PC_SET_NX;
        else if (arg_eq(a, n, "XX") && !(flags & PC_SET_NX))
            flags |= PC_SET_XX;
        else if (arg_eq(a, n, "GET"))
            want_get = 1;
        else if (exp_option(a, n, &k) && k != EXP_PERSIST) {
            if (exp_take(c, argc, &i, k, &kind, &val) != 0)
                return;
        } else {
            reply_error(c, "ERR syntax error");
            return;
        }
    }
    if (kind == EXP_KEEPTTL) {
        flags |= PC_SET_KEEPTTL;
    } else if (kind != EXP_NONE) {
        int r = exp_parse(c, argv, argl, kind, val, "set", &ttl);
        if (r < 0)
            return;
        past = r == 1;
    }
    if (want_get && !c->atomic) {
        /* the read and the write at one instant (cmd_txn_atomic) */
        cmd_txn_atomic(w, c, cmd_set, argc, argv, argl);
        return;
    }
    const char *k = argv[1], *v = argv[2];
    size_t kl = argl[1], vl = argl[2];
    int old_rc = PC_ENOTFOUND;
    size_t old_len = 0;
    if (want_get) {
        old_rc = read_value(w, c, k, kl, &old_len);
        if (old_rc != 0 && old_rc != PC_ENOTFOUND) {
            reply_pc_error(c, old_rc);
            return;
        }
    }
    int rc;
    if (past) {
        /* an absolute time already gone: the key ends up absent, as Redis */
        pc_meta m;
        int present = pc_probe(c->coll, k, kl, &m) == 0;
        if (((flags & PC_SET_NX) && present) || ((flags & PC_SET_XX) && !present))
            rc = present ? PC_EEXIST : PC_ENOTFOUND;
        else {
            (void)pc_remove(c->coll, k, kl);
            rc = 0;
        }
    } else {
        rc = pc_set(c->coll, k, kl, v, vl, ttl, flags);
    }
    if (rc != 0 && rc != PC_EEXIST && rc != PC_ENOTFOUND) {
        reply_pc_error(c, rc);
        return;
    }
    if (want_get) {
        if (old_rc == 0)
            reply_bulk(c, w->scratch, old_len);
        else
            reply_nil(c);
    } else if (rc == 0) {
        reply_ok(c);
    } else {
        reply_nil(c);
    }
}

static void set_ttl_cmd(conn *c, const char **argv, const size_t *argl, int unit_ms,
                        const char *name)
{
    int64_t ttl;
    if (parse_expire(c, argv[2], argl[2], unit_ms, 0, name, &ttl) != 0)
        return;
    int rc = pc_set(c->coll, argv[1], argl[1], argv[3], argl[3], ttl, 0);
    if (rc == 0)
        reply_ok(c);
    else
        reply_pc_error(c, rc);
}

static void cmd_setex(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc;
    set_ttl_cmd(c, argv, argl, 0, "setex");
}

static void cmd_psetex(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc;
    set_ttl_cmd(c, argv, argl, 1, "psetex");
}

static void cmd_setnx(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc;
    reply_nx(c, pc_set(c->coll, argv[1], argl[1], argv[2], argl[2], 0, PC_SET_NX));
}

/* read_value, answering the client itself when there is no value: nil
 * for an absent key, the error otherwise. 0 when *len bytes were read. */
static int read_or_reply(srv_worker *w, conn *c, const char *k, size_t kl, size_t *len)
{
    int rc = read_value(w, c, k, kl, len);
    if (rc == PC_ENOTFOUND)
        reply_nil(c);
    else if (rc != 0)
        reply_pc_error(c, rc);
    return rc;
}

static void cmd_getdel(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)argc;
    size_t len = 0;
    if (read_or_reply(w, c, argv[1], argl[1], &len) != 0)
        return;
    (void)pc_remove(c->coll, argv[1], argl[1]);
    reply_bulk(c, w->scratch, len);
}

static void cmd_getex(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    int64_t ttl = -1; /* -1 = leave the expiry alone */
    int past = 0, kind = EXP_NONE;
    unsigned val = 0;
    for (unsigned i = 2; i < argc; i++) {
        int k;
        if (!exp_option(argv[i], argl[i], &k) || k == EXP_KEEPTTL) {
            reply_error(c, "ERR syntax error");
            return;
        }
        if (exp_take(c, argc, &i, k, &kind, &val) != 0)
            return;
    }
    if (kind == EXP_PERSIST) {
        ttl = 0;
    } else if (kind != EXP_NONE) {
        int r = exp_parse(c, argv, argl, kind, val, "getex", &ttl);
        if (r < 0)
            return;
        past = r == 1;
    }
    size_t len = 0;
    if (read_or_reply(w, c, argv[1], argl[1], &len) != 0)
        return;
    if (past)
        (void)pc_remove(c->coll, argv[1], argl[1]);
    else if (ttl >= 0)
        (void)pc_expire(c->coll, argv[1], argl[1], ttl);
    reply_bulk(c, w->scratch, len);
}

static void cmd_mget(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    reply_array(c, argc - 1);
    for (unsigned i = 1; i < argc; i++) {
        size_t len = 0;
        int rc = read_value(w, c, argv[i], argl[i], &len);
        if (rc == 0)
            reply_bulk(c, w->scratch, len);
        else
            reply_nil(c); /* Redis: MGET never fails per key */
    }
}

static void cmd_mset(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w;
    if (arg_pairs_check(c, "mset", argc, argl) != 0)
        return;
    for (unsigned i = 1; i < argc; i += 2) {
        int rc = pc_set(c->coll, argv[i], argl[i], argv[i + 1], argl[i + 1], 0, 0);
        if (rc != 0) {
            reply_pc_error(c, rc);
            return;
        }
    }
    reply_ok(c);
}

static void incr_by(conn *c, const char *k, size_t kl, int64_t delta, int sub)
{
    int64_t res;
    int rc = sub ? pc_sub(c->coll, k, kl, delta, 0, &res) : pc_add(c->coll, k, kl, delta, 0, &res);
    if (rc == 0)
        reply_int(c, res);
    else
        reply_pc_error(c, rc);
}

static void cmd_incr(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc;
    incr_by(c, argv[1], argl[1], 1, 0);
}

static void cmd_decr(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc;
    incr_by(c, argv[1], argl[1], 1, 1);
}

static void cmd_incrby(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc;
    int64_t d;
    if (arg_i64(argv[2], argl[2], &d) != 0) {
        reply_error(c, "ERR value is not an integer or out of range");
        return;
    }
    incr_by(c, argv[1], argl[1], d, 0);
}

static void cmd_decrby(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc;
    int64_t d;
    if (arg_i64(argv[2], argl[2], &d) != 0) {
        reply_error(c, "ERR value is not an integer or out of range");
        return;
    }
    if (d == INT64_MIN) {
        reply_error(c, "ERR decrement would overflow");
        return;
    }
    incr_by(c, argv[1], argl[1], d, 1);
}

static void cmd_strlen(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)argc;
    pc_meta m;
    int rc = argl[1] > PC_KEY_MAX ? PC_ENOTFOUND : pc_probe(c->coll, argv[1], argl[1], &m);
    if (rc == PC_ENOTFOUND) {
        reply_int(c, 0);
        return;
    }
    if (rc == 0 && m.is_counter) { /* a counter's length is that of its decimal form */
        size_t len = 0;
        rc = read_value(w, c, argv[1], argl[1], &len);
        if (rc == PC_ENOTFOUND) {
            reply_int(c, 0);
            return;
        }
        m.vlen = len;
    }
    if (rc != 0)
        reply_pc_error(c, rc);
    else
        reply_int(c, (int64_t)m.vlen);
}

const cmd_def cmd_string_table[] = {
    {"GET", 2, CMD_READONLY | CMD_FAST, cmd_get, 1, 1, 1},
    {"SET", -3, CMD_WRITE, cmd_set, 1, 1, 1},
    {"SETEX", 4, CMD_WRITE, cmd_setex, 1, 1, 1},
    {"PSETEX", 4, CMD_WRITE, cmd_psetex, 1, 1, 1},
    {"SETNX", 3, CMD_WRITE | CMD_FAST, cmd_setnx, 1, 1, 1},
    {"GETDEL", 2, CMD_WRITE | CMD_FAST | CMD_ATOMIC, cmd_getdel, 1, 1, 1},
    {"GETEX", -2, CMD_WRITE | CMD_FAST | CMD_ATOMIC, cmd_getex, 1, 1, 1},
    {"MGET", -2, CMD_READONLY | CMD_FAST | CMD_SNAPSHOT, cmd_mget, 1, -1, 1},
    {"MSET", -3, CMD_WRITE | CMD_ATOMIC, cmd_mset, 1, -1, 2},
    {"INCR", 2, CMD_WRITE | CMD_FAST, cmd_incr, 1, 1, 1},
    {"DECR", 2, CMD_WRITE | CMD_FAST, cmd_decr, 1, 1, 1},
    {"INCRBY", 3, CMD_WRITE | CMD_FAST, cmd_incrby, 1, 1, 1},
    {"DECRBY", 3, CMD_WRITE | CMD_FAST, cmd_decrby, 1, 1, 1},
    {"STRLEN", 2, CMD_READONLY | CMD_FAST, cmd_strlen, 1, 1, 1},
};
const unsigned cmd_string_count = sizeof cmd_string_table / sizeof cmd_string_table[0];
