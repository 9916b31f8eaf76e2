/* sql_odbc.c - pcached built with the ODBC exporter: db_url odbc://...
 * (and so perf_sync over a shared database) is served by it. */
#include "pcache_odbc.h"
#include "pcached.h"

const pc_persist_backend *srv_sql_backend(void)
{
    return pc_odbc_persist_backend();
}
