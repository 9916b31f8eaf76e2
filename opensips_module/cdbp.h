/*
 * cdbp.h - module-internal state and entry points of cachedb_perf, the
 * OpenSIPS face of pcache (internal to opensips_module/).
 *
 * The module is an adapter: every cache operation, command and persistence
 * step is a call into the public headers of libpcache (pcache.h), its
 * management layer (pcache_mgmt.h) and its persistence (pcache_persist.h).
 * What lives here is OpenSIPS glue only: modparams, the cachedb vtable, MI
 * items, script functions, EVI events and statistics.
 *
 * Process model: mod_init runs in the main process before any fork. It
 * creates the shared cache (pc_cache_create), the command context and,
 * with db_url, the store (pc_persist_open + the startup load of db_mode).
 * Every OpenSIPS process inherits these handles; each uses them from its
 * one thread. The module's maintenance process grows the tables, sweeps
 * expired entries, ticks the journal and runs queued perf_sync requests; MI
 * commands run in the MI process (mi_http / mi_fifo). Neither serves SIP
 * traffic, so the saves they run never stall a SIP worker.
 */
#ifndef CDBP_H
#define CDBP_H

#include <sr_module.h>
#include <mi/mi.h>
#include <statistics.h>

#include "pcache.h"
#include "pcache_mgmt.h"
#include "pcache_persist.h"

/* ---- modparams (cachedb_perf.c) ------------------------------------------ */
extern char *cdbp_collections;      /* cache_collections */
extern int cdbp_mem_mb;             /* cache_mem_mb: the engine's shared region */
extern int cdbp_sweep_period;       /* expiry_sweep_period, seconds; 0 = off */
extern int cdbp_growth_load_factor; /* growth_load_factor; 0 = never grow */
extern int cdbp_growth_budget;      /* growth_budget */
extern int cdbp_hugepage_mb;        /* arena_hugepage_mb */
extern int cdbp_arena_selftest;
extern int cdbp_htable_selftest;
extern char *cdbp_expired_colls; /* event_expired_collections */
extern char *cdbp_db_url;
extern int cdbp_db_mode;
extern char *cdbp_persist_colls; /* persist_collections */
extern char *cdbp_journal;       /* journal: "coll=always;coll=everysec" */
extern int cdbp_snapshot_period; /* snapshot_period, seconds; 0 = off */
extern int cdbp_sync_cluster_id;
extern int cdbp_sync_poll_period;  /* sync_poll_period, seconds; 0 = no poll */
extern char *cdbp_sync_shtag;      /* sync_shtag: "name/cluster_id", NULL = off */
extern char *cdbp_replicate_colls; /* replicate_collections: pulled across nodes */
extern int cdbp_pull_on_miss;      /* pull_on_miss: a cache_fetch miss waits for the pull */
extern int cdbp_pull_timeout_ms;   /* pull_timeout_ms */
extern int cdbp_pull_negative_ms;  /* pull_negative_ms */
extern int cdbp_pull_max_key;      /* pull_max_key, bytes */
extern int cdbp_pull_max_value;    /* pull_max_value, bytes */
extern int cdbp_pull_slots;        /* pull_slots */
extern char *cdbp_eviction;        /* eviction: "coll=policy;coll=policy" */

/* ---- live state (created in mod_init, inherited by every process) -------- */
extern pc_cache *cdbp_cache;
extern pc_mgmt *cdbp_mgmt;
extern pc_persist *cdbp_persist; /* NULL without db_url */
extern pc_coll *cdbp_default;    /* the groupless cachedb_url's collection */

/* Routes the library's log lines to LM_* (pc_log_fn). */
void cdbp_log(void *ctx, int level, const char *msg);

/* ---- cachedb vtable (cdbp_cdb.c) ----------------------------------------- */
/* Registers the "perf" cachedb engine and opens the cachedb_url
 * connections (urls: the modparam list, NULL = perf://). Sets
 * cdbp_default. 0 or -1 (logged). */
struct cachedb_url;
int cdbp_cdb_init(struct cachedb_url *urls);

/* ---- MI (cdbp_mi.c) ------------------------------------------------------ */
extern const mi_export_t cdbp_mi_cmds[];

/* ---- perf_sync over clusterer, and the commands without a store
 * (cdbp_sync.c) ---------------------------------------------------------- */
/* In mod_init, before pc_persist_open: binds the clusterer API when
 * sync_cluster_id is set and clusterer is loaded (a soft dependency),
 * registers the capability and fills the sync fields of pcfg (node id,
 * push callback, poll period). 0 or -1 (logged). */
int cdbp_sync_setup(pc_persist_config *pcfg);
/* Without db_url, registers perf_save / perf_load / perf_sync answering
 * with a clear error (with one, the library registered them). */
int cdbp_sync_register(pc_mgmt *m);
/* Script side: asks the maintenance process to run perf_sync of coll (NULL =
 * every persisted collection). 0 or a negative PC_E* code. */
int cdbp_sync_request(pc_coll *coll);
/* In the maintenance process: runs the queued requests. */
void cdbp_sync_run_queued(void);
/* In the maintenance process: notes its process number (the receive
 * handler wakes it by IPC), then, when cdbp_sync_enabled(), runs
 * cdbp_sync_tick every 100 ms (the library's rate-limited notice check,
 * the poll and the reloads). */
void cdbp_sync_maint_start(void);
int cdbp_sync_enabled(void);
void cdbp_sync_tick(void);
/* The nodes of cluster_id the clusterer sees as reachable now, through the
 * caller's bound API (perf_sync's push and the pull share it). */
struct clusterer_binds;
unsigned cdbp_cluster_nodes_up(struct clusterer_binds *cl, int cluster_id);
/* Shared request flags and the save lock; created in mod_init. 0 or -1. */
int cdbp_sync_init(void);
/* The store's protocol allows one save of a collection at a time
 * (pcache_journal.h), and two processes save: the MI process (perf_save,
 * perf_load, perf_sync) and the maintenance process (periodic snapshots,
 * queued perf_sync). Both hold this lock around their store work. */
void cdbp_persist_lock(void);
void cdbp_persist_unlock(void);

/* ---- cross-node pull-on-miss (cdbp_pull.c) ------------------------------- */
/* What a pull came to (cdbp_pull_result.outcome). */
enum {
    CDBP_PULL_OFF,          /* the collection does not replicate, or no clusterer */
    CDBP_PULL_KEY_TOO_LONG, /* over pull_max_key: not asked */
    CDBP_PULL_NEGATIVE,     /* the negative cache says no peer holds it */
    CDBP_PULL_NO_SLOT,      /* every pull slot is busy: not asked */
    CDBP_PULL_NO_PEERS,     /* no peer is reachable */
    CDBP_PULL_SEND_FAILED,  /* the ask could not be sent (logged) */
    CDBP_PULL_TIMEOUT,      /* no answer in pull_timeout_ms (a late one is still stored) */
    CDBP_PULL_SERVED,       /* a peer held it: stored here, value returned */
    CDBP_PULL_NOT_FOUND,    /* every peer said "not here" */
    CDBP_PULL_HELD_TOO_BIG, /* a peer holds it, over pull_max_value */
    CDBP_PULL_ERROR,        /* no pkg memory */
};
typedef struct cdbp_pull_result {
    int outcome;
    int status;
    int src_node;   /* the node that answered (SERVED) */
    int64_t ttl_ms; /* its remaining TTL, -1 = none */
    char *value;    /* SERVED: pkg memory, NUL-terminated, the caller's */
    unsigned vlen;
} cdbp_pull_result;
/* In mod_init, after the collections exist: parses replicate_collections,
 * binds clusterer (soft: without it the pull is off, with a warning) and
 * registers the capability and the statistics. 0 or -1 (logged). */
int cdbp_pull_setup(void);
/* 1 when coll is pulled across nodes. */
int cdbp_pull_replicates(pc_coll *coll);
/* Asks the cluster for key (blocks at most pull_timeout_ms). 0 when the
 * cluster was asked or the negative cache answered, -1 when it could not
 * be (res->outcome says which either way). */
int cdbp_pull(pc_coll *coll, const char *key, size_t klen, cdbp_pull_result *res);
/* Asks every peer whether it replicates coll: ids[0..*n) the ones that
 * do, *asked the peers reachable. 0, -1 (not active / send failed), -2 no slot. */
int cdbp_pull_probe(pc_coll *coll, int *ids, unsigned cap, unsigned *n, unsigned *asked);
/* In the maintenance process, every second: frees the slots of askers
 * that died and of orphans past their linger. */
void cdbp_pull_reap(void);
const char *cdbp_pull_outcome_name(int outcome);

/* ---- script functions (cdbp_script.c) ------------------------------------ */
extern const cmd_export_t cdbp_cmds[];

/* ---- events and statistics (cdbp_events.c) ------------------------------- */
/* Publishes the EVI events; subscribes the engine to them. 0 or -1. */
int cdbp_events_init(void);
/* The pc_event_fn the cache is created with (raises EVI events). */
void cdbp_event_fn(void *ctx, const struct pc_event *ev);
/* Opts the named collections into the expired event. 0 or -1. */
int cdbp_events_expired(const char *list);
/* In the first maintenance tick: raises the mem_degraded event noted at
 * creation (EVI is not ready to deliver from mod_init). */
void cdbp_events_boot(void);
extern const stat_export_t cdbp_stats[];

/* ---- eviction (cdbp_evict.c) -------------------------------------------- */
/* The maxmemory modparam's setter (an int in bytes, or a string with
 * Redis's units). */
int cdbp_maxmemory_param(modparam_t type, void *val);
/* In mod_init, after pc_cache_create and before the startup load: checks
 * and applies maxmemory and every collection's eviction policy (the engine
 * keeps both in shared memory, for every process). 0 or -1 (logged). */
int cdbp_evict_setup(void);
/* 1 when some collection's policy evicts (the maintenance tick then
 * evicts ahead of need). */
int cdbp_evict_active(void);

/* ---- startup selftests (cdbp_selftest.c) --------------------------------- */
int cdbp_arena_selftest_run(void);
int cdbp_htable_selftest_run(void);

#endif /* CDBP_H */
