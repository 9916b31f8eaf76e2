/*
 * test_store_read.c - reading a snapshot store without loading it
 * (storage/store/include/pcache_store.h): point lookups and ordered
 * iteration, checked against a reader written from docs/snapshot-format.md
 * alone that re-reads a whole snapshot through raw LMDB (every checksum,
 * the record count, the content checksum of the meta record); then
 * generations, listing and dropping collections, boot generations, and the
 * load filter and meta callback the journal needs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "pcache.h"
#include "pcache_store.h"
#include "sipgen.h"
#include "store_testlib.h"

/* ---- point lookup, iteration, the doc-only reader ---------------------------- */
struct iter_ctx {
    uint64_t n, prev;
    size_t prev_klen;
    uint8_t prev_key[256];
};

static int iter_cb(void *ctx, const pc_store_record *r)
{
    struct iter_ctx *it = ctx;
    assert_true(r->order == order_of(r->key, r->klen));
    if (it->n > 0) { /* ascending (order, key length, key bytes) */
        assert_true(r->order > it->prev ||
                    (r->order == it->prev &&
                     (r->klen > it->prev_klen ||
                      (r->klen == it->prev_klen && memcmp(r->key, it->prev_key, r->klen) > 0))));
    }
    it->prev = r->order;
    it->prev_klen = r->klen < sizeof it->prev_key ? r->klen : sizeof it->prev_key;
    memcpy(it->prev_key, r->key, it->prev_klen);
    it->n++;
    return 0;
}

/* Reads collection name through raw LMDB and the byte tables of the doc
 * only; returns the record count and checks every checksum on the way. */
static uint64_t doc_reader_count(const char *dir, const char *name, uint64_t *value_bytes)
{
    raw_env r;
    raw_open(&r, dir);
    uint8_t mk[80];
    size_t nl = strlen(name);
    mk[0] = 'c';
    mk[1] = ':';
    memcpy(mk + 2, name, nl);
    MDB_val k = {nl + 2, mk}, v;
    assert_int_equal(mdb_get(r.txn, r.meta, &k, &v), 0);
    assert_int_equal(v.mv_size, DOC_META_SIZE);
    const uint8_t *mp = v.mv_data;
    assert_memory_equal(mp, "PCCM", 4);
    assert_true(le64(mp + 120) == XXH3_64bits(mp, 120));
    uint64_t meta_count = le64(mp + 16), meta_sum = le64(mp + 64);
    XXH3_state_t *cs = XXH3_createState();
    XXH3_64bits_reset(cs);
    uint64_t count = 0, vb = 0;
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    uint8_t key[80];
    size_t klen;
    MDB_val bv;
    for (unsigned b = 0; raw_block(&r, name, b, key, &klen, &bv) == 0; b++) {
        const uint8_t *h = bv.mv_data;
        assert_memory_equal(h, "PCBK", 4);
        assert_true(le64(h + 56) == XXH3_64bits(h, 56));
        /* version 2 (what this build writes): the generation and the name */
        assert_int_equal(h[4] | h[5] << 8, 2);
        size_t hl = DOC_BLOCK_HDR_V2;
        assert_true(le64(h + 136) == XXH3_64bits(h, 136));
        assert_true(le64(h + 64) == le64(mp + 8)); /* the meta's generation */
        assert_memory_equal(h + 72, name, nl);
        for (size_t i = 72 + nl; i < 136; i++)
            assert_int_equal(h[i], 0);
        uint32_t cnt = le32(h + 8), raw_len = le32(h + 12), pl = le32(h + 16);
        assert_int_equal(pl, bv.mv_size - hl);
        assert_true(le64(h + 40) == XXH3_64bits(h + hl, pl));
        uint8_t *raw = malloc(raw_len + 1);
        if (h[6] == 1)
            assert_int_equal(ZSTD_decompressDCtx(dc, raw, raw_len, h + hl, pl), raw_len);
        else
            memcpy(raw, h + hl, raw_len);
        assert_true(le64(h + 48) == XXH3_64bits(raw, raw_len));
        uint8_t w[8];
        put64(w, le64(h + 48));
        XXH3_64bits_update(cs, w, 8);
        /* the key names the last order key, big-endian */
        uint64_t last = 0;
        for (int i = 0; i < 8; i++)
            last = (last << 8) | key[nl + 1 + i];
        assert_true(last == le64(h + 32));
        size_t off = 0;
        for (uint32_t i = 0; i < cnt; i++) {
            const uint8_t *p = raw + off;
            uint32_t kl = 0, vl = 0;
            size_t a = varint_get(p + 17, raw_len - off - 17, &kl);
            size_t c = varint_get(p + 17 + a, raw_len - off - 17 - a, &vl);
            size_t used = 17 + a + c + kl + vl;
            assert_true(le32(p) == (uint32_t)XXH3_64bits(p + 4, used - 4));
            uint64_t o = order_of(p + 17 + a + c, kl);
            assert_true(o >= le64(h + 24) && o <= last);
            vb += vl;
            off += used;
        }
        assert_int_equal(off, raw_len);
        count += cnt;
        free(raw);
    }
    assert_true(count == meta_count);
    assert_true(XXH3_64bits_digest(cs) == meta_sum);
    XXH3_freeState(cs);
    ZSTD_freeDCtx(dc);
    raw_close(&r, 0);
    *value_bytes = vb;
    return count;
}

static void test_get_iterate_docreader(void **state)
{
    (void)state;
    char dir[300];
    mk_tmp(dir, sizeof dir, "get");
    pc_cache *c = pc_fx_cache("g", 64);
    pc_coll *co = pc_fx_coll(c, "g");
    put_mixed(co);
    for (uint64_t i = 0; i < 20000; i++)
        check_rc(sip_put(co, 3, i), PC_OK);
    pc_store *s = open_store(dir, PC_STORE_CREATE);
    pc_store_save_result sr;
    check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
    for (size_t i = 0; i < NMIXED; i++) {
        const struct kv *e = &mixed[i];
        void *v;
        size_t vl;
        pc_store_record rec;
        check_rc(pc_store_get(s, "g", e->key, e->klen, 0, &v, &vl, &rec), PC_OK);
        if (e->counter) {
            assert_int_equal(vl, 8);
            assert_true((int64_t)le64(v) == e->num);
            assert_int_equal(rec.is_counter, 1);
        } else {
            assert_int_equal(vl, e->vlen);
            assert_memory_equal(v, e->val, vl);
        }
        assert_true((e->ttl == 0) == (rec.expires_ms == 0));
        free(v);
    }
    void *v;
    size_t vl;
    check_rc(pc_store_get(s, "g", "absent", 6, 0, &v, &vl, NULL), PC_ENOTFOUND);
    check_rc(pc_store_get(s, "nosuch", "alpha", 5, 0, &v, &vl, NULL), PC_ENOTFOUND);
    struct iter_ctx it = {0};
    check_rc(pc_store_iterate(s, "g", 0, iter_cb, &it), PC_OK);
    assert_int_equal(it.n, sr.saved);
    pc_store_close(s);
    uint64_t vb = 0;
    assert_int_equal(doc_reader_count(dir, "g", &vb), sr.saved);
    assert_int_equal(vb, sr.value_bytes);
    pc_cache_destroy(c);
}

/* ---- generations, list, drop, boot generations, filter ----------------------- */
static int meta_seen;
static uint64_t meta_boot;

static int on_meta(void *ctx, const pc_store_coll_meta *m)
{
    (void)ctx;
    meta_seen++;
    meta_boot = m->boot_gen;
    assert_int_equal(m->journal_epoch, 5);
    return 0;
}

static int filter_cb(void *ctx, const void *key, size_t klen, uint32_t stamp, uint64_t boot_gen)
{
    (void)stamp;
    (*(int *)ctx)++;
    assert_true(boot_gen == meta_boot);
    if (klen >= 4 && memcmp(key, "skip", 4) == 0)
        return PC_STORE_FILTER_SKIP;
    if (klen >= 4 && memcmp(key, "any-", 4) == 0)
        return PC_STORE_FILTER_LOAD_ANY;
    return PC_STORE_FILTER_LOAD;
}

static void test_generations_filter_bootgen(void **state)
{
    (void)state;
    char dir[300];
    mk_tmp(dir, sizeof dir, "gen");
    pc_cache *c = pc_fx_cache("a;b", 16);
    pc_coll *a = pc_fx_coll(c, "a"), *b = pc_fx_coll(c, "b");
    pc_store *s = open_store(dir, PC_STORE_CREATE);
    uint64_t g;
    check_rc(pc_store_boot_gen(s, &g), PC_OK);
    assert_int_equal(g, 0);
    check_rc(pc_store_next_boot_gen(s, &g), PC_OK);
    assert_int_equal(g, 1);
    check_rc(pc_store_next_boot_gen(s, &g), PC_OK);
    assert_int_equal(g, 2);
    pc_store_close(s);
    s = open_store(dir, 0);
    check_rc(pc_store_next_boot_gen(s, &g), PC_OK);
    assert_int_equal(g, 3); /* durable across a reopen */
    check_rc(pc_set(a, "keep", 4, "1", 1, 0, 0), PC_OK);
    check_rc(pc_set(a, "skip-me", 7, "2", 1, 0, 0), PC_OK);
    check_rc(pc_set(a, "any-dead", 8, "3", 1, 300, 0), PC_OK);
    check_rc(pc_set(a, "dead", 4, "4", 1, 300, 0), PC_OK);
    check_rc(pc_set(b, "x", 1, "y", 1, 0, 0), PC_OK);
    pc_store_save_opts so = {.journal_epoch = 5};
    pc_store_save_result sr;
    for (unsigned i = 1; i <= 3; i++) {
        check_rc(pc_store_save(s, a, &so, &sr), PC_OK);
        assert_int_equal(sr.generation, i);
    }
    check_rc(pc_store_save(s, b, &so, &sr), PC_OK);
    assert_int_equal(sr.generation, 1);
    pc_store_coll_meta *list;
    size_t n;
    check_rc(pc_store_list(s, &list, &n), PC_OK);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].name, "a");
    assert_int_equal(list[0].generation, 3);
    assert_int_equal(list[0].boot_gen, 3);
    assert_string_equal(list[1].name, "b");
    pc_store_list_free(list);
    usleep(400 * 1000);
    pc_cache *c2 = pc_fx_cache("a;b", 16);
    pc_coll *a2 = pc_fx_coll(c2, "a");
    int calls = 0;
    pc_store_load_opts lo = {.filter = filter_cb, .filter_ctx = &calls, .on_meta = on_meta};
    pc_store_load_result lr;
    check_rc(pc_store_load(s, a2, &lo, &lr), PC_OK);
    assert_int_equal(meta_seen, 1);
    assert_int_equal(meta_boot, 3);
    assert_int_equal(calls, 4); /* every record, the expired ones too */
    assert_int_equal(lr.loaded, 2);
    assert_int_equal(lr.filtered, 1);
    assert_int_equal(lr.skipped_expired, 1);
    check_rc(pc_probe(a2, "keep", 4, NULL), PC_OK);
    check_rc(pc_probe(a2, "skip-me", 7, NULL), PC_ENOTFOUND);
    pc_meta m;
    check_rc(pc_probe(a2, "any-dead", 8, &m), PC_OK); /* LOAD_ANY: kept for the journal */
    assert_true(m.ttl_ms > 0 && m.ttl_ms <= PC_STORE_LOAD_ANY_TTL_MS);
    /* its block is not pruned while it holds a LOAD_ANY record */
    pc_store_coll_meta cm;
    check_rc(pc_store_coll_meta_get(s, "a", &cm), PC_OK);
    assert_int_equal(cm.count, 4);
    check_rc(pc_store_drop(s, "a"), PC_OK);
    check_rc(pc_store_drop(s, "a"), PC_ENOTFOUND);
    check_rc(pc_store_coll_meta_get(s, "a", &cm), PC_ENOTFOUND);
    pc_store_problem *pr;
    check_rc(pc_store_verify(s, NULL, &pr, &n), PC_OK);
    assert_int_equal(n, 0);
    pc_store_close(s);
    pc_cache_destroy(c);
    pc_cache_destroy(c2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_iterate_docreader),
        cmocka_unit_test(test_generations_filter_bootgen),
    };
    return cmocka_run_group_tests(tests, setup_root, teardown_root);
}
