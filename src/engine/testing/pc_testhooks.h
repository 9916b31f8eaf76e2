/*
 * pc_testhooks.h - white-box hooks for libpcache's own tests. Not part of
 * the public interface: hosts never include this. Each hook reaches into the
 * shared layout to build a state that only a crash or a race produces
 * naturally (a lock held by a dead process, a torn length), or to check the
 * table's invariants from outside.
 */
#ifndef PC_TESTHOOKS_H
#define PC_TESTHOOKS_H

#include "pcache.h"

/* Takes the bucket lock of key's bucket (and opens its version bracket,
 * as a writer that is mid-update would) and returns without releasing it,
 * so a test can SIGKILL the caller while it holds the lock. */
int pc__test_hold_bucket_lock(pc_coll *coll, const void *key, size_t klen);

/* Ends what pc__test_hold_bucket_lock began for key, from the process that
 * holds it: closes the version bracket (the version is even again, two
 * past the one readers saw before) and releases the lock. */
int pc__test_release_bucket_lock(pc_coll *coll, const void *key, size_t klen);

/* The stored value bytes of key's record, in the shared region, found
 * without taking its bucket lock: for a test that holds that lock
 * (pc__test_hold_bucket_lock) and writes the value in place, as a writer
 * inside its bracket does, or that nobody else writes meanwhile. Sets *val
 * and *vlen; PC_ENOTFOUND when absent. */
int pc__test_value_bytes(pc_coll *coll, const void *key, size_t klen, unsigned char **val,
                         size_t *vlen);

/* Overwrites the stored length fields of key's record with klen_bits /
 * vlen_bits without any version bump, as a torn read would observe them.
 * Returns PC_ENOTFOUND when the key is absent. */
int pc__test_tear_lengths(pc_coll *coll, const void *key, size_t klen, uint16_t klen_bits,
                          uint32_t vlen_bits);

/* 1 when key currently lives in an overflow side chain, 0 in its bucket,
 * PC_ENOTFOUND when absent. */
int pc__test_in_overflow(pc_coll *coll, const void *key, size_t klen);

/* Checks every invariant of the cache that can be checked from one process
 * while nobody writes: each carved cell's byte 0 equals its chunk's class;
 * every bucket slot points at a record cell whose key routes to that bucket;
 * no key lives in a bucket and in overflow; entry counts agree. Returns 0,
 * or PC_EINVAL after logging (through the cache's log callback) and writing
 * the first violation into msg. */
int pc__test_verify(pc_cache *c, char *msg, size_t msglen);

/* Number of cells currently on this process's private free stacks and on
 * the global pool, for the fork-safety tests. */
void pc__test_free_counts(pc_cache *c, uint64_t *private_cells, uint64_t *global_cells);

/* Where the arena's cells are, counted from shared memory (the caller
 * should be the only one running): cells in carved chunks; on the global
 * pools; on the process slots' free stacks and bump remainders (all slots,
 * and the caller's own); the bytes of the carved cells and of the free
 * cells the caller can use (pooled or its own);
 * the slots that hold a token. With every key deleted, carved - pooled -
 * on_slots cells are leaked. */
typedef struct pc_arena_census {
    uint64_t carved, pooled, on_slots, own_slot_cells;
    uint64_t carved_bytes, free_bytes;
    unsigned slots_held;
} pc_arena_census;
void pc__test_arena_census(pc_cache *c, pc_arena_census *out);

/* Takes the free pool lock of the class of `bytes` and returns holding it,
 * so that a test can SIGKILL the caller: stage 0 holds it only; stage 1 is
 * mid-give (a cell unlinked from this process's free stack, not yet on the
 * pool: only the pool's in-flight mark names it); stage 2 is mid-take (a
 * cell unlinked from the pool, not yet on the stack). */
int pc__test_hold_pool_lock(pc_cache *c, size_t bytes, int stage);

/* What pc_maintain(PC_MAINT_REAP) does, without its once-a-second limit:
 * returns the number of dead processes' slots reaped. */
unsigned pc__test_reap_dead(pc_cache *c);

#endif
