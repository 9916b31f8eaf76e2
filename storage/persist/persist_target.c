/*
 * persist_target.c - the [store] parameter of perf_save / perf_load: a
 * store other than the configured one, opened for the call and closed
 * after it (a backup directory, another SQL database). See persist_int.h.
 */
#include <string.h>

#include "persist_int.h"

int pp_target_open(const char *url, const pc_persist_backend *be, int create, const pc_logger *log,
                   pp_target *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (be != NULL && be->accepts(url)) {
        int rc = be->open(url, log, &t->bh, err, errlen);
        if (rc == 0)
            t->be = be;
        return rc;
    }
    if (strncmp(url, "odbc:", 5) == 0 || strncmp(url, "DSN=", 4) == 0 ||
        strncmp(url, "DRIVER=", 7) == 0) {
        /* never echoed: a connection string may hold a password */
        if (errlen > 0)
            strncpy(err, "an SQL store: not available in this host (no ODBC exporter linked)",
                    errlen - 1)[errlen - 1] = '\0';
        return PC_EURL;
    }
    if (strstr(url, "://") != NULL && strncmp(url, "lmdb://", 7) != 0) {
        if (errlen > 0)
            strncpy(err, "unknown scheme (expected lmdb:///path, a directory or an ODBC target)",
                    errlen - 1)[errlen - 1] = '\0';
        return PC_EURL;
    }
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = create ? PC_STORE_CREATE : 0;
    sc.log = *log;
    return pc_store_open_checked(url, &sc, &t->store, err, errlen);
}

int pp_target_save(pp_target *t, pc_coll *coll, pc_persist_result *r)
{
    if (t->be != NULL)
        return t->be->save(t->bh, coll, r);
    pc_store_save_result sr;
    memset(&sr, 0, sizeof sr);
    int rc = pc_store_save(t->store, coll, NULL, &sr);
    pp_result_of_save(r, &sr);
    return rc;
}

int pp_target_load(pp_target *t, pc_coll *coll, pc_persist_result *r)
{
    if (t->be != NULL)
        return t->be->load(t->bh, coll, r);
    pc_store_load_opts lo = {.no_prune = 1}; /* an import leaves its source as it is */
    pc_store_load_result lr;
    memset(&lr, 0, sizeof lr);
    int rc = pc_store_load(t->store, coll, &lo, &lr);
    pp_result_of_load(r, &lr);
    return rc;
}

const char *pp_target_describe(const pp_target *t)
{
    return t->be != NULL ? t->be->describe(t->bh) : pc_store_path(t->store);
}

const char *pp_target_errmsg(const pp_target *t)
{
    return t->be != NULL ? t->be->errmsg(t->bh) : "";
}

void pp_target_close(pp_target *t)
{
    if (t->be != NULL)
        t->be->close(t->bh);
    if (t->store != NULL)
        pc_store_close(t->store);
    memset(t, 0, sizeof *t);
}
