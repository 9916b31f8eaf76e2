/*
 * odbc_shapes.c - the INSERT statement shapes of the batch writer
 * (odbc_write.c): preparing them, laying a full batch out for its shape
 * (pc_odbc_batch_seal, in the caller's thread) and executing it
 * (pc_odbc_batch_exec, on the sender thread when pipelined).
 *
 * Statement shape per dialect, measured (docs/odbc.md §4):
 *   SQLite      a multi-row INSERT ... VALUES (..),(..) of 100 rows.
 *               libsqliteodbc compiles (sqlite3_prepare) every INSERT again
 *               at every SQLExecute, prepared or not: one row per statement
 *               spends most of its time in SQLite's parser, 100 rows pay it
 *               once (500 parameters: under the 999 of SQLite before 3.32).
 *   PostgreSQL  PACKED: one INSERT ... SELECT per batch of up to 5000 rows
 *               whose keys and values travel as ONE bytea parameter (the
 *               batch buffer) and whose offsets, lengths, expiries and
 *               counter flags travel as five array literals; the server
 *               cuts the rows with substring(). Seven parameters per batch
 *               instead of five per row: the 250-row VALUES statement spent
 *               most of the server's time building and evaluating 1250
 *               parameter expressions per execution.
 *               The bytea goes as text, encoded by seal in the walk's
 *               thread (bytea_text: the escape form, or hex where escaping
 *               would more than double it), not as a binary parameter:
 *               psqlODBC 13.02 walks every byte of a binary parameter
 *               calling its log-level getters twice per byte (log_params(),
 *               whatever the log level): most of the sender's time per
 *               batch, during which the server waits. As text the sender's
 *               share is a copy (docs/odbc.md §4).
 *   MariaDB     parameter arrays (SQL_ATTR_PARAMSET_SIZE): Connector/ODBC
 *               sends them with the bulk protocol.
 *   generic     one-row INSERT: portable.
 * Every parameter is re-bound (SQLBindParameter) before every execute, with
 * its exact length: the one binding discipline that returned every binary
 * value intact on every driver. libsqliteodbc converts a binary parameter
 * once per binding: bound once with only its length indicator changed per
 * row, or bound as an array, it sent later rows with the first row's length
 * (corrupted variable-length values). So SQLite never uses ARRAY.
 */
#include "odbc_write_int.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pc_odbc_shape_default(int dialect)
{
    switch (dialect) {
    case PC_ODBC_SQLITE:
        return PC_ODBC_SHAPE_MULTI;
    case PC_ODBC_POSTGRESQL:
        return PC_ODBC_SHAPE_PACKED;
    case PC_ODBC_MARIADB:
        return PC_ODBC_SHAPE_ARRAY;
    default:
        return PC_ODBC_SHAPE_ROW;
    }
}

/* PACKED (PostgreSQL): the unnest() calls of one SELECT list advance
 * together, one row per array element; o is the 1-based offset of the key
 * in d, the value follows it. */
#define PACKED_SQL                                                                                 \
    "INSERT INTO " PC_ODBC_ENTRIES " " COLS " SELECT n, substring(d FROM o FOR kl), "              \
    "substring(d FROM o + kl FOR vl), e, c FROM (SELECT CAST(? AS VARCHAR(63)) AS n, "             \
    "CAST(? AS BYTEA) AS d, unnest(CAST(? AS INTEGER[])) AS o, "                                   \
    "unnest(CAST(? AS INTEGER[])) AS kl, unnest(CAST(? AS INTEGER[])) AS vl, "                     \
    "unnest(CAST(? AS BIGINT[])) AS e, unnest(CAST(? AS SMALLINT[])) AS c) AS t"

/* Prepares the INSERT of rows rows (0: the PACKED statement) on a new
 * statement *st. */
int pc_odbc_insert_prepare(pc_odbc *o, SQLHSTMT *st, unsigned rows)
{
    size_t len = sizeof "INSERT INTO " PC_ODBC_ENTRIES " " COLS " VALUES " + (size_t)rows * 12 +
                 sizeof PACKED_SQL;
    char *sql = malloc(len);
    if (sql == NULL)
        return PC_EHEAP;
    size_t n = (size_t)snprintf(sql, len, "%s",
                                rows == 0 ? PACKED_SQL
                                          : "INSERT INTO " PC_ODBC_ENTRIES " " COLS " VALUES ");
    for (unsigned i = 0; i < rows; i++)
        n += (size_t)snprintf(sql + n, len - n, "%s(?,?,?,?,?)", i ? "," : "");
    int rc = pc_odbc_stmt_new(o, st);
    if (rc == 0 && !SQL_SUCCEEDED(SQLPrepare(*st, (SQLCHAR *)sql, SQL_NTS))) {
        rc = rows == 0 ? pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, *st,
                                      "%s: cannot prepare the packed INSERT", o->target)
                       : pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, *st,
                                      "%s: cannot prepare the INSERT of %u rows", o->target, rows);
    }
    free(sql);
    return rc;
}

SQLRETURN pc_odbc_bind_name(pc_odbc_writer *w, SQLHSTMT st, SQLUSMALLINT i)
{
    return SQLBindParameter(st, i, SQL_PARAM_INPUT, SQL_C_CHAR, SQL_VARCHAR, PC_COLL_NAME_MAX, 0,
                            w->name, (SQLLEN)sizeof w->name, &w->name_len);
}

/* Records a failure for the caller's thread to report (struct wfail). */
static int defer_fail(struct wfail *f, int rc, SQLSMALLINT type, SQLHANDLE h, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int defer_fail(struct wfail *f, int rc, SQLSMALLINT type, SQLHANDLE h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->what, sizeof f->what, fmt, ap);
    va_end(ap);
    f->rc = rc;
    f->type = type;
    f->h = h;
    return rc;
}

/* ---- executing a batch ----------------------------------------------------
 * Runs on the sender thread when pipelined, else in the caller's: touches
 * only the batch, the INSERT statements and what is read-only during the
 * walk (the name, names, nind, shape, per_stmt, o->target); never logs
 * (odbc_pipe.c invariant 4). A failure leaves its statement as it is, so
 * that its diagnostics are still there when reported. */

/* Binds the five parameters of one row; false when the driver refused one. */
static bool bind_row(pc_odbc_writer *w, struct wbatch *b, SQLHSTMT st, unsigned slot,
                     struct wrow *r)
{
    SQLUSMALLINT p = (SQLUSMALLINT)(slot * 5 + 1);
    /* A zero-length value still needs a valid pointer and column size 1. */
    bool ok = SQL_SUCCEEDED(pc_odbc_bind_name(w, st, p));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, p + 1, SQL_PARAM_INPUT, SQL_C_BINARY,
                                              SQL_VARBINARY, r->klen > 0 ? (SQLULEN)r->klen : 1, 0,
                                              b->buf + r->koff, r->klen, &r->klen));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, p + 2, SQL_PARAM_INPUT, SQL_C_BINARY,
                                              SQL_VARBINARY, r->vlen > 0 ? (SQLULEN)r->vlen : 1, 0,
                                              b->buf + r->voff, r->vlen, &r->vlen));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, p + 3, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT,
                                              0, 0, &r->expires, 0, NULL));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, p + 4, SQL_PARAM_INPUT, SQL_C_SSHORT,
                                              SQL_SMALLINT, 0, 0, &r->is_counter, 0, NULL));
    return ok;
}

static int run(pc_odbc_writer *w, struct wbatch *b, SQLHSTMT st, unsigned first, unsigned count)
{
    pc_odbc *o = w->o;
    for (unsigned i = 0; i < count; i++)
        if (!bind_row(w, b, st, i, &b->rows[first + i]))
            return defer_fail(&b->fail, PC_EIO, SQL_HANDLE_STMT, st,
                              "%s: collection \"%s\": binding the parameters of row %llu",
                              o->target, w->name, (unsigned long long)(b->first + first + i));
    if (!SQL_SUCCEEDED(SQLExecute(st)))
        return defer_fail(&b->fail, PC_EIO, SQL_HANDLE_STMT, st,
                          "%s: collection \"%s\": INSERT failed after %llu rows", o->target,
                          w->name, (unsigned long long)(b->first + first));
    SQLFreeStmt(st, SQL_CLOSE);
    b->stmts++;
    return 0;
}

/* ARRAY: one execute with n parameter sets bound column-wise (laid out by
 * seal). The driver must report every set processed and successful:
 * anything else fails the save (never a partially inserted batch that goes
 * unnoticed). */
static int run_array(pc_odbc_writer *w, struct wbatch *b)
{
    pc_odbc *o = w->o;
    SQLHSTMT st = w->one;
    size_t wk = b->wk > 0 ? b->wk : 1, wv = b->wv > 0 ? b->wv : 1;
    unsigned char *kc = b->cols, *vc = b->cols + (size_t)b->n * wk;
    SQLFreeStmt(st, SQL_RESET_PARAMS);
    if (!SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_PARAM_BIND_TYPE, SQL_PARAM_BIND_BY_COLUMN, 0)) ||
        !SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_PARAMSET_SIZE, (SQLPOINTER)(SQLULEN)b->n, 0)) ||
        !SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_PARAM_STATUS_PTR, b->status, 0)) ||
        !SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_PARAMS_PROCESSED_PTR, &b->processed, 0)))
        return defer_fail(&b->fail, PC_EIO, SQL_HANDLE_STMT, st,
                          "%s: the driver refuses parameter arrays", o->target);
    bool ok = SQL_SUCCEEDED(SQLBindParameter(st, 1, SQL_PARAM_INPUT, SQL_C_CHAR, SQL_VARCHAR,
                                             PC_COLL_NAME_MAX, 0, w->names, PC_COLL_NAME_MAX + 1,
                                             w->nind));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, 2, SQL_PARAM_INPUT, SQL_C_BINARY, SQL_VARBINARY,
                                              wk, 0, kc, (SQLLEN)wk, b->kind));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, 3, SQL_PARAM_INPUT, SQL_C_BINARY, SQL_VARBINARY,
                                              wv, 0, vc, (SQLLEN)wv, b->vind));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, 4, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0,
                                              0, b->exps, 0, NULL));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, 5, SQL_PARAM_INPUT, SQL_C_SSHORT, SQL_SMALLINT, 0,
                                              0, b->ctrs, 0, NULL));
    if (!ok)
        return defer_fail(&b->fail, PC_EIO, SQL_HANDLE_STMT, st,
                          "%s: collection \"%s\": binding a parameter array", o->target, w->name);
    if (!SQL_SUCCEEDED(SQLExecute(st)))
        return defer_fail(&b->fail, PC_EIO, SQL_HANDLE_STMT, st,
                          "%s: collection \"%s\": INSERT failed after %llu rows", o->target,
                          w->name, (unsigned long long)b->first);
    b->stmts++;
    for (unsigned i = 0; i < b->n; i++)
        if (b->status[i] != SQL_PARAM_SUCCESS && b->status[i] != SQL_PARAM_SUCCESS_WITH_INFO)
            return defer_fail(&b->fail, PC_EIO, SQL_HANDLE_STMT, st,
                              "%s: collection \"%s\": row %llu of the batch was not inserted",
                              o->target, w->name, (unsigned long long)(b->first + i));
    if (b->processed != b->n)
        return defer_fail(&b->fail, PC_EIO, SQL_HANDLE_ENV, SQL_NULL_HANDLE,
                          "%s: collection \"%s\": the driver processed %llu of %u rows", o->target,
                          w->name, (unsigned long long)b->processed, b->n);
    SQLFreeStmt(st, SQL_CLOSE);
    return 0;
}

/* PACKED: the batch buffer is the bytea parameter, as text (see the top
 * of this file); the five array literals (built by seal) say where
 * each row's key and value are in it. */
static int run_packed(pc_odbc_writer *w, struct wbatch *b)
{
    pc_odbc *o = w->o;
    SQLHSTMT st = w->multi;
    bool ok = SQL_SUCCEEDED(pc_odbc_bind_name(w, st, 1));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, 2, SQL_PARAM_INPUT, SQL_C_CHAR, SQL_LONGVARCHAR,
                                              (SQLULEN)b->blob_len, 0, b->text, b->blob_len,
                                              &b->blob_len));
    for (int i = 0; ok && i < 5; i++)
        ok = SQL_SUCCEEDED(SQLBindParameter(st, (SQLUSMALLINT)(3 + i), SQL_PARAM_INPUT, SQL_C_CHAR,
                                            SQL_LONGVARCHAR, (SQLULEN)b->arr_len[i], 0, b->arr[i],
                                            b->arr_len[i], &b->arr_len[i]));
    if (!ok)
        return defer_fail(&b->fail, PC_EIO, SQL_HANDLE_STMT, st,
                          "%s: collection \"%s\": binding the parameters of a batch", o->target,
                          w->name);
    if (!SQL_SUCCEEDED(SQLExecute(st)))
        return defer_fail(&b->fail, PC_EIO, SQL_HANDLE_STMT, st,
                          "%s: collection \"%s\": INSERT failed after %llu rows", o->target,
                          w->name, (unsigned long long)b->first);
    SQLFreeStmt(st, SQL_CLOSE);
    b->stmts++;
    return 0;
}

/* The job of the sender thread (pc_odbc_job_fn), or called inline. */
int pc_odbc_batch_exec(void *ctx, void *job)
{
    pc_odbc_writer *w = ctx;
    struct wbatch *b = job;
    if (w->shape == PC_ODBC_SHAPE_ARRAY)
        return run_array(w, b);
    if (w->shape == PC_ODBC_SHAPE_PACKED)
        return run_packed(w, b);
    if (b->n == w->per_stmt && w->multi != SQL_NULL_HSTMT)
        return run(w, b, w->multi, 0, b->n);
    int rc = 0;
    for (unsigned i = 0; rc == 0 && i < b->n; i++)
        rc = run(w, b, w->one, i, 1);
    return rc;
}

/* Appends "," (unless first) and the decimal v to the array literal i. */
static void arr_put(struct wbatch *b, int i, bool first, long long v)
{
    char tmp[24], *e = tmp + sizeof tmp, *p = e;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do
        *--p = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (v < 0)
        *--p = '-';
    if (!first)
        *--p = ',';
    memcpy(b->arr[i] + b->arr_len[i], p, (size_t)(e - p));
    b->arr_len[i] += e - p;
}

/* Writes "\\x" and the hex digits of src[0..n) to dst (2n + 2 bytes, and a
 * NUL after them); returns the length without the NUL. */
static size_t hex_text(char *dst, const unsigned char *src, size_t n)
{
    char *d = dst;
    *d++ = '\\';
    *d++ = 'x';
    for (size_t i = 0; i < n; i++) {
        *d++ = pc_hex_digit(src[i] >> 4);
        *d++ = pc_hex_digit(src[i]);
    }
    *d = '\0';
    return (size_t)(d - dst);
}

/* Writes src[0..n) to dst as the text of a bytea in PostgreSQL's escape
 * form (printable ASCII as it is, a backslash doubled, any other byte as
 * \ooo) when that fits in 2n + 2 bytes, else in hex form; a NUL after it.
 * Returns the length without the NUL. The escape form of SIP-like data is
 * about its own size, half the hex: fewer bytes to copy, send and decode.
 * Mostly binary data overflows the escape form part way and is encoded
 * again as hex (work on the walk's thread, which the sender overlaps). */
static size_t bytea_text(char *dst, const unsigned char *src, size_t n)
{
    size_t cap = 2 * n + 2, d = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = src[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            if (d + 1 > cap)
                return hex_text(dst, src, n);
            dst[d++] = (char)c;
        } else if (c == '\\') {
            if (d + 2 > cap)
                return hex_text(dst, src, n);
            dst[d++] = '\\';
            dst[d++] = '\\';
        } else {
            if (d + 4 > cap)
                return hex_text(dst, src, n);
            dst[d++] = '\\';
            dst[d++] = (char)('0' + (c >> 6));
            dst[d++] = (char)('0' + ((c >> 3) & 7));
            dst[d++] = (char)('0' + (c & 7));
        }
    }
    dst[d] = '\0';
    return d;
}

/* Makes a full (or last) batch ready to execute: the CPU work of ARRAY's
 * column-wise copy and PACKED's array literals is done here, in the
 * caller's thread, where it overlaps the execution of the other batch. */
void pc_odbc_batch_seal(pc_odbc_writer *w, struct wbatch *b)
{
    b->first = w->rows_sealed;
    w->rows_sealed += b->n;
    b->stmts = 0;
    b->fail.rc = 0;
    if (w->shape == PC_ODBC_SHAPE_ARRAY) {
        size_t wk = b->wk > 0 ? b->wk : 1, wv = b->wv > 0 ? b->wv : 1;
        unsigned char *kc = b->cols, *vc = b->cols + (size_t)b->n * wk;
        for (unsigned i = 0; i < b->n; i++) {
            const struct wrow *r = &b->rows[i];
            memcpy(kc + i * wk, b->buf + r->koff, (size_t)r->klen);
            memcpy(vc + i * wv, b->buf + r->voff, (size_t)r->vlen);
            b->kind[i] = r->klen;
            b->vind[i] = r->vlen;
            b->exps[i] = r->expires;
            b->ctrs[i] = r->is_counter;
            b->status[i] = SQL_PARAM_UNUSED;
        }
        b->processed = 0;
    } else if (w->shape == PC_ODBC_SHAPE_PACKED) {
        for (int i = 0; i < 5; i++) {
            b->arr[i][0] = '{';
            b->arr_len[i] = 1;
        }
        for (unsigned i = 0; i < b->n; i++) {
            const struct wrow *r = &b->rows[i];
            assert(r->voff == r->koff + (size_t)r->klen); /* pc_odbc_writer_add's layout */
            arr_put(b, 0, i == 0, (long long)r->koff + 1);
            arr_put(b, 1, i == 0, (long long)r->klen);
            arr_put(b, 2, i == 0, (long long)r->vlen);
            arr_put(b, 3, i == 0, (long long)r->expires);
            arr_put(b, 4, i == 0, (long long)r->is_counter);
        }
        for (int i = 0; i < 5; i++)
            b->arr[i][b->arr_len[i]++] = '}';
        b->blob_len = (SQLLEN)bytea_text(b->text, b->buf, b->used);
    }
}
