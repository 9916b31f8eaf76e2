/*
 * cdbp_sync.c - perf_sync: save a collection to the store, then ask the
 * cluster's other nodes to reload it (SPEC section 6).
 *
 * This build has the save half only: the push to the peers over the
 * clusterer module is the job of cdbp_sync_push below, which today reports
 * why no peer was notified (no sync_cluster_id, or no push in this build),
 * so perf_sync degrades to a save and says so in its result, as seed 000
 * describes for a node without clusterer. When the push lands it fills
 * cdbp_sync_push; the command, the script function and the queue stay.
 *
 * The script function does not save in the SIP worker that calls it: it
 * sets a request bit in shared memory and the module's maintenance process
 * runs the sync, so no SIP worker ever blocks on a save.
 *
 * Without db_url, perf_save, perf_load and perf_sync are still commands
 * (the MI table is static): they answer with an error naming the missing
 * parameter.
 */
#include <dprint.h>
#include <locking.h>
#include <mem/shm_mem.h>

#include "cdbp.h"

#include <string.h>

/* Request bits, shared by every process: bit i = collection i. */
static uint64_t *cdbp_sync_req;
static gen_lock_t *cdbp_save_lock;

int cdbp_sync_init(void)
{
    cdbp_sync_req = shm_malloc(sizeof *cdbp_sync_req);
    cdbp_save_lock = lock_alloc();
    if (cdbp_sync_req == NULL || cdbp_save_lock == NULL || lock_init(cdbp_save_lock) == NULL) {
        LM_ERR("no more shared memory\n");
        return -1;
    }
    *cdbp_sync_req = 0;
    return 0;
}

void cdbp_persist_lock(void)
{
    if (cdbp_save_lock != NULL)
        lock_get(cdbp_save_lock);
}

void cdbp_persist_unlock(void)
{
    if (cdbp_save_lock != NULL)
        lock_release(cdbp_save_lock);
}

/* Asks the cluster to reload coll at generation gen. Returns the number of
 * peers notified, or 0 with *note saying why none was. */
static unsigned cdbp_sync_push(pc_coll *coll, uint64_t gen, const char **note)
{
    (void)coll;
    (void)gen;
    if (cdbp_sync_cluster_id == 0)
        *note = "saved only: sync_cluster_id is 0, no peer notified";
    else
        *note = "saved only: the clusterer push of perf_sync is not in this build, no peer "
                "notified";
    return 0;
}

typedef struct cdbp_sync_res {
    unsigned collections;
    uint64_t saved, generation;
    unsigned peers;
    const char *note;
} cdbp_sync_res;

/* Syncs coll, or every collection when coll is NULL. 0 or the first
 * failing save's code (err names it). */
static int cdbp_sync_do(pc_coll *only, cdbp_sync_res *res, pc_mgmt_err *err)
{
    memset(res, 0, sizeof *res);
    res->note = "";
    for (unsigned i = 0; i < pc_coll_count(cdbp_cache); i++) {
        pc_coll *coll = pc_coll_at(cdbp_cache, i);
        if (only != NULL && coll != only)
            continue;
        pc_store_save_result r;
        int rc = pc_persist_save_coll(cdbp_persist, coll, &r);
        if (rc != 0)
            return pc_mgmt_errorf(err, rc,
                                  "perf_sync: saving collection \"%s\" failed: %s (its previous "
                                  "snapshot stands; nothing was pushed)",
                                  pc_coll_name(coll), pc_strerror(rc));
        res->collections++;
        res->saved += r.saved;
        res->generation = r.generation;
        res->peers += cdbp_sync_push(coll, r.generation, &res->note);
    }
    return 0;
}

static int cdbp_cmd_sync(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                         pc_mgmt_err *err)
{
    (void)ctx;
    cdbp_sync_res res;
    int rc = cdbp_sync_do(pc_mgmt_call_coll(call, 0), &res, err);
    if (rc != 0)
        return rc;
    if ((rc = o->obj_begin(r, NULL)) == 0 &&
        (rc = o->u64(r, "collections", res.collections)) == 0 &&
        (rc = o->u64(r, "saved", res.saved)) == 0 &&
        (rc = o->u64(r, "generation", res.generation)) == 0 &&
        (rc = o->u64(r, "peers_notified", res.peers)) == 0 &&
        (rc = o->str(r, "note", res.note, strlen(res.note))) == 0)
        rc = o->obj_end(r);
    return rc;
}

static int cdbp_cmd_nostore(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                            pc_mgmt_err *err)
{
    (void)call;
    (void)o;
    (void)r;
    return pc_mgmt_errorf(err, PC_ECONFIG,
                          "%s: no db_url is configured (modparam db_url, e.g. "
                          "\"lmdb:///var/lib/opensips/pcache\")",
                          (const char *)ctx);
}

static const pc_mgmt_param cdbp_sync_params[] = {
    {"collection", PC_MP_COLL_ALL, 0, NULL, 0, 0, "collection (omitted: every collection)"},
};

int cdbp_sync_register(pc_mgmt *m)
{
    int rc = 0;
    if (cdbp_persist == NULL) {
        static const char *names[] = {"perf_save", "perf_load", "perf_sync"};
        for (unsigned i = 0; i < 3 && rc == 0; i++) {
            pc_mgmt_cmd c = {names[i], "needs db_url",   cdbp_sync_params,
                             1,        cdbp_cmd_nostore, (void *)names[i]};
            if (pc_mgmt_cmd_find(m, names[i]) == NULL)
                rc = pc_mgmt_register(m, &c);
        }
    } else if (pc_mgmt_cmd_find(m, "perf_sync") == NULL) {
        pc_mgmt_cmd c = {
            "perf_sync",      "save, then ask the cluster to reload (degrades to a save)",
            cdbp_sync_params, 1,
            cdbp_cmd_sync,    NULL};
        rc = pc_mgmt_register(m, &c);
    }
    if (rc != 0)
        LM_ERR("cannot register the persistence commands: %s\n", pc_strerror(rc));
    return rc;
}

int cdbp_sync_request(pc_coll *coll)
{
    if (cdbp_persist == NULL)
        return PC_ECONFIG;
    uint64_t bits = 0;
    for (unsigned i = 0; i < pc_coll_count(cdbp_cache); i++)
        if (coll == NULL || pc_coll_at(cdbp_cache, i) == coll)
            bits |= 1ull << i;
    __atomic_fetch_or(cdbp_sync_req, bits, __ATOMIC_SEQ_CST);
    return 0;
}

void cdbp_sync_run_queued(void)
{
    if (cdbp_sync_req == NULL || cdbp_persist == NULL)
        return;
    uint64_t bits = __atomic_exchange_n(cdbp_sync_req, 0, __ATOMIC_SEQ_CST);
    if (bits == 0)
        return;
    cdbp_persist_lock();
    for (unsigned i = 0; bits != 0 && i < pc_coll_count(cdbp_cache); i++) {
        if (!(bits & (1ull << i)))
            continue;
        pc_coll *coll = pc_coll_at(cdbp_cache, i);
        cdbp_sync_res res;
        pc_mgmt_err err;
        if (cdbp_sync_do(coll, &res, &err) != 0)
            LM_ERR("%s\n", err.msg);
        else
            LM_INFO("perf_sync %s: %llu saved, generation %llu, %u peer(s) notified (%s)\n",
                    pc_coll_name(coll), (unsigned long long)res.saved,
                    (unsigned long long)res.generation, res.peers, res.note);
    }
    cdbp_persist_unlock();
}
