/*
 * snap_dump.c - dump: every record of a snapshot as JSON lines or CSV.
 *
 * Both forms are reversible (docs/pcache-snapshot.md, "dump formats"): the
 * bytes of every key and value, the type (string / counter) and the
 * absolute expiry come back exactly from the text, so a dump can be
 * re-imported through the library (pc_set / pc_set_counter) into an
 * identical collection; tests/integration/test_snapshot_tool.c does so with an
 * independent JSON parser (jansson) and CSV reader.
 *
 * Each collection is read in one read transaction: its lines are one
 * snapshot even if a save commits meanwhile. Records of corrupt units are
 * not written; they are named on stderr and the exit code says so.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "snap.h"

struct snap_dump {
    snap_ctx *cx;
    const char *coll;
    int csv;
    uint64_t records;
};

static int64_t snap_counter_of(const void *val)
{
    const uint8_t *b = val;
    uint64_t u = 0;
    for (int i = 7; i >= 0; i--)
        u = u << 8 | b[i];
    return (int64_t)u;
}

/* One CSV field (RFC 4180): the reversible escaping, then quoted when the
 * escaped text holds a ',' or a '"' (the escaping never emits a line
 * break, so every record is one line). */
static void snap_csv_field(FILE *f, const void *p, size_t n)
{
    const uint8_t *b = p;
    int quote = memchr(p, ',', n) != NULL || memchr(p, '"', n) != NULL;
    if (!quote) {
        snap_esc(f, p, n);
        return;
    }
    fputc('"', f);
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        if (b[i] != '"')
            continue;
        snap_esc(f, b + from, i - from);
        fputs("\"\"", f);
        from = i + 1;
    }
    snap_esc(f, b + from, n - from);
    fputc('"', f);
}

static int snap_dump_rec(void *ctx, const pc_store_record *r)
{
    struct snap_dump *d = ctx;
    FILE *f = d->cx->out;
    if (d->csv) {
        snap_csv_field(f, d->coll, strlen(d->coll));
        fputc(',', f);
        snap_csv_field(f, r->key, r->klen);
        fprintf(f, ",%s,", r->is_counter ? "counter" : "string");
        if (r->is_counter)
            fprintf(f, "%lld", (long long)snap_counter_of(r->val));
        else
            snap_csv_field(f, r->val, r->vlen);
        fprintf(f, ",%lld,%u\n", (long long)r->expires_ms, r->stamp);
    } else {
        fprintf(f, "{\"collection\":");
        snap_jstr(f, d->coll, strlen(d->coll));
        fputc(',', f);
        snap_jbytes(f, "key", r->key, r->klen);
        fprintf(f, ",\"type\":\"%s\",", r->is_counter ? "counter" : "string");
        if (r->is_counter)
            fprintf(f, "\"value\":%lld", (long long)snap_counter_of(r->val));
        else
            snap_jbytes(f, "value", r->val, r->vlen);
        fprintf(f, ",\"expires_ms\":%lld,\"stamp\":%u}\n", (long long)r->expires_ms, r->stamp);
    }
    d->records++;
    return ferror(f) ? PC_EIO : 0;
}

int snap_cmd_dump(snap_ctx *cx, int argc, char **argv)
{
    static const struct option opts[] = {SNAP_COMMON_OPTS,
                                         {"format", required_argument, NULL, 'f'},
                                         {"expired", no_argument, NULL, 'x'},
                                         {NULL, 0, NULL, 0}};
    int c, r, csv = 0;
    unsigned flags = 0;
    while ((c = getopt_long(argc, argv, "hqf:", opts, NULL)) != -1) {
        if (c == 'f') {
            if (strcmp(optarg, "csv") == 0)
                csv = 1;
            else if (strcmp(optarg, "json") == 0)
                csv = 0;
            else
                return snap_fail(cx, SNAP_USAGE, "--format is json or csv, not '%s'", optarg);
        } else if (c == 'x') {
            flags |= PC_STORE_INCLUDE_EXPIRED;
        } else if ((r = snap_common_opt(cx, c, optarg)) >= 0) {
            return r;
        }
    }
    if (cx->json && csv)
        return snap_fail(cx, SNAP_USAGE, "--json and --format csv contradict each other");
    if (argc - optind < 1)
        return snap_verb_help(cx, SNAP_USAGE);
    pc_store *s;
    if ((r = snap_open(cx, argv[optind], &s)) != 0)
        return r;
    /* the collections: the named ones (each must exist, checked before any
     * output), or every one */
    size_t n = (size_t)(argc - optind - 1);
    pc_store_coll_meta *list = NULL;
    const char **names = calloc(n > 0 ? n : 1, sizeof *names);
    if (names == NULL) {
        r = snap_fail(cx, SNAP_IO, "out of memory");
        goto out;
    }
    if (n > 0) {
        for (size_t i = 0; i < n; i++) {
            pc_store_coll_meta m;
            names[i] = argv[optind + 1 + i];
            if ((r = snap_coll_meta(cx, s, names[i], &m)) != 0)
                goto out;
        }
    } else {
        int rc = pc_store_list(s, &list, &n);
        if (rc != 0) {
            r = snap_fail(cx, snap_exit_of(rc), "store %s: %s", pc_store_path(s),
                          pc_store_strerror(rc));
            goto out;
        }
        const char **nn = realloc(names, (n > 0 ? n : 1) * sizeof *names);
        if (nn == NULL) {
            r = snap_fail(cx, SNAP_IO, "out of memory");
            goto out;
        }
        names = nn;
        for (size_t i = 0; i < n; i++)
            names[i] = list[i].name;
    }
    if (csv)
        fprintf(cx->out, "collection,key,type,value,expires_ms,stamp\n");
    int bad = 0;
    r = SNAP_OK;
    for (size_t i = 0; i < n && r == SNAP_OK; i++) {
        struct snap_dump d = {cx, names[i], csv, 0};
        int rc = pc_store_iterate(s, names[i], flags, snap_dump_rec, &d);
        if (rc == PC_ECORRUPT)
            bad = 1;
        else if (rc == PC_EIO && ferror(cx->out))
            r = snap_finish(cx, SNAP_IO);
        else if (rc == PC_ENOTFOUND) /* dropped since the list: nothing to dump */
            continue;
        else if (rc != 0)
            r = snap_fail(cx, snap_exit_of(rc), "collection %s: %s", names[i],
                          pc_store_strerror(rc));
    }
    if (r == SNAP_OK)
        r = snap_finish(cx, SNAP_OK);
    if (r == SNAP_OK && bad)
        r = snap_fail(cx, SNAP_CORRUPT,
                      "corrupt records were met (named above) and are not in the dump");
out:
    free(names);
    pc_store_list_free(list);
    pc_store_close(s);
    return r;
}
