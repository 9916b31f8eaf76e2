/*
 * test_mgmt_json.c - the management layer's JSON backend (src/mgmt/): its
 * byte escaping and its structure, and binary keys and values staying
 * valid JSON in every command's reply (mgmt_testlib.h: a strict validator
 * and a decoder that must give the original bytes back).
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

/* ---- the JSON backend ----------------------------------------------------- */
static char *json_of(const void *s, size_t n, pc_json *j)
{
    const pc_result_ops *o = pc_json_ops();
    pc_json_reset(j);
    assert_int_equal(o->obj_begin(j, NULL), 0);
    assert_int_equal(o->str(j, "v", s, n), 0);
    assert_int_equal(o->obj_end(j), 0);
    const char *t;
    size_t len;
    assert_int_equal(pc_json_text(j, &t, &len), 0);
    assert_true(json_valid(t, len));
    unsigned char back[4096];
    size_t bl = json_decode(t + 5, back, sizeof back); /* {"v":"... */
    assert_int_equal(bl, n);
    assert_memory_equal(back, s, n);
    return strdup(t);
}

static void test_json_escaping(void **state)
{
    (void)state;
    pc_json *j;
    assert_int_equal(pc_json_create(&j), 0);
    static const struct {
        const char *in;
        size_t n;
        const char *out;
    } cases[] = {
        {S("plain"), "{\"v\":\"plain\"}"},
        {S("\0"), "{\"v\":\"\\u0000\"}"},
        {S("q\"b\\s/"), "{\"v\":\"q\\\"b\\\\s/\"}"},
        {S("\b\f\n\r\t\x01\x1f\x7f"), "{\"v\":\"\\b\\f\\n\\r\\t\\u0001\\u001f\\u007f\"}"},
        {S("\xc3\xa9"), "{\"v\":\"\xc3\xa9\"}"},                             /* é: copied */
        {S("\xf0\x9f\x98\x80"), "{\"v\":\"\xf0\x9f\x98\x80\"}"},             /* U+1F600 */
        {S("\xff\xfe"), "{\"v\":\"\\u00ff\\u00fe\"}"},                       /* never UTF-8 */
        {S("\xc0\x80"), "{\"v\":\"\\u00c0\\u0080\"}"},                       /* overlong NUL */
        {S("\xed\xa0\x80"), "{\"v\":\"\\u00ed\\u00a0\\u0080\"}"},            /* a surrogate */
        {S("\xf4\x90\x80\x80"), "{\"v\":\"\\u00f4\\u0090\\u0080\\u0080\"}"}, /* > U+10FFFF */
        {S("\xe2\x82"), "{\"v\":\"\\u00e2\\u0082\"}"},                       /* truncated */
        {S("a\xe2\x82\xacz"), "{\"v\":\"a\xe2\x82\xacz\"}"},                 /* € between */
        {S("\xc3\xc3\xa9"), "{\"v\":\"\\u00c3\xc3\xa9\"}"}, /* bad lead, good pair */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *t = json_of(cases[i].in, cases[i].n, j);
        if (strcmp(t, cases[i].out) != 0)
            fail_msg("case %zu: %s, want %s", i, t, cases[i].out);
        free(t);
    }
    unsigned char all[256]; /* every byte, alone and together, and random runs */
    for (int b = 0; b < 256; b++) {
        all[b] = (unsigned char)b;
        free(json_of(all + b, 1, j));
    }
    free(json_of(all, 256, j));
    srand(7);
    for (int r = 0; r < 2000; r++) {
        unsigned char buf[64];
        size_t n = (size_t)(rand() % 64);
        for (size_t k = 0; k < n; k++)
            buf[k] = (unsigned char)(rand() % 4 == 0 ? 0x80 + rand() % 0x80 : rand() % 256);
        free(json_of(buf, n, j));
    }
    pc_json_destroy(j);
}

static void test_json_structure(void **state)
{
    (void)state;
    pc_json *j;
    const pc_result_ops *o = pc_json_ops();
    const char *t;
    size_t n;
    assert_int_equal(pc_json_create(&j), 0);
    assert_int_equal(pc_json_text(j, &t, &n), PC_EINVAL); /* nothing yet */
    assert_int_equal(o->obj_begin(j, NULL), 0);
    assert_int_equal(o->i64(j, "i", INT64_MIN), 0);
    assert_int_equal(o->u64(j, "u", UINT64_MAX), 0);
    assert_int_equal(o->dbl(j, "d", 0.1875), 0);
    assert_int_equal(o->dbl(j, "nan", 0.0 / 0.0), 0);
    assert_int_equal(o->boolean(j, "b", 1), 0);
    assert_int_equal(o->null(j, "z"), 0);
    assert_int_equal(o->arr_begin(j, "a"), 0);
    assert_int_equal(o->obj_begin(j, NULL), 0);
    assert_int_equal(o->obj_end(j), 0);
    assert_int_equal(o->arr_begin(j, NULL), 0);
    assert_int_equal(o->arr_end(j), 0);
    assert_int_equal(o->str(j, NULL, "", 0), 0);
    assert_int_equal(o->arr_end(j), 0);
    assert_int_equal(pc_json_text(j, &t, &n), PC_EINVAL); /* still open */
    assert_int_equal(o->obj_end(j), 0);
    assert_int_equal(pc_json_text(j, &t, &n), 0);
    assert_string_equal(t, "{\"i\":-9223372036854775808,\"u\":18446744073709551615,\"d\":0.1875,"
                           "\"nan\":null,\"b\":true,\"z\":null,\"a\":[{},[],\"\"]}");
    assert_int_equal(n, strlen(t));
    assert_int_equal(o->null(j, NULL), PC_EINVAL);        /* a second root */
    assert_int_equal(pc_json_text(j, &t, &n), PC_EINVAL); /* sticky */
    pc_json_reset(j);
    assert_int_equal(o->obj_begin(j, NULL), 0);
    assert_int_equal(o->u64(j, NULL, 1), PC_EINVAL); /* a member needs a name */
    assert_int_equal(o->obj_end(j), PC_EINVAL);
    pc_json_reset(j);
    assert_int_equal(o->arr_end(j), PC_EINVAL); /* nothing open */
    pc_json_reset(j);
    int rc = 0;
    for (int d = 0; d < 40 && rc == 0; d++)
        rc = o->arr_begin(j, NULL);
    assert_int_equal(rc, PC_EINVAL); /* 32 levels at most */
    pc_json_destroy(j);
    pc_json_destroy(NULL);
}

/* ---- binary keys and values stay valid JSON everywhere ---------------------- */
static void test_binary_json(void **state)
{
    struct fx *f = *state;
    static const struct {
        const char *k;
        size_t kl;
        const char *v;
        size_t vl;
    } kv[] = {
        {S("bin\0nul"), S("v\0\0v")},
        {S("bin\"quote\"\\"), S("\\\"\\\"")},
        {S("bin\x01\x1f\x7f\n\t"), S("\r\b\f")},
        {S("bin\xff\xfe\xc0\x80"), S("\xed\xa0\x80\xf4\x90\x80\x80\xe2\x82")},
        {S("bin\xc3\xa9\xf0\x9f\x98\x80"), S("\xe2\x82\xac ok")},
    };
    size_t n = sizeof kv / sizeof kv[0];
    for (size_t i = 0; i < n; i++)
        fx_put(f, "th", kv[i].k, kv[i].kl, kv[i].v, kv[i].vl, 0);
    static const char *const lines[] = {"perf_keys \"bin*\" th",      "perf_dump \"bin*\" th",
                                        "perf_mget \"bin*\" th",      "perf_mget_json \"bin*\" th",
                                        "perf_scan 0 \"bin*\" 16 th", "perf_stats th"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        ok(f, lines[i]); /* run() validates the reply */
        if (strstr(lines[i], "bin*") != NULL && strstr(lines[i], "scan") == NULL)
            has(f, "\"count\":5,");
    }
    /* the object text inside perf_mget_json is itself valid JSON */
    ok(f, "perf_mget_json \"bin*\" th");
    unsigned char inner[4096];
    size_t il = json_decode(strstr(f->out, "\"json\":") + 7, inner, sizeof inner);
    assert_true(json_valid((const char *)inner, il));
    /* every key and value comes back byte for byte through perf_get */
    for (size_t i = 0; i < n; i++) {
        pc_mgmt_arg a[] = {{"key", 3, kv[i].k, kv[i].kl}, {"collection", 10, S("th")}};
        assert_int_equal(runv(f, "perf_get", a, 2), 0);
        unsigned char back[256];
        size_t bl = json_decode(strstr(f->out, "\"key\":") + 6, back, sizeof back);
        assert_int_equal(bl, kv[i].kl);
        assert_memory_equal(back, kv[i].k, bl);
        bl = json_decode(strstr(f->out, "\"value\":") + 8, back, sizeof back);
        assert_int_equal(bl, kv[i].vl);
        assert_memory_equal(back, kv[i].v, bl);
    }
    /* and through perf_set from a command line with \x escapes */
    ok(f, "perf_set \"b\\x00\\xff\\\"\\\\\" \"\\x01\\x80\\xc3\\xa9\" 0 th");
    pc_mgmt_arg g[] = {{NULL, 0, "b\0\xff\"\\", 5}, {NULL, 0, S("th")}};
    assert_int_equal(runv(f, "perf_get", g, 2), 0);
    assert_string_equal(f->out,
                        "{\"collection\":\"th\",\"key\":\"b\\u0000\\u00ff\\\"\\\\\",\"value\":"
                        "\"\\u0001\\u0080\xc3\xa9\",\"ttl\":-1,\"size\":4,\"counter\":false}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_escaping),
        cmocka_unit_test(test_json_structure),
        cmocka_unit_test_setup_teardown(test_binary_json, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
