/*
 * snapshot_testlib.c - the shared helpers of pcache-snapshot's tests
 * (snapshot_testlib.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "snapshot_testlib.h"
#include "pcache_storecheck.h"

char root[256];
char tool_out[1 << 22], tool_err[1 << 16];
size_t tool_outlen;

/* ---- running the tool -------------------------------------------------------- */
size_t slurp(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    lseek(fd, 0, SEEK_SET);
    ssize_t r;
    while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = 0;
    return n;
}

/* Runs pcache-snapshot with the NULL-terminated arguments; stdout and
 * stderr land in tool_out / tool_err. Returns the exit code. */
int run_as_uid = -1;

int run(const char *arg, ...)
{
    const char *argv[32];
    int argc = 0;
    argv[argc++] = PCACHE_SNAPSHOT_BIN;
    va_list ap;
    va_start(ap, arg);
    for (const char *a = arg; a != NULL && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    FILE *o = tmpfile(), *e = tmpfile();
    assert_non_null(o);
    assert_non_null(e);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fileno(o), 1);
        dup2(fileno(e), 2);
        if (run_as_uid >= 0 && (setgid((gid_t)run_as_uid) != 0 || setuid((uid_t)run_as_uid) != 0))
            _exit(126);
        execv(PCACHE_SNAPSHOT_BIN, (char *const *)argv);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    tool_outlen = slurp(fileno(o), tool_out, sizeof tool_out);
    slurp(fileno(e), tool_err, sizeof tool_err);
    fclose(o);
    fclose(e);
    if (!WIFEXITED(st))
        fail_msg("pcache-snapshot %s died (status %d); stderr: %s", arg, st, tool_err);
    return WEXITSTATUS(st);
}

void expect_in(const char *hay, const char *needle)
{
    if (strstr(hay, needle) == NULL)
        fail_msg("\"%s\" not found in:\n%.3000s", needle, hay);
}

json_t *parse_json(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_ALLOW_NUL, &je);
    if (j == NULL)
        fail_msg("not JSON (%s at line %d): %.2000s", je.text, je.line, text);
    return j;
}

/* ---- stores ----------------------------------------------------------------- */
void mk_dir(char *out, size_t cap, const char *tag)
{
    static unsigned seq;
    snprintf(out, cap, "%s/%s-%u", root, tag, seq++);
}

pc_cache *mk_cache(const char *colls)
{
    return pc_fx_cache(colls, 48);
}

pc_store *open_store(const char *dir, unsigned flags)
{
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = flags;
    pc_store *s = NULL;
    char err[512];
    int rc = pc_store_open_checked(dir, &sc, &s, err, sizeof err);
    if (rc != 0)
        fail_msg("open %s: %s", dir, err);
    return s;
}

void save(const char *dir, pc_coll *co)
{
    pc_store *s = open_store(dir, PC_STORE_CREATE);
    check_rc(pc_store_save(s, co, NULL, NULL), PC_OK);
    pc_store_close(s);
}

const struct kv mixed[] = {
    {"alpha", 5, "one", 3, 0, 0, 0},
    {"bin\0key", 7, "v\0a\0l\0", 6, 0, 0, 0},
    {"", 0, "the empty key", 13, 0, 0, 0},
    {"empty-value", 11, "", 0, 0, 0, 0},
    {"comma,\"quote\"\\back", 18, "a,b\"c\nd\\e\r\t", 11, 0, 0, 0},
    {"utf8-\xc3\xa9\xe2\x82\xac", 10, "caf\xc3\xa9 \xf0\x9f\x93\x9e", 10, 0, 0, 0},
    {"counter-max", 11, NULL, 0, 1, INT64_MAX, 0},
    {"counter-min", 11, NULL, 0, 1, INT64_MIN, 0},
    {"counter-neg", 11, NULL, 0, 1, -42, 3600000},
    {"ttl-long", 8, "lives an hour", 13, 0, 0, 3600000},
    {"ttl-day", 7, "lives a day", 11, 0, 0, 86400000},
    {"\xff\xfe\x00\x01", 4, "\x00\x00\xff", 3, 0, 0, 0},
    {"sip:alice@example.com", 21, "<sip:alice@192.0.2.1:5060>;expires=3600", 39, 0, 0, 600000},
};
_Static_assert(sizeof mixed / sizeof *mixed == NMIXED, "NMIXED");

unsigned char big[200000];

void put_mixed(pc_coll *co)
{
    for (size_t i = 0; i < NMIXED; i++) {
        const struct kv *e = &mixed[i];
        if (e->counter)
            check_rc(pc_set_counter(co, e->key, e->klen, e->num, e->ttl), PC_OK);
        else
            check_rc(pc_set(co, e->key, e->klen, e->val, e->vlen, e->ttl, 0), PC_OK);
    }
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 131 + (i >> 8));
    check_rc(pc_set(co, "big", 3, big, sizeof big, 0, 0), PC_OK);
    for (unsigned i = 0; i < NFILL; i++) {
        char k[64], v[160];
        int kl = snprintf(k, sizeof k, "ul:%u@example.org", i);
        int vl = snprintf(v, sizeof v, "<sip:%u@198.51.100.%u:5060>;expires=%u;q=0.%u", i, i % 250,
                          60 + i % 3600, i % 10);
        check_rc(pc_set(co, k, (size_t)kl, v, (size_t)vl, (i % 5) ? 7200000 : 0, 0), PC_OK);
    }
}

/* A store with collection "c" (the mixed entries) and "d" (three keys). */
void mk_store(char *dir, size_t cap, const char *tag)
{
    mk_dir(dir, cap, tag);
    pc_cache *c = mk_cache("c;d");
    put_mixed(pc_fx_coll(c, "c"));
    pc_coll *d = pc_fx_coll(c, "d");
    check_rc(pc_set(d, "alpha", 5, "one", 3, 0, 0), PC_OK);
    check_rc(pc_set(d, "only-d", 6, "x", 1, 0, 0), PC_OK);
    check_rc(pc_set_counter(d, "counter-neg", 11, -41, 0), PC_OK);
    save(dir, pc_fx_coll(c, "c"));
    save(dir, d);
    pc_cache_destroy(c);
}

/* ---- records of a store, for comparisons ---------------------------------- */

int collect_cb(void *ctx, const pc_store_record *r)
{
    struct recs *rs = ctx;
    rs->v = realloc(rs->v, (rs->n + 1) * sizeof *rs->v);
    struct rec *x = &rs->v[rs->n++];
    x->key = malloc(r->klen + 1);
    x->val = malloc(r->vlen + 1);
    memcpy(x->key, r->key, r->klen);
    memcpy(x->val, r->val, r->vlen);
    x->klen = r->klen;
    x->vlen = r->vlen;
    x->expires = r->expires_ms;
    x->counter = r->is_counter;
    return 0;
}

struct recs collect(const char *dir, const char *name)
{
    struct recs rs = {NULL, 0};
    pc_store *s = open_store(dir, PC_STORE_RDONLY);
    check_rc(pc_store_iterate(s, name, 0, collect_cb, &rs), PC_OK);
    pc_store_close(s);
    return rs;
}

void recs_free(struct recs *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        free(rs->v[i].key);
        free(rs->v[i].val);
    }
    free(rs->v);
}

/* Same keys in the same order, same bytes, same types; expiry equal within
 * tol ms (a re-import sets a TTL relative to the clock). */
void same_records(const struct recs *a, const struct recs *b, int64_t tol)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const struct rec *x = &a->v[i], *y = &b->v[i];
        assert_int_equal(x->klen, y->klen);
        assert_memory_equal(x->key, y->key, x->klen);
        assert_int_equal(x->vlen, y->vlen);
        if (x->vlen > 0)
            assert_memory_equal(x->val, y->val, x->vlen);
        assert_int_equal(x->counter, y->counter);
        if ((x->expires == 0) != (y->expires == 0) || llabs(x->expires - y->expires) > tol)
            fail_msg("record %zu: expires %lld vs %lld", i, (long long)x->expires,
                     (long long)y->expires);
    }
}

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int snap_test_setup(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    snprintf(root, sizeof root, "%s/pcache-snaptool-XXXXXX", base);
    return mkdtemp(root) == NULL ? -1 : 0;
}

int snap_test_teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}
