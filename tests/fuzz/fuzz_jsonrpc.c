/*
 * fuzz_jsonrpc.c - pcached's JSON-RPC request readers
 * (src/server/jsonrpc_parse.c): the HTTP framing (srv_http_frame, jsonrpc_http.c) and
 * the JSON-RPC body (srv_rpc_parse). The input is what a client sends on
 * the management port: head and body. It is framed as the maintenance
 * process frames it (the head from a NUL-terminated buffer, checked after
 * every "read" of a growing prefix), and its body, when the framing
 * accepts one, is parsed from a heap block of exactly Content-Length
 * bytes. The whole input is also parsed as a bare body.
 *
 * Invariants: verdicts in range; a head is accepted only once it is
 * complete and then ends with its blank line, and an earlier prefix never
 * had a verdict other than NEED; a Content-Length is 0..body_max. A body
 * that parses: the method is 1..PC_MGMT_NAME_MAX bytes without NUL, the id
 * is NUL-terminated JSON scalar text (a number, string, true, false or
 * null) no longer than the body allows, at most PC_MGMT_MAX_ARGS arguments,
 * each name and value no longer than the body, base64-decoded values
 * inside the scratch buffer, and srv_rpc_release frees everything (the
 * ASan build finds a leak).
 */
#include "fuzz_target.h"
#include "resp.h"

#include <string.h>

#define HEAD_MAX 8192u /* jsonrpc.c's RPC_HDR_MAX and RPC_BODY_MAX */
#define BODY_MAX (1u << 20)

static int inside(const void *p, size_t n, const char *base, size_t len)
{
    const char *c = p;
    return n == 0 || (c >= base && c <= base + len && n <= (size_t)(base + len - c));
}

/* The text of an id as JSON scalar text. */
static int json_scalar(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    if (s[0] == '"')
        return n >= 2 && s[n - 1] == '"';
    if ((n == 4 && (memcmp(s, "null", 4) == 0 || memcmp(s, "true", 4) == 0)) ||
        (n == 5 && memcmp(s, "false", 5) == 0))
        return 1;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\0' || strchr("-+.eE0123456789", s[i]) == NULL)
            return 0;
    return 1;
}

static void body(const uint8_t *data, size_t len)
{
    char *b = malloc(len > 0 ? len : 1), *scratch = malloc(len > 0 ? len : 1);
    if (b == NULL || scratch == NULL)
        goto out;
    memcpy(b, data, len);
    struct rpc_req r;
    int rc = srv_rpc_parse(b, len, scratch, &r);
    FUZZ_CHECK(rc == 0 || rc == -1 || rc == -2);
    if (rc != 0)
        goto out;
    FUZZ_CHECK(memchr(r.method, '\0', sizeof r.method) != NULL);
    if (r.has_method) {
        size_t n = strlen(r.method);
        FUZZ_CHECK(n >= 1 && n <= PC_MGMT_NAME_MAX);
    } else {
        FUZZ_CHECK(r.method[0] == '\0');
    }
    if (r.has_id && r.version_ok) { /* an id the server echoes into its answer */
        FUZZ_CHECK(r.id != NULL && r.id_len > 0 && r.id[r.id_len] == '\0');
        FUZZ_CHECK(json_scalar(r.id, r.id_len));
    }
    FUZZ_CHECK(r.nargs <= PC_MGMT_MAX_ARGS);
    for (unsigned i = 0; i < r.nargs; i++) {
        const pc_mgmt_arg *a = &r.args[i];
        FUZZ_CHECK(a->name == NULL || a->nlen <= len);
        FUZZ_CHECK(a->len == 0 || a->val != NULL);
        if (inside(a->val, a->len, (const char *)r.num, sizeof r.num)) /* a number's text */
            FUZZ_CHECK(a->len > 0 && a->len < sizeof r.num[0]);
        else
            FUZZ_CHECK(a->len <= len);
        if ((const char *)a->val >= scratch && (const char *)a->val < scratch + len) /* base64 */
            FUZZ_CHECK(inside(a->val, a->len, scratch, len));
    }
    srv_rpc_release(&r);
out:
    free(b);
    free(scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    body(data, size);

    /* the framing, as jsonrpc.c reads it: a growing prefix, in steps */
    size_t cap = size < HEAD_MAX + BODY_MAX ? size : HEAD_MAX + BODY_MAX;
    char *buf = malloc(cap + 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, cap);
    struct http_req hr;
    const char *why = NULL;
    int v = 0;
    size_t step = size > 0 ? 1 + data[size - 1] % 64 : 1;
    size_t len = 0;
    while (v == 0 && len < cap) {
        len = cap - len < step ? cap : len + step;
        v = srv_http_frame(buf, len, HEAD_MAX, BODY_MAX, &hr, &why);
        FUZZ_CHECK(v == 0 || v == 1 || v == 400 || v == 405 || v == 411 || v == 413 || v == 431 ||
                   v == 501);
        FUZZ_CHECK((v == 0 || v == 1) == (why == NULL));
        if (v == 431)
            FUZZ_CHECK(len >= HEAD_MAX);
    }
    if (v == 1) {
        /* exactly one request: the head, its first blank line, the body */
        FUZZ_CHECK(hr.hdr_end >= 9 && hr.hdr_end + hr.clen == len);
        FUZZ_CHECK(memcmp(buf + hr.hdr_end - 4, "\r\n\r\n", 4) == 0);
        FUZZ_CHECK(memmem(buf, hr.hdr_end, "\r\n\r\n", 4) == buf + hr.hdr_end - 4);
        FUZZ_CHECK((memcmp(buf, "POST ", 5) == 0 && !hr.get && hr.clen <= BODY_MAX) ||
                   (memcmp(buf, "GET ", 4) == 0 && hr.get && hr.clen == 0));
        FUZZ_CHECK(hr.path != NULL && hr.path_len > 0 && hr.path >= buf &&
                   hr.path + hr.path_len < buf + hr.hdr_end);
        if (hr.accept != NULL)
            FUZZ_CHECK(hr.accept >= buf && hr.accept + hr.accept_len <= buf + hr.hdr_end);
        if (hr.auth != NULL) {
            FUZZ_CHECK(hr.auth >= buf && hr.auth + hr.auth_len <= buf + hr.hdr_end);
            (void)srv_http_auth_ok(hr.auth, hr.auth_len, "pw");
        }
        body((const uint8_t *)buf + hr.hdr_end, hr.clen);
    }
    free(buf);
    return 0;
}
