/*
 * odbc_write.c - the batch writer: replaces the rows of one collection
 * inside the caller's transaction (pc_odbc_save and pc_odbc_export). The
 * statement shapes and the execution of a batch are in odbc_shapes.c.
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
 * Default (want_pipeline), measured with pcache-bench odbc
 * (docs/benchmarks.md "ODBC pipeline"): on for MULTI, ARRAY and PACKED,
 * where the caller's walk and packing overlap the driver and the server
 * (SQLite's own work runs on the sender; MariaDB ARRAY is bound by the
 * server and gains little, kept on: its cost is one more batch of memory).
 * The gain shrinks to nothing when other jobs hold both cores. Off for
 * ROW: one row per hand-off made a save slower.
 *
 * Memory is bounded: a batch holds at most per_stmt rows and about
 * batch_bytes of keys and values (plus one maximal row), whatever the size
 * of the collection; pipelined, there are two. A row is copied into the
 * batch because the walk's pointers are valid only during its callback;
 * each key is followed by its value in the batch buffer (PACKED relies on
 * it).
 */
#include "odbc_write_int.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        return PC_EHEAP;
    if (w->shape == PC_ODBC_SHAPE_ARRAY) {
        b->cols = malloc(w->buf_size + 2 * (size_t)n); /* + the 1-byte minimum slots */
        b->kind = calloc(n, sizeof *b->kind);
        b->vind = calloc(n, sizeof *b->vind);
        b->exps = calloc(n, sizeof *b->exps);
        b->ctrs = calloc(n, sizeof *b->ctrs);
        b->status = calloc(n, sizeof *b->status);
        if (b->cols == NULL || b->kind == NULL || b->vind == NULL || b->exps == NULL ||
            b->ctrs == NULL || b->status == NULL)
            return PC_EHEAP;
    }
    for (int i = 0; w->shape == PC_ODBC_SHAPE_PACKED && i < 5; i++)
        if ((b->arr[i] = malloc((size_t)n * PACKED_NUM + 3)) == NULL)
            return PC_EHEAP;
    if (w->shape == PC_ODBC_SHAPE_PACKED && (b->text = malloc(2 * w->buf_size + 3)) == NULL)
        return PC_EHEAP;
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
    free(b->text);
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
        return PC_EHEAP;
    w->o = o;
    w->shape =
        o->cfg.shape != PC_ODBC_SHAPE_DEFAULT ? o->cfg.shape : pc_odbc_shape_default(o->dialect);
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
            rc = PC_EHEAP;
    }
    if (rc == 0)
        rc = pc_odbc_insert_prepare(o, &w->one, 1);
    if (rc == 0 && w->shape == PC_ODBC_SHAPE_MULTI)
        rc = pc_odbc_insert_prepare(o, &w->multi, w->per_stmt);
    if (rc == 0 && w->shape == PC_ODBC_SHAPE_PACKED)
        rc = pc_odbc_insert_prepare(o, &w->multi, 0);
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
    SQLBIGINT now = pc_wall_ms();
    SQLLEN changed = 0;
    SQLBindParameter(w->aux, 1, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, &now, 0, NULL);
    pc_odbc_bind_name(w, w->aux, 2);
    int rc = aux_exec(w, "bumping the generation row",
                      "UPDATE " PC_ODBC_GENERATIONS " SET generation = generation + 1, "
                      "saved_at = ? WHERE collection = ?",
                      &changed);
    if (rc == 0 && changed <= 0) {
        pc_odbc_bind_name(w, w->aux, 1);
        SQLBindParameter(w->aux, 2, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, &now, 0,
                         NULL);
        rc = aux_exec(w, "inserting the generation row",
                      "INSERT INTO " PC_ODBC_GENERATIONS " (collection, generation, entries, "
                      "saved_at) VALUES (?, 1, 0, ?)",
                      NULL);
    }
    if (rc == 0) {
        pc_odbc_bind_name(w, w->aux, 1);
        rc = aux_exec(w, "deleting the previous rows",
                      "DELETE FROM " PC_ODBC_ENTRIES " WHERE collection = ?", NULL);
    }
    return rc;
}

/* ---- the caller's thread ----------------------------------------------- */

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
    pc_odbc_batch_seal(w, b);
    if (w->pipelined && w->pipe == NULL &&
        pc_odbc_pipe_start(pc_odbc_batch_exec, w, &w->pipe) != 0) {
        /* no thread to be had: this writer goes on serially, as correct */
        w->pipelined = false;
        pc_odbc_log(w->o, PC_LOG_WARN, "pcache: %s: no sender thread: saving serially",
                    w->o->target);
    }
    if (!w->pipelined)
        return pc_odbc_batch_exec(w, b) != 0 ? report(w, b) : collect(w, b);
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
    pc_odbc_bind_name(w, w->aux, 2);
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
