/*
 * cmd_config.c - CONFIG GET / SET / RESETSTAT / HELP, and the settings
 * that may change while pcached runs (docs/pcached.md, "CONFIG").
 *
 * CONFIG GET answers pcached's own keys (section 2 of the doc) and the
 * Redis names clients ask for, mapped onto them (timeout, loglevel,
 * port, bind, proto-max-bulk-len, maxmemory-policy: the policy of the
 * client's selected collection...) or constant (save, appendonly).
 * requirepass and management_password are never on the wire: CONFIG GET
 * leaves them out.
 *
 * CONFIG SET changes the run-time settings of rt_params below, several at
 * once as Redis 7 does (all checked first, then all applied, or none).
 * Every other known name is refused as immutable (a Redis name given the
 * value it already has is accepted, so that `CONFIG SET save ""` and the
 * like work). Each process has its own copy of the configuration, so the
 * new values go through srv_shm.rt, a small seqlock: the worker that runs
 * CONFIG SET takes it (gen even -> odd), writes every run-time value, and
 * releases it (gen even again; a writer killed half way is taken over
 * after 100 ms); every process compares gen with the one it
 * last applied (srv_runtime_poll: a worker on its one-second tick and
 * before its first command, the maintenance process on each loop turn) and
 * copies the values into its srv_config and its log level. A worker the
 * master restarts applies them before it serves. Nothing is written to the
 * configuration file: a restart returns to it.
 *
 * maxmemory and maxmemory-policy act in the engine, whose cap and
 * per-collection policies live in shared memory: the writer changes them
 * there while it holds gen odd (all or none: a policy the engine refuses
 * leaves every collection as it was and publishes nothing), and srv.rt only
 * carries the text that CONFIG GET shows in the other processes.
 */
#include "resp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the run-time settings ------------------------------------------------------------ */

/* CONFIG SET names: pcached's keys, and Redis's names for two of them. */
static const struct rt_param {
    const char *name; /* as CONFIG SET takes it (any case) */
    const char *key;  /* pcached's configuration key */
    int redis_level;  /* 1: the value is a Redis loglevel (debug verbose notice warning) */
} rt_params[] = {
    {"timeout", "idle_timeout_s", 0},
    {"loglevel", "log_level", 1},
    {"idle_timeout_s", "idle_timeout_s", 0},
    {"log_level", "log_level", 0},
    {"maxclients", "maxclients", 0},
    {"max_output_mb", "max_output_mb", 0},
    {"max_args", "max_args", 0},
    {"max_bulk", "max_bulk", 0},
    {"max_inline", "max_inline", 0},
    {"max_request_mb", "max_request_mb", 0},
    {"maxmemory", "maxmemory", 0},
    {"maxmemory-policy", "maxmemory_policy", 0},
    {"maxmemory_policy", "maxmemory_policy", 0},
    {"slowlog-log-slower-than", "slowlog_log_slower_than", 0},
    {"slowlog_log_slower_than", "slowlog_log_slower_than", 0},
    {"slowlog-max-len", "slowlog_max_len", 0},
    {"slowlog_max_len", "slowlog_max_len", 0},
};
#define RT_N (sizeof rt_params / sizeof rt_params[0])

static uint64_t rt_seen; /* the generation this process applied last */

/* Takes the writer's side of the seqlock; returns the even generation it
 * found (gen is that + 1 until rt_release). */
static uint64_t rt_take(srv *s)
{
    struct srv_runtime_shm *rt = &s->shm->rt;
    uint64_t g = atomic_load_explicit(&rt->gen, memory_order_relaxed), odd_seen = 0;
    int64_t odd_since = 0;
    for (;;) { /* take the writer's side: even -> odd */
        if (g % 2 == 0 && atomic_compare_exchange_weak_explicit(
                              &rt->gen, &g, g + 1, memory_order_acquire, memory_order_relaxed))
            break;
        if (g % 2 != 0) {
            /* a writer takes a few stores; one odd for 100 ms was killed
             * mid-write: end its turn (this writer rewrites every value) */
            int64_t now = pc_mono_ms();
            if (g != odd_seen) {
                odd_seen = g;
                odd_since = now;
            } else if (now - odd_since > 100) {
                (void)atomic_compare_exchange_strong(&rt->gen, &g, g + 1);
            }
        }
        g = atomic_load_explicit(&rt->gen, memory_order_relaxed);
    }
    return g;
}

/* Ends the turn rt_take began at g: publishes s->cfg's run-time values, or
 * (publish 0: nothing changed) hands the generation back as it was. */
static void rt_release(srv *s, uint64_t g, int publish)
{
    struct srv_runtime_shm *rt = &s->shm->rt;
    if (!publish) {
        atomic_store_explicit(&rt->gen, g, memory_order_release);
        return;
    }
    const srv_config *c = &s->cfg;
    atomic_store_explicit(&rt->idle_timeout_s, c->idle_timeout_s, memory_order_relaxed);
    atomic_store_explicit(&rt->maxclients, c->maxclients, memory_order_relaxed);
    atomic_store_explicit(&rt->max_output_mb, c->max_output_mb, memory_order_relaxed);
    atomic_store_explicit(&rt->max_args, c->max_args, memory_order_relaxed);
    atomic_store_explicit(&rt->max_bulk, c->max_bulk, memory_order_relaxed);
    atomic_store_explicit(&rt->max_inline, c->max_inline, memory_order_relaxed);
    atomic_store_explicit(&rt->max_request_mb, c->max_request_mb, memory_order_relaxed);
    atomic_store_explicit(&rt->log_level, srv_log_level_parse(c->log_level), memory_order_relaxed);
    atomic_store_explicit(&rt->maxmemory, c->maxmemory, memory_order_relaxed);
    int policy = PC_EVICT_NONE;
    (void)pc_evict_policy_parse(c->maxmemory_policy, strlen(c->maxmemory_policy), &policy);
    atomic_store_explicit(&rt->maxmemory_policy, policy, memory_order_relaxed);
    atomic_store_explicit(&rt->slowlog_log_slower_than, c->slowlog_log_slower_than,
                          memory_order_relaxed);
    atomic_store_explicit(&rt->slowlog_max_len, c->slowlog_max_len, memory_order_relaxed);
    atomic_store_explicit(&rt->gen, g + 2, memory_order_release);
    rt_seen = g + 2;
}

static int rt_apply(srv *s, uint64_t g, uint64_t expect);

int srv_runtime_poll(srv *s)
{
    struct srv_runtime_shm *rt = &s->shm->rt;
    uint64_t g = atomic_load_explicit(&rt->gen, memory_order_acquire);
    if (g == rt_seen || g % 2 != 0)
        return 0; /* nothing new, or a writer is at work: the next poll */
    return rt_apply(s, g, g);
}

/* Copies the values published at generation g into s->cfg and the log
 * level, if gen still reads expect after the copy (g for a reader; g + 1
 * for the writer itself, config_set); else nothing (torn) and 0. */
static int rt_apply(srv *s, uint64_t g, uint64_t expect)
{
    struct srv_runtime_shm *rt = &s->shm->rt;
    srv_config n = s->cfg;
    n.idle_timeout_s = atomic_load_explicit(&rt->idle_timeout_s, memory_order_relaxed);
    n.maxclients = atomic_load_explicit(&rt->maxclients, memory_order_relaxed);
    n.max_output_mb = atomic_load_explicit(&rt->max_output_mb, memory_order_relaxed);
    n.max_args = atomic_load_explicit(&rt->max_args, memory_order_relaxed);
    n.max_bulk = atomic_load_explicit(&rt->max_bulk, memory_order_relaxed);
    n.max_inline = atomic_load_explicit(&rt->max_inline, memory_order_relaxed);
    n.max_request_mb = atomic_load_explicit(&rt->max_request_mb, memory_order_relaxed);
    int level = atomic_load_explicit(&rt->log_level, memory_order_relaxed);
    n.maxmemory = atomic_load_explicit(&rt->maxmemory, memory_order_relaxed);
    int policy = atomic_load_explicit(&rt->maxmemory_policy, memory_order_relaxed);
    n.slowlog_log_slower_than =
        atomic_load_explicit(&rt->slowlog_log_slower_than, memory_order_relaxed);
    n.slowlog_max_len = atomic_load_explicit(&rt->slowlog_max_len, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&rt->gen, memory_order_relaxed) != expect)
        return 0; /* torn: the next poll */
    static const char *names[] = {"err", "warn", "info", "debug"};
    if (level >= 0 && level <= 3)
        snprintf(n.log_level, sizeof n.log_level, "%s", names[level]);
    snprintf(n.maxmemory_policy, sizeof n.maxmemory_policy, "%s", pc_evict_policy_name(policy));
    s->cfg = n;
    if (level >= 0)
        srv_log_set_level(level);
    rt_seen = g;
    return 1;
}

void cmd_config_limits(srv_worker *w)
{
    const srv_config *c = &w->s->cfg;
    w->lim.max_args = c->max_args;
    w->lim.max_bulk = c->max_bulk;
    w->lim.max_inline = c->max_inline;
    w->lim.max_request = (uint64_t)c->max_request_mb << 20;
    w->lim.preauth = 0;
    w->lim_preauth = w->lim;
    w->lim_preauth.preauth = 1;
}

/* ---- CONFIG GET ------------------------------------------------------------------------ */

/* Redis's loglevel for pcached's level, and back. */
static const char *redis_level(const char *lvl)
{
    if (strcmp(lvl, "debug") == 0)
        return "debug";
    if (strcmp(lvl, "info") == 0)
        return "notice";
    return "warning";
}

static const char *pcached_level(const char *redis)
{
    static const char *map[][2] = {
        {"debug", "debug"}, {"verbose", "info"}, {"notice", "info"}, {"warning", "warn"}};
    for (unsigned i = 0; i < 4; i++)
        if (strcasecmp(redis, map[i][0]) == 0)
            return map[i][1];
    return NULL;
}

/* The Redis names CONFIG GET answers: name -> value text into buf. */
static unsigned redis_names(const srv *s, pc_coll *coll, const char *names[], const char *vals[],
                            char bufs[][32])
{
    unsigned n = 0;
#define PUT(nm, v) (names[n] = (nm), vals[n] = (v), n++)
#define PUTF(nm, fmt, x) (snprintf(bufs[n], 32, fmt, x), names[n] = (nm), vals[n] = bufs[n], n++)
    PUT("save", "");
    /* Redis's append-only file is the journal: yes when a collection has one */
    PUT("appendonly", s->persist != NULL && s->cfg.journal[0] != '\0' ? "yes" : "no");
    PUTF("databases", "%u", s->ndbs);
    /* maxmemory is pcached's key too (§2), listed with them */
    PUT("maxmemory-policy", pc_evict_policy_name(pc_coll_eviction(coll)));
    PUTF("timeout", "%u", s->cfg.idle_timeout_s);
    PUT("loglevel", redis_level(s->cfg.log_level));
    PUTF("port", "%u", s->bound_port != 0 ? s->bound_port : s->cfg.port);
    PUT("bind", s->cfg.bind);
    PUTF("proto-max-bulk-len", "%u", s->cfg.max_bulk);
    PUT("notify-keyspace-events", "");
    PUT("cluster-enabled", "no");
    if (s->cfg.slowlog_log_slower_than == SRV_SLOW_OFF)
        PUT("slowlog-log-slower-than", "-1");
    else
        PUTF("slowlog-log-slower-than", "%u", s->cfg.slowlog_log_slower_than);
    PUTF("slowlog-max-len", "%u", s->cfg.slowlog_max_len);
#undef PUT
#undef PUTF
    return n;
}
#define REDIS_NAMES_MAX 16

/* The argument that matches name: 0 for none. Redis answers a name asked
 * without a glob character ([*?) as it was written (CONFIG GET PORT:
 * "PORT"), a name a pattern found as its own. */
static unsigned any_match(unsigned argc, const char **argv, const size_t *argl, const char *name)
{
    unsigned found = 0;
    for (unsigned a = 2; a < argc; a++)
        if (srv_glob_match(argv[a], argl[a], name, strlen(name), 1)) {
            if (strcspn(argv[a], "[*?") >= argl[a])
                return a;
            if (found == 0)
                found = a;
        }
    return found;
}

static void put_pair(conn *tmp, unsigned argc, const char **argv, const size_t *argl,
                     const char *name, const char *val)
{
    unsigned a = any_match(argc, argv, argl, name);
    if (strcspn(argv[a], "[*?") >= argl[a])
        reply_bulk(tmp, argv[a], argl[a]);
    else
        reply_bulk(tmp, name, strlen(name));
    reply_bulk(tmp, val, strlen(val));
}

static void config_get(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    const char *names[REDIS_NAMES_MAX], *vals[REDIS_NAMES_MAX];
    char bufs[REDIS_NAMES_MAX][32], buf[32];
    if (srv_runtime_poll(w->s)) /* what another worker's CONFIG SET changed */
        cmd_config_limits(w);
    unsigned nr = redis_names(w->s, c->coll, names, vals, bufs);
    conn tmp;
    memset(&tmp, 0, sizeof tmp);
    int64_t pairs = 0;
    for (unsigned i = 0; i < nr; i++)
        if (any_match(argc, argv, argl, names[i])) {
            put_pair(&tmp, argc, argv, argl, names[i], vals[i]);
            pairs++;
        }
    for (unsigned i = 0; i < srv_config_count(); i++) {
        const char *name;
        const char *v = srv_config_get(&w->s->cfg, i, &name, buf, sizeof buf);
        if (strcmp(name, "requirepass") == 0 || strcmp(name, "management_password") == 0)
            continue;   /* never on the wire */
        int listed = 0; /* port and bind are Redis's names too: answered once */
        for (unsigned k = 0; k < nr && !listed; k++)
            listed = strcmp(names[k], name) == 0;
        if (!listed && any_match(argc, argv, argl, name)) {
            put_pair(&tmp, argc, argv, argl, name, v);
            pairs++;
        }
    }
    if (tmp.closing) {
        reply_error(c, "ERR out of memory");
    } else {
        reply_map(c, pairs);
        out_add(c, tmp.out.p, tmp.out.len);
    }
    free(tmp.out.p);
}

/* ---- CONFIG SET ------------------------------------------------------------------------ */

static const struct rt_param *rt_find(const char *p, size_t n)
{
    for (unsigned i = 0; i < RT_N; i++)
        if (arg_eq(p, n, rt_params[i].name))
            return &rt_params[i];
    return NULL;
}

/* Whether name is a known setting that cannot change: pcached's keys and
 * the Redis names of CONFIG GET. *cur = its value text (for the "same
 * value" rule), or NULL when it has none to compare. */
static int is_immutable(const srv *s, pc_coll *coll, const char *p, size_t n, const char **cur,
                        char bufs[][32], char *buf)
{
    const char *names[REDIS_NAMES_MAX], *vals[REDIS_NAMES_MAX];
    unsigned nr = redis_names(s, coll, names, vals, bufs);
    for (unsigned i = 0; i < nr; i++)
        if (arg_eq(p, n, names[i])) {
            *cur = vals[i];
            return 1;
        }
    for (unsigned i = 0; i < srv_config_count(); i++) {
        const char *name;
        const char *v = srv_config_get(&s->cfg, i, &name, buf, 32);
        if (arg_eq(p, n, name)) {
            int secret =
                strcmp(name, "requirepass") == 0 || strcmp(name, "management_password") == 0;
            *cur = secret ? NULL : v;
            return 1;
        }
    }
    if (arg_eq(p, n, "requirepass")) {
        *cur = NULL;
        return 1;
    }
    /* Redis's names of settings read at start (logfile, dir, daemonize,
     * databases...): known, and fixed while pcached runs */
    char lname[64], vb[8], e[8];
    const char *key;
    if (n >= sizeof lname)
        return 0;
    for (size_t i = 0; i < n; i++)
        lname[i] = (p[i] >= 'A' && p[i] <= 'Z') ? (char)(p[i] + 32) : p[i];
    lname[n] = '\0';
    if (strlen(lname) == n && srv_config_alias(lname, "", &key, vb, sizeof vb, e, sizeof e) != 0) {
        *cur = NULL;
        return 1;
    }
    return 0;
}

static void set_failed(conn *c, const char *p, size_t n, const char *why)
{
    char name[129];
    resp_sanitize(name, sizeof name, p, n);
    reply_error(c, "ERR CONFIG SET failed (possibly related to argument '%s') - %s", name, why);
}

static void config_set(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    if (argc < 4) {
        reply_error(c, "ERR wrong number of arguments for 'config|set' command");
        return;
    }
    if ((argc - 2) % 2 != 0) {
        reply_error(c, "ERR syntax error");
        return;
    }
    /* The writer's side first, then the values the last CONFIG SET of any
     * worker published (not this process's copy, which may be older: they
     * are all published again below). Held until the reply: every exit
     * releases it. */
    uint64_t g = rt_take(w->s);
    if (g != 0 && g != rt_seen && rt_apply(w->s, g, g + 1))
        cmd_config_limits(w);
    srv_config n = w->s->cfg;
    const char *keys_done[RT_N];
    unsigned ndone = 0;
    int set_policy = 0, set_maxmemory = 0;
    for (unsigned i = 2; i < argc; i += 2) {
        const struct rt_param *rp = rt_find(argv[i], argl[i]);
        if (rp == NULL) {
            const char *cur;
            char bufs[REDIS_NAMES_MAX][32], buf[32];
            if (!is_immutable(w->s, c->coll, argv[i], argl[i], &cur, bufs, buf)) {
                char name[129];
                resp_sanitize(name, sizeof name, argv[i], argl[i]);
                reply_error(c, "ERR Unknown option or number of arguments for CONFIG SET - '%s'",
                            name);
                goto refused;
            }
            if (cur == NULL || strlen(cur) != argl[i + 1] ||
                memcmp(cur, argv[i + 1], argl[i + 1]) != 0) {
                set_failed(c, argv[i], argl[i], "can't set immutable config");
                goto refused;
            }
            continue; /* the value it already has */
        }
        for (unsigned d = 0; d < ndone; d++)
            if (strcmp(keys_done[d], rp->key) == 0) {
                set_failed(c, argv[i], argl[i], "duplicate parameter");
                goto refused;
            }
        keys_done[ndone++] = rp->key;
        char val[64], err[256];
        if (argl[i + 1] >= sizeof val || memchr(argv[i + 1], '\0', argl[i + 1]) != NULL) {
            set_failed(c, argv[i], argl[i], "argument is not a valid value");
            goto refused;
        }
        memcpy(val, argv[i + 1], argl[i + 1]);
        val[argl[i + 1]] = '\0';
        const char *v = val;
        if (rp->redis_level == 1 && (v = pcached_level(val)) == NULL) {
            set_failed(c, argv[i], argl[i],
                       "argument(s) must be one of the following: debug, verbose, notice, "
                       "warning");
            goto refused;
        }
        if (srv_config_set(&n, rp->key, v, "CONFIG SET", err, sizeof err) != 0) {
            const char *why = strstr(err, ": ");
            set_failed(c, argv[i], argl[i], why != NULL ? why + 2 : err);
            goto refused;
        }
        set_policy |= strcmp(rp->key, "maxmemory_policy") == 0;
        set_maxmemory |= strcmp(rp->key, "maxmemory") == 0;
    }
    if (set_policy) {
        int policy;
        char err[300];
        (void)pc_evict_policy_parse(n.maxmemory_policy, strlen(n.maxmemory_policy), &policy);
        if (srv_eviction_set_default(w->s, policy, err, sizeof err) != 0) {
            set_failed(c, "maxmemory-policy", 16, err);
            goto refused;
        }
    }
    if (set_maxmemory)
        (void)pc_set_maxmemory(w->s->cache, n.maxmemory);
    w->s->cfg = n;
    rt_release(w->s, g, 1);
    if (set_policy || set_maxmemory)
        srv_log(PC_LOG_INFO,
                "CONFIG SET: maxmemory %llu, maxmemory_policy %s (collections "
                "without an eviction entry)",
                (unsigned long long)n.maxmemory, n.maxmemory_policy);
    if (srv_log_level_parse(n.log_level) >= 0)
        srv_log_set_level(srv_log_level_parse(n.log_level));
    cmd_config_limits(w);
    reply_ok(c);
    return;
refused: /* nothing changed: the generation goes back as it was */
    rt_release(w->s, g, 0);
}

/* ---- CONFIG ---------------------------------------------------------------------------- */

void cmd_config(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    static const char *help[] = {
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "HELP",
        "    Prints this help.",
    };
    if (arg_eq(argv[1], argl[1], "GET")) {
        if (argc < 3)
            reply_error(c, "ERR wrong number of arguments for 'config|get' command");
        else
            config_get(w, c, argc, argv, argl);
    } else if (arg_eq(argv[1], argl[1], "SET")) {
        config_set(w, c, argc, argv, argl);
    } else if (arg_eq(argv[1], argl[1], "RESETSTAT")) {
        if (argc != 2) {
            reply_error(c, "ERR wrong number of arguments for 'config|resetstat' command");
            return;
        }
        for (unsigned i = 0; i < pc_coll_count(w->s->cache); i++)
            (void)pc_stats_reset(pc_coll_at(w->s->cache, i));
        reply_ok(c);
    } else if (arg_eq(argv[1], argl[1], "HELP")) {
        if (argc != 2) {
            reply_error(c, "ERR wrong number of arguments for 'config|help' command");
            return;
        }
        reply_array(c, (int64_t)(sizeof help / sizeof help[0]));
        for (unsigned j = 0; j < sizeof help / sizeof help[0]; j++)
            reply_simple(c, help[j]);
    } else if (arg_eq(argv[1], argl[1], "REWRITE")) {
        reply_error(c, "ERR CONFIG REWRITE is not supported by pcached: its configuration file "
                       "is edited by hand");
    } else {
        char sub[129];
        resp_sanitize(sub, sizeof sub, argv[1], argl[1]);
        reply_error(c, "ERR unknown subcommand '%s'. Try CONFIG HELP.", sub);
    }
}
