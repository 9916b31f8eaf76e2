/*
 * pc_fixture.h - the tests' one way to make a cache.
 *
 *   pc_config cfg;
 *   pc_fx_config(&cfg, "a;b=4", 32);   collections and arena size, every
 *   cfg.log.fn = log_cb;               other field at pc_config_init's default
 *   pc_cache *c = pc_fx_create(&cfg);  for the test to adjust first
 *   pc_coll *a = pc_fx_coll(c, "a");
 *
 * or pc_fx_cache("a;b=4", 32) when the defaults are what the test wants.
 * Each fails the running cmocka test, naming the call and the engine's code,
 * when the engine refuses; a test that expects a refusal calls the engine
 * itself. Not for a forked child (a failed assertion there is not the
 * test's): children create and find with the engine's calls and _exit.
 *
 * The including file includes cmocka.h first.
 */
#ifndef PC_FIXTURE_H
#define PC_FIXTURE_H

#include <stddef.h>
#include <string.h>

#include "pcache.h"

static inline void pc_fx_config(pc_config *cfg, const char *colls, size_t mem_mb)
{
    pc_config_init(cfg);
    cfg->collections = colls;
    cfg->mem_mb = mem_mb;
}

static inline pc_cache *pc_fx_create(const pc_config *cfg)
{
    pc_cache *c = NULL;
    int rc = pc_cache_create(cfg, &c);
    if (rc != PC_OK)
        fail_msg("pc_cache_create(\"%s\", %zu MB) = %d (%s)",
                 cfg->collections != NULL ? cfg->collections : "(null)", cfg->mem_mb, rc,
                 pc_strerror(rc));
    assert_non_null(c);
    return c;
}

static inline pc_cache *pc_fx_cache(const char *colls, size_t mem_mb)
{
    pc_config cfg;
    pc_fx_config(&cfg, colls, mem_mb);
    return pc_fx_create(&cfg);
}

static inline pc_coll *pc_fx_coll(pc_cache *c, const char *name)
{
    pc_coll *co = NULL;
    int rc = pc_coll_find(c, name, strlen(name), &co);
    if (rc != PC_OK)
        fail_msg("pc_coll_find(\"%s\") = %d (%s)", name, rc, pc_strerror(rc));
    assert_non_null(co);
    return co;
}

#endif
