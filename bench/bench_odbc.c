/*
 * bench_odbc.c - pcache-bench odbc: rows per second of the ODBC exporter's
 * save (one transaction, the dialect's statement shape) and load (block
 * cursor) on SQLite, PostgreSQL and MariaDB, against two anchors: the
 * same driver row by row with autocommit (a naive SQL save: time-boxed
 * and extrapolated), and for PostgreSQL `psql \copy` of the same
 * rows (the server's own bulk path). 16-byte keys, 200-byte values; 100k
 * and 1M entries (--quick: 100k only). The servers are private ones
 * started for the run (tests/support/odbc_servers.sh) with their default
 * durability settings, so a commit is an fsync as in production.
 *
 * Saves and \copy run in interleaved rounds - the save as configured (the
 * dialect's default pipeline), `\copy` (PostgreSQL), the save with the
 * pipeline off (first in odd rounds); again - each into an emptied table (vacuumed on
 * PostgreSQL), so that every round compares the same work under the same
 * machine load. Reported: the median of each rate and the median of the
 * per-round ratios (5 rounds at 100k, 3 with --quick and at 1M).
 */
#include "bench_cmds.h"
#include "bench_util.h"
#include "odbc_testenv.h"
#include "pcache.h"
#include "pcache_odbc.h"

#include <sql.h>
#include <sqlext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KLEN 16
#define VLEN 200
#define ROUNDS_MAX 15

struct drv {
    const char *name; /* JSON prefix */
    const char *target;
    /* medians over the rounds */
    double save_rps, serial_rps, load_rps, rowwise_rps, copy_rps;
    double ratio_copy, ratio_copy_serial, gain; /* of the per-round ratios */
    int private_target; /* the bench's own server, not a PCACHE_BENCH_ODBC_* target */
    int ok;
    double ratio_copy_min, ratio_copy_max; /* the spread of the per-round ratios */
};

static void mk_key(size_t i, char k[KLEN + 1])
{
    snprintf(k, KLEN + 1, "k%015u", (unsigned)(i % 1000000000u));
}

/* Row by row with autocommit, through raw ODBC, as a naive save does: one
 * prepared INSERT re-bound and executed per row, each its own transaction.
 * Runs for at most budget_s seconds or n rows; returns rows/s. */
static double rowwise(const char *target, size_t n, double budget_s)
{
    SQLHENV env;
    SQLHDBC dbc;
    SQLHSTMT st;
    char cs[600];
    if (strncmp(target, "odbc://", 7) == 0)
        snprintf(cs, sizeof cs, "DSN=%s", target + 7);
    else
        snprintf(cs, sizeof cs, "%s", strncmp(target, "odbc:", 5) == 0 ? target + 5 : target);
    SQLAllocHandle(SQL_HANDLE_ENV, SQL_NULL_HANDLE, &env);
    SQLSetEnvAttr(env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0);
    SQLAllocHandle(SQL_HANDLE_DBC, env, &dbc);
    double rps = 0;
    if (!SQL_SUCCEEDED(SQLDriverConnect(dbc, NULL, (SQLCHAR *)cs, SQL_NTS, NULL, 0, NULL,
                                        SQL_DRIVER_NOPROMPT))) {
        fprintf(stderr, "bench odbc: rowwise: cannot connect to %s\n", target);
        goto out_env;
    }
    SQLAllocHandle(SQL_HANDLE_STMT, dbc, &st);
    SQLExecDirect(st, (SQLCHAR *)"DELETE FROM pcache_entries WHERE collection = 'rowwise'",
                  SQL_NTS);
    SQLPrepare(st,
               (SQLCHAR *)"INSERT INTO pcache_entries (collection, pkey, pvalue, expires, "
                          "is_counter) VALUES ('rowwise', ?, ?, 0, 0)",
               SQL_NTS);
    char k[KLEN + 1], v[VLEN];
    SQLLEN kl = KLEN, vl = VLEN;
    uint64_t t0 = bench_now_ns();
    size_t i;
    for (i = 0; i < n; i++) {
        mk_key(i, k);
        bench_fill_value(v, VLEN, i);
        SQLBindParameter(st, 1, SQL_PARAM_INPUT, SQL_C_BINARY, SQL_VARBINARY, KLEN, 0, k, KLEN,
                         &kl);
        SQLBindParameter(st, 2, SQL_PARAM_INPUT, SQL_C_BINARY, SQL_VARBINARY, VLEN, 0, v, VLEN,
                         &vl);
        if (!SQL_SUCCEEDED(SQLExecute(st))) {
            fprintf(stderr, "bench odbc: rowwise insert failed at row %zu\n", i);
            break;
        }
        if ((i & 63) == 63 && (double)(bench_now_ns() - t0) / 1e9 > budget_s) {
            i++;
            break;
        }
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    rps = secs > 0 ? (double)i / secs : 0;
    SQLFreeStmt(st, SQL_CLOSE);
    SQLExecDirect(st, (SQLCHAR *)"DELETE FROM pcache_entries WHERE collection = 'rowwise'",
                  SQL_NTS);
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    SQLDisconnect(dbc);
out_env:
    SQLFreeHandle(SQL_HANDLE_DBC, dbc);
    SQLFreeHandle(SQL_HANDLE_ENV, env);
    return rps;
}

/* The text-format file of the same n rows for psql \copy (bytea as hex),
 * written once per size. */
static int pg_copy_file(size_t n, const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    char k[KLEN + 1], v[VLEN];
    for (size_t i = 0; i < n; i++) {
        mk_key(i, k);
        bench_fill_value(v, VLEN, i);
        fputs("copy\t\\\\x", f);
        for (size_t j = 0; j < KLEN; j++)
            fprintf(f, "%02x", (unsigned char)k[j]);
        fputs("\t\\\\x", f);
        for (size_t j = 0; j < VLEN; j++)
            fprintf(f, "%02x", (unsigned char)v[j]);
        fputs("\t0\t0\n", f);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* psql \copy of the n rows of path: rows/s of the psql run, connection
 * included (a few ms). */
static double pg_copy(size_t n, const char *path)
{
    uint64_t t0 = bench_now_ns();
    int rc = odbc_env_sh("psql '%s' pcachetest '\\copy pcache_entries (collection, pkey, pvalue, "
                         "expires, is_counter) FROM %s'",
                         odbc_env_dir(), path);
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    return rc == 0 && secs > 0 ? (double)n / secs : 0;
}

/* Before each timed save or \copy: no rows of either (the save's own
 * DELETE finds none, as \copy's table has none), and no dead rows left for
 * the server to clean up in the background during the next round (InnoDB's
 * purge of 100k deleted rows halved the next save's rate): TRUNCATE on the
 * bench's private servers, DELETE (and VACUUM on PostgreSQL) on a target
 * given by PCACHE_BENCH_ODBC_*, whose other rows stay. */
static void empty_table(const struct drv *d)
{
    if (d->private_target) {
        odbc_env_sql(d->target, strcmp(d->name, "sqlite") == 0 ? "DELETE FROM pcache_entries"
                                                               : "TRUNCATE TABLE pcache_entries");
        return;
    }
    odbc_env_sql(d->target, "DELETE FROM pcache_entries WHERE collection IN ('bench', 'copy')");
    if (strcmp(d->name, "pg") == 0)
        odbc_env_sql(d->target, "VACUUM pcache_entries");
}

/* PCACHE_BENCH_ODBC_LOG=1: the exporter's log (with the save's phase
 * timings at debug level) on stderr */
static void log_stderr(void *ctx, int level, const char *msg)
{
    (void)ctx;
    (void)level;
    fprintf(stderr, "%s\n", msg);
}

static int open_target(const struct drv *d, int pipeline, pc_odbc **o)
{
    pc_odbc_config oc;
    pc_odbc_config_init(&oc);
    oc.flags = PC_ODBC_CREATE;
    oc.pipeline = pipeline;
    const char *shape = getenv("PCACHE_BENCH_ODBC_SHAPE"); /* 1 row, 2 multi, 3 array, 4 packed */
    if (shape != NULL)
        oc.shape = atoi(shape);
    const char *batch = getenv("PCACHE_BENCH_ODBC_BATCH"); /* rows per statement / array */
    if (batch != NULL)
        oc.batch_rows = (unsigned)atoi(batch);
    const char *lg = getenv("PCACHE_BENCH_ODBC_LOG");
    if (lg != NULL && strcmp(lg, "1") == 0) {
        oc.log.fn = log_stderr;
        oc.log.level = PC_LOG_DEBUG;
    }
    char err[1024];
    int rc = pc_odbc_open(d->target, &oc, o, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "bench odbc: %s: %s\n", d->name, err);
    return rc;
}

static int timed_save(const struct drv *d, pc_odbc *o, pc_coll *co, double *rps)
{
    empty_table(d);
    pc_odbc_result r;
    int rc = pc_odbc_save(o, co, &r);
    if (rc != 0)
        fprintf(stderr, "bench odbc: %s: save: %s\n", d->name, pc_odbc_errmsg(o));
    *rps = rc == 0 ? r.rate : 0;
    return rc;
}

static int run_size(struct drv *d, size_t n, unsigned rounds, int json)
{
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "bench=20";
    cfg.mem_mb = 64 + n * (KLEN + VLEN + 96) / (1024 * 1024);
    cfg.lock_memory = 0;
    pc_cache *c = NULL;
    pc_coll *co = NULL;
    pc_odbc *o = NULL, *os = NULL;
    int rc = pc_cache_create(&cfg, &c);
    if (rc == 0)
        rc = pc_coll_find(c, "bench", 5, &co);
    char k[KLEN + 1], v[VLEN];
    for (size_t i = 0; rc == 0 && i < n; i++) {
        mk_key(i, k);
        bench_fill_value(v, VLEN, i);
        rc = pc_set(co, k, KLEN, v, VLEN, 0, 0);
    }
    /* PCACHE_BENCH_ODBC_PIPELINE (1 on, 2 off) forces the configured saves' pipeline */
    const char *pl = getenv("PCACHE_BENCH_ODBC_PIPELINE");
    if (rc == 0)
        rc = open_target(d, pl != NULL ? atoi(pl) : PC_ODBC_PIPELINE_DEFAULT, &o);
    if (rc == 0)
        rc = open_target(d, PC_ODBC_PIPELINE_OFF, &os);
    char path[400];
    snprintf(path, sizeof path, "%s/copy.txt", odbc_env_dir());
    int copy = rc == 0 && strcmp(d->name, "pg") == 0 && pc_odbc_is_url(d->target) &&
               pg_copy_file(n, path) == 0;
    double save[ROUNDS_MAX], serial[ROUNDS_MAX], cp[ROUNDS_MAX];
    double rc_ratio[ROUNDS_MAX], rs_ratio[ROUNDS_MAX], gain[ROUNDS_MAX];
    for (unsigned i = 0; rc == 0 && i < rounds; i++) {
        /* odd rounds run the serial save first: a drift of the machine's
         * load within a round favours neither */
        if (i % 2 == 1)
            rc = timed_save(d, os, co, &serial[i]);
        if (rc == 0)
            rc = timed_save(d, o, co, &save[i]);
        if (rc == 0 && copy) {
            empty_table(d);
            cp[i] = pg_copy(n, path);
            copy = cp[i] > 0;
        }
        if (rc == 0 && i % 2 == 0)
            rc = timed_save(d, os, co, &serial[i]);
        if (rc != 0)
            break;
        gain[i] = serial[i] > 0 ? save[i] / serial[i] : 0;
        rc_ratio[i] = copy ? save[i] / cp[i] : 0;
        rs_ratio[i] = copy ? serial[i] / cp[i] : 0;
        if (!json)
            printf("%-8s %8zu rows: round %u: save %9.0f rows/s, serial %9.0f (x%.2f)%s", d->name,
                   n, i + 1, save[i], serial[i], gain[i], copy ? "" : "\n");
        if (!json && copy)
            printf(", \\copy %9.0f (save/copy %.2f, serial/copy %.2f)\n", cp[i], rc_ratio[i],
                   rs_ratio[i]);
        fflush(stdout);
    }
    if (copy)
        remove(path);
    if (rc == 0) {
        d->save_rps = bench_median(save, rounds);
        d->serial_rps = bench_median(serial, rounds);
        d->gain = bench_median(gain, rounds);
        d->copy_rps = copy ? bench_median(cp, rounds) : 0;
        if (copy)
            bench_minmax(rc_ratio, rounds, &d->ratio_copy_min, &d->ratio_copy_max);
        d->ratio_copy = copy ? bench_median(rc_ratio, rounds) : 0;
        d->ratio_copy_serial = copy ? bench_median(rs_ratio, rounds) : 0;
        /* the last save left the rows: load them into an empty cache */
        pc_odbc_result r;
        pc_cache_destroy(c);
        c = NULL;
        rc = pc_cache_create(&cfg, &c);
        if (rc == 0)
            rc = pc_coll_find(c, "bench", 5, &co);
        if (rc == 0 && (rc = pc_odbc_load(o, co, &r)) != 0)
            fprintf(stderr, "bench odbc: %s: load: %s\n", d->name, pc_odbc_errmsg(o));
        if (rc == 0 && r.rows != n) {
            fprintf(stderr, "bench odbc: %s: loaded %llu of %zu rows\n", d->name,
                    (unsigned long long)r.rows, n);
            rc = PC_EIO;
        }
        d->load_rps = rc == 0 ? r.rate : 0;
    }
    pc_odbc_close(o);
    pc_odbc_close(os);
    pc_cache_destroy(c);
    if (rc != 0)
        return rc;
    d->rowwise_rps = rowwise(d->target, n, 4.0);
    d->ok = 1;
    if (!json)
        printf("%-8s %8zu rows: median of %u: save %9.0f rows/s (serial %.0f, x%.2f), load %9.0f "
               "rows/s, row-by-row autocommit %7.0f rows/s (x%.0f)%s",
               d->name, n, rounds, d->save_rps, d->serial_rps, d->gain, d->load_rps, d->rowwise_rps,
               d->rowwise_rps > 0 ? d->save_rps / d->rowwise_rps : 0, d->copy_rps > 0 ? "" : "\n");
    if (!json && d->copy_rps > 0)
        printf(", psql \\copy %.0f rows/s (save/copy %.2f, serial/copy %.2f)\n", d->copy_rps,
               d->ratio_copy, d->ratio_copy_serial);
    return 0;
}

int bench_cmd_odbc(int argc, char **argv)
{
    int quick = 0, json = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else {
            fprintf(stderr, "usage: pcache-bench odbc [--quick] [--json]\n");
            return 2;
        }
    }
    /* PCACHE_BENCH_ODBC_ROUNDS: rounds at 100k (1M runs 3) */
    const char *rs = getenv("PCACHE_BENCH_ODBC_ROUNDS");
    unsigned rounds = rs != NULL ? (unsigned)atoi(rs) : quick ? 3 : 5;
    if (rounds < 1)
        rounds = 1;
    if (rounds > ROUNDS_MAX)
        rounds = ROUNDS_MAX;
    int rc = odbc_env_start("pcache-bench odbc", 1);
    if (rc != 0)
        return rc;
    /* PCACHE_BENCH_ODBC_{SQLITE,PG,MARIADB} replace a target (connection
     * string experiments: driver options such as Protocol=7.4-1; "" leaves
     * the driver out) */
    const char *ov_s = getenv("PCACHE_BENCH_ODBC_SQLITE"), *ov_p = getenv("PCACHE_BENCH_ODBC_PG");
    const char *ov_m = getenv("PCACHE_BENCH_ODBC_MARIADB");
    struct drv drivers[3] = {
        {.name = "sqlite", .target = ov_s != NULL ? ov_s : odbc_env_sqlite()},
        {.name = "pg", .target = ov_p != NULL ? ov_p : odbc_env_pg()},
        {.name = "mariadb",
         .target = ov_m != NULL              ? ov_m
                   : odbc_env_have_mariadb() ? odbc_env_mariadb()
                                             : NULL},
    };
    drivers[0].private_target = ov_s == NULL;
    drivers[1].private_target = ov_p == NULL;
    drivers[2].private_target = ov_m == NULL;
    for (size_t i = 0; i < 3; i++) /* an empty override leaves the driver out */
        if (drivers[i].target != NULL && drivers[i].target[0] == '\0')
            drivers[i].target = NULL;
    const size_t sizes[2] = {100000, 1000000};
    bench_json j;
    if (json) {
        char now[32];
        bench_utc_now(now, sizeof now);
        bench_json_begin(&j, stdout);
        bench_json_str(&j, "bench", "odbc");
        bench_json_str(&j, "utc", now);
        bench_json_int(&j, "key_bytes", KLEN);
        bench_json_int(&j, "value_bytes", VLEN);
        bench_json_int(&j, "rounds", (long long)rounds);
        bench_json_bool(&j, "quick", quick);
    }
    if (quick && !json)
        printf("QUICK: 100k entries only, %u rounds (the full run adds 1M)\n", rounds);
    int failed = 0;
    for (size_t s = 0; s < (quick ? 1u : 2u); s++) {
        for (size_t i = 0; i < 3; i++) {
            struct drv *d = &drivers[i];
            if (d->target == NULL)
                continue;
            if (run_size(d, sizes[s], s == 0 ? rounds : 3, json) != 0) {
                failed = 1;
                continue;
            }
            if (!json)
                continue;
            /* the 100k figures carry the plain names; 1M ones end in _1m */
            const char *sfx = s == 0 ? "" : "_1m";
            char key[64];
            snprintf(key, sizeof key, "%s_rows_per_s%s", d->name, sfx);
            bench_json_num(&j, key, d->save_rps);
            snprintf(key, sizeof key, "%s_rows_per_s_serial%s", d->name, sfx);
            bench_json_num(&j, key, d->serial_rps);
            snprintf(key, sizeof key, "%s_pipeline_gain%s", d->name, sfx);
            bench_json_num(&j, key, d->gain);
            snprintf(key, sizeof key, "%s_load_rows_per_s%s", d->name, sfx);
            bench_json_num(&j, key, d->load_rps);
            snprintf(key, sizeof key, "%s_rowwise_rows_per_s%s", d->name, sfx);
            bench_json_num(&j, key, d->rowwise_rps);
            snprintf(key, sizeof key, "%s_ratio_vs_rowwise%s", d->name, sfx);
            bench_json_num(&j, key, d->rowwise_rps > 0 ? d->save_rps / d->rowwise_rps : 0);
            if (d->copy_rps > 0) {
                snprintf(key, sizeof key, "%s_copy_rows_per_s%s", d->name, sfx);
                bench_json_num(&j, key, d->copy_rps);
                snprintf(key, sizeof key, "%s_ratio_vs_copy%s", d->name, sfx);
                bench_json_num(&j, key, d->ratio_copy);
                snprintf(key, sizeof key, "%s_ratio_vs_copy%s_min", d->name, sfx);
                bench_json_num(&j, key, d->ratio_copy_min);
                snprintf(key, sizeof key, "%s_ratio_vs_copy%s_max", d->name, sfx);
                bench_json_num(&j, key, d->ratio_copy_max);
                snprintf(key, sizeof key, "%s_ratio_vs_copy_serial%s", d->name, sfx);
                bench_json_num(&j, key, d->ratio_copy_serial);
            }
        }
    }
    if (json)
        bench_json_end(&j);
    return failed;
}
