/*
 * test_store_race.c - the snapshot store under concurrency
 * (storage/store/include/pcache_store.h): a reader process that verifies
 * the store while the parent saves in a loop (it must always see one whole
 * snapshot); saves while a forked process grows the table and churns other
 * keys (every key unchanged throughout must be in each snapshot, once, with
 * its value, type and TTL: PCACHE_RACE_SECONDS lengthens it, default 3).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pcache.h"
#include "pcache_store.h"
#include "pcache_storecheck.h"
#include "sipgen.h"
#include "store_testlib.h"

/* ---- a reader process during saves ------------------------------------------- */
/* Generation g of collection "r": 500 + (g * 37) % 400 keys "r<i>", each
 * value "gen=<g>;" plus filler. A whole snapshot has every value with the
 * same g and exactly that many keys. */
static void put_gen(pc_coll *co, uint64_t g, size_t *count)
{
    check_rc(pc_del_glob(co, "*", 1, &(uint64_t){0}), PC_OK);
    size_t n = 500 + (size_t)(g * 37) % 400;
    char k[32], v[200];
    for (size_t i = 0; i < n; i++) {
        int kl = snprintf(k, sizeof k, "r%zu", i);
        int vl = snprintf(v, sizeof v, "gen=%" PRIu64 ";i=%zu;%.*s", g, i, (int)(i % 120),
                          "filler filler filler filler filler filler filler filler filler filler "
                          "filler filler filler filler filler filler filler filler");
        check_rc(pc_set(co, k, (size_t)kl, v, (size_t)vl, 0, 0), PC_OK);
    }
    *count = n;
}

struct gen_check {
    long long g;
    uint64_t n;
    int bad;
};

static int gen_cb(void *ctx, const pc_store_record *r)
{
    struct gen_check *gc = ctx;
    long long g = -1;
    if (r->vlen > 4 && memcmp(r->val, "gen=", 4) == 0)
        g = atoll((const char *)r->val + 4);
    if (gc->n == 0)
        gc->g = g;
    else if (g != gc->g)
        gc->bad = 1;
    gc->n++;
    return 0;
}

static void test_reader_during_saves(void **state)
{
    (void)state;
    char dir[300];
    mk_tmp(dir, sizeof dir, "reader");
    pc_cache *c = pc_fx_cache("r", 32);
    pc_coll *co = pc_fx_coll(c, "r");
    size_t cnt;
    put_gen(co, 1, &cnt);
    pc_store *s = open_store(dir, PC_STORE_CREATE);
    pc_store_save_result sr;
    check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* the reader: its own handle, read-only */
        close(pfd[0]);
        signal(SIGABRT, SIG_DFL);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pc_store_config sc;
        pc_store_config_init(&sc);
        sc.flags = PC_STORE_RDONLY;
        pc_store *rs = NULL;
        if (pc_store_open_checked(dir, &sc, &rs, NULL, 0) != 0)
            _exit(2);
        unsigned rounds = 0, bad = 0;
        uint64_t last_gen = 0, gens = 0;
        int64_t end = mono_ms() + 2500;
        while (mono_ms() < end) {
            struct gen_check gc = {0};
            pc_store_problem *pr;
            size_t np = 0;
            if (pc_store_verify(rs, "r", &pr, &np) != 0 || np != 0)
                bad++;
            pc_store_problems_free(pr, np);
            pc_store_coll_meta m;
            if (pc_store_iterate(rs, "r", 0, gen_cb, &gc) != 0 || gc.bad ||
                gc.n != 500 + (uint64_t)(gc.g * 37) % 400)
                bad++;
            if (pc_store_coll_meta_get(rs, "r", &m) == 0 && m.generation != last_gen) {
                if (m.generation < last_gen)
                    bad++;
                last_gen = m.generation;
                gens++;
            }
            rounds++;
        }
        pc_store_close(rs);
        char msg[64];
        int len = snprintf(msg, sizeof msg, "%u %u %" PRIu64, rounds, bad, gens);
        if (write(pfd[1], msg, (size_t)len) != len)
            _exit(3);
        _exit(bad == 0 ? 0 : 1);
    }
    close(pfd[1]);
    int64_t end = mono_ms() + 2700;
    uint64_t g = 2, saves = 0;
    while (mono_ms() < end) {
        put_gen(co, g++, &cnt);
        check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
        saves++;
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    char msg[64] = "";
    ssize_t got = read(pfd[0], msg, sizeof msg - 1);
    close(pfd[0]);
    msg[got > 0 ? got : 0] = 0;
    print_message("[reader] %" PRIu64 " saves; reader rounds, inconsistent, generations seen: %s\n",
                  saves, msg);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    unsigned rounds = 0, bad = 1;
    uint64_t gens = 0;
    assert_int_equal(sscanf(msg, "%u %u %" SCNu64, &rounds, &bad, &gens), 3);
    assert_int_equal(bad, 0);
    assert_true(rounds > 10 && gens > 2);
    pc_store_close(s);
    pc_cache_destroy(c);
}

/* ---- saves while another process grows the table ----------------------------------
 * A save walks the live table lock-free (pc_walk_ordered) while workers keep
 * writing and the maintenance process splits buckets and drains overflow.
 * The snapshot must still hold every key that existed unchanged for the
 * whole save, exactly once, with its value, its counter type and its TTL.
 * The walk bug of 910785b (a split during a group's copy hid keys from the
 * save) was only caught below the store; here the whole path is checked:
 * each save is iterated from the store, and every 4th is loaded into a
 * fresh cache and read back through the engine.
 * A walk is most exposed while the table is small (a group is a large part
 * of it, so a split often lands in the group being copied), so the run is
 * rounds on a fresh cache of 16 buckets holding the stable keys: strings of
 * 1..2500 bytes, native counters, some with a one hour TTL, one in ten
 * "hot" (the hash's low 8 bits fixed: they crowd into a few buckets and
 * their chains). A forked child grows it to a few thousand buckets (load
 * factor 1, one split per pc_maintain, which also drains) while it inserts
 * churn keys (strings, counters, hot ones), removes them and retypes them
 * (string <-> counter); the parent saves in a loop until the child is done.
 * PCACHE_RACE_SECONDS lengthens the run (default 3). */
#define RACE_STABLE 1000u
#define RACE_CHURN_MAX 3000u
#define RACE_HOT_BITS 0xffu
#define RACE_HOT 0xa5u

struct race_sh {
    _Atomic int err_line, err_rc;
    _Atomic uint64_t iters, splits, drained, removed, retyped;
};

struct race_key {
    char k[32];
    size_t kl;
};
static struct race_key race_keys[RACE_STABLE];

static int64_t race_ms(void)
{
    const char *e = getenv("PCACHE_RACE_SECONDS");
    long s = e != NULL ? strtol(e, NULL, 10) : 0;
    return (s > 0 ? s : 3) * 1000;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* prefix + number, and for a hot key the smallest ".nonce" that puts the
 * hash's low bits on RACE_HOT */
static size_t race_key_make(char *k, const char *prefix, unsigned i, int hot)
{
    size_t n = (size_t)sprintf(k, "%s%05u", prefix, i);
    if (!hot)
        return n;
    for (unsigned nonce = 0;; nonce++) {
        size_t m = n + (size_t)sprintf(k + n, ".%u", nonce);
        if ((pc_hash(k, m) & RACE_HOT_BITS) == RACE_HOT)
            return m;
    }
}

static int race_is_counter(unsigned i)
{
    return i % 3 == 0;
}
static int64_t race_counter(unsigned i)
{
    return (int64_t)(i * 2654435761u) - 2147483648ll;
}
static size_t race_val(unsigned i, unsigned char *v)
{
    size_t vl = 1 + (size_t)(i * 7919u) % 2500;
    for (size_t j = 0; j < vl; j++)
        v[j] = (unsigned char)(i * 31u + j);
    return vl;
}
static int64_t race_ttl(unsigned i)
{
    return i % 7 == 0 ? 3600000 : 0;
}

#define RACE_CHECK(sh, expr, want)                                                                 \
    do {                                                                                           \
        int crc_ = (expr);                                                                         \
        if (crc_ != (want)) {                                                                      \
            atomic_store(&(sh)->err_rc, crc_);                                                     \
            atomic_store(&(sh)->err_line, __LINE__);                                               \
            _exit(2);                                                                              \
        }                                                                                          \
    } while (0)

/* A churn key: "churn:<id>", a hot one (every 6th) with ".<nonce>" (0 = not
 * searched yet: the search sets it). */
static size_t race_churn_key(char *k, uint32_t id, uint32_t *nonce)
{
    size_t n = (size_t)sprintf(k, "churn:%07u", id);
    if (id % 6 != 0)
        return n;
    if (*nonce == 0)
        for (*nonce = 1;
             (pc_hash(k, n + (size_t)sprintf(k + n, ".%u", *nonce)) & RACE_HOT_BITS) != RACE_HOT;
             ++*nonce)
            ;
    return n + (size_t)sprintf(k + n, ".%u", *nonce);
}

static void race_child(pc_cache *c, pc_coll *co, struct race_sh *sh)
{
    signal(SIGABRT, SIG_DFL);
    signal(SIGSEGV, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    static struct {
        uint32_t id, nonce;
    } live[RACE_CHURN_MAX + 8];
    uint32_t n = 0, next_id = 0;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char k[48];
    for (int64_t end = mono_ms() + 30000; n < RACE_CHURN_MAX && mono_ms() < end;) {
        for (int j = 0; j < 2; j++) {
            uint32_t id = next_id++, nonce = 0;
            size_t kl = race_churn_key(k, id, &nonce);
            if (id % 2 == 0)
                RACE_CHECK(sh, pc_set(co, k, kl, k, kl, 0, 0), 0);
            else
                RACE_CHECK(sh, pc_add(co, k, kl, id, 0, NULL), 0);
            live[n].id = id;
            live[n++].nonce = nonce;
        }
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        pc_meta m;
        if ((x >> 40) % 4 == 0) { /* retype one: string <-> counter */
            uint32_t q = (uint32_t)((x >> 20) % n);
            size_t kl = race_churn_key(k, live[q].id, &live[q].nonce);
            RACE_CHECK(sh, pc_probe(co, k, kl, &m), 0);
            if (m.is_counter)
                RACE_CHECK(sh, pc_set(co, k, kl, "s", 1, 0, 0), 0);
            else
                RACE_CHECK(sh, pc_set_counter(co, k, kl, (int64_t)x, 0), 0);
            atomic_fetch_add(&sh->retyped, 1);
        }
        uint32_t p = (uint32_t)(x % n); /* and remove one */
        size_t kl = race_churn_key(k, live[p].id, &live[p].nonce);
        RACE_CHECK(sh, pc_remove(co, k, kl), 0);
        live[p] = live[--n];
        atomic_fetch_add(&sh->removed, 1);
        pc_maint_report rep;
        RACE_CHECK(sh, pc_maintain(c, PC_MAINT_GROW, &rep), 0);
        atomic_fetch_add(&sh->splits, rep.splits);
        atomic_fetch_add(&sh->drained, rep.drained);
        atomic_fetch_add(&sh->iters, 1);
    }
    _exit(0);
}

/* What one snapshot held, compared with the stable keys. */
struct race_seen {
    unsigned char seen[RACE_STABLE];
    unsigned dup, bad_value, bad_type, bad_ttl, bad_order;
    uint64_t records, prev_order;
    int64_t now_wall;
    unsigned char v[2600];
};

/* The stable key's index, or -1 for a churn key. */
static int race_index(const void *key, size_t klen)
{
    if (klen < 12 || memcmp(key, "stable:", 7) != 0)
        return -1;
    char num[6];
    memcpy(num, (const char *)key + 7, 5);
    num[5] = '\0';
    unsigned i = (unsigned)strtoul(num, NULL, 10);
    return i < RACE_STABLE && klen == race_keys[i].kl && memcmp(key, race_keys[i].k, klen) == 0
               ? (int)i
               : -1;
}

static int race_iter_cb(void *ctx, const pc_store_record *r)
{
    struct race_seen *rs = ctx;
    rs->bad_order += rs->records > 0 && r->order < rs->prev_order;
    rs->prev_order = r->order;
    rs->records++;
    int i = race_index(r->key, r->klen);
    if (i < 0)
        return 0;
    unsigned u = (unsigned)i;
    rs->dup += rs->seen[u];
    rs->seen[u] = 1;
    if (race_is_counter(u)) {
        int64_t got = 0;
        if (r->vlen == 8)
            memcpy(&got, r->val, 8);
        rs->bad_type += !r->is_counter;
        rs->bad_value += r->vlen != 8 || got != race_counter(u);
    } else {
        size_t vl = race_val(u, rs->v);
        rs->bad_type += r->is_counter != 0;
        rs->bad_value += r->vlen != vl || memcmp(r->val, rs->v, vl) != 0;
    }
    int64_t ttl = race_ttl(u);
    rs->bad_ttl += ttl == 0 ? r->expires_ms != 0
                            : (r->expires_ms < rs->now_wall + ttl - 120000 ||
                               r->expires_ms > rs->now_wall + ttl + 1000);
    return 0;
}

/* Loads the snapshot into a fresh cache and reads every stable key back
 * through the engine. Returns the number of keys that are wrong. */
static unsigned race_load_check(pc_store *s, uint64_t want_count, unsigned *shown)
{
    pc_cache *c = pc_fx_cache("g=4", 64);
    pc_coll *co = pc_fx_coll(c, "g");
    pc_store_load_result lr;
    check_rc(pc_store_load(s, co, NULL, &lr), PC_OK);
    assert_int_equal(lr.loaded, want_count);
    assert_int_equal(lr.failed + lr.corrupt + lr.skipped_expired, 0);
    static unsigned char v[2600], buf[2600];
    unsigned bad = 0;
    for (unsigned i = 0; i < RACE_STABLE; i++) {
        const struct race_key *rk = &race_keys[i];
        pc_meta m;
        int rc = pc_probe(co, rk->k, rk->kl, &m), ok = rc == 0;
        if (ok && race_is_counter(i)) {
            int64_t got = 0;
            ok = m.is_counter && pc_get_counter(co, rk->k, rk->kl, &got) == 0 &&
                 got == race_counter(i);
        } else if (ok) {
            size_t vl = race_val(i, v), got = 0, need = 0;
            ok = !m.is_counter &&
                 pc_get_buf(co, rk->k, rk->kl, buf, sizeof buf, &got, &need, NULL) == 0 &&
                 got == vl && memcmp(buf, v, vl) == 0;
        }
        int64_t ttl = race_ttl(i);
        ok = ok && (ttl == 0 ? m.ttl_ms == -1 : (m.ttl_ms > ttl - 120000 && m.ttl_ms <= ttl));
        if (!ok && (*shown)++ < 10)
            print_error("loaded snapshot: %.*s wrong (probe %d, counter %d, ttl %" PRId64 ")\n",
                        (int)rk->kl, rk->k, rc, m.is_counter, m.ttl_ms);
        bad += !ok;
    }
    pc_cache_destroy(c);
    return bad;
}

/* The stable keys into a fresh 16-bucket cache. */
static pc_cache *race_cache(pc_coll **co)
{
    pc_config cfg;
    pc_fx_config(&cfg, "g=4", 32);
    cfg.growth_load_factor = 1; /* a split per net insert */
    cfg.growth_budget = 1;
    pc_cache *c = pc_fx_create(&cfg);
    *co = pc_fx_coll(c, "g");
    static unsigned char v[2600];
    for (unsigned i = 0; i < RACE_STABLE; i++) {
        const struct race_key *rk = &race_keys[i];
        if (race_is_counter(i))
            check_rc(pc_set_counter(*co, rk->k, rk->kl, race_counter(i), race_ttl(i)), PC_OK);
        else
            check_rc(pc_set(*co, rk->k, rk->kl, v, race_val(i, v), race_ttl(i), 0), PC_OK);
    }
    return c;
}

/* One save while the child runs, checked. Returns 1 when it was wrong. */
static int race_save_check(pc_store *s, pc_coll *co, unsigned nth, unsigned *shown)
{
    static struct race_seen rs;
    pc_store_save_result sr;
    check_rc(pc_store_save(s, co, NULL, &sr), PC_OK);
    memset(&rs, 0, sizeof rs);
    rs.now_wall = wall_ms();
    check_rc(pc_store_iterate(s, "g", 0, race_iter_cb, &rs), PC_OK);
    unsigned missing = 0;
    for (unsigned i = 0; i < RACE_STABLE; i++)
        missing += !rs.seen[i];
    unsigned bad = missing + rs.dup + rs.bad_value + rs.bad_type + rs.bad_ttl + rs.bad_order;
    if (bad != 0 && (*shown)++ < 10)
        print_error("save %u: %u stable keys missing, %u twice, %u wrong values, %u wrong "
                    "types, %u wrong TTLs, %u out of order\n",
                    nth, missing, rs.dup, rs.bad_value, rs.bad_type, rs.bad_ttl, rs.bad_order);
    if (rs.records != sr.saved)
        bad++;
    if (nth % 4 == 0) /* a fresh cache per load: not every save */
        bad += race_load_check(s, sr.saved, shown);
    return bad != 0;
}

static void test_save_while_growing(void **state)
{
    (void)state;
    char dir[300];
    mk_tmp(dir, sizeof dir, "growing");
    for (unsigned i = 0; i < RACE_STABLE; i++) {
        struct race_key *rk = &race_keys[i];
        rk->kl = race_key_make(rk->k, "stable:", i, i % 10 == 0);
    }
    struct race_sh *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    sc.block_bytes = 8192; /* many blocks: boundaries between equal order keys */
    sc.threads = 1;        /* the other core is the child's */
    sc.log.fn = log_cb;
    sc.log.level = PC_LOG_WARN;
    pc_store *s = NULL;
    check_rc(pc_store_open_checked(dir, &sc, &s, NULL, 0), PC_OK);
    unsigned rounds = 0, saves = 0, failed = 0, shown = 0;
    uint64_t buckets = 0;
    for (int64_t end = mono_ms() + race_ms(); mono_ms() < end || rounds < 3; rounds++) {
        pc_coll *co;
        pc_cache *c = race_cache(&co);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            race_child(c, co, sh);
        int st = 0;
        pid_t w;
        while ((w = waitpid(pid, &st, WNOHANG)) == 0)
            failed += race_save_check(s, co, saves++, &shown);
        assert_int_equal(w, pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fail_msg("child status %#x: line %d rc %d (%s)", st, atomic_load(&sh->err_line),
                     atomic_load(&sh->err_rc), pc_store_strerror(atomic_load(&sh->err_rc)));
        pc_coll_stats cs;
        check_rc(pc_coll_stats_get(co, &cs), PC_OK);
        buckets = cs.buckets;
        pc_cache_destroy(c);
    }
    print_message("[growing] %u rounds, %u saves, %u failed; child: %" PRIu64 " rounds, %" PRIu64
                  " splits, %" PRIu64 " drained, %" PRIu64 " removed, %" PRIu64 " retyped; %" PRIu64
                  " buckets at the end of a round\n",
                  rounds, saves, failed, atomic_load(&sh->iters), atomic_load(&sh->splits),
                  atomic_load(&sh->drained), atomic_load(&sh->removed), atomic_load(&sh->retyped),
                  buckets);
    pc_store_close(s);
    munmap(sh, sizeof *sh);
    assert_int_equal(failed, 0);
    assert_true(saves >= 3 * rounds && buckets >= 2048);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_during_saves),
        cmocka_unit_test(test_save_while_growing),
    };
    return cmocka_run_group_tests(tests, setup_root, teardown_root);
}
