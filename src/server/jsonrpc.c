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
 * The parser treats the request as hostile: lengths are checked against
 * the buffer before every read, depth and sizes are bounded.
 */
#include "pcached.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define RPC_HDR_MAX 8192u
#define RPC_BODY_MAX (1u << 20)
#define RPC_DEADLINE_MS 2000

int srv_maint_run_json(srv *s, pc_mgmt *m, const char *cmd, const pc_mgmt_arg *args,
                       unsigned nargs, pc_mgmt_err *err, const char **text, size_t *len);

/* ---- a small JSON reader ------------------------------------------------------ */

struct jp {
    const char *p, *end;
    char *out; /* decoded strings are written here (never longer than the input) */
    size_t out_len;
};

static void ws(struct jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int hex4(const char *p, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 99u;
        if (d > 15)
            return -1;
        *v = *v * 16 + d;
    }
    return 0;
}

/* Parses a string at j->p (at its '"'); the decoded bytes go to j->out. */
static int jstring(struct jp *j, const char **s, size_t *n)
{
    if (j->p >= j->end || *j->p != '"')
        return -1;
    j->p++;
    char *o = j->out + j->out_len;
    size_t k = 0;
    while (j->p < j->end && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p++;
        if (c < 0x20)
            return -1;
        if (c != '\\') {
            o[k++] = (char)c;
            continue;
        }
        if (j->p >= j->end)
            return -1;
        char e = *j->p++;
        switch (e) {
        case '"': o[k++] = '"'; break;
        case '\\': o[k++] = '\\'; break;
        case '/': o[k++] = '/'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'u': {
            unsigned v;
            if (j->end - j->p < 4 || hex4(j->p, &v) != 0)
                return -1;
            j->p += 4;
            if (v <= 0xff) { /* a byte, as the JSON backend escapes it */
                o[k++] = (char)v;
                break;
            }
            if (v >= 0xd800 && v <= 0xdbff) { /* a surrogate pair */
                unsigned lo;
                if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' ||
                    hex4(j->p + 2, &lo) != 0 || lo < 0xdc00 || lo > 0xdfff)
                    return -1;
                j->p += 6;
                v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
            } else if (v >= 0xdc00 && v <= 0xdfff) {
                return -1;
            }
            /* UTF-8: never longer than the 6 or 12 escape bytes it replaces */
            if (v < 0x800) {
                o[k++] = (char)(0xc0 | (v >> 6));
                o[k++] = (char)(0x80 | (v & 0x3f));
            } else if (v < 0x10000) {
                o[k++] = (char)(0xe0 | (v >> 12));
                o[k++] = (char)(0x80 | ((v >> 6) & 0x3f));
                o[k++] = (char)(0x80 | (v & 0x3f));
            } else {
                o[k++] = (char)(0xf0 | (v >> 18));
                o[k++] = (char)(0x80 | ((v >> 12) & 0x3f));
                o[k++] = (char)(0x80 | ((v >> 6) & 0x3f));
                o[k++] = (char)(0x80 | (v & 0x3f));
            }
            break;
        }
        default:
            return -1;
        }
    }
    if (j->p >= j->end)
        return -1;
    j->p++;
    *s = o;
    *n = k;
    j->out_len += k;
    return 0;
}

/* A scalar: number, true, false, null. The raw text is returned. */
static int jscalar(struct jp *j, const char **s, size_t *n, int *is_null)
{
    const char *b = j->p;
    *is_null = 0;
    if (j->end - j->p >= 4 && memcmp(j->p, "null", 4) == 0) {
        j->p += 4;
        *is_null = 1;
    } else if (j->end - j->p >= 4 && memcmp(j->p, "true", 4) == 0) {
        j->p += 4;
        *s = "1";
        *n = 1;
        return 0;
    } else if (j->end - j->p >= 5 && memcmp(j->p, "false", 5) == 0) {
        j->p += 5;
        *s = "0";
        *n = 1;
        return 0;
    } else {
        while (j->p < j->end && strchr("-+.eE0123456789", *j->p) != NULL)
            j->p++;
        if (j->p == b)
            return -1;
    }
    *s = b;
    *n = (size_t)(j->p - b);
    return 0;
}

/* Skips any value (for members we do not use), bounded in depth. */
static int jskip(struct jp *j, int depth)
{
    ws(j);
    if (depth > 32 || j->p >= j->end)
        return -1;
    if (*j->p == '"') {
        const char *s;
        size_t n;
        size_t save = j->out_len;
        int r = jstring(j, &s, &n);
        j->out_len = save;
        return r;
    }
    if (*j->p == '{' || *j->p == '[') {
        char close = *j->p == '{' ? '}' : ']';
        int obj = close == '}';
        j->p++;
        ws(j);
        if (j->p < j->end && *j->p == close) {
            j->p++;
            return 0;
        }
        for (;;) {
            if (obj) {
                ws(j);
                if (jskip(j, depth + 1) != 0)
                    return -1;
                ws(j);
                if (j->p >= j->end || *j->p != ':')
                    return -1;
                j->p++;
            }
            if (jskip(j, depth + 1) != 0)
                return -1;
            ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == close) {
                j->p++;
                return 0;
            }
            return -1;
        }
    }
    const char *s;
    size_t n;
    int nul;
    return jscalar(j, &s, &n, &nul);
}

/* ---- the request ---------------------------------------------------------------- */

struct rpc_req {
    char method[PC_MGMT_NAME_MAX + 1];
    int has_method, has_id, version_ok;
    const char *id; /* raw JSON text of the id */
    size_t id_len;
    pc_mgmt_arg args[PC_MGMT_MAX_ARGS];
    unsigned nargs;
    int bad_params; /* 1: params not an object/array of scalars, or too many */
};

static int parse_params(struct jp *j, struct rpc_req *r)
{
    ws(j);
    if (j->p >= j->end)
        return -1;
    char open = *j->p;
    if (open != '{' && open != '[') {
        r->bad_params = 1;
        return jskip(j, 0);
    }
    int obj = open == '{';
    char close = obj ? '}' : ']';
    j->p++;
    ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return 0;
    }
    for (;;) {
        const char *name = NULL;
        size_t nlen = 0;
        ws(j);
        if (obj) {
            if (jstring(j, &name, &nlen) != 0)
                return -1;
            ws(j);
            if (j->p >= j->end || *j->p != ':')
                return -1;
            j->p++;
        }
        ws(j);
        if (j->p >= j->end)
            return -1;
        const char *v = NULL;
        size_t vlen = 0;
        int is_null = 0;
        if (*j->p == '"') {
            if (jstring(j, &v, &vlen) != 0)
                return -1;
        } else if (*j->p == '{' || *j->p == '[') {
            r->bad_params = 1;
            if (jskip(j, 1) != 0)
                return -1;
            is_null = 1;
        } else if (jscalar(j, &v, &vlen, &is_null) != 0) {
            return -1;
        }
        if (!is_null) {
            if (r->nargs >= PC_MGMT_MAX_ARGS)
                r->bad_params = 1;
            else
                r->args[r->nargs++] = (pc_mgmt_arg){name, nlen, v, vlen};
        }
        ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == close) {
            j->p++;
            return 0;
        }
        return -1;
    }
}

/* 0: parsed (fields may still be missing); -1: not JSON (parse error). */
static int parse_request(struct jp *j, struct rpc_req *r)
{
    ws(j);
    if (j->p >= j->end || *j->p != '{')
        return j->p < j->end && *j->p == '[' ? -2 : -1;
    j->p++;
    ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        return 0;
    }
    for (;;) {
        const char *key;
        size_t klen;
        ws(j);
        if (jstring(j, &key, &klen) != 0)
            return -1;
        ws(j);
        if (j->p >= j->end || *j->p != ':')
            return -1;
        j->p++;
        ws(j);
        if (j->p >= j->end)
            return -1;
        if (klen == 7 && memcmp(key, "jsonrpc", 7) == 0) {
            const char *v;
            size_t n;
            if (*j->p != '"' || jstring(j, &v, &n) != 0)
                return jskip(j, 0) == 0 ? (r->version_ok = 0, 0) : -1;
            r->version_ok = n == 3 && memcmp(v, "2.0", 3) == 0;
        } else if (klen == 6 && memcmp(key, "method", 6) == 0) {
            const char *v;
            size_t n;
            if (*j->p != '"') {
                if (jskip(j, 0) != 0)
                    return -1;
            } else {
                if (jstring(j, &v, &n) != 0)
                    return -1;
                if (n > 0 && n <= PC_MGMT_NAME_MAX && memchr(v, '\0', n) == NULL) {
                    memcpy(r->method, v, n);
                    r->method[n] = '\0';
                    r->has_method = 1;
                }
            }
        } else if (klen == 6 && memcmp(key, "params", 6) == 0) {
            if (parse_params(j, r) != 0)
                return -1;
        } else if (klen == 2 && memcmp(key, "id", 2) == 0) {
            const char *b = j->p;
            if (*j->p == '{' || *j->p == '[') {
                if (jskip(j, 0) != 0)
                    return -1;
                r->has_id = 1; /* an id must be a scalar: invalid request */
                r->version_ok = 0;
            } else {
                if (jskip(j, 0) != 0)
                    return -1;
                r->has_id = 1;
            }
            r->id = b;
            r->id_len = (size_t)(j->p - b);
        } else if (jskip(j, 0) != 0) {
            return -1;
        }
        ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == '}') {
            j->p++;
            ws(j);
            return j->p == j->end ? 0 : -1;
        }
        return -1;
    }
}

/* ---- HTTP ------------------------------------------------------------------------ */

static int64_t rpc_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int wait_fd(int fd, short ev, int64_t deadline)
{
    int64_t left = deadline - rpc_ms();
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
    int64_t deadline = rpc_ms() + RPC_DEADLINE_MS;
    char *buf = malloc(RPC_HDR_MAX + RPC_BODY_MAX + 1);
    char *dec = malloc(RPC_BODY_MAX + 1);
    pc_json *jb = NULL;
    if (buf == NULL || dec == NULL || pc_json_create(&jb) != 0)
        goto out;
    size_t len = 0, hdr_end = 0;
    while (hdr_end == 0) {
        if (len >= RPC_HDR_MAX) {
            http_reply(fd, 431, "Request Header Fields Too Large", "", 0, deadline);
            goto out;
        }
        if (wait_fd(fd, POLLIN, deadline) != 0)
            goto out;
        ssize_t r = recv(fd, buf + len, RPC_HDR_MAX - len, MSG_DONTWAIT);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0)
            goto out;
        len += (size_t)r;
        buf[len] = '\0';
        char *e = memmem(buf, len, "\r\n\r\n", 4);
        if (e != NULL)
            hdr_end = (size_t)(e - buf) + 4;
    }
    if (strncmp(buf, "POST ", 5) != 0) {
        static const char msg[] = "{\"error\":\"use POST with a JSON-RPC 2.0 body\"}";
        http_reply(fd, 405, "Method Not Allowed", msg, sizeof msg - 1, deadline);
        goto out;
    }
    long long clen = -1;
    for (char *h = strstr(buf, "\r\n"); h != NULL && (size_t)(h - buf) < hdr_end - 2;
         h = strstr(h + 2, "\r\n")) {
        if (strncasecmp(h + 2, "Content-Length:", 15) == 0) {
            char *end;
            clen = strtoll(h + 17, &end, 10);
            if (end == h + 17 || (*end != '\r' && *end != ' '))
                clen = -2;
        }
    }
    if (clen < 0 || clen > (long long)RPC_BODY_MAX) {
        static const char msg[] = "{\"error\":\"a Content-Length up to 1 MiB is required\"}";
        http_reply(fd, clen == -1 ? 411 : 413, clen == -1 ? "Length Required" : "Payload Too Large",
                   msg, sizeof msg - 1, deadline);
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
    struct jp j = {buf + hdr_end, buf + want, dec, 0};
    struct rpc_req r;
    memset(&r, 0, sizeof r);
    int prc = parse_request(&j, &r);
    if (prc == -2) {
        rpc_error(fd, jb, -32600, "Invalid Request: batches are not supported", NULL, 0, deadline);
        goto out;
    }
    if (prc != 0) {
        rpc_error(fd, jb, -32700, "Parse error", NULL, 0, deadline);
        goto out;
    }
    if (!r.version_ok || !r.has_method) {
        rpc_error(fd, jb, -32600, "Invalid Request: needs \"jsonrpc\":\"2.0\" and a method",
                  r.id, r.id_len, deadline);
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
