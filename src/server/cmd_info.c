/*
 * cmd_info.c - INFO: Redis's sections (server, clients, memory,
 * persistence, stats, keyspace) with what pcached knows, and a "pcache"
 * section with every collection's engine counters. Counters of the workers
 * are summed from their cache lines in shared memory; the engine's are
 * summed by the engine (pc_coll_stats_get). Field list: docs/pcached.md.
 */
#include "info_memory.h"
#include "resp.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static int want_section(unsigned argc, const char **argv, const size_t *argl, const char *name)
{
    if (argc < 2)
        return 1;
    for (unsigned i = 1; i < argc; i++)
        if (arg_eq(argv[i], argl[i], name) || arg_eq(argv[i], argl[i], "all") ||
            arg_eq(argv[i], argl[i], "everything") || arg_eq(argv[i], argl[i], "default"))
            return 1;
    return 0;
}

void cmd_info(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    srv *s = w->s;
    struct srv_shm *shm = s->shm;
    struct info_buf b = {NULL, 0, 0};
    uint64_t cmds = 0, conns = 0, rej = 0, perr = 0, clients = 0;
    for (unsigned i = 0; i < s->cfg.workers; i++) {
        cmds += atomic_load_explicit(&shm->wstats[i].commands, memory_order_relaxed);
        conns += atomic_load_explicit(&shm->wstats[i].connections, memory_order_relaxed);
        rej += atomic_load_explicit(&shm->wstats[i].rejected, memory_order_relaxed);
        perr += atomic_load_explicit(&shm->wstats[i].proto_errors, memory_order_relaxed);
        clients += atomic_load_explicit(&shm->wstats[i].clients, memory_order_relaxed);
    }
    int64_t now = pc_wall_ms() / 1000;
    if (want_section(argc, argv, argl, "server")) {
        ib_add(&b,
               "# Server\r\nredis_version:7.0.0\r\npcached_version:%s\r\nredis_mode:standalone\r\n"
               "process_id:%d\r\ntcp_port:%u\r\nuptime_in_seconds:%lld\r\nworkers:%u\r\n"
               "worker_slot:%u\r\n\r\n",
               SRV_VERSION, (int)getpid(), s->bound_port,
               (long long)(now - atomic_load(&shm->start_unix)), s->cfg.workers, w->slot);
    }
    if (want_section(argc, argv, argl, "clients"))
        ib_add(&b, "# Clients\r\nconnected_clients:%llu\r\nmaxclients:%llu\r\n\r\n",
               (unsigned long long)clients, (unsigned long long)s->cfg.maxclients * s->cfg.workers);
    if (want_section(argc, argv, argl, "memory")) {
        pc_mem_stats m;
        if (pc_mem_stats_get(s->cache, &m) == 0)
            ib_add(&b,
                   "# Memory\r\nused_memory:%llu\r\nmaxmemory:%llu\r\npcache_mem_tier:%s\r\n"
                   "pcache_pinned:%d\r\npcache_hugepage_bytes:%zu\r\npcache_hugepage_free:%zu\r\n"
                   "pcache_plain_bytes:%zu\r\npcache_plain_free:%zu\r\npcache_chunks:%llu\r\n"
                   "pcache_chunk_bytes:%llu\r\npcache_table_bytes:%llu\r\n",
                   (unsigned long long)(m.used_cell_bytes + m.table_bytes),
                   (unsigned long long)(m.hugepage_bytes + m.plain_bytes), pc_tier_name(m.tier),
                   m.pinned, m.hugepage_bytes, m.hugepage_free, m.plain_bytes, m.plain_free,
                   (unsigned long long)m.chunks, (unsigned long long)m.chunk_bytes,
                   (unsigned long long)m.table_bytes);
        char arena[16384]; /* 96 classes of one line (< 100 bytes) each fit */
        size_t an = info_memory_arena(s->cache, arena, sizeof arena);
        ib_add(&b, "%.*s\r\n", (int)(an < sizeof arena ? an : 0), arena);
    }
    if (want_section(argc, argv, argl, "persistence")) {
        /* the journal's health: writes are refused while it is failing */
        pc_journal_health h = {0};
        bool jon = s->persist != NULL && s->cfg.journal[0] != '\0';
        if (jon)
            (void)pc_persist_journal_health(s->persist, &h);
        ib_add(&b,
               "# Persistence\r\nloading:0\r\nrdb_bgsave_in_progress:%u\r\n"
               "rdb_last_save_time:%lld\r\nrdb_last_bgsave_status:%s\r\npcache_saves:%llu\r\n"
               "pcache_save_failures:%llu\r\npcache_db_mode:%u\r\npcache_store:%s\r\n",
               atomic_load(&shm->saving) || atomic_load(&shm->bgsave_pending) ? 1u : 0u,
               (long long)atomic_load(&shm->last_save),
               atomic_load(&shm->last_save_rc) == 0 ? "ok" : "err",
               (unsigned long long)atomic_load(&shm->saves),
               (unsigned long long)atomic_load(&shm->save_failures), s->cfg.db_mode,
               s->persist ? "lmdb" : "none");
        ib_add(&b,
               "pcache_journal_status:%s\r\npcache_journal_failing_since:%lld\r\n"
               "pcache_journal_error:%s\r\npcache_journal_lost_writes:%llu\r\n"
               "pcache_journal_failures:%llu\r\n\r\n",
               !jon        ? "off"
               : h.failing ? "failing"
                           : "ok",
               (long long)(h.since_wall_ms / 1000), h.failing ? strerror(h.err) : "",
               (unsigned long long)h.lost, (unsigned long long)h.failures);
    }
    uint64_t hits = 0, misses = 0, expired = 0;
    pc_coll_stats cs[PC_MAX_COLLECTIONS];
    unsigned ncoll = pc_coll_count(s->cache);
    for (unsigned i = 0; i < ncoll; i++) {
        memset(&cs[i], 0, sizeof cs[i]);
        (void)pc_coll_stats_get(pc_coll_at(s->cache, i), &cs[i]);
        hits += cs[i].hits;
        misses += cs[i].misses;
        expired += cs[i].expired;
    }
    if (want_section(argc, argv, argl, "stats"))
        ib_add(&b,
               "# Stats\r\ntotal_connections_received:%llu\r\ntotal_commands_processed:%llu\r\n"
               "rejected_connections:%llu\r\ntotal_error_replies_protocol:%llu\r\n"
               "keyspace_hits:%llu\r\nkeyspace_misses:%llu\r\nexpired_keys:%llu\r\n\r\n",
               (unsigned long long)conns, (unsigned long long)cmds, (unsigned long long)rej,
               (unsigned long long)perr, (unsigned long long)hits, (unsigned long long)misses,
               (unsigned long long)expired);
    if (want_section(argc, argv, argl, "keyspace")) {
        ib_add(&b, "# Keyspace\r\n");
        for (unsigned d = 0; d < s->ndbs; d++) {
            pc_coll_stats st;
            if (pc_coll_stats_get(s->dbs[d], &st) == 0 && st.entries > 0)
                ib_add(&b, "db%u:keys=%llu,expires=0,avg_ttl=0\r\n", d,
                       (unsigned long long)st.entries);
        }
        ib_add(&b, "\r\n");
    }
    if (want_section(argc, argv, argl, "pcache")) {
        ib_add(&b, "# Pcache\r\n");
        for (unsigned i = 0; i < ncoll; i++) {
            const pc_coll_stats *st = &cs[i];
            ib_add(&b,
                   "coll_%s:entries=%llu,buckets=%llu,overflow=%llu,hits=%llu,misses=%llu,"
                   "stores=%llu,removes=%llu,expired=%llu,destroyed=%llu,reads=%llu,"
                   "seqlock_retries=%llu,lock_fallbacks=%llu,nomem=%llu,splits=%llu\r\n",
                   pc_coll_name(pc_coll_at(s->cache, i)), (unsigned long long)st->entries,
                   (unsigned long long)st->buckets, (unsigned long long)st->overflow,
                   (unsigned long long)st->hits, (unsigned long long)st->misses,
                   (unsigned long long)st->stores, (unsigned long long)st->removes,
                   (unsigned long long)st->expired, (unsigned long long)st->destroyed,
                   (unsigned long long)st->reads, (unsigned long long)st->seqlock_retries,
                   (unsigned long long)st->lock_fallbacks, (unsigned long long)st->nomem,
                   (unsigned long long)st->splits);
        }
        ib_add(&b, "\r\n");
    }
    if (b.p == NULL) {
        reply_bulk(c, "", 0);
        return;
    }
    /* sections are separated by a blank line, the last one ends with its
     * last line (as Redis's INFO) */
    if (b.len >= 4 && memcmp(b.p + b.len - 4, "\r\n\r\n", 4) == 0)
        b.len -= 2;
    reply_bulk(c, b.p, b.len);
    free(b.p);
}
