/*
 * test_persist.c - the persistence policies (storage/persist/persist.c) as a host
 * uses them: db_mode 2 survives a restart through the shutdown save;
 * db_mode 1 with an `always` journal survives a restart without any save
 * (the journal replays on top of the last snapshot); perf_save / perf_load
 * through the command layer report counts and durations; bad policies are
 * refused with a message naming the problem, before anything is opened.
 * Each "restart" is a new cache (a new shared region) on the same store.
 */
#include "pcache.h"
#include "pcache_mgmt.h"
#include "pcache_persist.h"
#include "pcache_store.h"
#include "pcache_storecheck.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pc_fixture.h" /* after cmocka.h: it asserts */

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/pcache-persist-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static pc_cache *mk_cache(void)
{
    return pc_fx_cache("a;b", 32);
}

static pc_persist *mk_persist(pc_cache *c, int mode, const char *journal)
{
    pc_persist_config pc;
    pc_persist_config_init(&pc);
    char url[300];
    snprintf(url, sizeof url, "lmdb://%s", dir);
    pc.db_url = url;
    pc.db_mode = mode;
    pc.persist_collections = "a,b";
    pc.journal = journal;
    pc_persist *p = NULL;
    char err[256];
    int rc = pc_persist_open(c, &pc, &p, err, sizeof err);
    if (rc != 0)
        fail_msg("pc_persist_open: %s (%s)", pc_store_strerror(rc), err);
    assert_int_equal(pc_persist_startup(p), 0);
    return p;
}

static void expect(pc_coll *co, const char *k, const char *v)
{
    char buf[64];
    size_t vl = 0, need = 0;
    int rc = pc_get_buf(co, k, strlen(k), buf, sizeof buf, &vl, &need, NULL);
    if (rc != 0)
        fail_msg("key %s: %s", k, pc_store_strerror(rc));
    assert_int_equal(vl, strlen(v));
    assert_memory_equal(buf, v, vl);
}

static void mode2_survives_restart_by_shutdown_save(void **state)
{
    (void)state;
    pc_cache *c = mk_cache();
    pc_persist *p = mk_persist(c, 2, NULL);
    assert_int_equal(pc_set(pc_fx_coll(c, "a"), "k1", 2, "v1", 2, 0, 0), 0);
    assert_int_equal(pc_set(pc_fx_coll(c, "b"), "k2", 2, "v2", 2, 3600000, 0), 0);
    assert_int_equal(pc_add(pc_fx_coll(c, "a"), "ctr", 3, 41, 0, NULL), 0);
    assert_int_equal(pc_set(pc_fx_coll(c, "a"), "gone", 4, "x", 1, 50, 0), 0);
    usleep(100000); /* "gone" expires: not saved */
    assert_int_equal(pc_persist_shutdown(p), 0);
    pc_persist_close(p);
    pc_cache_destroy(c);

    c = mk_cache();
    p = mk_persist(c, 1, NULL);
    expect(pc_fx_coll(c, "a"), "k1", "v1");
    expect(pc_fx_coll(c, "b"), "k2", "v2");
    int64_t ctr = 0;
    assert_int_equal(pc_get_counter(pc_fx_coll(c, "a"), "ctr", 3, &ctr), 0);
    assert_int_equal(ctr, 41);
    pc_meta m;
    assert_int_equal(pc_probe(pc_fx_coll(c, "b"), "k2", 2, &m), 0);
    assert_true(m.ttl_ms > 3500000 && m.ttl_ms <= 3600000); /* TTL survived, absolute */
    assert_int_equal(pc_probe(pc_fx_coll(c, "a"), "gone", 4, NULL), PC_ENOTFOUND);
    pc_persist_close(p);
    pc_cache_destroy(c);
}

static void journal_always_survives_restart_without_save(void **state)
{
    (void)state;
    pc_cache *c = mk_cache();
    pc_persist *p = mk_persist(c, 1, "a=always");
    assert_int_equal(pc_persist_save_coll(p, pc_fx_coll(c, "a"), NULL), 0); /* an empty snapshot */
    char k[32], v[32];
    for (int i = 0; i < 500; i++) {
        snprintf(k, sizeof k, "j%d", i);
        snprintf(v, sizeof v, "val%d", i);
        assert_int_equal(pc_set(pc_fx_coll(c, "a"), k, strlen(k), v, strlen(v), 0, 0), 0);
    }
    assert_int_equal(pc_remove(pc_fx_coll(c, "a"), "j7", 2), 0);
    assert_int_equal(pc_add(pc_fx_coll(c, "a"), "hits", 4, 5, 0, NULL), 0);
    /* no shutdown save: as after kill -9 */
    pc_persist_close(p);
    pc_cache_destroy(c);

    c = mk_cache();
    p = mk_persist(c, 1, "a=always");
    for (int i = 0; i < 500; i++) {
        snprintf(k, sizeof k, "j%d", i);
        snprintf(v, sizeof v, "val%d", i);
        if (i == 7)
            assert_int_equal(pc_probe(pc_fx_coll(c, "a"), k, strlen(k), NULL), PC_ENOTFOUND);
        else
            expect(pc_fx_coll(c, "a"), k, v);
    }
    int64_t hits = 0;
    assert_int_equal(pc_get_counter(pc_fx_coll(c, "a"), "hits", 4, &hits), 0);
    assert_int_equal(hits, 5);
    pc_persist_close(p);
    pc_cache_destroy(c);
}

static void perf_save_and_perf_load_commands(void **state)
{
    (void)state;
    pc_cache *c = mk_cache();
    pc_persist *p = mk_persist(c, 0, NULL);
    pc_mgmt *m = NULL;
    assert_int_equal(pc_mgmt_create(c, "a", &m), 0);
    assert_int_equal(pc_persist_register(p, m), 0);
    pc_json *j = NULL;
    assert_int_equal(pc_json_create(&j), 0);
    pc_mgmt_err err;
    for (int i = 0; i < 100; i++) {
        char k[16];
        snprintf(k, sizeof k, "s%d", i);
        assert_int_equal(pc_set(pc_fx_coll(c, "a"), k, strlen(k), "x", 1, 0, 0), 0);
    }
    const char *text;
    size_t len;
    assert_int_equal(pc_mgmt_run_line(m, "perf_save a", 11, pc_json_ops(), j, &err), 0);
    assert_int_equal(pc_json_text(j, &text, &len), 0);
    assert_non_null(strstr(text, "\"collections\":1"));
    assert_non_null(strstr(text, "\"saved\":100"));
    assert_non_null(strstr(text, "\"duration\":"));
    assert_non_null(strstr(text, "\"rate\":"));
    uint64_t n = 0;
    assert_int_equal(pc_del_glob(pc_fx_coll(c, "a"), "*", 1, &n), 0);
    assert_int_equal(n, 100);
    pc_json_reset(j);
    assert_int_equal(pc_mgmt_run_line(m, "perf_load collection=a", 22, pc_json_ops(), j, &err), 0);
    assert_int_equal(pc_json_text(j, &text, &len), 0);
    assert_non_null(strstr(text, "\"loaded\":100"));
    assert_non_null(strstr(text, "\"skipped_expired\":0"));
    expect(pc_fx_coll(c, "a"), "s42", "x");
    pc_json_reset(j);
    assert_int_equal(pc_mgmt_run_line(m, "perf_stats a", 12, pc_json_ops(), j, &err), 0);
    assert_int_equal(pc_json_text(j, &text, &len), 0);
    assert_non_null(strstr(text, "\"last_save_entries\":100"));
    assert_non_null(strstr(text, "\"last_load_entries\":100"));
    /* an unknown collection changes nothing */
    pc_json_reset(j);
    assert_int_not_equal(pc_mgmt_run_line(m, "perf_save nope", 14, pc_json_ops(), j, &err), 0);
    assert_non_null(strstr(err.msg, "nope"));
    pc_json_destroy(j);
    pc_mgmt_destroy(m);
    pc_persist_close(p);
    pc_cache_destroy(c);
}

/* perf_save / perf_load [store]: another store for the call only - the
 * configured one is untouched, the other holds the snapshot, a load from it
 * restores; the configured store named explicitly is the configured path;
 * an SQL target without a backend and an unknown scheme are refused
 * without echoing the URL's password. */
static void perf_save_and_load_to_another_store(void **state)
{
    (void)state;
    pc_cache *c = mk_cache();
    pc_persist *p = mk_persist(c, 0, NULL);
    pc_mgmt *m = NULL;
    assert_int_equal(pc_mgmt_create(c, "a", &m), 0);
    assert_int_equal(pc_persist_register(p, m), 0);
    pc_json *j = NULL;
    assert_int_equal(pc_json_create(&j), 0);
    pc_mgmt_err err;
    for (int i = 0; i < 50; i++) {
        char k[16];
        snprintf(k, sizeof k, "o%d", i);
        assert_int_equal(pc_set(pc_fx_coll(c, "a"), k, strlen(k), "y", 1, 0, 0), 0);
    }
    char other[400], line[600];
    snprintf(other, sizeof other, "%s/other", dir);
    int n = snprintf(line, sizeof line, "perf_save collection=a store=lmdb://%s", other);
    const char *text;
    size_t len;
    assert_int_equal(pc_mgmt_run_line(m, line, (size_t)n, pc_json_ops(), j, &err), 0);
    assert_int_equal(pc_json_text(j, &text, &len), 0);
    assert_non_null(strstr(text, "\"saved\":50"));
    assert_non_null(strstr(text, other));
    /* the configured store has no snapshot of a, the other one has */
    pc_store_coll_meta meta;
    assert_int_equal(pc_store_coll_meta_get(pc_persist_store(p), "a", &meta), PC_ENOTFOUND);
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_RDONLY;
    pc_store *os = NULL;
    char e[256];
    assert_int_equal(pc_store_open_checked(other, &sc, &os, e, sizeof e), 0);
    assert_int_equal(pc_store_coll_meta_get(os, "a", &meta), 0);
    assert_int_equal(meta.count, 50);
    pc_store_close(os);
    pc_json_reset(j);
    assert_int_equal(pc_mgmt_run_line(m, "perf_stats a", 12, pc_json_ops(), j, &err), 0);
    assert_int_equal(pc_json_text(j, &text, &len), 0);
    assert_non_null(strstr(text, "\"last_save\":0")); /* an export is not the snapshot */
    /* load back from it into an emptied collection */
    uint64_t del = 0;
    assert_int_equal(pc_del_glob(pc_fx_coll(c, "a"), "*", 1, &del), 0);
    pc_json_reset(j);
    n = snprintf(line, sizeof line, "perf_load a %s", other);
    assert_int_equal(pc_mgmt_run_line(m, line, (size_t)n, pc_json_ops(), j, &err), 0);
    assert_int_equal(pc_json_text(j, &text, &len), 0);
    assert_non_null(strstr(text, "\"loaded\":50"));
    expect(pc_fx_coll(c, "a"), "o7", "y");
    /* naming the configured store is the configured path (one LMDB env per process) */
    pc_json_reset(j);
    n = snprintf(line, sizeof line, "perf_save a %s", dir);
    assert_int_equal(pc_mgmt_run_line(m, line, (size_t)n, pc_json_ops(), j, &err), 0);
    assert_int_equal(pc_store_coll_meta_get(pc_persist_store(p), "a", &meta), 0);
    /* refused: SQL without a backend (password not echoed), an unknown scheme,
     * a missing store to load from */
    static const char *const bad[] = {"perf_save a odbc:DSN=x;PWD=hunter2",
                                      "perf_save a ftp://host/x",
                                      "perf_load a /nonexistent/pcache-store"};
    for (size_t i = 0; i < 3; i++) {
        pc_json_reset(j);
        memset(&err, 0, sizeof err);
        assert_int_not_equal(pc_mgmt_run_line(m, bad[i], strlen(bad[i]), pc_json_ops(), j, &err),
                             0);
        assert_non_null(strstr(err.msg, "store"));
        assert_null(strstr(err.msg, "hunter2"));
    }
    pc_json_destroy(j);
    pc_mgmt_destroy(m);
    pc_persist_close(p);
    pc_cache_destroy(c);
}

static void bad_policies_are_refused(void **state)
{
    (void)state;
    pc_cache *c = mk_cache();
    struct {
        const char *url;
        int mode;
        const char *persist, *journal;
        int rc;
        const char *word;
    } cases[] = {
        {"lmdb:///tmp/x", 3, NULL, NULL, PC_ECONFIG, "db_mode"},
        {NULL, 1, NULL, NULL, PC_ECONFIG, "db_url"},
        {"odbc://dsn", 1, NULL, NULL, PC_EURL, "odbc"},
        {"redis://h", 1, NULL, NULL, PC_EURL, "scheme"},
        {"lmdb:///tmp/x", 1, "a,zz", NULL, PC_ENOCOLL, "zz"},
        {"lmdb:///tmp/x", 1, "a", "a=sometimes", PC_ECONFIG, "sometimes"},
        {"lmdb:///tmp/x", 1, "a", "b", PC_ECONFIG, "mode"},
        {"/etc/passwd", 1, "a", NULL, PC_ESTORE, "passwd"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pc_persist_config pc;
        pc_persist_config_init(&pc);
        pc.db_url = cases[i].url;
        pc.db_mode = cases[i].mode;
        pc.persist_collections = cases[i].persist;
        pc.journal = cases[i].journal;
        pc_persist *p = NULL;
        char err[256] = "";
        int rc = pc_persist_open(c, &pc, &p, err, sizeof err);
        if (rc != cases[i].rc || p != NULL || strstr(err, cases[i].word) == NULL)
            fail_msg("case %zu: rc %d (%s) msg '%s', want %d mentioning '%s'", i, rc,
                     pc_store_strerror(rc), err, cases[i].rc, cases[i].word);
    }
    pc_cache_destroy(c);
}

/* Regression: the policy is opened before the host forks, and the saves
 * run in a child (pcached's maintenance process, OpenSIPS's MI and timer
 * processes). The store handle must not cross the fork: before the fix the
 * child's save failed with PC_EINVAL ("handle used in a forked child"). Now
 * the child opens the store for itself; its save and load work, and the
 * parent's handle still works after it. */
static void save_and_load_in_a_forked_child(void **state)
{
    (void)state;
    pc_cache *c = mk_cache();
    pc_persist *p = mk_persist(c, 0, NULL);
    assert_int_equal(pc_set(pc_fx_coll(c, "a"), "child", 5, "saved-by-child", 14, 0, 0), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        pc_persist_result r;
        int rc = pc_persist_save_coll(p, pc_fx_coll(c, "a"), &r);
        if (rc == 0 && r.rows != 1)
            rc = 100;
        if (rc == 0)
            rc = pc_remove(pc_fx_coll(c, "a"), "child", 5);
        pc_mgmt *m = NULL;
        if (rc == 0 && (rc = pc_mgmt_create(c, "a", &m)) == 0)
            rc = pc_persist_register(p, m);
        pc_json *j = NULL;
        if (rc == 0 && (rc = pc_json_create(&j)) == 0) /* perf_load, in the child */
            rc = pc_mgmt_run_line(m, "perf_load a", 11, pc_json_ops(), j, NULL);
        pc_json_destroy(j);
        pc_mgmt_destroy(m);
        _exit(rc == 0 ? 0 : (rc < 0 ? -rc : rc));
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    expect(pc_fx_coll(c, "a"), "child", "saved-by-child"); /* the child's perf_load */
    /* the parent's own handle is untouched by the child's */
    pc_persist_result r;
    assert_int_equal(pc_persist_save_coll(p, pc_fx_coll(c, "b"), &r), 0);
    pc_persist_close(p);
    pc_cache_destroy(c);

    c = mk_cache();
    p = mk_persist(c, 1, NULL);
    expect(pc_fx_coll(c, "a"), "child", "saved-by-child");
    pc_persist_close(p);
    pc_cache_destroy(c);
}

/* The [store] parameter is confined (it comes from the network): only
 * under the store root - by default the directory holding db_url's store -
 * after following symlinks; nothing is created for a refused call; SQL
 * targets only when allowed. */
static void store_parameter_is_confined(void **state)
{
    (void)state;
    pc_cache *c = mk_cache();
    char url[400], root[300], outside[300], link[400], line[900];
    snprintf(root, sizeof root, "%s/data", dir);
    snprintf(outside, sizeof outside, "%s/outside", dir);
    assert_int_equal(mkdir(root, 0750), 0);
    assert_int_equal(mkdir(outside, 0750), 0);
    snprintf(link, sizeof link, "%s/link", root);
    assert_int_equal(symlink(outside, link), 0);
    snprintf(url, sizeof url, "lmdb://%s/store", root);
    pc_persist_config pc;
    pc_persist_config_init(&pc);
    pc.db_url = url;
    pc.persist_collections = "a,b";
    pc_persist *p = NULL;
    char e[256];
    assert_int_equal(pc_persist_open(c, &pc, &p, e, sizeof e), 0);
    assert_int_equal(pc_persist_startup(p), 0);
    pc_mgmt *m = NULL;
    assert_int_equal(pc_mgmt_create(c, "a", &m), 0);
    assert_int_equal(pc_persist_register(p, m), 0);
    pc_json *j = NULL;
    assert_int_equal(pc_json_create(&j), 0);
    assert_int_equal(pc_set(pc_fx_coll(c, "a"), "k", 1, "v", 1, 0, 0), 0);
    pc_mgmt_err err;
    /* under the root: accepted (a backup directory beside the store) */
    int n = snprintf(line, sizeof line, "perf_save a lmdb://%s/backup-1", root);
    assert_int_equal(pc_mgmt_run_line(m, line, (size_t)n, pc_json_ops(), j, &err), 0);
    struct stat st;
    char made[600];
    snprintf(made, sizeof made, "%s/backup-1/data.mdb", root);
    assert_int_equal(stat(made, &st), 0);
    /* refused: outside, through .., through a symlink, relative, the root
     * itself, SQL while store_sql_targets is off */
    const char *bad[8];
    char b0[600], b1[600], b2[600], b3[600];
    snprintf(b0, sizeof b0, "perf_save a %s/x", outside);
    snprintf(b1, sizeof b1, "perf_save a %s/../outside/y", root);
    snprintf(b2, sizeof b2, "perf_save a %s/z", link);
    snprintf(b3, sizeof b3, "perf_save a lmdb://%s", root);
    bad[0] = b0;
    bad[1] = b1;
    bad[2] = b2;
    bad[3] = b3;
    bad[4] = "perf_save a relative/dir";
    bad[5] = "perf_save a /etc/pcache-confine-test";
    bad[6] = "perf_load a odbc:DRIVER=SQLite3;Database=/tmp/x.db";
    bad[7] = "perf_save a /";
    for (size_t i = 0; i < 8; i++) {
        pc_json_reset(j);
        memset(&err, 0, sizeof err);
        assert_int_equal(pc_mgmt_run_line(m, bad[i], strlen(bad[i]), pc_json_ops(), j, &err),
                         PC_EINVAL);
        assert_non_null(strstr(err.msg, "store"));
    }
    char x[600];
    snprintf(x, sizeof x, "%s/x", outside);
    assert_int_not_equal(stat(x, &st), 0);
    snprintf(x, sizeof x, "%s/z", outside);
    assert_int_not_equal(stat(x, &st), 0);
    snprintf(x, sizeof x, "%s/y", outside);
    assert_int_not_equal(stat(x, &st), 0);
    assert_int_not_equal(stat("/etc/pcache-confine-test", &st), 0);
    pc_json_destroy(j);
    pc_mgmt_destroy(m);
    pc_persist_close(p);
    /* an explicit root that does not exist is a configuration error */
    pc.store_root = "/nonexistent/pcache-root";
    assert_int_equal(pc_persist_open(c, &pc, &p, e, sizeof e), PC_ECONFIG);
    assert_non_null(strstr(e, "store_root"));
    pc_cache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(mode2_survives_restart_by_shutdown_save, setup, teardown),
        cmocka_unit_test_setup_teardown(journal_always_survives_restart_without_save, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(perf_save_and_perf_load_commands, setup, teardown),
        cmocka_unit_test_setup_teardown(store_parameter_is_confined, setup, teardown),
        cmocka_unit_test_setup_teardown(perf_save_and_load_to_another_store, setup, teardown),
        cmocka_unit_test(bad_policies_are_refused),
        cmocka_unit_test_setup_teardown(save_and_load_in_a_forked_child, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
