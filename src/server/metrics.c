/*
 * metrics.c - pcached's figures for monitoring: GET /metrics (Prometheus
 * text 0.0.4, or OpenMetrics 1.0 when the scraper's Accept asks for it),
 * GET /health (200 serving, 503 when persistence is failing, a small JSON
 * body saying why), and the same figures as flat key:value lines of INFO
 * (section "# Metrics", srv_metrics_info). docs/pcached.md, "Metrics and
 * health", is the reference: every name, type and meaning.
 *
 * One gathering pass (gather) reads what the process can see without a
 * lock: the workers' counters on their cache lines, the engine's summed
 * statistics, the shared save state and the journal's health; the three
 * writers then print the same figures, so /metrics, INFO and /health
 * never disagree. Counters are cumulative since start
 * (pc_coll_stats_total): PERF_STATS_RESET does not rewind them, as a
 * Prometheus counter must never go down except on restart.
 *
 * It runs in the maintenance process (/metrics, /health) and in a worker
 * (INFO); it allocates only its output and takes no engine lock.
 */
#include "pcached.h"
#include "resp.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct figures {
    uint64_t commands, connections, rejected, proto_errors, clients, net_in, net_out;
    uint64_t cpu_user_us, cpu_sys_us; /* every process of the instance */
    uint64_t pss_bytes;               /* their proportional set sizes, summed */
    unsigned workers, workers_alive;
    int64_t uptime_s;
    bool mem_ok;
    pc_mem_stats mem;
    bool persist, journal_on, saving;
    uint64_t saves, save_failures;
    int64_t last_save; /* unix seconds, 0 = never */
    int last_save_rc;
    pc_journal_health jh;
    unsigned ncoll;
    const char *names[PC_MAX_COLLECTIONS];
    pc_coll_stats cs[PC_MAX_COLLECTIONS];
    int policy[PC_MAX_COLLECTIONS];               /* pc_coll_eviction */
    pc_persist_save_stats ps[PC_MAX_COLLECTIONS]; /* zero without a store */
};

/* Reads a small /proc file into buf (NUL-terminated); its length or -1. */
static ssize_t proc_read(long pid, const char *what, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/%s", pid, what);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    ssize_t n;
    while (len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    close(fd);
    buf[len] = '\0';
    return (ssize_t)len;
}

/* Adds process pid's CPU time (utime, stime of /proc/<pid>/stat) and its
 * proportional set size (Pss of smaps_rollup: a page shared by n processes
 * counts 1/n in each, so the sum counts the shared region once). */
static void proc_add(long pid, struct figures *f)
{
    char buf[4096];
    if (pid <= 0)
        return;
    if (proc_read(pid, "stat", buf, sizeof buf) > 0) {
        const char *p = strrchr(buf, ')'); /* the name may hold blanks */
        long tick = sysconf(_SC_CLK_TCK);
        unsigned long long ut, st;
        if (p != NULL && tick > 0 &&
            sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) ==
                2) {
            f->cpu_user_us += ut * 1000000ull / (unsigned long long)tick;
            f->cpu_sys_us += st * 1000000ull / (unsigned long long)tick;
        }
    }
    if (proc_read(pid, "smaps_rollup", buf, sizeof buf) > 0) {
        const char *p = strstr(buf, "\nPss:");
        unsigned long long kb;
        if (p != NULL && sscanf(p + 5, " %llu", &kb) == 1)
            f->pss_bytes += kb * 1024;
    }
}

static void gather(const srv *s, struct figures *f)
{
    memset(f, 0, sizeof *f);
    struct srv_shm *shm = s->shm;
    f->workers = s->cfg.workers;
    for (unsigned i = 0; i < s->cfg.workers; i++) {
        const struct srv_wstats_shm *w = &shm->wstats[i];
        f->commands += atomic_load_explicit(&w->commands, memory_order_relaxed);
        f->connections += atomic_load_explicit(&w->connections, memory_order_relaxed);
        f->rejected += atomic_load_explicit(&w->rejected, memory_order_relaxed);
        f->proto_errors += atomic_load_explicit(&w->proto_errors, memory_order_relaxed);
        f->clients += atomic_load_explicit(&w->clients, memory_order_relaxed);
        f->net_in += atomic_load_explicit(&w->net_in, memory_order_relaxed);
        f->net_out += atomic_load_explicit(&w->net_out, memory_order_relaxed);
        int64_t pid = atomic_load_explicit(&w->pid, memory_order_relaxed);
        if (pid > 0) {
            f->workers_alive++;
            proc_add((long)pid, f);
        }
    }
    /* the master (this process's parent: metrics run in a child) and the
     * maintenance process */
    proc_add((long)getppid(), f);
    proc_add((long)atomic_load(&shm->maint_pid), f);
    f->uptime_s = pc_wall_ms() / 1000 - atomic_load(&shm->start_unix);
    f->mem_ok = pc_mem_stats_get(s->cache, &f->mem) == 0;
    f->persist = s->persist != NULL;
    f->journal_on = s->persist != NULL && s->cfg.journal[0] != '\0';
    if (f->journal_on)
        (void)pc_persist_journal_health(s->persist, &f->jh);
    f->saving = atomic_load(&shm->saving) != 0 || atomic_load(&shm->bgsave_pending) != 0;
    f->saves = atomic_load(&shm->saves);
    f->save_failures = atomic_load(&shm->save_failures);
    f->last_save = atomic_load(&shm->last_save);
    f->last_save_rc = atomic_load(&shm->last_save_rc);
    f->ncoll = pc_coll_count(s->cache);
    if (f->ncoll > PC_MAX_COLLECTIONS)
        f->ncoll = PC_MAX_COLLECTIONS;
    for (unsigned i = 0; i < f->ncoll; i++) {
        pc_coll *c = pc_coll_at(s->cache, i);
        f->names[i] = pc_coll_name(c);
        (void)pc_coll_stats_total(c, &f->cs[i]);
        f->policy[i] = pc_coll_eviction(c);
        if (s->persist != NULL)
            (void)pc_persist_save_stats_get(s->persist, c, &f->ps[i]);
    }
}

/* ---- a growing text buffer -------------------------------------------------- */

struct mbuf {
    char *p;
    size_t len, cap;
    int err;
};

__attribute__((format(printf, 2, 3))) static void mb_add(struct mbuf *b, const char *fmt, ...)
{
    while (b->err == 0) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->err = PC_EINVAL;
            return;
        }
        if (b->p != NULL && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 8192;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (q == NULL) {
            b->err = PC_EHEAP;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

static int mb_done(struct mbuf *b, char **out, size_t *len)
{
    if (b->err != 0 || b->p == NULL) {
        free(b->p);
        return b->err != 0 ? b->err : PC_EHEAP;
    }
    *out = b->p;
    *len = b->len;
    return 0;
}

/* ---- the figure table ----------------------------------------------------------
 * Each row is one metric family: its name (without "pcache_" and without
 * "_total"), its type, its help text, and where its value comes from. A
 * per-collection row has one sample per collection, labelled
 * collection="<name>". INFO prints the same rows as pcache_<name>:<value>
 * (per collection: pcache_coll_<collection>_<name>:<value>). */

enum mtype { M_GAUGE, M_COUNTER };

struct mrow {
    const char *name;
    enum mtype type;
    const char *help;
    double (*get)(const struct figures *f);
};

#define G(field) ((double)f->field)
static double f_uptime(const struct figures *f)
{
    return G(uptime_s);
}
static double f_workers(const struct figures *f)
{
    return G(workers);
}
static double f_workers_alive(const struct figures *f)
{
    return G(workers_alive);
}
static double f_clients(const struct figures *f)
{
    return G(clients);
}
static double f_commands(const struct figures *f)
{
    return G(commands);
}
static double f_connections(const struct figures *f)
{
    return G(connections);
}
static double f_rejected(const struct figures *f)
{
    return G(rejected);
}
static double f_proto(const struct figures *f)
{
    return G(proto_errors);
}
static double f_net_in(const struct figures *f)
{
    return G(net_in);
}
static double f_net_out(const struct figures *f)
{
    return G(net_out);
}
static double f_cpu_user(const struct figures *f)
{
    return G(cpu_user_us) / 1e6;
}
static double f_cpu_sys(const struct figures *f)
{
    return G(cpu_sys_us) / 1e6;
}
static double f_pss(const struct figures *f)
{
    return G(pss_bytes);
}
static double f_mem_used(const struct figures *f)
{
    return G(mem.chunk_bytes) + G(mem.table_bytes);
}
static double f_mem_reserved(const struct figures *f)
{
    return G(mem.hugepage_bytes) + G(mem.plain_bytes);
}
static double f_mem_free(const struct figures *f)
{
    return G(mem.hugepage_free) + G(mem.plain_free);
}
static double f_mem_table(const struct figures *f)
{
    return G(mem.table_bytes);
}
static double f_mem_chunks(const struct figures *f)
{
    return G(mem.chunks);
}
static double f_mem_pinned(const struct figures *f)
{
    return G(mem.pinned);
}
static double f_mem_maxmemory(const struct figures *f)
{
    return G(mem.maxmemory);
}
static double f_mem_evicted(const struct figures *f)
{
    return G(mem.evicted);
}
static double f_persist(const struct figures *f)
{
    return G(persist);
}
static double f_saving(const struct figures *f)
{
    return G(saving);
}
static double f_saves(const struct figures *f)
{
    return G(saves);
}
static double f_save_failures(const struct figures *f)
{
    return G(save_failures);
}
static double f_last_save_ok(const struct figures *f)
{
    return f->last_save_rc == 0 ? 1 : 0;
}
static double f_last_save_time(const struct figures *f)
{
    return G(last_save);
}
static double f_journal_on(const struct figures *f)
{
    return G(journal_on);
}
static double f_journal_failing(const struct figures *f)
{
    return G(jh.failing);
}
static double f_journal_lost(const struct figures *f)
{
    return G(jh.lost);
}
static double f_journal_failures(const struct figures *f)
{
    return G(jh.failures);
}
#undef G

static const struct mrow rows[] = {
    {"uptime_seconds", M_GAUGE, "Seconds since the master started.", f_uptime},
    {"workers", M_GAUGE, "Worker processes configured.", f_workers},
    {"workers_alive", M_GAUGE, "Worker slots with a live process.", f_workers_alive},
    {"connected_clients", M_GAUGE, "RESP connections open now.", f_clients},
    {"commands", M_COUNTER, "RESP commands processed.", f_commands},
    {"connections", M_COUNTER, "RESP connections accepted.", f_connections},
    {"rejected_connections", M_COUNTER, "RESP connections refused (maxclients).", f_rejected},
    {"protocol_errors", M_COUNTER, "RESP protocol errors (connection closed).", f_proto},
    {"net_input_bytes", M_COUNTER, "Bytes read from RESP clients.", f_net_in},
    {"net_output_bytes", M_COUNTER, "Bytes written to RESP clients.", f_net_out},
    {"cpu_user_seconds", M_COUNTER, "User CPU time of every pcached process.", f_cpu_user},
    {"cpu_sys_seconds", M_COUNTER, "System CPU time of every pcached process.", f_cpu_sys},
    {"process_resident_memory_bytes", M_GAUGE,
     "Resident memory of every pcached process (proportional set sizes summed: shared pages "
     "once).",
     f_pss},
    {"memory_used_bytes", M_GAUGE, "Bytes in carved slab chunks and tables.", f_mem_used},
    {"memory_reserved_bytes", M_GAUGE, "Bytes of the shared reservation (mem_mb + hugepage_mb).",
     f_mem_reserved},
    {"memory_free_bytes", M_GAUGE, "Bytes of the reservation not yet carved.", f_mem_free},
    {"memory_table_bytes", M_GAUGE, "Bytes in bucket segments and hint arrays.", f_mem_table},
    {"memory_chunks", M_GAUGE, "Slab chunks carved.", f_mem_chunks},
    {"memory_pinned", M_GAUGE, "1 when mlock pinned the huge-page reservation.", f_mem_pinned},
    {"memory_maxmemory_bytes", M_GAUGE, "The maxmemory cap on record cells, 0 = none (the arena).",
     f_mem_maxmemory},
    {"evicted_keys", M_COUNTER, "Keys evicted, all collections.", f_mem_evicted},
    {"persistence_enabled", M_GAUGE, "1 when a db_url is configured.", f_persist},
    {"save_in_progress", M_GAUGE, "1 while a save runs or a BGSAVE is pending.", f_saving},
    {"saves", M_COUNTER, "Successful saves (SAVE, BGSAVE, periodic).", f_saves},
    {"save_failures", M_COUNTER, "Failed saves.", f_save_failures},
    {"last_save_ok", M_GAUGE, "1 when the last save succeeded (or none ran).", f_last_save_ok},
    {"last_save_timestamp_seconds", M_GAUGE, "Unix time of the last successful save, 0 = never.",
     f_last_save_time},
    {"journal_enabled", M_GAUGE, "1 when a write-ahead journal is configured.", f_journal_on},
    {"journal_failing", M_GAUGE, "1 while the journal cannot write: writes are refused.",
     f_journal_failing},
    {"journal_lost_writes", M_COUNTER, "Acknowledged journal records reported lost.",
     f_journal_lost},
    {"journal_failures", M_COUNTER, "Times the journal went from ok to failing.",
     f_journal_failures},
};

struct crow {
    const char *name;
    enum mtype type;
    const char *help;
    size_t off; /* offset of a uint64_t in pc_coll_stats */
};

#define C(n, t, h, fld)                                                                            \
    {                                                                                              \
        n, t, h, offsetof(pc_coll_stats, fld)                                                      \
    }
static const struct crow crows[] = {
    C("collection_entries", M_GAUGE, "Entries (live and not yet reclaimed).", entries),
    C("collection_buckets", M_GAUGE, "Buckets of the table (it grows).", buckets),
    C("collection_overflow_entries", M_GAUGE, "Entries in overflow side chains.", overflow),
    C("collection_hits", M_COUNTER, "Reads that found the key.", hits),
    C("collection_misses", M_COUNTER, "Reads that did not.", misses),
    C("collection_stores", M_COUNTER, "Writes.", stores),
    C("collection_removes", M_COUNTER, "Deletes.", removes),
    C("collection_expired", M_COUNTER, "Entries that lapsed (read as absent, swept).", expired),
    C("collection_destroyed", M_COUNTER, "Records freed.", destroyed),
    C("collection_reads", M_COUNTER, "Lock-free read attempts.", reads),
    C("collection_seqlock_retries", M_COUNTER, "Reads retried because a writer was active.",
      seqlock_retries),
    C("collection_lock_fallbacks", M_COUNTER, "Reads that fell back to the bucket lock.",
      lock_fallbacks),
    C("collection_nomem", M_COUNTER, "Writes refused: the shared arena was full.", nomem),
    C("collection_splits", M_COUNTER, "Bucket splits (table growth).", splits),
    C("collection_evicted", M_COUNTER, "Keys evicted to make room (the collection's policy).",
      evicted),
};
#undef C

/* A command's name as Redis shows it (lower case). */
static void lower(const char *in, char *out, size_t cap)
{
    size_t i = 0;
    for (; in[i] != '\0' && i + 1 < cap; i++)
        out[i] = (in[i] >= 'A' && in[i] <= 'Z') ? (char)(in[i] + 32) : in[i];
    out[i] = '\0';
}

static uint64_t cval(const pc_coll_stats *st, size_t off)
{
    uint64_t v;
    memcpy(&v, (const char *)st + off, sizeof v);
    return v;
}

/* A label value with \, " and newline escaped (both text formats). */
static void mb_label(struct mbuf *b, const char *v)
{
    for (; *v != '\0'; v++) {
        if (*v == '\\' || *v == '"')
            mb_add(b, "\\%c", *v);
        else if (*v == '\n')
            mb_add(b, "\\n");
        else
            mb_add(b, "%c", *v);
    }
}

static void family_head(struct mbuf *b, const char *name, enum mtype t, const char *help, int om)
{
    /* OpenMetrics names a counter family without "_total", the Prometheus
     * text format with it (the sample's name) */
    const char *suffix = t == M_COUNTER && !om ? "_total" : "";
    mb_add(b, "# HELP pcache_%s%s %s\n", name, suffix, help);
    mb_add(b, "# TYPE pcache_%s%s %s\n", name, suffix, t == M_COUNTER ? "counter" : "gauge");
}

/* One command's counters summed over the worker slots. */
struct cmd_sum {
    uint64_t calls, usec, rejected, failed, lat[SRV_LAT_BUCKETS];
};

static void cmd_sum_get(const srv *s, unsigned k, struct cmd_sum *t)
{
    memset(t, 0, sizeof *t);
    for (unsigned i = 0; i < s->cfg.workers; i++) {
        const struct srv_cmdstat_shm *st = &s->shm->cmdstats[i][k];
        t->calls += atomic_load_explicit(&st->calls, memory_order_relaxed);
        t->usec += atomic_load_explicit(&st->usec, memory_order_relaxed);
        t->rejected += atomic_load_explicit(&st->rejected, memory_order_relaxed);
        t->failed += atomic_load_explicit(&st->failed, memory_order_relaxed);
        for (unsigned b = 0; b < SRV_LAT_BUCKETS; b++)
            t->lat[b] += atomic_load_explicit(&st->lat[b], memory_order_relaxed);
    }
}

/* The per-command families: calls, failed and rejected counters and the
 * latency histogram, for every command that ran or was refused (as INFO
 * commandstats lists them). The histogram's count is the sum of its
 * buckets, read in one pass, so its +Inf bucket always equals it. */
static void commands_text(const srv *s, struct mbuf *b, int om)
{
    static const struct {
        const char *name, *help;
        size_t off;
    } fams[] = {
        {"command_calls", "Commands run, per command.", offsetof(struct cmd_sum, calls)},
        {"command_failed", "Commands that ran and answered an error.",
         offsetof(struct cmd_sum, failed)},
        {"command_rejected", "Commands refused before running (arity, NOAUTH, MULTI).",
         offsetof(struct cmd_sum, rejected)},
    };
    struct cmd_sum t;
    char name[32];
    for (size_t fi = 0; fi < sizeof fams / sizeof fams[0]; fi++) {
        family_head(b, fams[fi].name, M_COUNTER, fams[fi].help, om);
        for (unsigned k = 0; cmd_at(k) != NULL && k < SRV_CMD_SLOTS; k++) {
            cmd_sum_get(s, k, &t);
            if (t.calls == 0 && t.rejected == 0 && t.failed == 0)
                continue;
            lower(cmd_at(k)->name, name, sizeof name);
            uint64_t v;
            memcpy(&v, (const char *)&t + fams[fi].off, sizeof v);
            mb_add(b, "pcache_%s_total{command=\"%s\"} %llu\n", fams[fi].name, name,
                   (unsigned long long)v);
        }
    }
    mb_add(b, "# HELP pcache_command_duration_seconds Time commands took to run in a worker "
              "(reading and replying aside), per command.\n"
              "# TYPE pcache_command_duration_seconds histogram\n");
    for (unsigned k = 0; cmd_at(k) != NULL && k < SRV_CMD_SLOTS; k++) {
        cmd_sum_get(s, k, &t);
        if (t.calls == 0)
            continue;
        lower(cmd_at(k)->name, name, sizeof name);
        uint64_t cum = 0;
        for (unsigned i = 0; i < SRV_LAT_BUCKETS; i++) {
            cum += t.lat[i];
            if (i + 1 < SRV_LAT_BUCKETS)
                mb_add(b,
                       "pcache_command_duration_seconds_bucket{command=\"%s\",le=\"%.6f\"} %llu\n",
                       name, (double)(1ull << i) / 1e6, (unsigned long long)cum);
            else
                mb_add(b,
                       "pcache_command_duration_seconds_bucket{command=\"%s\",le=\"+Inf\"} %llu\n",
                       name, (unsigned long long)cum);
        }
        mb_add(b, "pcache_command_duration_seconds_sum{command=\"%s\"} %.6f\n", name,
               (double)t.usec / 1e6);
        mb_add(b, "pcache_command_duration_seconds_count{command=\"%s\"} %llu\n", name,
               (unsigned long long)cum);
    }
}

int srv_metrics_text(const srv *s, int openmetrics, char **out, size_t *len)
{
    struct figures *f = malloc(sizeof *f);
    if (f == NULL)
        return PC_EHEAP;
    gather(s, f);
    struct mbuf b = {0};
    mb_add(&b, "# HELP pcache_build_info Version of pcached.\n# TYPE pcache_build_info gauge\n");
    mb_add(&b, "pcache_build_info{version=\"%s\"} 1\n", SRV_VERSION);
    mb_add(&b, "# HELP pcache_memory_tier_info Memory backing achieved (huge pages, THP, 4K).\n"
               "# TYPE pcache_memory_tier_info gauge\n");
    mb_add(&b, "pcache_memory_tier_info{tier=\"%s\"} 1\n",
           f->mem_ok ? pc_tier_name(f->mem.tier) : "unknown");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        family_head(&b, rows[i].name, rows[i].type, rows[i].help, openmetrics);
        mb_add(&b, "pcache_%s%s %.17g\n", rows[i].name, rows[i].type == M_COUNTER ? "_total" : "",
               rows[i].get(f));
    }
    if (f->last_save > 0) {
        family_head(&b, "last_save_age_seconds", M_GAUGE, "Seconds since the last successful save.",
                    openmetrics);
        mb_add(&b, "pcache_last_save_age_seconds %lld\n",
               (long long)(pc_wall_ms() / 1000 - f->last_save));
    }
    for (size_t r = 0; r < sizeof crows / sizeof crows[0]; r++) {
        family_head(&b, crows[r].name, crows[r].type, crows[r].help, openmetrics);
        for (unsigned i = 0; i < f->ncoll; i++) {
            mb_add(&b, "pcache_%s%s{collection=\"", crows[r].name,
                   crows[r].type == M_COUNTER ? "_total" : "");
            mb_label(&b, f->names[i]);
            mb_add(&b, "\"} %llu\n", (unsigned long long)cval(&f->cs[i], crows[r].off));
        }
    }
    family_head(&b, "collection_eviction_info", M_GAUGE,
                "1, labelled with the collection's eviction policy (maxmemory_policy, eviction).",
                openmetrics);
    for (unsigned i = 0; i < f->ncoll; i++) {
        mb_add(&b, "pcache_collection_eviction_info{collection=\"");
        mb_label(&b, f->names[i]);
        mb_add(&b, "\",policy=\"%s\"} 1\n", pc_evict_policy_name(f->policy[i]));
    }
    /* the persisted collections' own last save (every save path: SAVE,
     * periodic, shutdown, perf_save, the journal bound) */
    int64_t now_ms = pc_wall_ms();
    family_head(&b, "collection_last_save_timestamp_seconds", M_GAUGE,
                "Unix time of the collection's last successful save, 0 = never.", openmetrics);
    for (unsigned i = 0; i < f->ncoll; i++)
        if (f->ps[i].persisted) {
            mb_add(&b, "pcache_collection_last_save_timestamp_seconds{collection=\"");
            mb_label(&b, f->names[i]);
            mb_add(&b, "\"} %lld\n", (long long)(f->ps[i].last_save_ms / 1000));
        }
    family_head(&b, "collection_last_save_age_seconds", M_GAUGE,
                "Seconds since the collection's last successful save (saved ones only).",
                openmetrics);
    for (unsigned i = 0; i < f->ncoll; i++)
        if (f->ps[i].persisted && f->ps[i].last_save_ms > 0) {
            mb_add(&b, "pcache_collection_last_save_age_seconds{collection=\"");
            mb_label(&b, f->names[i]);
            mb_add(&b, "\"} %.3f\n", (double)(now_ms - f->ps[i].last_save_ms) / 1000.0);
        }
    family_head(&b, "collection_last_save_ok", M_GAUGE,
                "1 when the collection's last save attempt succeeded (or none ran).", openmetrics);
    for (unsigned i = 0; i < f->ncoll; i++)
        if (f->ps[i].persisted) {
            mb_add(&b, "pcache_collection_last_save_ok{collection=\"");
            mb_label(&b, f->names[i]);
            mb_add(&b, "\"} %d\n", f->ps[i].last_save_rc == 0 ? 1 : 0);
        }
    commands_text(s, &b, openmetrics);
    if (openmetrics)
        mb_add(&b, "# EOF\n");
    free(f);
    return mb_done(&b, out, len);
}

int srv_metrics_info(const srv *s, char **out, size_t *len)
{
    struct figures *f = malloc(sizeof *f);
    if (f == NULL)
        return PC_EHEAP;
    gather(s, f);
    struct mbuf b = {0};
    mb_add(&b, "# Metrics\r\n");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        mb_add(&b, "pcache_%s:%.17g\r\n", rows[i].name, rows[i].get(f));
    mb_add(&b, "pcache_last_save_age_seconds:%lld\r\n",
           f->last_save > 0 ? (long long)(pc_wall_ms() / 1000 - f->last_save) : -1LL);
    for (unsigned i = 0; i < f->ncoll; i++)
        for (size_t r = 0; r < sizeof crows / sizeof crows[0]; r++)
            mb_add(&b, "pcache_coll_%s_%s:%llu\r\n", f->names[i], crows[r].name + 11,
                   (unsigned long long)cval(&f->cs[i], crows[r].off));
    for (unsigned i = 0; i < f->ncoll; i++)
        if (f->ps[i].persisted)
            mb_add(&b,
                   "pcache_coll_%s_last_save_timestamp_seconds:%lld\r\n"
                   "pcache_coll_%s_last_save_ok:%d\r\n",
                   f->names[i], (long long)(f->ps[i].last_save_ms / 1000), f->names[i],
                   f->ps[i].last_save_rc == 0 ? 1 : 0);
    mb_add(&b, "\r\n");
    free(f);
    return mb_done(&b, out, len);
}

int srv_health(const srv *s, char **out, size_t *len)
{
    struct figures *f = malloc(sizeof *f);
    if (f == NULL)
        return PC_EHEAP;
    gather(s, f);
    struct mbuf b = {0};
    bool journal_bad = f->journal_on && f->jh.failing;
    bool saves_ok = !f->persist || f->last_save_rc == 0;
    for (unsigned i = 0; i < f->ncoll; i++)
        if (f->ps[i].persisted && f->ps[i].last_save_rc != 0)
            saves_ok = false;
    bool workers_bad = f->workers_alive < f->workers;
    int status = journal_bad || !saves_ok ? 503 : 200;
    mb_add(&b, "{\"status\":\"%s\",\"reasons\":[", status == 200 ? "ok" : "failing");
    const char *sep = "";
    if (journal_bad) {
        mb_add(&b, "\"journal failing since %lld: %s (writes are refused)\"",
               (long long)(f->jh.since_wall_ms / 1000), strerror(f->jh.err));
        sep = ",";
    }
    if (f->persist && f->last_save_rc != 0) {
        mb_add(&b, "%s\"the last save failed: %s\"", sep, pc_store_strerror(f->last_save_rc));
        sep = ",";
    }
    for (unsigned i = 0; i < f->ncoll; i++)
        if (f->ps[i].persisted && f->ps[i].last_save_rc != 0) {
            /* collection names are letters, digits, _ - . (the engine checks) */
            mb_add(&b, "%s\"collection %s: the last save failed: %s\"", sep, f->names[i],
                   pc_store_strerror(f->ps[i].last_save_rc));
            sep = ",";
        }
    mb_add(&b,
           "],\"journal\":\"%s\",\"last_save_ok\":%s,\"last_save\":%lld,\"saving\":%s,"
           "\"workers\":%u,\"workers_alive\":%u%s}\n",
           !f->journal_on  ? "off"
           : f->jh.failing ? "failing"
                           : "ok",
           saves_ok ? "true" : "false", (long long)f->last_save, f->saving ? "true" : "false",
           f->workers, f->workers_alive,
           workers_bad ? ",\"note\":\"a worker is being restarted\"" : "");
    free(f);
    int rc = mb_done(&b, out, len);
    return rc != 0 ? rc : status;
}
