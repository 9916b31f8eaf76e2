/*
 * cdbp_events.c - the engine's events as OpenSIPS EVI events, and its
 * counters as OpenSIPS statistics.
 *
 * Events. The engine raises an event in the process that observes it (the
 * maintenance process for expired and grown, the writing worker for nomem) and
 * hands it to the handler the cache was created with, cdbp_event_fn, which
 * raises the EVI event when someone subscribed (evi_probe_event: one read
 * when nobody did). mem_degraded happens inside pc_cache_create, before
 * EVI can deliver anything: it is noted and raised from the first
 * maintenance tick. The engine is subscribed to nomem, grown and reloaded
 * (E_CACHEDB_PERF_SYNCED: the sync replaced a collection's contents) for
 * every collection, and to expired for the collections named in
 * event_expired_collections only.
 *
 * Statistics. Each is a function statistic summed over the collections
 * at read time from pc_coll_stats_get (the engine keeps per-process
 * counters and sums them), so nothing is added to the get/set path.
 */
#include <dprint.h>
#include <ut.h>
#include <statistics.h>
#include <time.h>
#include <evi/evi_modules.h>
#include <evi/evi_params.h>

#include "cdbp.h"

#include <stdio.h>
#include <string.h>

enum { EV_EXPIRED, EV_NOMEM, EV_GROWN, EV_MEM_DEGRADED, EV_SYNCED, EV_N };

static const char *cdbp_ev_names[EV_N] = {"E_CACHEDB_PERF_EXPIRED", "E_CACHEDB_PERF_NOMEM",
                                          "E_CACHEDB_PERF_GROWN", "E_CACHEDB_PERF_MEM_DEGRADED",
                                          "E_CACHEDB_PERF_SYNCED"};
static event_id_t cdbp_ev_ids[EV_N] = {EVI_ERROR, EVI_ERROR, EVI_ERROR, EVI_ERROR, EVI_ERROR};

/* mem_degraded as noted at creation (main process, before fork) */
static struct {
    int pending;
    uint64_t requested_mb, overcommit_pages;
    int tier;
    char backing[16];
} cdbp_degraded;

int cdbp_events_init(void)
{
    for (int i = 0; i < EV_N; i++) {
        str name = {(char *)cdbp_ev_names[i], (int)strlen(cdbp_ev_names[i])};
        /* an event_route of the script may have published it already */
        cdbp_ev_ids[i] = evi_get_id(&name);
        if (cdbp_ev_ids[i] == EVI_ERROR)
            cdbp_ev_ids[i] = evi_publish_event(name);
        if (cdbp_ev_ids[i] == EVI_ERROR) {
            LM_ERR("cannot publish event %s\n", cdbp_ev_names[i]);
            return -1;
        }
    }
    int rc = pc_event_subscribe(cdbp_cache, PC_EV_NOMEM, 1);
    rc = rc ? rc : pc_event_subscribe(cdbp_cache, PC_EV_GROWN, 1);
    rc = rc ? rc : pc_event_subscribe(cdbp_cache, PC_EV_RELOADED, 1);
    if (rc != 0) {
        LM_ERR("cannot subscribe to the engine's events: %s\n", pc_store_strerror(rc));
        return -1;
    }
    return 0;
}

int cdbp_events_expired(const char *list)
{
    if (list == NULL || list[0] == '\0')
        return 0;
    int rc = pc_event_subscribe(cdbp_cache, PC_EV_EXPIRED, 1);
    if (rc != 0) {
        LM_ERR("cannot subscribe to the expired event: %s\n", pc_store_strerror(rc));
        return -1;
    }
    const char *p = list;
    while (*p != '\0') {
        size_t n = strcspn(p, ",; ");
        if (n > 0) {
            pc_coll *coll;
            if (pc_coll_find(cdbp_cache, p, n, &coll) != 0) {
                LM_ERR("event_expired_collections: \"%.*s\" is not a declared collection\n", (int)n,
                       p);
                return -1;
            }
            pc_event_expired(coll, 1);
        }
        p += n;
        if (*p != '\0')
            p++;
    }
    return 0;
}

static int add_s(evi_params_p l, const char *name, const char *v, size_t len)
{
    str n = {(char *)name, (int)strlen(name)};
    str s = {(char *)(v ? v : ""), v ? (int)len : 0};
    return evi_param_add_str(l, &n, &s);
}

static int add_i(evi_params_p l, const char *name, uint64_t v)
{
    str n = {(char *)name, (int)strlen(name)};
    int i = v > 0x7fffffff ? 0x7fffffff : (int)v;
    return evi_param_add_int(l, &n, &i);
}

static void cdbp_raise(int idx, const pc_event *ev)
{
    event_id_t id = cdbp_ev_ids[idx];
    if (id == EVI_ERROR || !evi_probe_event(id))
        return;
    evi_params_p l = evi_get_params();
    if (l == NULL) {
        LM_ERR("cannot build the parameters of %s\n", cdbp_ev_names[idx]);
        return;
    }
    const char *coll = ev->collection;
    size_t clen = coll ? strlen(coll) : 0;
    int rc = 0;
    switch (idx) {
    case EV_EXPIRED:
        rc = add_s(l, "collection", coll, clen) || add_s(l, "key", ev->key, ev->klen);
        break;
    case EV_NOMEM:
        rc = add_s(l, "collection", coll, clen) || add_s(l, "key", ev->key, ev->klen) ||
             add_i(l, "size", ev->size);
        break;
    case EV_GROWN:
        rc = add_s(l, "collection", coll, clen) || add_i(l, "prev_buckets", ev->prev_buckets) ||
             add_i(l, "buckets", ev->buckets) || add_i(l, "splits", ev->splits) ||
             add_i(l, "entries", ev->entries);
        break;
    case EV_MEM_DEGRADED:
        rc = add_i(l, "requested_mb", ev->requested_mb) || add_i(l, "tier", (uint64_t)ev->tier) ||
             add_s(l, "backing", ev->backing, ev->backing ? strlen(ev->backing) : 0) ||
             add_i(l, "overcommit_pages", ev->overcommit_pages);
        break;
    case EV_SYNCED:
        rc = add_s(l, "collection", coll, clen) ||
             add_s(l, "source_node", ev->source, ev->source ? strlen(ev->source) : 0);
        break;
    }
    if (rc != 0) {
        LM_ERR("cannot build the parameters of %s\n", cdbp_ev_names[idx]);
        evi_free_params(l);
        return;
    }
    if (evi_raise_event(id, l) < 0) /* frees the list */
        LM_ERR("cannot raise %s\n", cdbp_ev_names[idx]);
}

void cdbp_event_fn(void *ctx, const pc_event *ev)
{
    (void)ctx;
    switch (ev->type) {
    case PC_EV_EXPIRED:
        cdbp_raise(EV_EXPIRED, ev);
        break;
    case PC_EV_NOMEM:
        cdbp_raise(EV_NOMEM, ev);
        break;
    case PC_EV_GROWN:
        cdbp_raise(EV_GROWN, ev);
        break;
    case PC_EV_RELOADED:
        cdbp_raise(EV_SYNCED, ev);
        break;
    case PC_EV_MEM_DEGRADED:
        cdbp_degraded.pending = 1;
        cdbp_degraded.requested_mb = ev->requested_mb;
        cdbp_degraded.overcommit_pages = ev->overcommit_pages;
        cdbp_degraded.tier = ev->tier;
        snprintf(cdbp_degraded.backing, sizeof cdbp_degraded.backing, "%s",
                 ev->backing ? ev->backing : "?");
        break; /* the engine logged it */
    }
}

void cdbp_events_boot(void)
{
    if (!cdbp_degraded.pending)
        return;
    cdbp_degraded.pending = 0;
    pc_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = PC_EV_MEM_DEGRADED;
    ev.requested_mb = cdbp_degraded.requested_mb;
    ev.tier = cdbp_degraded.tier;
    ev.backing = cdbp_degraded.backing;
    ev.overcommit_pages = cdbp_degraded.overcommit_pages;
    cdbp_raise(EV_MEM_DEGRADED, &ev);
}

/* ---- statistics ---------------------------------------------------------- */
#define CDBP_STAT_FN(field)                                                                        \
    static unsigned long cdbp_stat_##field(void *ctx)                                              \
    {                                                                                              \
        (void)ctx;                                                                                 \
        unsigned long sum = 0;                                                                     \
        for (unsigned i = 0; cdbp_cache != NULL && i < pc_coll_count(cdbp_cache); i++) {           \
            pc_coll_stats st;                                                                      \
            if (pc_coll_stats_total(pc_coll_at(cdbp_cache, i), &st) == 0)                          \
                sum += (unsigned long)st.field;                                                    \
        }                                                                                          \
        return sum;                                                                                \
    }

CDBP_STAT_FN(entries)
CDBP_STAT_FN(buckets)
CDBP_STAT_FN(overflow)
CDBP_STAT_FN(hits)
CDBP_STAT_FN(misses)
CDBP_STAT_FN(stores)
CDBP_STAT_FN(removes)
CDBP_STAT_FN(expired)
CDBP_STAT_FN(destroyed)
CDBP_STAT_FN(seqlock_retries)
CDBP_STAT_FN(nomem)
CDBP_STAT_FN(evicted)
CDBP_STAT_FN(splits)
CDBP_STAT_FN(reads)
CDBP_STAT_FN(lock_fallbacks)

/* The same figures as pcached's /metrics (docs/pcached.md, "Metrics and
 * health"): memory, the journal's state, and the persisted collections'
 * saves. */
static unsigned long cdbp_stat_memory_used(void *ctx)
{
    (void)ctx;
    pc_mem_stats m;
    if (cdbp_cache == NULL || pc_mem_stats_get(cdbp_cache, &m) != 0)
        return 0;
    return (unsigned long)(m.chunk_bytes + m.table_bytes);
}

static unsigned long cdbp_stat_memory_free(void *ctx)
{
    (void)ctx;
    pc_mem_stats m;
    if (cdbp_cache == NULL || pc_mem_stats_get(cdbp_cache, &m) != 0)
        return 0;
    return (unsigned long)(m.hugepage_free + m.plain_free);
}

static unsigned long cdbp_stat_journal_failing(void *ctx)
{
    (void)ctx;
    pc_journal_health h;
    if (cdbp_persist == NULL || pc_persist_journal_health(cdbp_persist, &h) != 0)
        return 0;
    return h.failing ? 1 : 0;
}

/* Persisted collections whose last save attempt failed. */
static unsigned long cdbp_stat_saves_failing(void *ctx)
{
    (void)ctx;
    unsigned long n = 0;
    for (unsigned i = 0; cdbp_persist != NULL && i < pc_coll_count(cdbp_cache); i++) {
        pc_persist_save_stats ps;
        if (pc_persist_save_stats_get(cdbp_persist, pc_coll_at(cdbp_cache, i), &ps) == 0 &&
            ps.persisted && ps.last_save_rc != 0)
            n++;
    }
    return n;
}

/* Seconds since the stalest persisted collection's last successful save
 * (0 when none has saved yet). */
static unsigned long cdbp_stat_last_save_age(void *ctx)
{
    (void)ctx;
    int64_t oldest = 0;
    for (unsigned i = 0; cdbp_persist != NULL && i < pc_coll_count(cdbp_cache); i++) {
        pc_persist_save_stats ps;
        if (pc_persist_save_stats_get(cdbp_persist, pc_coll_at(cdbp_cache, i), &ps) == 0 &&
            ps.persisted && ps.last_save_ms > 0 && (oldest == 0 || ps.last_save_ms < oldest))
            oldest = ps.last_save_ms;
    }
    if (oldest == 0)
        return 0;
    int64_t age = (int64_t)time(NULL) - oldest / 1000;
    return age > 0 ? (unsigned long)age : 0;
}

#define CDBP_STAT(field)                                                                           \
    {                                                                                              \
#field, STAT_IS_FUNC | STAT_NO_RESET, (stat_var **)cdbp_stat_##field                       \
    }

const stat_export_t cdbp_stats[] = {
    CDBP_STAT(entries),       CDBP_STAT(buckets),       CDBP_STAT(overflow),
    CDBP_STAT(hits),          CDBP_STAT(misses),        CDBP_STAT(stores),
    CDBP_STAT(removes),       CDBP_STAT(expired),       CDBP_STAT(destroyed),
    CDBP_STAT(nomem),         CDBP_STAT(evicted),       CDBP_STAT(seqlock_retries),
    CDBP_STAT(splits),        CDBP_STAT(reads),         CDBP_STAT(lock_fallbacks),
    CDBP_STAT(memory_used),   CDBP_STAT(memory_free),   CDBP_STAT(journal_failing),
    CDBP_STAT(saves_failing), CDBP_STAT(last_save_age), {0, 0, 0}};
