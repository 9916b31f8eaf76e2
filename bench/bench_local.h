/*
 * bench_local.h - a model of OpenSIPS cachedb_local, the anchor pcache is
 * measured against (docs/benchmarks.md, "The cachedb_local anchor").
 *
 * It reproduces what costs time in modules/cachedb_local/hash.c: a fixed
 * array of chained buckets (16-byte lcache_t, four to a cache line), a
 * spinlock taken on every read and write, a chain walk that compares the
 * whole stored key (no cached hash), core_hash() for bucket selection, one
 * shm_malloc per set from an allocator behind one global lock (the fast path
 * of OpenSIPS F_MALLOC) with the old entry's shm_free nested under the
 * bucket lock, and a pkg_malloc'd copy of the value handed back per fetch.
 *
 * Everything lives in one MAP_SHARED mapping made before fork(), so forked
 * workers share it at the same address, as OpenSIPS workers share shm.
 */
#ifndef BENCH_LOCAL_H
#define BENCH_LOCAL_H

#include "bench_pool.h"

#include <stddef.h>

typedef struct bench_local bench_local; /* process-local handle */

/* Maps a table of buckets (a power of two) and an allocator arena of
 * arena_bytes. On success *out is caller-owned: bench_local_destroy.
 * Returns 0 or -1 (errno set). */
int bench_local_create(bench_local **out, unsigned buckets, size_t arena_bytes);

/* Unmaps in this process. Accepts NULL. */
void bench_local_destroy(bench_local *l);

/* lcache_htable_insert: allocate and fill an entry, lock the bucket, unlink
 * and free any entry with the same key, push the new one. 0 or -1 (arena
 * full). key and val are borrowed. */
int bench_local_set(bench_local *l, const char *key, size_t klen, const void *val, size_t vlen);

/* The same insert for a key known to be absent: skips the futile chain walk
 * only. Loading 1M keys into 512 chains would otherwise cost minutes; the
 * table it builds is identical. Used to load, never timed. */
int bench_local_load(bench_local *l, const char *key, size_t klen, const void *val, size_t vlen);

/* lcache_htable_fetch: lock the bucket, walk, copy the value into a fresh
 * malloc'd buffer under the lock. Returns 0 with *val caller-owned (free()),
 * 1 when absent, -1 on allocation failure. */
int bench_local_fetch(bench_local *l, const char *key, size_t klen, char **val, size_t *vlen);

/* Bytes handed out by the allocator, headers included (F_MALLOC real_used),
 * plus the bucket array. */
size_t bench_local_used_bytes(const bench_local *l);

/* The pool target for this table: get = fetch + free, set = bench_local_set,
 * prefault = touch every page in use. name is borrowed (static). */
bench_target bench_local_target(bench_local *l, const char *name);

#endif
