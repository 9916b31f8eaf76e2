/*
 * test_arena.c - the slab arena as seen through the engine: class bytes,
 * size classes, reuse and the memory gauges.
 *
 * Byte 0 of every carved cell is its class id and must never change; the
 * lock-free read path clamps lengths with it and both free paths index the
 * class table with it. These tests churn values of many sizes (1 B to 100 KB)
 * through sets, overwrites, removes, counters, overflow chains, expiry and the
 * sweep, and after each phase ask pc__test_verify, which checks every cell's
 * byte 0 (and the table's invariants). The overflow-node regression is
 * cachedb_perf's production crash: an overflow node whose next pointer sat at
 * offset 0 overwrote the class byte, which only the sweep then tripped over.
 * Also: every value size round-trips, freed cells are reused (no chunk growth
 * under steady churn), and pc_mem_stats stays consistent. Fork-time hoard
 * handling is left to the multi-process tests.
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

static void log_cb(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= PC_LOG_WARN)
        print_message("[pcache %d] %s\n", level, msg);
}

static pc_cache *mk(const char *colls, size_t mem_mb, unsigned load_factor)
{
    pc_config cfg;

    pc_fx_config(&cfg, colls, mem_mb);
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

static void verify(pc_cache *c, const char *when)
{
    char msg[256] = "";

    if (pc__test_verify(c, msg, sizeof(msg)) != PC_OK)
        fail_msg("pc__test_verify %s: %s", when, msg);
}

static pc_coll_stats stats(pc_coll *co)
{
    pc_coll_stats st;

    check_rc(pc_coll_stats_get(co, &st), PC_OK);
    return st;
}

static pc_mem_stats mem(pc_cache *c)
{
    pc_mem_stats ms;

    check_rc(pc_mem_stats_get(c, &ms), PC_OK);
    assert_true(ms.plain_free <= ms.plain_bytes);
    assert_true(ms.hugepage_free <= ms.hugepage_bytes);
    assert_true(ms.tier >= PC_TIER_HUGETLB && ms.tier <= PC_TIER_4K);
    return ms;
}

/* Runs the sweep until a call reclaims nothing; returns the total reaped. */
static unsigned sweep_until_quiet(pc_cache *c)
{
    pc_maint_report r;
    unsigned total = 0;

    for (int i = 0; i < 10000; i++) {
        memset(&r, 0, sizeof(r));
        check_rc(pc_maintain(c, PC_MAINT_SWEEP, &r), PC_OK);
        total += r.reaped;
        if (r.reaped == 0)
            return total;
    }
    fail_msg("sweep still reaping after 10000 calls");
    return total;
}

/* A value's bytes depend on its seed and position, so a shifted, truncated
 * or foreign copy does not compare equal. */
static void fill(unsigned char *v, size_t len, unsigned seed)
{
    for (size_t j = 0; j < len; j++)
        v[j] = (unsigned char)(seed + j * 7 + (j >> 8));
}

static void expect_filled(pc_coll *co, const char *k, size_t len, unsigned seed,
                          unsigned char *scratch)
{
    void *got = NULL;
    size_t glen = 0;

    check_rc(pc_get(co, k, strlen(k), &got, &glen, NULL), PC_OK);
    if (glen != len)
        fail_msg("%s: %zu bytes, want %zu", k, glen, len);
    fill(scratch, len, seed);
    assert_memory_equal(got, scratch, len);
    free(got);
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* ---- tests -------------------------------------------------------------- */

static void every_value_size_round_trips(void **state)
{
    pc_cache *c = mk(NULL, 256, 4);
    pc_coll *d = pc_fx_coll(c, "default");
    unsigned char *v = malloc(PC_VALUE_MAX), *scratch = malloc(PC_VALUE_MAX);
    size_t sizes[700], n = 0;
    char k[32];

    (void)state;
    assert_non_null(v);
    assert_non_null(scratch);
    for (size_t s = 0; s <= 520; s++)
        sizes[n++] = s;
    for (size_t p = 512; p <= PC_VALUE_MAX; p *= 2) {
        sizes[n++] = p - 1;
        sizes[n++] = p;
        if (p < PC_VALUE_MAX)
            sizes[n++] = p + 1;
        sizes[n++] = p + p / 2;
    }
    for (size_t i = 0; i < n; i++) {
        if (sizes[i] > PC_VALUE_MAX)
            continue;
        snprintf(k, sizeof(k), "sz%zu.%zu", i, sizes[i]);
        fill(v, sizes[i], (unsigned)i);
        check_rc(pc_set(d, k, strlen(k), v, sizes[i], 0, 0), PC_OK);
    }
    verify(c, "after storing every size");
    for (size_t i = 0; i < n; i++) {
        if (sizes[i] > PC_VALUE_MAX)
            continue;
        snprintf(k, sizeof(k), "sz%zu.%zu", i, sizes[i]);
        expect_filled(d, k, sizes[i], (unsigned)i, scratch);
        /* overwrite with the next size class up, then back down */
        size_t other = sizes[i] * 2 + 1 > PC_VALUE_MAX ? 1 : sizes[i] * 2 + 1;
        fill(v, other, (unsigned)i + 1);
        check_rc(pc_set(d, k, strlen(k), v, other, 0, 0), PC_OK);
        expect_filled(d, k, other, (unsigned)i + 1, scratch);
        if (i % 2)
            check_rc(pc_remove(d, k, strlen(k)), PC_OK);
    }
    verify(c, "after overwrites and removes");
    free(v);
    free(scratch);
    pc_cache_destroy(c);
}

/* Random churn over nkeys keys of one small collection; growth_load_factor
 * decides whether the overflow chains drain (4) or stay (0). */
static void churn(unsigned load_factor)
{
    static const size_t sizes[] = {1,    2,    7,     8,     9,     15,    16,    17,   31,
                                   32,   33,   63,    64,    65,    100,   127,   128,  129,
                                   255,  256,  257,   500,   1000,  1024,  2000,  4096, 5000,
                                   8192, 9999, 16384, 30000, 50000, 65536, 100000};
    enum { NKEYS = 1500, OPS = 40000, NS = sizeof(sizes) / sizeof(sizes[0]) };
    enum { ABSENT, KEPT, VOLATILE, COUNTER };
    struct {
        uint32_t len, seed;
        int64_t n;
        int st;
    } *model = calloc(NKEYS, sizeof(*model));
    pc_cache *c = mk("ch=4", 512, load_factor);
    pc_coll *ch = pc_fx_coll(c, "ch");
    unsigned char *v = malloc(100000), *scratch = malloc(100000);
    uint64_t rng = 0x9E3779B97F4A7C15ull ^ load_factor, live = 0, in_ovf = 0;
    char k[32], when[64];

    assert_non_null(model);
    assert_non_null(v);
    assert_non_null(scratch);
    for (int op = 1; op <= OPS; op++) {
        unsigned i = (unsigned)(xorshift(&rng) % NKEYS), r = (unsigned)(xorshift(&rng) % 10);
        snprintf(k, sizeof(k), "churn:%u", i);
        if (r < 6) { /* set or overwrite, one in five with a short TTL */
            size_t len = sizes[xorshift(&rng) % NS];
            int vol = xorshift(&rng) % 5 == 0;
            model[i].seed = (uint32_t)op;
            fill(v, len, model[i].seed);
            check_rc(pc_set(ch, k, strlen(k), v, len, vol ? 30 : 0, 0), PC_OK);
            model[i].len = (uint32_t)len;
            model[i].st = vol ? VOLATILE : KEPT;
        } else if (r < 8) {
            int rc = pc_remove(ch, k, strlen(k));
            if (model[i].st == KEPT || model[i].st == COUNTER)
                check_rc(rc, PC_OK);
            else if (model[i].st == ABSENT)
                check_rc(rc, PC_ENOTFOUND);
            model[i].st = ABSENT;
        } else if (model[i].st != KEPT) { /* counters: absent/expired start at 0 */
            int64_t res = 0, base = model[i].st == COUNTER ? model[i].n : 0;
            pc_meta m;
            int rc = pc_add(ch, k, strlen(k), op, 0, &res);

            if (rc == PC_ENOTNUM) { /* a volatile string, still alive */
                assert_int_equal(model[i].st, VOLATILE);
            } else {
                check_rc(rc, PC_OK);
                if (model[i].st != VOLATILE)
                    assert_true(res == base + op);
                /* a live volatile string that parsed as a number keeps its
                 * TTL (and may lapse right away) */
                int prc = pc_probe(ch, k, strlen(k), &m);
                if (model[i].st != VOLATILE || prc != PC_ENOTFOUND)
                    check_rc(prc, PC_OK);
                model[i].n = res;
                model[i].st = prc == PC_OK && m.ttl_ms == -1 ? COUNTER : VOLATILE;
            }
        }
        if (op % 4000 == 0) {
            if (op % 8000 == 0)
                sleep_ms(40); /* let the short TTLs lapse */
            check_rc(pc_maintain(c, PC_MAINT_ALL, NULL), PC_OK);
            snprintf(when, sizeof(when), "after op %d (load factor %u)", op, load_factor);
            verify(c, when);
        }
        if (op % 1000 == 0)
            in_ovf += stats(ch).overflow > 0;
    }
    assert_true(in_ovf > 0); /* the churn did run with overflow chains */
    sleep_ms(40);
    sweep_until_quiet(c);
    verify(c, "after the final sweep");
    for (unsigned i = 0; i < NKEYS; i++) {
        snprintf(k, sizeof(k), "churn:%u", i);
        if (model[i].st == KEPT) {
            expect_filled(ch, k, model[i].len, model[i].seed, scratch);
            live++;
        } else if (model[i].st == COUNTER) {
            int64_t n;
            check_rc(pc_get_counter(ch, k, strlen(k), &n), PC_OK);
            assert_true(n == model[i].n);
            live++;
        } else {
            check_rc(pc_probe(ch, k, strlen(k), NULL), PC_ENOTFOUND);
        }
    }
    assert_int_equal(stats(ch).entries, live);
    pc_mem_stats ms = mem(c);
    assert_true(ms.chunks > 0);
    free(model);
    free(v);
    free(scratch);
    pc_cache_destroy(c);
}

static void churn_keeps_class_bytes_with_growth(void **state)
{
    (void)state;
    churn(4);
}

static void churn_keeps_class_bytes_in_overflow(void **state)
{
    (void)state;
    churn(0);
}

static void overflow_nodes_never_clobber_class_byte(void **state)
{
    enum { NTMP = 600, NKEEP = 50 };
    pc_cache *c = mk("o=4", 64, 0); /* growth disabled: 16 buckets, 96 slots */
    pc_coll *o = pc_fx_coll(c, "o");
    unsigned char v[300], scratch[300];
    uint64_t keep_ovf = 0;
    char k[32];

    (void)state;
    for (int round = 0; round < 3; round++) {
        int ovf = 0;

        for (int i = 0; i < NKEEP && round == 0; i++) {
            snprintf(k, sizeof(k), "keep%d", i);
            fill(v, (size_t)i + 1, (unsigned)i);
            check_rc(pc_set(o, k, strlen(k), v, (size_t)i + 1, 0, 0), PC_OK);
        }
        for (int i = 0; i < NTMP; i++) {
            size_t len = 1 + (size_t)(i * 37 + round) % sizeof(v);
            snprintf(k, sizeof(k), "tmp%d.%d", round, i);
            fill(v, len, (unsigned)i);
            if (i % 3 == 0)
                check_rc(pc_add(o, k, strlen(k), i, 50, NULL), PC_OK);
            else
                check_rc(pc_set(o, k, strlen(k), v, len, 50, 0), PC_OK);
            ovf += pc__test_in_overflow(o, k, strlen(k)) == 1;
        }
        assert_true(ovf > NTMP / 2);
        verify(c, "with the overflow chains full");
        sleep_ms(100);
        unsigned reaped = sweep_until_quiet(c);
        assert_int_equal(reaped, NTMP);
        verify(c, "after the sweep reclaimed the overflow");
        assert_int_equal(stats(o).entries, NKEEP);
        keep_ovf = 0;
        for (int i = 0; i < NKEEP; i++) {
            snprintf(k, sizeof(k), "keep%d", i);
            expect_filled(o, k, (size_t)i + 1, (unsigned)i, scratch);
            keep_ovf += pc__test_in_overflow(o, k, strlen(k)) == 1;
        }
        assert_int_equal(stats(o).overflow, keep_ovf); /* no reaped node left counted */
    }
    /* the freed cells and nodes are handed out again and stay well-formed */
    for (int i = 0; i < NTMP; i++) {
        snprintf(k, sizeof(k), "again%d", i);
        fill(v, 64, (unsigned)i);
        check_rc(pc_set(o, k, strlen(k), v, 64, 0, 0), PC_OK);
    }
    verify(c, "after reusing the reclaimed cells");
    for (int i = 0; i < NTMP; i += 2) {
        snprintf(k, sizeof(k), "again%d", i);
        check_rc(pc_remove(o, k, strlen(k)), PC_OK);
    }
    verify(c, "after removing from the chains");
    pc_cache_destroy(c);
}

static void mem_stats_sane_and_cells_reused(void **state)
{
    pc_cache *c = mk(NULL, 64, 4);
    pc_coll *d = pc_fx_coll(c, "default");
    pc_mem_stats m0 = mem(c), m1 = m0, m;
    unsigned char v[3000];
    uint64_t chunks_round2 = 0;
    char k[32];

    (void)state;
    assert_int_equal(m0.tier, PC_TIER_4K); /* no huge pages were asked for */
    assert_int_equal(m0.hugepage_bytes, 0);
    assert_int_equal(m0.hugepage_free, 0);
    /* mem_mb is what records and tables get; the region's own metadata may
     * come on top of it */
    assert_true(m0.plain_bytes >= (64u << 20) && m0.plain_bytes <= (128u << 20));
    assert_true(m0.plain_free <= m0.plain_bytes);
    assert_true(m0.table_bytes >= (1u << PC_LOG2_DEFAULT) * 64u); /* 64-byte buckets */
    for (int round = 0; round < 10; round++) {
        uint64_t bytes = 0;

        for (int i = 0; i < 2000; i++) {
            size_t len = 1 + (size_t)(i * 131) % sizeof(v);
            bytes += len;
            snprintf(k, sizeof(k), "m%d", i);
            fill(v, len, (unsigned)(i + round));
            check_rc(pc_set(d, k, strlen(k), v, len, 0, 0), PC_OK);
        }
        m = mem(c);
        assert_true(m.chunks > 0);
        assert_true(m.chunk_bytes >= bytes); /* at least the values stored */
        assert_true(m.plain_free < m0.plain_free);
        if (round == 0)
            m1 = m;
        if (round == 1)
            chunks_round2 = m.chunks;
        if (round > 1 && m.chunks != chunks_round2)
            fail_msg("round %d: %llu chunks, %llu in round 2: freed cells are not reused", round,
                     (unsigned long long)m.chunks, (unsigned long long)chunks_round2);
        for (int i = 0; i < 2000; i++) {
            snprintf(k, sizeof(k), "m%d", i);
            check_rc(pc_remove(d, k, strlen(k)), PC_OK);
        }
        m = mem(c);
        assert_true(m.chunks >= m1.chunks); /* chunks are never given back */
    }
    assert_int_equal(stats(d).entries, 0);
    verify(c, "after ten write/remove rounds");
    pc_cache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_value_size_round_trips),
        cmocka_unit_test(churn_keeps_class_bytes_with_growth),
        cmocka_unit_test(churn_keeps_class_bytes_in_overflow),
        cmocka_unit_test(overflow_nodes_never_clobber_class_byte),
        cmocka_unit_test(mem_stats_sane_and_cells_reused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
