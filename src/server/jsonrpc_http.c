/*
 * jsonrpc_http.c - the HTTP framing of the management door (docs/pcached.md
 * §4): where the request's header ends, how long its body is, and the
 * credentials it carries. Pure functions over bytes from the network,
 * every read bounded by the buffer's length.
 *
 * Why strict: the door sits behind HTTP proxies and health checkers as
 * well as curl. Two Content-Length headers that disagree (or agree), a
 * Transfer-Encoding, or bytes after the body are how request smuggling
 * starts; a server that picks one reading is the one a proxy disagrees
 * with. So each of them is refused with 400/501, never interpreted.
 */
#include "pcached.h"

#include <string.h>
#include <strings.h>

/* A header line [p, e) (no CRLF) named name (case-insensitive): its value,
 * leading and trailing blanks stripped, or NULL. */
static const char *hdr_value(const char *p, const char *e, const char *name, size_t *vlen)
{
    size_t n = strlen(name);
    if ((size_t)(e - p) <= n || strncasecmp(p, name, n) != 0 || p[n] != ':')
        return NULL;
    const char *v = p + n + 1;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    const char *ve = e;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    *vlen = (size_t)(ve - v);
    return v;
}

/* The header lines from first to end (the blank line's CR): the ones
 * pcached reads into r, *have_len and *clen; 0, or the HTTP status that
 * refuses the request with *why. */
static int http_headers(const char *first, const char *end, struct http_req *r, int *have_len,
                        unsigned long long *clen, const char **why)
{
    for (const char *p = first; p < end;) {
        const char *e = memmem(p, (size_t)(end + 2 - p), "\r\n", 2);
        if (e == NULL)
            e = end;
        if (memchr(p, '\0', (size_t)(e - p)) != NULL || memchr(p, '\r', (size_t)(e - p)) ||
            memchr(p, '\n', (size_t)(e - p))) {
            *why = "a header line holds a NUL or a bare CR or LF";
            return 400;
        }
        if (p < e && (*p == ' ' || *p == '\t')) {
            *why = "folded header lines are not accepted";
            return 400;
        }
        size_t vl = 0;
        const char *v;
        if ((v = hdr_value(p, e, "Content-Length", &vl)) != NULL) {
            if (*have_len) {
                *why = "more than one Content-Length";
                return 400;
            }
            *have_len = 1;
            if (vl == 0 || vl > 10) {
                *why = "a Content-Length up to 1 MiB is required";
                return vl == 0 ? 400 : 413;
            }
            for (size_t i = 0; i < vl; i++) {
                if (v[i] < '0' || v[i] > '9') {
                    *why = "Content-Length is not a number";
                    return 400;
                }
                *clen = *clen * 10 + (unsigned)(v[i] - '0');
            }
        } else if ((v = hdr_value(p, e, "Transfer-Encoding", &vl)) != NULL) {
            *why = "Transfer-Encoding is not supported: send a Content-Length";
            return 501;
        } else if ((v = hdr_value(p, e, "Accept", &vl)) != NULL) {
            r->accept = v;
            r->accept_len = vl;
        } else if ((v = hdr_value(p, e, "Authorization", &vl)) != NULL) {
            if (r->auth != NULL) {
                *why = "more than one Authorization";
                return 400;
            }
            r->auth = v;
            r->auth_len = vl;
        }
        p = e + 2;
    }
    return 0;
}

int srv_http_frame(const char *buf, size_t len, size_t max_hdr, size_t max_body, struct http_req *r,
                   const char **why)
{
    memset(r, 0, sizeof *r);
    *why = NULL;
    const char *end = memmem(buf, len < max_hdr ? len : max_hdr, "\r\n\r\n", 4);
    if (end == NULL) {
        if (len >= max_hdr) {
            *why = "request header too large";
            return 431;
        }
        /* say no early to what cannot become a POST or a GET */
        if ((len >= 5 && memcmp(buf, "POST ", 5) != 0 && memcmp(buf, "GET ", 4) != 0) ||
            (len >= 4 && len < 5 && memcmp(buf, "POST", 4) != 0 && memcmp(buf, "GET ", 4) != 0)) {
            *why = "use POST with a JSON-RPC 2.0 body, or GET /metrics or /health";
            return 405;
        }
        return 0;
    }
    r->hdr_end = (size_t)(end - buf) + 4;
    const char *line_end = memmem(buf, r->hdr_end, "\r\n", 2);
    size_t mlen;
    if (r->hdr_end >= 5 && memcmp(buf, "POST ", 5) == 0) {
        mlen = 5;
    } else if (r->hdr_end >= 4 && memcmp(buf, "GET ", 4) == 0) {
        mlen = 4;
        r->get = 1;
    } else {
        *why = "use POST with a JSON-RPC 2.0 body, or GET /metrics or /health";
        return 405;
    }
    /* "POST <path> HTTP/1.x" or "GET <path> HTTP/1.x" */
    const char *sp = memchr(buf + mlen, ' ', (size_t)(line_end - (buf + mlen)));
    if (sp == NULL || sp == buf + mlen || line_end - sp != 9 ||
        (memcmp(sp + 1, "HTTP/1.1", 8) != 0 && memcmp(sp + 1, "HTTP/1.0", 8) != 0)) {
        *why = "a request line 'POST <path> HTTP/1.1' is required";
        return 400;
    }
    r->path = buf + mlen;
    r->path_len = (size_t)(sp - (buf + mlen));
    if (memchr(r->path, '\0', r->path_len) != NULL) {
        *why = "a NUL byte in the request line";
        return 400;
    }
    int have_len = 0;
    unsigned long long clen = 0;
    int st = http_headers(line_end + 2, end, r, &have_len, &clen, why);
    if (st != 0)
        return st;
    if (r->get) { /* a GET has no body */
        if (have_len && clen != 0) {
            *why = "a GET carries no body";
            return 400;
        }
        if (len > r->hdr_end) {
            *why = "bytes after the request: one request per connection";
            return 400;
        }
        return 1;
    }
    if (!have_len) {
        *why = "a Content-Length up to 1 MiB is required";
        return 411;
    }
    if (clen > max_body) {
        *why = "a Content-Length up to 1 MiB is required";
        return 413;
    }
    r->clen = (size_t)clen;
    if (len < r->hdr_end + r->clen)
        return 0;
    if (len > r->hdr_end + r->clen) {
        *why = "bytes after the body: one request per connection";
        return 400;
    }
    return 1;
}

/* Decodes standard base64 (with padding) of src into out (cap bytes);
 * returns the length, or -1 when it is not base64 or does not fit. */
static long b64_decode(const char *src, size_t n, char *out, size_t cap)
{
    if (n % 4 != 0)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        unsigned v = 0, pad = 0;
        for (size_t k = 0; k < 4; k++) {
            char c = src[i + k];
            int d;
            if (c >= 'A' && c <= 'Z')
                d = c - 'A';
            else if (c >= 'a' && c <= 'z')
                d = c - 'a' + 26;
            else if (c >= '0' && c <= '9')
                d = c - '0' + 52;
            else if (c == '+')
                d = 62;
            else if (c == '/')
                d = 63;
            else if (c == '=' && i + 4 == n && k >= 2)
                d = 0, pad++;
            else
                return -1;
            if (pad > 0 && c != '=')
                return -1;
            v = v << 6 | (unsigned)d;
        }
        size_t bytes = 3 - pad;
        if (o + bytes > cap)
            return -1;
        out[o++] = (char)(v >> 16);
        if (bytes > 1)
            out[o++] = (char)(v >> 8 & 0xff);
        if (bytes > 2)
            out[o++] = (char)(v & 0xff);
    }
    return (long)o;
}

int srv_http_auth_ok(const char *auth, size_t len, const char *pw)
{
    if (auth == NULL)
        return 0;
    if (len > 7 && strncasecmp(auth, "Bearer ", 7) == 0)
        return srv_secret_eq(auth + 7, len - 7, pw);
    if (len > 6 && strncasecmp(auth, "Basic ", 6) == 0) {
        char dec[768];
        long n = b64_decode(auth + 6, len - 6, dec, sizeof dec);
        const char *colon = n > 0 ? memchr(dec, ':', (size_t)n) : NULL;
        if (colon == NULL)
            return 0;
        colon++;
        return srv_secret_eq(colon, (size_t)(dec + n - colon), pw);
    }
    return 0;
}

int srv_secret_eq(const char *a, size_t an, const char *b)
{
    size_t bn = strlen(b);
    unsigned char d = an != bn;
    for (size_t i = 0; i < an; i++)
        d |= (unsigned char)(a[i] ^ b[i % (bn ? bn : 1)]);
    return d == 0;
}
