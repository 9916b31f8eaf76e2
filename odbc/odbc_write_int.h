/*
 * odbc_write_int.h - the batch writer's internals, shared by odbc_write.c
 * (the writer: begin, add, flush, finish, the pipeline) and odbc_shapes.c
 * (the statement shapes: prepare, seal and execute a batch). Private to
 * odbc/.
 */
#ifndef PC_ODBC_WRITE_INT_H
#define PC_ODBC_WRITE_INT_H

#include "odbc_int.h"

#include <stdbool.h>

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
    /* PACKED: buf as the text of a bytea (escape or hex form, at most
     * 2 x used + 2 bytes) that the parameter travels as (odbc_shapes.c
     * says why not binary), blob_len bytes */
    char *text;
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

/* The shape a dialect gets by default (docs/odbc.md §4). */
int pc_odbc_shape_default(int dialect);
/* Prepares the INSERT of rows rows (0: the PACKED statement) on a new
 * statement *st. */
int pc_odbc_insert_prepare(pc_odbc *o, SQLHSTMT *st, unsigned rows);
/* Binds parameter i of st to the writer's collection name. */
SQLRETURN pc_odbc_bind_name(pc_odbc_writer *w, SQLHSTMT st, SQLUSMALLINT i);
/* Makes a full (or last) batch ready to execute; the caller's thread. */
void pc_odbc_batch_seal(pc_odbc_writer *w, struct wbatch *b);
/* Executes batch job of writer ctx (a pc_odbc_job_fn): the sender thread
 * when pipelined, else the caller's. Records a failure in job->fail. */
int pc_odbc_batch_exec(void *ctx, void *job);

#endif
