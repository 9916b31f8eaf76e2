/*
 * bench_engine_report.c - turns the medians of `pcache-bench engine` into
 * the human tables, the target verdicts and the one JSON object.
 *
 * Definitions (docs/benchmarks.md says the same):
 *  - ns/op is the cost of one operation in one process: wall * procs / ops;
 *    Mops/s is total ops / wall.
 *  - ratio_* divide engine Mops/s by anchor Mops/s round by round (the
 *    systems of a case run interleaved in each round) and report the median
 *    of those per-round ratios, with KEY_min / KEY_max their spread; the
 *    headline ratios use pc_get (malloc'd copy per hit), the same contract
 *    as cachedb_local's fetch; the *_getbuf variants use pc_get_buf.
 *  - the 2-over-1-process scaling pairs round i of the two cases (they run
 *    one after the other, not interleaved), and the chase ratio divides each
 *    round's get_buf ns by the chase's median (the floor is measured apart).
 *  - a target miss is reported, never turned into an exit status.
 */
#include "bench_engine.h"
#include "bench_util.h"

#include "pcache.h"

#include <stdio.h>

#define CELL(r, sz, m, p, s) (&(r)->cell[(sz)][(m)][(p)][(s)])

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0.0;
}

/* The median of per-round ratios and their spread. */
struct spread {
    double med, lo, hi;
};

/* a's rate over b's, round by round (by_ns: b's ns over a's, the same
 * direction for a cost); den > 0 instead of b: a's ns over a fixed den. */
static struct spread rounds_ratio(const struct be_cell *a, const struct be_cell *b, double den)
{
    double v[BE_MAX_RUNS];
    int n = a->nruns;
    struct spread sp = {0, 0, 0};

    if (b && b->nruns < n)
        n = b->nruns;
    if (n <= 0)
        return sp;
    for (int i = 0; i < n; i++)
        v[i] = den > 0 ? ratio(a->run_ns[i], den) : ratio(a->run_mops[i], b->run_mops[i]);
    bench_minmax(v, (size_t)n, &sp.lo, &sp.hi);
    sp.med = bench_median(v, (size_t)n);
    return sp;
}

/* The targets of the brief, evaluated on one set of numbers. */
struct target {
    const char *key, *what;
    double value, limit;
    int at_least; /* 1: value >= limit passes; 0: value <= limit passes */
    const char *unit;
    double lo, hi; /* the per-round spread; lo == hi == value: one figure */
};

static struct target target_of(const char *key, const char *what, struct spread sp, double limit,
                               int at_least, const char *unit)
{
    return (struct target){key, what, sp.med, limit, at_least, unit, sp.lo, sp.hi};
}

enum { T_TUNED, T_DEFAULT, T_CHASE, T_SCALING, T_OVERHEAD, T_N };

static double overhead_per_entry(const struct be_results *r)
{
    const struct be_engine_info *e = &r->eng[BE_1M];
    double payload = (double)e->entries * (BE_KEY_LEN + BE_VALUE_LEN);

    if (e->entries == 0)
        return 0.0;
    return ((double)(e->chunk_bytes + e->table_bytes) - payload) / (double)e->entries;
}

static void targets_eval(const struct be_results *r, struct target t[T_N])
{
    const struct be_cell *get95 = r->cell[BE_50K][BE_GET95][0];
    double overhead = overhead_per_entry(r);

    t[T_TUNED] =
        target_of("ratio_vs_local_tuned_95_5_50k", "95/5, 50k, 1 proc: pcache get vs local-65536",
                  rounds_ratio(&get95[BE_ENGINE_GET], &get95[BE_LOCAL_TUNED], 0), 2.5, 1, "x");
    t[T_DEFAULT] =
        target_of("ratio_vs_local_default_95_5_50k", "95/5, 50k, 1 proc: pcache get vs local-512",
                  rounds_ratio(&get95[BE_ENGINE_GET], &get95[BE_LOCAL_DEFAULT], 0), 15.0, 1, "x");
    t[T_CHASE] =
        target_of("getbuf_over_chase_1m", "get_buf hit at 1M, 1 proc / one chase load",
                  rounds_ratio(CELL(r, BE_1M, BE_GET100, 0, BE_ENGINE_GETBUF), NULL, r->chase_ns),
                  2.5, 0, "x");
    t[T_SCALING] = target_of("scaling_get_2p", "100% get, 50k, get_buf: 2 procs / 1 proc",
                             rounds_ratio(CELL(r, BE_50K, BE_GET100, 1, BE_ENGINE_GETBUF),
                                          CELL(r, BE_50K, BE_GET100, 0, BE_ENGINE_GETBUF), 0),
                             1.8, 1, "x");
    t[T_OVERHEAD] =
        target_of("shm_overhead_bytes_per_entry", "shared bytes per entry beyond key+value, 1M",
                  (struct spread){overhead, overhead, overhead}, 40.0, 0, " B");
}

static int target_pass(const struct target *t)
{
    return t->at_least ? t->value >= t->limit : t->value <= t->limit;
}

static uint64_t total_misses(const struct be_results *r, uint64_t *errors)
{
    uint64_t m = 0;

    *errors = 0;
    for (int z = 0; z < BE_NSIZE; z++)
        for (int x = 0; x < BE_NMIX; x++)
            for (int p = 0; p < BE_NPROCS; p++)
                for (int s = 0; s < BE_NSYS; s++) {
                    m += r->cell[z][x][p][s].misses;
                    *errors += r->cell[z][x][p][s].errors;
                }
    return m;
}

static void human_table(const struct be_results *r, int z, int p, FILE *out)
{
    fprintf(out, "\n%s, %d process%s    ns/op (Mops/s)\n", be_size[z].label, p + 1, p ? "es" : "");
    fprintf(out, "%-9s", "mix");
    for (int s = 0; s < BE_NSYS; s++)
        fprintf(out, " %17s", be_sys[s].label);
    fprintf(out, "  %8s %8s\n", "vs tuned", "vs dflt");
    for (int m = 0; m < BE_NMIX; m++) {
        const struct be_cell *c = r->cell[z][m][p];

        fprintf(out, "%-9s", be_mix[m].label);
        for (int s = 0; s < BE_NSYS; s++)
            fprintf(out, " %8.0f (%6.2f)", c[s].ns, c[s].mops);
        fprintf(out, "  %7.2fx %7.1fx\n",
                rounds_ratio(&c[BE_ENGINE_GET], &c[BE_LOCAL_TUNED], 0).med,
                rounds_ratio(&c[BE_ENGINE_GET], &c[BE_LOCAL_DEFAULT], 0).med);
    }
}

void be_report_human(const struct be_results *r, FILE *out)
{
    struct target t[T_N];
    uint64_t errors, misses = total_misses(r, &errors);

    fprintf(out, "pcache-bench engine  %s  %ld CPUs  %s: median of %d runs x %u ms per case\n",
            r->date, r->cpus, r->quick ? "quick" : "full", r->runs, r->run_ms);
    fprintf(out, "keys %d B, values %d B; ratios use pcache get (malloc'd copy, as the anchor)\n",
            BE_KEY_LEN, BE_VALUE_LEN);
    for (int z = 0; z < BE_NSIZE; z++) {
        const struct be_engine_info *e = &r->eng[z];

        fprintf(out,
                "engine %s: tier %s, %llu -> %llu buckets (%u grow calls, %u splits), "
                "%llu in overflow, load %.0f ns/entry (%u ENOMEM retries)\n",
                be_size[z].key, pc_tier_name(e->tier), (unsigned long long)e->buckets_initial,
                (unsigned long long)e->buckets, e->grow_calls, e->splits,
                (unsigned long long)e->overflow, e->load_ns_per_entry, e->load_retries);
    }
    fprintf(out, "pointer chase over %.1f MiB (shmem, same backing): %.1f ns per dependent load\n",
            (double)r->chase_bytes / 1048576.0, r->chase_ns);
    for (int z = 0; z < BE_NSIZE; z++)
        for (int p = 0; p < BE_NPROCS; p++)
            human_table(r, z, p, out);

    targets_eval(r, t);
    fprintf(out, "\ntargets\n");
    for (int i = 0; i < T_N; i++)
        fprintf(out, "  %-48s %8.2f%-2s (rounds %.2f-%.2f) %s %6.1f%-2s %s\n", t[i].what,
                t[i].value, t[i].unit, t[i].lo, t[i].hi, t[i].at_least ? ">=" : "<=", t[i].limit,
                t[i].unit, target_pass(&t[i]) ? "PASS" : "MISS");
    {
        const struct be_cell *c2 = r->cell[BE_50K][BE_GET95][1];

        fprintf(out, "  (2 procs, 95/5, 50k: %.2fx vs local-65536, %.1fx vs local-512)\n",
                rounds_ratio(&c2[BE_ENGINE_GET], &c2[BE_LOCAL_TUNED], 0).med,
                rounds_ratio(&c2[BE_ENGINE_GET], &c2[BE_LOCAL_DEFAULT], 0).med);
    }
    for (int z = 0; z < BE_NSIZE; z++) {
        const struct be_engine_info *e = &r->eng[z];

        fprintf(out,
                "engine %s after the runs: %llu reads, %llu seqlock retries, %llu lock "
                "fallbacks, %llu nomem, chunk bytes %llu -> %llu\n",
                be_size[z].key, (unsigned long long)e->reads,
                (unsigned long long)e->seqlock_retries, (unsigned long long)e->lock_fallbacks,
                (unsigned long long)e->nomem, (unsigned long long)e->chunk_bytes,
                (unsigned long long)e->chunk_bytes_after);
    }
    fprintf(out,
            "management, 95/5 one worker at 1M, median of per-run ratios (spread): %.2fx "
            "(%.2f-%.2f) while another process walks every key in a loop (%.2f walks, %llu "
            "entries, in the windows; target >= 0.90), %.2fx (%.2f-%.2f) with every event "
            "subscribed (within noise)\n",
            r->mgmt_scan_ratio, r->mgmt_scan_ratio_min, r->mgmt_scan_ratio_max, r->mgmt_scan_walks,
            (unsigned long long)r->mgmt_scan_entries, r->mgmt_sub_ratio, r->mgmt_sub_ratio_min,
            r->mgmt_sub_ratio_max);
    if (misses || errors)
        fprintf(out, "WARNING: %llu gets missed a resident key and %llu operations failed\n",
                (unsigned long long)misses, (unsigned long long)errors);
    fflush(out);
}

/* KEY (with_median) plus KEY_min and KEY_max. */
static void json_spread(bench_json *j, const char *key, struct spread sp, int with_median)
{
    char k[112];

    if (with_median)
        bench_json_num(j, key, sp.med);
    snprintf(k, sizeof k, "%s_min", key);
    bench_json_num(j, k, sp.lo);
    snprintf(k, sizeof k, "%s_max", key);
    bench_json_num(j, k, sp.hi);
}

static void json_case_key(char *buf, size_t len, const char *what, int s, int m, int z, int p)
{
    snprintf(buf, len, "%s_%s_%s_%s_%dp", what, be_sys[s].key, be_mix[m].key, be_size[z].key,
             p + 1);
}

void be_report_json(const struct be_results *r, FILE *out)
{
    struct target t[T_N];
    bench_json j;
    char key[96];
    uint64_t errors, misses = total_misses(r, &errors);

    targets_eval(r, t);
    bench_json_begin(&j, out);
    bench_json_str(&j, "bench", "engine");
    bench_json_str(&j, "date", r->date);
    bench_json_bool(&j, "quick", r->quick);
    bench_json_int(&j, "runs", r->runs);
    bench_json_int(&j, "run_ms", r->run_ms);
    bench_json_int(&j, "cpus", r->cpus);
    for (int i = 0; i < T_N; i++) {
        bench_json_num(&j, t[i].key, t[i].value);
        if (t[i].lo != t[i].value || t[i].hi != t[i].value) {
            json_spread(&j, t[i].key, (struct spread){t[i].value, t[i].lo, t[i].hi}, 0);
        }
        snprintf(key, sizeof key, "pass_%s", t[i].key);
        bench_json_bool(&j, key, target_pass(&t[i]));
    }
    {
        const struct be_cell *c2 = r->cell[BE_50K][BE_GET95][1];

        json_spread(&j, "ratio_vs_local_tuned_95_5_50k_2p",
                    rounds_ratio(&c2[BE_ENGINE_GET], &c2[BE_LOCAL_TUNED], 0), 1);
        json_spread(&j, "ratio_vs_local_default_95_5_50k_2p",
                    rounds_ratio(&c2[BE_ENGINE_GET], &c2[BE_LOCAL_DEFAULT], 0), 1);
    }
    json_spread(&j, "scaling_get_2p_1m",
                rounds_ratio(CELL(r, BE_1M, BE_GET100, 1, BE_ENGINE_GETBUF),
                             CELL(r, BE_1M, BE_GET100, 0, BE_ENGINE_GETBUF), 0),
                1);
    json_spread(&j, "scaling_local_tuned_get_2p",
                rounds_ratio(CELL(r, BE_50K, BE_GET100, 1, BE_LOCAL_TUNED),
                             CELL(r, BE_50K, BE_GET100, 0, BE_LOCAL_TUNED), 0),
                1);
    bench_json_num(&j, "chase_ns", r->chase_ns);
    bench_json_num(&j, "ratio_during_keys_scan", r->mgmt_scan_ratio);
    bench_json_num(&j, "ratio_during_keys_scan_min", r->mgmt_scan_ratio_min);
    bench_json_num(&j, "ratio_during_keys_scan_max", r->mgmt_scan_ratio_max);
    bench_json_num(&j, "ratio_with_event_subscriber", r->mgmt_sub_ratio);
    bench_json_num(&j, "ratio_with_event_subscriber_min", r->mgmt_sub_ratio_min);
    bench_json_num(&j, "ratio_with_event_subscriber_max", r->mgmt_sub_ratio_max);
    bench_json_num(&j, "mops_95_5_1m_1p_alone", r->mgmt_base_mops);
    bench_json_num(&j, "mops_95_5_1m_1p_during_keys_scan", r->mgmt_scan_mops);
    bench_json_num(&j, "mops_95_5_1m_1p_with_event_subscriber", r->mgmt_sub_mops);
    bench_json_num(&j, "keys_scan_walks", r->mgmt_scan_walks);
    bench_json_num(&j, "keys_scan_entries_walked", (double)r->mgmt_scan_entries);
    bench_json_int(&j, "chase_bytes", (long long)r->chase_bytes);
    for (int z = 0; z < BE_NSIZE; z++) {
        const struct be_engine_info *e = &r->eng[z];
        const struct {
            const char *name;
            double v;
        } f[] = {
            {"buckets", (double)e->buckets},
            {"overflow", (double)e->overflow},
            {"chunk_bytes", (double)e->chunk_bytes},
            {"table_bytes", (double)e->table_bytes},
            {"chunk_bytes_after_runs", (double)e->chunk_bytes_after},
            {"load_ns_per_entry", e->load_ns_per_entry},
            {"seqlock_retries", (double)e->seqlock_retries},
            {"lock_fallbacks", (double)e->lock_fallbacks},
            {"reads", (double)e->reads},
            {"nomem", (double)e->nomem},
            {"grow_calls", (double)e->grow_calls},
            {"load_retries", (double)e->load_retries},
            {"prefault_misses", (double)e->prefault_misses},
        };

        snprintf(key, sizeof key, "engine_tier_%s", be_size[z].key);
        bench_json_str(&j, key, pc_tier_name(e->tier));
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
            snprintf(key, sizeof key, "engine_%s_%s", f[i].name, be_size[z].key);
            bench_json_num(&j, key, f[i].v);
        }
        snprintf(key, sizeof key, "local65536_bytes_%s", be_size[z].key);
        bench_json_int(&j, key, (long long)e->local_bytes[0]);
        snprintf(key, sizeof key, "local512_bytes_%s", be_size[z].key);
        bench_json_int(&j, key, (long long)e->local_bytes[1]);
    }
    for (int z = 0; z < BE_NSIZE; z++)
        for (int m = 0; m < BE_NMIX; m++)
            for (int p = 0; p < BE_NPROCS; p++) {
                const struct be_cell *c = r->cell[z][m][p];

                snprintf(key, sizeof key, "ratio_tuned_%s_%s_%dp", be_mix[m].key, be_size[z].key,
                         p + 1);
                json_spread(&j, key, rounds_ratio(&c[BE_ENGINE_GET], &c[BE_LOCAL_TUNED], 0), 1);
                snprintf(key, sizeof key, "ratio_default_%s_%s_%dp", be_mix[m].key, be_size[z].key,
                         p + 1);
                json_spread(&j, key, rounds_ratio(&c[BE_ENGINE_GET], &c[BE_LOCAL_DEFAULT], 0), 1);
                for (int s = 0; s < BE_NSYS; s++) {
                    json_case_key(key, sizeof key, "ns", s, m, z, p);
                    bench_json_num(&j, key, c[s].ns);
                    json_case_key(key, sizeof key, "mops", s, m, z, p);
                    bench_json_num(&j, key, c[s].mops);
                }
            }
    bench_json_int(&j, "get_misses", (long long)misses);
    bench_json_int(&j, "op_errors", (long long)errors);
    bench_json_end(&j);
}
