/*
 * cmd_script.c - EVAL, EVALSHA, SCRIPT, FCALL: no Lua, and one documented
 * subset (docs/pcached.md, "Scripting").
 *
 * pcached has no script interpreter. It knows three scripts by their exact
 * text and its SHA1 - the ones redis-py's Lock sends (redis/lock.py of
 * redis-py 3.x to 5.x: release, extend, reacquire) - and runs each as the
 * native code below, inside one engine transaction (pc_txn_run), so it is
 * as atomic as the script is in Redis. Every other script is refused with a
 * clear error: EVAL and SCRIPT LOAD of an unknown text answer "scripting is
 * not supported", EVALSHA of an unknown digest answers Redis's NOSCRIPT (a
 * client then sends the text, and learns the reason).
 */
#include "resp.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SCRIPT_REFUSED                                                                             \
    "ERR scripting is not supported by pcached (EVAL, EVALSHA, SCRIPT and FCALL run only the "     \
    "scripts of redis-py's Lock); use MULTI/EXEC with WATCH for atomic updates"

enum { SC_RELEASE, SC_EXTEND, SC_REACQUIRE };

static const struct known_script {
    const char *sha1; /* hex SHA1 of text */
    const char *text;
    int kind;
    unsigned nargv; /* ARGV count (one key always) */
} known[] = {
    {"c3f8721cbb97f72bc19e972846bd7aaf91901658",
     "\n        local token = redis.call('get', KEYS[1])\n        if not token or token ~= "
     "ARGV[1] then\n            return 0\n        end\n        redis.call('del', KEYS[1])\n"
     "        return 1\n    ",
     SC_RELEASE, 1},
    {"a4e8783852e6b949f9ef3a97212805108459a890",
     "\n        local token = redis.call('get', KEYS[1])\n        if not token or token ~= "
     "ARGV[1] then\n            return 0\n        end\n        local expiration = "
     "redis.call('pttl', KEYS[1])\n        if not expiration then\n            expiration = 0\n"
     "        end\n        if expiration < 0 then\n            return 0\n        end\n\n"
     "        local newttl = ARGV[2]\n        if ARGV[3] == \"0\" then\n            newttl = "
     "ARGV[2] + expiration\n        end\n        redis.call('pexpire', KEYS[1], newttl)\n"
     "        return 1\n    ",
     SC_EXTEND, 3},
    {"1cac51482acf5858da00f6d685d68f886cd6b6b2",
     "\n        local token = redis.call('get', KEYS[1])\n        if not token or token ~= "
     "ARGV[1] then\n            return 0\n        end\n        redis.call('pexpire', KEYS[1], "
     "ARGV[2])\n        return 1\n    ",
     SC_REACQUIRE, 2},
};
#define NKNOWN (sizeof known / sizeof known[0])

static const struct known_script *by_text(const char *p, size_t n)
{
    for (unsigned i = 0; i < NKNOWN; i++)
        if (strlen(known[i].text) == n && memcmp(known[i].text, p, n) == 0)
            return &known[i];
    return NULL;
}

static const struct known_script *by_sha(const char *p, size_t n)
{
    for (unsigned i = 0; i < NKNOWN; i++)
        if (n == 40 && strncasecmp(known[i].sha1, p, 40) == 0)
            return &known[i];
    return NULL;
}

/* One run of a script, as pc_txn_run's fn. */
struct script_run {
    srv_worker *w;
    pc_coll *coll;
    const struct known_script *s;
    const char *key, *const *argv; /* ARGV[1..] */
    size_t klen;
    const size_t *argl;
    int64_t n2; /* ARGV[2] as an integer (extend, reacquire) */
    int64_t result;
};

/* redis.call('pexpire', key, ms): a time not in the future deletes. */
static int script_pexpire(struct script_run *r, int64_t ms)
{
    if (ms <= 0) {
        int rc = pc_remove(r->coll, r->key, r->klen);
        return rc == PC_ENOTFOUND ? 0 : rc;
    }
    int rc = pc_expire(r->coll, r->key, r->klen, ms);
    return rc == PC_ENOTFOUND ? 0 : rc;
}

static int script_body(void *ctx)
{
    struct script_run *r = ctx;
    size_t len = 0, need = 0;
    pc_meta m;
    r->result = 0;
    int rc =
        pc_get_buf(r->coll, r->key, r->klen, r->w->scratch, r->w->scratch_cap, &len, &need, &m);
    if (rc == PC_ENOTFOUND)
        return 0;
    if (rc != 0)
        return rc;
    if (len != r->argl[0] || memcmp(r->w->scratch, r->argv[0], len) != 0)
        return 0; /* not the token's owner */
    switch (r->s->kind) {
    case SC_RELEASE:
        rc = pc_remove(r->coll, r->key, r->klen);
        break;
    case SC_EXTEND: {
        if (m.ttl_ms < 0)
            return 0; /* no expiry: the script returns 0 */
        int64_t ms = r->n2;
        int replace = r->argl[2] == 1 && r->argv[2][0] == '0' ? 0 : 1;
        if (!replace && __builtin_add_overflow(ms, m.ttl_ms, &ms))
            return PC_ERANGE;
        rc = script_pexpire(r, ms);
        break;
    }
    default:
        rc = script_pexpire(r, r->n2);
        break;
    }
    if (rc == 0)
        r->result = 1;
    return rc;
}

/* Runs script s with argv[0] = numkeys, then keys and arguments. */
static void script_exec(srv_worker *w, conn *c, const struct known_script *s, unsigned argc,
                        const char **argv, const size_t *argl)
{
    int64_t numkeys;
    if (arg_i64(argv[0], argl[0], &numkeys) != 0) {
        reply_error(c, "ERR value is not an integer or out of range");
        return;
    }
    if (numkeys < 0) {
        reply_error(c, "ERR Number of keys can't be negative");
        return;
    }
    if (numkeys > (int64_t)argc - 1) {
        reply_error(c, "ERR Number of keys can't be greater than number of args");
        return;
    }
    if (numkeys != 1 || argc - 2 != s->nargv) {
        reply_error(c,
                    "ERR pcached runs this script (redis-py's Lock) with 1 key and %u "
                    "arguments only",
                    s->nargv);
        return;
    }
    struct script_run r = {.w = w,
                           .coll = c->coll,
                           .s = s,
                           .key = argv[1],
                           .klen = argl[1],
                           .argv = argv + 2,
                           .argl = argl + 2};
    if (s->kind != SC_RELEASE && arg_i64(argv[3], argl[3], &r.n2) != 0) {
        reply_error(c, "ERR value is not an integer or out of range");
        return;
    }
    if (argl[1] > PC_KEY_MAX) {
        reply_int(c, 0); /* no such key can exist */
        return;
    }
    int rc = pc_txn_run(w->s->cache, script_body, &r, 1000);
    if (rc != 0)
        reply_pc_error(c, rc);
    else
        reply_int(c, r.result);
}

static void cmd_eval(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    const struct known_script *s = by_text(argv[1], argl[1]);
    if (s == NULL)
        reply_error(c, SCRIPT_REFUSED);
    else
        script_exec(w, c, s, argc - 2, argv + 2, argl + 2);
}

static void cmd_evalsha(srv_worker *w, conn *c, unsigned argc, const char **argv,
                        const size_t *argl)
{
    const struct known_script *s = by_sha(argv[1], argl[1]);
    if (s == NULL)
        reply_error(c, "NOSCRIPT No matching script. Please use EVAL.");
    else
        script_exec(w, c, s, argc - 2, argv + 2, argl + 2);
}

static void cmd_script(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w;
    if (arg_eq(argv[1], argl[1], "LOAD") && argc == 3) {
        const struct known_script *s = by_text(argv[2], argl[2]);
        if (s == NULL)
            reply_error(c, SCRIPT_REFUSED);
        else
            reply_bulk(c, s->sha1, 40);
    } else if (arg_eq(argv[1], argl[1], "EXISTS") && argc >= 3) {
        reply_array(c, argc - 2);
        for (unsigned i = 2; i < argc; i++)
            reply_int(c, by_sha(argv[i], argl[i]) != NULL);
    } else if (arg_eq(argv[1], argl[1], "FLUSH") && argc <= 3) {
        reply_ok(c); /* the known scripts are built in: nothing to forget */
    } else {
        reply_error(c, SCRIPT_REFUSED);
    }
}

static void cmd_refused(srv_worker *w, conn *c, unsigned argc, const char **argv,
                        const size_t *argl)
{
    (void)w, (void)argc, (void)argv, (void)argl;
    reply_error(c, SCRIPT_REFUSED);
}

const cmd_def cmd_script_table[] = {
    {"EVAL", -3, 0, cmd_eval, 0, 0, 0},          {"EVALSHA", -3, 0, cmd_evalsha, 0, 0, 0},
    {"EVAL_RO", -3, 0, cmd_refused, 0, 0, 0}, /* the known scripts write */
    {"EVALSHA_RO", -3, 0, cmd_refused, 0, 0, 0}, {"SCRIPT", -2, 0, cmd_script, 0, 0, 0},
    {"FCALL", -3, 0, cmd_refused, 0, 0, 0},      {"FCALL_RO", -3, 0, cmd_refused, 0, 0, 0},
};
const unsigned cmd_script_count = sizeof cmd_script_table / sizeof cmd_script_table[0];
