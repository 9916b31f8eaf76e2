/*
 * bench_rload.c - the lean RESP load generator of bench_rload.h.
 *
 * Each connection writes its batch of P commands with one write and reads
 * until P replies have arrived, then sends the next batch: a closed loop,
 * like redis-benchmark -P. The GET and SET requests of a run are formatted
 * before it starts into one pool over uniformly random keys (RLOAD_POOL
 * requests, or one per key when the key space is larger; its first P
 * repeated at its end so that any P consecutive ones are contiguous): a
 * batch is one write() straight from the pool, with no
 * formatting on the clock (a SET's value only gets a fresh 8-byte stamp,
 * take_batch). Replies are only framed, never parsed beyond
 * their type and length. Both keep the client's own cost per request to a
 * few dozen nanoseconds, so that on two cores the server, not the client,
 * is what saturates. Latencies go to a 1-microsecond histogram up to
 * 1 s (longer ones count in the last bucket).
 */
#include "bench_rload.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HIST_US 1000000u
#define RLOAD_POOL 131072u /* pooled requests at least; more for larger key spaces */

struct rconn {
    int fd;
    char *out;      /* the batch being sent: into the pool, or fill_buf */
    char *fill_buf; /* FILL only: this connection's own batch */
    size_t out_len, out_off;
    char *in;
    size_t in_len, in_cap;
    unsigned pending; /* replies still expected for this batch */
    int64_t sent_ns;
    uint64_t next_fill;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int connect_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

int rload_command(int port, const char *cmd, char *buf, unsigned cap, int timeout_ms)
{
    int fd = connect_port(port);
    if (fd < 0)
        return -1;
    size_t n = strlen(cmd);
    int rc = -1;
    if (write(fd, cmd, n) == (ssize_t)n) {
        size_t got = 0;
        while (got + 1 < cap) {
            struct pollfd pf = {fd, POLLIN, 0};
            if (poll(&pf, 1, timeout_ms) != 1)
                break;
            ssize_t r = read(fd, buf + got, cap - 1 - got);
            if (r <= 0)
                break;
            got += (size_t)r;
            buf[got] = '\0';
            if (memchr(buf, '\n', got) != NULL) {
                rc = 0;
                break;
            }
        }
    }
    close(fd);
    return rc;
}

/* Frames one reply at p (n bytes): its length, 0 when incomplete. Sets
 * *err for '-' replies and *miss for a nil bulk. */
static size_t frame(const char *p, size_t n, int *err, int *miss)
{
    const char *nl = memchr(p, '\n', n);
    if (nl == NULL)
        return 0;
    size_t line = (size_t)(nl - p) + 1;
    if (p[0] == '-')
        *err = 1;
    if (p[0] != '$')
        return line;
    if (p[1] == '-') {
        *miss = 1;
        return line;
    }
    size_t len = 0;
    for (const char *d = p + 1; *d >= '0' && *d <= '9'; d++)
        len = len * 10 + (size_t)(*d - '0');
    size_t total = line + (size_t)len + 2;
    return total <= n ? total : 0;
}

/* Formats one request for key k at w; returns its end. *vat (when not
 * NULL) gets where a SET's value starts. */
static char *format_request(const rload_opts *o, char *w, uint64_t k, const char *value, char **vat)
{
    char key[24];
    int kl = snprintf(key, sizeof key, "key:%010llu", (unsigned long long)k);
    if (o->op == RLOAD_GET) {
        w += sprintf(w, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", kl, key);
    } else if (o->ttl_s > 0) {
        char ttl[16];
        int tl = snprintf(ttl, sizeof ttl, "%u", o->ttl_s);
        w += sprintf(w, "*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%u\r\n", kl, key, o->value_size);
        if (vat != NULL)
            *vat = w;
        memcpy(w, value, o->value_size);
        w += o->value_size;
        w += sprintf(w, "\r\n$2\r\nEX\r\n$%d\r\n%s\r\n", tl, ttl);
    } else {
        w += sprintf(w, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%u\r\n", kl, key, o->value_size);
        if (vat != NULL)
            *vat = w;
        memcpy(w, value, o->value_size);
        w += o->value_size;
        w += sprintf(w, "\r\n");
    }
    return w;
}

/* FILL: the next P keys of this connection, formatted into c->out. */
static void build_fill(const rload_opts *o, struct rconn *c, const char *value)
{
    c->out_len = c->out_off = 0;
    unsigned count = 0;
    char *w = c->out;
    for (unsigned i = 0; i < o->pipeline && c->next_fill < o->keys; i++) {
        w = format_request(o, w, c->next_fill, value, NULL);
        c->next_fill += o->conns;
        count++;
    }
    c->out_len = (size_t)(w - c->out);
    c->pending = count;
}

/* The request pool of a GET or SET run: n + P requests, off[i] the start
 * of request i (off[n + P] the end). */
struct rpool {
    char *buf;
    size_t *off;
    unsigned n, next;
    /* SET: where the value starts in every request (keys and values have
     * one length), and the next stamp written there */
    size_t vpos;
    uint64_t stamp;
};

static int pool_build(const rload_opts *o, struct rpool *pl, const char *value)
{
    /* at least one request per key, so the pool's keys cover the key space
     * as a fresh random stream would (a short pool would shrink the working
     * set and flatter the server) */
    unsigned n =
        o->keys > RLOAD_POOL ? (unsigned)(o->keys < (1u << 23) ? o->keys : 1u << 23) : RLOAD_POOL;
    unsigned total = n + o->pipeline;
    pl->n = n;
    pl->next = 0;
    pl->buf = malloc((size_t)total * (o->value_size + 96));
    pl->off = malloc(((size_t)total + 1) * sizeof *pl->off);
    if (pl->buf == NULL || pl->off == NULL)
        return -1;
    uint32_t seed = 2463534242u;
    uint64_t *keys = malloc((size_t)n * sizeof *keys);
    if (keys == NULL)
        return -1;
    for (unsigned i = 0; i < n; i++) {
        seed ^= seed << 13, seed ^= seed >> 17, seed ^= seed << 5;
        keys[i] = seed % o->keys;
    }
    char *w = pl->buf;
    pl->vpos = 0;
    for (unsigned i = 0; i < total; i++) {
        pl->off[i] = (size_t)(w - pl->buf);
        char *vat = NULL;
        w = format_request(o, w, keys[i % n], value, &vat);
        if (vat != NULL) {
            size_t vpos = (size_t)(vat - (pl->buf + pl->off[i]));
            if (i > 0 && vpos != pl->vpos) {
                free(keys);
                return -1; /* take_batch's stamps rely on one layout */
            }
            pl->vpos = vpos;
        }
    }
    pl->off[total] = (size_t)(w - pl->buf);
    free(keys);
    return 0;
}

/* Points c at the next P pooled requests (no copy). A SET's value gets a
 * new stamp in its first bytes each time it is sent, so every SET stores
 * a value its key does not hold: a server that skips a write of the bytes
 * a key already holds (pcached's TTL-only refresh) does the write here as
 * any SET would. A range is stamped only when taken, and the pool (at
 * least RLOAD_POOL requests) is far larger than what is in flight, so no
 * bytes change under a send. */
static void take_batch(const rload_opts *o, struct rconn *c, struct rpool *pl)
{
    unsigned i = pl->next;
    if (o->op == RLOAD_SET) {
        size_t sl = o->value_size < sizeof pl->stamp ? o->value_size : sizeof pl->stamp;
        for (unsigned j = 0; j < o->pipeline; j++) {
            pl->stamp++;
            memcpy(pl->buf + pl->off[i + j] + pl->vpos, &pl->stamp, sl);
        }
    }
    c->out = pl->buf + pl->off[i];
    c->out_len = pl->off[i + o->pipeline] - pl->off[i];
    c->out_off = 0;
    c->pending = o->pipeline;
    pl->next = (i + o->pipeline) % pl->n;
}

static void next_batch(const rload_opts *o, struct rconn *c, struct rpool *pl, const char *value)
{
    if (o->op == RLOAD_FILL)
        build_fill(o, c, value);
    else
        take_batch(o, c, pl);
}

int rload_run(const rload_opts *o, rload_result *res)
{
    memset(res, 0, sizeof *res);
    struct rpool pl = {0};
    uint32_t *hist = calloc(HIST_US + 1, sizeof *hist);
    struct rconn *cs = calloc(o->conns, sizeof *cs);
    char *value = malloc(o->value_size + 1);
    int ep = epoll_create1(0);
    int rc = -1;
    if (hist == NULL || cs == NULL || value == NULL || ep < 0)
        goto out;
    memset(value, 'v', o->value_size);
    size_t batch_cap = (size_t)o->pipeline * (o->value_size + 128);
    if (o->op != RLOAD_FILL && pool_build(o, &pl, value) != 0)
        goto out;
    for (unsigned i = 0; i < o->conns; i++) {
        struct rconn *c = &cs[i];
        c->fd = connect_port(o->port);
        if (o->op == RLOAD_FILL)
            c->out = c->fill_buf = malloc(batch_cap);
        c->in_cap = batch_cap + 65536;
        c->in = malloc(c->in_cap);
        c->next_fill = i;
        if (c->fd < 0 || (o->op == RLOAD_FILL && c->out == NULL) || c->in == NULL) {
            fprintf(stderr, "rload: cannot connect to 127.0.0.1:%d\n", o->port);
            goto out;
        }
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = i};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e);
    }
    int64_t t0 = now_ns(), end = t0 + (int64_t)(o->seconds * 1e9);
    unsigned active = 0;
    for (unsigned i = 0; i < o->conns; i++) {
        struct rconn *c = &cs[i];
        if (o->op == RLOAD_FILL && c->next_fill >= o->keys)
            continue;
        next_batch(o, c, &pl, value);
        c->sent_ns = now_ns();
        if (write(c->fd, c->out, c->out_len) != (ssize_t)c->out_len) {
            fprintf(stderr, "rload: short write\n");
            goto out;
        }
        active++;
    }
    struct epoll_event evs[256];
    while (active > 0) {
        int n = epoll_wait(ep, evs, 256, 1000);
        if (n < 0 && errno != EINTR)
            goto out;
        int64_t now = now_ns();
        for (int e = 0; e < n; e++) {
            struct rconn *c = &cs[evs[e].data.u32];
            ssize_t r = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
            if (r <= 0) {
                fprintf(stderr, "rload: connection lost\n");
                goto out;
            }
            c->in_len += (size_t)r;
            size_t off = 0;
            for (;;) {
                int err = 0, miss = 0;
                size_t f = frame(c->in + off, c->in_len - off, &err, &miss);
                if (f == 0)
                    break;
                off += f;
                res->errors += (uint64_t)err;
                res->misses += (uint64_t)miss;
                c->pending--;
                res->ops++;
                int64_t us = (now - c->sent_ns) / 1000;
                hist[us > HIST_US ? HIST_US : us]++;
                if (c->pending == 0)
                    break;
            }
            memmove(c->in, c->in + off, c->in_len - off);
            c->in_len -= off;
            if (c->pending > 0)
                continue;
            int done = o->op == RLOAD_FILL ? c->next_fill >= o->keys : now >= end;
            if (done) {
                active--;
                continue;
            }
            next_batch(o, c, &pl, value);
            c->sent_ns = now_ns();
            if (write(c->fd, c->out, c->out_len) != (ssize_t)c->out_len) {
                fprintf(stderr, "rload: short write\n");
                goto out;
            }
        }
    }
    res->seconds = (double)(now_ns() - t0) / 1e9;
    res->rate = (double)res->ops / res->seconds;
    uint64_t seen = 0;
    double *targets[] = {&res->p50_us, &res->p99_us, &res->p999_us};
    double q[] = {0.5, 0.99, 0.999};
    int qi = 0;
    for (uint32_t us = 0; us <= HIST_US; us++) {
        seen += hist[us];
        while (qi < 3 && (double)seen >= q[qi] * (double)res->ops)
            *targets[qi++] = us;
        if (hist[us])
            res->max_us = us;
    }
    rc = 0;
out:
    for (unsigned i = 0; cs != NULL && i < o->conns; i++) {
        if (cs[i].fd > 0)
            close(cs[i].fd);
        free(cs[i].fill_buf);
        free(cs[i].in);
    }
    if (ep >= 0)
        close(ep);
    free(cs);
    free(pl.buf);
    free(pl.off);
    free(value);
    free(hist);
    return rc;
}
