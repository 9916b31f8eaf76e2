/*
 * jsonrpc_parse.c - the JSON-RPC 2.0 request reader of pcached: one
 * request object into a method name, an id (its raw JSON text) and the
 * management arguments. It treats the body as hostile: every read is
 * checked against the end of the buffer, nesting is bounded (32 levels),
 * at most PC_MGMT_MAX_ARGS arguments are taken. Decoded strings go to a
 * scratch buffer at least as long as the body (a decoded string is never
 * longer than its JSON form). The wire rules are docs/pcached.md, §4.
 * Before it, srv_http_frame (jsonrpc_http.c) frames the HTTP request.
 */
#include "pcached.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
        int d = pc_hex_val((unsigned char)p[i]);
        if (d < 0)
            return -1;
        *v = *v * 16 + (unsigned)d;
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
        case '"':
            o[k++] = '"';
            break;
        case '\\':
            o[k++] = '\\';
            break;
        case '/':
            o[k++] = '/';
            break;
        case 'b':
            o[k++] = '\b';
            break;
        case 'f':
            o[k++] = '\f';
            break;
        case 'n':
            o[k++] = '\n';
            break;
        case 'r':
            o[k++] = '\r';
            break;
        case 't':
            o[k++] = '\t';
            break;
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
        /* A number's text is only these bytes; the NUL test matters:
         * strchr finds a NUL byte as the set's terminator, which let NUL
         * bytes of the body into an id or an argument. */
        while (j->p < j->end && *j->p != '\0' && strchr("-+.eE0123456789", *j->p) != NULL)
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
        if (obj) /* strict JSON: a member named twice is refused, not "last wins" */
            for (unsigned i = 0; i < r->nargs; i++)
                if (r->args[i].name != NULL && r->args[i].nlen == nlen &&
                    memcmp(r->args[i].name, name, nlen) == 0)
                    r->duplicate = 1;
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

int srv_rpc_parse(const char *body, size_t len, char *scratch, struct rpc_req *r)
{
    struct jp jj = {body, body + len, scratch, 0};
    struct jp *j = &jj;
    memset(r, 0, sizeof *r);
    ws(j);
    if (j->p >= j->end || *j->p != '{')
        return j->p < j->end && *j->p == '[' ? -2 : -1;
    j->p++;
    ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        ws(j);
        return j->p == j->end ? 0 : -1; /* nothing may follow the object */
    }
    const char *seen[32];
    size_t seen_len[32];
    unsigned nseen = 0;
    for (;;) {
        const char *key;
        size_t klen;
        ws(j);
        if (jstring(j, &key, &klen) != 0)
            return -1;
        /* strict JSON: a member named twice is refused, not "last wins"
         * (decoded names stay in scratch: jstring only appends there) */
        for (unsigned i = 0; i < nseen; i++)
            if (seen_len[i] == klen && memcmp(seen[i], key, klen) == 0)
                r->duplicate = 1;
        if (nseen == 32)
            return -1; /* a request object has four members */
        seen[nseen] = key;
        seen_len[nseen++] = klen;
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
