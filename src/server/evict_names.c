/*
 * evict_names.c - the words of pcached's eviction settings, parsed without
 * a cache (so the configuration reader and its fuzz target link them alone):
 * policy names, the per-collection `eviction` list, and the "a=x;b=y" lists
 * the eviction and event keys share with `journal`.
 *
 * A policy name is Redis's spelling (any case) or pcache's S3-FIFO ones,
 * as pc_evict_policy_parse takes them. Redis's LFU and TTL policies are
 * refused with the name to write instead: taking allkeys-lfu as some other
 * policy would be a silent change of meaning.
 */
#include "pcached.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Redis's policies pcache does not have, and what to write instead. */
static const struct {
    const char *redis, *instead;
} evict_missing[] = {
    {"allkeys-lfu", "allkeys-s3fifo (keeps the keys read again, sheds one-hit wonders) or "
                    "allkeys-lru"},
    {"volatile-lfu", "volatile-s3fifo or volatile-lru"},
    {"volatile-ttl", "volatile-lru or volatile-s3fifo (pcache does not order keys by TTL)"},
};

int srv_evict_policy(const char *name, size_t len, int *policy, char *err, size_t errlen)
{
    if (pc_evict_policy_parse(name, len, policy) == 0)
        return 0;
    for (size_t i = 0; i < sizeof evict_missing / sizeof evict_missing[0]; i++)
        if (strlen(evict_missing[i].redis) == len &&
            strncasecmp(evict_missing[i].redis, name, len) == 0) {
            snprintf(err, errlen, "'%.*s' is a Redis policy pcache does not have: use %s", (int)len,
                     name, evict_missing[i].instead);
            return -1;
        }
    snprintf(err, errlen,
             "'%.*s' is not a policy: noeviction, allkeys-lru, allkeys-s3fifo, allkeys-random, "
             "volatile-lru, volatile-s3fifo or volatile-random",
             (int)(len > 64 ? 64 : len), name);
    return -1;
}

struct ev_walk {
    pc_cache *cache; /* NULL: the form only */
    char *err;
    size_t errlen;
    const char *want; /* srv_eviction_lookup: the collection looked for */
    size_t want_len;
    int found, policy;
    unsigned seen; /* entries so far, for "given twice" */
    const char *seen_name[PC_MAX_COLLECTIONS];
    size_t seen_len[PC_MAX_COLLECTIONS];
};

static int ev_entry(void *ctx, const char *name, size_t len, const char *val, size_t vlen)
{
    struct ev_walk *w = ctx;
    char perr[256];
    int policy;
    if (val == NULL || vlen == 0) {
        snprintf(w->err, w->errlen, "eviction: '%.*s' needs a policy: %.*s=allkeys-lru, ...",
                 (int)len, name, (int)len, name);
        return -1;
    }
    if (srv_evict_policy(val, vlen, &policy, perr, sizeof perr) != 0) {
        snprintf(w->err, w->errlen, "eviction: %.*s: %s", (int)len, name, perr);
        return -1;
    }
    for (unsigned i = 0; i < w->seen; i++)
        if (w->seen_len[i] == len && memcmp(w->seen_name[i], name, len) == 0) {
            snprintf(w->err, w->errlen, "eviction: '%.*s' is given twice", (int)len, name);
            return -1;
        }
    if (w->seen == PC_MAX_COLLECTIONS) {
        snprintf(w->err, w->errlen, "eviction: more than %u entries", PC_MAX_COLLECTIONS);
        return -1;
    }
    w->seen_name[w->seen] = name;
    w->seen_len[w->seen++] = len;
    pc_coll *coll;
    if (w->cache != NULL && pc_coll_find(w->cache, name, len, &coll) != 0) {
        snprintf(w->err, w->errlen, "eviction: '%.*s' is not a declared collection", (int)len,
                 name);
        return -1;
    }
    if (w->want != NULL && len == w->want_len && memcmp(name, w->want, len) == 0) {
        w->found = 1;
        w->policy = policy;
    }
    return 0;
}

int srv_eviction_check(const char *spec, pc_cache *cache, char *err, size_t errlen)
{
    struct ev_walk w = {.cache = cache, .err = err, .errlen = errlen};
    return pc_list_items(spec, ev_entry, &w);
}

int srv_eviction_lookup(const char *spec, const char *coll, int *policy)
{
    char err[300];
    struct ev_walk w = {.err = err, .errlen = sizeof err, .want = coll, .want_len = strlen(coll)};
    if (pc_list_items(spec, ev_entry, &w) != 0 || !w.found)
        return 0;
    *policy = w.policy;
    return 1;
}
