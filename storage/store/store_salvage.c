/*
 * store_salvage.c - pc_store_salvage: a new store made of every block of a
 * damaged one that still verifies.
 *
 * All of it runs in a forked child (pc_store_isolated) that reads the
 * source through the structural walk (store_walk.c), never through LMDB:
 *   1. the walk collects every "blocks" record the trees still reach and
 *      the collection metas (their generation and times are kept);
 *   2. then every page that neither a tree nor the free list reaches is
 *      read as a possible leaf of the "blocks" database: below a damaged
 *      branch page the leaves are intact but unreachable. Pages the free
 *      list names are skipped: they hold blocks of older generations;
 *   3. each candidate is checked as a load checks it (header, payload and
 *      raw checksums, decompression, every record, the key against the
 *      header); the blocks the trees reach win, and a block found outside
 *      the trees is taken only when its order-key range overlaps none
 *      already taken (an overlapping one is stale);
 *   4. the new store is created and written in one transaction: the
 *      blocks, then per collection a meta re-derived from them (count,
 *      checksums, sizes), the store header's boot generation kept.
 * The child reports one pc_store_salvage_coll per collection over the pipe
 * and exits; a child that dies leaves an uncommitted (empty) new store.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "store_int.h"

struct pc_sv_cand {
    const uint8_t *key, *val;
    size_t klen, vlen;
    int orphan;
    uint64_t first, last;
    uint32_t count;
    uint64_t raw_sum, raw_len, key_bytes, value_bytes;
};

struct pc_sv_meta {
    char name[PC_COLL_NAME_MAX + 1];
    pc_store_coll_meta m;
};

struct pc_sv {
    pc_lw w;
    const char *dst;
    struct pc_sv_cand *c;
    size_t nc, cc;
    struct pc_sv_meta *metas;
    size_t nm, cm;
    int have_hdr;
    pc_sf_hdr hdr;
    pc_store_salvage_coll *colls;
    size_t ncolls, ccolls;
    uint64_t pages_scanned;
    ZSTD_DCtx *dc;
    uint8_t *buf;
    size_t cap;
    int oom;
};

static pc_store_salvage_coll *pc_sv_coll(struct pc_sv *v, const char *name, size_t nlen)
{
    for (size_t i = 0; i < v->ncolls; i++)
        if (strlen(v->colls[i].name) == nlen && memcmp(v->colls[i].name, name, nlen) == 0)
            return &v->colls[i];
    if (v->ncolls == v->ccolls) {
        size_t cap = v->ccolls ? v->ccolls * 2 : 16;
        pc_store_salvage_coll *n = realloc(v->colls, cap * sizeof *n);
        if (n == NULL) {
            v->oom = 1;
            return NULL;
        }
        v->colls = n;
        v->ccolls = cap;
    }
    pc_store_salvage_coll *k = &v->colls[v->ncolls++];
    memset(k, 0, sizeof *k);
    memcpy(k->name, name, nlen);
    return k;
}

/* The collection name of a block key, or 0 when the key is not one. */
static size_t pc_sv_bkey_name(const uint8_t *key, size_t klen)
{
    const uint8_t *z = memchr(key, 0, klen);
    if (z == NULL)
        return 0;
    size_t nlen = (size_t)(z - key);
    if (nlen == 0 || nlen > PC_COLL_NAME_MAX || klen != nlen + 9)
        return 0;
    for (size_t i = 0; i < nlen; i++) {
        unsigned ch = key[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == '-'))
            return 0;
    }
    return nlen;
}

/* Checks a block as a load would; fills the candidate's summary. */
static int pc_sv_verify(struct pc_sv *v, struct pc_sv_cand *c, size_t nlen)
{
    pc_sf_block h;
    const uint8_t *raw;
    unsigned state;
    const char *why = "";
    if (pc_sb_unpack(v->dc, c->val, c->vlen, &h, &v->buf, &v->cap, &raw, &state, &why) != 0)
        return -1;
    if (h.last != pc_get_be64(c->key + nlen + 1))
        return -1;
    size_t off = 0, used;
    uint64_t kb = 0, vb = 0;
    for (uint32_t i = 0; i < h.count; i++) {
        pc_sf_rec r;
        int key_ok;
        if (off >= h.raw_len ||
            pc_sf_rec_decode(raw + off, h.raw_len - off, &used, &r, &key_ok, &why) != 0)
            return -1;
        off += used;
        kb += r.klen;
        vb += r.vlen;
    }
    if (off != h.raw_len)
        return -1;
    c->first = h.first;
    c->last = h.last;
    c->count = h.count;
    c->raw_sum = h.raw_sum;
    c->raw_len = h.raw_len;
    c->key_bytes = kb;
    c->value_bytes = vb;
    return 0;
}

static void pc_sv_add(struct pc_sv *v, const uint8_t *key, size_t klen, const uint8_t *val,
                      size_t vlen, int orphan)
{
    size_t nlen = pc_sv_bkey_name(key, klen);
    if (nlen == 0)
        return;
    struct pc_sv_cand c = {.key = key, .klen = klen, .val = val, .vlen = vlen, .orphan = orphan};
    pc_store_salvage_coll *k = pc_sv_coll(v, (const char *)key, nlen);
    if (k == NULL)
        return;
    if (pc_sv_verify(v, &c, nlen) != 0) {
        if (!orphan)
            k->blocks_bad++;
        return;
    }
    if (v->nc == v->cc) {
        size_t cap = v->cc ? v->cc * 2 : 256;
        struct pc_sv_cand *n = realloc(v->c, cap * sizeof *n);
        if (n == NULL) {
            v->oom = 1;
            return;
        }
        v->c = n;
        v->cc = cap;
    }
    v->c[v->nc++] = c;
}

static void pc_sv_on_record(void *ctx, const char *db, const uint8_t *key, size_t klen,
                            const uint8_t *val, size_t vlen)
{
    struct pc_sv *v = ctx;
    if (strcmp(db, "blocks") == 0) {
        pc_sv_add(v, key, klen, val, vlen, 0);
        return;
    }
    if (strcmp(db, "meta") != 0)
        return;
    const char *why;
    if (klen == PC_SF_HDR_KEYLEN && memcmp(key, PC_SF_HDR_KEY, klen) == 0) {
        v->have_hdr = pc_sf_hdr_decode(val, vlen, &v->hdr, &why) == 0;
        return;
    }
    if (klen < 3 || klen - 2 > PC_COLL_NAME_MAX || key[0] != 'c' || key[1] != ':')
        return;
    pc_store_coll_meta m;
    memset(&m, 0, sizeof m);
    if (pc_sf_meta_decode(val, vlen, &m, &why) != 0)
        return;
    if (v->nm == v->cm) {
        size_t cap = v->cm ? v->cm * 2 : 16;
        struct pc_sv_meta *n = realloc(v->metas, cap * sizeof *n);
        if (n == NULL) {
            v->oom = 1;
            return;
        }
        v->metas = n;
        v->cm = cap;
    }
    struct pc_sv_meta *sm = &v->metas[v->nm++];
    memset(sm, 0, sizeof *sm);
    memcpy(sm->name, key + 2, klen - 2);
    sm->m = m;
}

static void pc_sv_on_problem(void *ctx, int kind, const char *msg)
{
    (void)ctx;
    (void)kind;
    (void)msg; /* counted by the walk; verify names them */
}

/* LMDB leaf layout, as in store_walk.c: a page read as a leaf of the
 * "blocks" database, tolerating anything (each candidate is verified). */
static void pc_sv_scan_page(struct pc_sv *v, uint64_t pg)
{
    const unsigned ps = v->w.psize;
    const uint8_t *p = v->w.map + pg * ps;
    if (pc_get_le64(p) != pg || ((p[10] | p[11] << 8) & ~0x10) != 0x02)
        return;
    unsigned lower = p[12] | p[13] << 8, upper = p[14] | p[15] << 8;
    if (lower < 16 || lower > upper || upper > ps)
        return;
    v->pages_scanned++;
    for (unsigned i = 0; i < (lower - 16) / 2; i++) {
        unsigned off = p[16 + 2 * i] | p[17 + 2 * i] << 8;
        if (off < upper || off + 8 > ps)
            continue;
        const uint8_t *n = p + off;
        size_t dsize = (size_t)(n[0] | n[1] << 8) | (size_t)(n[2] | n[3] << 8) << 16;
        unsigned fl = n[4] | n[5] << 8, ks = n[6] | n[7] << 8;
        if (off + 8u + ks > ps)
            continue;
        const uint8_t *key = n + 8, *val;
        if (fl == 0) {
            if (off + 8u + ks + dsize > ps)
                continue;
            val = key + ks;
        } else if (fl == 0x01) { /* F_BIGDATA */
            if (off + 8u + ks + 8u > ps)
                continue;
            uint64_t op = pc_get_le64(key + ks);
            if (op < 2 || op >= v->w.npages || v->w.pstate[op] == PC_LW_FREE)
                continue;
            const uint8_t *o = v->w.map + op * ps;
            uint64_t np = pc_get_le32(o + 12);
            if (pc_get_le64(o) != op || ((o[10] | o[11] << 8) & ~0x10) != 0x04 || np == 0 ||
                np > v->w.npages - op || np * ps - 16 < dsize)
                continue;
            val = o + 16;
        } else {
            continue;
        }
        pc_sv_add(v, key, ks, val, dsize, 1);
    }
}

static int pc_sv_cmp(const void *a, const void *b)
{
    const struct pc_sv_cand *x = a, *y = b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, n);
    if (c == 0)
        c = x->klen < y->klen ? -1 : x->klen > y->klen;
    if (c == 0)
        c = x->orphan - y->orphan; /* the trees' copy first */
    return c;
}

/* 1 when c's collection already has a kept block whose [first, last]
 * range meets c's (kept: v->c[0..nkept)). */
static int pc_sv_overlaps(const struct pc_sv *v, size_t nkept, const struct pc_sv_cand *c)
{
    size_t nlen = pc_sv_bkey_name(c->key, c->klen);
    for (size_t j = 0; j < nkept; j++) {
        const struct pc_sv_cand *t = &v->c[j];
        if (t->klen == c->klen && memcmp(t->key, c->key, nlen + 1) == 0 && t->first <= c->last &&
            c->first <= t->last)
            return 1;
    }
    return 0;
}

/* Keeps the trees' blocks (one per key), then each block found outside
 * the trees whose range overlaps nothing kept so far; the result is sorted
 * by key again. */
static void pc_sv_select(struct pc_sv *v)
{
    if (v->nc == 0)
        return;
    qsort(v->c, v->nc, sizeof *v->c, pc_sv_cmp);
    size_t out = 0;
    for (size_t i = 0; i < v->nc; i++) { /* the trees' blocks first, deduplicated */
        if (v->c[i].orphan)
            continue;
        if (out > 0 && v->c[out - 1].klen == v->c[i].klen &&
            memcmp(v->c[out - 1].key, v->c[i].key, v->c[i].klen) == 0)
            continue;
        struct pc_sv_cand t = v->c[i];
        v->c[i] = v->c[out];
        v->c[out++] = t;
    }
    /* the orphans are now somewhere in [out, nc): sort them, then take */
    qsort(v->c + out, v->nc - out, sizeof *v->c, pc_sv_cmp);
    size_t kept = out;
    for (size_t i = out; i < v->nc; i++) {
        if (!v->c[i].orphan || pc_sv_overlaps(v, kept, &v->c[i]))
            continue;
        struct pc_sv_cand t = v->c[i];
        v->c[i] = v->c[kept];
        v->c[kept++] = t;
    }
    v->nc = kept;
    qsort(v->c, v->nc, sizeof *v->c, pc_sv_cmp);
}

static int pc_sv_write(struct pc_sv *v, char *err, size_t errlen)
{
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    sc.map_size = (size_t)v->w.fsize * 2 + (64u << 20);
    pc_store *s = NULL;
    int rc = pc_store_open(v->dst, &sc, &s, err, errlen);
    if (rc != 0)
        return rc;
    MDB_txn *txn = NULL;
    if ((rc = pc_store_txn_begin(s, 0, &txn)) != 0)
        goto out;
    int mrc = 0;
    for (size_t i = 0; i < v->nc && mrc == 0; i++) {
        MDB_val k = {v->c[i].klen, (void *)v->c[i].key}, d = {v->c[i].vlen, (void *)v->c[i].val};
        mrc = mdb_put(txn, s->blocks, &k, &d, 0);
    }
    /* per collection, in key order (the candidates are sorted by it) */
    for (size_t i = 0; i < v->nc && mrc == 0;) {
        size_t nlen = pc_sv_bkey_name(v->c[i].key, v->c[i].klen), j = i;
        pc_store_coll_meta m;
        memset(&m, 0, sizeof m);
        memcpy(m.name, v->c[i].key, nlen);
        for (size_t k = 0; k < v->nm; k++)
            if (strcmp(v->metas[k].name, m.name) == 0) {
                m = v->metas[k].m;
                memcpy(m.name, v->c[i].key, nlen);
                m.name[nlen] = 0;
            }
        pc_store_salvage_coll *sc2 = pc_sv_coll(v, m.name, nlen);
        pc_sf_sum sum;
        if (sc2 == NULL || pc_sf_sum_init(&sum) != 0) {
            mrc = ENOMEM;
            break;
        }
        m.format_version = PC_SF_VERSION;
        if (m.generation == 0)
            m.generation = 1;
        if (m.saved_at_ms == 0)
            m.saved_at_ms = pc_wall_ms();
        m.count = m.blocks = m.raw_bytes = m.stored_bytes = m.key_bytes = m.value_bytes = 0;
        for (; j < v->nc && v->c[j].klen == nlen + 9 && memcmp(v->c[j].key, m.name, nlen + 1) == 0;
             j++) {
            m.count += v->c[j].count;
            m.blocks++;
            m.raw_bytes += v->c[j].raw_len;
            m.stored_bytes += v->c[j].vlen;
            m.key_bytes += v->c[j].key_bytes;
            m.value_bytes += v->c[j].value_bytes;
            pc_sf_sum_add(&sum, v->c[j].raw_sum);
            sc2->blocks_orphan += v->c[j].orphan != 0;
        }
        m.content_checksum = pc_sf_sum_final(&sum);
        sc2->count = m.count;
        sc2->blocks = m.blocks;
        uint8_t kb[2 + PC_COLL_NAME_MAX], mb[PC_SF_META_SIZE];
        pc_sf_meta_encode(&m, mb);
        MDB_val k = {pc_sf_meta_key(kb, 'c', m.name, nlen), kb}, d = {sizeof mb, mb};
        mrc = mdb_put(txn, s->meta, &k, &d, 0);
        i = j;
    }
    if (mrc == 0 && v->have_hdr) { /* boot generations go on from the source's */
        pc_sf_hdr h = v->hdr;
        h.version = PC_SF_VERSION;
        uint8_t hb[PC_SF_HDR_SIZE];
        pc_sf_hdr_encode(&h, hb);
        MDB_val k = {PC_SF_HDR_KEYLEN, (void *)PC_SF_HDR_KEY}, d = {sizeof hb, hb};
        mrc = mdb_put(txn, s->meta, &k, &d, 0);
    }
    if (mrc == 0) {
        mrc = mdb_txn_commit(txn);
        txn = NULL;
    }
    if (mrc != 0) {
        snprintf(err, errlen, "store %s: writing the salvaged store failed: %s", v->dst,
                 mdb_strerror(mrc));
        rc = PC_EIO;
    }
out:
    if (txn != NULL)
        mdb_txn_abort(txn);
    pc_store_close(s);
    return rc;
}

struct pc_sv_args {
    char src[4200], dst[4096];
};

struct pc_sv_wire { /* the child's answer, then ncolls pc_store_salvage_coll */
    int rc;
    uint64_t problems, pages_scanned, ncolls;
    int older_meta, free_unknown;
    char err[512];
};

static int pc_sv_child(void *ctx, int fd)
{
    const struct pc_sv_args *a = ctx;
    struct pc_sv v;
    memset(&v, 0, sizeof v);
    v.dst = a->dst;
    v.w.on_record = pc_sv_on_record;
    v.w.on_problem = pc_sv_on_problem;
    v.w.ctx = &v;
    v.w.clamp = 1;
    struct pc_sv_wire wire;
    memset(&wire, 0, sizeof wire);
    v.dc = ZSTD_createDCtx();
    int rc = v.dc == NULL ? PC_EHEAP : pc_lw_map(&v.w, a->src);
    if (rc == 0)
        rc = pc_lw_run(&v.w, 0, 0);
    /* pages outside the trees hold blocks of older snapshots too, unless the
     * free list says which those are: without a sound free list, no page
     * outside the trees is trusted (an older snapshot's blocks would pass
     * every check and be served as current) */
    if (rc == 0 && v.w.pstate != NULL && v.w.free_ok)
        for (uint64_t pg = 2; pg < v.w.npages; pg++)
            if (v.w.pstate[pg] == 0)
                pc_sv_scan_page(&v, pg);
    /* the metas' collections are reported even when nothing of them is left */
    for (size_t i = 0; rc == 0 && i < v.nm; i++) {
        pc_store_salvage_coll *k = pc_sv_coll(&v, v.metas[i].name, strlen(v.metas[i].name));
        if (k != NULL) {
            k->meta_found = 1;
            k->count_meta = v.metas[i].m.count;
            k->blocks_meta = v.metas[i].m.blocks;
        }
    }
    if (rc == 0 && v.oom)
        rc = PC_EHEAP;
    if (rc == 0) {
        pc_sv_select(&v);
        rc = pc_sv_write(&v, wire.err, sizeof wire.err);
    } else if (wire.err[0] == 0) {
        snprintf(wire.err, sizeof wire.err, "reading %.300s: %s", a->src, pc_store_strerror(rc));
    }
    wire.rc = rc;
    wire.problems = v.w.problems;
    wire.pages_scanned = v.pages_scanned;
    wire.older_meta = v.w.fallback;
    wire.free_unknown = v.w.pstate != NULL && !v.w.free_ok;
    wire.ncolls = rc == 0 ? v.ncolls : 0;
    size_t n = sizeof wire;
    const uint8_t *p = (const uint8_t *)&wire;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return 1;
        p += w;
        n -= (size_t)w;
    }
    for (size_t i = 0; i < wire.ncolls; i++) {
        p = (const uint8_t *)&v.colls[i];
        n = sizeof v.colls[i];
        while (n > 0) {
            ssize_t w = write(fd, p, n);
            if (w <= 0)
                return 1;
            p += w;
            n -= (size_t)w;
        }
    }
    return 0; /* memory and the map go with _exit */
}

static int pc_sv_dst_ok(const char *dst, char *errbuf, size_t errlen)
{
    struct stat st;
    if (stat(dst, &st) != 0)
        return errno == ENOENT ? 0 : PC_EIO;
    char p[4200];
    snprintf(p, sizeof p, "%s/data.mdb", dst);
    if (!S_ISDIR(st.st_mode) || access(p, F_OK) == 0) {
        if (errbuf != NULL)
            snprintf(errbuf, errlen,
                     "salvage target %s exists and is not an empty directory: name a new one", dst);
        return PC_EEXIST;
    }
    return 0;
}

static const char *pc_sv_dir(const char *where)
{
    return strncmp(where, "lmdb:///", 8) == 0 ? where + 7 : where;
}

int pc_store_salvage(const char *src, const char *dst, pc_store_salvage_result *result,
                     char *errbuf, size_t errlen)
{
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = 0;
    if (src == NULL || dst == NULL || result == NULL)
        return PC_EINVAL;
    memset(result, 0, sizeof *result);
    struct pc_sv_args *a = calloc(1, sizeof *a);
    if (a == NULL)
        return PC_EHEAP;
    const char *sd = pc_sv_dir(src), *dd = pc_sv_dir(dst);
    if (strlen(sd) >= 4096 || strlen(dd) >= sizeof a->dst) {
        free(a);
        return PC_EINVAL;
    }
    snprintf(a->src, sizeof a->src, "%s/data.mdb", sd);
    snprintf(a->dst, sizeof a->dst, "%s", dd);
    int rc;
    if (access(a->src, F_OK) != 0) {
        if (errbuf != NULL)
            snprintf(errbuf, errlen, "store %s holds no data.mdb: nothing to salvage", sd);
        free(a);
        return PC_ESTORE;
    }
    if ((rc = pc_sv_dst_ok(dd, errbuf, errlen)) != 0) {
        free(a);
        return rc;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    int st = 0;
    rc = pc_store_isolated(pc_sv_child, a, &buf, &len, &st);
    free(a);
    if (rc != 0)
        return rc;
    struct pc_sv_wire wire;
    if (len < sizeof wire) {
        if (errbuf != NULL)
            snprintf(errbuf, errlen,
                     "the salvage died (%s %d) before it finished: nothing was written to %s",
                     WIFSIGNALED(st) ? "signal" : "exit status",
                     WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), dd);
        free(buf);
        return PC_EIO;
    }
    memcpy(&wire, buf, sizeof wire);
    wire.err[sizeof wire.err - 1] = 0;
    if (wire.rc != 0 || len != sizeof wire + wire.ncolls * sizeof(pc_store_salvage_coll)) {
        if (errbuf != NULL)
            snprintf(errbuf, errlen, "%s", wire.err[0] ? wire.err : "the salvage failed");
        free(buf);
        return wire.rc != 0 ? wire.rc : PC_EIO;
    }
    result->problems = wire.problems;
    result->pages_scanned = wire.pages_scanned;
    result->older_meta = wire.older_meta;
    result->free_unknown = wire.free_unknown;
    result->ncolls = (size_t)wire.ncolls;
    if (wire.ncolls > 0) {
        result->colls = malloc(result->ncolls * sizeof *result->colls);
        if (result->colls == NULL) {
            free(buf);
            return PC_EHEAP;
        }
        memcpy(result->colls, buf + sizeof wire, result->ncolls * sizeof *result->colls);
        for (size_t i = 0; i < result->ncolls; i++)
            result->colls[i].name[PC_COLL_NAME_MAX] = 0;
    }
    free(buf);
    return 0;
}

void pc_store_salvage_free(pc_store_salvage_result *r)
{
    if (r == NULL)
        return;
    free(r->colls);
    r->colls = NULL;
    r->ncolls = 0;
}
