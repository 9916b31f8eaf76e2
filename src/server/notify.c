/*
 * notify.c - pcached under systemd (Type=notify, sd_notify(3) of
 * libsystemd): the master tells the service manager where it is.
 *
 *   STATUS=loading ...      while the store is loaded and the journal replayed
 *   READY=1                 once the store is loaded and every listener is up
 *                           (systemctl start returns then, not before)
 *   STOPPING=1, STATUS=...  at SIGTERM: draining, then the shutdown save
 *   EXTEND_TIMEOUT_USEC=N   every few seconds while a load or a save runs,
 *                           so TimeoutStartSec= / TimeoutStopSec= measure a
 *                           stalled pcached, not a large store
 *
 * Without NOTIFY_SOCKET (a terminal, Type=simple, a test) every call is a
 * no-op. Only the master notifies (NotifyAccess=main); the keepalive is a
 * thread of the master that exists only between srv_notify_busy_begin and
 * srv_notify_busy_end, never across a fork.
 */
#include "pcached.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

/* A keepalive every SRV_NOTIFY_BEAT_S seconds asks for SRV_NOTIFY_EXTEND_S
 * more: three beats may be missed before the manager's timeout applies. */
#define SRV_NOTIFY_BEAT_S 5
#define SRV_NOTIFY_EXTEND_S 20

static struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running, stop;
} nb = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static int notify_on(void)
{
    const char *e = getenv("NOTIFY_SOCKET");
    return e != NULL && e[0] != '\0';
}

void srv_notify(const char *fmt, ...)
{
    if (!notify_on())
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    int rc = sd_notify(0, msg);
    if (rc < 0)
        srv_log(PC_LOG_WARN, "sd_notify: %s", strerror(-rc));
}

static void extend(void)
{
    (void)sd_notifyf(0, "EXTEND_TIMEOUT_USEC=%llu",
                     (unsigned long long)SRV_NOTIFY_EXTEND_S * 1000000ull);
}

static void *beat(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&nb.mu);
    for (;;) { /* busy_begin sent the first extension; one more per beat */
        struct timespec t = pc_wall_ts();
        t.tv_sec += SRV_NOTIFY_BEAT_S;
        while (!nb.stop && pthread_cond_timedwait(&nb.cv, &nb.mu, &t) == 0)
            ;
        if (nb.stop)
            break;
        extend();
    }
    pthread_mutex_unlock(&nb.mu);
    return NULL;
}

void srv_notify_busy_begin(const char *status)
{
    if (!notify_on())
        return;
    srv_notify("STATUS=%s", status);
    if (nb.running)
        return;
    /* the first extension now, not from the thread: a busy phase shorter
     * than the thread's start still tells the manager it is busy */
    extend();
    nb.stop = 0;
    if (pthread_create(&nb.thread, NULL, beat, NULL) != 0) {
        srv_log(PC_LOG_WARN,
                "sd_notify keepalive: cannot start its thread: the manager's "
                "timeout applies to '%s'",
                status);
        return;
    }
    nb.running = 1;
}

void srv_notify_busy_end(void)
{
    if (!nb.running)
        return;
    pthread_mutex_lock(&nb.mu);
    nb.stop = 1;
    pthread_cond_signal(&nb.cv);
    pthread_mutex_unlock(&nb.mu);
    pthread_join(nb.thread, NULL);
    nb.running = 0;
}
