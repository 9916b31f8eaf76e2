/*
 * bench_store.c - `pcache-bench store [--quick] [--json]`: the snapshot
 * store side by side with its anchors in one run (docs/benchmarks.md,
 * "store"):
 *   - pcache save and load of n entries through a real LMDB store (walk +
 *     encode + zstd + one durable write transaction; load into an empty,
 *     huge-page cache) against a raw LMDB bulk insert of the same records
 *     (one transaction, sorted, MDB_APPEND: the naive per-record ceiling),
 *     SQLite row by row in autocommit and in one transaction, and
 *     redis-server SAVE when one is installed;
 *   - the snapshot's size against the raw value bytes;
 *   - p99.9 of a 95/5 worker pinned to one core while a save runs pinned to
 *     the other, against the same worker without a save;
 *   - the journal's everysec / always cost on a 100%-set loop.
 * Every figure is a median of several runs; the ratios are what the targets
 * are stated in.
 */
#include "bench_cmds.h"
#include "bench_store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pcache_store.h"
#include "pcache_storecheck.h"
#include "sipgen.h"

/* ---- the data set ------------------------------------------------------- */
static const bs_data *bs_sort_data;

static int bs_key_cmp(const void *a, const void *b)
{
    return memcmp(bs_key(bs_sort_data, *(const uint32_t *)a),
                  bs_key(bs_sort_data, *(const uint32_t *)b), bs_sort_data->keys.klen);
}

int bs_data_make(bs_data *d, size_t n)
{
    memset(d, 0, sizeof *d);
    d->n = n;
    if (bench_keys_make(&d->keys, n, 16, 0x5107e) != 0)
        return -1;
    d->voff = malloc(n * sizeof *d->voff);
    d->vlen = malloc(n * sizeof *d->vlen);
    d->ttl_ms = malloc(n * sizeof *d->ttl_ms);
    d->sorted = malloc(n * sizeof *d->sorted);
    size_t cap = n * 240 + 4096, used = 0;
    d->vals = malloc(cap);
    if (d->voff == NULL || d->vlen == NULL || d->ttl_ms == NULL || d->sorted == NULL ||
        d->vals == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        pc_sipgen_entry e;
        /* the counters of the SIP mix become the next string entry */
        for (uint64_t j = i;; j += n + 1) {
            pc_sipgen_entry_make(7, j, &e);
            if (e.kind != PC_SIPGEN_COUNTER)
                break;
        }
        if (used + e.vlen > cap) {
            cap = cap * 2 + e.vlen;
            char *nv = realloc(d->vals, cap);
            if (nv == NULL)
                return -1;
            d->vals = nv;
        }
        memcpy(d->vals + used, e.val, e.vlen);
        d->voff[i] = used;
        d->vlen[i] = (uint16_t)e.vlen;
        used += e.vlen;
        d->value_bytes += e.vlen;
        d->ttl_ms[i] = i % 5 == 0 ? 0 : 60000 + (int64_t)(bench_mix64(i) % 7140000);
        d->sorted[i] = (uint32_t)i;
    }
    bs_sort_data = d;
    qsort(d->sorted, n, sizeof *d->sorted, bs_key_cmp);
    return 0;
}

void bs_data_free(bs_data *d)
{
    bench_keys_free(&d->keys);
    free(d->vals);
    free(d->voff);
    free(d->vlen);
    free(d->ttl_ms);
    free(d->sorted);
    memset(d, 0, sizeof *d);
}

static void bs_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= PC_LOG_WARN)
        fprintf(stderr, "[pcache] %s\n", msg);
}

pc_cache *bs_cache_new(size_t n, pc_coll **coll, int *tier)
{
    pc_config cfg;
    pc_config_init(&cfg);
    unsigned l2 = 4;
    while (l2 < 24 && (1ull << l2) * 4 < n)
        l2++;
    char spec[32];
    snprintf(spec, sizeof spec, "sip=%u", l2);
    cfg.collections = spec;
    cfg.mem_mb = 64;
    cfg.hugepage_mb = 256 + n / 1500; /* ~330 B per entry plus the tables */
    cfg.log.fn = bs_log;
    pc_cache *c = NULL;
    if (pc_cache_create(&cfg, &c) != 0 || pc_coll_find(c, "sip", 3, coll) != 0) {
        fprintf(stderr, "pcache-bench store: cannot create a cache of %zu MB\n", cfg.hugepage_mb);
        exit(1);
    }
    if (tier != NULL) {
        pc_mem_stats ms;
        *tier = pc_mem_stats_get(c, &ms) == 0 ? ms.tier : -1;
    }
    return c;
}

int bs_fill(const bs_data *d, pc_coll *coll)
{
    for (size_t i = 0; i < d->n; i++) {
        int rc =
            pc_set(coll, bs_key(d, i), d->keys.klen, bs_val(d, i), d->vlen[i], d->ttl_ms[i], 0);
        if (rc != 0)
            return rc;
    }
    return 0;
}

void bs_rmdir(const char *dir)
{
    char cmd[600];
    if (strstr(dir, "pcache-bench-store.") == NULL)
        return; /* only ever below the bench's own scratch directory */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "pcache-bench store: could not remove %s\n", dir);
}

/* ---- pcache save and load ------------------------------------------------ */
struct bs_pcache_result {
    double save_rate, load_rate, save_s, load_s, commit_s;
    double save_rate_r[16], load_rate_r[16]; /* each round, for per-round ratios */
    unsigned nr;
    double stored_over_values, pages_over_values, file_over_values;
    uint64_t saved, loaded;
};

static int bs_pcache_run(const bs_data *d, pc_coll *coll, const char *dir, unsigned rounds,
                         struct bs_pcache_result *out)
{
    char path[512];
    snprintf(path, sizeof path, "%s/pcache", dir);
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    sc.log.fn = bs_log;
    char err[256];
    pc_store *s = NULL;
    if (pc_store_open_checked(path, &sc, &s, err, sizeof err) != 0) {
        fprintf(stderr, "pcache-bench store: %s\n", err);
        return -1;
    }
    double sv[16], cm[16], ld[16];
    if (rounds > 16)
        rounds = 16;
    pc_store_save_result res;
    memset(&res, 0, sizeof res);
    uint64_t first_file = 0;
    for (unsigned r = 0; r < rounds; r++) {
        int rc = pc_store_save(s, coll, NULL, &res);
        if (rc != 0) {
            fprintf(stderr, "pcache-bench store: save: %s\n", pc_store_strerror(rc));
            pc_store_close(s);
            return -1;
        }
        sv[r] = res.seconds;
        cm[r] = res.commit_seconds;
        if (r == 0) {
            pc_store_info in;
            if (pc_store_info_get(s, &in) == 0)
                first_file = in.used_bytes;
        }
    }
    pc_store_info in;
    memset(&in, 0, sizeof in);
    (void)pc_store_info_get(s, &in);
    pc_store_load_result lr;
    memset(&lr, 0, sizeof lr);
    for (unsigned r = 0; r < rounds; r++) {
        pc_coll *lc;
        pc_cache *lcache = bs_cache_new(d->n, &lc, NULL);
        pc_store_load_opts lo = {.no_prune = 1};
        int rc = pc_store_load(s, lc, &lo, &lr);
        pc_cache_destroy(lcache);
        if (rc != 0 || lr.loaded != res.saved) {
            fprintf(stderr, "pcache-bench store: load: %s, %llu of %llu entries\n",
                    pc_store_strerror(rc), (unsigned long long)lr.loaded,
                    (unsigned long long)res.saved);
            pc_store_close(s);
            return -1;
        }
        ld[r] = lr.seconds;
    }
    pc_store_close(s);
    for (unsigned r = 0; r < rounds; r++) {
        out->save_rate_r[r] = (double)res.saved / sv[r];
        out->load_rate_r[r] = (double)lr.loaded / ld[r];
    }
    out->nr = rounds;
    out->save_s = bench_median(sv, rounds);
    out->commit_s = bench_median(cm, rounds);
    out->load_s = bench_median(ld, rounds);
    out->saved = res.saved;
    out->loaded = lr.loaded;
    out->save_rate = (double)res.saved / out->save_s;
    out->load_rate = (double)lr.loaded / out->load_s;
    out->stored_over_values = (double)res.stored_bytes / (double)d->value_bytes;
    out->pages_over_values =
        (double)in.overflow_pages * (double)in.page_size / (double)d->value_bytes;
    out->file_over_values = (double)first_file / (double)d->value_bytes;
    bs_rmdir(path);
    return 0;
}

/* ---- the command ----------------------------------------------------------- */
struct bs_opts {
    int quick, json;
    int only_journal; /* --only journal: the journal figures alone */
    size_t n;
    unsigned rounds;
    const char *redis;
};

static int bs_parse(int argc, char **argv, struct bs_opts *o)
{
    memset(o, 0, sizeof *o);
    o->n = 1000000;
    o->rounds = 5;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            o->quick = 1;
            o->n = 200000;
            o->rounds = 3;
        } else if (strcmp(argv[i], "--json") == 0) {
            o->json = 1;
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            if (strcmp(argv[++i], "journal") != 0) {
                fprintf(stderr, "pcache-bench store: --only takes 'journal'\n");
                return -1;
            }
            o->only_journal = 1;
        } else if (strcmp(argv[i], "--entries") == 0 && i + 1 < argc) {
            o->n = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            o->rounds = (unsigned)atoi(argv[++i]);
        } else if (strcmp(argv[i], "--redis") == 0 && i + 1 < argc) {
            o->redis = argv[++i];
        } else {
            fprintf(stderr, "pcache-bench store: unknown option '%s'\n", argv[i]);
            return -1;
        }
    }
    if (o->n < 1000 || o->n > 4000000 || o->rounds < 1 || o->rounds > 15) {
        fprintf(stderr, "pcache-bench store: --entries 1000..4000000, --runs 1..15\n");
        return -1;
    }
    return 0;
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0;
}

struct bs_all {
    struct bs_opts o;
    char date[32];
    int tier;
    double fill_rate;
    double avg_value;
    double lmdb_file_over_values, redis_rdb_over_values;
    struct bs_pcache_result pc;
    bs_anchor_result an;
    bs_pause_result pause;
    bs_journal_result jn;
};

struct bs_target {
    const char *key, *what;
    double value, goal;
    int at_least; /* 1: value >= goal passes; 0: value <= goal passes */
};

static size_t bs_targets(const struct bs_all *a, struct bs_target *t)
{
    size_t k = 0;
    t[k++] = (struct bs_target){"save_entries_per_s", "save entries/s", a->pc.save_rate, 1e6, 1};
    t[k++] = (struct bs_target){"load_entries_per_s", "load entries/s", a->pc.load_rate, 2e6, 1};
    t[k++] = (struct bs_target){"snapshot_bytes_over_raw_values", "snapshot / raw value bytes",
                                a->pc.stored_over_values, 0.4, 0};
    t[k++] = (struct bs_target){"during_save_p999_ratio", "p99.9 during a save / without",
                                a->pause.ratio_p999, 1.5, 0};
    t[k++] = (struct bs_target){"journal_everysec_set_ratio", "set rate everysec / off",
                                a->jn.everysec_ratio, 0.85, 1};
    return k;
}

/* The median of per-round ratios num[i] / den[i % nden], and their spread;
 * an anchor measured once (nden 0) divides every round by its one value. */
struct bs_spread {
    double med, lo, hi;
};

static struct bs_spread bs_rounds(const double *num, unsigned n, const double *den, unsigned nden,
                                  double once)
{
    double v[16];
    struct bs_spread sp = {0, 0, 0};
    if (n == 0 || n > 16)
        return sp;
    for (unsigned i = 0; i < n; i++)
        v[i] = ratio(num[i], nden > 0 ? den[i % nden] : once);
    bench_minmax(v, n, &sp.lo, &sp.hi);
    sp.med = bench_median(v, n);
    return sp;
}

/* pcache's save and load over each anchor, round by round (the anchors run
 * in a phase of their own after pcache's rounds, round i against round i). */
struct bs_ratios {
    struct bs_spread lmdb, lmdb_wm, sqlite_txn, rowwise, redis_save;
    struct bs_spread lmdb_load, sqlite_load, redis_load;
};

static void bs_ratios_get(const struct bs_all *a, struct bs_ratios *r)
{
    const struct bs_pcache_result *p = &a->pc;
    const bs_anchor_result *an = &a->an;
    r->lmdb = bs_rounds(p->save_rate_r, p->nr, an->lmdb_append_save_r, an->n_lmdb, 0);
    r->lmdb_wm = bs_rounds(p->save_rate_r, p->nr, an->lmdb_append_wm_save_r, an->n_lmdb, 0);
    r->sqlite_txn = bs_rounds(p->save_rate_r, p->nr, an->sqlite_txn_save_r, an->n_sqlite_txn, 0);
    r->rowwise = bs_rounds(p->save_rate_r, p->nr, NULL, 0, an->sqlite_rowwise_save);
    r->redis_save = bs_rounds(p->save_rate_r, p->nr, NULL, 0, an->redis_save);
    r->lmdb_load = bs_rounds(p->load_rate_r, p->nr, NULL, 0, an->lmdb_scan_load);
    r->sqlite_load = bs_rounds(p->load_rate_r, p->nr, NULL, 0, an->sqlite_load);
    r->redis_load = bs_rounds(p->load_rate_r, p->nr, NULL, 0, an->redis_load);
}

static void bs_json_spread(bench_json *j, const char *key, struct bs_spread sp)
{
    char k[96];
    bench_json_num(j, key, sp.med);
    snprintf(k, sizeof k, "%s_min", key);
    bench_json_num(j, k, sp.lo);
    snprintf(k, sizeof k, "%s_max", key);
    bench_json_num(j, k, sp.hi);
}

/* The first BS_SIZED_TARGETS targets of bs_targets are for a save of 1M
 * entries (issue 35: a quick run must not compare a 200k save with them). */
#define BS_SIZED_TARGETS 4

static int bs_judged(const struct bs_all *a)
{
    return a->o.n == 1000000;
}

/* The journal's rates and its per-slice ratios (median, spread). */
static void bs_journal_line(const bs_journal_result *jn, FILE *out)
{
    fprintf(out,
            "  off %.0f/s, everysec %.0f/s, always %.0f/s (medians); per round: everysec / off "
            "%.3fx (%.3f-%.3f), always / off %.5fx (%.5f-%.5f)\n",
            jn->off, jn->everysec, jn->always, jn->everysec_ratio, jn->everysec_ratio_min,
            jn->everysec_ratio_max, jn->always_ratio, jn->always_ratio_min, jn->always_ratio_max);
}

static void bs_journal_json(const bs_journal_result *jn, bench_json *j)
{
    bench_json_num(j, "journal_everysec_set_ratio_min", jn->everysec_ratio_min);
    bench_json_num(j, "journal_everysec_set_ratio_max", jn->everysec_ratio_max);
    bench_json_num(j, "journal_off_sets_per_s", jn->off);
    bench_json_num(j, "journal_everysec_sets_per_s", jn->everysec);
    bench_json_num(j, "journal_always_sets_per_s", jn->always);
    bench_json_num(j, "journal_always_set_ratio", jn->always_ratio);
    bench_json_num(j, "journal_always_set_ratio_min", jn->always_ratio_min);
    bench_json_num(j, "journal_always_set_ratio_max", jn->always_ratio_max);
}

static void bs_report_text(const struct bs_all *a, FILE *out)
{
    const struct bs_pcache_result *p = &a->pc;
    const bs_anchor_result *an = &a->an;
    struct bs_ratios q;
    bs_ratios_get(a, &q);
    fprintf(out,
            "pcache-bench store  %s  %ld CPUs  %s%zu entries (16-byte keys, SIP-like values of "
            "%.0f B on average), median of %u runs; cache tier %s\n",
            a->date, sysconf(_SC_NPROCESSORS_ONLN), a->o.quick ? "QUICK: " : "", a->o.n,
            a->avg_value, a->o.rounds, a->tier >= 0 ? pc_tier_name(a->tier) : "?");
    fprintf(out, "\nsave (entries/s, durable commit included)     entries/s   pcache over it "
                 "(median of per-round ratios)\n");
    fprintf(out, "  %-40s %12.0f  (%.2f s, commit %.2f s)\n", "pcache store (zstd blocks)",
            p->save_rate, p->save_s, p->commit_s);
    fprintf(out, "  %-40s %12.0f  %7.2fx\n", "raw LMDB, one txn, sorted, MDB_APPEND",
            an->lmdb_append_save, q.lmdb.med);
    fprintf(out, "  %-40s %12.0f  %7.2fx\n", "raw LMDB, the same with MDB_WRITEMAP",
            an->lmdb_append_wm_save, q.lmdb_wm.med);
    fprintf(out, "  %-40s %12.0f  %7.2fx\n", "SQLite, one transaction", an->sqlite_txn_save,
            q.sqlite_txn.med);
    fprintf(out, "  %-40s %12.1f  %7.0fx  (%llu rows sampled)\n", "SQLite, row by row, autocommit",
            an->sqlite_rowwise_save, q.rowwise.med, (unsigned long long)an->sqlite_rowwise_rows);
    if (an->redis_ran)
        fprintf(out, "  %-40s %12.0f  %7.2fx\n", "redis-server SAVE", an->redis_save,
                q.redis_save.med);
    else
        fprintf(out, "  %-40s skipped: %s\n", "redis-server SAVE", an->redis_why);
    fprintf(out, "\nload (entries/s, into an empty cache)\n");
    fprintf(out, "  %-40s %12.0f  (%.2f s)\n", "pcache store", p->load_rate, p->load_s);
    fprintf(out, "  %-40s %12.0f  %7.2fx\n", "raw LMDB cursor scan + pc_set", an->lmdb_scan_load,
            q.lmdb_load.med);
    fprintf(out, "  %-40s %12.0f  %7.2fx\n", "SQLite SELECT + pc_set", an->sqlite_load,
            q.sqlite_load.med);
    if (an->redis_ran)
        fprintf(out, "  %-40s %12.0f  %7.2fx\n", "redis-server restart (RDB load)", an->redis_load,
                q.redis_load.med);
    fprintf(out, "  (pc_set of the same entries from memory: %.0f/s)\n", a->fill_rate);
    fprintf(out, "\nsize / raw value bytes\n");
    fprintf(out, "  pcache: blocks %.3f, LMDB pages %.3f, data.mdb after one save %.3f\n",
            p->stored_over_values, p->pages_over_values, p->file_over_values);
    fprintf(out, "  raw LMDB data.mdb %.3f", a->lmdb_file_over_values);
    if (an->redis_ran)
        fprintf(out, ", redis RDB %.3f", a->redis_rdb_over_values);
    fprintf(out, "\n");
    fprintf(out, "\n95/5 worker pinned to one core, save pinned to the other (%u rounds%s)\n",
            a->pause.rounds, a->pause.pinned ? "" : ", PINNING FAILED");
    fprintf(out, "  p99.9 %.0f ns quiet, %.0f ns during the save: %.2fx; p99 %.0f / %.0f ns\n",
            a->pause.p999_quiet_ns, a->pause.p999_save_ns, a->pause.ratio_p999,
            a->pause.p99_quiet_ns, a->pause.p99_save_ns);
    fprintf(out, "  p99.9 ratio per round %.2f-%.2f\n", a->pause.ratio_p999_min,
            a->pause.ratio_p999_max);
    fprintf(out,
            "  ops/s %.0f quiet, %.0f during the save: %.2fx (per round %.2f-%.2f; a save took "
            "%.2f s under load)\n",
            a->pause.ops_quiet_per_s, a->pause.ops_save_per_s, a->pause.ratio_ops,
            a->pause.ratio_ops_min, a->pause.ratio_ops_max, a->pause.save_s);
    fprintf(out, "\njournal, 100%% set, 50k keys, 200-byte values (%u interleaved slices)\n",
            a->jn.slices);
    bs_journal_line(&a->jn, out);
    struct bs_target t[8];
    size_t nt = bs_targets(a, t);
    fprintf(out, "\ntargets%s\n",
            bs_judged(a) ? "" : " (not judged: they are for 1000000 entries, this run has fewer)");
    for (size_t i = 0; i < nt; i++) {
        int pass = t[i].at_least ? t[i].value >= t[i].goal : t[i].value <= t[i].goal;
        fprintf(out, "  %-34s %12.3f  %s %-10g %s\n", t[i].what, t[i].value,
                t[i].at_least ? ">=" : "<=", t[i].goal,
                !bs_judged(a) && i < BS_SIZED_TARGETS ? "-"
                : pass                                ? "pass"
                                                      : "MISS");
    }
    fprintf(out, "  %-34s %12.0f  (pcache save / SQLite row by row; rounds %.0f-%.0f)\n",
            "ratio_vs_sqlite_rowwise", q.rowwise.med, q.rowwise.lo, q.rowwise.hi);
}

static void bs_report_json(const struct bs_all *a, FILE *out)
{
    const struct bs_pcache_result *p = &a->pc;
    const bs_anchor_result *an = &a->an;
    struct bs_ratios q;
    bs_ratios_get(a, &q);
    bench_json j;
    bench_json_begin(&j, out);
    bench_json_str(&j, "bench", "store");
    bench_json_str(&j, "date", a->date);
    bench_json_bool(&j, "quick", a->o.quick);
    bench_json_int(&j, "entries", (long long)a->o.n);
    bench_json_int(&j, "runs", a->o.rounds);
    bench_json_int(&j, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
    bench_json_str(&j, "cache_tier", a->tier >= 0 ? pc_tier_name(a->tier) : "?");
    bench_json_num(&j, "avg_value_bytes", a->avg_value);
    struct bs_target t[8];
    size_t nt = bs_targets(a, t);
    for (size_t i = 0; i < nt; i++) {
        char key[96];
        bench_json_num(&j, t[i].key, t[i].value);
        if (!bs_judged(a) && i < BS_SIZED_TARGETS)
            continue; /* no verdict against a target meant for another size */
        snprintf(key, sizeof key, "pass_%s", t[i].key);
        bench_json_bool(&j, key, t[i].at_least ? t[i].value >= t[i].goal : t[i].value <= t[i].goal);
    }
    bs_json_spread(&j, "ratio_vs_sqlite_rowwise", q.rowwise);
    bs_json_spread(&j, "ratio_vs_sqlite_txn", q.sqlite_txn);
    bs_json_spread(&j, "save_ratio_vs_lmdb_append", q.lmdb);
    bs_json_spread(&j, "save_ratio_vs_lmdb_append_writemap", q.lmdb_wm);
    bs_json_spread(&j, "load_ratio_vs_lmdb_scan", q.lmdb_load);
    bs_json_spread(&j, "load_ratio_vs_sqlite", q.sqlite_load);
    bench_json_num(&j, "save_s", p->save_s);
    bench_json_num(&j, "save_commit_s", p->commit_s);
    bench_json_num(&j, "load_s", p->load_s);
    bench_json_num(&j, "snapshot_pages_over_raw_values", p->pages_over_values);
    bench_json_num(&j, "snapshot_file_over_raw_values", p->file_over_values);
    bench_json_num(&j, "lmdb_append_save_entries_per_s", an->lmdb_append_save);
    bench_json_num(&j, "lmdb_append_writemap_save_entries_per_s", an->lmdb_append_wm_save);
    bench_json_num(&j, "lmdb_scan_load_entries_per_s", an->lmdb_scan_load);
    bench_json_num(&j, "lmdb_file_over_raw_values", a->lmdb_file_over_values);
    bench_json_num(&j, "sqlite_rowwise_entries_per_s", an->sqlite_rowwise_save);
    bench_json_int(&j, "sqlite_rowwise_rows_sampled", (long long)an->sqlite_rowwise_rows);
    bench_json_num(&j, "sqlite_txn_entries_per_s", an->sqlite_txn_save);
    bench_json_num(&j, "sqlite_load_entries_per_s", an->sqlite_load);
    bench_json_bool(&j, "redis_ran", an->redis_ran);
    if (an->redis_ran) {
        bench_json_num(&j, "redis_save_entries_per_s", an->redis_save);
        bench_json_num(&j, "redis_load_entries_per_s", an->redis_load);
        bs_json_spread(&j, "save_ratio_vs_redis", q.redis_save);
        bs_json_spread(&j, "load_ratio_vs_redis", q.redis_load);
        bench_json_num(&j, "redis_rdb_over_raw_values", a->redis_rdb_over_values);
    } else {
        bench_json_str(&j, "redis_skipped", an->redis_why);
    }
    bench_json_num(&j, "fill_entries_per_s", a->fill_rate);
    bench_json_num(&j, "p999_quiet_ns", a->pause.p999_quiet_ns);
    bench_json_num(&j, "p999_during_save_ns", a->pause.p999_save_ns);
    bench_json_num(&j, "p99_quiet_ns", a->pause.p99_quiet_ns);
    bench_json_num(&j, "p99_during_save_ns", a->pause.p99_save_ns);
    bench_json_num(&j, "ops_quiet_per_s", a->pause.ops_quiet_per_s);
    bench_json_num(&j, "ops_during_save_per_s", a->pause.ops_save_per_s);
    bench_json_num(&j, "during_save_ops_ratio", a->pause.ratio_ops);
    bench_json_num(&j, "during_save_ops_ratio_min", a->pause.ratio_ops_min);
    bench_json_num(&j, "during_save_ops_ratio_max", a->pause.ratio_ops_max);
    bench_json_num(&j, "during_save_p999_ratio_min", a->pause.ratio_p999_min);
    bench_json_num(&j, "during_save_p999_ratio_max", a->pause.ratio_p999_max);
    bench_json_bool(&j, "pinned", a->pause.pinned);
    bs_journal_json(&a->jn, &j);
    bench_json_end(&j);
}

/* --only journal: the journal's figures and its target alone (the same
 * keys as the full report, so scripts read either). */
static void bs_report_journal(const struct bs_all *a, FILE *out)
{
    double r = a->jn.everysec_ratio;
    if (!a->o.json) {
        fprintf(out, "pcache-bench store --only journal  %s  %ld CPUs\n", a->date,
                sysconf(_SC_NPROCESSORS_ONLN));
        fprintf(out, "journal, 100%% set, 50k keys, 200-byte values (%u interleaved slices)\n",
                a->jn.slices);
        bs_journal_line(&a->jn, out);
        fprintf(out, "  CPU ns/set: off %.0f, everysec %.0f\n", a->jn.off_cpu_ns,
                a->jn.everysec_cpu_ns);
        fprintf(out, "  %-34s %12.3f  >= 0.85 %s\n", "set rate everysec / off", r,
                r >= 0.85 ? "pass" : "MISS");
        return;
    }
    bench_json j;
    bench_json_begin(&j, out);
    bench_json_str(&j, "bench", "store");
    bench_json_str(&j, "only", "journal");
    bench_json_str(&j, "date", a->date);
    bench_json_bool(&j, "quick", a->o.quick);
    bench_json_int(&j, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
    bench_json_int(&j, "journal_slices", a->jn.slices);
    bench_json_num(&j, "journal_everysec_set_ratio", r);
    bench_json_bool(&j, "pass_journal_everysec_set_ratio", r >= 0.85);
    bs_journal_json(&a->jn, &j);
    bench_json_num(&j, "journal_off_cpu_ns_per_set", a->jn.off_cpu_ns);
    bench_json_num(&j, "journal_everysec_cpu_ns_per_set", a->jn.everysec_cpu_ns);
    bench_json_end(&j);
}

int bench_cmd_store(int argc, char **argv)
{
    struct bs_all a;
    memset(&a, 0, sizeof a);
    if (bs_parse(argc, argv, &a.o) != 0)
        return 2;
    bench_utc_now(a.date, sizeof a.date);
    const char *tmp = getenv("TMPDIR");
    char dir[256];
    snprintf(dir, sizeof dir, "%s/pcache-bench-store.XXXXXX", tmp != NULL ? tmp : "/var/tmp");
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "pcache-bench store: mkdtemp %s: %s\n", dir, strerror(errno));
        return 1;
    }
    if (a.o.only_journal) {
        fprintf(stderr, "store: journal...\n");
        int jrc = bs_journal_run(dir, a.o.quick ? 7 : 21, 300, &a.jn);
        bs_rmdir(dir);
        if (jrc != 0)
            return 1;
        bs_report_journal(&a, stdout);
        return 0;
    }
    bs_data d;
    if (bs_data_make(&d, a.o.n) != 0) {
        fprintf(stderr, "pcache-bench store: out of memory for the data set\n");
        return 1;
    }
    a.avg_value = (double)d.value_bytes / (double)d.n;
    pc_coll *coll;
    pc_cache *c = bs_cache_new(d.n, &coll, &a.tier);
    uint64_t t0 = bench_now_ns();
    int rc = bs_fill(&d, coll);
    a.fill_rate = (double)d.n / ((double)(bench_now_ns() - t0) / 1e9);
    if (rc != 0) {
        fprintf(stderr, "pcache-bench store: fill: %s\n", pc_store_strerror(rc));
        return 1;
    }
    fprintf(stderr, "store: pcache save/load...\n");
    if (bs_pcache_run(&d, coll, dir, a.o.rounds, &a.pc) != 0)
        return 1;
    fprintf(stderr, "store: anchors...\n");
    if (bs_anchors_run(&d, dir, a.o.rounds, a.o.quick ? 2.0 : 5.0, a.o.redis, &a.an) != 0)
        return 1;
    a.lmdb_file_over_values = (double)a.an.lmdb_file_bytes / (double)d.value_bytes;
    a.redis_rdb_over_values = (double)a.an.redis_rdb_bytes / (double)d.value_bytes;
    fprintf(stderr, "store: p99.9 during saves...\n");
    if (bs_pause_run(&d, c, coll, dir, a.o.quick ? 3 : 5, &a.pause) != 0)
        return 1;
    pc_cache_destroy(c);
    fprintf(stderr, "store: journal...\n");
    if (bs_journal_run(dir, a.o.quick ? 7 : 21, 300, &a.jn) != 0)
        return 1;
    bs_rmdir(dir);
    bs_data_free(&d);
    if (a.o.json)
        bs_report_json(&a, stdout);
    else
        bs_report_text(&a, stdout);
    return 0;
}
