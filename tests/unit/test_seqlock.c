/*
 * test_seqlock.c - the read path's seqlock (src/engine/table.c,
 * pc_bucket_read), deterministically: each of its two checks against a
 * writer has a case that fails when that check is removed, whatever the
 * timing.
 *
 * "Writer inside" (an odd version when the read starts): a writer holds the
 * bucket's lock with its version bracket open (pc__test_hold_bucket_lock)
 * and has rewritten half the value in place. A reader thread must not copy
 * that value: it retries, falls back to the lock and waits. The test waits
 * until the reader has spent far more CPU time than its optimistic attempts
 * take (a reader that ignored the odd version would have returned by then),
 * checks it is still waiting, completes the write, releases, and the reader
 * returns the whole new value, counted as retries and one lock fallback;
 * through pc_get_alloc too, whose read under the lock has no room yet and
 * must get it outside the lock and read again; and through a bound
 * transaction (pc_txn_bind), whose reads take their own lookup (txn.c,
 * tx_lookup) with its own "writer inside" test.
 *
 * The version re-check (the version changed while the value was copied):
 * the page in the middle of the stored value is made unreadable, so the
 * reader's copy faults half-way; the fault handler performs a writer's
 * whole update (lock, bracket, new value, release), unprotects the page and
 * returns into the copy, which finishes with the new bytes after the old
 * ones. Only the re-check can tell: the reader must retry and return the
 * whole new value, not the mix.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "pc_fixture.h"
#include "pc_testhooks.h"
#include "pcache.h"

#define KEY "seqlock-key"
#define KLEN (sizeof KEY - 1)
#define VLEN (3 * 4096) /* a page boundary lies well inside the value */

static pc_cache *mk_cache(pc_coll **co)
{
    pc_config cfg;
    pc_fx_config(&cfg, "s", 16);
    cfg.hugepage_mb = 0; /* 4 KiB pages: the fault case protects one */
    pc_cache *c = pc_fx_create(&cfg);
    *co = pc_fx_coll(c, "s");
    return c;
}

/* Whether buf holds VLEN bytes of b. */
static int all(const unsigned char *buf, unsigned char b)
{
    for (size_t i = 0; i < VLEN; i++)
        if (buf[i] != b)
            return 0;
    return 1;
}

static int64_t ns_of(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- writer inside: the reader waits ----------------------------------- */
struct reader {
    pc_coll *co;
    unsigned char *buf;
    size_t vlen, need;
    int rc;
    int use_alloc; /* pc_get_alloc instead of pc_get_buf */
    int use_txn;   /* pc_get_buf inside a bound transaction (tx_lookup) */
    pc_cache *c;
    _Atomic int done;
};

static void *heap_obtain(size_t n, void *ctx)
{
    (void)ctx;
    return malloc(n);
}

static void heap_release(void *p, void *ctx)
{
    (void)ctx;
    free(p);
}

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    if (r->use_alloc) {
        /* its read under the lock has no room: it must get some outside
         * the lock and read again */
        const pc_allocator a = {heap_obtain, heap_release, NULL};
        void *v = NULL;
        r->rc = pc_get_alloc(r->co, KEY, KLEN, &a, &v, &r->vlen, NULL);
        if (r->rc == PC_OK && r->vlen <= VLEN)
            memcpy(r->buf, v, r->vlen);
        free(v);
    } else if (r->use_txn) {
        /* the transaction observes the key (and copies its value) with
         * tx_lookup; binding is per handle, and the holding thread's
         * test hooks do not route through it */
        pc_txn *t = NULL;
        r->rc = pc_txn_begin(r->c, &t);
        if (r->rc == PC_OK && (r->rc = pc_txn_bind(r->c, t)) == PC_OK) {
            r->rc = pc_get_buf(r->co, KEY, KLEN, r->buf, VLEN, &r->vlen, &r->need, NULL);
            (void)pc_txn_bind(r->c, NULL);
        }
        pc_txn_free(t);
    } else {
        r->rc = pc_get_buf(r->co, KEY, KLEN, r->buf, VLEN, &r->vlen, &r->need, NULL);
    }
    atomic_store(&r->done, 1);
    return NULL;
}

static void reader_waits_for_an_open_bracket(int use_alloc, int use_txn)
{
    pc_coll *co;
    pc_cache *c = mk_cache(&co);
    static unsigned char old[VLEN];
    memset(old, 'A', sizeof old);
    assert_int_equal(pc_set(co, KEY, KLEN, old, sizeof old, 0, 0), PC_OK);
    pc_coll_stats st0, st1;
    assert_int_equal(pc_coll_stats_get(co, &st0), PC_OK);

    /* the writer, stopped half-way through rewriting the value in place */
    assert_int_equal(pc__test_hold_bucket_lock(co, KEY, KLEN), PC_OK);
    unsigned char *val;
    size_t vl;
    assert_int_equal(pc__test_value_bytes(co, KEY, KLEN, &val, &vl), PC_OK);
    assert_int_equal(vl, VLEN);
    memset(val, 'B', VLEN / 2);

    struct reader r = {
        .co = co, .buf = malloc(VLEN), .use_alloc = use_alloc, .use_txn = use_txn, .c = c};
    assert_non_null(r.buf);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, reader_main, &r), 0);
    clockid_t cpu;
    assert_int_equal(pthread_getcpuclockid(t, &cpu), 0);
    /* 50 ms of the reader's CPU: its optimistic attempts take microseconds,
     * so by then it has either returned (ignoring the odd version) or is
     * waiting for the lock. Wall time only bounds a reader that never
     * runs. */
    int64_t wall_end = ns_of(CLOCK_MONOTONIC) + 30 * 1000000000ll;
    while (!atomic_load(&r.done) && ns_of(cpu) < 50 * 1000000 && ns_of(CLOCK_MONOTONIC) < wall_end)
        usleep(1000);
    int done_early = atomic_load(&r.done);
    int64_t cpu_ns = ns_of(cpu);

    /* the write completes; the reader gets the lock after it */
    memset(val + VLEN / 2, 'B', VLEN - VLEN / 2);
    assert_int_equal(pc__test_release_bucket_lock(co, KEY, KLEN), PC_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    print_message("reader: %s after %.1f ms of its CPU; rc %d, value %s\n",
                  done_early ? "returned" : "still waiting", (double)cpu_ns / 1e6, r.rc,
                  r.rc == 0 && all(r.buf, 'B')   ? "new"
                  : r.rc == 0 && all(r.buf, 'A') ? "old"
                                                 : "torn");
    assert_false(done_early); /* it copied nothing inside the bracket */
    assert_true(cpu_ns >= 50 * 1000000);
    assert_int_equal(r.rc, PC_OK);
    assert_int_equal(r.vlen, VLEN);
    assert_true(all(r.buf, 'B'));
    assert_int_equal(pc_coll_stats_get(co, &st1), PC_OK);
    assert_true(st1.seqlock_retries > st0.seqlock_retries);
    assert_int_equal(st1.lock_fallbacks, st0.lock_fallbacks + 1);
    free(r.buf);
    pc_cache_destroy(c);
}

static void test_reader_waits_for_an_open_bracket(void **state)
{
    (void)state;
    reader_waits_for_an_open_bracket(0, 0);
}

static void test_alloc_reader_waits_for_an_open_bracket(void **state)
{
    (void)state;
    reader_waits_for_an_open_bracket(1, 0);
}

static void test_txn_reader_waits_for_an_open_bracket(void **state)
{
    (void)state;
    reader_waits_for_an_open_bracket(0, 1);
}

/* ---- a write during the copy: the re-check ------------------------------ */
static struct {
    pc_coll *co;
    unsigned char *val;
    char *page; /* protected until the first fault on it */
    size_t pagesz;
    int faults, hook_rc;
} mid;

static void on_segv(int sig, siginfo_t *si, void *uctx)
{
    (void)uctx;
    char *a = si->si_addr;
    if (mid.page == NULL || a < mid.page || a >= mid.page + mid.pagesz) {
        signal(sig, SIG_DFL); /* not ours: fault again, uncaught */
        return;
    }
    mprotect(mid.page, mid.pagesz, PROT_READ | PROT_WRITE);
    mid.page = NULL;
    mid.faults++;
    /* a writer's whole update, between the reader's two version reads */
    int rc = pc__test_hold_bucket_lock(mid.co, KEY, KLEN);
    memset(mid.val, 'B', VLEN);
    if (rc == 0)
        rc = pc__test_release_bucket_lock(mid.co, KEY, KLEN);
    mid.hook_rc = rc;
}

static void test_write_during_the_copy_is_retried(void **state)
{
    (void)state;
    pc_coll *co;
    pc_cache *c = mk_cache(&co);
    static unsigned char old[VLEN];
    memset(old, 'A', sizeof old);
    assert_int_equal(pc_set(co, KEY, KLEN, old, sizeof old, 0, 0), PC_OK);
    size_t vl;
    memset(&mid, 0, sizeof mid);
    mid.co = co;
    assert_int_equal(pc__test_value_bytes(co, KEY, KLEN, &mid.val, &vl), PC_OK);
    assert_int_equal(vl, VLEN);
    mid.pagesz = (size_t)sysconf(_SC_PAGESIZE);
    /* the page holding the middle of the value: value bytes only (the
     * record's header and key come before it) */
    char *page = (char *)((uintptr_t)(mid.val + VLEN / 2) & ~(uintptr_t)(mid.pagesz - 1));
    assert_true(page > (char *)mid.val && page + mid.pagesz <= (char *)mid.val + VLEN);
    pc_coll_stats st0, st1;
    assert_int_equal(pc_coll_stats_get(co, &st0), PC_OK);

    struct sigaction sa, prev;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGSEGV, &sa, &prev), 0);
    mid.page = page;
    assert_int_equal(mprotect(page, mid.pagesz, PROT_NONE), 0);
    unsigned char *buf = malloc(VLEN);
    assert_non_null(buf);
    size_t got = 0, need = 0;
    int rc = pc_get_buf(co, KEY, KLEN, buf, VLEN, &got, &need, NULL);
    char *left = mid.page;
    if (left != NULL)
        mprotect(left, mid.pagesz, PROT_READ | PROT_WRITE);
    assert_int_equal(sigaction(SIGSEGV, &prev, NULL), 0);

    size_t olds = 0;
    for (size_t i = 0; i < got; i++)
        olds += buf[i] == 'A';
    print_message("copy faulted %d time(s); rc %d, %zu bytes, %zu of them old\n", mid.faults, rc,
                  got, olds);
    assert_null(left); /* the copy reached the page... */
    assert_int_equal(mid.faults, 1);
    assert_int_equal(mid.hook_rc, PC_OK); /* ...and the write happened inside it */
    assert_int_equal(rc, PC_OK);
    assert_int_equal(got, VLEN);
    assert_true(all(buf, 'B')); /* not the old bytes followed by the new */
    assert_int_equal(pc_coll_stats_get(co, &st1), PC_OK);
    assert_true(st1.seqlock_retries > st0.seqlock_retries);
    free(buf);
    pc_cache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_waits_for_an_open_bracket),
        cmocka_unit_test(test_alloc_reader_waits_for_an_open_bracket),
        cmocka_unit_test(test_txn_reader_waits_for_an_open_bracket),
        cmocka_unit_test(test_write_during_the_copy_is_retried),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
