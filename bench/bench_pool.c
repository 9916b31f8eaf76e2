/*
 * bench_pool.c - the forked worker pool of bench_pool.h.
 *
 * Control: one pipe per worker carries one-byte commands from the parent
 * ('p' prefault, 'w' warm up then wait, 'g' go, 'q' quit); one shared pipe
 * carries one byte per finished step back. Parameters and results travel in
 * a small MAP_SHARED block (struct pool_shm), written by the parent before a
 * command and by a worker before its reply, so the pipe's write/read pair
 * orders them.
 */
#include "bench_pool.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* Operations between two looks at the stop flag. */
#define POOL_BATCH 16
/* A run that has not finished this long after its window is declared hung. */
#define POOL_HANG_NS (120ull * 1000000000ull)

/* One worker's results: a cache line of its own (written only by it). */
struct pool_slot {
    uint64_t ops, gets, sets, misses, errors, sink;
    uint64_t t_start, t_end;
    uint64_t prefault_misses;
} __attribute__((aligned(64)));

/* Lives in a MAP_SHARED page shared by the parent and the workers. */
struct pool_shm {
    bench_job job;    /* written by the parent before 'w' */
    _Atomic int stop; /* raised by the parent to end the window */
    struct pool_slot slot[BENCH_POOL_MAX_WORKERS];
};

struct bench_pool {
    struct pool_shm *shm;
    int nworkers;
    pid_t pid[BENCH_POOL_MAX_WORKERS];
    int cmd_fd[BENCH_POOL_MAX_WORKERS]; /* write ends, one per worker */
    int done_fd;                        /* read end of the reply pipe */
    bench_target targets[BENCH_POOL_MAX_TARGETS];
    int ntargets;
    const bench_keys *keys;
    size_t vlen;
    int broken;
};

/* ---- worker side ------------------------------------------------------ */

static void reply(int fd)
{
    char b = 'd';

    while (write(fd, &b, 1) < 0 && errno == EINTR)
        ;
}

static char await_cmd(int fd)
{
    char b;
    ssize_t n;

    do
        n = read(fd, &b, 1);
    while (n < 0 && errno == EINTR);
    return n == 1 ? b : 'q'; /* EOF: the parent is gone */
}

/* Untimed 100% gets, so the window does not start with another system's
 * lines in the caches. */
static void worker_warm(const bench_target *t, const bench_keys *keys, uint64_t ns, uint64_t seed)
{
    uint64_t end = bench_now_ns() + ns, x = seed | 1, sink = 0;

    while (ns > 0 && bench_now_ns() < end) {
        for (int i = 0; i < POOL_BATCH; i++) {
            size_t k = bench_pick(bench_xorshift(&x), keys->n);

            (void)t->get(t->ctx, bench_key(keys, k), keys->klen, &sink);
        }
    }
    __asm__ volatile("" : : "r"(sink));
}

/* The timed loop. Hot path: one PRNG step, one key (prefetched one op
 * ahead, so the key array's cache misses stay out of the measured system's
 * cost), one indirect call per operation; the stop flag is read once per
 * POOL_BATCH operations. */
static void worker_window(struct pool_shm *shm, struct pool_slot *s, const bench_target *t,
                          const bench_keys *keys, char *val, size_t vlen, int id)
{
    const bench_job *job = &shm->job;
    const unsigned set_per_64k = job->set_per_64k;
    const size_t n = keys->n, klen = keys->klen;
    uint64_t x = bench_mix64(job->seed + (uint64_t)id) | 1;
    uint64_t r_next = bench_xorshift(&x);
    uint64_t ops = 0, gets = 0, sets = 0, misses = 0, errors = 0, sink = 0;

    s->t_start = bench_now_ns();
    for (;;) {
        for (int i = 0; i < POOL_BATCH; i++) {
            const uint64_t r = r_next;
            const char *key = bench_key(keys, bench_pick(r, n));
            int rc;

            r_next = bench_xorshift(&x);
            __builtin_prefetch(bench_key(keys, bench_pick(r_next, n)));
            if (((r >> 8) & 0xffff) < set_per_64k) {
                /* A distinct value per set: the engine's byte-identical
                 * TTL-refresh shortcut must not turn sets into no-ops. */
                uint64_t stamp = ((uint64_t)id << 56) | sets;

                memcpy(val, &stamp, sizeof stamp);
                rc = t->set(t->ctx, key, klen, val, vlen);
                sets++;
            } else {
                rc = t->get(t->ctx, key, klen, &sink);
                gets++;
            }
            misses += rc > 0;
            errors += rc < 0;
        }
        ops += POOL_BATCH;
        if (atomic_load_explicit(&shm->stop, memory_order_relaxed))
            break;
    }
    s->t_end = bench_now_ns();
    s->ops = ops;
    s->gets = gets;
    s->sets = sets;
    s->misses = misses;
    s->errors = errors;
    s->sink = sink;
}

static _Noreturn void worker_main(bench_pool *p, int id, int cmd_fd, int done_fd)
{
    struct pool_shm *shm = p->shm;
    struct pool_slot *s = &shm->slot[id];
    char *val = malloc(p->vlen > 8 ? p->vlen : 8);
    int status = 0;

    if (val == NULL)
        _exit(2);
    bench_fill_value(val, p->vlen, 0x5e7 + (uint64_t)id);
    for (;;) {
        char c = await_cmd(cmd_fd);
        const bench_target *t;

        if (c == 'q')
            break;
        if (c == 'p') {
            uint64_t miss = 0;

            for (int i = 0; i < p->ntargets; i++)
                if (p->targets[i].prefault)
                    miss += p->targets[i].prefault(p->targets[i].ctx, p->keys);
            s->prefault_misses = miss;
            reply(done_fd);
            continue;
        }
        if (c != 'w' || shm->job.target < 0 || shm->job.target >= p->ntargets) {
            status = 3;
            break;
        }
        t = &p->targets[shm->job.target];
        worker_warm(t, p->keys, shm->job.warmup_ns, shm->job.seed ^ 0xa5a5u);
        reply(done_fd);
        if (await_cmd(cmd_fd) != 'g') {
            status = 3;
            break;
        }
        worker_window(shm, s, t, p->keys, val, p->vlen, id);
        reply(done_fd);
    }
    for (int i = 0; i < p->ntargets; i++)
        if (p->targets[i].child_exit)
            p->targets[i].child_exit(p->targets[i].ctx);
    free(val);
    _exit(status);
}

/* ---- parent side ------------------------------------------------------ */

static int send_cmd(bench_pool *p, int w, char c)
{
    ssize_t n;

    do
        n = write(p->cmd_fd[w], &c, 1);
    while (n < 0 && errno == EINTR);
    return n == 1 ? 0 : -1;
}

/* Waits for n replies; a worker that exits or a step that overruns
 * deadline_ns breaks the pool. */
static int await_replies(bench_pool *p, int n, uint64_t deadline_ns)
{
    while (n > 0) {
        struct pollfd pfd = {.fd = p->done_fd, .events = POLLIN};
        int rc = poll(&pfd, 1, 200);

        if (rc > 0) {
            char buf[BENCH_POOL_MAX_WORKERS];
            ssize_t got = read(p->done_fd, buf, (size_t)n);

            if (got > 0)
                n -= (int)got;
            else if (got == 0 || errno != EINTR)
                goto broken;
            continue;
        }
        if (rc < 0 && errno != EINTR)
            goto broken;
        for (int w = 0; w < p->nworkers; w++) {
            int st;

            if (p->pid[w] > 0 && waitpid(p->pid[w], &st, WNOHANG) == p->pid[w]) {
                if (WIFSIGNALED(st))
                    fprintf(stderr, "pcache-bench: worker %d killed by signal %d\n", w,
                            WTERMSIG(st));
                else
                    fprintf(stderr, "pcache-bench: worker %d exited with %d\n", w, WEXITSTATUS(st));
                p->pid[w] = 0;
                goto broken;
            }
        }
        if (bench_now_ns() > deadline_ns) {
            fprintf(stderr, "pcache-bench: workers hung\n");
            goto broken;
        }
    }
    return 0;
broken:
    p->broken = 1;
    return -1;
}

int bench_pool_start(bench_pool **out, int nworkers, const bench_target *targets, int ntargets,
                     const bench_keys *keys, size_t vlen, uint64_t *prefault_misses)
{
    bench_pool *p;
    int done[2];

    if (nworkers < 1 || nworkers > BENCH_POOL_MAX_WORKERS || ntargets < 1 ||
        ntargets > BENCH_POOL_MAX_TARGETS)
        return -1;
    p = calloc(1, sizeof *p);
    if (p == NULL)
        return -1;
    p->shm = mmap(NULL, sizeof *p->shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p->shm == MAP_FAILED || pipe(done) != 0) {
        perror("pcache-bench: pool");
        if (p->shm != MAP_FAILED)
            munmap(p->shm, sizeof *p->shm);
        free(p);
        return -1;
    }
    memcpy(p->targets, targets, (size_t)ntargets * sizeof *targets);
    p->ntargets = ntargets;
    p->keys = keys;
    p->vlen = vlen;
    p->done_fd = done[0];
    fflush(NULL);
    for (int w = 0; w < nworkers; w++) {
        int cmd[2];

        if (pipe(cmd) != 0) {
            perror("pcache-bench: pipe");
            p->broken = 1;
            break;
        }
        p->pid[w] = fork();
        if (p->pid[w] < 0) {
            perror("pcache-bench: fork");
            p->pid[w] = 0;
            close(cmd[0]);
            close(cmd[1]);
            p->broken = 1;
            break;
        }
        if (p->pid[w] == 0) {
            close(cmd[1]);
            close(done[0]);
            for (int o = 0; o < w; o++)
                close(p->cmd_fd[o]);
            worker_main(p, w, cmd[0], done[1]);
        }
        close(cmd[0]);
        p->cmd_fd[w] = cmd[1];
        p->nworkers = w + 1;
    }
    close(done[1]);
    if (!p->broken) {
        for (int w = 0; w < p->nworkers; w++)
            send_cmd(p, w, 'p');
        await_replies(p, p->nworkers, bench_now_ns() + POOL_HANG_NS);
    }
    if (p->broken) {
        bench_pool_stop(p);
        return -1;
    }
    if (prefault_misses) {
        *prefault_misses = 0;
        for (int w = 0; w < p->nworkers; w++)
            if (p->shm->slot[w].prefault_misses > *prefault_misses)
                *prefault_misses = p->shm->slot[w].prefault_misses;
    }
    *out = p;
    return 0;
}

int bench_pool_run(bench_pool *p, const bench_job *job, bench_result *res)
{
    const int np = job->nprocs;
    uint64_t t0, t_end = 0;

    if (p->broken || np < 1 || np > p->nworkers || job->target < 0 || job->target >= p->ntargets)
        return -1;
    p->shm->job = *job;
    atomic_store(&p->shm->stop, 0);
    for (int w = 0; w < np; w++)
        send_cmd(p, w, 'w');
    if (await_replies(p, np, bench_now_ns() + job->warmup_ns + POOL_HANG_NS) != 0)
        return -1;
    t0 = bench_now_ns();
    for (int w = 0; w < np; w++)
        send_cmd(p, w, 'g');
    bench_sleep_ns(job->duration_ns);
    atomic_store(&p->shm->stop, 1);
    if (await_replies(p, np, bench_now_ns() + POOL_HANG_NS) != 0)
        return -1;

    memset(res, 0, sizeof *res);
    for (int w = 0; w < np; w++) {
        const struct pool_slot *s = &p->shm->slot[w];

        res->ops += s->ops;
        res->gets += s->gets;
        res->sets += s->sets;
        res->misses += s->misses;
        res->errors += s->errors;
        if (s->t_end > t_end)
            t_end = s->t_end;
    }
    res->wall_ns = t_end > t0 ? t_end - t0 : 1;
    res->mops = (double)res->ops * 1e3 / (double)res->wall_ns;
    res->ns_per_op = res->ops ? (double)res->wall_ns * np / (double)res->ops : 0.0;
    return 0;
}

int bench_pool_stop(bench_pool *p)
{
    int rc = 0;

    if (p == NULL)
        return 0;
    for (int w = 0; w < p->nworkers; w++) {
        send_cmd(p, w, 'q');
        close(p->cmd_fd[w]);
    }
    for (int w = 0; w < p->nworkers; w++) {
        int st;

        if (p->pid[w] <= 0)
            continue;
        if (p->broken)
            kill(p->pid[w], SIGKILL); /* our own child: it may be hung */
        if (waitpid(p->pid[w], &st, 0) != p->pid[w] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = -1;
    }
    if (p->broken)
        rc = -1;
    close(p->done_fd);
    munmap(p->shm, sizeof *p->shm);
    free(p);
    return rc;
}
