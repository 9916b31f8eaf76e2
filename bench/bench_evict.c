/*
 * bench_evict.c - pcache-bench evict: what eviction costs the engine.
 *
 *  - GET hit cost with the access bit (allkeys-lru, allkeys-s3fifo) against
 *    noeviction, in two states: steady (every bit already set, so a read
 *    only tests it) and first read after insert (S3-FIFO inserts with the
 *    bit clear, so every read of the round stores it: the worst case);
 *  - SET of new keys in a cache at its cap (every SET evicts) against the
 *    same SETs with room.
 * Three caches with the same keys, one per policy; rounds interleave the
 * policies, each figure is the median of the rounds, and ratios are
 * noeviction's time over the policy's (>= 1 means the policy is as fast).
 * Hit-ratio comparisons with redis-server are bench/evict_hitratio.py.
 */
#include "bench_cmds.h"
#include "bench_util.h"
#include "pcache.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VLEN 200
#define KLEN 16

enum { P_OFF, P_LRU, P_S3, P_N };
static const int policies[P_N] = {PC_EVICT_NONE, PC_EVICT_LRU, PC_EVICT_S3FIFO};
static const char *const pnames[P_N] = {"noeviction", "allkeys-lru", "allkeys-s3fifo"};

static pc_cache *make_cache(size_t mb, int policy, pc_coll **co)
{
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "b=20";
    cfg.mem_mb = mb;
    pc_cache *c = NULL;
    if (pc_cache_create(&cfg, &c) != 0 || pc_coll_find(c, "b", 1, co) != 0 ||
        pc_coll_set_eviction(*co, policy) != 0) {
        fprintf(stderr, "pcache-bench evict: cannot create a %zu MiB cache\n", mb);
        exit(1);
    }
    return c;
}

static void fill(pc_coll *co, const bench_keys *k, size_t from, size_t to)
{
    char val[VLEN];
    for (size_t i = from; i < to; i++) {
        bench_fill_value(val, VLEN, i);
        if (pc_set(co, bench_key(k, i), KLEN, val, VLEN, 0, 0) != 0) {
            fprintf(stderr, "pcache-bench evict: fill refused at %zu\n", i);
            exit(1);
        }
    }
}

/* ns per GET hit over ops random reads of keys [0, n) */
static double time_gets(pc_coll *co, const bench_keys *k, size_t n, size_t ops, uint64_t seed)
{
    char buf[VLEN];
    size_t len, need;
    uint64_t s = seed | 1, t0 = bench_now_ns();
    for (size_t i = 0; i < ops; i++) {
        size_t j = bench_pick(bench_xorshift(&s), n);
        if (pc_get_buf(co, bench_key(k, j), KLEN, buf, sizeof buf, &len, &need, NULL) != 0) {
            fprintf(stderr, "pcache-bench evict: a GET missed\n");
            exit(1);
        }
    }
    return (double)(bench_now_ns() - t0) / (double)ops;
}

/* ns per GET of keys [from, to), each read once in order */
static double time_first_reads(pc_coll *co, const bench_keys *k, size_t from, size_t to)
{
    char buf[VLEN];
    size_t len, need;
    uint64_t t0 = bench_now_ns();
    for (size_t i = from; i < to; i++)
        (void)pc_get_buf(co, bench_key(k, i), KLEN, buf, sizeof buf, &len, &need, NULL);
    return (double)(bench_now_ns() - t0) / (double)(to - from);
}

static double time_sets(pc_coll *co, const bench_keys *k, size_t from, size_t to)
{
    uint64_t t0 = bench_now_ns();
    fill(co, k, from, to);
    return (double)(bench_now_ns() - t0) / (double)(to - from);
}

struct figs {
    double steady[P_N], first[P_N];
};

/* The GET figures at n resident keys. One cache for every policy, the
 * policy switched between timings (pc_coll_set_eviction), so that each
 * policy reads the same records at the same addresses: the difference is
 * the read path's, not the memory layout's. */
static void get_costs(size_t n, unsigned runs, size_t ops, struct figs *out)
{
    size_t fresh = n / 10; /* keys inserted per round and policy for the first-read case */
    size_t total = n + (size_t)runs * P_N * fresh;
    bench_keys k;
    if (bench_keys_make(&k, total, KLEN, 77) != 0)
        exit(1);
    pc_coll *co;
    pc_cache *c = make_cache(total * 256 / (1u << 20) + 64, PC_EVICT_NONE, &co);
    fill(co, &k, 0, n);
    (void)time_gets(co, &k, n, n * 2, 1); /* lines warm */
    double st[P_N][16], fr[P_N][16];
    size_t next = n;
    for (unsigned r = 0; r < runs && r < 16; r++)
        for (int q = 0; q < P_N; q++) {
            int p = (int)((q + r) % P_N); /* rotate who goes first */
            if (pc_coll_set_eviction(co, policies[p]) != 0)
                exit(1);
            (void)time_gets(co, &k, n, n / 4, 500 + r); /* the bits as this policy leaves them */
            st[p][r] = time_gets(co, &k, n, ops, 1000 + r);
            fill(co, &k, next, next + fresh); /* inserted under this policy */
            fr[p][r] = time_first_reads(co, &k, next, next + fresh);
            next += fresh;
        }
    for (int p = 0; p < P_N; p++) {
        out->steady[p] = bench_median(st[p], runs);
        out->first[p] = bench_median(fr[p], runs);
    }
    pc_cache_destroy(c);
    bench_keys_free(&k);
}

/* ns per SET of a new key with room, and at a 16 MiB cap (every SET evicts) */
static void set_costs(unsigned runs, size_t per_run, double *room, double *evicting, int policy)
{
    bench_keys k;
    if (bench_keys_make(&k, (size_t)runs * per_run * 2 + 200000, KLEN, 91) != 0)
        exit(1);
    pc_coll *ca, *cb;
    pc_cache *a = make_cache((size_t)runs * per_run * 2 * 256 / (1u << 20) + 128, policy, &ca);
    pc_cache *b = make_cache(256, policy, &cb);
    (void)pc_set_maxmemory(b, 16u << 20);
    size_t next = 0;
    fill(cb, &k, next, next + 200000); /* past the cap: evicting from here on */
    next += 200000;
    /* the cache with room writes into cells already touched, as the capped
     * one does: filled once and emptied, so no SET pays a page fault */
    fill(ca, &k, next, next + (size_t)runs * per_run);
    uint64_t gone = 0;
    (void)pc_del_glob(ca, NULL, 0, &gone);
    double ra[16], rb[16];
    for (unsigned r = 0; r < runs && r < 16; r++) {
        ra[r] = time_sets(ca, &k, next, next + per_run);
        next += per_run;
        rb[r] = time_sets(cb, &k, next, next + per_run);
        next += per_run;
    }
    *room = bench_median(ra, runs);
    *evicting = bench_median(rb, runs);
    pc_coll_stats st;
    (void)pc_coll_stats_get(cb, &st);
    if (st.evicted == 0) {
        fprintf(stderr, "pcache-bench evict: the capped cache did not evict\n");
        exit(1);
    }
    pc_cache_destroy(a);
    pc_cache_destroy(b);
    bench_keys_free(&k);
}

int bench_cmd_evict(int argc, char **argv)
{
    bool quick = false, json = false;
    unsigned runs = 7;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = (unsigned)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: pcache-bench evict [--quick] [--json] [--runs N]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > 16)
        runs = 7;
    if (quick)
        runs = 3;
    static const size_t sizes[] = {50000, 1000000};
    size_t nsizes = quick ? 1 : 2;
    bench_json j;
    char when[32];
    bench_utc_now(when, sizeof when);
    if (json) {
        bench_json_begin(&j, stdout);
        bench_json_str(&j, "bench", "evict");
        bench_json_str(&j, "utc", when);
        bench_json_int(&j, "runs", runs);
        bench_json_bool(&j, "quick", quick);
    }
    if (quick && !json)
        printf("QUICK: 50k keys only, %u rounds, 500k GETs and 20k SETs a round (the full run "
               "adds 1M keys, 4M GETs, 100k SETs)\n",
               runs);
    printf(json ? "" : "GET hit, ns per op (median of %u rounds); ratio = noeviction / policy\n",
           runs);
    for (size_t s = 0; s < nsizes; s++) {
        struct figs f;
        size_t n = sizes[s];
        get_costs(n, runs, quick ? 500000 : 4000000, &f);
        for (int p = 1; p < P_N; p++) {
            double rs = f.steady[P_OFF] / f.steady[p], rf = f.first[P_OFF] / f.first[p];
            if (!json) {
                printf("  %7zu keys  %-15s steady %6.1f vs %6.1f ns  ratio %.3f   "
                       "first read %6.1f vs %6.1f ns  ratio %.3f\n",
                       n, pnames[p], f.steady[p], f.steady[P_OFF], rs, f.first[p], f.first[P_OFF],
                       rf);
            } else {
                char key[96];
                snprintf(key, sizeof key, "get_%zu_%s_steady_ratio", n, pnames[p]);
                bench_json_num(&j, key, rs);
                snprintf(key, sizeof key, "get_%zu_%s_first_read_ratio", n, pnames[p]);
                bench_json_num(&j, key, rf);
                snprintf(key, sizeof key, "get_%zu_%s_steady_ns", n, pnames[p]);
                bench_json_num(&j, key, f.steady[p]);
            }
        }
        if (json) {
            char key[96];
            snprintf(key, sizeof key, "get_%zu_noeviction_steady_ns", n);
            bench_json_num(&j, key, f.steady[P_OFF]);
        }
    }
    for (int p = 1; p < P_N; p++) {
        double room, ev;
        set_costs(runs, quick ? 20000 : 100000, &room, &ev, policies[p]);
        if (!json)
            printf("SET of a new key, %-15s with room %6.1f ns, evicting at a 16 MiB cap %6.1f ns"
                   "  (evicting / room throughput %.3f)\n",
                   pnames[p], room, ev, room / ev);
        else {
            char key[96];
            snprintf(key, sizeof key, "set_%s_room_ns", pnames[p]);
            bench_json_num(&j, key, room);
            snprintf(key, sizeof key, "set_%s_evicting_ns", pnames[p]);
            bench_json_num(&j, key, ev);
        }
    }
    if (json) {
        bench_json_end(&j);
        printf("\n");
    }
    return 0;
}
