/*
 * test_store_golden.c - every released snapshot format version is still
 * read (docs/snapshot-format.md §11): the golden stores of
 * tests/integration/golden/, each the data.mdb a real pcached of that
 * version wrote for one fixed content (golden/mkgolden.py), are checked,
 * verified, iterated, loaded and salvaged by this build, record by record
 * against that content. A store of version 1 written to by this build
 * becomes version 2 (its header rewritten with the first version 2
 * records), and stays readable throughout. The version 2 golden's blocks
 * are read through raw LMDB and the byte table of §5.1: the collection
 * name and generation in each header.
 *
 * The goldens are copied to a temporary directory first: LMDB creates its
 * lock file next to data.mdb, and a golden is never written.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "pcache.h"
#include "pcache_store.h"
#include "pcache_storecheck.h"
#include "store_testlib.h"

#define GOLDEN_N 200                   /* gold:000 .. gold:199 */
#define GOLDEN_RECORDS (GOLDEN_N + 2)  /* + gold:counter, gold:bin\0\xff */
#define GOLDEN_EXPIRES 4102444800000LL /* 2100-01-01T00:00:00Z */

/* A copy of golden store name in a fresh directory. */
static void golden_copy(const char *name, char *dir, size_t cap)
{
    char src[600], dst[400];
    mk_tmp(dir, cap, name);
    assert_int_equal(mkdir(dir, 0750), 0);
    snprintf(src, sizeof src, "%s/%s/data.mdb", PCACHE_GOLDEN_DIR, name);
    snprintf(dst, sizeof dst, "%s/data.mdb", dir);
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

/* The golden content (golden/mkgolden.py): 0 when r is one of it, exactly. */
static int golden_expect(const pc_store_record *r)
{
    char want[128];
    if (r->klen == 12 && memcmp(r->key, "gold:counter", 12) == 0) {
        int64_t v = 0;
        for (int i = 7; i >= 0; i--)
            v = (int64_t)((uint64_t)v << 8 | ((const uint8_t *)r->val)[i]);
        return r->is_counter && r->vlen == 8 && v == -42 && r->expires_ms == 0 ? 0 : -1;
    }
    if (r->klen == 10 && memcmp(r->key, "gold:bin\0\xff", 10) == 0) {
        if (r->is_counter || r->vlen != 256 || r->expires_ms != 0)
            return -1;
        for (unsigned i = 0; i < 256; i++)
            if (((const uint8_t *)r->val)[i] != i)
                return -1;
        return 0;
    }
    unsigned i;
    if (r->klen != 8 || memcmp(r->key, "gold:", 5) != 0 ||
        sscanf((const char *)r->key + 5, "%3u", &i) != 1 || i >= GOLDEN_N || r->is_counter)
        return -1;
    size_t unit = (size_t)snprintf(want, sizeof want, "value %03u ", i), reps = i % 7 + 1;
    if (r->vlen != unit * reps)
        return -1;
    for (size_t k = 0; k < reps; k++)
        if (memcmp((const uint8_t *)r->val + k * unit, want, unit) != 0)
            return -1;
    /* PEXPIREAT's time, kept as the engine's remaining TTL: to the second */
    if (i % 20 != 0)
        return r->expires_ms == 0 ? 0 : -1;
    int64_t d = r->expires_ms - GOLDEN_EXPIRES;
    return d >= -1000 && d <= 1000 ? 0 : -1;
}

static int golden_rec(void *ctx, const pc_store_record *r)
{
    unsigned *n = ctx;
    if (golden_expect(r) != 0)
        fail_msg("a record that is not the golden content: key '%.*s', %zu bytes", (int)r->klen,
                 (const char *)r->key, r->vlen);
    (*n)++;
    return 0;
}

/* The whole content of collection "default" of the store at dir. */
static void golden_check_content(const char *dir)
{
    pc_store *s = open_store(dir, PC_STORE_RDONLY);
    unsigned n = 0;
    check_rc(pc_store_iterate(s, "default", PC_STORE_INCLUDE_EXPIRED, golden_rec, &n), PC_OK);
    assert_int_equal(n, GOLDEN_RECORDS);
    pc_store_problem *pr;
    size_t np;
    check_rc(pc_store_verify(s, NULL, &pr, &np), PC_OK);
    for (size_t i = 0; i < np; i++)
        print_message("verify: %s: %s\n", pr[i].collection, pr[i].message);
    assert_int_equal(np, 0);
    pc_store_close(s);
}

/* Checked, verified, read, loaded and salvaged by this build. */
static void golden_read(const char *name, uint32_t version)
{
    char dir[300], dst[340];
    golden_copy(name, dir, sizeof dir);
    pc_store_problem *pr;
    size_t np;
    char err[600];
    check_rc(pc_store_check(dir, PC_STORE_CHECK_DEEP, &pr, &np, err, sizeof err), PC_OK);
    assert_int_equal(np, 0);
    pc_store *s = open_store(dir, PC_STORE_RDONLY);
    pc_store_info in;
    check_rc(pc_store_info_get(s, &in), PC_OK);
    assert_int_equal(in.format_version, version);
    pc_store_coll_meta m;
    check_rc(pc_store_coll_meta_get(s, "default", &m), PC_OK);
    assert_int_equal(m.format_version, version);
    assert_int_equal(m.count, GOLDEN_RECORDS);
    void *v;
    size_t vl;
    check_rc(pc_store_get(s, "default", "gold:123", 8, 0, &v, &vl, NULL), PC_OK);
    assert_int_equal(vl, 10 * (123 % 7 + 1));
    assert_memory_equal(v, "value 123 ", 10);
    free(v);
    pc_store_close(s);
    golden_check_content(dir);
    /* loaded into a cache, counters as counters, expiries as TTLs */
    pc_cache *c = pc_fx_cache("default", 64);
    pc_coll *co = pc_fx_coll(c, "default");
    s = open_store(dir, PC_STORE_RDONLY);
    pc_store_load_result lr;
    check_rc(pc_store_load(s, co, NULL, &lr), PC_OK);
    assert_int_equal(lr.loaded, GOLDEN_RECORDS);
    int64_t n = 0;
    check_rc(pc_get_counter(co, "gold:counter", 12, &n), PC_OK);
    assert_int_equal(n, -42);
    pc_store_close(s);
    pc_cache_destroy(c);
    /* salvaged whole (no damage: nothing outside the trees is taken) */
    snprintf(dst, sizeof dst, "%s.salvaged", dir);
    pc_store_salvage_result sv;
    check_rc(pc_store_salvage(dir, dst, &sv, err, sizeof err), PC_OK);
    assert_int_equal(sv.ncolls, 1);
    assert_true(sv.colls[0].meta_found);
    assert_int_equal(sv.colls[0].count, GOLDEN_RECORDS);
    assert_int_equal(sv.colls[0].count_meta, GOLDEN_RECORDS);
    assert_int_equal(sv.colls[0].blocks_bad + sv.colls[0].blocks_stale, 0);
    pc_store_salvage_free(&sv);
    golden_check_content(dst);
}

static void test_golden_v1(void **state)
{
    (void)state;
    golden_read("store-v1", 1);
    /* written to by this build: version 2 records, the header follows; the
     * boot generation's own write leaves it at 1 */
    char dir[300];
    golden_copy("store-v1", dir, sizeof dir);
    pc_store *s = open_store(dir, 0);
    uint64_t gen;
    check_rc(pc_store_next_boot_gen(s, &gen), PC_OK);
    pc_store_info in;
    check_rc(pc_store_info_get(s, &in), PC_OK);
    assert_int_equal(in.format_version, 1);
    pc_cache *c = pc_fx_cache("other", 16);
    pc_coll *co = pc_fx_coll(c, "other");
    check_rc(pc_set(co, "k", 1, "v", 1, 0, 0), PC_OK);
    pc_store_save_result sr;
    check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
    check_rc(pc_store_info_get(s, &in), PC_OK);
    assert_int_equal(in.format_version, 2);
    pc_store_coll_meta m;
    check_rc(pc_store_coll_meta_get(s, "default", &m), PC_OK);
    assert_int_equal(m.format_version, 1); /* untouched: still read */
    check_rc(pc_store_coll_meta_get(s, "other", &m), PC_OK);
    assert_int_equal(m.format_version, 2);
    pc_store_close(s);
    pc_cache_destroy(c);
    golden_check_content(dir);
}

static void test_golden_v2(void **state)
{
    (void)state;
    golden_read("store-v2", 2);
    /* §5.1 through raw LMDB: each block names its collection and the
     * meta's generation */
    char dir[300];
    golden_copy("store-v2", dir, sizeof dir);
    raw_env r;
    raw_open(&r, dir);
    MDB_val mk = {9, (void *)"c:default"}, mv;
    assert_int_equal(mdb_get(r.txn, r.meta, &mk, &mv), 0);
    uint64_t meta_gen = le64((const uint8_t *)mv.mv_data + 8);
    uint8_t key[80];
    size_t klen;
    MDB_val bv;
    unsigned blocks = 0;
    for (; raw_block(&r, "default", blocks, key, &klen, &bv) == 0; blocks++) {
        const uint8_t *h = bv.mv_data;
        assert_int_equal(doc_block_hdr(h), DOC_BLOCK_HDR_V2);
        assert_true(le64(h + 56) == XXH3_64bits(h, 56));
        assert_true(le64(h + 136) == XXH3_64bits(h, 136));
        assert_true(le64(h + 64) == meta_gen);
        assert_memory_equal(h + 72, "default\0", 8);
        assert_int_equal(le32(h + 16), bv.mv_size - DOC_BLOCK_HDR_V2);
    }
    assert_true(blocks >= 1);
    raw_close(&r, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_v1),
        cmocka_unit_test(test_golden_v2),
    };
    return cmocka_run_group_tests(tests, setup_root, teardown_root);
}
