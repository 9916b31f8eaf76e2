/*
 * resp.h - a RESP2 client connection of a pcached worker: its buffers, the
 * incremental request parser (resp.c), the reply writers (resp.c) and the
 * command interface (commands.c and the cmd_*.c files).
 *
 * Invariants of a connection's input buffer: bytes [in.off, in.len) are
 * unconsumed; every offset of the parser's state (ppos, args[].off) is
 * relative to in.off, the start of the command being parsed, so moving the
 * unconsumed bytes to the front of the buffer (compaction) never changes
 * the parser's state. Arguments point into the input buffer and stay valid
 * until the command is consumed.
 */
#ifndef PCACHED_RESP_H
#define PCACHED_RESP_H

#include "pcached.h"

#include <pthread.h>

typedef struct sbuf {
    char *p;
    size_t off, len, cap; /* [off, len) holds data */
} sbuf;

typedef struct conn {
    int fd;
    sbuf in, out;
    /* parser state (resp.c) */
    size_t ppos;       /* parse position, relative to in.off */
    int64_t need_args; /* arguments of the current command; -1 = between commands */
    int64_t bulk_len;  /* length of the bulk being read; -1 = its header is next */
    unsigned nargs;    /* arguments complete so far */
    unsigned args_cap;
    struct resp_arg {
        size_t off, len;
    } * args;
    uint64_t discard_bulks; /* a refused command: bulks still to skip */
    uint64_t discard_bytes; /* bytes of the current skipped bulk (with its CRLF) */
    size_t want;            /* bytes the parser needs from in.off to progress */
    /* session */
    int proto;                  /* 2 or 3 (HELLO); RESP2 until HELLO 3 */
    int mute;                   /* replies of the running command are dropped (CLIENT REPLY) */
    int reply_mode;             /* CLIENT REPLY: 0 ON, 1 OFF, 2 SKIP (the next command) */
    int no_evict;               /* CLIENT NO-EVICT (accepted, changes nothing) */
    uint32_t nerr;              /* error replies written (reply_error): for errorstats */
    char errcode[16];           /* the code (first word) of the last error reply */
    uint64_t id;                /* CLIENT ID: unique across the workers of the instance */
    char *name;                 /* CLIENT SETNAME (malloc'd), or NULL */
    int64_t born_ms;            /* accepted at (monotonic), for CLIENT LIST age= */
    char addr[112], laddr[112]; /* peer and local address, "ip:port" or "path:0" */
    const char *lastcmd;        /* the last command's name (CLIENT LIST cmd=), static */
    struct srv_client_shm *pub; /* its entry in our client table, or NULL (table full) */
    int authed;
    unsigned db;
    pc_coll *coll;
    int closing;     /* close once out is flushed; read nothing more */
    int blocked;     /* waiting for the maintenance process (SAVE, PERF.SAVE) */
    int paused;      /* output over max_output_mb: not reading */
    int64_t last_ms; /* last activity, for idle_timeout_s */
    uint32_t events; /* epoll events registered */
    struct conn *prev, *next;
    struct conn *gnext; /* closed, freed at the end of the loop turn */
    /* group commit (worker.c): replies wait for the journal's fdatasync */
    size_t safe;        /* out[off, safe) may be sent while replies are held */
    size_t mark;        /* out[.., mark) is covered by the batch in flight */
    int held;           /* on the worker's held list */
    int infl;           /* on the worker's in-flight list */
    int wrote;          /* a command staged a record not yet in a batch */
    int wrote_infl;     /* ... a record of the batch in flight */
    struct conn *hnext; /* next on the held list */
    struct conn *inext; /* next on the in-flight list */
    /* MULTI/WATCH state (cmd_txn.c); NULL until the first */
    struct srv_txn *txn;
    int atomic; /* inside cmd_txn_atomic: a handler must not enter it again */
} conn;

/* Parser results. */
enum {
    RESP_NEED = 0,    /* incomplete: read more (c->want says how much) */
    RESP_CMD = 1,     /* a command in c->args[0 .. nargs) */
    RESP_REFUSED = 2, /* refused (limits): the error reply is queued; go on */
    RESP_PROTO = -1   /* protocol error: reply queued, close the connection */
};

typedef struct resp_limits {
    unsigned max_args, max_bulk, max_inline;
    uint64_t max_request; /* bytes one multibulk command may occupy */
    /* before AUTH: what AUTH needs (RESP_PREAUTH_ARGS arguments of at
     * most RESP_PREAUTH_BULK bytes), past it Redis's protocol error and
     * the connection closed: an unauthenticated client cannot make a
     * worker buffer more */
    int preauth;
} resp_limits;
#define RESP_PREAUTH_ARGS 10
#define RESP_PREAUTH_BULK 16384

int resp_parse(conn *c, const resp_limits *lim);
/* Parses a header line "<c>digits\r\n" at p (avail bytes; any type byte c,
 * an optional '-'). Returns the line length (with CRLF) and *v, 0 when
 * incomplete, -1 when malformed. */
long resp_parse_header(const char *p, size_t avail, int64_t *v);
/* Drops the command just executed from the input. */
void resp_consume(conn *c);

/* Reply writers: each appends to c->out (growing it). On out of memory the
 * connection is marked closing (its replies can no longer be complete). */
void out_add(conn *c, const void *p, size_t n);
void reply_ok(conn *c);
void reply_simple(conn *c, const char *s);
void reply_error(conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void reply_int(conn *c, int64_t v);
void reply_bulk(conn *c, const void *p, size_t n);
void reply_nil(conn *c);
void reply_array(conn *c, int64_t n);
void reply_nil_array(conn *c);
/* RESP3-aware writers: each writes the RESP3 type after HELLO 3 and the
 * RESP2 shape Redis 7 uses otherwise (docs/pcached.md, "RESP3"). */
void reply_map(conn *c, int64_t pairs);                  /* %n, or *2n */
void reply_set(conn *c, int64_t n);                      /* ~n, or *n */
void reply_double(conn *c, double d);                    /* ,d, or a bulk string */
void reply_verbatim(conn *c, const char *txt, size_t n); /* =len txt:..., or a bulk */
void reply_bulk_str(conn *c, const char *s);             /* a NUL-terminated bulk */
/* Writes an argument for an error message as Redis quotes it (a C string's
 * "%.Ns"): its bytes up to the first NUL, as they are, at most cap - 1 of
 * them, NUL-terminated (reply_error turns CR and LF into blanks). */
void resp_sanitize(char *dst, size_t cap, const char *src, size_t n);
/* redis_glob.c: whether s[0, slen) matches the glob pat[0, plen) as Redis's
 * KEYS, SCAN MATCH (nocase 0) and CONFIG GET (nocase 1) match it. */
int srv_glob_match(const char *pat, size_t plen, const char *s, size_t slen, int nocase);

/* ---- commands ------------------------------------------------------------ */
typedef struct srv_worker {
    srv *s;
    unsigned slot;
    struct srv_wloop *loop;         /* worker.c: the event loop's own state, on its stack */
    pc_mgmt *mgmt;                  /* mgmt_cfg[0] */
    pc_mgmt *mgmt_cfg[SRV_MAX_DBS]; /* per configured db (s->dbs): its collection the default */
    /* The database map as of generation dbmap_gen (dbmap.c): per SELECT
     * index its collection, and the handle of mgmt_cfg made for it */
    uint64_t dbmap_gen;
    pc_coll *dbcoll[SRV_MAX_DBS];
    pc_mgmt *mgmt_db[SRV_MAX_DBS];
    unsigned builtin_cmds; /* the engine's own commands: the first ones of mgmt */
    pc_json *json;
    char *scratch; /* PC_VALUE_MAX + 64 bytes: values read by GET */
    size_t scratch_cap;
    int epfd;
    conn *conns;
    unsigned nconns;
    conn *slot_waiter; /* the connection whose request is in our slot */
    int slot_async;    /* our slot holds a BGSAVE nobody waits for */
    int slot_orphan;   /* our slot holds a request of a previous incarnation */
    int slot_kind;     /* how the waiter gets the answer: 0 JSON bulk, 1 +OK (SAVE) */
    int stopping;
    int64_t accept_resume_ms; /* accepts paused (EMFILE) until then; 0 = not paused */
    /* Clock reads are a few percent of a pipelined command's CPU (a vDSO
     * read costs about as much as the table lookup), so they are shared:
     * turn_ms is read once per event-loop turn (a connection's activity
     * stamp, as Redis's cached clock); cmd_end_us is the end of the last
     * command of the batch conn_process is running, and the next command's
     * start (0 outside a batch: cmd_dispatch reads the clock) */
    int64_t turn_ms;
    int64_t cmd_end_us;
    conn *graveyard;
    /* group commit (worker.c); the sync thread reads batch and writes
     * gc_done (under gc_mu) only while inflight */
    pc_persist *gc;              /* group commit on (the persistence), or NULL */
    conn *held;                  /* replies appended while held, in no batch yet */
    conn *infl;                  /* replies covered (up to mark) by the batch in flight */
    pc_journal_batch *batch;     /* the batch in flight */
    int inflight;                /* the sync thread has batch */
    int gc_efd;                  /* eventfd: the sync thread finished a batch */
    int gc_tfd;                  /* timerfd: the longest wait for writers to come back */
    int gc_armed, gc_due;        /* gc_tfd is armed / has fired since the last start */
    unsigned gc_writers;         /* connections with records staged for the next batch */
    unsigned gc_expect;          /* writers the next batch waits for (gc_kick) */
    int64_t gc_start_us;         /* when the batch in flight started (monotonic) */
    int64_t gc_sync_us;          /* how long the last batch took, start to finish */
    int gc_go, gc_quit, gc_done; /* under gc_mu */
    pthread_mutex_t gc_mu;
    pthread_cond_t gc_cv;
    pthread_t gc_thr;
    const char **argv; /* per-command argument views, grown to the largest command */
    size_t *argl;
    unsigned argcap;
    resp_limits lim;
    resp_limits lim_preauth; /* lim with preauth set: connections before AUTH */
    struct srv_wstats_shm *st;
} srv_worker;

/* worker.c: runs the complete commands buffered in c (until it blocks). */
void conn_process(srv_worker *w, conn *c);

/* Executes the parsed command of c; argv[i] points into c->in. */
void cmd_dispatch(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl);
/* The worker's slot was answered: delivers the answer to the waiting
 * connection (if any) and resumes blocked connections. */
void cmd_slot_answered(srv_worker *w);
/* Submits a management request to the maintenance process. Returns 0, or
 * queues an error reply and returns -1. */
int cmd_slot_submit(srv_worker *w, conn *c, const char *cmd, unsigned nargs,
                    const char *const *argv, const size_t *argl, int async);

/* Command handlers share one signature. */
typedef void (*cmd_fn)(srv_worker *w, conn *c, unsigned argc, const char **argv,
                       const size_t *argl);
typedef struct cmd_def {
    const char *name; /* upper case */
    int arity;        /* Redis convention: n exact, -n at least n (the name counts) */
    unsigned flags;
    cmd_fn fn;
    int first_key, last_key, step; /* for COMMAND */
} cmd_def;
#define CMD_NOAUTH 0x1u /* allowed before AUTH */
#define CMD_WRITE 0x2u
#define CMD_READONLY 0x4u
#define CMD_ADMIN 0x8u
#define CMD_FAST 0x10u
#define CMD_ATOMIC 0x20u   /* a read-modify-write or several keys: cmd_txn_atomic */
#define CMD_NO_MULTI 0x40u /* refused inside MULTI, as Redis's no-multi commands */
#define CMD_SNAPSHOT 0x80u /* reads several keys at one moment: cmd_txn_snapshot */

/* cmd_string.c, cmd_keys.c, cmd_server.c */
extern const cmd_def cmd_string_table[];
extern const unsigned cmd_string_count;
extern const cmd_def cmd_keys_table[];
extern const unsigned cmd_keys_count;
extern const cmd_def cmd_server_table[];
extern const unsigned cmd_server_count;
/* cmd_rewrite.c, cmd_keymove.c */
extern const cmd_def cmd_rewrite_table[];
extern const unsigned cmd_rewrite_count;
extern const cmd_def cmd_keymove_table[];
extern const unsigned cmd_keymove_count;

/* cmd_config.c */
void cmd_config(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl);
/* Sets w->lim and w->lim_preauth from w->s->cfg. */
void cmd_config_limits(srv_worker *w);

/* cmd_txn.c: MULTI EXEC DISCARD WATCH UNWATCH; cmd_script.c: EVAL & co */
extern const cmd_def cmd_txn_table[];
extern const unsigned cmd_txn_count;
extern const cmd_def cmd_script_table[];
extern const unsigned cmd_script_count;
/* Inside MULTI: queues the command named name (upper case; its checks
 * passed) or refuses it, replying either way, and returns 1; returns 0 when
 * it is to run now (not in MULTI, running inside EXEC, or one of MULTI EXEC
 * DISCARD WATCH QUIT RESET). */
int cmd_txn_queue(srv_worker *w, conn *c, const char *name, unsigned argc, const char **argv,
                  const size_t *argl);
/* A command was answered with a queue-time error: inside MULTI, the
 * transaction's EXEC will answer EXECABORT. */
void cmd_txn_flag(conn *c);
/* 1 between MULTI and EXEC / DISCARD (commands are being queued). */
int cmd_txn_multi(const conn *c);
/* Runs one command's handler as one engine transaction (pc_txn_run): its
 * reads and writes of several keys (APPEND, RENAME, MSET, SET ... GET)
 * happen at one instant for every other client, in every worker. On a
 * conflict the attempt's replies are dropped and the handler runs again;
 * inside an EXEC it joins the EXEC's transaction. Commands flagged
 * CMD_ATOMIC are run through it by cmd_dispatch. */
void cmd_txn_atomic(srv_worker *w, conn *c, cmd_fn fn, unsigned argc, const char **argv,
                    const size_t *argl);
/* Runs a handler that only reads several keys (MGET, EXISTS, TOUCH) so
 * that its replies come from one moment: lock-free reads checked by
 * pc_snap_end, again on a change, then through cmd_txn_atomic (whose
 * commit takes the buckets' locks). Commands flagged CMD_SNAPSHOT are run
 * through it by cmd_dispatch. */
void cmd_txn_snapshot(srv_worker *w, conn *c, cmd_fn fn, unsigned argc, const char **argv,
                      const size_t *argl);
/* Leaves MULTI (the queue dropped) and drops the watches, as DISCARD plus
 * UNWATCH do without a reply (for RESET). */
void cmd_txn_reset_conn(conn *c);
/* Frees c's transaction state (at connection close). */
void cmd_txn_conn_free(conn *c);

/* dbmap.c: SWAPDB, and the worker's side of the database map: begin and
 * end of an event-loop turn, and before each command srv_dbmap_enter (one
 * relaxed load; the slow path takes a changed map, waiting out a swap). */
void cmd_swapdb(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl);
void srv_dbmap_worker_init(srv_worker *w); /* after mgmt_cfg is made */
void srv_dbmap_turn_begin(srv_worker *w);
void srv_dbmap_turn_end(srv_worker *w);
void srv_dbmap_refresh(srv_worker *w);
static inline void srv_dbmap_enter(srv_worker *w)
{
    if (__builtin_expect(
            atomic_load_explicit(&w->s->shm->dbmap.gen, memory_order_relaxed) != w->dbmap_gen, 0))
        srv_dbmap_refresh(w);
}
/* cmd_txn.c: the collections of the databases in mask changed (SWAPDB): a
 * watch on one of them makes the next EXEC fail, as a touched key does. */
void cmd_txn_dbs_changed(conn *c, uint64_t mask);

/* cmd_command.c: COMMAND and its subcommands, as Redis 7.0 answers them */
void cmd_command(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl);

/* cmd_info.c */
void cmd_info(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl);

/* slowlog.c: SLOWLOG; srv_slowlog_add records a command that took dur_us
 * (called by cmd_dispatch only past slowlog_log_slower_than: off the fast
 * path). */
extern const cmd_def cmd_slowlog_table[];
extern const unsigned cmd_slowlog_count;
void srv_slowlog_add(srv_worker *w, const conn *c, unsigned argc, const char **argv,
                     const size_t *argl, uint64_t dur_us);

/* shared helpers (commands.c) */
int arg_i64(const char *p, size_t n, int64_t *out);
int arg_eq(const char *p, size_t n, const char *word); /* case-insensitive */
/* MSET-style key value pairs: an even count, every key and value within the
 * engine's limits. 0, or -1 with the error queued (name: the command, lower
 * case). */
int arg_pairs_check(conn *c, const char *name, unsigned argc, const size_t *argl);
void reply_pc_error(conn *c, int rc);
/* The reply of a write made only when a key is absent (SETNX, MSETNX): 1
 * when rc is 0, 0 on PC_EEXIST, else the error. */
void reply_nx(conn *c, int rc);
/* The persistence whose journal health explains PC_EREFUSED replies (set
 * once before the workers fork; NULL = none). */
void reply_set_persist(const pc_persist *p);
/* The command table as one sorted list (for COMMAND). */
unsigned cmd_all(const cmd_def **out, unsigned cap);
/* The i-th command of that list (its commandstats slot), or NULL. */
const cmd_def *cmd_at(unsigned i);
/* cmd_info.c: counts an error reply under its code (errorstats). */
void srv_errstat_count(srv_worker *w, const char *code);
/* cmd_client.c: CLIENT, HELLO, AUTH, RESET; the client-list line of c. */
void cmd_client(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl);
void cmd_hello(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl);
void cmd_auth(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl);
void cmd_reset(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl);
/* clients_shm.c: the worker's client table (pcached.h, srv_client_shm) */
int srv_ctab_worker_init(srv_worker *w);         /* clears our table; 0 or -1 */
void srv_ctab_publish(srv_worker *w, conn *c);   /* accepted: takes an entry (or none) */
void srv_ctab_update(conn *c);                   /* name, db or protocol changed */
void srv_ctab_unpublish(srv_worker *w, conn *c); /* closed: frees its entry */
/* One command ran: its index and the time, one relaxed store. */
static inline void srv_ctab_act(conn *c, int64_t now_us, unsigned idx)
{
    if (c->pub != NULL)
        atomic_store_explicit(&c->pub->act, (uint64_t)(now_us / 1000) << 16 | (idx + 1u),
                              memory_order_relaxed);
}
/* Reads entry i of worker slot's table into *out; 1 when it holds a
 * connection (a consistent copy), 0 when free or still torn after retries. */
int srv_ctab_read(const srv *s, unsigned slot, unsigned i, struct srv_client_shm *out);
/* Asks worker slot to close connection id (entry i) and wakes it. */
void srv_ctab_mark_kill(srv *s, unsigned slot, unsigned i, uint64_t id);
/* Closes our connections other workers marked (on the wake and each tick);
 * close is worker.c's conn_close. */
void srv_ctab_reap(srv_worker *w, void (*close)(srv_worker *, conn *));
/* cmd_object.c: MEMORY, OBJECT */
void cmd_memory(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl);
void cmd_object(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl);

#endif /* PCACHED_RESP_H */
