/*
 * test_journal_race.c - the write-ahead journal (storage/journal*.c,
 * docs/journal-format.md) under forked writers, with saves and restarts
 * racing them. The format and single-process replays are in
 * test_journal.c; kill -9 of writers in test_journal_kill.c. Shared
 * fixtures: journal_testlib.h.
 *
 *  - forked writers on overlapping keys: the replay equals the final live
 *    table key by key (value, counter flag, TTL);
 *  - saves while writers run (begin_save, an ordered walk copied into
 *    memory as the snapshot, retire): snapshot + journal == the live table;
 *    the same with the real store (pc_journal_save / pc_journal_restore);
 *  - the same while the table grows: a 16-bucket collection split, drained
 *    and swept by a forked maintainer under writers, saves and rotations,
 *    with stable keys, hot keys in chains and short TTLs;
 *  - regressions: a SET or COUNTER preempted between its table write and
 *    its journal hook across a save does not resurrect a deleted key;
 *  - a restore with no snapshot yet replays every segment.
 *
 * PCACHE_RACE_SECONDS lengthens save_while_growing (default 2 s).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h> /* after the four headers it needs */

#include "journal_testlib.h"
#include "pc_journal_testing.h" /* the sync pass's list of files */
#include "pcache_journal.h"
#include "pcache.h"
#include "pcache_store.h"
#include "pcache_storecheck.h"

#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- forked writers on overlapping keys ----------------------------------------- */

#define NKEYS 300

/* Operation x (its bits pick the operation and its arguments) of writer id
 * on key k with TTL ttl (0 = none): a set, pc_add, pc_set_counter, a
 * delete, pc_expire or a KEEPTTL/XX/NX set. */
static void apply_op(pc_coll *co, unsigned id, unsigned n, uint64_t x, const char *k, size_t kl,
                     int64_t ttl)
{
    char v[400];
    unsigned what = (unsigned)((x >> 40) % 100);
    int rc;
    if (what < 40) {
        int vl = snprintf(v, sizeof v, "w%u-%u-%.*s", id, n, (int)((x >> 48) % 300),
                          "................................................................"
                          "................................................................"
                          "................................................................"
                          "................................................................"
                          "............................................................");
        rc = pc_set(co, k, kl, v, (size_t)vl, ttl, 0);
    } else if (what < 55) {
        rc = pc_add(co, k, kl, (int64_t)(x % 1000) - 500, (x & 1) ? ttl : 0, NULL);
        if (rc == PC_ENOTNUM)
            rc = 0;
    } else if (what < 65) {
        rc = pc_set_counter(co, k, kl, (int64_t)(x >> 8), ttl);
    } else if (what < 80) {
        rc = pc_remove(co, k, kl);
        if (rc == PC_ENOTFOUND)
            rc = 0;
    } else if (what < 90) {
        rc = pc_expire(co, k, kl, (x & 2) ? 0 : ttl);
        if (rc == PC_ENOTFOUND)
            rc = 0;
    } else {
        unsigned fl = what < 94 ? PC_SET_KEEPTTL : what < 97 ? PC_SET_XX : PC_SET_NX;
        int vl = snprintf(v, sizeof v, "f%u-%u", id, n);
        rc = pc_set(co, k, kl, v, (size_t)vl, ttl, fl);
        if (rc == PC_EEXIST || rc == PC_ENOTFOUND)
            rc = 0;
    }
    if (rc != 0) {
        fprintf(stderr, "writer %u op %u: %s\n", id, what, pc_store_strerror(rc));
        _exit(3);
    }
}

/* One random operation on one of NKEYS keys; TTLs long enough that nothing
 * lapses during the test. */
static void random_op(pc_coll *co, unsigned id, unsigned n)
{
    char k[32];
    uint64_t x = rnd();
    int kl = snprintf(k, sizeof k, "key-%u", (unsigned)(x % NKEYS));
    int64_t ttl = (x >> 20) % 3 == 0 ? 0 : 3600000 + (int64_t)((x >> 24) % 100000);
    apply_op(co, id, n, x, k, (size_t)kl, ttl);
}

typedef void (*op_fn)(pc_coll *co, unsigned id, unsigned n);

/* Operations the forked writers have done, in memory they share with the
 * parent (run_writers maps it): a save overlapped the writers when the
 * count moved while it ran. */
static _Atomic uint64_t *writer_ops;

static uint64_t writer_ops_now(void)
{
    return writer_ops != NULL ? atomic_load(writer_ops) : 0;
}

/* Forks nw writers doing ops operations op each (ticking the journal every
 * 256); they flush and exit. */
static void run_writers(pc_journal *j, pc_coll *co, unsigned nw, unsigned ops, op_fn op,
                        pid_t *pids)
{
    if (writer_ops == NULL) {
        writer_ops = mmap(NULL, sizeof *writer_ops, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        assert_true(writer_ops != MAP_FAILED);
    }
    for (unsigned w = 0; w < nw; w++) {
        pid_t p = fork();
        assert_true(p >= 0);
        if (p == 0) {
            child_init();
            rng_state = 0x1234567ull * (w + 1) + (uint64_t)getpid();
            for (unsigned n = 0; n < ops; n++) {
                op(co, w, n);
                atomic_fetch_add_explicit(writer_ops, 1, memory_order_relaxed);
                if ((n & 255) == 0)
                    (void)pc_journal_tick(j, (w & 1) ? PC_JOURNAL_TICK_SYNC : 0);
            }
            _exit(pc_journal_flush(j, 1) == 0 ? 0 : 4);
        }
        pids[w] = p;
    }
}

/* Reaps the writers that exited (their pids become 0), asserting a clean
 * exit; options 0 waits for all, WNOHANG takes those already done. Returns
 * how many still run. */
static unsigned reap_writers(unsigned nw, pid_t *pids, int options)
{
    unsigned running = 0;
    for (unsigned w = 0; w < nw; w++) {
        if (pids[w] == 0)
            continue;
        int st = 0;
        pid_t got = waitpid(pids[w], &st, options);
        assert_true(got == pids[w] || (got == 0 && options == WNOHANG));
        if (got == 0) {
            running++;
            continue;
        }
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
        pids[w] = 0;
    }
    return running;
}

static void wait_writers(unsigned nw, pid_t *pids)
{
    assert_int_equal(reap_writers(nw, pids, 0), 0);
}

/* Returns once the writers forked after writer_ops read since have begun:
 * the first save then starts while they write. */
static void writers_begun(uint64_t since)
{
    for (int64_t t0 = pc_mono_coarse_ms(); writer_ops_now() == since;) {
        assert_true(pc_mono_coarse_ms() < t0 + 10000);
        usleep(100);
    }
}

static void test_multiproc_replay(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default", 64);
    pc_journal *ja = new_journal(a, 5);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_EVERYSEC);
    for (int i = 0; i < 50; i++) /* the parent writes too, before and after */
        random_op(ca, 99, (unsigned)i);
    pid_t pids[4];
    run_writers(ja, ca, 4, 20000, random_op, pids);
    wait_writers(4, pids);
    for (int i = 0; i < 50; i++)
        random_op(ca, 99, (unsigned)(1000 + i));
    assert_int_equal(pc_journal_flush(ja, 0), 0);
    char names[16][256];
    assert_int_equal(list_segments("default", names, 16), 5); /* 4 writers + the parent */
    /* the maintenance process's sync: every segment once, then nothing new */
    assert_int_equal(pc_journal_sync_all(ja), 0);
    assert_int_equal(ja->nsynced, 5);
    assert_int_equal(pc_journal_sync_all(ja), 0);
    assert_int_equal(ja->nsynced, 5);

    pc_journal_close(ja); /* the restart: one live journal per store */
    pc_cache *b = new_cache("default", 64);
    pc_journal *jb = new_journal(b, 6);
    pc_coll *cb = pc_fx_coll(b, "default");
    pc_journal_replay_stats st;
    assert_int_equal(pc_journal_replay_run(jb, cb, 0, &st), 0);
    assert_int_equal(st.segments, 5);
    assert_int_equal(st.bad_records + st.torn_tails + st.errors, 0);
    assert_true(st.records > 60000);
    assert_same_table(ca, cb);
    pc_journal_close(jb);
    pc_cache_destroy(a);
    pc_cache_destroy(b);
}

/* ---- saves while writers run ----------------------------------------------------- */

struct snap {
    struct kvset kv;
    uint64_t epoch, boot_gen;
};

/* A save as the store will run it: begin_save, the ordered walk copied out
 * (values raw: counters as 8 bytes), commit, retire. */
static void fake_save(pc_journal *j, pc_coll *co, struct snap *s)
{
    uint64_t epoch = 0;
    assert_int_equal(pc_journal_begin_save(j, co, &epoch), 0);
    struct kvset kv;
    kv_snapshot(co, PC_WALK_VALUES | PC_WALK_RAW, &kv);
    /* "commit": replace the previous snapshot, then retire */
    kv_free(&s->kv);
    s->kv = kv;
    s->epoch = epoch;
    s->boot_gen = pc_journal_boot_gen(j);
    /* TTLs as absolute wall-clock deadlines, as the store keeps them */
    int64_t now = pc_wall_ms();
    for (size_t i = 0; i < s->kv.n; i++)
        if (s->kv.v[i].ttl_ms >= 0)
            s->kv.v[i].ttl_ms = now + (s->kv.v[i].ttl_ms > 0 ? s->kv.v[i].ttl_ms : 1);
    assert_int_equal(pc_journal_retire(j, co, epoch, NULL), 0);
}

/* A store's load: every record goes through the filter. ttl_ms holds the
 * absolute deadline (or -1). */
static void fake_load(const struct snap *s, pc_coll *co, pc_journal_replay *rp, unsigned *skipped)
{
    int64_t now = pc_wall_ms();
    *skipped = 0;
    for (size_t i = 0; i < s->kv.n; i++) {
        const struct kv *k = &s->kv.v[i];
        int f = pc_journal_replay_filter(rp, k->key, k->klen, k->stamp, s->boot_gen);
        if (f == PC_JOURNAL_SKIP) {
            (*skipped)++;
            continue;
        }
        int64_t ttl = 0;
        if (k->ttl_ms >= 0) {
            ttl = k->ttl_ms - now;
            if (ttl <= 0) {
                if (f != PC_JOURNAL_LOAD_ANY)
                    continue; /* expired */
                ttl = 0;      /* the journal re-arms it */
            }
        }
        int64_t cv;
        if (k->is_counter) {
            memcpy(&cv, k->val, 8);
            assert_int_equal(pc_set_counter(co, k->key, k->klen, cv, ttl), 0);
        } else {
            assert_int_equal(pc_set(co, k->key, k->klen, k->val, k->vlen, ttl, 0), 0);
        }
    }
}

/* A restart as the store runs it: the replay opened after the snapshot s,
 * the snapshot loaded through its filter (skipped: records the journal
 * supersedes), the journal applied; its stats to *st unless NULL. */
static void restart_on(const struct snap *s, pc_journal *jb, pc_coll *cb, unsigned *skipped,
                       pc_journal_replay_stats *st)
{
    pc_journal_replay *rp = NULL;
    assert_int_equal(pc_journal_replay_open(jb, cb, s->epoch, 0, &rp), 0);
    fake_load(s, cb, rp, skipped);
    assert_int_equal(pc_journal_replay_apply(rp), 0);
    if (st != NULL)
        pc_journal_replay_stats_get(rp, st);
    pc_journal_replay_close(rp);
}

static void test_save_while_writing(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default", 64);
    pc_journal *ja = new_journal(a, 7);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_EVERYSEC);
    for (int i = 0; i < 2000; i++)
        random_op(ca, 99, (unsigned)i);
    assert_int_equal(pc_set(ca, "pinned", 6, "before", 6, 0, 0), 0);
    struct snap s;
    memset(&s, 0, sizeof s);
    fake_save(ja, ca, &s); /* a first snapshot before the writers */
    pid_t pids[3];
    uint64_t ops0 = writer_ops_now();
    run_writers(ja, ca, 3, 60000, random_op, pids);
    /* saves while they write (counted from when they have begun); the
     * last one is the snapshot that counts */
    writers_begun(ops0);
    unsigned overlapped = 0;
    for (int i = 0; i < 4; i++) {
        usleep(20 * 1000);
        uint64_t o = writer_ops_now();
        fake_save(ja, ca, &s);
        overlapped += writer_ops_now() != o;
    }
    wait_writers(3, pids);
    print_message("[save_while_writing] %u of 4 saves overlapped the writers\n", overlapped);
    assert_true(overlapped > 0); /* the race this test is about happened */
    /* as in test_store_save_restore: one write after the last save, so
     * skipped > 0 below whatever the writers' timing */
    assert_int_equal(pc_set(ca, "pinned", 6, "after", 5, 0, 0), 0);
    assert_int_equal(pc_journal_flush(ja, 1), 0);
    /* retire left no segment older than the snapshot's epoch */
    char names[64][256];
    unsigned n = list_segments("default", names, 64);
    assert_true(n >= 1 && n <= 64);
    for (unsigned i = 0; i < n; i++) {
        uint64_t e;
        char cn[64];
        assert_int_equal(pc_journal_segment_name_parse(names[i], cn, sizeof cn, &e), 0);
        assert_true(e >= s.epoch);
    }

    pc_journal_close(ja); /* the restart: one live journal per store */
    pc_cache *b = new_cache("default", 64);
    pc_journal *jb = new_journal(b, 8);
    pc_coll *cb = pc_fx_coll(b, "default");
    unsigned skipped = 0;
    pc_journal_replay_stats st;
    restart_on(&s, jb, cb, &skipped, &st);
    assert_int_equal(st.bad_records + st.torn_tails + st.errors, 0);
    assert_int_equal(st.snap_skipped, skipped);
    assert_true(skipped > 0); /* keys written after the last walk */
    assert_same_table(ca, cb);
    kv_free(&s.kv);
    pc_journal_close(jb);
    pc_cache_destroy(a);
    pc_cache_destroy(b);
}

/* ---- regression: a stale write resurrected across a save ----------------------
 * A write reaches the table before a save begins but its hook reads the
 * epoch only after (the writer was preempted in between); meanwhile another
 * process deleted the key, journaled that in the old epoch, and the save
 * (which saw the key absent) retired it. Without the rotation check (§5.3)
 * the stale SET sits alone in a new-epoch segment and the replay brings
 * the deleted key back. The gate hook holds the writer between its table
 * write and the journal's hook. */

static int gate_fd[2] = {-1, -1}; /* child: [0] reads "go", [1] writes "written" */

static int gate_hook(void *ctx, const pc_mutation *r)
{
    if (r->klen == 5 && memcmp(r->key, "stale", 5) == 0) {
        char ch = 'w';
        if (write(gate_fd[1], &ch, 1) != 1 || read(gate_fd[0], &ch, 1) != 1)
            _exit(6);
    }
    return pc_journal_hook(ctx, r);
}

static void stale_across_save(int op)
{
    pc_cache *a = new_cache("default", 16);
    pc_journal *ja = new_journal(a, 1);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_ALWAYS);
    assert_int_equal(pc_set(ca, "stale", 5, "v0", 2, 0, 0), 0);
    int c2p[2], p2c[2];
    assert_int_equal(pipe(c2p), 0);
    assert_int_equal(pipe(p2c), 0);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        child_init();
        gate_fd[0] = p2c[0];
        gate_fd[1] = c2p[1];
        if (pc_mutation_hook(a, gate_hook, ja) != 0)
            _exit(2);
        int rc = op == PC_MUT_COUNTER ? pc_set_counter(ca, "stale", 5, 77, 0)
                                      : pc_set(ca, "stale", 5, "stale-value", 11, 0, 0);
        _exit(rc == 0 && pc_journal_flush(ja, 1) == 0 ? 0 : 3);
    }
    char ch;
    assert_int_equal(read(c2p[0], &ch, 1), 1);      /* the child's write is in the table */
    assert_int_equal(pc_remove(ca, "stale", 5), 0); /* journaled in the old epoch */
    struct snap s;
    memset(&s, 0, sizeof s);
    fake_save(ja, ca, &s); /* sees the key absent, retires the delete */
    assert_int_equal(s.kv.n, 0);
    assert_int_equal(write(p2c[1], "g", 1), 1); /* the child's hook reads the new epoch */
    int status = 0;
    assert_int_equal(waitpid(p, &status, 0), p);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(c2p[0]);
    close(c2p[1]);
    close(p2c[0]);
    close(p2c[1]);
    assert_int_equal(pc_probe(ca, "stale", 5, NULL), PC_ENOTFOUND);

    pc_journal_close(ja); /* the restart: one live journal per store */
    pc_cache *b = new_cache("default", 16);
    pc_journal *jb = new_journal(b, 2);
    pc_coll *cb = pc_fx_coll(b, "default");
    unsigned skipped = 0;
    restart_on(&s, jb, cb, &skipped, NULL);
    assert_int_equal(pc_probe(cb, "stale", 5, NULL), PC_ENOTFOUND);
    kv_free(&s.kv);
    pc_journal_close(jb);
    pc_cache_destroy(a);
    pc_cache_destroy(b);
}

static void test_regress_stale_set_across_save(void **state)
{
    (void)state;
    stale_across_save(PC_MUT_SET);
}

static void test_regress_stale_counter_across_save(void **state)
{
    (void)state;
    stale_across_save(PC_MUT_COUNTER);
}

/* ---- with the real snapshot store ----------------------------------------------- */

static pc_store *open_store(void)
{
    pc_store_config cfg;
    pc_store_config_init(&cfg);
    cfg.flags = PC_STORE_CREATE;
    cfg.log.fn = log_capture;
    cfg.log.level = PC_LOG_WARN;
    pc_store *s = NULL;
    char err[256] = "";
    if (pc_store_open_checked(tmpdir, &cfg, &s, err, sizeof err) != 0)
        fail_msg("pc_store_open: %s", err);
    return s;
}

/* A restart from store s into a fresh cache declaring cols (boot
 * generation boot): pc_journal_restore loads the snapshot through the
 * journal's filter and replays the journal, cleanly, the journal
 * superseding at least one snapshot record, and the table it rebuilds
 * equals ca. Returns the restore's figures. */
static pc_journal_restore_result restart_from_store(pc_store *s, uint64_t boot, const char *cols,
                                                    pc_coll *ca)
{
    pc_cache *b = new_cache(cols, 64);
    pc_journal *jb = new_journal(b, boot);
    pc_coll *cb = pc_fx_coll(b, "default");
    pc_journal_restore_result rr;
    assert_int_equal(pc_journal_restore(jb, s, cb, &rr), 0);
    assert_int_equal(rr.snapshot, 1);
    assert_int_equal(rr.load_rc, 0);
    assert_int_equal(rr.replay.bad_records + rr.replay.torn_tails + rr.replay.errors, 0);
    assert_true(rr.replay.snap_skipped > 0); /* the journal superseded snapshot records */
    assert_same_table(ca, cb);
    pc_journal_close(jb);
    pc_cache_destroy(b);
    return rr;
}

/* Snapshots saved with pc_journal_save while writers run, then a restart:
 * pc_journal_restore (snapshot through the filter + journal) must rebuild
 * the live table. */
static void test_store_save_restore(void **state)
{
    (void)state;
    pc_store *s = open_store();
    uint64_t boot1 = 0, boot2 = 0;
    assert_int_equal(pc_store_next_boot_gen(s, &boot1), 0);
    pc_cache *a = new_cache("default", 64);
    pc_journal *ja = new_journal(a, boot1);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_EVERYSEC);
    for (int i = 0; i < 3000; i++)
        random_op(ca, 99, (unsigned)i);
    assert_int_equal(pc_set(ca, "pinned", 6, "before", 6, 0, 0), 0);
    unsigned retired = 0, total_retired = 0;
    assert_int_equal(pc_journal_save(ja, s, ca, NULL, &retired), 0);
    total_retired += retired;
    pid_t pids[3];
    uint64_t ops0 = writer_ops_now();
    run_writers(ja, ca, 3, 50000, random_op, pids);
    writers_begun(ops0);
    unsigned overlapped = 0;
    for (int i = 0; i < 3; i++) { /* saves while they write (counted from when they have begun) */
        usleep(30 * 1000);
        pc_store_save_result sr;
        uint64_t o = writer_ops_now();
        assert_int_equal(pc_journal_save(ja, s, ca, &sr, &retired), 0);
        overlapped += writer_ops_now() != o;
        total_retired += retired;
    }
    wait_writers(3, pids);
    print_message("[store_save_restore] %u of 3 saves overlapped the writers\n", overlapped);
    assert_true(overlapped > 0); /* the race this test is about happened */
    /* The writers may all be done before the last save (their 150,000
     * ops can end within its 90 ms in a Release build; CI saw it once): a
     * write after it to a key every snapshot holds makes sure the journal
     * supersedes at least one snapshot record at the restart. */
    assert_int_equal(pc_set(ca, "pinned", 6, "after", 5, 0, 0), 0);
    assert_int_equal(pc_journal_flush(ja, 1), 0);
    assert_true(total_retired > 0);
    pc_store_coll_meta meta;
    assert_int_equal(pc_store_coll_meta_get(s, "default", &meta), 0);
    assert_int_equal(meta.boot_gen, boot1);
    assert_true(meta.journal_epoch > (boot1 << 32));

    /* restart */
    assert_int_equal(pc_store_next_boot_gen(s, &boot2), 0);
    assert_int_equal(boot2, boot1 + 1);
    pc_journal_close(ja); /* the restart: one live journal per store */
    pc_journal_restore_result rr = restart_from_store(s, boot2, "default", ca);
    assert_true(rr.load.loaded + rr.replay.snap_skipped > 0); /* and the snapshot held the rest */
    pc_cache_destroy(a);
    pc_store_close(s);
}

/* ---- saves and rotations while the table grows ------------------------------------
 * The stamps that order a key's writes (§5.4) and the rotation record's read
 * of the table (§5.3) must hold while buckets split under them: a split
 * hands the old bucket's version to the new one, and a drain moves a key
 * from its chain into its bucket inside a version bracket. Each round
 * starts a journaled collection of 16 buckets (load factor 1, one split and
 * one drain per pc_maintain) whose keyspace widens as the writers go, so a
 * forked maintenance process (pc_maintain with the sweep, and
 * pc_journal_sync_all: its drainer thread writes the rings) splits and
 * drains throughout. Before them the parent stores stable keys that nobody
 * writes again (strings, counters, some with an hour's TTL: only the
 * snapshots hold them once the first save retired their records). Three
 * writers set, retype, delete, re-set and re-arm overlapping keys, with no
 * TTL, an hour, or 20-119 ms (lapsing and swept during the run); one key in
 * sixteen is "hot" (the hash's low 8 bits fixed: they crowd into one
 * bucket and its chains). The parent saves with pc_journal_save in a loop
 * while they run: only one (taken while the maintainer splits the table
 * from 16 buckets toward the stable keys), or until 1/5, 2/5, 3/5 or 4/5 of
 * their writes, by round: the restart's snapshot is taken at a different
 * stage of the growth each round, the writes after it are in the journal
 * only. Restart:
 * pc_journal_restore (the last snapshot through the filter + the journal)
 * into a fresh cache must equal the live table once the short TTLs have
 * lapsed: every key present in one is present in the other with the same
 * value and counter type (TTL within 2 s), nothing else.
 * PCACHE_RACE_SECONDS lengthens the run (default 2 s: as many rounds as
 * fit, at least 2). */
#define GROW_KEYS 3000u  /* the writers' */
#define GROW_STABLE 600u /* after them in grow_keys: written by the parent only */
#define GROW_WRITERS 3u
#define GROW_OPS 20000u
#define GROW_HOT 0x5au

struct grow_key {
    char k[24];
    size_t kl;
};
static struct grow_key grow_keys[GROW_KEYS + GROW_STABLE];

/* The maintenance process's report and the writers' progress, in shared
 * memory. */
struct grow_sh {
    _Atomic int stop, rc;
    _Atomic uint64_t calls, splits, drained, reaped;
    _Atomic uint64_t ops; /* grow_op calls of the writers */
};
static struct grow_sh *grow_shared;

/* "g<i>" (the writers'), "s<i>" (stable), a hot one (every 16th) with the
 * smallest ".<nonce>" that puts the hash's low 8 bits on GROW_HOT. */
static void grow_keys_make(void)
{
    for (unsigned i = 0; i < GROW_KEYS + GROW_STABLE; i++) {
        struct grow_key *gk = &grow_keys[i];
        size_t n = (size_t)snprintf(gk->k, sizeof gk->k, "%c%05u", i < GROW_KEYS ? 'g' : 's', i);
        gk->kl = n;
        for (unsigned nonce = 0; i % 16 == 0; nonce++) {
            gk->kl = n + (size_t)snprintf(gk->k + n, sizeof gk->k - n, ".%u", nonce);
            if ((pc_hash(gk->k, gk->kl) & 0xffu) == GROW_HOT)
                break;
        }
    }
}

/* A random operation on a key of a window that widens from 64 keys to all
 * of them over a writer's operations (the table grows all along); a third of the writes without
 * TTL, half with an hour, a sixth with 20-119 ms. */
static void grow_op(pc_coll *co, unsigned id, unsigned n)
{
    uint64_t x = rnd();
    uint64_t window = 64 + (uint64_t)n * GROW_KEYS / GROW_OPS;
    const struct grow_key *gk = &grow_keys[x % (window < GROW_KEYS ? window : GROW_KEYS)];
    unsigned t = (unsigned)((x >> 20) % 6);
    int64_t ttl = t < 2   ? 0
                  : t < 5 ? 3600000 + (int64_t)((x >> 24) % 100000)
                          : 20 + (int64_t)((x >> 24) % 100);
    apply_op(co, id, n, x, gk->k, gk->kl, ttl);
    atomic_fetch_add_explicit(&grow_shared->ops, 1, memory_order_relaxed);
}

/* The maintenance process: pc_maintain (grow, drain, sweep) in a loop and
 * pc_journal_sync_all every 100 ms (its first call starts the drainer). */
static pid_t start_maintainer(pc_cache *c, pc_journal *j, struct grow_sh *sh)
{
    pid_t p = fork();
    assert_true(p >= 0);
    if (p != 0)
        return p;
    child_init();
    int64_t next_sync = 0;
    while (!atomic_load(&sh->stop)) {
        pc_maint_report r;
        int rc = pc_maintain(c, PC_MAINT_ALL, &r);
        if (rc == 0 && pc_mono_coarse_ms() >= next_sync) {
            rc = pc_journal_sync_all(j);
            next_sync = pc_mono_coarse_ms() + 100;
        }
        if (rc != 0) {
            atomic_store(&sh->rc, rc);
            _exit(2);
        }
        atomic_fetch_add(&sh->calls, 1);
        atomic_fetch_add(&sh->splits, r.splits);
        atomic_fetch_add(&sh->drained, r.drained);
        atomic_fetch_add(&sh->reaped, r.reaped);
        if (r.splits == 0 && r.drained == 0)
            sched_yield();
    }
    pc_journal_close(j);
    _exit(0);
}

struct grow_totals {
    unsigned saves, overlapped; /* saves, and those during which buckets split */
    unsigned last_overlapped;   /* rounds whose last save (the restart's) did */
    uint64_t buckets, snap_skipped, records;
};

/* Stable key i: a counter (every 3rd) or a string of 1..700 bytes, with
 * an hour's TTL every 7th. */
static void grow_stable_set(pc_coll *co, unsigned i)
{
    const struct grow_key *gk = &grow_keys[GROW_KEYS + i];
    int64_t ttl = i % 7 == 0 ? 3600000 : 0;
    if (i % 3 == 0) {
        assert_int_equal(pc_set_counter(co, gk->k, gk->kl, (int64_t)i * -7919, ttl), 0);
        return;
    }
    unsigned char v[700];
    size_t vl = 1 + (size_t)(i * 131u) % sizeof v;
    for (size_t b = 0; b < vl; b++)
        v[b] = (unsigned char)(i * 31u + b);
    assert_int_equal(pc_set(co, gk->k, gk->kl, v, vl, ttl, 0), 0);
}

/* One round in a fresh store directory: grow while writing and saving
 * until fifths/5 of the writes (0: one save), then restart and compare. */
static void grow_round(struct grow_sh *sh, unsigned fifths, struct grow_totals *t)
{
    pc_store *s = open_store();
    uint64_t boot1 = 0, boot2 = 0;
    assert_int_equal(pc_store_next_boot_gen(s, &boot1), 0);
    pc_cache *a = new_cache_grow("default=4", 64, 1, 1);
    pc_journal *ja = new_journal(a, boot1);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_EVERYSEC);
    memset(sh, 0, sizeof *sh);
    for (unsigned i = 0; i < GROW_STABLE; i++)
        grow_stable_set(ca, i);
    for (unsigned i = 0; i < 200; i++)
        grow_op(ca, 99, i);
    assert_int_equal(pc_journal_save(ja, s, ca, NULL, NULL), 0); /* on the small table */
    atomic_store(&sh->ops, 0);
    pid_t maint = start_maintainer(a, ja, sh);
    for (int64_t t0 = pc_mono_coarse_ms(); atomic_load(&sh->calls) == 0;) { /* it splits */
        assert_true(pc_mono_coarse_ms() < t0 + 10000);
        usleep(100);
    }
    pid_t pids[GROW_WRITERS];
    run_writers(ja, ca, GROW_WRITERS, GROW_OPS, grow_op, pids);
    /* saves until fifths/5 of the writes are done: the last one leaves the
     * rest to the journal alone */
    bool split = false;
    do {
        uint64_t sp0 = atomic_load(&sh->splits);
        assert_int_equal(pc_journal_save(ja, s, ca, NULL, NULL), 0);
        split = atomic_load(&sh->splits) > sp0;
        t->saves++;
        t->overlapped += split;
    } while (atomic_load(&sh->ops) < GROW_WRITERS * GROW_OPS / 5 * fifths &&
             reap_writers(GROW_WRITERS, pids, WNOHANG) > 0);
    t->last_overlapped += split;
    wait_writers(GROW_WRITERS, pids);
    /* The writers can all end during the last save, leaving the journal
     * nothing newer than it: stable key 1 (a string, no TTL) written again
     * with its own value after it keeps snap_skipped > 0 below certain. */
    grow_stable_set(ca, 1);
    atomic_store(&sh->stop, 1);
    int st = 0;
    assert_int_equal(waitpid(maint, &st, 0), maint);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("maintainer status %#x: %s", st, pc_store_strerror(atomic_load(&sh->rc)));
    assert_int_equal(pc_journal_flush(ja, 1), 0);
    pc_coll_stats cs;
    assert_int_equal(pc_coll_stats_get(ca, &cs), 0);
    t->buckets = cs.buckets;
    usleep(150 * 1000); /* the short TTLs lapse */

    assert_int_equal(pc_store_next_boot_gen(s, &boot2), 0);
    pc_journal_close(ja); /* the restart: one live journal per store */
    pc_journal_restore_result rr = restart_from_store(s, boot2, "default=12", ca);
    t->snap_skipped += rr.replay.snap_skipped;
    t->records += rr.replay.records;
    pc_cache_destroy(a);
    pc_store_close(s);
}

static int64_t race_ms(void)
{
    const char *e = getenv("PCACHE_RACE_SECONDS");
    long sec = e != NULL ? strtol(e, NULL, 10) : 0;
    return (sec > 0 ? sec : 2) * 1000;
}

static void test_save_while_growing(void **state)
{
    (void)state;
    grow_keys_make();
    struct grow_sh *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    grow_shared = sh;
    struct grow_totals t;
    memset(&t, 0, sizeof t);
    unsigned rounds = 0;
    uint64_t splits = 0, drained = 0, reaped = 0;
    const int64_t t0 = pc_mono_coarse_ms();
    for (int64_t end = t0 + race_ms(); pc_mono_coarse_ms() < end || rounds < 2; rounds++) {
        if (rounds > 0) { /* a fresh store per round */
            teardown_dir(NULL);
            setup_dir(NULL);
        }
        grow_round(sh, rounds % 5, &t);
        splits += atomic_load(&sh->splits);
        drained += atomic_load(&sh->drained);
        reaped += atomic_load(&sh->reaped);
    }
    print_message(
        "[growing] %.1f s: %u rounds, %u saves (%u while buckets split, %u of them a round's "
        "last); maintainer: %" PRIu64 " splits, %" PRIu64 " drained, %" PRIu64 " reaped; %" PRIu64
        " buckets at the end of the last round; restore: %" PRIu64 " records, %" PRIu64
        " snapshot records superseded\n",
        (double)(pc_mono_coarse_ms() - t0) / 1000, rounds, t.saves, t.overlapped, t.last_overlapped,
        splits, drained, reaped, t.buckets, t.records, t.snap_skipped);
    grow_shared = NULL;
    munmap(sh, sizeof *sh);
    assert_true(t.overlapped >= 2 && t.last_overlapped > 0 && t.buckets >= 256);
    assert_true(drained > 0 && reaped > 0);
}

/* No snapshot yet: the restore replays every segment. */
static void test_store_restore_without_snapshot(void **state)
{
    (void)state;
    pc_store *s = open_store();
    pc_cache *a = new_cache("default", 16);
    pc_journal *ja = new_journal(a, 1);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_ALWAYS);
    for (int i = 0; i < 500; i++)
        random_op(ca, 1, (unsigned)i);
    pc_journal_close(ja);
    pc_cache *b = new_cache("default", 16);
    pc_journal *jb = new_journal(b, 2);
    pc_coll *cb = pc_fx_coll(b, "default");
    pc_journal_restore_result rr;
    assert_int_equal(pc_journal_restore(jb, s, cb, &rr), 0);
    assert_int_equal(rr.snapshot, 0);
    assert_int_equal(rr.replay.segments, 1);
    assert_same_table(ca, cb);
    pc_journal_close(jb);
    pc_cache_destroy(a);
    pc_cache_destroy(b);
    pc_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_multiproc_replay, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_save_while_writing, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_store_save_restore, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_save_while_growing, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_store_restore_without_snapshot, setup_dir,
                                        teardown_dir),
        cmocka_unit_test_setup_teardown(test_regress_stale_set_across_save, setup_dir,
                                        teardown_dir),
        cmocka_unit_test_setup_teardown(test_regress_stale_counter_across_save, setup_dir,
                                        teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
