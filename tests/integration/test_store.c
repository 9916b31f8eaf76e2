/*
 * test_store.c - the snapshot store (storage/store/include/pcache_store.h).
 *
 * Round trips through a real store in a temporary directory: strings,
 * binary keys and values with NUL bytes, the empty key, counters at the
 * int64 limits, TTLs (none, long, about to lapse), an empty collection and
 * a large SIP-like collection (1M entries in an optimised build, 200k under
 * the sanitizers; PCACHE_STORE_ENTRIES overrides), each checked entry by
 * entry after loading into a fresh cache. Then: expired records skipped and
 * pruned; generations; point lookups and ordered iteration; the load filter
 * and meta callback the journal needs; boot generations; a reader process
 * that verifies the store while the parent saves in a loop (it must always
 * see one whole snapshot); map growth from a tiny map; a handle used after
 * fork; saves while a forked process grows the table and churns other keys
 * (every key unchanged throughout must be in each snapshot, once, with its
 * value, type and TTL: PCACHE_RACE_SECONDS lengthens it, default 3).
 *
 * Corruption is made with raw LMDB writes laid out from
 * docs/snapshot-format.md alone (this file does not include the store's
 * internals): a flipped byte in a block payload, a record whose own checksum
 * fails inside a block whose checksums were recomputed, a meta count that
 * disagrees, a meta that fails its checksum, a truncated data.mdb. Each must
 * be reported (collection and, for a record, the key in the log) and not
 * loaded. Bad inputs - a path that is a file, an unwritable store (as root:
 * a child that drops to nobody), a newer format version, things that are
 * not stores, bad URLs - give a clear error and leave every byte as it was.
 * The doc-only reader below also re-reads a whole snapshot and compares it
 * with the API.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lmdb.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "pcache.h"
#include "pcache_store.h"
#include "sipgen.h"

#define check_rc(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr), want_ = (want);                                                          \
        if (rc_ != want_)                                                                          \
            fail_msg("%s = %d (%s), want %d (%s)", #expr, rc_, pc_strerror(rc_), want_,            \
                     pc_strerror(want_));                                                          \
    } while (0)

/* ---- the format, from docs/snapshot-format.md ------------------------------ */
#define DOC_HDR_KEY "\0store"
#define DOC_HDR_KEYLEN 6
#define DOC_BLOCK_HDR 64
#define DOC_META_SIZE 128

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t order_of(const void *k, size_t n)
{
    uint64_t h = XXH3_64bits(k, n), r = 0; /* §2.3: the hash with its bits reversed */
    for (int i = 0; i < 64; i++)
        r |= ((h >> i) & 1u) << (63 - i);
    return r;
}
static size_t varint_get(const uint8_t *p, size_t n, uint32_t *v)
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
static char logbuf[1 << 16];
static size_t loglen;

static void log_cb(void *ctx, int level, const char *msg)
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

static void log_reset(void)
{
    loglen = 0;
    logbuf[0] = 0;
}

static char tmproot[256];

static void mk_tmp(char *out, size_t cap, const char *tag)
{
    static unsigned seq;
    snprintf(out, cap, "%s/%s-%u", tmproot, tag, seq++);
}

static int setup_root(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    snprintf(tmproot, sizeof tmproot, "%s/pcache-store-XXXXXX", base);
    if (mkdtemp(tmproot) == NULL)
        return -1;
    chmod(tmproot, 0755);
    return 0;
}

static int teardown_root(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmproot);
    return system(cmd) == 0 ? 0 : -1;
}

static pc_cache *mk_cache(const char *colls, size_t mem_mb)
{
    pc_config cfg;
    pc_cache *c = NULL;
    pc_config_init(&cfg);
    cfg.collections = colls;
    cfg.mem_mb = mem_mb;
    check_rc(pc_cache_create(&cfg, &c), PC_OK);
    return c;
}

static pc_coll *coll_of(pc_cache *c, const char *name)
{
    pc_coll *co = NULL;
    check_rc(pc_coll_find(c, name, strlen(name), &co), PC_OK);
    return co;
}

static pc_store *open_store(const char *path, unsigned flags)
{
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = flags;
    sc.log = log_cb;
    sc.log_level = PC_LOG_DEBUG;
    pc_store *s = NULL;
    char err[512];
    int rc = pc_store_open(path, &sc, &s, err, sizeof err);
    if (rc != 0)
        fail_msg("open %s: %s: %s", path, pc_strerror(rc), err);
    return s;
}

static int try_open(const char *path, unsigned flags, char *err, size_t errlen)
{
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = flags;
    sc.log = log_cb;
    pc_store *s = NULL;
    int rc = pc_store_open(path, &sc, &s, err, errlen);
    pc_store_close(s);
    return rc;
}

/* XXH3 of a file's bytes plus its size and mtime: "untouched" means equal. */
static uint64_t file_fingerprint(const char *path)
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

/* Every file of a directory, fingerprinted into one value. */
static uint64_t dir_fingerprint(const char *dir)
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

/* ---- raw LMDB access (the store's handle must be closed meanwhile) ------ */
typedef struct raw_env {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta, blocks;
} raw_env;

static void raw_open(raw_env *r, const char *path)
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

static void raw_close(raw_env *r, int commit)
{
    if (commit)
        assert_int_equal(mdb_txn_commit(r->txn), 0);
    else
        mdb_txn_abort(r->txn);
    mdb_env_close(r->env);
}

/* The nth block of collection name: key copied out, value borrowed. */
static int raw_block(raw_env *r, const char *name, unsigned nth, uint8_t *key, size_t *klen,
                     MDB_val *val)
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
struct kv {
    const char *key;
    size_t klen;
    const char *val;
    size_t vlen;
    int counter;
    int64_t num;
    int64_t ttl;
};

static const struct kv mixed[] = {
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
#define NMIXED (sizeof mixed / sizeof *mixed)

static void put_mixed(pc_coll *co)
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

static void check_mixed(pc_coll *co, int64_t elapsed_ms)
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

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_roundtrip_mixed(void **state)
{
    (void)state;
    char dir[300];
    mk_tmp(dir, sizeof dir, "mixed");
    pc_cache *c = mk_cache("m;other", 64);
    pc_coll *co = coll_of(c, "m");
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
    pc_cache *c2 = mk_cache("m;other", 64);
    pc_coll *co2 = coll_of(c2, "m");
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
    pc_coll *other = coll_of(c2, "other");
    check_rc(pc_store_load(s, other, NULL, &lr), PC_ENOTFOUND);
    pc_store_problem *pr;
    size_t np;
    check_rc(pc_store_verify(s, NULL, &pr, &np), PC_OK);
    assert_int_equal(np, 0);
    pc_store_close(s);

    /* the short TTL lapses: the next load skips it and prunes it */
    usleep(2600 * 1000);
    pc_cache *c3 = mk_cache("m", 64);
    pc_coll *co3 = coll_of(c3, "m");
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
    pc_cache *c = mk_cache("e", 16);
    pc_coll *co = coll_of(c, "e");
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

static int sip_put(pc_coll *co, uint64_t seed, uint64_t i)
{
    pc_sipgen_entry e;
    pc_sipgen_entry_make(seed, i, &e);
    int64_t ttl = i % 3 == 0 ? 0 : 3600000 + (int64_t)(i % 1000);
    if (e.kind == PC_SIPGEN_COUNTER)
        return pc_set_counter(co, e.key, e.klen, e.counter, ttl);
    return pc_set(co, e.key, e.klen, e.val, e.vlen, ttl, 0);
}

static void test_roundtrip_large(void **state)
{
    (void)state;
    size_t n = big_entries();
    char dir[300];
    mk_tmp(dir, sizeof dir, "large");
    size_t mb = 128 + n / 1500;
    pc_cache *c = mk_cache("sip=18", mb);
    pc_coll *co = coll_of(c, "sip");
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
    pc_cache *c2 = mk_cache("sip=18", mb);
    pc_coll *co2 = coll_of(c2, "sip");
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
        uint32_t cnt = le32(h + 8), raw_len = le32(h + 12), pl = le32(h + 16);
        assert_int_equal(pl, bv.mv_size - DOC_BLOCK_HDR);
        assert_true(le64(h + 40) == XXH3_64bits(h + DOC_BLOCK_HDR, pl));
        uint8_t *raw = malloc(raw_len + 1);
        if (h[6] == 1)
            assert_int_equal(ZSTD_decompressDCtx(dc, raw, raw_len, h + DOC_BLOCK_HDR, pl), raw_len);
        else
            memcpy(raw, h + DOC_BLOCK_HDR, raw_len);
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
    pc_cache *c = mk_cache("g", 64);
    pc_coll *co = coll_of(c, "g");
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
    pc_cache *c = mk_cache("a;b", 16);
    pc_coll *a = coll_of(c, "a"), *b = coll_of(c, "b");
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
    pc_cache *c2 = mk_cache("a;b", 16);
    pc_coll *a2 = coll_of(c2, "a");
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

/* ---- map growth, fork --------------------------------------------------------------- */
static void test_map_grows(void **state)
{
    (void)state;
    char dir[300];
    mk_tmp(dir, sizeof dir, "grow");
    pc_cache *c = mk_cache("g=14", 128);
    pc_coll *co = coll_of(c, "g");
    for (uint64_t i = 0; i < 60000; i++)
        check_rc(sip_put(co, 5, i), PC_OK);
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    sc.map_size = 1u << 20; /* 1 MiB: far too small for ~5 MB of blocks */
    sc.log = log_cb;
    pc_store *s = NULL;
    check_rc(pc_store_open(dir, &sc, &s, NULL, 0), PC_OK);
    pc_store_save_result sr;
    log_reset();
    for (int i = 0; i < 3; i++)
        check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
    assert_non_null(strstr(logbuf, "map grown"));
    pc_store_info in;
    check_rc(pc_store_info_get(s, &in), PC_OK);
    assert_true(in.map_bytes > (1u << 20));
    pc_store_close(s);
    /* a reader opened with the small default sees the grown map */
    s = open_store(dir, PC_STORE_RDONLY);
    pc_store_problem *pr;
    size_t np;
    check_rc(pc_store_verify(s, NULL, &pr, &np), PC_OK);
    assert_int_equal(np, 0);
    pc_store_close(s);
    pc_cache_destroy(c);
}

static void test_handle_after_fork(void **state)
{
    (void)state;
    char dir[300];
    mk_tmp(dir, sizeof dir, "fork");
    pc_store *s = open_store(dir, PC_STORE_CREATE);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        uint64_t g;
        int rc = pc_store_next_boot_gen(s, &g);
        pc_store_close(s); /* must not release the parent's locks */
        _exit(rc == PC_EINVAL ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    uint64_t g;
    check_rc(pc_store_next_boot_gen(s, &g), PC_OK);
    pc_store_close(s);
}

/* ---- a reader process during saves ------------------------------------------- */
/* Generation g of collection "r": 500 + (g * 37) % 400 keys "r<i>", each
 * value "gen=<g>;" plus filler. A whole snapshot has every value with the
 * same g and exactly that many keys. */
static void put_gen(pc_coll *co, uint64_t g, size_t *count)
{
    check_rc(pc_del_glob(co, "*", 1, &(uint64_t){0}), PC_OK);
    size_t n = 500 + (size_t)(g * 37) % 400;
    char k[32], v[200];
    for (size_t i = 0; i < n; i++) {
        int kl = snprintf(k, sizeof k, "r%zu", i);
        int vl = snprintf(v, sizeof v, "gen=%" PRIu64 ";i=%zu;%.*s", g, i, (int)(i % 120),
                          "filler filler filler filler filler filler filler filler filler filler "
                          "filler filler filler filler filler filler filler filler");
        check_rc(pc_set(co, k, (size_t)kl, v, (size_t)vl, 0, 0), PC_OK);
    }
    *count = n;
}

struct gen_check {
    long long g;
    uint64_t n;
    int bad;
};

static int gen_cb(void *ctx, const pc_store_record *r)
{
    struct gen_check *gc = ctx;
    long long g = -1;
    if (r->vlen > 4 && memcmp(r->val, "gen=", 4) == 0)
        g = atoll((const char *)r->val + 4);
    if (gc->n == 0)
        gc->g = g;
    else if (g != gc->g)
        gc->bad = 1;
    gc->n++;
    return 0;
}

static void test_reader_during_saves(void **state)
{
    (void)state;
    char dir[300];
    mk_tmp(dir, sizeof dir, "reader");
    pc_cache *c = mk_cache("r", 32);
    pc_coll *co = coll_of(c, "r");
    size_t cnt;
    put_gen(co, 1, &cnt);
    pc_store *s = open_store(dir, PC_STORE_CREATE);
    pc_store_save_result sr;
    check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* the reader: its own handle, read-only */
        close(pfd[0]);
        signal(SIGABRT, SIG_DFL);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pc_store_config sc;
        pc_store_config_init(&sc);
        sc.flags = PC_STORE_RDONLY;
        pc_store *rs = NULL;
        if (pc_store_open(dir, &sc, &rs, NULL, 0) != 0)
            _exit(2);
        unsigned rounds = 0, bad = 0;
        uint64_t last_gen = 0, gens = 0;
        int64_t end = mono_ms() + 2500;
        while (mono_ms() < end) {
            struct gen_check gc = {0};
            pc_store_problem *pr;
            size_t np = 0;
            if (pc_store_verify(rs, "r", &pr, &np) != 0 || np != 0)
                bad++;
            pc_store_problems_free(pr, np);
            pc_store_coll_meta m;
            if (pc_store_iterate(rs, "r", 0, gen_cb, &gc) != 0 || gc.bad ||
                gc.n != 500 + (uint64_t)(gc.g * 37) % 400)
                bad++;
            if (pc_store_coll_meta_get(rs, "r", &m) == 0 && m.generation != last_gen) {
                if (m.generation < last_gen)
                    bad++;
                last_gen = m.generation;
                gens++;
            }
            rounds++;
        }
        pc_store_close(rs);
        char msg[64];
        int len = snprintf(msg, sizeof msg, "%u %u %" PRIu64, rounds, bad, gens);
        if (write(pfd[1], msg, (size_t)len) != len)
            _exit(3);
        _exit(bad == 0 ? 0 : 1);
    }
    close(pfd[1]);
    int64_t end = mono_ms() + 2700;
    uint64_t g = 2, saves = 0;
    while (mono_ms() < end) {
        put_gen(co, g++, &cnt);
        check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
        saves++;
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    char msg[64] = "";
    ssize_t got = read(pfd[0], msg, sizeof msg - 1);
    close(pfd[0]);
    msg[got > 0 ? got : 0] = 0;
    print_message("[reader] %" PRIu64 " saves; reader rounds, inconsistent, generations seen: %s\n",
                  saves, msg);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    unsigned rounds = 0, bad = 1;
    uint64_t gens = 0;
    assert_int_equal(sscanf(msg, "%u %u %" SCNu64, &rounds, &bad, &gens), 3);
    assert_int_equal(bad, 0);
    assert_true(rounds > 10 && gens > 2);
    pc_store_close(s);
    pc_cache_destroy(c);
}

/* ---- saves while another process grows the table ----------------------------------
 * A save walks the live table lock-free (pc_walk_ordered) while workers keep
 * writing and the maintenance process splits buckets and drains overflow.
 * The snapshot must still hold every key that existed unchanged for the
 * whole save, exactly once, with its value, its counter type and its TTL.
 * The walk bug of 910785b (a split during a group's copy hid keys from the
 * save) was only caught below the store; here the whole path is checked:
 * each save is iterated from the store, and every 4th is loaded into a
 * fresh cache and read back through the engine.
 * A walk is most exposed while the table is small (a group is a large part
 * of it, so a split often lands in the group being copied), so the run is
 * rounds on a fresh cache of 16 buckets holding the stable keys: strings of
 * 1..2500 bytes, native counters, some with a one hour TTL, one in ten
 * "hot" (the hash's low 8 bits fixed: they crowd into a few buckets and
 * their chains). A forked child grows it to a few thousand buckets (load
 * factor 1, one split per pc_maintain, which also drains) while it inserts
 * churn keys (strings, counters, hot ones), removes them and retypes them
 * (string <-> counter); the parent saves in a loop until the child is done.
 * PCACHE_RACE_SECONDS lengthens the run (default 3). */
#define RACE_STABLE 1000u
#define RACE_CHURN_MAX 3000u
#define RACE_HOT_BITS 0xffu
#define RACE_HOT 0xa5u

struct race_sh {
    _Atomic int err_line, err_rc;
    _Atomic uint64_t iters, splits, drained, removed, retyped;
};

struct race_key {
    char k[32];
    size_t kl;
};
static struct race_key race_keys[RACE_STABLE];

static int64_t race_ms(void)
{
    const char *e = getenv("PCACHE_RACE_SECONDS");
    long s = e != NULL ? strtol(e, NULL, 10) : 0;
    return (s > 0 ? s : 3) * 1000;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* prefix + number, and for a hot key the smallest ".nonce" that puts the
 * hash's low bits on RACE_HOT */
static size_t race_key_make(char *k, const char *prefix, unsigned i, int hot)
{
    size_t n = (size_t)sprintf(k, "%s%05u", prefix, i);
    if (!hot)
        return n;
    for (unsigned nonce = 0;; nonce++) {
        size_t m = n + (size_t)sprintf(k + n, ".%u", nonce);
        if ((pc_hash(k, m) & RACE_HOT_BITS) == RACE_HOT)
            return m;
    }
}

static int race_is_counter(unsigned i)
{
    return i % 3 == 0;
}
static int64_t race_counter(unsigned i)
{
    return (int64_t)(i * 2654435761u) - 2147483648ll;
}
static size_t race_val(unsigned i, unsigned char *v)
{
    size_t vl = 1 + (size_t)(i * 7919u) % 2500;
    for (size_t j = 0; j < vl; j++)
        v[j] = (unsigned char)(i * 31u + j);
    return vl;
}
static int64_t race_ttl(unsigned i)
{
    return i % 7 == 0 ? 3600000 : 0;
}

#define RACE_CHECK(sh, expr, want)                                                                 \
    do {                                                                                           \
        int crc_ = (expr);                                                                         \
        if (crc_ != (want)) {                                                                      \
            atomic_store(&(sh)->err_rc, crc_);                                                     \
            atomic_store(&(sh)->err_line, __LINE__);                                               \
            _exit(2);                                                                              \
        }                                                                                          \
    } while (0)

/* A churn key: "churn:<id>", a hot one (every 6th) with ".<nonce>" (0 = not
 * searched yet: the search sets it). */
static size_t race_churn_key(char *k, uint32_t id, uint32_t *nonce)
{
    size_t n = (size_t)sprintf(k, "churn:%07u", id);
    if (id % 6 != 0)
        return n;
    if (*nonce == 0)
        for (*nonce = 1;
             (pc_hash(k, n + (size_t)sprintf(k + n, ".%u", *nonce)) & RACE_HOT_BITS) != RACE_HOT;
             ++*nonce)
            ;
    return n + (size_t)sprintf(k + n, ".%u", *nonce);
}

static void race_child(pc_cache *c, pc_coll *co, struct race_sh *sh)
{
    signal(SIGABRT, SIG_DFL);
    signal(SIGSEGV, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    static struct {
        uint32_t id, nonce;
    } live[RACE_CHURN_MAX + 8];
    uint32_t n = 0, next_id = 0;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char k[48];
    for (int64_t end = mono_ms() + 30000; n < RACE_CHURN_MAX && mono_ms() < end;) {
        for (int j = 0; j < 2; j++) {
            uint32_t id = next_id++, nonce = 0;
            size_t kl = race_churn_key(k, id, &nonce);
            if (id % 2 == 0)
                RACE_CHECK(sh, pc_set(co, k, kl, k, kl, 0, 0), 0);
            else
                RACE_CHECK(sh, pc_add(co, k, kl, id, 0, NULL), 0);
            live[n].id = id;
            live[n++].nonce = nonce;
        }
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        pc_meta m;
        if ((x >> 40) % 4 == 0) { /* retype one: string <-> counter */
            uint32_t q = (uint32_t)((x >> 20) % n);
            size_t kl = race_churn_key(k, live[q].id, &live[q].nonce);
            RACE_CHECK(sh, pc_probe(co, k, kl, &m), 0);
            if (m.is_counter)
                RACE_CHECK(sh, pc_set(co, k, kl, "s", 1, 0, 0), 0);
            else
                RACE_CHECK(sh, pc_set_counter(co, k, kl, (int64_t)x, 0), 0);
            atomic_fetch_add(&sh->retyped, 1);
        }
        uint32_t p = (uint32_t)(x % n); /* and remove one */
        size_t kl = race_churn_key(k, live[p].id, &live[p].nonce);
        RACE_CHECK(sh, pc_remove(co, k, kl), 0);
        live[p] = live[--n];
        atomic_fetch_add(&sh->removed, 1);
        pc_maint_report rep;
        RACE_CHECK(sh, pc_maintain(c, PC_MAINT_GROW, &rep), 0);
        atomic_fetch_add(&sh->splits, rep.splits);
        atomic_fetch_add(&sh->drained, rep.drained);
        atomic_fetch_add(&sh->iters, 1);
    }
    _exit(0);
}

/* What one snapshot held, compared with the stable keys. */
struct race_seen {
    unsigned char seen[RACE_STABLE];
    unsigned dup, bad_value, bad_type, bad_ttl, bad_order;
    uint64_t records, prev_order;
    int64_t now_wall;
    unsigned char v[2600];
};

/* The stable key's index, or -1 for a churn key. */
static int race_index(const void *key, size_t klen)
{
    if (klen < 12 || memcmp(key, "stable:", 7) != 0)
        return -1;
    char num[6];
    memcpy(num, (const char *)key + 7, 5);
    num[5] = '\0';
    unsigned i = (unsigned)strtoul(num, NULL, 10);
    return i < RACE_STABLE && klen == race_keys[i].kl && memcmp(key, race_keys[i].k, klen) == 0
               ? (int)i
               : -1;
}

static int race_iter_cb(void *ctx, const pc_store_record *r)
{
    struct race_seen *rs = ctx;
    rs->bad_order += rs->records > 0 && r->order < rs->prev_order;
    rs->prev_order = r->order;
    rs->records++;
    int i = race_index(r->key, r->klen);
    if (i < 0)
        return 0;
    unsigned u = (unsigned)i;
    rs->dup += rs->seen[u];
    rs->seen[u] = 1;
    if (race_is_counter(u)) {
        int64_t got = 0;
        if (r->vlen == 8)
            memcpy(&got, r->val, 8);
        rs->bad_type += !r->is_counter;
        rs->bad_value += r->vlen != 8 || got != race_counter(u);
    } else {
        size_t vl = race_val(u, rs->v);
        rs->bad_type += r->is_counter != 0;
        rs->bad_value += r->vlen != vl || memcmp(r->val, rs->v, vl) != 0;
    }
    int64_t ttl = race_ttl(u);
    rs->bad_ttl += ttl == 0 ? r->expires_ms != 0
                            : (r->expires_ms < rs->now_wall + ttl - 120000 ||
                               r->expires_ms > rs->now_wall + ttl + 1000);
    return 0;
}

/* Loads the snapshot into a fresh cache and reads every stable key back
 * through the engine. Returns the number of keys that are wrong. */
static unsigned race_load_check(pc_store *s, uint64_t want_count, unsigned *shown)
{
    pc_cache *c = mk_cache("g=4", 64);
    pc_coll *co = coll_of(c, "g");
    pc_store_load_result lr;
    check_rc(pc_store_load(s, co, NULL, &lr), PC_OK);
    assert_int_equal(lr.loaded, want_count);
    assert_int_equal(lr.failed + lr.corrupt + lr.skipped_expired, 0);
    static unsigned char v[2600], buf[2600];
    unsigned bad = 0;
    for (unsigned i = 0; i < RACE_STABLE; i++) {
        const struct race_key *rk = &race_keys[i];
        pc_meta m;
        int rc = pc_probe(co, rk->k, rk->kl, &m), ok = rc == 0;
        if (ok && race_is_counter(i)) {
            int64_t got = 0;
            ok = m.is_counter && pc_get_counter(co, rk->k, rk->kl, &got) == 0 &&
                 got == race_counter(i);
        } else if (ok) {
            size_t vl = race_val(i, v), got = 0, need = 0;
            ok = !m.is_counter &&
                 pc_get_buf(co, rk->k, rk->kl, buf, sizeof buf, &got, &need, NULL) == 0 &&
                 got == vl && memcmp(buf, v, vl) == 0;
        }
        int64_t ttl = race_ttl(i);
        ok = ok && (ttl == 0 ? m.ttl_ms == -1 : (m.ttl_ms > ttl - 120000 && m.ttl_ms <= ttl));
        if (!ok && (*shown)++ < 10)
            print_error("loaded snapshot: %.*s wrong (probe %d, counter %d, ttl %" PRId64 ")\n",
                        (int)rk->kl, rk->k, rc, m.is_counter, m.ttl_ms);
        bad += !ok;
    }
    pc_cache_destroy(c);
    return bad;
}

/* The stable keys into a fresh 16-bucket cache. */
static pc_cache *race_cache(pc_coll **co)
{
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "g=4";
    cfg.mem_mb = 32;
    cfg.growth_load_factor = 1; /* a split per net insert */
    cfg.growth_budget = 1;
    pc_cache *c = NULL;
    check_rc(pc_cache_create(&cfg, &c), PC_OK);
    *co = coll_of(c, "g");
    static unsigned char v[2600];
    for (unsigned i = 0; i < RACE_STABLE; i++) {
        const struct race_key *rk = &race_keys[i];
        if (race_is_counter(i))
            check_rc(pc_set_counter(*co, rk->k, rk->kl, race_counter(i), race_ttl(i)), PC_OK);
        else
            check_rc(pc_set(*co, rk->k, rk->kl, v, race_val(i, v), race_ttl(i), 0), PC_OK);
    }
    return c;
}

/* One save while the child runs, checked. Returns 1 when it was wrong. */
static int race_save_check(pc_store *s, pc_coll *co, unsigned nth, unsigned *shown)
{
    static struct race_seen rs;
    pc_store_save_result sr;
    check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
    memset(&rs, 0, sizeof rs);
    rs.now_wall = wall_ms();
    check_rc(pc_store_iterate(s, "g", 0, race_iter_cb, &rs), PC_OK);
    unsigned missing = 0;
    for (unsigned i = 0; i < RACE_STABLE; i++)
        missing += !rs.seen[i];
    unsigned bad = missing + rs.dup + rs.bad_value + rs.bad_type + rs.bad_ttl + rs.bad_order;
    if (bad != 0 && (*shown)++ < 10)
        print_error("save %u: %u stable keys missing, %u twice, %u wrong values, %u wrong "
                    "types, %u wrong TTLs, %u out of order\n",
                    nth, missing, rs.dup, rs.bad_value, rs.bad_type, rs.bad_ttl, rs.bad_order);
    if (rs.records != sr.saved)
        bad++;
    if (nth % 4 == 0) /* a fresh cache per load: not every save */
        bad += race_load_check(s, sr.saved, shown);
    return bad != 0;
}

static void test_save_while_growing(void **state)
{
    (void)state;
    char dir[300];
    mk_tmp(dir, sizeof dir, "growing");
    for (unsigned i = 0; i < RACE_STABLE; i++) {
        struct race_key *rk = &race_keys[i];
        rk->kl = race_key_make(rk->k, "stable:", i, i % 10 == 0);
    }
    struct race_sh *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    sc.block_bytes = 8192; /* many blocks: boundaries between equal order keys */
    sc.threads = 1;        /* the other core is the child's */
    sc.log = log_cb;
    sc.log_level = PC_LOG_WARN;
    pc_store *s = NULL;
    check_rc(pc_store_open(dir, &sc, &s, NULL, 0), PC_OK);
    unsigned rounds = 0, saves = 0, failed = 0, shown = 0;
    uint64_t buckets = 0;
    for (int64_t end = mono_ms() + race_ms(); mono_ms() < end || rounds < 3; rounds++) {
        pc_coll *co;
        pc_cache *c = race_cache(&co);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            race_child(c, co, sh);
        int st = 0;
        pid_t w;
        while ((w = waitpid(pid, &st, WNOHANG)) == 0)
            failed += race_save_check(s, co, saves++, &shown);
        assert_int_equal(w, pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fail_msg("child status %#x: line %d rc %d (%s)", st, atomic_load(&sh->err_line),
                     atomic_load(&sh->err_rc), pc_strerror(atomic_load(&sh->err_rc)));
        pc_coll_stats cs;
        check_rc(pc_coll_stats_get(co, &cs), PC_OK);
        buckets = cs.buckets;
        pc_cache_destroy(c);
    }
    print_message("[growing] %u rounds, %u saves, %u failed; child: %" PRIu64 " rounds, %" PRIu64
                  " splits, %" PRIu64 " drained, %" PRIu64 " removed, %" PRIu64 " retyped; %" PRIu64
                  " buckets at the end of a round\n",
                  rounds, saves, failed, atomic_load(&sh->iters), atomic_load(&sh->splits),
                  atomic_load(&sh->drained), atomic_load(&sh->removed), atomic_load(&sh->retyped),
                  buckets);
    pc_store_close(s);
    munmap(sh, sizeof *sh);
    assert_int_equal(failed, 0);
    assert_true(saves >= 3 * rounds && buckets >= 2048);
}

/* ---- corruption ----------------------------------------------------------------------- */
/* A store with collection "c" of 3000 SIP entries in several blocks. */
static void mk_corruptible(char *dir, size_t cap, const char *tag, pc_store_save_result *sr)
{
    mk_tmp(dir, cap, tag);
    pc_cache *c = mk_cache("c", 32);
    pc_coll *co = coll_of(c, "c");
    for (uint64_t i = 0; i < 3000; i++)
        check_rc(sip_put(co, 9, i), PC_OK);
    pc_store *s = open_store(dir, PC_STORE_CREATE);
    check_rc(pc_store_save(s, co, NULL, sr), PC_OK);
    assert_true(sr->blocks >= 5);
    pc_store_close(s);
    pc_cache_destroy(c);
}

static void load_expect(const char *dir, int want_rc, pc_store_load_result *lr)
{
    pc_cache *c = mk_cache("c", 32);
    pc_coll *co = coll_of(c, "c");
    pc_store *s = open_store(dir, 0);
    memset(lr, 0, sizeof *lr);
    check_rc(pc_store_load(s, co, NULL, lr), want_rc);
    pc_store_close(s);
    pc_cache_destroy(c);
}

static void test_corrupt_payload_byte(void **state)
{
    (void)state;
    char dir[300];
    pc_store_save_result sr;
    mk_corruptible(dir, sizeof dir, "corrupt-payload", &sr);
    raw_env r;
    raw_open(&r, dir);
    uint8_t key[80];
    size_t klen;
    MDB_val v;
    assert_int_equal(raw_block(&r, "c", 2, key, &klen, &v), 0);
    uint8_t *copy = malloc(v.mv_size);
    memcpy(copy, v.mv_data, v.mv_size);
    uint32_t cnt = le32(copy + 8);
    copy[DOC_BLOCK_HDR + (v.mv_size - DOC_BLOCK_HDR) / 2] ^= 0x5a; /* inside the zstd frame */
    MDB_val k = {klen, key}, nv = {v.mv_size, copy};
    assert_int_equal(mdb_put(r.txn, r.blocks, &k, &nv, 0), 0);
    raw_close(&r, 1);
    free(copy);
    log_reset();
    pc_store_load_result lr;
    load_expect(dir, PC_ECORRUPT, &lr);
    assert_int_equal(lr.corrupt_blocks, 1);
    assert_int_equal(lr.corrupt, cnt);
    assert_int_equal(lr.loaded, sr.saved - cnt); /* the rest loads */
    assert_non_null(strstr(logbuf, "collection c: block"));
    assert_non_null(strstr(logbuf, "payload fails its checksum"));
    pc_store *s = open_store(dir, PC_STORE_RDONLY);
    pc_store_problem *pr;
    size_t np;
    check_rc(pc_store_verify(s, NULL, &pr, &np), PC_OK);
    assert_true(np >= 1);
    assert_int_equal(pr[0].kind, PC_SP_BLOCK);
    assert_string_equal(pr[0].collection, "c");
    assert_true(pr[0].last != 0);
    pc_store_problems_free(pr, np);
    pc_store_close(s);
}

/* Rewrites block nth of "c": its raw records decompressed, edit() applied,
 * recompressed, and every block checksum recomputed - so only the record's
 * own checksum can tell. */
static void rewrite_block(const char *dir, unsigned nth, void (*edit)(uint8_t *raw, size_t len),
                          char *key_out, size_t key_cap)
{
    raw_env r;
    raw_open(&r, dir);
    uint8_t key[80];
    size_t klen;
    MDB_val v;
    assert_int_equal(raw_block(&r, "c", nth, key, &klen, &v), 0);
    const uint8_t *h = v.mv_data;
    uint32_t raw_len = le32(h + 12), pl = le32(h + 16);
    uint8_t *raw = malloc(raw_len);
    assert_int_equal(h[6], 1);
    assert_int_equal(ZSTD_decompress(raw, raw_len, h + DOC_BLOCK_HDR, pl), raw_len);
    /* the first record's key, for the caller to look for in the log */
    uint32_t kl = 0, vl = 0;
    size_t a = varint_get(raw + 17, raw_len - 17, &kl);
    size_t c = varint_get(raw + 17 + a, raw_len - 17 - a, &vl);
    snprintf(key_out, key_cap, "%.*s", (int)kl, (const char *)raw + 17 + a + c);
    edit(raw, raw_len);
    size_t bound = ZSTD_compressBound(raw_len);
    uint8_t *nv = malloc(DOC_BLOCK_HDR + bound);
    memcpy(nv, h, DOC_BLOCK_HDR);
    size_t z = ZSTD_compress(nv + DOC_BLOCK_HDR, bound, raw, raw_len, 1);
    assert_false(ZSTD_isError(z));
    put32(nv + 16, (uint32_t)z);
    put64(nv + 40, XXH3_64bits(nv + DOC_BLOCK_HDR, z));
    put64(nv + 48, XXH3_64bits(raw, raw_len));
    put64(nv + 56, XXH3_64bits(nv, 56));
    MDB_val k = {klen, key}, val = {DOC_BLOCK_HDR + z, nv};
    assert_int_equal(mdb_put(r.txn, r.blocks, &k, &val, 0), 0);
    raw_close(&r, 1);
    free(raw);
    free(nv);
}

/* Re-derives the meta of "c" from its blocks as §4.1 defines it: as if the
 * damage had happened before the save hashed anything. */
static void rederive_meta(const char *dir)
{
    raw_env r;
    raw_open(&r, dir);
    XXH3_state_t *cs = XXH3_createState();
    XXH3_64bits_reset(cs);
    uint64_t stored = 0, rawb = 0;
    uint8_t key[80];
    size_t klen;
    MDB_val bv;
    for (unsigned b = 0; raw_block(&r, "c", b, key, &klen, &bv) == 0; b++) {
        uint8_t w[8];
        put64(w, le64((const uint8_t *)bv.mv_data + 48));
        XXH3_64bits_update(cs, w, 8);
        stored += bv.mv_size;
        rawb += le32((const uint8_t *)bv.mv_data + 12);
    }
    MDB_val k = {3, (void *)"c:c"}, v;
    assert_int_equal(mdb_get(r.txn, r.meta, &k, &v), 0);
    uint8_t m[DOC_META_SIZE];
    memcpy(m, v.mv_data, sizeof m);
    put64(m + 32, rawb);
    put64(m + 40, stored);
    put64(m + 64, XXH3_64bits_digest(cs));
    put64(m + 120, XXH3_64bits(m, 120));
    XXH3_freeState(cs);
    MDB_val nv = {sizeof m, m};
    assert_int_equal(mdb_put(r.txn, r.meta, &k, &nv, 0), 0);
    raw_close(&r, 1);
}

static void edit_first_value(uint8_t *raw, size_t len)
{
    uint32_t kl = 0, vl = 0;
    size_t a = varint_get(raw + 17, len - 17, &kl);
    size_t c = varint_get(raw + 17 + a, len - 17 - a, &vl);
    assert_true(vl > 0);
    raw[17 + a + c + kl] ^= 0x01; /* the first value byte */
}

static void test_corrupt_record(void **state)
{
    (void)state;
    char dir[300], key[128];
    pc_store_save_result sr;
    mk_corruptible(dir, sizeof dir, "corrupt-record", &sr);
    rewrite_block(dir, 1, edit_first_value, key, sizeof key);
    rederive_meta(dir);
    log_reset();
    pc_store_load_result lr;
    load_expect(dir, PC_ECORRUPT, &lr);
    assert_int_equal(lr.corrupt, 1);
    assert_int_equal(lr.corrupt_blocks, 0);
    assert_int_equal(lr.loaded, sr.saved - 1); /* every other record of the block loads */
    char want[200];
    snprintf(want, sizeof want, "key '%s': record fails its checksum", key);
    if (strstr(logbuf, want) == NULL)
        fail_msg("log does not name the key: want \"%s\" in:\n%s", want, logbuf);
    assert_non_null(strstr(logbuf, "collection c:"));
    /* it was not loaded */
    pc_cache *c = mk_cache("c", 32);
    pc_coll *co = coll_of(c, "c");
    pc_store *s = open_store(dir, 0);
    check_rc(pc_store_load(s, co, NULL, &lr), PC_ECORRUPT);
    check_rc(pc_probe(co, key, strlen(key), NULL), PC_ENOTFOUND);
    void *v;
    size_t vl;
    check_rc(pc_store_get(s, "c", key, strlen(key), 0, &v, &vl, NULL), PC_ECORRUPT);
    pc_store_problem *pr;
    size_t np;
    check_rc(pc_store_verify(s, "c", &pr, &np), PC_OK);
    assert_int_equal(np, 1);
    assert_int_equal(pr[0].kind, PC_SP_RECORD);
    assert_int_equal(pr[0].klen, strlen(key));
    assert_memory_equal(pr[0].key, key, pr[0].klen);
    pc_store_problems_free(pr, np);
    pc_store_close(s);
    pc_cache_destroy(c);
}

/* Rewrites the meta of "c" with edit() applied and (if fix) its checksum
 * recomputed. */
static void rewrite_meta(const char *dir, void (*edit)(uint8_t *m), int fix)
{
    raw_env r;
    raw_open(&r, dir);
    MDB_val k = {3, (void *)"c:c"}, v;
    assert_int_equal(mdb_get(r.txn, r.meta, &k, &v), 0);
    uint8_t m[DOC_META_SIZE];
    assert_int_equal(v.mv_size, DOC_META_SIZE);
    memcpy(m, v.mv_data, sizeof m);
    edit(m);
    if (fix)
        put64(m + 120, XXH3_64bits(m, 120));
    MDB_val nv = {sizeof m, m};
    assert_int_equal(mdb_put(r.txn, r.meta, &k, &nv, 0), 0);
    raw_close(&r, 1);
}

static void edit_count(uint8_t *m)
{
    put64(m + 16, le64(m + 16) + 1);
}
static void edit_version(uint8_t *m)
{
    put32(m + 4, 2);
}
static void edit_saved_at(uint8_t *m)
{
    m[72] ^= 0xff;
}

static void test_corrupt_meta(void **state)
{
    (void)state;
    char dir[300];
    pc_store_save_result sr;
    pc_store_load_result lr;
    /* a count that disagrees with the blocks (the meta's own checksum fine) */
    mk_corruptible(dir, sizeof dir, "meta-count", &sr);
    rewrite_meta(dir, edit_count, 1);
    log_reset();
    load_expect(dir, PC_ECORRUPT, &lr);
    assert_int_equal(lr.loaded, sr.saved); /* every block is sound: all loaded */
    assert_non_null(strstr(logbuf, "but the meta says"));
    pc_store *s = open_store(dir, PC_STORE_RDONLY);
    pc_store_problem *pr;
    size_t np;
    check_rc(pc_store_verify(s, "c", &pr, &np), PC_OK);
    assert_int_equal(np, 1);
    assert_int_equal(pr[0].kind, PC_SP_COUNT);
    pc_store_problems_free(pr, np);
    pc_store_close(s);
    /* a meta that fails its own checksum: nothing is loaded */
    mk_corruptible(dir, sizeof dir, "meta-sum", &sr);
    rewrite_meta(dir, edit_saved_at, 0);
    log_reset();
    load_expect(dir, PC_ECORRUPT, &lr);
    assert_int_equal(lr.loaded, 0);
    assert_non_null(strstr(logbuf, "collection c: the meta record fails its checksum"));
    /* a collection written by a newer format version */
    mk_corruptible(dir, sizeof dir, "meta-version", &sr);
    rewrite_meta(dir, edit_version, 1);
    uint64_t before = dir_fingerprint(dir);
    log_reset();
    load_expect(dir, PC_EFORMAT, &lr);
    assert_non_null(strstr(logbuf, "newer format version"));
    /* and a save does not overwrite it */
    pc_cache *c = mk_cache("c", 16);
    s = open_store(dir, 0);
    check_rc(pc_store_save(s, coll_of(c, "c"), NULL, &sr), PC_EFORMAT);
    pc_store_close(s);
    pc_cache_destroy(c);
    assert_true(dir_fingerprint(dir) == before);
}

static void test_truncated(void **state)
{
    (void)state;
    char dir[300], data[340];
    pc_store_save_result sr;
    mk_corruptible(dir, sizeof dir, "truncated", &sr);
    snprintf(data, sizeof data, "%s/data.mdb", dir);
    struct stat st;
    assert_int_equal(stat(data, &st), 0);
    assert_int_equal(truncate(data, st.st_size / 2), 0);
    uint64_t before = dir_fingerprint(dir);
    char err[512];
    log_reset();
    check_rc(try_open(dir, 0, err, sizeof err), PC_ECORRUPT);
    assert_non_null(strstr(err, "truncated"));
    check_rc(try_open(dir, PC_STORE_RDONLY, err, sizeof err), PC_ECORRUPT);
    check_rc(try_open(dir, PC_STORE_CREATE, err, sizeof err), PC_ECORRUPT);
    assert_true(dir_fingerprint(dir) == before);
}

/* A block moved under a key that does not name its last order key, and a
 * collection whose meta is gone: verify names both. */
static void test_verify_order_orphan(void **state)
{
    (void)state;
    char dir[300];
    pc_store_save_result sr;
    mk_corruptible(dir, sizeof dir, "verify-order", &sr);
    raw_env r;
    raw_open(&r, dir);
    uint8_t key[80];
    size_t klen;
    MDB_val v;
    assert_int_equal(raw_block(&r, "c", 0, key, &klen, &v), 0);
    uint8_t *copy = malloc(v.mv_size);
    memcpy(copy, v.mv_data, v.mv_size);
    size_t vsz = v.mv_size;
    MDB_val k = {klen, key};
    assert_int_equal(mdb_del(r.txn, r.blocks, &k, NULL), 0);
    memset(key + 2, 0xff, 8); /* "c" 00 ff..ff: after every other block */
    MDB_val nv = {vsz, copy};
    assert_int_equal(mdb_put(r.txn, r.blocks, &k, &nv, 0), 0);
    raw_close(&r, 1);
    free(copy);
    pc_store *s = open_store(dir, PC_STORE_RDONLY);
    pc_store_problem *pr;
    size_t np;
    check_rc(pc_store_verify(s, NULL, &pr, &np), PC_OK);
    int order = 0;
    for (size_t i = 0; i < np; i++)
        order += pr[i].kind == PC_SP_ORDER;
    assert_true(order >= 1);
    pc_store_problems_free(pr, np);
    pc_store_close(s);
    /* the meta deleted: the blocks are orphans */
    raw_open(&r, dir);
    MDB_val mk = {3, (void *)"c:c"};
    assert_int_equal(mdb_del(r.txn, r.meta, &mk, NULL), 0);
    raw_close(&r, 1);
    s = open_store(dir, PC_STORE_RDONLY);
    check_rc(pc_store_verify(s, NULL, &pr, &np), PC_OK);
    assert_true(np >= 1);
    int orphan = 0;
    for (size_t i = 0; i < np; i++)
        orphan += pr[i].kind == PC_SP_ORPHAN && strcmp(pr[i].collection, "c") == 0;
    assert_int_equal(orphan, 1);
    pc_store_problems_free(pr, np);
    check_rc(pc_store_verify(s, "c", &pr, &np), PC_OK); /* named: the same orphan */
    orphan = 0;
    for (size_t i = 0; i < np; i++)
        orphan += pr[i].kind == PC_SP_ORPHAN;
    assert_int_equal(orphan, 1);
    pc_store_problems_free(pr, np);
    pc_store_close(s);
    /* and a save over it starts afresh at generation 1 and removes them */
    pc_cache *c = mk_cache("c", 16);
    pc_coll *co = coll_of(c, "c");
    check_rc(pc_set(co, "k", 1, "v", 1, 0, 0), PC_OK);
    s = open_store(dir, 0);
    check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
    assert_int_equal(sr.generation, 1);
    check_rc(pc_store_verify(s, NULL, &pr, &np), PC_OK);
    assert_int_equal(np, 0);
    pc_store_close(s);
    pc_cache_destroy(c);
}

/* ---- bad inputs --------------------------------------------------------------------- */
static void test_bad_paths(void **state)
{
    (void)state;
    char dir[300], p[400], err[512];
    /* a regular file */
    mk_tmp(dir, sizeof dir, "file");
    FILE *f = fopen(dir, "w");
    fputs("not a store", f);
    fclose(f);
    uint64_t before = file_fingerprint(dir);
    check_rc(try_open(dir, PC_STORE_CREATE, err, sizeof err), PC_ESTORE);
    assert_non_null(strstr(err, "not a directory"));
    check_rc(try_open(dir, PC_STORE_RDONLY, err, sizeof err), PC_ESTORE);
    assert_true(file_fingerprint(dir) == before);
    /* missing without create */
    mk_tmp(dir, sizeof dir, "missing");
    check_rc(try_open(dir, 0, err, sizeof err), PC_ESTORE);
    assert_non_null(strstr(err, "no such directory"));
    assert_int_equal(access(dir, F_OK), -1);
    /* a non-empty directory that is no store */
    mk_tmp(dir, sizeof dir, "busy");
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(p, sizeof p, "%s/x", dir);
    f = fopen(p, "w");
    fputs("someone's file", f);
    fclose(f);
    before = dir_fingerprint(dir);
    check_rc(try_open(dir, PC_STORE_CREATE, err, sizeof err), PC_ESTORE);
    assert_non_null(strstr(err, "non-empty directory"));
    assert_true(dir_fingerprint(dir) == before);
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    assert_int_equal(access(p, F_OK), -1);
    /* a data.mdb that is not LMDB */
    mk_tmp(dir, sizeof dir, "junk");
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    f = fopen(p, "w");
    for (int i = 0; i < 3000; i++)
        fputs("garbage!", f);
    fclose(f);
    before = dir_fingerprint(dir);
    check_rc(try_open(dir, PC_STORE_CREATE, err, sizeof err), PC_ESTORE);
    assert_non_null(strstr(err, "not an LMDB file"));
    check_rc(try_open(dir, PC_STORE_RDONLY, err, sizeof err), PC_ESTORE);
    assert_true(dir_fingerprint(dir) == before);
    /* an LMDB environment of someone else */
    mk_tmp(dir, sizeof dir, "foreign");
    assert_int_equal(mkdir(dir, 0755), 0);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_open(env, dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
    MDB_val k = {5, "hello"}, v = {5, "world"};
    assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    before = dir_fingerprint(dir);
    check_rc(try_open(dir, PC_STORE_CREATE, err, sizeof err), PC_ESTORE);
    assert_non_null(strstr(err, "not a pcache store"));
    check_rc(try_open(dir, 0, err, sizeof err), PC_ESTORE);
    assert_true(dir_fingerprint(dir) == before);
    /* URLs */
    mk_tmp(dir, sizeof dir, "url");
    snprintf(p, sizeof p, "lmdb://%s", dir);
    pc_store *s = open_store(p, PC_STORE_CREATE);
    assert_string_equal(pc_store_path(s), dir);
    pc_store_close(s);
    check_rc(try_open("lmdb://host/x", 0, err, sizeof err), PC_EURL);
    check_rc(try_open("odbc://dsn", 0, err, sizeof err), PC_EURL);
    check_rc(try_open(dir, PC_STORE_RDONLY | PC_STORE_CREATE, err, sizeof err), PC_EINVAL);
}

static void test_newer_format(void **state)
{
    (void)state;
    char dir[300], err[512];
    pc_store_save_result sr;
    mk_corruptible(dir, sizeof dir, "newer", &sr);
    raw_env r;
    raw_open(&r, dir);
    MDB_val k = {DOC_HDR_KEYLEN, (void *)DOC_HDR_KEY}, v;
    assert_int_equal(mdb_get(r.txn, r.meta, &k, &v), 0);
    assert_int_equal(v.mv_size, 48);
    uint8_t h[48];
    memcpy(h, v.mv_data, 48);
    assert_memory_equal(h, "PCSTORE\0", 8);
    put32(h + 8, 2);
    put64(h + 40, XXH3_64bits(h, 40));
    MDB_val nv = {48, h};
    assert_int_equal(mdb_put(r.txn, r.meta, &k, &nv, 0), 0);
    raw_close(&r, 1);
    uint64_t before = dir_fingerprint(dir);
    check_rc(try_open(dir, 0, err, sizeof err), PC_EFORMAT);
    assert_non_null(strstr(err, "newer format version"));
    check_rc(try_open(dir, PC_STORE_RDONLY, err, sizeof err), PC_EFORMAT);
    check_rc(try_open(dir, PC_STORE_CREATE, err, sizeof err), PC_EFORMAT);
    assert_true(dir_fingerprint(dir) == before);
}

static void test_unwritable(void **state)
{
    (void)state;
    char dir[300];
    pc_store_save_result sr;
    mk_corruptible(dir, sizeof dir, "unwritable", &sr);
    uint64_t before = dir_fingerprint(dir);
    /* readable by anyone, writable by its owner only */
    char p[400];
    chmod(dir, 0755);
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    chmod(p, 0644);
    snprintf(p, sizeof p, "%s/lock.mdb", dir);
    chmod(p, 0644);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGABRT, SIG_DFL);
        /* root ignores permission bits: become nobody to be refused */
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(3);
        if (geteuid() != 0)
            chmod(dir, 0555); /* not root from the start: make it read-only */
        char err[512] = "";
        pc_store_config sc;
        pc_store_config_init(&sc);
        pc_store *s = NULL;
        int rc = pc_store_open(dir, &sc, &s, err, sizeof err);
        pc_store_close(s);
        fprintf(stderr, "[unwritable] %s\n", err);
        _exit(rc == PC_EIO && strstr(err, "ermission denied") != NULL ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    chmod(dir, 0755);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3) {
        print_message("[unwritable] SKIPPED: cannot drop privileges to uid 65534\n");
        return;
    }
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_true(dir_fingerprint(dir) == before);
}

static void test_crash_during_create(void **state)
{
    (void)state;
    /* a creation that never committed: an LMDB env with nothing in it */
    char dir[300], err[512];
    mk_tmp(dir, sizeof dir, "halfcreated");
    assert_int_equal(mkdir(dir, 0755), 0);
    MDB_env *env;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_open(env, dir, 0, 0644), 0);
    mdb_env_close(env);
    check_rc(try_open(dir, 0, err, sizeof err), PC_ESTORE);
    assert_non_null(strstr(err, "not initialised"));
    pc_store *s = open_store(dir, PC_STORE_CREATE);
    pc_store_info in;
    check_rc(pc_store_info_get(s, &in), PC_OK);
    assert_int_equal(in.format_version, PC_STORE_FORMAT_VERSION);
    pc_store_close(s);
    /* a zero-length data.mdb likewise */
    mk_tmp(dir, sizeof dir, "zerofile");
    assert_int_equal(mkdir(dir, 0755), 0);
    char p[400];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    fclose(fopen(p, "w"));
    check_rc(try_open(dir, 0, err, sizeof err), PC_ESTORE);
    s = open_store(dir, PC_STORE_CREATE);
    pc_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_mixed),
        cmocka_unit_test(test_empty_collection),
        cmocka_unit_test(test_get_iterate_docreader),
        cmocka_unit_test(test_generations_filter_bootgen),
        cmocka_unit_test(test_map_grows),
        cmocka_unit_test(test_handle_after_fork),
        cmocka_unit_test(test_reader_during_saves),
        cmocka_unit_test(test_save_while_growing),
        cmocka_unit_test(test_corrupt_payload_byte),
        cmocka_unit_test(test_corrupt_record),
        cmocka_unit_test(test_corrupt_meta),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_verify_order_orphan),
        cmocka_unit_test(test_bad_paths),
        cmocka_unit_test(test_newer_format),
        cmocka_unit_test(test_unwritable),
        cmocka_unit_test(test_crash_during_create),
        cmocka_unit_test(test_roundtrip_large),
    };
    return cmocka_run_group_tests(tests, setup_root, teardown_root);
}
