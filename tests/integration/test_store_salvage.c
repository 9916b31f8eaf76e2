/*
 * test_store_salvage.c - pc_store_salvage (storage/store/store_salvage.c,
 * docs/snapshot-format.md §13) on damage made with raw byte writes:
 *   - the blocks tree's leaf zeroed: every block of the last generation,
 *     whose values are on overflow pages, is found by its own header and
 *     copied, the older generation's blocks (on free pages, valid in every
 *     checksum) are left out, and a dropped collection's are not brought
 *     back (the sound 'meta' tree does not name it);
 *   - the 'meta' tree's leaf zeroed: the metas are lost, the blocks are
 *     not; each collection's newest generation is copied, reported without
 *     its meta, and the dropped collection (all on pages the sound free
 *     list names) is still not brought back;
 *   - the store is never written, and the salvaged store verifies clean
 *     and holds, record for record, the collection as it was saved.
 * (tests/integration/store_damage.py does the same on a store a real
 * pcached made, at every structural offset, and measures what is lost.)
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

#include "pcache.h"
#include "pcache_store.h"
#include "pcache_storecheck.h"
#include "store_testlib.h"

#define NA 3000 /* records of collection "a" in each generation */
#define NGONE 1000

/* A store: "a" saved twice (generation 1, then 2 with other values), "gone"
 * saved once and dropped; blocks of 64 KiB raw, so every block value is
 * on overflow pages and the leaves hold only keys. */
static void mk_store(char *dir, size_t cap, const char *tag)
{
    mk_tmp(dir, cap, tag);
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    sc.block_bytes = 64 * 1024;
    sc.log.fn = log_cb;
    pc_store *s = NULL;
    check_rc(pc_store_open_checked(dir, &sc, &s, NULL, 0), PC_OK);
    pc_store_save_result sr;
    for (uint64_t gen = 1; gen <= 2; gen++) {
        pc_cache *c = pc_fx_cache("a;gone", 64);
        pc_coll *a = pc_fx_coll(c, "a");
        for (uint64_t i = 0; i < NA; i++)
            check_rc(sip_put(a, 100 + gen, i), PC_OK);
        check_rc(pc_store_save(s, a, NULL, &sr), PC_OK);
        assert_int_equal(sr.generation, gen);
        assert_true(sr.blocks >= 4);
        if (gen == 1) {
            pc_coll *g = pc_fx_coll(c, "gone");
            for (uint64_t i = 0; i < NGONE; i++)
                check_rc(sip_put(g, 7, i), PC_OK);
            check_rc(pc_store_save(s, g, NULL, &sr), PC_OK);
        }
        pc_cache_destroy(c);
    }
    check_rc(pc_store_drop(s, "gone"), PC_OK);
    pc_store_close(s);
}

struct recs {
    uint64_t n, hash; /* an order-sensitive hash of every record */
};

static int rec_hash(void *ctx, const pc_store_record *r)
{
    struct recs *rs = ctx;
    uint64_t h = pc_hash(r->key, r->klen) * 31 + pc_hash(r->val, r->vlen);
    rs->hash = rs->hash * 1000003 ^ (h + (uint64_t)r->expires_ms + (uint64_t)r->is_counter);
    rs->n++;
    return 0;
}

static struct recs coll_recs(const char *dir, const char *name)
{
    struct recs rs = {0, 0};
    pc_store *s = open_store(dir, PC_STORE_RDONLY);
    check_rc(pc_store_iterate(s, name, PC_STORE_INCLUDE_EXPIRED, rec_hash, &rs), PC_OK);
    pc_store_close(s);
    return rs;
}

/* Zeroes the leaf page of the newest tree that holds key in database db
 * ("meta" or "blocks"): LMDB hands out a key found by a cursor where it
 * lies, in its page-aligned map of data.mdb, whose pages start with their
 * number. */
static void zero_leaf_of(const char *dir, int blocks_db, const void *key, size_t klen)
{
    raw_env r;
    raw_open(&r, dir);
    MDB_cursor *cur;
    assert_int_equal(mdb_cursor_open(r.txn, blocks_db ? r.blocks : r.meta, &cur), 0);
    MDB_val k = {klen, (void *)key}, v;
    assert_int_equal(mdb_cursor_get(cur, &k, &v, MDB_SET_KEY), 0);
    MDB_stat st;
    assert_int_equal(mdb_env_stat(r.env, &st), 0);
    /* the map is page-aligned and a page starts with its number (§12.1) */
    const uint8_t *pg = (const uint8_t *)((uintptr_t)k.mv_data & ~(uintptr_t)(st.ms_psize - 1));
    long page = (long)le64(pg);
    mdb_cursor_close(cur);
    raw_close(&r, 0);
    assert_true(page >= 2);
    char p[400];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    FILE *f = fopen(p, "r+b");
    assert_non_null(f);
    uint8_t *zero = calloc(1, st.ms_psize);
    assert_non_null(zero);
    assert_int_equal(fseek(f, page * (long)st.ms_psize, SEEK_SET), 0);
    assert_int_equal(fwrite(zero, 1, st.ms_psize, f), st.ms_psize);
    assert_int_equal(fclose(f), 0);
    free(zero);
}

static const pc_store_salvage_coll *coll_of(const pc_store_salvage_result *r, const char *name)
{
    for (size_t i = 0; i < r->ncolls; i++)
        if (strcmp(r->colls[i].name, name) == 0)
            return &r->colls[i];
    return NULL;
}

static void salvage(const char *dir, char *dst, size_t cap, pc_store_salvage_result *r)
{
    char err[600];
    snprintf(dst, cap, "%s.salvaged", dir);
    uint64_t before = dir_fingerprint(dir);
    check_rc(pc_store_salvage(dir, dst, r, err, sizeof err), PC_OK);
    assert_true(dir_fingerprint(dir) == before); /* never written */
    pc_store *s = open_store(dst, PC_STORE_RDONLY);
    pc_store_problem *pr;
    size_t np;
    check_rc(pc_store_verify(s, NULL, &pr, &np), PC_OK);
    for (size_t i = 0; i < np; i++)
        print_message("salvaged store: %s: %s\n", pr[i].collection, pr[i].message);
    assert_int_equal(np, 0);
    pc_store_close(s);
}

static void test_blocks_leaf_zeroed(void **state)
{
    (void)state;
    char dir[300], dst[340];
    mk_store(dir, sizeof dir, "leaf");
    struct recs want = coll_recs(dir, "a");
    assert_int_equal(want.n, NA);
    raw_env r;
    raw_open(&r, dir);
    uint8_t key[80];
    size_t klen;
    MDB_val v;
    assert_int_equal(raw_block(&r, "a", 0, key, &klen, &v), 0);
    assert_true(v.mv_size > 4096); /* on overflow pages */
    raw_close(&r, 0);
    zero_leaf_of(dir, 1, key, klen);
    pc_store_problem *pr;
    size_t np;
    check_rc(pc_store_check(dir, 0, &pr, &np, NULL, 0), PC_OK);
    assert_true(np > 0); /* the damage is seen */
    pc_store_problems_free(pr, np);
    pc_store_salvage_result res;
    salvage(dir, dst, sizeof dst, &res);
    const pc_store_salvage_coll *a = coll_of(&res, "a");
    assert_non_null(a);
    assert_true(a->meta_found);
    assert_int_equal(a->generation, 2);
    assert_int_equal(a->count, NA);
    assert_int_equal(a->count_meta, NA);
    assert_int_equal(a->blocks, a->blocks_meta);
    assert_int_equal(a->blocks_orphan, a->blocks); /* every one found by its header */
    assert_true(a->blocks_stale > 0);              /* generation 1's, left out */
    assert_null(coll_of(&res, "gone"));            /* dropped: not brought back */
    assert_true(res.pages_scanned > 0);
    pc_store_salvage_free(&res);
    struct recs got = coll_recs(dst, "a");
    assert_int_equal(got.n, want.n);
    assert_true(got.hash == want.hash);
    pc_store *s = open_store(dst, PC_STORE_RDONLY);
    pc_store_coll_meta m;
    check_rc(pc_store_coll_meta_get(s, "gone", &m), PC_ENOTFOUND);
    pc_store_close(s);
}

static void test_meta_leaf_zeroed(void **state)
{
    (void)state;
    char dir[300], dst[340];
    mk_store(dir, sizeof dir, "meta");
    struct recs want = coll_recs(dir, "a");
    zero_leaf_of(dir, 0, "c:a", 3);
    pc_store_salvage_result res;
    salvage(dir, dst, sizeof dst, &res);
    const pc_store_salvage_coll *a = coll_of(&res, "a");
    assert_non_null(a);
    assert_false(a->meta_found); /* the report says how much is missing is not known */
    assert_int_equal(a->generation, 2);
    assert_int_equal(a->count, NA);
    assert_true(a->blocks_stale > 0);
    /* without a sound 'meta' tree, the sound free list tells that the
     * dropped collection's blocks are older data */
    assert_null(coll_of(&res, "gone"));
    pc_store_salvage_free(&res);
    struct recs got = coll_recs(dst, "a");
    assert_int_equal(got.n, want.n);
    assert_true(got.hash == want.hash);
    pc_store *s = open_store(dst, PC_STORE_RDONLY);
    pc_store_coll_meta m;
    check_rc(pc_store_coll_meta_get(s, "a", &m), PC_OK);
    assert_int_equal(m.generation, 2); /* the blocks' generation */
    pc_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_leaf_zeroed),
        cmocka_unit_test(test_meta_leaf_zeroed),
    };
    return cmocka_run_group_tests(tests, setup_root, teardown_root);
}
