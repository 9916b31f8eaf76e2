/*
 * mgmt_json.c - the JSON backend of the result builder: compact JSON text in
 * a growing buffer, for pcached's JSON-RPC replies, the docs and the tests.
 *
 * Byte strings follow the one convention (pcache_mgmt.h, mgmt_text.c): text
 * as a standard JSON string, anything else as base64 under "<name>_b64" (or
 * {"b64":...} in an array), so any standard JSON reader gets the bytes back
 * without a private unescaping rule. The writer keeps a small stack of open containers to
 * place commas and to refuse misuse (a member without a name, a value after
 * the root closed); the first failure sticks and is reported by
 * pc_json_text, so a host can run a command and check the document once.
 * It is not a parser.
 */
#include "mgmt_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PC_JSON_DEPTH 32u
#define PC_JSON_NAME_MAX 64u /* a builder member name that may gain "_b64" */

struct pc_json {
    char *buf;
    size_t len, cap;
    int err;                    /* first failure, sticky */
    unsigned depth;             /* open containers */
    bool root_done;             /* the root value is complete */
    bool any[PC_JSON_DEPTH];    /* container d has a member already */
    bool is_obj[PC_JSON_DEPTH]; /* container d is an object */
};

static int pc_json_fail(pc_json *j, int rc)
{
    if (j->err == 0)
        j->err = rc;
    return rc;
}

static int pc_json_reserve(pc_json *j, size_t more)
{
    if (j->len + more + 1 <= j->cap)
        return 0;
    size_t cap = j->cap ? j->cap : 256;
    while (cap < j->len + more + 1) {
        if (cap > SIZE_MAX / 2)
            return pc_json_fail(j, PC_EHEAP);
        cap *= 2;
    }
    char *b = realloc(j->buf, cap);
    if (b == NULL)
        return pc_json_fail(j, PC_EHEAP);
    j->buf = b;
    j->cap = cap;
    return 0;
}

static int pc_json_put(pc_json *j, const void *s, size_t n)
{
    int rc = pc_json_reserve(j, n);
    if (rc != 0)
        return rc;
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
    return 0;
}

/* Appends s, which is text (pc_text_ok) or an ASCII name, as a quoted,
 * escaped JSON string. */
static int pc_json_put_str(pc_json *j, const void *str, size_t len)
{
    const unsigned char *s = str;
    int rc = pc_json_reserve(j, len + 2); /* the common case: nothing to escape */
    if (rc == 0)
        rc = pc_json_put(j, "\"", 1);
    for (size_t i = 0; rc == 0 && i < len;) {
        size_t run = i; /* a run of bytes copied as they are */
        while (run < len && (s[run] >= 0x80 ||
                             (s[run] >= 0x20 && s[run] < 0x7f && s[run] != '"' && s[run] != '\\')))
            run++; /* UTF-8 is copied as it is: the caller checked it */
        if (run > i) {
            rc = pc_json_put(j, s + i, run - i);
            i = run;
            continue;
        }
        unsigned char c = s[i++];
        char e[6] = {'\\', 0, 0, 0, 0, 0};
        size_t el = 2;
        switch (c) {
        case '"':
            e[1] = '"';
            break;
        case '\\':
            e[1] = '\\';
            break;
        case '\b':
            e[1] = 'b';
            break;
        case '\f':
            e[1] = 'f';
            break;
        case '\n':
            e[1] = 'n';
            break;
        case '\r':
            e[1] = 'r';
            break;
        case '\t':
            e[1] = 't';
            break;
        default: /* other control bytes and DEL */
            memcpy(e + 1, "u00", 3);
            e[4] = pc_hex_digit(c >> 4);
            e[5] = pc_hex_digit(c);
            el = 6;
        }
        rc = pc_json_put(j, e, el);
    }
    if (rc == 0)
        rc = pc_json_put(j, "\"", 1);
    return rc;
}

/* Everything a value needs before it: a comma, and "name": in an object.
 * The name is a byte string (nlen bytes) or NULL inside arrays. */
static int pc_json_pre(pc_json *j, const void *name, size_t nlen)
{
    if (j->err != 0)
        return j->err;
    if (j->depth == 0) {
        if (j->root_done)
            return pc_json_fail(j, PC_EINVAL); /* a second root value */
        return 0;
    }
    unsigned d = j->depth - 1;
    int rc = 0;
    if (j->any[d])
        rc = pc_json_put(j, ",", 1);
    j->any[d] = true;
    if (rc == 0 && j->is_obj[d]) {
        if (name == NULL)
            return pc_json_fail(j, PC_EINVAL);
        rc = pc_json_put_str(j, name, nlen);
        if (rc == 0)
            rc = pc_json_put(j, ":", 1);
    }
    return rc;
}

static void pc_json_after(pc_json *j)
{
    if (j->depth == 0)
        j->root_done = true;
}

static int pc_json_scalar(pc_json *j, const char *name, const char *text, size_t n)
{
    int rc = pc_json_pre(j, name, name ? strlen(name) : 0);
    if (rc == 0)
        rc = pc_json_put(j, text, n);
    if (rc == 0)
        pc_json_after(j);
    return rc;
}

static int pc_json_open(void *rctx, const char *name, bool obj)
{
    pc_json *j = rctx;
    int rc = pc_json_pre(j, name, name ? strlen(name) : 0);
    if (rc != 0)
        return rc;
    if (j->depth >= PC_JSON_DEPTH)
        return pc_json_fail(j, PC_EINVAL);
    j->is_obj[j->depth] = obj;
    j->any[j->depth] = false;
    j->depth++;
    return pc_json_put(j, obj ? "{" : "[", 1);
}

static int pc_json_close(void *rctx, bool obj)
{
    pc_json *j = rctx;
    if (j->err != 0)
        return j->err;
    if (j->depth == 0 || j->is_obj[j->depth - 1] != obj)
        return pc_json_fail(j, PC_EINVAL);
    j->depth--;
    int rc = pc_json_put(j, obj ? "}" : "]", 1);
    if (rc == 0)
        pc_json_after(j);
    return rc;
}

static int pc_json_obj_begin(void *rctx, const char *name)
{
    return pc_json_open(rctx, name, true);
}

static int pc_json_obj_end(void *rctx)
{
    return pc_json_close(rctx, true);
}

static int pc_json_arr_begin(void *rctx, const char *name)
{
    return pc_json_open(rctx, name, false);
}

static int pc_json_arr_end(void *rctx)
{
    return pc_json_close(rctx, false);
}

/* Appends "<base64 of s>" (quoted). */
static int pc_json_put_b64(pc_json *j, const void *s, size_t len)
{
    size_t n = pc_b64_len(len), w;
    if (len > SIZE_MAX / 2)
        return pc_json_fail(j, PC_ETOOBIG);
    int rc = pc_json_reserve(j, n + 2);
    if (rc != 0)
        return rc;
    j->buf[j->len++] = '"';
    rc = pc_b64_encode(s, len, j->buf + j->len, j->cap - j->len, &w);
    if (rc != 0)
        return pc_json_fail(j, rc);
    j->len += w;
    j->buf[j->len++] = '"';
    j->buf[j->len] = '\0';
    return 0;
}

/* A byte string by the one convention (pcache_mgmt.h): "name":"text",
 * "name_b64":"base64", or in an array "text" / {"b64":"base64"}. */
static int pc_json_bytes(pc_json *j, const void *name, size_t nlen, const void *s, size_t len)
{
    if (s == NULL && len > 0)
        return pc_json_fail(j, PC_EINVAL);
    bool text = pc_text_ok(s, len);
    int rc;
    if (text || (j->depth > 0 && j->is_obj[j->depth - 1])) {
        char nm[PC_JSON_NAME_MAX + 5];
        if (!text) { /* the member's name gains "_b64" */
            if (nlen > PC_JSON_NAME_MAX)
                return pc_json_fail(j, PC_EINVAL);
            memcpy(nm, name, nlen);
            memcpy(nm + nlen, "_b64", 4);
            name = nm;
            nlen += 4;
        }
        rc = pc_json_pre(j, name, nlen);
        if (rc == 0)
            rc = text ? pc_json_put_str(j, s, len) : pc_json_put_b64(j, s, len);
    } else {
        rc = pc_json_pre(j, NULL, 0);
        if (rc == 0)
            rc = pc_json_put(j, "{\"b64\":", 7);
        if (rc == 0)
            rc = pc_json_put_b64(j, s, len);
        if (rc == 0)
            rc = pc_json_put(j, "}", 1);
    }
    if (rc == 0)
        pc_json_after(j);
    return rc;
}

static int pc_json_str(void *rctx, const char *name, const void *s, size_t len)
{
    return pc_json_bytes(rctx, name, name ? strlen(name) : 0, s, len);
}

static int pc_json_i64(void *rctx, const char *name, int64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%" PRId64, v);
    return pc_json_scalar(rctx, name, t, (size_t)n);
}

static int pc_json_u64(void *rctx, const char *name, uint64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%" PRIu64, v);
    return pc_json_scalar(rctx, name, t, (size_t)n);
}

static int pc_json_dbl(void *rctx, const char *name, double v)
{
    char t[40];
    if (!isfinite(v))
        return pc_json_scalar(rctx, name, "null", 4);
    int n = snprintf(t, sizeof t, "%.15g", v);
    for (int i = 0; i < n; i++) /* a locale may have written ',' */
        if (t[i] == ',')
            t[i] = '.';
    return pc_json_scalar(rctx, name, t, (size_t)n);
}

static int pc_json_bool(void *rctx, const char *name, int v)
{
    return pc_json_scalar(rctx, name, v ? "true" : "false", v ? 4 : 5);
}

static int pc_json_null(void *rctx, const char *name)
{
    return pc_json_scalar(rctx, name, "null", 4);
}

static const pc_result_ops pc_json_ops_tab = {
    .obj_begin = pc_json_obj_begin,
    .obj_end = pc_json_obj_end,
    .arr_begin = pc_json_arr_begin,
    .arr_end = pc_json_arr_end,
    .str = pc_json_str,
    .i64 = pc_json_i64,
    .u64 = pc_json_u64,
    .dbl = pc_json_dbl,
    .boolean = pc_json_bool,
    .null = pc_json_null,
};

const pc_result_ops *pc_json_ops(void)
{
    return &pc_json_ops_tab;
}

int pc_json_create(pc_json **out)
{
    if (out == NULL)
        return PC_EINVAL;
    pc_json *j = calloc(1, sizeof *j);
    if (j == NULL)
        return PC_EHEAP;
    *out = j;
    return 0;
}

void pc_json_destroy(pc_json *j)
{
    if (j == NULL)
        return;
    free(j->buf);
    free(j);
}

void pc_json_reset(pc_json *j)
{
    if (j == NULL)
        return;
    j->len = 0;
    if (j->buf != NULL)
        j->buf[0] = '\0';
    j->err = 0;
    j->depth = 0;
    j->root_done = false;
}

int pc_json_text(const pc_json *j, const char **text, size_t *len)
{
    if (j == NULL || text == NULL || len == NULL)
        return PC_EINVAL;
    if (j->err != 0)
        return j->err;
    if (j->depth != 0 || !j->root_done)
        return PC_EINVAL;
    *text = j->buf;
    *len = j->len;
    return 0;
}

int pc_json_member_bin(pc_json *j, const void *name, size_t nlen, const void *v, size_t vlen)
{
    if ((name == NULL && nlen > 0) || (v == NULL && vlen > 0))
        return pc_json_fail(j, PC_EINVAL);
    if (name == NULL)
        name = "";
    if (pc_text_ok(name, nlen)) {
        if (pc_text_ok(v, vlen))
            return pc_json_bytes(j, name, nlen, v, vlen);
        /* "key":{"b64":"..."} */
        int rc = pc_json_pre(j, name, nlen);
        if (rc == 0)
            rc = pc_json_put(j, "{\"b64\":", 7);
        if (rc == 0)
            rc = pc_json_put_b64(j, v, vlen);
        if (rc == 0)
            rc = pc_json_put(j, "}", 1);
        if (rc == 0)
            pc_json_after(j);
        return rc;
    }
    /* A key that is not text: the member is named by its base64 and its
     * value is an object {"key_b64":...,"value"|"value_b64":...}, never a
     * string or a {"b64"} object, so a reader tells the two forms apart. */
    if (j->err != 0)
        return j->err;
    if (j->depth == 0 || !j->is_obj[j->depth - 1])
        return pc_json_fail(j, PC_EINVAL);
    int rc = 0;
    if (j->any[j->depth - 1])
        rc = pc_json_put(j, ",", 1);
    j->any[j->depth - 1] = true;
    if (rc == 0 && (rc = pc_json_put_b64(j, name, nlen)) == 0 &&
        (rc = pc_json_put(j, ":{", 2)) == 0 && (rc = pc_json_put(j, "\"key_b64\":", 10)) == 0 &&
        (rc = pc_json_put_b64(j, name, nlen)) == 0 && (rc = pc_json_put(j, ",", 1)) == 0) {
        if (pc_text_ok(v, vlen))
            rc = pc_json_put(j, "\"value\":", 8) == 0 ? pc_json_put_str(j, v, vlen) : j->err;
        else
            rc = pc_json_put(j, "\"value_b64\":", 12) == 0 ? pc_json_put_b64(j, v, vlen) : j->err;
    }
    if (rc == 0)
        rc = pc_json_put(j, "}", 1);
    if (rc == 0)
        pc_json_after(j);
    return rc;
}

int pc_json_take(pc_json *j, char **text, size_t *len)
{
    const char *t;
    size_t n;
    int rc = pc_json_text(j, &t, &n);
    if (rc != 0)
        return rc;
    *text = j->buf;
    *len = n;
    j->buf = NULL;
    j->cap = 0;
    pc_json_reset(j);
    return 0;
}
