/*
 * test_rebalance.c - regression "free cells stay bound to their size class":
 * after 16 MiB were filled with 1000-byte values and flushed (DBSIZE 0),
 * SETs of 500, 100 and 10 bytes all got -OOM; only 1000-byte values fit.
 *
 * Each case fills a cache with one value size until PC_ENOMEM, deletes
 * everything and fills it with the next size, and compares how many values
 * fit with what a fresh cache of the same size takes: the memory freed is
 * usable by any size (pc_arena_reclaim moves fully free chunks to the class
 * that needs them). The table is large and never grows, so both caches give
 * the arena the same bytes.
 *
 * The partly used case deletes every other 1000-byte value instead, so no
 * chunk is free: the residents of a chunk move into the free cells of
 * others (drain.c) until the memory freed is usable by 100-byte values, and
 * every value that stayed reads back as written.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h> /* after the four headers it needs */

#include "pc_testhooks.h"
#include "pcache.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define MEM_MB 8

static pc_cache *open_cache(pc_coll **coll)
{
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "rb=17";
    cfg.mem_mb = MEM_MB;
    cfg.growth_load_factor = 0;
    pc_cache *c = NULL;
    assert_int_equal(pc_cache_create(&cfg, &c), 0);
    assert_int_equal(pc_coll_find(c, "rb", 2, coll), 0);
    return c;
}

/* Stores value after value of vlen bytes until the arena is full. */
static uint64_t fill(pc_coll *coll, size_t vlen)
{
    static char val[1000];
    memset(val, 'r', sizeof val);
    uint64_t n = 0;
    for (;; n++) {
        char k[24];
        int kl = snprintf(k, sizeof k, "%09" PRIu64, n);
        int rc = pc_set(coll, k, (size_t)kl, val, vlen, 0, 0);
        if (rc == PC_ENOMEM)
            return n;
        assert_int_equal(rc, 0);
    }
}

static void flush(pc_coll *coll, uint64_t expect)
{
    uint64_t n = 0;
    assert_int_equal(pc_del_glob(coll, "*", 1, &n), 0);
    assert_int_equal(n, expect);
}

static uint64_t fresh_capacity(size_t vlen)
{
    pc_coll *coll;
    pc_cache *c = open_cache(&coll);
    uint64_t n = fill(coll, vlen);
    pc_cache_destroy(c);
    return n;
}

/* Fills with each size of sizes[] in turn, flushing between. */
static void refill_sequence(const size_t *sizes, size_t nsizes)
{
    pc_coll *coll;
    pc_cache *c = open_cache(&coll);
    for (size_t i = 0; i < nsizes; i++) {
        uint64_t fresh = fresh_capacity(sizes[i]);
        uint64_t got = fill(coll, sizes[i]);
        print_message("%zu-byte values: %" PRIu64 " fit after the flush, %" PRIu64
                      " in a fresh cache (%.4f)\n",
                      sizes[i], got, fresh, (double)got / (double)fresh);
        /* all of it: a fresh cache's capacity */
        assert_true(got >= fresh);
        char msg[256];
        assert_int_equal(pc__test_verify(c, msg, sizeof msg), 0);
        flush(coll, got);
    }
    pc_cache_destroy(c);
}

static void test_rebalance_big_then_smaller(void **state)
{
    (void)state;
    static const size_t sizes[] = {1000, 500, 100, 10};
    refill_sequence(sizes, sizeof sizes / sizeof sizes[0]);
}

static void test_rebalance_small_then_bigger(void **state)
{
    (void)state;
    static const size_t sizes[] = {10, 1000};
    refill_sequence(sizes, sizeof sizes / sizeof sizes[0]);
}

/* What pc_mem_stats / pc_mem_classes report: every record is a cell in
 * use, a refused allocation is counted against its class, and after the
 * flush every carved byte is free. */
static void test_rebalance_partly_used_chunks(void **state)
{
    (void)state;
    pc_coll *coll;
    pc_cache *c = open_cache(&coll);
    uint64_t big = fill(coll, 1000);
    for (uint64_t i = 0; i < big; i += 2) {
        char k[24];
        int kl = snprintf(k, sizeof k, "%09" PRIu64, i);
        assert_int_equal(pc_remove(coll, k, (size_t)kl), 0);
    }
    pc_mem_stats before;
    assert_int_equal(pc_mem_stats_get(c, &before), 0);
    static char val[100];
    memset(val, 's', sizeof val);
    uint64_t small = 0;
    for (;; small++) {
        char k[24];
        int kl = snprintf(k, sizeof k, "s%09" PRIu64, small);
        int rc = pc_set(coll, k, (size_t)kl, val, sizeof val, 0, 0);
        if (rc == PC_ENOMEM)
            break;
        assert_int_equal(rc, 0);
    }
    /* a 100-byte value with its 10-byte key takes a 128-byte cell */
    double usable = (double)(small * 128) / (double)before.free_cell_bytes;
    print_message("%" PRIu64 " 1000-byte values, every other deleted: %" PRIu64
                  " free cell bytes took %" PRIu64 " 100-byte values (%.3f of them)\n",
                  big, before.free_cell_bytes, small, usable);
    assert_true(usable >= 0.9);
    for (uint64_t i = 1; i < big; i += 2) {
        char k[24], v[1000];
        int kl = snprintf(k, sizeof k, "%09" PRIu64, i);
        size_t len = 0, need = 0;
        assert_int_equal(pc_get_buf(coll, k, (size_t)kl, v, sizeof v, &len, &need, NULL), 0);
        assert_int_equal(len, 1000);
        for (size_t j = 0; j < len; j++)
            if (v[j] != 'r')
                fail_msg("key %" PRIu64 " byte %zu changed in a move", i, j);
    }
    char msg[256];
    assert_int_equal(pc__test_verify(c, msg, sizeof msg), 0);
    pc_cache_destroy(c);
}

static void test_rebalance_memory_report(void **state)
{
    (void)state;
    pc_coll *coll;
    pc_cache *c = open_cache(&coll);
    uint64_t n = fill(coll, 100);
    pc_mem_stats m;
    assert_int_equal(pc_mem_stats_get(c, &m), 0);
    pc_mem_class cl[96];
    unsigned nc = 0;
    assert_int_equal(pc_mem_classes(c, cl, 96, &nc), 0);
    uint64_t used_cells = 0, starved = 0;
    for (unsigned i = 0; i < nc; i++) {
        assert_true(cl[i].free_cells <= cl[i].cells);
        if (cl[i].cell_bytes > 16)
            used_cells += cl[i].cells - cl[i].free_cells;
        starved += cl[i].starved;
    }
    print_message("%" PRIu64 " records, %" PRIu64 " record cells in use, %" PRIu64
                  " used / %" PRIu64 " free cell bytes, %" PRIu64 " refused\n",
                  n, used_cells, m.used_cell_bytes, m.free_cell_bytes, m.starved);
    assert_int_equal(used_cells, n);
    assert_true(starved >= 1);
    assert_int_equal(m.starved, starved);
    /* the carved chunks, less each chunk's tail (under one cell) */
    assert_true(m.used_cell_bytes + m.free_cell_bytes <= m.chunk_bytes);
    assert_true(m.used_cell_bytes + m.free_cell_bytes + m.chunks * 256 >= m.chunk_bytes);
    flush(coll, n);
    assert_int_equal(pc_mem_stats_get(c, &m), 0);
    assert_int_equal(m.used_cell_bytes, 0);
    pc_cache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rebalance_big_then_smaller),
        cmocka_unit_test(test_rebalance_small_then_bigger),
        cmocka_unit_test(test_rebalance_partly_used_chunks),
        cmocka_unit_test(test_rebalance_memory_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
