/*
 * store_pipe.c - an ordered worker pool: one producer thread submits jobs
 * in order, worker threads run them in any order, the producer takes them
 * back in submission order. The save uses it to compress blocks while the
 * calling thread walks the collection; the load to decompress and verify
 * blocks while the calling thread stores records into the engine.
 *
 * A ring of depth slots guarded by one mutex: slot i % depth holds job i.
 * head = next job to submit, tail = oldest job not yet taken back, next =
 * oldest job no worker has claimed. Invariants: tail <= next <= head and
 * head - tail <= depth. Workers wait on `work` for next < head; the
 * producer waits on `done` for the tail slot to finish. Jobs are coarse
 * (a 64 KiB block: tens of microseconds), so one lock is not a bottleneck.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "store_int.h"

struct pc_pipe_slot {
    void *job;
    bool finished;
};

struct pc_pipe {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    unsigned nworkers, depth;
    uint64_t head, tail, next;
    bool stop;
    pc_pipe_run_fn run;
    void *ctx;
    struct pc_pipe_slot *ring;
    pthread_t *threads;
    unsigned started;
};

struct pc_pipe_arg {
    pc_pipe *p;
    unsigned idx;
};

static void *pc_pipe_worker(void *arg)
{
    struct pc_pipe_arg *a = arg;
    pc_pipe *p = a->p;
    unsigned idx = a->idx;
    free(a);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->next == p->head)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->next == p->head) /* stop, and nothing left to run */
            break;
        struct pc_pipe_slot *sl = &p->ring[p->next % p->depth];
        p->next++;
        pthread_mutex_unlock(&p->mu);
        p->run(p->ctx, idx, sl->job);
        pthread_mutex_lock(&p->mu);
        sl->finished = true;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int pc_pipe_create(unsigned nworkers, unsigned depth, pc_pipe_run_fn run, void *ctx, pc_pipe **out)
{
    pc_pipe *p = calloc(1, sizeof *p);
    if (p == NULL)
        return PC_EHEAP;
    p->nworkers = nworkers;
    p->depth = depth < 1 ? 1 : depth;
    p->run = run;
    p->ctx = ctx;
    p->ring = calloc(p->depth, sizeof *p->ring);
    p->threads = calloc(nworkers + 1, sizeof *p->threads);
    if (p->ring == NULL || p->threads == NULL) {
        free(p->ring);
        free(p->threads);
        free(p);
        return PC_EHEAP;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    for (unsigned i = 0; i < nworkers; i++) {
        struct pc_pipe_arg *a = malloc(sizeof *a);
        if (a == NULL)
            break;
        a->p = p;
        a->idx = i;
        if (pthread_create(&p->threads[i], NULL, pc_pipe_worker, a) != 0) {
            free(a);
            break;
        }
        p->started++;
    }
    /* fewer threads than asked (or none) still works: see pc_pipe_submit */
    p->nworkers = p->started;
    *out = p;
    return 0;
}

/* Waits for job tail to finish and takes it back. Caller holds mu. */
static void *pc_pipe_take_locked(pc_pipe *p)
{
    PC_INVARIANT(NULL, S3, p->tail < p->head && p->next <= p->head);
    struct pc_pipe_slot *sl = &p->ring[p->tail % p->depth];
    while (!sl->finished)
        pthread_cond_wait(&p->done, &p->mu);
    void *job = sl->job;
    sl->job = NULL;
    sl->finished = false;
    p->tail++;
    return job;
}

void pc_pipe_submit(pc_pipe *p, void *job, void **done)
{
    *done = NULL;
    if (p->nworkers == 0) { /* inline: run now, hand back at once */
        p->run(p->ctx, 0, job);
        pthread_mutex_lock(&p->mu);
        if (p->head - p->tail == p->depth)
            *done = pc_pipe_take_locked(p);
        struct pc_pipe_slot *sl = &p->ring[p->head % p->depth];
        sl->job = job;
        sl->finished = true;
        p->head++;
        p->next = p->head;
        pthread_mutex_unlock(&p->mu);
        return;
    }
    pthread_mutex_lock(&p->mu);
    if (p->head - p->tail == p->depth)
        *done = pc_pipe_take_locked(p);
    PC_INVARIANT(NULL, S3, p->tail <= p->next && p->head - p->tail < p->depth);
    struct pc_pipe_slot *sl = &p->ring[p->head % p->depth];
    sl->job = job;
    sl->finished = false;
    p->head++;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
}

void *pc_pipe_next(pc_pipe *p)
{
    pthread_mutex_lock(&p->mu);
    void *job = p->tail == p->head ? NULL : pc_pipe_take_locked(p);
    pthread_mutex_unlock(&p->mu);
    return job;
}

void pc_pipe_destroy(pc_pipe *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->started; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p->ring);
    free(p->threads);
    free(p);
}
