/*
 * test_resp_parse.c - pcached's parsers of outside bytes, alone: the RESP
 * request parser (src/server/resp.c) and the JSON-RPC request reader
 * (src/server/jsonrpc_parse.c).
 *
 * Every input is placed so that its last byte sits just before a PROT_NONE
 * page: a read past what the parser was given faults. The RESP parser is
 * fed each stream whole and then one byte at a time, with the unconsumed
 * bytes moved to the guard page before every call (the compaction a
 * worker does): both ways must give the same commands, the same replies
 * and the same verdict. Inputs: the protocol's edge cases and seeded
 * mutations of valid pipelines.
 */
#include "resp.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#define AREA (1u << 20)

static char *area; /* AREA bytes readable, then one PROT_NONE page */

static int setup(void **state)
{
    (void)state;
    long pg = sysconf(_SC_PAGESIZE);
    char *p =
        mmap(NULL, AREA + (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || mprotect(p + AREA, (size_t)pg, PROT_NONE) != 0)
        return -1;
    area = p;
    return 0;
}

/* What a parse produced: the commands (arguments joined as "a|b|c;"), the
 * replies the parser queued, and how it ended. */
struct outcome {
    char cmds[1 << 16];
    size_t clen;
    char replies[1 << 16];
    size_t rlen;
    int proto; /* 1 when the connection was to be closed */
};

static void record_cmd(struct outcome *o, conn *c)
{
    const char *base = c->in.p + c->in.off;
    for (unsigned i = 0; i < c->nargs; i++) {
        size_t n = c->args[i].len;
        if (o->clen + n + 2 < sizeof o->cmds) {
            memcpy(o->cmds + o->clen, base + c->args[i].off, n);
            o->clen += n;
            o->cmds[o->clen++] = i + 1 < c->nargs ? '|' : ';';
        }
    }
}

static const resp_limits lim = {8, 64, 128, 1024, 0};

/* Places the unconsumed bytes of the stream against the guard page and
 * runs the parser until it needs more. Returns 1 when it stopped (a
 * protocol error). */
static int run_parser(conn *c, const char *stream, size_t *consumed, size_t avail,
                      struct outcome *o)
{
    size_t n = avail - *consumed;
    assert_true(n <= AREA);
    char *at = area + AREA - n;
    memmove(at, stream + *consumed, n);
    c->in.p = at;
    c->in.off = 0;
    c->in.len = n;
    c->in.cap = n;
    for (;;) {
        int r = resp_parse(c, &lim);
        if (r == RESP_CMD) {
            record_cmd(o, c);
            resp_consume(c);
            continue;
        }
        if (r == RESP_REFUSED)
            continue;
        *consumed += c->in.off;
        if (r == RESP_PROTO) {
            o->proto = 1;
            return 1;
        }
        return 0; /* RESP_NEED */
    }
}

static void parse_stream(const char *s, size_t n, size_t step, struct outcome *o)
{
    memset(o, 0, sizeof *o);
    conn c;
    memset(&c, 0, sizeof c);
    c.need_args = -1;
    c.bulk_len = -1;
    size_t consumed = 0;
    for (size_t avail = step ? 1 : n; avail <= n; avail += step ? step : 1) {
        if (run_parser(&c, s, &consumed, avail, o))
            break;
        if (!step)
            break;
    }
    size_t rl = c.out.len - c.out.off;
    assert_true(rl < sizeof o->replies);
    if (rl > 0)
        memcpy(o->replies, c.out.p + c.out.off, rl);
    o->rlen = rl;
    free(c.out.p);
    free(c.args);
}

static unsigned long total_cmds, total_proto, total_refused_replies;

static void same_both_ways(const char *s, size_t n)
{
    static struct outcome whole, bytes;
    parse_stream(s, n, 0, &whole);
    parse_stream(s, n, 1, &bytes);
    if (whole.clen != bytes.clen || memcmp(whole.cmds, bytes.cmds, whole.clen) != 0 ||
        whole.rlen != bytes.rlen || memcmp(whole.replies, bytes.replies, whole.rlen) != 0 ||
        whole.proto != bytes.proto)
        fail_msg("whole vs byte-by-byte differ: cmds '%.*s' vs '%.*s', replies '%.*s' vs '%.*s'",
                 (int)whole.clen, whole.cmds, (int)bytes.clen, bytes.cmds, (int)whole.rlen,
                 whole.replies, (int)bytes.rlen, bytes.replies);
    for (size_t i = 0; i < whole.clen; i++)
        total_cmds += whole.cmds[i] == ';';
    total_proto += (unsigned long)whole.proto;
    total_refused_replies += whole.rlen > 0 && !whole.proto;
}

static void expect(const char *s, const char *cmds, const char *replies, int proto)
{
    static struct outcome o;
    same_both_ways(s, strlen(s));
    parse_stream(s, strlen(s), 0, &o);
    if (o.clen != strlen(cmds) || memcmp(o.cmds, cmds, o.clen) != 0)
        fail_msg("'%s': commands '%.*s', want '%s'", s, (int)o.clen, o.cmds, cmds);
    if (o.rlen != strlen(replies) || memcmp(o.replies, replies, o.rlen) != 0)
        fail_msg("'%s': replies '%.*s', want '%s'", s, (int)o.rlen, o.replies, replies);
    assert_int_equal(o.proto, proto);
}

static void protocol_cases(void **state)
{
    (void)state;
    expect("*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", "PING;GET|k;", "", 0);
    expect("PING\r\nGET  k\r\n\r\n", "PING;GET|k;", "", 0);
    expect("*0\r\n*-1\r\n*1\r\n$0\r\n\r\n", ";", "", 0);
    /* limits (max_args 8, max_bulk 64): refused, skipped, the next served */
    expect("*9\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n"
           "$1\r\na\r\n$1\r\na\r\n*1\r\n$4\r\nPING\r\n",
           "PING;", "-ERR too many arguments: 9 (max_args is 8)\r\n", 0);
    expect("*2\r\n$3\r\nSET\r\n$65\r\n"
           "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n"
           "*1\r\n$4\r\nPING\r\n",
           "PING;",
           "-ERR string exceeds maximum allowed size (an argument of 65 bytes; max_bulk is 64)\r\n",
           0);
    expect("*3\r\n$3\r\nSET\r\n$60\r\n"
           "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n"
           "$60\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n"
           "*1\r\n$4\r\nPING\r\n",
           "SET|xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx|"
           "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx;PING;",
           "", 0);
    /* framing errors: one reply, then the connection closes */
    expect("*abc\r\n", "", "-ERR Protocol error: invalid multibulk length\r\n", 1);
    expect("*1\r\n$-2\r\n", "", "-ERR Protocol error: invalid bulk length\r\n", 1);
    expect("*1\r\n:5\r\n", "", "-ERR Protocol error: expected '$', got ':'\r\n", 1);
    expect("*1\r\n$2\r\nabX\r\n", "", "-ERR Protocol error: bulk not terminated by CRLF\r\n", 1);
    expect("*99999999999999999999999999999999999\r\n", "",
           "-ERR Protocol error: invalid multibulk length\r\n", 1);
    expect("*2000000\r\n", "", "-ERR Protocol error: invalid multibulk length\r\n", 1);
    /* inline quoting as Redis's sdssplitargs (test_redis_compat.py checks
     * the same against a real redis-server) */
    expect("SET \"a b\" c\r\n", "SET|a b|c;", "", 0);
    expect("GET 'it\\'s'\r\nECHO \"\"\r\n", "GET|it's;ECHO|;", "", 0);
    expect("ECHO \"\\x41\\x4a\\n\\q\"\r\n", "ECHO|AJ\nq;", "", 0);
    expect("ECHO \"\\x4\" 'a\\b'\r\n", "ECHO|x4|a\\b;", "", 0);
    expect("ECHO \"a\"b\r\n", "", "-ERR Protocol error: unbalanced quotes in request\r\n", 1);
    expect("ECHO 'abc\r\n", "", "-ERR Protocol error: unbalanced quotes in request\r\n", 1);
    expect("ECHO \"ab\\\"\r\n", "", "-ERR Protocol error: unbalanced quotes in request\r\n", 1);
    expect("ECHO \"ab\\", "", "", 0); /* no line end yet: nothing */
    char inl[300];
    memset(inl, 'a', sizeof inl - 1);
    inl[sizeof inl - 1] = '\0';
    expect(inl, "", "-ERR Protocol error: too big inline request\r\n", 1);
}

/* KEYS / SCAN MATCH / CONFIG GET globs as Redis matches them, malformed
 * patterns included (the answers redis-server 7.0 gives). */
static void redis_glob_cases(void **state)
{
    (void)state;
    static const struct {
        const char *pat, *s;
        int nocase, want;
    } cases[] = {
        {"[", "[", 0, 0},
        {"[", "", 0, 0},
        {"[^]", "x", 0, 1},
        {"[^]", "[", 0, 1},
        {"[^]", "", 0, 0},
        {"[^]", "ab", 0, 0},
        {"a\\", "a\\", 0, 1},
        {"a\\", "a", 0, 0},
        {"[!x]", "x", 0, 1},
        {"[!x]", "!", 0, 1},
        {"[!x]", "y", 0, 0},
        {"[^x", "[", 0, 1},
        {"[^x", "x", 0, 0},
        {"[abc", "b", 0, 1},
        {"[abc", "d", 0, 0},
        {"[z-a]", "m", 0, 1},
        {"[x-]", "-", 0, 0},
        {"[x-]", "x", 0, 1},
        {"\\[", "[", 0, 1},
        {"[\\]]", "]", 0, 1},
        {"*x", "abx", 0, 1},
        {"**x", "x", 0, 1},
        {"x*", "x", 0, 1},
        {"x**", "x", 0, 1},
        {"?", "", 0, 0},
        {"*", "", 0, 0},
        {"a*b*c", "aXbYc", 0, 1},
        {"a*b*c", "aXbY", 0, 0},
        {"TIME*", "timeout", 1, 1},
        {"TIME*", "timeout", 0, 0},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = srv_glob_match(cases[i].pat, strlen(cases[i].pat), cases[i].s, strlen(cases[i].s),
                                 cases[i].nocase);
        if (got != cases[i].want)
            fail_msg("glob '%s' on '%s': %d, want %d", cases[i].pat, cases[i].s, got,
                     cases[i].want);
    }
    /* many stars against a long miss: polynomial, not exponential */
    char pat[200], str[4000];
    for (unsigned i = 0; i < sizeof pat - 2; i++)
        pat[i] = i % 2 ? '*' : 'a';
    pat[sizeof pat - 2] = 'b';
    pat[sizeof pat - 1] = '\0';
    memset(str, 'a', sizeof str);
    assert_int_equal(srv_glob_match(pat, strlen(pat), str, sizeof str, 0), 0);
}

static void mutated_pipelines(void **state)
{
    (void)state;
    static const char *seeds[] = {
        "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n",
        "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n",
        "PING\r\nECHO hello world\r\n",
        "*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nEX\r\n$3\r\n100\r\n",
        "*9\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n"
        "$1\r\na\r\n$1\r\na\r\n",
    };
    static const char *inserts[] = {"\r\n", "*", "$", "-1", "99999", "\0", "*0\r\n", "$70\r\n"};
    unsigned x = 20261130u;
    char buf[4096];
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = 0;
        int parts = 1 + (int)(x % 4);
        for (int p = 0; p < parts; p++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            const char *s = seeds[x % (sizeof seeds / sizeof seeds[0])];
            size_t l = strlen(s);
            memcpy(buf + n, s, l);
            n += l;
        }
        for (int m = 0; m < 1 + (int)(x % 3); m++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            size_t at = x % n;
            switch ((x >> 8) % 3) {
            case 0:
                buf[at] = (char)(x >> 16);
                break;
            case 1: {
                const char *ins = inserts[(x >> 12) % (sizeof inserts / sizeof inserts[0])];
                size_t il = strlen(ins) ? strlen(ins) : 1;
                if (n + il < sizeof buf) {
                    memmove(buf + at + il, buf + at, n - at);
                    memcpy(buf + at, ins, il);
                    n += il;
                }
                break;
            }
            default: {
                size_t dl = 1 + (x >> 20) % 6;
                if (at + dl <= n) {
                    memmove(buf + at, buf + at + dl, n - at - dl);
                    n -= dl;
                }
                break;
            }
            }
        }
        same_both_ways(buf, n);
    }
    /* the mutations reach every outcome: commands, refusals, framing errors */
    if (total_cmds < 1000 || total_proto < 300 || total_refused_replies < 50)
        fail_msg("mutations too tame: %lu commands, %lu protocol errors, %lu refusals", total_cmds,
                 total_proto, total_refused_replies);
    printf("mutated pipelines: %lu commands, %lu protocol errors, %lu with refusals\n", total_cmds,
           total_proto, total_refused_replies);
}

/* ---- the JSON-RPC request reader ------------------------------------------- */

static int rpc(const char *body, struct rpc_req *r)
{
    size_t n = strlen(body);
    char *at = area + AREA - n;
    memmove(at, body, n);
    static char scratch[1 << 16];
    return srv_rpc_parse(at, n, scratch, r);
}

static void rpc_requests(void **state)
{
    (void)state;
    struct rpc_req r;
    /* standard JSON: \u00ff is U+00FF (UTF-8 c3 bf), \u0000 a NUL byte */
    assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"method\":\"perf_get\",\"params\":"
                         "{\"key\":\"a\\u0000\\u00ff\\n\",\"ttl\":5,\"x\":null},\"id\":7}",
                         &r),
                     0);
    assert_true(r.version_ok && r.has_method && r.has_id && !r.bad_params);
    assert_string_equal(r.method, "perf_get");
    assert_int_equal(r.nargs, 2);
    assert_int_equal(r.args[0].len, 5);
    assert_memory_equal(r.args[0].val, "a\0\xc3\xbf\n", 5);
    assert_memory_equal(r.args[0].name, "key", 3);
    assert_memory_equal(r.args[1].val, "5", 1);
    assert_int_equal(r.id_len, 1);
    srv_rpc_release(&r);
    /* Python's json.dumps("na\u00efve") finds the key "naïve" */
    assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":[\"na\\u00efve\"],"
                         "\"id\":\"x\"}",
                         &r),
                     0);
    assert_int_equal(r.args[0].len, 6);
    assert_memory_equal(r.args[0].val, "na\xc3\xafve", 6);
    assert_string_equal(r.id, "\"x\"");
    srv_rpc_release(&r);
    /* base64: "<name>_b64" and a positional {"b64":...} */
    assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":"
                         "{\"key_b64\":\"/wA=\",\"value\":\"v\"},\"id\":1}",
                         &r),
                     0);
    assert_false(r.bad_b64 || r.bad_params || r.duplicate);
    assert_int_equal(r.nargs, 2);
    assert_int_equal(r.args[0].nlen, 3);
    assert_memory_equal(r.args[0].name, "key", 3);
    assert_int_equal(r.args[0].len, 2);
    assert_memory_equal(r.args[0].val, "\xff\0", 2);
    srv_rpc_release(&r);
    assert_int_equal(
        rpc("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":[{\"b64\":\"AQID\"},\"th\"]}", &r),
        0);
    assert_int_equal(r.nargs, 2);
    assert_int_equal(r.args[0].len, 3);
    assert_memory_equal(r.args[0].val, "\1\2\3", 3);
    srv_rpc_release(&r);
    static const char *bad64[] = {"{\"key_b64\":\"/w\"}", "{\"key_b64\":\"/x==\"}",
                                  "{\"key_b64\":\"a=bc\"}", "{\"key_b64\":5}", "[{\"b64\":\"*\"}]"};
    for (size_t i = 0; i < sizeof bad64 / sizeof bad64[0]; i++) {
        char req[128];
        snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":%s}", bad64[i]);
        assert_int_equal(rpc(req, &r), 0);
        if (!r.bad_b64)
            fail_msg("'%s' accepted", bad64[i]);
        srv_rpc_release(&r);
    }
    /* "key" and "key_b64" name one parameter twice */
    assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":"
                         "{\"key\":\"a\",\"key_b64\":\"YQ==\"}}",
                         &r),
                     0);
    assert_true(r.duplicate);
    srv_rpc_release(&r);
    assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"method\":\"n\"}", &r), 0);
    assert_true(r.duplicate);
    srv_rpc_release(&r);
    assert_int_equal(
        rpc("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":[\"\\ud83d\\ude00\"]}", &r), 0);
    assert_int_equal(r.args[0].len, 4);
    assert_memory_equal(r.args[0].val, "\xf0\x9f\x98\x80", 4);
    assert_false(r.has_id);
    srv_rpc_release(&r);
    assert_int_equal(rpc("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":[[1]],\"id\":1}", &r),
                     0);
    assert_true(r.bad_params);
    srv_rpc_release(&r);
    assert_int_equal(rpc("[{\"jsonrpc\":\"2.0\"}]", &r), -2);
    static const char *bad[] = {"",
                                "{",
                                "{\"a\"",
                                "{\"a\":}",
                                "{\"a\":1,}",
                                "{\"a\":\"\\x\"}",
                                "{\"a\":\"\\ud800\"}",
                                "{} x",
                                "{\"a\":[1,2",
                                "{\"a\":\"unterminated",
                                "{\"a\":\"\xff\"}", /* not UTF-8 */
                                "7"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (rpc(bad[i], &r) != -1)
            fail_msg("'%s' parsed", bad[i]);
    /* every prefix of a valid request ends at the guard page: no over-read */
    const char *full =
        "{\"jsonrpc\":\"2.0\",\"method\":\"perf_keys\",\"params\":{\"glob\":\"s\\u002a\","
        "\"limit\":\"5\"},\"id\":\"x\"}";
    char pre[256];
    for (size_t l = 0; l < strlen(full); l++) {
        memcpy(pre, full, l);
        pre[l] = '\0';
        assert_int_equal(rpc(pre, &r), -1);
    }
    assert_int_equal(rpc(full, &r), 0);
    srv_rpc_release(&r);
    /* deep nesting is refused, not recursed into without bound */
    char deep[200];
    size_t d = 0;
    d += (size_t)sprintf(deep, "{\"x\":");
    for (int i = 0; i < 60; i++)
        deep[d++] = '[';
    deep[d] = '\0';
    assert_int_equal(rpc(deep, &r), -1);
    /* closed, but deeper than jansson's bound (2048 levels): refused */
    static char deeper[8192];
    d = (size_t)sprintf(deeper, "{\"x\":");
    for (int i = 0; i < 3000; i++)
        deeper[d++] = '[';
    for (int i = 0; i < 3000; i++)
        deeper[d++] = ']';
    deeper[d++] = '}';
    deeper[d] = '\0';
    assert_int_equal(rpc(deeper, &r), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(protocol_cases),
        cmocka_unit_test(redis_glob_cases),
        cmocka_unit_test(mutated_pipelines),
        cmocka_unit_test(rpc_requests),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
