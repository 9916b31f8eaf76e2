/*
 * odbc_testenv.c - see odbc_testenv.h. The servers listen on loopback
 * ports chosen free by the kernel (bind to port 0) and on sockets inside
 * the temp dir; nothing global is configured.
 */
#include "odbc_testenv.h"

#include <netinet/in.h>
#include <signal.h>
#include <sql.h>
#include <sqlext.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];
static char cs_sqlite[512], cs_pg[512], cs_my[512];
static int have_my, started;
static pid_t owner;

const char *odbc_env_dir(void)
{
    return dir;
}
int odbc_env_have_mariadb(void)
{
    return have_my;
}
const char *odbc_env_sqlite(void)
{
    return cs_sqlite;
}
const char *odbc_env_pg(void)
{
    return cs_pg;
}
const char *odbc_env_mariadb(void)
{
    return cs_my;
}

int odbc_env_sh(const char *fmt, ...)
{
    char args[1024], cmd[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "sh '%s' %s", PCACHE_ODBC_SERVERS, args);
    int st = system(cmd);
    return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void stop_servers(void)
{
    if (started && getpid() == owner) {
        started = 0;
        odbc_env_sh("stop '%s'", dir);
    }
}

static void on_signal(int sig)
{
    stop_servers();
    signal(sig, SIG_DFL);
    raise(sig);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0) {
        perror("free_port");
        exit(1);
    }
    close(fd);
    return ntohs(a.sin_port);
}

int odbc_env_start(const char *test, int with_mariadb)
{
    snprintf(dir, sizeof dir, "/tmp/pcache-odbc-XXXXXX");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
    owner = getpid();
    /* the watcher: stops the servers and removes dir once we are gone */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "setsid sh '%s' watch '%s' %d </dev/null >/dev/null 2>&1 &",
             PCACHE_ODBC_SERVERS, dir, (int)owner);
    if (system(cmd) != 0) {
        fprintf(stderr, "%s: cannot start the server watcher\n", test);
        exit(1);
    }
    int pg = free_port(), my = with_mariadb ? free_port() : 0;
    started = 1;
    atexit(stop_servers);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    int rc = with_mariadb ? odbc_env_sh("start '%s' %d %d", dir, pg, my)
                          : odbc_env_sh("start '%s' %d", dir, pg);
    if (rc == ODBC_SKIP) {
        fprintf(stderr,
                "\n*** %s: SKIPPED: the database servers or ODBC drivers are not installed "
                "(run .ci/deps.sh) ***\n\n",
                test);
        return ODBC_SKIP;
    }
    if (rc != 0) {
        fprintf(stderr, "%s: starting the database servers failed (status %d, see %s)\n", test, rc,
                dir);
        exit(1);
    }
    char path[400];
    snprintf(path, sizeof path, "%s/myport", dir);
    struct stat sb;
    have_my = with_mariadb && stat(path, &sb) == 0;
    if (with_mariadb && !have_my)
        fprintf(stderr, "\n*** %s: MariaDB tests SKIPPED: server or driver not installed ***\n\n",
                test);
    setenv("ODBCSYSINI", dir, 1);
    snprintf(path, sizeof path, "%s/odbc.ini", dir);
    setenv("ODBCINI", path, 1);
    snprintf(cs_sqlite, sizeof cs_sqlite, "odbc://pcache_sqlite");
    snprintf(cs_pg, sizeof cs_pg, "odbc:DSN=pcache_pg;UID=pcache;PWD=" ODBC_TEST_PW);
    snprintf(cs_my, sizeof cs_my, "odbc://pcache_my");
    return 0;
}

int odbc_env_sql(const char *connstr, const char *sql)
{
    SQLHENV env = SQL_NULL_HENV;
    SQLHDBC dbc = SQL_NULL_HDBC;
    SQLHSTMT st = SQL_NULL_HSTMT;
    const char *cs = strncmp(connstr, "odbc:", 5) == 0 ? connstr + 5 : connstr;
    char buf[600];
    if (strncmp(connstr, "odbc://", 7) == 0) {
        snprintf(buf, sizeof buf, "DSN=%s", connstr + 7);
        cs = buf;
    }
    int rc = -1;
    SQLAllocHandle(SQL_HANDLE_ENV, SQL_NULL_HANDLE, &env);
    SQLSetEnvAttr(env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0);
    SQLAllocHandle(SQL_HANDLE_DBC, env, &dbc);
    SQLSMALLINT type = SQL_HANDLE_DBC;
    SQLHANDLE h = dbc;
    if (SQL_SUCCEEDED(SQLDriverConnect(dbc, NULL, (SQLCHAR *)cs, SQL_NTS, NULL, 0, NULL,
                                       SQL_DRIVER_NOPROMPT))) {
        SQLAllocHandle(SQL_HANDLE_STMT, dbc, &st);
        type = SQL_HANDLE_STMT;
        h = st;
        SQLRETURN r = SQLExecDirect(st, (SQLCHAR *)sql, SQL_NTS);
        rc = SQL_SUCCEEDED(r) || r == SQL_NO_DATA ? 0 : -1;
    }
    if (rc != 0) {
        SQLCHAR state[6] = "", text[512] = "";
        SQLINTEGER native;
        SQLSMALLINT tl;
        SQLGetDiagRec(type, h, 1, state, &native, text, sizeof text, &tl);
        fprintf(stderr, "odbc_env_sql(%s): [%s] %s\n", sql, state, text);
    }
    if (st != SQL_NULL_HSTMT)
        SQLFreeHandle(SQL_HANDLE_STMT, st);
    SQLDisconnect(dbc);
    SQLFreeHandle(SQL_HANDLE_DBC, dbc);
    SQLFreeHandle(SQL_HANDLE_ENV, env);
    return rc;
}

int odbc_env_threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return n;
}
