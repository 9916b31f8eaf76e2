/*
 * cache.c - creating the shared cache, the maintenance entry point and the
 * statistics snapshots.
 *
 * Creation lays out the region (region.c), stamps a header with a magic, a
 * layout version and a fingerprint of the shared types' sizes (so a build
 * with a different layout can never mistake the region for its own), and
 * carves each declared collection: its descriptor, its overflow chain
 * heads, its per-process statistics lines and its first bucket segment.
 */
#include "pc_int.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void pc_config_init(pc_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->collections = NULL;
    cfg->mem_mb = 64;
    cfg->hugepage_mb = 0;
    cfg->lock_memory = 1;
    cfg->growth_load_factor = 4;
    cfg->growth_budget = 4096;
    cfg->log.level = PC_LOG_INFO;
}

static uint32_t pc_layout_fingerprint(void)
{
    uint32_t parts[] = {sizeof(struct pc_header_shm),
                        sizeof(struct pc_coll_shm),
                        sizeof(struct pc_bucket_shm),
                        sizeof(struct pc_rec_shm),
                        sizeof(struct pc_chain_shm),
                        sizeof(struct pc_stats_shm),
                        sizeof(struct pc_ovf_node_shm),
                        PC_SLOTS,
                        PC_CHAINS,
                        PC_MAX_PROCS};
    return (uint32_t)pc_key_hash(parts, sizeof parts);
}

static uint64_t pc_coll_meta_bytes(unsigned log2)
{
    uint64_t n0 = 1ull << log2;
    return sizeof(struct pc_coll_shm) + 64 + PC_CHAINS * sizeof(struct pc_chain_shm) +
           (uint64_t)PC_MAX_PROCS * sizeof(struct pc_stats_shm) + 64 +
           n0 * sizeof(struct pc_bucket_shm) + 4096 + n0 * sizeof(uint32_t) + 64;
}

static int pc_coll_create(pc_cache *c, const struct pc_coll_decl *d, unsigned i)
{
    uint64_t off = pc_region_carve(c, sizeof(struct pc_coll_shm), 64);
    uint64_t chains = pc_region_carve(c, PC_CHAINS * sizeof(struct pc_chain_shm), 64);
    uint64_t stats = pc_region_carve(c, PC_MAX_PROCS * sizeof(struct pc_stats_shm), 64);
    if (off == 0 || chains == 0 || stats == 0)
        return PC_ENOMEM;
    struct pc_coll_shm *cs = pc_at(c, off);
    memcpy(cs->name, d->name, sizeof cs->name);
    cs->log2_initial = d->log2;
    cs->index = i;
    cs->chains_off = chains;
    cs->stats_off = stats;
    atomic_store(&cs->route, 0);
    c->hdr->coll_off[i] = off;
    c->coll[i].c = c;
    c->coll[i].shm = cs;
    c->coll[i].idx = i;
    if (pc_coll_carve_segment(&c->coll[i], 0) != 0)
        return PC_ENOMEM;
    return 0;
}

_Static_assert(PC_REGION_MAX_BYTES == PC_MAX_REGION_BYTES, "the public limit is the region's");

/* The bytes of metadata (header, chunk table, allocator state, drain log,
 * collection tables) in front of the records, for ndecl collections. */
static uint64_t pc_meta_bytes(const pc_config *cfg, const struct pc_coll_decl *decl, unsigned ndecl,
                              uint64_t *chunk_cap)
{
    uint64_t region_guess = ((uint64_t)cfg->mem_mb + cfg->hugepage_mb) << 20;
    *chunk_cap = region_guess / 4096 + 1024; /* generous: big classes, churn */
    uint64_t meta = sizeof(struct pc_header_shm) + *chunk_cap * 8 + 8192;
    /* room for the allocator state of the first 64 process slots (procs.c
     * carves one per slot at its first claim) */
    meta += (uint64_t)PC_RESERVED_SLOTS * PC_MAX_CLASSES * sizeof(struct pc_alloc_shm) + 64;
    meta += PC_DRAIN_LOG * sizeof(pc_off) + 64; /* drain.c's log: a full arena still drains */
    for (unsigned i = 0; i < ndecl; i++)
        meta += pc_coll_meta_bytes(decl[i].log2);
    return meta;
}

int pc_cache_region_bytes(const pc_config *cfg, uint64_t *bytes)
{
    if (cfg == NULL || bytes == NULL)
        return PC_EINVAL;
    pc_cache tmp; /* for the parser's log only */
    memset(&tmp, 0, sizeof tmp);
    tmp.log = cfg->log;
    struct pc_coll_decl decl[PC_MAX_COLLECTIONS];
    unsigned ndecl = 0;
    int rc = pc_collections_parse(&tmp, cfg->collections, decl, &ndecl);
    if (rc != 0)
        return rc;
    uint64_t chunk_cap;
    uint64_t meta = pc_meta_bytes(cfg, decl, ndecl, &chunk_cap);
    /* as pc_region_create adds them up */
    const uint64_t page = 4095;
    *bytes = ((uint64_t)cfg->hugepage_mb << 20) + ((((uint64_t)cfg->mem_mb << 20) + page) & ~page) +
             ((meta + page) & ~page);
    return 0;
}

int pc_cache_create(const pc_config *cfg, pc_cache **out)
{
    if (cfg == NULL || out == NULL)
        return PC_EINVAL;
    pc_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return PC_EHEAP;
    c->log = cfg->log;
    c->ev_fn = cfg->event_fn;
    c->ev_ctx = cfg->event_ctx;
    struct pc_coll_decl decl[PC_MAX_COLLECTIONS];
    unsigned ndecl = 0;
    int rc = pc_collections_parse(c, cfg->collections, decl, &ndecl);
    if (rc != 0)
        goto fail;
    if (ndecl == 0) {
        pc_log(c, PC_LOG_ERR, "pcache: the collections list declares nothing");
        rc = PC_ECONFIG;
        goto fail;
    }
    uint64_t chunk_cap;
    uint64_t meta = pc_meta_bytes(cfg, decl, ndecl, &chunk_cap);
    if ((rc = pc_region_create(c, cfg, (size_t)meta)) != 0)
        goto fail;
    struct pc_header_shm *h = c->hdr;
    h->magic = PC_MAGIC;
    h->layout_version = PC_LAYOUT_VERSION;
    h->layout_fingerprint = pc_layout_fingerprint();
    h->growth_load_factor = cfg->growth_load_factor;
    h->growth_budget = cfg->growth_budget;
    pc_arena_classes_init(h->class_size, &h->nclasses);
    memcpy(c->class_size, h->class_size, sizeof c->class_size);
    c->nclasses = h->nclasses;
    h->chunk_tab_cap = chunk_cap;
    h->chunk_tab_off = pc_region_carve(c, chunk_cap * 8, 64);
    h->alloc_reserve_off = pc_region_carve(
        c, (uint64_t)PC_RESERVED_SLOTS * PC_MAX_CLASSES * sizeof(struct pc_alloc_shm), 64);
    h->drain_log_off = pc_region_carve(c, PC_DRAIN_LOG * sizeof(pc_off), 64);
    if (h->chunk_tab_off == 0 || h->alloc_reserve_off == 0 || h->drain_log_off == 0) {
        rc = PC_ENOMEM;
        goto fail;
    }
    for (unsigned i = 0; i < ndecl; i++) {
        if ((rc = pc_coll_create(c, &decl[i], i)) != 0) {
            pc_log(c, PC_LOG_ERR, "pcache: no room for collection '%s' (2^%u buckets)",
                   decl[i].name, decl[i].log2);
            goto fail;
        }
    }
    h->ncoll = ndecl;
    c->ncoll = ndecl;
    pc_procs_init(h);
    c->epoch = atomic_load(&pc_fork_epoch);
    atomic_store(&h->ev_mask, cfg->event_mask & ((1u << PC_EV_COUNT) - 1));
    h->requested_huge_mb = cfg->hugepage_mb;
    if (cfg->hugepage_mb > 0 && h->tier != PC_TIER_HUGETLB &&
        pc_event_wanted(c, PC_EV_MEM_DEGRADED)) {
        long over = -1;
        FILE *f = fopen("/proc/sys/vm/nr_overcommit_hugepages", "r");
        if (f != NULL) {
            if (fscanf(f, "%ld", &over) != 1)
                over = -1;
            fclose(f);
        }
        pc_event ev = {.type = PC_EV_MEM_DEGRADED,
                       .requested_mb = cfg->hugepage_mb,
                       .tier = h->tier,
                       .backing = pc_tier_name(h->tier),
                       .overcommit_pages = over < 0 ? 0 : (uint64_t)over};
        pc_event_raise_slow(c, &ev);
    }
    *out = c;
    return 0;
fail:
    pc_region_destroy(c);
    free(c);
    return rc;
}

void pc_cache_destroy(pc_cache *c)
{
    if (c == NULL)
        return;
    pc_region_destroy(c);
    free(c->snap);
    free(c);
}

void pc_after_fork_child(pc_cache *c)
{
    if (c != NULL)
        c->epoch = 0; /* the next operation re-initialises local state */
}

static uint64_t pc_overflow_count(pc_coll *coll)
{
    return pc_stats_pair(coll, offsetof(struct pc_stats_shm, ovf_in),
                         offsetof(struct pc_stats_shm, ovf_out));
}

/* Grows one collection by at most budget splits, toward its entries plus
 * extra, and raises grown. */
static unsigned pc_grow_coll(pc_cache *c, pc_coll *coll, uint64_t extra, unsigned budget)
{
    uint64_t before = pc_route_buckets(pc_route_load(coll->shm), coll->shm->log2_initial);
    unsigned s = pc_grow(coll, extra, budget);
    if (s > 0 && pc_event_wanted(c, PC_EV_GROWN)) {
        pc_event ev = {.type = PC_EV_GROWN,
                       .collection = coll->shm->name,
                       .prev_buckets = before,
                       .buckets = before + s,
                       .splits = s,
                       .entries = pc_coll_entries(coll)};
        pc_event_raise_slow(c, &ev);
    }
    PC_STAT_ADD(coll, splits_done, s);
    return s;
}

/* Enters maintenance: this process's handle checked, then the cache's
 * maintenance lock, the outer lock of every pass. 0, an engine code, or
 * PC_EBUSY when another process holds it. */
static int pc_maint_enter(pc_cache *c)
{
    int rc = pc_enter(c);
    if (rc != 0)
        return rc;
    PC_ASSERT(c, I7, pc_dbg_bucket_locks + pc_dbg_chain_locks == 0); /* it is the outer lock */
    if (pc_trylock_word(c, &c->hdr->maint_lock) != 0)
        return PC_EBUSY;
    return 0;
}

int pc_maintain(pc_cache *c, unsigned what, pc_maint_report *report)
{
    if (c == NULL)
        return PC_EINVAL;
    int rc = pc_maint_enter(c);
    if (rc != 0)
        return rc;
    pc_maint_report r = {0};
    if (what & PC_MAINT_GROW) {
        /* The split budget is per call, shared fairly: every collection
         * first gets an equal share, then what is left goes round again,
         * so one collection catching up never starves another. */
        unsigned budget = c->hdr->growth_budget;
        unsigned share = c->ncoll > 0 ? budget / c->ncoll : budget;
        if (share == 0)
            share = 1;
        for (int pass = 0; pass < 2 && budget > 0; pass++) {
            for (unsigned i = 0; i < c->ncoll && budget > 0; i++) {
                unsigned s = pc_grow_coll(c, &c->coll[i], 0, pass == 0 ? share : budget);
                if (s > budget)
                    s = budget;
                r.splits += s;
                budget -= s;
            }
        }
        for (unsigned i = 0; i < c->ncoll; i++)
            if (pc_overflow_count(&c->coll[i]) > 0)
                r.drained += pc_overflow_drain(&c->coll[i], c->hdr->growth_budget);
    }
    if (what & PC_MAINT_SWEEP)
        for (unsigned i = 0; i < c->ncoll; i++)
            r.reaped += pc_sweep(&c->coll[i], &r.buckets_probed);
    if (what & PC_MAINT_EVICT)
        r.evicted = (unsigned)pc_evict_ahead(c);
    if (what & PC_MAINT_REAP) {
        int64_t now = pc_mono_ms();
        if (now >= c->reap_next_ms) {
            c->reap_next_ms = now + 1000; /* a look costs a /proc read per slot */
            r.procs_reaped = pc_procs_reap(c);
        }
    }
    pc_unlock_word(&c->hdr->maint_lock);
    if (report != NULL)
        *report = r;
    return 0;
}

int pc_coll_reserve(pc_coll *coll, uint64_t entries)
{
    if (coll == NULL)
        return PC_EINVAL;
    pc_cache *c = coll->c;
    int rc = pc_maint_enter(c);
    if (rc != 0)
        return rc;
    /* at most a quarter of the region in buckets, whatever entries says
     * (it comes from a file): the records must still fit */
    uint64_t cap = c->region_bytes / 4 / sizeof(struct pc_bucket_shm) * c->hdr->growth_load_factor;
    if (entries > cap)
        entries = cap;
    /* no budget: a reserve made before a load splits buckets that are
     * still nearly empty, and stops at PC_LOG2_MAX (pc_split_one fails) */
    unsigned s = pc_grow_coll(c, coll, entries, UINT_MAX);
    pc_unlock_word(&c->hdr->maint_lock);
    return s > INT_MAX ? INT_MAX : (int)s;
}

/* The cumulative counters, in the order of pc_coll_shm.base[]. */
enum {
    PC_B_HITS,
    PC_B_MISSES,
    PC_B_STORES,
    PC_B_REMOVES,
    PC_B_EXPIRED,
    PC_B_DESTROYED,
    PC_B_READS,
    PC_B_RETRIES,
    PC_B_FALLBACKS,
    PC_B_NOMEM,
    PC_B_EVICTED,
    PC_B_COUNT
};

static void pc_sum_counters(pc_coll *coll, uint64_t *sum, uint64_t *ins, uint64_t *del,
                            uint64_t *oin, uint64_t *oout)
{
    const struct pc_stats_shm *s = pc_at(coll->c, coll->shm->stats_off);
    uint32_t hwm = atomic_load(&coll->c->hdr->proc_hwm);
    memset(sum, 0, PC_B_COUNT * sizeof *sum);
    *ins = *del = *oin = *oout = 0;
#define PC_SUM(f) atomic_load_explicit(&s[i].f, memory_order_relaxed)
    for (uint32_t i = 0; i <= hwm && i < PC_MAX_PROCS; i++) {
        sum[PC_B_HITS] += PC_SUM(hits);
        sum[PC_B_MISSES] += PC_SUM(misses);
        sum[PC_B_STORES] += PC_SUM(stores);
        sum[PC_B_REMOVES] += PC_SUM(removes);
        sum[PC_B_EXPIRED] += PC_SUM(expired);
        sum[PC_B_DESTROYED] += PC_SUM(destroyed);
        sum[PC_B_READS] += PC_SUM(reads);
        sum[PC_B_RETRIES] += PC_SUM(retries);
        sum[PC_B_FALLBACKS] += PC_SUM(fallbacks);
        sum[PC_B_NOMEM] += PC_SUM(nomem);
        sum[PC_B_EVICTED] += PC_SUM(evicted);
        *ins += PC_SUM(inserted);
        *del += PC_SUM(deleted);
        *oin += PC_SUM(ovf_in);
        *oout += PC_SUM(ovf_out);
    }
#undef PC_SUM
}

_Static_assert(PC_B_COUNT <= sizeof(((struct pc_coll_shm *)0)->base) / sizeof(uint64_t),
               "baseline holds every counter");

int pc_stats_reset(pc_coll *coll)
{
    if (coll == NULL)
        return PC_EINVAL;
    int rc = pc_enter(coll->c);
    if (rc != 0)
        return rc;
    uint64_t sum[PC_B_COUNT], ins, del, oin, oout;
    pc_sum_counters(coll, sum, &ins, &del, &oin, &oout);
    struct pc_coll_shm *cs = coll->shm;
    pc_lock_word(coll->c, &cs->base_lock);
    memcpy(cs->base, sum, sizeof sum);
    cs->base_reset_at = (int64_t)time(NULL);
    pc_unlock_word(&cs->base_lock);
    return 0;
}

static int pc_coll_stats_read(pc_coll *coll, pc_coll_stats *out, bool since_reset)
{
    if (coll == NULL || out == NULL)
        return PC_EINVAL;
    int rc = pc_enter(coll->c);
    if (rc != 0)
        return rc;
    uint64_t sum[PC_B_COUNT], base[PC_B_COUNT], ins, del, oin, oout;
    pc_sum_counters(coll, sum, &ins, &del, &oin, &oout);
    struct pc_coll_shm *cs = coll->shm;
    pc_lock_word(coll->c, &cs->base_lock);
    memcpy(base, cs->base, sizeof base);
    int64_t reset_at = cs->base_reset_at;
    pc_unlock_word(&cs->base_lock);
    for (unsigned i = 0; since_reset && i < PC_B_COUNT; i++) /* counters only grow; guard skew */
        sum[i] = sum[i] >= base[i] ? sum[i] - base[i] : 0;
    pc_coll_stats st;
    memset(&st, 0, sizeof st);
    st.hits = sum[PC_B_HITS];
    st.misses = sum[PC_B_MISSES];
    st.stores = sum[PC_B_STORES];
    st.removes = sum[PC_B_REMOVES];
    st.expired = sum[PC_B_EXPIRED];
    st.destroyed = sum[PC_B_DESTROYED];
    st.reads = sum[PC_B_READS];
    st.seqlock_retries = sum[PC_B_RETRIES];
    st.lock_fallbacks = sum[PC_B_FALLBACKS];
    st.nomem = sum[PC_B_NOMEM];
    st.evicted = sum[PC_B_EVICTED];
    st.entries = ins >= del ? ins - del : 0;
    st.overflow = oin >= oout ? oin - oout : 0;
    st.buckets = pc_route_buckets(pc_route_load(cs), cs->log2_initial);
    st.splits = atomic_load(&cs->splits);
    st.log2_initial = cs->log2_initial;
    st.reset_at = reset_at;
    *out = st;
    return 0;
}

int pc_coll_stats_get(pc_coll *coll, pc_coll_stats *out)
{
    return pc_coll_stats_read(coll, out, true);
}

int pc_coll_stats_total(pc_coll *coll, pc_coll_stats *out)
{
    return pc_coll_stats_read(coll, out, false);
}

int pc_mem_stats_get(pc_cache *c, pc_mem_stats *out)
{
    if (c == NULL || out == NULL)
        return PC_EINVAL;
    pc_mem_stats m;
    pc_mem_snapshot(c, &m);
    for (unsigned i = 0; i < c->ncoll; i++) {
        uint64_t sum[PC_B_COUNT], ins, del, oin, oout;
        pc_sum_counters(&c->coll[i], sum, &ins, &del, &oin, &oout);
        m.evicted += sum[PC_B_EVICTED];
    }
    *out = m;
    return 0;
}
