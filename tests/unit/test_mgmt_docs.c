/*
 * test_mgmt_docs.c - runs every example of docs/management.md and compares
 * it with the output the document shows, so the manual cannot drift from
 * the code.
 *
 * An example is a fenced block whose info string is "mgmt". Inside it, a
 * line starting with "> " is a command line (pc_mgmt_run_line syntax) and
 * the lines up to the next command line are its expected output: the JSON
 * reply (any layout: whitespace outside strings is ignored) or, for a
 * failing command, "error <code>: <message>" exactly. Each block runs
 * against a fresh copy of the fixture below, its commands in order, so a
 * block can show a change and then its effect. The only values compared
 * loosely are those that depend on the clock: a positive "ttl" may differ
 * by up to 5 seconds (a slow run under ASan), and a non-zero "reset_at"
 * (wall-clock seconds) matches any non-zero value.
 *
 * Also checked: every registered command has at least one example.
 *
 * Run with --update to rewrite the document's outputs from the code (the
 * JSON pretty-printed), then review the diff: that is how examples are
 * written, never by hand.
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

#include "pc_fixture.h"
#include "pcache_mgmt.h"

#ifndef PCACHE_DOCS_DIR
#define PCACHE_DOCS_DIR "docs"
#endif
#define DOC_PATH PCACHE_DOCS_DIR "/management.md"
#define TTL_SLACK 5

/* ---- the fixture ---------------------------------------------------------- */
struct fx {
    pc_cache *c;
    pc_mgmt *m;
    pc_json *j;
};

static void put(pc_cache *c, const char *coll, const char *k, const char *v, int64_t ttl_s)
{
    assert_int_equal(pc_set(pc_fx_coll(c, coll), k, strlen(k), v, strlen(v), ttl_s * 1000, 0), 0);
}

/* Three collections as an OpenSIPS proxy might declare them; the context's
 * default is "sessions" (the groupless cachedb_url perf:///sessions). */
static void fx_open(struct fx *f)
{
    f->c = pc_fx_cache("default;sessions=4;th=4", 16);
    put(f->c, "sessions", "session-abc123", "state=confirmed;cseq=4", 3600);
    put(f->c, "sessions", "session-abd456", "state=early", 1800);
    put(f->c, "sessions", "session-x9", "state=terminated", 60);
    put(f->c, "sessions", "profile-alice", "{\"tier\":\"gold\"}", 0);
    put(f->c, "sessions", "profile-bob", "line1\nline2", 0);
    assert_int_equal(pc_add(pc_fx_coll(f->c, "sessions"), "hits", 4, 6, 0, NULL), 0);
    put(f->c, "th", "th-7f3a", "a=10.0.0.1;b=10.0.0.2", 120);
    put(f->c, "th", "th-91c0", "a=10.0.0.3;b=10.0.0.4", 120);
    put(f->c, "default", "greeting", "hello", 0);
    assert_int_equal(pc_mgmt_create(f->c, "sessions", &f->m), 0);
    assert_int_equal(pc_json_create(&f->j), 0);
}

static void fx_close(struct fx *f)
{
    pc_json_destroy(f->j);
    pc_mgmt_destroy(f->m);
    pc_cache_destroy(f->c);
}

/* Runs one command line; returns a malloc'd reply (JSON or "error ..."). */
static char *run(struct fx *f, const char *line)
{
    pc_mgmt_err e;
    pc_json_reset(f->j);
    int rc = pc_mgmt_run_line(f->m, line, strlen(line), pc_json_ops(), f->j, &e);
    char *out;
    if (rc != 0) {
        size_t n = strlen(e.msg) + 32;
        out = malloc(n);
        assert_non_null(out);
        snprintf(out, n, "error %d: %s", rc, e.msg);
        return out;
    }
    const char *t;
    size_t n;
    assert_int_equal(pc_json_text(f->j, &t, &n), 0);
    out = strdup(t);
    assert_non_null(out);
    return out;
}

/* ---- JSON text helpers ---------------------------------------------------- */
/* Index just past the string starting at s[i] == '"'. */
static size_t skip_str(const char *s, size_t i)
{
    for (i++; s[i] && s[i] != '"'; i++)
        if (s[i] == '\\' && s[i + 1])
            i++;
    return s[i] ? i + 1 : i;
}

/* Removes whitespace outside strings. */
static char *squeeze(const char *s)
{
    size_t n = strlen(s), o = 0;
    char *out = malloc(n + 1);
    assert_non_null(out);
    for (size_t i = 0; i < n;) {
        if (s[i] == '"') {
            size_t e = skip_str(s, i);
            memcpy(out + o, s + i, e - i);
            o += e - i;
            i = e;
        } else if (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r') {
            i++;
        } else {
            out[o++] = s[i++];
        }
    }
    out[o] = '\0';
    return out;
}

/* Compares squeezed JSON texts, loosely where the clock shows. */
static int same_json(const char *a, const char *b)
{
    size_t i = 0, k = 0;
    while (a[i] && b[k]) {
        if (a[i] == '"' && b[k] == '"') {
            size_t ea = skip_str(a, i), eb = skip_str(b, k);
            if (ea - i != eb - k || memcmp(a + i, b + k, ea - i) != 0)
                return 0;
            bool ttl = (ea - i == 5 && memcmp(a + i, "\"ttl\"", 5) == 0);
            bool rst = (ea - i == 10 && memcmp(a + i, "\"reset_at\"", 10) == 0);
            i = ea;
            k = eb;
            if ((ttl || rst) && a[i] == ':' && b[k] == ':') {
                char *xa, *xb;
                long long va = strtoll(a + i + 1, &xa, 10), vb = strtoll(b + k + 1, &xb, 10);
                bool ok = va == vb || (ttl && va > 0 && vb > 0 && llabs(va - vb) <= TTL_SLACK) ||
                          (rst && va != 0 && vb != 0);
                if (!ok)
                    return 0;
                i = (size_t)(xa - a);
                k = (size_t)(xb - b);
            }
            continue;
        }
        if (a[i++] != b[k++])
            return 0;
    }
    return a[i] == b[k];
}

/* Appends a pretty form of the compact JSON value at s[*i] to out. */
static void pretty(const char *s, size_t *i, int indent, FILE *out)
{
    char c = s[*i];
    if (c != '{' && c != '[') {
        size_t e = *i;
        if (c == '"')
            e = skip_str(s, e);
        else
            while (s[e] && s[e] != ',' && s[e] != '}' && s[e] != ']')
                e++;
        fwrite(s + *i, 1, e - *i, out);
        *i = e;
        return;
    }
    size_t e = *i, depth = 0; /* find the container's end */
    do {
        if (s[e] == '"') {
            e = skip_str(s, e);
            continue;
        }
        if (s[e] == '{' || s[e] == '[')
            depth++;
        else if (s[e] == '}' || s[e] == ']')
            depth--;
        e++;
    } while (depth > 0 && s[e]);
    if ((size_t)indent + (e - *i) * 9 / 8 <= 92) { /* fits: one line, spaced */
        for (size_t k = *i; k < e;) {
            if (s[k] == '"') {
                size_t q = skip_str(s, k);
                fwrite(s + k, 1, q - k, out);
                k = q;
                continue;
            }
            fputc(s[k], out);
            if (s[k] == ',' || s[k] == ':')
                fputc(' ', out);
            k++;
        }
        *i = e;
        return;
    }
    char close = c == '{' ? '}' : ']';
    fputc(c, out);
    (*i)++;
    bool first = true;
    while (s[*i] != close) {
        if (!first)
            fputc(',', out);
        first = false;
        fprintf(out, "\n%*s", indent + 2, "");
        if (c == '{') {
            size_t q = skip_str(s, *i);
            fwrite(s + *i, 1, q - *i, out);
            fputs(": ", out);
            *i = q + 1; /* past ':' */
        }
        pretty(s, i, indent + 2, out);
        if (s[*i] == ',')
            (*i)++;
    }
    fprintf(out, "\n%*s%c", indent, "", close);
    (*i)++;
}

/* ---- the document --------------------------------------------------------- */
struct step {
    char *cmd;      /* the command line, without "> " */
    char *expected; /* the lines after it, joined with '\n' */
};
struct block {
    size_t start, end; /* byte range of the block's body in the document */
    int line;          /* line number of the opening fence */
    struct step *steps;
    size_t n;
};
struct doc {
    char *text;
    struct block *b;
    size_t n;
};

static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        fail_msg("cannot open %s", path);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *t = malloc((size_t)n + 1);
    assert_non_null(t);
    assert_int_equal(fread(t, 1, (size_t)n, fp), (size_t)n);
    t[n] = '\0';
    fclose(fp);
    return t;
}

static char *dup_range(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    assert_non_null(d);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static void add_step(struct block *b, const char *cmd, size_t cl)
{
    b->steps = realloc(b->steps, (b->n + 1) * sizeof *b->steps);
    assert_non_null(b->steps);
    b->steps[b->n].cmd = dup_range(cmd, cl);
    b->steps[b->n].expected = dup_range("", 0);
    b->n++;
}

static void add_output(struct block *b, const char *l, size_t ll)
{
    struct step *st = &b->steps[b->n - 1];
    size_t old = strlen(st->expected);
    st->expected = realloc(st->expected, old + ll + 2);
    assert_non_null(st->expected);
    if (old > 0)
        st->expected[old++] = '\n';
    memcpy(st->expected + old, l, ll);
    st->expected[old + ll] = '\0';
}

static void doc_parse(struct doc *d, const char *path)
{
    memset(d, 0, sizeof *d);
    d->text = slurp(path);
    struct block *cur = NULL;
    int lineno = 0;
    for (const char *p = d->text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p) : strlen(p);
        const char *next = nl ? nl + 1 : p + ll;
        lineno++;
        if (cur == NULL && ll == 7 && memcmp(p, "```mgmt", 7) == 0) {
            d->b = realloc(d->b, (d->n + 1) * sizeof *d->b);
            assert_non_null(d->b);
            cur = &d->b[d->n++];
            memset(cur, 0, sizeof *cur);
            cur->start = (size_t)(next - d->text);
            cur->line = lineno;
        } else if (cur != NULL && ll == 3 && memcmp(p, "```", 3) == 0) {
            cur->end = (size_t)(p - d->text);
            if (cur->n == 0)
                fail_msg("%s:%d: an mgmt block without a command line", path, cur->line);
            cur = NULL;
        } else if (cur != NULL && ll >= 2 && memcmp(p, "> ", 2) == 0) {
            add_step(cur, p + 2, ll - 2);
        } else if (cur != NULL && ll > 0) {
            if (cur->n == 0)
                fail_msg("%s:%d: output before the first command line", path, lineno);
            add_output(cur, p, ll);
        }
        p = next;
    }
    if (cur != NULL)
        fail_msg("%s:%d: unterminated mgmt block", path, cur->line);
}

static void doc_free(struct doc *d)
{
    for (size_t i = 0; i < d->n; i++) {
        for (size_t k = 0; k < d->b[i].n; k++) {
            free(d->b[i].steps[k].cmd);
            free(d->b[i].steps[k].expected);
        }
        free(d->b[i].steps);
    }
    free(d->b);
    free(d->text);
}

static int matches(const char *expected, const char *actual)
{
    if (strncmp(actual, "error ", 6) == 0 || strncmp(expected, "error ", 6) == 0)
        return strcmp(expected, actual) == 0;
    char *a = squeeze(expected), *b = squeeze(actual);
    int ok = same_json(a, b);
    free(a);
    free(b);
    return ok;
}

/* ---- the tests ------------------------------------------------------------ */
static void test_doc_examples(void **state)
{
    (void)state;
    struct doc d;
    doc_parse(&d, DOC_PATH);
    assert_true(d.n >= 11);
    int bad = 0, steps = 0;
    for (size_t i = 0; i < d.n; i++) {
        struct fx f;
        fx_open(&f);
        for (size_t k = 0; k < d.b[i].n; k++) {
            struct step *st = &d.b[i].steps[k];
            char *got = run(&f, st->cmd);
            steps++;
            if (!matches(st->expected, got)) {
                /* one call each: print_error's buffer cuts a long example */
                print_error("%s (block at line %d): > %s\n", DOC_PATH, d.b[i].line, st->cmd);
                print_error("  documented: %s\n", st->expected);
                print_error("  actual:     %s\n", got);
                bad++;
            }
            free(got);
        }
        fx_close(&f);
    }
    print_message("%d examples in %zu blocks, %d differ\n", steps, d.n, bad);
    doc_free(&d);
    assert_int_equal(bad, 0);
}

static void test_doc_covers_every_command(void **state)
{
    (void)state;
    struct doc d;
    struct fx f;
    doc_parse(&d, DOC_PATH);
    fx_open(&f);
    int missing = 0;
    for (unsigned c = 0; c < pc_mgmt_cmd_count(f.m); c++) {
        const char *name = pc_mgmt_cmd_at(f.m, c)->name;
        size_t nl = strlen(name);
        bool seen = false;
        for (size_t i = 0; i < d.n && !seen; i++)
            for (size_t k = 0; k < d.b[i].n && !seen; k++) {
                const char *cmd = d.b[i].steps[k].cmd;
                seen = strncmp(cmd, name, nl) == 0 && (cmd[nl] == ' ' || cmd[nl] == '\0') &&
                       strncmp(d.b[i].steps[k].expected, "error", 5) != 0;
            }
        if (!seen) {
            print_error("%s: no successful example of %s\n", DOC_PATH, name);
            missing++;
        }
    }
    fx_close(&f);
    doc_free(&d);
    assert_int_equal(missing, 0);
}

/* --update: rewrites every block's outputs with what the code prints. */
static int update(const char *path)
{
    struct doc d;
    doc_parse(&d, path);
    char *buf = NULL;
    size_t blen = 0;
    FILE *out = open_memstream(&buf, &blen);
    size_t at = 0;
    for (size_t i = 0; i < d.n; i++) {
        fwrite(d.text + at, 1, d.b[i].start - at, out);
        struct fx f;
        fx_open(&f);
        for (size_t k = 0; k < d.b[i].n; k++) {
            char *got = run(&f, d.b[i].steps[k].cmd);
            fprintf(out, "> %s\n", d.b[i].steps[k].cmd);
            if (strncmp(got, "error ", 6) == 0) {
                fputs(got, out);
            } else {
                size_t p = 0;
                pretty(got, &p, 0, out);
            }
            fputc('\n', out);
            free(got);
        }
        fx_close(&f);
        at = d.b[i].end;
    }
    fputs(d.text + at, out);
    fclose(out);
    FILE *fp = fopen(path, "wb");
    if (fp == NULL || fwrite(buf, 1, blen, fp) != blen || fclose(fp) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    fprintf(stderr, "updated %zu blocks in %s\n", d.n, path);
    free(buf);
    doc_free(&d);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--update") == 0)
        return update(argc > 2 ? argv[2] : DOC_PATH);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doc_examples),
        cmocka_unit_test(test_doc_covers_every_command),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
