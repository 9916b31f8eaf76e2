/*
 * odbc_sync.c - what the shared-database sync (perf_sync, docs/sync.md)
 * needs from SQL beyond a save and a load: the `source` column of the
 * generation table (which node committed a generation), the generation
 * query replicas poll, and the visit of a snapshot's rows in the same read
 * transaction as its generation row.
 *
 * The column is part of the DDL of new tables; a table created before it
 * existed gets it by ALTER TABLE when the handle may create tables
 * (PC_ODBC_CREATE), and otherwise the handle works without it (sources
 * read as "").
 */
#include "odbc_int.h"

#include <stdio.h>
#include <string.h>

int pc_odbc_sync_schema(pc_odbc *o)
{
    SQLHSTMT st;
    o->has_source = false;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, o->dbc, &st)))
        return 0;
    SQLRETURN r = SQLExecDirect(
        st, (SQLCHAR *)"SELECT source FROM " PC_ODBC_GENERATIONS " WHERE 1 = 0", SQL_NTS);
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    if (SQL_SUCCEEDED(r) || r == SQL_NO_DATA) {
        o->has_source = true;
        return 0;
    }
    if (!(o->cfg.flags & PC_ODBC_CREATE)) {
        pc_odbc_log(o, PC_LOG_WARN,
                    "pcache: %s: " PC_ODBC_GENERATIONS " has no source column (docs/odbc.md): "
                    "generations will not name the node that made them",
                    o->target);
        return 0;
    }
    char sql[200];
    snprintf(sql, sizeof sql,
             "ALTER TABLE " PC_ODBC_GENERATIONS " ADD %ssource VARCHAR(63) NOT NULL DEFAULT ''",
             o->dialect == PC_ODBC_SQLITE ? "COLUMN " : "");
    int rc = pc_odbc_exec(o, sql);
    if (rc == 0) {
        o->has_source = true;
        pc_odbc_log(o, PC_LOG_INFO, "pcache: %s: added the source column to " PC_ODBC_GENERATIONS,
                    o->target);
    }
    return rc;
}

int pc_odbc_set_source(pc_odbc *o, const char *name, const char *source)
{
    if (!o->has_source)
        return 0;
    SQLHSTMT st;
    SQLLEN sl, nl;
    int rc = pc_odbc_stmt_new(o, &st);
    if (rc != 0)
        return rc;
    if (!SQL_SUCCEEDED(pc_odbc_bind_coll(st, 1, source, &sl)) ||
        !SQL_SUCCEEDED(pc_odbc_bind_coll(st, 2, name, &nl)) ||
        !SQL_SUCCEEDED(SQLExecDirect(
            st, (SQLCHAR *)"UPDATE " PC_ODBC_GENERATIONS " SET source = ? WHERE collection = ?",
            SQL_NTS)))
        rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st,
                          "%s: collection \"%s\": recording the source of the generation",
                          o->target, name);
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return rc;
}

/* The generation row with its source, inside the caller's transaction when
 * one is open. *found = false when absent. */
static int read_gen_src(pc_odbc *o, const char *name, uint64_t *gen, char *source, size_t srclen,
                        bool *found)
{
    if (!o->has_source) {
        if (source != NULL && srclen > 0)
            source[0] = '\0';
        return pc_odbc_read_generation(o, name, gen, found);
    }
    SQLHSTMT st;
    SQLLEN nl, gi = 0, si = 0;
    SQLBIGINT g = 0;
    char src[PC_SYNC_NODE_MAX + 2] = "";
    int rc = pc_odbc_stmt_new(o, &st);
    if (rc != 0)
        return rc;
    SQLRETURN r = pc_odbc_bind_coll(st, 1, name, &nl);
    if (SQL_SUCCEEDED(r))
        r = SQLExecDirect(st,
                          (SQLCHAR *)"SELECT generation, source FROM " PC_ODBC_GENERATIONS
                                     " WHERE collection = ?",
                          SQL_NTS);
    if (SQL_SUCCEEDED(r))
        r = SQLFetch(st);
    if (r == SQL_NO_DATA) {
        *found = false;
        *gen = 0;
        if (source != NULL && srclen > 0)
            source[0] = '\0';
    } else if (!SQL_SUCCEEDED(r) || !SQL_SUCCEEDED(SQLGetData(st, 1, SQL_C_SBIGINT, &g, 0, &gi)) ||
               !SQL_SUCCEEDED(SQLGetData(st, 2, SQL_C_CHAR, src, sizeof src, &si)) ||
               gi == SQL_NULL_DATA || g < 0) {
        rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st, "%s: reading the generation of \"%s\"",
                          o->target, name);
    } else {
        /* a NULL or over-long source (written by someone else) reads as "" */
        if (si == SQL_NULL_DATA || si < 0 || (size_t)si > PC_SYNC_NODE_MAX)
            src[0] = '\0';
        *found = true;
        *gen = (uint64_t)g;
        if (source != NULL && srclen > 0)
            snprintf(source, srclen, "%s", src);
    }
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return rc;
}

int pc_odbc_generation_src(pc_odbc *o, const char *name, uint64_t *gen, char *source, size_t srclen)
{
    uint64_t g = 0;
    bool found = false;
    int rc = pc_odbc_enter_args(o, name != NULL && gen != NULL);
    if (rc == 0)
        rc = read_gen_src(o, name, &g, source, srclen, &found);
    if (rc == 0 && !found)
        rc = PC_ENOTFOUND;
    if (rc == 0)
        *gen = g;
    return rc;
}

struct visit_ctx {
    pc_persist_row_fn fn;
    void *ctx;
};

static int visit_row(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                     int64_t expires_ms, bool is_counter)
{
    struct visit_ctx *v = ctx;
    return v->fn(v->ctx, key, klen, val, vlen, expires_ms, is_counter ? 1 : 0);
}

int pc_odbc_visit(pc_odbc *o, const char *name, uint64_t newer_than, pc_persist_row_fn fn,
                  void *ctx, uint64_t *gen, char *source, size_t srclen, uint64_t *skipped_expired)
{
    if (o == NULL || name == NULL || fn == NULL || gen == NULL)
        return PC_EINVAL;
    int rc = pc_odbc_enter(o);
    if (rc != 0)
        return rc;
    uint64_t g = 0, skipped = 0;
    bool found = false;
    struct visit_ctx v = {fn, ctx};
    /* REPEATABLE READ: the rows are those of the generation read first */
    if ((rc = pc_odbc_begin(o, true)) != 0)
        return rc;
    rc = read_gen_src(o, name, &g, source, srclen, &found);
    if (rc == 0 && !found) {
        snprintf(o->msg, sizeof o->msg, "%s: collection \"%s\" was never saved there", o->target,
                 name);
        rc = PC_ENOTFOUND;
    }
    if (rc == 0 && g > newer_than)
        rc = pc_odbc_read_rows(o, name, pc_wall_ms(), visit_row, &v, &skipped);
    rc = pc_odbc_end_rc(o, rc);
    if (rc != 0)
        return rc;
    *gen = g;
    if (skipped_expired != NULL)
        *skipped_expired = skipped;
    return 0;
}
