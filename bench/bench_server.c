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
 * the per-round ratios over --rounds interleaved rounds (5; quick 3);
 * during_save_get_p999_ratio = GET p99.9 while saves of the filled table
 * run back to back / the same without; shutdown_save_s = SIGTERM to exit of
 * pcached holding the filled table (db_mode 2); restart_ready_s = exec to the
 * first answered PING of a pcached that loads it (DBSIZE checked).
 */
#include "bench_cmds.h"
#include "bench_rload.h"
#include "bench_util.h"

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
static int start_pogocache(const struct sopts *o, struct server *s, int cpu)
{
    char port[16], log[PATH_MAX + 16];
    s->port = free_port();
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(log, sizeof log, "%s/pogocache.log", o->tmp);
    char *argv[] = {(char *)o->pogocache, "-h", "127.0.0.1", "-p", port, "--threads", "1", NULL};
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

static int measure(const struct sopts *o, const struct server *s, int op, unsigned pipeline,
                   uint64_t keys, rload_result *r)
{
    rload_opts lo = {s->port, op, 50, pipeline, 200, keys, 0, o->seconds};
    return rload_run(&lo, r);
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

struct figs {
    rload_result lean[3][2]
                     [2]; /* [pcached, redis, pogocache][op set/get][p1/p16]: the median run */
    double lean_ratio[3][2][2]; /* median over rounds of (server / redis-server) within a round */
    rload_result two[2][2];     /* pcached, 2 workers unpinned [op][p] */
    double rb[3][2][2];         /* redis-benchmark [server][p][set/get] */
    rload_result base, during, r_base, r_during;
    unsigned saves_during, r_saves_during;
    double shutdown_s, restart_s;
    uint64_t restart_keys;
};

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

static int during_save(const struct sopts *o, const struct server *s, int bg, rload_result *base,
                       rload_result *during)
{
    if (measure(o, s, RLOAD_GET, 1, o->keys, base) != 0)
        return -1;
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

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0;
}

static int run_all(const struct sopts *o, struct figs *f)
{
    int cs = o->pin ? 0 : -1;
    if (o->pin)
        pin_self(1);
    const uint64_t ks = 100000;
    /* 1. lean client, one pinned core: pcached (1 worker), redis-server and
     * pogocache all run at once on CPU 0 (only the one under load does any
     * work); each round measures every case on every server back to back,
     * rotating which server goes first, so drift on this shared VM hits them
     * alike. A figure is the median over rounds; a ratio is the median of
     * the per-round ratios. */
    {
        int nsrv = o->pogocache != NULL ? 3 : 2;
        struct server sv[3];
        static rload_result runs[3][2][2][SRV_ROUNDS_MAX];
        for (int srv = 0; srv < nsrv; srv++) {
            int rc = srv == 0   ? start_pcached(o, &sv[srv], 1, cs, 0)
                     : srv == 1 ? start_redis(o, &sv[srv], cs)
                                : start_pogocache(o, &sv[srv], cs);
            if (rc != 0 || fill(&sv[srv], ks) != 0) {
                fprintf(stderr, "server: %s did not start or fill (log in %s)\n", sv[srv].name,
                        o->tmp);
                for (int k = 0; k <= srv; k++)
                    stop(sv[k].pid);
                return -1;
            }
        }
        for (int r = 0; r < o->rounds; r++)
            for (int op = 0; op < 2; op++)
                for (int p = 0; p < 2; p++)
                    for (int i = 0; i < nsrv; i++) {
                        int srv = (i + r) % nsrv;
                        if (measure(o, &sv[srv], op ? RLOAD_GET : RLOAD_SET, p ? 16 : 1, ks,
                                    &runs[srv][op][p][r]) != 0) {
                            for (int k = 0; k < nsrv; k++)
                                stop(sv[k].pid);
                            return -1;
                        }
                    }
        for (int srv = 0; srv < nsrv; srv++)
            for (int op = 0; op < 2; op++)
                for (int p = 0; p < 2; p++) {
                    double rate[SRV_ROUNDS_MAX], rat[SRV_ROUNDS_MAX];
                    for (int r = 0; r < o->rounds; r++) {
                        rate[r] = runs[srv][op][p][r].rate;
                        rat[r] = ratio(runs[srv][op][p][r].rate, runs[1][op][p][r].rate);
                    }
                    double med = bench_median(rate, (size_t)o->rounds);
                    int pick = 0; /* the run nearest the median (an even count averages) */
                    for (int r = 1; r < o->rounds; r++)
                        if (fabs(runs[srv][op][p][r].rate - med) <
                            fabs(runs[srv][op][p][pick].rate - med))
                            pick = r;
                    f->lean[srv][op][p] = runs[srv][op][p][pick];
                    f->lean_ratio[srv][op][p] = bench_median(rat, (size_t)o->rounds);
                }
        for (int srv = 0; srv < nsrv; srv++) {
            for (int p = 0; p < 2; p++)
                if (o->redis_benchmark != NULL &&
                    redis_bench(o, &sv[srv], p ? 16 : 1, f->rb[srv][p]) != 0)
                    fprintf(stderr, "server: redis-benchmark against %s failed\n", sv[srv].name);
            stop(sv[srv].pid);
        }
    }
    /* 2. pcached, 2 workers, unpinned */
    {
        unpin_self();
        struct server s;
        if (start_pcached(o, &s, 2, -1, 0) != 0 || fill(&s, ks) != 0)
            return -1;
        for (int op = 0; op < 2; op++)
            for (int p = 0; p < 2; p++)
                if (measure(o, &s, op ? RLOAD_GET : RLOAD_SET, p ? 16 : 1, ks, &f->two[op][p]) != 0)
                    return -1;
        stop(s.pid);
        if (o->pin)
            pin_self(1);
    }
    /* 3. persistence: GET tail during saves, shutdown save, restart */
    {
        struct server s;
        if (start_pcached(o, &s, 1, cs, 1) != 0 || fill(&s, o->keys) != 0)
            return -1;
        char buf[128];
        rload_command(s.port, "INFO persistence\r\n", buf, sizeof buf, 5000);
        if (during_save(o, &s, 0, &f->base, &f->during) != 0)
            return -1;
        f->shutdown_s = stop(s.pid);
        double t0 = mono();
        if (start_pcached(o, &s, 1, cs, 1) != 0)
            return -1;
        f->restart_s = mono() - t0;
        if (rload_command(s.port, "DBSIZE\r\n", buf, sizeof buf, 5000) == 0)
            f->restart_keys = strtoull(buf + 1, NULL, 10);
        stop(s.pid);
        struct server r;
        if (start_redis(o, &r, cs) != 0 || fill(&r, o->keys) != 0)
            return -1;
        if (during_save(o, &r, 1, &f->r_base, &f->r_during) != 0)
            return -1;
        stop(r.pid);
    }
    return 0;
}

static void report(const struct sopts *o, const struct figs *f)
{
    const char *ops[] = {"set", "get"};
    double rs[2][2];
    for (int op = 0; op < 2; op++)
        for (int p = 0; p < 2; p++)
            rs[op][p] = f->lean_ratio[0][op][p];
    double save_ratio = ratio(f->during.p999_us, f->base.p999_us);
    double r_save_ratio = ratio(f->r_during.p999_us, f->r_base.p999_us);
    if (o->json) {
        printf("{\"keys\":%llu,\"seconds\":%g,\"rounds\":%d,\"pinned\":%s",
               (unsigned long long)o->keys, o->seconds, o->rounds, o->pin ? "true" : "false");
        for (int op = 0; op < 2; op++)
            for (int p = 0; p < 2; p++)
                printf(",\"ratio_%s_p%d\":%.3f", ops[op], p ? 16 : 1, rs[op][p]);
        printf(",\"during_save_get_p999_ratio\":%.3f,\"redis_during_bgsave_get_p999_ratio\":%.3f",
               save_ratio, r_save_ratio);
        char sfx[32];
        if (o->keys % 1000000 == 0)
            snprintf(sfx, sizeof sfx, "%llum", (unsigned long long)(o->keys / 1000000));
        else if (o->keys % 1000 == 0)
            snprintf(sfx, sizeof sfx, "%lluk", (unsigned long long)(o->keys / 1000));
        else
            snprintf(sfx, sizeof sfx, "%llu", (unsigned long long)o->keys);
        printf(",\"shutdown_save_s_%s\":%.3f,\"restart_ready_s_%s\":%.3f,\"restart_keys\":%llu",
               sfx, f->shutdown_s, sfx, f->restart_s, (unsigned long long)f->restart_keys);
        const char *sn[] = {"pcached", "redis"};
        for (int srv = 0; srv < 2; srv++)
            for (int op = 0; op < 2; op++)
                for (int p = 0; p < 2; p++) {
                    const rload_result *r = &f->lean[srv][op][p];
                    printf(",\"%s_%s_p%d\":{\"rate\":%.0f,\"p50_us\":%.0f,\"p99_us\":%.0f,"
                           "\"p999_us\":%.0f,\"errors\":%llu}",
                           sn[srv], ops[op], p ? 16 : 1, r->rate, r->p50_us, r->p99_us, r->p999_us,
                           (unsigned long long)r->errors);
                }
        for (int op = 0; op < 2; op++)
            for (int p = 0; p < 2; p++)
                printf(",\"pcached2w_%s_p%d\":%.0f", ops[op], p ? 16 : 1, f->two[op][p].rate);
        for (int srv = 0; srv < 2; srv++)
            for (int p = 0; p < 2; p++)
                for (int op = 0; op < 2; op++)
                    printf(",\"rb_%s_%s_p%d\":%.0f", sn[srv], ops[op], p ? 16 : 1,
                           f->rb[srv][p][op]);
        if (o->pogocache != NULL)
            for (int op = 0; op < 2; op++)
                for (int p = 0; p < 2; p++)
                    printf(",\"pogocache_ratio_%s_p%d\":%.3f,\"pogocache_%s_p%d\":%.0f", ops[op],
                           p ? 16 : 1, f->lean_ratio[2][op][p], ops[op], p ? 16 : 1,
                           f->lean[2][op][p].rate);
        printf(",\"get_p999_us_base\":%.0f,\"get_p999_us_during_save\":%.0f}\n", f->base.p999_us,
               f->during.p999_us);
        return;
    }
    printf("pcache-bench server: %llu keys for the persistence figures, %g s per measurement, "
           "%s\n\n",
           (unsigned long long)o->keys, o->seconds,
           o->pin ? "server on CPU 0, client on CPU 1" : "unpinned (one CPU)");
    printf("lean client, 50 connections, 200-byte values, 100k keys (ops/s; p99 us)\n");
    printf("  %-22s %14s %14s %8s\n", "", "pcached 1w", "redis-server", "ratio");
    for (int op = 0; op < 2; op++)
        for (int p = 0; p < 2; p++) {
            char label[32];
            snprintf(label, sizeof label, "%s -P %d", op ? "GET" : "SET", p ? 16 : 1);
            printf("  %-22s %9.0f;%4.0f %9.0f;%4.0f %7.2fx\n", label, f->lean[0][op][p].rate,
                   f->lean[0][op][p].p99_us, f->lean[1][op][p].rate, f->lean[1][op][p].p99_us,
                   rs[op][p]);
        }
    if (o->pogocache != NULL) {
        printf("  pogocache, 1 thread, same core (ops/s; p99 us; ratio over redis-server):\n");
        for (int op = 0; op < 2; op++)
            for (int p = 0; p < 2; p++)
                printf("  %s -P %-2d %27.0f;%4.0f %7.2fx\n", op ? "GET" : "SET", p ? 16 : 1,
                       f->lean[2][op][p].rate, f->lean[2][op][p].p99_us, f->lean_ratio[2][op][p]);
    }
    printf(
        "\npcached 2 workers unpinned: SET %.0f / GET %.0f at -P 1, SET %.0f / GET %.0f at -P 16\n",
        f->two[0][0].rate, f->two[1][0].rate, f->two[0][1].rate, f->two[1][1].rate);
    if (o->redis_benchmark != NULL)
        printf("\nredis-benchmark -c 50 -d 200 -r 100000 (client-bound): pcached SET %.0f GET %.0f "
               "(-P 1), %.0f / %.0f (-P 16); redis-server %.0f / %.0f, %.0f / %.0f\n",
               f->rb[0][0][0], f->rb[0][0][1], f->rb[0][1][0], f->rb[0][1][1], f->rb[1][0][0],
               f->rb[1][0][1], f->rb[1][1][0], f->rb[1][1][1]);
    printf(
        "\npersistence (%llu keys): GET p99.9 %.0f us without a save, %.0f us during back to "
        "back saves (%.2fx; redis-server with BGSAVE: %.0f -> %.0f us, %.2fx; rate %.0f -> %.0f)\n",
        (unsigned long long)o->keys, f->base.p999_us, f->during.p999_us, save_ratio,
        f->r_base.p999_us, f->r_during.p999_us, r_save_ratio, f->r_base.rate, f->r_during.rate);
    printf("  pcached GET rate %.0f -> %.0f during saves\n", f->base.rate, f->during.rate);
    printf("  shutdown save (SIGTERM to exit): %.3f s; restart to first PING: %.3f s with %llu "
           "keys served\n",
           f->shutdown_s, f->restart_s, (unsigned long long)f->restart_keys);
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
