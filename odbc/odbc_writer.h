/*
 * odbc_writer.h - the ODBC exporter's transaction bracket and batch
 * writer (odbc_conn.c, odbc_write.c): internal to odbc/ (odbc_int.h
 * includes it) and its declared white-box interface for the tests, which
 * drive the writer directly to free it in the middle of a batch
 * (docs/architecture.md). No host includes it.
 */
#ifndef PC_ODBC_WRITER_H
#define PC_ODBC_WRITER_H

#include "pcache_odbc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every entry point calls it first: in a process other than the one that
 * connected (a host opened the handle, then forked), it abandons the
 * inherited connection - never disconnecting it, which would talk on the
 * parent's socket - and connects anew. Clears the last error. */
int pc_odbc_enter(pc_odbc *o);
/* The start of an entry point: PC_EINVAL when o is NULL or the caller's
 * other arguments are not args_ok, else pc_odbc_enter(o). */
int pc_odbc_enter_args(pc_odbc *o, bool args_ok);

/* Autocommit off (a transaction begins with the next statement) / commit
 * or roll back and autocommit on again. pc_odbc_end with commit = 0 never
 * fails the caller: a failing rollback is logged (the server discards an
 * uncommitted transaction when the connection drops). */
int pc_odbc_begin(pc_odbc *o, bool repeatable_read);
int pc_odbc_end(pc_odbc *o, bool commit);
/* Ends the transaction as rc says: commits when rc is 0 and returns the
 * commit's result, else rolls back and returns rc. */
int pc_odbc_end_rc(pc_odbc *o, int rc);

/* Executes sql once without parameters on a fresh statement. */
int pc_odbc_exec(pc_odbc *o, const char *sql);

/* Binary column type of the dialect ("BLOB", "BYTEA", "LONGBLOB"). */
const char *pc_odbc_blob_type(int dialect);

/* The generation row of name: *gen = 0 and *found = false when absent.
 * Runs inside the caller's transaction when one is open. */
int pc_odbc_read_generation(pc_odbc *o, const char *name, uint64_t *gen, bool *found);

/* ---- the batch writer (odbc_write.c) ------------------------------------
 * Replaces the rows of one collection inside the caller's transaction:
 * pc_odbc_writer_begin bumps the generation row and deletes the rows;
 * pc_odbc_writer_add buffers one row (copying it) and executes a batch when
 * the buffer is full; pc_odbc_writer_finish flushes the rest and sets the
 * generation row's entry count. The caller commits or rolls back.
 *
 * Pipelined (pc_odbc_config.pipeline, docs/odbc.md §3): add hands a full
 * batch to a sender thread and fills a second one meanwhile; a failure of
 * the sender is returned by the next add (or finish). While a batch is in
 * flight the sender owns the connection: between begin and a successful
 * finish, the caller makes no other call on the connection unless it
 * called pc_odbc_writer_stop first - on every error path, before rolling
 * back. finish and free stop it too; no thread outlives either. */
typedef struct pc_odbc_writer pc_odbc_writer;
int pc_odbc_writer_new(pc_odbc *o, pc_odbc_writer **out);
void pc_odbc_writer_free(pc_odbc_writer *w); /* accepts NULL; stops the sender */
/* Waits for the batch in flight (its result dropped) and joins the sender
 * thread; a no-op when there is none. Accepts NULL. */
void pc_odbc_writer_stop(pc_odbc_writer *w);
int pc_odbc_writer_begin(pc_odbc_writer *w, const char *name, uint64_t total);
int pc_odbc_writer_add(pc_odbc_writer *w, const void *key, size_t klen, const void *val,
                       size_t vlen, int64_t expires_ms, bool is_counter);
int pc_odbc_writer_finish(pc_odbc_writer *w, uint64_t *generation);
uint64_t pc_odbc_writer_rows(const pc_odbc_writer *w);
uint64_t pc_odbc_writer_batches(const pc_odbc_writer *w);

#endif /* PC_ODBC_WRITER_H */
