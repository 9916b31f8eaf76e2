/*
 * test_store_open.c - opening snapshot stores
 * (storage/store/include/pcache_store.h): map growth from a tiny map (and
 * a reader that opens the grown map with the small default), a handle used
 * after fork, and bad inputs - a path that is a file, an unwritable store
 * (as root: a child that drops to nobody), a newer format version, things
 * that are not stores, bad URLs, a creation that never committed - give a
 * clear error and leave every byte as it was.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "pcache.h"
#include "pcache_store.h"
#include "pcache_storecheck.h"
#include "sipgen.h"
#include "pc_testrun.h"
#include "store_testlib.h"

/* ---- map growth, fork --------------------------------------------------------------- */
static void test_map_grows(void **state)
{
    (void)state;
    char dir[300];
    mk_tmp(dir, sizeof dir, "grow");
    pc_cache *c = pc_fx_cache("g=14", 128);
    pc_coll *co = pc_fx_coll(c, "g");
    for (uint64_t i = 0; i < 60000; i++)
        check_rc(sip_put(co, 5, i), PC_OK);
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    sc.map_size = 1u << 20; /* 1 MiB: far too small for ~5 MB of blocks */
    sc.log.fn = log_cb;
    pc_store *s = NULL;
    check_rc(pc_store_open_checked(dir, &sc, &s, NULL, 0), PC_OK);
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
    put32(h + 8, PC_STORE_FORMAT_VERSION + 1);
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
        int rc = pc_store_open_checked(dir, &sc, &s, err, sizeof err);
        pc_store_close(s);
        fprintf(stderr, "[unwritable] %s\n", err);
        _exit(rc == PC_EIO && strstr(err, "ermission denied") != NULL ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    chmod(dir, 0755);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
        pc_skip("[unwritable] cannot drop privileges to uid 65534");
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
    /* LMDB never leaves data.mdb empty: this is a store whose data is gone,
     * not a new one (issue 18), and nothing is written to it */
    check_rc(try_open(dir, 0, err, sizeof err), PC_ECORRUPT);
    check_rc(try_open(dir, PC_STORE_CREATE, err, sizeof err), PC_ECORRUPT);
    assert_non_null(strstr(err, "data.mdb is empty"));
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 0);
}

/* The core's pc_store_open holds no structural check (issue 36: it is
 * pcache_storecheck.h's): it creates a new store, but reads an existing
 * one only when told the caller checked it (PC_STORE_NOCHECK), so a
 * caller that forgot the check is refused instead of LMDB reading pages
 * nobody checked. */
static void test_core_open_without_check(void **state)
{
    (void)state;
    char dir[300], err[700];
    mk_tmp(dir, sizeof dir, "nocheck");
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    pc_store *s = NULL;
    check_rc(pc_store_open(dir, &sc, &s, err, sizeof err), PC_OK);
    pc_store_close(s);
    s = NULL;
    sc.flags = PC_STORE_RDONLY;
    check_rc(pc_store_open(dir, &sc, &s, err, sizeof err), PC_EINVAL);
    assert_null(s);
    assert_non_null(strstr(err, "needs the structural check"));
    sc.flags = PC_STORE_RDONLY | PC_STORE_NOCHECK;
    check_rc(pc_store_open(dir, &sc, &s, err, sizeof err), PC_OK);
    pc_store_close(s);
    s = NULL;
    sc.flags = PC_STORE_RDONLY;
    check_rc(pc_store_open_checked(dir, &sc, &s, err, sizeof err), PC_OK);
    pc_store_close(s);
}

int main(int argc, char **argv)
{
    pc_test_args(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_grows),
        cmocka_unit_test(test_handle_after_fork),
        cmocka_unit_test(test_bad_paths),
        cmocka_unit_test(test_newer_format),
        cmocka_unit_test(test_unwritable),
        cmocka_unit_test(test_crash_during_create),
        cmocka_unit_test(test_core_open_without_check),
    };
    return pc_test_exit(PC_RUN_GROUP("test_store_open", tests, setup_root, teardown_root));
}
