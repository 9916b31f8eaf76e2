/*
 * bench_engine_mgmt.c - what management costs the datapath, measured in the
 * engine run on the 1M-entry data set:
 *   ratio_during_keys_scan: 95/5 throughput of one worker while another
 *     process walks every key of the 1M collection in a loop (the walker of
 *     perf_keys "*" / perf_scan, without a limit), over the same without;
 *   ratio_with_event_subscriber: 95/5 throughput with every event type
 *     subscribed, over the same without (a raise site costs one shared read
 *     either way; none is on the get/set path).
 * The three variants run interleaved within each round; a ratio is the
 * median of the per-run ratios, with their spread. The walker reports the
 * entries it visited inside each window: a window with none, or less than
 * one full walk over all windows, fails the bench (the figure would show
 * CPU sharing, not a walk).
 */
#include "bench_engine.h"
#include "bench_pool.h"
#include "bench_util.h"

#include "pcache.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

/* The walker's progress: entries visited, reported every SCAN_REPORT. */
#define SCAN_REPORT 65536u

struct scan_ctx {
    uint64_t visited, sink;
    int fd;
};

static int count_entry(void *ctx, const pc_entry *e)
{
    struct scan_ctx *s = ctx;
    s->sink += e->klen + (e->ttl_ms < 0 ? 0u : 1u); /* keys and TTLs, as perf_keys reads them */
    if (++s->visited % SCAN_REPORT == 0 &&
        write(s->fd, &s->visited, sizeof s->visited) != (ssize_t)sizeof s->visited)
        _exit(1);
    return 0;
}

/* A process that walks the collection until killed, writing its running
 * count of visited entries to report_fd every SCAN_REPORT entries. */
static pid_t start_scanner(pc_coll *coll, int report_fd)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    struct scan_ctx s = {.fd = report_fd};
    for (;;)
        if (pc_walk(coll, "*", 1, 0, count_entry, &s) != 0)
            _exit(1);
}

/* The newest count on the (non-blocking) pipe, or last when none is new. */
static uint64_t scan_drain(int fd, uint64_t last)
{
    uint64_t v;
    while (read(fd, &v, sizeof v) == (ssize_t)sizeof v)
        last = v;
    return last;
}

/* One window of the job while a scanner walks: the entries it visited
 * inside the window go to *visited (0 = it never ran: the caller fails). */
static int scan_window(bench_pool *pool, pc_coll *coll, const bench_job *job, bench_result *res,
                       uint64_t *visited)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    pid_t scanner = start_scanner(coll, fds[1]);
    close(fds[1]);
    if (scanner < 0) {
        close(fds[0]);
        return -1;
    }
    /* the window opens once the scanner has reported: it is walking */
    uint64_t t0 = bench_now_ns(), start = 0;
    while ((start = scan_drain(fds[0], 0)) == 0 && bench_now_ns() - t0 < 10000000000ull)
        usleep(1000);
    int rc = bench_pool_run(pool, job, res);
    uint64_t end = scan_drain(fds[0], start);
    kill(scanner, SIGKILL);
    waitpid(scanner, NULL, 0);
    close(fds[0]);
    *visited = start > 0 ? end - start : 0;
    return rc;
}

int be_measure_mgmt(bench_pool *pool, pc_cache *c, pc_coll *coll, int target, int runs,
                    unsigned run_ms, uint64_t entries, struct be_results *r)
{
    double base[16], scan[16], sub[16], rscan[16], rsub[16];
    uint64_t visited_total = 0;
    for (int run = 0; run < runs; run++) {
        bench_job job = {.target = target,
                         .nprocs = 1,
                         .set_per_64k = 3277, /* 95/5 */
                         .duration_ns = (uint64_t)run_ms * 1000000u * 2,
                         .warmup_ns = 10000000u,
                         .seed = bench_mix64(0x5ca17 + (uint64_t)run)};
        bench_result res;
        uint64_t visited = 0;
        if (bench_pool_run(pool, &job, &res) != 0)
            return -1;
        base[run] = res.mops;
        if (scan_window(pool, coll, &job, &res, &visited) != 0)
            return -1;
        if (visited == 0) {
            fprintf(stderr, "pcache-bench: keys scan: the walker visited no entry in run %d's "
                            "window; the figure would measure no walk\n", run + 1);
            return -1;
        }
        visited_total += visited;
        scan[run] = res.mops;

        for (int t = 0; t < PC_EV_COUNT; t++)
            pc_event_subscribe(c, t, 1);
        int rc = bench_pool_run(pool, &job, &res);
        for (int t = 0; t < PC_EV_COUNT; t++)
            pc_event_subscribe(c, t, 0);
        if (rc != 0)
            return -1;
        sub[run] = res.mops;
        rscan[run] = base[run] > 0 ? scan[run] / base[run] : 0;
        rsub[run] = base[run] > 0 ? sub[run] / base[run] : 0;
    }
    r->mgmt_base_mops = bench_median(base, (size_t)runs);
    r->mgmt_scan_mops = bench_median(scan, (size_t)runs);
    r->mgmt_sub_mops = bench_median(sub, (size_t)runs);
    bench_minmax(rscan, (size_t)runs, &r->mgmt_scan_ratio_min, &r->mgmt_scan_ratio_max);
    bench_minmax(rsub, (size_t)runs, &r->mgmt_sub_ratio_min, &r->mgmt_sub_ratio_max);
    r->mgmt_scan_ratio = bench_median(rscan, (size_t)runs);
    r->mgmt_sub_ratio = bench_median(rsub, (size_t)runs);
    r->mgmt_scan_entries = visited_total;
    r->mgmt_scan_walks = entries > 0 ? (double)visited_total / (double)entries : 0;
    fprintf(stderr,
            "  management, 95/5 1p at 1M: alone %.3f Mops/s, during a full key walk loop %.3f "
            "(%.2f walks in the windows), with every event subscribed %.3f\n",
            r->mgmt_base_mops, r->mgmt_scan_mops, r->mgmt_scan_walks, r->mgmt_sub_mops);
    if (r->mgmt_scan_walks < 1.0) {
        fprintf(stderr, "pcache-bench: keys scan: less than one full walk (%.2f) in %d windows; "
                        "the machine is too busy for this figure\n", r->mgmt_scan_walks, runs);
        return -1;
    }
    return 0;
}
