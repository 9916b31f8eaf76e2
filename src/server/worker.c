/*
 * worker.c - a pcached worker: one process, one epoll loop, its slot's
 * SO_REUSEPORT listener of each bind address (created by the master so that
 * a restarted worker inherits the accept queues of the one that died) and
 * the unix socket shared by all workers (listen.c).
 *
 * Per connection: read what the socket has, run every complete command in
 * the buffer (pipelining), append the replies, write them in one call.
 * Reading pauses while a client's unsent replies exceed max_output_mb and
 * while it waits for the maintenance process (SAVE, PERF.SAVE). A closed
 * connection is unlinked at once and freed at the end of the loop turn, so
 * a list walk that closes connections stays valid.
 *
 * Group commit (journal mode always; docs/journal-format.md §6.6): the
 * journal hook writes each record to this worker's segment but leaves the
 * fdatasync to a batch. While records are staged or a batch is in flight,
 * the replies appended to a connection's output are held: they stay in its
 * buffer, in order, past c->safe (the end of what may be sent), and the
 * connection goes on the held list. At the end of each loop turn, if no
 * batch is in flight, the worker starts one: it covers every record staged
 * so far, and every held connection's output up to its end now (c->mark);
 * the worker's sync thread fdatasyncs it while the loop goes on serving -
 * the writes that arrive meanwhile are staged for the next batch. When the
 * thread is done (its eventfd), the covered replies go out. The next batch
 * starts once every connection that wrote in that batch or during it has
 * staged a write again (the writers just answered usually come back within
 * a round trip), or after a short wait (gc_delay_us, half the last batch's
 * duration at most): without it the clients split in two groups, each
 * waiting for the other's fdatasync, and a batch serves half the writers.
 * So one fdatasync serves all the writes of a turn or more, and a read
 * that ran after a write is not answered before that write is durable.
 * When a batch fails, its writes are in memory but perhaps not on disk:
 * the connections that carried one are closed without their replies
 * (the journal is failing by then, so the next writes are refused with the
 * cause), the others get theirs.
 *
 * SIGTERM: stop accepting (the listener is closed), run what is already
 * buffered, flush the replies, close; exit once every connection is gone or
 * drain_timeout_ms has passed. exit() runs the journal's exit flush.
 */
#include "resp.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define W_READ_CHUNK 16384u
#define W_BUF_KEEP (1u << 20) /* an idle buffer larger than this is released */
#define W_TRIM_AT (8u << 20)  /* releasing one this large also trims the heap */
#define W_IDLE_FREE_MS 2000   /* an empty input buffer idle this long is released */
#define W_ARGS_KEEP 1024u     /* argument slots kept between commands */

static void conn_events(srv_worker *w, conn *c)
{
    uint32_t ev = 0;
    if (!c->closing && !c->paused && !c->blocked)
        ev |= EPOLLIN;
    if (c->safe > c->out.off) /* held bytes wait for their batch, not for the socket */
        ev |= EPOLLOUT;
    if (ev == c->events)
        return;
    struct epoll_event e = {.events = ev, .data.ptr = c};
    if (epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &e) == 0)
        c->events = ev;
}

/* Replies are held while records are staged or a batch is in flight. */
static int gc_holding(const srv_worker *w)
{
    return w->gc != NULL && (w->inflight || pc_persist_commit_pending(w->gc) != 0);
}

static void conn_close(srv_worker *w, conn *c)
{
    if (c->fd < 0)
        return;
    epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    srv_ctab_unpublish(w, c);
    if (w->slot_waiter == c) { /* the answer will come for nobody */
        w->slot_waiter = NULL;
        w->slot_orphan = 1;
    }
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    /* c->next stays: a walk standing on c can go on */
    c->gnext = w->graveyard;
    w->graveyard = c;
    w->nconns--;
    atomic_fetch_sub_explicit(&w->st->clients, 1, memory_order_relaxed);
}

static void conn_free(conn *c)
{
    cmd_txn_conn_free(c);
    free(c->name);
    free(c->in.p);
    free(c->out.p);
    free(c->args);
    free(c);
}

/* Writes what is pending. Returns -1 when the connection was closed. */
static int conn_flush_now(srv_worker *w, conn *c)
{
    sbuf *b = &c->out;
    while (c->safe > b->off) {
        ssize_t n = write(c->fd, b->p + b->off, c->safe - b->off);
        if (n > 0) {
            b->off += (size_t)n;
            /* one writer per slot: a relaxed add, no locked instruction */
            atomic_store_explicit(&w->st->net_out,
                                  atomic_load_explicit(&w->st->net_out, memory_order_relaxed) +
                                      (uint64_t)n,
                                  memory_order_relaxed);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        conn_close(w, c); /* EPIPE, ECONNRESET: the client is gone */
        return -1;
    }
    if (b->len == b->off) {
        b->off = b->len = 0;
        c->safe = c->mark = 0; /* both were <= len */
        if (b->cap > W_BUF_KEEP) {
            free(b->p);
            b->p = NULL;
            b->cap = 0;
        }
    }
    size_t pending = b->len - b->off;
    if (c->paused && pending < ((size_t)w->s->cfg.max_output_mb << 20) / 2) {
        c->paused = 0;
        conn_process(w, c);
        return c->fd < 0 ? -1 : 0;
    }
    if (c->closing && pending == 0 && c->blocked != 1) {
        conn_close(w, c);
        return -1;
    }
    conn_events(w, c);
    return 0;
}

/* Writes what is pending, or - while replies are held - what is safe to
 * send, putting c on the held list. Returns -1 when the connection was
 * closed. */
static int conn_flush(srv_worker *w, conn *c)
{
    if (!gc_holding(w)) {
        /* nothing staged, no batch in flight: whatever c's replies depend
         * on is durable (or its batch failed and c wrote nothing in it) */
        c->safe = c->out.len;
    } else if (!c->held) {
        c->held = 1;
        c->hnext = w->held;
        w->held = c;
    }
    return conn_flush_now(w, c);
}

/* ---- group commit: the sync thread and the batches -------------------------- */

static void *gc_thread(void *arg)
{
    srv_worker *w = arg;
    pthread_mutex_lock(&w->gc_mu);
    for (;;) {
        while (!w->gc_go && !w->gc_quit)
            pthread_cond_wait(&w->gc_cv, &w->gc_mu);
        if (!w->gc_go)
            break;
        w->gc_go = 0;
        pthread_mutex_unlock(&w->gc_mu);
        pc_journal_batch_sync(w->batch); /* touches the batch only */
        pthread_mutex_lock(&w->gc_mu);
        w->gc_done = 1;
        uint64_t one = 1;
        ssize_t r = write(w->gc_efd, &one, sizeof one);
        (void)r; /* an eventfd write fails only at 2^64-1: the tick catches up */
    }
    pthread_mutex_unlock(&w->gc_mu);
    return NULL;
}

/* The longest wait for the writers of the last batch to come back: half
 * of what the last batch took (they cannot be worth more than the batch
 * they wait for), between 50 us and 1 ms. */
static int64_t gc_delay_us(const srv_worker *w)
{
    int64_t d = w->gc_sync_us / 2;
    return d < 50 ? 50 : d > 1000 ? 1000 : d;
}

static void gc_arm(srv_worker *w, int64_t us)
{
    struct itimerspec its = {
        .it_value = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000}};
    if (timerfd_settime(w->gc_tfd, 0, &its, NULL) == 0)
        w->gc_armed = us != 0;
}

/* Starts a batch: every record staged so far, and the held replies up to
 * their end now. No batch is in flight. */
static void gc_start(srv_worker *w)
{
    (void)pc_persist_commit_start(w->gc, w->batch); /* a failure shows at finish */
    if (w->gc_armed)
        gc_arm(w, 0);
    w->gc_due = 0;
    w->gc_expect = w->gc_writers;
    w->gc_writers = 0;
    w->gc_start_us = pc_mono_us();
    for (conn *c = w->held; c != NULL; c = c->hnext) {
        c->held = 0;
        c->mark = c->out.len;
        c->wrote_infl = c->wrote;
        c->wrote = 0;
        c->infl = 1;
        c->inext = w->infl;
        w->infl = c;
    }
    w->held = NULL;
    w->inflight = 1;
    pthread_mutex_lock(&w->gc_mu);
    w->gc_go = 1;
    pthread_cond_signal(&w->gc_cv);
    pthread_mutex_unlock(&w->gc_mu);
}

/* Starts the next batch when none is in flight, records are staged and
 * the writers expected are back (or the wait is over); with nothing
 * staged, sends what was held. A flush can resume a paused connection,
 * which runs commands and may stage again: hence the loop. */
static void gc_kick(srv_worker *w)
{
    while (w->gc != NULL && !w->inflight) {
        if (pc_persist_commit_pending(w->gc) != 0) {
            if (w->gc_writers >= w->gc_expect || w->gc_due || w->stopping)
                gc_start(w);
            else if (!w->gc_armed)
                gc_arm(w, gc_delay_us(w));
            return;
        }
        if (w->held == NULL)
            return;
        conn *list = w->held;
        w->held = NULL;
        while (list != NULL) {
            conn *c = list;
            list = c->hnext;
            c->held = 0;
            if (c->fd >= 0)
                (void)conn_flush(w, c);
        }
    }
}

/* When the sync thread is done with the batch in flight: its replies go
 * out, or its writers are closed when it failed. */
static void gc_finish(srv_worker *w)
{
    if (!w->inflight)
        return;
    pthread_mutex_lock(&w->gc_mu);
    int done = w->gc_done;
    w->gc_done = 0;
    pthread_mutex_unlock(&w->gc_mu);
    if (!done)
        return;
    uint64_t records = pc_journal_batch_records(w->batch);
    int rc = pc_persist_commit_finish(w->gc, w->batch);
    w->inflight = 0;
    w->gc_sync_us = pc_mono_us() - w->gc_start_us;
    conn *list = w->infl;
    w->infl = NULL;
    unsigned dropped = 0;
    /* the writers to wait for: every connection that wrote in this batch or
     * since (once each), so that both groups meet in the next batch */
    unsigned writers = w->gc_writers;
    while (list != NULL) {
        conn *c = list;
        list = c->inext;
        int wrote = c->wrote_infl;
        c->infl = 0;
        c->wrote_infl = 0;
        if (c->fd < 0)
            continue;
        if (wrote && !c->wrote)
            writers++;
        if (rc != 0 && wrote) {
            conn_close(w, c);
            dropped++;
            continue;
        }
        if (c->safe < c->mark)
            c->safe = c->mark;
        (void)conn_flush(w, c);
    }
    if (rc != 0)
        srv_log(PC_LOG_ERR,
                "journal commit failed: %llu write(s) may not be durable; %u connection(s) "
                "that carried them closed unanswered",
                (unsigned long long)records, dropped);
    w->gc_expect = rc != 0 ? 0 : writers;
    gc_kick(w);
}

/* Setup in the worker: the batch, the eventfd, the thread, then the
 * journal's switch (the maintenance process keeps the synchronous
 * fdatasync). 0, or -1 (logged). */
static int gc_setup(srv_worker *w, srv *s)
{
    if (s->persist == NULL)
        return 0;
    int rc = pc_journal_batch_new(&w->batch);
    if (rc != 0) {
        srv_log(PC_LOG_ERR, "group commit: %s", pc_store_strerror(rc));
        return -1;
    }
    w->gc_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    w->gc_tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (w->gc_efd < 0 || w->gc_tfd < 0 || pthread_mutex_init(&w->gc_mu, NULL) != 0 ||
        pthread_cond_init(&w->gc_cv, NULL) != 0 ||
        pthread_create(&w->gc_thr, NULL, gc_thread, w) != 0) {
        srv_log(PC_LOG_ERR, "group commit: cannot start the sync thread: %m");
        return -1;
    }
    if ((rc = pc_persist_defer_sync(s->persist, 1)) != 0) {
        srv_log(PC_LOG_ERR, "group commit: %s", pc_store_strerror(rc));
        return -1;
    }
    w->gc = s->persist;
    return 0;
}

/* At exit: the batch in flight finished, the rest committed here, the
 * thread stopped. */
static void gc_teardown(srv_worker *w)
{
    if (w->gc == NULL)
        return;
    while (w->inflight) {
        uint64_t v;
        struct pollfd pf = {.fd = w->gc_efd, .events = POLLIN};
        (void)poll(&pf, 1, 100);
        ssize_t r = read(w->gc_efd, &v, sizeof v);
        (void)r; /* gc_done, not the count, says whether the thread is done */
        gc_finish(w);
    }
    (void)pc_persist_defer_sync(w->gc, 0); /* commits what is still staged */
    pthread_mutex_lock(&w->gc_mu);
    w->gc_quit = 1;
    pthread_cond_signal(&w->gc_cv);
    pthread_mutex_unlock(&w->gc_mu);
    pthread_join(w->gc_thr, NULL);
    pc_journal_batch_free(w->batch);
    close(w->gc_efd);
    close(w->gc_tfd);
    w->gc = NULL;
}

/* A header of type `type` at p (n bytes) with a value in [0, max]: its
 * length, or 0 (incomplete, malformed or another type: the look-ahead below
 * only stops there). */
static size_t peek_header(const char *p, size_t n, char type, int64_t max, size_t *v)
{
    int64_t x;
    if (n == 0 || p[0] != type)
        return 0;
    long h = resp_parse_header(p, n, &x);
    if (h <= 0 || x < 0 || x > max)
        return 0;
    *v = (size_t)x;
    return (size_t)h;
}

/* Pipelined look-ahead: the complete multibulk commands buffered after the
 * current one are framed (not parsed: a mistake only wastes a prefetch)
 * and the key of each (its second argument) is prefetched in two passes,
 * bucket lines then record lines, so that the memory misses of a batch
 * overlap instead of costing one full miss after another (measured in
 * docs/benchmarks.md, "server"). Returns how many commands it covered; 0 when fewer than
 * two are complete, where prefetching cannot overlap anything. */
#define W_AHEAD 32u
static unsigned prefetch_ahead(conn *c)
{
    if (c->need_args >= 0 || c->discard_bytes > 0 || c->discard_bulks > 0)
        return 0;
    const char *p = c->in.p + c->in.off;
    size_t n = c->in.len - c->in.off, pos = 0;
    const char *key[W_AHEAD];
    size_t klen[W_AHEAD];
    unsigned cmds = 0;
    while (cmds < W_AHEAD) {
        size_t argc, h = peek_header(p + pos, n - pos, '*', 64, &argc), at = pos + h;
        if (h == 0 || argc == 0)
            break;
        size_t a = 0;
        for (; a < argc; a++) {
            size_t len, hh = peek_header(p + at, n - at, '$', INT64_MAX, &len);
            if (hh == 0 || len > n || n - at - hh < len + 2)
                break;
            if (a == 1) {
                key[cmds] = p + at + hh;
                klen[cmds] = len;
            }
            at += hh + len + 2;
        }
        if (a < argc)
            break; /* incomplete: the rest has not arrived */
        if (argc < 2)
            klen[cmds] = SIZE_MAX;
        cmds++;
        pos = at;
    }
    if (cmds < 2)
        return 0;
    for (unsigned i = 0; i < cmds; i++)
        if (klen[i] != SIZE_MAX)
            pc_prefetch(c->coll, key[i], klen[i], 0);
    for (unsigned i = 0; i < cmds; i++)
        if (klen[i] != SIZE_MAX)
            pc_prefetch(c->coll, key[i], klen[i], 1);
    return cmds;
}

void conn_process(srv_worker *w, conn *c)
{
    if (c->fd < 0)
        return;
    size_t out_max = (size_t)w->s->cfg.max_output_mb << 20;
    unsigned ahead = 0;
    w->cmd_end_us = 0; /* the batch's first command reads the clock */
    while (!c->closing && !c->blocked && !c->paused) {
        if (ahead == 0)
            ahead = prefetch_ahead(c);
        if (ahead > 0)
            ahead--; /* the commands still covered after this one */
        int r = resp_parse(c, w->s->cfg.requirepass[0] != '\0' && !c->authed ? &w->lim_preauth
                                                                             : &w->lim);
        if (r == RESP_NEED)
            break;
        if (r == RESP_PROTO) {
            atomic_fetch_add_explicit(&w->st->proto_errors, 1, memory_order_relaxed);
            break;
        }
        if (r == RESP_REFUSED) {
            cmd_txn_flag(c); /* inside MULTI: a refused command aborts the EXEC */
            continue;
        }
        if (c->nargs > w->argcap) {
            unsigned cap = c->nargs < 64 ? 64 : c->nargs;
            const char **av = realloc(w->argv, cap * sizeof *av);
            if (av != NULL)
                w->argv = av;
            size_t *al = realloc(w->argl, cap * sizeof *al);
            if (al != NULL)
                w->argl = al;
            if (av == NULL || al == NULL) {
                reply_error(c, "ERR out of memory");
                c->closing = 1;
                break;
            }
            w->argcap = cap;
        }
        const char *base = c->in.p + c->in.off;
        for (unsigned i = 0; i < c->nargs; i++) {
            w->argv[i] = base + c->args[i].off;
            w->argl[i] = c->args[i].len;
        }
        uint64_t staged = w->gc != NULL ? pc_persist_commit_pending(w->gc) : 0;
        if (c->reply_mode != 0) { /* CLIENT REPLY OFF / SKIP: this reply is dropped */
            if (c->reply_mode == 2)
                c->reply_mode = 3;
            c->mute = 1;
        }
        srv_dbmap_enter(w); /* the database map this command sees (SWAPDB) */
        cmd_dispatch(w, c, c->nargs, w->argv, w->argl);
        if (c->reply_mode == 3)
            c->reply_mode = 0;
        c->mute = 0;
        if (w->gc != NULL && !c->wrote && pc_persist_commit_pending(w->gc) != staged) {
            c->wrote = 1;
            w->gc_writers++;
        }
        atomic_fetch_add_explicit(&w->st->commands, 1, memory_order_relaxed);
        if (c->blocked == 2)
            break; /* the same command runs again when the slot frees */
        resp_consume(c);
        if (c->out.len - c->out.off > out_max)
            c->paused = 1;
    }
    w->cmd_end_us = 0;
    if (w->stopping && !c->blocked)
        c->closing = 1;
    (void)conn_flush(w, c);
}

/* After a large command: the input buffer and the argument table go back
 * to nothing once nothing is buffered (an input buffer up to W_BUF_KEEP
 * back to the two read chunks an ordinary read needs), and the heap is
 * trimmed, so one big
 * request does not keep the worker large while the connection idles
 * (Redis's query-buffer resize is the anchor). The output buffer is
 * released the same way by conn_flush. */
static void conn_shrink(conn *c)
{
    bool trim = false;
    sbuf *b = &c->in;
    if (b->off == b->len && b->cap > W_BUF_KEEP) {
        trim = b->cap >= W_TRIM_AT;
        free(b->p);
        b->p = NULL;
        b->cap = b->off = b->len = 0;
    } else if (b->off == b->len && b->cap > 2 * W_READ_CHUNK) {
        /* past a peak: back to the room an ordinary read needs */
        char *p = realloc(b->p, 2 * W_READ_CHUNK);
        if (p != NULL) {
            b->p = p;
            b->cap = 2 * W_READ_CHUNK;
            b->off = b->len = 0;
        }
    }
    if (c->need_args < 0 && c->args_cap > W_ARGS_KEEP) {
        free(c->args);
        c->args = NULL;
        c->args_cap = 0;
    }
    if (trim)
        (void)malloc_trim(0);
}

static void conn_read(srv_worker *w, conn *c)
{
    for (int turn = 0; turn < 16 && c->fd >= 0 && !c->closing && !c->paused && !c->blocked;
         turn++) {
        sbuf *b = &c->in;
        if (b->off > 0 && (b->off == b->len || b->cap - b->len < W_READ_CHUNK)) {
            memmove(b->p, b->p + b->off, b->len - b->off);
            b->len -= b->off;
            b->off = 0;
        }
        size_t want = c->want > W_READ_CHUNK ? c->want : W_READ_CHUNK;
        if (b->cap - b->off < want + W_READ_CHUNK || b->cap - b->len < W_READ_CHUNK / 4) {
            size_t cap = b->cap ? b->cap : W_READ_CHUNK;
            while (cap - b->off < want + W_READ_CHUNK || cap - b->len < W_READ_CHUNK / 4)
                cap *= 2;
            char *p = realloc(b->p, cap);
            if (p == NULL) {
                reply_error(c, "ERR out of memory");
                c->closing = 1;
                break;
            }
            b->p = p;
            b->cap = cap;
        }
        size_t room = b->cap - b->len;
        ssize_t n = read(c->fd, b->p + b->len, room);
        if (n == 0) { /* the client closed: nothing more can be delivered */
            conn_close(w, c);
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            conn_close(w, c);
            return;
        }
        b->len += (size_t)n;
        atomic_store_explicit(&w->st->net_in,
                              atomic_load_explicit(&w->st->net_in, memory_order_relaxed) +
                                  (uint64_t)n,
                              memory_order_relaxed);
        c->last_ms = w->turn_ms;
        conn_process(w, c);
        if ((size_t)n < room)
            break;
    }
    if (c->fd >= 0)
        conn_shrink(c);
    if (c->fd >= 0)
        (void)conn_flush(w, c);
}

/* Both ends as Redis shows them, for CLIENT LIST and CLIENT KILL ADDR / LADDR. */
static void conn_addrs(const srv *s, conn *c)
{
    srv_conn_addr(s, c->fd, 1, c->laddr, sizeof c->laddr);
    srv_conn_addr(s, c->fd, 0, c->addr, sizeof c->addr);
}

/* Tags for the non-connection fds in epoll (connections carry their conn *;
 * the listeners' tags are their entries of srv_wloop.lsn). Constant: only
 * their addresses are used. */
static char tag_signal, tag_slot, tag_commit, tag_gctimer, tag_kill;

/* The event loop's own state, process-local: srv_worker_main keeps it on
 * its stack for the worker's life and w->loop points at it. */
struct srv_wloop {
    /* this worker's TCP listener of each bind address, then the shared
     * unix socket; an entry's address is its epoll tag */
    int lsn[SRV_MAX_BINDS + 1];
    unsigned nlsn;
    int unix_off;          /* the unix socket is out of this worker's epoll set */
    int64_t unix_off_ms;   /* since when */
    int sfd;               /* signalfd of TERM, INT and HUP */
    int64_t next_tick;     /* monotonic ms of the next once-a-second tick */
    int64_t stop_deadline; /* monotonic ms: the drain ends by then */
};
#define W_UNIX_OFF_MAX_MS 100 /* back in after this, whatever the others do */

static int lsn_index(const struct srv_wloop *l, const void *p)
{
    const int *q = p;
    return q >= l->lsn && q < l->lsn + l->nlsn ? (int)(q - l->lsn) : -1;
}

/* EPOLLEXCLUSIVE on the shared unix socket: one worker woken per arrival. */
static void lsn_watch(srv_worker *w, unsigned i)
{
    struct srv_wloop *l = w->loop;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &l->lsn[i]};
    if (i == l->nlsn - 1 && w->s->resp_unix_fd >= 0) {
        if (l->unix_off)
            return;
        e.events |= EPOLLEXCLUSIVE;
    }
    epoll_ctl(w->epfd, EPOLL_CTL_ADD, l->lsn[i], &e);
}

/* The kernel wakes the first idle exclusive waiter, so an idle worker would
 * take every unix connection of a burst (measured: 50 of 50 with 2
 * workers), where TCP's SO_REUSEPORT spreads them. So, once per loop turn:
 * a worker holding more than one connection above the least loaded other
 * worker (the shared per-worker counts) leaves the socket to the others
 * until it is back within one, or W_UNIX_OFF_MAX_MS passed (a stuck or
 * dead peer delays a unix connect by that much at most). */
static void unix_balance(srv_worker *w, int64_t now)
{
    const srv *s = w->s;
    if (s->resp_unix_fd < 0 || w->stopping || w->accept_resume_ms != 0 || s->cfg.workers < 2)
        return;
    uint64_t mine = atomic_load_explicit(&w->st->clients, memory_order_relaxed), least = UINT64_MAX;
    for (unsigned i = 0; i < s->cfg.workers; i++)
        if (i != w->slot) {
            uint64_t n = atomic_load_explicit(&s->shm->wstats[i].clients, memory_order_relaxed);
            least = n < least ? n : least;
        }
    int over = mine > least + 1;
    struct srv_wloop *l = w->loop;
    if (!l->unix_off && over) {
        epoll_ctl(w->epfd, EPOLL_CTL_DEL, s->resp_unix_fd, NULL);
        l->unix_off = 1;
        l->unix_off_ms = now;
    } else if (l->unix_off && (!over || now - l->unix_off_ms >= W_UNIX_OFF_MAX_MS)) {
        l->unix_off = 0;
        lsn_watch(w, l->nlsn - 1);
    }
}

/* Accepts what lfd has; the shared unix socket one connection per turn
 * (see unix_balance). */
static void accept_all(srv_worker *w, int lfd, int is_unix)
{
    for (unsigned taken = 0; !is_unix || taken < 1; taken++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* The listener stays readable while we cannot accept:
                 * leave it out of epoll for a moment instead of spinning. */
                srv_log(PC_LOG_WARN, "accept: %m (%u connections): pausing accepts for 100 ms",
                        w->nconns);
                for (unsigned i = 0; i < w->loop->nlsn; i++)
                    epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->loop->lsn[i], NULL);
                w->accept_resume_ms = pc_mono_ms() + 100;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
                srv_log(PC_LOG_WARN, "accept: %m");
            }
            return;
        }
        if (w->nconns >= w->s->cfg.maxclients) {
            static const char msg[] = "-ERR max number of clients reached\r\n";
            ssize_t r = write(fd, msg, sizeof msg - 1);
            (void)r;
            close(fd);
            atomic_fetch_add_explicit(&w->st->rejected, 1, memory_order_relaxed);
            continue;
        }
        int one = 1;
        if (!is_unix)
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn *c = calloc(1, sizeof *c);
        if (c == NULL) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->need_args = -1;
        c->bulk_len = -1;
        c->coll = w->dbcoll[0];
        c->last_ms = pc_mono_ms();
        c->born_ms = c->last_ms;
        c->proto = 2;
        c->id = atomic_fetch_add_explicit(&w->s->shm->next_client_id, 1, memory_order_relaxed);
        conn_addrs(w->s, c);
        c->events = EPOLLIN;
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
            close(fd);
            free(c);
            continue;
        }
        c->next = w->conns;
        if (w->conns != NULL)
            w->conns->prev = c;
        w->conns = c;
        w->nconns++;
        srv_ctab_publish(w, c);
        atomic_fetch_add_explicit(&w->st->clients, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&w->st->connections, 1, memory_order_relaxed);
    }
}

static void begin_stop(srv_worker *w)
{
    if (w->stopping)
        return;
    w->stopping = 1;
    for (unsigned i = 0; i < w->loop->nlsn; i++) {
        epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->loop->lsn[i], NULL);
        close(w->loop->lsn[i]);
    }
    srv_log(PC_LOG_INFO, "stopping: draining %u connection(s)", w->nconns);
    for (conn *c = w->conns; c != NULL; c = c->next)
        conn_process(w, c); /* runs what is buffered, then closes once flushed */
}

/* The worker's handles: its management and JSON handles per database, the
 * scratch buffer, group commit, the client table, and the slot's state a
 * dead predecessor left. Exits the process when one cannot be had. */
static void worker_setup(srv_worker *w)
{
    srv *s = w->s;
    (void)srv_runtime_poll(s); /* what CONFIG SET changed before this worker started */
    cmd_config_limits(w);
    w->scratch_cap = PC_VALUE_MAX + 64;
    w->scratch = malloc(w->scratch_cap);
    if (w->scratch == NULL) {
        srv_log(PC_LOG_ERR, "worker setup failed: no memory for the %zu-byte value buffer",
                w->scratch_cap);
        _exit(1);
    }
    int rc = 0;
    for (unsigned d = 0; d < s->ndbs && rc == 0; d++) {
        rc = pc_mgmt_create(s->cache, pc_coll_name(s->dbs[d]), &w->mgmt_cfg[d]);
        if (rc == 0)
            w->builtin_cmds = pc_mgmt_cmd_count(w->mgmt_cfg[d]);
        if (rc == 0 && s->persist != NULL) /* perf_stats' save/load facts */
            rc = pc_persist_register(s->persist, w->mgmt_cfg[d]);
    }
    w->mgmt = w->mgmt_cfg[0];
    srv_dbmap_worker_init(w);
    if (rc == 0)
        rc = pc_json_create(&w->json);
    if (rc != 0) {
        srv_log(PC_LOG_ERR, "worker setup failed: %s", pc_store_strerror(rc));
        _exit(1);
    }
    w->gc_efd = w->gc_tfd = -1;
    if (gc_setup(w, s) != 0)
        _exit(1);
    if (srv_ctab_worker_init(w) != 0) {
        srv_log(PC_LOG_ERR, "worker setup failed: no memory for the client table");
        _exit(1);
    }
    atomic_store(&w->st->pid, (int64_t)getpid());
    struct srv_slot_shm *sl = &s->shm->slots[w->slot];
    uint32_t st = atomic_load(&sl->state);
    if (st == SRV_SLOT_DONE)
        atomic_store(&sl->state, SRV_SLOT_FREE); /* answered for the worker that died */
    else if (st == SRV_SLOT_PENDING)
        w->slot_orphan = 1;
}

/* The descriptors the loop waits on: the listeners, the signals, the
 * slot's answer, CLIENT KILL's wake-up and group commit's. Exits the
 * process when epoll or the signalfd cannot be had. */
static void worker_watch(srv_worker *w)
{
    srv *s = w->s;
    struct srv_wloop *l = w->loop;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    l->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->sfd < 0 || w->epfd < 0) {
        srv_log(PC_LOG_ERR, "worker setup failed: %m");
        _exit(1);
    }
    for (unsigned i = 0; i < l->nlsn; i++)
        lsn_watch(w, i);
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &tag_signal};
    epoll_ctl(w->epfd, EPOLL_CTL_ADD, l->sfd, &e);
    e.data.ptr = &tag_slot;
    epoll_ctl(w->epfd, EPOLL_CTL_ADD, s->done_efd[w->slot], &e);
    e.data.ptr = &tag_kill;
    epoll_ctl(w->epfd, EPOLL_CTL_ADD, s->kill_efd[w->slot], &e);
    if (w->gc != NULL) {
        e.data.ptr = &tag_commit;
        epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->gc_efd, &e);
        e.data.ptr = &tag_gctimer;
        epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->gc_tfd, &e);
    }
}

/* One ready descriptor of the loop: a listener, a signal, group commit's
 * timer or wake-up, CLIENT KILL, the slot's answer, or a connection. */
static void worker_event(srv_worker *w, const struct epoll_event *ev)
{
    srv *s = w->s;
    struct srv_wloop *l = w->loop;
    void *p = ev->data.ptr;
    int li = lsn_index(l, p);
    uint64_t v;
    if (li >= 0) {
        if (!w->stopping)
            accept_all(w, l->lsn[li], l->lsn[li] == s->resp_unix_fd);
    } else if (p == &tag_signal) {
        struct signalfd_siginfo si;
        while (read(l->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
            if (si.ssi_signo == SIGHUP) {
                srv_log_reopen();
            } else {
                begin_stop(w);
                l->stop_deadline = pc_mono_ms() + s->cfg.drain_timeout_ms;
            }
        }
    } else if (p == &tag_gctimer) {
        if (read(w->gc_tfd, &v, sizeof v) == (ssize_t)sizeof v) {
            w->gc_armed = 0;
            w->gc_due = 1; /* gc_kick at the end of the turn starts the batch */
        }
    } else if (p == &tag_commit) {
        if (read(w->gc_efd, &v, sizeof v) == (ssize_t)sizeof v)
            gc_finish(w);
    } else if (p == &tag_kill) {
        srv_ctab_reap(w, conn_close); /* another worker ran CLIENT KILL */
    } else if (p == &tag_slot) {
        if (read(s->done_efd[w->slot], &v, sizeof v) == (ssize_t)sizeof v)
            cmd_slot_answered(w);
    } else {
        conn *c = p;
        if (c->fd < 0)
            return; /* closed earlier in this turn */
        if (ev->events & (EPOLLERR | EPOLLHUP) && !(ev->events & EPOLLIN)) {
            conn_close(w, c);
            return;
        }
        if (ev->events & EPOLLOUT)
            if (conn_flush(w, c) < 0)
                return;
        if (ev->events & EPOLLIN)
            conn_read(w, c);
    }
}

/* Once a second: CONFIG SET of other workers, the journal's worker tick,
 * idle connections closed and idle input buffers freed, and the wake-ups
 * an eventfd write may have lost. */
static void worker_tick(srv_worker *w, int64_t now)
{
    srv *s = w->s;
    if (srv_runtime_poll(s)) /* another worker ran CONFIG SET */
        cmd_config_limits(w);
    if (s->persist != NULL)
        (void)pc_persist_worker_tick(s->persist);
    if (s->cfg.idle_timeout_s > 0)
        for (conn *c = w->conns; c != NULL; c = c->next)
            if (!c->blocked && now - c->last_ms > (int64_t)s->cfg.idle_timeout_s * 1000)
                conn_close(w, c);
    /* an idle connection keeps no input buffer (Redis frees an idle
     * client's query buffer after 2 s too): 10,000 idle clients
     * would otherwise hold 32 KiB each */
    for (conn *c = w->conns; c != NULL; c = c->next)
        if (c->in.p != NULL && c->in.off == c->in.len && c->need_args < 0 && !c->blocked &&
            now - c->last_ms >= W_IDLE_FREE_MS) {
            free(c->in.p);
            c->in.p = NULL;
            c->in.cap = c->in.off = c->in.len = 0;
        }
    /* a lost eventfd write costs at most a second */
    if (w->slot_waiter != NULL || w->slot_async || w->slot_orphan)
        cmd_slot_answered(w);
    gc_finish(w);
    srv_ctab_reap(w, conn_close); /* a lost eventfd write costs a second */
}

/* The drain is over (every connection gone, or its deadline passed):
 * what is left is closed and freed, and the process exits. */
static void worker_shutdown(srv_worker *w) __attribute__((noreturn));
static void worker_shutdown(srv_worker *w)
{
    srv *s = w->s;
    if (w->nconns > 0)
        srv_log(PC_LOG_WARN, "drain deadline: closing %u connection(s)", w->nconns);
    gc_teardown(w);
    srv_log(PC_LOG_INFO, "stopped");
    while (w->conns != NULL)
        conn_close(w, w->conns);
    while (w->graveyard != NULL) {
        conn *g = w->graveyard;
        w->graveyard = g->gnext;
        conn_free(g);
    }
    pc_json_destroy(w->json);
    for (unsigned d = 0; d < s->ndbs; d++)
        pc_mgmt_destroy(w->mgmt_cfg[d]);
    free(w->scratch);
    free(w->argv);
    free(w->argl);
    exit(0);
}

/* The end of a loop turn: the unix socket's balance, accepts resumed,
 * the tick when due, group commit started, closed connections freed once
 * off the commit lists; the shutdown once a drain is over. */
static void worker_turn_end(srv_worker *w)
{
    struct srv_wloop *l = w->loop;
    int64_t now = pc_mono_ms();
    unix_balance(w, now);
    if (w->accept_resume_ms != 0 && now >= w->accept_resume_ms && !w->stopping) {
        for (unsigned i = 0; i < l->nlsn; i++)
            lsn_watch(w, i);
        w->accept_resume_ms = 0;
    }
    if (now >= l->next_tick) {
        l->next_tick = now + 1000;
        worker_tick(w, now);
    }
    gc_kick(w);
    /* a closed connection still on a group commit list is freed once off it */
    for (conn **pg = &w->graveyard; *pg != NULL;) {
        conn *g = *pg;
        if (g->held || g->infl) {
            pg = &g->gnext;
            continue;
        }
        *pg = g->gnext;
        conn_free(g);
    }
    if (w->stopping && (w->conns == NULL || now >= l->stop_deadline))
        worker_shutdown(w);
}

void srv_worker_main(srv *s, unsigned slot)
{
    char role[16];
    snprintf(role, sizeof role, "worker%u", slot);
    srv_log_role(role);
    /* The parent-death signal stays the SIGKILL the fork set (master.c):
     * a worker that drained on the master's death held the port for tens
     * of ms, and a successor started at once was refused ("in use by
     * another process"): only a process with SIGKILL pending is waited for. */
    srv_resp_close(s, (int)slot);
    struct srv_wloop loop;
    memset(&loop, 0, sizeof loop);
    for (unsigned j = 0; j < s->nbinds; j++)
        if (s->listen_fds[slot][j] >= 0)
            loop.lsn[loop.nlsn++] = s->listen_fds[slot][j];
    if (s->resp_unix_fd >= 0)
        loop.lsn[loop.nlsn++] = s->resp_unix_fd;

    srv_worker wk;
    memset(&wk, 0, sizeof wk);
    srv_worker *w = &wk;
    w->s = s;
    w->slot = slot;
    w->st = &s->shm->wstats[slot];
    w->loop = &loop;
    worker_setup(w);
    worker_watch(w);
    if (getppid() == 1)
        _exit(0); /* the master died before PDEATHSIG was set */

    loop.next_tick = pc_mono_ms() + 1000;
    struct epoll_event evs[256];
    for (;;) {
        srv_dbmap_turn_end(w); /* no command runs while we wait (dbmap.c) */
        int n = epoll_wait(w->epfd, evs, 256, loop.unix_off ? W_UNIX_OFF_MAX_MS : 200);
        w->turn_ms = pc_mono_ms();
        srv_dbmap_turn_begin(w);
        for (int i = 0; i < n; i++)
            worker_event(w, &evs[i]);
        worker_turn_end(w);
    }
}
