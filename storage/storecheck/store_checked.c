/*
 * store_checked.c - the store core's open and compaction with the
 * structural check handed to them (store_raw.h's pc_store_check_fn).
 *
 * The core calls the check where LMDB would first read an existing
 * environment, and refuses with what it returns; this file only says, for
 * each thing the core is about to do, which check that is: a reader's, a
 * writer's (a collection of a newer format refuses too), or one that runs
 * without LMDB because the caller holds the store's lock (compaction).
 */
#include "storecheck_int.h"

static int pc_checked_hook(const char *dir, int how, char *why, size_t cap)
{
    unsigned flags = how == PC_SCK_WRITER   ? PC_CK_WRITER
                     : how == PC_SCK_LOCKED ? PC_STORE_CHECK_NOLOCK
                                            : 0u;
    return pc_store_check_refuse(dir, flags, why, cap);
}

int pc_store_open_checked(const char *where, const pc_store_config *cfg, pc_store **out,
                          char *errbuf, size_t errlen)
{
    return pc_store_open_with(where, cfg, pc_checked_hook, out, errbuf, errlen);
}

int pc_store_compact(const char *where, pc_store_compact_result *result, char *errbuf,
                     size_t errlen)
{
    return pc_store_compact_with(where, pc_checked_hook, result, errbuf, errlen);
}
