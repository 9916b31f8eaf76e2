/*
 * jsonrpc.c - JSON-RPC 2.0 over HTTP/1.1 (the OpenSIPS MI wire shape), on a
 * loopback TCP port and/or a unix socket, answered by the maintenance
 * process (docs/pcached.md, "JSON-RPC").
 *
 *   POST <any path> HTTP/1.1, Content-Length: n, body:
 *   {"jsonrpc":"2.0","method":"perf_stats","params":{"collection":"th"},"id":1}
 *
 * and GET /metrics (OpenMetrics / Prometheus text) and GET /health
 * (metrics.c). A method is a management command, or one of the door's own
 * (help: jsonrpc_help.c).
 *
 * params is an object (named arguments) or an array (positional ones) of
 * strings, numbers, booleans (as 1/0) or null (the argument omitted). In a
 * string, every escape is standard JSON (\u00ef is U+00EF, the UTF-8
 * bytes c3 af); bytes that are not text travel as base64 under
 * "<name>_b64" or as a positional {"b64":"..."} (pcache_mgmt.h). One request per connection
 * (Connection: close); batches are refused. With a management password (management_password, else
 * requirepass) a TCP request must carry it (Authorization: Bearer or Basic); the unix socket is
 * guarded by its mode (0600).
 *
 * The door is event-driven: the maintenance loop polls every connection
 * with the rest of its work, a connection has RPC_DEADLINE_MS from its
 * accept to its last reply byte, and at most RPC_CONNS_MAX are open (one
 * more is told 503 and closed), so idle or slow clients never delay
 * another one or the maintenance work; only the command itself runs in the
 * loop (a save takes as long as it takes). The framing is jsonrpc_http.c,
 * the request reader jsonrpc_parse.c.
 */
#include "pcached.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RPC_HDR_MAX 8192u
#define RPC_BODY_MAX (1u << 20)
#define RPC_DEADLINE_MS 2000
#define RPC_CONNS_MAX 256
#define RPC_IN_FIRST                                                                               \
    4096u /* a connection's first input buffer; grows to what the request needs                    \
           */

int srv_maint_run_json(srv *s, pc_mgmt *m, const char *cmd, const pc_mgmt_arg *args, unsigned nargs,
                       pc_mgmt_err *err, const char **text, size_t *len);

struct rpc_conn {
    int fd; /* -1 = a free entry */
    bool tcp;
    bool metrics_only; /* accepted on metrics_port: GET /metrics and /health, nothing else */
    int64_t deadline;
    char *in; /* the request so far */
    size_t in_len, in_cap;
    char *out; /* the whole reply, sent from out_off */
    size_t out_len, out_off;
};

struct srv_door {
    struct rpc_conn c[RPC_CONNS_MAX];
    pc_json *jb;
    char *dec; /* decoded strings of a request body */
};

/* ---- replies --------------------------------------------------------------------- */

/* Sets c's reply: a status line, headers and body (copied). On no memory
 * the connection is just closed (c->out stays NULL). */
static void http_reply_ct(struct rpc_conn *c, int status, const char *reason, const char *ctype,
                          const char *extra, const char *body, size_t blen)
{
    char hdr[512];
    int n = snprintf(hdr, sizeof hdr,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "%sConnection: close\r\n\r\n",
                     status, reason, ctype, blen, extra != NULL ? extra : "");
    free(c->out);
    c->out = malloc((size_t)n + blen);
    c->out_off = c->out_len = 0;
    if (c->out == NULL)
        return;
    memcpy(c->out, hdr, (size_t)n);
    if (blen > 0)
        memcpy(c->out + n, body, blen);
    c->out_len = (size_t)n + blen;
}

static void http_reply(struct rpc_conn *c, int status, const char *reason, const char *extra,
                       const char *body, size_t blen)
{
    http_reply_ct(c, status, reason, "application/json", extra, body, blen);
}

/* {"jsonrpc":"2.0","error":{"code":c,"message":m},"id":id} with the JSON
 * backend escaping the message, as c's reply with HTTP status status. */
static void rpc_error_status(srv_door *d, struct rpc_conn *c, int status, const char *reason,
                             const char *extra, int code, const char *msg, const char *id,
                             size_t idl)
{
    pc_json *jb = d->jb;
    pc_json_reset(jb);
    const pc_result_ops *o = pc_json_ops();
    o->obj_begin(jb, NULL);
    o->i64(jb, "code", code);
    o->str(jb, "message", msg, strlen(msg));
    o->obj_end(jb);
    const char *err;
    size_t elen;
    if (pc_json_text(jb, &err, &elen) != 0) {
        err = "{\"code\":-32603,\"message\":\"Internal error\"}";
        elen = strlen(err);
    }
    char head[] = "{\"jsonrpc\":\"2.0\",\"error\":";
    size_t total = sizeof head - 1 + elen + 6 + (idl ? idl : 4) + 1;
    char *body = malloc(total + 1);
    if (body == NULL)
        return;
    int n = snprintf(body, total + 1, "%s%.*s,\"id\":%.*s}", head, (int)elen, err,
                     (int)(idl ? idl : 4), idl ? id : "null");
    http_reply(c, status, reason, extra, body, (size_t)n);
    free(body);
}

static void rpc_error(srv_door *d, struct rpc_conn *c, int code, const char *msg, const char *id,
                      size_t idl)
{
    rpc_error_status(d, c, 200, "OK", NULL, code, msg, id, idl);
}

static int rpc_code(int rc)
{
    switch (rc) {
    case PC_EINVAL:
    case PC_ETOOBIG:
    case PC_ENOCOLL:
        return -32602; /* Invalid params */
    default:
        return -32000 + rc; /* server errors: -32000 + the PC_E* code */
    }
}

static const char *status_reason(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 411:
        return "Length Required";
    case 413:
        return "Payload Too Large";
    case 431:
        return "Request Header Fields Too Large";
    case 501:
        return "Not Implemented";
    default:
        return "Error";
    }
}

/* ---- one request -------------------------------------------------------------------- */

/* The management password a TCP request must carry, or NULL for none. */
static const char *door_password(const srv *s)
{
    const char *pw =
        s->cfg.management_password[0] ? s->cfg.management_password : s->cfg.requirepass;
    return pw[0] ? pw : NULL;
}

/* Runs the parsed request r (borrowed) and sets c's reply. */
static void door_call(srv *s, srv_door *d, pc_mgmt *m, struct rpc_conn *c, const struct rpc_req *r)
{
    if (r->duplicate) {
        rpc_error(d, c, -32600, "Invalid Request: a member is named twice", NULL, 0);
        return;
    }
    if (!r->version_ok || !r->has_method) {
        rpc_error(d, c, -32600, "Invalid Request: needs \"jsonrpc\":\"2.0\" and a method", r->id,
                  r->id_len);
        return;
    }
    int own = srv_rpc_own(r->method); /* help: jsonrpc_help.c */
    if (!own && pc_mgmt_cmd_find(m, r->method) == NULL) {
        char msg[128];
        snprintf(msg, sizeof msg, "Method not found: %s", r->method);
        rpc_error(d, c, -32601, msg, r->id, r->id_len);
        return;
    }
    if (r->bad_b64) {
        rpc_error(d, c, -32602,
                  "Invalid params: a \"<name>_b64\" or {\"b64\":...} argument is not "
                  "canonical base64 (RFC 4648, padded)",
                  r->id, r->id_len);
        return;
    }
    if (r->bad_params) {
        rpc_error(d, c, -32602,
                  "Invalid params: an object or array of at most 32 strings or numbers", r->id,
                  r->id_len);
        return;
    }
    pc_mgmt_err err;
    const char *text;
    size_t tlen;
    int rc = own ? srv_rpc_own_run(m, d->jb, r, &err, &text, &tlen)
                 : srv_maint_run_json(s, m, r->method, r->args, r->nargs, &err, &text, &tlen);
    if (rc != 0) {
        rpc_error(d, c, rpc_code(rc), err.msg, r->id, r->id_len);
        return;
    }
    if (!r->has_id) { /* a notification: no answer */
        http_reply(c, 204, "No Content", NULL, "", 0);
        return;
    }
    size_t total = tlen + r->id_len + 64;
    char *body = malloc(total);
    if (body != NULL) {
        int n = snprintf(body, total, "{\"jsonrpc\":\"2.0\",\"result\":%.*s,\"id\":%.*s}",
                         (int)tlen, text, (int)r->id_len, r->id);
        http_reply(c, 200, "OK", NULL, body, (size_t)n);
        free(body);
    }
}

/* Whether the Accept value (alen bytes) asks for OpenMetrics. */
static int wants_openmetrics(const char *a, size_t alen)
{
    static const char om[] = "application/openmetrics-text";
    return a != NULL && memmem(a, alen, om, sizeof om - 1) != NULL;
}

/* GET /metrics and GET /health (docs/pcached.md, "Metrics and health"):
 * no password unless metrics_auth = 1 (the listener is on loopback by
 * default); any other path is 404. A query string is ignored. */
static void door_get(srv *s, struct rpc_conn *c, const struct http_req *hr)
{
    const char *pw = door_password(s);
    if (c->tcp && pw != NULL && s->cfg.metrics_auth &&
        !srv_http_auth_ok(hr->auth, hr->auth_len, pw)) {
        static const char msg[] = "{\"error\":\"authentication required (metrics_auth = 1)\"}";
        http_reply(c, 401, "Unauthorized", "WWW-Authenticate: Basic realm=\"pcached\"\r\n", msg,
                   sizeof msg - 1);
        return;
    }
    const char *q = memchr(hr->path, '?', hr->path_len);
    size_t plen = q != NULL ? (size_t)(q - hr->path) : hr->path_len;
    char *body = NULL;
    size_t blen = 0;
    if (plen == 8 && memcmp(hr->path, "/metrics", 8) == 0) {
        int om = wants_openmetrics(hr->accept, hr->accept_len);
        if (srv_metrics_text(s, om, &body, &blen) != 0) {
            static const char msg[] = "{\"error\":\"out of memory\"}";
            http_reply(c, 500, "Internal Server Error", NULL, msg, sizeof msg - 1);
            return;
        }
        http_reply_ct(c, 200, "OK",
                      om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                         : "text/plain; version=0.0.4; charset=utf-8",
                      NULL, body, blen);
    } else if (plen == 7 && memcmp(hr->path, "/health", 7) == 0) {
        int st = srv_health(s, &body, &blen);
        if (st < 0) {
            static const char msg[] = "{\"error\":\"out of memory\"}";
            http_reply(c, 500, "Internal Server Error", NULL, msg, sizeof msg - 1);
            return;
        }
        http_reply(c, st, st == 200 ? "OK" : "Service Unavailable", NULL, body, blen);
    } else {
        static const char msg[] =
            "{\"error\":\"not found: GET serves /metrics and /health; JSON-RPC is POST\"}";
        http_reply(c, 404, "Not Found", NULL, msg, sizeof msg - 1);
    }
    free(body);
}

/* c holds one whole request (framed as hr): runs it, sets the reply. */
static void door_run(srv *s, srv_door *d, pc_mgmt *m, struct rpc_conn *c, const struct http_req *hr)
{
    if (hr->get) {
        door_get(s, c, hr);
        return;
    }
    if (c->metrics_only) {
        static const char msg[] = "{\"error\":\"method not allowed: metrics_port serves GET "
                                  "/metrics and GET /health only; JSON-RPC is on http_port or "
                                  "unix_socket\"}";
        http_reply(c, 405, "Method Not Allowed", "Allow: GET\r\n", msg, sizeof msg - 1);
        return;
    }
    const char *pw = door_password(s);
    if (c->tcp && pw != NULL && !srv_http_auth_ok(hr->auth, hr->auth_len, pw)) {
        rpc_error_status(d, c, 401, "Unauthorized", "WWW-Authenticate: Basic realm=\"pcached\"\r\n",
                         -32001,
                         "authentication required: send the management password "
                         "(Authorization: Bearer <password>, or Basic with any user)",
                         NULL, 0);
        return;
    }
    struct rpc_req r;
    int prc = srv_rpc_parse(c->in + hr->hdr_end, hr->clen, d->dec, &r);
    if (prc == -2) {
        rpc_error(d, c, -32600, "Invalid Request: batches are not supported", NULL, 0);
        return;
    }
    if (prc == -3) {
        rpc_error(d, c, -32603, "Internal error: out of memory", NULL, 0);
        return;
    }
    if (prc != 0) {
        rpc_error(d, c, -32700, "Parse error: not a JSON object in UTF-8", NULL, 0);
        return;
    }
    door_call(s, d, m, c, &r);
    srv_rpc_release(&r);
}

/* ---- connections -------------------------------------------------------------------- */

static void conn_close(struct rpc_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->in);
    free(c->out);
    *c = (struct rpc_conn){.fd = -1};
}

/* Sends what is left of c's reply; closes c once it is all out (or the
 * peer is gone). */
static void conn_send(struct rpc_conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w =
            send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return; /* POLLOUT brings us back */
        if (w <= 0)
            break;
        c->out_off += (size_t)w;
    }
    conn_close(c);
}

/* Reads what c's peer sent; once the request is whole, runs it. */
static void conn_recv(srv *s, srv_door *d, pc_mgmt *m, struct rpc_conn *c)
{
    for (;;) {
        if (c->in_len == c->in_cap) {
            size_t cap = c->in_cap ? c->in_cap * 2 : RPC_IN_FIRST;
            if (cap > RPC_HDR_MAX + RPC_BODY_MAX + 1)
                cap = RPC_HDR_MAX + RPC_BODY_MAX + 1;
            char *p = cap > c->in_cap ? realloc(c->in, cap) : NULL;
            if (p == NULL) {
                conn_close(c);
                return;
            }
            c->in = p;
            c->in_cap = cap;
        }
        ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (r <= 0) { /* gone before its request was whole */
            conn_close(c);
            return;
        }
        c->in_len += (size_t)r;
        struct http_req hr;
        const char *why;
        int f = srv_http_frame(c->in, c->in_len, RPC_HDR_MAX, RPC_BODY_MAX, &hr, &why);
        if (f == 0)
            continue;
        if (f == 1) {
            door_run(s, d, m, c, &hr);
        } else {
            char msg[160];
            snprintf(msg, sizeof msg, "{\"error\":\"%s\"}", why);
            http_reply(c, f, status_reason(f), NULL, msg, strlen(msg));
        }
        if (c->out == NULL) {
            conn_close(c);
            return;
        }
        conn_send(c);
        return;
    }
}

srv_door *srv_door_create(void)
{
    srv_door *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    for (unsigned i = 0; i < RPC_CONNS_MAX; i++)
        d->c[i].fd = -1;
    if ((d->dec = malloc(RPC_BODY_MAX + 1)) == NULL || pc_json_create(&d->jb) != 0) {
        free(d->dec);
        free(d);
        return NULL;
    }
    return d;
}

void srv_door_destroy(srv_door *d)
{
    if (d == NULL)
        return;
    for (unsigned i = 0; i < RPC_CONNS_MAX; i++)
        conn_close(&d->c[i]);
    pc_json_destroy(d->jb);
    free(d->dec);
    free(d);
}

/* Takes one accepted connection: a free entry, or 503 and close. */
static void door_take(srv_door *d, int fd, int tcp)
{
    for (unsigned i = 0; i < RPC_CONNS_MAX; i++) {
        struct rpc_conn *c = &d->c[i];
        if (c->fd >= 0)
            continue;
        *c = (struct rpc_conn){.fd = fd,
                               .tcp = tcp != 0,
                               .metrics_only = tcp == 2,
                               .deadline = pc_mono_ms() + RPC_DEADLINE_MS};
        return;
    }
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                               "Retry-After: 1\r\nConnection: close\r\n\r\n";
    ssize_t w = send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
    close(fd);
}

void srv_door_accept(srv *s, srv_door *d, int lfd, int tcp)
{
    (void)s;
    /* every connection waiting (up to a bound): one per loop turn would
     * let a burst age in the accept queue past its own deadline. The
     * listener is non-blocking in this process (maint.c). */
    for (unsigned k = 0; k < 2 * RPC_CONNS_MAX; k++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        door_take(d, fd, tcp);
    }
}

unsigned srv_door_pollfds(const srv_door *d, struct pollfd *pf, unsigned max)
{
    unsigned n = 0;
    for (unsigned i = 0; i < RPC_CONNS_MAX && n < max; i++) {
        const struct rpc_conn *c = &d->c[i];
        if (c->fd >= 0)
            pf[n++] = (struct pollfd){c->fd, c->out != NULL ? POLLOUT : POLLIN, 0};
    }
    return n;
}

void srv_door_serve(srv *s, srv_door *d, pc_mgmt *m, const struct pollfd *pf, unsigned n)
{
    for (unsigned k = 0; k < n; k++) {
        if (pf[k].revents == 0)
            continue;
        for (unsigned i = 0; i < RPC_CONNS_MAX; i++) {
            struct rpc_conn *c = &d->c[i];
            if (c->fd != pf[k].fd)
                continue;
            if (c->out != NULL)
                conn_send(c);
            else if (pf[k].revents & (POLLIN | POLLHUP | POLLERR))
                conn_recv(s, d, m, c);
            break;
        }
    }
    int64_t now = pc_mono_ms();
    for (unsigned i = 0; i < RPC_CONNS_MAX; i++)
        if (d->c[i].fd >= 0 && now >= d->c[i].deadline)
            conn_close(&d->c[i]); /* too slow a client: it never holds the door */
}

int srv_door_timeout(const srv_door *d, int64_t now)
{
    int64_t best = -1;
    for (unsigned i = 0; i < RPC_CONNS_MAX; i++) {
        if (d->c[i].fd < 0)
            continue;
        int64_t left = d->c[i].deadline - now;
        if (left < 0)
            left = 0;
        if (best < 0 || left < best)
            best = left;
    }
    return (int)best;
}
