/*
 * snap_check.c - the checking verbs: verify, diff, compact.
 *
 * diff compares two collections in record order (docs/snapshot-format.md
 * §2: ascending order key, then key length, then key bytes). That order is
 * a function of the key alone, so both sides iterate in the same order and
 * a merge finds added, removed and changed keys in one pass over each. The
 * right side is held in memory as keys plus a 64-bit hash of each value
 * (about 60 bytes per record beyond the key); the left side streams.
 * Values are compared by that hash (XXH3-64, pc_hash): two different values
 * with the same hash would be reported equal, a 2^-64 chance per key.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "snap.h"

static const char *snap_kind(int kind)
{
    return pc_store_problem_kind_name(kind);
}

/* ---- verify ---------------------------------------------------------------- */
static void snap_problem(snap_ctx *cx, const pc_store_problem *p, int first)
{
    FILE *f = cx->out;
    if (cx->json) {
        fprintf(f, "%s{\"kind\":\"%s\",\"collection\":", first ? "" : ",", snap_kind(p->kind));
        snap_jstr(f, p->collection, strlen(p->collection));
        if (p->first != 0 || p->last != 0)
            fprintf(f, ",\"block_first\":\"%016llx\",\"block_last\":\"%016llx\"",
                    (unsigned long long)p->first, (unsigned long long)p->last);
        if (p->key != NULL) {
            fputc(',', f);
            snap_jbytes(f, "key", p->key, p->klen);
        }
        fprintf(f, ",\"message\":");
        snap_jstr(f, p->message, strlen(p->message));
        fputc('}', f);
        return;
    }
    fprintf(f, "%-8s collection %s", snap_kind(p->kind), p->collection);
    if (p->first != 0 || p->last != 0)
        fprintf(f, ", block %016llx..%016llx", (unsigned long long)p->first,
                (unsigned long long)p->last);
    if (p->key != NULL) {
        fprintf(f, ", key '");
        snap_esc(f, p->key, p->klen);
        fputc('\'', f);
    }
    fprintf(f, ": %s\n", p->message);
}

/* The store's LMDB structure (or its header, or a newer store) is damaged:
 * LMDB must not read it. The problems of the walk, then the verdict. */
static int snap_verify_structure(snap_ctx *cx, const char *path, const snap_check_result *cr)
{
    size_t shown = 0;
    if (cx->json) {
        fprintf(cx->out, "{\"store\":");
        snap_jstr(cx->out, path, strlen(path));
        fprintf(cx->out, ",\"clean\":false,\"structure\":\"damaged\",\"problems\":[");
    }
    for (size_t i = 0; i < cr->n; i++)
        snap_problem(cx, &cr->list[i], shown++ == 0);
    if (cx->json) {
        fprintf(cx->out, "],\"problems_listed\":%zu,\"blocks_checked\":false,\"verdict\":", shown);
        snap_jstr(cx->out, cr->msg, strlen(cr->msg));
        fprintf(cx->out, "}\n");
    } else {
        fprintf(cx->out,
                "store %s: %zu problem%s, in LMDB's structure or the store header among them: "
                "the blocks were not read (the store is refused before LMDB reads it)\n%s\n",
                path, shown, shown == 1 ? "" : "s", cr->msg);
    }
    return snap_finish(cx, SNAP_FOUND);
}

/* The verdict line of a verify that read the blocks: the check's (pcached's
 * words) when it found something (check_msg; NULL for one collection),
 * else one made of verify's own list. */
static void snap_verify_verdict(const char *path, const char *check_msg, const pc_store_problem *pr,
                                size_t np, char *msg, size_t cap)
{
    msg[0] = 0;
    if (check_msg != NULL && check_msg[0] != 0)
        snprintf(msg, cap, "%s", check_msg);
    else if (np > 0)
        (void)pc_store_verdict(path, pr, np, PC_STORE_CHECK_DEEP, msg, cap);
}

int snap_cmd_verify(snap_ctx *cx, int argc, char **argv)
{
    int r = snap_common_args(cx, argc, argv, 1, 2);
    if (r >= 0)
        return r;
    const char *path = argv[optind], *name = argc - optind == 2 ? argv[optind + 1] : NULL;
    pc_store *s = NULL;
    cx->quiet = 1; /* the problems are the report; the store's log lines would repeat them */
    /* 1. LMDB's own structure and the store's headers, walked without LMDB
     * (in a child): pcached's check, and its verdict */
    snap_check_result cr;
    if ((r = snap_check(cx, path, &cr)) != SNAP_OK)
        return r;
    if (cr.verdict == PC_ESTORE || (cr.reader == PC_EFORMAT && cr.verdict == PC_EFORMAT)) {
        r = snap_fail(cx, snap_exit_of_verdict(cr.verdict), "%s", cr.msg);
        snap_check_free(&cr);
        return r;
    }
    if (cr.reader != 0) {
        r = snap_verify_structure(cx, path, &cr);
        snap_check_free(&cr);
        return r;
    }
    /* 2. the blocks, through LMDB (the structure was just checked): what
     * the check found in blocks and metas pc_store_verify finds again */
    cx->nocheck = 1;
    r = snap_open(cx, path, &s);
    cx->nocheck = 0;
    if (r != 0) {
        snap_check_free(&cr);
        return r;
    }
    pc_store_coll_meta *list = NULL, m;
    size_t nc = 0, np = 0;
    uint64_t records = 0;
    pc_store_problem *pr = NULL;
    char verdict[1000];
    if (name != NULL) {
        if ((r = snap_coll_meta(cx, s, name, &m)) != 0 && r != SNAP_CORRUPT && r != SNAP_NEWER)
            goto out;
        nc = 1;
        records = r == 0 ? m.count : 0;
    } else {
        int rc = pc_store_list(s, &list, &nc);
        if (rc != 0) {
            r = snap_fail(cx, snap_exit_of(rc), "store %s: %s", pc_store_path(s),
                          pc_store_strerror(rc));
            goto out;
        }
        for (size_t i = 0; i < nc; i++)
            records += list[i].count;
    }
    int rc = pc_store_verify(s, name, &pr, &np);
    if (rc != 0) {
        r = snap_fail(cx, snap_exit_of(rc), "store %s: verify: %s", pc_store_path(s),
                      pc_store_strerror(rc));
        goto out;
    }
    size_t nall = np;
    /* a named collection: the verdict is that collection's alone */
    snap_verify_verdict(path, name == NULL && cr.verdict != 0 ? cr.msg : NULL, pr, np, verdict,
                        sizeof verdict);
    if (cx->json) {
        fprintf(cx->out, "{\"store\":");
        snap_jstr(cx->out, pc_store_path(s), strlen(pc_store_path(s)));
        fprintf(cx->out, ",\"clean\":%s,\"collections\":%zu,\"records\":%llu,\"problems\":[",
                nall == 0 ? "true" : "false", nc, (unsigned long long)records);
    }
    for (size_t i = 0; i < np; i++)
        snap_problem(cx, &pr[i], i == 0);
    if (cx->json) {
        fprintf(cx->out, "],\"problems_listed\":%zu,\"list_truncated\":%s,\"verdict\":", nall,
                nall >= 1000 ? "true" : "false");
        if (verdict[0])
            snap_jstr(cx->out, verdict, strlen(verdict));
        else
            fprintf(cx->out, "null");
        fprintf(cx->out, "}\n");
    } else if (nall == 0 && verdict[0] == 0) {
        fprintf(cx->out, "store %s: %zu collections, %llu records: clean\n", pc_store_path(s), nc,
                (unsigned long long)records);
    } else {
        fprintf(cx->out, "store %s: %zu problem%s%s\n%s\n", pc_store_path(s), nall,
                nall == 1 ? "" : "s", nall >= 1000 ? " (the list stops at 1000)" : "", verdict);
    }
    r = snap_finish(cx, nall == 0 && verdict[0] == 0 ? SNAP_OK : SNAP_FOUND);
out:
    snap_check_free(&cr);
    pc_store_problems_free(pr, np);
    pc_store_list_free(list);
    pc_store_close(s);
    return r;
}

/* ---- diff ------------------------------------------------------------------ */
struct snap_dk {
    uint64_t order, vhash;
    uint8_t *key;
    size_t klen;
    int64_t expires;
    int is_counter;
};

struct snap_side {
    struct snap_dk *v;
    size_t n, cap;
    int oom;
};

static int snap_collect(void *ctx, const pc_store_record *r)
{
    struct snap_side *sd = ctx;
    if (sd->n == sd->cap) {
        size_t cap = sd->cap ? sd->cap * 2 : 1024;
        struct snap_dk *nv = realloc(sd->v, cap * sizeof *nv);
        if (nv == NULL)
            return sd->oom = 1, PC_EHEAP;
        sd->v = nv;
        sd->cap = cap;
    }
    struct snap_dk *k = &sd->v[sd->n];
    if ((k->key = malloc(r->klen + 1)) == NULL)
        return sd->oom = 1, PC_EHEAP;
    memcpy(k->key, r->key, r->klen);
    k->klen = r->klen;
    k->order = r->order;
    k->vhash = pc_hash(r->val, r->vlen);
    k->expires = r->expires_ms;
    k->is_counter = r->is_counter;
    sd->n++;
    return 0;
}

static void snap_side_free(struct snap_side *sd)
{
    for (size_t i = 0; i < sd->n; i++)
        free(sd->v[i].key);
    free(sd->v);
}

struct snap_merge {
    snap_ctx *cx;
    const struct snap_side *right;
    size_t ri;
    uint64_t added, removed, changed, same, shown;
    const char *lname, *rname;
};

static int snap_cmp(uint64_t oa, const void *ka, size_t la, uint64_t ob, const void *kb, size_t lb)
{
    if (oa != ob)
        return oa < ob ? -1 : 1;
    if (la != lb)
        return la < lb ? -1 : 1;
    return la == 0 ? 0 : memcmp(ka, kb, la);
}

static void snap_diff_line(struct snap_merge *mg, const char *op, const void *key, size_t klen,
                           const char *what)
{
    FILE *f = mg->cx->out;
    if (mg->cx->json) {
        fprintf(f, "%s{\"op\":\"%s\",", mg->shown ? "," : "", op);
        snap_jbytes(f, "key", key, klen);
        if (what != NULL)
            fprintf(f, ",\"what\":\"%s\"", what);
        fputc('}', f);
    } else {
        fprintf(f, "%c ", op[0] == 'a' ? '+' : op[0] == 'r' ? '-' : '~');
        if (strcmp(mg->lname, mg->rname) == 0)
            fprintf(f, "%s: ", mg->lname);
        else
            fprintf(f, "%s/%s: ", mg->lname, mg->rname);
        snap_esc(f, key, klen);
        if (what != NULL)
            fprintf(f, " (%s)", what);
        fputc('\n', f);
    }
    mg->shown++;
}

static int snap_merge_left(void *ctx, const pc_store_record *r)
{
    struct snap_merge *mg = ctx;
    const struct snap_side *rt = mg->right;
    int c = 1;
    while (mg->ri < rt->n) {
        const struct snap_dk *k = &rt->v[mg->ri];
        c = snap_cmp(k->order, k->key, k->klen, r->order, r->key, r->klen);
        if (c >= 0)
            break;
        snap_diff_line(mg, "added", k->key, k->klen, NULL);
        mg->added++;
        mg->ri++;
    }
    if (mg->ri < rt->n && c == 0) {
        const struct snap_dk *k = &rt->v[mg->ri++];
        char what[40] = "";
        if (k->is_counter != r->is_counter)
            strcat(what, "type");
        if (k->vhash != pc_hash(r->val, r->vlen))
            strcat(what, what[0] ? ",value" : "value");
        if (k->expires != r->expires_ms)
            strcat(what, what[0] ? ",expiry" : "expiry");
        if (what[0]) {
            snap_diff_line(mg, "changed", r->key, r->klen, what);
            mg->changed++;
        } else {
            mg->same++;
        }
    } else {
        snap_diff_line(mg, "removed", r->key, r->klen, NULL);
        mg->removed++;
    }
    return ferror(mg->cx->out) ? PC_EIO : 0;
}

/* Diffs collection ln of l with rn of r; adds to *differ. Returns an exit
 * code (SNAP_OK when the comparison ran). */
static int snap_diff_pair(snap_ctx *cx, pc_store *l, const char *ln, pc_store *r, const char *rn,
                          unsigned flags, int first, int *differ)
{
    struct snap_side right = {0};
    int rc = pc_store_iterate(r, rn, flags, snap_collect, &right);
    if (rc != 0) {
        snap_side_free(&right);
        if (right.oom)
            return snap_fail(cx, SNAP_IO, "out of memory holding collection %s", rn);
        return snap_fail(cx, snap_exit_of(rc), "collection %s of %s: %s%s", rn, pc_store_path(r),
                         pc_store_strerror(rc),
                         rc == PC_ECORRUPT ? " (named above): the diff would be wrong" : "");
    }
    struct snap_merge mg = {.cx = cx, .right = &right, .lname = ln, .rname = rn};
    if (cx->json) {
        fprintf(cx->out, "%s{\"left\":", first ? "" : ",");
        snap_jstr(cx->out, ln, strlen(ln));
        fprintf(cx->out, ",\"right\":");
        snap_jstr(cx->out, rn, strlen(rn));
        fprintf(cx->out, ",\"differences\":[");
    }
    rc = pc_store_iterate(l, ln, flags, snap_merge_left, &mg);
    if (rc == 0)
        for (; mg.ri < right.n; mg.ri++, mg.added++)
            snap_diff_line(&mg, "added", right.v[mg.ri].key, right.v[mg.ri].klen, NULL);
    if (cx->json)
        fprintf(cx->out, "],\"added\":%llu,\"removed\":%llu,\"changed\":%llu,\"same\":%llu}",
                (unsigned long long)mg.added, (unsigned long long)mg.removed,
                (unsigned long long)mg.changed, (unsigned long long)mg.same);
    else
        fprintf(cx->out, "%s%s%s: %llu added, %llu removed, %llu changed, %llu the same\n", ln,
                strcmp(ln, rn) ? " vs " : "", strcmp(ln, rn) ? rn : "",
                (unsigned long long)mg.added, (unsigned long long)mg.removed,
                (unsigned long long)mg.changed, (unsigned long long)mg.same);
    snap_side_free(&right);
    if (rc != 0)
        return snap_fail(cx, snap_exit_of(rc), "collection %s of %s: %s%s", ln, pc_store_path(l),
                         pc_store_strerror(rc),
                         rc == PC_ECORRUPT ? " (named above): the diff is incomplete" : "");
    if (mg.added + mg.removed + mg.changed > 0)
        *differ = 1;
    return SNAP_OK;
}

/* Two stores, every collection: the pairs of equal names, and the names
 * found on one side only. */
static int snap_diff_all(snap_ctx *cx, pc_store *l, pc_store *r, unsigned flags, int *differ)
{
    pc_store_coll_meta *a = NULL, *b = NULL;
    size_t na = 0, nb = 0, i = 0, j = 0;
    int rc = pc_store_list(l, &a, &na), code = SNAP_OK, first = 1;
    if (rc == 0)
        rc = pc_store_list(r, &b, &nb);
    if (rc != 0) {
        code = snap_fail(cx, snap_exit_of(rc), "listing collections: %s", pc_store_strerror(rc));
        goto out;
    }
    while (code == SNAP_OK && (i < na || j < nb)) {
        int c = i == na ? 1 : j == nb ? -1 : strcmp(a[i].name, b[j].name);
        if (c == 0) {
            code = snap_diff_pair(cx, l, a[i].name, r, b[j].name, flags, first, differ);
            i++, j++;
        } else {
            const char *nm = c < 0 ? a[i].name : b[j].name;
            *differ = 1;
            if (cx->json) {
                fprintf(cx->out, "%s{\"%s\":", first ? "" : ",", c < 0 ? "left" : "right");
                snap_jstr(cx->out, nm, strlen(nm));
                fprintf(cx->out, ",\"%s\":null,\"only_in\":\"%s\"}", c < 0 ? "right" : "left",
                        c < 0 ? "left" : "right");
            } else {
                fprintf(cx->out, "%c %s: the collection is only in %s\n", c < 0 ? '-' : '+', nm,
                        c < 0 ? "the left store" : "the right store");
            }
            c < 0 ? i++ : j++;
        }
        first = 0;
    }
out:
    pc_store_list_free(a);
    pc_store_list_free(b);
    return code;
}

int snap_cmd_diff(snap_ctx *cx, int argc, char **argv)
{
    static const struct option opts[] = {SNAP_COMMON_OPTS,
                                         {"collection", required_argument, NULL, 'c'},
                                         {"expired", no_argument, NULL, 'x'},
                                         {NULL, 0, NULL, 0}};
    int c, r, differ = 0;
    const char *cn = NULL, *an = NULL, *bn = NULL;
    unsigned flags = 0;
    while ((c = getopt_long(argc, argv, "hqc:a:b:", opts, NULL)) != -1) {
        if (c == 'c')
            cn = optarg;
        else if (c == 'a')
            an = optarg;
        else if (c == 'b')
            bn = optarg;
        else if (c == 'x')
            flags |= PC_STORE_INCLUDE_EXPIRED;
        else if ((r = snap_common_opt(cx, c, optarg)) >= 0)
            return r;
    }
    int npos = argc - optind;
    if (npos < 1 || npos > 2 || (cn != NULL && (an != NULL || bn != NULL)) ||
        ((an == NULL) != (bn == NULL)) || (npos == 1 && an == NULL))
        return snap_verb_help(cx, SNAP_USAGE);
    if (cn != NULL)
        an = bn = cn;
    const char *lp = argv[optind], *rp = npos == 2 ? argv[optind + 1] : lp;
    pc_store *l = NULL, *rs = NULL;
    int shared = 0;
    pc_store_coll_meta m;
    if ((r = snap_open(cx, lp, &l)) != 0)
        return r;
    if ((r = snap_open_maybe_same(cx, rp, lp, l, &rs, &shared)) != 0)
        goto out;
    if (an != NULL &&
        ((r = snap_coll_meta(cx, l, an, &m)) != 0 || (r = snap_coll_meta(cx, rs, bn, &m)) != 0))
        goto out;
    if (cx->json) {
        fprintf(cx->out, "{\"left_store\":");
        snap_jstr(cx->out, pc_store_path(l), strlen(pc_store_path(l)));
        fprintf(cx->out, ",\"right_store\":");
        snap_jstr(cx->out, pc_store_path(rs), strlen(pc_store_path(rs)));
        fprintf(cx->out, ",\"collections\":[");
    }
    if (an != NULL)
        r = snap_diff_pair(cx, l, an, rs, bn, flags, 1, &differ);
    else
        r = snap_diff_all(cx, l, rs, flags, &differ);
    if (cx->json)
        fprintf(cx->out, "],\"identical\":%s}\n", differ || r != SNAP_OK ? "false" : "true");
    if (r == SNAP_OK)
        r = snap_finish(cx, differ ? SNAP_FOUND : SNAP_OK);
out:
    if (!shared)
        pc_store_close(rs);
    pc_store_close(l);
    return r;
}

/* ---- compact --------------------------------------------------------------- */
int snap_cmd_compact(snap_ctx *cx, int argc, char **argv)
{
    static const struct option opts[] = {
        SNAP_COMMON_OPTS, {"force", no_argument, NULL, 'f'}, {NULL, 0, NULL, 0}};
    int c, r, force = 0;
    while ((c = getopt_long(argc, argv, "hqf", opts, NULL)) != -1)
        if (c == 'f')
            force = 1;
        else if ((r = snap_common_opt(cx, c, optarg)) >= 0)
            return r;
    if (argc - optind != 1)
        return snap_verb_help(cx, SNAP_USAGE);
    const char *path = argv[optind];
    pc_store *s;
    /* refuse a store with problems: compaction copies LMDB pages and would
     * hand back the same damage under a new file's timestamp */
    if ((r = snap_open(cx, path, &s)) != 0)
        return r;
    pc_store_problem *pr = NULL;
    size_t np = 0;
    int rc = pc_store_verify(s, NULL, &pr, &np);
    pc_store_problems_free(pr, np);
    pc_store_close(s);
    if (rc != 0)
        return snap_fail(cx, snap_exit_of(rc), "store %s: verify: %s", path, pc_store_strerror(rc));
    if (np > 0 && !force)
        return snap_fail(cx, SNAP_CORRUPT,
                         "store %s has %zu problems (see: verify); compact copies them as they "
                         "are: --force to compact anyway",
                         path, np);
    pc_store_compact_result res;
    char err[1200];
    rc = pc_store_compact(path, &res, err, sizeof err);
    if (rc != 0)
        return snap_fail(cx, snap_exit_of(rc), "%s", err);
    char a[32], b[32];
    if (cx->json) {
        fprintf(cx->out, "{\"store\":");
        snap_jstr(cx->out, path, strlen(path));
        fprintf(cx->out, ",\"bytes_before\":%llu,\"bytes_after\":%llu,\"entries\":%llu}\n",
                (unsigned long long)res.bytes_before, (unsigned long long)res.bytes_after,
                (unsigned long long)res.entries);
    } else {
        fprintf(cx->out,
                "store %s compacted: data.mdb %s -> %s (%llu LMDB records copied and "
                "compared)\n",
                path, snap_size(res.bytes_before, a, sizeof a),
                snap_size(res.bytes_after, b, sizeof b), (unsigned long long)res.entries);
    }
    return snap_finish(cx, SNAP_OK);
}
