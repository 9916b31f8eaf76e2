/*
 * pcache_odbc.h - the ODBC exporter of pcache: the one public header of
 * odbc/. It saves and loads whole collections to and from an SQL database
 * through unixODBC, and moves snapshots between the LMDB store and SQL.
 *
 * Tables (docs/odbc.md has the DDL of each dialect):
 *   pcache_entries     (collection, pkey, pvalue, expires, is_counter)
 *                      one row per live entry; pkey/pvalue binary; expires
 *                      absolute unix MILLISECONDS, 0 = never; counters are
 *                      stored as their decimal text with is_counter = 1
 *   pcache_generations (collection PRIMARY KEY, generation, entries, saved_at,
 *                      source)
 *                      one row per saved collection; generation 1 for the
 *                      first save, + 1 per committed save; source the node
 *                      that committed it (perf_sync), "" when unknown
 *
 * A save is ONE transaction (autocommit off): bump the collection's
 * generation row (first, so two concurrent savers of one collection queue on
 * its row lock instead of interleaving), delete the collection's rows,
 * insert every live entry in bounded batches (the fastest statement shape
 * of the dialect: docs/odbc.md §4), commit. Any error rolls back: the
 * previous rows and generation stand. A load reads the rows of one
 * collection through a block cursor inside one read transaction, skipping
 * expired rows. Memory of both is bounded (batches of rows and bytes), not
 * proportional to the collection.
 *
 * Dependencies: odbc/ uses the engine (pcache.h), the store's public header
 * (pcache_store.h: the record model, the export/import), the persistence
 * header (pcache_persist.h: the SQL backend interface it implements,
 * pc_odbc_persist_backend, and its row visitor) and unixODBC.
 * storage/ never includes this header: a host that links odbc/ hands
 * pc_odbc_persist_backend() to pc_persist_open through
 * pc_persist_config.sql_backend, which is how db_url "odbc://..." works.
 *
 * Conventions are those of pcache.h: 0 or a negative PC_E* code; pointer
 * parameters borrowed for the call unless documented; out-parameters
 * written only on success; the library never prints (pc_odbc_config.log).
 * Errors a driver reports carry its SQLSTATE and message, available from
 * pc_odbc_errmsg() and logged at PC_LOG_ERR; the password of the connection
 * string is never part of any message (it is replaced by "***", also where
 * a driver echoes it). Codes:
 *   PC_EURL     a malformed URL / connection string
 *   PC_ESTORE   the connection failed (unknown DSN, wrong password, server
 *               down) or the tables are missing and PC_ODBC_CREATE is unset
 *   PC_EIO      a statement or the commit failed (the transaction is rolled
 *               back; the message has the SQLSTATE)
 *   PC_ENOTFOUND the collection was never saved (load, generation)
 *   PC_ETOOBIG  a stored key or value is longer than the engine accepts
 *   PC_EHEAP    out of process memory (also when the driver manager cannot
 *               allocate a handle)
 * A handle is used by one thread at a time. It may be opened before a
 * fork() and used in the child (hosts open the policies, then save from a
 * maintenance process): the first call in a process other than the one
 * that connected abandons the inherited connection without disconnecting
 * it (that would talk on the parent's socket) and connects anew.
 */
#ifndef PCACHE_ODBC_H
#define PCACHE_ODBC_H

#include <stddef.h>
#include <stdint.h>

#include "pcache.h"
#include "pcache_persist.h"
#include "pcache_store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pc_odbc pc_odbc; /* a connection; opaque, process-local */

/* The database behind a connection, from SQLGetInfo(SQL_DBMS_NAME). */
enum pc_odbc_dialect {
    PC_ODBC_GENERIC = 0, /* anything else: portable DDL, row-by-row inserts */
    PC_ODBC_SQLITE = 1,
    PC_ODBC_POSTGRESQL = 2,
    PC_ODBC_MARIADB = 3 /* MariaDB and MySQL */
};

#define PC_ODBC_CREATE 0x1u /* create the tables when they are missing */

/* Progress of a save, load, export or import: done rows of total (total 0
 * when unknown). Called after each batch. Return 0 to go on; anything else
 * aborts the operation (a save rolls back) and is returned by it. coll is
 * borrowed for the call. */
typedef int (*pc_odbc_progress_fn)(void *ctx, const char *coll, uint64_t done, uint64_t total);

/* How a save sends its rows (odbc_write.c explains the measurements):
 * one-row INSERT per row, a multi-row INSERT ... VALUES (..),(..) of
 * batch_rows rows, one-row INSERT with arrays of batch_rows parameter
 * sets (SQL_ATTR_PARAMSET_SIZE), or (PostgreSQL only) an INSERT ... SELECT
 * that unpacks batch_rows rows from one bytea parameter and five arrays.
 * 0 = the dialect's measured best (docs/odbc.md §4). SQLite never uses
 * ARRAY (MULTI instead); PACKED elsewhere than PostgreSQL is MULTI. */
enum pc_odbc_shape {
    PC_ODBC_SHAPE_DEFAULT = 0,
    PC_ODBC_SHAPE_ROW = 1,
    PC_ODBC_SHAPE_MULTI = 2,
    PC_ODBC_SHAPE_ARRAY = 3,
    PC_ODBC_SHAPE_PACKED = 4
};

/* Whether a save executes its batches on a sender thread while the caller
 * walks the collection and fills the next batch (two batches buffered
 * instead of one; the thread lives only during the save, created after
 * the first full batch and joined before the save returns). DEFAULT is
 * where it was measured to help (docs/odbc.md §4). */
enum pc_odbc_pipeline {
    PC_ODBC_PIPELINE_DEFAULT = 0,
    PC_ODBC_PIPELINE_ON = 1,
    PC_ODBC_PIPELINE_OFF = 2
};

typedef struct pc_odbc_config {
    unsigned flags;      /* PC_ODBC_CREATE */
    int shape;           /* enum pc_odbc_shape */
    int pipeline;        /* enum pc_odbc_pipeline */
    unsigned batch_rows; /* rows per insert batch / fetch block; 0 = the dialect's default */
    size_t batch_bytes;  /* key + value bytes buffered per batch; 0 = 4 MiB */
    pc_odbc_progress_fn progress; /* NULL = none */
    void *progress_ctx;
    pc_logger log; /* fn NULL = silent; level: above it, nothing is formatted */
} pc_odbc_config;

/* flags 0, shape and pipeline DEFAULT, batch_rows 0, batch_bytes 0, no progress, log.fn
 * NULL, log.level PC_LOG_INFO. */
void pc_odbc_config_init(pc_odbc_config *cfg);

/* 1 when where names an ODBC target: "odbc://DSN", "odbc:CONNSTR", or a
 * bare connection string starting "DSN=" or "DRIVER=" (any case). */
int pc_odbc_is_url(const char *where);

/* Connects to where (borrowed):
 *   odbc://DSN            the data source DSN of odbc.ini
 *   odbc:CONNSTR          an ODBC connection string, "DSN=x;UID=u;PWD=p" or
 *                         "DRIVER={...};SERVER=...;..."
 *   DSN=... / DRIVER=...  the same without the prefix
 * detects the dialect and checks the two tables (creating them with
 * PC_ODBC_CREATE, in one transaction). On PostgreSQL, psqlODBC options
 * are added to the connection string unless it names them itself:
 * UseDeclareFetch=1;Fetch=batch_rows (the driver does not buffer a whole
 * result: a load stays bounded) and Protocol=7.4-1 (no savepoint around
 * every statement; an error rolls back the transaction, as ours do anyway).
 * cfg may be NULL. On success *out is caller-owned (pc_odbc_close); on
 * error err (may be NULL) says why, with the SQLSTATE, and never shows the
 * password. */
int pc_odbc_open(const char *where, const pc_odbc_config *cfg, pc_odbc **out, char *err,
                 size_t errlen);
void pc_odbc_close(pc_odbc *o); /* accepts NULL */

int pc_odbc_dialect(const pc_odbc *o);
/* "sqlite", "postgresql", "mariadb", "generic" (static). */
const char *pc_odbc_dialect_name(int dialect);
/* The DBMS name and version the driver reports, e.g. "PostgreSQL 15.18"
 * (valid until pc_odbc_close). */
const char *pc_odbc_server(const pc_odbc *o);
/* The target with any password replaced by "***" (valid until close). */
const char *pc_odbc_target(const pc_odbc *o);
/* The message of the last error on this handle, "" when none (valid until
 * the next call on the handle). */
const char *pc_odbc_errmsg(const pc_odbc *o);

/* Writes into out (outlen bytes, always NUL-terminated when outlen > 0) the
 * connection string or URL in with the values of PWD= and PASSWORD= keys
 * replaced by "***". */
void pc_odbc_redact(const char *in, char *out, size_t outlen);

/* ---- save and load of live collections --------------------------------- */
typedef struct pc_odbc_result {
    uint64_t rows;            /* rows written (save) or entries stored (load) */
    uint64_t skipped_expired; /* entries or rows already expired */
    uint64_t failed;          /* load: entries the engine refused (logged) */
    uint64_t batches;         /* statements executed for the rows */
    uint64_t generation;      /* save: the generation committed; load: the one read */
    double seconds;
    double rate; /* rows / seconds */
} pc_odbc_result;

/* Saves the live collection coll (walked lock-free; workers go on serving)
 * as the rows of the collection of the same name, in one transaction as
 * described above. result may be NULL. On error nothing is committed. */
int pc_odbc_save(pc_odbc *o, pc_coll *coll, pc_odbc_result *result);

/* Loads the rows of the collection named like coll into coll (pc_set /
 * pc_set_counter with the remaining TTL), skipping expired rows, in one
 * read transaction (REPEATABLE READ where the dialect has it, so the rows
 * match the generation read with them). PC_ENOTFOUND when the collection
 * has no generation row (never saved): nothing loaded. */
int pc_odbc_load(pc_odbc *o, pc_coll *coll, pc_odbc_result *result);

/* The committed generation of collection name (NUL-terminated): one
 * primary-key lookup, cheap enough to poll. PC_ENOTFOUND when never saved. */
int pc_odbc_generation(pc_odbc *o, const char *name, uint64_t *gen);

/* ---- shared-database sync (docs/sync.md) ---------------------------------
 * The generation table's `source` column names the node that committed a
 * generation (VARCHAR(63), "" when unknown); pc_odbc_open adds it to a
 * table that predates it when opened with PC_ODBC_CREATE. */
/* pc_odbc_save that also records source (NUL-terminated, at most
 * PC_SYNC_NODE_MAX bytes; NULL = leave the column as it is) in the
 * generation row, in the same transaction. */
int pc_odbc_save_as(pc_odbc *o, pc_coll *coll, const char *source, pc_odbc_result *result);
/* pc_odbc_generation with the source of that generation written into
 * source (srclen bytes, NUL-terminated; may be NULL). */
int pc_odbc_generation_src(pc_odbc *o, const char *name, uint64_t *gen, char *source,
                           size_t srclen);
/* In one REPEATABLE READ transaction: reads the generation row of name and,
 * when its generation is above newer_than, calls fn for every live row
 * (expired rows skipped and counted in *skipped_expired, may be NULL).
 * *gen and source (may be NULL) receive the generation read. A non-zero
 * return of fn stops the visit and is returned. PC_ENOTFOUND when never
 * saved. */
int pc_odbc_visit(pc_odbc *o, const char *name, uint64_t newer_than, pc_persist_row_fn fn,
                  void *ctx, uint64_t *gen, char *source, size_t srclen, uint64_t *skipped_expired);

/* ---- moving snapshots between the LMDB store and SQL -------------------- */
/* Export: copies the snapshot of collection name (NULL = every collection
 * of the store) from s into the database, all of it in ONE SQL transaction
 * (each collection replaced and its generation bumped as by a save);
 * expired records are skipped. Any error rolls back everything. result
 * (may be NULL) sums over the collections. PC_ENOTFOUND when the named
 * collection has no snapshot in s. */
int pc_odbc_export(pc_odbc *o, pc_store *s, const char *name, pc_odbc_result *result);

/* Import: copies the rows of collection name (NULL = every collection of
 * the generation table) into the store s: each collection is read in one
 * SQL read transaction into a private in-process cache, then saved with
 * pc_store_save - one LMDB transaction per collection (the store has no
 * multi-collection transaction). Expired rows are skipped. PC_ENOTFOUND
 * when the named collection was never saved to SQL. */
int pc_odbc_import(pc_odbc *o, pc_store *s, const char *name, pc_odbc_result *result);

/* ---- db_url "odbc://..." for the persistence policies ------------------- */
/* The backend that pc_persist_open uses for ODBC db_urls: set
 * pc_persist_config.sql_backend to it. Static; never NULL. */
const pc_persist_backend *pc_odbc_persist_backend(void);

#ifdef __cplusplus
}
#endif
#endif /* PCACHE_ODBC_H */
