/*
 * config_alias.c - Redis's names for pcached's configuration keys, so that
 * an operator's redis.conf habits work in pcached.conf (and on the command
 * line): `logfile = /var/log/pcached.log` is `log_file = ...`. Only where
 * Redis has a name for the same thing; the value keeps pcached's syntax
 * except where a table entry maps Redis's values (loglevel's words,
 * syslog-enabled's yes/no). A Redis key whose pcached counterpart has
 * another shape is not an alias: it is refused with a message naming what
 * to write instead (`databases`, `save`, `appendonly`...), never ignored.
 *
 * The keys pcached already shares with Redis (port, bind, requirepass,
 * maxclients, pidfile, maxmemory) need no entry. docs/pcached.md §2 "Redis names"
 * lists this table; tests/server/test_config_alias.py checks the two agree.
 */
#include "pcached.h"

#include <stdio.h>
#include <string.h>

typedef struct srv_alias {
    const char *redis; /* Redis's name */
    const char *key;   /* pcached's key */
    /* Redis's words -> pcached's, "from=to;from=to" (NULL: the value as is) */
    const char *values;
    /* appended to the value (trailing '/' of the value dropped first):
     * Redis's dir is the directory its files go in, pcached's store is a
     * directory of its own inside it, as the packaged layout has it
     * (/var/lib/pcache/store) */
    const char *suffix;
} srv_alias;

static const srv_alias srv_aliases[] = {
    {"logfile", "log_file", NULL, NULL},
    {"loglevel", "log_level", "warning=warn;notice=info;verbose=info;debug=debug", NULL},
    {"syslog-enabled", "syslog", "yes=1;no=0", NULL},
    {"dir", "db_url", NULL, "/store"},
    {"timeout", "idle_timeout_s", NULL, NULL},
    {"maxmemory-policy", "maxmemory_policy", NULL, NULL},
    {"slowlog-log-slower-than", "slowlog_log_slower_than", NULL, NULL},
    {"slowlog-max-len", "slowlog_max_len", NULL, NULL},
};

/* Redis keys that are not aliases: what pcached has instead. */
static const struct {
    const char *redis, *hint;
} srv_not_aliases[] = {
    {"databases", "declare collections (collections = a;b) and map SELECT n with "
                  "select_collections"},
    {"save", "snapshot_period_s (a period, not Redis's 'seconds changes' pairs)"},
    {"appendonly", "journal = COLLECTION=everysec (per collection)"},
    {"appendfsync", "the journal's mode: journal = COLLECTION=always|everysec|off"},
    {"dbfilename", "db_url names the store's directory; its files are fixed"},
    {"daemonize", "pcached runs in the foreground (systemd Type=notify); no daemonize"},
    {"maxmemory-samples", "pcache's policies sample nothing (CLOCK, S3-FIFO): drop the line"},
    {"maxmemory-eviction-tenacity", "eviction work per write is bounded by the engine: drop the "
                                    "line"},
};

int srv_config_alias(const char *name, const char *value, const char **key, char *vbuf, size_t vcap,
                     char *err, size_t errlen)
{
    for (size_t i = 0; i < sizeof srv_not_aliases / sizeof srv_not_aliases[0]; i++)
        if (strcmp(name, srv_not_aliases[i].redis) == 0) {
            snprintf(err, errlen, "'%s' is Redis's key, not pcached's: %s", name,
                     srv_not_aliases[i].hint);
            return -1;
        }
    for (size_t i = 0; i < sizeof srv_aliases / sizeof srv_aliases[0]; i++) {
        const srv_alias *a = &srv_aliases[i];
        if (strcmp(name, a->redis) != 0)
            continue;
        *key = a->key;
        size_t vl = strlen(value);
        if (vl >= vcap) {
            snprintf(err, errlen, "%s: value too long", name);
            return -1;
        }
        memcpy(vbuf, value, vl + 1);
        for (const char *m = a->values; m != NULL && *m != '\0';) {
            size_t n = strcspn(m, ";");
            const char *eq = memchr(m, '=', n);
            if (eq != NULL && (size_t)(eq - m) == vl && memcmp(m, value, vl) == 0) {
                size_t tl = n - (size_t)(eq - m) - 1;
                if (tl >= vcap) {
                    snprintf(err, errlen, "%s: value too long", name);
                    return -1;
                }
                memcpy(vbuf, eq + 1, tl);
                vbuf[tl] = '\0';
                break;
            }
            m += n + (m[n] == ';');
        }
        if (a->suffix != NULL && vbuf[0] != '\0') {
            size_t n = strlen(vbuf);
            while (n > 1 && vbuf[n - 1] == '/')
                vbuf[--n] = '\0';
            if (n + strlen(a->suffix) + (strcmp(vbuf, "/") == 0 ? 0 : 1) > vcap) {
                snprintf(err, errlen, "%s: value too long", name);
                return -1;
            }
            snprintf(vbuf + n, vcap - n, "%s", strcmp(vbuf, "/") == 0 ? a->suffix + 1 : a->suffix);
        }
        return 1;
    }
    return 0;
}

unsigned srv_config_alias_count(void)
{
    return sizeof srv_aliases / sizeof srv_aliases[0];
}

const char *srv_config_alias_at(unsigned i, const char **key)
{
    if (i >= srv_config_alias_count())
        return NULL;
    *key = srv_aliases[i].key;
    return srv_aliases[i].redis;
}
