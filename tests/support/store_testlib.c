/*
 * store_testlib.c - the store tests' shared helpers (store_testlib.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <xxhash.h>

#include "sipgen.h"
#include "store_testlib.h"
#include "pcache_storecheck.h"

uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
size_t doc_block_hdr(const uint8_t *h)
{
    return (h[4] | h[5] << 8) >= 2 ? DOC_BLOCK_HDR_V2 : DOC_BLOCK_HDR_V1;
}
void doc_block_seal(uint8_t *h)
{
    put64(h + 56, XXH3_64bits(h, 56));
    if (doc_block_hdr(h) == DOC_BLOCK_HDR_V2)
        put64(h + 136, XXH3_64bits(h, 136));
}
uint64_t order_of(const void *k, size_t n)
{
    uint64_t h = XXH3_64bits(k, n), r = 0; /* §2.3: the hash with its bits reversed */
    for (int i = 0; i < 64; i++)
        r |= ((h >> i) & 1u) << (63 - i);
    return r;
}
size_t varint_get(const uint8_t *p, size_t n, uint32_t *v)
{
    uint64_t acc = 0;
    for (size_t i = 0; i < n && i < 5; i++) {
        acc |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = (uint32_t)acc;
            return i + 1;
        }
    }
    return 0;
}

/* ---- scaffolding ----------------------------------------------------------- */
char logbuf[1 << 16];
size_t loglen;

void log_cb(void *ctx, int level, const char *msg)
{
    (void)ctx;
    size_t n = strlen(msg);
    if (loglen + n + 2 < sizeof logbuf) {
        memcpy(logbuf + loglen, msg, n);
        loglen += n;
        logbuf[loglen++] = '\n';
        logbuf[loglen] = 0;
    }
    if (level <= PC_LOG_ERR && getenv("PCACHE_STORE_VERBOSE") != NULL)
        print_message("[store %d] %s\n", level, msg);
}

void log_reset(void)
{
    loglen = 0;
    logbuf[0] = 0;
}

static char tmproot[256];

void mk_tmp(char *out, size_t cap, const char *tag)
{
    static unsigned seq;
    snprintf(out, cap, "%s/%s-%u", tmproot, tag, seq++);
}

int setup_root(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    snprintf(tmproot, sizeof tmproot, "%s/pcache-store-XXXXXX", base);
    if (mkdtemp(tmproot) == NULL)
        return -1;
    chmod(tmproot, 0755);
    return 0;
}

int teardown_root(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmproot);
    return system(cmd) == 0 ? 0 : -1;
}

pc_store *open_store(const char *path, unsigned flags)
{
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = flags;
    sc.log.fn = log_cb;
    sc.log.level = PC_LOG_DEBUG;
    pc_store *s = NULL;
    char err[512];
    int rc = pc_store_open_checked(path, &sc, &s, err, sizeof err);
    if (rc != 0)
        fail_msg("open %s: %s: %s", path, pc_store_strerror(rc), err);
    return s;
}

int try_open(const char *path, unsigned flags, char *err, size_t errlen)
{
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = flags;
    sc.log.fn = log_cb;
    pc_store *s = NULL;
    int rc = pc_store_open_checked(path, &sc, &s, err, errlen);
    pc_store_close(s);
    return rc;
}

uint64_t file_fingerprint(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return 1;
    XXH3_state_t *x = XXH3_createState();
    XXH3_64bits_reset(x);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        XXH3_64bits_update(x, buf, n);
    fclose(f);
    uint64_t h = XXH3_64bits_digest(x) ^ (uint64_t)st.st_size * 0x9e3779b97f4a7c15ull ^
                 (uint64_t)st.st_mtim.tv_sec * 31 ^ (uint64_t)st.st_mtim.tv_nsec;
    XXH3_freeState(x);
    return h;
}

uint64_t dir_fingerprint(const char *dir)
{
    static const char *const names[] = {"data.mdb", "lock.mdb", "x", "junk"};
    uint64_t h = 0;
    char p[512];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (strcmp(names[i], "lock.mdb") == 0)
            continue; /* LMDB's reader table: not data */
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        h = h * 1000003 ^ file_fingerprint(p);
    }
    return h;
}

/* ---- raw LMDB access ------------------------------------------------------- */
void raw_open(raw_env *r, const char *path)
{
    memset(r, 0, sizeof *r);
    assert_int_equal(mdb_env_create(&r->env), 0);
    mdb_env_set_maxdbs(r->env, 4);
    mdb_env_set_mapsize(r->env, 1ull << 30);
    assert_int_equal(mdb_env_open(r->env, path, 0, 0640), 0);
    assert_int_equal(mdb_txn_begin(r->env, NULL, 0, &r->txn), 0);
    assert_int_equal(mdb_dbi_open(r->txn, "meta", 0, &r->meta), 0);
    assert_int_equal(mdb_dbi_open(r->txn, "blocks", 0, &r->blocks), 0);
}

void raw_close(raw_env *r, int commit)
{
    if (commit)
        assert_int_equal(mdb_txn_commit(r->txn), 0);
    else
        mdb_txn_abort(r->txn);
    mdb_env_close(r->env);
}

int raw_block(raw_env *r, const char *name, unsigned nth, uint8_t *key, size_t *klen, MDB_val *val)
{
    MDB_cursor *c;
    assert_int_equal(mdb_cursor_open(r->txn, r->blocks, &c), 0);
    size_t nl = strlen(name);
    uint8_t pk[80];
    memcpy(pk, name, nl);
    pk[nl] = 0;
    MDB_val k = {nl + 1, pk}, v;
    int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    for (unsigned i = 0; rc == 0 && i < nth; i++)
        rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
    if (rc == 0 && (k.mv_size != nl + 9 || memcmp(k.mv_data, pk, nl + 1) != 0))
        rc = MDB_NOTFOUND;
    if (rc == 0) {
        memcpy(key, k.mv_data, k.mv_size);
        *klen = k.mv_size;
        *val = v;
    }
    mdb_cursor_close(c);
    return rc;
}

/* ---- a collection with every kind of entry ----------------------------------- */
const struct kv mixed[] = {
    {"alpha", 5, "one", 3, 0, 0, 0},
    {"bin\0key", 7, "v\0a\0l\0", 6, 0, 0, 0},
    {"", 0, "the empty key", 13, 0, 0, 0},
    {"empty-value", 11, "", 0, 0, 0, 0},
    {"counter-max", 11, NULL, 0, 1, INT64_MAX, 0},
    {"counter-min", 11, NULL, 0, 1, INT64_MIN, 0},
    {"counter-neg", 11, NULL, 0, 1, -42, 3600000},
    {"ttl-long", 8, "lives an hour", 13, 0, 0, 3600000},
    {"ttl-soon", 8, "lapses in 2.5 s", 15, 0, 0, 2500},
    {"\xff\xfe\x00\x01", 4, "\x00\x00\x00", 3, 0, 0, 0},
    {"sip:alice@example.com", 21, "<sip:alice@192.0.2.1:5060>;expires=3600", 39, 0, 0, 600000},
};
const size_t nmixed = sizeof mixed / sizeof *mixed;

void put_mixed(pc_coll *co)
{
    for (size_t i = 0; i < NMIXED; i++) {
        const struct kv *e = &mixed[i];
        if (e->counter)
            check_rc(pc_set_counter(co, e->key, e->klen, e->num, e->ttl), PC_OK);
        else
            check_rc(pc_set(co, e->key, e->klen, e->val, e->vlen, e->ttl, 0), PC_OK);
    }
    /* a big binary value: every byte value, NULs included */
    static unsigned char big[200000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 131 + (i >> 8));
    check_rc(pc_set(co, "big", 3, big, sizeof big, 0, 0), PC_OK);
}

void check_mixed(pc_coll *co, int64_t elapsed_ms)
{
    for (size_t i = 0; i < NMIXED; i++) {
        const struct kv *e = &mixed[i];
        pc_meta m;
        if (e->counter) {
            int64_t v;
            check_rc(pc_get_counter(co, e->key, e->klen, &v), PC_OK);
            assert_true(v == e->num);
            check_rc(pc_probe(co, e->key, e->klen, &m), PC_OK);
            assert_int_equal(m.is_counter, 1);
        } else {
            void *v;
            size_t vl;
            check_rc(pc_get(co, e->key, e->klen, &v, &vl, &m), PC_OK);
            assert_int_equal(vl, e->vlen);
            assert_memory_equal(v, e->val, vl);
            assert_int_equal(m.is_counter, 0);
            free(v);
        }
        if (e->ttl == 0) {
            assert_true(m.ttl_ms == -1);
        } else { /* the absolute expiry survived: remaining ~ ttl - elapsed */
            int64_t want = e->ttl - elapsed_ms;
            if (m.ttl_ms > want + 50 || m.ttl_ms < want - 1500)
                fail_msg("key %zu: ttl %" PRId64 " ms, want about %" PRId64, i, m.ttl_ms, want);
        }
    }
    void *v;
    size_t vl;
    check_rc(pc_get(co, "big", 3, &v, &vl, NULL), PC_OK);
    assert_int_equal(vl, 200000);
    for (size_t i = 0; i < vl; i++)
        if (((unsigned char *)v)[i] != (unsigned char)(i * 131 + (i >> 8)))
            fail_msg("big value differs at %zu", i);
    free(v);
}

int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sip_put(pc_coll *co, uint64_t seed, uint64_t i)
{
    pc_sipgen_entry e;
    pc_sipgen_entry_make(seed, i, &e);
    int64_t ttl = i % 3 == 0 ? 0 : 3600000 + (int64_t)(i % 1000);
    if (e.kind == PC_SIPGEN_COUNTER)
        return pc_set_counter(co, e.key, e.klen, e.counter, ttl);
    return pc_set(co, e.key, e.klen, e.val, e.vlen, ttl, 0);
}

/* ---- corruption ----------------------------------------------------------------------- */
void mk_corruptible(char *dir, size_t cap, const char *tag, pc_store_save_result *sr)
{
    mk_tmp(dir, cap, tag);
    pc_cache *c = pc_fx_cache("c", 32);
    pc_coll *co = pc_fx_coll(c, "c");
    for (uint64_t i = 0; i < 3000; i++)
        check_rc(sip_put(co, 9, i), PC_OK);
    pc_store *s = open_store(dir, PC_STORE_CREATE);
    check_rc(pc_store_save(s, co, NULL, sr), PC_OK);
    assert_true(sr->blocks >= 5);
    pc_store_close(s);
    pc_cache_destroy(c);
}
