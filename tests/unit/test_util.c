/*
 * test_util.c - the shared helpers of src/util (pcache_util.h).
 *
 * Asserts: the byte-order codecs write the documented bytes at every
 * alignment and read back what they wrote; pc_hex_val accepts exactly the
 * 22 hex digits of either case and pc_hex_digit writes lowercase; the
 * clocks are in ms, the monotonic one never goes back and the coarse one
 * stays within a tick of it, the wall clock agrees with time(); the log
 * funnel delivers a line only to a set callback at an enabled level, with
 * its ctx, its prefix, truncated to PC_LOG_MSG_MAX - 1 bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pcache_util.h"

static void t_codecs_golden(void **state)
{
    (void)state;
    uint8_t buf[24];
    for (size_t at = 0; at < 8; at++) { /* every alignment */
        memset(buf, 0xee, sizeof buf);
        pc_put_le16(buf + at, 0x0102);
        assert_memory_equal(buf + at, "\x02\x01", 2);
        assert_int_equal(pc_get_le16(buf + at), 0x0102);
        pc_put_le32(buf + at, 0x01020304u);
        assert_memory_equal(buf + at, "\x04\x03\x02\x01", 4);
        assert_int_equal(pc_get_le32(buf + at), 0x01020304u);
        pc_put_le64(buf + at, 0x0102030405060708ull);
        assert_memory_equal(buf + at, "\x08\x07\x06\x05\x04\x03\x02\x01", 8);
        assert_true(pc_get_le64(buf + at) == 0x0102030405060708ull);
        assert_int_equal(buf[at + 8], 0xee); /* nothing written past the field */
        pc_put_be32(buf + at, 0x01020304u);
        assert_memory_equal(buf + at, "\x01\x02\x03\x04", 4);
        assert_int_equal(pc_get_be32(buf + at), 0x01020304u);
        pc_put_be64(buf + at, 0x0102030405060708ull);
        assert_memory_equal(buf + at, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
        assert_true(pc_get_be64(buf + at) == 0x0102030405060708ull);
        if (at > 0)
            assert_int_equal(buf[at - 1], 0xee);
    }
}

static void t_codecs_roundtrip(void **state)
{
    (void)state;
    uint8_t buf[9];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 10000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        pc_put_le64(buf + 1, x);
        assert_true(pc_get_le64(buf + 1) == x);
        assert_int_equal(pc_get_le32(buf + 1), (uint32_t)x); /* the low half first */
        assert_int_equal(pc_get_le16(buf + 1), (uint16_t)x);
        pc_put_be64(buf + 1, x);
        assert_true(pc_get_be64(buf + 1) == x);
        assert_int_equal(pc_get_be32(buf + 1), (uint32_t)(x >> 32)); /* the high half first */
    }
}

static void t_hex(void **state)
{
    (void)state;
    const char *digits = "0123456789abcdef", *upper = "ABCDEF";
    int valid = 0;
    for (int c = 0; c < 256; c++) {
        int v = pc_hex_val(c);
        const char *lo = c != 0 ? strchr(digits, c) : NULL;
        const char *up = c != 0 ? strchr(upper, c) : NULL;
        if (lo != NULL)
            assert_int_equal(v, lo - digits);
        else if (up != NULL)
            assert_int_equal(v, 10 + (up - upper));
        else
            assert_int_equal(v, -1);
        valid += v >= 0;
    }
    assert_int_equal(valid, 22);
    assert_int_equal(pc_hex_val(-1), -1);
    for (unsigned v = 0; v < 64; v++)
        assert_int_equal(pc_hex_digit(v), digits[v & 15]);
}

static void t_clocks(void **state)
{
    (void)state;
    int64_t wall = pc_wall_ms(), secs = (int64_t)time(NULL);
    assert_true(wall / 1000 >= secs - 1 && wall / 1000 <= secs + 1);
    int64_t prev = pc_mono_ms();
    double prev_s = pc_mono_sec();
    for (int i = 0; i < 100000; i++) {
        int64_t now = pc_mono_ms();
        assert_true(now >= prev);
        prev = now;
    }
    double now_s = pc_mono_sec();
    assert_true(now_s >= prev_s);
    /* the same clock in two units */
    assert_true(now_s * 1000.0 >= (double)prev - 1.0 &&
                now_s * 1000.0 <= (double)pc_mono_ms() + 1.0);
    /* the coarse clock is the last tick's time: behind, by at most a tick */
    int64_t coarse = pc_mono_coarse_ms(), fine = pc_mono_ms();
    assert_true(coarse <= fine + 1 && coarse >= fine - 100);
}

/* ---- the log funnel ----------------------------------------------------- */
struct sink {
    int calls, level;
    void *ctx;
    char last[2 * PC_LOG_MSG_MAX];
};

static void sink_fn(void *ctx, int level, const char *msg)
{
    struct sink *s = ctx;
    s->calls++;
    s->level = level;
    s->ctx = ctx;
    snprintf(s->last, sizeof s->last, "%s", msg);
}

static void vemit(const pc_logger *lg, int level, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void vemit(const pc_logger *lg, int level, const char *prefix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pc_log_vemit(lg, level, prefix, fmt, ap);
    va_end(ap);
}

static size_t vformat(char *buf, size_t cap, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t vformat(char *buf, size_t cap, const char *prefix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = pc_log_vformat(buf, cap, prefix, fmt, ap);
    va_end(ap);
    return n;
}

static void t_log_levels(void **state)
{
    (void)state;
    struct sink s = {0};
    pc_logger lg = {sink_fn, &s, PC_LOG_INFO};
    assert_false(pc_log_enabled(NULL, PC_LOG_ERR));
    assert_true(pc_log_enabled(&lg, PC_LOG_ERR));
    assert_true(pc_log_enabled(&lg, PC_LOG_INFO));
    assert_false(pc_log_enabled(&lg, PC_LOG_DEBUG));
    pc_log_emit(&lg, PC_LOG_DEBUG, "hidden %d", 1);
    pc_log_put(&lg, PC_LOG_DEBUG, "hidden");
    assert_int_equal(s.calls, 0);
    pc_log_emit(&lg, PC_LOG_WARN, "seen %d %s", 2, "x");
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.level, PC_LOG_WARN);
    assert_ptr_equal(s.ctx, &s);
    assert_string_equal(s.last, "seen 2 x");
    pc_log_put(&lg, PC_LOG_ERR, "as it is: %d");
    assert_string_equal(s.last, "as it is: %d");
    assert_int_equal(s.calls, 2);
    lg.fn = NULL; /* silent */
    pc_log_emit(&lg, PC_LOG_ERR, "nowhere");
    pc_log_put(&lg, PC_LOG_ERR, "nowhere");
    pc_log_emit(NULL, PC_LOG_ERR, "nowhere");
    assert_int_equal(s.calls, 2);
}

static void t_log_prefix_and_truncation(void **state)
{
    (void)state;
    struct sink s = {0};
    pc_logger lg = {sink_fn, &s, PC_LOG_DEBUG};
    pc_log_emitp(&lg, PC_LOG_INFO, "journal: ", "segment %u", 7u);
    assert_string_equal(s.last, "journal: segment 7");
    vemit(&lg, PC_LOG_INFO, NULL, "%s", "plain");
    assert_string_equal(s.last, "plain");
    static char big[3 * PC_LOG_MSG_MAX];
    memset(big, 'a', sizeof big - 1);
    pc_log_emitp(&lg, PC_LOG_INFO, "p: ", "%s", big);
    assert_int_equal(strlen(s.last), PC_LOG_MSG_MAX - 1);
    assert_memory_equal(s.last, "p: aaa", 6);

    char buf[8];
    assert_int_equal(vformat(buf, sizeof buf, "ab", "%d", 12345), 7);
    assert_string_equal(buf, "ab12345");
    assert_int_equal(vformat(buf, sizeof buf, "abcdefghij", "%d", 1),
                     7); /* prefix alone fills it */
    assert_string_equal(buf, "abcdefg");
    assert_int_equal(vformat(buf, sizeof buf, NULL, "%s", ""), 0);
    assert_string_equal(buf, "");
    assert_int_equal(vformat(buf, 1, "x", "%d", 1), 0);
    assert_string_equal(buf, "");
}

/* The items pc_list_items hands over, joined as "name|value;" ("name|-;"
 * without '='); stops with 7 at the item "stop". */
struct items_seen {
    char text[256];
    size_t n;
};

static int items_fn(void *ctx, const char *name, size_t len, const char *val, size_t vlen)
{
    struct items_seen *s = ctx;
    if (len == 4 && memcmp(name, "stop", 4) == 0)
        return 7;
    s->n += (size_t)snprintf(s->text + s->n, sizeof s->text - s->n, "%.*s|%.*s;", (int)len, name,
                             val != NULL ? (int)vlen : 1, val != NULL ? val : "-");
    return 0;
}

static void t_list_items(void **state)
{
    (void)state;
    struct items_seen s = {.n = 0};
    assert_int_equal(pc_list_items(" a ; b = x ,\tc\t=\ty\r\n,, d=;", items_fn, &s), 0);
    assert_string_equal(s.text, "a|-;b|x;c|y;d|;");
    s.n = 0;
    s.text[0] = '\0';
    assert_int_equal(pc_list_items(NULL, items_fn, &s), 0);
    assert_int_equal(pc_list_items("", items_fn, &s), 0);
    assert_int_equal(pc_list_items(" ;, ", items_fn, &s), 0);
    assert_string_equal(s.text, "");
    assert_int_equal(pc_list_items("e;stop;f", items_fn, &s), 7);
    assert_string_equal(s.text, "e|-;");
}

static void t_pid_dying(void **state)
{
    (void)state;
    assert_int_equal(pc_pid_dying((long)getpid()), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(0);
    /* a child that exited and is not reaped yet is a zombie: dying */
    int64_t t0 = pc_mono_ms();
    while (!pc_pid_dying((long)child) && pc_mono_ms() - t0 < 5000)
        usleep(1000);
    assert_int_equal(pc_pid_dying((long)child), 1);
    assert_int_equal(waitpid(child, NULL, 0), child);
    assert_int_equal(pc_pid_dying((long)child), 1); /* gone */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_codecs_golden), cmocka_unit_test(t_codecs_roundtrip),
        cmocka_unit_test(t_hex),           cmocka_unit_test(t_clocks),
        cmocka_unit_test(t_log_levels),    cmocka_unit_test(t_log_prefix_and_truncation),
        cmocka_unit_test(t_list_items),    cmocka_unit_test(t_pid_dying),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
