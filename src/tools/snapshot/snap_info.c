/*
 * snap_info.c - the looking verbs: info, ls, keys, get.
 *
 * Consistency: info reads every collection's meta in one read transaction
 * (pc_store_list), so the generation, count and sizes it shows for a
 * collection always belong to one save, even while another process saves
 * in a loop. ls / keys read one collection in one transaction
 * (pc_store_iterate). The journal directory is listed with readdir and is
 * not transactional: a segment retired meanwhile may still be counted.
 */
#include <dirent.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pcache_journal.h"
#include "snap.h"

#define SNAP_STOP 100 /* an iteration callback's "enough" (never a PC_E* code) */

/* ---- info ------------------------------------------------------------------ */
struct snap_jseg {
    uint64_t segs, bytes; /* pending segments of one collection */
};

/* Calls fn(ctx, dir, name, coll, epoch, size) for each journal segment in
 * dir (directory order) until it returns non-zero; other files are passed
 * over. Returns that value, 0 when all were seen or dir cannot be read. */
typedef int (*snap_segfn)(void *ctx, const char *dir, const char *name, const char *coll,
                          uint64_t epoch, uint64_t size);
static int snap_segments(const char *dir, snap_segfn fn, void *ctx)
{
    char path[4500];
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        char coll[PC_COLL_NAME_MAX + 1];
        uint64_t epoch;
        if (pc_journal_segment_name_parse(e->d_name, coll, sizeof coll, &epoch) != 0)
            continue;
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        uint64_t size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
        rc = fn(ctx, dir, e->d_name, coll, epoch, size);
    }
    closedir(d);
    return rc;
}

struct snap_jscan {
    const pc_store_coll_meta *list;
    size_t n;
    struct snap_jseg *per, *other;
};

static int snap_jscan_one(void *ctx, const char *dir, const char *name, const char *coll,
                          uint64_t epoch, uint64_t size)
{
    const struct snap_jscan *s = ctx;
    (void)dir, (void)name;
    struct snap_jseg *to = s->other;
    for (size_t i = 0; i < s->n; i++) {
        if (strcmp(s->list[i].name, coll) != 0)
            continue;
        to = epoch >= s->list[i].journal_epoch ? &s->per[i] : NULL; /* else: covered, retiring */
        break;
    }
    if (to != NULL) {
        to->segs++;
        to->bytes += size;
    }
    return 0;
}

/* Counts the journal segments each collection would replay on its next
 * restore: those of an epoch >= its snapshot's journal epoch (all of them
 * for a collection without a snapshot, counted in other). */
static void snap_journal_scan(const char *store, const pc_store_coll_meta *list, size_t n,
                              struct snap_jseg *per, struct snap_jseg *other)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/journal", store);
    struct snap_jscan s = {list, n, per, other};
    (void)snap_segments(dir, snap_jscan_one, &s);
}

/* ---- the journal's quarantine (docs/journal-format.md §4) -------------------
 * Segments a save did not retire because the replay cannot read them:
 * <store>/journal/quarantine/<segment> with "<segment>.reason" beside it. */
typedef int (*snap_qfn)(void *ctx, const char *name, uint64_t size, const char *reason);

struct snap_qscan {
    snap_qfn fn;
    void *ctx;
    uint64_t n, bytes;
};

static int snap_qscan_one(void *ctx, const char *dir, const char *name, const char *coll,
                          uint64_t epoch, uint64_t size)
{
    struct snap_qscan *q = ctx;
    (void)coll, (void)epoch;
    q->n++;
    q->bytes += size;
    if (q->fn == NULL)
        return 0;
    char reason[512] = "", path[4500];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, PC_JOURNAL_QUARANTINE_REASON);
    FILE *rf = fopen(path, "r");
    if (rf != NULL) {
        if (fgets(reason, sizeof reason, rf) == NULL)
            reason[0] = '\0';
        fclose(rf);
        reason[strcspn(reason, "\n")] = '\0';
    }
    return q->fn(q->ctx, name, size, reason);
}

/* Calls fn for each quarantined segment (directory order); returns the
 * number seen (0 when there is no quarantine folder). */
static uint64_t snap_quarantine_each(const char *store, snap_qfn fn, void *ctx, uint64_t *bytes)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/journal/%s", store, PC_JOURNAL_QUARANTINE_DIR);
    struct snap_qscan q = {fn, ctx, 0, 0};
    (void)snap_segments(dir, snap_qscan_one, &q);
    *bytes = q.bytes;
    return q.n;
}

struct snap_qlist {
    snap_ctx *cx;
    uint64_t shown;
};

static int snap_qprint(void *ctx, const char *name, uint64_t size, const char *reason)
{
    struct snap_qlist *q = ctx;
    FILE *f = q->cx->out;
    if (q->cx->json) {
        fprintf(f, "%s{\"file\":", q->shown ? "," : "");
        snap_jstr(f, name, strlen(name));
        fprintf(f, ",\"bytes\":%llu,\"reason\":", (unsigned long long)size);
        if (reason[0] != '\0')
            snap_jstr(f, reason, strlen(reason));
        else
            fprintf(f, "null");
        fprintf(f, "}");
    } else {
        char a[32];
        fprintf(f, "%-56s %10s  %s\n", name, snap_size(size, a, sizeof a),
                reason[0] != '\0' ? reason : "(no reason recorded)");
    }
    q->shown++;
    return 0;
}

int snap_cmd_quarantine(snap_ctx *cx, int argc, char **argv)
{
    int r = snap_common_args(cx, argc, argv, 1, 1);
    if (r >= 0)
        return r;
    pc_store *s;
    if ((r = snap_open(cx, argv[optind], &s)) != 0)
        return r;
    struct snap_qlist q = {.cx = cx};
    uint64_t bytes = 0;
    if (cx->json)
        fprintf(cx->out, "{\"quarantine\":[");
    uint64_t n = snap_quarantine_each(pc_store_path(s), snap_qprint, &q, &bytes);
    if (cx->json)
        fprintf(cx->out, "],\"segments\":%llu,\"bytes\":%llu}\n", (unsigned long long)n,
                (unsigned long long)bytes);
    else if (n == 0)
        fprintf(cx->out, "no quarantined journal segments\n");
    pc_store_close(s);
    return snap_finish(cx, SNAP_OK);
}

static void snap_info_json(snap_ctx *cx, pc_store *s, const pc_store_info *in,
                           const pc_store_coll_meta *list, size_t n, const struct snap_jseg *per,
                           const struct snap_jseg *other)
{
    uint64_t qbytes = 0;
    uint64_t qsegs = snap_quarantine_each(pc_store_path(s), NULL, NULL, &qbytes);
    FILE *f = cx->out;
    char t[64];
    uint64_t segs = other->segs, bytes = other->bytes;
    for (size_t i = 0; i < n; i++)
        segs += per[i].segs, bytes += per[i].bytes;
    fprintf(f, "{\"store\":");
    snap_jstr(f, pc_store_path(s), strlen(pc_store_path(s)));
    fprintf(f,
            ",\"format_version\":%u,\"created_ms\":%lld,\"created\":\"%s\",\"boot_gen\":%llu,"
            "\"file_bytes\":%llu,\"used_bytes\":%llu,\"map_bytes\":%llu,\"page_size\":%u,"
            "\"readers\":%u,\"max_readers\":%u,\"dictionary\":null,"
            "\"journal\":{\"segments_pending\":%llu,\"bytes_pending\":%llu,"
            "\"quarantined\":%llu,\"quarantined_bytes\":%llu},\"collections\":[",
            in->format_version, (long long)in->created_ms, snap_time(in->created_ms, t, sizeof t),
            (unsigned long long)in->boot_gen, (unsigned long long)in->file_bytes,
            (unsigned long long)in->used_bytes, (unsigned long long)in->map_bytes, in->page_size,
            in->readers, in->max_readers, (unsigned long long)segs, (unsigned long long)bytes,
            (unsigned long long)qsegs, (unsigned long long)qbytes);
    for (size_t i = 0; i < n; i++) {
        const pc_store_coll_meta *m = &list[i];
        fprintf(f, "%s{\"name\":", i ? "," : "");
        snap_jstr(f, m->name, strlen(m->name));
        if (m->format_version == 0) {
            fprintf(f, ",\"ok\":false,\"error\":\"its meta record does not decode\"}");
            continue;
        }
        fprintf(f,
                ",\"ok\":true,\"format_version\":%u,\"generation\":%llu,\"count\":%llu,"
                "\"blocks\":%llu,\"raw_bytes\":%llu,\"stored_bytes\":%llu,\"key_bytes\":%llu,"
                "\"value_bytes\":%llu,\"content_checksum\":\"%016llx\",\"saved_at_ms\":%lld,"
                "\"saved_at\":\"%s\",\"boot_gen\":%llu,\"journal_epoch\":%llu,\"save_usec\":%llu,",
                m->format_version, (unsigned long long)m->generation, (unsigned long long)m->count,
                (unsigned long long)m->blocks, (unsigned long long)m->raw_bytes,
                (unsigned long long)m->stored_bytes, (unsigned long long)m->key_bytes,
                (unsigned long long)m->value_bytes, (unsigned long long)m->content_checksum,
                (long long)m->saved_at_ms, snap_time(m->saved_at_ms, t, sizeof t),
                (unsigned long long)m->boot_gen, (unsigned long long)m->journal_epoch,
                (unsigned long long)m->save_usec);
        if (m->dict_id == 0)
            fprintf(f, "\"dictionary\":null,");
        else
            fprintf(f, "\"dictionary\":%u,", m->dict_id);
        fprintf(f, "\"journal_segments_pending\":%llu,\"journal_bytes_pending\":%llu}",
                (unsigned long long)per[i].segs, (unsigned long long)per[i].bytes);
    }
    fprintf(f, "]}\n");
}

static void snap_info_text(snap_ctx *cx, pc_store *s, const pc_store_info *in,
                           const pc_store_coll_meta *list, size_t n, const struct snap_jseg *per,
                           const struct snap_jseg *other)
{
    uint64_t qbytes = 0;
    uint64_t qsegs = snap_quarantine_each(pc_store_path(s), NULL, NULL, &qbytes);
    FILE *f = cx->out;
    char t[64], a[32], b[32], c[32];
    uint64_t segs = other->segs, bytes = other->bytes;
    for (size_t i = 0; i < n; i++)
        segs += per[i].segs, bytes += per[i].bytes;
    fprintf(f, "store        %s\n", pc_store_path(s));
    fprintf(f, "format       version %u\n", in->format_version);
    fprintf(f, "created      %s\n", snap_time(in->created_ms, t, sizeof t));
    fprintf(f, "boot gen     %llu\n", (unsigned long long)in->boot_gen);
    fprintf(f, "data.mdb     %s, %s in use, map %s, page %u B\n",
            snap_size(in->file_bytes, a, sizeof a), snap_size(in->used_bytes, b, sizeof b),
            snap_size(in->map_bytes, c, sizeof c), in->page_size);
    fprintf(f, "readers      %u of %u slots\n", in->readers, in->max_readers);
    fprintf(f, "dictionary   none (format version 1 defines no dictionaries)\n");
    fprintf(f, "journal      %llu segments pending (%s)\n", (unsigned long long)segs,
            snap_size(bytes, a, sizeof a));
    fprintf(f, "quarantine   %llu segments (%s)%s\n", (unsigned long long)qsegs,
            snap_size(qbytes, b, sizeof b),
            qsegs > 0 ? ": not replayable, kept (pcache-snapshot quarantine)" : "");
    fprintf(f, "collections  %zu\n", n);
    if (n == 0)
        return;
    fprintf(f, "\n%-24s %6s %10s %7s %10s %10s %-24s %5s %7s\n", "NAME", "GEN", "RECORDS", "BLOCKS",
            "RAW", "STORED", "SAVED AT", "DICT", "JOURNAL");
    for (size_t i = 0; i < n; i++) {
        const pc_store_coll_meta *m = &list[i];
        if (m->format_version == 0) {
            fprintf(f, "%-24s (its meta record does not decode: run verify)\n", m->name);
            continue;
        }
        fprintf(f, "%-24s %6llu %10llu %7llu %10s %10s %-24s %5s %7llu\n", m->name,
                (unsigned long long)m->generation, (unsigned long long)m->count,
                (unsigned long long)m->blocks, snap_size(m->raw_bytes, a, sizeof a),
                snap_size(m->stored_bytes, b, sizeof b), snap_time(m->saved_at_ms, t, sizeof t),
                m->dict_id == 0 ? "none" : "?", (unsigned long long)per[i].segs);
    }
}

int snap_cmd_info(snap_ctx *cx, int argc, char **argv)
{
    int r = snap_common_args(cx, argc, argv, 1, 1);
    if (r >= 0)
        return r;
    /* pcached's check first: info classifies a store as pcached and verify
     * do, in their words (a damaged store: what LMDB can still read is
     * shown, then the verdict and exit 8) */
    snap_check_result cr;
    if ((r = snap_check(cx, argv[optind], &cr)) != SNAP_OK)
        return r;
    if (cr.reader != 0 || cr.verdict == PC_ESTORE) {
        r = snap_fail(cx, snap_exit_of_verdict(cr.verdict), "%s", cr.msg);
        snap_check_free(&cr);
        return r;
    }
    pc_store *s;
    cx->nocheck = 1;
    r = snap_open(cx, argv[optind], &s);
    cx->nocheck = 0;
    if (r != 0) {
        snap_check_free(&cr);
        return r;
    }
    pc_store_info in;
    pc_store_coll_meta *list = NULL;
    size_t n = 0;
    struct snap_jseg *per = NULL, other = {0, 0};
    int rc = pc_store_info_get(s, &in);
    if (rc == 0)
        rc = pc_store_list(s, &list, &n);
    if (rc != 0) {
        r = snap_fail(cx, snap_exit_of(rc), "store %s: %s", pc_store_path(s),
                      pc_store_strerror(rc));
        goto out;
    }
    if ((per = calloc(n + 1, sizeof *per)) == NULL) {
        r = snap_fail(cx, SNAP_IO, "out of memory");
        goto out;
    }
    snap_journal_scan(pc_store_path(s), list, n, per, &other);
    if (cx->json)
        snap_info_json(cx, s, &in, list, n, per, &other);
    else
        snap_info_text(cx, s, &in, list, n, per, &other);
    r = snap_finish(cx, SNAP_OK);
    if (r == SNAP_OK && cr.verdict != 0)
        r = snap_fail(cx, snap_exit_of_verdict(cr.verdict), "%s", cr.msg);
    for (size_t i = 0; i < n && r == SNAP_OK; i++)
        if (list[i].format_version == 0)
            r = snap_fail(cx, SNAP_CORRUPT, "collection %s: its meta record is corrupt",
                          list[i].name);
out:
    snap_check_free(&cr);
    free(per);
    pc_store_list_free(list);
    pc_store_close(s);
    return r;
}

/* ---- ls / keys ------------------------------------------------------------- */
struct snap_ls {
    snap_ctx *cx;
    const char *glob;
    size_t glen;
    long long limit, shown;
    int details; /* ls: type, size, TTL; keys: the key alone */
    int64_t now;
};

static int snap_ls_rec(void *ctx, const pc_store_record *r)
{
    struct snap_ls *ls = ctx;
    FILE *f = ls->cx->out;
    if (ls->glob != NULL && !pc_glob_match(ls->glob, ls->glen, r->key, r->klen))
        return 0;
    if (ls->limit >= 0 && ls->shown >= ls->limit)
        return SNAP_STOP;
    if (ls->cx->json) {
        fprintf(f, "%s{", ls->shown ? "," : "");
        snap_jbytes(f, "key", r->key, r->klen);
        if (ls->details) {
            fprintf(f, ",\"type\":\"%s\",\"size\":%zu,\"expires_ms\":%lld,\"ttl_ms\":",
                    r->is_counter ? "counter" : "string", r->vlen, (long long)r->expires_ms);
            if (r->expires_ms == 0)
                fprintf(f, "null");
            else
                fprintf(f, "%lld", (long long)(r->expires_ms - ls->now));
        }
        fputc('}', f);
    } else if (ls->details) {
        char ttl[40];
        if (r->expires_ms == 0)
            snprintf(ttl, sizeof ttl, "never");
        else
            snprintf(ttl, sizeof ttl, "%.3f s", (double)(r->expires_ms - ls->now) / 1000.0);
        fprintf(f, "%-7s %9zu %14s  ", r->is_counter ? "counter" : "string", r->vlen, ttl);
        snap_esc(f, r->key, r->klen);
        fputc('\n', f);
    } else {
        snap_esc(f, r->key, r->klen);
        fputc('\n', f);
    }
    ls->shown++;
    return ferror(f) ? PC_EIO : 0;
}

static int snap_list_colls(snap_ctx *cx, pc_store *s, long long limit)
{
    pc_store_coll_meta *list;
    size_t n;
    char t[64];
    int rc = pc_store_list(s, &list, &n);
    if (rc != 0)
        return snap_fail(cx, snap_exit_of(rc), "store %s: %s", pc_store_path(s),
                         pc_store_strerror(rc));
    size_t shown = limit >= 0 && (unsigned long long)limit < n ? (size_t)limit : n;
    if (cx->json) {
        fprintf(cx->out, "{\"collections\":[");
        for (size_t i = 0; i < shown; i++) {
            fprintf(cx->out, "%s{\"name\":", i ? "," : "");
            snap_jstr(cx->out, list[i].name, strlen(list[i].name));
            fprintf(cx->out, ",\"generation\":%llu,\"count\":%llu,\"saved_at_ms\":%lld}",
                    (unsigned long long)list[i].generation, (unsigned long long)list[i].count,
                    (long long)list[i].saved_at_ms);
        }
        fprintf(cx->out, "],\"truncated\":%s}\n", shown < n ? "true" : "false");
    } else {
        if (shown > 0)
            fprintf(cx->out, "%-24s %6s %10s %s\n", "NAME", "GEN", "RECORDS", "SAVED AT");
        for (size_t i = 0; i < shown; i++)
            fprintf(cx->out, "%-24s %6llu %10llu %s\n", list[i].name,
                    (unsigned long long)list[i].generation, (unsigned long long)list[i].count,
                    snap_time(list[i].saved_at_ms, t, sizeof t));
    }
    pc_store_list_free(list);
    return snap_finish(cx, SNAP_OK);
}

static int snap_list(snap_ctx *cx, int argc, char **argv, int details)
{
    static const struct option opts[] = {SNAP_COMMON_OPTS,
                                         {"limit", required_argument, NULL, 'n'},
                                         {"expired", no_argument, NULL, 'x'},
                                         {NULL, 0, NULL, 0}};
    int c, r;
    long long limit = -1;
    unsigned flags = 0;
    while ((c = getopt_long(argc, argv, "hqn:", opts, NULL)) != -1) {
        if (c == 'n') {
            if ((limit = snap_parse_count(optarg)) < 0)
                return snap_fail(cx, SNAP_USAGE, "--limit takes a count, not '%s'", optarg);
        } else if (c == 'x') {
            flags |= PC_STORE_INCLUDE_EXPIRED;
        } else if ((r = snap_common_opt(cx, c, optarg)) >= 0) {
            return r;
        }
    }
    int npos = argc - optind;
    if (npos < (details ? 1 : 2) || npos > 3)
        return snap_verb_help(cx, SNAP_USAGE);
    const char *glob = npos == 3 ? argv[optind + 2] : NULL;
    if (glob != NULL && (r = pc_glob_check(glob, strlen(glob))) != 0)
        return snap_fail(cx, SNAP_USAGE, "'%s' is not a well-formed glob (%s)", glob,
                         pc_store_strerror(r));
    pc_store *s;
    if ((r = snap_open(cx, argv[optind], &s)) != 0)
        return r;
    if (npos == 1) {
        r = snap_list_colls(cx, s, limit);
        pc_store_close(s);
        return r;
    }
    const char *name = argv[optind + 1];
    pc_store_coll_meta m;
    if ((r = snap_coll_meta(cx, s, name, &m)) != 0) {
        pc_store_close(s);
        return r;
    }
    struct snap_ls ls = {cx, glob, glob ? strlen(glob) : 0, limit, 0, details, pc_wall_ms()};
    if (cx->json) {
        fprintf(cx->out, "{\"collection\":");
        snap_jstr(cx->out, name, strlen(name));
        fprintf(cx->out, ",\"generation\":%llu,\"keys\":[", (unsigned long long)m.generation);
    }
    int rc = pc_store_iterate(s, name, flags, snap_ls_rec, &ls);
    if (cx->json)
        fprintf(cx->out, "],\"shown\":%lld,\"truncated\":%s}\n", ls.shown,
                rc == SNAP_STOP ? "true" : "false");
    r = snap_finish(cx, SNAP_OK);
    if (r == SNAP_OK && rc == PC_ECORRUPT)
        r = snap_fail(cx, SNAP_CORRUPT,
                      "collection %s has corrupt records (named above): they are not listed", name);
    else if (r == SNAP_OK && rc != 0 && rc != SNAP_STOP)
        r = snap_fail(cx, snap_exit_of(rc), "collection %s: %s", name, pc_store_strerror(rc));
    pc_store_close(s);
    return r;
}

int snap_cmd_ls(snap_ctx *cx, int argc, char **argv)
{
    return snap_list(cx, argc, argv, 1);
}

int snap_cmd_keys(snap_ctx *cx, int argc, char **argv)
{
    return snap_list(cx, argc, argv, 0);
}

/* ---- get ------------------------------------------------------------------- */
static void snap_get_print(snap_ctx *cx, const char *name, const uint8_t *key, size_t klen,
                           const uint8_t *val, size_t vlen, const pc_store_record *rec)
{
    FILE *f = cx->out;
    int64_t now = pc_wall_ms(), num = 0;
    if (rec->is_counter) /* 8 bytes little-endian (pc_store_record) */
        for (int i = 7; i >= 0; i--)
            num = (int64_t)((uint64_t)num << 8 | val[i]);
    char t[64];
    if (cx->json) {
        fprintf(f, "{\"collection\":");
        snap_jstr(f, name, strlen(name));
        fputc(',', f);
        snap_jbytes(f, "key", key, klen);
        fprintf(f, ",\"type\":\"%s\",\"size\":%zu,\"expires_ms\":%lld,\"ttl_ms\":",
                rec->is_counter ? "counter" : "string", vlen, (long long)rec->expires_ms);
        if (rec->expires_ms == 0)
            fprintf(f, "null");
        else
            fprintf(f, "%lld", (long long)(rec->expires_ms - now));
        fprintf(f, ",\"stamp\":%u,", rec->stamp);
        if (rec->is_counter)
            fprintf(f, "\"value\":%lld", (long long)num);
        else
            snap_jbytes(f, "value", val, vlen);
        fprintf(f, "}\n");
        return;
    }
    fprintf(f, "key      ");
    snap_esc(f, key, klen);
    fprintf(f, "\ntype     %s\nsize     %zu\n", rec->is_counter ? "counter" : "string", vlen);
    if (rec->expires_ms == 0)
        fprintf(f, "ttl      never\n");
    else
        fprintf(f, "ttl      %.3f s (expires %s)\n", (double)(rec->expires_ms - now) / 1000.0,
                snap_time(rec->expires_ms, t, sizeof t));
    fprintf(f, "value    ");
    if (rec->is_counter)
        fprintf(f, "%lld", (long long)num);
    else
        snap_esc(f, val, vlen);
    fputc('\n', f);
}

int snap_cmd_get(snap_ctx *cx, int argc, char **argv)
{
    static const struct option opts[] = {SNAP_COMMON_OPTS,
                                         {"escaped", no_argument, NULL, 'e'},
                                         {"raw", no_argument, NULL, 'r'},
                                         {"expired", no_argument, NULL, 'x'},
                                         {NULL, 0, NULL, 0}};
    int c, r, escaped = 0, raw = 0;
    unsigned flags = 0;
    while ((c = getopt_long(argc, argv, "hqer", opts, NULL)) != -1) {
        if (c == 'e')
            escaped = 1;
        else if (c == 'r')
            raw = 1;
        else if (c == 'x')
            flags |= PC_STORE_INCLUDE_EXPIRED;
        else if ((r = snap_common_opt(cx, c, optarg)) >= 0)
            return r;
    }
    if (argc - optind != 3)
        return snap_verb_help(cx, SNAP_USAGE);
    const char *name = argv[optind + 1], *karg = argv[optind + 2];
    uint8_t *key = NULL;
    size_t klen = strlen(karg);
    if (escaped) {
        if (snap_unesc(karg, klen, &key, &klen) != 0)
            return snap_fail(cx, SNAP_USAGE,
                             "--escaped: '%s' has a malformed escape (use \\\\ and \\xNN)", karg);
    } else if ((key = malloc(klen + 1)) != NULL) {
        memcpy(key, karg, klen + 1);
    }
    if (key == NULL)
        return snap_fail(cx, SNAP_IO, "out of memory");
    if (klen > PC_KEY_MAX) {
        free(key);
        return snap_fail(cx, SNAP_USAGE, "the key is %zu bytes; keys are at most %u", klen,
                         PC_KEY_MAX);
    }
    pc_store *s = NULL;
    pc_store_coll_meta m;
    void *val = NULL;
    size_t vlen = 0;
    pc_store_record rec;
    if ((r = snap_open(cx, argv[optind], &s)) != 0 || (r = snap_coll_meta(cx, s, name, &m)) != 0)
        goto out;
    int rc = pc_store_get(s, name, key, klen, flags, &val, &vlen, &rec);
    if (rc == PC_ENOTFOUND) {
        r = snap_fail(cx, SNAP_NOKEY, "collection %s (generation %llu) has no key '%s'%s", name,
                      (unsigned long long)m.generation, karg,
                      flags ? "" : " (or it has expired: --expired shows it)");
        goto out;
    }
    if (rc == PC_ECORRUPT) {
        r = snap_fail(cx, SNAP_CORRUPT,
                      "collection %s: the block that holds key '%s' is corrupt (details above)",
                      name, karg);
        goto out;
    }
    if (rc != 0) {
        r = snap_fail(cx, snap_exit_of(rc), "collection %s: %s", name, pc_store_strerror(rc));
        goto out;
    }
    if (raw && !rec.is_counter) {
        fwrite(val, 1, vlen, cx->out);
    } else if (raw) { /* a counter's raw form is its decimal value */
        int64_t num = 0;
        for (int i = 7; i >= 0; i--)
            num = (int64_t)((uint64_t)num << 8 | ((const uint8_t *)val)[i]);
        fprintf(cx->out, "%lld\n", (long long)num);
    } else
        snap_get_print(cx, name, key, klen, val, vlen, &rec);
    r = snap_finish(cx, SNAP_OK);
out:
    free(val);
    free(key);
    pc_store_close(s);
    return r;
}
