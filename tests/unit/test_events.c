/*
 * test_events.c - the five events of pcache.h and their subscriptions.
 *
 * A recording handler copies every event it is given (the event is borrowed
 * for the call), and each test provokes one event the way production does:
 * grown through pc_maintain's growth, expired through the sweep (opt-in per
 * collection, binary keys intact, each reaped key once, from bucket slots
 * and overflow chains alike), nomem through a deliberately small arena,
 * reloaded (named "synced") through pc_event_reloaded, and mem_degraded
 * through a huge-page request on a machine without hugetlb (skipped, saying
 * so, where hugetlb is available). Also: no subscriber means the handler is never called,
 * unsubscribing stops events, the shared mask is seen by every process
 * while the handler stays in the process that observes the event.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pc_fixture.h"
#include "pc_testhooks.h"
#include "pc_testrun.h"
#include "pcache.h"

#define check_rc(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr), want_ = (want);                                                          \
        if (rc_ != want_)                                                                          \
            fail_msg("%s = %d (%s), want %d (%s)", #expr, rc_, pc_strerror(rc_), want_,            \
                     pc_strerror(want_));                                                          \
    } while (0)

/* ---- the recording handler --------------------------------------------------- */
struct rec_ev { /* a deep copy of one pc_event */
    pc_event ev;
    char coll[PC_COLL_NAME_MAX + 1], backing[16], source[64];
    unsigned char key[64];
    int has_coll, has_backing, has_source;
};
struct recorder {
    struct rec_ev *ev;
    size_t n, cap;
};

static void rec_fn(void *ctx, const pc_event *ev)
{
    struct recorder *r = ctx;
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->ev = realloc(r->ev, r->cap * sizeof *r->ev);
        assert_non_null(r->ev);
    }
    struct rec_ev *e = &r->ev[r->n++];
    memset(e, 0, sizeof *e);
    e->ev = *ev;
    if ((e->has_coll = ev->collection != NULL))
        snprintf(e->coll, sizeof e->coll, "%s", ev->collection);
    if ((e->has_backing = ev->backing != NULL))
        snprintf(e->backing, sizeof e->backing, "%s", ev->backing);
    if ((e->has_source = ev->source != NULL))
        snprintf(e->source, sizeof e->source, "%s", ev->source);
    if (ev->key != NULL)
        memcpy(e->key, ev->key, ev->klen < sizeof e->key ? ev->klen : sizeof e->key);
}

static void log_cb(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= PC_LOG_WARN)
        print_message("[pcache %d] %s\n", level, msg);
}

static pc_cache *mk_cache(const char *colls, size_t mem_mb, unsigned budget, struct recorder *r)
{
    pc_config cfg;
    pc_fx_config(&cfg, colls, mem_mb);
    cfg.growth_budget = budget;
    cfg.log.fn = log_cb;
    pc_cache *c = pc_fx_create(&cfg);
    if (r != NULL)
        check_rc(pc_event_handler(c, rec_fn, r), PC_OK);
    return c;
}

static void fill(pc_coll *co, const char *tag, int from, int to)
{
    char k[32];
    for (int i = from; i < to; i++) {
        int kl = snprintf(k, sizeof k, "%s:%d", tag, i);
        check_rc(pc_set(co, k, (size_t)kl, "v", 1, 0, 0), PC_OK);
    }
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* ---- grown ------------------------------------------------------------------------- */

/* pc_coll_reserve: grows for keys not yet inserted, past the per-call
 * budget, with one grown event; the inserts after it overflow nothing; a
 * count out of reason (it comes from a file) is bounded, never an error. */
static void reserve_grows_ahead_of_the_keys(void **state)
{
    (void)state;
    struct recorder r = {0};
    pc_cache *c = mk_cache("default;g=4;h=4", 64, 5, &r);
    pc_coll *g = pc_fx_coll(c, "g"), *h = pc_fx_coll(c, "h");
    check_rc(pc_event_subscribe(c, PC_EV_GROWN, 1), PC_OK);
    assert_int_equal(pc_coll_reserve(NULL, 10), PC_EINVAL);
    int s = pc_coll_reserve(g, 20000);
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(g, &st), PC_OK);
    print_message("reserve 20000: %d splits, %" PRIu64 " buckets\n", s, st.buckets);
    assert_true(s > 5); /* not held to the budget of 5 */
    assert_int_equal(st.buckets, 16 + (uint64_t)s);
    assert_true(st.buckets * 4 >= 20000); /* the default load factor, 4 */
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ev[0].ev.splits, (uint64_t)s);
    assert_int_equal(r.ev[0].ev.entries, 0);
    fill(g, "g", 0, 20000);
    check_rc(pc_coll_stats_get(g, &st), PC_OK);
    assert_int_equal(st.entries, 20000);
    assert_true(st.overflow < 200);             /* without the reserve: most of them */
    assert_int_equal(pc_coll_reserve(g, 0), 0); /* nothing more to do */
    /* a count no cache could hold: the buckets stay within a quarter of
     * the region and the collection still takes keys */
    s = pc_coll_reserve(h, UINT64_MAX / 2);
    assert_true(s >= 0);
    check_rc(pc_coll_stats_get(h, &st), PC_OK);
    pc_mem_stats ms;
    check_rc(pc_mem_stats_get(c, &ms), PC_OK);
    print_message("reserve of a huge count: %d splits, %" PRIu64 " buckets, plain extent %zu B\n",
                  s, st.buckets, ms.plain_bytes);
    assert_true(st.buckets * 64 <= (ms.plain_bytes + ms.hugepage_bytes) / 2);
    fill(h, "h", 0, 1000);
    pc_cache_destroy(c);
    free(r.ev);
}

static void grown_event_carries_the_growth(void **state)
{
    (void)state;
    struct recorder r = {0};
    pc_cache *c = mk_cache("default;g=4;h=4", 16, 4096, &r);
    pc_coll *g = pc_fx_coll(c, "g"), *h = pc_fx_coll(c, "h");
    check_rc(pc_event_subscribe(c, PC_EV_GROWN, 1), PC_OK);
    fill(g, "g", 0, 200);
    pc_maint_report rep;
    check_rc(pc_maintain(c, PC_MAINT_GROW, &rep), PC_OK);
    assert_int_equal(r.n, 1);
    const pc_event *e = &r.ev[0].ev;
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(g, &st), PC_OK);
    print_message("grown: %s %" PRIu64 " -> %" PRIu64 " buckets, %" PRIu64 " splits, %" PRIu64
                  " entries\n",
                  r.ev[0].coll, e->prev_buckets, e->buckets, e->splits, e->entries);
    assert_int_equal(e->type, PC_EV_GROWN);
    assert_string_equal(r.ev[0].coll, "g");
    assert_int_equal(e->prev_buckets, 16);
    assert_true(e->prev_buckets < e->buckets);
    assert_int_equal(e->splits, e->buckets - e->prev_buckets);
    assert_int_equal(e->splits, rep.splits);
    assert_int_equal(e->buckets, st.buckets);
    assert_int_equal(e->entries, 200);
    /* nothing more to split: no event */
    check_rc(pc_maintain(c, PC_MAINT_GROW, &rep), PC_OK);
    assert_int_equal(r.n, 1);
    /* two collections growing in one call: one event each, in their names */
    uint64_t g_prev = e->buckets;
    fill(g, "g", 200, 600);
    fill(h, "h", 0, 100);
    check_rc(pc_maintain(c, PC_MAINT_GROW, &rep), PC_OK);
    assert_int_equal(r.n, 3);
    uint64_t splits = 0;
    for (size_t i = 1; i < 3; i++) {
        const pc_event *x = &r.ev[i].ev;
        int is_g = strcmp(r.ev[i].coll, "g") == 0;
        assert_true(is_g || strcmp(r.ev[i].coll, "h") == 0);
        assert_int_equal(x->prev_buckets, is_g ? g_prev : 16);
        assert_int_equal(x->splits, x->buckets - x->prev_buckets);
        assert_int_equal(x->entries, is_g ? 600 : 100);
        splits += x->splits;
    }
    assert_int_equal(splits, rep.splits);
    assert_string_not_equal(r.ev[1].coll, r.ev[2].coll);
    pc_cache_destroy(c);
    /* a small budget: one event per call, each continuing the last */
    struct recorder r2 = {0};
    c = mk_cache("g=4", 16, 5, &r2);
    check_rc(pc_event_subscribe(c, PC_EV_GROWN, 1), PC_OK);
    fill(pc_fx_coll(c, "g"), "g", 0, 200);
    for (int i = 0; i < 3; i++)
        check_rc(pc_maintain(c, PC_MAINT_GROW, NULL), PC_OK);
    assert_int_equal(r2.n, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(r2.ev[i].ev.splits, 5);
        assert_int_equal(r2.ev[i].ev.prev_buckets, 16 + 5 * i);
        assert_int_equal(r2.ev[i].ev.buckets, 21 + 5 * i);
    }
    pc_cache_destroy(c);
    free(r.ev);
    free(r2.ev);
}

/* ---- expired ----------------------------------------------------------------------- */

static size_t bin_key(unsigned char *k, int i)
{
    k[0] = 'x';
    k[1] = 0; /* NUL inside the key */
    k[2] = (unsigned char)(i >> 8);
    k[3] = (unsigned char)i;
    k[4] = 0;
    k[5] = '*';
    return 6;
}

static void expired_event_is_opt_in_per_collection(void **state)
{
    (void)state;
    enum { NA = 300, NB = 50 };
    struct recorder r = {0};
    pc_cache *c = mk_cache("a=4;b=4", 16, 4096, &r);
    pc_coll *a = pc_fx_coll(c, "a"), *b = pc_fx_coll(c, "b");
    check_rc(pc_event_subscribe(c, PC_EV_EXPIRED, 1), PC_OK);
    check_rc(pc_event_expired(a, 1), PC_OK);
    unsigned char k[8];
    for (int i = 0; i < NA; i++) /* 16 buckets: most of these go to overflow */
        check_rc(pc_set(a, k, bin_key(k, i), "v", 1, 30, 0), PC_OK);
    for (int i = 0; i < NB; i++)
        check_rc(pc_set(b, k, bin_key(k, i), "v", 1, 30, 0), PC_OK);
    fill(a, "keep", 0, 20);
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(a, &st), PC_OK);
    assert_true(st.overflow > 0); /* the chain sweep is exercised too */
    sleep_ms(100);
    pc_maint_report rep;
    check_rc(pc_maintain(c, PC_MAINT_SWEEP, &rep), PC_OK);
    assert_int_equal(rep.reaped, NA + NB);
    static unsigned seen[NA];
    unsigned bad = 0;
    for (size_t i = 0; i < r.n; i++) {
        const struct rec_ev *e = &r.ev[i];
        int idx = e->ev.klen == 6 ? (e->key[2] << 8 | e->key[3]) : -1;
        if (e->ev.type != PC_EV_EXPIRED || strcmp(e->coll, "a") != 0 || idx < 0 || idx >= NA) {
            bad++;
            continue;
        }
        unsigned char want[8];
        bin_key(want, idx);
        if (memcmp(e->key, want, 6) != 0)
            bad++;
        else
            seen[idx]++;
    }
    for (int i = 0; i < NA; i++)
        bad += seen[i] != 1;
    print_message("%zu expired events for %d keys of 'a' (%d of 'b' reaped silently)\n", r.n, NA,
                  NB);
    assert_int_equal(bad, 0);
    assert_int_equal(r.n, NA);
    /* opting out again silences it */
    check_rc(pc_event_expired(a, 0), PC_OK);
    check_rc(pc_set(a, "late", 4, "v", 1, 10, 0), PC_OK);
    sleep_ms(40);
    check_rc(pc_maintain(c, PC_MAINT_SWEEP, &rep), PC_OK);
    assert_int_equal(rep.reaped, 1);
    assert_int_equal(r.n, NA);
    check_rc(pc_event_expired(NULL, 1), PC_EINVAL);
    pc_cache_destroy(c);
    free(r.ev);
}

/* ---- nomem ------------------------------------------------------------------------- */

static void nomem_event_names_the_dropped_write(void **state)
{
    (void)state;
    struct recorder r = {0};
    pc_cache *c = mk_cache("n=4", 1, 4096, &r);
    pc_coll *n = pc_fx_coll(c, "n");
    check_rc(pc_event_subscribe(c, PC_EV_NOMEM, 1), PC_OK);
    static char val[700];
    memset(val, 'v', sizeof val);
    char k[32];
    int dropped = 0, stored = 0, first = -1;
    for (int i = 0; i < 100000 && dropped < 5; i++) {
        int kl = snprintf(k, sizeof k, "fill:%d", i);
        int rc = pc_set(n, k, (size_t)kl, val, sizeof val, 0, 0);
        if (rc == 0) {
            stored++;
            continue;
        }
        assert_int_equal(rc, PC_ENOMEM);
        if (first < 0)
            first = i;
        assert_int_equal(r.n, (size_t)dropped + 1); /* one event per dropped write, at once */
        const struct rec_ev *e = &r.ev[dropped];
        assert_int_equal(e->ev.type, PC_EV_NOMEM);
        assert_string_equal(e->coll, "n");
        assert_int_equal(e->ev.klen, (size_t)kl);
        assert_memory_equal(e->key, k, (size_t)kl);
        if (e->ev.size < (uint64_t)kl + sizeof val)
            fail_msg(
                "nomem for a write of a %d-byte key and a %zu-byte value reports size %" PRIu64, kl,
                sizeof val, e->ev.size);
        dropped++;
    }
    print_message("%d writes stored, then %d dropped from write %d on; size %" PRIu64 "\n", stored,
                  dropped, first, r.n ? r.ev[0].ev.size : 0);
    assert_int_equal(dropped, 5);
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(n, &st), PC_OK);
    assert_int_equal(st.nomem, 5);
    pc_cache_destroy(c);
    free(r.ev);
}

/* The same when the write is dropped for want of an overflow node: table
 * "n" has every bucket exactly full and no overflow (so no node was ever
 * carved), "big" fills the arena with records. Freeing one record and
 * writing a key of the same size into a full bucket of "n" gets the
 * record but not the node. The event must report the dropped write (its
 * key and its size), not the 16-byte node. */
static void nomem_event_when_the_overflow_node_is_missing(void **state)
{
    (void)state;
    struct recorder r = {0};
    pc_cache *c = mk_cache("n=4;big=14", 1, 4096, &r);
    pc_coll *n = pc_fx_coll(c, "n"), *big = pc_fx_coll(c, "big");
    unsigned cnt[16] = {0}, full = 0;
    char k[32];
    for (int id = 0; full < 16; id++) { /* 11 keys in each of the 16 buckets */
        int kl = snprintf(k, sizeof k, "n:%d", id);
        uint64_t b = pc_hash(k, (size_t)kl) & 15;
        if (cnt[b] == 11)
            continue;
        check_rc(pc_set(n, k, (size_t)kl, "v", 1, 0, 0), PC_OK);
        full += ++cnt[b] == 11;
    }
    pc_coll_stats st;
    check_rc(pc_coll_stats_get(n, &st), PC_OK);
    assert_int_equal(st.overflow, 0);
    static char val[700];
    memset(val, 'v', sizeof val);
    int i = 0, rc = 0;
    for (; i < 100000 && rc == 0; i++) {
        int kl = snprintf(k, sizeof k, "big:%05d", i);
        rc = pc_set(big, k, (size_t)kl, val, sizeof val, 0, 0);
    }
    assert_int_equal(rc, PC_ENOMEM);
    check_rc(pc_remove(big, "big:00000", 9), PC_OK); /* one record cell free */
    size_t before = r.n;
    check_rc(pc_event_subscribe(c, PC_EV_NOMEM, 1), PC_OK);
    int kl = snprintf(k, sizeof k, "nn:%06d", 1); /* the freed key's length; any bucket is full */
    rc = pc_set(n, k, (size_t)kl, val, sizeof val, 0, 0);
    print_message("write into a full bucket with the arena full: rc %d, %zu event(s), size %" PRIu64
                  "\n",
                  rc, r.n - before, r.n > before ? r.ev[before].ev.size : 0);
    struct rec_ev e = {0};
    size_t nev = r.n - before;
    if (nev > 0)
        e = r.ev[before];
    pc_cache_destroy(c); /* before judging, so a failure leaks nothing */
    free(r.ev);
    assert_int_equal(rc, PC_ENOMEM);
    assert_int_equal(nev, 1);
    assert_string_equal(e.coll, "n");
    assert_int_equal(e.ev.klen, (size_t)kl);
    assert_memory_equal(e.key, k, (size_t)kl);
    if (e.ev.size < (uint64_t)kl + sizeof val)
        fail_msg("nomem for a write of a %d-byte key and a %zu-byte value reports size %" PRIu64,
                 kl, sizeof val, e.ev.size);
}

/* ---- synced, subscriptions, processes ----------------------------------------------- */

static void synced_event_and_unsubscribe(void **state)
{
    (void)state;
    struct recorder r = {0};
    pc_cache *c = mk_cache("default;sessions=6", 8, 4096, &r);
    pc_coll *s = pc_fx_coll(c, "sessions");
    pc_event_reloaded(s, "node-2"); /* not subscribed yet */
    assert_int_equal(r.n, 0);
    check_rc(pc_event_subscribe(c, PC_EV_RELOADED, 1), PC_OK);
    pc_event_reloaded(s, "node-2");
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ev[0].ev.type, PC_EV_RELOADED);
    assert_string_equal(r.ev[0].coll, "sessions");
    assert_true(r.ev[0].has_source);
    assert_string_equal(r.ev[0].source, "node-2");
    check_rc(pc_event_subscribe(c, PC_EV_RELOADED, 0), PC_OK);
    pc_event_reloaded(s, "node-3");
    assert_int_equal(r.n, 1);
    /* unsubscribing grown stops grown, and only grown */
    check_rc(pc_event_subscribe(c, PC_EV_RELOADED, 1), PC_OK);
    check_rc(pc_event_subscribe(c, PC_EV_GROWN, 1), PC_OK);
    check_rc(pc_event_subscribe(c, PC_EV_GROWN, 0), PC_OK);
    fill(s, "s", 0, 400);
    check_rc(pc_maintain(c, PC_MAINT_GROW, NULL), PC_OK);
    assert_int_equal(r.n, 1);
    pc_event_reloaded(s, "node-4");
    assert_int_equal(r.n, 2);
    assert_string_equal(r.ev[1].source, "node-4");
    check_rc(pc_event_subscribe(c, -1, 1), PC_EINVAL);
    check_rc(pc_event_subscribe(c, PC_EV_COUNT, 1), PC_EINVAL);
    check_rc(pc_event_handler(NULL, rec_fn, &r), PC_EINVAL);
    pc_event_reloaded(NULL, "x"); /* harmless */
    pc_cache_destroy(c);
    free(r.ev);
}

static void no_subscriber_never_calls_the_handler(void **state)
{
    (void)state;
    struct recorder r = {0};
    pc_cache *c = mk_cache("g=4;t=4", 1, 4096, &r);
    pc_coll *g = pc_fx_coll(c, "g"), *t = pc_fx_coll(c, "t");
    check_rc(pc_event_expired(t, 1), PC_OK); /* opted in, but nobody subscribed */
    fill(g, "g", 0, 200);
    check_rc(pc_set(t, "short", 5, "v", 1, 10, 0), PC_OK);
    sleep_ms(40);
    pc_maint_report rep;
    check_rc(pc_maintain(c, PC_MAINT_ALL, &rep), PC_OK);
    assert_true(rep.splits > 0 && rep.reaped == 1);
    pc_event_reloaded(t, "node-9");
    static char val[700];
    int rc = 0;
    char k[32];
    for (int i = 0; i < 100000 && rc == 0; i++) {
        int kl = snprintf(k, sizeof k, "fill:%d", i);
        rc = pc_set(g, k, (size_t)kl, val, sizeof val, 0, 0);
    }
    assert_int_equal(rc, PC_ENOMEM);
    assert_int_equal(r.n, 0);
    /* subscribed, but this process set no handler: nothing to call, no crash */
    check_rc(pc_event_handler(c, NULL, NULL), PC_OK);
    check_rc(pc_event_subscribe(c, PC_EV_RELOADED, 1), PC_OK);
    pc_event_reloaded(t, "node-9");
    assert_int_equal(r.n, 0);
    pc_cache_destroy(c);
}

/* The mask is shared: a child's subscription reaches the parent. The
 * handler is per process: an event a child observes goes to the child's
 * (inherited) handler, never to the parent's. */
static void subscription_shared_handler_local(void **state)
{
    (void)state;
    struct recorder r = {0};
    pc_cache *c = mk_cache("s=6", 8, 4096, &r);
    pc_coll *s = pc_fx_coll(c, "s");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGABRT, SIG_DFL);
        _exit(pc_event_subscribe(c, PC_EV_RELOADED, 1) == 0 ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    pc_event_reloaded(s, "peer");
    assert_int_equal(r.n, 1);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* the child raises it: its copy of the recorder counts */
        signal(SIGABRT, SIG_DFL);
        size_t before = r.n;
        pc_event_reloaded(s, "child");
        _exit(r.n == before + 1 && strcmp(r.ev[before].source, "child") == 0 ? 0 : 1);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(r.n, 1);
    pc_cache_destroy(c);
    free(r.ev);
}

/* ---- mem_degraded ------------------------------------------------------------------ */

static long proc_long(const char *path, const char *field)
{
    FILE *f = fopen(path, "r");
    char line[256];
    long v = -1;
    if (f == NULL)
        return -1;
    size_t fl = field != NULL ? strlen(field) : 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (field == NULL || (strncmp(line, field, fl) == 0 && line[fl] == ':')) {
            v = strtol(line + fl + (field != NULL), NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

static void mem_degraded_event_once_at_creation(void **state)
{
    (void)state;
    long over = proc_long("/proc/sys/vm/nr_overcommit_hugepages", NULL);
    long hfree = proc_long("/proc/meminfo", "HugePages_Free");
    int no_hugetlb = over == 0 && hfree == 0;
    char partial[256] = ""; /* the assertion not made here: the case is reported skipped */
    struct recorder r = {0};
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "d=6";
    cfg.mem_mb = 8;
    cfg.hugepage_mb = 4;
    cfg.lock_memory = 0;
    cfg.log.fn = log_cb;
    cfg.event_fn = rec_fn;
    cfg.event_ctx = &r;
    cfg.event_mask = 1u << PC_EV_MEM_DEGRADED;
    pc_cache *c = NULL;
    check_rc(pc_cache_create(&cfg, &c), PC_OK);
    pc_mem_stats ms;
    check_rc(pc_mem_stats_get(c, &ms), PC_OK);
    if (!no_hugetlb) {
        snprintf(partial, sizeof partial,
                 "the mem_degraded assertion: this machine has hugetlb "
                 "(nr_overcommit_hugepages=%ld, HugePages_Free=%ld); tier %d (%s), %zu event(s)",
                 over, hfree, ms.tier, pc_tier_name(ms.tier), r.n);
        assert_int_equal(r.n, ms.tier == PC_TIER_HUGETLB ? 0 : 1);
    } else {
        assert_int_equal(r.n, 1);
        const struct rec_ev *e = &r.ev[0];
        print_message("mem_degraded: requested %" PRIu64 " MB, tier %d (%s), overcommit %" PRIu64
                      "\n",
                      e->ev.requested_mb, e->ev.tier, e->backing, e->ev.overcommit_pages);
        assert_int_equal(e->ev.type, PC_EV_MEM_DEGRADED);
        assert_false(e->has_coll);
        assert_int_equal(e->ev.requested_mb, 4);
        assert_true(e->ev.tier > PC_TIER_HUGETLB && e->ev.tier <= PC_TIER_4K);
        assert_int_equal(e->ev.tier, ms.tier);
        assert_true(e->has_backing);
        assert_string_equal(e->backing, pc_tier_name(e->ev.tier));
        assert_int_equal(e->ev.overcommit_pages, 0);
    }
    /* it is raised at creation only */
    pc_coll *d = pc_fx_coll(c, "d");
    fill(d, "d", 0, 100);
    check_rc(pc_maintain(c, PC_MAINT_ALL, NULL), PC_OK);
    assert_int_equal(r.n, no_hugetlb ? 1 : (ms.tier == PC_TIER_HUGETLB ? 0 : 1));
    pc_cache_destroy(c);
    /* not in the mask, or no huge pages asked for: no event */
    size_t before = r.n;
    cfg.event_mask = 1u << PC_EV_GROWN;
    check_rc(pc_cache_create(&cfg, &c), PC_OK);
    pc_cache_destroy(c);
    cfg.event_mask = 1u << PC_EV_MEM_DEGRADED;
    cfg.hugepage_mb = 0;
    check_rc(pc_cache_create(&cfg, &c), PC_OK);
    pc_cache_destroy(c);
    assert_int_equal(r.n, before);
    free(r.ev);
    if (partial[0] != '\0')
        pc_skip("%s", partial);
}

static void event_names(void **state)
{
    (void)state;
    assert_string_equal(pc_event_name(PC_EV_EXPIRED), "expired");
    assert_string_equal(pc_event_name(PC_EV_NOMEM), "nomem");
    assert_string_equal(pc_event_name(PC_EV_GROWN), "grown");
    assert_string_equal(pc_event_name(PC_EV_MEM_DEGRADED), "mem_degraded");
    assert_string_equal(pc_event_name(PC_EV_RELOADED), "synced");
    assert_non_null(pc_event_name(PC_EV_COUNT));
    assert_non_null(pc_event_name(-1));
}

int main(int argc, char **argv)
{
    pc_test_args(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grown_event_carries_the_growth),
        cmocka_unit_test(reserve_grows_ahead_of_the_keys),
        cmocka_unit_test(expired_event_is_opt_in_per_collection),
        cmocka_unit_test(nomem_event_names_the_dropped_write),
        cmocka_unit_test(nomem_event_when_the_overflow_node_is_missing),
        cmocka_unit_test(synced_event_and_unsubscribe),
        cmocka_unit_test(no_subscriber_never_calls_the_handler),
        cmocka_unit_test(subscription_shared_handler_local),
        cmocka_unit_test(mem_degraded_event_once_at_creation),
        cmocka_unit_test(event_names),
    };
    return pc_test_exit(PC_RUN_GROUP("test_events", tests, NULL, NULL));
}
