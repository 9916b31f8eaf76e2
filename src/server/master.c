/*
 * master.c - the master process of pcached: builds everything the
 * children inherit, forks them, restarts the ones that die, and runs the
 * graceful stop.
 *
 * Before the first fork, in this order: the listeners, bound but not yet
 * listening (so a busy port or a bad address fails the start before the
 * store is created or loaded), the shared cache (pc_cache_create),
 * the persistence layer (pc_persist_open, then pc_persist_startup: with
 * db_mode 1 or 2 the persist collections are loaded from the snapshot and
 * the journal replayed, so workers start warm, and the journal hook is
 * installed so every child inherits it), the server's shared state, the
 * eventfds of the slots, then listen() on the RESP listeners (listen.c:
 * one SO_REUSEPORT socket per bind address per worker slot, the unix
 * socket), the JSON-RPC and the metrics listeners. Keeping a slot's listener open in the master
 * means a worker that dies leaves its accept queue to its replacement instead of resetting those
 * connections.
 *
 * The master serves nothing and touches the cache only to create and warm
 * it. Its loop waits on a signalfd: SIGCHLD (restart the dead child; one
 * that died within a second of its start waits a second, so a crash loop
 * does not spin), SIGHUP (reopen logs, passed on to the children),
 * SIGUSR1 / SIGUSR2 (logged and ignored), SIGTERM / SIGINT / SIGQUIT (the
 * graceful stop):
 *   1. close the listeners here and send SIGTERM to the workers, which stop
 *      accepting, run what they have buffered, flush and exit;
 *   2. once they are gone (or drain_timeout_ms + 2 s passed: SIGKILL), stop
 *      the maintenance process;
 *   3. pc_persist_shutdown: the journal flush and, with db_mode 2, the
 *      shutdown save of every persist collection - no worker is left to
 *      change the table while it is saved;
 *   4. exit 0 (1 when the shutdown save failed).
 */
#include "pcached.h"
#include "resp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int srv_maint_listen(srv *s);

struct child {
    pid_t pid;          /* 0 = not running */
    int64_t started_ms; /* for the crash-loop delay */
    int64_t restart_at; /* 0 = no restart pending */
};

static int master_sfd = -1;

static pid_t spawn(srv *s, int role)
{
    pid_t master = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        srv_log(PC_LOG_ERR, "fork: %m");
        return -1;
    }
    if (pid == 0) {
        /* A child dies with the master (kill -9 of the master alone): it
         * holds the store's and the journal's locks, so a child that lived
         * on would refuse the next start. SIGKILL, not a graceful stop: the
         * store and journal are made for kill -9 (an everysec ring outlives
         * it in journal/rings). The getppid check covers a master that died
         * before the prctl. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != master)
            _exit(0);
        close(master_sfd);
        if (role < 0)
            srv_maint_main(s);
        if (s->http_fd >= 0)
            close(s->http_fd);
        if (s->unix_fd >= 0)
            close(s->unix_fd);
        if (s->metrics_fd >= 0)
            close(s->metrics_fd);
        if (s->sync_fd >= 0)
            close(s->sync_fd);
        srv_worker_main(s, (unsigned)role);
    }
    return pid;
}

static int build_dbs(srv *s, char *err, size_t errlen)
{
    s->ndbs = 0;
    if (s->cfg.select_collections[0] == '\0') {
        for (unsigned i = 0; i < pc_coll_count(s->cache) && i < SRV_MAX_DBS; i++)
            s->dbs[s->ndbs++] = pc_coll_at(s->cache, i);
        return 0;
    }
    const char *p = s->cfg.select_collections;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        const char *a = p, *e = p + n;
        while (a < e && (*a == ' ' || *a == '\t'))
            a++;
        while (e > a && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (s->ndbs >= SRV_MAX_DBS) {
            snprintf(err, errlen, "select_collections: more than %u entries", SRV_MAX_DBS);
            return -1;
        }
        if (pc_coll_find(s->cache, a, (size_t)(e - a), &s->dbs[s->ndbs]) != 0) {
            snprintf(err, errlen, "select_collections: '%.*s' (db %u) is not a declared collection",
                     (int)(e - a), a, s->ndbs);
            return -1;
        }
        s->ndbs++;
        p += n;
        if (*p == ',')
            p++;
    }
    if (s->ndbs == 0) {
        snprintf(err, errlen, "select_collections: no collection named");
        return -1;
    }
    return 0;
}

int srv_setup_cache(srv *s, int map_huge, char *err, size_t errlen);
/* map_huge 0 (--check): the huge-page extent is left out. Its ladder never
 * fails short of the plain mapping (region.c), its size bound is checked by
 * the configuration (config.c), and populating it is the one slow step of
 * a start: gigabytes pre-faulted would make --check take minutes. */
int srv_setup_cache(srv *s, int map_huge, char *err, size_t errlen)
{
    pc_config pc;
    pc_config_init(&pc);
    pc.collections = s->cfg.collections;
    pc.mem_mb = s->cfg.mem_mb;
    pc.hugepage_mb = map_huge ? s->cfg.hugepage_mb : 0;
    pc.growth_load_factor = s->cfg.growth_load_factor;
    pc.log.fn = srv_log_cb;
    pc.log.level = srv_log_level();
    int rc = pc_cache_create(&pc, &s->cache);
    if (rc != 0) {
        snprintf(err, errlen, "collections / mem_mb: cannot create the cache: %s",
                 pc_store_strerror(rc));
        return -1;
    }
    if (build_dbs(s, err, errlen) != 0)
        return -1;
    /* before the store is loaded: a warm-up larger than maxmemory evicts
     * as the writes that follow it would */
    return srv_eviction_setup(s, err, errlen);
}

/* Every worker may hold maxclients sockets: raise the soft descriptor
 * limit toward that (up to the hard limit), and say so when it falls short
 * (accepts then pause on EMFILE, they never spin). */
static void raise_nofile(const srv *s)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = (rlim_t)s->cfg.maxclients + 64;
    if (rl.rlim_cur < want) {
        rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
        (void)getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < want)
        srv_log(PC_LOG_WARN,
                "maxclients %u: each worker can open only %llu descriptors (RLIMIT_NOFILE)",
                s->cfg.maxclients, (unsigned long long)rl.rlim_cur);
}

/* The LMDB store's directory (or, when it does not exist yet, the one it
 * is created in) and the files the store keeps in it, writable by this
 * user: refused here, with the user and the fix, rather than as the
 * store's bare "Permission denied". */
static int store_writable(const srv *s)
{
    const char *url = s->cfg.db_url;
    if (srv_db_url_sql(url))
        return 0;
    const char *dir = strncmp(url, "lmdb://", 7) == 0 ? url + 7 : url;
    char path[1200], hint[700];
    static const char *const files[] = {"", "/data.mdb", "/lock.mdb", "/journal", "/journal/rings"};
    struct stat st;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s%s", dir, files[i]);
        if (i == 0 && stat(path, &st) != 0) { /* created in its parent */
            char *slash = strrchr(path, '/');
            if (slash == NULL)
                snprintf(path, sizeof path, ".");
            else
                slash[slash == path] = '\0';
            if (stat(path, &st) != 0)
                continue; /* a missing parent: the store's own check names it */
        } else if (i > 0 && lstat(path, &st) != 0) {
            continue;
        }
        int dir_wanted = i == 0 || strcmp(files[i], "/journal") == 0;
        if (dir_wanted != S_ISDIR(st.st_mode))
            continue; /* a file where a directory goes (or the reverse): the store says so */
        int mode = dir_wanted ? W_OK | X_OK : R_OK | W_OK;
        if (access(path, mode) == 0 || !srv_perm_errno(errno))
            continue;
        srv_perm_hint("db_url", path, hint, sizeof hint);
        srv_log(PC_LOG_ERR, "persistence: db_url '%s': %s: permission denied (%s); %s", url, path,
                mode & X_OK ? "cannot create files there" : "cannot open it for writing", hint);
        return -1;
    }
    return 0;
}

static int setup_store(srv *s)
{
    char err[1024];
    if (store_writable(s) != 0)
        return -1;
    pc_persist_config pc;
    srv_persist_config_fill(s, &pc);
    int rc = pc_persist_open(s->cache, &pc, &s->persist, err, sizeof err);
    if (rc != 0) {
        srv_log(PC_LOG_ERR, "persistence: %s", err[0] ? err : pc_store_strerror(rc));
        return -1;
    }
    int64_t t0 = pc_mono_ms();
    reply_set_persist(s->persist);
    if (s->cfg.db_mode >= 1) {
        char st[300];
        snprintf(st, sizeof st, "loading the store %.250s", s->cfg.db_url);
        srv_notify_busy_begin(st);
    }
    rc = pc_persist_startup(s->persist);
    srv_notify_busy_end();
    if (rc != 0)
        srv_log(PC_LOG_ERR, "warm-up from %s: %s (what could be loaded was)", s->cfg.db_url,
                pc_store_strerror(rc));
    else if (s->cfg.db_mode >= 1)
        srv_log(PC_LOG_INFO, "warm-up from %s done in %lld ms", s->cfg.db_url,
                (long long)(pc_mono_ms() - t0));
    srv_advise_last_stop(s);
    return 0;
}

/* Everything the children inherit. The listeners are bound first, so a
 * start that would fail on a busy port or a bad address fails before the
 * store is created or loaded; they listen once it is loaded. */
static int setup(srv *s)
{
    char err[1024];
    raise_nofile(s);
    if (srv_resp_listen(s) != 0 || srv_maint_listen(s) != 0)
        return -1;
    if (srv_sync_setup(s, err, sizeof err) != 0) {
        srv_log(PC_LOG_ERR, "%s", err);
        return -1;
    }
    if (srv_setup_cache(s, 1, err, sizeof err) != 0) {
        srv_log(PC_LOG_ERR, "%s", err);
        return -1;
    }
    if (s->cfg.db_url[0] != '\0' && setup_store(s) != 0)
        return -1;
    s->shm = mmap(NULL, sizeof *s->shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s->shm == MAP_FAILED) {
        srv_log(PC_LOG_ERR, "cannot map the server's shared state: %m");
        return -1;
    }
    atomic_store(&s->shm->start_unix, (int64_t)time(NULL));
    /* last_save stays 0 until a save succeeds: /metrics and /health report
     * no save that did not happen (LASTSAVE answers the start time then,
     * as Redis does) */
    atomic_store(&s->shm->next_client_id, 1);
    srv_run_id(s->shm->run_id, sizeof s->shm->run_id);
    srv_run_id(s->shm->replid, sizeof s->shm->replid);
    srv_dbmap_setup(s);
    s->maint_efd = eventfd(0, EFD_NONBLOCK);
    for (unsigned i = 0; i < s->cfg.workers; i++)
        if ((s->done_efd[i] = eventfd(0, EFD_NONBLOCK)) < 0)
            s->maint_efd = -1;
    if (s->maint_efd < 0) {
        srv_log(PC_LOG_ERR, "eventfd: %m");
        return -1;
    }
    if (srv_ctab_setup(s) != 0 || srv_slowlog_setup(s) != 0)
        return -1;
    return srv_listen_start(s);
}

/* The master's view of its children. */
struct sup {
    srv *s;
    struct child maint, workers[SRV_MAX_WORKERS];
    int stopping, maint_stopped;
    int64_t deadline; /* stopping: when workers still there get SIGKILL */
};

static void sup_reap(struct sup *sp)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        struct child *c = NULL;
        char what[32] = "maintenance";
        if (pid == sp->maint.pid)
            c = &sp->maint;
        for (unsigned i = 0; c == NULL && i < sp->s->cfg.workers; i++)
            if (sp->workers[i].pid == pid) {
                c = &sp->workers[i];
                snprintf(what, sizeof what, "worker %u", i);
                srv_ctab_clear(sp->s, i); /* its connections died with it */
                srv_dbmap_worker_gone(sp->s, i, (int64_t)pid);
            }
        if (c == NULL)
            continue;
        c->pid = 0;
        if (sp->stopping)
            continue;
        if (WIFSIGNALED(status))
            srv_log(PC_LOG_ERR, "%s (pid %d) killed by signal %d: restarting", what, (int)pid,
                    WTERMSIG(status));
        else
            srv_log(PC_LOG_ERR, "%s (pid %d) exited with status %d: restarting", what, (int)pid,
                    WEXITSTATUS(status));
        int64_t now = pc_mono_ms();
        c->restart_at = now - c->started_ms < 1000 ? now + 1000 : now; /* no crash loop spin */
    }
}

static void sup_signal(struct sup *sp, int sig)
{
    srv *s = sp->s;
    if (sig == SIGCHLD) {
        sup_reap(sp);
    } else if (sig == SIGHUP) {
        srv_log_reopen();
        srv_log(PC_LOG_INFO, "SIGHUP: logs reopened");
        if (sp->maint.pid > 0)
            kill(sp->maint.pid, SIGHUP);
        for (unsigned i = 0; i < s->cfg.workers; i++)
            if (sp->workers[i].pid > 0)
                kill(sp->workers[i].pid, SIGHUP);
    } else if (sig == SIGUSR1 || sig == SIGUSR2) {
        srv_log(PC_LOG_WARN, "signal %d ignored: pcached has no action for it (SIGTERM stops)",
                sig);
    } else if (!sp->stopping) { /* SIGTERM, SIGINT, SIGQUIT: step 1 of the graceful stop */
        sp->stopping = 1;
        srv_log(PC_LOG_INFO, "signal %d: stopping (drain, then the shutdown save)", sig);
        srv_notify("STOPPING=1\nSTATUS=stopping: draining the workers");
        srv_resp_close(s, -1);
        for (unsigned i = 0; i < s->cfg.workers; i++) {
            if (sp->workers[i].pid > 0)
                kill(sp->workers[i].pid, SIGTERM);
        }
        sp->deadline = pc_mono_ms() + s->cfg.drain_timeout_ms + 2000;
    }
}

static void sup_restart(struct sup *sp, struct child *c, int role, int64_t now)
{
    if (c->pid == 0 && c->restart_at != 0 && now >= c->restart_at) {
        c->pid = spawn(sp->s, role);
        c->started_ms = now;
        c->restart_at = 0;
    }
}

static void sup_restart_due(struct sup *sp)
{
    int64_t now = pc_mono_ms();
    sup_restart(sp, &sp->maint, -1, now);
    for (unsigned i = 0; i < sp->s->cfg.workers; i++)
        sup_restart(sp, &sp->workers[i], (int)i, now);
}

/* Steps 2 and 3 of the graceful stop; 1 once every child is gone. */
static int sup_stop_step(struct sup *sp)
{
    unsigned alive = 0;
    for (unsigned i = 0; i < sp->s->cfg.workers; i++)
        alive += sp->workers[i].pid > 0;
    int64_t now = pc_mono_ms();
    if (alive > 0 && now >= sp->deadline) {
        srv_log(PC_LOG_WARN, "%u worker(s) still running at the deadline: SIGKILL", alive);
        for (unsigned i = 0; i < sp->s->cfg.workers; i++)
            if (sp->workers[i].pid > 0)
                kill(sp->workers[i].pid, SIGKILL);
        sp->deadline = now + 60000;
    }
    if (alive > 0)
        return 0;
    if (sp->maint.pid > 0) {
        if (!sp->maint_stopped)
            kill(sp->maint.pid, SIGTERM);
        sp->maint_stopped = 1;
        return 0;
    }
    return 1;
}

int srv_master_run(srv *s)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    /* before any child exists: none is missed. The children inherit the
     * mask and take TERM, INT and HUP through their own signalfd; QUIT,
     * USR1 and USR2 stay blocked there, so `pkill -USR1 pcached` ends no
     * process and QUIT reaches the stop through the master alone. */
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* a failed start says so to a manager waiting for READY=1 (systemd, or
     * start-stop-daemon --notify-await in /etc/init.d/pcached), which
     * otherwise waits for its timeout; the log has the reason */
    if (srv_rundirs_make(s) != 0 || srv_pidfile_lock(s) != 0) {
        srv_notify("ERRNO=%d", EINVAL);
        return 1;
    }
    if (setup(s) != 0) {
        srv_unix_socket_unlink(s);
        srv_resp_unlink(s);
        srv_pidfile_release(s);
        srv_notify("ERRNO=%d", EINVAL);
        return 1;
    }
    master_sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (master_sfd < 0) {
        srv_log(PC_LOG_ERR, "signalfd: %m");
        return 1;
    }
    char where[2048];
    srv_resp_describe(s, where, sizeof where);
    srv_log(PC_LOG_INFO, "pcached %s: %u worker(s) serving RESP on %s%s%s", SRV_VERSION,
            s->cfg.workers, where, s->persist ? ", store " : "", s->persist ? s->cfg.db_url : "");
    if (s->http_fd >= 0)
        srv_log(PC_LOG_INFO, "JSON-RPC on http://%s:%u/", s->cfg.http_bind, s->cfg.http_port);
    if (s->unix_fd >= 0)
        srv_log(PC_LOG_INFO, "JSON-RPC on unix socket %s", s->cfg.unix_socket);
    if (s->metrics_fd >= 0)
        srv_log(PC_LOG_INFO, "metrics on http://%s:%u/metrics and /health", s->cfg.metrics_bind,
                s->cfg.metrics_port);
    if (s->sync_fd >= 0 || s->npeers > 0)
        srv_log(PC_LOG_INFO, "sync: node %s, notices on UDP %s:%u, %u peer(s), poll every %u ms",
                s->node_id, s->cfg.sync_bind, s->cfg.sync_port, s->npeers, s->cfg.sync_poll_ms);

    srv_notify("READY=1\nSTATUS=serving RESP on %s:%u", s->cfg.bind, s->bound_port);
    struct sup sp;
    memset(&sp, 0, sizeof sp);
    sp.s = s;
    sp.maint.pid = spawn(s, -1);
    sp.maint.started_ms = pc_mono_ms();
    for (unsigned i = 0; i < s->cfg.workers; i++) {
        sp.workers[i].pid = spawn(s, (int)i);
        sp.workers[i].started_ms = pc_mono_ms();
    }
    for (;;) {
        struct pollfd pf = {master_sfd, POLLIN, 0};
        (void)poll(&pf, 1, 200);
        struct signalfd_siginfo si;
        while (read(master_sfd, &si, sizeof si) == (ssize_t)sizeof si)
            sup_signal(&sp, (int)si.ssi_signo);
        if (!sp.stopping)
            sup_restart_due(&sp);
        else if (sup_stop_step(&sp))
            break;
    }
    int rc = 0;
    if (s->persist != NULL) {
        int64_t t0 = pc_mono_ms();
        /* SHUTDOWN SAVE / NOSAVE choose; a signal leaves it to db_mode */
        uint32_t shut = atomic_load(&s->shm->shutdown);
        int save = (shut & SRV_SHUT_NOSAVE) ? 0 : (shut & SRV_SHUT_SAVE) ? 1 : -1;
        int saving = save < 0 ? s->cfg.db_mode == 2 : save;
        srv_notify_busy_begin(saving ? "stopping: the shutdown save"
                                     : "stopping: flushing the journal");
        int prc = pc_persist_shutdown_as(s->persist, save);
        srv_notify_busy_end();
        if (prc != 0) {
            srv_log(PC_LOG_ERR, "shutdown save failed: %s", pc_store_strerror(prc));
            rc = 1;
        } else if (saving) {
            srv_log(PC_LOG_INFO, "shutdown save done in %lld ms", (long long)(pc_mono_ms() - t0));
        }
        pc_persist_close(s->persist);
    }
    srv_unix_socket_unlink(s);
    srv_resp_unlink(s);
    srv_pidfile_release(s);
    pc_cache_destroy(s->cache);
    srv_log(PC_LOG_INFO, "stopped");
    return rc;
}
