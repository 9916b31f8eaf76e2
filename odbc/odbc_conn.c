/*
 * odbc_conn.c - a connection of the ODBC exporter: the URL forms, masking
 * the password, diagnostics with SQLSTATE, dialect detection through
 * SQLGetInfo, the tables' DDL per dialect, and transactions.
 *
 * Invariant: no message this file builds (pc_odbc_errmsg, the log, err of
 * pc_odbc_open) contains the password of the connection string. Messages
 * are built from the masked target, and every driver diagnostic passes
 * through pc_odbc_mask_secret before it is stored or logged, because some
 * drivers echo connection attributes back.
 */
#include "odbc_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

void pc_odbc_config_init(pc_odbc_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->log.level = PC_LOG_INFO;
}

const char *pc_odbc_dialect_name(int dialect)
{
    switch (dialect) {
    case PC_ODBC_SQLITE:
        return "sqlite";
    case PC_ODBC_POSTGRESQL:
        return "postgresql";
    case PC_ODBC_MARIADB:
        return "mariadb";
    default:
        return "generic";
    }
}

int pc_odbc_dialect(const pc_odbc *o)
{
    return o == NULL ? PC_ODBC_GENERIC : o->dialect;
}
const char *pc_odbc_server(const pc_odbc *o)
{
    return o == NULL ? "" : o->server;
}
const char *pc_odbc_target(const pc_odbc *o)
{
    return o == NULL ? "" : o->target;
}
const char *pc_odbc_errmsg(const pc_odbc *o)
{
    return o == NULL ? "" : o->msg;
}

/* ---- connection strings ----------------------------------------------------
 * "KEY=value;KEY={va;lue};..." : a value in braces may hold ';' ("}}" is an
 * escaped brace). Keys compare case-insensitively. */
typedef void (*pair_fn)(void *ctx, const char *k, size_t kl, const char *v, size_t vl);
static void each_pair(const char *s, pair_fn fn, void *ctx)
{
    while (*s != '\0') {
        while (*s == ';' || *s == ' ')
            s++;
        if (*s == '\0')
            break;
        const char *k = s, *eq = s;
        while (*eq != '\0' && *eq != '=' && *eq != ';')
            eq++;
        if (*eq != '=') { /* a key without value: skip it */
            fn(ctx, k, (size_t)(eq - k), NULL, 0);
            s = eq;
            continue;
        }
        const char *v = eq + 1, *e = v;
        if (*v == '{') {
            e = v + 1;
            while (*e != '\0' && !(*e == '}' && e[1] != '}'))
                e += (*e == '}' ? 2 : 1);
            if (*e == '}')
                e++;
        } else {
            while (*e != '\0' && *e != ';')
                e++;
        }
        fn(ctx, k, (size_t)(eq - k), v, (size_t)(e - v));
        s = e;
    }
}

static bool key_is(const char *k, size_t kl, const char *name)
{
    while (kl > 0 && k[kl - 1] == ' ')
        kl--;
    return strlen(name) == kl && strncasecmp(k, name, kl) == 0;
}
/* PWD or PASSWORD, any case, also as the last word of a key ("x PWD"): a
 * driver would not take that for the password, but a reader of the log
 * would, so the redaction errs on the side of the mask. */
static bool is_secret_key(const char *k, size_t kl)
{
    while (kl > 0 && k[kl - 1] == ' ')
        kl--;
    size_t w = kl;
    while (w > 0 && k[w - 1] != ' ')
        w--;
    return key_is(k + w, kl - w, "PWD") || key_is(k + w, kl - w, "PASSWORD");
}

struct redact_ctx {
    char *out;
    size_t len, cap;
    int pairs; /* pairs written: the next one is preceded by ';' */
};
static void put(struct redact_ctx *r, const char *s, size_t n)
{
    for (size_t i = 0; i < n && r->len + 1 < r->cap; i++)
        r->out[r->len++] = s[i];
    if (r->cap > 0)
        r->out[r->len] = '\0';
}
/* Puts a value that is not a password's, masking what follows a
 * "PWD =" / "PASSWORD=" inside it (at its start or after a space): no
 * driver reads that as the password, but a reader of the log would. */
static void put_value(struct redact_ctx *r, const char *v, size_t vl)
{
    for (size_t i = 0; i < vl; i++) {
        if (i == 0 || v[i - 1] == ' ') {
            size_t kl = vl - i >= 3 && strncasecmp(v + i, "PWD", 3) == 0        ? 3
                        : vl - i >= 8 && strncasecmp(v + i, "PASSWORD", 8) == 0 ? 8
                                                                                : 0;
            size_t e = i + kl;
            while (kl > 0 && e < vl && v[e] == ' ')
                e++;
            if (kl > 0 && e < vl && v[e] == '=') {
                put(r, v + i, e + 1 - i);
                put(r, "***", 3);
                return;
            }
        }
        put(r, v + i, 1);
    }
}

static void redact_pair(void *ctx, const char *k, size_t kl, const char *v, size_t vl)
{
    struct redact_ctx *r = ctx;
    if (r->pairs++ > 0)
        put(r, ";", 1);
    put(r, k, kl);
    if (v == NULL)
        return;
    put(r, "=", 1);
    if (is_secret_key(k, kl))
        put(r, "***", 3);
    else
        put_value(r, v, vl);
}

void pc_odbc_redact(const char *in, char *out, size_t outlen)
{
    if (out == NULL || outlen == 0)
        return;
    out[0] = '\0';
    if (in == NULL)
        return;
    struct redact_ctx r = {out, 0, outlen, 0};
    if (strncmp(in, "odbc://", 7) == 0) { /* a DSN: no attributes, nothing secret */
        put(&r, in, strlen(in));
        return;
    }
    size_t pre = strncmp(in, "odbc:", 5) == 0 ? 5 : 0;
    /* the prefix and the separators before the first pair, as they are:
     * the result then reads as the input did (";odbc:=x" must not become
     * "odbc:=x", which a second pass would take for a prefix) */
    while (in[pre] == ';' || in[pre] == ' ')
        pre++;
    put(&r, in, pre);
    each_pair(in + pre, redact_pair, &r);
}

static void find_secret(void *ctx, const char *k, size_t kl, const char *v, size_t vl)
{
    char **pw = ctx;
    if (v == NULL || !is_secret_key(k, kl) || vl == 0)
        return;
    if (vl >= 2 && v[0] == '{' && v[vl - 1] == '}') {
        v++;
        vl -= 2;
    }
    free(*pw);
    *pw = strndup(v, vl);
}

int pc_odbc_is_url(const char *where)
{
    if (where == NULL)
        return 0;
    return strncmp(where, "odbc:", 5) == 0 || strncasecmp(where, "DSN=", 4) == 0 ||
           strncasecmp(where, "DRIVER=", 7) == 0;
}

/* Replaces every occurrence of the password in s (cap bytes) by "***".
 * The password may be shorter than the mask, so the result is built in a
 * copy and written back truncated to cap. */
static void mask_secret(const pc_odbc *o, char *s, size_t cap)
{
    if (o->password == NULL || o->password[0] == '\0' || strstr(s, o->password) == NULL)
        return;
    char tmp[PC_ODBC_MSG_MAX];
    size_t n = 0, pl = strlen(o->password);
    const char *p = s;
    while (*p != '\0' && n + 4 < sizeof tmp) {
        if (strncmp(p, o->password, pl) == 0) {
            memcpy(tmp + n, "***", 3);
            n += 3;
            p += pl;
        } else {
            tmp[n++] = *p++;
        }
    }
    tmp[n] = '\0';
    snprintf(s, cap, "%s", tmp);
}

void pc_odbc_log(const pc_odbc *o, int level, const char *fmt, ...)
{
    if (!pc_log_enabled(&o->cfg.log, level))
        return;
    char buf[PC_ODBC_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    pc_log_vformat(buf, sizeof buf, NULL, fmt, ap);
    va_end(ap);
    mask_secret(o, buf, sizeof buf);
    pc_log_put(&o->cfg.log, level, buf);
}

int pc_odbc_fail(pc_odbc *o, int rc, SQLSMALLINT type, SQLHANDLE h, const char *what, ...)
{
    va_list ap;
    va_start(ap, what);
    int n = vsnprintf(o->msg, sizeof o->msg, what, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof o->msg ? (size_t)n : sizeof o->msg - 1;
    for (SQLSMALLINT i = 1; h != SQL_NULL_HANDLE && i <= 4; i++) {
        SQLCHAR state[6], text[512];
        SQLINTEGER native = 0;
        SQLSMALLINT tl = 0;
        SQLRETURN r = SQLGetDiagRec(type, h, i, state, &native, text, sizeof text, &tl);
        if (!SQL_SUCCEEDED(r))
            break;
        /* one line: drivers end messages with newlines and ';' */
        size_t tn = strnlen((const char *)text, sizeof text - 1);
        for (size_t c = 0; c < tn; c++)
            if (text[c] == '\n' || text[c] == '\r' || text[c] == '\t')
                text[c] = ' ';
        while (tn > 0 && (text[tn - 1] == ' ' || text[tn - 1] == ';'))
            text[--tn] = '\0';
        int m = snprintf(o->msg + len, sizeof o->msg - len, "%s[%s] %s", i == 1 ? ": " : "; ",
                         (const char *)state, (const char *)text);
        if (m < 0 || (size_t)m >= sizeof o->msg - len) {
            len = sizeof o->msg - 1;
            break;
        }
        len += (size_t)m;
    }
    if (h != SQL_NULL_HANDLE && len == (size_t)(n < 0 ? 0 : n))
        snprintf(o->msg + len, sizeof o->msg - len, ": (the driver gave no diagnostic)");
    mask_secret(o, o->msg, sizeof o->msg);
    pc_log_put(&o->cfg.log, PC_LOG_ERR, o->msg);
    return rc;
}

int pc_odbc_exec(pc_odbc *o, const char *sql)
{
    SQLHSTMT st = SQL_NULL_HSTMT;
    int rc = 0;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, o->dbc, &st)))
        return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_DBC, o->dbc, "%s: cannot allocate a statement",
                            o->target);
    SQLRETURN r = SQLExecDirect(st, (SQLCHAR *)sql, SQL_NTS);
    if (!SQL_SUCCEEDED(r) && r != SQL_NO_DATA)
        rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st, "%s: %.120s", o->target, sql);
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return rc;
}

int pc_odbc_begin(pc_odbc *o, bool repeatable_read)
{
    /* The isolation level can only change outside a transaction: set it
     * before autocommit goes off. SQLite is serializable anyway. */
    if (o->dialect != PC_ODBC_SQLITE && o->dialect != PC_ODBC_GENERIC) {
        SQLULEN iso = repeatable_read ? SQL_TXN_REPEATABLE_READ : SQL_TXN_READ_COMMITTED;
        if (!SQL_SUCCEEDED(SQLSetConnectAttr(o->dbc, SQL_ATTR_TXN_ISOLATION, (SQLPOINTER)iso, 0)))
            return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_DBC, o->dbc,
                                "%s: cannot set the isolation level", o->target);
    }
    if (!SQL_SUCCEEDED(
            SQLSetConnectAttr(o->dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)SQL_AUTOCOMMIT_OFF, 0)))
        return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_DBC, o->dbc, "%s: cannot turn autocommit off",
                            o->target);
    o->in_txn = true;
    return 0;
}

int pc_odbc_stmt_new(pc_odbc *o, SQLHSTMT *st)
{
    if (SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, o->dbc, st)))
        return 0;
    *st = SQL_NULL_HSTMT;
    return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_DBC, o->dbc, "%s: cannot allocate a statement",
                        o->target);
}

SQLRETURN pc_odbc_bind_coll(SQLHSTMT st, SQLUSMALLINT i, const char *name, SQLLEN *len)
{
    *len = (SQLLEN)strlen(name);
    return SQLBindParameter(st, i, SQL_PARAM_INPUT, SQL_C_CHAR, SQL_VARCHAR, PC_COLL_NAME_MAX, 0,
                            (SQLPOINTER)name, *len + 1, len);
}

int pc_odbc_end_rc(pc_odbc *o, int rc)
{
    if (rc == 0)
        return pc_odbc_end(o, true);
    pc_odbc_end(o, false);
    return rc;
}

int pc_odbc_end(pc_odbc *o, bool commit)
{
    int rc = 0;
    if (!o->in_txn)
        return 0;
    SQLRETURN r = SQLEndTran(SQL_HANDLE_DBC, o->dbc, commit ? SQL_COMMIT : SQL_ROLLBACK);
    if (!SQL_SUCCEEDED(r)) {
        if (commit) {
            rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_DBC, o->dbc,
                              "%s: the commit failed (nothing was saved)", o->target);
            SQLEndTran(SQL_HANDLE_DBC, o->dbc, SQL_ROLLBACK);
        } else {
            char keep[PC_ODBC_MSG_MAX];
            snprintf(keep, sizeof keep, "%s", o->msg); /* the error that caused the rollback */
            pc_odbc_fail(o, 0, SQL_HANDLE_DBC, o->dbc,
                         "%s: rollback failed (the server discards the open transaction)",
                         o->target);
            snprintf(o->msg, sizeof o->msg, "%s", keep);
        }
    }
    SQLSetConnectAttr(o->dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)SQL_AUTOCOMMIT_ON, 0);
    o->in_txn = false;
    return rc;
}

const char *pc_odbc_blob_type(int dialect)
{
    switch (dialect) {
    case PC_ODBC_POSTGRESQL:
        return "BYTEA";
    case PC_ODBC_MARIADB:
        return "LONGBLOB";
    default:
        return "BLOB";
    }
}

/* The DDL of docs/odbc.md §2. No primary key on the entries: keys reach
 * 64 KiB and neither a PostgreSQL btree (about 2.7 KB per entry) nor an
 * InnoDB index (3 KB) can hold them; a save writes each key of a walk once
 * and deletes by collection, which the index on collection serves. */
static int create_tables(pc_odbc *o)
{
    const char *blob = pc_odbc_blob_type(o->dialect);
    const char *keyt = o->dialect == PC_ODBC_MARIADB ? "BLOB" : blob; /* BLOB = 64 KiB */
    const char *name = o->dialect == PC_ODBC_MARIADB
                           ? "VARCHAR(63) CHARACTER SET ascii COLLATE ascii_bin"
                           : "VARCHAR(63)";
    const char *ine = o->dialect == PC_ODBC_GENERIC ? "" : "IF NOT EXISTS ";
    const char *eng = o->dialect == PC_ODBC_MARIADB ? " ENGINE=InnoDB" : "";
    char sql[3][512];
    snprintf(sql[0], sizeof sql[0],
             "CREATE TABLE %s" PC_ODBC_ENTRIES " (collection %s NOT NULL, pkey %s NOT NULL, "
             "pvalue %s NOT NULL, expires BIGINT NOT NULL, is_counter SMALLINT NOT NULL)%s",
             ine, name, keyt, blob, eng);
    snprintf(sql[1], sizeof sql[1],
             "CREATE INDEX %s" PC_ODBC_ENTRIES "_coll ON " PC_ODBC_ENTRIES " (collection)", ine);
    snprintf(sql[2], sizeof sql[2],
             "CREATE TABLE %s" PC_ODBC_GENERATIONS " (collection %s NOT NULL PRIMARY KEY, "
             "generation BIGINT NOT NULL, entries BIGINT NOT NULL, saved_at BIGINT NOT NULL, "
             "source VARCHAR(63) NOT NULL DEFAULT '')%s",
             ine, name, eng);
    int rc = pc_odbc_begin(o, false);
    for (int i = 0; rc == 0 && i < 3; i++)
        rc = pc_odbc_exec(o, sql[i]);
    rc = pc_odbc_end_rc(o, rc);
    if (rc == 0)
        pc_odbc_log(o, PC_LOG_INFO,
                    "pcache: %s: created the tables " PC_ODBC_ENTRIES " and " PC_ODBC_GENERATIONS,
                    o->target);
    return rc;
}

/* 1 when table answers a query, 0 when it does not (missing), in
 * autocommit mode so a failure aborts nothing. */
static int table_exists(pc_odbc *o, const char *table)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT 1 FROM %s WHERE 1 = 0", table);
    SQLHSTMT st;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, o->dbc, &st)))
        return 0;
    SQLRETURN r = SQLExecDirect(st, (SQLCHAR *)sql, SQL_NTS);
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return SQL_SUCCEEDED(r) || r == SQL_NO_DATA;
}

static int detect(pc_odbc *o)
{
    char name[64] = "", ver[64] = "";
    SQLSMALLINT n;
    if (!SQL_SUCCEEDED(SQLGetInfo(o->dbc, SQL_DBMS_NAME, name, sizeof name, &n)))
        return pc_odbc_fail(o, PC_ESTORE, SQL_HANDLE_DBC, o->dbc,
                            "%s: SQLGetInfo(SQL_DBMS_NAME) failed", o->target);
    SQLGetInfo(o->dbc, SQL_DBMS_VER, ver, sizeof ver, &n);
    snprintf(o->server, sizeof o->server, "%s %s", name, ver);
    if (strncasecmp(name, "SQLite", 6) == 0)
        o->dialect = PC_ODBC_SQLITE;
    else if (strncasecmp(name, "PostgreSQL", 10) == 0)
        o->dialect = PC_ODBC_POSTGRESQL;
    else if (strncasecmp(name, "MySQL", 5) == 0 || strncasecmp(name, "MariaDB", 7) == 0)
        o->dialect = PC_ODBC_MARIADB;
    else
        o->dialect = PC_ODBC_GENERIC;
    return 0;
}

static int do_connect(pc_odbc *o)
{
    SQLCHAR out[1024];
    SQLSMALLINT outl;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_DBC, o->env, &o->dbc))) {
        o->dbc = SQL_NULL_HDBC;
        return pc_odbc_fail(o, PC_EHEAP, SQL_HANDLE_ENV, o->env, "%s: SQLAllocHandle(DBC)",
                            o->target);
    }
    o->pid = getpid();
    SQLSetConnectAttr(o->dbc, SQL_ATTR_LOGIN_TIMEOUT, (SQLPOINTER)(SQLULEN)10, 0);
    SQLRETURN r = SQLDriverConnect(o->dbc, NULL, (SQLCHAR *)o->connstr, SQL_NTS, out, sizeof out,
                                   &outl, SQL_DRIVER_NOPROMPT);
    if (!SQL_SUCCEEDED(r)) {
        int rc =
            pc_odbc_fail(o, PC_ESTORE, SQL_HANDLE_DBC, o->dbc, "%s: cannot connect", o->target);
        SQLFreeHandle(SQL_HANDLE_DBC, o->dbc);
        o->dbc = SQL_NULL_HDBC;
        return rc;
    }
    return 0;
}

static int do_connect(pc_odbc *o);

int pc_odbc_enter_args(pc_odbc *o, bool args_ok)
{
    return o == NULL || !args_ok ? PC_EINVAL : pc_odbc_enter(o);
}

int pc_odbc_enter(pc_odbc *o)
{
    o->msg[0] = '\0';
    if (o->pid == getpid())
        return 0;
    /* The inherited handles are the parent's: freeing them would send a
     * disconnect on its socket. They are left as they are (a few KiB held
     * by this process); the copy of the socket closes when it exits. */
    o->env = SQL_NULL_HENV;
    o->dbc = SQL_NULL_HDBC;
    o->in_txn = false;
    int rc = 0;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_ENV, SQL_NULL_HANDLE, &o->env)) ||
        !SQL_SUCCEEDED(SQLSetEnvAttr(o->env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0)))
        rc = pc_odbc_fail(o, PC_EHEAP, SQL_HANDLE_ENV, SQL_NULL_HANDLE,
                          "%s: cannot allocate an ODBC environment after fork", o->target);
    if (rc == 0)
        rc = do_connect(o);
    if (rc == 0)
        pc_odbc_log(o, PC_LOG_DEBUG, "pcache: %s: reconnected in process %d", o->target,
                    (int)getpid());
    return rc;
}

static void disconnect(pc_odbc *o)
{
    if (o->dbc == SQL_NULL_HDBC)
        return;
    if (o->in_txn)
        pc_odbc_end(o, false);
    SQLDisconnect(o->dbc);
    SQLFreeHandle(SQL_HANDLE_DBC, o->dbc);
    o->dbc = SQL_NULL_HDBC;
}

static int build_connstr(pc_odbc *o, const char *where)
{
    if (strncmp(where, "odbc://", 7) == 0) {
        const char *dsn = where + 7;
        if (*dsn == '\0' || strpbrk(dsn, ";={}/") != NULL)
            return pc_odbc_fail(o, PC_EURL, SQL_HANDLE_ENV, SQL_NULL_HANDLE,
                                "db_url '%s': expected odbc://DSN (a data source name of "
                                "odbc.ini) or odbc:CONNECTION-STRING",
                                o->target);
        if (asprintf(&o->connstr, "DSN=%s", dsn) < 0)
            o->connstr = NULL;
    } else {
        const char *cs = strncmp(where, "odbc:", 5) == 0 ? where + 5 : where;
        if (strchr(cs, '=') == NULL)
            return pc_odbc_fail(o, PC_EURL, SQL_HANDLE_ENV, SQL_NULL_HANDLE,
                                "db_url '%s': expected odbc://DSN or an ODBC connection "
                                "string (KEY=value;...)",
                                o->target);
        o->connstr = strdup(cs);
        if (o->connstr != NULL)
            each_pair(cs, find_secret, &o->password);
    }
    return o->connstr == NULL ? PC_EHEAP : 0;
}

int pc_odbc_open(const char *where, const pc_odbc_config *cfg, pc_odbc **out, char *err,
                 size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (where == NULL || out == NULL)
        return PC_EINVAL;
    pc_odbc *o = calloc(1, sizeof *o);
    if (o == NULL)
        return PC_EHEAP;
    if (cfg != NULL)
        o->cfg = *cfg;
    else
        pc_odbc_config_init(&o->cfg);
    if (o->cfg.batch_bytes == 0)
        o->cfg.batch_bytes = PC_ODBC_BATCH_BYTES_DEFAULT;
    pc_odbc_redact(where, o->target, sizeof o->target);
    o->env = SQL_NULL_HENV;
    o->dbc = SQL_NULL_HDBC;
    int rc = build_connstr(o, where);
    if (rc != 0)
        goto out;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_ENV, SQL_NULL_HANDLE, &o->env)) ||
        !SQL_SUCCEEDED(SQLSetEnvAttr(o->env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0))) {
        rc = pc_odbc_fail(o, PC_EHEAP, SQL_HANDLE_ENV, SQL_NULL_HANDLE,
                          "%s: cannot allocate an ODBC environment", o->target);
        goto out;
    }
    if ((rc = do_connect(o)) != 0 || (rc = detect(o)) != 0)
        goto out;
    /* psqlODBC buffers a whole result set unless UseDeclareFetch is on: a
     * load of a large collection would then grow with it. And by default it
     * wraps every statement in a SAVEPOINT (statement-level rollback) that
     * our all-or-nothing transactions never use: Protocol=7.4-1 (rollback
     * the transaction on error) drops those round trips. Reconnect once
     * with both unless the
     * user chose them in the connection string. */
    bool udf = strcasestr(o->connstr, "UseDeclareFetch") == NULL;
    bool proto = strcasestr(o->connstr, "Protocol") == NULL;
    if (o->dialect == PC_ODBC_POSTGRESQL && (udf || proto)) {
        char *cs = NULL;
        unsigned fetch = o->cfg.batch_rows != 0 ? o->cfg.batch_rows : 1000;
        char extra[96] = "";
        if (proto)
            snprintf(extra, sizeof extra, ";Protocol=7.4-1");
        if (udf)
            snprintf(extra + strlen(extra), sizeof extra - strlen(extra),
                     ";UseDeclareFetch=1;Fetch=%u", fetch);
        if (asprintf(&cs, "%s%s", o->connstr, extra) < 0) {
            rc = PC_EHEAP;
            goto out;
        }
        free(o->connstr);
        o->connstr = cs;
        disconnect(o);
        if ((rc = do_connect(o)) != 0)
            goto out;
    }
    bool have_e = table_exists(o, PC_ODBC_ENTRIES), have_g = table_exists(o, PC_ODBC_GENERATIONS);
    if (!have_e || !have_g) {
        if (!(o->cfg.flags & PC_ODBC_CREATE)) {
            rc =
                pc_odbc_fail(o, PC_ESTORE, SQL_HANDLE_ENV, SQL_NULL_HANDLE,
                             "%s (%s): table %s does not exist (create the tables of "
                             "docs/odbc.md, or open with the create option)",
                             o->target, o->server, !have_e ? PC_ODBC_ENTRIES : PC_ODBC_GENERATIONS);
            goto out;
        }
        if ((rc = create_tables(o)) != 0)
            goto out;
    }
    if ((rc = pc_odbc_sync_schema(o)) != 0)
        goto out;
    pc_odbc_log(o, PC_LOG_DEBUG, "pcache: %s: connected to %s (dialect %s)", o->target, o->server,
                pc_odbc_dialect_name(o->dialect));
out:
    if (rc != 0) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "%s", o->msg[0] != '\0' ? o->msg : pc_store_strerror(rc));
        pc_odbc_close(o);
        return rc;
    }
    *out = o;
    return 0;
}

void pc_odbc_close(pc_odbc *o)
{
    if (o == NULL)
        return;
    if (o->dbc == SQL_NULL_HDBC || o->pid == getpid()) { /* see pc_odbc_enter */
        disconnect(o);
        if (o->env != SQL_NULL_HENV)
            SQLFreeHandle(SQL_HANDLE_ENV, o->env);
    }
    if (o->password != NULL) /* do not leave it in freed memory */
        memset(o->password, 0, strlen(o->password));
    if (o->connstr != NULL)
        memset(o->connstr, 0, strlen(o->connstr));
    free(o->password);
    free(o->connstr);
    free(o);
}
