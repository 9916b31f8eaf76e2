/*
 * bench_engine.h - the case space and the results of `pcache-bench engine`,
 * shared by the measuring half (bench_engine.c) and the reporting half
 * (bench_engine_report.c). Not used by other subcommands.
 */
#ifndef BENCH_ENGINE_H
#define BENCH_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Systems under test, in the order of the table columns. */
enum { BE_ENGINE_GET, BE_ENGINE_GETBUF, BE_LOCAL_TUNED, BE_LOCAL_DEFAULT, BE_NSYS };
enum { BE_GET100, BE_GET95, BE_GET50, BE_SET100, BE_NMIX };
enum { BE_50K, BE_1M, BE_NSIZE };
#define BE_NPROCS 2 /* index p runs p + 1 processes */

#define BE_KEY_LEN 16
#define BE_VALUE_LEN 200
#define BE_LOCAL_DEFAULT_BUCKETS 512u /* cachedb_local's shipped default */
#define BE_LOCAL_TUNED_BUCKETS 65536u /* what a tuned deployment declares */

struct be_sys_info {
    const char *key;   /* JSON fragment */
    const char *label; /* table heading */
};
struct be_mix_info {
    const char *key, *label;
    unsigned set_per_64k;
};
struct be_size_info {
    const char *key, *label;
    size_t entries;
};

extern const struct be_sys_info be_sys[BE_NSYS];
extern const struct be_mix_info be_mix[BE_NMIX];
extern const struct be_size_info be_size[BE_NSIZE];

/* One case: the medians over the runs. */
#define BE_MAX_RUNS 15

struct be_cell {
    double mops, ns;              /* medians of the runs */
    double run_mops[BE_MAX_RUNS]; /* each run (round), for per-round ratios */
    double run_ns[BE_MAX_RUNS];
    int nruns;
    uint64_t misses, errors; /* summed over the runs */
};

/* Engine facts per data set. */
struct be_engine_info {
    int tier;
    uint64_t buckets_initial, buckets, overflow, entries;
    uint64_t chunk_bytes, table_bytes; /* after load and growth, before any run */
    uint64_t chunk_bytes_after;        /* after every run of the set */
    uint64_t seqlock_retries, lock_fallbacks, reads, nomem;
    unsigned grow_calls, splits, load_retries;
    double load_ns_per_entry;
    uint64_t prefault_misses;
    size_t local_bytes[2]; /* tuned, default: allocator real_used + buckets */
};

struct be_results {
    int quick, runs;
    unsigned run_ms;
    char date[32];
    long cpus;
    struct be_cell cell[BE_NSIZE][BE_NMIX][BE_NPROCS][BE_NSYS];
    struct be_engine_info eng[BE_NSIZE];
    double chase_ns;
    size_t chase_bytes;
    /* management cost (bench_engine_mgmt.c), 95/5 one worker at 1M */
    double mgmt_base_mops, mgmt_scan_mops, mgmt_sub_mops;
    double mgmt_scan_ratio, mgmt_scan_ratio_min, mgmt_scan_ratio_max;
    double mgmt_sub_ratio, mgmt_sub_ratio_min, mgmt_sub_ratio_max;
    uint64_t mgmt_scan_entries; /* visited inside the windows */
    double mgmt_scan_walks;     /* the same in full walks of the collection */
};

struct bench_pool;
struct pc_cache;
struct pc_coll;
/* Measures the management cost on a running pool (bench_engine_mgmt.c). */
int be_measure_mgmt(struct bench_pool *pool, struct pc_cache *c, struct pc_coll *coll, int target,
                    int runs, unsigned run_ms, uint64_t entries, struct be_results *r);

/* Prints the human tables and target verdicts to out. */
void be_report_human(const struct be_results *r, FILE *out);

/* Prints the one JSON object to out. */
void be_report_json(const struct be_results *r, FILE *out);

#endif
