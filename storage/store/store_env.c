/*
 * store_env.c - opening and closing a store, its header record, the boot
 * generation, LMDB map growth and the handle's logging.
 *
 * Opening is careful not to change anything it then refuses: an existing
 * environment is first opened read-only and checked (data.mdb is an LMDB
 * file, not truncated, holds the "meta" and "blocks" databases and a store
 * header of a version we read); only then, and only for a read-write open,
 * is it reopened for writing. A new store is created only in a missing or
 * empty directory (a journal/ folder or a stale lock.mdb may be there), and
 * its databases and header are created in one write transaction, so a
 * crash while creating leaves an empty environment, which the next open
 * with PC_STORE_CREATE initialises again.
 *
 * Map size: LMDB needs a maximum size up front and returns MDB_MAP_FULL when
 * a write transaction would pass it. The map only reserves address space
 * (the file grows as pages are written), so the start is generous (1 GiB or
 * four times the file) and pc_store_grow doubles it on demand; another
 * process adopts a grown map through MDB_MAP_RESIZED (pc_store_txn_begin).
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "store_int.h"

#define PC_STORE_MAP_DEFAULT (1ull << 30)
#define PC_STORE_MAP_ALIGN (1ull << 20)

void pc_store_config_init(pc_store_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->log.level = PC_LOG_INFO;
    cfg->zstd_level = PC_STORE_ZSTD_LEVEL_DEFAULT;
    cfg->block_bytes = PC_STORE_BLOCK_DEFAULT;
}

void pc_slog_emit(const pc_store *s, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pc_log_vemit(&s->log, level, NULL, fmt, ap);
    va_end(ap);
}

const char *pc_store_strerror(int err)
{
    switch (err) {
    case PC_ECORRUPT:
        return "stored data is corrupt";
    case PC_EFORMAT:
        return "unsupported (newer) format version";
    case PC_ESTORE:
        return "not a pcache store";
    case PC_EIO:
        return "I/O error";
    default:
        return pc_mgmt_strerror(err);
    }
}

int pc_store_mdb_err(const pc_store *s, int mrc, const char *what)
{
    int rc;
    switch (mrc) {
    case 0:
        return 0;
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
        rc = PC_ECORRUPT;
        break;
    case MDB_VERSION_MISMATCH:
        rc = PC_EFORMAT;
        break;
    case ENOMEM:
        rc = PC_EHEAP;
        break;
    default:
        rc = PC_EIO;
        break;
    }
    PC_SLOG(s, PC_LOG_ERR, "store %s: %s: %s", s->path, what, mdb_strerror(mrc));
    return rc;
}

int pc_store_check_pid(const pc_store *s)
{
    if (s->pid == getpid())
        return 0;
    PC_SLOG(s, PC_LOG_ERR,
            "store %s: handle used in a forked child (pid %d, opened by %d): open the store in the "
            "process that uses it",
            s->path, (int)getpid(), (int)s->pid);
    return PC_EINVAL;
}

int pc_store_txn_begin(pc_store *s, unsigned flags, MDB_txn **txn)
{
    PC_ASSERT(s, S4, (flags & MDB_RDONLY) != 0 || (s->flags & PC_STORE_RDONLY) == 0);
    int mrc = 0;
    for (int tries = 0; tries < 4; tries++) {
        mrc = mdb_txn_begin(s->env, NULL, flags, txn);
        if (mrc != MDB_MAP_RESIZED)
            break;
        /* another process grew the map: adopt its size (no txn is open here) */
        mrc = mdb_env_set_mapsize(s->env, 0);
        if (mrc != 0)
            break;
        MDB_envinfo ei;
        mdb_env_info(s->env, &ei);
        s->map_size = ei.me_mapsize;
    }
    return mrc == 0 ? 0 : pc_store_mdb_err(s, mrc, "begin transaction");
}

void pc_store_reap_readers(pc_store *s)
{
    int dead = 0;
    if (mdb_reader_check(s->env, &dead) == 0 && dead > 0)
        PC_SLOG(s, PC_LOG_INFO,
                "store %s: released %d reader slots of dead processes (they pinned old pages)",
                s->path, dead);
}

size_t pc_store_used_bytes(pc_store *s)
{
    MDB_envinfo ei;
    if (mdb_env_info(s->env, &ei) != 0)
        return 0;
    return (ei.me_last_pgno + 1) * (size_t)s->psize;
}

int pc_store_txn_finish(pc_store *s, MDB_txn *txn, int mrc, int commit, const char *what)
{
    if (mrc == 0 && commit)
        mrc = mdb_txn_commit(txn);
    else
        mdb_txn_abort(txn);
    if (mrc == MDB_MAP_FULL) {
        int rc = pc_store_grow(s, 0);
        return rc != 0 ? rc : PC_STORE_AGAIN;
    }
    return mrc != 0 ? pc_store_mdb_err(s, mrc, what) : 0;
}

int pc_store_grow(pc_store *s, size_t need)
{
    size_t want = s->map_size * 2;
    if (want < need)
        want = need;
    want = (want + PC_STORE_MAP_ALIGN - 1) & ~(size_t)(PC_STORE_MAP_ALIGN - 1);
    int mrc = mdb_env_set_mapsize(s->env, want);
    if (mrc != 0)
        return pc_store_mdb_err(s, mrc, "grow the map");
    MDB_envinfo ei;
    mdb_env_info(s->env, &ei);
    PC_SLOG(s, PC_LOG_INFO, "store %s: map grown from %zu to %zu MiB", s->path, s->map_size >> 20,
            (size_t)ei.me_mapsize >> 20);
    s->map_size = ei.me_mapsize;
    return 0;
}

int pc_store_meta_read(pc_store *s, MDB_txn *txn, const char *name, size_t nlen,
                       pc_store_coll_meta *m)
{
    uint8_t kb[2 + PC_COLL_NAME_MAX];
    MDB_val k = {pc_sf_meta_key(kb, 'c', name, nlen), kb}, v;
    int mrc = mdb_get(txn, s->meta, &k, &v);
    if (mrc == MDB_NOTFOUND)
        return PC_ENOTFOUND;
    if (mrc != 0)
        return pc_store_mdb_err(s, mrc, "read collection meta");
    pc_store_coll_meta tmp;
    memset(&tmp, 0, sizeof tmp);
    const char *why = "";
    int rc = pc_sf_meta_decode(v.mv_data, v.mv_size, &tmp, &why);
    if (rc != 0) {
        PC_SLOG(s, PC_LOG_ERR, "store %s: collection %.*s: %s (format version %u)", s->path,
                (int)nlen, name, why, tmp.format_version);
        return rc;
    }
    memcpy(tmp.name, name, nlen);
    tmp.name[nlen] = 0;
    *m = tmp;
    return 0;
}

int pc_store_perm_msg(const char *dir, const char *file, char *buf, size_t cap)
{
    char p[4200];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, file != NULL ? file : "");
    const char *shown = file; /* the file whose mode is shown: itself, else its directory */
    if (file == NULL || stat(p, &st) != 0) {
        shown = "the directory";
        if (stat(dir, &st) != 0)
            memset(&st, 0, sizeof st);
    }
    const char *what = file == NULL ? "look inside the directory"
                       : strcmp(file, "lock.mdb") == 0
                           ? "write lock.mdb (a reader takes a slot in it, or creates it in the "
                             "directory)"
                           : "read data.mdb";
    snprintf(buf, cap,
             "store %.300s: permission denied: this process (uid %u, gid %u) may not %s (%s: "
             "mode %04o, owner uid %u, gid %u)",
             dir, (unsigned)geteuid(), (unsigned)getegid(), what, shown,
             (unsigned)st.st_mode & 07777, (unsigned)st.st_uid, (unsigned)st.st_gid);
    return PC_EIO;
}

/* ---- opening -------------------------------------------------------------- */
struct pc_open_ctx {
    pc_store *s;
    char *errbuf;
    size_t errlen;
    pc_store_check_fn check; /* the structural check (store_raw.h); NULL: none given */
    bool created;            /* this open put data.mdb in place (pc_create_atomic) */
};

__attribute__((format(printf, 3, 4))) static int pc_open_fail(struct pc_open_ctx *o, int rc,
                                                              const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (o->errbuf != NULL && o->errlen > 0)
        snprintf(o->errbuf, o->errlen, "%s", msg);
    PC_SLOG(o->s, PC_LOG_ERR, "%s", msg);
    return rc;
}

/* "lmdb:///abs/path" or a plain path -> s->path without trailing slashes. */
static int pc_parse_where(struct pc_open_ctx *o, const char *where)
{
    const char *p = where;
    if (strncmp(where, "lmdb:", 5) == 0) {
        if (strncmp(where, "lmdb:///", 8) != 0)
            return pc_open_fail(
                o, PC_EURL, "store URL '%s': expected lmdb:///absolute/path (no host part)", where);
        p = where + 7; /* keep the leading '/' */
    } else if (strstr(where, "://") != NULL) {
        return pc_open_fail(o, PC_EURL, "store URL '%s': only lmdb:// is a snapshot store", where);
    }
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        n--;
    if (n == 0 || n >= sizeof o->s->path - 16)
        return pc_open_fail(o, PC_EINVAL, "store path '%s' is empty or too long", where);
    memcpy(o->s->path, p, n);
    o->s->path[n] = 0;
    snprintf(o->s->dpath, sizeof o->s->dpath, "%s/data.mdb", o->s->path);
    return 0;
}

/* 1 when dir holds nothing but ".", "..", "lock.mdb", "data.mdb",
 * "journal" and ".pcache-new-*" (pc_create_atomic's): a place where a store
 * may be created. */
static int pc_dir_blank(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int ok = 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (strcmp(n, ".") && strcmp(n, "..") && strcmp(n, "lock.mdb") && strcmp(n, "data.mdb") &&
            strcmp(n, "journal") && strncmp(n, ".pcache-new-", 12) != 0) {
            ok = 0;
            break;
        }
    }
    closedir(d);
    return ok;
}

/* Creates a new store so that data.mdb appears whole or not at all: the
 * environment, its databases and the store header are made and committed
 * in a private subdirectory (.pcache-new-PID), then data.mdb is linked into
 * place (link(): never over a data.mdb another creator put there first)
 * and the subdirectory removed. So a data.mdb of zero bytes or without its
 * meta pages is never a creation that crashed: it is damage (issue 18).
 * A crash leaves only the subdirectory, which pc_dir_blank ignores and a
 * later creation of the same pid, or of a dead one, removes. */
static void pc_rm_tmpdir(const char *tmp)
{
    char p[4500];
    snprintf(p, sizeof p, "%s/data.mdb", tmp);
    unlink(p);
    snprintf(p, sizeof p, "%s/lock.mdb", tmp);
    unlink(p);
    rmdir(tmp);
}

static int pc_env_create(struct pc_open_ctx *o, unsigned mflags);
static int pc_init_store(struct pc_open_ctx *o);

static int pc_create_atomic(struct pc_open_ctx *o, const pc_store_config *cfg)
{
    pc_store *s = o->s;
    char path[sizeof s->path], dpath[sizeof s->dpath], tmp[4200], tdata[4300];
    memcpy(path, s->path, sizeof path);
    memcpy(dpath, s->dpath, sizeof dpath);
    /* leftovers of creators that died */
    DIR *d = opendir(path);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        long pid;
        if (sscanf(e->d_name, ".pcache-new-%ld", &pid) == 1 && pid > 0 &&
            (pid == (long)getpid() || (kill((pid_t)pid, 0) != 0 && errno == ESRCH))) {
            char old[sizeof path + 300];
            snprintf(old, sizeof old, "%s/%s", path, e->d_name);
            pc_rm_tmpdir(old);
        }
    }
    if (d != NULL)
        closedir(d);
    snprintf(tmp, sizeof tmp, "%s/.pcache-new-%ld", path, (long)getpid());
    snprintf(tdata, sizeof tdata, "%s/data.mdb", tmp);
    if (mkdir(tmp, 0750) != 0)
        return pc_open_fail(o, PC_EIO, "store %s: cannot create %s: %s", path, tmp,
                            strerror(errno));
    size_t want = cfg->map_size != 0 ? cfg->map_size : PC_STORE_MAP_DEFAULT;
    s->map_size = (want + PC_STORE_MAP_ALIGN - 1) & ~(size_t)(PC_STORE_MAP_ALIGN - 1);
    if (strlen(tmp) >= sizeof s->path || strlen(tdata) >= sizeof s->dpath) {
        rmdir(tmp);
        return pc_open_fail(o, PC_EINVAL, "store %s: path too long", path);
    }
    memcpy(s->path, tmp, strlen(tmp) + 1);
    memcpy(s->dpath, tdata, strlen(tdata) + 1);
    int rc = pc_env_create(o, 0);
    if (rc == 0)
        rc = pc_init_store(o);
    if (s->env != NULL)
        mdb_env_close(s->env);
    s->env = NULL;
    memcpy(s->path, path, sizeof path);
    memcpy(s->dpath, dpath, sizeof dpath);
    if (rc == 0 && link(tdata, dpath) == 0)
        o->created = true;
    else if (rc == 0 && errno != EEXIST)
        rc = pc_open_fail(o, PC_EIO, "store %s: cannot put the new data.mdb in place: %s", path,
                          strerror(errno));
    pc_rm_tmpdir(tmp);
    if (rc == 0) {
        int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        /* named where it now is: the private subdirectory is gone */
        PC_SLOG(s, PC_LOG_INFO, "store %s: created (format version %u)", path, PC_SF_VERSION);
    }
    return rc;
}

/* Reads LMDB's first meta page directly: 1 when data.mdb is an LMDB file
 * (magic 0xBEEFC0DE, data version 1), 2 when it is what is left of one
 * (shorter than a meta page, or only meta page 1 has the magic), 0 when it
 * is not, <0 on an I/O error. *empty is set for a zero-length file. */
static int pc_probe_lmdb(struct pc_open_ctx *o, uint64_t *fsize, int *empty)
{
    int fd = open(o->s->dpath, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && (errno == EACCES || errno == EPERM)) {
        char msg[600];
        pc_store_perm_msg(o->s->path, "data.mdb", msg, sizeof msg);
        return pc_open_fail(o, PC_EIO, "%s", msg);
    }
    if (fd < 0)
        return pc_open_fail(o, PC_EIO, "store %s: cannot read data.mdb: %s", o->s->path,
                            strerror(errno));
    struct stat st;
    uint8_t pg[64];
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = pc_open_fail(o, PC_EIO, "store %s: stat data.mdb: %s", o->s->path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = pc_open_fail(o, PC_ESTORE, "store %s: data.mdb is not a regular file", o->s->path);
        goto out;
    }
    *fsize = (uint64_t)st.st_size;
    *empty = st.st_size == 0;
    if (st.st_size == 0) {
        rc = 1;
        goto out;
    }
    ssize_t got = pread(fd, pg, sizeof pg, 0);
    /* page header (16 bytes), then MDB_meta: magic u32, version u32 */
    rc = got == (ssize_t)sizeof pg && pc_get_le32(pg + 16) == 0xBEEFC0DEu &&
         pc_get_le32(pg + 20) == 1u;
    if (rc == 0 && got >= 0 && got < (ssize_t)sizeof pg) {
        rc = 2; /* a few bytes: what is left of a file, not a file of someone else's */
        goto out;
    }
    /* meta page 0 damaged but meta page 1 (at one of the page sizes) there:
     * an LMDB file, damaged; the structural check says how */
    for (unsigned ps = 512; rc == 0 && ps <= 65536; ps *= 2)
        if (pread(fd, pg, sizeof pg, ps) == (ssize_t)sizeof pg &&
            pc_get_le32(pg + 16) == 0xBEEFC0DEu)
            rc = 2;
out:
    close(fd);
    return rc;
}

/* Whether the directory holds data.mdb: 0 with *have set, or PC_EIO when
 * it cannot be looked at (never "no store" for that). */
static int pc_have_data(struct pc_open_ctx *o, int *have)
{
    struct stat st;
    *have = stat(o->s->dpath, &st) == 0;
    if (*have || errno == ENOENT)
        return 0;
    char msg[600];
    if (errno == EACCES || errno == EPERM)
        pc_store_perm_msg(o->s->path, NULL, msg, sizeof msg);
    else
        snprintf(msg, sizeof msg, "store %.300s: data.mdb: %s", o->s->path, strerror(errno));
    return pc_open_fail(o, PC_EIO, "%s", msg);
}

/* LMDB writes its two meta pages when it creates data.mdb: an empty file
 * is a store whose contents were lost (a truncation, a failed copy), and
 * initialising it would make the loss look like a new store that a
 * shutdown save then commits. The check (when one was given) says so in
 * the words every caller uses. Returns PC_ECORRUPT. */
static int pc_refuse_empty(struct pc_open_ctx *o)
{
    char why[700] = "";
    if ((o->s->flags & PC_STORE_NOCHECK) != 0 || o->check == NULL ||
        o->check(o->s->path, PC_SCK_READER, why, sizeof why) == 0)
        snprintf(why, sizeof why,
                 "store %.300s is damaged: data.mdb is empty (0 bytes): the store's data is "
                 "gone (restore a copy, or remove data.mdb to start a new store there)",
                 o->s->path);
    return pc_open_fail(o, PC_ECORRUPT, "%s", why);
}

static int pc_env_create(struct pc_open_ctx *o, unsigned mflags)
{
    pc_store *s = o->s;
    int mrc = mdb_env_create(&s->env);
    if (mrc == 0)
        mrc = mdb_env_set_maxdbs(s->env, 4);
    if (mrc == 0)
        mrc = mdb_env_set_mapsize(s->env, s->map_size);
    if (mrc == 0)
        mrc = mdb_env_open(s->env, s->path, mflags | MDB_NOTLS, 0640);
    if (mrc != 0) {
        if (s->env != NULL)
            mdb_env_close(s->env);
        s->env = NULL;
        if ((mrc == EACCES || mrc == EPERM) && (mflags & MDB_RDONLY)) {
            /* data.mdb was read by the probe: it is lock.mdb */
            char msg[600];
            pc_store_perm_msg(s->path, "lock.mdb", msg, sizeof msg);
            return pc_open_fail(o, PC_EIO, "%s", msg);
        }
        if (mrc == EACCES || mrc == EROFS || mrc == EPERM)
            return pc_open_fail(o, PC_EIO, "store %s: cannot open %s: %s", s->path,
                                (mflags & MDB_RDONLY) ? "for reading" : "for writing",
                                mdb_strerror(mrc));
        if (mrc == MDB_INVALID || mrc == MDB_VERSION_MISMATCH)
            return pc_open_fail(o, PC_ESTORE, "store %s: data.mdb is not a usable LMDB file: %s",
                                s->path, mdb_strerror(mrc));
        return pc_open_fail(o, PC_EIO, "store %s: cannot open the LMDB environment: %s", s->path,
                            mdb_strerror(mrc));
    }
    MDB_envinfo ei;
    MDB_stat es;
    mdb_env_info(s->env, &ei);
    mdb_env_stat(s->env, &es);
    s->map_size = ei.me_mapsize;
    s->psize = es.ms_psize;
    pc_store_reap_readers(s);
    return 0;
}

/* A truncated data.mdb would fault inside LMDB's map (SIGBUS): refuse it. */
static int pc_check_truncated(struct pc_open_ctx *o)
{
    pc_store *s = o->s;
    struct stat st;
    if (stat(s->dpath, &st) != 0)
        return pc_open_fail(o, PC_EIO, "store %s: stat data.mdb: %s", s->path, strerror(errno));
    uint64_t need = (uint64_t)pc_store_used_bytes(s);
    if ((uint64_t)st.st_size < need)
        return pc_open_fail(o, PC_ECORRUPT,
                            "store %s: data.mdb is %llu bytes but its last committed page ends at "
                            "%llu: the file is truncated",
                            s->path, (unsigned long long)st.st_size, (unsigned long long)need);
    return 0;
}

/* Checks an opened environment: 1 = a store (dbis set, header read),
 * 0 = an empty environment, <0 = refused. */
static int pc_check_store(struct pc_open_ctx *o, pc_sf_hdr *hdr)
{
    pc_store *s = o->s;
    MDB_txn *txn = NULL;
    int rc = pc_store_txn_begin(s, MDB_RDONLY, &txn);
    if (rc != 0)
        return pc_open_fail(o, rc, "store %s: cannot read the environment", s->path);
    MDB_dbi main;
    MDB_stat ms;
    int mrc = mdb_dbi_open(txn, NULL, 0, &main);
    if (mrc == 0)
        mrc = mdb_stat(txn, main, &ms);
    if (mrc != 0) {
        rc = pc_open_fail(o, PC_ECORRUPT, "store %s: cannot read the main database: %s", s->path,
                          mdb_strerror(mrc));
        goto out;
    }
    if (ms.ms_entries == 0) {
        rc = 0; /* an empty environment (a creation that did not commit) */
        goto out;
    }
    mrc = mdb_dbi_open(txn, "meta", 0, &s->meta);
    if (mrc == MDB_NOTFOUND || mrc == MDB_INCOMPATIBLE) {
        rc = pc_open_fail(o, PC_ESTORE,
                          "store %s is not a pcache store: an LMDB environment without pcache's "
                          "'meta' database",
                          s->path);
        goto out;
    }
    if (mrc != 0) {
        rc = pc_open_fail(o, PC_ECORRUPT, "store %s: cannot open the 'meta' database: %s", s->path,
                          mdb_strerror(mrc));
        goto out;
    }
    MDB_val k = {PC_SF_HDR_KEYLEN, (void *)PC_SF_HDR_KEY}, v;
    mrc = mdb_get(txn, s->meta, &k, &v);
    if (mrc == MDB_NOTFOUND) { /* pcache's databases without a header: damage */
        rc = pc_open_fail(o, PC_ECORRUPT, "store %s is damaged: the store header is missing",
                          s->path);
        goto out;
    }
    if (mrc != 0) {
        rc = pc_open_fail(o, PC_ECORRUPT, "store %s: cannot read the store header: %s", s->path,
                          mdb_strerror(mrc));
        goto out;
    }
    const char *why = "";
    memset(hdr, 0, sizeof *hdr);
    rc = pc_sf_hdr_decode(v.mv_data, v.mv_size, hdr, &why);
    if (rc == PC_EFORMAT) {
        rc = pc_open_fail(o, rc,
                          "store %s: %s (version %u; this build reads version %u): upgrade pcache "
                          "to open it",
                          s->path, why, hdr->version, PC_SF_VERSION);
        goto out;
    }
    if (rc != 0) { /* the header key of pcache's 'meta' database: damage, whatever it holds */
        rc = pc_open_fail(o, PC_ECORRUPT, "store %s is damaged: store header: %s", s->path, why);
        goto out;
    }
    mrc = mdb_dbi_open(txn, "blocks", 0, &s->blocks);
    if (mrc != 0) {
        rc = pc_open_fail(o, PC_ECORRUPT, "store %s: the 'blocks' database is missing: %s", s->path,
                          mdb_strerror(mrc));
        goto out;
    }
    /* a committed read transaction keeps the dbi handles open */
    mrc = mdb_txn_commit(txn);
    txn = NULL;
    rc = mrc == 0 ? 1 : pc_open_fail(o, PC_EIO, "store %s: %s", s->path, mdb_strerror(mrc));
out:
    if (txn != NULL)
        mdb_txn_abort(txn);
    return rc;
}

/* Creates the databases and the header of a new store in one transaction. */
static int pc_init_store(struct pc_open_ctx *o)
{
    pc_store *s = o->s;
    MDB_txn *txn = NULL;
    int rc = pc_store_txn_begin(s, 0, &txn);
    if (rc != 0)
        return pc_open_fail(o, rc, "store %s: cannot begin the creating transaction", s->path);
    pc_sf_hdr h = {.version = PC_SF_VERSION, .created_ms = pc_wall_ms()};
    uint8_t buf[PC_SF_HDR_SIZE];
    pc_sf_hdr_encode(&h, buf);
    MDB_val k = {PC_SF_HDR_KEYLEN, (void *)PC_SF_HDR_KEY}, v = {sizeof buf, buf};
    int mrc = mdb_dbi_open(txn, "meta", MDB_CREATE, &s->meta);
    if (mrc == 0)
        mrc = mdb_dbi_open(txn, "blocks", MDB_CREATE, &s->blocks);
    if (mrc == 0)
        mrc = mdb_put(txn, s->meta, &k, &v, MDB_NOOVERWRITE);
    if (mrc == 0) {
        mrc = mdb_txn_commit(txn);
        txn = NULL;
    }
    if (txn != NULL)
        mdb_txn_abort(txn);
    if (mrc != 0)
        return pc_open_fail(o, PC_EIO, "store %s: cannot create the store: %s", s->path,
                            mdb_strerror(mrc));
    return 0;
}

unsigned pc_store_auto_threads(unsigned requested)
{
    if (requested >= 1)
        return requested - 1 > 16 ? 16 : requested - 1;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    return n > 4 ? 4 : (unsigned)n;
}

/* The configuration's sizes and flags are in range. */
static int pc_open_valid(struct pc_open_ctx *o)
{
    const pc_store *s = o->s;
    bool rdonly = (s->flags & PC_STORE_RDONLY) != 0, create = (s->flags & PC_STORE_CREATE) != 0;
    if (s->block_bytes < 1024 || s->block_bytes > PC_SF_BLOCK_RAW_MAX / 4 ||
        s->zlevel < ZSTD_minCLevel() || s->zlevel > ZSTD_maxCLevel() ||
        (s->flags & ~(PC_STORE_RDONLY | PC_STORE_CREATE | PC_STORE_NOCHECK)) != 0 ||
        (rdonly && create))
        return pc_open_fail(o, PC_EINVAL, "store %s: bad configuration (flags, level, block size)",
                            s->path);
    return 0;
}

/* The store's directory exists (made when the open may create), and is a
 * directory. */
static int pc_open_dir(struct pc_open_ctx *o)
{
    const pc_store *s = o->s;
    struct stat st;
    if (stat(s->path, &st) == 0)
        return S_ISDIR(st.st_mode)
                   ? 0
                   : pc_open_fail(
                         o, PC_ESTORE,
                         "store %s: not a directory (a store is a directory holding data.mdb)",
                         s->path);
    if (errno != ENOENT)
        return pc_open_fail(o, PC_EIO, "store %s: %s", s->path, strerror(errno));
    if ((s->flags & PC_STORE_CREATE) == 0)
        return pc_open_fail(o, PC_ESTORE, "store %s: no such directory", s->path);
    if (mkdir(s->path, 0750) != 0)
        return pc_open_fail(o, PC_EIO, "store %s: cannot create the directory: %s", s->path,
                            strerror(errno));
    return 0;
}

/* What the directory holds: *have_data when data.mdb is there (a blank
 * directory gets a new store made atomically when the open may create),
 * *fsize its size and *empty when it has no data yet. Refuses what is not
 * a store: a non-LMDB file, an empty environment, a foreign directory. */
static int pc_open_classify(struct pc_open_ctx *o, const pc_store_config *cfg, int *have_data,
                            uint64_t *fsize, int *empty)
{
    pc_store *s = o->s;
    bool create = (s->flags & PC_STORE_CREATE) != 0;
    int rc = pc_have_data(o, have_data);
    if (rc != 0)
        return rc;
    if (!*have_data && create && pc_dir_blank(s->path)) {
        if ((rc = pc_create_atomic(o, cfg)) != 0)
            return rc;
        *have_data = access(s->dpath, F_OK) == 0;
    }
    if (*have_data) {
        rc = pc_probe_lmdb(o, fsize, empty);
        if (rc < 0)
            return rc;
        if (rc == 0)
            return pc_open_fail(o, PC_ESTORE, "store %s: data.mdb is not an LMDB file", s->path);
        if (rc == 2 && (s->flags & PC_STORE_NOCHECK) != 0)
            return pc_open_fail(o, PC_ECORRUPT,
                                "store %s is damaged: data.mdb has no sound "
                                "first meta page",
                                s->path);
        return *empty ? pc_refuse_empty(o) : 0;
    }
    if (!pc_dir_blank(s->path))
        return pc_open_fail(o, PC_ESTORE,
                            "store %s: a non-empty directory that holds no pcache store", s->path);
    if (!create)
        return pc_open_fail(o, PC_ESTORE, "store %s: holds no store (open with create)", s->path);
    return 0;
}

/* An existing store, before anything writes it: LMDB trusts every page it
 * reads, so they are all walked first by the check the caller gave
 * (storage/storecheck/, in a child), and nothing damaged is touched; then
 * it is opened read-only and its header read into *hdr (*is_store).
 * Leaves the read-only environment open. */
static int pc_open_look(struct pc_open_ctx *o, pc_sf_hdr *hdr, int *is_store)
{
    pc_store *s = o->s;
    bool rdonly = (s->flags & PC_STORE_RDONLY) != 0;
    int rc;
    /* without a check, only the data.mdb this open has just written is read */
    if ((s->flags & PC_STORE_NOCHECK) == 0 && o->check == NULL && !o->created)
        return pc_open_fail(o, PC_EINVAL,
                            "store %s: opening an existing store needs the structural check "
                            "(pc_store_open_checked, or PC_STORE_NOCHECK after pc_store_check)",
                            s->path);
    if ((s->flags & PC_STORE_NOCHECK) == 0 && o->check != NULL) {
        char why[700];
        if ((rc = o->check(s->path, rdonly ? PC_SCK_READER : PC_SCK_WRITER, why, sizeof why)) != 0)
            return pc_open_fail(o, rc, "%s", why);
    }
    if ((rc = pc_env_create(o, MDB_RDONLY)) != 0 || (rc = pc_check_truncated(o)) != 0)
        return rc;
    *is_store = pc_check_store(o, hdr);
    if (*is_store < 0)
        return *is_store;
    if (*is_store == 0 && (s->flags & PC_STORE_CREATE) == 0)
        return pc_open_fail(o, PC_ESTORE,
                            "store %s: an empty LMDB environment, not initialised as a store "
                            "(open with create)",
                            s->path);
    return 0;
}

/* The read-write environment: the store's header checked again (is_store)
 * or a new store initialised. */
static int pc_open_rw(struct pc_open_ctx *o, int is_store, pc_sf_hdr *hdr)
{
    pc_store *s = o->s;
    int rc = pc_env_create(o, 0);
    if (rc != 0)
        return rc;
    if (is_store) {
        if ((rc = pc_check_store(o, hdr)) < 0)
            return rc;
        if (rc == 0) /* emptied between the two opens: someone else's doing */
            return pc_open_fail(o, PC_ESTORE, "store %s: the store vanished while opening",
                                s->path);
        return 0;
    }
    if ((rc = pc_init_store(o)) != 0)
        return rc;
    PC_SLOG(s, PC_LOG_INFO, "store %s: created (format version %u)", s->path, PC_SF_VERSION);
    return 0;
}

int pc_store_open(const char *where, const pc_store_config *cfg, pc_store **out, char *errbuf,
                  size_t errlen)
{
    return pc_store_open_with(where, cfg, NULL, out, errbuf, errlen);
}

int pc_store_open_with(const char *where, const pc_store_config *cfg, pc_store_check_fn check,
                       pc_store **out, char *errbuf, size_t errlen)
{
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = 0;
    if (where == NULL || out == NULL)
        return PC_EINVAL;
    pc_store_config defaults;
    if (cfg == NULL) {
        pc_store_config_init(&defaults);
        cfg = &defaults;
    }
    pc_store *s = calloc(1, sizeof *s);
    if (s == NULL)
        return PC_EHEAP;
    s->flags = cfg->flags;
    s->log = cfg->log;
    s->zlevel = cfg->zstd_level == 0 ? PC_STORE_ZSTD_LEVEL_DEFAULT : cfg->zstd_level;
    s->block_bytes = cfg->block_bytes == 0 ? PC_STORE_BLOCK_DEFAULT : cfg->block_bytes;
    s->threads = cfg->threads;
    s->pid = getpid();
    struct pc_open_ctx o = {s, errbuf, errlen, check, false};
    bool rdonly = (s->flags & PC_STORE_RDONLY) != 0;
    uint64_t fsize = 0;
    int empty = 1, have_data = 0, is_store = 0;
    pc_sf_hdr hdr;
    int rc = pc_parse_where(&o, where);
    if (rc != 0 || (rc = pc_open_valid(&o)) != 0 || (rc = pc_open_dir(&o)) != 0 ||
        (rc = pc_open_classify(&o, cfg, &have_data, &fsize, &empty)) != 0)
        goto out;
    size_t want = cfg->map_size != 0 ? cfg->map_size : PC_STORE_MAP_DEFAULT;
    if (want < fsize * 4)
        want = (size_t)fsize * 4;
    s->map_size = (want + PC_STORE_MAP_ALIGN - 1) & ~(size_t)(PC_STORE_MAP_ALIGN - 1);
    if (have_data) { /* look before writing anything: read-only first */
        if ((rc = pc_open_look(&o, &hdr, &is_store)) != 0)
            goto out;
        if (!rdonly) {
            mdb_env_close(s->env);
            s->env = NULL;
        }
    }
    if (!rdonly && (rc = pc_open_rw(&o, is_store, &hdr)) != 0)
        goto out;
    *out = s;
    PC_SLOG(s, PC_LOG_DEBUG, "store %s: open %s, map %zu MiB", s->path,
            rdonly ? "read-only" : "read-write", s->map_size >> 20);
out:
    if (rc != 0) {
        if (s->env != NULL)
            mdb_env_close(s->env);
        free(s);
    }
    return rc;
}

/* Environments a forked child inherited and dropped. They are never closed
 * there: closing one closes its lock.mdb descriptor, and POSIX releases every
 * fcntl lock a process holds on a file when it closes any descriptor of it -
 * the locks of the child's own, newly opened handle of the same store too.
 * So they are kept, reachable from this list for the life of the process
 * (memory held on purpose, not a leak; a leak checker sees it as reachable). */
struct pc_store_kept {
    MDB_env *env;
    struct pc_store_kept *next;
};
static struct pc_store_kept *pc_store_kept_head;

void pc_store_close(pc_store *s)
{
    if (s == NULL)
        return;
    if (s->env != NULL && s->pid == getpid()) {
        mdb_env_close(s->env);
    } else if (s->env != NULL) {
        struct pc_store_kept *k = malloc(sizeof *k);
        if (k != NULL) { /* on failure the env is unreachable: still never closed */
            k->env = s->env;
            k->next = pc_store_kept_head;
            pc_store_kept_head = k;
        }
    }
    free(s);
}

const char *pc_store_path(const pc_store *s)
{
    return s->path;
}

int pc_store_write_begin(pc_store *s, MDB_txn **txn, MDB_dbi *meta, MDB_dbi *blocks)
{
    if ((s->flags & PC_STORE_RDONLY) != 0)
        return PC_EINVAL;
    int rc = pc_store_check_pid(s);
    if (rc == 0 && (rc = pc_store_txn_begin(s, 0, txn)) == 0) {
        *meta = s->meta;
        *blocks = s->blocks;
    }
    return rc;
}

/* ---- boot generation ---------------------------------------------------------- */
static int pc_hdr_read(pc_store *s, MDB_txn *txn, pc_sf_hdr *h)
{
    MDB_val k = {PC_SF_HDR_KEYLEN, (void *)PC_SF_HDR_KEY}, v;
    int mrc = mdb_get(txn, s->meta, &k, &v);
    if (mrc != 0)
        return pc_store_mdb_err(s, mrc, "read the store header");
    const char *why = "";
    int rc = pc_sf_hdr_decode(v.mv_data, v.mv_size, h, &why);
    if (rc != 0)
        PC_SLOG(s, PC_LOG_ERR, "store %s: %s", s->path, why);
    return rc;
}

int pc_store_hdr_upgrade(pc_store *s, MDB_txn *txn)
{
    pc_sf_hdr h;
    int rc = pc_hdr_read(s, txn, &h);
    if (rc != 0 || h.version >= PC_SF_VERSION)
        return rc;
    PC_SLOG(s, PC_LOG_INFO, "store %s: format version %u -> %u (records of version %u written)",
            s->path, h.version, PC_SF_VERSION, PC_SF_VERSION);
    h.version = PC_SF_VERSION;
    uint8_t buf[PC_SF_HDR_SIZE];
    pc_sf_hdr_encode(&h, buf);
    MDB_val k = {PC_SF_HDR_KEYLEN, (void *)PC_SF_HDR_KEY}, v = {sizeof buf, buf};
    return mdb_put(txn, s->meta, &k, &v, 0);
}

int pc_store_boot_gen(pc_store *s, uint64_t *gen)
{
    if (s == NULL || gen == NULL)
        return PC_EINVAL;
    int rc = pc_store_check_pid(s);
    if (rc != 0)
        return rc;
    MDB_txn *txn;
    if ((rc = pc_store_txn_begin(s, MDB_RDONLY, &txn)) != 0)
        return rc;
    pc_sf_hdr h;
    rc = pc_hdr_read(s, txn, &h);
    mdb_txn_abort(txn);
    if (rc == 0)
        *gen = h.boot_gen;
    return rc;
}

int pc_store_next_boot_gen(pc_store *s, uint64_t *gen)
{
    if (s == NULL || gen == NULL || (s->flags & PC_STORE_RDONLY) != 0)
        return PC_EINVAL;
    int rc = pc_store_check_pid(s);
    if (rc != 0)
        return rc;
    for (int attempt = 0; attempt < 8; attempt++) {
        MDB_txn *txn;
        if ((rc = pc_store_txn_begin(s, 0, &txn)) != 0)
            return rc;
        pc_sf_hdr h;
        if ((rc = pc_hdr_read(s, txn, &h)) != 0) {
            mdb_txn_abort(txn);
            return rc;
        }
        h.boot_gen++;
        uint8_t buf[PC_SF_HDR_SIZE];
        pc_sf_hdr_encode(&h, buf);
        MDB_val k = {PC_SF_HDR_KEYLEN, (void *)PC_SF_HDR_KEY}, v = {sizeof buf, buf};
        rc = pc_store_txn_finish(s, txn, mdb_put(txn, s->meta, &k, &v, 0), 1,
                                 "commit the boot generation");
        if (rc == PC_STORE_AGAIN)
            continue;
        if (rc != 0)
            return rc;
        *gen = h.boot_gen;
        return 0;
    }
    return PC_EIO;
}
