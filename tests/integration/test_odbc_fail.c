/*
 * test_odbc_fail.c - the ODBC exporter when things go wrong, on real
 * servers the test starts (tests/support/odbc_servers.sh):
 *   - PostgreSQL stopped (immediate shutdown) in the middle of a save, and
 *     the connection killed in the middle of a save (PostgreSQL, MariaDB):
 *     the save fails and, after a reconnect, the previous rows and
 *     generation are all there; with the pipeline on and off, no thread
 *     left behind;
 *   - the batch writer freed with a batch in flight on its sender thread;
 *   - a progress callback that aborts: rolled back, its value returned;
 *   - an export of a whole store failing on its second collection: the
 *     first one's SQL rows are untouched too (one transaction);
 *   - bad input: an unknown DSN, a wrong password (the message names the
 *     failure and never holds the password), tables missing without the
 *     create option (nothing created), a read-only database (the save and
 *     perf_save fail with SQLSTATE 25006, nothing changed), malformed URLs;
 *   - password masking of connection strings.
 * The tests run in the order listed: t_missing_tables needs the pcachero
 * database before t_readonly creates its tables.
 */
#include "odbc_writer.h" /* t_writer_freed_midbatch: the writer itself */
#include "odbc_testenv.h"
#include "pcache.h"
#include "pcache_mgmt.h"
#include "pcache_odbc.h"
#include "pcache_persist.h"
#include "pcache_store.h"
#include "pcache_storecheck.h"

#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pc_fixture.h" /* after cmocka.h: they assert */
#include "pc_testrun.h"

#define WRONG_PW "Wrong-Pass-987"

static pc_cache *mk_cache(void)
{
    pc_config cfg;
    pc_fx_config(&cfg, "a;b;c", 96);
    cfg.lock_memory = 0;
    return pc_fx_create(&cfg);
}

static pc_odbc *open_pipe(const char *target, unsigned flags, pc_odbc_progress_fn fn, void *ctx,
                          int pipeline)
{
    pc_odbc_config cfg;
    pc_odbc_config_init(&cfg);
    cfg.flags = flags;
    cfg.pipeline = pipeline;
    cfg.progress = fn;
    cfg.progress_ctx = ctx;
    pc_odbc *o = NULL;
    char err[1024];
    int rc = pc_odbc_open(target, &cfg, &o, err, sizeof err);
    if (rc != 0)
        fail_msg("pc_odbc_open(%s): %s: %s", target, pc_store_strerror(rc), err);
    return o;
}

static pc_odbc *open_with(const char *target, unsigned flags, pc_odbc_progress_fn fn, void *ctx)
{
    return open_pipe(target, flags, fn, ctx, PC_ODBC_PIPELINE_DEFAULT);
}

static void fill(pc_coll *co, const char *prefix, unsigned n)
{
    char k[32], v[64];
    for (unsigned i = 0; i < n; i++) {
        int kl = snprintf(k, sizeof k, "%s%u", prefix, i);
        int vl = snprintf(v, sizeof v, "%s-value-%u", prefix, i);
        assert_int_equal(pc_set(co, k, (size_t)kl, v, (size_t)vl, 0, 0), 0);
    }
}

/* Every key prefix0..n-1 holds its value, and nothing else is there. */
static void expect_exactly(const char *target, const char *name, const char *prefix, unsigned n,
                           uint64_t gen)
{
    pc_odbc *o = open_with(target, 0, NULL, NULL);
    pc_cache *c = mk_cache();
    pc_coll *co = pc_fx_coll(c, name);
    pc_odbc_result l;
    assert_int_equal(pc_odbc_load(o, co, &l), 0);
    assert_int_equal(l.rows, n);
    assert_true(l.generation == gen);
    char k[32], v[64];
    for (unsigned i = 0; i < n; i++) {
        int kl = snprintf(k, sizeof k, "%s%u", prefix, i);
        int vl = snprintf(v, sizeof v, "%s-value-%u", prefix, i);
        void *got = NULL;
        size_t gl = 0;
        assert_int_equal(pc_get(co, k, (size_t)kl, &got, &gl, NULL), 0);
        assert_int_equal(gl, (size_t)vl);
        assert_memory_equal(got, v, gl);
        free(got);
    }
    pc_cache_destroy(c);
    pc_odbc_close(o);
}

/* ---- failures in the middle of a save ---------------------------------- */
struct injector {
    const char *action; /* odbc_servers.sh arguments run at call `at` */
    unsigned at, calls;
};
static int inject(void *ctx, const char *name, uint64_t done, uint64_t total)
{
    struct injector *in = ctx;
    (void)name;
    (void)done;
    (void)total;
    if (++in->calls == in->at)
        assert_int_equal(odbc_env_sh("%s '%s'", in->action, odbc_env_dir()), 0);
    return 0;
}

/* Once with the pipeline on (the failing batch is executed by the sender
 * thread) and once off. */
static void midsave(const char *target, const char *action, bool restart, int pipeline)
{
    pc_odbc *o = open_with(target, PC_ODBC_CREATE, NULL, NULL);
    pc_cache *c = mk_cache();
    fill(pc_fx_coll(c, "a"), "old", 5000);
    pc_odbc_result r;
    assert_int_equal(pc_odbc_save(o, pc_fx_coll(c, "a"), &r), 0);
    uint64_t gen = r.generation;
    pc_odbc_close(o);
    pc_cache_destroy(c);

    struct injector in = {action, 3, 0};
    o = open_pipe(target, 0, inject, &in, pipeline);
    c = mk_cache();
    fill(pc_fx_coll(c, "a"), "new", 50000);
    int threads = odbc_env_threads();
    int rc = pc_odbc_save(o, pc_fx_coll(c, "a"), &r);
    printf("# %s mid-save (%s, pipeline %s): %s: %s\n", action,
           pc_odbc_dialect_name(pc_odbc_dialect(o)), pipeline == PC_ODBC_PIPELINE_ON ? "on" : "off",
           pc_store_strerror(rc), pc_odbc_errmsg(o));
    assert_int_equal(odbc_env_threads(), threads);
    assert_true(in.calls >= 3);
    assert_int_equal(rc, PC_EIO);
    assert_non_null(strchr(pc_odbc_errmsg(o), '['));
    assert_null(strstr(pc_odbc_errmsg(o), ODBC_TEST_PW));
    pc_odbc_close(o);
    pc_cache_destroy(c);
    if (restart)
        assert_int_equal(odbc_env_sh("pg_start '%s'", odbc_env_dir()), 0);
    expect_exactly(target, "a", "old", 5000, gen);
}

static void t_pg_stopped_midsave(void **state)
{
    (void)state;
    midsave(odbc_env_pg(), "pg_stop", true, PC_ODBC_PIPELINE_ON);
    midsave(odbc_env_pg(), "pg_stop", true, PC_ODBC_PIPELINE_OFF);
}

static void t_pg_killed_midsave(void **state)
{
    (void)state;
    midsave(odbc_env_pg(), "pg_kill", false, PC_ODBC_PIPELINE_ON);
    midsave(odbc_env_pg(), "pg_kill", false, PC_ODBC_PIPELINE_OFF);
}

static void t_my_killed_midsave(void **state)
{
    (void)state;
    if (!odbc_env_have_mariadb())
        pc_skip("MariaDB: the server or Connector/ODBC is not installed");
    midsave(odbc_env_mariadb(), "my_kill", false, PC_ODBC_PIPELINE_ON);
    midsave(odbc_env_mariadb(), "my_kill", false, PC_ODBC_PIPELINE_OFF);
}

/* White box (odbc_int.h): a writer freed with a batch in flight on the
 * sender thread - the path of a save whose walk fails for a reason of its
 * own - joins the thread before its statements go; the caller's rollback
 * then leaves the previous rows, and the handle works on. */
static void t_writer_freed_midbatch(void **state)
{
    (void)state;
    const char *t = odbc_env_pg();
    pc_odbc *o = open_with(t, PC_ODBC_CREATE, NULL, NULL);
    pc_cache *c = mk_cache();
    fill(pc_fx_coll(c, "c"), "old", 300);
    pc_odbc_result r;
    assert_int_equal(pc_odbc_save(o, pc_fx_coll(c, "c"), &r), 0);
    pc_odbc_close(o);
    for (int round = 0; round < 3; round++) {
        o = open_pipe(t, 0, NULL, NULL, PC_ODBC_PIPELINE_ON);
        int threads = odbc_env_threads();
        assert_int_equal(pc_odbc_enter(o), 0);
        assert_int_equal(pc_odbc_begin(o, false), 0);
        pc_odbc_writer *w = NULL;
        assert_int_equal(pc_odbc_writer_new(o, &w), 0);
        assert_int_equal(pc_odbc_writer_begin(w, "c", 0), 0);
        char k[32];
        /* one full PACKED batch (5000 rows) handed to the sender, a few
         * more rows in the other; round 2 frees while the first executes */
        unsigned n = round == 0 ? 4999 : round == 1 ? 5003 : 10007;
        for (unsigned i = 0; i < n; i++) {
            int kl = snprintf(k, sizeof k, "new%u", i);
            assert_int_equal(pc_odbc_writer_add(w, k, (size_t)kl, "v", 1, 0, false), 0);
        }
        if (round == 1)
            pc_odbc_writer_stop(w); /* what save does on its error path */
        pc_odbc_writer_free(w);
        assert_int_equal(odbc_env_threads(), threads);
        assert_int_equal(pc_odbc_end(o, false), 0);
        pc_odbc_close(o);
        expect_exactly(t, "c", "old", 300, r.generation);
    }
    pc_cache_destroy(c);
}

static int abort_at_2(void *ctx, const char *name, uint64_t done, uint64_t total)
{
    (void)ctx;
    (void)name;
    (void)total;
    return done >= 2 ? 42 : 0;
}

static void t_progress_abort(void **state)
{
    (void)state;
    const char *t = odbc_env_sqlite();
    pc_odbc *o = open_with(t, PC_ODBC_CREATE, NULL, NULL);
    pc_cache *c = mk_cache();
    fill(pc_fx_coll(c, "b"), "old", 100);
    pc_odbc_result r;
    assert_int_equal(pc_odbc_save(o, pc_fx_coll(c, "b"), &r), 0);
    pc_odbc_close(o);
    o = open_pipe(t, 0, abort_at_2, NULL, PC_ODBC_PIPELINE_ON);
    fill(pc_fx_coll(c, "b"), "new", 100);
    int threads = odbc_env_threads();
    assert_int_equal(pc_odbc_save(o, pc_fx_coll(c, "b"), NULL), 42);
    assert_int_equal(odbc_env_threads(), threads);
    pc_odbc_close(o);
    pc_cache_destroy(c);
    expect_exactly(t, "b", "old", 100, r.generation);
}

/* Export of a whole store is one SQL transaction: a failure on the second
 * collection leaves the first one's previous rows and generation too. */
static void t_export_atomic(void **state)
{
    (void)state;
    const char *t = odbc_env_sqlite();
    char sdir[300];
    snprintf(sdir, sizeof sdir, "%s/store-XXXXXX", odbc_env_dir());
    assert_non_null(mkdtemp(sdir));
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    pc_store *s = NULL;
    assert_int_equal(pc_store_open_checked(sdir, &sc, &s, NULL, 0), 0);
    pc_cache *c = mk_cache();
    fill(pc_fx_coll(c, "a"), "old", 300);
    fill(pc_fx_coll(c, "b"), "old", 300);
    pc_odbc *o = open_with(t, PC_ODBC_CREATE, NULL, NULL);
    pc_odbc_result ra, rb;
    assert_int_equal(pc_odbc_save(o, pc_fx_coll(c, "a"), &ra), 0);
    assert_int_equal(pc_odbc_save(o, pc_fx_coll(c, "b"), &rb), 0);
    /* the store holds new rows for a (saved first) and b, b with a poisoned key */
    fill(pc_fx_coll(c, "a"), "new", 300);
    fill(pc_fx_coll(c, "b"), "new", 300);
    assert_int_equal(pc_set(pc_fx_coll(c, "b"), "poison", 6, "x", 1, 0, 0), 0);
    assert_int_equal(pc_store_save(s, pc_fx_coll(c, "a"), NULL, NULL), 0);
    assert_int_equal(pc_store_save(s, pc_fx_coll(c, "b"), NULL, NULL), 0);
    assert_int_equal(odbc_env_sql(t, "CREATE TRIGGER pcache_poison BEFORE INSERT ON "
                                     "pcache_entries WHEN NEW.pkey = X'706F69736F6E' BEGIN "
                                     "SELECT RAISE(ABORT, 'poisoned key'); END"),
                     0);
    int rc = pc_odbc_export(o, s, NULL, NULL);
    assert_int_equal(odbc_env_sql(t, "DROP TRIGGER pcache_poison"), 0);
    printf("# export with a poisoned second collection: %s\n", pc_odbc_errmsg(o));
    assert_int_equal(rc, PC_EIO);
    assert_non_null(strstr(pc_odbc_errmsg(o), "\"b\""));
    pc_odbc_close(o);
    pc_cache_destroy(c);
    pc_store_close(s);
    expect_exactly(t, "a", "old", 300, ra.generation);
    expect_exactly(t, "b", "old", 300, rb.generation);
}

/* ---- bad input ------------------------------------------------------------ */
static void t_unknown_dsn(void **state)
{
    (void)state;
    pc_odbc *o = NULL;
    char err[1024];
    assert_int_equal(pc_odbc_open("odbc://no_such_dsn", NULL, &o, err, sizeof err), PC_ESTORE);
    assert_null(o);
    printf("# unknown DSN: %s\n", err);
    assert_non_null(strstr(err, "[IM002]"));
    assert_non_null(strstr(err, "no_such_dsn"));
}

static void t_wrong_password(void **state)
{
    (void)state;
    const char *urls[] = {"odbc:DSN=pcache_pg;UID=pcache;PWD=" WRONG_PW,
                          "DSN=pcache_pg;UID=pcache;Password={" WRONG_PW ";x}"};
    for (size_t i = 0; i < 2; i++) {
        pc_odbc *o = NULL;
        char err[1024];
        assert_int_equal(pc_odbc_open(urls[i], NULL, &o, err, sizeof err), PC_ESTORE);
        printf("# wrong password: %s\n", err);
        assert_non_null(strstr(err, "password authentication failed"));
        assert_non_null(strstr(err, "***"));
        assert_null(strstr(err, WRONG_PW));
        assert_null(strstr(err, "Pass-987"));
    }
}

static void t_missing_tables(void **state)
{
    (void)state;
    char sqlite[600];
    snprintf(sqlite, sizeof sqlite, "odbc:DRIVER=pcache SQLite3;Database=%s/fresh.sqlite",
             odbc_env_dir());
    const char *targets[] = {sqlite, "DSN=pcache_pg_ro;UID=pcache;PWD=" ODBC_TEST_PW};
    for (size_t i = 0; i < 2; i++) {
        pc_odbc *o = NULL;
        char err[1024];
        assert_int_equal(pc_odbc_open(targets[i], NULL, &o, err, sizeof err), PC_ESTORE);
        printf("# missing tables: %s\n", err);
        assert_non_null(strstr(err, "does not exist"));
        assert_non_null(strstr(err, "create"));
        assert_null(strstr(err, ODBC_TEST_PW));
        /* nothing was created: the tables are still missing */
        assert_int_equal(odbc_env_sql(targets[i], "SELECT 1 FROM pcache_entries"), -1);
        assert_int_equal(odbc_env_sql(targets[i], "SELECT 1 FROM pcache_generations"), -1);
    }
}

static void t_readonly(void **state)
{
    (void)state;
    const char *t = "DSN=pcache_pg_ro;UID=pcache;PWD=" ODBC_TEST_PW;
    pc_odbc *o = open_with(t, PC_ODBC_CREATE, NULL, NULL);
    pc_cache *c = mk_cache();
    fill(pc_fx_coll(c, "c"), "old", 10);
    pc_odbc_result r;
    assert_int_equal(pc_odbc_save(o, pc_fx_coll(c, "c"), &r), 0);
    pc_odbc_close(o);
    assert_int_equal(odbc_env_sh("psql '%s' pcachero 'ALTER DATABASE pcachero SET "
                                 "default_transaction_read_only = on'",
                                 odbc_env_dir()),
                     0);
    o = open_with(t, 0, NULL, NULL);
    fill(pc_fx_coll(c, "c"), "new", 20);
    assert_int_equal(pc_odbc_save(o, pc_fx_coll(c, "c"), NULL), PC_EIO);
    printf("# read-only database: %s\n", pc_odbc_errmsg(o));
    assert_non_null(strstr(pc_odbc_errmsg(o), "[25006]"));
    pc_odbc_close(o);
    /* the same through perf_save: the command's error carries the SQLSTATE */
    pc_persist_config pc;
    pc_persist_config_init(&pc);
    pc.db_url = t;
    pc.sql_backend = pc_odbc_persist_backend();
    pc_persist *p = NULL;
    char err[512];
    assert_int_equal(pc_persist_open(c, &pc, &p, err, sizeof err), 0);
    pc_mgmt *m = NULL;
    assert_int_equal(pc_mgmt_create(c, "c", &m), 0);
    assert_int_equal(pc_persist_register(p, m), 0);
    pc_json *j = NULL;
    assert_int_equal(pc_json_create(&j), 0);
    pc_mgmt_err merr;
    assert_int_equal(pc_mgmt_run_line(m, "perf_save c", 11, pc_json_ops(), j, &merr), PC_EIO);
    printf("# perf_save on a read-only database: %s\n", merr.msg);
    assert_non_null(strstr(merr.msg, "25006"));
    assert_non_null(strstr(merr.msg, "previous snapshot stands"));
    assert_null(strstr(merr.msg, ODBC_TEST_PW));
    pc_json_destroy(j);
    pc_mgmt_destroy(m);
    pc_persist_close(p);
    pc_cache_destroy(c);
    expect_exactly(t, "c", "old", 10, r.generation);
}

static void t_malformed(void **state)
{
    (void)state;
    const char *bad[] = {"odbc://", "odbc:", "odbc:no-equals-sign", "odbc://a;b", "odbc://x=y"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pc_odbc *o = NULL;
        char err[512] = "";
        assert_int_equal(pc_odbc_open(bad[i], NULL, &o, err, sizeof err), PC_EURL);
        assert_null(o);
        assert_non_null(strstr(err, "odbc://DSN"));
    }
    assert_int_equal(pc_odbc_is_url("odbc://x"), 1);
    assert_int_equal(pc_odbc_is_url("driver={SQLite3};Database=/x"), 1);
    assert_int_equal(pc_odbc_is_url("lmdb:///x"), 0);
    assert_int_equal(pc_odbc_is_url("/var/lib/pcache"), 0);
}

static void t_redact(void **state)
{
    (void)state;
    char out[256];
    pc_odbc_redact("odbc:DSN=x;UID=u;PWD=secret", out, sizeof out);
    assert_string_equal(out, "odbc:DSN=x;UID=u;PWD=***");
    pc_odbc_redact("DRIVER={My Driver};password={se;cr}}et};Server=h", out, sizeof out);
    assert_string_equal(out, "DRIVER={My Driver};password=***;Server=h");
    pc_odbc_redact("odbc://dsn", out, sizeof out);
    assert_string_equal(out, "odbc://dsn");
    pc_odbc_redact("DSN=x;pwd=abc", out, 12); /* truncated, still terminated */
    assert_int_equal(strlen(out), 11);
    assert_null(strstr(out, "abc"));
}

/* ctest runs t_my_killed_midsave as a test of its own (test_odbc_fail_mariadb:
 * --only it, the other one --skip it), so MariaDB is started only when it
 * is selected, and its absence shows as that test Skipped. */
int main(int argc, char **argv)
{
    pc_test_args(argc, argv);
    int rc =
        odbc_env_start("test_odbc_fail", pc_test_selected("test_odbc_fail", "t_my_killed_midsave"));
    if (rc != 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_redact),
        cmocka_unit_test(t_malformed),
        cmocka_unit_test(t_unknown_dsn),
        cmocka_unit_test(t_wrong_password),
        cmocka_unit_test(t_missing_tables),
        cmocka_unit_test(t_readonly),
        cmocka_unit_test(t_progress_abort),
        cmocka_unit_test(t_export_atomic),
        cmocka_unit_test(t_pg_killed_midsave),
        cmocka_unit_test(t_my_killed_midsave),
        cmocka_unit_test(t_pg_stopped_midsave),
        cmocka_unit_test(t_writer_freed_midbatch),
    };
    return pc_test_exit(PC_RUN_GROUP("test_odbc_fail", tests, NULL, NULL));
}
