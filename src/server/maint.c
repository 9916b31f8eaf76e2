/*
 * maint.c - the maintenance process: the one process of pcached that
 * saves and loads (the store's handle is reopened here after the fork, see
 * pc_persist_after_fork), grows and sweeps the table (pc_maintain), syncs
 * the journal, and answers JSON-RPC. It serves no RESP traffic, so a save's
 * walk and commit cost the workers nothing but the walk's cache traffic.
 *
 * Work arrives four ways: the timer (maint_interval_ms: pc_maintain;
 * every second: pc_persist_tick, which also runs the periodic snapshots),
 * the workers' slots (an eventfd wakes us; the slots are also scanned on
 * every timer turn, so a lost wake-up costs one interval), the JSON-RPC
 * listeners, and the UDP socket of perf_sync notices (sync_udp.c; after
 * each turn pc_persist_sync_tick runs the checks and reloads that are due,
 * and the poll's timeout honours pc_persist_sync_due_ms). One thing at a time: a long save delays
 * the next sweep and the next JSON-RPC answer, never a worker.
 */
#include "pcached.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static pc_json *m_json;

/* Events raised in this process: a reload by perf_sync raises "synced"
 * here (docs/sync.md), the sweep "expired", eviction ahead of need
 * "evicted" (when opted in: eviction.c); pcached has no script to hand
 * them to, so it logs. */
static void maint_event(void *ctx, const pc_event *ev)
{
    (void)ctx;
    if (ev->type == PC_EV_RELOADED)
        srv_log(PC_LOG_INFO, "event synced: collection %s from node %s", ev->collection,
                ev->source[0] != '\0' ? ev->source : "unknown");
    else
        srv_event_log(ev); /* expired by the sweep, evicted ahead of need */
}

/* Runs one management command here, keeping LASTSAVE and the save counters
 * of the shared state. The result is in m_json on success. */
static int maint_run(srv *s, pc_mgmt *m, const char *cmd, const pc_mgmt_arg *args, unsigned nargs,
                     pc_mgmt_err *err)
{
    /* perf_sync is a save too (to the shared database) */
    int is_save = strcmp(cmd, "perf_save") == 0 || strcmp(cmd, "perf_sync") == 0;
    if (is_save)
        atomic_store(&s->shm->saving, 1);
    pc_json_reset(m_json);
    int rc = pc_mgmt_run(m, cmd, args, nargs, pc_json_ops(), m_json, err);
    if (is_save) {
        atomic_store(&s->shm->saving, 0);
        atomic_store(&s->shm->last_save_rc, rc);
        if (rc == 0) {
            atomic_store(&s->shm->last_save, (int64_t)time(NULL));
            atomic_fetch_add(&s->shm->saves, 1);
        } else {
            atomic_fetch_add(&s->shm->save_failures, 1);
        }
    }
    return rc;
}

int srv_maint_run_json(srv *s, pc_mgmt *m, const char *cmd, const pc_mgmt_arg *args, unsigned nargs,
                       pc_mgmt_err *err, const char **text, size_t *len);
int srv_maint_run_json(srv *s, pc_mgmt *m, const char *cmd, const pc_mgmt_arg *args, unsigned nargs,
                       pc_mgmt_err *err, const char **text, size_t *len)
{
    int rc = maint_run(s, m, cmd, args, nargs, err);
    if (rc != 0)
        return rc;
    rc = pc_json_text(m_json, text, len);
    if (rc != 0)
        pc_mgmt_errorf(err, rc, "%s: the result could not be built", cmd);
    return rc;
}

/* SHUTDOWN [SAVE|NOSAVE] [NOW] [FORCE] (docs/pcached.md §3.1), its flags
 * in args[0]. The save runs first, here, while the workers still serve:
 * when it fails, pcached keeps running and the client gets Redis's error
 * (FORCE stops anyway). Then the master is asked to stop; its stop runs
 * the shutdown save again (SAVE or db_mode 2; NOSAVE: none) after the
 * workers are gone, so what was written meanwhile is saved too. */
static int maint_shutdown(srv *s, pc_mgmt *m, const pc_mgmt_arg *args, unsigned nargs,
                          pc_mgmt_err *err)
{
    unsigned flags = 0; /* decimal, not NUL-terminated in the slot */
    for (size_t i = 0; nargs == 1 && i < args[0].len && i < 4; i++)
        if (((const char *)args[0].val)[i] >= '0' && ((const char *)args[0].val)[i] <= '9')
            flags = flags * 10 + (unsigned)(((const char *)args[0].val)[i] - '0');
    int save = (flags & SRV_SHUT_SAVE) ||
               (!(flags & SRV_SHUT_NOSAVE) && s->persist != NULL && s->cfg.db_mode == 2);
    int rc = 0;
    if (save && s->persist == NULL) {
        srv_log(PC_LOG_ERR, "SHUTDOWN SAVE: no store configured (db_url is empty)");
        rc = PC_ECONFIG;
    }
    int any = 0;
    for (unsigned i = 0; s->persist != NULL && i < pc_coll_count(s->cache); i++)
        any |= pc_persist_is_persisted(s->persist, pc_coll_at(s->cache, i));
    for (unsigned i = 0; save && rc == 0 && i < pc_coll_count(s->cache); i++) {
        pc_coll *coll = pc_coll_at(s->cache, i);
        if (any && !pc_persist_is_persisted(s->persist, coll))
            continue;
        const char *name = pc_coll_name(coll);
        pc_mgmt_arg a = {NULL, 0, name, strlen(name)};
        rc = maint_run(s, m, "perf_save", &a, 1, err);
        if (rc != 0)
            srv_log(PC_LOG_ERR, "SHUTDOWN: saving %s failed: %s", name, err->msg);
    }
    if (rc != 0 && !(flags & SRV_SHUT_FORCE)) {
        srv_log(PC_LOG_WARN, "SHUTDOWN refused: the save failed; pcached goes on serving "
                             "(SHUTDOWN NOSAVE or FORCE stops without it)");
        snprintf(err->msg, sizeof err->msg, "Errors trying to SHUTDOWN. Check logs.");
        return rc;
    }
    srv_log(PC_LOG_INFO, "SHUTDOWN%s%s%s%s: stopping", flags & SRV_SHUT_SAVE ? " SAVE" : "",
            flags & SRV_SHUT_NOSAVE ? " NOSAVE" : "", flags & SRV_SHUT_NOW ? " NOW" : "",
            flags & SRV_SHUT_FORCE ? " FORCE" : "");
    atomic_store(&s->shm->shutdown, flags | SRV_SHUT_NOW); /* nonzero: a SHUTDOWN */
    kill(getppid(), SIGTERM);
    return 0;
}

void srv_maint_serve_slot(srv *s, pc_mgmt *m, struct srv_slot_shm *slot)
{
    /* decode: cmd NUL, u32 nargs, (u32 len, bytes)* - written by our own
     * workers, still checked against the buffer's bounds */
    pc_mgmt_arg args[PC_MGMT_MAX_ARGS];
    unsigned nargs = 0;
    size_t len = slot->len <= sizeof slot->buf ? slot->len : 0;
    const char *p = slot->buf, *end = slot->buf + len;
    const char *nul = memchr(p, '\0', len);
    int rc = PC_EINVAL, shutdown = 0;
    pc_mgmt_err err;
    snprintf(err.msg, sizeof err.msg, "malformed request");
    char cmd[PC_MGMT_NAME_MAX + 1];
    if (nul != NULL && (size_t)(nul - p) <= PC_MGMT_NAME_MAX && end - (nul + 1) >= 4) {
        memcpy(cmd, p, (size_t)(nul - p) + 1);
        p = nul + 1;
        uint32_t n;
        memcpy(&n, p, 4);
        p += 4;
        int ok = n <= PC_MGMT_MAX_ARGS;
        for (uint32_t i = 0; ok && i < n; i++) {
            uint32_t l;
            if (end - p < 4) {
                ok = 0;
                break;
            }
            memcpy(&l, p, 4);
            p += 4;
            if ((size_t)(end - p) < l) {
                ok = 0;
                break;
            }
            args[nargs++] = (pc_mgmt_arg){NULL, 0, p, l};
            p += l;
        }
        /* the arguments point into buf, which the answer overwrites: copy */
        char *copy = NULL;
        if (ok) {
            copy = malloc(len);
            if (copy != NULL) {
                memcpy(copy, slot->buf, len);
                for (unsigned i = 0; i < nargs; i++)
                    args[i].val = copy + ((const char *)args[i].val - slot->buf);
                shutdown = strcmp(cmd, "shutdown") == 0;
                rc = shutdown ? maint_shutdown(s, m, args, nargs, &err)
                              : maint_run(s, m, cmd, args, nargs, &err);
            } else {
                rc = PC_EHEAP;
                snprintf(err.msg, sizeof err.msg, "out of memory");
            }
        }
        free(copy);
    }
    const char *text = NULL;
    size_t tlen = 0;
    if (rc == 0 && !shutdown && (rc = pc_json_text(m_json, &text, &tlen)) != 0) {
        snprintf(err.msg, sizeof err.msg, "the result could not be built");
    }
    if (rc == 0 && tlen > sizeof slot->buf) {
        rc = PC_ETOOBIG;
        snprintf(err.msg, sizeof err.msg, "the result is larger than %zu bytes", sizeof slot->buf);
    }
    if (rc == 0) {
        if (tlen > 0) /* SHUTDOWN answers nothing */
            memcpy(slot->buf, text, tlen);
        slot->len = (uint32_t)tlen;
    } else {
        size_t ml = strlen(err.msg);
        memcpy(slot->buf, err.msg, ml);
        slot->len = (uint32_t)ml;
    }
    slot->rc = rc;
    if (slot->async)
        atomic_fetch_sub(&s->shm->bgsave_pending, 1);
    atomic_store_explicit(&slot->state, slot->async ? SRV_SLOT_FREE : SRV_SLOT_DONE,
                          memory_order_release);
}

static int listen_tcp(const char *key, const char *what, const char *addr, unsigned port)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        srv_log(PC_LOG_ERR, "%s: '%s' is not an IPv4 address", key, addr);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        srv_log(PC_LOG_ERR, "%s listener %s:%u: %m", what, addr, port);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Binds the JSON-RPC and metrics listeners (srv_listen_start listens);
 * called by the master before the store, so that a bad address or a busy
 * port is a startup error before anything is loaded. */
int srv_maint_listen(srv *s);
int srv_maint_listen(srv *s)
{
    s->http_fd = s->unix_fd = s->metrics_fd = -1;
    if (s->cfg.http_port != 0 &&
        (s->http_fd = listen_tcp("http_bind", "JSON-RPC", s->cfg.http_bind, s->cfg.http_port)) < 0)
        return -1;
    if (s->cfg.metrics_port != 0 &&
        (s->metrics_fd =
             listen_tcp("metrics_bind", "metrics", s->cfg.metrics_bind, s->cfg.metrics_port)) < 0)
        return -1;
    if (s->cfg.unix_socket[0] != '\0' &&
        (s->unix_fd = srv_unix_bind("unix_socket (JSON-RPC)", s->cfg.unix_socket, 0600, 0,
                                    &s->unix_dev, &s->unix_ino)) < 0)
        return -1;
    return 0;
}

/* The persistence tick (journal sync, periodic snapshots, the journal's
 * bound), with the periodic save's facts for BGSAVE, LASTSAVE and INFO.
 * Returns when the next tick is due. */
static int64_t maint_tick(srv *s, int64_t now, int64_t *next_periodic)
{
    /* a start on a full disk holds the journal until the tick records its
     * boot generation: tick faster meanwhile, so writes resume well within
     * a second of space returning */
    pc_journal_health jh = {0};
    int held = s->persist != NULL && pc_persist_journal_health(s->persist, &jh) == 0 && jh.held;
    int64_t next_tick = now + (held ? 200 : 1000);
    if (s->persist == NULL)
        return next_tick;
    int due = now >= *next_periodic;
    if (due)
        atomic_store(&s->shm->saving, 1);
    int trc = pc_persist_tick(s->persist);
    if (due) {
        atomic_store(&s->shm->saving, 0);
        *next_periodic = pc_mono_ms() + (int64_t)s->cfg.snapshot_period_s * 1000;
        atomic_store(&s->shm->last_save_rc, trc);
        if (trc == 0) {
            atomic_store(&s->shm->last_save, (int64_t)time(NULL));
            atomic_fetch_add(&s->shm->saves, 1);
        } else {
            atomic_fetch_add(&s->shm->save_failures, 1);
        }
    }
    return next_tick;
}

/* Requests of the workers' slots that are pending: served, and each
 * worker woken through its eventfd. */
static void maint_slots(srv *s, pc_mgmt *m)
{
    uint64_t one = 1;
    for (unsigned i = 0; i < s->cfg.workers; i++) {
        struct srv_slot_shm *sl = &s->shm->slots[i];
        if (atomic_load_explicit(&sl->state, memory_order_acquire) != SRV_SLOT_PENDING)
            continue;
        srv_maint_serve_slot(s, m, sl);
        ssize_t r = write(s->done_efd[i], &one, sizeof one);
        (void)r;
    }
}

/* The maintenance process's store handle, its management handle (the
 * return: the commands it serves for the slots and the door), the
 * events it listens to, and what a predecessor killed during a save left.
 * Exits the process when one cannot be had. */
static pc_mgmt *maint_setup(srv *s)
{
    char err[512];
    if (s->persist != NULL && pc_persist_after_fork(s->persist, err, sizeof err) != 0) {
        srv_log(PC_LOG_ERR, "cannot open the store in the maintenance process: %s", err);
        _exit(1);
    }
    pc_mgmt *m = NULL;
    int rc = pc_mgmt_create(s->cache, pc_coll_name(s->dbs[0]), &m);
    if (rc == 0 && s->persist != NULL)
        rc = pc_persist_register(s->persist, m);
    if (rc == 0)
        rc = pc_json_create(&m_json);
    if (rc != 0) {
        srv_log(PC_LOG_ERR, "maintenance setup failed: %s", pc_store_strerror(rc));
        _exit(1);
    }
    /* A maintenance process killed during a save left `saving` set: this
     * one is its replacement, so that save is over, and it failed (the
     * store still holds the snapshot before it: saves are atomic). BGSAVE,
     * LASTSAVE and INFO tell the truth from here on; an unanswered BGSAVE
     * slot is served again below. */
    if (atomic_exchange(&s->shm->saving, 0) != 0) {
        atomic_store(&s->shm->last_save_rc, PC_ESYS);
        atomic_fetch_add(&s->shm->save_failures, 1);
        srv_log(PC_LOG_WARN, "the previous maintenance process died during a save: that save "
                             "did not complete; the store keeps the snapshot before it");
    }
    pc_event_handler(s->cache, maint_event, NULL);
    pc_event_subscribe(s->cache, PC_EV_RELOADED, 1);
    atomic_store(&s->shm->maint_pid, (int64_t)getpid());
    return m;
}

void srv_maint_main(srv *s)
{
    srv_log_role("maint");
    /* A save's walk and compression are background work: below the
     * workers' priority they take the CPU the workers leave, so on a core
     * shared with a worker the save slows down instead of the traffic. The
     * store's compression threads, created later, inherit the value. */
    if (s->cfg.maint_nice > 0 && setpriority(PRIO_PROCESS, 0, (int)s->cfg.maint_nice) != 0)
        srv_log(PC_LOG_WARN, "maint_nice %u: %m", s->cfg.maint_nice);
    srv_resp_close(s, -1);
    pc_mgmt *m = maint_setup(s);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    int sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (getppid() == 1)
        _exit(0);
    /* the first persistence tick at once: it starts the journal's drainer,
     * which is what notices that a failing journal writes again */
    int64_t next_maint = 0, next_tick = pc_mono_ms();
    int64_t next_periodic = s->cfg.snapshot_period_s
                                ? pc_mono_ms() + (int64_t)s->cfg.snapshot_period_s * 1000
                                : INT64_MAX;
    /* the door accepts every waiting connection in a turn (jsonrpc.c) */
    if (s->http_fd >= 0)
        (void)fcntl(s->http_fd, F_SETFL, fcntl(s->http_fd, F_GETFL) | O_NONBLOCK);
    if (s->unix_fd >= 0)
        (void)fcntl(s->unix_fd, F_SETFL, fcntl(s->unix_fd, F_GETFL) | O_NONBLOCK);
    if (s->metrics_fd >= 0)
        (void)fcntl(s->metrics_fd, F_SETFL, fcntl(s->metrics_fd, F_GETFL) | O_NONBLOCK);
    srv_door *door = srv_door_create();
    if (door == NULL) {
        srv_log(PC_LOG_ERR, "maintenance setup failed: out of memory");
        _exit(1);
    }
    for (;;) {
        (void)srv_runtime_poll(s); /* CONFIG SET loglevel */
        struct pollfd pf[6 + 256] = {
            {sfd, POLLIN, 0},        {s->maint_efd, POLLIN, 0},
            {s->http_fd, POLLIN, 0}, {s->unix_fd, POLLIN, 0},
            {s->sync_fd, POLLIN, 0}, {s->metrics_fd, POLLIN, 0}}; /* + the door's (jsonrpc.c) */
        unsigned nconn = srv_door_pollfds(door, pf + 6, 256);
        int64_t now = pc_mono_ms();
        int timeout = next_maint > now ? (int)(next_maint - now) : 0;
        int sync_due = s->persist != NULL ? pc_persist_sync_due_ms(s->persist) : -1;
        if (sync_due >= 0 && sync_due < timeout)
            timeout = sync_due;
        int door_due = srv_door_timeout(door, now);
        if (door_due >= 0 && door_due < timeout)
            timeout = door_due;
        int n = poll(pf, 6 + nconn, timeout);
        if (n < 0 && errno != EINTR)
            srv_log(PC_LOG_ERR, "poll: %m");
        if (n > 0 && (pf[0].revents & POLLIN)) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGHUP) {
                    srv_log_reopen();
                    continue;
                }
                srv_unix_socket_unlink(s);
                srv_door_destroy(door);
                pc_json_destroy(m_json);
                pc_mgmt_destroy(m);
                exit(0); /* the master runs the shutdown save once workers are gone */
            }
        }
        if (n > 0 && (pf[1].revents & POLLIN)) {
            uint64_t v;
            ssize_t r = read(s->maint_efd, &v, sizeof v);
            (void)r;
        }
        maint_slots(s, m); /* with those a previous maintenance process left */
        /* the management door: its connections first (the entries are
         * theirs as polled), then new ones */
        srv_door_serve(s, door, m, pf + 6, n > 0 ? nconn : 0);
        for (int k = 2; k < 4 && n > 0; k++)
            if (pf[k].fd >= 0 && (pf[k].revents & POLLIN))
                srv_door_accept(s, door, pf[k].fd, k == 2);
        if (n > 0 && s->metrics_fd >= 0 && (pf[5].revents & POLLIN))
            srv_door_accept(s, door, s->metrics_fd, 2);
        if (n > 0 && s->sync_fd >= 0 && (pf[4].revents & POLLIN))
            srv_sync_receive(s);
        if (s->persist != NULL)
            (void)pc_persist_sync_tick(s->persist); /* logs its own errors */
        now = pc_mono_ms();
        if (now >= next_maint) {
            pc_maint_report rep;
            (void)pc_maintain(s->cache, PC_MAINT_ALL, &rep);
            next_maint = now + s->cfg.maint_interval_ms;
        }
        if (now >= next_tick)
            next_tick = maint_tick(s, now, &next_periodic);
    }
}
