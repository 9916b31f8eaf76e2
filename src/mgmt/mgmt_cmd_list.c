/*
 * mgmt_cmd_list.c - the listing commands: perf_keys, perf_scan, perf_dump,
 * perf_mget, perf_mget_json, and pc_mget_json for the OpenSIPS script
 * function of that name.
 *
 * All of them ride the engine's lock-free walker (pc_walk / pc_scan) and
 * collect what they return into memory first, bounded by the limit (or, for
 * perf_scan, by the buckets visited), so a walk that fails part way has not
 * emitted anything, and counts and truncation flags can lead the reply. A
 * key the walker visits twice (a concurrent split moved it up) is listed
 * twice; that is the walker's documented guarantee, "at least once".
 *
 * When a listing finds nothing, no collection was named and the glob is a
 * plain word that names a declared collection, the reply carries a "note":
 * that is the argument-order trap (perf_dump th looks for a key named th).
 */
#include "mgmt_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t pc_mgmt_ttl_s(int64_t ttl_ms)
{
    if (ttl_ms < 0)
        return -1;
    return ttl_ms / 1000 + (ttl_ms % 1000 != 0);
}

void pc_mgmt_list_free(struct pc_mgmt_list *l)
{
    free(l->bytes);
    free(l->items);
    l->bytes = NULL;
    l->items = NULL;
}

static int pc_list_room(struct pc_mgmt_list *l, size_t bytes)
{
    if (l->n == l->icap) {
        size_t cap = l->icap ? l->icap * 2 : 64;
        struct pc_mgmt_item *it = realloc(l->items, cap * sizeof *it);
        if (it == NULL)
            return PC_EHEAP;
        l->items = it;
        l->icap = cap;
    }
    if (l->bytes == NULL || l->used + bytes > l->cap) {
        size_t cap = l->cap ? l->cap : 4096;
        while (cap < l->used + bytes)
            cap *= 2;
        unsigned char *b = realloc(l->bytes, cap);
        if (b == NULL)
            return PC_EHEAP;
        l->bytes = b;
        l->cap = cap;
    }
    return 0;
}

int pc_mgmt_collect(void *ctx, const pc_entry *e)
{
    struct pc_mgmt_list *l = ctx;
    if (l->limit != 0 && l->n >= l->limit) {
        l->truncated = true;
        return 1; /* stop: one more than the limit matched */
    }
    size_t vlen = l->values ? e->vlen : 0;
    int rc = pc_list_room(l, e->klen + vlen);
    if (rc != 0)
        return l->err = rc;
    struct pc_mgmt_item *it = &l->items[l->n++];
    it->koff = l->used;
    it->klen = e->klen;
    if (e->klen > 0)
        memcpy(l->bytes + l->used, e->key, e->klen);
    l->used += e->klen;
    it->voff = l->used;
    it->vlen = vlen;
    if (vlen > 0)
        memcpy(l->bytes + l->used, e->val, vlen);
    l->used += vlen;
    it->ttl_s = pc_mgmt_ttl_s(e->ttl_ms);
    it->counter = e->is_counter != 0;
    return 0;
}

int pc_mgmt_list_walk(pc_coll *coll, const void *glob, size_t glen, struct pc_mgmt_list *l)
{
    int rc = pc_walk(coll, glob, glen, l->values ? PC_WALK_VALUES : 0, pc_mgmt_collect, l);
    return rc > 0 ? 0 : rc; /* > 0: stopped at the limit */
}

static const void *pc_key(const struct pc_mgmt_list *l, size_t i)
{
    return l->bytes + l->items[i].koff;
}

static const void *pc_val(const struct pc_mgmt_list *l, size_t i)
{
    return l->bytes + l->items[i].voff;
}

/* The shared front half of perf_keys / dump / mget / mget_json: bind,
 * walk, report an engine error with the command's name. */
static int pc_list_run(const char *cmd, const pc_mgmt_call *call, bool values,
                       struct pc_mgmt_list *l, pc_mgmt_err *err)
{
    size_t glen;
    const void *glob = pc_mgmt_call_bytes(call, PC_LA_GLOB, &glen);
    pc_coll *coll = pc_mgmt_call_coll(call, PC_LA_COLL);
    memset(l, 0, sizeof *l);
    l->limit = pc_mgmt_call_uint(call, PC_LA_LIMIT);
    l->values = values;
    int rc = pc_mgmt_list_walk(coll, glob, glen, l);
    if (rc != 0) {
        pc_mgmt_list_free(l);
        return pc_mgmt_errorf(err, rc, "%s: walking collection \"%s\": %s", cmd, pc_coll_name(coll),
                              pc_strerror(rc));
    }
    return 0;
}

/* The head every listing reply starts with, and the trap note. */
static int pc_list_head(const pc_mgmt_call *call, const struct pc_mgmt_list *l,
                        const pc_result_ops *o, void *r)
{
    const char *name = pc_coll_name(pc_mgmt_call_coll(call, PC_LA_COLL));
    TRY(o->obj_begin(r, NULL));
    TRY(o->str(r, "collection", name, strlen(name)));
    TRY(o->u64(r, "count", l->n));
    return o->boolean(r, "truncated", l->truncated);
}

static int pc_list_note(const pc_mgmt_call *call, const char *cmd, const struct pc_mgmt_list *l,
                        const pc_result_ops *o, void *r)
{
    size_t glen;
    const char *glob = pc_mgmt_call_bytes(call, PC_LA_GLOB, &glen);
    pc_coll *named = NULL;
    if (l->n != 0 || pc_mgmt_call_given(call, PC_LA_COLL) || glen == 0 || memchr(glob, '*', glen) ||
        memchr(glob, '?', glen) || memchr(glob, '[', glen) || memchr(glob, '\\', glen) ||
        pc_coll_find(pc_mgmt_cache(pc_mgmt_call_mgmt(call)), glob, glen, &named) != 0)
        return 0;
    char note[256];
    int n = snprintf(note, sizeof note,
                     "no key is named \"%s\" here, but a collection is: the glob comes first, "
                     "the collection second - %s \"*\" %s lists that collection",
                     pc_coll_name(named), cmd, pc_coll_name(named));
    return o->str(r, "note", note, (size_t)n < sizeof note ? (size_t)n : sizeof note - 1);
}

int pc_mgmt_perf_keys(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                      pc_mgmt_err *err)
{
    (void)ctx;
    struct pc_mgmt_list l;
    int rc = pc_list_run("perf_keys", call, false, &l, err);
    if (rc != 0)
        return rc;
    if ((rc = pc_list_head(call, &l, o, r)) == 0)
        rc = o->arr_begin(r, "keys");
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        if ((rc = o->obj_begin(r, NULL)) == 0 &&
            (rc = o->str(r, "key", pc_key(&l, i), l.items[i].klen)) == 0 &&
            (rc = o->i64(r, "ttl", l.items[i].ttl_s)) == 0)
            rc = o->obj_end(r);
    }
    if (rc == 0 && (rc = o->arr_end(r)) == 0 &&
        (rc = pc_list_note(call, "perf_keys", &l, o, r)) == 0)
        rc = o->obj_end(r);
    pc_mgmt_list_free(&l);
    return rc;
}

int pc_mgmt_perf_dump(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                      pc_mgmt_err *err)
{
    (void)ctx;
    struct pc_mgmt_list l;
    int rc = pc_list_run("perf_dump", call, true, &l, err);
    if (rc != 0)
        return rc;
    if ((rc = pc_list_head(call, &l, o, r)) == 0)
        rc = o->arr_begin(r, "entries");
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        const struct pc_mgmt_item *it = &l.items[i];
        if ((rc = o->obj_begin(r, NULL)) == 0 &&
            (rc = o->str(r, "key", pc_key(&l, i), it->klen)) == 0 &&
            (rc = o->str(r, "value", pc_val(&l, i), it->vlen)) == 0 &&
            (rc = o->i64(r, "ttl", it->ttl_s)) == 0 &&
            (rc = o->boolean(r, "counter", it->counter)) == 0)
            rc = o->obj_end(r);
    }
    if (rc == 0 && (rc = o->arr_end(r)) == 0 &&
        (rc = pc_list_note(call, "perf_dump", &l, o, r)) == 0)
        rc = o->obj_end(r);
    pc_mgmt_list_free(&l);
    return rc;
}

int pc_mgmt_perf_mget(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                      pc_mgmt_err *err)
{
    (void)ctx;
    struct pc_mgmt_list l;
    int rc = pc_list_run("perf_mget", call, true, &l, err);
    if (rc != 0)
        return rc;
    if ((rc = pc_list_head(call, &l, o, r)) == 0)
        rc = o->arr_begin(r, "keys");
    for (size_t i = 0; rc == 0 && i < l.n; i++)
        rc = o->str(r, NULL, pc_key(&l, i), l.items[i].klen);
    if (rc == 0 && (rc = o->arr_end(r)) == 0)
        rc = o->arr_begin(r, "values");
    for (size_t i = 0; rc == 0 && i < l.n; i++)
        rc = o->str(r, NULL, pc_val(&l, i), l.items[i].vlen);
    if (rc == 0 && (rc = o->arr_end(r)) == 0 &&
        (rc = pc_list_note(call, "perf_mget", &l, o, r)) == 0)
        rc = o->obj_end(r);
    pc_mgmt_list_free(&l);
    return rc;
}

/* The object text {"key":"value",...} of a collected list. */
static int pc_list_json(const struct pc_mgmt_list *l, char **text, size_t *len)
{
    pc_json *j = NULL;
    int rc = pc_json_create(&j);
    if (rc != 0)
        return rc;
    rc = pc_json_ops()->obj_begin(j, NULL);
    for (size_t i = 0; rc == 0 && i < l->n; i++)
        rc = pc_json_member_bin(j, pc_key(l, i), l->items[i].klen, pc_val(l, i), l->items[i].vlen);
    if (rc == 0 && (rc = pc_json_ops()->obj_end(j)) == 0)
        rc = pc_json_take(j, text, len);
    pc_json_destroy(j);
    return rc;
}

int pc_mgmt_perf_mget_json(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                           pc_mgmt_err *err)
{
    (void)ctx;
    struct pc_mgmt_list l;
    char *text = NULL;
    size_t tlen = 0;
    int rc = pc_list_run("perf_mget_json", call, true, &l, err);
    if (rc != 0)
        return rc;
    if ((rc = pc_list_json(&l, &text, &tlen)) != 0)
        rc = pc_mgmt_errorf(err, rc, "perf_mget_json: %s", pc_strerror(rc));
    else if ((rc = pc_list_head(call, &l, o, r)) == 0 &&
             (rc = o->str(r, "json", text, tlen)) == 0 &&
             (rc = pc_list_note(call, "perf_mget_json", &l, o, r)) == 0)
        rc = o->obj_end(r);
    free(text);
    pc_mgmt_list_free(&l);
    return rc;
}

int pc_mget_json(pc_coll *coll, const void *glob, size_t glen, uint64_t limit, char **json,
                 size_t *len, int *truncated)
{
    if (coll == NULL || json == NULL || len == NULL)
        return PC_EINVAL;
    struct pc_mgmt_list l;
    memset(&l, 0, sizeof l);
    l.limit = limit;
    l.values = true;
    int rc = pc_mgmt_list_walk(coll, glob, glen, &l);
    if (rc == 0)
        rc = pc_list_json(&l, json, len);
    if (rc == 0 && truncated != NULL)
        *truncated = l.truncated;
    pc_mgmt_list_free(&l);
    return rc;
}

int pc_mgmt_perf_scan(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                      pc_mgmt_err *err)
{
    (void)ctx;
    pc_coll *coll = pc_mgmt_call_coll(call, PC_SA_COLL);
    uint64_t cursor = pc_mgmt_call_uint(call, PC_SA_CURSOR), next = 0;
    size_t glen;
    const void *glob = pc_mgmt_call_bytes(call, PC_SA_GLOB, &glen);
    struct pc_mgmt_list l;
    memset(&l, 0, sizeof l);
    int rc = pc_scan(coll, cursor, pc_mgmt_call_uint(call, PC_SA_COUNT), glob, glen, 0,
                     pc_mgmt_collect, &l, &next);
    if (rc != 0) {
        pc_mgmt_list_free(&l);
        /* Every other argument was checked, so PC_EINVAL is a cursor past the
         * table's end: one that no scan returned, since the table only grows.
         * The walk checks it before visiting anything. */
        pc_coll_stats st;
        if (rc == PC_EINVAL && pc_coll_stats_get(coll, &st) == 0 && cursor >= st.buckets)
            return pc_mgmt_errorf(err, PC_EINVAL,
                                  "perf_scan: malformed cursor %llu: past the end of collection "
                                  "\"%s\" (%llu buckets); pass 0 to start a scan",
                                  (unsigned long long)cursor, pc_coll_name(coll),
                                  (unsigned long long)st.buckets);
        return pc_mgmt_errorf(err, rc, "perf_scan: collection \"%s\": %s", pc_coll_name(coll),
                              pc_strerror(rc));
    }
    char cur[24];
    int cn = snprintf(cur, sizeof cur, "%llu", (unsigned long long)next);
    const char *name = pc_coll_name(coll);
    if ((rc = o->obj_begin(r, NULL)) == 0 &&
        (rc = o->str(r, "collection", name, strlen(name))) == 0 &&
        (rc = o->str(r, "cursor", cur, (size_t)cn)) == 0)
        rc = o->arr_begin(r, "keys");
    for (size_t i = 0; rc == 0 && i < l.n; i++)
        rc = o->str(r, NULL, pc_key(&l, i), l.items[i].klen);
    if (rc == 0 && (rc = o->arr_end(r)) == 0)
        rc = o->obj_end(r);
    pc_mgmt_list_free(&l);
    return rc;
}
