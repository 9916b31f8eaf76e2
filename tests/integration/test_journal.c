/*
 * test_journal.c - the write-ahead journal (storage/journal*.c,
 * docs/journal-format.md): its format and what a replay makes of it, in
 * one process. Forked writers and saves racing them are in
 * test_journal_race.c; damaged segments, failed writes, fork, retire and
 * the rings in test_journal_faults.c; kill -9 of writers in
 * test_journal_kill.c. Shared fixtures: journal_testlib.h.
 *
 *  - the format: records and segment headers round-trip against golden
 *    bytes, hostile bytes are rejected, segment names parse; mutated
 *    segment images scanned against a PROT_NONE page account for every
 *    byte (valid records and named bad runs tile the file);
 *  - every operation (SET, COUNTER through pc_add and pc_set_counter, DEL,
 *    EXPIRE, KEEPTTL/NX/XX sets, binary keys, empty and 1 MiB values, short
 *    TTLs that lapse before the replay) replays into a fresh cache equal to
 *    the live table, in both modes;
 *  - the snapshot filter's decisions (journal later, snapshot later, a
 *    later EXPIRE that re-arms or removes a snapshot record, deletes, boot
 *    generations);
 *  - ordering rules on segments written byte by byte: stamps across a
 *    wrap, boot generations before stamps, file order inside a segment, an
 *    EXPIRE only when later than the value record, min_epoch.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h> /* after the four headers it needs */

#include "journal_testlib.h"
#include "pc_journal_testing.h" /* the codec and the rings it inspects */
#include "pcache_journal.h"
#include "pcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* ---- the format ------------------------------------------------------------------- */

static void test_format_records(void **state)
{
    (void)state;
    uint8_t buf[PC_JREC_MIN_SIZE + 64];
    const pc_jrec in[] = {
        {.op = PC_MUT_SET,
         .stamp = 7,
         .expires_wall_ms = 1700000000000,
         .key = "k\0y",
         .klen = 3,
         .val = "va\0lue",
         .vlen = 6},
        {.op = PC_MUT_COUNTER, .stamp = 0xfffffffe, .key = "ctr", .klen = 3, .counter = -42},
        {.op = PC_MUT_DEL, .stamp = 2, .key = "", .klen = 0},
        {.op = PC_MUT_EXPIRE, .stamp = 3, .expires_wall_ms = 5, .key = "e", .klen = 1},
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        size_t vlen = in[i].op == PC_MUT_COUNTER ? 8 : in[i].vlen;
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
        if (in[i].op == PC_MUT_SET)
            assert_memory_equal(out.val, in[i].val, in[i].vlen);
        if (in[i].op == PC_MUT_COUNTER)
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
    pc_jrec r = {.op = PC_MUT_SET, .key = "named", .klen = 5, .val = "v", .vlen = 1};
    size_t n = pc_jrec_encode(buf, &r);
    buf[n - 1] ^= 1;
    pc_jrec out;
    const char *why = NULL;
    assert_int_equal(pc_jrec_decode(buf, n, &out, &why), PC_ECORRUPT);
    assert_string_equal(why, "checksum mismatch");
    assert_int_equal(out.klen, 5);
    assert_memory_equal(out.key, "named", 5);

    /* golden bytes: the worked examples of docs/journal-format.md §3 */
    pc_jrec g = {.op = PC_MUT_SET, .stamp = 2, .key = "k", .klen = 1, .val = "v", .vlen = 1};
    static const uint8_t g1[42] = {0x93, 0x4a, 0x52, 0x4e, 0x2a, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01,
                                   0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
                                   0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x6b,
                                   0x76, 0x86, 0x2f, 0xba, 0x16, 0x24, 0xab, 0x6c, 0x51};
    assert_int_equal(pc_jrec_encode(buf, &g), sizeof g1);
    assert_memory_equal(buf, g1, sizeof g1);
    pc_jrec c = {.op = PC_MUT_COUNTER,
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
    /* golden bytes (docs/journal-format.md §2) for collection "default",
     * version 1 (still read, and written back as it was) */
    pc_jseg_hdr gh = h;
    gh.version = 1;
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
    /* version 1 (the old format) is read; a newer version than this build
     * writes, or 0, is PC_EFORMAT once the checksum holds */
    static const struct {
        uint8_t v;
        int rc;
    } vers[] = {{1, 0}, {2, 0}, {3, PC_EFORMAT}, {0, PC_EFORMAT}};
    for (size_t i = 0; i < sizeof vers / sizeof vers[0]; i++) {
        b[8] = vers[i].v;
        uint64_t sum = XXH3_64bits(b, 120);
        memcpy(b + 120, &sum, 8);
        assert_int_equal(pc_jseg_hdr_decode(b, sizeof b, &o, &why), vers[i].rc);
        if (vers[i].rc == 0)
            assert_int_equal(o.version, vers[i].v);
    }

    char cn[PC_COLL_NAME_MAX + 1];
    uint64_t e = 0;
    assert_int_equal(
        pc_journal_segment_name_parse("default.0000000100000000.123.wal", cn, sizeof cn, &e), 0);
    assert_string_equal(cn, "default");
    assert_int_equal(e, 0x100000000ull);
    assert_int_equal(
        pc_journal_segment_name_parse("a.b.00000001000000ff.9-2.wal", cn, sizeof cn, &e), 0);
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
        assert_int_equal(pc_journal_segment_name_parse(bad[i], cn, sizeof cn, &e), PC_EINVAL);

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
        if (r.op == PC_MUT_SET) {
            r.val = val;
            r.vlen = (i * 37) % sizeof val;
        }
        if (r.op == PC_MUT_COUNTER)
            r.counter = -(int64_t)i;
        if (r.op == PC_MUT_EXPIRE)
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
    cfg.log.fn = log_capture;
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
    pc_coll *ca = journal_on(a, ja, "default", mode);
    int expired_keys = 0;
    do_all_ops(ca, &expired_keys);
    /* an unjournaled collection leaves no segment */
    assert_int_equal(pc_set(pc_fx_coll(a, "other"), "o", 1, "o", 1, 0, 0), 0);
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
    pc_coll *cb = pc_fx_coll(b, "default");
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

/* The drainer's pass (what its thread runs) writes the ring out: with
 * direct I/O its runs' whole blocks go through an O_DIRECT descriptor, the
 * partial ones through the page cache (journal_direct.c); with it off
 * (a file system that refuses O_DIRECT) everything goes through the page
 * cache. Either way the segment ends exactly at its last record and the
 * replay reads every record with no torn tail. The operations are drained
 * in three passes, so runs start inside a block and one run holds the
 * 1 MiB value (longer than the bounce buffer holds with its neighbours). */
static void drained_roundtrip(bool direct)
{
    pc_cache *a = new_cache("default;other", 64);
    pc_journal *ja = new_journal(a, 1);
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_EVERYSEC);
    if (!direct)
        ja->dio.off = true;
    assert_int_equal(pc_set(ca, "first", 5, "1", 1, 0, 0), 0);
    assert_int_equal(pc_jdrain_pass(ja, false), 0);
    bool refused = ja->dio.off;
    int expired_keys = 0;
    do_all_ops(ca, &expired_keys);
    assert_int_equal(pc_jdrain_pass(ja, false), 0);
    for (int i = 0; i < 300; i++) {
        char k[32];
        int kl = snprintf(k, sizeof k, "after-%d", i);
        assert_int_equal(pc_set(ca, k, (size_t)kl, k, (size_t)kl, 0, 0), 0);
    }
    assert_int_equal(pc_jdrain_pass(ja, false), 0);
    assert_int_equal(ja->slot->head, ja->slot->tail); /* the drainer wrote it all */
    bool used_direct = false;
    for (size_t i = 0; i < (size_t)ja->nslots * PC_MAX_COLLECTIONS; i++)
        used_direct |= ja->dfd[i].dio_open;
    if (direct && refused)
        printf("SKIPPED: O_DIRECT refused by the file system of %s: checked the buffered "
               "drain only\n",
               tmpdir);
    else
        assert_true(used_direct == direct);
    char names[4][256];
    assert_int_equal(list_segments(NULL, names, 4), 1);
    char path[512];
    snprintf(path, sizeof path, "%s/journal/%s", tmpdir, names[0]);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal((uint64_t)sb.st_size, ja->slot->seg[0].bytes); /* no padding */
    pc_journal_close(ja);
    usleep(60 * 1000); /* the 30 ms keys lapse */

    pc_cache *b = new_cache("default;other", 64);
    pc_journal *jb = new_journal(b, 2);
    pc_coll *cb = pc_fx_coll(b, "default");
    pc_journal_replay_stats st;
    assert_int_equal(pc_journal_replay_run(jb, cb, 0, &st), 0);
    assert_int_equal(st.segments, 1);
    assert_int_equal(st.bad_records + st.torn_tails + st.bad_segments + st.errors, 0);
    assert_int_equal(st.expired, (uint64_t)expired_keys);
    assert_same_table(ca, cb);
    pc_journal_close(jb);
    pc_cache_destroy(a);
    pc_cache_destroy(b);
}

static void test_drained_direct(void **state)
{
    (void)state;
    drained_roundtrip(true);
}

static void test_drained_buffered(void **state)
{
    (void)state;
    drained_roundtrip(false);
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
    pc_coll *ca = journal_on(a, ja, "default", PC_JOURNAL_ALWAYS);
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
    pc_coll *cb = pc_fx_coll(b, "default");
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
        .op = PC_MUT_SET, .stamp = (st), .expires_wall_ms = (exp), .key = (k), .klen = strlen(k),  \
        .val = (v), .vlen = strlen(v)                                                              \
    }
#define EXPREC(k, st, exp)                                                                         \
    {                                                                                              \
        .op = PC_MUT_EXPIRE, .stamp = (st), .expires_wall_ms = (exp), .key = (k),                  \
        .klen = strlen(k)                                                                          \
    }

static void test_order_rules(void **state)
{
    (void)state;
    int64_t past = pc_wall_ms() - 1000, later = pc_wall_ms() + 3600000;
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
    pc_coll *cb = pc_fx_coll(bc, "default");
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_records),
        cmocka_unit_test(test_format_header_and_names),
        cmocka_unit_test(test_scan_hostile),
        cmocka_unit_test_setup_teardown(test_open_errors, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_roundtrip_everysec, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_roundtrip_always, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_drained_direct, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_drained_buffered, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_filter_cases, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_order_rules, setup_dir, teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
