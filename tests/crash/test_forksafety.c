/*
 * test_forksafety.c - regression "a forked child never reuses or donates a
 * cell another process owns".
 *
 * Allocation state is per process: a bump chunk and a private free stack
 * per size class. fork() gives every child a copy-on-write copy of the
 * parent's, naming the very cells the parent will hand out next. The bug
 * this pins down: each child donated that inherited hoard to the global
 * pool, so one physical cell was queued once per child, popped by several
 * processes at once and written concurrently - a value byte landed on
 * another cell's class byte and the arena died on an impossible size class.
 * A child must drop what it inherited and carve its own.
 *
 * The parent stores and removes keys until its private stacks hold cells,
 * forks children (and, in the second test, a child forks a grandchild) and
 * checks that each starts with an empty private stack and that the global
 * pool did not grow at the fork. Then every process writes its own keys at
 * once - all-bytes-equal values in the size classes of the hoard, removed
 * and rewritten in part - and afterwards every process reads every key back
 * intact; pc__test_verify must return 0.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h> /* after the four headers it needs */

#include "pc_testhooks.h"
#include "pcache.h"

#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define NCHILD 3
#define NKEYS 4000u  /* per writer */
#define NHOARD 3000u /* keys the parent stores and removes before the fork */
#define NPRE 500u    /* keys the parent keeps from before the fork */
#define W_PRE 99     /* writer ids of those two sets */
#define W_HOARD 98
#define W_CHILD_HOARD 97 /* the hoard a child builds before it forks */
#define W_PARENT 0       /* children are 1..NCHILD, a grandchild NCHILD + 1 */

static pc_cache *cache;
static pc_coll *coll;

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

/* ---- the key and value shapes ------------------------------------------------
 * Writer w's key n: removed when n % 3 == 1, rewritten (version 2) when
 * n % 6 == 0, else version 1. The value is len(w, n, v) bytes of
 * byte(w, n, v): lengths span the small classes, every 50th is larger. */
static size_t key_of(char *k, int w, uint32_t n)
{
    return (size_t)sprintf(k, "w%d:%" PRIu32, w, n);
}
static unsigned byte_of(int w, uint32_t n, unsigned v)
{
    return 1u + ((unsigned)w * 31u + n * 7u + v * 101u) % 255u;
}
static size_t len_of(int w, uint32_t n, unsigned v)
{
    return n % 50 == 0 ? 1500u + n % 500u : 1u + ((unsigned)w * 13u + n * 29u + v * 17u) % 500u;
}

static int store(int w, uint32_t n, unsigned v)
{
    char k[32];
    unsigned char val[2048];
    size_t len = len_of(w, n, v);
    memset(val, (int)byte_of(w, n, v), len);
    return pc_set(coll, k, key_of(k, w, n), val, len, 0, 0);
}

/* Writes writer w's NKEYS keys, removes every third, rewrites every sixth:
 * frees and reallocations in the same classes. Returns failed calls. */
static int write_set(int w)
{
    char k[32];
    int bad = 0;
    for (uint32_t n = 0; n < NKEYS; n++)
        bad += store(w, n, 1) != 0;
    for (uint32_t n = 1; n < NKEYS; n += 3)
        bad += pc_remove(coll, k, key_of(k, w, n)) != 0;
    for (uint32_t n = 0; n < NKEYS; n += 6)
        bad += store(w, n, 2) != 0;
    return bad;
}

/* Reads writer w's keys back as write_set left them; returns wrong reads. */
static int check_set(int w, uint32_t nkeys, int full_pattern)
{
    char k[32];
    unsigned char val[2048];
    int bad = 0;
    for (uint32_t n = 0; n < nkeys; n++) {
        size_t kl = key_of(k, w, n), vlen = 0, needed = 0;
        int rc = pc_get_buf(coll, k, kl, val, sizeof val, &vlen, &needed, NULL);
        int want_absent = full_pattern && n % 3 == 1;
        unsigned v = full_pattern && n % 6 == 0 ? 2 : 1;
        int ok;
        if (want_absent) {
            ok = rc == PC_ENOTFOUND;
        } else {
            ok = rc == 0 && vlen == len_of(w, n, v);
            for (size_t i = 0; ok && i < vlen; i++)
                ok = val[i] == byte_of(w, n, v);
        }
        if (!ok && bad++ < 5)
            fprintf(stderr, "[pid %d] key %s: rc %s vlen %zu byte 0x%02x (want %s%zu x 0x%02x)\n",
                    (int)getpid(), k, pc_strerror(rc), vlen, rc == 0 && vlen ? val[0] : 0,
                    want_absent ? "absent, not " : "", len_of(w, n, v), byte_of(w, n, v));
    }
    return bad;
}

static int check_all(int nwriters)
{
    int bad = check_set(W_PRE, NPRE, 0);
    for (int w = 0; w < nwriters; w++)
        bad += check_set(w, NKEYS, 1);
    return bad;
}

/* ---- plumbing ---------------------------------------------------------------- */
struct msg {
    int who;
    int bad;
    uint64_t priv, glob;
};

static int read_msg(int fd, struct msg *m)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, 30000) != 1)
        return -1;
    return read(fd, m, sizeof *m) == (ssize_t)sizeof *m ? 0 : -1;
}

static int wait_byte(int fd)
{
    char c;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    return poll(&pfd, 1, 30000) == 1 && read(fd, &c, 1) == 1 ? 0 : -1;
}

/* One go pipe per child: a byte on a shared pipe could be taken by a fast
 * child as its next signal before a slow one had its first. */
static void signal_all(int go[][2], int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(write(go[i][1], "g", 1), 1);
}

static void send_msg(int fd, const struct msg *m)
{
    if (write(fd, m, sizeof *m) != (ssize_t)sizeof *m)
        _exit(3);
}

static int setup(void **state)
{
    (void)state;
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "fs=12";
    cfg.mem_mb = 64;
    if (pc_cache_create(&cfg, &cache) != 0 || pc_coll_find(cache, "fs", 2, &coll) != 0)
        return -1;
    alarm(120);
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

/* A hoard: NPRE keys kept (the parent's only), NHOARD stored and removed
 * again. No cmocka asserts: a forked child calls it too. Returns failures. */
static int build_hoard(int w_hoard, uint64_t *priv, uint64_t *glob)
{
    char k[32];
    int bad = 0;
    for (uint32_t n = 0; n < NPRE && w_hoard == W_HOARD; n++)
        bad += store(W_PRE, n, 1) != 0;
    for (uint32_t n = 0; n < NHOARD; n++)
        bad += store(w_hoard, n, 1) != 0;
    for (uint32_t n = 0; n < NHOARD; n++)
        bad += pc_remove(coll, k, key_of(k, w_hoard, n)) != 0;
    pc__test_free_counts(cache, priv, glob);
    return bad;
}

/* A fork is noticed by the first operation after it (the engine drops the
 * inherited state lazily), so a child probes an absent key - a read, which
 * allocates nothing - before it looks at its free counts. */
static void first_touch(void)
{
    (void)pc_probe(coll, "absent", 6, NULL);
}

/* A child: report the free counts it starts with, write its set when told,
 * check every writer's keys when told again, and exit. */
static void child_main(int who, int nwriters, int up, int go)
{
    struct msg m = {.who = who};
    first_touch();
    pc__test_free_counts(cache, &m.priv, &m.glob);
    send_msg(up, &m);
    if (wait_byte(go) != 0)
        _exit(4);
    m.bad = write_set(who);
    send_msg(up, &m);
    if (wait_byte(go) != 0)
        _exit(4);
    m.bad = check_all(nwriters);
    send_msg(up, &m);
    _exit(0);
}

static void reap_ok(pid_t pid)
{
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        fprintf(stderr, "child %d: %s %d\n", (int)pid,
                WIFSIGNALED(st) ? "killed by signal" : "exit status",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void assert_verify(void)
{
    char msg[256] = "";
    int rc = pc__test_verify(cache, msg, sizeof msg);
    if (rc != 0)
        fprintf(stderr, "pc__test_verify: %s\n", msg);
    assert_int_equal(rc, 0);
}

static void test_forksafety_child_never_reuses_or_donates_parent_cells(void **state)
{
    (void)state;
    uint64_t priv0 = 0, glob0 = 0, priv1 = 0, glob1 = 0;
    assert_int_equal(build_hoard(W_HOARD, &priv0, &glob0), 0);
    print_message("parent hoard before fork: %" PRIu64 " private cells, %" PRIu64
                  " in the global pool\n",
                  priv0, glob0);
    assert_true(priv0 > 0);

    int up[2], go[NCHILD][2];
    assert_int_equal(pipe(up), 0);
    for (int i = 0; i < NCHILD; i++)
        assert_int_equal(pipe(go[i]), 0);
    pid_t kids[NCHILD];
    fflush(NULL);
    for (int i = 0; i < NCHILD; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            child_signals_default();
            close(up[0]);
            child_main(1 + i, NCHILD + 1, up[1], go[i][0]);
        }
        close(go[i][0]);
    }
    close(up[1]);

    /* Right after the fork: each child dropped its copy of the hoard and
     * gave none of it away; the parent still owns its own. */
    struct msg m;
    for (int i = 0; i < NCHILD; i++) {
        assert_int_equal(read_msg(up[0], &m), 0);
        print_message("child %d after fork: %" PRIu64 " private, %" PRIu64 " global\n", m.who,
                      m.priv, m.glob);
        assert_int_equal(m.priv, 0);
        assert_true(m.glob <= glob0);
    }
    pc__test_free_counts(cache, &priv1, &glob1);
    assert_int_equal(priv1, priv0);
    assert_true(glob1 <= glob0);

    /* Everyone writes at once; the parent spends its hoard meanwhile. */
    signal_all(go, NCHILD);
    assert_int_equal(write_set(W_PARENT), 0);
    for (int i = 0; i < NCHILD; i++) {
        assert_int_equal(read_msg(up[0], &m), 0);
        assert_int_equal(m.bad, 0);
    }
    /* Everyone reads everything. */
    signal_all(go, NCHILD);
    int bad = check_all(NCHILD + 1);
    for (int i = 0; i < NCHILD; i++) {
        assert_int_equal(read_msg(up[0], &m), 0);
        if (m.bad)
            fprintf(stderr, "child %d read %d keys wrong\n", m.who, m.bad);
        bad += m.bad;
    }
    for (int i = 0; i < NCHILD; i++) {
        reap_ok(kids[i]);
        close(go[i][1]);
    }
    close(up[0]);
    assert_int_equal(bad, 0);
    assert_verify();
}

/* The same one level down: a child that built its own hoard forks a
 * grandchild, which must drop the child's hoard in turn. */
static void test_forksafety_grandchild_never_reuses_or_donates_child_cells(void **state)
{
    (void)state;
    int up[2], go[2][2]; /* go[0]: the child's, go[1]: the grandchild's */
    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(go[0]), 0);
    assert_int_equal(pipe(go[1]), 0);
    uint64_t p0, g0;
    assert_int_equal(build_hoard(W_HOARD, &p0, &g0), 0); /* the parent's own */
    fflush(NULL);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        child_signals_default();
        close(up[0]);
        struct msg m = {.who = 1};
        int code = 0, st = 0;
        first_touch();
        pc__test_free_counts(cache, &m.priv, &m.glob);
        if (m.priv != 0) {
            fprintf(stderr, "child: %" PRIu64 " private cells right after fork\n", m.priv);
            code |= 16;
        }
        m.bad = build_hoard(W_CHILD_HOARD, &m.priv, &m.glob); /* the child's own hoard */
        send_msg(up[1], &m);
        fflush(NULL);
        pid_t gc = fork();
        if (gc == 0) {
            child_signals_default(); /* the death signal does not survive a fork */
            child_main(2, 3, up[1], go[1][0]);
        }
        code |= gc < 0 ? 32 : 0;
        if (wait_byte(go[0][0]) != 0)
            _exit(4);
        m.bad = write_set(1);
        send_msg(up[1], &m);
        if (wait_byte(go[0][0]) != 0)
            _exit(4);
        m.bad = check_all(3);
        send_msg(up[1], &m);
        if (gc > 0 && (waitpid(gc, &st, 0) != gc || !WIFEXITED(st) || WEXITSTATUS(st) != 0))
            code |= 64;
        _exit(code);
    }
    close(up[1]);
    close(go[0][0]);
    close(go[1][0]);
    struct msg m, hoard = {0};
    assert_int_equal(read_msg(up[0], &hoard), 0);
    print_message("child hoard before its fork: %" PRIu64 " private, %" PRIu64 " global\n",
                  hoard.priv, hoard.glob);
    assert_int_equal(hoard.bad, 0);
    assert_true(hoard.priv > 0);
    assert_int_equal(read_msg(up[0], &m), 0); /* nobody writes until this */
    print_message("grandchild after fork: %" PRIu64 " private, %" PRIu64 " global\n", m.priv,
                  m.glob);
    assert_int_equal(m.who, 2);
    assert_int_equal(m.priv, 0);
    assert_true(m.glob <= hoard.glob);

    signal_all(go, 2); /* child and grandchild write */
    assert_int_equal(write_set(W_PARENT), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(read_msg(up[0], &m), 0);
        assert_int_equal(m.bad, 0);
    }
    signal_all(go, 2); /* everyone reads everything */
    int bad = check_all(3);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(read_msg(up[0], &m), 0);
        if (m.bad)
            fprintf(stderr, "process %d read %d keys wrong\n", m.who, m.bad);
        bad += m.bad;
    }
    reap_ok(child);
    close(up[0]);
    close(go[0][1]);
    close(go[1][1]);
    assert_int_equal(bad, 0);
    assert_verify();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_forksafety_child_never_reuses_or_donates_parent_cells,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_forksafety_grandchild_never_reuses_or_donates_child_cells, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
