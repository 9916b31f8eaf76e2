/*
 * store_salvage.c - pc_store_salvage: a new store made of every block of a
 * damaged one that still verifies (docs/snapshot-format.md §13).
 *
 * All of it runs in a forked child (pc_store_isolated) that reads the
 * source through the structural walk (store_walk.c), never through LMDB:
 *   1. the walk collects every "blocks" record the trees still reach, the
 *      collection metas (their generation and times are kept) and the
 *      store header;
 *   2. when anything is damaged (the walk met a problem, a block the trees
 *      reach fails, a collection's trees hold another number of blocks
 *      than its meta says), every page is searched for block headers. A
 *      block of format version 2 names its collection and generation in
 *      its own header, so it is found wherever its bytes still are: on
 *      overflow pages below a damaged leaf or branch, before the cut of a
 *      truncated file, in a leaf whose node table is damaged, whatever the
 *      free list says. A version 1 block names neither: outside the trees
 *      it is taken only from the leaves of pages that no tree and no
 *      free-list entry reaches, and only when the free list is sound (older
 *      snapshots' blocks live on free pages and would pass every check);
 *   3. older data is left out: every block on a page a sound free list
 *      names, and per collection every version 2 block of another
 *      generation than the snapshot's (the meta's when it decodes, else the
 *      newest whose blocks the trees reach, else the newest found); a
 *      collection no meta and no tree names is a dropped one when the
 *      'meta' tree is sound or its blocks are all on free pages;
 *   4. each block left is checked as a load checks it (header, payload and
 *      raw checksums, decompression, every record, the key against the
 *      header); the blocks the trees reach win, and a block found outside
 *      them is taken only when its order-key range overlaps none already
 *      taken (another copy of it, or the copy a prune replaced);
 *   5. the new store is created and written in one transaction: the
 *      blocks, then per collection a meta re-derived from them (count,
 *      checksums, sizes), the store header's boot generation kept.
 * The child reports one pc_store_salvage_coll per collection over the pipe
 * and exits; a child that dies leaves an uncommitted (empty) new store.
 *
 * It writes the new store through the core (store_raw.h): the checked
 * open creates it, and one raw write transaction puts what was copied.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "storecheck_int.h"

/* Where a candidate block was found, the most trusted first. */
enum { PC_SV_TREE = 0, PC_SV_LEAF = 1, PC_SV_RAW = 2 };

struct pc_sv_cand {
    uint8_t key[PC_SF_BKEY_MAX]; /* its block key: from the header (version 2) or the leaf */
    size_t klen, nlen;           /* nlen 0: a version 1 block that no key names */
    const uint8_t *val;          /* the value, in the map */
    size_t vlen;
    int src;     /* PC_SV_* */
    int on_free; /* outside the trees, on a page the free list names */
    int drop;
    uint32_t version, count;
    uint64_t gen, first, last, raw_sum, raw_len, key_bytes, value_bytes;
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
    uint64_t pages_scanned, tree_bad, unnamed;
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

/* Checks a block's payload and records as a load would (its header was
 * decoded when it became a candidate); fills the candidate's sizes. */
static int pc_sv_verify(struct pc_sv *v, struct pc_sv_cand *c)
{
    pc_sf_block h;
    const uint8_t *raw;
    unsigned state;
    const char *why = "";
    if (pc_sb_unpack(v->dc, c->val, c->vlen, &h, &v->buf, &v->cap, &raw, &state, &why) != 0)
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
    c->key_bytes = kb;
    c->value_bytes = vb;
    return 0;
}

static int pc_sv_push(struct pc_sv *v, const struct pc_sv_cand *c)
{
    if (v->nc == v->cc) {
        size_t cap = v->cc ? v->cc * 2 : 256;
        struct pc_sv_cand *n = realloc(v->c, cap * sizeof *n);
        if (n == NULL) {
            v->oom = 1;
            return -1;
        }
        v->c = n;
        v->cc = cap;
    }
    v->c[v->nc++] = *c;
    return 0;
}

/* A candidate block: a value found in a tree (key: its LMDB key), a leaf
 * outside the trees or anywhere in the file (key NULL). Its header is
 * decoded here; the payload is checked once its generation is chosen. A
 * version 2 block is named by its header; a version 1 block by its key,
 * which must name its last order key. */
static void pc_sv_add(struct pc_sv *v, const uint8_t *key, size_t klen, const uint8_t *val,
                      size_t vlen, int src)
{
    struct pc_sv_cand c;
    memset(&c, 0, sizeof c);
    c.val = val;
    c.vlen = vlen;
    c.src = src;
    pc_sf_block h;
    const char *why = "";
    int hdr_ok = pc_sf_block_decode(val, vlen, &h, &why) == 0;
    size_t knl = key != NULL ? pc_sv_bkey_name(key, klen) : 0;
    if (hdr_ok && h.version >= 2) {
        c.klen = pc_sf_bkey(c.key, h.name, h.nlen, h.last);
        c.nlen = h.nlen;
        c.gen = h.generation;
    } else if (hdr_ok && knl > 0 && pc_get_be64(key + knl + 1) == h.last) {
        memcpy(c.key, key, klen);
        c.klen = klen;
        c.nlen = knl;
    } else if (hdr_ok && key == NULL) {
        c.nlen = 0; /* version 1, found by its header alone: no collection can be told */
    } else {
        if (src == PC_SV_TREE) {
            v->tree_bad++;
            pc_store_salvage_coll *k = knl > 0 ? pc_sv_coll(v, (const char *)key, knl) : NULL;
            if (k != NULL)
                k->blocks_bad++;
        }
        return;
    }
    if (src != PC_SV_TREE) {
        uint64_t pg = (uint64_t)(val - v->w.map) / v->w.psize;
        c.on_free = pg < v->w.npages && v->w.pstate[pg] == PC_LW_FREE;
    }
    c.version = h.version;
    c.count = h.count;
    c.first = h.first;
    c.last = h.last;
    c.raw_sum = h.raw_sum;
    c.raw_len = h.raw_len;
    (void)pc_sv_push(v, &c);
}

static void pc_sv_on_record(void *ctx, const char *db, const uint8_t *key, size_t klen,
                            const uint8_t *val, size_t vlen)
{
    struct pc_sv *v = ctx;
    if (strcmp(db, "blocks") == 0) {
        pc_sv_add(v, key, klen, val, vlen, PC_SV_TREE);
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
        pc_sv_add(v, key, ks, val, dsize, PC_SV_LEAF);
    }
}

/* Every block header in pages 2..npages - 1, wherever it lies: at byte 16
 * of an overflow run, inside a leaf (a small value), on a page no tree or a
 * damaged one reaches. A value is contiguous in the file in both cases, so
 * the header's payload length says where it ends. (memmem over the map:
 * the magic of a random 4-byte window is a 2^-32 event, and the header
 * checksums reject it.) */
static void pc_sv_scan_raw(struct pc_sv *v)
{
    const uint64_t ps = v->w.psize;
    const uint8_t *base = v->w.map, *end = base + v->w.npages * ps, *p = base + 2 * ps;
    for (uint64_t pg = 2; pg < v->w.npages; pg++)
        v->pages_scanned += v->w.pstate[pg] != PC_LW_TREE;
    while (p < end && (size_t)(end - p) >= PC_SF_BLOCK_HDR_V1) {
        const uint8_t *m = memmem(p, (size_t)(end - p), PC_SF_BLOCK_MAGIC, 4);
        if (m == NULL || (size_t)(end - m) < PC_SF_BLOCK_HDR_V1)
            break;
        p = m + 1;
        if (pc_get_le64(m + 56) != pc_sf_hash(m, 56))
            continue;
        uint64_t hl = pc_get_le16(m + 4) >= 2 ? PC_SF_BLOCK_HDR : PC_SF_BLOCK_HDR_V1;
        uint64_t vlen = hl + pc_get_le32(m + 16);
        if (vlen <= (uint64_t)(end - m))
            pc_sv_add(v, NULL, 0, m, (size_t)vlen, PC_SV_RAW);
    }
}

static int pc_sv_by_val(const void *a, const void *b)
{
    const struct pc_sv_cand *x = a, *y = b;
    if (x->val != y->val)
        return x->val < y->val ? -1 : 1;
    return x->src - y->src;
}

/* Block key order (collection, then last order key), the trees' copy first. */
static int pc_sv_cmp(const void *a, const void *b)
{
    const struct pc_sv_cand *x = a, *y = b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, n);
    if (c == 0)
        c = x->klen < y->klen ? -1 : x->klen > y->klen;
    if (c == 0)
        c = x->src - y->src;
    return c;
}

/* Drops the dropped: compacts v->c. */
static void pc_sv_compact(struct pc_sv *v)
{
    size_t out = 0;
    for (size_t i = 0; i < v->nc; i++)
        if (!v->c[i].drop)
            v->c[out++] = v->c[i];
    v->nc = out;
}

/* One value met several ways (a tree, a leaf scan, the header scan) is one
 * candidate, the most trusted; version 1 blocks found by their header
 * alone cannot be named and are only counted. */
static void pc_sv_dedupe(struct pc_sv *v)
{
    if (v->nc == 0)
        return;
    qsort(v->c, v->nc, sizeof *v->c, pc_sv_by_val);
    for (size_t i = 0; i < v->nc; i++) {
        if (i > 0 && v->c[i].val == v->c[i - 1].val)
            v->c[i].drop = 1;
        else if (v->c[i].nlen == 0) {
            v->c[i].drop = 1;
            v->unnamed++;
        }
    }
    pc_sv_compact(v);
}

static int pc_sv_same_coll(const struct pc_sv_cand *a, const struct pc_sv_cand *b)
{
    return a->nlen == b->nlen && memcmp(a->key, b->key, a->nlen + 1) == 0;
}

static const struct pc_sv_meta *pc_sv_meta_of(const struct pc_sv *v, const uint8_t *name,
                                              size_t nlen)
{
    for (size_t k = 0; k < v->nm; k++)
        if (strlen(v->metas[k].name) == nlen && memcmp(v->metas[k].name, name, nlen) == 0)
            return &v->metas[k];
    return NULL;
}

/* Per collection (the candidates sorted by key): the generation of the
 * snapshot to copy, and every block of older data dropped: on a page a
 * sound free list names, or of format version 2 and another generation.
 * A collection without a meta whose blocks are all outside the trees is a
 * dropped one when the 'meta' tree is sound or all its blocks are on free
 * pages; else they are all that is left of a collection whose meta is
 * lost. */
static void pc_sv_generations(struct pc_sv *v)
{
    int meta_sound = 0;
    for (unsigned d = 2; d < v->w.ndbs; d++)
        if (strcmp(v->w.dbs[d].name, "meta") == 0)
            meta_sound = v->w.dbs[d].walked && v->w.dbs[d].problems == 0;
    for (size_t i = 0, j; i < v->nc; i = j) {
        const struct pc_sv_cand *g = &v->c[i];
        uint64_t tree_max = 0, any_max = 0, in_tree = 0, live = 0;
        for (j = i; j < v->nc && pc_sv_same_coll(&v->c[j], g); j++) {
            const struct pc_sv_cand *x = &v->c[j];
            if (v->w.free_ok && x->on_free)
                continue; /* a sound free list's page: never the current data */
            live++;
            in_tree += x->src == PC_SV_TREE;
            if (x->src == PC_SV_TREE && x->gen > tree_max)
                tree_max = x->gen;
            if (x->gen > any_max)
                any_max = x->gen;
        }
        const struct pc_sv_meta *sm = pc_sv_meta_of(v, g->key, g->nlen);
        uint64_t gen = sm != NULL ? sm->m.generation : tree_max != 0 ? tree_max : any_max;
        /* a sound 'meta' tree names every collection, and a sound free list
         * every page of older data: a collection neither a meta nor a tree
         * names, whose blocks are all outside the trees, was dropped */
        int gone = sm == NULL && in_tree == 0 && (meta_sound || live == 0);
        if (gone) {
            for (size_t x = i; x < j; x++)
                v->c[x].drop = 1;
            continue;
        }
        pc_store_salvage_coll *k = pc_sv_coll(v, (const char *)g->key, g->nlen);
        if (k == NULL)
            return;
        k->generation = gen;
        for (size_t x = i; x < j; x++)
            if ((v->w.free_ok && v->c[x].on_free) || (v->c[x].version >= 2 && v->c[x].gen != gen) ||
                (sm == NULL && meta_sound && v->c[x].src != PC_SV_TREE)) {
                v->c[x].drop = 1;
                k->blocks_stale++;
            }
    }
    pc_sv_compact(v);
}

/* The payload and records of every candidate left. */
static void pc_sv_verify_all(struct pc_sv *v)
{
    for (size_t i = 0; i < v->nc; i++) {
        struct pc_sv_cand *c = &v->c[i];
        if (pc_sv_verify(v, c) == 0)
            continue;
        c->drop = 1;
        /* one found outside the trees may be a freed copy that a later
         * write overwrote in part: not counted as damage */
        pc_store_salvage_coll *k =
            c->src == PC_SV_TREE ? pc_sv_coll(v, (const char *)c->key, c->nlen) : NULL;
        if (k != NULL)
            k->blocks_bad++;
    }
    pc_sv_compact(v);
}

/* The first of kept[0..n) (sorted by key) of c's collection whose last
 * order key is >= c's first, or NULL. */
static const struct pc_sv_cand *pc_sv_lower(const struct pc_sv_cand *kept, size_t n,
                                            const struct pc_sv_cand *c)
{
    uint8_t probe[PC_SF_BKEY_MAX];
    size_t pl = pc_sf_bkey(probe, (const char *)c->key, c->nlen, c->first);
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct pc_sv_cand *t = &kept[mid];
        size_t m = t->klen < pl ? t->klen : pl;
        int r = memcmp(t->key, probe, m);
        if (r < 0 || (r == 0 && t->klen < pl))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && pc_sv_same_coll(&kept[lo], c) ? &kept[lo] : NULL;
}

/* Keeps the trees' blocks (one per key), then in key order each block
 * found outside the trees whose range overlaps none kept: the trees'
 * (a binary search) and the last one taken of its collection (taken in
 * ascending last order key, an earlier one cannot overlap when that one
 * does not). The result is sorted by key. */
static void pc_sv_select(struct pc_sv *v)
{
    if (v->nc == 0)
        return;
    qsort(v->c, v->nc, sizeof *v->c, pc_sv_cmp);
    size_t ntree = 0;
    for (size_t i = 0; i < v->nc; i++) { /* the trees' blocks to the front, in key order */
        struct pc_sv_cand t = v->c[i];
        if (t.src != PC_SV_TREE || (ntree > 0 && v->c[ntree - 1].klen == t.klen &&
                                    memcmp(v->c[ntree - 1].key, t.key, t.klen) == 0))
            continue;
        v->c[i] = v->c[ntree];
        v->c[ntree++] = t;
    }
    qsort(v->c + ntree, v->nc - ntree, sizeof *v->c, pc_sv_cmp);
    const struct pc_sv_cand *prev = NULL;
    size_t kept = ntree;
    for (size_t i = ntree; i < v->nc; i++) {
        struct pc_sv_cand *c = &v->c[i];
        if (c->src == PC_SV_TREE)
            continue; /* a second tree copy of one key */
        const struct pc_sv_cand *t = pc_sv_lower(v->c, ntree, c);
        if ((t != NULL && t->first <= c->last) ||
            (prev != NULL && pc_sv_same_coll(prev, c) && prev->last >= c->first))
            continue;
        struct pc_sv_cand x = *c;
        v->c[i] = v->c[kept];
        v->c[kept] = x;
        prev = &v->c[kept++];
    }
    v->nc = kept;
    qsort(v->c, v->nc, sizeof *v->c, pc_sv_cmp);
}

/* 1 when the trees do not hold every block the metas count: the walk met
 * damage, a block they reach failed, or a collection's count differs. */
static int pc_sv_damaged(struct pc_sv *v)
{
    if (v->w.problems > 0 || v->tree_bad > 0)
        return 1;
    for (size_t k = 0; k < v->nm; k++) {
        uint64_t n = 0;
        size_t nl = strlen(v->metas[k].name);
        for (size_t i = 0; i < v->nc; i++)
            n += v->c[i].nlen == nl && memcmp(v->c[i].key, v->metas[k].name, nl) == 0;
        if (n != v->metas[k].m.blocks)
            return 1;
    }
    return 0;
}

/* The meta of the collection whose blocks are v->c[i..*next): re-derived
 * from them, its generation, times and boot generation the source meta's
 * when that decoded, else the blocks' generation (1 for version 1 blocks),
 * now and 0. */
static int pc_sv_put_meta(struct pc_sv *v, MDB_txn *txn, MDB_dbi dbi, size_t i, size_t *next,
                          uint64_t *boot_gen)
{
    size_t nlen = v->c[i].nlen, j = i;
    const struct pc_sv_meta *sm = pc_sv_meta_of(v, v->c[i].key, nlen);
    pc_store_salvage_coll *k = pc_sv_coll(v, (const char *)v->c[i].key, nlen);
    pc_store_coll_meta m;
    pc_sf_sum sum;
    if (k == NULL || pc_sf_sum_init(&sum) != 0)
        return ENOMEM;
    if (sm != NULL) {
        m = sm->m;
    } else {
        memset(&m, 0, sizeof m);
        m.generation = k->generation != 0 ? k->generation : 1;
        m.saved_at_ms = pc_wall_ms();
    }
    memcpy(m.name, v->c[i].key, nlen);
    m.name[nlen] = 0;
    m.format_version = PC_SF_VERSION;
    m.count = m.blocks = m.raw_bytes = m.stored_bytes = m.key_bytes = m.value_bytes = 0;
    for (; j < v->nc && pc_sv_same_coll(&v->c[j], &v->c[i]); j++) {
        m.count += v->c[j].count;
        m.blocks++;
        m.raw_bytes += v->c[j].raw_len;
        m.stored_bytes += v->c[j].vlen;
        m.key_bytes += v->c[j].key_bytes;
        m.value_bytes += v->c[j].value_bytes;
        pc_sf_sum_add(&sum, v->c[j].raw_sum);
        k->blocks_orphan += v->c[j].src != PC_SV_TREE;
    }
    m.content_checksum = pc_sf_sum_final(&sum);
    k->count = m.count;
    k->blocks = m.blocks;
    if (m.boot_gen > *boot_gen)
        *boot_gen = m.boot_gen;
    *next = j;
    uint8_t kb[2 + PC_COLL_NAME_MAX], mb[PC_SF_META_SIZE];
    pc_sf_meta_encode(&m, mb);
    MDB_val mk = {pc_sf_meta_key(kb, 'c', m.name, nlen), kb}, d = {sizeof mb, mb};
    return mdb_put(txn, dbi, &mk, &d, 0);
}

static int pc_sv_write(struct pc_sv *v, char *err, size_t errlen)
{
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    sc.map_size = (size_t)v->w.fsize * 2 + (64u << 20);
    pc_store *s = NULL;
    int rc = pc_store_open_checked(v->dst, &sc, &s, err, errlen);
    if (rc != 0)
        return rc;
    MDB_txn *txn = NULL;
    MDB_dbi meta, blocks;
    if ((rc = pc_store_write_begin(s, &txn, &meta, &blocks)) != 0)
        goto out;
    int mrc = 0;
    for (size_t i = 0; i < v->nc && mrc == 0; i++) {
        MDB_val k = {v->c[i].klen, (void *)v->c[i].key}, d = {v->c[i].vlen, (void *)v->c[i].val};
        mrc = mdb_put(txn, blocks, &k, &d, 0);
    }
    /* per collection, in key order (the candidates are sorted by it) */
    uint64_t boot_gen = v->have_hdr ? v->hdr.boot_gen : 0;
    for (size_t i = 0; i < v->nc && mrc == 0;)
        mrc = pc_sv_put_meta(v, txn, meta, i, &i, &boot_gen);
    if (mrc == 0 && (v->have_hdr || boot_gen > 0)) {
        /* boot generations go on from the source's, and never behind a
         * meta's (the journal orders its records after a snapshot by them) */
        pc_sf_hdr h = v->hdr;
        if (!v->have_hdr)
            h.created_ms = pc_wall_ms();
        h.version = PC_SF_VERSION;
        h.boot_gen = boot_gen;
        uint8_t hb[PC_SF_HDR_SIZE];
        pc_sf_hdr_encode(&h, hb);
        MDB_val k = {PC_SF_HDR_KEYLEN, (void *)PC_SF_HDR_KEY}, d = {sizeof hb, hb};
        mrc = mdb_put(txn, meta, &k, &d, 0);
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
    uint64_t problems, pages_scanned, unnamed, ncolls;
    int older_meta, free_unknown;
    char err[512];
};

/* Finds the candidates (the walk, then when something is damaged every
 * page), chooses and checks them. 0 or PC_EHEAP / a walk error. */
static int pc_sv_gather(struct pc_sv *v, const char *src)
{
    int rc = v->dc == NULL ? PC_EHEAP : pc_lw_map(&v->w, src);
    if (rc == 0)
        rc = pc_lw_run(&v->w, 0, 0);
    if (rc == 0 && v->w.pstate != NULL && pc_sv_damaged(v)) {
        /* version 1 blocks outside the trees: only from pages that neither a
         * tree nor the free list reaches, and only when the free list is
         * sound - else an older snapshot's blocks would pass every check
         * and be served as current */
        if (v->w.free_ok)
            for (uint64_t pg = 2; pg < v->w.npages; pg++)
                if (v->w.pstate[pg] == 0)
                    pc_sv_scan_page(v, pg);
        pc_sv_scan_raw(v); /* version 2 blocks: anywhere, they name their generation */
    }
    /* the metas' collections are reported even when nothing of them is left */
    for (size_t i = 0; rc == 0 && i < v->nm; i++) {
        pc_store_salvage_coll *k = pc_sv_coll(v, v->metas[i].name, strlen(v->metas[i].name));
        if (k != NULL) {
            k->meta_found = 1;
            k->count_meta = v->metas[i].m.count;
            k->blocks_meta = v->metas[i].m.blocks;
        }
    }
    if (rc == 0 && v->oom)
        rc = PC_EHEAP;
    if (rc != 0)
        return rc;
    pc_sv_dedupe(v);
    if (v->nc > 0) /* qsort's base may not be NULL */
        qsort(v->c, v->nc, sizeof *v->c, pc_sv_cmp);
    pc_sv_generations(v);
    pc_sv_verify_all(v);
    pc_sv_select(v);
    return v->oom ? PC_EHEAP : 0;
}

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
    int rc = pc_sv_gather(&v, a->src);
    if (rc == 0)
        rc = pc_sv_write(&v, wire.err, sizeof wire.err);
    else if (wire.err[0] == 0)
        snprintf(wire.err, sizeof wire.err, "reading %.300s: %s", a->src, pc_store_strerror(rc));
    wire.rc = rc;
    wire.problems = v.w.problems;
    wire.pages_scanned = v.pages_scanned;
    wire.unnamed = v.unnamed;
    wire.older_meta = v.w.fallback;
    wire.free_unknown = v.w.pstate != NULL && !v.w.free_ok;
    wire.ncolls = rc == 0 ? v.ncolls : 0;
    if (pc_store_write_all(fd, &wire, sizeof wire) != 0)
        return 1;
    for (size_t i = 0; i < wire.ncolls; i++)
        if (pc_store_write_all(fd, &v.colls[i], sizeof v.colls[i]) != 0)
            return 1;
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
    int rc, fd = open(a->src, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        struct stat st;
        char msg[600];
        rc = e == ENOENT ? PC_ESTORE : PC_EIO;
        if (e == ENOENT)
            snprintf(msg, sizeof msg, "store %.300s holds no data.mdb: nothing to salvage", sd);
        else if (e == EACCES || e == EPERM) /* never "no data.mdb" for what cannot be read */
            pc_store_perm_msg(sd, stat(a->src, &st) == 0 ? "data.mdb" : NULL, msg, sizeof msg);
        else
            snprintf(msg, sizeof msg, "store %.300s: cannot read data.mdb: %s", sd, strerror(e));
        if (errbuf != NULL)
            snprintf(errbuf, errlen, "%s", msg);
        free(a);
        return rc;
    }
    close(fd);
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
    result->blocks_unnamed = wire.unnamed;
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
