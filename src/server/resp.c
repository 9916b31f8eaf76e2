/*
 * resp.c - the RESP request parser and the reply writers of a worker
 * (RESP2, and RESP3 after HELLO 3: conn.proto).
 *
 * The parser is incremental: it keeps how far it got in the connection
 * (see resp.h), so a command that arrives in many reads is scanned once. It
 * takes the multibulk form (*N then N $len bulks) and the inline form (one
 * line, arguments split on blanks with Redis's quoting: inline_split), like
 * Redis.
 *
 * Limits and what happens past them:
 *  - N above max_args, or a bulk above max_bulk: the command is refused
 *    with an error reply naming the limit, and its remaining bytes are
 *    skipped as they arrive (never buffered), so the connection stays
 *    usable and later pipelined commands are served;
 *  - before AUTH (resp_limits.preauth): more than 10 arguments or a bulk
 *    over 16 KiB is Redis's "unauthenticated multibulk/bulk length"
 *    protocol error, and the connection is closed;
 *  - a malformed header (not a number, negative bulk length or one above
 *    512 MiB, a header line over 32 bytes, a bulk not followed by CRLF, N
 *    above 2^20), an inline
 *    line above max_inline: "-ERR Protocol error: ..." and the connection
 *    is closed, as Redis does, since the stream can no longer be framed.
 */
#include "resp.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESP_HDR_MAX 32 /* bytes in a "*N\r\n" or "$N\r\n" line */
#define RESP_MULTIBULK_HARD (1u << 20)
#define RESP_SKIP_BULK_MAX (1ull << 40) /* a refused bulk may be skipped up to this */
/* Redis's proto-max-bulk-len default, and max_bulk's own maximum: a longer
 * bulk is not a big argument but a broken stream, as Redis answers it. */
#define RESP_BULK_HARD (512ull << 20)

long resp_parse_header(const char *p, size_t avail, int64_t *v)
{
    size_t lim = avail < RESP_HDR_MAX ? avail : RESP_HDR_MAX;
    const char *nl = memchr(p, '\n', lim);
    if (nl == NULL)
        return avail >= RESP_HDR_MAX ? -1 : 0;
    size_t n = (size_t)(nl - p);
    if (n < 3 || p[n - 1] != '\r')
        return -1;
    const char *d = p + 1, *e = p + n - 1;
    int neg = 0;
    if (*d == '-') {
        neg = 1;
        d++;
    }
    if (d == e)
        return -1;
    int64_t x = 0;
    for (; d < e; d++) {
        if (*d < '0' || *d > '9' || x > (INT64_MAX - 9) / 10)
            return -1;
        x = x * 10 + (*d - '0');
    }
    *v = neg ? -x : x;
    return (long)n + 1;
}

static int proto_error(conn *c, const char *what)
{
    reply_error(c, "ERR Protocol error: %s", what);
    c->closing = 1;
    return RESP_PROTO;
}

static int args_reserve(conn *c, size_t n)
{
    if (n <= c->args_cap)
        return 0;
    size_t cap = c->args_cap ? c->args_cap : 16;
    while (cap < n)
        cap *= 2;
    void *p = realloc(c->args, cap * sizeof *c->args);
    if (p == NULL)
        return -1;
    c->args = p;
    c->args_cap = (unsigned)cap;
    return 0;
}

/* Skips what remains of a refused command. Returns 1 when done, 0 when more
 * bytes are needed, RESP_PROTO on a malformed header. */
static int skip_refused(conn *c)
{
    while (c->discard_bytes > 0 || c->discard_bulks > 0) {
        size_t avail = c->in.len - c->in.off;
        if (c->discard_bytes > 0) {
            size_t k = avail < c->discard_bytes ? avail : (size_t)c->discard_bytes;
            c->in.off += k;
            c->discard_bytes -= k;
            if (c->discard_bytes > 0) {
                c->want = 1;
                return 0;
            }
            continue;
        }
        int64_t len;
        long h = resp_parse_header(c->in.p + c->in.off, avail, &len);
        if (h == 0) {
            c->want = avail + 1;
            return 0;
        }
        if (h < 0 || c->in.p[c->in.off] != '$' || len < 0 || (uint64_t)len > RESP_SKIP_BULK_MAX)
            return proto_error(c, "invalid bulk length");
        c->in.off += (size_t)h;
        c->discard_bytes = (uint64_t)len + 2;
        c->discard_bulks--;
    }
    return 1;
}

/* isspace() in the C locale, as Redis's sdssplitargs uses it */
static int inl_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

static int inl_hex(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Splits one inline line p[0, n) into arguments with Redis's sdssplitargs
 * rules: blanks separate; "double quotes" take the escapes \xHH \n \r \t
 * \b \a and \<any> (that byte); 'single quotes' take \' only; a closing
 * quote must be followed by a blank or the end. A NUL is an ordinary byte
 * (Redis's C-string splitter would end the line there). The
 * arguments are decoded in place (each decoded byte consumes at least one
 * input byte, so the write position never passes the read position) and
 * recorded in c->args. Returns the argument count, -1 for unbalanced
 * quotes, -2 past max_args, -3 out of memory. */
static long inline_split(conn *c, char *p, size_t n, unsigned max_args)
{
#define AT(i) ((i) < n ? p[i] : '\0') /* only for look-ahead that a NUL cannot satisfy */
    size_t r = 0, w = 0;
    c->nargs = 0;
    for (;;) {
        while (r < n && inl_space(p[r]))
            r++;
        if (r >= n)
            break;
        size_t start = w;
        int inq = 0, insq = 0, done = 0;
        while (!done) {
            char ch = AT(r);
            if (inq) {
                if (r >= n) {
                    return -1; /* unterminated */
                } else if (ch == '\\' && AT(r + 1) == 'x' && inl_hex(AT(r + 2)) >= 0 &&
                           inl_hex(AT(r + 3)) >= 0) {
                    p[w++] = (char)(inl_hex(AT(r + 2)) * 16 + inl_hex(AT(r + 3)));
                    r += 3;
                } else if (ch == '\\' && r + 1 < n) {
                    r++;
                    char e = p[r];
                    p[w++] = e == 'n'   ? '\n'
                             : e == 'r' ? '\r'
                             : e == 't' ? '\t'
                             : e == 'b' ? '\b'
                             : e == 'a' ? '\a'
                                        : e;
                } else if (ch == '"') {
                    if (r + 1 < n && !inl_space(p[r + 1]))
                        return -1;
                    done = 1;
                } else {
                    p[w++] = ch;
                }
            } else if (insq) {
                if (r >= n) {
                    return -1;
                } else if (ch == '\\' && AT(r + 1) == '\'') {
                    r++;
                    p[w++] = '\'';
                } else if (ch == '\'') {
                    if (r + 1 < n && !inl_space(p[r + 1]))
                        return -1;
                    done = 1;
                } else {
                    p[w++] = ch;
                }
            } else if (r >= n || ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') {
                done = 1;
            } else if (ch == '"') {
                inq = 1;
            } else if (ch == '\'') {
                insq = 1;
            } else {
                p[w++] = ch;
            }
            if (r < n)
                r++;
        }
        if (c->nargs >= max_args)
            return -2;
        if (args_reserve(c, c->nargs + 1u) != 0)
            return -3;
        c->args[c->nargs].off = start;
        c->args[c->nargs].len = w - start;
        c->nargs++;
    }
    return (long)c->nargs;
#undef AT
}

static int parse_inline(conn *c, const resp_limits *lim)
{
    char *base = c->in.p + c->in.off;
    size_t avail = c->in.len - c->in.off;
    const char *nl = memchr(base, '\n', avail);
    if (nl == NULL) {
        if (avail > lim->max_inline)
            return proto_error(c, "too big inline request");
        c->want = avail + 1;
        return RESP_NEED;
    }
    size_t n = (size_t)(nl - base);
    if (n > lim->max_inline)
        return proto_error(c, "too big inline request");
    /* the arguments are decoded in place: they start at in.off, as the
     * offsets of c->args are relative to it */
    size_t line = n > 0 && base[n - 1] == '\r' ? n - 1 : n;
    long got = inline_split(c, base, line, lim->max_args);
    if (got == -1)
        return proto_error(c, "unbalanced quotes in request");
    if (got == -3)
        return proto_error(c, "out of memory");
    c->ppos = n + 1;
    if (got == -2) {
        resp_consume(c);
        reply_error(c, "ERR too many arguments (max_args is %u)", lim->max_args);
        return RESP_REFUSED;
    }
    c->need_args = c->nargs;
    if (c->nargs == 0) { /* an empty line: nothing to run */
        resp_consume(c);
        return RESP_REFUSED;
    }
    return RESP_CMD;
}

/* The multibulk header "*<n>\r\n" of a new command (or an inline one):
 * RESP_CMD when the arguments may be read (c set up for them), else what
 * resp_parse returns. */
static int parse_head(conn *c, const resp_limits *lim, const char *base, size_t avail)
{
    if (avail == 0) {
        c->want = 1;
        return RESP_NEED;
    }
    if (base[0] != '*')
        return parse_inline(c, lim);
    int64_t n;
    long h = resp_parse_header(base, avail, &n);
    if (h == 0) {
        c->want = avail + 1;
        return RESP_NEED;
    }
    if (h < 0 || n > (int64_t)RESP_MULTIBULK_HARD)
        return proto_error(c, "invalid multibulk length");
    if (lim->preauth && n > RESP_PREAUTH_ARGS)
        return proto_error(c, "unauthenticated multibulk length");
    if (n <= 0) { /* "*0" / "*-1": nothing to run */
        c->in.off += (size_t)h;
        return RESP_REFUSED;
    }
    if ((uint64_t)n > lim->max_args) {
        c->in.off += (size_t)h;
        c->discard_bulks = (uint64_t)n;
        reply_error(c, "ERR too many arguments: %" PRId64 " (max_args is %u)", n, lim->max_args);
        int r = skip_refused(c);
        if (r == RESP_PROTO)
            return r;
        return RESP_REFUSED;
    }
    if (args_reserve(c, (size_t)n) != 0)
        return proto_error(c, "out of memory");
    c->need_args = n;
    c->nargs = 0;
    c->bulk_len = -1;
    c->ppos = (size_t)h;
    return RESP_CMD;
}

/* A bulk of len bytes (its header h bytes) past max_bulk or max_request:
 * what was parsed is dropped, this bulk and the rest are skipped as they
 * arrive, and the client gets Redis's error. RESP_REFUSED or RESP_PROTO. */
static int refuse_bulk(conn *c, const resp_limits *lim, long h, int64_t len)
{
    c->in.off += c->ppos + (size_t)h;
    c->discard_bytes = (uint64_t)len + 2;
    c->discard_bulks = (uint64_t)(c->need_args - (int64_t)c->nargs - 1);
    c->need_args = -1;
    c->ppos = 0;
    if ((uint64_t)len > lim->max_bulk)
        /* Redis's words for a string past its limit (APPEND,
         * SETRANGE); max_bulk is its proto-max-bulk-len */
        reply_error(c,
                    "ERR string exceeds maximum allowed size (an argument of %" PRId64
                    " bytes; max_bulk is %u)",
                    len, lim->max_bulk);
    else
        reply_error(c, "ERR request too large: more than %" PRIu64 " bytes (max_request_mb)",
                    lim->max_request);
    int r = skip_refused(c);
    if (r == RESP_PROTO)
        return r;
    return RESP_REFUSED;
}

int resp_parse(conn *c, const resp_limits *lim)
{
    if (c->discard_bytes > 0 || c->discard_bulks > 0) {
        int r = skip_refused(c);
        if (r != 1)
            return r;
        c->need_args = -1;
        c->ppos = 0;
    }
    const char *base = c->in.p + c->in.off;
    size_t avail = c->in.len - c->in.off;
    if (c->need_args < 0) {
        int r = parse_head(c, lim, base, avail);
        if (r != RESP_CMD)
            return r;
    }
    while ((int64_t)c->nargs < c->need_args) {
        if (c->bulk_len < 0) {
            int64_t len;
            long h = resp_parse_header(base + c->ppos, avail - c->ppos, &len);
            if (h == 0) {
                c->want = avail + 1;
                return RESP_NEED;
            }
            if (base[c->ppos] != '$') {
                char msg[64];
                unsigned char ch = (unsigned char)base[c->ppos];
                snprintf(msg, sizeof msg, "expected '$', got '%c'",
                         ch >= 32 && ch < 127 ? ch : '?');
                return proto_error(c, msg);
            }
            if (h < 0 || len < 0 || (uint64_t)len > RESP_BULK_HARD)
                return proto_error(c, "invalid bulk length");
            if (lim->preauth && len > RESP_PREAUTH_BULK)
                return proto_error(c, "unauthenticated bulk length");
            if ((uint64_t)len > lim->max_bulk || c->ppos + (uint64_t)len > lim->max_request)
                return refuse_bulk(c, lim, h, len);
            c->bulk_len = len;
            c->ppos += (size_t)h;
        }
        size_t blen = (size_t)c->bulk_len;
        if (avail - c->ppos < blen + 2) {
            c->want = c->ppos + blen + 2;
            return RESP_NEED;
        }
        if (base[c->ppos + blen] != '\r' || base[c->ppos + blen + 1] != '\n')
            return proto_error(c, "bulk not terminated by CRLF");
        c->args[c->nargs].off = c->ppos;
        c->args[c->nargs].len = blen;
        c->nargs++;
        c->ppos += blen + 2;
        c->bulk_len = -1;
    }
    return RESP_CMD;
}

void resp_consume(conn *c)
{
    c->in.off += c->ppos;
    c->ppos = 0;
    c->need_args = -1;
    c->bulk_len = -1;
    c->nargs = 0;
    c->want = 0;
}

/* ---- replies ---------------------------------------------------------------- */

void out_add(conn *c, const void *p, size_t n)
{
    sbuf *b = &c->out;
    if (n == 0 || c->mute)
        return;
    if (b->cap - b->len < n) {
        if (b->off > 0 && b->off == b->len) {
            b->off = b->len = 0;
        } else if (b->off > 0 && b->off >= b->cap / 2) {
            memmove(b->p, b->p + b->off, b->len - b->off);
            b->len -= b->off;
            b->off = 0;
        }
    }
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 16384;
        while (cap - b->len < n)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (q == NULL) {
            c->closing = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

void reply_ok(conn *c)
{
    out_add(c, "+OK\r\n", 5);
}

void reply_simple(conn *c, const char *s)
{
    out_add(c, "+", 1);
    out_add(c, s, strlen(s));
    out_add(c, "\r\n", 2);
}

void resp_sanitize(char *dst, size_t cap, const char *src, size_t n)
{
    /* Redis prints an argument with "%.Ns" of its C string: the bytes up to
     * the first NUL, as they are (reply_error turns CR and LF into blanks) */
    size_t j = 0;
    for (size_t i = 0; i < n && j + 1 < cap && src[i] != '\0'; i++)
        dst[j++] = src[i];
    if (cap > 0)
        dst[j] = '\0';
}

void reply_error(conn *c, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    size_t len = (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    for (size_t i = 0; i < len; i++) /* an error is one line, whatever it quotes */
        if (msg[i] == '\r' || msg[i] == '\n')
            msg[i] = ' ';
    /* the code Redis's errorstats counts: the first word */
    size_t k = 0;
    while (k < len && k + 1 < sizeof c->errcode && msg[k] != ' ') {
        c->errcode[k] = msg[k];
        k++;
    }
    c->errcode[k] = '\0';
    c->nerr++;
    out_add(c, "-", 1);
    out_add(c, msg, len);
    out_add(c, "\r\n", 2);
}

/* Hot path (every GET reply): "<t><decimal>\r\n" without printf. */
static void reply_prefixed(conn *c, char t, int64_t v)
{
    char buf[32], *e = buf + sizeof buf, *p = e;
    *--p = '\n';
    *--p = '\r';
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        *--p = '-';
    *--p = t;
    out_add(c, p, (size_t)(e - p));
}

void reply_int(conn *c, int64_t v)
{
    reply_prefixed(c, ':', v);
}

void reply_bulk(conn *c, const void *p, size_t n)
{
    reply_prefixed(c, '$', (int64_t)n);
    out_add(c, p, n);
    out_add(c, "\r\n", 2);
}

void reply_nil(conn *c)
{
    if (c->proto == 3)
        out_add(c, "_\r\n", 3);
    else
        out_add(c, "$-1\r\n", 5);
}

void reply_array(conn *c, int64_t n)
{
    reply_prefixed(c, '*', n);
}

void reply_nil_array(conn *c)
{
    if (c->proto == 3)
        out_add(c, "_\r\n", 3);
    else
        out_add(c, "*-1\r\n", 5);
}

void reply_map(conn *c, int64_t pairs)
{
    if (c->proto == 3)
        reply_prefixed(c, '%', pairs);
    else
        reply_prefixed(c, '*', pairs * 2);
}

void reply_set(conn *c, int64_t n)
{
    reply_prefixed(c, c->proto == 3 ? '~' : '*', n);
}

void reply_double(conn *c, double d)
{
    /* Redis 7.0's addReplyDouble: "%.17g" (inf / -inf spelled out) */
    char buf[64];
    int n;
    if (d != d)
        n = snprintf(buf, sizeof buf, "nan");
    else if (d > 1.7976931348623157e308)
        n = snprintf(buf, sizeof buf, "inf");
    else if (d < -1.7976931348623157e308)
        n = snprintf(buf, sizeof buf, "-inf");
    else
        n = snprintf(buf, sizeof buf, "%.17g", d);
    if (n < 0 || (size_t)n >= sizeof buf)
        n = 0;
    if (c->proto == 3) {
        out_add(c, ",", 1);
        out_add(c, buf, (size_t)n);
        out_add(c, "\r\n", 2);
    } else {
        reply_bulk(c, buf, (size_t)n);
    }
}

void reply_verbatim(conn *c, const char *txt, size_t n)
{
    if (c->proto != 3) {
        reply_bulk(c, txt, n);
        return;
    }
    reply_prefixed(c, '=', (int64_t)n + 4);
    out_add(c, "txt:", 4);
    out_add(c, txt, n);
    out_add(c, "\r\n", 2);
}

void reply_bulk_str(conn *c, const char *s)
{
    reply_bulk(c, s, strlen(s));
}
