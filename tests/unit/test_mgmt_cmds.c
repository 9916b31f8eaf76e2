/*
 * test_mgmt_cmds.c - the management command layer (src/mgmt/): the
 * command-line tokenizer, the binding of positional and named arguments and
 * the default collection, and every built-in command's normal output
 * (perf_scan also across concurrent growth). The outputs shown to users are
 * checked separately by test_mgmt_docs.c.
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

/* ---- command lines ---------------------------------------------------------- */
static void test_line_parse(void **state)
{
    (void)state;
    pc_mgmt_line *l;
    pc_mgmt_err e;
    const pc_mgmt_arg *a;
    const char *line =
        "  perf_set\t'it''s' \"a=b\" v=\"x \\\"y\\\" \\x00\\xff \\* \\q\" ttl= k=x=y '' \r\n";
    assert_int_equal(pc_mgmt_line_parse(line, strlen(line), &l, &e), PC_EINVAL); /* ''s glued */
    line = "  perf_set\t'it s' \"a=b\" v=\"x \\\"y\\\" \\x00\\xff \\* \\q\" ttl= k=x=y '' \r\n";
    assert_int_equal(pc_mgmt_line_parse(line, strlen(line), &l, &e), 0);
    assert_string_equal(pc_mgmt_line_cmd(l), "perf_set");
    assert_int_equal(pc_mgmt_line_args(l, &a), 6);
    assert_null(a[0].name);
    assert_int_equal(a[0].len, 4);
    assert_memory_equal(a[0].val, "it s", 4);
    assert_null(a[1].name); /* quoted: positional */
    assert_memory_equal(a[1].val, "a=b", 3);
    assert_int_equal(a[2].nlen, 1);
    assert_memory_equal(a[2].name, "v", 1);
    assert_int_equal(a[2].len, 14);
    assert_memory_equal(a[2].val, "x \"y\" \0\xff \\* \\q", 14);
    assert_int_equal(a[3].nlen, 3);
    assert_int_equal(a[3].len, 0);
    assert_memory_equal(a[4].name, "k", 1);
    assert_memory_equal(a[4].val, "x=y", 3);
    assert_int_equal(a[5].len, 0);
    pc_mgmt_line_free(l);
    pc_mgmt_line_free(NULL);
    static const struct {
        const char *line, *msg;
    } errs[] = {
        {"", "empty"},
        {" \t\n", "empty"},
        {"perf_get \"abc", "unterminated double quote opened at byte 10"},
        {"perf_get 'abc", "unterminated single quote"},
        {"perf_get \"a\"b", "text right after the closing quote at byte 13"},
        {"perf_get ab\"c\"", "a quote inside an unquoted word at byte 12"},
        {"perf_get \"\\x4\"", "needs two hex digits"},
        {"perf_get \"\\xg0\"", "needs two hex digits"},
        {"\"perf_get\" a", "first word must be a command name"},
        {"key=perf_get a", "first word must be a command name"},
        {"c 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 "
         "33",
         "more than 32 arguments"},
    };
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        l = NULL;
        memset(&e, 0, sizeof e);
        int rc = pc_mgmt_line_parse(errs[i].line, strlen(errs[i].line), &l, &e);
        if (rc != PC_EINVAL || strstr(e.msg, errs[i].msg) == NULL)
            fail_msg("\"%s\": rc %d, \"%s\", want \"%s\"", errs[i].line, rc, e.msg, errs[i].msg);
        assert_null(l);
    }
    line =
        "c 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32";
    assert_int_equal(pc_mgmt_line_parse(line, strlen(line), &l, &e), 0);
    assert_int_equal(pc_mgmt_line_args(l, NULL), 32);
    pc_mgmt_line_free(l);
}

/* ---- binding and the default collection --------------------------------------- */
static void test_binding(void **state)
{
    struct fx *f = *state;
    /* positional, named, and positional filling what names left free */
    ok(f, "perf_keys \"*\" th 1");
    has(f, "\"collection\":\"th\",\"count\":1,\"truncated\":true");
    ok(f, "perf_keys limit=1 \"*\" th");
    has(f, "\"collection\":\"th\",\"count\":1,\"truncated\":true");
    ok(f, "perf_keys collection=th glob=\"*\"");
    has(f, "\"collection\":\"th\",\"count\":2,\"truncated\":false");
    ok(f, "perf_set value=v1 k1 collection=default");
    ok(f, "perf_get k1 default");
    has(f, "\"value\":\"v1\"");
    /* omitted collection: the context's default, "sessions" */
    ok(f, "perf_get profile-alice");
    has(f, "\"collection\":\"sessions\"");
    /* a NULL default means "default"; an undeclared one is refused */
    pc_mgmt *m = NULL;
    assert_int_equal(pc_mgmt_create(f->c, NULL, &m), 0);
    assert_string_equal(pc_coll_name(pc_mgmt_default_coll(m)), "default");
    assert_ptr_equal(pc_mgmt_cache(m), f->c);
    pc_mgmt_destroy(m);
    m = NULL;
    assert_int_equal(pc_mgmt_create(f->c, "nosuch", &m), PC_ENOCOLL);
    assert_null(m);
    assert_int_equal(pc_mgmt_create(NULL, NULL, &m), PC_EINVAL);
    pc_mgmt_destroy(NULL);
    /* arguments through the C interface: binary names are compared exactly */
    pc_mgmt_arg a[] = {{NULL, 0, S("profile-alice")}, {"collection\0x", 12, S("th")}};
    badv(f, "perf_get", a, 2, PC_EINVAL, "unknown parameter name \"collection\\x00x\"");
    a[1].nlen = 10;
    assert_int_equal(runv(f, "perf_get", a, 2), PC_ENOTFOUND);
    assert_int_equal(runv(f, "perf_get", a, 1), 0);
    pc_mgmt_arg nul[] = {{NULL, 0, NULL, 3}};
    badv(f, "perf_get", nul, 1, PC_EINVAL, "NULL pointer");
    pc_result_ops broken = *pc_json_ops();
    broken.null = NULL;
    assert_int_equal(pc_mgmt_run(f->m, "perf_stats", NULL, 0, &broken, f->j, NULL), PC_EINVAL);
    pc_mgmt_arg many[PC_MGMT_MAX_ARGS + 1];
    memset(many, 0, sizeof many);
    badv(f, "perf_get", many, PC_MGMT_MAX_ARGS + 1, PC_EINVAL, "too many arguments");
}

/* ---- each command's normal output ----------------------------------------- */
static void test_perf_stats(void **state)
{
    struct fx *f = *state;
    ok(f, "perf_get profile-alice");
    /* not found is an error, and a counted miss */
    assert_int_equal(run(f, "perf_get nope-1"), PC_ENOTFOUND);
    assert_int_equal(run(f, "perf_get nope-2"), PC_ENOTFOUND);
    ok(f, "perf_stats");
    static const char *const fields[] = {"\"memory_tier\":4",
                                         "\"memory_backing\":\"4k\"",
                                         "\"memory_pinned\":",
                                         "\"arena_bytes\":",
                                         "\"arena_chunks\":",
                                         "\"table_bytes\":",
                                         "\"plain_bytes\":",
                                         "\"plain_free\":",
                                         "\"collections\":[{\"collection\":\"default\"",
                                         "{\"collection\":\"th\"",
                                         "{\"collection\":\"grow\"",
                                         "\"entries\":",
                                         "\"buckets\":16,",
                                         "\"load_factor\":",
                                         "\"overflow\":0",
                                         "\"hits\":",
                                         "\"misses\":",
                                         "\"stores\":",
                                         "\"removes\":",
                                         "\"expired\":",
                                         "\"destroyed\":",
                                         "\"hit_rate\":",
                                         "\"hit_rate_note\":\"",
                                         "\"reads\":",
                                         "\"seqlock_retries\":0",
                                         "\"seqlock_retries_per_1k_reads\":0",
                                         "\"lock_fallbacks\":",
                                         "\"nomem\":0",
                                         "\"splits\":0",
                                         "\"log2_initial\":4",
                                         "\"reset_at\":0"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        has(f, fields[i]);
    ok(f, "perf_stats sessions");
    has(f, "\"collections\":[{\"collection\":\"sessions\",\"entries\":4,\"buckets\":16,"
           "\"load_factor\":0.25,\"overflow\":0,\"hits\":1,\"misses\":2,\"stores\":4");
    has(f, "\"hit_rate\":0.3333,");
    lacks(f, "\"collection\":\"th\"");
    ok(f, "perf_stats th");
    has(f, "\"hit_rate\":null,\"hit_rate_note\":\"no reads");
}

static void test_perf_stats_reset(void **state)
{
    struct fx *f = *state;
    ok(f, "perf_get profile-alice");
    ok(f, "perf_stats_reset sessions");
    assert_string_equal(f->out, "{\"reset\":1,\"collections\":[\"sessions\"]}");
    ok(f, "perf_stats sessions");
    has(f, "\"entries\":4,"); /* gauges unaffected */
    has(f, "\"hits\":0,\"misses\":0,\"stores\":0,");
    lacks(f, "\"reset_at\":0");
    ok(f, "perf_stats th");
    has(f, "\"stores\":2,");
    has(f, "\"reset_at\":0");
    ok(f, "perf_stats_reset");
    assert_string_equal(f->out,
                        "{\"reset\":4,\"collections\":[\"default\",\"sessions\",\"th\",\"grow\"]}");
    ok(f, "perf_stats th");
    has(f, "\"stores\":0,");
}

static void test_perf_keys(void **state)
{
    struct fx *f = *state;
    ok(f, "perf_keys \"session-*\"");
    has(f, "{\"collection\":\"sessions\",\"count\":2,\"truncated\":false,\"keys\":[");
    has(f, "{\"key\":\"session-abc123\",\"ttl\":3600}");
    has(f, "{\"key\":\"session-abd456\",\"ttl\":1800}");
    ok(f, "perf_keys \"*\"");
    has(f, "\"count\":4,");
    has(f, "{\"key\":\"hits\",\"ttl\":-1}");
    ok(f, "perf_keys \"*\" limit=3");
    has(f, "\"count\":3,\"truncated\":true");
    ok(f, "perf_keys \"*\" limit=4");
    has(f, "\"count\":4,\"truncated\":false");
    ok(f, "perf_keys \"*\" sessions 100000");
    ok(f, "perf_keys nothing");
    has(f, "\"count\":0,\"truncated\":false,\"keys\":[]}");
    /* the argument-order trap gets a note; a named collection does not */
    ok(f, "perf_keys th");
    has(f, "\"keys\":[],\"note\":\"no key is named \\\"th\\\" here");
    has(f, "perf_keys \\\"*\\\" th lists that collection");
    ok(f, "perf_keys th sessions");
    lacks(f, "note");
    ok(f, "perf_keys \"session-abc\\*\""); /* an escaped '*' is literal */
    has(f, "\"count\":0");
}

static void test_perf_scan(void **state)
{
    struct fx *f = *state;
    ok(f, "perf_scan 0 count=16");
    has(f, "{\"collection\":\"sessions\",\"cursor\":\"0\",\"keys\":[");
    has(f, "\"session-abc123\"");
    has(f, "\"hits\"");
    ok(f, "perf_scan 0 \"profile-*\" 16");
    has(f, "\"cursor\":\"0\",\"keys\":[\"profile-alice\"]}");
    ok(f, "perf_scan 0 count=1");
    has(f, "\"cursor\":\"1\"");
    ok(f, "perf_scan 15 count=1");
    has(f, "\"cursor\":\"0\"");
    ok(f, "perf_scan 0 collection=th");
    has(f, "\"collection\":\"th\",\"cursor\":\"10\"");
    ok(f, "perf_scan 0 \"\"");
    has(f, "\"keys\":[]");
}

/* Every key present throughout is returned by a cursor walk even while
 * the table splits between calls, and a returned cursor stays valid. */
static void test_perf_scan_growth(void **state)
{
    struct fx *f = *state;
    enum { N = 300 };
    pc_coll *g = coll(f, "grow");
    for (int i = 0; i < N; i++) {
        char k[16];
        int n = snprintf(k, sizeof k, "g%03d", i);
        assert_int_equal(pc_set(g, k, (size_t)n, "v", 1, 0, 0), 0);
    }
    bool seen[N] = {false};
    char cursor[24] = "0";
    int calls = 0;
    do {
        char line[96];
        snprintf(line, sizeof line, "perf_scan %s count=3 collection=grow", cursor);
        ok(f, line);
        const char *p = strstr(f->out, "\"cursor\":\"") + 10;
        size_t cl = strcspn(p, "\"");
        memcpy(cursor, p, cl);
        cursor[cl] = '\0';
        for (const char *k = strstr(f->out, "\"g"); k != NULL; k = strstr(k + 1, "\"g"))
            seen[atoi(k + 2)] = true;
        pc_maint_report rep;
        assert_true(pc_maintain(f->c, PC_MAINT_GROW, &rep) == 0);
        calls++;
    } while (strcmp(cursor, "0") != 0 && calls < 100000);
    for (int i = 0; i < N; i++)
        if (!seen[i])
            fail_msg("g%03d never returned by the scan", i);
    pc_coll_stats st;
    assert_int_equal(pc_coll_stats_get(g, &st), 0);
    assert_true(st.buckets > 16); /* it did grow under the scan */
    print_message("scan: %d calls, %llu buckets at the end\n", calls,
                  (unsigned long long)st.buckets);
}

static int fx_setup_growing(void **state)
{
    return fx_setup_cfg(state, 1);
}

static void test_perf_dump(void **state)
{
    struct fx *f = *state;
    ok(f, "perf_dump \"*\"");
    has(f, "{\"collection\":\"sessions\",\"count\":4,\"truncated\":false,\"entries\":[");
    has(f, "{\"key\":\"session-abc123\",\"value\":\"state=confirmed\",\"ttl\":3600,"
           "\"counter\":false}");
    has(f, "{\"key\":\"hits\",\"value\":\"6\",\"ttl\":-1,\"counter\":true}");
    ok(f, "perf_dump \"th-*\" th 1");
    has(f, "\"collection\":\"th\",\"count\":1,\"truncated\":true");
    ok(f, "perf_dump th");
    has(f, "\"note\":");
}

static void test_perf_mget(void **state)
{
    struct fx *f = *state;
    ok(f, "perf_mget \"*\" th");
    assert_true(strcmp(f->out, "{\"collection\":\"th\",\"count\":2,\"truncated\":false,\"keys\":"
                               "[\"th-1\",\"th-2\"],\"values\":[\"a\",\"b\"]}") == 0 ||
                strcmp(f->out, "{\"collection\":\"th\",\"count\":2,\"truncated\":false,\"keys\":"
                               "[\"th-2\",\"th-1\"],\"values\":[\"b\",\"a\"]}") == 0);
    ok(f, "perf_mget \"*\" th limit=1");
    has(f, "\"count\":1,\"truncated\":true");
    ok(f, "perf_mget hits");
    has(f, "\"keys\":[\"hits\"],\"values\":[\"6\"]}");
    ok(f, "perf_mget_json \"*\" th");
    has(f, "\"json\":\"{\\\"th-");
    has(f, "\\\"th-1\\\":\\\"a\\\"");
    has(f, "\\\"th-2\\\":\\\"b\\\"");
    ok(f, "perf_mget_json none");
    has(f, "\"json\":\"{}\"");
    /* the C helper gives the same object text */
    char *json = NULL;
    size_t len = 0;
    int trunc = -1;
    assert_int_equal(pc_mget_json(coll(f, "sessions"), S("profile-*"), 0, &json, &len, &trunc), 0);
    assert_string_equal(json, "{\"profile-alice\":\"gold\"}");
    assert_int_equal(len, strlen(json));
    assert_int_equal(trunc, 0);
    free(json);
    assert_int_equal(pc_mget_json(coll(f, "sessions"), S("*"), 2, &json, &len, &trunc), 0);
    assert_int_equal(trunc, 1);
    assert_true(json_valid(json, len));
    free(json);
    json = NULL;
    assert_int_equal(pc_mget_json(coll(f, "sessions"), S("a["), 0, &json, &len, NULL), PC_EINVAL);
    assert_int_equal(pc_mget_json(NULL, S("*"), 0, &json, &len, NULL), PC_EINVAL);
    assert_null(json);
}

static void test_perf_get(void **state)
{
    struct fx *f = *state;
    ok(f, "perf_get session-abc123");
    assert_string_equal(f->out, "{\"collection\":\"sessions\",\"key\":\"session-abc123\",\"value\":"
                                "\"state=confirmed\",\"ttl\":3600,\"size\":15,\"counter\":false}");
    ok(f, "perf_get hits");
    has(f, "\"value\":\"6\",\"ttl\":-1,\"size\":1,\"counter\":true}");
    ok(f, "perf_get greeting default");
    has(f, "\"value\":\"hello\"");
    bad(f, "perf_get greeting", PC_ENOTFOUND,
        "perf_get: key \"greeting\" not found in collection \"sessions\"");
    /* a key that just lapsed reads as absent */
    fx_put(f, "sessions", S("brief"), S("x"), 0);
    assert_int_equal(pc_expire(coll(f, "sessions"), S("brief"), 1), 0);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    assert_int_equal(run(f, "perf_get brief"), PC_ENOTFOUND);
}

static void test_perf_set(void **state)
{
    struct fx *f = *state;
    ok(f, "perf_set greeting hola 300 default");
    assert_string_equal(f->out,
                        "{\"collection\":\"default\",\"stored\":true,\"size\":4,\"ttl\":300}");
    ok(f, "perf_get greeting default");
    has(f, "\"value\":\"hola\",\"ttl\":300,");
    ok(f, "perf_set greeting forever ttl=0 collection=default");
    ok(f, "perf_get greeting default");
    has(f, "\"ttl\":-1");
    ok(f, "perf_set new-key \"\"");
    has(f, "\"collection\":\"sessions\",\"stored\":true,\"size\":0,\"ttl\":-1}");
    ok(f, "perf_set hits text");
    ok(f, "perf_get hits");
    has(f, "\"counter\":false");
    ok(f, "perf_set max-ttl v 315360000");
    ok(f, "perf_keys max-ttl");
    has(f, "\"ttl\":315360000");
}

static void test_perf_ttl(void **state)
{
    struct fx *f = *state;
    ok(f, "perf_ttl \"session-*\" 60");
    assert_string_equal(f->out, "{\"collection\":\"sessions\",\"updated\":2}");
    ok(f, "perf_keys \"session-*\"");
    has(f, "{\"key\":\"session-abc123\",\"ttl\":60}");
    ok(f, "perf_ttl profile-alice 5");
    has(f, "\"updated\":1");
    ok(f, "perf_ttl \"*\" 0 th");
    has(f, "\"collection\":\"th\",\"updated\":2");
    ok(f, "perf_keys th-1 th");
    has(f, "\"ttl\":-1");
    ok(f, "perf_ttl none 10");
    has(f, "\"updated\":0");
}

static void test_perf_del(void **state)
{
    struct fx *f = *state;
    ok(f, "perf_del \"session-ab*\"");
    assert_string_equal(f->out, "{\"collection\":\"sessions\",\"deleted\":2}");
    ok(f, "perf_keys \"session-*\"");
    has(f, "\"count\":0");
    ok(f, "perf_del \"*\" th");
    has(f, "\"collection\":\"th\",\"deleted\":2");
    ok(f, "perf_del \"*\" th");
    has(f, "\"deleted\":0");
    ok(f, "perf_keys \"*\"");
    has(f, "\"count\":2");
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_parse),
        T(test_binding),
        T(test_perf_stats),
        T(test_perf_stats_reset),
        T(test_perf_keys),
        T(test_perf_scan),
        cmocka_unit_test_setup_teardown(test_perf_scan_growth, fx_setup_growing, fx_teardown),
        T(test_perf_dump),
        T(test_perf_mget),
        T(test_perf_get),
        T(test_perf_set),
        T(test_perf_ttl),
        T(test_perf_del),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
