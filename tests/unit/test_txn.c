/*
 * test_txn.c - the engine's transactions (src/engine/txn.c, pcache.h
 * "transactions"): the overlay a bound transaction reads through, the
 * commit and its conflict checks (another writer, a TTL-only refresh, a
 * lapse, a counter changed in place; and none for a write to another key
 * of the same bucket or a split that moved the keys), several collections,
 * counters and TTLs, the mutation hook (journal) calls and their undo, and
 * forked processes committing transactions while plain writers write the
 * same keys: no lost increment, and a reader never sees half a commit;
 * pc_txn_quiesce waiting for a commit's hooks, and not for a dead one's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pc_fixture.h"
#include "pc_testhooks.h"
#include "pcache.h"

#define S(s) (s), (sizeof(s) - 1)

static void check_rc_at(int line, int got, int want)
{
    if (got != want)
        fail_msg("line %d: rc %d (%s), wanted %d (%s)", line, got, pc_strerror(got), want,
                 pc_strerror(want));
}
#define check_rc(got, want) check_rc_at(__LINE__, (got), (want))

static void expect_val(pc_coll *co, const char *k, const char *want)
{
    char buf[256];
    size_t len = 0, need = 0;
    int rc = pc_get_buf(co, k, strlen(k), buf, sizeof buf, &len, &need, NULL);
    if (want == NULL) {
        check_rc(rc, PC_ENOTFOUND);
        return;
    }
    check_rc(rc, PC_OK);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(buf, want, len);
}

static int64_t counter(pc_coll *co, const char *k)
{
    int64_t v = -999;
    check_rc(pc_get_counter(co, k, strlen(k), &v), PC_OK);
    return v;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

struct fx {
    pc_cache *c;
    pc_coll *a, *b, *small;
    pc_txn *t;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    pc_config cfg;
    pc_fx_config(&cfg, "a;b;small=4", 32);
    cfg.growth_load_factor = 1;
    f->c = pc_fx_create(&cfg);
    f->a = pc_fx_coll(f->c, "a");
    f->b = pc_fx_coll(f->c, "b");
    f->small = pc_fx_coll(f->c, "small");
    check_rc(pc_txn_begin(f->c, &f->t), PC_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    pc_txn_free(f->t);
    pc_cache_destroy(f->c);
    free(f);
    return 0;
}

/* A bound transaction reads its own writes; the table changes only at the
 * commit; after it the transaction is empty. */
static void overlay_then_commit(void **state)
{
    struct fx *f = *state;
    check_rc(pc_set(f->a, S("k"), S("1"), 0, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    expect_val(f->a, "k", "1");
    check_rc(pc_set(f->a, S("k"), S("2"), 0, 0), PC_OK);
    check_rc(pc_set(f->a, S("new"), S("n"), 0, PC_SET_NX), PC_OK);
    check_rc(pc_set(f->a, S("new"), S("again"), 0, PC_SET_NX), PC_EEXIST);
    check_rc(pc_set(f->a, S("absent"), S("x"), 0, PC_SET_XX), PC_ENOTFOUND);
    expect_val(f->a, "k", "2");
    expect_val(f->a, "new", "n");
    check_rc(pc_remove(f->a, S("new")), PC_OK);
    expect_val(f->a, "new", NULL);
    check_rc(pc_remove(f->a, S("new")), PC_ENOTFOUND);
    check_rc(pc_set(f->a, S("new"), S("back"), 0, 0), PC_OK);
    assert_int_equal(pc_txn_writes(f->t), 2);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    expect_val(f->a, "k", "1"); /* nothing applied yet */
    expect_val(f->a, "new", NULL);
    check_rc(pc_txn_commit(f->t), PC_OK);
    expect_val(f->a, "k", "2");
    expect_val(f->a, "new", "back");
    assert_int_equal(pc_txn_writes(f->t), 0);
    check_rc(pc_txn_commit(f->t), PC_OK); /* empty */
}

/* Another writer of an observed key: nothing applied, PC_ECONFLICT. */
static void conflict_on_a_changed_key(void **state)
{
    struct fx *f = *state;
    check_rc(pc_set(f->a, S("k"), S("old"), 0, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    expect_val(f->a, "k", "old");
    check_rc(pc_set(f->a, S("other"), S("staged"), 0, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    check_rc(pc_set(f->a, S("k"), S("theirs"), 0, 0), PC_OK);
    check_rc(pc_txn_validate(f->t), PC_ECONFLICT);
    check_rc(pc_txn_commit(f->t), PC_ECONFLICT);
    expect_val(f->a, "k", "theirs");
    expect_val(f->a, "other", NULL);
    /* the retry sees the new value and commits */
    pc_txn_reset(f->t);
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    expect_val(f->a, "k", "theirs");
    check_rc(pc_set(f->a, S("other"), S("staged"), 0, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_OK);
    expect_val(f->a, "other", "staged");
}

/* A key absent when observed and created meanwhile is a conflict too. */
static void conflict_on_a_created_key(void **state)
{
    struct fx *f = *state;
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    check_rc(pc_set(f->a, S("fresh"), S("mine"), 0, PC_SET_NX), PC_OK);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    check_rc(pc_set(f->a, S("fresh"), S("theirs"), 0, 0), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_ECONFLICT);
    expect_val(f->a, "fresh", "theirs");
}

/* Two keys of the small collection that route to one bucket. */
static void same_bucket_keys(char *k1, char *k2, size_t cap)
{
    snprintf(k1, cap, "sb-0");
    uint64_t want = pc_hash(k1, strlen(k1)) & 15u;
    for (unsigned i = 1;; i++) {
        snprintf(k2, cap, "sb-%u", i);
        if ((pc_hash(k2, strlen(k2)) & 15u) == want)
            return;
    }
}

/* A watch judges its key, not the key's bucket: writes to another key of
 * the same bucket leave it alone, both for a live key and an absent one;
 * a write of its own key conflicts. */
static void watch_is_per_key(void **state)
{
    struct fx *f = *state;
    char k1[32], k2[32];
    same_bucket_keys(k1, k2, sizeof k1);
    check_rc(pc_txn_watch(f->t, f->small, k1, strlen(k1)), PC_OK); /* absent */
    check_rc(pc_set(f->small, k2, strlen(k2), S("x"), 0, 0), PC_OK);
    check_rc(pc_txn_validate(f->t), PC_OK);
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    check_rc(pc_set(f->small, k1, strlen(k1), S("mine"), 0, 0), PC_OK); /* staged */
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_OK);
    expect_val(f->small, k1, "mine");

    check_rc(pc_txn_watch(f->t, f->small, k1, strlen(k1)), PC_OK); /* live */
    check_rc(pc_set(f->small, k2, strlen(k2), S("y"), 0, 0), PC_OK);
    check_rc(pc_remove(f->small, k2, strlen(k2)), PC_OK);
    check_rc(pc_txn_validate(f->t), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_OK);

    /* a set of the bytes and expiry the key holds changes nothing (the
     * TTL-only refresh with the same expiry) */
    check_rc(pc_txn_watch(f->t, f->small, k1, strlen(k1)), PC_OK);
    check_rc(pc_set(f->small, k1, strlen(k1), S("mine"), 0, 0), PC_OK);
    check_rc(pc_txn_validate(f->t), PC_OK);
    check_rc(pc_set(f->small, k2, strlen(k2), S("z"), 0, 0), PC_OK);
    check_rc(pc_set(f->small, k1, strlen(k1), S("eman"), 0, 0), PC_OK); /* same length */
    check_rc(pc_txn_validate(f->t), PC_ECONFLICT);
    check_rc(pc_txn_commit(f->t), PC_ECONFLICT);
    pc_txn_clear(f->t);

    /* removed and created again since the watch: a new record */
    check_rc(pc_txn_watch(f->t, f->small, k1, strlen(k1)), PC_OK);
    check_rc(pc_remove(f->small, k1, strlen(k1)), PC_OK);
    check_rc(pc_set(f->small, k1, strlen(k1), S("mine"), 0, 0), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_ECONFLICT);
    pc_txn_clear(f->t);
}

/* A counter changes in place, in the record the watch saw: the value
 * decides. Moved away and back before the transaction reads it, the key
 * holds what was watched and the commit goes ahead; moved away when the
 * transaction reads it, the read marks the watch broken even if the
 * counter comes back before the commit. */
static void watch_counter_in_place(void **state)
{
    struct fx *f = *state;
    int64_t v;
    check_rc(pc_add(f->a, S("n"), 5, 0, &v), PC_OK);
    check_rc(pc_txn_watch(f->t, f->a, S("n")), PC_OK);
    check_rc(pc_add(f->a, S("n"), 1, 0, &v), PC_OK);
    check_rc(pc_txn_validate(f->t), PC_ECONFLICT);
    check_rc(pc_add(f->a, S("n"), -1, 0, &v), PC_OK);
    check_rc(pc_txn_validate(f->t), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_OK);

    check_rc(pc_txn_watch(f->t, f->a, S("n")), PC_OK);
    check_rc(pc_add(f->a, S("n"), 1, 0, &v), PC_OK);
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    assert_int_equal(counter(f->a, "n"), 6);
    check_rc(pc_set(f->a, S("seen"), S("6"), 0, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    check_rc(pc_add(f->a, S("n"), -1, 0, &v), PC_OK);
    check_rc(pc_txn_validate(f->t), PC_ECONFLICT);
    check_rc(pc_txn_commit(f->t), PC_ECONFLICT);
    expect_val(f->a, "seen", NULL);
    pc_txn_clear(f->t);
}

/* A watch copies no value; a read through the transaction loads it, and a
 * change since the watch still fails the commit. */
static void watch_then_read(void **state)
{
    struct fx *f = *state;
    check_rc(pc_set(f->a, S("w"), S("one"), 0, 0), PC_OK);
    check_rc(pc_txn_watch(f->t, f->a, S("w")), PC_OK);
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    expect_val(f->a, "w", "one");
    check_rc(pc_set(f->a, S("w"), S("two"), 0, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_OK);
    expect_val(f->a, "w", "two");
    check_rc(pc_txn_watch(f->t, f->a, S("w")), PC_OK);
    check_rc(pc_set(f->a, S("w"), S("theirs"), 0, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    expect_val(f->a, "w", "theirs");
    check_rc(pc_set(f->a, S("w"), S("mine"), 0, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_ECONFLICT);
    pc_txn_reset(f->t); /* the watch stays, as it was observed */
    check_rc(pc_txn_validate(f->t), PC_ECONFLICT);
    check_rc(pc_txn_commit(f->t), PC_ECONFLICT);
    expect_val(f->a, "w", "theirs");
}

/* Changes that leave the version alone are still seen: the TTL-only
 * refresh and pc_expire without a hook; and a key lapsing. */
static void conflict_on_expiry_changes(void **state)
{
    struct fx *f = *state;
    check_rc(pc_set(f->a, S("t"), S("v"), 60000, 0), PC_OK);
    check_rc(pc_txn_watch(f->t, f->a, S("t")), PC_OK);
    check_rc(pc_set(f->a, S("t"), S("v"), 90000, 0), PC_OK); /* same bytes: TTL-only */
    check_rc(pc_txn_validate(f->t), PC_ECONFLICT);
    pc_txn_clear(f->t);
    check_rc(pc_txn_watch(f->t, f->a, S("t")), PC_OK);
    check_rc(pc_expire(f->a, S("t"), 5000), PC_OK);
    check_rc(pc_txn_validate(f->t), PC_ECONFLICT);
    pc_txn_clear(f->t);
    /* a lapse between the read and the commit */
    check_rc(pc_set(f->a, S("brief"), S("v"), 60, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    expect_val(f->a, "brief", "v");
    check_rc(pc_set(f->a, S("dep"), S("seen brief"), 0, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    sleep_ms(120);
    check_rc(pc_txn_commit(f->t), PC_ECONFLICT);
    expect_val(f->a, "dep", NULL);
}

/* A split moves observed keys to new buckets: the commit locks them where
 * they are now and goes ahead when they are unchanged; a key written
 * meanwhile still conflicts. */
static void commit_across_a_split(void **state)
{
    struct fx *f = *state;
    char k[32];
    for (unsigned i = 0; i < 200; i++) {
        snprintf(k, sizeof k, "g%u", i);
        check_rc(pc_set(f->small, k, strlen(k), S("v"), 0, 0), PC_OK);
    }
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    for (unsigned i = 0; i < 200; i++) {
        snprintf(k, sizeof k, "g%u", i);
        expect_val(f->small, k, "v");
    }
    check_rc(pc_set(f->small, S("g0"), S("w"), 0, 0), PC_OK);
    check_rc(pc_set(f->small, S("g-new"), S("n"), 0, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    pc_maint_report r;
    check_rc(pc_maintain(f->c, PC_MAINT_GROW, &r), PC_OK);
    assert_true(r.splits > 0);
    check_rc(pc_txn_commit(f->t), PC_OK);
    expect_val(f->small, "g0", "w");
    expect_val(f->small, "g-new", "n");
    for (unsigned i = 1; i < 200; i++) {
        snprintf(k, sizeof k, "g%u", i);
        expect_val(f->small, k, "v");
    }
    /* a split and a write of an observed key */
    for (unsigned i = 200; i < 600; i++) {
        snprintf(k, sizeof k, "g%u", i);
        check_rc(pc_set(f->small, k, strlen(k), S("v"), 0, 0), PC_OK);
    }
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    expect_val(f->small, "g7", "v");
    check_rc(pc_set(f->small, S("g8"), S("after g7"), 0, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    check_rc(pc_maintain(f->c, PC_MAINT_GROW, &r), PC_OK);
    assert_true(r.splits > 0);
    check_rc(pc_set(f->small, S("g7"), S("theirs"), 0, 0), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_ECONFLICT);
    expect_val(f->small, "g8", "v");
    pc_txn_clear(f->t);
}

/* One transaction over two collections: all or nothing. */
static void several_collections(void **state)
{
    struct fx *f = *state;
    check_rc(pc_set(f->b, S("k"), S("b0"), 0, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    check_rc(pc_set(f->a, S("k"), S("a1"), 0, 0), PC_OK);
    expect_val(f->b, "k", "b0");
    check_rc(pc_set(f->b, S("k"), S("b1"), 0, 0), PC_OK);
    expect_val(f->a, "k", "a1"); /* same key, other collection: its own entry */
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    check_rc(pc_set(f->b, S("k"), S("b-theirs"), 0, 0), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_ECONFLICT);
    expect_val(f->a, "k", NULL);
    expect_val(f->b, "k", "b-theirs");
    pc_txn_reset(f->t);
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    check_rc(pc_set(f->a, S("k"), S("a1"), 0, 0), PC_OK);
    expect_val(f->b, "k", "b-theirs");
    check_rc(pc_set(f->b, S("k"), S("b1"), 0, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_OK);
    expect_val(f->a, "k", "a1");
    expect_val(f->b, "k", "b1");
}

/* Counters stay native, TTLs follow pc_add / pc_expire / KEEPTTL rules. */
static void counters_and_ttls(void **state)
{
    struct fx *f = *state;
    check_rc(pc_set(f->a, S("s"), S("41"), 0, 0), PC_OK);
    check_rc(pc_set(f->a, S("word"), S("abc"), 0, 0), PC_OK);
    check_rc(pc_set(f->a, S("ttl"), S("x"), 50000, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    int64_t r = 0;
    check_rc(pc_add(f->a, S("s"), 1, 0, &r), PC_OK);
    assert_int_equal(r, 42);
    check_rc(pc_add(f->a, S("s"), 8, 0, &r), PC_OK);
    assert_int_equal(r, 50);
    check_rc(pc_sub(f->a, S("fresh"), 3, 0, &r), PC_OK);
    assert_int_equal(r, -3);
    check_rc(pc_add(f->a, S("word"), 1, 0, &r), PC_ENOTNUM);
    check_rc(pc_set_counter(f->a, S("max"), INT64_MAX, 0), PC_OK);
    check_rc(pc_add(f->a, S("max"), 1, 0, &r), PC_ERANGE);
    check_rc(pc_add(f->a, S("ttl2"), 1, 30000, &r), PC_OK);
    pc_meta m;
    check_rc(pc_probe(f->a, S("s"), &m), PC_OK);
    assert_true(m.is_counter);
    assert_int_equal(m.ttl_ms, -1);
    check_rc(pc_expire(f->a, S("s"), 20000), PC_OK);
    check_rc(pc_set(f->a, S("ttl"), S("y"), 0, PC_SET_KEEPTTL), PC_OK);
    check_rc(pc_expire(f->a, S("nope"), 1000), PC_ENOTFOUND);
    check_rc(pc_probe(f->a, S("ttl"), &m), PC_OK);
    assert_true(m.ttl_ms > 40000 && m.ttl_ms <= 50000);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_OK);
    assert_int_equal(counter(f->a, "s"), 50);
    assert_int_equal(counter(f->a, "fresh"), -3);
    check_rc(pc_probe(f->a, S("s"), &m), PC_OK);
    assert_true(m.is_counter);
    assert_true(m.ttl_ms > 10000 && m.ttl_ms <= 20000);
    check_rc(pc_probe(f->a, S("ttl2"), &m), PC_OK);
    assert_true(m.ttl_ms > 20000 && m.ttl_ms <= 30000);
    expect_val(f->a, "ttl", "y");
    check_rc(pc_probe(f->a, S("ttl"), &m), PC_OK);
    assert_true(m.ttl_ms > 40000 && m.ttl_ms <= 50000);
    expect_val(f->a, "word", "abc");
    assert_int_equal(counter(f->a, "max"), INT64_MAX);
}

/* Many keys in one transaction: each found again (the entry index), after
 * a reset too (the watches stay indexed). */
static void many_keys(void **state)
{
    struct fx *f = *state;
    char k[32];
    for (unsigned i = 0; i < 100; i++) {
        snprintf(k, sizeof k, "w%u", i);
        check_rc(pc_txn_watch(f->t, f->a, k, strlen(k)), PC_OK);
    }
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    for (unsigned i = 0; i < 20000; i++) {
        snprintf(k, sizeof k, "m%u", i);
        check_rc(pc_set(f->b, k, strlen(k), k, strlen(k), 0, 0), PC_OK);
    }
    for (unsigned i = 0; i < 20000; i += 97) {
        snprintf(k, sizeof k, "m%u", i);
        expect_val(f->b, k, k);
    }
    assert_int_equal(pc_txn_writes(f->t), 20000);
    pc_txn_reset(f->t);
    assert_int_equal(pc_txn_writes(f->t), 0);
    expect_val(f->b, "m5", NULL);
    for (unsigned i = 0; i < 100; i++) {
        snprintf(k, sizeof k, "w%u", i);
        check_rc(pc_set(f->a, k, strlen(k), S("x"), 0, 0), PC_OK);
    }
    assert_int_equal(pc_txn_writes(f->t), 100);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_OK);
    expect_val(f->a, "w99", "x");
    expect_val(f->b, "m5", NULL);
}

/* ---- the mutation hook ---------------------------------------------------- */

static int hook_calls, hook_fail_at, hook_ops[8];

static int count_hook(void *ctx, const pc_mutation *m)
{
    (void)ctx;
    if (hook_calls < 8)
        hook_ops[hook_calls] = m->op;
    hook_calls++;
    return hook_calls == hook_fail_at ? PC_ESYS : 0;
}

/* Each written key is handed to the hook once, after the commit; a refusal
 * undoes that write and every later one. */
static void hook_called_per_key(void **state)
{
    struct fx *f = *state;
    check_rc(pc_set(f->a, S("gone"), S("here"), 0, 0), PC_OK);
    check_rc(pc_mutation_hook(f->c, count_hook, NULL), PC_OK);
    check_rc(pc_coll_set_hook_word(f->a, 7), PC_OK);
    hook_calls = 0;
    hook_fail_at = 0;
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    check_rc(pc_set(f->a, S("s"), S("v"), 0, 0), PC_OK);
    check_rc(pc_set(f->a, S("s"), S("v2"), 0, 0), PC_OK); /* one key, one record */
    check_rc(pc_add(f->a, S("n"), 5, 0, NULL), PC_OK);
    check_rc(pc_remove(f->a, S("gone")), PC_OK);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    assert_int_equal(hook_calls, 0);
    check_rc(pc_txn_commit(f->t), PC_OK);
    assert_int_equal(hook_calls, 3);
    assert_int_equal(hook_ops[0], PC_MUT_SET);
    assert_int_equal(hook_ops[1], PC_MUT_COUNTER);
    assert_int_equal(hook_ops[2], PC_MUT_DEL);
    /* the second key's hook refuses: it and the third are undone */
    check_rc(pc_set(f->a, S("gone"), S("here"), 0, 0), PC_OK);
    hook_calls = 0;
    hook_fail_at = 2;
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    check_rc(pc_set(f->a, S("s"), S("v3"), 0, 0), PC_OK);
    check_rc(pc_add(f->a, S("n"), 1, 0, NULL), PC_OK);
    check_rc(pc_remove(f->a, S("gone")), PC_OK);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_ESYS);
    assert_int_equal(hook_calls, 2);
    expect_val(f->a, "s", "v3"); /* the hook took it: it stays */
    assert_int_equal(counter(f->a, "n"), 5);
    expect_val(f->a, "gone", "here");
    /* a write block refuses the commit before anything happens */
    pc_txn_clear(f->t);
    hook_calls = 0;
    hook_fail_at = 0;
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    check_rc(pc_set(f->a, S("blocked"), S("v"), 0, 0), PC_OK);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    check_rc(pc_coll_set_write_block(f->a, PC_EREFUSED), PC_OK);
    check_rc(pc_txn_commit(f->t), PC_EREFUSED);
    check_rc(pc_coll_set_write_block(f->a, 0), PC_OK);
    expect_val(f->a, "blocked", NULL);
    assert_int_equal(hook_calls, 0);
    check_rc(pc_mutation_hook(f->c, NULL, NULL), PC_OK);
    check_rc(pc_coll_set_hook_word(f->a, 0), PC_OK);
}

/* ---- pc_txn_run and forked processes ---------------------------------------- */

struct pair {
    pc_coll *a, *b;
};

/* b first, then 32 other keys, then a: a commit applied key by key without
 * the brackets all open at once would show a reader b ahead of a (the
 * other keys widen that window). */
static int incr_pair(void *ctx)
{
    struct pair *p = ctx;
    int rc = pc_add(p->b, S("pair"), 1, 0, NULL);
    char k[16];
    for (int i = 0; i < 32 && rc == 0; i++) {
        snprintf(k, sizeof k, "fill%d", i);
        rc = pc_add(p->b, k, strlen(k), 1, 0, NULL);
    }
    return rc != 0 ? rc : pc_add(p->a, S("pair"), 1, 0, NULL);
}

static void run_retries_to_success(void **state)
{
    struct fx *f = *state;
    struct pair p = {f->a, f->b};
    for (int i = 0; i < 10; i++)
        check_rc(pc_txn_run(f->c, incr_pair, &p, 0), PC_OK);
    assert_int_equal(counter(f->a, "pair"), 10);
    assert_int_equal(counter(f->b, "pair"), 10);
}

#define TXN_PROCS 3
#define TXN_ITERS 500

static void forked_commits_with_plain_writers(void **state)
{
    struct fx *f = *state;
    struct pair p = {f->a, f->b};
    pid_t kids[TXN_PROCS + 3];
    int nk = 0;
    for (int i = 0; i < TXN_PROCS; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            for (int n = 0; n < TXN_ITERS; n++)
                if (pc_txn_run(f->c, incr_pair, &p, 1000000) != 0)
                    _exit(1);
            _exit(0);
        }
        kids[nk++] = pid;
    }
    /* two plain writers on the same collections: other keys (which share
     * buckets with "pair" now and then) and a plain counter */
    for (int i = 0; i < 2; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            char k[32];
            for (int n = 0; n < 20000; n++) {
                snprintf(k, sizeof k, "w%d-%d", i, n % 512);
                if (pc_set(i ? f->a : f->b, k, strlen(k), S("value"), 0, 0) != 0 ||
                    pc_add(f->a, S("plain"), 1, 0, NULL) != 0)
                    _exit(1);
            }
            _exit(0);
        }
        kids[nk++] = pid;
    }
    /* a reader, for as long as the transactions run: b is never ahead of
     * a (read b first) */
    pid_t rd = fork();
    assert_true(rd >= 0);
    if (rd == 0) {
        int64_t vb = 0;
        for (long n = 0; n < 20000000 && vb < TXN_PROCS * TXN_ITERS; n++) {
            int64_t va = 0;
            int rb = pc_get_counter(f->b, S("pair"), &vb);
            int ra = pc_get_counter(f->a, S("pair"), &va);
            if (rb == 0 && (ra != 0 || va < vb))
                _exit(2);
        }
        _exit(0);
    }
    kids[nk++] = rd;
    for (int i = 0; i < nk; i++) {
        int st = 0;
        assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    assert_int_equal(counter(f->a, "pair"), TXN_PROCS * TXN_ITERS);
    assert_int_equal(counter(f->b, "pair"), TXN_PROCS * TXN_ITERS);
    assert_int_equal(counter(f->a, "plain"), 40000);
}

/* Snapshot reads (pc_snap_begin/pc_snap_end): a write to a key read, or to
 * an absent key read, between the first read and the end is a conflict;
 * reads alone, or writes to buckets not read, are not; a snapshot holds
 * more reads than its first allocation; reads through a bound transaction
 * record nothing. */
static void snapshot_reads(void **state)
{
    struct fx *f = *state;
    check_rc(pc_set(f->a, S("x"), S("1"), 0, 0), PC_OK);
    check_rc(pc_set(f->b, S("y"), S("1"), 0, 0), PC_OK);
    pc_snap_begin(f->c);
    expect_val(f->a, "x", "1");
    expect_val(f->b, "y", "1");
    expect_val(f->a, "absent", NULL);
    check_rc(pc_snap_end(f->c), PC_OK);

    pc_snap_begin(f->c);
    expect_val(f->a, "x", "1");
    check_rc(pc_set(f->a, S("x"), S("2"), 0, 0), PC_OK); /* another writer */
    expect_val(f->b, "y", "1");
    check_rc(pc_snap_end(f->c), PC_ECONFLICT);

    pc_snap_begin(f->c);
    expect_val(f->a, "absent", NULL);
    assert_int_equal(counter(f->b, "y"), 1);
    check_rc(pc_set(f->a, S("absent"), S("now"), 0, 0), PC_OK);
    check_rc(pc_snap_end(f->c), PC_ECONFLICT);

    pc_snap_begin(f->c);
    char k[16];
    for (int i = 0; i < 300; i++) {
        snprintf(k, sizeof k, "many%d", i);
        size_t len = 0, need = 0;
        (void)pc_get_buf(f->a, k, strlen(k), k, sizeof k, &len, &need, NULL);
    }
    check_rc(pc_snap_end(f->c), PC_OK);

    /* the counter is written: recorded reads of it now conflict */
    pc_snap_begin(f->c);
    for (int i = 0; i < 300; i++) {
        snprintf(k, sizeof k, "many%d", i);
        check_rc(pc_probe(f->a, k, strlen(k), NULL), PC_ENOTFOUND);
    }
    check_rc(pc_add(f->a, S("many299"), 1, 0, NULL), PC_OK);
    check_rc(pc_snap_end(f->c), PC_ECONFLICT);

    /* a bound transaction's reads are its own business */
    check_rc(pc_txn_bind(f->c, f->t), PC_OK);
    pc_snap_begin(f->c);
    expect_val(f->a, "x", "2");
    check_rc(pc_set(f->a, S("x"), S("3"), 0, 0), PC_OK); /* staged */
    check_rc(pc_snap_end(f->c), PC_OK);
    check_rc(pc_txn_bind(f->c, NULL), PC_OK);
    pc_txn_clear(f->t);
    check_rc(pc_snap_end(NULL), PC_EINVAL);
}

/* A process committing incr_pair (both counters +1 in one commit) and a
 * reader reading them as one snapshot: every snapshot that pc_snap_end
 * accepts holds two equal counters. */
static void snapshot_against_forked_commits(void **state)
{
    struct fx *f = *state;
    struct pair p = {f->a, f->b};
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (int n = 0; n < 2000; n++)
            if (pc_txn_run(f->c, incr_pair, &p, 1000000) != 0)
                _exit(1);
        _exit(0);
    }
    long ok = 0, retried = 0;
    int st = 0;
    for (;;) {
        int done = waitpid(pid, &st, WNOHANG) == pid;
        int64_t va = 0, vb = 0;
        pc_snap_begin(f->c);
        int rb = pc_get_counter(f->b, S("pair"), &vb);
        int ra = pc_get_counter(f->a, S("pair"), &va);
        if (pc_snap_end(f->c) != 0) {
            retried++;
        } else {
            ok++;
            if (ra != rb || va != vb)
                fail_msg("snapshot a=%lld (rc %d) b=%lld (rc %d)", (long long)va, ra, (long long)vb,
                         rb);
        }
        if (done)
            break;
    }
    print_message("snapshots: %ld accepted, %ld refused\n", ok, retried);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(counter(f->a, "pair"), 2000);
}

/* The child's hook: says it is in, then waits for a byte (or its death). */
static int go_fd[2], in_fd[2];
static int blocking_hook(void *ctx, const pc_mutation *m)
{
    static int calls;
    (void)ctx;
    (void)m;
    char ch = 'i';
    if (calls++ == 0) /* the first of the commit's two writes */
        return write(in_fd[1], &ch, 1) == 1 && read(go_fd[0], &ch, 1) == 1 ? 0 : PC_ESYS;
    return 0;
}

static pid_t fork_blocked_commit(struct fx *f)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (pc_mutation_hook(f->c, blocking_hook, NULL) != 0)
            _exit(2);
        pc_txn *t = NULL;
        if (pc_txn_begin(f->c, &t) != 0 || pc_txn_bind(f->c, t) != 0 ||
            pc_set(f->a, S("q"), S("1"), 0, 0) != 0 || pc_set(f->b, S("q"), S("1"), 0, 0) != 0 ||
            pc_txn_bind(f->c, NULL) != 0)
            _exit(3);
        _exit(pc_txn_commit(t) == 0 ? 0 : 4);
    }
    char ch = 0;
    struct pollfd pf = {.fd = in_fd[0], .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 10000), 1);    /* not forever, should the child fail */
    assert_int_equal(read(in_fd[0], &ch, 1), 1); /* its writes are in, its hooks not done */
    return pid;
}

/* pc_txn_quiesce waits while a transaction of two buckets, already in the
 * table, has hooks still to return (a save's walk may have seen part of
 * it), and stops waiting when they returned or their process died. */
static void quiesce_waits_for_hooks(void **state)
{
    struct fx *f = *state;
    assert_int_equal(pipe(go_fd), 0);
    assert_int_equal(pipe(in_fd), 0);
    check_rc(pc_coll_set_hook_word(f->a, 7), PC_OK);
    check_rc(pc_coll_set_hook_word(f->b, 7), PC_OK);
    check_rc(pc_txn_quiesce(f->c, 0), PC_OK); /* none in flight */
    pid_t pid = fork_blocked_commit(f);
    expect_val(f->a, "q", "1");
    check_rc(pc_txn_quiesce(f->c, 200), PC_ELOCKED);
    char ch = 'g';
    assert_int_equal(write(go_fd[1], &ch, 1), 1);
    check_rc(pc_txn_quiesce(f->c, 10000), PC_OK);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* a process killed inside its hooks hands nothing more over */
    pid = fork_blocked_commit(f);
    check_rc(pc_txn_quiesce(f->c, 200), PC_ELOCKED);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    check_rc(pc_txn_quiesce(f->c, 10000), PC_OK);
    /* ... nor once a live process holds its slot again: reaped, it is a
     * free slot below the high-water mark, and claims take the lowest
     * free ones, so one of HOLDERS live children holds it */
    enum { HOLDERS = 24 };
    assert_true(pc__test_reap_dead(f->c) >= 1);
    pid_t held[HOLDERS];
    for (int i = 0; i < HOLDERS; i++) {
        held[i] = fork();
        assert_true(held[i] >= 0);
        if (held[i] == 0) {
            /* only the parent writes go: its exit (a failed check) ends us */
            close(go_fd[1]);
            alarm(60);
            char ch2 = 'i';
            if (pc_set(f->a, S("r"), S("1"), 0, 0) != 0 || write(in_fd[1], &ch2, 1) != 1)
                _exit(2);
            _exit(read(go_fd[0], &ch2, 1) == 1 ? 0 : 3);
        }
    }
    for (int i = 0; i < HOLDERS; i++) {
        struct pollfd pf = {.fd = in_fd[0], .events = POLLIN};
        assert_int_equal(poll(&pf, 1, 10000), 1);
        assert_int_equal(read(in_fd[0], &ch, 1), 1);
    }
    check_rc(pc_txn_quiesce(f->c, 200), PC_OK);
    for (int i = 0; i < HOLDERS; i++)
        assert_int_equal(write(go_fd[1], &ch, 1), 1);
    for (int i = 0; i < HOLDERS; i++) {
        assert_int_equal(waitpid(held[i], &st, 0), held[i]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    check_rc(pc_txn_quiesce(NULL, 0), PC_EINVAL);
    check_rc(pc_coll_set_hook_word(f->a, 0), PC_OK);
    check_rc(pc_coll_set_hook_word(f->b, 0), PC_OK);
    for (int i = 0; i < 2; i++) {
        close(go_fd[i]);
        close(in_fd[i]);
    }
}

static void bad_arguments(void **state)
{
    struct fx *f = *state;
    pc_txn *t = NULL;
    check_rc(pc_txn_begin(NULL, &t), PC_EINVAL);
    check_rc(pc_txn_begin(f->c, NULL), PC_EINVAL);
    check_rc(pc_txn_watch(f->t, NULL, S("k")), PC_EINVAL);
    static char big[PC_KEY_MAX + 1];
    check_rc(pc_txn_watch(f->t, f->a, big, sizeof big), PC_ETOOBIG);
    check_rc(pc_txn_commit(NULL), PC_EINVAL);
    check_rc(pc_txn_run(f->c, NULL, NULL, 0), PC_EINVAL);
    assert_string_equal(pc_strerror(PC_ECONFLICT),
                        "transaction conflict: a key changed before the commit");
    pc_txn_free(NULL);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(overlay_then_commit),
        T(conflict_on_a_changed_key),
        T(conflict_on_a_created_key),
        T(watch_is_per_key),
        T(watch_counter_in_place),
        T(watch_then_read),
        T(conflict_on_expiry_changes),
        T(commit_across_a_split),
        T(several_collections),
        T(counters_and_ttls),
        T(many_keys),
        T(hook_called_per_key),
        T(run_retries_to_success),
        T(forked_commits_with_plain_writers),
        T(snapshot_reads),
        T(snapshot_against_forked_commits),
        T(quiesce_waits_for_hooks),
        T(bad_arguments),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
