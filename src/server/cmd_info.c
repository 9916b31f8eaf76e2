/*
 * cmd_info.c - INFO: Redis 7.0's sections (server, clients, memory,
 * persistence, stats, replication, cpu, modules, commandstats, errorstats,
 * cluster, keyspace) with what pcached knows, and a "pcache" section with
 * every collection's engine counters. Counters of the workers are summed
 * from their rows in shared memory; the engine's are summed by the engine
 * (pc_coll_stats_get). Field list: docs/pcached.md.
 *
 * Section names as Redis 7.0 takes them: none or "default" is every section
 * but commandstats; "all" and "everything" are every section; several
 * names may be given; an unknown one adds nothing.
 */
#include "info_memory.h"
#include "resp.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* ---- INFO ---------------------------------------------------------------------------- */

struct info_buf {
    char *p;
    size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void ib_add(struct info_buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (b->p != NULL && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (q == NULL)
            return;
        b->p = q;
        b->cap = cap;
    }
}

void srv_run_id(char *buf, size_t cap)
{
    unsigned char r[20];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        uint64_t x = (uint64_t)pc_wall_ms() * 6364136223846793005ull ^ (uint64_t)getpid();
        for (size_t i = 0; i < sizeof r; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            r[i] = (unsigned char)(x >> 56);
        }
    }
    static const char hex[] = "0123456789abcdef";
    size_t j = 0;
    for (size_t i = 0; i < sizeof r && j + 2 < cap; i++) {
        buf[j++] = hex[r[i] >> 4];
        buf[j++] = hex[r[i] & 15];
    }
    if (cap > 0)
        buf[j] = '\0';
}

/* ---- errorstats -------------------------------------------------------------------- */

/* The codes counted apart; any other counts as ERR. Index fixed by order. */
static const char *const err_codes[SRV_ERR_CODES] = {
    "ERR",      "WRONGTYPE",  "NOAUTH",     "WRONGPASS", "NOPROTO", "MISCONF",
    "OOM",      "EXECABORT",  "NOSCRIPT",   "BUSY",      "NOPERM",  "LOADING",
    "READONLY", "NOREPLICAS", "UNKILLABLE", "BUSYKEY"};

void srv_errstat_count(srv_worker *w, const char *code)
{
    unsigned k = 0;
    for (unsigned i = 0; i < SRV_ERR_CODES; i++)
        if (strcmp(code, err_codes[i]) == 0) {
            k = i;
            break;
        }
    atomic_fetch_add_explicit(&w->s->shm->errstats[w->slot].count[k], 1, memory_order_relaxed);
}

/* ---- helpers -------------------------------------------------------------------------- */

/* Redis's bytesToHuman. */
static void human(char *buf, size_t cap, uint64_t n)
{
    double d = (double)n;
    if (n < 1024)
        snprintf(buf, cap, "%lluB", (unsigned long long)n);
    else if (n < (1ull << 20))
        snprintf(buf, cap, "%.2fK", d / 1024);
    else if (n < (1ull << 30))
        snprintf(buf, cap, "%.2fM", d / (1 << 20));
    else if (n < (1ull << 40))
        snprintf(buf, cap, "%.2fG", d / (1 << 30));
    else
        snprintf(buf, cap, "%.2fT", d / (double)(1ull << 40));
}

/* utime, stime, cutime, cstime of a process in microseconds, from
 * /proc/<pid>/stat. Returns 0, or -1 (all left 0) when it cannot be read. */
static int proc_cpu(long pid, uint64_t t[4])
{
    char path[64], buf[1024];
    t[0] = t[1] = t[2] = t[3] = 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return -1;
    /* fields after the name: state is the 3rd; utime..cstime the 14th..17th */
    long tick = sysconf(_SC_CLK_TCK);
    if (tick <= 0)
        tick = 100;
    unsigned field = 2;
    for (char *q = p + 1; *q != '\0' && field < 17; q++) {
        if (*q != ' ')
            continue;
        field++;
        if (field >= 14)
            t[field - 14] = strtoull(q + 1, NULL, 10) * (1000000ull / (uint64_t)tick);
    }
    return 0;
}

static uint64_t tv_us(struct timeval tv)
{
    return (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
}

/* ---- the sections ----------------------------------------------------------------------- */

enum {
    S_SERVER,
    S_CLIENTS,
    S_MEMORY,
    S_PERSISTENCE,
    S_STATS,
    S_REPLICATION,
    S_CPU,
    S_MODULES,
    S_COMMANDSTATS,
    S_ERRORSTATS,
    S_CLUSTER,
    S_KEYSPACE,
    S_PCACHE,
    S_METRICS, /* metrics.c: the figures of GET /metrics, flat */
    S_COUNT
};
static const char *const sec_names[S_COUNT] = {
    "server",  "clients",      "memory",     "persistence", "stats",    "replication", "cpu",
    "modules", "commandstats", "errorstats", "cluster",     "keyspace", "pcache",      "metrics"};

static void pick_sections(unsigned argc, const char **argv, const size_t *argl, int *want)
{
    for (unsigned k = 0; k < S_COUNT; k++)
        want[k] = argc < 2 && k != S_COMMANDSTATS;
    for (unsigned i = 1; i < argc; i++) {
        int all = arg_eq(argv[i], argl[i], "all") || arg_eq(argv[i], argl[i], "everything");
        int def = arg_eq(argv[i], argl[i], "default");
        for (unsigned k = 0; k < S_COUNT; k++)
            if (all || (def && k != S_COMMANDSTATS) || arg_eq(argv[i], argl[i], sec_names[k]))
                want[k] = 1;
    }
}

struct totals {
    uint64_t cmds, conns, rej, perr, clients, errors;
};

static void sec_server(srv_worker *w, struct info_buf *b)
{
    srv *s = w->s;
    struct utsname u;
    if (uname(&u) != 0)
        memset(&u, 0, sizeof u);
    int64_t now_ms = pc_wall_ms();
    long long now_us = (long long)pc_wall_us();
    int64_t up = now_ms / 1000 - atomic_load(&s->shm->start_unix);
    char exe[512] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    ib_add(b,
           "# Server\r\nredis_version:%s\r\npcached_version:%s\r\nredis_git_sha1:00000000\r\n"
           "redis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:standalone\r\nos:%s %s %s\r\n"
           "arch_bits:%u\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\n"
           "atomicvar_api:c11-builtin\r\ngcc_version:%d.%d.%d\r\nprocess_id:%d\r\n"
           "process_supervised:no\r\nrun_id:%s\r\ntcp_port:%u\r\nserver_time_usec:%lld\r\n"
           "uptime_in_seconds:%lld\r\nuptime_in_days:%lld\r\nhz:10\r\nconfigured_hz:10\r\n"
           "lru_clock:%lld\r\nexecutable:%s\r\nconfig_file:\r\nio_threads_active:0\r\n"
           "workers:%u\r\nworker_slot:%u\r\n",
           SRV_REDIS_VERSION, SRV_VERSION, u.sysname, u.release, u.machine,
           (unsigned)(sizeof(void *) * 8),
#ifdef __GNUC__
           __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__,
#else
           0, 0, 0,
#endif
           (int)getpid(), s->shm->run_id, s->bound_port, now_us, (long long)up,
           (long long)(up / 86400), (long long)((now_ms / 1000) & 0xFFFFFF), exe, s->cfg.workers,
           w->slot);
}

static void sec_memory(srv_worker *w, pc_coll *coll, struct info_buf *b)
{
    pc_mem_stats m;
    if (pc_mem_stats_get(w->s->cache, &m) != 0)
        return;
    /* cells holding data and the tables: what a write can no longer use */
    uint64_t used = (uint64_t)m.used_cell_bytes + m.table_bytes;
    /* maxmemory as Redis reports it: the cap set, 0 = none. What binds is
     * the cap or the arena, whichever is smaller (pcache_memory_limit) */
    uint64_t maxm = m.maxmemory, region = (uint64_t)m.hugepage_bytes + m.plain_bytes;
    int by_cap = maxm > 0 && maxm < region;
    uint64_t rss = 0;
    FILE *f = fopen("/proc/self/statm", "re");
    if (f != NULL) {
        unsigned long long size, res;
        if (fscanf(f, "%llu %llu", &size, &res) == 2)
            rss = res * (uint64_t)sysconf(_SC_PAGESIZE);
        fclose(f);
    }
    char hu[32], hr[32], hm[32];
    human(hu, sizeof hu, used);
    human(hr, sizeof hr, rss);
    human(hm, sizeof hm, maxm);
    ib_add(b,
           "# Memory\r\nused_memory:%llu\r\nused_memory_human:%s\r\nused_memory_rss:%llu\r\n"
           "used_memory_rss_human:%s\r\nused_memory_peak:%llu\r\nused_memory_peak_human:%s\r\n"
           "used_memory_dataset:%llu\r\nmaxmemory:%llu\r\nmaxmemory_human:%s\r\n"
           "maxmemory_policy:%s\r\nmem_fragmentation_ratio:%.2f\r\n"
           "mem_allocator:pcache-arena\r\n",
           (unsigned long long)used, hu, (unsigned long long)rss, hr, (unsigned long long)used, hu,
           (unsigned long long)m.used_cell_bytes, (unsigned long long)maxm, hm,
           pc_evict_policy_name(pc_coll_eviction(coll)), used ? (double)rss / (double)used : 0.0);
    ib_add(b,
           "pcache_memory_limit:%llu\r\npcache_memory_limit_by:%s\r\npcache_evicted_keys:%llu\r\n",
           (unsigned long long)(by_cap ? maxm : region), by_cap ? "maxmemory" : "arena",
           (unsigned long long)m.evicted);
    ib_add(b,
           "pcache_mem_tier:%s\r\npcache_pinned:%d\r\npcache_hugepage_bytes:%zu\r\n"
           "pcache_hugepage_free:%zu\r\npcache_plain_bytes:%zu\r\npcache_plain_free:%zu\r\n"
           "pcache_chunks:%llu\r\npcache_chunk_bytes:%llu\r\npcache_table_bytes:%llu\r\n",
           pc_tier_name(m.tier), m.pinned, m.hugepage_bytes, m.hugepage_free, m.plain_bytes,
           m.plain_free, (unsigned long long)m.chunks, (unsigned long long)m.chunk_bytes,
           (unsigned long long)m.table_bytes);
    char arena[16384]; /* 96 classes of one line (< 100 bytes) each fit */
    size_t an = info_memory_arena(w->s->cache, arena, sizeof arena);
    if (an < sizeof arena)
        ib_add(b, "%.*s", (int)an, arena);
}

static void sec_persistence(srv_worker *w, struct info_buf *b)
{
    srv *s = w->s;
    struct srv_shm *shm = s->shm;
    /* the journal's health: writes are refused while it is failing */
    pc_journal_health h = {0};
    bool jon = s->persist != NULL && s->cfg.journal[0] != '\0';
    if (jon)
        (void)pc_persist_journal_health(s->persist, &h);
    ib_add(b,
           "# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_bgsave_in_progress:%u\r\n"
           "rdb_last_save_time:%lld\r\nrdb_last_bgsave_status:%s\r\nrdb_saves:%llu\r\n"
           "aof_enabled:%d\r\naof_rewrite_in_progress:0\r\naof_last_write_status:%s\r\n"
           "pcache_saves:%llu\r\npcache_save_failures:%llu\r\npcache_db_mode:%u\r\n"
           "pcache_store:%s\r\n",
           atomic_load(&shm->saving) || atomic_load(&shm->bgsave_pending) ? 1u : 0u,
           (long long)(atomic_load(&shm->last_save) ? atomic_load(&shm->last_save)
                                                    : atomic_load(&shm->start_unix)),
           atomic_load(&shm->last_save_rc) == 0 ? "ok" : "err",
           (unsigned long long)atomic_load(&shm->saves), jon ? 1 : 0, h.failing ? "err" : "ok",
           (unsigned long long)atomic_load(&shm->saves),
           (unsigned long long)atomic_load(&shm->save_failures), s->cfg.db_mode,
           s->persist ? "lmdb" : "none");
    ib_add(b,
           "pcache_journal_status:%s\r\npcache_journal_failing_since:%lld\r\n"
           "pcache_journal_error:%s\r\npcache_journal_lost_writes:%llu\r\n"
           "pcache_journal_failures:%llu\r\n",
           !jon        ? "off"
           : h.failing ? "failing"
                       : "ok",
           (long long)(h.since_wall_ms / 1000), h.failing ? strerror(h.err) : "",
           (unsigned long long)h.lost, (unsigned long long)h.failures);
}

/* instantaneous_ops_per_sec: commands per second between this worker's
 * previous two samples at least 100 ms apart (taken when INFO runs). */
static uint64_t ops_per_sec(uint64_t cmds)
{
    static int64_t last_ms;
    static uint64_t last_cmds, rate;
    int64_t now = pc_mono_ms();
    if (last_ms == 0 || now - last_ms > 60000) {
        last_ms = now, last_cmds = cmds, rate = 0;
    } else if (now - last_ms >= 100) {
        rate = (cmds - last_cmds) * 1000 / (uint64_t)(now - last_ms);
        last_ms = now, last_cmds = cmds;
    }
    return rate;
}

static void sec_stats(srv_worker *w, struct info_buf *b, const struct totals *t, uint64_t hits,
                      uint64_t misses, uint64_t expired, uint64_t evicted)
{
    uint64_t in = 0, out = 0;
    for (unsigned i = 0; i < w->s->cfg.workers; i++) {
        in += atomic_load_explicit(&w->s->shm->wstats[i].net_in, memory_order_relaxed);
        out += atomic_load_explicit(&w->s->shm->wstats[i].net_out, memory_order_relaxed);
    }
    ib_add(b,
           "# Stats\r\ntotal_connections_received:%llu\r\ntotal_commands_processed:%llu\r\n"
           "instantaneous_ops_per_sec:%llu\r\nrejected_connections:%llu\r\nsync_full:0\r\n"
           "sync_partial_ok:0\r\nsync_partial_err:0\r\nexpired_keys:%llu\r\nevicted_keys:%llu\r\n"
           "evicted_clients:0\r\nkeyspace_hits:%llu\r\nkeyspace_misses:%llu\r\n"
           "pubsub_channels:0\r\npubsub_patterns:0\r\nlatest_fork_usec:0\r\ntotal_forks:0\r\n"
           "total_error_replies:%llu\r\ntotal_error_replies_protocol:%llu\r\n"
           "total_net_input_bytes:%llu\r\ntotal_net_output_bytes:%llu\r\n",
           (unsigned long long)t->conns, (unsigned long long)t->cmds,
           (unsigned long long)ops_per_sec(t->cmds), (unsigned long long)t->rej,
           (unsigned long long)expired, (unsigned long long)evicted, (unsigned long long)hits,
           (unsigned long long)misses, (unsigned long long)t->errors, (unsigned long long)t->perr,
           (unsigned long long)in, (unsigned long long)out);
}

static void sec_cpu(srv_worker *w, struct info_buf *b)
{
    srv *s = w->s;
    struct rusage ru;
    uint64_t sys = 0, user = 0, csys = 0, cuser = 0, t[4];
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        sys = tv_us(ru.ru_stime);
        user = tv_us(ru.ru_utime);
    }
    uint64_t self_sys = sys, self_user = user;
    /* the other processes of the instance: the master (and the children it
     * reaped), the other workers, the maintenance process */
    long me = (long)getpid(), master = (long)getppid();
    if (proc_cpu(master, t) == 0) {
        user += t[0], sys += t[1], cuser += t[2], csys += t[3];
    }
    for (unsigned i = 0; i < s->cfg.workers; i++) {
        long pid = (long)atomic_load(&s->shm->wstats[i].pid);
        if (pid > 0 && pid != me && proc_cpu(pid, t) == 0)
            user += t[0], sys += t[1];
    }
    long mp = (long)atomic_load(&s->shm->maint_pid);
    if (mp > 0 && mp != me && proc_cpu(mp, t) == 0)
        user += t[0], sys += t[1];
#define SEC(x) (unsigned long long)((x) / 1000000), (unsigned long long)((x) % 1000000)
    ib_add(b,
           "# CPU\r\nused_cpu_sys:%llu.%06llu\r\nused_cpu_user:%llu.%06llu\r\n"
           "used_cpu_sys_children:%llu.%06llu\r\nused_cpu_user_children:%llu.%06llu\r\n"
           "used_cpu_sys_main_thread:%llu.%06llu\r\nused_cpu_user_main_thread:%llu.%06llu\r\n",
           SEC(sys), SEC(user), SEC(csys), SEC(cuser), SEC(self_sys), SEC(self_user));
#undef SEC
}

static void sec_commandstats(srv_worker *w, struct info_buf *b)
{
    srv *s = w->s;
    for (unsigned k = 0; k < SRV_CMD_SLOTS; k++) {
        const cmd_def *d = cmd_at(k);
        if (d == NULL)
            break;
        uint64_t calls = 0, usec = 0, rej = 0, failed = 0;
        for (unsigned i = 0; i < s->cfg.workers; i++) {
            const struct srv_cmdstat_shm *st = &s->shm->cmdstats[i][k];
            calls += atomic_load_explicit(&st->calls, memory_order_relaxed);
            usec += atomic_load_explicit(&st->usec, memory_order_relaxed);
            rej += atomic_load_explicit(&st->rejected, memory_order_relaxed);
            failed += atomic_load_explicit(&st->failed, memory_order_relaxed);
        }
        if (calls == 0 && rej == 0 && failed == 0)
            continue;
        char name[32];
        size_t j = 0;
        for (; d->name[j] && j + 1 < sizeof name; j++)
            name[j] =
                (d->name[j] >= 'A' && d->name[j] <= 'Z') ? (char)(d->name[j] + 32) : d->name[j];
        name[j] = '\0';
        ib_add(b,
               "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=%llu,"
               "failed_calls=%llu\r\n",
               name, (unsigned long long)calls, (unsigned long long)usec,
               calls ? (double)usec / (double)calls : 0.0, (unsigned long long)rej,
               (unsigned long long)failed);
    }
}

static uint64_t errors_total(const srv *s, unsigned k)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < s->cfg.workers; i++)
        n += atomic_load_explicit(&s->shm->errstats[i].count[k], memory_order_relaxed);
    return n;
}

/* # Errorstats: the replies of each error code, over every worker. */
static void sec_errorstats(const srv *s, struct info_buf *b)
{
    ib_add(b, "# Errorstats\r\n");
    for (unsigned k = 0; k < SRV_ERR_CODES; k++) {
        uint64_t n = errors_total(s, k);
        if (n > 0)
            ib_add(b, "errorstat_%s:count=%llu\r\n", err_codes[k], (unsigned long long)n);
    }
    ib_add(b, "\r\n");
}

/* # Keyspace: the SELECT indexes whose collection holds entries. */
static void sec_keyspace(srv_worker *w, struct info_buf *b)
{
    ib_add(b, "# Keyspace\r\n");
    for (unsigned d = 0; d < w->s->ndbs; d++) {
        pc_coll_stats st;
        if (pc_coll_stats_get(w->dbcoll[d], &st) == 0 && st.entries > 0)
            ib_add(b, "db%u:keys=%llu,expires=0,avg_ttl=0\r\n", d, (unsigned long long)st.entries);
    }
    ib_add(b, "\r\n");
}

/* # Pcache: each collection's engine counters (cs: ncoll of them). */
static void sec_pcache(const srv *s, const pc_coll_stats *cs, unsigned ncoll, struct info_buf *b)
{
    ib_add(b, "# Pcache\r\n");
    for (unsigned i = 0; i < ncoll; i++) {
        const pc_coll_stats *st = &cs[i];
        ib_add(b,
               "coll_%s:entries=%llu,buckets=%llu,overflow=%llu,hits=%llu,misses=%llu,"
               "stores=%llu,removes=%llu,expired=%llu,destroyed=%llu,reads=%llu,"
               "seqlock_retries=%llu,lock_fallbacks=%llu,nomem=%llu,splits=%llu,"
               "evicted=%llu,eviction=%s\r\n",
               pc_coll_name(pc_coll_at(s->cache, i)), (unsigned long long)st->entries,
               (unsigned long long)st->buckets, (unsigned long long)st->overflow,
               (unsigned long long)st->hits, (unsigned long long)st->misses,
               (unsigned long long)st->stores, (unsigned long long)st->removes,
               (unsigned long long)st->expired, (unsigned long long)st->destroyed,
               (unsigned long long)st->reads, (unsigned long long)st->seqlock_retries,
               (unsigned long long)st->lock_fallbacks, (unsigned long long)st->nomem,
               (unsigned long long)st->splits, (unsigned long long)st->evicted,
               pc_evict_policy_name(pc_coll_eviction(pc_coll_at(s->cache, i))));
    }
    ib_add(b, "\r\n");
}

void cmd_info(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    srv *s = w->s;
    struct srv_shm *shm = s->shm;
    struct info_buf b = {NULL, 0, 0};
    int want[S_COUNT];
    pick_sections(argc, argv, argl, want);
    struct totals t = {0};
    for (unsigned i = 0; i < s->cfg.workers; i++) {
        t.cmds += atomic_load_explicit(&shm->wstats[i].commands, memory_order_relaxed);
        t.conns += atomic_load_explicit(&shm->wstats[i].connections, memory_order_relaxed);
        t.rej += atomic_load_explicit(&shm->wstats[i].rejected, memory_order_relaxed);
        t.perr += atomic_load_explicit(&shm->wstats[i].proto_errors, memory_order_relaxed);
        t.clients += atomic_load_explicit(&shm->wstats[i].clients, memory_order_relaxed);
    }
    for (unsigned k = 0; k < SRV_ERR_CODES; k++)
        t.errors += errors_total(s, k);
    uint64_t hits = 0, misses = 0, expired = 0, evicted = 0;
    pc_coll_stats cs[PC_MAX_COLLECTIONS];
    unsigned ncoll = pc_coll_count(s->cache);
    for (unsigned i = 0; i < ncoll; i++) {
        memset(&cs[i], 0, sizeof cs[i]);
        (void)pc_coll_stats_get(pc_coll_at(s->cache, i), &cs[i]);
        hits += cs[i].hits;
        misses += cs[i].misses;
        expired += cs[i].expired;
        evicted += cs[i].evicted;
    }
    /* each section ends with a blank line; the last one's is cut below */
    if (want[S_SERVER]) {
        sec_server(w, &b);
        ib_add(&b, "\r\n");
    }
    if (want[S_CLIENTS])
        ib_add(&b,
               "# Clients\r\nconnected_clients:%llu\r\ncluster_connections:0\r\nmaxclients:%llu\r\n"
               "client_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\n"
               "blocked_clients:0\r\ntracking_clients:0\r\nclients_in_timeout_table:0\r\n\r\n",
               (unsigned long long)t.clients,
               (unsigned long long)s->cfg.maxclients * s->cfg.workers);
    if (want[S_MEMORY]) {
        sec_memory(w, c->coll, &b);
        ib_add(&b, "\r\n");
    }
    if (want[S_PERSISTENCE]) {
        sec_persistence(w, &b);
        ib_add(&b, "\r\n");
    }
    if (want[S_STATS]) {
        sec_stats(w, &b, &t, hits, misses, expired, evicted);
        ib_add(&b, "\r\n");
    }
    if (want[S_REPLICATION])
        ib_add(&b,
               "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"
               "master_failover_state:no-failover\r\nmaster_replid:%s\r\n"
               "master_replid2:0000000000000000000000000000000000000000\r\n"
               "master_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n"
               "repl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\n"
               "repl_backlog_histlen:0\r\n\r\n",
               shm->replid);
    if (want[S_CPU]) {
        sec_cpu(w, &b);
        ib_add(&b, "\r\n");
    }
    if (want[S_MODULES])
        ib_add(&b, "# Modules\r\n\r\n");
    if (want[S_COMMANDSTATS]) {
        ib_add(&b, "# Commandstats\r\n");
        sec_commandstats(w, &b);
        ib_add(&b, "\r\n");
    }
    if (want[S_ERRORSTATS])
        sec_errorstats(s, &b);
    if (want[S_CLUSTER])
        ib_add(&b, "# Cluster\r\ncluster_enabled:0\r\n\r\n");
    if (want[S_KEYSPACE])
        sec_keyspace(w, &b);
    if (want[S_PCACHE])
        sec_pcache(s, cs, ncoll, &b);
    if (want[S_METRICS]) { /* metrics.c: /metrics's figures */
        char *mt;
        size_t ml;
        if (srv_metrics_info(s, &mt, &ml) == 0) {
            ib_add(&b, "%.*s", (int)ml, mt);
            free(mt);
        }
    }
    if (b.p == NULL) {
        reply_verbatim(c, "", 0);
        return;
    }
    /* sections are separated by a blank line, the last one ends with its
     * last line (as Redis's INFO) */
    if (b.len >= 4 && memcmp(b.p + b.len - 4, "\r\n\r\n", 4) == 0)
        b.len -= 2;
    reply_verbatim(c, b.p, b.len);
    free(b.p);
}
