/*
 * bench_engine_mgmt.c - what management costs the datapath, measured in the
 * engine run on the 1M-entry data set:
 *   ratio_during_keys_scan: 95/5 throughput of one worker while another
 *     process walks every key of the 1M collection in a loop (the walker of
 *     perf_keys "*" / perf_scan, without a limit), over the same without;
 *   ratio_with_event_subscriber: 95/5 throughput with every event type
 *     subscribed, over the same without (a raise site costs one shared read
 *     either way; none is on the get/set path).
 * The three variants run interleaved within each round; medians of runs.
 */
#include "bench_engine.h"
#include "bench_pool.h"
#include "bench_util.h"

#include "pcache.h"

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static int count_entry(void *ctx, const pc_entry *e)
{
    uint64_t *n = ctx;
    *n += e->klen + (e->ttl_ms < 0 ? 0u : 1u); /* keys and TTLs, as perf_keys reads them */
    return 0;
}

/* A process that walks the collection until killed; reports walks on exit. */
static pid_t start_scanner(pc_coll *coll, int report_fd)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    uint64_t walks = 0, sink = 0;
    /* the parent SIGKILLs it after the window; the walk count is
     * written after every completed walk, so nothing is lost */
    for (;;) {
        if (pc_walk(coll, "*", 1, 0, count_entry, &sink) != 0)
            _exit(1);
        walks++;
        if (write(report_fd, &walks, sizeof walks) != (ssize_t)sizeof walks)
            _exit(1);
    }
}

int be_measure_mgmt(bench_pool *pool, pc_cache *c, pc_coll *coll, int target, int runs,
                    unsigned run_ms, struct be_results *r)
{
    double base[16], scan[16], sub[16];
    uint64_t walks_total = 0;
    for (int run = 0; run < runs; run++) {
        bench_job job = {.target = target,
                         .nprocs = 1,
                         .set_per_64k = 3277, /* 95/5 */
                         .duration_ns = (uint64_t)run_ms * 1000000u * 2,
                         .warmup_ns = 10000000u,
                         .seed = bench_mix64(0x5ca17 + (uint64_t)run)};
        bench_result res;
        if (bench_pool_run(pool, &job, &res) != 0)
            return -1;
        base[run] = res.mops;

        int fds[2];
        if (pipe(fds) != 0)
            return -1;
        pid_t scanner = start_scanner(coll, fds[1]);
        close(fds[1]);
        if (scanner < 0)
            return -1;
        usleep(20000); /* the scanner is walking before the window opens */
        int rc = bench_pool_run(pool, &job, &res);
        kill(scanner, SIGKILL);
        waitpid(scanner, NULL, 0);
        uint64_t w = 0, last = 0;
        while (read(fds[0], &w, sizeof w) == (ssize_t)sizeof w)
            last = w;
        close(fds[0]);
        walks_total += last;
        if (rc != 0)
            return -1;
        scan[run] = res.mops;

        for (int t = 0; t < PC_EV_COUNT; t++)
            pc_event_subscribe(c, t, 1);
        rc = bench_pool_run(pool, &job, &res);
        for (int t = 0; t < PC_EV_COUNT; t++)
            pc_event_subscribe(c, t, 0);
        if (rc != 0)
            return -1;
        sub[run] = res.mops;
    }
    r->mgmt_base_mops = bench_median(base, (size_t)runs);
    r->mgmt_scan_mops = bench_median(scan, (size_t)runs);
    r->mgmt_sub_mops = bench_median(sub, (size_t)runs);
    r->mgmt_scan_walks = walks_total;
    fprintf(stderr,
            "  management, 95/5 1p at 1M: alone %.3f Mops/s, during a full key walk loop %.3f "
            "(%llu walks), with every event subscribed %.3f\n",
            r->mgmt_base_mops, r->mgmt_scan_mops, (unsigned long long)walks_total,
            r->mgmt_sub_mops);
    return 0;
}
