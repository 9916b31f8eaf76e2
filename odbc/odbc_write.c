/*
 * odbc_write.c - the batch writer: replaces the rows of one collection
 * inside the caller's transaction (pc_odbc_save and pc_odbc_export).
 *
 * Statement shape per dialect, measured (issue #6, docs/odbc.md §4):
 *   SQLite      a multi-row INSERT ... VALUES (..),(..) of 100 rows.
 *               libsqliteodbc compiles (sqlite3_prepare) every INSERT again
 *               at every SQLExecute, prepared or not: one row per statement
 *               spends most of its time in SQLite's parser, 100 rows pay it
 *               once (500 parameters: under the 999 of SQLite before 3.32).
 *   PostgreSQL  PACKED: one INSERT ... SELECT per batch of up to 5000 rows
 *               whose keys and values travel as ONE bytea parameter (the
 *               batch buffer as it is, sent in binary by psqlODBC's
 *               server-side prepare) and whose offsets, lengths, expiries
 *               and counter flags travel as five array literals; the server
 *               cuts the rows with substring(). Seven parameters per batch
 *               instead of five per row: the 250-row VALUES statement spent
 *               most of the server's time building and evaluating 1250
 *               parameter expressions per execution.
 *   MariaDB     parameter arrays (SQL_ATTR_PARAMSET_SIZE): Connector/ODBC
 *               sends them with the bulk protocol.
 *   generic     one-row INSERT: portable.
 * Every parameter is re-bound (SQLBindParameter) before every execute, with
 * its exact length: the one binding discipline that returned every binary
 * value intact on every driver. libsqliteodbc converts a binary parameter
 * once per binding: bound once with only its length indicator changed per
 * row, or bound as an array, it sent later rows with the first row's length
 * (corrupted variable-length values). So SQLite never uses ARRAY.
 *
 * Memory is bounded: a batch holds at most per_stmt rows and about
 * batch_bytes of keys and values (plus one maximal row), whatever the size
 * of the collection. A row is copied into the batch because the walk's
 * pointers are valid only during its callback; each key is followed by its
 * value in the batch buffer (PACKED relies on it).
 */
#include "odbc_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wrow {
    size_t koff, voff;
    SQLLEN klen, vlen;
    SQLBIGINT expires;
    SQLSMALLINT is_counter;
};

struct pc_odbc_writer {
    pc_odbc *o;
    SQLHSTMT one, multi; /* one-row and per_stmt-row INSERTs (multi: MULTI and PACKED) */
    SQLHSTMT aux;        /* generation row and DELETE */
    int shape;           /* enum pc_odbc_shape, never DEFAULT */
    unsigned per_stmt;   /* rows per batch */
    char name[PC_COLL_NAME_MAX + 1];
    SQLLEN name_len;
    struct wrow *rows; /* per_stmt entries */
    unsigned n;        /* rows buffered */
    unsigned char *buf;
    size_t used, cap_bytes, buf_size;
    uint64_t rows_done, batches, total;
    /* ARRAY: the batch re-laid column-wise, each key in a wk-byte slot and
     * each value in a wv-byte slot (the widest of the batch); the add path
     * keeps per_stmt x (wk + wv) within cap_bytes, one row excepted */
    size_t wk, wv;
    unsigned char *cols;
    SQLLEN *kind, *vind;
    SQLBIGINT *exps;
    SQLSMALLINT *ctrs;
    char *names;
    SQLLEN *nind;
    SQLUSMALLINT *status;
    SQLULEN processed;
    /* PACKED: the array literals "{1,217,...}" of the batch (offsets, key
     * lengths, value lengths, expiries, counter flags), PACKED_NUM bytes
     * per row each, and the length of the bytea parameter (w->buf) */
    char *arr[5];
    SQLLEN arr_len[5];
    SQLLEN blob_len;
};

#define PACKED_NUM 22 /* ",-9223372036854775808" */

#define COLS "(collection, pkey, pvalue, expires, is_counter)"

static int default_shape(int dialect)
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
static int prepare(pc_odbc *o, SQLHSTMT *st, unsigned rows)
{
    size_t len = sizeof "INSERT INTO " PC_ODBC_ENTRIES " " COLS " VALUES " + (size_t)rows * 12 +
                 sizeof PACKED_SQL;
    char *sql = malloc(len);
    if (sql == NULL)
        return PC_ESYS;
    size_t n = (size_t)snprintf(sql, len, "%s",
                                rows == 0 ? PACKED_SQL
                                          : "INSERT INTO " PC_ODBC_ENTRIES " " COLS " VALUES ");
    for (unsigned i = 0; i < rows; i++)
        n += (size_t)snprintf(sql + n, len - n, "%s(?,?,?,?,?)", i ? "," : "");
    int rc = 0;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, o->dbc, st))) {
        *st = SQL_NULL_HSTMT;
        rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_DBC, o->dbc, "%s: cannot allocate a statement",
                          o->target);
    } else if (!SQL_SUCCEEDED(SQLPrepare(*st, (SQLCHAR *)sql, SQL_NTS))) {
        rc = rows == 0 ? pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, *st,
                                      "%s: cannot prepare the packed INSERT", o->target)
                       : pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, *st,
                                      "%s: cannot prepare the INSERT of %u rows", o->target, rows);
    }
    free(sql);
    return rc;
}

int pc_odbc_writer_new(pc_odbc *o, pc_odbc_writer **out)
{
    pc_odbc_writer *w = calloc(1, sizeof *w);
    if (w == NULL)
        return PC_ESYS;
    w->o = o;
    w->shape = o->cfg.shape != PC_ODBC_SHAPE_DEFAULT ? o->cfg.shape : default_shape(o->dialect);
    if (w->shape < PC_ODBC_SHAPE_ROW || w->shape > PC_ODBC_SHAPE_PACKED)
        w->shape = PC_ODBC_SHAPE_ROW;
    if (w->shape == PC_ODBC_SHAPE_ARRAY && o->dialect == PC_ODBC_SQLITE)
        w->shape = PC_ODBC_SHAPE_MULTI; /* see the file comment: arrays corrupt values there */
    if (w->shape == PC_ODBC_SHAPE_PACKED && o->dialect != PC_ODBC_POSTGRESQL)
        w->shape = PC_ODBC_SHAPE_MULTI; /* its SQL is PostgreSQL's */
    w->per_stmt = o->cfg.batch_rows != 0             ? o->cfg.batch_rows
                  : w->shape == PC_ODBC_SHAPE_ARRAY  ? 1000
                  : w->shape == PC_ODBC_SHAPE_PACKED ? 5000
                  : o->dialect == PC_ODBC_SQLITE     ? 100
                                                     : 250;
    if (w->shape == PC_ODBC_SHAPE_ROW)
        w->per_stmt = 1;
    if (w->shape != PC_ODBC_SHAPE_PACKED && w->per_stmt > 1000)
        w->per_stmt = 1000; /* 5000 parameters: under every driver's limit */
    if (w->per_stmt > 100000)
        w->per_stmt = 100000; /* PACKED has 7 parameters whatever its rows */
    w->cap_bytes = o->cfg.batch_bytes;
    if (w->shape == PC_ODBC_SHAPE_PACKED && w->cap_bytes > 256u * 1024 * 1024)
        w->cap_bytes = 256u * 1024 * 1024; /* offsets are INTEGERs; a bytea stops at 1 GiB */
    w->buf_size = w->cap_bytes + PC_KEY_MAX + PC_VALUE_MAX + 64; /* one maximal row always fits */
    w->rows = calloc(w->per_stmt, sizeof *w->rows);
    w->buf = malloc(w->buf_size);
    int rc = 0;
    if (w->rows == NULL || w->buf == NULL)
        rc = PC_ESYS;
    if (rc == 0 && w->shape == PC_ODBC_SHAPE_ARRAY) {
        unsigned n = w->per_stmt;
        w->cols = malloc(w->buf_size + 2 * (size_t)n); /* + the 1-byte minimum slots */
        w->kind = calloc(n, sizeof *w->kind);
        w->vind = calloc(n, sizeof *w->vind);
        w->exps = calloc(n, sizeof *w->exps);
        w->ctrs = calloc(n, sizeof *w->ctrs);
        w->names = calloc(n, PC_COLL_NAME_MAX + 1);
        w->nind = calloc(n, sizeof *w->nind);
        w->status = calloc(n, sizeof *w->status);
        if (w->cols == NULL || w->kind == NULL || w->vind == NULL || w->exps == NULL ||
            w->ctrs == NULL || w->names == NULL || w->nind == NULL || w->status == NULL)
            rc = PC_ESYS;
    }
    for (int i = 0; rc == 0 && w->shape == PC_ODBC_SHAPE_PACKED && i < 5; i++)
        if ((w->arr[i] = malloc((size_t)w->per_stmt * PACKED_NUM + 3)) == NULL)
            rc = PC_ESYS;
    if (rc == 0)
        rc = prepare(o, &w->one, 1);
    if (rc == 0 && w->shape == PC_ODBC_SHAPE_MULTI)
        rc = prepare(o, &w->multi, w->per_stmt);
    if (rc == 0 && w->shape == PC_ODBC_SHAPE_PACKED)
        rc = prepare(o, &w->multi, 0);
    if (rc == 0 && !SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, o->dbc, &w->aux))) {
        w->aux = SQL_NULL_HSTMT;
        rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_DBC, o->dbc, "%s: cannot allocate a statement",
                          o->target);
    }
    if (rc != 0) {
        pc_odbc_writer_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

void pc_odbc_writer_free(pc_odbc_writer *w)
{
    if (w == NULL)
        return;
    if (w->one != SQL_NULL_HSTMT)
        SQLFreeHandle(SQL_HANDLE_STMT, w->one);
    if (w->multi != SQL_NULL_HSTMT)
        SQLFreeHandle(SQL_HANDLE_STMT, w->multi);
    if (w->aux != SQL_NULL_HSTMT)
        SQLFreeHandle(SQL_HANDLE_STMT, w->aux);
    free(w->rows);
    free(w->buf);
    free(w->cols);
    free(w->kind);
    free(w->vind);
    free(w->exps);
    free(w->ctrs);
    free(w->names);
    free(w->nind);
    free(w->status);
    for (int i = 0; i < 5; i++)
        free(w->arr[i]);
    free(w);
}

uint64_t pc_odbc_writer_rows(const pc_odbc_writer *w)
{
    return w->rows_done;
}
uint64_t pc_odbc_writer_batches(const pc_odbc_writer *w)
{
    return w->batches;
}

/* Runs sql on the aux statement with the parameters bound by the caller;
 * *count (may be NULL) receives the affected rows. A parameter the driver
 * refused to bind fails the execute (SQLSTATE 07002), which is checked. */
static int aux_exec(pc_odbc_writer *w, const char *what, const char *sql, SQLLEN *count)
{
    pc_odbc *o = w->o;
    SQLRETURN r = SQLExecDirect(w->aux, (SQLCHAR *)sql, SQL_NTS);
    int rc = 0;
    if (!SQL_SUCCEEDED(r) && r != SQL_NO_DATA)
        rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, w->aux, "%s: collection \"%s\": %s",
                          o->target, w->name, what);
    else if (count != NULL && !SQL_SUCCEEDED(SQLRowCount(w->aux, count)))
        *count = r == SQL_NO_DATA ? 0 : -1;
    SQLFreeStmt(w->aux, SQL_CLOSE);
    SQLFreeStmt(w->aux, SQL_RESET_PARAMS);
    return rc;
}

static SQLRETURN bind_name(pc_odbc_writer *w, SQLHSTMT st, SQLUSMALLINT i)
{
    return SQLBindParameter(st, i, SQL_PARAM_INPUT, SQL_C_CHAR, SQL_VARCHAR, PC_COLL_NAME_MAX, 0,
                            w->name, (SQLLEN)sizeof w->name, &w->name_len);
}

int pc_odbc_writer_begin(pc_odbc_writer *w, const char *name, uint64_t total)
{
    size_t nl = strlen(name);
    if (nl == 0 || nl > PC_COLL_NAME_MAX)
        return PC_EINVAL;
    memcpy(w->name, name, nl + 1);
    w->name_len = (SQLLEN)nl;
    w->n = 0;
    w->used = 0;
    w->rows_done = 0;
    w->batches = 0;
    w->total = total;
    w->wk = w->wv = 0;
    for (unsigned i = 0; w->names != NULL && i < w->per_stmt; i++) {
        memcpy(w->names + (size_t)i * (PC_COLL_NAME_MAX + 1), name, nl + 1);
        w->nind[i] = (SQLLEN)nl;
    }
    /* The generation row first: its row lock queues a concurrent saver of
     * the same collection here, before either deleted anything. */
    SQLBIGINT now = pc_odbc_wall_ms();
    SQLLEN changed = 0;
    SQLBindParameter(w->aux, 1, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, &now, 0, NULL);
    bind_name(w, w->aux, 2);
    int rc = aux_exec(w, "bumping the generation row",
                      "UPDATE " PC_ODBC_GENERATIONS " SET generation = generation + 1, "
                      "saved_at = ? WHERE collection = ?",
                      &changed);
    if (rc == 0 && changed <= 0) {
        bind_name(w, w->aux, 1);
        SQLBindParameter(w->aux, 2, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, &now, 0,
                         NULL);
        rc = aux_exec(w, "inserting the generation row",
                      "INSERT INTO " PC_ODBC_GENERATIONS " (collection, generation, entries, "
                      "saved_at) VALUES (?, 1, 0, ?)",
                      NULL);
    }
    if (rc == 0) {
        bind_name(w, w->aux, 1);
        rc = aux_exec(w, "deleting the previous rows",
                      "DELETE FROM " PC_ODBC_ENTRIES " WHERE collection = ?", NULL);
    }
    return rc;
}

/* Binds the five parameters of one row; false when the driver refused one. */
static bool bind_row(pc_odbc_writer *w, SQLHSTMT st, unsigned slot, struct wrow *r)
{
    SQLUSMALLINT p = (SQLUSMALLINT)(slot * 5 + 1);
    /* A zero-length value still needs a valid pointer and column size 1. */
    bool ok = SQL_SUCCEEDED(bind_name(w, st, p));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, p + 1, SQL_PARAM_INPUT, SQL_C_BINARY,
                                              SQL_VARBINARY, r->klen > 0 ? (SQLULEN)r->klen : 1, 0,
                                              w->buf + r->koff, r->klen, &r->klen));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, p + 2, SQL_PARAM_INPUT, SQL_C_BINARY,
                                              SQL_VARBINARY, r->vlen > 0 ? (SQLULEN)r->vlen : 1, 0,
                                              w->buf + r->voff, r->vlen, &r->vlen));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, p + 3, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT,
                                              0, 0, &r->expires, 0, NULL));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, p + 4, SQL_PARAM_INPUT, SQL_C_SSHORT,
                                              SQL_SMALLINT, 0, 0, &r->is_counter, 0, NULL));
    return ok;
}

static int run(pc_odbc_writer *w, SQLHSTMT st, unsigned first, unsigned count)
{
    for (unsigned i = 0; i < count; i++)
        if (!bind_row(w, st, i, &w->rows[first + i]))
            return pc_odbc_fail(w->o, PC_EIO, SQL_HANDLE_STMT, st,
                                "%s: collection \"%s\": binding the parameters of row %llu",
                                w->o->target, w->name,
                                (unsigned long long)(w->rows_done + first + i));
    SQLRETURN r = SQLExecute(st);
    if (!SQL_SUCCEEDED(r))
        return pc_odbc_fail(w->o, PC_EIO, SQL_HANDLE_STMT, st,
                            "%s: collection \"%s\": INSERT failed after %llu rows", w->o->target,
                            w->name, (unsigned long long)(w->rows_done + first));
    SQLFreeStmt(st, SQL_CLOSE);
    w->batches++;
    return 0;
}

/* ARRAY: one execute with n parameter sets bound column-wise. The driver
 * must report every set processed and successful: anything else fails the
 * save (never a partially inserted batch that goes unnoticed). */
static int run_array(pc_odbc_writer *w)
{
    pc_odbc *o = w->o;
    SQLHSTMT st = w->one;
    size_t wk = w->wk > 0 ? w->wk : 1, wv = w->wv > 0 ? w->wv : 1;
    unsigned char *kc = w->cols, *vc = w->cols + (size_t)w->n * wk;
    for (unsigned i = 0; i < w->n; i++) {
        const struct wrow *r = &w->rows[i];
        memcpy(kc + i * wk, w->buf + r->koff, (size_t)r->klen);
        memcpy(vc + i * wv, w->buf + r->voff, (size_t)r->vlen);
        w->kind[i] = r->klen;
        w->vind[i] = r->vlen;
        w->exps[i] = r->expires;
        w->ctrs[i] = r->is_counter;
        w->status[i] = SQL_PARAM_UNUSED;
    }
    w->processed = 0;
    SQLFreeStmt(st, SQL_RESET_PARAMS);
    if (!SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_PARAM_BIND_TYPE, SQL_PARAM_BIND_BY_COLUMN, 0)) ||
        !SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_PARAMSET_SIZE, (SQLPOINTER)(SQLULEN)w->n, 0)) ||
        !SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_PARAM_STATUS_PTR, w->status, 0)) ||
        !SQL_SUCCEEDED(SQLSetStmtAttr(st, SQL_ATTR_PARAMS_PROCESSED_PTR, &w->processed, 0)))
        return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st,
                            "%s: the driver refuses parameter arrays", o->target);
    bool ok = SQL_SUCCEEDED(SQLBindParameter(st, 1, SQL_PARAM_INPUT, SQL_C_CHAR, SQL_VARCHAR,
                                             PC_COLL_NAME_MAX, 0, w->names, PC_COLL_NAME_MAX + 1,
                                             w->nind));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, 2, SQL_PARAM_INPUT, SQL_C_BINARY, SQL_VARBINARY,
                                              wk, 0, kc, (SQLLEN)wk, w->kind));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, 3, SQL_PARAM_INPUT, SQL_C_BINARY, SQL_VARBINARY,
                                              wv, 0, vc, (SQLLEN)wv, w->vind));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, 4, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0,
                                              0, w->exps, 0, NULL));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, 5, SQL_PARAM_INPUT, SQL_C_SSHORT, SQL_SMALLINT, 0,
                                              0, w->ctrs, 0, NULL));
    if (!ok)
        return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st,
                            "%s: collection \"%s\": binding a parameter array", o->target, w->name);
    SQLRETURN r = SQLExecute(st);
    int rc = 0;
    if (!SQL_SUCCEEDED(r))
        rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st,
                          "%s: collection \"%s\": INSERT failed after %llu rows", o->target,
                          w->name, (unsigned long long)w->rows_done);
    for (unsigned i = 0; rc == 0 && i < w->n; i++)
        if (w->status[i] != SQL_PARAM_SUCCESS && w->status[i] != SQL_PARAM_SUCCESS_WITH_INFO)
            rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st,
                              "%s: collection \"%s\": row %llu of the batch was not inserted",
                              o->target, w->name, (unsigned long long)(w->rows_done + i));
    if (rc == 0 && w->processed != w->n)
        rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_ENV, SQL_NULL_HANDLE,
                          "%s: collection \"%s\": the driver processed %llu of %u rows", o->target,
                          w->name, (unsigned long long)w->processed, w->n);
    SQLFreeStmt(st, SQL_CLOSE);
    w->batches++;
    return rc;
}

/* Appends "," (unless first) and the decimal v to the array literal i. */
static void arr_put(pc_odbc_writer *w, int i, bool first, long long v)
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
    memcpy(w->arr[i] + w->arr_len[i], p, (size_t)(e - p));
    w->arr_len[i] += e - p;
}

/* PACKED: the batch buffer is the bytea parameter as it is; the five array
 * literals say where each row's key and value are in it. */
static int run_packed(pc_odbc_writer *w)
{
    pc_odbc *o = w->o;
    SQLHSTMT st = w->multi;
    for (int i = 0; i < 5; i++) {
        w->arr[i][0] = '{';
        w->arr_len[i] = 1;
    }
    for (unsigned i = 0; i < w->n; i++) {
        const struct wrow *r = &w->rows[i];
        assert(r->voff == r->koff + (size_t)r->klen); /* pc_odbc_writer_add's layout */
        arr_put(w, 0, i == 0, (long long)r->koff + 1);
        arr_put(w, 1, i == 0, (long long)r->klen);
        arr_put(w, 2, i == 0, (long long)r->vlen);
        arr_put(w, 3, i == 0, (long long)r->expires);
        arr_put(w, 4, i == 0, (long long)r->is_counter);
    }
    for (int i = 0; i < 5; i++)
        w->arr[i][w->arr_len[i]++] = '}';
    w->blob_len = (SQLLEN)w->used;
    bool ok = SQL_SUCCEEDED(bind_name(w, st, 1));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, 2, SQL_PARAM_INPUT, SQL_C_BINARY, SQL_VARBINARY,
                                              w->used > 0 ? (SQLULEN)w->used : 1, 0, w->buf,
                                              w->blob_len, &w->blob_len));
    for (int i = 0; ok && i < 5; i++)
        ok = SQL_SUCCEEDED(SQLBindParameter(st, (SQLUSMALLINT)(3 + i), SQL_PARAM_INPUT, SQL_C_CHAR,
                                            SQL_LONGVARCHAR, (SQLULEN)w->arr_len[i], 0, w->arr[i],
                                            w->arr_len[i], &w->arr_len[i]));
    if (!ok)
        return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st,
                            "%s: collection \"%s\": binding the parameters of a batch", o->target,
                            w->name);
    if (!SQL_SUCCEEDED(SQLExecute(st)))
        return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st,
                            "%s: collection \"%s\": INSERT failed after %llu rows", o->target,
                            w->name, (unsigned long long)w->rows_done);
    SQLFreeStmt(st, SQL_CLOSE);
    w->batches++;
    return 0;
}

static int flush(pc_odbc_writer *w)
{
    int rc = 0;
    if (w->n == 0)
        return 0;
    if (w->shape == PC_ODBC_SHAPE_ARRAY)
        rc = run_array(w);
    else if (w->shape == PC_ODBC_SHAPE_PACKED)
        rc = run_packed(w);
    else if (w->n == w->per_stmt && w->multi != SQL_NULL_HSTMT)
        rc = run(w, w->multi, 0, w->n);
    else
        for (unsigned i = 0; rc == 0 && i < w->n; i++)
            rc = run(w, w->one, i, 1);
    if (rc != 0)
        return rc;
    w->rows_done += w->n;
    w->n = 0;
    w->used = 0;
    w->wk = w->wv = 0;
    pc_odbc *o = w->o;
    if (o->cfg.progress != NULL)
        rc = o->cfg.progress(o->cfg.progress_ctx, w->name, w->rows_done, w->total);
    return rc;
}

int pc_odbc_writer_add(pc_odbc_writer *w, const void *key, size_t klen, const void *val,
                       size_t vlen, int64_t expires_ms, bool is_counter)
{
    if (klen > PC_KEY_MAX || vlen > PC_VALUE_MAX)
        return PC_ETOOBIG;
    int rc;
    bool full = w->used + klen + vlen > w->cap_bytes;
    if (w->shape == PC_ODBC_SHAPE_ARRAY) { /* the column-wise copy must fit too */
        size_t wk = klen > w->wk ? klen : w->wk, wv = vlen > w->wv ? vlen : w->wv;
        full = full || (size_t)(w->n + 1) * (wk + wv) > w->cap_bytes;
    }
    if (w->n > 0 && full && (rc = flush(w)) != 0)
        return rc;
    if (klen > w->wk)
        w->wk = klen;
    if (vlen > w->wv)
        w->wv = vlen;
    struct wrow *r = &w->rows[w->n];
    r->koff = w->used;
    if (klen > 0)
        memcpy(w->buf + w->used, key, klen);
    w->used += klen;
    r->voff = w->used;
    if (vlen > 0)
        memcpy(w->buf + w->used, val, vlen);
    w->used += vlen;
    r->klen = (SQLLEN)klen;
    r->vlen = (SQLLEN)vlen;
    r->expires = expires_ms;
    r->is_counter = is_counter ? 1 : 0;
    if (++w->n == w->per_stmt)
        return flush(w);
    return 0;
}

int pc_odbc_writer_finish(pc_odbc_writer *w, uint64_t *generation)
{
    int rc = flush(w);
    if (rc != 0)
        return rc;
    SQLBIGINT entries = (SQLBIGINT)w->rows_done;
    SQLBindParameter(w->aux, 1, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, &entries, 0,
                     NULL);
    bind_name(w, w->aux, 2);
    rc = aux_exec(w, "counting the rows",
                  "UPDATE " PC_ODBC_GENERATIONS " SET entries = ? WHERE collection = ?", NULL);
    bool found = false;
    uint64_t gen = 0;
    if (rc == 0)
        rc = pc_odbc_read_generation(w->o, w->name, &gen, &found);
    if (rc == 0 && !found)
        rc = pc_odbc_fail(w->o, PC_EIO, SQL_HANDLE_ENV, SQL_NULL_HANDLE,
                          "%s: collection \"%s\": its generation row vanished during the save",
                          w->o->target, w->name);
    if (rc == 0 && generation != NULL)
        *generation = gen;
    return rc;
}
