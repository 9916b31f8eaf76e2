/*
 * jsonrpc.c - JSON-RPC 2.0 over HTTP/1.1 (the OpenSIPS MI wire shape), on a
 * loopback TCP port and/or a unix socket, answered by the maintenance
 * process (docs/pcached.md, "JSON-RPC").
 *
 *   POST <any path> HTTP/1.1, Content-Length: n, body:
 *   {"jsonrpc":"2.0","method":"perf_stats","params":{"collection":"th"},"id":1}
 *
 * params is an object (named arguments) or an array (positional ones) of
 * strings, numbers, booleans (as 1/0) or null (the argument omitted). In a
 * string, the escapes \u0000..\u00ff stand for the single byte of that
 * value (so any binary key the JSON backend escapes comes back as it was);
 * other escapes are UTF-8. One request per connection (Connection: close);
 * batches are refused. The whole exchange has a 2-second deadline: the
 * maintenance process is never held by a slow client for longer.
 *
 * The request readers (the HTTP head and the JSON body) are jsonrpc_parse.c.
 */
#include "pcached.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RPC_HDR_MAX 8192u
#define RPC_BODY_MAX (1u << 20)
#define RPC_DEADLINE_MS 2000

int srv_maint_run_json(srv *s, pc_mgmt *m, const char *cmd, const pc_mgmt_arg *args, unsigned nargs,
                       pc_mgmt_err *err, const char **text, size_t *len);

/* ---- HTTP ------------------------------------------------------------------------ */

static int wait_fd(int fd, short ev, int64_t deadline)
{
    int64_t left = deadline - pc_mono_ms();
    if (left <= 0)
        return -1;
    struct pollfd pf = {fd, ev, 0};
    return poll(&pf, 1, (int)left) == 1 ? 0 : -1;
}

static void send_all(int fd, const char *p, size_t n, int64_t deadline)
{
    while (n > 0) {
        if (wait_fd(fd, POLLOUT, deadline) != 0)
            return;
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void http_reply(int fd, int status, const char *reason, const char *body, size_t blen,
                       int64_t deadline)
{
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, reason, blen);
    send_all(fd, hdr, (size_t)n, deadline);
    send_all(fd, body, blen, deadline);
}

/* Builds {"jsonrpc":"2.0","error":{"code":c,"message":m},"id":id} with the
 * JSON backend escaping the message. */
static void rpc_error(int fd, pc_json *jb, int code, const char *msg, const char *id, size_t idl,
                      int64_t deadline)
{
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
    http_reply(fd, 200, "OK", body, (size_t)n, deadline);
    free(body);
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

void srv_jsonrpc_serve(srv *s, pc_mgmt *m, int fd)
{
    int64_t deadline = pc_mono_ms() + RPC_DEADLINE_MS;
    char *buf = malloc(RPC_HDR_MAX + RPC_BODY_MAX + 1);
    char *dec = malloc(RPC_BODY_MAX + 1);
    pc_json *jb = NULL;
    if (buf == NULL || dec == NULL || pc_json_create(&jb) != 0)
        goto out;
    size_t len = 0, hdr_end = 0;
    long long clen = -1;
    int hv = SRV_HTTP_NEED;
    while (hv == SRV_HTTP_NEED) {
        if (wait_fd(fd, POLLIN, deadline) != 0)
            goto out;
        ssize_t r = recv(fd, buf + len, RPC_HDR_MAX - len, MSG_DONTWAIT);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0)
            goto out;
        len += (size_t)r;
        buf[len] = '\0';
        hv = srv_http_head(buf, len, RPC_HDR_MAX, RPC_BODY_MAX, &hdr_end, &clen);
    }
    if (hv == SRV_HTTP_HEAD_BIG) {
        http_reply(fd, 431, "Request Header Fields Too Large", "", 0, deadline);
        goto out;
    }
    if (hv == SRV_HTTP_NOT_POST) {
        static const char msg[] = "{\"error\":\"use POST with a JSON-RPC 2.0 body\"}";
        http_reply(fd, 405, "Method Not Allowed", msg, sizeof msg - 1, deadline);
        goto out;
    }
    if (hv != SRV_HTTP_OK) {
        static const char msg[] = "{\"error\":\"a Content-Length up to 1 MiB is required\"}";
        int missing = hv == SRV_HTTP_NO_LENGTH;
        http_reply(fd, missing ? 411 : 413, missing ? "Length Required" : "Payload Too Large", msg,
                   sizeof msg - 1, deadline);
        goto out;
    }
    size_t want = hdr_end + (size_t)clen;
    while (len < want) {
        if (wait_fd(fd, POLLIN, deadline) != 0)
            goto out;
        ssize_t r = recv(fd, buf + len, want - len, MSG_DONTWAIT);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0)
            goto out;
        len += (size_t)r;
    }
    struct rpc_req r;
    int prc = srv_rpc_parse(buf + hdr_end, (size_t)clen, dec, &r);
    if (prc == -2) {
        rpc_error(fd, jb, -32600, "Invalid Request: batches are not supported", NULL, 0, deadline);
        goto out;
    }
    if (prc != 0) {
        rpc_error(fd, jb, -32700, "Parse error", NULL, 0, deadline);
        goto out;
    }
    if (!r.version_ok || !r.has_method) {
        rpc_error(fd, jb, -32600, "Invalid Request: needs \"jsonrpc\":\"2.0\" and a method", r.id,
                  r.id_len, deadline);
        goto out;
    }
    if (pc_mgmt_cmd_find(m, r.method) == NULL) {
        char msg[128];
        snprintf(msg, sizeof msg, "Method not found: %s", r.method);
        rpc_error(fd, jb, -32601, msg, r.id, r.id_len, deadline);
        goto out;
    }
    if (r.bad_params) {
        rpc_error(fd, jb, -32602,
                  "Invalid params: an object or array of at most 32 strings or numbers", r.id,
                  r.id_len, deadline);
        goto out;
    }
    pc_mgmt_err err;
    const char *text;
    size_t tlen;
    int rc = srv_maint_run_json(s, m, r.method, r.args, r.nargs, &err, &text, &tlen);
    if (rc != 0) {
        rpc_error(fd, jb, rpc_code(rc), err.msg, r.id, r.id_len, deadline);
        goto out;
    }
    if (!r.has_id) { /* a notification: no answer */
        http_reply(fd, 204, "No Content", "", 0, deadline);
        goto out;
    }
    size_t total = tlen + r.id_len + 64;
    char *body = malloc(total);
    if (body != NULL) {
        int n = snprintf(body, total, "{\"jsonrpc\":\"2.0\",\"result\":%.*s,\"id\":%.*s}",
                         (int)tlen, text, (int)r.id_len, r.id);
        http_reply(fd, 200, "OK", body, (size_t)n, deadline);
        free(body);
    }
out:
    pc_json_destroy(jb);
    free(dec);
    free(buf);
}
