/*
 * odbc_read.c - reading a collection back: the generation row, and the
 * rows through a block cursor (SQL_ATTR_ROW_ARRAY_SIZE, column-wise
 * binding) whose buffers are sized from the longest key and value of the
 * collection, so that no value is ever truncated and the memory of a load
 * is bounded by batch_bytes (plus one maximal row), not by the collection.
 *
 * The size query and the SELECT run in the caller's transaction, which
 * pc_odbc_load opens REPEATABLE READ: both see the same rows. A row longer
 * than the buffers anyway (a driver or isolation level that does not keep
 * that promise) is an error, never a silently shortened value.
 */
#include "odbc_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pc_odbc_read_generation(pc_odbc *o, const char *name, uint64_t *gen, bool *found)
{
    SQLHSTMT st;
    SQLLEN nl, ind = 0;
    SQLBIGINT g = 0;
    int rc = pc_odbc_stmt_new(o, &st);
    if (rc != 0)
        return rc;
    pc_odbc_bind_coll(st, 1, name, &nl);
    SQLRETURN r = SQLExecDirect(
        st, (SQLCHAR *)"SELECT generation FROM " PC_ODBC_GENERATIONS " WHERE collection = ?",
        SQL_NTS);
    if (!SQL_SUCCEEDED(r)) {
        rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st, "%s: reading the generation of \"%s\"",
                          o->target, name);
        goto out;
    }
    r = SQLFetch(st);
    if (r == SQL_NO_DATA) {
        *found = false;
        *gen = 0;
    } else if (!SQL_SUCCEEDED(r) || !SQL_SUCCEEDED(SQLGetData(st, 1, SQL_C_SBIGINT, &g, 0, &ind)) ||
               ind == SQL_NULL_DATA || g < 0) {
        rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st, "%s: reading the generation of \"%s\"",
                          o->target, name);
    } else {
        *found = true;
        *gen = (uint64_t)g;
    }
out:
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return rc;
}

int pc_odbc_coll_sizes(pc_odbc *o, const char *name, int64_t now_ms, uint64_t *rows,
                       uint64_t *max_k, uint64_t *max_v, uint64_t *bytes)
{
    (void)now_ms; /* sizes cover expired rows too: the SELECT returns them */
    SQLHSTMT st;
    SQLLEN nl;
    int rc = pc_odbc_stmt_new(o, &st);
    if (rc != 0)
        return rc;
    pc_odbc_bind_coll(st, 1, name, &nl);
    SQLRETURN r = SQLExecDirect(
        st,
        (SQLCHAR *)"SELECT COUNT(*), COALESCE(MAX(LENGTH(pkey)), 0), "
                   "COALESCE(MAX(LENGTH(pvalue)), 0), "
                   "COALESCE(SUM(LENGTH(pkey) + LENGTH(pvalue)), 0) FROM " PC_ODBC_ENTRIES
                   " WHERE collection = ?",
        SQL_NTS);
    SQLBIGINT v[4] = {0, 0, 0, 0};
    if (SQL_SUCCEEDED(r))
        r = SQLFetch(st);
    for (SQLUSMALLINT i = 0; SQL_SUCCEEDED(r) && i < 4; i++) {
        SQLLEN ind = 0;
        r = SQLGetData(st, (SQLUSMALLINT)(i + 1), SQL_C_SBIGINT, &v[i], 0, &ind);
        if (ind == SQL_NULL_DATA || v[i] < 0)
            r = SQL_ERROR;
    }
    if (!SQL_SUCCEEDED(r))
        rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st, "%s: sizing collection \"%s\"", o->target,
                          name);
    else {
        *rows = (uint64_t)v[0];
        *max_k = (uint64_t)v[1];
        *max_v = (uint64_t)v[2];
        *bytes = (uint64_t)v[3];
    }
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return rc;
}

/* One block cursor's column buffers: per rows of a key up to kw - 1 and
 * a value up to vw - 1 bytes, their lengths and indicators. */
struct rows_buf {
    size_t per, kw, vw;
    unsigned char *kb, *vb;
    SQLLEN *ki, *vi, *ei, *ci;
    SQLBIGINT *ex;
    SQLSMALLINT *ct;
    SQLUSMALLINT *status;
    SQLULEN fetched;
};

static void rows_buf_free(struct rows_buf *b)
{
    free(b->kb);
    free(b->vb);
    free(b->ki);
    free(b->vi);
    free(b->ei);
    free(b->ci);
    free(b->ex);
    free(b->ct);
    free(b->status);
}

/* Buffers for the longest key mk and value mv, as many rows as the
 * configuration's batch allows. 0 or PC_EHEAP (b freed by the caller). */
static int rows_buf_alloc(const pc_odbc *o, uint64_t mk, uint64_t mv, struct rows_buf *b)
{
    /* +1: a zero-length buffer is not a buffer, and a value exactly as long
     * as the buffer must not be confused with a truncated one. */
    b->kw = (size_t)mk + 1;
    b->vw = (size_t)mv + 1;
    b->per = o->cfg.batch_rows != 0 ? o->cfg.batch_rows : 1000;
    size_t fit = o->cfg.batch_bytes / (b->kw + b->vw);
    if (fit < b->per)
        b->per = fit > 0 ? fit : 1;
    size_t per = b->per;
    b->kb = malloc(per * b->kw);
    b->vb = malloc(per * b->vw);
    b->ki = calloc(per, sizeof *b->ki);
    b->vi = calloc(per, sizeof *b->vi);
    b->ei = calloc(per, sizeof *b->ei);
    b->ci = calloc(per, sizeof *b->ci);
    b->ex = calloc(per, sizeof *b->ex);
    b->ct = calloc(per, sizeof *b->ct);
    b->status = calloc(per, sizeof *b->status);
    return b->kb == NULL || b->vb == NULL || b->ki == NULL || b->vi == NULL || b->ei == NULL ||
                   b->ci == NULL || b->ex == NULL || b->ct == NULL || b->status == NULL
               ? PC_EHEAP
               : 0;
}

/* The collection's rows selected on st, bound by column into b. */
static int rows_select(pc_odbc *o, SQLHSTMT st, const char *name, struct rows_buf *b, SQLLEN *nl)
{
    if (!SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_ROW_BIND_TYPE, SQL_BIND_BY_COLUMN, 0)) ||
        !SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_ROW_ARRAY_SIZE, (SQLPOINTER)b->per, 0)) ||
        !SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_ROW_STATUS_PTR, b->status, 0)) ||
        !SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_ROWS_FETCHED_PTR, &b->fetched, 0)))
        return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st, "%s: the driver refuses block cursors",
                            o->target);
    if (!SQL_SUCCEEDED(pc_odbc_bind_coll(st, 1, name, nl)) ||
        !SQL_SUCCEEDED(SQLBindCol(st, 1, SQL_C_BINARY, b->kb, (SQLLEN)b->kw, b->ki)) ||
        !SQL_SUCCEEDED(SQLBindCol(st, 2, SQL_C_BINARY, b->vb, (SQLLEN)b->vw, b->vi)) ||
        !SQL_SUCCEEDED(SQLBindCol(st, 3, SQL_C_SBIGINT, b->ex, 0, b->ei)) ||
        !SQL_SUCCEEDED(SQLBindCol(st, 4, SQL_C_SSHORT, b->ct, 0, b->ci)))
        return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st, "%s: binding the columns of \"%s\"",
                            o->target, name);
    if (!SQL_SUCCEEDED(SQLExecDirect(
            st,
            (SQLCHAR *)"SELECT pkey, pvalue, expires, is_counter FROM " PC_ODBC_ENTRIES
                       " WHERE collection = ?",
            SQL_NTS)))
        return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st, "%s: reading collection \"%s\"",
                            o->target, name);
    return 0;
}

/* The rows of one fetch (done before it) handed to fn; expired ones counted
 * in *skipped. A row that failed or outgrew its buffer fails the read. */
static int rows_hand(pc_odbc *o, SQLHSTMT st, const char *name, const struct rows_buf *b,
                     uint64_t done, int64_t now_ms, pc_odbc_row_fn fn, void *ctx, uint64_t *skipped)
{
    int rc = 0;
    for (SQLULEN i = 0; i < b->fetched && rc == 0; i++) {
        if (b->status[i] != SQL_ROW_SUCCESS && b->status[i] != SQL_ROW_SUCCESS_WITH_INFO)
            return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st,
                                "%s: collection \"%s\": row %llu failed to fetch", o->target, name,
                                (unsigned long long)(done + i));
        if (b->ki[i] < 0 || b->vi[i] < 0 || (size_t)b->ki[i] >= b->kw ||
            (size_t)b->vi[i] >= b->vw || b->ei[i] == SQL_NULL_DATA || b->ci[i] == SQL_NULL_DATA)
            return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_ENV, SQL_NULL_HANDLE,
                                "%s: collection \"%s\": row %llu is NULL or longer than its "
                                "size query said (key %lld, value %lld bytes): not loaded",
                                o->target, name, (unsigned long long)(done + i),
                                (long long)b->ki[i], (long long)b->vi[i]);
        if (b->ex[i] != 0 && b->ex[i] <= now_ms) {
            (*skipped)++;
            continue;
        }
        rc = fn(ctx, b->kb + i * b->kw, (size_t)b->ki[i], b->vb + i * b->vw, (size_t)b->vi[i],
                b->ex[i], b->ct[i] != 0);
    }
    return rc;
}

int pc_odbc_read_rows(pc_odbc *o, const char *name, int64_t now_ms, pc_odbc_row_fn fn, void *ctx,
                      uint64_t *skipped_expired)
{
    uint64_t nrows = 0, mk = 0, mv = 0, bytes = 0, done = 0, skipped = 0;
    int rc = pc_odbc_coll_sizes(o, name, now_ms, &nrows, &mk, &mv, &bytes);
    if (rc != 0)
        return rc;
    if (mk > PC_KEY_MAX || mv > PC_VALUE_MAX)
        return pc_odbc_fail(o, PC_ETOOBIG, SQL_HANDLE_ENV, SQL_NULL_HANDLE,
                            "%s: collection \"%s\" holds a key of %llu bytes or a value of %llu "
                            "bytes, over the engine's limits (%u, %u): nothing loaded",
                            o->target, name, (unsigned long long)mk, (unsigned long long)mv,
                            PC_KEY_MAX, PC_VALUE_MAX);
    struct rows_buf b;
    memset(&b, 0, sizeof b);
    SQLLEN nl;
    SQLHSTMT st = SQL_NULL_HSTMT;
    if ((rc = rows_buf_alloc(o, mk, mv, &b)) != 0 || (rc = pc_odbc_stmt_new(o, &st)) != 0 ||
        (rc = rows_select(o, st, name, &b, &nl)) != 0)
        goto out;
    for (;;) {
        SQLRETURN r = SQLFetch(st);
        if (r == SQL_NO_DATA)
            break;
        if (!SQL_SUCCEEDED(r)) {
            rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st,
                              "%s: reading collection \"%s\" after %llu rows", o->target, name,
                              (unsigned long long)done);
            goto out;
        }
        if ((rc = rows_hand(o, st, name, &b, done, now_ms, fn, ctx, &skipped)) != 0)
            goto out;
        done += b.fetched;
        if (o->cfg.progress != NULL &&
            (rc = o->cfg.progress(o->cfg.progress_ctx, name, done, nrows)) != 0)
            goto out;
    }
    if (skipped_expired != NULL)
        *skipped_expired = skipped;
out:
    if (st != SQL_NULL_HSTMT)
        SQLFreeHandle(SQL_HANDLE_STMT, st);
    rows_buf_free(&b);
    return rc;
}
