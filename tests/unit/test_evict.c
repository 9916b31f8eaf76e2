/*
 * test_evict.c - eviction (src/engine/evict.c, pcache.h "eviction"): the
 * policy names, noeviction's refusal at the cap, every policy keeping
 * writes going at the cap, what each keeps (read keys under LRU and
 * S3-FIFO, keys without a TTL under volatile-*), the mutation hook's
 * PC_MUT_EVICT and the evicted event, eviction ahead of need in
 * pc_maintain, and forked writers evicting while a reader checks that every
 * value it reads is the one its key was written with.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pc_fixture.h"
#include "pcache.h"

#define CAP (2u << 20) /* maxmemory of the tests: 2 MiB of chunks */
#define VLEN 200u

static void check_rc(int got, int want)
{
    if (got != want)
        fail_msg("rc %d (%s), wanted %d (%s)", got, pc_strerror(got), want, pc_strerror(want));
}

/* key i's value: its bytes say which key and which generation wrote it */
static void make_val(char *v, unsigned i, unsigned gen)
{
    memset(v, 'a' + (int)((i + gen) % 26), VLEN);
    snprintf(v, 24, "k%u/g%u/", i, gen);
}

static int put(pc_coll *co, unsigned i, unsigned gen, int64_t ttl_ms)
{
    char k[32], v[VLEN];
    int kl = snprintf(k, sizeof k, "key:%08u", i);
    make_val(v, i, gen);
    return pc_set(co, k, (size_t)kl, v, VLEN, ttl_ms, 0);
}

static bool present(pc_coll *co, unsigned i)
{
    char k[32], v[VLEN];
    int kl = snprintf(k, sizeof k, "key:%08u", i);
    size_t len = 0, need = 0;
    return pc_get_buf(co, k, (size_t)kl, v, sizeof v, &len, &need, NULL) == PC_OK;
}

static pc_cache *capped(const char *colls, int policy, pc_coll **co)
{
    pc_cache *c = pc_fx_cache(colls, 32);
    check_rc(pc_set_maxmemory(c, CAP), PC_OK);
    assert_int_equal(pc_maxmemory(c), CAP);
    *co = pc_fx_coll(c, "a");
    check_rc(pc_coll_set_eviction(*co, policy), PC_OK);
    assert_int_equal(pc_coll_eviction(*co), policy);
    return c;
}

static void test_policy_names(void **state)
{
    (void)state;
    static const char *names[] = {"noeviction",     "allkeys-lru",     "volatile-lru",
                                  "allkeys-s3fifo", "volatile-s3fifo", "allkeys-random",
                                  "volatile-random"};
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
        int p = -1;
        check_rc(pc_evict_policy_parse(names[i], strlen(names[i]), &p), PC_OK);
        assert_string_equal(pc_evict_policy_name(p), names[i]);
    }
    int p = -1;
    check_rc(pc_evict_policy_parse("ALLKEYS-LRU", 11, &p), PC_OK);
    assert_int_equal(p, PC_EVICT_LRU);
    check_rc(pc_evict_policy_parse("allkeys-lfu", 11, &p), PC_EINVAL);
    check_rc(pc_evict_policy_parse("volatile-ttl", 12, &p), PC_EINVAL);
    check_rc(pc_evict_policy_parse("allkeys-lru ", 12, &p), PC_EINVAL);
    pc_cache *c = pc_fx_cache("a", 16);
    pc_coll *co = pc_fx_coll(c, "a");
    check_rc(pc_coll_set_eviction(co, 7), PC_EINVAL);
    check_rc(pc_coll_set_eviction(co, PC_EVICT_VOLATILE), PC_EINVAL);
    assert_int_equal(pc_coll_eviction(co), PC_EVICT_NONE);
    pc_cache_destroy(c);
}

/* noeviction at the cap refuses, counts, evicts nothing; the chunks stay
 * within the cap (one chunk of slack per carving process) */
static void test_noeviction_refuses(void **state)
{
    (void)state;
    pc_coll *co;
    pc_cache *c = capped("a", PC_EVICT_NONE, &co);
    unsigned ok = 0, refused = 0;
    for (unsigned i = 0; i < 40000 && refused == 0; i++) {
        int rc = put(co, i, 0, 0);
        if (rc == PC_OK)
            ok++;
        else if (rc == PC_ENOMEM)
            refused++;
        else
            check_rc(rc, PC_OK);
    }
    assert_int_equal(refused, 1);
    assert_true(ok > 5000); /* 2 MiB of 232-byte cells */
    pc_mem_stats m;
    check_rc(pc_mem_stats_get(c, &m), PC_OK);
    assert_true(m.chunk_bytes <= CAP + 65536);
    assert_int_equal(m.maxmemory, CAP);
    assert_int_equal(m.evicted, 0);
    pc_cache_destroy(c);
}

/* writes 20x what fits; every write succeeds; the keys read between the
 * writes (the hot set) are still there at the end */
static void keeps_hot(int policy, unsigned min_hot_pct)
{
    pc_coll *co;
    pc_cache *c = capped("a", policy, &co);
    const unsigned hot = 500, total = 150000;
    for (unsigned i = 0; i < hot; i++)
        check_rc(put(co, i, 0, 0), PC_OK);
    for (unsigned i = hot; i < total; i++) {
        check_rc(put(co, i, 0, 0), PC_OK);
        (void)present(co, i % hot); /* every hot key is read every 500 writes */
    }
    unsigned kept = 0;
    for (unsigned i = 0; i < hot; i++)
        kept += present(co, i);
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(co, &st), PC_OK);
    pc_mem_stats m;
    check_rc(pc_mem_stats_get(c, &m), PC_OK);
    print_message("%s: %u/%u hot kept, %llu evicted, %llu entries, chunks %llu B\n",
                  pc_evict_policy_name(policy), kept, hot, (unsigned long long)st.evicted,
                  (unsigned long long)st.entries, (unsigned long long)m.chunk_bytes);
    assert_true(st.evicted > total / 2);
    assert_int_equal(st.evicted, m.evicted);
    assert_int_equal(st.nomem, 0);
    assert_true(st.entries + st.evicted >= total - 100); /* nothing lost but the evicted */
    assert_true(m.chunk_bytes <= CAP + 65536);
    assert_true(kept * 100 >= hot * min_hot_pct);
    pc_cache_destroy(c);
}

static void test_lru_keeps_read_keys(void **state)
{
    (void)state;
    keeps_hot(PC_EVICT_LRU, 95);
}

static void test_s3fifo_keeps_read_keys(void **state)
{
    (void)state;
    keeps_hot(PC_EVICT_S3FIFO, 95);
}

static void test_random_keeps_writing(void **state)
{
    (void)state;
    keeps_hot(PC_EVICT_RANDOM, 0);
}

/* volatile-*: keys without a TTL are never taken; with only those left
 * the write is refused */
static void test_volatile_spares_persistent_keys(void **state)
{
    (void)state;
    static const int pols[] = {PC_EVICT_LRU | PC_EVICT_VOLATILE,
                               PC_EVICT_S3FIFO | PC_EVICT_VOLATILE,
                               PC_EVICT_RANDOM | PC_EVICT_VOLATILE};
    for (unsigned p = 0; p < 3; p++) {
        pc_coll *co;
        pc_cache *c = capped("a", pols[p], &co);
        const unsigned fixed = 3000;
        for (unsigned i = 0; i < fixed; i++)
            check_rc(put(co, i, 0, 0), PC_OK);
        for (unsigned i = fixed; i < 60000; i++)
            check_rc(put(co, i, 0, 3600000), PC_OK);
        for (unsigned i = 0; i < fixed; i++)
            if (!present(co, i))
                fail_msg("%s evicted key %u, which has no TTL", pc_evict_policy_name(pols[p]), i);
        /* now only keys without a TTL: fill until refused */
        int rc = PC_OK;
        for (unsigned i = 100000; i < 200000 && rc == PC_OK; i++)
            rc = put(co, i, 0, 0);
        check_rc(rc, PC_ENOMEM);
        for (unsigned i = 0; i < fixed; i++)
            assert_true(present(co, i));
        pc_cache_destroy(c);
    }
}

struct seen {
    unsigned evict_ops, other_ops, events;
    char last_key[32];
};

static int hook(void *ctx, const pc_mutation *m)
{
    struct seen *s = ctx;
    if (m->op == PC_MUT_EVICT) {
        s->evict_ops++;
        assert_true(m->klen < sizeof s->last_key);
        memcpy(s->last_key, m->key, m->klen);
        s->last_key[m->klen] = '\0';
    } else {
        s->other_ops++;
    }
    return 0;
}

static void on_event(void *ctx, const pc_event *ev)
{
    struct seen *s = ctx;
    if (ev->type == PC_EV_EVICTED) {
        assert_string_equal(ev->collection, "a");
        assert_true(ev->klen > 4 && memcmp(ev->key, "key:", 4) == 0);
        s->events++;
    }
}

/* each eviction reaches the hook as PC_MUT_EVICT and raises the event */
static void test_hook_and_event(void **state)
{
    (void)state;
    pc_coll *co;
    pc_cache *c = capped("a", PC_EVICT_LRU, &co);
    struct seen s = {0};
    check_rc(pc_mutation_hook(c, hook, &s), PC_OK);
    check_rc(pc_coll_set_hook_word(co, 1), PC_OK);
    check_rc(pc_event_handler(c, on_event, &s), PC_OK);
    check_rc(pc_event_subscribe(c, PC_EV_EVICTED, 1), PC_OK);
    check_rc(pc_event_evicted(co, 1), PC_OK);
    for (unsigned i = 0; i < 30000; i++)
        check_rc(put(co, i, 0, 0), PC_OK);
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(co, &st), PC_OK);
    assert_true(st.evicted > 0);
    assert_int_equal(s.evict_ops, st.evicted);
    assert_int_equal(s.events, st.evicted);
    assert_int_equal(s.other_ops, 30000);
    /* the key the hook saw last is gone */
    unsigned last = 0;
    assert_int_equal(sscanf(s.last_key, "key:%u", &last), 1);
    assert_false(present(co, last));
    pc_cache_destroy(c);
}

/* pc_maintain evicts ahead of need once the arena is at its cap */
static void test_maintain_evicts_ahead(void **state)
{
    (void)state;
    pc_coll *co;
    pc_cache *c = capped("a", PC_EVICT_S3FIFO, &co);
    for (unsigned i = 0; i < 20000; i++)
        check_rc(put(co, i, 0, 0), PC_OK);
    pc_maint_report r;
    check_rc(pc_maintain(c, PC_MAINT_EVICT, &r), PC_OK);
    assert_true(r.evicted > 0);
    pc_mem_stats m;
    check_rc(pc_mem_stats_get(c, &m), PC_OK);
    assert_true(m.free_cell_bytes >= m.chunk_bytes / 64 || r.evicted == 1024);
    /* without a cap reached there is nothing to do */
    check_rc(pc_set_maxmemory(c, 0), PC_OK);
    check_rc(pc_maintain(c, PC_MAINT_EVICT, &r), PC_OK);
    assert_int_equal(r.evicted, 0);
    pc_cache_destroy(c);
}

/* forked writers evict while a reader checks every value it reads */
static void test_forked_writers_and_reader(void **state)
{
    (void)state;
    pc_coll *co;
    pc_cache *c = capped("a", PC_EVICT_S3FIFO, &co);
    pid_t kids[3];
    for (int w = 0; w < 3; w++) {
        if ((kids[w] = fork()) == 0) {
            int bad = 0;
            if (w < 2) {
                for (unsigned n = 0; n < 60000; n++) {
                    unsigned i = (unsigned)(random() % 40000);
                    if (put(co, i, (unsigned)w + 1, 0) != PC_OK)
                        bad++;
                }
            } else {
                for (unsigned n = 0; n < 200000; n++) {
                    unsigned i = (unsigned)(random() % 40000);
                    char k[32], v[VLEN], want[VLEN];
                    int kl = snprintf(k, sizeof k, "key:%08u", i);
                    size_t len = 0, need = 0;
                    if (pc_get_buf(co, k, (size_t)kl, v, sizeof v, &len, &need, NULL) != PC_OK)
                        continue;
                    unsigned gen = 0;
                    char tail[24];
                    if (len != VLEN || sscanf(v, "k%*u/g%u/", &gen) != 1) {
                        bad++;
                        continue;
                    }
                    make_val(want, i, gen);
                    snprintf(tail, sizeof tail, "k%u/", i);
                    if (memcmp(v, want, VLEN) != 0 || strncmp(v, tail, strlen(tail)) != 0)
                        bad++;
                }
            }
            _exit(bad == 0 ? 0 : 1);
        }
    }
    for (int w = 0; w < 3; w++) {
        int st = 0;
        assert_int_equal(waitpid(kids[w], &st, 0), kids[w]);
        assert_true(WIFEXITED(st));
        if (WEXITSTATUS(st) != 0)
            fail_msg("child %d saw a refused write or a wrong value", w);
    }
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(co, &st), PC_OK);
    assert_true(st.evicted > 0);
    assert_int_equal(st.nomem, 0);
    pc_cache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_names),
        cmocka_unit_test(test_noeviction_refuses),
        cmocka_unit_test(test_lru_keeps_read_keys),
        cmocka_unit_test(test_s3fifo_keeps_read_keys),
        cmocka_unit_test(test_random_keeps_writing),
        cmocka_unit_test(test_volatile_spares_persistent_keys),
        cmocka_unit_test(test_hook_and_event),
        cmocka_unit_test(test_maintain_evicts_ahead),
        cmocka_unit_test(test_forked_writers_and_reader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
