/*
 * bench_server.c - pcache-bench server: pcached against redis-server
 * (Debian) in the same run, through the lean load generator (bench_rload.c)
 * and through redis-benchmark, plus what persistence costs the datapath
 * (docs/benchmarks.md, "server").
 *
 *   pcache-bench server [--quick] [--json] [--pcached PATH]
 *                       [--redis-server PATH] [--pogocache PATH]
 *                       [--seconds S] [--rounds N] [--keys N]
 *                       [--no-redis-benchmark]
 *
 * Every server is started here, on a free loopback port, with its files in
 * a temporary directory that is removed at the end; redis-server runs with
 * no persistence of its own (save "", appendonly no, its dir the temp dir).
 * With two or more CPUs the server is pinned to CPU 0 and the client to
 * CPU 1 (pcached: the master and all its children, 1 worker); "2
 * workers" runs unpinned.
 *
 * Figures: ratio_{set,get}_p{1,16} = pcached / redis-server through the
 * lean client (50 connections, 200-byte values, 100k keys), the median of
 * the per-round ratios over --rounds interleaved rounds (5; quick 3), with
 * their spread (_min, _max) and, per server and case, its CPU microseconds
 * per request and the generator's CPU time over wall time in its busiest
 * round (near 1.0 the generator, not the server, set the rate);
 * during_save_get_{p999,rate}_ratio = GET p99.9 and rate while saves of the
 * filled table run back to back / the same without, paired in each of
 * --rounds rounds (median and spread); shutdown_save_s = SIGTERM to exit of
 * pcached holding the filled table (db_mode 2); restart_ready_s = exec to the
 * first answered PING of a pcached that loads it (DBSIZE checked).
 */
#include "bench_cmds.h"
#include "bench_rload.h"
#include "bench_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#define SRV_ROUNDS_MAX 15

struct sopts {
    int quick, json;
    int rounds; /* interleaved rounds of the lean-client cases */
    double seconds;
    uint64_t keys;
    char pcached[PATH_MAX];
    const char *redis_server, *redis_benchmark;
    const char *pogocache; /* NULL = not measured */
    char tmp[PATH_MAX];
    int pin; /* 2+ CPUs */
};

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(sa.sin_port);
}

static void pin_self(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)sched_setaffinity(0, sizeof set, &set);
}

static void unpin_self(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long i = 0; i < n && i < CPU_SETSIZE; i++)
        CPU_SET((int)i, &set);
    (void)sched_setaffinity(0, sizeof set, &set);
}

/* Starts argv with its output in log; pinned to cpu unless cpu < 0. */
static pid_t spawn(char *const *argv, const char *log, int cpu)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (cpu >= 0)
        pin_self(cpu);
    else
        unpin_self();
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    setsid();
    execvp(argv[0], argv);
    _exit(127);
}

static int wait_ready(int port, pid_t pid, double timeout)
{
    double end = mono() + timeout;
    char buf[64];
    while (mono() < end) {
        if (rload_command(port, "PING\r\n", buf, sizeof buf, 1000) == 0 &&
            strncmp(buf, "+PONG", 5) == 0)
            return 0;
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return -1;
        usleep(2000);
    }
    return -1;
}

/* SIGTERM, then wait; SIGKILL of the group after 120 s. Returns the time. */
static double stop(pid_t pid)
{
    double t0 = mono();
    kill(pid, SIGTERM);
    for (int i = 0; i < 120000; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return mono() - t0;
        usleep(1000);
    }
    kill(-pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

struct server {
    const char *name;
    pid_t pid;
    int port;
};

static int start_pcached(const struct sopts *o, struct server *s, int workers, int cpu, int persist)
{
    char port[32], wk[32], url[PATH_MAX + 16], log[PATH_MAX + 16];
    s->port = free_port();
    snprintf(port, sizeof port, "--port=%d", s->port);
    snprintf(wk, sizeof wk, "--workers=%d", workers);
    snprintf(url, sizeof url, "--db_url=%s/store", o->tmp);
    snprintf(log, sizeof log, "%s/pcached.log", o->tmp);
    char *argv[] = {(char *)o->pcached,
                    port,
                    wk,
                    "--mem_mb=2048",
                    persist ? url : "--db_url=",
                    persist ? "--db_mode=2" : "--db_mode=0",
                    persist ? "--persist_collections=default" : "--persist_collections=",
                    "--journal=", /* snapshots only, as measured so far: no store default */
                    "--log_level=warn",
                    NULL};
    s->name = "pcached";
    s->pid = spawn(argv, log, cpu);
    return wait_ready(s->port, s->pid, 120);
}

static int start_redis(const struct sopts *o, struct server *s, int cpu)
{
    char port[16], log[PATH_MAX + 16];
    s->port = free_port();
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(log, sizeof log, "%s/redis.log", o->tmp);
    char *argv[] = {(char *)o->redis_server,
                    "--port",
                    port,
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    (char *)o->tmp,
                    "--dbfilename",
                    "bench.rdb",
                    "--daemonize",
                    "no",
                    NULL};
    s->name = "redis-server";
    s->pid = spawn(argv, log, cpu);
    return wait_ready(s->port, s->pid, 60);
}

/* pogocache (github.com/tidwall/pogocache), when given: one thread, no
 * persistence, same pinned core. */
static int start_pogocache(const struct sopts *o, struct server *s, int cpu, const char *threads)
{
    char port[16], log[PATH_MAX + 16];
    s->port = free_port();
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(log, sizeof log, "%s/pogocache.log", o->tmp);
    char *argv[] = {(char *)o->pogocache, "-h", "127.0.0.1", "-p", port, "--threads",
                    (char *)threads,      NULL};
    s->name = "pogocache";
    s->pid = spawn(argv, log, cpu);
    return wait_ready(s->port, s->pid, 60);
}

static int fill(const struct server *s, uint64_t keys)
{
    rload_opts lo = {s->port, RLOAD_FILL, 50, 64, 200, keys, 0, 0};
    rload_result r;
    return rload_run(&lo, &r);
}

/* CPU seconds of pid and its children (pcached's workers are children of
 * its master), from /proc: the server's cost per request. */
static double tree_cpu_s(pid_t pid)
{
    double hz = (double)sysconf(_SC_CLK_TCK), t = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char path[300], buf[1024];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        char *rp = strrchr(buf, ')'); /* the name may hold spaces */
        long ppid = 0;
        unsigned long ut = 0, st = 0;
        if (rp == NULL || sscanf(rp + 2, "%*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                                 &ppid, &ut, &st) != 3)
            continue;
        if (atol(e->d_name) == (long)pid || ppid == (long)pid)
            t += (double)(ut + st) / hz;
    }
    if (d != NULL)
        closedir(d);
    return t;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One measurement. Beside the rates: gen_cpu = the generator's own CPU time
 * over the wall time (1.0 = it was the bottleneck), srv_us = the server's
 * CPU microseconds per request. A run that did nothing fails. */
static int measure(const struct sopts *o, const struct server *s, int op, unsigned pipeline,
                   uint64_t keys, rload_result *r)
{
    rload_opts lo = {s->port, op, 50, pipeline, 200, keys, 0, o->seconds};
    double c0 = thread_cpu_s(), w0 = mono(), s0 = tree_cpu_s(s->pid);
    int rc = rload_run(&lo, r);
    double c1 = thread_cpu_s(), w1 = mono(), s1 = tree_cpu_s(s->pid);
    if (rc == 0 && (r->ops == 0 || r->rate <= 0)) {
        fprintf(stderr, "server: a run against %s measured no request\n", s->name);
        return -1;
    }
    r->gen_cpu = w1 > w0 ? (c1 - c0) / (w1 - w0) : 0;
    r->srv_us = r->ops ? (s1 - s0) * 1e6 / (double)r->ops : 0;
    return rc;
}

/* redis-benchmark -c 50 -d 200 -r 100000 -t set,get -P p --csv: rps of SET, GET */
static int redis_bench(const struct sopts *o, const struct server *s, unsigned pipeline,
                       double rps[2])
{
    char cmd[1024];
    unsigned n = o->quick ? 100000 : 500000;
    if (pipeline > 1)
        n *= 4;
    snprintf(cmd, sizeof cmd,
             "%s %s -p %d -c 50 -d 200 -r 100000 -t set,get -P %u -n %u --csv 2>/dev/null",
             o->pin ? "taskset -c 1" : "", o->redis_benchmark, s->port, pipeline, n);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    char line[512];
    rps[0] = rps[1] = 0;
    while (fgets(line, sizeof line, p) != NULL) {
        double v;
        if (sscanf(line, "\"SET\",\"%lf\"", &v) == 1)
            rps[0] = v;
        else if (sscanf(line, "\"GET\",\"%lf\"", &v) == 1)
            rps[1] = v;
    }
    return pclose(p) == 0 && rps[0] > 0 && rps[1] > 0 ? 0 : -1;
}

#define NSRV_MAX 3

/* One lean-client case of one server over the rounds. */
struct lean_case {
    rload_result med;       /* the run nearest the median rate */
    double ratio[NSRV_MAX]; /* median of per-round (this / server k) */
    double rmin[NSRV_MAX], rmax[NSRV_MAX];
    double gen_cpu_max; /* the busiest round's generator CPU / wall */
    double srv_us;      /* median server CPU us per request */
    /* median of per-round (server k's CPU us per request / this one's):
     * above 1, this server costs less per request. The figure that decides
     * a rate ratio once the generator or the cores, not the server, set
     * the rate (both servers then serve what they are given). */
    double cpu_ratio[NSRV_MAX];
    double cmin[NSRV_MAX], cmax[NSRV_MAX];
};

/* GET -P 1 without and during saves, paired within each round. */
struct save_figs {
    rload_result base, during; /* medians of p99.9 and rate over the rounds */
    double p999_ratio, p999_min, p999_max;
    double rate_ratio, rate_min, rate_max;
    double gen_cpu_max;
    uint64_t samples_min; /* the fewest GETs (latency samples) in a window */
};

struct figs {
    struct lean_case lean[NSRV_MAX][2][2]; /* [pcached, redis, pogocache][set/get][p1/p16] */
    /* [pcached 2 workers, pogocache 2 threads][set/get][p1/p16], unpinned */
    struct lean_case two[2][2][2];
    double rb[NSRV_MAX][2][2]; /* redis-benchmark [server][p][set/get] */
    struct save_figs save, r_save;
    double shutdown_s, restart_s;
    uint64_t restart_keys;
    double load_start, load_end; /* the 1-minute load average */
};

static double loadavg1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

/* In a child: SAVE (or BGSAVE) back to back until killed. */
static pid_t saver(int port, int bg)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    char buf[256];
    for (;;) {
        if (rload_command(port, bg ? "BGSAVE\r\n" : "SAVE\r\n", buf, sizeof buf, 600000) != 0)
            usleep(10000);
        if (bg)
            usleep(100000);
    }
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0;
}

static int during_one(const struct sopts *o, const struct server *s, int bg, rload_result *during)
{
    pid_t sv = saver(s->port, bg);
    usleep(50000);
    int rc = measure(o, s, RLOAD_GET, 1, o->keys, during);
    kill(sv, SIGKILL);
    waitpid(sv, NULL, 0);
    if (bg) { /* redis: let its BGSAVE child finish, so stopping it orphans nothing */
        char buf[256];
        for (int i = 0; i < 600; i++) {
            if (rload_command(s->port, "SAVE\r\n", buf, sizeof buf, 600000) == 0 &&
                strncmp(buf, "+OK", 3) == 0)
                break;
            usleep(100000);
        }
    }
    return rc;
}

/* --rounds rounds of (GET without a save, GET during back-to-back saves);
 * the ratios are medians of the per-round ratios, with their spread. */
static int during_save(const struct sopts *o, const struct server *s, int bg, struct save_figs *out)
{
    double p999b[SRV_ROUNDS_MAX], p999d[SRV_ROUNDS_MAX], rateb[SRV_ROUNDS_MAX],
        rated[SRV_ROUNDS_MAX], rp[SRV_ROUNDS_MAX], rr[SRV_ROUNDS_MAX];
    out->gen_cpu_max = 0;
    out->samples_min = UINT64_MAX;
    for (int r = 0; r < o->rounds; r++) {
        rload_result b, d;
        if (measure(o, s, RLOAD_GET, 1, o->keys, &b) != 0 || during_one(o, s, bg, &d) != 0)
            return -1;
        p999b[r] = b.p999_us;
        p999d[r] = d.p999_us;
        rateb[r] = b.rate;
        rated[r] = d.rate;
        rp[r] = ratio(d.p999_us, b.p999_us);
        rr[r] = ratio(d.rate, b.rate);
        out->gen_cpu_max = fmax(out->gen_cpu_max, fmax(b.gen_cpu, d.gen_cpu));
        out->samples_min = b.ops < out->samples_min ? b.ops : out->samples_min;
        out->samples_min = d.ops < out->samples_min ? d.ops : out->samples_min;
        if (r == 0) {
            out->base = b;
            out->during = d;
        }
        fprintf(stderr, "server: %s round %d: GET p99.9 %.0f -> %.0f us, rate %.0f -> %.0f\n",
                s->name, r + 1, b.p999_us, d.p999_us, b.rate, d.rate);
    }
    size_t n = (size_t)o->rounds;
    out->p999_ratio = bench_median(rp, n);
    bench_minmax(rp, n, &out->p999_min, &out->p999_max);
    out->rate_ratio = bench_median(rr, n);
    bench_minmax(rr, n, &out->rate_min, &out->rate_max);
    out->base.p999_us = bench_median(p999b, n);
    out->during.p999_us = bench_median(p999d, n);
    out->base.rate = bench_median(rateb, n);
    out->during.rate = bench_median(rated, n);
    return 0;
}

/* The figures of one case of one server from its rounds (see lean_case). */
static void lean_summary(rload_result (*runs)[2][2][SRV_ROUNDS_MAX], int nsrv, int rounds, int srv,
                         int op, int p, struct lean_case *lc)
{
    const rload_result *mine = runs[srv][op][p];
    double rate[SRV_ROUNDS_MAX], us[SRV_ROUNDS_MAX], rat[SRV_ROUNDS_MAX], cr[SRV_ROUNDS_MAX];
    lc->gen_cpu_max = 0;
    for (int r = 0; r < rounds; r++) {
        rate[r] = mine[r].rate;
        us[r] = mine[r].srv_us;
        lc->gen_cpu_max = fmax(lc->gen_cpu_max, mine[r].gen_cpu);
    }
    double med = bench_median(rate, (size_t)rounds);
    int pick = 0; /* the run nearest the median (an even count averages) */
    for (int r = 1; r < rounds; r++)
        if (fabs(mine[r].rate - med) < fabs(mine[pick].rate - med))
            pick = r;
    lc->med = mine[pick];
    lc->srv_us = bench_median(us, (size_t)rounds);
    for (int k = 0; k < nsrv; k++) {
        for (int r = 0; r < rounds; r++) {
            rat[r] = ratio(mine[r].rate, runs[k][op][p][r].rate);
            cr[r] = ratio(runs[k][op][p][r].srv_us, mine[r].srv_us);
        }
        lc->ratio[k] = bench_median(rat, (size_t)rounds);
        bench_minmax(rat, (size_t)rounds, &lc->rmin[k], &lc->rmax[k]);
        lc->cpu_ratio[k] = bench_median(cr, (size_t)rounds);
        bench_minmax(cr, (size_t)rounds, &lc->cmin[k], &lc->cmax[k]);
    }
}

static void stop_all(const struct server *sv, int n)
{
    for (int k = 0; k < n; k++)
        stop(sv[k].pid);
}

/* 1. lean client, one pinned core: pcached (1 worker), redis-server and
 * pogocache all run at once on CPU 0 (only the one under load does any
 * work); each round measures every case on every server back to back,
 * rotating which server goes first, so drift on this shared VM hits them
 * alike. A figure is the median over rounds; a ratio is the median of
 * the per-round ratios. */
static int run_lean(const struct sopts *o, struct figs *f, int cs)
{
    const uint64_t ks = 100000;
    int nsrv = o->pogocache != NULL ? 3 : 2;
    struct server sv[NSRV_MAX];
    static rload_result runs[NSRV_MAX][2][2][SRV_ROUNDS_MAX];
    for (int srv = 0; srv < nsrv; srv++) {
        int rc = srv == 0   ? start_pcached(o, &sv[srv], 1, cs, 0)
                 : srv == 1 ? start_redis(o, &sv[srv], cs)
                            : start_pogocache(o, &sv[srv], cs, "1");
        if (rc != 0 || fill(&sv[srv], ks) != 0) {
            fprintf(stderr, "server: %s did not start or fill (log in %s)\n", sv[srv].name, o->tmp);
            stop_all(sv, srv + 1);
            return -1;
        }
    }
    for (int r = 0; r < o->rounds; r++) {
        for (int op = 0; op < 2; op++)
            for (int p = 0; p < 2; p++)
                for (int i = 0; i < nsrv; i++) {
                    int srv = (i + r) % nsrv;
                    if (measure(o, &sv[srv], op ? RLOAD_GET : RLOAD_SET, p ? 16 : 1, ks,
                                &runs[srv][op][p][r]) != 0) {
                        stop_all(sv, nsrv);
                        return -1;
                    }
                }
        fprintf(stderr, "server: lean round %d of %d done, load %.2f\n", r + 1, o->rounds,
                loadavg1());
    }
    for (int srv = 0; srv < nsrv; srv++)
        for (int op = 0; op < 2; op++)
            for (int p = 0; p < 2; p++)
                lean_summary(runs, nsrv, o->rounds, srv, op, p, &f->lean[srv][op][p]);
    for (int srv = 0; srv < nsrv; srv++) {
        for (int p = 0; p < 2; p++)
            if (o->redis_benchmark != NULL &&
                redis_bench(o, &sv[srv], p ? 16 : 1, f->rb[srv][p]) != 0)
                fprintf(stderr, "server: redis-benchmark against %s failed\n", sv[srv].name);
        stop(sv[srv].pid);
    }
    return 0;
}

/* pcached with 2 workers and, with --pogocache, pogocache with 2 threads,
 * all unpinned (the client too): --rounds interleaved rounds, summarised
 * as the lean cases are (lean_summary): median rates, the median of
 * per-round rate ratios and of per-round CPU-per-request ratios, the
 * generator's busiest round. The generator shares the two cores with the
 * server here, so its CPU figure says how much of them the server had. */
static int run_two(const struct sopts *o, struct figs *f)
{
    const uint64_t ks = 100000;
    int n = o->pogocache != NULL ? 2 : 1;
    struct server sv[2];
    static rload_result runs[2][2][2][SRV_ROUNDS_MAX];
    for (int i = 0; i < n; i++)
        if ((i == 0 ? start_pcached(o, &sv[i], 2, -1, 0) : start_pogocache(o, &sv[i], -1, "2")) !=
                0 ||
            fill(&sv[i], ks) != 0) {
            stop_all(sv, i + 1);
            return -1;
        }
    for (int r = 0; r < o->rounds; r++)
        for (int op = 0; op < 2; op++)
            for (int p = 0; p < 2; p++)
                for (int k = 0; k < n; k++) {
                    int i = (k + r) % n;
                    if (measure(o, &sv[i], op ? RLOAD_GET : RLOAD_SET, p ? 16 : 1, ks,
                                &runs[i][op][p][r]) != 0) {
                        stop_all(sv, n);
                        return -1;
                    }
                }
    for (int i = 0; i < n; i++)
        for (int op = 0; op < 2; op++)
            for (int p = 0; p < 2; p++)
                lean_summary(runs, n, o->rounds, i, op, p, &f->two[i][op][p]);
    stop_all(sv, n);
    return 0;
}

static int run_all(const struct sopts *o, struct figs *f)
{
    int cs = o->pin ? 0 : -1;
    f->load_start = loadavg1();
    if (o->pin)
        pin_self(1);
    if (run_lean(o, f, cs) != 0)
        return -1;
    /* 2. pcached, 2 workers, unpinned (against pogocache, 2 threads) */
    unpin_self();
    if (run_two(o, f) != 0)
        return -1;
    if (o->pin)
        pin_self(1);
    /* 3. persistence: GET tail during saves, shutdown save, restart */
    {
        struct server s;
        if (start_pcached(o, &s, 1, cs, 1) != 0 || fill(&s, o->keys) != 0)
            return -1;
        if (during_save(o, &s, 0, &f->save) != 0)
            return -1;
        f->shutdown_s = stop(s.pid);
        double t0 = mono();
        if (start_pcached(o, &s, 1, cs, 1) != 0)
            return -1;
        f->restart_s = mono() - t0;
        char buf[128];
        if (rload_command(s.port, "DBSIZE\r\n", buf, sizeof buf, 5000) == 0)
            f->restart_keys = strtoull(buf + 1, NULL, 10);
        stop(s.pid);
        struct server r;
        if (start_redis(o, &r, cs) != 0 || fill(&r, o->keys) != 0)
            return -1;
        if (during_save(o, &r, 1, &f->r_save) != 0)
            return -1;
        stop(r.pid);
    }
    f->load_end = loadavg1();
    return 0;
}

static const char *const srv_key[NSRV_MAX] = {"pcached", "redis", "pogocache"};
static const char *const op_key[2] = {"set", "get"};

static void json_save(const char *pfx, const struct save_figs *sf)
{
    printf(",\"%s_p999_ratio\":%.3f,\"%s_p999_ratio_min\":%.3f,\"%s_p999_ratio_max\":%.3f", pfx,
           sf->p999_ratio, pfx, sf->p999_min, pfx, sf->p999_max);
    printf(",\"%s_rate_ratio\":%.3f,\"%s_rate_ratio_min\":%.3f,\"%s_rate_ratio_max\":%.3f", pfx,
           sf->rate_ratio, pfx, sf->rate_min, pfx, sf->rate_max);
    printf(",\"%s_gen_cpu_max\":%.3f,\"%s_samples_min\":%llu", pfx, sf->gen_cpu_max, pfx,
           (unsigned long long)sf->samples_min);
}

static void report_json(const struct sopts *o, const struct figs *f, const char *sfx)
{
    int nsrv = o->pogocache != NULL ? 3 : 2;
    printf("{\"bench\":\"server\",\"quick\":%s,\"keys\":%llu,\"seconds\":%g,\"rounds\":%d,"
           "\"pinned\":%s,\"loadavg_start\":%.2f,\"loadavg_end\":%.2f",
           o->quick ? "true" : "false", (unsigned long long)o->keys, o->seconds, o->rounds,
           o->pin ? "true" : "false", f->load_start, f->load_end);
    for (int op = 0; op < 2; op++)
        for (int p = 0; p < 2; p++) {
            const struct lean_case *lc = &f->lean[0][op][p];
            int pp = p ? 16 : 1;
            printf(",\"ratio_%s_p%d\":%.3f,\"ratio_%s_p%d_min\":%.3f,\"ratio_%s_p%d_max\":%.3f",
                   op_key[op], pp, lc->ratio[1], op_key[op], pp, lc->rmin[1], op_key[op], pp,
                   lc->rmax[1]);
            printf(",\"cpu_ratio_%s_p%d\":%.3f,\"cpu_ratio_%s_p%d_min\":%.3f,"
                   "\"cpu_ratio_%s_p%d_max\":%.3f",
                   op_key[op], pp, lc->cpu_ratio[1], op_key[op], pp, lc->cmin[1], op_key[op], pp,
                   lc->cmax[1]);
            if (nsrv > 2) {
                printf(",\"ratio_vs_pogocache_%s_p%d\":%.3f,\"ratio_vs_pogocache_%s_p%d_min\":%.3f,"
                       "\"ratio_vs_pogocache_%s_p%d_max\":%.3f,\"pogocache_ratio_%s_p%d\":%.3f",
                       op_key[op], pp, lc->ratio[2], op_key[op], pp, lc->rmin[2], op_key[op], pp,
                       lc->rmax[2], op_key[op], pp, f->lean[2][op][p].ratio[1]);
                printf(",\"cpu_ratio_vs_pogocache_%s_p%d\":%.3f,"
                       "\"cpu_ratio_vs_pogocache_%s_p%d_min\":%.3f,"
                       "\"cpu_ratio_vs_pogocache_%s_p%d_max\":%.3f",
                       op_key[op], pp, lc->cpu_ratio[2], op_key[op], pp, lc->cmin[2], op_key[op],
                       pp, lc->cmax[2]);
            }
            for (int srv = 0; srv < nsrv; srv++) {
                const struct lean_case *c = &f->lean[srv][op][p];
                printf(",\"%s_%s_p%d\":{\"rate\":%.0f,\"p50_us\":%.0f,\"p99_us\":%.0f,"
                       "\"p999_us\":%.0f,\"errors\":%llu,\"server_cpu_us_per_req\":%.3f,"
                       "\"generator_cpu_max\":%.3f}",
                       srv_key[srv], op_key[op], pp, c->med.rate, c->med.p50_us, c->med.p99_us,
                       c->med.p999_us, (unsigned long long)c->med.errors, c->srv_us,
                       c->gen_cpu_max);
            }
        }
    printf(",\"during_save_get_p999_ratio\":%.3f,\"redis_during_bgsave_get_p999_ratio\":%.3f",
           f->save.p999_ratio, f->r_save.p999_ratio);
    json_save("during_save_get", &f->save);
    json_save("redis_during_bgsave_get", &f->r_save);
    printf(",\"shutdown_save_s_%s\":%.3f,\"restart_ready_s_%s\":%.3f,\"restart_keys\":%llu", sfx,
           f->shutdown_s, sfx, f->restart_s, (unsigned long long)f->restart_keys);
    for (int op = 0; op < 2; op++)
        for (int p = 0; p < 2; p++) {
            int pp = p ? 16 : 1;
            const struct lean_case *w2 = &f->two[0][op][p], *t2 = &f->two[1][op][p];
            printf(",\"pcached2w_%s_p%d\":%.0f,\"pcached2w_%s_p%d_cpu_us_per_req\":%.3f,"
                   "\"pcached2w_%s_p%d_generator_cpu_max\":%.3f",
                   op_key[op], pp, w2->med.rate, op_key[op], pp, w2->srv_us, op_key[op], pp,
                   w2->gen_cpu_max);
            if (nsrv > 2) {
                printf(",\"pogocache2t_%s_p%d\":%.0f,\"ratio_2w_vs_pogocache_2t_%s_p%d\":%.3f,"
                       "\"ratio_2w_vs_pogocache_2t_%s_p%d_min\":%.3f,"
                       "\"ratio_2w_vs_pogocache_2t_%s_p%d_max\":%.3f",
                       op_key[op], pp, t2->med.rate, op_key[op], pp, w2->ratio[1], op_key[op], pp,
                       w2->rmin[1], op_key[op], pp, w2->rmax[1]);
                printf(",\"pogocache2t_%s_p%d_cpu_us_per_req\":%.3f,"
                       "\"pogocache2t_%s_p%d_generator_cpu_max\":%.3f,"
                       "\"cpu_ratio_2w_vs_pogocache_2t_%s_p%d\":%.3f,"
                       "\"cpu_ratio_2w_vs_pogocache_2t_%s_p%d_min\":%.3f,"
                       "\"cpu_ratio_2w_vs_pogocache_2t_%s_p%d_max\":%.3f",
                       op_key[op], pp, t2->srv_us, op_key[op], pp, t2->gen_cpu_max, op_key[op], pp,
                       w2->cpu_ratio[1], op_key[op], pp, w2->cmin[1], op_key[op], pp, w2->cmax[1]);
            }
        }
    for (int srv = 0; srv < nsrv; srv++)
        for (int p = 0; p < 2; p++)
            for (int op = 0; op < 2; op++)
                printf(",\"rb_%s_%s_p%d\":%.0f", srv_key[srv], op_key[op], p ? 16 : 1,
                       f->rb[srv][p][op]);
    printf(",\"get_p999_us_base\":%.0f,\"get_p999_us_during_save\":%.0f}\n", f->save.base.p999_us,
           f->save.during.p999_us);
}

static void report_lean_text(const struct sopts *o, const struct figs *f)
{
    int nsrv = o->pogocache != NULL ? 3 : 2;
    printf("lean client, 50 connections, 200-byte values, 100k keys: ops/s; p99 us; server CPU "
           "us/request; generator CPU/wall, busiest round\n");
    for (int srv = 0; srv < nsrv; srv++)
        for (int op = 0; op < 2; op++)
            for (int p = 0; p < 2; p++) {
                const struct lean_case *c = &f->lean[srv][op][p];
                printf("  %-10s %s -P %-2d %9.0f;%5.0f;%6.2f;%5.2f", srv_key[srv],
                       op ? "GET" : "SET", p ? 16 : 1, c->med.rate, c->med.p99_us, c->srv_us,
                       c->gen_cpu_max);
                if (srv == 0)
                    printf("  over redis %.2fx (%.2f-%.2f)", c->ratio[1], c->rmin[1], c->rmax[1]);
                if (srv == 0 && nsrv > 2)
                    printf(", over pogocache %.2fx (%.2f-%.2f), CPU/request %.2fx (%.2f-%.2f)",
                           c->ratio[2], c->rmin[2], c->rmax[2], c->cpu_ratio[2], c->cmin[2],
                           c->cmax[2]);
                printf("%s\n", c->gen_cpu_max > 0.9 ? "  GENERATOR-BOUND" : "");
            }
}

/* pcached 2 workers against pogocache 2 threads, all unpinned: the rates,
 * each one's CPU per request and the generator's share of a core. */
static void report_two_text(const struct sopts *o, const struct figs *f)
{
    int n = o->pogocache != NULL ? 2 : 1;
    printf("\n2 workers / 2 threads, unpinned (the client shares both CPUs): ops/s; server CPU "
           "us/request; generator CPU/wall, busiest round\n");
    for (int i = 0; i < n; i++)
        for (int op = 0; op < 2; op++)
            for (int p = 0; p < 2; p++) {
                const struct lean_case *c = &f->two[i][op][p];
                printf("  %-10s %s -P %-2d %9.0f;%6.2f;%5.2f", i ? "pogocache" : "pcached",
                       op ? "GET" : "SET", p ? 16 : 1, c->med.rate, c->srv_us, c->gen_cpu_max);
                if (i == 0 && n > 1)
                    printf("  rate over pogocache %.2fx (%.2f-%.2f), CPU/request %.2fx (%.2f-%.2f)",
                           c->ratio[1], c->rmin[1], c->rmax[1], c->cpu_ratio[1], c->cmin[1],
                           c->cmax[1]);
                printf("\n");
            }
}

static void report(const struct sopts *o, const struct figs *f)
{
    char sfx[32];
    if (o->keys % 1000000 == 0)
        snprintf(sfx, sizeof sfx, "%llum", (unsigned long long)(o->keys / 1000000));
    else if (o->keys % 1000 == 0)
        snprintf(sfx, sizeof sfx, "%lluk", (unsigned long long)(o->keys / 1000));
    else
        snprintf(sfx, sizeof sfx, "%llu", (unsigned long long)o->keys);
    if (o->json) {
        report_json(o, f, sfx);
        return;
    }
    printf("pcache-bench server%s: %llu keys for the persistence figures, %g s per measurement, "
           "%d rounds, %s; load average %.2f -> %.2f\n\n",
           o->quick ? " QUICK" : "", (unsigned long long)o->keys, o->seconds, o->rounds,
           o->pin ? "server on CPU 0, client on CPU 1" : "unpinned (one CPU)", f->load_start,
           f->load_end);
    report_lean_text(o, f);
    report_two_text(o, f);
    if (o->redis_benchmark != NULL)
        printf("\nredis-benchmark -c 50 -d 200 -r 100000 (client-bound): pcached SET %.0f GET %.0f "
               "(-P 1), %.0f / %.0f (-P 16); redis-server %.0f / %.0f, %.0f / %.0f\n",
               f->rb[0][0][0], f->rb[0][0][1], f->rb[0][1][0], f->rb[0][1][1], f->rb[1][0][0],
               f->rb[1][0][1], f->rb[1][1][0], f->rb[1][1][1]);
    const struct save_figs *a = &f->save, *b = &f->r_save;
    printf("\npersistence (%llu keys), GET -P 1, medians of %d paired rounds (per-round spread):\n"
           "  pcached SAVE back to back: p99.9 %.0f -> %.0f us, %.2fx (%.2f-%.2f); rate %.0f -> "
           "%.0f, %.2fx (%.2f-%.2f)\n"
           "  redis-server BGSAVE:       p99.9 %.0f -> %.0f us, %.2fx (%.2f-%.2f); rate %.0f -> "
           "%.0f, %.2fx (%.2f-%.2f)\n",
           (unsigned long long)o->keys, o->rounds, a->base.p999_us, a->during.p999_us,
           a->p999_ratio, a->p999_min, a->p999_max, a->base.rate, a->during.rate, a->rate_ratio,
           a->rate_min, a->rate_max, b->base.p999_us, b->during.p999_us, b->p999_ratio, b->p999_min,
           b->p999_max, b->base.rate, b->during.rate, b->rate_ratio, b->rate_min, b->rate_max);
    printf("  shutdown save (SIGTERM to exit): %.3f s; restart to first PING: %.3f s with %llu "
           "keys served%s\n",
           f->shutdown_s, f->restart_s, (unsigned long long)f->restart_keys,
           o->keys != 1000000 ? " (not the 1M of the targets)" : "");
}

static int rm_tree(const char *dir)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

int bench_cmd_server(int argc, char **argv)
{
    struct sopts o;
    memset(&o, 0, sizeof o);
    o.redis_server = "redis-server";
    o.redis_benchmark = "redis-benchmark";
    double secs = -1;
    long long keys = -1;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            o.quick = 1;
        else if (strcmp(argv[i], "--json") == 0)
            o.json = 1;
        else if (strcmp(argv[i], "--pcached") == 0 && i + 1 < argc)
            snprintf(o.pcached, sizeof o.pcached, "%s", argv[++i]);
        else if (strcmp(argv[i], "--redis-server") == 0 && i + 1 < argc)
            o.redis_server = argv[++i];
        else if (strcmp(argv[i], "--pogocache") == 0 && i + 1 < argc)
            o.pogocache = argv[++i];
        else if (strcmp(argv[i], "--no-redis-benchmark") == 0)
            o.redis_benchmark = NULL;
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            secs = atof(argv[++i]);
        else if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc)
            keys = atoll(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            o.rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "pcache-bench server: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    o.seconds = secs > 0 ? secs : o.quick ? 1.0 : 3.0;
    if (o.rounds <= 0)
        o.rounds = o.quick ? 3 : 5;
    if (o.rounds > SRV_ROUNDS_MAX)
        o.rounds = SRV_ROUNDS_MAX;
    o.keys = keys > 0 ? (uint64_t)keys : o.quick ? 100000 : 1000000;
    if (o.pcached[0] == '\0') { /* the build tree's pcached, beside bench/ */
        char self[PATH_MAX - 32];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0)
            return 2;
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL)
            *slash = '\0';
        snprintf(o.pcached, sizeof o.pcached, "%s/../src/server/pcached", self);
    }
    if (access(o.pcached, X_OK) != 0) {
        fprintf(stderr, "pcache-bench server: no pcached at %s (--pcached PATH)\n", o.pcached);
        return 2;
    }
    if (system("command -v redis-server >/dev/null 2>&1") != 0 &&
        strcmp(o.redis_server, "redis-server") == 0) {
        fprintf(stderr, "pcache-bench server: redis-server not found (apt-get install "
                        "redis-server, or --redis-server PATH)\n");
        return 2;
    }
    if (o.redis_benchmark != NULL && system("command -v redis-benchmark >/dev/null 2>&1") != 0)
        o.redis_benchmark = NULL;
    o.pin = sysconf(_SC_NPROCESSORS_ONLN) >= 2;
    snprintf(o.tmp, sizeof o.tmp, "%s/pcache-bench-server-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(o.tmp) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct figs *f = calloc(1, sizeof *f);
    int rc = f != NULL ? run_all(&o, f) : -1;
    if (rc == 0)
        report(&o, f);
    else
        fprintf(stderr, "pcache-bench server: failed; logs in %s\n", o.tmp);
    free(f);
    if (rc == 0)
        rm_tree(o.tmp);
    return rc == 0 ? 0 : 1;
}
