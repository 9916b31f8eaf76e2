/*
 * fuzz_resp.c - pcached's RESP request parser (src/server/resp.c): whole-
 * request framing, inline and multibulk, with the limits that refuse a
 * command (then skip it) or close the connection. The input is the byte
 * stream a client sends.
 *
 * The stream is parsed twice with the same limits: once whole, from a heap
 * block of exactly its size, and once in chunks of 1..16 bytes (the size
 * taken from the input's first byte) appended to a buffer that is
 * compacted before every read the way a worker does (worker.c): the two
 * must give the same commands, the same replies and the same verdict. A
 * third pass uses the server's default limits.
 *
 * Invariants: every verdict is RESP_NEED/CMD/REFUSED/PROTO; a command has
 * 1..max_args arguments, each inside the unconsumed input and at most
 * max_bulk bytes (max_inline for the whole line of an inline command);
 * the parse position never passes the input; a protocol error leaves the
 * connection closing; RESP_NEED asks for more than is there.
 */
#include "fuzz_target.h"
#include "resp.h"

#include <string.h>

struct outcome {
    uint64_t hash; /* FNV-1a over the commands, arguments separated */
    unsigned long cmds;
    int proto;
    char *replies; /* the replies the parser queued (malloc'd) */
    size_t rlen;
};

static void hash_bytes(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        *h ^= b[i];
        *h *= 1099511628211ull;
    }
}

/* Runs the parser over c->in until it needs more; 1 when it stopped. */
static int drain(conn *c, const resp_limits *lim, struct outcome *o)
{
    for (;;) {
        size_t before = c->in.off;
        int r = resp_parse(c, lim);
        FUZZ_CHECK(r == RESP_NEED || r == RESP_CMD || r == RESP_REFUSED || r == RESP_PROTO);
        FUZZ_CHECK(c->in.off >= before && c->in.off <= c->in.len);
        size_t avail = c->in.len - c->in.off;
        FUZZ_CHECK(c->ppos <= avail);
        if (r == RESP_CMD) {
            FUZZ_CHECK(c->nargs >= 1 && c->nargs <= lim->max_args);
            const char *base = c->in.p + c->in.off;
            for (unsigned i = 0; i < c->nargs; i++) {
                FUZZ_CHECK(c->args[i].off <= c->ppos && c->args[i].len <= c->ppos - c->args[i].off);
                FUZZ_CHECK(c->args[i].len <= lim->max_bulk || c->args[i].len <= lim->max_inline);
                hash_bytes(&o->hash, base + c->args[i].off, c->args[i].len);
                hash_bytes(&o->hash, i + 1 < c->nargs ? "|" : ";", 1);
            }
            o->cmds++;
            resp_consume(c);
            FUZZ_CHECK(c->in.off <= c->in.len);
            continue;
        }
        if (r == RESP_REFUSED) /* a refused command (answered) or an empty one */
            continue;
        if (r == RESP_PROTO) {
            FUZZ_CHECK(c->closing && c->out.len > c->out.off);
            o->proto = 1;
            return 1;
        }
        FUZZ_CHECK(c->want == 0 || c->want > avail);
        return 0;
    }
}

static void conn_init(conn *c)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->need_args = -1;
    c->bulk_len = -1;
}

static void conn_done(conn *c, struct outcome *o)
{
    o->rlen = c->out.len - c->out.off;
    o->replies = c->out.p; /* freed by the caller */
    if (o->replies != NULL && c->out.off > 0)
        memmove(o->replies, o->replies + c->out.off, o->rlen);
    free(c->args);
}

static void parse_whole(const uint8_t *data, size_t size, const resp_limits *lim, struct outcome *o)
{
    conn c;
    conn_init(&c);
    char *in = malloc(size > 0 ? size : 1);
    if (in != NULL) {
        memcpy(in, data, size);
        c.in.p = in;
        c.in.len = c.in.cap = size;
        drain(&c, lim, o);
    }
    free(in);
    conn_done(&c, o);
}

static void parse_chunked(const uint8_t *data, size_t size, size_t step, const resp_limits *lim,
                          struct outcome *o)
{
    conn c;
    conn_init(&c);
    c.in.cap = size + 1;
    c.in.p = malloc(c.in.cap);
    if (c.in.p == NULL)
        goto out;
    for (size_t fed = 0; fed < size;) {
        /* the worker's compaction: unconsumed bytes to the front */
        size_t un = c.in.len - c.in.off;
        memmove(c.in.p, c.in.p + c.in.off, un);
        c.in.off = 0;
        c.in.len = un;
        size_t k = size - fed < step ? size - fed : step;
        memcpy(c.in.p + c.in.len, data + fed, k);
        c.in.len += k;
        fed += k;
        if (drain(&c, lim, o))
            break;
    }
out:
    free(c.in.p);
    conn_done(&c, o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the first byte's low bit: a connection before AUTH (resp_limits.preauth) */
    int pre = size > 0 && (data[0] & 1);
    const resp_limits small = {8, 64, 128, 1024, pre};
    const resp_limits dflt = {65536, 1u << 20, 64u << 10, 512ull << 20, pre}; /* config.c */
    struct outcome whole = {14695981039346656037ull, 0, 0, NULL, 0};
    struct outcome parts = whole, big = whole;

    parse_whole(data, size, &small, &whole);
    size_t step = size > 0 ? 1 + data[0] % 16 : 1;
    parse_chunked(data, size, step, &small, &parts);
    FUZZ_CHECK(whole.hash == parts.hash && whole.cmds == parts.cmds && whole.proto == parts.proto);
    FUZZ_CHECK(whole.rlen == parts.rlen &&
               (whole.rlen == 0 || memcmp(whole.replies, parts.replies, whole.rlen) == 0));
    parse_whole(data, size, &dflt, &big);
    free(whole.replies);
    free(parts.replies);
    free(big.replies);
    return 0;
}
