/* sql_none.c - pcached built without the ODBC exporter (PCACHE_ODBC=OFF):
 * db_url odbc://... is refused at startup with the persistence layer's
 * "not available in this build" message. */
#include "pcached.h"

const pc_persist_backend *srv_sql_backend(void)
{
    return NULL;
}
