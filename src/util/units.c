/*
 * units.c - the byte counts of configuration values (pcache_util.h), read
 * one way by every host: pcached's maxmemory and cachedb_perf's.
 */
#include "pcache_util.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <strings.h>

int pc_parse_bytes(const char *s, uint64_t *out)
{
    static const struct {
        const char *unit;
        uint64_t mul;
    } units[] = {{"", 1},
                 {"b", 1},
                 {"k", 1000},
                 {"kb", 1024},
                 {"m", 1000 * 1000},
                 {"mb", 1024 * 1024},
                 {"g", 1000ull * 1000 * 1000},
                 {"gb", 1024ull * 1024 * 1024}};
    if (!isdigit((unsigned char)s[0]))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcasecmp(end, units[i].unit) == 0) {
            if (v > UINT64_MAX / units[i].mul)
                return -1;
            *out = (uint64_t)v * units[i].mul;
            return 0;
        }
    return -1;
}
