/*
 * test_journal_kill.c - crash test: kill -9 of journal writers under load
 * with `always` loses no acknowledged write (journal-format.md §6), with saves running
 * between the kills; and the same with `everysec`, whose acknowledged
 * records wait in the writer's ring in shared memory: the maintenance
 * process's drainer writes a killed writer's ring out.
 *
 * Each round forks writers that hammer 64 shared keys with sets (values
 * unique per write) and deletes on a collection journaled `always`. After
 * an operation returned 0 - acknowledged - a writer reports it to the
 * parent through its pipe with the write's stamp (a wrapper around the
 * journal's hook records r->stamp). The parent SIGKILLs every writer at a
 * random moment, drains the pipes, and in every round saves a real
 * snapshot (pc_journal_save: begin_save, the LMDB store's save, retire)
 * while the writers run. After the rounds a "restart" builds a fresh
 * cache: the last snapshot loaded by the store through the replay's
 * filter, then the journal's winners. For
 * every key the state must be the last acknowledged write of that key
 * (highest stamp), or a later write that was journaled but not yet
 * acknowledged when its writer died - never an older one, never a missing
 * key, never a value nobody wrote.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h> /* after the four headers it needs */

#include "journal_testlib.h"    /* tmpdir, rnd */
#include "pc_journal_testing.h" /* the epoch of a process's last record */
#include "pcache_journal.h"
#include "pcache.h"
#include "pcache_store.h"
#include "pcache_storecheck.h"

#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NKEYS 64
#define ROUNDS 8
#define WRITERS 3

static unsigned torn_logged;

static void log_fn(void *ctx, int level, const char *msg)
{
    (void)ctx;
    (void)level;
    if (strstr(msg, "torn tail at offset") != NULL)
        torn_logged++;
    if (getenv("PCJ_VERBOSE") != NULL || level <= PC_LOG_ERR)
        fprintf(stderr, "[%d] %s\n", level, msg);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- writers -------------------------------------------------------------------- */

struct ack {    /* one acknowledged write, as a writer reports it */
    uint8_t op; /* PC_MUT_SET or PC_MUT_DEL */
    uint8_t round, writer;
    uint8_t key;
    uint32_t stamp;
    uint32_t seq;   /* the value is "r<round>w<writer>n<seq>" */
    uint64_t epoch; /* the epoch of the segment the record went to */
};

/* The stamp and the epoch the hook saw for this process's last write. */
static uint32_t last_stamp;
static uint64_t last_epoch;

static int ack_hook(void *ctx, const pc_mutation *r)
{
    int rc = pc_journal_hook(ctx, r);
    last_stamp = r->stamp;
    last_epoch = ((const pc_journal *)ctx)->pcs[0].seen_epoch; /* white-box */
    return rc;
}

static int value_of(char *buf, size_t cap, unsigned round, unsigned writer, uint32_t seq)
{
    return snprintf(buf, cap, "r%uw%un%u", round, writer, seq);
}

static void key_of(char *buf, size_t cap, unsigned k)
{
    snprintf(buf, cap, "key-%02u", k);
}

static void writer(pc_coll *co, int fd, unsigned round, unsigned w)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    rng_state ^= (uint64_t)getpid() << 17;
    for (uint32_t seq = 0;; seq++) {
        uint64_t x = rnd();
        struct ack a = {
            .round = (uint8_t)round, .writer = (uint8_t)w, .key = (uint8_t)(x % NKEYS), .seq = seq};
        char k[16], v[48];
        key_of(k, sizeof k, a.key);
        int rc;
        if ((x >> 32) % 100 < 80) {
            a.op = PC_MUT_SET;
            int vl = value_of(v, sizeof v, round, w, seq);
            rc = pc_set(co, k, strlen(k), v, (size_t)vl, 0, 0);
        } else {
            a.op = PC_MUT_DEL;
            rc = pc_remove(co, k, strlen(k));
            if (rc == PC_ENOTFOUND)
                continue; /* nothing changed, nothing journaled */
        }
        if (rc != 0) {
            fprintf(stderr, "writer: %s\n", pc_store_strerror(rc));
            _exit(3);
        }
        a.stamp = last_stamp; /* acknowledged: report it */
        a.epoch = last_epoch;
        if (write(fd, &a, sizeof a) != (ssize_t)sizeof a)
            _exit(4);
    }
}

/* ---- the snapshot: the real store --------------------------------------------------- */

struct srec {
    char key[16];
    char val[48];
    size_t vlen;
    uint32_t stamp;
};
struct snap { /* the last snapshot as the store holds it */
    struct srec rec[NKEYS];
    unsigned n;
    uint64_t epoch, boot_gen;
};

static int snap_cb(void *ctx, const pc_store_record *r)
{
    struct snap *s = ctx;
    assert_true(s->n < NKEYS && r->klen < sizeof s->rec[0].key && r->vlen < 48);
    struct srec *x = &s->rec[s->n++];
    memcpy(x->key, r->key, r->klen);
    x->key[r->klen] = '\0';
    memcpy(x->val, r->val, r->vlen);
    x->vlen = r->vlen;
    x->stamp = r->stamp;
    return 0;
}

static void read_snapshot(pc_store *st, struct snap *s)
{
    memset(s, 0, sizeof *s);
    pc_store_coll_meta meta;
    assert_int_equal(pc_store_coll_meta_get(st, "default", &meta), 0);
    s->epoch = meta.journal_epoch;
    s->boot_gen = meta.boot_gen;
    assert_int_equal(pc_store_iterate(st, "default", PC_STORE_INCLUDE_EXPIRED, snap_cb, s), 0);
}

/* The load's filter, recording what it answered for each key. */
struct load_ctx {
    pc_journal_replay *rp;
    int answer[NKEYS]; /* -1 = not asked */
};

static int load_filter(void *ctx, const void *key, size_t klen, uint32_t stamp, uint64_t boot_gen)
{
    struct load_ctx *l = ctx;
    int f = pc_journal_replay_filter(l->rp, key, klen, stamp, boot_gen);
    const char *k = key;
    assert_int_equal(klen, 6);
    l->answer[(unsigned)(k[4] - '0') * 10 + (unsigned)(k[5] - '0')] = f;
    return f;
}

/* ---- the check ------------------------------------------------------------------ */

struct winner {
    int op;
    unsigned flags;
    uint32_t stamp;
    char val[48];
    size_t vlen;
};

static int collect(void *ctx, const pc_journal_winner *w)
{
    struct winner *ws = ctx;
    assert_int_equal(w->klen, 6);
    const char *kk = (const char *)w->key + 4; /* "key-NN", not NUL-terminated */
    unsigned k = (unsigned)(kk[0] - '0') * 10 + (unsigned)(kk[1] - '0');
    assert_true(k < NKEYS);
    assert_int_equal(w->has_expire, 0);
    ws[k].op = w->op;
    ws[k].flags = w->flags;
    ws[k].stamp = w->stamp;
    assert_true(w->vlen < sizeof ws[k].val);
    if (w->vlen > 0)
        memcpy(ws[k].val, w->val, w->vlen);
    ws[k].vlen = w->vlen;
    return 0;
}

static int later(uint32_t a, uint32_t b) /* stamp a after b (one boot) */
{
    return (int32_t)(a - b) > 0;
}

/* mode: PC_JOURNAL_ALWAYS, or PC_JOURNAL_EVERYSEC with the parent as the
 * maintenance process (its pc_journal_sync_all starts the drainer thread):
 * a writer's acknowledged records are then in its ring in shared memory
 * when it is killed, and the drainer must still write every one out. */
static void kill_run(unsigned mode)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/pcjk.XXXXXX",
             getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(tmpdir));
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.mem_mb = 32;
    cfg.lock_memory = 0;
    pc_cache *a = NULL;
    assert_int_equal(pc_cache_create(&cfg, &a), 0);
    pc_coll *ca = NULL;
    assert_int_equal(pc_coll_find(a, "default", 7, &ca), 0);
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    sc.log.fn = log_fn;
    sc.log.level = PC_LOG_WARN;
    pc_store *st = NULL;
    char err[256] = "";
    if (pc_store_open_checked(tmpdir, &sc, &st, err, sizeof err) != 0)
        fail_msg("pc_store_open: %s", err);
    pc_journal_config jc;
    pc_journal_config_init(&jc);
    jc.dir = tmpdir;
    assert_int_equal(pc_store_next_boot_gen(st, &jc.boot_gen), 0);
    jc.log.fn = log_fn;
    pc_journal *ja = NULL;
    assert_int_equal(pc_journal_open(a, &jc, &ja), 0);
    assert_int_equal(pc_mutation_hook(a, ack_hook, ja), 0);
    assert_int_equal(pc_journal_set_mode(ca, mode), 0);
    if (mode == PC_JOURNAL_EVERYSEC)
        assert_int_equal(pc_journal_sync_all(ja), 0); /* starts the drainer */

    static struct ack last[NKEYS]; /* the highest-stamp ack per key */
    static int have[NKEYS];
    memset(last, 0, sizeof last);
    memset(have, 0, sizeof have);
    uint64_t acks = 0;
    unsigned saves = 0;
    rng_state ^= (uint64_t)getpid();
    for (unsigned round = 0; round < ROUNDS; round++) {
        pid_t pid[WRITERS];
        int fd[WRITERS];
        int64_t kill_at[WRITERS], t0 = now_ms(), save_at = t0 + 20 + (int64_t)(rnd() % 150);
        for (unsigned w = 0; w < WRITERS; w++) {
            int p[2];
            assert_int_equal(pipe(p), 0);
            pid[w] = fork();
            assert_true(pid[w] >= 0);
            if (pid[w] == 0) {
                close(p[0]);
                writer(ca, p[1], round, w);
            }
            close(p[1]);
            fd[w] = p[0];
            kill_at[w] = t0 + 50 + (int64_t)(rnd() % 350);
        }
        unsigned open_fds = WRITERS;
        while (open_fds > 0) {
            struct pollfd pf[WRITERS];
            for (unsigned w = 0; w < WRITERS; w++)
                pf[w] = (struct pollfd){.fd = fd[w], .events = POLLIN};
            poll(pf, WRITERS, 5);
            int64_t t = now_ms();
            if (save_at != 0 && t >= save_at) {
                /* a real snapshot while the writers run */
                assert_int_equal(pc_journal_save(ja, st, ca, NULL, NULL), 0);
                saves++;
                save_at = 0;
            }
            for (unsigned w = 0; w < WRITERS; w++) {
                if (pid[w] > 0 && t >= kill_at[w]) {
                    kill(pid[w], SIGKILL);
                    int wst = 0;
                    assert_int_equal(waitpid(pid[w], &wst, 0), pid[w]);
                    assert_true(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL);
                    pid[w] = 0;
                }
                if (fd[w] < 0 || !(pf[w].revents & (POLLIN | POLLHUP)))
                    continue;
                struct ack buf[256];
                ssize_t n = read(fd[w], buf, sizeof buf);
                assert_true(n >= 0);
                assert_int_equal(n % (ssize_t)sizeof(struct ack), 0);
                if (n == 0) {
                    close(fd[w]);
                    fd[w] = -1;
                    open_fds--;
                    continue;
                }
                for (size_t i = 0; i < (size_t)n / sizeof(struct ack); i++) {
                    const struct ack *x = &buf[i];
                    acks++;
                    if (!have[x->key] || later(x->stamp, last[x->key].stamp)) {
                        last[x->key] = *x;
                        have[x->key] = 1;
                    }
                }
            }
        }
        if (save_at != 0) { /* every writer died before the save was due */
            assert_int_equal(pc_journal_save(ja, st, ca, NULL, NULL), 0);
            saves++;
        }
        if (mode == PC_JOURNAL_EVERYSEC && round % 2 == 0)
            assert_int_equal(pc_journal_sync_all(ja), 0); /* the host's tick */
    }
    /* what the killed writers left in their rings, written out by the
     * maintenance process's drainer before the "restart" reads the files */
    if (mode == PC_JOURNAL_EVERYSEC)
        assert_int_equal(pc_journal_sync_all(ja), 0);
    assert_true(saves == ROUNDS);
    assert_true(acks > 100);

    pc_journal_close(ja); /* the restart: one live journal per store */
    /* restart: the snapshot through the filter, then the journal */
    struct snap s;
    read_snapshot(st, &s);
    assert_int_equal(s.boot_gen, jc.boot_gen);
    pc_cache *b = NULL;
    assert_int_equal(pc_cache_create(&cfg, &b), 0);
    pc_coll *cb = NULL;
    assert_int_equal(pc_coll_find(b, "default", 7, &cb), 0);
    assert_int_equal(pc_store_next_boot_gen(st, &jc.boot_gen), 0);
    pc_journal *jb = NULL;
    assert_int_equal(pc_journal_open(b, &jc, &jb), 0);
    struct load_ctx lc;
    for (unsigned k = 0; k < NKEYS; k++)
        lc.answer[k] = -1;
    assert_int_equal(pc_journal_replay_open(jb, cb, s.epoch, 0, &lc.rp), 0);
    /* cleared per run: a key with no record in this run's journal (a last
     * round whose writers all died before its save) must not be checked
     * against the previous run's winner */
    static struct winner jw[NKEYS];
    memset(jw, 0, sizeof jw);
    assert_int_equal(pc_journal_replay_foreach(lc.rp, collect, jw), 0);
    pc_store_load_opts lo;
    memset(&lo, 0, sizeof lo);
    lo.filter = load_filter;
    lo.filter_ctx = &lc;
    pc_store_load_result lr;
    assert_int_equal(pc_store_load(st, cb, &lo, &lr), 0);
    int from_snap[NKEYS] = {0};
    for (unsigned i = 0; i < s.n; i++) {
        struct srec *r = &s.rec[i];
        unsigned k = (unsigned)atoi(r->key + 4);
        int f = lc.answer[k];
        assert_int_not_equal(f, -1);                  /* asked about every record */
        assert_int_not_equal(f, PC_JOURNAL_LOAD_ANY); /* no TTLs here */
        from_snap[k] = f == PC_JOURNAL_LOAD;
        /* the filter's rule: skipped exactly when the journal is later */
        assert_int_equal(f == PC_JOURNAL_SKIP, jw[k].op != 0 && later(jw[k].stamp, r->stamp));
    }
    assert_int_equal(pc_journal_replay_apply(lc.rp), 0);
    pc_journal_replay_stats rs;
    pc_journal_replay_stats_get(lc.rp, &rs);
    pc_journal_replay_close(lc.rp);
    assert_int_equal(rs.bad_records + rs.bad_segments + rs.errors, 0);
    assert_int_equal(rs.torn_tails, torn_logged);

    /* For every key: the state restored must not be older than its last
     * acknowledged write A (highest stamp):
     *  - restored from the snapshot or an unflagged journal record: its
     *    stamp >= A's, and equal stamps carry A's state;
     *  - a flagged journal record (the table's state when a writer's first
     *    record after a save was written, §5.3) is later than its stamp: it
     *    may sit below A only when A went to a segment the snapshot covers;
     *  - nothing restored: only when A went to a covered segment and the
     *    snapshot saw the key gone (a later delete, covered with it). */
    unsigned exact = 0, newer = 0, checked = 0, covered_gone = 0, state_recs = 0;
    for (unsigned k = 0; k < NKEYS; k++) {
        char key[16], got[64];
        key_of(key, sizeof key, k);
        size_t gl = 0, need = 0;
        int rc = pc_get_buf(cb, key, strlen(key), got, sizeof got, &gl, &need, NULL);
        uint32_t stamp = 0;
        int op = 0;
        unsigned flags = 0;
        if (from_snap[k]) {
            for (unsigned i = 0; i < s.n; i++) {
                if (strcmp(s.rec[i].key, key) == 0) {
                    stamp = s.rec[i].stamp;
                    assert_int_equal(rc, 0);
                    assert_int_equal(gl, s.rec[i].vlen);
                    assert_memory_equal(got, s.rec[i].val, gl);
                }
            }
            op = PC_MUT_SET;
        }
        if (jw[k].op != 0 && (!from_snap[k] || later(jw[k].stamp, stamp))) {
            stamp = jw[k].stamp;
            op = jw[k].op;
            flags = jw[k].flags;
            if (op == PC_MUT_SET) {
                assert_int_equal(rc, 0);
                assert_int_equal(gl, jw[k].vlen);
                assert_memory_equal(got, jw[k].val, gl);
            } else {
                assert_int_equal(rc, PC_ENOTFOUND);
            }
        }
        if (op == 0)
            assert_int_equal(rc, PC_ENOTFOUND);
        state_recs += flags != 0;
        if (!have[k])
            continue;
        checked++;
        const struct ack *A = &last[k];
        int covered = A->epoch < s.epoch;
        if (op == 0) {
            if (!covered)
                fail_msg("key %s: acknowledged write r%uw%un%u (stamp %u, epoch %016llx) lost: "
                         "nothing restored",
                         key, A->round, A->writer, A->seq, A->stamp, (unsigned long long)A->epoch);
            covered_gone++;
            continue;
        }
        if (later(A->stamp, stamp) && !(flags != 0 && covered))
            fail_msg("key %s: acknowledged write r%uw%un%u (stamp %u) lost: restored stamp %u%s",
                     key, A->round, A->writer, A->seq, A->stamp, stamp,
                     flags ? " (table state)" : "");
        if (stamp == A->stamp && flags == 0) {
            exact++;
            assert_int_equal(op, A->op);
            if (A->op == PC_MUT_SET) {
                char want[48];
                int wl = value_of(want, sizeof want, A->round, A->writer, A->seq);
                assert_int_equal(rc, 0);
                assert_int_equal(gl, (size_t)wl);
                assert_memory_equal(got, want, gl);
            }
        } else {
            newer++; /* journaled, its writer killed before the ack */
            if (rc == 0) {
                unsigned r1, w1, n1;
                got[gl] = '\0';
                assert_int_equal(sscanf(got, "r%uw%un%u", &r1, &w1, &n1), 3);
            }
        }
    }
    fprintf(stderr,
            "kill test (%s): %llu acks, %u keys checked: %u at their last ack, %u at a later "
            "write, %u gone in the snapshot; %u table-state records; %llu segments, %llu "
            "records, %llu torn tail(s) cut, snapshot %u keys (%llu superseded)\n",
            pc_journal_mode_name(mode), (unsigned long long)acks, checked, exact, newer,
            covered_gone, state_recs, (unsigned long long)rs.segments,
            (unsigned long long)rs.records, (unsigned long long)rs.torn_tails, s.n,
            (unsigned long long)rs.snap_skipped);
    assert_true(checked > NKEYS / 2);
    pc_journal_close(jb);
    pc_cache_destroy(a);
    pc_cache_destroy(b);
    pc_store_close(st);
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_kill_always(void **state)
{
    (void)state;
    kill_run(PC_JOURNAL_ALWAYS);
}

/* everysec: SIGKILL loses nothing a writer had acknowledged (its records
 * were in its shared-memory ring, not in private memory) */
static void test_kill_everysec(void **state)
{
    (void)state;
    torn_logged = 0;
    kill_run(PC_JOURNAL_EVERYSEC);
}

int main(void)
{
    rng_state = 0x243f6a8885a308d3ull; /* this program's own sequence */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_always),
        cmocka_unit_test(test_kill_everysec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
