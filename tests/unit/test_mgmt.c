/*
 * test_mgmt.c - the management command layer (src/mgmt/): the JSON backend
 * and its byte escaping, the command-line tokenizer, the binding of
 * positional and named arguments, every built-in command's normal output,
 * every kind of bad input (with a check that the bad call emitted nothing
 * and changed nothing in the table), perf_scan across concurrent growth,
 * builder failures, and the extension points (pc_mgmt_register and the
 * perf_stats hook).
 *
 * Replies are checked two ways: a strict RFC 8259 validator (which also
 * requires every raw byte in a string to be well-formed UTF-8), and a
 * decoder of our byte convention (\u0000..\u00ff = one byte) that must give
 * the original bytes back. Expected fields are then found with plain
 * string searches, which the compact output makes exact. The outputs
 * shown to users are checked separately by test_mgmt_docs.c.
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

#include "pcache_mgmt.h"

#define S(lit) lit, (sizeof(lit) - 1)

/* ---- a strict JSON validator ---------------------------------------------- */
struct jp {
    const unsigned char *s;
    size_t n, i;
    int depth;
};

static void jws(struct jp *p)
{
    while (p->i < p->n &&
           (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

/* Length of a well-formed UTF-8 sequence (RFC 3629) at s, 0 if none. */
static size_t utf8_ok(const unsigned char *s, size_t n)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;
    size_t need = c >= 0xc2 && c <= 0xdf   ? 2
                  : c >= 0xe0 && c <= 0xef ? 3
                  : c >= 0xf0 && c <= 0xf4 ? 4
                                           : 0;
    if (c == 0xe0)
        lo = 0xa0;
    if (c == 0xed)
        hi = 0x9f;
    if (c == 0xf0)
        lo = 0x90;
    if (c == 0xf4)
        hi = 0x8f;
    if (need == 0 || n < need || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < need; k++)
        if (s[k] < 0x80 || s[k] > 0xbf)
            return 0;
    return need;
}

static bool jstring(struct jp *p)
{
    if (p->i >= p->n || p->s[p->i] != '"')
        return false;
    for (p->i++; p->i < p->n;) {
        unsigned char c = p->s[p->i];
        if (c == '"') {
            p->i++;
            return true;
        }
        if (c < 0x20)
            return false;
        if (c == '\\') {
            if (p->i + 1 >= p->n)
                return false;
            char e = (char)p->s[p->i + 1];
            if (e == 'u') {
                for (int k = 2; k < 6; k++)
                    if (p->i + (size_t)k >= p->n ||
                        !strchr("0123456789abcdefABCDEF", p->s[p->i + k]) || p->s[p->i + k] == 0)
                        return false;
                p->i += 6;
            } else if (e && strchr("\"\\/bfnrt", e)) {
                p->i += 2;
            } else
                return false;
        } else if (c >= 0x80) {
            size_t l = utf8_ok(p->s + p->i, p->n - p->i);
            if (l == 0)
                return false;
            p->i += l;
        } else
            p->i++;
    }
    return false;
}

static bool jdigits(struct jp *p)
{
    size_t st = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
        p->i++;
    return p->i > st;
}

static bool jvalue(struct jp *p);

static bool jcontainer(struct jp *p, char open, char close)
{
    if (++p->depth > 64)
        return false;
    p->i++;
    jws(p);
    if (p->i < p->n && p->s[p->i] == (unsigned char)close) {
        p->i++;
        p->depth--;
        return true;
    }
    for (;;) {
        jws(p);
        if (open == '{') {
            if (!jstring(p))
                return false;
            jws(p);
            if (p->i >= p->n || p->s[p->i++] != ':')
                return false;
        }
        if (!jvalue(p))
            return false;
        jws(p);
        if (p->i >= p->n)
            return false;
        unsigned char c = p->s[p->i++];
        if (c == (unsigned char)close) {
            p->depth--;
            return true;
        }
        if (c != ',')
            return false;
    }
}

static bool jvalue(struct jp *p)
{
    jws(p);
    if (p->i >= p->n)
        return false;
    unsigned char c = p->s[p->i];
    if (c == '{')
        return jcontainer(p, '{', '}');
    if (c == '[')
        return jcontainer(p, '[', ']');
    if (c == '"')
        return jstring(p);
    static const char *const lits[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t l = strlen(lits[k]);
        if (p->n - p->i >= l && memcmp(p->s + p->i, lits[k], l) == 0) {
            p->i += l;
            return true;
        }
    }
    if (c == '-')
        p->i++;
    if (p->i < p->n && p->s[p->i] == '0')
        p->i++;
    else if (!jdigits(p))
        return false;
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        if (!jdigits(p))
            return false;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        if (!jdigits(p))
            return false;
    }
    return true;
}

static bool json_valid(const char *s, size_t n)
{
    struct jp p = {(const unsigned char *)s, n, 0, 0};
    if (!jvalue(&p))
        return false;
    jws(&p);
    return p.i == n;
}

/* Decodes the JSON string starting at s (at its opening quote) by our byte
 * convention into out (cap bytes); returns the byte count. */
static size_t json_decode(const char *s, unsigned char *out, size_t cap)
{
    size_t o = 0;
    assert_true(*s == '"');
    for (s++; *s != '"'; s++) {
        assert_true(o < cap);
        if (*s != '\\') {
            out[o++] = (unsigned char)*s;
            continue;
        }
        s++;
        const char *map = strchr("\"\"\\\\//b\bf\fn\nr\rt\t", *s);
        if (*s != 'u') {
            assert_non_null(map);
            out[o++] = (unsigned char)map[1];
            continue;
        }
        char hex[5] = {s[1], s[2], s[3], s[4], 0};
        unsigned long cp = strtoul(hex, NULL, 16);
        assert_true(cp <= 0xff); /* the backend never escapes past U+00FF */
        out[o++] = (unsigned char)cp;
        s += 4;
    }
    return o;
}

/* ---- the fixture ------------------------------------------------------------ */
struct fx {
    pc_cache *c;
    pc_mgmt *m;
    pc_json *j;
    const char *out; /* last reply (valid until the next run) */
    size_t outlen;
    pc_mgmt_err err;
};

static pc_coll *coll(struct fx *f, const char *name)
{
    pc_coll *co = NULL;
    assert_int_equal(pc_coll_find(f->c, name, strlen(name), &co), 0);
    return co;
}

static void fx_put(struct fx *f, const char *cn, const void *k, size_t kl, const void *v, size_t vl,
                   int64_t ttl_s)
{
    assert_int_equal(pc_set(coll(f, cn), k, kl, v, vl, ttl_s * 1000, 0), 0);
}

static int fx_setup_cfg(void **state, unsigned growth)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "default;sessions=4;th=4;grow=4";
    cfg.mem_mb = 32;
    cfg.growth_load_factor = growth;
    cfg.growth_budget = 2;
    assert_int_equal(pc_cache_create(&cfg, &f->c), 0);
    fx_put(f, "sessions", S("session-abc123"), S("state=confirmed"), 3600);
    fx_put(f, "sessions", S("session-abd456"), S("state=early"), 1800);
    fx_put(f, "sessions", S("profile-alice"), S("gold"), 0);
    assert_int_equal(pc_add(coll(f, "sessions"), S("hits"), 6, 0, NULL), 0);
    fx_put(f, "th", S("th-1"), S("a"), 120);
    fx_put(f, "th", S("th-2"), S("b"), 0);
    fx_put(f, "default", S("greeting"), S("hello"), 0);
    assert_int_equal(pc_mgmt_create(f->c, "sessions", &f->m), 0);
    assert_int_equal(pc_json_create(&f->j), 0);
    *state = f;
    return 0;
}

static int fx_setup(void **state)
{
    return fx_setup_cfg(state, 0);
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    pc_json_destroy(f->j);
    pc_mgmt_destroy(f->m);
    pc_cache_destroy(f->c);
    free(f);
    return 0;
}

/* Checks a finished reply: valid JSON. Returns rc. */
static int finish(struct fx *f, int rc)
{
    f->out = NULL;
    f->outlen = 0;
    if (rc != 0) {
        assert_int_equal(f->err.code, rc);
        assert_true(strlen(f->err.msg) > 0);
        return rc;
    }
    assert_int_equal(pc_json_text(f->j, &f->out, &f->outlen), 0);
    if (!json_valid(f->out, f->outlen))
        fail_msg("invalid JSON: %s", f->out);
    return 0;
}

static int run(struct fx *f, const char *line)
{
    pc_json_reset(f->j);
    memset(&f->err, 0, sizeof f->err);
    return finish(f, pc_mgmt_run_line(f->m, line, strlen(line), pc_json_ops(), f->j, &f->err));
}

static int runv(struct fx *f, const char *cmd, const pc_mgmt_arg *a, unsigned n)
{
    pc_json_reset(f->j);
    memset(&f->err, 0, sizeof f->err);
    return finish(f, pc_mgmt_run(f->m, cmd, a, n, pc_json_ops(), f->j, &f->err));
}

static void ok(struct fx *f, const char *line)
{
    int rc = run(f, line);
    if (rc != 0)
        fail_msg("%s: %d %s", line, rc, f->err.msg);
}

static void has(struct fx *f, const char *needle)
{
    if (f->out == NULL || strstr(f->out, needle) == NULL)
        fail_msg("reply lacks %s: %s", needle, f->out ? f->out : "(none)");
}

static void lacks(struct fx *f, const char *needle)
{
    if (f->out != NULL && strstr(f->out, needle) != NULL)
        fail_msg("reply has %s: %s", needle, f->out);
}

/* Every entry of every collection as sorted text: key, value, counter flag
 * and TTL in minutes (so a re-arm shows, the passing seconds do not). */
struct snap {
    char **lines;
    size_t n, cap;
    const char *cname;
};

static int snap_cb(void *ctx, const pc_entry *e)
{
    struct snap *s = ctx;
    char *line = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&line, &len);
    fprintf(fp, "%s|", s->cname);
    for (size_t i = 0; i < e->klen; i++)
        fprintf(fp, "%02x", ((const unsigned char *)e->key)[i]);
    fputc('|', fp);
    for (size_t i = 0; i < e->vlen; i++)
        fprintf(fp, "%02x", ((const unsigned char *)e->val)[i]);
    fprintf(fp, "|%d|%lld", e->is_counter,
            e->ttl_ms < 0 ? -1LL : (long long)((e->ttl_ms + 30000) / 60000));
    fclose(fp);
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->lines = realloc(s->lines, s->cap * sizeof *s->lines);
    }
    s->lines[s->n++] = line;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *snapshot(struct fx *f)
{
    struct snap s = {0};
    for (unsigned i = 0; i < pc_coll_count(f->c); i++) {
        pc_coll *co = pc_coll_at(f->c, i);
        s.cname = pc_coll_name(co);
        assert_int_equal(pc_walk(co, NULL, 0, PC_WALK_VALUES, snap_cb, &s), 0);
    }
    qsort(s.lines, s.n, sizeof *s.lines, cmp_str);
    char *all = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&all, &len);
    for (size_t i = 0; i < s.n; i++) {
        fprintf(fp, "%s\n", s.lines[i]);
        free(s.lines[i]);
    }
    /* the counter baselines too: a failed perf_stats_reset must not reset */
    for (unsigned i = 0; i < pc_coll_count(f->c); i++) {
        pc_coll_stats st;
        assert_int_equal(pc_coll_stats_get(pc_coll_at(f->c, i), &st), 0);
        fprintf(fp, "reset_at %lld stores %llu\n", (long long)st.reset_at,
                (unsigned long long)st.stores);
    }
    fclose(fp);
    free(s.lines);
    return all;
}

/* Runs a call that must fail with rc and a message containing want, emit
 * nothing, and change nothing. */
static void bad_common(struct fx *f, const char *what, int got, int rc, const char *want,
                       const char *before)
{
    if (got != rc)
        fail_msg("%s: rc %d (%s), want %d", what, got, f->err.msg, rc);
    if (strstr(f->err.msg, want) == NULL)
        fail_msg("%s: message \"%s\" lacks \"%s\"", what, f->err.msg, want);
    const char *t;
    size_t n;
    assert_int_equal(pc_json_text(f->j, &t, &n), PC_EINVAL); /* nothing was emitted */
    char *after = snapshot(f);
    if (strcmp(before, after) != 0)
        fail_msg("%s changed the table:\n%s---\n%s", what, before, after);
    free(after);
}

static void bad(struct fx *f, const char *line, int rc, const char *want)
{
    char *before = snapshot(f);
    bad_common(f, line, run(f, line), rc, want, before);
    free(before);
}

static void badv(struct fx *f, const char *cmd, const pc_mgmt_arg *a, unsigned n, int rc,
                 const char *want)
{
    char *before = snapshot(f);
    bad_common(f, cmd, runv(f, cmd, a, n), rc, want, before);
    free(before);
}

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

/* ---- extending the table ----------------------------------------------------- */
struct ext {
    int runs;
    pc_coll *coll;
    uint64_t n;
    int n_given;
};

static int ext_run(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                   pc_mgmt_err *err)
{
    struct ext *x = ctx;
    size_t len;
    const void *store = pc_mgmt_call_bytes(call, 1, &len);
    x->runs++;
    x->coll = pc_mgmt_call_coll(call, 0);
    x->n = pc_mgmt_call_uint(call, 2);
    x->n_given = pc_mgmt_call_given(call, 2);
    assert_ptr_equal(pc_mgmt_call_mgmt(call), pc_mgmt_call_mgmt(call));
    if (store != NULL && len == 4 && memcmp(store, "fail", 4) == 0)
        return pc_mgmt_errorf(err, PC_ESYS, "perf_save: store \"fail\" is not writable");
    if (store != NULL && len == 5 && memcmp(store, "plain", 5) == 0)
        return PC_ECONFIG; /* no message: the layer names the code */
    int rc;
    if ((rc = o->obj_begin(r, NULL)) == 0 &&
        (rc = o->u64(r, "collections",
                     x->coll ? 1 : pc_coll_count(pc_mgmt_cache(pc_mgmt_call_mgmt(call))))) == 0 &&
        (rc = (store ? o->str(r, "store", store, len) : o->null(r, "store"))) == 0)
        rc = o->obj_end(r);
    return rc;
}

static int ext_stats(void *ctx, pc_coll *c, const pc_result_ops *o, void *r)
{
    (void)ctx;
    return o->i64(r, "last_save", strcmp(pc_coll_name(c), "th") == 0 ? 1700000000 : 0);
}

static void test_register(void **state)
{
    struct fx *f = *state;
    static const pc_mgmt_param params[] = {
        {"collection", PC_MP_COLL_ALL, 0, NULL, 0, 0, "collection (default: all)"},
        {"store", PC_MP_STRING, 0, NULL, 0, 16, "store URL"},
        {"batch", PC_MP_UINT, 0, "500", 1, 10000, "rows per batch"},
    };
    struct ext x = {0};
    pc_mgmt_cmd cmd = {"perf_save", "snapshot collections", params, 3, ext_run, &x};
    unsigned before = pc_mgmt_cmd_count(f->m);
    assert_int_equal(before, 11);
    assert_int_equal(pc_mgmt_register(f->m, &cmd), 0);
    assert_int_equal(pc_mgmt_cmd_count(f->m), before + 1);
    assert_string_equal(pc_mgmt_cmd_at(f->m, before)->name, "perf_save");
    assert_ptr_equal(pc_mgmt_cmd_find(f->m, "perf_save"), pc_mgmt_cmd_at(f->m, before));
    assert_null(pc_mgmt_cmd_find(f->m, "perf_load"));
    assert_null(pc_mgmt_cmd_at(f->m, before + 1));
    assert_int_equal(pc_mgmt_register(f->m, &cmd), PC_EEXIST);

    ok(f, "perf_save");
    assert_string_equal(f->out, "{\"collections\":4,\"store\":null}");
    assert_null(x.coll);
    assert_int_equal(x.n, 500); /* the default */
    assert_int_equal(x.n_given, 0);
    ok(f, "perf_save th lmdb:///x batch=7");
    assert_string_equal(f->out, "{\"collections\":1,\"store\":\"lmdb:///x\"}");
    assert_ptr_equal(x.coll, coll(f, "th"));
    assert_int_equal(x.n, 7);
    assert_int_equal(x.n_given, 1);
    int runs = x.runs;
    bad(f, "perf_save nosuch", PC_ENOCOLL, "perf_save: unknown collection \"nosuch\"");
    bad(f, "perf_save th batch=0", PC_EINVAL,
        "perf_save: parameter \"batch\": out of range [1, 10000]");
    bad(f, "perf_save th 0123456789abcdefX", PC_ETOOBIG,
        "perf_save: parameter \"store\": 17 bytes");
    bad(f, "perf_save th x 5 extra", PC_EINVAL, "perf_save: too many positional parameters");
    assert_int_equal(x.runs, runs); /* never reached the command */
    bad(f, "perf_save th fail", PC_ESYS, "perf_save: store \"fail\" is not writable");
    bad(f, "perf_save th plain", PC_ECONFIG, "perf_save: invalid configuration");

    /* malformed tables are refused */
    static const pc_mgmt_param dup[] = {{"a", PC_MP_UINT, 0, NULL, 0, 9, ""},
                                        {"a", PC_MP_UINT, 0, NULL, 0, 9, ""}};
    static const pc_mgmt_param baddef[] = {{"a", PC_MP_UINT, 0, "ten", 0, 9, ""}};
    static const pc_mgmt_param outdef[] = {{"a", PC_MP_UINT, 0, "10", 0, 9, ""}};
    static const pc_mgmt_param reqdef[] = {{"a", PC_MP_UINT, 1, "1", 0, 9, ""}};
    static const pc_mgmt_param colldef[] = {{"c", PC_MP_COLL, 0, "th", 0, 0, ""}};
    static const pc_mgmt_param badtype[] = {{"a", 99, 0, NULL, 0, 9, ""}};
    static const pc_mgmt_param badname[] = {{"a b", PC_MP_UINT, 0, NULL, 0, 9, ""}};
    static const pc_mgmt_param minmax[] = {{"a", PC_MP_UINT, 0, NULL, 9, 1, ""}};
    const struct {
        const char *name;
        const pc_mgmt_param *p;
        unsigned n;
    } tabs[] = {{"t_dup", dup, 2},
                {"t_baddef", baddef, 1},
                {"t_outdef", outdef, 1},
                {"t_reqdef", reqdef, 1},
                {"t_colldef", colldef, 1},
                {"t_badtype", badtype, 1},
                {"t_badname", badname, 1},
                {"t_minmax", minmax, 1},
                {"bad name", NULL, 0},
                {"", NULL, 0},
                {"t_many", params, PC_MGMT_MAX_PARAMS + 1},
                {"t_null", NULL, 1}};
    for (size_t i = 0; i < sizeof tabs / sizeof tabs[0]; i++) {
        pc_mgmt_cmd c = {tabs[i].name, "", tabs[i].p, tabs[i].n, ext_run, &x};
        if (pc_mgmt_register(f->m, &c) != PC_EINVAL)
            fail_msg("table %s accepted", tabs[i].name);
    }
    pc_mgmt_cmd norun = {"t_norun", "", NULL, 0, NULL, NULL};
    assert_int_equal(pc_mgmt_register(f->m, &norun), PC_EINVAL);
    assert_int_equal(pc_mgmt_register(NULL, &cmd), PC_EINVAL);
    assert_int_equal(pc_mgmt_cmd_count(f->m), before + 1);

    /* the perf_stats hook adds members to every collection object */
    assert_int_equal(pc_mgmt_stats_hook(f->m, ext_stats, NULL), 0);
    ok(f, "perf_stats");
    has(f, "\"reset_at\":0,\"last_save\":0}");
    has(f, "\"collection\":\"th\"");
    has(f, "\"last_save\":1700000000}");
    assert_int_equal(pc_mgmt_stats_hook(f->m, NULL, NULL), 0);
    ok(f, "perf_stats th");
    lacks(f, "last_save");
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
        cmocka_unit_test(test_json_escaping),
        cmocka_unit_test(test_json_structure),
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
        T(test_bad_input),
        T(test_binary_json),
        T(test_builder_failure),
        T(test_register),
        cmocka_unit_test(test_nomem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
