/*
 * journal_testlib.h - what the journal's test programs share
 * (test_journal.c, test_journal_race.c, test_journal_faults.c): a scratch
 * directory per test (setup_dir / teardown_dir), the journal's log lines
 * captured in this process, caches and journals made for a test, a
 * deterministic random source, the segment files of the scratch directory,
 * and a key-by-key comparison of two tables. cmocka assertions: include
 * after cmocka.h. Not a library: every function fails the running test
 * instead of returning an error.
 */
#ifndef JOURNAL_TESTLIB_H
#define JOURNAL_TESTLIB_H

#include <stddef.h>
#include <stdint.h>

#include "pc_fixture.h" /* pc_fx_coll: a collection by name */
#include "pcache_journal.h"
#include "pcache.h"

/* What the journal logged in this process (loglen bytes, NUL-terminated),
 * appended by log_capture, emptied by log_reset. PCJ_VERBOSE=1 also copies
 * every line to stderr. */
extern char logbuf[1 << 16];
extern size_t loglen;
void log_capture(void *ctx, int level, const char *msg);
void log_reset(void);

/* The test's scratch directory (the store's and the journal's). */
extern char tmpdir[200];
int setup_dir(void **state);    /* cmocka setup: mkdtemp tmpdir, log_reset */
int teardown_dir(void **state); /* rm -rf tmpdir */

/* A forked child must not run cmocka's handlers (they would longjmp into
 * the child's copy of the runner), and never outlives a failed test. */
void child_init(void);

/* Caller-owned caches and journals (pc_cache_destroy, pc_journal_close).
 * growth_load_factor and growth_budget: 0 keeps the default. */
pc_cache *new_cache_grow(const char *colls, size_t mem_mb, unsigned load_factor, unsigned budget);
pc_cache *new_cache(const char *colls, size_t mem_mb);
/* A journal in tmpdir logging everything to log_capture. */
pc_journal *new_journal(pc_cache *c, uint64_t boot_gen);
/* The same with the ring's size and the process slots (0: the defaults). */
pc_journal *new_journal_cfg(pc_cache *c, uint64_t boot_gen, size_t ring, unsigned procs);
/* Installs j's hook on c and journals collection name in mode; returns it. */
pc_coll *journal_on(pc_cache *c, pc_journal *j, const char *name, unsigned mode);

/* xorshift64*; a test that needs a fixed sequence sets rng_state. */
extern uint64_t rng_state;
uint64_t rnd(void);

/* Segment files of the journal directory (names, sorted), optionally only
 * those of one collection. Returns the count. */
unsigned list_segments(const char *coll, char names[][256], unsigned max);

/* One entry of a table, copied out by an ordered walk (caller-owned). */
struct kv {
    void *key;
    size_t klen;
    void *val;
    size_t vlen;
    int64_t ttl_ms;
    int is_counter;
    uint32_t stamp;
};

struct kvset {
    struct kv *v;
    size_t n, cap;
};

/* pc_walk_ordered(co, flags) copied into out; kv_free releases it. */
void kv_snapshot(pc_coll *co, unsigned flags, struct kvset *out);
void kv_free(struct kvset *s);

/* Every live entry of a equals the one in b (value, counter flag, TTL within
 * 2 s) and b holds nothing else. */
void assert_same_table(pc_coll *a, pc_coll *b);

#endif
