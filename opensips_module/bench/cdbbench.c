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
 *                                  $var(res) = "<ns per op> hits=<n>
 *                                  cpu=<CPU ns per op> frags=<pkg heap
 *                                  fragments after the loop>"
 *                                  url "none" times the loop alone (key
 *                                  choice and formatting), to subtract
 *   cdbbench_run_buf(...)          the same loop, its gets through get_buf
 *                                  into a buffer on the stack (no pkg copy)
 *                                  where the tree and the backend offer it
 *                                  (CACHEDB_HAVE_GET_BUF, CACHEDB_CAP_GET_BUF);
 *                                  $var(res) = "nobuf" where they do not
 *   cdbbench_check(url, $var(res))  the fetch path's edge cases (w_check);
 *                                  the end-to-end test calls it
 *   cdbbench_check_buf(url, $var(res))
 *                                  every return case of get_buf (w_check_buf);
 *                                  "absent: ..." when the core or backend
 *                                  has no get_buf
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
    /* wall time, and the process's CPU time: on a loaded machine a loop is
     * descheduled for most of its wall time, the CPU time is its own cost */
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
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
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    (void)sink;
    double ns =
        ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)*ops;
    double cpu =
        ((double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec)) / (double)*ops;
    /* the pkg heap's fragment count: what tells a fresh heap (one large
     * free fragment) from one that carried SIP traffic */
    unsigned long frags = 0;
#ifdef PKG_MALLOC
    struct mem_info mi;
    memset(&mi, 0, sizeof mi);
    pkg_info(&mi);
    frags = mi.total_frags;
#endif
    char nbuf[96];
    snprintf(nbuf, sizeof nbuf, "%.1f hits=%u cpu=%.1f frags=%lu", ns, hits, cpu, frags);
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

#ifdef CACHEDB_HAVE_GET_BUF
/* One get_buf call with *vlen / *needed set to garbage first (the contract
 * zeroes them), checked against the expected return, length and need.
 * want_vlen is also compared byte for byte with want. NULL or what failed. */
static const char *cb_buf_case(struct cb_con *c, const char *key, int klen, char *buf,
                               unsigned buflen, int use_needed, int want_rc, const char *want,
                               unsigned want_vlen, unsigned want_needed)
{
    str k = {(char *)key, klen};
    unsigned vlen = 0xdeadbeefu, needed = 0xdeadbeefu;
    int rc = c->f.get_buf(c->con, &k, buf, buflen, &vlen, use_needed ? &needed : NULL);
    if (rc != want_rc)
        return "an unexpected return code";
    if (rc != 0 && vlen != 0)
        return "*vlen not zeroed";
    if (use_needed && needed != want_needed)
        return rc == -3 ? "*needed is not the size required" : "*needed not zeroed";
    if (rc == 0 && (vlen != want_vlen || (vlen > 0 && memcmp(buf, want, vlen) != 0)))
        return "the value read differs from the stored one";
    return NULL;
}

/* Every case of get_buf's contract (cachedb.h) through the core's vtable:
 * a hit into an exact-size buffer (binary, NUL bytes), too small by one
 * byte (-3, *needed, with and without needed), the empty value in a
 * zero-length buffer, the largest value (1 MiB) and one byte short, the
 * longest key and one byte more (-1), a counter as text, a miss, an
 * expired key (-2), a NULL buffer (-1); *vlen / *needed zeroed each time. */
static const char *cb_check_buf(struct cb_con *c)
{
    static char big[1 << 20], key[65536];
    char bin[300], small[8];
    const char *f = NULL;
    for (unsigned i = 0; i < sizeof bin; i++)
        bin[i] = (char)(i % 7 == 0 ? 0 : i * 31);
    for (unsigned i = 0; i < sizeof big; i++)
        big[i] = (char)(i * 17 + (i >> 11));
    memset(key, 'k', sizeof key);
    struct {
        const char *key;
        int klen;
        char *val;
        int len;
    } fills[] = {{"buf-bin", 7, bin, (int)sizeof bin}, {"buf-empty", 9, bin, 0},
                {"buf-max", 7, big, (int)sizeof big}, {key, 65535, bin, 5}};
    for (unsigned i = 0; i < sizeof fills / sizeof fills[0]; i++) {
        str k = {(char *)fills[i].key, fills[i].klen}, v = {fills[i].val, fills[i].len};
        if (c->f.set(c->con, &k, &v, 0) < 0)
            return "set failed";
    }
    static char out[1 << 20];
    if ((f = cb_buf_case(c, "buf-bin", 7, out, sizeof bin, 1, 0, bin, sizeof bin, 0)) ||
        (f = cb_buf_case(c, "buf-bin", 7, out, sizeof out, 0, 0, bin, sizeof bin, 0)) ||
        (f = cb_buf_case(c, "buf-bin", 7, out, sizeof bin - 1, 1, -3, NULL, 0, sizeof bin)) ||
        (f = cb_buf_case(c, "buf-bin", 7, out, sizeof bin - 1, 0, -3, NULL, 0, 0)) ||
        (f = cb_buf_case(c, "buf-bin", 7, small, 0, 1, -3, NULL, 0, sizeof bin)) ||
        (f = cb_buf_case(c, "buf-empty", 9, small, 0, 1, 0, NULL, 0, 0)) ||
        (f = cb_buf_case(c, "buf-max", 7, out, sizeof big, 1, 0, big, sizeof big, 0)) ||
        (f = cb_buf_case(c, "buf-max", 7, out, sizeof big - 1, 1, -3, NULL, 0, sizeof big)) ||
        (f = cb_buf_case(c, key, 65535, small, sizeof small, 1, 0, bin, 5, 0)) ||
        (f = cb_buf_case(c, key, 65536, small, sizeof small, 1, -1, NULL, 0, 0)) ||
        (f = cb_buf_case(c, "buf-absent", 10, small, sizeof small, 1, -2, NULL, 0, 0)))
        return f;
    str k = {"buf-ctr", 7}, v = {"x", 1};
    int n = 0;
    c->f.remove(c->con, &k);
    if (c->f.add(c->con, &k, 42, 0, &n) < 0 ||
        (f = cb_buf_case(c, "buf-ctr", 7, small, sizeof small, 1, 0, "42", 2, 0)) ||
        (f = cb_buf_case(c, "buf-ctr", 7, small, 1, 1, -3, NULL, 0, 2)))
        return f ? f : "add";
    /* a NULL buffer is a malformed request even for an empty value */
    if ((f = cb_buf_case(c, "buf-empty", 9, NULL, 0, 1, -1, NULL, 0, 0)))
        return f;
    /* expiry: a one-second TTL, polled (at most 5 s) until it lapses */
    k = (str){"buf-ttl", 7};
    if (c->f.set(c->con, &k, &v, 1) < 0 ||
        (f = cb_buf_case(c, "buf-ttl", 7, small, sizeof small, 1, 0, "x", 1, 0)))
        return f ? f : "set with a TTL";
    struct timespec t0, now, pause = {0, 20 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned vlen = 0;
    while (c->f.get_buf(c->con, &k, small, sizeof small, &vlen, NULL) == 0) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 5)
            return "a key with a one-second TTL still hits after 5 s";
        nanosleep(&pause, NULL);
    }
    return cb_buf_case(c, "buf-ttl", 7, small, sizeof small, 1, -2, NULL, 0, 0);
}
#endif

static int w_check_buf(struct sip_msg *msg, str *url, pv_spec_t *out)
{
    struct cb_con *c = cb_get(url);
    const char *res = "no connection";
    if (c != NULL) {
#ifdef CACHEDB_HAVE_GET_BUF
        if (c->f.get_buf == NULL || !CACHEDB_CAPABILITY(&c->f, CACHEDB_CAP_GET_BUF))
            res = "absent: the backend offers no get_buf";
        else if ((res = cb_check_buf(c)) == NULL)
            res = "ok";
#else
        res = "absent: the core has no get_buf (no CACHEDB_HAVE_GET_BUF)";
#endif
    }
    pv_value_t pv;
    memset(&pv, 0, sizeof pv);
    char nbuf[128];
    pv.rs.s = nbuf;
    pv.rs.len = snprintf(nbuf, sizeof nbuf, "%s%s",
                         strncmp(res, "ok", 2) && strncmp(res, "absent", 6) ? "fail: " : "", res);
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
                                    {"cdbbench_check_buf",
                                     (cmd_function)w_check_buf,
                                     {{CMD_PARAM_STR, 0, 0}, {CMD_PARAM_VAR, 0, 0}, {0, 0, 0}},
                                     ALL_ROUTES},
                                    {0, 0, {{0, 0, 0}}, 0}};

/* modparam shape_heap = N: each process, at child init, allocates N pkg
 * blocks of pseudo-random sizes 16 .. 2015 bytes and frees every second
 * one. The live half pins the freed half, so the heap holds free fragments
 * of every small size class for the process's life: the state of a heap
 * that keeps long-lived allocations between transient ones (a documented
 * model of SIP traffic's heap; sipp traffic itself leaves F_MALLOC's heap
 * with 2-3 fragments, since it frees all it allocates). 0: off. */
static int cb_shape_heap;

static int cb_child_init(int rank)
{
    (void)rank;
    if (cb_shape_heap <= 0)
        return 0;
    void **blk = pkg_malloc(sizeof(void *) * (size_t)cb_shape_heap);
    if (blk == NULL)
        return -1;
    for (int i = 0; i < cb_shape_heap; i++)
        blk[i] = pkg_malloc(16 + (((unsigned)i * 2654435761u) >> 20) % 2000);
    for (int i = 0; i < cb_shape_heap; i += 2)
        if (blk[i] != NULL)
            pkg_free(blk[i]);
    /* blk itself and the odd blocks stay allocated on purpose */
    return 0;
}

static const param_export_t params[] = {{"shape_heap", INT_PARAM, &cb_shape_heap}, {0, 0, 0}};

struct module_exports exports = {"cdbbench",
                                 MOD_TYPE_DEFAULT,
                                 MODULE_VERSION,
                                 DEFAULT_DLFLAGS,
                                 0,
                                 0,
                                 cmds,
                                 0,
                                 params,
                                 0,
                                 0,
                                 0,
                                 0,
                                 0,
                                 0,
                                 0,
                                 0,
                                 0,
                                 cb_child_init,
                                 0};
