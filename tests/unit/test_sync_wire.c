/*
 * test_sync_wire.c - pcached's perf_sync notice datagram (src/server/
 * sync_wire.c, docs/sync.md "Wire format") against hostile input. Every
 * datagram is placed so that its last byte sits just before a PROT_NONE
 * page: a decoder that reads one byte past the datagram faults.
 *
 * Asserts: a round trip of every name length; the golden bytes of a v1
 * notice; every truncation and every extension of a valid datagram is
 * refused with the length verdict; bad magic, version, flags, generation 0,
 * name lengths out of range (0 / 64..255 collection, 64..255 source), a
 * non-printable byte in either name; 100 000 seeded random mutations never
 * fault and anything accepted re-encodes to the same bytes; the encoder
 * refuses what the decoder would refuse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "sync_wire.h"

#define AREA 4096u
static unsigned char *area; /* AREA bytes readable, then one PROT_NONE page */

static int setup(void **state)
{
    (void)state;
    long pg = sysconf(_SC_PAGESIZE);
    unsigned char *p =
        mmap(NULL, AREA + (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || mprotect(p + AREA, (size_t)pg, PROT_NONE) != 0)
        return -1;
    area = p;
    return 0;
}

/* Decodes len bytes of buf placed against the guard page. */
static int decode_guarded(const unsigned char *buf, size_t len, sync_notice *out)
{
    assert_true(len <= AREA);
    unsigned char *at = area + AREA - len;
    if (len > 0)
        memcpy(at, buf, len);
    return sync_wire_decode(at, len, out);
}

static size_t make(const char *coll, const char *src, uint64_t gen, unsigned char *buf)
{
    sync_notice n;
    memset(&n, 0, sizeof n);
    snprintf(n.coll, sizeof n.coll, "%s", coll);
    snprintf(n.source, sizeof n.source, "%s", src);
    n.generation = gen;
    size_t len = 0;
    assert_int_equal(sync_wire_encode(&n, buf, SYNC_WIRE_MAX, &len), 0);
    return len;
}

static void t_golden(void **state)
{
    (void)state;
    unsigned char buf[SYNC_WIRE_MAX];
    size_t len = make("th", "n1", 0x0102030405060708ull, buf);
    static const unsigned char want[] = {'P', 'C', 'S', 'Y', 1, 0, 2,   2,   1,   2,
                                         3,   4,   5,   6,   7, 8, 't', 'h', 'n', '1'};
    assert_int_equal(len, sizeof want);
    assert_memory_equal(buf, want, sizeof want);
    sync_notice n;
    assert_int_equal(decode_guarded(buf, len, &n), SYNC_WIRE_OK);
    assert_string_equal(n.coll, "th");
    assert_string_equal(n.source, "n1");
    assert_true(n.generation == 0x0102030405060708ull);
}

static void t_roundtrip_lengths(void **state)
{
    (void)state;
    char c[64], s[64];
    for (size_t cl = 1; cl <= 63; cl++)
        for (size_t sl = 0; sl <= 63; sl += 7) {
            memset(c, 'a' + (int)(cl % 26), cl);
            c[cl] = '\0';
            memset(s, '!' + (int)(sl % 90), sl);
            s[sl] = '\0';
            unsigned char buf[SYNC_WIRE_MAX];
            size_t len = make(c, s, cl * 1000 + sl + 1, buf);
            assert_int_equal(len, SYNC_WIRE_HDR + cl + sl);
            sync_notice n;
            assert_int_equal(decode_guarded(buf, len, &n), SYNC_WIRE_OK);
            assert_string_equal(n.coll, c);
            assert_string_equal(n.source, s);
            assert_true(n.generation == cl * 1000 + sl + 1);
        }
}

static void t_truncated_and_oversized(void **state)
{
    (void)state;
    unsigned char buf[SYNC_WIRE_MAX + 64];
    size_t len = make("sessions", "node-7", 42, buf);
    sync_notice n;
    memset(&n, 0x5a, sizeof n);
    sync_notice keep = n;
    for (size_t l = 0; l < len; l++) {
        int v = decode_guarded(buf, l, &n);
        assert_int_equal(v, l < SYNC_WIRE_HDR ? SYNC_WIRE_SHORT : SYNC_WIRE_LENGTH_BAD);
        assert_memory_equal(&n, &keep, sizeof n); /* untouched on error */
    }
    for (size_t extra = 1; extra < 64; extra++) {
        memset(buf + len, 'x', extra);
        assert_int_equal(decode_guarded(buf, len + extra, &n), SYNC_WIRE_LENGTH_BAD);
    }
    /* a header that claims more bytes than the datagram has */
    buf[6] = 63;
    assert_int_equal(decode_guarded(buf, len, &n), SYNC_WIRE_LENGTH_BAD);
    /* far past the largest notice (16 + 63 + 63 bytes) */
    unsigned char big[AREA];
    memset(big, 0, sizeof big);
    assert_int_equal(decode_guarded(big, sizeof big, &n), SYNC_WIRE_MAGIC_BAD);
}

static void t_bad_fields(void **state)
{
    (void)state;
    unsigned char good[SYNC_WIRE_MAX], buf[SYNC_WIRE_MAX];
    size_t len = make("default", "A", 7, good);
    sync_notice n;
    struct {
        size_t off;
        unsigned char val;
        int verdict;
    } cases[] = {
        {0, 'X', SYNC_WIRE_MAGIC_BAD},   {3, 'Z', SYNC_WIRE_MAGIC_BAD},
        {4, 0, SYNC_WIRE_VERSION_BAD},   {4, 2, SYNC_WIRE_VERSION_BAD},
        {4, 255, SYNC_WIRE_VERSION_BAD}, {5, 1, SYNC_WIRE_FLAGS_BAD},
        {5, 0x80, SYNC_WIRE_FLAGS_BAD},  {6, 0, SYNC_WIRE_LENGTH_BAD},
        {6, 64, SYNC_WIRE_LENGTH_BAD},   {6, 255, SYNC_WIRE_LENGTH_BAD},
        {7, 64, SYNC_WIRE_LENGTH_BAD},   {7, 255, SYNC_WIRE_LENGTH_BAD},
        {16, ' ', SYNC_WIRE_NAME_BAD},   {16, 0, SYNC_WIRE_NAME_BAD},
        {18, 0x7f, SYNC_WIRE_NAME_BAD},  {22, 0xc3, SYNC_WIRE_NAME_BAD},
        {23, '\n', SYNC_WIRE_NAME_BAD},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(buf, good, len);
        buf[cases[i].off] = cases[i].val;
        assert_int_equal(decode_guarded(buf, len, &n), cases[i].verdict);
        assert_string_not_equal(sync_wire_strerror(cases[i].verdict), "unknown verdict");
    }
    memcpy(buf, good, len);
    memset(buf + 8, 0, 8); /* generation 0 */
    assert_int_equal(decode_guarded(buf, len, &n), SYNC_WIRE_GEN_BAD);
    memset(buf + 8, 0xff, 8); /* the largest generation is a valid notice */
    assert_int_equal(decode_guarded(buf, len, &n), SYNC_WIRE_OK);
    assert_true(n.generation == UINT64_MAX);
}

static void t_encoder_refuses(void **state)
{
    (void)state;
    sync_notice n;
    unsigned char buf[SYNC_WIRE_MAX];
    size_t len = 0;
    memset(&n, 0, sizeof n);
    n.generation = 1;
    assert_int_equal(sync_wire_encode(&n, buf, sizeof buf, &len), -1); /* empty collection */
    snprintf(n.coll, sizeof n.coll, "a b");
    assert_int_equal(sync_wire_encode(&n, buf, sizeof buf, &len), -1); /* space */
    snprintf(n.coll, sizeof n.coll, "ab");
    n.generation = 0;
    assert_int_equal(sync_wire_encode(&n, buf, sizeof buf, &len), -1);
    n.generation = 1;
    snprintf(n.source, sizeof n.source, "\x01");
    assert_int_equal(sync_wire_encode(&n, buf, sizeof buf, &len), -1);
    n.source[0] = '\0';
    assert_int_equal(sync_wire_encode(&n, buf, SYNC_WIRE_HDR + 1, &len), -1); /* no room */
    memset(n.coll, 'c', sizeof n.coll); /* not NUL-terminated within 64 bytes */
    assert_int_equal(sync_wire_encode(&n, buf, sizeof buf, &len), -1);
    assert_int_equal(len, 0);
}

static void t_mutations(void **state)
{
    (void)state;
    unsigned char good[SYNC_WIRE_MAX], buf[SYNC_WIRE_MAX + 8], again[SYNC_WIRE_MAX];
    size_t glen = make("profiles", "node-12", 123456789, good);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    unsigned accepted = 0;
    for (unsigned it = 0; it < 100000; it++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t len = glen;
        memcpy(buf, good, glen);
        unsigned flips = 1 + (unsigned)(x % 4);
        for (unsigned f = 0; f < flips; f++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[x % glen] = (unsigned char)(x >> 32);
        }
        if (x & (1ull << 50))
            len = (size_t)((x >> 20) % (sizeof buf));
        sync_notice n;
        if (decode_guarded(buf, len, &n) != SYNC_WIRE_OK)
            continue;
        accepted++;
        size_t l2 = 0;
        assert_int_equal(sync_wire_encode(&n, again, sizeof again, &l2), 0);
        assert_int_equal(l2, len);
        assert_memory_equal(again, buf, len);
    }
    assert_true(accepted > 0); /* mutations of the names and generation stay valid */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_golden),
        cmocka_unit_test(t_roundtrip_lengths),
        cmocka_unit_test(t_truncated_and_oversized),
        cmocka_unit_test(t_bad_fields),
        cmocka_unit_test(t_encoder_refuses),
        cmocka_unit_test(t_mutations),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
