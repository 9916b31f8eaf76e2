/*
 * odbc_testenv.h - the private database servers of the ODBC exporter's
 * tests (tests/support/odbc_servers.sh): started once per test program, stopped at
 * exit, and by a watcher process if the test is killed.
 */
#ifndef ODBC_TESTENV_H
#define ODBC_TESTENV_H

#define ODBC_TEST_PW "s3cret-PW-odbc" /* odbc_servers.sh's PW */
#define ODBC_SKIP 77                  /* ctest SKIP_RETURN_CODE */

/* Starts PostgreSQL (and MariaDB when with_mariadb) in a temp dir and points
 * ODBCSYSINI / ODBCINI at it. Returns 0, or ODBC_SKIP after printing
 * "SKIPPED: <why>" loudly; exits on a broken setup. */
int odbc_env_start(const char *test, int with_mariadb);
const char *odbc_env_dir(void);
int odbc_env_have_mariadb(void);
/* Runs "odbc_servers.sh <args>" (args formatted); returns its exit status. */
int odbc_env_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Executes sql through a raw ODBC connection to connstr; 0 on success,
 * -1 after printing the diagnostic. */
int odbc_env_sql(const char *connstr, const char *sql);
/* The connection strings of the three drivers. */
const char *odbc_env_sqlite(void);
const char *odbc_env_pg(void);
const char *odbc_env_mariadb(void);
/* Threads of this process (/proc/self/status), -1 when unknown: a save's
 * sender thread is joined before the save returns, on every path. */
int odbc_env_threads(void);

#endif
