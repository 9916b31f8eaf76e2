/*
 * errors.c - error names, the engine's log entry point and the hash: the
 * small leaf utilities every other file of the engine uses.
 */
#include "pc_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const char *pc_strerror(int err)
{
    switch (err) {
    case PC_OK:
        return "success";
    case PC_ENOTFOUND:
        return "key not found";
    case PC_ENOMEM:
        return "shared arena is full";
    case PC_EINVAL:
        return "invalid argument";
    case PC_ETOOBIG:
        return "key or value exceeds the size limit";
    case PC_ETOOSMALL:
        return "buffer too small for the value";
    case PC_ENOTNUM:
        return "value is not an integer";
    case PC_ERANGE:
        return "counter would overflow int64";
    case PC_EEXIST:
        return "key already exists";
    case PC_ENOCOLL:
        return "collection not declared";
    case PC_ESYS:
        return "system call failed";
    case PC_ECONFIG:
        return "invalid configuration";
    case PC_EBUSY:
        return "another process holds the maintenance role";
    case PC_ELOCKED:
        return "lock not available";
    case PC_EHEAP:
        return "out of process memory";
    case PC_EPROCS:
        return "every process slot is held by a live process";
    case PC_EREFUSED:
        return "writes are refused for now";
    case PC_ECONFLICT:
        return "transaction conflict: a key changed before the commit";
    default:
        return "unknown error";
    }
}

const char *pc_tier_name(int tier)
{
    switch (tier) {
    case PC_TIER_HUGETLB:
        return "hugetlb";
    case PC_TIER_THP:
        return "thp";
    case PC_TIER_COLLAPSE:
        return "collapse";
    case PC_TIER_4K:
        return "4k";
    default:
        return "unknown";
    }
}

/* Through util's funnel: the level is checked before the arguments are
 * formatted, so a disabled debug line costs one compare. Never called
 * under a bucket lock. */
void pc_log(const pc_cache *c, int level, const char *fmt, ...)
{
    if (c == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    pc_log_vemit(&c->log, level, NULL, fmt, ap);
    va_end(ap);
}

#if PC_DEBUG_ASSERTS
/* PC_ASSERT's failure path (debug builds): whatever the log level, the
 * line goes to the cache's log callback when a handle is in reach and to
 * stderr always (the callback may buffer), then the process aborts so the
 * core shows the state that broke the invariant. */
void pc_assert_fail(const pc_cache *c, const char *inv, const char *cond, const char *file,
                    int line)
{
    char buf[512];
    snprintf(buf, sizeof buf, "pcache: invariant %s violated at %s:%d: %s", inv, file, line, cond);
    if (c != NULL && c->log.fn != NULL)
        c->log.fn(c->log.ctx, PC_LOG_ERR, buf);
    fprintf(stderr, "%s\n", buf);
    abort();
}
#endif

/* XXH3 from libxxhash: fast on short keys and free of the collisions on
 * sequential keys that push a weaker hash's entries into overflow. */
uint64_t pc_hash(const void *key, size_t len)
{
    return pc_key_hash(key, len);
}
