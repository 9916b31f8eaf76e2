/*
 * cachedb_perf.c - the module: its exports, its parameters, and the
 * lifecycle of the shared cache inside OpenSIPS.
 *
 * mod_init (main process, before fork) checks the parameters, runs the
 * optional selftests, creates the cache, applies maxmemory and the
 * eviction policies (cdbp_evict.c), registers the "perf" cachedb
 * engine, opens the store and runs the db_mode startup load, so every
 * worker starts with a warm cache. The module's own process, "cachedb_perf
 * maintenance", ticks once a second: it grows the tables, sweeps expired
 * entries every expiry_sweep_period seconds, syncs the journal, takes the
 * periodic snapshots and runs queued perf_sync requests. It is a process of
 * its own, not a core timer, because OpenSIPS 3.x/4.x dispatches timer jobs
 * to the SIP workers: a save there would stall SIP traffic. mod_destroy
 * (main process, after the workers stopped) flushes the journal and runs
 * the db_mode 2 shutdown save. Nothing in this file touches a key: that is
 * the engine's job.
 */
#include <sr_module.h>
#include <dprint.h>
#include <mem/mem.h>
#include <ipc.h>
#include <pt.h>
#include <reactor_proc.h>
#include <ut.h>
#include <cachedb/cachedb.h>
#include <mi/mi.h>
#include <statistics.h>

#include "cdbp.h"
#ifdef CDBP_HAVE_ODBC
#include "pcache_odbc.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* ---- parameters ------------------------------------------------------------ */
char *cdbp_collections = NULL;
int cdbp_mem_mb = 64;
int cdbp_sweep_period = 1;
int cdbp_growth_load_factor = 2;
int cdbp_growth_budget = 4096;
int cdbp_hugepage_mb = 0;
int cdbp_arena_selftest = 0;
int cdbp_htable_selftest = 0;
char *cdbp_expired_colls = NULL;
char *cdbp_db_url = NULL;
int cdbp_db_mode = 0;
char *cdbp_persist_colls = NULL;
char *cdbp_journal = NULL;
int cdbp_snapshot_period = 0;
int cdbp_journal_rewrite_percent = 100; /* pc_persist_config's journal bound */
int cdbp_journal_rewrite_min_mb = 64;
int cdbp_journal_max_mb = 0;
int cdbp_sync_cluster_id = 0;
int cdbp_sync_poll_period = 5;
char *cdbp_sync_shtag = NULL;
char *cdbp_replicate_colls = NULL;
int cdbp_pull_on_miss = 0;
int cdbp_pull_timeout_ms = 50;
int cdbp_pull_negative_ms = 300;
int cdbp_pull_max_key = 128;
int cdbp_pull_max_value = 512;
int cdbp_pull_slots = 64;

pc_cache *cdbp_cache = NULL;
pc_mgmt *cdbp_mgmt = NULL;
pc_persist *cdbp_persist = NULL;
pc_coll *cdbp_default = NULL;

static struct cachedb_url *cdbp_urls = NULL;

static int cdbp_store_url(modparam_t type, void *val)
{
    (void)type;
    return cachedb_store_url(&cdbp_urls, (char *)val);
}

static const param_export_t cdbp_params[] = {
    {"cache_collections", STR_PARAM, &cdbp_collections},
    {"cache_mem_mb", INT_PARAM, &cdbp_mem_mb},
    {"cachedb_url", STR_PARAM | USE_FUNC_PARAM, (void *)cdbp_store_url},
    {"expiry_sweep_period", INT_PARAM, &cdbp_sweep_period},
    {"growth_load_factor", INT_PARAM, &cdbp_growth_load_factor},
    {"growth_budget", INT_PARAM, &cdbp_growth_budget},
    {"arena_hugepage_mb", INT_PARAM, &cdbp_hugepage_mb},
    {"arena_selftest", INT_PARAM, &cdbp_arena_selftest},
    {"htable_selftest", INT_PARAM, &cdbp_htable_selftest},
    {"event_expired_collections", STR_PARAM, &cdbp_expired_colls},
    {"db_url", STR_PARAM, &cdbp_db_url},
    {"db_mode", INT_PARAM, &cdbp_db_mode},
    {"persist_collections", STR_PARAM, &cdbp_persist_colls},
    {"journal", STR_PARAM, &cdbp_journal},
    {"snapshot_period", INT_PARAM, &cdbp_snapshot_period},
    {"journal_rewrite_percent", INT_PARAM, &cdbp_journal_rewrite_percent},
    {"journal_rewrite_min_mb", INT_PARAM, &cdbp_journal_rewrite_min_mb},
    {"journal_max_mb", INT_PARAM, &cdbp_journal_max_mb},
    {"sync_cluster_id", INT_PARAM, &cdbp_sync_cluster_id},
    {"sync_poll_period", INT_PARAM, &cdbp_sync_poll_period},
    {"sync_shtag", STR_PARAM, &cdbp_sync_shtag},
    {"replicate_collections", STR_PARAM, &cdbp_replicate_colls},
    {"pull_on_miss", INT_PARAM, &cdbp_pull_on_miss},
    {"pull_timeout_ms", INT_PARAM, &cdbp_pull_timeout_ms},
    {"pull_negative_ms", INT_PARAM, &cdbp_pull_negative_ms},
    {"pull_max_key", INT_PARAM, &cdbp_pull_max_key},
    {"pull_max_value", INT_PARAM, &cdbp_pull_max_value},
    {"pull_slots", INT_PARAM, &cdbp_pull_slots},
    {"eviction", STR_PARAM, &cdbp_eviction},
    {"maxmemory", INT_PARAM | STR_PARAM | USE_FUNC_PARAM, (void *)cdbp_maxmemory_param},
    {0, 0, 0}};

/* clusterer is a soft dependency: when loaded it initialises first (the
 * perf_sync push rides it: cdbp_sync.c). */
static const dep_export_t cdbp_deps = {{
                                           {MOD_TYPE_DEFAULT, "clusterer", DEP_SILENT},
                                           {MOD_TYPE_NULL, NULL, 0},
                                       },
                                       {
                                           {NULL, NULL},
                                       }};

/* ---- logging ---------------------------------------------------------------- */
void cdbp_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    switch (level) {
    case PC_LOG_ERR:
        LM_ERR("%s\n", msg);
        break;
    case PC_LOG_WARN:
        LM_WARN("%s\n", msg);
        break;
    case PC_LOG_INFO:
        LM_INFO("%s\n", msg);
        break;
    default:
        LM_DBG("%s\n", msg);
        break;
    }
}

static int cdbp_lib_log_level(void)
{
    return is_printable(L_DBG) ? PC_LOG_DEBUG : PC_LOG_INFO;
}

/* ---- the maintenance process -------------------------------------------- */
/* Runs in every process with IPC (SIP workers, the MI process, this one),
 * sent once a second: the journal's tick (closes descriptors of past
 * epochs; writes the process's own ring out when no drainer ran lately). */
static void cdbp_journal_rpc(int sender, void *param)
{
    (void)sender;
    (void)param;
    int rc = cdbp_persist ? pc_persist_worker_tick(cdbp_persist) : 0;
    if (rc != 0)
        LM_ERR("journal write failed: %s\n", pc_store_strerror(rc));
}

/* ipc_send_rpc_all, but only to the processes that are up and listening:
 * a process still starting or already gone has no IPC descriptor yet (or
 * any more), and the core logs an ERROR for every job sent to it. A
 * process that misses a tick writes its ring out on the next one (and
 * the drainer writes every ring meanwhile). */
static void cdbp_journal_rpc_running(void)
{
    for (unsigned p = 1; p < counted_max_processes; p++) {
        if ((pt[p].flags & OSS_PROC_NO_IPC) || !is_process_running(p) || IPC_FD_WRITE(p) < 0)
            continue;
        if ((int)p == process_no)
            cdbp_journal_rpc(process_no, NULL);
        else
            (void)ipc_send_rpc((int)p, cdbp_journal_rpc, NULL);
    }
}

static void cdbp_maint_tick(void)
{
    static unsigned long runs;
    if (runs++ == 0)
        cdbp_events_boot();
    unsigned what = PC_MAINT_REAP; /* a dead worker's cells back to the pools (1/s) */
    if (cdbp_growth_load_factor > 0)
        what |= PC_MAINT_GROW;
    if (cdbp_sweep_period > 0 && runs % (unsigned long)cdbp_sweep_period == 0)
        what |= PC_MAINT_SWEEP;
    if (cdbp_evict_active()) /* ahead of need: writers seldom evict themselves */
        what |= PC_MAINT_EVICT;
    if (what != 0) {
        pc_maint_report rep;
        int rc = pc_maintain(cdbp_cache, what, &rep);
        if (rc != 0 && rc != PC_EBUSY)
            LM_ERR("maintenance failed: %s\n", pc_store_strerror(rc));
        else if (rc == 0 && (rep.splits || rep.reaped || rep.procs_reaped || rep.evicted))
            LM_DBG("maintenance: %u splits, %u drained, %u reaped, %u evicted\n", rep.splits,
                   rep.drained, rep.reaped, rep.evicted);
    }
    if (cdbp_persist != NULL && cdbp_journal != NULL && cdbp_journal[0] != '\0')
        cdbp_journal_rpc_running();
    if (cdbp_persist != NULL) {
        cdbp_persist_lock();
        int rc = pc_persist_tick(cdbp_persist);
        cdbp_persist_unlock();
        if (rc != 0)
            LM_ERR("journal/snapshot tick failed: %s\n", pc_store_strerror(rc));
    }
    cdbp_sync_run_queued();
    cdbp_pull_reap();
}

static int cdbp_maint_cb(int fd, void *param, int was_timeout)
{
    (void)param;
    (void)was_timeout;
    uint64_t expirations;
    if (read(fd, &expirations, sizeof expirations) != (ssize_t)sizeof expirations)
        return 0; /* spurious wake-up */
    cdbp_maint_tick();
    return 0;
}

/* Every 100 ms when perf_sync is configured: the library's sync tick (the
 * rate-limited check of a peer's notice, the poll, the reload). A notice
 * also wakes this process at once by IPC (cdbp_sync.c); this tick is what
 * runs a check the rate limit deferred. */
static int cdbp_sync_cb(int fd, void *param, int was_timeout)
{
    (void)param;
    (void)was_timeout;
    uint64_t expirations;
    if (read(fd, &expirations, sizeof expirations) != (ssize_t)sizeof expirations)
        return 0;
    cdbp_sync_tick();
    return 0;
}

static int cdbp_timerfd(long first_ns, long period_ns)
{
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct itimerspec its = {{period_ns / 1000000000L, period_ns % 1000000000L},
                             {first_ns / 1000000000L, first_ns % 1000000000L}};
    if (fd >= 0 && timerfd_settime(fd, 0, &its, NULL) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void cdbp_maint_proc(int rank)
{
    (void)rank;
    /* first tick at once, then 1 s */
    int tfd = cdbp_timerfd(1000000L, 1000000000L);
    int sfd = cdbp_sync_enabled() ? cdbp_timerfd(100000000L, 100000000L) : -2;
    if (tfd < 0 || sfd == -1) {
        LM_CRIT("maintenance: cannot arm a timerfd: %s\n", strerror(errno));
        return;
    }
    if (reactor_proc_init("cachedb_perf maintenance") < 0 ||
        reactor_proc_add_fd(tfd, cdbp_maint_cb, NULL) < 0 ||
        (sfd >= 0 && reactor_proc_add_fd(sfd, cdbp_sync_cb, NULL) < 0)) {
        LM_CRIT("maintenance: cannot set up the process reactor\n");
        return;
    }
    cdbp_sync_maint_start();
    reactor_proc_loop();
}

/* the script is loaded here too: the events it raises reach event_route */
static const proc_export_t cdbp_procs[] = {
    {"cachedb_perf maintenance", 0, 0, cdbp_maint_proc, 1,
     PROC_FLAG_INITCHILD | PROC_FLAG_HAS_IPC | PROC_FLAG_NEEDS_SCRIPT},
    {0, 0, 0, 0, 0, 0}};

/* ---- init / destroy ------------------------------------------------------ */
static int cdbp_check_params(void)
{
    if (cdbp_mem_mb <= 0) {
        LM_ERR("cache_mem_mb must be > 0 (got %d)\n", cdbp_mem_mb);
        return -1;
    }
    if (cdbp_hugepage_mb < 0 || cdbp_sweep_period < 0 || cdbp_growth_load_factor < 0) {
        LM_ERR("arena_hugepage_mb, expiry_sweep_period and growth_load_factor must be >= 0\n");
        return -1;
    }
    if (cdbp_growth_budget <= 0) {
        LM_ERR("growth_budget must be > 0 (got %d)\n", cdbp_growth_budget);
        return -1;
    }
    if (cdbp_snapshot_period < 0 || cdbp_sync_cluster_id < 0 || cdbp_sync_poll_period < 0 ||
        cdbp_sync_poll_period > 86400) {
        LM_ERR("snapshot_period and sync_cluster_id must be >= 0, sync_poll_period in 0..86400\n");
        return -1;
    }
    if (cdbp_journal_rewrite_percent < 0 || cdbp_journal_rewrite_min_mb < 0 ||
        cdbp_journal_max_mb < 0) {
        LM_ERR("journal_rewrite_percent, journal_rewrite_min_mb and journal_max_mb must be "
               ">= 0\n");
        return -1;
    }
    if (cdbp_db_url == NULL || cdbp_db_url[0] == '\0') {
        if (cdbp_db_mode != 0 || cdbp_persist_colls != NULL || cdbp_journal != NULL ||
            cdbp_snapshot_period != 0) {
            LM_ERR("db_mode, persist_collections, journal and snapshot_period need a db_url "
                   "(lmdb:///path, odbc://DSN or an ODBC connection string)\n");
            return -1;
        }
    }
    return 0;
}

static int cdbp_open_persistence(void)
{
    if (cdbp_db_url == NULL || cdbp_db_url[0] == '\0')
        return 0;
    pc_persist_config pcfg;
    pc_persist_config_init(&pcfg);
    pcfg.db_url = cdbp_db_url;
    pcfg.db_mode = cdbp_db_mode;
    pcfg.persist_collections = cdbp_persist_colls;
    pcfg.journal = cdbp_journal;
    pcfg.snapshot_period_s = (unsigned)cdbp_snapshot_period;
    pcfg.journal_rewrite_percent = (unsigned)cdbp_journal_rewrite_percent;
    pcfg.journal_rewrite_min_mb = (unsigned)cdbp_journal_rewrite_min_mb;
    pcfg.journal_max_mb = (unsigned)cdbp_journal_max_mb;
    pcfg.log.fn = cdbp_log;
    pcfg.log.level = cdbp_lib_log_level();
#ifdef CDBP_HAVE_ODBC
    /* db_url "odbc://DSN", "odbc:CONNSTR" or a bare "DSN=..." / "DRIVER=..."
     * connection string: the ODBC exporter. It connects here, in the main
     * process (the startup load); a process forked later that saves or
     * loads (MI, maintenance) connects again on its first use. */
    pcfg.sql_backend = pc_odbc_persist_backend();
#endif
    if (cdbp_sync_setup(&pcfg) != 0)
        return -1;
    char err[PC_MGMT_MSG_MAX];
    int rc = pc_persist_open(cdbp_cache, &pcfg, &cdbp_persist, err, sizeof err);
    if (rc != 0) {
        LM_ERR("persistence: %s\n", err[0] ? err : pc_store_strerror(rc));
        return -1;
    }
    if ((rc = pc_persist_register(cdbp_persist, cdbp_mgmt)) != 0) {
        LM_ERR("cannot register perf_save / perf_load: %s\n", pc_store_strerror(rc));
        return -1;
    }
    /* db_mode >= 1: the startup load, before the workers fork. A failed
     * load of one collection is logged by the store and does not stop
     * OpenSIPS: the others are loaded and the cache serves. */
    /* the db_url as logged: an ODBC connection string may hold a password */
    char shown[512];
#ifdef CDBP_HAVE_ODBC
    pc_odbc_redact(cdbp_db_url, shown, sizeof shown);
#else
    snprintf(shown, sizeof shown, "%s", cdbp_db_url);
#endif
    double t0 = pc_mono_sec();
    rc = pc_persist_startup(cdbp_persist);
    double t1 = pc_mono_sec();
    if (rc != 0)
        LM_ERR("startup load (db_mode %d) from %s: %s\n", cdbp_db_mode, shown,
               pc_store_strerror(rc));
    else if (cdbp_db_mode >= 1)
        LM_INFO("startup load (db_mode %d) from %s done in %.3f s\n", cdbp_db_mode, shown,
                t1 - t0);
    return 0;
}

static int mod_init(void)
{
    LM_NOTICE("initializing cachedb_perf (pcache engine)\n");
    if (cdbp_check_params() != 0)
        return -1;
    if (cdbp_arena_selftest && cdbp_arena_selftest_run() != 0)
        return -1;
    if (cdbp_htable_selftest && cdbp_htable_selftest_run() != 0)
        return -1;

    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = cdbp_collections;
    cfg.mem_mb = (size_t)cdbp_mem_mb;
    cfg.hugepage_mb = (size_t)cdbp_hugepage_mb;
    cfg.growth_load_factor = (unsigned)cdbp_growth_load_factor;
    cfg.growth_budget = (unsigned)cdbp_growth_budget;
    cfg.log.fn = cdbp_log;
    cfg.log.level = cdbp_lib_log_level();
    cfg.event_fn = cdbp_event_fn;
    cfg.event_mask = 1u << PC_EV_MEM_DEGRADED;
    int rc = pc_cache_create(&cfg, &cdbp_cache);
    if (rc != 0) {
        LM_ERR("cannot create the cache (cache_collections \"%s\", cache_mem_mb %d, "
               "arena_hugepage_mb %d): %s\n",
               cdbp_collections ? cdbp_collections : "default", cdbp_mem_mb, cdbp_hugepage_mb,
               pc_store_strerror(rc));
        return -1;
    }
    pc_mem_stats ms;
    if (pc_mem_stats_get(cdbp_cache, &ms) == 0)
        LM_INFO("cache created: %u collection(s), %d MB plain + %d MB huge-page arena, memory "
                "tier %d (%s)%s\n",
                pc_coll_count(cdbp_cache), cdbp_mem_mb, cdbp_hugepage_mb, ms.tier,
                pc_tier_name(ms.tier), ms.hugepage_bytes && !ms.pinned ? ", not pinned" : "");
    /* before the startup load (cdbp_open_persistence) and the fork */
    if (cdbp_evict_setup() != 0)
        return -1;

    if (cdbp_cdb_init(cdbp_urls) != 0)
        return -1;
    if ((rc = pc_mgmt_create(cdbp_cache, pc_coll_name(cdbp_default), &cdbp_mgmt)) != 0) {
        LM_ERR("cannot create the command context: %s\n", pc_store_strerror(rc));
        return -1;
    }
    if (cdbp_events_init() != 0 || cdbp_events_expired(cdbp_expired_colls) != 0)
        return -1;
    if (cdbp_open_persistence() != 0 || cdbp_pull_setup() != 0)
        return -1;
    if (cdbp_sync_init() != 0 || cdbp_sync_register(cdbp_mgmt) != 0)
        return -1;
    return 0;
}

static int child_init(int rank)
{
    (void)rank;
    /* the engine notices the fork by itself (pthread_atfork) */
    return 0;
}

static void mod_destroy(void)
{
    if (cdbp_persist != NULL) {
        double t0 = pc_mono_sec();
        int rc = pc_persist_shutdown(cdbp_persist);
        double secs = pc_mono_sec() - t0;
        if (rc != 0)
            LM_ERR("shutdown flush/save failed after %.3f s: %s\n", secs, pc_store_strerror(rc));
        else
            LM_INFO("shutdown %s done in %.3f s\n",
                    cdbp_db_mode == 2 ? "save (db_mode 2)" : "journal flush", secs);
        pc_persist_close(cdbp_persist);
        cdbp_persist = NULL;
    }
    pc_mgmt_destroy(cdbp_mgmt);
    cdbp_mgmt = NULL;
    /* the cache itself stays mapped: other processes may still be exiting,
     * and the memory goes with the last of them */
}

struct module_exports exports = {
    "cachedb_perf",
    MOD_TYPE_CACHEDB,
    MODULE_VERSION,
    DEFAULT_DLFLAGS,
    0,            /* load function */
    &cdbp_deps,   /* dependencies */
    cdbp_cmds,    /* script functions */
    0,            /* async functions */
    cdbp_params,  /* parameters */
    cdbp_stats,   /* statistics */
    cdbp_mi_cmds, /* MI commands */
    0,            /* pseudo-variables */
    0,            /* transformations */
    cdbp_procs,   /* the maintenance process */
    0,            /* pre-init */
    mod_init,
    (response_function)0,
    (destroy_function)mod_destroy,
    child_init,
    0 /* reload confirm */
};
