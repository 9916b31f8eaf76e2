/*
 * test_lockdeath.c - regression "a worker killed while holding a bucket lock
 * wedges the table".
 *
 * A host's worker can be kill -9'd at any instruction, including inside a
 * write's version bracket with its bucket lock held. The owner token in the
 * lock word must let the next writer (or a reader that falls back to the
 * lock) see that the holder is dead, take the lock over, close the bracket
 * and carry on. A child calls pc__test_hold_bucket_lock() on one key, tells
 * the parent through a pipe, and sleeps; the parent SIGKILLs it and then:
 *  - writes that key itself while the dead child is still a zombie (the pid
 *    exists: a kill(pid, 0) liveness test is fooled by it), right after the
 *    kill and again once the zombie state is confirmed, and after the child
 *    was reaped (the pid is gone);
 *  - or lets another forked child do the write, for which the dead holder is
 *    not even its own child;
 *  - or kills a holder on the same bucket several times in a row, recovering
 *    through set, remove, add and an NX set.
 * Each recovering operation must finish within 1 s (CLOCK_MONOTONIC); the
 * value must read back, the bucket's other keys (some of them pushed into
 * overflow) must stay readable, reads must not keep falling back to the lock
 * afterwards (the bracket was closed), and pc__test_verify must return 0.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h> /* after the four headers it needs */

#include "pc_testhooks.h"
#include "pcache.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VICTIM "victim-key"
#define NNEIGH 12 /* with the victim: more keys than a bucket has slots */
#define NOTHER 64
#define LIMIT_NS 1000000000ll /* every recovering operation: under 1 s */

static pc_cache *cache;
static pc_coll *coll;
static char neigh[NNEIGH][32];
static size_t neigh_len[NNEIGH];

enum kill_mode { ZOMBIE_NOW, ZOMBIE_CONFIRMED, REAPED };

/* A forked child must not run cmocka's handlers: they would longjmp into
 * the child's copy of the test runner. A crash kills it, and the parent
 * sees the signal. */
static void child_signals_default(void)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* What the process is doing, for the watchdog's message: a recovery that
 * never finishes is a wedge, reported instead of hanging the suite. */
static const char *doing = "setup";

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "test_lockdeath: watchdog: wedged on a dead holder's lock in: ";
    if (write(2, m, sizeof m - 1) < 0 || write(2, doing, strlen(doing)) < 0 ||
        write(2, "\n", 1) < 0) {
    }
    _exit(1);
}

static void put(const char *k, size_t kl, unsigned b, size_t len)
{
    unsigned char v[256];
    memset(v, (int)b, len);
    assert_int_equal(pc_set(coll, k, kl, v, len, 0, 0), 0);
}

/* 0 when k reads back as len bytes of b; -1 (and a line on stderr) if not. */
static int expect(const char *k, size_t kl, unsigned b, size_t len)
{
    unsigned char v[512];
    size_t vlen = 0, needed = 0;
    int rc = pc_get_buf(coll, k, kl, v, sizeof v, &vlen, &needed, NULL);
    int ok = rc == 0 && vlen == len;
    for (size_t i = 0; ok && i < len; i++)
        ok = v[i] == b;
    if (!ok)
        fprintf(stderr, "key %.*s: rc %s vlen %zu (want %zu x 0x%02x)\n", (int)kl, k,
                pc_strerror(rc), vlen, len, b);
    return ok ? 0 : -1;
}

static unsigned neigh_byte(int i)
{
    return 0x40u + (unsigned)i;
}
static size_t neigh_len_of(int i)
{
    return 40u + (size_t)i * 7u;
}

/* Reads every key but the victim; returns the number of wrong reads. */
static int check_others(void)
{
    int bad = 0;
    char k[32];
    for (int i = 0; i < NNEIGH; i++)
        bad += expect(neigh[i], neigh_len[i], neigh_byte(i), neigh_len_of(i)) != 0;
    for (int i = 0; i < NOTHER; i++) {
        int n = snprintf(k, sizeof k, "other-%d", i);
        bad += expect(k, (size_t)n, 0x20u + (unsigned)i, 10u + (size_t)i) != 0;
    }
    return bad;
}

/* A fresh cache per test: one 16-bucket collection that never grows, the
 * victim, NNEIGH keys that route to its bucket (linear hashing routes on the
 * low bits of pc_hash; 8 of them are matched, past any level this reaches),
 * and NOTHER keys spread over the rest. */
static int setup(void **state)
{
    (void)state;
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "ld=4";
    cfg.mem_mb = 16;
    cfg.growth_load_factor = 0;
    if (pc_cache_create(&cfg, &cache) != 0 || pc_coll_find(cache, "ld", 2, &coll) != 0)
        return -1;
    uint64_t hv = pc_hash(VICTIM, strlen(VICTIM));
    int n = 0;
    for (unsigned cand = 0; n < NNEIGH; cand++) {
        int kl = snprintf(neigh[n], sizeof neigh[n], "neighbour-%u", cand);
        if ((pc_hash(neigh[n], (size_t)kl) & 0xffu) == (hv & 0xffu))
            neigh_len[n++] = (size_t)kl;
    }
    put(VICTIM, strlen(VICTIM), 'v', 100);
    for (int i = 0; i < NNEIGH; i++)
        put(neigh[i], neigh_len[i], neigh_byte(i), neigh_len_of(i));
    /* They share one bucket: it is full, so some of them spilled. */
    int spilled = 0;
    for (int i = 0; i < NNEIGH; i++)
        spilled += pc__test_in_overflow(coll, neigh[i], neigh_len[i]) == 1;
    if (spilled == 0)
        return -1;
    for (int i = 0; i < NOTHER; i++) {
        char k[32];
        int kl = snprintf(k, sizeof k, "other-%d", i);
        put(k, (size_t)kl, 0x20u + (unsigned)i, 10u + (size_t)i);
    }
    signal(SIGALRM, on_alarm);
    alarm(10);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    alarm(0);
    pc_cache_destroy(cache);
    cache = NULL;
    return 0;
}

/* Reads from fd with a timeout; 0 when exactly len bytes arrived. */
static int read_timed(int fd, void *p, size_t len, int ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, ms) != 1)
        return -1;
    return read(fd, p, len) == (ssize_t)len ? 0 : -1;
}

/* Forks a child that takes key's bucket lock, opens its version bracket,
 * reports the hook's result and sleeps until killed. */
static pid_t spawn_holder(const char *key, size_t kl)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        child_signals_default();
        alarm(30);
        int rc = pc__test_hold_bucket_lock(coll, key, kl);
        if (write(p[1], &rc, sizeof rc) != sizeof rc)
            _exit(2);
        for (;;)
            pause();
    }
    close(p[1]);
    int rc = -1;
    assert_int_equal(read_timed(p[0], &rc, sizeof rc, 5000), 0);
    close(p[0]);
    assert_int_equal(rc, 0);
    return pid;
}

/* SIGKILLs the holder; REAPED waits for it, ZOMBIE_CONFIRMED only waits
 * until it is a zombie (WNOWAIT leaves it unreaped), ZOMBIE_NOW not at all. */
static void kill_holder(pid_t pid, enum kill_mode mode)
{
    assert_int_equal(kill(pid, SIGKILL), 0);
    if (mode == ZOMBIE_CONFIRMED) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
        assert_int_equal(si.si_pid, pid);
    } else if (mode == REAPED) {
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    }
}

static void reap_holder(pid_t pid)
{
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

static int64_t timed_set(const char *k, size_t kl, unsigned b, size_t len, int *rc)
{
    unsigned char v[256];
    memset(v, (int)b, len);
    int64_t t = now_ns();
    *rc = pc_set(coll, k, kl, v, len, 0, 0);
    return now_ns() - t;
}

static uint64_t fallbacks(void)
{
    pc_coll_stats s;
    assert_int_equal(pc_coll_stats_get(coll, &s), 0);
    return s.lock_fallbacks;
}

static void assert_verify(void)
{
    char msg[256] = "";
    int rc = pc__test_verify(cache, msg, sizeof msg);
    if (rc != 0)
        fprintf(stderr, "pc__test_verify: %s\n", msg);
    assert_int_equal(rc, 0);
}

/* After a recovery: the value, the neighbours, no lingering fallbacks. */
static void assert_recovered(unsigned b, size_t len)
{
    assert_int_equal(expect(VICTIM, strlen(VICTIM), b, len), 0);
    assert_int_equal(check_others(), 0);
    uint64_t f0 = fallbacks();
    for (int r = 0; r < 50; r++)
        assert_int_equal(check_others(), 0);
    assert_int_equal(fallbacks() - f0, 0); /* the dead writer's bracket is closed */
    assert_verify();
}

static void parent_writes(enum kill_mode mode)
{
    pid_t pid = spawn_holder(VICTIM, strlen(VICTIM));
    kill_holder(pid, mode);
    int rc;
    doing = mode == REAPED ? "pc_set, holder reaped" : "pc_set, holder a zombie";
    int64_t ns = timed_set(VICTIM, strlen(VICTIM), 'w', 120, &rc);
    print_message("pc_set over a dead holder's lock: %.3f ms\n", (double)ns / 1e6);
    assert_int_equal(rc, 0);
    assert_true(ns < LIMIT_NS);
    assert_recovered('w', 120);
    if (mode != REAPED)
        reap_holder(pid);
}

static void test_lockdeath_zombie_parent_writes(void **state)
{
    (void)state;
    parent_writes(ZOMBIE_NOW);
}

static void test_lockdeath_confirmed_zombie_parent_writes(void **state)
{
    (void)state;
    parent_writes(ZOMBIE_CONFIRMED);
}

static void test_lockdeath_reaped_parent_writes(void **state)
{
    (void)state;
    parent_writes(REAPED);
}

/* The reader's way in: every neighbour read (bucket slots and overflow) must
 * get past the dead writer's odd version before anyone writes. */
static void test_lockdeath_reaped_parent_reads_first(void **state)
{
    (void)state;
    pid_t pid = spawn_holder(VICTIM, strlen(VICTIM));
    kill_holder(pid, REAPED);
    doing = "reads of the neighbours, holder reaped";
    int64_t t = now_ns();
    assert_int_equal(check_others(), 0);
    int64_t ns = now_ns() - t;
    print_message("reads past a dead holder's bracket: %.3f ms\n", (double)ns / 1e6);
    assert_true(ns < LIMIT_NS);
    assert_int_equal(expect(VICTIM, strlen(VICTIM), 'v', 100), 0);
    int rc;
    ns = timed_set(VICTIM, strlen(VICTIM), 'r', 30, &rc);
    assert_int_equal(rc, 0);
    assert_true(ns < LIMIT_NS);
    assert_recovered('r', 30);
}

struct child_result {
    int set_rc, bad_reads, verify_rc;
    int64_t set_ns;
};

/* Another child does the recovering write: the dead holder is its sibling,
 * a zombie it cannot reap (or a pid that no longer exists). */
static void child_writes(enum kill_mode mode)
{
    int go[2], res[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(res), 0);
    pid_t holder = spawn_holder(VICTIM, strlen(VICTIM));
    fflush(NULL);
    pid_t writer = fork();
    assert_true(writer >= 0);
    if (writer == 0) {
        close(go[1]);
        close(res[0]);
        child_signals_default();
        alarm(10);
        char c;
        struct child_result r = {0};
        if (read_timed(go[0], &c, 1, 10000) != 0)
            _exit(2);
        doing = "a child's pc_set over its dead sibling's lock";
        r.set_ns = timed_set(VICTIM, strlen(VICTIM), 'c', 77, &r.set_rc);
        r.bad_reads = check_others() + (expect(VICTIM, strlen(VICTIM), 'c', 77) != 0);
        char msg[256];
        r.verify_rc = pc__test_verify(cache, msg, sizeof msg);
        if (write(res[1], &r, sizeof r) != sizeof r)
            _exit(2);
        _exit(0);
    }
    close(go[0]);
    close(res[1]);
    kill_holder(holder, mode);
    assert_int_equal(write(go[1], "g", 1), 1);
    struct child_result r;
    assert_int_equal(read_timed(res[0], &r, sizeof r, 15000), 0);
    int st = 0;
    assert_int_equal(waitpid(writer, &st, 0), writer);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(go[1]);
    close(res[0]);
    print_message("child's pc_set over a dead sibling's lock: %.3f ms\n", (double)r.set_ns / 1e6);
    assert_int_equal(r.set_rc, 0);
    assert_true(r.set_ns < LIMIT_NS);
    assert_int_equal(r.bad_reads, 0);
    assert_int_equal(r.verify_rc, 0);
    assert_recovered('c', 77); /* and the parent sees the same */
    if (mode != REAPED)
        reap_holder(holder);
}

static void test_lockdeath_zombie_child_writes(void **state)
{
    (void)state;
    child_writes(ZOMBIE_NOW);
}

static void test_lockdeath_reaped_child_writes(void **state)
{
    (void)state;
    child_writes(REAPED);
}

/* Several deaths on one bucket, each recovered by a different write path,
 * with the lock taken through the victim or through a neighbour. */
static void test_lockdeath_repeated_deaths_one_bucket(void **state)
{
    (void)state;
    const size_t vl = strlen(VICTIM);
    for (int round = 0; round < 5; round++) {
        int via_neigh = round % 2;
        pid_t pid = via_neigh ? spawn_holder(neigh[0], neigh_len[0]) : spawn_holder(VICTIM, vl);
        enum kill_mode mode = round % 3 == 0 ? REAPED : ZOMBIE_NOW;
        kill_holder(pid, mode);
        static const char *const what[] = {"round: set", "round: remove", "round: add",
                                           "round: NX set"};
        doing = what[round % 4];
        int64_t t = now_ns(), v = 0;
        int rc = 0;
        unsigned char val[64];
        switch (round % 4) {
        case 0:
            memset(val, 'x', 20);
            rc = pc_set(coll, VICTIM, vl, val, 20, 0, 0);
            break;
        case 1:
            rc = pc_remove(coll, VICTIM, vl);
            break;
        case 2:
            rc = pc_add(coll, VICTIM, vl, 5, 0, &v); /* absent: starts at 0 */
            break;
        case 3:
            memset(val, 'y', 33);
            rc = pc_set(coll, VICTIM, vl, val, 33, 0, PC_SET_NX);
            break;
        }
        int64_t ns = now_ns() - t;
        assert_int_equal(rc, 0);
        assert_true(ns < LIMIT_NS);
        if (round % 4 == 2) {
            assert_int_equal(v, 5);
            assert_int_equal(pc_remove(coll, VICTIM, vl), 0);
        }
        assert_int_equal(check_others(), 0);
        assert_verify();
        if (mode != REAPED)
            reap_holder(pid);
    }
    assert_int_equal(expect(VICTIM, vl, 'x', 20), 0); /* round 4 (case 0) */
    assert_recovered('x', 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lockdeath_zombie_parent_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lockdeath_confirmed_zombie_parent_writes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_lockdeath_reaped_parent_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lockdeath_reaped_parent_reads_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lockdeath_zombie_child_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lockdeath_reaped_child_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lockdeath_repeated_deaths_one_bucket, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
