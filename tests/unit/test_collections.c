/*
 * test_collections.c - the collections spec of pc_config and perf:// URLs.
 *
 * The spec "name;name=log2size;..." is parsed by pc_cache_create: the
 * default when it is NULL or "", sizes clamped to [PC_LOG2_MIN, PC_LOG2_MAX]
 * with a warning through the log callback when a declared size was out of
 * range, exact (never prefix) name lookup, and PC_ECONFIG for duplicates,
 * empty names, bad sizes, overlong names, too many collections and the
 * cachedb_local "/r" replication marker. pc_url_parse (the management
 * layer's, pcache_mgmt.h) resolves perf://, perf:///name, perf://name and
 * perf:group:///name against the declared collections, reports PC_ENOCOLL /
 * PC_EURL with a message, and writes its out-parameter only on success. Data operations are
 * test_ops.c's business.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pc_fixture.h"
#include "pcache.h"
#include "pcache_mgmt.h"

#define check_rc(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr), want_ = (want);                                                          \
        if (rc_ != want_)                                                                          \
            fail_msg("%s = %d (%s), want %d (%s)", #expr, rc_, pc_mgmt_strerror(rc_), want_,       \
                     pc_mgmt_strerror(want_));                                                     \
    } while (0)

/* Everything the library logged during one pc_cache_create. */
struct logcap {
    int n;
    int level[64];
    char msg[64][256];
};

static void log_cb(void *ctx, int level, const char *msg)
{
    struct logcap *lc = ctx;

    assert_non_null(msg);
    if (lc->n < 64) {
        lc->level[lc->n] = level;
        snprintf(lc->msg[lc->n], sizeof(lc->msg[0]), "%s", msg);
        lc->n++;
    }
}

/* 1 when some message at exactly level mentions needle. */
static int logged(const struct logcap *lc, int level, const char *needle)
{
    for (int i = 0; i < lc->n; i++)
        if (lc->level[i] == level && strstr(lc->msg[i], needle) != NULL)
            return 1;
    return 0;
}

static int create(const char *colls, size_t mem_mb, struct logcap *lc, pc_cache **out)
{
    pc_config cfg;

    pc_fx_config(&cfg, colls, mem_mb);
    cfg.log.fn = log_cb;
    cfg.log.ctx = lc;
    cfg.log.level = PC_LOG_DEBUG;
    memset(lc, 0, sizeof(*lc));
    return pc_cache_create(&cfg, out);
}

static pc_cache *mk(const char *colls, size_t mem_mb, struct logcap *lc)
{
    pc_cache *c = NULL;
    int rc = create(colls, mem_mb, lc, &c);

    if (rc != PC_OK)
        fail_msg("pc_cache_create(\"%s\") = %d (%s)%s%s", colls ? colls : "(null)", rc,
                 pc_mgmt_strerror(rc), lc->n ? ": " : "", lc->n ? lc->msg[lc->n - 1] : "");
    assert_non_null(c);
    return c;
}

static unsigned log2_of(pc_cache *c, const char *name)
{
    pc_coll *co = NULL;
    pc_coll_stats st;

    check_rc(pc_coll_find(c, name, strlen(name), &co), PC_OK);
    check_rc(pc_coll_stats_get(co, &st), PC_OK);
    assert_int_equal(st.buckets, 1ull << st.log2_initial);
    return st.log2_initial;
}

static void expect_missing(pc_cache *c, const char *name, size_t len)
{
    pc_coll *co = NULL;

    check_rc(pc_coll_find(c, name, len, &co), PC_ENOCOLL);
    assert_null(co);
}

/* ---- the spec ----------------------------------------------------------- */

static void spec_two_collections(void **state)
{
    struct logcap lc;
    pc_cache *c = mk("a;b=10", 64, &lc);

    (void)state;
    assert_int_equal(pc_coll_count(c), 2);
    assert_string_equal(pc_coll_name(pc_coll_at(c, 0)), "a");
    assert_string_equal(pc_coll_name(pc_coll_at(c, 1)), "b");
    assert_null(pc_coll_at(c, 2));
    assert_int_equal(log2_of(c, "a"), PC_LOG2_DEFAULT);
    assert_int_equal(log2_of(c, "b"), 10);
    expect_missing(c, "default", 7); /* only what was declared */
    pc_cache_destroy(c);
}

static void spec_default_when_null_or_empty(void **state)
{
    static const char *const specs[] = {NULL, ""};
    struct logcap lc;

    (void)state;
    for (int i = 0; i < 2; i++) {
        pc_cache *c = mk(specs[i], 64, &lc);
        pc_coll *co = NULL;

        assert_int_equal(pc_coll_count(c), 1);
        assert_string_equal(pc_coll_name(pc_coll_at(c, 0)), "default");
        check_rc(pc_coll_find(c, "default", 7, &co), PC_OK);
        assert_ptr_equal(co, pc_coll_at(c, 0));
        assert_int_equal(log2_of(c, "default"), PC_LOG2_DEFAULT);
        pc_cache_destroy(c);
    }
}

static void spec_sizes_clamp(void **state)
{
    struct logcap lc;
    pc_cache *c = mk("lo0=0;lo3=3;ok4=4;ok10=10", 64, &lc);

    (void)state;
    assert_int_equal(log2_of(c, "lo0"), PC_LOG2_MIN);
    assert_int_equal(log2_of(c, "lo3"), PC_LOG2_MIN);
    assert_int_equal(log2_of(c, "ok4"), 4);
    assert_int_equal(log2_of(c, "ok10"), 10);
    assert_false(logged(&lc, PC_LOG_WARN, "ok4"));
    assert_false(logged(&lc, PC_LOG_WARN, "ok10"));
    pc_cache_destroy(c);

    /* 2^24 buckets are a 1 GiB table: one such collection per cache */
    c = mk("ok24=24", 1536, &lc);
    assert_int_equal(log2_of(c, "ok24"), PC_LOG2_MAX);
    assert_false(logged(&lc, PC_LOG_WARN, "ok24"));
    pc_cache_destroy(c);
    static const char *const big[] = {"big25=25", "big32=32", "big64=64"};
    for (int i = 0; i < 3; i++) {
        char name[8];

        c = mk(big[i], 1536, &lc);
        snprintf(name, sizeof(name), "%.5s", big[i]);
        assert_int_equal(log2_of(c, name), PC_LOG2_MAX);
        if (!logged(&lc, PC_LOG_WARN, name))
            fail_msg("no PC_LOG_WARN naming \"%s\" for spec \"%s\" (%d messages)", name, big[i],
                     lc.n);
        pc_cache_destroy(c);
    }
}

static void spec_names_match_exactly(void **state)
{
    struct logcap lc;
    pc_cache *c = mk("th", 64, &lc);
    pc_coll *co = NULL;

    (void)state;
    check_rc(pc_coll_find(c, "th", 2, &co), PC_OK);
    assert_string_equal(pc_coll_name(co), "th");
    check_rc(pc_coll_find(c, "thx", 2, &co), PC_OK); /* length-bounded name */
    expect_missing(c, "t", 1);
    expect_missing(c, "thx", 3);
    expect_missing(c, "TH", 2);
    expect_missing(c, "th\0", 3);
    expect_missing(c, "", 0);
    pc_cache_destroy(c);

    c = mk("th;t;thx", 64, &lc); /* prefixes of each other, any order */
    for (unsigned i = 0; i < 3; i++) {
        const char *name = pc_coll_name(pc_coll_at(c, i));

        check_rc(pc_coll_find(c, name, strlen(name), &co), PC_OK);
        assert_ptr_equal(co, pc_coll_at(c, i));
    }
    assert_string_equal(pc_coll_name(pc_coll_at(c, 1)), "t");
    pc_cache_destroy(c);
}

static void spec_errors_are_econfig(void **state)
{
    static const char *const bad[] = {
        "a;a", "a;b;a=10", "a=4;a=5", ";",   "a;;b",   "=10",    "a;",    "a=x",
        "a=",  "a=10x",    "a=1 0",   "a/r", "a=10/r", "th/r;b", "a==10", "a=10=11",
    };
    struct logcap lc;
    int failed = 0; /* every accepted spec is listed, then the test fails once */

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pc_cache *c = NULL;
        int rc = create(bad[i], 64, &lc, &c);

        if (rc != PC_ECONFIG) {
            print_error("spec \"%s\": %d (%s), want PC_ECONFIG\n", bad[i], rc,
                        pc_mgmt_strerror(rc));
            failed++;
            pc_cache_destroy(c);
            continue;
        }
        assert_null(c);
        if (!logged(&lc, PC_LOG_ERR, "") && !logged(&lc, PC_LOG_WARN, ""))
            fail_msg("spec \"%s\" rejected without a log message", bad[i]);
    }
    if (failed)
        fail_msg("%d bad spec(s) accepted", failed);
}

static void spec_name_and_count_limits(void **state)
{
    char spec[PC_MAX_COLLECTIONS * 8 + 16], name[PC_COLL_NAME_MAX + 2];
    struct logcap lc;
    pc_cache *c = NULL;
    size_t off = 0;

    (void)state;
    memset(name, 'n', sizeof(name) - 1);
    name[PC_COLL_NAME_MAX] = '\0'; /* 63 bytes: the longest allowed */
    c = mk(name, 64, &lc);
    assert_int_equal(strlen(pc_coll_name(pc_coll_at(c, 0))), PC_COLL_NAME_MAX);
    pc_cache_destroy(c);
    name[PC_COLL_NAME_MAX] = 'n';
    name[PC_COLL_NAME_MAX + 1] = '\0'; /* 64 */
    c = NULL;
    check_rc(create(name, 64, &lc, &c), PC_ECONFIG);
    assert_null(c);

    for (unsigned i = 0; i < PC_MAX_COLLECTIONS; i++)
        off += (size_t)snprintf(spec + off, sizeof(spec) - off, "%sc%u=4", i ? ";" : "", i);
    c = mk(spec, 64, &lc);
    assert_int_equal(pc_coll_count(c), PC_MAX_COLLECTIONS);
    assert_string_equal(pc_coll_name(pc_coll_at(c, PC_MAX_COLLECTIONS - 1)), "c63");
    pc_cache_destroy(c);
    snprintf(spec + off, sizeof(spec) - off, ";one_more");
    c = NULL;
    check_rc(create(spec, 64, &lc, &c), PC_ECONFIG);
    assert_null(c);
}

/* ---- URLs ------------------------------------------------------------------- */

static void url_forms_resolve(void **state)
{
    struct logcap lc;
    pc_cache *c = mk("default;th;grp", 64, &lc);
    pc_coll *def = pc_coll_at(c, 0), *th = pc_coll_at(c, 1);
    static const struct {
        const char *url, *group;
        int coll; /* 0 default, 1 th, 2 grp */
    } ok[] = {
        {"perf://", "", 0},         {"perf:///th", "", 1},       {"perf://th", "", 1},
        {"perf:g1:///th", "g1", 1}, {"perf:g1://th", "g1", 1},   {"perf:g1://", "g1", 0},
        {"perf:///grp", "", 2},     {"perf:th:///grp", "th", 2}, {"perf:///default", "", 0},
    };
    char err[128];
    pc_url u;

    (void)state;
    assert_non_null(def);
    assert_non_null(th);
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        memset(&u, 0x5a, sizeof(u));
        int rc = pc_url_parse(c, ok[i].url, &u, err, sizeof(err));
        if (rc != PC_OK)
            fail_msg("\"%s\": %d (%s)", ok[i].url, rc, pc_mgmt_strerror(rc));
        assert_string_equal(u.group, ok[i].group);
        assert_ptr_equal(u.coll, pc_coll_at(c, (unsigned)ok[i].coll));
    }
    check_rc(pc_url_parse(c, "perf:///th", &u, NULL, 0), PC_OK); /* errbuf optional */
    assert_ptr_equal(u.coll, th);
    pc_cache_destroy(c);
}

static void url_undeclared_is_enocoll(void **state)
{
    struct logcap lc;
    pc_cache *c = mk("th", 64, &lc);
    static const struct {
        const char *url, *name;
    } cases[] = {
        {"perf:///nope", "nope"}, {"perf://nope", "nope"}, {"perf:g:///nope", "nope"},
        {"perf:///t", "t"},       {"perf:///thx", "thx"},  {"perf://", "default"},
    };
    char err[128], small[4] = {'x', 'x', 'x', 'x'}, guard[8];
    pc_url u, before;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(&u, 0x5a, sizeof(u));
        before = u;
        memset(err, 0, sizeof(err));
        check_rc(pc_url_parse(c, cases[i].url, &u, err, sizeof(err)), PC_ENOCOLL);
        assert_memory_equal(&u, &before, sizeof(u)); /* untouched on error */
        if (strstr(err, cases[i].name) == NULL)
            fail_msg("\"%s\": message \"%s\" does not name \"%s\"", cases[i].url, err,
                     cases[i].name);
        check_rc(pc_url_parse(c, cases[i].url, &u, NULL, 0), PC_ENOCOLL);
    }
    /* a short errbuf is truncated and still NUL-terminated, never overrun */
    memset(guard, 'g', sizeof(guard));
    char *both = calloc(1, sizeof(small) + sizeof(guard));
    assert_non_null(both);
    memcpy(both, small, sizeof(small));
    memcpy(both + sizeof(small), guard, sizeof(guard));
    check_rc(pc_url_parse(c, "perf:///a_long_undeclared_name", &u, both, sizeof(small)),
             PC_ENOCOLL);
    assert_true(memchr(both, '\0', sizeof(small)) != NULL);
    assert_memory_equal(both + sizeof(small), guard, sizeof(guard));
    free(both);
    pc_cache_destroy(c);
}

static void url_malformed_is_eurl(void **state)
{
    char longname[PC_COLL_NAME_MAX + 16], longgroup[PC_COLL_NAME_MAX + 16];
    struct logcap lc;
    pc_cache *c = mk("default;a;th", 64, &lc);
    const char *bad[] = {
        "",           "http://th",   "local:///th",  "perf",          "perf:",       "perf:g",
        "perf:/",     "perf:/th",    "perf:g:",      "perf:g:/th",    "perf:///a/b", "perf://a/b",
        "perf://a/r", "perf:///a/r", "perf:///th/r", "perf:g:///a/r", "perf:://",    "xperf://",
        longname,     longgroup,
    };
    char err[128];
    pc_url u, before;
    int failed = 0;

    (void)state;
    memset(longname, 0, sizeof(longname));
    memcpy(longname, "perf:///", 8);
    memset(longname + 8, 'n', PC_COLL_NAME_MAX + 1); /* 64-byte name */
    memset(longgroup, 0, sizeof(longgroup));
    memcpy(longgroup, "perf:", 5);
    memset(longgroup + 5, 'g', PC_COLL_NAME_MAX + 1); /* 64-byte group */
    memcpy(longgroup + 5 + PC_COLL_NAME_MAX + 1, ":///a", 5);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&u, 0x5a, sizeof(u));
        before = u;
        memset(err, 0, sizeof(err));
        int rc = pc_url_parse(c, bad[i], &u, err, sizeof(err));
        if (rc != PC_EURL) {
            print_error("\"%s\": %d (%s), want PC_EURL\n", bad[i], rc, pc_mgmt_strerror(rc));
            failed++;
            continue;
        }
        if (err[0] == '\0')
            fail_msg("\"%s\": PC_EURL without a message", bad[i]);
        assert_memory_equal(&u, &before, sizeof(u));
    }
    if (failed)
        fail_msg("%d malformed URL(s) not rejected with PC_EURL", failed);
    /* the longest group fits pc_url.group exactly */
    memset(longgroup + 5, 'g', PC_COLL_NAME_MAX);
    memcpy(longgroup + 5 + PC_COLL_NAME_MAX, ":///a", 6);
    check_rc(pc_url_parse(c, longgroup, &u, err, sizeof(err)), PC_OK);
    assert_int_equal(strlen(u.group), PC_COLL_NAME_MAX);
    check_rc(pc_url_parse(c, NULL, &u, err, sizeof(err)), PC_EINVAL);
    check_rc(pc_url_parse(c, "perf://", NULL, err, sizeof(err)), PC_EINVAL);
    check_rc(pc_url_parse(NULL, "perf://", &u, err, sizeof(err)), PC_EINVAL);
    pc_cache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(spec_two_collections),
        cmocka_unit_test(spec_default_when_null_or_empty),
        cmocka_unit_test(spec_sizes_clamp),
        cmocka_unit_test(spec_names_match_exactly),
        cmocka_unit_test(spec_errors_are_econfig),
        cmocka_unit_test(spec_name_and_count_limits),
        cmocka_unit_test(url_forms_resolve),
        cmocka_unit_test(url_undeclared_is_enocoll),
        cmocka_unit_test(url_malformed_is_eurl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
