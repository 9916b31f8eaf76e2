/*
 * cdbp_mi.c - the MI commands: every command of the library's management
 * layer (pcache_mgmt.h) exported as an OpenSIPS MI command, with a
 * pc_result_ops backend that builds MI items.
 *
 * The module holds no command logic: an MI call hands its parameters to
 * pc_mgmt_run, which binds, checks and runs the command; the result is
 * built straight into the MI response, and an error becomes an MI error
 * with the layer's message. The core names each command
 * cachedb_perf:<name> and keeps the bare name as an alias.
 *
 * Parameters. The core picks an MI "recipe" by the number of positional
 * parameters, or by the exact set of named ones, so each command declares
 * its parameters as a chain of prefixes ({glob}, {glob, collection},
 * {glob, collection, limit}): any positional call, and any named call that
 * gives a prefix of the order. To skip an optional parameter and give a
 * later one, pass "" for it (perf_keys "*" "" 50): an empty string for an
 * optional parameter means "omitted". Numbers may be sent as JSON numbers
 * or strings.
 *
 * Strings in the reply: the layer's strings are byte strings; they follow
 * the one convention of every pcache JSON surface (pcache_mgmt.h): text
 * (UTF-8 without NUL, which MI's C strings can hold) as a string, anything
 * else as base64 under "<name>_b64" (or {"b64": ...} in an array), the same
 * fields pcached's JSON-RPC and pcache-snapshot write.
 */
#include <dprint.h>
#include <mem/mem.h>
#include <ut.h>
#include <mi/mi.h>

#include "cdbp.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- the MI-items result builder ------------------------------------------- */
#define CDBP_MI_DEPTH 34

typedef struct cdbp_mi_b {
    mi_response_t *resp;
    mi_item_t *stack[CDBP_MI_DEPTH];
    int depth;
} cdbp_mi_b;

static int nlen(const char *name)
{
    return name ? (int)strlen(name) : 0;
}

static int b_push(cdbp_mi_b *b, const char *name, int array)
{
    if (b->depth >= CDBP_MI_DEPTH)
        return PC_EINVAL;
    mi_item_t *it;
    if (b->depth == 0) {
        if (b->resp != NULL)
            return PC_EINVAL; /* a second root */
        b->resp = array ? init_mi_result_array(&it) : init_mi_result_object(&it);
        if (b->resp == NULL)
            return PC_EHEAP;
    } else {
        mi_item_t *to = b->stack[b->depth - 1];
        it = array ? add_mi_array(to, (char *)name, nlen(name))
                   : add_mi_object(to, (char *)name, nlen(name));
        if (it == NULL)
            return PC_EHEAP;
    }
    b->stack[b->depth++] = it;
    return 0;
}

static int b_obj_begin(void *r, const char *name)
{
    return b_push(r, name, 0);
}

static int b_arr_begin(void *r, const char *name)
{
    return b_push(r, name, 1);
}

static int b_end(void *r)
{
    cdbp_mi_b *b = r;
    if (b->depth == 0)
        return PC_EINVAL;
    b->depth--;
    return 0;
}

static mi_item_t *b_top(cdbp_mi_b *b)
{
    return b->depth > 0 ? b->stack[b->depth - 1] : NULL;
}

/* A byte string by the one convention (pcache_mgmt.h, docs/management.md
 * "Strings in JSON"): text as an MI string; anything else as the base64
 * string "<name>_b64", or {"b64": ...} inside an array. */
static int b_str(void *r, const char *name, const void *s, size_t len)
{
    cdbp_mi_b *b = r;
    mi_item_t *to = b_top(b);
    if (to == NULL || len > (size_t)INT_MAX / 2)
        return PC_EINVAL;
    if (pc_text_ok(s, len))
        return add_mi_string(to, (char *)name, nlen(name), (const char *)s, (int)len) < 0 ? PC_EHEAP
                                                                                          : 0;
    size_t cap = pc_b64_len(len), out;
    char *t = pkg_malloc(cap ? cap : 1);
    if (t == NULL)
        return PC_EHEAP;
    int rc = pc_b64_encode(s, len, t, cap, &out);
    if (rc == 0 && name != NULL) {
        char nm[80];
        int n = snprintf(nm, sizeof nm, "%s_b64", name);
        if (n < 0 || (size_t)n >= sizeof nm)
            rc = PC_EINVAL;
        else if (add_mi_string(to, nm, n, t, (int)out) < 0)
            rc = PC_EHEAP;
    } else if (rc == 0) {
        mi_item_t *o = add_mi_object(to, NULL, 0);
        if (o == NULL || add_mi_string(o, "b64", 3, t, (int)out) < 0)
            rc = PC_EHEAP;
    }
    pkg_free(t);
    return rc;
}

static int b_num(cdbp_mi_b *b, const char *name, double v)
{
    mi_item_t *to = b_top(b);
    if (to == NULL)
        return PC_EINVAL;
    if (isnan(v) || isinf(v))
        return add_mi_null(to, (char *)name, nlen(name)) < 0 ? PC_EHEAP : 0;
    return add_mi_number(to, (char *)name, nlen(name), v) < 0 ? PC_EHEAP : 0;
}

static int b_i64(void *r, const char *name, int64_t v)
{
    return b_num(r, name, (double)v);
}

static int b_u64(void *r, const char *name, uint64_t v)
{
    return b_num(r, name, (double)v);
}

static int b_dbl(void *r, const char *name, double v)
{
    return b_num(r, name, v);
}

static int b_bool(void *r, const char *name, int v)
{
    mi_item_t *to = b_top(r);
    if (to == NULL)
        return PC_EINVAL;
    return add_mi_bool(to, (char *)name, nlen(name), v) < 0 ? PC_EHEAP : 0;
}

static int b_null(void *r, const char *name)
{
    mi_item_t *to = b_top(r);
    if (to == NULL)
        return PC_EINVAL;
    return add_mi_null(to, (char *)name, nlen(name)) < 0 ? PC_EHEAP : 0;
}

static const pc_result_ops cdbp_mi_ops = {b_obj_begin, b_end, b_arr_begin, b_end,  b_str,
                                          b_i64,       b_u64, b_dbl,       b_bool, b_null};

/* ---- running a command -------------------------------------------------- */
static int cdbp_mi_errcode(int rc)
{
    switch (rc) {
    case PC_ENOTFOUND:
        return 404;
    case PC_EINVAL:
    case PC_ETOOBIG:
    case PC_ENOCOLL:
    case PC_ECONFIG:
        return 400;
    default:
        return 500;
    }
}

static mi_response_t *cdbp_mi_fail(int rc, const char *msg)
{
    char text[PC_MGMT_MSG_MAX + 64];
    int n = snprintf(text, sizeof text, "%s (%s)", msg, pc_store_strerror(rc));
    if (n < 0 || (size_t)n >= sizeof text)
        n = (int)strlen(text);
    return init_mi_error(cdbp_mi_errcode(rc), text, n);
}

static mi_response_t *cdbp_mi_run(const char *cmd, const mi_params_t *params)
{
    pc_mgmt_arg args[PC_MGMT_MAX_ARGS];
    char nums[PC_MGMT_MAX_ARGS][32];
    unsigned n = 0;
    pc_mgmt_err err;
    memset(&err, 0, sizeof err);
    const pc_mgmt_cmd *def = pc_mgmt_cmd_find(cdbp_mgmt, cmd);
    if (def == NULL) {
        snprintf(err.msg, sizeof err.msg, "%s: not available", cmd);
        return cdbp_mi_fail(PC_EINVAL, err.msg);
    }
    mi_item_t *all = params ? params->item : NULL;
    int positional = all != NULL && (all->type & cJSON_Array);
    unsigned pos = 0;
    for (mi_item_t *p = all ? all->child : NULL; p != NULL; p = p->next, pos++) {
        if (n >= PC_MGMT_MAX_ARGS) {
            snprintf(err.msg, sizeof err.msg, "%s: too many parameters", cmd);
            return cdbp_mi_fail(PC_EINVAL, err.msg);
        }
        pc_mgmt_arg *a = &args[n];
        /* a positional request maps to the parameters in their order */
        const pc_mgmt_param *prm = NULL;
        if (positional) {
            prm = pos < def->nparams ? &def->params[pos] : NULL;
            a->name = prm ? prm->name : NULL;
        } else {
            a->name = p->string;
            for (unsigned i = 0; i < def->nparams; i++)
                if (p->string && strcmp(def->params[i].name, p->string) == 0)
                    prm = &def->params[i];
        }
        a->nlen = a->name ? strlen(a->name) : 0;
        if (p->type & cJSON_String) {
            a->val = p->valuestring;
            a->len = strlen(p->valuestring);
        } else if (p->type & cJSON_Number) {
            double d = p->valuedouble;
            int l = d == (double)(long long)d ? snprintf(nums[n], 32, "%lld", (long long)d)
                                              : snprintf(nums[n], 32, "%.17g", d);
            a->val = nums[n];
            a->len = (size_t)l;
        } else {
            snprintf(err.msg, sizeof err.msg, "%s: parameter %s: expected a string or a number",
                     cmd, a->name ? a->name : "(positional)");
            return cdbp_mi_fail(PC_EINVAL, err.msg);
        }
        if (a->len == 0 && prm != NULL && !prm->required)
            continue; /* "" = omitted */
        n++;
    }
    cdbp_mi_b b;
    memset(&b, 0, sizeof b);
    /* the commands that save or load hold the save lock (cdbp.h) */
    int store_cmd =
        cdbp_persist != NULL && (strcmp(cmd, "perf_save") == 0 || strcmp(cmd, "perf_load") == 0 ||
                                 strcmp(cmd, "perf_sync") == 0);
    if (store_cmd)
        cdbp_persist_lock();
    int rc = pc_mgmt_run(cdbp_mgmt, cmd, args, n, &cdbp_mi_ops, &b, &err);
    if (store_cmd)
        cdbp_persist_unlock();
    if (rc != 0) {
        if (b.resp != NULL)
            free_mi_response(b.resp);
        if (err.msg[0] == '\0' || err.code != rc)
            snprintf(err.msg, sizeof err.msg, "%s: building the reply failed", cmd);
        return cdbp_mi_fail(rc, err.msg);
    }
    if (b.resp == NULL)
        return init_mi_result_ok();
    return b.resp;
}

#define CDBP_MI_FN(name)                                                                           \
    static mi_response_t *mi_##name(const mi_params_t *params, struct mi_handler *async_hdl)       \
    {                                                                                              \
        (void)async_hdl;                                                                           \
        return cdbp_mi_run(#name, params);                                                         \
    }

CDBP_MI_FN(perf_stats)
CDBP_MI_FN(perf_stats_reset)
CDBP_MI_FN(perf_keys)
CDBP_MI_FN(perf_scan)
CDBP_MI_FN(perf_dump)
CDBP_MI_FN(perf_mget)
CDBP_MI_FN(perf_mget_json)
CDBP_MI_FN(perf_get)
CDBP_MI_FN(perf_set)
CDBP_MI_FN(perf_ttl)
CDBP_MI_FN(perf_del)
CDBP_MI_FN(perf_save)
CDBP_MI_FN(perf_load)
CDBP_MI_FN(perf_sync)

/* ---- the cross-node pull (cdbp_pull.c): module commands ------------------- */
/* The collection of an optional "collection" parameter (the default one
 * when absent or ""); NULL with *resp set to the error. */
static pc_coll *cdbp_mi_coll(const mi_params_t *params, mi_response_t **resp)
{
    str name = {NULL, 0};
    if (try_get_mi_string_param(params, "collection", &name.s, &name.len) != 0 || name.len == 0)
        return cdbp_default;
    for (unsigned i = 0; i < pc_coll_count(cdbp_cache); i++) {
        pc_coll *c = pc_coll_at(cdbp_cache, i);
        if (strlen(pc_coll_name(c)) == (size_t)name.len &&
            memcmp(pc_coll_name(c), name.s, (size_t)name.len) == 0)
            return c;
    }
    char msg[160];
    int n = snprintf(msg, sizeof msg, "unknown collection \"%.*s\"", name.len > 64 ? 64 : name.len,
                     name.s);
    *resp = init_mi_error(400, msg, n);
    return NULL;
}

static mi_response_t *cdbp_mi_not_pulled(pc_coll *coll)
{
    char msg[200];
    int n = snprintf(msg, sizeof msg,
                     "cross-node pull is not active for collection %s (replicate_collections, "
                     "sync_cluster_id and the clusterer module)",
                     pc_coll_name(coll));
    return init_mi_error(400, msg, n);
}

/* The collection a pull command names, when it replicates; NULL with *resp
 * set to the error otherwise. */
static pc_coll *cdbp_mi_pulled_coll(const mi_params_t *params, mi_response_t **resp)
{
    pc_coll *coll = cdbp_mi_coll(params, resp);
    if (coll != NULL && !cdbp_pull_replicates(coll)) {
        *resp = cdbp_mi_not_pulled(coll);
        coll = NULL;
    }
    return coll;
}

/* The reply built in b, or, when building it failed (rc != 0), an error
 * naming cmd. */
static mi_response_t *cdbp_mi_built(cdbp_mi_b *b, int rc, const char *cmd)
{
    if (rc == 0)
        return b->resp;
    if (b->resp != NULL)
        free_mi_response(b->resp);
    char msg[96];
    int n = snprintf(msg, sizeof msg, "%s: building the reply failed", cmd);
    return init_mi_error(500, msg, n);
}

/* perf_pull key [collection]: asks the cluster for key now (whatever
 * pull_on_miss says), stores a positive answer here and returns it. */
static mi_response_t *mi_perf_pull(const mi_params_t *params, struct mi_handler *async_hdl)
{
    (void)async_hdl;
    str key;
    if (get_mi_string_param(params, "key", &key.s, &key.len) < 0)
        return init_mi_param_error();
    mi_response_t *err = NULL;
    pc_coll *coll = cdbp_mi_pulled_coll(params, &err);
    if (coll == NULL)
        return err;
    cdbp_pull_result pr;
    (void)cdbp_pull(coll, key.s, (size_t)key.len, &pr);
    cdbp_mi_b b;
    memset(&b, 0, sizeof b);
    int rc = b_obj_begin(&b, NULL);
    const char *o = cdbp_pull_outcome_name(pr.outcome);
    if (rc == 0)
        rc = b_str(&b, "outcome", o, strlen(o));
    if (rc == 0)
        rc = b_str(&b, "collection", pc_coll_name(coll), strlen(pc_coll_name(coll)));
    if (rc == 0 && pr.outcome == CDBP_PULL_SERVED) {
        rc = b_i64(&b, "source", pr.src_node);
        if (rc == 0)
            rc = b_str(&b, "value", pr.value, pr.vlen);
        if (rc == 0)
            rc = b_i64(&b, "ttl", pr.ttl_ms < 0 ? -1 : (pr.ttl_ms + 999) / 1000);
    }
    if (pr.value != NULL)
        pkg_free(pr.value);
    return cdbp_mi_built(&b, rc, "perf_pull");
}

/* perf_cluster_probe [collection]: which reachable peers replicate it. */
static mi_response_t *mi_perf_cluster_probe(const mi_params_t *params, struct mi_handler *async_hdl)
{
    (void)async_hdl;
    mi_response_t *err = NULL;
    pc_coll *coll = cdbp_mi_pulled_coll(params, &err);
    if (coll == NULL)
        return err;
    int ids[64];
    unsigned n = 0, asked = 0;
    int prc = cdbp_pull_probe(coll, ids, 64, &n, &asked);
    if (prc == -2)
        return init_mi_error(500, "perf_cluster_probe: no free pull slot", 37);
    if (prc != 0)
        return init_mi_error(500, "perf_cluster_probe: the probe could not be sent", 47);
    cdbp_mi_b b;
    memset(&b, 0, sizeof b);
    int rc = b_obj_begin(&b, NULL);
    if (rc == 0)
        rc = b_str(&b, "collection", pc_coll_name(coll), strlen(pc_coll_name(coll)));
    if (rc == 0)
        rc = b_i64(&b, "peers_reachable", asked);
    if (rc == 0)
        rc = b_arr_begin(&b, "replicating");
    for (unsigned i = 0; rc == 0 && i < n; i++)
        rc = b_i64(&b, NULL, ids[i]);
    if (rc == 0)
        rc = b_end(&b);
    return cdbp_mi_built(&b, rc, "perf_cluster_probe");
}

/* Recipes: prefixes of each command's parameter order (pcache_mgmt's
 * tables; docs/management.md). */
#define R0(f)                                                                                      \
    {                                                                                              \
        f,                                                                                         \
        {                                                                                          \
            0                                                                                      \
        }                                                                                          \
    }
#define R1(f, a)                                                                                   \
    {                                                                                              \
        f,                                                                                         \
        {                                                                                          \
            a, 0                                                                                   \
        }                                                                                          \
    }
#define R2(f, a, b)                                                                                \
    {                                                                                              \
        f,                                                                                         \
        {                                                                                          \
            a, b, 0                                                                                \
        }                                                                                          \
    }
#define R3(f, a, b, c)                                                                             \
    {                                                                                              \
        f,                                                                                         \
        {                                                                                          \
            a, b, c, 0                                                                             \
        }                                                                                          \
    }
#define R4(f, a, b, c, d)                                                                          \
    {                                                                                              \
        f,                                                                                         \
        {                                                                                          \
            a, b, c, d, 0                                                                          \
        }                                                                                          \
    }
#define END                                                                                        \
    {                                                                                              \
        EMPTY_MI_RECIPE                                                                            \
    }

const mi_export_t cdbp_mi_cmds[] = {
    {"perf_stats",
     "per-collection gauges and counters, memory tier, last save/load",
     0,
     0,
     {R0(mi_perf_stats), R1(mi_perf_stats, "collection"), END},
     {0}},
    {"perf_stats_reset",
     "re-baseline the cumulative counters (gauges unaffected)",
     0,
     0,
     {R0(mi_perf_stats_reset), R1(mi_perf_stats_reset, "collection"), END},
     {0}},
    {"perf_keys",
     "names and TTLs of keys matching a glob, bounded",
     0,
     0,
     {R1(mi_perf_keys, "glob"), R2(mi_perf_keys, "glob", "collection"),
      R3(mi_perf_keys, "glob", "collection", "limit"), END},
     {0}},
    {"perf_scan",
     "cursor-based incremental iteration over key names",
     0,
     0,
     {R1(mi_perf_scan, "cursor"), R2(mi_perf_scan, "cursor", "glob"),
      R3(mi_perf_scan, "cursor", "glob", "count"),
      R4(mi_perf_scan, "cursor", "glob", "count", "collection"), END},
     {0}},
    {"perf_dump",
     "names, values and TTLs of keys matching a glob, bounded",
     0,
     0,
     {R1(mi_perf_dump, "glob"), R2(mi_perf_dump, "glob", "collection"),
      R3(mi_perf_dump, "glob", "collection", "limit"), END},
     {0}},
    {"perf_mget",
     "index-paired key and value lists for a glob, bounded",
     0,
     0,
     {R1(mi_perf_mget, "glob"), R2(mi_perf_mget, "glob", "collection"),
      R3(mi_perf_mget, "glob", "collection", "limit"), END},
     {0}},
    {"perf_mget_json",
     "the keys matching a glob as one JSON object text",
     0,
     0,
     {R1(mi_perf_mget_json, "glob"), R2(mi_perf_mget_json, "glob", "collection"),
      R3(mi_perf_mget_json, "glob", "collection", "limit"), END},
     {0}},
    {"perf_get",
     "one key: value, TTL, size, counter flag",
     0,
     0,
     {R1(mi_perf_get, "key"), R2(mi_perf_get, "key", "collection"), END},
     {0}},
    {"perf_set",
     "write one key, optionally with a TTL in seconds",
     0,
     0,
     {R2(mi_perf_set, "key", "value"), R3(mi_perf_set, "key", "value", "ttl"),
      R4(mi_perf_set, "key", "value", "ttl", "collection"), END},
     {0}},
    {"perf_ttl",
     "re-arm the TTL of every key matching a glob",
     0,
     0,
     {R2(mi_perf_ttl, "glob", "ttl"), R3(mi_perf_ttl, "glob", "ttl", "collection"), END},
     {0}},
    {"perf_del",
     "delete every key matching a glob",
     0,
     0,
     {R1(mi_perf_del, "glob"), R2(mi_perf_del, "glob", "collection"), END},
     {0}},
    {"perf_save",
     "snapshot collections to the db_url store (one transaction each)",
     0,
     0,
     {R0(mi_perf_save), R1(mi_perf_save, "collection"), R2(mi_perf_save, "collection", "store"),
      END},
     {0}},
    {"perf_load",
     "restore collections from the db_url store (snapshot + journal)",
     0,
     0,
     {R0(mi_perf_load), R1(mi_perf_load, "collection"), R2(mi_perf_load, "collection", "store"),
      END},
     {0}},
    {"perf_pull",
     "ask the cluster for a key now (replicate_collections), store and return it",
     0,
     0,
     {R1(mi_perf_pull, "key"), R2(mi_perf_pull, "key", "collection"), END},
     {0}},
    {"perf_cluster_probe",
     "ask every reachable peer whether it replicates the collection",
     0,
     0,
     {R0(mi_perf_cluster_probe), R1(mi_perf_cluster_probe, "collection"), END},
     {0}},
    {"perf_sync",
     "save, then ask the cluster to reload (degrades to a save)",
     0,
     0,
     {R0(mi_perf_sync), R1(mi_perf_sync, "collection"), END},
     {0}},
    {EMPTY_MI_EXPORT}};
