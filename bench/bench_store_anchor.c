/*
 * bench_store_anchor.c - the anchors of `pcache-bench store`: the same data
 * set written and read back by
 *   - raw LMDB: one write transaction, records in key order with
 *     MDB_APPEND, durable commit (the naive one-record-per-entry
 *     ceiling), and once more with MDB_WRITEMAP; the load
 *     anchor is a cursor scan of that environment into an empty cache;
 *   - SQLite (libsqlite3, default journal and synchronous=FULL) with the
 *     table (collection, pkey, pvalue, expires): one INSERT per row in
 *     autocommit (a naive shutdown save, sampled for a few seconds: at
 *     disk-sync speed a million rows would take hours) and every row in
 *     one transaction; the load anchor is a SELECT of every row into an
 *     empty cache;
 *   - redis-server SAVE of the same keys and values (with their TTLs), and
 *     a restart until it answers, when redis-server is installed.
 * Each record carries its absolute expiry as the store does (8 bytes).
 */
#include "bench_store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t bs_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double bs_secs_since(uint64_t t0)
{
    return (double)(bench_now_ns() - t0) / 1e9;
}

static uint64_t bs_file_bytes(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* ---- raw LMDB ------------------------------------------------------------- */
#define BS_LMDB_CHECK(call)                                                                        \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != 0) {                                                                            \
            fprintf(stderr, "pcache-bench store: %s: %s\n", #call, mdb_strerror(rc_));             \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static int bs_lmdb_open(const char *path, unsigned flags, const bs_data *d, MDB_env **env)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return -1;
    BS_LMDB_CHECK(mdb_env_create(env));
    BS_LMDB_CHECK(mdb_env_set_mapsize(*env, (size_t)(d->value_bytes * 3 + (1u << 30))));
    BS_LMDB_CHECK(mdb_env_open(*env, path, flags, 0600));
    return 0;
}

/* One transaction of every record in key order; returns entries/s. */
static int bs_lmdb_save(const bs_data *d, const char *path, unsigned flags, double *rate,
                        uint64_t *file_bytes)
{
    MDB_env *env;
    if (bs_lmdb_open(path, flags, d, &env) != 0)
        return -1;
    int64_t now = bs_wall_ms();
    char buf[8 + 65536];
    uint64_t t0 = bench_now_ns();
    MDB_txn *txn;
    MDB_dbi dbi;
    BS_LMDB_CHECK(mdb_txn_begin(env, NULL, 0, &txn));
    BS_LMDB_CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
    for (size_t k = 0; k < d->n; k++) {
        size_t i = d->sorted[k];
        int64_t exp = d->ttl_ms[i] ? now + d->ttl_ms[i] : 0;
        memcpy(buf, &exp, 8);
        memcpy(buf + 8, bs_val(d, i), d->vlen[i]);
        MDB_val key = {d->keys.klen, (void *)bs_key(d, i)};
        MDB_val val = {8 + (size_t)d->vlen[i], buf};
        BS_LMDB_CHECK(mdb_put(txn, dbi, &key, &val, MDB_APPEND));
    }
    BS_LMDB_CHECK(mdb_txn_commit(txn));
    *rate = (double)d->n / bs_secs_since(t0);
    mdb_env_close(env);
    char file[600];
    snprintf(file, sizeof file, "%s/data.mdb", path);
    if (file_bytes != NULL)
        *file_bytes = bs_file_bytes(file);
    return 0;
}

/* A cursor scan of the environment, each record set into an empty cache
 * with its remaining TTL (what a load does, without decompression). */
static int bs_lmdb_load(const bs_data *d, const char *path, double *rate)
{
    MDB_env *env;
    if (bs_lmdb_open(path, MDB_RDONLY, d, &env) != 0)
        return -1;
    pc_coll *coll;
    pc_cache *c = bs_cache_new(d->n, &coll, NULL);
    uint64_t t0 = bench_now_ns();
    int64_t now = bs_wall_ms();
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_cursor *cur;
    BS_LMDB_CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
    BS_LMDB_CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
    BS_LMDB_CHECK(mdb_cursor_open(txn, dbi, &cur));
    MDB_val k, v;
    size_t loaded = 0;
    int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    for (; rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        int64_t exp;
        if (v.mv_size < 8)
            return -1;
        memcpy(&exp, v.mv_data, 8);
        int64_t ttl = exp == 0 ? 0 : exp - now;
        if (exp != 0 && ttl <= 0)
            continue;
        if (pc_set(coll, k.mv_data, k.mv_size, (char *)v.mv_data + 8, v.mv_size - 8, ttl, 0) != 0)
            return -1;
        loaded++;
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    *rate = (double)loaded / bs_secs_since(t0);
    mdb_env_close(env);
    pc_cache_destroy(c);
    return loaded == d->n ? 0 : -1;
}

/* ---- SQLite ----------------------------------------------------------------- */
static int bs_sql(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fprintf(stderr, "pcache-bench store: sqlite '%s': %s\n", sql, msg ? msg : "?");
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static int bs_sqlite_open(const char *path, sqlite3 **db)
{
    if (sqlite3_open(path, db) != SQLITE_OK) {
        fprintf(stderr, "pcache-bench store: sqlite open %s\n", path);
        return -1;
    }
    return bs_sql(*db, "CREATE TABLE IF NOT EXISTS pcache_entries (collection TEXT NOT NULL, "
                       "pkey BLOB NOT NULL, pvalue BLOB, expires INTEGER NOT NULL, "
                       "PRIMARY KEY (collection, pkey))");
}

/* Inserts rows [from, to) of d (in entry order, as a walk gives them);
 * with one_txn inside BEGIN/COMMIT, else each its own transaction. Stops
 * early when max_s passes; *done receives the rows written. */
static int bs_sqlite_insert(sqlite3 *db, const bs_data *d, size_t to, int one_txn, double max_s,
                            size_t *done)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO pcache_entries (collection, pkey, pvalue, expires) "
                           "VALUES ('sip', ?1, ?2, ?3)",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    if (one_txn && bs_sql(db, "BEGIN") != 0)
        return -1;
    int64_t now = bs_wall_ms();
    uint64_t t0 = bench_now_ns();
    size_t i = 0;
    for (; i < to; i++) {
        sqlite3_bind_blob(st, 1, bs_key(d, i), (int)d->keys.klen, SQLITE_STATIC);
        sqlite3_bind_blob(st, 2, bs_val(d, i), d->vlen[i], SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, d->ttl_ms[i] ? (now + d->ttl_ms[i]) / 1000 : 0);
        if (sqlite3_step(st) != SQLITE_DONE) {
            fprintf(stderr, "pcache-bench store: sqlite insert: %s\n", sqlite3_errmsg(db));
            sqlite3_finalize(st);
            return -1;
        }
        sqlite3_reset(st);
        if (!one_txn && (i & 7) == 7 && bs_secs_since(t0) > max_s) {
            i++;
            break;
        }
    }
    sqlite3_finalize(st);
    if (one_txn && bs_sql(db, "COMMIT") != 0)
        return -1;
    *done = i;
    return 0;
}

static int bs_sqlite_load(sqlite3 *db, const bs_data *d, double *rate)
{
    pc_coll *coll;
    pc_cache *c = bs_cache_new(d->n, &coll, NULL);
    sqlite3_stmt *st;
    uint64_t t0 = bench_now_ns();
    int64_t now_s = bs_wall_ms() / 1000;
    if (sqlite3_prepare_v2(db,
                           "SELECT pkey, pvalue, expires FROM pcache_entries WHERE collection = "
                           "'sip' AND (expires = 0 OR expires > ?1)",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(st, 1, now_s);
    size_t loaded = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t exp = sqlite3_column_int64(st, 2);
        int64_t ttl = exp == 0 ? 0 : (exp - now_s) * 1000;
        if (pc_set(coll, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0),
                   sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1), ttl, 0) != 0)
            break;
        loaded++;
    }
    sqlite3_finalize(st);
    *rate = (double)loaded / bs_secs_since(t0);
    pc_cache_destroy(c);
    return rc == SQLITE_DONE && loaded == d->n ? 0 : -1;
}

static int bs_sqlite_run(const bs_data *d, const char *dir, unsigned rounds, double rowwise_s,
                         bs_anchor_result *out)
{
    char path[600];
    double r[16];
    for (unsigned k = 0; k < rounds; k++) {
        snprintf(path, sizeof path, "%s/txn%u.sqlite", dir, k);
        sqlite3 *db;
        size_t done = 0;
        if (bs_sqlite_open(path, &db) != 0)
            return -1;
        uint64_t t0 = bench_now_ns();
        if (bs_sqlite_insert(db, d, d->n, 1, 0, &done) != 0)
            return -1;
        r[k] = (double)done / bs_secs_since(t0);
        if (k == 0 && bs_sqlite_load(db, d, &out->sqlite_load) != 0)
            return -1;
        sqlite3_close(db);
        unlink(path);
    }
    memcpy(out->sqlite_txn_save_r, r, rounds * sizeof r[0]);
    out->n_sqlite_txn = rounds;
    out->sqlite_txn_save = bench_median(r, rounds);
    snprintf(path, sizeof path, "%s/rowwise.sqlite", dir);
    sqlite3 *db;
    size_t done = 0;
    if (bs_sqlite_open(path, &db) != 0)
        return -1;
    uint64_t t0 = bench_now_ns();
    if (bs_sqlite_insert(db, d, d->n, 0, rowwise_s, &done) != 0)
        return -1;
    out->sqlite_rowwise_save = (double)done / bs_secs_since(t0);
    out->sqlite_rowwise_rows = done;
    sqlite3_close(db);
    unlink(path);
    return 0;
}

/* ---- redis-server ------------------------------------------------------------- */
struct bs_conn {
    int fd;
    char buf[1 << 16];
    size_t len, pos;
};

static int bs_connect(int port, struct bs_conn *c)
{
    c->len = c->pos = 0;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    return 0;
}

static int bs_send(struct bs_conn *c, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(c->fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads one reply line (simple string, error, integer) into line; bulk
 * replies are not used by this client. Returns its first byte or -1. */
static int bs_reply(struct bs_conn *c, char *line, size_t cap)
{
    size_t o = 0;
    for (;;) {
        if (c->pos == c->len) {
            ssize_t r = read(c->fd, c->buf, sizeof c->buf);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return -1;
            c->len = (size_t)r;
            c->pos = 0;
        }
        char ch = c->buf[c->pos++];
        if (ch == '\n')
            break;
        if (o + 1 < cap)
            line[o++] = ch;
    }
    if (o > 0 && line[o - 1] == '\r')
        o--;
    line[o] = 0;
    return o > 0 ? (unsigned char)line[0] : -1;
}

static int bs_cmd(struct bs_conn *c, const char *cmd, char *line, size_t cap)
{
    char out[256];
    int n = snprintf(out, sizeof out, "*1\r\n$%zu\r\n%s\r\n", strlen(cmd), cmd);
    if (bs_send(c, out, (size_t)n) != 0)
        return -1;
    return bs_reply(c, line, cap);
}

static pid_t bs_redis_start(const char *bin, const char *dir, int port)
{
    char portb[16];
    snprintf(portb, sizeof portb, "%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
        }
        execl(bin, bin, "--port", portb, "--bind", "127.0.0.1", "--dir", dir, "--save", "",
              "--appendonly", "no", "--dbfilename", "dump.rdb", "--daemonize", "no",
              "--protected-mode", "yes", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Connects, retrying while the server starts; then waits until it answers
 * PING with +PONG (a loading server answers -LOADING). */
static int bs_redis_ready(int port, struct bs_conn *c, double max_s)
{
    uint64_t t0 = bench_now_ns();
    char line[256];
    while (bs_connect(port, c) != 0) {
        if (bs_secs_since(t0) > max_s)
            return -1;
        bench_sleep_ns(2000000);
    }
    for (;;) {
        int r = bs_cmd(c, "PING", line, sizeof line);
        if (r == '+')
            return 0;
        if (r < 0 || bs_secs_since(t0) > max_s)
            return -1;
        bench_sleep_ns(1000000);
    }
}

static void bs_redis_stop(pid_t pid, struct bs_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static int bs_redis_fill(struct bs_conn *c, const bs_data *d)
{
    enum { BATCH = 512 };
    char *out = malloc(BATCH * 400);
    char line[256];
    if (out == NULL)
        return -1;
    for (size_t i = 0; i < d->n;) {
        size_t o = 0, k = 0;
        for (; k < BATCH && i < d->n; k++, i++) {
            if (d->ttl_ms[i]) {
                char ttl[24];
                int tl = snprintf(ttl, sizeof ttl, "%lld", (long long)d->ttl_ms[i]);
                o += (size_t)sprintf(out + o, "*5\r\n$3\r\nSET\r\n$16\r\n%.16s\r\n$%u\r\n",
                                     bs_key(d, i), d->vlen[i]);
                memcpy(out + o, bs_val(d, i), d->vlen[i]);
                o += d->vlen[i];
                o += (size_t)sprintf(out + o, "\r\n$2\r\nPX\r\n$%d\r\n%s\r\n", tl, ttl);
            } else {
                o += (size_t)sprintf(out + o, "*3\r\n$3\r\nSET\r\n$16\r\n%.16s\r\n$%u\r\n",
                                     bs_key(d, i), d->vlen[i]);
                memcpy(out + o, bs_val(d, i), d->vlen[i]);
                o += d->vlen[i];
                memcpy(out + o, "\r\n", 2);
                o += 2;
            }
        }
        if (bs_send(c, out, o) != 0)
            break;
        for (size_t r = 0; r < k; r++)
            if (bs_reply(c, line, sizeof line) != '+') {
                free(out);
                return -1;
            }
    }
    free(out);
    return 0;
}

static int bs_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &l) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int bs_redis_run(const bs_data *d, const char *dir, const char *bin, bs_anchor_result *out)
{
    if (bin == NULL)
        bin = access("/usr/bin/redis-server", X_OK) == 0 ? "/usr/bin/redis-server" : NULL;
    if (bin == NULL || access(bin, X_OK) != 0) {
        snprintf(out->redis_why, sizeof out->redis_why,
                 "no redis-server (install the Debian package or pass --redis PATH)");
        return 0;
    }
    char rdir[600];
    snprintf(rdir, sizeof rdir, "%s/redis", dir);
    if (mkdir(rdir, 0700) != 0)
        return -1;
    int port = bs_free_port();
    struct bs_conn c = {.fd = -1};
    char line[256];
    pid_t pid = bs_redis_start(bin, rdir, port);
    if (pid < 0 || bs_redis_ready(port, &c, 10) != 0 || bs_redis_fill(&c, d) != 0) {
        snprintf(out->redis_why, sizeof out->redis_why, "redis-server %s did not start or fill",
                 bin);
        if (pid > 0)
            bs_redis_stop(pid, &c);
        return 0;
    }
    uint64_t t0 = bench_now_ns();
    int r = bs_cmd(&c, "SAVE", line, sizeof line);
    double save_s = bs_secs_since(t0);
    bs_redis_stop(pid, &c);
    if (r != '+') {
        snprintf(out->redis_why, sizeof out->redis_why, "SAVE answered %.100s", line);
        return 0;
    }
    char rdb[700];
    snprintf(rdb, sizeof rdb, "%s/dump.rdb", rdir);
    out->redis_rdb_bytes = bs_file_bytes(rdb);
    out->redis_save = (double)d->n / save_s;
    t0 = bench_now_ns();
    pid = bs_redis_start(bin, rdir, port);
    if (pid < 0 || bs_redis_ready(port, &c, 60) != 0) {
        snprintf(out->redis_why, sizeof out->redis_why, "redis-server did not restart");
        if (pid > 0)
            bs_redis_stop(pid, &c);
        return 0;
    }
    out->redis_load = (double)d->n / bs_secs_since(t0);
    bs_redis_stop(pid, &c);
    out->redis_ran = 1;
    return 0;
}

int bs_anchors_run(const bs_data *d, const char *dir, unsigned rounds, double rowwise_s,
                   const char *redis_path, bs_anchor_result *out)
{
    memset(out, 0, sizeof *out);
    double r[16], wm[16];
    char path[600];
    if (rounds > 16)
        rounds = 16;
    for (unsigned k = 0; k < rounds; k++) {
        snprintf(path, sizeof path, "%s/lmdb%u", dir, k);
        if (bs_lmdb_save(d, path, 0, &r[k], k == 0 ? &out->lmdb_file_bytes : NULL) != 0)
            return -1;
        if (k == 0 && bs_lmdb_load(d, path, &out->lmdb_scan_load) != 0)
            return -1;
        bs_rmdir(path);
        snprintf(path, sizeof path, "%s/lmdbwm%u", dir, k);
        if (bs_lmdb_save(d, path, MDB_WRITEMAP, &wm[k], NULL) != 0)
            return -1;
        bs_rmdir(path);
    }
    memcpy(out->lmdb_append_save_r, r, rounds * sizeof r[0]);
    memcpy(out->lmdb_append_wm_save_r, wm, rounds * sizeof wm[0]);
    out->n_lmdb = rounds;
    out->lmdb_append_save = bench_median(r, rounds);
    out->lmdb_append_wm_save = bench_median(wm, rounds);
    if (bs_sqlite_run(d, dir, rounds < 3 ? rounds : 3, rowwise_s, out) != 0)
        return -1;
    return bs_redis_run(d, dir, redis_path, out);
}
