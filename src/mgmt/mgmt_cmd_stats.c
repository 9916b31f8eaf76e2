/*
 * mgmt_cmd_stats.c - perf_stats and perf_stats_reset.
 *
 * perf_stats reports the cache-wide memory facts once (the arena is shared
 * by every collection, so arena bytes and chunks, the memory tier and its
 * backing are not per collection) and then one object per listed
 * collection: the engine's gauges (entries, buckets, load factor, overflow)
 * and counters since the last reset (hits .. nomem), the hit rate with the
 * engine's note that follows the measured value, and the seqlock retries
 * per thousand reads. A host's stats hook (the storage layer's last save /
 * load / sync) appends members to each collection's object. Every snapshot
 * is taken before the first builder call, so an engine error produces no
 * partial result.
 *
 * perf_stats_reset records a baseline; the counters are never rewound and
 * the gauges are unaffected (pc_stats_reset).
 */
#include "mgmt_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rounds a ratio to 4 decimals so replies stay short and stable. */
static double pc_round4(double x)
{
    return round(x * 10000.0) / 10000.0;
}

static int pc_stats_memory(pc_cache *c, const pc_result_ops *o, void *r, const pc_mem_stats *ms)
{
    TRY(o->i64(r, "memory_tier", ms->tier));
    const char *b = pc_tier_name(ms->tier);
    TRY(o->str(r, "memory_backing", b, strlen(b)));
    TRY(o->boolean(r, "memory_pinned", ms->pinned));
    TRY(o->u64(r, "arena_bytes", ms->chunk_bytes));
    TRY(o->u64(r, "arena_chunks", ms->chunks));
    TRY(o->u64(r, "table_bytes", ms->table_bytes));
    TRY(o->u64(r, "hugepage_bytes", ms->hugepage_bytes));
    TRY(o->u64(r, "hugepage_free", ms->hugepage_free));
    TRY(o->u64(r, "plain_bytes", ms->plain_bytes));
    TRY(o->u64(r, "plain_free", ms->plain_free));
    TRY(o->u64(r, "used_cell_bytes", ms->used_cell_bytes));
    TRY(o->u64(r, "free_cell_bytes", ms->free_cell_bytes));
    uint64_t carved = ms->used_cell_bytes + ms->free_cell_bytes;
    TRY(o->dbl(r, "fragmentation",
               ms->used_cell_bytes ? pc_round4((double)carved / (double)ms->used_cell_bytes)
                                   : 1.0));
    TRY(o->u64(r, "alloc_refused", ms->starved));
    TRY(o->u64(r, "maxmemory", ms->maxmemory));
    TRY(o->u64(r, "evicted", ms->evicted));
    pc_mem_class cl[96];
    unsigned n = 0;
    TRY(pc_mem_classes(c, cl, 96, &n));
    TRY(o->arr_begin(r, "mem_classes"));
    for (unsigned i = 0; i < n; i++) {
        TRY(o->obj_begin(r, NULL));
        TRY(o->u64(r, "cell_bytes", cl[i].cell_bytes));
        TRY(o->u64(r, "chunks", cl[i].chunks));
        TRY(o->u64(r, "cells", cl[i].cells));
        TRY(o->u64(r, "free_cells", cl[i].free_cells));
        TRY(o->u64(r, "starved", cl[i].starved));
        TRY(o->obj_end(r));
    }
    TRY(o->arr_end(r));
    return 0;
}

static int pc_stats_coll(const pc_mgmt *m, pc_coll *coll, const pc_coll_stats *st,
                         const pc_result_ops *o, void *r)
{
    const char *name = pc_coll_name(coll);
    double rate = -1;
    const char *note = pc_hit_rate_note(st, &rate);
    TRY(o->obj_begin(r, NULL));
    TRY(o->str(r, "collection", name, strlen(name)));
    TRY(o->u64(r, "entries", st->entries));
    TRY(o->u64(r, "buckets", st->buckets));
    TRY(o->dbl(r, "load_factor",
               st->buckets ? pc_round4((double)st->entries / (double)st->buckets) : 0.0));
    TRY(o->u64(r, "overflow", st->overflow));
    TRY(o->u64(r, "hits", st->hits));
    TRY(o->u64(r, "misses", st->misses));
    TRY(o->u64(r, "stores", st->stores));
    TRY(o->u64(r, "removes", st->removes));
    TRY(o->u64(r, "expired", st->expired));
    TRY(o->u64(r, "destroyed", st->destroyed));
    if (rate < 0)
        TRY(o->null(r, "hit_rate"));
    else
        TRY(o->dbl(r, "hit_rate", pc_round4(rate)));
    TRY(o->str(r, "hit_rate_note", note, strlen(note)));
    TRY(o->u64(r, "reads", st->reads));
    TRY(o->u64(r, "seqlock_retries", st->seqlock_retries));
    TRY(o->dbl(r, "seqlock_retries_per_1k_reads",
               st->reads ? pc_round4((double)st->seqlock_retries * 1000.0 / (double)st->reads)
                         : 0.0));
    TRY(o->u64(r, "lock_fallbacks", st->lock_fallbacks));
    TRY(o->u64(r, "nomem", st->nomem));
    TRY(o->u64(r, "splits", st->splits));
    TRY(o->u64(r, "evicted", st->evicted));
    const char *policy = pc_evict_policy_name(pc_coll_eviction(coll));
    TRY(o->str(r, "eviction", policy, strlen(policy)));
    TRY(o->u64(r, "log2_initial", st->log2_initial));
    TRY(o->i64(r, "reset_at", st->reset_at));
    if (m->stats_fn != NULL)
        TRY(m->stats_fn(m->stats_ctx, coll, o, r));
    return o->obj_end(r);
}

int pc_mgmt_perf_stats(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                       pc_mgmt_err *err)
{
    (void)ctx;
    const pc_mgmt *m = pc_mgmt_call_mgmt(call);
    pc_coll *one = pc_mgmt_call_coll(call, 0);
    unsigned n = one != NULL ? 1 : pc_coll_count(m->c);
    pc_coll *colls[PC_MAX_COLLECTIONS];
    pc_coll_stats st[PC_MAX_COLLECTIONS];
    pc_mem_stats ms;
    int rc = pc_mem_stats_get(m->c, &ms);
    if (rc != 0)
        return pc_mgmt_errorf(err, rc, "perf_stats: reading the memory statistics: %s",
                              pc_strerror(rc));
    for (unsigned i = 0; i < n && i < PC_MAX_COLLECTIONS; i++) {
        colls[i] = one != NULL ? one : pc_coll_at(m->c, i);
        rc = pc_coll_stats_get(colls[i], &st[i]);
        if (rc != 0)
            return pc_mgmt_errorf(err, rc, "perf_stats: collection \"%s\": %s",
                                  pc_coll_name(colls[i]), pc_strerror(rc));
    }
    TRY(o->obj_begin(r, NULL));
    TRY(pc_stats_memory(m->c, o, r, &ms));
    TRY(o->arr_begin(r, "collections"));
    for (unsigned i = 0; i < n && i < PC_MAX_COLLECTIONS; i++)
        TRY(pc_stats_coll(m, colls[i], &st[i], o, r));
    TRY(o->arr_end(r));
    return o->obj_end(r);
}

int pc_mgmt_perf_stats_reset(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                             pc_mgmt_err *err)
{
    (void)ctx;
    const pc_mgmt *m = pc_mgmt_call_mgmt(call);
    pc_coll *one = pc_mgmt_call_coll(call, 0);
    unsigned n = one != NULL ? 1 : pc_coll_count(m->c);
    for (unsigned i = 0; i < n; i++) {
        pc_coll *coll = one != NULL ? one : pc_coll_at(m->c, i);
        int rc = pc_stats_reset(coll);
        if (rc != 0)
            return pc_mgmt_errorf(err, rc, "perf_stats_reset: collection \"%s\": %s",
                                  pc_coll_name(coll), pc_strerror(rc));
    }
    TRY(o->obj_begin(r, NULL));
    TRY(o->u64(r, "reset", n));
    TRY(o->arr_begin(r, "collections"));
    for (unsigned i = 0; i < n; i++) {
        const char *name = pc_coll_name(one != NULL ? one : pc_coll_at(m->c, i));
        TRY(o->str(r, NULL, name, strlen(name)));
    }
    TRY(o->arr_end(r));
    return o->obj_end(r);
}
