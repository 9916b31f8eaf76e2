/*
 * test_journal_faults.c - the write-ahead journal (storage/journal*.c,
 * docs/journal-format.md) when things go wrong on disk or in a process,
 * and its segments' and rings' life cycle. The format and replays are in
 * test_journal.c, races with saves in test_journal_race.c. Shared
 * fixtures: journal_testlib.h.
 *
 *  - a torn tail is cut with a log line naming segment and offset; a
 *    corrupt record in the middle is named (offset, key) and skipped; a bad
 *    segment header is skipped; an I/O error (RLIMIT_FSIZE) is PC_EIO and
 *    leaves the segment cut at a whole record; a transaction with a hole
 *    inside it or before its last records is dropped whole;
 *  - group commit: deferred fdatasync, batches, a save between staged
 *    records, a failed write among staged ones;
 *  - a child drops its parent's buffered records after fork; retire
 *    removes exactly the older epochs of one collection;
 *  - the rings (journal_ring.c, journal_drain.c): many laps of the smallest ring with the
 *    drainer running; more writers than ring slots (the one without a slot
 *    writes through and loses nothing to SIGKILL); a consumer killed while
 *    it holds a ring's lock (the robust lock passes on, nothing lost or
 *    doubled).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h> /* after the four headers it needs */

#include "journal_testlib.h"
#include "pcache_storecheck.h"
#include "pc_journal_testing.h" /* the codec and the rings it inspects */
#include "pcache_journal.h"
#include "pcache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- segment files ---------------------------------------------------------- */

static void seg_path(const char *name, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/journal/%s", tmpdir, name);
    assert_true(n > 0 && (size_t)n < cap);
}

static off_t file_size(const char *path)
{
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return sb.st_size;
}

/* ---- torn tails, corrupt records, bad headers, I/O errors ------------------------- */

/* Closes journal ja and cache a, which wrote one segment of off bytes, and
 * returns its path. */
static void close_one_segment(pc_cache *a, pc_journal *ja, uint64_t off, char *path, size_t cap)
{
    pc_journal_close(ja);
    pc_cache_destroy(a);
    char names[4][256];
    assert_int_equal(list_segments(NULL, names, 4), 1);
    seg_path(names[0], path, cap);
    assert_int_equal(file_size(path), (off_t)off);
}

/* Writes n records "k<i>" = "value-<i>" through the engine (always) and
 * returns the segment's path and each record's offset. */
static void write_records(unsigned n, char *path, size_t cap, uint64_t *offs)
{
    pc_cache *a = new_cache("default", 16);
    pc_journal *ja = new_journal(a, 1);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_ALWAYS);
    uint64_t off = PC_JSEG_HDR_SIZE;
    for (unsigned i = 0; i < n; i++) {
        char k[16], v[32];
        int kl = snprintf(k, sizeof k, "k%u", i), vl = snprintf(v, sizeof v, "value-%u", i);
        assert_int_equal(pc_set(ca, k, (size_t)kl, v, (size_t)vl, 0, 0), 0);
        offs[i] = off;
        off += pc_jrec_size((size_t)kl, (size_t)vl);
    }
    offs[n] = off;
    close_one_segment(a, ja, off, path, cap);
}

static pc_journal_replay_stats replay_fresh(unsigned flags, pc_cache **bout)
{
    log_reset(); /* from the open on: it writes out what the rings file holds */
    pc_cache *b = new_cache("default", 16);
    pc_journal *jb = new_journal(b, 2);
    pc_journal_replay *rp = NULL;
    assert_int_equal(pc_journal_replay_open(jb, pc_fx_coll(b, "default"), 0, flags, &rp), 0);
    assert_int_equal(pc_journal_replay_apply(rp), 0);
    pc_journal_replay_stats st;
    pc_journal_replay_stats_get(rp, &st);
    pc_journal_replay_close(rp);
    pc_journal_close(jb);
    *bout = b;
    return st;
}

static void assert_keys(pc_cache *b, unsigned from, unsigned to, int present)
{
    for (unsigned i = from; i < to; i++) {
        char k[16], v[32];
        int kl = snprintf(k, sizeof k, "k%u", i), vl = snprintf(v, sizeof v, "value-%u", i);
        char got[64];
        size_t gl = 0, need = 0;
        int rc =
            pc_get_buf(pc_fx_coll(b, "default"), k, (size_t)kl, got, sizeof got, &gl, &need, NULL);
        if (present) {
            assert_int_equal(rc, 0);
            assert_int_equal(gl, (size_t)vl);
            assert_memory_equal(got, v, gl);
        } else {
            assert_int_equal(rc, PC_ENOTFOUND);
        }
    }
}

static void test_torn_tail(void **state)
{
    (void)state;
    char path[640], expect[640];
    uint64_t offs[21];
    write_records(20, path, sizeof path, offs);
    /* cut the last record in its middle, then append garbage */
    assert_int_equal(truncate(path, (off_t)(offs[19] + 17)), 0);
    int fd = open(path, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    uint8_t junk[300];
    memset(junk, 0xab, sizeof junk);
    assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);

    /* read-only: reported, not cut */
    pc_cache *b;
    pc_journal_replay_stats st = replay_fresh(PC_JOURNAL_RDONLY, &b);
    assert_int_equal(st.torn_tails, 1);
    assert_int_equal(file_size(path), (off_t)(offs[19] + 17 + 300));
    pc_cache_destroy(b);

    st = replay_fresh(0, &b);
    assert_int_equal(st.torn_tails, 1);
    assert_int_equal(st.bytes_cut, 17 + 300);
    assert_int_equal(st.records, 19);
    assert_int_equal(st.bad_records, 0);
    const char *name = strrchr(path, '/') + 1;
    snprintf(expect, sizeof expect, "%s: torn tail at offset %llu (317 bytes: ", name,
             (unsigned long long)offs[19]);
    assert_non_null(strstr(logbuf, expect));
    assert_non_null(strstr(logbuf, "), cut"));
    assert_int_equal(file_size(path), (off_t)offs[19]);
    assert_keys(b, 0, 19, 1);
    assert_keys(b, 19, 20, 0);
    pc_cache_destroy(b);

    /* after the cut the segment is clean */
    st = replay_fresh(0, &b);
    assert_int_equal(st.torn_tails + st.bad_records, 0);
    assert_int_equal(st.records, 19);
    pc_cache_destroy(b);

    /* an incomplete header at the very end is a torn tail too */
    assert_int_equal(truncate(path, (off_t)(offs[18] + 5)), 0);
    st = replay_fresh(0, &b);
    assert_int_equal(st.torn_tails, 1);
    assert_int_equal(st.records, 18);
    assert_int_equal(file_size(path), (off_t)offs[18]);
    pc_cache_destroy(b);
}

static void test_corrupt_middle(void **state)
{
    (void)state;
    char path[640], expect[640];
    uint64_t offs[31];
    write_records(30, path, sizeof path, offs);
    const char *name = strrchr(path, '/') + 1;
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    /* record 7: a flipped value byte (checksum); record 15: a wild length */
    uint8_t b1 = 0;
    assert_int_equal(pread(fd, &b1, 1, (off_t)(offs[7] + 34)), 1);
    b1 ^= 0x20;
    assert_int_equal(pwrite(fd, &b1, 1, (off_t)(offs[7] + 34)), 1);
    uint8_t len4[4] = {0xff, 0xff, 0x00, 0x10};
    assert_int_equal(pwrite(fd, len4, 4, (off_t)(offs[15] + 4)), 4);
    close(fd);
    off_t size = file_size(path);

    pc_cache *b;
    pc_journal_replay_stats st = replay_fresh(0, &b);
    assert_int_equal(st.bad_records, 2);
    assert_int_equal(st.torn_tails, 0);
    assert_int_equal(st.records, 28);
    snprintf(expect, sizeof expect,
             "%s: corrupt record at offset %llu (%llu bytes skipped, key 'k7'): checksum mismatch",
             name, (unsigned long long)offs[7], (unsigned long long)(offs[8] - offs[7]));
    assert_non_null(strstr(logbuf, expect));
    snprintf(expect, sizeof expect,
             "%s: corrupt record at offset %llu (%llu bytes skipped, key 'k15'): record length "
             "disagrees",
             name, (unsigned long long)offs[15], (unsigned long long)(offs[16] - offs[15]));
    assert_non_null(strstr(logbuf, expect));
    assert_int_equal(file_size(path), size); /* never cut */
    assert_keys(b, 0, 7, 1);
    assert_keys(b, 7, 8, 0);
    assert_keys(b, 8, 15, 1);
    assert_keys(b, 15, 16, 0);
    assert_keys(b, 16, 30, 1);
    pc_cache_destroy(b);

    /* a corrupt last record is a torn tail: nothing valid follows it */
    fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "\1", 1, (off_t)(offs[29] + 9)), 1); /* flags byte */
    close(fd);
    st = replay_fresh(0, &b);
    assert_int_equal(st.torn_tails, 1);
    assert_int_equal(st.bad_records, 2);
    pc_cache_destroy(b);
}

/* Two transactions of three keys each ("ga", "gb", "gc" = "t<i>"), always,
 * as groups; returns the segment's path and each record's offset. */
static void write_groups(char *path, size_t cap, uint64_t *offs)
{
    pc_cache *a = new_cache("default", 16);
    pc_journal *ja = new_journal(a, 1);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_ALWAYS);
    pc_txn *t = NULL;
    assert_int_equal(pc_txn_begin(a, &t), 0);
    uint64_t off = PC_JSEG_HDR_SIZE;
    unsigned n = 0;
    for (unsigned i = 0; i < 2; i++) {
        char v[8];
        int vl = snprintf(v, sizeof v, "t%u", i);
        assert_int_equal(pc_txn_bind(a, t), 0);
        for (const char *k = "abc"; *k != '\0'; k++) {
            char key[3] = {'g', *k, '\0'};
            assert_int_equal(pc_set(ca, key, 2, v, (size_t)vl, 0, 0), 0);
            offs[n++] = off;
            off += pc_jrec_size(2, (size_t)vl);
        }
        assert_int_equal(pc_txn_bind(a, NULL), 0);
        assert_int_equal(pc_txn_commit(t), 0);
    }
    offs[n] = off;
    pc_txn_free(t);
    close_one_segment(a, ja, off, path, cap);
}

static void expect_group(pc_cache *b, const char *want)
{
    for (const char *k = "abc"; *k != '\0'; k++) {
        char key[3] = {'g', *k, '\0'}, got[16];
        size_t gl = 0, need = 0;
        assert_int_equal(
            pc_get_buf(pc_fx_coll(b, "default"), key, 2, got, sizeof got, &gl, &need, NULL), 0);
        if (gl != strlen(want) || memcmp(got, want, gl) != 0)
            fail_msg("%s is '%.*s', the transaction '%s' is whole", key, (int)gl, got, want);
    }
}

/* A machine crash can leave a hole (zero bytes: a page not written back)
 * where records were, and replay resynchronises past it. A transaction
 * with a hole inside it, or whose first records are in one, is not whole:
 * neither the records after the hole nor those before it are replayed
 * (before, the record after a hole that ended the countdown was replayed
 * alone: one key of the second transaction, the others of the first). */
static void test_group_after_a_hole(void **state)
{
    (void)state;
    static const struct {
        unsigned rec; /* the record of the second transaction zeroed */
        unsigned dropped;
    } holes[] = {{3, 1}, {4, 2}, {5, 1}};
    for (size_t h = 0; h < sizeof holes / sizeof holes[0]; h++) {
        char path[640];
        uint64_t offs[7];
        write_groups(path, sizeof path, offs);
        int fd = open(path, O_RDWR);
        assert_true(fd >= 0);
        uint8_t zero[64] = {0};
        size_t len = (size_t)(offs[holes[h].rec + 1] - offs[holes[h].rec]);
        assert_true(len <= sizeof zero);
        assert_int_equal(pwrite(fd, zero, len, (off_t)offs[holes[h].rec]), (ssize_t)len);
        close(fd);
        pc_cache *b;
        pc_journal_replay_stats st = replay_fresh(0, &b);
        assert_int_equal(st.bad_records + st.torn_tails, 1);
        assert_int_equal(st.groups_dropped, holes[h].dropped);
        expect_group(b, "t0");
        pc_cache_destroy(b);
        assert_int_equal(unlink(path), 0);
    }
}

static void test_bad_header(void **state)
{
    (void)state;
    char path[640];
    uint64_t offs[6];
    write_records(5, path, sizeof path, offs);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "X", 1, 60), 1);
    close(fd);
    pc_cache *b;
    pc_journal_replay_stats st = replay_fresh(0, &b);
    assert_int_equal(st.bad_segments, 1);
    assert_int_equal(st.records, 0);
    assert_non_null(strstr(logbuf, "segment skipped: segment header checksum mismatch"));
    pc_cache_destroy(b);
    assert_int_equal(pwrite(fd = open(path, O_RDWR), "\0", 1, 60), 1); /* name byte, was 0 */
    close(fd);
    st = replay_fresh(0, &b);
    assert_int_equal(st.bad_segments, 0);
    assert_int_equal(st.records, 5);
    pc_cache_destroy(b);

    /* a file whose name and header disagree (another epoch) */
    char moved[600];
    snprintf(moved, sizeof moved, "%s/journal/default.%016llx.1.wal", tmpdir, 0x700000000ull);
    assert_int_equal(rename(path, moved), 0);
    st = replay_fresh(0, &b);
    assert_int_equal(st.bad_segments, 1);
    assert_int_equal(st.records, 0);
    assert_non_null(strstr(logbuf, "segment skipped: its header names collection 'default' epoch "
                                   "0000000100000000"));
    pc_cache_destroy(b);

    /* a writer that died before its header: a short file, skipped */
    assert_int_equal(truncate(moved, 100), 0);
    st = replay_fresh(0, &b);
    assert_int_equal(st.bad_segments, 0);
    assert_int_equal(st.records, 0);
    assert_non_null(strstr(logbuf, "100 bytes, no complete segment header: skipped"));
    pc_cache_destroy(b);
}

/* A segment whose header is damaged is skipped by the replay; the save
 * whose retire covers it moves it to journal/quarantine/ with its reason
 * instead of deleting it (docs/journal-format.md §4), while the healthy
 * covered segments go, and it is still there after the next save. */
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

static void test_quarantine(void **state)
{
    (void)state;
    char path[640];
    uint64_t offs[6];
    write_records(5, path, sizeof path, offs);
    off_t damaged_size = file_size(path);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "X", 1, 60), 1);
    close(fd);
    const char *base = strrchr(path, '/') + 1;
    char qpath[900], rpath[960];
    snprintf(qpath, sizeof qpath, "%s/journal/quarantine/%s", tmpdir, base);
    snprintf(rpath, sizeof rpath, "%s.reason", qpath);

    pc_store *s = open_store();
    pc_cache *b = new_cache("default", 16);
    pc_journal *jb = new_journal(b, 2);
    pc_coll *cb = pc_fx_coll(b, "default");
    log_reset();
    pc_journal_restore_result rr;
    assert_int_equal(pc_journal_restore(jb, s, cb, &rr), 0);
    assert_int_equal(rr.replay.bad_segments, 1);
    journal_on(b, jb, "default", PC_JOURNAL_ALWAYS);
    char names[8][256];
    for (int save = 0; save < 2; save++) {
        assert_int_equal(pc_set(cb, "a", 1, "1", 1, 0, 0), 0); /* a healthy segment */
        assert_int_equal(list_segments("default", names, 8), save == 0 ? 2 : 1);
        unsigned retired = 0;
        log_reset();
        assert_int_equal(pc_journal_save(jb, s, cb, NULL, &retired), 0);
        assert_int_equal(retired, 1); /* the healthy one */
        assert_int_equal(list_segments("default", names, 8), 0);
        if (save == 0)
            assert_non_null(strstr(logbuf, "not replayable (segment header checksum mismatch): "
                                           "moved to"));
        /* kept, whole, with its reason */
        assert_int_equal(file_size(qpath), damaged_size);
        FILE *rf = fopen(rpath, "r");
        assert_non_null(rf);
        char line[256] = "";
        assert_non_null(fgets(line, sizeof line, rf));
        fclose(rf);
        assert_string_equal(line, "segment header checksum mismatch\n");
    }
    pc_journal_close(jb);
    pc_cache_destroy(b);
    pc_store_close(s);
}

/* The segment stays a sequence of whole records when a write fails: the
 * process may write only 4 KiB (RLIMIT_FSIZE), the set that does not fit
 * gets PC_EIO. */
static void test_write_error(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default", 16);
    pc_journal *ja = new_journal(a, 1);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_ALWAYS);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        child_init();
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {4096, 4096};
        setrlimit(RLIMIT_FSIZE, &rl);
        unsigned ok = 0;
        int rc = 0;
        char v[100];
        memset(v, 'v', sizeof v);
        while (ok < 1000) {
            char k[16];
            int kl = snprintf(k, sizeof k, "k%u", ok);
            if ((rc = pc_set(ca, k, (size_t)kl, v, sizeof v, 0, 0)) != 0)
                break;
            ok++;
        }
        if (write(pfd[1], &ok, sizeof ok) != sizeof ok ||
            write(pfd[1], &rc, sizeof rc) != sizeof rc)
            _exit(2);
        /* the write that failed was undone; the journal refuses the next
         * ones before they touch the table, reads go on */
        char k[16];
        int kl = snprintf(k, sizeof k, "k%u", ok);
        if (pc_probe(ca, k, (size_t)kl, NULL) != PC_ENOTFOUND)
            _exit(6);
        if (pc_set(ca, "new", 3, v, sizeof v, 0, 0) != PC_EREFUSED ||
            pc_probe(ca, "new", 3, NULL) != PC_ENOTFOUND || pc_probe(ca, "k0", 2, NULL) != 0)
            _exit(7);
        pc_journal_health h;
        if (pc_journal_health_get(ja, &h) != 0 || !h.failing || h.err != EFBIG)
            _exit(8);
        _exit(strstr(logbuf, "write failed: File too large") != NULL ? 0 : 5);
    }
    close(pfd[1]);
    unsigned ok = 0;
    int rc = 0;
    assert_int_equal(read(pfd[0], &ok, sizeof ok), sizeof ok);
    assert_int_equal(read(pfd[0], &rc, sizeof rc), sizeof rc);
    close(pfd[0]);
    int status = 0;
    assert_int_equal(waitpid(p, &status, 0), p);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(rc, PC_EIO);
    assert_true(ok > 10 && ok < 40);
    pc_journal_close(ja);
    pc_cache_destroy(a);
    pc_cache *b;
    pc_journal_replay_stats st = replay_fresh(0, &b);
    assert_int_equal(st.torn_tails + st.bad_records, 0);
    assert_int_equal(st.records, ok);
    pc_cache_destroy(b);
}

/* ---- group commit (journal_commit.c, docs/journal-format.md §6.6) ------------- */

static void put_kv(pc_coll *c, unsigned i)
{
    char k[16], v[32];
    int kl = snprintf(k, sizeof k, "k%u", i), vl = snprintf(v, sizeof v, "value-%u", i);
    assert_int_equal(pc_set(c, k, (size_t)kl, v, (size_t)vl, 0, 0), 0);
}

/* With deferred sync an always record is in its segment when the hook
 * returns but not fdatasynced; a commit (one call, or start / sync /
 * finish with records staged in between) makes durable exactly what it
 * took; a save's new epoch between staged records leaves no record of the
 * old segment unsynced; a failed write is still refused and undone and
 * does not fail the batch of the writes before it; a forked child has
 * nothing staged. */
static void test_group_commit(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default", 16);
    pc_journal *ja = new_journal(a, 1);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_ALWAYS);
    assert_int_equal(pc_journal_commit_pending(ja), 0);
    assert_int_equal(pc_journal_commit(ja), 0); /* nothing staged: nothing to do */
    assert_int_equal(pc_journal_defer_sync(ja, 1), 0);
    for (unsigned i = 0; i < 10; i++)
        put_kv(ca, i);
    assert_int_equal(pc_journal_commit_pending(ja), 10);
    struct pc_jseg_shm *g = &ja->slot->seg[0];
    char names[4][256], path[640];
    assert_int_equal(list_segments("default", names, 4), 1);
    seg_path(names[0], path, sizeof path);
    assert_int_equal(file_size(path), (off_t)g->bytes); /* written by the hook */
    assert_true(g->synced < g->bytes);                  /* not synced */
    assert_int_equal(g->dir_synced, 0);
    assert_int_equal(pc_journal_commit(ja), 0);
    assert_int_equal(pc_journal_commit_pending(ja), 0);
    assert_int_equal(g->synced, g->bytes);
    assert_int_equal(g->dir_synced, 1);

    /* three steps: a batch covers what was staged at its start only */
    for (unsigned i = 10; i < 15; i++)
        put_kv(ca, i);
    pc_journal_batch *b = NULL;
    assert_int_equal(pc_journal_batch_new(&b), 0);
    assert_int_equal(pc_journal_commit_start(ja, b), 0);
    assert_int_equal(pc_journal_batch_records(b), 5);
    assert_int_equal(pc_journal_commit_pending(ja), 0);
    uint64_t at_start = g->bytes;
    for (unsigned i = 15; i < 18; i++)
        put_kv(ca, i);
    assert_int_equal(pc_journal_commit_pending(ja), 3);
    pc_journal_batch_sync(b);
    assert_int_equal(pc_journal_commit_finish(ja, b), 0);
    assert_int_equal(g->synced, at_start);
    assert_true(g->bytes > at_start);
    /* a batch finished without its sync is synced by finish */
    assert_int_equal(pc_journal_commit_start(ja, b), 0);
    assert_int_equal(pc_journal_batch_records(b), 3);
    assert_int_equal(pc_journal_commit_finish(ja, b), 0);
    assert_int_equal(g->synced, g->bytes);
    assert_int_equal(pc_journal_commit(ja), 0); /* nothing staged any more */
    pc_journal_batch_free(b);
    put_kv(ca, 18);
    assert_int_equal(pc_journal_commit(ja), 0);
    assert_int_equal(g->synced, g->bytes);

    /* a save between staged records: the old segment is synced when the
     * hook leaves it, the new one by the commit */
    put_kv(ca, 19);
    uint64_t old_epoch = g->epoch, e1 = 0;
    assert_int_equal(pc_journal_begin_save(ja, ca, &e1), 0);
    put_kv(ca, 20);
    assert_int_equal(g->epoch, e1);
    assert_true(e1 > old_epoch);
    assert_int_equal(pc_journal_commit_pending(ja), 2);
    assert_int_equal(pc_journal_commit(ja), 0);
    assert_int_equal(g->synced, g->bytes);
    assert_int_equal(list_segments("default", names, 4), 2);

    /* a forked child has nothing staged, and its own switch is off */
    put_kv(ca, 21);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        child_init();
        _exit(pc_journal_commit_pending(ja) == 0 && pc_journal_commit(ja) == 0 ? 0 : 3);
    }
    int status = 0;
    assert_int_equal(waitpid(p, &status, 0), p);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(pc_journal_commit_pending(ja), 1);
    /* switching off commits */
    assert_int_equal(pc_journal_defer_sync(ja, 0), 0);
    assert_int_equal(pc_journal_commit_pending(ja), 0);
    assert_int_equal(g->synced, g->bytes);
    pc_journal_close(ja);
    pc_cache_destroy(a);
    pc_cache *rb;
    pc_journal_replay_stats st = replay_fresh(0, &rb);
    assert_int_equal(st.torn_tails + st.bad_records, 0);
    assert_keys(rb, 0, 22, 1);
    pc_cache_destroy(rb);
}

/* A write that fails (RLIMIT_FSIZE: EFBIG) while records are staged: that
 * write is refused and undone as without group commit, the staged ones
 * before it are in their segment and the commit makes them durable. */
static void test_group_commit_write_error(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default", 16);
    pc_journal *ja = new_journal(a, 1);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_ALWAYS);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        child_init();
        signal(SIGXFSZ, SIG_IGN);
        if (pc_journal_defer_sync(ja, 1) != 0)
            _exit(2);
        struct rlimit rl = {4096, 4096};
        setrlimit(RLIMIT_FSIZE, &rl);
        unsigned ok = 0;
        int rc = 0;
        while (ok < 1000) {
            char k[16], v[32];
            int kl = snprintf(k, sizeof k, "k%u", ok), vl = snprintf(v, sizeof v, "value-%u", ok);
            if ((rc = pc_set(ca, k, (size_t)kl, v, (size_t)vl, 0, 0)) != 0)
                break;
            ok++;
        }
        if (rc != PC_EIO || ok < 10 || pc_journal_commit_pending(ja) != ok)
            _exit(3);
        char k[16];
        int kl = snprintf(k, sizeof k, "k%u", ok);
        if (pc_probe(ca, k, (size_t)kl, NULL) != PC_ENOTFOUND) /* undone */
            _exit(4);
        if (pc_journal_commit(ja) != 0 || pc_journal_commit_pending(ja) != 0)
            _exit(5);
        if (pc_set(ca, "new", 3, "v", 1, 0, 0) != PC_EREFUSED) /* the journal is failing */
            _exit(6);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(p, &status, 0), p);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    pc_journal_close(ja);
    pc_cache_destroy(a);
    pc_cache *rb;
    pc_journal_replay_stats st = replay_fresh(0, &rb);
    assert_int_equal(st.torn_tails + st.bad_records, 0);
    assert_true(st.records >= 10);
    assert_keys(rb, 0, (unsigned)st.records, 1);
    pc_cache_destroy(rb);
}

/* ---- fork and retire ------------------------------------------------------------ */

struct seg_keys {
    char first[64];
    unsigned n;
};

static int count_rec(void *ctx, const pc_jrec *r, uint64_t off)
{
    (void)off;
    struct seg_keys *sk = ctx;
    if (sk->n++ == 0)
        snprintf(sk->first, sizeof sk->first, "%.*s", (int)r->klen, (const char *)r->key);
    return 0;
}

static void scan_file(const char *name, struct seg_keys *sk, pc_jseg_hdr *h)
{
    char path[640];
    seg_path(name, path, sizeof path);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    off_t sz = file_size(path);
    uint8_t *buf = malloc((size_t)sz);
    assert_non_null(buf);
    assert_int_equal(read(fd, buf, (size_t)sz), sz);
    close(fd);
    memset(sk, 0, sizeof *sk);
    pc_jscan_ops ops = {.record = count_rec};
    uint64_t end = 0;
    assert_int_equal(pc_jseg_scan(buf, (size_t)sz, &ops, sk, h, &end), 0);
    assert_int_equal(end, (uint64_t)sz);
    free(buf);
}

static void test_fork_drops_parent_buffer(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default", 16);
    pc_journal *ja = new_journal(a, 1);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_EVERYSEC);
    for (int i = 0; i < 10; i++)
        assert_int_equal(pc_set(ca, "parent", 6, "p", 1, 0, 0), 0);
    assert_true(ja->slot->head > ja->slot->tail); /* in the ring, not written */
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        child_init();
        for (int i = 0; i < 5; i++)
            if (pc_set(ca, "child", 5, "c", 1, 0, 0) != 0)
                _exit(2);
        _exit(pc_journal_flush(ja, 1) == 0 ? 0 : 3); /* must not write the parent's */
    }
    int status = 0;
    assert_int_equal(waitpid(p, &status, 0), p);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(pc_journal_flush(ja, 1), 0);
    char names[4][256];
    assert_int_equal(list_segments(NULL, names, 4), 2);
    unsigned got_parent = 0, got_child = 0;
    for (int i = 0; i < 2; i++) {
        struct seg_keys sk;
        pc_jseg_hdr h;
        scan_file(names[i], &sk, &h);
        if (h.pid == (uint32_t)getpid()) {
            assert_string_equal(sk.first, "parent");
            got_parent = sk.n;
        } else {
            assert_int_equal(h.pid, (uint32_t)p);
            assert_string_equal(sk.first, "child");
            got_child = sk.n;
        }
        assert_int_equal(h.boot_gen, 1);
        assert_string_equal(h.coll, "default");
    }
    assert_int_equal(got_parent, 10);
    assert_int_equal(got_child, 5);
    pc_journal_close(ja);
    pc_cache_destroy(a);
}

static void test_retire(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default;default.x;other", 16);
    pc_journal *ja = new_journal(a, 9);
    pc_coll *cd = pc_fx_coll(a, "default"), *cx = pc_fx_coll(a, "default.x"),
            *co = pc_fx_coll(a, "other");
    assert_int_equal(pc_journal_install(ja), 0);
    pc_coll *all[] = {cd, cx, co};
    for (int i = 0; i < 3; i++)
        assert_int_equal(pc_journal_set_mode(all[i], PC_JOURNAL_EVERYSEC), 0);
    uint64_t e0 = 0, e1 = 0, e2 = 0;
    assert_int_equal(pc_journal_epoch(ja, cd, &e0), 0);
    assert_int_equal(e0, 9ull << 32);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 3; i++)
            assert_int_equal(pc_set(all[i], "k", 1, "v", 1, 0, 0), 0);
        if (round == 0)
            assert_int_equal(pc_journal_begin_save(ja, cd, &e1), 0);
        if (round == 1) {
            assert_int_equal(pc_journal_begin_save(ja, cd, &e2), 0);
            /* other collections' epochs move on their own saves only */
            uint64_t eo = 0;
            assert_int_equal(pc_journal_epoch(ja, co, &eo), 0);
            assert_int_equal(eo, 9ull << 32);
        }
    }
    assert_int_equal(e1, (9ull << 32) + 1);
    assert_int_equal(e2, (9ull << 32) + 2);
    assert_int_equal(pc_journal_tick(ja, PC_JOURNAL_TICK_SYNC), 0);
    char names[16][256];
    assert_int_equal(list_segments("default", names, 16), 3);
    assert_int_equal(list_segments("default.x", names, 16), 1);
    assert_int_equal(list_segments("other", names, 16), 1);
    unsigned removed = 0;
    assert_int_equal(pc_journal_retire(ja, cd, e2, &removed), 0);
    assert_int_equal(removed, 2);
    assert_int_equal(list_segments("default", names, 16), 1);
    assert_int_equal(list_segments("default.x", names, 16), 1);
    assert_int_equal(list_segments("other", names, 16), 1);
    char cn[64];
    uint64_t e;
    list_segments("default", names, 16);
    assert_int_equal(pc_journal_segment_name_parse(names[0], cn, sizeof cn, &e), 0);
    assert_int_equal(e, e2);
    /* an idle segment of a past epoch is closed by the tick */
    assert_int_equal(pc_journal_begin_save(ja, cd, &e1), 0);
    assert_int_equal(pc_journal_tick(ja, PC_JOURNAL_TICK_SYNC), 0);
    assert_int_equal(ja->own[0].fd, -1);
    assert_int_equal(pc_journal_retire(ja, cd, e1, &removed), 0);
    assert_int_equal(removed, 1);
    assert_int_equal(list_segments("default", names, 16), 0);
    /* a replay after a restart sees what is left */
    pc_journal_close(ja);
    pc_cache_destroy(a);
}

/* ---- the rings (journal_ring.c, journal_drain.c) ------------------------------- */

/* Many laps of the smallest ring, records of every size up to a few
 * hundred KiB in two collections (control items between them), the
 * drainer thread draining while the writer writes (and the writer draining
 * itself when the ring fills): the replay rebuilds exactly the table. */
static void test_ring_laps(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default;other", 128);
    pc_journal *ja = new_journal_cfg(a, 1, 1, 0); /* rounded up to the minimum */
    pc_coll *cd = pc_fx_coll(a, "default"), *co = pc_fx_coll(a, "other");
    assert_true(ja->ring_bytes >= 2 * (uint64_t)PC_JREC_MAX_SIZE);
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_journal_set_mode(cd, PC_JOURNAL_EVERYSEC), 0);
    assert_int_equal(pc_journal_set_mode(co, PC_JOURNAL_EVERYSEC), 0);
    assert_int_equal(pc_journal_sync_all(ja), 0); /* starts the drainer */
    char *v = malloc(400000);
    assert_non_null(v);
    uint64_t bytes = 0;
    for (unsigned i = 0; bytes < 6 * ja->ring_bytes; i++) {
        uint64_t x = rnd();
        size_t vl = (x % 16 == 0) ? (size_t)(x >> 20) % 400000 : (size_t)(x >> 20) % 300;
        for (size_t b = 0; b < vl; b++)
            v[b] = (char)(i + b);
        char k[24];
        int kl = snprintf(k, sizeof k, "k%u", (unsigned)(x >> 40) % 500);
        pc_coll *c = (x & 0x100) ? co : cd;
        assert_int_equal(pc_set(c, k, (size_t)kl, v, vl, 0, 0), 0);
        bytes += pc_jrec_size((size_t)kl, vl);
        if (i % 97 == 0) {
            int rc = pc_remove(c, k, (size_t)kl);
            assert_true(rc == 0 || rc == PC_ENOTFOUND);
        }
    }
    free(v);
    assert_int_equal(pc_journal_sync_all(ja), 0);
    assert_int_equal(ja->slot->head, ja->slot->tail); /* all written */
    assert_true(ja->slot->head > 3 * ja->ring_bytes); /* laps */
    pc_journal_close(ja);

    pc_cache *b = new_cache("default;other", 128);
    pc_journal *jb = new_journal(b, 2);
    const char *names[] = {"default", "other"};
    for (int i = 0; i < 2; i++) {
        pc_journal_replay_stats st;
        assert_int_equal(pc_journal_replay_run(jb, pc_fx_coll(b, names[i]), 0, &st), 0);
        assert_int_equal(st.bad_records + st.torn_tails + st.bad_segments + st.errors, 0);
        assert_same_table(pc_fx_coll(a, names[i]), pc_fx_coll(b, names[i]));
    }
    pc_journal_close(jb);
    pc_cache_destroy(a);
    pc_cache_destroy(b);
}

/* More writing processes than ring slots: the one without a slot writes
 * each record through (a private ring would die with it), says so once,
 * and a SIGKILL right after its writes loses none of them. */
static void test_ring_slots_exhausted(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default", 16);
    pc_journal *ja = new_journal_cfg(a, 1, 0, 1);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_EVERYSEC);
    assert_int_equal(pc_set(ca, "parent", 6, "p", 1, 0, 0), 0); /* takes the only slot */
    assert_false(ja->private_ring);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        child_init();
        log_reset();
        for (int i = 0; i < 100; i++) {
            char k[16];
            int kl = snprintf(k, sizeof k, "c%d", i);
            if (pc_set(ca, k, (size_t)kl, "c", 1, 0, 0) != 0)
                _exit(2);
        }
        char ok = ja->private_ring && strstr(logbuf, "ring slots are taken") != NULL ? 'y' : 'n';
        if (write(pfd[1], &ok, 1) != 1)
            _exit(3);
        pause(); /* killed */
        _exit(4);
    }
    close(pfd[1]);
    char ok = 0;
    assert_int_equal(read(pfd[0], &ok, 1), 1);
    close(pfd[0]);
    assert_int_equal(ok, 'y');
    kill(p, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(p, &status, 0), p);
    assert_true(WIFSIGNALED(status));
    pc_journal_close(ja);
    pc_cache_destroy(a);
    pc_cache *b;
    pc_journal_replay_stats st = replay_fresh(0, &b);
    assert_int_equal(st.records, 101);
    assert_int_equal(pc_probe(pc_fx_coll(b, "default"), "c99", 3, NULL), 0);
    pc_cache_destroy(b);
}

/* A consumer killed while it holds a ring's lock (in the middle of a
 * drain): the robust lock passes to the next consumer, which writes the
 * ring out; nothing is lost or doubled. */
static void test_ring_consumer_killed(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default", 16);
    pc_journal *ja = new_journal(a, 1);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_EVERYSEC);
    for (int i = 0; i < 50; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "k%d", i);
        assert_int_equal(pc_set(ca, k, (size_t)kl, "v", 1, 0, 0), 0);
    }
    struct pc_jslot_shm *s = ja->slot;
    assert_true(s->head > s->tail);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        child_init();
        if (pthread_mutex_lock(&s->lock) != 0)
            _exit(2);
        raise(SIGKILL);
        _exit(3);
    }
    int status = 0;
    assert_int_equal(waitpid(p, &status, 0), p);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_int_equal(pc_journal_flush(ja, 1), 0);
    assert_int_equal(s->head, s->tail);
    pc_journal_close(ja);
    pc_cache_destroy(a);
    pc_cache *b;
    pc_journal_replay_stats st = replay_fresh(0, &b);
    assert_int_equal(st.records, 50);
    assert_int_equal(st.torn_tails + st.bad_records, 0);
    pc_cache_destroy(b);
}

/* ---- the rings file: what every process of a host left in its rings ----- */

/* A host that dies whole (SIGKILL, no drain, no exit handler) after
 * writing n keys in everysec: its rings stay in <dir>/journal/rings. */
static void host_dies_with_records(unsigned n)
{
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        child_init();
        pc_cache *a = new_cache("default", 16);
        pc_journal *ja = new_journal_cfg(a, 1, 0, 4); /* a small file to copy around */
        pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_EVERYSEC);
        for (unsigned i = 0; i < n; i++) {
            char k[16], v[32];
            int kl = snprintf(k, sizeof k, "k%u", i), vl = snprintf(v, sizeof v, "value-%u", i);
            if (pc_set(ca, k, (size_t)kl, v, (size_t)vl, 0, 0) != 0)
                _exit(2);
        }
        raise(SIGKILL);
        _exit(3);
    }
    int status = 0;
    assert_int_equal(waitpid(p, &status, 0), p);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

static void rings_path(char *out, size_t cap)
{
    snprintf(out, cap, "%s/journal/" PC_JRINGS_FILE, tmpdir);
}

/* The rings file's bytes (caller frees), or NULL. */
static uint8_t *read_rings(size_t *len)
{
    char path[300];
    rings_path(path, sizeof path);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void write_rings(const uint8_t *b, size_t len)
{
    char path[300];
    rings_path(path, sizeof path);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    fclose(f);
}

static void remove_segments(void)
{
    char names[64][256];
    unsigned n = list_segments("default", names, 64);
    for (unsigned i = 0; i < n; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/journal/%.255s", tmpdir, names[i]);
        assert_int_equal(unlink(path), 0);
    }
}

/* Kill -9 of the whole host: the next open writes its rings out, the replay
 * has every record; a second open meanwhile is refused. Then the same file
 * damaged (a flipped record, another machine boot, another layout): no
 * crash, each case named, and nothing it cannot read is thrown away
 * silently. */
static void test_rings_outlive_the_host(void **state)
{
    (void)state;
    host_dies_with_records(300);
    size_t len = 0;
    uint8_t *orig = read_rings(&len);
    assert_true(len > sizeof(struct pc_jshm));

    /* written out at the next open, before anything reads the segments */
    log_reset();
    pc_cache *b = new_cache("default", 16);
    pc_journal *jb = new_journal(b, 2);
    assert_non_null(strstr(logbuf, "wrote out 300 acknowledged records"));
    {
        pc_cache *x = new_cache("default", 16);
        pc_journal_config cfg;
        pc_journal_config_init(&cfg);
        cfg.dir = tmpdir;
        cfg.boot_gen = 3;
        cfg.log.fn = log_capture;
        pc_journal *jx = NULL;
        assert_int_equal(pc_journal_open(x, &cfg, &jx), PC_ELOCKED); /* one live journal */
        pc_cache_destroy(x);
    }
    pc_journal_close(jb);
    pc_cache_destroy(b);
    pc_journal_replay_stats st = replay_fresh(0, &b);
    assert_int_equal(st.records, 300);
    assert_keys(b, 0, 300, 1);
    pc_cache_destroy(b);

    /* a record of the ring damaged: the ones before it are written out */
    remove_segments();
    uint8_t *bad = malloc(len);
    assert_non_null(bad);
    memcpy(bad, orig, len);
    uint8_t *k = memmem(bad, len, "k150value-150", 13);
    assert_non_null(k);
    k[8 - (int)PC_JREC_HDR_SIZE] = 0xee; /* its operation */
    write_rings(bad, len);
    st = replay_fresh(0, &b);
    assert_non_null(strstr(logbuf, "is damaged (unknown operation) after 150 records"));
    assert_int_equal(st.records, 150);
    assert_keys(b, 0, 150, 1);
    assert_keys(b, 150, 300, 0);
    pc_cache_destroy(b);

    /* written before the machine restarted: not written out, and said so */
    remove_segments();
    memcpy(bad, orig, len);
    ((struct pc_jshm *)bad)->boot_id[3] ^= 0x5a;
    write_rings(bad, len);
    st = replay_fresh(0, &b);
    assert_non_null(strstr(logbuf, "written before the machine restarted"));
    assert_int_equal(st.records, 0);
    pc_cache_destroy(b);

    /* another layout that was not closed cleanly: the open refuses and the
     * file stays as it was; once marked clean it is set up anew */
    remove_segments();
    memcpy(bad, orig, len);
    ((struct pc_jshm *)bad)->version = 99;
    write_rings(bad, len);
    log_reset();
    b = new_cache("default", 16);
    pc_journal_config cfg;
    pc_journal_config_init(&cfg);
    cfg.dir = tmpdir;
    cfg.boot_gen = 4;
    cfg.log.fn = log_capture;
    pc_journal *jy = NULL;
    assert_int_equal(pc_journal_open(b, &cfg, &jy), PC_EFORMAT);
    assert_non_null(strstr(logbuf, "another layout"));
    size_t len2 = 0;
    uint8_t *now = read_rings(&len2);
    assert_int_equal(len2, len);
    assert_memory_equal(now, bad, len);
    free(now);
    atomic_store(&((struct pc_jshm *)bad)->clean, 1);
    write_rings(bad, len);
    assert_int_equal(pc_journal_open(b, &cfg, &jy), 0);
    pc_journal_close(jy);
    pc_cache_destroy(b);

    /* garbage of any length is not a rings file */
    for (size_t cut = 0; cut < 200; cut += 37) {
        memset(bad, 0x93, cut);
        write_rings(bad, cut);
        st = replay_fresh(0, &b);
        assert_int_equal(st.records, 0);
        pc_cache_destroy(b);
    }
    free(bad);
    free(orig);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_torn_tail, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_corrupt_middle, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_group_after_a_hole, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bad_header, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_write_error, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_group_commit, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_group_commit_write_error, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_fork_drops_parent_buffer, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_retire, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_quarantine, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_ring_laps, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_ring_slots_exhausted, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_ring_consumer_killed, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_rings_outlive_the_host, setup_dir, teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
