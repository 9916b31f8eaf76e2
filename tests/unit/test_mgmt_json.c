/*
 * test_mgmt_json.c - the management layer's JSON backend (src/mgmt/): the
 * one convention for byte strings (text as a JSON string, anything else as
 * "<name>_b64" / {"b64":...}), the base64 helpers, its structure, and
 * binary keys and values staying valid JSON in every command's reply
 * (mgmt_testlib.h's strict validator, then jansson, a standard parser,
 * must give the original bytes back).
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

#include <jansson.h>

#include "mgmt_testlib.h"
#include "pcache_mgmt.h"

/* ---- the JSON backend ----------------------------------------------------- */

/* The bytes of byte-string member name of object o by the convention:
 * "name" (a string) or "name_b64" (base64); a {"b64"} object when o is
 * that object itself (name NULL). Returns the length, or (size_t)-1. */
static size_t member_bytes(json_t *o, const char *name, unsigned char *out, size_t cap)
{
    json_t *v = name != NULL ? json_object_get(o, name) : NULL;
    if (v != NULL) {
        assert_true(json_is_string(v));
        size_t n = json_string_length(v);
        assert_true(n <= cap);
        memcpy(out, json_string_value(v), n);
        assert_false(json_object_get(o, "v_b64") != NULL && strcmp(name, "v") == 0);
        return n;
    }
    char nm[64];
    snprintf(nm, sizeof nm, "%s_b64", name != NULL ? name : "b64");
    v = json_object_get(o, name != NULL ? nm : "b64");
    if (!json_is_string(v))
        return (size_t)-1;
    size_t n;
    assert_int_equal(pc_b64_decode(json_string_value(v), json_string_length(v), out, cap, &n), 0);
    assert_false(pc_text_ok(out, n)); /* base64 only for what is not text */
    return n;
}

static char *json_of(const void *s, size_t n, pc_json *j)
{
    const pc_result_ops *o = pc_json_ops();
    pc_json_reset(j);
    assert_int_equal(o->obj_begin(j, NULL), 0);
    assert_int_equal(o->str(j, "v", s, n), 0);
    assert_int_equal(o->arr_begin(j, "a"), 0);
    assert_int_equal(o->str(j, NULL, s, n), 0);
    assert_int_equal(o->arr_end(j), 0);
    assert_int_equal(o->obj_end(j), 0);
    const char *t;
    size_t len;
    assert_int_equal(pc_json_text(j, &t, &len), 0);
    assert_true(json_valid(t, len));
    json_error_t e;
    json_t *doc = json_loadb(t, len, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &e);
    if (doc == NULL)
        fail_msg("jansson: %s: %s", e.text, t);
    unsigned char back[4096];
    size_t bl = member_bytes(doc, "v", back, sizeof back);
    assert_int_equal(bl, n);
    assert_memory_equal(back, s, n);
    json_t *el = json_array_get(json_object_get(doc, "a"), 0);
    if (json_is_string(el)) {
        assert_true(pc_text_ok(s, n));
        assert_int_equal(json_string_length(el), n);
        assert_memory_equal(json_string_value(el), s, n);
    } else {
        assert_false(pc_text_ok(s, n));
        assert_int_equal(json_object_size(el), 1);
        bl = member_bytes(el, NULL, back, sizeof back);
        assert_int_equal(bl, n);
        assert_memory_equal(back, s, n);
    }
    json_decref(doc);
    char *r = strdup(t);
    *strstr(r, ",\"a\":") = '\0'; /* the member alone, for the cases below */
    return r;
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
        {S("plain"), "{\"v\":\"plain\""},
        {S(""), "{\"v\":\"\""},
        {S("\0"), "{\"v_b64\":\"AA==\""}, /* NUL: not text (MI strings are C strings) */
        {S("q\"b\\s/"), "{\"v\":\"q\\\"b\\\\s/\""},
        {S("\b\f\n\r\t\x01\x1f\x7f"), "{\"v\":\"\\b\\f\\n\\r\\t\\u0001\\u001f\\u007f\""},
        {S("\xc3\xa9"), "{\"v\":\"\xc3\xa9\""},                 /* é: copied */
        {S("na\xc3\xafve"), "{\"v\":\"na\xc3\xafve\""},         /* naïve */
        {S("\xf0\x9f\x98\x80"), "{\"v\":\"\xf0\x9f\x98\x80\""}, /* U+1F600 */
        {S("\xff\xfe"), "{\"v_b64\":\"//4=\""},                 /* never UTF-8 */
        {S("\xc0\x80"), "{\"v_b64\":\"wIA=\""},                 /* overlong NUL */
        {S("\xed\xa0\x80"), "{\"v_b64\":\"7aCA\""},             /* a surrogate */
        {S("\xf4\x90\x80\x80"), "{\"v_b64\":\"9JCAgA==\""},     /* > U+10FFFF */
        {S("\xe2\x82"), "{\"v_b64\":\"4oI=\""},                 /* truncated */
        {S("a\xe2\x82\xacz"), "{\"v\":\"a\xe2\x82\xacz\""},     /* € between */
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

/* RFC 4648 §10's vectors, both ways, and what the decoder refuses. */
static void test_base64(void **state)
{
    (void)state;
    static const char *const vec[][2] = {{"", ""},
                                         {"f", "Zg=="},
                                         {"fo", "Zm8="},
                                         {"foo", "Zm9v"},
                                         {"foob", "Zm9vYg=="},
                                         {"fooba", "Zm9vYmE="},
                                         {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        char out[16];
        unsigned char back[16];
        size_t n, m;
        assert_int_equal(pc_b64_encode(vec[i][0], strlen(vec[i][0]), out, sizeof out, &n), 0);
        assert_int_equal(n, strlen(vec[i][1]));
        assert_int_equal(n, pc_b64_len(strlen(vec[i][0])));
        assert_memory_equal(out, vec[i][1], n);
        assert_int_equal(pc_b64_decode(vec[i][1], n, back, sizeof back, &m), 0);
        assert_int_equal(m, strlen(vec[i][0]));
        assert_memory_equal(back, vec[i][0], m);
    }
    static const char *const bad[] = {
        "Zg=", "Zg", "Z===", "Zh==", "Zm9=", "Zg==Zg==", "Zm9v\n", "Zm 9", "Zm-v", "=Zg="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned char back[16];
        size_t m;
        if (pc_b64_decode(bad[i], strlen(bad[i]), back, sizeof back, &m) != PC_EINVAL)
            fail_msg("'%s' decoded", bad[i]);
    }
    char small[3];
    size_t n;
    assert_int_equal(pc_b64_encode("f", 1, small, sizeof small, &n), PC_ETOOBIG);
    unsigned char b2[2];
    assert_int_equal(pc_b64_decode("Zm9v", 4, b2, sizeof b2, &n), PC_ETOOBIG);
    assert_true(pc_text_ok("", 0));
    assert_false(pc_text_ok("a\0", 2));
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
    /* every key and value comes back byte for byte through perf_get, read
     * by a standard parser */
    for (size_t i = 0; i < n; i++) {
        pc_mgmt_arg a[] = {{"key", 3, kv[i].k, kv[i].kl}, {"collection", 10, S("th")}};
        assert_int_equal(runv(f, "perf_get", a, 2), 0);
        json_t *doc = json_loadb(f->out, f->outlen, JSON_ALLOW_NUL, NULL);
        assert_non_null(doc);
        unsigned char back[256];
        size_t bl = member_bytes(doc, "key", back, sizeof back);
        assert_int_equal(bl, kv[i].kl);
        assert_memory_equal(back, kv[i].k, bl);
        bl = member_bytes(doc, "value", back, sizeof back);
        assert_int_equal(bl, kv[i].vl);
        assert_memory_equal(back, kv[i].v, bl);
        json_decref(doc);
    }
    /* perf_mget_json: "key":"text", "key":{"b64"}, and a key that is not
     * text named by its base64 with {"key_b64","value"|"value_b64"} */
    ok(f, "perf_mget_json \"bin*\" th");
    json_t *doc = json_loadb(f->out, f->outlen, 0, NULL);
    assert_non_null(doc);
    json_t *in2 = json_loads(json_string_value(json_object_get(doc, "json")), 0, NULL);
    assert_non_null(in2);
    assert_int_equal(json_object_size(in2), n);
    for (size_t i = 0; i < n; i++) {
        unsigned char back[256];
        size_t bl;
        json_t *m;
        if (pc_text_ok(kv[i].k, kv[i].kl)) {
            m = json_object_getn(in2, kv[i].k, kv[i].kl);
            assert_non_null(m);
            if (json_is_string(m)) {
                assert_int_equal(json_string_length(m), kv[i].vl);
                assert_memory_equal(json_string_value(m), kv[i].v, kv[i].vl);
                continue;
            }
            bl = member_bytes(m, NULL, back, sizeof back);
        } else {
            char k64[64];
            size_t kn;
            assert_int_equal(pc_b64_encode(kv[i].k, kv[i].kl, k64, sizeof k64, &kn), 0);
            m = json_object_getn(in2, k64, kn);
            assert_non_null(m);
            bl = member_bytes(m, "key", back, sizeof back);
            assert_int_equal(bl, kv[i].kl);
            assert_memory_equal(back, kv[i].k, bl);
            bl = member_bytes(m, "value", back, sizeof back);
        }
        assert_int_equal(bl, kv[i].vl);
        assert_memory_equal(back, kv[i].v, bl);
    }
    json_decref(in2);
    json_decref(doc);
    /* and through perf_set from a command line with \x escapes */
    ok(f, "perf_set \"b\\x00\\xff\\\"\\\\\" \"\\x01\\x80\\xc3\\xa9\" 0 th");
    pc_mgmt_arg g[] = {{NULL, 0, "b\0\xff\"\\", 5}, {NULL, 0, S("th")}};
    assert_int_equal(runv(f, "perf_get", g, 2), 0);
    assert_string_equal(f->out, "{\"collection\":\"th\",\"key_b64\":\"YgD/Ilw=\",\"value_b64\":"
                                "\"AYDDqQ==\",\"ttl\":-1,\"size\":4,\"counter\":false}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_escaping),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_json_structure),
        cmocka_unit_test_setup_teardown(test_binary_json, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
