/*
 * mgmt_core.c - the command context: the registry of commands, and the one
 * parameter machinery that binds a call's arguments to a command's
 * declarative parameter table, parses and checks every value, resolves the
 * collection, and only then runs the command.
 *
 * Binding, in three passes so that the outcome does not depend on the order
 * the caller wrote things in: named arguments first (unknown or repeated
 * names are errors), then positional arguments fill, in declaration order,
 * the parameters not given by name, then every parameter is checked:
 * present or defaulted or, if required, an error. Nothing reaches the
 * command until every argument has parsed, so a bad argument changes
 * nothing. Messages name the command, the parameter and the offending
 * value (quoted, non-printable bytes as \xNN) and, where it helps, the
 * usage line or the accepted range.
 */
#include "mgmt_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *pc_mgmt_strerror(int err)
{
    switch (err) {
    case PC_EURL: /* the text it was released with; db_url and store URLs too */
        return "malformed perf:// URL";
    default:
        return pc_strerror(err);
    }
}

int pc_mgmt_errorf(pc_mgmt_err *err, int code, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

char *pc_mgmt_quote(char *buf, size_t cap, const void *s, size_t len)
{
    const unsigned char *p = s;
    size_t o = 0, i = 0;
    if (cap < 16) {
        if (cap > 0)
            buf[0] = '\0';
        return buf;
    }
    size_t stop = cap - 8; /* room for \xNN, "..." and the NUL */
    if (stop > 48 * 4)
        stop = 48 * 4;
    buf[o++] = '"';
    for (; i < len && i < 48 && o + 4 < stop; i++) {
        unsigned char c = p[i];
        if (c == '"' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)c;
        } else if (c >= 0x20 && c < 0x7f) {
            buf[o++] = (char)c;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = pc_hex_digit(c >> 4);
            buf[o++] = pc_hex_digit(c);
        }
    }
    buf[o++] = '"';
    if (i < len) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

/* "perf_keys glob [collection] [limit]" into buf. */
static const char *pc_mgmt_usage(const pc_mgmt_cmd *cmd, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "%s", cmd->name);
    for (unsigned i = 0; i < cmd->nparams && o < cap; i++) {
        const pc_mgmt_param *p = &cmd->params[i];
        o += (size_t)snprintf(buf + o, cap - o, p->required ? " %s" : " [%s]", p->name);
    }
    return buf;
}

/* Parses a non-negative decimal. 0 ok, 1 not a number, 2 negative or past
 * UINT64_MAX. */
static int pc_mgmt_parse_u64(const char *s, size_t len, uint64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (len > 0 && (s[0] == '-' || s[0] == '+')) {
        neg = s[0] == '-';
        i = 1;
    }
    if (i == len)
        return 1;
    uint64_t v = 0;
    bool over = false;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            over = true;
        else
            v = v * 10 + d;
    }
    if (over || (neg && v != 0))
        return 2;
    *out = v;
    return 0;
}

/* Names of the declared collections, ", "-separated, into buf. */
static const char *pc_mgmt_coll_names(const pc_mgmt *m, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < pc_coll_count(m->c) && o + 1 < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "",
                              pc_coll_name(pc_coll_at(m->c, i)));
    return buf;
}

int pc_mgmt_parse_value(const pc_mgmt *m, const char *cmd, const pc_mgmt_param *p, const void *v,
                        size_t len, struct pc_mgmt_val *out, pc_mgmt_err *err)
{
    char q[PC_MGMT_QUOTE_CAP];
    uint64_t u = 0;
    int rc;
    out->p = v;
    out->len = len;
    out->present = true;
    switch (p->type) {
    case PC_MP_STRING:
        if (len > p->max)
            return pc_mgmt_errorf(err, PC_ETOOBIG,
                                  "%s: parameter \"%s\": %zu bytes, longer than the %" PRIu64
                                  "-byte limit",
                                  cmd, p->name, len, p->max);
        return 0;
    case PC_MP_GLOB:
        rc = pc_glob_check(v, len);
        if (rc == PC_ETOOBIG)
            return pc_mgmt_errorf(err, rc,
                                  "%s: parameter \"%s\": glob longer than %u bytes (%zu bytes)",
                                  cmd, p->name, PC_GLOB_MAX, len);
        if (rc != 0)
            return pc_mgmt_errorf(err, PC_EINVAL,
                                  "%s: parameter \"%s\": malformed glob %s: an unterminated "
                                  "'[' set or a trailing '\\' (escape a literal one as \\[ or "
                                  "\\\\)",
                                  cmd, p->name, pc_mgmt_quote(q, sizeof q, v, len));
        return 0;
    case PC_MP_UINT:
    case PC_MP_TTL:
        rc = pc_mgmt_parse_u64(v, len, &u);
        if (rc == 1)
            return pc_mgmt_errorf(err, PC_EINVAL, "%s: parameter \"%s\": not an integer: %s", cmd,
                                  p->name, pc_mgmt_quote(q, sizeof q, v, len));
        if (p->type == PC_MP_TTL && (rc == 2 || u > p->max))
            return pc_mgmt_errorf(err, PC_EINVAL,
                                  "%s: parameter \"%s\": out of range [0, %" PRIu64
                                  "] seconds (0 = never expires): %s",
                                  cmd, p->name, p->max, pc_mgmt_quote(q, sizeof q, v, len));
        if (rc == 2 || u < p->min || u > p->max)
            return pc_mgmt_errorf(
                err, PC_EINVAL, "%s: parameter \"%s\": out of range [%" PRIu64 ", %" PRIu64 "]: %s",
                cmd, p->name, p->min, p->max, pc_mgmt_quote(q, sizeof q, v, len));
        out->u = u;
        return 0;
    case PC_MP_CURSOR:
        if (pc_mgmt_parse_u64(v, len, &u) != 0 || ((const char *)v)[0] == '+' ||
            ((const char *)v)[0] == '-')
            return pc_mgmt_errorf(err, PC_EINVAL,
                                  "%s: malformed cursor %s: expected 0 to start a scan or the "
                                  "cursor a previous perf_scan returned",
                                  cmd, pc_mgmt_quote(q, sizeof q, v, len));
        out->u = u;
        return 0;
    case PC_MP_COLL:
    case PC_MP_COLL_ALL:
        if (pc_coll_find(m->c, v, len, &out->coll) != 0) {
            char names[256];
            return pc_mgmt_errorf(err, PC_ENOCOLL, "%s: unknown collection %s (declared: %s)", cmd,
                                  pc_mgmt_quote(q, sizeof q, v, len),
                                  pc_mgmt_coll_names(m, names, sizeof names));
        }
        return 0;
    }
    return pc_mgmt_errorf(err, PC_EINVAL, "%s: parameter \"%s\": unknown type %d", cmd, p->name,
                          p->type);
}

static bool pc_mgmt_ident(const char *s, size_t n)
{
    if (n == 0 || n > PC_MGMT_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || c == '_' || (c >= '0' && c <= '9' && i > 0) ||
              (c >= 'A' && c <= 'Z')))
            return false;
    }
    return true;
}

/* Checks one command's table; 0 or PC_EINVAL. */
static int pc_mgmt_check_cmd(const pc_mgmt *m, const pc_mgmt_cmd *cmd)
{
    if (cmd->name == NULL || !pc_mgmt_ident(cmd->name, strlen(cmd->name)) || cmd->run == NULL ||
        cmd->nparams > PC_MGMT_MAX_PARAMS || (cmd->nparams > 0 && cmd->params == NULL))
        return PC_EINVAL;
    for (unsigned i = 0; i < cmd->nparams; i++) {
        const pc_mgmt_param *p = &cmd->params[i];
        if (p->name == NULL || !pc_mgmt_ident(p->name, strlen(p->name)) || p->type < PC_MP_STRING ||
            p->type > PC_MP_COLL_ALL || (p->required && p->def) || p->min > p->max)
            return PC_EINVAL;
        if ((p->type == PC_MP_COLL || p->type == PC_MP_COLL_ALL) && p->def != NULL)
            return PC_EINVAL;
        for (unsigned k = 0; k < i; k++)
            if (strcmp(cmd->params[k].name, p->name) == 0)
                return PC_EINVAL;
        struct pc_mgmt_val v;
        if (p->def != NULL &&
            pc_mgmt_parse_value(m, cmd->name, p, p->def, strlen(p->def), &v, NULL) != 0)
            return PC_EINVAL;
    }
    return 0;
}

int pc_mgmt_register(pc_mgmt *m, const pc_mgmt_cmd *cmd)
{
    if (m == NULL || cmd == NULL || pc_mgmt_check_cmd(m, cmd) != 0)
        return PC_EINVAL;
    if (pc_mgmt_cmd_find(m, cmd->name) != NULL)
        return PC_EEXIST;
    if (m->ncmds == m->capcmds) {
        unsigned cap = m->capcmds ? m->capcmds * 2 : 16;
        pc_mgmt_cmd *a = realloc(m->cmds, cap * sizeof *a);
        if (a == NULL)
            return PC_EHEAP;
        m->cmds = a;
        m->capcmds = cap;
    }
    m->cmds[m->ncmds++] = *cmd;
    return 0;
}

unsigned pc_mgmt_cmd_count(const pc_mgmt *m)
{
    return m == NULL ? 0 : m->ncmds;
}

const pc_mgmt_cmd *pc_mgmt_cmd_at(const pc_mgmt *m, unsigned i)
{
    return m == NULL || i >= m->ncmds ? NULL : &m->cmds[i];
}

const pc_mgmt_cmd *pc_mgmt_cmd_find(const pc_mgmt *m, const char *name)
{
    for (unsigned i = 0; m != NULL && name != NULL && i < m->ncmds; i++)
        if (strcmp(m->cmds[i].name, name) == 0)
            return &m->cmds[i];
    return NULL;
}

int pc_mgmt_create(pc_cache *c, const char *default_coll, pc_mgmt **out)
{
    if (c == NULL || out == NULL)
        return PC_EINVAL;
    const char *dn = default_coll != NULL ? default_coll : "default";
    pc_coll *def = NULL;
    int rc = pc_coll_find(c, dn, strlen(dn), &def);
    if (rc != 0)
        return rc;
    pc_mgmt *m = calloc(1, sizeof *m);
    if (m == NULL)
        return PC_EHEAP;
    m->c = c;
    m->def = def;
    for (unsigned i = 0; rc == 0 && i < pc_mgmt_nbuiltins; i++)
        rc = pc_mgmt_register(m, &pc_mgmt_builtins[i]);
    if (rc != 0) {
        pc_mgmt_destroy(m);
        return rc;
    }
    *out = m;
    return 0;
}

void pc_mgmt_destroy(pc_mgmt *m)
{
    if (m == NULL)
        return;
    free(m->cmds);
    free(m);
}

pc_cache *pc_mgmt_cache(const pc_mgmt *m)
{
    return m == NULL ? NULL : m->c;
}

pc_coll *pc_mgmt_default_coll(const pc_mgmt *m)
{
    return m == NULL ? NULL : m->def;
}

int pc_mgmt_stats_hook(pc_mgmt *m, pc_mgmt_stats_fn fn, void *ctx)
{
    if (m == NULL)
        return PC_EINVAL;
    m->stats_fn = fn;
    m->stats_ctx = fn ? ctx : NULL;
    return 0;
}

/* Binds args to cmd's parameters and parses them into call. */
static int pc_mgmt_bind(pc_mgmt *m, const pc_mgmt_cmd *cmd, const pc_mgmt_arg *args, unsigned nargs,
                        struct pc_mgmt_call *call, pc_mgmt_err *err)
{
    const pc_mgmt_arg *slot[PC_MGMT_MAX_PARAMS] = {0};
    char q[PC_MGMT_QUOTE_CAP], usage[256];
    memset(call, 0, sizeof *call);
    call->m = m;
    call->cmd = cmd;
    for (unsigned a = 0; a < nargs; a++) {
        if (args[a].name == NULL)
            continue;
        unsigned i = 0;
        while (i < cmd->nparams && (strlen(cmd->params[i].name) != args[a].nlen ||
                                    memcmp(cmd->params[i].name, args[a].name, args[a].nlen) != 0))
            i++;
        if (i == cmd->nparams)
            return pc_mgmt_errorf(err, PC_EINVAL, "%s: unknown parameter name %s (usage: %s)",
                                  cmd->name, pc_mgmt_quote(q, sizeof q, args[a].name, args[a].nlen),
                                  pc_mgmt_usage(cmd, usage, sizeof usage));
        if (slot[i] != NULL)
            return pc_mgmt_errorf(err, PC_EINVAL, "%s: parameter \"%s\" given twice", cmd->name,
                                  cmd->params[i].name);
        slot[i] = &args[a];
    }
    unsigned next = 0;
    for (unsigned a = 0; a < nargs; a++) {
        if (args[a].name != NULL)
            continue;
        while (next < cmd->nparams && slot[next] != NULL)
            next++;
        if (next == cmd->nparams)
            return pc_mgmt_errorf(err, PC_EINVAL,
                                  "%s: too many positional parameters: %s is extra (usage: %s)",
                                  cmd->name, pc_mgmt_quote(q, sizeof q, args[a].val, args[a].len),
                                  pc_mgmt_usage(cmd, usage, sizeof usage));
        slot[next++] = &args[a];
    }
    for (unsigned i = 0; i < cmd->nparams; i++) {
        const pc_mgmt_param *p = &cmd->params[i];
        struct pc_mgmt_val *v = &call->v[i];
        int rc = 0;
        if (slot[i] != NULL) {
            v->given = true;
            rc = pc_mgmt_parse_value(m, cmd->name, p, slot[i]->val, slot[i]->len, v, err);
        } else if (p->required) {
            rc = pc_mgmt_errorf(err, PC_EINVAL, "%s: missing required parameter \"%s\" (usage: %s)",
                                cmd->name, p->name, pc_mgmt_usage(cmd, usage, sizeof usage));
        } else if (p->def != NULL) {
            rc = pc_mgmt_parse_value(m, cmd->name, p, p->def, strlen(p->def), v, err);
        } else if (p->type == PC_MP_COLL) {
            v->coll = m->def;
            v->present = true;
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

static bool pc_mgmt_ops_ok(const pc_result_ops *o)
{
    return o != NULL && o->obj_begin && o->obj_end && o->arr_begin && o->arr_end && o->str &&
           o->i64 && o->u64 && o->dbl && o->boolean && o->null;
}

int pc_mgmt_run(pc_mgmt *m, const char *cmd, const pc_mgmt_arg *args, unsigned nargs,
                const pc_result_ops *ops, void *rctx, pc_mgmt_err *err)
{
    char q[PC_MGMT_QUOTE_CAP];
    if (m == NULL || cmd == NULL || (args == NULL && nargs > 0) || !pc_mgmt_ops_ok(ops))
        return pc_mgmt_errorf(err, PC_EINVAL, "pc_mgmt_run: invalid arguments");
    if (nargs > PC_MGMT_MAX_ARGS)
        return pc_mgmt_errorf(err, PC_EINVAL, "%s: too many arguments (%u, at most %u)", cmd, nargs,
                              PC_MGMT_MAX_ARGS);
    const pc_mgmt_cmd *c = pc_mgmt_cmd_find(m, cmd);
    if (c == NULL) {
        char names[512];
        size_t o = 0;
        names[0] = '\0';
        for (unsigned i = 0; i < m->ncmds && o + 1 < sizeof names; i++)
            o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", i ? ", " : "",
                                  m->cmds[i].name);
        return pc_mgmt_errorf(err, PC_EINVAL, "unknown command %s (commands: %s)",
                              pc_mgmt_quote(q, sizeof q, cmd, strlen(cmd)), names);
    }
    for (unsigned a = 0; a < nargs; a++)
        if ((args[a].val == NULL && args[a].len > 0) || (args[a].name == NULL && args[a].nlen > 0))
            return pc_mgmt_errorf(err, PC_EINVAL, "%s: argument %u: NULL pointer", cmd, a + 1);
    struct pc_mgmt_call call;
    pc_mgmt_err e; /* err is written only on failure */
    e.msg[0] = '\0';
    int rc = pc_mgmt_bind(m, c, args, nargs, &call, &e);
    if (rc == 0) {
        rc = c->run(c->ctx, &call, ops, rctx, &e);
        if (rc > 0)
            rc = PC_EINVAL; /* a command must return 0 or a PC_E* code */
        if (rc != 0 && e.msg[0] == '\0')
            pc_mgmt_errorf(&e, rc, "%s: %s", c->name, pc_mgmt_strerror(rc));
    }
    if (rc != 0 && err != NULL) {
        *err = e;
        err->code = rc;
    }
    return rc;
}

/* ---- call accessors ------------------------------------------------------ */
pc_mgmt *pc_mgmt_call_mgmt(const pc_mgmt_call *call)
{
    return call->m;
}

int pc_mgmt_call_given(const pc_mgmt_call *call, unsigned i)
{
    return i < PC_MGMT_MAX_PARAMS && call->v[i].given;
}

const void *pc_mgmt_call_bytes(const pc_mgmt_call *call, unsigned i, size_t *len)
{
    if (i >= PC_MGMT_MAX_PARAMS || !call->v[i].present) {
        *len = 0;
        return NULL;
    }
    *len = call->v[i].len;
    return call->v[i].p != NULL ? call->v[i].p : "";
}

uint64_t pc_mgmt_call_uint(const pc_mgmt_call *call, unsigned i)
{
    return i < PC_MGMT_MAX_PARAMS ? call->v[i].u : 0;
}

pc_coll *pc_mgmt_call_coll(const pc_mgmt_call *call, unsigned i)
{
    return i < PC_MGMT_MAX_PARAMS ? call->v[i].coll : NULL;
}
