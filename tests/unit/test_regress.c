/*
 * test_regress.c - one test per bug that cachedb_perf (the design pcache
 * follows) shipped or nearly shipped, each named after the bug.
 *
 * string_over_counter_reads_as_string: the counter flag survived an in-place
 *   overwrite, so "12345678" read back as the int64 of its bytes.
 * torn_length_never_wraps_clamp: hdr + klen + vlen > bound wrapped for a torn
 *   vlen and skipped the clamp; reads must stay inside the record's cell.
 * overflow_key_found_by_every_path: a key spilled to the overflow chain must be
 *   found by every read and write path, and never duplicated into a bucket.
 * add_on_expired_counter_starts_from_delta: an expired counter is absent.
 * sequential_numeric_keys_overflow_under_1pct: a weak hash clusters "1".."N".
 * growth_runs_without_sweep_and_drains_overflow: growth is its own duty.
 * hugepage_exhaustion_never_negative: the huge-page free gauge must not wrap
 *   and writes must fall back to the plain region.
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

#define check_rc(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr), want_ = (want);                                                          \
        if (rc_ != want_)                                                                          \
            fail_msg("%s = %d (%s), want %d (%s)", #expr, rc_, pc_strerror(rc_), want_,            \
                     pc_strerror(want_));                                                          \
    } while (0)

#define S(lit) lit, (sizeof(lit) - 1)

/* No value in this file needs a cell larger than this: a read that returns
 * more came from past the end of the record's cell. */
#define CELL_BOUND 4096u

static void log_cb(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= PC_LOG_WARN)
        print_message("[pcache %d] %s\n", level, msg);
}

static pc_cache *mk(const char *colls, size_t mem_mb, unsigned load_factor, size_t huge_mb)
{
    pc_config cfg;

    pc_fx_config(&cfg, colls, mem_mb);
    cfg.hugepage_mb = huge_mb;
    cfg.growth_load_factor = load_factor;
    cfg.log.fn = log_cb;
    return pc_fx_create(&cfg);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void expect_val(pc_coll *co, const void *k, size_t klen, const void *v, size_t vlen)
{
    void *got = NULL;
    size_t glen = 0;

    check_rc(pc_get(co, k, klen, &got, &glen, NULL), PC_OK);
    assert_int_equal(glen, vlen);
    assert_memory_equal(got, v, vlen);
    free(got);
}

static pc_coll_stats stats(pc_coll *co)
{
    pc_coll_stats st;

    check_rc(pc_coll_stats_get(co, &st), PC_OK);
    return st;
}

static void verify(pc_cache *c)
{
    char msg[256] = "";

    if (pc__test_verify(c, msg, sizeof(msg)) != PC_OK)
        fail_msg("pc__test_verify: %s", msg);
}

/* Calls pc_maintain(GROW) until it neither splits nor drains. */
static void grow_until_quiet(pc_cache *c)
{
    pc_maint_report r;

    for (int i = 0; i < 100000; i++) {
        memset(&r, 0, sizeof(r));
        check_rc(pc_maintain(c, PC_MAINT_GROW, &r), PC_OK);
        if (r.splits == 0 && r.drained == 0)
            return;
    }
    fail_msg("pc_maintain(GROW) still splitting after 100000 calls");
}

/* ---- the tests, one per bug ------------------------------------------------ */

static void string_over_counter_reads_as_string(void **state)
{
    pc_cache *c = mk(NULL, 64, 4, 0);
    pc_coll *d = pc_fx_coll(c, "default");
    const int64_t same_bytes = 4050765991979987505; /* "12345678" read as LE int64 */
    static const int64_t ttls[] = {0, 60000};
    char buf[32];
    size_t vlen, needed;
    int64_t v;
    pc_meta m;

    (void)state;
    assert_true(same_bytes == 0x3837363534333231);
    check_rc(pc_add(d, S("plain"), 12345678, 0, NULL), PC_OK);
    check_rc(pc_set(d, S("plain"), S("12345678"), 0, 0), PC_OK);
    expect_val(d, S("plain"), S("12345678"));

    for (int i = 0; i < 2; i++) {
        /* a counter whose stored int64 is byte-identical to the string: the
         * write may take the TTL-refresh path and must still clear the flag */
        check_rc(pc_add(d, S("same"), same_bytes, 0, &v), PC_OK);
        assert_true(v == same_bytes);
        check_rc(pc_set(d, S("same"), S("12345678"), ttls[i], 0), PC_OK);
        expect_val(d, S("same"), S("12345678"));
        check_rc(pc_get_buf(d, S("same"), buf, sizeof(buf), &vlen, &needed, &m), PC_OK);
        assert_int_equal(vlen, 8);
        assert_memory_equal(buf, "12345678", 8);
        assert_int_equal(m.is_counter, 0);
        check_rc(pc_probe(d, S("same"), &m), PC_OK);
        assert_int_equal(m.is_counter, 0);
        assert_int_equal(m.vlen, 8);
        if (ttls[i])
            assert_true(m.ttl_ms > 50000);
        else
            assert_int_equal(m.ttl_ms, -1);
        check_rc(pc_get_counter(d, S("same"), &v), PC_OK);
        assert_int_equal(v, 12345678);
        check_rc(pc_add(d, S("same"), 1, 0, &v), PC_OK);
        assert_int_equal(v, 12345679);
        check_rc(pc_remove(d, S("same")), PC_OK);
    }
    pc_cache_destroy(c);
}

/* Reads key after its lengths were torn: no crash (ASan checks the copies),
 * and nothing larger than a cell ever comes back. */
static void read_torn(pc_coll *co, const char *k)
{
    static char buf[1u << 20];
    void *got = NULL;
    size_t vlen = 0, needed = 0;
    int64_t n;
    int rc;

    rc = pc_get(co, k, strlen(k), &got, &vlen, NULL);
    assert_true(rc == PC_OK || rc == PC_ENOTFOUND);
    if (rc == PC_OK) {
        assert_true(vlen <= CELL_BOUND);
        free(got);
    }
    rc = pc_get_buf(co, k, strlen(k), buf, sizeof(buf), &vlen, &needed, NULL);
    assert_true(rc == PC_OK || rc == PC_ENOTFOUND);
    assert_true(vlen <= CELL_BOUND);
    rc = pc_get_buf(co, k, strlen(k), buf, 4, &vlen, &needed, NULL);
    assert_true(rc == PC_OK || rc == PC_ETOOSMALL || rc == PC_ENOTFOUND);
    assert_true(vlen <= 4);
    assert_true(needed <= CELL_BOUND);
    rc = pc_get_counter(co, k, strlen(k), &n);
    assert_true(rc == PC_OK || rc == PC_ENOTNUM || rc == PC_ENOTFOUND);
    rc = pc_probe(co, k, strlen(k), NULL);
    assert_true(rc == PC_OK || rc == PC_ENOTFOUND);
}

static void torn_length_never_wraps_clamp(void **state)
{
    static const uint32_t vlens[] = {0xFFFFFFF0u, 0xFFFFFFFFu, 0x80000000u, 0xFFFFFF00u,
                                     1u << 20,    5000u,       0u};
    static const uint16_t klens[] = {0xFFF0u, 0xFFFFu, 0x8000u, 200u, 0u};
    pc_cache *c = mk(NULL, 64, 4, 0);
    pc_coll *d = pc_fx_coll(c, "default");
    char val[100], k[32];

    (void)state;
    memset(val, 'v', sizeof(val));
    /* torn vlen, key intact: the reader finds the record and must clamp */
    for (size_t i = 0; i < sizeof(vlens) / sizeof(vlens[0]); i++) {
        snprintf(k, sizeof(k), "torn-v%zu", i);
        check_rc(pc_set(d, k, strlen(k), val, sizeof(val), 0, 0), PC_OK);
        check_rc(pc__test_tear_lengths(d, k, strlen(k), (uint16_t)strlen(k), vlens[i]), PC_OK);
        read_torn(d, k);
        /* tearing back restores the record exactly */
        check_rc(pc__test_tear_lengths(d, k, strlen(k), (uint16_t)strlen(k), sizeof(val)), PC_OK);
        expect_val(d, k, strlen(k), val, sizeof(val));
    }
    /* a counter's length torn the same way */
    check_rc(pc_add(d, S("torn-c"), 42, 0, NULL), PC_OK);
    check_rc(pc__test_tear_lengths(d, S("torn-c"), 6, 0xFFFFFFF0u), PC_OK);
    read_torn(d, "torn-c");
    /* torn klen (and both): the key no longer matches, or is clamped */
    for (size_t i = 0; i < sizeof(klens) / sizeof(klens[0]); i++) {
        snprintf(k, sizeof(k), "torn-k%zu", i);
        check_rc(pc_set(d, k, strlen(k), val, sizeof(val), 0, 0), PC_OK);
        check_rc(pc__test_tear_lengths(d, k, strlen(k), klens[i], i % 2 ? 0xFFFFFFF0u : 100u),
                 PC_OK);
        read_torn(d, k);
    }
    check_rc(pc__test_tear_lengths(d, S("absent"), 6, 1), PC_ENOTFOUND);
    expect_val(d, S("torn-v0"), val, sizeof(val)); /* neighbours unharmed */
    pc_cache_destroy(c);
}

static void overflow_key_found_by_every_path(void **state)
{
    enum { N = 400 };
    pc_cache *c = mk("o=4", 64, 0, 0); /* growth disabled: 16 buckets */
    pc_coll *o = pc_fx_coll(c, "o");
    char k[32], v[32], buf[64];
    int in_ovf[N], n_ovf = 0, i;
    size_t vlen, needed;
    pc_meta m;
    int64_t n;

    (void)state;
    for (i = 0; i < N; i++) {
        snprintf(k, sizeof(k), "%c%d", i % 2 ? 'c' : 's', i);
        snprintf(v, sizeof(v), "v%d", i);
        if (i % 2)
            check_rc(pc_add(o, k, strlen(k), i, 0, NULL), PC_OK);
        else
            check_rc(pc_set(o, k, strlen(k), v, strlen(v), 0, 0), PC_OK);
    }
    for (i = 0; i < N; i++) {
        snprintf(k, sizeof(k), "%c%d", i % 2 ? 'c' : 's', i);
        in_ovf[i] = pc__test_in_overflow(o, k, strlen(k));
        assert_true(in_ovf[i] == 0 || in_ovf[i] == 1);
        n_ovf += in_ovf[i];
    }
    assert_true(n_ovf >= N / 4); /* 16 small buckets cannot hold 400 keys */
    assert_int_equal(stats(o).overflow, (uint64_t)n_ovf);
    assert_int_equal(stats(o).entries, N);
    assert_int_equal(stats(o).buckets, 16);
    verify(c);

    for (i = 0; i < N; i++) {
        if (!in_ovf[i])
            continue;
        snprintf(k, sizeof(k), "%c%d", i % 2 ? 'c' : 's', i);
        snprintf(v, sizeof(v), "%s%d", i % 2 ? "" : "v", i);
        expect_val(o, k, strlen(k), v, strlen(v));
        check_rc(pc_get_buf(o, k, strlen(k), buf, sizeof(buf), &vlen, &needed, NULL), PC_OK);
        assert_int_equal(vlen, strlen(v));
        assert_memory_equal(buf, v, vlen);
        check_rc(pc_probe(o, k, strlen(k), &m), PC_OK);
        assert_int_equal(m.is_counter, i % 2);
        check_rc(pc_set(o, k, strlen(k), "x", 1, 0, PC_SET_NX), PC_EEXIST);
        if (i % 2) {
            check_rc(pc_get_counter(o, k, strlen(k), &n), PC_OK);
            assert_int_equal(n, i);
            check_rc(pc_add(o, k, strlen(k), 1000, 0, &n), PC_OK);
            assert_int_equal(n, i + 1000);
        } else {
            check_rc(pc_set(o, k, strlen(k), S("rewritten"), 0, PC_SET_XX), PC_OK);
            expect_val(o, k, strlen(k), S("rewritten"));
        }
        check_rc(pc_expire(o, k, strlen(k), 60000), PC_OK);
        check_rc(pc_probe(o, k, strlen(k), &m), PC_OK);
        assert_true(m.ttl_ms > 50000);
    }
    assert_int_equal(stats(o).entries, N);
    verify(c);

    /* free bucket slots, then overwrite overflow keys: never two copies */
    for (i = 0; i < N; i++)
        if (!in_ovf[i]) {
            snprintf(k, sizeof(k), "%c%d", i % 2 ? 'c' : 's', i);
            check_rc(pc_remove(o, k, strlen(k)), PC_OK);
        }
    for (i = 0; i < N; i += 2)
        if (in_ovf[i]) {
            snprintf(k, sizeof(k), "s%d", i);
            check_rc(pc_set(o, k, strlen(k), S("again"), 0, 0), PC_OK);
            check_rc(pc_add(o, S("probe-insert"), 1, 0, NULL), PC_OK);
        }
    verify(c);
    assert_int_equal(stats(o).entries, (uint64_t)n_ovf + 1);
    for (i = 0; i < N; i++) {
        if (!in_ovf[i])
            continue;
        snprintf(k, sizeof(k), "%c%d", i % 2 ? 'c' : 's', i);
        check_rc(pc_remove(o, k, strlen(k)), PC_OK);
        check_rc(pc_probe(o, k, strlen(k), NULL), PC_ENOTFOUND);
        check_rc(pc_remove(o, k, strlen(k)), PC_ENOTFOUND);
    }
    assert_int_equal(stats(o).entries, 1);
    assert_int_equal(stats(o).overflow, pc__test_in_overflow(o, S("probe-insert")));
    verify(c);
    pc_cache_destroy(c);
}

static void add_on_expired_counter_starts_from_delta(void **state)
{
    pc_cache *c = mk(NULL, 64, 4, 0);
    pc_coll *d = pc_fx_coll(c, "default");
    int64_t r = 0;
    pc_meta m;

    (void)state;
    check_rc(pc_add(d, S("ctr"), 100, 50, NULL), PC_OK);
    check_rc(pc_sub(d, S("neg"), 100, 50, NULL), PC_OK);
    check_rc(pc_set(d, S("str"), S("100"), 50, 0), PC_OK);
    sleep_ms(100); /* lapsed; no sweep runs */
    check_rc(pc_add(d, S("ctr"), 5, 0, &r), PC_OK);
    assert_int_equal(r, 5);
    check_rc(pc_sub(d, S("neg"), 5, 0, &r), PC_OK);
    assert_int_equal(r, -5);
    check_rc(pc_add(d, S("str"), 5, 0, &r), PC_OK);
    assert_int_equal(r, 5);
    /* the lapsed expiry is not carried over: the key is live, with none */
    check_rc(pc_probe(d, S("ctr"), &m), PC_OK);
    assert_int_equal(m.ttl_ms, -1);
    assert_int_equal(m.is_counter, 1);
    check_rc(pc_get_counter(d, S("ctr"), &r), PC_OK);
    assert_int_equal(r, 5);
    check_rc(pc_get_counter(d, S("str"), &r), PC_OK);
    assert_int_equal(r, 5);
    assert_int_equal(stats(d).entries, 3); /* replaced, not added beside */
    verify(c);
    pc_cache_destroy(c);
}

static void sequential_numeric_keys_overflow_under_1pct(void **state)
{
    enum { N = 500000 };
    pc_cache *c = mk("seq", 256, 4, 0);
    pc_coll *s = pc_fx_coll(c, "seq");
    char k[16];
    pc_coll_stats st;

    (void)state;
    for (int i = 1; i <= N; i++) {
        int len = snprintf(k, sizeof(k), "%d", i);
        check_rc(pc_set(s, k, (size_t)len, k, (size_t)len, 0, 0), PC_OK);
        if (i % 10000 == 0)
            check_rc(pc_maintain(c, PC_MAINT_GROW, NULL), PC_OK);
    }
    grow_until_quiet(c);
    st = stats(s);
    assert_int_equal(st.entries, N);
    if (st.overflow * 100 > st.entries)
        fail_msg("overflow %llu of %llu entries (> 1%%) in %llu buckets",
                 (unsigned long long)st.overflow, (unsigned long long)st.entries,
                 (unsigned long long)st.buckets);
    for (int i = 1; i <= N; i += 97) {
        int len = snprintf(k, sizeof(k), "%d", i);
        expect_val(s, k, (size_t)len, k, (size_t)len);
    }
    verify(c);
    pc_cache_destroy(c);
}

static void growth_runs_without_sweep_and_drains_overflow(void **state)
{
    enum { N = 1000000 };
    pc_cache *c = mk("b=4", 512, 4, 0);
    pc_coll *b = pc_fx_coll(c, "b");
    char k[24];
    pc_maint_report r;
    pc_coll_stats st;
    uint64_t splits = 0, drained = 0;
    int i, calls = 0;

    (void)state;
    for (i = 0; i < N; i++) {
        int len = snprintf(k, sizeof(k), "bulk:%d", i);
        check_rc(pc_set(b, k, (size_t)len, &i, sizeof(i), 0, 0), PC_OK);
        if (i % 10000 == 9999) {
            memset(&r, 0xff, sizeof(r));
            check_rc(pc_maintain(c, PC_MAINT_GROW, &r), PC_OK);
            assert_int_equal(r.reaped, 0);
            assert_int_equal(r.buckets_probed, 0); /* the sweep did not run */
            splits += r.splits;
            drained += r.drained;
        }
    }
    assert_true(splits > 0);
    do {
        memset(&r, 0, sizeof(r));
        check_rc(pc_maintain(c, PC_MAINT_GROW, &r), PC_OK);
        splits += r.splits;
        drained += r.drained;
        assert_true(++calls < 100000);
    } while (r.splits != 0 || r.drained != 0);
    st = stats(b);
    assert_int_equal(st.entries, N);
    assert_int_equal(st.buckets, 16 + splits);
    assert_true(st.buckets >= N / 4);
    assert_true(drained > 0); /* 16 buckets overflowed before the first split */
    if (st.overflow * 100 > st.entries)
        fail_msg("overflow %llu of %llu entries (> 1%%) after %llu splits, %llu drained",
                 (unsigned long long)st.overflow, (unsigned long long)st.entries,
                 (unsigned long long)splits, (unsigned long long)drained);
    for (i = 0; i < N; i++) {
        int len = snprintf(k, sizeof(k), "bulk:%d", i);
        expect_val(b, k, (size_t)len, &i, sizeof(i));
    }
    verify(c);
    pc_cache_destroy(c);
}

/* Regression: pc_maintain spent the whole split budget in declaration
 * order, so a later collection stayed at its initial size, its keys in
 * overflow, until an earlier one reached its target. */
static void growth_budget_shared_across_collections(void **state)
{
    (void)state;
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "a=4;b=4";
    cfg.mem_mb = 256;
    cfg.growth_budget = 32;
    pc_cache *c;
    assert_int_equal(pc_cache_create(&cfg, &c), 0);
    pc_coll *a = pc_fx_coll(c, "a"), *b = pc_fx_coll(c, "b");
    char k[32];
    for (int i = 0; i < 100000; i++) {
        int n = snprintf(k, sizeof k, "a%d", i);
        assert_int_equal(pc_set(a, k, (size_t)n, "v", 1, 0, 0), 0);
    }
    for (int i = 0; i < 20000; i++) {
        int n = snprintf(k, sizeof k, "b%d", i);
        assert_int_equal(pc_set(b, k, (size_t)n, "v", 1, 0, 0), 0);
    }
    for (int t = 0; t < 50; t++)
        assert_int_equal(pc_maintain(c, PC_MAINT_GROW, NULL), 0);
    pc_coll_stats sa = stats(a), sb = stats(b);
    /* 50 calls x 32 splits shared by two hungry collections */
    assert_true(sb.buckets >= 16 + 50 * 16 - 16);
    assert_true(sa.buckets >= 16 + 50 * 16 - 16);
    verify(c);
    pc_cache_destroy(c);
}

static void hugepage_exhaustion_never_negative(void **state)
{
    static const size_t sizes[] = {100, 1000, 4000, 20000};
    pc_cache *c = mk(NULL, 64, 4, 2);
    pc_coll *d = pc_fx_coll(c, "default");
    static char val[20000];
    size_t written = 0;
    pc_mem_stats ms;
    char k[32];
    int i;

    (void)state;
    check_rc(pc_mem_stats_get(c, &ms), PC_OK);
    assert_true(ms.tier >= PC_TIER_HUGETLB && ms.tier <= PC_TIER_4K);
    assert_non_null(pc_tier_name(ms.tier));
    assert_int_equal(ms.hugepage_bytes, 2u << 20);
    assert_true(ms.hugepage_free <= ms.hugepage_bytes);
    for (i = 0; written < (16u << 20); i++) { /* 8x the reservation */
        size_t len = sizes[i % 4];
        snprintf(k, sizeof(k), "h%d", i);
        memset(val, 'a' + i % 26, len);
        check_rc(pc_set(d, k, strlen(k), val, len, 0, 0), PC_OK);
        written += len;
        if (i % 64 == 0) {
            check_rc(pc_mem_stats_get(c, &ms), PC_OK);
            if (ms.hugepage_free > ms.hugepage_bytes)
                fail_msg("hugepage_free %zu > hugepage_bytes %zu after %zu bytes", ms.hugepage_free,
                         ms.hugepage_bytes, written);
        }
    }
    /* Used up: what is left is a tail too small for the chunks written here
     * (small carves such as hint arrays may still fit it, so it need not be
     * exactly 0). The bug was the gauge wrapping to ~2^64. */
    check_rc(pc_mem_stats_get(c, &ms), PC_OK);
    if (ms.hugepage_free * 16 >= ms.hugepage_bytes)
        fail_msg("hugepage_free %zu of %zu after %zu bytes written", ms.hugepage_free,
                 ms.hugepage_bytes, written);
    size_t huge_left = ms.hugepage_free;
    assert_true(ms.plain_free < ms.plain_bytes);
    assert_true(ms.chunk_bytes >= (16u << 20));
    size_t plain_before = ms.plain_free;
    for (int j = 0; j < 200; j++, i++) { /* writes keep coming from the plain region */
        snprintf(k, sizeof(k), "h%d", i);
        memset(val, 'a' + i % 26, 20000);
        check_rc(pc_set(d, k, strlen(k), val, 20000, 0, 0), PC_OK);
    }
    check_rc(pc_mem_stats_get(c, &ms), PC_OK);
    assert_true(ms.hugepage_free <= huge_left);
    assert_true(ms.plain_free < plain_before);
    for (int j = 0; j < i; j += 13) {
        size_t len = j < i - 200 ? sizes[j % 4] : 20000;
        snprintf(k, sizeof(k), "h%d", j);
        memset(val, 'a' + j % 26, len);
        expect_val(d, k, strlen(k), val, len);
    }
    verify(c);
    pc_cache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(string_over_counter_reads_as_string),
        cmocka_unit_test(torn_length_never_wraps_clamp),
        cmocka_unit_test(overflow_key_found_by_every_path),
        cmocka_unit_test(add_on_expired_counter_starts_from_delta),
        cmocka_unit_test(sequential_numeric_keys_overflow_under_1pct),
        cmocka_unit_test(growth_runs_without_sweep_and_drains_overflow),
        cmocka_unit_test(growth_budget_shared_across_collections),
        cmocka_unit_test(hugepage_exhaustion_never_negative),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
