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

static int stmt_new(pc_odbc *o, SQLHSTMT *st)
{
    if (SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, o->dbc, st)))
        return 0;
    *st = SQL_NULL_HSTMT;
    return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_DBC, o->dbc, "%s: cannot allocate a statement",
                        o->target);
}

static SQLRETURN bind_name(SQLHSTMT st, SQLUSMALLINT i, const char *name, SQLLEN *len)
{
    *len = (SQLLEN)strlen(name);
    return SQLBindParameter(st, i, SQL_PARAM_INPUT, SQL_C_CHAR, SQL_VARCHAR, PC_COLL_NAME_MAX, 0,
                            (SQLPOINTER)name, *len + 1, len);
}

int pc_odbc_read_generation(pc_odbc *o, const char *name, uint64_t *gen, bool *found)
{
    SQLHSTMT st;
    SQLLEN nl, ind = 0;
    SQLBIGINT g = 0;
    int rc = stmt_new(o, &st);
    if (rc != 0)
        return rc;
    bind_name(st, 1, name, &nl);
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
    int rc = stmt_new(o, &st);
    if (rc != 0)
        return rc;
    bind_name(st, 1, name, &nl);
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
    /* +1: a zero-length buffer is not a buffer, and a value exactly as long
     * as the buffer must not be confused with a truncated one. */
    size_t kw = (size_t)mk + 1, vw = (size_t)mv + 1;
    size_t per = o->cfg.batch_rows != 0 ? o->cfg.batch_rows : 1000;
    size_t fit = o->cfg.batch_bytes / (kw + vw);
    if (fit < per)
        per = fit > 0 ? fit : 1;
    unsigned char *kb = malloc(per * kw), *vb = malloc(per * vw);
    SQLLEN *ki = calloc(per, sizeof *ki), *vi = calloc(per, sizeof *vi);
    SQLLEN *ei = calloc(per, sizeof *ei), *ci = calloc(per, sizeof *ci);
    SQLBIGINT *ex = calloc(per, sizeof *ex);
    SQLSMALLINT *ct = calloc(per, sizeof *ct);
    SQLUSMALLINT *status = calloc(per, sizeof *status);
    SQLULEN fetched = 0;
    SQLLEN nl;
    SQLHSTMT st = SQL_NULL_HSTMT;
    if (kb == NULL || vb == NULL || ki == NULL || vi == NULL || ei == NULL || ci == NULL ||
        ex == NULL || ct == NULL || status == NULL) {
        rc = PC_EHEAP;
        goto out;
    }
    if ((rc = stmt_new(o, &st)) != 0)
        goto out;
    if (!SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_ROW_BIND_TYPE, SQL_BIND_BY_COLUMN, 0)) ||
        !SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_ROW_ARRAY_SIZE, (SQLPOINTER)per, 0)) ||
        !SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_ROW_STATUS_PTR, status, 0)) ||
        !SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_ROWS_FETCHED_PTR, &fetched, 0))) {
        rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st, "%s: the driver refuses block cursors",
                          o->target);
        goto out;
    }
    if (!SQL_SUCCEEDED(bind_name(st, 1, name, &nl)) ||
        !SQL_SUCCEEDED(SQLBindCol(st, 1, SQL_C_BINARY, kb, (SQLLEN)kw, ki)) ||
        !SQL_SUCCEEDED(SQLBindCol(st, 2, SQL_C_BINARY, vb, (SQLLEN)vw, vi)) ||
        !SQL_SUCCEEDED(SQLBindCol(st, 3, SQL_C_SBIGINT, ex, 0, ei)) ||
        !SQL_SUCCEEDED(SQLBindCol(st, 4, SQL_C_SSHORT, ct, 0, ci))) {
        rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st, "%s: binding the columns of \"%s\"",
                          o->target, name);
        goto out;
    }
    if (!SQL_SUCCEEDED(SQLExecDirect(
            st,
            (SQLCHAR *)"SELECT pkey, pvalue, expires, is_counter FROM " PC_ODBC_ENTRIES
                       " WHERE collection = ?",
            SQL_NTS))) {
        rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st, "%s: reading collection \"%s\"",
                          o->target, name);
        goto out;
    }
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
        for (SQLULEN i = 0; i < fetched && rc == 0; i++) {
            if (status[i] != SQL_ROW_SUCCESS && status[i] != SQL_ROW_SUCCESS_WITH_INFO) {
                rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st,
                                  "%s: collection \"%s\": row %llu failed to fetch", o->target,
                                  name, (unsigned long long)(done + i));
                break;
            }
            if (ki[i] < 0 || vi[i] < 0 || (size_t)ki[i] >= kw || (size_t)vi[i] >= vw ||
                ei[i] == SQL_NULL_DATA || ci[i] == SQL_NULL_DATA) {
                rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_ENV, SQL_NULL_HANDLE,
                                  "%s: collection \"%s\": row %llu is NULL or longer than its "
                                  "size query said (key %lld, value %lld bytes): not loaded",
                                  o->target, name, (unsigned long long)(done + i), (long long)ki[i],
                                  (long long)vi[i]);
                break;
            }
            if (ex[i] != 0 && ex[i] <= now_ms) {
                skipped++;
                continue;
            }
            rc = fn(ctx, kb + i * kw, (size_t)ki[i], vb + i * vw, (size_t)vi[i], ex[i], ct[i] != 0);
        }
        if (rc != 0)
            goto out;
        done += fetched;
        if (o->cfg.progress != NULL &&
            (rc = o->cfg.progress(o->cfg.progress_ctx, name, done, nrows)) != 0)
            goto out;
    }
    if (skipped_expired != NULL)
        *skipped_expired = skipped;
out:
    if (st != SQL_NULL_HSTMT)
        SQLFreeHandle(SQL_HANDLE_STMT, st);
    free(kb);
    free(vb);
    free(ki);
    free(vi);
    free(ei);
    free(ci);
    free(ex);
    free(ct);
    free(status);
    return rc;
}
