/*
 * bench_store_journal.c - the write-ahead journal's cost on the set path:
 * one process, 100% set on 50,000 resident keys of 16 hex digits, 200-byte
 * values that differ from the stored ones, with the collection's journal
 * off, everysec and always. The modes are interleaved in slices (so a
 * disturbance of the machine hits every mode alike) and a mode's figure is
 * the median of its slices. everysec runs as a host runs it: the worker
 * appends to its ring in shared memory and ticks once a second, a forked
 * "maintenance" process calls pc_journal_sync_all every second (its first
 * call starts the drainer thread that writes the rings out and fdatasyncs,
 * docs/journal-format.md §6).
 */
#include "bench_store.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pcache_journal.h"

static uint64_t bs_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

enum { BS_JKEYS = 50000, BS_JVAL = 200, BS_JMODES = 3 };

/* One slice of mode: sets for slice_ms; returns sets/s, *cpu_ns per set. */
static int bs_slice(pc_journal *j, pc_coll *co, const bench_keys *keys, unsigned slice_ms,
                    uint64_t *stamp, uint64_t *rng, double *rate, double *cpu_ns)
{
    char val[BS_JVAL];
    bench_fill_value(val, sizeof val, 99);
    uint64_t t0 = bench_now_ns(), end = t0 + (uint64_t)slice_ms * 1000000ull;
    uint64_t next_tick = t0 + 1000000000ull, c0 = bs_thread_cpu_ns(), ops = 0, t = t0;
    while (t < end) {
        for (int k = 0; k < 64; k++) {
            ++*stamp;
            memcpy(val, stamp, sizeof *stamp);
            size_t i = bench_pick(bench_xorshift(rng), BS_JKEYS);
            int rc = pc_set(co, bench_key(keys, i), keys->klen, val, sizeof val, 0, 0);
            if (rc != 0) {
                fprintf(stderr, "pcache-bench store: journal set: %s\n", pc_store_strerror(rc));
                return -1;
            }
        }
        ops += 64;
        t = bench_now_ns();
        if (t >= next_tick) { /* the host's once-a-second tick */
            pc_journal_tick(j, 0);
            next_tick += 1000000000ull;
        }
    }
    *rate = (double)ops / ((double)(bench_now_ns() - t0) / 1e9);
    *cpu_ns = (double)(bs_thread_cpu_ns() - c0) / (double)ops;
    /* not timed: in a host the drainer writes the ring out; this keeps a
     * slice's records out of the next slice (whatever the drainer had not
     * written yet is at most one ring) */
    pc_journal_flush(j, 0);
    /* keep the disk from filling: a save would retire these segments */
    uint64_t e;
    if (pc_journal_begin_save(j, co, &e) == 0) {
        pc_journal_tick(j, 0);
        pc_journal_retire(j, co, e, NULL);
    }
    return 0;
}

int bs_journal_run(const char *dir, unsigned slices, unsigned slice_ms, bs_journal_result *out)
{
    memset(out, 0, sizeof *out);
    if (slices > 64)
        slices = 64;
    out->slices = slices;
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "bench=16";
    cfg.mem_mb = 256;
    pc_cache *c = NULL;
    pc_coll *co = NULL;
    if (pc_cache_create(&cfg, &c) != 0 || pc_coll_find(c, "bench", 5, &co) != 0)
        return -1;
    pc_journal_config jc;
    pc_journal_config_init(&jc);
    jc.dir = dir;
    jc.boot_gen = 1;
    pc_journal *j = NULL;
    int rc = pc_journal_open(c, &jc, &j);
    if (rc == 0)
        rc = pc_journal_install(j);
    bench_keys keys = {0};
    if (rc != 0 || bench_keys_make(&keys, BS_JKEYS, 16, 0x10a4) != 0) {
        fprintf(stderr, "pcache-bench store: journal: %s\n", pc_store_strerror(rc));
        return -1;
    }
    char val[BS_JVAL];
    bench_fill_value(val, sizeof val, 1);
    for (size_t i = 0; i < BS_JKEYS; i++)
        if (pc_set(co, bench_key(&keys, i), keys.klen, val, sizeof val, 0, 0) != 0)
            return -1;
    pid_t maint = fork();
    if (maint == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pc_after_fork_child(c);
        for (;;) { /* the first call starts the drainer thread */
            pc_journal_sync_all(j);
            sleep(1);
        }
    }
    static const unsigned modes[BS_JMODES] = {PC_JOURNAL_OFF, PC_JOURNAL_EVERYSEC,
                                              PC_JOURNAL_ALWAYS};
    double rate[BS_JMODES][64], cpu[BS_JMODES][64];
    uint64_t stamp = 0, rng = 0x77;
    for (unsigned r = 0; r < slices && rc == 0; r++)
        for (int m = 0; m < BS_JMODES && rc == 0; m++) {
            pc_journal_set_mode(co, modes[m]);
            /* always pays one fdatasync per set: a short slice is enough */
            unsigned ms = modes[m] == PC_JOURNAL_ALWAYS ? slice_ms / 3 + 1 : slice_ms;
            rc = bs_slice(j, co, &keys, ms, &stamp, &rng, &rate[m][r], &cpu[m][r]);
        }
    kill(maint, SIGKILL);
    waitpid(maint, NULL, 0);
    pc_journal_set_mode(co, PC_JOURNAL_OFF);
    pc_journal_close(j);
    pc_cache_destroy(c);
    bench_keys_free(&keys);
    if (rc != 0)
        return -1;
    out->off = bench_median(rate[0], slices);
    out->everysec = bench_median(rate[1], slices);
    out->always = bench_median(rate[2], slices);
    out->off_cpu_ns = bench_median(cpu[0], slices);
    out->everysec_cpu_ns = bench_median(cpu[1], slices);
    /* the figures: each slice's mode over the off slice of the same round */
    double q[64];
    for (unsigned r = 0; r < slices; r++)
        q[r] = rate[0][r] > 0 ? rate[1][r] / rate[0][r] : 0.0;
    bench_minmax(q, slices, &out->everysec_ratio_min, &out->everysec_ratio_max);
    out->everysec_ratio = bench_median(q, slices);
    for (unsigned r = 0; r < slices; r++)
        q[r] = rate[0][r] > 0 ? rate[2][r] / rate[0][r] : 0.0;
    bench_minmax(q, slices, &out->always_ratio_min, &out->always_ratio_max);
    out->always_ratio = bench_median(q, slices);
    return 0;
}
