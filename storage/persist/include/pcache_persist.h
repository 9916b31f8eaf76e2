/*
 * pcache_persist.h - the persistence of pcache: the one public header of
 * storage/persist/. The policies the hosts configure (db_url, db_mode,
 * persist_collections, the journal modes, periodic snapshots, perf_save /
 * perf_load), the interface of an SQL store behind db_url
 * (pc_persist_backend), and the shared-database read-replica refresh
 * (perf_sync, docs/sync.md).
 *
 * The policies own no format: an LMDB db_url is served by the snapshot
 * store (pcache_store.h) together with the write-ahead journal
 * (pcache_journal.h); an SQL db_url by the backend the host hands in. A
 * host includes this header (and pcache_odbc.h for the ODBC backend), not
 * the store's or the journal's.
 *
 * Conventions are those of pcache.h: every function returns 0 or a negative
 * PC_E* code (pc_store_strerror names it); pointer parameters are borrowed for
 * the call unless documented; the library never prints, it logs through
 * pc_persist_config.log.
 */
#ifndef PCACHE_PERSIST_H
#define PCACHE_PERSIST_H

#include <stddef.h>
#include <stdint.h>

#include "pcache.h"
#include "pcache_journal.h"
#include "pcache_store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- persistence policies (persist.c): what the hosts call ---------------
 * db_url selects the store ("lmdb:///abs/path" or a directory path);
 * db_mode 0 = on demand (perf_save / perf_load only), 1 = load at startup,
 * 2 = load at startup and save on graceful shutdown; persist_collections
 * names the collections the modes (and the periodic snapshots) cover; the
 * journal spec gives per-collection journal modes ("th=always;s=everysec").
 * Lifecycle: pc_persist_open and pc_persist_startup before the host forks,
 * pc_persist_tick about once a second in the maintenance process (journal
 * fdatasync, periodic snapshots), pc_persist_worker_tick in each worker,
 * pc_persist_shutdown on a graceful stop.
 * Saves run in the calling process: hosts call them from a process that
 * serves no traffic. */
typedef struct pc_persist pc_persist;
struct pc_mgmt;

/* What one save or load of a collection did, whichever store is behind
 * db_url: the facts both the LMDB store and an SQL backend have. */
typedef struct pc_persist_result {
    uint64_t rows;            /* save: entries written; load: entries stored into the
                               * collection */
    uint64_t skipped_expired; /* entries (save) or records / rows (load) already expired */
    uint64_t failed;          /* load: entries the engine refused (PC_ENOMEM...): logged */
    uint64_t generation;      /* save: the generation committed; load: the one loaded */
    double seconds;           /* wall time of the save or load */
    double rate;              /* rows / seconds */
} pc_persist_result;

/* A store other than LMDB behind db_url, implemented outside storage/ (the
 * ODBC exporter's pc_odbc_persist_backend() in odbc/include/pcache_odbc.h) and
 * handed in by the host through pc_persist_config.sql_backend: storage/
 * never depends on odbc/. accepts(db_url) says whether a URL is the
 * backend's; open receives the db_url (borrowed) and returns an opaque
 * handle, writing a message without any password into err on failure;
 * save / load work on one collection like the store's, writing *result
 * (may be NULL) on success, and load returns PC_ENOTFOUND when the
 * collection was never saved; describe returns the db_url with any
 * password masked (valid until close); errmsg the message of the last
 * error, with the SQLSTATE where there is one and no password (valid until
 * the next call). A backend store has no journal. */
/* One row of a collection as a backend stores it: key and value borrowed
 * for the call; expires_ms absolute wall-clock milliseconds, 0 = never; a
 * counter (is_counter 1) arrives as its decimal text. Return 0 to go on. */
typedef int (*pc_persist_row_fn)(void *ctx, const void *key, size_t klen, const void *val,
                                 size_t vlen, int64_t expires_ms, int is_counter);
/* The host's push of perf_sync (docs/sync.md "Host contract"): tells every
 * peer that collection coll now has generation gen in the shared database,
 * made by node source (both NUL-terminated, borrowed for the call). It
 * carries no data. Called in the process that runs perf_sync, after the
 * commit; it must not block for long nor call into this pc_persist.
 * Returns the number of peers notified (0 = none configured), or a
 * negative PC_E* when it could not send (perf_sync still succeeds: the
 * peers' poll is the backstop). */
typedef int (*pc_sync_push_fn)(void *ctx, const char *coll, uint64_t gen, const char *source);
#define PC_SYNC_NODE_MAX 63u /* bytes in a node id (pc_persist_config.node_id) */
typedef struct pc_persist_backend {
    const char *name; /* "odbc" */
    int (*accepts)(const char *db_url);
    /* log is borrowed for the call: the backend keeps a copy */
    int (*open)(const char *db_url, const pc_logger *log, void **h, char *err, size_t errlen);
    void (*close)(void *h);
    int (*save)(void *h, pc_coll *coll, pc_persist_result *result);
    int (*load)(void *h, pc_coll *coll, pc_persist_result *result);
    const char *(*describe)(void *h);
    const char *(*errmsg)(void *h); /* the last error's message, password masked */
    /* ---- shared-database sync (docs/sync.md); NULL = the backend cannot
     * serve perf_sync / reloads (perf_sync then degrades to a save) ---- */
    /* save, and record source (NUL-terminated, may be "") as the maker of
     * the new generation in the same transaction */
    int (*save_as)(void *h, pc_coll *coll, const char *source, pc_persist_result *result);
    /* the committed generation of collection coll and its source (written
     * NUL-terminated into source, srclen bytes): one cheap read, polled.
     * PC_ENOTFOUND when the collection was never saved. */
    int (*generation)(void *h, const char *coll, uint64_t *gen, char *source, size_t srclen);
    /* One read transaction: reads the generation row; when its generation
     * is above newer_than, visits every live (unexpired) row through fn;
     * *gen and source receive the generation read (no row was visited when
     * *gen <= newer_than). A non-zero return of fn stops the visit and is
     * returned. PC_ENOTFOUND when never saved. */
    int (*rows)(void *h, const char *coll, uint64_t newer_than, pc_persist_row_fn fn, void *ctx,
                uint64_t *gen, char *source, size_t srclen, uint64_t *skipped_expired);
} pc_persist_backend;
typedef struct pc_persist_config {
    const char *db_url;              /* required */
    int db_mode;                     /* 0, 1, 2 */
    const char *persist_collections; /* "a,b" or "a;b"; NULL = none */
    const char *journal;             /* "a=always;b=everysec"; NULL = no journal */
    unsigned snapshot_period_s;      /* periodic saves of persist_collections; 0 = off */
    /* The journal's bound (Redis's auto-aof-rewrite-percentage / -min-size):
     * when a persisted collection's journal files exceed
     * journal_rewrite_percent % of its last snapshot's stored size and at
     * least journal_rewrite_min_mb MiB, or journal_max_mb MiB whatever the
     * snapshot's size, pc_persist_tick saves it (the save retires the
     * segments it covers), so a restart replays at most about that much.
     * percent 0 = only the cap; max 0 = no cap. Defaults: 100, 64, 0. */
    unsigned journal_rewrite_percent;
    unsigned journal_rewrite_min_mb;
    unsigned journal_max_mb;
    pc_logger log; /* fn NULL = silent; level: above it, nothing is formatted */
    const pc_persist_backend *sql_backend; /* db_url "odbc:..." needs it; NULL = LMDB only */
    /* shared-database sync (docs/sync.md); all optional */
    const char *node_id;       /* this node's name, <= PC_SYNC_NODE_MAX bytes; NULL = "" */
    pc_sync_push_fn sync_push; /* NULL = no peers: perf_sync degrades to a save */
    void *sync_push_ctx;
    unsigned sync_poll_ms;  /* backstop poll of the generations; 0 = off */
    unsigned sync_check_ms; /* at most one notice-driven database read per collection
                             * per this interval; 0 = 1000 */
    /* Confinement of the [store] parameter of perf_save / perf_load, which
     * comes from the management doors (the network): an LMDB store there
     * must resolve (symlinks followed) strictly under store_root; NULL or
     * "" = the directory that holds db_url's store (for an SQL db_url: no
     * LMDB [store] is accepted). An SQL target there is refused unless
     * store_sql_targets is 1 (an ODBC driver may create files at any
     * path, SQLite's for one). */
    const char *store_root;
    int store_sql_targets;
} pc_persist_config;
void pc_persist_config_init(pc_persist_config *cfg);
/* Checks the policy against the cache's collections, opens (creates) the
 * store, takes a new boot generation and opens the journal. Errors name the
 * problem in err: PC_ECONFIG (db_mode, a malformed list or journal mode),
 * PC_ENOCOLL (an undeclared collection), PC_EURL (an unsupported db_url),
 * the store's open errors. *out is caller-owned: pc_persist_close. */
int pc_persist_open(pc_cache *c, const pc_persist_config *cfg, pc_persist **out, char *err,
                    size_t errlen);
void pc_persist_close(pc_persist *p); /* accepts NULL */
/* What pc_persist_open checks, short of opening (creating) the store or
 * connecting to an SQL backend: db_mode, db_url's scheme and form (an
 * lmdb:// URL takes an absolute path), persist_collections and journal
 * against the cache's collections (journal modes are set on c's
 * collections as pc_persist_open would), store_root, and the store's path:
 * an existing directory, or a missing one in an existing directory (no
 * component a regular file). Creates nothing. 0, or the error
 * pc_persist_open would return, named in err. For a host's --check. */
int pc_persist_check(pc_cache *c, const pc_persist_config *cfg, char *err, size_t errlen);
/* The journal's health (pcache_journal.h): all zero without a journal. A
 * write a collection refuses (PC_EREFUSED) is refused because of it. */
int pc_persist_journal_health(const pc_persist *p, pc_journal_health *out);
/* db_mode >= 1: restores every persist collection (snapshot + journal);
 * then installs the journal hook (so workers forked later inherit it).
 * Returns the first error; the other collections are still restored. */
int pc_persist_startup(pc_persist *p);
/* In the maintenance process, about once a second: the journal's
 * fdatasync, the periodic snapshots, and a save of each persisted
 * collection whose journal passed its bound (logged with the sizes). */
int pc_persist_tick(pc_persist *p);
/* In every worker, about once a second: writes its buffered journal
 * records (the fdatasync stays in pc_persist_tick). */
int pc_persist_worker_tick(pc_persist *p);
/* Group commit of the journal's always collections (pcache_journal.h,
 * pc_journal_defer_sync): for a host process with an event loop that holds
 * its replies while pc_persist_commit_pending is non-zero and calls
 * pc_persist_commit once per loop turn before sending them. Without a
 * journal: defer 0 (nothing to do), pending 0, commit 0. */
int pc_persist_defer_sync(pc_persist *p, int on);
uint64_t pc_persist_commit_pending(const pc_persist *p);
int pc_persist_commit(pc_persist *p);
/* pc_journal_commit_start / _finish on the persistence's journal, for a
 * host that runs pc_journal_batch_sync(b) in another thread. Without a
 * journal: start leaves b empty, finish returns 0. */
int pc_persist_commit_start(pc_persist *p, pc_journal_batch *b);
int pc_persist_commit_finish(pc_persist *p, pc_journal_batch *b);
/* How the previous run of the store ended and what this start restored
 * from it, for the host's start message: the journal's verdict (LMDB
 * stores; all zero for an SQL db_url, which keeps no such record), then
 * the totals of pc_persist_startup's restores (zero before it, or with
 * db_mode 0). PC_EINVAL on NULL arguments. */
typedef struct pc_persist_last_stop {
    pc_journal_last_stop journal;
    unsigned collections;      /* collections restored */
    uint64_t snapshot_entries; /* entries loaded from their snapshots */
    uint64_t journal_records;  /* journal records the replays read */
    uint64_t journal_applied;  /* operations they applied (sets, counters, deletes, expiries) */
} pc_persist_last_stop;
int pc_persist_last_stop_get(const pc_persist *p, pc_persist_last_stop *out);
/* Flushes the journal; db_mode 2: saves every persist collection. */
int pc_persist_shutdown(pc_persist *p);
/* The same with the save chosen by the caller (Redis's SHUTDOWN SAVE /
 * NOSAVE): save < 0 as db_mode says, 0 no save (the journal is still
 * flushed), > 0 saves every persist collection (every collection when none
 * is persisted) whatever db_mode. Returns the first error. */
int pc_persist_shutdown_as(pc_persist *p, int save);
/* In a process forked after pc_persist_open (the host's maintenance
 * process), before any save or load there: opens the store again for this
 * process (a store handle never crosses fork). Errors of pc_store_open,
 * with a message in err. */
int pc_persist_after_fork(pc_persist *p, char *err, size_t errlen);
/* One collection, as perf_save / perf_load do (result may be NULL). */
int pc_persist_save_coll(pc_persist *p, pc_coll *coll, pc_persist_result *result);
/* Registers perf_save, perf_load and perf_sync and adds the last save /
 * load, the generation, the journal mode and the sync facts
 * (last_sync_out, last_sync_in, source, counters) to perf_stats. */
int pc_persist_register(pc_persist *p, struct pc_mgmt *m);
/* The LMDB store behind db_url, opened for this process if it was not yet
 * (valid until pc_persist_close); NULL for an SQL db_url or when it cannot
 * be opened. */
pc_store *pc_persist_store(const pc_persist *p);

/* ---- shared-database read-replica refresh (sync.c, docs/sync.md) ---------
 * One authority runs perf_sync; every node's maintenance process reloads a
 * collection when the shared SQL database holds a newer generation of it
 * than the node has. A notice (the push) only asks a node to look: nothing
 * changes unless the database itself holds a newer generation. */
typedef struct pc_sync_result {
    uint64_t saved;      /* entries saved */
    uint64_t generation; /* the generation committed (0 with no SQL database) */
    int peers;           /* peers notified; 0 when none; < 0: the push's error */
    int degraded;        /* 1: saved only (no SQL database, no push, or the push failed) */
    char note[160];      /* why it degraded, "" otherwise */
} pc_sync_result;
/* perf_sync of one collection: saves it (to the SQL database, recording
 * this node as the source of the new generation in the same transaction),
 * records last_sync_out, then calls the host's push. With no SQL database
 * it saves to the local store; with no push or no peers it saves; both say
 * so in result->note, never failing for cluster reasons. Errors: those of
 * the save (nothing committed, the previous generation stands; peers are
 * not notified). Call it where saves run (a process that serves no
 * traffic). result may be NULL. */
int pc_persist_sync(pc_persist *p, pc_coll *coll, pc_sync_result *result);
/* A notice from a peer: collection coll (len bytes, need not be
 * NUL-terminated), generation gen, made by source (NUL-terminated, may be
 * NULL). Any process may call it: it only records, in shared memory, that
 * the collection should be checked (no database access, no allocation).
 * A generation not above the node's is ignored (a replay costs nothing).
 * PC_ENOCOLL for an unknown collection, PC_EINVAL for gen 0. */
int pc_persist_sync_notice(pc_persist *p, const char *coll, size_t len, uint64_t gen,
                           const char *source);
/* In the maintenance process (the one that saves; one process per node -
 * a second one calling it concurrently skips the collections the first is
 * checking), often - every 100 ms or
 * when pc_persist_sync_due_ms says: for each collection with a pending
 * notice (at most one database read per sync_check_ms) and, every
 * sync_poll_ms, for every collection: reads the generation in the
 * database, and when it is above the node's, reloads the collection
 * (upsert every live row, then prune the keys the snapshot lacks), records
 * last_sync_in, generation and source in shared memory and raises the
 * synced event (PC_EV_RELOADED). Returns the first error (the collection
 * keeps its previous data; the next poll retries). pc_persist_tick calls it
 * too. Without an SQL backend with sync support it does nothing. */
int pc_persist_sync_tick(pc_persist *p);
/* Milliseconds until pc_persist_sync_tick has work (a poll or a rate-limited
 * notice falls due), for the host's poll timeout; -1 when nothing is
 * scheduled. */
int pc_persist_sync_due_ms(pc_persist *p);
/* Counters and facts of one collection, also in perf_stats: all read from
 * shared memory, valid in any process. */
typedef struct pc_sync_stats {
    int64_t last_sync_out_ms;          /* wall clock of this node's last perf_sync, 0 = never */
    int64_t last_sync_in_ms;           /* wall clock of the last reload by sync, 0 = never */
    uint64_t generation;               /* the generation this node's copy is */
    char source[PC_SYNC_NODE_MAX + 1]; /* the node that made it ("" = unknown) */
    uint64_t notices;                  /* notices accepted (above the generation) */
    uint64_t checks;                   /* database reads of the generation for a notice */
    uint64_t polls;                    /* database reads of the generation by the poll */
    uint64_t rejected;                 /* notices the database did not confirm */
    uint64_t reloads;                  /* reloads done */
    uint64_t pruned;                   /* keys pruned by the reloads */
    int32_t last_rc;                   /* the last check or reload: 0 or PC_E* */
} pc_sync_stats;
int pc_persist_sync_stats(const pc_persist *p, const pc_coll *coll, pc_sync_stats *out);
int pc_persist_is_persisted(const pc_persist *p, const pc_coll *coll);

/* The last save and load of one collection (also in perf_stats), read from
 * shared memory, valid in any process: for monitoring (pcached's /metrics,
 * the module's statistics). Wall-clock ms, 0 = never; rc 0 or the PC_E*
 * code of the last attempt. PC_EINVAL on NULL arguments. */
typedef struct pc_persist_save_stats {
    int persisted;        /* 1 when persist_collections names it */
    int64_t last_save_ms; /* the last successful save */
    int32_t last_save_rc; /* the last save attempt */
    uint64_t last_save_entries;
    int64_t last_load_ms;
    int32_t last_load_rc;
} pc_persist_save_stats;
int pc_persist_save_stats_get(const pc_persist *p, const pc_coll *coll, pc_persist_save_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* PCACHE_PERSIST_H */
