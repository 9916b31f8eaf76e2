/*
 * bench_chase.h - the DRAM floor: a dependent pointer chase.
 *
 * bytes of memory are cut into 64-byte nodes linked in one random cycle
 * (a Fisher-Yates shuffle, so every node is visited once per lap and the
 * hardware prefetchers have nothing to follow). Each load's address comes
 * from the previous load, so the time per load is the latency of one
 * cache/TLB miss over that footprint. The memory is MAP_SHARED anonymous
 * (shmem), the same backing as the engine's plain region, so the floor pays
 * the same page size and the same TLB reach as the cache it is compared to.
 */
#ifndef BENCH_CHASE_H
#define BENCH_CHASE_H

#include <stddef.h>
#include <stdint.h>

typedef struct bench_chase bench_chase;

/* Maps and links the cycle. On success *out is caller-owned:
 * bench_chase_destroy. Returns 0 or -1. */
int bench_chase_create(bench_chase **out, size_t bytes, uint64_t seed);

/* Follows loads links and returns nanoseconds per load. */
double bench_chase_run(bench_chase *c, uint64_t loads);

/* Bytes actually mapped (a whole number of nodes). */
size_t bench_chase_bytes(const bench_chase *c);

/* Accepts NULL. */
void bench_chase_destroy(bench_chase *c);

#endif
