/*
 * persist_int.h - internals of the persistence policies (persist.c) shared
 * with persist_target.c: a store named by a command's [store] parameter.
 */
#ifndef PC_PERSIST_INT_H
#define PC_PERSIST_INT_H

#include "pcache_store.h"

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
int pp_target_open(const char *url, const pc_persist_backend *be, int create, pc_log_fn log,
                   void *log_ctx, int log_level, pp_target *t, char *err, size_t errlen);
int pp_target_save(pp_target *t, pc_coll *coll, pc_store_save_result *r);
/* PC_ENOTFOUND when the target has no snapshot of coll: nothing loaded. */
int pp_target_load(pp_target *t, pc_coll *coll, pc_store_load_result *r);
/* The target as a result shows it (path, or the URL with the password
 * masked); valid until close. */
const char *pp_target_describe(const pp_target *t);
/* The backend's message of the last error ("" for LMDB). */
const char *pp_target_errmsg(const pp_target *t);
void pp_target_close(pp_target *t);

#endif
