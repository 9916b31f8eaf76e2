/*
 * cdbp_selftest.c - the startup selftests (arena_selftest,
 * htable_selftest): permanent, cheap diagnostics run in mod_init on a
 * scratch cache created and destroyed for the purpose, through the public
 * API only. A mismatch fails startup with a line naming it.
 */
#include <dprint.h>

#include "cdbp.h"

#include <stdio.h>
#include <string.h>

static pc_cache *st_cache(const char *colls, unsigned lf)
{
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = colls;
    cfg.mem_mb = 16;
    cfg.growth_load_factor = lf;
    cfg.log.fn = cdbp_log;
    pc_cache *c = NULL;
    int rc = pc_cache_create(&cfg, &c);
    if (rc != 0)
        LM_ERR("selftest: cannot create a scratch cache: %s\n", pc_store_strerror(rc));
    return c;
}

/* Values of every size class up to 64 KiB, written and read back byte for
 * byte, then removed: the arena hands out distinct cells of the right size
 * and takes them back. */
int cdbp_arena_selftest_run(void)
{
    static unsigned char val[65536], buf[65536];
    pc_cache *c = st_cache("st", 0);
    if (c == NULL)
        return -1;
    pc_coll *coll = pc_coll_at(c, 0);
    int rc = 0, n = 0;
    char key[32], what[96] = "";
    for (size_t len = 1; len <= sizeof val && rc == 0; len = len < 300 ? len + 1 : len * 2) {
        int kl = snprintf(key, sizeof key, "a%zu", len);
        for (size_t i = 0; i < len; i++)
            val[i] = (unsigned char)(len * 31 + i);
        if ((rc = pc_set(coll, key, (size_t)kl, val, len, 0, 0)) != 0) {
            snprintf(what, sizeof what, "set of %zu bytes: %s", len, pc_store_strerror(rc));
            break;
        }
        n++;
    }
    for (size_t len = 1; len <= sizeof val && rc == 0; len = len < 300 ? len + 1 : len * 2) {
        int kl = snprintf(key, sizeof key, "a%zu", len);
        size_t vl = 0, need = 0;
        rc = pc_get_buf(coll, key, (size_t)kl, buf, sizeof buf, &vl, &need, NULL);
        for (size_t i = 0; rc == 0 && i < len; i++)
            val[i] = (unsigned char)(len * 31 + i);
        if (rc != 0 || vl != len || memcmp(buf, val, len) != 0) {
            snprintf(what, sizeof what, "read-back of %zu bytes: %s", len,
                     rc ? pc_store_strerror(rc) : "bytes differ");
            rc = rc ? rc : PC_ECORRUPT;
        } else if ((rc = pc_remove(coll, key, (size_t)kl)) != 0) {
            snprintf(what, sizeof what, "remove of %zu bytes: %s", len, pc_store_strerror(rc));
        }
    }
    pc_coll_stats st;
    if (rc == 0 && (rc = pc_coll_stats_get(coll, &st)) == 0 && st.entries != 0) {
        snprintf(what, sizeof what, "%llu entries left after removing all",
                 (unsigned long long)st.entries);
        rc = PC_ECORRUPT;
    }
    pc_cache_destroy(c);
    if (rc != 0) {
        LM_ERR("arena selftest FAILED: %s\n", what);
        return -1;
    }
    LM_INFO("arena selftest passed (%d value sizes)\n", n);
    return 0;
}

/* 20000 keys into a 16-bucket table, grown by maintenance until it stops
 * splitting: every key is still found with its value, counters add up, and
 * a glob delete removes exactly its matches. */
int cdbp_htable_selftest_run(void)
{
    enum { N = 20000 };
    pc_cache *c = st_cache("st=4", 2);
    if (c == NULL)
        return -1;
    pc_coll *coll = pc_coll_at(c, 0);
    char key[32], val[32], buf[32], what[96] = "";
    int rc = 0;
    for (int i = 0; i < N && rc == 0; i++) {
        int kl = snprintf(key, sizeof key, "k%d", i), vl = snprintf(val, sizeof val, "v%d", i);
        if ((rc = pc_set(coll, key, (size_t)kl, val, (size_t)vl, 0, 0)) != 0)
            snprintf(what, sizeof what, "set %s: %s", key, pc_store_strerror(rc));
    }
    pc_maint_report rep;
    unsigned splits = 0;
    for (int t = 0; t < 10000 && rc == 0; t++) {
        if ((rc = pc_maintain(c, PC_MAINT_GROW, &rep)) != 0) {
            snprintf(what, sizeof what, "maintain: %s", pc_store_strerror(rc));
            break;
        }
        splits += rep.splits;
        if (rep.splits == 0)
            break;
    }
    for (int i = 0; i < N && rc == 0; i++) {
        int kl = snprintf(key, sizeof key, "k%d", i), vl = snprintf(val, sizeof val, "v%d", i);
        size_t got = 0, need = 0;
        rc = pc_get_buf(coll, key, (size_t)kl, buf, sizeof buf, &got, &need, NULL);
        if (rc != 0 || got != (size_t)vl || memcmp(buf, val, got) != 0) {
            snprintf(what, sizeof what, "after %u splits, %s: %s", splits, key,
                     rc ? pc_store_strerror(rc) : "wrong value");
            rc = rc ? rc : PC_ECORRUPT;
        }
    }
    int64_t ctr = 0;
    if (rc == 0) {
        for (int i = 0; i < 100 && rc == 0; i++)
            rc = pc_add(coll, "ctr", 3, 3, 0, NULL);
        rc = rc ? rc : pc_sub(coll, "ctr", 3, 50, 0, &ctr);
        if (rc != 0 || ctr != 250) {
            snprintf(what, sizeof what, "counter: %s, %lld (want 250)",
                     rc ? pc_store_strerror(rc) : "ok", (long long)ctr);
            rc = rc ? rc : PC_ECORRUPT;
        }
    }
    uint64_t del = 0;
    if (rc == 0 && ((rc = pc_del_glob(coll, "k1*", 3, &del)) != 0 || del != 11111)) {
        snprintf(what, sizeof what, "glob delete k1*: %s, %llu (want 11111)",
                 rc ? pc_store_strerror(rc) : "ok", (unsigned long long)del);
        rc = rc ? rc : PC_ECORRUPT;
    }
    pc_cache_destroy(c);
    if (rc != 0) {
        LM_ERR("htable selftest FAILED: %s\n", what);
        return -1;
    }
    LM_INFO("htable selftest passed (%d keys, %u splits)\n", N, splits);
    return 0;
}
