/*
 * eviction.c - pcached's side of the engine's eviction (docs/pcached.md §2.2,
 * "Memory and eviction"): the setup the master runs before the fork
 * (maxmemory, every collection's policy, the event opt-ins), the run-time
 * change of the default policy, and the handler that logs the expired and
 * evicted events. The words (policy names, the `eviction` list) are
 * evict_names.c's.
 *
 * The engine keeps the cap and each collection's policy in shared memory:
 * one call in any process changes them for every process, and a worker the
 * master restarts inherits them. What a process keeps in its srv_config is
 * the text CONFIG GET and --check show; cmd_config.c carries a run-time
 * change of it through srv_shm.rt.
 *
 * A collection's policy is its `eviction` entry when it has one, else
 * maxmemory_policy. CONFIG SET maxmemory-policy changes the latter, so it
 * reaches every collection without an entry (Redis's global setting) and
 * never one the operator pinned.
 */
#include "pcached.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

struct name_walk {
    pc_cache *cache;
    const char *key;
    char *err;
    size_t errlen;
    int type; /* PC_EV_EXPIRED or PC_EV_EVICTED: what to opt in */
    const char *want;
    int found; /* srv_listed */
};

static int name_entry(void *ctx, const char *name, size_t len, const char *val, size_t vlen)
{
    struct name_walk *w = ctx;
    pc_coll *coll;
    if (w->want != NULL) { /* srv_listed: persist_collections, or journal with a mode not off */
        int off = val != NULL && vlen == 3 && strncasecmp(val, "off", 3) == 0;
        if (strlen(w->want) == len && memcmp(name, w->want, len) == 0 && !off)
            w->found = 1;
        return 0;
    }
    if (val != NULL) {
        snprintf(w->err, w->errlen, "%s: '%.*s=...': expected a list of collection names", w->key,
                 (int)len, name);
        return -1;
    }
    if (pc_coll_find(w->cache, name, len, &coll) != 0) {
        snprintf(w->err, w->errlen, "%s: '%.*s' is not a declared collection", w->key, (int)len,
                 name);
        return -1;
    }
    return w->type == PC_EV_EXPIRED ? pc_event_expired(coll, 1) : pc_event_evicted(coll, 1);
}

static int srv_listed(const char *list, const char *coll)
{
    struct name_walk w = {.want = coll};
    (void)pc_list_items(list, name_entry, &w);
    return w.found;
}

/* ---- the events ---------------------------------------------------------------------------- */

/* Logs an expired or evicted event: pcached has no script or event bus to
 * hand it to. At most EV_LOG_MAX lines a second per process: a full cache
 * evicts thousands of keys a second, and the log is not the place for all
 * of them (the counters are); the lines left out are counted in the next
 * line. Runs after the engine released its bucket lock. */
#define EV_LOG_MAX 100u
void srv_event_log(const pc_event *ev)
{
    if (ev->type != PC_EV_EXPIRED && ev->type != PC_EV_EVICTED)
        return;
    static int64_t second;
    static unsigned lines;
    static unsigned long long dropped;
    int64_t now = pc_mono_ms() / 1000;
    if (now != second) {
        if (dropped > 0)
            srv_log(PC_LOG_INFO,
                    "event lines: %llu expired/evicted events not logged (at most "
                    "%u lines a second)",
                    dropped, EV_LOG_MAX);
        second = now;
        lines = 0;
        dropped = 0;
    }
    if (lines >= EV_LOG_MAX) {
        dropped++;
        return;
    }
    lines++;
    /* keys are binary: printable ASCII as is, the rest as \xHH, cut at 128 */
    char key[128 * 4 + 4];
    size_t j = 0;
    const unsigned char *k = ev->key;
    for (size_t i = 0; i < ev->klen && j + 5 < sizeof key; i++) {
        if (i == 128) {
            memcpy(key + j, "...", 3);
            j += 3;
            break;
        }
        if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '\\')
            key[j++] = (char)k[i];
        else
            j += (size_t)snprintf(key + j, sizeof key - j, "\\x%02x", k[i]);
    }
    key[j] = '\0';
    srv_log(PC_LOG_INFO, "event %s: collection %s key %s", pc_event_name(ev->type),
            ev->collection != NULL ? ev->collection : "?", key);
}

static void srv_event_cb(void *ctx, const pc_event *ev)
{
    (void)ctx;
    srv_event_log(ev);
}

/* ---- setup and run-time change ------------------------------------------------------------- */

/* The policy coll gets from cfg: its `eviction` entry, else maxmemory_policy. */
static int coll_policy(const srv_config *cfg, pc_coll *coll, int dflt)
{
    int p;
    return srv_eviction_lookup(cfg->eviction, pc_coll_name(coll), &p) ? p : dflt;
}

int srv_eviction_setup(srv *s, char *err, size_t errlen)
{
    const srv_config *cfg = &s->cfg;
    int dflt, rc;
    char perr[256];
    if (srv_evict_policy(cfg->maxmemory_policy, strlen(cfg->maxmemory_policy), &dflt, perr,
                         sizeof perr) != 0) {
        snprintf(err, errlen, "maxmemory_policy: %s", perr);
        return -1;
    }
    if (srv_eviction_check(cfg->eviction, s->cache, err, errlen) != 0)
        return -1;
    struct name_walk nw = {.cache = s->cache, .err = err, .errlen = errlen};
    nw.key = "event_expired_collections";
    nw.type = PC_EV_EXPIRED;
    if (pc_list_items(cfg->event_expired_collections, name_entry, &nw) != 0)
        return -1;
    nw.key = "event_evicted_collections";
    nw.type = PC_EV_EVICTED;
    if (pc_list_items(cfg->event_evicted_collections, name_entry, &nw) != 0)
        return -1;
    /* the handler is this process's, inherited by the children it forks
     * (the maintenance process installs its own, which calls srv_event_log) */
    pc_event_handler(s->cache, srv_event_cb, NULL);
    if (cfg->event_expired_collections[0] != '\0')
        pc_event_subscribe(s->cache, PC_EV_EXPIRED, 1);
    if (cfg->event_evicted_collections[0] != '\0')
        pc_event_subscribe(s->cache, PC_EV_EVICTED, 1);
    pc_set_maxmemory(s->cache, cfg->maxmemory);
    for (unsigned i = 0; i < pc_coll_count(s->cache); i++) {
        pc_coll *coll = pc_coll_at(s->cache, i);
        int p = coll_policy(cfg, coll, dflt);
        if ((rc = pc_coll_set_eviction(coll, p)) != 0) {
            snprintf(err, errlen, "eviction: collection %s: cannot set %s: %s", pc_coll_name(coll),
                     pc_evict_policy_name(p), pc_store_strerror(rc));
            return -1;
        }
        const char *name = pc_coll_name(coll);
        if (p != PC_EVICT_NONE && cfg->db_url[0] != '\0' &&
            (srv_listed(cfg->persist_collections, name) || srv_listed(cfg->journal, name)))
            srv_log(PC_LOG_WARN,
                    "collection %s is persisted and evicts (%s): an evicted key is gone from its "
                    "snapshots and journal too; eviction = %s=noeviction keeps it whole",
                    name, pc_evict_policy_name(p), name);
    }
    pc_mem_stats m;
    if (cfg->maxmemory > 0 && pc_mem_stats_get(s->cache, &m) == 0 &&
        cfg->maxmemory > (uint64_t)m.plain_bytes + m.hugepage_bytes)
        srv_log(PC_LOG_WARN,
                "maxmemory %llu is above the shared arena (mem_mb + hugepage_mb = %llu bytes): "
                "the arena is the limit",
                (unsigned long long)cfg->maxmemory,
                (unsigned long long)((uint64_t)m.plain_bytes + m.hugepage_bytes));
    return 0;
}

int srv_eviction_set_default(srv *s, int policy, char *err, size_t errlen)
{
    pc_coll *done[PC_MAX_COLLECTIONS];
    int was[PC_MAX_COLLECTIONS];
    unsigned n = 0, ncoll = pc_coll_count(s->cache);
    int rc = 0;
    for (unsigned i = 0; i < ncoll && i < PC_MAX_COLLECTIONS; i++) {
        pc_coll *coll = pc_coll_at(s->cache, i);
        int p;
        if (srv_eviction_lookup(s->cfg.eviction, pc_coll_name(coll), &p))
            continue; /* pinned by `eviction` */
        was[n] = pc_coll_eviction(coll);
        if ((rc = pc_coll_set_eviction(coll, policy)) != 0) {
            snprintf(err, errlen, "collection %s: %s", pc_coll_name(coll), pc_store_strerror(rc));
            break;
        }
        done[n++] = coll;
    }
    if (rc != 0) /* all or none: the ones already changed go back */
        while (n-- > 0)
            (void)pc_coll_set_eviction(done[n], was[n]);
    return rc != 0 ? -1 : 0;
}
