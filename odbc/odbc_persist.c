/*
 * odbc_persist.c - the ODBC exporter as a store of the persistence policies
 * (storage/persist/persist.c): db_url "odbc://DSN" or an ODBC connection string.
 *
 * Why an interface and not a call: storage/ must not depend on odbc/ (the
 * build's dependency order is src <- storage <- odbc), so persist.c only
 * knows pc_persist_backend (pcache_persist.h), and a host that links odbc/
 * passes pc_odbc_persist_backend() in pc_persist_config.sql_backend. A
 * host that does not gets a clear "not available" error for odbc db_urls.
 * The tables are created when missing, as an LMDB store is.
 */
#include "odbc_int.h"

#include <string.h>

static int be_open(const char *db_url, const pc_logger *log, void **h, char *err, size_t errlen)
{
    pc_odbc_config cfg;
    pc_odbc_config_init(&cfg);
    cfg.flags = PC_ODBC_CREATE;
    cfg.log = *log;
    pc_odbc *o = NULL;
    int rc = pc_odbc_open(db_url, &cfg, &o, err, errlen);
    if (rc == 0)
        *h = o;
    return rc;
}

static void be_close(void *h)
{
    pc_odbc_close(h);
}

/* The exporter's result as the policies take it (the batch count is the
 * exporter's own). */
static void be_result(pc_persist_result *out, const pc_odbc_result *r)
{
    memset(out, 0, sizeof *out);
    out->rows = r->rows;
    out->skipped_expired = r->skipped_expired;
    out->failed = r->failed;
    out->generation = r->generation;
    out->seconds = r->seconds;
    out->rate = r->rate;
}

static int be_save(void *h, pc_coll *coll, pc_persist_result *out)
{
    pc_odbc_result r;
    int rc = pc_odbc_save(h, coll, &r);
    if (rc == 0 && out != NULL)
        be_result(out, &r);
    return rc;
}

static int be_load(void *h, pc_coll *coll, pc_persist_result *out)
{
    pc_odbc_result r;
    int rc = pc_odbc_load(h, coll, &r);
    if (rc == 0 && out != NULL)
        be_result(out, &r);
    return rc;
}

static const char *be_describe(void *h)
{
    return pc_odbc_target(h);
}

static const char *be_errmsg(void *h)
{
    return pc_odbc_errmsg(h);
}

static int be_save_as(void *h, pc_coll *coll, const char *source, pc_persist_result *out)
{
    pc_odbc_result r;
    int rc = pc_odbc_save_as(h, coll, source, &r);
    if (rc == 0 && out != NULL)
        be_result(out, &r);
    return rc;
}

static int be_generation(void *h, const char *coll, uint64_t *gen, char *source, size_t srclen)
{
    return pc_odbc_generation_src(h, coll, gen, source, srclen);
}

static int be_rows(void *h, const char *coll, uint64_t newer_than, pc_persist_row_fn fn, void *ctx,
                   uint64_t *gen, char *source, size_t srclen, uint64_t *skipped_expired)
{
    return pc_odbc_visit(h, coll, newer_than, fn, ctx, gen, source, srclen, skipped_expired);
}

static const pc_persist_backend odbc_backend = {
    .name = "odbc",
    .accepts = pc_odbc_is_url,
    .open = be_open,
    .close = be_close,
    .save = be_save,
    .load = be_load,
    .describe = be_describe,
    .errmsg = be_errmsg,
    .save_as = be_save_as,
    .generation = be_generation,
    .rows = be_rows,
};

const pc_persist_backend *pc_odbc_persist_backend(void)
{
    return &odbc_backend;
}
