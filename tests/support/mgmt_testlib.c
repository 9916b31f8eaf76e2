/*
 * mgmt_testlib.c - the management tests' shared helpers (mgmt_testlib.h).
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

#include "mgmt_testlib.h"
#include "pc_fixture.h"

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

bool json_valid(const char *s, size_t n)
{
    struct jp p = {(const unsigned char *)s, n, 0, 0};
    if (!jvalue(&p))
        return false;
    jws(&p);
    return p.i == n;
}

/* Decodes the JSON string starting at s (at its opening quote) by our byte
 * convention into out (cap bytes); returns the byte count. */
size_t json_decode(const char *s, unsigned char *out, size_t cap)
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
pc_coll *coll(struct fx *f, const char *name)
{
    return pc_fx_coll(f->c, name);
}

void fx_put(struct fx *f, const char *cn, const void *k, size_t kl, const void *v, size_t vl,
            int64_t ttl_s)
{
    assert_int_equal(pc_set(coll(f, cn), k, kl, v, vl, ttl_s * 1000, 0), 0);
}

int fx_setup_cfg(void **state, unsigned growth)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    pc_config cfg;
    pc_fx_config(&cfg, "default;sessions=4;th=4;grow=4", 32);
    cfg.growth_load_factor = growth;
    cfg.growth_budget = 2;
    f->c = pc_fx_create(&cfg);
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

int fx_setup(void **state)
{
    return fx_setup_cfg(state, 0);
}

int fx_teardown(void **state)
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

int run(struct fx *f, const char *line)
{
    pc_json_reset(f->j);
    memset(&f->err, 0, sizeof f->err);
    return finish(f, pc_mgmt_run_line(f->m, line, strlen(line), pc_json_ops(), f->j, &f->err));
}

int runv(struct fx *f, const char *cmd, const pc_mgmt_arg *a, unsigned n)
{
    pc_json_reset(f->j);
    memset(&f->err, 0, sizeof f->err);
    return finish(f, pc_mgmt_run(f->m, cmd, a, n, pc_json_ops(), f->j, &f->err));
}

void ok(struct fx *f, const char *line)
{
    int rc = run(f, line);
    if (rc != 0)
        fail_msg("%s: %d %s", line, rc, f->err.msg);
}

void has(struct fx *f, const char *needle)
{
    if (f->out == NULL || strstr(f->out, needle) == NULL)
        fail_msg("reply lacks %s: %s", needle, f->out ? f->out : "(none)");
}

void lacks(struct fx *f, const char *needle)
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

char *snapshot(struct fx *f)
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

void bad(struct fx *f, const char *line, int rc, const char *want)
{
    char *before = snapshot(f);
    bad_common(f, line, run(f, line), rc, want, before);
    free(before);
}

void badv(struct fx *f, const char *cmd, const pc_mgmt_arg *a, unsigned n, int rc, const char *want)
{
    char *before = snapshot(f);
    bad_common(f, cmd, runv(f, cmd, a, n), rc, want, before);
    free(before);
}
