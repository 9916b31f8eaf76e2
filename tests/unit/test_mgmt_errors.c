/*
 * test_mgmt_errors.c - the management command layer's failures (src/mgmt/):
 * every kind of bad input (an error with a clear message, and a check that
 * the bad call emitted nothing and changed nothing in the table), a result
 * builder that fails at each of its calls in turn, and an arena too small
 * for a write.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mgmt_testlib.h"
#include "pcache_mgmt.h"

/* ---- bad input: an error with a clear message, no output, no change ---------- */
static void test_bad_input(void **state)
{
    struct fx *f = *state;
    static const struct {
        const char *line;
        int rc;
        const char *msg;
    } cases[] = {
        {"perf_nope", PC_EINVAL, "unknown command \"perf_nope\" (commands: perf_stats,"},
        {"perf_stats nosuch", PC_ENOCOLL,
         "perf_stats: unknown collection \"nosuch\" (declared: default, sessions, th, grow)"},
        {"perf_stats th x", PC_EINVAL,
         "perf_stats: too many positional parameters: \"x\" is extra"},
        {"perf_stats coll=th", PC_EINVAL,
         "perf_stats: unknown parameter name \"coll\" (usage: perf_stats [collection])"},
        {"perf_stats_reset nosuch", PC_ENOCOLL, "perf_stats_reset: unknown collection \"nosuch\""},
        {"perf_stats_reset th th", PC_EINVAL, "too many positional parameters"},
        {"perf_keys", PC_EINVAL,
         "perf_keys: missing required parameter \"glob\" (usage: perf_keys glob [collection] "
         "[limit])"},
        {"perf_keys limit=5", PC_EINVAL, "missing required parameter \"glob\""},
        {"perf_keys \"*\" limit=abc", PC_EINVAL,
         "perf_keys: parameter \"limit\": not an integer: \"abc\""},
        {"perf_keys \"*\" limit=", PC_EINVAL, "parameter \"limit\": not an integer: \"\""},
        {"perf_keys \"*\" limit=1e3", PC_EINVAL, "not an integer: \"1e3\""},
        {"perf_keys \"*\" limit=\" 5\"", PC_EINVAL, "not an integer"},
        {"perf_keys \"*\" limit=-1", PC_EINVAL,
         "parameter \"limit\": out of range [1, 100000]: \"-1\""},
        {"perf_keys \"*\" limit=0", PC_EINVAL, "out of range [1, 100000]: \"0\""},
        {"perf_keys \"*\" limit=100001", PC_EINVAL, "out of range [1, 100000]: \"100001\""},
        {"perf_keys \"*\" limit=18446744073709551616", PC_EINVAL, "out of range"},
        {"perf_keys \"*\" limit=1 limit=2", PC_EINVAL,
         "perf_keys: parameter \"limit\" given twice"},
        {"perf_keys \"*\" nosuch", PC_ENOCOLL, "perf_keys: unknown collection \"nosuch\""},
        {"perf_keys \"*\" \"\"", PC_ENOCOLL, "unknown collection \"\""},
        {"perf_keys \"*\" \"th\\x00\"", PC_ENOCOLL, "unknown collection \"th\\x00\""},
        {"perf_keys \"a[\"", PC_EINVAL, "perf_keys: parameter \"glob\": malformed glob \"a[\""},
        {"perf_keys \"*\" th 5 extra", PC_EINVAL, "too many positional parameters: \"extra\""},
        {"perf_keys \"*\" lmit=5", PC_EINVAL, "unknown parameter name \"lmit\""},
        {"perf_scan", PC_EINVAL, "perf_scan: missing required parameter \"cursor\""},
        {"perf_scan abc", PC_EINVAL,
         "perf_scan: malformed cursor \"abc\": expected 0 to start a scan or the cursor a "
         "previous perf_scan returned"},
        {"perf_scan -1", PC_EINVAL, "malformed cursor \"-1\""},
        {"perf_scan +5", PC_EINVAL, "malformed cursor \"+5\""},
        {"perf_scan 1.5", PC_EINVAL, "malformed cursor \"1.5\""},
        {"perf_scan \"\"", PC_EINVAL, "malformed cursor \"\""},
        {"perf_scan 99999999999999999999", PC_EINVAL, "malformed cursor"},
        {"perf_scan 16", PC_EINVAL,
         "perf_scan: malformed cursor 16: past the end of collection \"sessions\" (16 buckets)"},
        {"perf_scan 0 count=0", PC_EINVAL,
         "perf_scan: parameter \"count\": out of range [1, 65536]"},
        {"perf_scan 0 count=65537", PC_EINVAL, "out of range [1, 65536]: \"65537\""},
        {"perf_scan 0 \"a\\\\\"", PC_EINVAL,
         "perf_scan: parameter \"glob\": malformed glob \"a\\\\\""},
        {"perf_scan 0 collection=nosuch", PC_ENOCOLL, "perf_scan: unknown collection"},
        {"perf_dump", PC_EINVAL, "perf_dump: missing required parameter \"glob\""},
        {"perf_dump \"*\" limit=-3", PC_EINVAL, "perf_dump: parameter \"limit\": out of range"},
        {"perf_dump \"*\" nosuch", PC_ENOCOLL, "perf_dump: unknown collection"},
        {"perf_dump \"[\"", PC_EINVAL, "malformed glob"},
        {"perf_mget", PC_EINVAL, "perf_mget: missing required parameter \"glob\""},
        {"perf_mget \"*\" th 0", PC_EINVAL, "perf_mget: parameter \"limit\": out of range"},
        {"perf_mget_json \"*\" nosuch", PC_ENOCOLL, "perf_mget_json: unknown collection"},
        {"perf_mget_json \"*\" limit=x", PC_EINVAL,
         "perf_mget_json: parameter \"limit\": not an integer"},
        {"perf_get", PC_EINVAL,
         "perf_get: missing required parameter \"key\" (usage: perf_get key [collection])"},
        {"perf_get hits nosuch", PC_ENOCOLL, "perf_get: unknown collection \"nosuch\""},
        {"perf_get hits sessions x", PC_EINVAL, "too many positional parameters"},
        {"perf_get key=a key=b", PC_EINVAL, "parameter \"key\" given twice"},
        {"perf_get hits colection=th", PC_EINVAL, "unknown parameter name \"colection\""},
        {"perf_get a=b", PC_EINVAL, "perf_get: unknown parameter name \"a\""},
        {"perf_set", PC_EINVAL, "perf_set: missing required parameter \"key\""},
        {"perf_set k", PC_EINVAL,
         "perf_set: missing required parameter \"value\" (usage: perf_set key value [ttl] "
         "[collection])"},
        {"perf_set k v ttl=abc", PC_EINVAL, "perf_set: parameter \"ttl\": not an integer: \"abc\""},
        {"perf_set k v -5", PC_EINVAL,
         "perf_set: parameter \"ttl\": out of range [0, 315360000] seconds (0 = never expires): "
         "\"-5\""},
        {"perf_set k v 315360001", PC_EINVAL, "out of range [0, 315360000] seconds"},
        {"perf_set k v 10 nosuch", PC_ENOCOLL, "perf_set: unknown collection \"nosuch\""},
        {"perf_set k v 10 th extra", PC_EINVAL, "too many positional parameters"},
        {"perf_set k v tll=10", PC_EINVAL, "unknown parameter name \"tll\""},
        {"perf_ttl \"*\"", PC_EINVAL, "perf_ttl: missing required parameter \"ttl\""},
        {"perf_ttl ttl=5", PC_EINVAL, "perf_ttl: missing required parameter \"glob\""},
        {"perf_ttl \"*\" soon", PC_EINVAL, "perf_ttl: parameter \"ttl\": not an integer"},
        {"perf_ttl \"*\" -1", PC_EINVAL, "perf_ttl: parameter \"ttl\": out of range"},
        {"perf_ttl \"a[\" 5", PC_EINVAL, "perf_ttl: parameter \"glob\": malformed glob"},
        {"perf_ttl \"*\" 5 nosuch", PC_ENOCOLL, "perf_ttl: unknown collection"},
        {"perf_del", PC_EINVAL, "perf_del: missing required parameter \"glob\""},
        {"perf_del \"session-[\"", PC_EINVAL,
         "perf_del: parameter \"glob\": malformed glob \"session-[\""},
        {"perf_del \"x\\\\\"", PC_EINVAL, "malformed glob"},
        {"perf_del \"*\" nosuch", PC_ENOCOLL, "perf_del: unknown collection \"nosuch\""},
        {"perf_del \"*\" sessions extra", PC_EINVAL, "perf_del: too many positional parameters"},
        {"perf_del \"*\" limit=1", PC_EINVAL, "perf_del: unknown parameter name \"limit\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        bad(f, cases[i].line, cases[i].rc, cases[i].msg);

    /* lengths: globs, keys, values past their limits (the C interface) */
    size_t big = PC_VALUE_MAX + 1;
    char *buf = malloc(big);
    assert_non_null(buf);
    memset(buf, '*', big);
    pc_mgmt_arg a[4] = {{NULL, 0, buf, PC_GLOB_MAX + 1}, {NULL, 0, S("5")}};
    static const char *const globbers[] = {"perf_keys", "perf_dump", "perf_mget", "perf_mget_json",
                                           "perf_del"};
    for (size_t i = 0; i < sizeof globbers / sizeof globbers[0]; i++)
        badv(f, globbers[i], a, 1, PC_ETOOBIG,
             "parameter \"glob\": glob longer than 4096 bytes (4097 bytes)");
    badv(f, "perf_ttl", a, 2, PC_ETOOBIG, "perf_ttl: parameter \"glob\": glob longer than 4096");
    pc_mgmt_arg scan[2] = {{NULL, 0, S("0")}, {NULL, 0, buf, PC_GLOB_MAX + 1}};
    badv(f, "perf_scan", scan, 2, PC_ETOOBIG, "perf_scan: parameter \"glob\": glob longer");
    a[0].len = PC_GLOB_MAX; /* the longest glob is fine */
    assert_int_equal(runv(f, "perf_del", a, 1), 0);
    has(f, "\"deleted\":4"); /* 4096 stars match everything */
    ok(f, "perf_set hits 6");
    ok(f, "perf_set session-abc123 \"state=confirmed\" 3600");
    ok(f, "perf_set session-abd456 \"state=early\" 1800");
    ok(f, "perf_set profile-alice gold");
    memset(buf, 'k', big);
    a[0].len = PC_KEY_MAX + 1;
    badv(f, "perf_get", a, 1, PC_ETOOBIG,
         "perf_get: parameter \"key\": 65536 bytes, longer than the 65535-byte limit");
    a[1] = (pc_mgmt_arg){NULL, 0, S("v")};
    badv(f, "perf_set", a, 2, PC_ETOOBIG, "perf_set: parameter \"key\": 65536 bytes");
    a[0].len = 3;
    a[1] = (pc_mgmt_arg){"value", 5, buf, PC_VALUE_MAX + 1};
    badv(f, "perf_set", a, 2, PC_ETOOBIG,
         "perf_set: parameter \"value\": 1048577 bytes, longer than the 1048576-byte limit");
    /* a long value is quoted in a message, cut short and escaped */
    a[0] = (pc_mgmt_arg){NULL, 0, buf, 200};
    a[1] = (pc_mgmt_arg){NULL, 0, "\x01\"", 2};
    badv(f, "perf_get", a, 2, PC_ENOCOLL, "unknown collection \"\\x01\\\"\"");
    badv(f, "perf_keys", (pc_mgmt_arg[]){{NULL, 0, S("*")}, {"limit", 5, buf, 200}}, 2, PC_EINVAL,
         "not an integer: \"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk\"...");
    free(buf);
}

/* ---- builder failures ----------------------------------------------------- */
struct failing {
    pc_json *j;
    int left; /* calls before the failure */
};
static int fl_tick(struct failing *fl)
{
    return fl->left-- == 0 ? PC_ESYS : 0;
}
#define FL_WRAP(fn, params, args)                                                                  \
    static int fl_##fn params                                                                      \
    {                                                                                              \
        struct failing *fl = rctx;                                                                 \
        int rc = fl_tick(fl);                                                                      \
        return rc != 0 ? rc : pc_json_ops()->fn args;                                              \
    }
FL_WRAP(obj_begin, (void *rctx, const char *n), (fl->j, n))
FL_WRAP(obj_end, (void *rctx), (fl->j))
FL_WRAP(arr_begin, (void *rctx, const char *n), (fl->j, n))
FL_WRAP(arr_end, (void *rctx), (fl->j))
FL_WRAP(str, (void *rctx, const char *n, const void *s, size_t l), (fl->j, n, s, l))
FL_WRAP(i64, (void *rctx, const char *n, int64_t v), (fl->j, n, v))
FL_WRAP(u64, (void *rctx, const char *n, uint64_t v), (fl->j, n, v))
FL_WRAP(dbl, (void *rctx, const char *n, double v), (fl->j, n, v))
FL_WRAP(boolean, (void *rctx, const char *n, int v), (fl->j, n, v))
FL_WRAP(null, (void *rctx, const char *n), (fl->j, n))

static void test_builder_failure(void **state)
{
    struct fx *f = *state;
    const pc_result_ops ops = {fl_obj_begin, fl_obj_end, fl_arr_begin, fl_arr_end, fl_str,
                               fl_i64,       fl_u64,     fl_dbl,       fl_boolean, fl_null};
    static const char *const lines[] = {
        "perf_stats",           "perf_stats_reset th",   "perf_keys \"*\"",
        "perf_scan 0 count=16", "perf_dump \"*\"",       "perf_mget \"*\"",
        "perf_mget_json \"*\"", "perf_get hits",         "perf_ttl \"*\" 0 th",
        "perf_del nothing",     "perf_set a b 0 default"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        int calls = 0;
        for (int at = 0;; at++) { /* fail the at-th builder call, for every at */
            struct failing fl = {f->j, at};
            pc_mgmt_err e;
            pc_json_reset(f->j);
            int rc = pc_mgmt_run_line(f->m, lines[i], strlen(lines[i]), &ops, &fl, &e);
            if (rc == 0) {
                calls = at;
                break;
            }
            assert_int_equal(rc, PC_ESYS);
            assert_int_equal(e.code, PC_ESYS);
            assert_non_null(strstr(e.msg, "system call failed"));
        }
        assert_true(calls > 0);
    }
}

/* An arena too small for the write: perf_set reports it, stores nothing. */
static void test_nomem(void **state)
{
    (void)state;
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "default=4";
    cfg.mem_mb = 4;
    pc_cache *c;
    assert_int_equal(pc_cache_create(&cfg, &c), 0);
    pc_mgmt *m;
    pc_json *j;
    assert_int_equal(pc_mgmt_create(c, NULL, &m), 0);
    assert_int_equal(pc_json_create(&j), 0);
    char *big = malloc(PC_VALUE_MAX);
    assert_non_null(big);
    memset(big, 'v', PC_VALUE_MAX);
    int rc = 0, i;
    pc_mgmt_err e;
    for (i = 0; i < 64 && rc == 0; i++) {
        char k[16];
        pc_mgmt_arg a[] = {{NULL, 0, k, (size_t)snprintf(k, sizeof k, "k%d", i)},
                           {NULL, 0, big, PC_VALUE_MAX}};
        pc_json_reset(j);
        rc = pc_mgmt_run(m, "perf_set", a, 2, pc_json_ops(), j, &e);
    }
    assert_int_equal(rc, PC_ENOMEM);
    assert_string_equal(e.msg, "perf_set: the shared arena is full: the write to collection "
                               "\"default\" was dropped");
    char k[16];
    int kl = snprintf(k, sizeof k, "k%d", i - 1);
    assert_int_equal(pc_probe(pc_mgmt_default_coll(m), k, (size_t)kl, NULL), PC_ENOTFOUND);
    free(big);
    pc_json_destroy(j);
    pc_mgmt_destroy(m);
    pc_cache_destroy(c);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_bad_input),
        T(test_builder_failure),
        cmocka_unit_test(test_nomem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
