/*
 * cmd_rewrite.c - the value commands that rewrite a string: APPEND
 * GETRANGE SUBSTR SETRANGE GETSET MSETNX INCRBYFLOAT LCS, with Redis 7.0's
 * replies and errors (docs/pcached.md, section 3.1).
 *
 * The engine has no single operation for these (it has set, get, add), so
 * each read-modify-write command is a read followed by a write, in one
 * small function named rmw_<command> (the read, the change, the write and
 * nothing else). Their table entries carry CMD_ATOMIC: cmd_dispatch runs
 * the handler inside one engine transaction (cmd_txn_atomic), so the read
 * and the write happen at one instant for every other client, and a
 * conflicting writer makes the handler run again rather than be
 * overwritten.
 *
 * Values are built in the worker's scratch buffer (PC_VALUE_MAX + 64
 * bytes); a result longer than PC_VALUE_MAX is refused before anything is
 * written: Redis's 512 MB proto-max-bulk-len limit is the engine's value
 * limit here. A value read keeps its expiry where Redis keeps it (APPEND,
 * SETRANGE, INCRBYFLOAT); GETSET drops it, as SET does.
 */
#include "resp.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The LCS table is (len1 + 1) * (len2 + 1) 32-bit cells, allocated per
 * command: pcached refuses one over this size (Redis: proto-max-bulk-len). */
#define LCS_TABLE_MAX (128u * 1024u * 1024u)

static void reply_too_long(conn *c)
{
    reply_error(c, "ERR string exceeds maximum allowed size (values up to %u bytes)", PC_VALUE_MAX);
}

/* Reads key into w->scratch: 0 (*len set), PC_ENOTFOUND, or an error. A
 * key longer than the engine's limit cannot exist: absent. meta may be
 * NULL. */
static int read_scratch(srv_worker *w, pc_coll *coll, const char *k, size_t kl, size_t *len,
                        pc_meta *meta)
{
    if (kl > PC_KEY_MAX)
        return PC_ENOTFOUND;
    size_t need = 0;
    return pc_get_buf(coll, k, kl, w->scratch, w->scratch_cap, len, &need, meta);
}

/* ---- APPEND, SETRANGE ------------------------------------------------------------ */

/* read_scratch where an absent key reads as the empty string. */
static int read_or_empty(srv_worker *w, pc_coll *coll, const char *k, size_t kl, size_t *len)
{
    int rc = read_scratch(w, coll, k, kl, len, NULL);
    if (rc == PC_ENOTFOUND) {
        *len = 0;
        rc = 0;
    }
    return rc;
}

/* APPEND's read-modify-write: *total = the new length. 1 when the result
 * would pass PC_VALUE_MAX (nothing written). */
static int rmw_append(srv_worker *w, pc_coll *coll, const char *k, size_t kl, const char *v,
                      size_t vl, size_t *total)
{
    size_t len = 0;
    int rc = read_or_empty(w, coll, k, kl, &len);
    if (rc != 0)
        return rc;
    if (vl > PC_VALUE_MAX - len)
        return 1;
    memcpy(w->scratch + len, v, vl);
    rc = pc_set(coll, k, kl, w->scratch, len + vl, 0, PC_SET_KEEPTTL);
    if (rc == 0)
        *total = len + vl;
    return rc;
}

/* The reply of APPEND and SETRANGE: the value's new length, or why not
 * (rc 1: the value would pass PC_VALUE_MAX). */
static void reply_rmw(conn *c, int rc, size_t total)
{
    if (rc == 1)
        reply_too_long(c);
    else if (rc != 0)
        reply_pc_error(c, rc);
    else
        reply_int(c, (int64_t)total);
}

static void cmd_append(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)argc;
    size_t total = 0;
    int rc = rmw_append(w, c->coll, argv[1], argl[1], argv[2], argl[2], &total);
    reply_rmw(c, rc, total); /* rc first: total is set by the call */
}

/* SETRANGE's read-modify-write: the value grown with zero bytes to off +
 * vl when shorter, v written at off. *total = the new length. An empty v
 * writes nothing (the current length, 0 when absent). 1 when the result
 * would pass PC_VALUE_MAX. */
static int rmw_setrange(srv_worker *w, pc_coll *coll, const char *k, size_t kl, int64_t off,
                        const char *v, size_t vl, size_t *total)
{
    size_t len = 0;
    int rc = read_or_empty(w, coll, k, kl, &len);
    if (rc != 0)
        return rc;
    if (vl == 0) {
        *total = len;
        return 0;
    }
    if ((uint64_t)off > PC_VALUE_MAX || vl > PC_VALUE_MAX - (size_t)off)
        return 1;
    size_t end = (size_t)off + vl, nlen = end > len ? end : len;
    if ((size_t)off > len)
        memset(w->scratch + len, 0, (size_t)off - len);
    memcpy(w->scratch + off, v, vl);
    rc = pc_set(coll, k, kl, w->scratch, nlen, 0, PC_SET_KEEPTTL);
    if (rc == 0)
        *total = nlen;
    return rc;
}

static void cmd_setrange(srv_worker *w, conn *c, unsigned argc, const char **argv,
                         const size_t *argl)
{
    (void)argc;
    int64_t off;
    if (arg_i64(argv[2], argl[2], &off) != 0) {
        reply_error(c, "ERR value is not an integer or out of range");
        return;
    }
    if (off < 0) {
        reply_error(c, "ERR offset is out of range");
        return;
    }
    size_t total = 0;
    int rc = rmw_setrange(w, c->coll, argv[1], argl[1], off, argv[3], argl[3], &total);
    reply_rmw(c, rc, total);
}

/* ---- GETRANGE / SUBSTR ------------------------------------------------------------ */

static void cmd_getrange(srv_worker *w, conn *c, unsigned argc, const char **argv,
                         const size_t *argl)
{
    (void)argc;
    int64_t start, end;
    if (arg_i64(argv[2], argl[2], &start) != 0 || arg_i64(argv[3], argl[3], &end) != 0) {
        reply_error(c, "ERR value is not an integer or out of range");
        return;
    }
    size_t len = 0;
    int rc = read_scratch(w, c->coll, argv[1], argl[1], &len, NULL);
    if (rc == PC_ENOTFOUND) {
        reply_bulk(c, "", 0);
        return;
    }
    if (rc != 0) {
        reply_pc_error(c, rc);
        return;
    }
    /* Redis's index rules: negative counts from the end, both clamped */
    int64_t n = (int64_t)len;
    if (start < 0 && end < 0 && start > end) {
        reply_bulk(c, "", 0);
        return;
    }
    if (start < 0)
        start = n + start;
    if (end < 0)
        end = n + end;
    if (start < 0)
        start = 0;
    if (end < 0)
        end = 0;
    if (end >= n)
        end = n - 1;
    if (start > end || n == 0)
        reply_bulk(c, "", 0);
    else
        reply_bulk(c, w->scratch + start, (size_t)(end - start + 1));
}

/* ---- GETSET, MSETNX ----------------------------------------------------------------- */

/* GETSET's read-then-write: the old value in scratch (*old_rc 0, *old_len)
 * or absent (*old_rc PC_ENOTFOUND); the new value without expiry. */
static int rmw_getset(srv_worker *w, pc_coll *coll, const char *k, size_t kl, const char *v,
                      size_t vl, int *old_rc, size_t *old_len)
{
    int rc = read_scratch(w, coll, k, kl, old_len, NULL);
    if (rc != 0 && rc != PC_ENOTFOUND)
        return rc;
    *old_rc = rc;
    return pc_set(coll, k, kl, v, vl, 0, 0);
}

static void cmd_getset(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)argc;
    int old_rc = PC_ENOTFOUND;
    size_t old_len = 0;
    int rc = rmw_getset(w, c->coll, argv[1], argl[1], argv[2], argl[2], &old_rc, &old_len);
    if (rc != 0)
        reply_pc_error(c, rc);
    else if (old_rc == 0)
        reply_bulk(c, w->scratch, old_len);
    else
        reply_nil(c);
}

/* MSETNX's check-then-write: 0 when no key existed and every pair was
 * written (a key named twice takes its last value, as in Redis),
 * PC_EEXIST when one existed (nothing written). A key a concurrent writer
 * creates between the check and the writes is overwritten. */
static int rmw_msetnx(pc_coll *coll, unsigned argc, const char **argv, const size_t *argl)
{
    for (unsigned i = 1; i < argc; i += 2)
        if (pc_probe(coll, argv[i], argl[i], NULL) == 0)
            return PC_EEXIST;
    for (unsigned i = 1; i < argc; i += 2) {
        int rc = pc_set(coll, argv[i], argl[i], argv[i + 1], argl[i + 1], 0, 0);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void cmd_msetnx(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w;
    if (arg_pairs_check(c, "msetnx", argc, argl) != 0)
        return;
    reply_nx(c, rmw_msetnx(c->coll, argc, argv, argl));
}

/* ---- INCRBYFLOAT ------------------------------------------------------------------- */

/* Redis's string2ld: strtold over a NUL-terminated copy of at most 5119
 * bytes; no leading space, nothing after the number (a NUL included), no
 * NaN, no overflow. 0 or -1. */
static int parse_ld(const char *s, size_t n, long double *out)
{
    char buf[5 * 1024];
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    long double v = strtold(buf, &end);
    if (isspace((unsigned char)buf[0]) || end[0] != '\0' || (size_t)(end - buf) != n ||
        (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || fpclassify(v) == FP_ZERO)) ||
        errno == EINVAL || isnan(v))
        return -1;
    *out = v;
    return 0;
}

/* Redis's "human" long double text: %.17Lf with the trailing zeros (and a
 * bare '.') removed, "-0" written "0". Returns the length (0 when it does
 * not fit). */
static size_t format_ld(char *buf, size_t cap, long double v)
{
    int n = snprintf(buf, cap, "%.17Lf", v);
    if (n < 0 || (size_t)n + 1 > cap)
        return 0;
    size_t l = (size_t)n;
    if (memchr(buf, '.', l) != NULL) {
        while (l > 0 && buf[l - 1] == '0')
            l--;
        if (l > 0 && buf[l - 1] == '.')
            l--;
    }
    if (l == 2 && buf[0] == '-' && buf[1] == '0') {
        buf[0] = '0';
        l = 1;
    }
    buf[l] = '\0';
    return l;
}

enum { FLOAT_OK, FLOAT_NOTNUM, FLOAT_NANINF };

/* INCRBYFLOAT's read-modify-write: the result text in out (*outl); the
 * expiry kept. FLOAT_NOTNUM when the stored value is not a float,
 * FLOAT_NANINF when the result is not finite (nothing written), or a
 * negative engine code. */
static int rmw_incrbyfloat(srv_worker *w, pc_coll *coll, const char *k, size_t kl, long double incr,
                           char *out, size_t cap, size_t *outl)
{
    size_t len = 0;
    long double v = 0;
    int rc = read_scratch(w, coll, k, kl, &len, NULL);
    if (rc == 0) {
        if (parse_ld(w->scratch, len, &v) != 0)
            return FLOAT_NOTNUM;
    } else if (rc != PC_ENOTFOUND) {
        return rc;
    }
    v += incr;
    if (isnan(v) || isinf(v))
        return FLOAT_NANINF;
    *outl = format_ld(out, cap, v);
    return pc_set(coll, k, kl, out, *outl, 0, PC_SET_KEEPTTL);
}

static void cmd_incrbyfloat(srv_worker *w, conn *c, unsigned argc, const char **argv,
                            const size_t *argl)
{
    (void)argc;
    long double incr;
    /* Redis parses the stored value first, then the increment: the same
     * error for both, so the order does not show */
    if (parse_ld(argv[2], argl[2], &incr) != 0) {
        reply_error(c, "ERR value is not a valid float");
        return;
    }
    char out[5 * 1024];
    size_t outl = 0;
    int rc = rmw_incrbyfloat(w, c->coll, argv[1], argl[1], incr, out, sizeof out, &outl);
    if (rc == FLOAT_NOTNUM)
        reply_error(c, "ERR value is not a valid float");
    else if (rc == FLOAT_NANINF)
        reply_error(c, "ERR increment would produce NaN or Infinity");
    else if (rc != 0)
        reply_pc_error(c, rc);
    else
        reply_bulk(c, out, outl);
}

/* ---- LCS ---------------------------------------------------------------------------- */

struct lcs_opts {
    int len, idx, withmatchlen;
    int64_t minmatchlen;
};

/* Writes the IDX reply's matches (Redis's order: from the ends of the
 * strings backwards) into tmp; returns how many. T is the table. */
static int64_t lcs_matches(conn *tmp, const uint32_t *T, const unsigned char *a, size_t alen,
                           const unsigned char *b, size_t blen, const struct lcs_opts *o)
{
#define CELL(i, j) T[(j) + (i) * (blen + 1)]
    size_t i = alen, j = blen;
    size_t as = alen, ae = 0, bs = 0, be = 0; /* as == alen: no range open */
    int64_t count = 0;
    while (i > 0 && j > 0) {
        int emit = 0;
        if (a[i - 1] == b[j - 1]) {
            if (as == alen) {
                as = ae = i - 1;
                bs = be = j - 1;
            } else if (as == i && bs == j) {
                as--;
                bs--;
            } else {
                emit = 1;
            }
            if (as == 0 || bs == 0)
                emit = 1;
            i--;
            j--;
        } else {
            if (CELL(i - 1, j) > CELL(i, j - 1))
                i--;
            else
                j--;
            if (as != alen)
                emit = 1;
        }
        if (emit) {
            int64_t mlen = (int64_t)(ae - as + 1);
            if (o->minmatchlen == 0 || mlen >= o->minmatchlen) {
                reply_array(tmp, 2 + o->withmatchlen);
                reply_array(tmp, 2);
                reply_int(tmp, (int64_t)as);
                reply_int(tmp, (int64_t)ae);
                reply_array(tmp, 2);
                reply_int(tmp, (int64_t)bs);
                reply_int(tmp, (int64_t)be);
                if (o->withmatchlen)
                    reply_int(tmp, mlen);
                count++;
            }
            as = alen;
        }
    }
    return count;
#undef CELL
}

/* The LCS string itself, rebuilt backwards from the table into out. */
static void lcs_string(const uint32_t *T, const unsigned char *a, size_t alen,
                       const unsigned char *b, size_t blen, unsigned char *out)
{
#define CELL(i, j) T[(j) + (i) * (blen + 1)]
    size_t i = alen, j = blen, k = CELL(alen, blen);
    while (i > 0 && j > 0) {
        if (a[i - 1] == b[j - 1]) {
            out[--k] = a[i - 1];
            i--;
            j--;
        } else if (CELL(i - 1, j) > CELL(i, j - 1)) {
            i--;
        } else {
            j--;
        }
    }
#undef CELL
}

static void lcs_reply(conn *c, const unsigned char *a, size_t alen, const unsigned char *b,
                      size_t blen, const struct lcs_opts *o)
{
    uint64_t cells = (uint64_t)(alen + 1) * (blen + 1);
    if (cells > LCS_TABLE_MAX / sizeof(uint32_t)) {
        reply_error(c,
                    "ERR Insufficient memory, transient memory for LCS exceeds %u bytes "
                    "(pcached's limit)",
                    LCS_TABLE_MAX);
        return;
    }
    uint32_t *T = malloc((size_t)cells * sizeof *T);
    if (T == NULL) {
        reply_error(c, "ERR Insufficient memory, failed allocating transient memory for LCS");
        return;
    }
    for (size_t i = 0; i <= alen; i++)
        for (size_t j = 0; j <= blen; j++) {
            uint32_t *cell = &T[j + i * (blen + 1)];
            if (i == 0 || j == 0)
                *cell = 0;
            else if (a[i - 1] == b[j - 1])
                *cell = T[(j - 1) + (i - 1) * (blen + 1)] + 1;
            else {
                uint32_t up = T[j + (i - 1) * (blen + 1)], left = T[(j - 1) + i * (blen + 1)];
                *cell = up > left ? up : left;
            }
        }
    uint32_t total = T[blen + alen * (blen + 1)];
    if (o->idx) {
        conn tmp;
        memset(&tmp, 0, sizeof tmp);
        int64_t n = lcs_matches(&tmp, T, a, alen, b, blen, o);
        if (tmp.closing) {
            reply_error(c, "ERR Insufficient memory, failed allocating transient memory for LCS");
        } else {
            reply_map(c, 2); /* RESP3: a map, as Redis's addReplyMapLen */
            reply_bulk(c, "matches", 7);
            reply_array(c, n);
            out_add(c, tmp.out.p, tmp.out.len);
            reply_bulk(c, "len", 3);
            reply_int(c, total);
        }
        free(tmp.out.p);
    } else if (o->len) {
        reply_int(c, total);
    } else {
        unsigned char *s = malloc(total + 1u);
        if (s == NULL) {
            reply_error(c, "ERR Insufficient memory, failed allocating transient memory for LCS");
        } else {
            lcs_string(T, a, alen, b, blen, s);
            reply_bulk(c, s, total);
            free(s);
        }
    }
    free(T);
}

static void cmd_lcs(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w;
    struct lcs_opts o = {0, 0, 0, 0};
    void *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    /* Redis reads the keys first, then the options */
    int ra =
        argl[1] > PC_KEY_MAX ? PC_ENOTFOUND : pc_get(c->coll, argv[1], argl[1], &a, &alen, NULL);
    int rb =
        argl[2] > PC_KEY_MAX ? PC_ENOTFOUND : pc_get(c->coll, argv[2], argl[2], &b, &blen, NULL);
    if ((ra != 0 && ra != PC_ENOTFOUND) || (rb != 0 && rb != PC_ENOTFOUND)) {
        reply_pc_error(c, ra != 0 && ra != PC_ENOTFOUND ? ra : rb);
        goto out;
    }
    for (unsigned j = 3; j < argc; j++) {
        if (arg_eq(argv[j], argl[j], "IDX")) {
            o.idx = 1;
        } else if (arg_eq(argv[j], argl[j], "LEN")) {
            o.len = 1;
        } else if (arg_eq(argv[j], argl[j], "WITHMATCHLEN")) {
            o.withmatchlen = 1;
        } else if (arg_eq(argv[j], argl[j], "MINMATCHLEN") && j + 1 < argc) {
            if (arg_i64(argv[j + 1], argl[j + 1], &o.minmatchlen) != 0) {
                reply_error(c, "ERR value is not an integer or out of range");
                goto out;
            }
            if (o.minmatchlen < 0)
                o.minmatchlen = 0;
            j++;
        } else {
            reply_error(c, "ERR syntax error");
            goto out;
        }
    }
    if (o.idx && o.len) {
        reply_error(c, "ERR If you want both the length and indexes, please just use IDX.");
        goto out;
    }
    lcs_reply(c, ra == 0 ? a : (const void *)"", ra == 0 ? alen : 0, rb == 0 ? b : (const void *)"",
              rb == 0 ? blen : 0, &o);
out:
    free(a);
    free(b);
}

const cmd_def cmd_rewrite_table[] = {
    {"APPEND", 3, CMD_WRITE | CMD_ATOMIC, cmd_append, 1, 1, 1},
    {"GETRANGE", 4, CMD_READONLY, cmd_getrange, 1, 1, 1},
    {"SUBSTR", 4, CMD_READONLY, cmd_getrange, 1, 1, 1},
    {"SETRANGE", 4, CMD_WRITE | CMD_ATOMIC, cmd_setrange, 1, 1, 1},
    {"GETSET", 3, CMD_WRITE | CMD_FAST | CMD_ATOMIC, cmd_getset, 1, 1, 1},
    {"MSETNX", -3, CMD_WRITE | CMD_ATOMIC, cmd_msetnx, 1, -1, 2},
    {"INCRBYFLOAT", 3, CMD_WRITE | CMD_FAST | CMD_ATOMIC, cmd_incrbyfloat, 1, 1, 1},
    {"LCS", -3, CMD_READONLY | CMD_ATOMIC, cmd_lcs, 1, 2, 1},
};
const unsigned cmd_rewrite_count = sizeof cmd_rewrite_table / sizeof cmd_rewrite_table[0];
