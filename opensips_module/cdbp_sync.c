/*
 * cdbp_sync.c - perf_sync over the clusterer module: the OpenSIPS host of
 * the library's shared-database read-replica refresh (docs/sync.md
 * "Host contract").
 *
 * The library does the database work: pc_persist_sync saves a collection to
 * the shared SQL database and bumps its generation in one transaction, then
 * calls the push callback; pc_persist_sync_notice records a peer's notice
 * in shared memory; pc_persist_sync_tick checks the database (rate-limited
 * per notice, and every sync_poll_period as a backstop) and reloads. What
 * lives here is the transport and the process placement:
 *
 *   - the push rides the clusterer module: one BIN packet of capability
 *     "cachedb-perf-sync" (below: CDBP_SYNC_NOTICE) to every node of
 *     sync_cluster_id, carrying the collection, the generation and the
 *     source node only - never data. A notice only makes a node look;
 *     a forged or replayed one costs at most one database read.
 *   - the receive handler runs in whichever process clusterer delivers in
 *     (a BIN reader): it records the notice (pc_persist_sync_notice: shared
 *     memory, no database, no allocation) and wakes the maintenance
 *     process by IPC;
 *   - the maintenance process runs pc_persist_sync_tick: right after a
 *     wake-up and every CDBP_SYNC_TICK_MS; the reload and the synced event
 *     (E_CACHEDB_PERF_SYNCED) happen there, never in a SIP worker;
 *   - perf_sync itself runs where saves run: the MI process (the library's
 *     perf_sync command) or, for the script function, the maintenance
 *     process (the SIP worker only sets a request bit).
 *
 * clusterer is a soft dependency: without it, or with sync_cluster_id 0,
 * there is no push callback and perf_sync degrades to a save, saying so in
 * its result; replicas still converge by the poll when sync_poll_period is
 * set.
 *
 * sync_shtag ("name/cluster_id", a clusterer sharing tag) moves the cache
 * with an active/backup failover: the node whose tag turns backup runs
 * perf_sync of every persisted collection (saved, peers notified); the
 * node whose tag turns active checks the database at once for a newer
 * generation (a notice to itself, so a crash failover does not wait for
 * the poll). The clusterer calls back in whichever process changed the
 * tag (MI, a BIN reader); the callback only sets request bits and wakes
 * the maintenance process, which does the database work.
 *
 * Without db_url, perf_save, perf_load and perf_sync are still commands
 * (the MI table is static): they answer with an error naming the missing
 * parameter.
 */
#include <dprint.h>
#include <ipc.h>
#include <locking.h>
#include <pt.h>
#include <mem/shm_mem.h>
#include <modules/clusterer/api.h>

#include "cdbp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The notice, a BIN packet of capability CDBP_SYNC_CAP, type
 * CDBP_SYNC_NOTICE, BIN version CDBP_SYNC_BIN_VERSION (the README's
 * "Cluster sync" has the table):
 *   str collection   the collection's name
 *   str generation   the committed generation, decimal text (BIN integers
 *                    are 32-bit; generations are 64-bit)
 *   str source       the node that committed it (its clusterer node id)
 * followed by the clusterer's own trailer. */
#define CDBP_SYNC_CAP "cachedb-perf-sync"
#define CDBP_SYNC_NOTICE 1
#define CDBP_SYNC_BIN_VERSION 1

static str cdbp_sync_cap = str_init(CDBP_SYNC_CAP);
static struct clusterer_binds cdbp_cl;
static int cdbp_cl_loaded; /* the clusterer API is bound */
static char cdbp_node_id[PC_SYNC_NODE_MAX + 1];

/* Shared: request bits (bit i = collection i), the maintenance process's
 * number, for the IPC wake-ups, and whether a notice wake-up is already on
 * its way (a flood of notices sends one IPC job, not one per notice). */
static uint64_t *cdbp_sync_req;
static int *cdbp_maint_proc_no;
static int *cdbp_wake_pending;
static gen_lock_t *cdbp_save_lock;

int cdbp_sync_init(void)
{
    cdbp_sync_req = shm_malloc(sizeof *cdbp_sync_req);
    cdbp_maint_proc_no = shm_malloc(sizeof *cdbp_maint_proc_no);
    cdbp_wake_pending = shm_malloc(sizeof *cdbp_wake_pending);
    cdbp_save_lock = lock_alloc();
    if (cdbp_sync_req == NULL || cdbp_maint_proc_no == NULL || cdbp_wake_pending == NULL ||
        cdbp_save_lock == NULL || lock_init(cdbp_save_lock) == NULL) {
        LM_ERR("no more shared memory\n");
        return -1;
    }
    *cdbp_sync_req = 0;
    *cdbp_maint_proc_no = -1;
    *cdbp_wake_pending = 0;
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

unsigned cdbp_cluster_nodes_up(struct clusterer_binds *cl, int cluster_id)
{
    unsigned n = 0;
    clusterer_node_t *nodes = cl->get_nodes(cluster_id);
    for (clusterer_node_t *p = nodes; p != NULL; p = p->next)
        n++;
    if (nodes != NULL)
        cl->free_nodes(nodes);
    return n;
}

/* ---- the push (pc_sync_push_fn) ------------------------------------------ */
/* In the process running perf_sync (MI or maintenance), after the commit.
 * Returns the number of peers the notice went to, 0 when the cluster has
 * no other node up, or PC_EIO when clusterer could not send (the library
 * notes it in perf_sync's result; the peers' poll is the backstop). */
static int cdbp_sync_push(void *ctx, const char *coll, uint64_t gen, const char *source)
{
    (void)ctx;
    char gtext[24];
    int glen = snprintf(gtext, sizeof gtext, "%llu", (unsigned long long)gen);
    str s_coll = {(char *)coll, (int)strlen(coll)};
    str s_gen = {gtext, glen};
    str s_src = {(char *)source, (int)strlen(source)};
    int peers = (int)cdbp_cluster_nodes_up(&cdbp_cl, cdbp_sync_cluster_id);
    if (peers == 0)
        return 0; /* nobody reachable: nothing sent (the poll covers them) */
    bin_packet_t pkt;
    if (bin_init(&pkt, &cdbp_sync_cap, CDBP_SYNC_NOTICE, CDBP_SYNC_BIN_VERSION, 0) != 0) {
        LM_ERR("perf_sync %s: cannot build the notice (no pkg memory)\n", coll);
        return PC_EHEAP;
    }
    int rc = PC_EIO;
    if (bin_push_str(&pkt, &s_coll) < 0 || bin_push_str(&pkt, &s_gen) < 0 ||
        bin_push_str(&pkt, &s_src) < 0) {
        LM_ERR("perf_sync %s: cannot build the notice\n", coll);
        goto out;
    }
    switch (cdbp_cl.send_all(&pkt, cdbp_sync_cluster_id)) {
    case CLUSTERER_SEND_SUCCESS:
        rc = peers;
        break;
    case CLUSTERER_CURR_DISABLED:
        LM_WARN("perf_sync %s: this node is disabled in cluster %d: no notice sent\n", coll,
                cdbp_sync_cluster_id);
        break;
    case CLUSTERER_DEST_DOWN:
        LM_WARN("perf_sync %s: every node of cluster %d is down or probing: no notice sent\n", coll,
                cdbp_sync_cluster_id);
        rc = 0;
        break;
    default:
        LM_ERR("perf_sync %s: sending the notice to cluster %d failed\n", coll,
               cdbp_sync_cluster_id);
        break;
    }
out:
    bin_free_packet(&pkt);
    return rc;
}

/* ---- the receive side ---------------------------------------------------- */
/* In the maintenance process, by IPC from the receive handler. */
static void cdbp_sync_wake(int sender, void *param)
{
    (void)sender;
    (void)param;
    __atomic_store_n(cdbp_wake_pending, 0, __ATOMIC_SEQ_CST);
    cdbp_sync_tick();
}

/* Any process: makes the maintenance process run its sync check now. */
static void cdbp_sync_wake_maint(void)
{
    int dst = *cdbp_maint_proc_no;
    if (dst < 0 || dst == process_no || __atomic_exchange_n(cdbp_wake_pending, 1, __ATOMIC_SEQ_CST))
        return; /* its 100 ms tick runs the check; or a wake-up is on its way */
    if (ipc_send_rpc(dst, cdbp_sync_wake, NULL) < 0) {
        __atomic_store_n(cdbp_wake_pending, 0, __ATOMIC_SEQ_CST);
        LM_DBG("cluster sync: cannot wake the maintenance process (its tick will run)\n");
    }
}

/* In a BIN reader process: records the notice and wakes the maintenance
 * process. Nothing here reads the database or changes data: whatever the
 * packet says, the maintenance process only reloads what the database
 * itself holds above this node's generation. */
static void cdbp_sync_recv(bin_packet_t *pkt)
{
    if (cdbp_persist == NULL)
        return;
    ensure_bin_version(pkt, CDBP_SYNC_BIN_VERSION);
    if (pkt->type != CDBP_SYNC_NOTICE) {
        LM_WARN("cluster sync: unknown packet type %d from node %d, ignored\n", pkt->type,
                pkt->src_id);
        return;
    }
    str coll, gtext, src;
    if (bin_pop_str(pkt, &coll) < 0 || bin_pop_str(pkt, &gtext) < 0 || bin_pop_str(pkt, &src) < 0 ||
        gtext.len <= 0 || gtext.len > 20) {
        LM_WARN("cluster sync: malformed notice from node %d, ignored\n", pkt->src_id);
        return;
    }
    char gbuf[24], sbuf[PC_SYNC_NODE_MAX + 1];
    memcpy(gbuf, gtext.s, (size_t)gtext.len);
    gbuf[gtext.len] = '\0';
    char *end;
    unsigned long long gen = strtoull(gbuf, &end, 10);
    if (*end != '\0' || gbuf[0] < '0' || gbuf[0] > '9') {
        LM_WARN("cluster sync: notice from node %d with a bad generation, ignored\n", pkt->src_id);
        return;
    }
    int sl = src.len < 0 ? 0 : src.len > (int)PC_SYNC_NODE_MAX ? (int)PC_SYNC_NODE_MAX : src.len;
    memcpy(sbuf, src.s, (size_t)sl);
    sbuf[sl] = '\0';
    int rc = pc_persist_sync_notice(cdbp_persist, coll.s, (size_t)(coll.len < 0 ? 0 : coll.len),
                                    (uint64_t)gen, sbuf);
    if (rc != 0) {
        LM_WARN("cluster sync: notice from node %d for collection \"%.*s\" generation %llu: "
                "%s, ignored\n",
                pkt->src_id, coll.len, coll.s, gen, pc_store_strerror(rc));
        return;
    }
    LM_DBG("cluster sync: node %d says %.*s is at generation %llu\n", pkt->src_id, coll.len, coll.s,
           gen);
    cdbp_sync_wake_maint();
}

static void cdbp_sync_cl_event(enum clusterer_event ev, int node_id)
{
    if (ev == CLUSTER_NODE_UP || ev == CLUSTER_NODE_DOWN)
        LM_DBG("cluster sync: node %d is %s\n", node_id, ev == CLUSTER_NODE_UP ? "up" : "down");
}

/* ---- sync_shtag ----------------------------------------------------------- */
static str cdbp_shtag;      /* the tag's name (points into the modparam) */
static int cdbp_shtag_cid;  /* its cluster */

/* The clusterer's callback, in the process that changed the tag (see the
 * file's comment): request bits and a wake-up only. */
static void cdbp_shtag_cb(str *tag, int state, int c_id, void *param)
{
    (void)param;
    if (cdbp_persist == NULL)
        return;
    unsigned n = 0;
    for (unsigned i = 0; i < pc_coll_count(cdbp_cache); i++) {
        pc_coll *coll = pc_coll_at(cdbp_cache, i);
        if (!pc_persist_is_persisted(cdbp_persist, coll))
            continue;
        n++;
        if (state == SHTAG_STATE_BACKUP) {
            cdbp_sync_request(coll);
            continue;
        }
        /* active: one generation above this copy's makes the next check read
         * the database's; a reload follows only if the database is newer */
        pc_sync_stats st;
        const char *name = pc_coll_name(coll);
        if (pc_persist_sync_stats(cdbp_persist, coll, &st) == 0)
            pc_persist_sync_notice(cdbp_persist, name, strlen(name), st.generation + 1,
                                   "sync_shtag");
    }
    if (state != SHTAG_STATE_BACKUP)
        cdbp_sync_wake_maint();
    LM_INFO("sync_shtag %.*s/%d is now %s: %s of %u persisted collection(s) queued\n", tag->len,
            tag->s, c_id, state == SHTAG_STATE_BACKUP ? "backup" : "active",
            state == SHTAG_STATE_BACKUP ? "perf_sync" : "a check of the database", n);
}

/* sync_shtag "name/cluster_id": parsed and registered with the clusterer
 * (bound by the caller). 0 or -1 (logged). */
static int cdbp_shtag_setup(void)
{
    if (cdbp_sync_shtag == NULL || cdbp_sync_shtag[0] == '\0')
        return 0;
    char *slash = strrchr(cdbp_sync_shtag, '/');
    char *end = NULL;
    long cid = slash != NULL ? strtol(slash + 1, &end, 10) : 0;
    if (slash == NULL || slash == cdbp_sync_shtag || end == slash + 1 || *end != '\0' ||
        cid <= 0 || cid > 65535) {
        LM_ERR("sync_shtag \"%s\": expected name/cluster_id, as in clusterer's sharing_tag\n",
               cdbp_sync_shtag);
        return -1;
    }
    if (cdbp_db_url == NULL || cdbp_db_url[0] == '\0') {
        LM_ERR("sync_shtag needs db_url (the failover moves the cache through the store)\n");
        return -1;
    }
    cdbp_shtag.s = cdbp_sync_shtag;
    cdbp_shtag.len = (int)(slash - cdbp_sync_shtag);
    cdbp_shtag_cid = (int)cid;
    if (cdbp_cl.shtag_register_callback(&cdbp_shtag, cdbp_shtag_cid, NULL, cdbp_shtag_cb) < 0) {
        LM_ERR("sync_shtag %s: cannot register with the clusterer\n", cdbp_sync_shtag);
        return -1;
    }
    LM_INFO("sync_shtag %.*s/%d: a failover saves on the node turning backup and checks the "
            "database on the node turning active\n",
            cdbp_shtag.len, cdbp_shtag.s, cdbp_shtag_cid);
    return 0;
}

/* ---- setup (mod_init, before pc_persist_open) ---------------------------- */
int cdbp_sync_setup(pc_persist_config *pcfg)
{
    pcfg->sync_poll_ms = (unsigned)cdbp_sync_poll_period * 1000u;
    if (cdbp_sync_cluster_id == 0) {
        if (cdbp_sync_shtag != NULL && cdbp_sync_shtag[0] != '\0') {
            LM_ERR("sync_shtag needs sync_cluster_id (the peers are told through it)\n");
            return -1;
        }
        return 0;
    }
    if (load_clusterer_api(&cdbp_cl) < 0) {
        if (cdbp_sync_shtag != NULL && cdbp_sync_shtag[0] != '\0')
            LM_WARN("sync_shtag %s is set but the clusterer module is not loaded: no failover "
                    "sync\n", cdbp_sync_shtag);
        LM_WARN("sync_cluster_id is %d but the clusterer module is not loaded: perf_sync "
                "degrades to a save and peers learn of it by their poll only\n",
                cdbp_sync_cluster_id);
        return 0;
    }
    if (cdbp_cl.register_capability(&cdbp_sync_cap, cdbp_sync_recv, cdbp_sync_cl_event,
                                    cdbp_sync_cluster_id, 0, NODE_CMP_ANY) < 0) {
        LM_ERR("cannot register the clusterer capability %s in cluster %d\n", CDBP_SYNC_CAP,
               cdbp_sync_cluster_id);
        return -1;
    }
    cdbp_cl_loaded = 1;
    if (cdbp_shtag_setup() != 0)
        return -1;
    snprintf(cdbp_node_id, sizeof cdbp_node_id, "%d", cdbp_cl.get_my_id());
    pcfg->node_id = cdbp_node_id;
    pcfg->sync_push = cdbp_sync_push;
    pcfg->sync_push_ctx = NULL;
    LM_INFO("cluster sync: capability %s in cluster %d, node %s, poll every %d s\n", CDBP_SYNC_CAP,
            cdbp_sync_cluster_id, cdbp_node_id, cdbp_sync_poll_period);
    return 0;
}

/* ---- the maintenance process --------------------------------------------- */
void cdbp_sync_maint_start(void)
{
    if (cdbp_maint_proc_no != NULL)
        *cdbp_maint_proc_no = process_no;
}

int cdbp_sync_enabled(void)
{
    /* only an SQL db_url can be shared (an LMDB store is local: no store
     * handle means the backend serves it) */
    return cdbp_persist != NULL && pc_persist_store(cdbp_persist) == NULL &&
           (cdbp_cl_loaded || cdbp_sync_poll_period > 0);
}

void cdbp_sync_tick(void)
{
    if (cdbp_persist == NULL)
        return;
    cdbp_persist_lock();
    int rc = pc_persist_sync_tick(cdbp_persist);
    cdbp_persist_unlock();
    if (rc != 0)
        LM_ERR("cluster sync: checking or reloading failed: %s (the collection keeps its "
               "data; the next poll retries)\n",
               pc_store_strerror(rc));
}

/* ---- commands without a store -------------------------------------------- */
static int cdbp_cmd_nostore(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                            pc_mgmt_err *err)
{
    (void)call;
    (void)o;
    (void)r;
    return pc_mgmt_errorf(err, PC_ECONFIG,
                          "%s: no db_url is configured (modparam db_url, e.g. "
                          "\"lmdb:///var/lib/opensips/pcache\" or \"odbc://DSN\")",
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
        LM_ERR("the library did not register perf_sync\n");
        rc = PC_ECONFIG;
    }
    if (rc != 0)
        LM_ERR("cannot register the persistence commands: %s\n", pc_store_strerror(rc));
    return rc;
}

/* ---- the script function's queue ----------------------------------------- */
static void cdbp_sync_run_rpc(int sender, void *param)
{
    (void)sender;
    (void)param;
    cdbp_sync_run_queued();
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
    /* the maintenance process runs it now rather than at its next 1 s tick */
    int dst = *cdbp_maint_proc_no;
    if (dst >= 0 && dst != process_no && ipc_send_rpc(dst, cdbp_sync_run_rpc, NULL) < 0)
        LM_DBG("perf_sync: cannot wake the maintenance process (its next tick runs it)\n");
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
        pc_sync_result res;
        int rc = pc_persist_sync(cdbp_persist, coll, &res);
        if (rc != 0)
            LM_ERR("perf_sync %s: saving failed: %s (its previous snapshot stands; nothing "
                   "was pushed)\n",
                   pc_coll_name(coll), pc_store_strerror(rc));
        else
            LM_INFO("perf_sync %s: %llu saved, generation %llu, %d peer(s) notified%s%s\n",
                    pc_coll_name(coll), (unsigned long long)res.saved,
                    (unsigned long long)res.generation, res.peers, res.note[0] ? ": " : "",
                    res.note);
    }
    cdbp_persist_unlock();
}
