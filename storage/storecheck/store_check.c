/*
 * store_check.c - the check a store passes before anything reads or writes
 * it through LMDB (pc_store_check, and pc_store_open_checked before it opens
 * an existing environment), and the forked child every untrusted read runs
 * in.
 *
 * The check is the structural walk of store_walk.c plus, over the records
 * it reaches, the pcache layer's own headers: the store header and every
 * collection meta decode (checksum, version), every block header decodes
 * (magic, checksum, version) and its key matches it, and per collection the
 * block headers re-derive the meta's record count, block count and content
 * checksum. With PC_STORE_CHECK_DEEP every block's payload checksum is
 * verified too (XXH3 over the stored bytes, no decompression).
 *
 * It runs in a forked child (pc_store_isolated): the walk itself is written
 * not to fault, but a file that shrinks under the map raises SIGBUS, and the
 * child is what turns any fault into a report instead of a crash of the
 * process that asked. The child pins what it walks: it opens the
 * environment read-only and holds a read transaction, so a writer in
 * another process cannot reuse the pages it walks, and it walks the meta of
 * that transaction. Where LMDB cannot even be opened (or the caller holds
 * the store's lock itself: compaction) it walks the newest sound meta
 * without LMDB.
 *
 * The child reports over a pipe: pc_store_problem records (key NULL), then
 * one record of kind 0 whose first/last fields carry the walk's page count
 * and free pages. A child that dies by a signal or without that last record
 * is itself a problem ("the check faulted").
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "storecheck_int.h"

/* ---- the forked child ----------------------------------------------------- */
int pc_store_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

int pc_store_isolated(int (*fn)(void *ctx, int fd), void *ctx, uint8_t **out, size_t *outlen,
                      int *status)
{
    int fds[2];
    *out = NULL;
    *outlen = 0;
    if (pipe(fds) != 0)
        return PC_EIO;
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return PC_EIO;
    }
    if (pid == 0) {
        close(fds[0]);
        /* default dispositions: the parent's handlers must not run here */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        int rc = fn(ctx, fds[1]);
        close(fds[1]);
        _exit(rc == 0 ? 0 : 1); /* no atexit handlers, no inherited handles closed */
    }
    close(fds[1]);
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 16384;
            uint8_t *nb = realloc(buf, nc);
            if (nb == NULL) {
                rc = PC_EHEAP;
                break;
            }
            buf = nb;
            cap = nc;
        }
        ssize_t r = read(fds[0], buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fds[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *status = st;
    *out = buf;
    *outlen = len;
    return 0;
}

/* ---- the pcache layer over the walk -------------------------------------------- */
struct pc_ck_coll {
    char name[PC_COLL_NAME_MAX + 1];
    int have_meta, meta_bad;
    pc_store_coll_meta meta;
    uint64_t count, blocks;
    pc_sf_sum sum;
    int sum_ok;
};

struct pc_ck {
    pc_lw w;
    int fd; /* the report pipe */
    unsigned flags;
    unsigned nprob;
    int write_failed;
    struct pc_ck_coll *colls;
    size_t ncolls, cap;
    int have_hdr;
    int have_meta_db, have_blocks_db;
};

#define PC_CK_MAX 1000u

static void pc_ck_add(struct pc_ck *c, int kind, const char *coll, uint64_t first, uint64_t last,
                      const char *msg)
{
    if (c->nprob >= PC_CK_MAX || c->write_failed)
        return;
    pc_store_problem p;
    memset(&p, 0, sizeof p);
    p.kind = kind;
    snprintf(p.collection, sizeof p.collection, "%s", coll != NULL ? coll : "");
    p.first = first;
    p.last = last;
    snprintf(p.message, sizeof p.message, "%s", msg);
    if (pc_store_write_all(c->fd, &p, sizeof p) != 0)
        c->write_failed = 1;
    c->nprob++;
}

static void pc_ck_on_problem(void *ctx, int kind, const char *msg)
{
    pc_ck_add(ctx, kind, NULL, 0, 0, msg);
}

__attribute__((format(printf, 6, 7))) static void pc_ck_addf(struct pc_ck *c, int kind,
                                                             const char *coll, uint64_t first,
                                                             uint64_t last, const char *fmt, ...)
{
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pc_ck_add(c, kind, coll, first, last, msg);
}

static struct pc_ck_coll *pc_ck_coll(struct pc_ck *c, const char *name, size_t nlen)
{
    for (size_t i = c->ncolls; i-- > 0;)
        if (strlen(c->colls[i].name) == nlen && memcmp(c->colls[i].name, name, nlen) == 0)
            return &c->colls[i];
    if (c->ncolls == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct pc_ck_coll *n = realloc(c->colls, cap * sizeof *n);
        if (n == NULL)
            return NULL;
        c->colls = n;
        c->cap = cap;
    }
    struct pc_ck_coll *k = &c->colls[c->ncolls++];
    memset(k, 0, sizeof *k);
    memcpy(k->name, name, nlen);
    k->sum_ok = pc_sf_sum_init(&k->sum) == 0;
    return k;
}

static void pc_ck_meta_rec(struct pc_ck *c, const uint8_t *key, size_t klen, const uint8_t *val,
                           size_t vlen)
{
    const char *why = "";
    if (klen == PC_SF_HDR_KEYLEN && memcmp(key, PC_SF_HDR_KEY, klen) == 0) {
        pc_sf_hdr h;
        memset(&h, 0, sizeof h);
        int rc = pc_sf_hdr_decode(val, vlen, &h, &why);
        c->have_hdr = 1;
        if (rc == PC_EFORMAT)
            pc_ck_addf(c, PC_SP_NEWER, NULL, 0, 0,
                       "store header: newer format version (version %u; this build reads "
                       "version %u)",
                       h.version, PC_SF_VERSION);
        else if (rc != 0)
            pc_ck_addf(c, PC_SP_META, NULL, 0, 0, "store header: %s", why);
        return;
    }
    if (klen < 3 || key[0] != 'c' || key[1] != ':')
        return; /* keys a later version may add */
    char name[PC_COLL_NAME_MAX + 1];
    size_t nlen = klen - 2;
    if (nlen > PC_COLL_NAME_MAX) {
        pc_ck_add(c, PC_SP_META, NULL, 0, 0, "a collection meta key longer than a name");
        return;
    }
    memcpy(name, key + 2, nlen);
    name[nlen] = 0;
    size_t chk;
    if (pc_sf_name_ok(name, &chk) != 0 || chk != nlen) {
        pc_ck_add(c, PC_SP_META, NULL, 0, 0, "a collection meta key that is not a name");
        return;
    }
    struct pc_ck_coll *k = pc_ck_coll(c, name, nlen);
    if (k == NULL)
        return;
    k->have_meta = 1;
    int rc = pc_sf_meta_decode(val, vlen, &k->meta, &why);
    if (rc != 0) {
        k->meta_bad = 1;
        pc_ck_addf(c, rc == PC_EFORMAT ? PC_SP_NEWER : PC_SP_META, name, 0, 0,
                   "collection meta: %s (format version %u)", why, k->meta.format_version);
    }
}

static void pc_ck_block_rec(struct pc_ck *c, const uint8_t *key, size_t klen, const uint8_t *val,
                            size_t vlen)
{
    const uint8_t *z = memchr(key, 0, klen);
    size_t nlen = z == NULL ? 0 : (size_t)(z - key);
    char name[PC_COLL_NAME_MAX + 1];
    size_t chk;
    if (z == NULL || nlen == 0 || nlen > PC_COLL_NAME_MAX || klen != nlen + 9) {
        pc_ck_add(c, PC_SP_BLOCK, NULL, 0, 0, "a block key of impossible shape");
        return;
    }
    memcpy(name, key, nlen);
    name[nlen] = 0;
    if (pc_sf_name_ok(name, &chk) != 0 || chk != nlen) {
        pc_ck_add(c, PC_SP_BLOCK, NULL, 0, 0, "a block key whose collection is not a name");
        return;
    }
    uint64_t order = pc_get_be64(key + nlen + 1);
    struct pc_ck_coll *k = pc_ck_coll(c, name, nlen);
    if (k == NULL)
        return;
    k->blocks++;
    pc_sf_block h;
    const char *why = "";
    int rc = pc_sf_block_decode(val, vlen, &h, &why);
    if (rc != 0) {
        k->sum_ok = 0;
        pc_ck_addf(c, rc == PC_EFORMAT ? PC_SP_NEWER : PC_SP_BLOCK, name, 0, order,
                   "block ..%016llx: %s", (unsigned long long)order, why);
        return;
    }
    k->count += h.count;
    pc_sf_sum_add(&k->sum, h.raw_sum);
    if (h.last != order)
        pc_ck_addf(c, PC_SP_ORDER, name, h.first, h.last,
                   "block key names order %016llx, its header %016llx", (unsigned long long)order,
                   (unsigned long long)h.last);
    if (h.version >= 2 && (h.nlen != nlen || memcmp(h.name, name, nlen) != 0))
        pc_ck_addf(c, PC_SP_BLOCK, name, h.first, h.last, "block header names collection '%s'",
                   h.name);
    if ((c->flags & PC_STORE_CHECK_DEEP) && pc_sf_hash(h.payload, h.payload_len) != h.payload_sum)
        pc_ck_addf(c, PC_SP_BLOCK, name, h.first, h.last,
                   "block %016llx..%016llx: payload checksum mismatch", (unsigned long long)h.first,
                   (unsigned long long)h.last);
}

static void pc_ck_on_record(void *ctx, const char *db, const uint8_t *key, size_t klen,
                            const uint8_t *val, size_t vlen)
{
    struct pc_ck *c = ctx;
    if (strcmp(db, "meta") == 0)
        pc_ck_meta_rec(c, key, klen, val, vlen);
    else if (strcmp(db, "blocks") == 0)
        pc_ck_block_rec(c, key, klen, val, vlen);
}

/* After the walk: the meta of each collection against its blocks. */
static void pc_ck_finish(struct pc_ck *c)
{
    int meta_db = 0, blocks_db = 0, main_ok = c->w.ndbs >= 2 && c->w.dbs[1].walked;
    for (unsigned i = 2; i < c->w.ndbs; i++) {
        meta_db |= strcmp(c->w.dbs[i].name, "meta") == 0;
        blocks_db |= strcmp(c->w.dbs[i].name, "blocks") == 0;
    }
    uint64_t entries = c->w.ndbs >= 2 ? c->w.dbs[1].entries : 0;
    /* an environment that holds data but neither of pcache's databases,
     * its structure sound, is someone else's; one of them missing (or
     * both, in a damaged structure) is a damaged store */
    if (main_ok && entries > 0 && !meta_db && !blocks_db && c->w.problems == 0)
        pc_ck_add(c, PC_SP_FOREIGN, NULL, 0, 0,
                  "an LMDB environment without pcache's 'meta' and 'blocks' databases");
    else if (main_ok && entries > 0 && (!meta_db || !blocks_db))
        pc_ck_addf(c, PC_SP_META, NULL, 0, 0, "the %s database is missing",
                   !meta_db ? "'meta'" : "'blocks'");
    if (meta_db && !c->have_hdr)
        pc_ck_add(c, PC_SP_META, NULL, 0, 0, "the store header is missing");
    for (size_t i = 0; i < c->ncolls; i++) {
        struct pc_ck_coll *k = &c->colls[i];
        uint64_t sum = k->sum_ok ? pc_sf_sum_final(&k->sum) : 0;
        k->sum.state = NULL;
        if (!k->have_meta) {
            pc_ck_addf(c, PC_SP_ORPHAN, k->name, 0, 0,
                       "%llu blocks of a collection that has no meta",
                       (unsigned long long)k->blocks);
            continue;
        }
        if (k->meta_bad)
            continue;
        if (k->count != k->meta.count || k->blocks != k->meta.blocks)
            pc_ck_addf(c, PC_SP_COUNT, k->name, 0, 0,
                       "the blocks hold %llu records in %llu blocks, the meta says %llu in %llu",
                       (unsigned long long)k->count, (unsigned long long)k->blocks,
                       (unsigned long long)k->meta.count, (unsigned long long)k->meta.blocks);
        else if (k->sum_ok && sum != k->meta.content_checksum)
            pc_ck_add(c, PC_SP_CHECKSUM, k->name, 0, 0,
                      "the blocks' checksums do not re-derive the meta's content checksum "
                      "(a lost, stale or foreign block)");
    }
}

/* The child: pin a read transaction when it can, walk, report. */
struct pc_ck_args {
    char dir[4096], dpath[4200];
    unsigned flags;
};

static int pc_ck_child(void *ctx, int fd)
{
    const struct pc_ck_args *a = ctx;
    struct pc_ck c;
    memset(&c, 0, sizeof c);
    c.fd = fd;
    c.flags = a->flags;
    c.w.on_problem = pc_ck_on_problem;
    c.w.on_record = pc_ck_on_record;
    c.w.ctx = &c;
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    uint64_t txnid = 0;
    int pinned = 0;
    if ((a->flags & PC_STORE_CHECK_NOLOCK) == 0 && mdb_env_create(&env) == 0) {
        /* a map as large as the file: LMDB maps nothing else in a reader */
        struct stat st;
        size_t map = stat(a->dpath, &st) == 0 ? (size_t)st.st_size : 0;
        if (mdb_env_set_maxdbs(env, 4) == 0 && mdb_env_set_mapsize(env, map + (1u << 20)) == 0 &&
            mdb_env_open(env, a->dir, MDB_RDONLY | MDB_NOTLS, 0640) == 0 &&
            mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) == 0) {
            txnid = (uint64_t)mdb_txn_id(txn);
            pinned = 1;
        }
    }
    int rc = pc_lw_map(&c.w, a->dpath);
    if (rc == 0)
        rc = pc_lw_run(&c.w, txnid, pinned);
    if (rc == 0)
        pc_ck_finish(&c);
    pc_store_problem end;
    memset(&end, 0, sizeof end);
    end.kind = 0;
    end.first = c.w.npages;
    end.last = c.w.free_pages;
    end.klen = (size_t)(rc < 0 ? -rc : 0);
    if (!c.write_failed)
        pc_store_write_all(fd, &end, sizeof end);
    /* Released before _exit: LMDB records a reader slot per process in
     * lock.mdb, and a slot left by this (dead) child is what the next
     * opener's mdb_reader_check reports as "released N reader slots of dead
     * processes" on every start. */
    if (txn != NULL)
        mdb_txn_abort(txn);
    if (env != NULL)
        mdb_env_close(env);
    return 0;
}

static void pc_ck_sig_msg(int st, char *buf, size_t cap)
{
    if (WIFSIGNALED(st))
        snprintf(buf, cap,
                 "the check died of signal %d (%s) reading data.mdb: the file cannot be "
                 "read safely",
                 WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(buf, cap, "the check ended without a result (exit status %d)",
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

int pc_store_check_dir(const char *dir, unsigned flags, pc_store_problem **out, size_t *n,
                       pc_store_check_info *info)
{
    struct pc_ck_args *a = calloc(1, sizeof *a);
    if (a == NULL)
        return PC_EHEAP;
    snprintf(a->dir, sizeof a->dir, "%s", dir);
    snprintf(a->dpath, sizeof a->dpath, "%s/data.mdb", dir);
    a->flags = flags;
    uint8_t *buf;
    size_t len;
    int st = 0;
    int rc = pc_store_isolated(pc_ck_child, a, &buf, &len, &st);
    free(a);
    if (rc != 0)
        return rc;
    size_t cnt = len / sizeof(pc_store_problem);
    pc_store_problem *list = (pc_store_problem *)buf;
    int complete = cnt > 0 && list[cnt - 1].kind == 0 && len % sizeof(pc_store_problem) == 0;
    if (info != NULL) {
        memset(info, 0, sizeof *info);
        if (complete) {
            info->pages = list[cnt - 1].first;
            info->free_pages = list[cnt - 1].last;
        }
    }
    if (complete && list[cnt - 1].klen != 0) {
        rc = -(int)list[cnt - 1].klen;
        free(buf);
        return rc;
    }
    if (complete) {
        cnt--;
    } else {
        /* the child faulted: keep what it said, then say that */
        cnt = len / sizeof(pc_store_problem);
        pc_store_problem *nl = realloc(buf, (cnt + 1) * sizeof *nl);
        if (nl == NULL) {
            free(buf);
            return PC_EHEAP;
        }
        list = nl;
        buf = (uint8_t *)nl;
        memset(&list[cnt], 0, sizeof list[cnt]);
        list[cnt].kind = PC_SP_PAGE;
        pc_ck_sig_msg(st, list[cnt].message, sizeof list[cnt].message);
        cnt++;
    }
    for (size_t i = 0; i < cnt; i++) {
        list[i].key = NULL;
        list[i].klen = 0;
        list[i].collection[sizeof list[i].collection - 1] = 0;
        list[i].message[sizeof list[i].message - 1] = 0;
    }
    if (cnt == 0) {
        free(buf);
        list = NULL;
    }
    *out = list;
    *n = cnt;
    return 0;
}

int pc_store_check(const char *where, unsigned flags, pc_store_problem **out, size_t *n,
                   char *errbuf, size_t errlen)
{
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = 0;
    if (where == NULL || out == NULL || n == NULL ||
        (flags & ~(PC_STORE_CHECK_DEEP | PC_STORE_CHECK_NOLOCK)) != 0)
        return PC_EINVAL;
    const char *p = where;
    if (strncmp(where, "lmdb:", 5) == 0) {
        if (strncmp(where, "lmdb:///", 8) != 0) {
            if (errbuf != NULL)
                snprintf(errbuf, errlen, "store URL '%s': expected lmdb:///absolute/path", where);
            return PC_EURL;
        }
        p = where + 7;
    }
    char dpath[4200], msg[600];
    struct stat st;
    if (strlen(p) >= 4096)
        return PC_EINVAL;
    snprintf(dpath, sizeof dpath, "%s/data.mdb", p);
    int fd = -1;
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode) || (stat(dpath, &st) != 0 && errno == ENOENT)) {
        if (errbuf != NULL)
            snprintf(errbuf, errlen, "store %s: no such directory or no data.mdb in it", p);
        return PC_ESTORE;
    }
    /* what this process may not read is said so, never taken for no store */
    if ((fd = open(dpath, O_RDONLY | O_CLOEXEC)) < 0) {
        int e = errno;
        if (e == EACCES || e == EPERM)
            pc_store_perm_msg(p, stat(dpath, &st) == 0 ? "data.mdb" : NULL, msg, sizeof msg);
        else
            snprintf(msg, sizeof msg, "store %.300s: cannot read data.mdb: %s", p, strerror(e));
        if (errbuf != NULL)
            snprintf(errbuf, errlen, "%s", msg);
        return PC_EIO;
    }
    close(fd);
    int rc = pc_store_check_dir(p, flags, out, n, NULL);
    if (rc != 0 && errbuf != NULL)
        snprintf(errbuf, errlen, "store %s: the check could not run: %s", p, pc_store_strerror(rc));
    return rc;
}

/* What a problem makes of the store for a caller with flags: 0 (nothing:
 * a reader meets a collection's damage itself), PC_ESTORE, PC_EFORMAT or
 * PC_ECORRUPT. */
static int pc_problem_class(const pc_store_problem *p, unsigned flags)
{
    int store_level = p->collection[0] == 0;
    if (p->kind == PC_SP_FOREIGN)
        return PC_ESTORE;
    /* a reader meets a collection's newer meta or block itself (PC_EFORMAT
     * from that collection's reads); a writer must not open at all */
    if (p->kind == PC_SP_NEWER)
        return store_level || (flags & (PC_CK_WRITER | PC_STORE_CHECK_DEEP)) ? PC_EFORMAT : 0;
    /* LMDB's pages, the file, the store header and the databases themselves
     * are every reader's; a collection's meta, blocks and counts are its own */
    if (p->kind == PC_SP_PAGE || p->kind == PC_SP_FILE || (p->kind == PC_SP_META && store_level) ||
        (flags & PC_STORE_CHECK_DEEP))
        return PC_ECORRUPT;
    return 0;
}

int pc_store_problem_refuses(const pc_store_problem *list, size_t n, unsigned flags)
{
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        int c = pc_problem_class(&list[i], flags);
        /* not a store, then newer, then damaged: a foreign environment is
         * not a damaged store, and a newer one may only look damaged */
        if (c == PC_ESTORE || (c == PC_EFORMAT && rc != PC_ESTORE) || (c != 0 && rc == 0))
            rc = c;
    }
    return rc;
}

int pc_store_verdict(const char *where, const pc_store_problem *list, size_t n, unsigned flags,
                     char *msg, size_t cap)
{
    if (msg != NULL && cap > 0)
        msg[0] = 0;
    if (where == NULL || (list == NULL && n > 0))
        return PC_EINVAL;
    const char *dir = strncmp(where, "lmdb:///", 8) == 0 ? where + 7 : where;
    int rc = pc_store_problem_refuses(list, n, flags);
    if (rc == 0 || msg == NULL || cap == 0)
        return rc;
    const pc_store_problem *first = NULL;
    for (size_t i = 0; i < n && first == NULL; i++)
        if (pc_problem_class(&list[i], flags) == rc)
            first = &list[i];
    char more[48] = "";
    if (n > 1)
        snprintf(more, sizeof more, " (and %zu more problem%s)", n - 1, n == 2 ? "" : "s");
    const char *cl = first->collection[0] ? "collection " : "", *cn = first->collection,
               *sep = first->collection[0] ? ": " : "";
    if (rc == PC_ESTORE)
        snprintf(msg, cap, "store %s is not a pcache store: %s", dir, first->message);
    else if (rc == PC_EFORMAT)
        snprintf(msg, cap,
                 "store %s was written by a newer format version: %s%s%s%s: upgrade pcache to "
                 "read it",
                 dir, cl, cn, sep, first->message);
    else
        snprintf(msg, cap,
                 "store %s is damaged: %s%s%s%s%s. 'pcache-snapshot verify %s' lists the "
                 "damage; 'pcache-snapshot salvage %s NEWDIR' copies every block that still "
                 "verifies into a new store (then point db_url at NEWDIR)",
                 dir, cl, cn, sep, first->message, more, dir, dir);
    return rc;
}

int pc_store_check_refuse(const char *dir, unsigned flags, char *why, size_t cap)
{
    pc_store_problem *list = NULL;
    size_t n = 0;
    int rc = pc_store_check_dir(dir, flags, &list, &n, NULL);
    if (rc != 0) {
        snprintf(why, cap, "store %s: the structural check could not run: %s", dir,
                 pc_store_strerror(rc));
        return rc;
    }
    char msg[600];
    rc = pc_store_verdict(dir, list, n, flags, msg, sizeof msg);
    if (rc != 0)
        snprintf(why, cap, "%s. Nothing was read or written", msg);
    pc_store_problems_free(list, n);
    return rc;
}
