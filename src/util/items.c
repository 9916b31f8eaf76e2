/*
 * items.c - the item lists of configuration values (pcache_util.h): "a;b",
 * "a,b", "name=value; other=value", read one way by every component and
 * host (pcached's collection lists, persist's persist_collections and
 * journal, cachedb_perf's eviction).
 */
#include "pcache_util.h"

/* The blanks trimmed around entries, names and values: C's isspace in the
 * "C" locale, without the locale. */
static int pc_item_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

int pc_list_items(const char *list, pc_item_fn fn, void *ctx)
{
    for (const char *s = list != NULL ? list : ""; *s != '\0';) {
        size_t n = strcspn(s, ",;");
        const char *a = s, *e = s + n;
        while (a < e && pc_item_blank(*a))
            a++;
        while (e > a && pc_item_blank(e[-1]))
            e--;
        if (a < e) {
            const char *eq = memchr(a, '=', (size_t)(e - a));
            const char *ne = eq != NULL ? eq : e, *v = eq != NULL ? eq + 1 : NULL;
            while (ne > a && pc_item_blank(ne[-1]))
                ne--;
            while (v != NULL && v < e && pc_item_blank(*v))
                v++;
            int rc = fn(ctx, a, (size_t)(ne - a), v, v != NULL ? (size_t)(e - v) : 0);
            if (rc != 0)
                return rc;
        }
        s += n + (s[n] != '\0');
    }
    return 0;
}
