/*
 * test_ops.c - every data operation of pcache.h, driven from one process.
 *
 * Each test builds a fresh cache (collections "default" and "g=4") and checks
 * one operation against the contract written in the header: set and its
 * NX / XX / KEEPTTL flags and TTLs, the three reads (malloc'd, caller's
 * buffer, probe), remove, the native counters (add / sub / get_counter with
 * string conversion, PC_ENOTNUM and PC_ERANGE), expire, lazy expiry and its
 * reclamation by the sweep, binary-safe keys and values, the size limits,
 * argument checking, a full arena, pc_strerror, the per-collection counters
 * and growth by linear hashing. It does not cover fork, concurrency or crash
 * recovery (the multi-process tests do).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pc_fixture.h"
#include "pc_testhooks.h"
#include "pcache.h"

/* Fails with both codes spelled out (cmocka prints negatives as hex). */
#define check_rc(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr), want_ = (want);                                                          \
        if (rc_ != want_)                                                                          \
            fail_msg("%s = %d (%s), want %d (%s)", #expr, rc_, pc_strerror(rc_), want_,            \
                     pc_strerror(want_));                                                          \
    } while (0)

/* Like check_rc, but counts the mismatch in `bad` and carries on. */
#define soft_rc(expr, want)                                                                        \
    do {                                                                                           \
        int rc_ = (expr), want_ = (want);                                                          \
        if (rc_ != want_) {                                                                        \
            print_error("line %d: %s = %d (%s), want %d (%s)\n", __LINE__, #expr, rc_,             \
                        pc_strerror(rc_), want_, pc_strerror(want_));                              \
            bad++;                                                                                 \
        }                                                                                          \
    } while (0)

#define S(lit) lit, (sizeof(lit) - 1) /* a string literal as pointer + length */

struct fx {
    pc_cache *c;
    pc_coll *def; /* "default" */
    pc_coll *g;   /* "g=4" */
};

static void log_cb(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= PC_LOG_WARN)
        print_message("[pcache %d] %s\n", level, msg);
}

static pc_cache *mk_cache(const char *colls, size_t mem_mb)
{
    pc_config cfg;

    pc_fx_config(&cfg, colls, mem_mb);
    cfg.log.fn = log_cb;
    return pc_fx_create(&cfg);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    f->c = mk_cache("default;g=4", 64);
    f->def = pc_fx_coll(f->c, "default");
    f->g = pc_fx_coll(f->c, "g");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;

    pc_cache_destroy(f->c);
    free(f);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void set_str(pc_coll *co, const char *k, const char *v, int64_t ttl)
{
    check_rc(pc_set(co, k, strlen(k), v, strlen(v), ttl, 0), PC_OK);
}

/* Reads key through pc_get and checks the value, NUL terminator and meta. */
static void expect_val(pc_coll *co, const void *k, size_t klen, const void *v, size_t vlen)
{
    void *got = NULL;
    size_t glen = 12345;
    pc_meta m;

    check_rc(pc_get(co, k, klen, &got, &glen, &m), PC_OK);
    assert_non_null(got);
    assert_int_equal(glen, vlen);
    assert_int_equal(m.vlen, vlen);
    if (vlen)
        assert_memory_equal(got, v, vlen);
    assert_int_equal(((char *)got)[vlen], '\0');
    free(got);
}

static void expect_str(pc_coll *co, const char *k, const char *v)
{
    expect_val(co, k, strlen(k), v, strlen(v));
}

static void expect_absent(pc_coll *co, const char *k)
{
    void *got = (void *)&got;
    size_t vlen = 7;

    check_rc(pc_get(co, k, strlen(k), &got, &vlen, NULL), PC_ENOTFOUND);
    assert_ptr_equal(got, (void *)&got); /* out-parameters untouched on a miss */
    check_rc(pc_probe(co, k, strlen(k), NULL), PC_ENOTFOUND);
}

static pc_meta probe_meta(pc_coll *co, const char *k)
{
    pc_meta m;

    check_rc(pc_probe(co, k, strlen(k), &m), PC_OK);
    return m;
}

static pc_coll_stats stats(pc_coll *co)
{
    pc_coll_stats st;

    check_rc(pc_coll_stats_get(co, &st), PC_OK);
    return st;
}

/* ---- set and its flags --------------------------------------------------- */

static void set_get_plain(void **state)
{
    struct fx *f = *state;
    pc_meta m;

    set_str(f->def, "k", "v1", 0);
    expect_str(f->def, "k", "v1");
    m = probe_meta(f->def, "k");
    assert_int_equal(m.ttl_ms, -1);
    assert_int_equal(m.is_counter, 0);
    assert_int_equal(m.vlen, 2);
    set_str(f->def, "k", "a much longer value than before", 0); /* grows the cell */
    expect_str(f->def, "k", "a much longer value than before");
    set_str(f->def, "k", "s", 0); /* and shrinks it */
    expect_str(f->def, "k", "s");
    /* collections are separate tables */
    expect_absent(f->g, "k");
    set_str(f->g, "k", "in g", 0);
    expect_str(f->g, "k", "in g");
    expect_str(f->def, "k", "s");
}

static void set_nx_xx(void **state)
{
    struct fx *f = *state;

    check_rc(pc_set(f->def, S("nx"), S("1"), 0, PC_SET_NX), PC_OK);
    check_rc(pc_set(f->def, S("nx"), S("2"), 0, PC_SET_NX), PC_EEXIST);
    expect_str(f->def, "nx", "1");

    check_rc(pc_set(f->def, S("xx"), S("1"), 0, PC_SET_XX), PC_ENOTFOUND);
    expect_absent(f->def, "xx");
    set_str(f->def, "xx", "1", 0);
    check_rc(pc_set(f->def, S("xx"), S("2"), 0, PC_SET_XX), PC_OK);
    expect_str(f->def, "xx", "2");

    /* an expired key is absent for NX and XX alike */
    set_str(f->def, "gone", "old", 50);
    sleep_ms(100);
    check_rc(pc_set(f->def, S("gone"), S("x"), 0, PC_SET_XX), PC_ENOTFOUND);
    check_rc(pc_set(f->def, S("gone"), S("new"), 0, PC_SET_NX), PC_OK);
    expect_str(f->def, "gone", "new");
    assert_int_equal(probe_meta(f->def, "gone").ttl_ms, -1);
}

static void set_ttl_and_keepttl(void **state)
{
    struct fx *f = *state;
    pc_meta m;

    set_str(f->def, "t", "v", 5000);
    m = probe_meta(f->def, "t");
    assert_true(m.ttl_ms > 4000 && m.ttl_ms <= 5000);

    /* KEEPTTL keeps the expiry of the entry it overwrites; ttl_ms is ignored */
    check_rc(pc_set(f->def, S("t"), S("other"), 0, PC_SET_KEEPTTL), PC_OK);
    expect_str(f->def, "t", "other");
    m = probe_meta(f->def, "t");
    assert_true(m.ttl_ms > 4000 && m.ttl_ms <= 5000);
    check_rc(pc_set(f->def, S("t"), S("third"), 60000, PC_SET_KEEPTTL | PC_SET_XX), PC_OK);
    m = probe_meta(f->def, "t");
    assert_true(m.ttl_ms > 4000 && m.ttl_ms <= 5000);

    set_str(f->def, "p", "v", 0);
    check_rc(pc_set(f->def, S("p"), S("w"), 50, PC_SET_KEEPTTL), PC_OK);
    assert_int_equal(probe_meta(f->def, "p").ttl_ms, -1);

    /* a plain set replaces the expiry: ttl 0 clears it */
    set_str(f->def, "t", "fourth", 0);
    assert_int_equal(probe_meta(f->def, "t").ttl_ms, -1);

    /* the byte-identical write only refreshes the expiry - in both directions */
    set_str(f->def, "same", "value", 2000);
    set_str(f->def, "same", "value", 60000);
    m = probe_meta(f->def, "same");
    assert_true(m.ttl_ms > 50000 && m.ttl_ms <= 60000);
    set_str(f->def, "same", "value", 0);
    assert_int_equal(probe_meta(f->def, "same").ttl_ms, -1);
    set_str(f->def, "same", "value", 50);
    sleep_ms(100);
    expect_absent(f->def, "same");
}

/* ---- reads ----------------------------------------------------------------- */

static void get_buf_paths(void **state)
{
    struct fx *f = *state;
    char buf[64];
    size_t vlen = 99, needed = 99;
    pc_meta m;

    set_str(f->def, "b", "0123456789", 3000);
    check_rc(pc_get_buf(f->def, S("b"), buf, sizeof(buf), &vlen, &needed, &m), PC_OK);
    assert_int_equal(vlen, 10);
    assert_int_equal(needed, 0);
    assert_memory_equal(buf, "0123456789", 10);
    assert_int_equal(m.vlen, 10);
    assert_int_equal(m.is_counter, 0);
    assert_true(m.ttl_ms > 2000 && m.ttl_ms <= 3000);

    vlen = needed = 99; /* exact fit: no room for a NUL is needed */
    check_rc(pc_get_buf(f->def, S("b"), buf, 10, &vlen, &needed, NULL), PC_OK);
    assert_int_equal(vlen, 10);

    vlen = needed = 99;
    check_rc(pc_get_buf(f->def, S("b"), buf, 9, &vlen, &needed, NULL), PC_ETOOSMALL);
    assert_int_equal(vlen, 0);
    assert_int_equal(needed, 10);

    vlen = needed = 99;
    check_rc(pc_get_buf(f->def, S("nope"), buf, sizeof(buf), &vlen, &needed, NULL), PC_ENOTFOUND);
    assert_int_equal(vlen, 0);
    assert_int_equal(needed, 0);

    /* counters are formatted as decimal, and sized as such */
    check_rc(pc_add(f->def, S("n"), -12345, 0, NULL), PC_OK);
    vlen = needed = 99;
    check_rc(pc_get_buf(f->def, S("n"), buf, 3, &vlen, &needed, NULL), PC_ETOOSMALL);
    assert_int_equal(needed, 6);
    assert_int_equal(vlen, 0);
    check_rc(pc_get_buf(f->def, S("n"), buf, 6, &vlen, &needed, &m), PC_OK);
    assert_int_equal(vlen, 6);
    assert_memory_equal(buf, "-12345", 6);
    assert_int_equal(m.is_counter, 1);
    assert_int_equal(m.vlen, 6);
    assert_int_equal(m.counter, -12345); /* the number as well as its text */
}

/* pc_parse_i64 takes the canonical text only (Redis's string2ll). */
static void parse_i64_canonical(void **state)
{
    struct fx *f = *state;
    static const struct {
        const char *s;
        size_t n;
        int rc;
        int64_t v;
    } cases[] = {
        {"0", 1, PC_OK, 0},
        {"7", 1, PC_OK, 7},
        {"-12", 3, PC_OK, -12},
        {"9223372036854775807", 19, PC_OK, INT64_MAX},
        {"-9223372036854775808", 20, PC_OK, INT64_MIN},
        {"9223372036854775808", 19, PC_ERANGE, 0},
        {"-9223372036854775809", 20, PC_ERANGE, 0},
        {"99999999999999999999999", 23, PC_ERANGE, 0},
        {"", 0, PC_ENOTNUM, 0},
        {"-", 1, PC_ENOTNUM, 0},
        {"01", 2, PC_ENOTNUM, 0},
        {"-0", 2, PC_ENOTNUM, 0},
        {"00", 2, PC_ENOTNUM, 0},
        {"+1", 2, PC_ENOTNUM, 0},
        {" 1", 2, PC_ENOTNUM, 0},
        {"1 ", 2, PC_ENOTNUM, 0},
        {"1\0", 2, PC_ENOTNUM, 0},
        {"1a", 2, PC_ENOTNUM, 0},
        {"99999999999999999999x", 21, PC_ENOTNUM, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t v = 42;
        int rc = pc_parse_i64((const unsigned char *)cases[i].s, cases[i].n, &v);
        if (rc != cases[i].rc || (rc == PC_OK && v != cases[i].v))
            fail_msg("pc_parse_i64(\"%s\", %zu) = %d (%lld), want %d (%lld)", cases[i].s,
                     cases[i].n, rc, (long long)v, cases[i].rc, (long long)cases[i].v);
    }
    /* a stored string that is not canonical is not converted, and kept */
    check_rc(pc_set(f->def, S("z"), "1\0", 2, 0, 0), PC_OK);
    check_rc(pc_add(f->def, S("z"), 1, 0, NULL), PC_ENOTNUM);
    check_rc(pc_set(f->def, S("big"), S("99999999999999999999"), 0, 0), PC_OK);
    check_rc(pc_add(f->def, S("big"), 1, 0, NULL), PC_ENOTNUM);
    char buf[32];
    size_t vlen = 0, need = 0;
    check_rc(pc_get_buf(f->def, S("z"), buf, sizeof buf, &vlen, &need, NULL), PC_OK);
    assert_int_equal(vlen, 2);
    assert_memory_equal(buf, "1\0", 2);
}

/* An allocator that counts its blocks and can be told to fail. */
struct counting_alloc {
    int live, obtained;
    int fail_at, fail_to; /* obtains fail_at .. fail_to fail (1-based; fail_to 0: and all
                             after; fail_at 0: none) */
    size_t last_n;
};

static void *ca_obtain(size_t n, void *ctx)
{
    struct counting_alloc *ca = ctx;
    ++ca->obtained;
    if (ca->fail_at > 0 && ca->obtained >= ca->fail_at &&
        (ca->fail_to == 0 || ca->obtained <= ca->fail_to))
        return NULL;
    ca->live++;
    ca->last_n = n;
    return malloc(n);
}

static void ca_release(void *p, void *ctx)
{
    struct counting_alloc *ca = ctx;
    ca->live--;
    free(p);
}

/* One pc_get_alloc hit of key through a (whose ctx is ca): how many blocks
 * it obtained. */
static int ca_hit_obtains(pc_coll *co, const char *key, const pc_allocator *a,
                          struct counting_alloc *ca, void **v, size_t *vlen)
{
    ca->obtained = 0;
    check_rc(pc_get_alloc(co, key, strlen(key), a, v, vlen, NULL), PC_OK);
    return ca->obtained;
}

static void get_alloc_paths(void **state)
{
    struct fx *f = *state;
    struct counting_alloc ca = {0};
    const pc_allocator a = {ca_obtain, ca_release, &ca};
    void *v = (void *)1;
    size_t vlen = 99;
    pc_meta m;

    set_str(f->def, "b", "0123456789", 3000);
    check_rc(pc_get_alloc(f->def, S("b"), &a, &v, &vlen, &m), PC_OK);
    assert_int_equal(vlen, 10);
    assert_string_equal(v, "0123456789"); /* NUL-terminated */
    assert_int_equal(ca.obtained, 1);     /* one block, of the value's size + NUL */
    assert_int_equal(ca.last_n, 11);
    assert_int_equal(m.vlen, 10);
    assert_true(m.ttl_ms > 2000 && m.ttl_ms <= 3000);
    ca_release(v, &ca);

    /* the next read obtains ahead, at the guess the first hit left (its
     * size rounded up to a line): still one block */
    assert_int_equal(ca_hit_obtains(f->def, "b", &a, &ca, &v, &vlen), 1);
    assert_int_equal(ca.last_n, 65);
    assert_int_equal(vlen, 10);
    assert_string_equal(v, "0123456789");
    ca_release(v, &ca);

    /* an absent key: no allocation at all, and nothing returned, with a
     * guess in place too */
    ca.obtained = 0;
    check_rc(pc_get_alloc(f->def, S("nope"), &a, &v, &vlen, NULL), PC_ENOTFOUND);
    assert_int_equal(ca.obtained, 0);
    assert_null(v);
    assert_int_equal(vlen, 0);

    /* a value over the guess: the block obtained ahead is released and one
     * of the value's size obtained; the guess follows it */
    char mid[500];
    memset(mid, 'm', sizeof mid);
    check_rc(pc_set(f->def, S("mid"), mid, sizeof mid, 0, 0), PC_OK);
    assert_int_equal(ca_hit_obtains(f->def, "mid", &a, &ca, &v, &vlen), 2);
    assert_int_equal(ca.last_n, sizeof mid + 1);
    assert_int_equal(ca.live, 1);
    assert_int_equal(vlen, sizeof mid);
    assert_memory_equal(v, mid, sizeof mid);
    ca_release(v, &ca);
    assert_int_equal(ca_hit_obtains(f->def, "mid", &a, &ca, &v, &vlen), 1);
    assert_int_equal(ca.last_n, 513);
    assert_memory_equal(v, mid, sizeof mid);
    ca_release(v, &ca);
    /* a smaller value fits the guess's block */
    assert_int_equal(ca_hit_obtains(f->def, "b", &a, &ca, &v, &vlen), 1);
    assert_int_equal(vlen, 10);
    assert_string_equal(v, "0123456789");
    ca_release(v, &ca);

    /* binary values and the largest value, copied whole */
    static unsigned char big[PC_VALUE_MAX];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 7);
    big[5] = 0;
    check_rc(pc_set(f->def, S("big"), big, sizeof big, 0, 0), PC_OK);
    check_rc(pc_get_alloc(f->def, S("big"), &a, &v, &vlen, NULL), PC_OK);
    assert_int_equal(vlen, sizeof big);
    assert_memory_equal(v, big, sizeof big);
    ca_release(v, &ca);
    /* past the largest guess no block is obtained ahead: one, exact */
    assert_int_equal(ca_hit_obtains(f->def, "b", &a, &ca, &v, &vlen), 1);
    assert_int_equal(ca.last_n, 11);
    ca_release(v, &ca);

    /* counters as decimal */
    check_rc(pc_add(f->def, S("n"), -12345, 0, NULL), PC_OK);
    check_rc(pc_get_alloc(f->def, S("n"), &a, &v, &vlen, &m), PC_OK);
    assert_int_equal(vlen, 6);
    assert_string_equal(v, "-12345");
    assert_int_equal(m.is_counter, 1);
    assert_int_equal(m.counter, -12345);
    ca_release(v, &ca);

    /* a failing allocator: PC_EHEAP, nothing kept */
    ca.obtained = 0;
    ca.fail_at = 1;
    check_rc(pc_get_alloc(f->def, S("b"), &a, &v, &vlen, NULL), PC_EHEAP);
    assert_null(v);
    assert_int_equal(ca.live, 0);
    /* a block obtained ahead that fails is only no block yet: the read
     * obtains again at the value's size */
    ca.fail_at = 0;
    check_rc(pc_get_alloc(f->def, S("b"), &a, &v, &vlen, NULL), PC_OK); /* a guess again */
    ca_release(v, &ca);
    ca.fail_at = ca.fail_to = 1;
    assert_int_equal(ca_hit_obtains(f->def, "b", &a, &ca, &v, &vlen), 2);
    assert_string_equal(v, "0123456789");
    ca.fail_at = 0;
    ca_release(v, &ca);
    assert_int_equal(ca.live, 0);

    /* arguments */
    check_rc(pc_get_alloc(f->def, S("b"), NULL, &v, &vlen, NULL), PC_EINVAL);
    const pc_allocator half = {ca_obtain, NULL, &ca};
    check_rc(pc_get_alloc(f->def, S("b"), &half, &v, &vlen, NULL), PC_EINVAL);
    check_rc(pc_get_alloc(f->def, S("b"), &a, NULL, &vlen, NULL), PC_EINVAL);
    assert_int_equal(ca.live, 0);
}

static void probe_and_remove(void **state)
{
    struct fx *f = *state;
    pc_meta m;

    check_rc(pc_probe(f->def, S("r"), NULL), PC_ENOTFOUND);
    check_rc(pc_remove(f->def, S("r")), PC_ENOTFOUND);
    set_str(f->def, "r", "hello", 0);
    check_rc(pc_probe(f->def, S("r"), NULL), PC_OK);
    m = probe_meta(f->def, "r");
    assert_int_equal(m.vlen, 5);
    assert_int_equal(m.is_counter, 0);
    assert_int_equal(m.ttl_ms, -1);
    check_rc(pc_remove(f->def, S("r")), PC_OK);
    expect_absent(f->def, "r");
    check_rc(pc_remove(f->def, S("r")), PC_ENOTFOUND);
    check_rc(pc_add(f->def, S("rc"), 3, 0, NULL), PC_OK);
    assert_int_equal(probe_meta(f->def, "rc").is_counter, 1);
    check_rc(pc_remove(f->def, S("rc")), PC_OK);
    check_rc(pc_get_counter(f->def, S("rc"), &(int64_t){0}), PC_ENOTFOUND);
}

/* ---- counters -------------------------------------------------------------- */

static void add_sub_counters(void **state)
{
    struct fx *f = *state;
    int64_t r = 0, v = 0;
    pc_meta m;

    check_rc(pc_add(f->def, S("c"), 5, 0, &r), PC_OK);
    assert_int_equal(r, 5);
    check_rc(pc_add(f->def, S("c"), 3, 0, &r), PC_OK);
    assert_int_equal(r, 8);
    check_rc(pc_sub(f->def, S("c"), 10, 0, &r), PC_OK);
    assert_int_equal(r, -2);
    check_rc(pc_add(f->def, S("c"), 1, 0, NULL), PC_OK); /* result may be NULL */
    expect_str(f->def, "c", "-1");
    m = probe_meta(f->def, "c");
    assert_int_equal(m.is_counter, 1);
    assert_int_equal(m.ttl_ms, -1);
    check_rc(pc_get_counter(f->def, S("c"), &v), PC_OK);
    assert_int_equal(v, -1);
    check_rc(pc_sub(f->def, S("new-sub"), 7, 0, &r), PC_OK);
    assert_int_equal(r, -7);

    /* a decimal string converts; the result is a counter */
    set_str(f->def, "s", "42", 0);
    check_rc(pc_add(f->def, S("s"), 1, 0, &r), PC_OK);
    assert_int_equal(r, 43);
    assert_int_equal(probe_meta(f->def, "s").is_counter, 1);
    expect_str(f->def, "s", "43");
    set_str(f->def, "neg", "-9223372036854775808", 0);
    check_rc(pc_add(f->def, S("neg"), 0, 0, &r), PC_OK);
    assert_true(r == INT64_MIN);

    /* anything else is PC_ENOTNUM and stays as it was */
    static const char *const bad[] = {"abc", "", "12a", "1.5", "0x10", "--1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        set_str(f->def, "bad", bad[i], 0);
        check_rc(pc_add(f->def, S("bad"), 1, 0, &r), PC_ENOTNUM);
        check_rc(pc_sub(f->def, S("bad"), 1, 0, &r), PC_ENOTNUM);
        expect_str(f->def, "bad", bad[i]);
        assert_int_equal(probe_meta(f->def, "bad").is_counter, 0);
    }
    /* a string beyond int64 is not a number that can be converted */
    set_str(f->def, "huge", "9223372036854775808", 0);
    int rc = pc_add(f->def, S("huge"), 1, 0, &r);
    assert_true(rc == PC_ENOTNUM || rc == PC_ERANGE);
    expect_str(f->def, "huge", "9223372036854775808");
}

static void add_overflow_is_erange(void **state)
{
    struct fx *f = *state;
    int64_t r = 77;

    check_rc(pc_add(f->def, S("o"), 1, 0, NULL), PC_OK);
    check_rc(pc_add(f->def, S("o"), INT64_MAX, 0, &r), PC_ERANGE);
    assert_int_equal(r, 77); /* out-parameter untouched */
    check_rc(pc_get_counter(f->def, S("o"), &r), PC_OK);
    assert_int_equal(r, 1);

    check_rc(pc_add(f->def, S("max"), INT64_MAX, 0, &r), PC_OK);
    check_rc(pc_add(f->def, S("max"), 1, 0, NULL), PC_ERANGE);
    check_rc(pc_get_counter(f->def, S("max"), &r), PC_OK);
    assert_true(r == INT64_MAX);

    check_rc(pc_sub(f->def, S("min"), INT64_MAX, 0, NULL), PC_OK);
    check_rc(pc_sub(f->def, S("min"), 1, 0, &r), PC_OK);
    assert_true(r == INT64_MIN);
    check_rc(pc_sub(f->def, S("min"), 1, 0, NULL), PC_ERANGE);
    check_rc(pc_add(f->def, S("min"), -1, 0, NULL), PC_ERANGE);
    check_rc(pc_get_counter(f->def, S("min"), &r), PC_OK);
    assert_true(r == INT64_MIN);

    /* sub of INT64_MIN from 0 overflows (negating the delta must not be UB) */
    check_rc(pc_add(f->def, S("zero"), 0, 0, NULL), PC_OK);
    check_rc(pc_sub(f->def, S("zero"), INT64_MIN, 0, NULL), PC_ERANGE);
    check_rc(pc_get_counter(f->def, S("zero"), &r), PC_OK);
    assert_int_equal(r, 0);
    check_rc(pc_sub(f->def, S("m1"), 1, 0, NULL), PC_OK); /* -1 - INT64_MIN fits */
    check_rc(pc_sub(f->def, S("m1"), INT64_MIN, 0, &r), PC_OK);
    assert_true(r == INT64_MAX);

    /* a string converted at the edge overflows the same way, unchanged */
    set_str(f->def, "edge", "9223372036854775807", 0);
    check_rc(pc_add(f->def, S("edge"), 1, 0, NULL), PC_ERANGE);
    check_rc(pc_get_counter(f->def, S("edge"), &r), PC_OK);
    assert_true(r == INT64_MAX);
}

static void add_ttl_behaviour(void **state)
{
    struct fx *f = *state;
    pc_meta m;

    check_rc(pc_add(f->def, S("a"), 1, 0, NULL), PC_OK);
    assert_int_equal(probe_meta(f->def, "a").ttl_ms, -1);
    check_rc(pc_add(f->def, S("a"), 1, 5000, NULL), PC_OK); /* > 0 sets */
    m = probe_meta(f->def, "a");
    assert_true(m.ttl_ms > 4000 && m.ttl_ms <= 5000);
    check_rc(pc_add(f->def, S("a"), 1, 0, NULL), PC_OK); /* 0 keeps */
    m = probe_meta(f->def, "a");
    assert_true(m.ttl_ms > 4000 && m.ttl_ms <= 5000);

    set_str(f->def, "s", "10", 5000); /* a converted string keeps its expiry */
    check_rc(pc_sub(f->def, S("s"), 1, 0, NULL), PC_OK);
    m = probe_meta(f->def, "s");
    assert_true(m.ttl_ms > 4000 && m.ttl_ms <= 5000);
    expect_str(f->def, "s", "9");

    check_rc(pc_add(f->def, S("short"), 9, 50, NULL), PC_OK);
    sleep_ms(100);
    expect_absent(f->def, "short");
}

static void get_counter_paths(void **state)
{
    struct fx *f = *state;
    int64_t v = 5;

    check_rc(pc_get_counter(f->def, S("none"), &v), PC_ENOTFOUND);
    assert_int_equal(v, 5);
    check_rc(pc_add(f->def, S("c"), 123, 0, NULL), PC_OK);
    check_rc(pc_get_counter(f->def, S("c"), &v), PC_OK);
    assert_int_equal(v, 123);
    set_str(f->def, "s", "-7", 0);
    check_rc(pc_get_counter(f->def, S("s"), &v), PC_OK);
    assert_int_equal(v, -7);
    assert_int_equal(probe_meta(f->def, "s").is_counter, 0); /* reading converts nothing */
    set_str(f->def, "x", "seven", 0);
    v = 5;
    check_rc(pc_get_counter(f->def, S("x"), &v), PC_ENOTNUM);
    assert_int_equal(v, 5);
}

/* ---- expiry ---------------------------------------------------------------- */

static void expire_paths(void **state)
{
    struct fx *f = *state;
    pc_meta m;

    check_rc(pc_expire(f->def, S("absent"), 1000), PC_ENOTFOUND);
    expect_absent(f->def, "absent");
    set_str(f->def, "e", "val", 0);
    check_rc(pc_expire(f->def, S("e"), 5000), PC_OK);
    m = probe_meta(f->def, "e");
    assert_true(m.ttl_ms > 4000 && m.ttl_ms <= 5000);
    expect_str(f->def, "e", "val");
    check_rc(pc_expire(f->def, S("e"), 0), PC_OK);
    assert_int_equal(probe_meta(f->def, "e").ttl_ms, -1);
    expect_str(f->def, "e", "val");

    check_rc(pc_add(f->def, S("ce"), 11, 0, NULL), PC_OK);
    check_rc(pc_expire(f->def, S("ce"), 5000), PC_OK);
    m = probe_meta(f->def, "ce");
    assert_int_equal(m.is_counter, 1);
    expect_str(f->def, "ce", "11");

    check_rc(pc_expire(f->def, S("e"), 50), PC_OK);
    sleep_ms(100);
    expect_absent(f->def, "e");
    check_rc(pc_expire(f->def, S("e"), 5000), PC_ENOTFOUND); /* expired = absent */
    expect_absent(f->def, "e");
}

static void expiry_lazy_then_swept(void **state)
{
    struct fx *f = *state;
    char k[32], buf[16];
    size_t vlen, needed;
    int64_t v;
    pc_maint_report r;
    unsigned reaped = 0;

    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "tmp%d", i);
        set_str(f->def, k, "short-lived", 50);
    }
    check_rc(pc_add(f->def, S("tmpc"), 1, 50, NULL), PC_OK);
    for (int i = 0; i < 10; i++) {
        snprintf(k, sizeof(k), "keep%d", i);
        set_str(f->def, k, "stays", 0);
    }
    expect_str(f->def, "tmp99", "short-lived");
    assert_int_equal(stats(f->def).entries, 111);
    sleep_ms(75); /* lapsed by 25 ms: absent with no sweep having run */
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "tmp%d", i);
        expect_absent(f->def, k);
        check_rc(pc_get_buf(f->def, k, strlen(k), buf, sizeof(buf), &vlen, &needed, NULL),
                 PC_ENOTFOUND);
    }
    check_rc(pc_get_counter(f->def, S("tmpc"), &v), PC_ENOTFOUND);
    expect_str(f->def, "keep3", "stays");

    for (int i = 0; i < 1000; i++) {
        memset(&r, 0, sizeof(r));
        check_rc(pc_maintain(f->c, PC_MAINT_SWEEP, &r), PC_OK);
        reaped += r.reaped;
        if (r.reaped == 0 && stats(f->def).entries == 10)
            break;
    }
    assert_int_equal(reaped, 101);
    assert_int_equal(stats(f->def).entries, 10);
    expect_str(f->def, "keep9", "stays");
    check_rc(pc__test_verify(f->c, buf, sizeof(buf)), PC_OK);
}

/* ---- bytes ------------------------------------------------------------------- */

static void binary_keys_and_values(void **state)
{
    struct fx *f = *state;
    static const char k1[] = {'a', 0, 'b', '\r', '\n'};
    static const char k2[] = {'a', 0, 'c', '\r', '\n'};
    static const char v1[] = {0, 0, '\r', '\n', 'x', 0, '\n', '\r', 0};
    static const char v2[] = {'\r', '\n', '\r', '\n'};
    unsigned char all[256];
    char buf[300];
    size_t vlen, needed;

    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    check_rc(pc_set(f->def, k1, sizeof(k1), v1, sizeof(v1), 0, 0), PC_OK);
    check_rc(pc_set(f->def, k2, sizeof(k2), v2, sizeof(v2), 0, 0), PC_OK);
    check_rc(pc_set(f->def, "a", 1, all, sizeof(all), 0, 0), PC_OK);
    check_rc(pc_set(f->def, all, sizeof(all), "all", 3, 0, 0), PC_OK);
    expect_val(f->def, k1, sizeof(k1), v1, sizeof(v1));
    expect_val(f->def, k2, sizeof(k2), v2, sizeof(v2));
    expect_val(f->def, "a", 1, all, sizeof(all));
    expect_val(f->def, all, sizeof(all), "all", 3);
    check_rc(pc_probe(f->def, "a\0b", 3, NULL), PC_ENOTFOUND); /* a prefix is another key */
    check_rc(pc_get_buf(f->def, k1, sizeof(k1), buf, sizeof(buf), &vlen, &needed, NULL), PC_OK);
    assert_int_equal(vlen, sizeof(v1));
    assert_memory_equal(buf, v1, sizeof(v1));
    check_rc(pc_remove(f->def, k1, sizeof(k1)), PC_OK);
    expect_val(f->def, k2, sizeof(k2), v2, sizeof(v2));
}

static void empty_value(void **state)
{
    struct fx *f = *state;
    char buf[4];
    size_t vlen = 9, needed = 9;
    pc_meta m;

    check_rc(pc_set(f->def, S("empty"), "", 0, 0, 0), PC_OK);
    expect_val(f->def, "empty", 5, "", 0);
    check_rc(pc_get_buf(f->def, S("empty"), buf, sizeof(buf), &vlen, &needed, NULL), PC_OK);
    assert_int_equal(vlen, 0);
    vlen = needed = 9;
    check_rc(pc_get_buf(f->def, S("empty"), buf, 0, &vlen, &needed, NULL), PC_OK);
    assert_int_equal(vlen, 0);
    assert_int_equal(needed, 0);
    m = probe_meta(f->def, "empty");
    assert_int_equal(m.vlen, 0);
    set_str(f->def, "empty", "", 0); /* byte-identical rewrite of nothing */
    set_str(f->def, "empty", "now full", 0);
    expect_str(f->def, "empty", "now full");
    set_str(f->def, "empty", "", 0);
    expect_str(f->def, "empty", "");
}

/* ---- limits and errors ------------------------------------------------------- */

static void size_limits(void **state)
{
    struct fx *f = *state;
    size_t big = PC_VALUE_MAX + 1;
    char *key = malloc(PC_KEY_MAX + 1), *val = malloc(big);
    void *got = NULL;
    size_t glen = 0;

    assert_non_null(key);
    assert_non_null(val);
    memset(key, 'k', PC_KEY_MAX + 1);
    memset(val, 'v', big);
    val[0] = 'A';
    val[PC_VALUE_MAX - 1] = 'Z';
    check_rc(pc_set(f->def, key, PC_KEY_MAX + 1, "v", 1, 0, 0), PC_ETOOBIG);
    check_rc(pc_set(f->def, "k", 1, val, PC_VALUE_MAX + 1, 0, 0), PC_ETOOBIG);
    expect_absent(f->def, "k");
    check_rc(pc_set(f->def, "k", 1, val, PC_VALUE_MAX, 0, 0), PC_OK);
    check_rc(pc_get(f->def, "k", 1, &got, &glen, NULL), PC_OK);
    assert_int_equal(glen, PC_VALUE_MAX);
    assert_memory_equal(got, val, PC_VALUE_MAX);
    free(got);
    check_rc(pc_set(f->def, key, PC_KEY_MAX, "v", 1, 0, 0), PC_OK);
    expect_val(f->def, key, PC_KEY_MAX, "v", 1);
    /* both limits at once are still within the limits */
    key[0] = 'K';
    check_rc(pc_set(f->def, key, PC_KEY_MAX, val, PC_VALUE_MAX, 0, 0), PC_OK);
    expect_val(f->def, key, PC_KEY_MAX, val, PC_VALUE_MAX);
    check_rc(pc_add(f->def, key, PC_KEY_MAX + 1, 1, 0, NULL), PC_ETOOBIG);
    free(key);
    free(val);
}

static void invalid_arguments(void **state)
{
    struct fx *f = *state;
    void *got = NULL;
    size_t vlen, needed;
    char buf[8];
    int64_t v;
    pc_coll *co = NULL;
    pc_cache *c2 = NULL;
    pc_coll_stats st;
    pc_mem_stats ms;
    int bad = 0; /* every mismatch is reported, then the test fails once */

    soft_rc(pc_set(NULL, S("k"), S("v"), 0, 0), PC_EINVAL);
    soft_rc(pc_set(f->def, NULL, 3, S("v"), 0, 0), PC_EINVAL);
    soft_rc(pc_set(f->def, S("k"), NULL, 3, 0, 0), PC_EINVAL);
    soft_rc(pc_set(f->def, S("k"), S("v"), 0, PC_SET_NX | PC_SET_XX), PC_EINVAL);
    soft_rc(pc_set(f->def, S("k"), S("v"), 0, 0x80u), PC_EINVAL);
    soft_rc(pc_set(f->def, S("k"), S("v"), -5, 0), PC_EINVAL);
    expect_absent(f->def, "k");
    soft_rc(pc_get(NULL, S("k"), &got, &vlen, NULL), PC_EINVAL);
    soft_rc(pc_get(f->def, NULL, 1, &got, &vlen, NULL), PC_EINVAL);
    soft_rc(pc_get(f->def, S("k"), NULL, &vlen, NULL), PC_EINVAL);
    soft_rc(pc_get(f->def, S("k"), &got, NULL, NULL), PC_EINVAL);
    soft_rc(pc_get_buf(NULL, S("k"), buf, sizeof(buf), &vlen, &needed, NULL), PC_EINVAL);
    soft_rc(pc_get_buf(f->def, S("k"), NULL, 8, &vlen, &needed, NULL), PC_EINVAL);
    soft_rc(pc_get_buf(f->def, S("k"), buf, sizeof(buf), NULL, &needed, NULL), PC_EINVAL);
    soft_rc(pc_get_buf(f->def, S("k"), buf, sizeof(buf), &vlen, NULL, NULL), PC_EINVAL);
    soft_rc(pc_probe(NULL, S("k"), NULL), PC_EINVAL);
    soft_rc(pc_probe(f->def, NULL, 1, NULL), PC_EINVAL);
    soft_rc(pc_remove(NULL, S("k")), PC_EINVAL);
    soft_rc(pc_remove(f->def, NULL, 1), PC_EINVAL);
    soft_rc(pc_add(NULL, S("k"), 1, 0, NULL), PC_EINVAL);
    soft_rc(pc_add(f->def, NULL, 1, 1, 0, NULL), PC_EINVAL);
    soft_rc(pc_add(f->def, S("k"), 1, -1, NULL), PC_EINVAL);
    soft_rc(pc_sub(NULL, S("k"), 1, 0, NULL), PC_EINVAL);
    soft_rc(pc_get_counter(NULL, S("k"), &v), PC_EINVAL);
    soft_rc(pc_get_counter(f->def, S("k"), NULL), PC_EINVAL);
    soft_rc(pc_expire(NULL, S("k"), 1), PC_EINVAL);
    soft_rc(pc_expire(f->def, S("k"), -1), PC_EINVAL);
    expect_absent(f->def, "k");
    soft_rc(pc_maintain(NULL, PC_MAINT_ALL, NULL), PC_EINVAL);
    soft_rc(pc_coll_stats_get(NULL, &st), PC_EINVAL);
    soft_rc(pc_coll_stats_get(f->def, NULL), PC_EINVAL);
    soft_rc(pc_mem_stats_get(NULL, &ms), PC_EINVAL);
    soft_rc(pc_mem_stats_get(f->c, NULL), PC_EINVAL);
    soft_rc(pc_coll_find(NULL, S("default"), &co), PC_EINVAL);
    soft_rc(pc_coll_find(f->c, NULL, 3, &co), PC_EINVAL);
    soft_rc(pc_coll_find(f->c, S("default"), NULL), PC_EINVAL);
    assert_null(co);
    soft_rc(pc_cache_create(NULL, &c2), PC_EINVAL);
    assert_null(c2);
    pc_cache_destroy(NULL); /* accepted */
    if (bad)
        fail_msg("%d argument check(s) did not return the expected code", bad);
}

static void full_arena_is_enomem(void **state)
{
    static char val[1000];
    pc_cache *c = mk_cache("n=4", 4);
    pc_coll *n = pc_fx_coll(c, "n");
    char k[32];
    int i, rc = PC_OK, stored;

    (void)state;
    memset(val, 'x', sizeof(val));
    for (i = 0; i < 1000000; i++) {
        snprintf(k, sizeof(k), "fill%d", i);
        rc = pc_set(n, k, strlen(k), val, sizeof(val), 0, 0);
        if (rc != PC_OK)
            break;
    }
    check_rc(rc, PC_ENOMEM);
    stored = i;
    assert_true(stored > 100); /* 4 MiB holds more than a hundred 1 KB values */
    expect_absent(n, k);       /* the write was dropped */
    assert_true(stats(n).nomem >= 1);
    assert_int_equal(stats(n).entries, (uint64_t)stored);
    for (i = 0; i < stored; i += 7) { /* still serving reads */
        snprintf(k, sizeof(k), "fill%d", i);
        expect_val(n, k, strlen(k), val, sizeof(val));
    }
    for (i = 0; i < stored; i += 2) {
        snprintf(k, sizeof(k), "fill%d", i);
        check_rc(pc_remove(n, k, strlen(k)), PC_OK);
    }
    for (i = 0; i < stored / 4; i++) { /* and writing again into what was freed */
        snprintf(k, sizeof(k), "again%d", i);
        check_rc(pc_set(n, k, strlen(k), val, sizeof(val), 0, 0), PC_OK);
    }
    expect_val(n, "again0", 6, val, sizeof(val));
    expect_val(n, "fill1", 5, val, sizeof(val));
    check_rc(pc__test_verify(c, k, sizeof(k)), PC_OK);
    pc_cache_destroy(c);
}

static void strerror_names_every_code(void **state)
{
    const char *names[15];

    (void)state;
    for (int e = 0; e >= PC_ELOCKED; e--) {
        names[-e] = pc_strerror(e);
        assert_non_null(names[-e]);
        assert_true(names[-e][0] != '\0');
        for (int j = 0; j < -e; j++)
            if (strcmp(names[j], names[-e]) == 0)
                fail_msg("pc_strerror(%d) == pc_strerror(%d) == \"%s\"", e, -j, names[j]);
    }
    assert_non_null(pc_strerror(-999));
    assert_non_null(pc_strerror(1));
    assert_string_equal(pc_tier_name(PC_TIER_HUGETLB), "hugetlb");
    assert_string_equal(pc_tier_name(PC_TIER_THP), "thp");
    assert_string_equal(pc_tier_name(PC_TIER_COLLAPSE), "collapse");
    assert_string_equal(pc_tier_name(PC_TIER_4K), "4k");
    assert_non_null(pc_tier_name(0));
}

static void stats_counters_move(void **state)
{
    struct fx *f = *state;
    pc_coll_stats a = stats(f->g), b;

    assert_int_equal(a.entries, 0);
    assert_int_equal(a.hits + a.misses + a.stores + a.removes, 0);
    assert_int_equal(a.buckets, 16);
    assert_int_equal(a.log2_initial, 4);
    set_str(f->g, "a", "1", 0);
    set_str(f->g, "b", "2", 0);
    set_str(f->g, "c", "3", 0);
    set_str(f->g, "c", "4", 0);
    expect_str(f->g, "a", "1");
    expect_str(f->g, "b", "2");
    check_rc(pc_get(f->g, S("zz"), &(void *){NULL}, &(size_t){0}, NULL), PC_ENOTFOUND);
    check_rc(pc_remove(f->g, S("b")), PC_OK);
    b = stats(f->g);
    assert_int_equal(b.stores, 4);
    assert_int_equal(b.hits, 2);
    assert_int_equal(b.misses, 1);
    assert_int_equal(b.removes, 1);
    assert_int_equal(b.entries, 2);
    assert_int_equal(stats(f->def).stores, 0); /* per collection */
}

/* The table's invariants hold (pc__test_verify), or the test fails with
 * the first violation. */
static void verify_table(pc_cache *c)
{
    char msg[256] = "";

    if (pc__test_verify(c, msg, sizeof(msg)) != PC_OK)
        fail_msg("verify: %s", msg);
}

static void growth_splits_and_keeps_keys(void **state)
{
    struct fx *f = *state;
    enum { N = 20000 };
    char k[32], v[32];
    pc_maint_report r;
    pc_coll_stats st;
    uint64_t splits = 0;
    int i, calls;

    for (i = 0; i < N; i++) {
        snprintf(k, sizeof(k), "key:%d", i);
        snprintf(v, sizeof(v), "val:%d", i);
        set_str(f->g, k, v, 0);
    }
    assert_int_equal(stats(f->g).buckets, 16);
    for (calls = 0; calls < 10000; calls++) {
        memset(&r, 0xff, sizeof(r));
        check_rc(pc_maintain(f->c, PC_MAINT_GROW, &r), PC_OK);
        assert_int_equal(r.reaped, 0);
        splits += r.splits;
        if (r.splits == 0 && r.drained == 0)
            break;
    }
    assert_true(calls < 10000);
    st = stats(f->g);
    assert_int_equal(st.entries, N);
    assert_true(st.buckets >= N / 4); /* growth_load_factor 4 */
    assert_int_equal(st.buckets, 16 + splits);
    assert_int_equal(st.splits, splits);
    assert_true(st.overflow * 100 <= st.entries);
    for (i = 0; i < N; i++) {
        snprintf(k, sizeof(k), "key:%d", i);
        snprintf(v, sizeof(v), "val:%d", i);
        expect_str(f->g, k, v);
    }
    verify_table(f->c);
}

/* pc_prefetch is a hint: whatever it is given (present, absent, in
 * overflow, oversized, NULL), it changes no entry, no statistic, and the
 * table still verifies. */
static void prefetch_is_a_pure_hint(void **state)
{
    struct fx *f = *state;
    enum { N = 600 }; /* 16 buckets of g cannot hold them: overflow chains */
    char k[32], v[32], big[PC_KEY_MAX + 2];
    int i;

    for (i = 0; i < N; i++) {
        snprintf(k, sizeof(k), "pf:%d", i);
        snprintf(v, sizeof(v), "val:%d", i);
        set_str(f->g, k, v, 0);
    }
    assert_true(stats(f->g).overflow > 0);
    pc_coll_stats before = stats(f->g);
    memset(big, 'x', sizeof(big));
    for (int stage = 0; stage < 3; stage++) {
        for (i = 0; i < 2 * N; i++) { /* the second half are absent keys */
            snprintf(k, sizeof(k), "pf:%d", i);
            pc_prefetch(f->g, k, strlen(k), stage);
        }
        pc_prefetch(f->g, "", 0, stage);
        pc_prefetch(f->g, big, sizeof(big), stage);
        pc_prefetch(f->g, NULL, 5, stage);
        pc_prefetch(NULL, "pf:1", 4, stage);
    }
    pc_coll_stats after = stats(f->g);
    assert_memory_equal(&before, &after, sizeof(before));
    for (i = 0; i < N; i++) {
        snprintf(k, sizeof(k), "pf:%d", i);
        snprintf(v, sizeof(v), "val:%d", i);
        expect_str(f->g, k, v);
    }
    verify_table(f->c);
}

/* ---- the write block and the undo of a write the hook refused ------------- */

static int hook_rc; /* what the fake journal hook answers */
static unsigned hook_calls;

static int fake_hook(void *ctx, const pc_mutation *r)
{
    (void)ctx;
    (void)r;
    hook_calls++;
    return hook_rc;
}

static int64_t counter_of(pc_coll *co, const char *k)
{
    int64_t v = 0;
    check_rc(pc_get_counter(co, k, strlen(k), &v), PC_OK);
    return v;
}

static void write_block_refuses_writes(void **state)
{
    struct fx *f = *state;
    set_str(f->def, "a", "1", 0);
    check_rc(pc_coll_set_write_block(f->def, 1), PC_EINVAL);
    check_rc(pc_coll_set_write_block(f->def, PC_EREFUSED), PC_OK);
    assert_int_equal(pc_coll_write_block(f->def), PC_EREFUSED);
    check_rc(pc_set(f->def, S("a"), S("2"), 0, 0), PC_EREFUSED);
    check_rc(pc_set(f->def, S("b"), S("2"), 0, 0), PC_EREFUSED);
    check_rc(pc_remove(f->def, S("a")), PC_EREFUSED);
    check_rc(pc_add(f->def, S("n"), 1, 0, NULL), PC_EREFUSED);
    check_rc(pc_expire(f->def, S("a"), 1000), PC_EREFUSED);
    check_rc(pc_set_counter(f->def, S("n"), 5, 0), PC_EREFUSED);
    expect_val(f->def, S("a"), S("1")); /* reads go on */
    check_rc(pc_probe(f->def, S("b"), NULL), PC_ENOTFOUND);
    set_str(f->g, "other", "x", 0); /* another collection writes */
    check_rc(pc_coll_set_write_block(f->def, 0), PC_OK);
    set_str(f->def, "a", "3", 0);
    expect_val(f->def, S("a"), S("3"));
}

static void refused_hook_undoes_the_write(void **state)
{
    struct fx *f = *state;
    pc_meta m;
    set_str(f->def, "keep", "old", 0);
    set_str(f->def, "gone", "here", 0);
    set_str(f->def, "ttl", "t", 0);
    check_rc(pc_set_counter(f->def, S("n"), 7, 0), PC_OK);
    check_rc(pc_mutation_hook(f->c, fake_hook, NULL), PC_OK);
    check_rc(pc_coll_set_hook_word(f->def, 2), PC_OK);
    hook_rc = PC_ESYS; /* any non-zero result: the layer above did not take it */
    hook_calls = 0;
    check_rc(pc_set(f->def, S("keep"), S("new value"), 0, 0), PC_ESYS); /* replace */
    expect_val(f->def, S("keep"), S("old"));
    check_rc(pc_set(f->def, S("keep"), S("old"), 5000, 0), PC_ESYS); /* TTL-only refresh */
    check_rc(pc_probe(f->def, S("keep"), &m), PC_OK);
    assert_int_equal(m.ttl_ms, -1);
    check_rc(pc_set(f->def, S("fresh"), S("v"), 0, 0), PC_ESYS); /* insert */
    check_rc(pc_probe(f->def, S("fresh"), NULL), PC_ENOTFOUND);
    check_rc(pc_remove(f->def, S("gone")), PC_ESYS);
    expect_val(f->def, S("gone"), S("here"));
    check_rc(pc_add(f->def, S("n"), 5, 0, NULL), PC_ESYS); /* in place */
    assert_int_equal(counter_of(f->def, "n"), 7);
    check_rc(pc_add(f->def, S("keep2"), 1, 0, NULL), PC_ESYS); /* a new counter */
    check_rc(pc_probe(f->def, S("keep2"), NULL), PC_ENOTFOUND);
    check_rc(pc_expire(f->def, S("ttl"), 5000), PC_ESYS);
    check_rc(pc_probe(f->def, S("ttl"), &m), PC_OK);
    assert_int_equal(m.ttl_ms, -1);
    assert_int_equal(hook_calls, 7);
    /* the hook succeeds again: the writes stay */
    hook_rc = 0;
    set_str(f->def, "keep", "new", 0);
    check_rc(pc_remove(f->def, S("gone")), PC_OK);
    check_rc(pc_add(f->def, S("n"), 1, 0, NULL), PC_OK);
    expect_val(f->def, S("keep"), S("new"));
    check_rc(pc_probe(f->def, S("gone"), NULL), PC_ENOTFOUND);
    assert_int_equal(counter_of(f->def, "n"), 8);
    check_rc(pc_mutation_hook(f->c, NULL, NULL), PC_OK);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(set_get_plain),
        T(set_nx_xx),
        T(set_ttl_and_keepttl),
        T(get_buf_paths),
        T(get_alloc_paths),
        T(parse_i64_canonical),
        T(probe_and_remove),
        T(add_sub_counters),
        T(add_overflow_is_erange),
        T(add_ttl_behaviour),
        T(get_counter_paths),
        T(expire_paths),
        T(expiry_lazy_then_swept),
        T(binary_keys_and_values),
        T(empty_value),
        T(size_limits),
        T(invalid_arguments),
        cmocka_unit_test(full_arena_is_enomem),
        cmocka_unit_test(strerror_names_every_code),
        T(stats_counters_move),
        T(growth_splits_and_keeps_keys),
        T(prefetch_is_a_pure_hint),
        T(write_block_refuses_writes),
        T(refused_hook_undoes_the_write),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
