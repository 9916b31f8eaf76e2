/*
 * persist_confine.c - where the [store] parameter of perf_save / perf_load
 * may point. The parameter comes from the management doors, so from the
 * network: unconfined, "perf_save default /etc/cron.d/x" would create a
 * directory and LMDB files at any path the server's user can write. An
 * LMDB [store] must resolve strictly under the store root (realpath of
 * the part that exists, no "." or ".." in the part that does not); an SQL
 * target only when the host allows them (docs/management.md).
 *
 * What this does not close: a path is checked and then opened, so a
 * writer of a directory under the root could swap a component for a
 * symlink in between. The root's own permissions are the defence there:
 * only the server's user should write under it.
 */
#include "persist_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The directory holding the LMDB store db_url names, into out. */
static int pp_store_parent(const char *db_url, char *out, size_t cap)
{
    const char *path = strncmp(db_url, "lmdb://", 7) == 0 ? db_url + 7 : db_url;
    char *real = realpath(path, NULL);
    if (real == NULL)
        return -1;
    char *slash = strrchr(real, '/');
    if (slash == real)
        slash[1] = '\0'; /* a store directly under / */
    else if (slash != NULL)
        *slash = '\0';
    int n = snprintf(out, cap, "%s", real);
    free(real);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int pp_root_init(pc_persist *p, const pc_persist_config *cfg, char *err, size_t errlen)
{
    p->store_sql_targets = cfg->store_sql_targets;
    char dflt[PATH_MAX];
    const char *root = cfg->store_root;
    if (root == NULL || root[0] == '\0') {
        if (p->backend != NULL || pp_store_parent(cfg->db_url, dflt, sizeof dflt) != 0)
            return 0; /* an SQL db_url: no LMDB [store] is accepted */
        root = dflt;
    }
    if ((p->store_root = realpath(root, NULL)) == NULL)
        return pp_fail(err, errlen, PC_ECONFIG, "store_root '%.200s': %s", root, strerror(errno));
    return 0;
}

static bool pp_is_sql(const pc_persist *p, const char *url)
{
    return (p->sql_backend != NULL && p->sql_backend->accepts(url)) ||
           strncmp(url, "odbc:", 5) == 0 || strncmp(url, "DSN=", 4) == 0 ||
           strncmp(url, "DRIVER=", 7) == 0;
}

/* Whether the components of rest ("a/b", no leading '/') are plain names. */
static bool pp_plain_rest(const char *rest)
{
    while (*rest != '\0') {
        const char *e = strchr(rest, '/');
        size_t n = e != NULL ? (size_t)(e - rest) : strlen(rest);
        if ((n == 1 && rest[0] == '.') || (n == 2 && rest[0] == '.' && rest[1] == '.'))
            return false;
        rest += n;
        while (*rest == '/')
            rest++;
    }
    return true;
}

int pp_confine(const pc_persist *p, const char *url, char *msg, size_t cap)
{
    if (pp_is_sql(p, url)) {
        if (p->store_sql_targets)
            return 0;
        snprintf(msg, cap, "an SQL target is not accepted here (store_sql_targets is off)");
        return PC_EINVAL;
    }
    if (strstr(url, "://") != NULL && strncmp(url, "lmdb://", 7) != 0)
        return 0; /* pp_target_open names the unknown scheme */
    const char *path = strncmp(url, "lmdb://", 7) == 0 ? url + 7 : url;
    if (p->store_root == NULL) {
        snprintf(msg, cap, "no LMDB store is accepted here: store_root is not set");
        return PC_EINVAL;
    }
    if (path[0] != '/') {
        snprintf(msg, cap, "'%.200s': give an absolute path under %.200s", path, p->store_root);
        return PC_EINVAL;
    }
    /* the longest prefix that exists, resolved; the rest must be plain names */
    char head[PATH_MAX];
    size_t len = strlen(path);
    if (len >= sizeof head) {
        snprintf(msg, cap, "the path is too long");
        return PC_EINVAL;
    }
    memcpy(head, path, len + 1);
    const char *rest = "";
    char *real = NULL;
    for (;;) {
        real = realpath(head[0] != '\0' ? head : "/", NULL);
        if (real != NULL)
            break;
        char *slash = strrchr(head, '/');
        if ((errno != ENOENT && errno != ENOTDIR) || slash == NULL) {
            snprintf(msg, cap, "'%.200s': %s", path, strerror(errno));
            return PC_EINVAL;
        }
        *slash = '\0';
        rest = path + (slash - head) + 1;
    }
    char full[PATH_MAX];
    int n = rest[0] != '\0' ? snprintf(full, sizeof full, "%s/%s", real, rest)
                            : snprintf(full, sizeof full, "%s", real);
    free(real);
    size_t rl = strlen(p->store_root);
    bool under = n > 0 && (size_t)n < sizeof full && pp_plain_rest(rest) &&
                 (rl == 1 ? full[1] != '\0'
                          : strncmp(full, p->store_root, rl) == 0 && full[rl] == '/' &&
                                full[rl + 1] != '\0');
    if (!under) {
        snprintf(msg, cap, "'%.200s' is not under the store root %.200s (store_root)", path,
                 p->store_root);
        return PC_EINVAL;
    }
    return 0;
}
