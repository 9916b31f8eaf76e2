/*
 * test_walk.c - the walker (pc_scan, pc_walk) and the glob operations built
 * on it (pc_del_glob, pc_ttl_glob), checked against a reference filter.
 *
 * The reference is the list of keys the test stored - plain strings, binary
 * keys with NUL bytes, keys full of glob metacharacters, native counters,
 * keys with a TTL, the empty key, and two keys that have already expired -
 * filtered with pc_glob_match (test_glob.c checks the matcher itself, so a
 * disagreement here is the walker's). For many globs the set of keys
 * pc_walk returns, and the set a pc_scan loop with a small max_buckets
 * returns, must equal the filter's answer, each key once, with its value
 * (PC_WALK_VALUES; counters as decimal), counter flag and TTL. The table is
 * left mid-growth with keys in overflow so the walker's routing of chains
 * is exercised. pc_del_glob and pc_ttl_glob must count exactly the matching
 * live keys and leave the others alone.
 *
 * The key tests are the scan guarantee of walk.c under concurrent change: a
 * forked child splits buckets, inserts, removes other keys that share a
 * bucket with the stable keys (so compaction moves the survivors) and
 * drains overflow, while the parent scans a few buckets per call for
 * seconds; every stable key must appear in every full scan. Once with
 * growth, once in a fixed-size table whose keys cycle between overflow and
 * their bucket. The ordered walk of saves runs against the same growing
 * child: every stable key exactly once, with its value, in order (a save
 * once missed keys that a split moved while their group was copied).
 * PCACHE_WALK_SECONDS lengthens those three (default 3 each).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pc_fixture.h"
#include "pc_testhooks.h"
#include "pcache.h"

#define check_rc(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr), want_ = (want);                                                          \
        if (rc_ != want_)                                                                          \
            fail_msg("%s = %d (%s), want %d (%s)", #expr, rc_, pc_strerror(rc_), want_,            \
                     pc_strerror(want_));                                                          \
    } while (0)

#define G(lit) (const unsigned char *)(lit), (sizeof(lit) - 1) /* a literal as bytes + length */

static void log_cb(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= PC_LOG_WARN)
        print_message("[pcache %d] %s\n", level, msg);
}

static pc_cache *mk_cache(const char *colls, size_t mem_mb, unsigned lf, unsigned budget)
{
    pc_config cfg;
    pc_fx_config(&cfg, colls, mem_mb);
    cfg.growth_load_factor = lf;
    cfg.growth_budget = budget;
    cfg.log.fn = log_cb;
    return pc_fx_create(&cfg);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)((rng >> 11) % n);
}

static void verify(pc_cache *c)
{
    char msg[512] = "";
    if (pc__test_verify(c, msg, sizeof msg) != PC_OK)
        fail_msg("pc__test_verify: %s", msg);
}

/* ---- the reference key list ------------------------------------------------ */
#define NK_MAX 4096
#define IDX_SIZE 16384 /* open-addressing index from key bytes to slot */
struct rkey {
    unsigned char k[40];
    size_t kl;
    unsigned char v[48];
    size_t vl;
    int ctr; /* a native counter of value cval */
    int64_t cval;
    int64_t ttl; /* the TTL last given, ms; 0 = none */
    int live;    /* stored and not expired, not deleted */
};
static struct rkey keys[NK_MAX];
static size_t nkeys;
static int idx_tab[IDX_SIZE];

static void add_key(const void *k, size_t kl, const void *v, size_t vl, int ctr, int64_t cval,
                    int64_t ttl, int live)
{
    assert_true(nkeys < NK_MAX && kl <= sizeof keys[0].k && vl <= sizeof keys[0].v);
    struct rkey *r = &keys[nkeys++];
    memcpy(r->k, k, kl);
    r->kl = kl;
    if (vl)
        memcpy(r->v, v, vl);
    r->vl = vl;
    r->ctr = ctr;
    r->cval = cval;
    r->ttl = ttl;
    r->live = live;
}

static long find_key(const void *k, size_t kl)
{
    for (uint64_t h = pc_hash(k, kl);; h++) {
        int i = idx_tab[h % IDX_SIZE];
        if (i < 0)
            return -1;
        if (keys[i].kl == kl && memcmp(keys[i].k, k, kl) == 0)
            return i;
    }
}

/* ~3300 keys of every shape. The two "gone:" keys get a 1 ms TTL. */
static void build_keys(void)
{
    char b[48], v[48];
    nkeys = 0;
    add_key("gone:str", 8, "x", 1, 0, 0, 1, 0);
    add_key("gone:ctr", 8, NULL, 0, 1, 5, 1, 0);
    add_key("", 0, "the empty key", 13, 0, 0, 0, 1);
    for (unsigned i = 0; i < 2000; i++) {
        int kl = snprintf(b, sizeof b, "user:%04u", i);
        int vl = snprintf(v, sizeof v, "val-%u", i);
        size_t extra = i % 7;
        memcpy(v + vl, "\0a*?[\\", extra); /* binary and glob bytes in values */
        add_key(b, (size_t)kl, v, i % 97 == 0 ? 0 : (size_t)vl + extra, 0, 0, 0, 1);
    }
    for (unsigned i = 0; i < 300; i++) {
        unsigned char k[10] = {'b', 'i', 'n', 0,  (unsigned char)(i >> 8), (unsigned char)i,
                               0,   'e', 'n', 'd'};
        add_key(k, sizeof k, k, sizeof k, 0, 0, 0, 1);
    }
    static const char *const shapes[][2] = {
        {"meta*", ""}, {"q?", ""}, {"br[", "]"}, {"bs\\", ""}, {"dash-", ""},
        {"bang!", ""}, {"^c", ""}, {"*", ""},    {"[", ""},    {"", "]"}};
    for (unsigned s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (unsigned i = 0; i < 40; i++) {
            int kl = snprintf(b, sizeof b, "%s%u%s", shapes[s][0], i, shapes[s][1]);
            add_key(b, (size_t)kl, "m", 1, 0, 0, 0, 1);
        }
    for (unsigned i = 0; i < 300; i++) {
        int kl = snprintf(b, sizeof b, "ctr:%u", i);
        int64_t cv = i == 0 ? INT64_MIN : i == 1 ? INT64_MAX : (int64_t)i * 7 - 500;
        add_key(b, (size_t)kl, NULL, 0, 1, cv, 0, 1);
    }
    for (unsigned i = 0; i < 300; i++) {
        int kl = snprintf(b, sizeof b, "ttl:%u", i);
        add_key(b, (size_t)kl, "t", 1, i % 10 == 0, (int64_t)i, 600000 + i * 10, 1);
    }
    for (int i = 0; i < IDX_SIZE; i++)
        idx_tab[i] = -1;
    for (size_t i = 0; i < nkeys; i++) {
        uint64_t h = pc_hash(keys[i].k, keys[i].kl);
        while (idx_tab[h % IDX_SIZE] >= 0)
            h++;
        idx_tab[h % IDX_SIZE] = (int)i;
    }
}

/* Stores every key, lets the "gone:" ones lapse, grows part of the way. */
static void load_keys(pc_cache *c, pc_coll *co)
{
    for (size_t i = 0; i < nkeys; i++) {
        const struct rkey *r = &keys[i];
        if (r->ctr)
            check_rc(pc_add(co, r->k, r->kl, r->cval, r->ttl, NULL), PC_OK);
        else
            check_rc(pc_set(co, r->k, r->kl, r->v, r->vl, r->ttl, 0), PC_OK);
    }
    sleep_ms(5);
    pc_maint_report rep;
    check_rc(pc_maintain(c, PC_MAINT_GROW, &rep), PC_OK);
}

/* ---- observing a walk ------------------------------------------------------- */
struct obs {
    unsigned cnt[NK_MAX];
    unsigned unknown, bad;
    int values;
};

static int obs_cb(void *ctx, const pc_entry *e)
{
    struct obs *o = ctx;
    long i = find_key(e->key, e->klen);
    if (i < 0) {
        if (o->unknown++ < 3)
            print_error("walk returned a key never stored (%zu bytes)\n", e->klen);
        return 0;
    }
    o->cnt[i]++;
    const struct rkey *r = &keys[i];
    char num[24];
    const void *want = r->v;
    size_t wl = r->vl;
    if (r->ctr) {
        wl = (size_t)snprintf(num, sizeof num, "%" PRId64, r->cval);
        want = num;
    }
    int ok = e->is_counter == r->ctr &&
             (r->ttl == 0 ? e->ttl_ms == -1 : (e->ttl_ms > 0 && e->ttl_ms <= r->ttl));
    if (o->values)
        ok = ok && e->val != NULL && e->vlen == wl && memcmp(e->val, want, wl) == 0;
    else
        ok = ok && e->val == NULL;
    if (!ok && o->bad++ < 3)
        print_error("key %ld: is_counter %d ttl %" PRId64 " vlen %zu do not match the store\n", i,
                    e->is_counter, e->ttl_ms, e->vlen);
    return 0;
}

static int wanted(size_t i, const unsigned char *g, size_t gl)
{
    return keys[i].live && (g == NULL || pc_glob_match(g, gl, keys[i].k, keys[i].kl));
}

/* Compares an observation with the filter; returns the problems found. */
static unsigned diff(const char *what, const unsigned char *g, size_t gl, const struct obs *o)
{
    unsigned bad = o->unknown + o->bad, shown = 0;
    for (size_t i = 0; i < nkeys; i++) {
        int w = wanted(i, g, gl);
        if ((w && o->cnt[i] != 1) || (!w && o->cnt[i] != 0)) {
            if (shown++ < 5)
                print_error("%s: key %zu (%.*s) seen %u times, want %d\n", what, i, (int)keys[i].kl,
                            (const char *)keys[i].k, o->cnt[i], w);
            bad++;
        }
    }
    return bad;
}

static uint64_t buckets_of(pc_coll *co)
{
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(co, &st), PC_OK);
    return st.buckets;
}

/* pc_walk with values, then pc_scan loops of 1, 3 and 17 buckets a call. */
static unsigned check_glob(pc_coll *co, const unsigned char *g, size_t gl)
{
    static struct obs o;
    unsigned bad = 0;
    memset(&o, 0, sizeof o);
    o.values = 1;
    check_rc(pc_walk(co, g, gl, PC_WALK_VALUES, obs_cb, &o), PC_OK);
    bad += diff("pc_walk", g, gl, &o);
    uint64_t nb = buckets_of(co);
    static const uint64_t mbs[] = {1, 3, 17};
    for (size_t m = 0; m < 3; m++) {
        memset(&o, 0, sizeof o);
        uint64_t cursor = 0, next = 0, calls = 0;
        do {
            check_rc(pc_scan(co, cursor, mbs[m], g, gl, 0, obs_cb, &o, &next), PC_OK);
            calls++;
            if (next != 0 && next != cursor + mbs[m])
                fail_msg("pc_scan from %" PRIu64 " by %" PRIu64 " continued at %" PRIu64, cursor,
                         mbs[m], next);
            cursor = next;
        } while (cursor != 0);
        assert_int_equal(calls, (nb + mbs[m] - 1) / mbs[m]);
        bad += diff("pc_scan", g, gl, &o);
    }
    return bad;
}

/* A glob built from a stored key: bytes kept (escaped when special),
 * replaced by '?', by a set holding them, or dropped under a '*'. */
static size_t random_glob(unsigned char *g, size_t cap)
{
    const struct rkey *r = &keys[2 + rnd((uint32_t)nkeys - 2)];
    size_t n = 0;
    for (size_t i = 0; i < r->kl && n + 8 < cap; i++) {
        unsigned char ch = r->k[i];
        uint32_t d = rnd(20);
        if (d == 0) {
            g[n++] = '?';
        } else if (d == 1) {
            g[n++] = '*';
            i += rnd(3);
        } else if (d == 2 && ch != ']' && ch != '\\') {
            g[n++] = '[';
            g[n++] = (unsigned char)(ch - 1);
            g[n++] = '-';
            g[n++] = ch;
            g[n++] = ']';
        } else if (d == 3) {
            g[n++] = '[';
            g[n++] = '!';
            g[n++] = ch == 'z' ? 'y' : 'z';
            g[n++] = ']';
        } else {
            if (ch == '*' || ch == '?' || ch == '[' || ch == '\\')
                g[n++] = '\\';
            g[n++] = ch;
        }
    }
    if (rnd(4) == 0 && n > 2) {
        n -= rnd(3); /* truncate and end in '*', keeping the glob well-formed */
        while (pc_glob_check(g, n) != 0)
            n--;
        g[n++] = '*';
    }
    return n;
}

struct gl {
    const unsigned char *g;
    size_t n;
};
static const struct gl globs[] = {
    {NULL, 0},         {G("*")},
    {G("")},           {G("user:*")},
    {G("user:00?5")},  {G("user:0[0-2]*")},
    {G("user:[!0]*")}, {G("user:1[^2-8]?9")},
    {G("*\\**")},      {G("meta\\*1*")},
    {G("q\\?*")},      {G("br\\[*\\]")},
    {G("bs\\\\*")},    {G("*-*")},
    {G("bang!*")},     {G("^c*")},
    {G("\\**")},       {G("\\[*")},
    {G("*]")},         {G("[[]*")},
    {G("bin\0*")},     {G("bin\0\0*")},
    {G("*\0end")},     {G("bin\0\x01?\0*")},
    {G("ctr:*")},      {G("ctr:1??")},
    {G("ttl:*")},      {G("gone:*")},
    {G("?")},          {G("*?")},
    {G("[!u]*")},      {G("user:19[5-9]?")},
    {G("[a-c]*")},     {G("*9")},
    {G("*[!0-9]")},    {G("nothing*")},
};

static void walk_and_scan_match_reference(void **state)
{
    (void)state;
    pc_cache *c = mk_cache("w=8", 64, 4, 100);
    pc_coll *co = pc_fx_coll(c, "w");
    build_keys();
    load_keys(c, co);
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(co, &st), PC_OK);
    print_message("%zu keys, %" PRIu64 " buckets, %" PRIu64 " in overflow\n", nkeys, st.buckets,
                  st.overflow);
    assert_true(st.overflow > 0);                      /* chains are walked too */
    assert_true((st.buckets & (st.buckets - 1)) != 0); /* mid-level: a split pointer */
    unsigned bad = 0;
    for (size_t i = 0; i < sizeof globs / sizeof globs[0]; i++)
        bad += check_glob(co, globs[i].g, globs[i].n);
    unsigned char g[128];
    for (unsigned i = 0; i < 300; i++) {
        size_t n = random_glob(g, sizeof g);
        bad += check_glob(co, g, n);
    }
    assert_int_equal(bad, 0);
    verify(c);
    pc_cache_destroy(c);
}

static int stop_cb(void *ctx, const pc_entry *e)
{
    (void)e;
    (*(int *)ctx)++;
    return 42;
}

static int count_empty_cb(void *ctx, const pc_entry *e)
{
    assert_int_equal(e->klen, 0);
    (*(int *)ctx)++;
    return 0;
}

/* Regression: a walk whose only entry is the empty key with an empty value
 * copied 0 bytes from a NULL buffer (undefined; UBSan reported it when
 * pcached's KEYS met the key ""). */
static void walk_empty_key_alone(void **state)
{
    (void)state;
    pc_cache *c = mk_cache("w=4", 8, 4, 4096);
    pc_coll *co = pc_fx_coll(c, "w");
    check_rc(pc_set(co, "", 0, "", 0, 0, 0), PC_OK);
    int n = 0;
    check_rc(pc_walk(co, NULL, 0, 0, count_empty_cb, &n), PC_OK);
    check_rc(pc_walk(co, NULL, 0, PC_WALK_VALUES, count_empty_cb, &n), PC_OK);
    assert_int_equal(n, 2);
    pc_cache_destroy(c);
}

static void scan_argument_errors(void **state)
{
    (void)state;
    pc_cache *c = mk_cache("w=4", 8, 4, 4096);
    pc_coll *co = pc_fx_coll(c, "w");
    check_rc(pc_set(co, "k", 1, "v", 1, 0, 0), PC_OK);
    struct obs *o = calloc(1, sizeof *o);
    uint64_t next = 7, nb = buckets_of(co);
    check_rc(pc_scan(co, nb + 1, 1, NULL, 0, 0, obs_cb, o, &next), PC_EINVAL);
    check_rc(pc_scan(co, 1ull << 40, 1, NULL, 0, 0, obs_cb, o, &next), PC_EINVAL);
    check_rc(pc_scan(co, UINT64_MAX, 4, NULL, 0, 0, obs_cb, o, &next), PC_EINVAL);
    check_rc(pc_scan(co, 0, 0, NULL, 0, 0, obs_cb, o, &next), PC_EINVAL);
    check_rc(pc_scan(co, 0, 1, NULL, 0, 0, NULL, o, &next), PC_EINVAL);
    check_rc(pc_scan(co, 0, 1, NULL, 0, 0, obs_cb, o, NULL), PC_EINVAL);
    check_rc(pc_scan(co, 0, 1, NULL, 0, 0x80, obs_cb, o, &next), PC_EINVAL);
    check_rc(pc_scan(co, 0, 1, NULL, 3, 0, obs_cb, o, &next), PC_EINVAL);
    check_rc(pc_scan(co, 0, 1, "[ab", 3, 0, obs_cb, o, &next), PC_EINVAL);
    check_rc(pc_scan(co, 0, 1, "ab\\", 3, 0, obs_cb, o, &next), PC_EINVAL);
    assert_int_equal(next, 7); /* not written on failure */
    static unsigned char big[PC_GLOB_MAX + 1];
    memset(big, '*', sizeof big);
    check_rc(pc_scan(co, 0, 1, big, sizeof big, 0, obs_cb, o, &next), PC_ETOOBIG);
    check_rc(pc_walk(co, big, sizeof big, 0, obs_cb, o), PC_ETOOBIG);
    check_rc(pc_walk(co, "[", 1, 0, obs_cb, o), PC_EINVAL);
    uint64_t n = 99;
    check_rc(pc_del_glob(co, "[", 1, &n), PC_EINVAL);
    check_rc(pc_ttl_glob(co, "\\", 1, 10, &n), PC_EINVAL);
    check_rc(pc_ttl_glob(co, "*", 1, -1, &n), PC_EINVAL);
    check_rc(pc_del_glob(co, "*", 1, NULL), PC_EINVAL);
    assert_int_equal(n, 99);
    assert_int_equal(o->unknown + o->bad, 0);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(o->cnt[i], 0);
    /* a callback's nonzero return stops the walk and is passed back */
    for (int i = 0; i < 50; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "s%d", i);
        check_rc(pc_set(co, k, (size_t)kl, "v", 1, 0, 0), PC_OK);
    }
    int calls = 0;
    assert_int_equal(pc_walk(co, NULL, 0, 0, stop_cb, &calls), 42);
    assert_int_equal(calls, 1);
    calls = 0;
    assert_int_equal(pc_scan(co, 0, buckets_of(co), NULL, 0, 0, stop_cb, &calls, &next), 42);
    assert_int_equal(calls, 1);
    free(o);
    pc_cache_destroy(c);
}

/* Deletes by glob in sequence; each count and the remaining set must follow
 * the filter, and an expired key is never counted. */
static void del_glob_matches_reference(void **state)
{
    (void)state;
    pc_cache *c = mk_cache("w=8", 64, 4, 100);
    pc_coll *co = pc_fx_coll(c, "w");
    build_keys();
    load_keys(c, co);
    static const struct gl seq[] = {
        {G("user:1*")}, {G("bin\0\x01*")}, {G("*\\**")},     {G("ctr:[0-4]*")},
        {G("")},        {G("gone:*")},     {G("user:0??7")}, {G("\\[*")},
        {G("ttl:*5")},  {G("*]")},         {G("nothing*")},  {G("*")},
    };
    uint64_t total = 0;
    unsigned bad = 0;
    for (size_t s = 0; s < sizeof seq / sizeof seq[0]; s++) {
        uint64_t want = 0, got = UINT64_MAX;
        for (size_t i = 0; i < nkeys; i++)
            want += (uint64_t)wanted(i, seq[s].g, seq[s].n);
        check_rc(pc_del_glob(co, seq[s].g, seq[s].n, &got), PC_OK);
        if (got != want) {
            print_error("pc_del_glob #%zu deleted %" PRIu64 ", filter says %" PRIu64 "\n", s, got,
                        want);
            bad++;
        }
        total += got;
        for (size_t i = 0; i < nkeys; i++)
            if (wanted(i, seq[s].g, seq[s].n))
                keys[i].live = 0;
        static struct obs o;
        memset(&o, 0, sizeof o);
        o.values = 1;
        check_rc(pc_walk(co, NULL, 0, PC_WALK_VALUES, obs_cb, &o), PC_OK);
        bad += diff("after pc_del_glob", NULL, 0, &o);
        for (size_t i = 0; i < nkeys; i++)
            bad += pc_probe(co, keys[i].k, keys[i].kl, NULL) != (keys[i].live ? 0 : PC_ENOTFOUND);
        pc_coll_stats st;
        check_rc(pc_coll_stats_get(co, &st), PC_OK);
        uint64_t live = 0;
        for (size_t i = 0; i < nkeys; i++)
            live += (uint64_t)keys[i].live;
        bad += st.removes != total;
        bad += st.entries != live + 2; /* the two lapsed keys wait for the sweep */
    }
    assert_int_equal(bad, 0);
    pc_maint_report rep;
    check_rc(pc_maintain(c, PC_MAINT_SWEEP, &rep), PC_OK);
    assert_int_equal(rep.reaped, 2);
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(co, &st), PC_OK);
    assert_int_equal(st.entries, 0);
    verify(c);
    pc_cache_destroy(c);
}

/* Checks every key's TTL through pc_probe: a key set (or re-armed) with
 * TTL t reads 0 < ttl <= t, and no more than `slack` below it. */
static unsigned check_ttls(pc_coll *co, int64_t slack)
{
    unsigned bad = 0;
    for (size_t i = 0; i < nkeys; i++) {
        const struct rkey *r = &keys[i];
        pc_meta m = {0};
        int rc = pc_probe(co, r->k, r->kl, &m);
        int ok = r->live ? rc == 0 && m.is_counter == r->ctr &&
                               (r->ttl == 0 ? m.ttl_ms == -1
                                            : m.ttl_ms > 0 && m.ttl_ms <= r->ttl &&
                                                  m.ttl_ms > r->ttl - slack)
                         : rc == PC_ENOTFOUND;
        if (!ok && bad++ < 5)
            print_error("key %zu (%.*s): probe %d ttl %" PRId64 ", want live %d ttl %" PRId64 "\n",
                        i, (int)r->kl, (const char *)r->k, rc, m.ttl_ms, r->live, r->ttl);
    }
    return bad;
}

static void ttl_glob_matches_reference(void **state)
{
    (void)state;
    pc_cache *c = mk_cache("w=8", 64, 4, 100);
    pc_coll *co = pc_fx_coll(c, "w");
    build_keys();
    load_keys(c, co);
    static const struct {
        const unsigned char *g;
        size_t n;
        int64_t ttl;
    } seq[] = {
        {G("user:1[0-4]*"), 60000}, {G("ttl:1*"), 0}, {G("ctr:*"), 120000}, {G("gone:*"), 5000},
        {G("*\\**"), 90000},        {G(""), 70000},   {G("bin\0\x01*"), 1}, {G("nothing*"), 10},
    };
    unsigned bad = 0;
    for (size_t s = 0; s < sizeof seq / sizeof seq[0]; s++) {
        uint64_t want = 0, got = UINT64_MAX;
        for (size_t i = 0; i < nkeys; i++)
            want += (uint64_t)wanted(i, seq[s].g, seq[s].n);
        check_rc(pc_ttl_glob(co, seq[s].g, seq[s].n, seq[s].ttl, &got), PC_OK);
        if (got != want) {
            print_error("pc_ttl_glob #%zu re-armed %" PRIu64 ", filter says %" PRIu64 "\n", s, got,
                        want);
            bad++;
        }
        for (size_t i = 0; i < nkeys; i++)
            if (wanted(i, seq[s].g, seq[s].n))
                keys[i].ttl = seq[s].ttl;
        if (seq[s].ttl == 1) { /* those keys lapse: gone from probe and walk */
            sleep_ms(20);
            for (size_t i = 0; i < nkeys; i++)
                if (keys[i].ttl == 1)
                    keys[i].live = 0;
        }
        bad += check_ttls(co, 30000);
        static struct obs o;
        memset(&o, 0, sizeof o);
        o.values = 1;
        check_rc(pc_walk(co, NULL, 0, PC_WALK_VALUES, obs_cb, &o), PC_OK);
        bad += diff("after pc_ttl_glob", NULL, 0, &o);
    }
    assert_int_equal(bad, 0);
    verify(c);
    pc_cache_destroy(c);
}

/* ---- scanning under concurrent change ------------------------------------------ */
struct conc { /* shared between the scanning parent and the changing child */
    _Atomic int stop, ready, err_line, err_rc;
    _Atomic uint64_t iters, splits, drained, removed, inserted, live_churn;
};

static struct conc *conc_map(void)
{
    void *p =
        mmap(NULL, sizeof(struct conc), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    memset(p, 0, sizeof(struct conc));
    return p;
}

/* A forked child must not run cmocka's handlers; a crash kills it. */
static void child_signals_default(void)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

#define CHILD_CHECK(sh, expr, want)                                                                \
    do {                                                                                           \
        int crc_ = (expr);                                                                         \
        if (crc_ != (want)) {                                                                      \
            atomic_store(&(sh)->err_rc, crc_);                                                     \
            atomic_store(&(sh)->err_line, __LINE__);                                               \
            _exit(2);                                                                              \
        }                                                                                          \
    } while (0)

static int64_t run_ms(void)
{
    const char *e = getenv("PCACHE_WALK_SECONDS");
    long s = e != NULL ? strtol(e, NULL, 10) : 0;
    return (s > 0 ? s : 3) * 1000;
}

/* The bucket a hash routes to in a table of nb buckets (linear hashing). */
static uint64_t route(uint64_t h, uint64_t nb)
{
    uint64_t size = 1;
    while (size * 2 <= nb)
        size *= 2;
    uint64_t i = h & (size - 1);
    return i < nb - size ? (h & (2 * size - 1)) : i;
}

#define STABLE_MAX 2048
struct scanner {
    unsigned nstable;
    unsigned char seen[STABLE_MAX];
    uint64_t others;
};

static int scan_cb(void *ctx, const pc_entry *e)
{
    struct scanner *s = ctx;
    char num[8];
    if (e->klen == 12 && memcmp(e->key, "stable:", 7) == 0) {
        memcpy(num, (const char *)e->key + 7, 5);
        num[5] = '\0';
        unsigned i = (unsigned)strtoul(num, NULL, 10);
        if (i < s->nstable)
            s->seen[i] = 1;
    } else {
        s->others++;
    }
    return 0;
}

static size_t stable_key(char *k, unsigned i)
{
    return (size_t)sprintf(k, "stable:%05u", i);
}

/* One full scan, a random 1..4 buckets a call, alternately with no glob and
 * with "stable:*". Returns how many stable keys it missed. */
static unsigned full_scan(pc_coll *co, struct scanner *s, unsigned round, unsigned *shown)
{
    memset(s->seen, 0, s->nstable);
    s->others = 0;
    uint64_t cursor = 0;
    const void *g = (round & 1) ? "stable:*" : NULL;
    size_t gl = (round & 1) ? 8 : 0;
    do {
        check_rc(pc_scan(co, cursor, 1 + rnd(4), g, gl, 0, scan_cb, s, &cursor), PC_OK);
    } while (cursor != 0);
    unsigned missing = 0;
    for (unsigned i = 0; i < s->nstable; i++) {
        if (s->seen[i])
            continue;
        missing++;
        if ((*shown)++ < 10) {
            char k[16];
            size_t kl = stable_key(k, i);
            print_error("full scan %u missed %s (now %s)\n", round, k,
                        pc__test_in_overflow(co, k, kl) == 1 ? "in overflow" : "in its bucket");
        }
    }
    return missing;
}

/* The child of the growth test: insert, remove churn keys that share a
 * bucket with a stable key, split (two buckets a call) and drain. */
static void grow_child(pc_cache *c, pc_coll *co, struct conc *sh, unsigned nstable,
                       unsigned nchurn0, int64_t until)
{
    child_signals_default();
    enum { CH_MAX = 400000, BM_BITS = 1 << 21 };
    uint32_t *live = malloc(CH_MAX * sizeof *live);
    uint8_t *bm = calloc(BM_BITS / 8, 1);
    uint64_t *sh_hash = malloc(nstable * sizeof *sh_hash);
    if (live == NULL || bm == NULL || sh_hash == NULL)
        _exit(3);
    char k[32];
    for (unsigned i = 0; i < nstable; i++)
        sh_hash[i] = pc_hash(k, stable_key(k, i));
    uint32_t n = 0, next_id = nchurn0;
    for (uint32_t i = 0; i < nchurn0; i++)
        live[n++] = i;
    pc_coll_stats st;
    CHILD_CHECK(sh, pc_coll_stats_get(co, &st), 0);
    uint64_t nb = st.buckets, bm_nb = 0;
    while (!atomic_load(&sh->stop) && now_ms() < until) {
        if (bm_nb != nb) { /* which buckets hold a stable key now */
            memset(bm, 0, BM_BITS / 8);
            for (unsigned i = 0; i < nstable; i++) {
                uint64_t b = route(sh_hash[i], nb) % BM_BITS;
                bm[b / 8] |= (uint8_t)(1u << (b % 8));
            }
            bm_nb = nb;
        }
        for (int j = 0; j < 3 && n < CH_MAX; j++) {
            int kl = snprintf(k, sizeof k, "churn:%07u", next_id);
            CHILD_CHECK(sh, pc_set(co, k, (size_t)kl, k, (size_t)kl, 0, 0), 0);
            live[n++] = next_id++;
            atomic_fetch_add(&sh->inserted, 1);
        }
        for (int removed = 0, tries = 0; removed < 2 && tries < 64 && n > 0; tries++) {
            uint32_t j = rnd(n);
            int kl = snprintf(k, sizeof k, "churn:%07u", live[j]);
            uint64_t b = route(pc_hash(k, (size_t)kl), nb) % BM_BITS;
            if (!(bm[b / 8] & (1u << (b % 8))))
                continue;
            CHILD_CHECK(sh, pc_remove(co, k, (size_t)kl), 0);
            live[j] = live[--n];
            removed++;
            atomic_fetch_add(&sh->removed, 1);
        }
        pc_maint_report rep;
        CHILD_CHECK(sh, pc_maintain(c, PC_MAINT_GROW, &rep), 0);
        nb += rep.splits;
        atomic_fetch_add(&sh->splits, rep.splits);
        atomic_fetch_add(&sh->drained, rep.drained);
        atomic_fetch_add(&sh->iters, 1);
        atomic_store(&sh->ready, 1);
    }
    atomic_store(&sh->live_churn, n);
    _exit(0);
}

/* Waits for the child and checks it ran cleanly. */
static void reap(pid_t pid, struct conc *sh)
{
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("child status %#x: line %d rc %d (%s)", st, atomic_load(&sh->err_line),
                 atomic_load(&sh->err_rc), pc_strerror(atomic_load(&sh->err_rc)));
}

/* Forks grow_child (for dur ms, 30 s of slack) and waits for its first round. */
static pid_t start_grow_child(pc_cache *c, pc_coll *co, struct conc *sh, unsigned nstable,
                              unsigned nchurn, int64_t dur)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        grow_child(c, co, sh, nstable, nchurn, now_ms() + dur + 30000);
    int64_t t0 = now_ms();
    while (!atomic_load(&sh->ready) && now_ms() < t0 + 10000)
        sleep_ms(1);
    assert_true(atomic_load(&sh->ready));
    return pid;
}

static void scan_complete_while_growing(void **state)
{
    (void)state;
    enum { NSTABLE = 1500, NCHURN = 1500 };
    pc_cache *c = mk_cache("s=4", 64, 4, 2);
    pc_coll *co = pc_fx_coll(c, "s");
    char k[32];
    for (unsigned i = 0; i < NSTABLE; i++) {
        size_t kl = stable_key(k, i);
        check_rc(pc_set(co, k, kl, "s", 1, 0, 0), PC_OK);
        int cl = snprintf(k, sizeof k, "churn:%07u", i);
        check_rc(pc_set(co, k, (size_t)cl, k, (size_t)cl, 0, 0), PC_OK);
    }
    struct conc *sh = conc_map();
    int64_t dur = run_ms();
    pid_t pid = start_grow_child(c, co, sh, NSTABLE, NCHURN, dur);
    static struct scanner s;
    s.nstable = NSTABLE;
    unsigned scans = 0, overlapped = 0, failed = 0, shown = 0;
    for (int64_t end = now_ms() + dur; now_ms() < end; scans++) {
        uint64_t it0 = atomic_load(&sh->iters), sp0 = atomic_load(&sh->splits);
        failed += full_scan(co, &s, scans, &shown) != 0;
        overlapped += atomic_load(&sh->iters) > it0 && atomic_load(&sh->splits) > sp0;
    }
    atomic_store(&sh->stop, 1);
    reap(pid, sh);
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(co, &st), PC_OK);
    print_message("%u full scans (%u overlapping splits), %u missed a stable key; child: %" PRIu64
                  " rounds, %" PRIu64 " splits, %" PRIu64 " drained, %" PRIu64 " removed; %" PRIu64
                  " buckets, %" PRIu64 " in overflow\n",
                  scans, overlapped, failed, atomic_load(&sh->iters), atomic_load(&sh->splits),
                  atomic_load(&sh->drained), atomic_load(&sh->removed), st.buckets, st.overflow);
    assert_int_equal(failed, 0);
    assert_true(overlapped >= 10 && atomic_load(&sh->splits) >= 100);
    assert_true(atomic_load(&sh->drained) > 0 && atomic_load(&sh->removed) >= 100);
    /* quiescent: every stable key once, and nothing else lost */
    shown = 0;
    assert_int_equal(full_scan(co, &s, 0, &shown), 0);
    assert_int_equal(s.others, atomic_load(&sh->live_churn));
    assert_int_equal(st.entries, NSTABLE + atomic_load(&sh->live_churn));
    verify(c);
    munmap(sh, sizeof *sh);
    pc_cache_destroy(c);
}

/* ---- the ordered walk (snapshot saves) under the same churn ------------------
 * pc_walk_ordered copies a group's buckets one after another into one
 * scratch and sorts them; a bucket copy that races a writer is cut back to
 * the group's earlier buckets and redone. Stable keys carry values of 1 to
 * 24 KiB (so the scratch grows in the middle of groups) whose bytes derive
 * from the key: every ordered walk must return each stable key exactly
 * once, with its exact value, in ascending (order key, key) order. */
static size_t ordered_val(unsigned i, unsigned char *v)
{
    size_t vl = 1 + (size_t)(i * 7919u) % (24 * 1024);
    for (size_t j = 0; j < vl; j++)
        v[j] = (unsigned char)(i * 31u + j);
    return vl;
}

struct owalk {
    unsigned nstable, bad_order, bad_value, dup;
    unsigned char seen[STABLE_MAX];
    uint64_t prev_order, others;
    unsigned char prev_key[32];
    size_t prev_klen;
    int have_prev;
    unsigned char v[24 * 1024];
};

static int owalk_cb(void *ctx, const pc_entry *e)
{
    struct owalk *w = ctx;
    uint64_t o = pc_order_key(pc_hash(e->key, e->klen));
    if (w->have_prev) {
        int kc = memcmp(w->prev_key, e->key, w->prev_klen < e->klen ? w->prev_klen : e->klen);
        bool up =
            o > w->prev_order ||
            (o == w->prev_order && (w->prev_klen < e->klen || (w->prev_klen == e->klen && kc < 0)));
        w->bad_order += !up;
    }
    w->have_prev = 1;
    w->prev_order = o;
    w->prev_klen = e->klen < sizeof w->prev_key ? e->klen : sizeof w->prev_key;
    memcpy(w->prev_key, e->key, w->prev_klen);
    if (e->klen == 12 && memcmp(e->key, "stable:", 7) == 0) {
        char num[6];
        memcpy(num, (const char *)e->key + 7, 5);
        num[5] = '\0';
        unsigned i = (unsigned)strtoul(num, NULL, 10);
        if (i < w->nstable) {
            w->dup += w->seen[i];
            w->seen[i] = 1;
            size_t vl = ordered_val(i, w->v);
            w->bad_value += e->vlen != vl || memcmp(e->val, w->v, vl) != 0;
        }
    } else {
        w->others++;
    }
    return 0;
}

/* One ordered walk from a clean tally; returns how many stable keys it missed. */
static unsigned owalk_run(pc_coll *co, struct owalk *w)
{
    w->bad_order = w->bad_value = w->dup = 0;
    w->have_prev = 0;
    w->others = 0;
    memset(w->seen, 0, sizeof w->seen);
    check_rc(pc_walk_ordered(co, PC_WALK_VALUES, owalk_cb, w), PC_OK);
    unsigned missing = 0;
    for (unsigned i = 0; i < w->nstable; i++)
        missing += !w->seen[i];
    return missing;
}

/* One round on a fresh 16-bucket table: the growing child runs for
 * round_ms while the parent walks; returns the walks that failed. The
 * early splits (few buckets per group, each split a large share of the
 * table) are when a walk that reads the size once per group loses keys, so
 * the test runs many short rounds rather than one long one. */
static unsigned owalk_round(struct owalk *w, int64_t round_ms, unsigned *walks,
                            unsigned *overlapped, uint64_t *splits)
{
    enum { NSTABLE = 600, NCHURN = 1500 };
    pc_cache *c = mk_cache("s=4", 96, 4, 2);
    pc_coll *co = pc_fx_coll(c, "s");
    w->nstable = NSTABLE;
    char k[32];
    for (unsigned i = 0; i < NSTABLE; i++) {
        size_t kl = stable_key(k, i);
        size_t vl = ordered_val(i, w->v);
        check_rc(pc_set(co, k, kl, w->v, vl, 0, 0), PC_OK);
    }
    for (unsigned i = 0; i < NCHURN; i++) {
        int cl = snprintf(k, sizeof k, "churn:%07u", i);
        check_rc(pc_set(co, k, (size_t)cl, k, (size_t)cl, 0, 0), PC_OK);
    }
    struct conc *sh = conc_map();
    pid_t pid = start_grow_child(c, co, sh, NSTABLE, NCHURN, round_ms);
    unsigned failed = 0, n = 0;
    for (int64_t end = now_ms() + round_ms; now_ms() < end || n < 3; n++) {
        uint64_t sp0 = atomic_load(&sh->splits);
        unsigned missing = owalk_run(co, w);
        *overlapped += atomic_load(&sh->splits) > sp0;
        if (missing || w->bad_order || w->bad_value || w->dup) {
            if (failed++ < 3)
                print_error("ordered walk %u: %u stable keys missing, %u twice, %u wrong values, "
                            "%u out of order\n",
                            *walks + n, missing, w->dup, w->bad_value, w->bad_order);
        }
    }
    *walks += n;
    atomic_store(&sh->stop, 1);
    reap(pid, sh);
    *splits += atomic_load(&sh->splits);
    /* quiescent: everything, churn keys included, exactly once */
    assert_int_equal(owalk_run(co, w), 0);
    assert_int_equal(w->bad_order + w->bad_value + w->dup, 0);
    assert_int_equal(w->others, atomic_load(&sh->live_churn));
    verify(c);
    munmap(sh, sizeof *sh);
    pc_cache_destroy(c);
    return failed;
}

static void ordered_walk_while_growing(void **state)
{
    (void)state;
    static struct owalk w;
    unsigned walks = 0, overlapped = 0, failed = 0, rounds = 0;
    uint64_t splits = 0;
    for (int64_t end = now_ms() + run_ms(); now_ms() < end || rounds < 2; rounds++)
        failed += owalk_round(&w, 300, &walks, &overlapped, &splits);
    print_message("%u rounds, %u ordered walks (%u overlapping splits), %u failed; %" PRIu64
                  " splits\n",
                  rounds, walks, overlapped, failed, splits);
    assert_int_equal(failed, 0);
    assert_true(overlapped >= 3 && splits >= 100);
}

/* ---- the fixed-size table: keys cycling between overflow and bucket -----------
 * Each of the 16 buckets holds 11 keys in its slots and one or two more in
 * overflow. The child picks a bucket, removes one of its slot keys, drains
 * (which moves an overflow key of that bucket - often its only one - into
 * the freed slot) and stores the removed key again (into overflow: the
 * bucket is full again). Every key has an epoch in shared memory, odd while
 * the child is removing and re-storing it. A key whose epoch is even and the
 * same before and after a full scan was present for the whole scan, so the
 * scan must return it - in particular every key that a drain moved under
 * the scan. */
enum { NB_FIX = 16, PER_B = 13, NTRACK = NB_FIX * PER_B };
struct fixed {
    _Atomic uint32_t epoch[NTRACK];
    uint32_t id[NTRACK]; /* key i is "stable:<id[i]>" */
};

static void fixed_child(pc_cache *c, pc_coll *co, struct conc *sh, struct fixed *fx, int64_t until)
{
    child_signals_default();
    char k[32];
    while (!atomic_load(&sh->stop) && now_ms() < until) {
        uint32_t b = rnd(NB_FIX), pick = UINT32_MAX;
        for (uint32_t t = 0, j = rnd(PER_B); t < PER_B; t++, j = (j + 1) % PER_B) {
            uint32_t i = b * PER_B + j;
            if (pc__test_in_overflow(co, k, stable_key(k, fx->id[i])) == 0) {
                pick = i;
                break;
            }
        }
        if (pick == UINT32_MAX)
            continue;
        size_t kl = stable_key(k, fx->id[pick]);
        atomic_fetch_add(&fx->epoch[pick], 1); /* odd: about to leave */
        CHILD_CHECK(sh, pc_remove(co, k, kl), 0);
        atomic_fetch_add(&sh->removed, 1);
        pc_maint_report rep;
        CHILD_CHECK(sh, pc_maintain(c, PC_MAINT_GROW, &rep), 0);
        atomic_fetch_add(&sh->drained, rep.drained);
        CHILD_CHECK(sh, pc_set(co, k, kl, "v", 1, 0, 0), 0);
        atomic_fetch_add(&fx->epoch[pick], 1); /* even: present again */
        atomic_fetch_add(&sh->iters, 1);
        atomic_store(&sh->ready, 1);
    }
    _exit(0);
}

/* Collects ids so that bucket b (hash & 15) gets exactly PER_B keys. */
static void fixed_keys(struct fixed *fx)
{
    unsigned have[NB_FIX] = {0}, done = 0;
    char k[32];
    for (uint32_t id = 0; done < NTRACK; id++) {
        assert_true(id < 100000);
        uint64_t b = pc_hash(k, stable_key(k, id)) & (NB_FIX - 1);
        if (have[b] == PER_B)
            continue;
        fx->id[b * PER_B + have[b]++] = id;
        done++;
    }
}

static int fixed_cb(void *ctx, const pc_entry *e)
{
    uint8_t *seen = ctx; /* indexed by id */
    char num[8];
    if (e->klen == 12 && memcmp(e->key, "stable:", 7) == 0) {
        memcpy(num, (const char *)e->key + 7, 5);
        num[5] = '\0';
        seen[strtoul(num, NULL, 10)] = 1;
    }
    return 0;
}

static void scan_complete_while_draining(void **state)
{
    (void)state;
    pc_cache *c = mk_cache("o=4", 8, 0, 4); /* 16 buckets; growth off, drains on */
    pc_coll *co = pc_fx_coll(c, "o");
    struct conc *sh = conc_map();
    struct fixed *fx =
        mmap(NULL, sizeof *fx, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(fx != MAP_FAILED);
    memset(fx, 0, sizeof *fx);
    fixed_keys(fx);
    char k[32];
    for (unsigned i = 0; i < NTRACK; i++)
        check_rc(pc_set(co, k, stable_key(k, fx->id[i]), "v", 1, 0, 0), PC_OK);
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(co, &st), PC_OK);
    assert_int_equal(st.buckets, NB_FIX);
    assert_int_equal(st.overflow, NTRACK - NB_FIX * 11);
    int64_t dur = run_ms();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        fixed_child(c, co, sh, fx, now_ms() + dur + 30000);
    int64_t t0 = now_ms();
    while (!atomic_load(&sh->ready) && now_ms() < t0 + 10000)
        sleep_ms(1);
    assert_true(atomic_load(&sh->ready));
    static uint8_t seen[100000];
    static uint32_t e0[NTRACK];
    unsigned scans = 0, overlapped = 0, failed = 0, shown = 0;
    uint64_t checked = 0;
    for (int64_t end = now_ms() + dur; now_ms() < end; scans++) {
        for (unsigned i = 0; i < NTRACK; i++) {
            e0[i] = atomic_load(&fx->epoch[i]);
            seen[fx->id[i]] = 0;
        }
        uint64_t it0 = atomic_load(&sh->iters), cursor = 0;
        do {
            check_rc(pc_scan(co, cursor, 1 + rnd(4), NULL, 0, 0, fixed_cb, seen, &cursor), PC_OK);
        } while (cursor != 0);
        overlapped += atomic_load(&sh->iters) > it0;
        unsigned missed = 0;
        for (unsigned i = 0; i < NTRACK; i++) {
            if ((e0[i] & 1) || atomic_load(&fx->epoch[i]) != e0[i])
                continue; /* touched during the scan: no claim */
            checked++;
            if (seen[fx->id[i]])
                continue;
            missed++;
            if (shown++ < 10) { /* where the key is now, and whether a read finds it */
                size_t kl = stable_key(k, fx->id[i]);
                int ovf = pc__test_in_overflow(co, k, kl), pr = pc_probe(co, k, kl, NULL);
                print_error("full scan %u missed %s (bucket %u), untouched during it; now %s, "
                            "probe %d, epoch %u\n",
                            scans, k, i / PER_B,
                            ovf == 1   ? "in overflow"
                            : ovf == 0 ? "in its bucket"
                                       : "absent",
                            pr, (unsigned)atomic_load(&fx->epoch[i]));
            }
        }
        failed += missed != 0;
    }
    atomic_store(&sh->stop, 1);
    reap(pid, sh);
    print_message("%u full scans (%u overlapping changes), %" PRIu64
                  " untouched keys checked, %u scans missed one; child: %" PRIu64
                  " cycles, %" PRIu64 " keys drained back into their bucket\n",
                  scans, overlapped, checked, failed, atomic_load(&sh->iters),
                  atomic_load(&sh->drained));
    memset(seen, 0, sizeof seen); /* quiescent: every key is there */
    check_rc(pc_walk(co, NULL, 0, 0, fixed_cb, seen), PC_OK);
    for (unsigned i = 0; i < NTRACK; i++)
        assert_true(seen[fx->id[i]]);
    verify(c);
    uint64_t drained = atomic_load(&sh->drained);
    munmap(fx, sizeof *fx);
    munmap(sh, sizeof *sh);
    pc_cache_destroy(c); /* before the verdict, so a failure leaks nothing */
    assert_int_equal(failed, 0);
    assert_true(overlapped >= 50 && drained >= 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(walk_and_scan_match_reference),
        cmocka_unit_test(walk_empty_key_alone),
        cmocka_unit_test(scan_argument_errors),
        cmocka_unit_test(del_glob_matches_reference),
        cmocka_unit_test(ttl_glob_matches_reference),
        cmocka_unit_test(scan_complete_while_growing),
        cmocka_unit_test(ordered_walk_while_growing),
        cmocka_unit_test(scan_complete_while_draining),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
