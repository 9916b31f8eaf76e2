/*
 * bench_engine.c - `pcache-bench engine`: the engine against the
 * cachedb_local model at its shipped default (512 buckets) and tuned (65536),
 * plus the pointer-chase floor, in one run.
 *
 * For each data set (50k, then 1M resident entries) the parent builds the
 * engine cache and both cachedb_local tables, loads the same keys into each,
 * forks a pool of two workers, and runs every (mix, process count) case
 * `runs` times, the four systems interleaved within each round so drift
 * hits them alike; a case's figure is the median of its runs. The chase runs
 * last, over the engine's measured 1M footprint, with nothing else running.
 * Reporting lives in bench_engine_report.c.
 */
#include "bench_cmds.h"
#include "bench_chase.h"
#include "bench_engine.h"
#include "bench_local.h"
#include "bench_pool.h"
#include "bench_util.h"

#include "pcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const struct be_sys_info be_sys[BE_NSYS] = {
    {"engine_get", "pcache get"},
    {"engine_getbuf", "pcache get_buf"},
    {"local65536", "local-65536"},
    {"local512", "local-512"},
};
const struct be_mix_info be_mix[BE_NMIX] = {
    {"get100", "100% get", 0},
    {"get95", "95/5", 3277}, /* 3277 / 65536 = 5.0% */
    {"get50", "50/50", 32768},
    {"set100", "100% set", 65536},
};
const struct be_size_info be_size[BE_NSIZE] = {
    {"50k", "50k entries", 50000},
    {"1m", "1M entries", 1000000},
};

struct be_opts {
    int quick, json, runs;
    unsigned run_ms, warm_ms;
    uint64_t chase_loads;
    /* --profile SYSTEM:MIX:SIZE: that one cell with 1 process, nothing else,
     * so a profiler attached to the run sees one system's code alone */
    int prof_sys, prof_mix, prof_size; /* -1: a full run */
};

/* "SYSTEM:MIX:SIZE" (keys of be_sys, be_mix, be_size) into o's prof_*. */
static int parse_profile(const char *arg, struct be_opts *o)
{
    char sys[32], mix[32], size[32];

    if (sscanf(arg, "%31[^:]:%31[^:]:%31s", sys, mix, size) != 3)
        return -1;
    for (int i = 0; i < BE_NSYS; i++)
        if (strcmp(be_sys[i].key, sys) == 0)
            o->prof_sys = i;
    for (int i = 0; i < BE_NMIX; i++)
        if (strcmp(be_mix[i].key, mix) == 0)
            o->prof_mix = i;
    for (int i = 0; i < BE_NSIZE; i++)
        if (strcmp(be_size[i].key, size) == 0)
            o->prof_size = i;
    return o->prof_sys < 0 || o->prof_mix < 0 || o->prof_size < 0 ? -1 : 0;
}

/* ---- the engine as a pool target --------------------------------------- */

struct eng_ctx {
    pc_cache *cache;
    pc_coll *coll;
    size_t vlen; /* every resident value has this length */
};

static int eng_result(int rc)
{
    return rc == 0 ? 0 : rc == PC_ENOTFOUND ? 1 : -1;
}

/* pc_get: a malloc'd copy per hit, freed here - the cachedb get() contract. */
static int eng_get(void *ctx, const char *key, size_t klen, uint64_t *sink)
{
    struct eng_ctx *e = ctx;
    void *v;
    size_t vlen;
    int rc = pc_get(e->coll, key, klen, &v, &vlen, NULL);

    if (rc != 0)
        return eng_result(rc);
    *sink += ((unsigned char *)v)[vlen - 1];
    free(v);
    return vlen == e->vlen ? 0 : -1;
}

/* pc_get_buf: into a buffer on the caller's stack, no allocation. */
static int eng_get_buf(void *ctx, const char *key, size_t klen, uint64_t *sink)
{
    struct eng_ctx *e = ctx;
    unsigned char buf[256];
    size_t vlen, needed;
    int rc = pc_get_buf(e->coll, key, klen, buf, sizeof buf, &vlen, &needed, NULL);

    if (rc != 0)
        return eng_result(rc);
    *sink += buf[vlen - 1];
    return vlen == e->vlen ? 0 : -1;
}

static int eng_set(void *ctx, const char *key, size_t klen, const void *val, size_t vlen)
{
    struct eng_ctx *e = ctx;

    return pc_set(e->coll, key, klen, val, vlen, 0, 0) == 0 ? 0 : -1;
}

/* Reads every key once: faults the buckets and records into the worker's
 * page tables and checks, from a forked process, that all keys are there. */
static uint64_t eng_prefault(void *ctx, const bench_keys *keys)
{
    uint64_t miss = 0, sink = 0;

    for (size_t i = 0; i < keys->n; i++)
        miss += eng_get_buf(ctx, bench_key(keys, i), keys->klen, &sink) != 0;
    __asm__ volatile("" : : "r"(sink));
    return miss;
}

static void eng_child_exit(void *ctx)
{
    pc_cache_destroy(((struct eng_ctx *)ctx)->cache);
}

static void eng_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "pcache[%s]: %s\n", level == PC_LOG_ERR ? "err" : "warn", msg);
}

/* ---- building one data set --------------------------------------------- */

static int eng_build(struct eng_ctx *e, const bench_keys *keys, struct be_engine_info *info)
{
    pc_config cfg;
    pc_maint_report rep;
    pc_mem_stats ms;
    pc_coll_stats cs;
    char val[BE_VALUE_LEN];
    uint64_t t0;
    int rc;

    pc_config_init(&cfg);
    cfg.collections = getenv("PCACHE_BENCH_COLL") ? getenv("PCACHE_BENCH_COLL") : "bench=16";
    cfg.mem_mb = 1024;
    /* Exploration knobs (docs/benchmarks.md, "engine"); the recorded figures
     * use neither: a huge-page reservation in front of the region, and a
     * maintenance tick every N inserts of the load, as a host's timer would. */
    if (getenv("PCACHE_BENCH_HUGEPAGE_MB") != NULL)
        cfg.hugepage_mb = (size_t)strtoull(getenv("PCACHE_BENCH_HUGEPAGE_MB"), NULL, 10);
    size_t tick = getenv("PCACHE_BENCH_LOAD_TICK") != NULL
                      ? (size_t)strtoull(getenv("PCACHE_BENCH_LOAD_TICK"), NULL, 10)
                      : 0;
    cfg.log.fn = eng_log;
    cfg.log.level = PC_LOG_WARN;
    rc = pc_cache_create(&cfg, &e->cache);
    if (rc == 0)
        rc = pc_coll_find(e->cache, "bench", 5, &e->coll);
    if (rc != 0) {
        fprintf(stderr, "pcache-bench: engine: %s\n", pc_strerror(rc));
        return -1;
    }
    e->vlen = BE_VALUE_LEN;
    bench_fill_value(val, sizeof val, 0);
    t0 = bench_now_ns();
    for (size_t i = 0; i < keys->n; i++) {
        memcpy(val, &i, sizeof i); /* distinct values, cheap to make */
        rc = pc_set(e->coll, bench_key(keys, i), keys->klen, val, sizeof val, 0, 0);
        /* Should the initial table fill up, run a maintenance tick as the
         * host's timer would, and retry; the count is reported. */
        while (rc == PC_ENOMEM && pc_maintain(e->cache, PC_MAINT_GROW, &rep) == 0 &&
               (rep.splits || rep.drained)) {
            info->load_retries++;
            rc = pc_set(e->coll, bench_key(keys, i), keys->klen, val, sizeof val, 0, 0);
        }
        if (rc != 0) {
            fprintf(stderr, "pcache-bench: engine load, key %zu: %s\n", i, pc_strerror(rc));
            return -1;
        }
        if (tick != 0 && (i + 1) % tick == 0 && pc_maintain(e->cache, PC_MAINT_GROW, &rep) != 0) {
            fprintf(stderr, "pcache-bench: pc_maintain during the load failed\n");
            return -1;
        }
    }
    info->load_ns_per_entry = (double)(bench_now_ns() - t0) / (double)keys->n;
    pc_coll_stats_get(e->coll, &cs);
    info->buckets_initial = cs.buckets;
    /* Let the table grow toward its load factor: ticks until splits stop. */
    do {
        rc = pc_maintain(e->cache, PC_MAINT_GROW, &rep);
        if (rc != 0) {
            fprintf(stderr, "pcache-bench: pc_maintain: %s\n", pc_strerror(rc));
            return -1;
        }
        info->grow_calls++;
        info->splits += rep.splits;
    } while ((rep.splits || rep.drained) && info->grow_calls < 100000);
    pc_coll_stats_get(e->coll, &cs);
    pc_mem_stats_get(e->cache, &ms);
    info->tier = ms.tier;
    info->buckets = cs.buckets;
    info->overflow = cs.overflow;
    info->entries = cs.entries;
    info->chunk_bytes = ms.chunk_bytes;
    info->table_bytes = ms.table_bytes;
    if (cs.entries != keys->n)
        fprintf(stderr, "pcache-bench: WARNING engine holds %llu entries, loaded %zu\n",
                (unsigned long long)cs.entries, keys->n);
    return 0;
}

static int local_build(bench_local **out, unsigned buckets, const bench_keys *keys)
{
    /* entry header + key + value, rounded to 8, plus the fragment header */
    size_t per = ((56 + BE_KEY_LEN + BE_VALUE_LEN + 7) & ~(size_t)7) + 24;
    char val[BE_VALUE_LEN];

    if (bench_local_create(out, buckets, keys->n * per + (64u << 20)) != 0) {
        perror("pcache-bench: local model");
        return -1;
    }
    bench_fill_value(val, sizeof val, 0);
    for (size_t i = 0; i < keys->n; i++) {
        memcpy(val, &i, sizeof i);
        if (bench_local_load(*out, bench_key(keys, i), keys->klen, val, sizeof val) != 0) {
            fprintf(stderr, "pcache-bench: local model arena full\n");
            return -1;
        }
    }
    return 0;
}

/* ---- running one data set ----------------------------------------------- */

static int run_cases(bench_pool *pool, const struct be_opts *o, int size, struct be_results *r)
{
    double mops[BE_NSYS][BE_MAX_RUNS], ns[BE_NSYS][BE_MAX_RUNS];

    for (int m = 0; m < BE_NMIX; m++) {
        if (o->prof_mix >= 0 && m != o->prof_mix)
            continue;
        for (int p = 0; p < (o->prof_mix >= 0 ? 1 : BE_NPROCS); p++) {
            for (int run = 0; run < o->runs; run++) {
                for (int s = 0; s < BE_NSYS; s++) {
                    if (o->prof_sys >= 0 && s != o->prof_sys)
                        continue;
                    bench_job job = {
                        .target = s,
                        .nprocs = p + 1,
                        .set_per_64k = be_mix[m].set_per_64k,
                        .duration_ns = (uint64_t)o->run_ms * 1000000u,
                        .warmup_ns = (uint64_t)o->warm_ms * 1000000u,
                        /* the same key stream for every system in a round */
                        .seed = bench_mix64(((uint64_t)size << 24) | ((uint64_t)m << 16) |
                                            ((uint64_t)p << 8) | (uint64_t)run),
                    };
                    bench_result res;
                    struct be_cell *c = &r->cell[size][m][p][s];

                    if (bench_pool_run(pool, &job, &res) != 0)
                        return -1;
                    mops[s][run] = c->run_mops[run] = res.mops;
                    ns[s][run] = c->run_ns[run] = res.ns_per_op;
                    c->nruns = run + 1;
                    c->misses += res.misses;
                    c->errors += res.errors;
                }
            }
            for (int s = 0; s < BE_NSYS; s++) {
                struct be_cell *c = &r->cell[size][m][p][s];

                if (o->prof_sys >= 0 && s != o->prof_sys)
                    continue;
                c->mops = bench_median(mops[s], (size_t)o->runs);
                c->ns = bench_median(ns[s], (size_t)o->runs);
            }
            fprintf(stderr,
                    "  %-8s %dp: engine %.0f ns, get_buf %.0f ns, local-65536 %.0f ns, "
                    "local-512 %.0f ns\n",
                    be_mix[m].label, p + 1, r->cell[size][m][p][0].ns, r->cell[size][m][p][1].ns,
                    r->cell[size][m][p][2].ns, r->cell[size][m][p][3].ns);
        }
    }
    return 0;
}

static int run_size(const bench_keys *all, const struct be_opts *o, int size, struct be_results *r)
{
    bench_keys keys = {.buf = all->buf, .n = be_size[size].entries, .klen = all->klen};
    struct be_engine_info *info = &r->eng[size];
    struct eng_ctx eng = {0};
    bench_local *tuned = NULL, *dflt = NULL;
    bench_pool *pool = NULL;
    bench_target targets[BE_NSYS];
    pc_coll_stats cs;
    pc_mem_stats ms;
    int rc = -1;

    fprintf(stderr, "pcache-bench: %s: loading\n", be_size[size].label);
    if (eng_build(&eng, &keys, info) != 0 ||
        local_build(&tuned, BE_LOCAL_TUNED_BUCKETS, &keys) != 0 ||
        local_build(&dflt, BE_LOCAL_DEFAULT_BUCKETS, &keys) != 0)
        goto out;
    info->local_bytes[0] = bench_local_used_bytes(tuned);
    info->local_bytes[1] = bench_local_used_bytes(dflt);

    targets[BE_ENGINE_GET] =
        (bench_target){.name = "engine_get", .ctx = &eng, .get = eng_get, .set = eng_set};
    targets[BE_ENGINE_GETBUF] = (bench_target){.name = "engine_getbuf",
                                               .ctx = &eng,
                                               .get = eng_get_buf,
                                               .set = eng_set,
                                               .prefault = eng_prefault,
                                               .child_exit = eng_child_exit};
    targets[BE_LOCAL_TUNED] = bench_local_target(tuned, "local65536");
    targets[BE_LOCAL_DEFAULT] = bench_local_target(dflt, "local512");
    if (bench_pool_start(&pool, BE_NPROCS, targets, BE_NSYS, &keys, BE_VALUE_LEN,
                         &info->prefault_misses) != 0)
        goto out;
    if (info->prefault_misses)
        fprintf(stderr, "pcache-bench: WARNING a forked worker missed %llu resident keys\n",
                (unsigned long long)info->prefault_misses);
    fprintf(stderr, "pcache-bench: %s: measuring\n", be_size[size].label);
    if (run_cases(pool, o, size, r) != 0)
        goto out;
    if (size == BE_1M && o->prof_sys < 0 &&
        be_measure_mgmt(pool, eng.cache, eng.coll, BE_ENGINE_GETBUF, o->runs, o->run_ms,
                        be_size[size].entries, r) != 0)
        goto out;
    if (bench_pool_stop(pool) != 0) {
        pool = NULL;
        fprintf(stderr, "pcache-bench: a worker exited abnormally\n");
        goto out;
    }
    pool = NULL;
    pc_coll_stats_get(eng.coll, &cs);
    pc_mem_stats_get(eng.cache, &ms);
    info->seqlock_retries = cs.seqlock_retries;
    info->lock_fallbacks = cs.lock_fallbacks;
    info->reads = cs.reads;
    info->nomem = cs.nomem;
    info->chunk_bytes_after = ms.chunk_bytes;
    rc = 0;
out:
    bench_pool_stop(pool);
    bench_local_destroy(dflt);
    bench_local_destroy(tuned);
    pc_cache_destroy(eng.cache);
    return rc;
}

static int run_chase(const struct be_opts *o, struct be_results *r)
{
    const struct be_engine_info *info = &r->eng[BE_1M];
    size_t bytes = (size_t)(info->chunk_bytes + info->table_bytes);
    bench_chase *ch;
    double v[16];

    if (bytes < (64u << 20))
        bytes = (size_t)be_size[BE_1M].entries * 256; /* engine reported nothing usable */
    fprintf(stderr, "pcache-bench: pointer chase over %.1f MiB\n", (double)bytes / 1048576.0);
    if (bench_chase_create(&ch, bytes, 0xc4a5e) != 0) {
        fprintf(stderr, "pcache-bench: chase: cannot map %zu bytes\n", bytes);
        return -1;
    }
    for (int i = 0; i < o->runs; i++)
        v[i] = bench_chase_run(ch, o->chase_loads);
    r->chase_ns = bench_median(v, (size_t)o->runs);
    r->chase_bytes = bench_chase_bytes(ch);
    bench_chase_destroy(ch);
    return 0;
}

static int parse_opts(int argc, char **argv, struct be_opts *o)
{
    *o = (struct be_opts){.runs = 5,
                          .run_ms = 300,
                          .warm_ms = 10,
                          .chase_loads = 4000000,
                          .prof_sys = -1,
                          .prof_mix = -1,
                          .prof_size = -1};
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            o->quick = 1;
            o->runs = 3;
            o->run_ms = 80;
            o->warm_ms = 5;
            o->chase_loads = 1000000;
        } else if (strcmp(argv[i], "--json") == 0) {
            o->json = 1;
        } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            o->runs = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc) {
            o->run_ms = (unsigned)atoi(argv[++i]);
        } else if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc) {
            if (parse_profile(argv[++i], o) != 0) {
                fprintf(stderr, "pcache-bench: --profile takes SYSTEM:MIX:SIZE, e.g. "
                                "engine_get:get95:50k (systems engine_get engine_getbuf "
                                "local65536 local512; mixes get100 get95 get50 set100; sizes "
                                "50k 1m)\n");
                return -1;
            }
        } else {
            fprintf(stderr, "usage: pcache-bench engine [--quick] [--json] [--runs N] [--ms N] "
                            "[--profile SYSTEM:MIX:SIZE]\n");
            return -1;
        }
    }
    if (o->runs < 1 || o->runs > BE_MAX_RUNS || o->run_ms < 10) {
        fprintf(stderr, "pcache-bench: --runs must be 1..15 and --ms at least 10\n");
        return -1;
    }
    return 0;
}

int bench_cmd_engine(int argc, char **argv)
{
    struct be_opts o;
    struct be_results *r;
    bench_keys keys;
    int rc = 1;

    if (parse_opts(argc, argv, &o) != 0)
        return 2;
    r = calloc(1, sizeof *r);
    if (r == NULL || bench_keys_make(&keys, be_size[BE_1M].entries, BE_KEY_LEN, 0) != 0) {
        free(r);
        fprintf(stderr, "pcache-bench: out of memory\n");
        return 1;
    }
    r->quick = o.quick;
    r->runs = o.runs;
    r->run_ms = o.run_ms;
    r->cpus = sysconf(_SC_NPROCESSORS_ONLN);
    bench_utc_now(r->date, sizeof r->date);
    for (int s = 0; s < BE_NSIZE; s++)
        if ((o.prof_size < 0 || s == o.prof_size) && run_size(&keys, &o, s, r) != 0)
            goto out;
    if (o.prof_sys >= 0) { /* a profiling run: the one cell, no figure */
        const struct be_cell *c = &r->cell[o.prof_size][o.prof_mix][0][o.prof_sys];

        printf("PROFILE RUN (no figure): %s, %s, %s, 1 process: %.1f ns/op, median of %d runs\n",
               be_sys[o.prof_sys].label, be_mix[o.prof_mix].label, be_size[o.prof_size].label,
               c->ns, o.runs);
        rc = c->nruns > 0 ? 0 : 1;
        goto out;
    }
    if (run_chase(&o, r) != 0)
        goto out;
    be_report_human(r, o.json ? stderr : stdout);
    if (o.json)
        be_report_json(r, stdout);
    rc = 0;
out:
    bench_keys_free(&keys);
    free(r);
    return rc;
}
