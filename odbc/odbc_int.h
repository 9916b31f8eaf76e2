/*
 * odbc_int.h - internals shared by the files of odbc/ (not installed, not
 * for other components).
 *
 *   odbc_conn.c    connection, URL forms, password masking, diagnostics,
 *                  dialect detection, DDL
 *   odbc_write.c   the batch writer: one transaction that replaces a
 *                  collection's rows (save and export share it)
 *   odbc_shapes.c  its INSERT shapes per dialect: prepare, lay out and
 *                  execute a batch (odbc_write_int.h)
 *   odbc_pipe.c    the sender thread that executes the writer's batches
 *                  while the caller fills the next one
 *   odbc_save.c    pc_odbc_save / pc_odbc_load / pc_odbc_generation
 *   odbc_move.c    pc_odbc_export / pc_odbc_import (LMDB <-> SQL)
 *   odbc_persist.c the pc_persist_backend for db_url "odbc:..."
 *   odbc_sync.c    the source column, the generation query and the row
 *                  visit of the shared-database sync (docs/sync.md)
 */
#ifndef PC_ODBC_INT_H
#define PC_ODBC_INT_H

#include "pcache_odbc.h"

#include <sql.h>
#include <sqlext.h>
#include <stdbool.h>
#include <sys/types.h>

#define PC_ODBC_MSG_MAX 1024
#define PC_ODBC_BATCH_BYTES_DEFAULT (4u * 1024u * 1024u)
#define PC_ODBC_ENTRIES "pcache_entries"
#define PC_ODBC_GENERATIONS "pcache_generations"

struct pc_odbc {
    SQLHENV env;
    SQLHDBC dbc;
    int dialect;     /* enum pc_odbc_dialect */
    bool in_txn;     /* autocommit is off: a transaction may be open */
    bool has_source; /* the generation table has the source column (odbc_sync.c) */
    pid_t pid;       /* the process whose connection env/dbc is */
    pc_odbc_config cfg;
    char *connstr;             /* what SQLDriverConnect got (holds the password) */
    char *password;            /* the PWD value, to mask where a driver echoes it */
    char target[512];          /* the URL with the password masked */
    char server[128];          /* DBMS name and version */
    char msg[PC_ODBC_MSG_MAX]; /* last error, masked */
};

/* Records "what: [SQLSTATE] driver message ..." for the handle h of type
 * type (every diagnostic record), masks the password, logs it at
 * PC_LOG_ERR and returns rc. h may be SQL_NULL_HANDLE (then only what). */
int pc_odbc_fail(pc_odbc *o, int rc, SQLSMALLINT type, SQLHANDLE h, const char *what, ...)
    __attribute__((format(printf, 5, 6)));
void pc_odbc_log(const pc_odbc *o, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A new statement on o's connection in *st (the caller frees it); PC_EIO,
 * recorded, with *st SQL_NULL_HSTMT when the driver gives none. */
int pc_odbc_stmt_new(pc_odbc *o, SQLHSTMT *st);
/* Binds the NUL-terminated collection name as st's input parameter i;
 * name and *len (which receives its length) are the caller's and must
 * outlive the statement's execution. */
SQLRETURN pc_odbc_bind_coll(SQLHSTMT st, SQLUSMALLINT i, const char *name, SQLLEN *len);

#include "odbc_writer.h"

/* ---- the sender thread (odbc_pipe.c) -------------------------------------
 * One job at a time: fn(ctx, job) runs on the thread. start creates it
 * (PC_EHEAP or PC_ESYS when it cannot); submit requires it idle (after
 * start or wait); wait blocks until it is idle and returns fn's value for
 * the last job; failed says, lock-free, whether a job returned non-zero;
 * stop lets the job in flight end, joins and frees (accepts NULL). */
typedef struct pc_odbc_pipe pc_odbc_pipe;
typedef int (*pc_odbc_job_fn)(void *ctx, void *job);
int pc_odbc_pipe_start(pc_odbc_job_fn fn, void *ctx, pc_odbc_pipe **out);
void pc_odbc_pipe_submit(pc_odbc_pipe *p, void *job);
int pc_odbc_pipe_wait(pc_odbc_pipe *p);
bool pc_odbc_pipe_failed(pc_odbc_pipe *p);
void pc_odbc_pipe_stop(pc_odbc_pipe *p);

/* ---- the reader (odbc_read.c) --------------------------------------------
 * Visits the live rows of one collection through a block cursor inside the
 * caller's transaction; fn returns 0 to go on. Counters arrive as decimal
 * text with is_counter set. */
typedef int (*pc_odbc_row_fn)(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                              int64_t expires_ms, bool is_counter);
int pc_odbc_read_rows(pc_odbc *o, const char *name, int64_t now_ms, pc_odbc_row_fn fn, void *ctx,
                      uint64_t *skipped_expired);
/* Row count and the longest key and value of a collection (live rows). */
int pc_odbc_coll_sizes(pc_odbc *o, const char *name, int64_t now_ms, uint64_t *rows,
                       uint64_t *max_k, uint64_t *max_v, uint64_t *bytes);

/* ---- sync (odbc_sync.c) --------------------------------------------------
 * After the tables exist: notes whether the generation table has the
 * source column, adding it (PC_ODBC_CREATE) when it does not. */
int pc_odbc_sync_schema(pc_odbc *o);
/* Inside the save's transaction: the generation row names source. */
int pc_odbc_set_source(pc_odbc *o, const char *name, const char *source);

#endif /* PC_ODBC_INT_H */
