/*
 * mgmt_url.c - the perf:// URLs by which hosts name a collection (the
 * OpenSIPS cachedb URL syntax), resolved through the engine's public
 * collection lookup.
 */
#include "pcache_mgmt.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The bytes a collection name may hold: the engine's rule for declared
 * names (collections.c), which the URL checks before the lookup so that a
 * name with other bytes gets the URL's own message. */
static bool pc_url_name_char(int ch)
{
    return isalnum(ch) || ch == '_' || ch == '-' || ch == '.';
}

__attribute__((format(printf, 4, 5))) static int pc_url_fail(char *errbuf, size_t errlen, int rc,
                                                             const char *fmt, ...)
{
    if (errbuf != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* perf://[name] | perf:///name | perf:group://[name] | perf:group:///name */
int pc_url_parse(pc_cache *c, const char *url, pc_url *out, char *errbuf, size_t errlen)
{
    if (c == NULL || url == NULL || out == NULL)
        return PC_EINVAL;
    if (strncmp(url, "perf:", 5) != 0)
        return pc_url_fail(errbuf, errlen, PC_EURL, "URL '%.200s' does not start with perf:", url);
    const char *p = url + 5;
    pc_url u;
    memset(&u, 0, sizeof u);
    if (strncmp(p, "//", 2) != 0) { /* a group comes first */
        const char *colon = strchr(p, ':');
        if (colon == NULL || colon == p || strncmp(colon + 1, "//", 2) != 0)
            return pc_url_fail(errbuf, errlen, PC_EURL,
                               "URL '%.200s': expected perf://, perf:///name or "
                               "perf:group:///name",
                               url);
        size_t gl = (size_t)(colon - p);
        if (gl > PC_COLL_NAME_MAX)
            return pc_url_fail(errbuf, errlen, PC_EURL, "URL '%.200s': group name too long", url);
        for (size_t i = 0; i < gl; i++)
            if (!pc_url_name_char((unsigned char)p[i]))
                return pc_url_fail(errbuf, errlen, PC_EURL,
                                   "URL '%.200s': invalid character in the group name", url);
        memcpy(u.group, p, gl);
        p = colon + 1;
    }
    p += 2; /* past "//" */
    const char *name = p;
    if (*p == '/') /* empty host, the collection is the path: perf:///name */
        name = p + 1;
    size_t nl = strlen(name);
    const char *slash = memchr(name, '/', nl);
    if (slash != NULL) {
        if (strcmp(slash, "/r") == 0 || strcmp(slash, "/R") == 0)
            return pc_url_fail(errbuf, errlen, PC_EURL,
                               "URL '%.200s': the /r replication marker is not supported "
                               "(this cache is node-local)",
                               url);
        return pc_url_fail(errbuf, errlen, PC_EURL,
                           "URL '%.200s': only one path segment (the collection) is allowed", url);
    }
    if (nl == 0 && name != p) /* "perf:///" names nothing */
        return pc_url_fail(errbuf, errlen, PC_EURL, "URL '%.200s': empty collection name", url);
    if (nl > PC_COLL_NAME_MAX)
        return pc_url_fail(errbuf, errlen, PC_EURL, "URL '%.200s': collection name too long", url);
    for (size_t i = 0; i < nl; i++)
        if (!pc_url_name_char((unsigned char)name[i]))
            return pc_url_fail(errbuf, errlen, PC_EURL,
                               "URL '%.200s': invalid character in the collection name "
                               "(user, password, port and query are not supported)",
                               url);
    const char *cname = nl == 0 ? "default" : name;
    size_t cl = nl == 0 ? 7 : nl;
    if (pc_coll_find(c, cname, cl, &u.coll) != 0) {
        if (errbuf != NULL && errlen > 0)
            snprintf(errbuf, errlen,
                     "URL '%.200s' names collection '%.*s', which is not "
                     "declared in the collections list",
                     url, (int)cl, cname);
        return PC_ENOCOLL;
    }
    *out = u;
    return 0;
}
