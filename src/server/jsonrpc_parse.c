/*
 * jsonrpc_parse.c - the JSON-RPC 2.0 request reader of pcached: one
 * request object into a method name, an id (its JSON text) and the
 * management arguments. The body is parsed by jansson (strict RFC 8259:
 * UTF-8 input, a member named twice refused, nothing after the value;
 * \u0000 allowed inside strings), so any standard JSON encoder's output is
 * read as that encoder meant it: "na\u00efve" is the UTF-8 bytes of
 * "naïve". Bytes that are not text travel in base64 by the one convention
 * (pcache_mgmt.h): a named parameter "<name>_b64":"<base64>" stands for
 * <name>, a positional {"b64":"<base64>"} for its bytes. Decoded base64
 * goes to a scratch buffer at least as long as the body (base64 is always
 * longer than what it encodes). The wire rules are docs/pcached.md,
 * "JSON-RPC". Before it, srv_http_frame (jsonrpc_http.c) frames the HTTP
 * request.
 */
#include "pcached.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rpc_scratch {
    char *p;
    size_t used, cap;
};

/* One argument value v (a scalar, or {"b64":...} when positional) into a;
 * b64 says the value is base64 text to decode. Returns 0, or sets r's
 * bad_params / bad_b64 and returns 0 (the request is answered with an
 * error), or -1 (no memory). */
static void rpc_arg(struct rpc_req *r, struct rpc_scratch *sc, const char *name, size_t nlen,
                    json_t *v, int b64)
{
    const char *val = NULL;
    size_t len = 0;
    if (json_is_null(v))
        return;                                      /* the argument omitted */
    if (!b64 && name == NULL && json_is_object(v)) { /* positional {"b64":"..."} */
        json_t *e = json_object_get(v, "b64");
        if (json_object_size(v) != 1 || e == NULL) {
            r->bad_params = 1;
            return;
        }
        v = e;
        b64 = 1;
    }
    if (r->nargs >= PC_MGMT_MAX_ARGS) {
        r->bad_params = 1;
        return;
    }
    char *num = r->num[r->nargs];
    if (b64) {
        size_t out;
        if (!json_is_string(v) || pc_b64_decode(json_string_value(v), json_string_length(v),
                                                sc->p + sc->used, sc->cap - sc->used, &out) != 0) {
            r->bad_b64 = 1;
            return;
        }
        val = sc->p + sc->used;
        len = out;
        sc->used += out;
    } else if (json_is_string(v)) {
        val = json_string_value(v);
        len = json_string_length(v);
    } else if (json_is_integer(v)) {
        len =
            (size_t)snprintf(num, sizeof r->num[0], "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        val = num;
    } else if (json_is_real(v)) {
        len = (size_t)snprintf(num, sizeof r->num[0], "%.17g", json_real_value(v));
        val = num;
    } else if (json_is_boolean(v)) {
        val = json_is_true(v) ? "1" : "0";
        len = 1;
    } else {
        r->bad_params = 1; /* an object or an array */
        return;
    }
    r->args[r->nargs++] = (pc_mgmt_arg){name, nlen, val, len};
}

static void rpc_params(struct rpc_req *r, struct rpc_scratch *sc, json_t *p)
{
    if (json_is_array(p)) {
        size_t i;
        json_t *v;
        json_array_foreach(p, i, v) rpc_arg(r, sc, NULL, 0, v, 0);
        return;
    }
    if (!json_is_object(p)) {
        r->bad_params = 1;
        return;
    }
    for (void *it = json_object_iter(p); it != NULL; it = json_object_iter_next(p, it)) {
        const char *name = json_object_iter_key(it);
        size_t nlen = json_object_iter_key_len(it);
        int b64 = nlen > 4 && memcmp(name + nlen - 4, "_b64", 4) == 0;
        if (b64) {
            nlen -= 4;
            /* "key" and "key_b64" together name one parameter twice */
            for (void *o = json_object_iter(p); o != NULL; o = json_object_iter_next(p, o))
                if (json_object_iter_key_len(o) == nlen &&
                    memcmp(json_object_iter_key(o), name, nlen) == 0)
                    r->duplicate = 1;
        }
        rpc_arg(r, sc, name, nlen, json_object_iter_value(it), b64);
    }
}

int srv_rpc_parse(const char *body, size_t len, char *scratch, struct rpc_req *r)
{
    memset(r, 0, sizeof *r);
    json_error_t e;
    json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
    if (doc == NULL) {
        if (json_error_code(&e) == json_error_duplicate_key) {
            r->duplicate = 1; /* strict JSON: a member named twice is refused, not "last wins" */
            return 0;
        }
        return -1;
    }
    if (json_is_array(doc)) {
        json_decref(doc);
        return -2;
    }
    if (!json_is_object(doc)) {
        json_decref(doc);
        return -1;
    }
    r->doc = doc;
    struct rpc_scratch sc = {scratch, 0, len};
    json_t *v = json_object_get(doc, "jsonrpc");
    r->version_ok = json_is_string(v) && json_string_length(v) == 3 &&
                    memcmp(json_string_value(v), "2.0", 3) == 0;
    v = json_object_get(doc, "method");
    if (json_is_string(v)) {
        size_t n = json_string_length(v);
        const char *m = json_string_value(v);
        if (n > 0 && n <= PC_MGMT_NAME_MAX && memchr(m, '\0', n) == NULL) {
            memcpy(r->method, m, n);
            r->method[n] = '\0';
            r->has_method = 1;
        }
    }
    if ((v = json_object_get(doc, "params")) != NULL)
        rpc_params(r, &sc, v);
    if ((v = json_object_get(doc, "id")) != NULL) {
        r->has_id = 1;
        if (json_is_object(v) || json_is_array(v)) {
            r->version_ok = 0; /* an id must be a scalar: invalid request */
        } else {
            r->id_text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            if (r->id_text == NULL) {
                srv_rpc_release(r);
                return -3;
            }
            r->id = r->id_text;
            r->id_len = strlen(r->id_text);
        }
    }
    return 0;
}

void srv_rpc_release(struct rpc_req *r)
{
    if (r == NULL)
        return;
    json_decref(r->doc);
    free(r->id_text);
    r->doc = NULL;
    r->id_text = NULL;
    r->id = NULL;
    r->id_len = 0;
    r->nargs = 0;
}
