/*
 * bench_pool.h - forked worker processes that drive a key-value system with
 * a get/set mix and report throughput.
 *
 * The parent builds every system under test (in MAP_SHARED memory), then
 * starts a pool: the workers fork once, inherit every system and the key set,
 * and serve run commands until the pool stops. One pool per data set keeps
 * first-touch page faults out of the timed windows (each worker pre-faults
 * once, through the target's prefault hook) and keeps the number of
 * processes that ever attach to a system small.
 *
 * A run is fixed-duration: the parent releases the active workers together,
 * sleeps, raises a stop flag; each worker counts its operations up to the
 * moment it sees the flag. throughput = total ops / wall time, where wall
 * runs from the release to the last worker's stop. Idle workers block in
 * read(2), so a 1-process run has the CPU to itself.
 *
 * Not thread-safe; one pool at a time per process.
 */
#ifndef BENCH_POOL_H
#define BENCH_POOL_H

#include "bench_util.h"

#include <stddef.h>
#include <stdint.h>

#define BENCH_POOL_MAX_WORKERS 8
#define BENCH_POOL_MAX_TARGETS 8

/* A system under test, seen through two operations. ctx and the functions
 * are inherited by the workers through fork; they must stay valid until
 * bench_pool_stop. */
typedef struct bench_target {
    const char *name; /* borrowed, static */
    void *ctx;        /* borrowed */
    /* Reads key (borrowed). Returns 0 on a hit, 1 on a miss, negative on an
     * error. Adds a byte of the value to *sink so the read cannot be elided. */
    int (*get)(void *ctx, const char *key, size_t klen, uint64_t *sink);
    /* Stores val under key (both borrowed). 0 on success, negative on error. */
    int (*set)(void *ctx, const char *key, size_t klen, const void *val, size_t vlen);
    /* Optional: runs once in each worker right after the fork, to touch the
     * memory the parent built. Returns the number of keys found missing. */
    uint64_t (*prefault)(void *ctx, const bench_keys *keys);
    /* Optional: runs in each worker just before it exits. */
    void (*child_exit)(void *ctx);
} bench_target;

typedef struct bench_job {
    int target;           /* index into the pool's targets */
    int nprocs;           /* active workers, 1 .. pool size */
    unsigned set_per_64k; /* sets per 65536 operations; 65536 = all sets */
    uint64_t duration_ns; /* timed window */
    uint64_t warmup_ns;   /* untimed gets before the window (cache state) */
    uint64_t seed;
} bench_job;

typedef struct bench_result {
    uint64_t ops, gets, sets;
    uint64_t misses; /* gets that did not find a resident key */
    uint64_t errors; /* operations that returned an error */
    uint64_t wall_ns;
    double mops;      /* total ops / wall, in millions per second */
    double ns_per_op; /* wall * nprocs / ops: one operation's cost in one process */
} bench_result;

typedef struct bench_pool bench_pool;

/* Forks nworkers workers that inherit targets[0..ntargets) (copied) and
 * keys (borrowed, must outlive the pool); vlen is the size of every set.
 * Each worker then runs every prefault hook; *prefault_misses (may be NULL)
 * receives the worst worker's total. On success *out is caller-owned:
 * bench_pool_stop. Returns 0 or -1 (message on stderr). */
int bench_pool_start(bench_pool **out, int nworkers, const bench_target *targets, int ntargets,
                     const bench_keys *keys, size_t vlen, uint64_t *prefault_misses);

/* Runs one job and fills *res. Returns 0, or -1 when a worker died or hung
 * (message on stderr; the pool is then unusable except for bench_pool_stop). */
int bench_pool_run(bench_pool *p, const bench_job *job, bench_result *res);

/* Tells the workers to exit, reaps them and frees the pool. Returns 0 when
 * every worker exited with status 0. Accepts NULL. */
int bench_pool_stop(bench_pool *p);

#endif
