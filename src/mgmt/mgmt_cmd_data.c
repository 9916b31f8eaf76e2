/*
 * mgmt_cmd_data.c - the commands that read or change data: perf_get,
 * perf_set, perf_ttl, perf_del.
 *
 * Their arguments were parsed and range-checked by the binding (key and
 * value lengths against the engine's limits, globs by pc_glob_check, TTLs
 * in [0, PC_MGMT_TTL_MAX] seconds), so the engine call is the first and only
 * action; its error, if any, is reported with the command's name and
 * nothing has been emitted yet. TTLs cross this boundary in whole seconds
 * (the MI's unit); the engine's milliseconds are rounded up on the way out,
 * so a key with 200 ms left reports 1, never 0.
 */
#include "mgmt_int.h"

#include <stdlib.h>
#include <string.h>

int pc_mgmt_perf_get(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                     pc_mgmt_err *err)
{
    (void)ctx;
    char q[PC_MGMT_QUOTE_CAP];
    size_t klen, vlen = 0;
    const void *key = pc_mgmt_call_bytes(call, PC_GA_KEY, &klen);
    pc_coll *coll = pc_mgmt_call_coll(call, PC_GA_COLL);
    const char *name = pc_coll_name(coll);
    void *val = NULL;
    pc_meta meta;
    int rc = pc_get(coll, key, klen, &val, &vlen, &meta);
    if (rc == PC_ENOTFOUND)
        return pc_mgmt_errorf(err, rc, "perf_get: key %s not found in collection \"%s\"",
                              pc_mgmt_quote(q, sizeof q, key, klen), name);
    if (rc != 0)
        return pc_mgmt_errorf(err, rc, "perf_get: %s", pc_strerror(rc));
    if ((rc = o->obj_begin(r, NULL)) == 0 &&
        (rc = o->str(r, "collection", name, strlen(name))) == 0 &&
        (rc = o->str(r, "key", key, klen)) == 0 && (rc = o->str(r, "value", val, vlen)) == 0 &&
        (rc = o->i64(r, "ttl", pc_mgmt_ttl_s(meta.ttl_ms))) == 0 &&
        (rc = o->u64(r, "size", vlen)) == 0 &&
        (rc = o->boolean(r, "counter", meta.is_counter)) == 0)
        rc = o->obj_end(r);
    free(val);
    return rc;
}

int pc_mgmt_perf_set(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                     pc_mgmt_err *err)
{
    (void)ctx;
    size_t klen, vlen;
    const void *key = pc_mgmt_call_bytes(call, PC_WA_KEY, &klen);
    const void *val = pc_mgmt_call_bytes(call, PC_WA_VALUE, &vlen);
    uint64_t ttl = pc_mgmt_call_uint(call, PC_WA_TTL);
    pc_coll *coll = pc_mgmt_call_coll(call, PC_WA_COLL);
    const char *name = pc_coll_name(coll);
    int rc = pc_set(coll, key, klen, val, vlen, (int64_t)ttl * 1000, 0);
    if (rc == PC_ENOMEM)
        return pc_mgmt_errorf(err, rc,
                              "perf_set: the shared arena is full: the write to collection "
                              "\"%s\" was dropped",
                              name);
    if (rc != 0)
        return pc_mgmt_errorf(err, rc, "perf_set: %s", pc_strerror(rc));
    if ((rc = o->obj_begin(r, NULL)) == 0 &&
        (rc = o->str(r, "collection", name, strlen(name))) == 0 &&
        (rc = o->boolean(r, "stored", 1)) == 0 && (rc = o->u64(r, "size", vlen)) == 0 &&
        (rc = o->i64(r, "ttl", ttl == 0 ? -1 : (int64_t)ttl)) == 0)
        rc = o->obj_end(r);
    return rc;
}

/* perf_ttl and perf_del: a glob operation and one count. */
static int pc_count_reply(const char *name, const char *what, uint64_t n, const pc_result_ops *o,
                          void *r)
{
    int rc;
    if ((rc = o->obj_begin(r, NULL)) == 0 &&
        (rc = o->str(r, "collection", name, strlen(name))) == 0 && (rc = o->u64(r, what, n)) == 0)
        rc = o->obj_end(r);
    return rc;
}

int pc_mgmt_perf_ttl(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                     pc_mgmt_err *err)
{
    (void)ctx;
    size_t glen;
    const void *glob = pc_mgmt_call_bytes(call, PC_TA_GLOB, &glen);
    uint64_t ttl = pc_mgmt_call_uint(call, PC_TA_TTL), n = 0;
    pc_coll *coll = pc_mgmt_call_coll(call, PC_TA_COLL);
    int rc = pc_ttl_glob(coll, glob, glen, (int64_t)ttl * 1000, &n);
    if (rc != 0)
        return pc_mgmt_errorf(err, rc, "perf_ttl: collection \"%s\": %s", pc_coll_name(coll),
                              pc_strerror(rc));
    return pc_count_reply(pc_coll_name(coll), "updated", n, o, r);
}

int pc_mgmt_perf_del(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                     pc_mgmt_err *err)
{
    (void)ctx;
    size_t glen;
    const void *glob = pc_mgmt_call_bytes(call, PC_DA_GLOB, &glen);
    uint64_t n = 0;
    pc_coll *coll = pc_mgmt_call_coll(call, PC_DA_COLL);
    int rc = pc_del_glob(coll, glob, glen, &n);
    if (rc != 0)
        return pc_mgmt_errorf(err, rc, "perf_del: collection \"%s\": %s", pc_coll_name(coll),
                              pc_strerror(rc));
    return pc_count_reply(pc_coll_name(coll), "deleted", n, o, r);
}
