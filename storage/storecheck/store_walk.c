/*
 * store_walk.c - a structural walk of an LMDB data file (data.mdb) that
 * trusts none of its bytes. LMDB checksums nothing and follows every page
 * number it reads, so a flipped byte in a branch page, a leaf, the free list
 * or a meta page makes it read outside its map (SIGSEGV, SIGBUS) or, worse,
 * hand live pages to the next write as free. This walk is the check that
 * runs before anything else reads or writes a store (store_check.c): it
 * reads the file through a read-only map, bounds-checks every offset
 * against the page it lies in and every page number against the file, and
 * reports what is wrong instead of following it. It never writes.
 *
 * What it checks, from the layout of LMDB 0.9 (data version 1, 64-bit),
 * described in docs/snapshot-format.md §12:
 *   - both meta pages: header, magic, data version, page size, last page,
 *     the roots of the free and main databases, the last page inside the
 *     file (a shorter file is truncated);
 *   - of the meta LMDB reads (the newest valid one, or the one of a pinned
 *     read transaction), every page of every tree: the free database, the
 *     main database and every named database it lists: page number in
 *     range and equal to the one in the page's header, page kind where it
 *     is met (branch above, leaf at the tree's depth), node offsets and
 *     sizes inside the page, keys in order inside a page and inside the
 *     range its parent gives it, overflow pages in range and of the size
 *     their node needs, the page, leaf and overflow counts and the entry
 *     count each database records;
 *   - every page reached once only, and every page the free list names in
 *     range, named once, and not in use by any tree.
 *
 * It goes on past every problem (skipping what it cannot trust), so that a
 * salvage can use the same walk to reach everything still reachable.
 * pcache's databases use LMDB's default key order and no duplicate keys; a
 * database with other flags is reported, not walked.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storecheck_int.h"

/* ---- LMDB's on-disk layout (64-bit builds; offsets in bytes) ------------- */
#define LW_PGHDR 16u     /* page header: pgno u64, pad u16, flags u16, lower u16, upper u16 */
#define LW_OFF_FLAGS 10u /* u16 */
#define LW_OFF_LOWER 12u /* u16; overflow pages: u32 page count at 12 */
#define LW_OFF_UPPER 14u /* u16 */
#define LW_P_BRANCH 0x01u
#define LW_P_LEAF 0x02u
#define LW_P_OVERFLOW 0x04u
#define LW_P_META 0x08u
#define LW_P_DIRTY 0x10u /* never on disk in a committed page; tolerated */
#define LW_P_LEAF2 0x20u
#define LW_P_SUBP 0x40u
#define LW_NODEHDR 8u /* lo u16, hi u16, flags u16, ksize u16 */
#define LW_F_BIGDATA 0x01u
#define LW_F_SUBDATA 0x02u
#define LW_F_DUPDATA 0x04u
#define LW_DB_SIZE                                                                                 \
    48u /* MDB_db: pad u32, flags u16, depth u16, branch, leaf, overflow,                          \
         * entries, root (u64 each) */
#define LW_META_MAGIC 0xBEEFC0DEu
#define LW_META_VERSION 1u
/* MDB_meta after the page header: magic u32, version u32, address u64,
 * mapsize u64, dbs[2] (free, main), last_pg u64, txnid u64 */
#define LW_M_MAGIC 16u
#define LW_M_VERSION 20u
#define LW_M_MAPSIZE 32u
#define LW_M_FREEDB 40u
#define LW_M_MAINDB 88u
#define LW_M_LASTPG 136u
#define LW_M_TXNID 144u
#define LW_M_END 152u
#define LW_P_INVALID (~(uint64_t)0)
#define LW_INTEGERKEY 0x08u
#define LW_DB_PERSISTENT_FLAGS                                                                     \
    0x7eu /* REVERSEKEY DUPSORT INTEGERKEY DUPFIXED INTEGERDUP                                     \
           * REVERSEDUP */
#define LW_MAX_DEPTH 32u

static uint16_t lw16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}
static uint32_t lw32(const uint8_t *p)
{
    return pc_get_le32(p);
}
static uint64_t lw64(const uint8_t *p)
{
    return pc_get_le64(p);
}

__attribute__((format(printf, 3, 4))) static void lw_problem(pc_lw *w, int kind, const char *fmt,
                                                             ...)
{
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    w->problems++;
    if (w->on_problem != NULL)
        w->on_problem(w->ctx, kind, msg);
}

static void lw_db_decode(const uint8_t *p, pc_lw_db *d)
{
    d->flags = lw16(p + 4);
    d->depth = lw16(p + 6);
    d->branch_pages = lw64(p + 8);
    d->leaf_pages = lw64(p + 16);
    d->overflow_pages = lw64(p + 24);
    d->entries = lw64(p + 32);
    d->root = lw64(p + 40);
}

/* One meta page at offset off: 0 and *m filled when it is sound in itself
 * (page header, magic, version, page size, counts); else a reason. */
static const char *lw_meta_read(const pc_lw *w, uint64_t off, unsigned want_pgno, pc_lw_meta *m)
{
    if (off + LW_M_END > w->fsize)
        return "beyond the end of the file";
    const uint8_t *p = w->map + off;
    memset(m, 0, sizeof *m);
    if (lw64(p) != want_pgno)
        return "its page header names another page";
    if ((lw16(p + LW_OFF_FLAGS) & ~LW_P_DIRTY) != LW_P_META)
        return "not marked as a meta page";
    if (lw32(p + LW_M_MAGIC) != LW_META_MAGIC)
        return "bad magic (not an LMDB meta page)";
    m->version = lw32(p + LW_M_VERSION);
    if (m->version != LW_META_VERSION)
        return m->version > LW_META_VERSION ? "newer LMDB data format version"
                                            : "unknown LMDB data format version";
    m->psize = lw32(p + LW_M_FREEDB); /* MDB_meta keeps the page size in the free db's pad */
    if (m->psize < 512 || m->psize > 65536 || (m->psize & (m->psize - 1)) != 0)
        return "impossible page size";
    m->mapsize = lw64(p + LW_M_MAPSIZE);
    lw_db_decode(p + LW_M_FREEDB, &m->db[0]);
    lw_db_decode(p + LW_M_MAINDB, &m->db[1]);
    m->db[0].flags &= LW_DB_PERSISTENT_FLAGS; /* the free db's flags word holds env flags too */
    m->last_pg = lw64(p + LW_M_LASTPG);
    m->txnid = lw64(p + LW_M_TXNID);
    if (m->last_pg < 1 || m->last_pg > (UINT64_MAX / 65536u) - 1)
        return "impossible last page number";
    for (int i = 0; i < 2; i++) {
        const pc_lw_db *d = &m->db[i];
        if (d->root == LW_P_INVALID) {
            if (d->depth != 0 || d->entries != 0)
                return "an empty database with entries";
        } else if (d->root < 2 || d->root > m->last_pg || d->depth == 0 ||
                   d->depth > LW_MAX_DEPTH) {
            return "a database root or depth out of range";
        }
    }
    m->ok = 1;
    return NULL;
}

/* ---- key order ------------------------------------------------------------ */
static int lw_cmp(const pc_lw_tree *t, const uint8_t *a, size_t la, const uint8_t *b, size_t lb)
{
    if (t->integer && la == 8 && lb == 8) {
        uint64_t x = lw64(a), y = lw64(b);
        return x < y ? -1 : x > y;
    }
    size_t n = la < lb ? la : lb;
    int c = n ? memcmp(a, b, n) : 0;
    if (c != 0)
        return c;
    return la < lb ? -1 : la > lb;
}

/* Marks n pages from pgno as used by a tree: 0, or -1 when one is out of
 * range or was already reached (reported). */
static int lw_claim(pc_lw *w, const pc_lw_tree *t, uint64_t pgno, uint64_t n, const char *what)
{
    if (pgno < 2 || n == 0 || pgno >= w->npages || n > w->npages - pgno) {
        lw_problem(w, PC_SP_PAGE, "%s: %s page %llu (+%llu) out of range (last page %llu)", t->name,
                   what, (unsigned long long)pgno, (unsigned long long)n - 1,
                   (unsigned long long)w->npages - 1);
        return -1;
    }
    for (uint64_t i = 0; i < n; i++)
        if (w->pstate[pgno + i] != 0) {
            lw_problem(w, PC_SP_PAGE, "%s: %s page %llu is reached twice (a cycle or shared page)",
                       t->name, what, (unsigned long long)(pgno + i));
            return -1;
        }
    memset(w->pstate + pgno, PC_LW_TREE, n);
    return 0;
}

/* A node's value: inline, or on its overflow pages (checked and claimed).
 * 0 with *val / *vlen set, -1 when it cannot be trusted (reported). */
static int lw_value(pc_lw *w, pc_lw_tree *t, uint64_t pgno, const uint8_t *node, size_t room,
                    const uint8_t **val, size_t *vlen)
{
    unsigned flags = lw16(node + 4), ksize = lw16(node + 6);
    uint64_t dsize = lw16(node) | (uint64_t)lw16(node + 2) << 16;
    const uint8_t *data = node + LW_NODEHDR + ksize;
    if ((flags & LW_F_BIGDATA) == 0) {
        if (LW_NODEHDR + ksize + dsize > room) {
            lw_problem(w, PC_SP_PAGE, "%s: leaf page %llu: a value runs past its page", t->name,
                       (unsigned long long)pgno);
            return -1;
        }
        *val = data;
        *vlen = dsize;
        return 0;
    }
    if (LW_NODEHDR + ksize + 8u > room) {
        lw_problem(w, PC_SP_PAGE, "%s: leaf page %llu: an overflow reference runs past its page",
                   t->name, (unsigned long long)pgno);
        return -1;
    }
    uint64_t op = lw64(data);
    if (op < 2 || op >= w->npages) {
        lw_problem(w, PC_SP_PAGE, "%s: leaf page %llu: overflow page %llu out of range", t->name,
                   (unsigned long long)pgno, (unsigned long long)op);
        return -1;
    }
    const uint8_t *o = w->map + op * w->psize;
    uint32_t n = lw32(o + LW_OFF_LOWER);
    if (lw64(o) != op || (lw16(o + LW_OFF_FLAGS) & ~LW_P_DIRTY) != LW_P_OVERFLOW) {
        lw_problem(w, PC_SP_PAGE, "%s: overflow page %llu (from leaf %llu) has a bad header",
                   t->name, (unsigned long long)op, (unsigned long long)pgno);
        return -1;
    }
    if (n == 0 || (uint64_t)n * w->psize - LW_PGHDR < dsize ||
        (uint64_t)(n - 1) * w->psize >= dsize + LW_PGHDR) {
        lw_problem(w, PC_SP_PAGE,
                   "%s: overflow page %llu: %u pages do not fit a value of %llu bytes", t->name,
                   (unsigned long long)op, n, (unsigned long long)dsize);
        return -1;
    }
    if (lw_claim(w, t, op, n, "overflow") != 0)
        return -1;
    t->overflow_pages += n;
    w->overflow_pages += n;
    *val = o + LW_PGHDR;
    *vlen = dsize;
    return 0;
}

static void lw_tree(pc_lw *w, pc_lw_tree *t, const pc_lw_db *db);

/* Page pgno's header, claimed for tree t at depth: *p the page, *upper
 * its free-space end, *nkeys its entries, *leaf its kind. -1 (reported)
 * when the page cannot be trusted. */
static int lw_page_head(pc_lw *w, pc_lw_tree *t, uint64_t pgno, unsigned depth, const uint8_t **pp,
                        unsigned *upperp, unsigned *nkeysp, int *leafp)
{
    if (lw_claim(w, t, pgno, 1, depth == 1 ? "root" : "tree") != 0)
        return -1;
    const uint8_t *p = w->map + pgno * w->psize;
    unsigned flags = lw16(p + LW_OFF_FLAGS) & ~LW_P_DIRTY;
    unsigned lower = lw16(p + LW_OFF_LOWER), upper = lw16(p + LW_OFF_UPPER);
    if (lw64(p) != pgno) {
        lw_problem(w, PC_SP_PAGE, "%s: page %llu: its header names page %llu", t->name,
                   (unsigned long long)pgno, (unsigned long long)lw64(p));
        return -1;
    }
    int leaf = flags == LW_P_LEAF, branch = flags == LW_P_BRANCH;
    if (!leaf && !branch) {
        lw_problem(w, PC_SP_PAGE, "%s: page %llu: flags 0x%x where a %s page belongs", t->name,
                   (unsigned long long)pgno, flags, depth == t->depth ? "leaf" : "branch");
        return -1;
    }
    if (leaf != (depth == t->depth)) {
        lw_problem(w, PC_SP_PAGE, "%s: page %llu: a %s page at depth %u of a tree of depth %u",
                   t->name, (unsigned long long)pgno, leaf ? "leaf" : "branch", depth, t->depth);
        return -1;
    }
    if (lower < LW_PGHDR || upper > w->psize || lower > upper || ((lower - LW_PGHDR) & 1u) != 0) {
        lw_problem(w, PC_SP_PAGE, "%s: page %llu: free-space bounds %u..%u impossible", t->name,
                   (unsigned long long)pgno, lower, upper);
        return -1;
    }
    unsigned nkeys = (lower - LW_PGHDR) / 2;
    if (nkeys == 0) {
        lw_problem(w, PC_SP_PAGE, "%s: page %llu: no entries", t->name, (unsigned long long)pgno);
        return -1;
    }
    *pp = p;
    *upperp = upper;
    *nkeysp = nkeys;
    *leafp = leaf;
    return 0;
}

/* A free-database entry (txnid -> IDL: a count, then that many page
 * numbers), kept for the free-list check of pc_lw_run. */
static void lw_free_entry(pc_lw *w, uint64_t pgno, unsigned i, const uint8_t *key,
                          const uint8_t *val, size_t vlen)
{
    if (vlen < 8 || vlen % 8 != 0 || lw64(val) != vlen / 8 - 1) {
        lw_problem(w, PC_SP_PAGE,
                   "free list: page %llu: entry %u: a page list of %zu "
                   "bytes does not match its count",
                   (unsigned long long)pgno, i, vlen);
        return;
    }
    if (lw64(key) > w->meta.txnid) {
        lw_problem(w, PC_SP_PAGE,
                   "free list: page %llu: pages freed by transaction %llu, "
                   "after the last one (%llu)",
                   (unsigned long long)pgno, (unsigned long long)lw64(key),
                   (unsigned long long)w->meta.txnid);
        return;
    }
    if (w->nfree_lists == w->free_cap) {
        size_t cap = w->free_cap ? w->free_cap * 2 : 64;
        struct pc_lw_idl *nl = realloc(w->free_lists, cap * sizeof *nl);
        if (nl == NULL) {
            lw_problem(w, PC_SP_PAGE, "free list: out of memory: not all checked");
            return;
        }
        w->free_lists = nl;
        w->free_cap = cap;
    }
    w->free_lists[w->nfree_lists].ids = val + 8;
    w->free_lists[w->nfree_lists].n = vlen / 8 - 1;
    w->nfree_lists++;
}

/* A main-database entry naming a database: its tree is walked now. */
static void lw_named_entry(pc_lw *w, uint64_t pgno, unsigned i, const uint8_t *key, unsigned ksize,
                           const uint8_t *val, size_t vlen)
{
    if (vlen != LW_DB_SIZE) {
        lw_problem(w, PC_SP_PAGE,
                   "main database: entry %u of page %llu: a named database "
                   "record of %zu bytes",
                   i, (unsigned long long)pgno, vlen);
        return;
    }
    if (w->ndbs >= PC_LW_MAX_DBS) {
        lw_problem(w, PC_SP_PAGE, "main database: more than %u named databases", PC_LW_MAX_DBS);
        return;
    }
    pc_lw_db d;
    lw_db_decode(val, &d);
    pc_lw_tree *nt = &w->dbs[w->ndbs++];
    memset(nt, 0, sizeof *nt);
    nt->kind = PC_LW_NAMED;
    size_t nl = ksize < sizeof nt->name - 1 ? ksize : sizeof nt->name - 1;
    memcpy(nt->name, key, nl);
    for (size_t c = 0; c < nl; c++)
        if (nt->name[c] < 0x20 || nt->name[c] > 0x7e)
            nt->name[c] = '?';
    nt->name[nl] = 0;
    lw_tree(w, nt, &d);
}

/* Leaf entry i of page pgno (node, room bytes to the page's end): counted,
 * its flags checked, its value handed on by the tree's kind. */
static void lw_leaf_entry(pc_lw *w, pc_lw_tree *t, uint64_t pgno, unsigned i, const uint8_t *node,
                          size_t room)
{
    unsigned nflags = lw16(node + 4), ksize = lw16(node + 6);
    const uint8_t *key = node + LW_NODEHDR;
    t->entries++;
    if (nflags & LW_F_DUPDATA) {
        lw_problem(w, PC_SP_PAGE,
                   "%s: leaf page %llu: entry %u has duplicate data (pcache "
                   "databases have none)",
                   t->name, (unsigned long long)pgno, i);
        return;
    }
    if ((nflags & ~(LW_F_BIGDATA | LW_F_SUBDATA)) != 0 ||
        ((nflags & LW_F_SUBDATA) && (t->kind != PC_LW_MAIN || (nflags & LW_F_BIGDATA)))) {
        lw_problem(w, PC_SP_PAGE, "%s: leaf page %llu: entry %u has impossible flags 0x%x", t->name,
                   (unsigned long long)pgno, i, nflags);
        return;
    }
    const uint8_t *val;
    size_t vlen;
    if (lw_value(w, t, pgno, node, room, &val, &vlen) != 0)
        return;
    if (t->kind == PC_LW_FREEDB)
        lw_free_entry(w, pgno, i, key, val, vlen);
    else if (nflags & LW_F_SUBDATA)
        lw_named_entry(w, pgno, i, key, ksize, val, vlen);
    else if (w->on_record != NULL && t->kind == PC_LW_NAMED)
        w->on_record(w->ctx, t->name, key, ksize, val, vlen);
}

/* One page of tree t at depth (1 = the root), its keys in [lo, hi)
 * (NULL = unbounded). */
static void lw_page(pc_lw *w, pc_lw_tree *t, uint64_t pgno, unsigned depth, const uint8_t *lo,
                    size_t lol, const uint8_t *hi, size_t hil)
{
    const uint8_t *p;
    unsigned upper, nkeys;
    int leaf;
    if (lw_page_head(w, t, pgno, depth, &p, &upper, &nkeys, &leaf) != 0)
        return;
    if (leaf)
        t->leaf_pages++;
    else
        t->branch_pages++;
    const uint8_t *prev = NULL;
    size_t prevl = 0;
    for (unsigned i = 0; i < nkeys; i++) {
        unsigned off = lw16(p + LW_PGHDR + 2 * i);
        if (off < upper || (off & 1u) != 0 || off + LW_NODEHDR > w->psize) {
            lw_problem(w, PC_SP_PAGE,
                       "%s: page %llu: entry %u at offset %u outside the page's "
                       "node area",
                       t->name, (unsigned long long)pgno, i, off);
            return;
        }
        const uint8_t *node = p + off;
        size_t room = w->psize - off;
        unsigned nflags = lw16(node + 4), ksize = lw16(node + 6);
        if (LW_NODEHDR + (size_t)ksize > room) {
            lw_problem(w, PC_SP_PAGE, "%s: page %llu: entry %u's key runs past the page", t->name,
                       (unsigned long long)pgno, i);
            return;
        }
        const uint8_t *key = node + LW_NODEHDR;
        /* a branch page's first key is never compared (LMDB leaves it empty) */
        int has_key = leaf || i > 0;
        if (has_key) {
            if (t->integer && ksize != 8) {
                lw_problem(w, PC_SP_PAGE, "%s: page %llu: entry %u: an integer key of %u bytes",
                           t->name, (unsigned long long)pgno, i, ksize);
                return;
            }
            if ((prev != NULL && lw_cmp(t, prev, prevl, key, ksize) >= 0) ||
                (prev == NULL && lo != NULL && lw_cmp(t, lo, lol, key, ksize) > 0) ||
                (hi != NULL && lw_cmp(t, key, ksize, hi, hil) >= 0)) {
                lw_problem(w, PC_SP_PAGE, "%s: page %llu: entry %u is out of key order", t->name,
                           (unsigned long long)pgno, i);
                return;
            }
            prev = key;
            prevl = ksize;
        }
        if (leaf) {
            lw_leaf_entry(w, t, pgno, i, node, room);
            continue;
        }
        uint64_t child = lw16(node) | (uint64_t)lw16(node + 2) << 16 | (uint64_t)nflags << 32;
        /* the child's range: from this key (the parent's bound for the
         * first) to the next entry's key (the parent's bound for the last) */
        const uint8_t *clo = i == 0 ? lo : key, *chi = hi;
        size_t clol = i == 0 ? lol : ksize, chil = hil;
        if (i + 1 < nkeys) {
            unsigned noff = lw16(p + LW_PGHDR + 2 * (i + 1));
            if (noff < upper || (noff & 1u) != 0 || noff + LW_NODEHDR > w->psize ||
                noff + LW_NODEHDR + (size_t)lw16(p + noff + 6) > w->psize) {
                lw_problem(w, PC_SP_PAGE, "%s: page %llu: entry %u outside the page", t->name,
                           (unsigned long long)pgno, i + 1);
                return;
            }
            chi = p + noff + LW_NODEHDR;
            chil = lw16(p + noff + 6);
        }
        lw_page(w, t, child, depth + 1, clo, clol, chi, chil);
    }
}

static void lw_tree(pc_lw *w, pc_lw_tree *t, const pc_lw_db *db)
{
    t->depth = db->depth;
    t->integer = (db->flags & LW_INTEGERKEY) != 0;
    unsigned other = db->flags & LW_DB_PERSISTENT_FLAGS & ~LW_INTEGERKEY;
    if (other != 0) {
        lw_problem(w, PC_SP_PAGE, "%s: database flags 0x%x (pcache databases have none)", t->name,
                   db->flags);
        return;
    }
    if (db->root == LW_P_INVALID) {
        if (db->depth != 0 || db->entries != 0 || db->branch_pages || db->leaf_pages)
            lw_problem(w, PC_SP_PAGE, "%s: an empty database that records pages or entries",
                       t->name);
        t->walked = 1;
        return;
    }
    if (db->depth == 0 || db->depth > LW_MAX_DEPTH) {
        lw_problem(w, PC_SP_PAGE, "%s: impossible depth %u", t->name, db->depth);
        return;
    }
    uint64_t before = w->problems;
    lw_page(w, t, db->root, 1, NULL, 0, NULL, 0);
    t->walked = 1;
    t->problems = w->problems - before;
    if (t->branch_pages != db->branch_pages || t->leaf_pages != db->leaf_pages ||
        t->overflow_pages != db->overflow_pages || t->entries != db->entries)
        lw_problem(w, PC_SP_PAGE,
                   "%s: the tree holds %llu branch, %llu leaf, %llu overflow pages and %llu "
                   "entries; its record says %llu, %llu, %llu, %llu",
                   t->name, (unsigned long long)t->branch_pages, (unsigned long long)t->leaf_pages,
                   (unsigned long long)t->overflow_pages, (unsigned long long)t->entries,
                   (unsigned long long)db->branch_pages, (unsigned long long)db->leaf_pages,
                   (unsigned long long)db->overflow_pages, (unsigned long long)db->entries);
    t->problems = w->problems - before;
}

/* Marks the pages of the free list's page lists; they must be in range,
 * listed once and in use by no tree. */
static void lw_free_pages(pc_lw *w)
{
    uint64_t bad = 0;
    for (unsigned l = 0; l < w->nfree_lists; l++) {
        for (uint64_t i = 0; i < w->free_lists[l].n; i++) {
            uint64_t pg = lw64(w->free_lists[l].ids + 8 * i);
            const char *why = NULL;
            if (pg < 2 || pg >= w->npages)
                why = "out of range";
            else if (w->pstate[pg] == PC_LW_TREE)
                why = "both free and in use";
            else if (w->pstate[pg] == PC_LW_FREE)
                why = "listed free twice";
            if (why != NULL) {
                if (bad++ < 8)
                    lw_problem(w, PC_SP_PAGE, "free list: page %llu is %s", (unsigned long long)pg,
                               why);
                continue;
            }
            w->pstate[pg] = PC_LW_FREE;
            w->free_pages++;
        }
    }
    if (bad > 8)
        lw_problem(w, PC_SP_PAGE, "free list: %llu bad page numbers in all",
                   (unsigned long long)bad);
}

int pc_lw_map(pc_lw *w, const char *dpath)
{
    int fd = open(dpath, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? PC_ESTORE : PC_EIO;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = PC_EIO;
        goto out;
    }
    w->fsize = (uint64_t)st.st_size;
    if (w->fsize == 0) {
        w->map = NULL;
        goto out;
    }
    void *m = mmap(NULL, (size_t)w->fsize, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        rc = PC_EIO;
        goto out;
    }
    w->map = m;
out:
    close(fd);
    return rc;
}

void pc_lw_release(pc_lw *w)
{
    if (w->map != NULL)
        munmap((void *)w->map, (size_t)w->fsize);
    w->map = NULL;
    free(w->pstate);
    w->pstate = NULL;
    free(w->free_lists);
    w->free_lists = NULL;
    w->nfree_lists = w->free_cap = 0;
}

int pc_lw_run(pc_lw *w, uint64_t want_txnid, int use_want)
{
    if (w->fsize == 0 || w->map == NULL) {
        lw_problem(w, PC_SP_FILE,
                   "data.mdb is empty (0 bytes): the store's data is gone (restore a copy, or "
                   "remove data.mdb to start a new store there)");
        return 0;
    }
    if (w->fsize < 2 * 512) {
        lw_problem(w, PC_SP_FILE, "data.mdb is %llu bytes: shorter than its two meta pages",
                   (unsigned long long)w->fsize);
        return 0;
    }
    /* meta page 0 gives the page size; when it is damaged, look for meta 1 at
     * every possible page size */
    pc_lw_meta m[2];
    memset(m, 0, sizeof m);
    const char *why0 = lw_meta_read(w, 0, 0, &m[0]), *why1 = "not found";
    if (m[0].ok) {
        why1 = lw_meta_read(w, m[0].psize, 1, &m[1]);
    } else {
        for (unsigned ps = 512; ps <= 65536 && !m[1].ok; ps *= 2)
            if (lw_meta_read(w, ps, 1, &m[1]) == NULL && m[1].psize == ps)
                why1 = NULL;
    }
    if (m[0].ok && m[1].ok && m[0].psize != m[1].psize) {
        why1 = "its page size differs from meta page 0's";
        m[1].ok = 0;
    }
    if (m[0].ok && m[1].ok && m[0].txnid == m[1].txnid && m[0].txnid != 0) {
        lw_problem(w, PC_SP_PAGE, "both meta pages name transaction %llu",
                   (unsigned long long)m[0].txnid);
    }
    for (int i = 0; i < 2; i++) {
        const char *why = i == 0 ? why0 : why1;
        if (!m[i].ok) {
            lw_problem(w, m[i].version > LW_META_VERSION ? PC_SP_NEWER : PC_SP_PAGE,
                       "LMDB meta page %d: %s", i, why);
            continue;
        }
        uint64_t end = (m[i].last_pg + 1) * m[i].psize;
        if (end > w->fsize) {
            lw_problem(w, PC_SP_FILE,
                       "data.mdb is %llu bytes but meta page %d's last page ends at %llu: the "
                       "file is truncated",
                       (unsigned long long)w->fsize, i, (unsigned long long)end);
            if (w->clamp && w->fsize / m[i].psize > 2) {
                m[i].last_pg = w->fsize / m[i].psize - 1; /* what is left, for a salvage */
                w->clamped = 1;
            } else
                m[i].ok = 0;
        }
    }
    int use = -1;
    if (use_want)
        for (int i = 0; i < 2; i++)
            if (m[i].ok && m[i].txnid == want_txnid)
                use = i;
    /* the newest sound one: asked for, or the pinned transaction's meta is
     * unusable (its problems were just reported: walking on here reports
     * each once) */
    if (use < 0 && (m[0].ok || m[1].ok))
        use = !m[0].ok ? 1 : !m[1].ok ? 0 : m[1].txnid > m[0].txnid;
    if (use < 0) {
        lw_problem(w, PC_SP_PAGE, "no usable meta page: nothing in the file can be read");
        return 0;
    }
    w->meta = m[use];
    w->meta_index = use;
    w->psize = m[use].psize;
    w->npages = m[use].last_pg + 1;
    w->pstate = calloc((size_t)w->npages, 1);
    if (w->pstate == NULL)
        return PC_EHEAP;
    w->pstate[0] = w->pstate[1] = PC_LW_TREE;
    memset(w->dbs, 0, sizeof w->dbs);
    snprintf(w->dbs[0].name, sizeof w->dbs[0].name, "free list");
    w->dbs[0].kind = PC_LW_FREEDB;
    snprintf(w->dbs[1].name, sizeof w->dbs[1].name, "main database");
    w->dbs[1].kind = PC_LW_MAIN;
    w->ndbs = 2;
    lw_tree(w, &w->dbs[1], &w->meta.db[1]);
    uint64_t before = w->problems;
    lw_tree(w, &w->dbs[0], &w->meta.db[0]);
    lw_free_pages(w);
    w->free_ok = w->problems == before && w->dbs[0].walked && !w->clamped;
    w->fallback = !use_want && (!m[0].ok || !m[1].ok);
    for (uint64_t pg = 2; pg < w->npages; pg++)
        if (w->pstate[pg] == 0)
            w->unreached_pages++;
    return 0;
}
