/*
 * test_odbc.c - the ODBC exporter (odbc/) against real drivers and real
 * servers it starts itself (tests/support/odbc_servers.sh): SQLite (libsqliteodbc),
 * PostgreSQL (psqlODBC, a private cluster) and MariaDB (Connector/ODBC, a
 * private server). Per driver: round trips of strings, binary values with
 * NULs of every length (the libsqliteodbc binding trap), counters, TTLs,
 * expired entries, 100k entries, an empty collection, generations; a
 * constraint violation in the middle of a save rolls everything back; the
 * LMDB <-> SQL export and import; a handle used in a forked child; db_url
 * "odbc:..." through the persistence policies and perf_save / perf_load.
 * Failure injection that needs one server (stopping PostgreSQL or killing
 * the connection mid-save, wrong password, read-only database) is in
 * test_odbc_fail.c.
 */
#include "odbc_testenv.h"
#include "pcache.h"
#include "pcache_mgmt.h"
#include "pcache_odbc.h"
#include "pcache_persist.h"
#include "pcache_store.h"
#include "pcache_storecheck.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pc_fixture.h" /* after cmocka.h: they assert */
#include "pc_testrun.h"

static pc_cache *mk_cache(void)
{
    pc_config cfg;
    pc_fx_config(&cfg, "a;b;big=16;empty;poison;p1;p2;fk;t", 160);
    cfg.lock_memory = 0;
    return pc_fx_create(&cfg);
}

static pc_odbc *open_db(const char *target, unsigned flags)
{
    pc_odbc_config cfg;
    pc_odbc_config_init(&cfg);
    cfg.flags = flags;
    pc_odbc *o = NULL;
    char err[1024];
    int rc = pc_odbc_open(target, &cfg, &o, err, sizeof err);
    if (rc != 0)
        fail_msg("pc_odbc_open(%s): %s: %s", target, pc_store_strerror(rc), err);
    return o;
}

/* Value i of the variable-length binary set: length i % 301 (0 included),
 * bytes that include NULs and 0xff, different per key. */
static size_t bin_value(unsigned i, unsigned char *buf)
{
    size_t len = i % 301;
    for (size_t j = 0; j < len; j++)
        buf[j] = (unsigned char)((i * 31 + j * 7) % 5 == 0 ? 0 : (i + j * 13) & 0xff);
    return len;
}

static void expect_bytes(pc_coll *co, const void *k, size_t kl, const void *v, size_t vl)
{
    void *got = NULL;
    size_t gl = 0;
    int rc = pc_get(co, k, kl, &got, &gl, NULL);
    if (rc != 0)
        fail_msg("key of %zu bytes: %s", kl, pc_store_strerror(rc));
    if (gl != vl || (vl > 0 && memcmp(got, v, vl) != 0))
        fail_msg("key of %zu bytes: value of %zu bytes came back as %zu bytes or different", kl, vl,
                 gl);
    free(got);
}

/* Strings, binary with NULs, the extremes of key and value size, counters,
 * TTLs and an entry that expires between save and load. */
static void fill_mixed(pc_cache *c)
{
    pc_coll *a = pc_fx_coll(c, "a");
    unsigned char v[400];
    char k[32];
    for (unsigned i = 0; i < 2000; i++) {
        memcpy(k, "bin", 4); /* a NUL inside every key */
        int kl = 4 + snprintf(k + 4, sizeof k - 4, "%u", i);
        size_t vl = bin_value(i, v);
        assert_int_equal(pc_set(a, k, (size_t)kl, v, vl, 0, 0), 0);
    }
    assert_int_equal(pc_set(a, "str", 3, "hello, world", 12, 0, 0), 0);
    assert_int_equal(pc_set(a, "nul1", 4, "\0", 1, 0, 0), 0);
    assert_int_equal(pc_set(a, "three", 5, "a\0b", 3, 0, 0), 0);
    assert_int_equal(pc_set(a, "empty", 5, "", 0, 0, 0), 0);
    assert_int_equal(pc_set(a, "quote", 5, "it's \"x\"; DROP TABLE y;--", 25, 0, 0), 0);
    assert_int_equal(pc_set_counter(a, "ctr", 3, -42, 0), 0);
    assert_int_equal(pc_set_counter(a, "ctrmax", 6, INT64_MAX, 0), 0);
    assert_int_equal(pc_set_counter(a, "ctrmin", 6, INT64_MIN, 0), 0);
    assert_int_equal(pc_set(a, "ttl", 3, "lives", 5, 3600 * 1000, 0), 0);
    assert_int_equal(pc_set_counter(a, "ttlctr", 6, 7, 3600 * 1000), 0);
    /* a maximal key and a maximal value */
    unsigned char *big = malloc(PC_VALUE_MAX);
    assert_non_null(big);
    for (size_t i = 0; i < PC_VALUE_MAX; i++)
        big[i] = (unsigned char)(i * 2654435761u >> 24);
    assert_int_equal(pc_set(a, big, PC_KEY_MAX, "maxkey", 6, 0, 0), 0);
    assert_int_equal(pc_set(a, "maxval", 6, big, PC_VALUE_MAX, 0, 0), 0);
    free(big);
}

static void check_mixed(pc_cache *c)
{
    pc_coll *a = pc_fx_coll(c, "a");
    unsigned char v[400];
    char k[32];
    for (unsigned i = 0; i < 2000; i++) {
        memcpy(k, "bin", 4);
        int kl = 4 + snprintf(k + 4, sizeof k - 4, "%u", i);
        size_t vl = bin_value(i, v);
        expect_bytes(a, k, (size_t)kl, v, vl);
    }
    expect_bytes(a, "str", 3, "hello, world", 12);
    expect_bytes(a, "nul1", 4, "\0", 1);
    expect_bytes(a, "three", 5, "a\0b", 3);
    expect_bytes(a, "empty", 5, "", 0);
    expect_bytes(a, "quote", 5, "it's \"x\"; DROP TABLE y;--", 25);
    int64_t n = 0;
    pc_meta m;
    assert_int_equal(pc_get_counter(a, "ctr", 3, &n), 0);
    assert_int_equal(n, -42);
    assert_int_equal(pc_probe(a, "ctr", 3, &m), 0);
    assert_int_equal(m.is_counter, 1);
    assert_int_equal(m.ttl_ms, -1);
    assert_int_equal(pc_get_counter(a, "ctrmax", 6, &n), 0);
    assert_true(n == INT64_MAX);
    assert_int_equal(pc_get_counter(a, "ctrmin", 6, &n), 0);
    assert_true(n == INT64_MIN);
    assert_int_equal(pc_probe(a, "ttl", 3, &m), 0);
    assert_true(m.ttl_ms > 3500 * 1000 && m.ttl_ms <= 3600 * 1000);
    assert_int_equal(pc_probe(a, "ttlctr", 6, &m), 0);
    assert_int_equal(m.is_counter, 1);
    assert_true(m.ttl_ms > 3500 * 1000 && m.ttl_ms <= 3600 * 1000);
    assert_int_equal(pc_probe(a, "soon", 4, NULL), PC_ENOTFOUND);
    unsigned char *big = malloc(PC_VALUE_MAX);
    assert_non_null(big);
    for (size_t i = 0; i < PC_VALUE_MAX; i++)
        big[i] = (unsigned char)(i * 2654435761u >> 24);
    expect_bytes(a, big, PC_KEY_MAX, "maxkey", 6);
    expect_bytes(a, "maxval", 6, big, PC_VALUE_MAX);
    free(big);
}

static void t_roundtrip_mixed(void **state)
{
    const char *target = *state;
    if (target[0] == '\0')
        pc_skip("MariaDB: the server or Connector/ODBC is not installed");
    pc_odbc *o = open_db(target, PC_ODBC_CREATE);
    pc_cache *c = mk_cache();
    fill_mixed(c);
    /* lives through the saves (well under 2 s even under ASan), not to the load */
    assert_int_equal(pc_set(pc_fx_coll(c, "a"), "soon", 4, "dies", 4, 2000, 0), 0);
    pc_odbc_result r1, r2, l;
    assert_int_equal(pc_odbc_save(o, pc_fx_coll(c, "a"), &r1), 0);
    assert_int_equal(r1.rows, 2000 + 13);
    assert_int_equal(pc_odbc_save(o, pc_fx_coll(c, "a"), &r2), 0); /* a save replaces the rows */
    assert_int_equal(r2.rows, r1.rows);
    assert_true(r2.generation == r1.generation + 1);
    uint64_t g = 0;
    assert_int_equal(pc_odbc_generation(o, "a", &g), 0);
    assert_true(g == r2.generation);
    assert_int_equal(pc_odbc_generation(o, "never-saved", &g), PC_ENOTFOUND);
    pc_cache_destroy(c);
    usleep(2100 * 1000); /* "soon" lapses */
    c = mk_cache();
    assert_int_equal(pc_odbc_load(o, pc_fx_coll(c, "a"), &l), 0);
    assert_int_equal(l.rows, 2000 + 12);
    assert_int_equal(l.skipped_expired, 1);
    assert_true(l.generation == r2.generation);
    check_mixed(c);
    pc_coll_stats st;
    assert_int_equal(pc_coll_stats_get(pc_fx_coll(c, "a"), &st), 0);
    assert_int_equal(st.entries, 2000 + 12);
    /* a collection never saved: PC_ENOTFOUND, nothing loaded */
    assert_int_equal(pc_odbc_load(o, pc_fx_coll(c, "b"), &l), PC_ENOTFOUND);
    printf("# %s (%s): mixed round trip: %llu rows saved in %.3f s, loaded in %.3f s\n",
           pc_odbc_dialect_name(pc_odbc_dialect(o)), pc_odbc_server(o), (unsigned long long)r1.rows,
           r1.seconds, l.seconds);
    pc_cache_destroy(c);
    pc_odbc_close(o);
}

/* An order-independent digest of a collection's rows in SQL (through
 * pc_odbc_visit): two saves of the same entries must leave the same rows.
 * Expiries enter as "has one" (a save computes them from its own clock). */
struct digest {
    uint64_t sum, mix, rows;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static int digest_row(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                      int64_t expires_ms, int is_counter)
{
    struct digest *d = ctx;
    uint64_t h = fnv(0xcbf29ce484222325ull, &klen, sizeof klen);
    h = fnv(fnv(h, key, klen), &vlen, sizeof vlen);
    h = fnv(h, val, vlen);
    unsigned char flags = (unsigned char)((expires_ms != 0) * 2 + (is_counter != 0));
    h = fnv(h, &flags, 1);
    d->sum += h;
    d->mix ^= h * 0x9e3779b97f4a7c15ull;
    d->rows++;
    return 0;
}

/* Every statement shape on every driver with the variable-length binary
 * set, so a shape that is not the dialect's default is still known to
 * round-trip (libsqliteodbc's trap: its ARRAY is MULTI; PACKED is
 * PostgreSQL's, MULTI elsewhere); each with the pipeline on (batches of 97
 * rows: about 20 hand-offs to the sender thread, the 64 KiB key and the
 * 1 MiB value among them) and off, which must leave identical rows and no
 * thread behind. */
static void t_shapes(void **state)
{
    const char *target = *state;
    if (target[0] == '\0')
        pc_skip("MariaDB: the server or Connector/ODBC is not installed");
    for (int shape = PC_ODBC_SHAPE_ROW; shape <= PC_ODBC_SHAPE_PACKED; shape++) {
        struct digest dg[2];
        for (int p = 0; p < 2; p++) {
            pc_odbc_config cfg;
            pc_odbc_config_init(&cfg);
            cfg.shape = shape;
            cfg.batch_rows = 97; /* batches that do not divide the row count */
            cfg.pipeline = p == 0 ? PC_ODBC_PIPELINE_ON : PC_ODBC_PIPELINE_OFF;
            pc_odbc *o = NULL;
            assert_int_equal(pc_odbc_open(target, &cfg, &o, NULL, 0), 0);
            pc_cache *c = mk_cache();
            fill_mixed(c);
            pc_odbc_result r, l;
            int threads = odbc_env_threads();
            assert_int_equal(pc_odbc_save(o, pc_fx_coll(c, "a"), &r), 0);
            assert_int_equal(odbc_env_threads(), threads);
            assert_int_equal(r.rows, 2000 + 12);
            pc_cache_destroy(c);
            c = mk_cache();
            assert_int_equal(pc_odbc_load(o, pc_fx_coll(c, "a"), &l), 0);
            assert_int_equal(l.rows, 2000 + 12);
            check_mixed(c);
            uint64_t gen = 0;
            memset(&dg[p], 0, sizeof dg[p]);
            assert_int_equal(pc_odbc_visit(o, "a", 0, digest_row, &dg[p], &gen, NULL, 0, NULL), 0);
            assert_int_equal(dg[p].rows, 2000 + 12);
            printf("# %s: shape %d, pipeline %s: %llu statements\n",
                   pc_odbc_dialect_name(pc_odbc_dialect(o)), shape, p == 0 ? "on" : "off",
                   (unsigned long long)r.batches);
            pc_cache_destroy(c);
            pc_odbc_close(o);
        }
        assert_true(dg[0].sum == dg[1].sum && dg[0].mix == dg[1].mix);
    }
}

/* Saves collection name of *c (rows rows), replaces *c with an empty
 * cache and loads the collection back into it (rows rows again); returns
 * the loaded collection. */
static pc_coll *save_reload(pc_odbc *o, pc_cache **c, const char *name, uint64_t rows,
                            pc_odbc_result *saved, pc_odbc_result *loaded)
{
    assert_int_equal(pc_odbc_save(o, pc_fx_coll(*c, name), saved), 0);
    assert_int_equal(saved->rows, rows);
    pc_cache_destroy(*c);
    *c = mk_cache();
    pc_coll *co = pc_fx_coll(*c, name);
    assert_int_equal(pc_odbc_load(o, co, loaded), 0);
    assert_int_equal(loaded->rows, rows);
    return co;
}

static void key100k(unsigned i, char k[17])
{
    snprintf(k, 17, "key-%012u", i);
}
static void val100k(unsigned i, unsigned char v[200])
{
    for (unsigned j = 0; j < 200; j++)
        v[j] = (unsigned char)((i ^ (j * 0x9e)) + (j % 7 == 0 ? 0 : j));
}

static void t_roundtrip_100k(void **state)
{
    const char *target = *state;
    if (target[0] == '\0')
        pc_skip("MariaDB: the server or Connector/ODBC is not installed");
    pc_odbc *o = open_db(target, PC_ODBC_CREATE);
    pc_cache *c = mk_cache();
    pc_coll *b = pc_fx_coll(c, "big");
    char k[17];
    unsigned char v[200];
    for (unsigned i = 0; i < 100000; i++) {
        key100k(i, k);
        val100k(i, v);
        assert_int_equal(pc_set(b, k, 16, v, 200, 0, 0), 0);
    }
    pc_odbc_result s, l;
    b = save_reload(o, &c, "big", 100000, &s, &l);
    for (unsigned i = 0; i < 100000; i++) {
        key100k(i, k);
        val100k(i, v);
        expect_bytes(b, k, 16, v, 200);
    }
    printf("# %s: 100k rows: save %.3f s (%.0f rows/s, %llu statements), load %.3f s "
           "(%.0f rows/s)\n",
           pc_odbc_dialect_name(pc_odbc_dialect(o)), s.seconds, s.rate,
           (unsigned long long)s.batches, l.seconds, l.rate);
    pc_cache_destroy(c);
    pc_odbc_close(o);
}

/* Value i of the mostly-text set: printable SIP-like text with byte i % 256
 * at a position that moves with i (NUL, backslash, DEL, 0x80-0xff all
 * among them), and a few that begin the way PostgreSQL's bytea text forms
 * do. PostgreSQL's PACKED sends batches like these in the escape text form
 * and falls back to hex for a batch that escaping would more than double
 * (the 64 KiB random value): both forms, in one save, must round-trip. */
static size_t text_value(unsigned i, unsigned char *v)
{
    static const char *heads[] = {"\\x41", "\\\\", "\\000", "\\", "x"};
    size_t n = (size_t)snprintf((char *)v, 200, "%s<sip:+4930%07u@10.1.%u.%u:5060;transport=udp>",
                                i % 50 < 5 ? heads[i % 5] : "", i, i % 256, (i / 256) % 256);
    size_t at = i % (n + 1);
    memmove(v + at + 1, v + at, n - at);
    v[at] = (unsigned char)(i % 256);
    return n + 1;
}

static void t_text_values(void **state)
{
    const char *target = *state;
    if (target[0] == '\0')
        pc_skip("MariaDB: the server or Connector/ODBC is not installed");
    pc_odbc_config cfg;
    pc_odbc_config_init(&cfg);
    cfg.flags = PC_ODBC_CREATE;
    cfg.batch_rows = 97;
    pc_odbc *o = NULL;
    assert_int_equal(pc_odbc_open(target, &cfg, &o, NULL, 0), 0);
    pc_cache *c = mk_cache();
    pc_coll *t = pc_fx_coll(c, "t");
    unsigned char v[256];
    char k[32];
    for (unsigned i = 0; i < 3000; i++) {
        int kl = snprintf(k, sizeof k, "text%u", i);
        assert_int_equal(pc_set(t, k, (size_t)kl, v, text_value(i, v), 0, 0), 0);
    }
    unsigned char *rnd = malloc(65536);
    assert_non_null(rnd);
    for (size_t j = 0; j < 65536; j++)
        rnd[j] = (unsigned char)(j * 2654435761u >> 24);
    assert_int_equal(pc_set(t, "random", 6, rnd, 65536, 0, 0), 0);
    pc_odbc_result r, l;
    t = save_reload(o, &c, "t", 3001, &r, &l);
    for (unsigned i = 0; i < 3000; i++) {
        int kl = snprintf(k, sizeof k, "text%u", i);
        expect_bytes(t, k, (size_t)kl, v, text_value(i, v));
    }
    expect_bytes(t, "random", 6, rnd, 65536);
    free(rnd);
    pc_cache_destroy(c);
    pc_odbc_close(o);
}

static void t_empty(void **state)
{
    const char *target = *state;
    if (target[0] == '\0')
        pc_skip("MariaDB: the server or Connector/ODBC is not installed");
    pc_odbc *o = open_db(target, PC_ODBC_CREATE);
    pc_cache *c = mk_cache();
    pc_coll *e = pc_fx_coll(c, "empty");
    assert_int_equal(pc_set(e, "x", 1, "y", 1, 0, 0), 0);
    pc_odbc_result r, l;
    assert_int_equal(pc_odbc_save(o, e, &r), 0);
    assert_int_equal(r.rows, 1);
    assert_int_equal(pc_remove(e, "x", 1), 0);
    assert_int_equal(pc_odbc_save(o, e, &r), 0); /* now empty: the old row goes */
    assert_int_equal(r.rows, 0);
    pc_cache_destroy(c);
    c = mk_cache();
    e = pc_fx_coll(c, "empty");
    assert_int_equal(pc_odbc_load(o, e, &l), 0);
    assert_int_equal(l.rows, 0);
    assert_true(l.generation == r.generation);
    assert_int_equal(pc_probe(e, "x", 1, NULL), PC_ENOTFOUND);
    pc_cache_destroy(c);
    pc_odbc_close(o);
}

/* Stores n keys "old<i>" = "old" in p and saves them: the rows a failing
 * save must leave intact. Returns the generation of that save. */
static uint64_t save_old_rows(pc_odbc *o, pc_coll *p, unsigned n)
{
    char k[32];
    for (unsigned i = 0; i < n; i++) {
        int kl = snprintf(k, sizeof k, "old%u", i);
        assert_int_equal(pc_set(p, k, (size_t)kl, "old", 3, 0, 0), 0);
    }
    pc_odbc_result r;
    assert_int_equal(pc_odbc_save(o, p, &r), 0);
    return r.generation;
}

/* Loads collection name into a fresh cache: exactly the n old rows, no new one. */
static void expect_old_rows(pc_odbc *o, const char *name, unsigned n)
{
    pc_cache *c = mk_cache();
    pc_coll *p = pc_fx_coll(c, name);
    pc_odbc_result l;
    assert_int_equal(pc_odbc_load(o, p, &l), 0);
    assert_int_equal(l.rows, n);
    char k[32];
    for (unsigned i = 0; i < n; i++) {
        int kl = snprintf(k, sizeof k, "old%u", i);
        expect_bytes(p, k, (size_t)kl, "old", 3);
    }
    assert_int_equal(pc_probe(p, "new1", 4, NULL), PC_ENOTFOUND);
    pc_cache_destroy(c);
}

/* A constraint violation's message: SQLSTATE class 23 (integrity
 * constraint); libsqliteodbc reports HY000 with SQLite's own code 19,
 * SQLITE_CONSTRAINT. */
static void expect_constraint_msg(int d, const char *msg)
{
    if (d == PC_ODBC_SQLITE)
        assert_non_null(strstr(msg, "[HY000]") && strstr(msg, "(19)") ? msg : NULL);
    else
        assert_non_null(strstr(msg, "[23"));
}

/* A CHECK constraint (a trigger on SQLite) refuses one key that the walk
 * reaches among 3000: the save fails with the driver's SQLSTATE and the
 * previous rows and generation are all there. */
static void t_constraint_rollback(void **state)
{
    const char *target = *state;
    if (target[0] == '\0')
        pc_skip("MariaDB: the server or Connector/ODBC is not installed");
    pc_odbc *o = open_db(target, PC_ODBC_CREATE);
    int d = pc_odbc_dialect(o);
    pc_cache *c = mk_cache();
    pc_coll *p = pc_fx_coll(c, "poison");
    char k[32];
    uint64_t gen = save_old_rows(o, p, 1000);
    pc_odbc_result r;
    const char *add =
        d == PC_ODBC_SQLITE       ? "CREATE TRIGGER pcache_poison BEFORE INSERT ON pcache_entries "
                                    "WHEN NEW.pkey = X'706F69736F6E' BEGIN SELECT RAISE(ABORT, "
                                    "'poisoned key'); END"
        : d == PC_ODBC_POSTGRESQL ? "ALTER TABLE pcache_entries ADD CONSTRAINT pcache_poison CHECK "
                                    "(pkey <> '\\x706f69736f6e'::bytea)"
                                  : "ALTER TABLE pcache_entries ADD CONSTRAINT pcache_poison CHECK "
                                    "(pkey <> X'706F69736F6E')";
    const char *drop = d == PC_ODBC_SQLITE
                           ? "DROP TRIGGER pcache_poison"
                           : "ALTER TABLE pcache_entries DROP CONSTRAINT pcache_poison";
    assert_int_equal(odbc_env_sql(target, add), 0);
    for (unsigned i = 0; i < 3000; i++) {
        int kl = snprintf(k, sizeof k, "new%u", i);
        assert_int_equal(pc_set(p, k, (size_t)kl, "new", 3, 0, 0), 0);
    }
    assert_int_equal(pc_set(p, "poison", 6, "x", 1, 0, 0), 0);
    int rc = pc_odbc_save(o, p, &r);
    const char *msg = pc_odbc_errmsg(o);
    printf("# %s: constraint violation: %s\n", pc_odbc_dialect_name(d), msg);
    assert_int_equal(odbc_env_sql(target, drop), 0);
    assert_int_equal(rc, PC_EIO);
    expect_constraint_msg(d, msg);
    assert_non_null(strstr(msg, "poison"));
    uint64_t g = 0;
    assert_int_equal(pc_odbc_generation(o, "poison", &g), 0);
    assert_true(g == gen);
    pc_cache_destroy(c);
    expect_old_rows(o, "poison", 1000);
    pc_odbc_close(o);
}

/* The failure of a batch that the sender thread executes, in the middle
 * of a pipelined save: a constraint refuses the key at walk position 2950
 * of 5000 (batches of 100, so batch 30). The save returns the driver's
 * SQLSTATE for that batch; the 29 batches before it were reported to the
 * progress callback and none after it (the walk stopped); no thread is
 * left; the previous rows and generation stand. */
struct ord {
    uint64_t key;
    unsigned i;
};
static int ord_cmp(const void *a, const void *b)
{
    const struct ord *x = a, *y = b;
    return x->key < y->key ? -1 : x->key > y->key;
}
static int count_calls(void *ctx, const char *name, uint64_t done, uint64_t total)
{
    (void)name;
    (void)done;
    (void)total;
    ++*(unsigned *)ctx;
    return 0;
}

static void t_pipeline_failure(void **state)
{
    const char *target = *state;
    if (target[0] == '\0')
        pc_skip("MariaDB: the server or Connector/ODBC is not installed");
    pc_odbc *o = open_db(target, PC_ODBC_CREATE);
    int d = pc_odbc_dialect(o);
    pc_cache *c = mk_cache();
    pc_coll *p = pc_fx_coll(c, "p1");
    char k[32];
    uint64_t gen = save_old_rows(o, p, 500);
    pc_odbc_result r;
    pc_odbc_close(o);
    /* the new entries, and the one at walk position 2950 among them */
    static struct ord ord[5000];
    for (unsigned i = 0; i < 5000; i++) {
        int kl = snprintf(k, sizeof k, "new%u", i);
        assert_int_equal(pc_set(p, k, (size_t)kl, "new", 3, 0, 0), 0);
        ord[i].key = pc_order_key(pc_hash(k, (size_t)kl));
        ord[i].i = i;
    }
    assert_int_equal(pc_remove(p, "old0", 4), 0); /* the old rows go from the cache */
    for (unsigned i = 1; i < 500; i++) {
        int kl = snprintf(k, sizeof k, "old%u", i);
        assert_int_equal(pc_remove(p, k, (size_t)kl), 0);
    }
    qsort(ord, 5000, sizeof *ord, ord_cmp);
    int pl = snprintf(k, sizeof k, "new%u", ord[2950].i);
    char hex[64] = "", add[300], drop[100];
    for (int i = 0; i < pl; i++)
        snprintf(hex + 2 * i, sizeof hex - 2 * (size_t)i, "%02x", (unsigned char)k[i]);
    if (d == PC_ODBC_SQLITE)
        snprintf(add, sizeof add,
                 "CREATE TRIGGER pcache_pipefail BEFORE INSERT ON pcache_entries WHEN NEW.pkey = "
                 "X'%s' BEGIN SELECT RAISE(ABORT, 'poisoned key'); END",
                 hex);
    else
        snprintf(add, sizeof add,
                 "ALTER TABLE pcache_entries ADD CONSTRAINT pcache_pipefail CHECK (pkey <> %s%s%s)",
                 d == PC_ODBC_POSTGRESQL ? "'\\x" : "X'", hex,
                 d == PC_ODBC_POSTGRESQL ? "'::bytea" : "'");
    snprintf(drop, sizeof drop, "%s",
             d == PC_ODBC_SQLITE ? "DROP TRIGGER pcache_pipefail"
                                 : "ALTER TABLE pcache_entries DROP CONSTRAINT pcache_pipefail");
    assert_int_equal(odbc_env_sql(target, add), 0);

    pc_odbc_config cfg;
    pc_odbc_config_init(&cfg);
    cfg.pipeline = PC_ODBC_PIPELINE_ON;
    cfg.batch_rows = 100;
    unsigned calls = 0;
    cfg.progress = count_calls;
    cfg.progress_ctx = &calls;
    assert_int_equal(pc_odbc_open(target, &cfg, &o, NULL, 0), 0);
    int threads = odbc_env_threads();
    int rc = pc_odbc_save(o, p, &r);
    int threads_after = odbc_env_threads();
    const char *msg = pc_odbc_errmsg(o);
    printf("# %s: pipelined save failing in batch 30: %s\n", pc_odbc_dialect_name(d), msg);
    assert_int_equal(odbc_env_sql(target, drop), 0);
    assert_int_equal(rc, PC_EIO);
    expect_constraint_msg(d, msg);
    assert_non_null(strstr(msg, "\"p1\""));
    /* the failing batch is named: a statement failure, or (MariaDB's
     * parameter arrays) the row of the batch that was not inserted */
    assert_non_null(strstr(msg, "after 2900 rows") || strstr(msg, "row 2950 ") ? msg : NULL);
    assert_null(strstr(msg, ODBC_TEST_PW));
    assert_int_equal(calls, 29);
    assert_int_equal(threads_after, threads);
    uint64_t g = 0;
    assert_int_equal(pc_odbc_generation(o, "p1", &g), 0);
    assert_true(g == gen);
    pc_odbc_close(o);
    pc_cache_destroy(c);
    o = open_db(target, 0);
    expect_old_rows(o, "p1", 500);
    pc_odbc_close(o);
}

/* A handle opened before fork() and used in the child (how hosts save from
 * a maintenance process): the child reconnects, its save commits, and its
 * close does not disconnect the parent, whose connection still works. */
static void t_fork(void **state)
{
    const char *target = *state;
    if (target[0] == '\0')
        pc_skip("MariaDB: the server or Connector/ODBC is not installed");
    pc_odbc *o = open_db(target, PC_ODBC_CREATE);
    pc_cache *c = mk_cache();
    pc_coll *b = pc_fx_coll(c, "fk");
    assert_int_equal(pc_set(b, "before", 6, "fork", 4, 0, 0), 0);
    pc_odbc_result r;
    assert_int_equal(pc_odbc_save(o, b, &r), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int ok = pc_set(b, "child", 5, "wrote", 5, 0, 0) == 0 && pc_odbc_save(o, b, NULL) == 0;
        pc_odbc_close(o);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    uint64_t g = 0;
    assert_int_equal(pc_odbc_generation(o, "fk", &g), 0); /* the parent's connection */
    assert_true(g == r.generation + 1);
    pc_cache_destroy(c);
    c = mk_cache();
    pc_odbc_result l;
    assert_int_equal(pc_odbc_load(o, pc_fx_coll(c, "fk"), &l), 0);
    assert_int_equal(l.rows, 2);
    expect_bytes(pc_fx_coll(c, "fk"), "child", 5, "wrote", 5);
    pc_cache_destroy(c);
    pc_odbc_close(o);
}

/* ---- export / import between the LMDB store and SQL ---------------------- */
struct progress {
    uint64_t calls, last_done, last_total;
};
static int on_progress(void *ctx, const char *name, uint64_t done, uint64_t total)
{
    struct progress *p = ctx;
    (void)name;
    assert_true(done >= p->last_done || p->last_total != total);
    p->calls++;
    p->last_done = done;
    p->last_total = total;
    return 0;
}

static void t_export_import(void **state)
{
    const char *target = *state;
    if (target[0] == '\0')
        pc_skip("MariaDB: the server or Connector/ODBC is not installed");
    char sdir[300], sdir2[300];
    snprintf(sdir, sizeof sdir, "%s/store-XXXXXX", odbc_env_dir());
    snprintf(sdir2, sizeof sdir2, "%s/store2-XXXXXX", odbc_env_dir());
    assert_non_null(mkdtemp(sdir));
    assert_non_null(mkdtemp(sdir2));
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    pc_store *s = NULL, *s2 = NULL;
    assert_int_equal(pc_store_open_checked(sdir, &sc, &s, NULL, 0), 0);
    assert_int_equal(pc_store_open_checked(sdir2, &sc, &s2, NULL, 0), 0);
    pc_cache *c = mk_cache();
    char k[32];
    unsigned char v[400];
    for (unsigned i = 0; i < 5000; i++) {
        int kl = snprintf(k, sizeof k, "e%u", i);
        size_t vl = bin_value(i, v);
        assert_int_equal(pc_set(pc_fx_coll(c, "p1"), k, (size_t)kl, v, vl, 0, 0), 0);
    }
    assert_int_equal(pc_set_counter(pc_fx_coll(c, "p2"), "n", 1, -5, 3600 * 1000), 0);
    assert_int_equal(pc_set(pc_fx_coll(c, "p2"), "s", 1, "\0\0", 2, 0, 0), 0);
    assert_int_equal(pc_store_save(s, pc_fx_coll(c, "p1"), NULL, NULL), 0);
    assert_int_equal(pc_store_save(s, pc_fx_coll(c, "p2"), NULL, NULL), 0);
    pc_cache_destroy(c);

    struct progress pr = {0, 0, 0};
    pc_odbc_config cfg;
    pc_odbc_config_init(&cfg);
    cfg.flags = PC_ODBC_CREATE;
    cfg.progress = on_progress;
    cfg.progress_ctx = &pr;
    pc_odbc *o = NULL;
    assert_int_equal(pc_odbc_open(target, &cfg, &o, NULL, 0), 0);
    pc_odbc_result r;
    assert_int_equal(pc_odbc_export(o, s, NULL, &r), 0); /* the whole store */
    assert_int_equal(r.rows, 5002);
    assert_true(pr.calls > 0);
    assert_int_equal(pc_odbc_export(o, s, "nope", &r), PC_ENOTFOUND);
    /* what SQL holds now loads like a save's rows */
    c = mk_cache();
    pc_odbc_result l;
    assert_int_equal(pc_odbc_load(o, pc_fx_coll(c, "p1"), &l), 0);
    assert_int_equal(l.rows, 5000);
    for (unsigned i = 0; i < 5000; i += 7) {
        int kl = snprintf(k, sizeof k, "e%u", i);
        expect_bytes(pc_fx_coll(c, "p1"), k, (size_t)kl, v, bin_value(i, v));
    }
    pc_cache_destroy(c);
    /* and back into a fresh store: one collection, then all */
    assert_int_equal(pc_odbc_import(o, s2, "p2", &r), 0);
    assert_int_equal(r.rows, 2);
    assert_int_equal(pc_odbc_import(o, s2, NULL, &r), 0);
    assert_true(r.rows >= 5002);
    void *got = NULL;
    size_t gl = 0;
    pc_store_record rec;
    assert_int_equal(pc_store_get(s2, "p2", "n", 1, 0, &got, &gl, &rec), 0);
    assert_int_equal(rec.is_counter, 1);
    assert_true(rec.expires_ms > 0);
    assert_int_equal(gl, 8);
    assert_int_equal(((unsigned char *)got)[0], 0xfb); /* -5 little-endian */
    free(got);
    assert_int_equal(pc_store_get(s2, "p2", "s", 1, 0, &got, &gl, NULL), 0);
    assert_int_equal(gl, 2);
    assert_memory_equal(got, "\0\0", 2);
    free(got);
    for (unsigned i = 0; i < 5000; i += 101) {
        int kl = snprintf(k, sizeof k, "e%u", i);
        size_t vl = bin_value(i, v);
        assert_int_equal(pc_store_get(s2, "p1", k, (size_t)kl, 0, &got, &gl, NULL), 0);
        assert_int_equal(gl, vl);
        if (vl > 0)
            assert_memory_equal(got, v, vl);
        free(got);
    }
    assert_int_equal(pc_odbc_import(o, s2, "never-saved", &r), PC_ENOTFOUND);
    pc_odbc_close(o);
    pc_store_close(s);
    pc_store_close(s2);
}

/* ---- db_url through the persistence policies ------------------------------- */
static void t_persist(void **state)
{
    const char *target = *state;
    if (target[0] == '\0')
        pc_skip("MariaDB: the server or Connector/ODBC is not installed");
    pc_cache *c = mk_cache();
    pc_persist_config pc;
    pc_persist_config_init(&pc);
    pc.db_url = target;
    pc.db_mode = 2;
    pc.persist_collections = "b";
    pc.sql_backend = pc_odbc_persist_backend();
    pc_persist *p = NULL;
    char err[512];
    int rc = pc_persist_open(c, &pc, &p, err, sizeof err);
    if (rc != 0)
        fail_msg("pc_persist_open: %s: %s", pc_store_strerror(rc), err);
    assert_null(pc_persist_store(p));
    assert_int_equal(pc_persist_startup(p), 0);
    for (int i = 0; i < 100; i++) {
        char k[16];
        snprintf(k, sizeof k, "s%d", i);
        assert_int_equal(pc_set(pc_fx_coll(c, "b"), k, strlen(k), "x", 1, 0, 0), 0);
    }
    /* perf_save / perf_load / perf_stats through the command layer */
    pc_mgmt *m = NULL;
    assert_int_equal(pc_mgmt_create(c, "b", &m), 0);
    assert_int_equal(pc_persist_register(p, m), 0);
    pc_json *j = NULL;
    assert_int_equal(pc_json_create(&j), 0);
    pc_mgmt_err merr;
    const char *text;
    size_t len;
    assert_int_equal(pc_mgmt_run_line(m, "perf_save b", 11, pc_json_ops(), j, &merr), 0);
    assert_int_equal(pc_json_text(j, &text, &len), 0);
    assert_non_null(strstr(text, "\"saved\":100"));
    assert_null(strstr(text, ODBC_TEST_PW));
    uint64_t n = 0;
    assert_int_equal(pc_del_glob(pc_fx_coll(c, "b"), "*", 1, &n), 0);
    pc_json_reset(j);
    assert_int_equal(pc_mgmt_run_line(m, "perf_load b", 11, pc_json_ops(), j, &merr), 0);
    assert_int_equal(pc_json_text(j, &text, &len), 0);
    assert_non_null(strstr(text, "\"loaded\":100"));
    pc_json_reset(j);
    assert_int_equal(pc_mgmt_run_line(m, "perf_stats b", 12, pc_json_ops(), j, &merr), 0);
    assert_int_equal(pc_json_text(j, &text, &len), 0);
    assert_non_null(strstr(text, "\"last_save_entries\":100"));
    pc_json_destroy(j);
    pc_mgmt_destroy(m);
    /* db_mode 2: the shutdown saves, a restart with db_mode 1 loads */
    assert_int_equal(pc_set(pc_fx_coll(c, "b"), "late", 4, "write", 5, 0, 0), 0);
    assert_int_equal(pc_persist_shutdown(p), 0);
    pc_persist_close(p);
    pc_cache_destroy(c);
    c = mk_cache();
    pc.db_mode = 1;
    assert_int_equal(pc_persist_open(c, &pc, &p, err, sizeof err), 0);
    assert_int_equal(pc_persist_startup(p), 0);
    expect_bytes(pc_fx_coll(c, "b"), "late", 4, "write", 5);
    expect_bytes(pc_fx_coll(c, "b"), "s42", 3, "x", 1);
    pc_persist_close(p);
    /* perf_save / perf_load [store]: from an LMDB-configured host to this
     * SQL target and back, for the call only */
    {
        pc_persist_config lc;
        pc_persist_config_init(&lc);
        char ldir[600], line[900];
        snprintf(ldir, sizeof ldir, "lmdb://%s/persist-lmdb-%d", odbc_env_dir(), (int)getpid());
        lc.db_url = ldir;
        lc.sql_backend = pc_odbc_persist_backend();
        lc.store_sql_targets = 1; /* an SQL [store] is refused unless the host allows it */
        pc_persist *lp = NULL;
        assert_int_equal(pc_persist_open(c, &lc, &lp, err, sizeof err), 0);
        pc_mgmt *lm = NULL;
        assert_int_equal(pc_mgmt_create(c, "b", &lm), 0);
        assert_int_equal(pc_persist_register(lp, lm), 0);
        pc_json *lj = NULL;
        assert_int_equal(pc_json_create(&lj), 0);
        pc_odbc *o = NULL;
        uint64_t g0 = 0, g1 = 0;
        assert_int_equal(pc_odbc_open(target, NULL, &o, err, sizeof err), 0);
        assert_int_equal(pc_odbc_generation(o, "b", &g0), 0);
        int ln = snprintf(line, sizeof line, "perf_save collection=b store=%s", target);
        assert_int_equal(pc_mgmt_run_line(lm, line, (size_t)ln, pc_json_ops(), lj, &merr), 0);
        assert_int_equal(pc_json_text(lj, &text, &len), 0);
        assert_non_null(strstr(text, "\"saved\":101"));
        assert_null(strstr(text, ODBC_TEST_PW));
        assert_int_equal(pc_odbc_generation(o, "b", &g1), 0);
        assert_int_equal(g1, g0 + 1);
        pc_odbc_close(o);
        assert_int_equal(pc_del_glob(pc_fx_coll(c, "b"), "*", 1, &n), 0);
        pc_json_reset(lj);
        ln = snprintf(line, sizeof line, "perf_load collection=b store=%s", target);
        assert_int_equal(pc_mgmt_run_line(lm, line, (size_t)ln, pc_json_ops(), lj, &merr), 0);
        assert_int_equal(pc_json_text(lj, &text, &len), 0);
        assert_non_null(strstr(text, "\"loaded\":101"));
        expect_bytes(pc_fx_coll(c, "b"), "late", 4, "write", 5);
        pc_json_destroy(lj);
        pc_mgmt_destroy(lm);
        pc_persist_close(lp);
    }
    /* a journal with an SQL store is refused, naming why */
    pc.journal = "b=always";
    assert_int_equal(pc_persist_open(c, &pc, &p, err, sizeof err), PC_ECONFIG);
    assert_non_null(strstr(err, "journal"));
    /* without the backend, an odbc db_url is refused, without echoing it */
    pc.journal = NULL;
    pc.sql_backend = NULL;
    assert_int_equal(pc_persist_open(c, &pc, &p, err, sizeof err), PC_EURL);
    assert_non_null(strstr(err, "not available"));
    assert_null(strstr(err, ODBC_TEST_PW));
    pc_cache_destroy(c);
}

static char t_sqlite[600], t_pg[600], t_my[600];

#define PER_DRIVER(name, target)                                                                   \
    cmocka_unit_test_prestate(t_roundtrip_mixed, target),                                          \
        cmocka_unit_test_prestate(t_shapes, target), cmocka_unit_test_prestate(t_fork, target),    \
        cmocka_unit_test_prestate(t_roundtrip_100k, target),                                       \
        cmocka_unit_test_prestate(t_text_values, target),                                          \
        cmocka_unit_test_prestate(t_empty, target),                                                \
        cmocka_unit_test_prestate(t_constraint_rollback, target),                                  \
        cmocka_unit_test_prestate(t_pipeline_failure, target),                                     \
        cmocka_unit_test_prestate(t_export_import, target),                                        \
        cmocka_unit_test_prestate(t_persist, target)

/* ctest runs the MariaDB group as a test of its own (test_odbc_mariadb:
 * --only the group's cases, test_odbc --skip them), so MariaDB is started
 * only when a case of it is selected, and its absence shows as that test
 * Skipped. */
int main(int argc, char **argv)
{
    pc_test_args(argc, argv);
    const struct CMUnitTest sqlite[] = {PER_DRIVER("sqlite", t_sqlite)};
    const struct CMUnitTest pg[] = {PER_DRIVER("postgresql", t_pg)};
    const struct CMUnitTest my[] = {PER_DRIVER("mariadb", t_my)};
    int rc = odbc_env_start("test_odbc", PC_SELECTED("mariadb", my) > 0);
    if (rc != 0)
        return rc;
    snprintf(t_sqlite, sizeof t_sqlite, "%s", odbc_env_sqlite());
    snprintf(t_pg, sizeof t_pg, "%s", odbc_env_pg());
    if (odbc_env_have_mariadb())
        snprintf(t_my, sizeof t_my, "%s", odbc_env_mariadb());
    int failed = PC_RUN_GROUP("sqlite", sqlite, NULL, NULL);
    failed += PC_RUN_GROUP("postgresql", pg, NULL, NULL);
    failed += PC_RUN_GROUP("mariadb", my, NULL, NULL);
    return pc_test_exit(failed);
}
