/*
 * test_stats.c - the per-collection statistics: sums over processes, the
 * pc_stats_reset baseline and the hit-rate note.
 *
 * Every process counts into its own shared line and pc_coll_stats_get sums
 * them, so counts made by children that have since exited must still be in
 * the parent's snapshot, exactly. pc_stats_reset records a baseline: the
 * counters (hits .. nomem) restart from zero and keep counting, the gauges
 * (entries, buckets, overflow) do not move, another collection is not
 * touched, and reset_at is set. pc_hit_rate_note must follow the measured
 * value: the rate it returns is hits / (hits + misses), -1 with no reads,
 * and the note never tells a collection that was never written to that its
 * state is being lost or is expiring (entries 0, stores 0, only misses).
 * It does not cover the per-operation
 * counters of test_ops.c beyond what these properties need.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pc_fixture.h"
#include "pcache.h"

#define check_rc(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr), want_ = (want);                                                          \
        if (rc_ != want_)                                                                          \
            fail_msg("%s = %d (%s), want %d (%s)", #expr, rc_, pc_strerror(rc_), want_,            \
                     pc_strerror(want_));                                                          \
    } while (0)

static void log_cb(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= PC_LOG_WARN)
        print_message("[pcache %d] %s\n", level, msg);
}

static pc_cache *mk_cache(const char *colls)
{
    pc_config cfg;
    pc_fx_config(&cfg, colls, 16);
    cfg.log.fn = log_cb;
    return pc_fx_create(&cfg);
}

static pc_coll_stats stats(pc_coll *co)
{
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(co, &st), PC_OK);
    return st;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static size_t key(char *k, const char *tag, int i)
{
    return (size_t)sprintf(k, "%s:%d", tag, i);
}

static double absd(double x)
{
    return x < 0 ? -x : x;
}

/* Field by field: the struct has padding that a byte compare would read. */
static int same_stats(const pc_coll_stats *x, const pc_coll_stats *y)
{
    return x->entries == y->entries && x->buckets == y->buckets && x->overflow == y->overflow &&
           x->hits == y->hits && x->misses == y->misses && x->stores == y->stores &&
           x->removes == y->removes && x->expired == y->expired && x->destroyed == y->destroyed &&
           x->reads == y->reads && x->seqlock_retries == y->seqlock_retries &&
           x->lock_fallbacks == y->lock_fallbacks && x->nomem == y->nomem &&
           x->splits == y->splits && x->log2_initial == y->log2_initial &&
           x->reset_at == y->reset_at;
}

/* Case-insensitive substring search. */
static int has_word(const char *s, const char *w)
{
    size_t n = strlen(w);
    for (; *s != '\0'; s++) {
        size_t i = 0;
        while (i < n && s[i] != '\0' && tolower((unsigned char)s[i]) == w[i])
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

/* ---- sums across processes ------------------------------------------------------ */

/* Child w's known mix: 10w+3 hits, 5w+2 misses, 20w stores, 4w removes,
 * plus operations that must not count (a failed NX set, removing an absent
 * key). Returns the number of calls that did not return what they should. */
static int child_ops(pc_coll *co, int w)
{
    char k[32], buf[64];
    int bad = 0;
    for (int i = 0; i < 20 * w; i++) /* stores of own keys */
        bad += pc_set(co, k, key(k, "own", w * 1000 + i), "v", 1, 0, 0) != 0;
    for (int i = 0; i < 10 * w + 3; i++) { /* hits, through each read */
        size_t kl = key(k, "pre", i % 50), vl = 0, need = 0;
        int64_t n;
        if (i % 3 == 0)
            bad += pc_get_buf(co, k, kl, buf, sizeof buf, &vl, &need, NULL) != 0;
        else if (i % 3 == 1)
            bad += pc_probe(co, k, kl, NULL) != 0;
        else
            bad += pc_get_counter(co, "ctr", 3, &n) != 0;
    }
    for (int i = 0; i < 5 * w + 2; i++) { /* misses */
        void *v = NULL;
        size_t vl = 0;
        bad += pc_get(co, k, key(k, "absent", w * 1000 + i), &v, &vl, NULL) != PC_ENOTFOUND;
    }
    for (int i = 0; i < 4 * w; i++) /* removes */
        bad += pc_remove(co, k, key(k, "own", w * 1000 + i)) != 0;
    bad += pc_set(co, k, key(k, "pre", 0), "x", 1, 0, PC_SET_NX) != PC_EEXIST;
    bad += pc_remove(co, k, key(k, "absent", 1)) != PC_ENOTFOUND;
    return bad;
}

static void stats_sum_across_processes(void **state)
{
    (void)state;
    enum { NCHILD = 3 };
    pc_cache *c = mk_cache("st=8;other=8");
    pc_coll *co = pc_fx_coll(c, "st"), *other = pc_fx_coll(c, "other");
    char k[32];
    for (int i = 0; i < 50; i++)
        check_rc(pc_set(co, k, key(k, "pre", i), "value", 5, 0, 0), PC_OK);
    check_rc(pc_add(co, "ctr", 3, 7, 0, NULL), PC_OK);
    pid_t pids[NCHILD];
    for (int w = 1; w <= NCHILD; w++) {
        pids[w - 1] = fork();
        assert_true(pids[w - 1] >= 0);
        if (pids[w - 1] == 0) {
            signal(SIGABRT, SIG_DFL);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            _exit(child_ops(co, w) == 0 ? 0 : 1);
        }
    }
    for (int i = 0; i < NCHILD; i++) {
        int st = 0;
        assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    uint64_t hits = 0, misses = 0, stores = 51, removes = 0;
    for (int w = 1; w <= NCHILD; w++) {
        hits += 10u * (unsigned)w + 3;
        misses += 5u * (unsigned)w + 2;
        stores += 20u * (unsigned)w;
        removes += 4u * (unsigned)w;
    }
    pc_coll_stats st = stats(co);
    print_message("after %d children: hits %" PRIu64 " misses %" PRIu64 " stores %" PRIu64
                  " removes %" PRIu64 " entries %" PRIu64 "\n",
                  NCHILD, st.hits, st.misses, st.stores, st.removes, st.entries);
    assert_int_equal(st.hits, hits);
    assert_int_equal(st.misses, misses);
    assert_int_equal(st.reads, hits + misses);
    assert_int_equal(st.stores, stores);
    assert_int_equal(st.removes, removes);
    assert_int_equal(st.entries, stores - removes);
    assert_int_equal(st.nomem, 0);
    /* the parent keeps counting on top of the dead children's lines */
    check_rc(pc_probe(co, k, key(k, "pre", 1), NULL), PC_OK);
    st = stats(co);
    assert_int_equal(st.hits, hits + 1);
    pc_coll_stats so = stats(other);
    assert_int_equal(so.hits + so.misses + so.stores + so.removes + so.reads + so.entries, 0);
    pc_cache_destroy(c);
}

/* One pc_get is one read, whatever the value's size: a value too big for
 * pc_get's first attempt must not be counted as two hits. */
static void get_of_large_value_counts_one_hit(void **state)
{
    (void)state;
    pc_cache *c = mk_cache("st=8");
    pc_coll *co = pc_fx_coll(c, "st");
    static char big[4000];
    memset(big, 'b', sizeof big);
    check_rc(pc_set(co, "small", 5, "v", 1, 0, 0), PC_OK);
    check_rc(pc_set(co, "big", 3, big, sizeof big, 0, 0), PC_OK);
    void *v = NULL;
    size_t vl = 0;
    check_rc(pc_get(co, "small", 5, &v, &vl, NULL), PC_OK);
    free(v);
    pc_coll_stats st = stats(co);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.reads, 1);
    check_rc(pc_get(co, "big", 3, &v, &vl, NULL), PC_OK);
    assert_int_equal(vl, sizeof big);
    free(v);
    st = stats(co);
    pc_cache_destroy(c); /* before judging, so a failure leaks nothing */
    if (st.hits != 2 || st.reads != 2)
        fail_msg("after one pc_get of a %zu-byte value: hits %" PRIu64 " reads %" PRIu64
                 " (want 2 and 2: one more of each)",
                 sizeof big, st.hits, st.reads);
}

/* ---- the reset baseline ------------------------------------------------------------ */

static void reset_restarts_counters_not_gauges(void **state)
{
    (void)state;
    pc_cache *c = mk_cache("a=4;b=8");
    pc_coll *a = pc_fx_coll(c, "a"), *b = pc_fx_coll(c, "b");
    char k[32];
    for (int i = 0; i < 250; i++) /* 16 buckets: some of these land in overflow */
        check_rc(pc_set(a, k, key(k, "k", i), "v", 1, 0, 0), PC_OK);
    for (int i = 0; i < 5; i++)
        check_rc(pc_set(a, k, key(k, "short", i), "v", 1, 20, 0), PC_OK);
    for (int i = 0; i < 7; i++)
        check_rc(pc_set(b, k, key(k, "b", i), "v", 1, 0, 0), PC_OK);
    for (int i = 0; i < 4; i++)
        check_rc(pc_probe(b, k, key(k, "b", i), NULL), PC_OK);
    for (int i = 0; i < 6; i++)
        check_rc(pc_probe(a, k, key(k, "k", i), NULL), PC_OK);
    check_rc(pc_probe(a, "nope", 4, NULL), PC_ENOTFOUND);
    check_rc(pc_remove(a, k, key(k, "k", 0)), PC_OK);
    sleep_ms(40);
    check_rc(pc_maintain(c, PC_MAINT_SWEEP, NULL), PC_OK); /* 5 expired */
    pc_coll_stats a0 = stats(a), b0 = stats(b);
    assert_int_equal(a0.expired, 5);
    assert_true(a0.overflow > 0);
    assert_int_equal(a0.reset_at, 0);
    time_t t0 = time(NULL);
    check_rc(pc_stats_reset(a), PC_OK);
    time_t t1 = time(NULL);
    pc_coll_stats a1 = stats(a), b1 = stats(b);
    /* counters restart from zero */
    assert_int_equal(a1.hits + a1.misses + a1.stores + a1.removes + a1.expired + a1.destroyed +
                         a1.reads + a1.seqlock_retries + a1.lock_fallbacks + a1.nomem,
                     0);
    /* gauges do not move */
    assert_int_equal(a1.entries, a0.entries);
    assert_int_equal(a1.buckets, a0.buckets);
    assert_int_equal(a1.overflow, a0.overflow);
    assert_int_equal(a1.log2_initial, 4);
    assert_true(a1.reset_at >= (int64_t)t0 && a1.reset_at <= (int64_t)t1);
    /* the other collection is untouched */
    assert_true(same_stats(&b1, &b0));
    assert_int_equal(b1.hits, 4);
    assert_int_equal(b1.stores, 7);
    /* and the reset collection keeps counting from its baseline */
    for (int i = 0; i < 3; i++)
        check_rc(pc_set(a, k, key(k, "new", i), "v", 1, i == 0 ? 20 : 0, 0), PC_OK);
    check_rc(pc_probe(a, k, key(k, "k", 9), NULL), PC_OK);
    check_rc(pc_probe(a, k, key(k, "k", 10), NULL), PC_OK);
    check_rc(pc_probe(a, k, key(k, "k", 0), NULL), PC_ENOTFOUND);
    check_rc(pc_remove(a, k, key(k, "k", 1)), PC_OK);
    sleep_ms(40);
    check_rc(pc_maintain(c, PC_MAINT_SWEEP, NULL), PC_OK);
    pc_coll_stats a2 = stats(a);
    assert_int_equal(a2.stores, 3);
    assert_int_equal(a2.hits, 2);
    assert_int_equal(a2.misses, 1);
    assert_int_equal(a2.reads, 3);
    assert_int_equal(a2.removes, 1);
    assert_int_equal(a2.expired, 1);
    assert_int_equal(a2.destroyed, 2); /* one removed, one reaped */
    assert_int_equal(a2.entries, a0.entries + 3 - 1 - 1);
    assert_int_equal(a2.reset_at, a1.reset_at);
    /* the cumulative view ignores the baseline: before + after the reset */
    pc_coll_stats at;
    check_rc(pc_coll_stats_total(a, &at), PC_OK);
    assert_int_equal(at.stores, a0.stores + a2.stores);
    assert_int_equal(at.hits, a0.hits + a2.hits);
    assert_int_equal(at.misses, a0.misses + a2.misses);
    assert_int_equal(at.expired, a0.expired + a2.expired);
    assert_int_equal(at.entries, a2.entries);
    assert_int_equal(at.reset_at, a2.reset_at);
    check_rc(pc_coll_stats_total(NULL, &at), PC_EINVAL);
    /* a reset made in another process is the shared baseline */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGABRT, SIG_DFL);
        int bad = pc_stats_reset(a) != 0;
        for (int i = 0; i < 4; i++)
            bad += pc_probe(a, k, key(k, "k", 20 + i), NULL) != 0;
        _exit(bad);
    }
    int wst = 0;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    pc_coll_stats a3 = stats(a);
    assert_int_equal(a3.hits, 4);
    assert_int_equal(a3.reads, 4);
    assert_int_equal(a3.stores + a3.misses + a3.removes + a3.expired, 0);
    assert_int_equal(a3.entries, a2.entries);
    assert_true(a3.reset_at >= a1.reset_at);
    assert_true(same_stats(&b1, &b0));
    check_rc(pc_stats_reset(NULL), PC_EINVAL);
    pc_cache_destroy(c);
}

/* ---- the hit-rate note ------------------------------------------------------------- */

static pc_coll_stats snap(uint64_t entries, uint64_t stores, uint64_t hits, uint64_t misses)
{
    pc_coll_stats st;
    memset(&st, 0, sizeof st);
    st.entries = entries;
    st.stores = stores;
    st.hits = hits;
    st.misses = misses;
    st.reads = hits + misses;
    st.buckets = 256;
    return st;
}

static const char *const loss_words[] = {"lost", "losing", "expir", "evict", "ttl"};

static int says_loss(const char *note)
{
    for (size_t i = 0; i < sizeof loss_words / sizeof loss_words[0]; i++)
        if (has_word(note, loss_words[i]))
            return 1;
    return 0;
}

static void hit_rate_note_zero_reads(void **state)
{
    (void)state;
    pc_coll_stats st = snap(0, 0, 0, 0);
    double rate = 7;
    const char *note = pc_hit_rate_note(&st, &rate);
    assert_non_null(note);
    assert_true(rate == -1.0);
    print_message("no reads: \"%s\"\n", note);
    assert_false(says_loss(note));
    assert_false(has_word(note, "healthy") || has_word(note, "low"));
    st = snap(500, 500, 0, 0); /* a busy writer with no reads yet */
    rate = 7;
    assert_string_equal(pc_hit_rate_note(&st, &rate), note);
    assert_true(rate == -1.0);
    assert_non_null(pc_hit_rate_note(&st, NULL));
    /* and from a real, untouched collection */
    pc_cache *c = mk_cache("fresh=6");
    st = stats(pc_fx_coll(c, "fresh"));
    assert_string_equal(pc_hit_rate_note(&st, &rate), note);
    assert_true(rate == -1.0);
    pc_cache_destroy(c);
}

/* Seed 000: a collection nothing was ever written to (rtpdebug: entries 0,
 * stores 0, misses 9) was told its state was being lost or expiring. */
static void hit_rate_note_rtpdebug_is_not_loss(void **state)
{
    (void)state;
    pc_cache *c = mk_cache("default;rtpdebug=6");
    pc_coll *co = pc_fx_coll(c, "rtpdebug");
    char k[32];
    for (int i = 0; i < 9; i++) {
        void *v = NULL;
        size_t vl = 0;
        check_rc(pc_get(co, k, key(k, "rtp", i), &v, &vl, NULL), PC_ENOTFOUND);
    }
    pc_coll_stats st = stats(co);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.stores, 0);
    assert_int_equal(st.misses, 9);
    assert_int_equal(st.hits, 0);
    double rate = -5;
    const char *note = pc_hit_rate_note(&st, &rate);
    print_message("rtpdebug: rate %.2f, \"%s\"\n", rate, note);
    assert_true(rate == 0.0);
    if (says_loss(note))
        fail_msg("a never-written collection is told its state is lost/expiring: \"%s\"", note);
    /* the same rate with writes is a different situation and gets another note */
    pc_coll_stats churn = snap(0, 9, 0, 9);
    assert_string_not_equal(pc_hit_rate_note(&churn, NULL), note);
    /* the snapshot alone decides, whatever collection it came from */
    pc_coll_stats lit = snap(0, 0, 0, 9);
    assert_string_equal(pc_hit_rate_note(&lit, NULL), note);
    /* and after a reset baseline: writes before it, none since */
    pc_coll *d = pc_fx_coll(c, "default");
    check_rc(pc_set(d, "x", 1, "v", 1, 0, 0), PC_OK);
    check_rc(pc_remove(d, "x", 1), PC_OK);
    check_rc(pc_stats_reset(d), PC_OK);
    for (int i = 0; i < 9; i++)
        check_rc(pc_probe(d, k, key(k, "rtp", i), NULL), PC_ENOTFOUND);
    st = stats(d);
    assert_false(says_loss(pc_hit_rate_note(&st, NULL)));
    pc_cache_destroy(c);
}

/* With writes present, the rate returned is hits / reads and the note
 * depends only on it: equal rates give equal notes, the notes change only
 * as the rate crosses thresholds and never come back, high rates never
 * speak of loss and low rates never of health. */
static void hit_rate_note_follows_value(void **state)
{
    (void)state;
    const char *seq[64];
    size_t nseq = 0;
    for (unsigned h = 0; h <= 200; h++) {
        pc_coll_stats st = snap(1000, 50, h, 200 - h);
        double rate = -5;
        const char *note = pc_hit_rate_note(&st, &rate);
        assert_non_null(note);
        if (absd(rate - h / 200.0) > 1e-12)
            fail_msg("hits %u misses %u: rate %f", h, 200 - h, rate);
        pc_coll_stats scaled = snap(3, 1, 5ull * h, 5ull * (200 - h));
        assert_string_equal(pc_hit_rate_note(&scaled, NULL), note);
        if (rate >= 0.95 && (says_loss(note) || has_word(note, "low")))
            fail_msg("rate %.3f: \"%s\"", rate, note);
        if (rate <= 0.2 && (has_word(note, "healthy") || has_word(note, "good")))
            fail_msg("rate %.3f: \"%s\"", rate, note);
        if (nseq == 0 || strcmp(seq[nseq - 1], note) != 0) {
            for (size_t i = 0; i < nseq; i++)
                if (strcmp(seq[i], note) == 0)
                    fail_msg("rate %.3f returns to an earlier note: \"%s\"", rate, note);
            assert_true(nseq < 64);
            seq[nseq++] = note;
            print_message("from rate %.3f: \"%s\"\n", rate, note);
        }
    }
    assert_true(nseq >= 2); /* the note does follow the value */
    /* real traffic lands on the same notes */
    pc_cache *c = mk_cache("hi=6;lo=6");
    pc_coll *hi = pc_fx_coll(c, "hi"), *lo = pc_fx_coll(c, "lo");
    char k[32];
    for (int i = 0; i < 100; i++) {
        check_rc(pc_set(hi, k, key(k, "k", i), "v", 1, 0, 0), PC_OK);
        check_rc(pc_probe(hi, k, key(k, "k", i), NULL), PC_OK);
    }
    check_rc(pc_probe(hi, "none", 4, NULL), PC_ENOTFOUND);
    check_rc(pc_set(lo, "k", 1, "v", 1, 0, 0), PC_OK);
    check_rc(pc_probe(lo, "k", 1, NULL), PC_OK);
    for (int i = 0; i < 99; i++)
        check_rc(pc_probe(lo, k, key(k, "gone", i), NULL), PC_ENOTFOUND);
    pc_coll_stats sh = stats(hi), sl = stats(lo);
    double rh, rl;
    const char *nh = pc_hit_rate_note(&sh, &rh), *nl = pc_hit_rate_note(&sl, &rl);
    assert_true(absd(rh - 100.0 / 101.0) < 1e-12 && absd(rl - 0.01) < 1e-12);
    pc_coll_stats lh = snap(0, 1, 100, 1), ll = snap(0, 1, 1, 99);
    assert_string_equal(nh, pc_hit_rate_note(&lh, NULL));
    assert_string_equal(nl, pc_hit_rate_note(&ll, NULL));
    assert_string_not_equal(nh, nl);
    pc_cache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stats_sum_across_processes),
        cmocka_unit_test(get_of_large_value_counts_one_hit),
        cmocka_unit_test(reset_restarts_counters_not_gauges),
        cmocka_unit_test(hit_rate_note_zero_reads),
        cmocka_unit_test(hit_rate_note_rtpdebug_is_not_loss),
        cmocka_unit_test(hit_rate_note_follows_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
