/*
 * cmd_client.c - the connection's own state as Redis 7.0 shows it: HELLO
 * (RESP2 / RESP3), AUTH with the `default` user, CLIENT (ID, INFO, LIST,
 * KILL, SETNAME, GETNAME, NO-EVICT, REPLY, GETREDIR, HELP) and RESET
 * (docs/pcached.md, "Connections").
 *
 * CLIENT LIST and CLIENT KILL see the connections of every worker: the
 * worker's own from its list, the other workers' from their client tables
 * in shared memory (clients_shm.c); a kill of another worker's connection
 * marks its entry and wakes that worker, which closes it. Client ids come
 * from one counter in shared memory, so they are unique across the
 * workers of an instance.
 *
 * The replies and errors are those of redis-server 7.0.15, checked side by
 * side byte for byte (tests/server/test_hello.py).
 */
#include "resp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* ---- authentication ---------------------------------------------------------- */

/* Whether user/pass open the `default` user, the only one pcached has: with
 * no requirepass any password does, as Redis's `nopass` default user. */
static int auth_ok(const srv_worker *w, const char *user, size_t ul, const char *pass, size_t pl)
{
    if (!arg_eq(user, ul, "default"))
        return 0;
    const char *pw = w->s->cfg.requirepass;
    return pw[0] == '\0' || srv_secret_eq(pass, pl, pw);
}

static void reply_wrongpass(conn *c)
{
    reply_error(c, "WRONGPASS invalid username-password pair or user is disabled.");
}

void cmd_auth(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    if (argc > 3) {
        reply_error(c, "ERR syntax error");
        return;
    }
    if (argc == 2 && w->s->cfg.requirepass[0] == '\0') {
        reply_error(c, "ERR AUTH <password> called without any password configured for the "
                       "default user. Are you sure your configuration is correct?");
        return;
    }
    const char *user = argc == 3 ? argv[1] : "default";
    size_t ul = argc == 3 ? argl[1] : 7;
    if (auth_ok(w, user, ul, argv[argc - 1], argl[argc - 1])) {
        c->authed = 1;
        reply_ok(c);
    } else {
        reply_wrongpass(c);
    }
}

/* ---- names --------------------------------------------------------------------- */

/* Redis's validateClientName: printable ASCII without blanks. */
static int name_valid(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] < '!' || p[i] > '~')
            return 0;
    return 1;
}

/* Sets (or with an empty name, clears) the connection's name. Returns 0,
 * or -1 with an error reply queued. */
static int set_name(conn *c, const char *p, size_t n)
{
    if (!name_valid(p, n)) {
        reply_error(c, "ERR Client names cannot contain spaces, newlines or special characters.");
        return -1;
    }
    char *copy = NULL;
    if (n > 0) {
        copy = malloc(n + 1);
        if (copy == NULL) {
            reply_error(c, "ERR out of memory");
            return -1;
        }
        memcpy(copy, p, n);
        copy[n] = '\0';
    }
    free(c->name);
    c->name = copy;
    srv_ctab_update(c);
    return 0;
}

/* ---- HELLO ------------------------------------------------------------------------- */

void cmd_hello(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    int64_t ver = 0;
    unsigned j = 1;
    if (argc >= 2) {
        if (arg_i64(argv[1], argl[1], &ver) != 0) {
            reply_error(c, "ERR Protocol version is not an integer or out of range");
            return;
        }
        j = 2;
        if (ver < 2 || ver > 3) {
            reply_error(c, "NOPROTO unsupported protocol version");
            return;
        }
    }
    const char *user = NULL, *pass = NULL;
    size_t ul = 0, pl = 0;
    for (; j < argc; j++) {
        unsigned more = argc - 1 - j;
        if (arg_eq(argv[j], argl[j], "AUTH") && more >= 2) {
            user = argv[j + 1], ul = argl[j + 1];
            pass = argv[j + 2], pl = argl[j + 2];
            j += 2;
        } else if (arg_eq(argv[j], argl[j], "SETNAME") && more >= 1) {
            /* as 7.0.15: the name is set as it is read, even when a later
             * option is refused */
            if (set_name(c, argv[j + 1], argl[j + 1]) != 0)
                return;
            j++;
        } else {
            char opt[130];
            resp_sanitize(opt, sizeof opt, argv[j], argl[j]);
            reply_error(c, "ERR Syntax error in HELLO option '%s'", opt);
            return;
        }
    }
    if (user != NULL) {
        if (!auth_ok(w, user, ul, pass, pl)) {
            reply_wrongpass(c);
            return;
        }
        c->authed = 1;
    }
    if (w->s->cfg.requirepass[0] != '\0' && !c->authed) {
        reply_error(c, "NOAUTH HELLO must be called with the client already authenticated, "
                       "otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
                       "authenticate the client and select the RESP protocol version at the "
                       "same time");
        return;
    }
    if (ver != 0) {
        c->proto = (int)ver;
        srv_ctab_update(c);
    }
    reply_map(c, 7);
    reply_bulk_str(c, "server");
    reply_bulk_str(c, "redis");
    reply_bulk_str(c, "version");
    reply_bulk_str(c, SRV_REDIS_VERSION);
    reply_bulk_str(c, "proto");
    reply_int(c, c->proto == 3 ? 3 : 2);
    reply_bulk_str(c, "id");
    reply_int(c, (int64_t)c->id);
    reply_bulk_str(c, "mode");
    reply_bulk_str(c, "standalone");
    reply_bulk_str(c, "role");
    reply_bulk_str(c, "master");
    reply_bulk_str(c, "modules");
    reply_array(c, 0);
}

/* ---- RESET -------------------------------------------------------------------------- */

void cmd_reset(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)argc, (void)argv, (void)argl;
    cmd_txn_reset_conn(c); /* leaves MULTI, drops the watches (cmd_txn.c) */
    c->proto = 2;
    c->db = 0;
    c->coll = w->dbcoll[0];
    free(c->name);
    c->name = NULL;
    c->no_evict = 0;
    c->reply_mode = 0;
    c->mute = 0;
    c->authed = w->s->cfg.requirepass[0] == '\0';
    srv_ctab_update(c);
    reply_simple(c, "RESET");
}

/* ---- CLIENT ---------------------------------------------------------------------------- */

/* The values of one CLIENT LIST line. */
struct line_vals {
    uint64_t id;
    const char *addr, *laddr, *name, *cmd;
    int fd, resp, wpending;
    int64_t age, idle;
    unsigned db;
    size_t qbuf, qfree, argmem, rbs, rbp, omem, tot;
};

/* One CLIENT LIST line, as Redis 7.0 writes it (fields pcached has no
 * counterpart for are written with Redis's value for a plain client). */
static void print_line(conn *out, const struct line_vals *v, char *buf, size_t cap)
{
    char cmd[40];
    size_t i = 0;
    for (; v->cmd[i] && i + 1 < sizeof cmd; i++)
        cmd[i] = (v->cmd[i] >= 'A' && v->cmd[i] <= 'Z') ? (char)(v->cmd[i] + 32) : v->cmd[i];
    cmd[i] = '\0';
    int n = snprintf(buf, cap,
                     "id=%llu addr=%s laddr=%s fd=%d name=%s age=%lld idle=%lld flags=N db=%u "
                     "sub=0 psub=0 ssub=0 multi=-1 qbuf=%zu qbuf-free=%zu argv-mem=%zu "
                     "multi-mem=0 rbs=%zu rbp=%zu obl=0 oll=0 omem=%zu tot-mem=%zu events=r%s "
                     "cmd=%s user=default redir=-1 resp=%d\n",
                     (unsigned long long)v->id, v->addr, v->laddr, v->fd, v->name,
                     (long long)v->age, (long long)v->idle, v->db, v->qbuf, v->qfree, v->argmem,
                     v->rbs, v->rbp, v->omem, v->tot, v->wpending ? "w" : "", cmd, v->resp);
    if (n > 0)
        out_add(out, buf, (size_t)n < cap ? (size_t)n : cap - 1);
}

static void client_line(conn *out, const conn *c, const conn *self, const char *selfcmd, char *buf,
                        size_t cap)
{
    int64_t now = pc_mono_ms();
    struct line_vals v = {.id = c->id, .addr = c->addr, .laddr = c->laddr, .fd = c->fd};
    v.name = c->name ? c->name : "";
    v.age = (now - c->born_ms) / 1000;
    v.idle = (now - c->last_ms) / 1000;
    v.db = c->db;
    v.qbuf = c->in.len - c->in.off;
    v.qfree = c->in.cap - c->in.len;
    for (unsigned i = 0; i < c->nargs; i++)
        v.argmem += c->args[i].len;
    v.rbs = c->in.cap;
    v.rbp = c->in.len;
    v.omem = c->out.len - c->out.off;
    v.tot = sizeof *c + c->in.cap + c->out.cap + c->args_cap * sizeof *c->args;
    v.wpending = v.omem > 0;
    v.cmd = c == self ? selfcmd : c->lastcmd;
    if (v.cmd == NULL)
        v.cmd = "NULL";
    v.resp = c->proto == 3 ? 3 : 2;
    print_line(out, &v, buf, cap);
}

/* The line of another worker's connection, from its client table: the
 * buffer sizes are that worker's own business and shown as 0. */
static void remote_line(conn *out, const struct srv_client_shm *e, char *buf, size_t cap)
{
    int64_t now = pc_mono_ms();
    uint64_t act = atomic_load_explicit(&e->act, memory_order_relaxed);
    int64_t last = act != 0 ? (int64_t)(act >> 16) : e->born_ms;
    const cmd_def *d = (act & 0xffffu) != 0 ? cmd_at((unsigned)(act & 0xffffu) - 1) : NULL;
    char name[SRV_CTAB_NAME + 4];
    if (e->name_len >= SRV_CTAB_NAME) /* cut: shown with "..." (docs) */
        snprintf(name, sizeof name, "%s...", e->name);
    else
        snprintf(name, sizeof name, "%s", e->name);
    struct line_vals v = {.id = atomic_load_explicit(&e->id, memory_order_relaxed),
                          .addr = e->addr,
                          .laddr = e->laddr,
                          .name = name,
                          .cmd = d != NULL ? d->name : "NULL",
                          .fd = (int)e->fd,
                          .resp = e->proto == 3 ? 3 : 2,
                          .age = (now - e->born_ms) / 1000,
                          .idle = now > last ? (now - last) / 1000 : 0,
                          .db = e->db};
    print_line(out, &v, buf, cap);
}

/* Calls fn for each connection of the other workers (a consistent copy). */
static void for_remote(srv_worker *w,
                       void (*fn)(void *, unsigned, unsigned, const struct srv_client_shm *),
                       void *arg)
{
    srv *s = w->s;
    struct srv_client_shm e;
    for (unsigned slot = 0; slot < s->cfg.workers; slot++) {
        if (slot == w->slot)
            continue;
        unsigned hi = atomic_load_explicit(&s->ctab_hdr[slot].hi, memory_order_acquire);
        for (unsigned i = 0; i < hi && i < s->ctab_cap; i++)
            if (srv_ctab_read(s, slot, i, &e))
                fn(arg, slot, i, &e);
    }
}

static int id_picked(const uint64_t *ids, unsigned nids, uint64_t id)
{
    int pick = nids == 0;
    for (unsigned k = 0; k < nids && !pick; k++)
        pick = ids[k] == id;
    return pick;
}

struct list_ctx {
    conn *out;
    const uint64_t *ids;
    unsigned nids;
    char *line;
    size_t cap;
};

static void list_remote(void *arg, unsigned slot, unsigned i, const struct srv_client_shm *e)
{
    (void)slot, (void)i;
    struct list_ctx *x = arg;
    if (id_picked(x->ids, x->nids, atomic_load_explicit(&e->id, memory_order_relaxed)))
        remote_line(x->out, e, x->line, x->cap);
}

/* The list as one verbatim string (a temporary connection collects it). */
static void reply_clients(srv_worker *w, conn *c, const char *selfcmd, int all, const uint64_t *ids,
                          unsigned nids)
{
    conn tmp;
    memset(&tmp, 0, sizeof tmp);
    char line[1024];
    if (!all) {
        client_line(&tmp, c, c, selfcmd, line, sizeof line);
    } else {
        for (conn *o = w->conns; o != NULL; o = o->next)
            if (id_picked(ids, nids, o->id) && o->fd >= 0)
                client_line(&tmp, o, c, selfcmd, line, sizeof line);
        struct list_ctx x = {&tmp, ids, nids, line, sizeof line};
        for_remote(w, list_remote, &x);
    }
    if (tmp.closing)
        reply_error(c, "ERR out of memory");
    else
        reply_verbatim(c, tmp.out.p ? tmp.out.p : "", tmp.out.len);
    free(tmp.out.p);
}

static int parse_id(const char *p, size_t n, uint64_t *id)
{
    int64_t v;
    if (arg_i64(p, n, &v) != 0 || v <= 0)
        return -1;
    *id = (uint64_t)v;
    return 0;
}

static void client_list(srv_worker *w, conn *c, unsigned argc, const char **argv,
                        const size_t *argl)
{
    uint64_t ids[64];
    unsigned nids = 0;
    int none = 0; /* a type with no client in pcached: master, replica, pubsub */
    for (unsigned j = 2; j < argc; j++) {
        if (arg_eq(argv[j], argl[j], "TYPE") && j + 1 < argc) {
            const char *t = argv[j + 1];
            size_t tl = argl[j + 1];
            if (arg_eq(t, tl, "normal")) {
            } else if (arg_eq(t, tl, "master") || arg_eq(t, tl, "replica") ||
                       arg_eq(t, tl, "slave") || arg_eq(t, tl, "pubsub")) {
                none = 1;
            } else {
                char shown[130];
                resp_sanitize(shown, sizeof shown, t, tl);
                reply_error(c, "ERR Unknown client type '%s'", shown);
                return;
            }
            j++;
        } else if (arg_eq(argv[j], argl[j], "ID") && j + 1 < argc) {
            for (j++; j < argc; j++) {
                uint64_t id;
                if (parse_id(argv[j], argl[j], &id) != 0) {
                    reply_error(c, "ERR Invalid client ID");
                    return;
                }
                if (nids < sizeof ids / sizeof ids[0])
                    ids[nids++] = id;
            }
        } else {
            reply_error(c, "ERR syntax error");
            return;
        }
    }
    if (none) {
        reply_verbatim(c, "", 0);
        return;
    }
    reply_clients(w, c, "CLIENT|LIST", 1, ids, nids);
}

/* Closes o (not the running connection): its socket is shut down, so the
 * worker's loop sees the end and frees it the usual way, with whatever
 * group-commit list it is on. */
static void kill_other(conn *o)
{
    o->closing = 1;
    (void)shutdown(o->fd, SHUT_RDWR);
}

/* CLIENT KILL's filters, for the other workers' connections. */
struct kill_ctx {
    srv *s;
    uint64_t id;
    const char *addr, *laddr;
    size_t al, ll;
    int old_form; /* mark the first match only */
    int64_t marked;
};

static void kill_remote(void *arg, unsigned slot, unsigned i, const struct srv_client_shm *e)
{
    struct kill_ctx *k = arg;
    uint64_t id = atomic_load_explicit(&e->id, memory_order_relaxed);
    if ((k->old_form && k->marked > 0) || (k->id != 0 && id != k->id) ||
        (k->addr && !arg_eq(k->addr, k->al, e->addr)) ||
        (k->laddr && !arg_eq(k->laddr, k->ll, e->laddr)))
        return;
    srv_ctab_mark_kill(k->s, slot, i, id);
    k->marked++;
}

static void client_kill(srv_worker *w, conn *c, unsigned argc, const char **argv,
                        const size_t *argl)
{
    if (argc == 3) { /* the old form: CLIENT KILL addr:port */
        for (conn *o = w->conns; o != NULL; o = o->next)
            if (o->fd >= 0 && arg_eq(argv[2], argl[2], o->addr)) {
                reply_ok(c);
                if (o == c)
                    c->closing = 1;
                else
                    kill_other(o);
                return;
            }
        struct kill_ctx k = {.s = w->s, .addr = argv[2], .al = argl[2], .old_form = 1};
        for_remote(w, kill_remote, &k);
        if (k.marked > 0)
            reply_ok(c);
        else
            reply_error(c, "ERR No such client");
        return;
    }
    uint64_t id = 0;
    const char *addr = NULL, *laddr = NULL;
    size_t al = 0, ll = 0;
    int skipme = 1, none = 0;
    for (unsigned j = 2; j < argc; j += 2) {
        if (j + 1 >= argc) {
            reply_error(c, "ERR syntax error");
            return;
        }
        const char *v = argv[j + 1];
        size_t vl = argl[j + 1];
        if (arg_eq(argv[j], argl[j], "ID")) {
            if (parse_id(v, vl, &id) != 0) {
                reply_error(c, "ERR client-id should be greater than 0");
                return;
            }
        } else if (arg_eq(argv[j], argl[j], "ADDR")) {
            addr = v, al = vl;
        } else if (arg_eq(argv[j], argl[j], "LADDR")) {
            laddr = v, ll = vl;
        } else if (arg_eq(argv[j], argl[j], "TYPE")) {
            if (arg_eq(v, vl, "master") || arg_eq(v, vl, "replica") || arg_eq(v, vl, "slave") ||
                arg_eq(v, vl, "pubsub"))
                none = 1;
            else if (!arg_eq(v, vl, "normal")) {
                char shown[130];
                resp_sanitize(shown, sizeof shown, v, vl);
                reply_error(c, "ERR Unknown client type '%s'", shown);
                return;
            }
        } else if (arg_eq(argv[j], argl[j], "USER")) {
            if (!arg_eq(v, vl, "default")) {
                char shown[130];
                resp_sanitize(shown, sizeof shown, v, vl);
                reply_error(c, "ERR No such user '%s'", shown);
                return;
            }
        } else if (arg_eq(argv[j], argl[j], "SKIPME")) {
            if (arg_eq(v, vl, "yes"))
                skipme = 1;
            else if (arg_eq(v, vl, "no"))
                skipme = 0;
            else {
                reply_error(c, "ERR syntax error");
                return;
            }
        } else {
            reply_error(c, "ERR syntax error");
            return;
        }
    }
    int64_t killed = 0;
    int self = 0;
    for (conn *o = w->conns; o != NULL && !none; o = o->next) {
        if (o->fd < 0 || (id != 0 && o->id != id) || (addr && !arg_eq(addr, al, o->addr)) ||
            (laddr && !arg_eq(laddr, ll, o->laddr)) || (o == c && skipme))
            continue;
        killed++;
        if (o == c)
            self = 1;
        else
            kill_other(o);
    }
    if (!none) {
        struct kill_ctx k = {.s = w->s, .id = id, .addr = addr, .al = al, .laddr = laddr, .ll = ll};
        for_remote(w, kill_remote, &k);
        killed += k.marked;
    }
    reply_int(c, killed);
    if (self)
        c->closing = 1; /* after this reply, as Redis's CLIENT_CLOSE_AFTER_REPLY */
}

/* CLIENT UNBLOCK id [TIMEOUT|ERROR]: no client is ever blocked in Redis's
 * sense, so a valid request unblocks nothing. */
static void client_unblock(conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    int64_t id;
    if (arg_i64(argv[2], argl[2], &id) != 0) {
        reply_error(c, "ERR value is not an integer or out of range");
    } else if (argc > 4) {
        reply_error(c, "ERR syntax error");
    } else if (argc == 4 && !arg_eq(argv[3], argl[3], "TIMEOUT") &&
               !arg_eq(argv[3], argl[3], "ERROR")) {
        reply_error(c, "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
    } else {
        reply_int(c, 0);
    }
}

static const char *const client_help[] = {
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "HELP",
    "    Prints this help.",
};

/* The subcommands and their arity (Redis's convention, CLIENT counted). */
static const struct {
    const char *name;
    int arity;
} client_subs[] = {
    {"ID", 2},       {"INFO", 2},    {"LIST", -2},     {"KILL", -3},
    {"SETNAME", 3},  {"GETNAME", 2}, {"NO-EVICT", 3},  {"REPLY", 3},
    {"GETREDIR", 2}, {"HELP", 2},    {"UNBLOCK", -3},  {"TRACKINGINFO", 2},
    {"UNPAUSE", 2},  {"PAUSE", -3},  {"TRACKING", -3}, {"CACHING", 3},
};

void cmd_client(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    int k = -1;
    for (unsigned i = 0; i < sizeof client_subs / sizeof client_subs[0] && k < 0; i++)
        if (arg_eq(argv[1], argl[1], client_subs[i].name))
            k = (int)i;
    if (k < 0) {
        char sub[130];
        resp_sanitize(sub, sizeof sub, argv[1], argl[1]);
        reply_error(c, "ERR unknown subcommand '%s'. Try CLIENT HELP.", sub);
        return;
    }
    int ar = client_subs[k].arity;
    if ((ar > 0 && argc != (unsigned)ar) || (ar < 0 && argc < (unsigned)-ar)) {
        char lower[16];
        size_t i = 0;
        for (const char *p = client_subs[k].name; *p && i + 1 < sizeof lower; p++)
            lower[i++] = (*p >= 'A' && *p <= 'Z') ? (char)(*p + 32) : *p;
        lower[i] = '\0';
        reply_error(c, "ERR wrong number of arguments for 'client|%s' command", lower);
        return;
    }
    const char *sub = client_subs[k].name;
    const char *v = argc > 2 ? argv[2] : NULL;
    size_t vl = argc > 2 ? argl[2] : 0;
    if (strcmp(sub, "ID") == 0) {
        reply_int(c, (int64_t)c->id);
    } else if (strcmp(sub, "INFO") == 0) {
        reply_clients(w, c, "CLIENT|INFO", 0, NULL, 0);
    } else if (strcmp(sub, "LIST") == 0) {
        client_list(w, c, argc, argv, argl);
    } else if (strcmp(sub, "KILL") == 0) {
        client_kill(w, c, argc, argv, argl);
    } else if (strcmp(sub, "SETNAME") == 0) {
        if (set_name(c, v, vl) == 0)
            reply_ok(c);
    } else if (strcmp(sub, "GETNAME") == 0) {
        if (c->name != NULL)
            reply_bulk_str(c, c->name);
        else
            reply_nil(c);
    } else if (strcmp(sub, "NO-EVICT") == 0) {
        if (arg_eq(v, vl, "on") || arg_eq(v, vl, "off")) {
            c->no_evict = arg_eq(v, vl, "on");
            reply_ok(c);
        } else {
            reply_error(c, "ERR syntax error");
        }
    } else if (strcmp(sub, "REPLY") == 0) {
        if (arg_eq(v, vl, "on")) {
            c->reply_mode = 0;
            c->mute = 0;
            reply_ok(c);
        } else if (arg_eq(v, vl, "off")) {
            c->reply_mode = 1;
            c->mute = 1;
        } else if (arg_eq(v, vl, "skip")) {
            if (c->reply_mode == 0)
                c->reply_mode = 2; /* the next command's reply is dropped */
            c->mute = 1;
        } else {
            reply_error(c, "ERR syntax error");
        }
    } else if (strcmp(sub, "GETREDIR") == 0) {
        reply_int(c, -1); /* no tracking */
    } else if (strcmp(sub, "UNBLOCK") == 0) {
        client_unblock(c, argc, argv, argl);
    } else if (strcmp(sub, "TRACKINGINFO") == 0) {
        reply_map(c, 3);
        reply_bulk_str(c, "flags");
        reply_set(c, 1);
        reply_bulk_str(c, "off");
        reply_bulk_str(c, "redirect");
        reply_int(c, -1);
        reply_bulk_str(c, "prefixes");
        reply_array(c, 0);
    } else if (strcmp(sub, "UNPAUSE") == 0) {
        reply_ok(c); /* nothing is ever paused */
    } else if (strcmp(sub, "PAUSE") == 0) {
        reply_error(c, "ERR CLIENT PAUSE is not supported by pcached");
    } else if (strcmp(sub, "TRACKING") == 0) {
        if (arg_eq(v, vl, "off"))
            reply_ok(c);
        else
            reply_error(c, "ERR client-side caching (CLIENT TRACKING) is not supported by "
                           "pcached");
    } else if (strcmp(sub, "CACHING") == 0) {
        reply_error(c, "ERR CLIENT CACHING can be called only when the client is in tracking "
                       "mode with OPTIN or OPTOUT mode enabled");
    } else {
        unsigned n = sizeof client_help / sizeof client_help[0];
        reply_array(c, n);
        for (unsigned i = 0; i < n; i++)
            reply_simple(c, client_help[i]);
    }
}
