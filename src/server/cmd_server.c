/*
 * cmd_server.c - connection and server commands of the RESP door: PING
 * ECHO QUIT SELECT CONFIG (AUTH HELLO CLIENT RESET: cmd_client.c; COMMAND:
 * cmd_command.c; INFO: cmd_info.c; MEMORY OBJECT: cmd_object.c), the persistence
 * commands SAVE BGSAVE LASTSAVE SHUTDOWN, and PERF.<NAME> for every management
 * command (docs/pcached.md).
 *
 * PERF.<NAME> runs perf_<name> of the management layer with positional
 * arguments and answers its JSON result as one bulk string. perf_save and
 * perf_load, like SAVE and BGSAVE, never run in a worker: they go to the
 * maintenance process through the worker's slot, and the connection waits
 * for the answer (its later pipelined commands wait behind it, in order)
 * while the worker keeps serving every other connection.
 */
#include "resp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static void cmd_ping(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w;
    if (argc > 2)
        reply_error(c, "ERR wrong number of arguments for 'ping' command");
    else if (argc == 2)
        reply_bulk(c, argv[1], argl[1]);
    else
        reply_simple(c, "PONG");
}

static void cmd_echo(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc;
    reply_bulk(c, argv[1], argl[1]);
}

static void cmd_quit(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w, (void)argc, (void)argv, (void)argl;
    reply_ok(c);
    c->closing = 1;
}

static void cmd_select(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)argc;
    int64_t n;
    if (arg_i64(argv[1], argl[1], &n) != 0) {
        reply_error(c, "ERR value is not an integer or out of range");
        return;
    }
    if (n < INT32_MIN || n > INT32_MAX) { /* Redis reads the index as a C int */
        reply_error(c, "ERR value is out of range, value must between %d and %d", INT32_MIN,
                    INT32_MAX);
        return;
    }
    if (n < 0 || n >= (int64_t)w->s->ndbs) {
        reply_error(c, "ERR DB index is out of range");
        return;
    }
    c->db = (unsigned)n;
    srv_ctab_update(c);
    c->coll = w->dbcoll[n];
    reply_ok(c);
}

/* ---- FUNCTION ------------------------------------------------------------------- */

/* pcached has no scripting, so its function library is always empty:
 * FUNCTION FLUSH [ASYNC|SYNC] truthfully answers OK (Redis's test harness
 * sends it before every test); every other subcommand is refused. */
static void cmd_function(srv_worker *w, conn *c, unsigned argc, const char **argv,
                         const size_t *argl)
{
    (void)w;
    char sub[64];
    resp_sanitize(sub, sizeof sub, argv[1], argl[1]);
    if (arg_eq(argv[1], argl[1], "FLUSH") && argc > 3)
        reply_error(c,
                    "ERR unknown subcommand or wrong number of arguments for '%s'. Try "
                    "FUNCTION HELP.",
                    sub);
    else if (arg_eq(argv[1], argl[1], "FLUSH") && argc == 3 && !arg_eq(argv[2], argl[2], "ASYNC") &&
             !arg_eq(argv[2], argl[2], "SYNC"))
        reply_error(c, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
    else if (arg_eq(argv[1], argl[1], "FLUSH"))
        reply_ok(c);
    else
        reply_error(c, "ERR FUNCTION %s is not supported by pcached (no scripting)", sub);
}

/* ---- CONFIG ----------------------------------------------------------------------- */

/* cmd_config (cmd_config.c): CONFIG GET/SET/RESETSTAT/HELP */

/* ---- persistence and PERF.<NAME> ---------------------------------------------------- */

static int need_store(srv_worker *w, conn *c, const char *what)
{
    if (w->s->persist != NULL)
        return 1;
    reply_error(c, "ERR %s: no store configured (db_url is empty)", what);
    return 0;
}

static void cmd_save(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)argc, (void)argv, (void)argl;
    if (!need_store(w, c, "SAVE"))
        return;
    if (cmd_slot_submit(w, c, "perf_save", 0, NULL, NULL, 0) == 0)
        w->slot_kind = 1;
}

static void cmd_bgsave(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    if (argc > 2 || (argc == 2 && !arg_eq(argv[1], argl[1], "SCHEDULE"))) {
        reply_error(c, "ERR syntax error");
        return;
    }
    if (!need_store(w, c, "BGSAVE"))
        return;
    struct srv_slot_shm *slot = &w->s->shm->slots[w->slot];
    if (atomic_load(&w->s->shm->saving) || atomic_load(&w->s->shm->bgsave_pending) ||
        w->slot_async || w->slot_waiter != NULL || atomic_load(&slot->state) != SRV_SLOT_FREE) {
        reply_error(c, "ERR Background save already in progress");
        return;
    }
    if (cmd_slot_submit(w, c, "perf_save", 0, NULL, NULL, 1) == 0)
        reply_simple(c, "Background saving started");
}

static void cmd_lastsave(srv_worker *w, conn *c, unsigned argc, const char **argv,
                         const size_t *argl)
{
    (void)argc, (void)argv, (void)argl;
    /* as Redis: the start time until a save succeeds (/metrics says 0) */
    int64_t t = atomic_load(&w->s->shm->last_save);
    reply_int(c, t != 0 ? t : atomic_load(&w->s->shm->start_unix));
}

/* SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT], as Redis 7.0 parses it.
 * The maintenance process saves and asks the master to stop
 * (maint.c, maint_shutdown); on success the connection is closed without
 * a reply, as Redis's is by its exit. */
static void cmd_shutdown(srv_worker *w, conn *c, unsigned argc, const char **argv,
                         const size_t *argl)
{
    unsigned flags = 0;
    int abort_req = 0;
    for (unsigned i = 1; i < argc; i++) {
        if (arg_eq(argv[i], argl[i], "NOSAVE"))
            flags |= SRV_SHUT_NOSAVE;
        else if (arg_eq(argv[i], argl[i], "SAVE"))
            flags |= SRV_SHUT_SAVE;
        else if (arg_eq(argv[i], argl[i], "NOW"))
            flags |= SRV_SHUT_NOW;
        else if (arg_eq(argv[i], argl[i], "FORCE"))
            flags |= SRV_SHUT_FORCE;
        else if (arg_eq(argv[i], argl[i], "ABORT"))
            abort_req = 1;
        else {
            reply_error(c, "ERR syntax error");
            return;
        }
    }
    if ((abort_req && flags != 0) || ((flags & SRV_SHUT_SAVE) && (flags & SRV_SHUT_NOSAVE))) {
        reply_error(c, "ERR syntax error");
        return;
    }
    if (abort_req) { /* pcached's stop never waits for replicas: nothing to abort */
        reply_error(c, "ERR No shutdown in progress.");
        return;
    }
    char arg[16];
    snprintf(arg, sizeof arg, "%u", flags);
    const char *av[1] = {arg};
    size_t al[1] = {strlen(arg)};
    if (cmd_slot_submit(w, c, "shutdown", 1, av, al, 0) == 0)
        w->slot_kind = 2;
}

static void perf_unknown(conn *c, const char *name, size_t len)
{
    char shown[80];
    resp_sanitize(shown, sizeof shown, name, len);
    reply_error(c, "ERR unknown command '%s', with args beginning with: ", shown);
}

void cmd_perf(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl);
void cmd_perf(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    char name[PC_MGMT_NAME_MAX + 1] = "perf_";
    size_t n = argl[0] - 5;
    if (n + 5 > PC_MGMT_NAME_MAX) {
        perf_unknown(c, argv[0], argl[0]);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = argv[0][5 + i];
        name[5 + i] = (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch;
    }
    name[5 + n] = '\0';
    if (argc - 1 > PC_MGMT_MAX_ARGS) {
        reply_error(c, "ERR %s: too many arguments (at most %u)", name, PC_MGMT_MAX_ARGS);
        return;
    }
    /* Only the engine's own commands run in a worker. What the storage
     * layer registers (perf_save, perf_load, and any later one) touches the
     * store, whose handle lives in the maintenance process: forward it. */
    int local = 0;
    for (unsigned i = 0; i < w->builtin_cmds && !local; i++)
        local = strcmp(pc_mgmt_cmd_at(w->mgmt, i)->name, name) == 0;
    int stored = strcmp(name, "perf_save") == 0 || strcmp(name, "perf_load") == 0;
    if (stored || (!local && pc_mgmt_cmd_find(w->mgmt, name) != NULL)) {
        if (!need_store(w, c, name))
            return;
        if (cmd_slot_submit(w, c, name, argc - 1, argv + 1, argl + 1, 0) == 0)
            w->slot_kind = 0;
        return;
    }
    if (pc_mgmt_cmd_find(w->mgmt, name) == NULL) {
        perf_unknown(c, argv[0], argl[0]);
        return;
    }
    pc_mgmt_arg args[PC_MGMT_MAX_ARGS];
    for (unsigned i = 1; i < argc; i++)
        args[i - 1] = (pc_mgmt_arg){NULL, 0, argv[i], argl[i]};
    pc_mgmt_err err;
    pc_json_reset(w->json);
    /* the selected database's collection is the default collection */
    int rc = pc_mgmt_run(w->mgmt_db[c->db], name, args, argc - 1, pc_json_ops(), w->json, &err);
    const char *text;
    size_t len;
    if (rc == 0 && pc_json_text(w->json, &text, &len) == 0)
        reply_bulk(c, text, len);
    else if (rc != 0)
        reply_error(c, "ERR %s", err.msg);
    else
        reply_error(c, "ERR %s: the result could not be built", name);
}

/* The maintenance process answered our slot. */
void cmd_slot_answered(srv_worker *w)
{
    struct srv_slot_shm *slot = &w->s->shm->slots[w->slot];
    uint32_t st = atomic_load_explicit(&slot->state, memory_order_acquire);
    if (st == SRV_SLOT_DONE) {
        conn *c = w->slot_waiter;
        if (c != NULL) {
            size_t len = slot->len < sizeof slot->buf ? slot->len : sizeof slot->buf;
            if (slot->rc != 0)
                reply_error(c, "ERR %.*s", (int)len, slot->buf);
            else if (w->slot_kind == 1)
                reply_ok(c);
            else if (w->slot_kind == 2) /* SHUTDOWN: the stop closes it, no reply */
                c->closing = 1;
            else
                reply_bulk(c, slot->buf, len);
            w->slot_waiter = NULL;
            c->blocked = 0;
        }
        w->slot_orphan = 0;
        atomic_store_explicit(&slot->state, SRV_SLOT_FREE, memory_order_release);
        if (c != NULL)
            conn_process(w, c);
    } else if (st == SRV_SLOT_FREE) {
        w->slot_async = 0;
        w->slot_orphan = 0;
    }
    /* resume connections that waited for the slot */
    for (conn *o = w->conns; o != NULL && w->slot_waiter == NULL; o = o->next)
        if (o->blocked == 2) {
            o->blocked = 0;
            conn_process(w, o);
        }
}

const cmd_def cmd_server_table[] = {
    {"PING", -1, CMD_FAST, cmd_ping, 0, 0, 0},
    {"ECHO", 2, CMD_FAST, cmd_echo, 0, 0, 0},
    {"QUIT", -1, CMD_NOAUTH | CMD_FAST, cmd_quit, 0, 0, 0},
    {"AUTH", -2, CMD_NOAUTH | CMD_FAST, cmd_auth, 0, 0, 0},
    {"HELLO", -1, CMD_NOAUTH | CMD_FAST, cmd_hello, 0, 0, 0},
    {"RESET", 1, CMD_NOAUTH | CMD_FAST, cmd_reset, 0, 0, 0},
    {"MEMORY", -2, CMD_READONLY, cmd_memory, 0, 0, 0},
    {"OBJECT", -2, CMD_READONLY, cmd_object, 2, 2, 1},
    {"SELECT", 2, CMD_FAST, cmd_select, 0, 0, 0},
    {"CLIENT", -2, 0, cmd_client, 0, 0, 0},
    {"COMMAND", -1, 0, cmd_command, 0, 0, 0},
    {"FUNCTION", -2, CMD_WRITE, cmd_function, 0, 0, 0},
    {"CONFIG", -2, CMD_ADMIN, cmd_config, 0, 0, 0},
    {"INFO", -1, 0, cmd_info, 0, 0, 0},
    {"SAVE", 1, CMD_ADMIN | CMD_NO_MULTI, cmd_save, 0, 0, 0},
    {"BGSAVE", -1, CMD_ADMIN, cmd_bgsave, 0, 0, 0},
    {"LASTSAVE", 1, CMD_FAST, cmd_lastsave, 0, 0, 0},
    {"SHUTDOWN", -1, CMD_ADMIN | CMD_NO_MULTI, cmd_shutdown, 0, 0, 0},
};
const unsigned cmd_server_count = sizeof cmd_server_table / sizeof cmd_server_table[0];
