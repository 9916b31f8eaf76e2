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
 * Pipeline (docs/odbc.md §3): with two batches, the caller's thread (the
 * walk's callback) fills one while a sender thread (odbc_pipe.c) binds and
 * executes the other on the same connection; when the filled one is full
 * and the sender still busy, the caller waits, then they swap. Only the
 * sender touches the INSERT statements while a batch is in flight; the
 * generation row, the DELETE, the entry count and the commit run in the
 * caller's thread with the sender idle or joined. A failure is recorded by
 * the sender (struct wfail) and reported - pc_odbc_fail, the handle's
 * message, the log - by the caller's thread at its next add or at finish;
 * the progress callback runs there too, after each batch is known done.
 * The thread is created at a collection's first full batch and joined by
 * finish, pc_odbc_writer_stop or free, so none outlives a save and none
 * exists while no save runs (handles are used across fork()).
 * Default (want_pipeline), measured with pcache-bench odbc on 2 cores
 * (docs/benchmarks.md "ODBC pipeline"; medians of pipelined / serial per
 * run): on for MULTI, ARRAY and PACKED, where the caller's walk and
 * packing overlap the driver and the server - PostgreSQL PACKED x1.00-1.22
 * at 100k and x1.14 at 1M, SQLite MULTI x1.08-1.55 at 100k (x0.97 at 1M
 * under load; SQLite's own work runs on the sender), MariaDB ARRAY
 * x0.86-1.15 (bound by the server; kept on: above 1 in five runs of six,
 * and its cost is one more batch of memory).
 * The gain shrinks to nothing when other jobs hold both cores. Off for
 * ROW: one row per hand-off made a save slower (x0.54 SQLite, x0.64
 * PostgreSQL).
 *
 * Memory is bounded: a batch holds at most per_stmt rows and about
 * batch_bytes of keys and values (plus one maximal row), whatever the size
 * of the collection; pipelined, there are two. A row is copied into the
 * batch because the walk's pointers are valid only during its callback;
 * each key is followed by its value in the batch buffer (PACKED relies on
 * it).
 */
#include "odbc_int.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wrow {
    size_t koff, voff;
    SQLLEN klen, vlen;
    SQLBIGINT expires;
    SQLSMALLINT is_counter;
};

/* A failure recorded where it happened (possibly the sender thread) and
 * reported by pc_odbc_fail in the caller's thread: the diagnostics stay on
 * h, which nothing touches in between. */
struct wfail {
    int rc;
    SQLSMALLINT type;
    SQLHANDLE h;
    char what[PC_ODBC_MSG_MAX];
};

/* One batch: filled by the caller's thread, then (pipelined) executed by
 * the sender while the caller fills the other one. Everything the
 * statements are bound to lives here or is read-only during the walk
 * (the writer's name, names and nind). */
struct wbatch {
    struct wrow *rows; /* per_stmt entries */
    unsigned n;        /* rows buffered */
    unsigned char *buf;
    size_t used;
    uint64_t first; /* the collection's index of rows[0], for messages */
    unsigned stmts; /* statements the execution ran (set by it) */
    struct wfail fail;
    /* ARRAY: the batch re-laid column-wise, each key in a wk-byte slot and
     * each value in a wv-byte slot (the widest of the batch); the add path
     * keeps per_stmt x (wk + wv) within cap_bytes, one row excepted */
    size_t wk, wv;
    unsigned char *cols;
    SQLLEN *kind, *vind;
    SQLBIGINT *exps;
    SQLSMALLINT *ctrs;
    SQLUSMALLINT *status;
    SQLULEN processed;
    /* PACKED: the array literals "{1,217,...}" of the batch (offsets, key
     * lengths, value lengths, expiries, counter flags), PACKED_NUM bytes
     * per row each, and the length of the bytea parameter (buf) */
    char *arr[5];
    SQLLEN arr_len[5];
    SQLLEN blob_len;
};

struct pc_odbc_writer {
    pc_odbc *o;
    SQLHSTMT one, multi; /* one-row and per_stmt-row INSERTs (multi: MULTI and PACKED) */
    SQLHSTMT aux;        /* generation row and DELETE */
    int shape;           /* enum pc_odbc_shape, never DEFAULT */
    unsigned per_stmt;   /* rows per batch */
    bool pipelined;      /* batches run on a sender thread (pc_odbc_pipe) */
    char name[PC_COLL_NAME_MAX + 1];
    SQLLEN name_len;
    char *names; /* ARRAY: name per parameter set */
    SQLLEN *nind;
    size_t cap_bytes, buf_size;
    struct wbatch b[2];      /* b[1] only allocated when pipelined */
    struct wbatch *fill;     /* the batch the caller's thread fills */
    struct wbatch *inflight; /* submitted to the sender, not yet reaped; NULL when none */
    pc_odbc_pipe *pipe;      /* the sender, started at the first full batch of a
                                collection and stopped by its finish (or an error) */
    int err;                 /* a reported failure: every later add / finish returns it */
    uint64_t rows_done, rows_sealed, batches, total;
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

/* Whether this writer runs its batches on a sender thread. Measured with
 * pcache-bench odbc (docs/benchmarks.md, "ODBC pipeline"): see the file
 * comment. */
static bool want_pipeline(const pc_odbc *o, int shape)
{
    if (o->cfg.pipeline == PC_ODBC_PIPELINE_OFF)
        return false;
    if (o->cfg.pipeline == PC_ODBC_PIPELINE_ON)
        return true;
    return shape != PC_ODBC_SHAPE_ROW;
}

static int batch_alloc(pc_odbc_writer *w, struct wbatch *b)
{
    unsigned n = w->per_stmt;
    b->rows = calloc(n, sizeof *b->rows);
    b->buf = malloc(w->buf_size);
    if (b->rows == NULL || b->buf == NULL)
        return PC_ESYS;
    if (w->shape == PC_ODBC_SHAPE_ARRAY) {
        b->cols = malloc(w->buf_size + 2 * (size_t)n); /* + the 1-byte minimum slots */
        b->kind = calloc(n, sizeof *b->kind);
        b->vind = calloc(n, sizeof *b->vind);
        b->exps = calloc(n, sizeof *b->exps);
        b->ctrs = calloc(n, sizeof *b->ctrs);
        b->status = calloc(n, sizeof *b->status);
        if (b->cols == NULL || b->kind == NULL || b->vind == NULL || b->exps == NULL ||
            b->ctrs == NULL || b->status == NULL)
            return PC_ESYS;
    }
    for (int i = 0; w->shape == PC_ODBC_SHAPE_PACKED && i < 5; i++)
        if ((b->arr[i] = malloc((size_t)n * PACKED_NUM + 3)) == NULL)
            return PC_ESYS;
    return 0;
}

static void batch_free(struct wbatch *b)
{
    free(b->rows);
    free(b->buf);
    free(b->cols);
    free(b->kind);
    free(b->vind);
    free(b->exps);
    free(b->ctrs);
    free(b->status);
    for (int i = 0; i < 5; i++)
        free(b->arr[i]);
}

static void batch_reset(struct wbatch *b)
{
    b->n = 0;
    b->used = 0;
    b->wk = b->wv = 0;
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
    w->pipelined = want_pipeline(o, w->shape);
    w->cap_bytes = o->cfg.batch_bytes;
    if (w->shape == PC_ODBC_SHAPE_PACKED && w->cap_bytes > 256u * 1024 * 1024)
        w->cap_bytes = 256u * 1024 * 1024; /* offsets are INTEGERs; a bytea stops at 1 GiB */
    w->buf_size = w->cap_bytes + PC_KEY_MAX + PC_VALUE_MAX + 64; /* one maximal row always fits */
    w->fill = &w->b[0];
    int rc = batch_alloc(w, &w->b[0]);
    if (rc == 0 && w->pipelined)
        rc = batch_alloc(w, &w->b[1]);
    if (rc == 0 && w->shape == PC_ODBC_SHAPE_ARRAY) {
        w->names = calloc(w->per_stmt, PC_COLL_NAME_MAX + 1);
        w->nind = calloc(w->per_stmt, sizeof *w->nind);
        if (w->names == NULL || w->nind == NULL)
            rc = PC_ESYS;
    }
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

void pc_odbc_writer_stop(pc_odbc_writer *w)
{
    if (w == NULL || w->pipe == NULL)
        return;
    /* the batch in flight (if any) runs to its end; its result is dropped:
     * the caller is failing already, with its own error */
    pc_odbc_pipe_stop(w->pipe);
    w->pipe = NULL;
    w->inflight = NULL;
}

void pc_odbc_writer_free(pc_odbc_writer *w)
{
    if (w == NULL)
        return;
    pc_odbc_writer_stop(w); /* before any handle goes: the sender may be using one */
    if (w->one != SQL_NULL_HSTMT)
        SQLFreeHandle(SQL_HANDLE_STMT, w->one);
    if (w->multi != SQL_NULL_HSTMT)
        SQLFreeHandle(SQL_HANDLE_STMT, w->multi);
    if (w->aux != SQL_NULL_HSTMT)
        SQLFreeHandle(SQL_HANDLE_STMT, w->aux);
    batch_free(&w->b[0]);
    batch_free(&w->b[1]);
    free(w->names);
    free(w->nind);
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
    assert(w->pipe == NULL); /* the previous collection's finish stopped it */
    w->fill = &w->b[0];
    batch_reset(&w->b[0]);
    batch_reset(&w->b[1]);
    w->err = 0;
    w->rows_done = 0;
    w->rows_sealed = 0;
    w->batches = 0;
    w->total = total;
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
    bool ok = SQL_SUCCEEDED(bind_name(w, st, p));
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

/* PACKED: the batch buffer is the bytea parameter as it is; the five array
 * literals (built by seal) say where each row's key and value are in it. */
static int run_packed(pc_odbc_writer *w, struct wbatch *b)
{
    pc_odbc *o = w->o;
    SQLHSTMT st = w->multi;
    bool ok = SQL_SUCCEEDED(bind_name(w, st, 1));
    ok = ok && SQL_SUCCEEDED(SQLBindParameter(st, 2, SQL_PARAM_INPUT, SQL_C_BINARY, SQL_VARBINARY,
                                              b->used > 0 ? (SQLULEN)b->used : 1, 0, b->buf,
                                              b->blob_len, &b->blob_len));
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
static int exec_batch(void *ctx, void *job)
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

/* ---- the caller's thread ----------------------------------------------- */

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

/* Makes a full (or last) batch ready to execute: the CPU work of ARRAY's
 * column-wise copy and PACKED's array literals is done here, in the
 * caller's thread, where it overlaps the execution of the other batch. */
static void seal(pc_odbc_writer *w, struct wbatch *b)
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
        b->blob_len = (SQLLEN)b->used;
    }
}

/* A batch that failed: its recorded failure becomes the handle's error
 * (diagnostics read from its statement now) and sticks to the writer. */
static int report(pc_odbc_writer *w, struct wbatch *b)
{
    assert(b->fail.rc != 0);
    w->err = pc_odbc_fail(w->o, b->fail.rc, b->fail.type, b->fail.h, "%s", b->fail.what);
    return w->err;
}

/* A batch that succeeded: count it, empty it, tell the progress callback. */
static int collect(pc_odbc_writer *w, struct wbatch *b)
{
    w->rows_done += b->n;
    w->batches += b->stmts;
    batch_reset(b);
    pc_odbc *o = w->o;
    int rc = 0;
    if (o->cfg.progress != NULL)
        rc = o->cfg.progress(o->cfg.progress_ctx, w->name, w->rows_done, w->total);
    if (rc != 0)
        w->err = rc;
    return rc;
}

/* Waits for the batch in flight, if any, and collects or reports it. On
 * return the sender is idle. */
static int reap(pc_odbc_writer *w)
{
    struct wbatch *b = w->inflight;
    if (b == NULL)
        return 0;
    int rc = pc_odbc_pipe_wait(w->pipe);
    w->inflight = NULL;
    return rc != 0 ? report(w, b) : collect(w, b);
}

/* Executes the batch being filled: inline, or (pipelined) hands it to the
 * sender once the previous one is done and goes on filling the other. */
static int flush(pc_odbc_writer *w)
{
    struct wbatch *b = w->fill;
    if (b->n == 0)
        return 0;
    seal(w, b);
    if (w->pipelined && w->pipe == NULL && pc_odbc_pipe_start(exec_batch, w, &w->pipe) != 0) {
        /* no thread to be had: this writer goes on serially, as correct */
        w->pipelined = false;
        pc_odbc_log(w->o, PC_LOG_WARN, "pcache: %s: no sender thread: saving serially",
                    w->o->target);
    }
    if (!w->pipelined)
        return exec_batch(w, b) != 0 ? report(w, b) : collect(w, b);
    int rc = reap(w);
    if (rc != 0)
        return rc;
    pc_odbc_pipe_submit(w->pipe, b);
    w->inflight = b;
    w->fill = b == &w->b[0] ? &w->b[1] : &w->b[0];
    return 0;
}

int pc_odbc_writer_add(pc_odbc_writer *w, const void *key, size_t klen, const void *val,
                       size_t vlen, int64_t expires_ms, bool is_counter)
{
    if (w->err != 0)
        return w->err;
    /* a failed batch stops the walk at the next row (one lock-free load) */
    if (w->inflight != NULL && pc_odbc_pipe_failed(w->pipe))
        return reap(w);
    if (klen > PC_KEY_MAX || vlen > PC_VALUE_MAX)
        return PC_ETOOBIG;
    struct wbatch *b = w->fill;
    int rc;
    bool full = b->used + klen + vlen > w->cap_bytes;
    if (w->shape == PC_ODBC_SHAPE_ARRAY) { /* the column-wise copy must fit too */
        size_t wk = klen > b->wk ? klen : b->wk, wv = vlen > b->wv ? vlen : b->wv;
        full = full || (size_t)(b->n + 1) * (wk + wv) > w->cap_bytes;
    }
    if (b->n > 0 && full) {
        if ((rc = flush(w)) != 0)
            return rc;
        b = w->fill;
    }
    if (klen > b->wk)
        b->wk = klen;
    if (vlen > b->wv)
        b->wv = vlen;
    struct wrow *r = &b->rows[b->n];
    r->koff = b->used;
    if (klen > 0)
        memcpy(b->buf + b->used, key, klen);
    b->used += klen;
    r->voff = b->used;
    if (vlen > 0)
        memcpy(b->buf + b->used, val, vlen);
    b->used += vlen;
    r->klen = (SQLLEN)klen;
    r->vlen = (SQLLEN)vlen;
    r->expires = expires_ms;
    r->is_counter = is_counter ? 1 : 0;
    if (++b->n == w->per_stmt)
        return flush(w);
    return 0;
}

int pc_odbc_writer_finish(pc_odbc_writer *w, uint64_t *generation)
{
    int rc = w->err;
    if (rc == 0)
        rc = flush(w);
    if (rc == 0)
        rc = reap(w);
    pc_odbc_writer_stop(w); /* joined: the connection is the caller's thread's again */
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
