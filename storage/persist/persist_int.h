/*
 * persist_int.h - internals shared by persist.c (the persistence policies'
 * lifecycle), persist_config.c (the policy read and checked),
 * persist_coll.c (saving and loading a collection), persist_cmd.c (the
 * management commands), sync.c (the shared-database read-replica refresh)
 * and persist_target.c (a store named by a command's [store] parameter). Not installed, not for
 * other components.
 *
 * A pc_persist is process-local (each process has its copy after fork);
 * what every process must see - the facts of the last save, load and sync
 * of each collection - lives in MAP_SHARED arrays made before the fork.
 */
#ifndef PC_PERSIST_INT_H
#define PC_PERSIST_INT_H

#include "pcache_journal.h"
#include "pcache_mgmt.h"
#include "pcache_persist.h"
#include "pcache_store.h"
#include "pcache_storecheck.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct pc_persist_coll_shm {                    /* written by the saving/loading process only */
    _Atomic int64_t last_save_ms, last_load_ms; /* wall clock, 0 = never */
    _Atomic uint64_t last_save_count, last_load_count, generation;
    _Atomic uint64_t last_save_us, last_load_us;
    _Atomic int32_t last_save_rc, last_load_rc;
};

struct pc_sync_coll_shm; /* sync.c */

struct pc_persist {
    pc_cache *cache;
    pc_store *store;     /* opened by store_pid; use it through pp_store */
    pc_store *inherited; /* in a forked process: the parent's handle, set aside by
                          * pp_store, never used, closed (handle only) by close */
    pid_t store_pid;
    char *db_url; /* for the reopen in a forked process */
    int lock_fd;  /* the store directory, flock(LOCK_EX)ed (persist_lock.c); -1 = none */
    pc_journal *journal;
    const pc_persist_backend *backend;     /* non-NULL: an SQL db_url, no store, no journal */
    const pc_persist_backend *sql_backend; /* the host's, for a [store] that is SQL */
    char *store_root;                      /* realpath of the [store] root; NULL = none */
    int store_sql_targets;                 /* pc_persist_config.store_sql_targets */
    void *bh;                              /* the backend's handle */
    int db_mode;
    /* the boot generation could not be committed at open (a full disk):
     * the journal runs with gen_pending as its boot generation, held
     * failing (writes refused) until a tick commits it (persist.c) */
    uint64_t gen_pending;
    int gen_err;
    unsigned period_s;
    int64_t next_periodic_ms;
    unsigned rewrite_percent; /* the journal's bound (pc_persist_config) */
    uint64_t rewrite_min_bytes;
    uint64_t journal_max_bytes;                 /* 0 = no cap */
    int64_t bound_retry_ms[PC_MAX_COLLECTIONS]; /* after a failed bound save: not before */
    bool persist[PC_MAX_COLLECTIONS];
    pc_persist_last_stop restored;   /* pc_persist_startup's totals (pc_persist_last_stop_get) */
    bool starting;                   /* inside pc_persist_startup's restores */
    struct pc_persist_coll_shm *shm; /* PC_MAX_COLLECTIONS entries, MAP_SHARED */
    pc_logger log;                   /* pc_persist_config.log */
    /* sync (sync.c) */
    char node_id[PC_SYNC_NODE_MAX + 1];
    pc_sync_push_fn push;
    void *push_ctx;
    unsigned poll_ms, check_ms;
    int64_t next_poll_ms; /* monotonic; in the process that ticks */
    bool reopen;          /* the backend's connection may be lost: reopen before its next use */
    struct pc_sync_coll_shm *sync; /* PC_MAX_COLLECTIONS entries, MAP_SHARED */
};

/* persist_confine.c: the store root of [store] parameters, set at open
 * (PC_ECONFIG when a configured root does not resolve), and the check of
 * one such parameter: 0, or PC_EINVAL with the reason in msg. */
int pp_root_init(pc_persist *p, const pc_persist_config *cfg, char *err, size_t errlen);
int pp_confine(const pc_persist *p, const char *url, char *msg, size_t cap);

/* Writes the message into err (when not NULL) and returns rc (persist.c). */
int pp_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Takes the exclusive lock of the LMDB store db_url names (creating its
 * directory when missing) into p->lock_fd: PC_ELOCKED with the holder's
 * pid in err when another process holds it (persist_lock.c). */
int pp_lock_store(pc_persist *p, const char *db_url, char *err, size_t errlen);

/* The index of coll among the cache's collections (persist.c). */
unsigned pp_index(const pc_persist *p, const pc_coll *coll);
/* What an LMDB save or load did, as the policies report it (persist.c). */
void pp_result_of_save(pc_persist_result *out, const pc_store_save_result *r);
void pp_result_of_load(pc_persist_result *out, const pc_store_load_result *r);

/* persist.c: the store handle of this process (opened once in a forked
 * child; valid until pc_persist_close). */
int pp_store(pc_persist *p, pc_store **out);

/* persist_config.c: the persist_collections and journal lists into p; the
 * db_url's scheme (pp_store_path); the store's path as pc_store_open
 * would find it (pp_check_path); an existing store's check before the
 * first write, adding PC_STORE_NOCHECK to sc when it passed (pp_check_store).
 * Each returns 0 or a code with the operator's message in err. */
int pp_policy_lists(pc_persist *p, const pc_persist_config *cfg, char *err, size_t errlen);
int pp_store_path(const char *url, const pc_persist_backend *be, char *err, size_t errlen);
int pp_check_path(const pc_persist_config *cfg, char *err, size_t errlen);
int pp_check_store(const char *url, pc_store_config *sc, char *err, size_t errlen);

/* persist_coll.c: loads coll from the configured store (snapshot, then
 * journal) and records the facts (pc_persist_save_coll is public); the
 * journal's bound of collection i, saving it when its journal passed it. */
int pp_load_coll(pc_persist *p, pc_coll *coll, pc_persist_result *res);
int pp_bound_check(pc_persist *p, unsigned i);

/* sync.c: called by persist.c */
int pc_sync_open(pc_persist *p, const pc_persist_config *cfg, char *err, size_t errlen);
void pc_sync_close(pc_persist *p);
/* after a committed save to the SQL backend: this node made generation gen */
void pc_sync_saved(pc_persist *p, pc_coll *coll, uint64_t gen);
int pc_sync_register(pc_persist *p, pc_mgmt *m);
/* A backend call failed with rc: PC_EIO / PC_ESTORE may mean a lost
 * connection (the database restarted), so the handle is reopened before
 * its next use - pc_sync_reopen_if_lost, called before every backend use
 * by persist.c and sync.c. A handle never reconnects by itself. */
void pc_sync_note_failure(pc_persist *p, int rc);
void pc_sync_reopen_if_lost(pc_persist *p);
int pc_sync_stats_emit(pc_persist *p, pc_coll *coll, const pc_result_ops *ops, void *rctx);
/* sync_reload.c: when the database holds a generation above newer_than,
 * upserts its live rows into coll, then prunes the keys it lacks; *gen
 * and source receive the generation read (nothing changed when *gen <=
 * newer_than). On error the prune did not run. */
int pc_sync_reload(pc_persist *p, pc_coll *coll, uint64_t newer_than, uint64_t *gen, char *source,
                   size_t srclen, uint64_t *loaded, uint64_t *pruned);

/* A store opened for one perf_save / perf_load call ("perf_save th
 * lmdb:///backup"): an LMDB store or an SQL target through the host's
 * backend. It is an export or an import, not the configured store: no
 * journal, no retire, no last_save / last_load, no prune of the target. */
typedef struct pp_target {
    pc_store *store;              /* LMDB */
    const pc_persist_backend *be; /* SQL: the backend and its handle */
    void *bh;
} pp_target;

/* Opens url (borrowed, NUL-terminated): a backend URL when be accepts it,
 * else an LMDB store (created when create). On failure err says why
 * without any password; the code is PC_EURL, PC_ESTORE, PC_EIO... */
int pp_target_open(const char *url, const pc_persist_backend *be, int create, const pc_logger *log,
                   pp_target *t, char *err, size_t errlen);
int pp_target_save(pp_target *t, pc_coll *coll, pc_persist_result *r);
/* PC_ENOTFOUND when the target has no snapshot of coll: nothing loaded. */
int pp_target_load(pp_target *t, pc_coll *coll, pc_persist_result *r);
/* The target as a result shows it (path, or the URL with the password
 * masked); valid until close. */
const char *pp_target_describe(const pp_target *t);
/* The backend's message of the last error ("" for LMDB). */
const char *pp_target_errmsg(const pp_target *t);
void pp_target_close(pp_target *t);

#endif /* PC_PERSIST_INT_H */
