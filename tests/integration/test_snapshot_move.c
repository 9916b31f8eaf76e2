/*
 * test_snapshot_move.c - `pcache-snapshot export` / `import` (src/tools/snapshot/
 * snap_move.c) run as a program against real ODBC drivers: SQLite, and the
 * private PostgreSQL server the ODBC tests start (tests/support/odbc_servers.sh).
 *
 *  - export of a library-made store (binary keys and values, counters,
 *    TTLs, a 200 KB value, two collections) then import into a new store
 *    gives the same records, key by key;
 *  - export of one collection bumps only its generation;
 *  - a progress bar is drawn when stderr is a terminal (a pty);
 *  - errors: a target that is not ODBC (2), an unknown DSN (11, with the
 *    SQLSTATE), a password never echoed, missing tables without
 *    --create-tables (11, and nothing created), a collection the store
 *    lacks (6), a collection the database never saw (6), a missing store
 *    without --create-store (3).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "odbc_testenv.h"
#include "pc_testrun.h"
#include "pcache_odbc.h"
#include "snapshot_testlib.h"

static int have_pg;

static void round_trip(const char *target, const char *tag)
{
    char src[512], dst[512];
    mk_store(src, sizeof src, tag);
    mk_dir(dst, sizeof dst, tag);
    expect_exit(0, "export", src, target, "--create-tables", "--json");
    json_t *j = parse_json(tool_out);
    assert_int_equal(json_integer_value(json_object_get(j, "rows")), NC + 3);
    json_decref(j);
    expect_exit(0, "import", dst, target, "--create-store", "--json");
    j = parse_json(tool_out);
    assert_int_equal(json_integer_value(json_object_get(j, "rows")), NC + 3);
    json_decref(j);
    static const char *const colls[] = {"c", "d"};
    for (size_t i = 0; i < 2; i++) {
        struct recs a = collect(src, colls[i]), b = collect(dst, colls[i]);
        same_records(&a, &b, 2000);
        recs_free(&a);
        recs_free(&b);
    }
    /* one collection: only its generation moves */
    expect_exit(0, "export", src, target, "d", "--json");
    j = parse_json(tool_out);
    assert_int_equal(json_integer_value(json_object_get(j, "rows")), 3);
    assert_int_equal(json_integer_value(json_object_get(j, "generation")), 2);
    json_decref(j);
    pc_odbc *o = NULL;
    char err[512];
    uint64_t gc = 0, gd = 0;
    if (pc_odbc_open(target, NULL, &o, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(pc_odbc_generation(o, "c", &gc), 0);
    assert_int_equal(pc_odbc_generation(o, "d", &gd), 0);
    pc_odbc_close(o);
    assert_int_equal(gc, 1);
    assert_int_equal(gd, 2);
    /* an import writes a new snapshot generation into the store */
    expect_exit(0, "import", dst, target, "c", "--json");
    j = parse_json(tool_out);
    assert_int_equal(json_integer_value(json_object_get(j, "generation")), 2);
    json_decref(j);
    /* the human form names what moved */
    expect_exit(0, "export", src, target, "d");
    expect_in(tool_out, "export d: 3 rows from");
}

static void test_sqlite(void **state)
{
    (void)state;
    round_trip(odbc_env_sqlite(), "sqlite");
}

static void test_postgresql(void **state)
{
    (void)state;
    if (!have_pg)
        pc_skip("no private PostgreSQL server for this test");
    round_trip(odbc_env_pg(), "pg");
}

static void test_progress_on_a_terminal(void **state)
{
    (void)state;
    char src[512];
    mk_store(src, sizeof src, "pty");
    int master = -1;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1); /* stdout away: the bar is on stderr, the pty */
        execl(PCACHE_SNAPSHOT_BIN, PCACHE_SNAPSHOT_BIN, "export", src, odbc_env_sqlite(),
              "--create-tables", (char *)NULL);
        _exit(127);
    }
    char buf[65536];
    size_t n = 0;
    ssize_t r;
    while (n + 1 < sizeof buf && (r = read(master, buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r; /* EIO once the child is gone */
    buf[n] = 0;
    close(master);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    expect_in(buf, "\r");
    expect_in(buf, "100%");
    expect_in(buf, " rows");
    /* not on a pipe: the captured stderr of a plain run has no bar */
    expect_exit(0, "export", src, odbc_env_sqlite());
    assert_null(strchr(tool_err, '\r'));
}

static void test_errors(void **state)
{
    (void)state;
    char src[512], fresh[700], none[512];
    mk_store(src, sizeof src, "err");
    expect_exit(2, "export", src, "/tmp/not-a-database");
    expect_in(tool_err, "is not an ODBC target");
    expect_exit(11, "export", src, "odbc://pcache-no-such-dsn");
    expect_in(tool_err, "IM002");
    expect_exit(11, "export", src, "DSN=pcache-no-such-dsn;UID=u;PWD=topsecret-77");
    assert_null(strstr(tool_err, "topsecret-77"));
    expect_in(tool_err, "***");
    /* a database without the tables: refused, and nothing created */
    snprintf(fresh, sizeof fresh, "DRIVER={pcache SQLite3};Database=%s/fresh.sqlite", root);
    expect_exit(11, "export", src, fresh);
    expect_in(tool_err, "pcache_entries");
    assert_int_not_equal(odbc_env_sql(fresh, "SELECT 1 FROM pcache_entries"), 0);
    expect_exit(6, "export", src, odbc_env_sqlite(), "no-such-collection");
    expect_in(tool_err, "no-such-collection");
    expect_exit(0, "export", src, odbc_env_sqlite(), "--create-tables");
    char dst[512];
    mk_dir(dst, sizeof dst, "errdst");
    expect_exit(6, "import", dst, odbc_env_sqlite(), "never-saved", "--create-store");
    mk_dir(none, sizeof none, "missing");
    expect_exit(3, "import", none, odbc_env_sqlite());
    expect_in(tool_err, "--create-store");
    /* help names both verbs' arguments */
    expect_exit(0, "export", "--help");
    expect_in(tool_out, "TARGET");
    expect_exit(0, "import", "--help");
    expect_in(tool_out, "--create-store");
}

int main(void)
{
    int rc = odbc_env_start("test_snapshot_move", 0);
    if (rc == ODBC_SKIP)
        return ODBC_SKIP;
    have_pg = rc == 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sqlite),
        cmocka_unit_test(test_postgresql),
        cmocka_unit_test(test_progress_on_a_terminal),
        cmocka_unit_test(test_errors),
    };
    return pc_test_exit(cmocka_run_group_tests(tests, snap_test_setup, snap_test_teardown));
}
