/*
 * cdbbench.c - a benchmark-only OpenSIPS module (never loaded in
 * production): drives any cachedb backend through the core's cachedb_funcs
 * vtable in C, inside the OpenSIPS process model, to measure cachedb_perf
 * against cachedb_local (docs/benchmarks.md, "OpenSIPS process model").
 *
 *   cdbbench_fill(url, n)                 stores n keys "thid-%010u" (16 B)
 *                                         with 200-byte values
 *   cdbbench_run(url, ops, seed, $var(ns)) ops operations over those n keys,
 *                                         95% get / 5% set (the th_store
 *                                         pattern); $var(ns) = ns per op
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
static unsigned cb_nkeys = 50000;

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

static int w_fill(struct sip_msg *msg, str *url, int *n)
{
    (void)msg;
    struct cb_con *c = cb_get(url);
    if (c == NULL)
        return -1;
    char kbuf[32], vbuf[CB_VLEN];
    memset(vbuf, 'v', sizeof vbuf);
    str v = {vbuf, CB_VLEN};
    cb_nkeys = (unsigned)*n;
    for (unsigned i = 0; i < cb_nkeys; i++) {
        str k = {kbuf, snprintf(kbuf, sizeof kbuf, "thid-%010u", i)};
        if (c->f.set(c->con, &k, &v, 0) < 0)
            return -1;
    }
    return 1;
}

static int w_run(struct sip_msg *msg, str *url, int *ops, int *seed, pv_spec_t *out)
{
    struct cb_con *c = cb_get(url);
    if (c == NULL)
        return -1;
    char kbuf[32], vbuf[CB_VLEN];
    memset(vbuf, 'w', sizeof vbuf);
    str v = {vbuf, CB_VLEN};
    uint64_t x = (uint64_t)*seed * 2654435761u + 1;
    unsigned hits = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < *ops; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        str k = {kbuf, snprintf(kbuf, sizeof kbuf, "thid-%010u", (unsigned)(x % cb_nkeys))};
        if (x % 20 == 0) {
            c->f.set(c->con, &k, &v, 0);
        } else {
            str r = {NULL, 0};
            if (c->f.get(c->con, &k, &r) > 0 && r.s != NULL) {
                hits++;
                pkg_free(r.s);
            }
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns =
        ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)*ops;
    pv_value_t pv;
    memset(&pv, 0, sizeof pv);
    char nbuf[64];
    pv.rs.s = nbuf;
    pv.rs.len = snprintf(nbuf, sizeof nbuf, "%.1f hits=%u", ns, hits);
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
                                      {CMD_PARAM_VAR, 0, 0},
                                      {0, 0, 0}},
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
