/*
 * bench_store_pause.c - what a save costs the processes serving traffic:
 * one worker (a forked child, pinned to CPU 0) runs a 95/5 get/set loop
 * over the resident data set and times every operation; the bench process
 * (pinned to CPU 1, with the save's compression threads, which inherit the
 * pin) alternates a quiet window and a save of the whole collection, of
 * the same length. Each round gives a p99.9 quiet and a p99.9 during the
 * save; the figure is the median of the per-round ratios.
 *
 * Latencies go into log-linear histograms in shared memory (32 sub-buckets
 * per power of two: 3% resolution), one per round and phase, so the worker
 * never allocates or writes anything but a counter per operation.
 */
#include "bench_store.h"

#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pcache_store.h"
#include "pcache_storecheck.h"

#define BS_ROUNDS_MAX 8
#define BS_SUB 32
#define BS_BUCKETS (64 * BS_SUB)

struct bs_hist {
    uint64_t count[BS_BUCKETS];
    uint64_t ops;
    uint64_t ns; /* wall time the phase lasted, for ops/s */
};

struct bs_shared {
    _Atomic int slot; /* round * 2 + phase (0 quiet, 1 saving); -1 idle; -2 stop */
    _Atomic int ready;
    struct bs_hist h[BS_ROUNDS_MAX][2];
};

static unsigned bs_bucket(uint64_t ns)
{
    if (ns < BS_SUB)
        return (unsigned)ns;
    unsigned msb = 63u - (unsigned)__builtin_clzll(ns);
    unsigned sub = (unsigned)(ns >> (msb - 5)) & (BS_SUB - 1); /* 5 = log2(BS_SUB) */
    unsigned b = (msb - 4) * BS_SUB + sub;
    return b < BS_BUCKETS ? b : BS_BUCKETS - 1;
}

/* The lower bound of bucket b, in ns (inverse of bs_bucket). */
static double bs_bucket_ns(unsigned b)
{
    if (b < BS_SUB)
        return b;
    unsigned msb = b / BS_SUB + 4, sub = b % BS_SUB;
    return (double)((uint64_t)(BS_SUB + sub) << (msb - 5));
}

static double bs_quantile(const struct bs_hist *h, double q)
{
    uint64_t total = 0;
    for (unsigned b = 0; b < BS_BUCKETS; b++)
        total += h->count[b];
    if (total == 0)
        return 0;
    uint64_t want = (uint64_t)((double)total * q), seen = 0;
    for (unsigned b = 0; b < BS_BUCKETS; b++) {
        seen += h->count[b];
        if (seen > want)
            return bs_bucket_ns(b);
    }
    return bs_bucket_ns(BS_BUCKETS - 1);
}

static int bs_pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0;
}

static void bs_worker(const bs_data *d, pc_coll *coll, struct bs_shared *sh)
{
    uint64_t rng = 0x1234567 ^ (uint64_t)getpid();
    char buf[1024];
    size_t need, vlen;
    /* touch every entry once so the timed phases see a warm table */
    for (size_t i = 0; i < d->n; i++)
        (void)pc_get_buf(coll, bs_key(d, i), d->keys.klen, buf, sizeof buf, &vlen, &need, NULL);
    atomic_store(&sh->ready, 1);
    uint64_t sink = 0;
    for (;;) {
        int slot = atomic_load_explicit(&sh->slot, memory_order_acquire);
        if (slot == -2)
            break;
        if (slot < 0) {
            bench_sleep_ns(100000);
            continue;
        }
        struct bs_hist *h = &sh->h[slot / 2][slot % 2];
        uint64_t start = bench_now_ns();
        /* batches of 256 operations between looks at the slot */
        while (atomic_load_explicit(&sh->slot, memory_order_relaxed) == slot) {
            for (int k = 0; k < 256; k++) {
                uint64_t r = bench_xorshift(&rng);
                size_t i = bench_pick(r, d->n);
                uint64_t t0 = bench_now_ns();
                if ((r & 0xffff) < 3277) /* 5% sets */
                    (void)pc_set(coll, bs_key(d, i), d->keys.klen, bs_val(d, i), d->vlen[i],
                                 d->ttl_ms[i], 0);
                else if (pc_get_buf(coll, bs_key(d, i), d->keys.klen, buf, sizeof buf, &vlen, &need,
                                    NULL) == 0)
                    sink += (unsigned char)buf[0];
                uint64_t t1 = bench_now_ns();
                h->count[bs_bucket(t1 - t0)]++;
            }
            h->ops += 256;
        }
        h->ns += bench_now_ns() - start;
    }
    if (sink == 42)
        fprintf(stderr, " ");
}

int bs_pause_run(const bs_data *d, pc_cache *c, pc_coll *coll, const char *dir, unsigned rounds,
                 bs_pause_result *out)
{
    memset(out, 0, sizeof *out);
    if (rounds > BS_ROUNDS_MAX)
        rounds = BS_ROUNDS_MAX;
    out->rounds = rounds;
    struct bs_shared *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return -1;
    memset(sh, 0, sizeof *sh);
    atomic_store(&sh->slot, -1);
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pc_after_fork_child(c);
        if (ncpu >= 2)
            bs_pin(0);
        bs_worker(d, coll, sh);
        _exit(0);
    }
    cpu_set_t saved;
    sched_getaffinity(0, sizeof saved, &saved);
    out->pinned = ncpu >= 2 && bs_pin(1);
    char path[600];
    snprintf(path, sizeof path, "%s/pause", dir);
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    pc_store *s = NULL;
    char err[256];
    int rc = pc_store_open_checked(path, &sc, &s, err, sizeof err);
    while (rc == 0 && !atomic_load(&sh->ready))
        bench_sleep_ns(10000000);
    double ratio[BS_ROUNDS_MAX], rops[BS_ROUNDS_MAX], q999[BS_ROUNDS_MAX], s999[BS_ROUNDS_MAX],
        q99[BS_ROUNDS_MAX], s99[BS_ROUNDS_MAX], qops[BS_ROUNDS_MAX], sops[BS_ROUNDS_MAX],
        secs[BS_ROUNDS_MAX];
    uint64_t quiet_ns = 1500000000ull;
    unsigned empty = 0;
    for (unsigned r = 0; rc == 0 && r < rounds; r++) {
        atomic_store_explicit(&sh->slot, (int)r * 2, memory_order_release);
        bench_sleep_ns(quiet_ns);
        uint64_t t0 = bench_now_ns();
        atomic_store_explicit(&sh->slot, (int)r * 2 + 1, memory_order_release);
        pc_store_save_result res;
        rc = pc_store_save(s, coll, NULL, &res);
        atomic_store_explicit(&sh->slot, -1, memory_order_release);
        quiet_ns = bench_now_ns() - t0; /* the next quiet window as long as this save */
        secs[r] = (double)quiet_ns / 1e9;
        bench_sleep_ns(200000000); /* let the worker close the phase */
        const struct bs_hist *hq = &sh->h[r][0], *hs = &sh->h[r][1];
        q999[r] = bs_quantile(hq, 0.999);
        s999[r] = bs_quantile(hs, 0.999);
        q99[r] = bs_quantile(hq, 0.99);
        s99[r] = bs_quantile(hs, 0.99);
        ratio[r] = q999[r] > 0 ? s999[r] / q999[r] : 0;
        qops[r] = hq->ns ? (double)hq->ops / ((double)hq->ns / 1e9) : 0;
        sops[r] = hs->ns ? (double)hs->ops / ((double)hs->ns / 1e9) : 0;
        rops[r] = qops[r] > 0 ? sops[r] / qops[r] : 0;
        if (qops[r] <= 0 || sops[r] <= 0 || q999[r] <= 0)
            empty++; /* a window with no operation: the figure would measure nothing */
    }
    atomic_store(&sh->slot, -2);
    waitpid(pid, NULL, 0);
    sched_setaffinity(0, sizeof saved, &saved);
    if (s != NULL)
        pc_store_close(s);
    bs_rmdir(path);
    if (rc != 0) {
        fprintf(stderr, "pcache-bench store: save under load: %s %s\n", pc_store_strerror(rc), err);
        munmap(sh, sizeof *sh);
        return -1;
    }
    if (empty) {
        fprintf(stderr,
                "pcache-bench store: save under load: %u of %u rounds measured no "
                "operation in a window\n",
                empty, rounds);
        munmap(sh, sizeof *sh);
        return -1;
    }
    out->ratio_p999 = bench_median(ratio, rounds);
    bench_minmax(ratio, rounds, &out->ratio_p999_min, &out->ratio_p999_max);
    out->ratio_ops = bench_median(rops, rounds);
    bench_minmax(rops, rounds, &out->ratio_ops_min, &out->ratio_ops_max);
    out->p999_quiet_ns = bench_median(q999, rounds);
    out->p999_save_ns = bench_median(s999, rounds);
    out->p99_quiet_ns = bench_median(q99, rounds);
    out->p99_save_ns = bench_median(s99, rounds);
    out->ops_quiet_per_s = bench_median(qops, rounds);
    out->ops_save_per_s = bench_median(sops, rounds);
    out->save_s = bench_median(secs, rounds);
    munmap(sh, sizeof *sh);
    return 0;
}
