/*
 * test_journal.c - the write-ahead journal (storage/journal*.c,
 * docs/journal-format.md).
 *
 *  - the format: records and segment headers round-trip against golden
 *    bytes, hostile bytes are rejected, segment names parse; mutated
 *    segment images scanned against a PROT_NONE page account for every
 *    byte (valid records and named bad runs tile the file);
 *  - every operation (SET, COUNTER through pc_add and pc_set_counter, DEL,
 *    EXPIRE, KEEPTTL/NX/XX sets, binary keys, empty and 1 MiB values, short
 *    TTLs that lapse before the replay) replays into a fresh cache equal to
 *    the live table, in both modes;
 *  - forked writers on overlapping keys: the replay equals the final live
 *    table key by key (value, counter flag, TTL);
 *  - saves while writers run (begin_save, an ordered walk copied into
 *    memory as the snapshot, retire): snapshot + journal == the live table;
 *    the same with the real store (pc_journal_save / pc_journal_restore);
 *  - the same while the table grows: a 16-bucket collection split, drained
 *    and swept by a forked maintainer under writers, saves and rotations,
 *    with stable keys, hot keys in chains and short TTLs;
 *  - the snapshot filter's decisions (journal later, snapshot later, a
 *    later EXPIRE that re-arms or removes a snapshot record, deletes, boot
 *    generations);
 *  - a torn tail is cut with a log line naming segment and offset; a
 *    corrupt record in the middle is named (offset, key) and skipped; a bad
 *    segment header is skipped; an I/O error (RLIMIT_FSIZE) is PC_EIO and
 *    leaves the segment cut at a whole record;
 *  - a child drops its parent's buffered records after fork; retire
 *    removes exactly the older epochs of one collection.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h> /* after the four headers it needs */

#include "pc_journal.h"
#include "pcache.h"
#include "pcache_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

/* ---- fixtures ------------------------------------------------------------------ */

static char logbuf[1 << 16]; /* what the journal logged in this process */
static size_t loglen;

static void log_capture(void *ctx, int level, const char *msg)
{
    (void)ctx;
    (void)level;
    size_t n = strlen(msg);
    if (loglen + n + 2 < sizeof logbuf) {
        memcpy(logbuf + loglen, msg, n);
        loglen += n;
        logbuf[loglen++] = '\n';
        logbuf[loglen] = '\0';
    }
    if (getenv("PCJ_VERBOSE") != NULL)
        fprintf(stderr, "[%d] %s\n", level, msg);
}

static void log_reset(void)
{
    loglen = 0;
    logbuf[0] = '\0';
}

static char tmpdir[200];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static int setup_dir(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/pcj.XXXXXX", base != NULL ? base : "/tmp");
    assert_non_null(mkdtemp(tmpdir));
    log_reset();
    return 0;
}

static int teardown_dir(void **state)
{
    (void)state;
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* A forked child must not run cmocka's handlers (they would longjmp into
 * the child's copy of the runner), and never outlives a failed test. */
static void child_init(void)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* growth_load_factor and growth_budget: 0 keeps the default. */
static pc_cache *new_cache_grow(const char *colls, size_t mem_mb, unsigned load_factor,
                                unsigned budget)
{
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = colls;
    cfg.mem_mb = mem_mb;
    cfg.hugepage_mb = 0;
    cfg.lock_memory = 0;
    if (load_factor != 0)
        cfg.growth_load_factor = load_factor;
    if (budget != 0)
        cfg.growth_budget = budget;
    pc_cache *c = NULL;
    assert_int_equal(pc_cache_create(&cfg, &c), 0);
    return c;
}

static pc_cache *new_cache(const char *colls, size_t mem_mb)
{
    return new_cache_grow(colls, mem_mb, 0, 0);
}

static pc_journal *new_journal(pc_cache *c, uint64_t boot_gen)
{
    pc_journal_config cfg;
    pc_journal_config_init(&cfg);
    cfg.dir = tmpdir;
    cfg.boot_gen = boot_gen;
    cfg.log = log_capture;
    cfg.log_level = PC_LOG_DEBUG;
    pc_journal *j = NULL;
    assert_int_equal(pc_journal_open(c, &cfg, &j), 0);
    return j;
}

static pc_coll *coll_of(pc_cache *c, const char *name)
{
    pc_coll *co = NULL;
    assert_int_equal(pc_coll_find(c, name, strlen(name), &co), 0);
    return co;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Segment files of the journal directory (names, sorted), optionally only
 * those of one collection. Returns the count. */
static unsigned list_segments(const char *coll, char names[][256], unsigned max)
{
    char path[300];
    snprintf(path, sizeof path, "%s/journal", tmpdir);
    DIR *d = opendir(path);
    assert_non_null(d);
    unsigned n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char cn[PC_COLL_NAME_MAX + 1];
        uint64_t e;
        if (pc_jseg_name_parse(de->d_name, cn, sizeof cn, &e) != 0)
            continue;
        if (coll != NULL && strcmp(cn, coll) != 0)
            continue;
        if (n < max)
            snprintf(names[n], 256, "%s", de->d_name);
        n++;
    }
    closedir(d);
    for (unsigned a = 1; a < n && a < max; a++)
        for (unsigned b = a; b > 0 && strcmp(names[b - 1], names[b]) > 0; b--) {
            char t[256];
            memcpy(t, names[b], 256);
            memcpy(names[b], names[b - 1], 256);
            memcpy(names[b - 1], t, 256);
        }
    return n;
}

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

/* ---- table comparison ---------------------------------------------------------- */

struct kv {
    void *key;
    size_t klen;
    void *val;
    size_t vlen;
    int64_t ttl_ms;
    int is_counter;
    uint32_t stamp;
};

struct kvset {
    struct kv *v;
    size_t n, cap;
};

static int kv_collect(void *ctx, const pc_entry *e)
{
    struct kvset *s = ctx;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        assert_non_null(s->v);
    }
    struct kv *k = &s->v[s->n++];
    k->key = malloc(e->klen + 1);
    k->val = malloc(e->vlen + 1);
    assert_true(k->key != NULL && k->val != NULL);
    memcpy(k->key, e->key, e->klen);
    if (e->vlen)
        memcpy(k->val, e->val, e->vlen);
    k->klen = e->klen;
    k->vlen = e->vlen;
    k->ttl_ms = e->ttl_ms;
    k->is_counter = e->is_counter;
    k->stamp = e->stamp;
    return 0;
}

static void kv_free(struct kvset *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].key);
        free(s->v[i].val);
    }
    free(s->v);
    memset(s, 0, sizeof *s);
}

static void kv_snapshot(pc_coll *co, unsigned flags, struct kvset *out)
{
    memset(out, 0, sizeof *out);
    assert_int_equal(pc_walk_ordered(co, flags, kv_collect, out), 0);
}

/* Every live entry of a equals the one in b (value, counter flag, TTL within
 * 2 s) and b holds nothing else. */
static void assert_same_table(pc_coll *a, pc_coll *b)
{
    struct kvset sa, sb;
    kv_snapshot(a, PC_WALK_VALUES, &sa);
    kv_snapshot(b, PC_WALK_VALUES, &sb);
    size_t bad = 0;
    for (size_t i = 0; i < sa.n; i++) {
        struct kv *k = &sa.v[i];
        void *val = NULL;
        size_t vlen = 0;
        pc_meta m;
        int rc = pc_get(b, k->key, k->klen, &val, &vlen, &m);
        if (rc != 0 || vlen != k->vlen || memcmp(val, k->val, vlen) != 0 ||
            m.is_counter != k->is_counter || (k->ttl_ms < 0) != (m.ttl_ms < 0) ||
            (k->ttl_ms >= 0 && llabs(k->ttl_ms - m.ttl_ms) > 2000)) {
            if (bad++ < 10)
                fprintf(stderr,
                        "mismatch key %.*s: live %.*s ctr %d ttl %lld | replayed rc %d %.*s "
                        "ctr %d ttl %lld\n",
                        (int)k->klen, (char *)k->key, (int)k->vlen, (char *)k->val, k->is_counter,
                        (long long)k->ttl_ms, rc, rc == 0 ? (int)vlen : 0,
                        rc == 0 ? (char *)val : "", rc == 0 ? m.is_counter : -1,
                        rc == 0 ? (long long)m.ttl_ms : 0ll);
        }
        free(val);
    }
    if (sb.n != sa.n)
        fprintf(stderr, "live table %zu keys, replayed %zu\n", sa.n, sb.n);
    assert_int_equal(bad, 0);
    assert_int_equal(sb.n, sa.n);
    kv_free(&sa);
    kv_free(&sb);
}

/* ---- the format ------------------------------------------------------------------- */

static void test_format_records(void **state)
{
    (void)state;
    uint8_t buf[PC_JREC_MIN_SIZE + 64];
    const pc_jrec in[] = {
        {.op = PC_WAL_SET,
         .stamp = 7,
         .expires_wall_ms = 1700000000000,
         .key = "k\0y",
         .klen = 3,
         .val = "va\0lue",
         .vlen = 6},
        {.op = PC_WAL_COUNTER, .stamp = 0xfffffffe, .key = "ctr", .klen = 3, .counter = -42},
        {.op = PC_WAL_DEL, .stamp = 2, .key = "", .klen = 0},
        {.op = PC_WAL_EXPIRE, .stamp = 3, .expires_wall_ms = 5, .key = "e", .klen = 1},
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        size_t vlen = in[i].op == PC_WAL_COUNTER ? 8 : in[i].vlen;
        size_t n = pc_jrec_encode(buf, &in[i]);
        assert_int_equal(n, pc_jrec_size(in[i].klen, vlen));
        pc_jrec out;
        const char *why = NULL;
        assert_int_equal(pc_jrec_decode(buf, n, &out, &why), 0);
        assert_int_equal(out.op, in[i].op);
        assert_int_equal(out.stamp, in[i].stamp);
        assert_int_equal(out.expires_wall_ms, in[i].expires_wall_ms);
        assert_int_equal(out.klen, in[i].klen);
        assert_memory_equal(out.key, in[i].key, in[i].klen);
        assert_int_equal(out.size, n);
        if (in[i].op == PC_WAL_SET)
            assert_memory_equal(out.val, in[i].val, in[i].vlen);
        if (in[i].op == PC_WAL_COUNTER)
            assert_int_equal(out.counter, -42);
        /* one byte short: incomplete; any flipped byte: rejected */
        assert_int_equal(pc_jrec_decode(buf, n - 1, &out, &why), PC_ECORRUPT);
        for (size_t b = 0; b < n; b++) {
            buf[b] ^= 0x40;
            assert_int_equal(pc_jrec_decode(buf, n, NULL, NULL), PC_ECORRUPT);
            buf[b] ^= 0x40;
        }
    }
    /* a bad record still names its key when the header is readable */
    pc_jrec r = {.op = PC_WAL_SET, .key = "named", .klen = 5, .val = "v", .vlen = 1};
    size_t n = pc_jrec_encode(buf, &r);
    buf[n - 1] ^= 1;
    pc_jrec out;
    const char *why = NULL;
    assert_int_equal(pc_jrec_decode(buf, n, &out, &why), PC_ECORRUPT);
    assert_string_equal(why, "checksum mismatch");
    assert_int_equal(out.klen, 5);
    assert_memory_equal(out.key, "named", 5);

    /* golden bytes: the worked examples of docs/journal-format.md §3 */
    pc_jrec g = {.op = PC_WAL_SET, .stamp = 2, .key = "k", .klen = 1, .val = "v", .vlen = 1};
    static const uint8_t g1[42] = {0x93, 0x4a, 0x52, 0x4e, 0x2a, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01,
                                   0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
                                   0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x6b,
                                   0x76, 0x86, 0x2f, 0xba, 0x16, 0x24, 0xab, 0x6c, 0x51};
    assert_int_equal(pc_jrec_encode(buf, &g), sizeof g1);
    assert_memory_equal(buf, g1, sizeof g1);
    pc_jrec c = {.op = PC_WAL_COUNTER,
                 .stamp = 7,
                 .expires_wall_ms = 1700000000000,
                 .key = "ctr",
                 .klen = 3,
                 .counter = -2};
    static const uint8_t g2[51] = {0x93, 0x4a, 0x52, 0x4e, 0x33, 0x00, 0x00, 0x00, 0x02, 0x00, 0x03,
                                   0x00, 0x08, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00,
                                   0x00, 0x00, 0x00, 0x68, 0xe5, 0xcf, 0x8b, 0x01, 0x00, 0x00, 0x63,
                                   0x74, 0x72, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x89,
                                   0xaa, 0x45, 0x4b, 0xb9, 0x35, 0x78, 0x11};
    assert_int_equal(pc_jrec_encode(buf, &c), sizeof g2);
    assert_memory_equal(buf, g2, sizeof g2);
}

static void test_format_header_and_names(void **state)
{
    (void)state;
    uint8_t b[PC_JSEG_HDR_SIZE];
    pc_jseg_hdr h = {.pid = 4242,
                     .epoch = 0x0000000300000001ull,
                     .boot_gen = 3,
                     .created_wall_ms = 1700000000123,
                     .coll_len = 7};
    memcpy(h.coll, "a.b-c_d", 8);
    pc_jseg_hdr_encode(b, &h);
    /* golden bytes (docs/journal-format.md §2) for collection "default" */
    pc_jseg_hdr gh = h;
    memcpy(gh.coll, "default", 8);
    uint8_t gb[PC_JSEG_HDR_SIZE];
    pc_jseg_hdr_encode(gb, &gh);
    static const uint8_t g48[48] = {0x89, 0x50, 0x43, 0x4a, 0x4e, 0x4c, 0x0d, 0x0a, 0x01, 0x00,
                                    0x80, 0x00, 0x92, 0x10, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
                                    0x03, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00,
                                    0x00, 0x00, 0x7b, 0x68, 0xe5, 0xcf, 0x8b, 0x01, 0x00, 0x00,
                                    0x07, 0x64, 0x65, 0x66, 0x61, 0x75, 0x6c, 0x74};
    static const uint8_t gsum[8] = {0x4e, 0xa5, 0x36, 0xbe, 0x7c, 0xfd, 0x8e, 0xde};
    assert_memory_equal(gb, g48, sizeof g48);
    for (size_t i = 48; i < 120; i++)
        assert_int_equal(gb[i], 0);
    assert_memory_equal(gb + 120, gsum, sizeof gsum);
    pc_jseg_hdr o;
    const char *why = NULL;
    assert_int_equal(pc_jseg_hdr_decode(b, sizeof b, &o, &why), 0);
    assert_int_equal(o.version, PC_JOURNAL_VERSION);
    assert_int_equal(o.pid, 4242);
    assert_int_equal(o.epoch, h.epoch);
    assert_int_equal(o.boot_gen, 3);
    assert_int_equal(o.created_wall_ms, h.created_wall_ms);
    assert_string_equal(o.coll, "a.b-c_d");
    assert_int_equal(pc_jseg_hdr_decode(b, sizeof b - 1, &o, &why), PC_ECORRUPT);
    b[50] ^= 1;
    assert_int_equal(pc_jseg_hdr_decode(b, sizeof b, &o, &why), PC_ECORRUPT);
    assert_string_equal(why, "segment header checksum mismatch");
    b[50] ^= 1;
    /* a newer version is PC_EFORMAT once the checksum holds */
    b[8] = 2;
    uint64_t sum = XXH3_64bits(b, 120);
    memcpy(b + 120, &sum, 8);
    assert_int_equal(pc_jseg_hdr_decode(b, sizeof b, &o, &why), PC_EFORMAT);

    char cn[PC_COLL_NAME_MAX + 1];
    uint64_t e = 0;
    assert_int_equal(pc_jseg_name_parse("default.0000000100000000.123.wal", cn, sizeof cn, &e), 0);
    assert_string_equal(cn, "default");
    assert_int_equal(e, 0x100000000ull);
    assert_int_equal(pc_jseg_name_parse("a.b.00000001000000ff.9-2.wal", cn, sizeof cn, &e), 0);
    assert_string_equal(cn, "a.b");
    assert_int_equal(e, 0x1000000ffull);
    static const char *const bad[] = {
        "default.0000000100000000.123.wa",   "default.000000010000000.123.wal",
        ".0000000100000000.123.wal",         "default.0000000100000000..wal",
        "default.00000001000000G0.123.wal",  "default.0000000100000000.12x.wal",
        "default.0000000100000000.-1.wal",   "default.0000000100000000.1-.wal",
        "default.0000000100000000.1--2.wal", "0000000100000000.1.wal",
        "x.0000000100000000.1.wal.tmp",      ".wal"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(pc_jseg_name_parse(bad[i], cn, sizeof cn, &e), PC_EINVAL);

    unsigned mode = 9;
    assert_int_equal(pc_journal_mode_parse("everysec", &mode), 0);
    assert_int_equal(mode, PC_JOURNAL_EVERYSEC);
    assert_int_equal(pc_journal_mode_parse("always", &mode), 0);
    assert_int_equal(mode, PC_JOURNAL_ALWAYS);
    assert_int_equal(pc_journal_mode_parse("Always", &mode), PC_EINVAL);
    assert_string_equal(pc_journal_mode_name(PC_JOURNAL_OFF), "off");
}

/* ---- hostile segment images ----------------------------------------------------------
 * A valid segment is mutated (flipped bytes, cuts, inserted junk, fake
 * markers) and scanned from a buffer that ends against a PROT_NONE page, so
 * any read past the end faults. The scanner must account for every byte:
 * valid records and bad runs tile the file after the header exactly. */

struct tile {
    size_t len, covered, records, torn;
    int order_ok;
    uint64_t next;
};

static int tile_rec(void *ctx, const pc_jrec *r, uint64_t off)
{
    struct tile *t = ctx;
    t->order_ok &= off == t->next;
    t->next = off + r->size;
    t->covered += r->size;
    t->records++;
    assert_true(off + r->size <= t->len);
    return 0;
}

static void tile_bad(void *ctx, uint64_t off, uint64_t len, int torn, const pc_jrec *partial,
                     const char *why)
{
    struct tile *t = ctx;
    assert_non_null(why);
    t->order_ok &= off == t->next;
    t->next = off + len;
    t->covered += len;
    t->torn += torn != 0;
    assert_true(off + len <= t->len);
    if (torn)
        assert_int_equal(off + len, t->len);
    if (partial != NULL && partial->key != NULL)
        assert_true((const uint8_t *)partial->key + partial->klen >= (const uint8_t *)partial->key);
}

static void test_scan_hostile(void **state)
{
    (void)state;
    /* a clean image: header + 40 records of assorted shapes */
    size_t cap = 64 * 1024;
    uint8_t *img = malloc(cap);
    assert_non_null(img);
    pc_jseg_hdr h = {.pid = 1, .epoch = 1ull << 32, .boot_gen = 1, .coll_len = 7};
    memcpy(h.coll, "default", 8);
    pc_jseg_hdr_encode(img, &h);
    size_t len = PC_JSEG_HDR_SIZE;
    char val[300];
    memset(val, 'v', sizeof val);
    for (unsigned i = 0; i < 40; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "key%u", i);
        pc_jrec r = {.op = 1 + (int)(i % 4), .stamp = i, .key = k, .klen = (size_t)kl};
        if (r.op == PC_WAL_SET) {
            r.val = val;
            r.vlen = (i * 37) % sizeof val;
        }
        if (r.op == PC_WAL_COUNTER)
            r.counter = -(int64_t)i;
        if (r.op == PC_WAL_EXPIRE)
            r.expires_wall_ms = 1700000000000 + i;
        len += pc_jrec_encode(img + len, &r);
    }
    /* the scan buffer: pages ending at a PROT_NONE guard */
    size_t page = (size_t)sysconf(_SC_PAGESIZE), span = ((cap + page - 1) / page + 1) * page;
    uint8_t *area =
        mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(area != MAP_FAILED);
    assert_int_equal(mprotect(area + span, page, PROT_NONE), 0);
    uint8_t *work = malloc(cap);
    assert_non_null(work);
    rng_state = 0xfeedfacecafebeefull;
    for (unsigned it = 0; it < 20000; it++) {
        size_t n = len;
        memcpy(work, img, len);
        unsigned muts = 1 + (unsigned)(rnd() % 4);
        for (unsigned m = 0; m < muts; m++) {
            uint64_t x = rnd();
            size_t at = PC_JSEG_HDR_SIZE + (size_t)((x >> 8) % (n - PC_JSEG_HDR_SIZE + 1));
            switch (x % 5) {
            case 0: /* flip a byte */
                if (at < n)
                    work[at] ^= (uint8_t)(1u << ((x >> 40) % 8));
                break;
            case 1: /* cut */
                n = at;
                break;
            case 2: /* junk in the middle */
                if (n + 64 < cap) {
                    memmove(work + at + 64, work + at, n - at);
                    for (size_t b = 0; b < 64; b++)
                        work[at + b] = (uint8_t)rnd();
                    n += 64;
                }
                break;
            case 3: /* a fake marker with a wild length */
                if (at + 8 <= n) {
                    memcpy(work + at, "\x93JRN", 4);
                    uint32_t wild = (uint32_t)(x >> 32);
                    memcpy(work + at + 4, &wild, 4);
                }
                break;
            default: /* a length field off by a little */
                if (at + 8 <= n)
                    work[at + 4] = (uint8_t)(work[at + 4] + 1);
                break;
            }
            if (n < PC_JSEG_HDR_SIZE)
                n = PC_JSEG_HDR_SIZE;
        }
        uint8_t *buf = area + span - n; /* the last byte is right before the guard */
        memcpy(buf, work, n);
        struct tile t = {.len = n, .order_ok = 1, .next = PC_JSEG_HDR_SIZE};
        pc_jscan_ops ops = {.record = tile_rec, .bad = tile_bad};
        uint64_t end = 0;
        assert_int_equal(pc_jseg_scan(buf, n, &ops, &t, NULL, &end), 0);
        assert_true(t.order_ok);
        assert_int_equal(t.covered, n - PC_JSEG_HDR_SIZE); /* every byte accounted for */
        assert_true(t.torn <= 1);
        assert_true(end <= n);
        if (t.torn == 0)
            assert_int_equal(end, n);
    }
    /* a header that is not one, and short images, from the guard's edge */
    for (size_t n = 0; n <= PC_JSEG_HDR_SIZE; n++) {
        uint8_t *buf = area + span - n;
        memcpy(buf, img, n);
        int rc = pc_jseg_scan(buf, n, NULL, NULL, NULL, NULL);
        assert_int_equal(rc, n == PC_JSEG_HDR_SIZE ? 0 : PC_ECORRUPT);
    }
    munmap(area, span + page);
    free(work);
    free(img);
}

static void test_open_errors(void **state)
{
    (void)state;
    pc_cache *c = new_cache("default", 16);
    pc_journal_config cfg;
    pc_journal_config_init(&cfg);
    pc_journal *j = NULL;
    cfg.dir = tmpdir;
    assert_int_equal(pc_journal_open(c, &cfg, &j), PC_EINVAL); /* boot_gen 0 */
    cfg.boot_gen = 1ull << 32;
    assert_int_equal(pc_journal_open(c, &cfg, &j), PC_EINVAL);
    cfg.boot_gen = 1;
    cfg.dir = "/nonexistent/pcache-store";
    cfg.log = log_capture;
    assert_int_equal(pc_journal_open(c, &cfg, &j), PC_EIO);
    assert_non_null(strstr(logbuf, "mkdir /nonexistent/pcache-store/journal: No such file"));
    assert_null(j);
    pc_cache_destroy(c);
}

/* ---- every operation through a replay --------------------------------------------------- */

static void do_all_ops(pc_coll *co, int *expired_keys)
{
    char big_key[PC_KEY_MAX];
    memset(big_key, 'K', sizeof big_key);
    char *big = malloc(PC_VALUE_MAX);
    assert_non_null(big);
    for (size_t i = 0; i < PC_VALUE_MAX; i++)
        big[i] = (char)(i * 7);
    int64_t r;
    assert_int_equal(pc_set(co, "plain", 5, "v1", 2, 0, 0), 0);
    assert_int_equal(pc_set(co, "plain", 5, "v2", 2, 0, 0), 0);
    assert_int_equal(pc_set(co, "ttl", 3, "t", 1, 3600000, 0), 0);
    assert_int_equal(pc_set(co, "refresh", 7, "same", 4, 1000, 0), 0);
    assert_int_equal(pc_set(co, "refresh", 7, "same", 4, 7200000, 0), 0); /* TTL-only */
    assert_int_equal(pc_set(co, "keepttl", 7, "a", 1, 600000, 0), 0);
    assert_int_equal(pc_set(co, "keepttl", 7, "b", 1, 0, PC_SET_KEEPTTL), 0);
    assert_int_equal(pc_set(co, "nx", 2, "first", 5, 0, PC_SET_NX), 0);
    assert_int_equal(pc_set(co, "nx", 2, "second", 6, 0, PC_SET_NX), PC_EEXIST);
    assert_int_equal(pc_set(co, "xx", 2, "no", 2, 0, PC_SET_XX), PC_ENOTFOUND);
    assert_int_equal(pc_add(co, "ctr", 3, 5, 0, &r), 0);
    assert_int_equal(pc_sub(co, "ctr", 3, 12, 0, &r), 0);
    assert_int_equal(r, -7);
    assert_int_equal(pc_set(co, "num", 3, "41", 2, 0, 0), 0);
    assert_int_equal(pc_add(co, "num", 3, 1, 900000, &r), 0); /* string -> counter */
    assert_int_equal(pc_set_counter(co, "sc", 2, INT64_MIN, 0), 0);
    assert_int_equal(pc_set_counter(co, "ctr2str", 7, 5, 0), 0);
    assert_int_equal(pc_set(co, "ctr2str", 7, "text", 4, 0, 0), 0);
    assert_int_equal(pc_set(co, "gone", 4, "x", 1, 0, 0), 0);
    assert_int_equal(pc_remove(co, "gone", 4), 0);
    assert_int_equal(pc_remove(co, "never", 5), PC_ENOTFOUND);
    assert_int_equal(pc_set(co, "exp", 3, "e", 1, 0, 0), 0);
    assert_int_equal(pc_expire(co, "exp", 3, 1800000), 0);
    assert_int_equal(pc_set(co, "persist", 7, "p", 1, 5000, 0), 0);
    assert_int_equal(pc_expire(co, "persist", 7, 0), 0);
    assert_int_equal(pc_set(co, "bin\0key\xff", 8, "\0\1\2", 3, 0, 0), 0);
    assert_int_equal(pc_set(co, "", 0, "empty key", 9, 0, 0), 0);
    assert_int_equal(pc_set(co, "emptyval", 8, "", 0, 0, 0), 0);
    assert_int_equal(pc_set(co, "big", 3, big, PC_VALUE_MAX, 0, 0), 0);
    assert_int_equal(pc_set(co, big_key, sizeof big_key, "bk", 2, 0, 0), 0);
    assert_int_equal(pc_set(co, "lapses", 6, "soon", 4, 30, 0), 0);
    assert_int_equal(pc_set(co, "lapses2", 7, "soon", 4, 0, 0), 0);
    assert_int_equal(pc_expire(co, "lapses2", 7, 30), 0);
    assert_int_equal(pc_add(co, "lapses3", 7, 1, 30, NULL), 0);
    *expired_keys = 3;
    for (int i = 0; i < 500; i++) { /* a few hundred records of mixed sizes */
        char k[32], v[64];
        int kl = snprintf(k, sizeof k, "bulk-%d", i % 97);
        int vl = snprintf(v, sizeof v, "value-%d-%0*d", i, i % 40, 0);
        assert_int_equal(pc_set(co, k, (size_t)kl, v, (size_t)vl, (i % 3) ? 0 : 3600000, 0), 0);
    }
    uint64_t cnt = 0;
    assert_int_equal(pc_del_glob(co, "bulk-1*", 6, &cnt), 0);
    assert_true(cnt > 0);
    assert_int_equal(pc_ttl_glob(co, "bulk-2*", 6, 1234567, &cnt), 0);
    free(big);
}

static void roundtrip(unsigned mode)
{
    pc_cache *a = new_cache("default;other", 64);
    pc_journal *ja = new_journal(a, 1);
    pc_coll *ca = coll_of(a, "default");
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_coll_set_journal(ca, mode), 0);
    int expired_keys = 0;
    do_all_ops(ca, &expired_keys);
    /* an unjournaled collection leaves no segment */
    assert_int_equal(pc_set(coll_of(a, "other"), "o", 1, "o", 1, 0, 0), 0);
    if (mode == PC_JOURNAL_ALWAYS) {
        /* nothing left in the ring: every record is in the file, synced,
         * before pc_set returns */
        assert_int_equal(ja->slot->head, ja->slot->tail);
        assert_int_equal(ja->slot->seg[0].synced, ja->slot->seg[0].bytes);
    }
    pc_journal_close(ja);
    char names[4][256];
    assert_int_equal(list_segments(NULL, names, 4), 1);
    usleep(60 * 1000); /* the 30 ms keys lapse */

    pc_cache *b = new_cache("default;other", 64);
    pc_journal *jb = new_journal(b, 2);
    pc_coll *cb = coll_of(b, "default");
    pc_journal_replay_stats st;
    log_reset();
    assert_int_equal(pc_journal_replay_run(jb, cb, 0, &st), 0);
    assert_int_equal(st.segments, 1);
    assert_int_equal(st.bad_records + st.torn_tails + st.bad_segments + st.errors, 0);
    assert_int_equal(st.expired, (uint64_t)expired_keys);
    assert_true(st.set > 0 && st.counter >= 3 && st.del > 0);
    assert_non_null(strstr(logbuf, "collection 'default': read 1 segment(s)"));
    assert_same_table(ca, cb);
    assert_int_equal(pc_probe(cb, "lapses", 6, NULL), PC_ENOTFOUND);
    pc_meta m;
    assert_int_equal(pc_probe(cb, "persist", 7, &m), 0);
    assert_int_equal(m.ttl_ms, -1);
    assert_int_equal(pc_probe(cb, "refresh", 7, &m), 0);
    assert_true(m.ttl_ms > 7000000);
    /* replay does not journal: no segment of boot 2 appeared */
    pc_journal_close(jb);
    assert_int_equal(list_segments(NULL, names, 4), 1);
    pc_cache_destroy(a);
    pc_cache_destroy(b);
}

static void test_roundtrip_everysec(void **state)
{
    (void)state;
    roundtrip(PC_JOURNAL_EVERYSEC);
}

static void test_roundtrip_always(void **state)
{
    (void)state;
    roundtrip(PC_JOURNAL_ALWAYS);
}

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
        fprintf(stderr, "writer %u op %u: %s\n", id, what, pc_strerror(rc));
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

/* Forks nw writers doing ops operations op each (ticking the journal every
 * 256); they flush and exit. */
static void run_writers(pc_journal *j, pc_coll *co, unsigned nw, unsigned ops, op_fn op,
                        pid_t *pids)
{
    for (unsigned w = 0; w < nw; w++) {
        pid_t p = fork();
        assert_true(p >= 0);
        if (p == 0) {
            child_init();
            rng_state = 0x1234567ull * (w + 1) + (uint64_t)getpid();
            for (unsigned n = 0; n < ops; n++) {
                op(co, w, n);
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

static void test_multiproc_replay(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default", 64);
    pc_journal *ja = new_journal(a, 5);
    pc_coll *ca = coll_of(a, "default");
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_coll_set_journal(ca, PC_JOURNAL_EVERYSEC), 0);
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

    pc_cache *b = new_cache("default", 64);
    pc_journal *jb = new_journal(b, 6);
    pc_coll *cb = coll_of(b, "default");
    pc_journal_replay_stats st;
    assert_int_equal(pc_journal_replay_run(jb, cb, 0, &st), 0);
    assert_int_equal(st.segments, 5);
    assert_int_equal(st.bad_records + st.torn_tails + st.errors, 0);
    assert_true(st.records > 60000);
    assert_same_table(ca, cb);
    pc_journal_close(jb);
    pc_journal_close(ja);
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
    int64_t now = pc_jwall_now_ms();
    for (size_t i = 0; i < s->kv.n; i++)
        if (s->kv.v[i].ttl_ms >= 0)
            s->kv.v[i].ttl_ms = now + (s->kv.v[i].ttl_ms > 0 ? s->kv.v[i].ttl_ms : 1);
    assert_int_equal(pc_journal_retire(j, co, epoch, NULL), 0);
}

/* A store's load: every record goes through the filter. ttl_ms holds the
 * absolute deadline (or -1). */
static void fake_load(const struct snap *s, pc_coll *co, pc_journal_replay *rp, unsigned *skipped)
{
    int64_t now = pc_jwall_now_ms();
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

static void test_save_while_writing(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default", 64);
    pc_journal *ja = new_journal(a, 7);
    pc_coll *ca = coll_of(a, "default");
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_coll_set_journal(ca, PC_JOURNAL_EVERYSEC), 0);
    for (int i = 0; i < 2000; i++)
        random_op(ca, 99, (unsigned)i);
    struct snap s;
    memset(&s, 0, sizeof s);
    fake_save(ja, ca, &s); /* a first snapshot before the writers */
    pid_t pids[3];
    run_writers(ja, ca, 3, 60000, random_op, pids);
    /* saves while they write; the last one is the snapshot that counts */
    for (int i = 0; i < 4; i++) {
        usleep(20 * 1000);
        fake_save(ja, ca, &s);
    }
    wait_writers(3, pids);
    assert_int_equal(pc_journal_flush(ja, 1), 0);
    /* retire left no segment older than the snapshot's epoch */
    char names[64][256];
    unsigned n = list_segments("default", names, 64);
    assert_true(n >= 1 && n <= 64);
    for (unsigned i = 0; i < n; i++) {
        uint64_t e;
        char cn[64];
        assert_int_equal(pc_jseg_name_parse(names[i], cn, sizeof cn, &e), 0);
        assert_true(e >= s.epoch);
    }

    pc_cache *b = new_cache("default", 64);
    pc_journal *jb = new_journal(b, 8);
    pc_coll *cb = coll_of(b, "default");
    pc_journal_replay *rp = NULL;
    assert_int_equal(pc_journal_replay_open(jb, cb, s.epoch, 0, &rp), 0);
    unsigned skipped = 0;
    fake_load(&s, cb, rp, &skipped);
    assert_int_equal(pc_journal_replay_apply(rp), 0);
    pc_journal_replay_stats st;
    pc_journal_replay_stats_get(rp, &st);
    pc_journal_replay_close(rp);
    assert_int_equal(st.bad_records + st.torn_tails + st.errors, 0);
    assert_int_equal(st.snap_skipped, skipped);
    assert_true(skipped > 0); /* keys written after the last walk */
    assert_same_table(ca, cb);
    kv_free(&s.kv);
    pc_journal_close(jb);
    pc_journal_close(ja);
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

static int gate_hook(void *ctx, const pc_wal_rec *r)
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
    pc_coll *ca = coll_of(a, "default");
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_coll_set_journal(ca, PC_JOURNAL_ALWAYS), 0);
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
        if (pc_wal_hook(a, gate_hook, ja) != 0)
            _exit(2);
        int rc = op == PC_WAL_COUNTER ? pc_set_counter(ca, "stale", 5, 77, 0)
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

    pc_cache *b = new_cache("default", 16);
    pc_journal *jb = new_journal(b, 2);
    pc_coll *cb = coll_of(b, "default");
    pc_journal_replay *rp = NULL;
    assert_int_equal(pc_journal_replay_open(jb, cb, s.epoch, 0, &rp), 0);
    unsigned skipped = 0;
    fake_load(&s, cb, rp, &skipped);
    assert_int_equal(pc_journal_replay_apply(rp), 0);
    pc_journal_replay_close(rp);
    assert_int_equal(pc_probe(cb, "stale", 5, NULL), PC_ENOTFOUND);
    kv_free(&s.kv);
    pc_journal_close(jb);
    pc_journal_close(ja);
    pc_cache_destroy(a);
    pc_cache_destroy(b);
}

static void test_regress_stale_set_across_save(void **state)
{
    (void)state;
    stale_across_save(PC_WAL_SET);
}

static void test_regress_stale_counter_across_save(void **state)
{
    (void)state;
    stale_across_save(PC_WAL_COUNTER);
}

/* ---- with the real snapshot store ----------------------------------------------- */

static pc_store *open_store(void)
{
    pc_store_config cfg;
    pc_store_config_init(&cfg);
    cfg.flags = PC_STORE_CREATE;
    cfg.log = log_capture;
    cfg.log_level = PC_LOG_WARN;
    pc_store *s = NULL;
    char err[256] = "";
    if (pc_store_open(tmpdir, &cfg, &s, err, sizeof err) != 0)
        fail_msg("pc_store_open: %s", err);
    return s;
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
    pc_coll *ca = coll_of(a, "default");
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_coll_set_journal(ca, PC_JOURNAL_EVERYSEC), 0);
    for (int i = 0; i < 3000; i++)
        random_op(ca, 99, (unsigned)i);
    unsigned retired = 0, total_retired = 0;
    assert_int_equal(pc_journal_save(ja, s, ca, NULL, &retired), 0);
    total_retired += retired;
    pid_t pids[3];
    run_writers(ja, ca, 3, 50000, random_op, pids);
    for (int i = 0; i < 3; i++) { /* saves while they write */
        usleep(30 * 1000);
        pc_store_save_result sr;
        assert_int_equal(pc_journal_save(ja, s, ca, &sr, &retired), 0);
        total_retired += retired;
    }
    wait_writers(3, pids);
    assert_int_equal(pc_journal_flush(ja, 1), 0);
    assert_true(total_retired > 0);
    pc_store_coll_meta meta;
    assert_int_equal(pc_store_coll_meta_get(s, "default", &meta), 0);
    assert_int_equal(meta.boot_gen, boot1);
    assert_true(meta.journal_epoch > (boot1 << 32));

    /* restart */
    assert_int_equal(pc_store_next_boot_gen(s, &boot2), 0);
    assert_int_equal(boot2, boot1 + 1);
    pc_cache *b = new_cache("default", 64);
    pc_journal *jb = new_journal(b, boot2);
    pc_coll *cb = coll_of(b, "default");
    pc_journal_restore_result rr;
    assert_int_equal(pc_journal_restore(jb, s, cb, &rr), 0);
    assert_int_equal(rr.snapshot, 1);
    assert_int_equal(rr.load_rc, 0);
    assert_int_equal(rr.replay.bad_records + rr.replay.torn_tails + rr.replay.errors, 0);
    assert_true(rr.replay.snap_skipped > 0);                  /* the journal superseded some */
    assert_true(rr.load.loaded + rr.replay.snap_skipped > 0); /* and the snapshot held the rest */
    assert_same_table(ca, cb);
    pc_journal_close(jb);
    pc_journal_close(ja);
    pc_cache_destroy(a);
    pc_cache_destroy(b);
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
#define GROW_STABLE 600u /* after them in grow_keys: written once, by the parent */
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
        if (rc == 0 && pc_jcoarse_ms() >= next_sync) {
            rc = pc_journal_sync_all(j);
            next_sync = pc_jcoarse_ms() + 100;
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
    pc_coll *ca = coll_of(a, "default");
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_coll_set_journal(ca, PC_JOURNAL_EVERYSEC), 0);
    memset(sh, 0, sizeof *sh);
    for (unsigned i = 0; i < GROW_STABLE; i++)
        grow_stable_set(ca, i);
    for (unsigned i = 0; i < 200; i++)
        grow_op(ca, 99, i);
    assert_int_equal(pc_journal_save(ja, s, ca, NULL, NULL), 0); /* on the small table */
    atomic_store(&sh->ops, 0);
    pid_t maint = start_maintainer(a, ja, sh);
    for (int64_t t0 = pc_jcoarse_ms(); atomic_load(&sh->calls) == 0;) { /* it splits */
        assert_true(pc_jcoarse_ms() < t0 + 10000);
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
    atomic_store(&sh->stop, 1);
    int st = 0;
    assert_int_equal(waitpid(maint, &st, 0), maint);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("maintainer status %#x: %s", st, pc_strerror(atomic_load(&sh->rc)));
    assert_int_equal(pc_journal_flush(ja, 1), 0);
    pc_coll_stats cs;
    assert_int_equal(pc_coll_stats_get(ca, &cs), 0);
    t->buckets = cs.buckets;
    usleep(150 * 1000); /* the short TTLs lapse */

    assert_int_equal(pc_store_next_boot_gen(s, &boot2), 0);
    pc_cache *b = new_cache("default=12", 64);
    pc_journal *jb = new_journal(b, boot2);
    pc_coll *cb = coll_of(b, "default");
    pc_journal_restore_result rr;
    assert_int_equal(pc_journal_restore(jb, s, cb, &rr), 0);
    assert_int_equal(rr.snapshot, 1);
    assert_int_equal(rr.load_rc, 0);
    assert_int_equal(rr.replay.bad_records + rr.replay.torn_tails + rr.replay.errors, 0);
    assert_true(rr.replay.snap_skipped > 0); /* the journal superseded snapshot records */
    t->snap_skipped += rr.replay.snap_skipped;
    t->records += rr.replay.records;
    assert_same_table(ca, cb);
    pc_journal_close(jb);
    pc_journal_close(ja);
    pc_cache_destroy(a);
    pc_cache_destroy(b);
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
    const int64_t t0 = pc_jcoarse_ms();
    for (int64_t end = t0 + race_ms(); pc_jcoarse_ms() < end || rounds < 2; rounds++) {
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
        (double)(pc_jcoarse_ms() - t0) / 1000, rounds, t.saves, t.overlapped, t.last_overlapped,
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
    pc_coll *ca = coll_of(a, "default");
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_coll_set_journal(ca, PC_JOURNAL_ALWAYS), 0);
    for (int i = 0; i < 500; i++)
        random_op(ca, 1, (unsigned)i);
    pc_journal_close(ja);
    pc_cache *b = new_cache("default", 16);
    pc_journal *jb = new_journal(b, 2);
    pc_coll *cb = coll_of(b, "default");
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

/* ---- the filter's decisions ------------------------------------------------------- */

struct stamps {
    struct {
        char key[32];
        uint32_t vstamp, xstamp;
        int op, has_x;
    } k[16];
    int n;
};

static int collect_stamps(void *ctx, const pc_journal_winner *w)
{
    struct stamps *s = ctx;
    assert_true(s->n < 16);
    snprintf(s->k[s->n].key, sizeof s->k[s->n].key, "%.*s", (int)w->klen, (const char *)w->key);
    s->k[s->n].vstamp = w->stamp;
    s->k[s->n].xstamp = w->expire_stamp;
    s->k[s->n].op = w->op;
    s->k[s->n].has_x = w->has_expire;
    assert_int_equal(w->boot_gen, w->op != 0 ? 3 : 0);
    s->n++;
    return 0;
}

static const struct stamps *stamps_find(const struct stamps *s, const char *key, uint32_t *v,
                                        uint32_t *x)
{
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->k[i].key, key) == 0) {
            *v = s->k[i].vstamp;
            *x = s->k[i].xstamp;
            return s;
        }
    }
    fail_msg("no journal state for %s", key);
    return NULL;
}

/* The store's side of one snapshot record: the filter's answer, then a load
 * as the store does it (expired records are dropped unless LOAD_ANY). */
static int snap_record(pc_journal_replay *rp, pc_coll *co, const char *key, const char *val,
                       uint32_t stamp, uint64_t boot_gen, int expired)
{
    int f = pc_journal_replay_filter(rp, key, strlen(key), stamp, boot_gen);
    if (f == PC_JOURNAL_LOAD_ANY || (f == PC_JOURNAL_LOAD && !expired))
        assert_int_equal(pc_set(co, key, strlen(key), val, strlen(val), expired ? 0 : 600000, 0),
                         0);
    return f;
}

static void assert_value(pc_coll *co, const char *key, const char *want, int64_t ttl_min,
                         int64_t ttl_max)
{
    char got[64];
    size_t gl = 0, need = 0;
    pc_meta m;
    int rc = pc_get_buf(co, key, strlen(key), got, sizeof got, &gl, &need, &m);
    if (want == NULL) {
        assert_int_equal(rc, PC_ENOTFOUND);
        return;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(gl, strlen(want));
    assert_memory_equal(got, want, gl);
    assert_true(m.ttl_ms >= ttl_min && m.ttl_ms <= ttl_max);
}

static void test_filter_cases(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default", 16);
    pc_journal *ja = new_journal(a, 3);
    pc_coll *ca = coll_of(a, "default");
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_coll_set_journal(ca, PC_JOURNAL_ALWAYS), 0);
    /* xonly, xnosnap: only their EXPIRE records will be in the journal
     * (their SETs go to a segment a save retires) */
    assert_int_equal(pc_set(ca, "xonly", 5, "journal", 7, 0, 0), 0);
    assert_int_equal(pc_set(ca, "xnosnap", 7, "journal", 7, 0, 0), 0);
    uint64_t e = 0;
    unsigned removed = 0;
    assert_int_equal(pc_journal_begin_save(ja, ca, &e), 0);
    assert_int_equal(pc_journal_retire(ja, ca, e, &removed), 0);
    assert_int_equal(removed, 1);
    /* the journal's side; the snapshot records are made up below with
     * stamps just before or after these */
    assert_int_equal(pc_expire(ca, "xonly", 5, 3600000), 0);
    assert_int_equal(pc_expire(ca, "xnosnap", 7, 3600000), 0);
    assert_int_equal(pc_set(ca, "jlater", 6, "journal", 7, 0, 0), 0);
    assert_int_equal(pc_set(ca, "slater", 6, "journal", 7, 0, 0), 0);
    assert_int_equal(pc_set(ca, "del", 3, "x", 1, 0, 0), 0);
    assert_int_equal(pc_remove(ca, "del", 3), 0);
    assert_int_equal(pc_set(ca, "rearm", 5, "journal", 7, 0, 0), 0);
    assert_int_equal(pc_expire(ca, "rearm", 5, 3600000), 0);
    assert_int_equal(pc_set(ca, "lapse", 5, "journal", 7, 0, 0), 0);
    assert_int_equal(pc_expire(ca, "lapse", 5, 1), 0);
    assert_int_equal(pc_set(ca, "xold", 4, "journal", 7, 0, 0), 0);
    assert_int_equal(pc_expire(ca, "xold", 4, 3600000), 0);
    assert_int_equal(pc_set(ca, "oldboot", 7, "journal", 7, 0, 0), 0);
    assert_int_equal(pc_set(ca, "newboot", 7, "journal", 7, 0, 0), 0);
    pc_journal_close(ja);
    pc_cache_destroy(a);
    usleep(5 * 1000);

    pc_cache *b = new_cache("default", 16);
    pc_journal *jb = new_journal(b, 4);
    pc_coll *cb = coll_of(b, "default");
    pc_journal_replay *rp = NULL;
    assert_int_equal(pc_journal_replay_open(jb, cb, 0, 0, &rp), 0);
    struct stamps s = {.n = 0};
    assert_int_equal(pc_journal_replay_foreach(rp, collect_stamps, &s), 0);
    assert_int_equal(s.n, 10);
    uint32_t v = 0, x = 0;
    stamps_find(&s, "jlater", &v, &x);
    assert_int_equal(snap_record(rp, cb, "jlater", "snapshot", v - 2, 3, 0), PC_JOURNAL_SKIP);
    stamps_find(&s, "slater", &v, &x);
    assert_int_equal(snap_record(rp, cb, "slater", "snapshot", v + 2, 3, 0), PC_JOURNAL_LOAD);
    stamps_find(&s, "del", &v, &x);
    assert_int_equal(snap_record(rp, cb, "del", "snapshot", v - 2, 3, 0), PC_JOURNAL_SKIP);
    /* the snapshot saw the SET (same stamp) but not the later EXPIRE: its
     * record is loaded whatever its own expiry, and re-armed */
    stamps_find(&s, "rearm", &v, &x);
    assert_true((int32_t)(x - v) > 0);
    assert_int_equal(snap_record(rp, cb, "rearm", "snapshot", v, 3, 1), PC_JOURNAL_LOAD_ANY);
    stamps_find(&s, "lapse", &v, &x);
    assert_int_equal(snap_record(rp, cb, "lapse", "snapshot", v, 3, 0), PC_JOURNAL_LOAD_ANY);
    stamps_find(&s, "xold", &v, &x);
    assert_int_equal(snap_record(rp, cb, "xold", "snapshot", x + 2, 3, 0), PC_JOURNAL_LOAD);
    /* boot generations order before stamps */
    stamps_find(&s, "oldboot", &v, &x);
    assert_int_equal(snap_record(rp, cb, "oldboot", "snapshot", v + 1000, 2, 0), PC_JOURNAL_SKIP);
    stamps_find(&s, "newboot", &v, &x);
    assert_int_equal(snap_record(rp, cb, "newboot", "snapshot", v - 1000, 4, 0), PC_JOURNAL_LOAD);
    assert_int_equal(snap_record(rp, cb, "snaponly", "snapshot", 1, 3, 0), PC_JOURNAL_LOAD);
    /* only an EXPIRE in the journal, later than the snapshot's (expired)
     * record: loaded and re-armed */
    stamps_find(&s, "xonly", &v, &x);
    assert_int_equal(snap_record(rp, cb, "xonly", "snapshot", x - 2, 3, 1), PC_JOURNAL_LOAD_ANY);
    assert_int_equal(pc_journal_replay_apply(rp), 0);
    assert_int_equal(pc_journal_replay_apply(rp), PC_EINVAL); /* once */
    pc_journal_replay_stats st;
    pc_journal_replay_stats_get(rp, &st);
    pc_journal_replay_close(rp);
    assert_int_equal(st.snap_skipped, 3);
    assert_int_equal(st.snap_loaded, 7);
    assert_int_equal(st.expired, 1);
    assert_value(cb, "jlater", "journal", -1, -1);
    assert_value(cb, "slater", "snapshot", 590000, 600000);
    assert_value(cb, "del", NULL, 0, 0);
    assert_value(cb, "rearm", "snapshot", 3590000, 3600000);
    assert_value(cb, "lapse", NULL, 0, 0);
    assert_value(cb, "xold", "snapshot", 590000, 600000);
    assert_value(cb, "oldboot", "journal", -1, -1);
    assert_value(cb, "newboot", "snapshot", 590000, 600000);
    assert_value(cb, "snaponly", "snapshot", 590000, 600000);
    assert_value(cb, "xonly", "snapshot", 3590000, 3600000);
    assert_value(cb, "xnosnap", NULL, 0, 0); /* an EXPIRE alone sets nothing */
    pc_journal_close(jb);
    pc_cache_destroy(b);
}

/* ---- ordering rules on hand-written segments -------------------------------------
 * Segments written byte by byte from docs/journal-format.md (no writer
 * involved): stamps compare in serial-number order across a wrap, boot
 * generations before stamps, file order inside one segment, an EXPIRE only
 * when later than the value record, and segments below min_epoch unread. */

static void put_segment(const char *coll, uint64_t epoch, uint64_t boot_gen, uint32_t pid,
                        const pc_jrec *recs, unsigned n)
{
    char path[640];
    snprintf(path, sizeof path, "%s/journal", tmpdir);
    mkdir(path, 0750);
    snprintf(path, sizeof path, "%s/journal/%s.%016llx.%u.wal", tmpdir, coll,
             (unsigned long long)epoch, pid);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint8_t hdr[PC_JSEG_HDR_SIZE];
    pc_jseg_hdr h = {.pid = pid, .epoch = epoch, .boot_gen = boot_gen, .coll_len = strlen(coll)};
    memcpy(h.coll, coll, h.coll_len + 1);
    pc_jseg_hdr_encode(hdr, &h);
    assert_int_equal(fwrite(hdr, 1, sizeof hdr, f), sizeof hdr);
    for (unsigned i = 0; i < n; i++) {
        uint8_t buf[256];
        size_t sz = pc_jrec_encode(buf, &recs[i]);
        assert_int_equal(fwrite(buf, 1, sz, f), sz);
    }
    fclose(f);
}

#define SETREC(k, v, st, exp)                                                                      \
    {                                                                                              \
        .op = PC_WAL_SET, .stamp = (st), .expires_wall_ms = (exp), .key = (k), .klen = strlen(k),  \
        .val = (v), .vlen = strlen(v)                                                              \
    }
#define EXPREC(k, st, exp)                                                                         \
    {                                                                                              \
        .op = PC_WAL_EXPIRE, .stamp = (st), .expires_wall_ms = (exp), .key = (k),                  \
        .klen = strlen(k)                                                                          \
    }

static void test_order_rules(void **state)
{
    (void)state;
    int64_t past = pc_jwall_now_ms() - 1000, later = pc_jwall_now_ms() + 3600000;
    uint64_t e1 = 1ull << 32, e2 = 2ull << 32;
    const pc_jrec a[] = {
        SETREC("wrap", "before-wrap", 0xfffffff0u, 0),
        SETREC("boot", "boot-1", 100, 0),
        SETREC("file", "first", 10, 0),
        SETREC("file", "second", 9, 0), /* later in the file: wins */
        EXPREC("xv", 31, past),
        EXPREC("vx", 40, past),
        SETREC("rearm", "r", 50, past),
        EXPREC("rearm", 51, later),
    };
    const pc_jrec b[] = {
        SETREC("wrap", "after-wrap", 0x10u, 0),
        SETREC("xv", "v", 30, 0),
        SETREC("vx", "v", 41, 0),
    };
    const pc_jrec c[] = {SETREC("boot", "boot-2", 5, 0)};
    const pc_jrec old[] = {SETREC("ignored", "x", 1, 0)};
    put_segment("default", e1, 1, 100, a, sizeof a / sizeof a[0]);
    put_segment("default", e1, 1, 101, b, sizeof b / sizeof b[0]);
    put_segment("default", e2, 2, 100, c, 1);
    put_segment("default", 0x0000000100000000ull - 1, 1, 102, old, 1); /* below min_epoch */
    put_segment("other", e1, 1, 100, old, 1);                          /* another collection */

    pc_cache *bc = new_cache("default;other", 16);
    pc_journal *jb = new_journal(bc, 3);
    pc_coll *cb = coll_of(bc, "default");
    pc_journal_replay_stats st;
    assert_int_equal(pc_journal_replay_run(jb, cb, e1, &st), 0);
    assert_int_equal(st.segments, 3);
    assert_int_equal(st.records, 12);
    assert_value(cb, "wrap", "after-wrap", -1, -1);
    assert_value(cb, "boot", "boot-2", -1, -1);
    assert_value(cb, "file", "second", -1, -1);
    assert_value(cb, "xv", NULL, 0, 0);               /* the EXPIRE (past) is later: gone */
    assert_value(cb, "vx", "v", -1, -1);              /* the EXPIRE is older: ignored */
    assert_value(cb, "rearm", "r", 3590000, 3600000); /* an expired SET re-armed later */
    assert_value(cb, "ignored", NULL, 0, 0);
    pc_journal_close(jb);
    pc_cache_destroy(bc);
}

/* ---- torn tails, corrupt records, bad headers, I/O errors ------------------------- */

/* Writes n records "k<i>" = "value-<i>" through the engine (always) and
 * returns the segment's path and each record's offset. */
static void write_records(unsigned n, char *path, size_t cap, uint64_t *offs)
{
    pc_cache *a = new_cache("default", 16);
    pc_journal *ja = new_journal(a, 1);
    pc_coll *ca = coll_of(a, "default");
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_coll_set_journal(ca, PC_JOURNAL_ALWAYS), 0);
    uint64_t off = PC_JSEG_HDR_SIZE;
    for (unsigned i = 0; i < n; i++) {
        char k[16], v[32];
        int kl = snprintf(k, sizeof k, "k%u", i), vl = snprintf(v, sizeof v, "value-%u", i);
        assert_int_equal(pc_set(ca, k, (size_t)kl, v, (size_t)vl, 0, 0), 0);
        offs[i] = off;
        off += pc_jrec_size((size_t)kl, (size_t)vl);
    }
    offs[n] = off;
    pc_journal_close(ja);
    pc_cache_destroy(a);
    char names[4][256];
    assert_int_equal(list_segments(NULL, names, 4), 1);
    seg_path(names[0], path, cap);
    assert_int_equal(file_size(path), (off_t)off);
}

static pc_journal_replay_stats replay_fresh(unsigned flags, pc_cache **bout)
{
    pc_cache *b = new_cache("default", 16);
    pc_journal *jb = new_journal(b, 2);
    pc_journal_replay *rp = NULL;
    log_reset();
    assert_int_equal(pc_journal_replay_open(jb, coll_of(b, "default"), 0, flags, &rp), 0);
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
            pc_get_buf(coll_of(b, "default"), k, (size_t)kl, got, sizeof got, &gl, &need, NULL);
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

/* The segment stays a sequence of whole records when a write fails: the
 * process may write only 4 KiB (RLIMIT_FSIZE), the set that does not fit
 * gets PC_EIO. */
static void test_write_error(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default", 16);
    pc_journal *ja = new_journal(a, 1);
    pc_coll *ca = coll_of(a, "default");
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_coll_set_journal(ca, PC_JOURNAL_ALWAYS), 0);
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
    pc_coll *ca = coll_of(a, "default");
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_coll_set_journal(ca, PC_JOURNAL_EVERYSEC), 0);
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
    pc_coll *cd = coll_of(a, "default"), *cx = coll_of(a, "default.x"), *co = coll_of(a, "other");
    assert_int_equal(pc_journal_install(ja), 0);
    pc_coll *all[] = {cd, cx, co};
    for (int i = 0; i < 3; i++)
        assert_int_equal(pc_coll_set_journal(all[i], PC_JOURNAL_EVERYSEC), 0);
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
    assert_int_equal(pc_jseg_name_parse(names[0], cn, sizeof cn, &e), 0);
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

/* ---- the rings (journal_ring.c) ------------------------------------------------- */

static pc_journal *new_journal_cfg(pc_cache *c, uint64_t boot_gen, size_t ring, unsigned procs)
{
    pc_journal_config cfg;
    pc_journal_config_init(&cfg);
    cfg.dir = tmpdir;
    cfg.boot_gen = boot_gen;
    cfg.log = log_capture;
    cfg.log_level = PC_LOG_DEBUG;
    cfg.buffer_bytes = ring;
    cfg.max_procs = procs;
    pc_journal *j = NULL;
    assert_int_equal(pc_journal_open(c, &cfg, &j), 0);
    return j;
}

/* Many laps of the smallest ring, records of every size up to a few
 * hundred KiB in two collections (control items between them), the
 * drainer thread draining while the writer writes (and the writer draining
 * itself when the ring fills): the replay rebuilds exactly the table. */
static void test_ring_laps(void **state)
{
    (void)state;
    pc_cache *a = new_cache("default;other", 128);
    pc_journal *ja = new_journal_cfg(a, 1, 1, 0); /* rounded up to the minimum */
    pc_coll *cd = coll_of(a, "default"), *co = coll_of(a, "other");
    assert_true(ja->ring_bytes >= 2 * (uint64_t)PC_JREC_MAX_SIZE);
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_coll_set_journal(cd, PC_JOURNAL_EVERYSEC), 0);
    assert_int_equal(pc_coll_set_journal(co, PC_JOURNAL_EVERYSEC), 0);
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
        assert_int_equal(pc_journal_replay_run(jb, coll_of(b, names[i]), 0, &st), 0);
        assert_int_equal(st.bad_records + st.torn_tails + st.bad_segments + st.errors, 0);
        assert_same_table(coll_of(a, names[i]), coll_of(b, names[i]));
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
    pc_coll *ca = coll_of(a, "default");
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_coll_set_journal(ca, PC_JOURNAL_EVERYSEC), 0);
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
    assert_int_equal(pc_probe(coll_of(b, "default"), "c99", 3, NULL), 0);
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
    pc_coll *ca = coll_of(a, "default");
    assert_int_equal(pc_journal_install(ja), 0);
    assert_int_equal(pc_coll_set_journal(ca, PC_JOURNAL_EVERYSEC), 0);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_records),
        cmocka_unit_test(test_format_header_and_names),
        cmocka_unit_test(test_scan_hostile),
        cmocka_unit_test_setup_teardown(test_open_errors, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_roundtrip_everysec, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_roundtrip_always, setup_dir, teardown_dir),
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
        cmocka_unit_test_setup_teardown(test_filter_cases, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_order_rules, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_torn_tail, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_corrupt_middle, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_bad_header, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_write_error, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_fork_drops_parent_buffer, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_retire, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_ring_laps, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_ring_slots_exhausted, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_ring_consumer_killed, setup_dir, teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
