/*
 * bench_store.h - the parts of `pcache-bench store` (docs/benchmarks.md,
 * "store"): the data set every part shares, and one function per measured
 * system. bench_store.c runs them in one process, in one run, and prints
 * the ratios.
 *
 * The data set: n entries (1M by default), 16-byte keys (the
 * hex keys of bench_util.h), SIP-like string values of about 200 bytes from
 * tests/support/sipgen.c (contacts, dialogs, flags; its counters are replaced by
 * the next string entry so every value is a SIP-like string), a fifth
 * without expiry and the rest expiring 1 min to 2 h ahead.
 */
#ifndef BENCH_STORE_H
#define BENCH_STORE_H

#include "bench_util.h"

#include <stddef.h>
#include <stdint.h>

#include "pcache.h"

typedef struct bs_data {
    size_t n;
    bench_keys keys; /* n x 16 bytes */
    char *vals;      /* the values back to back */
    uint64_t *voff;  /* value i = vals[voff[i] .. voff[i] + vlen[i]) */
    uint16_t *vlen;
    int64_t *ttl_ms;      /* relative TTL at fill time; 0 = never expires */
    uint64_t value_bytes; /* sum of vlen */
    uint32_t *sorted;     /* entry indexes in key byte order (MDB_APPEND) */
} bs_data;

int bs_data_make(bs_data *d, size_t n);
void bs_data_free(bs_data *d);

static inline const char *bs_key(const bs_data *d, size_t i)
{
    return bench_key(&d->keys, i);
}
static inline const char *bs_val(const bs_data *d, size_t i)
{
    return d->vals + d->voff[i];
}

/* A cache whose collection "sip" holds up to n entries comfortably, in a
 * huge-page reservation as a production host runs it (the achieved tier is
 * returned in *tier). Exits the program when it cannot be created. */
pc_cache *bs_cache_new(size_t n, pc_coll **coll, int *tier);
/* pc_set of every entry of d into coll; 0 or the first error. */
int bs_fill(const bs_data *d, pc_coll *coll);
/* rm -rf of a directory this bench made (its name starts with the bench's
 * temporary directory). */
void bs_rmdir(const char *dir);

/* ---- the anchors (bench_store_anchor.c); every rate is entries/s -------- */
typedef struct bs_anchor_result {
    double lmdb_append_save;      /* one txn, sorted, MDB_APPEND, durable commit */
    double lmdb_append_wm_save;   /* the same with MDB_WRITEMAP */
    double lmdb_scan_load;        /* cursor scan of that env + pc_set into an empty cache */
    uint64_t lmdb_file_bytes;     /* data.mdb after the one save */
    double sqlite_rowwise_save;   /* autocommit, one INSERT per row (a sample of rows) */
    uint64_t sqlite_rowwise_rows; /* rows the rowwise sample wrote */
    double sqlite_txn_save;       /* every row in one transaction */
    double sqlite_load;           /* SELECT of every row + pc_set into an empty cache */
    int redis_ran;                /* 0 when redis-server was not found */
    char redis_why[160];          /* why it did not run */
    double redis_save;            /* SAVE of the same data */
    double redis_load;            /* a restart until the data set answers */
    uint64_t redis_rdb_bytes;
    /* each round of the anchors run more than once (LMDB: rounds; SQLite
     * in one transaction: up to 3), for per-round ratios */
    double lmdb_append_save_r[16], lmdb_append_wm_save_r[16], sqlite_txn_save_r[16];
    unsigned n_lmdb, n_sqlite_txn;
} bs_anchor_result;

/* dir: a scratch directory; rounds: medians of that many runs where a run
 * is cheap enough (the rowwise sample runs once, for at most rowwise_s). */
int bs_anchors_run(const bs_data *d, const char *dir, unsigned rounds, double rowwise_s,
                   const char *redis_path, bs_anchor_result *out);

/* ---- p99.9 of a 95/5 worker while a save runs (bench_store_pause.c) ---- */
typedef struct bs_pause_result {
    double p999_quiet_ns, p999_save_ns; /* medians over rounds */
    double p99_quiet_ns, p99_save_ns;
    double ratio_p999; /* median of the per-round ratios */
    double ratio_p999_min, ratio_p999_max;
    double ops_quiet_per_s, ops_save_per_s;
    double ratio_ops, ratio_ops_min, ratio_ops_max; /* ops/s during / quiet, per round */
    double save_s;                                  /* median save duration under the load */
    unsigned rounds;
    int pinned; /* 1 when both CPU pins took */
} bs_pause_result;

int bs_pause_run(const bs_data *d, pc_cache *c, pc_coll *coll, const char *store_dir,
                 unsigned rounds, bs_pause_result *out);

/* ---- journal cost on a 100%-set loop (bench_store_journal.c) ----------- */
typedef struct bs_journal_result {
    double off, everysec, always; /* sets/s, medians of interleaved slices */
    double everysec_cpu_ns, off_cpu_ns;
    /* everysec / off and always / off slice by slice: median, spread */
    double everysec_ratio, everysec_ratio_min, everysec_ratio_max;
    double always_ratio, always_ratio_min, always_ratio_max;
    unsigned slices;
} bs_journal_result;

int bs_journal_run(const char *dir, unsigned slices, unsigned slice_ms, bs_journal_result *out);

#endif
