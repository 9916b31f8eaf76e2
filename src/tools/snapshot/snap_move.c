/*
 * snap_move.c - the verbs that move snapshots between a store and an SQL
 * database through the ODBC exporter (odbc/include/pcache_odbc.h, docs/odbc.md):
 *   export STORE TARGET [COLLECTION]   LMDB -> SQL, ONE SQL transaction for
 *                                      everything exported (any error rolls
 *                                      all of it back)
 *   import STORE TARGET [COLLECTION]   SQL -> LMDB, one LMDB transaction per
 *                                      collection (the store has no
 *                                      multi-collection write)
 * TARGET is an ODBC db_url ("odbc://DSN", "odbc:CONNSTR", "DSN=...",
 * "DRIVER=..."); messages show it with any password masked. On a terminal a
 * progress bar runs on stderr. Without the ODBC exporter in the build the
 * verbs say so (exit 2).
 */
#include "snap.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef PCACHE_SNAPSHOT_ODBC
#include "pcache_odbc.h"

/* The progress bar: one line on stderr rewritten in place, at most ten
 * times a second, only when stderr is a terminal. */
struct snap_bar {
    int on;
    double last; /* monotonic seconds of the last redraw, 0 = never */
    char coll[PC_COLL_NAME_MAX + 1];
    int drawn;
};

static int snap_bar_fn(void *ctx, const char *coll, uint64_t done, uint64_t total)
{
    struct snap_bar *b = ctx;
    if (!b->on)
        return 0;
    double now = pc_mono_sec();
    int changed = strncmp(b->coll, coll, sizeof b->coll) != 0;
    double since = now - b->last;
    if (!changed && since < 0.1 && done != total)
        return 0;
    if (changed && b->drawn)
        fputc('\n', stderr);
    snprintf(b->coll, sizeof b->coll, "%s", coll);
    b->last = now;
    b->drawn = 1;
    if (total > 0) {
        unsigned pct = (unsigned)(done >= total ? 100 : done * 100 / total), w = pct * 30 / 100;
        char bar[31];
        memset(bar, '#', w);
        memset(bar + w, '.', 30 - w);
        bar[30] = 0;
        fprintf(stderr, "\r  %-20.63s [%s] %3u%%  %llu / %llu rows", coll, bar, pct,
                (unsigned long long)done, (unsigned long long)total);
    } else {
        fprintf(stderr, "\r  %-20.63s %llu rows", coll, (unsigned long long)done);
    }
    fflush(stderr);
    return 0;
}

static void snap_bar_end(struct snap_bar *b)
{
    if (b->on && b->drawn)
        fputc('\n', stderr);
}

/* Exit code of an ODBC-side failure: a URL the exporter refuses is a usage
 * error; a database that refuses or fails is SNAP_DB. */
static int snap_odbc_exit(int rc)
{
    if (rc == PC_EURL || rc == PC_EINVAL)
        return SNAP_USAGE;
    if (rc == PC_ENOTFOUND)
        return SNAP_NOCOLL;
    if (rc == PC_ESTORE || rc == PC_EIO)
        return SNAP_DB;
    return snap_exit_of(rc);
}

static void snap_move_report(snap_ctx *cx, const char *verb, const char *store, const char *target,
                             const char *coll, const pc_odbc_result *r)
{
    if (cx->json) {
        fprintf(cx->out, "{\"verb\":\"%s\",\"store\":", verb);
        snap_jstr(cx->out, store, strlen(store));
        fprintf(cx->out, ",\"target\":");
        snap_jstr(cx->out, target, strlen(target));
        fprintf(cx->out, ",\"collection\":");
        if (coll != NULL)
            snap_jstr(cx->out, coll, strlen(coll));
        else
            fprintf(cx->out, "null");
        fprintf(cx->out,
                ",\"rows\":%llu,\"skipped_expired\":%llu,\"failed\":%llu,\"generation\":%llu,"
                "\"seconds\":%.3f,\"rate\":%.0f}\n",
                (unsigned long long)r->rows, (unsigned long long)r->skipped_expired,
                (unsigned long long)r->failed, (unsigned long long)r->generation, r->seconds,
                r->rate);
        return;
    }
    fprintf(cx->out, "%s %s: %llu rows %s %s in %.3f s (%.0f rows/s)", verb,
            coll != NULL ? coll : "every collection", (unsigned long long)r->rows,
            strcmp(verb, "export") == 0 ? "from" : "into", store, r->seconds, r->rate);
    fprintf(cx->out, " %s %s", strcmp(verb, "export") == 0 ? "to" : "from", target);
    if (r->skipped_expired > 0)
        fprintf(cx->out, "; %llu expired skipped", (unsigned long long)r->skipped_expired);
    if (r->failed > 0)
        fprintf(cx->out, "; %llu refused by the engine", (unsigned long long)r->failed);
    fprintf(cx->out, "\n");
}

/* Opens a read-write store for import (created with --create-store). */
static int snap_open_rw(snap_ctx *cx, const char *path, int create, pc_store **out)
{
    long pid = 0;
    if (pc_store_lock_owner(path, &pid) == PC_ELOCKED)
        return snap_fail(cx, SNAP_LOCKED, "store %s is locked exclusively by process %ld", path,
                         pid);
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = create ? PC_STORE_CREATE : 0;
    char err[700];
    int rc = pc_store_open_checked(path, &sc, out, err, sizeof err);
    if (rc != 0) {
        if (access(path, F_OK) != 0 && !create)
            return snap_fail(cx, SNAP_NOPATH, "%s: no such store (--create-store makes one)", path);
        return snap_fail(cx, snap_exit_of(rc), "%s", err);
    }
    return 0;
}

static int snap_move(snap_ctx *cx, int argc, char **argv, int is_export)
{
    static const struct option opts[] = {SNAP_COMMON_OPTS,
                                         {"create-tables", no_argument, NULL, 'T'},
                                         {"create-store", no_argument, NULL, 'S'},
                                         {"no-progress", no_argument, NULL, 'P'},
                                         {NULL, 0, NULL, 0}};
    int c, r, create_tables = 0, create_store = 0, progress = 1;
    while ((c = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
        if (c == 'T')
            create_tables = 1;
        else if (c == 'S' && !is_export)
            create_store = 1;
        else if (c == 'P')
            progress = 0;
        else if ((r = snap_common_opt(cx, c == 'S' ? '?' : c, optarg)) >= 0)
            return r;
    }
    int nargs = argc - optind;
    if (nargs < 2 || nargs > 3)
        return snap_verb_help(cx, SNAP_USAGE);
    const char *path = argv[optind], *target = argv[optind + 1];
    const char *coll = nargs == 3 ? argv[optind + 2] : NULL;
    char masked[1024];
    pc_odbc_redact(target, masked, sizeof masked);
    if (!pc_odbc_is_url(target))
        return snap_fail(cx, SNAP_USAGE,
                         "'%s' is not an ODBC target (odbc://DSN, odbc:CONNSTR, DSN=..., "
                         "DRIVER=...)",
                         masked);
    pc_store *s = NULL;
    if (is_export) {
        if ((r = snap_open(cx, path, &s)) != 0)
            return r;
        pc_store_coll_meta m;
        if (coll != NULL && (r = snap_coll_meta(cx, s, coll, &m)) != 0) {
            pc_store_close(s);
            return r;
        }
    } else if ((r = snap_open_rw(cx, path, create_store, &s)) != 0) {
        return r;
    }
    struct snap_bar bar = {.on = progress && isatty(2) && !cx->quiet};
    pc_odbc_config oc;
    pc_odbc_config_init(&oc);
    oc.flags = create_tables ? PC_ODBC_CREATE : 0;
    oc.progress = snap_bar_fn;
    oc.progress_ctx = &bar;
    pc_odbc *o = NULL;
    char err[1200];
    int rc = pc_odbc_open(target, &oc, &o, err, sizeof err);
    if (rc != 0) {
        pc_store_close(s);
        return snap_fail(cx, snap_odbc_exit(rc), "%s", err);
    }
    pc_odbc_result res;
    memset(&res, 0, sizeof res);
    rc = is_export ? pc_odbc_export(o, s, coll, &res) : pc_odbc_import(o, s, coll, &res);
    snap_bar_end(&bar);
    if (rc != 0) {
        const char *msg = pc_odbc_errmsg(o);
        int code = snap_odbc_exit(rc);
        r = snap_fail(cx, code, "%s of %s %s %s failed, nothing %s: %s%s%s",
                      is_export ? "export" : "import", coll != NULL ? coll : "every collection",
                      is_export ? "to" : "from", pc_odbc_target(o),
                      is_export ? "changed in the database" : "changed in the store",
                      pc_store_strerror(rc), *msg ? ": " : "", msg);
        pc_odbc_close(o);
        pc_store_close(s);
        return r;
    }
    snap_move_report(cx, is_export ? "export" : "import", path, pc_odbc_target(o), coll, &res);
    pc_odbc_close(o);
    pc_store_close(s);
    return snap_finish(cx, SNAP_OK);
}

int snap_cmd_export(snap_ctx *cx, int argc, char **argv)
{
    return snap_move(cx, argc, argv, 1);
}

int snap_cmd_import(snap_ctx *cx, int argc, char **argv)
{
    return snap_move(cx, argc, argv, 0);
}

#else /* built without the ODBC exporter */

static int snap_no_odbc(snap_ctx *cx)
{
    return snap_fail(cx, SNAP_USAGE,
                     "%s: not available in this build (configured with -DPCACHE_ODBC=OFF: the "
                     "ODBC exporter, which needs unixODBC, was not built)",
                     cx->verb);
}

int snap_cmd_export(snap_ctx *cx, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return snap_no_odbc(cx);
}

int snap_cmd_import(snap_ctx *cx, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return snap_no_odbc(cx);
}
#endif
