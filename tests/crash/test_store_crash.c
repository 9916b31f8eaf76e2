/*
 * test_store_crash.c - crash atomicity of snapshot saves: a process
 * SIGKILLed at any point of a save leaves the previous snapshot whole, or
 * the new one, never a mix.
 *
 * A forked child creates its own cache, opens the store and saves
 * collection "k" in a loop; before each save it rewrites the collection to
 * a new marker m: 1500 + m % 1000 keys "k<i>", every string value starting
 * "m=<m>;i=<i>;" and every tenth entry a counter holding m. The child tells
 * the parent through a pipe when a save starts; the parent SIGKILLs it after
 * a random delay between 0 and 1.5 times the measured duration of a save
 * (blocks of 16 KiB, so a save puts about twenty of them)
 * (so kills land in the walk, the compression, the LMDB puts, the commit's
 * page writes and fsync, and after it), in the first or a later save of the
 * child. Then the parent reopens the store (read-write or read-only,
 * alternately) and checks:
 *   - it opens, and pc_store_verify finds no problem (every block and record
 *     checksum, the meta's count and content checksum re-derived);
 *   - every record carries the same marker m, there are exactly
 *     1500 + m % 1000 of them and every key k0.. is present (a whole
 *     snapshot of one generation);
 *   - the generation never goes back, and when it did not move the marker
 *     did not change either;
 *   - every tenth iteration, a load into a fresh cache stores them all.
 * PCACHE_CRASH_ITERS sets the number of kills (default 200). A second,
 * shorter loop kills children while they create a new store: the next open
 * with PC_STORE_CREATE must succeed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pcache.h"
#include "pcache_store.h"
#include "pcache_storecheck.h"

#define check_rc(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr), want_ = (want);                                                          \
        if (rc_ != want_)                                                                          \
            fail_msg("%s = %d (%s), want %d (%s)", #expr, rc_, pc_store_strerror(rc_), want_,      \
                     pc_store_strerror(want_));                                                    \
    } while (0)

#define NBASE 1500u
#define NSPAN 1000u
#define NMAX (NBASE + NSPAN)

static char root[256];

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void log_cb(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= PC_LOG_ERR)
        fprintf(stderr, "[store %d] %s\n", level, msg);
}

static pc_store *open_store(const char *dir, unsigned flags, int *rc_out)
{
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = flags;
    sc.log.fn = log_cb;
    sc.block_bytes = 16384; /* ~20 blocks a save: kills land between block puts too */
    pc_store *s = NULL;
    char err[512] = "";
    int rc = pc_store_open_checked(dir, &sc, &s, err, sizeof err);
    if (rc_out != NULL)
        *rc_out = rc;
    if (rc != 0 && rc_out == NULL)
        fail_msg("open %s: %s: %s", dir, pc_store_strerror(rc), err);
    return s;
}

/* The collection's content for marker m. */
static void fill(pc_coll *co, uint64_t m)
{
    uint64_t gone = 0;
    pc_del_glob(co, "*", 1, &gone);
    unsigned n = NBASE + (unsigned)(m % NSPAN);
    char k[16], v[300];
    for (unsigned i = 0; i < n; i++) {
        int kl = snprintf(k, sizeof k, "k%u", i);
        if (i % 10 == 0) {
            pc_set_counter(co, k, (size_t)kl, (int64_t)(m & 0x7fffffffffffull), 0);
            continue;
        }
        int vl = snprintf(v, sizeof v, "m=%" PRIu64 ";i=%u;%.*s", m, i, (int)((m + i) % 200),
                          "sip:alice@example.com;tag=4fa3;branch=z9hG4bK-1;received=192.0.2.1;"
                          "sip:alice@example.com;tag=4fa3;branch=z9hG4bK-1;received=192.0.2.1;"
                          "sip:alice@example.com;tag=4fa3;branch=z9hG4bK-1;received=192.0.2.1;");
        pc_set(co, k, (size_t)kl, v, (size_t)vl, 0, 0);
    }
}

/* The child: save forever, telling the parent when each save starts. */
static void saver(const char *dir, int wfd, uint64_t seed)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGABRT, SIG_DFL);
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "k";
    cfg.mem_mb = 32;
    pc_cache *c = NULL;
    if (pc_cache_create(&cfg, &c) != 0)
        _exit(2);
    pc_coll *co;
    if (pc_coll_find(c, "k", 1, &co) != 0)
        _exit(2);
    pc_store *s = open_store(dir, 0, &(int){0});
    if (s == NULL)
        _exit(3);
    for (;;) {
        uint64_t m = rng(&seed) >> 20; /* 44 bits: a counter holds it exactly */
        fill(co, m);
        if (write(wfd, "S", 1) != 1)
            _exit(4);
        if (pc_store_save(s, co, NULL, NULL) != 0)
            _exit(5);
        if (write(wfd, "D", 1) != 1)
            _exit(4);
    }
}

struct snap_check {
    uint64_t m;
    uint64_t n;
    int bad;
    unsigned char seen[NMAX];
};

static int check_cb(void *ctx, const pc_store_record *r)
{
    struct snap_check *sc = ctx;
    char k[16];
    if (r->klen < 2 || r->klen >= sizeof k || ((const char *)r->key)[0] != 'k') {
        sc->bad = 1;
        return 0;
    }
    memcpy(k, r->key, r->klen);
    k[r->klen] = 0;
    unsigned i = (unsigned)atoi(k + 1);
    uint64_t m;
    if (r->is_counter) {
        int64_t v;
        memcpy(&v, r->val, 8);
        m = (uint64_t)v;
    } else {
        if (r->vlen < 3 || memcmp(r->val, "m=", 2) != 0) {
            sc->bad = 1;
            return 0;
        }
        m = strtoull((const char *)r->val + 2, NULL, 10);
    }
    uint64_t mm = r->is_counter ? m : m & 0x7fffffffffffull;
    if (sc->n == 0)
        sc->m = mm;
    if (mm != sc->m || i >= NMAX || sc->seen[i] || (i % 10 == 0) != (r->is_counter != 0))
        sc->bad = 1;
    else
        sc->seen[i] = 1;
    sc->n++;
    return 0;
}

/* One check of the store after a kill. Returns the generation. */
static uint64_t check_store(const char *dir, unsigned it, uint64_t prev_gen, uint64_t *prev_m)
{
    int rc;
    pc_store *s = open_store(dir, it % 2 == 0 ? 0 : PC_STORE_RDONLY, &rc);
    if (rc != 0)
        fail_msg("iteration %u: the store does not open after a kill: %s", it,
                 pc_store_strerror(rc));
    pc_store_problem *pr;
    size_t np;
    check_rc(pc_store_verify(s, NULL, &pr, &np), PC_OK);
    if (np != 0)
        fail_msg("iteration %u: verify found %zu problems, the first: %s", it, np, pr[0].message);
    pc_store_coll_meta meta;
    check_rc(pc_store_coll_meta_get(s, "k", &meta), PC_OK);
    struct snap_check *sc = calloc(1, sizeof *sc);
    check_rc(pc_store_iterate(s, "k", 0, check_cb, sc), PC_OK);
    uint64_t want = NBASE + sc->m % NSPAN;
    if (sc->bad || sc->n != want || sc->n != meta.count)
        fail_msg("iteration %u: generation %" PRIu64 " is not one whole snapshot: %" PRIu64
                 " records (meta %" PRIu64 ", marker %" PRIu64 " wants %" PRIu64 "), mixed=%d",
                 it, meta.generation, sc->n, meta.count, sc->m, want, sc->bad);
    for (uint64_t i = 0; i < want; i++)
        if (!sc->seen[i])
            fail_msg("iteration %u: key k%" PRIu64 " missing", it, i);
    if (meta.generation < prev_gen)
        fail_msg("iteration %u: generation went back from %" PRIu64 " to %" PRIu64, it, prev_gen,
                 meta.generation);
    if (meta.generation == prev_gen && sc->m != *prev_m)
        fail_msg("iteration %u: generation %" PRIu64 " changed content", it, prev_gen);
    *prev_m = sc->m;
    if (it % 10 == 0) { /* and it loads */
        pc_config cfg;
        pc_config_init(&cfg);
        cfg.collections = "k";
        cfg.mem_mb = 32;
        pc_cache *c = NULL;
        check_rc(pc_cache_create(&cfg, &c), PC_OK);
        pc_coll *co;
        check_rc(pc_coll_find(c, "k", 1, &co), PC_OK);
        pc_store_load_result lr;
        check_rc(pc_store_load(s, co, NULL, &lr), PC_OK);
        assert_int_equal(lr.loaded, want);
        pc_cache_destroy(c);
    }
    free(sc);
    pc_store_close(s);
    return meta.generation;
}

static unsigned iters(void)
{
    const char *e = getenv("PCACHE_CRASH_ITERS");
    return e != NULL && atoi(e) > 0 ? (unsigned)atoi(e) : 200;
}

static void test_kill_during_saves(void **state)
{
    (void)state;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/store", root);
    /* create the store */
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "k";
    cfg.mem_mb = 32;
    pc_cache *c = NULL;
    check_rc(pc_cache_create(&cfg, &c), PC_OK);
    pc_coll *co;
    check_rc(pc_coll_find(c, "k", 1, &co), PC_OK);
    pc_store *s = open_store(dir, PC_STORE_CREATE, NULL);
    fill(co, 5);
    check_rc(pc_store_save(s, co, NULL, NULL), PC_OK);
    pc_store_close(s);
    pc_cache_destroy(c);
    /* time a saver's first save (cold: a fresh process) and its later ones */
    int64_t first_us = 0, later_us = 0;
    for (int cal = 0; cal < 3; cal++) {
        int pfd[2];
        assert_int_equal(pipe(pfd), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(pfd[0]);
            saver(dir, pfd[1], 1000 + (uint64_t)cal);
        }
        close(pfd[1]);
        char ch;
        for (int k = 0; k < 4; k++) {
            assert_int_equal(read(pfd[0], &ch, 1), 1); /* S */
            int64_t t = mono_us();
            assert_int_equal(read(pfd[0], &ch, 1), 1); /* D */
            t = mono_us() - t;
            if (k == 0 && t > first_us)
                first_us = t;
            if (k > 0 && t > later_us)
                later_us = t;
        }
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(pfd[0]);
    }
    int64_t span_first = first_us * 3 / 2 + 200, span_later = later_us * 3 / 2 + 200;
    unsigned n = iters(), moved = 0, later_save = 0;
    uint64_t seed = (uint64_t)mono_us(), gen = 0, m = 5;
    int64_t t0 = mono_us();
    for (unsigned it = 0; it < n; it++) {
        int pfd[2];
        assert_int_equal(pipe(pfd), 0);
        uint64_t cseed = rng(&seed);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(pfd[0]);
            saver(dir, pfd[1], cseed);
        }
        close(pfd[1]);
        /* kill inside the first save, or a later one */
        unsigned nth = rng(&seed) % 4 == 0 ? 2 + (unsigned)(rng(&seed) % 3) : 1;
        char ch;
        for (unsigned k = 0; k < nth;)
            if (read(pfd[0], &ch, 1) != 1)
                fail_msg("iteration %u: the saver died on its own", it);
            else
                k += ch == 'S';
        later_save += nth > 1;
        int64_t span_us = nth == 1 ? span_first : span_later;
        int64_t delay = (int64_t)(rng(&seed) % (uint64_t)span_us);
        int64_t until = mono_us() + delay;
        while (mono_us() < until)
            ; /* spin: usleep's slack would skew short delays */
        kill(pid, SIGKILL);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        close(pfd[0]);
        if (!WIFSIGNALED(st))
            fail_msg("iteration %u: the saver exited with %d before the kill", it, WEXITSTATUS(st));
        uint64_t g = check_store(dir, it, gen, &m);
        moved += g != gen;
        gen = g;
    }
    double secs = (double)(mono_us() - t0) / 1e6;
    print_message("[crash] %u kills in %.1f s (a first save takes %.1f ms, a later one %.1f ms; "
                  "kill windows 1.5x that): the new snapshot had committed in %u, the previous "
                  "one stood in %u; %u kills in a later save of the child; final generation "
                  "%" PRIu64 "\n",
                  n, secs, (double)first_us / 1e3, (double)later_us / 1e3, moved, n - moved,
                  later_save, gen);
    /* both outcomes must have happened, or the kills missed the save */
    assert_true(n < 20 || (moved > 0 && moved < n));
}

static void test_kill_during_create(void **state)
{
    (void)state;
    uint64_t seed = (uint64_t)mono_us() ^ 0x5555;
    unsigned n = 20, opened_complete = 0;
    for (unsigned it = 0; it < n; it++) {
        char dir[300];
        snprintf(dir, sizeof dir, "%s/create-%u", root, it);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            signal(SIGABRT, SIG_DFL);
            for (;;) { /* create, then keep committing boot generations */
                pc_store *s = open_store(dir, PC_STORE_CREATE, &(int){0});
                uint64_t g;
                if (s != NULL)
                    pc_store_next_boot_gen(s, &g);
                pc_store_close(s);
            }
        }
        int64_t until = mono_us() + (int64_t)(rng(&seed) % 25000);
        while (mono_us() < until)
            ;
        kill(pid, SIGKILL);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        int rc;
        pc_store *s = open_store(dir, PC_STORE_CREATE, &rc);
        if (rc != 0)
            fail_msg("create iteration %u: %s", it, pc_store_strerror(rc));
        pc_store_info in;
        check_rc(pc_store_info_get(s, &in), PC_OK);
        opened_complete += in.boot_gen > 0;
        pc_store_close(s);
    }
    print_message("[crash] %u kills while creating a store: all reopened (%u had committed "
                  "boot generations)\n",
                  n, opened_complete);
}

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    snprintf(root, sizeof root, "%s/pcache-crash-XXXXXX", base);
    return mkdtemp(root) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_during_saves),
        cmocka_unit_test(test_kill_during_create),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
