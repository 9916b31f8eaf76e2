/*
 * store_compact.c - whole-store operations that depend on who else has the
 * store open: the lock probe that lets an offline reader fail instead of
 * hanging, and compaction (the environment copied without its free pages
 * and swapped in atomically). Not a reader or writer of snapshots: the
 * bytes of every record are copied as they are.
 *
 * LMDB's lock protocol (liblmdb 0.9, lock.mdb): every process that has the
 * environment open holds a SHARED fcntl lock on byte 0 of lock.mdb; the
 * first opener holds it EXCLUSIVELY while it (re)initialises the reader
 * table, then downgrades. An opener that meets an exclusive holder waits
 * for it (F_SETLKW), without a timeout. Hence:
 *
 *  - pc_store_lock_owner asks (F_GETLK, never blocking) whether a process
 *    holds byte 0 exclusively, and which one.
 *  - pc_store_compact takes byte 0 exclusively itself. That succeeds only
 *    when no other process has the environment open, and while it is held
 *    no process can open it (they wait). fcntl locks belong to the
 *    process, not to a descriptor, so LMDB must not touch lock.mdb from
 *    this process meanwhile: the environment is read with MDB_NOLOCK.
 *
 * Compaction, in order (invariant: data.mdb is at every instant either the
 * old file or the complete, checked new one):
 *   1. lock byte 0 exclusively (else PC_EBUSY naming a holder);
 *   2. open data.mdb with MDB_RDONLY | MDB_NOLOCK, check it is a pcache
 *      store of a version this build knows and that it is not truncated;
 *   3. mdb_env_copyfd2(MDB_CP_COMPACT) into data.mdb.compact beside it
 *      (same mode and owner), fsync;
 *   4. open the copy and compare it with the original: the same keys and
 *      values in "meta" and "blocks", the same named databases;
 *   5. rename the copy over data.mdb, fsync the directory;
 *   6. LMDB's reader table still records the old file's last transaction
 *      id, and a process waiting on byte 0 would adopt it: so, still
 *      holding byte 0, open the environment normally once - LMDB takes its
 *      first-opener path (this process already owns the exclusive lock) and
 *      re-initialises the table from the new file - then close everything.
 * A crash before 5 leaves the old store and a stray data.mdb.compact (the
 * next compact deletes it and starts afresh); after 5, the new store (step 6 is redone by
 * whichever process opens it first).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_int.h"

#define PC_COMPACT_TMP "data.mdb.compact"

struct pc_cp {
    char dir[4096];
    char data[4200], lock[4200], tmp[4200];
    char *errbuf;
    size_t errlen;
};

__attribute__((format(printf, 3, 4))) static int pc_cp_fail(struct pc_cp *c, int rc,
                                                            const char *fmt, ...)
{
    if (c->errbuf != NULL && c->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->errbuf, c->errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* "lmdb:///abs/path" or a path -> the directory and its file names. */
static int pc_cp_paths(struct pc_cp *c, const char *where)
{
    const char *p = where;
    if (strncmp(where, "lmdb:", 5) == 0) {
        if (strncmp(where, "lmdb:///", 8) != 0)
            return pc_cp_fail(c, PC_EURL, "store URL '%s': expected lmdb:///absolute/path", where);
        p = where + 7;
    } else if (strstr(where, "://") != NULL) {
        return pc_cp_fail(c, PC_EURL, "store URL '%s': only lmdb:// is a snapshot store", where);
    }
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        n--;
    if (n == 0 || n >= sizeof c->dir)
        return pc_cp_fail(c, PC_EINVAL, "store path '%s' is empty or too long", where);
    memcpy(c->dir, p, n);
    c->dir[n] = 0;
    snprintf(c->data, sizeof c->data, "%s/data.mdb", c->dir);
    snprintf(c->lock, sizeof c->lock, "%s/lock.mdb", c->dir);
    snprintf(c->tmp, sizeof c->tmp, "%s/" PC_COMPACT_TMP, c->dir);
    return 0;
}

int pc_store_lock_owner(const char *where, long *pid)
{
    struct pc_cp c = {.errbuf = NULL};
    if (where == NULL || pid == NULL)
        return PC_EINVAL;
    int rc = pc_cp_paths(&c, where);
    if (rc != 0)
        return rc;
    int fd = open(c.lock, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : PC_EIO; /* no lock file: nobody has it open */
    /* Would a shared lock on byte 0 be granted? F_GETLK answers with the
     * conflicting (exclusive) lock, or F_UNLCK. */
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    rc = fcntl(fd, F_GETLK, &fl) != 0 ? PC_EIO : 0;
    close(fd);
    if (rc == 0 && fl.l_type != F_UNLCK) {
        *pid = (long)fl.l_pid;
        return PC_ELOCKED;
    }
    return rc;
}

/* Opens path (a directory, or a file with MDB_NOSUBDIR) read-only without
 * touching any lock file. */
static int pc_cp_env(const char *path, unsigned extra, MDB_env **out)
{
    MDB_env *env = NULL;
    int mrc = mdb_env_create(&env);
    if (mrc == 0)
        mrc = mdb_env_set_maxdbs(env, 4);
    if (mrc == 0)
        mrc = mdb_env_open(env, path, MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS | extra, 0640);
    if (mrc != 0) {
        if (env != NULL)
            mdb_env_close(env);
        return mrc;
    }
    *out = env;
    return 0;
}

/* The store header of an environment opened by pc_cp_env; also checks the
 * file is not shorter than its last page. */
static int pc_cp_check_store(struct pc_cp *c, MDB_env *env)
{
    MDB_envinfo ei;
    MDB_stat es;
    struct stat st;
    if (mdb_env_info(env, &ei) != 0 || mdb_env_stat(env, &es) != 0 || stat(c->data, &st) != 0)
        return pc_cp_fail(c, PC_EIO, "store %s: cannot stat data.mdb", c->dir);
    uint64_t need = (uint64_t)(ei.me_last_pgno + 1) * es.ms_psize;
    if ((uint64_t)st.st_size < need)
        return pc_cp_fail(c, PC_ECORRUPT,
                          "store %s: data.mdb is %llu bytes but its last committed page ends at "
                          "%llu: the file is truncated",
                          c->dir, (unsigned long long)st.st_size, (unsigned long long)need);
    MDB_txn *txn;
    MDB_dbi meta;
    int mrc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
    if (mrc != 0)
        return pc_cp_fail(c, PC_EIO, "store %s: %s", c->dir, mdb_strerror(mrc));
    MDB_val k = {PC_SF_HDR_KEYLEN, (void *)PC_SF_HDR_KEY}, v;
    int rc = 0;
    if ((mrc = mdb_dbi_open(txn, "meta", 0, &meta)) != 0 ||
        (mrc = mdb_get(txn, meta, &k, &v)) != 0) {
        rc = pc_cp_fail(c, PC_ESTORE, "store %s: not a pcache store (%s)", c->dir,
                        mdb_strerror(mrc));
    } else {
        pc_sf_hdr h;
        const char *why = "";
        rc = pc_sf_hdr_decode(v.mv_data, v.mv_size, &h, &why);
        if (rc != 0)
            rc = pc_cp_fail(c, rc, "store %s: %s", c->dir, why);
    }
    mdb_txn_abort(txn);
    return rc;
}

/* Compares database name of two environments key by key and value by
 * value; *entries += the entries compared. 0 when identical. */
static int pc_cp_same_db(MDB_txn *ta, MDB_txn *tb, const char *name, uint64_t *entries)
{
    MDB_dbi da, db;
    MDB_cursor *ca = NULL, *cb = NULL;
    int ra, rb, same = 0;
    if (mdb_dbi_open(ta, name, 0, &da) != 0 || mdb_dbi_open(tb, name, 0, &db) != 0 ||
        mdb_cursor_open(ta, da, &ca) != 0 || mdb_cursor_open(tb, db, &cb) != 0)
        goto out;
    MDB_val ka, va, kb, vb;
    ra = mdb_cursor_get(ca, &ka, &va, MDB_FIRST);
    rb = mdb_cursor_get(cb, &kb, &vb, MDB_FIRST);
    while (ra == 0 && rb == 0) {
        if (ka.mv_size != kb.mv_size || va.mv_size != vb.mv_size ||
            memcmp(ka.mv_data, kb.mv_data, ka.mv_size) != 0 ||
            memcmp(va.mv_data, vb.mv_data, va.mv_size) != 0)
            goto out;
        (*entries)++;
        ra = mdb_cursor_get(ca, &ka, &va, MDB_NEXT);
        rb = mdb_cursor_get(cb, &kb, &vb, MDB_NEXT);
    }
    same = ra == MDB_NOTFOUND && rb == MDB_NOTFOUND;
out:
    if (ca != NULL)
        mdb_cursor_close(ca);
    if (cb != NULL)
        mdb_cursor_close(cb);
    return same ? 0 : -1;
}

static int pc_cp_compare(struct pc_cp *c, MDB_env *orig, uint64_t *entries)
{
    MDB_env *copy = NULL;
    MDB_txn *ta = NULL, *tb = NULL;
    int mrc = pc_cp_env(c->tmp, MDB_NOSUBDIR, &copy), rc;
    if (mrc != 0)
        return pc_cp_fail(c, PC_EIO, "store %s: cannot open the compacted copy: %s", c->dir,
                          mdb_strerror(mrc));
    rc = PC_EIO;
    if (mdb_txn_begin(orig, NULL, MDB_RDONLY, &ta) == 0 &&
        mdb_txn_begin(copy, NULL, MDB_RDONLY, &tb) == 0) {
        uint64_t n = 0;
        if (pc_cp_same_db(ta, tb, "meta", &n) == 0 && pc_cp_same_db(ta, tb, "blocks", &n) == 0) {
            *entries = n;
            rc = 0;
        }
    }
    if (ta != NULL)
        mdb_txn_abort(ta);
    if (tb != NULL)
        mdb_txn_abort(tb);
    mdb_env_close(copy);
    if (rc != 0)
        return pc_cp_fail(c, PC_EIO,
                          "store %s: the compacted copy differs from the store: not installed",
                          c->dir);
    return 0;
}

static int pc_cp_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

/* 1. byte 0 of lock.mdb, exclusively, without waiting: *lfd holds it
 * (closing it releases it). mode: data.mdb's, for a lock.mdb made here. */
static int pc_cp_lock(struct pc_cp *c, mode_t mode, int *lfd)
{
    *lfd = open(c->lock, O_RDWR | O_CREAT | O_CLOEXEC, mode & 0666);
    if (*lfd < 0)
        return pc_cp_fail(c, PC_EIO, "store %s: lock.mdb: %s", c->dir, strerror(errno));
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    if (fcntl(*lfd, F_SETLK, &fl) == 0)
        return 0;
    struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    long holder = fcntl(*lfd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK ? (long)q.l_pid : 0;
    return pc_cp_fail(c, PC_EBUSY,
                      "store %s is open in another process (pid %ld): compaction needs the "
                      "store to itself; stop the processes that use it",
                      c->dir, holder);
}

/* 3. the compacted copy of env in c->tmp, with data.mdb's (dst) mode and
 * owner, durable; *tst its size. *created once the file exists (the
 * caller removes it unless it is installed). */
static int pc_cp_copy(struct pc_cp *c, MDB_env *env, const struct stat *dst, struct stat *tst,
                      int *created)
{
    /* a stray copy of a compaction that died is removed, not reused: its
     * mode and owner are not data.mdb's */
    if (unlink(c->tmp) != 0 && errno != ENOENT)
        return pc_cp_fail(c, PC_EIO, "store %s: cannot remove a stale %s: %s", c->dir, c->tmp,
                          strerror(errno));
    int tfd = open(c->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, dst->st_mode & 0777);
    if (tfd < 0)
        return pc_cp_fail(c, PC_EIO, "store %s: cannot create %s: %s", c->dir, c->tmp,
                          strerror(errno));
    *created = 1;
    int rc = 0, mrc;
    if (fchmod(tfd, dst->st_mode & 07777) != 0) /* the umask applied at open */
        rc = pc_cp_fail(c, PC_EIO, "store %s: cannot give the copy data.mdb's mode: %s", c->dir,
                        strerror(errno));
    else if (fchown(tfd, dst->st_uid, dst->st_gid) != 0 &&
             (dst->st_uid != geteuid() || dst->st_gid != getegid()))
        rc = pc_cp_fail(c, PC_EIO, "store %s: cannot give the copy data.mdb's owner: %s", c->dir,
                        strerror(errno));
    else if ((mrc = mdb_env_copyfd2(env, tfd, MDB_CP_COMPACT)) != 0)
        rc = pc_cp_fail(c, PC_EIO, "store %s: compacting copy failed: %s", c->dir,
                        mdb_strerror(mrc));
    else if (fsync(tfd) != 0)
        rc = pc_cp_fail(c, PC_EIO, "store %s: fsync of the copy: %s", c->dir, strerror(errno));
    else if (fstat(tfd, tst) != 0)
        rc = pc_cp_fail(c, PC_EIO, "store %s: stat of the copy: %s", c->dir, strerror(errno));
    close(tfd);
    return rc;
}

/* 6. the reader table reset from the new file (size bytes) while byte 0
 * is still ours. */
static int pc_cp_reopen(struct pc_cp *c, off_t size)
{
    MDB_env *fresh = NULL;
    int mrc = mdb_env_create(&fresh);
    if (mrc == 0)
        mrc = mdb_env_set_maxdbs(fresh, 4);
    if (mrc == 0)
        mrc = mdb_env_set_mapsize(fresh, (size_t)size + (1u << 20));
    if (mrc == 0)
        mrc = mdb_env_open(fresh, c->dir, MDB_RDONLY | MDB_NOTLS, 0640);
    if (fresh != NULL)
        mdb_env_close(fresh);
    if (mrc != 0)
        return pc_cp_fail(c, PC_EIO,
                          "store %s: compacted, but re-opening it failed: %s (the next opener "
                          "re-initialises lock.mdb)",
                          c->dir, mdb_strerror(mrc));
    return 0;
}

int pc_store_compact_with(const char *where, pc_store_check_fn check,
                          pc_store_compact_result *result, char *errbuf, size_t errlen)
{
    struct pc_cp c = {.errbuf = errbuf, .errlen = errlen};
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = 0;
    if (where == NULL || check == NULL)
        return PC_EINVAL;
    int rc = pc_cp_paths(&c, where), lfd = -1, created = 0, installed = 0;
    MDB_env *env = NULL;
    if (rc != 0)
        return rc;
    struct stat dst, tst;
    if (stat(c.data, &dst) != 0)
        return pc_cp_fail(&c, errno == ENOENT ? PC_ESTORE : PC_EIO, "store %s: data.mdb: %s", c.dir,
                          strerror(errno));
    if ((rc = pc_cp_lock(&c, dst.st_mode, &lfd)) != 0)
        goto out;
    /* 2. the structure (nobody can write: byte 0 is ours, so LMDB's reader
     * table is not used by the check either), then the store, read without
     * LMDB's locks */
    char why[600];
    if ((rc = check(c.dir, PC_SCK_LOCKED, why, sizeof why)) != 0) {
        rc = pc_cp_fail(&c, rc, "%s", why);
        goto out;
    }
    int mrc = pc_cp_env(c.dir, 0, &env);
    if (mrc != 0) {
        rc = pc_cp_fail(&c, mrc == MDB_INVALID || mrc == MDB_VERSION_MISMATCH ? PC_ESTORE : PC_EIO,
                        "store %s: cannot open the LMDB environment: %s", c.dir, mdb_strerror(mrc));
        goto out;
    }
    /* 4. after the copy (3): it holds exactly what the store holds */
    uint64_t entries = 0;
    if ((rc = pc_cp_check_store(&c, env)) != 0 ||
        (rc = pc_cp_copy(&c, env, &dst, &tst, &created)) != 0 ||
        (rc = pc_cp_compare(&c, env, &entries)) != 0)
        goto out;
    mdb_env_close(env);
    env = NULL;
    /* 5. swap it in */
    if (rename(c.tmp, c.data) != 0) {
        rc = pc_cp_fail(&c, PC_EIO, "store %s: rename of the copy: %s", c.dir, strerror(errno));
        goto out;
    }
    installed = 1;
    if (pc_cp_fsync_dir(c.dir) != 0) {
        rc = pc_cp_fail(&c, PC_EIO, "store %s: fsync of the directory: %s", c.dir, strerror(errno));
        goto out;
    }
    if ((rc = pc_cp_reopen(&c, tst.st_size)) != 0)
        goto out;
    if (result != NULL) {
        memset(result, 0, sizeof *result);
        result->bytes_before = (uint64_t)dst.st_size;
        result->bytes_after = (uint64_t)tst.st_size;
        result->entries = entries;
    }
out:
    if (env != NULL)
        mdb_env_close(env);
    if (rc != 0 && created && !installed)
        unlink(c.tmp); /* the old data.mdb stands */
    if (lfd >= 0)
        close(lfd); /* releases this process's locks on lock.mdb */
    return rc;
}
