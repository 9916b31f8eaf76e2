/*
 * journal_replay.c - rebuilding a collection from its journal at startup
 * (docs/journal-format.md §7).
 *
 * replay_open maps every segment of the collection whose epoch is at least
 * the snapshot's, validates each record (torn tails are cut, corrupt
 * records named and skipped) and keeps, per key, its latest value record
 * (SET / COUNTER / DEL) and its latest EXPIRE record. Records point into
 * the mapped segments: nothing is copied. "Latest" is the (boot_gen, stamp)
 * order, the stamp compared in serial-number order; two records of one
 * segment are in file order (one process wrote them in that order).
 *
 * The snapshot load then asks the filter about each of its records: a
 * snapshot record older than the journal's value record is skipped, and the
 * filter remembers the snapshot's stamp so apply knows which of the two
 * survived. apply writes the journal's winners with the engine's ordinary
 * calls; the hook is off meanwhile, so nothing is journaled twice.
 */
#include "journal_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define PC_JNONE UINT32_MAX

struct pc_jseg_map { /* one mapped segment */
    char *name;
    const uint8_t *map; /* PROT_READ, MAP_PRIVATE; NULL when empty */
    size_t len;
    uint64_t epoch, boot_gen;
};

struct pc_jent { /* one key; empty when vrec and xrec are both NULL */
    uint64_t h;
    const uint8_t *key; /* in a mapped segment */
    uint32_t klen;
    uint32_t vseg, xseg;        /* segment of vrec / xrec */
    const uint8_t *vrec, *xrec; /* latest value record, latest EXPIRE record */
    uint32_t vstamp, xstamp, sstamp;
    uint64_t sgen; /* the snapshot record's boot generation, when snap */
    int snap;      /* the filter saw a snapshot record of this key */
};

struct pc_journal_replay {
    pc_journal *j;
    pc_coll *coll;
    unsigned flags;
    struct pc_jseg_map *segs;
    size_t nseg, segcap;
    struct pc_jent *tab; /* open addressing, linear probing; cap a power of 2 */
    size_t cap, n;
    int applied;
    pc_journal_replay_stats st;
};

/* > 0 when (ga, sa) is later than (gb, sb): boot generation first, then the
 * stamp in serial-number order (pc_mutation). */
static int pc_jcmp(uint64_t ga, uint32_t sa, uint64_t gb, uint32_t sb)
{
    if (ga != gb)
        return ga > gb ? 1 : -1;
    int32_t d = (int32_t)(sa - sb);
    return d > 0 ? 1 : d < 0 ? -1 : 0;
}

/* Whether record (seg a, stamp sa, at pa) replaces the current (b, sb, pb):
 * file order inside one segment, the (boot_gen, stamp) order across. A tie
 * goes to the newcomer: equal stamps of one key carry equal states (a write
 * that leaves the version alone, a KEEPTTL refresh, changes nothing). */
static int pc_jreplaces(const struct pc_journal_replay *rp, uint32_t a, uint32_t sa,
                        const uint8_t *pa, uint32_t b, uint32_t sb, const uint8_t *pb)
{
    if (a == b)
        return pa > pb;
    return pc_jcmp(rp->segs[a].boot_gen, sa, rp->segs[b].boot_gen, sb) >= 0;
}

/* ---- the key map ----------------------------------------------------------- */

static int pc_jmap_grow(struct pc_journal_replay *rp)
{
    size_t ncap = rp->cap ? rp->cap * 2 : 1024;
    struct pc_jent *nt = calloc(ncap, sizeof *nt);
    if (nt == NULL)
        return PC_EHEAP;
    for (size_t i = 0; i < rp->cap; i++) {
        struct pc_jent *e = &rp->tab[i];
        if (e->vrec == NULL && e->xrec == NULL)
            continue;
        size_t k = e->h & (ncap - 1);
        while (nt[k].vrec != NULL || nt[k].xrec != NULL)
            k = (k + 1) & (ncap - 1);
        nt[k] = *e;
    }
    free(rp->tab);
    rp->tab = nt;
    rp->cap = ncap;
    return 0;
}

/* The entry of key, or NULL. With insert, a fresh entry (both records NULL:
 * the caller fills one before the next lookup) when the key is new. */
static struct pc_jent *pc_jmap_find(struct pc_journal_replay *rp, const void *key, size_t klen,
                                    int insert)
{
    if (insert && (rp->n + 1) * 10 > rp->cap * 7 && pc_jmap_grow(rp) != 0)
        return NULL;
    if (rp->cap == 0)
        return NULL;
    uint64_t h = XXH3_64bits(key, klen);
    for (size_t k = h & (rp->cap - 1);; k = (k + 1) & (rp->cap - 1)) {
        struct pc_jent *e = &rp->tab[k];
        if (e->vrec == NULL && e->xrec == NULL) {
            if (!insert)
                return NULL;
            memset(e, 0, sizeof *e);
            e->h = h;
            e->key = key;
            e->klen = (uint32_t)klen;
            e->vseg = e->xseg = PC_JNONE;
            rp->n++;
            return e;
        }
        if (e->h == h && e->klen == klen && (klen == 0 || memcmp(e->key, key, klen) == 0))
            return e;
    }
}

/* ---- reading segments --------------------------------------------------------- */

struct pc_jscan_ctx {
    struct pc_journal_replay *rp;
    uint32_t seg;
    int err;
    /* the records of a transaction read so far (PC_JREC_F_GROUP), held
     * until its last one; they point into the mapped segment */
    pc_jrec *grp;
    size_t ngrp, grpcap;
    uint64_t grp_off; /* offset of its first record */
    /* bytes were skipped (a corrupt record, or a hole a machine crash left
     * between pages written back) and no whole record has followed yet:
     * a group record read now may be the tail of a transaction whose
     * first records were in those bytes, its countdown ending at 0 as a
     * whole one's does. Such a group is dropped (§7). */
    bool after_skip;
    bool grp_suspect; /* the held group began right after a skip */
};

static int pc_jrp_index(struct pc_jscan_ctx *sc, const pc_jrec *r);

/* Drops the held records of a transaction cut short: the writer died (or
 * its journal failed) before the last one, so the EXEC was never
 * acknowledged, and none of it is replayed (§7). */
static void pc_jrp_grp_drop(struct pc_jscan_ctx *sc, const char *why)
{
    if (sc->ngrp == 0)
        return;
    struct pc_journal_replay *rp = sc->rp;
    rp->st.groups_dropped++;
    rp->st.group_records_dropped += sc->ngrp;
    pc_jlog(rp->j, PC_LOG_WARN,
            "%s/%s: an incomplete transaction at offset %llu (%zu of its %llu records, %s): "
            "not replayed",
            rp->j->path, rp->segs[sc->seg].name, (unsigned long long)sc->grp_off, sc->ngrp,
            (unsigned long long)sc->ngrp + sc->grp[sc->ngrp - 1].group_left, why);
    sc->ngrp = 0;
    sc->grp_suspect = false;
}

/* A transaction's record: held until its last one, then all indexed. */
static int pc_jrp_grp_add(struct pc_jscan_ctx *sc, const pc_jrec *r, uint64_t off)
{
    if (sc->ngrp > 0 && r->group_left + 1 != sc->grp[sc->ngrp - 1].group_left)
        pc_jrp_grp_drop(sc, "another record follows"); /* r starts another one */
    if (sc->ngrp == sc->grpcap) {
        size_t cap = sc->grpcap ? 2 * sc->grpcap : 16;
        pc_jrec *g = realloc(sc->grp, cap * sizeof *g);
        if (g == NULL) {
            sc->err = PC_EHEAP;
            return PC_EHEAP;
        }
        sc->grp = g;
        sc->grpcap = cap;
    }
    if (sc->ngrp == 0) {
        sc->grp_off = off;
        sc->grp_suspect = sc->after_skip;
        sc->after_skip = false;
    }
    sc->grp[sc->ngrp++] = *r;
    if (r->group_left > 0)
        return 0;
    if (sc->grp_suspect) {
        pc_jrp_grp_drop(sc, "it follows skipped bytes, which may hold its first records");
        return 0;
    }
    size_t n = sc->ngrp;
    sc->ngrp = 0;
    for (size_t i = 0; i < n; i++)
        if (pc_jrp_index(sc, &sc->grp[i]) != 0)
            return sc->err;
    return 0;
}

static int pc_jrp_record(void *ctx, const pc_jrec *r, uint64_t off)
{
    struct pc_jscan_ctx *sc = ctx;
    if (r->flags & PC_JREC_F_GROUP)
        return pc_jrp_grp_add(sc, r, off);
    pc_jrp_grp_drop(sc, "another record follows");
    sc->after_skip = false; /* a group cannot straddle a whole record */
    return pc_jrp_index(sc, r);
}

/* Keeps r when it is the key's latest value or EXPIRE record so far. */
static int pc_jrp_index(struct pc_jscan_ctx *sc, const pc_jrec *r)
{
    struct pc_journal_replay *rp = sc->rp;
    struct pc_jent *e = pc_jmap_find(rp, r->key, r->klen, 1);
    if (e == NULL) {
        sc->err = PC_EHEAP;
        return PC_EHEAP;
    }
    rp->st.records++;
    const uint8_t *rec = (const uint8_t *)r->key - PC_JREC_HDR_SIZE;
    if (r->op == PC_MUT_EXPIRE) {
        if (e->xrec == NULL ||
            pc_jreplaces(rp, sc->seg, r->stamp, rec, e->xseg, e->xstamp, e->xrec)) {
            e->xrec = rec;
            e->xseg = sc->seg;
            e->xstamp = r->stamp;
        }
    } else if (e->vrec == NULL ||
               pc_jreplaces(rp, sc->seg, r->stamp, rec, e->vseg, e->vstamp, e->vrec)) {
        e->vrec = rec;
        e->vseg = sc->seg;
        e->vstamp = r->stamp;
    }
    return 0;
}

static void pc_jrp_bad(void *ctx, uint64_t off, uint64_t len, int torn, const pc_jrec *partial,
                       const char *why)
{
    struct pc_jscan_ctx *sc = ctx;
    struct pc_journal_replay *rp = sc->rp;
    const char *seg = rp->segs[sc->seg].name;
    if (torn) {
        rp->st.torn_tails++;
        rp->st.bytes_cut += len;
        pc_jlog(rp->j, PC_LOG_WARN, "%s/%s: torn tail at offset %llu (%llu bytes: %s), %s",
                rp->j->path, seg, (unsigned long long)off, (unsigned long long)len, why,
                (rp->flags & PC_JOURNAL_RDONLY) ? "left in place (read-only)" : "cut");
        return;
    }
    rp->st.bad_records++;
    /* a transaction is records back to back: one with bytes skipped inside
     * it, or whose start may be in them, is not whole */
    pc_jrp_grp_drop(sc, "bytes skipped inside it");
    sc->after_skip = true;
    char key[300] = "";
    if (partial != NULL && partial->key != NULL) {
        char k[280];
        pc_jkey_text(partial->key, partial->klen, k, sizeof k);
        snprintf(key, sizeof key, ", key '%s'", k);
    }
    pc_jlog(rp->j, PC_LOG_ERR, "%s/%s: corrupt record at offset %llu (%llu bytes skipped%s): %s",
            rp->j->path, seg, (unsigned long long)off, (unsigned long long)len, key, why);
}

static int pc_jname_cmp(const void *a, const void *b)
{
    const struct pc_jseg_map *x = a, *y = b;
    if (x->epoch != y->epoch)
        return x->epoch < y->epoch ? -1 : 1;
    return strcmp(x->name, y->name);
}

struct pc_jrp_lister {
    struct pc_journal_replay *rp;
    uint64_t min_epoch;
};

static int pc_jrp_add(void *ctx, const char *file, uint64_t e)
{
    struct pc_jrp_lister *l = ctx;
    struct pc_journal_replay *rp = l->rp;
    if (e < l->min_epoch)
        return 0;
    if (rp->nseg == rp->segcap) {
        size_t ncap = rp->segcap ? rp->segcap * 2 : 16;
        struct pc_jseg_map *ns = realloc(rp->segs, ncap * sizeof *ns);
        if (ns == NULL)
            return PC_EHEAP;
        rp->segs = ns;
        rp->segcap = ncap;
    }
    struct pc_jseg_map *s = &rp->segs[rp->nseg];
    memset(s, 0, sizeof *s);
    s->epoch = e;
    if ((s->name = strdup(file)) == NULL)
        return PC_EHEAP;
    rp->nseg++;
    return 0;
}

/* Lists coll's segments of epoch >= min_epoch into rp->segs (names only). */
static int pc_jrp_list(struct pc_journal_replay *rp, uint64_t min_epoch)
{
    struct pc_jrp_lister l = {.rp = rp, .min_epoch = min_epoch};
    int rc = pc_jseg_each(rp->j, pc_coll_name(rp->coll), pc_jrp_add, &l);
    if (rc == 0 && rp->nseg > 1)
        qsort(rp->segs, rp->nseg, sizeof *rp->segs, pc_jname_cmp);
    return rc;
}

/* Maps, validates and indexes segment i. Only process-level failures
 * (memory) are returned; a bad segment is logged and skipped. */
static int pc_jrp_read(struct pc_journal_replay *rp, uint32_t i)
{
    pc_journal *j = rp->j;
    struct pc_jseg_map *s = &rp->segs[i];
    bool rdonly = (rp->flags & PC_JOURNAL_RDONLY) != 0;
    int fd = openat(j->dirfd, s->name, (rdonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        pc_jlog(j, PC_LOG_ERR, "%s/%s: cannot open: %s", j->path, s->name, strerror(errno));
        rp->st.bad_segments++;
        if (fd >= 0)
            close(fd);
        return 0;
    }
    int rc = 0;
    const char *why = NULL;
    pc_jseg_hdr h;
    s->len = (size_t)sb.st_size;
    if (s->len < PC_JSEG_HDR_SIZE) {
        /* the writer died between creating the file and its header */
        pc_jlog(j, PC_LOG_WARN, "%s/%s: %zu bytes, no complete segment header: skipped", j->path,
                s->name, s->len);
        rp->st.segments++;
        goto out;
    }
    s->map = mmap(NULL, s->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (s->map == MAP_FAILED) {
        s->map = NULL;
        pc_jlog(j, PC_LOG_ERR, "%s/%s: mmap: %s", j->path, s->name, strerror(errno));
        rp->st.bad_segments++;
        goto out;
    }
    if (pc_jseg_hdr_decode(s->map, s->len, &h, &why) != 0) {
        pc_jlog(j, PC_LOG_ERR, "%s/%s: segment skipped: %s", j->path, s->name, why);
        rp->st.bad_segments++;
        pc_jbad_note(j, s->name, why);
        goto out;
    }
    if (h.epoch != s->epoch || strcmp(h.coll, pc_coll_name(rp->coll)) != 0) {
        pc_jlog(j, PC_LOG_ERR,
                "%s/%s: segment skipped: its header names collection '%s' epoch %016llx", j->path,
                s->name, h.coll, (unsigned long long)h.epoch);
        rp->st.bad_segments++;
        char why2[160];
        snprintf(why2, sizeof why2, "its header names collection '%s' epoch %016llx", h.coll,
                 (unsigned long long)h.epoch);
        pc_jbad_note(j, s->name, why2);
        goto out;
    }
    s->boot_gen = h.boot_gen;
    rp->st.segments++;
    struct pc_jscan_ctx sc = {.rp = rp, .seg = i};
    pc_jscan_ops ops = {.record = pc_jrp_record, .bad = pc_jrp_bad};
    uint64_t end = 0;
    (void)pc_jseg_scan(s->map, s->len, &ops, &sc, NULL, &end);
    if (sc.err == 0)
        pc_jrp_grp_drop(&sc, "the segment ends");
    free(sc.grp);
    if ((rc = sc.err) != 0)
        goto out;
    if (end < s->len && !rdonly) {
        /* the mapping stays valid below end: only bytes past it go away */
        if (ftruncate(fd, (off_t)end) != 0 || fsync(fd) != 0)
            pc_jlog(j, PC_LOG_ERR, "%s/%s: cutting the torn tail failed: %s", j->path, s->name,
                    strerror(errno));
    }
out:
    close(fd);
    return rc;
}

int pc_journal_replay_open(pc_journal *j, pc_coll *coll, uint64_t min_epoch, unsigned flags,
                           pc_journal_replay **out)
{
    if (j == NULL || coll == NULL || out == NULL || (flags & ~PC_JOURNAL_RDONLY) != 0)
        return PC_EINVAL;
    bool known = false;
    for (unsigned i = 0; i < j->ncoll; i++)
        known = known || j->pcs[i].coll == coll;
    if (!known)
        return PC_EINVAL;
    struct pc_journal_replay *rp = calloc(1, sizeof *rp);
    if (rp == NULL)
        return PC_EHEAP;
    rp->j = j;
    rp->coll = coll;
    rp->flags = flags;
    int rc = pc_jrp_list(rp, min_epoch);
    for (uint32_t i = 0; rc == 0 && i < rp->nseg; i++)
        rc = pc_jrp_read(rp, i);
    if (rc != 0) {
        pc_journal_replay_close(rp);
        return rc;
    }
    rp->st.keys = rp->n;
    if (rp->st.segments == 0 && pc_journal_mode(coll) == 0)
        pc_jlog(j, PC_LOG_INFO, "collection '%s': journal off", pc_coll_name(coll));
    else
        pc_jlog(j, PC_LOG_INFO,
                "collection '%s': read %llu segment(s), %llu record(s), %llu key(s); "
                "%llu corrupt record(s), %llu torn tail(s), %llu bad segment(s)",
                pc_coll_name(coll), (unsigned long long)rp->st.segments,
                (unsigned long long)rp->st.records, (unsigned long long)rp->st.keys,
                (unsigned long long)rp->st.bad_records, (unsigned long long)rp->st.torn_tails,
                (unsigned long long)rp->st.bad_segments);
    *out = rp;
    return 0;
}

void pc_journal_replay_close(pc_journal_replay *rp)
{
    if (rp == NULL)
        return;
    for (size_t i = 0; i < rp->nseg; i++) {
        if (rp->segs[i].map != NULL)
            munmap((void *)rp->segs[i].map, rp->segs[i].len);
        free(rp->segs[i].name);
    }
    free(rp->segs);
    free(rp->tab);
    free(rp);
}

/* ---- the snapshot filter and apply -------------------------------------------- */

int pc_journal_replay_filter(void *ctx, const void *key, size_t klen, uint32_t stamp,
                             uint64_t boot_gen)
{
    struct pc_journal_replay *rp = ctx;
    if (rp == NULL)
        return PC_JOURNAL_LOAD;
    struct pc_jent *e = rp->n > 0 ? pc_jmap_find(rp, key, klen, 0) : NULL;
    if (e == NULL) {
        rp->st.snap_loaded++;
        return PC_JOURNAL_LOAD;
    }
    e->snap = 1;
    e->sgen = boot_gen;
    e->sstamp = stamp;
    if (e->vrec != NULL && pc_jcmp(rp->segs[e->vseg].boot_gen, e->vstamp, boot_gen, stamp) > 0) {
        rp->st.snap_skipped++;
        return PC_JOURNAL_SKIP;
    }
    rp->st.snap_loaded++;
    if (e->xrec != NULL && pc_jcmp(rp->segs[e->xseg].boot_gen, e->xstamp, boot_gen, stamp) > 0)
        return PC_JOURNAL_LOAD_ANY;
    return PC_JOURNAL_LOAD;
}

/* Decodes a record kept by the map (it validated when read). */
static void pc_jrp_decode(const struct pc_journal_replay *rp, uint32_t seg, const uint8_t *rec,
                          pc_jrec *out)
{
    const struct pc_jseg_map *s = &rp->segs[seg];
    (void)pc_jrec_decode(rec, s->len - (size_t)(rec - s->map), out, NULL);
}

static void pc_jrp_fail(struct pc_journal_replay *rp, const struct pc_jent *e, const char *what,
                        int rc, int *first)
{
    rp->st.errors++;
    if (*first == 0)
        *first = rc;
    if (rp->st.errors <= 10) {
        char k[280];
        pc_jkey_text(e->key, e->klen, k, sizeof k);
        pc_jlog(rp->j, PC_LOG_ERR, "collection '%s': replaying %s of key '%s' failed: %s",
                pc_coll_name(rp->coll), what, k, pc_store_strerror(rc));
    }
}

/* Milliseconds left until a wall-clock deadline: 0 = never, < 0 = passed. */
static int64_t pc_jttl(int64_t wall, int64_t now)
{
    if (wall == 0)
        return 0;
    return wall > now ? wall - now : -1;
}

static void pc_jrp_apply_one(struct pc_journal_replay *rp, struct pc_jent *e, int64_t now,
                             int *first)
{
    pc_coll *coll = rp->coll;
    pc_jrec v, x;
    /* the base state: the journal's value record if it is later than the
     * snapshot's record (which the filter then skipped), else the snapshot */
    bool base_v = e->vrec != NULL && (!e->snap || pc_jcmp(rp->segs[e->vseg].boot_gen, e->vstamp,
                                                          e->sgen, e->sstamp) > 0);
    bool x_later = false;
    if (e->xrec != NULL) {
        if (base_v)
            x_later = e->xseg == e->vseg ? e->xrec > e->vrec
                                         : pc_jcmp(rp->segs[e->xseg].boot_gen, e->xstamp,
                                                   rp->segs[e->vseg].boot_gen, e->vstamp) > 0;
        else if (e->snap)
            x_later = pc_jcmp(rp->segs[e->xseg].boot_gen, e->xstamp, e->sgen, e->sstamp) > 0;
        if (x_later)
            pc_jrp_decode(rp, e->xseg, e->xrec, &x);
    }
    int rc;
    if (base_v) {
        pc_jrp_decode(rp, e->vseg, e->vrec, &v);
        if (v.op == PC_MUT_DEL) {
            rc = pc_remove(coll, v.key, v.klen);
            if (rc != 0 && rc != PC_ENOTFOUND)
                pc_jrp_fail(rp, e, "a delete", rc, first);
            rp->st.del++;
            return;
        }
        int64_t ttl = pc_jttl(x_later ? x.expires_wall_ms : v.expires_wall_ms, now);
        if (ttl < 0) {
            rp->st.expired++;
            return;
        }
        if (v.op == PC_MUT_COUNTER) {
            rc = pc_set_counter(coll, v.key, v.klen, v.counter, ttl);
            rp->st.counter++;
        } else {
            rc = pc_set(coll, v.key, v.klen, v.val, v.vlen, ttl, 0);
            rp->st.set++;
        }
        if (rc != 0)
            pc_jrp_fail(rp, e, "a set", rc, first);
        if (x_later)
            rp->st.expire++;
        return;
    }
    if (!x_later)
        return; /* the snapshot's record is the latest state: the store loaded it */
    /* the snapshot's value with the journal's later expiry (the filter told
     * the store to load the record whatever its own expiry) */
    int64_t ttl = pc_jttl(x.expires_wall_ms, now);
    if (ttl < 0) {
        rc = pc_remove(coll, x.key, x.klen);
        rp->st.expired++;
    } else {
        rc = pc_expire(coll, x.key, x.klen, ttl);
        rp->st.expire++;
    }
    if (rc != 0 && rc != PC_ENOTFOUND)
        pc_jrp_fail(rp, e, "an expire", rc, first);
}

#define PC_JRP_GROW_EVERY 4096u /* winners applied between two pc_maintain(GROW) */

int pc_journal_replay_apply(pc_journal_replay *rp)
{
    if (rp == NULL || rp->applied)
        return PC_EINVAL;
    rp->applied = 1;
    pc_journal *j = rp->j;
    bool hooked = j->installed;
    if (hooked)
        (void)pc_mutation_hook(j->c, NULL, NULL);
    int first = 0;
    int64_t now = pc_wall_ms();
    size_t since_grow = 0;
    for (size_t i = 0; i < rp->cap; i++) {
        struct pc_jent *e = &rp->tab[i];
        if (e->vrec == NULL && e->xrec == NULL)
            continue;
        pc_jrp_apply_one(rp, e, now, &first);
        /* nothing else grows the table before the host's maintenance
         * process starts: without the splits a journal of many new keys
         * piles them into the overflow chains and the apply slows down
         * with every key */
        if (++since_grow == PC_JRP_GROW_EVERY) {
            since_grow = 0;
            (void)pc_maintain(j->c, PC_MAINT_GROW, NULL);
        }
    }
    if (hooked)
        (void)pc_mutation_hook(j->c, pc_journal_hook, j);
    if (rp->st.segments > 0 || pc_journal_mode(rp->coll) != 0)
        pc_jlog(j, PC_LOG_INFO,
                "collection '%s': replayed %llu set(s), %llu counter(s), %llu delete(s), "
                "%llu expire(s); %llu expired, %llu snapshot record(s) superseded, %llu error(s)",
                pc_coll_name(rp->coll), (unsigned long long)rp->st.set,
                (unsigned long long)rp->st.counter, (unsigned long long)rp->st.del,
                (unsigned long long)rp->st.expire, (unsigned long long)rp->st.expired,
                (unsigned long long)rp->st.snap_skipped, (unsigned long long)rp->st.errors);
    return first;
}

void pc_journal_replay_stats_get(const pc_journal_replay *rp, pc_journal_replay_stats *out)
{
    if (out == NULL)
        return;
    if (rp != NULL)
        *out = rp->st;
    else
        memset(out, 0, sizeof *out);
}

int pc_journal_replay_foreach(const pc_journal_replay *rp,
                              int (*fn)(void *ctx, const pc_journal_winner *w), void *ctx)
{
    if (rp == NULL || fn == NULL)
        return PC_EINVAL;
    for (size_t i = 0; i < rp->cap; i++) {
        const struct pc_jent *e = &rp->tab[i];
        if (e->vrec == NULL && e->xrec == NULL)
            continue;
        pc_journal_winner w = {.key = e->key, .klen = e->klen};
        pc_jrec r;
        if (e->vrec != NULL) {
            pc_jrp_decode(rp, e->vseg, e->vrec, &r);
            w.op = r.op;
            w.flags = r.flags;
            w.val = r.op == PC_MUT_SET ? r.val : NULL;
            w.vlen = r.op == PC_MUT_SET ? r.vlen : 0;
            w.counter = r.counter;
            w.expires_wall_ms = r.expires_wall_ms;
            w.boot_gen = rp->segs[e->vseg].boot_gen;
            w.stamp = r.stamp;
        }
        if (e->xrec != NULL) {
            pc_jrp_decode(rp, e->xseg, e->xrec, &r);
            w.has_expire = 1;
            w.expire_wall_ms = r.expires_wall_ms;
            w.expire_boot_gen = rp->segs[e->xseg].boot_gen;
            w.expire_stamp = r.stamp;
        }
        int rc = fn(ctx, &w);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int pc_journal_replay_run(pc_journal *j, pc_coll *coll, uint64_t min_epoch,
                          pc_journal_replay_stats *st)
{
    pc_journal_replay *rp;
    int rc = pc_journal_replay_open(j, coll, min_epoch, 0, &rp);
    if (rc != 0)
        return rc;
    rc = pc_journal_replay_apply(rp);
    if (st != NULL)
        pc_journal_replay_stats_get(rp, st);
    pc_journal_replay_close(rp);
    return rc;
}
