/*
 * test_store_roundtrip.c - the snapshot store (storage/store/include/
 * pcache_store.h): saves loaded back into a fresh cache (a restart).
 *
 * Round trips through a real store in a temporary directory: strings,
 * binary keys and values with NUL bytes, the empty key, counters at the
 * int64 limits, TTLs (none, long, about to lapse), an empty collection and
 * a large SIP-like collection (1M entries in an optimised build, 200k under
 * the sanitizers; PCACHE_STORE_ENTRIES overrides), each checked entry by
 * entry after loading into a fresh cache. Expired records are skipped and
 * pruned; a collection never saved is not found.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "pcache.h"
#include "pcache_store.h"
#include "sipgen.h"
#include "store_testlib.h"

static void test_roundtrip_mixed(void **state)
{
    (void)state;
    char dir[300];
    mk_tmp(dir, sizeof dir, "mixed");
    pc_cache *c = pc_fx_cache("m;other", 64);
    pc_coll *co = pc_fx_coll(c, "m");
    put_mixed(co);
    int64_t t0 = mono_ms();
    pc_store *s = open_store(dir, PC_STORE_CREATE);
    pc_store_save_result sr;
    pc_store_save_opts so = {.journal_epoch = 77, .boot_gen = 9};
    check_rc(pc_store_save(s, co, &so, &sr), PC_OK);
    assert_int_equal(sr.saved, NMIXED + 1);
    assert_int_equal(sr.generation, 1);
    assert_true(sr.blocks >= 2); /* the 200 kB value closes a block of its own */
    pc_store_close(s);

    /* a fresh cache: a restart */
    pc_cache *c2 = pc_fx_cache("m;other", 64);
    pc_coll *co2 = pc_fx_coll(c2, "m");
    s = open_store(dir, 0);
    pc_store_load_result lr;
    check_rc(pc_store_load(s, co2, NULL, &lr), PC_OK);
    assert_int_equal(lr.loaded, NMIXED + 1);
    assert_int_equal(lr.skipped_expired, 0);
    assert_int_equal(lr.corrupt, 0);
    assert_int_equal(lr.meta.generation, 1);
    assert_int_equal(lr.meta.journal_epoch, 77);
    assert_int_equal(lr.meta.boot_gen, 9); /* the caller's, not the header's (0) */
    assert_int_equal(lr.meta.count, NMIXED + 1);
    check_mixed(co2, mono_ms() - t0);
    /* a collection never saved */
    pc_coll *other = pc_fx_coll(c2, "other");
    check_rc(pc_store_load(s, other, NULL, &lr), PC_ENOTFOUND);
    pc_store_problem *pr;
    size_t np;
    check_rc(pc_store_verify(s, NULL, &pr, &np), PC_OK);
    assert_int_equal(np, 0);
    pc_store_close(s);

    /* the short TTL lapses: the next load skips it and prunes it */
    usleep(2600 * 1000);
    pc_cache *c3 = pc_fx_cache("m", 64);
    pc_coll *co3 = pc_fx_coll(c3, "m");
    s = open_store(dir, 0);
    check_rc(pc_store_load(s, co3, NULL, &lr), PC_OK);
    assert_int_equal(lr.loaded, NMIXED);
    assert_int_equal(lr.skipped_expired, 1);
    assert_int_equal(lr.pruned, 1);
    check_rc(pc_probe(co3, "ttl-soon", 8, NULL), PC_ENOTFOUND);
    pc_store_coll_meta m;
    check_rc(pc_store_coll_meta_get(s, "m", &m), PC_OK);
    assert_int_equal(m.count, NMIXED);
    assert_int_equal(m.generation, 1); /* a prune keeps the generation */
    check_rc(pc_store_verify(s, "m", &pr, &np), PC_OK);
    assert_int_equal(np, 0);
    void *v;
    size_t vl;
    check_rc(pc_store_get(s, "m", "ttl-soon", 8, PC_STORE_INCLUDE_EXPIRED, &v, &vl, NULL),
             PC_ENOTFOUND);
    pc_store_close(s);
    pc_cache_destroy(c);
    pc_cache_destroy(c2);
    pc_cache_destroy(c3);
}

static void test_empty_collection(void **state)
{
    (void)state;
    char dir[300];
    mk_tmp(dir, sizeof dir, "empty");
    pc_cache *c = pc_fx_cache("e", 16);
    pc_coll *co = pc_fx_coll(c, "e");
    pc_store *s = open_store(dir, PC_STORE_CREATE);
    pc_store_save_result sr;
    check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
    assert_int_equal(sr.saved, 0);
    assert_int_equal(sr.blocks, 0);
    pc_store_coll_meta m;
    check_rc(pc_store_coll_meta_get(s, "e", &m), PC_OK);
    assert_int_equal(m.count, 0);
    assert_int_equal(m.blocks, 0);
    assert_true(m.content_checksum == XXH3_64bits(NULL, 0)); /* §4.1: over no blocks */
    /* a non-empty snapshot replaced by an empty one */
    check_rc(pc_set(co, "k", 1, "v", 1, 0, 0), PC_OK);
    check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
    assert_int_equal(sr.saved, 1);
    check_rc(pc_remove(co, "k", 1), PC_OK);
    check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
    assert_int_equal(sr.generation, 3);
    pc_store_load_result lr;
    check_rc(pc_store_load(s, co, NULL, &lr), PC_OK);
    assert_int_equal(lr.loaded, 0);
    assert_int_equal(lr.blocks, 0);
    pc_store_info in;
    check_rc(pc_store_info_get(s, &in), PC_OK);
    assert_int_equal(in.block_records, 0);
    assert_int_equal(in.collections, 1);
    pc_store_problem *pr;
    size_t np;
    check_rc(pc_store_verify(s, NULL, &pr, &np), PC_OK);
    assert_int_equal(np, 0);
    pc_store_close(s);
    pc_cache_destroy(c);
}

/* ---- the big SIP-like round trip ------------------------------------------------ */
static size_t big_entries(void)
{
    const char *e = getenv("PCACHE_STORE_ENTRIES");
    if (e != NULL && atol(e) > 0)
        return (size_t)atol(e);
#if defined(__SANITIZE_ADDRESS__)
    return 200000;
#else
    return 1000000;
#endif
}

static void test_roundtrip_large(void **state)
{
    (void)state;
    size_t n = big_entries();
    char dir[300];
    mk_tmp(dir, sizeof dir, "large");
    size_t mb = 128 + n / 1500;
    pc_cache *c = pc_fx_cache("sip=18", mb);
    pc_coll *co = pc_fx_coll(c, "sip");
    for (uint64_t i = 0; i < n; i++)
        check_rc(sip_put(co, 11, i), PC_OK);
    pc_store *s = open_store(dir, PC_STORE_CREATE);
    pc_store_save_result sr;
    check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
    assert_int_equal(sr.saved, n);
    print_message("[large] %zu entries: save %.3f s (%.0f/s), %" PRIu64 " blocks, stored %.3f of "
                  "value bytes\n",
                  n, sr.seconds, sr.rate, sr.blocks,
                  (double)sr.stored_bytes / (double)sr.value_bytes);
    pc_cache_destroy(c);
    pc_cache *c2 = pc_fx_cache("sip=18", mb);
    pc_coll *co2 = pc_fx_coll(c2, "sip");
    pc_store_load_result lr;
    check_rc(pc_store_load(s, co2, NULL, &lr), PC_OK);
    assert_int_equal(lr.loaded, n);
    print_message("[large] load %.3f s (%.0f/s)\n", lr.seconds, lr.rate);
    char *buf = malloc(PC_SIPGEN_VAL_MAX);
    for (uint64_t i = 0; i < n; i++) {
        pc_sipgen_entry e;
        pc_sipgen_entry_make(11, i, &e);
        size_t vl, need;
        pc_meta m;
        if (e.kind == PC_SIPGEN_COUNTER) {
            int64_t v;
            check_rc(pc_get_counter(co2, e.key, e.klen, &v), PC_OK);
            assert_true(v == e.counter);
            continue;
        }
        check_rc(pc_get_buf(co2, e.key, e.klen, buf, PC_SIPGEN_VAL_MAX, &vl, &need, &m), PC_OK);
        if (vl != e.vlen || memcmp(buf, e.val, vl) != 0)
            fail_msg("entry %" PRIu64 " differs after the round trip", i);
        assert_true((i % 3 == 0) == (m.ttl_ms == -1));
    }
    free(buf);
    /* point lookups in the snapshot */
    for (uint64_t i = 0; i < n; i += n / 97 + 1) {
        pc_sipgen_entry e;
        pc_sipgen_entry_make(11, i, &e);
        void *v;
        size_t vl;
        pc_store_record rec;
        check_rc(pc_store_get(s, "sip", e.key, e.klen, 0, &v, &vl, &rec), PC_OK);
        assert_int_equal(vl, e.vlen);
        assert_memory_equal(v, e.val, vl);
        assert_int_equal(rec.is_counter, e.kind == PC_SIPGEN_COUNTER);
        free(v);
    }
    pc_store_problem *pr;
    size_t np;
    check_rc(pc_store_verify(s, "sip", &pr, &np), PC_OK);
    assert_int_equal(np, 0);
    pc_store_close(s);
    pc_cache_destroy(c2);
}

/* A snapshot loaded into a collection declared small (2^4 buckets) grows
 * the table for its records before storing them (pc_coll_reserve), so the
 * keys land in buckets, not in the overflow chains whose walk each later
 * insert paid (1M records: 2.7 s of a pcached restart's 2.8 s). */
static void test_load_grows_small_table(void **state)
{
    (void)state;
    const uint64_t n = 50000;
    char dir[300];
    mk_tmp(dir, sizeof dir, "grow");
    pc_cache *c = pc_fx_cache("g=16", 128);
    pc_coll *co = pc_fx_coll(c, "g");
    for (uint64_t i = 0; i < n; i++)
        check_rc(sip_put(co, 5, i), PC_OK);
    pc_store *s = open_store(dir, PC_STORE_CREATE);
    pc_store_save_result sr;
    check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
    pc_cache_destroy(c);
    pc_cache *c2 = pc_fx_cache("g=4", 128);
    pc_coll *co2 = pc_fx_coll(c2, "g");
    pc_store_load_result lr;
    check_rc(pc_store_load(s, co2, NULL, &lr), PC_OK);
    assert_int_equal(lr.loaded, n);
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(co2, &st), PC_OK);
    print_message("[grow] %" PRIu64 " records into 2^4 buckets: %" PRIu64 " buckets after the "
                  "load, %" PRIu64 " keys in overflow, load %.3f s\n",
                  n, st.buckets, st.overflow, lr.seconds);
    assert_int_equal(st.entries, n);
    assert_true(st.buckets * 4 >= n);
    assert_true(st.overflow < n / 100);
    pc_sipgen_entry e;
    pc_sipgen_entry_make(5, n - 1, &e);
    if (e.kind == PC_SIPGEN_COUNTER) {
        int64_t v;
        check_rc(pc_get_counter(co2, e.key, e.klen, &v), PC_OK);
    } else {
        char *buf = malloc(PC_SIPGEN_VAL_MAX);
        size_t vl, need;
        check_rc(pc_get_buf(co2, e.key, e.klen, buf, PC_SIPGEN_VAL_MAX, &vl, &need, NULL), PC_OK);
        assert_memory_equal(buf, e.val, e.vlen);
        free(buf);
    }
    pc_store_close(s);
    pc_cache_destroy(c2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_mixed),
        cmocka_unit_test(test_empty_collection),
        cmocka_unit_test(test_roundtrip_large),
        cmocka_unit_test(test_load_grows_small_table),
    };
    return cmocka_run_group_tests(tests, setup_root, teardown_root);
}
