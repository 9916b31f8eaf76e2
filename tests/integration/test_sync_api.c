/*
 * test_sync_api.c - the library API of perf_sync (pcache_persist.h, docs/sync.md
 * "Host contract"), as a host such as the OpenSIPS module uses it, against
 * a real PostgreSQL (tests/support/odbc_servers.sh) through psqlODBC: two "nodes"
 * (two caches with their own pc_persist) share one database.
 *
 * Asserts: pc_persist_sync saves, records the source in the database and
 * calls the push with (collection, generation, node id); a notice given in
 * ANOTHER process (a forked child) is seen by the ticking process, which
 * reloads: every value, counter and TTL, expired rows skipped, stale keys
 * pruned, the synced event raised with the source, the facts in
 * pc_persist_sync_stats and perf_stats; a replay costs no database read; a
 * forged generation costs exactly one and changes nothing; a second forged
 * notice inside sync_check_ms waits for the interval (pc_persist_sync_due_ms
 * says when); the poll finds a generation no notice announced; degraded
 * syncs (no push, a push that fails, an LMDB store) succeed with a note;
 * bad arguments (unknown collection, generation 0, a bad node_id) are
 * refused; a node never reloads its own generation; two processes ticking
 * at once reload a collection exactly once (the claim).
 */
#include "odbc_testenv.h"
#include "pcache.h"
#include "pcache_mgmt.h"
#include "pcache_odbc.h"
#include "pcache_persist.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pc_fixture.h" /* after cmocka.h: it asserts */

#define CHECK_MS 150

static char t_pg[1024];

struct pushed {
    int calls, ret;
    char coll[64], source[64];
    uint64_t gen;
};

static int push_cb(void *ctx, const char *coll, uint64_t gen, const char *source)
{
    struct pushed *p = ctx;
    p->calls++;
    snprintf(p->coll, sizeof p->coll, "%s", coll);
    snprintf(p->source, sizeof p->source, "%s", source);
    p->gen = gen;
    return p->ret;
}

struct synced {
    int n;
    char coll[64], source[64];
};

static void event_cb(void *ctx, const pc_event *ev)
{
    struct synced *s = ctx;
    if (ev->type != PC_EV_RELOADED)
        return;
    s->n++;
    snprintf(s->coll, sizeof s->coll, "%s", ev->collection);
    snprintf(s->source, sizeof s->source, "%s", ev->source);
}

static pc_cache *mk_cache(void)
{
    pc_config cfg;
    pc_fx_config(&cfg, "prof;other", 32);
    cfg.lock_memory = 0;
    return pc_fx_create(&cfg);
}

static pc_persist *mk_node(pc_cache *c, const char *url, const char *id, struct pushed *push,
                           unsigned poll_ms)
{
    pc_persist_config pc;
    pc_persist_config_init(&pc);
    pc.db_url = url;
    pc.sql_backend = pc_odbc_persist_backend();
    pc.node_id = id;
    pc.sync_push = push != NULL ? push_cb : NULL;
    pc.sync_push_ctx = push;
    pc.sync_poll_ms = poll_ms;
    pc.sync_check_ms = CHECK_MS;
    pc.log.level = PC_LOG_WARN;
    pc_persist *p = NULL;
    char err[1024];
    int rc = pc_persist_open(c, &pc, &p, err, sizeof err);
    if (rc != 0)
        fail_msg("pc_persist_open: %s", err);
    return p;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* v is a string literal: sizeof - 1 keeps the NUL bytes inside it */
#define expect_val(co, k, v) expect_val_((co), (k), (v), sizeof(v) - 1)
static void expect_val_(pc_coll *co, const char *k, const char *v, size_t vlen)
{
    char buf[128];
    size_t len = 0, need = 0;
    assert_int_equal(pc_get_buf(co, k, strlen(k), buf, sizeof buf, &len, &need, NULL), 0);
    assert_int_equal(len, vlen);
    assert_memory_equal(buf, v, len);
}

static void t_api(void **state)
{
    (void)state;
    pc_cache *ca = mk_cache(), *cb = mk_cache();
    struct pushed pa = {0, 1, "", "", 0};
    pc_persist *a = mk_node(ca, t_pg, "node-1", &pa, 0);
    pc_persist *b = mk_node(cb, t_pg, "node-2", NULL, 0);
    struct synced ev = {0, "", ""};
    assert_int_equal(pc_event_handler(cb, event_cb, &ev), 0);
    assert_int_equal(pc_event_subscribe(cb, PC_EV_RELOADED, 1), 0);

    pc_coll *pa_ = pc_fx_coll(ca, "prof"), *pb = pc_fx_coll(cb, "prof");
    assert_int_equal(pc_set(pa_, "k1", 2, "v1\0x", 4, 0, 0), 0);
    assert_int_equal(pc_set(pa_, "k2", 2, "v2", 2, 600000, 0), 0);
    assert_int_equal(pc_set_counter(pa_, "ctr", 3, -42, 0), 0);
    assert_int_equal(pc_set(pa_, "dies", 4, "x", 1, 300, 0), 0);
    assert_int_equal(pc_set(pb, "stale", 5, "s", 1, 0, 0), 0);
    assert_int_equal(pc_set(pb, "k1", 2, "old", 3, 0, 0), 0);

    /* the authority */
    pc_sync_result r;
    assert_int_equal(pc_persist_sync(a, pa_, &r), 0);
    assert_int_equal(r.saved, 4);
    assert_true(r.generation >= 1);
    assert_int_equal(r.peers, 1);
    assert_int_equal(r.degraded, 0);
    assert_string_equal(r.note, "");
    assert_int_equal(pa.calls, 1);
    assert_string_equal(pa.coll, "prof");
    assert_string_equal(pa.source, "node-1");
    assert_true(pa.gen == r.generation);
    uint64_t gen1 = r.generation;
    pc_sync_stats sa;
    assert_int_equal(pc_persist_sync_stats(a, pa_, &sa), 0);
    assert_true(sa.last_sync_out_ms > 0);
    assert_true(sa.generation == gen1);
    assert_string_equal(sa.source, "node-1");
    sleep_ms(400); /* "dies" expires in the database before the reload */

    /* a notice in another process, the reload in this one */
    assert_int_equal(pc_persist_sync_due_ms(b), -1);
    pid_t pid = fork();
    if (pid == 0)
        _exit(pc_persist_sync_notice(b, "prof", 4, gen1, "node-1") == 0 ? 0 : 1);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(pc_persist_sync_due_ms(b), 0);
    assert_int_equal(pc_persist_sync_tick(b), 0);
    expect_val(pb, "k1", "v1\0x");
    expect_val(pb, "k2", "v2");
    int64_t n = 0;
    assert_int_equal(pc_get_counter(pb, "ctr", 3, &n), 0);
    assert_true(n == -42);
    pc_meta m;
    assert_int_equal(pc_probe(pb, "ctr", 3, &m), 0);
    assert_int_equal(m.is_counter, 1);
    assert_int_equal(pc_probe(pb, "k2", 2, &m), 0);
    assert_true(m.ttl_ms > 590000 && m.ttl_ms <= 600000);
    assert_int_equal(pc_probe(pb, "k1", 2, &m), 0);
    assert_true(m.ttl_ms == -1);
    assert_int_equal(pc_probe(pb, "dies", 4, NULL), PC_ENOTFOUND);
    assert_int_equal(pc_probe(pb, "stale", 5, NULL), PC_ENOTFOUND);
    assert_int_equal(ev.n, 1);
    assert_string_equal(ev.coll, "prof");
    assert_string_equal(ev.source, "node-1");
    pc_sync_stats sb;
    assert_int_equal(pc_persist_sync_stats(b, pb, &sb), 0);
    assert_true(sb.generation == gen1);
    assert_string_equal(sb.source, "node-1");
    assert_true(sb.last_sync_in_ms > 0);
    assert_true(sb.notices == 1 && sb.checks == 1 && sb.reloads == 1 && sb.rejected == 0);
    assert_true(sb.pruned == 1);

    /* a replay: no read */
    assert_int_equal(pc_persist_sync_notice(b, "prof", 4, gen1, "node-1"), 0);
    assert_int_equal(pc_persist_sync_due_ms(b), -1);
    assert_int_equal(pc_persist_sync_tick(b), 0);
    assert_int_equal(pc_persist_sync_stats(b, pb, &sb), 0);
    assert_true(sb.checks == 1);

    /* forged: one read, rejected, nothing changes; a second one waits */
    sleep_ms(CHECK_MS + 20);
    assert_int_equal(pc_persist_sync_notice(b, "prof", 4, UINT64_MAX, "evil"), 0);
    assert_int_equal(pc_persist_sync_tick(b), 0);
    assert_int_equal(pc_persist_sync_stats(b, pb, &sb), 0);
    assert_true(sb.checks == 2 && sb.rejected == 1 && sb.reloads == 1);
    assert_true(sb.generation == gen1);
    assert_int_equal(pc_persist_sync_notice(b, "prof", 4, UINT64_MAX - 1, "evil"), 0);
    int due = pc_persist_sync_due_ms(b);
    assert_true(due > 0 && due <= CHECK_MS);
    for (int i = 0; i < 20; i++)
        assert_int_equal(pc_persist_sync_tick(b), 0);
    assert_int_equal(pc_persist_sync_stats(b, pb, &sb), 0);
    assert_true(sb.checks == 2); /* rate limited */
    sleep_ms((unsigned)due + 10);
    assert_int_equal(pc_persist_sync_tick(b), 0);
    assert_int_equal(pc_persist_sync_stats(b, pb, &sb), 0);
    assert_true(sb.checks == 3 && sb.rejected == 2 && sb.generation == gen1);
    assert_int_equal(pc_persist_sync_due_ms(b), -1); /* dropped after its one check */
    expect_val(pb, "k1", "v1\0x");
    assert_int_equal(ev.n, 1);

    /* bad notices */
    assert_int_equal(pc_persist_sync_notice(b, "nosuch", 6, 5, "x"), PC_ENOCOLL);
    assert_int_equal(pc_persist_sync_notice(b, "prof", 4, 0, "x"), PC_EINVAL);
    assert_int_equal(pc_persist_sync_notice(b, "profX", 4, 99, NULL), 0); /* len bounds it */

    /* degraded: a failing push */
    pa.ret = PC_ESYS;
    assert_int_equal(pc_set(pa_, "k3", 2, "v3", 2, 0, 0), 0);
    assert_int_equal(pc_persist_sync(a, pa_, &r), 0);
    assert_int_equal(r.degraded, 1);
    assert_true(r.peers < 0);
    assert_non_null(strstr(r.note, "notifying the peers failed"));
    assert_true(r.generation == gen1 + 1);

    /* the poll finds it (no notice): a node polling every 100 ms */
    pc_persist_close(b);
    b = mk_node(cb, t_pg, "node-2", NULL, 100);
    sleep_ms(120);
    assert_int_equal(pc_persist_sync_tick(b), 0);
    expect_val(pb, "k3", "v3");
    assert_int_equal(pc_persist_sync_stats(b, pb, &sb), 0);
    assert_true(sb.polls >= 1 && sb.reloads == 1 && sb.generation == gen1 + 1);
    assert_int_equal(ev.n, 2);

    /* a node never reloads its own generation: a restarted authority
     * (generation 0 here) polling keeps what was written since */
    pc_persist_close(a);
    a = mk_node(ca, t_pg, "node-1", NULL, 100);
    assert_int_equal(pc_set(pa_, "fresh", 5, "f", 1, 0, 0), 0);
    sleep_ms(120);
    assert_int_equal(pc_persist_sync_tick(a), 0);
    expect_val(pa_, "fresh", "f");
    assert_int_equal(pc_persist_sync_stats(a, pa_, &sa), 0);
    assert_true(sa.polls >= 1 && sa.reloads == 0);

    /* perf_sync through the command layer, no push: a save with a note */
    pc_persist_close(a);
    a = mk_node(ca, t_pg, "node-1", NULL, 0);
    pc_mgmt *mg = NULL;
    pc_json *j = NULL;
    pc_mgmt_err merr;
    assert_int_equal(pc_mgmt_create(ca, "prof", &mg), 0);
    assert_int_equal(pc_persist_register(a, mg), 0);
    assert_int_equal(pc_json_create(&j), 0);
    assert_int_equal(pc_mgmt_run_line(mg, "perf_sync prof", 14, pc_json_ops(), j, &merr), 0);
    const char *text;
    size_t tl;
    assert_int_equal(pc_json_text(j, &text, &tl), 0);
    assert_non_null(strstr(text, "\"peers\":0"));
    assert_non_null(strstr(text, "no peers configured"));
    assert_non_null(strstr(text, "\"source\":\"node-1\""));
    pc_json_reset(j);
    assert_int_equal(pc_mgmt_run_line(mg, "perf_stats prof", 15, pc_json_ops(), j, &merr), 0);
    assert_int_equal(pc_json_text(j, &text, &tl), 0);
    assert_non_null(strstr(text, "\"last_sync_out\":"));
    assert_non_null(strstr(text, "\"source\":\"node-1\""));
    pc_json_destroy(j);
    pc_mgmt_destroy(mg);

    pc_persist_close(a);
    pc_persist_close(b);
    pc_cache_destroy(ca);
    pc_cache_destroy(cb);
}

/* Two processes ticking at once (a host that gets it wrong): the claim lets
 * exactly one of them reload the collection. */
static void t_two_tickers(void **state)
{
    (void)state;
    pc_cache *ca = mk_cache(), *cb = mk_cache();
    pc_persist *a = mk_node(ca, t_pg, "node-1", NULL, 0);
    pc_persist *b = mk_node(cb, t_pg, "node-2", NULL, 20); /* both processes poll */
    pc_coll *oa = pc_fx_coll(ca, "other"), *ob = pc_fx_coll(cb, "other");
    char k[32], v[100];
    memset(v, 'v', sizeof v);
    for (unsigned i = 0; i < 60000; i++) {
        int n = snprintf(k, sizeof k, "key:%u", i);
        assert_int_equal(pc_set(oa, k, (size_t)n, v, sizeof v, 0, 0), 0);
    }
    pc_sync_result r;
    assert_int_equal(pc_persist_sync(a, oa, &r), 0);
    sleep_ms(25);
    pid_t pid = fork();
    if (pid == 0) {
        int bad = 0;
        for (int i = 0; i < 200; i++) {
            bad |= pc_persist_sync_tick(b);
            sleep_ms(2);
        }
        _exit(bad == 0 ? 0 : 1);
    }
    for (int i = 0; i < 200; i++) { /* polls while the child may be reloading */
        assert_int_equal(pc_persist_sync_tick(b), 0);
        sleep_ms(2);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    pc_sync_stats sb;
    assert_int_equal(pc_persist_sync_stats(b, ob, &sb), 0);
    assert_true(sb.reloads == 1);
    assert_true(sb.generation == r.generation);
    pc_coll_stats cs;
    assert_int_equal(pc_coll_stats_get(ob, &cs), 0);
    assert_true(cs.entries == 60000);
    pc_persist_close(a);
    pc_persist_close(b);
    pc_cache_destroy(ca);
    pc_cache_destroy(cb);
}

static void t_lmdb_and_config(void **state)
{
    (void)state;
    pc_cache *c = mk_cache();
    char dir[] = "/tmp/pcache-sync-lmdb-XXXXXX";
    assert_non_null(mkdtemp(dir));
    pc_persist_config pc;
    pc_persist_config_init(&pc);
    pc.db_url = dir;
    pc.node_id = "bad id";
    pc_persist *p = NULL;
    char err[512];
    assert_int_equal(pc_persist_open(c, &pc, &p, err, sizeof err), PC_ECONFIG);
    assert_non_null(strstr(err, "node_id"));
    pc.node_id = "n1";
    assert_int_equal(pc_persist_open(c, &pc, &p, err, sizeof err), 0);
    assert_int_equal(pc_set(pc_fx_coll(c, "prof"), "a", 1, "b", 1, 0, 0), 0);
    pc_sync_result r;
    assert_int_equal(pc_persist_sync(p, pc_fx_coll(c, "prof"), &r), 0);
    assert_int_equal(r.saved, 1);
    assert_int_equal(r.degraded, 1);
    assert_int_equal(r.peers, 0);
    assert_non_null(strstr(r.note, "no shared SQL database"));
    assert_int_equal(pc_persist_sync_tick(p), 0); /* nothing to do, no error */
    assert_int_equal(pc_persist_sync_due_ms(p), -1);
    pc_persist_close(p);
    pc_cache_destroy(c);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    int rc = odbc_env_start("test_sync_api", 0);
    if (rc != 0)
        return rc;
    snprintf(t_pg, sizeof t_pg, "%s", odbc_env_pg());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_api),
        cmocka_unit_test(t_two_tickers),
        cmocka_unit_test(t_lmdb_and_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
