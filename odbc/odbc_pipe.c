/*
 * odbc_pipe.c - the sender thread of a pipelined save: one job at a time
 * handed from the caller's thread (the filler) to a thread that runs it,
 * so that the caller packs the next batch while the driver and the server
 * execute this one (docs/odbc.md §3 "Pipeline"). It knows nothing of
 * batches or ODBC: the writer (odbc_write.c) supplies the job function.
 *
 * States, guarded by mu:
 *
 *     IDLE --submit--> BUSY --job returns--> IDLE (rc and job kept for wait)
 *     IDLE --stop----> joined and freed
 *
 * Invariants:
 *   1. At most one job is in flight; submit requires IDLE (wait first).
 *   2. Only the sender thread touches what a job touches while BUSY: the
 *      caller makes no call on the connection or its statements until wait
 *      has returned. pc_odbc_pipe_failed is the one lock-free read.
 *   3. The thread exists only between start and stop, both in the caller's
 *      thread, within one save: handles opened before fork() never carry a
 *      thread into a child (docs/odbc.md §3 "Processes").
 *   4. The job function never logs and never writes the handle's message:
 *      failures are recorded by the job and reported by the caller's thread
 *      (a host's log callback is called from the thread that called us).
 * The sender blocks every signal: a host's handlers run in its own threads.
 */
#include "odbc_int.h"

#include <assert.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

struct pc_odbc_pipe {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work; /* signalled on submit and stop */
    pthread_cond_t done; /* signalled when a job returns */
    pc_odbc_job_fn fn;   /* set at start, read-only after */
    void *ctx;
    void *job;         /* mu: the job to run or running; NULL when IDLE */
    bool quit;         /* mu: stop requested */
    int rc;            /* mu: fn's return for the last job */
    atomic_int failed; /* set (release) when a job returned non-zero; read lock-free */
};

static void *sender(void *arg)
{
    pc_odbc_pipe *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->job == NULL && !p->quit)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->job == NULL)
            break; /* quit, and nothing in flight */
        void *job = p->job;
        pthread_mutex_unlock(&p->mu);
        int rc = p->fn(p->ctx, job);
        pthread_mutex_lock(&p->mu);
        p->rc = rc;
        p->job = NULL;
        if (rc != 0)
            atomic_store_explicit(&p->failed, 1, memory_order_release);
        pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int pc_odbc_pipe_start(pc_odbc_job_fn fn, void *ctx, pc_odbc_pipe **out)
{
    pc_odbc_pipe *p = calloc(1, sizeof *p);
    if (p == NULL)
        return PC_EHEAP;
    p->fn = fn;
    p->ctx = ctx;
    atomic_init(&p->failed, 0);
    int rc = PC_ESYS;
    if (pthread_mutex_init(&p->mu, NULL) != 0)
        goto out_free;
    if (pthread_cond_init(&p->work, NULL) != 0)
        goto out_mu;
    if (pthread_cond_init(&p->done, NULL) != 0)
        goto out_work;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits it */
    int e = pthread_create(&p->thread, NULL, sender, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e == 0) {
        *out = p;
        return 0;
    }
    pthread_cond_destroy(&p->done);
out_work:
    pthread_cond_destroy(&p->work);
out_mu:
    pthread_mutex_destroy(&p->mu);
out_free:
    free(p);
    return rc;
}

void pc_odbc_pipe_submit(pc_odbc_pipe *p, void *job)
{
    assert(job != NULL);
    pthread_mutex_lock(&p->mu);
    assert(p->job == NULL); /* invariant 1 */
    p->job = job;
    p->rc = 0;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
}

int pc_odbc_pipe_wait(pc_odbc_pipe *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->job != NULL)
        pthread_cond_wait(&p->done, &p->mu);
    int rc = p->rc;
    pthread_mutex_unlock(&p->mu);
    return rc;
}

bool pc_odbc_pipe_failed(pc_odbc_pipe *p)
{
    return atomic_load_explicit(&p->failed, memory_order_acquire) != 0;
}

void pc_odbc_pipe_stop(pc_odbc_pipe *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL); /* the job in flight, if any, runs to its end first */
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
