/*
 * cdbbench.c - a benchmark-only OpenSIPS module (never loaded in
 * production): drives any cachedb backend through the core's cachedb_funcs
 * vtable in C, inside the OpenSIPS process model, to measure cachedb_perf
 * against cachedb_local (opensips_cdb_bench.py; docs/benchmarks.md,
 * "Inside OpenSIPS").
 *
 *   cdbbench_fill(url, n)          makes the backend hold keys 0 .. n-1,
 *                                  "thid-%010u" (15 B), 200-byte values
 *                                  (keys already there are overwritten)
 *   cdbbench_run(url, ops, seed, get_pct, spread, n, $var(res))
 *                                  ops operations over keys 0 .. n-1:
 *                                  get_pct % get, the rest set; spread 1
 *                                  picks each key at random, 0 walks them
 *                                  in order from a seed-chosen start;
 *                                  $var(res) = "<ns per op> hits=<n>"
 *                                  url "none" times the loop alone (key
 *                                  choice and formatting), to subtract
 *   cdbbench_run_buf(...)          the same loop, its gets through get_buf
 *                                  into a buffer on the stack (no pkg copy)
 *                                  where the tree and the backend offer it
 *                                  (CACHEDB_HAVE_GET_BUF, CACHEDB_CAP_GET_BUF);
 *                                  $var(res) = "nobuf" where they do not
 *   cdbbench_check(url, $var(res))  the fetch path's edge cases (w_check);
 *                                  the end-to-end test calls it
 *
 * A get pays what every cachedb caller pays: the backend's pkg copy of the
 * value and its pkg_free. Timing is CLOCK_MONOTONIC around the loop only.
 * Each process opens its own connection on first use.
 */
#include <sr_module.h>
#include <dprint.h>
#include <mem/mem.h>
#include <pvar.h>
#include <route.h>
#include <ut.h>
#include <cachedb/cachedb.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define CB_MAX_CONS 8
#define CB_VLEN 200

static struct cb_con {
    char url[128];
    cachedb_funcs f;
    cachedb_con *con;
} cb_cons[CB_MAX_CONS];
static int cb_ncons;

static struct cb_con *cb_get(str *url)
{
    for (int i = 0; i < cb_ncons; i++)
        if (strlen(cb_cons[i].url) == (size_t)url->len &&
            memcmp(cb_cons[i].url, url->s, url->len) == 0)
            return &cb_cons[i];
    if (cb_ncons == CB_MAX_CONS || url->len >= (int)sizeof cb_cons[0].url)
        return NULL;
    struct cb_con *c = &cb_cons[cb_ncons];
    memcpy(c->url, url->s, url->len);
    c->url[url->len] = '\0';
    if (cachedb_bind_mod(url, &c->f) < 0 || (c->con = c->f.init(url)) == NULL) {
        LM_ERR("cannot open %.*s\n", url->len, url->s);
        return NULL;
    }
    cb_ncons++;
    return c;
}

/* "thid-%010u" without snprintf: the loop's own cost stays small next to
 * the backends' (and is measured, url "none"). */
static void cb_key(char *k, unsigned i)
{
    memcpy(k, "thid-", 5);
    for (int d = 14; d >= 5; d--) {
        k[d] = (char)('0' + i % 10);
        i /= 10;
    }
}

#define CB_KLEN 15

/* One get of the timed loop: through get (the backend's pkg copy and its
 * pkg_free, what every cachedb caller pays) or through get_buf (the value
 * copied into the caller's buffer, hit 0). 1 on a hit. */
static inline int cb_get_one(struct cb_con *c, str *k, bool buf)
{
#ifdef CACHEDB_HAVE_GET_BUF
    if (buf) {
        char out[4 * CB_VLEN];
        unsigned vlen = 0, needed = 0;
        return c->f.get_buf(c->con, k, out, sizeof out, &vlen, &needed) == 0;
    }
#else
    (void)buf;
#endif
    str r = {NULL, 0};
    /* a hit is 1 from most backends, 0 from the original cachedb_perf */
    if (c->f.get(c->con, k, &r) >= 0 && r.s != NULL) {
        pkg_free(r.s);
        return 1;
    }
    return 0;
}

/* The tree and the backend both offer get_buf. */
static bool cb_has_buf(struct cb_con *c)
{
#ifdef CACHEDB_HAVE_GET_BUF
    return c->f.get_buf != NULL && CACHEDB_CAPABILITY(&c->f, CACHEDB_CAP_GET_BUF);
#else
    (void)c;
    return false;
#endif
}

static int cb_set_res(struct sip_msg *msg, pv_spec_t *out, const char *s)
{
    pv_value_t pv;
    memset(&pv, 0, sizeof pv);
    pv.rs.s = (char *)s;
    pv.rs.len = (int)strlen(s);
    pv.flags = PV_VAL_STR;
    return pv_set_value(msg, out, 0, &pv) == 0 ? 1 : -1;
}

static int w_fill(struct sip_msg *msg, str *url, int *n)
{
    (void)msg;
    struct cb_con *c = cb_get(url);
    if (c == NULL || *n <= 0)
        return -1;
    char kbuf[CB_KLEN], vbuf[CB_VLEN];
    memset(vbuf, 'v', sizeof vbuf);
    str v = {vbuf, CB_VLEN};
    for (unsigned i = 0; i < (unsigned)*n; i++) {
        cb_key(kbuf, i);
        str k = {kbuf, CB_KLEN};
        if (c->f.set(c->con, &k, &v, 0) < 0) {
            LM_ERR("%.*s: set %u of %d failed\n", url->len, url->s, i, *n);
            return -1;
        }
    }
    return 1;
}

/* The key count comes with every run, not from the fill: the fill and the
 * runs may land in different SIP workers, and a count kept per process
 * made a worker that had not filled walk another size's keys. */
static int cb_run(struct sip_msg *msg, str *url, int *ops, int *seed, int *get_pct, int *spread,
                  int *nkeys, pv_spec_t *out, bool buf)
{
    struct cb_con *c = NULL;
    if (*nkeys <= 0) {
        LM_ERR("cdbbench_run: %d keys\n", *nkeys);
        return -1;
    }
    const unsigned cb_nkeys = (unsigned)*nkeys;
    if (!(url->len == 4 && memcmp(url->s, "none", 4) == 0) && (c = cb_get(url)) == NULL)
        return -1;
    if (buf && c != NULL && !cb_has_buf(c))
        return cb_set_res(msg, out, "nobuf");
    char kbuf[CB_KLEN], vbuf[CB_VLEN];
    memset(vbuf, 'w', sizeof vbuf);
    str v = {vbuf, CB_VLEN};
    uint64_t x = (uint64_t)*seed * 2654435761u + 1;
    unsigned hits = 0, next = (unsigned)(x % cb_nkeys), pct = (unsigned)*get_pct;
    volatile unsigned sink = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < *ops; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned ki;
        if (*spread) {
            ki = (unsigned)((x >> 8) % cb_nkeys);
        } else {
            ki = next;
            next = next + 1 == cb_nkeys ? 0 : next + 1;
        }
        cb_key(kbuf, ki);
        str k = {kbuf, CB_KLEN};
        bool is_get = x % 100 < pct;
        if (c == NULL) {
            sink += (unsigned char)kbuf[14] + is_get;
        } else if (!is_get) {
            c->f.set(c->con, &k, &v, 0);
        } else {
            hits += (unsigned)cb_get_one(c, &k, buf);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    (void)sink;
    double ns =
        ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)*ops;
    char nbuf[64];
    snprintf(nbuf, sizeof nbuf, "%.1f hits=%u", ns, hits);
    return cb_set_res(msg, out, nbuf);
}

static int w_run(struct sip_msg *msg, str *url, int *ops, int *seed, int *get_pct, int *spread,
                 int *nkeys, pv_spec_t *out)
{
    return cb_run(msg, url, ops, seed, get_pct, spread, nkeys, out, false);
}

static int w_run_buf(struct sip_msg *msg, str *url, int *ops, int *seed, int *get_pct,
                     int *spread, int *nkeys, pv_spec_t *out)
{
    return cb_run(msg, url, ops, seed, get_pct, spread, nkeys, out, true);
}

/* The fetch path through the core's vtable, as a cachedb caller sees it:
 * binary values with NUL bytes, the empty value, the largest value and one
 * byte more (refused), counters read as numbers and as text, a miss.
 * $var(res) = "ok" or "fail: <what>". For the end-to-end test. */
static int w_check(struct sip_msg *msg, str *url, pv_spec_t *out)
{
    struct cb_con *c = cb_get(url);
    const char *fail = NULL;
    static char big[(1 << 20) + 1];
    char bin[300];
    for (unsigned i = 0; i < sizeof bin; i++)
        bin[i] = (char)(i % 7 == 0 ? 0 : i * 31);
    for (unsigned i = 0; i < sizeof big; i++)
        big[i] = (char)(i * 13 + (i >> 9));
    struct {
        const char *key;
        char *val;
        int len;
        int want_set;
    } cases[] = {{"chk-bin", bin, (int)sizeof bin, 0},
                 {"chk-empty", bin, 0, 0},
                 {"chk-max", big, 1 << 20, 0},
                 {"chk-over", big, (1 << 20) + 1, -1}};
    if (c == NULL)
        fail = "no connection";
    for (unsigned i = 0; fail == NULL && i < sizeof cases / sizeof cases[0]; i++) {
        str k = {(char *)cases[i].key, (int)strlen(cases[i].key)};
        str v = {cases[i].val, cases[i].len};
        int rc = c->f.set(c->con, &k, &v, 0);
        if ((rc < 0 ? -1 : 0) != cases[i].want_set) {
            fail = cases[i].want_set ? "a value over the limit was stored" : "set failed";
            break;
        }
        str r = {NULL, 0};
        rc = c->f.get(c->con, &k, &r);
        if (cases[i].want_set != 0) {
            if (rc != -2)
                fail = "a refused value can be fetched";
        } else if (rc != 1 || r.len != cases[i].len ||
                   (r.len > 0 && memcmp(r.s, cases[i].val, (size_t)r.len) != 0)) {
            fail = "a fetched value differs from the stored one";
        }
        if (r.s != NULL)
            pkg_free(r.s);
    }
    if (fail == NULL) {
        str k = {"chk-ctr", 7}, r = {NULL, 0};
        int n = 0;
        c->f.remove(c->con, &k);
        if (c->f.add(c->con, &k, 5, 0, &n) < 0 || n != 5 || c->f.sub(c->con, &k, 2, 0, &n) < 0 ||
            n != 3)
            fail = "add/sub";
        else if (c->f.get_counter(c->con, &k, &n) < 0 || n != 3)
            fail = "get_counter";
        else if (c->f.get(c->con, &k, &r) != 1 || r.len != 1 || r.s[0] != '3')
            fail = "a counter fetched as text";
        if (r.s != NULL)
            pkg_free(r.s);
    }
    if (fail == NULL) {
        str k = {"chk-absent", 10}, r = {NULL, 0};
        if (c->f.get(c->con, &k, &r) != -2 || r.s != NULL)
            fail = "a miss";
    }
    pv_value_t pv;
    memset(&pv, 0, sizeof pv);
    char nbuf[96];
    pv.rs.s = nbuf;
    pv.rs.len = snprintf(nbuf, sizeof nbuf, "%s%s", fail ? "fail: " : "ok", fail ? fail : "");
    pv.flags = PV_VAL_STR;
    return pv_set_value(msg, out, 0, &pv) == 0 ? 1 : -1;
}

static const cmd_export_t cmds[] = {{"cdbbench_fill",
                                     (cmd_function)w_fill,
                                     {{CMD_PARAM_STR, 0, 0}, {CMD_PARAM_INT, 0, 0}, {0, 0, 0}},
                                     ALL_ROUTES},
                                    {"cdbbench_run",
                                     (cmd_function)w_run,
                                     {{CMD_PARAM_STR, 0, 0},
                                      {CMD_PARAM_INT, 0, 0},
                                      {CMD_PARAM_INT, 0, 0},
                                      {CMD_PARAM_INT, 0, 0},
                                      {CMD_PARAM_INT, 0, 0},
                                      {CMD_PARAM_INT, 0, 0},
                                      {CMD_PARAM_VAR, 0, 0},
                                      {0, 0, 0}},
                                     ALL_ROUTES},
                                    {"cdbbench_run_buf",
                                     (cmd_function)w_run_buf,
                                     {{CMD_PARAM_STR, 0, 0},
                                      {CMD_PARAM_INT, 0, 0},
                                      {CMD_PARAM_INT, 0, 0},
                                      {CMD_PARAM_INT, 0, 0},
                                      {CMD_PARAM_INT, 0, 0},
                                      {CMD_PARAM_INT, 0, 0},
                                      {CMD_PARAM_VAR, 0, 0},
                                      {0, 0, 0}},
                                     ALL_ROUTES},
                                    {"cdbbench_check",
                                     (cmd_function)w_check,
                                     {{CMD_PARAM_STR, 0, 0}, {CMD_PARAM_VAR, 0, 0}, {0, 0, 0}},
                                     ALL_ROUTES},
                                    {0, 0, {{0, 0, 0}}, 0}};

struct module_exports exports = {"cdbbench",
                                 MOD_TYPE_DEFAULT,
                                 MODULE_VERSION,
                                 DEFAULT_DLFLAGS,
                                 0,
                                 0,
                                 cmds,
                                 0,
                                 0,
                                 0,
                                 0,
                                 0,
                                 0,
                                 0,
                                 0,
                                 0,
                                 0,
                                 0,
                                 0,
                                 0};
