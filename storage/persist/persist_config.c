/*
 * persist_config.c - the persistence policy as the configuration states it:
 * the defaults, the persist_collections and journal lists, the db_url's
 * scheme, and what pc_persist_check verifies of the store's path and of an
 * existing store before anything opens it (persist.c opens; this file only
 * reads and checks).
 */
#include "persist_int.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void pc_persist_config_init(pc_persist_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->log.level = PC_LOG_INFO;
    cfg->journal_rewrite_percent = 100;
    cfg->journal_rewrite_min_mb = 64;
}

/* What the item callbacks of pp_policy_lists work on (pc_list_items' ctx). */
struct pp_lists {
    pc_persist *p;
    char *err;
    size_t errlen;
};

static int pp_persist_item(void *ctx, const char *name, size_t len, const char *val, size_t vlen)
{
    struct pp_lists *x = ctx;
    pc_persist *p = x->p;
    char *err = x->err;
    size_t errlen = x->errlen;
    (void)vlen;
    pc_coll *coll;
    if (val != NULL)
        return pp_fail(err, errlen, PC_ECONFIG,
                       "persist_collections: '%.*s=...': expected a "
                       "list of collection names",
                       (int)len, name);
    if (pc_coll_find(p->cache, name, len, &coll) != 0)
        return pp_fail(err, errlen, PC_ENOCOLL,
                       "persist_collections names '%.*s', which is not "
                       "a declared collection",
                       (int)len, name);
    p->persist[pp_index(p, coll)] = true;
    return 0;
}

static int pp_journal_item(void *ctx, const char *name, size_t len, const char *val, size_t vlen)
{
    struct pp_lists *x = ctx;
    pc_persist *p = x->p;
    char *err = x->err;
    size_t errlen = x->errlen;
    char mode[16];
    unsigned m;
    if (val == NULL || vlen == 0 || vlen >= sizeof mode)
        return pp_fail(err, errlen, PC_ECONFIG,
                       "journal: '%.*s' needs a mode: name=off, "
                       "name=everysec or name=always",
                       (int)len, name);
    memcpy(mode, val, vlen);
    mode[vlen] = '\0';
    if (pc_journal_mode_parse(mode, &m) != 0)
        return pp_fail(err, errlen, PC_ECONFIG,
                       "journal: '%.*s=%s': the mode must be off, "
                       "everysec or always",
                       (int)len, name, mode);
    pc_coll *coll;
    if (pc_coll_find(p->cache, name, len, &coll) != 0)
        return pp_fail(err, errlen, PC_ENOCOLL,
                       "journal names '%.*s', which is not a declared "
                       "collection",
                       (int)len, name);
    pc_journal_set_mode(coll, m);
    return 0;
}

/* persist_collections and journal: the collections each names, checked
 * against the cache's. */
int pp_policy_lists(pc_persist *p, const pc_persist_config *cfg, char *err, size_t errlen)
{
    struct pp_lists x = {p, err, errlen};
    int rc = pc_list_items(cfg->persist_collections, pp_persist_item, &x);
    return rc != 0 ? rc : pc_list_items(cfg->journal, pp_journal_item, &x);
}

/* db_url: "lmdb:///abs/path" or a plain path; an SQL URL only through the
 * backend (the URL is not echoed: a connection string may hold a
 * password). */
int pp_store_path(const char *url, const pc_persist_backend *be, char *err, size_t errlen)
{
    if (be != NULL && be->accepts(url))
        return 0;
    if (strncmp(url, "odbc:", 5) == 0)
        return pp_fail(err, errlen, PC_EURL,
                       "db_url odbc:...: the odbc:// store is not "
                       "available in this build (the host did not link the ODBC exporter)");
    if (strncmp(url, "lmdb:", 5) == 0 && strncmp(url, "lmdb:///", 8) != 0)
        return pp_fail(err, errlen, PC_ECONFIG,
                       "db_url '%.200s': expected lmdb:///absolute/path (an lmdb:// URL takes "
                       "an absolute path, three slashes; a relative store is a plain path)",
                       url);
    const char *colon = strstr(url, "://");
    if (colon != NULL && strncmp(url, "lmdb://", 7) != 0) {
        /* only the scheme is shown: the rest may carry user:password@ */
        int slen = (int)(colon - url) < 32 ? (int)(colon - url) : 32;
        return pp_fail(err, errlen, PC_EURL,
                       "db_url with scheme '%.*s': unknown scheme (expected lmdb:///path%s)", slen,
                       url,
                       be != NULL ? ", odbc://DSN or an ODBC connection string DSN=... / DRIVER=..."
                                  : "; odbc:// needs a host that links the ODBC exporter");
    }
    return 0;
}

/* For pc_persist_check: what pc_store_open would find at db_url's path
 * short of creating it. The path, when it exists, is a directory; when it
 * does not, its parent is an existing directory (the store creates its own
 * directory, never its parents: systemd's StateDirectory= makes
 * /var/lib/pcache). Every component is walked, so "a store under a regular
 * file" names that file. store_root, when given, resolves. */
int pp_check_path(const pc_persist_config *cfg, char *err, size_t errlen)
{
    const char *path = cfg->db_url;
    if (strncmp(path, "lmdb://", 7) == 0)
        path += 7;
    char buf[PATH_MAX];
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n == 0 || n >= sizeof buf)
        return pp_fail(err, errlen, PC_ECONFIG, "db_url '%.200s': empty or too long a path",
                       cfg->db_url);
    memcpy(buf, path, n);
    buf[n] = '\0';
    struct stat st;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && buf[i] != '/')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        int r = stat(buf, &st);
        int e = errno;
        bool last = i == n;
        if (r != 0 && e == ENOENT && last) {
            buf[i] = c;
            break; /* the store's own directory: created by the start */
        }
        if (r != 0) {
            int rc = pp_fail(err, errlen, PC_EIO, /* pc_store_open's code for it */
                             "db_url '%.200s': %s: %s%s", cfg->db_url, buf, strerror(e),
                             e == ENOENT ? " (the store's parent directory must exist)" : "");
            return rc;
        }
        if (!S_ISDIR(st.st_mode))
            return pp_fail(err, errlen, PC_ESTORE, /* pc_store_open's code for it */
                           "db_url '%.200s': %s is not a directory (a store is a directory, "
                           "in a directory)",
                           cfg->db_url, buf);
        buf[i] = c;
    }
    if (cfg->store_root != NULL && cfg->store_root[0] != '\0') {
        char *r = realpath(cfg->store_root, NULL);
        if (r == NULL)
            return pp_fail(err, errlen, PC_ECONFIG, "store_root '%.200s': %s", cfg->store_root,
                           strerror(errno));
        free(r);
    }
    return 0;
}

/* Before the first write (the boot generation, then loads that prune and
 * saves that replace): the whole store is checked, LMDB's pages and every
 * block's checksums (pc_store_check, in a forked child). A damaged store
 * is refused, with what is damaged and what to do: a start that loaded
 * part of it would serve the rest as if it were all, and the next save
 * would write the loss over what is left. On success sc gains
 * PC_STORE_NOCHECK (the open need not walk it again). */
int pp_check_store(const char *url, pc_store_config *sc, char *err, size_t errlen)
{
    pc_store_problem *pr = NULL;
    size_t n = 0;
    char why[600];
    int rc = pc_store_check(url, PC_STORE_CHECK_DEEP, &pr, &n, why, sizeof why);
    if (rc == PC_ESTORE)
        return 0; /* no data.mdb: a new store, pc_store_open decides */
    if (rc != 0)
        return pp_fail(err, errlen, rc, "db_url '%.200s': %s", url, why);
    if (n == 0) {
        sc->flags |= PC_STORE_NOCHECK;
        return 0;
    }
    /* the words of pcache-snapshot's verify and info on the same store */
    rc = pc_store_verdict(url, pr, n, PC_STORE_CHECK_DEEP, why, sizeof why);
    pc_store_problems_free(pr, n);
    return pp_fail(err, errlen, rc, "db_url '%.200s': %s. Nothing was read or written", url, why);
}
