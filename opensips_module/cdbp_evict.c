/*
 * cdbp_evict.c - the eviction modparams of cachedb_perf: `eviction` (a
 * policy per collection, in the shape of `journal`) and `maxmemory` (the
 * engine's cap on the bytes of record cells), checked and applied in
 * mod_init, before the startup load and before the workers fork.
 *
 * The engine keeps the cap and every collection's policy in its shared
 * region, so what mod_init sets here is what every OpenSIPS process sees;
 * nothing is kept per process. The words follow pcached's (docs/pcached.md
 * §2.2): Redis's policy names plus pcache's S3-FIFO ones, Redis's byte
 * units, and Redis's LFU and TTL policies refused with what to write
 * instead, since running another policy under their name would change what
 * is kept without saying so.
 *
 * Applying before pc_persist_startup matters: a store larger than the cap
 * then evicts while it loads, as later writes would, instead of stopping
 * the load at the first refused key.
 */
#include <dprint.h>
#include <sr_module.h>

#include "cdbp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

char *cdbp_eviction = NULL;
/* maxmemory as given: an int (bytes) or a string with a unit */
static char *cdbp_maxmemory_str = NULL;
static long cdbp_maxmemory_int = 0;
static int cdbp_maxmemory_given = 0;
/* some collection's policy is not noeviction (read by the maintenance tick) */
static int cdbp_evicting = 0;

int cdbp_maxmemory_param(modparam_t type, void *val)
{
    free(cdbp_maxmemory_str);
    cdbp_maxmemory_str = NULL;
    if (type & STR_PARAM) {
        cdbp_maxmemory_str = strdup((const char *)val);
        if (cdbp_maxmemory_str == NULL) {
            LM_ERR("maxmemory: out of memory\n");
            return -1;
        }
    } else {
        cdbp_maxmemory_int = (long)val;
    }
    cdbp_maxmemory_given = 1;
    return 0;
}

/* Redis's units (memtoull, pc_parse_bytes), with blanks around the value
 * allowed as OpenSIPS's script passes them. 0 or -1. */
static int cdbp_parse_bytes(const char *s, uint64_t *out)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    char *v = strndup(s, n);
    if (v == NULL)
        return -1;
    int rc = pc_parse_bytes(v, out);
    free(v);
    return rc;
}

/* Redis's policies pcache does not have, and what to write instead. */
static const struct {
    const char *redis, *instead;
} cdbp_missing[] = {
    {"allkeys-lfu", "allkeys-s3fifo (keeps the keys read again, sheds one-hit wonders) or "
                    "allkeys-lru"},
    {"volatile-lfu", "volatile-s3fifo or volatile-lru"},
    {"volatile-ttl", "volatile-lru or volatile-s3fifo (pcache does not order keys by TTL)"},
};

/* One "coll=policy" entry of `eviction`; logs and returns -1 on any error. */
static int cdbp_evict_entry(const char *name, size_t len, const char *val, size_t vlen,
                            pc_coll **seen, unsigned *nseen)
{
    pc_coll *coll;
    int policy, rc;
    if (val == NULL || vlen == 0) {
        LM_ERR("eviction: \"%.*s\" needs a policy (\"%.*s=allkeys-lru\", ...)\n", (int)len, name,
               (int)len, name);
        return -1;
    }
    if (pc_evict_policy_parse(val, vlen, &policy) != 0) {
        for (size_t i = 0; i < sizeof cdbp_missing / sizeof cdbp_missing[0]; i++)
            if (strlen(cdbp_missing[i].redis) == vlen &&
                strncasecmp(cdbp_missing[i].redis, val, vlen) == 0) {
                LM_ERR("eviction: %.*s: \"%.*s\" is a Redis policy pcache does not have: use %s\n",
                       (int)len, name, (int)vlen, val, cdbp_missing[i].instead);
                return -1;
            }
        LM_ERR("eviction: %.*s: \"%.*s\" is not a policy: noeviction, allkeys-lru, "
               "allkeys-s3fifo, allkeys-random, volatile-lru, volatile-s3fifo or volatile-random\n",
               (int)len, name, (int)(vlen > 64 ? 64 : vlen), val);
        return -1;
    }
    if (pc_coll_find(cdbp_cache, name, len, &coll) != 0) {
        LM_ERR("eviction: \"%.*s\" is not a declared collection (cache_collections)\n", (int)len,
               name);
        return -1;
    }
    for (unsigned i = 0; i < *nseen; i++)
        if (seen[i] == coll) {
            LM_ERR("eviction: \"%.*s\" is given twice\n", (int)len, name);
            return -1;
        }
    seen[(*nseen)++] = coll;
    if ((rc = pc_coll_set_eviction(coll, policy)) != 0) {
        /* PC_ENOMEM: the S3-FIFO tables (about 1.6% of the region) found no room */
        LM_ERR("eviction: collection %.*s: cannot set %s: %s\n", (int)len, name,
               pc_evict_policy_name(policy), pc_store_strerror(rc));
        return -1;
    }
    return 0;
}

/* The walk of an `eviction` list (pc_list_items' ctx): the collections
 * given so far, for "given twice". */
struct cdbp_evict_walk {
    pc_coll *seen[PC_MAX_COLLECTIONS];
    unsigned nseen;
};

static int cdbp_evict_item(void *ctx, const char *name, size_t len, const char *val, size_t vlen)
{
    struct cdbp_evict_walk *w = ctx;
    return cdbp_evict_entry(name, len, val, vlen, w->seen, &w->nseen) != 0 ? -1 : 0;
}

/* Walks "a=x; b=y" (`;` or `,` between entries, blanks around the parts). */
static int cdbp_evict_parse(const char *spec)
{
    struct cdbp_evict_walk w = {.nseen = 0};
    return pc_list_items(spec, cdbp_evict_item, &w);
}

/* 1 when the `,`/`;` list names coll. */
static int cdbp_listed(const char *list, const char *coll)
{
    size_t clen = strlen(coll);
    for (const char *s = list ? list : ""; *s != '\0';) {
        size_t n = strcspn(s, ",; \t");
        if (n == clen && memcmp(s, coll, n) == 0)
            return 1;
        s += n + (s[n] != '\0');
    }
    return 0;
}

int cdbp_evict_setup(void)
{
    uint64_t maxmemory = 0;
    if (cdbp_maxmemory_given) {
        if (cdbp_maxmemory_str != NULL) {
            if (cdbp_parse_bytes(cdbp_maxmemory_str, &maxmemory) != 0) {
                LM_ERR("maxmemory: \"%.100s\" is not a byte count (digits and an optional unit: "
                       "b, k, kb, m, mb, g, gb)\n",
                       cdbp_maxmemory_str);
                return -1;
            }
        } else if (cdbp_maxmemory_int < 0) {
            LM_ERR("maxmemory must be >= 0 bytes (got %ld; 0 = no cap)\n", cdbp_maxmemory_int);
            return -1;
        } else {
            maxmemory = (uint64_t)cdbp_maxmemory_int;
        }
    }
    if (cdbp_eviction != NULL && cdbp_evict_parse(cdbp_eviction) != 0)
        return -1;
    int rc = pc_set_maxmemory(cdbp_cache, maxmemory);
    if (rc != 0) {
        LM_ERR("maxmemory %llu: %s\n", (unsigned long long)maxmemory, pc_store_strerror(rc));
        return -1;
    }

    char summary[512];
    size_t at = 0;
    summary[0] = '\0';
    for (unsigned i = 0; i < pc_coll_count(cdbp_cache); i++) {
        pc_coll *coll = pc_coll_at(cdbp_cache, i);
        int p = pc_coll_eviction(coll);
        if (p == PC_EVICT_NONE)
            continue;
        cdbp_evicting = 1;
        if (at < sizeof summary)
            at += (size_t)snprintf(summary + at, sizeof summary - at, "%s%s=%s", at ? ", " : "",
                                   pc_coll_name(coll), pc_evict_policy_name(p));
        if (cdbp_db_url != NULL && cdbp_db_url[0] != '\0' &&
            cdbp_listed(cdbp_persist_colls, pc_coll_name(coll)))
            LM_WARN("collection %s is persisted and evicts (%s): an evicted key is gone from its "
                    "snapshots and journal too; eviction \"%s=noeviction\" keeps it whole\n",
                    pc_coll_name(coll), pc_evict_policy_name(p), pc_coll_name(coll));
    }
    pc_mem_stats m;
    uint64_t arena = 0;
    if (pc_mem_stats_get(cdbp_cache, &m) == 0)
        arena = (uint64_t)m.plain_bytes + m.hugepage_bytes;
    if (maxmemory > 0 && arena > 0 && maxmemory >= arena)
        LM_WARN("maxmemory %llu is not below the shared region (cache_mem_mb + arena_hugepage_mb "
                "= %llu bytes): the region is the limit\n",
                (unsigned long long)maxmemory, (unsigned long long)arena);
    if (maxmemory > 0 && !cdbp_evicting)
        LM_WARN("maxmemory %llu is set but no collection evicts: writes past it are refused "
                "(nomem); set a policy with the eviction parameter\n",
                (unsigned long long)maxmemory);
    if (cdbp_evicting || maxmemory > 0)
        LM_INFO("eviction: %s; maxmemory %llu bytes%s\n", cdbp_evicting ? summary : "none",
                (unsigned long long)maxmemory,
                maxmemory ? "" : " (no cap: the region is the limit)");
    return 0;
}

int cdbp_evict_active(void)
{
    return cdbp_evicting;
}
