/*
 * collections.c - the collection declarations ("name;name=log2size") and
 * the lookup of a collection by name.
 *
 * A declared size is the log2 of the starting bucket count, clamped to
 * [PC_LOG2_MIN, PC_LOG2_MAX] with a warning (1 << size on an unclamped
 * value would be undefined behaviour). Names match exactly:
 * a byte compare of the whole name, never a prefix.
 */
#include "pc_int.h"

#include <ctype.h>
#include <stdlib.h>

/* The bytes of a collection name (the URL parser of the management layer,
 * mgmt_url.c, checks the same set). */
static bool pc_name_char(int ch)
{
    return isalnum(ch) || ch == '_' || ch == '-' || ch == '.';
}

static const char *pc_trim(const char *s, const char *e, const char **end)
{
    while (s < e && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    *end = e;
    return s;
}

/* Parses one "name" or "name=log2" item into d. */
static int pc_parse_item(const pc_cache *c, const char *s, const char *e, struct pc_coll_decl *d)
{
    const char *eq = memchr(s, '=', (size_t)(e - s));
    const char *ne;
    const char *name = pc_trim(s, eq != NULL ? eq : e, &ne);
    size_t nl = (size_t)(ne - name);
    if (nl >= 2 && ne[-2] == '/' && (ne[-1] == 'r' || ne[-1] == 'R')) {
        pc_log(c, PC_LOG_ERR,
               "pcache: collection '%.*s': the cachedb_local /r replication "
               "marker is not supported (this cache is node-local)",
               (int)nl, name);
        return PC_ECONFIG;
    }
    if (nl == 0 || nl > PC_COLL_NAME_MAX) {
        pc_log(c, PC_LOG_ERR, "pcache: collection name '%.*s' must be 1..%u characters", (int)nl,
               name, PC_COLL_NAME_MAX);
        return PC_ECONFIG;
    }
    for (size_t i = 0; i < nl; i++) {
        if (!pc_name_char((unsigned char)name[i])) {
            pc_log(c, PC_LOG_ERR,
                   "pcache: collection name '%.*s' has an invalid character "
                   "(allowed: letters, digits, _ - .)",
                   (int)nl, name);
            return PC_ECONFIG;
        }
    }
    memcpy(d->name, name, nl);
    d->name[nl] = '\0';
    d->log2 = PC_LOG2_DEFAULT;
    if (eq == NULL)
        return 0;
    const char *ve;
    const char *v = pc_trim(eq + 1, e, &ve);
    if (v == ve) {
        pc_log(c, PC_LOG_ERR, "pcache: collection '%s': empty size after '='", d->name);
        return PC_ECONFIG;
    }
    unsigned long n = 0;
    for (const char *p = v; p < ve; p++) {
        if (*p < '0' || *p > '9') {
            pc_log(c, PC_LOG_ERR, "pcache: collection '%s': size '%.*s' is not a number", d->name,
                   (int)(ve - v), v);
            return PC_ECONFIG;
        }
        if (n < 1000)
            n = n * 10 + (unsigned long)(*p - '0');
    }
    if (n < PC_LOG2_MIN || n > PC_LOG2_MAX) {
        unsigned cl = n < PC_LOG2_MIN ? PC_LOG2_MIN : PC_LOG2_MAX;
        pc_log(c, PC_LOG_WARN,
               "pcache: collection '%s': size %lu clamped to %u (sizes are "
               "log2 of the starting bucket count, %u..%u)",
               d->name, n, cl, PC_LOG2_MIN, PC_LOG2_MAX);
        n = cl;
    }
    d->log2 = (unsigned)n;
    return 0;
}

int pc_collections_parse(const pc_cache *c, const char *spec, struct pc_coll_decl *out, unsigned *n)
{
    unsigned k = 0;
    if (spec == NULL || spec[strspn(spec, " \t")] == '\0') {
        strcpy(out[0].name, "default");
        out[0].log2 = PC_LOG2_DEFAULT;
        *n = 1;
        return 0;
    }
    const char *s = spec;
    for (;;) {
        const char *e = strchr(s, ';');
        if (e == NULL)
            e = s + strlen(s);
        const char *te;
        const char *ts = pc_trim(s, e, &te);
        if (ts == te) {
            pc_log(c, PC_LOG_ERR, "pcache: collections '%s': empty item (a stray ';')", spec);
            return PC_ECONFIG;
        }
        if (k == PC_MAX_COLLECTIONS) {
            pc_log(c, PC_LOG_ERR, "pcache: more than %u collections declared", PC_MAX_COLLECTIONS);
            return PC_ECONFIG;
        }
        int rc = pc_parse_item(c, ts, te, &out[k]);
        if (rc != 0)
            return rc;
        for (unsigned i = 0; i < k; i++) {
            if (strcmp(out[i].name, out[k].name) == 0) {
                pc_log(c, PC_LOG_ERR, "pcache: collection '%s' declared twice", out[k].name);
                return PC_ECONFIG;
            }
        }
        k++;
        if (*e == '\0')
            break;
        s = e + 1;
    }
    *n = k;
    return 0;
}

int pc_coll_find(pc_cache *c, const char *name, size_t len, pc_coll **out)
{
    if (c == NULL || (name == NULL && len > 0) || out == NULL)
        return PC_EINVAL;
    for (unsigned i = 0; i < c->ncoll; i++) {
        const char *cn = c->coll[i].shm->name;
        if (strlen(cn) == len && memcmp(cn, name, len) == 0) {
            *out = &c->coll[i];
            return 0;
        }
    }
    return PC_ENOCOLL;
}

unsigned pc_coll_count(const pc_cache *c)
{
    return c == NULL ? 0 : c->ncoll;
}

pc_coll *pc_coll_at(pc_cache *c, unsigned i)
{
    return c != NULL && i < c->ncoll ? &c->coll[i] : NULL;
}

const char *pc_coll_name(const pc_coll *coll)
{
    return coll->shm->name;
}
