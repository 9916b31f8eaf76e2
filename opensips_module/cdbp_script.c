/*
 * cdbp_script.c - the module's own script functions, the multi-key
 * operations the core's cache_* functions do not have:
 *
 *   perf_del(glob [, collection])              -> keys deleted
 *   perf_mget(glob, $avp(k), $avp(v) [, coll]) -> index-paired AVPs
 *   perf_mget_json(glob, $var(j) [, coll])     -> {"key":"value",...}
 *   perf_sync([collection])                    -> queued for maintenance
 *
 * Each is one engine walk (lock-free; the callback runs with no lock
 * held). An omitted collection is the groupless cachedb_url's, where
 * cache_store("perf", ...) writes. Return codes follow the script's
 * truth rule (0 would stop the route): a count when positive, -1 when
 * nothing matched, -2 on an error (logged with its reason).
 */
#include <sr_module.h>
#include <dprint.h>
#include <mem/mem.h>
#include <pvar.h>
#include <route.h>
#include <ut.h>

#include "cdbp.h"

#include <stdlib.h>
#include <string.h>

/* Most keys perf_mget / perf_mget_json return (a warning says when more
 * matched): the results live in the worker's private memory. */
#define CDBP_MGET_MAX 10000u

static int cdbp_fix_wrvar(void **param)
{
    pv_spec_t *sp = *param;
    if (sp->setf == NULL) {
        LM_ERR("the output parameter must be a writable variable\n");
        return E_SCRIPT;
    }
    return 0;
}

static int cdbp_fix_avp(void **param)
{
    pv_spec_t *sp = *param;
    if (sp->type != PVT_AVP) {
        LM_ERR("perf_mget writes its results into AVPs: pass $avp(name)\n");
        return E_SCRIPT;
    }
    return 0;
}

/* The collection named by a script argument, or the default. */
static pc_coll *cdbp_script_coll(const char *fn, str *name)
{
    if (name == NULL)
        return cdbp_default;
    pc_coll *coll;
    if (pc_coll_find(cdbp_cache, name->s, (size_t)name->len, &coll) != 0) {
        LM_ERR("%s: collection \"%.*s\" is not declared (cache_collections)\n", fn, name->len,
               name->s);
        return NULL;
    }
    return coll;
}

static int cdbp_check_glob(const char *fn, str *glob)
{
    int rc = pc_glob_check(glob->s, (size_t)glob->len);
    if (rc != 0) {
        LM_ERR("%s: bad glob \"%.*s\": %s\n", fn, glob->len, glob->s, pc_store_strerror(rc));
        return -1;
    }
    return 0;
}

static int w_perf_del(struct sip_msg *msg, str *glob, str *coll_name)
{
    (void)msg;
    pc_coll *coll = cdbp_script_coll("perf_del", coll_name);
    if (coll == NULL || cdbp_check_glob("perf_del", glob) != 0)
        return -2;
    uint64_t n = 0;
    int rc = pc_del_glob(coll, glob->s, (size_t)glob->len, &n);
    if (rc != 0) {
        LM_ERR("perf_del(\"%.*s\") in %s: %s\n", glob->len, glob->s, pc_coll_name(coll),
               pc_store_strerror(rc));
        return -2;
    }
    if (n == 0)
        return -1;
    return n > (uint64_t)0x7fffffff ? 0x7fffffff : (int)n;
}

struct cdbp_mget {
    struct sip_msg *msg;
    pv_spec_t *kspec, *vspec;
    unsigned n;
    int failed, truncated;
};

static int cdbp_mget_cb(void *ctx, const pc_entry *e)
{
    struct cdbp_mget *m = ctx;
    if (m->n >= CDBP_MGET_MAX) {
        m->truncated = 1;
        return 1;
    }
    pv_value_t k, v;
    memset(&k, 0, sizeof k);
    memset(&v, 0, sizeof v);
    k.flags = v.flags = PV_VAL_STR;
    k.rs.s = (char *)e->key;
    k.rs.len = (int)e->klen;
    v.rs.s = (char *)e->val;
    v.rs.len = (int)e->vlen;
    /* key and value are added in the same order: $avp(k)[i] pairs with
     * $avp(v)[i] */
    if (pv_set_value(m->msg, m->kspec, 0, &k) != 0 || pv_set_value(m->msg, m->vspec, 0, &v) != 0) {
        m->failed = 1;
        return 1;
    }
    m->n++;
    return 0;
}

static int w_perf_mget(struct sip_msg *msg, str *glob, pv_spec_t *kspec, pv_spec_t *vspec,
                       str *coll_name)
{
    pc_coll *coll = cdbp_script_coll("perf_mget", coll_name);
    if (coll == NULL || cdbp_check_glob("perf_mget", glob) != 0)
        return -2;
    struct cdbp_mget m = {msg, kspec, vspec, 0, 0, 0};
    int rc = pc_walk(coll, glob->s, (size_t)glob->len, PC_WALK_VALUES, cdbp_mget_cb, &m);
    if (rc < 0) {
        LM_ERR("perf_mget(\"%.*s\") in %s: %s\n", glob->len, glob->s, pc_coll_name(coll),
               pc_store_strerror(rc));
        return -2;
    }
    if (m.failed) {
        LM_ERR("perf_mget: cannot set the result AVPs (out of memory?)\n");
        return -2;
    }
    if (m.truncated)
        LM_WARN("perf_mget(\"%.*s\"): more than %u keys match; returned the first %u\n", glob->len,
                glob->s, CDBP_MGET_MAX, CDBP_MGET_MAX);
    return m.n == 0 ? -1 : (int)m.n;
}

static int w_perf_mget_json(struct sip_msg *msg, str *glob, pv_spec_t *out, str *coll_name)
{
    pc_coll *coll = cdbp_script_coll("perf_mget_json", coll_name);
    if (coll == NULL || cdbp_check_glob("perf_mget_json", glob) != 0)
        return -2;
    char *json = NULL;
    size_t len = 0;
    int truncated = 0;
    int rc = pc_mget_json(coll, glob->s, (size_t)glob->len, CDBP_MGET_MAX, &json, &len, &truncated);
    if (rc != 0) {
        LM_ERR("perf_mget_json(\"%.*s\") in %s: %s\n", glob->len, glob->s, pc_coll_name(coll),
               pc_store_strerror(rc));
        return -2;
    }
    if (truncated)
        LM_WARN("perf_mget_json(\"%.*s\"): more than %u keys match; returned the first %u\n",
                glob->len, glob->s, CDBP_MGET_MAX, CDBP_MGET_MAX);
    pv_value_t v;
    memset(&v, 0, sizeof v);
    v.flags = PV_VAL_STR;
    v.rs.s = json;
    v.rs.len = (int)len;
    rc = pv_set_value(msg, out, 0, &v);
    free(json);
    if (rc != 0) {
        LM_ERR("perf_mget_json: cannot set the result variable\n");
        return -2;
    }
    return 1;
}

static int w_perf_sync(struct sip_msg *msg, str *coll_name)
{
    (void)msg;
    pc_coll *coll = NULL;
    if (coll_name != NULL && (coll = cdbp_script_coll("perf_sync", coll_name)) == NULL)
        return -2;
    int rc = cdbp_sync_request(coll);
    if (rc != 0) {
        LM_ERR("perf_sync: %s (perf_sync saves to the store: set db_url)\n", pc_store_strerror(rc));
        return -2;
    }
    return 1;
}

const cmd_export_t cdbp_cmds[] = {
    {"perf_del",
     (cmd_function)w_perf_del,
     {{CMD_PARAM_STR, 0, 0}, {CMD_PARAM_STR | CMD_PARAM_OPT, 0, 0}, {0, 0, 0}},
     ALL_ROUTES},
    {"perf_mget",
     (cmd_function)w_perf_mget,
     {{CMD_PARAM_STR, 0, 0},
      {CMD_PARAM_VAR, cdbp_fix_avp, 0},
      {CMD_PARAM_VAR, cdbp_fix_avp, 0},
      {CMD_PARAM_STR | CMD_PARAM_OPT, 0, 0},
      {0, 0, 0}},
     ALL_ROUTES},
    {"perf_mget_json",
     (cmd_function)w_perf_mget_json,
     {{CMD_PARAM_STR, 0, 0},
      {CMD_PARAM_VAR, cdbp_fix_wrvar, 0},
      {CMD_PARAM_STR | CMD_PARAM_OPT, 0, 0},
      {0, 0, 0}},
     ALL_ROUTES},
    {"perf_sync",
     (cmd_function)w_perf_sync,
     {{CMD_PARAM_STR | CMD_PARAM_OPT, 0, 0}, {0, 0, 0}},
     ALL_ROUTES},
    {0, 0, {{0, 0, 0}}, 0}};
